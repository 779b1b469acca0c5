//! Per-packet EV choice (brief §3.2): a small trait, and [`Selector`], the enum over its
//! implementations the datapath calls (static dispatch, issue #13), built by a factory.
//!
//! - [`Spray`] (MRC): a rotation over the active set in pseudo-random order, plane-balanced
//!   (planes interleaved, each active EV once: equal active sets give each plane the same
//!   share of every rotation, so uncoordinated senders never pile onto one plane; a plane
//!   that lost paths it could not replace carries less, as it can), reshuffled every few
//!   rotations and whenever the active set changes;
//!   EVs that are not GOOD, or whose plane's port is down or full, are passed over.
//! - [`Recycle`] (ECMP, REPS-style): EVs whose feedback came back clean are reused first;
//!   the spraying rotation explores only when none is waiting.
//! - [`SinglePath`] (the RoCE-like baseline): one EV until it fails.

use core::fmt;
use std::collections::VecDeque;

use super::{EvId, EvTable};
use crate::config::SelectorKind;
use crate::rng::Rng;

/// An EV selection policy. `planes` is the mask of planes a packet may leave on now (port up
/// at both ends and with TX room); `avoid` is an EV the packet must not take (the one a
/// retransmission was lost or trimmed on).
pub trait EvSelector: fmt::Debug + Send {
    /// Short name for reports.
    fn name(&self) -> &'static str;

    /// The EV for the next packet, if any is usable.
    fn select(
        &mut self,
        table: &mut EvTable,
        planes: u32,
        avoid: Option<EvId>,
        rng: &mut Rng,
    ) -> Option<EvId>;

    /// A packet sent on `ev` was acknowledged; `clean` when its feedback carried no congestion
    /// mark.
    fn on_delivered(&mut self, ev: EvId, clean: bool) {
        let _ = (ev, clean);
    }
}

/// Build the selector a profile names. `Auto` is spraying in SRv6 mode and recycling in ECMP.
/// `reshuffle_rounds` is how many rotations pass between reshuffles.
pub fn build_selector(
    kind: SelectorKind,
    ecmp: bool,
    table: &EvTable,
    reshuffle_rounds: u32,
) -> Selector {
    match kind {
        SelectorKind::Spray => Selector::Spray(Spray::new(table, reshuffle_rounds)),
        SelectorKind::Recycle => Selector::Recycle(Recycle::new(table, reshuffle_rounds)),
        SelectorKind::SinglePath => Selector::SinglePath(SinglePath::default()),
        SelectorKind::Auto if ecmp => Selector::Recycle(Recycle::new(table, reshuffle_rounds)),
        SelectorKind::Auto => Selector::Spray(Spray::new(table, reshuffle_rounds)),
    }
}

/// One of the selectors, called without a virtual call: each arm is the implementation's own
/// [`EvSelector`] method (issue #13, static dispatch on the per-packet path).
#[derive(Debug)]
pub enum Selector {
    Spray(Spray),
    Recycle(Recycle),
    SinglePath(SinglePath),
}

impl EvSelector for Selector {
    fn name(&self) -> &'static str {
        match self {
            Self::Spray(s) => s.name(),
            Self::Recycle(s) => s.name(),
            Self::SinglePath(s) => s.name(),
        }
    }

    #[inline]
    fn select(
        &mut self,
        table: &mut EvTable,
        planes: u32,
        avoid: Option<EvId>,
        rng: &mut Rng,
    ) -> Option<EvId> {
        match self {
            Self::Spray(s) => s.select(table, planes, avoid, rng),
            Self::Recycle(s) => s.select(table, planes, avoid, rng),
            Self::SinglePath(s) => s.select(table, planes, avoid, rng),
        }
    }

    #[inline]
    fn on_delivered(&mut self, ev: EvId, clean: bool) {
        match self {
            Self::Spray(s) => s.on_delivered(ev, clean),
            Self::Recycle(s) => s.on_delivered(ev, clean),
            Self::SinglePath(s) => s.on_delivered(ev, clean),
        }
    }
}

/// The MRC rotation (see the module documentation).
#[derive(Debug)]
pub struct Spray {
    order: Vec<EvId>,
    cursor: usize,
    generation: Option<u64>,
    rounds_since_shuffle: u32,
    reshuffle_every: u32,
    per_plane: Vec<Vec<EvId>>,
    plane_order: Vec<usize>,
}

impl Spray {
    /// A rotation over `table`'s active set, reshuffled every `reshuffle_rounds` rotations.
    pub fn new(table: &EvTable, reshuffle_rounds: u32) -> Self {
        Self {
            order: Vec::with_capacity(table.len() * 2),
            cursor: 0,
            generation: None,
            rounds_since_shuffle: 0,
            reshuffle_every: reshuffle_rounds.max(1),
            per_plane: (0..table.planes())
                .map(|p| Vec::with_capacity(table.plane_range(p).len()))
                .collect(),
            plane_order: (0..table.planes()).collect(),
        }
    }

    /// Rebuild the rotation: each plane's active EVs shuffled, planes interleaved in a
    /// shuffled order, every active EV once. Planes with equal active sets (replacement keeps
    /// them equal, brief §3.2) take equal shares; a plane that ran out of backups takes one
    /// share per path it has left, as its capacity is (issue #14: repeating its EVs to keep
    /// the plane's share overloaded the survivors of a dead link).
    fn rebuild(&mut self, table: &EvTable, rng: &mut Rng) {
        for list in &mut self.per_plane {
            list.clear();
        }
        for id in table.active() {
            let plane = usize::from(table.hot(id).plane);
            if let Some(list) = self.per_plane.get_mut(plane) {
                list.push(id);
            }
        }
        for list in &mut self.per_plane {
            rng.shuffle(list);
        }
        rng.shuffle(&mut self.plane_order);
        let longest = self.per_plane.iter().map(Vec::len).max().unwrap_or(0);
        self.order.clear();
        for k in 0..longest {
            for &p in &self.plane_order {
                if let Some(&id) = self.per_plane[p].get(k) {
                    self.order.push(id);
                }
            }
        }
        self.cursor = 0;
        self.rounds_since_shuffle = 0;
        self.generation = Some(table.generation());
    }
}

impl EvSelector for Spray {
    fn name(&self) -> &'static str {
        "spray"
    }

    fn select(
        &mut self,
        table: &mut EvTable,
        planes: u32,
        avoid: Option<EvId>,
        rng: &mut Rng,
    ) -> Option<EvId> {
        if self.generation != Some(table.generation()) {
            self.rebuild(table, rng);
        }
        // Two passes at most: a wrap starts a new rotation, which ends earlier SKIPs.
        for _ in 0..=2 * self.order.len() {
            if self.cursor >= self.order.len() {
                table.next_round();
                self.rounds_since_shuffle += 1;
                if self.rounds_since_shuffle >= self.reshuffle_every && self.order.len() > 1 {
                    self.rebuild(table, rng);
                }
                self.cursor = 0;
                if self.order.is_empty() {
                    return None;
                }
            }
            let id = self.order[self.cursor];
            self.cursor += 1;
            if Some(id) != avoid && table.usable(id, planes) {
                return Some(id);
            }
        }
        None
    }
}

/// REPS-style recycling for ECMP mode (see the module documentation).
#[derive(Debug)]
pub struct Recycle {
    clean: VecDeque<EvId>,
    capacity: usize,
    explore: Spray,
}

impl Recycle {
    /// Recycling over `table`, exploring with a rotation reshuffled every `reshuffle_rounds`.
    pub fn new(table: &EvTable, reshuffle_rounds: u32) -> Self {
        let capacity = table.len().max(1);
        Self {
            clean: VecDeque::with_capacity(capacity),
            capacity,
            explore: Spray::new(table, reshuffle_rounds),
        }
    }
}

impl EvSelector for Recycle {
    fn name(&self) -> &'static str {
        "recycle"
    }

    fn select(
        &mut self,
        table: &mut EvTable,
        planes: u32,
        avoid: Option<EvId>,
        rng: &mut Rng,
    ) -> Option<EvId> {
        // Rebuilding after a set change also forgets recycled EVs that were replaced.
        if self.explore.generation != Some(table.generation()) {
            self.clean.clear();
        }
        for _ in 0..self.clean.len() {
            let Some(id) = self.clean.pop_front() else {
                break;
            };
            if Some(id) != avoid && table.usable(id, planes) {
                return Some(id);
            }
            // Keep EVs that are only unusable for now (plane full, SKIP, avoided).
            if table
                .get_hot(id)
                .is_some_and(|e| e.role == super::EvRole::Active)
            {
                self.clean.push_back(id);
            }
        }
        self.explore.select(table, planes, avoid, rng)
    }

    fn on_delivered(&mut self, ev: EvId, clean: bool) {
        if clean && self.clean.len() < self.capacity {
            self.clean.push_back(ev);
        }
    }
}

/// One path until it fails (the RoCE-like baseline).
#[derive(Debug, Default)]
pub struct SinglePath {
    current: Option<EvId>,
}

impl EvSelector for SinglePath {
    fn name(&self) -> &'static str {
        "single-path"
    }

    fn select(
        &mut self,
        table: &mut EvTable,
        planes: u32,
        avoid: Option<EvId>,
        _rng: &mut Rng,
    ) -> Option<EvId> {
        if let Some(id) = self.current
            && Some(id) != avoid
            && table.usable(id, planes)
        {
            return Some(id);
        }
        let mut next = table
            .active()
            .find(|&id| Some(id) != avoid && table.usable(id, planes));
        if next.is_none() {
            // Only SKIPs (soft) stand in the way: start a new rotation, which ends them.
            table.next_round();
            next = table
                .active()
                .find(|&id| Some(id) != avoid && table.usable(id, planes));
        }
        if next.is_some() {
            self.current = next;
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{EvProfile, TimerConfig};
    use crate::time::Instant;
    use crate::wire::EntropyOrder;

    fn table(planes: u8, per_plane: u16, active: u16) -> EvTable {
        EvTable::ecmp(
            &EvProfile {
                evs_per_plane: per_plane,
                active_per_plane: active,
                floor_per_plane: 0,
                ..EvProfile::default()
            },
            &TimerConfig::default(),
            planes,
            EntropyOrder::default(),
            &mut Rng::new(3),
        )
    }

    #[test]
    fn spray_visits_every_active_ev_once_per_rotation_plane_balanced() {
        let mut t = table(4, 8, 4);
        let mut s = Spray::new(&t, 4);
        let mut rng = Rng::new(1);
        let picks: Vec<EvId> = (0..16)
            .map(|_| s.select(&mut t, u32::MAX, None, &mut rng).unwrap())
            .collect();
        let mut sorted = picks.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), 16, "each active EV once");
        // Every window of 4 consecutive picks inside a rotation covers the 4 planes.
        for w in picks.chunks(4) {
            let mut planes: Vec<u8> = w.iter().map(|&id| t.ev(id).plane).collect();
            planes.sort_unstable();
            assert_eq!(planes, [0, 1, 2, 3]);
        }
        // The order changes between reshuffles.
        let later: Vec<EvId> = (0..64)
            .map(|_| s.select(&mut t, u32::MAX, None, &mut rng).unwrap())
            .collect();
        assert_ne!(&later[48..64], &picks[..]);
    }

    #[test]
    fn spray_skips_unusable_evs_and_planes_and_the_avoided_one() {
        let mut t = table(2, 4, 4);
        let mut s = Spray::new(&t, 4);
        let mut rng = Rng::new(2);
        let bad = t.active().next().unwrap();
        t.retire(bad, Instant(0));
        let second = t.active().nth(1).unwrap();
        t.skip(second);
        for _ in 0..40 {
            let id = s.select(&mut t, 0b10, Some(5), &mut rng).unwrap();
            assert_eq!(t.ev(id).plane, 1);
            assert_ne!(id, 5);
        }
        assert_eq!(s.select(&mut t, 0, None, &mut rng), None, "no plane usable");
    }

    /// A plane that lost a path with no backup to replace it carries one share per live path,
    /// not a plane's equal share over fewer paths: every path of the QP carries the same load,
    /// so a dead link's plane does not overload its survivors (issue #14: one dead T0–T1 link
    /// of eight cost the plane-balanced rotation +11 % p99 FCT, one share per path +2 %).
    #[test]
    fn spray_gives_every_live_path_one_share_when_a_plane_runs_short() {
        let mut t = table(2, 4, 4);
        let mut s = Spray::new(&t, 4);
        let mut rng = Rng::new(8);
        let dead = t.plane_range(0).next().unwrap();
        assert_eq!(
            t.retire(dead, Instant(0)),
            crate::ev::Retire::Retired { replacement: None }
        );
        let mut per_ev = vec![0u32; t.len()];
        for _ in 0..7 * 100 {
            per_ev[usize::from(s.select(&mut t, u32::MAX, None, &mut rng).unwrap())] += 1;
        }
        assert_eq!(per_ev[usize::from(dead)], 0);
        let live: Vec<u32> = per_ev
            .iter()
            .enumerate()
            .filter(|&(id, _)| id != usize::from(dead))
            .map(|(_, &n)| n)
            .collect();
        assert!(live.iter().all(|&n| n == 100), "{per_ev:?}");
    }

    #[test]
    fn skipped_evs_come_back_next_rotation() {
        let mut t = table(1, 2, 2);
        let mut s = Spray::new(&t, 4);
        let mut rng = Rng::new(4);
        t.skip(0);
        t.skip(1);
        // Both skipped: the wrap starts a new rotation and they are usable again.
        assert!(s.select(&mut t, 1, None, &mut rng).is_some());
    }

    #[test]
    fn recycle_prefers_clean_evs_then_explores() {
        let mut t = table(1, 8, 8);
        let mut r = Recycle::new(&t, 4);
        let mut rng = Rng::new(5);
        let first = r.select(&mut t, 1, None, &mut rng).unwrap();
        r.on_delivered(first, true);
        r.on_delivered(6, false);
        assert_eq!(r.select(&mut t, 1, None, &mut rng), Some(first));
        let explored = r.select(&mut t, 1, None, &mut rng).unwrap();
        assert_ne!(explored, first);
    }

    #[test]
    fn single_path_sticks_until_its_ev_fails() {
        let mut t = table(2, 2, 2);
        let mut s = SinglePath::default();
        let mut rng = Rng::new(6);
        let a = s.select(&mut t, u32::MAX, None, &mut rng).unwrap();
        for _ in 0..10 {
            assert_eq!(s.select(&mut t, u32::MAX, None, &mut rng), Some(a));
        }
        t.retire(a, Instant(0));
        let b = s.select(&mut t, u32::MAX, None, &mut rng).unwrap();
        assert_ne!(a, b);
        assert_eq!(s.select(&mut t, u32::MAX, None, &mut rng), Some(b));
        // A SKIP is soft: with nothing else left, the path is used again.
        let mut one = table(1, 1, 1);
        let mut s = SinglePath::default();
        let only = s.select(&mut one, u32::MAX, None, &mut rng).unwrap();
        one.skip(only);
        assert_eq!(s.select(&mut one, u32::MAX, None, &mut rng), Some(only));
    }
}
