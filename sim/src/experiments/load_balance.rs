//! Experiment 1, load balance: a permutation on a multi-plane fabric; goodput of 1 MRC QP per
//! pair vs the RoCE-like baseline with 1 and 16 QPs per pair, as a fraction of the ideal
//! (every host's NIC at line rate on every plane). White paper: 1 MRC QP ≈ 390 of 400 Gb/s
//! for every flow, RoCE 1 QP at ½ or ⅓ (brief §6.2 #16, #21).

use core::fmt::Write as _;

use serde_json::json;

use super::{
    ExpError, ExpOpts, Scenario, Transport, nonblocking_toml, require_intact, run_scenario,
    write_results,
};
use crate::report::FlowRow;
use crate::svg::{Chart, Series};
use crate::time::SimTime;
use crate::traffic::permutation;

/// One variant's numbers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub variant: String,
    pub qps_per_pair: u16,
    /// Mean over flows of flow goodput / NIC capacity.
    pub mean_fraction: f64,
    pub min_fraction: f64,
    /// Bytes moved / (last completion × hosts × NIC capacity).
    pub aggregate_fraction: f64,
    pub median_fct_us: f64,
    pub p99_fct_us: f64,
    pub completed: usize,
    pub flows: usize,
}

fn fractions(flows: &[FlowRow], nic_gbps: f64) -> Vec<f64> {
    let mut v: Vec<f64> = flows
        .iter()
        .map(|f| f.goodput_gbps.unwrap_or(0.0) / nic_gbps)
        .collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Run it.
pub fn run(o: &ExpOpts) -> Result<Vec<Row>, ExpError> {
    let (planes, racks, hosts_per_rack, gbps, size) = if o.quick {
        (2u8, 4u16, 4u16, 50u32, 512 * 1024u64)
    } else {
        (8, 8, 16, 50, 8 << 20)
    };
    let plan = nonblocking_toml("lb", planes, racks, hosts_per_rack, gbps);
    let hosts = u32::from(racks) * u32::from(hosts_per_rack);
    let nic_gbps = f64::from(gbps) * f64::from(planes);
    let msgs = permutation(hosts, size, SimTime::ZERO, o.seed);
    let dir = o.out.join("load_balance");
    let mut rows = Vec::new();
    let mut series = Vec::new();
    for (t, qps) in [
        (Transport::Mrc, 1u16),
        (Transport::RoceLike, 1),
        (Transport::RoceLike, 16),
    ] {
        let name = format!("{} {qps}QP", t.name());
        let sc = Scenario {
            name: name.clone(),
            plan: plan.clone(),
            cfg: t.sim_config(o.seed),
            msgs: msgs.clone(),
            opts: t.workload(qps),
            faults: Vec::new(),
            limit: SimTime(200_000_000_000),
        };
        let slug = name.to_lowercase().replace(' ', "_");
        let out = run_scenario(&sc, Some(&dir.join(&slug)), o.progress)?;
        require_intact(&out, true)?;
        let r = &out.report;
        let fr = fractions(&r.flows, nic_gbps);
        let last = r
            .flows
            .iter()
            .filter_map(|f| f.fct_us.map(|x| x + f.start_us))
            .fold(0.0, f64::max);
        let bytes: u64 = r
            .flows
            .iter()
            .filter(|f| f.fct_us.is_some())
            .map(|f| f.bytes)
            .sum();
        rows.push(Row {
            variant: name.clone(),
            qps_per_pair: qps,
            mean_fraction: fr.iter().sum::<f64>() / fr.len().max(1) as f64,
            min_fraction: fr.first().copied().unwrap_or(0.0),
            aggregate_fraction: if last > 0.0 {
                bytes as f64 * 8.0 / (last * 1000.0) / (f64::from(hosts) * nic_gbps)
            } else {
                0.0
            },
            median_fct_us: r.fct.median_us,
            p99_fct_us: r.fct.p99_us,
            completed: r.fct.completed,
            flows: r.fct.flows,
        });
        let n = fr.len().max(1) as f64;
        series.push(Series {
            name,
            points: fr
                .iter()
                .enumerate()
                .map(|(i, &f)| (f * 100.0, (i + 1) as f64 / n))
                .collect(),
        });
    }
    let mut table = format!(
        "# Load balance: permutation, {hosts} hosts, {planes} planes × {gbps} Gb/s \
         (NIC {nic_gbps} Gb/s), {} KiB per flow\n\n\
         | variant | mean goodput (% of NIC) | min | aggregate | median FCT µs | p99 FCT µs | done |\n\
         |---|---|---|---|---|---|---|\n",
        size / 1024
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.1} | {}/{} |",
            r.variant,
            r.mean_fraction * 100.0,
            r.min_fraction * 100.0,
            r.aggregate_fraction * 100.0,
            r.median_fct_us,
            r.p99_fct_us,
            r.completed,
            r.flows
        );
    }
    let chart = Chart {
        title: "Permutation: per-flow goodput (CDF)".into(),
        x_label: "flow goodput (% of NIC line rate)".into(),
        y_label: "fraction of flows".into(),
        series,
        steps: true,
    };
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("goodput_cdf.svg"), chart.to_svg())?;
    write_results(
        &dir,
        &table,
        &json!({"experiment": "load_balance", "hosts": hosts, "planes": planes,
                "port_gbps": gbps, "flow_bytes": size, "rows": rows}),
    )?;
    Ok(rows)
}
