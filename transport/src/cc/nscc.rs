//! NSCC: the sender-side, window-based, SACK-clocked congestion control of MRC 1.0 §8
//! (`"uet-1.0-nscc"`, brief §3.4), as the UEC reference simulator runs it (htsim `uec.cpp`;
//! UET arXiv:2508.08906, SMaRTT arXiv:2404.01630).
//!
//! Per SACK the controller reads two signals, ECN on the forward path and the queueing delay
//! (RTT sample − base RTT), and picks a quadrant:
//!
//! | ECN | delay vs target | action |
//! |-----|-----------------|--------|
//! | no  | below | proportional increase, `∝ delivered × (target − delay)`; fast increase after a whole window near zero delay |
//! | no  | above | fair increase, `fi × delivered` |
//! | yes | above | multiplicative decrease on the *average* delay, at most once per base RTT |
//! | yes | below | nothing: the mark is a path problem, load balancing moves off that EV |
//!
//! Increases accumulate (in bytes², applied as `inc / cwnd`) and land in batches, every
//! `adjust_bytes_threshold` delivered bytes or `adjust_period_threshold`, plus `eta` once per
//! period. Quick Adapt checks every `base_rtt + target`: after a trim, loss or extreme delay,
//! if less than `max_cwnd >> qa_gate` was delivered in that period, the window snaps to what was
//! delivered and the marks on the packets already in flight are ignored. The receiver's window
//! penalty (`rcv_cwnd_pen`) removes `delivered × pen / 128` per SACK.
//!
//! Everything is integer arithmetic on bytes and nanoseconds; fractions are Q16.

mod config;
#[cfg(test)]
mod tests;

pub use config::{NsccConfig, NsccParams};

use super::{AckSample, CongestionController, NackCause, NackSample, PathFacts};
use crate::time::{Duration, Instant};

/// Weight of a new sample in the delay EWMA, Q16: 0.0125 (htsim `_delay_alpha`).
const DELAY_EWMA_Q16: u64 = 819;

/// What NSCC did, in bytes of window (for reports and tests; plain counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NsccStats {
    pub fair_increase_bytes: u64,
    pub proportional_increase_bytes: u64,
    pub fast_increase_bytes: u64,
    pub eta_increase_bytes: u64,
    pub multiplicative_decreases: u64,
    pub multiplicative_decrease_bytes: u64,
    pub quick_adapts: u64,
    pub quick_adapt_bytes: u64,
    pub nack_decrease_bytes: u64,
    pub loss_decrease_bytes: u64,
    pub penalty_decrease_bytes: u64,
}

/// One NSCC controller (one QPCC).
#[derive(Debug, Clone)]
pub struct Nscc {
    p: NsccParams,
    cwnd: u64,
    /// Queueing-delay EWMA, nanoseconds in Q16.
    avg_delay_q16: u64,
    /// Pending fair increase: bytes delivered in the fair quadrant (× `fi` / cwnd when
    /// applied).
    fair_acc: u128,
    /// Pending proportional increase: Σ delivered × (target − delay), byte·ns (× gain / target
    /// / cwnd when applied). Only the application divides, not every SACK.
    prop_acc: u128,
    /// Bytes delivered since the last adjustment.
    delivered_since_adjust: u64,
    /// Start of the current adjust period (`None` before the first feedback).
    last_adjust: Option<Instant>,
    /// Bytes delivered in a row with (almost) no queueing, for fast increase.
    fast_count: u64,
    fast_increasing: bool,
    last_decrease: Option<Instant>,
    /// End of the current Quick Adapt period (`None` before the first feedback).
    qa_end: Option<Instant>,
    /// Bytes delivered in the current Quick Adapt period.
    achieved_bytes: u64,
    /// A trim or loss was seen since the last Quick Adapt.
    qa_triggered: bool,
    /// After a Quick Adapt, marked feedback for the bytes that were in flight is stale.
    bytes_to_ignore: u64,
    bytes_ignored: u64,
    stats: NsccStats,
}

impl Nscc {
    /// A controller for `config` on the path `facts` describes.
    pub fn new(config: &NsccConfig, facts: &PathFacts) -> Self {
        Self::from_params(config.resolve(facts))
    }

    /// A controller from already resolved parameters.
    pub fn from_params(p: NsccParams) -> Self {
        Self {
            cwnd: p.initial_cwnd,
            p,
            avg_delay_q16: 0,
            fair_acc: 0,
            prop_acc: 0,
            delivered_since_adjust: 0,
            last_adjust: None,
            fast_count: 0,
            fast_increasing: false,
            last_decrease: None,
            qa_end: None,
            achieved_bytes: 0,
            qa_triggered: false,
            bytes_to_ignore: 0,
            bytes_ignored: 0,
            stats: NsccStats::default(),
        }
    }

    /// The parameters in force.
    pub fn params(&self) -> &NsccParams {
        &self.p
    }

    /// Counters of what the controller did.
    pub fn stats(&self) -> &NsccStats {
        &self.stats
    }

    /// The queueing-delay EWMA, nanoseconds.
    pub fn avg_delay_ns(&self) -> u64 {
        self.avg_delay_q16 >> 16
    }

    fn clamp_cwnd(&mut self) {
        self.cwnd = self.cwnd.clamp(self.p.min_cwnd, self.p.max_cwnd);
    }

    /// Shrink the window by `bytes`, never below the floor; returns what was removed.
    fn shrink(&mut self, bytes: u64) -> u64 {
        let before = self.cwnd;
        self.cwnd = self.cwnd.saturating_sub(bytes).max(self.p.min_cwnd);
        before.saturating_sub(self.cwnd)
    }

    /// Feed the delay EWMA. A high delay without ECN is discounted (the queue is probably on the
    /// reverse path or at a host, not where a mark would show it): it counts as a quarter base
    /// RTT (htsim `update_delay`).
    fn update_avg_delay(&mut self, delay_ns: u64, ecn: bool) {
        let sample = if !ecn && delay_ns > self.p.target_ns {
            self.p.base_rtt_ns / 4
        } else {
            delay_ns
        };
        let sample_q16 = i128::from(sample) << 16;
        let avg = i128::from(self.avg_delay_q16);
        let next = avg + (((sample_q16 - avg) * i128::from(DELAY_EWMA_Q16)) >> 16);
        self.avg_delay_q16 = next.clamp(0, i128::from(u64::MAX)) as u64;
    }

    /// MRC 1.0 §8 Quick Adapt (brief §3.4). Returns `true` when this feedback must not move the
    /// window further (QA just ran, or the feedback is stale marks from before the last QA).
    fn quick_adapt(
        &mut self,
        now: Instant,
        loss: bool,
        ecn: bool,
        delay_ns: u64,
        inflight: u64,
    ) -> bool {
        if self.p.disable_qa {
            return false;
        }
        let mut done = false;
        if ecn && self.bytes_ignored < self.bytes_to_ignore {
            done = true;
        } else if self.qa_end.is_none_or(|end| now > end) {
            if self.qa_end.is_some()
                && (self.qa_triggered || loss || delay_ns > self.p.qa_threshold_ns)
                && self.achieved_bytes < self.p.max_cwnd >> self.p.qa_gate
            {
                let before = self.cwnd;
                self.cwnd = self.achieved_bytes.max(self.p.min_cwnd);
                self.stats.quick_adapts += 1;
                self.stats.quick_adapt_bytes += before.saturating_sub(self.cwnd);
                self.bytes_to_ignore = inflight;
                self.bytes_ignored = 0;
                self.qa_triggered = false;
                done = true;
            }
            self.achieved_bytes = 0;
            self.qa_end = Some(now + Duration(self.p.base_rtt_ns.saturating_add(self.p.target_ns)));
        }
        if done {
            self.fair_acc = 0;
            self.prop_acc = 0;
            self.delivered_since_adjust = 0;
        }
        done
    }

    /// No ECN, delay below target: proportional increase, or fast increase once a whole window
    /// went through with (almost) no queueing (htsim `proportional_increase`, `fast_increase`).
    fn proportional_increase(&mut self, delivered: u64, delay_ns: u64) {
        if delay_ns < self.p.fast_increase_delay_ns {
            self.fast_count = self.fast_count.saturating_add(delivered);
            if self.fast_count > self.cwnd || self.fast_increasing {
                let inc = ((u128::from(delivered) * u128::from(self.p.fi_scale_q16)) >> 16) as u64;
                self.cwnd = self.cwnd.saturating_add(inc);
                self.stats.fast_increase_bytes += inc;
                self.fast_increasing = true;
                return;
            }
        } else {
            self.fast_count = 0;
        }
        self.fast_increasing = false;
        // delay < target here.
        let headroom = u128::from(self.p.target_ns - delay_ns);
        self.prop_acc = self
            .prop_acc
            .saturating_add(u128::from(delivered) * headroom);
    }

    /// ECN and delay above target: multiplicative decrease on the average delay, at most once
    /// per base RTT (htsim `multiplicative_decrease`).
    fn multiplicative_decrease(&mut self, now: Instant) {
        self.fast_increasing = false;
        self.fast_count = 0;
        let avg = self.avg_delay_ns();
        if avg <= self.p.target_ns {
            return;
        }
        if self
            .last_decrease
            .is_some_and(|t| now.saturating_since(t).as_nanos() <= self.p.base_rtt_ns)
        {
            return;
        }
        // cwnd × max(1 − γ·(avg − target)/avg, 1 − max_md_jump)
        let cut_q16 = (u128::from(self.p.gamma_q16) * u128::from(avg - self.p.target_ns)
            / u128::from(avg))
        .min(u128::from(self.p.max_md_jump_q16));
        let cut = ((u128::from(self.cwnd) * cut_q16) >> 16) as u64;
        let removed = self.shrink(cut);
        self.stats.multiplicative_decreases += 1;
        self.stats.multiplicative_decrease_bytes += removed;
        self.last_decrease = Some(now);
    }

    /// Apply the accumulated increases, and `eta` once per adjust period (htsim
    /// `fulfill_adjustment`).
    fn adjust(&mut self, now: Instant) {
        let last = *self.last_adjust.get_or_insert(now);
        let period_over = now.saturating_since(last).as_nanos() >= self.p.adjust_period_ns;
        if self.delivered_since_adjust <= self.p.adjust_bytes && !period_over {
            return;
        }
        let cwnd = u128::from(self.cwnd);
        let fair = self.fair_acc.saturating_mul(u128::from(self.p.fi_bytes)) / cwnd;
        // prop_acc > 0 only if some delay was below target, so target > 0.
        let prop = if self.prop_acc == 0 {
            0
        } else {
            self.prop_acc
                .saturating_mul(u128::from(self.p.proportional_bytes))
                / u128::from(self.p.target_ns)
                / cwnd
        };
        let fair = fair.min(u128::from(u64::MAX)) as u64;
        let prop = prop.min(u128::from(u64::MAX)) as u64;
        self.cwnd = self.cwnd.saturating_add(fair).saturating_add(prop);
        self.stats.fair_increase_bytes += fair;
        self.stats.proportional_increase_bytes += prop;
        if period_over {
            self.cwnd = self.cwnd.saturating_add(self.p.eta_bytes);
            self.stats.eta_increase_bytes += self.p.eta_bytes;
            self.last_adjust = Some(now);
        }
        self.fair_acc = 0;
        self.prop_acc = 0;
        self.delivered_since_adjust = 0;
    }
}

impl CongestionController for Nscc {
    fn name(&self) -> &'static str {
        "nscc"
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn on_packet_sent(&mut self, _now: Instant, _bytes: u32) {}

    // MRC 1.0 §8 OnACK (brief §3.4): one SACK is one decision.
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        // Delivered bytes: the sender's own count of newly acknowledged bytes, or the receiver's
        // `rcvd_bytes` delta when larger (it also counts packets whose SACK was lost).
        let delivered = ack.newly_acked_bytes.max(ack.rcvd_bytes_delta);
        self.achieved_bytes = self.achieved_bytes.saturating_add(delivered);
        self.delivered_since_adjust = self.delivered_since_adjust.saturating_add(delivered);
        self.bytes_ignored = self.bytes_ignored.saturating_add(delivered);

        // Receiver window penalty (brief §3.4): 127 ≈ one packet per RTT, 64 halves per RTT.
        if ack.rcv_cwnd_pen > 0 {
            let pen = u64::from(ack.rcv_cwnd_pen.min(127));
            let removed = self.shrink(((u128::from(delivered) * u128::from(pen)) >> 7) as u64);
            self.stats.penalty_decrease_bytes += removed;
        }

        let delay_ns = match ack.rtt {
            Some(rtt) => {
                let delay = rtt.as_nanos().saturating_sub(self.p.base_rtt_ns);
                self.update_avg_delay(delay, ack.ecn);
                delay
            }
            None => self.avg_delay_ns(),
        };

        if self.quick_adapt(now, false, ack.ecn, delay_ns, ack.inflight_bytes) {
            self.clamp_cwnd();
            return;
        }

        let above = delay_ns >= self.p.target_ns;
        match (ack.ecn, above) {
            (false, false) => self.proportional_increase(delivered, delay_ns),
            (false, true) => {
                self.fair_acc += u128::from(delivered);
            }
            (true, true) => self.multiplicative_decrease(now),
            // ECN below target: the path is the problem, not the window.
            (true, false) => {}
        }
        self.clamp_cwnd();
        self.adjust(now);
        self.clamp_cwnd();
    }

    // MRC 1.0 §8 OnNACK: a trim is a strong congestion signal (htsim `updateCwndOnNack_NSCC`).
    fn on_nack(&mut self, now: Instant, nack: &NackSample) {
        if nack.cause == NackCause::Other {
            // Not a fabric signal (receiver resources, window): recovery handles it.
            return;
        }
        self.bytes_ignored = self.bytes_ignored.saturating_add(nack.bytes);
        // A trim means a full queue: about one base RTT of queueing on that path.
        self.update_avg_delay(self.p.base_rtt_ns, true);
        self.qa_triggered = true;
        if !self.quick_adapt(now, true, true, 0, nack.inflight_bytes) {
            let removed = self.shrink(nack.bytes);
            self.stats.nack_decrease_bytes += removed;
        }
        self.clamp_cwnd();
    }

    // MRC 1.0 §8 OnInferredLoss: shrink by the lost packet and arm Quick Adapt, where a loss
    // can be congestion. Where the fabric trims (brief §5.3), a full queue trims and the NACK
    // says so (`on_nack`): a silent loss is a failed path, a gray link or corruption, which EV
    // health answers (§3.3: the path is retired, not the flow slowed). Shrinking for it cost a
    // flow crossing a flapping link 27 % of its completion time, and 0.1 % random loss 6 % of
    // the goodput (issue #14).
    fn on_loss(&mut self, _now: Instant, bytes: u64) {
        if self.p.trimming {
            return;
        }
        self.qa_triggered = true;
        let removed = self.shrink(bytes);
        self.stats.loss_decrease_bytes += removed;
        self.clamp_cwnd();
    }
}
