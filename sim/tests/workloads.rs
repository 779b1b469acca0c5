//! Every byte of every workload arrives intact: permutation, incast with a victim,
//! all-to-all, on SRv6 and on ECMP fabrics.

mod common;

use common::{SMALL16, TINY, limit, sim, us};
use mrc_sim::traffic::{all_to_all, incast, permutation};
use mrc_sim::workload::{Workload, WorkloadOpts};
use mrc_sim::{Routing, SimConfig, SimTime};

#[test]
fn a_permutation_delivers_every_byte_and_every_completion() {
    let mut s = sim(TINY, SimConfig::default());
    let msgs = permutation(4, 256 * 1024, SimTime::ZERO, 7);
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    let summary = s.run_to_completion(limit(), &mut |_| {}).unwrap();
    let v = w.verify().unwrap();
    assert_eq!(v.messages, 4);
    assert_eq!(v.bytes, 4 * 256 * 1024);
    assert!(summary.events > 1000);
    for r in w.records() {
        let fct = r.fct_ns().unwrap();
        // 256 KiB at 2 × 100 Gb/s takes at least 10.5 µs.
        assert!(fct > 10_000, "flow {} finished in {fct} ns", r.id);
    }
}

#[test]
fn incast_with_a_victim_and_all_to_all_deliver_everything() {
    let mut s = sim(SMALL16, SimConfig::default());
    let mut msgs = incast(&[4, 5, 6, 8, 9, 10, 12], 0, 512 * 1024, SimTime::ZERO);
    msgs.push(mrc_sim::traffic::Message {
        src: 13,
        dst: 1,
        start: SimTime::ZERO,
        size: 512 * 1024,
    });
    msgs.extend(all_to_all(16, 16 * 1024, us(5)));
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    s.run_to_completion(limit(), &mut |_| {}).unwrap();
    let v = w.verify().unwrap();
    assert_eq!(v.messages, msgs.len());
    let c = s.fabric_counters();
    assert!(
        c.switch_ports.trimmed > 0,
        "a 7→1 incast into small buffers trims"
    );
}

#[test]
fn an_ecmp_fabric_delivers_a_permutation() {
    let cfg = SimConfig {
        routing: Routing::Ecmp,
        ..SimConfig::default()
    };
    let mut s = sim(SMALL16, cfg);
    let msgs = permutation(16, 128 * 1024, SimTime::ZERO, 3);
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    s.run_to_completion(limit(), &mut |_| {}).unwrap();
    assert_eq!(w.verify().unwrap().messages, 16);
}

#[test]
fn a_ring_all_reduce_sums_every_rank_under_a_link_failure() {
    use mrc_sim::allreduce::RingAllReduce;
    use mrc_sim::{ConnOpts, Fault, FaultKind};
    use mrc_srv6::plan::{NodeId, SwitchId};
    let mut s = sim(SMALL16, SimConfig::default());
    // Eight ranks spread over the racks, ring order across racks.
    let ranks = [0, 4, 8, 12, 1, 5, 9, 13];
    let ar = RingAllReduce::install(&mut s, &ranks, 64 * 1024, ConnOpts::default()).unwrap();
    let (a, b) = (
        NodeId::Switch(SwitchId::t0(1, 1)),
        NodeId::Switch(SwitchId::t1(1, 0)),
    );
    s.schedule(Fault::at_us(10, FaultKind::LinkDown(a, b)));
    s.run_to_completion(limit(), &mut |_| {}).unwrap();
    ar.verify(&s).unwrap();
    // Every rank finished, after the failure: the all-reduce ran across it.
    assert!(
        ar.finish_times()
            .iter()
            .all(|t| t.is_some_and(|t| t > us(10))),
        "{:?}",
        ar.finish_times()
    );
    // The failure hit the ring's traffic: that link swallowed frames, and the engines retired
    // EVs of plane 1 and resent what was lost there.
    let dropped =
        s.link_stats(a, b).unwrap().down_dropped + s.link_stats(b, a).unwrap().down_dropped;
    assert!(dropped > 0, "the dead link swallowed frames");
    let (mut retired, mut resent) = (0, 0);
    for &h in &ranks {
        let p = s.endpoint(h).plane_stats(1).unwrap();
        retired += p.evs_retired;
        resent += p.retransmits;
    }
    assert!(
        retired > 0 && resent > 0,
        "retired {retired}, resent {resent}"
    );
}

#[test]
fn messages_past_the_largest_work_request_go_in_several() {
    // Engines that take at most 64 KiB a work request: 300 KiB and 1 MiB + 1 messages, split
    // over 1 and 3 QPs, go as several work requests each and arrive whole.
    let cfg = SimConfig {
        endpoint_tweak: Some(std::sync::Arc::new(|_, c| {
            c.limits.max_message_bytes = 64 * 1024;
        })),
        ..SimConfig::default()
    };
    for qps in [1, 3] {
        let mut s = sim(TINY, cfg.clone());
        let msgs = [
            mrc_sim::traffic::Message {
                src: 0,
                dst: 3,
                start: SimTime::ZERO,
                size: 300 * 1024,
            },
            mrc_sim::traffic::Message {
                src: 1,
                dst: 2,
                start: us(2),
                size: (1 << 20) + 1,
            },
        ];
        let opts = WorkloadOpts {
            qps_per_pair: qps,
            ..WorkloadOpts::default()
        };
        let w = Workload::install(&mut s, &msgs, &opts).unwrap();
        s.run_to_completion(limit(), &mut |_| {}).unwrap();
        let v = w.verify().unwrap_or_else(|e| panic!("{qps} QPs: {e}"));
        assert_eq!(v.bytes, 300 * 1024 + (1 << 20) + 1);
    }
}

#[test]
fn more_messages_on_a_pair_than_its_receive_queue_holds() {
    // 1500 messages on one QP whose receive queue holds 1024: receives are posted as the
    // writes consume them.
    let mut s = sim(TINY, SimConfig::default());
    let msgs: Vec<_> = (0..1500)
        .map(|i| mrc_sim::traffic::Message {
            src: 0,
            dst: 1,
            start: SimTime(i * 10_000),
            size: 64,
        })
        .collect();
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    s.run_to_completion(limit(), &mut |_| {}).unwrap();
    assert_eq!(w.verify().unwrap().messages, 1500);
}

#[test]
fn the_engines_tables_are_checked_before_installing() {
    use mrc_sim::workload::check_limits;
    use mrc_transport::config::Limits;
    let msg = |src, dst| mrc_sim::traffic::Message {
        src,
        dst,
        start: SimTime::ZERO,
        size: 1,
    };
    let limits = Limits {
        max_mrs: 3,
        max_qps: 8,
        ..Limits::default()
    };
    assert!(check_limits(&[msg(0, 1), msg(0, 2), msg(3, 0)], 2, &limits).is_ok());
    let e = check_limits(&[msg(0, 1), msg(0, 2), msg(3, 0), msg(1, 0)], 1, &limits).unwrap_err();
    assert!(
        e.0.starts_with("host 0 sends or receives 4 messages"),
        "{e}"
    );
    let e = check_limits(&[msg(0, 1), msg(0, 2), msg(3, 0)], 3, &limits).unwrap_err();
    assert!(e.0.starts_with("host 0 needs 9 QPs (3 pairs"), "{e}");
}
