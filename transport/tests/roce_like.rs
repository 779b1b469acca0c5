//! The baseline MRC replaces, on the same fabric: one path per QP, go-back-N (the responder
//! drops out-of-order packets and NAKs the expected PSN; the requester rewinds), and DCQCN
//! rate cuts driven by the ECN echo. Compared with MRC on the same lossy paths.

mod common;

use common::{ConnOpts, NetBuilder, PathSpec, connect, write_and_check};
use mrc_transport::cc::{CcProfile, DcqcnConfig};
use mrc_transport::verbs::{InitAttr, TransportMode};

fn roce_opts() -> ConnOpts {
    ConnOpts {
        init: InitAttr {
            mode: TransportMode::RoceLike,
            cc_profile: 1,
            ev_profile: 0,
        },
        ..ConnOpts::default()
    }
}

fn with_dcqcn(cfg: &mut mrc_transport::EndpointConfig) {
    cfg.cc_profiles
        .push(CcProfile::Dcqcn(DcqcnConfig::default()));
}

#[test]
fn one_path_and_go_back_n_recover_random_loss() {
    let spec = PathSpec {
        loss: 0.005,
        dup: 0.005,
        ..PathSpec::default()
    };
    let mut n = NetBuilder {
        planes: 2,
        paths_per_plane: 4,
        spec,
        seed: 1,
        tweak: with_dcqcn,
        ..NetBuilder::default()
    }
    .build();
    let c = connect(&mut n, 0, 1, roce_opts());
    write_and_check(&mut n, &c, 4 << 20, Some(1), 1);
    let used: Vec<_> = n
        .ep(0)
        .ev_stats(c.qp_a)
        .into_iter()
        .filter(|e| e.stats.packets > 0)
        .collect();
    assert_eq!(used.len(), 1, "a RoCE QP rides one path");
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    let r = n.ep(1).qp_stats(c.qp_b).unwrap();
    assert!(n.stats().lost > 0);
    assert!(r.out_of_sequence > 0, "packets after a hole are dropped");
    assert!(
        r.nacks_sent.out_of_window > 0,
        "and the expected PSN is NAKed"
    );
    assert!(s.retransmits.rewind > 0);
    assert_eq!(
        s.retransmits.inferred, 0,
        "no selective repair in this mode"
    );
    // Each packet is placed once, whatever the resends and the fabric's copies: as many as
    // were sent the first time, every byte.
    assert_eq!(r.data_packets_received, s.data_packets_sent, "{r:?}");
    assert_eq!(r.data_bytes_placed, 4 << 20);
    // A copy of a placed packet is a duplicate, counted as such and not placed again; every
    // data frame that reached the responder is counted once: placed, dropped out of
    // sequence, or a duplicate.
    assert!(n.duplicated_forward() > 0 && r.duplicates > 0, "{r:?}");
    assert_eq!(
        r.data_packets_received + r.out_of_sequence + r.duplicates,
        n.delivered_forward(),
        "{r:?}"
    );
}

#[test]
fn mrc_resends_what_was_lost_roce_like_resends_whole_windows() {
    let spec = PathSpec {
        loss: 0.01,
        rate_bps: 100_000_000_000,
        ..PathSpec::default()
    };
    let mut resent = Vec::new();
    for roce in [false, true] {
        let mut n = NetBuilder {
            planes: 1,
            paths_per_plane: 4,
            spec: spec.clone(),
            seed: 7,
            tweak: with_dcqcn,
            ..NetBuilder::default()
        }
        .build();
        let opts = if roce {
            roce_opts()
        } else {
            ConnOpts::default()
        };
        let c = connect(&mut n, 0, 1, opts);
        write_and_check(&mut n, &c, 8 << 20, None, 2);
        let s = n.ep(0).qp_stats(c.qp_a).unwrap();
        let lost = n.stats().lost;
        resent.push((s.retransmits.total(), lost));
    }
    let (mrc, roce) = (resent[0], resent[1]);
    assert!(
        mrc.0 <= mrc.1 + mrc.1 / 2 + 4,
        "MRC resends about what was lost: {mrc:?}"
    );
    assert!(
        roce.0 > 5 * roce.1,
        "go-back-N resends far more than it lost: {roce:?}"
    );
}

#[test]
fn ecn_echoes_drive_dcqcn_rate_cuts_that_keep_the_queue_short() {
    // One slow path, overdriven tenfold at start: with ECN marking, the echoes reach DCQCN,
    // which cuts the rate and the queue (hence the RTT) stays short; without marks it grows.
    let mut srtt = Vec::new();
    for ecn_bytes in [8 * 1024, 0] {
        let spec = PathSpec {
            rate_bps: 10_000_000_000,
            ecn_bytes,
            ..PathSpec::default()
        };
        let mut n = NetBuilder {
            planes: 1,
            paths_per_plane: 1,
            spec,
            seed: 3,
            tweak: with_dcqcn,
            ..NetBuilder::default()
        }
        .build();
        let c = connect(&mut n, 0, 1, roce_opts());
        write_and_check(&mut n, &c, 4 << 20, None, 3);
        let s = n.ep(0).qp_stats(c.qp_a).unwrap();
        let r = n.ep(1).qp_stats(c.qp_b).unwrap();
        assert_eq!(s.ecn_echoes, r.ecn_marked_received, "every mark is echoed");
        assert_eq!(r.ecn_marked_received > 0, ecn_bytes > 0);
        assert_eq!(n.ep(0).cc_state(c.qp_a).unwrap().name, "dcqcn");
        srtt.push(s.srtt_ns);
    }
    assert!(srtt[0] * 4 < srtt[1], "cuts keep the RTT short: {srtt:?}");
}
