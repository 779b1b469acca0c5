//! Simulated time: integer **picoseconds** in a `u64` (about 213 days of range).
//!
//! Nanoseconds are too coarse for serialisation at 400–800 Gb/s (a 64-byte control frame takes
//! 0.64 ns at 800 Gb/s), so links and queues count picoseconds; the engines see nanoseconds
//! (`mrc_transport::Instant`, rounded down), which is what their timers and TSETH use.

use mrc_transport::{Duration, Instant};

/// A point in simulated time, in picoseconds since the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SimTime(pub u64);

impl SimTime {
    pub const ZERO: Self = Self(0);
    pub const MAX: Self = Self(u64::MAX);
    /// The last whole microsecond the clock reaches (about 213 days).
    pub const MAX_MICROS: u64 = u64::MAX / 1_000_000;

    /// `us` microseconds, if the clock reaches them ([`Self::MAX_MICROS`]).
    pub const fn from_micros(us: u64) -> Option<Self> {
        match us.checked_mul(1_000_000) {
            Some(ps) => Some(Self(ps)),
            None => None,
        }
    }

    /// `ns` nanoseconds, if the clock reaches them.
    pub const fn from_nanos(ns: u64) -> Option<Self> {
        match ns.checked_mul(1000) {
            Some(ps) => Some(Self(ps)),
            None => None,
        }
    }

    /// From an engine instant (nanoseconds).
    pub const fn from_instant(t: Instant) -> Self {
        Self(t.0.saturating_mul(1000))
    }

    /// The engine instant (nanoseconds, rounded down).
    pub const fn instant(self) -> Instant {
        Instant(self.0 / 1000)
    }

    /// Nanoseconds, rounded down.
    pub const fn as_nanos(self) -> u64 {
        self.0 / 1000
    }

    /// Microseconds as a float (reports).
    pub fn as_micros_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// This time plus `ps` picoseconds.
    pub const fn plus_ps(self, ps: u64) -> Self {
        Self(self.0.saturating_add(ps))
    }

    /// This time plus an engine duration.
    pub const fn plus(self, d: Duration) -> Self {
        Self(self.0.saturating_add(d.0.saturating_mul(1000)))
    }
}

/// Picoseconds to serialise `bytes` at `gbps` gigabits per second (exact for rates dividing
/// 8000, e.g. 100, 200, 400, 800; rounded up otherwise).
pub const fn serialisation_ps(bytes: usize, gbps: u32) -> u64 {
    let bits_ps = bytes as u64 * 8 * 1000;
    bits_ps.div_ceil(gbps as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serialisation_is_exact_at_fabric_rates() {
        assert_eq!(serialisation_ps(4096, 400), 81_920);
        assert_eq!(serialisation_ps(64, 800), 640);
        assert_eq!(serialisation_ps(1, 100), 80);
        assert_eq!(SimTime(1_999).instant(), Instant(1));
        assert_eq!(SimTime::from_instant(Instant(3)), SimTime(3000));
        assert_eq!(
            SimTime::from_micros(SimTime::MAX_MICROS),
            Some(SimTime(SimTime::MAX_MICROS * 1_000_000))
        );
        assert_eq!(SimTime::from_micros(SimTime::MAX_MICROS + 1), None);
        assert_eq!(SimTime::from_nanos(u64::MAX), None);
    }
}
