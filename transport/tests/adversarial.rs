//! Adversarial Writes (MRC 1.0 §7, brief §4.1): forged keys, keys of another protection
//! domain, ranges that leave a region or wrap u64, regions without remote-write access,
//! PSNs outside the window, the wrong QP or a QP in the wrong state, bad ICRCs, truncated
//! headers and SRHs with inconsistent lengths. Every forged frame carries a valid ICRC (so
//! only the engine's own checks can refuse it) unless the ICRC is the point. Each is dropped
//! and counted under its own `DropReason`, and every byte of every region and of the guard
//! bytes around each is unchanged. A final forged frame that is valid is placed, exactly
//! where it says: the forging reaches placement and the byte checks can see a write.

mod adversarial_support;
mod common;

use adversarial_support::{
    DST_VA, FOREIGN_VA, LEN, Lab, RO_VA, assert_untouched, forge, snapshot, write_headers,
};
use common::{ConnOpts, connect};
use mrc_srv6::wire::Dscp;
use mrc_transport::stats::DropReason;
use mrc_transport::verbs::{QpInitAttr, QpState, QpTransition};
use mrc_transport::wire::{FrameRepr, Route, WireConfig, parse_frame};

/// A Write of 0x66 bytes at the next PSN host 1 expects, aimed at `dst`.
fn evil(lab: &Lab) -> impl Fn(&mut FrameRepr, &mut Vec<u8>) + use<> {
    let (rkey, psn) = (lab.dst.keys.rkey, lab.next_psn);
    move |r, p| {
        p.fill(0x66);
        r.bth.psn = psn;
        let w = write_headers(r);
        w.reth.rkey = rkey;
        w.reth.va = DST_VA + 64;
    }
}

/// Where the SRH starts in an SRv6 frame: after Ethernet and the outer IPv6 header.
const SRH: usize = 14 + 40;

fn qps_live(lab: &mut Lab, what: &str) {
    for (h, qp) in [
        (0, lab.c.qp_a),
        (1, lab.c.qp_b),
        (2, lab.c2.qp_a),
        (1, lab.c2.qp_b),
    ] {
        assert_eq!(
            lab.n.ep(h).query_qp(qp).unwrap().state,
            QpState::Rts,
            "{what}: QP {qp} of host {h} lives"
        );
    }
}

#[test]
fn forged_writes_are_dropped_counted_and_touch_no_byte() {
    let mut lab = Lab::new();
    let w = lab.write.clone();
    let e = evil(&lab);
    // QPs on host 1 in every state a Write must not reach.
    let (pd, cq) = (lab.c.pd_b, lab.c.cq_b);
    let attr = QpInitAttr {
        pd,
        send_cq: cq,
        recv_cq: cq,
        cap: ConnOpts::default().cap,
        sq_sig_all: false,
    };
    let ep = lab.n.ep(1);
    let reset_qp = ep.create_qp(&attr).unwrap();
    let init_qp = ep.create_qp(&attr).unwrap();
    ep.modify_qp(
        init_qp,
        QpTransition::Init(mrc_transport::verbs::InitAttr::default()),
    )
    .unwrap();
    let gone_qp = ep.create_qp(&attr).unwrap();
    ep.destroy_qp(gone_qp).unwrap();
    let stale = ep
        .reg_mr(
            pd,
            0xc000_0000,
            Box::new(vec![0u8; 64]),
            mrc_transport::verbs::Access::LOCAL_WRITE | mrc_transport::verbs::Access::REMOTE_WRITE,
        )
        .unwrap();
    ep.dereg_mr(stale.lkey).unwrap();
    let errored = connect(&mut lab.n, 0, 1, ConnOpts::default());
    lab.n
        .ep(1)
        .modify_qp(errored.qp_b, QpTransition::Error)
        .unwrap();
    let (ro, foreign) = (lab.ro.keys, lab.foreign.keys);
    let mtu = lab.n.ep_ref(1).config().payload_mtu as usize;
    let next = lab.next_psn;

    let cases: Vec<(&str, Vec<u8>, DropReason)> = vec![
        (
            "forged rkey",
            forge(&w, |r, p| {
                e(r, p);
                write_headers(r).reth.rkey ^= 0x5a5a_0000;
            }),
            DropReason::BadRkey,
        ),
        (
            "rkey of a deregistered region",
            forge(&w, |r, p| {
                e(r, p);
                write_headers(r).reth.rkey = stale.rkey;
            }),
            DropReason::BadRkey,
        ),
        (
            "rkey of another protection domain",
            forge(&w, |r, p| {
                e(r, p);
                let h = write_headers(r);
                h.reth.rkey = foreign.rkey;
                h.reth.va = FOREIGN_VA;
            }),
            DropReason::BadRkey,
        ),
        (
            "region without remote write",
            forge(&w, |r, p| {
                e(r, p);
                let h = write_headers(r);
                h.reth.rkey = ro.rkey;
                h.reth.va = RO_VA;
            }),
            DropReason::NoAccess,
        ),
        (
            "range runs past the region",
            forge(&w, |r, p| {
                e(r, p);
                write_headers(r).reth.va = DST_VA + LEN as u64 - 100;
            }),
            DropReason::OutOfBounds,
        ),
        (
            "range starts before the region",
            forge(&w, |r, p| {
                e(r, p);
                write_headers(r).reth.va = DST_VA - 8;
            }),
            DropReason::OutOfBounds,
        ),
        (
            "VA + length wraps u64",
            forge(&w, |r, p| {
                e(r, p);
                write_headers(r).reth.va = u64::MAX - 100;
            }),
            DropReason::OutOfBounds,
        ),
        (
            "VA + length ends at exactly 2^64",
            {
                let f = forge(&w, |r, p| e(r, p));
                let len = parse_frame(&f, &WireConfig::default())
                    .unwrap()
                    .payload
                    .len() as u64;
                forge(&w, |r, p| {
                    e(r, p);
                    write_headers(r).reth.va = 0u64.wrapping_sub(len);
                })
            },
            DropReason::OutOfBounds,
        ),
        (
            "PSN beyond the MPR window",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.psn = (next + 5000) & 0xff_ffff;
            }),
            DropReason::OutOfWindow,
        ),
        (
            "PSN half the space away",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.psn = (next + 0x80_0000) & 0xff_ffff;
            }),
            DropReason::OutOfWindow,
        ),
        (
            "payload longer than the MTU",
            forge(&w, |r, p| {
                e(r, p);
                p.resize(mtu + 64, 0x66);
            }),
            DropReason::Oversize,
        ),
        (
            "QPN that never existed",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.dest_qp ^= 0x20_0000;
            }),
            DropReason::UnknownQp,
        ),
        (
            "QPN of a destroyed QP",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.dest_qp = gone_qp.0;
            }),
            DropReason::UnknownQp,
        ),
        (
            "QPN of a QP connected to another host",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.dest_qp = lab.c2.qp_b.0;
            }),
            DropReason::WrongPeer,
        ),
        (
            "QP in RESET",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.dest_qp = reset_qp.0;
            }),
            DropReason::WrongState,
        ),
        (
            "QP in INIT",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.dest_qp = init_qp.0;
            }),
            DropReason::WrongState,
        ),
        (
            "QP in ERROR",
            forge(&w, |r, p| {
                e(r, p);
                r.bth.dest_qp = errored.qp_b.0;
                r.bth.psn = 0xff_fff0;
            }),
            DropReason::WrongState,
        ),
        (
            "another NIC posing as the peer",
            forge(&w, |r, p| {
                e(r, p);
                r.src_addr = common::nic(7);
            }),
            DropReason::WrongPeer,
        ),
        (
            "addressed to another NIC",
            forge(&w, |r, p| {
                e(r, p);
                r.dst_addr = common::nic(7);
            }),
            DropReason::NotForUs,
        ),
        (
            "bad ICRC over the payload",
            {
                let mut f = forge(&w, |r, p| e(r, p));
                let at = f.len() - 40;
                f[at] ^= 0x01;
                f
            },
            DropReason::BadIcrc,
        ),
        (
            "bad ICRC over the RETH",
            {
                let f0 = forge(&w, |r, p| e(r, p));
                let reth_va = f0
                    .windows(8)
                    .position(|x| x == (DST_VA + 64).to_be_bytes())
                    .unwrap();
                let mut f = f0;
                f[reth_va + 7] ^= 0x80;
                f
            },
            DropReason::BadIcrc,
        ),
    ];
    let before = snapshot(&lab.mrs);
    for (what, frame, reason) in cases {
        let (r0, t0) = (lab.drops(1, reason), lab.all_drops(1));
        lab.inject(1, &frame);
        assert_eq!(lab.drops(1, reason), r0 + 1, "{what}: counted as {reason}");
        assert_eq!(lab.all_drops(1), t0 + 1, "{what}: counted once");
        assert_untouched(&lab.mrs, &before, what);
        qps_live(&mut lab, what);
    }
    let r = lab.n.ep(1).qp_stats(lab.c.qp_b).unwrap();
    assert_eq!(
        r.access_errors, 8,
        "keys, rights and bounds refused by the memory checks"
    );
    assert_eq!(
        r.nacks_sent.unexpected, 8,
        "each refused Write is NACKed to its sender (brief §4.1)"
    );
    assert_eq!(
        r.data_bytes_placed, LEN as u64,
        "only the recorded Write was placed"
    );

    // The positive control: the same forged frame, now valid, lands exactly where it says.
    let ok = forge(&w, |r, p| e(r, p));
    let payload = parse_frame(&ok, &WireConfig::default())
        .unwrap()
        .payload
        .len();
    lab.inject(1, &ok);
    let got = lab.dst.mem.bytes();
    let old = before.region(0);
    assert!(
        got[64..64 + payload].iter().all(|&b| b == 0x66),
        "the valid forged Write is placed"
    );
    assert_eq!(&got[..64], &old[..64], "nothing before the target");
    assert_eq!(
        &got[64 + payload..],
        &old[64 + payload..],
        "nothing after the target"
    );
    lab.dst.mem.check_guards("after the valid Write");
    assert_untouched(&lab.mrs[1..], &before.skip(1), "after the valid Write");
}

#[test]
fn a_write_cut_at_every_length_is_dropped_once_and_writes_nothing() {
    let mut lab = Lab::new();
    let frame = forge(&lab.write.clone(), evil(&lab));
    let before = snapshot(&lab.mrs);
    let now = lab.n.now();
    let mut by_reason = [0u64; DropReason::ALL.len()];
    for cut in 0..frame.len() {
        let t0 = lab.all_drops(1);
        let counts: Vec<u64> = DropReason::ALL.iter().map(|&r| lab.drops(1, r)).collect();
        lab.n.ep(1).handle_packet(now, 0, &frame[..cut]);
        assert_eq!(lab.all_drops(1), t0 + 1, "cut at {cut}: one drop");
        for (i, &r) in DropReason::ALL.iter().enumerate() {
            by_reason[i] += lab.drops(1, r) - counts[i];
        }
    }
    assert_untouched(&lab.mrs, &before, "truncated frames");
    let count = |r: DropReason| by_reason[DropReason::ALL.iter().position(|&x| x == r).unwrap()];
    // Short of a header: truncated; short of what the IPv6 length claims: malformed.
    assert_eq!(
        count(DropReason::Truncated) + count(DropReason::Malformed),
        frame.len() as u64
    );
    assert!(
        count(DropReason::Truncated) >= 14 + 40,
        "every cut inside Ethernet + IPv6 is a truncation"
    );
    assert!(count(DropReason::Malformed) > 0);
    assert_eq!(
        lab.n.ep(1).qp_stats(lab.c.qp_b).unwrap().data_bytes_placed,
        LEN as u64
    );
}

#[test]
fn srh_with_inconsistent_lengths_is_dropped_and_writes_nothing() {
    let mut lab = Lab::new();
    let e = evil(&lab);
    // The recorded Write re-routed through a one-segment SRH (RFC 8754 §2), valid as built.
    let seg = std::net::Ipv6Addr::new(0xfc00, 0, 1, 0, 0, 0, 0, 9);
    let good = forge(&lab.write.clone(), |r, p| {
        e(r, p);
        let Route::Srv6 { path, .. } = r.route else {
            panic!("SRv6 test plan")
        };
        r.route = Route::Srv6 {
            path,
            srh_segment: Some(seg),
        };
    });
    assert_eq!(good[14 + 6], 43, "outer next header: routing");
    let edit = |f: fn(&mut Vec<u8>)| {
        let mut g = good.clone();
        f(&mut g);
        g
    };
    // The outer header and the SRH are not under the ICRC (PROTOCOL.md "ICRC"): only the
    // parser's length checks stand between these frames and placement.
    let cases: Vec<(&str, Vec<u8>, DropReason)> = vec![
        (
            "hdr ext len past the packet",
            {
                let mut g = forge(&good, |_, p| p.truncate(16));
                g[SRH + 1] = 255;
                g
            },
            DropReason::Truncated,
        ),
        (
            "hdr ext len eating the inner packet",
            edit(|g| g[SRH + 1] = 255),
            DropReason::Malformed,
        ),
        (
            "hdr ext len shorter than the segment list",
            edit(|g| g[SRH + 1] = 0),
            DropReason::Malformed,
        ),
        (
            "hdr ext len longer than the SRH (eats the inner header)",
            edit(|g| g[SRH + 1] = 4),
            DropReason::Malformed,
        ),
        (
            "last entry beyond the header",
            edit(|g| g[SRH + 4] = 3),
            DropReason::Malformed,
        ),
        (
            "segments left beyond last entry",
            edit(|g| g[SRH + 3] = 5),
            DropReason::Malformed,
        ),
        (
            "routing type not SRH",
            edit(|g| g[SRH + 2] = 2),
            DropReason::Malformed,
        ),
        (
            "outer payload length past the frame",
            edit(|g| {
                let l = u16::from_be_bytes([g[18], g[19]]) + 9;
                g[18..20].copy_from_slice(&l.to_be_bytes());
            }),
            DropReason::Malformed,
        ),
        (
            "outer payload length short of the inner packet",
            edit(|g| {
                let l = u16::from_be_bytes([g[18], g[19]]) - 9;
                g[18..20].copy_from_slice(&l.to_be_bytes());
            }),
            DropReason::Malformed,
        ),
        (
            "SRH next header not IPv6",
            edit(|g| g[SRH] = 17),
            DropReason::NotMrc,
        ),
    ];
    let before = snapshot(&lab.mrs);
    for (what, frame, reason) in cases {
        let t0 = lab.all_drops(1);
        let counts: Vec<u64> = DropReason::ALL.iter().map(|&r| lab.drops(1, r)).collect();
        lab.inject(1, &frame);
        assert_eq!(lab.all_drops(1), t0 + 1, "{what}: one drop");
        let moved: Vec<DropReason> = DropReason::ALL
            .iter()
            .zip(&counts)
            .filter(|&(&r, &c)| lab.drops(1, r) != c)
            .map(|(&r, _)| r)
            .collect();
        assert_eq!(moved, [reason], "{what}: counted as {reason}");
        assert_untouched(&lab.mrs, &before, what);
    }
    // The unedited SRH frame is a valid Write: placed.
    lab.inject(1, &good);
    assert!(lab.dst.mem.bytes()[64..128].iter().all(|&b| b == 0x66));
}

#[test]
fn trimmed_writes_are_nacked_never_placed() {
    let mut lab = Lab::new();
    let e = evil(&lab);
    let before = snapshot(&lab.mrs);
    let wire = WireConfig::default();
    for (i, dscp) in [wire.dscp.trimmed, wire.dscp.trimmed_last_hop]
        .into_iter()
        .enumerate()
    {
        // A whole Write whose DSCP says "trimmed": its payload is never trusted.
        let f = forge(&lab.write.clone(), |r, p| {
            e(r, p);
            r.bth.psn = (lab.next_psn + i as u32) & 0xff_ffff;
            r.dscp = Dscp(dscp.0);
        });
        let s0 = lab.n.ep(1).qp_stats(lab.c.qp_b).unwrap();
        lab.inject(1, &f);
        let s = lab.n.ep(1).qp_stats(lab.c.qp_b).unwrap();
        assert_eq!(s.trimmed_received, s0.trimmed_received + 1);
        assert_eq!(
            s.nacks_sent.total(),
            s0.nacks_sent.total() + 1,
            "answered with a NACK TRIMMED"
        );
        assert_eq!(s.data_bytes_placed, s0.data_bytes_placed);
        assert_untouched(&lab.mrs, &before, "trimmed Write");
    }
}
