//! The simulator: a plan's fabric, one engine per host, applications, a fault schedule, and
//! the event loop that drives them all in virtual time (see `run.rs`).
//!
//! ```text
//!  app ─verbs─▶ Endpoint ─poll_transmit─▶ host port (TX ring) ─link─▶ T0 ─▶ T1 ─▶ T0 ─link─▶ Endpoint
//!                  ▲  handle_timeout / poll_cq          each switch: uSID shift-and-lookup (or ECMP),
//!                  └───────────── events ◀────────────  egress queue: priority, ECN, trim, drop
//! ```
//!
//! Building: [`Sim::new`] from a plan and a [`SimConfig`]; connect QPs between hosts
//! ([`Sim::connect`]: the out-of-band exchange, done by the simulator), register memory
//! ([`Sim::register`]), give hosts applications ([`Sim::set_app`]), schedule faults
//! ([`Sim::schedule`]); then [`Sim::run`] with an observer called every
//! [`SimConfig::sample_every`] of virtual time.

mod host;
mod run;

use std::sync::Arc;

use mrc_srv6::plan::{HostId, LinkTier, NodeId, Plan, SwitchId};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::ev::{EvId, EvState};
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, Memory, MrKeys, PdHandle, QpCap, QpInitAttr, QpTransition, Qpn,
    RemoteNic, RtrAttr, RtsAttr, VerbsError,
};
use mrc_transport::{Endpoint, EndpointConfig, PathMode, PortConfig};

use crate::app::Application;
use crate::config::{Routing, SimConfig};
use crate::fabric::{Fabric, SwitchStats};
use crate::fault::Fault;
use crate::pool::Pool;
use crate::port::PortStats;
use crate::queue::{Event, EventQueue};
use crate::rng::SimRng;
use crate::time::SimTime;

pub use run::{RunLimit, RunSummary};

use host::Host;

/// Why the simulator could not be built or run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("engine configuration of host {host}: {source}")]
    Config {
        host: u32,
        source: mrc_transport::config::ConfigError,
    },
    #[error("verbs call on host {host} failed: {source}")]
    Verbs { host: u32, source: VerbsError },
    #[error("host {0} is not in the plan")]
    NoSuchHost(u32),
    #[error("{0} and {1} are not neighbours")]
    NotNeighbours(NodeId, NodeId),
    #[error("a QP cannot connect host {0} to itself")]
    SelfConnection(u32),
    #[error(
        "run stopped at {now_us:.3} µs after {events} events before every application was done"
    )]
    NotDone { now_us: f64, events: u64 },
}

/// One end of a connected QP pair, as the out-of-band exchange hands it to an application.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpEnd {
    pub host: u32,
    pub qpn: Qpn,
}

/// A connected QP pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Conn {
    pub a: QpEnd,
    pub b: QpEnd,
}

/// How [`Sim::connect`] sets up a QP pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnOpts {
    pub init: InitAttr,
    pub cap: QpCap,
    /// MPR both ways (PSNs).
    pub mpr: u32,
    /// QP retry timeout exponent (1.024 µs × 2^n, brief §3.7).
    pub timeout: u8,
}

impl Default for ConnOpts {
    fn default() -> Self {
        Self {
            init: InitAttr::default(),
            cap: QpCap {
                max_send_wr: 1024,
                max_recv_wr: 1024,
                max_send_sge: 4,
            },
            mpr: mrc_transport::config::defaults::MPR,
            timeout: mrc_transport::config::defaults::TIMEOUT_EXPONENT,
        }
    }
}

/// An EV of a QP changed health (from the engines' events): the per-EV timelines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvChange {
    pub at: SimTime,
    pub host: u32,
    pub qpn: Qpn,
    pub ev: EvId,
    pub plane: u8,
    pub from: EvState,
    pub to: EvState,
}

/// Fabric-wide counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct FabricCounters {
    /// Sum over every switch egress port.
    pub switch_ports: PortStats,
    /// Sum over every host NIC port.
    pub host_ports: PortStats,
    /// Sum over every switch.
    pub switches: SwitchStats,
    /// Frames that reached a host after their link epoch ended (lost on a failed link).
    pub lost_in_flight: u64,
    /// Of those, frames of a data class (see [`PortStats::down_dropped_data`]).
    pub lost_in_flight_data: u64,
}

/// The simulator. See the module docs.
pub struct Sim {
    plan: Arc<Plan>,
    cfg: SimConfig,
    fabric: Fabric,
    pool: Pool,
    queue: EventQueue,
    rng: SimRng,
    hosts: Vec<Host>,
    now: SimTime,
    faults: Vec<Fault>,
    events: u64,
    /// Data-frame bytes delivered to hosts, per plane (cumulative).
    plane_delivered: Vec<u64>,
    /// Data-frame bytes delivered, per host (cumulative).
    host_delivered: Vec<u64>,
    ev_changes: Vec<EvChange>,
    lost_in_flight: u64,
    lost_in_flight_data: u64,
    /// Hosts whose application is not done yet.
    apps_running: usize,
    /// Copies of frames delivered to hosts, when capturing.
    captured: Option<Vec<Delivery>>,
}

/// A frame as it reached a host (when [`Sim::capture`] is on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    pub at: SimTime,
    pub host: u32,
    pub plane: u8,
    pub frame: Vec<u8>,
}

impl core::fmt::Debug for Sim {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Sim")
            .field("plan", &self.plan.name())
            .field("now", &self.now)
            .field("events", &self.events)
            .finish_non_exhaustive()
    }
}

/// The engine's payload MTU capped to what the plan's IP MTU carries with every SRv6 MRC
/// header: the largest power of two that fits.
fn payload_mtu_for(plan: &Plan, engine_default: u32) -> u32 {
    // Outer IPv6 40 + SRH 24 + inner IPv6 40 + UDP 8 + BTH 12 + METH 4 + TSETH 4 + RETH 16 +
    // ImmDt 4 + ICRC 4 (brief §2.1; the plan checks its MTU against the same sum).
    const SRV6_MRC_HEADER_BYTES: u32 = 156;
    let room = plan.mtu().saturating_sub(SRV6_MRC_HEADER_BYTES);
    if room >= engine_default {
        engine_default
    } else {
        1 << room.max(64).ilog2()
    }
}

/// Seed of host `h`'s engine: the run's seed mixed with the host id.
fn host_seed(seed: u64, h: u32) -> u64 {
    let mut r = SimRng::new(seed ^ (u64::from(h) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    r.next_u64()
}

impl Sim {
    /// The fabric of `plan` with one engine per host, nothing connected yet.
    pub fn new(plan: Plan, cfg: SimConfig) -> Result<Self, SimError> {
        let plan = Arc::new(plan);
        let fabric = Fabric::build(&plan, &cfg);
        let host_rate = u64::from(plan.link_params(LinkTier::Host).speed_gbps) * 1_000_000_000;
        let mut hosts = Vec::with_capacity(plan.host_count() as usize);
        let mut frame_cap = 0;
        for h in plan.hosts() {
            let ports = (0..plan.planes())
                .map(|p| {
                    let t0 = NodeId::Switch(SwitchId::t0(p, plan.rack_of(h)));
                    PortConfig {
                        mac: EthernetAddress(plan.mac(NodeId::Host(h), u16::from(p))),
                        next_hop_mac: EthernetAddress(plan.mac(t0, plan.downlink_of(h))),
                        line_rate_bps: host_rate,
                    }
                })
                .collect();
            let mode = match cfg.routing {
                Routing::Srv6 => PathMode::Srv6 {
                    paths: plan.clone(),
                    host: h.0,
                },
                Routing::Ecmp => PathMode::Ecmp,
            };
            let mut ec =
                EndpointConfig::new(host_seed(cfg.seed, h.0), plan.nic_addr(h), ports, mode);
            ec.wire = cfg.wire;
            ec.payload_mtu = cfg
                .payload_mtu
                .unwrap_or_else(|| payload_mtu_for(&plan, ec.payload_mtu));
            ec.timers.initial_rtt = SimConfig::unloaded_rtt(&plan, ec.max_frame_len());
            if let Some(t) = &cfg.endpoint_tweak {
                t(h.0, &mut ec);
            }
            let mut ep =
                Endpoint::new(ec).map_err(|source| SimError::Config { host: h.0, source })?;
            frame_cap = frame_cap.max(ep.max_frame_len());
            let verbs = |source| SimError::Verbs { host: h.0, source };
            let pd = ep.alloc_pd().map_err(verbs)?;
            let cq = ep.create_cq(1 << 16).map_err(verbs)?;
            hosts.push(Host::new(ep, pd, cq));
        }
        Ok(Self {
            rng: SimRng::new(cfg.seed),
            pool: Pool::new(frame_cap),
            plane_delivered: vec![0; usize::from(plan.planes())],
            host_delivered: vec![0; plan.host_count() as usize],
            plan,
            cfg,
            fabric,
            queue: EventQueue::default(),
            hosts,
            now: SimTime::ZERO,
            faults: Vec::new(),
            events: 0,
            ev_changes: Vec::new(),
            lost_in_flight: 0,
            lost_in_flight_data: 0,
            apps_running: 0,
            captured: None,
        })
    }

    /// The plan.
    pub fn plan(&self) -> &Plan {
        &self.plan
    }

    /// The configuration.
    pub fn config(&self) -> &SimConfig {
        &self.cfg
    }

    /// Current virtual time.
    pub fn now(&self) -> SimTime {
        self.now
    }

    /// Number of hosts.
    pub fn host_count(&self) -> u32 {
        self.hosts.len() as u32
    }

    /// Host `h`'s engine (counters, memory).
    pub fn endpoint(&self, h: u32) -> &Endpoint {
        &self.hosts[h as usize].ep
    }

    /// Host `h`'s engine, to call its verbs between runs.
    pub fn endpoint_mut(&mut self, h: u32) -> &mut Endpoint {
        &mut self.hosts[h as usize].ep
    }

    /// Host `h`'s protection domain and completion queue (every QP of the host uses them).
    pub fn host_handles(&self, h: u32) -> (PdHandle, CqHandle) {
        let host = &self.hosts[h as usize];
        (host.pd, host.cq)
    }

    fn check_host(&self, h: u32) -> Result<(), SimError> {
        if self.plan.has_host(HostId(h)) {
            Ok(())
        } else {
            Err(SimError::NoSuchHost(h))
        }
    }

    /// Create a QP on `a` and one on `b`, exchange their attributes and move both to RTS.
    pub fn connect(&mut self, a: u32, b: u32, opts: ConnOpts) -> Result<Conn, SimError> {
        self.check_host(a)?;
        self.check_host(b)?;
        if a == b {
            return Err(SimError::SelfConnection(a));
        }
        let mut create = |h: u32| -> Result<Qpn, SimError> {
            let host = &mut self.hosts[h as usize];
            let verbs = |source| SimError::Verbs { host: h, source };
            let qpn = host
                .ep
                .create_qp(&QpInitAttr {
                    pd: host.pd,
                    send_cq: host.cq,
                    recv_cq: host.cq,
                    cap: opts.cap,
                    sq_sig_all: false,
                })
                .map_err(verbs)?;
            host.ep
                .modify_qp(qpn, QpTransition::Init(opts.init))
                .map_err(verbs)?;
            Ok(qpn)
        };
        let qa = create(a)?;
        let qb = create(b)?;
        for (h, me, peer_host, peer) in [(a, qa, b, qb), (b, qb, a, qa)] {
            let remote = RemoteNic {
                addr: self.plan.nic_addr(HostId(peer_host)),
                host: Some(peer_host),
            };
            let mut rtr = RtrAttr::new(remote, peer, 0);
            rtr.mpr = opts.mpr;
            let mut rts = RtsAttr::new(0);
            rts.mpr = opts.mpr;
            rts.timeout = opts.timeout;
            let ep = &mut self.hosts[h as usize].ep;
            let verbs = |source| SimError::Verbs { host: h, source };
            ep.modify_qp(me, QpTransition::Rtr(rtr)).map_err(verbs)?;
            ep.modify_qp(me, QpTransition::Rts(rts)).map_err(verbs)?;
        }
        Ok(Conn {
            a: QpEnd { host: a, qpn: qa },
            b: QpEnd { host: b, qpn: qb },
        })
    }

    /// Register `mem` on host `h` at `iova`, readable and remotely writable.
    pub fn register(
        &mut self,
        h: u32,
        iova: u64,
        mem: Box<dyn Memory>,
    ) -> Result<MrKeys, SimError> {
        self.check_host(h)?;
        let host = &mut self.hosts[h as usize];
        host.ep
            .reg_mr(
                host.pd,
                iova,
                mem,
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .map_err(|source| SimError::Verbs { host: h, source })
    }

    /// Give host `h` an application (replacing any); it starts when the next run starts.
    pub fn set_app(&mut self, h: u32, app: Box<dyn Application>) -> Result<(), SimError> {
        self.check_host(h)?;
        let host = &mut self.hosts[h as usize];
        host.app = Some(app);
        host.app_started = false;
        Ok(())
    }

    /// Host `h`'s application.
    pub fn app(&self, h: u32) -> Option<&dyn Application> {
        self.hosts[h as usize].app.as_deref()
    }

    /// Schedule a fault (at or after now).
    pub fn schedule(&mut self, fault: Fault) {
        let index = self.faults.len() as u32;
        let at = fault.at.max(self.now);
        self.faults.push(fault);
        self.queue.push(at, Event::Fault { index });
    }

    /// Data-frame bytes delivered to hosts per plane since the start (retransmissions
    /// included, trimmed headers and control frames not).
    pub fn plane_delivered_bytes(&self) -> &[u64] {
        &self.plane_delivered
    }

    /// Data-frame bytes delivered to host `h` since the start (as [`Self::plane_delivered_bytes`]).
    pub fn host_delivered_bytes(&self, h: u32) -> u64 {
        self.host_delivered[h as usize]
    }

    /// Every EV health change so far.
    pub fn ev_changes(&self) -> &[EvChange] {
        &self.ev_changes
    }

    /// Counters of one egress port: `node`'s port towards `peer`.
    pub fn link_stats(&self, node: NodeId, peer: NodeId) -> Result<PortStats, SimError> {
        let p = self
            .fabric
            .port_towards(&self.plan, node, peer)
            .ok_or(SimError::NotNeighbours(node, peer))?;
        Ok(self.fabric.ports[p as usize].stats)
    }

    /// The bytes queued at every egress port now, by hop: `out[tier]` for each
    /// [`QueueTier`](crate::fabric::QueueTier) in
    /// [`QueueTier::ALL`](crate::fabric::QueueTier::ALL)'s order, one entry per port (issue
    /// #14's queue-occupancy series; the vectors are cleared first and keep their capacity).
    pub fn queued_bytes_by_tier(&self, out: &mut [Vec<u64>; 4]) {
        out.iter_mut().for_each(Vec::clear);
        for (port, tier) in self.fabric.ports.iter().zip(&self.fabric.tiers) {
            out[*tier as usize].push(port.queued_bytes());
        }
    }

    /// Fabric-wide counters.
    pub fn fabric_counters(&self) -> FabricCounters {
        let mut c = FabricCounters {
            lost_in_flight: self.lost_in_flight,
            lost_in_flight_data: self.lost_in_flight_data,
            ..FabricCounters::default()
        };
        for (port, (owner, _)) in self.fabric.ports.iter().zip(&self.fabric.owner) {
            let sum = match owner {
                crate::fabric::Owner::Host(_) => &mut c.host_ports,
                crate::fabric::Owner::Switch(_) => &mut c.switch_ports,
            };
            add_port_stats(sum, &port.stats);
        }
        for s in &self.fabric.switches {
            c.switches.forwarded += s.stats.forwarded;
            c.switches.no_route += s.stats.no_route;
            c.switches.dead_dropped += s.stats.dead_dropped;
        }
        c
    }

    /// Keep a copy of every frame delivered to a host from now on (tests and tools; costs an
    /// allocation per frame).
    pub fn capture(&mut self, on: bool) {
        self.captured = on.then(Vec::new);
    }

    /// The frames captured so far.
    pub fn captured(&self) -> &[Delivery] {
        self.captured.as_deref().unwrap_or_default()
    }

    /// Send a hand-made frame out of host `host`'s port `plane` now, as if its NIC sent it.
    pub fn inject(&mut self, host: u32, plane: u8, frame: &[u8]) -> Result<(), SimError> {
        self.check_host(host)?;
        assert!(plane < self.plan.planes(), "no plane {plane}");
        assert!(
            frame.len() <= self.pool.frame_cap(),
            "frame longer than the pool's buffers"
        );
        let pkt = self.pool.alloc_copy(frame);
        let port = host * u32::from(self.plan.planes()) + u32::from(plane);
        self.enqueue(port, pkt);
        Ok(())
    }

    /// Applications that started and are done.
    pub fn apps_done(&self) -> u64 {
        self.hosts.iter().filter(|h| h.app_done).count() as u64
    }

    /// Applications given to hosts.
    pub fn app_count(&self) -> u64 {
        self.hosts.iter().filter(|h| h.app.is_some()).count() as u64
    }

    /// Frame buffers the run ever needed at once (the pool never shrinks).
    pub fn peak_frames(&self) -> usize {
        self.pool.peak()
    }

    /// Heap bytes of the frame pool: every body it holds, in use or spare, and its tables (the
    /// pool never shrinks, so this is its high-water mark).
    pub fn frame_pool_bytes(&self) -> usize {
        self.pool.heap_bytes()
    }
}

fn add_port_stats(sum: &mut PortStats, s: &PortStats) {
    sum.tx_frames += s.tx_frames;
    sum.tx_bytes += s.tx_bytes;
    sum.tx_data_frames += s.tx_data_frames;
    sum.ecn_marked += s.ecn_marked;
    sum.trimmed += s.trimmed;
    sum.tail_dropped += s.tail_dropped;
    sum.lost += s.lost;
    sum.lost_data += s.lost_data;
    sum.down_dropped += s.down_dropped;
    sum.down_dropped_data += s.down_dropped_data;
    sum.peak_queue_bytes = sum.peak_queue_bytes.max(s.peak_queue_bytes);
    sum.duplicated += s.duplicated;
    sum.corrupted += s.corrupted;
    sum.reordered += s.reordered;
}
