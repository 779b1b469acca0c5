//! Experiment 3, incast isolation: a 7→1 incast into one host plus a victim flow into its
//! rack neighbour (sharing the target's T0): the victim's goodput with MRC (trimming on) vs
//! the RoCE-like baseline, each against the victim alone. White paper: MRC victim unaffected;
//! RoCE + DCQCN −25 % with 1 QP (brief §6.2 #19).

use core::fmt::Write as _;

use serde_json::json;

use super::{
    ExpError, ExpOpts, Scenario, Transport, nonblocking_toml, require_intact, run_scenario,
    write_results,
};
use crate::time::SimTime;
use crate::traffic::{Message, incast};

/// One transport's numbers.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub transport: String,
    pub victim_alone_gbps: f64,
    pub victim_with_incast_gbps: f64,
    /// Victim goodput lost to the incast, % of its goodput alone.
    pub degradation_pct: f64,
    pub incast_median_fct_us: f64,
    pub incast_max_fct_us: f64,
    /// The incast's makespan (its last flow's FCT: every flow starts at 0) against its ideal:
    /// the incast's bytes through the target's NIC at line rate plus one RTT (issue #14's
    /// ideal; packet headers not counted, so no run reaches 1.0).
    pub ideal_makespan_us: f64,
    pub makespan_of_ideal: f64,
    pub trimmed: u64,
    pub tail_dropped: u64,
}

/// Run it.
pub fn run(o: &ExpOpts) -> Result<Vec<Row>, ExpError> {
    let dir = o.out.join("incast");
    let (planes, racks, hpr, gbps, isize, vsize) = if o.quick {
        (2u8, 4u16, 4u16, 50u32, 512u64 * 1024, 2u64 << 20)
    } else {
        (8, 4, 8, 50, 4 << 20, 16 << 20)
    };
    let plan = nonblocking_toml("incast", planes, racks, hpr, gbps);
    let h = |rack: u32, k: u32| rack * u32::from(hpr) + k;
    let (target, victim_dst, victim_src) = (h(0, 0), h(0, 1), h(1, 0));
    // Seven senders spread over the other racks (never the victim's source).
    let senders: Vec<u32> = (1..u32::from(racks))
        .flat_map(|r| (0..u32::from(hpr)).map(move |k| (r, k)))
        .map(|(r, k)| h(r, k))
        .filter(|&s| s != victim_src)
        .take(7)
        .collect();
    let victim = Message {
        src: victim_src,
        dst: victim_dst,
        start: SimTime::ZERO,
        size: vsize,
    };
    let mut rows = Vec::new();
    for t in [Transport::Mrc, Transport::RoceLike] {
        let mut gbps_of = Vec::new();
        let mut last = None;
        for (label, msgs) in [
            ("victim alone", vec![victim]),
            ("incast + victim", {
                let mut m = vec![victim];
                m.extend(incast(&senders, target, isize, SimTime::ZERO));
                m
            }),
        ] {
            let name = format!("{} {label}", t.name());
            let sc = Scenario {
                name: name.clone(),
                plan: plan.clone(),
                cfg: t.sim_config(o.seed),
                msgs,
                opts: t.workload(1),
                faults: Vec::new(),
                limit: SimTime(500_000_000_000),
            };
            let out = run_scenario(
                &sc,
                Some(&dir.join(name.to_lowercase().replace([' ', '+'], "_"))),
                o.progress,
            )?;
            require_intact(&out, true)?;
            gbps_of.push(out.report.flows[0].goodput_gbps.unwrap_or(0.0));
            last = Some(out);
        }
        let out = last.expect("two runs");
        let incast_flows: Vec<f64> = out.report.flows[1..]
            .iter()
            .filter_map(|f| f.fct_us)
            .collect();
        let mut sorted = incast_flows.clone();
        sorted.sort_by(f64::total_cmp);
        let makespan = sorted.last().copied().unwrap_or(0.0);
        let ideal = out.ideal_us(
            isize * senders.len() as u64,
            f64::from(gbps) * f64::from(planes),
        );
        rows.push(Row {
            transport: t.name().into(),
            victim_alone_gbps: gbps_of[0],
            victim_with_incast_gbps: gbps_of[1],
            degradation_pct: if gbps_of[0] > 0.0 {
                (1.0 - gbps_of[1] / gbps_of[0]) * 100.0
            } else {
                0.0
            },
            incast_median_fct_us: sorted.get(sorted.len() / 2).copied().unwrap_or(0.0),
            incast_max_fct_us: makespan,
            ideal_makespan_us: ideal,
            makespan_of_ideal: makespan / ideal,
            trimmed: out.report.fabric.switch_ports.trimmed,
            tail_dropped: out.report.fabric.switch_ports.tail_dropped,
        });
    }
    let mut table = format!(
        "# Incast isolation: 7→1 incast ({} KiB each) into host {target} + victim {victim_src}→{victim_dst} ({} MiB) sharing the target's T0\n\
         {planes} planes × {gbps} Gb/s\n\n\
         | transport | victim alone (Gb/s) | victim with incast (Gb/s) | victim degradation | incast median / max FCT µs | incast makespan / ideal | trimmed | tail-dropped |\n\
         |---|---|---|---|---|---|---|---|\n",
        isize / 1024,
        vsize >> 20
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "| {} | {:.1} | {:.1} | {:.1} % | {:.1} / {:.1} | {:.3} (ideal {:.1} µs) | {} | {} |",
            r.transport,
            r.victim_alone_gbps,
            r.victim_with_incast_gbps,
            r.degradation_pct,
            r.incast_median_fct_us,
            r.incast_max_fct_us,
            r.makespan_of_ideal,
            r.ideal_makespan_us,
            r.trimmed,
            r.tail_dropped
        );
    }
    write_results(&dir, &table, &json!({"experiment": "incast", "rows": rows}))?;
    Ok(rows)
}
