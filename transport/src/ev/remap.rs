//! ECMP mode: the sender cannot see paths, so a change of the fabric's hashing (a link or
//! switch change that reshuffles every flow) looks like many EVs failing at once. A burst of
//! failures on distinct EVs of one plane inside a short window is read as such a remap: the
//! whole EV set is drawn again instead of retiring EVs one by one (brief §8.2 item 6). One
//! plane's, because a switch's hashing is one plane's: dead links on several planes each take
//! their share of every plane's EVs, and together they are no remap (issue #14: three dead
//! links on three planes redrew every EV twice, healthy ones with the rest).

use std::collections::VecDeque;

use super::EvId;
use crate::time::{Duration, Instant};

/// Counts distinct failing EVs of each plane in a sliding window.
#[derive(Debug)]
pub struct RemapDetector {
    window: Duration,
    burst: usize,
    /// Failures in the window: when, which EV, its plane.
    recent: VecDeque<(Instant, EvId, u8)>,
}

impl RemapDetector {
    /// A detector that fires when `burst` distinct EVs of one plane fail within `window`.
    pub fn new(burst: u16, window: Duration) -> Self {
        let burst = usize::from(burst.max(2));
        Self {
            window,
            burst,
            recent: VecDeque::with_capacity(burst),
        }
    }

    /// EV `ev` of `plane` failed now. `true` when this completes a burst of its plane (the
    /// detector then starts over).
    pub fn on_failure(&mut self, now: Instant, ev: EvId, plane: u8) -> bool {
        while let Some(&(t, _, _)) = self.recent.front() {
            if t + self.window < now {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        if self.recent.iter().any(|&(_, e, _)| e == ev) {
            return false;
        }
        self.recent.push_back((now, ev, plane));
        let same = self.recent.iter().filter(|&&(_, _, p)| p == plane).count();
        if same >= self.burst {
            self.recent.clear();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_burst_of_distinct_evs_is_a_remap_a_trickle_is_not() {
        let mut d = RemapDetector::new(3, Duration::from_micros(10));
        let us = |n: u64| Instant(n * 1_000);
        assert!(!d.on_failure(us(0), 1, 0));
        assert!(!d.on_failure(us(1), 1, 0), "same EV twice is not a burst");
        assert!(!d.on_failure(us(2), 2, 0));
        assert!(d.on_failure(us(3), 3, 0));
        // A trickle: one failure every 20 µs never makes a burst.
        for i in 0..10 {
            assert!(!d.on_failure(us(100 + 20 * i), i as u16, 0));
        }
    }

    #[test]
    fn failures_spread_over_planes_are_no_remap() {
        // Dead links on three planes: each plane loses a few EVs at once, no plane a burst.
        let mut d = RemapDetector::new(3, Duration::from_micros(10));
        let us = |n: u64| Instant(n * 1_000);
        for (i, plane) in [0u8, 1, 2, 0, 1, 2].into_iter().enumerate() {
            assert!(!d.on_failure(us(i as u64), i as u16, plane), "failure {i}");
        }
        // A third failure on one plane within the window is.
        assert!(d.on_failure(us(7), 9, 1));
    }
}
