//! The [`Endpoint`]: one NIC's worth of MRC. It owns every protection domain, memory region,
//! completion queue, QP (with its EV table) and congestion controller, and only dispatches:
//! the protocol lives in `qp/`, `ev/`, `reliability/` and `cc/`.

mod datapath;
mod peers;
#[cfg(test)]
mod tests;
mod verbs;

use core::cmp::Reverse;
use core::net::Ipv6Addr;
use std::collections::{BinaryHeap, VecDeque};

use crate::cc::CcProfile;
use crate::config::{ConfigError, EndpointConfig, EvProfile};
use crate::ctx::{CcTable, Ctx};
use crate::ev::{EvId, EvInfo};
use crate::event::EventQueue;
use crate::qp::Qp;
use crate::rng::Rng;
use crate::slab::Slab;
use crate::stats::{EndpointStats, PlaneStats, QpStats};
use crate::time::Instant;
use crate::verbs::{Cq, CqHandle, MrTable, Qpn, VerbsError};

use datapath::OutgoingOp;
pub use datapath::PortMask;
use peers::PeerIndex;

/// What [`Endpoint::cc_state`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CcState {
    /// The controller (`"nscc"`, `"dcqcn"`, `"fixed"`).
    pub name: &'static str,
    /// Nominal bytes it allows in flight.
    pub window_bytes: u64,
    /// Nominal bytes in flight over all its QPs.
    pub inflight_bytes: u64,
    /// Rate-based controllers: when the next packet may leave.
    pub next_send_time: Option<Instant>,
    /// QPs it governs.
    pub qps: u32,
}

/// Timer entries kept per live QP (stale ones included) before the heap is rebuilt.
const TIMER_ENTRIES_PER_QP: usize = 4;
const TIMER_SLACK: usize = 64;

/// QPNs carry a 14-bit slot index and a 10-bit generation (24 bits on the wire).
const QPN_INDEX_BITS: u32 = 14;
const QPN_GENERATION_BITS: u32 = 10;

/// One NIC's MRC engine: a sans-IO state machine (no clock, socket, thread or allocation per
/// packet) driven by its caller.
///
/// # Driving it
///
/// Inputs carry the current time, which must never go backwards:
///
/// - [`handle_packet`](Self::handle_packet): a frame arrived on a port;
/// - [`handle_timeout`](Self::handle_timeout): the time [`poll_timeout`](Self::poll_timeout)
///   named has come (early or spurious calls are harmless);
/// - [`handle_port_status`](Self::handle_port_status): a local port went up or down;
/// - the verbs ([`post_send`](Self::post_send), [`post_recv`](Self::post_recv),
///   [`modify_qp`](Self::modify_qp), ...).
///
/// After any input, drain in this order:
///
/// 1. [`poll_transmit`](Self::poll_transmit) until it returns `None` (or the ports are full:
///    call it again when they have room, with the new `ready` mask); control packets (SACK,
///    NACK, ACK, endpoint operations) come first, then data, QPs served round-robin;
/// 2. [`poll_event`](Self::poll_event) until `None`;
/// 3. [`poll_cq`](Self::poll_cq) on the completion queues the application reads;
/// 4. [`poll_timeout`](Self::poll_timeout): sleep (or poll the ports) until then.
#[derive(Debug)]
pub struct Endpoint {
    cfg: EndpointConfig,
    rng: Rng,
    pds: Slab<()>,
    mrs: MrTable,
    cqs: Slab<Cq>,
    /// CQs with completions added since [`take_ready_cqs`](Self::take_ready_cqs).
    ready_cqs: Vec<CqHandle>,
    qps: Slab<Qp>,
    /// QP slots by peer NIC, kept by the verbs that connect and disconnect QPs.
    peers: PeerIndex,
    ccs: CcTable,
    events: EventQueue,
    stats: EndpointStats,
    planes: Vec<PlaneStats>,
    ports_up: u32,
    /// QPs (slot indices) that may have data to send, served round-robin.
    tx_queue: VecDeque<u32>,
    /// QPs with control packets waiting.
    ctrl_queue: VecDeque<u32>,
    /// Per-QP earliest deadlines (lazy: stale entries are skipped when popped).
    timers: BinaryHeap<Reverse<(Instant, u32)>>,
    /// Endpoint operations to send (port status updates, EV probe answers).
    ep_ops: VecDeque<OutgoingOp>,
    /// The last `now` seen (deadlines of QPs whose pacing holds them).
    now: Instant,
    /// QPs whose timers are due, collected before running them (reused, no allocation).
    due_scratch: Vec<u32>,
    /// QPs woken from a shared window's wait list (reused, no allocation).
    wake_scratch: Vec<u32>,
    /// The QPs of one peer, copied out of `peers` while they run (reused, no allocation).
    peer_scratch: Vec<u32>,
    /// Port status: each peer's first QP able to tell it, and how many are (reused).
    notify_scratch: Vec<(u32, Ipv6Addr, u32)>,
}

impl Endpoint {
    /// An endpoint with this configuration.
    pub fn new(cfg: EndpointConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let mut rng = Rng::new(cfg.seed);
        let l = cfg.limits;
        let n_ports = cfg.ports.len();
        Ok(Self {
            mrs: MrTable::new(l.max_mrs as usize, rng.next_u32()),
            pds: Slab::new(l.max_pds as usize, 16, 16),
            cqs: Slab::new(l.max_cqs as usize, 16, 16),
            ready_cqs: Vec::new(),
            qps: Slab::new(l.max_qps as usize, QPN_INDEX_BITS, QPN_GENERATION_BITS),
            peers: PeerIndex::default(),
            ccs: CcTable::default(),
            events: EventQueue::new(l.max_events),
            stats: EndpointStats::default(),
            planes: vec![PlaneStats::default(); n_ports],
            ports_up: if n_ports == 32 {
                u32::MAX
            } else {
                (1 << n_ports) - 1
            },
            // Scheduling tables grow with the QPs (`create_qp` reserves), never per packet.
            tx_queue: VecDeque::new(),
            ctrl_queue: VecDeque::new(),
            timers: BinaryHeap::with_capacity(TIMER_SLACK),
            ep_ops: VecDeque::with_capacity(64),
            now: Instant::ZERO,
            due_scratch: Vec::new(),
            wake_scratch: Vec::new(),
            peer_scratch: Vec::new(),
            notify_scratch: Vec::new(),
            rng,
            cfg,
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    /// Appends an EV profile (one a controller brought ONLINE) and returns its index for
    /// `InitAttr::ev_profile`. Profiles are never removed or changed: QPs keep the index they
    /// were initialised with.
    pub fn add_ev_profile(&mut self, profile: EvProfile) -> Result<u16, ConfigError> {
        if !profile.fits(self.cfg.ports.len()) {
            return Err(ConfigError::EvProfile);
        }
        let index =
            u16::try_from(self.cfg.ev_profiles.len()).map_err(|_| ConfigError::TooManyProfiles)?;
        self.cfg.ev_profiles.push(profile);
        Ok(index)
    }

    /// Appends a CC profile and returns its index for `InitAttr::cc_profile` (append-only, as
    /// [`add_ev_profile`](Self::add_ev_profile)).
    pub fn add_cc_profile(&mut self, profile: CcProfile) -> Result<u16, ConfigError> {
        let index =
            u16::try_from(self.cfg.cc_profiles.len()).map_err(|_| ConfigError::TooManyProfiles)?;
        self.cfg.cc_profiles.push(profile);
        Ok(index)
    }

    /// The largest frame [`poll_transmit`](Self::poll_transmit) writes: its buffer must hold
    /// at least this many bytes.
    pub fn max_frame_len(&self) -> usize {
        self.cfg.max_frame_len()
    }

    /// Counters of a QP.
    pub fn qp_stats(&self, qpn: Qpn) -> Option<QpStats> {
        self.qps.get(qpn.0).map(|q| q.stats)
    }

    /// Counters of a plane (= local port).
    pub fn plane_stats(&self, port: u8) -> Option<PlaneStats> {
        self.planes.get(usize::from(port)).copied()
    }

    /// State, route and counters of every EV of a QP, by EV id.
    pub fn ev_stats(&self, qpn: Qpn) -> Vec<EvInfo> {
        let Some(paths) = self.qps.get(qpn.0).and_then(Qp::paths) else {
            return Vec::new();
        };
        (0..paths.table.len() as u16)
            .map(|id| {
                let e = paths.table.ev(id);
                EvInfo {
                    id,
                    plane: e.plane,
                    state: e.state,
                    role: e.role,
                    entropy: e.entropy,
                    path: e.path,
                    stats: e.stats,
                }
            })
            .collect()
    }

    /// Deny an EV of a QP (the operator's deny-list, brief §3.1): it is never used or probed
    /// until [`allow_ev`](Self::allow_ev); a backup of its plane takes its place.
    pub fn deny_ev(&mut self, qpn: Qpn, ev: EvId) -> Result<(), VerbsError> {
        self.ev_admin(qpn, ev, true)
    }

    /// Lift a deny: the EV is GOOD again (active if its plane is short of EVs).
    pub fn allow_ev(&mut self, qpn: Qpn, ev: EvId) -> Result<(), VerbsError> {
        self.ev_admin(qpn, ev, false)
    }

    fn ev_admin(&mut self, qpn: Qpn, ev: EvId, deny: bool) -> Result<(), VerbsError> {
        let idx = self.qps.index_of(qpn.0).ok_or(VerbsError::InvalidQp(qpn))?;
        self.with_qp(idx, |qp, _| {
            let state = qp.state;
            let table = &mut qp.paths_mut().ok_or(VerbsError::InvalidState(state))?.table;
            if table.get(ev).is_none() {
                return Err(VerbsError::InvalidAttr("no such EV"));
            }
            if deny {
                table.deny(ev);
            } else {
                table.allow(ev);
            }
            Ok(())
        })
        .ok_or(VerbsError::InvalidQp(qpn))?
    }

    /// The congestion controller a QP uses (shared with the other QPs to the same peer).
    pub fn cc_state(&self, qpn: Qpn) -> Option<CcState> {
        let i = self.qps.get(qpn.0)?.cc_slot()?;
        let slot = self.ccs.get(i)?;
        Some(CcState {
            name: slot.ctrl.name(),
            window_bytes: slot.ctrl.window(),
            inflight_bytes: slot.inflight,
            next_send_time: slot.ctrl.next_send_time(self.now),
            qps: slot.refs,
        })
    }

    /// Counters of the whole endpoint (drops by cause, ...).
    pub fn stats(&self) -> EndpointStats {
        let mut s = self.stats;
        s.events_dropped = self.events.dropped;
        s
    }

    /// Bytes of heap the endpoint's tables hold (capacity, not length): a bound that does not
    /// move with traffic, whatever the input.
    pub fn heap_bytes(&self) -> usize {
        let qps: usize = self
            .qps
            .iter()
            .map(|(_, q)| size_of::<Qp>() + q.heap_bytes())
            .sum();
        qps + self.qps.capacity_used() * size_of::<Option<Qp>>()
            + self.tx_queue.capacity() * 4
            + self.ctrl_queue.capacity() * 4
            + self.timers.capacity() * size_of::<Reverse<(Instant, u32)>>()
            + self.ep_ops.capacity() * size_of::<OutgoingOp>()
            + self.events.heap_bytes()
            + self.ccs.heap_bytes()
            + self.planes.capacity() * size_of::<PlaneStats>()
            + self.peers.heap_bytes()
            + self.peer_scratch.capacity() * 4
            + self.notify_scratch.capacity() * size_of::<(u32, Ipv6Addr, u32)>()
    }

    /// Bytes of heap one QP holds (its rings, queues, EV table and the QP itself): sized by
    /// its attributes when it is created and connected, never by traffic.
    pub fn qp_heap_bytes(&self, qpn: Qpn) -> Option<usize> {
        self.qps
            .get(qpn.0)
            .map(|q| size_of::<Qp>() + q.heap_bytes())
    }

    /// Run `f` on QP slot `idx` with the rest of the endpoint as its context, then forward its
    /// EV events, schedule it and re-arm its timer. `f` leaves the QP's peer as it was (only
    /// [`with_qp_repeer`](Self::with_qp_repeer) may change it: the peer index follows).
    fn with_qp<R>(&mut self, idx: usize, f: impl FnOnce(&mut Qp, &mut Ctx<'_>) -> R) -> Option<R> {
        #[cfg(debug_assertions)]
        let peer = self.qps.at(idx).and_then(Qp::peer_addr);
        let r = self.run_qp(idx, f);
        #[cfg(debug_assertions)]
        debug_assert_eq!(
            self.qps.at(idx).and_then(Qp::peer_addr),
            peer,
            "a QP's peer changes only through with_qp_repeer (the peer index)"
        );
        r
    }

    /// [`with_qp`](Self::with_qp) for a verb that may connect or disconnect the QP (modify,
    /// destroy): the peer index follows its peer.
    fn with_qp_repeer<R>(
        &mut self,
        idx: usize,
        f: impl FnOnce(&mut Qp, &mut Ctx<'_>) -> R,
    ) -> Option<R> {
        let before = self.qps.at(idx).and_then(Qp::peer_addr);
        let r = self.run_qp(idx, f);
        let after = self.qps.at(idx).and_then(Qp::peer_addr);
        self.peers.repeer(idx as u32, before, after);
        r
    }

    /// The slots of the QPs connected to `peer`, ascending, from the peer index (in debug
    /// builds checked against a scan of every slot).
    fn peer_slots(&self, peer: Ipv6Addr) -> &[u32] {
        #[cfg(debug_assertions)]
        self.check_peer_index();
        self.peers.slots(peer)
    }

    /// Debug builds: the peer index is what a scan of every slot finds.
    #[cfg(debug_assertions)]
    fn check_peer_index(&self) {
        let mut scan = std::collections::BTreeMap::<Ipv6Addr, Vec<u32>>::new();
        for (i, q) in self.qps.iter() {
            if let Some(p) = q.peer_addr() {
                scan.entry(p).or_default().push(i as u32);
            }
        }
        let index: Vec<_> = self.peers.iter().map(|(p, s)| (p, s.to_vec())).collect();
        debug_assert_eq!(
            index,
            scan.into_iter().collect::<Vec<_>>(),
            "the peer index"
        );
    }

    fn run_qp<R>(&mut self, idx: usize, f: impl FnOnce(&mut Qp, &mut Ctx<'_>) -> R) -> Option<R> {
        let Self {
            cfg,
            mrs,
            cqs,
            ready_cqs,
            qps,
            ccs,
            events,
            stats,
            planes,
            ports_up,
            now,
            ..
        } = self;
        let qp = qps.at_mut(idx)?;
        let mut ctx = Ctx {
            cfg,
            mrs,
            cqs,
            ready_cqs,
            ccs,
            events,
            stats,
            planes,
            ports_up: *ports_up,
            now: *now,
        };
        let r = f(qp, &mut ctx);
        qp.flush_ev_changes(&mut ctx);
        let cc = qp.cc_slot();
        self.schedule(idx);
        // Every packet passes here: nobody waiting is the one test it pays, inline.
        if let Some(i) = cc
            && self.ccs.get(i).is_some_and(|s| !s.waiting.is_empty())
        {
            self.wake_waiting(i);
        }
        Some(r)
    }

    /// QPs waiting for room in controller `i`'s window go back to the transmit queue once it
    /// has some: an acknowledgement on one QP makes room for all that share the window.
    #[inline(never)]
    fn wake_waiting(&mut self, i: usize) {
        let Some(slot) = self.ccs.get_mut(i) else {
            return;
        };
        let mut woken = core::mem::take(&mut self.wake_scratch);
        slot.take_waiting(&mut woken);
        for &q in &woken {
            self.schedule(q as usize);
        }
        woken.clear();
        self.wake_scratch = woken;
    }

    /// Put QP `idx` in the transmit queues it needs and re-arm its timer.
    fn schedule(&mut self, idx: usize) {
        let now = self.now;
        let Some(qp) = self.qps.at_mut(idx) else {
            return;
        };
        if qp.has_control() && !qp.sched.in_ctrl_queue {
            qp.sched.in_ctrl_queue = true;
            self.ctrl_queue.push_back(idx as u32);
        }
        if !qp.sched.in_tx_queue && qp.may_send_data(now) {
            qp.sched.in_tx_queue = true;
            self.tx_queue.push_back(idx as u32);
        }
        // Only a deadline earlier than the armed one needs a new timer entry; a later one is
        // found when the armed one fires (spurious wake-ups are harmless).
        if let Some(d) = qp.next_deadline()
            && qp.sched.armed.is_none_or(|a| d < a)
        {
            qp.sched.armed = Some(d);
            self.timers.push(Reverse((d, idx as u32)));
            if self.timers.len() > TIMER_ENTRIES_PER_QP * self.qps.len() + TIMER_SLACK {
                self.rebuild_timers();
            }
        }
    }

    /// Drop stale timer entries: one per QP with an armed deadline.
    fn rebuild_timers(&mut self) {
        self.timers.clear();
        for (i, q) in self.qps.iter() {
            if let Some(a) = q.sched.armed {
                self.timers.push(Reverse((a, i as u32)));
            }
        }
    }
}
