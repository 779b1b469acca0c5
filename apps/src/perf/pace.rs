//! When each message of a QP may be posted: perftest's rate limiter (a steady rate released
//! `burst` messages at a time), plus what switch testing needs beyond it: synchronized bursts
//! and on/off load. Every pattern is a function of the run's start time and the message
//! number, so QPs (and hosts, given one start time) stay in step without talking.

use mrc_transport::{Duration, Instant};

use super::settings::{Pattern, Rate};

/// Release times of one QP's messages.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    pattern: Pattern,
    size: u64,
    start: Instant,
}

impl Pacer {
    /// Messages of `size` bytes paced by `pattern` from `start`.
    pub fn new(pattern: Pattern, size: u64, start: Instant) -> Self {
        Self {
            pattern,
            size,
            start,
        }
    }

    /// The earliest time message `k` (0-based) may be posted, given that it is `now`; `now`
    /// or earlier means at once.
    pub fn release(&self, k: u64, now: Instant) -> Instant {
        let from_start = |ns: f64| self.start + Duration(ns.max(0.0) as u64);
        match self.pattern {
            Pattern::Saturate => self.start,
            Pattern::Rate { rate, burst } => {
                let burst = u64::from(burst.max(1));
                let per_burst_ns = match rate {
                    Rate::BitsPerSec(bps) => (burst * self.size * 8) as f64 * 1e9 / bps,
                    Rate::MsgsPerSec(pps) => burst as f64 * 1e9 / pps,
                };
                from_start((k / burst) as f64 * per_burst_ns)
            }
            Pattern::Bursts { burst, gap } => {
                let n = k / u64::from(burst.max(1));
                self.start + gap.saturating_mul(n)
            }
            Pattern::OnOff { on, off } => {
                let period = (on + off).as_nanos().max(1);
                let t = now.saturating_since(self.start).as_nanos();
                if t % period < on.as_nanos() {
                    now
                } else {
                    self.start + Duration((t / period + 1) * period)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant(1_000);

    #[test]
    fn rate_releases_bursts_at_the_rate() {
        // 1 Gb/s, 1000-byte messages, bursts of 4: 32 µs per burst.
        let p = Pacer::new(
            Pattern::Rate {
                rate: Rate::BitsPerSec(1e9),
                burst: 4,
            },
            1000,
            T0,
        );
        assert_eq!(p.release(0, T0), T0);
        assert_eq!(p.release(3, T0), T0);
        assert_eq!(p.release(4, T0), T0 + Duration::from_micros(32));
        assert_eq!(p.release(9, T0), T0 + Duration::from_micros(64));
        let pps = Pacer::new(
            Pattern::Rate {
                rate: Rate::MsgsPerSec(1e6),
                burst: 1,
            },
            1,
            T0,
        );
        assert_eq!(pps.release(5, T0), T0 + Duration::from_micros(5));
    }

    #[test]
    fn bursts_start_every_gap() {
        let p = Pacer::new(
            Pattern::Bursts {
                burst: 8,
                gap: Duration::from_micros(10),
            },
            4096,
            T0,
        );
        assert_eq!(p.release(7, T0), T0);
        assert_eq!(p.release(8, T0), T0 + Duration::from_micros(10));
        assert_eq!(p.release(17, T0), T0 + Duration::from_micros(20));
    }

    #[test]
    fn on_off_waits_for_the_next_on_phase() {
        let p = Pacer::new(
            Pattern::OnOff {
                on: Duration::from_micros(3),
                off: Duration::from_micros(7),
            },
            64,
            T0,
        );
        let inside = T0 + Duration::from_micros(12);
        assert_eq!(p.release(99, inside), inside);
        let off = T0 + Duration::from_micros(15);
        assert_eq!(p.release(99, off), T0 + Duration::from_micros(20));
    }
}
