//! Explicit EV tables (OCP mrc_ctl.h EXP and GEN EV profiles, brief §3.1): exactly the
//! controller's list, matched back from feedback, never redrawn.

use core::net::Ipv6Addr;

use super::*;
use crate::ev::{EvRole, EvState, Retire, SrPath};
use crate::time::Instant;
use crate::wire::entropy::srv6_index;

const NOW: Instant = Instant(1_000_000);

fn stev(plane: u8, v: u32) -> ExplicitEv {
    ExplicitEv {
        plane,
        value: ExplicitValue::Entropy(v),
    }
}

fn route(plane: u8, i: u16, segment: bool) -> ExplicitEv {
    ExplicitEv {
        plane,
        value: ExplicitValue::Route(SrPath {
            outer_da: Ipv6Addr::new(0xfcbb, u16::from(plane), i, 0, 0, 0, 0, 0),
            segment: segment.then(|| Ipv6Addr::new(0xfcbb, 0xe, i, 0, 0, 0, 0, 0)),
        }),
    }
}

fn profile(active: u16) -> EvProfile {
    EvProfile {
        active_per_plane: active,
        floor_per_plane: 0,
        ..EvProfile::default()
    }
}

fn build(kind: EvKind, planes: u8, list: &[ExplicitEv]) -> Result<EvTable, VerbsError> {
    EvTable::explicit(
        kind,
        &profile(2),
        &TimerConfig::default(),
        planes,
        list,
        EntropyOrder::default(),
        &mut Rng::new(9),
    )
}

/// Plane 2's entries first in the list, plane 1 without any, a duplicate on plane 0, and an
/// entropy (`0x0000_0003`) whose flow label would name id 0 in a generated table.
fn ecmp_list() -> Vec<ExplicitEv> {
    vec![
        stev(2, 0xdead_beef),
        stev(0, 0x0001_0000),
        stev(0, 0x0000_0003),
        stev(2, 0x0000_0001),
        stev(0, 0x0001_0000),
        stev(0, 0x7777_0002),
    ]
}

#[test]
fn an_explicit_ecmp_table_holds_the_list_exactly_by_plane_in_list_order() {
    let t = build(EvKind::Ecmp, 3, &ecmp_list()).unwrap();
    assert!(t.is_explicit());
    assert_eq!(t.kind(), EvKind::Ecmp);
    assert_eq!(t.len(), 6, "no entry dropped, duplicates included");
    assert_eq!(t.plane_range(0), 0..4);
    assert_eq!(
        t.plane_range(1),
        4..4,
        "a plane without entries has an empty range"
    );
    assert_eq!(t.plane_range(2), 4..6);
    let got: Vec<(u8, u32)> = (0..6)
        .map(|id| (t.ev(id).plane, t.ev(id).entropy))
        .collect();
    assert_eq!(
        got,
        [
            (0, 0x0001_0000),
            (0, 0x0000_0003),
            (0, 0x0001_0000),
            (0, 0x7777_0002),
            (2, 0xdead_beef),
            (2, 0x0000_0001),
        ]
    );
    assert!((0..6).all(|id| t.ev(id).path.is_none() && t.ev(id).state == EvState::Good));
    // The first `active_per_plane` (2) of each plane are active, the rest backup.
    let roles: Vec<EvRole> = (0..6).map(|id| t.ev(id).role).collect();
    use EvRole::{Active, Backup};
    assert_eq!(roles, [Active, Active, Backup, Backup, Active, Active]);
    assert_eq!(
        (
            t.active_in_plane(0),
            t.active_in_plane(1),
            t.active_in_plane(2)
        ),
        (2, 0, 2)
    );
}

#[test]
fn feedback_finds_every_listed_entropy_the_first_of_duplicates_and_nothing_else() {
    let t = build(EvKind::Ecmp, 3, &ecmp_list()).unwrap();
    for (entropy, id) in [
        (0x0001_0000, 0),
        (0x0000_0003, 1),
        (0x7777_0002, 3),
        (0xdead_beef, 4),
        (0x0000_0001, 5),
    ] {
        assert_eq!(t.lookup(entropy), Some(id), "{entropy:#x}");
    }
    // Unknown entropies, including ones whose flow label's low bits name a real id.
    for unknown in [
        0,
        0x0000_0002,
        0x0001_0001,
        0x0002_0000,
        0xffff_ffff,
        0xdead_bef0,
    ] {
        assert_eq!(t.lookup(unknown), None, "{unknown:#x}");
    }
}

#[test]
fn a_remap_keeps_the_listed_entropies_and_starts_states_over() {
    let mut t = build(EvKind::Ecmp, 3, &ecmp_list()).unwrap();
    let before: Vec<u32> = (0..6).map(|id| t.ev(id).entropy).collect();
    assert!(matches!(t.retire(0, NOW), Retire::Retired { .. }));
    t.skip(5);
    t.rerandomize(&mut Rng::new(77));
    let after: Vec<u32> = (0..6).map(|id| t.ev(id).entropy).collect();
    assert_eq!(
        before, after,
        "the controller's entropies are never redrawn"
    );
    assert!((0..6).all(|id| t.ev(id).state == EvState::Good));
    assert_eq!(t.retired_count(), 0);
    assert_eq!(t.ev(0).role, EvRole::Active, "roles assigned again");
    assert_eq!(t.lookup(0xdead_beef), Some(4));
    // A generated table's remap does redraw (unchanged behaviour).
    let mut g = EvTable::ecmp(
        &EvProfile::default(),
        &TimerConfig::default(),
        2,
        EntropyOrder::default(),
        &mut Rng::new(1),
    );
    assert!(!g.is_explicit());
    let before: Vec<u32> = (0..g.len() as u16).map(|id| g.ev(id).entropy).collect();
    g.rerandomize(&mut Rng::new(2));
    let after: Vec<u32> = (0..g.len() as u16).map(|id| g.ev(id).entropy).collect();
    assert_ne!(before, after);
}

#[test]
fn an_explicit_srv6_table_takes_the_routes_and_names_them_by_index() {
    let list = [
        route(1, 7, true),
        route(0, 1, false),
        route(1, 8, false),
        route(0, 1, false),
        route(0, 2, true),
    ];
    for order in [EntropyOrder::SportLow, EntropyOrder::SportHigh] {
        let t = EvTable::explicit(
            EvKind::Srv6,
            &profile(2),
            &TimerConfig::default(),
            2,
            &list,
            order,
            &mut Rng::new(4),
        )
        .unwrap();
        assert!(t.is_explicit());
        assert_eq!((t.plane_range(0), t.plane_range(1)), (0..3, 3..5));
        let want: Vec<(u8, ExplicitValue)> = [1, 3, 4, 0, 2]
            .iter()
            .map(|&i| (list[i].plane, list[i].value))
            .collect();
        let got: Vec<(u8, ExplicitValue)> = (0..5)
            .map(|id| {
                let e = t.ev(id);
                (e.plane, ExplicitValue::Route(e.path.unwrap()))
            })
            .collect();
        assert_eq!(
            got, want,
            "the routes exactly, plane by plane in list order"
        );
        for id in 0..5 {
            let entropy = t.ev(id).entropy;
            assert_eq!(srv6_index(order, entropy), id);
            assert_eq!(t.lookup(entropy), Some(id));
            assert_eq!(t.route(id).path, t.ev(id).path);
        }
        assert_eq!(t.lookup(t.ev(2).entropy ^ 0x0001_0001), None);
    }
}

#[test]
fn entries_of_the_other_mode_or_a_missing_plane_are_refused() {
    let mixed_ecmp = [stev(0, 1), route(0, 1, false)];
    assert_eq!(
        build(EvKind::Ecmp, 2, &mixed_ecmp).unwrap_err(),
        VerbsError::InvalidAttr("SRv6 EVs on an ECMP endpoint")
    );
    let mixed_srv6 = [route(1, 1, false), stev(1, 1)];
    assert_eq!(
        build(EvKind::Srv6, 2, &mixed_srv6).unwrap_err(),
        VerbsError::InvalidAttr("STEV EVs on an SRv6 endpoint")
    );
    assert!(matches!(
        build(EvKind::Ecmp, 2, &[stev(2, 1)]),
        Err(VerbsError::InvalidAttr(_))
    ));
    let many: Vec<ExplicitEv> = (0..=MAX_EVS_PER_QP as u32).map(|v| stev(0, v)).collect();
    assert!(matches!(
        build(EvKind::Ecmp, 1, &many),
        Err(VerbsError::InvalidAttr(_))
    ));
    let full = build(EvKind::Ecmp, 1, &many[..MAX_EVS_PER_QP]).unwrap();
    assert_eq!(full.len(), MAX_EVS_PER_QP);
    assert_eq!(full.lookup(4095), Some(4095));
}
