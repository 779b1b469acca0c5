//! When the responder sends a SACK (MRC 1.0 §7.5.2, brief §4.2), as a small trait built by a
//! factory so experiments can swap the policy. The responder holds a [`SackPolicy`], the enum
//! over the implementations, so its per-packet calls are direct ones (issue #13, static
//! dispatch).
//!
//! The default policy SACKs at once for an ECN-CE-marked packet (its EV must get its own
//! verdict), a retransmission, a duplicate, a packet asking for it (BTH AckReq), the first gap
//! opening and a gap being filled (the cumulative ACK jumping); otherwise it coalesces up to a
//! number of packets, of bytes, or a delay, whichever comes first. Probes are always answered
//! at once, outside the policy.

use core::fmt;

use crate::config::AckConfig;
use crate::time::Instant;

/// What the responder knows about a data packet it just accepted (or found duplicate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DataArrival {
    /// Payload bytes.
    pub bytes: u32,
    /// Arrived ECN-CE marked.
    pub ecn_ce: bool,
    /// BTH `rtx`: the requester resent it.
    pub retransmission: bool,
    /// BTH AckReq.
    pub ack_req: bool,
    /// Already received before.
    pub duplicate: bool,
    /// It opened the first gap above the cumulative ACK.
    pub new_hole: bool,
    /// It filled the gap at the cumulative ACK, which jumped over later arrivals.
    pub filled_hole: bool,
}

/// The policy's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckDecision {
    /// Send a SACK now.
    Now,
    /// A SACK is due at this time at the latest.
    By(Instant),
}

/// A SACK policy.
pub trait AckPolicy: fmt::Debug + Send {
    /// A data packet arrived.
    fn on_data(&mut self, now: Instant, arrival: &DataArrival) -> AckDecision;
    /// A SACK left (whatever triggered it): coalescing starts over.
    fn on_sack_sent(&mut self);
}

/// Build the default policy from its configuration, as a trait object.
pub fn build_ack_policy(config: &AckConfig) -> Box<dyn AckPolicy> {
    Box::new(SackPolicy::new(config))
}

/// One of the SACK policies, called without a virtual call: each arm is the implementation's
/// own [`AckPolicy`] method (issue #13, static dispatch on the per-packet path).
#[derive(Debug, Clone)]
pub enum SackPolicy {
    Coalescing(Coalescing),
}

impl SackPolicy {
    /// The default policy from its configuration.
    pub const fn new(config: &AckConfig) -> Self {
        Self::Coalescing(Coalescing::new(*config))
    }
}

impl AckPolicy for SackPolicy {
    #[inline]
    fn on_data(&mut self, now: Instant, arrival: &DataArrival) -> AckDecision {
        match self {
            Self::Coalescing(p) => p.on_data(now, arrival),
        }
    }

    #[inline]
    fn on_sack_sent(&mut self) {
        match self {
            Self::Coalescing(p) => p.on_sack_sent(),
        }
    }
}

/// The default policy (see the module documentation).
#[derive(Debug, Clone)]
pub struct Coalescing {
    config: AckConfig,
    packets: u32,
    bytes: u32,
    since: Option<Instant>,
}

impl Coalescing {
    pub const fn new(config: AckConfig) -> Self {
        Self {
            config,
            packets: 0,
            bytes: 0,
            since: None,
        }
    }
}

impl AckPolicy for Coalescing {
    // Inlined into the responder: `a`'s flags, stored one byte each just before, were read
    // back as one 16-byte vector and stalled on store forwarding (issue #13).
    #[inline(always)]
    fn on_data(&mut self, now: Instant, a: &DataArrival) -> AckDecision {
        if a.ecn_ce || a.retransmission || a.ack_req || a.duplicate || a.new_hole || a.filled_hole {
            return AckDecision::Now;
        }
        self.packets += 1;
        self.bytes = self.bytes.saturating_add(a.bytes);
        if self.packets >= self.config.every_packets || self.bytes >= self.config.every_bytes {
            return AckDecision::Now;
        }
        let since = *self.since.get_or_insert(now);
        AckDecision::By(since + self.config.delay)
    }

    fn on_sack_sent(&mut self) {
        self.packets = 0;
        self.bytes = 0;
        self.since = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn policy() -> Box<dyn AckPolicy> {
        build_ack_policy(&AckConfig {
            every_packets: 3,
            every_bytes: 10_000,
            delay: Duration::from_micros(2),
        })
    }

    #[test]
    fn coalesces_plain_arrivals_up_to_a_count_or_a_delay() {
        let mut p = policy();
        let plain = DataArrival {
            bytes: 100,
            ..DataArrival::default()
        };
        let t0 = Instant(1_000);
        assert_eq!(p.on_data(t0, &plain), AckDecision::By(Instant(3_000)));
        assert_eq!(
            p.on_data(Instant(1_500), &plain),
            AckDecision::By(Instant(3_000))
        );
        assert_eq!(p.on_data(Instant(1_600), &plain), AckDecision::Now);
        p.on_sack_sent();
        assert_eq!(
            p.on_data(Instant(5_000), &plain),
            AckDecision::By(Instant(7_000))
        );
        let big = DataArrival {
            bytes: 20_000,
            ..plain
        };
        assert_eq!(p.on_data(Instant(5_001), &big), AckDecision::Now);
    }

    #[test]
    fn every_trigger_sacks_at_once() {
        let mut p = policy();
        let triggers = [
            DataArrival {
                ecn_ce: true,
                ..DataArrival::default()
            },
            DataArrival {
                retransmission: true,
                ..DataArrival::default()
            },
            DataArrival {
                ack_req: true,
                ..DataArrival::default()
            },
            DataArrival {
                duplicate: true,
                ..DataArrival::default()
            },
            DataArrival {
                new_hole: true,
                ..DataArrival::default()
            },
            DataArrival {
                filled_hole: true,
                ..DataArrival::default()
            },
        ];
        for a in triggers {
            assert_eq!(p.on_data(Instant(0), &a), AckDecision::Now, "{a:?}");
        }
    }
}
