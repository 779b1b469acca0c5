//! MRC over many paths at once: spraying, random loss, a blackholed path, trimming storms,
//! reordering, duplicates, a path that comes back, a peer that disappears. Every scenario
//! checks the bytes in the destination region, the completions, and the counters that say
//! how the engine got there.

mod common;

use common::{ConnOpts, NetBuilder, PathSpec, connect, drain_cq, pattern, region, write_and_check};
use mrc_transport::cc::{CcProfile, NsccConfig};
use mrc_transport::ev::EvState;
use mrc_transport::stats::DropReason;
use mrc_transport::verbs::{RtsAttr, SendOpcode, SendWr, Sge, WcStatus};
use mrc_transport::{Duration, Event, Instant};

fn net(planes: usize, paths: usize, spec: PathSpec, seed: u64) -> common::Net {
    NetBuilder {
        planes,
        paths_per_plane: paths,
        spec,
        seed,
        ..NetBuilder::default()
    }
    .build()
}

#[test]
fn one_qp_sprays_evenly_over_every_plane_and_path() {
    let mut n = net(4, 8, PathSpec::default(), 1);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 8 << 20, Some(1), 1);
    let sent: Vec<u64> = (0..4)
        .map(|p| n.ep(0).plane_stats(p).unwrap().packets_sent)
        .collect();
    let total: u64 = sent.iter().sum();
    assert_eq!(total, 2048, "8 MiB in 4 KiB packets, none resent: {sent:?}");
    for s in &sent {
        assert_eq!(*s, 512, "planes get exactly equal shares: {sent:?}");
    }
    let evs = n.ep(0).ev_stats(c.qp_a);
    let used: Vec<u64> = evs
        .iter()
        .map(|e| e.stats.packets)
        .filter(|&p| p > 0)
        .collect();
    assert_eq!(
        used.len(),
        32,
        "every path of the small plan carries traffic"
    );
    let (lo, hi) = (used.iter().min().unwrap(), used.iter().max().unwrap());
    assert!(hi - lo <= 4, "per-EV load is even: {lo}..{hi}");
}

#[test]
fn messages_from_1_byte_to_64_mib_over_8_paths() {
    let mut n = net(2, 4, PathSpec::default(), 2);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    for (i, len) in [1usize, 100, 4096, 65_537, 1 << 20, 64 << 20]
        .into_iter()
        .enumerate()
    {
        write_and_check(
            &mut n,
            &c,
            len,
            (i % 2 == 0).then_some(i as u32),
            10 + i as u64,
        );
    }
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(s.retransmits.total(), 0);
    assert_eq!(s.messages_completed, 6);
}

fn lossy(loss: f64, seed: u64) {
    let spec = PathSpec {
        loss,
        ..PathSpec::default()
    };
    let mut n = net(2, 8, spec, seed);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 16 << 20, Some(7), seed);
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    let lost = n.stats().lost;
    assert!(lost > 0);
    assert!(
        s.retransmits.total() >= lost / 2,
        "losses are repaired by retransmission ({} for {lost} lost frames)",
        s.retransmits.total()
    );
    assert_eq!(s.messages_completed, 1);
    assert_eq!(
        n.ep(0).query_qp(c.qp_a).unwrap().state,
        mrc_transport::verbs::QpState::Rts
    );
}

#[test]
fn one_percent_random_loss_on_every_path() {
    lossy(0.01, 3);
}

#[test]
fn ten_percent_random_loss_on_every_path() {
    lossy(0.10, 4);
}

#[test]
fn a_path_that_blackholes_mid_transfer_is_retired_and_only_its_packets_are_resent() {
    let mut n = net(2, 4, PathSpec::default(), 5);
    // Plane 1, path 2 dies 50 µs in and never comes back.
    n.path_down(1, 2, Instant(50_000), Instant::MAX);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 32 << 20, Some(9), 5);
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    let probes = n.ep(0).qp_stats(c.qp_a).unwrap().probes_sent;
    // What the dead path swallowed on the way to b: data, and the probes that test it.
    let holed = n.swallowed_forward(1, 2) - probes;
    assert!(holed > 0, "the path carried traffic when it died");
    let resent = s.retransmits.total();
    assert!(
        resent >= holed && resent <= holed + 8,
        "only what the dead path swallowed is resent: {resent} for {holed} ({:?})",
        s.retransmits
    );
    // The EV on the dead path is retired; everything else is in service.
    for e in n.ep(0).ev_stats(c.qp_a) {
        let dead = e.plane == 1 && e.path.unwrap().outer_da.segments()[3] == 2;
        if dead {
            assert_eq!(e.state, EvState::AssumedBad, "EV {} on the dead path", e.id);
        } else {
            assert_ne!(
                e.state,
                EvState::AssumedBad,
                "EV {} on plane {}",
                e.id,
                e.plane
            );
        }
    }
    assert!(n.ep(0).plane_stats(1).unwrap().evs_retired >= 1);
}

#[test]
fn a_path_that_comes_back_is_probed_back_into_service() {
    let mut n = net(2, 4, PathSpec::default(), 6);
    n.path_down(0, 1, Instant(20_000), Instant(3_000_000));
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 4 << 20, None, 6);
    let retired: Vec<u16> = n
        .ep(0)
        .ev_stats(c.qp_a)
        .iter()
        .filter(|e| e.state == EvState::AssumedBad)
        .map(|e| e.id)
        .collect();
    assert!(!retired.is_empty(), "the outage retired its EV");
    // Keep the QP busy past the repair so probes run, then check every EV is back.
    n.run_for(Duration::from_millis(30));
    for e in n.ep(0).ev_stats(c.qp_a) {
        assert_eq!(e.state, EvState::Good, "EV {} is back", e.id);
        if retired.contains(&e.id) {
            assert!(
                e.stats.probes_ok >= 3,
                "three probes in a row brought EV {} back",
                e.id
            );
        }
    }
    let events = n.events(0);
    assert!(events.iter().any(|e| matches!(
        e,
        Event::EvState {
            to: EvState::Good,
            ..
        }
    )));
    write_and_check(&mut n, &c, 1 << 20, Some(3), 7);
}

#[test]
fn trimming_storms_are_congestion_not_failure() {
    // Slow, shallow paths that trim: a window far above their capacity trims a lot.
    let spec = PathSpec {
        rate_bps: 10_000_000_000,
        queue_bytes: 16 * 1024,
        trim: true,
        ..PathSpec::default()
    };
    let mut n = NetBuilder {
        planes: 2,
        paths_per_plane: 2,
        spec,
        seed: 8,
        tweak: |cfg| cfg.cc_profiles = vec![CcProfile::Nscc(NsccConfig::default())],
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 8 << 20, Some(5), 8);
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    let r = n.ep(1).qp_stats(c.qp_b).unwrap();
    assert!(
        n.stats().trimmed > 100,
        "a storm: {} trims",
        n.stats().trimmed
    );
    assert_eq!(
        r.trimmed_received,
        n.stats().trimmed,
        "every trimmed header arrives"
    );
    let stale = n.ep(0).stats().drops.get(DropReason::Stale);
    assert_eq!(
        s.nacks_received.trimmed + stale,
        r.nacks_sent.trimmed,
        "every NACK arrives; the stale ones name packets whose original got through"
    );
    assert!(
        stale <= s.retransmits.inferred,
        "only spurious retransmissions go stale"
    );
    assert_eq!(
        s.retransmits.trim, s.nacks_received.trimmed,
        "and is resent at once"
    );
    assert_eq!(s.timeouts, 0, "no trimmed packet waits for a timer");
    for e in n.ep(0).ev_stats(c.qp_a) {
        assert_ne!(
            e.state,
            EvState::AssumedBad,
            "trims never retire EV {}",
            e.id
        );
    }
}

#[test]
fn heavy_reordering_and_duplicates() {
    let spec = PathSpec {
        jitter: Duration::from_micros(30),
        dup: 0.05,
        ..PathSpec::default()
    };
    let mut n = net(2, 4, spec, 9);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    for i in 0..4 {
        write_and_check(&mut n, &c, 2 << 20, Some(i), 20 + u64::from(i));
    }
    let r = n.ep(1).qp_stats(c.qp_b).unwrap();
    assert!(
        n.stats().reordered > 100,
        "the paths reordered: {:?}",
        n.stats()
    );
    let dup = n.duplicated_forward();
    assert!(dup > 0);
    assert!(
        r.duplicates >= dup,
        "every copy is recognised: {} of {dup} data copies",
        r.duplicates
    );
    assert_eq!(r.imm_delivered, 4);
}

#[test]
fn writes_with_immediate_complete_in_posting_order_whatever_the_arrival_order() {
    // Sixteen Write-with-Immediates of very different sizes posted at once over jittery
    // paths: small late messages overtake big early ones on the wire, yet the receive
    // completions come in posting order (brief §3.8: MSN order), each with its immediate, its
    // length, and its bytes in place.
    let spec = PathSpec {
        jitter: Duration::from_micros(40),
        ..PathSpec::default()
    };
    let mut n = net(2, 4, spec, 12);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let sizes: Vec<usize> = (0..16)
        .map(|i| [1, 300_000, 17, 65_536][i % 4] + i)
        .collect();
    let slot = 512 << 10;
    let src = region(&mut n, 0, c.pd_a, 0x100_0000, 16 * slot, pattern(5));
    let dst = region(&mut n, 1, c.pd_b, 0x800_0000, 16 * slot, |_| 0xee);
    for i in 0..16u64 {
        n.ep(1)
            .post_recv(c.qp_b, &mrc_transport::verbs::RecvWr { wr_id: 100 + i })
            .unwrap();
    }
    for (i, &len) in sizes.iter().enumerate() {
        let off = (i * slot) as u64;
        let sge = [Sge {
            addr: 0x100_0000 + off,
            length: len as u32,
            lkey: src.lkey,
        }];
        n.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: i as u64,
                    opcode: SendOpcode::WriteWithImm(0xab00 + i as u32),
                    sg_list: &sge,
                    remote_addr: 0x800_0000 + off,
                    rkey: dst.rkey,
                    signaled: true,
                },
            )
            .unwrap();
    }
    let (mut sends, mut recvs) = (Vec::new(), Vec::new());
    n.run_until(Duration::from_secs(10), |n| {
        sends.extend(drain_cq(n, 0, c.cq_a));
        recvs.extend(drain_cq(n, 1, c.cq_b));
        sends.len() == 16 && recvs.len() == 16
    });
    assert!(
        n.stats().reordered > 50,
        "the paths reordered: {:?}",
        n.stats()
    );
    let imms: Vec<Option<u32>> = recvs.iter().map(|w| w.imm_data).collect();
    let want: Vec<Option<u32>> = (0..16).map(|i| Some(0xab00 + i)).collect();
    assert_eq!(imms, want, "receive completions in posting order");
    for (i, w) in recvs.iter().enumerate() {
        assert_eq!(w.status, WcStatus::Success);
        assert_eq!(w.wr_id, 100 + i as u64, "receive buffers consumed in order");
        assert_eq!(w.byte_len, sizes[i] as u32);
    }
    assert!(sends.iter().all(|w| w.status == WcStatus::Success));
    let got = n.ep(1).mr_slice(dst.lkey).unwrap();
    let want = pattern(5);
    for (i, &len) in sizes.iter().enumerate() {
        let off = i * slot;
        assert!(
            (0..len).all(|k| got[off + k] == want(off + k)),
            "message {i} in place"
        );
        assert!(
            got[off + len..off + slot].iter().all(|&b| b == 0xee),
            "message {i} wrote past its end"
        );
    }
}

#[test]
fn a_peer_that_disappears_exhausts_the_retry_budget_and_flushes() {
    let mut n = net(2, 2, PathSpec::default(), 10);
    let opts = ConnOpts {
        rts: |a| RtsAttr {
            timeout: 10, // ~1 ms
            retry_linear: 2,
            retry_exp: 2,
            ..a
        },
        ..ConnOpts::default()
    };
    let c = connect(&mut n, 0, 1, opts);
    write_and_check(&mut n, &c, 64 << 10, None, 11);
    // Every path dies.
    let now = n.now();
    for plane in 0..2 {
        for path in 0..2 {
            n.path_down(plane, path, now, Instant::MAX);
        }
    }
    let src = region(&mut n, 0, c.pd_a, 0x10_0000, 1 << 20, pattern(1));
    let dst = region(&mut n, 1, c.pd_b, 0x20_0000, 1 << 20, |_| 0);
    for id in 0..3u64 {
        let sge = [Sge {
            addr: 0x10_0000 + id * 1000,
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
                    signaled: true,
                },
            )
            .unwrap();
    }
    let mut wcs = Vec::new();
    let started = n.now();
    n.run_until(Duration::from_secs(5), |n| {
        wcs.extend(drain_cq(n, 0, c.cq_a));
        wcs.len() == 3
    });
    let status: Vec<WcStatus> = wcs.iter().map(|w| w.status).collect();
    assert_eq!(
        status,
        [
            WcStatus::RetryExceeded,
            WcStatus::WrFlushError,
            WcStatus::WrFlushError
        ]
    );
    assert_eq!(wcs.iter().map(|w| w.wr_id).collect::<Vec<_>>(), [0, 1, 2]);
    // linear 2 × 1.05 ms, then 2.1 + 4.2 ms: the budget is spent after ~8.4 ms, not before.
    let took = n.now() - started;
    assert!(took >= Duration::from_millis(8), "gave up after {took}");
    assert_eq!(
        n.ep(0).query_qp(c.qp_a).unwrap().state,
        mrc_transport::verbs::QpState::Error
    );
    let mut fatal = false;
    for e in n.events(0) {
        fatal |= matches!(
            e,
            Event::QpFatal {
                status: WcStatus::RetryExceeded,
                ..
            }
        );
    }
    assert!(fatal);
    assert!(n.ep(1).mr_slice(dst.lkey).unwrap().iter().all(|&b| b == 0));
}

#[test]
fn denied_evs_are_never_used_nor_probed_until_allowed() {
    let mut n = net(2, 4, PathSpec::default(), 12);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let denied: Vec<u16> = n
        .ep(0)
        .ev_stats(c.qp_a)
        .iter()
        .take(3)
        .map(|e| e.id)
        .collect();
    for &ev in &denied {
        n.ep(0).deny_ev(c.qp_a, ev).unwrap();
    }
    assert!(n.ep(0).deny_ev(c.qp_a, 999).is_err());
    write_and_check(&mut n, &c, 4 << 20, None, 12);
    n.run_for(Duration::from_millis(5));
    for e in n.ep(0).ev_stats(c.qp_a) {
        if denied.contains(&e.id) {
            assert_eq!(e.state, EvState::Denied);
            assert_eq!(
                (e.stats.packets, e.stats.probes_sent),
                (0, 0),
                "EV {}",
                e.id
            );
        } else {
            assert_eq!(e.state, EvState::Good);
        }
    }
    let events = n.events(0);
    let to_denied = events
        .iter()
        .filter(|e| {
            matches!(
                e,
                Event::EvState {
                    to: EvState::Denied,
                    ..
                }
            )
        })
        .count();
    assert_eq!(to_denied, 3);
    for &ev in &denied {
        n.ep(0).allow_ev(c.qp_a, ev).unwrap();
    }
    assert!(
        n.ep(0)
            .ev_stats(c.qp_a)
            .iter()
            .all(|e| e.state == EvState::Good)
    );
}

#[test]
fn same_seed_same_run_down_to_every_event() {
    let run = |seed: u64| {
        let spec = PathSpec {
            loss: 0.02,
            jitter: Duration::from_micros(5),
            dup: 0.01,
            ..PathSpec::default()
        };
        let mut n = net(2, 4, spec, seed);
        let c = connect(&mut n, 0, 1, ConnOpts::default());
        write_and_check(&mut n, &c, 2 << 20, Some(1), seed);
        let s = n.ep(0).qp_stats(c.qp_a).unwrap();
        (n.h.digest(), n.now(), s)
    };
    let (a, b, c) = (run(5), run(5), run(6));
    assert_eq!(a, b, "same seed, same inputs: same run");
    assert_ne!(a.0, c.0, "another seed takes other paths and losses");
}

#[test]
fn every_path_that_carries_data_measures_its_own_rtt() {
    // Paths of different lengths (forward 3, 6, 9, 12 µs; 2 µs back), a 4 MiB Write sprayed
    // over all 8: SACKs name one packet each, but every path they acknowledge packets of must
    // learn its own RTT (brief §3.6, §3.7: it floors that path's loss inference and timeout).
    let mut n = net(2, 4, PathSpec::default(), 21);
    for plane in 0..2 {
        for path in 0..4 {
            n.set_forward_latency(plane, path, Duration::from_micros(3 * (path as u64 + 1)));
        }
    }
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 4 << 20, None, 21);
    let evs = n.ep(0).ev_stats(c.qp_a);
    let mut by_path = [[0u64; 4]; 2];
    for e in evs.iter().filter(|e| e.stats.packets > 0) {
        let path = usize::from(e.path.unwrap().outer_da.segments()[3]);
        let rtt_ns = (3 * (path as u64 + 1) + 2) * 1000;
        assert!(
            e.stats.rtt_samples * 8 >= e.stats.packets,
            "EV {} (plane {} path {path}) carried {} packets, {} RTT samples",
            e.id,
            e.plane,
            e.stats.packets,
            e.stats.rtt_samples
        );
        assert!(
            e.stats.srtt_ns >= rtt_ns && e.stats.srtt_ns < rtt_ns + 3000,
            "EV {} on path {path} (round trip {rtt_ns} ns): srtt {} ns",
            e.id,
            e.stats.srtt_ns
        );
        by_path[usize::from(e.plane)][path] = e.stats.srtt_ns;
    }
    for plane in by_path {
        assert!(
            plane.windows(2).all(|w| w[0] < w[1]),
            "longer paths, longer RTTs: {plane:?}"
        );
    }
}
