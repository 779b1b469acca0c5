//! The controller API as an application sees it: a controller brings CC profile 7 (NSCC) and
//! EV profile 5 (AUTO) ONLINE in a fresh profile directory; a QP pair on mrc_mem0/mrc_mem1
//! uses them at INIT and moves data; unknown or OFFLINE profiles are refused; a port disabled
//! by the controller reads IBV_PORT_DOWN and comes back.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use core::ffi::{CStr, c_int};
use std::mem::zeroed;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use common::{Host, connect, errno, host, new_qp, poll_one, private_ctl_dir, to_init, two_devices};

use _mrc::api::*;
use _mrc::ctl::*;
use _mrc::device::*;
use _mrc::ibv::*;

/// A host with a QP (in RESET).
struct Side {
    h: Host,
    qp: *mut mrc_qp,
    qpn: u32,
}

unsafe fn side(dev: *mut ibv_device) -> Side {
    unsafe {
        let h = host(dev, 4096);
        let (qp, qpn) = new_qp(&h);
        Side { h, qp, qpn }
    }
}

unsafe fn connect_sides(s: &Side, peer: &Side) {
    unsafe { connect(s.qp, &peer.h, peer.qpn) }
}

unsafe fn port_state(vctx: *mut ibv_context, port: u8) -> c_int {
    unsafe {
        let mut p: ibv_port_attr = zeroed();
        assert_eq!(mrc_sw_ibv_query_port(vctx, port, &raw mut p), 0);
        p.state
    }
}

#[test]
fn controller_profiles_reach_the_application() {
    let dir = private_ctl_dir("mrc-ctl-test");
    let (d0, d1) = two_devices();
    unsafe {
        let a = side(d0);
        let mut b = side(d1);

        // Versions and device.
        let (mut cur, mut last) = (0, 0);
        mrc_ctl_query_version(&raw mut cur, &raw mut last, null_mut(), null_mut());
        assert_eq!(cur, 0x0100_0001);
        let mut dattr: mrc_ctl_device_attr = zeroed();
        let mut sup = 0;
        assert_eq!(
            mrc_ctl_query_device_ex(a.h.vctx, a.h.ctx, &raw mut dattr, &raw mut sup),
            0
        );
        assert_eq!(sup, 1);
        assert_eq!(dattr.phy_port_mask, 0b110);
        assert_eq!(
            dattr.ev.ev_mode_mask,
            (MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP | MRC_CTL_EV_MODE_GEN) as u32
        );
        assert_eq!(CStr::from_ptr(*dattr.cc.algorithms), c"uet-1.0-nscc");
        assert!((*dattr.cc.algorithms.add(1)).is_null());

        // The controller: CC profile 7, NSCC with a 20 µs target delay.
        let nscc = mrc_ctl_cc_nscc_cfg {
            base_rtt: 10_000,
            target_delay: 20_000,
            max_cwnd: 1 << 20,
            gamma: 0.8,
            qa_gate: 3,
            ..Default::default()
        };
        let mut cc: mrc_ctl_cc_profile_attr = zeroed();
        cc.algorithm = c"uet-1.0-nscc".as_ptr();
        cc.profile_state = MRC_CTL_PROFILE_ONLINE;
        // INIT -> ONLINE directly is not a move.
        assert_eq!(
            mrc_ctl_modify_cc_profile(a.h.ctx, 7, &raw mut cc, MRC_CTL_CC_PROFILE_STATE),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        cc.profile_state = MRC_CTL_PROFILE_OFFLINE;
        let m = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM;
        assert_eq!(mrc_ctl_modify_cc_profile(a.h.ctx, 7, &raw mut cc, m), 0);
        cc.profile_state = MRC_CTL_PROFILE_ONLINE;
        cc.cc_config = (&raw const nscc).cast();
        let m = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG;
        assert_eq!(mrc_ctl_modify_cc_profile(a.h.ctx, 7, &raw mut cc, m), 0);
        let mut back = mrc_ctl_cc_nscc_cfg::default();
        let mut q: mrc_ctl_cc_profile_attr = zeroed();
        q.cc_config = (&raw mut back).cast_const().cast();
        let m =
            MRC_CTL_CC_PROFILE_CUR_STATE | MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG;
        assert_eq!(mrc_ctl_query_cc_profile(b.h.ctx, 7, &raw mut q, m), 0);
        assert_eq!(q.cur_profile_state, MRC_CTL_PROFILE_ONLINE);
        assert_eq!(CStr::from_ptr(q.algorithm), c"uet-1.0-nscc");
        assert_eq!(back, nscc);

        // EV profile 5: AUTO, 32 EVs, at least 8 active.
        let mut ev: mrc_ctl_ev_profile_attr = zeroed();
        ev.profile_state = MRC_CTL_PROFILE_OFFLINE;
        ev.ev_mode = MRC_CTL_EV_MODE_AUTO;
        ev.ev_count = 32;
        let m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE | MRC_CTL_EV_PROFILE_COUNT;
        assert_eq!(mrc_ctl_modify_ev_profile(a.h.ctx, 5, &raw mut ev, m), 0);
        ev.profile_state = MRC_CTL_PROFILE_ONLINE;
        ev.ev_min_active = 8;
        let m = MRC_CTL_EV_PROFILE_STATE
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE
            | MRC_CTL_EV_PROFILE_EVENT_MASK;
        assert_eq!(mrc_ctl_modify_ev_profile(a.h.ctx, 5, &raw mut ev, m), 0);
        let mut q: mrc_ctl_ev_profile_attr = zeroed();
        let m =
            MRC_CTL_EV_PROFILE_CUR_STATE | MRC_CTL_EV_PROFILE_COUNT | MRC_CTL_EV_PROFILE_MIN_ACTIVE;
        assert_eq!(mrc_ctl_query_ev_profile(a.h.ctx, 5, &raw mut q, m), 0);
        assert_eq!(
            (q.cur_profile_state, q.ev_count, q.ev_min_active),
            (MRC_CTL_PROFILE_ONLINE, 32, 8)
        );
        // An unknown mode is refused.
        ev.ev_mode = 1 << 5;
        assert_eq!(
            mrc_ctl_modify_ev_profile(a.h.ctx, 6, &raw mut ev, MRC_CTL_EV_PROFILE_MODE),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);
        // Profile 9: configured but left OFFLINE.
        ev.ev_mode = MRC_CTL_EV_MODE_AUTO;
        ev.profile_state = MRC_CTL_PROFILE_OFFLINE;
        let m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE;
        assert_eq!(mrc_ctl_modify_ev_profile(a.h.ctx, 9, &raw mut ev, m), 0);
        assert!(dir.join("cc-7").exists() && dir.join("ev-5").exists());

        // The application: unknown and OFFLINE profiles are refused at INIT.
        assert_eq!(to_init(a.qp, 5, 8), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(to_init(a.qp, 9, 7), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(to_init(a.qp, 5, 7), 0, "errno {}", errno());
        assert_eq!(to_init(b.qp, 5, 7), 0, "errno {}", errno());
        connect_sides(&a, &b);
        connect_sides(&b, &a);

        // Write-with-Imm a → b.
        let mut rsge = ibv_sge {
            addr: b.h.buf.as_mut_ptr() as u64,
            length: 0,
            lkey: (*b.h.mr).lkey,
        };
        let mut rwr = ibv_recv_wr {
            wr_id: 2,
            next: null_mut(),
            sg_list: &raw mut rsge,
            num_sge: 0,
        };
        let mut bad_r = null_mut();
        assert_eq!(mrc_post_recv(b.qp, &raw mut rwr, &raw mut bad_r), 0);
        let msg: Vec<u8> = (0..3000u32).map(|i| (i * 7 + 3) as u8).collect();
        let mut src = a.h.buf.clone();
        src[..msg.len()].copy_from_slice(&msg);
        std::ptr::copy_nonoverlapping(src.as_ptr(), (*a.h.mr).addr.cast::<u8>(), msg.len());
        let mut sge = ibv_sge {
            addr: (*a.h.mr).addr as u64,
            length: msg.len() as u32,
            lkey: (*a.h.mr).lkey,
        };
        let mut wr: ibv_send_wr = zeroed();
        wr.wr_id = 1;
        wr.sg_list = &raw mut sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.imm_data = 0x1234_5678u32.to_be();
        wr.remote_addr = b.h.buf.as_ptr() as u64;
        wr.rkey = (*b.h.mr).rkey;
        let mut bad = null_mut();
        assert_eq!(
            mrc_post_send(a.qp, &raw mut wr, &raw mut bad),
            0,
            "errno {}",
            errno()
        );
        let wc = poll_one(a.h.cq);
        assert_eq!((wc.status, wc.wr_id), (IBV_WC_SUCCESS, 1));
        let wc = poll_one(b.h.cq);
        assert_eq!(
            (wc.status, wc.opcode, wc.byte_len),
            (IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM, 3000)
        );
        assert_eq!(wc.imm_data, 0x1234_5678u32.to_be());
        let got = std::ptr::read_volatile(b.h.buf.as_ptr().cast::<[u8; 3000]>());
        assert_eq!(&got[..], &msg[..]);

        // Port admin: disable port 1 of mrc_mem0, then enable it again.
        let mut p = mrc_ctl_port_attr {
            port_admin_state: MRC_CTL_PORT_ADMIN_DISABLED,
        };
        assert_eq!(
            mrc_ctl_modify_port(a.h.ctx, 1, &raw mut p, MRC_CTL_PORT_ADMIN_STATE),
            0
        );
        let mut q = mrc_ctl_port_attr {
            port_admin_state: -1,
        };
        assert_eq!(
            mrc_ctl_query_port(a.h.ctx, 1, &raw mut q, MRC_CTL_PORT_ADMIN_STATE),
            0
        );
        assert_eq!(q.port_admin_state, MRC_CTL_PORT_ADMIN_DISABLED);
        assert_eq!(port_state(a.h.vctx, 1), IBV_PORT_DOWN);
        assert_eq!(port_state(a.h.vctx, 2), IBV_PORT_ACTIVE);
        p.port_admin_state = MRC_CTL_PORT_ADMIN_ENABLED;
        assert_eq!(
            mrc_ctl_modify_port(a.h.ctx, 1, &raw mut p, MRC_CTL_PORT_ADMIN_STATE),
            0
        );
        let deadline = Instant::now() + common::WAIT;
        while port_state(a.h.vctx, 1) != IBV_PORT_ACTIVE {
            assert!(Instant::now() < deadline, "port 1 did not come back");
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(
            mrc_ctl_modify_port(a.h.ctx, 3, &raw mut p, MRC_CTL_PORT_ADMIN_STATE),
            -1
        );
        assert_eq!(errno(), libc::EINVAL);

        // Refused parts of the API.
        let mut n = 0;
        assert_eq!(
            mrc_ctl_ep_batch_send_wait(a.h.ctx, 0, 0, null_mut(), 0, 0, null_mut(), &raw mut n),
            -1
        );
        assert_eq!(errno(), libc::EOPNOTSUPP);

        // OFFLINE -> INIT forgets the profile.
        ev.profile_state = MRC_CTL_PROFILE_INIT;
        assert_eq!(
            mrc_ctl_modify_ev_profile(a.h.ctx, 9, &raw mut ev, MRC_CTL_EV_PROFILE_STATE),
            0
        );
        assert!(!dir.join("ev-9").exists());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
