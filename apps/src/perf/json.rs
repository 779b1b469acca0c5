//! The `--out_json` document: perftest's `test_info` and `results` objects with its key
//! names (`MsgSize`, `n_iterations`, `BW_peak`, `BW_average`, `MsgRate`; `t_min` ...
//! `percentile_99.9` for latency), then our own sections: every size of a sweep, per-plane,
//! per-QP and per-EV counters, the data check.

use serde_json::{Value, json};

use super::backend::{CheckResult, FabricInfo};
use super::measure::Row;
use super::settings::Settings;
use crate::metrics::counters::Snapshot;
use crate::metrics::telemetry::SampleSeries;

fn on_off(b: bool) -> &'static str {
    if b { "ON" } else { "OFF" }
}

fn row_json(r: &Row) -> Value {
    let mut v = match r {
        Row::Bw { total: b, .. } => json!({
            "MsgSize": b.size,
            "n_iterations": b.iterations,
            "BW_peak": b.peak,
            "BW_average": b.average,
            "MsgRate": b.msg_rate_mpps,
            "bytes": b.bytes,
            "messages": b.messages,
            "elapsed_ns": b.elapsed_ns,
        }),
        Row::Lat(l) => json!({
            "MsgSize": l.size,
            "n_iterations": l.iterations,
            "t_min": l.t_min,
            "t_max": l.t_max,
            "t_typical": l.t_typical,
            "t_avg": l.t_avg,
            "t_stdev": l.t_stdev,
            "percentile_99": l.p99,
            "percentile_99.9": l.p99_9,
            "tps_average": l.tps,
        }),
    };
    let cpu = match r {
        Row::Bw { total, .. } => total.cpu_util,
        Row::Lat(l) => l.cpu_util,
    };
    if let Some(c) = cpu {
        // perftest's key (REPORT_EXT_CPU_UTIL_JSON).
        v["CPU_util"] = json!(c);
    }
    v
}

/// The whole document.
pub fn document(
    s: &Settings,
    f: &FabricInfo,
    rows: &[Row],
    snap: &Snapshot,
    check: Option<&CheckResult>,
    error: Option<&str>,
    samples: &SampleSeries,
) -> Value {
    let planes = snap.planes();
    let changes = snap.ev_changes_per_plane(planes.len());
    let planes: Vec<Value> = planes
        .iter()
        .map(|p| {
            let mut v = serde_json::to_value(p).unwrap_or(Value::Null);
            v["ev_changes"] = json!(changes[usize::from(p.plane)]);
            v
        })
        .collect();
    let qps: Vec<Value> = snap
        .hosts
        .iter()
        .flat_map(|h| &h.qps)
        .map(|q| {
            let st = &q.stats;
            let r = &st.retransmits;
            json!({
                "host": q.host,
                "qpn": q.qpn,
                "data_bytes_sent": st.data_bytes_sent,
                "data_packets_sent": st.data_packets_sent,
                "data_bytes_placed": st.data_bytes_placed,
                "messages_completed": st.messages_completed,
                "retransmits": retransmit_causes(r),
                "nacks_received": st.nacks_received.total(),
                "ecn_echoes": st.ecn_echoes,
                "ecn_marked_received": st.ecn_marked_received,
                "timeouts": st.timeouts,
                "duplicates": st.duplicates,
                "out_of_sequence": st.out_of_sequence,
                "trimmed_received": st.trimmed_received,
                "ev_state_changes": st.ev_state_changes,
            })
        })
        .collect();
    let evs: Vec<&crate::metrics::counters::EvRow> =
        snap.hosts.iter().flat_map(|h| &h.evs).collect();
    json!({
        "test_info": {
            "test": s.test.name(),
            "Dual_port": "OFF",
            "Device": s.backend.device(),
            "Fabric": f.fabric,
            "Number_of_qps": s.qps,
            "Transport_type": "MRC",
            "Routing": f.routing,
            "Connection_type": "RC",
            "Using_SRQ": "OFF",
            "Bidirectional": on_off(s.bidirectional),
            "TX_depth": s.tx_depth,
            "RX_depth": s.rx_depth,
            "CQ_Moderation": s.cq_mod,
            "Mtu": f.payload_mtu,
            "Link_type": "Ethernet",
            "Data_ex_method": f.exchange,
            "bw_units": s.units.label(),
            "Planes": f.planes,
            "Link_Gbps": f.link_gbps,
            "Paths_per_plane": f.paths_per_plane,
            "EVs_per_plane": f.evs_per_plane,
            "Active_EVs_per_plane": f.active_evs_per_plane,
            "CC": s.cc.name(),
            "Traffic": s.pattern.to_string(),
            "Backend": s.backend.name(),
            "Clock": f.clock,
            "Hosts": [f.client, f.server],
            "Faults": f.faults,
            "addresses": f.addresses,
        },
        "results": rows.last().map_or(Value::Null, row_json),
        "all_results": rows.iter().map(row_json).collect::<Vec<_>>(),
        "planes": planes,
        "qps": qps,
        "evs": evs,
        "check": check,
        "error": error,
        // docs/metrics.md, "Resolution": the counter samples, at most MAX_SAMPLES.
        "samples": samples.samples,
        "samples_dropped": samples.dropped,
        "samples_missed": samples.missed,
    })
}

/// Retransmissions by cause, with their total.
fn retransmit_causes(r: &mrc_transport::stats::RetransmitCauses) -> Value {
    let mut m: serde_json::Map<String, Value> = r
        .by_cause()
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.into()))
        .collect();
    m.insert("total".into(), r.total().into());
    Value::Object(m)
}
