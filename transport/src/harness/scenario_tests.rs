//! The harness driving real endpoints: stories that check every byte and every completion.

use core::net::Ipv6Addr;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use mrc_srv6::wire::EthernetAddress;

use super::*;
use crate::cc::{CcProfile, NsccConfig};
use crate::config::{ConfigError, EvProfile, ExplicitEv, ExplicitValue};
use crate::ev::{PathSource, SrPath};
use crate::stats::DropReason as EndpointDrop;
use crate::verbs::{InitAttr, RecvWr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus};
use crate::{Endpoint, EndpointConfig, PathMode, PortConfig};

const PLANES: usize = 2;
const PATHS: usize = 4;

/// Path `i` of `plane` towards host `dst` has outer DA `fc00:plane:dst:i::`.
#[derive(Debug)]
struct Grid;

impl PathSource for Grid {
    fn path_count(&self, _src: u32, _dst: u32, _plane: u8) -> usize {
        PATHS
    }
    fn path(&self, _src: u32, dst: u32, plane: u8, index: usize) -> Option<SrPath> {
        (index < PATHS).then(|| SrPath {
            outer_da: Ipv6Addr::new(0xfc00, plane.into(), dst as u16, index as u16, 0, 0, 0, 0),
            segment: None,
        })
    }
}

fn nic(host: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, host + 1)
}

fn endpoint(seed: u64, host: u16, srv6: bool, cc: &CcProfile) -> Endpoint {
    let ports = (0..PLANES as u8)
        .map(|p| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, host as u8, p]),
                EthernetAddress([2, 0xff, 0, 0, host as u8, p]),
            )
        })
        .collect();
    let mode = if srv6 {
        PathMode::Srv6 {
            paths: Arc::new(Grid),
            host: u32::from(host),
        }
    } else {
        PathMode::Ecmp
    };
    let mut cfg = EndpointConfig::new(seed + u64::from(host), nic(host), ports, mode);
    cfg.cc_profiles = vec![cc.clone()];
    Endpoint::new(cfg).expect("valid endpoint configuration")
}

/// Two endpoints joined on both planes by `PATHS` paths each way; in SRv6 mode the DA's fourth
/// group names the path, in ECMP mode the EV fields are hashed.
fn fabric(seed: u64, srv6: bool, model: PathModel) -> (Harness<Endpoint>, QpPair) {
    fabric_with(seed, srv6, model, &CcProfile::default())
}

fn fabric_with(
    seed: u64,
    srv6: bool,
    model: PathModel,
    cc: &CcProfile,
) -> (Harness<Endpoint>, QpPair) {
    let select = if srv6 {
        PathSelect::Custom(Arc::new(|f: &FrameInfo| {
            usize::from(f.outer_dst.segments()[3])
        }))
    } else {
        PathSelect::EcmpHash
    };
    let ends = [0, 1].map(|host| endpoint(seed, host, srv6, cc));
    let (mut h, [a, b]) = joined(seed, ends, select, model.clone(), model);
    let qp = h.connect_qps(a, b, InitAttr::default(), 1024).unwrap();
    (h, qp)
}

/// Hosts 0 and 1 as `ends`, joined on both planes by `PATHS` paths each way, chosen by
/// `select`, with `forward` and `reverse` as the paths' models.
fn joined(
    seed: u64,
    ends: [Endpoint; 2],
    select: PathSelect,
    forward: PathModel,
    reverse: PathModel,
) -> (Harness<Endpoint>, [NodeId; 2]) {
    let mut h = Harness::new(HarnessConfig {
        seed,
        ..HarnessConfig::default()
    });
    let [a, b] = ends;
    let spec = |host| NodeSpec {
        addr: Some(nic(host)),
        ports: vec![PortModel::default(); PLANES],
    };
    let nodes = [h.add_node(a, spec(0)), h.add_node(b, spec(1))];
    h.connect(
        nodes[0],
        nodes[1],
        &LinkSpec {
            ports: (0..PLANES as u8).collect(),
            paths_per_port: PATHS,
            select,
            forward,
            reverse,
        },
    );
    (h, nodes)
}

const SRC: u64 = 0x1_0000_0000;
const DST: u64 = 0x7_0000_0000;

/// Write `len` bytes from a to b with an immediate; run until both completions arrive; check
/// them and every byte that landed.
fn write_and_check(h: &mut Harness<Endpoint>, qp: QpPair, len: usize, salt: u64) {
    let src = h.reg_pattern(&qp.a, SRC, len, salt).unwrap();
    let dst = h.reg_pattern(&qp.b, DST, len, !salt).unwrap();
    h.node_mut(qp.b.node)
        .post_recv(qp.b.qpn, &RecvWr { wr_id: 7 })
        .unwrap();
    let sge = [Sge {
        addr: SRC,
        length: len as u32,
        lkey: src.lkey,
    }];
    let wr = SendWr {
        wr_id: 1,
        opcode: SendOpcode::WriteWithImm(0xfeed),
        sg_list: &sge,
        remote_addr: DST,
        rkey: dst.rkey,
        signaled: true,
    };
    h.node_mut(qp.a.node).post_send(qp.a.qpn, &wr).unwrap();
    let (mut sent, mut recvd) = (Vec::new(), Vec::new());
    h.run_until(Bound::time(Duration::from_millis(500)), |h| {
        sent.extend(h.poll_all(qp.a.node, qp.a.cq));
        recvd.extend(h.poll_all(qp.b.node, qp.b.cq));
        !sent.is_empty() && !recvd.is_empty()
    })
    .unwrap_or_else(|e| panic!("transfer did not finish: {e}"));
    assert_eq!(sent.len(), 1);
    assert_eq!((sent[0].wr_id, sent[0].status), (1, WcStatus::Success));
    assert_eq!(sent[0].opcode, WcOpcode::RdmaWrite);
    assert_eq!(recvd.len(), 1);
    assert_eq!((recvd[0].wr_id, recvd[0].imm_data), (7, Some(0xfeed)));
    assert_eq!(recvd[0].opcode, WcOpcode::RecvRdmaWithImm);
    assert_eq!(recvd[0].byte_len, len as u32);
    h.check_region(qp.b.node, dst.lkey, 0, len, |i| pattern(salt, i))
        .unwrap();
}

fn impaired() -> PathModel {
    PathModel {
        rate_bps: 50_000_000_000,
        latency: Duration::from_micros(3),
        queue_bytes: 64 * 1024,
        loss: 0.01,
        reorder: 0.1,
        reorder_delay: Duration::from_micros(4),
        duplicate: 0.01,
        ..PathModel::default()
    }
}

#[test]
fn a_write_crosses_lossy_reordering_trimming_paths_intact_in_srv6_mode() {
    let (mut h, qp) = fabric(11, true, impaired());
    write_and_check(&mut h, qp, 1 << 20, 3);
    // The impairments did happen, and frames used every path of both planes.
    let paths = (0..2 * PLANES * PATHS).map(PathId);
    let stats: Vec<PathStats> = paths.map(|p| h.path_stats(p)).collect();
    assert!(
        stats[..PLANES * PATHS].iter().all(|s| s.delivered > 0),
        "{stats:?}"
    );
    let total = |f: fn(&PathStats) -> u64| stats.iter().map(f).sum::<u64>();
    assert!(total(|s| s.lost) > 0 && total(|s| s.reordered) > 0);
    assert!(total(|s| s.duplicated) > 0);
}

#[test]
fn a_write_survives_a_path_failure_in_ecmp_mode() {
    let (mut h, qp) = fabric(5, false, impaired());
    // Path 0 of plane 0 dies 20 µs in, for good.
    h.schedule_path(PathId(0), Instant(20_000), false);
    write_and_check(&mut h, qp, 1 << 20, 9);
    assert!(h.path_stats(PathId(0)).dropped_down > 0);
}

/// The responder's way back on plane 0 is dead from the start while every forward path works:
/// each SACK a plane-0 arrival triggers vanishes. The cumulative SACKs of plane 1 cover them,
/// except at a message's tail, when the last word went on plane 0. The tail loss probe (RFC
/// 8985 §7, issue #14) resends the oldest unacknowledged packet on the EV whose SACK last came
/// back: every message completes, and no healthy forward EV is blamed by a per-packet timeout.
#[test]
fn a_tail_whose_sacks_vanish_is_probed_and_no_healthy_path_is_blamed() {
    let (mut h, qp) = fabric(8, true, PathModel::default());
    for i in 0..PATHS {
        // Reverse paths follow the forward ones: plane 0's are the first PATHS of them.
        h.schedule_path(PathId(PLANES * PATHS + i), Instant(0), false);
    }
    for salt in 0..12 {
        write_and_check(&mut h, qp, 64 * 1024 + salt as usize * 4096, salt);
    }
    let st = h.node(qp.a.node).qp_stats(qp.a.qpn).unwrap();
    assert!(
        st.retransmits.tail_probe > 0,
        "some tail's last SACK left on plane 0: {:?}",
        st.retransmits
    );
    assert_eq!(
        st.timeouts, 0,
        "the probe answered first: {:?}",
        st.retransmits
    );
    let out: Vec<_> = h
        .node(qp.a.node)
        .ev_stats(qp.a.qpn)
        .into_iter()
        .filter(|e| e.state != crate::ev::EvState::Good && e.state != crate::ev::EvState::Skip)
        .collect();
    assert!(out.is_empty(), "healthy forward EVs retired: {out:?}");
    let lost: u64 = (0..PATHS)
        .map(|i| h.path_stats(PathId(PLANES * PATHS + i)).dropped_down)
        .sum();
    assert!(lost > 0, "SACKs did leave on plane 0 and vanish");
}

/// The responder's reverse EV of plane 0 goes through a path that dies (every other path,
/// both ways, works): its SACKs on plane 0 vanish until the requester resends data the lost
/// SACK had acknowledged. That resend condemns the EV (brief §3.9, issue #14): later SACKs of
/// plane 0 take another way back, so the dead path swallows a few of them, not the plane's
/// SACKs of every later transfer.
#[test]
fn a_reverse_ev_through_a_dead_path_is_dropped_after_one_lost_sack_is_noticed() {
    let (mut h, qp) = fabric(9, true, PathModel::default());
    write_and_check(&mut h, qp, 1 << 20, 1);
    // The reverse path plane 0's SACKs took: the only plane-0 reverse path with deliveries.
    let reverse0 = PLANES * PATHS..PLANES * PATHS + PATHS;
    let used: Vec<usize> = reverse0
        .clone()
        .filter(|&p| h.path_stats(PathId(p)).delivered > 0)
        .collect();
    assert_eq!(used.len(), 1, "one reverse EV per plane: {used:?}");
    let dead = PathId(used[0]);
    h.schedule_path(dead, h.now(), false);
    for salt in 2..14 {
        write_and_check(&mut h, qp, 64 * 1024 + salt as usize * 4096, salt);
    }
    let swallowed = h.path_stats(dead).dropped_down;
    let others: u64 = reverse0
        .filter(|&p| p != dead.0)
        .map(|p| h.path_stats(PathId(p)).delivered)
        .sum();
    assert!(swallowed > 0, "a SACK did take the dead path");
    assert!(others > 0, "plane 0's SACKs found another way back");
    let sacks = h.node(qp.b.node).qp_stats(qp.b.qpn).unwrap().sacks_sent;
    assert!(
        swallowed * 10 < sacks,
        "the dead path swallowed {swallowed} of {sacks} SACKs"
    );
}

#[test]
fn the_same_seed_replays_the_same_run_with_endpoints() {
    let digest = |seed| {
        let (mut h, qp) = fabric(seed, true, impaired());
        write_and_check(&mut h, qp, 256 * 1024, 1);
        (h.now(), h.digest())
    };
    assert_eq!(digest(21), digest(21));
    assert_ne!(digest(21).1, digest(22).1);
}

#[test]
fn nscc_trims_far_less_than_an_oversized_fixed_window_on_slow_shallow_paths() {
    // Eight 10 Gb/s paths with 16 KB queues behind two 100 Gb/s ports: the paths, not the
    // ports, are the bottleneck, and a one-BDP window (500 KB at 200 Gb/s × 20 µs) overflows
    // them.
    let slow = PathModel {
        rate_bps: 10_000_000_000,
        latency: Duration::from_micros(3),
        queue_bytes: 16 * 1024,
        ecn: Some(EcnMarking {
            min_bytes: 4 * 1024,
            max_bytes: 12 * 1024,
        }),
        ..PathModel::default()
    };
    let trims = |cc: &CcProfile| {
        let (mut h, qp) = fabric_with(4, true, slow.clone(), cc);
        write_and_check(&mut h, qp, 8 << 20, 5);
        (0..PLANES * PATHS)
            .map(|p| h.path_stats(PathId(p)).trimmed)
            .sum::<u64>()
    };
    let fixed = trims(&CcProfile::Fixed { window_bytes: None });
    let nscc = trims(&CcProfile::Nscc(NsccConfig::default()));
    assert!(
        fixed > 100,
        "the fixed window overflows the paths: {fixed} trims"
    );
    assert!(nscc * 4 < fixed, "NSCC {nscc} trims, fixed window {fixed}");
}

/// OCP mrc_ctl.h EXP EV profiles (brief §3.1): an endpoint given an explicit ECMP profile by
/// `add_ev_profile` builds its QP's EVs from exactly that list; a megabyte crosses, and every
/// frame either way (data, SACKs, ACKs) carries one of the listed entropies.
#[test]
fn a_qp_on_an_explicit_ecmp_profile_moves_data_on_the_listed_entropies_only() {
    let seed = 17;
    let stevs: [(u8, u32); 7] = [
        (1, 0x0002_2222),
        (0, 0x0001_1111),
        (0, 0x0003_3333),
        (1, 0x0004_4444),
        (0, 0x0001_1111),
        (0, 0x0005_5555),
        (1, 0x0006_6666),
    ];
    let list: Vec<ExplicitEv> = stevs
        .iter()
        .map(|&(plane, v)| ExplicitEv {
            plane,
            value: ExplicitValue::Entropy(v),
        })
        .collect();
    let listed: BTreeSet<u32> = stevs.iter().map(|&(_, v)| v).collect();
    let profile = EvProfile {
        active_per_plane: 3,
        floor_per_plane: 1,
        explicit: Some(list.clone().into()),
        ..EvProfile::default()
    };

    let mut index = None;
    let ends = [0, 1].map(|host| {
        let mut ep = endpoint(seed, host, false, &CcProfile::default());
        // A list naming a plane the NIC does not have is refused.
        let mut bad = list.clone();
        bad.push(ExplicitEv {
            plane: PLANES as u8,
            value: ExplicitValue::Entropy(9),
        });
        let refused = EvProfile {
            explicit: Some(bad.into()),
            ..profile.clone()
        };
        assert_eq!(ep.add_ev_profile(refused), Err(ConfigError::EvProfile));
        let i = ep.add_ev_profile(profile.clone()).unwrap();
        assert_eq!(*index.get_or_insert(i), i);
        ep
    });
    // Every frame's EV, as the fabric hashes it.
    let seen = Arc::new(Mutex::new(Vec::<u32>::new()));
    let record = Arc::clone(&seen);
    let order = ends[0].config().wire.entropy_order;
    let select = PathSelect::Custom(Arc::new(move |f: &FrameInfo| {
        let sport = f.udp_sport.expect("an MRC frame");
        let ev = order.join(sport, f.flow_label);
        record.lock().unwrap().push(ev);
        (ev.wrapping_mul(0x9e37_79b9) >> 24) as usize % PATHS
    }));
    let (mut h, ends) = joined(seed, ends, select, impaired(), PathModel::default());
    let init = InitAttr {
        ev_profile: index.unwrap(),
        ..InitAttr::default()
    };
    let qp = h.connect_qps(ends[0], ends[1], init, 1024).unwrap();
    write_and_check(&mut h, qp, 1 << 20, 13);

    let seen = seen.lock().unwrap();
    assert!(seen.len() > 256, "{} frames", seen.len());
    let strays: BTreeSet<u32> = seen
        .iter()
        .copied()
        .filter(|v| !listed.contains(v))
        .collect();
    assert!(strays.is_empty(), "entropies not listed: {strays:x?}");

    // The sender's EVs are the list, plane by plane in list order, and the data left on both
    // planes' EVs.
    let evs = h.node(qp.a.node).ev_stats(qp.a.qpn);
    let mut want: Vec<(u8, u32)> = stevs.to_vec();
    want.sort_by_key(|&(plane, _)| plane);
    let got: Vec<(u8, u32)> = evs.iter().map(|e| (e.plane, e.entropy)).collect();
    assert_eq!(got, want);
    assert!(evs.iter().all(|e| e.path.is_none()));
    for plane in 0..PLANES as u8 {
        let sent: u64 = evs
            .iter()
            .filter(|e| e.plane == plane)
            .map(|e| e.stats.packets)
            .sum();
        assert!(sent > 0, "nothing left on plane {plane}: {evs:?}");
    }
    let delivered: u64 = evs.iter().map(|e| e.stats.delivered).sum();
    assert!(delivered >= 256, "{delivered} packets delivered");
    // The SACKs' echoed entropies were matched back to the listed EVs (they carry no index).
    let unknown = h.node(qp.a.node).stats().drops.get(EndpointDrop::UnknownEv);
    assert_eq!(unknown, 0, "SACKs echoing an entropy matched to no EV");
    assert!(evs.iter().any(|e| e.stats.rtt_samples > 0));
}
