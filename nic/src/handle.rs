//! The application's side of a NIC: a cloneable, `Send` handle.
//!
//! - Datapath (never waits): [`post_send`](NicHandle::post_send) and
//!   [`post_recv`](NicHandle::post_recv) ring a lock-free doorbell queue the NIC thread drains;
//!   [`poll_cq`](NicHandle::poll_cq) pops the CQ's lock-free completion ring;
//!   [`mr_read`](NicHandle::mr_read) / [`mr_write`](NicHandle::mr_write) copy straight from and
//!   to a shared [`MemoryRegion`].
//! - Control path (waits for the NIC thread, which never waits for it): every other verb is a
//!   command run on the NIC thread, answered through a channel.
//!
//! Errors of a posted work request that only the engine can see (bad lkey, QP not ready) come
//! back as an error completion on the QP's CQ, as a hardware NIC reports them.

use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::sync::mpsc;

use mrc_transport::app::Verbs;
use mrc_transport::ev::EvInfo;
use mrc_transport::stats::{EndpointStats, PlaneStats, QpStats};
use mrc_transport::verbs::{
    Access, CqHandle, Memory, MrKeys, PdHandle, QpInfo, QpInitAttr, QpState, QpTransition, Qpn,
    RecvWr, SendWr, VerbsError, WorkCompletion,
};
use mrc_transport::{Endpoint, Instant};

use crate::error::NicError;
use crate::memory::MemoryRegion;
use crate::shared::{
    Cache, Command, CqRing, Doorbell, NicControl, NicEvent, OwnedSendWr, Shared, SharedMr,
};
use crate::status::{NicStats, PortState};

/// A handle on a running NIC for one application thread. Clone it for every thread that uses
/// the NIC (`Send`, not `Sync`: each clone keeps its own lock-free lookup caches).
pub struct NicHandle {
    shared: Arc<Shared>,
    cqs: RefCell<Cache<CqHandle, Arc<CqRing>>>,
    mrs: RefCell<Cache<u32, SharedMr>>,
}

impl Clone for NicHandle {
    fn clone(&self) -> Self {
        Self::new(Arc::clone(&self.shared))
    }
}

impl std::fmt::Debug for NicHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NicHandle")
            .field("shared", &self.shared)
            .finish()
    }
}

/// What a work request posted after the NIC stopped gets: the QP is as good as in ERROR.
const STOPPED: VerbsError = VerbsError::InvalidState(QpState::Error);

impl NicHandle {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Self {
            shared,
            cqs: RefCell::default(),
            mrs: RefCell::default(),
        }
    }

    // ---- datapath -----------------------------------------------------------------------------

    /// Posts a Write or Write-with-Immediate (the gather list is copied into the doorbell).
    /// `SendQueueFull` when the doorbell ring is full: poll completions and retry.
    pub fn post_send(&self, qpn: Qpn, wr: &SendWr<'_>) -> Result<(), VerbsError> {
        self.ring(
            Doorbell::Send {
                qpn,
                wr: OwnedSendWr::new(wr),
            },
            VerbsError::SendQueueFull,
        )
    }

    /// Posts a receive for an incoming Write-with-Immediate. `RecvQueueFull` when the doorbell
    /// ring is full.
    pub fn post_recv(&self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        self.ring(Doorbell::Recv { qpn, wr: *wr }, VerbsError::RecvQueueFull)
    }

    fn ring(&self, d: Doorbell, full: VerbsError) -> Result<(), VerbsError> {
        if !self.shared.is_running() {
            return Err(STOPPED);
        }
        self.shared.doorbells.push(d).map_err(|_| full)
    }

    /// Moves up to `out.len()` completions of `cq`, oldest first, into `out`.
    pub fn poll_cq(&self, cq: CqHandle, out: &mut [WorkCompletion]) -> Result<usize, VerbsError> {
        let mut cache = self.cqs.borrow_mut();
        let ring = cache
            .get(&self.shared.cqs, &cq)
            .ok_or(VerbsError::InvalidCq(cq))?;
        let mut n = 0;
        // `is_empty` first: a `pop` that finds nothing costs a full fence.
        while n < out.len() && !ring.queue.is_empty() {
            let Some(wc) = ring.queue.pop() else { break };
            out[n] = wc;
            n += 1;
        }
        Ok(n)
    }

    /// Whether `cq` holds completions not polled yet (completion channels watch this).
    pub fn cq_has_completions(&self, cq: CqHandle) -> Result<bool, VerbsError> {
        let mut cache = self.cqs.borrow_mut();
        let ring = cache
            .get(&self.shared.cqs, &cq)
            .ok_or(VerbsError::InvalidCq(cq))?;
        Ok(!ring.queue.is_empty())
    }

    /// Reads local registered memory: straight from a shared [`MemoryRegion`], or through the
    /// NIC thread for memory handed over with [`reg_mr_owned`](Self::reg_mr_owned).
    pub fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        if let Some(mr) = self.mrs.borrow_mut().get(&self.shared.mrs, &lkey) {
            let offset = mr.offset_of(va, dst.len()).ok_or(VerbsError::OutOfBounds)?;
            mr.region.read(offset, dst);
            return Ok(());
        }
        let len = dst.len();
        let bytes = self
            .call(move |s| {
                let mut v = vec![0; len];
                s.endpoint().mr_read(lkey, va, &mut v).map(|()| v)
            })
            .map_err(|_| STOPPED)??;
        dst.copy_from_slice(&bytes);
        Ok(())
    }

    /// Writes local registered memory (see [`mr_read`](Self::mr_read)).
    pub fn mr_write(&self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError> {
        if let Some(mr) = self.mrs.borrow_mut().get(&self.shared.mrs, &lkey) {
            let offset = mr.offset_of(va, src.len()).ok_or(VerbsError::OutOfBounds)?;
            mr.region.write(offset, src);
            return Ok(());
        }
        let bytes = src.to_vec();
        self.call(move |s| s.endpoint().mr_write(lkey, va, &bytes))
            .map_err(|_| STOPPED)?
    }

    /// The next event (engine events, link changes, resolved neighbours, rejected doorbells).
    pub fn poll_event(&self) -> Option<NicEvent> {
        self.shared.events.pop()
    }

    /// The NIC's clock (the `now` its engine sees).
    pub fn now(&self) -> Instant {
        self.shared.now()
    }

    /// Whether the NIC thread is polling.
    pub fn is_running(&self) -> bool {
        self.shared.is_running()
    }

    /// Asks the NIC thread to stop after its current iteration (for runners started by hand,
    /// e.g. on a DPDK lcore; [`Nic::shutdown`](crate::Nic::shutdown) does this and waits).
    pub fn request_stop(&self) {
        self.shared.stop.store(true, Ordering::Relaxed);
    }

    // ---- control path ---------------------------------------------------------------------

    /// Runs `f` on the NIC thread with its state and waits for the answer.
    pub(crate) fn call<R, F>(&self, f: F) -> Result<R, NicError>
    where
        F: FnOnce(&mut dyn NicControl) -> R + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        let mut cmd: Command = Box::new(move |s: &mut dyn NicControl| {
            let _ = tx.send(f(s));
        });
        let timeout = self.shared.control_timeout;
        let start = std::time::Instant::now();
        let slice = std::time::Duration::from_millis(5);
        loop {
            if !self.shared.is_running() {
                return Err(NicError::Stopped);
            }
            match self.shared.commands.push(cmd) {
                Ok(()) => break,
                Err(back) => cmd = back,
            }
            if start.elapsed() > timeout {
                return Err(NicError::Timeout(timeout));
            }
            std::thread::sleep(slice);
        }
        loop {
            match rx.recv_timeout(slice) {
                Ok(r) => return Ok(r),
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(NicError::Stopped),
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    if !self.shared.is_running() {
                        return Err(NicError::Stopped);
                    }
                    if start.elapsed() > timeout {
                        return Err(NicError::Timeout(timeout));
                    }
                }
            }
        }
    }

    /// Runs `f` with the engine on the NIC thread (for what the handle does not wrap) and waits
    /// for its result. Do not poll CQs there: completions belong to the CQ rings.
    pub fn with_endpoint<R, F>(&self, f: F) -> Result<R, NicError>
    where
        F: FnOnce(&mut Endpoint) -> R + Send + 'static,
        R: Send + 'static,
    {
        self.call(move |s| f(s.endpoint()))
    }

    /// Allocates a protection domain.
    pub fn alloc_pd(&self) -> Result<PdHandle, NicError> {
        Ok(self.call(|s| s.endpoint().alloc_pd())??)
    }

    /// Frees a protection domain.
    pub fn dealloc_pd(&self, pd: PdHandle) -> Result<(), NicError> {
        Ok(self.call(move |s| s.endpoint().dealloc_pd(pd))??)
    }

    /// Registers a shared region whose first byte answers to `iova`: the application keeps its
    /// `region` handle and reads and writes it directly, the NIC places and gathers payload.
    pub fn reg_mr(
        &self,
        pd: PdHandle,
        iova: u64,
        region: &MemoryRegion,
        access: Access,
    ) -> Result<MrKeys, NicError> {
        let mr = SharedMr {
            region: region.clone(),
            iova,
        };
        Ok(self.call(move |s| {
            let keys = s
                .endpoint()
                .reg_mr(pd, iova, Box::new(mr.region.clone()), access)?;
            s.shared().mrs.insert(keys.lkey, mr);
            Ok::<_, VerbsError>(keys)
        })??)
    }

    /// Registers memory handed over to the NIC thread (e.g. a `Vec<u8>`); the application
    /// reaches it through [`mr_read`](Self::mr_read) / [`mr_write`](Self::mr_write) only, at
    /// the cost of a control call each.
    pub fn reg_mr_owned(
        &self,
        pd: PdHandle,
        iova: u64,
        memory: Box<dyn Memory>,
        access: Access,
    ) -> Result<MrKeys, NicError> {
        Ok(self.call(move |s| s.endpoint().reg_mr(pd, iova, memory, access))??)
    }

    /// Deregisters a region; memory handed over comes back.
    pub fn dereg_mr(&self, lkey: u32) -> Result<Box<dyn Memory>, NicError> {
        Ok(self.call(move |s| {
            let m = s.endpoint().dereg_mr(lkey)?;
            s.shared().mrs.remove(&lkey);
            Ok::<_, VerbsError>(m)
        })??)
    }

    /// Creates a completion queue of `depth` completions and its ring.
    pub fn create_cq(&self, depth: u32) -> Result<CqHandle, NicError> {
        Ok(self.call(move |s| s.create_cq(depth))??)
    }

    /// Destroys a completion queue no QP uses.
    pub fn destroy_cq(&self, cq: CqHandle) -> Result<(), NicError> {
        Ok(self.call(move |s| s.destroy_cq(cq))??)
    }

    /// Creates a QP (RESET).
    pub fn create_qp(&self, attr: &QpInitAttr) -> Result<Qpn, NicError> {
        let attr = *attr;
        Ok(self.call(move |s| s.create_qp(&attr))??)
    }

    /// Destroys a QP.
    pub fn destroy_qp(&self, qpn: Qpn) -> Result<(), NicError> {
        Ok(self.call(move |s| s.destroy_qp(qpn))??)
    }

    /// Moves a QP through its state machine.
    pub fn modify_qp(&self, qpn: Qpn, transition: QpTransition) -> Result<(), NicError> {
        Ok(self.call(move |s| s.endpoint().modify_qp(qpn, transition))??)
    }

    /// Dynamic MPR: the MPR a QP's responder advertises from now on (`Endpoint::set_qp_mpr`).
    pub fn set_qp_mpr(&self, qpn: Qpn, psns: u32) -> Result<(), NicError> {
        Ok(self.call(move |s| s.endpoint().set_qp_mpr(qpn, psns))??)
    }

    /// A QP's state and attributes.
    pub fn query_qp(&self, qpn: Qpn) -> Result<QpInfo, NicError> {
        Ok(self.call(move |s| s.endpoint().query_qp(qpn))??)
    }

    /// Counters of a QP.
    pub fn qp_stats(&self, qpn: Qpn) -> Result<Option<QpStats>, NicError> {
        self.call(move |s| s.endpoint().qp_stats(qpn))
    }

    /// Counters of a plane.
    pub fn plane_stats(&self, port: u8) -> Result<Option<PlaneStats>, NicError> {
        self.call(move |s| s.endpoint().plane_stats(port))
    }

    /// State and counters of every EV of a QP.
    pub fn ev_stats(&self, qpn: Qpn) -> Result<Vec<EvInfo>, NicError> {
        self.call(move |s| s.endpoint().ev_stats(qpn))
    }

    /// Counters of the engine.
    pub fn endpoint_stats(&self) -> Result<EndpointStats, NicError> {
        self.call(|s| s.endpoint().stats())
    }

    /// Counters of the NIC runtime (ports, neighbour discovery, doorbells).
    pub fn nic_stats(&self) -> Result<NicStats, NicError> {
        self.call(|s| s.stats())
    }

    /// What the NIC knows of each port: link, next hop, whether the engine may use it.
    pub fn ports(&self) -> Result<Vec<PortState>, NicError> {
        self.call(|s| s.ports())
    }
}

/// Applications written against [`Verbs`] run over the handle as they do over an `Endpoint`.
impl Verbs for NicHandle {
    fn post_send(&mut self, qpn: Qpn, wr: &SendWr<'_>) -> Result<(), VerbsError> {
        Self::post_send(self, qpn, wr)
    }

    fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        Self::post_recv(self, qpn, wr)
    }

    fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        Self::mr_read(self, lkey, va, dst)
    }

    fn mr_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError> {
        Self::mr_write(self, lkey, va, src)
    }
}
