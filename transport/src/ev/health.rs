//! EV health in one table (brief §3.3): every event the responder's feedback, the requester's
//! loss rules, the timers or the ports report about a path, and what it does to the EV, in
//! [`Paths::react`]. The per-EV and per-plane counters of the event are kept here too.
//!
//! A RoCE-like QP (go-back-N, one path) has no path health: its events are counted and reach
//! congestion control elsewhere, but never change an EV's state.

use super::{EvId, EvSelector, Paths, Retire};
use crate::rng::Rng;
use crate::stats::{PlaneStats, QpStats};
use crate::time::{Duration, Instant};

/// What happened to an EV (or to every EV of a plane).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EvEvent {
    /// A SACK acknowledged a packet sent on `ev` at `sent_at`; `first`: its first transmission
    /// (an RTT sample); `clean`: the SACK carried no congestion mark for it.
    Delivered {
        ev: EvId,
        /// The transmission's id (its place in the QP's send order).
        tx_id: u64,
        sent_at: Instant,
        first: bool,
        clean: bool,
    },
    /// A transport ACK completed a message with a packet sent on `ev`.
    DeliveredByAck { ev: EvId },
    /// A SACK echoed `ev` with M = SKIP_ONCE: its forward path was ECN-marked.
    EcnEcho { ev: EvId },
    /// A SACK echoed `ev` with M = ALWAYS_SKIP: the responder judges it persistently bad.
    AlwaysSkip { ev: EvId },
    /// NACK TRIMMED: a switch on `ev`'s path trimmed the packet.
    Trimmed { ev: EvId },
    /// NACK TRIMMED_LASTHOP: the destination's last hop trimmed it.
    TrimmedLastHop { ev: EvId },
    /// Another retriable NACK naming `ev` (out of window, no resource...).
    Nacked { ev: EvId },
    /// Transmission `tx_id` on `ev` was inferred lost from SACK holes (`first`: a first
    /// transmission).
    InferredLoss { ev: EvId, tx_id: u64, first: bool },
    /// A packet on `ev` outlived its per-packet path-failure timeout.
    Timeout { ev: EvId },
    /// A SACK answered (PR) the probe on `ev`.
    ProbeAnswered { ev: EvId },
    /// Probes unanswered for `timeout` failed.
    ProbesOverdue { timeout: Duration },
    /// The port of `plane` (ours, or the peer's by its PORT_STATUS_UPDATE) went down.
    PortDown { plane: u8 },
    /// The peer's port of `plane` was reported down and no update said it came back before
    /// its recheck.
    PeerPortUnconfirmed { plane: u8 },
}

impl Paths {
    /// What `event` does to the EV it names (brief §3.3's table, each arm with its section).
    /// Inlined: every caller names its event, so each call site keeps just its arm (a delivery
    /// is one per acknowledged packet).
    #[inline(always)]
    pub(crate) fn react(
        &mut self,
        event: EvEvent,
        now: Instant,
        rng: &mut Rng,
        stats: &mut QpStats,
        planes: &mut [PlaneStats],
    ) {
        let health = !self.gbn;
        match event {
            // §3.6, §3.7: the path works, whatever was inferred before; a first transmission
            // is an RTT sample of it (Karn). The selector recycles clean EVs first (§8.2).
            EvEvent::Delivered {
                ev,
                tx_id,
                sent_at,
                first,
                clean,
            } => {
                self.table.on_delivered(ev, tx_id, sent_at, first);
                self.selector.on_delivered(ev, clean);
            }
            // §2.13: a message completion says nothing of timing or of one path's health.
            EvEvent::DeliveredByAck { ev } => self.table.stats_mut(ev).delivered += 1,
            // §3.3: SKIP_ONCE → SKIP for the rest of the rotation (§3.2 ends it).
            EvEvent::EcnEcho { ev } => {
                self.table.stats_mut(ev).ecn += 1;
                stats.ecn_echoes += 1;
                if let Some(p) = plane(planes, self.table.hot(ev).plane) {
                    p.ecn += 1;
                }
                if health {
                    self.table.skip(ev);
                }
            }
            // §3.3: ALWAYS_SKIP → ASSUMED_BAD (the responder's verdict, not a loss: no remap).
            EvEvent::AlwaysSkip { ev } => {
                if health {
                    let _: Retire = self.table.retire(ev, now);
                }
            }
            // §3.3, §5.3: a trim in the fabric → SKIP; the packet is resent elsewhere (§2.10).
            EvEvent::Trimmed { ev } => {
                self.count_nack(ev, true, planes);
                if health {
                    self.table.skip(ev);
                }
            }
            // §3.3, §4.3: a last-hop trim is incast at the destination, not the path's fault.
            EvEvent::TrimmedLastHop { ev } => self.count_nack(ev, true, planes),
            // §2.10: other NACKs are about the responder, not the path.
            EvEvent::Nacked { ev } => self.count_nack(ev, false, planes),
            // §3.6, §3.7: a hole may be reordering; only repeated first transmissions lost on
            // the EV with nothing delivered between are a silent loss, a path failure.
            EvEvent::InferredLoss { ev, tx_id, first } => {
                if let Some(p) = plane(planes, self.plane_of(ev)) {
                    p.inferred_losses += 1;
                }
                if self.table.on_inferred_loss(ev, tx_id, first) && health {
                    self.path_failure(ev, now, rng, stats);
                }
            }
            // §3.3, §3.7: a timeout with no SACK and no trim is the strongest evidence: the EV
            // fails at once.
            EvEvent::Timeout { ev } => {
                self.table.stats_mut(ev).timeouts += 1;
                stats.timeouts += 1;
                if let Some(p) = plane(planes, self.plane_of(ev)) {
                    p.timeouts += 1;
                }
                if health {
                    self.path_failure(ev, now, rng, stats);
                }
            }
            // §2.11, §3.3: enough answered probes in a row bring a retired EV back as GOOD.
            EvEvent::ProbeAnswered { ev } => {
                if self.table.probe_outstanding(ev) {
                    stats.probes_ok += 1;
                    self.table.on_probe_answer(ev, now);
                }
            }
            // §3.3 [I]: an unanswered probe starts the count over and backs off.
            EvEvent::ProbesOverdue { timeout } => {
                let failed = self.table.on_probe_timeouts(now, timeout);
                stats.probes_failed += u64::from(failed);
            }
            // §3.10: no EV changes state: the selector passes over the plane while its port
            // is down (send-time choice, §3.2), and the requester resends what was in flight
            // through it elsewhere.
            EvEvent::PortDown { plane } => {
                let _ = plane;
            }
            // §3.10: a plane nobody vouches for carries probes, not data, until they are
            // answered (whatever the floor).
            EvEvent::PeerPortUnconfirmed { plane } => {
                self.table.retire_plane(usize::from(plane), now);
            }
        }
    }

    /// Whether the last event redrew every EV (an ECMP remap), once.
    pub(crate) fn take_remap(&mut self) -> bool {
        core::mem::take(&mut self.remapped)
    }

    fn plane_of(&self, ev: EvId) -> u8 {
        self.table.get_hot(ev).map_or(0, |e| e.plane)
    }

    fn count_nack(&mut self, ev: EvId, trim: bool, planes: &mut [PlaneStats]) {
        let s = self.table.stats_mut(ev);
        if trim {
            s.trims += 1;
        } else {
            s.nacks += 1;
        }
        if let Some(p) = plane(planes, self.table.hot(ev).plane) {
            p.trims += u64::from(trim);
            p.nacks += u64::from(!trim);
        }
    }

    /// A silent loss on `ev` (§3.3): in ECMP mode first ask whether it completes a burst, a
    /// remap of the fabric's hashing (§8.2: every EV is drawn again, and the QP reports it:
    /// [`Self::take_remap`]); otherwise retire the EV (ASSUMED_BAD, replaced from its plane's
    /// backups, §3.1's floor held).
    fn path_failure(&mut self, ev: EvId, now: Instant, rng: &mut Rng, stats: &mut QpStats) {
        let plane = self.plane_of(ev);
        if let Some(remap) = self.remap.as_mut()
            && remap.on_failure(now, ev, plane)
        {
            self.table.rerandomize(rng);
            stats.remaps += 1;
            self.remapped = true;
            return;
        }
        let _: Retire = self.table.retire(ev, now);
    }
}

fn plane(planes: &mut [PlaneStats], p: u8) -> Option<&mut PlaneStats> {
    planes.get_mut(usize::from(p))
}
