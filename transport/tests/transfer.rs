//! Clean transfers between two endpoints: every byte lands where the RETH says, completions
//! come in order with the right lengths and immediates.

mod common;

use common::{ConnOpts, NetBuilder, connect, finish_write, start_write, write_and_check};
use mrc_transport::Duration;

/// Two hosts, one plane, one path.
fn one_path_net() -> common::Net {
    NetBuilder {
        planes: 1,
        paths_per_plane: 1,
        ..NetBuilder::default()
    }
    .build()
}

#[test]
fn single_path_writes_of_every_shape_land_byte_for_byte() {
    let mut net = one_path_net();
    let c = connect(&mut net, 0, 1, ConnOpts::default());
    for (i, len) in [1usize, 0, 4095, 4096, 4097, 3 * 4096, 1 << 20]
        .into_iter()
        .enumerate()
    {
        write_and_check(&mut net, &c, len, None, i as u64);
        write_and_check(&mut net, &c, len, Some(0xabc0 + i as u32), 100 + i as u64);
    }
    let s = net.ep(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(
        s.retransmits.total(),
        0,
        "a clean path needs no retransmission"
    );
    assert_eq!(s.messages_completed, 14);
    let r = net.ep(1).qp_stats(c.qp_b).unwrap();
    assert_eq!(r.imm_delivered, 7);
    assert_eq!(r.duplicates, 0);
    assert_eq!(net.ep(1).stats().drops.total(), 0);
}

#[test]
fn a_write_the_responder_refuses_fails_with_a_remote_access_error() {
    use common::{drain_cq, pattern, region};
    use mrc_transport::Duration;
    use mrc_transport::verbs::{QpState, SendOpcode, SendWr, Sge, WcStatus};

    let mut net = NetBuilder::default().build();
    let c = connect(&mut net, 0, 1, ConnOpts::default());
    let src = region(&mut net, 0, c.pd_a, 0x1000, 64 << 10, pattern(1));
    let dst = region(&mut net, 1, c.pd_b, 0x8000, 16 << 10, |_| 0);
    let post = |net: &mut common::Net, id: u64, rkey: u32, len: u32| {
        let sge = [Sge {
            addr: 0x1000,
            length: len,
            lkey: src.lkey,
        }];
        net.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: id,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: 0x8000,
                    rkey,
                    signaled: true,
                },
            )
            .unwrap();
    };
    post(&mut net, 1, dst.rkey, 8192); // fine
    post(&mut net, 2, dst.rkey, 64 << 10); // runs past the 16 KiB region
    post(&mut net, 3, dst.rkey, 100); // queued behind the failure
    let mut wcs = Vec::new();
    net.run_until(Duration::from_millis(100), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        wcs.len() == 3
    });
    let got: Vec<(u64, WcStatus)> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        [
            (1, WcStatus::Success),
            (2, WcStatus::RemoteAccessError),
            (3, WcStatus::WrFlushError)
        ]
    );
    assert_eq!(net.ep(0).query_qp(c.qp_a).unwrap().state, QpState::Error);
    let r = net.ep(1).qp_stats(c.qp_b).unwrap();
    assert!(r.access_errors > 0);
    assert_eq!(
        net.ep(1).query_qp(c.qp_b).unwrap().state,
        QpState::Rts,
        "the responder refuses the packets, not the QP"
    );
    // What fitted the region before the error was written; nothing beyond it.
    let mem = net.ep(1).mr_slice(dst.lkey).unwrap();
    let want = pattern(1);
    assert!(mem[..8192].iter().enumerate().all(|(i, &b)| b == want(i)));
}

/// `take_ready_cqs` names each CQ that was given completions since the last call, once: what
/// a NIC loop polls instead of every CQ (issue #13).
#[test]
fn the_endpoint_lists_each_cq_given_completions_once_per_new_completion() {
    let mut net = one_path_net();
    let c = connect(&mut net, 0, 1, ConnOpts::default());
    let mut ready = Vec::new();
    let take = |net: &mut common::Net, h: usize| {
        let mut v = Vec::new();
        net.ep(h).take_ready_cqs(&mut v);
        v
    };
    net.ep(0).take_ready_cqs(&mut ready);
    assert!(ready.is_empty(), "no completion yet: {ready:?}");
    for round in 0..2 {
        let job = start_write(&mut net, &c, 3 * 4096, Some(7), round);
        net.run_until_idle(Duration::from_millis(50));
        assert_eq!(
            take(&mut net, 0),
            vec![c.cq_a],
            "the Write's send completion"
        );
        assert_eq!(
            take(&mut net, 1),
            vec![c.cq_b],
            "the immediate's receive completion"
        );
        // Not polled yet, and nothing new: listed once.
        assert!(take(&mut net, 0).is_empty());
        assert!(take(&mut net, 1).is_empty());
        finish_write(&mut net, &c, job);
    }
}

/// Post `count` Write-with-Immediates of `len` bytes each from host 0 to host 1 (receives
/// posted first); the keys of the target region.
fn post_write_imms(
    net: &mut common::Net,
    c: &common::Conn,
    count: u64,
    len: usize,
) -> mrc_transport::verbs::MrKeys {
    use common::{pattern, region};
    use mrc_transport::verbs::{RecvWr, SendOpcode, SendWr, Sge};
    let total = count as usize * len;
    let src = region(net, 0, c.pd_a, 0x10_0000, total, pattern(9));
    let dst = region(net, 1, c.pd_b, 0x80_0000, total, |_| 0xee);
    for i in 0..count {
        net.ep(1)
            .post_recv(c.qp_b, &RecvWr { wr_id: 100 + i })
            .unwrap();
    }
    for i in 0..count {
        let off = i * len as u64;
        let sge = [Sge {
            addr: 0x10_0000 + off,
            length: len as u32,
            lkey: src.lkey,
        }];
        // Every one is accepted: the limit holds work back, it refuses none.
        net.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: i,
                    opcode: SendOpcode::WriteWithImm(0x100 + i as u32),
                    sg_list: &sge,
                    remote_addr: 0x80_0000 + off,
                    rkey: dst.rkey,
                    signaled: true,
                },
            )
            .unwrap();
    }
    dst
}

/// The requester's bound on outstanding Write-with-Immediates (RTS `wimm_limit`, brief §3.5):
/// with two outstanding, the third is not started until one completes, whatever room the
/// window leaves; the rest wait in the send queue, in order, and all complete.
#[test]
fn a_requester_starts_no_more_write_with_immediates_than_its_limit() {
    use common::{drain_cq, is_write, pattern};
    use mrc_transport::verbs::{RtsAttr, WcStatus};
    const PKTS: u64 = 3;
    const COUNT: u64 = 5;
    let len = PKTS as usize * 4096;
    for limit in [2u16, 128] {
        let mut net = one_path_net();
        let opts = ConnOpts {
            rts: if limit == 2 {
                |a| RtsAttr { wimm_limit: 2, ..a }
            } else {
                |a| a
            },
            ..ConnOpts::default()
        };
        let c = connect(&mut net, 0, 1, opts);
        let dst = post_write_imms(&mut net, &c, COUNT, len);
        // What leaves before any acknowledgement can come back (the path takes 2 µs).
        net.capture(0, true);
        net.run_for(Duration::ZERO);
        let first: Vec<_> = net
            .captured(0)
            .into_iter()
            .filter(|f| is_write(f))
            .collect();
        let sent = net.ep(0).qp_stats(c.qp_a).unwrap().data_packets_sent;
        let want = PKTS * COUNT.min(u64::from(limit));
        assert_eq!(
            sent, want,
            "limit {limit}: every packet of the first messages"
        );
        assert_eq!(first.len() as u64, want, "limit {limit}: on the wire");
        // Over the whole run, never more started than completed plus the limit.
        let mut wcs = Vec::new();
        let mut most = 0;
        net.run_until(Duration::from_millis(100), |n| {
            let s = n.ep(0).qp_stats(c.qp_a).unwrap();
            let started = s.data_packets_sent.div_ceil(PKTS);
            let outstanding = started - s.messages_completed;
            assert!(
                outstanding <= u64::from(limit),
                "{outstanding} outstanding, limit {limit}"
            );
            most = most.max(outstanding);
            wcs.extend(drain_cq(n, 0, c.cq_a));
            wcs.len() as u64 == COUNT
        });
        assert_eq!(most, COUNT.min(u64::from(limit)));
        let ids: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
        let want: Vec<_> = (0..COUNT).map(|i| (i, WcStatus::Success)).collect();
        assert_eq!(ids, want, "limit {limit}: all complete, in order");
        net.run_until_idle(Duration::from_millis(10));
        let recvs = drain_cq(&mut net, 1, c.cq_b);
        let imms: Vec<_> = recvs.iter().map(|w| w.imm_data).collect();
        let want: Vec<_> = (0..COUNT).map(|i| Some(0x100 + i as u32)).collect();
        assert_eq!(imms, want, "limit {limit}");
        let got = net.ep(1).mr_slice(dst.lkey).unwrap();
        let p = pattern(9);
        assert!(got.iter().enumerate().all(|(i, &b)| b == p(i)));
        let s = net.ep(0).qp_stats(c.qp_a).unwrap();
        assert_eq!(s.data_packets_sent, PKTS * COUNT);
        assert_eq!(s.retransmits.total(), 0);
    }
}

/// A Write-with-Immediate held back by the requester's limit holds back what was posted after
/// it too: the send queue goes in posting order.
#[test]
fn work_posted_behind_a_held_write_with_immediate_waits_its_turn() {
    use common::drain_cq;
    use mrc_transport::verbs::{RtsAttr, WcStatus};
    let mut net = one_path_net();
    let opts = ConnOpts {
        rts: |a| RtsAttr { wimm_limit: 1, ..a },
        ..ConnOpts::default()
    };
    let c = connect(&mut net, 0, 1, opts);
    post_write_imms(&mut net, &c, 2, 4096);
    // A plain Write (wr_id 42) behind the second one.
    let _ = start_write(&mut net, &c, 4096, None, 3);
    net.run_for(Duration::ZERO);
    let s = net.ep(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(s.data_packets_sent, 1, "only the first message left");
    let mut wcs = Vec::new();
    net.run_until(Duration::from_millis(100), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        wcs.len() == 3
    });
    let got: Vec<_> = wcs.iter().map(|w| (w.wr_id, w.status)).collect();
    assert_eq!(
        got,
        [
            (0, WcStatus::Success),
            (1, WcStatus::Success),
            (42, WcStatus::Success)
        ]
    );
}
