//! When each message of a QP may be posted: perftest's rate limiter (a steady rate released
//! `burst` messages at a time), plus what switch testing needs beyond it: synchronized bursts
//! and on/off load. Every pattern is a function of the run's start time and the message
//! number, so QPs (and hosts, given one start time) stay in step without talking.
//!
//! On/off load shapes what is on the wire, not what is posted: a message posted late in an ON
//! phase behind a deep queue would leave in the OFF phase. The pacer keeps a fluid model of
//! the QP's queue (drained at the QP's share of the line rate, or at the rate its completions
//! showed so far) and posts in an ON phase only what the queue can drain before the phase ends.

use mrc_transport::{Duration, Instant};

use super::settings::Pattern;
#[cfg(test)]
use super::settings::Rate;

/// Release times of one QP's messages.
#[derive(Debug, Clone, Copy)]
pub struct Pacer {
    pattern: Pattern,
    size: u64,
    start: Instant,
    /// On/off: the rate the QP's queue drains at, bytes per ns (the line share if known).
    line_bytes_per_ns: Option<f64>,
    /// On/off: the rate learnt from completions when the line rate is not known.
    learnt_bytes_per_ns: Option<f64>,
    /// On/off: bytes posted and not yet drained (fluid model), as of `queue_at`.
    queue_bytes: f64,
    queue_at: Instant,
    /// Storage: messages posted, and when the current burst's first one went.
    posted: u64,
    burst_at: Option<Instant>,
}

impl Pacer {
    /// Messages of `size` bytes paced by `pattern` from `start`.
    pub fn new(pattern: Pattern, size: u64, start: Instant) -> Self {
        Self {
            pattern,
            size,
            start,
            line_bytes_per_ns: None,
            learnt_bytes_per_ns: None,
            queue_bytes: 0.0,
            queue_at: start,
            posted: 0,
            burst_at: None,
        }
    }

    /// On/off: the QP drains its queue at `gbps` (its share of the host's line rate); 0 or
    /// less: unknown, learnt from the completions ([`Self::on_completed`]).
    pub fn with_line_rate(mut self, gbps: f64) -> Self {
        self.line_bytes_per_ns = (gbps > 0.0).then_some(gbps / 8.0);
        self
    }

    fn drain_rate(&self) -> Option<f64> {
        self.line_bytes_per_ns.or(self.learnt_bytes_per_ns)
    }

    /// On/off: ON time elapsed from the start to `now`, ns.
    fn on_elapsed(&self, now: Instant, on: Duration, off: Duration) -> u64 {
        let period = (on + off).as_nanos().max(1);
        let t = now.saturating_since(self.start).as_nanos();
        t / period * on.as_nanos() + (t % period).min(on.as_nanos())
    }

    /// The earliest time message `k` (0-based) may be posted, given that it is `now`; `now`
    /// or earlier means at once.
    pub fn release(&mut self, k: u64, now: Instant) -> Instant {
        let from_start = |ns: f64| self.start + Duration(ns.max(0.0) as u64);
        match self.pattern {
            Pattern::Saturate => self.start,
            Pattern::Rate { rate, burst } => {
                let per_burst_ns = rate.burst_period_ns(burst, self.size);
                from_start((k / u64::from(burst.max(1))) as f64 * per_burst_ns)
            }
            Pattern::Storage { rate, burst } => {
                // Free-running: a period after the previous burst actually went.
                match self.burst_at {
                    Some(at) if k.is_multiple_of(u64::from(burst.max(1))) => {
                        at + Duration(rate.burst_period_ns(burst, self.size) as u64)
                    }
                    _ => self.start,
                }
            }
            Pattern::Bursts { burst, gap } => {
                let n = k / u64::from(burst.max(1));
                self.start + gap.saturating_mul(n)
            }
            Pattern::OnOff { on, off } => {
                let period = (on + off).as_nanos().max(1);
                let t = now.saturating_since(self.start).as_nanos();
                let next_on = self.start + Duration((t / period + 1) * period);
                if t % period >= on.as_nanos() {
                    return next_on;
                }
                let Some(rate) = self.drain_rate() else {
                    // Nothing known yet: the first phase saturates as asked.
                    return now;
                };
                self.drain(now, rate);
                let on_end = self.start + Duration(t / period * period + on.as_nanos());
                let room = rate * on_end.saturating_since(now).as_nanos() as f64;
                // An empty queue always takes one message (a phase shorter than a message
                // still sends); otherwise only what drains before the phase ends (§ module).
                if self.queue_bytes <= 0.0 || self.queue_bytes + self.size as f64 <= room {
                    now
                } else {
                    // The queue drains as fast as the phase runs out: no room until the next.
                    next_on
                }
            }
        }
    }

    fn drain(&mut self, now: Instant, rate: f64) {
        let dt = now.saturating_since(self.queue_at).as_nanos() as f64;
        self.queue_bytes = (self.queue_bytes - dt * rate).max(0.0);
        self.queue_at = now;
    }

    /// A message was posted at `now` (on/off: it joins the queue).
    pub fn on_posted(&mut self, now: Instant) {
        if let Pattern::Storage { burst, .. } = self.pattern {
            if self.posted.is_multiple_of(u64::from(burst.max(1))) {
                self.burst_at = Some(now);
            }
            self.posted += 1;
        }
        if matches!(self.pattern, Pattern::OnOff { .. })
            && let Some(rate) = self.drain_rate()
        {
            self.drain(now, rate);
            self.queue_bytes += self.size as f64;
        }
    }

    /// `messages` of the QP are known complete at `now`: with no line rate, their bytes over
    /// the ON time so far is the rate the queue drains at.
    pub fn on_completed(&mut self, messages: u64, now: Instant) {
        if let Pattern::OnOff { on, off } = self.pattern
            && self.line_bytes_per_ns.is_none()
        {
            let ns = self.on_elapsed(now, on, off);
            if ns > 0 && messages > 0 {
                let rate = (messages * self.size) as f64 / ns as f64;
                if self.learnt_bytes_per_ns.is_none() {
                    // From here on the model runs: what was posted before is assumed drained.
                    self.queue_at = now;
                }
                self.learnt_bytes_per_ns = Some(rate);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: Instant = Instant(1_000);

    #[test]
    fn storage_bursts_follow_the_previous_burst_as_it_went() {
        // 1 Gb/s, 1000-byte messages, bursts of 2: 16 us per burst.
        let mut p = Pacer::new(
            Pattern::Storage {
                rate: Rate::BitsPerSec(1e9),
                burst: 2,
            },
            1000,
            T0,
        );
        assert_eq!(p.release(0, T0), T0);
        p.on_posted(T0);
        assert_eq!(p.release(1, T0), T0, "the rest of a burst goes at once");
        p.on_posted(T0);
        assert_eq!(p.release(2, T0), T0 + Duration::from_micros(16));
        // The second burst went 5 us late: the third is due 16 us after it, not on the
        // schedule from the start (no catching up).
        let late = T0 + Duration::from_micros(21);
        p.on_posted(late);
        p.on_posted(late);
        assert_eq!(p.release(4, late), late + Duration::from_micros(16));
    }

    #[test]
    fn rate_releases_bursts_at_the_rate() {
        // 1 Gb/s, 1000-byte messages, bursts of 4: 32 µs per burst.
        let mut p = Pacer::new(
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
        let mut pps = Pacer::new(
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
        let mut p = Pacer::new(
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
        let mut p = Pacer::new(
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

    #[test]
    fn on_off_posts_only_what_drains_before_the_phase_ends() {
        // 10 Gb/s = 1.25 bytes/ns; ON 10 µs = 12 500 bytes = three 4000-byte messages.
        let on_off = Pattern::OnOff {
            on: Duration::from_micros(10),
            off: Duration::from_micros(30),
        };
        let mut p = Pacer::new(on_off, 4000, T0).with_line_rate(10.0);
        let mut posted = 0;
        while p.release(posted, T0) <= T0 {
            p.on_posted(T0);
            posted += 1;
        }
        assert_eq!(posted, 3, "the queue holds what 10 µs drain");
        // Refused now, refused until the next phase (no room opens inside it).
        assert_eq!(p.release(posted, T0), T0 + Duration::from_micros(40));
        let later = T0 + Duration::from_micros(5);
        assert_eq!(p.release(posted, later), T0 + Duration::from_micros(40));
        // The next phase starts with the queue drained.
        let next = T0 + Duration::from_micros(40);
        assert_eq!(p.release(posted, next), next);
    }

    #[test]
    fn on_off_learns_the_drain_rate_from_completions_without_a_line_rate() {
        let on_off = Pattern::OnOff {
            on: Duration::from_micros(10),
            off: Duration::from_micros(30),
        };
        let mut p = Pacer::new(on_off, 1000, T0);
        // Nothing known: the first phase saturates.
        for k in 0..50 {
            assert_eq!(p.release(k, T0), T0);
            p.on_posted(T0);
        }
        // 20 messages done 10 µs of ON time in: 2 bytes/ns.
        p.on_completed(20, T0 + Duration::from_micros(10));
        let next = T0 + Duration::from_micros(40);
        let mut posted = 0;
        while p.release(posted, next) <= next {
            p.on_posted(next);
            posted += 1;
        }
        assert_eq!(posted, 20, "20 000 bytes drain in the 10 µs phase");
    }
}
