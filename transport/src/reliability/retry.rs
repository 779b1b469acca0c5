//! The QP's long retry budget (brief §3.7): separate from the fast per-packet path-failure
//! timeout, it only runs out when nothing gets through for a long time. The interval is
//! 1.024 µs × 2^timeout; `linear` retries at that interval, then `exp` more, each twice as long
//! as the one before (capped at 2^24 × 1.024 µs). Any progress refills it. Running out moves
//! the QP to ERROR with "retry exceeded".

use crate::time::{Duration, Instant};

/// What a retry-timer expiry means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetryVerdict {
    /// Retransmit the oldest outstanding packet and wait again.
    Retry,
    /// The budget is spent: the QP fails.
    Exhausted,
}

/// The retry budget of one QP.
#[derive(Debug, Clone, Copy)]
pub struct RetryBudget {
    base: Duration,
    linear: u8,
    exp: u8,
    retries: u8,
    since: Option<Instant>,
}

/// The largest timeout exponent (brief §3.7: 2^24 × 1.024 µs ≈ 17.2 s).
pub const MAX_TIMEOUT_EXPONENT: u8 = 24;

impl RetryBudget {
    /// A budget with timeout exponent `timeout` and `linear` + `exp` retries.
    pub fn new(timeout: u8, linear: u8, exp: u8) -> Self {
        Self {
            base: interval_of(timeout.min(MAX_TIMEOUT_EXPONENT)),
            linear,
            exp,
            retries: 0,
            since: None,
        }
    }

    /// Retries spent since the last progress.
    pub fn retries(&self) -> u8 {
        self.retries
    }

    fn interval(&self) -> Duration {
        if self.retries < self.linear {
            return self.base;
        }
        let doublings = u32::from(self.retries - self.linear) + 1;
        let cap = interval_of(MAX_TIMEOUT_EXPONENT);
        Duration(
            self.base
                .as_nanos()
                .checked_shl(doublings)
                .map_or(cap.as_nanos(), |v| v.min(cap.as_nanos())),
        )
    }

    /// Start the clock if it is not running (the first packet of a busy period left).
    pub fn arm(&mut self, now: Instant) {
        if self.since.is_none() {
            self.since = Some(now);
        }
    }

    /// Nothing outstanding any more: stop and refill.
    pub fn disarm(&mut self) {
        self.since = None;
        self.retries = 0;
    }

    /// The peer acknowledged something: refill and restart the clock.
    pub fn on_progress(&mut self, now: Instant) {
        self.retries = 0;
        if self.since.is_some() {
            self.since = Some(now);
        }
    }

    /// When the current interval ends, if armed.
    pub fn deadline(&self) -> Option<Instant> {
        self.since.map(|t| t + self.interval())
    }

    /// The interval ended: spend one retry.
    pub fn on_expiry(&mut self, now: Instant) -> RetryVerdict {
        self.retries = self.retries.saturating_add(1);
        self.since = Some(now);
        if u32::from(self.retries) > u32::from(self.linear) + u32::from(self.exp) {
            RetryVerdict::Exhausted
        } else {
            RetryVerdict::Retry
        }
    }
}

fn interval_of(exponent: u8) -> Duration {
    Duration(1_024u64 << exponent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linear_then_exponential_then_exhausted() {
        let mut b = RetryBudget::new(4, 2, 2);
        assert_eq!(b.deadline(), None);
        b.arm(Instant(0));
        let base = 1_024 * 16;
        let mut now = Instant(0);
        let mut gaps = Vec::new();
        loop {
            let d = b.deadline().unwrap();
            gaps.push(d.0 - now.0);
            now = d;
            if b.on_expiry(now) == RetryVerdict::Exhausted {
                break;
            }
        }
        assert_eq!(gaps, [base, base, 2 * base, 4 * base, 8 * base]);
        assert_eq!(b.retries(), 5);
    }

    #[test]
    fn progress_refills_and_the_cap_holds() {
        let mut b = RetryBudget::new(30, 0, 25);
        b.arm(Instant(0));
        for _ in 0..20 {
            assert_eq!(b.on_expiry(Instant(0)), RetryVerdict::Retry);
        }
        assert_eq!(b.deadline(), Some(Instant(1_024 << 24)));
        b.on_progress(Instant(5));
        assert_eq!(b.retries(), 0);
        assert_eq!(b.deadline(), Some(Instant(5 + (1_024 << 24))));
        b.disarm();
        assert_eq!(b.deadline(), None);
    }
}
