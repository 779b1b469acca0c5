//! The verbs of an [`Endpoint`] (libibverbs names, OCP `mrc.h` shape, brief §7.1). Bad calls
//! return a [`VerbsError`]; none panics.

use super::Endpoint;
use crate::qp::Qp;
use crate::verbs::{
    Access, Cq, CqHandle, Memory, MrKeys, PdHandle, QpInfo, QpInitAttr, QpTransition, Qpn, RecvWr,
    SendWr, VerbsError, WorkCompletion,
};

impl Endpoint {
    /// Allocate a protection domain.
    pub fn alloc_pd(&mut self) -> Result<PdHandle, VerbsError> {
        self.pds
            .insert(())
            .map(PdHandle)
            .map_err(|()| VerbsError::LimitReached {
                what: "protection domains",
            })
    }

    /// Free a protection domain no region or QP uses any more.
    pub fn dealloc_pd(&mut self, pd: PdHandle) -> Result<(), VerbsError> {
        if self.pds.get(pd.0).is_none() {
            return Err(VerbsError::InvalidPd(pd));
        }
        if self.mrs.uses_pd(pd) || self.qps.iter().any(|(_, q)| q.attr.pd == pd) {
            return Err(VerbsError::Busy {
                what: "protection domain",
            });
        }
        self.pds.remove(pd.0);
        Ok(())
    }

    /// Register `mem` as a region whose first byte answers to `iova` (RETH VA = iova +
    /// offset). Remote write needs [`Access::REMOTE_WRITE`] (and local write with it).
    pub fn reg_mr(
        &mut self,
        pd: PdHandle,
        iova: u64,
        mem: Box<dyn Memory>,
        access: Access,
    ) -> Result<MrKeys, VerbsError> {
        if self.pds.get(pd.0).is_none() {
            return Err(VerbsError::InvalidPd(pd));
        }
        self.mrs.register(pd, iova, mem, access)
    }

    /// Deregister a region, handing its memory back.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<Box<dyn Memory>, VerbsError> {
        self.mrs.deregister(lkey)
    }

    /// Create a completion queue holding up to `depth` completions.
    pub fn create_cq(&mut self, depth: u32) -> Result<CqHandle, VerbsError> {
        if depth == 0 || depth > self.cfg.limits.max_cq_depth {
            return Err(VerbsError::InvalidAttr("CQ depth"));
        }
        self.cqs
            .insert(Cq::new(depth as usize))
            .map(CqHandle)
            .map_err(|_| VerbsError::LimitReached {
                what: "completion queues",
            })
    }

    /// Destroy a completion queue no QP uses.
    pub fn destroy_cq(&mut self, cq: CqHandle) -> Result<(), VerbsError> {
        if self.cqs.get(cq.0).is_none() {
            return Err(VerbsError::InvalidCq(cq));
        }
        if self
            .qps
            .iter()
            .any(|(_, q)| q.attr.send_cq == cq || q.attr.recv_cq == cq)
        {
            return Err(VerbsError::Busy {
                what: "completion queue",
            });
        }
        self.cqs.remove(cq.0);
        Ok(())
    }

    /// Create a QP (state RESET).
    pub fn create_qp(&mut self, attr: &QpInitAttr) -> Result<Qpn, VerbsError> {
        if self.pds.get(attr.pd.0).is_none() {
            return Err(VerbsError::InvalidPd(attr.pd));
        }
        for cq in [attr.send_cq, attr.recv_cq] {
            if self.cqs.get(cq.0).is_none() {
                return Err(VerbsError::InvalidCq(cq));
            }
        }
        let l = self.cfg.limits;
        let c = attr.cap;
        if c.max_send_wr == 0
            || c.max_send_wr > l.max_send_wr
            || c.max_recv_wr > l.max_recv_wr
            || c.max_send_sge > l.max_send_sge
        {
            return Err(VerbsError::InvalidAttr("QP capabilities beyond the limits"));
        }
        let rng = self.rng.fork(self.qps.len() as u64);
        // The QPN is the slab key; the QP learns it once inserted.
        let qp = Qp::new(Qpn(0), *attr, rng);
        let key = self
            .qps
            .insert(qp)
            .map_err(|_| VerbsError::LimitReached { what: "QPs" })?;
        if let Some(q) = self.qps.get_mut(key) {
            q.qpn = Qpn(key);
        }
        // Room for this QP in the scheduling tables, so the datapath never grows them.
        let n = self.qps.len();
        let timers = super::TIMER_ENTRIES_PER_QP * n + super::TIMER_SLACK + 1;
        self.timers
            .reserve(timers.saturating_sub(self.timers.len()));
        self.tx_queue.reserve(n.saturating_sub(self.tx_queue.len()));
        self.ctrl_queue
            .reserve(n.saturating_sub(self.ctrl_queue.len()));
        self.due_scratch
            .reserve(n.saturating_sub(self.due_scratch.len()));
        self.wake_scratch
            .reserve(n.saturating_sub(self.wake_scratch.len()));
        self.peer_scratch
            .reserve(n.saturating_sub(self.peer_scratch.len()));
        self.notify_scratch
            .reserve(n.saturating_sub(self.notify_scratch.len()));
        Ok(Qpn(key))
    }

    /// Destroy a QP (its outstanding work is dropped without completions, as after RESET).
    pub fn destroy_qp(&mut self, qpn: Qpn) -> Result<(), VerbsError> {
        let idx = self.qps.index_of(qpn.0).ok_or(VerbsError::InvalidQp(qpn))?;
        self.with_qp_repeer(idx, |qp, ctx| qp.modify(QpTransition::Reset, ctx));
        self.qps.remove(qpn.0);
        self.tx_queue.retain(|&i| i as usize != idx);
        self.ctrl_queue.retain(|&i| i as usize != idx);
        Ok(())
    }

    /// Move a QP through its state machine (RESET → INIT → RTR → RTS, any → ERROR or RESET).
    pub fn modify_qp(&mut self, qpn: Qpn, transition: QpTransition) -> Result<(), VerbsError> {
        let idx = self.qps.index_of(qpn.0).ok_or(VerbsError::InvalidQp(qpn))?;
        self.with_qp_repeer(idx, |qp, ctx| qp.modify(transition, ctx))
            .ok_or(VerbsError::InvalidQp(qpn))?
    }

    /// Dynamic MPR (brief §3.5): the MPR QP `qpn`'s responder accepts from now on, in PSNs,
    /// advertised in every SACK it sends (in whole units of 128 PSNs, rounded down). From 128
    /// up to its RTR MPR; the QP must be in RTR or RTS with `RtrAttr::dynamic_mpr` set. A
    /// requester that enabled dynamic MPR too sends no new PSN beyond its cumulative ACK plus
    /// this once it hears it; this responder still places what arrives within its RTR MPR
    /// (packets sent before the requester heard of a shrink).
    pub fn set_qp_mpr(&mut self, qpn: Qpn, psns: u32) -> Result<(), VerbsError> {
        let idx = self.qps.index_of(qpn.0).ok_or(VerbsError::InvalidQp(qpn))?;
        self.with_qp(idx, |qp, _| qp.set_mpr(psns))
            .ok_or(VerbsError::InvalidQp(qpn))?
    }

    /// A QP's state and attributes.
    pub fn query_qp(&self, qpn: Qpn) -> Result<QpInfo, VerbsError> {
        self.qps
            .get(qpn.0)
            .map(Qp::info)
            .ok_or(VerbsError::InvalidQp(qpn))
    }

    /// Post a Write or Write-with-Immediate. The gather list is checked now (keys, PD,
    /// bounds); the bytes are read when the packets leave.
    pub fn post_send(&mut self, qpn: Qpn, wr: &SendWr<'_>) -> Result<(), VerbsError> {
        let idx = self.qps.index_of(qpn.0).ok_or(VerbsError::InvalidQp(qpn))?;
        self.with_qp(idx, |qp, ctx| qp.post_send(wr, ctx))
            .ok_or(VerbsError::InvalidQp(qpn))?
    }

    /// Post a receive for an incoming Write-with-Immediate.
    pub fn post_recv(&mut self, qpn: Qpn, wr: &RecvWr) -> Result<(), VerbsError> {
        let idx = self.qps.index_of(qpn.0).ok_or(VerbsError::InvalidQp(qpn))?;
        self.with_qp(idx, |qp, ctx| qp.post_recv(wr.wr_id, ctx))
            .ok_or(VerbsError::InvalidQp(qpn))?
    }

    /// Move up to `out.len()` completions of `cq`, oldest first, into `out`.
    pub fn poll_cq(
        &mut self,
        cq: CqHandle,
        out: &mut [WorkCompletion],
    ) -> Result<usize, VerbsError> {
        self.cqs
            .get_mut(cq.0)
            .map(|q| q.poll(out))
            .ok_or(VerbsError::InvalidCq(cq))
    }

    /// The CQs that were given completions since the last call, each once, into `out` (which
    /// is not cleared): a NIC loop polls just these instead of every CQ each iteration
    /// (issue #13). A CQ it does not drain stays the caller's to poll again; the engine lists
    /// it again only at its next new completion.
    pub fn take_ready_cqs(&mut self, out: &mut Vec<CqHandle>) {
        for cq in self.ready_cqs.drain(..) {
            if let Some(q) = self.cqs.get_mut(cq.0) {
                q.listed = false;
                out.push(cq);
            }
        }
    }

    /// Read `dst.len()` bytes at `va` of the local region `lkey` (the application's view of
    /// its own memory).
    pub fn mr_read(&self, lkey: u32, va: u64, dst: &mut [u8]) -> Result<(), VerbsError> {
        self.mrs.read_local(lkey, va, dst)
    }

    /// Write `src` at `va` into the local region `lkey`.
    pub fn mr_write(&mut self, lkey: u32, va: u64, src: &[u8]) -> Result<(), VerbsError> {
        let mr = self
            .mrs
            .by_lkey_mut(lkey)
            .ok_or(VerbsError::InvalidLkey(lkey))?;
        let offset = mr
            .offset_of(va, src.len() as u64)
            .ok_or(VerbsError::OutOfBounds)?;
        mr.memory.write(offset, src);
        Ok(())
    }

    /// The whole local region `lkey` as a slice, when its memory can lend one.
    pub fn mr_slice(&self, lkey: u32) -> Option<&[u8]> {
        self.mrs.by_lkey(lkey)?.memory.as_slice()
    }
}
