//! A QP's EV table (brief §3.1–§3.3, §3.9): the EVs, their states and sets, replacement,
//! probing and reverse EVs.

use core::ops::Range;
use std::collections::VecDeque;

use super::{
    ColdEv, Ev, EvId, EvKind, EvRole, EvRoute, EvRouteRef, EvState, HotEv, PathSource, ProbeState,
};
use crate::config::{EvProfile, TimerConfig};
use crate::reliability::{PathEvidence, RttEstimator};
use crate::rng::Rng;
use crate::stats::EvStats;
use crate::time::{Duration, Instant};
use crate::wire::EntropyOrder;
use crate::wire::entropy::srv6_ev;

/// Index bits an ECMP-mode EV carries in its flow label (the rest is random).
const ECMP_INDEX_BITS: u32 = 12;
/// State changes kept for `poll_event` before the oldest are dropped.
const MAX_CHANGES: usize = 64;

/// A state change worth reporting (to or from ASSUMED_BAD or DENIED; SKIPs are only counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvChange {
    pub ev: EvId,
    pub plane: u8,
    pub from: EvState,
    pub to: EvState,
}

/// What [`EvTable::retire`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retire {
    /// Retired; a backup of the same plane took its place if one was left.
    Retired { replacement: Option<EvId> },
    /// Its plane is at the floor of active EVs with no backup left: skipped instead.
    FloorHeld,
    /// It was already out (retired or denied).
    AlreadyOut,
}

/// What a table keeps of its [`EvProfile`]: the thresholds its state machine reads (an
/// explicit list, if the profile had one, became the table's EVs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    active_per_plane: u16,
    floor_per_plane: u16,
    probe_successes: u8,
    inferred_losses_to_retire: u8,
    lossy_of_16_to_retire: u8,
}

impl Policy {
    fn of(profile: &EvProfile) -> Self {
        Self {
            active_per_plane: profile.active_per_plane,
            floor_per_plane: profile.floor_per_plane,
            probe_successes: profile.probe_successes,
            inferred_losses_to_retire: profile.inferred_losses_to_retire,
            lossy_of_16_to_retire: profile.lossy_of_16_to_retire,
        }
    }
}

/// A QP's EVs, in parallel arrays indexed by [`EvId`] (issue #13, hot state apart from
/// cold): `hot` is what every packet reads (the selector, feedback matching, loss inference),
/// `cold` the routes and probe state, `stats` the counters. The three always have the same
/// length and an EV's entries never move: an id names the same EV in all three for the
/// table's life (retirement, probing, denial and an ECMP redraw change entries in place).
#[derive(Debug)]
pub struct EvTable {
    kind: EvKind,
    order: EntropyOrder,
    policy: Policy,
    /// Built from a controller's list ([`Self::explicit`]): its entropies are never redrawn.
    explicit: bool,
    /// Explicit ECMP tables only (empty otherwise): every EV's entropy with its id, sorted, for
    /// [`Self::lookup`] (a listed entropy does not carry its index).
    by_entropy: Vec<(u32, EvId)>,
    hot: Vec<HotEv>,
    cold: Vec<ColdEv>,
    stats: Vec<EvStats>,
    /// Per EV, the id of the latest-sent transmission on it known delivered (0: none): one
    /// path delivers in order, so a transmission sent on it before and still missing was
    /// dropped ([`PathEvidence::overtaken`], issue #14). Apart from `hot`, which is full.
    delivered_tx: Vec<u64>,
    planes: Vec<Range<u16>>,
    active_in_plane: Vec<u16>,
    round: u32,
    generation: u64,
    skipped: Vec<EvId>,
    retired: Vec<EvId>,
    next_probe_at: Option<Instant>,
    /// Probes awaiting an answer (none: the per-packet deadline check skips them).
    probes_out: u32,
    probe_min: Duration,
    probe_max: Duration,
    /// Per plane, the EV the latest control packet left on.
    reverse: Vec<Option<EvId>>,
    /// A bit per EV: a SACK sent on it was lost ([`Self::reverse_failed`]).
    reverse_bad: Vec<u64>,
    changes: VecDeque<EvChange>,
    changes_dropped: u64,
    /// EVs with an RTT sample pending from the SACK being merged.
    rtt_touched: Vec<EvId>,
}

/// The loss rules read each EV's RTT and delivery order here (brief §3.6, issue #14).
impl PathEvidence for EvTable {
    #[inline]
    fn srtt(&self, ev: u16) -> Duration {
        self.path_srtt(ev)
    }

    #[inline]
    fn overtaken(&self, ev: u16, tx_id: u64) -> bool {
        self.delivered_tx
            .get(usize::from(ev))
            .is_some_and(|&latest| latest > tx_id)
    }
}

impl EvTable {
    /// SRv6 mode: for each plane, a random subset of the plan's paths from `src` to `dst`
    /// (brief §3.1: equal count per plane, senders do not coordinate).
    #[allow(clippy::too_many_arguments)]
    pub fn srv6(
        profile: &EvProfile,
        timers: &TimerConfig,
        planes: u8,
        paths: &dyn PathSource,
        src: u32,
        dst: u32,
        order: EntropyOrder,
        rng: &mut Rng,
    ) -> Self {
        let mut evs = Vec::new();
        let mut ranges = Vec::new();
        for plane in 0..planes {
            let start = evs.len() as u16;
            let count = paths.path_count(src, dst, plane);
            let want = usize::from(profile.evs_per_plane).min(count);
            for index in pick_distinct(count, want, rng) {
                let Some(path) = paths.path(src, dst, plane, index) else {
                    continue;
                };
                let id = evs.len() as u16;
                let entropy = srv6_ev(order, id, rng.next_u32() as u16);
                evs.push(new_ev(plane, entropy, Some(path)));
            }
            ranges.push(start..evs.len() as u16);
        }
        Self::from_parts(EvKind::Srv6, order, profile, timers, evs, ranges)
    }

    /// ECMP mode: random source ports and flow labels, the EV's index in the flow label's low
    /// bits so feedback can name it (brief §3.1 \[I\], §8.2).
    pub fn ecmp(
        profile: &EvProfile,
        timers: &TimerConfig,
        planes: u8,
        order: EntropyOrder,
        rng: &mut Rng,
    ) -> Self {
        let mut evs = Vec::new();
        let mut ranges = Vec::new();
        for plane in 0..planes {
            let start = evs.len() as u16;
            for _ in 0..profile.evs_per_plane {
                let id = evs.len() as u16;
                evs.push(new_ev(plane, ecmp_entropy(order, id, rng), None));
            }
            ranges.push(start..evs.len() as u16);
        }
        Self::from_parts(EvKind::Ecmp, order, profile, timers, evs, ranges)
    }

    fn from_parts(
        kind: EvKind,
        order: EntropyOrder,
        profile: &EvProfile,
        timers: &TimerConfig,
        evs: Vec<Ev>,
        planes: Vec<Range<u16>>,
    ) -> Self {
        let n = evs.len();
        let mut t = Self {
            kind,
            order,
            policy: Policy::of(profile),
            explicit: false,
            by_entropy: Vec::new(),
            hot: evs.iter().map(hot_of).collect(),
            cold: evs
                .iter()
                .map(|e| ColdEv {
                    path: e.path,
                    probe: e.probe,
                })
                .collect(),
            stats: evs.iter().map(|e| e.stats).collect(),
            delivered_tx: vec![0; n],
            active_in_plane: vec![0; planes.len()],
            reverse: vec![None; planes.len()],
            reverse_bad: vec![0; n.div_ceil(64)],
            planes,
            round: 0,
            generation: 0,
            skipped: Vec::with_capacity(n),
            retired: Vec::with_capacity(n),
            next_probe_at: None,
            probes_out: 0,
            probe_min: timers.probe_interval_min,
            probe_max: timers.probe_interval_max,
            changes: VecDeque::with_capacity(MAX_CHANGES),
            changes_dropped: 0,
            // Each EV at most once per SACK: sized now, never grown by traffic.
            rtt_touched: Vec::with_capacity(n),
        };
        t.assign_roles();
        t
    }

    /// The first `active_per_plane` usable EVs of each plane are active, the rest backup.
    fn assign_roles(&mut self) {
        for (p, range) in self.planes.iter().enumerate() {
            let mut active = 0;
            for id in range.clone() {
                let e = &mut self.hot[usize::from(id)];
                if matches!(e.state, EvState::AssumedBad | EvState::Denied) {
                    e.role = EvRole::Out;
                } else if active < self.policy.active_per_plane {
                    e.role = EvRole::Active;
                    active += 1;
                } else {
                    e.role = EvRole::Backup;
                }
            }
            self.active_in_plane[p] = active;
        }
        self.generation += 1;
    }

    /// How the EVs are named on the wire.
    pub fn kind(&self) -> EvKind {
        self.kind
    }

    /// Whether the EVs are a controller's list ([`Self::explicit`]; OCP mrc_ctl.h EXP and GEN
    /// EV profiles, brief §3.1) rather than generated.
    pub fn is_explicit(&self) -> bool {
        self.explicit
    }

    /// Number of EVs.
    pub fn len(&self) -> usize {
        self.hot.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hot.is_empty()
    }

    /// Number of planes.
    pub fn planes(&self) -> usize {
        self.planes.len()
    }

    /// The EVs of `plane`.
    pub fn plane_range(&self, plane: usize) -> Range<u16> {
        self.planes.get(plane).cloned().unwrap_or(0..0)
    }

    /// EV `id`, whole (a snapshot of its hot, cold and counter entries; for reports).
    pub fn ev(&self, id: EvId) -> Ev {
        let Some(e) = self.get(id) else {
            panic!("EV {id} out of range ({} EVs)", self.len())
        };
        e
    }

    /// EV `id`, whole, if it exists (see [`Self::ev`]).
    pub fn get(&self, id: EvId) -> Option<Ev> {
        let i = usize::from(id);
        let (h, c, stats) = (self.hot.get(i)?, self.cold.get(i)?, self.stats.get(i)?);
        Some(Ev {
            plane: h.plane,
            state: h.state,
            role: h.role,
            skip_round: h.skip_round,
            entropy: h.entropy,
            path: c.path,
            probe: c.probe,
            suspect_losses: h.suspect_losses,
            rtt: h.rtt,
            rtt_pending: h.rtt_pending(),
            stats: *stats,
        })
    }

    /// The per-packet state of EV `id` (plane, state, role, entropy, RTT).
    #[inline]
    pub fn hot(&self, id: EvId) -> &HotEv {
        &self.hot[usize::from(id)]
    }

    /// The per-packet state of EV `id`, if it exists.
    #[inline]
    pub fn get_hot(&self, id: EvId) -> Option<&HotEv> {
        self.hot.get(usize::from(id))
    }

    /// What a frame leaving on EV `id` needs: its plane, entropy and route.
    #[inline]
    pub fn route(&self, id: EvId) -> EvRoute {
        let i = usize::from(id);
        let h = &self.hot[i];
        EvRoute {
            plane: h.plane,
            entropy: h.entropy,
            path: self.cold[i].path,
        }
    }

    /// [`route`](Self::route), borrowed.
    #[inline]
    pub fn route_ref(&self, id: EvId) -> EvRouteRef<'_> {
        let i = usize::from(id);
        let h = &self.hot[i];
        EvRouteRef {
            plane: h.plane,
            entropy: h.entropy,
            path: self.cold[i].path.as_ref(),
        }
    }

    /// The counters of EV `id`.
    pub fn stats(&self, id: EvId) -> &EvStats {
        &self.stats[usize::from(id)]
    }

    #[inline]
    pub fn stats_mut(&mut self, id: EvId) -> &mut EvStats {
        &mut self.stats[usize::from(id)]
    }

    /// Current rotation number.
    pub fn round(&self) -> u32 {
        self.round
    }

    /// Bumped whenever the active set changes (selectors rebuild their order then).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The EV a feedback packet's echoed entropy names, if it is one of ours: by the index it
    /// carries (SRv6 mode: the source port; ECMP mode: the flow label's low bits), or, in an
    /// explicit ECMP table, by search (the first of equal entropies).
    #[inline]
    pub fn lookup(&self, entropy: u32) -> Option<EvId> {
        if !self.by_entropy.is_empty() {
            return self.lookup_listed(entropy);
        }
        let fields = self.order.split(entropy);
        let id = match self.kind {
            EvKind::Srv6 => fields.udp_sport,
            EvKind::Ecmp => (fields.flow_label & ((1 << ECMP_INDEX_BITS) - 1)) as u16,
        };
        let e = self.hot.get(usize::from(id))?;
        (e.entropy == entropy).then_some(id)
    }

    /// Usable now: active, GOOD (or SKIP from an earlier rotation), on a plane in `planes`.
    #[inline]
    pub fn usable(&self, id: EvId, planes: u32) -> bool {
        let e = &self.hot[usize::from(id)];
        e.role == EvRole::Active
            && planes & (1 << e.plane) != 0
            && match e.state {
                EvState::Good => true,
                EvState::Skip => e.skip_round < self.round,
                _ => false,
            }
    }

    /// A new rotation starts: SKIPs of earlier rotations are over.
    pub fn next_round(&mut self) {
        self.round = self.round.wrapping_add(1);
        for id in self.skipped.drain(..) {
            let e = &mut self.hot[usize::from(id)];
            if e.state == EvState::Skip {
                e.state = EvState::Good;
            }
        }
    }

    /// Skip a GOOD EV for the rest of this rotation (trim or ECN on it, brief §3.3).
    pub fn skip(&mut self, id: EvId) {
        let e = &mut self.hot[usize::from(id)];
        if e.state == EvState::Good {
            e.state = EvState::Skip;
            e.skip_round = self.round;
            self.stats[usize::from(id)].state_changes += 1;
            self.skipped.push(id);
        }
    }

    /// The smoothed RTT of `id`'s path (zero before its first sample).
    #[inline]
    pub fn path_srtt(&self, id: EvId) -> Duration {
        self.hot
            .get(usize::from(id))
            .map_or(Duration::ZERO, |e| e.rtt.srtt())
    }

    /// A packet sent on `id` at `sent_at` was delivered: the path works, whatever was inferred
    /// before. A first transmission (`sample`) is an RTT sample of the path, unambiguous by
    /// Karn's rule; of those a SACK acknowledges, the most recently sent one waits in
    /// `rtt_pending` for [`Self::take_rtt_samples`] (the least inflated by SACK coalescing and
    /// by holes that held the cumulative ACK back: RACK's choice, RFC 8985 §6.2).
    #[inline]
    pub fn on_delivered(&mut self, id: EvId, tx_id: u64, sent_at: Instant, sample: bool) {
        self.stats[usize::from(id)].delivered += 1;
        let latest = &mut self.delivered_tx[usize::from(id)];
        *latest = (*latest).max(tx_id);
        let e = &mut self.hot[usize::from(id)];
        e.suspect_losses = 0;
        if sample {
            e.recent_losses <<= 1;
            match e.rtt_pending() {
                None => {
                    e.set_rtt_pending(Some(sent_at));
                    self.rtt_touched.push(id);
                }
                Some(t) if t < sent_at => e.set_rtt_pending(Some(sent_at)),
                Some(_) => {}
            }
        }
    }

    /// Fold the samples [`Self::on_delivered`] collected from one SACK into each path's RTT
    /// (one per EV per SACK). `exact` is a sample of one EV measured better (the SACK's echoed
    /// TSETH timestamp): it replaces that EV's. Samples of `max` or more are discarded.
    pub fn take_rtt_samples(
        &mut self,
        now: Instant,
        exact: Option<(EvId, Duration)>,
        max: Duration,
    ) {
        if let Some((id, _)) = exact
            && let Some(e) = self.hot.get_mut(usize::from(id))
            && e.replace_rtt_pending(now).is_none()
        {
            // Marked as sampled (the exact value is taken below).
            self.rtt_touched.push(id);
        }
        for id in self.rtt_touched.drain(..) {
            let e = &mut self.hot[usize::from(id)];
            let Some(sent_at) = e.take_rtt_pending() else {
                continue;
            };
            let sample = match exact {
                Some((x, rtt)) if x == id => rtt,
                _ => now.saturating_since(sent_at),
            };
            if sample < max {
                e.rtt.update(sample);
                let s = &mut self.stats[usize::from(id)];
                s.srtt_ns = e.rtt.srtt().as_nanos();
                s.rtt_samples += 1;
            }
        }
    }

    /// A packet on `id` was inferred lost from SACK holes: `true` once first transmissions
    /// make [`EvProfile::inferred_losses_to_retire`] in a row with no delivery between (a
    /// dead path), or [`EvProfile::lossy_of_16_to_retire`] of the EV's last 16 (a gray one,
    /// brief §6.2 #15), the evidence that retires it (the counts start over). Only a loss the
    /// path itself proved, transmission `tx_id` overtaken by a later one delivered on it
    /// ([`PathEvidence::overtaken`]), counts toward the gray rule: a hole found by the QP's
    /// timing alone may sit in a queue of its path (issue #14: ECMP hot spots' queues retired
    /// healthy EVs that way). A retransmission is counted, never evidence: its send order says
    /// little about its arrival order.
    pub fn on_inferred_loss(&mut self, id: EvId, tx_id: u64, first_transmission: bool) -> bool {
        let (in_a_row, of_16) = (
            self.policy.inferred_losses_to_retire,
            self.policy.lossy_of_16_to_retire,
        );
        let overtaken = PathEvidence::overtaken(self, id, tx_id);
        self.stats[usize::from(id)].inferred_losses += 1;
        let e = &mut self.hot[usize::from(id)];
        if !first_transmission {
            return false;
        }
        e.suspect_losses = e.suspect_losses.saturating_add(1);
        if overtaken {
            e.recent_losses = e.recent_losses << 1 | 1;
        }
        if e.suspect_losses >= in_a_row
            || (of_16 != 0 && e.recent_losses.count_ones() >= u32::from(of_16))
        {
            e.suspect_losses = 0;
            e.recent_losses = 0;
            return true;
        }
        false
    }

    /// Retire an EV after a silent loss (brief §3.3: ASSUMED_BAD, replaced from the same
    /// plane's backups), unless that would take its plane below the floor of active EVs.
    pub fn retire(&mut self, id: EvId, now: Instant) -> Retire {
        let e = self.hot[usize::from(id)];
        if matches!(e.state, EvState::AssumedBad | EvState::Denied) {
            return Retire::AlreadyOut;
        }
        let plane = usize::from(e.plane);
        let mut replacement = None;
        if e.role == EvRole::Active {
            replacement = self.plane_range(plane).find(|&b| {
                let b = &self.hot[usize::from(b)];
                b.role == EvRole::Backup && b.state == EvState::Good
            });
            if replacement.is_none() && self.active_in_plane[plane] <= self.floor(plane) {
                self.skip(id);
                return Retire::FloorHeld;
            }
        }
        self.take_out(id, EvState::AssumedBad);
        self.start_probing(id, now);
        if let Some(b) = replacement {
            self.activate(b);
        }
        Retire::Retired { replacement }
    }

    /// Every EV of `plane` still in use goes out to be probed (ASSUMED_BAD, whatever the
    /// floor): a plane nobody vouches for carries probes, not data, until they are answered.
    pub fn retire_plane(&mut self, plane: usize, now: Instant) {
        for id in self.plane_range(plane) {
            if !matches!(
                self.hot[usize::from(id)].state,
                EvState::AssumedBad | EvState::Denied
            ) {
                self.take_out(id, EvState::AssumedBad);
                self.start_probing(id, now);
            }
        }
    }

    /// A retired EV's first probe is due after the minimum interval.
    fn start_probing(&mut self, id: EvId, now: Instant) {
        self.cold[usize::from(id)].probe = ProbeState {
            next_at: now + self.probe_min,
            interval: self.probe_min,
            successes: 0,
            outstanding: None,
        };
        self.retired.push(id);
        self.next_probe_at = Some(
            self.next_probe_at
                .map_or(now + self.probe_min, |t| t.min(now + self.probe_min)),
        );
    }

    /// The floor of active EVs in `plane` (`ev_min_active`, API §3.1): the profile's, but at
    /// most a quarter of the plane's EVs (the OCP examples' `ev_count / 4`), so a plane of a
    /// few paths (a small fabric) retires a dead path instead of spraying into it for ever.
    fn floor(&self, plane: usize) -> u16 {
        let evs = self.plane_range(plane).len() as u16;
        self.policy.floor_per_plane.min(evs / 4)
    }

    fn take_out(&mut self, id: EvId, to: EvState) {
        let e = &mut self.hot[usize::from(id)];
        let from = e.state;
        if e.role == EvRole::Active {
            self.active_in_plane[usize::from(e.plane)] -= 1;
            self.generation += 1;
        }
        e.role = EvRole::Out;
        e.state = to;
        // Back from probing, it is a path judged afresh.
        e.recent_losses = 0;
        self.stats[usize::from(id)].state_changes += 1;
        let plane = e.plane;
        if self.reverse[usize::from(plane)] == Some(id) {
            self.reverse[usize::from(plane)] = None;
        }
        self.record(EvChange {
            ev: id,
            plane,
            from,
            to,
        });
    }

    fn activate(&mut self, id: EvId) {
        let e = &mut self.hot[usize::from(id)];
        if e.role != EvRole::Active {
            e.role = EvRole::Active;
            self.active_in_plane[usize::from(e.plane)] += 1;
            self.generation += 1;
        }
    }

    /// Bring an EV back as GOOD: active if its plane is short, else backup.
    fn restore(&mut self, id: EvId) {
        let e = &mut self.hot[usize::from(id)];
        let from = e.state;
        e.state = EvState::Good;
        e.role = EvRole::Backup;
        self.stats[usize::from(id)].state_changes += 1;
        let plane = e.plane;
        if self.active_in_plane[usize::from(plane)] < self.policy.active_per_plane {
            self.activate(id);
        }
        self.record(EvChange {
            ev: id,
            plane,
            from,
            to: EvState::Good,
        });
    }

    fn record(&mut self, change: EvChange) {
        if self.changes.len() == MAX_CHANGES {
            self.changes.pop_front();
            self.changes_dropped += 1;
        }
        self.changes.push_back(change);
    }

    /// Whether state changes wait to be reported.
    #[inline]
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// The next state change to report.
    pub fn pop_change(&mut self) -> Option<EvChange> {
        self.changes.pop_front()
    }

    /// Deny an EV (operator deny-list): never used, never probed.
    pub fn deny(&mut self, id: EvId) {
        if self.hot[usize::from(id)].state == EvState::Denied {
            return;
        }
        let plane = usize::from(self.hot[usize::from(id)].plane);
        let was_active = self.hot[usize::from(id)].role == EvRole::Active;
        self.retired.retain(|&r| r != id);
        if self.cold[usize::from(id)]
            .probe
            .outstanding
            .take()
            .is_some()
        {
            self.probes_out -= 1;
        }
        self.take_out(id, EvState::Denied);
        if was_active
            && let Some(b) = self.plane_range(plane).find(|&b| {
                let b = &self.hot[usize::from(b)];
                b.role == EvRole::Backup && b.state == EvState::Good
            })
        {
            self.activate(b);
        }
    }

    /// Lift a deny: the EV is GOOD again.
    pub fn allow(&mut self, id: EvId) {
        if self.hot[usize::from(id)].state == EvState::Denied {
            self.restore(id);
        }
    }

    /// EVs currently retired (ASSUMED_BAD).
    pub fn retired_count(&self) -> usize {
        self.retired.len()
    }

    /// Active EVs of `plane`.
    pub fn active_in_plane(&self, plane: usize) -> u16 {
        self.active_in_plane.get(plane).copied().unwrap_or(0)
    }

    /// ECMP remap (brief §8.2): draw every EV but the denied ones again, all GOOD. An explicit
    /// table keeps its entropies (the controller's, OCP mrc_ctl.h EV profiles): only states,
    /// roles and path RTTs start over.
    pub fn rerandomize(&mut self, rng: &mut Rng) {
        for id in 0..self.hot.len() as u16 {
            let e = &mut self.hot[usize::from(id)];
            if e.state == EvState::Denied {
                continue;
            }
            if self.kind == EvKind::Ecmp {
                if !self.explicit {
                    e.entropy = ecmp_entropy(self.order, id, rng);
                }
                // A new hash is a new path: its RTT, order and losses are learnt again.
                e.rtt = RttEstimator::new(Duration::ZERO);
                e.recent_losses = 0;
                self.delivered_tx[usize::from(id)] = 0;
            }
            if e.state == EvState::AssumedBad {
                let plane = e.plane;
                e.state = EvState::Good;
                self.stats[usize::from(id)].state_changes += 1;
                self.record(EvChange {
                    ev: id,
                    plane,
                    from: EvState::AssumedBad,
                    to: EvState::Good,
                });
            }
            self.hot[usize::from(id)].state = EvState::Good;
            self.cold[usize::from(id)].probe.outstanding = None;
        }
        self.retired.clear();
        self.skipped.clear();
        self.next_probe_at = None;
        self.probes_out = 0;
        self.reverse.iter_mut().for_each(|r| *r = None);
        // A new hash is a new way back too.
        self.reverse_bad.iter_mut().for_each(|w| *w = 0);
        self.assign_roles();
    }

    /// The EV control packets (SACK, NACK, ACK) leave on through `plane` (brief §3.9): kept
    /// while it stays in service and no lost SACK condemned it ([`Self::reverse_failed`]),
    /// else the plane's next active EV not condemned. (Spreading every SACK over the plane's
    /// EVs instead healed a dead way back as well, but raised a 1024-host UEC fabric's ECN
    /// marks 48 k → 92 k and its trims 0 → 917: issue #14.)
    pub fn reverse(&mut self, plane: usize) -> Option<EvId> {
        let current = *self.reverse.get(plane)?;
        if let Some(id) = current
            && self.hot[usize::from(id)].role == EvRole::Active
            && !self.reverse_bad(id)
        {
            return Some(id);
        }
        let pick = self.next_reverse(plane, current).or_else(|| {
            // Every active EV of the plane was condemned: they get another chance.
            for id in self.plane_range(plane) {
                self.set_reverse_bad(id, false);
            }
            self.next_reverse(plane, current)
        });
        self.reverse[plane] = pick;
        pick
    }

    /// The active EV of `plane` after `from` (its start if none), not condemned.
    fn next_reverse(&self, plane: usize, from: Option<EvId>) -> Option<EvId> {
        let r = self.plane_range(plane);
        let n = r.len() as u16;
        if n == 0 {
            return None;
        }
        let at = from
            .filter(|id| r.contains(id))
            .map_or(n - 1, |id| id - r.start);
        (1..=n)
            .map(|k| r.start + (at + k) % n)
            .find(|&id| self.hot[usize::from(id)].role == EvRole::Active && !self.reverse_bad(id))
    }

    /// A SACK sent on `id` was lost (the peer resent what it acknowledged): no control packet
    /// takes `id` again while its plane has others.
    pub fn reverse_failed(&mut self, id: EvId) {
        if usize::from(id) < self.len() {
            self.set_reverse_bad(id, true);
        }
    }

    fn reverse_bad(&self, id: EvId) -> bool {
        let i = usize::from(id);
        self.reverse_bad[i / 64] & (1 << (i % 64)) != 0
    }

    fn set_reverse_bad(&mut self, id: EvId, bad: bool) {
        let i = usize::from(id);
        let (w, b) = (i / 64, 1u64 << (i % 64));
        if bad {
            self.reverse_bad[w] |= b;
        } else {
            self.reverse_bad[w] &= !b;
        }
    }

    /// Our control packets on `plane` seem lost (the peer resent data we had): move the
    /// plane's reverse EV elsewhere.
    pub fn rotate_reverse(&mut self, plane: usize, rng: &mut Rng) {
        if let Some(slot) = self.reverse.get(plane).copied() {
            let pick = self.random_active(plane, rng, slot).or(slot);
            self.reverse[plane] = pick;
        }
    }

    fn random_active(&self, plane: usize, rng: &mut Rng, avoid: Option<EvId>) -> Option<EvId> {
        let range = self.plane_range(plane);
        let n = self.active_in_plane(plane);
        if n == 0 {
            return None;
        }
        let mut k = rng.below(u32::from(n));
        let mut fallback = None;
        for id in range {
            let e = &self.hot[usize::from(id)];
            if e.role != EvRole::Active {
                continue;
            }
            if k == 0 && Some(id) != avoid {
                return Some(id);
            }
            if Some(id) != avoid {
                fallback = fallback.or(Some(id));
            }
            k = k.saturating_sub(1);
        }
        fallback
    }

    /// Active EVs, in table order.
    pub fn active(&self) -> impl Iterator<Item = EvId> + '_ {
        (0..self.hot.len() as u16).filter(|&id| self.hot[usize::from(id)].role == EvRole::Active)
    }

    /// Heap bytes held.
    pub fn heap_bytes(&self) -> usize {
        self.hot.capacity() * size_of::<HotEv>()
            + self.cold.capacity() * size_of::<ColdEv>()
            + self.stats.capacity() * size_of::<EvStats>()
            + (self.skipped.capacity() + self.retired.capacity() + self.rtt_touched.capacity()) * 2
            + self.changes.capacity() * size_of::<EvChange>()
            + self.planes.capacity() * size_of::<Range<u16>>()
            + self.active_in_plane.capacity() * 2
            + self.reverse.capacity() * size_of::<Option<EvId>>()
            + self.reverse_bad.capacity() * 8
            + self.by_entropy.capacity() * size_of::<(u32, EvId)>()
    }
}

fn new_ev(plane: u8, entropy: u32, path: Option<super::SrPath>) -> Ev {
    Ev {
        plane,
        state: EvState::Good,
        role: EvRole::Backup,
        skip_round: 0,
        entropy,
        path,
        probe: ProbeState {
            next_at: Instant::ZERO,
            interval: Duration::ZERO,
            successes: 0,
            outstanding: None,
        },
        suspect_losses: 0,
        rtt: RttEstimator::new(Duration::ZERO),
        rtt_pending: None,
        stats: EvStats::default(),
    }
}

/// The hot part of a freshly built EV.
fn hot_of(e: &Ev) -> HotEv {
    let mut h = HotEv {
        plane: e.plane,
        state: e.state,
        role: e.role,
        suspect_losses: e.suspect_losses,
        recent_losses: 0,
        rtt_pending_set: false,
        skip_round: e.skip_round,
        entropy: e.entropy,
        rtt_pending_at: Instant::ZERO,
        rtt: e.rtt,
    };
    h.set_rtt_pending(e.rtt_pending);
    h
}

fn ecmp_entropy(order: EntropyOrder, id: EvId, rng: &mut Rng) -> u32 {
    let sport = rng.next_u32() as u16;
    let label = u32::from(id) & ((1 << ECMP_INDEX_BITS) - 1) | (rng.below(16) << ECMP_INDEX_BITS);
    order.join(sport, label)
}

/// `want` distinct indices below `count`, in random order.
fn pick_distinct(count: usize, want: usize, rng: &mut Rng) -> Vec<usize> {
    if want * 2 >= count {
        let mut all: Vec<usize> = (0..count).collect();
        rng.shuffle(&mut all);
        all.truncate(want);
        return all;
    }
    let mut out = Vec::with_capacity(want);
    while out.len() < want {
        let i = rng.below(count as u32) as usize;
        if !out.contains(&i) {
            out.push(i);
        }
    }
    out
}

mod explicit;
mod probe;
#[cfg(test)]
mod tests;
