//! Loss detection in one place (brief §3.6, §3.7): the reordering window, RACK inference
//! (RFC 8985) and the per-packet path-failure timeout, with their deadlines. Each rule takes
//! the longer of the QP's RTT and the RTT of the packet's own path (`path_rtt`, kept by the
//! path's [`RttEstimator`]): sprayed paths differ by their queues, and a packet on a path with
//! a queue is late, not lost. Inference also asks the path whether a packet sent on it later
//! was delivered ([`PathEvidence`]): one path delivers in order, so only then is a hole on it
//! a drop at once; otherwise it waits a quarter RTT more. What a loss does to its EV is the
//! EV health table's business (`ev/health.rs`); the flight's scoreboard provides the oldest transmission and the RACK
//! reference (`flight.rs`).

use super::{Flight, FlightEntry, RttEstimator};
use crate::config::TimerConfig;
use crate::time::{Duration, Instant};

/// What the loss rules know of the path each packet took (its EV's): its RTT, and whether a
/// packet sent on it after a given transmission was delivered (brief §3.6; packets on one path
/// arrive in the order they left, so that delivery says the earlier one was dropped, not
/// queued).
pub trait PathEvidence {
    /// The path's smoothed RTT (zero before its first sample).
    fn srtt(&self, ev: u16) -> Duration;
    /// Whether a transmission sent on `ev` after transmission `tx_id` has been delivered.
    fn overtaken(&self, ev: u16, tx_id: u64) -> bool;
}

/// A path's RTT alone, with every hole taken as overtaken on its own path: the plain RACK
/// rule (tests, and any caller that keeps no per-path order).
impl<F: Fn(u16) -> Duration> PathEvidence for F {
    fn srtt(&self, ev: u16) -> Duration {
        self(ev)
    }

    fn overtaken(&self, _ev: u16, _tx_id: u64) -> bool {
        true
    }
}

/// The loss rules of one QP and the QP's own RTT.
#[derive(Debug)]
pub struct LossDetection {
    /// The QP's RTT (every SACK's echoed TSETH timestamp).
    pub rtt: RttEstimator,
    reorder_min: Duration,
    pto_min: Duration,
    pto_srtt_multiplier: u32,
}

/// When the rules next declare a loss with no new information.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LossDeadlines {
    /// RACK inference of the oldest transmission (none in go-back-N mode).
    pub inference: Option<Instant>,
    /// The per-packet timeout of the oldest transmission.
    pub timeout: Option<Instant>,
}

impl LossDetection {
    pub fn new(timers: &TimerConfig) -> Self {
        Self {
            rtt: RttEstimator::new(timers.initial_rtt),
            reorder_min: timers.reorder_min,
            pto_min: timers.pto_min,
            pto_srtt_multiplier: timers.pto_srtt_multiplier,
        }
    }

    /// Fold in an RTT sample of the QP (the echoed TSETH timestamp: unambiguous even for a
    /// retransmission); RACK measures from it.
    pub fn on_rtt_sample(&mut self, flight: &mut Flight, sample: Duration) {
        self.rtt.update(sample);
        flight.set_rack_rtt(self.rtt.srtt(), self.rtt.min());
    }

    /// The reordering window of loss inference (brief §3.6 \[I\]): a quarter RTT or four RTT
    /// deviations, whichever is longer, never below the configured minimum. Where the RTT
    /// varies, so does the order of arrival, and a hole is not a loss until it outlasts that
    /// variation.
    pub fn reorder_window(&self) -> Duration {
        Duration((self.rtt.srtt().as_nanos() / 4).max(4 * self.rtt.rttvar().as_nanos()))
            .max(self.reorder_min)
    }

    /// The per-packet path-failure timeout of a first transmission (brief §3.7: a few
    /// smoothed RTTs and four deviations, never below the floor).
    pub fn pto(&self) -> Duration {
        self.rtt.pto(self.pto_srtt_multiplier, self.pto_min)
    }

    /// The least a packet on a path with smoothed RTT `path_srtt` waits before its timeout: as
    /// many of its own path's RTTs as the QP's timeout counts of the QP's (a path with a queue
    /// is slow, not dead).
    fn path_pto(&self, path_srtt: Duration) -> Duration {
        path_srtt.saturating_mul(u64::from(self.pto_srtt_multiplier))
    }

    /// RACK inference (brief §3.6): packets sent before the latest delivered one and out for
    /// longer than the RTT (the path's, if longer; a quarter more without a later delivery
    /// on their own path) plus the reordering window go to `lost`.
    pub fn infer(
        &self,
        flight: &mut Flight,
        now: Instant,
        paths: &impl PathEvidence,
        lost: &mut Vec<(u64, FlightEntry)>,
    ) {
        let reo = self.reorder_window();
        flight.detect_losses(now, reo, paths, &mut |seq, e| lost.push((seq, *e)));
    }

    /// The per-packet path-failure timeout (brief §3.7): transmissions older than theirs go to
    /// `lost`.
    pub fn time_out(
        &self,
        flight: &mut Flight,
        now: Instant,
        paths: &impl PathEvidence,
        lost: &mut Vec<(u64, FlightEntry)>,
    ) {
        let path_pto = |ev| self.path_pto(paths.srtt(ev));
        flight.on_pto(now, self.pto(), &path_pto, &mut |seq, e| {
            lost.push((seq, *e));
        });
    }

    /// When [`Self::infer`] (unless `gbn`: go-back-N infers nothing) and [`Self::time_out`]
    /// would next declare a loss.
    pub fn deadlines(
        &self,
        flight: &mut Flight,
        gbn: bool,
        paths: &impl PathEvidence,
    ) -> LossDeadlines {
        let path_pto = |ev| self.path_pto(paths.srtt(ev));
        let timeout = flight.pto_deadline(self.pto(), &path_pto);
        let inference = if !gbn && timeout.is_some() {
            flight.loss_deadline(self.reorder_window(), paths)
        } else {
            None
        };
        LossDeadlines { inference, timeout }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timers() -> TimerConfig {
        TimerConfig::default()
    }

    #[test]
    fn the_reordering_window_follows_the_rtt_and_its_variation() {
        let mut l = LossDetection::new(&timers());
        let floor = timers().reorder_min;
        let mut f = Flight::new(64, 0);
        for _ in 0..32 {
            l.on_rtt_sample(&mut f, Duration::from_micros(400));
        }
        // Steady: a quarter RTT (100 µs) beats four (small) deviations.
        assert!(l.reorder_window() >= Duration::from_micros(100).max(floor));
        let steady = l.reorder_window();
        l.on_rtt_sample(&mut f, Duration::from_micros(4_000));
        assert!(l.reorder_window() > steady, "variation widens it");
    }

    #[test]
    fn a_packet_times_out_after_its_own_path_allows() {
        let l = LossDetection::new(&timers());
        let mut f = Flight::new(64, 0);
        f.send_new(Instant::ZERO, 0, 0, 100, 3);
        let slow = Duration::from_millis(2);
        let path = |ev: u16| if ev == 3 { slow } else { Duration::ZERO };
        let d = l.deadlines(&mut f, false, &path).timeout.unwrap();
        assert!(d >= Instant::ZERO + slow.saturating_mul(u64::from(timers().pto_srtt_multiplier)));
        let mut lost = Vec::new();
        l.time_out(&mut f, Instant(d.0 - 1), &path, &mut lost);
        assert!(lost.is_empty());
        l.time_out(&mut f, d, &path, &mut lost);
        assert_eq!(lost.len(), 1);
    }
}
