//! What comes back to the requester (brief §2.9, §2.10, §2.13, §3.6): SACKs merged into the
//! scoreboard with their RTT sample, EV verdict and probe answer; NACKs; transport ACKs; the
//! losses they reveal; and the completions they allow. Each handler is a short sequence of
//! named steps: what a step does to an EV is an [`EvEvent`] for the health table
//! (`ev/health.rs`), what it does to the flight is the flight's and the loss rules' business
//! (`reliability/`).

use super::requester::{MAX_RTT_SAMPLE, Requester, VENDOR_REMOTE_ACCESS};
use super::{Parts, Qp, send_completion};
use crate::cc::{AckSample, NackCause, NackSample};
use crate::ctx::Ctx;
use crate::ev::{EvEvent, EvId};
use crate::reliability::psn::seq_of;
use crate::reliability::{EntryState, RetryVerdict, SackOutcome};
use crate::stats::{DropReason, QpStats};
use crate::time::{Duration, Instant};
use crate::verbs::{QpState, WcStatus};
use crate::wire::tseth::{timestamp_elapsed_nanos, timestamp_from_nanos};
use crate::wire::{AethRepr, CcStateRepr, MultipathVerdict, NackReason, NethRepr, SethRepr};

/// The packets a SACK names, checked against the flight.
#[derive(Debug, Clone, Copy)]
struct SackRange {
    cack: u64,
    base: u64,
    bitmap: u64,
}

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
        if self.sending(ctx) {
            self.sack(now, seth, ccs, ctx);
        }
        self.refresh_timers(ctx);
    }

    fn sack(&mut self, now: Instant, seth: &SethRepr, ccs: &CcStateRepr, ctx: &mut Ctx<'_>) {
        let Some(Parts { c, stats, rng, .. }) = self.parts() else {
            return;
        };
        let Some(range) = c.req.sack_range(seth) else {
            ctx.drop_frame(DropReason::BadAck);
            return;
        };
        stats.sacks_received += 1;
        let fresh = range.cack >= c.req.flight.una();
        let echoed = c.paths.table.lookup(seth.entropy);
        if echoed.is_none() {
            ctx.drop_frame(DropReason::UnknownEv);
        }
        let ecn = seth.verdict == MultipathVerdict::SkipOnce;
        let acked = c.merge_sack(now, range, echoed, ecn, rng, stats, ctx);
        c.req.on_mpr_advertised(seth.mpr, fresh, stats);
        let rtt = c.req.sample_rtt(now, ccs.tx_timestamp, echoed, stats, ctx);
        c.paths
            .table
            .take_rtt_samples(now, echoed.zip(rtt), MAX_RTT_SAMPLE);
        if let Some(ev) = echoed {
            for event in verdict_events(ev, seth) {
                c.paths.react(event, now, rng, stats, ctx.planes);
            }
        }
        if acked.newly_acked_packets > 0 {
            c.req.retry.on_progress(now);
        }
        c.req
            .tail_on_sack(now, acked.newly_acked_packets > 0, echoed);
        c.req.clock_cc_on_ack(now, &acked, rtt, ecn, ccs, ctx);
        self.infer_losses(now, ctx);
        self.complete_sends(ctx);
    }

    /// A NACK (brief §2.10): trims resend at once on another EV; other retriable reasons
    /// resend and spend the retry budget; UNEXP_EVENT fails the QP.
    pub(crate) fn on_nack(&mut self, now: Instant, neth: &NethRepr, ctx: &mut Ctx<'_>) {
        if self.sending(ctx) {
            self.nack(now, neth, ctx);
        }
        self.refresh_timers(ctx);
    }

    fn nack(&mut self, now: Instant, neth: &NethRepr, ctx: &mut Ctx<'_>) {
        let Some(Parts { c, stats, rng, .. }) = self.parts() else {
            return;
        };
        let Some((seq, wr)) = c.req.nacked_packet(neth, ctx) else {
            return;
        };
        stats.nacks_received.count(neth.reason);
        if let Some(ev) = c.paths.table.lookup(neth.entropy) {
            c.paths
                .react(nack_event(ev, neth.reason), now, rng, stats, ctx.planes);
        }
        if let Some(status) = fatal_status(neth) {
            self.fail(status, Some(wr), ctx);
            return;
        }
        let cause = nack_cause(neth.reason);
        let lost = c.req.resend_nacked(seq, cause, stats);
        c.req.clock_cc_on_nack(now, seq, lost, cause, neth, ctx);
        if cause == NackCause::Other
            && lost
            && c.req.retry.on_expiry(now) == RetryVerdict::Exhausted
        {
            self.fail(WcStatus::RetryExceeded, None, ctx);
        }
    }

    /// A transport ACK (brief §2.13): every message up to its MSN is complete at the peer.
    pub(crate) fn on_ack(&mut self, aeth: &AethRepr, ctx: &mut Ctx<'_>) {
        if self.sending(ctx) {
            self.ack(aeth, ctx);
        }
        self.refresh_timers(ctx);
    }

    fn ack(&mut self, aeth: &AethRepr, ctx: &mut Ctx<'_>) {
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
        let Some(Parts { c, stats, rng, .. }) = self.parts() else {
            return;
        };
        let Some(end) = end else {
            return;
        };
        let (paths, now) = (&mut c.paths, ctx.now);
        c.req.flight.on_sack(now, end, end, 0, &mut |_, e| {
            let event = EvEvent::DeliveredByAck { ev: e.ev };
            paths.react(event, now, rng, stats, ctx.planes);
        });
        if let Some(slot) = ctx.ccs.get_mut(c.req.cc) {
            c.req.sync_cc(slot);
        }
        self.complete_sends(ctx);
    }

    /// Feedback is for a QP in RTS; anything else is dropped.
    fn sending(&self, ctx: &mut Ctx<'_>) -> bool {
        if self.state == QpState::Rts && self.conn.is_some() {
            return true;
        }
        ctx.drop_frame(DropReason::WrongState);
        false
    }

    /// Complete, in order, the work requests whose packets are all acknowledged.
    pub(super) fn complete_sends(&mut self, ctx: &mut Ctx<'_>) {
        let Some(req) = self.conn.as_mut().map(|c| &mut c.req) else {
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
                let wc = send_completion(self.qpn, wr.wr_id, WcStatus::Success, wr.len);
                ctx.complete(self.attr.send_cq, wc);
            }
        }
        // Nothing outstanding stops the retry clock; posted work not sent yet keeps it (from
        // the last progress): if it never leaves, it ends in RetryExceeded (MRC brief §3.7).
        if req.flight.is_empty() && self.sq.head() == self.sq.tail() {
            req.retry.disarm();
        }
    }
}

impl super::Connection {
    /// Merge a checked SACK into the flight: each newly acknowledged packet is a delivery on
    /// its EV (clean unless the SACK's ECN echo names that EV).
    #[allow(clippy::too_many_arguments)]
    fn merge_sack(
        &mut self,
        now: Instant,
        r: SackRange,
        echoed: Option<EvId>,
        ecn: bool,
        rng: &mut crate::rng::Rng,
        stats: &mut QpStats,
        ctx: &mut Ctx<'_>,
    ) -> SackOutcome {
        let paths = &mut self.paths;
        let bitmap = if self.req.gbn { 0 } else { r.bitmap };
        self.req
            .flight
            .on_sack(now, r.cack, r.base, bitmap, &mut |_, e| {
                let event = EvEvent::Delivered {
                    ev: e.ev,
                    tx_id: e.tx_id,
                    sent_at: e.sent_at,
                    first: e.tx_count == 1,
                    clean: !(ecn && Some(e.ev) == echoed),
                };
                paths.react(event, now, rng, stats, ctx.planes);
            })
    }
}

impl Requester {
    /// The packets a SACK names, if it is one of this flight's: a cumulative ACK within what
    /// was sent, and a bitmap naming nothing unsent.
    fn sack_range(&self, seth: &SethRepr) -> Option<SackRange> {
        let cack = seq_of(self.sq_psn, seth.cack_psn, self.flight.una())
            .filter(|&c| c <= self.flight.nxt())?;
        // A bitmap whose base names a PSN from before the QP started places nothing: moved to
        // the cumulative ACK instead, it would acknowledge packets the peer never named.
        let (base, bitmap) = match seq_of(self.sq_psn, seth.bitmap_base(), cack) {
            Some(base) => (base, seth.sack_bitmap),
            None => (cack, 0),
        };
        // A bitmap that acknowledges PSNs never sent is no responder's: refused whole.
        (!sacks_unsent(base, bitmap, self.flight.nxt())).then_some(SackRange { cack, base, bitmap })
    }

    /// The QP's RTT from the SACK's echoed TSETH timestamp (unambiguous even for a
    /// retransmission), when TSETH is on and the SACK named one of our EVs.
    fn sample_rtt(
        &mut self,
        now: Instant,
        tx_timestamp: u16,
        echoed: Option<EvId>,
        stats: &mut QpStats,
        ctx: &Ctx<'_>,
    ) -> Option<Duration> {
        if !ctx.cfg.tseth || echoed.is_none() {
            return None;
        }
        let sample = elapsed_since(tx_timestamp, now);
        if sample >= MAX_RTT_SAMPLE {
            return None;
        }
        self.loss.on_rtt_sample(&mut self.flight, sample);
        let rtt = &self.loss.rtt;
        stats.srtt_ns = rtt.srtt().as_nanos();
        stats.min_rtt_ns = rtt.min().as_nanos();
        stats.rtt_samples = rtt.samples();
        Some(sample)
    }

    /// Congestion control's view of a SACK (brief §3.4).
    fn clock_cc_on_ack(
        &mut self,
        now: Instant,
        acked: &SackOutcome,
        rtt: Option<Duration>,
        ecn: bool,
        ccs: &CcStateRepr,
        ctx: &mut Ctx<'_>,
    ) {
        let rcvd_delta = self
            .last_rcvd_bytes
            .map_or(0, |prev| ccs.rcvd_bytes_since(prev));
        self.last_rcvd_bytes = Some(ccs.rcvd_bytes);
        let Some(slot) = ctx.ccs.get_mut(self.cc) else {
            return;
        };
        self.sync_cc(slot);
        let sample = AckSample {
            newly_acked_bytes: acked.newly_acked_bytes,
            inflight_bytes: slot.inflight,
            rtt,
            ecn,
            rcv_cwnd_pen: ccs.rcv_cwnd_pen,
            rcvd_bytes_delta: rcvd_delta,
        };
        slot.ctrl.on_ack(now, &sample);
    }

    /// The packet a NACK names and its work request, if it is still outstanding.
    fn nacked_packet(&self, neth: &NethRepr, ctx: &mut Ctx<'_>) -> Option<(u64, u64)> {
        let Some(seq) = seq_of(self.sq_psn, neth.nack_psn, self.flight.una())
            .filter(|&s| s < self.flight.nxt())
        else {
            ctx.drop_frame(DropReason::BadAck);
            return None;
        };
        match self.flight.entry(seq) {
            Some(e) if e.state != EntryState::Acked => Some((seq, e.wr)),
            _ => {
                ctx.drop_frame(DropReason::Stale);
                None
            }
        }
    }

    /// Resend the NACKed packet `seq` (go-back-N: it and everything after it). `true` when
    /// that took something out of the flight.
    fn resend_nacked(&mut self, seq: u64, cause: NackCause, stats: &mut QpStats) -> bool {
        if self.gbn {
            let before = self.flight.inflight_bytes();
            self.flight.rewind(seq);
            return before != self.flight.inflight_bytes();
        }
        let lost = self.flight.mark_lost(seq);
        if lost {
            match cause {
                NackCause::Other => stats.retransmits.nack += 1,
                _ => stats.retransmits.trim += 1,
            }
        }
        lost
    }

    /// Congestion control's view of a NACK (brief §3.4): a packet it resent (`lost`) is a
    /// congestion signal.
    fn clock_cc_on_nack(
        &mut self,
        now: Instant,
        seq: u64,
        lost: bool,
        cause: NackCause,
        neth: &NethRepr,
        ctx: &mut Ctx<'_>,
    ) {
        let bytes = self
            .flight
            .entry(seq)
            .map_or(0, |e| self.flight.nominal(e.len));
        let Some(slot) = ctx.ccs.get_mut(self.cc) else {
            return;
        };
        self.sync_cc(slot);
        if !lost {
            return;
        }
        let rtt = ctx.cfg.tseth.then(|| elapsed_since(neth.tx_timestamp, now));
        let sample = NackSample {
            bytes,
            inflight_bytes: slot.inflight,
            cause,
            rtt: rtt.filter(|r| *r < MAX_RTT_SAMPLE),
        };
        slot.ctrl.on_nack(now, &sample);
    }
}

/// What a SACK's verdict and PR flag say about the EV it echoes (brief §2.9).
fn verdict_events(ev: EvId, seth: &SethRepr) -> impl Iterator<Item = EvEvent> {
    let verdict = match seth.verdict {
        MultipathVerdict::SkipOnce => Some(EvEvent::EcnEcho { ev }),
        MultipathVerdict::AlwaysSkip => Some(EvEvent::AlwaysSkip { ev }),
        _ => None,
    };
    let probe = seth.probe_response.then_some(EvEvent::ProbeAnswered { ev });
    verdict.into_iter().chain(probe)
}

/// What a NACK says about the EV it names (brief §2.10).
fn nack_event(ev: EvId, reason: NackReason) -> EvEvent {
    match reason {
        NackReason::Trimmed => EvEvent::Trimmed { ev },
        NackReason::TrimmedLastHop => EvEvent::TrimmedLastHop { ev },
        _ => EvEvent::Nacked { ev },
    }
}

/// A NACK that cannot be retried (UNEXP_EVENT, unknown codes: brief §2.10) fails the QP with
/// this status: a remote access error when the responder's memory checks refused the Write.
fn fatal_status(neth: &NethRepr) -> Option<WcStatus> {
    match neth.reason {
        NackReason::UnexpectedEvent | NackReason::Unknown(_) => {
            Some(if neth.vendor_info == VENDOR_REMOTE_ACCESS {
                WcStatus::RemoteAccessError
            } else {
                WcStatus::RemoteOperationalError
            })
        }
        _ => None,
    }
}

/// Congestion control's reading of a NACK reason (brief §3.4).
fn nack_cause(reason: NackReason) -> NackCause {
    match reason {
        NackReason::Trimmed => NackCause::Trimmed,
        NackReason::TrimmedLastHop => NackCause::TrimmedLastHop,
        _ => NackCause::Other,
    }
}

/// Time since a 16-bit TSETH timestamp (brief §2.7).
fn elapsed_since(tx_timestamp: u16, now: Instant) -> Duration {
    Duration(timestamp_elapsed_nanos(
        tx_timestamp,
        timestamp_from_nanos(now.as_nanos()),
    ))
}

/// Whether a SACK bitmap (bit i = sequence `base + i`) names anything at or beyond `nxt`.
fn sacks_unsent(base: u64, bitmap: u64, nxt: u64) -> bool {
    match nxt.checked_sub(base) {
        None => bitmap != 0,
        Some(sent) if sent >= 64 => false,
        Some(sent) => bitmap >> sent != 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn neth(reason: NackReason) -> NethRepr {
        NethRepr {
            hdr_type: 0,
            next: 0,
            reason,
            vendor_info: 0,
            entropy: 0,
            spdcid: 0,
            dpdcid: 0,
            nack_psn: 0,
            cc_type: 0,
            cc_flags: 0,
            tx_timestamp: 0,
        }
    }

    /// Brief §2.10, §3.3 (moved from the NETH codes test: the policy is not the wire's).
    #[test]
    fn nack_reasons_retry_and_blame_as_the_brief_says() {
        let table = [
            (NackReason::Trimmed, true, true),
            (NackReason::TrimmedLastHop, true, false),
            (NackReason::NoBitmap, true, false),
            (NackReason::NoPktBuffer, true, false),
            (NackReason::NoResource, true, false),
            (NackReason::PsnOutOfWindow, true, false),
            (NackReason::UnexpectedEvent, false, false),
        ];
        for (reason, retriable, path) in table {
            let retried = fatal_status(&neth(reason)).is_none();
            let blamed = nack_event(3, reason) == EvEvent::Trimmed { ev: 3 };
            assert_eq!(retried, retriable, "{reason}");
            assert_eq!(blamed, path, "{reason}");
        }
        assert!(fatal_status(&neth(NackReason::Unknown(0x42))).is_some());
        let mut access = neth(NackReason::UnexpectedEvent);
        access.vendor_info = VENDOR_REMOTE_ACCESS;
        assert_eq!(fatal_status(&access), Some(WcStatus::RemoteAccessError));
    }
}
