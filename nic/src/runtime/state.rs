//! The NIC thread's state besides its ports: the engine, the completion rings it feeds, the
//! QP → CQ map that error completions need, neighbour discovery, counters. Control commands
//! run against it (as a [`NicControl`]); the poll loop in `mod.rs` drives it.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use mrc_transport::Endpoint;
use mrc_transport::verbs::{
    CqHandle, QpInitAttr, Qpn, VerbsError, WcOpcode, WcStatus, WorkCompletion,
};

use crate::ndp::Ndp;
use crate::shared::{CqRing, Doorbell, NicControl, NicEvent, Shared};
use crate::status::{NicStats, PortState};

/// Completions moved per CQ per iteration at most.
const CQ_BATCH: usize = 64;

/// One CQ: the engine's handle, the ring towards the application, and completions the NIC
/// made itself (refused doorbells) that did not fit yet.
#[derive(Debug)]
pub(crate) struct CqEntry {
    pub handle: CqHandle,
    pub ring: Arc<CqRing>,
    pub backlog: VecDeque<WorkCompletion>,
    /// On `NicState::pending`.
    pub pending: bool,
}

/// Everything the NIC thread owns besides its ports.
#[derive(Debug)]
pub(crate) struct NicState {
    pub(crate) endpoint: Endpoint,
    pub(crate) cqs: HashMap<CqHandle, CqEntry>,
    /// CQs that may hold completions for the application: the engine listed them, or the NIC
    /// made some itself, or their ring was full. Only these are polled (issue #13).
    pending: Vec<CqHandle>,
    /// The send and receive CQ of every QP, for completions of refused doorbells.
    pub(crate) qp_cqs: HashMap<Qpn, (CqHandle, CqHandle)>,
    pub(crate) ndp: Ndp,
    /// Link state as the ports report it.
    pub(crate) link_up: Vec<bool>,
    /// Port state as the engine was told (link up and next hop known).
    pub(crate) engine_up: Vec<bool>,
    pub(crate) stats: NicStats,
    pub(crate) shared: Arc<Shared>,
    /// Doorbells waiting for room in their QP's queue, in order.
    pub(crate) deferred: VecDeque<Doorbell>,
    pub(crate) deferred_max: usize,
    /// `(qpn, is_send)` of queues found full in this pass.
    blocked: Vec<(Qpn, bool)>,
    scratch: Vec<WorkCompletion>,
}

impl NicState {
    pub(crate) fn new(
        endpoint: Endpoint,
        ndp: Ndp,
        link_up: Vec<bool>,
        shared: Arc<Shared>,
        deferred_max: usize,
    ) -> Self {
        // The engine starts with every port up.
        let engine_up = vec![true; link_up.len()];
        Self {
            endpoint,
            cqs: HashMap::new(),
            pending: Vec::new(),
            qp_cqs: HashMap::new(),
            ndp,
            link_up,
            engine_up,
            stats: NicStats::default(),
            shared,
            deferred: VecDeque::new(),
            deferred_max: deferred_max.max(1),
            blocked: Vec::new(),
            scratch: vec![WorkCompletion::EMPTY; CQ_BATCH],
        }
    }

    // ---- datapath ---------------------------------------------------------------------------

    /// Takes doorbells: first those waiting for room (in order; a queue still full holds back
    /// the doorbells behind it), then new ones from the ring while the waiting list has room.
    /// Returns how many reached the engine.
    pub(crate) fn ring_doorbells(&mut self, budget: usize) -> usize {
        let mut done = 0;
        self.blocked.clear();
        for _ in 0..self.deferred.len() {
            let Some(d) = self.deferred.pop_front() else {
                break;
            };
            if self.blocked.contains(&(d.qpn(), d.is_send())) {
                self.deferred.push_back(d);
            } else if self.post(d) {
                done += 1;
            }
        }
        // An empty queue is the common case of a busy loop: `is_empty` is two plain loads,
        // while a `pop` that finds nothing costs crossbeam a full fence (issue #13).
        for _ in 0..budget {
            if self.deferred.len() >= self.deferred_max || self.shared.doorbells.is_empty() {
                break;
            }
            let Some(d) = self.shared.doorbells.pop() else {
                break;
            };
            self.stats.doorbells += 1;
            if self.blocked.contains(&(d.qpn(), d.is_send())) {
                self.stats.doorbells_deferred += 1;
                self.deferred.push_back(d);
            } else if self.post(d) {
                done += 1;
            } else {
                self.stats.doorbells_deferred += 1;
            }
        }
        done
    }

    /// Gives a doorbell to the engine. `false` (and the doorbell deferred) when its queue is
    /// full; other refusals complete with an error.
    fn post(&mut self, d: Doorbell) -> bool {
        let result = match &d {
            Doorbell::Send { qpn, wr } => self.endpoint.post_send(*qpn, &wr.as_wr()),
            Doorbell::Recv { qpn, wr } => self.endpoint.post_recv(*qpn, wr),
        };
        match result {
            Ok(()) => true,
            Err(VerbsError::SendQueueFull | VerbsError::RecvQueueFull) => {
                self.blocked.push((d.qpn(), d.is_send()));
                self.deferred.push_back(d);
                false
            }
            Err(error) => {
                self.refuse(&d, error);
                true
            }
        }
    }

    /// A doorbell the engine refused: an error completion on its QP's CQ (as a hardware NIC
    /// completes a bad work request), or an event when the QP is unknown.
    fn refuse(&mut self, d: &Doorbell, error: VerbsError) {
        self.stats.doorbell_errors += 1;
        let qpn = d.qpn();
        tracing::debug!(%qpn, wr_id = d.wr_id(), %error, "work request refused");
        let Some(&(send_cq, recv_cq)) = self.qp_cqs.get(&qpn) else {
            self.shared.push_event(NicEvent::DoorbellRejected {
                qpn,
                wr_id: d.wr_id(),
                error,
            });
            return;
        };
        let (cq, opcode) = if d.is_send() {
            (send_cq, WcOpcode::RdmaWrite)
        } else {
            (recv_cq, WcOpcode::RecvRdmaWithImm)
        };
        let wc = WorkCompletion {
            wr_id: d.wr_id(),
            status: error_status(error),
            opcode,
            qpn,
            byte_len: 0,
            imm_data: None,
        };
        if let Some(e) = self.cqs.get_mut(&cq) {
            e.backlog.push_back(wc);
            if !e.pending {
                e.pending = true;
                self.pending.push(cq);
            }
        }
    }

    /// Moves completions from the engine's CQs to the application's rings, as many as fit:
    /// only the CQs the engine listed as given completions (`Endpoint::take_ready_cqs`) and
    /// those left with some last time, not every CQ every iteration.
    pub(crate) fn move_completions(&mut self) -> usize {
        let Self {
            endpoint,
            cqs,
            pending,
            scratch,
            stats,
            ..
        } = self;
        // The CQs left with completions last time, then those the engine listed since; one
        // that is on the list twice is moved the first time and dropped the second.
        let old = pending.len();
        endpoint.take_ready_cqs(pending);
        let mut at = 0;
        let mut moved = 0;
        pending.retain(|cq| {
            let listed_again = at >= old;
            at += 1;
            let Some(e) = cqs.get_mut(cq) else {
                return false;
            };
            if listed_again && e.pending {
                return false;
            }
            let q = &e.ring.queue;
            while !e.backlog.is_empty() && !q.is_full() {
                if let Some(wc) = e.backlog.pop_front() {
                    let _ = q.push(wc);
                    moved += 1;
                }
            }
            let room = (q.capacity() - q.len()).min(CQ_BATCH);
            let n = if room == 0 {
                0
            } else {
                endpoint
                    .poll_cq(e.handle, &mut scratch[..room])
                    .unwrap_or(0)
            };
            for wc in &scratch[..n] {
                // Room was counted above and only this thread pushes.
                let _ = q.push(*wc);
            }
            moved += n;
            // It filled its batch or its ring, or a backlog is left: the engine may hold more.
            e.pending = n == room || !e.backlog.is_empty();
            e.pending
        });
        stats.completions += moved as u64;
        moved
    }
}

/// The control path: what the application's commands do on the NIC thread.
impl NicControl for NicState {
    fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    fn shared(&self) -> &Shared {
        &self.shared
    }

    fn stats(&self) -> NicStats {
        let mut s = self.stats;
        s.events_dropped = self
            .shared
            .events_dropped
            .load(std::sync::atomic::Ordering::Relaxed);
        s.ndp = self.ndp.stats();
        s
    }

    fn ports(&self) -> Vec<PortState> {
        (0..self.link_up.len())
            .map(|p| PortState {
                link_up: self.link_up[p],
                next_hop: self.ndp.neighbour(p as u8),
                usable: self.engine_up[p],
            })
            .collect()
    }

    fn create_cq(&mut self, depth: u32) -> Result<CqHandle, VerbsError> {
        let handle = self.endpoint.create_cq(depth)?;
        let ring = Arc::new(CqRing {
            queue: ArrayQueue::new(depth as usize),
        });
        self.shared.cqs.insert(handle, Arc::clone(&ring));
        self.cqs.insert(
            handle,
            CqEntry {
                handle,
                ring,
                backlog: VecDeque::new(),
                pending: false,
            },
        );
        Ok(handle)
    }

    fn destroy_cq(&mut self, cq: CqHandle) -> Result<(), VerbsError> {
        self.endpoint.destroy_cq(cq)?;
        self.cqs.remove(&cq);
        self.pending.retain(|&p| p != cq);
        self.shared.cqs.remove(&cq);
        Ok(())
    }

    fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qpn, VerbsError> {
        let qpn = self.endpoint.create_qp(attr)?;
        self.qp_cqs.insert(qpn, (attr.send_cq, attr.recv_cq));
        Ok(qpn)
    }

    fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), VerbsError> {
        self.endpoint.destroy_qp(qpn)?;
        self.qp_cqs.remove(&qpn);
        self.deferred.retain(|d| d.qpn() != qpn);
        Ok(())
    }
}

/// The completion status of a work request the engine refused at post time.
fn error_status(e: VerbsError) -> WcStatus {
    match e {
        VerbsError::TooManySge { .. } | VerbsError::MessageTooLong(_) => WcStatus::LocalLengthError,
        VerbsError::InvalidState(_) => WcStatus::WrFlushError,
        _ => WcStatus::LocalProtectionError,
    }
}
