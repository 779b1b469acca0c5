//! The responder half of a QP (brief §4): every Write packet is checked against the PSN
//! window and the memory region its RETH names, placed there whatever the arrival order, and
//! recorded in the tracker; SACKs follow the SACK policy and echo the EV with its verdict;
//! trimmed headers get a NACK; Write-with-Immediate completions are delivered in message order;
//! transport ACKs report completed messages. Control packets leave on the QP's reverse EVs.

use mrc_srv6::wire::Ecn;

use super::control::{Control, SackTrigger};
use super::requester::VENDOR_REMOTE_ACCESS;
use super::{Qp, recv_completion};
use crate::config::EndpointConfig;
use crate::ctx::Ctx;
use crate::ev::EvId;
use crate::reliability::psn::{psn_of, seq_of};
use crate::reliability::{
    AckDecision, AckPolicy, Arrival, DataArrival, ImmStash, PendingImm, SackPolicy, Tracker,
};
use crate::stats::DropReason;
use crate::time::Instant;
use crate::verbs::{QpState, RemoteAccessError, RtrAttr, TransportMode, WcStatus};
use crate::wire::frame::DataFrame;
use crate::wire::{
    Body, BthRepr, CcStateRepr, Frame, MultipathVerdict, NackReason, PethRepr, SethRepr, Trimmed,
};

/// The responder state of a QP in RTR or RTS.
#[derive(Debug)]
pub(crate) struct Responder {
    rq_psn: u32,
    tracker: Tracker,
    imm: ImmStash,
    /// Statically dispatched (issue #13).
    policy: SackPolicy,
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
    /// Dynamic MPR (brief §3.5): the MPR every SACK advertises, in PSNs, at most the RTR MPR
    /// that sizes the tracker (`None`: dynamic MPR off, SACKs carry 0).
    mpr_now: Option<u32>,
    /// The EV the latest SACK left on (brief §3.9: when the peer resends what we had, it is
    /// that SACK, the last word, that did not get through).
    pub(super) last_sack_ev: Option<EvId>,
}

impl Responder {
    pub fn new(a: &RtrAttr, mode: TransportMode, cfg: &EndpointConfig) -> Self {
        Self {
            rq_psn: a.rq_psn & crate::reliability::psn::PSN_MASK,
            tracker: Tracker::new(a.mpr),
            imm: ImmStash::new(a.wimm_limit),
            policy: SackPolicy::new(&cfg.ack),
            pending: None,
            due: None,
            gbn: mode == TransportMode::RoceLike,
            naked: None,
            completed_msn: None,
            ack_due: false,
            rcvd_bytes: 0,
            mpr_now: a.dynamic_mpr.then_some(a.mpr),
            last_sack_ev: None,
        }
    }

    /// The SETH MPR field of this responder's SACKs (brief §2.9, §3.5).
    pub fn mpr_field(&self) -> u8 {
        self.mpr_now.map_or(0, crate::wire::seth::mpr_field)
    }

    /// The MPR its SACKs advertise, in PSNs (0: dynamic MPR off).
    pub fn mpr_advertised(&self) -> u64 {
        u64::from(self.mpr_field()) * u64::from(crate::wire::seth::MPR_UNIT_PSNS)
    }

    /// Advertise `psns` from the next SACK on (dynamic MPR on; checked by the caller). The
    /// tracker keeps accepting its RTR window: packets the requester sent before it heard of a
    /// shrink are still placed.
    pub fn set_mpr(&mut self, psns: u32) {
        if self.mpr_now.is_some() {
            self.mpr_now = Some(psns);
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

    pub fn rq_psn(&self) -> u32 {
        self.rq_psn
    }

    /// The cumulative ACK: every sequence number below it arrived.
    pub fn cack(&self) -> u64 {
        self.tracker.cack()
    }
}

impl Qp {
    /// The responder of a QP in RTR or RTS; anything else drops what arrives.
    fn receiving(&mut self, ctx: &mut Ctx<'_>) -> Option<&mut Responder> {
        if let (QpState::Rtr | QpState::Rts, Some(c)) = (self.state, self.conn.as_mut()) {
            return Some(&mut c.resp);
        }
        ctx.drop_frame(DropReason::WrongState);
        None
    }

    /// A Write packet (brief §4.1): its BTH and what else the responder reads of it, from
    /// the lean receive path or from a general [`Frame`] (issue #13).
    pub(crate) fn on_data(
        &mut self,
        now: Instant,
        port: u8,
        bth: &BthRepr,
        frame: &DataFrame<'_>,
        ctx: &mut Ctx<'_>,
    ) {
        let Some(resp) = self.receiving(ctx) else {
            return;
        };
        let w = &frame.write;
        let Some(seq) = seq_of(resp.rq_psn, bth.psn, resp.tracker.cack()) else {
            ctx.drop_frame(DropReason::OutOfWindow);
            self.stats.out_of_window += 1;
            return;
        };
        let trigger = SackTrigger {
            seq,
            entropy: frame.entropy,
            verdict: MultipathVerdict::None,
            tx_ts: w.tseth.map_or(0, |t| t.tx_timestamp),
            plane: port,
            probe: false,
        };
        if !self.accept_new(seq, bth.psn, port, bth.rtx, trigger, ctx) {
            return;
        }
        let payload = frame.payload;
        if payload.len() > ctx.cfg.payload_mtu as usize {
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
            let reason = NackReason::UnexpectedEvent;
            self.queue_nack(bth.psn, reason, VENDOR_REMOTE_ACCESS, trigger, ctx);
            return;
        }
        let Some(resp) = self.conn.as_mut().map(|c| &mut c.resp) else {
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
        let ce = frame.ecn == Ecn::Ce;
        let (arrival, moved) = resp.place(seq, w.meth.msn, bth, ce, payload.len());
        self.stats.data_packets_received += 1;
        self.stats.data_bytes_placed += payload.len() as u64;
        self.stats.ecn_marked_received += u64::from(ce);
        if let Some(p) = ctx.plane(port) {
            p.packets_received += 1;
            p.bytes_received += payload.len() as u64;
        }
        let verdict = if ce {
            MultipathVerdict::SkipOnce
        } else {
            MultipathVerdict::None
        };
        match resp.policy.on_data(now, &arrival) {
            AckDecision::Now => self.queue_sack(SackTrigger { verdict, ..trigger }, ctx),
            AckDecision::By(t) => {
                // Written field by field where it lives (a copy of a trigger just built
                // piecewise on the stack stalled on store forwarding: issue #13).
                resp.pending = Some(SackTrigger {
                    seq,
                    entropy: frame.entropy,
                    verdict,
                    tx_ts: trigger.tx_ts,
                    plane: port,
                    probe: false,
                });
                // Only a new (or earlier) SACK deadline needs the endpoint to look again.
                if resp.due.is_none_or(|d| t < d) {
                    resp.due = Some(t);
                    self.refresh_timers(ctx);
                }
            }
        }
        if moved > 0 && !self.rq.is_empty() {
            self.deliver_immediates(ctx);
        }
    }

    /// Whether the Write packet `seq` is new (brief §4.1): a duplicate is SACKed again (and,
    /// if the peer resent it, our latest SACK did not get through: brief §3.9, the EV it
    /// left on carries no more control packets); one beyond the window is NACKed; go-back-N
    /// takes only the expected one and NAKs the gap once.
    fn accept_new(
        &mut self,
        seq: u64,
        psn: u32,
        port: u8,
        rtx: bool,
        trigger: SackTrigger,
        ctx: &mut Ctx<'_>,
    ) -> bool {
        let Self {
            conn: Some(c),
            stats,
            rng,
            ..
        } = self
        else {
            return false;
        };
        let resp = &mut c.resp;
        match resp.tracker.classify(seq) {
            Arrival::Duplicate => {
                ctx.drop_frame(DropReason::Duplicate);
                stats.duplicates += 1;
                if rtx {
                    match resp.last_sack_ev {
                        Some(ev) => c.paths.table.reverse_failed(ev),
                        None => c.paths.table.rotate_reverse(usize::from(port), rng),
                    }
                }
                self.queue_sack(trigger, ctx);
                return false;
            }
            Arrival::OutOfWindow => {
                ctx.drop_frame(DropReason::OutOfWindow);
                stats.out_of_window += 1;
                self.queue_nack(psn, NackReason::PsnOutOfWindow, 0, trigger, ctx);
                return false;
            }
            Arrival::New => {}
        }
        if resp.gbn && seq != resp.tracker.cack() {
            // Go-back-N (RoCE-like): out-of-order packets are dropped and the expected PSN
            // NAKed, once per gap.
            stats.out_of_sequence += 1;
            self.nak_gap(trigger, ctx);
            return false;
        }
        true
    }

    /// Go-back-N: NAK the expected PSN, once per gap.
    fn nak_gap(&mut self, trigger: SackTrigger, ctx: &mut Ctx<'_>) {
        let Some(resp) = self.conn.as_mut().map(|c| &mut c.resp) else {
            return;
        };
        let expected = resp.tracker.cack();
        if resp.naked != Some(expected) {
            resp.naked = Some(expected);
            let psn = psn_of(resp.rq_psn, expected);
            self.queue_nack(psn, NackReason::PsnOutOfWindow, 0, trigger, ctx);
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
        let Some(resp) = self.receiving(ctx) else {
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
        let (arrival, gbn) = (resp.tracker.classify(seq), resp.gbn);
        self.stats.trimmed_received += 1;
        if let Some(p) = ctx.plane(port) {
            p.trims += 1;
        }
        match arrival {
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
        if gbn {
            self.nak_gap(trigger, ctx);
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
        let Some(resp) = self.receiving(ctx) else {
            return;
        };
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
        self.stats.probes_answered += 1;
        self.queue_sack(trigger, ctx);
    }

    /// Queue a SACK now (and the transport ACK if messages completed since the last one).
    #[inline(always)]
    pub(crate) fn queue_sack(&mut self, trigger: SackTrigger, ctx: &mut Ctx<'_>) {
        let Some(c) = self.conn.as_mut() else {
            return;
        };
        let resp = &mut c.resp;
        resp.policy.on_sack_sent();
        resp.pending = None;
        resp.due = None;
        let ack = resp.ack_due.then_some(resp.completed_msn).flatten();
        resp.ack_due = false;
        c.ctrl.push(Control::Sack(trigger), ctx);
        if let Some(msn) = ack {
            let plane = trigger.plane;
            c.ctrl.push(Control::Ack { msn, plane }, ctx);
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
        self.stats.nacks_sent.count(reason);
        let Some(c) = self.conn.as_mut() else {
            return;
        };
        let nack = Control::Nack {
            psn,
            reason,
            vendor_info,
            entropy: t.entropy,
            tx_ts: t.tx_ts,
            plane: t.plane,
        };
        c.ctrl.push(nack, ctx);
    }

    /// Deliver, in RQMSN order, the immediates whose messages (and all before) are complete
    /// and for which a receive is posted.
    pub(crate) fn deliver_immediates(&mut self, ctx: &mut Ctx<'_>) {
        let Some(resp) = self.conn.as_mut().map(|c| &mut c.resp) else {
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
            let wc = recv_completion(self.qpn, wr_id, WcStatus::Success, p.len, Some(p.imm));
            ctx.complete(self.attr.recv_cq, wc);
        }
    }
}

impl Responder {
    /// Record a new Write packet placed (brief §4.1): what the SACK policy sees of it, and how
    /// far the cumulative ACK moved. A message completed since the last ACK is reported by the
    /// next one (brief §2.13). Inlined: its result returned through memory, written field by
    /// field and read back whole, stalled the caller on store forwarding (issue #13).
    #[inline(always)]
    fn place(
        &mut self,
        seq: u64,
        msn: u16,
        bth: &BthRepr,
        ce: bool,
        bytes: usize,
    ) -> (DataArrival, u64) {
        let ooo_before = self.tracker.out_of_order();
        let moved = self.tracker.record(seq, msn, bth.opcode.ends_message());
        self.rcvd_bytes += bytes as u64;
        if moved > 0
            && let Some((msn, ends)) = self.tracker.last_acked_packet()
        {
            let done = if ends { msn } else { msn.wrapping_sub(1) };
            if self.completed_msn != Some(done) {
                self.completed_msn = Some(done);
                self.ack_due = true;
            }
        }
        let arrival = DataArrival {
            bytes: bytes as u32,
            ecn_ce: ce,
            retransmission: bth.rtx,
            ack_req: bth.ack_req,
            duplicate: false,
            new_hole: ooo_before == 0 && self.tracker.out_of_order() > 0,
            filled_hole: moved > 1,
        };
        (arrival, moved)
    }

    /// The SETH + CC_STATE of a SACK triggered by `t` (brief §2.9).
    pub fn sack_body(&self, t: &SackTrigger, spdcid: u32, dpdcid: u32) -> Body {
        let tr = &self.tracker;
        let cack = tr.cack();
        let hi = tr.highest();
        // The 64-bit bitmap starts at the cumulative ACK, or slides to keep the trigger (and the
        // packets around it) in view when the out-of-order region is wider than 64.
        let mut base = cack;
        if hi > cack + 64 {
            base = t.seq.saturating_sub(32).max(cack).min(hi - 64);
        }
        base = base.min(cack + i16::MAX as u64);
        let bitmap = if self.gbn { 0 } else { tr.bitmap_at(base) };
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
                cack_psn: psn_of(self.rq_psn, cack),
                cc_type: 0,
                cc_flags: 0,
                mpr: self.mpr_field(),
                sack_offset: (base - cack) as i16,
                sack_bitmap: bitmap,
            },
            cc: CcStateRepr {
                tx_timestamp: t.tx_ts,
                ooo_count: tr.out_of_order().min(0x7fff) as u16,
                restore_cwnd: false,
                rcv_cwnd_pen: 0,
                rcvd_bytes: ((self.rcvd_bytes / crate::wire::cc_state::RCVD_BYTES_UNIT)
                    & 0x00ff_ffff) as u32,
            },
        }
    }
}
