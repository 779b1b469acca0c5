//! Local port failures and the peer's view of them (brief §3.10), and several QPs sharing
//! a NIC: round-robin service, one congestion controller per destination.

mod common;

use common::{ConnOpts, NetBuilder, PathSpec, connect, drain_cq, pattern, region};
use mrc_transport::ev::EvState;
use mrc_transport::verbs::{RtsAttr, SendOpcode, SendWr, Sge, WcStatus};
use mrc_transport::{Duration, Event, Instant};

fn post_write(n: &mut common::Net, c: &common::Conn, src: u32, rkey: u32, len: u32, id: u64) {
    let sge = [Sge {
        addr: 0x10_0000,
        length: len,
        lkey: src,
    }];
    n.ep(c.a)
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
}

/// Two hosts, `planes` planes of two 10 Gb/s paths each.
fn ten_gig(planes: usize, seed: u64) -> common::Net {
    NetBuilder {
        planes,
        paths_per_plane: 2,
        seed,
        spec: PathSpec {
            rate_bps: 10_000_000_000,
            ..PathSpec::default()
        },
        ..NetBuilder::default()
    }
    .build()
}

/// Work posted while every local port is down, ports that never come back: no packet leaves
/// to start the retry clock, yet the budget runs and the work fails `RetryExceeded` (MRC brief
/// §3.7) instead of staying posted for ever. Found by the endpoint fuzz target.
#[test]
fn work_posted_with_every_port_down_fails_once_the_retry_budget_is_spent() {
    let mut n = ten_gig(2, 5);
    let opts = ConnOpts {
        rts: |a| RtsAttr {
            timeout: 4,
            retry_linear: 2,
            retry_exp: 2,
            ..a
        },
        ..ConnOpts::default()
    };
    let c = connect(&mut n, 0, 1, opts);
    let s0 = region(&mut n, 0, c.pd_a, 0x10_0000, 4096, pattern(1));
    let d1 = region(&mut n, 1, c.pd_b, 0x20_0000, 4096, |_| 0);
    let now = n.now();
    for port in 0..2 {
        n.ep(0).handle_port_status(now, port, false);
    }
    post_write(&mut n, &c, s0.lkey, d1.rkey, 4096, 7);
    let mut wcs = Vec::new();
    n.run_until(Duration::from_secs(1), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        !wcs.is_empty()
    });
    assert_eq!(wcs.len(), 1, "{wcs:?}");
    assert_eq!((wcs[0].wr_id, wcs[0].status), (7, WcStatus::RetryExceeded));
    assert_eq!(n.ep(0).qp_stats(c.qp_a).unwrap().data_packets_sent, 0);
}

#[test]
fn a_local_port_going_down_moves_traffic_to_the_other_planes_and_tells_the_peer() {
    let mut n = ten_gig(4, 3);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    // Data both ways, so each side has packets in flight on plane 2.
    let len = 16 << 20;
    let s0 = region(&mut n, 0, c.pd_a, 0x10_0000, len, pattern(1));
    let d1 = region(&mut n, 1, c.pd_b, 0x20_0000, len, |_| 0);
    post_write(&mut n, &c, s0.lkey, d1.rkey, len as u32, 1);
    n.run_for(Duration::from_micros(300));
    // Port 2 of host 0 dies: its link drops everything both ways until it comes back.
    let down_at = n.now();
    for path in 0..2 {
        n.path_down(2, path, down_at, down_at + Duration::from_millis(2));
    }
    n.ep(0).handle_port_status(down_at, 2, false);
    n.run_until(Duration::from_secs(1), |n| {
        drain_cq(n, 0, c.cq_a)
            .iter()
            .any(|w| w.status == WcStatus::Success)
    });
    assert!(
        n.now() > down_at + Duration::from_micros(500),
        "the transfer outlived the port"
    );
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    assert!(
        s.retransmits.port_down > 0,
        "what was in flight through port 2 left again"
    );
    assert_eq!(s.timeouts, 0, "without waiting for a timeout");
    // The port's EVs were held, not retired. (The three planes left take the whole load over
    // tail-dropping paths: their EVs may retire and come back, as real losses demand.)
    assert!(
        n.ep(0)
            .ev_stats(c.qp_a)
            .iter()
            .filter(|e| e.plane == 2)
            .all(|e| e.state != EvState::AssumedBad && e.stats.timeouts == 0),
        "a local port down is not a path failure"
    );
    let got = n.ep(1).mr_slice(d1.lkey).unwrap();
    let want = pattern(1);
    assert!(got.iter().enumerate().all(|(i, &b)| b == want(i)));
    // The peer learned it and stopped answering through plane 2.
    let events: Vec<Event> = n.events(1);
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::RemotePortStatus { up_mask, .. } if up_mask & 0b100 == 0)),
        "{events:?}"
    );
    let peer_sent_on_2 = n.ep(1).plane_stats(2).unwrap();
    // Port back up: the peer hears of it and plane 2 carries traffic again.
    let up_at = down_at + Duration::from_millis(2);
    n.run_for(up_at - n.now());
    let now = n.now();
    n.ep(0).handle_port_status(now, 2, true);
    let d = region(&mut n, 1, c.pd_b, 0x2000_0000, 1 << 20, |_| 0);
    let sge = [Sge {
        addr: 0x10_0000,
        length: 1 << 20,
        lkey: s0.lkey,
    }];
    n.ep(0)
        .post_send(
            c.qp_a,
            &SendWr {
                wr_id: 2,
                opcode: SendOpcode::Write,
                sg_list: &sge,
                remote_addr: 0x2000_0000,
                rkey: d.rkey,
                signaled: true,
            },
        )
        .unwrap();
    let before = n.ep(0).plane_stats(2).unwrap().packets_sent;
    n.run_until(Duration::from_secs(1), |n| {
        !drain_cq(n, 0, c.cq_a).is_empty()
    });
    assert!(n.ep(0).plane_stats(2).unwrap().packets_sent > before + 10);
    assert!(n.ep(1).plane_stats(2).unwrap().packets_sent >= peer_sent_on_2.packets_sent);
    let events: Vec<Event> = n.events(1);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::RemotePortStatus {
            up_mask: 0b1111,
            ..
        }
    )));
    let _ = Instant::ZERO;
}

#[test]
fn qps_share_the_nic_round_robin_and_a_controller_per_destination() {
    let mut n = NetBuilder {
        hosts: 3,
        planes: 2,
        paths_per_plane: 2,
        seed: 4,
        spec: PathSpec {
            rate_bps: 25_000_000_000,
            ..PathSpec::default()
        },
        ..NetBuilder::default()
    }
    .build();
    // Two QPs from host 0 to host 1, one from host 2 to host 1 (incast onto host 1).
    let conns = [
        connect(&mut n, 0, 1, ConnOpts::default()),
        connect(&mut n, 0, 1, ConnOpts::default()),
        connect(&mut n, 2, 1, ConnOpts::default()),
    ];
    let cc = n.ep(0).cc_state(conns[0].qp_a).unwrap();
    assert_eq!(cc.qps, 2, "QPs to one destination share one controller");
    let len = 4 << 20;
    let mut dsts = Vec::new();
    for (i, c) in conns.iter().enumerate() {
        let s = region(&mut n, c.a, c.pd_a, 0x10_0000, len, pattern(i as u64));
        let d = region(&mut n, c.b, c.pd_b, 0x20_0000, len, |_| 0);
        post_write(&mut n, c, s.lkey, d.rkey, len as u32, i as u64);
        dsts.push(d);
    }
    let mut finished = [None; 3];
    n.run_until(Duration::from_secs(1), |n| {
        for (i, c) in conns.iter().enumerate() {
            if finished[i].is_none() && !drain_cq(n, c.a, c.cq_a).is_empty() {
                finished[i] = Some(n.now());
            }
        }
        finished.iter().all(Option::is_some)
    });
    for (i, d) in dsts.iter().enumerate() {
        let got = n.ep(1).mr_slice(d.lkey).unwrap();
        let want = pattern(i as u64);
        assert!(got.iter().enumerate().all(|(k, &b)| b == want(k)), "QP {i}");
    }
    // Host 0's two QPs were served round-robin: they finish together.
    let (a, b) = (
        finished[0].unwrap().as_nanos(),
        finished[1].unwrap().as_nanos(),
    );
    assert!(a.abs_diff(b) * 10 < a.max(b), "{a} vs {b}");
}

#[test]
fn a_lost_port_up_update_costs_the_plane_only_for_the_hold() {
    let mut n = ten_gig(2, 6);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    // Host 1's port 1 goes down: host 0 hears of it.
    let t = n.now();
    n.ep(1).handle_port_status(t, 1, false);
    n.run_for(Duration::from_micros(100));
    let heard = n.events(0);
    assert!(
        heard
            .iter()
            .any(|e| matches!(e, Event::RemotePortStatus { up_mask, .. } if up_mask & 0b10 == 0)),
        "{heard:?}"
    );
    // It comes back while every path is down: the update that says so is lost (updates are
    // best effort, never retransmitted).
    let t = n.now();
    for plane in 0..2 {
        for path in 0..2 {
            n.path_down(plane, path, t, t + Duration::from_micros(50));
        }
    }
    n.ep(1).handle_port_status(t, 1, true);
    n.run_for(Duration::from_micros(100));
    // Host 0 writes: on plane 0 only at first; once the hold is over
    // (`remote_port_down_hold`, 2 ms) it tries plane 1 again and finds it working.
    let len = 16 << 20;
    let s0 = region(&mut n, 0, c.pd_a, 0x10_0000, len, pattern(3));
    let d1 = region(&mut n, 1, c.pd_b, 0x20_0000, len, |_| 0);
    post_write(&mut n, &c, s0.lkey, d1.rkey, len as u32, 1);
    n.run_until(Duration::from_secs(1), |n| {
        drain_cq(n, 0, c.cq_a)
            .iter()
            .any(|w| w.status == WcStatus::Success)
    });
    let later = n.events(0);
    assert!(
        !later
            .iter()
            .any(|e| matches!(e, Event::RemotePortStatus { up_mask, .. } if up_mask & 0b10 != 0)),
        "the up update was lost: {later:?}"
    );
    let on_1 = n.ep(0).plane_stats(1).unwrap().packets_sent;
    let on_0 = n.ep(0).plane_stats(0).unwrap().packets_sent;
    assert!(
        on_1 > on_0 / 4,
        "plane 1 carries data again: {on_0} packets on plane 0, {on_1} on plane 1"
    );
    let got = n.ep(1).mr_slice(d1.lkey).unwrap();
    let want = pattern(3);
    assert!(got.iter().enumerate().all(|(i, &b)| b == want(i)));
}

#[test]
fn a_qp_waiting_on_a_shared_window_is_woken_when_its_neighbour_frees_it() {
    // Two QPs to one destination share one controller (one window). QP A fills it with a
    // 4 MiB Write; QP B posts while the window is full, so it waits. Only A's SACKs free the
    // window: B must be woken by them, or it waits forever once A is done (nothing of B's own
    // is in flight to bring a SACK, and no timer of B's is armed).
    let mut n = ten_gig(2, 9);
    let a = connect(&mut n, 0, 1, ConnOpts::default());
    let b = connect(&mut n, 0, 1, ConnOpts::default());
    let len = 4 << 20;
    let (sa, da) = (
        region(&mut n, 0, a.pd_a, 0x10_0000, len, pattern(1)),
        region(&mut n, 1, a.pd_b, 0x20_0000, len, |_| 0),
    );
    let (sb, db) = (
        region(&mut n, 0, b.pd_a, 0x10_0000, 8192, pattern(2)),
        region(&mut n, 1, b.pd_b, 0x20_0000, 8192, |_| 0),
    );
    post_write(&mut n, &a, sa.lkey, da.rkey, len as u32, 1);
    n.run_for(Duration::from_micros(50));
    assert!(n.ep(0).qp_stats(a.qp_a).unwrap().data_packets_sent > 0);
    post_write(&mut n, &b, sb.lkey, db.rkey, 8192, 2);
    let mut done = [false; 2];
    n.run_until(Duration::from_millis(100), |n| {
        done[0] |= !drain_cq(n, 0, a.cq_a).is_empty();
        done[1] |= !drain_cq(n, 0, b.cq_a).is_empty();
        done[0] && done[1]
    });
    assert_eq!(done, [true, true], "both Writes complete");
    let got = n.ep(1).mr_slice(db.lkey).unwrap();
    let want = pattern(2);
    assert!(got.iter().enumerate().all(|(k, &x)| x == want(k)));
}
