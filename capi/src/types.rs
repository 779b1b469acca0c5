//! The structures C code fills and reads (`#[repr(C)]`), in libibverbs' shape and OCP `mrc.h`'s
//! spelling: work requests, scatter/gather entries, work completions, QP attributes.

use core::ffi::c_int;

/// Success.
pub const MRC_OK: c_int = 0;
/// An argument is invalid (a null pointer, an unknown opcode, a bad transition).
pub const MRC_EINVAL: c_int = -22;
/// A queue is full (send or receive queue, doorbell ring): poll completions and retry.
pub const MRC_EAGAIN: c_int = -11;
/// The object is in use (a PD with QPs, a CQ with QPs).
pub const MRC_EBUSY: c_int = -16;
/// A limit was reached (QPs, MRs, CQ depth).
pub const MRC_ENOMEM: c_int = -12;
/// The NIC thread stopped or did not answer.
pub const MRC_EIO: c_int = -5;
/// A range outside a memory region.
pub const MRC_ERANGE: c_int = -34;
/// The library caught a panic (a bug): the call did nothing it reports.
pub const MRC_EFAULT: c_int = -14;

/// `access` flags of a memory region.
pub const MRC_ACCESS_LOCAL_WRITE: c_int = 1;
pub const MRC_ACCESS_REMOTE_WRITE: c_int = 2;

/// `mrc_send_wr.opcode`: RDMA Write (MRC carries Write and Write-with-Immediate only).
pub const MRC_WR_RDMA_WRITE: c_int = 0;
/// `mrc_send_wr.opcode`: RDMA Write with Immediate.
pub const MRC_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
/// `mrc_send_wr.send_flags`: produce a completion on success.
pub const MRC_SEND_SIGNALED: c_int = 1 << 1;

/// `mrc_wc.opcode`: a Write (with or without immediate) of this QP completed.
pub const MRC_WC_RDMA_WRITE: c_int = 1;
/// `mrc_wc.opcode`: a receive consumed by an incoming Write-with-Immediate.
pub const MRC_WC_RECV_RDMA_WITH_IMM: c_int = 129;
/// `mrc_wc.wc_flags`: `imm_data` is valid.
pub const MRC_WC_WITH_IMM: c_int = 1 << 1;

/// `mrc_wc.status` values (libibverbs' numbering).
pub const MRC_WC_SUCCESS: c_int = 0;
pub const MRC_WC_LOC_LEN_ERR: c_int = 1;
pub const MRC_WC_LOC_PROT_ERR: c_int = 4;
pub const MRC_WC_WR_FLUSH_ERR: c_int = 5;
pub const MRC_WC_REM_INV_REQ_ERR: c_int = 9;
pub const MRC_WC_REM_ACCESS_ERR: c_int = 10;
pub const MRC_WC_REM_OP_ERR: c_int = 11;
pub const MRC_WC_RETRY_EXC_ERR: c_int = 12;

/// QP states (`mrc_qp_attr.qp_state`).
pub const MRC_QPS_RESET: c_int = 0;
pub const MRC_QPS_INIT: c_int = 1;
pub const MRC_QPS_RTR: c_int = 2;
pub const MRC_QPS_RTS: c_int = 3;
pub const MRC_QPS_ERR: c_int = 6;

/// `mrc_modify_qp` attribute mask bits: which fields of `mrc_qp_attr` are given (the others
/// take the engine's defaults).
pub const MRC_QP_STATE: c_int = 1 << 0;
pub const MRC_QP_EV_PROFILE: c_int = 1 << 1;
pub const MRC_QP_CC_PROFILE: c_int = 1 << 2;
pub const MRC_QP_AV: c_int = 1 << 3;
pub const MRC_QP_DEST_QPN: c_int = 1 << 4;
pub const MRC_QP_RQ_PSN: c_int = 1 << 5;
pub const MRC_QP_SQ_PSN: c_int = 1 << 6;
pub const MRC_QP_MPR: c_int = 1 << 7;
pub const MRC_QP_WIMM_LIMIT: c_int = 1 << 8;
pub const MRC_QP_TIMEOUT: c_int = 1 << 9;
pub const MRC_QP_RETRY_CNT: c_int = 1 << 10;
/// Dynamic MPR (capability DYNAMIC_MPR, brief §3.5): RTR for the responder, RTS for the
/// requester; effective when both ends set it.
pub const MRC_QP_DYNAMIC_MPR: c_int = 1 << 11;

/// One gather entry: `length` bytes at `addr` (an IOVA of the region `lkey` names).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// A send work request (a list through `next`, as `ibv_send_wr`).
#[repr(C)]
#[derive(Debug)]
pub struct mrc_send_wr {
    pub wr_id: u64,
    pub next: *mut mrc_send_wr,
    pub sg_list: *mut mrc_sge,
    pub num_sge: c_int,
    /// `MRC_WR_RDMA_WRITE` or `MRC_WR_RDMA_WRITE_WITH_IMM`.
    pub opcode: c_int,
    /// `MRC_SEND_SIGNALED` or 0.
    pub send_flags: c_int,
    /// The immediate (host byte order) of a Write-with-Immediate.
    pub imm_data: u32,
    pub remote_addr: u64,
    pub rkey: u32,
}

/// A receive work request, consumed by an incoming Write-with-Immediate.
#[repr(C)]
#[derive(Debug)]
pub struct mrc_recv_wr {
    pub wr_id: u64,
    pub next: *mut mrc_recv_wr,
}

/// A work completion (as `ibv_wc`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_wc {
    pub wr_id: u64,
    /// `MRC_WC_SUCCESS` or an error status.
    pub status: c_int,
    /// `MRC_WC_RDMA_WRITE` or `MRC_WC_RECV_RDMA_WITH_IMM`.
    pub opcode: c_int,
    pub qp_num: u32,
    pub byte_len: u32,
    /// The immediate, when `wc_flags` has `MRC_WC_WITH_IMM`.
    pub imm_data: u32,
    pub wc_flags: c_int,
}

/// Queue sizes of a QP.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
}

/// What a QP is made of.
#[repr(C)]
#[derive(Debug)]
pub struct mrc_qp_init_attr {
    pub send_cq: *mut crate::mrc_cq,
    pub recv_cq: *mut crate::mrc_cq,
    pub cap: mrc_qp_cap,
    /// Every send completes, whatever its flags.
    pub sq_sig_all: c_int,
}

/// Attributes of `mrc_modify_qp`, per transition: INIT (EV and CC profile), RTR (the peer's
/// NIC address and QPN, receive PSN, responder MPR and Write-with-Immediate limit), RTS (send
/// PSN, timeout, retry counts, requester MPR and Write-with-Immediate limit).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_qp_attr {
    pub qp_state: c_int,
    pub ev_profile: u16,
    pub cc_profile: u16,
    /// The peer NIC's IPv6 address (its GID), network byte order.
    pub dest_gid: [u8; 16],
    pub dest_qp_num: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub mpr: u32,
    pub wimm_limit: u16,
    pub timeout: u8,
    pub retry_cnt_linear: u8,
    pub retry_cnt_exp: u8,
    /// Non-zero: dynamic MPR on (with `MRC_QP_DYNAMIC_MPR`), at RTR and at RTS.
    pub dynamic_mpr: u8,
}

/// A registered memory region's keys and place.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct mrc_mr_attr {
    pub iova: u64,
    pub length: u64,
    pub lkey: u32,
    pub rkey: u32,
}
