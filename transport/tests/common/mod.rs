//! Scenario tests run over `mrc_transport::harness` (the shared deterministic harness: virtual
//! time, one seeded RNG, N paths per plane and direction with rate, latency, queue, ECN,
//! trimming, loss, reordering, duplication and up/down schedules). This module is the thin
//! layer the engine's tests read through: hosts by index, a path behaviour given once for the
//! whole fabric ([`PathSpec`]), the test plan's SRv6 paths ([`Grid`]), whole-fabric counters,
//! frame capture, an ECMP remap switch, and the QP/region helpers.
#![allow(dead_code)]

mod conn;

pub use conn::*;

use std::net::Ipv6Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mrc_srv6::wire::EthernetAddress;
use mrc_transport::ev::{PathSource, SrPath};
use mrc_transport::harness::{
    Bound, EcnMarking, FrameInfo, Harness, HarnessConfig, Link, LinkSpec, Node, NodeId, NodeSpec,
    PathModel, PathSelect, PortModel, TrimMode,
};
use mrc_transport::wire::{WireConfig, parse_frame};
use mrc_transport::{
    Duration, Endpoint, EndpointConfig, Event, Instant, PathMode, PortConfig, PortMask, Transmit,
};

/// SRv6 test plan: path `i` of `plane` towards host `dst` has DA `fc00:plane:dst:i::`, and the
/// fabric routes it on path `i` (see [`Net`]).
#[derive(Debug)]
pub struct Grid {
    pub paths_per_plane: usize,
}

impl PathSource for Grid {
    fn path_count(&self, _src: u32, _dst: u32, _plane: u8) -> usize {
        self.paths_per_plane
    }
    fn path(&self, _src: u32, dst: u32, plane: u8, index: usize) -> Option<SrPath> {
        (index < self.paths_per_plane).then(|| SrPath {
            outer_da: Ipv6Addr::new(
                0xfc00,
                u16::from(plane),
                dst as u16,
                index as u16,
                0,
                0,
                0,
                0,
            ),
            segment: None,
        })
    }
}

/// The NIC address of host `i`.
pub fn nic(i: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i as u16 + 1)
}

/// How every path of the fabric behaves (both directions), unless a test changes one.
#[derive(Debug, Clone)]
pub struct PathSpec {
    pub latency: Duration,
    /// Bits per second; 0 = no serialisation delay.
    pub rate_bps: u64,
    /// Bytes queued before a packet is trimmed (or dropped).
    pub queue_bytes: u64,
    /// Bytes queued above which ECN-capable packets are marked CE (0: never).
    pub ecn_bytes: u64,
    /// Trim instead of dropping when the queue is full.
    pub trim: bool,
    /// Random loss probability per packet.
    pub loss: f64,
    /// Random extra delay, uniform in [0, jitter]: reorders packets.
    pub jitter: Duration,
    /// Probability that a packet is delivered twice.
    pub dup: f64,
}

impl Default for PathSpec {
    fn default() -> Self {
        Self {
            latency: Duration::from_micros(2),
            rate_bps: 0,
            queue_bytes: u64::MAX / 4,
            ecn_bytes: 0,
            trim: false,
            loss: 0.0,
            jitter: Duration::ZERO,
            dup: 0.0,
        }
    }
}

impl PathSpec {
    fn model(&self) -> PathModel {
        PathModel {
            rate_bps: self.rate_bps,
            latency: self.latency,
            queue_bytes: self.queue_bytes,
            ecn: (self.ecn_bytes > 0).then_some(EcnMarking {
                min_bytes: self.ecn_bytes,
                max_bytes: self.ecn_bytes + 1,
            }),
            trim: if self.trim {
                TrimMode::InFabric
            } else {
                TrimMode::Off
            },
            loss: self.loss,
            reorder: if self.jitter > Duration::ZERO {
                1.0
            } else {
                0.0
            },
            reorder_delay: self.jitter,
            duplicate: self.dup,
        }
    }
}

/// Whole-fabric counters, summed over every path direction.
#[derive(Debug, Default, Clone, Copy)]
pub struct FabricStats {
    pub lost: u64,
    pub blackholed: u64,
    pub trimmed: u64,
    pub marked: u64,
    pub duplicated: u64,
    /// Frames held back on their path (jitter): they arrive behind later ones.
    pub reordered: u64,
}

/// An endpoint that can also record what it sends (for tests that forge frames from real
/// ones), or everything it sends and receives in the order it happened.
pub struct Tap {
    pub ep: Endpoint,
    capture: Option<Vec<Vec<u8>>>,
    log: Option<Vec<Seen>>,
}

/// A frame a recording [`Tap`] saw, in order.
#[derive(Debug, Clone)]
pub enum Seen {
    Received(Vec<u8>),
    Sent(Vec<u8>),
}

impl Node for Tap {
    type Event = Event;
    fn handle_packet(&mut self, now: Instant, port: u8, frame: &[u8]) {
        if let Some(l) = self.log.as_mut() {
            l.push(Seen::Received(frame.to_vec()));
        }
        self.ep.handle_packet(now, port, frame);
    }
    fn poll_transmit(&mut self, now: Instant, ready: PortMask, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.ep.poll_transmit(now, ready, buf)?;
        if let Some(c) = self.capture.as_mut() {
            c.push(buf[..t.len].to_vec());
        }
        if let Some(l) = self.log.as_mut() {
            l.push(Seen::Sent(buf[..t.len].to_vec()));
        }
        Some(t)
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        self.ep.poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.ep.handle_timeout(now);
    }
    fn handle_port_status(&mut self, now: Instant, port: u8, up: bool) {
        self.ep.handle_port_status(now, port, up);
    }
    fn poll_event(&mut self) -> Option<Event> {
        self.ep.poll_event()
    }
}

/// The fabric and its hosts (host `i` is node `i`).
pub struct Net {
    pub h: Harness<Tap>,
    pub planes: usize,
    pub paths_per_plane: usize,
    pub srv6: bool,
    /// Links between host pairs, `(a, b, link)` with `a < b` (forward = a → b).
    links: Vec<(usize, usize, Link)>,
    events: Vec<(usize, Event)>,
    remapped: Arc<AtomicBool>,
}

/// How to build a [`Net`].
#[derive(Debug, Clone)]
pub struct NetBuilder {
    pub hosts: usize,
    pub planes: usize,
    pub paths_per_plane: usize,
    pub srv6: bool,
    pub seed: u64,
    pub spec: PathSpec,
    pub tweak: fn(&mut EndpointConfig),
}

impl Default for NetBuilder {
    fn default() -> Self {
        Self {
            hosts: 2,
            planes: 2,
            paths_per_plane: 4,
            srv6: true,
            seed: 1,
            spec: PathSpec::default(),
            tweak: |_| {},
        }
    }
}

/// ECMP mode: the switches' hash (the harness's own), salted differently after a remap.
fn ecmp_select(paths: usize, remapped: Arc<AtomicBool>) -> PathSelect {
    PathSelect::Custom(Arc::new(move |info: &FrameInfo| {
        let base = PathSelect::EcmpHash.select(info, 1 << 16);
        if remapped.load(Ordering::Relaxed) {
            (base.wrapping_mul(0x9e37_79b9) >> 7) % paths
        } else {
            base % paths
        }
    }))
}

/// SRv6 mode: the test plan's DA names the path.
fn srv6_select() -> PathSelect {
    PathSelect::Custom(Arc::new(|info: &FrameInfo| {
        usize::from(info.outer_dst.segments()[3])
    }))
}

impl NetBuilder {
    pub fn build(self) -> Net {
        let grid: Arc<dyn PathSource> = Arc::new(Grid {
            paths_per_plane: self.paths_per_plane,
        });
        let mut h = Harness::new(HarnessConfig {
            seed: self.seed,
            wire: WireConfig::default(),
            trace: false,
            frame_buffer: 16 * 1024,
        });
        for host in 0..self.hosts {
            let ports: Vec<PortConfig> = (0..self.planes)
                .map(|p| {
                    PortConfig::new(
                        EthernetAddress([2, 0, 0, 0, host as u8, p as u8]),
                        EthernetAddress([2, 0, 0, 0xff, 0, p as u8]),
                    )
                })
                .collect();
            let mode = if self.srv6 {
                PathMode::Srv6 {
                    paths: grid.clone(),
                    host: host as u32,
                }
            } else {
                PathMode::Ecmp
            };
            let seed = self.seed ^ (host as u64 + 1).wrapping_mul(7919);
            let mut cfg = EndpointConfig::new(seed, nic(host), ports, mode);
            (self.tweak)(&mut cfg);
            let ep = Endpoint::new(cfg).expect("valid config");
            let tap = Tap {
                ep,
                capture: None,
                log: None,
            };
            let spec = NodeSpec {
                addr: Some(nic(host)),
                // NIC ports as fast as the paths behind them, with deep rings: the fabric's
                // paths are what the scenarios vary.
                ports: vec![
                    PortModel {
                        rate_bps: 0,
                        tx_ring: 1 << 16,
                    };
                    self.planes
                ],
            };
            h.add_node(tap, spec);
        }
        let remapped = Arc::new(AtomicBool::new(false));
        let model = self.spec.model();
        let mut links = Vec::new();
        for a in 0..self.hosts {
            for b in a + 1..self.hosts {
                let select = if self.srv6 {
                    srv6_select()
                } else {
                    ecmp_select(self.paths_per_plane, remapped.clone())
                };
                let link = h.connect(
                    NodeId(a),
                    NodeId(b),
                    &LinkSpec {
                        ports: (0..self.planes as u8).collect(),
                        paths_per_port: self.paths_per_plane,
                        select,
                        forward: model.clone(),
                        reverse: model.clone(),
                    },
                );
                links.push((a, b, link));
            }
        }
        Net {
            h,
            planes: self.planes,
            paths_per_plane: self.paths_per_plane,
            srv6: self.srv6,
            links,
            events: Vec::new(),
            remapped,
        }
    }
}

impl Net {
    /// Host `i`'s endpoint.
    pub fn ep(&mut self, i: usize) -> &mut Endpoint {
        &mut self.h.node_mut(NodeId(i)).ep
    }

    /// Host `i`'s endpoint, to read.
    pub fn ep_ref(&self, i: usize) -> &Endpoint {
        &self.h.node(NodeId(i)).ep
    }

    pub fn now(&self) -> Instant {
        self.h.now()
    }

    /// Every path direction of the fabric.
    fn all_paths(&self) -> impl Iterator<Item = mrc_transport::harness::PathId> + '_ {
        self.links.iter().flat_map(|(_, _, l)| {
            l.forward
                .iter()
                .chain(l.reverse.iter())
                .flat_map(|v| v.iter().copied())
        })
    }

    /// Whole-fabric counters.
    pub fn stats(&self) -> FabricStats {
        let mut f = FabricStats::default();
        for p in self.all_paths() {
            let s = self.h.path_stats(p);
            f.lost += s.lost;
            f.blackholed += s.dropped_down;
            f.trimmed += s.trimmed;
            f.marked += s.ecn_marked;
            f.duplicated += s.duplicated;
            f.reordered += s.reordered;
        }
        f
    }

    /// Frames host 0 sent to host 1 through `(plane, path)` that the path swallowed while
    /// down (data and probes: the direction data flows).
    pub fn swallowed_forward(&self, plane: usize, path: usize) -> u64 {
        self.h
            .path_stats(self.links[0].2.forward[plane][path])
            .dropped_down
    }

    /// Frames the paths duplicated from host 0 to host 1 (data and probes, not the SACKs back).
    pub fn duplicated_forward(&self) -> u64 {
        self.links[0]
            .2
            .forward
            .iter()
            .flatten()
            .map(|&p| self.h.path_stats(p).duplicated)
            .sum()
    }

    /// Frames the paths delivered from host 0 to host 1 (data and probes; duplicates twice).
    pub fn delivered_forward(&self) -> u64 {
        self.links[0]
            .2
            .forward
            .iter()
            .flatten()
            .map(|&p| self.h.path_stats(p).delivered)
            .sum()
    }

    /// Frames each path of `plane` carried from host 0 to host 1.
    pub fn forward_frames(&self, plane: usize) -> Vec<u64> {
        self.links[0].2.forward[plane]
            .iter()
            .map(|&p| self.h.path_stats(p).enqueued)
            .collect()
    }

    /// Take path `(plane, path)` down at `from`, both ways on every link, and up again at
    /// `to` (never for `Instant::MAX`).
    pub fn path_down(&mut self, plane: usize, path: usize, from: Instant, to: Instant) {
        let ids: Vec<_> = self
            .links
            .iter()
            .flat_map(|(_, _, l)| [l.forward[plane][path], l.reverse[plane][path]])
            .collect();
        for id in ids {
            self.h.schedule_path(id, from, false);
            if to != Instant::MAX {
                self.h.schedule_path(id, to, true);
            }
        }
    }

    /// Path `(plane, path)`'s one-way latency, forward (from the lower host to the higher)
    /// on every link.
    pub fn set_forward_latency(&mut self, plane: usize, path: usize, latency: Duration) {
        let ids: Vec<_> = self
            .links
            .iter()
            .map(|(_, _, l)| l.forward[plane][path])
            .collect();
        for id in ids {
            self.h.path_model_mut(id).latency = latency;
        }
    }

    /// ECMP mode: from the next frame on, switches hash differently (a remap).
    pub fn remap(&mut self) {
        self.remapped.store(true, Ordering::Relaxed);
    }

    /// Start or stop recording what host `i` sends.
    pub fn capture(&mut self, i: usize, on: bool) {
        self.h.node_mut(NodeId(i)).capture = on.then(Vec::new);
    }

    /// What host `i` sent while recording.
    pub fn captured(&mut self, i: usize) -> Vec<Vec<u8>> {
        self.h
            .node_mut(NodeId(i))
            .capture
            .take()
            .unwrap_or_default()
    }

    /// Start or stop recording, in order, what host `i` sends and receives.
    pub fn record(&mut self, i: usize, on: bool) {
        self.h.node_mut(NodeId(i)).log = on.then(Vec::new);
    }

    /// What host `i` sent and received while recording, in order.
    pub fn recorded(&mut self, i: usize) -> Vec<Seen> {
        self.h.node_mut(NodeId(i)).log.take().unwrap_or_default()
    }

    /// Asynchronous events host `i` reported since the last call.
    pub fn events(&mut self, i: usize) -> Vec<Event> {
        for (_, node, e) in self.h.take_events() {
            self.events.push((node.0, e));
        }
        // Events of calls made outside a run (the harness drains them only while it runs).
        while let Some(e) = self.ep(i).poll_event() {
            self.events.push((i, e));
        }
        let (mine, rest) = self.events.drain(..).partition(|(h, _)| *h == i);
        self.events = rest;
        mine.into_iter().map(|(_, e)| e).collect()
    }

    /// Run until `done` holds (checked between events; it may call the endpoints), failing
    /// the test if `limit` of virtual time passes first or the fabric goes idle.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) {
        let end = self.now() + limit;
        loop {
            // Drain what the last call to `done` (or the test) posted.
            self.h.run_for(Duration::ZERO);
            if done(self) {
                return;
            }
            assert!(
                self.now() <= end,
                "not done after {limit} (now {})",
                self.now()
            );
            if !self.h.step() {
                self.h.run_for(Duration::ZERO);
                assert!(done(self), "idle before done at {}", self.now());
                return;
            }
        }
    }

    /// Run for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        self.h.run_for(d);
    }

    /// Run until nothing is left to happen, within `limit`.
    pub fn run_until_idle(&mut self, limit: Duration) {
        self.h
            .run_until_idle(Bound::time(limit))
            .expect("the fabric goes idle");
    }
}

/// An endpoint like host `i`'s, outside any fabric (for verbs tests).
pub fn standalone(i: usize) -> Endpoint {
    let net = NetBuilder::default().build();
    let cfg = net.ep_ref(i).config().clone();
    Endpoint::new(cfg).expect("valid config")
}

/// Whether a frame is an RDMA Write.
pub fn is_write(frame: &[u8]) -> bool {
    let lenient = WireConfig {
        verify_icrc: false,
        ..WireConfig::default()
    };
    parse_frame(frame, &lenient).is_ok_and(|f| f.bth.opcode.is_write())
}

/// SplitMix64, for tests' own randomness.
pub struct TestRng(pub u64);

impl TestRng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
