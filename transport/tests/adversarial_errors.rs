//! Error paths (libibverbs QP state diagram, brief §3.7, §3.10): a QP that exhausts its retry
//! budget or receives a fatal NACK moves to ERROR, completes every outstanding send and
//! receive work request (the first with the cause, the rest flushed, in posting order),
//! raises `QpFatal`, and after RESET → INIT → RTR → RTS carries Writes again, every byte
//! checked. Port down and up reach the application as asynchronous events on both sides.

mod common;

use common::{
    Conn, ConnOpts, Net, NetBuilder, connect, drain_cq, nic, pattern, region, write_and_check,
};
use mrc_transport::verbs::{
    InitAttr, QpState, QpTransition, RecvWr, RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge,
    WcOpcode, WcStatus, WorkCompletion,
};
use mrc_transport::{Duration, Event};

/// Fast retry budget: 2 linear + 2 exponential retries of 1.024 µs × 2^6.
fn quick_retry(a: RtsAttr) -> RtsAttr {
    RtsAttr {
        timeout: 6,
        retry_linear: 2,
        retry_exp: 2,
        ..a
    }
}

/// Reset both QPs of `c` and connect them again with fresh PSNs (the out-of-band exchange
/// an application repeats after a fatal error).
fn reset_and_reconnect(n: &mut Net, c: &Conn, psn: u32) {
    for (h, qp) in [(c.a, c.qp_a), (c.b, c.qp_b)] {
        n.ep(h).modify_qp(qp, QpTransition::Reset).unwrap();
        assert_eq!(n.ep(h).query_qp(qp).unwrap().state, QpState::Reset);
        n.ep(h)
            .modify_qp(qp, QpTransition::Init(InitAttr::default()))
            .unwrap();
    }
    for (h, me, peer_host, peer, my_psn, peer_psn) in [
        (c.a, c.qp_a, c.b, c.qp_b, psn, psn + 7),
        (c.b, c.qp_b, c.a, c.qp_a, psn + 7, psn),
    ] {
        let remote = RemoteNic {
            addr: nic(peer_host),
            host: Some(peer_host as u32),
        };
        let ep = n.ep(h);
        ep.modify_qp(me, QpTransition::Rtr(RtrAttr::new(remote, peer, peer_psn)))
            .unwrap();
        ep.modify_qp(me, QpTransition::Rts(quick_retry(RtsAttr::new(my_psn))))
            .unwrap();
    }
}

fn statuses(wcs: &[WorkCompletion]) -> Vec<(u64, WcStatus, WcOpcode)> {
    wcs.iter().map(|w| (w.wr_id, w.status, w.opcode)).collect()
}

fn fatal_events(n: &mut Net, h: usize) -> Vec<WcStatus> {
    n.events(h)
        .into_iter()
        .filter_map(|e| match e {
            Event::QpFatal { status, .. } => Some(status),
            _ => None,
        })
        .collect()
}

#[test]
fn retry_exhaustion_fails_flushes_and_the_qp_is_reset_and_reused() {
    let mut n = NetBuilder {
        planes: 2,
        paths_per_plane: 2,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(
        &mut n,
        0,
        1,
        ConnOpts {
            rts: quick_retry,
            ..ConnOpts::default()
        },
    );
    write_and_check(&mut n, &c, 64 << 10, None, 1);
    let dst = region(&mut n, 1, c.pd_b, 0x20_0000, 1 << 16, |_| 0);
    // Every path dies; a receive is waiting on the requester's QP too.
    let now = n.now();
    for plane in 0..2 {
        for path in 0..2 {
            n.path_down(plane, path, now, now + Duration::from_millis(50));
        }
    }
    n.ep(0).post_recv(c.qp_a, &RecvWr { wr_id: 900 }).unwrap();
    let src = region(&mut n, 0, c.pd_a, 0x10_0000, 4096, pattern(1));
    for id in 0..3u64 {
        let sge = [Sge {
            addr: 0x10_0000,
            length: 1000,
            lkey: src.lkey,
        }];
        n.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: id,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: 0x20_0000,
                    rkey: dst.rkey,
                    signaled: id != 1,
                },
            )
            .unwrap();
    }
    let mut wcs = Vec::new();
    n.run_until(Duration::from_millis(40), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        wcs.len() == 4
    });
    assert_eq!(
        statuses(&wcs),
        [
            (0, WcStatus::RetryExceeded, WcOpcode::RdmaWrite),
            (1, WcStatus::WrFlushError, WcOpcode::RdmaWrite),
            (2, WcStatus::WrFlushError, WcOpcode::RdmaWrite),
            (900, WcStatus::WrFlushError, WcOpcode::RecvRdmaWithImm),
        ],
        "the culprit first, then every send (signalled or not) and receive flushed"
    );
    assert_eq!(n.ep(0).query_qp(c.qp_a).unwrap().state, QpState::Error);
    assert_eq!(fatal_events(&mut n, 0), [WcStatus::RetryExceeded]);
    // Work posted to an errored QP completes flushed at once.
    let sge = [Sge {
        addr: 0x10_0000,
        length: 8,
        lkey: src.lkey,
    }];
    n.ep(0)
        .post_send(
            c.qp_a,
            &SendWr {
                wr_id: 7,
                opcode: SendOpcode::Write,
                sg_list: &sge,
                remote_addr: 0x20_0000,
                rkey: dst.rkey,
                signaled: true,
            },
        )
        .unwrap();
    assert_eq!(
        statuses(&drain_cq(&mut n, 0, c.cq_a)),
        [(7, WcStatus::WrFlushError, WcOpcode::RdmaWrite)]
    );
    // The paths come back; the application resets and reconnects the pair and carries on.
    let back = now + Duration::from_millis(51);
    if n.now() < back {
        let wait = back - n.now();
        n.run_for(wait);
    }
    reset_and_reconnect(&mut n, &c, 5000);
    assert!(
        drain_cq(&mut n, 0, c.cq_a).is_empty(),
        "a reset QP completes nothing more"
    );
    write_and_check(&mut n, &c, 256 << 10, Some(3), 2);
    write_and_check(&mut n, &c, 100, None, 3);
}

#[test]
fn a_fatal_nack_fails_flushes_and_the_qp_is_reset_and_reused() {
    let mut n = NetBuilder::default().build();
    let c = connect(
        &mut n,
        0,
        1,
        ConnOpts {
            rts: quick_retry,
            ..ConnOpts::default()
        },
    );
    let dst = region(&mut n, 1, c.pd_b, 0x20_0000, 4096, |_| 0);
    let src = region(&mut n, 0, c.pd_a, 0x10_0000, 64 << 10, pattern(4));
    let post = |n: &mut Net, id: u64, rkey: u32| {
        let sge = [Sge {
            addr: 0x10_0000,
            length: 2048,
            lkey: src.lkey,
        }];
        n.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: id,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: 0x20_0000,
                    rkey,
                    signaled: true,
                },
            )
            .unwrap();
    };
    post(&mut n, 1, dst.rkey);
    let mut wcs = Vec::new();
    n.run_until(Duration::from_millis(10), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        !wcs.is_empty()
    });
    post(&mut n, 2, dst.rkey ^ 0x0100_0000); // an rkey the responder does not know
    post(&mut n, 3, dst.rkey);
    n.ep(0).post_recv(c.qp_a, &RecvWr { wr_id: 50 }).unwrap();
    n.run_until(Duration::from_millis(10), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        wcs.len() == 4
    });
    assert_eq!(
        statuses(&wcs),
        [
            (1, WcStatus::Success, WcOpcode::RdmaWrite),
            (2, WcStatus::RemoteAccessError, WcOpcode::RdmaWrite),
            (3, WcStatus::WrFlushError, WcOpcode::RdmaWrite),
            (50, WcStatus::WrFlushError, WcOpcode::RecvRdmaWithImm),
        ]
    );
    assert_eq!(fatal_events(&mut n, 0), [WcStatus::RemoteAccessError]);
    assert_eq!(
        n.ep(1).query_qp(c.qp_b).unwrap().state,
        QpState::Rts,
        "the responder refuses packets, not its QP"
    );
    let got = n.ep(1).mr_slice(dst.lkey).unwrap().to_vec();
    let want = pattern(4);
    assert!(
        got[..2048].iter().enumerate().all(|(i, &b)| b == want(i)),
        "WR 1 landed"
    );
    assert!(got[2048..].iter().all(|&b| b == 0), "nothing else did");
    reset_and_reconnect(&mut n, &c, 0xff_fff0);
    write_and_check(&mut n, &c, 1 << 20, Some(9), 5);
}

#[test]
fn port_down_and_up_are_events_on_both_sides_and_traffic_rides_through() {
    let mut n = NetBuilder {
        planes: 2,
        paths_per_plane: 2,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 64 << 10, None, 1);
    let _ = (n.events(0), n.events(1));
    let now = n.now();
    n.h.schedule_port(
        mrc_transport::harness::NodeId(0),
        1,
        now + Duration::from_micros(10),
        false,
    );
    n.h.schedule_port(
        mrc_transport::harness::NodeId(0),
        1,
        now + Duration::from_millis(2),
        true,
    );
    // A Write in flight across the port going down completes, every byte checked.
    write_and_check(&mut n, &c, 4 << 20, None, 2);
    n.run_for(Duration::from_millis(3));
    let local: Vec<Event> = n.events(0);
    let ports: Vec<(u8, bool)> = local
        .iter()
        .filter_map(|e| match e {
            Event::PortStatus { port, up } => Some((*port, *up)),
            _ => None,
        })
        .collect();
    assert_eq!(
        ports,
        [(1, false), (1, true)],
        "the application hears of its port"
    );
    let remote: Vec<u32> = n
        .events(1)
        .into_iter()
        .filter_map(|e| match e {
            Event::RemotePortStatus { remote, up_mask } if remote == nic(0) => Some(up_mask),
            _ => None,
        })
        .collect();
    assert_eq!(
        remote,
        [0b01, 0b11],
        "the peer hears which of our ports are up"
    );
    assert!(n.ep(0).plane_stats(1).unwrap().packets_sent > 0);
    write_and_check(&mut n, &c, 1 << 20, Some(4), 3);
}

/// Regression (found by the adversarial feedback test): a retransmission avoided the EV its
/// packet was lost on even when that EV was the only one usable, so a QP with one path (or
/// with every other plane down) never resent after an outage and hung until its retry
/// budget ran out. It now resends on the same EV when there is no other.
#[test]
fn a_qp_with_a_single_path_resends_on_it_after_an_outage() {
    let mut n = NetBuilder {
        planes: 1,
        paths_per_plane: 1,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let now = n.now();
    n.path_down(0, 0, now, now + Duration::from_micros(300));
    let job = common::start_write(&mut n, &c, 64 << 10, Some(8), 21);
    common::finish_write(&mut n, &c, job);
    assert!(
        n.now() < now + Duration::from_millis(5),
        "recovered within a few timeouts, at {}",
        n.now()
    );
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    assert!(s.retransmits.timeout > 0);
    assert_eq!(s.retry_timeouts, 0, "the long retry timer was not needed");
}
