//! ECMP mode (fabrics without SRv6, brief §8.2): the EV is a UDP source port and flow label
//! the switches hash, so the sender cannot see paths. Health comes from real traffic: clean
//! EVs are recycled, an EV with untrimmed loss is retired at once and probed back, and a burst
//! of failures over many EVs is read as a remap of the fabric's hashing.

mod common;

use common::{ConnOpts, NetBuilder, PathSpec, connect, write_and_check};
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
    for (plane, paths) in n.path_writes.iter().enumerate() {
        let used = paths.iter().filter(|&&p| p > 0).count();
        assert!(
            used >= 6,
            "plane {plane}: only {used} of 8 paths carried data: {paths:?}"
        );
    }
    let s = n.eps[0].qp_stats(c.qp_a).unwrap();
    assert_eq!(s.retransmits.total(), 0);
}

#[test]
fn an_ev_with_untrimmed_loss_is_retired_at_once_and_the_rest_carry_on() {
    let mut n = ecmp(2, 8, 2);
    n.specs[1][3].down = vec![(Instant(40_000), Instant::MAX)];
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 16 << 20, Some(2), 2);
    let s = n.eps[0].qp_stats(c.qp_a).unwrap();
    let holed = n.stats.blackholed_data;
    assert!(holed > 0);
    assert!(
        s.retransmits.total() >= holed && s.retransmits.total() <= holed + 8,
        "{:?} for {holed} lost",
        s.retransmits
    );
    assert_eq!(s.remaps, 0, "one dead path is not a remap");
    let retired: Vec<_> = n.eps[0]
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
        n.specs[0][p].down = vec![(Instant(60_000), Instant(160_000))];
    }
    n.remap_at = Some(Instant(160_000));
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    let before: Vec<u32> = n.eps[0]
        .ev_stats(c.qp_a)
        .iter()
        .map(|e| e.entropy)
        .collect();
    write_and_check(&mut n, &c, 32 << 20, Some(3), 3);
    let s = n.eps[0].qp_stats(c.qp_a).unwrap();
    assert!(s.remaps >= 1, "{s:?}");
    let events: Vec<Event> = std::iter::from_fn(|| n.eps[0].poll_event()).collect();
    assert!(events.iter().any(|e| matches!(e, Event::EcmpRemap { .. })));
    let after = n.eps[0].ev_stats(c.qp_a);
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
    let used = n.path_writes[0].iter().filter(|&&p| p > 0).count();
    assert_eq!(used, 8);
}

#[test]
fn a_recovered_ecmp_path_is_probed_back() {
    let mut n = ecmp(1, 4, 4);
    n.specs[0][2].down = vec![(Instant(20_000), Instant(1_000_000))];
    let c = connect(&mut n, 0, 1, ConnOpts::default());
    write_and_check(&mut n, &c, 4 << 20, None, 4);
    assert!(
        n.eps[0]
            .ev_stats(c.qp_a)
            .iter()
            .any(|e| e.state == EvState::AssumedBad)
    );
    n.run_for(Duration::from_millis(30));
    let evs = n.eps[0].ev_stats(c.qp_a);
    assert!(evs.iter().all(|e| e.state == EvState::Good), "{evs:?}");
    assert!(n.eps[0].qp_stats(c.qp_a).unwrap().probes_ok >= 3);
}
