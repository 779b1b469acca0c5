//! What every plane, QP and EV of the hosts did: a snapshot of the engines' counter structs
//! (`qp_stats`, `plane_stats`, `ev_stats`), the same whichever backend ran the engines. The
//! end-of-run tables, the JSON document and the Prometheus endpoint all read it.

use mrc_transport::ev::{EvInfo, EvState};
use mrc_transport::stats::{EndpointStats, PlaneStats, QpStats};
use mrc_transport::verbs::{QpState, Qpn};

/// Counters of one plane of one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct PlaneRow {
    pub plane: u8,
    /// Data payload bytes and packets sent (retransmissions included).
    pub tx_bytes: u64,
    pub tx_packets: u64,
    /// Data payload bytes and packets received and placed (duplicates excluded).
    pub rx_bytes: u64,
    pub rx_packets: u64,
    pub retransmits: u64,
    pub trims: u64,
    pub nacks: u64,
    pub ecn: u64,
    pub timeouts: u64,
    pub inferred_losses: u64,
    pub evs_retired: u64,
    pub evs_restored: u64,
    pub port_down_events: u64,
}

impl PlaneRow {
    pub fn new(plane: u8, s: &PlaneStats) -> Self {
        Self {
            plane,
            tx_bytes: s.bytes_sent,
            tx_packets: s.packets_sent,
            rx_bytes: s.bytes_received,
            rx_packets: s.packets_received,
            retransmits: s.retransmits,
            trims: s.trims,
            nacks: s.nacks,
            ecn: s.ecn,
            timeouts: s.timeouts,
            inferred_losses: s.inferred_losses,
            evs_retired: s.evs_retired,
            evs_restored: s.evs_restored,
            port_down_events: s.port_down_events,
        }
    }

    /// Add another host's row of the same plane.
    /// Packets declared lost: by the per-packet timeout and inferred from SACK holes, as
    /// the per-EV table counts them.
    pub const fn losses(&self) -> u64 {
        self.timeouts + self.inferred_losses
    }

    pub fn add(&mut self, o: &Self) {
        self.tx_bytes += o.tx_bytes;
        self.tx_packets += o.tx_packets;
        self.rx_bytes += o.rx_bytes;
        self.rx_packets += o.rx_packets;
        self.retransmits += o.retransmits;
        self.trims += o.trims;
        self.nacks += o.nacks;
        self.ecn += o.ecn;
        self.timeouts += o.timeouts;
        self.inferred_losses += o.inferred_losses;
        self.evs_retired += o.evs_retired;
        self.evs_restored += o.evs_restored;
        self.port_down_events += o.port_down_events;
    }
}

/// Counters of one EV of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct EvRow {
    pub host: u32,
    pub qpn: u32,
    pub ev: u16,
    pub plane: u8,
    /// The uSID path (outer DA) of the EV in SRv6 mode.
    pub path: Option<std::net::Ipv6Addr>,
    #[serde(serialize_with = "ser_state")]
    pub state: EvState,
    pub packets: u64,
    /// Of those, acknowledged (they crossed the EV's path).
    pub delivered: u64,
    /// Probes sent on the EV (besides data packets).
    pub probes: u64,
    /// Of those, answered.
    pub probes_ok: u64,
    pub bytes: u64,
    pub retransmits: u64,
    pub trims: u64,
    pub nacks: u64,
    pub ecn: u64,
    /// Packets declared lost by the per-packet timeout (silent loss: path failure).
    pub timeouts: u64,
    /// Packets declared lost from SACK holes (RACK).
    pub inferred_losses: u64,
    pub state_changes: u64,
    pub srtt_ns: u64,
}

fn ser_state<S: serde::Serializer>(s: &EvState, ser: S) -> Result<S::Ok, S::Error> {
    ser.collect_str(s)
}

/// The Prometheus value of an EV state (documented in docs/metrics.md).
pub const fn ev_state_value(s: EvState) -> i64 {
    match s {
        EvState::Good => 0,
        EvState::Skip => 1,
        EvState::AssumedBad => 2,
        EvState::Denied => 3,
    }
}

impl EvRow {
    pub fn new(host: u32, qpn: Qpn, e: &EvInfo) -> Self {
        let s = &e.stats;
        Self {
            host,
            qpn: qpn.0,
            ev: e.id,
            plane: e.plane,
            path: e.path.map(|p| p.outer_da),
            state: e.state,
            packets: s.packets,
            delivered: s.delivered,
            probes: s.probes_sent,
            probes_ok: s.probes_ok,
            bytes: s.bytes,
            retransmits: s.retransmits,
            trims: s.trims,
            nacks: s.nacks,
            ecn: s.ecn,
            timeouts: s.timeouts,
            inferred_losses: s.inferred_losses,
            state_changes: s.state_changes,
            srtt_ns: s.srtt_ns,
        }
    }

    /// Packets declared lost, whatever said so (the tables' `losses`).
    pub const fn losses(&self) -> u64 {
        self.timeouts + self.inferred_losses
    }

    /// It carried data, saw trouble or is not GOOD.
    pub fn is_active(&self) -> bool {
        self.packets > 0 || self.state_changes > 0 || self.state != EvState::Good
    }

    /// Add the same EV's counters from another run (a size sweep).
    pub fn add(&mut self, o: &Self) {
        self.state = o.state;
        self.packets += o.packets;
        self.delivered += o.delivered;
        self.probes += o.probes;
        self.probes_ok += o.probes_ok;
        self.bytes += o.bytes;
        self.retransmits += o.retransmits;
        self.trims += o.trims;
        self.nacks += o.nacks;
        self.ecn += o.ecn;
        self.timeouts += o.timeouts;
        self.inferred_losses += o.inferred_losses;
        self.state_changes += o.state_changes;
        self.srtt_ns = o.srtt_ns;
    }
}

/// Counters of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct QpRow {
    pub host: u32,
    pub qpn: u32,
    #[serde(skip)]
    pub stats: QpStats,
    /// From query_qp, where the backend reads it (`mrc_qp_state`).
    #[serde(skip)]
    pub state: Option<QpState>,
}

/// The Prometheus value of a QP state: libibverbs' `ibv_qp_state` numbering (RESET 0, INIT 1,
/// RTR 2, RTS 3, SQD 4, SQE 5, ERR 6; the engine has no SQD/SQE).
pub const fn qp_state_value(s: QpState) -> i64 {
    match s {
        QpState::Reset => 0,
        QpState::Init => 1,
        QpState::Rtr => 2,
        QpState::Rts => 3,
        QpState::Error => 6,
    }
}

/// One host's counters.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct HostCounters {
    pub host: u32,
    pub planes: Vec<PlaneRow>,
    pub qps: Vec<QpRow>,
    pub evs: Vec<EvRow>,
    /// Frames dropped by the engine, all reasons.
    pub drops: u64,
    #[serde(skip)]
    pub endpoint: EndpointStats,
}

impl HostCounters {
    /// From the engine's counter structs.
    pub fn new(
        host: u32,
        planes: &[PlaneStats],
        qps: &[(Qpn, QpStats, Vec<EvInfo>)],
        endpoint: EndpointStats,
    ) -> Self {
        Self {
            host,
            planes: planes
                .iter()
                .enumerate()
                .map(|(p, s)| PlaneRow::new(p as u8, s))
                .collect(),
            qps: qps
                .iter()
                .map(|(q, s, _)| QpRow {
                    host,
                    qpn: q.0,
                    stats: *s,
                    state: None,
                })
                .collect(),
            evs: qps
                .iter()
                .flat_map(|(q, _, evs)| evs.iter().map(move |e| EvRow::new(host, *q, e)))
                .collect(),
            drops: endpoint.drops.total(),
            endpoint,
        }
    }

    /// Label every row `host` (mrc-coll: the rank, not the simulated host).
    pub fn relabel(&mut self, host: u32) {
        self.host = host;
        self.qps.iter_mut().for_each(|q| q.host = host);
        self.evs.iter_mut().for_each(|e| e.host = host);
    }

    /// Record every QP's state, as `state` (the backend's query_qp) says.
    pub fn set_qp_states(&mut self, state: impl Fn(Qpn) -> Option<QpState>) {
        for q in &mut self.qps {
            q.state = state(Qpn(q.qpn));
        }
    }

    /// Add the counters of a later run of the same host (a size sweep builds a fresh fabric
    /// per size; the tables show the whole sweep).
    pub fn add(&mut self, o: &Self) {
        for (a, b) in self.planes.iter_mut().zip(&o.planes) {
            a.add(b);
        }
        for (i, q) in o.qps.iter().enumerate() {
            if let Some(a) = self.qps.get_mut(i) {
                add_qp_stats(&mut a.stats, &q.stats);
                a.state = q.state.or(a.state);
            }
        }
        for (a, b) in self.evs.iter_mut().zip(&o.evs) {
            a.add(b);
        }
        self.drops += o.drops;
    }
}

fn add_qp_stats(a: &mut QpStats, b: &QpStats) {
    a.data_packets_sent += b.data_packets_sent;
    a.data_bytes_sent += b.data_bytes_sent;
    a.retransmits.add(&b.retransmits);
    let (n, m) = (&mut a.nacks_received, &b.nacks_received);
    n.trimmed += m.trimmed;
    n.trimmed_last_hop += m.trimmed_last_hop;
    n.out_of_window += m.out_of_window;
    n.resource += m.resource;
    n.unexpected += m.unexpected;
    n.other += m.other;
    a.ecn_echoes += b.ecn_echoes;
    a.timeouts += b.timeouts;
    a.retry_timeouts += b.retry_timeouts;
    a.ev_state_changes += b.ev_state_changes;
    a.messages_completed += b.messages_completed;
    a.data_packets_received += b.data_packets_received;
    a.data_bytes_placed += b.data_bytes_placed;
    a.duplicates += b.duplicates;
    a.trimmed_received += b.trimmed_received;
    a.ecn_marked_received += b.ecn_marked_received;
    a.out_of_sequence += b.out_of_sequence;
    a.imm_delivered += b.imm_delivered;
    // Dynamic MPR: the gauges are the later run's, the counters add up.
    a.mpr_peer = b.mpr_peer;
    a.mpr_window = b.mpr_window;
    a.mpr_advertised = b.mpr_advertised;
    a.mpr_shrinks += b.mpr_shrinks;
    a.mpr_grows += b.mpr_grows;
    a.mpr_pauses += b.mpr_pauses;
}

/// Every host's counters at one moment.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Snapshot {
    /// Time of the snapshot since the run started, ns (virtual in the simulator).
    pub at_ns: u64,
    pub hosts: Vec<HostCounters>,
}

impl Snapshot {
    /// Per-plane rows summed over hosts.
    /// Payload bytes placed at the receivers, all hosts and planes (duplicates excluded).
    pub fn delivered_bytes(&self) -> u64 {
        self.hosts
            .iter()
            .flat_map(|h| &h.planes)
            .map(|p| p.rx_bytes)
            .sum()
    }

    pub fn planes(&self) -> Vec<PlaneRow> {
        let mut out: Vec<PlaneRow> = Vec::new();
        for h in &self.hosts {
            for r in &h.planes {
                match out.iter_mut().find(|o| o.plane == r.plane) {
                    Some(o) => o.add(r),
                    None => out.push(*r),
                }
            }
        }
        out.sort_by_key(|r| r.plane);
        out
    }

    /// EV state changes per plane, from the EV rows.
    pub fn ev_changes_per_plane(&self, planes: usize) -> Vec<u64> {
        let mut v = vec![0; planes];
        for e in self.hosts.iter().flat_map(|h| &h.evs) {
            if let Some(c) = v.get_mut(usize::from(e.plane)) {
                *c += e.state_changes;
            }
        }
        v
    }

    /// Add a later run's snapshot (same hosts and QPs).
    pub fn add(&mut self, o: &Self) {
        if self.hosts.is_empty() {
            *self = o.clone();
            return;
        }
        for (a, b) in self.hosts.iter_mut().zip(&o.hosts) {
            a.add(b);
        }
        self.at_ns += o.at_ns;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn planes_sum_over_hosts() {
        let p = |tx| PlaneStats {
            bytes_sent: tx,
            ..PlaneStats::default()
        };
        let a = HostCounters::new(0, &[p(10), p(20)], &[], EndpointStats::default());
        let b = HostCounters::new(1, &[p(1), p(2)], &[], EndpointStats::default());
        let mut s = Snapshot {
            at_ns: 5,
            hosts: vec![a, b],
        };
        let rows = s.planes();
        assert_eq!(
            rows.iter().map(|r| r.tx_bytes).collect::<Vec<_>>(),
            [11, 22]
        );
        let again = s.clone();
        s.add(&again);
        assert_eq!(s.planes()[1].tx_bytes, 44);
        assert_eq!(s.at_ns, 10);
    }
}
