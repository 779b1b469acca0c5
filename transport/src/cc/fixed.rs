//! A constant window: the simplest baseline, and what the engine tests use when congestion
//! control is not what they are about.

use super::{AckSample, CongestionController, NackSample};
use crate::time::Instant;

/// A window that never changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FixedWindow {
    window: u64,
}

impl FixedWindow {
    /// A controller that always allows `window` nominal bytes in flight.
    pub const fn new(window: u64) -> Self {
        Self { window }
    }
}

impl CongestionController for FixedWindow {
    fn name(&self) -> &'static str {
        "fixed"
    }
    fn window(&self) -> u64 {
        self.window
    }
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u32) {}
    fn on_ack(&mut self, _now: Instant, _ack: &AckSample) {}
    fn on_nack(&mut self, _now: Instant, _nack: &NackSample) {}
    fn on_loss(&mut self, _now: Instant, _bytes: u64) {}
}

#[cfg(test)]
mod tests {
    use super::super::{CcProfile, PathFacts, build};
    use crate::time::Duration;

    #[test]
    fn default_fixed_window_is_one_bdp() {
        let facts = PathFacts {
            line_rate_bps: 400_000_000_000,
            base_rtt: Duration::from_micros(10),
            mtu_bytes: 4136,
        };
        let cc = build(&CcProfile::default(), &facts);
        assert_eq!(cc.name(), "fixed");
        assert_eq!(cc.window(), 500_000);
    }
}
