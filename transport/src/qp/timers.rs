//! The named deadlines of one connected QP (quinn-proto's `TimerTable`): each is written by the
//! part that owns it when its inputs change, and the endpoint arms the earliest
//! ([`TimerTable::next`]). A deadline later than the one armed needs nothing: it is found when
//! the armed one fires (a spurious wake-up is harmless).

use crate::time::Instant;

/// What a QP waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// A coalesced SACK is due (the responder's SACK policy, brief §4.2).
    Sack,
    /// A port the peer said was down is probed again (brief §3.10).
    RemotePorts,
    /// The congestion controller's pacing lets the next packet leave.
    Pace,
    /// RACK loss inference would declare the oldest transmission lost (brief §3.6).
    Loss,
    /// The per-packet path-failure timeout of the oldest transmission (brief §3.7).
    PacketTimeout,
    /// The long QP retry budget's interval ends (brief §3.7).
    Retry,
    /// A probe of a retired EV is due, or its answer overdue (brief §3.3).
    Probe,
    /// The flight has been quiet long enough for a tail loss probe (RFC 8985 §7).
    TailProbe,
}

const TIMERS: usize = 8;

/// The deadlines of one QP, by name.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TimerTable {
    at: [Option<Instant>; TIMERS],
    /// The earliest of `at` (read after every input: kept, not searched).
    next: Option<Instant>,
}

impl TimerTable {
    pub fn set(&mut self, timer: Timer, at: Option<Instant>) {
        let old = core::mem::replace(&mut self.at[timer as usize], at);
        if old == at {
            return;
        }
        self.next = if old.is_some() && old == self.next {
            // The earliest moved or stopped: search again.
            self.at.iter().flatten().min().copied()
        } else {
            self.next.into_iter().chain(at).min()
        };
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.at[timer as usize]
    }

    /// Every deadline stops except `keep`.
    pub fn stop_all_but(&mut self, keep: Timer) {
        let kept = self.get(keep);
        self.at = [None; TIMERS];
        self.at[keep as usize] = kept;
        self.next = kept;
    }

    /// The earliest deadline.
    #[inline]
    pub fn next(&self) -> Option<Instant> {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_earliest_named_deadline_is_next() {
        let mut t = TimerTable::default();
        assert_eq!(t.next(), None);
        t.set(Timer::Retry, Some(Instant(50)));
        t.set(Timer::Sack, Some(Instant(20)));
        t.set(Timer::Probe, Some(Instant(30)));
        assert_eq!(t.next(), Some(Instant(20)));
        t.set(Timer::Sack, None);
        assert_eq!(t.next(), Some(Instant(30)));
        t.stop_all_but(Timer::Retry);
        assert_eq!(t.get(Timer::Probe), None);
        assert_eq!(t.next(), Some(Instant(50)));
    }

    #[test]
    fn the_kept_earliest_is_the_searched_one_whatever_the_order_of_changes() {
        let timers = [
            Timer::Sack,
            Timer::RemotePorts,
            Timer::Pace,
            Timer::Loss,
            Timer::PacketTimeout,
            Timer::Retry,
            Timer::Probe,
            Timer::TailProbe,
        ];
        let mut t = TimerTable::default();
        let mut x = 12_345u64;
        for _ in 0..5_000 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            let timer = timers[(x >> 33) as usize % timers.len()];
            let at = (!(x >> 20).is_multiple_of(4)).then_some(Instant((x >> 40) % 64));
            t.set(timer, at);
            assert_eq!(t.next(), t.at.iter().flatten().min().copied());
        }
    }
}
