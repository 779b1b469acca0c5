//! Completion queues and work completions (libibverbs `ibv_wc` shape, brief §7.1).

use std::collections::VecDeque;

use super::Qpn;

/// How a work request ended (libibverbs `ibv_wc_status`, the subset MRC can produce).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcStatus {
    /// The operation completed.
    Success,
    /// A local length error (a message longer than the QP allows).
    LocalLengthError,
    /// A local gather entry named memory the QP may not read (deregistered since posting).
    LocalProtectionError,
    /// The work request was flushed because the QP is in the error state.
    WrFlushError,
    /// The responder refused the write: bad rkey, range outside the region or no remote
    /// write access.
    RemoteAccessError,
    /// The responder could not complete the request (its QP failed or it hit a limit such as
    /// the outstanding Write-with-Immediate bound).
    RemoteOperationalError,
    /// The retry budget ran out: no path delivered the request (all paths dead or the peer
    /// gone). Never used for one lost packet.
    RetryExceeded,
    /// A protocol violation from the peer (NACK UNEXP_EVENT).
    RemoteInvalidRequest,
}

impl WcStatus {
    /// `true` for [`WcStatus::Success`].
    pub const fn is_success(self) -> bool {
        matches!(self, Self::Success)
    }
}

/// What kind of work request completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WcOpcode {
    /// A send-queue RDMA Write (with or without immediate).
    RdmaWrite,
    /// A receive consumed by an incoming Write-with-Immediate.
    RecvRdmaWithImm,
}

/// One completion (libibverbs `ibv_wc`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkCompletion {
    /// The `wr_id` of the work request.
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    /// The QP the work request was posted on.
    pub qpn: Qpn,
    /// Bytes written: the message length (for a receive, the incoming Write's DMA length).
    pub byte_len: u32,
    /// The immediate of an incoming Write-with-Immediate.
    pub imm_data: Option<u32>,
}

impl WorkCompletion {
    /// A blank completion, for sizing `poll_cq` arrays.
    pub const EMPTY: Self = Self {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::RdmaWrite,
        qpn: Qpn(0),
        byte_len: 0,
        imm_data: None,
    };
}

impl Default for WorkCompletion {
    fn default() -> Self {
        Self::EMPTY
    }
}

/// A completion queue of fixed depth. The engine never holds more completions than the depth:
/// one that does not fit is counted as an overrun and reported as an event. Its ring starts
/// small and doubles as completions wait in it, up to the depth: a deep CQ that is polled
/// often costs what it holds, not its depth (a thousand simulated hosts with 64 Ki-deep CQs
/// reserved 2 GiB; issue #14).
#[derive(Debug)]
pub(crate) struct Cq {
    entries: VecDeque<WorkCompletion>,
    depth: usize,
    pub overruns: u64,
    /// On the endpoint's list of CQs with new completions (`Endpoint::take_ready_cqs`).
    pub listed: bool,
}

/// Entries a CQ's ring holds before it first grows.
const INITIAL_RING: usize = 64;

impl Cq {
    pub fn new(depth: usize) -> Self {
        Self {
            entries: VecDeque::with_capacity(depth.min(INITIAL_RING)),
            depth,
            overruns: 0,
            listed: false,
        }
    }

    /// Queue a completion; `false` (and an overrun counted) when the queue is full.
    #[inline]
    pub fn push(&mut self, wc: WorkCompletion) -> bool {
        if self.entries.len() >= self.depth {
            self.overruns += 1;
            return false;
        }
        self.entries.push_back(wc);
        true
    }

    /// Move up to `out.len()` completions, oldest first, into `out`.
    pub fn poll(&mut self, out: &mut [WorkCompletion]) -> usize {
        let n = out.len().min(self.entries.len());
        for (slot, wc) in out.iter_mut().zip(self.entries.drain(..n)) {
            *slot = wc;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wc(id: u64) -> WorkCompletion {
        WorkCompletion {
            wr_id: id,
            ..WorkCompletion::EMPTY
        }
    }

    #[test]
    fn fifo_with_bounded_depth() {
        let mut cq = Cq::new(2);
        assert!(cq.push(wc(1)) && cq.push(wc(2)));
        assert!(!cq.push(wc(3)));
        assert_eq!(cq.overruns, 1);
        let mut out = [WorkCompletion::EMPTY; 1];
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, 1);
        let mut out = [WorkCompletion::EMPTY; 4];
        assert_eq!(cq.poll(&mut out), 1);
        assert_eq!(out[0].wr_id, 2);
        assert_eq!(cq.poll(&mut out), 0);
    }
}
