//! What the controller tests share: a host of the in-memory fabric opened through the software
//! verbs device (context, PD, a registered buffer, a CQ), its QPs, their connection and the
//! wait for a completion.

#![allow(dead_code)] // each test binary uses its part

use core::ffi::c_int;
use std::mem::zeroed;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use _mrc::api::*;
use _mrc::device::*;
use _mrc::ibv::*;

/// How long a test waits for what the library does on its own threads (a completion, a port
/// coming back, a controller's change reaching a QP) before it fails: generous, for a loaded
/// machine; every wait ends as soon as the thing happened.
pub const WAIT: Duration = Duration::from_mins(1);

pub fn errno() -> c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// One host: its verbs and MRC contexts, a PD, a registered buffer of `len` bytes, a CQ.
#[derive(Debug)]
pub struct Host {
    pub vctx: *mut ibv_context,
    pub ctx: *mut mrc_context,
    pub pd: *mut ibv_pd,
    pub cq: *mut mrc_cq,
    pub mr: *mut ibv_mr,
    pub buf: Vec<u8>,
    pub gid: ibv_gid,
}

/// Opens `dev` with a buffer of `len` bytes.
///
/// # Safety
/// `dev` from `mrc_sw_ibv_get_device_list`.
pub unsafe fn host(dev: *mut ibv_device, len: usize) -> Host {
    unsafe {
        let vctx = mrc_sw_ibv_open_device(dev);
        assert!(!vctx.is_null());
        let ctx = mrc_create_context(vctx, null_mut());
        assert!(!ctx.is_null());
        let pd = mrc_sw_ibv_alloc_pd(vctx);
        assert!(!pd.is_null());
        let mut buf = vec![0u8; len];
        let mr = mrc_sw_ibv_reg_mr(
            pd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
        );
        assert!(!mr.is_null());
        let cq = mrc_create_cq(ctx, 64, null_mut(), null_mut(), 0);
        assert!(!cq.is_null());
        let mut gid: ibv_gid = zeroed();
        assert_eq!(mrc_sw_ibv_query_gid(vctx, 1, 0, &raw mut gid), 0);
        Host {
            vctx,
            ctx,
            pd,
            cq,
            mr,
            buf,
            gid,
        }
    }
}

/// A QP of `h` in RESET (16 sends, 16 receives, every send signalled) and its QPN.
///
/// # Safety
/// `h` open.
pub unsafe fn new_qp(h: &Host) -> (*mut mrc_qp, u32) {
    unsafe {
        let mut init = mrc_qp_init_attr {
            qp_context: null_mut(),
            send_cq: h.cq,
            recv_cq: h.cq,
            cap: ibv_qp_cap {
                max_send_wr: 16,
                max_recv_wr: 16,
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            sq_sig_all: 1,
            pd: h.pd,
            send_ops_flags: 0b11,
            protocol_version: 1,
        };
        let qp = mrc_create_qp(h.ctx, &raw mut init);
        assert!(!qp.is_null(), "create_qp errno {}", errno());
        let mut qpn = 0;
        assert_eq!(mrc_get_qpn(qp, &raw mut qpn), 0);
        (qp, qpn)
    }
}

/// INIT with EV profile `ev` and CC profile `cc`: what `mrc_modify_qp` returned.
///
/// # Safety
/// `qp` live.
pub unsafe fn to_init(qp: *mut mrc_qp, ev: u64, cc: u64) -> c_int {
    unsafe {
        let mut a: ibv_qp_attr = zeroed();
        a.qp_state = IBV_QPS_INIT;
        let mut m: mrc_qp_attr = zeroed();
        m.ev_profile_id = ev;
        m.cc_profile_id = cc;
        mrc_modify_qp(
            qp,
            &raw mut a,
            IBV_QP_STATE,
            &raw mut m,
            MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID,
        )
    }
}

/// INIT -> RTR -> RTS of `qp` towards QP `peer_qpn` of `peer`.
///
/// # Safety
/// `qp` live, in INIT.
pub unsafe fn connect(qp: *mut mrc_qp, peer: &Host, peer_qpn: u32) {
    unsafe {
        let mut a: ibv_qp_attr = zeroed();
        a.qp_state = IBV_QPS_RTR;
        a.dest_qp_num = peer_qpn;
        a.ah_attr.is_global = 1;
        a.ah_attr.grh.dgid = peer.gid;
        a.ah_attr.port_num = 1;
        let mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;
        assert_eq!(
            mrc_modify_qp(qp, &raw mut a, mask, null_mut(), 0),
            0,
            "RTR errno {}",
            errno()
        );
        let mut a: ibv_qp_attr = zeroed();
        a.qp_state = IBV_QPS_RTS;
        let mask = IBV_QP_STATE | IBV_QP_SQ_PSN;
        assert_eq!(
            mrc_modify_qp(qp, &raw mut a, mask, null_mut(), 0),
            0,
            "RTS errno {}",
            errno()
        );
    }
}

/// The next completion of `cq` ([`WAIT`] at most).
///
/// # Safety
/// `cq` live.
pub unsafe fn poll_one(cq: *mut mrc_cq) -> ibv_wc {
    let deadline = Instant::now() + WAIT;
    unsafe {
        let mut wc: ibv_wc = zeroed();
        loop {
            let n = mrc_poll_cq(cq, 1, &raw mut wc);
            assert!(n >= 0);
            if n == 1 {
                return wc;
            }
            assert!(Instant::now() < deadline, "no completion within {WAIT:?}");
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// A profile directory of this process's own, made `MRC_CTL_DIR` (call it first: before the
/// library reads the environment, and while the test binary runs one test).
pub fn private_ctl_dir(tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // SAFETY: one test per binary, no other thread reads the environment yet.
    unsafe { std::env::set_var("MRC_CTL_DIR", &dir) };
    dir
}

/// The first two devices of the default in-memory fabric (mrc_mem0, mrc_mem1).
pub fn two_devices() -> (*mut ibv_device, *mut ibv_device) {
    let mut n = 0;
    // SAFETY: a valid out pointer; the list is never freed (the test process exits).
    unsafe {
        let list = mrc_sw_ibv_get_device_list(&raw mut n);
        assert!(n >= 2 && !list.is_null());
        (*list, *list.add(1))
    }
}
