//! ECMP mode: the sender cannot see paths, so a change of the fabric's hashing (a link or
//! switch change that reshuffles every flow) looks like many EVs failing at once. A burst of
//! failures on distinct EVs inside a short window is read as such a remap: the whole EV set is
//! drawn again instead of retiring EVs one by one (brief §8.2 item 6).

use std::collections::VecDeque;

use super::EvId;
use crate::time::{Duration, Instant};

/// Counts distinct failing EVs in a sliding window.
#[derive(Debug)]
pub struct RemapDetector {
    window: Duration,
    burst: usize,
    recent: VecDeque<(Instant, EvId)>,
}

impl RemapDetector {
    /// A detector that fires when `burst` distinct EVs fail within `window`.
    pub fn new(burst: u16, window: Duration) -> Self {
        let burst = usize::from(burst.max(2));
        Self {
            window,
            burst,
            recent: VecDeque::with_capacity(burst),
        }
    }

    /// An EV failed now. `true` when this completes a burst (the detector then starts over).
    pub fn on_failure(&mut self, now: Instant, ev: EvId) -> bool {
        while let Some(&(t, _)) = self.recent.front() {
            if t + self.window < now {
                self.recent.pop_front();
            } else {
                break;
            }
        }
        if self.recent.iter().any(|&(_, e)| e == ev) {
            return false;
        }
        if self.recent.len() == self.burst {
            self.recent.pop_front();
        }
        self.recent.push_back((now, ev));
        if self.recent.len() >= self.burst {
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
        assert!(!d.on_failure(us(0), 1));
        assert!(!d.on_failure(us(1), 1), "same EV twice is not a burst");
        assert!(!d.on_failure(us(2), 2));
        assert!(d.on_failure(us(3), 3));
        // A trickle: one failure every 20 µs never makes a burst.
        for i in 0..10 {
            assert!(!d.on_failure(us(100 + 20 * i), i as u16));
        }
    }
}
