//! The requester half of a QP (brief §3): packets of posted Writes leave with consecutive
//! PSNs, each on an EV the selector picks; SACKs release them and clock congestion control;
//! trims, inferred losses and timeouts resend them on other EVs; silent losses retire EVs and
//! probes bring them back; the long retry budget finally fails the QP.

use mrc_srv6::wire::Ecn;

use super::frames::{self, Transmit};
use super::{Paths, Qp, TxOutcome};
use crate::cc::{AckSample, NackCause, NackSample};
use crate::config::{EndpointConfig, TimerConfig};
use crate::ctx::{CcSlot, Ctx};
use crate::ev::{EvId, EvTable, Retire};
use crate::event::Event;
use crate::reliability::psn::{psn_of, seq_of};
use crate::reliability::{Flight, FlightEntry, RetryBudget, RetryVerdict, RttEstimator};
use crate::stats::{DropReason, QpStats};
use crate::time::{Duration, Instant};
use crate::verbs::{
    QpState, RtsAttr, TransportMode, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};
use crate::wire::tseth::{timestamp_elapsed_nanos, timestamp_from_nanos};
use crate::wire::{
    AethRepr, Body, CcStateRepr, ImmDtRepr, MethRepr, MultipathVerdict, NackReason, NethRepr,
    Opcode, PethRepr, RethRepr, SethRepr, TsethRepr, WriteHeaders,
};

/// Vendor info of a NACK UNEXP_EVENT caused by the memory checks (bad rkey, bounds, access):
/// the requester completes the work request with a remote access error.
pub(crate) const VENDOR_REMOTE_ACCESS: u8 = 1;

/// Echoed timestamps older than this are ignored (the 16-bit, 128 ns field wraps at 8.4 ms).
const MAX_RTT_SAMPLE: Duration = Duration::from_millis(8);

/// The requester state of a QP in RTS.
#[derive(Debug)]
pub(crate) struct Requester {
    sq_psn: u32,
    flight: Flight,
    retry: RetryBudget,
    rtt: RttEstimator,
    timers: TimerConfig,
    gbn: bool,
    wimm_limit: u16,
    imm_outstanding: u16,
    last_rcvd_bytes: Option<u32>,
    /// Nominal bytes of this QP's flight already counted in its controller.
    reported_inflight: u64,
    /// Losses found by one pass of the loss rules, handled after it (preallocated).
    lost: Vec<(u64, FlightEntry)>,
}

impl Requester {
    pub fn new(a: &RtsAttr, mode: TransportMode, cfg: &EndpointConfig) -> Self {
        Self {
            sq_psn: a.sq_psn & crate::reliability::psn::PSN_MASK,
            flight: Flight::new(a.mpr, frames::UDP_PAYLOAD_OVERHEAD + 40),
            retry: RetryBudget::new(a.timeout, a.retry_linear, a.retry_exp),
            rtt: RttEstimator::new(cfg.timers.initial_rtt),
            timers: cfg.timers,
            gbn: mode == TransportMode::RoceLike,
            wimm_limit: a.wimm_limit,
            imm_outstanding: 0,
            last_rcvd_bytes: None,
            reported_inflight: 0,
            lost: Vec::with_capacity(a.mpr as usize),
        }
    }

    pub fn inflight_bytes(&self) -> u64 {
        self.flight.inflight_bytes()
    }

    pub fn has_retransmit(&mut self) -> bool {
        self.flight.has_retransmit()
    }

    /// The reordering window of loss inference: a quarter RTT, never below the configured
    /// minimum (brief §3.6 [I]).
    fn reorder_window(&self) -> Duration {
        Duration(self.rtt.srtt().as_nanos() / 4).max(self.timers.reorder_min)
    }

    fn pto(&self) -> Duration {
        self.rtt
            .pto(self.timers.pto_srtt_multiplier, self.timers.pto_min)
    }

    /// How long a probe may go unanswered.
    fn probe_timeout(&self) -> Duration {
        self.pto()
    }

    pub fn deadline(&mut self, table: &EvTable, now: Instant) -> Option<Instant> {
        let mut d = self.flight.pto_deadline(self.pto());
        if !self.gbn && d.is_some() {
            d = super::min_opt(d, self.flight.loss_deadline(self.reorder_window()));
        }
        d = super::min_opt(d, self.retry.deadline());
        // A probe already due waits for a port, not for a timer.
        let probe = table
            .probe_deadline(self.probe_timeout())
            .filter(|&t| t > now);
        super::min_opt(d, probe)
    }

    /// Bring the controller's in-flight count in line with this QP's flight.
    fn sync_cc(&mut self, slot: &mut CcSlot) {
        let now = self.flight.inflight_bytes();
        slot.inflight = (slot.inflight + now).saturating_sub(self.reported_inflight);
        self.reported_inflight = now;
    }

    pub fn lose_on_plane(&mut self, table: &EvTable, port: u8) -> u32 {
        self.flight
            .lose_where(|ev| table.get(ev).is_some_and(|e| e.plane == port))
    }

    pub fn heap_bytes(&self) -> usize {
        self.flight.heap_bytes() + self.lost.capacity() * size_of::<(u64, FlightEntry)>()
    }
}

impl Qp {
    /// The next data-class packet of this QP: a due probe, a retransmission, or new data.
    pub(crate) fn poll_data(
        &mut self,
        now: Instant,
        ready: u32,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> TxOutcome {
        if self.state != QpState::Rts {
            return TxOutcome::Idle;
        }
        let planes = self.planes(ready, ctx);
        if let Some(t) = self.send_probe(now, planes, buf, ctx) {
            return TxOutcome::Sent(t);
        }
        let (Some(req), Some(slot)) = (self.req.as_mut(), self.cc.and_then(|i| ctx.ccs.get_mut(i)))
        else {
            return TxOutcome::Idle;
        };
        if slot.ctrl.next_send_time(now).is_some_and(|t| t > now) {
            self.paced = true;
            self.timers_dirty = true;
            return TxOutcome::Idle;
        }
        if let Some(seq) = req.flight.next_retransmit() {
            let e = *req
                .flight
                .entry(seq)
                .expect("queued retransmissions are in flight");
            if !slot.window_allows(req.flight.nominal(e.len)) {
                return TxOutcome::Idle;
            }
            return self.send_data(now, planes, Some((seq, e)), buf, ctx);
        }
        let Some((abs, wr, pkt)) = self.sq.next_packet() else {
            return TxOutcome::Idle;
        };
        let len = packet_len(wr.len, pkt, ctx.cfg.payload_mtu);
        let starts_imm = pkt == 0 && wr.imm.is_some();
        if !req.flight.has_room()
            || (starts_imm && req.imm_outstanding >= req.wimm_limit)
            || !slot.window_allows(req.flight.nominal(len))
        {
            return TxOutcome::Idle;
        }
        let _ = abs;
        self.send_data(now, planes, None, buf, ctx)
    }

    /// Send a first transmission (`retx` None) or the retransmission of `retx`.
    fn send_data(
        &mut self,
        now: Instant,
        planes: u32,
        retx: Option<(u64, FlightEntry)>,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> TxOutcome {
        let cfg = ctx.cfg;
        let (Some(req), Some(paths), Some(rtr)) =
            (self.req.as_mut(), self.paths.as_mut(), self.rtr)
        else {
            return TxOutcome::Idle;
        };
        // MRC resends on another EV; a RoCE-like QP keeps its one path.
        let avoid = retx.filter(|_| !req.gbn).map(|(_, e)| e.ev);
        let Some(ev) = paths
            .selector
            .select(&mut paths.table, planes, avoid, &mut self.rng)
        else {
            return TxOutcome::Blocked;
        };
        let (seq, abs, pkt) = if let Some((seq, e)) = retx {
            (seq, e.wr, e.pkt)
        } else {
            let (abs, _, pkt) = self.sq.next_packet().expect("checked by the caller");
            (req.flight.nxt(), abs, pkt)
        };
        let wr = *self.sq.slot(abs);
        let mtu = cfg.payload_mtu;
        let offset = u64::from(pkt) * u64::from(mtu);
        let len = packet_len(wr.len, pkt, mtu);
        let last = pkt + 1 == wr.packets;
        let opcode = match (wr.packets == 1, pkt == 0, last, wr.imm.is_some()) {
            (true, _, _, false) => Opcode::WriteOnly,
            (true, _, _, true) => Opcode::WriteOnlyImm,
            (false, true, _, _) => Opcode::WriteFirst,
            (false, false, true, false) => Opcode::WriteLast,
            (false, false, true, true) => Opcode::WriteLastImm,
            (false, false, false, _) => Opcode::WriteMiddle,
        };
        let rtx = retx.is_some();
        // Ask for a SACK when this is the last packet we can send for now (brief §4.2).
        let ack_req = rtx
            || (last && abs + 1 == self.sq.tail())
            || req.flight.nxt() + 1 - req.flight.una() >= u64::from(self.rts.map_or(0, |a| a.mpr));
        let mut bth = frames::bth(opcode, rtr.dest_qpn.0, psn_of(req.sq_psn, seq));
        bth.ack_req = ack_req;
        bth.rtx = rtx;
        let body = Body::Write(WriteHeaders {
            meth: MethRepr {
                rqmsn: wr.rqmsn,
                msn: wr.msn,
            },
            tseth: cfg.tseth.then(|| TsethRepr::at_nanos(now.as_nanos())),
            reth: RethRepr {
                va: wr.remote_addr.wrapping_add(offset),
                rkey: wr.rkey,
                dma_len: wr.len,
            },
            immdt: if last {
                wr.imm.map(|imm| ImmDtRepr { imm })
            } else {
                None
            },
        });
        let dscp = cfg.wire.dscp.for_packet(opcode, rtx, true);
        let (repr, port) = frames::repr(
            cfg,
            paths.table.ev(ev),
            rtr.remote.addr,
            dscp,
            Ecn::Ect0,
            bth,
            body,
        );
        let Ok(layout) = repr.emit(buf, len as usize, &cfg.wire) else {
            debug_assert!(false, "poll_transmit buffer smaller than max_frame_len");
            return TxOutcome::Idle;
        };
        if let Err(e) = self
            .sq
            .gather(abs, offset, &mut buf[layout.payload.clone()], ctx.mrs)
        {
            let status = match e {
                VerbsError::OutOfBounds => WcStatus::LocalLengthError,
                _ => WcStatus::LocalProtectionError,
            };
            self.fail(status, Some(abs), ctx);
            return TxOutcome::Idle;
        }
        layout.finish(buf, &cfg.wire);
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return TxOutcome::Idle;
        };

        // Commit. A first packet into an empty flight starts its timers.
        self.timers_dirty |= req.flight.is_empty();
        if retx.is_some() {
            req.flight.retransmit(now, seq, ev);
            // Go-back-N resends are counted as they leave (one rewind resends many).
            self.stats.retransmits.rewind += u64::from(req.gbn);
        } else {
            req.flight.send_new(now, abs, pkt, len, ev);
            self.sq.advance(seq);
            if pkt == 0 && wr.imm.is_some() {
                req.imm_outstanding += 1;
            }
            self.stats.data_packets_sent += 1;
            self.stats.data_bytes_sent += u64::from(len);
        }
        req.retry.arm(now);
        let nominal = req.flight.nominal(len);
        let s = paths.table.stats_mut(ev);
        s.packets += 1;
        s.bytes += u64::from(len);
        s.retransmits += u64::from(rtx);
        if let Some(p) = ctx.plane(port) {
            p.packets_sent += 1;
            p.bytes_sent += u64::from(len);
            p.retransmits += u64::from(rtx);
        }
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            slot.ctrl.on_packet_sent(now, nominal as u32);
            req.sync_cc(slot);
        }
        TxOutcome::Sent(Transmit {
            len: layout.len,
            port,
        })
    }

    /// A reliability probe on a retired EV whose turn has come (brief §2.11, §3.3).
    fn send_probe(
        &mut self,
        now: Instant,
        planes: u32,
        buf: &mut [u8],
        ctx: &mut Ctx<'_>,
    ) -> Option<Transmit> {
        let cfg = ctx.cfg;
        let (Some(paths), Some(rtr), Some(req)) =
            (self.paths.as_mut(), self.rtr, self.req.as_ref())
        else {
            return None;
        };
        let ev = paths.table.probe_due(now)?;
        if planes & (1 << paths.table.ev(ev).plane) == 0 {
            return None;
        }
        let peth = PethRepr {
            hdr_type: 0,
            next: 0,
            vendor_info: 0,
            probe_id: ev,
            spdcid: self.qpn.0 as u16,
            dpdcid: rtr.dest_qpn.0 as u16,
            tx_timestamp: timestamp_from_nanos(now.as_nanos()),
            tsr: false,
            format_type: TsethRepr::DEFAULT_FORMAT,
        };
        let bth = frames::bth(
            Opcode::Probe,
            rtr.dest_qpn.0,
            psn_of(req.sq_psn, req.flight.nxt()),
        );
        let dscp = cfg.wire.dscp.for_packet(Opcode::Probe, false, true);
        let r = frames::repr(
            cfg,
            paths.table.ev(ev),
            rtr.remote.addr,
            dscp,
            Ecn::NotEct,
            bth,
            Body::Probe(peth),
        );
        let t = frames::emit_control(cfg, r, buf).ok()?;
        paths.table.on_probe_sent(ev, now);
        self.stats.probes_sent += 1;
        self.timers_dirty = true;
        Some(t)
    }

    /// A SACK (brief §2.9, §3.6): merge it, sample the RTT, apply the EV verdict and the probe
    /// answer, clock congestion control, infer losses, complete messages.
    pub(crate) fn on_sack(
        &mut self,
        now: Instant,
        seth: &SethRepr,
        ccs: &CcStateRepr,
        ctx: &mut Ctx<'_>,
    ) {
        self.timers_dirty = true;
        if self.state != QpState::Rts {
            ctx.drop_frame(DropReason::WrongState);
            return;
        }
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return;
        };
        let Some(cack) =
            seq_of(req.sq_psn, seth.cack_psn, req.flight.una()).filter(|&c| c <= req.flight.nxt())
        else {
            ctx.drop_frame(DropReason::BadAck);
            return;
        };
        let base = seq_of(req.sq_psn, seth.bitmap_base(), cack).unwrap_or(cack);
        self.stats.sacks_received += 1;
        let echoed = paths.table.lookup(seth.entropy);
        if echoed.is_none() {
            ctx.drop_frame(DropReason::UnknownEv);
        }
        let ecn = seth.verdict == MultipathVerdict::SkipOnce;
        let bitmap = if req.gbn { 0 } else { seth.sack_bitmap };
        let Paths {
            table, selector, ..
        } = paths;
        let outcome = req.flight.on_sack(cack, base, bitmap, &mut |_, e| {
            table.stats_mut(e.ev).delivered += 1;
            selector.on_delivered(e.ev, !(ecn && Some(e.ev) == echoed));
        });

        // RTT from the echoed TSETH timestamp: unambiguous even for retransmissions.
        let mut rtt = None;
        if ctx.cfg.tseth && echoed.is_some() {
            let sample = Duration(timestamp_elapsed_nanos(
                ccs.tx_timestamp,
                timestamp_from_nanos(now.as_nanos()),
            ));
            if sample < MAX_RTT_SAMPLE {
                req.rtt.update(sample);
                req.flight.set_rack_rtt(req.rtt.srtt());
                rtt = Some(sample);
                record_rtt(&mut self.stats, &req.rtt);
            }
        }
        if let Some(ev) = echoed {
            let s = paths.table.stats_mut(ev);
            if let Some(r) = rtt {
                s.srtt_ns = if s.srtt_ns == 0 {
                    r.as_nanos()
                } else {
                    (7 * s.srtt_ns + r.as_nanos()) / 8
                };
            }
            match seth.verdict {
                MultipathVerdict::SkipOnce => {
                    s.ecn += 1;
                    self.stats.ecn_echoes += 1;
                    let plane = paths.table.ev(ev).plane;
                    if let Some(p) = ctx.plane(plane) {
                        p.ecn += 1;
                    }
                    // RoCE has no path health: the echo only reaches congestion control.
                    if !req.gbn {
                        paths.table.skip(ev);
                    }
                }
                MultipathVerdict::AlwaysSkip if !req.gbn => {
                    paths.table.retire(ev, now);
                }
                _ => {}
            }
            if seth.probe_response && paths.table.probe_outstanding(ev) {
                self.stats.probes_ok += 1;
                paths.table.on_probe_answer(ev, now);
            }
        }
        if outcome.newly_acked_packets > 0 {
            req.retry.on_progress(now);
        }
        let rcvd_delta = req
            .last_rcvd_bytes
            .map_or(0, |prev| ccs.rcvd_bytes_since(prev));
        req.last_rcvd_bytes = Some(ccs.rcvd_bytes);
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            req.sync_cc(slot);
            slot.ctrl.on_ack(
                now,
                &AckSample {
                    newly_acked_bytes: outcome.newly_acked_bytes,
                    inflight_bytes: slot.inflight,
                    rtt,
                    ecn,
                    rcv_cwnd_pen: ccs.rcv_cwnd_pen,
                    rcvd_bytes_delta: rcvd_delta,
                },
            );
        }
        if !req.gbn {
            let reo = req.reorder_window();
            req.lost.clear();
            let lost = &mut req.lost;
            req.flight
                .detect_losses(now, reo, &mut |seq, e| lost.push((seq, *e)));
            self.stats.retransmits.inferred += req.lost.len() as u64;
            self.handle_losses(now, false, ctx);
        }
        self.complete_sends(ctx);
    }

    /// Packets in `req.lost` were lost without a trim (inferred from holes, or timed out):
    /// their EVs failed (brief §3.3: untrimmed loss is a path failure).
    fn handle_losses(&mut self, now: Instant, timeout: bool, ctx: &mut Ctx<'_>) {
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return;
        };
        for i in 0..req.lost.len() {
            let (_, e) = req.lost[i];
            let plane = paths.table.get(e.ev).map_or(0, |x| x.plane);
            let s = paths.table.stats_mut(e.ev);
            if timeout {
                s.timeouts += 1;
                self.stats.timeouts += 1;
                if let Some(p) = ctx.plane(plane) {
                    p.timeouts += 1;
                }
            } else {
                s.inferred_losses += 1;
            }
            if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
                slot.ctrl.on_loss(now, req.flight.nominal(e.len));
            }
            if !req.gbn {
                path_failure(
                    paths,
                    &mut self.rng,
                    &mut self.stats,
                    self.qpn,
                    e.ev,
                    now,
                    ctx,
                );
            }
        }
        req.lost.clear();
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            req.sync_cc(slot);
        }
    }

    /// A NACK (brief §2.10): trims resend at once on another EV; other retriable reasons
    /// resend and spend the retry budget; UNEXP_EVENT fails the QP.
    pub(crate) fn on_nack(&mut self, now: Instant, neth: &NethRepr, ctx: &mut Ctx<'_>) {
        self.timers_dirty = true;
        if self.state != QpState::Rts {
            ctx.drop_frame(DropReason::WrongState);
            return;
        }
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return;
        };
        let Some(seq) =
            seq_of(req.sq_psn, neth.nack_psn, req.flight.una()).filter(|&s| s < req.flight.nxt())
        else {
            ctx.drop_frame(DropReason::BadAck);
            return;
        };
        if req
            .flight
            .entry(seq)
            .is_none_or(|e| e.state == crate::reliability::EntryState::Acked)
        {
            ctx.drop_frame(DropReason::Stale);
            return;
        }
        let counts = &mut self.stats.nacks_received;
        match neth.reason {
            NackReason::Trimmed => counts.trimmed += 1,
            NackReason::TrimmedLastHop => counts.trimmed_last_hop += 1,
            NackReason::PsnOutOfWindow => counts.out_of_window += 1,
            NackReason::NoBitmap | NackReason::NoPktBuffer | NackReason::NoResource => {
                counts.resource += 1;
            }
            NackReason::UnexpectedEvent => counts.unexpected += 1,
            NackReason::Unknown(_) => counts.other += 1,
        }
        let ev = paths.table.lookup(neth.entropy);
        if let Some(ev) = ev {
            let plane = paths.table.ev(ev).plane;
            let s = paths.table.stats_mut(ev);
            let trim = matches!(
                neth.reason,
                NackReason::Trimmed | NackReason::TrimmedLastHop
            );
            if trim {
                s.trims += 1;
            } else {
                s.nacks += 1;
            }
            if let Some(p) = ctx.plane(plane) {
                p.trims += u64::from(trim);
                p.nacks += u64::from(!trim);
            }
            if neth.reason.implicates_path() && !req.gbn {
                paths.table.skip(ev);
            }
        }
        if !neth.reason.retriable() {
            let status = if neth.vendor_info == VENDOR_REMOTE_ACCESS {
                WcStatus::RemoteAccessError
            } else {
                WcStatus::RemoteOperationalError
            };
            let wr = req.flight.entry(seq).map(|e| e.wr);
            self.fail(status, wr, ctx);
            return;
        }
        let cause = match neth.reason {
            NackReason::Trimmed => NackCause::Trimmed,
            NackReason::TrimmedLastHop => NackCause::TrimmedLastHop,
            _ => NackCause::Other,
        };
        let bytes = req
            .flight
            .entry(seq)
            .map_or(0, |e| req.flight.nominal(e.len));
        let lost = if req.gbn {
            let before = req.flight.inflight_bytes();
            req.flight.rewind(seq);
            before != req.flight.inflight_bytes()
        } else {
            req.flight.mark_lost(seq)
        };
        if lost && !req.gbn {
            match cause {
                NackCause::Other => self.stats.retransmits.nack += 1,
                _ => self.stats.retransmits.trim += 1,
            }
        }
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            req.sync_cc(slot);
            if lost {
                let rtt = ctx.cfg.tseth.then(|| {
                    Duration(timestamp_elapsed_nanos(
                        neth.tx_timestamp,
                        timestamp_from_nanos(now.as_nanos()),
                    ))
                });
                slot.ctrl.on_nack(
                    now,
                    &NackSample {
                        bytes,
                        inflight_bytes: slot.inflight,
                        cause,
                        rtt: rtt.filter(|r| *r < MAX_RTT_SAMPLE),
                    },
                );
            }
        }
        if cause == NackCause::Other && lost && req.retry.on_expiry(now) == RetryVerdict::Exhausted
        {
            self.fail(WcStatus::RetryExceeded, None, ctx);
        }
    }

    /// A transport ACK (brief §2.13): every message up to its MSN is complete at the peer.
    pub(crate) fn on_ack(&mut self, aeth: &AethRepr, ctx: &mut Ctx<'_>) {
        self.timers_dirty = true;
        if self.state != QpState::Rts {
            ctx.drop_frame(DropReason::WrongState);
            return;
        }
        self.stats.acks_received += 1;
        let Some(req) = self.req.as_mut() else {
            return;
        };
        let msn = aeth.msn as u16;
        let mut end = None;
        let mut abs = self.sq.head();
        while abs < self.sq.sent_index() {
            let wr = self.sq.slot(abs);
            if (msn.wrapping_sub(wr.msn) as i16) < 0 {
                break;
            }
            end = Some(wr.end_seq());
            abs += 1;
        }
        let Some(end) = end else {
            return;
        };
        let Some(paths) = self.paths.as_mut() else {
            return;
        };
        let table = &mut paths.table;
        req.flight.on_sack(end, end, 0, &mut |_, e| {
            table.stats_mut(e.ev).delivered += 1;
        });
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            req.sync_cc(slot);
        }
        self.complete_sends(ctx);
    }

    /// Complete, in order, the work requests whose packets are all acknowledged.
    fn complete_sends(&mut self, ctx: &mut Ctx<'_>) {
        let Some(req) = self.req.as_mut() else {
            return;
        };
        while let Some(wr) = self.sq.head_sent() {
            if wr.end_seq() > req.flight.una() {
                break;
            }
            let wr = self.sq.pop_head();
            if wr.imm.is_some() {
                req.imm_outstanding = req.imm_outstanding.saturating_sub(1);
            }
            self.stats.messages_completed += 1;
            if wr.signaled {
                ctx.complete(
                    self.attr.send_cq,
                    WorkCompletion {
                        wr_id: wr.wr_id,
                        status: WcStatus::Success,
                        opcode: WcOpcode::RdmaWrite,
                        qpn: self.qpn,
                        byte_len: wr.len,
                        imm_data: None,
                    },
                );
            }
        }
        if req.flight.is_empty() {
            req.retry.disarm();
        }
    }

    /// Requester timers: probe answers overdue, RACK, per-packet timeouts, the retry budget.
    pub(crate) fn requester_timeout(&mut self, now: Instant, ctx: &mut Ctx<'_>) {
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return;
        };
        let failed = paths.table.on_probe_timeouts(now, req.probe_timeout());
        self.stats.probes_failed += u64::from(failed);
        req.lost.clear();
        if !req.gbn {
            let reo = req.reorder_window();
            let lost = &mut req.lost;
            req.flight
                .detect_losses(now, reo, &mut |seq, e| lost.push((seq, *e)));
            self.stats.retransmits.inferred += req.lost.len() as u64;
            self.handle_losses(now, false, ctx);
        }
        let Some(req) = self.req.as_mut() else {
            return;
        };
        let pto = req.pto();
        let lost = &mut req.lost;
        req.flight
            .on_pto(now, pto, &mut |seq, e| lost.push((seq, *e)));
        if !req.lost.is_empty() {
            if req.gbn {
                let una = req.flight.una();
                req.flight.rewind(una);
            } else {
                self.stats.retransmits.timeout += req.lost.len() as u64;
            }
            self.handle_losses(now, true, ctx);
        }
        let Some(req) = self.req.as_mut() else {
            return;
        };
        if req.retry.deadline().is_some_and(|d| d <= now) {
            self.stats.retry_timeouts += 1;
            match req.retry.on_expiry(now) {
                RetryVerdict::Exhausted => {
                    self.fail(WcStatus::RetryExceeded, None, ctx);
                    return;
                }
                RetryVerdict::Retry => {
                    if let Some(seq) = req.flight.oldest_in_flight() {
                        req.flight.mark_lost(seq);
                        self.stats.retransmits.retry += 1;
                    }
                }
            }
        }
        if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
            req.sync_cc(slot);
        }
    }
}

/// An untrimmed loss on `ev`: in ECMP mode first ask whether it completes a burst (a remap);
/// otherwise retire the EV (ASSUMED_BAD, replaced from its plane's backups).
fn path_failure(
    paths: &mut Paths,
    rng: &mut crate::rng::Rng,
    stats: &mut QpStats,
    qpn: crate::verbs::Qpn,
    ev: EvId,
    now: Instant,
    ctx: &mut Ctx<'_>,
) {
    if let Some(remap) = paths.remap.as_mut()
        && remap.on_failure(now, ev)
    {
        paths.table.rerandomize(rng);
        stats.remaps += 1;
        ctx.events.push(Event::EcmpRemap { qpn });
        return;
    }
    let _: Retire = paths.table.retire(ev, now);
}

fn record_rtt(stats: &mut QpStats, rtt: &RttEstimator) {
    stats.srtt_ns = rtt.srtt().as_nanos();
    stats.min_rtt_ns = rtt.min().as_nanos();
    stats.rtt_samples = rtt.samples();
}

/// Payload bytes of packet `pkt` of a `len`-byte message.
fn packet_len(len: u32, pkt: u32, mtu: u32) -> u16 {
    len.saturating_sub(pkt.saturating_mul(mtu)).min(mtu) as u16
}
