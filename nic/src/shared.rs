//! What the application threads and the NIC thread share: lock-free rings (doorbells, control
//! commands, completions, events), what a control command may do on the NIC thread
//! ([`NicControl`]), and the registries that let a handle find a completion ring or a shared
//! memory region without asking the NIC thread. The handle and the runtime both build on it;
//! it knows neither.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crossbeam_queue::ArrayQueue;
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::verbs::{
    CqHandle, QpInitAttr, Qpn, RecvWr, SendOpcode, SendWr, Sge, VerbsError, WorkCompletion,
};
use mrc_transport::{Endpoint, Event, Instant};

use crate::memory::MemoryRegion;
use crate::status::{NicStats, PortState};

/// Gather entries a doorbell carries without allocating.
const INLINE_SGES: usize = 4;

/// A datapath request from an application thread, rung into the NIC thread's doorbell ring.
#[derive(Debug)]
pub(crate) enum Doorbell {
    Send { qpn: Qpn, wr: OwnedSendWr },
    Recv { qpn: Qpn, wr: RecvWr },
}

impl Doorbell {
    pub fn qpn(&self) -> Qpn {
        match self {
            Self::Send { qpn, .. } | Self::Recv { qpn, .. } => *qpn,
        }
    }

    pub fn wr_id(&self) -> u64 {
        match self {
            Self::Send { wr, .. } => wr.wr_id,
            Self::Recv { wr, .. } => wr.wr_id,
        }
    }

    /// The queue the request goes to: send (`true`) or receive.
    pub fn is_send(&self) -> bool {
        matches!(self, Self::Send { .. })
    }
}

/// A [`SendWr`] that owns its gather list (inline up to four entries).
#[derive(Debug)]
pub(crate) struct OwnedSendWr {
    pub wr_id: u64,
    pub opcode: SendOpcode,
    sges: Sges,
    pub remote_addr: u64,
    pub rkey: u32,
    pub signaled: bool,
}

#[derive(Debug)]
enum Sges {
    Inline(u8, [Sge; INLINE_SGES]),
    Heap(Box<[Sge]>),
}

impl OwnedSendWr {
    pub fn new(wr: &SendWr<'_>) -> Self {
        let sges = if wr.sg_list.len() <= INLINE_SGES {
            let mut inline = [Sge::default(); INLINE_SGES];
            inline[..wr.sg_list.len()].copy_from_slice(wr.sg_list);
            Sges::Inline(wr.sg_list.len() as u8, inline)
        } else {
            Sges::Heap(wr.sg_list.into())
        };
        Self {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            sges,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            signaled: wr.signaled,
        }
    }

    /// The work request, borrowing the gather list.
    pub fn as_wr(&self) -> SendWr<'_> {
        let sg_list = match &self.sges {
            Sges::Inline(n, s) => &s[..usize::from(*n)],
            Sges::Heap(s) => s,
        };
        SendWr {
            wr_id: self.wr_id,
            opcode: self.opcode,
            sg_list,
            remote_addr: self.remote_addr,
            rkey: self.rkey,
            signaled: self.signaled,
        }
    }
}

/// A control-path request: runs on the NIC thread with its state, answers through a channel.
pub(crate) type Command = Box<dyn FnOnce(&mut dyn NicControl) + Send>;

/// What a [`Command`] reaches on the NIC thread: the engine, and the verbs whose bookkeeping
/// (completion rings, the QP → CQ map) lives beside it. The NIC thread's state implements it.
pub(crate) trait NicControl {
    /// The engine.
    fn endpoint(&mut self) -> &mut Endpoint;
    /// What the NIC thread shares with the handles.
    fn shared(&self) -> &Shared;
    /// `create_cq`, plus the ring the application polls.
    fn create_cq(&mut self, depth: u32) -> Result<CqHandle, VerbsError>;
    fn destroy_cq(&mut self, cq: CqHandle) -> Result<(), VerbsError>;
    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qpn, VerbsError>;
    fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), VerbsError>;
    /// Counters, with the engine's dropped events.
    fn stats(&self) -> NicStats;
    /// The state of every port.
    fn ports(&self) -> Vec<PortState>;
}

/// Something the application may want to know, drained with
/// [`NicHandle::poll_event`](crate::NicHandle::poll_event).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NicEvent {
    /// An event of the engine (port status as the engine sees it, QP fatal, EV changes...).
    Engine(Event),
    /// A port's link went up or down (as the port reports it).
    Link { port: u8, up: bool },
    /// Neighbour discovery learnt (or relearnt) the MAC of a port's next hop.
    NeighbourResolved { port: u8, mac: EthernetAddress },
    /// A doorbell named a QP the NIC does not know; the work request is dropped.
    DoorbellRejected {
        qpn: Qpn,
        wr_id: u64,
        error: VerbsError,
    },
}

/// The completions of one CQ, on their way from the NIC thread to the application.
#[derive(Debug)]
pub(crate) struct CqRing {
    pub queue: ArrayQueue<WorkCompletion>,
}

/// A registered region the application reads and writes without the NIC thread.
#[derive(Debug, Clone)]
pub(crate) struct SharedMr {
    pub region: MemoryRegion,
    pub iova: u64,
}

impl SharedMr {
    /// The offset of `va..va + len` in the region, if it lies inside.
    pub fn offset_of(&self, va: u64, len: usize) -> Option<usize> {
        let offset = va.checked_sub(self.iova)?;
        let end = offset.checked_add(len as u64)?;
        (end <= self.region.len() as u64).then_some(offset as usize)
    }
}

/// State shared by the NIC thread and every handle.
pub(crate) struct Shared {
    pub doorbells: ArrayQueue<Doorbell>,
    pub commands: ArrayQueue<Command>,
    pub events: ArrayQueue<NicEvent>,
    pub events_dropped: AtomicU64,
    /// Asks the NIC thread to leave its loop.
    pub stop: AtomicBool,
    /// The NIC thread is in its loop (cleared when it leaves, even by a panic).
    pub running: AtomicBool,
    /// The NIC's clock (shared, so applications see the NIC's time): the CPU's invariant
    /// time-stamp counter, calibrated, where the CPU has one (quanta; ~10 ns a read, against
    /// 20-40 ns for `clock_gettime` in a VM, read once per loop iteration), else the OS clock.
    pub clock: quanta::Clock,
    /// Its reading when the NIC was made.
    pub epoch: u64,
    pub control_timeout: std::time::Duration,
    pub cqs: Registry<CqHandle, Arc<CqRing>>,
    pub mrs: Registry<u32, SharedMr>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("doorbells", &self.doorbells.len())
            .field("commands", &self.commands.len())
            .field("events", &self.events.len())
            .field("running", &self.running.load(Ordering::Relaxed))
            .finish()
    }
}

impl Shared {
    pub fn new(
        doorbell_depth: usize,
        command_depth: usize,
        event_depth: usize,
        control_timeout: std::time::Duration,
    ) -> Self {
        let clock = quanta::Clock::new();
        Self {
            doorbells: ArrayQueue::new(doorbell_depth.max(1)),
            commands: ArrayQueue::new(command_depth.max(1)),
            events: ArrayQueue::new(event_depth.max(1)),
            events_dropped: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            running: AtomicBool::new(true),
            clock: clock.clone(),
            epoch: clock.raw(),
            control_timeout,
            cqs: Registry::default(),
            mrs: Registry::default(),
        }
    }

    /// The NIC's clock: nanoseconds since the NIC was made.
    pub fn now(&self) -> Instant {
        Instant(self.clock.delta_as_nanos(self.epoch, self.clock.raw()))
    }

    pub fn push_event(&self, e: NicEvent) {
        if self.events.push(e).is_err() {
            self.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
}

/// A map the NIC thread changes rarely (control path) and handles read often: handles keep a
/// private copy and refresh it when the generation moved, so the datapath takes no lock.
#[derive(Debug)]
pub(crate) struct Registry<K, V> {
    map: Mutex<HashMap<K, V>>,
    generation: AtomicU64,
}

impl<K, V> Default for Registry<K, V> {
    fn default() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy, V: Clone> Registry<K, V> {
    fn lock(&self) -> MutexGuard<'_, HashMap<K, V>> {
        // A panic while holding the lock cannot leave the map half-changed: insert and remove
        // are single calls.
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn insert(&self, k: K, v: V) {
        let mut map = self.lock();
        map.insert(k, v);
        self.generation.fetch_add(1, Ordering::Release);
    }

    pub fn remove(&self, k: &K) -> Option<V> {
        let mut map = self.lock();
        let v = map.remove(k);
        self.generation.fetch_add(1, Ordering::Release);
        v
    }

    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// A copy of the map and the generation it is current for (read before the copy, so a
    /// change during it makes the next lookup copy again).
    pub fn snapshot(&self) -> (u64, HashMap<K, V>) {
        let map = self.lock();
        // Changes bump the generation while holding the lock, so it matches this copy.
        (self.generation(), map.clone())
    }
}

/// A handle's private copy of a [`Registry`], with the last key looked up in front of it (a
/// datapath loop asks for the same CQ or region over and over).
#[derive(Debug)]
pub(crate) struct Cache<K, V> {
    generation: u64,
    map: HashMap<K, V>,
    last: Option<(K, V)>,
}

impl<K, V> Default for Cache<K, V> {
    fn default() -> Self {
        Self {
            generation: u64::MAX,
            map: HashMap::new(),
            last: None,
        }
    }
}

impl<K: std::hash::Hash + Eq + Copy, V: Clone> Cache<K, V> {
    /// The value of `k`, refreshing the copy first if the registry changed.
    pub fn get(&mut self, registry: &Registry<K, V>, k: &K) -> Option<&V> {
        if self.generation != registry.generation() {
            (self.generation, self.map) = registry.snapshot();
            self.last = None;
        }
        if self.last.as_ref().is_none_or(|(last, _)| last != k) {
            self.last = Some((*k, self.map.get(k)?.clone()));
        }
        self.last.as_ref().map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cache_follows_its_registry() {
        let r: Registry<u32, &str> = Registry::default();
        let mut c = Cache::default();
        assert_eq!(c.get(&r, &1), None);
        r.insert(1, "one");
        r.insert(2, "two");
        assert_eq!(c.get(&r, &1), Some(&"one"));
        assert_eq!(c.get(&r, &2), Some(&"two"));
        assert_eq!(c.get(&r, &1), Some(&"one"));
        r.remove(&1);
        assert_eq!(c.get(&r, &1), None, "a removed key is gone at once");
        r.insert(2, "deux");
        assert_eq!(
            c.get(&r, &2),
            Some(&"deux"),
            "a replaced value is seen at once"
        );
    }

    #[test]
    fn owned_send_wrs_keep_their_gather_list() {
        let sges: Vec<Sge> = (0..6)
            .map(|i| Sge {
                addr: 100 * i,
                length: i as u32,
                lkey: 7,
            })
            .collect();
        for n in [0, 1, 4, 6] {
            let wr = SendWr {
                wr_id: 9,
                opcode: SendOpcode::WriteWithImm(3),
                sg_list: &sges[..n],
                remote_addr: 0x1000,
                rkey: 5,
                signaled: n % 2 == 0,
            };
            let owned = OwnedSendWr::new(&wr);
            let back = owned.as_wr();
            assert_eq!(back.sg_list, &sges[..n]);
            assert_eq!(
                (
                    back.wr_id,
                    back.opcode,
                    back.remote_addr,
                    back.rkey,
                    back.signaled
                ),
                (9, SendOpcode::WriteWithImm(3), 0x1000, 5, n % 2 == 0)
            );
        }
    }
}
