//! Experiment 4, random loss: 0.1 % and 1 % loss on every link during a permutation; goodput
//! as a fraction of the loss-free run, MRC vs the RoCE-like baseline. White paper: 0.1 %
//! barely matters to MRC; at 1 % RoCE is unusable and MRC keeps about ⅓ (brief §6.2 #17).

use core::fmt::Write as _;

use serde_json::json;

use super::{
    ExpError, ExpOpts, Scenario, Transport, nonblocking_toml, require_intact, run_scenario,
    write_results,
};
use crate::fault::{Fault, FaultKind};
use crate::svg::{Chart, Series};
use crate::time::SimTime;
use crate::traffic::permutation;

/// One (transport, loss) point.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub transport: String,
    pub loss: f64,
    /// Mean flow goodput, Gb/s (unfinished flows count 0).
    pub mean_gbps: f64,
    /// `mean_gbps` over the same transport's loss-free run.
    pub fraction_of_lossless: f64,
    /// `mean_gbps` over the NIC line rate.
    pub fraction_of_line_rate: f64,
    pub completed: usize,
    pub flows: usize,
    pub retransmitted_packets: u64,
}

/// Run it.
pub fn run(o: &ExpOpts) -> Result<Vec<Row>, ExpError> {
    let dir = o.out.join("loss");
    let (planes, racks, hpr, gbps, size) = if o.quick {
        (2u8, 2u16, 4u16, 50u32, 1u64 << 20)
    } else {
        (8, 2, 8, 50, 4 << 20)
    };
    let plan = nonblocking_toml("loss", planes, racks, hpr, gbps);
    let hosts = u32::from(racks) * u32::from(hpr);
    let nic = f64::from(gbps) * f64::from(planes);
    let msgs = permutation(hosts, size, SimTime::ZERO, o.seed);
    let mut rows: Vec<Row> = Vec::new();
    let mut series = Vec::new();
    for t in [Transport::Mrc, Transport::RoceLike] {
        let mut pts = Vec::new();
        for loss in [0.0, 0.001, 0.01] {
            let name = format!("{} loss {}%", t.name(), loss * 100.0);
            let sc = Scenario {
                name: name.clone(),
                plan: plan.clone(),
                cfg: t.sim_config(o.seed),
                msgs: msgs.clone(),
                opts: t.workload(1),
                faults: vec![Fault::at_us(0, FaultKind::LossEverywhere(loss))],
                // Long enough for a lossy baseline to finish or to show it cannot.
                limit: SimTime(if o.quick { 50 } else { 200 } * 1_000_000_000),
            };
            let slug = name.to_lowercase().replace([' ', '%'], "_");
            let out = run_scenario(&sc, Some(&dir.join(slug)), o.progress)?;
            require_intact(&out, true)?;
            let r = &out.report;
            let mean = r
                .flows
                .iter()
                .map(|f| f.goodput_gbps.unwrap_or(0.0))
                .sum::<f64>()
                / r.flows.len().max(1) as f64;
            let base = rows
                .iter()
                .find(|x| x.transport == t.name() && x.loss == 0.0)
                .map_or(mean, |x| x.mean_gbps);
            rows.push(Row {
                transport: t.name().into(),
                loss,
                mean_gbps: mean,
                fraction_of_lossless: if base > 0.0 { mean / base } else { 0.0 },
                fraction_of_line_rate: mean / nic,
                completed: r.fct.completed,
                flows: r.fct.flows,
                retransmitted_packets: r.plane_counters.iter().map(|p| p.retransmits).sum(),
            });
            pts.push((loss * 100.0, mean / nic * 100.0));
        }
        series.push(Series {
            name: t.name().into(),
            points: pts,
        });
    }
    let mut table = format!(
        "# Random loss on every link: permutation, {hosts} hosts, {planes} planes × {gbps} Gb/s, {} MiB per flow\n\n\
         | transport | loss | mean goodput (Gb/s) | of loss-free | of line rate | done | retransmitted packets |\n\
         |---|---|---|---|---|---|---|\n",
        size >> 20
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "| {} | {} % | {:.1} | {:.2} | {:.2} | {}/{} | {} |",
            r.transport,
            r.loss * 100.0,
            r.mean_gbps,
            r.fraction_of_lossless,
            r.fraction_of_line_rate,
            r.completed,
            r.flows,
            r.retransmitted_packets
        );
    }
    let chart = Chart {
        title: "Goodput under random loss on every link".into(),
        x_label: "loss per link (%)".into(),
        y_label: "mean flow goodput (% of NIC line rate)".into(),
        series,
        steps: false,
    };
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("goodput_vs_loss.svg"), chart.to_svg())?;
    write_results(&dir, &table, &json!({"experiment": "loss", "rows": rows}))?;
    Ok(rows)
}
