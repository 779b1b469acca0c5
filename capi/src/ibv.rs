//! The libibverbs types this library reads and writes, laid out as rdma-core's
//! `<infiniband/verbs.h>` (Debian libibverbs-dev, rdma-core 44) lays them out on LP64 Linux.
//! Only the fields mrc-rs uses are named; the rest are kept as padding of the right size.
//! `tests/layout.rs` compiles a C program against the real header and checks every size and
//! offset used here.

use core::ffi::{c_char, c_int, c_uint, c_void};

/// `IBV_SYSFS_NAME_MAX`, `IBV_SYSFS_PATH_MAX`.
pub const SYSFS_NAME_MAX: usize = 64;
pub const SYSFS_PATH_MAX: usize = 256;

/// `struct ibv_device`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_device {
    /// `struct _ibv_device_ops` (two obsolete function pointers, NULL).
    pub ops_obsolete: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; SYSFS_NAME_MAX],
    pub dev_name: [c_char; SYSFS_NAME_MAX],
    pub dev_path: [c_char; SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; SYSFS_PATH_MAX],
}

/// `struct ibv_context`: `device`, then `struct ibv_context_ops` (32 function pointers, NULL
/// here: MRC programs call exported functions, never these), the fds, a `pthread_mutex_t` and
/// `abi_compat`. `abi_compat` is NULL, so rdma-core's inline wrappers (`ibv_query_port`, ...)
/// see a context that is not "extended" and call the exported functions.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: [*mut c_void; 32],
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: [u64; 5],
    pub abi_compat: *mut c_void,
}

/// `struct ibv_pd`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

/// `struct ibv_mr`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

/// `struct ibv_device_attr` (232 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    /// `max_qp_rd_atom` .. `max_srq_sge`: 20 ints, zero (no reads, atomics, SRQs).
    pub unused_limits: [c_int; 20],
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_port_attr` (52 bytes; the exported `ibv_query_port` writes the compat prefix,
/// which is all of it but `flags` and `port_cap_flags2`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_port_attr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
}

/// `union ibv_gid` (its `global` member of two `__be64` makes it 8-byte aligned).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

/// `struct ibv_sge`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `struct ibv_send_wr` (128 bytes): `wr.rdma` is the only member of its union MRC uses.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// Network byte order.
    pub imm_data: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// The rest of the `wr` union, `qp_type` and the `bind_mw`/`tso` union.
    pub rest: [u32; 19],
}

/// `struct ibv_recv_wr`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

/// `struct ibv_wc` (48 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// Network byte order.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

/// `struct ibv_qp_cap`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// `struct ibv_global_route`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

/// `struct ibv_ah_attr`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

/// `struct ibv_qp_attr` (144 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

// enum ibv_node_type, ibv_transport_type
pub const IBV_NODE_RNIC: c_int = 4;
pub const IBV_TRANSPORT_IB: c_int = 0;

// enum ibv_port_state, ibv_mtu, link layer
pub const IBV_PORT_DOWN: c_int = 1;
pub const IBV_PORT_ACTIVE: c_int = 4;
pub const IBV_MTU_1024: c_int = 3;
pub const IBV_MTU_4096: c_int = 5;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
/// `phys_state`: 5 LinkUp, 3 Disabled.
pub const PHYS_STATE_LINK_UP: u8 = 5;
pub const PHYS_STATE_DISABLED: u8 = 3;

// enum ibv_access_flags
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 1 << 3;
pub const IBV_ACCESS_MW_BIND: c_int = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: c_int = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: c_int = 1 << 6;
pub const IBV_ACCESS_HUGETLB: c_int = 1 << 7;
pub const IBV_ACCESS_RELAXED_ORDERING: c_int = 1 << 20;
/// Every flag rdma-core 44 defines (bits 0-8, 20, 21).
pub const IBV_ACCESS_KNOWN: c_int = 0x1ff | (1 << 20) | (1 << 21);

// enum ibv_wr_opcode
pub const IBV_WR_RDMA_WRITE: c_int = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;

// enum ibv_send_flags
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;

// enum ibv_wc_opcode, ibv_wc_flags
pub const IBV_WC_RDMA_WRITE: c_int = 1;
pub const IBV_WC_RECV_RDMA_WITH_IMM: c_int = 129;
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;

// enum ibv_wc_status
pub const IBV_WC_SUCCESS: c_int = 0;
pub const IBV_WC_LOC_LEN_ERR: c_int = 1;
pub const IBV_WC_LOC_PROT_ERR: c_int = 4;
pub const IBV_WC_WR_FLUSH_ERR: c_int = 5;
pub const IBV_WC_REM_INV_REQ_ERR: c_int = 9;
pub const IBV_WC_REM_ACCESS_ERR: c_int = 10;
pub const IBV_WC_REM_OP_ERR: c_int = 11;
pub const IBV_WC_RETRY_EXC_ERR: c_int = 12;

// enum ibv_qp_state
pub const IBV_QPS_RESET: c_int = 0;
pub const IBV_QPS_INIT: c_int = 1;
pub const IBV_QPS_RTR: c_int = 2;
pub const IBV_QPS_RTS: c_int = 3;
pub const IBV_QPS_ERR: c_int = 6;

// enum ibv_qp_attr_mask
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = 1 << 2;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_PATH_MIG_STATE: c_int = 1 << 18;
pub const IBV_QP_CAP: c_int = 1 << 19;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
pub const IBV_QP_RATE_LIMIT: c_int = 1 << 25;

// enum ibv_event_type
pub const IBV_EVENT_QP_FATAL: c_int = 1;
pub const IBV_EVENT_PORT_ACTIVE: c_int = 9;
pub const IBV_EVENT_PORT_ERR: c_int = 10;

/// `ibv_wc_status_str`'s strings, as rdma-core words them (programs print and grep them).
pub fn wc_status_str(status: c_int) -> &'static core::ffi::CStr {
    match status {
        0 => c"success",
        1 => c"local length error",
        2 => c"local QP operation error",
        3 => c"local EE context operation error",
        4 => c"local protection error",
        5 => c"Work Request Flushed Error",
        6 => c"memory management operation error",
        7 => c"bad response error",
        8 => c"local access error",
        9 => c"remote invalid request error",
        10 => c"remote access error",
        11 => c"remote operation error",
        12 => c"transport retry counter exceeded",
        13 => c"RNR retry counter exceeded",
        14 => c"local RDD violation error",
        15 => c"remote invalid RD request",
        16 => c"operation aborted",
        17 => c"invalid EE context number",
        18 => c"invalid EE context state",
        19 => c"fatal error",
        20 => c"response timeout error",
        21 => c"general error",
        22 => c"TM error",
        23 => c"TM software rendezvous",
        _ => c"unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::{offset_of, size_of};

    /// The sizes rdma-core 44's header gives on x86-64 (`tests/layout.rs` checks them, and
    /// every offset, against the installed header when it is there).
    #[test]
    fn sizes_match_rdma_core() {
        assert_eq!(size_of::<ibv_device>(), 664);
        assert_eq!(size_of::<ibv_context>(), 328);
        assert_eq!(offset_of!(ibv_context, abi_compat), 320);
        assert_eq!(size_of::<ibv_pd>(), 16);
        assert_eq!(size_of::<ibv_mr>(), 48);
        assert_eq!(size_of::<ibv_device_attr>(), 232);
        assert_eq!(offset_of!(ibv_device_attr, phys_port_cnt), 227);
        assert_eq!(size_of::<ibv_port_attr>(), 48);
        assert_eq!(size_of::<ibv_send_wr>(), 128);
        assert_eq!(offset_of!(ibv_send_wr, remote_addr), 40);
        assert_eq!(size_of::<ibv_recv_wr>(), 32);
        assert_eq!(size_of::<ibv_wc>(), 48);
        assert_eq!(size_of::<ibv_qp_attr>(), 144);
        assert_eq!(offset_of!(ibv_qp_attr, ah_attr), 56);
        assert_eq!(offset_of!(ibv_qp_attr, timeout), 130);
        assert_eq!(size_of::<ibv_ah_attr>(), 32);
    }
}
