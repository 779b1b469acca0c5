//! Round-trip time estimation (RFC 6298 smoothing, in integer nanoseconds), feeding the
//! per-packet path-failure timeout and the reordering window of loss inference.

use crate::time::Duration;

/// Smoothed RTT, its variation and the minimum seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RttEstimator {
    srtt_ns: u64,
    rttvar_ns: u64,
    min_ns: u64,
    latest_ns: u64,
    samples: u64,
}

impl RttEstimator {
    /// An estimator that assumes `initial` until the first sample.
    pub const fn new(initial: Duration) -> Self {
        Self {
            srtt_ns: initial.as_nanos(),
            rttvar_ns: initial.as_nanos() / 2,
            min_ns: u64::MAX,
            latest_ns: initial.as_nanos(),
            samples: 0,
        }
    }

    /// Fold in one sample (RFC 6298 §2: α = 1/8, β = 1/4).
    pub fn update(&mut self, sample: Duration) {
        let r = sample.as_nanos().max(1);
        self.latest_ns = r;
        self.min_ns = self.min_ns.min(r);
        if self.samples == 0 {
            self.srtt_ns = r;
            self.rttvar_ns = r / 2;
        } else {
            let err = self.srtt_ns.abs_diff(r);
            self.rttvar_ns = (3 * self.rttvar_ns + err) / 4;
            self.srtt_ns = (7 * self.srtt_ns + r) / 8;
        }
        self.samples += 1;
    }

    pub fn srtt(&self) -> Duration {
        Duration(self.srtt_ns)
    }

    pub fn rttvar(&self) -> Duration {
        Duration(self.rttvar_ns)
    }

    /// The smallest sample, or the smoothed value before any.
    pub fn min(&self) -> Duration {
        Duration(if self.samples == 0 {
            self.srtt_ns
        } else {
            self.min_ns
        })
    }

    pub fn latest(&self) -> Duration {
        Duration(self.latest_ns)
    }

    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The per-packet path-failure timeout: `multiplier` smoothed RTTs plus four deviations,
    /// never below `floor` (brief §3.7: a few smoothed RTTs, tens of microseconds in a fabric).
    pub fn pto(&self, multiplier: u32, floor: Duration) -> Duration {
        Duration((self.srtt_ns * u64::from(multiplier) + 4 * self.rttvar_ns).max(floor.as_nanos()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn converges_and_tracks_min() {
        let mut e = RttEstimator::new(Duration::from_micros(100));
        assert_eq!(e.srtt(), Duration::from_micros(100));
        e.update(Duration::from_micros(10));
        assert_eq!(e.srtt(), Duration::from_micros(10));
        for _ in 0..50 {
            e.update(Duration::from_micros(20));
        }
        assert!(e.srtt().as_nanos().abs_diff(20_000) < 200);
        assert_eq!(e.min(), Duration::from_micros(10));
        assert_eq!(e.samples(), 51);
        assert!(e.pto(3, Duration::ZERO) >= Duration::from_micros(60));
        assert_eq!(e.pto(3, Duration::from_millis(1)), Duration::from_millis(1));
    }
}
