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
}

const TIMERS: usize = 7;

/// The deadlines of one QP, by name.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TimerTable {
    at: [Option<Instant>; TIMERS],
}

impl TimerTable {
    pub fn set(&mut self, timer: Timer, at: Option<Instant>) {
        self.at[timer as usize] = at;
    }

    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.at[timer as usize]
    }

    /// Every deadline stops except `keep`.
    pub fn stop_all_but(&mut self, keep: Timer) {
        let kept = self.get(keep);
        self.at = [None; TIMERS];
        self.set(keep, kept);
    }

    /// The earliest deadline.
    #[inline]
    pub fn next(&self) -> Option<Instant> {
        self.at.iter().flatten().min().copied()
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
}
