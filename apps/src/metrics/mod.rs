//! The Prometheus exporter of the mrc-rs tools (docs/metrics.md): per-port (= plane), per-QP
//! and per-EV counters named after the RDMA hardware counters users already watch
//! (`port_xmit_data`, `np_ecn_marked_roce_packets`, `local_ack_timeout_err`,
//! `out_of_sequence`, `duplicate_request`, ...), plus the multipath ones perftest cannot
//! show (trims, retransmissions by cause, EV states).
//!
//! The datapath never sees this module: a backend publishes a [`Snapshot`] of the engines'
//! plain counter structs now and then (STYLE rule 13), and a scrape renders the last one in
//! the Prometheus text format (`prometheus-client`) from a tiny blocking server thread
//! ([`server`]).

pub mod coll;
pub mod counters;
pub mod latency;
pub mod push;
pub mod server;
pub mod telemetry;
pub mod textfile;

use std::sync::Mutex;
use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use counters::{Snapshot, ev_state_value, qp_state_value};

type Labels = Vec<(String, String)>;

/// Holds the last published counters and renders them on request.
#[derive(Debug, Default)]
pub struct Exporter {
    last: Mutex<Option<Snapshot>>,
    /// Constant labels on every series (e.g. `test="write_bw"`).
    labels: Labels,
    /// The rate gauges of the last sample ([`telemetry::RateRow`]).
    rates: Mutex<Vec<telemetry::RateRow>>,
    /// The counters advance in simulated time (the simulator backend).
    simulated: bool,
    /// mrc-coll: the table's lines so far ([`coll`]).
    coll: Mutex<Vec<coll::CollLine>>,
    /// write_lat: every latency sample ([`latency`]).
    pub latency: latency::Latency,
}

/// What every HELP text says in the simulator.
const SIMULATED: &str = " (simulator: counters advance in simulated time)";

fn counters(reg: &mut Registry, name: &str, text: &str) -> Family<Labels, Counter> {
    let f = Family::<Labels, Counter>::default();
    reg.register(name, text, f.clone());
    f
}

fn gauges(reg: &mut Registry, name: &str, text: &str) -> Family<Labels, Gauge> {
    let f = Family::<Labels, Gauge>::default();
    reg.register(name, text, f.clone());
    f
}

type FloatGauge = Gauge<f64, AtomicU64>;

fn float_gauges(reg: &mut Registry, name: &str, text: &str) -> Family<Labels, FloatGauge> {
    let f = Family::<Labels, FloatGauge>::default();
    reg.register(name, text, f.clone());
    f
}

/// A gauge's value (`i64`) from a counter struct's `u64`.
fn gauge(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn l(pairs: &[(&str, String)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

impl Exporter {
    /// An exporter whose series all carry `labels`.
    pub fn new(labels: &[(&str, &str)]) -> Self {
        Self {
            last: Mutex::new(None),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ..Self::default()
        }
    }

    /// The same, for a simulated run: `mrc_virtual_time_seconds`, and every HELP text says
    /// the counters advance in simulated time.
    #[must_use]
    pub fn simulated(mut self, yes: bool) -> Self {
        self.simulated = yes;
        self
    }

    /// Replace the counters and the rate gauges a scrape shows.
    pub fn publish_with_rates(&self, snap: &Snapshot, rates: Vec<telemetry::RateRow>) {
        self.publish(snap);
        *self
            .rates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = rates;
    }

    /// Replace the collective lines a scrape shows (mrc-coll).
    pub fn publish_coll(&self, lines: Vec<coll::CollLine>) {
        *self
            .coll
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = lines;
    }

    /// The counters last published (empty before the first).
    pub fn last(&self) -> Snapshot {
        self.last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }

    /// Replace the counters a scrape shows.
    pub fn publish(&self, snap: &Snapshot) {
        let mut g = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = Some(snap.clone());
    }

    /// The Prometheus text exposition of the last snapshot.
    pub fn render(&self) -> String {
        let snap = self
            .last
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
            .unwrap_or_default();
        let mut reg = Registry::with_labels(
            self.labels
                .iter()
                .map(|(k, v)| (k.clone().into(), v.clone().into())),
        );
        fill(&mut reg, &snap);
        fill_rates(
            &mut reg,
            &self
                .rates
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let at = float_gauges(
            &mut reg,
            "mrc_run_time_seconds",
            "Time since the run started, seconds (virtual in the simulator)",
        );
        at.get_or_create(&Vec::new()).set(snap.at_ns as f64 / 1e9);
        if self.simulated {
            let v = float_gauges(
                &mut reg,
                "mrc_virtual_time_seconds",
                "The simulated clock, seconds",
            );
            v.get_or_create(&Vec::new()).set(snap.at_ns as f64 / 1e9);
        }
        let lines = self
            .coll
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        coll::fill(&mut reg, &lines);
        self.latency.register(&mut reg);
        let mut out = String::new();
        if prometheus_text::encode(&mut out, &reg).is_err() {
            out.clear();
        }
        if self.simulated {
            let mut with = String::with_capacity(out.len() + out.len() / 8);
            for l in out.lines() {
                with.push_str(l);
                if l.starts_with("# HELP ") {
                    with.push_str(SIMULATED);
                }
                with.push('\n');
            }
            out = with;
        }
        out
    }
}

/// Register every family and set it from the snapshot.
fn fill(reg: &mut Registry, snap: &Snapshot) {
    // Ports (= planes): the IB port counters, in bytes (mlx5 counts 4-byte words).
    let xmit = counters(
        reg,
        "mrc_port_xmit_data_bytes",
        "Data payload bytes sent on the plane, retransmissions included (port_xmit_data)",
    );
    let rcv = counters(
        reg,
        "mrc_port_rcv_data_bytes",
        "Data payload bytes received and placed on the plane, duplicates excluded (port_rcv_data)",
    );
    let xmit_p = counters(
        reg,
        "mrc_port_xmit_packets",
        "Data packets sent on the plane (port_xmit_packets)",
    );
    let rcv_p = counters(
        reg,
        "mrc_port_rcv_packets",
        "Data packets received on the plane (port_rcv_packets)",
    );
    let link_down = counters(
        reg,
        "mrc_link_downed",
        "Times the plane's port went down (link_downed)",
    );
    let p_retx = counters(
        reg,
        "mrc_plane_retransmitted_packets",
        "Retransmissions sent on the plane",
    );
    let p_trim = counters(
        reg,
        "mrc_plane_trimmed_packets",
        "NACK TRIMMED / TRIMMED_LASTHOP received for packets sent on the plane",
    );
    let p_nack = counters(
        reg,
        "mrc_plane_nacks",
        "Other NACKs received for packets sent on the plane",
    );
    let p_ecn = counters(
        reg,
        "mrc_plane_ecn_marked_packets",
        "SACKs echoing an ECN mark on the plane",
    );
    let p_to = counters(
        reg,
        "mrc_plane_timeouts",
        "Packets sent on the plane declared lost by the per-packet timeout",
    );
    let p_inf = counters(
        reg,
        "mrc_plane_inferred_losses",
        "Packets sent on the plane inferred lost from SACK holes",
    );
    let p_ret = counters(
        reg,
        "mrc_plane_ev_retired",
        "EVs of the plane moved to ASSUMED_BAD",
    );
    let p_res = counters(
        reg,
        "mrc_plane_ev_restored",
        "EVs of the plane brought back by probes",
    );
    for h in &snap.hosts {
        for p in &h.planes {
            let lb = l(&[
                ("host", format!("h{}", h.host)),
                ("plane", p.plane.to_string()),
            ]);
            xmit.get_or_create(&lb).inc_by(p.tx_bytes);
            rcv.get_or_create(&lb).inc_by(p.rx_bytes);
            xmit_p.get_or_create(&lb).inc_by(p.tx_packets);
            rcv_p.get_or_create(&lb).inc_by(p.rx_packets);
            link_down.get_or_create(&lb).inc_by(p.port_down_events);
            p_retx.get_or_create(&lb).inc_by(p.retransmits);
            p_trim.get_or_create(&lb).inc_by(p.trims);
            p_nack.get_or_create(&lb).inc_by(p.nacks);
            p_ecn.get_or_create(&lb).inc_by(p.ecn);
            p_to.get_or_create(&lb).inc_by(p.timeouts);
            p_inf.get_or_create(&lb).inc_by(p.inferred_losses);
            p_ret.get_or_create(&lb).inc_by(p.evs_retired);
            p_res.get_or_create(&lb).inc_by(p.evs_restored);
        }
    }

    // QPs: the mlx5 hw_counters, per QP.
    let q_tx = counters(
        reg,
        "mrc_qp_xmit_data_bytes",
        "Payload bytes sent by the QP, first transmissions only",
    );
    let q_rx = counters(
        reg,
        "mrc_qp_rcv_data_bytes",
        "Payload bytes placed by the QP",
    );
    let q_msgs = counters(
        reg,
        "mrc_qp_messages_completed",
        "Send work requests completed",
    );
    let q_retx = counters(
        reg,
        "mrc_qp_retransmitted_packets",
        "Retransmissions by cause (roce_adp_retrans)",
    );
    let q_nack = counters(
        reg,
        "mrc_qp_nacks_received",
        "NACKs received by reason (packet_seq_err and friends)",
    );
    let np_ecn = counters(
        reg,
        "mrc_np_ecn_marked_packets",
        "Data packets that arrived ECN-marked (np_ecn_marked_roce_packets)",
    );
    let rp_ecn = counters(
        reg,
        "mrc_rp_ecn_echoes",
        "SACKs telling the sender its packets were ECN-marked (rp_cnp_handled)",
    );
    let ack_to = counters(
        reg,
        "mrc_local_ack_timeout_err",
        "Per-packet path-failure timeouts at the requester (local_ack_timeout_err)",
    );
    let retry_to = counters(
        reg,
        "mrc_qp_retry_timeouts",
        "Expiries of the long QP retry timer",
    );
    let ooo = counters(
        reg,
        "mrc_out_of_sequence",
        "Out-of-order packets dropped in go-back-N mode (out_of_sequence)",
    );
    let dup = counters(
        reg,
        "mrc_duplicate_request",
        "Duplicate data packets seen by the responder (duplicate_request)",
    );
    let trimmed_rx = counters(
        reg,
        "mrc_qp_trimmed_received_packets",
        "Trimmed headers received by the responder",
    );
    let ev_changes = counters(reg, "mrc_qp_ev_state_changes", "EV state changes of the QP");
    // Dynamic MPR (brief §3.5).
    let mpr_peer = gauges(
        reg,
        "mrc_qp_mpr_peer_psns",
        "MPR the peer's SACKs last advertised, PSNs (0: none, dynamic MPR off at the peer)",
    );
    let mpr_window = gauges(
        reg,
        "mrc_qp_mpr_window_psns",
        "PSN window new data is sent in: the RTS MPR, or the smaller advertised one",
    );
    let mpr_adv = gauges(
        reg,
        "mrc_qp_mpr_advertised_psns",
        "MPR this QP's SACKs advertise, PSNs (0: dynamic MPR off)",
    );
    let mpr_shrinks = counters(
        reg,
        "mrc_qp_mpr_shrinks",
        "Advertisements that made the send window smaller",
    );
    let mpr_grows = counters(
        reg,
        "mrc_qp_mpr_grows",
        "Advertisements that made the send window larger",
    );
    let mpr_pauses = counters(
        reg,
        "mrc_qp_mpr_pauses",
        "Times new data waited for room in the MPR window",
    );
    let qp_state = gauges(
        reg,
        "mrc_qp_state",
        "QP state, ibv_qp_state numbering: 0 RESET, 1 INIT, 2 RTR, 3 RTS, 4 SQD, 5 SQE, 6 ERR",
    );
    for h in &snap.hosts {
        for q in &h.qps {
            let host = format!("h{}", h.host);
            let qp = format!("{:#x}", q.qpn);
            let lb = l(&[("host", host.clone()), ("qp", qp.clone())]);
            let s = &q.stats;
            q_tx.get_or_create(&lb).inc_by(s.data_bytes_sent);
            q_rx.get_or_create(&lb).inc_by(s.data_bytes_placed);
            q_msgs.get_or_create(&lb).inc_by(s.messages_completed);
            np_ecn.get_or_create(&lb).inc_by(s.ecn_marked_received);
            rp_ecn.get_or_create(&lb).inc_by(s.ecn_echoes);
            ack_to.get_or_create(&lb).inc_by(s.timeouts);
            retry_to.get_or_create(&lb).inc_by(s.retry_timeouts);
            ooo.get_or_create(&lb).inc_by(s.out_of_sequence);
            dup.get_or_create(&lb).inc_by(s.duplicates);
            trimmed_rx.get_or_create(&lb).inc_by(s.trimmed_received);
            ev_changes.get_or_create(&lb).inc_by(s.ev_state_changes);
            mpr_peer.get_or_create(&lb).set(gauge(s.mpr_peer));
            mpr_window.get_or_create(&lb).set(gauge(s.mpr_window));
            mpr_adv.get_or_create(&lb).set(gauge(s.mpr_advertised));
            mpr_shrinks.get_or_create(&lb).inc_by(s.mpr_shrinks);
            mpr_grows.get_or_create(&lb).inc_by(s.mpr_grows);
            mpr_pauses.get_or_create(&lb).inc_by(s.mpr_pauses);
            if let Some(st) = q.state {
                qp_state.get_or_create(&lb).set(qp_state_value(st));
            }
            let r = &s.retransmits;
            for (cause, v) in r.by_cause() {
                let lc = l(&[
                    ("host", host.clone()),
                    ("qp", qp.clone()),
                    ("cause", cause.to_owned()),
                ]);
                q_retx.get_or_create(&lc).inc_by(v);
            }
            let n = &s.nacks_received;
            for (reason, v) in [
                ("trimmed", n.trimmed),
                ("trimmed_last_hop", n.trimmed_last_hop),
                ("out_of_window", n.out_of_window),
                ("resource", n.resource),
                ("unexpected", n.unexpected),
                ("other", n.other),
            ] {
                let lr = l(&[
                    ("host", host.clone()),
                    ("qp", qp.clone()),
                    ("reason", reason.to_owned()),
                ]);
                q_nack.get_or_create(&lr).inc_by(v);
            }
        }
    }

    // EVs: state and traffic per path.
    let state = gauges(
        reg,
        "mrc_ev_state",
        "EV state: 0 GOOD, 1 SKIP, 2 ASSUMED_BAD, 3 DENIED",
    );
    let ev_bytes = counters(
        reg,
        "mrc_ev_xmit_data_bytes",
        "Payload bytes sent on the EV, retransmissions included",
    );
    let ev_retx = counters(
        reg,
        "mrc_ev_retransmitted_packets",
        "Retransmissions sent on the EV",
    );
    let ev_trim = counters(reg, "mrc_ev_trimmed_packets", "Trim NACKs naming the EV");
    let ev_chg = counters(reg, "mrc_ev_state_changes", "State changes of the EV");
    for e in snap.hosts.iter().flat_map(|h| &h.evs) {
        let lb = l(&[
            ("host", format!("h{}", e.host)),
            ("qp", format!("{:#x}", e.qpn)),
            ("ev", e.ev.to_string()),
            ("plane", e.plane.to_string()),
        ]);
        state.get_or_create(&lb).set(ev_state_value(e.state));
        ev_bytes.get_or_create(&lb).inc_by(e.bytes);
        ev_retx.get_or_create(&lb).inc_by(e.retransmits);
        ev_trim.get_or_create(&lb).inc_by(e.trims);
        ev_chg.get_or_create(&lb).inc_by(e.state_changes);
    }

    // Engine drops by reason.
    let drops = counters(
        reg,
        "mrc_endpoint_dropped_frames",
        "Received frames the engine dropped, by reason (rx_discards)",
    );
    for h in &snap.hosts {
        for (reason, v) in h.endpoint.drops.iter() {
            let lb = l(&[
                ("host", format!("h{}", h.host)),
                ("reason", reason.name().to_owned()),
            ]);
            drops.get_or_create(&lb).inc_by(v);
        }
    }
}

/// The rate gauges (`--sample-every`, docs/metrics.md "Resolution").
fn fill_rates(reg: &mut Registry, rows: &[telemetry::RateRow]) {
    let rate = float_gauges(
        reg,
        "mrc_port_rcv_data_rate_bytes_per_second",
        "Payload placed on the plane per second over the last sample (--sample-every)",
    );
    let peak = float_gauges(
        reg,
        "mrc_port_rcv_data_peak_rate_bytes_per_second",
        "The highest sample rate of mrc_port_rcv_data_rate_bytes_per_second over the last second",
    );
    for &(host, plane, r, p) in rows {
        let lb = l(&[("host", format!("h{host}")), ("plane", plane.to_string())]);
        rate.get_or_create(&lb).set(r);
        peak.get_or_create(&lb).set(p);
    }
}

#[cfg(test)]
mod tests {
    use super::counters::HostCounters;
    use super::*;
    use mrc_transport::stats::{EndpointStats, PlaneStats};

    #[test]
    fn renders_port_counters_with_labels() {
        let e = Exporter::new(&[("test", "write_bw")]);
        assert!(
            e.render()
                .contains("mrc_run_time_seconds{test=\"write_bw\"} 0.0"),
            "an empty snapshot still renders"
        );
        let planes = [PlaneStats {
            bytes_sent: 4096,
            ..PlaneStats::default()
        }];
        e.publish(&Snapshot {
            at_ns: 7,
            hosts: vec![HostCounters::new(2, &planes, &[], EndpointStats::default())],
        });
        let text = e.render();
        assert!(
            text.lines()
                .any(|l| l.starts_with("mrc_port_xmit_data_bytes_total{")
                    && l.contains("host=\"h2\"")
                    && l.contains("plane=\"0\"")
                    && l.contains("test=\"write_bw\"")
                    && l.ends_with(" 4096")),
            "{text}"
        );
        assert!(text.contains("# TYPE mrc_port_rcv_data_bytes_total counter"));
    }

    /// A snapshot with one plane, one QP and one EV: every family has a series.
    fn full() -> Snapshot {
        let mut h = HostCounters::new(0, &[PlaneStats::default()], &[], EndpointStats::default());
        h.qps.push(counters::QpRow {
            host: 0,
            qpn: 0x4000,
            stats: mrc_transport::stats::QpStats::default(),
            state: Some(mrc_transport::verbs::QpState::Error),
        });
        h.evs.push(counters::EvRow {
            host: 0,
            qpn: 0x4000,
            ev: 3,
            plane: 0,
            path: None,
            state: mrc_transport::ev::EvState::AssumedBad,
            packets: 1,
            delivered: 0,
            probes: 0,
            probes_ok: 0,
            bytes: 2,
            retransmits: 0,
            trims: 0,
            nacks: 0,
            ecn: 0,
            timeouts: 0,
            inferred_losses: 0,
            state_changes: 1,
            srtt_ns: 0,
        });
        Snapshot {
            at_ns: 1,
            hosts: vec![h],
        }
    }

    #[test]
    fn latency_buckets_are_cumulative_with_the_agreed_bounds() {
        let e = Exporter::new(&[("test", "write_lat")]);
        assert!(!e.render().contains("mrc_write_latency_seconds"));
        e.latency.observe("h0", [1.5e-6, 1e-6, 3e-3, 1.0]);
        let text = e.render();
        let bucket = |le: &str| -> u64 {
            text.lines()
                .find(|l| {
                    l.starts_with("mrc_write_latency_seconds_bucket{")
                        && l.contains(&format!("le=\"{le}\""))
                        && l.contains("host=\"h0\"")
                        && l.contains("test=\"write_lat\"")
                })
                .unwrap_or_else(|| panic!("le={le}: {text}"))
                .rsplit(' ')
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        // 1.5 us lands in le=2e-6, not le=1e-6 (which holds the 1 us sample: le is <=).
        assert_eq!(bucket("1e-06"), 1, "{text}");
        assert_eq!(bucket("2e-06"), 2, "{text}");
        assert_eq!(bucket("0.002"), 2, "{text}");
        assert_eq!(bucket("0.005"), 3, "{text}");
        assert_eq!(bucket("0.01"), 3, "{text}");
        assert_eq!(bucket("+Inf"), 4, "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("mrc_write_latency_seconds_count{") && l.ends_with(" 4")),
            "{text}"
        );
        assert!(text.contains("# TYPE mrc_write_latency_seconds histogram"));
    }

    #[test]
    fn dynamic_mpr_series_carry_the_qp_counters() {
        let mut snap = full();
        snap.hosts[0].qps[0].stats = mrc_transport::stats::QpStats {
            mpr_peer: 128,
            mpr_window: 128,
            mpr_advertised: 1024,
            mpr_shrinks: 1,
            mpr_grows: 2,
            mpr_pauses: 37,
            ..mrc_transport::stats::QpStats::default()
        };
        let e = Exporter::new(&[]);
        e.publish(&snap);
        let text = e.render();
        for want in [
            "mrc_qp_mpr_peer_psns{host=\"h0\",qp=\"0x4000\"} 128",
            "mrc_qp_mpr_window_psns{host=\"h0\",qp=\"0x4000\"} 128",
            "mrc_qp_mpr_advertised_psns{host=\"h0\",qp=\"0x4000\"} 1024",
            "mrc_qp_mpr_shrinks_total{host=\"h0\",qp=\"0x4000\"} 1",
            "mrc_qp_mpr_grows_total{host=\"h0\",qp=\"0x4000\"} 2",
            "mrc_qp_mpr_pauses_total{host=\"h0\",qp=\"0x4000\"} 37",
        ] {
            assert!(text.lines().any(|l| l == want), "{want} in\n{text}");
        }
    }

    #[test]
    fn dashboard_and_docs_name_only_exported_metrics() {
        let e = Exporter::new(&[]).simulated(true);
        e.publish_with_rates(&full(), vec![(0, 0, 1.0, 2.0)]);
        e.publish_coll(vec![coll::CollLine {
            op: "all_reduce",
            size: 8,
            dtype: "float",
            redop: "sum",
            place: "out",
            time_seconds: 1e-5,
            algbw_bytes_per_second: 1.0,
            busbw_bytes_per_second: 1.0,
            wrong: Some(0),
            operations: 1,
        }]);
        e.latency.observe("h0", [1e-6]);
        let text = e.render();
        assert!(
            text.contains("mrc_qp_state{host=\"h0\",qp=\"0x4000\"} 6"),
            "a QP in ERROR shows 6: {text}"
        );
        assert!(
            text.contains("mrc_ev_state{host=\"h0\",qp=\"0x4000\",ev=\"3\",plane=\"0\"} 2"),
            "{text}"
        );
        let exported = |name: &str| {
            text.lines().any(|l| {
                ["{", " ", "_bucket{"]
                    .iter()
                    .any(|t| l.starts_with(&format!("{name}{t}")))
            })
        };
        for doc in [
            include_str!("../../../dashboards/grafana-mrc.json"),
            include_str!("../../../dashboards/mrc-alerts.yml"),
            include_str!("../../../docs/metrics.md"),
        ] {
            let mut rest = doc;
            while let Some(i) = rest.find("mrc_") {
                let name: String = rest[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                rest = &rest[i + name.len()..];
                if name.ends_with('_') || name == "mrc_rs" {
                    continue;
                }
                assert!(exported(&name), "{name} is named but not exported");
            }
        }
    }
}
