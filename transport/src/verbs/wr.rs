//! Work requests (libibverbs `ibv_send_wr` / `ibv_recv_wr` shape, Write and
//! Write-with-Immediate only: brief §3.8, §7.1).

/// One gather entry: `length` bytes at `addr` in the region `lkey` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// The operation of a send work request. MRC carries RDMA Write and Write-with-Immediate
/// only (brief §1, §3.8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendOpcode {
    /// RDMA Write: the bytes land in the peer's memory, no receive completion there.
    Write,
    /// RDMA Write with Immediate: the bytes land, then the peer gets a receive completion
    /// carrying the immediate, in message order.
    WriteWithImm(u32),
}

/// A send work request: write the gathered bytes to `remote_addr` in the peer region `rkey`
/// names.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    pub wr_id: u64,
    pub opcode: SendOpcode,
    /// The gather list, concatenated in order (may be empty: a zero-length write).
    pub sg_list: &'a [Sge],
    pub remote_addr: u64,
    pub rkey: u32,
    /// Produce a completion on success (errors always complete).
    pub signaled: bool,
}

/// A receive work request: consumed, in order, by incoming Write-with-Immediate messages, whose
/// bytes land at their RETH address (so no scatter list is needed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecvWr {
    pub wr_id: u64,
}
