//! Every byte of every message workload (permutation, all-to-all and incast at once; the ring
//! all-reduce is checked across a link failure in `workloads.rs`) arrives intact under every
//! fault type: a link that dies mid-transfer, a flapping link, random loss everywhere, a gray
//! link, a switch that stops forwarding, a host port that goes down (and its peers are told).
//! Each test also checks that its fault acted where it was aimed (that link's or switch's drop
//! counters, the EVs of its plane), against a run without faults that drops and retires nothing.

mod common;

use common::{SMALL16, limit, sim, us};
use mrc_sim::traffic::{Message, all_to_all, incast, permutation};
use mrc_sim::workload::{Workload, WorkloadOpts};
use mrc_sim::{Fault, FaultKind, Sim, SimConfig, SimTime};
use mrc_srv6::plan::{HostId, NodeId, SwitchId};
use mrc_transport::stats::PlaneStats;

fn t0(plane: u8, rack: u16) -> NodeId {
    NodeId::Switch(SwitchId::t0(plane, rack))
}

fn t1(plane: u8, spine: u16) -> NodeId {
    NodeId::Switch(SwitchId::t1(plane, spine))
}

/// A permutation of 1 MiB, a small all-to-all and a 7→1 incast, with `faults`, run to
/// completion and verified byte for byte.
fn survive(name: &str, faults: Vec<Fault>) -> Sim {
    survive_with(name, faults, Vec::new())
}

/// [`survive`] with `more` messages on top.
fn survive_with(name: &str, faults: Vec<Fault>, more: Vec<Message>) -> Sim {
    let mut s = sim(SMALL16, SimConfig::default());
    let mut msgs: Vec<Message> = permutation(16, 1 << 20, SimTime::ZERO, 11);
    msgs.extend(all_to_all(16, 8 * 1024, us(20)));
    msgs.extend(incast(&[1, 2, 3, 4, 6, 8, 12], 15, 256 << 10, us(30)));
    msgs.extend(more);
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    for f in faults {
        s.schedule(f);
    }
    s.run_to_completion(limit(), &mut |_| {})
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let v = w.verify().unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(v.messages, msgs.len(), "{name}");
    s
}

/// Frames the link between `a` and `b` swallowed while down, both directions.
fn down_dropped(s: &Sim, a: NodeId, b: NodeId) -> u64 {
    s.link_stats(a, b).unwrap().down_dropped + s.link_stats(b, a).unwrap().down_dropped
}

/// One plane's counters, summed over the 16 hosts' engines.
fn plane_total(s: &Sim, plane: u8) -> PlaneStats {
    let mut t = PlaneStats::default();
    for h in 0..16 {
        let p = s.endpoint(h).plane_stats(plane).unwrap();
        t.retransmits += p.retransmits;
        t.timeouts += p.timeouts;
        t.evs_retired += p.evs_retired;
        t.evs_restored += p.evs_restored;
    }
    t
}

#[test]
fn without_faults_no_link_drops_and_no_ev_is_retired() {
    // The baseline the fault tests below are read against: what they see is the fault's.
    let s = survive("no fault", vec![]);
    let c = s.fabric_counters();
    assert_eq!(c.switch_ports.down_dropped + c.lost_in_flight, 0);
    assert_eq!(c.switch_ports.lost, 0);
    for plane in 0..2 {
        let p = plane_total(&s, plane);
        assert_eq!((p.evs_retired, p.timeouts), (0, 0), "plane {plane}: {p:?}");
    }
}

#[test]
fn a_link_that_dies_mid_transfer() {
    let (a, b) = (t0(0, 0), t1(0, 1));
    let s = survive(
        "link down",
        vec![Fault::at_us(10, FaultKind::LinkDown(a, b))],
    );
    assert!(down_dropped(&s, a, b) > 0, "the failure cost packets");
    let p = plane_total(&s, 0);
    assert!(
        p.evs_retired > 0,
        "EVs through the dead link retired: {p:?}"
    );
}

#[test]
fn a_flapping_link() {
    let (a, b) = (t0(1, 2), t1(1, 0));
    let flaps = Fault::flap(a, b, us(5), 30_000_000, 10_000_000, 6);
    // A second permutation long after the last flap (185 µs) keeps the QPs sending, and
    // probing their retired EVs, once the link is up for good.
    let later = permutation(16, 1 << 20, us(1_000), 12);
    let s = survive_with("flap", flaps, later);
    // The flaps hit that link, both ways: frames offered to it while down were swallowed.
    let (ab, ba) = (s.link_stats(a, b).unwrap(), s.link_stats(b, a).unwrap());
    assert!(ab.down_dropped > 0 && ba.down_dropped > 0, "{ab:?} {ba:?}");
    // And the engines saw it: EVs of plane 1 retired, and brought back by probes once the
    // link was up again; packets resent (found by RACK, tail probes or timeouts).
    let p = plane_total(&s, 1);
    assert!(p.evs_retired > 0 && p.evs_restored > 0, "{p:?}");
    assert!(p.retransmits > 0, "{p:?}");
}

#[test]
fn a_flap_expanded_as_it_runs_is_the_listed_flaps() {
    let (a, b) = (t0(1, 2), t1(1, 0));
    let listed = survive(
        "listed flaps",
        Fault::flap(a, b, us(5), 30_000_000, 10_000_000, 6),
    );
    let lazy = survive(
        "lazy flap",
        vec![Fault::flapping(a, b, us(5), 30_000_000, 10_000_000, 6)],
    );
    let (l, z) = (listed.fabric_counters(), lazy.fabric_counters());
    assert!(down_dropped(&listed, a, b) > 0, "the flaps cost packets");
    assert_eq!(l, z, "the same downs and ups at the same times");
    assert_eq!(listed.now(), lazy.now());
    // Four billion flaps are one fault, whatever the count: the run ends with its flows.
    let many = survive(
        "four billion flaps",
        vec![Fault::flapping(
            a,
            b,
            us(5),
            30_000_000,
            10_000_000,
            4_000_000_000,
        )],
    );
    assert!(many.now() < SimTime(10_000_000_000), "ended with its flows");
}

#[test]
fn random_loss_on_every_link() {
    let s = survive(
        "loss 1%",
        vec![Fault::at_us(0, FaultKind::LossEverywhere(0.01))],
    );
    assert!(s.fabric_counters().switch_ports.lost > 0);
}

#[test]
fn a_gray_link_dropping_a_fifth_silently() {
    let (a, b) = (t0(0, 1), t1(0, 3));
    let s = survive(
        "gray",
        vec![Fault::at_us(0, FaultKind::LinkLoss(a, b, 0.2))],
    );
    // That link, and only it, lost frames: about a fifth of what it carried each way
    // (hundreds of frames: 0.2 ± 0.1 is more than four standard deviations).
    let mut lost = 0;
    for (x, y) in [(a, b), (b, a)] {
        let st = s.link_stats(x, y).unwrap();
        let share = st.lost as f64 / st.tx_frames as f64;
        assert!(st.tx_frames > 100, "{x} → {y} carried traffic: {st:?}");
        assert!(
            (0.1..0.3).contains(&share),
            "{x} → {y} lost {share:.3}: {st:?}"
        );
        lost += st.lost;
    }
    assert_eq!(
        s.fabric_counters().switch_ports.lost,
        lost,
        "no other link lost"
    );
    // Silent loss: the EVs through it were retired.
    let p = plane_total(&s, 0);
    assert!(p.evs_retired > 0, "{p:?}");
}

#[test]
fn a_switch_that_stops_forwarding() {
    let s = survive(
        "dead T1",
        vec![
            Fault::at_us(8, FaultKind::SwitchStop(SwitchId::t1(1, 2))),
            Fault::at_us(400, FaultKind::SwitchStart(SwitchId::t1(1, 2))),
        ],
    );
    assert!(s.fabric_counters().switches.dead_dropped > 0);
    // Mostly the dead switch's plane lost its EVs (SACKs of plane 0 may come back on plane 1,
    // so plane 0 loses a few).
    let (p0, p1) = (plane_total(&s, 0), plane_total(&s, 1));
    assert!(p1.evs_retired > 2 * p0.evs_retired, "{p0:?} {p1:?}");
}

#[test]
fn a_host_port_that_goes_down_is_reported_to_the_peers() {
    let s = survive(
        "host port down",
        vec![Fault::at_us(10, FaultKind::HostPortDown(5, 1))],
    );
    let st = s.endpoint(5).plane_stats(1).unwrap();
    assert_eq!(st.port_down_events, 1);
    let _ = HostId(5);
    let peers_told: u64 = (0..16)
        .filter(|&h| h != 5)
        .map(|h| s.endpoint(h).stats().endpoint_ops_received)
        .sum();
    assert!(peers_told > 0, "a port status update reached the peers");
}
