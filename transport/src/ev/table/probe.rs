//! Probing retired EVs (brief §3.3): each ASSUMED_BAD EV is probed, the probes spaced by the
//! minimum interval while they are answered and backing off exponentially (to the maximum)
//! while they are not; `probe_successes` answers in a row bring it back as GOOD.

use super::EvTable;
use crate::ev::EvId;
use crate::time::{Duration, Instant};

impl EvTable {
    /// A retired EV whose probe is due, on one of `planes` (a due probe on a plane that cannot
    /// send now does not hold back those on the others).
    ///
    /// Inline: every packet asks, and nothing is due is the common answer (issue #13).
    #[inline]
    pub fn probe_due(&mut self, now: Instant, planes: u32) -> Option<EvId> {
        if self.next_probe_at.is_none_or(|t| t > now) {
            return None;
        }
        self.probe_due_search(now, planes)
    }

    /// [`probe_due`](Self::probe_due) once a probe may be due.
    #[inline(never)]
    fn probe_due_search(&mut self, now: Instant, planes: u32) -> Option<EvId> {
        let due = self.retired.iter().copied().find(|&id| {
            let p = &self.cold[usize::from(id)].probe;
            p.outstanding.is_none()
                && p.next_at <= now
                && planes & (1 << self.hot[usize::from(id)].plane) != 0
        });
        if due.is_none() {
            self.refresh_next_probe();
        }
        due
    }

    fn refresh_next_probe(&mut self) {
        self.next_probe_at = self
            .retired
            .iter()
            .filter_map(|&id| {
                let p = &self.cold[usize::from(id)].probe;
                p.outstanding.is_none().then_some(p.next_at)
            })
            .min();
    }

    /// A probe left on `id`.
    pub fn on_probe_sent(&mut self, id: EvId, now: Instant) {
        if self.cold[usize::from(id)]
            .probe
            .outstanding
            .replace(now)
            .is_none()
        {
            self.probes_out += 1;
        }
        self.stats[usize::from(id)].probes_sent += 1;
        self.refresh_next_probe();
    }

    /// Whether `id` has a probe awaiting its answer.
    pub fn probe_outstanding(&self, id: EvId) -> bool {
        self.cold
            .get(usize::from(id))
            .is_some_and(|e| e.probe.outstanding.is_some())
    }

    /// The probe on `id` was answered. `true` when that brought the EV back.
    pub fn on_probe_answer(&mut self, id: EvId, now: Instant) -> bool {
        let needed = self.policy.probe_successes;
        let p = &mut self.cold[usize::from(id)].probe;
        if p.outstanding.take().is_none() {
            return false;
        }
        self.probes_out -= 1;
        self.stats[usize::from(id)].probes_ok += 1;
        p.successes += 1;
        if p.successes < needed {
            p.next_at = now + self.probe_min;
            p.interval = self.probe_min;
            self.refresh_next_probe();
            return false;
        }
        self.retired.retain(|&r| r != id);
        self.restore(id);
        self.refresh_next_probe();
        true
    }

    /// Probes unanswered for `timeout` failed: their EVs start over and back off.
    pub fn on_probe_timeouts(&mut self, now: Instant, timeout: Duration) -> u32 {
        if self.probes_out == 0 {
            return 0;
        }
        let mut failed = 0;
        for &id in &self.retired {
            let p = &mut self.cold[usize::from(id)].probe;
            if p.outstanding.is_some_and(|t| t + timeout <= now) {
                p.outstanding = None;
                p.successes = 0;
                p.interval = Duration((p.interval.as_nanos() * 2).min(self.probe_max.as_nanos()));
                p.next_at = now + p.interval;
                self.stats[usize::from(id)].probes_failed += 1;
                failed += 1;
            }
        }
        self.probes_out -= failed;
        if failed > 0 {
            self.refresh_next_probe();
        }
        failed
    }

    /// When the probe machinery next needs attention: a probe due, or an answer overdue.
    pub fn probe_deadline(&self, timeout: Duration) -> Option<Instant> {
        if self.probes_out == 0 {
            return self.next_probe_at;
        }
        let overdue = self
            .retired
            .iter()
            .filter_map(|&id| {
                self.cold[usize::from(id)]
                    .probe
                    .outstanding
                    .map(|t| t + timeout)
            })
            .min();
        match (self.next_probe_at, overdue) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
