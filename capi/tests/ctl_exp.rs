//! EXP and GEN EV profiles as the engine runs them: a controller lists 8 STEV EVs (EXP) and
//! has 16 generated (GEN); QPs that take the profiles at INIT spray over exactly those EVs (the
//! engine's EV table holds the listed entropies, on the listed ports) and move data; an EV the
//! controller denies on the ONLINE profile is denied in the running QP within a few
//! milliseconds, and allowed again when the deny is lifted. One test per binary: it sets
//! `MRC_CTL_DIR`.

#![allow(unsafe_code, clippy::undocumented_unsafe_blocks)]

mod common;

use core::ffi::c_int;
use std::collections::BTreeSet;
use std::mem::zeroed;
use std::ptr::null_mut;
use std::time::{Duration, Instant};

use _mrc::api::*;
use _mrc::ctl::*;
use _mrc::device::*;
use _mrc::evs::{mrc_ctl_ev, mrc_ctl_ev_field};
use _mrc::ibv::*;
use mrc_transport::ev::EvState;
use mrc_transport::verbs::Qpn;

use common::{Host, connect, errno, host, new_qp, poll_one, private_ctl_dir, to_init, two_devices};

/// A QP of `h` in INIT with EV profile `ev`, and its QPN.
unsafe fn qp(h: &Host, ev: u64) -> (*mut mrc_qp, u32) {
    unsafe {
        let (q, n) = new_qp(h);
        assert_eq!(
            to_init(q, ev, 0),
            0,
            "INIT with EV profile {ev}: errno {}",
            errno()
        );
        (q, n)
    }
}

/// A pair of connected QPs with EV profile `ev`; 40 KiB written from a to b and checked.
unsafe fn pair_moves_data(a: &mut Host, b: &Host, ev: u64, seed: u8) -> u32 {
    unsafe {
        let (qa, na) = qp(a, ev);
        let (qb, nb) = qp(b, ev);
        connect(qa, b, nb);
        connect(qb, a, na);
        let len = 40_000usize;
        let msg: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(13) ^ seed)
            .collect();
        a.buf[..len].copy_from_slice(&msg);
        let mut sge = ibv_sge {
            addr: a.buf.as_ptr() as u64,
            length: len as u32,
            lkey: (*a.mr).lkey,
        };
        let mut wr: ibv_send_wr = zeroed();
        wr.sg_list = &raw mut sge;
        wr.num_sge = 1;
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.send_flags = IBV_SEND_SIGNALED;
        wr.remote_addr = b.buf.as_ptr() as u64;
        wr.rkey = (*b.mr).rkey;
        let mut bad = null_mut();
        assert_eq!(mrc_post_send(qa, &raw mut wr, &raw mut bad), 0);
        assert_eq!(poll_one(a.cq).status, IBV_WC_SUCCESS);
        let got = std::slice::from_raw_parts(b.buf.as_ptr(), len).to_vec();
        assert!(got == msg, "the data differ");
        na
    }
}

fn stev(v: u32, port: u8) -> mrc_ctl_ev {
    let mut e = mrc_ctl_ev::UNPOPULATED;
    e.val[..4].copy_from_slice(&v.to_be_bytes());
    e.port = port;
    e
}

unsafe fn ev_op(ctx: *mut mrc_context, id: u64, op: c_int, e: &mut [mrc_ctl_ev_op_entry]) -> c_int {
    unsafe {
        let mut a: mrc_ctl_ev_profile_attr = zeroed();
        a.ev_op.op = op;
        a.ev_op.entries = e.as_mut_ptr().cast();
        a.ev_op.count = e.len() as c_int;
        if op >= MRC_CTL_EV_OP_QUERY_EV_STATE {
            mrc_ctl_query_ev_profile(ctx, id, &raw mut a, MRC_CTL_EV_PROFILE_EV_OP)
        } else {
            mrc_ctl_modify_ev_profile(ctx, id, &raw mut a, MRC_CTL_EV_PROFILE_EV_OP)
        }
    }
}

/// The engine's EVs of QP `qpn`: (entropy, plane, state).
fn engine_evs(vctx: *mut ibv_context, qpn: u32) -> Vec<(u32, u8, EvState)> {
    let nic = &context(vctx).expect("a software context").nic;
    nic.handle()
        .ev_stats(Qpn(qpn))
        .expect("ev_stats")
        .iter()
        .map(|i| (i.entropy, i.plane, i.state))
        .collect()
}

#[test]
fn listed_and_generated_evs_are_what_qps_spray_over() {
    let dir = private_ctl_dir("mrc-ctl-exp");
    let (d0, d1) = two_devices();
    unsafe {
        let mut a = host(d0, 1 << 16);
        let b = host(d1, 1 << 16);

        // EXP profile 11 on the device's own format: 8 EVs, 4 per port.
        let mut p: mrc_ctl_ev_profile_attr = zeroed();
        p.profile_state = MRC_CTL_PROFILE_OFFLINE;
        p.ev_mode = MRC_CTL_EV_MODE_EXP;
        p.ev_fmt_profile_id = 0;
        p.ev_count = 8;
        let m = MRC_CTL_EV_PROFILE_STATE
            | MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT;
        assert_eq!(mrc_ctl_modify_ev_profile(a.ctx, 11, &raw mut p, m), 0);
        let listed: Vec<mrc_ctl_ev> = (0..8u32)
            .map(|i| stev(0x5eed_0000 + i * 0x101, (i % 2) as u8 + 1))
            .collect();
        let mut e: Vec<mrc_ctl_ev_op_entry> = listed
            .iter()
            .map(|&ev_new| mrc_ctl_ev_op_entry {
                ev_new,
                state: 1,
                ..Default::default()
            })
            .collect();
        assert_eq!(ev_op(a.ctx, 11, MRC_CTL_EV_OP_REPLACE_EV, &mut e), 0);
        p.profile_state = MRC_CTL_PROFILE_ONLINE;
        let m = MRC_CTL_EV_PROFILE_STATE;
        assert_eq!(mrc_ctl_modify_ev_profile(a.ctx, 11, &raw mut p, m), 0);

        let qpn = pair_moves_data(&mut a, &b, 11, 1);
        let want: BTreeSet<(u32, u8)> = (0..8u32)
            .map(|i| (0x5eed_0000 + i * 0x101, (i % 2) as u8))
            .collect();
        let got = engine_evs(a.vctx, qpn);
        let got_set: BTreeSet<(u32, u8)> = got.iter().map(|&(e, p, _)| (e, p)).collect();
        assert_eq!(got_set, want, "the QP's EVs are not the listed ones");

        // Deny EV 2 on the ONLINE profile: the running QP denies it.
        let mut d = [mrc_ctl_ev_op_entry {
            ev: listed[2],
            state: 4, // MRC_CTL_EV_DENIED
            ..Default::default()
        }];
        assert_eq!(ev_op(a.ctx, 11, MRC_CTL_EV_OP_MODIFY_EV_STATE, &mut d), 0);
        let denied = 0x5eed_0000 + 2 * 0x101;
        let state_of = || {
            engine_evs(a.vctx, qpn)
                .iter()
                .find(|e| e.0 == denied)
                .map(|e| e.2)
        };
        let deadline = Instant::now() + common::WAIT;
        while state_of() != Some(EvState::Denied) {
            assert!(Instant::now() < deadline, "the deny did not reach the QP");
            std::thread::sleep(Duration::from_millis(1));
        }
        d[0].state = 1; // MRC_CTL_EV_GOOD
        assert_eq!(ev_op(a.ctx, 11, MRC_CTL_EV_OP_MODIFY_EV_STATE, &mut d), 0);
        let deadline = Instant::now() + common::WAIT;
        while state_of() != Some(EvState::Good) {
            assert!(Instant::now() < deadline, "the allow did not reach the QP");
            std::thread::sleep(Duration::from_millis(1));
        }
        // Changes closer together than the file clock's granularity: deny 5, allow 5, deny 6
        // at once. The QP ends with 5 allowed and 6 denied.
        for (i, state) in [(5, 4), (5, 1), (6, 4)] {
            let mut e = [mrc_ctl_ev_op_entry {
                ev: listed[i],
                state,
                ..Default::default()
            }];
            assert_eq!(ev_op(a.ctx, 11, MRC_CTL_EV_OP_MODIFY_EV_STATE, &mut e), 0);
        }
        let states = || {
            let evs = engine_evs(a.vctx, qpn);
            let of = |v: u32| evs.iter().find(|e| e.0 == v).map(|e| e.2);
            (of(0x5eed_0000 + 5 * 0x101), of(0x5eed_0000 + 6 * 0x101))
        };
        let deadline = Instant::now() + common::WAIT;
        while states() != (Some(EvState::Good), Some(EvState::Denied)) {
            assert!(
                Instant::now() < deadline,
                "quick changes: the QP holds {:?}",
                states()
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        // Stays so (the EV of 5 was not left denied by a change the watcher missed).
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(states(), (Some(EvState::Good), Some(EvState::Denied)));

        // GEN profile 12: 16 EVs of 0xc1c1 and 11 bits drawn in 100..=1123.
        let mut f = [
            mrc_ctl_ev_field {
                width: 16,
                init_val: 0xc1c1,
                ..Default::default()
            },
            mrc_ctl_ev_field {
                width: 16,
                min_val: 100,
                max_val: 1123,
                mask: 0x7ff,
                ..Default::default()
            },
        ];
        let mut g: mrc_ctl_ev_profile_attr = zeroed();
        g.profile_state = MRC_CTL_PROFILE_OFFLINE;
        g.ev_mode = MRC_CTL_EV_MODE_GEN;
        g.ev_count = 16;
        g.ev_fields_op.op = MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS;
        g.ev_fields_op.entries = f.as_mut_ptr().cast();
        g.ev_fields_op.count = 2;
        let m = MRC_CTL_EV_PROFILE_STATE
            | MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
        assert_eq!(mrc_ctl_modify_ev_profile(a.ctx, 12, &raw mut g, m), 0);
        g.profile_state = MRC_CTL_PROFILE_ONLINE;
        assert_eq!(
            mrc_ctl_modify_ev_profile(a.ctx, 12, &raw mut g, MRC_CTL_EV_PROFILE_STATE),
            0,
            "errno {}",
            errno()
        );
        let mut arr = vec![mrc_ctl_ev_op_entry::default(); 16];
        assert_eq!(ev_op(a.ctx, 12, MRC_CTL_EV_OP_QUERY_EV_ARRAY, &mut arr), 0);
        let want: BTreeSet<(u32, u8)> = arr
            .iter()
            .map(|e| {
                let v = (u32::from(e.ev.val[0]) << 3) | (u32::from(e.ev.val[1]) >> 5);
                assert!((100..=1123).contains(&v), "{v}");
                (0xc1c1_0000 | v, e.ev.port - 1)
            })
            .collect();
        let qpn = pair_moves_data(&mut a, &b, 12, 2);
        let got: BTreeSet<(u32, u8)> = engine_evs(a.vctx, qpn)
            .iter()
            .map(|&(e, p, _)| (e, p))
            .collect();
        assert_eq!(got, want, "the QP's EVs are not the generated ones");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
