//! The responder half of a QP (brief §4): every Write packet is checked against the PSN
//! window and the memory region its RETH names, placed there whatever the arrival order, and
//! recorded in the tracker; SACKs follow the SACK policy and echo the EV with its verdict;
//! trimmed headers get a NACK; Write-with-Immediate completions are delivered in message order;
//! transport ACKs report completed messages. Control packets leave on the QP's reverse EVs.

use mrc_srv6::wire::Ecn;

use super::frames::{self, Transmit};
use super::requester::VENDOR_REMOTE_ACCESS;
use super::{Control, Qp, SackTrigger, TxOutcome};
use crate::config::EndpointConfig;
use crate::ctx::Ctx;
use crate::reliability::psn::{psn_of, seq_of};
use crate::reliability::{
    AckDecision, AckPolicy, Arrival, DataArrival, ImmStash, PendingImm, Tracker, build_ack_policy,
};
use crate::stats::DropReason;
use crate::time::Instant;
use crate::verbs::{
    QpState, RemoteAccessError, RtrAttr, TransportMode, WcOpcode, WcStatus, WorkCompletion,
};
use crate::wire::{
    AethRepr, Body, CcStateRepr, Frame, MultipathVerdict, NackReason, NethRepr, Opcode, PethRepr,
    SethRepr, Trimmed, WriteHeaders,
};

/// The responder state of a QP in RTR or RTS.
#[derive(Debug)]
pub(crate) struct Responder {
    rq_psn: u32,
    tracker: Tracker,
    imm: ImmStash,
    policy: Box<dyn AckPolicy>,
    /// A coalesced SACK waiting for its deadline.
    pending: Option<SackTrigger>,
    due: Option<Instant>,
    gbn: bool,
    /// Go-back-N: the expected sequence number already NAKed (one NAK per gap).
    naked: Option<u64>,
    /// The last message the cumulative ACK covers, and whether a transport ACK should say so.
    completed_msn: Option<u16>,
    ack_due: bool,
    /// Payload bytes received (CC_STATE `rcvd_bytes`).
    rcvd_bytes: u64,
    mtu: u32,
}

impl Responder {
    pub fn new(a: &RtrAttr, mode: TransportMode, cfg: &EndpointConfig) -> Self {
        Self {
            rq_psn: a.rq_psn & crate::reliability::psn::PSN_MASK,
            tracker: Tracker::new(a.mpr),
            imm: ImmStash::new(a.wimm_limit),
            policy: build_ack_policy(&cfg.ack),
            pending: None,
            due: None,
            gbn: mode == TransportMode::RoceLike,
            naked: None,
            completed_msn: None,
            ack_due: false,
            rcvd_bytes: 0,
            mtu: cfg.payload_mtu,
        }
    }

    pub fn deadline(&self) -> Option<Instant> {
        self.due
    }

    /// The coalesced SACK, if its deadline passed.
    pub fn take_due_sack(&mut self, now: Instant) -> Option<SackTrigger> {
        if self.due.is_some_and(|d| d <= now) {
            self.due = None;
            return self.pending.take();
        }
        None
    }

    pub fn heap_bytes(&self) -> usize {
        self.tracker.heap_bytes() + self.imm.heap_bytes()
    }
}

impl Qp {
    fn receiving(&self, ctx: &mut Ctx<'_>) -> bool {
        if matches!(self.state, QpState::Rtr | QpState::Rts) {
            true
        } else {
            ctx.drop_frame(DropReason::WrongState);
            false
        }
    }

    /// A Write packet (brief §4.1).
    pub(crate) fn on_data(
        &mut self,
        now: Instant,
        port: u8,
        frame: &Frame<'_>,
        w: &WriteHeaders,
        ctx: &mut Ctx<'_>,
    ) {
        if !self.receiving(ctx) {
            return;
        }
        let Some(resp) = self.resp.as_mut() else {
            return;
        };
        let bth = &frame.bth;
        let tx_ts = w.tseth.map_or(0, |t| t.tx_timestamp);
        let Some(seq) = seq_of(resp.rq_psn, bth.psn, resp.tracker.cack()) else {
            ctx.drop_frame(DropReason::OutOfWindow);
            self.stats.out_of_window += 1;
            return;
        };
        let trigger = SackTrigger {
            seq,
            entropy: frame.entropy,
            verdict: MultipathVerdict::None,
            tx_ts,
            plane: port,
            probe: false,
        };
        match resp.tracker.classify(seq) {
            Arrival::Duplicate => {
                ctx.drop_frame(DropReason::Duplicate);
                self.stats.duplicates += 1;
                if bth.rtx {
                    // The peer resent what we have: our SACKs on this plane are not getting
                    // through (brief §3.9), try another reverse EV.
                    if let Some(p) = self.paths.as_mut() {
                        p.table.rotate_reverse(usize::from(port), &mut self.rng);
                    }
                }
                self.queue_sack(trigger, ctx);
                return;
            }
            Arrival::OutOfWindow => {
                ctx.drop_frame(DropReason::OutOfWindow);
                self.stats.out_of_window += 1;
                self.queue_nack(bth.psn, NackReason::PsnOutOfWindow, 0, trigger, ctx);
                return;
            }
            Arrival::New => {}
        }
        if resp.gbn && seq != resp.tracker.cack() {
            // Go-back-N (RoCE-like): out-of-order packets are dropped and the expected PSN
            // NAKed, once per gap.
            self.stats.out_of_sequence += 1;
            let expected = resp.tracker.cack();
            if resp.naked != Some(expected) {
                resp.naked = Some(expected);
                let psn = psn_of(resp.rq_psn, expected);
                self.queue_nack(psn, NackReason::PsnOutOfWindow, 0, trigger, ctx);
            }
            return;
        }
        let payload = frame.payload;
        if payload.len() > resp.mtu as usize {
            ctx.drop_frame(DropReason::Oversize);
            return;
        }
        // MRC 1.0 §7 (brief §4.1): R_Key, bounds and rights before any byte is written.
        if let Err(e) = ctx
            .mrs
            .write_remote(self.attr.pd, w.reth.rkey, w.reth.va, payload)
        {
            ctx.drop_frame(match e {
                RemoteAccessError::BadRkey => DropReason::BadRkey,
                RemoteAccessError::OutOfBounds => DropReason::OutOfBounds,
                RemoteAccessError::NoAccess => DropReason::NoAccess,
            });
            self.stats.access_errors += 1;
            self.queue_nack(
                bth.psn,
                NackReason::UnexpectedEvent,
                VENDOR_REMOTE_ACCESS,
                trigger,
                ctx,
            );
            return;
        }
        let Some(resp) = self.resp.as_mut() else {
            return;
        };
        if let Some(imm) = w.immdt {
            let pending = PendingImm {
                last_seq: seq,
                imm: imm.imm,
                len: w.reth.dma_len,
            };
            if resp.imm.insert(w.meth.rqmsn, pending).is_err() {
                ctx.drop_frame(DropReason::ImmLimit);
                self.fail(WcStatus::RemoteOperationalError, None, ctx);
                return;
            }
        }
        let ce = frame.ecn() == Ecn::Ce;
        let ooo_before = resp.tracker.out_of_order();
        let moved = resp
            .tracker
            .record(seq, w.meth.msn, bth.opcode.ends_message());
        resp.rcvd_bytes += payload.len() as u64;
        self.stats.data_packets_received += 1;
        self.stats.data_bytes_placed += payload.len() as u64;
        self.stats.ecn_marked_received += u64::from(ce);
        if let Some(p) = ctx.plane(port) {
            p.packets_received += 1;
            p.bytes_received += payload.len() as u64;
        }
        if moved > 0
            && let Some((msn, ends)) = resp.tracker.last_acked_packet()
        {
            let done = if ends { msn } else { msn.wrapping_sub(1) };
            if resp.completed_msn != Some(done) {
                resp.completed_msn = Some(done);
                resp.ack_due = true;
            }
        }
        let arrival = DataArrival {
            bytes: payload.len() as u32,
            ecn_ce: ce,
            retransmission: bth.rtx,
            ack_req: bth.ack_req,
            duplicate: false,
            new_hole: ooo_before == 0 && resp.tracker.out_of_order() > 0,
            filled_hole: moved > 1,
        };
        let trigger = SackTrigger {
            verdict: if ce {
                MultipathVerdict::SkipOnce
            } else {
                MultipathVerdict::None
            },
            ..trigger
        };
        match resp.policy.on_data(now, &arrival) {
            AckDecision::Now => self.queue_sack(trigger, ctx),
            AckDecision::By(t) => {
                resp.pending = Some(trigger);
                // Only a new (or earlier) SACK deadline needs the endpoint to look again.
                if resp.due.is_none_or(|d| t < d) {
                    resp.due = Some(t);
                    self.timers_dirty = true;
                }
            }
        }
        if moved > 0 {
            self.deliver_immediates(ctx);
        }
    }

    /// A trimmed Write header (brief §4.3): NACK it, never place it.
    pub(crate) fn on_trimmed(
        &mut self,
        port: u8,
        frame: &Frame<'_>,
        how: Trimmed,
        ctx: &mut Ctx<'_>,
    ) {
        if !self.receiving(ctx) {
            return;
        }
        let Some(resp) = self.resp.as_mut() else {
            return;
        };
        if !frame.bth.opcode.is_write() {
            ctx.drop_frame(DropReason::TrimmedUnusable);
            return;
        }
        let Some(seq) = seq_of(resp.rq_psn, frame.bth.psn, resp.tracker.cack()) else {
            ctx.drop_frame(DropReason::OutOfWindow);
            return;
        };
        self.stats.trimmed_received += 1;
        if let Some(p) = ctx.plane(port) {
            p.trims += 1;
        }
        match resp.tracker.classify(seq) {
            Arrival::Duplicate => {
                ctx.drop_frame(DropReason::Duplicate);
                return;
            }
            Arrival::OutOfWindow => {
                ctx.drop_frame(DropReason::OutOfWindow);
                return;
            }
            Arrival::New => {}
        }
        let tx_ts = match frame.body {
            Some(Body::Write(w)) => w.tseth.map_or(0, |t| t.tx_timestamp),
            _ => 0,
        };
        let trigger = SackTrigger {
            seq,
            entropy: frame.entropy,
            verdict: MultipathVerdict::None,
            tx_ts,
            plane: port,
            probe: false,
        };
        if resp.gbn {
            let expected = resp.tracker.cack();
            if resp.naked != Some(expected) {
                resp.naked = Some(expected);
                let psn = psn_of(resp.rq_psn, expected);
                self.queue_nack(psn, NackReason::PsnOutOfWindow, 0, trigger, ctx);
            }
            return;
        }
        let reason = match how {
            Trimmed::InFabric => NackReason::Trimmed,
            Trimmed::LastHop => NackReason::TrimmedLastHop,
        };
        self.queue_nack(frame.bth.psn, reason, 0, trigger, ctx);
    }

    /// A reliability probe (brief §2.11): answered at once with a SACK that says PR.
    pub(crate) fn on_probe(
        &mut self,
        port: u8,
        frame: &Frame<'_>,
        peth: &PethRepr,
        ctx: &mut Ctx<'_>,
    ) {
        if !self.receiving(ctx) {
            return;
        }
        let Some(resp) = self.resp.as_ref() else {
            return;
        };
        self.stats.probes_answered += 1;
        let trigger = SackTrigger {
            seq: resp.tracker.cack(),
            entropy: frame.entropy,
            verdict: if frame.ecn() == Ecn::Ce {
                MultipathVerdict::SkipOnce
            } else {
                MultipathVerdict::None
            },
            tx_ts: peth.tx_timestamp,
            plane: port,
            probe: true,
        };
        self.queue_sack(trigger, ctx);
    }

    /// Queue a SACK now (and the transport ACK if messages completed since the last one).
    pub(crate) fn queue_sack(&mut self, trigger: SackTrigger, ctx: &mut Ctx<'_>) {
        let Some(resp) = self.resp.as_mut() else {
            return;
        };
        resp.policy.on_sack_sent();
        resp.pending = None;
        resp.due = None;
        let ack = resp.ack_due.then_some(resp.completed_msn).flatten();
        resp.ack_due = false;
        self.push_control(Control::Sack(trigger), ctx);
        if let Some(msn) = ack {
            self.push_control(
                Control::Ack {
                    msn,
                    plane: trigger.plane,
                },
                ctx,
            );
        }
    }

    fn queue_nack(
        &mut self,
        psn: u32,
        reason: NackReason,
        vendor_info: u8,
        t: SackTrigger,
        ctx: &mut Ctx<'_>,
    ) {
        let n = &mut self.stats.nacks_sent;
        match reason {
            NackReason::Trimmed => n.trimmed += 1,
            NackReason::TrimmedLastHop => n.trimmed_last_hop += 1,
            NackReason::PsnOutOfWindow => n.out_of_window += 1,
            NackReason::UnexpectedEvent => n.unexpected += 1,
            NackReason::NoBitmap | NackReason::NoPktBuffer | NackReason::NoResource => {
                n.resource += 1;
            }
            NackReason::Unknown(_) => n.other += 1,
        }
        self.push_control(
            Control::Nack {
                psn,
                reason,
                vendor_info,
                entropy: t.entropy,
                tx_ts: t.tx_ts,
                plane: t.plane,
            },
            ctx,
        );
    }

    /// Deliver, in RQMSN order, the immediates whose messages (and all before) are complete
    /// and for which a receive is posted.
    pub(crate) fn deliver_immediates(&mut self, ctx: &mut Ctx<'_>) {
        let Some(resp) = self.resp.as_mut() else {
            return;
        };
        while !self.rq.is_empty() {
            let Some(p) = resp.imm.peek_ready(resp.tracker.cack()) else {
                break;
            };
            resp.imm.pop();
            let Some(wr_id) = self.rq.pop() else {
                break;
            };
            self.stats.imm_delivered += 1;
            ctx.complete(
                self.attr.recv_cq,
                WorkCompletion {
                    wr_id,
                    status: WcStatus::Success,
                    opcode: WcOpcode::RecvRdmaWithImm,
                    qpn: self.qpn,
                    byte_len: p.len,
                    imm_data: Some(p.imm),
                },
            );
        }
    }

    /// The next control packet of this QP, on the reverse EV of its plane (brief §3.9).
    pub(crate) fn poll_control(
        &mut self,
        ready: u32,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> TxOutcome {
        let Some(&c) = self.ctrl.front() else {
            return TxOutcome::Idle;
        };
        let (Some(rtr), Some(paths)) = (self.rtr, self.paths.as_mut()) else {
            self.ctrl.clear();
            return TxOutcome::Idle;
        };
        let planes = ready & ctx.ports_up & self.remote_up;
        let wanted = match c {
            Control::Sack(t) => t.plane,
            Control::Nack { plane, .. } | Control::Ack { plane, .. } => plane,
        };
        let mut ev = None;
        if planes & (1 << wanted) != 0 {
            ev = paths.table.reverse(usize::from(wanted), &mut self.rng);
        }
        let mut rest = planes & !(1 << wanted);
        while ev.is_none() && rest != 0 {
            let p = rest.trailing_zeros();
            rest &= rest - 1;
            ev = paths.table.reverse(p as usize, &mut self.rng);
        }
        let Some(ev) = ev else {
            return TxOutcome::Blocked;
        };
        let cfg = ctx.cfg;
        let resp = self.resp.as_ref();
        let cack = resp.map_or(0, |r| r.tracker.cack());
        let cack_psn = resp.map_or(0, |r| psn_of(r.rq_psn, cack));
        let (opcode, psn, body) = match c {
            Control::Sack(t) => {
                let Some(resp) = resp else {
                    self.ctrl.pop_front();
                    return TxOutcome::Idle;
                };
                (
                    Opcode::Sack,
                    cack_psn,
                    sack_body(resp, &t, self.qpn.0, rtr.dest_qpn.0),
                )
            }
            Control::Nack {
                psn,
                reason,
                vendor_info,
                entropy,
                tx_ts,
                ..
            } => (
                Opcode::Nack,
                psn,
                Body::Nack(NethRepr {
                    hdr_type: 0,
                    next: 0,
                    reason,
                    vendor_info,
                    entropy,
                    spdcid: self.qpn.0 as u16,
                    dpdcid: rtr.dest_qpn.0 as u16,
                    nack_psn: psn,
                    cc_type: 0,
                    cc_flags: 0,
                    tx_timestamp: tx_ts,
                }),
            ),
            Control::Ack { msn, .. } => (
                Opcode::Ack,
                cack_psn,
                Body::Ack(AethRepr::ack(u32::from(msn))),
            ),
        };
        let bth = frames::bth(opcode, rtr.dest_qpn.0, psn);
        let dscp = cfg.wire.dscp.for_packet(opcode, false, true);
        let r = frames::repr(
            cfg,
            paths.table.ev(ev),
            rtr.remote.addr,
            dscp,
            Ecn::NotEct,
            bth,
            body,
        );
        let Ok(t) = frames::emit_control(cfg, r, buf) else {
            debug_assert!(false, "poll_transmit buffer smaller than max_frame_len");
            return TxOutcome::Idle;
        };
        self.ctrl.pop_front();
        match c {
            Control::Sack(_) => self.stats.sacks_sent += 1,
            Control::Ack { .. } => self.stats.acks_sent += 1,
            Control::Nack { .. } => {}
        }
        TxOutcome::Sent(Transmit {
            len: t.len,
            port: t.port,
        })
    }
}

/// The SETH + CC_STATE of a SACK triggered by `t` (brief §2.9).
fn sack_body(resp: &Responder, t: &SackTrigger, spdcid: u32, dpdcid: u32) -> Body {
    let tr = &resp.tracker;
    let cack = tr.cack();
    let hi = tr.highest();
    // The 64-bit bitmap starts at the cumulative ACK, or slides to keep the trigger (and the
    // packets around it) in view when the out-of-order region is wider than 64.
    let mut base = cack;
    if hi > cack + 64 {
        base = t.seq.saturating_sub(32).max(cack).min(hi - 64);
    }
    base = base.min(cack + i16::MAX as u64);
    let bitmap = if resp.gbn { 0 } else { tr.bitmap_at(base) };
    let ack_off =
        (t.seq as i64 - cack as i64).clamp(i64::from(i16::MIN), i64::from(i16::MAX)) as i16;
    Body::Sack {
        seth: SethRepr {
            hdr_type: 0,
            next: 0,
            verdict: t.verdict,
            probe_response: t.probe,
            ack_psn_offset: ack_off,
            entropy: t.entropy,
            spdcid: spdcid as u16,
            dpdcid: dpdcid as u16,
            cack_psn: psn_of(resp.rq_psn, cack),
            cc_type: 0,
            cc_flags: 0,
            mpr: 0,
            sack_offset: (base - cack) as i16,
            sack_bitmap: bitmap,
        },
        cc: CcStateRepr {
            tx_timestamp: t.tx_ts,
            ooo_count: tr.out_of_order().min(0x7fff) as u16,
            restore_cwnd: false,
            rcv_cwnd_pen: 0,
            rcvd_bytes: ((resp.rcvd_bytes / crate::wire::cc_state::RCVD_BYTES_UNIT) & 0x00ff_ffff)
                as u32,
        },
    }
}
