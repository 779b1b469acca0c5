//! Counters: plain structs per QP, per plane and per EV, plus the endpoint's drop counters by
//! cause. Updating them is an add on the hot path; folding them into Prometheus is the apps'
//! business (docs/STYLE.md rule 13).

use core::fmt;

/// Counters of one EV (one path) of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EvStats {
    /// Data packets sent on this EV (first transmissions and retransmissions).
    pub packets: u64,
    pub bytes: u64,
    /// Retransmissions sent on this EV.
    pub retransmits: u64,
    /// Packets sent on this EV that were acknowledged.
    pub delivered: u64,
    /// NACK TRIMMED / TRIMMED_LASTHOP naming this EV.
    pub trims: u64,
    /// Other NACKs naming this EV.
    pub nacks: u64,
    /// SACKs echoing this EV with an ECN verdict.
    pub ecn: u64,
    /// Packets on this EV declared lost by the per-packet timeout.
    pub timeouts: u64,
    /// Packets on this EV declared lost from SACK holes.
    pub inferred_losses: u64,
    pub state_changes: u64,
    pub probes_sent: u64,
    pub probes_ok: u64,
    pub probes_failed: u64,
    /// Smoothed RTT of this path, nanoseconds (0 before any sample).
    pub srtt_ns: u64,
    /// RTT samples taken on this path.
    pub rtt_samples: u64,
}

/// Retransmissions by cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RetransmitCauses {
    /// NACK TRIMMED or TRIMMED_LASTHOP.
    pub trim: u64,
    /// Another retriable NACK (out of window, no resource...).
    pub nack: u64,
    /// Inferred from SACK holes (RACK).
    pub inferred: u64,
    /// Per-packet path-failure timeout.
    pub timeout: u64,
    /// The long QP retry timer.
    pub retry: u64,
    /// The local port under its EV went down.
    pub port_down: u64,
    /// Go-back-N rewind (RoCE-like mode).
    pub rewind: u64,
    /// A tail loss probe (RFC 8985 §7): the flight went quiet with packets unacknowledged, and
    /// its oldest was resent on a path whose feedback came back (no loss was declared).
    pub tail_probe: u64,
}

impl RetransmitCauses {
    /// All causes together.
    pub const fn total(&self) -> u64 {
        self.trim
            + self.nack
            + self.inferred
            + self.timeout
            + self.retry
            + self.port_down
            + self.rewind
            + self.tail_probe
    }

    /// Each cause with its name (metrics labels, JSON keys).
    pub const fn by_cause(&self) -> [(&'static str, u64); 8] {
        [
            ("trim", self.trim),
            ("nack", self.nack),
            ("inferred", self.inferred),
            ("timeout", self.timeout),
            ("retry", self.retry),
            ("port_down", self.port_down),
            ("rewind", self.rewind),
            ("tail_probe", self.tail_probe),
        ]
    }

    /// Add `other`'s counts to these.
    pub fn add(&mut self, other: &Self) {
        self.trim += other.trim;
        self.nack += other.nack;
        self.inferred += other.inferred;
        self.timeout += other.timeout;
        self.retry += other.retry;
        self.port_down += other.port_down;
        self.rewind += other.rewind;
        self.tail_probe += other.tail_probe;
    }
}

/// NACKs by reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct NackCounts {
    pub trimmed: u64,
    pub trimmed_last_hop: u64,
    pub out_of_window: u64,
    /// NO_BITMAP, NO_PKT_BUFFER, NO_RESOURCE.
    pub resource: u64,
    /// UNEXP_EVENT (fatal).
    pub unexpected: u64,
    pub other: u64,
}

impl NackCounts {
    /// Count one NACK (sent or received) under its reason.
    pub fn count(&mut self, reason: crate::wire::NackReason) {
        use crate::wire::NackReason as R;
        match reason {
            R::Trimmed => self.trimmed += 1,
            R::TrimmedLastHop => self.trimmed_last_hop += 1,
            R::PsnOutOfWindow => self.out_of_window += 1,
            R::NoBitmap | R::NoPktBuffer | R::NoResource => self.resource += 1,
            R::UnexpectedEvent => self.unexpected += 1,
            R::Unknown(_) => self.other += 1,
        }
    }

    /// All reasons together.
    pub const fn total(&self) -> u64 {
        self.trimmed
            + self.trimmed_last_hop
            + self.out_of_window
            + self.resource
            + self.unexpected
            + self.other
    }
}

/// Counters of one QP, requester and responder side.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct QpStats {
    // Requester.
    /// Data packets sent, first transmissions only.
    pub data_packets_sent: u64,
    /// Payload bytes sent, first transmissions only.
    pub data_bytes_sent: u64,
    pub retransmits: RetransmitCauses,
    pub sacks_received: u64,
    pub nacks_received: NackCounts,
    pub acks_received: u64,
    /// SACKs whose verdict said the forward path was ECN-marked.
    pub ecn_echoes: u64,
    /// Per-packet path-failure timeouts.
    pub timeouts: u64,
    /// Expiries of the long QP retry timer.
    pub retry_timeouts: u64,
    pub ev_state_changes: u64,
    pub probes_sent: u64,
    pub probes_ok: u64,
    pub probes_failed: u64,
    /// ECMP mode: bursts of failures read as a remap, EV set re-randomized.
    pub remaps: u64,
    /// Send work requests completed successfully.
    pub messages_completed: u64,
    /// Dynamic MPR (brief §3.5): the MPR the peer's SACKs last advertised, in PSNs (0: none,
    /// or the peer has dynamic MPR off). Recorded even when this QP's requester ignores it.
    pub mpr_peer: u64,
    /// The PSN window new data is sent in now: the RTS MPR, or the smaller advertised one
    /// when dynamic MPR is on at both ends (0 before RTS).
    pub mpr_window: u64,
    /// Times an advertisement made that window smaller / larger.
    pub mpr_shrinks: u64,
    pub mpr_grows: u64,
    /// Times new data stopped because the window was full (static or dynamic MPR).
    pub mpr_pauses: u64,
    // Responder.
    pub data_packets_received: u64,
    pub data_bytes_placed: u64,
    pub duplicates: u64,
    pub out_of_window: u64,
    /// Trimmed headers received (never placed).
    pub trimmed_received: u64,
    pub ecn_marked_received: u64,
    /// Go-back-N mode: out-of-order packets dropped.
    pub out_of_sequence: u64,
    pub sacks_sent: u64,
    pub nacks_sent: NackCounts,
    pub acks_sent: u64,
    pub probes_answered: u64,
    /// Write-with-Immediate receive completions delivered.
    pub imm_delivered: u64,
    /// Writes refused by the memory checks (bad rkey, bounds, access).
    pub access_errors: u64,
    /// Dynamic MPR: the MPR this QP's SACKs advertise, in PSNs (0: dynamic MPR off).
    pub mpr_advertised: u64,
    // RTT.
    pub srtt_ns: u64,
    pub min_rtt_ns: u64,
    pub rtt_samples: u64,
}

/// Counters of one plane (one local port).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlaneStats {
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub retransmits: u64,
    pub trims: u64,
    pub nacks: u64,
    pub ecn: u64,
    /// Packets sent on the plane declared lost by the per-packet timeout.
    pub timeouts: u64,
    /// Packets sent on the plane inferred lost from SACK holes.
    pub inferred_losses: u64,
    /// EVs of this plane moved to ASSUMED_BAD.
    pub evs_retired: u64,
    /// EVs of this plane brought back by probes.
    pub evs_restored: u64,
    pub port_down_events: u64,
}

/// Why a received frame (or part of it) was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DropReason {
    /// Shorter than its headers say.
    Truncated,
    /// A field the format does not allow, or inconsistent lengths.
    Malformed,
    /// Not an MRC frame (not IPv6, not the MRC UDP port, unknown opcode).
    NotMrc,
    BadIcrc,
    /// Addressed to another NIC.
    NotForUs,
    UnknownQp,
    /// The QP's state does not accept it.
    WrongState,
    BadRkey,
    OutOfBounds,
    NoAccess,
    OutOfWindow,
    Duplicate,
    /// A SACK/NACK/ACK naming PSNs or messages never sent.
    BadAck,
    /// Feedback echoing an EV this QP does not have (stale or forged).
    UnknownEv,
    /// A trimmed frame that lost the headers needed to NACK it.
    TrimmedUnusable,
    /// A Write-with-Immediate beyond the negotiated limit.
    ImmLimit,
    /// A packet of a kind the receiver does not expect (e.g. an endpoint response never asked).
    Unexpected,
    /// A payload longer than the QP's MTU.
    Oversize,
    /// From a NIC other than the QP's peer.
    WrongPeer,
    /// A NACK about a packet already acknowledged (its retransmission was trimmed after the
    /// original got through).
    Stale,
}

impl DropReason {
    /// Every reason, in counter order.
    pub const ALL: [Self; 20] = [
        Self::Truncated,
        Self::Malformed,
        Self::NotMrc,
        Self::BadIcrc,
        Self::NotForUs,
        Self::UnknownQp,
        Self::WrongState,
        Self::BadRkey,
        Self::OutOfBounds,
        Self::NoAccess,
        Self::OutOfWindow,
        Self::Duplicate,
        Self::BadAck,
        Self::UnknownEv,
        Self::TrimmedUnusable,
        Self::ImmLimit,
        Self::Unexpected,
        Self::Oversize,
        Self::WrongPeer,
        Self::Stale,
    ];

    /// Snake-case name for reports and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            Self::Truncated => "truncated",
            Self::Malformed => "malformed",
            Self::NotMrc => "not_mrc",
            Self::BadIcrc => "bad_icrc",
            Self::NotForUs => "not_for_us",
            Self::UnknownQp => "unknown_qp",
            Self::WrongState => "wrong_state",
            Self::BadRkey => "bad_rkey",
            Self::OutOfBounds => "out_of_bounds",
            Self::NoAccess => "no_access",
            Self::OutOfWindow => "out_of_window",
            Self::Duplicate => "duplicate",
            Self::BadAck => "bad_ack",
            Self::UnknownEv => "unknown_ev",
            Self::TrimmedUnusable => "trimmed_unusable",
            Self::ImmLimit => "imm_limit",
            Self::Unexpected => "unexpected",
            Self::Oversize => "oversize",
            Self::WrongPeer => "wrong_peer",
            Self::Stale => "stale",
        }
    }
}

impl fmt::Display for DropReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Drop counters, one per [`DropReason`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DropCounters([u64; DropReason::ALL.len()]);

impl DropCounters {
    /// Count one drop.
    #[inline]
    pub fn add(&mut self, reason: DropReason) {
        self.0[reason as usize] += 1;
    }

    /// Drops for one reason.
    pub fn get(&self, reason: DropReason) -> u64 {
        self.0[reason as usize]
    }

    /// All drops.
    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    /// `(reason, count)` for every reason.
    pub fn iter(&self) -> impl Iterator<Item = (DropReason, u64)> + '_ {
        DropReason::ALL.iter().map(|&r| (r, self.get(r)))
    }
}

/// Counters of the whole endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EndpointStats {
    pub frames_received: u64,
    pub frames_sent: u64,
    pub drops: DropCounters,
    /// Events dropped because `poll_event` was not drained.
    pub events_dropped: u64,
    /// Completions that did not fit a CQ.
    pub cq_overruns: u64,
    /// Endpoint operations (port status updates, EV probes) received.
    pub endpoint_ops_received: u64,
    /// NACKs or SACKs that could not be queued (bounded queues full).
    pub control_dropped: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drop_counters_index_every_reason() {
        let mut d = DropCounters::default();
        for (i, r) in DropReason::ALL.iter().enumerate() {
            assert_eq!(*r as usize, i, "ALL is in declaration order");
            d.add(*r);
        }
        d.add(DropReason::BadIcrc);
        assert_eq!(d.get(DropReason::BadIcrc), 2);
        assert_eq!(d.total(), DropReason::ALL.len() as u64 + 1);
        assert_eq!(DropReason::OutOfWindow.to_string(), "out_of_window");
    }
}
