//! Entropy values (EVs): the paths one QP sprays over (MRC 1.0 §6, brief §3.1–§3.3, §3.9).
//!
//! - [`EvTable`]: a QP's EVs with their health states (GOOD / SKIP / ASSUMED_BAD / DENIED),
//!   active and backup sets per plane, same-plane replacement with a per-plane floor, probe
//!   schedule of retired EVs with hysteresis, and the reverse EVs control packets leave on.
//! - Generation: from the fabric plan's paths in SRv6 mode ([`PathSource`]), random source
//!   ports and flow labels in ECMP mode.
//! - [`EvSelector`]: per-packet choice, a small trait, and [`Selector`], the enum over its
//!   implementations [`build_selector`] builds (static dispatch): spraying in a plane-balanced
//!   pseudo-random rotation, REPS-style recycling for ECMP, or a single path.
//! - Hot state apart from cold: [`EvTable`] keeps the per-packet fields of every EV
//!   ([`HotEv`], one cache line) apart from its route, probe state and counters.
//! - [`RemapDetector`]: ECMP mode's reading of a burst of failures as a remap.

mod health;
mod paths;
mod remap;
mod selector;
mod table;

pub use crate::path::{PathSource, SrPath};
pub(crate) use health::EvEvent;
pub(crate) use paths::Paths;
pub use remap::RemapDetector;
pub use selector::{EvSelector, Recycle, Selector, SinglePath, Spray, build_selector};
pub use table::{EvChange, EvTable, Retire};

use core::fmt;

use crate::reliability::RttEstimator;
use crate::stats::EvStats;
use crate::time::{Duration, Instant};

/// An EV's index in its QP's table.
pub type EvId = u16;

/// Health of an EV (brief §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvState {
    /// Usable.
    Good,
    /// Bypassed for the rest of the current rotation (trim or ECN on it), then usable again.
    Skip,
    /// Retired after a silent loss; comes back only after consecutive successful probes.
    AssumedBad,
    /// Administratively denied; never used, never probed.
    Denied,
}

impl fmt::Display for EvState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Good => "GOOD",
            Self::Skip => "SKIP",
            Self::AssumedBad => "ASSUMED_BAD",
            Self::Denied => "DENIED",
        })
    }
}

/// Which set an EV belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvRole {
    /// In the rotation.
    Active,
    /// Waiting to replace a retired EV of its plane.
    Backup,
    /// Out of both sets (ASSUMED_BAD or DENIED).
    Out,
}

/// How EVs are named on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EvKind {
    /// SRv6: the EV names a path of the plan; the UDP source port carries the EV's index.
    Srv6,
    /// ECMP: the EV is what switches hash; the flow label's low 12 bits carry the index.
    Ecmp,
}

/// Probe bookkeeping of a retired EV (brief §3.3 \[I\]: hysteresis, backoff).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeState {
    /// When the next probe may leave.
    pub next_at: Instant,
    /// Current spacing between failed probes (doubles up to the configured maximum).
    pub interval: Duration,
    /// Consecutive successes so far.
    pub successes: u8,
    /// Send time of the probe awaiting an answer.
    pub outstanding: Option<Instant>,
}

/// What `Endpoint::ev_stats` reports about one EV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvInfo {
    pub id: EvId,
    pub plane: u8,
    pub state: EvState,
    pub role: EvRole,
    /// The 32-bit EV on the wire.
    pub entropy: u32,
    /// SRv6 mode: the route.
    pub path: Option<SrPath>,
    pub stats: EvStats,
}

/// One EV, whole: a snapshot [`EvTable::ev`] assembles from the table's parallel arrays (the
/// per-packet [`HotEv`], the cold route and probe state, the counters) for reports and tests.
/// The datapath reads [`EvTable::hot`] and [`EvTable::route`] instead (issue #13, hot state
/// apart from cold).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ev {
    /// The plane (= local port) it leaves on.
    pub plane: u8,
    pub state: EvState,
    pub role: EvRole,
    /// Rotation during which a SKIP holds.
    pub skip_round: u32,
    /// The 32-bit EV on the wire (UDP source port + flow label).
    pub entropy: u32,
    /// SRv6 mode: the route.
    pub path: Option<SrPath>,
    pub probe: ProbeState,
    /// First transmissions inferred lost in a row since the last delivery of anything sent on
    /// it (brief §3.6: a hole may be reordering; §3.7: silence is failure).
    pub suspect_losses: u8,
    /// This path's round-trip time (brief §3.6, §3.7: the floor of its loss inference and of
    /// its per-packet timeout), sampled from every SACK that acknowledges packets sent on it.
    pub rtt: RttEstimator,
    /// Send time of the most recently sent first transmission on this EV that the SACK being
    /// merged acknowledges: its RTT sample, taken once the SACK is merged.
    pub rtt_pending: Option<Instant>,
    pub stats: EvStats,
}

/// The part of an EV the per-packet path reads and writes (issue #13, hot state apart from
/// cold): what the selector's [`EvTable::usable`] reads (plane, role, state, SKIP round), the
/// entropy feedback is matched against, the loss-inference count and the path's RTT (brief
/// §3.2, §3.3, §3.6, §3.7). One cache line; the route, the probe state and the counters sit in
/// parallel arrays of the table, at the same index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(align(64))]
pub struct HotEv {
    /// The plane (= local port) it leaves on.
    pub plane: u8,
    pub state: EvState,
    pub role: EvRole,
    /// First transmissions inferred lost in a row since the last delivery (see
    /// [`Ev::suspect_losses`]).
    pub suspect_losses: u8,
    /// The outcomes of the last 16 first transmissions on it, newest in bit 0, a bit set for
    /// each inferred lost (a gray path's loss rate, brief §6.2 #15).
    pub recent_losses: u16,
    /// Whether `rtt_pending_at` holds a sample (an `Option<Instant>` split so the line holds).
    rtt_pending_set: bool,
    /// Rotation during which a SKIP holds.
    pub skip_round: u32,
    /// The 32-bit EV on the wire (UDP source port + flow label).
    pub entropy: u32,
    rtt_pending_at: Instant,
    /// This path's round-trip time (see [`Ev::rtt`]).
    pub rtt: RttEstimator,
}

// The hot state is one cache line and must not silently grow (issue #13).
const _: () = assert!(size_of::<HotEv>() <= 64);

impl HotEv {
    /// Send time of the RTT sample pending from the SACK being merged (see
    /// [`Ev::rtt_pending`]).
    #[inline]
    pub fn rtt_pending(&self) -> Option<Instant> {
        self.rtt_pending_set.then_some(self.rtt_pending_at)
    }

    #[inline]
    fn set_rtt_pending(&mut self, at: Option<Instant>) {
        self.rtt_pending_set = at.is_some();
        self.rtt_pending_at = at.unwrap_or(Instant::ZERO);
    }

    /// `Option::take` of the pending sample.
    #[inline]
    fn take_rtt_pending(&mut self) -> Option<Instant> {
        let t = self.rtt_pending();
        self.set_rtt_pending(None);
        t
    }

    /// `Option::replace` of the pending sample.
    #[inline]
    fn replace_rtt_pending(&mut self, at: Instant) -> Option<Instant> {
        let t = self.rtt_pending();
        self.set_rtt_pending(Some(at));
        t
    }
}

/// What a frame leaving on an EV needs of it: the plane it leaves on, its entropy and, in SRv6
/// mode, its route ([`EvTable::route`]; the route lives in the cold array).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvRoute {
    /// The plane (= local port) it leaves on.
    pub plane: u8,
    /// The 32-bit EV on the wire (UDP source port + flow label).
    pub entropy: u32,
    /// SRv6 mode: the route.
    pub path: Option<SrPath>,
}

/// An [`EvRoute`] borrowed from its table ([`EvTable::route_ref`]): what the frame builders
/// read per packet, without copying the 33-byte route through the stack on the way (issue
/// #13: a 16-byte load of a route stored piecewise just before stalled on store forwarding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvRouteRef<'a> {
    pub plane: u8,
    pub entropy: u32,
    pub path: Option<&'a SrPath>,
}

/// The cold part of an EV: its route (read once per frame it leaves on, never by the
/// selector) and its probe bookkeeping (retired EVs only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ColdEv {
    path: Option<SrPath>,
    probe: ProbeState,
}
