//! ECMP mode (fabrics without SRv6, brief §8.2): the EV is a UDP source port and flow label
//! the switches hash, so the sender cannot see paths. Health comes from real traffic: clean
//! EVs are recycled, an EV with untrimmed loss is retired at once and probed back, and a burst
//! of failures over many EVs is read as a remap of the fabric's hashing.

mod common;

use common::{ConnOpts, NetBuilder, PathSpec, connect, finish_write, start_write, write_and_check};
use mrc_transport::ev::EvState;
use mrc_transport::{Duration, Event, Instant};

fn ecmp(planes: usize, paths: usize, seed: u64) -> common::Net {
    NetBuilder {
        planes,
        paths_per_plane: paths,
        srv6: false,
        seed,
        spec: PathSpec::default(),
        ..NetBuilder::default()
    }
    .build()
}

#[test]
fn hashed_evs_spread_one_qp_over_the_fabric() {
    let mut n = ecmp(2, 8, 1);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 16 << 20, Some(1), 1);
    // Every active EV carries traffic (16 per plane)...
    let evs = n.ep(0).ev_stats(c.qp_a);
    let active = evs.iter().filter(|e| e.stats.packets > 0).count();
    assert!(active >= 32, "{active} EVs carried data");
    // ...and the switches' hash spreads 16 random EVs over most of the 8 paths of each plane.
    for plane in 0..2 {
        let paths = n.forward_frames(plane);
        let used = paths.iter().filter(|&&p| p > 0).count();
        assert!(
            used >= 5,
            "plane {plane}: only {used} of 8 paths carried data: {paths:?}"
        );
    }
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    assert_eq!(s.retransmits.total(), 0);
}

#[test]
fn an_ev_with_untrimmed_loss_is_retired_at_once_and_the_rest_carry_on() {
    let mut n = ecmp(2, 8, 2);
    n.path_down(1, 3, Instant(40_000), Instant::MAX);
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 16 << 20, Some(2), 2);
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    let probes = n.ep(0).qp_stats(c.qp_a).unwrap().probes_sent;
    let holed = n.swallowed_forward(1, 3) - probes;
    assert!(holed > 0);
    assert!(
        s.retransmits.total() >= holed && s.retransmits.total() <= holed + 8,
        "{:?} for {holed} lost",
        s.retransmits
    );
    assert_eq!(s.remaps, 0, "one dead path is not a remap");
    let retired: Vec<_> = n
        .ep(0)
        .ev_stats(c.qp_a)
        .into_iter()
        .filter(|e| e.state == EvState::AssumedBad)
        .collect();
    assert!(
        !retired.is_empty(),
        "the EVs hashing onto the dead path are retired"
    );
    assert!(retired.iter().all(|e| e.plane == 1));
    assert!(retired.len() <= 8, "only those: {}", retired.len());
}

#[test]
fn a_burst_of_failures_is_read_as_a_remap_and_redraws_the_ev_set() {
    let mut n = ecmp(1, 8, 3);
    // A switch reboots: half the paths drop everything for 100 µs, then the fabric's hashing
    // comes back different.
    for p in 0..4 {
        n.path_down(0, p, Instant(60_000), Instant(160_000));
    }
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let before: Vec<u32> = n.ep(0).ev_stats(c.qp_a).iter().map(|e| e.entropy).collect();
    let job = start_write(&mut n, &c, 32 << 20, Some(3), 3);
    n.run_until(Duration::from_millis(10), |n| n.now() >= Instant(160_000));
    n.remap();
    finish_write(&mut n, &c, job);
    let s = n.ep(0).qp_stats(c.qp_a).unwrap();
    assert!(s.remaps >= 1, "{s:?}");
    let events: Vec<Event> = n.events(0);
    assert!(events.iter().any(|e| matches!(e, Event::EcmpRemap { .. })));
    let after = n.ep(0).ev_stats(c.qp_a);
    let redrawn = after
        .iter()
        .zip(&before)
        .filter(|(e, b)| e.entropy != **b)
        .count();
    assert!(redrawn >= after.len() - 1, "the whole set was drawn again");
    let retired = after
        .iter()
        .filter(|e| e.state == EvState::AssumedBad)
        .count();
    assert!(retired <= 4, "not retired one by one: {retired} retired");
    // Traffic flows on the new mapping over (nearly) every path again.
    let used = n.forward_frames(0).iter().filter(|&&p| p > 0).count();
    assert_eq!(used, 8);
}

#[test]
fn a_recovered_ecmp_path_is_probed_back() {
    let mut n = ecmp(1, 4, 4);
    n.path_down(0, 2, Instant(20_000), Instant(1_000_000));
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 4 << 20, None, 4);
    assert!(
        n.ep(0)
            .ev_stats(c.qp_a)
            .iter()
            .any(|e| e.state == EvState::AssumedBad)
    );
    n.run_for(Duration::from_millis(30));
    let evs = n.ep(0).ev_stats(c.qp_a);
    assert!(evs.iter().all(|e| e.state == EvState::Good), "{evs:?}");
    assert!(n.ep(0).qp_stats(c.qp_a).unwrap().probes_ok >= 3);
}
