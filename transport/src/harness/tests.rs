//! The harness's own tests, with raw frames built by the wire module: timing, queueing,
//! trimming, marking, impairments, schedules, path selection, bounds and determinism.

use core::net::Ipv6Addr;

use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress};

use super::*;
use crate::wire::{
    Body, BthRepr, FrameRepr, MethRepr, Opcode, RethRepr, Route as WireRoute, Trimmed,
    WriteHeaders, parse_frame,
};

const A: Ipv6Addr = Ipv6Addr::new(0xfcbb, 0xbb00, 0xe000, 0, 0, 0, 0, 0);
const B: Ipv6Addr = Ipv6Addr::new(0xfcbb, 0xbb00, 0xe001, 0, 0, 0, 0, 0);
const C: Ipv6Addr = Ipv6Addr::new(0xfcbb, 0xbb00, 0xe002, 0, 0, 0, 0, 0);

/// A Write Only frame from A to `dst` (SRv6 mode, `path` as outer DA) carrying `payload` bytes.
fn frame_to(
    dst: Ipv6Addr,
    path: Ipv6Addr,
    dscp: u8,
    ecn: Ecn,
    psn: u32,
    payload: usize,
) -> Vec<u8> {
    let repr = FrameRepr {
        src_mac: EthernetAddress([2, 0, 0, 0, 0, 1]),
        dst_mac: EthernetAddress([2, 0, 0, 0, 0, 2]),
        route: WireRoute::Srv6 {
            path,
            srh_segment: None,
        },
        src_addr: A,
        dst_addr: dst,
        dscp: Dscp(dscp),
        ecn,
        entropy: psn,
        bth: BthRepr {
            opcode: Opcode::WriteOnly,
            solicited: false,
            mig_req: false,
            pad_count: 0,
            tver: 0,
            pkey: BthRepr::DEFAULT_PKEY,
            dest_qp: 7,
            ack_req: false,
            rtx: false,
            ts: false,
            psn,
        },
        body: Body::Write(WriteHeaders {
            meth: MethRepr { rqmsn: 0, msn: 1 },
            tseth: None,
            reth: RethRepr {
                va: 0x1000,
                rkey: 9,
                dma_len: payload as u32,
            },
            immdt: None,
        }),
    };
    let data: Vec<u8> = (0..payload).map(|i| i as u8).collect();
    let mut buf = vec![0; repr.buffer_len(payload)];
    let len = repr.build(&mut buf, &data, &WireConfig::default()).unwrap();
    buf.truncate(len);
    buf
}

fn frame(dscp: u8, ecn: Ecn, psn: u32, payload: usize) -> Vec<u8> {
    frame_to(
        B,
        Ipv6Addr::new(0xfcbb, 0xbb00, 0x1000, 0xe001, 0, 0, 0, 0),
        dscp,
        ecn,
        psn,
        payload,
    )
}

fn psn_of(frame: &[u8]) -> u32 {
    parse_frame(frame, &WireConfig::default()).unwrap().bth.psn
}

/// Frames get to the path at once (port rate 0) unless a test says otherwise.
fn instant_port() -> PortModel {
    PortModel {
        rate_bps: 0,
        tx_ring: 1 << 20,
    }
}

fn spec(addr: Ipv6Addr, ports: usize) -> NodeSpec {
    NodeSpec {
        addr: Some(addr),
        ports: vec![instant_port(); ports],
    }
}

fn link(model: PathModel, paths_per_port: usize, select: PathSelect) -> LinkSpec {
    LinkSpec {
        ports: vec![0],
        paths_per_port,
        select,
        forward: model.clone(),
        reverse: model,
    }
}

/// Two raw nodes, A and B, one port, `n` paths each way.
fn pair(seed: u64, model: PathModel, n: usize) -> (Harness<RawNode>, NodeId, NodeId, Link) {
    let mut h = Harness::new(HarnessConfig {
        seed,
        trace: true,
        ..HarnessConfig::default()
    });
    let a = h.add_node(RawNode::new(), spec(A, 1));
    let b = h.add_node(RawNode::new(), spec(B, 1));
    let l = h.connect(a, b, &link(model, n, PathSelect::OuterDaHash));
    (h, a, b, l)
}

fn quiet(rate_bps: u64, latency_ns: u64) -> PathModel {
    PathModel {
        rate_bps,
        latency: Duration(latency_ns),
        ecn: None,
        ..PathModel::default()
    }
}

#[test]
fn a_frame_crosses_a_path_after_serialisation_and_latency() {
    let (mut h, a, b, _) = pair(1, quiet(10_000_000_000, 5_000), 1);
    let f = frame(4, Ecn::Ect0, 1, 1000);
    let len = f.len() as u64;
    h.node_mut(a).send(0, f.clone());
    h.run_until_idle(Bound::default()).unwrap();
    let got = &h.node(b).received;
    assert_eq!(got.len(), 1);
    // len bytes at 10 Gb/s = len * 0.8 ns (rounded up), then 5 µs on the wire.
    assert_eq!(got[0].0, Instant((len * 8).div_ceil(10) + 5_000));
    assert_eq!(got[0].2, f, "an uncongested path changes nothing");

    // A NIC port with a rate adds its own serialisation first.
    let (mut h, a, b, _) = pair(1, quiet(10_000_000_000, 5_000), 1);
    h.nodes[a.0].ports[0].model.rate_bps = 100_000_000_000;
    h.node_mut(a).send(0, f);
    h.run_until_idle(Bound::default()).unwrap();
    let at = (len * 8).div_ceil(100) + (len * 8).div_ceil(10) + 5_000;
    assert_eq!(h.node(b).received[0].0, Instant(at));
}

#[test]
fn back_to_back_frames_wait_behind_each_other_and_frames_go_both_ways() {
    let (mut h, a, b, _) = pair(1, quiet(8_000_000_000, 1_000), 1);
    for psn in 0..3 {
        h.node_mut(a).send(0, frame(4, Ecn::Ect0, psn, 936));
    }
    h.node_mut(b).send(0, frame(46, Ecn::NotEct, 99, 0));
    h.run_until_idle(Bound::default()).unwrap();
    let at: Vec<u64> = h.node(b).received.iter().map(|r| r.0.as_nanos()).collect();
    let ser = h.node(b).received[0].2.len() as u64; // 8 Gb/s: one ns per byte
    assert_eq!(at, vec![ser + 1_000, 2 * ser + 1_000, 3 * ser + 1_000]);
    assert_eq!(h.node(a).received.len(), 1);
    assert_eq!(psn_of(&h.node(a).received[0].2), 99);
}

#[test]
fn a_full_queue_trims_data_to_the_trim_size_and_rewrites_the_dscp() {
    let model = PathModel {
        queue_bytes: 3_000,
        ..quiet(1_000_000_000, 1_000)
    };
    let (mut h, a, b, l) = pair(1, model, 1);
    for psn in 0..10 {
        h.node_mut(a).send(0, frame(4, Ecn::Ect0, psn, 1_000));
    }
    h.run_until_idle(Bound::default()).unwrap();
    let stats = h.path_stats(l.forward[0][0]);
    // One frame in service, two fit the queue; the other seven are trimmed.
    assert_eq!(stats.trimmed, 7);
    assert_eq!(stats.tail_dropped, 0);
    let received = &h.node(b).received;
    assert_eq!(received.len(), 10);
    let cfg = WireConfig::default();
    let keep = usize::from(cfg.trim_size);
    let trimmed: Vec<u32> = received
        .iter()
        .filter(|r| r.2.len() == keep)
        .map(|r| {
            let f = parse_frame(&r.2, &cfg).unwrap();
            assert_eq!(f.trimmed, Some(Trimmed::InFabric));
            assert_eq!(f.outer.dscp, cfg.dscp.trimmed);
            f.bth.psn
        })
        .collect();
    assert_eq!(trimmed, (3..10).collect::<Vec<_>>());
    // Trimmed headers take the priority queue: they overtake the two data frames waiting.
    let order: Vec<u32> = received.iter().map(|r| psn_of_any(&r.2)).collect();
    assert_eq!(order, vec![0, 3, 4, 5, 6, 7, 8, 9, 1, 2]);
}

fn psn_of_any(frame: &[u8]) -> u32 {
    parse_frame(frame, &WireConfig::default()).unwrap().bth.psn
}

#[test]
fn what_may_not_be_trimmed_is_tail_dropped_and_the_last_hop_has_its_own_code_point() {
    // DSCP 0 (no-trim data) and 46 (control) are never trimmed; trimming off drops all.
    for (trim, dscp, trimmed, dropped) in [
        (TrimMode::InFabric, 0, 0, 7),
        (TrimMode::Off, 4, 0, 7),
        (TrimMode::LastHop, 4, 7, 0),
        (TrimMode::InFabric, 8, 7, 0),
    ] {
        let model = PathModel {
            queue_bytes: 3_000,
            trim,
            ..quiet(1_000_000_000, 1_000)
        };
        let (mut h, a, b, l) = pair(1, model, 1);
        for psn in 0..10 {
            h.node_mut(a).send(0, frame(dscp, Ecn::Ect0, psn, 1_000));
        }
        h.run_until_idle(Bound::default()).unwrap();
        let stats = h.path_stats(l.forward[0][0]);
        assert_eq!(
            (stats.trimmed, stats.tail_dropped),
            (trimmed, dropped),
            "{trim:?} {dscp}"
        );
        if trim == TrimMode::LastHop {
            let f = parse_frame(&h.node(b).received[1].2, &WireConfig::default()).unwrap();
            assert_eq!(f.trimmed, Some(Trimmed::LastHop));
        }
    }
    let (mut h, a, _, l) = pair(
        1,
        PathModel {
            queue_bytes: 3_000,
            ..quiet(1_000_000_000, 0)
        },
        1,
    );
    for psn in 0..10 {
        h.node_mut(a).send(0, frame(46, Ecn::NotEct, psn, 1_000));
    }
    h.run_until_idle(Bound::default()).unwrap();
    assert_eq!(h.path_stats(l.forward[0][0]).trimmed, 0);
}

#[test]
fn ecn_marks_only_capable_frames_and_only_above_the_low_threshold() {
    let model = PathModel {
        queue_bytes: 1 << 20,
        ecn: Some(EcnMarking {
            min_bytes: 4_000,
            max_bytes: 8_000,
        }),
        ..quiet(1_000_000_000, 1_000)
    };
    let (mut h, a, b, l) = pair(1, model, 1);
    for psn in 0..20 {
        let ecn = if psn % 2 == 0 { Ecn::Ect0 } else { Ecn::NotEct };
        h.node_mut(a).send(0, frame(4, ecn, psn, 1_000));
    }
    h.run_until_idle(Bound::default()).unwrap();
    let cfg = WireConfig::default();
    let marks: Vec<(u32, Ecn)> = h
        .node(b)
        .received
        .iter()
        .map(|r| {
            // Switches' marks are outside the ICRC: the frame still verifies.
            let f = parse_frame(&r.2, &cfg).unwrap();
            (f.bth.psn, f.outer.ecn)
        })
        .collect();
    let len = h.node(b).received[0].2.len() as u32;
    for &(psn, ecn) in &marks {
        // Frame k finds k-1 frames queued behind the one in service.
        let queued = psn.saturating_sub(1) * len;
        if psn % 2 == 1 {
            assert_eq!(ecn, Ecn::NotEct, "psn {psn}");
        } else if queued <= 4_000 {
            assert_eq!(ecn, Ecn::Ect0, "psn {psn}");
        } else if queued >= 8_000 {
            assert_eq!(ecn, Ecn::Ce, "psn {psn}");
        }
    }
    assert!(marks.iter().any(|m| m.1 == Ecn::Ce));
    assert_eq!(
        h.path_stats(l.forward[0][0]).ecn_marked,
        marks.iter().filter(|m| m.1 == Ecn::Ce).count() as u64
    );
}

#[test]
fn the_loss_rate_matches_in_distribution() {
    let model = PathModel {
        loss: 0.1,
        queue_bytes: u64::MAX,
        ..quiet(0, 1_000)
    };
    let (mut h, a, b, l) = pair(42, model, 1);
    for psn in 0..10_000 {
        h.node_mut(a).send(0, frame(4, Ecn::Ect0, psn, 64));
    }
    h.run_until_idle(Bound::default()).unwrap();
    let delivered = h.node(b).received.len() as i64;
    // Binomial(10 000, 0.9): mean 9000, sd 30; allow four sd.
    assert!((delivered - 9_000).abs() <= 120, "delivered {delivered}");
    let stats = h.path_stats(l.forward[0][0]);
    assert_eq!(stats.lost + stats.delivered, 10_000);
}

#[test]
fn reordering_lets_later_frames_overtake_and_duplication_delivers_twice() {
    let model = PathModel {
        reorder: 0.3,
        reorder_delay: Duration::from_micros(10),
        ..quiet(100_000_000_000, 1_000)
    };
    let (mut h, a, b, l) = pair(3, model, 1);
    for psn in 0..200 {
        h.node_mut(a).send(0, frame(4, Ecn::Ect0, psn, 100));
    }
    h.run_until_idle(Bound::default()).unwrap();
    let mut order: Vec<u32> = h.node(b).received.iter().map(|r| psn_of(&r.2)).collect();
    assert!(order.windows(2).any(|w| w[0] > w[1]), "something overtook");
    assert!(h.path_stats(l.forward[0][0]).reordered > 20);
    order.sort_unstable();
    assert_eq!(
        order,
        (0..200).collect::<Vec<_>>(),
        "nothing lost, nothing doubled"
    );

    let (mut h, a, b, _) = pair(
        3,
        PathModel {
            duplicate: 1.0,
            ..quiet(0, 1_000)
        },
        1,
    );
    for psn in 0..5 {
        h.node_mut(a).send(0, frame(4, Ecn::Ect0, psn, 100));
    }
    h.run_until_idle(Bound::default()).unwrap();
    let order: Vec<u32> = h.node(b).received.iter().map(|r| psn_of(&r.2)).collect();
    assert_eq!(order, vec![0, 0, 1, 1, 2, 2, 3, 3, 4, 4]);
}

#[test]
fn a_path_that_goes_down_loses_what_it_carries_until_it_comes_back() {
    let (mut h, a, b, l) = pair(1, quiet(1_000_000_000, 10_000), 1);
    let p = l.forward[0][0];
    // Frame 0 is on the wire when the path fails at 5 µs, frame 1 is sent while it is down,
    // frame 2 after it is back at 30 µs.
    h.node_mut(a)
        .send_at(Instant(0), 0, frame(4, Ecn::Ect0, 0, 100));
    h.node_mut(a)
        .send_at(Instant(20_000), 0, frame(4, Ecn::Ect0, 1, 100));
    h.node_mut(a)
        .send_at(Instant(40_000), 0, frame(4, Ecn::Ect0, 2, 100));
    h.schedule_path(p, Instant(5_000), false);
    h.schedule_path(p, Instant(30_000), true);
    h.run_until_idle(Bound::default()).unwrap();
    let got: Vec<u32> = h.node(b).received.iter().map(|r| psn_of(&r.2)).collect();
    assert_eq!(got, vec![2]);
    assert_eq!(h.path_stats(p).dropped_down, 2);
}

#[test]
fn a_port_that_goes_down_is_reported_and_holds_its_frames_until_it_is_up() {
    let (mut h, a, b, _) = pair(1, quiet(0, 1_000), 1);
    h.schedule_port(a, 0, Instant(0), false);
    h.schedule_port(a, 0, Instant(50_000), true);
    h.node_mut(a)
        .send_at(Instant(10_000), 0, frame(4, Ecn::Ect0, 5, 100));
    h.run_until_idle(Bound::default()).unwrap();
    assert_eq!(
        h.node(a).port_changes,
        vec![(Instant(0), 0, false), (Instant(50_000), 0, true)]
    );
    // Not ready while down: the frame left when the port came back.
    assert_eq!(h.node(b).received.len(), 1);
    assert_eq!(h.node(b).received[0].0, Instant(51_000));
}

#[test]
fn frames_pick_paths_by_their_headers_and_nodes_by_their_address() {
    // OuterDaHash: one DA, one path; many DAs spread over all paths.
    let (mut h, a, _, l) = pair(1, quiet(0, 1_000), 4);
    for k in 0..64u16 {
        let path = Ipv6Addr::new(0xfcbb, 0xbb00, 0x1000 + k, 0xe001, 0, 0, 0, 0);
        for psn in 0..2 {
            h.node_mut(a)
                .send(0, frame_to(B, path, 4, Ecn::Ect0, psn, 10));
        }
    }
    h.run_until_idle(Bound::default()).unwrap();
    let used: Vec<u64> = l.forward[0]
        .iter()
        .map(|&p| h.path_stats(p).delivered)
        .collect();
    assert!(used.iter().all(|&n| n > 0 && n % 2 == 0), "{used:?}");

    // Three nodes: A reaches B and C through the same port, told apart by the inner DA.
    let mut h: Harness<RawNode> = Harness::new(HarnessConfig::default());
    let a = h.add_node(RawNode::new(), spec(A, 1));
    let b = h.add_node(RawNode::new(), spec(B, 1));
    let c = h.add_node(RawNode::new(), spec(C, 1));
    h.connect(a, b, &link(quiet(0, 1_000), 2, PathSelect::EcmpHash));
    h.connect(a, c, &link(quiet(0, 1_000), 2, PathSelect::EcmpHash));
    let da = Ipv6Addr::new(0xfcbb, 0xbb00, 0x1000, 0, 0, 0, 0, 0);
    h.node_mut(a).send(0, frame_to(C, da, 4, Ecn::Ect0, 1, 10));
    h.node_mut(a).send(0, frame_to(B, da, 4, Ecn::Ect0, 2, 10));
    h.node_mut(a)
        .send(0, frame_to(Ipv6Addr::LOCALHOST, da, 4, Ecn::Ect0, 3, 10));
    h.run_until_idle(Bound::default()).unwrap();
    assert_eq!(psn_of(&h.node(c).received[0].2), 1);
    assert_eq!(psn_of(&h.node(b).received[0].2), 2);
    assert_eq!(h.unroutable(), 1);
}

#[test]
fn a_run_that_cannot_go_idle_in_time_fails_instead_of_hanging() {
    let (mut h, a, _, _) = pair(1, quiet(0, 1_000), 1);
    h.node_mut(a)
        .send_at(Instant(5_000_000), 0, frame(4, Ecn::Ect0, 1, 10));
    let err = h
        .run_until_idle(Bound::time(Duration::from_millis(1)))
        .unwrap_err();
    assert!(
        matches!(err, HarnessError::BoundReached { pending: 1, .. }),
        "{err}"
    );
    // The event bound as well.
    let bound = Bound {
        time: Duration::from_secs(1),
        events: 0,
    };
    assert!(h.run_until_idle(bound).is_err());
    // Given time, the same run finishes.
    h.run_until_idle(Bound::default()).unwrap();
}

fn impaired_run(seed: u64) -> (Vec<(Instant, TraceEvent)>, u64) {
    let model = PathModel {
        queue_bytes: 8_000,
        loss: 0.05,
        reorder: 0.2,
        reorder_delay: Duration::from_micros(3),
        duplicate: 0.05,
        ..PathModel::default()
    };
    let (mut h, a, b, _) = pair(
        seed,
        PathModel {
            rate_bps: 10_000_000_000,
            ..model
        },
        4,
    );
    for psn in 0..300 {
        let path = Ipv6Addr::new(
            0xfcbb,
            0xbb00,
            0x1000 + (psn % 7) as u16,
            0xe001,
            0,
            0,
            0,
            0,
        );
        h.node_mut(a)
            .send(0, frame_to(B, path, 4, Ecn::Ect0, psn, 500));
        h.node_mut(b).send(0, frame(46, Ecn::NotEct, psn, 0));
    }
    h.run_until_idle(Bound::default()).unwrap();
    (h.trace().to_vec(), h.digest())
}

#[test]
fn the_same_seed_replays_the_same_trace_and_another_seed_does_not() {
    let (trace, digest) = impaired_run(7);
    assert!(trace.len() > 1_000);
    assert_eq!(impaired_run(7), (trace.clone(), digest));
    let (other, other_digest) = impaired_run(8);
    assert_ne!(other_digest, digest);
    assert_ne!(other, trace);
}
