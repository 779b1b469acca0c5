//! A switch (or NIC) egress port in front of a link (brief §5.2, §5.3): a data queue and a
//! strict-priority control queue sharing one buffer limit, randomized ECN marking between two
//! thresholds, trimming on overflow with a DSCP rewrite (a distinct code point at the last
//! hop), tail drop when trimming is off; then serialisation at the link rate, propagation
//! delay, random loss and up/down state.
//!
//! The port reads only what a switch reads: the outer IPv6 DSCP and ECN fields, through
//! `mrc_srv6::wire::Ipv6Packet`.

use std::collections::VecDeque;

use mrc_srv6::wire::{ETHERNET_HEADER_LEN, Ecn, Ipv6Packet};
use mrc_transport::wire::{Trimmed, WireConfig, trim_frame};

use crate::pool::{PacketId, Pool};
use crate::queue::PortId;
use crate::rng::SimRng;

/// What a full data queue does with a frame that does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrimMode {
    /// Tail drop.
    Off,
    /// Cut to the trim size, DSCP rewritten to "trimmed" (NACK TRIMMED).
    InFabric,
    /// Cut, DSCP rewritten to "trimmed at the last hop" (NACK TRIMMED_LASTHOP).
    LastHop,
}

/// Randomized (RED-style) ECN marking: no mark at or below `min_bytes` queued, probability
/// rising linearly to `max_prob` at `max_bytes`, always above.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct EcnProfile {
    pub min_bytes: u64,
    pub max_bytes: u64,
    pub max_prob: f64,
}

/// Everything about a port that does not change during a run (faults aside).
#[derive(Debug, Clone, PartialEq)]
pub struct PortModel {
    pub rate_gbps: u32,
    pub latency_ps: u64,
    /// Buffer shared by both queues, bytes.
    pub buffer_bytes: u64,
    pub ecn: Option<EcnProfile>,
    pub trim: TrimMode,
}

/// Counters of one egress port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PortStats {
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Frames sent from the data queue (not control, not trimmed).
    pub tx_data_frames: u64,
    pub ecn_marked: u64,
    pub trimmed: u64,
    pub tail_dropped: u64,
    /// Lost to the link's random loss.
    pub lost: u64,
    /// Of those, frames of a data class (see [`Self::down_dropped_data`]).
    pub lost_data: u64,
    /// Lost because the link was down (queued, on the wire, or offered).
    pub down_dropped: u64,
    /// Of those, frames of a data class (Writes and probes; not control, not trimmed): what a
    /// dying link took of the transfers, as "packets lost" counts it (issue #14).
    pub down_dropped_data: u64,
    /// Most bytes queued at once.
    pub peak_queue_bytes: u64,
    /// Frames the link delivered twice ([`crate::Impairment::Duplicate`]).
    pub duplicated: u64,
    /// Frames the link delivered with a byte flipped.
    pub corrupted: u64,
    /// Frames the link held back (reordered).
    pub reordered: u64,
}

/// What a link does to frames besides losing them (all 0: nothing).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LinkImpairments {
    pub duplicate: f64,
    pub corrupt: f64,
    pub reorder: f64,
    pub reorder_max_ps: u64,
}

/// How a frame was classified at admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    Data { marked: bool },
    Priority { trimmed: bool },
    Dropped,
}

/// One egress port and its link to `peer`.
#[derive(Debug)]
pub struct Port {
    pub model: PortModel,
    /// The egress port at the other end of the link (same link, other direction).
    pub peer: PortId,
    pub up: bool,
    /// Bumped when the link goes down: frames on the wire from an earlier epoch are lost.
    pub epoch: u32,
    /// Random loss probability per frame on the link (per-link loss and gray links).
    pub loss: f64,
    /// Duplication, corruption and reordering on the link.
    pub impair: LinkImpairments,
    /// The frame being serialised.
    pub busy: Option<PacketId>,
    /// Queued frames with their lengths (serialising one needs nothing from the pool).
    data: VecDeque<(PacketId, u32)>,
    prio: VecDeque<(PacketId, u32)>,
    data_bytes: u64,
    prio_bytes: u64,
    pub stats: PortStats,
}

impl Port {
    pub fn new(model: PortModel, peer: PortId) -> Self {
        Self {
            model,
            peer,
            up: true,
            epoch: 0,
            loss: 0.0,
            impair: LinkImpairments::default(),
            busy: None,
            data: VecDeque::new(),
            prio: VecDeque::new(),
            data_bytes: 0,
            prio_bytes: 0,
            stats: PortStats::default(),
        }
    }

    /// Bytes queued (not counting the frame on the wire).
    pub fn queued_bytes(&self) -> u64 {
        self.data_bytes + self.prio_bytes
    }

    /// Frames queued (not counting the frame on the wire).
    pub fn queued_frames(&self) -> usize {
        self.data.len() + self.prio.len()
    }

    /// Offer a frame (MRC 1.0 switch behaviour, brief §5.2–§5.3). On `Dropped` the frame has
    /// been returned to the pool.
    pub fn admit(
        &mut self,
        pkt: PacketId,
        pool: &mut Pool,
        wire: &WireConfig,
        rng: &mut SimRng,
    ) -> Admission {
        if !self.up {
            self.stats.down_dropped += 1;
            let ip = pool.head(pkt).get(ETHERNET_HEADER_LEN..).unwrap_or(&[]);
            self.stats.down_dropped_data += u64::from(is_data_class(ip, wire));
            pool.free(pkt);
            return Admission::Dropped;
        }
        let len = pool.len(pkt) as u64;
        let total = self.data_bytes + self.prio_bytes;
        let Some(Ok(mut ip)) = pool
            .head_mut(pkt)
            .get_mut(ETHERNET_HEADER_LEN..)
            .map(Ipv6Packet::new_checked)
        else {
            // Not IPv6: a switch has no class for it.
            self.stats.tail_dropped += 1;
            pool.free(pkt);
            return Admission::Dropped;
        };
        let dscp = ip.dscp();
        // Control and trimmed headers ride the strict-priority queue, never trimmed or marked.
        if dscp == wire.dscp.control || wire.dscp.trimmed(dscp).is_some() {
            if total + len > self.model.buffer_bytes {
                self.stats.tail_dropped += 1;
                pool.free(pkt);
                return Admission::Dropped;
            }
            self.push_prio(pkt, len);
            return Admission::Priority { trimmed: false };
        }
        if total + len > self.model.buffer_bytes {
            let trimmable = dscp == wire.dscp.trimmable || dscp == wire.dscp.retransmission;
            let at = match self.model.trim {
                TrimMode::Off => None,
                TrimMode::InFabric => Some(Trimmed::InFabric),
                TrimMode::LastHop => Some(Trimmed::LastHop),
            };
            let cut = at
                .filter(|_| trimmable && len > u64::from(wire.trim_size))
                .and_then(|at| pool.edit(pkt, |f| trim_frame(f, wire, at)).ok());
            if let Some(keep) = cut {
                // The wire module's trim: cut to the trim size, DSCP rewritten, IPv6 payload
                // length fixed (brief §2.15); the header left moves to a small buffer.
                self.stats.trimmed += 1;
                // The trimmed header has its own small headroom: the priority queue is never
                // full of data, so only a flood of headers can overflow it.
                if self.prio_bytes + keep as u64 > self.model.buffer_bytes {
                    self.stats.tail_dropped += 1;
                    pool.free(pkt);
                    return Admission::Dropped;
                }
                self.push_prio(pkt, keep as u64);
                return Admission::Priority { trimmed: true };
            }
            self.stats.tail_dropped += 1;
            pool.free(pkt);
            return Admission::Dropped;
        }
        let marked = matches!(ip.ecn(), Ecn::Ect0 | Ecn::Ect1)
            && self.model.ecn.is_some_and(|e| {
                let q = self.data_bytes;
                if q <= e.min_bytes {
                    false
                } else if q >= e.max_bytes {
                    true
                } else {
                    let p =
                        e.max_prob * (q - e.min_bytes) as f64 / (e.max_bytes - e.min_bytes) as f64;
                    rng.chance(p)
                }
            });
        if marked {
            ip.set_ecn(Ecn::Ce);
            self.stats.ecn_marked += 1;
        }
        self.data.push_back((pkt, len as u32));
        self.data_bytes += len;
        self.note_peak();
        Admission::Data { marked }
    }

    fn push_prio(&mut self, pkt: PacketId, len: u64) {
        self.prio.push_back((pkt, len as u32));
        self.prio_bytes += len;
        self.note_peak();
    }

    fn note_peak(&mut self) {
        self.stats.peak_queue_bytes = self.stats.peak_queue_bytes.max(self.queued_bytes());
    }

    /// Take the next frame to serialise, priority first, with its length; `true` with a
    /// data-queue frame.
    pub fn dequeue(&mut self) -> Option<(PacketId, usize, bool)> {
        if let Some((p, len)) = self.prio.pop_front() {
            self.prio_bytes -= u64::from(len);
            return Some((p, len as usize, false));
        }
        let (p, len) = self.data.pop_front()?;
        self.data_bytes -= u64::from(len);
        Some((p, len as usize, true))
    }

    /// The link goes down: everything queued and on the wire is lost.
    pub fn go_down(&mut self, pool: &mut Pool) {
        let lost = self.data.len() + self.prio.len();
        self.stats.down_dropped += lost as u64;
        // The data queue holds data classes only; the priority queue control and trimmed.
        self.stats.down_dropped_data += self.data.len() as u64;
        for (p, _) in self.data.drain(..).chain(self.prio.drain(..)) {
            pool.free(p);
        }
        self.data_bytes = 0;
        self.prio_bytes = 0;
        self.up = false;
        self.epoch = self.epoch.wrapping_add(1);
    }
}

/// A frame of a data class (a Write or probe on a data DSCP, not trimmed), by its outer DSCP,
/// as a switch classifies it. `ip`: the frame from its IPv6 header on.
pub(crate) fn is_data_class(ip: &[u8], wire: &WireConfig) -> bool {
    Ipv6Packet::new_checked(ip).is_ok_and(|ip| {
        let d = ip.dscp();
        let w = &wire.dscp;
        d == w.trimmable || d == w.retransmission || d == w.no_trim
    })
}
