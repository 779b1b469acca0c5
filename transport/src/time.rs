//! Time as the engine sees it: nanoseconds in `u64` newtypes. The engine never reads a clock;
//! the caller (simulator, NIC poll loop) passes `now` into every `handle_*`/`poll_*` call.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A point in time, in nanoseconds since an arbitrary epoch chosen by the caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(pub u64);

/// A span of time in nanoseconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Duration(pub u64);

impl Instant {
    /// The epoch.
    pub const ZERO: Self = Self(0);
    /// A time later than any the engine will see.
    pub const MAX: Self = Self(u64::MAX);

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self - earlier`, or zero if `earlier` is later.
    pub const fn saturating_since(self, earlier: Self) -> Duration {
        Duration(self.0.saturating_sub(earlier.0))
    }
}

impl Duration {
    /// Zero.
    pub const ZERO: Self = Self(0);
    /// The longest span.
    pub const MAX: Self = Self(u64::MAX);

    /// From nanoseconds.
    pub const fn from_nanos(ns: u64) -> Self {
        Self(ns)
    }
    /// From microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Self(us.saturating_mul(1_000))
    }
    /// From milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Self(ms.saturating_mul(1_000_000))
    }
    /// From seconds.
    pub const fn from_secs(s: u64) -> Self {
        Self(s.saturating_mul(1_000_000_000))
    }
    /// Nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// Seconds, as a float (for reports only).
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e9
    }
    /// `self * k`, saturating.
    pub const fn saturating_mul(self, k: u64) -> Self {
        Self(self.0.saturating_mul(k))
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(d.0))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_since(earlier)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, d: Duration) -> Duration {
        Duration(self.0.saturating_add(d.0))
    }
}

impl Sub for Duration {
    type Output = Duration;
    fn sub(self, d: Duration) -> Duration {
        Duration(self.0.saturating_sub(d.0))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0;
        if ns < 1_000 {
            write!(f, "{ns}ns")
        } else if ns < 1_000_000 {
            write!(f, "{:.3}us", ns as f64 / 1e3)
        } else if ns < 1_000_000_000 {
            write!(f, "{:.3}ms", ns as f64 / 1e6)
        } else {
            write!(f, "{:.3}s", ns as f64 / 1e9)
        }
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t={}", Duration(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant(5) - Instant(9), Duration::ZERO);
        assert_eq!(Instant::MAX + Duration(1), Instant::MAX);
        assert_eq!(Duration::from_micros(3).as_nanos(), 3_000);
        assert_eq!(format!("{}", Duration(1_500)), "1.500us");
    }
}
