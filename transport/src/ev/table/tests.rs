use core::net::Ipv6Addr;

use super::*;
use crate::ev::SrPath;

/// `paths` paths per plane; path i of plane p has DA ::p:i.
#[derive(Debug)]
struct Grid {
    paths: usize,
}

impl PathSource for Grid {
    fn path_count(&self, _src: u32, _dst: u32, _plane: u8) -> usize {
        self.paths
    }
    fn path(&self, _src: u32, _dst: u32, plane: u8, index: usize) -> Option<SrPath> {
        (index < self.paths).then(|| SrPath {
            outer_da: Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, u16::from(plane), index as u16),
            segment: None,
        })
    }
}

fn profile(per_plane: u16, active: u16, floor: u16) -> EvProfile {
    EvProfile {
        evs_per_plane: per_plane,
        active_per_plane: active,
        floor_per_plane: floor,
        ..EvProfile::default()
    }
}

fn srv6(per_plane: u16, active: u16, floor: u16, planes: u8, paths: usize) -> EvTable {
    EvTable::srv6(
        &profile(per_plane, active, floor),
        &TimerConfig::default(),
        planes,
        &Grid { paths },
        0,
        1,
        EntropyOrder::default(),
        &mut Rng::new(5),
    )
}

const ALL: u32 = u32::MAX;
const NOW: Instant = Instant(1_000_000);

#[test]
fn a_plane_of_two_paths_retires_a_dead_one_and_probes_bring_it_back() {
    // The small interop fabric: two paths per plane, so two EVs; the default floor (2) is
    // capped at a quarter of the plane's EVs (0), so the dead path goes, the other carries on.
    let mut t = srv6(32, 16, 2, 2, 2);
    let plane0: Vec<EvId> = t.plane_range(0).collect();
    assert_eq!(plane0.len(), 2);
    assert_eq!(
        t.retire(plane0[0], NOW),
        Retire::Retired { replacement: None }
    );
    assert_eq!(t.ev(plane0[0]).state, EvState::AssumedBad);
    assert!(!t.usable(plane0[0], ALL));
    assert!(
        t.usable(plane0[1], ALL),
        "the other path of the plane carries on"
    );
    let mut now = NOW;
    for _ in 0..3 {
        now += Duration::from_millis(1);
        assert_eq!(t.probe_due(now, ALL), Some(plane0[0]));
        t.on_probe_sent(plane0[0], now);
        t.on_probe_answer(plane0[0], now + Duration::from_micros(10));
    }
    assert_eq!(t.ev(plane0[0]).state, EvState::Good);
    assert!(t.usable(plane0[0], ALL), "back in the active set");
}

#[test]
fn srv6_sets_are_equal_per_plane_distinct_and_named_by_their_entropy() {
    let t = srv6(8, 4, 1, 4, 100);
    assert_eq!(t.len(), 32);
    for p in 0..4 {
        assert_eq!(t.plane_range(p).len(), 8);
        assert_eq!(t.active_in_plane(p), 4);
        let mut das: Vec<_> = t
            .plane_range(p)
            .map(|id| t.ev(id).path.unwrap().outer_da)
            .collect();
        das.sort();
        das.dedup();
        assert_eq!(das.len(), 8, "distinct paths in plane {p}");
        for id in t.plane_range(p) {
            assert_eq!(t.ev(id).plane as usize, p);
        }
    }
    for id in 0..32 {
        assert_eq!(t.lookup(t.ev(id).entropy), Some(id));
    }
    assert_eq!(
        t.lookup(t.ev(3).entropy ^ 0x1_0000),
        None,
        "stale flow-label bits"
    );
    assert_eq!(t.lookup(40), None);
    assert_eq!(t.active().count(), 16);
}

#[test]
fn a_small_plan_gives_as_many_evs_as_paths() {
    let t = srv6(32, 16, 2, 2, 3);
    assert_eq!(t.len(), 6);
    assert_eq!(t.active_in_plane(0), 3);
}

#[test]
fn retirement_is_replaced_from_the_same_plane_until_the_floor() {
    let mut t = srv6(4, 2, 1, 2, 100);
    let plane1: Vec<EvId> = t.plane_range(1).collect();
    let active: Vec<EvId> = plane1
        .iter()
        .copied()
        .filter(|&i| t.usable(i, ALL))
        .collect();
    assert_eq!(active.len(), 2);
    let r = t.retire(active[0], NOW);
    let Retire::Retired {
        replacement: Some(b),
    } = r
    else {
        panic!("{r:?}")
    };
    assert_eq!(t.ev(b).plane, 1, "same plane");
    assert!(t.usable(b, ALL));
    assert_eq!(t.ev(active[0]).state, EvState::AssumedBad);
    assert_eq!(t.active_in_plane(1), 2);
    assert_eq!(t.retire(active[0], NOW), Retire::AlreadyOut);
    // Retire the other original and the last backup: the plane shrinks to the floor...
    let others: Vec<EvId> = plane1
        .iter()
        .copied()
        .filter(|&i| t.usable(i, ALL))
        .collect();
    assert!(matches!(t.retire(others[0], NOW), Retire::Retired { .. }));
    let left: Vec<EvId> = plane1
        .iter()
        .copied()
        .filter(|&i| t.usable(i, ALL))
        .collect();
    assert_eq!(left.len(), 2);
    assert!(matches!(
        t.retire(left[0], NOW),
        Retire::Retired { replacement: None }
    ));
    assert_eq!(t.active_in_plane(1), 1);
    // ...and no further: the last one is skipped instead.
    let last = plane1.iter().copied().find(|&i| t.usable(i, ALL)).unwrap();
    assert_eq!(t.retire(last, NOW), Retire::FloorHeld);
    assert_eq!(t.ev(last).state, EvState::Skip);
    assert_eq!(t.active_in_plane(0), 2, "other plane untouched");
    let changes: Vec<_> = std::iter::from_fn(|| t.pop_change()).collect();
    assert_eq!(changes.len(), 3);
    assert!(
        changes
            .iter()
            .all(|c| c.to == EvState::AssumedBad && c.plane == 1)
    );
}

#[test]
fn skip_lasts_for_the_rest_of_the_rotation() {
    let mut t = srv6(4, 4, 1, 1, 100);
    t.skip(2);
    assert!(!t.usable(2, ALL));
    assert_eq!(t.ev(2).state, EvState::Skip);
    t.next_round();
    assert!(t.usable(2, ALL));
    assert_eq!(t.ev(2).state, EvState::Good);
    assert!(!t.usable(2, 0b10), "plane mask");
}

#[test]
fn a_due_probe_on_a_plane_that_cannot_send_does_not_hold_back_the_others() {
    let mut t = srv6(4, 4, 0, 2, 100);
    let a = t.plane_range(0).next().unwrap();
    let b = t.plane_range(1).next().unwrap();
    t.retire(a, NOW);
    t.retire(b, NOW);
    let due = NOW + TimerConfig::default().probe_interval_min;
    assert_eq!(t.probe_due(due, ALL), Some(a), "the first retired first");
    assert_eq!(
        t.probe_due(due, 0b10),
        Some(b),
        "plane 0 cannot send: plane 1's goes"
    );
    assert_eq!(t.probe_due(due, 0b01), Some(a));
    assert_eq!(t.probe_due(due, 0), None);
}

#[test]
fn probes_bring_an_ev_back_after_consecutive_successes_and_back_off_on_failure() {
    let mut t = srv6(4, 2, 0, 1, 100);
    let id = t.active().next().unwrap();
    t.retire(id, NOW);
    let min = TimerConfig::default().probe_interval_min;
    assert_eq!(t.probe_due(NOW, ALL), None);
    assert_eq!(t.probe_deadline(min), Some(NOW + min));
    // First probe fails: the interval doubles.
    let t1 = NOW + min;
    assert_eq!(t.probe_due(t1, ALL), Some(id));
    t.on_probe_sent(id, t1);
    assert_eq!(t.probe_due(t1, ALL), None, "one probe at a time");
    assert_eq!(t.on_probe_timeouts(t1 + min, min), 1);
    assert_eq!(t.ev(id).probe.interval, min.saturating_mul(2));
    let mut now = t1 + min + min.saturating_mul(2);
    // Then three answered probes in a row restore it.
    for i in 0..3 {
        assert_eq!(t.probe_due(now, ALL), Some(id), "probe {i}");
        t.on_probe_sent(id, now);
        let back = t.on_probe_answer(id, now + Duration::from_micros(10));
        assert_eq!(back, i == 2);
        now += min + Duration::from_micros(10);
    }
    assert_eq!(t.ev(id).state, EvState::Good);
    assert_eq!(t.retired_count(), 0);
    assert_eq!(t.probe_deadline(min), None);
    let s = t.ev(id).stats;
    assert_eq!((s.probes_sent, s.probes_ok, s.probes_failed), (4, 3, 1));
    assert!(
        !t.on_probe_answer(id, now),
        "unsolicited answers are ignored"
    );
}

#[test]
fn ecmp_entropy_names_its_index_and_a_remap_draws_fresh_values() {
    let mut rng = Rng::new(9);
    let mut t = EvTable::ecmp(
        &profile(8, 4, 1),
        &TimerConfig::default(),
        2,
        EntropyOrder::default(),
        &mut rng,
    );
    let before: Vec<u32> = (0..16).map(|i| t.ev(i).entropy).collect();
    for id in 0..16 {
        assert_eq!(t.lookup(before[id as usize]), Some(id));
    }
    let a = t.active().next().unwrap();
    t.retire(a, NOW);
    t.rerandomize(&mut rng);
    assert_eq!(t.retired_count(), 0);
    assert_eq!(t.ev(a).state, EvState::Good);
    assert_eq!(t.active().count(), 8);
    let changed = (0..16)
        .filter(|&i| t.ev(i).entropy != before[i as usize])
        .count();
    assert!(changed >= 15);
    assert_eq!(t.lookup(before[3]), None, "old values are stale now");
}

#[test]
fn reverse_evs_follow_health() {
    let mut rng = Rng::new(1);
    let mut t = srv6(4, 2, 0, 2, 100);
    let r = t.reverse(1).unwrap();
    assert_eq!(t.ev(r).plane, 1);
    assert_eq!(t.reverse(1), Some(r), "stable while healthy");
    t.rotate_reverse(1, &mut rng);
    let r2 = t.reverse(1).unwrap();
    assert_ne!(r2, r);
    t.retire(r2, NOW);
    let r3 = t.reverse(1).unwrap();
    assert_ne!(r3, r2);
    assert_eq!(t.ev(r3).role, EvRole::Active);
    assert_eq!(t.reverse(7), None, "no such plane");
}

/// A SACK lost on its way back (the peer resent what it acknowledged) condemns the EV it left
/// on: control packets take the plane's next active EV, and never the condemned one while
/// another is left; when every one was condemned, they all get another chance (issue #14).
#[test]
fn a_reverse_ev_that_lost_a_sack_carries_no_more_control_packets() {
    let mut t = srv6(4, 4, 0, 1, 100);
    let first = t.reverse(0).unwrap();
    t.reverse_failed(first);
    let second = t.reverse(0).unwrap();
    assert_ne!(second, first);
    assert_eq!(t.reverse(0), Some(second), "kept while it works");
    let mut seen = vec![first, second];
    t.reverse_failed(second);
    for _ in 0..2 {
        let next = t.reverse(0).unwrap();
        assert!(!seen.contains(&next), "{next} was condemned: {seen:?}");
        t.reverse_failed(next);
        seen.push(next);
    }
    // All four condemned: the plane still answers.
    assert!(t.reverse(0).is_some());
    t.reverse_failed(EvId::MAX);
}

#[test]
fn deny_and_allow() {
    let mut t = srv6(4, 2, 0, 1, 100);
    let id = t.active().next().unwrap();
    t.deny(id);
    assert_eq!(t.ev(id).state, EvState::Denied);
    assert_eq!(t.active_in_plane(0), 2, "a backup took its place");
    assert_eq!(
        t.probe_due(Instant::MAX, ALL),
        None,
        "denied EVs are not probed"
    );
    t.allow(id);
    assert_eq!(t.ev(id).state, EvState::Good);
    assert_eq!(t.ev(id).role, EvRole::Backup);
}

/// One EV as first built: what must stay its own for the table's life.
#[derive(Debug, Clone, Copy)]
struct Identity {
    plane: u8,
    path: Option<SrPath>,
    entropy: u32,
}

/// EV `id`'s fingerprint: `id + 1` deliveries and an RTT of `(id + 1) × k` µs.
fn fingerprint(t: &mut EvTable, id: EvId, k: u64) {
    for _ in 0..=id {
        t.on_delivered(id, 1, NOW, true);
    }
    let rtt = Duration::from_micros(u64::from(id + 1) * k);
    t.take_rtt_samples(NOW + rtt, None, Duration::from_secs(1));
}

/// Every EV still carries its own route, entropy, counters and RTT, in every view of it.
fn check_identities(t: &EvTable, start: &[Identity], redrawn: bool, k_stats: u64, k_hot: u64) {
    for (id, want) in (0..t.len() as u16).zip(start) {
        let e = t.ev(id);
        let n = u64::from(id + 1);
        assert_eq!(e.plane, want.plane, "EV {id}: plane");
        assert_eq!(e.path, want.path, "EV {id}: route");
        if !redrawn {
            assert_eq!(e.entropy, want.entropy, "EV {id}: entropy");
        }
        assert_eq!(
            t.lookup(e.entropy),
            Some(id),
            "EV {id}: its entropy names it"
        );
        assert_eq!(e.stats.delivered, n, "EV {id}: its deliveries");
        assert_eq!(
            e.stats.srtt_ns,
            n * k_stats * 1000,
            "EV {id}: its counted RTT"
        );
        assert_eq!(
            e.rtt.srtt().as_nanos(),
            n * k_hot * 1000,
            "EV {id}: its RTT"
        );
        assert_eq!(
            t.route(id),
            EvRoute {
                plane: e.plane,
                entropy: e.entropy,
                path: e.path
            }
        );
        assert_eq!(t.hot(id).entropy, e.entropy);
        assert_eq!(*t.stats(id), e.stats);
    }
}

/// The hot array, the cold array and the counters stay in step (issue #13, hot state apart
/// from cold): EV i's route, entropy, RTT and counters stay EV i's through retirement and
/// replacement, probing back, denial and allowing, and an ECMP redraw.
#[test]
fn an_evs_hot_state_route_and_counters_stay_together_through_its_life() {
    for ecmp in [false, true] {
        let mut rng = Rng::new(11);
        let p = profile(6, 3, 1);
        let timers = TimerConfig::default();
        let order = EntropyOrder::default();
        let mut t = if ecmp {
            EvTable::ecmp(&p, &timers, 2, order, &mut rng)
        } else {
            EvTable::srv6(&p, &timers, 2, &Grid { paths: 100 }, 0, 1, order, &mut rng)
        };
        let n = t.len() as u16;
        assert_eq!(n, 12);
        let start: Vec<Identity> = (0..n)
            .map(|id| {
                let e = t.ev(id);
                Identity {
                    plane: e.plane,
                    path: e.path,
                    entropy: e.entropy,
                }
            })
            .collect();
        for id in 0..n {
            fingerprint(&mut t, id, 1);
        }
        check_identities(&t, &start, false, 1, 1);
        let changes = |t: &EvTable| (0..n).map(|i| t.stats(i).state_changes).collect::<Vec<_>>();
        let one = |id: EvId, k: u64| {
            (0..n)
                .map(|i| if i == id { k } else { 0 })
                .collect::<Vec<_>>()
        };

        // Retired and replaced from its plane's backups.
        let a = t.active().next().unwrap();
        let Retire::Retired {
            replacement: Some(b),
        } = t.retire(a, NOW)
        else {
            panic!("a backup replaces it");
        };
        assert_eq!((t.ev(a).role, t.ev(b).role), (EvRole::Out, EvRole::Active));
        check_identities(&t, &start, false, 1, 1);
        assert_eq!(changes(&t), one(a, 1));

        // Probed back.
        let mut now = NOW;
        for _ in 0..3 {
            now += timers.probe_interval_max;
            assert_eq!(t.probe_due(now, ALL), Some(a));
            t.on_probe_sent(a, now);
            t.on_probe_answer(a, now);
        }
        assert_eq!(t.ev(a).state, EvState::Good);
        check_identities(&t, &start, false, 1, 1);
        assert_eq!(changes(&t), one(a, 2));
        let probes = |i: EvId| {
            let s = t.stats(i);
            (s.probes_sent, s.probes_ok)
        };
        assert!((0..n).all(|i| probes(i) == if i == a { (3, 3) } else { (0, 0) }));

        // Denied and allowed.
        let d = t.plane_range(1).next().unwrap();
        t.deny(d);
        t.allow(d);
        check_identities(&t, &start, false, 1, 1);
        assert_eq!(changes(&t)[usize::from(d)], 2);

        // Retired, then every EV redrawn: in ECMP mode the entropies and RTTs are new, the
        // counters and routes stay.
        let c = t.active().nth(1).unwrap();
        t.retire(c, now);
        t.rerandomize(&mut rng);
        check_identities(&t, &start, ecmp, 1, u64::from(!ecmp));
        for id in 0..n {
            fingerprint(&mut t, id, 2);
        }
        let k_hot = if ecmp { 2 } else { 1 };
        let stats_k = |t: &EvTable| {
            (0..n).all(|i| {
                t.stats(i).delivered == 2 * u64::from(i + 1) && t.stats(i).rtt_samples == 2
            })
        };
        assert!(
            stats_k(&t),
            "every EV's second fingerprint on its own counters"
        );
        // Each EV's RTT: the new path's first sample (ECMP), or the old one moved by it.
        for id in 0..n {
            let srtt = t.hot(id).rtt.srtt().as_nanos();
            let first = u64::from(id + 1) * 1000;
            if ecmp {
                assert_eq!(srtt, first * k_hot, "EV {id}");
            } else {
                assert_eq!(srtt, (7 * first + 2 * first) / 8, "EV {id}");
            }
            assert_eq!(t.stats(id).srtt_ns, srtt);
        }
    }
}

/// Loss inference's per-path order (issue #14): an EV says a transmission was overtaken once
/// a later one sent on it was delivered, whatever order the deliveries came in; an ECMP redraw
/// makes every EV a new path whose order is learnt again.
#[test]
fn an_ev_knows_which_of_its_transmissions_a_later_delivery_overtook() {
    let mut t = EvTable::ecmp(
        &profile(4, 2, 1),
        &TimerConfig::default(),
        2,
        EntropyOrder::default(),
        &mut Rng::new(3),
    );
    assert!(!t.overtaken(0, 1), "nothing delivered yet");
    t.on_delivered(0, 7, NOW, true);
    t.on_delivered(0, 4, NOW, false);
    assert!(t.overtaken(0, 6) && t.overtaken(0, 4) && t.overtaken(0, 1));
    assert!(
        !t.overtaken(0, 7) && !t.overtaken(0, 9),
        "7 is the latest delivered"
    );
    assert!(
        !t.overtaken(1, 1),
        "another EV's deliveries say nothing of EV 1"
    );
    assert!(!t.overtaken(99, 1), "no such EV");
    t.rerandomize(&mut Rng::new(4));
    assert!(!t.overtaken(0, 1), "a redrawn EV is a new path");
}

/// A gray path (brief §6.2 #15: 20 % injected drop goes inactive at once) delivers between its
/// losses, so the losses-in-a-row rule never fires; three lost of its last 16 first
/// transmissions, each overtaken by a later packet on it, retire it (issue #14). A path at
/// 1 % random loss, one loss in a window, never is; neither are holes the path never proved
/// dropped, nor lost retransmissions (no evidence).
#[test]
fn a_gray_path_is_retired_on_its_loss_rate_a_clean_one_is_not() {
    let mut t = srv6(32, 16, 2, 1, 8);
    let [gray, clean] = [0u16, 1];
    let mut tx = 0;
    let mut deliver = |t: &mut EvTable, ev: EvId| {
        tx += 1;
        t.on_delivered(ev, tx, NOW, true);
    };
    // One in five lost, as the 20 % gray link: never two in a row.
    let mut retired_after = None;
    for k in 0..40 {
        if k % 5 == 4 {
            if t.on_inferred_loss(gray, 0, true) {
                retired_after = Some(k);
                break;
            }
        } else {
            deliver(&mut t, gray);
        }
    }
    assert_eq!(
        retired_after,
        Some(14),
        "the third loss within 16 retires it"
    );
    // One loss per 16 (beyond 1 %): never enough.
    for k in 0..400 {
        if k % 16 == 15 {
            assert!(
                !t.on_inferred_loss(clean, 0, true),
                "first transmission {k}"
            );
        } else {
            deliver(&mut t, clean);
        }
    }
    // Holes the QP's timing found while the path delivered nothing sent after them may sit
    // in its queue: they count toward the losses in a row, not toward the loss rate.
    let queued = 2u16;
    for k in 0..40 {
        if k % 5 == 4 {
            assert!(!t.on_inferred_loss(queued, u64::MAX, true), "loss {k}");
        } else {
            deliver(&mut t, queued);
        }
    }
    // Lost retransmissions are counted, never evidence.
    for _ in 0..8 {
        assert!(!t.on_inferred_loss(clean, 0, false));
    }
    // Off: only losses in a row count.
    let mut p = profile(32, 16, 2);
    p.lossy_of_16_to_retire = 0;
    let mut off = EvTable::srv6(
        &p,
        &TimerConfig::default(),
        1,
        &Grid { paths: 8 },
        0,
        1,
        EntropyOrder::default(),
        &mut Rng::new(5),
    );
    for k in 0..40u64 {
        if k % 5 == 4 {
            assert!(!off.on_inferred_loss(gray, 0, true));
        } else {
            off.on_delivered(gray, 100 + k, NOW, true);
        }
    }
}
