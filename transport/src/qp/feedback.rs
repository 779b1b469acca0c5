//! What comes back to the requester (brief §2.9, §2.10, §2.13, §3.6): SACKs merged into the
//! scoreboard with their RTT sample, EV verdict and probe answer; NACKs; transport ACKs; the
//! losses they reveal; and the completions they allow.

use super::requester::{MAX_RTT_SAMPLE, VENDOR_REMOTE_ACCESS};
use super::{Paths, Qp};
use crate::cc::{AckSample, NackCause, NackSample};
use crate::ctx::Ctx;
use crate::ev::{EvId, Retire};
use crate::event::Event;
use crate::reliability::psn::seq_of;
use crate::reliability::{RetryVerdict, RttEstimator};
use crate::stats::{DropReason, QpStats};
use crate::time::{Duration, Instant};
use crate::verbs::{QpState, WcOpcode, WcStatus, WorkCompletion};
use crate::wire::tseth::{timestamp_elapsed_nanos, timestamp_from_nanos};
use crate::wire::{AethRepr, CcStateRepr, MultipathVerdict, NackReason, NethRepr, SethRepr};

impl Qp {
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
        // A bitmap whose base names a PSN from before the QP started places nothing: moved to
        // the cumulative ACK instead, it would acknowledge packets the peer never named.
        let (base, bitmap) = match seq_of(req.sq_psn, seth.bitmap_base(), cack) {
            Some(base) => (base, seth.sack_bitmap),
            None => (cack, 0),
        };
        // A bitmap that acknowledges PSNs never sent is no responder's: refused whole.
        if sacks_unsent(base, bitmap, req.flight.nxt()) {
            ctx.drop_frame(DropReason::BadAck);
            return;
        }
        self.stats.sacks_received += 1;
        let echoed = paths.table.lookup(seth.entropy);
        if echoed.is_none() {
            ctx.drop_frame(DropReason::UnknownEv);
        }
        let ecn = seth.verdict == MultipathVerdict::SkipOnce;
        let bitmap = if req.gbn { 0 } else { bitmap };
        let Paths {
            table, selector, ..
        } = paths;
        let outcome = req.flight.on_sack(cack, base, bitmap, &mut |_, e| {
            table.on_delivered(e.ev, e.sent_at, e.tx_count == 1);
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
        // Every path this SACK acknowledges packets of gets a sample (brief §3.6, §3.7: each
        // EV's RTT floors its own loss inference and timeout), the echoed one the exact one.
        let exact = echoed.zip(rtt);
        paths.table.take_rtt_samples(now, exact, MAX_RTT_SAMPLE);
        if let Some(ev) = echoed {
            let s = paths.table.stats_mut(ev);
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
            let table = &paths.table;
            req.flight
                .detect_losses(now, reo, &|ev| table.path_srtt(ev), &mut |seq, e| {
                    lost.push((seq, *e));
                });
            self.stats.retransmits.inferred += req.lost.len() as u64;
            self.handle_losses(now, false, ctx);
        }
        self.complete_sends(ctx);
    }

    /// Packets in `req.lost` were lost without a trim (inferred from holes, or timed out):
    /// brief §3.3, untrimmed loss is a path failure. A timeout retires the EV at once (§3.7:
    /// the strongest evidence); inferred losses only when they repeat on the EV with nothing
    /// delivered between ([`EvTable::on_inferred_loss`]), and a retransmission inferred lost
    /// not at all (its send order says little about its arrival order: it jumped the queue,
    /// often onto a busier path; its timer still catches a path that really dropped it).
    pub(super) fn handle_losses(&mut self, now: Instant, timeout: bool, ctx: &mut Ctx<'_>) {
        let (Some(req), Some(paths)) = (self.req.as_mut(), self.paths.as_mut()) else {
            return;
        };
        for i in 0..req.lost.len() {
            let (_, e) = req.lost[i];
            let plane = paths.table.get(e.ev).map_or(0, |x| x.plane);
            let failed = if timeout {
                let s = paths.table.stats_mut(e.ev);
                s.timeouts += 1;
                self.stats.timeouts += 1;
                if let Some(p) = ctx.plane(plane) {
                    p.timeouts += 1;
                }
                true
            } else {
                if let Some(p) = ctx.plane(plane) {
                    p.inferred_losses += 1;
                }
                paths.table.on_inferred_loss(e.ev, e.tx_count == 1)
            };
            if let Some(slot) = self.cc.and_then(|i| ctx.ccs.get_mut(i)) {
                slot.ctrl.on_loss(now, req.flight.nominal(e.len));
            }
            if failed && !req.gbn {
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
        let msn = aeth.msn as u16;
        // An ACK names a message whose packets all left (brief §2.13); MSNs count posts from
        // zero, so the last such message has MSN `sent_index - 1`. One naming a later
        // message was never sent: forged or corrupt, it must complete nothing.
        let sent = self.sq.sent_index();
        if sent == 0 || (msn.wrapping_sub((sent - 1) as u16) as i16) > 0 {
            ctx.drop_frame(DropReason::BadAck);
            return;
        }
        self.stats.acks_received += 1;
        let Some(req) = self.req.as_mut() else {
            return;
        };
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
    pub(super) fn complete_sends(&mut self, ctx: &mut Ctx<'_>) {
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
}

/// Whether a SACK bitmap (bit i = sequence `base + i`) names anything at or beyond `nxt`.
fn sacks_unsent(base: u64, bitmap: u64, nxt: u64) -> bool {
    match nxt.checked_sub(base) {
        None => bitmap != 0,
        Some(sent) if sent >= 64 => false,
        Some(sent) => bitmap >> sent != 0,
    }
}

/// An untrimmed loss on `ev`: in ECMP mode first ask whether it completes a burst (a remap);
/// otherwise retire the EV (ASSUMED_BAD, replaced from its plane's backups).
pub(super) fn path_failure(
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
