//! A deterministic test harness: two or more nodes (engine [`Endpoint`](crate)s, or
//! [`RawNode`]s) joined by lossy paths, driven in virtual time from one seeded generator.
//! Same seed and same inputs, same run, down to the [`TraceEvent`] (docs/STYLE.md rule 6).
//!
//! ```text
//!  node ──port p──▶ NIC TX ring (port rate) ──▶ path select ──▶ path k: queue → rate → link ──▶ peer, port p
//! ```
//!
//! - A node is anything with the engine's sans-IO contract ([`Node`]). The harness drains it
//!   the way the contract says: after any input, `poll_transmit` until `None` (with the ports
//!   that are up and have TX room in `ready`), then `poll_event`, then `poll_timeout`.
//! - [`Harness::connect`] joins two nodes on each of their ports (a port is a plane) through
//!   `paths_per_port` paths per direction. A frame's path is picked from its headers by a
//!   [`PathSelect`] (the SRv6 DA, or an ECMP hash of the EV fields).
//! - Each path direction ([`PathModel`]) has its own rate, latency, queue with ECN marking and
//!   trimming, random loss, reordering and duplication, and can be taken down and up on a
//!   schedule ([`Harness::schedule_path`]); node ports too ([`Harness::schedule_port`]).
//! - Time is integer nanoseconds; ties run in the order they were scheduled; no wall clock.
//!   [`Harness::run_until_idle`] fails instead of hanging when its [`Bound`] is reached.
//!
//! A scenario reads like a story (see `scenario_tests.rs`):
//!
//! ```text
//! let mut h = Harness::new(HarnessConfig { seed, ..HarnessConfig::default() });
//! let a = h.add_node(endpoint_a, NodeSpec { addr: Some(nic_a), ports: vec![PortModel::default(); 2] });
//! let b = h.add_node(endpoint_b, NodeSpec { addr: Some(nic_b), ports: vec![PortModel::default(); 2] });
//! let link = h.connect(a, b, &LinkSpec { ports: vec![0, 1], paths_per_port: 4,
//!     select: PathSelect::OuterDaHash, forward: lossy, reverse: PathModel::default() });
//! let qp = h.connect_qps(a, b, InitAttr::default(), 1024)?;       // RESET → INIT → RTR → RTS
//! let src = h.reg_pattern(&qp.a, SRC, len, salt)?;                // patterned source region
//! h.schedule_path(link.forward[0][1], Instant(20_000), false);    // a path dies at 20 µs
//! ... post_send on h.node_mut(a) ...
//! h.run_until(Bound::time(Duration::from_millis(100)), |h| !h.poll_all(a, qp.a.cq).is_empty())?;
//! h.check_region(b, dst.lkey, 0, len, |i| pattern(salt, i))?;     // every byte
//! ```

mod event;
mod node;
mod path;
mod run;
#[cfg(test)]
mod scenario_tests;
#[cfg(test)]
mod tests;
mod verbs;

use core::net::Ipv6Addr;
use std::collections::{BTreeMap, VecDeque};

pub use event::{DropReason, TraceEvent};
pub use node::{NoEvent, Node, RawNode};
pub use path::{EcnMarking, FrameInfo, PathModel, PathSelect, PathStats, TrimMode};
pub use verbs::{QpEnd, QpPair, RegionError, pattern};

use event::{Event, EventQueue};
use path::Path;

use crate::rng::Rng;
use crate::time::{Duration, Instant};
use crate::wire::WireConfig;

/// A node in a harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(pub usize);

/// One direction of one path in a harness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PathId(pub usize);

/// Harness-wide settings.
#[derive(Debug, Clone)]
pub struct HarnessConfig {
    /// Seed of every random draw of the network.
    pub seed: u64,
    /// Wire knobs: DSCPs (trimmed, control, trimmable) and the trim size.
    pub wire: WireConfig,
    /// Keep the full [`TraceEvent`] log (the digest is always kept).
    pub trace: bool,
    /// Size of the buffer handed to `poll_transmit`.
    pub frame_buffer: usize,
}

impl Default for HarnessConfig {
    fn default() -> Self {
        Self {
            seed: 1,
            wire: WireConfig::default(),
            trace: false,
            frame_buffer: 16 * 1024,
        }
    }
}

/// A node's NIC port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortModel {
    /// Line rate, bits per second; 0 = frames leave at once.
    pub rate_bps: u64,
    /// Frames the TX ring holds; a full ring clears the port's `ready` bit.
    pub tx_ring: usize,
}

impl Default for PortModel {
    /// 100 Gb/s with a 64-frame ring.
    fn default() -> Self {
        Self {
            rate_bps: 100_000_000_000,
            tx_ring: 64,
        }
    }
}

/// How a node is attached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// The node's NIC address, used to route frames when a port has more than one peer.
    pub addr: Option<Ipv6Addr>,
    /// One per port (plane).
    pub ports: Vec<PortModel>,
}

/// How two nodes are joined.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Ports (planes) joined; each port of one node meets the same port of the other.
    pub ports: Vec<u8>,
    /// Paths per port and direction.
    pub paths_per_port: usize,
    /// How a frame picks its path.
    pub select: PathSelect,
    /// Every path from the first node to the second.
    pub forward: PathModel,
    /// Every path back.
    pub reverse: PathModel,
}

/// The paths [`Harness::connect`] made: `forward[i][k]` is path `k` on `LinkSpec::ports[i]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub forward: Vec<Vec<PathId>>,
    pub reverse: Vec<Vec<PathId>>,
}

/// When a run must stop even if the network is not idle, counted from the start of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// Virtual time.
    pub time: Duration,
    /// Events processed.
    pub events: u64,
}

impl Bound {
    /// At most `time` of virtual time (and ten million events).
    pub const fn time(time: Duration) -> Self {
        Self {
            time,
            events: 10_000_000,
        }
    }
}

impl Default for Bound {
    /// One virtual second, ten million events.
    fn default() -> Self {
        Self::time(Duration::from_secs(1))
    }
}

/// Why a run stopped early.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HarnessError {
    #[error("idle at {now} before the run's condition held")]
    IdleBeforeDone { now: Instant },
    #[error("bound reached at {now} after {events} events with {pending} still pending")]
    BoundReached {
        now: Instant,
        events: u64,
        pending: usize,
    },
}

/// Counters of a node's port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PortStats {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames lost because the port was down (or did not exist).
    pub dropped: u64,
}

#[derive(Debug)]
struct Port {
    model: PortModel,
    up: bool,
    ring: VecDeque<Vec<u8>>,
    busy: bool,
    stats: PortStats,
}

#[derive(Debug)]
struct Slot<N> {
    node: N,
    addr: Option<Ipv6Addr>,
    ports: Vec<Port>,
    timer: Option<Instant>,
    timer_generation: u64,
}

/// The two ends of a path direction: from `from` to `to`, port `port` at both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Ends {
    from: NodeId,
    to: NodeId,
    port: u8,
}

#[derive(Debug, Clone)]
struct Route {
    to: NodeId,
    paths: Vec<PathId>,
    select: PathSelect,
}

/// Frames one drain of a node may send before the harness yields (a node that never stops
/// sending then runs into the event bound instead of hanging).
const MAX_BURST: usize = 4_096;

/// The harness. See the module documentation.
#[derive(Debug)]
pub struct Harness<N: Node> {
    cfg: HarnessConfig,
    now: Instant,
    queue: EventQueue,
    rng: Rng,
    nodes: Vec<Slot<N>>,
    paths: Vec<Path>,
    ends: Vec<Ends>,
    /// Frames each path is serialising, with the path epoch they started in.
    serving: Vec<Option<(Vec<u8>, u64)>>,
    routes: BTreeMap<(NodeId, u8), Vec<Route>>,
    trace: Vec<(Instant, TraceEvent)>,
    digest: u64,
    events: Vec<(Instant, NodeId, N::Event)>,
    unroutable: u64,
    buf: Vec<u8>,
}

impl<N: Node> Harness<N> {
    /// An empty harness at time zero.
    pub fn new(cfg: HarnessConfig) -> Self {
        Self {
            rng: Rng::new(cfg.seed),
            buf: vec![0; cfg.frame_buffer],
            cfg,
            now: Instant::ZERO,
            queue: EventQueue::default(),
            nodes: Vec::new(),
            paths: Vec::new(),
            ends: Vec::new(),
            serving: Vec::new(),
            routes: BTreeMap::new(),
            trace: Vec::new(),
            digest: 0xcbf2_9ce4_8422_2325,
            events: Vec::new(),
            unroutable: 0,
        }
    }

    /// Add a node; it is first drained when a run starts.
    pub fn add_node(&mut self, node: N, spec: NodeSpec) -> NodeId {
        let ports = spec
            .ports
            .iter()
            .map(|&model| Port {
                model,
                up: true,
                ring: VecDeque::new(),
                busy: false,
                stats: PortStats::default(),
            })
            .collect();
        self.nodes.push(Slot {
            node,
            addr: spec.addr,
            ports,
            timer: None,
            timer_generation: 0,
        });
        NodeId(self.nodes.len() - 1)
    }

    /// Join `a` and `b` on `spec.ports`, `spec.paths_per_port` paths per port and direction.
    pub fn connect(&mut self, a: NodeId, b: NodeId, spec: &LinkSpec) -> Link {
        assert!(
            a.0 < self.nodes.len() && b.0 < self.nodes.len() && a != b,
            "bad nodes"
        );
        assert!(
            spec.paths_per_port > 0,
            "a link needs at least one path per port"
        );
        let mut one_way = |from: NodeId, to: NodeId, model: &PathModel| -> Vec<Vec<PathId>> {
            spec.ports
                .iter()
                .map(|&port| {
                    let paths: Vec<PathId> = (0..spec.paths_per_port)
                        .map(|_| {
                            self.paths.push(Path::new(model.clone()));
                            self.serving.push(None);
                            self.ends.push(Ends { from, to, port });
                            PathId(self.paths.len() - 1)
                        })
                        .collect();
                    self.routes.entry((from, port)).or_default().push(Route {
                        to,
                        paths: paths.clone(),
                        select: spec.select.clone(),
                    });
                    paths
                })
                .collect()
        };
        let forward = one_way(a, b, &spec.forward);
        let reverse = one_way(b, a, &spec.reverse);
        Link { forward, reverse }
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// A node, to read its state.
    pub fn node(&self, id: NodeId) -> &N {
        &self.nodes[id.0].node
    }

    /// A node, to call it (verbs). The next run drains it.
    pub fn node_mut(&mut self, id: NodeId) -> &mut N {
        &mut self.nodes[id.0].node
    }

    /// The model of a path direction, to change it between runs.
    pub fn path_model_mut(&mut self, id: PathId) -> &mut PathModel {
        &mut self.paths[id.0].model
    }

    /// Counters of a path direction.
    pub fn path_stats(&self, id: PathId) -> PathStats {
        self.paths[id.0].stats
    }

    /// Bytes waiting in a path's queues.
    pub fn path_queued_bytes(&self, id: PathId) -> u64 {
        self.paths[id.0].queued_bytes()
    }

    /// Counters of a node's port.
    pub fn port_stats(&self, node: NodeId, port: u8) -> PortStats {
        self.nodes[node.0].ports[usize::from(port)].stats
    }

    /// Frames no path led to.
    pub fn unroutable(&self) -> u64 {
        self.unroutable
    }

    /// Take `path` down (`up == false`) or up at `at`.
    pub fn schedule_path(&mut self, path: PathId, at: Instant, up: bool) {
        self.queue.push(at, Event::PathState { path, up });
    }

    /// Take a node's port down or up at `at`; the node hears of it through
    /// `handle_port_status`.
    pub fn schedule_port(&mut self, node: NodeId, port: u8, at: Instant, up: bool) {
        self.queue.push(at, Event::PortState { node, port, up });
    }

    /// Hand `frame` to `node` on `port` at `at`, as if it came off the wire.
    pub fn inject(&mut self, at: Instant, node: NodeId, port: u8, frame: Vec<u8>) {
        self.queue.push(at, Event::Inject { node, port, frame });
    }

    /// Everything that happened (when [`HarnessConfig::trace`] is on).
    pub fn trace(&self) -> &[(Instant, TraceEvent)] {
        &self.trace
    }

    /// A hash of every [`TraceEvent`] so far, kept even with the trace off: two runs that
    /// did the same thing at the same times have the same digest.
    pub fn digest(&self) -> u64 {
        self.digest
    }

    /// The nodes' asynchronous events so far, in order, leaving none behind.
    pub fn take_events(&mut self) -> Vec<(Instant, NodeId, N::Event)> {
        core::mem::take(&mut self.events)
    }
}
