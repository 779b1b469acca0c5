//! The fault soak (mrc_sim::soak): links that duplicate, corrupt and reorder frames deliver
//! every byte; a short campaign of random seeds passes with every fault kind injected; a seed
//! replays identically.

use mrc_sim::soak::{self, Campaign};
use mrc_sim::traffic::permutation;
use mrc_sim::workload::{Workload, WorkloadOpts};
use mrc_sim::{Fault, FaultKind, Impairment, RunLimit, Sim, SimConfig, SimTime};
use mrc_transport::stats::DropReason;

#[test]
fn links_that_duplicate_corrupt_and_reorder_still_deliver_every_byte() {
    let plan = soak::soak_plan();
    let hosts = plan.host_count();
    let mut s = Sim::new(plan, SimConfig::default()).unwrap();
    let msgs = permutation(hosts, 256 << 10, SimTime::ZERO, 5);
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    for imp in [
        Impairment::Duplicate(0.02),
        Impairment::Corrupt(0.01),
        Impairment::Reorder {
            prob: 0.1,
            max_delay_ps: 3_000_000,
        },
    ] {
        s.schedule(Fault::at_us(0, FaultKind::Impair(None, imp)));
    }
    let run = s.run(RunLimit::until(SimTime(100_000_000_000)), &mut |_| {});
    assert!(run.apps_done, "{run}");
    let v = w.verify().unwrap();
    assert_eq!(v.bytes, u64::from(hosts) * (256 << 10));
    let c = s.fabric_counters();
    let sum = |f: fn(&mrc_sim::port::PortStats) -> u64| f(&c.switch_ports) + f(&c.host_ports);
    assert!(sum(|p| p.duplicated) > 0);
    assert!(sum(|p| p.corrupted) > 0);
    assert!(sum(|p| p.reordered) > 0);
    let refused: u64 = (0..hosts)
        .map(|h| s.endpoint(h).stats().drops.get(DropReason::BadIcrc))
        .sum();
    assert!(refused > 0, "corrupted frames are refused on their ICRC");
    let dups: u64 = (0..hosts)
        .map(|h| s.endpoint(h).stats().drops.get(DropReason::Duplicate))
        .sum();
    assert!(dups > 0, "duplicates are recognised");
}

#[test]
fn a_short_campaign_passes_with_every_fault_kind_injected() {
    let mut seen = Vec::new();
    let c: Campaign = soak::campaign(1, &mut |run| run < 8, &mut |r| seen.push(r.clone()));
    for r in &seen {
        assert!(
            r.outcome.is_ok(),
            "seed {} failed: {:?} (replay: mrc-soak --replay {})",
            r.seed,
            r.outcome,
            r.seed
        );
        assert!(r.bytes_verified > 0);
    }
    assert_eq!(c.seeds_run, 8);
    assert_eq!(c.seeds_failed, 0);
    assert!(c.first_failure.is_none());
    let f = c.faults;
    for (what, n) in [
        ("link downs", f.link_downs),
        ("switch stops", f.switch_stops),
        ("port downs", f.port_downs),
        ("frames lost", f.frames_lost),
        ("frames duplicated", f.frames_duplicated),
        ("frames corrupted", f.frames_corrupted),
        ("frames reordered", f.frames_reordered),
        (
            "frames on down links",
            f.frames_down_dropped + f.frames_dead_switch,
        ),
    ] {
        assert!(n > 0, "{what}: none injected in 8 seeds");
    }
    assert_eq!(
        c.bytes_verified,
        seen.iter().map(|r| r.bytes_verified).sum::<u64>()
    );
}

#[test]
fn a_seed_replays_identically() {
    let a = soak::run_seed(3);
    let b = soak::run_seed(3);
    assert_eq!((a.events, a.end, a.faults), (b.events, b.end, b.faults));
    let other = soak::run_seed(4);
    assert_ne!(a.events, other.events);
    let p = soak::draw(&soak::soak_plan(), 3);
    assert_eq!(p.messages.len(), a.messages);
}

/// Seeds a longer campaign once failed, replayed for good (docs/security.md "Findings").
#[test]
fn seeds_that_once_failed_pass() {
    // 240: host 2's port to plane 0 flapped and its T0 stopped; the PORT_STATUS_UPDATE that
    // said the port was back was lost, and the only probes due were on that plane, which held
    // back those on the other: the requester stalled with five of six EVs retired.
    let seeds: &[u64] = &[240];
    for &seed in seeds {
        let r = soak::run_seed(seed);
        assert!(r.outcome.is_ok(), "seed {seed}: {:?}", r.outcome);
    }
}
