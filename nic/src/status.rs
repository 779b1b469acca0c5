//! What the NIC tells of itself: plain snapshots of its runtime counters and of its ports, the
//! answers of control calls (and of a runner that stopped).

use crate::io::IoStats;
use crate::ndp::NdpStats;

/// Counters of the NIC runtime (the engine has its own: `endpoint_stats`, `qp_stats`...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NicStats {
    /// Poll-loop iterations.
    pub iterations: u64,
    /// Iterations that found work.
    pub busy_iterations: u64,
    /// Frames handed to the engine.
    pub frames_to_engine: u64,
    /// RX bursts handed to the engine, one `Endpoint::handle_packets` call each (issue #13,
    /// the NIC loop in l2fwd shape).
    pub rx_bursts_to_engine: u64,
    /// Frames the engine produced.
    pub frames_from_engine: u64,
    /// TX bursts the engine filled (one `Endpoint::poll_transmit_burst` call that wrote at
    /// least one frame each).
    pub tx_bursts_from_engine: u64,
    /// Neighbour-discovery frames received / sent.
    pub ndp_frames_in: u64,
    pub ndp_frames_out: u64,
    /// Doorbells taken from the ring.
    pub doorbells: u64,
    /// Doorbells that found their queue full and waited on the NIC side.
    pub doorbells_deferred: u64,
    /// Doorbells the engine refused (completed with an error, or rejected as an event).
    pub doorbell_errors: u64,
    /// Control commands run.
    pub commands: u64,
    /// Completions moved to the application's rings.
    pub completions: u64,
    /// Link state changes seen.
    pub link_changes: u64,
    /// Events dropped because the application did not drain them.
    pub events_dropped: u64,
    /// The ports.
    pub io: IoStats,
    /// Neighbour discovery.
    pub ndp: NdpStats,
}

/// What the NIC knows of one port (= plane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortState {
    /// The link is up, as the port reports it (read once per link-poll interval).
    pub link_up: bool,
    /// The next hop's MAC, once known (static or resolved).
    pub next_hop: Option<mrc_srv6::wire::EthernetAddress>,
    /// The engine may send on it: link up and next hop known.
    pub usable: bool,
}
