//! Congestion control: sender-side and window-based, as MRC's NSCC is (brief §3.4), behind a
//! small trait so experiments can swap the policy from configuration (docs/STYLE.md rule 7).
//! The engine holds a [`Controller`], the enum over the implementations, so the per-packet
//! calls are direct ones (issue #13, static dispatch); [`build`] boxes one for trait users.
//!
//! A controller governs the packets of one or more QPs towards one destination (the spec's
//! QP Congestion Controller, QPCC). The engine asks it for a window (bytes allowed in flight,
//! counted with the nominal packet size of [`nominal_packet_bytes`]) and, for rate-based
//! baselines, for the earliest time the next packet may leave; it reports every send, SACK,
//! NACK and loss.
//!
//! | profile | controller | what for |
//! |---|---|---|
//! | [`CcProfile::Nscc`] | [`Nscc`] | MRC's own (`"uet-1.0-nscc"`): ECN × delay quadrants, Quick Adapt |
//! | [`CcProfile::Fixed`] | [`FixedWindow`] | a constant window, for tests not about CC |
//! | [`CcProfile::Dcqcn`] | [`Dcqcn`] | the RoCE baseline's rate controller, paced |

mod dcqcn;
mod fixed;
mod nscc;

#[cfg(test)]
mod model;

pub use dcqcn::{Dcqcn, DcqcnConfig, DcqcnStage};
pub use fixed::FixedWindow;
pub use nscc::{Nscc, NsccConfig, NsccParams, NsccStats};

use core::fmt;

use crate::time::{Duration, Instant};

/// Bytes a packet counts for in flight: its UDP payload plus 40 bytes (MRC 1.0 §8.3.1, brief
/// §3.4: "nominal packet size = UDP payload + 40 B").
pub const fn nominal_packet_bytes(udp_payload_bytes: u32) -> u32 {
    udp_payload_bytes + 40
}

/// What a SACK (or transport ACK) tells the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckSample {
    /// Nominal bytes newly acknowledged by this SACK (cumulatively or selectively).
    pub newly_acked_bytes: u64,
    /// Nominal bytes still in flight after processing this SACK.
    pub inflight_bytes: u64,
    /// RTT measured on the packet that triggered the SACK (reflected TSETH timestamp, or the
    /// send time kept locally), if any.
    pub rtt: Option<Duration>,
    /// The packet that triggered the SACK arrived ECN-CE marked (forward path congested).
    pub ecn: bool,
    /// Receiver window penalty 0..=127 from CC_STATE (brief §3.4, `rcv_cwnd_pen`).
    pub rcv_cwnd_pen: u8,
    /// Bytes the receiver says it has received since the previous SACK (from the wrapping
    /// 24-bit `rcvd_bytes` counter of CC_STATE, already unwrapped and scaled to bytes).
    pub rcvd_bytes_delta: u64,
}

/// Why a packet was negatively acknowledged, as far as congestion control cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackCause {
    /// Trimmed in the fabric (NACK TRIMMED): congestion on that path.
    Trimmed,
    /// Trimmed at the last hop (NACK TRIMMED_LASTHOP): incast at the destination.
    TrimmedLastHop,
    /// Any other retriable reason (no resources at the receiver, out of window, ...).
    Other,
}

/// What a NACK tells the controller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NackSample {
    /// Nominal bytes of the NACKed packet (they leave the flight: it will be resent).
    pub bytes: u64,
    /// Nominal bytes still in flight after removing the NACKed packet.
    pub inflight_bytes: u64,
    pub cause: NackCause,
    /// RTT measured from the NACK, if the echoed timestamp allows it.
    pub rtt: Option<Duration>,
}

/// A congestion controller (the spec's QPCC). Implementations are deterministic functions of
/// their inputs: no clock, no randomness of their own.
pub trait CongestionController: fmt::Debug + Send {
    /// Short name for reports (`"nscc"`, `"fixed"`, `"dcqcn"`).
    fn name(&self) -> &'static str;

    /// Nominal bytes that may be in flight now.
    fn window(&self) -> u64;

    /// For rate-based controllers: the earliest time the next packet may leave. Window-only
    /// controllers return `None` (send whenever the window allows).
    fn next_send_time(&self, now: Instant) -> Option<Instant> {
        let _ = now;
        None
    }

    /// A packet of `bytes` nominal bytes left (new data or retransmission).
    fn on_packet_sent(&mut self, now: Instant, bytes: u32);

    /// A SACK arrived.
    fn on_ack(&mut self, now: Instant, ack: &AckSample);

    /// A NACK arrived.
    fn on_nack(&mut self, now: Instant, nack: &NackSample);

    /// A packet of `bytes` nominal bytes was declared lost without a trim (timeout or inferred
    /// from SACK holes).
    fn on_loss(&mut self, now: Instant, bytes: u64);
}

/// Link facts a controller is sized from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PathFacts {
    /// Aggregate line rate of the local ports the QP sprays over, bits per second.
    pub line_rate_bps: u64,
    /// Base (unloaded) round-trip time.
    pub base_rtt: Duration,
    /// Nominal bytes of a full-size packet (MTU payload + headers, see
    /// [`nominal_packet_bytes`]).
    pub mtu_bytes: u32,
}

impl PathFacts {
    /// Bandwidth-delay product in bytes.
    pub fn bdp_bytes(&self) -> u64 {
        (u128::from(self.line_rate_bps) * u128::from(self.base_rtt.as_nanos()) / 8_000_000_000)
            as u64
    }
}

/// Which controller a QP uses, with its parameters: the CC profile of the OCP API (brief §3.4,
/// `mrc_ctl.h`). Built into a controller by [`build`].
#[derive(Debug, Clone, PartialEq)]
pub enum CcProfile {
    /// A constant window (baseline for experiments).
    Fixed {
        /// Window in nominal bytes; `None` = one bandwidth-delay product.
        window_bytes: Option<u64>,
    },
    /// NSCC, MRC's own controller (`"uet-1.0-nscc"`, brief §3.4).
    Nscc(NsccConfig),
    /// A DCQCN rate controller, for the RoCE-like baseline.
    Dcqcn(DcqcnConfig),
}

impl Default for CcProfile {
    fn default() -> Self {
        Self::Fixed { window_bytes: None }
    }
}

/// Build the controller a profile names, sized from the path facts (a factory, as quinn's
/// congestion controllers are built), as a trait object.
pub fn build(profile: &CcProfile, facts: &PathFacts) -> Box<dyn CongestionController> {
    Box::new(Controller::new(profile, facts))
}

/// One of the controllers, called without a virtual call: each arm is the implementation's
/// own [`CongestionController`] method (issue #13, static dispatch on the per-packet path).
#[derive(Debug, Clone)]
pub enum Controller {
    Fixed(FixedWindow),
    Nscc(Nscc),
    Dcqcn(Dcqcn),
}

impl Controller {
    /// The controller a profile names, sized from the path facts.
    pub fn new(profile: &CcProfile, facts: &PathFacts) -> Self {
        match profile {
            CcProfile::Fixed { window_bytes } => {
                Self::Fixed(FixedWindow::new(window_bytes.unwrap_or_else(|| {
                    facts.bdp_bytes().max(u64::from(facts.mtu_bytes))
                })))
            }
            CcProfile::Nscc(config) => Self::Nscc(Nscc::new(config, facts)),
            CcProfile::Dcqcn(config) => Self::Dcqcn(Dcqcn::new(config, facts)),
        }
    }
}

/// The trait's methods, inherent so callers need not import the trait.
impl Controller {
    pub fn name(&self) -> &'static str {
        match self {
            Self::Fixed(c) => c.name(),
            Self::Nscc(c) => c.name(),
            Self::Dcqcn(c) => c.name(),
        }
    }

    #[inline]
    pub fn window(&self) -> u64 {
        match self {
            Self::Fixed(c) => c.window(),
            Self::Nscc(c) => c.window(),
            Self::Dcqcn(c) => c.window(),
        }
    }

    #[inline]
    pub fn next_send_time(&self, now: Instant) -> Option<Instant> {
        match self {
            Self::Fixed(c) => c.next_send_time(now),
            Self::Nscc(c) => c.next_send_time(now),
            Self::Dcqcn(c) => c.next_send_time(now),
        }
    }

    #[inline]
    pub fn on_packet_sent(&mut self, now: Instant, bytes: u32) {
        match self {
            Self::Fixed(c) => c.on_packet_sent(now, bytes),
            Self::Nscc(c) => c.on_packet_sent(now, bytes),
            Self::Dcqcn(c) => c.on_packet_sent(now, bytes),
        }
    }

    #[inline]
    pub fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        match self {
            Self::Fixed(c) => c.on_ack(now, ack),
            Self::Nscc(c) => c.on_ack(now, ack),
            Self::Dcqcn(c) => c.on_ack(now, ack),
        }
    }

    #[inline]
    pub fn on_nack(&mut self, now: Instant, nack: &NackSample) {
        match self {
            Self::Fixed(c) => c.on_nack(now, nack),
            Self::Nscc(c) => c.on_nack(now, nack),
            Self::Dcqcn(c) => c.on_nack(now, nack),
        }
    }

    #[inline]
    pub fn on_loss(&mut self, now: Instant, bytes: u64) {
        match self {
            Self::Fixed(c) => c.on_loss(now, bytes),
            Self::Nscc(c) => c.on_loss(now, bytes),
            Self::Dcqcn(c) => c.on_loss(now, bytes),
        }
    }
}

impl CongestionController for Controller {
    fn name(&self) -> &'static str {
        Controller::name(self)
    }

    #[inline]
    fn window(&self) -> u64 {
        Controller::window(self)
    }

    #[inline]
    fn next_send_time(&self, now: Instant) -> Option<Instant> {
        Controller::next_send_time(self, now)
    }

    #[inline]
    fn on_packet_sent(&mut self, now: Instant, bytes: u32) {
        Controller::on_packet_sent(self, now, bytes);
    }

    #[inline]
    fn on_ack(&mut self, now: Instant, ack: &AckSample) {
        Controller::on_ack(self, now, ack);
    }

    #[inline]
    fn on_nack(&mut self, now: Instant, nack: &NackSample) {
        Controller::on_nack(self, now, nack);
    }

    #[inline]
    fn on_loss(&mut self, now: Instant, bytes: u64) {
        Controller::on_loss(self, now, bytes);
    }
}
