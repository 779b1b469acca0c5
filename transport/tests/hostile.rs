//! Hostile input: forged, corrupted, out-of-window and junk packets are rejected and counted,
//! nothing is written to memory, the QPs carry on; and a million packets of garbage do not
//! grow the endpoint's state by one byte.

mod common;

use common::{
    Conn, ConnOpts, Net, NetBuilder, TestRng, connect, drain_cq, is_write, pattern, region,
    write_and_check,
};
use mrc_srv6::wire::Dscp;
use mrc_transport::Duration;
use mrc_transport::stats::DropReason;
use mrc_transport::verbs::{MrKeys, QpState, SendOpcode, SendWr, Sge, WcStatus};
use mrc_transport::wire::{
    Body, FrameRepr, MultipathVerdict, NackReason, Opcode, WireConfig, parse_frame,
};

const SRC_VA: u64 = 0x4000_0000;
const DST_VA: u64 = 0x9000_0000;
const LEN: usize = 8192;

struct Setup {
    n: Net,
    c: Conn,
    dst: MrKeys,
    /// The first Write frame a sent to b, and a SACK b sent to a.
    write: Vec<u8>,
    sack: Vec<u8>,
    /// PSN b expects next from a.
    next_psn: u32,
}

/// Connect two hosts on one path and move one 8 KiB Write, recording its frames.
fn setup() -> Setup {
    let mut n = NetBuilder {
        planes: 1,
        paths_per_plane: 1,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let src = region(&mut n, 0, c.pd_a, SRC_VA, LEN, pattern(1));
    let dst = region(&mut n, 1, c.pd_b, DST_VA, LEN, |_| 0);
    n.capture(0, true);
    n.capture(1, true);
    let sge = [Sge {
        addr: SRC_VA,
        length: LEN as u32,
        lkey: src.lkey,
    }];
    n.ep(0)
        .post_send(
            c.qp_a,
            &SendWr {
                wr_id: 1,
                opcode: SendOpcode::Write,
                sg_list: &sge,
                remote_addr: DST_VA,
                rkey: dst.rkey,
                signaled: true,
            },
        )
        .unwrap();
    n.run_until(Duration::from_millis(10), |n| {
        !drain_cq(n, 0, c.cq_a).is_empty()
    });
    let from_a = n.captured(0);
    let from_b = n.captured(1);
    let write = from_a.iter().find(|f| is_write(f)).unwrap().clone();
    let wire = WireConfig::default();
    let sack = from_b
        .iter()
        .find(|f| parse_frame(f, &wire).is_ok_and(|p| p.bth.opcode == Opcode::Sack))
        .unwrap()
        .clone();
    let first = parse_frame(&write, &wire).unwrap().bth.psn;
    Setup {
        n,
        c,
        dst,
        write,
        sack,
        next_psn: (first + 2) & 0xff_ffff,
    }
}

/// Rebuild `frame` after `f` changed its headers or payload (a valid ICRC: only the engine's
/// checks can refuse it).
fn forge(frame: &[u8], f: impl FnOnce(&mut FrameRepr, &mut Vec<u8>)) -> Vec<u8> {
    let wire = WireConfig::default();
    let p = parse_frame(frame, &wire).unwrap();
    let mut repr = p.to_repr().unwrap();
    let mut payload = p.payload.to_vec();
    f(&mut repr, &mut payload);
    let mut buf = vec![0u8; 16 * 1024];
    let len = repr.build(&mut buf, &payload, &wire).unwrap();
    buf.truncate(len);
    buf
}

fn write_headers(r: &mut FrameRepr) -> &mut mrc_transport::wire::WriteHeaders {
    match &mut r.body {
        Body::Write(w) => w,
        other => panic!("not a write: {other:?}"),
    }
}

#[test]
fn forged_and_out_of_window_packets_are_rejected_counted_and_write_nothing() {
    let Setup {
        mut n,
        c,
        dst,
        write,
        sack,
        next_psn,
    } = setup();
    let before: Vec<u8> = n.ep(1).mr_slice(dst.lkey).unwrap().to_vec();
    let evil = |r: &mut FrameRepr, p: &mut Vec<u8>| {
        p.fill(0x66);
        r.bth.psn = next_psn;
    };
    let cases: Vec<(&str, usize, Vec<u8>, DropReason)> = vec![
        (
            "bad rkey",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                write_headers(r).reth.rkey ^= 0x5a5a_0000;
            }),
            DropReason::BadRkey,
        ),
        (
            "VA past the region",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                write_headers(r).reth.va = DST_VA + LEN as u64 - 100;
            }),
            DropReason::OutOfBounds,
        ),
        (
            "VA that wraps u64",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                write_headers(r).reth.va = u64::MAX - 10;
            }),
            DropReason::OutOfBounds,
        ),
        (
            "PSN beyond the window",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                r.bth.psn = (next_psn + 5000) & 0xff_ffff;
            }),
            DropReason::OutOfWindow,
        ),
        (
            "duplicate of a placed packet, other bytes",
            1,
            forge(&write, |_, p| p.fill(0x66)),
            DropReason::Duplicate,
        ),
        (
            "unknown QPN",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                r.bth.dest_qp ^= 0x20_0000;
            }),
            DropReason::UnknownQp,
        ),
        (
            "another NIC posing as the peer",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                r.src_addr = common::nic(7);
            }),
            DropReason::WrongPeer,
        ),
        (
            "for another NIC",
            1,
            forge(&write, |r, p| {
                evil(r, p);
                r.dst_addr = common::nic(7);
            }),
            DropReason::NotForUs,
        ),
        (
            "corrupted payload",
            1,
            {
                let mut f = forge(&write, evil);
                let at = f.len() - 40;
                f[at] ^= 0xff;
                f
            },
            DropReason::BadIcrc,
        ),
        ("truncated", 1, write[..50].to_vec(), DropReason::Truncated),
        (
            "SACK acknowledging PSNs never sent",
            0,
            forge(&sack, |r, _| {
                let Body::Sack { seth, .. } = &mut r.body else {
                    panic!()
                };
                seth.cack_psn = (seth.cack_psn + 1000) & 0xff_ffff;
            }),
            DropReason::BadAck,
        ),
        (
            "fatal NACK for a PSN never sent",
            0,
            forge(&sack, |r, _| {
                let Body::Sack { seth, .. } = r.body else {
                    panic!()
                };
                r.bth.opcode = Opcode::Nack;
                r.body = Body::Nack(mrc_transport::wire::NethRepr {
                    hdr_type: 0,
                    next: 0,
                    reason: NackReason::UnexpectedEvent,
                    vendor_info: 1,
                    entropy: seth.entropy,
                    spdcid: 0,
                    dpdcid: 0,
                    nack_psn: (seth.cack_psn + 3) & 0xff_ffff,
                    cc_type: 0,
                    cc_flags: 0,
                    tx_timestamp: 0,
                });
            }),
            DropReason::BadAck,
        ),
        (
            "SACK echoing an EV the QP does not have",
            0,
            forge(&sack, |r, _| {
                let Body::Sack { seth, .. } = &mut r.body else {
                    panic!()
                };
                seth.entropy ^= 0x7777_0000;
                seth.verdict = MultipathVerdict::AlwaysSkip;
            }),
            DropReason::UnknownEv,
        ),
    ];
    for (what, host, frame, reason) in cases {
        let drops = n.ep(host).stats().drops.get(reason);
        let now = n.now();
        n.ep(host).handle_packet(now, 0, &frame);
        assert_eq!(
            n.ep(host).stats().drops.get(reason),
            drops + 1,
            "{what}: counted as {reason}"
        );
        n.run_for(Duration::from_micros(50));
        assert_eq!(
            n.ep(1).mr_slice(dst.lkey).unwrap(),
            &before[..],
            "{what}: nothing written"
        );
        for (h, qp) in [(0, c.qp_a), (1, c.qp_b)] {
            assert_eq!(
                n.ep(h).query_qp(qp).unwrap().state,
                QpState::Rts,
                "{what}: QP {h} lives"
            );
        }
    }
    let r = n.ep(1).qp_stats(c.qp_b).unwrap();
    assert_eq!(r.access_errors, 3);
    assert_eq!(
        r.nacks_sent.unexpected, 3,
        "each refused write is NACKed to its sender"
    );
    assert_eq!(r.nacks_sent.out_of_window, 1);
    // The requester never sent those PSNs: the NACKs are refused, the QP unharmed.
    assert!(n.ep(0).stats().drops.get(DropReason::BadAck) >= 4 + 2);
    let a = n.ep(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(
        a.ev_state_changes, 0,
        "a forged verdict on an unknown EV retires nothing"
    );
    // And the connection still works.
    write_and_check(&mut n, &c, 100_000, Some(5), 99);
}

#[test]
fn writes_beyond_the_write_with_immediate_limit_fail_the_responder_qp() {
    let Setup {
        mut n,
        c,
        write,
        next_psn,
        ..
    } = setup();
    let frame = forge(&write, |r, _| {
        r.bth.psn = next_psn;
        r.bth.opcode = Opcode::WriteOnlyImm;
        let w = write_headers(r);
        w.meth.rqmsn = 5000;
        w.immdt = Some(mrc_transport::wire::ImmDtRepr { imm: 1 });
    });
    let now = n.now();
    n.ep(1).handle_packet(now, 0, &frame);
    assert_eq!(n.ep(1).stats().drops.get(DropReason::ImmLimit), 1);
    assert_eq!(n.ep(1).query_qp(c.qp_b).unwrap().state, QpState::Error);
    let fatal = n.events(1).into_iter().any(|e| {
        matches!(
            e,
            mrc_transport::Event::QpFatal {
                status: WcStatus::RemoteOperationalError,
                ..
            }
        )
    });
    assert!(fatal);
}

#[test]
fn a_million_packets_of_garbage_and_junk_feedback_leave_memory_bounded() {
    let Setup {
        mut n,
        dst,
        write,
        sack,
        next_psn,
        ..
    } = setup();
    let wire = WireConfig::default();
    let mut rng = TestRng(42);
    let mut buf = vec![0u8; n.ep(0).max_frame_len()];
    let mut templates = Vec::new();
    // Valid-ICRC frames of every kind with random fields, built once and then varied.
    for i in 0..512u32 {
        let r = rng.next();
        let f = match i % 6 {
            0 => forge(&write, |repr, _| {
                repr.bth.psn = (next_psn.wrapping_add(r as u32 % 3000)) & 0xff_ffff;
                let w = write_headers(repr);
                w.reth.rkey = if r & 1 == 0 { dst.rkey } else { r as u32 };
                w.reth.va = DST_VA + (r >> 40) % (2 * LEN as u64);
            }),
            1 => forge(&sack, |repr, _| {
                let Body::Sack { seth, cc } = &mut repr.body else {
                    panic!()
                };
                seth.cack_psn = r as u32 & 0xff_ffff;
                seth.sack_bitmap = r.rotate_left(17);
                seth.sack_offset = (r >> 20) as i16;
                seth.entropy = (r >> 32) as u32;
                seth.verdict = MultipathVerdict::from_bits((r >> 8) as u8);
                seth.probe_response = r & 4 != 0;
                cc.tx_timestamp = (r >> 48) as u16;
            }),
            2 => forge(&sack, |repr, _| {
                repr.bth.opcode = Opcode::Nack;
                repr.body = Body::Nack(mrc_transport::wire::NethRepr {
                    hdr_type: 0,
                    next: 0,
                    reason: NackReason::from_u8((r >> 8) as u8 % 0x20),
                    vendor_info: 0,
                    entropy: (r >> 32) as u32,
                    spdcid: 0,
                    dpdcid: 0,
                    nack_psn: r as u32 & 0xff_ffff,
                    cc_type: 0,
                    cc_flags: 0,
                    tx_timestamp: 0,
                });
            }),
            3 => forge(&sack, |repr, _| {
                repr.bth.opcode = Opcode::Ack;
                repr.body = Body::Ack(mrc_transport::wire::AethRepr::ack(r as u32 & 0xff_ffff));
            }),
            4 => forge(&write, |repr, _| {
                repr.bth.psn = r as u32 & 0xff_ffff;
                repr.dscp = Dscp(12);
            }),
            _ => forge(&write, |repr, _| {
                repr.bth.psn = (next_psn + 1 + (r as u32 % 2000)) & 0xff_ffff;
                repr.bth.dest_qp = r as u32 & 0xff_ffff;
            }),
        };
        templates.push(f);
    }
    let baseline = [n.ep(0).heap_bytes(), n.ep(1).heap_bytes()];
    for i in 0..1_000_000u64 {
        let r = rng.next();
        let host = (r & 1) as usize;
        let now = n.now() + Duration::from_nanos(i * 100);
        match i % 4 {
            0 => {
                // Random bytes of random length.
                let len = (r >> 8) as usize % 300;
                for b in &mut buf[..len] {
                    *b = rng.next() as u8;
                }
                n.ep(host).handle_packet(now, 0, &buf[..len]);
            }
            1 => {
                // A real frame with a few bytes flipped (a bad ICRC, or worse).
                let t = &templates[(r >> 16) as usize % templates.len()];
                buf[..t.len()].copy_from_slice(t);
                for _ in 0..3 {
                    let at = rng.next() as usize % t.len();
                    buf[at] ^= rng.next() as u8 | 1;
                }
                n.ep(host).handle_packet(now, 0, &buf[..t.len()]);
            }
            _ => {
                let t = &templates[(r >> 16) as usize % templates.len()];
                n.ep(host).handle_packet(now, 0, t);
            }
        }
        if i % 64 == 63 {
            for h in 0..2 {
                let ep = n.ep(h);
                while ep
                    .poll_transmit(now, mrc_transport::PortMask::ALL, &mut buf)
                    .is_some()
                {}
                ep.handle_timeout(now);
                while ep.poll_event().is_some() {}
            }
        }
    }
    let after = [n.ep(0).heap_bytes(), n.ep(1).heap_bytes()];
    assert_eq!(after, baseline, "state did not grow");
    let drops = n.ep(0).stats().drops.total() + n.ep(1).stats().drops.total();
    assert!(drops > 900_000, "garbage is counted: {drops}");
    let _ = wire;
}
