//! Congestion control: sender-side and window-based, as MRC's NSCC is (brief §3.4), behind a
//! small trait so experiments can swap the policy from configuration (docs/STYLE.md rule 7).
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
/// congestion controllers are built).
pub fn build(profile: &CcProfile, facts: &PathFacts) -> Box<dyn CongestionController> {
    match profile {
        CcProfile::Fixed { window_bytes } => {
            Box::new(FixedWindow::new(window_bytes.unwrap_or_else(|| {
                facts.bdp_bytes().max(u64::from(facts.mtu_bytes))
            })))
        }
        CcProfile::Nscc(config) => Box::new(Nscc::new(config, facts)),
        CcProfile::Dcqcn(config) => Box::new(Dcqcn::new(config, facts)),
    }
}
