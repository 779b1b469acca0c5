//! Experiment 5, scale: a 2 MB-per-flow permutation (MRC) on 128, 512 and 1024 hosts of an
//! 8-plane fabric: wall time and events per second of the simulator itself.

use core::fmt::Write as _;

use serde_json::json;

use super::{
    ExpError, ExpOpts, LATENCY_NS, Scenario, Transport, fabric_toml, require_intact, run_scenario,
    write_results,
};
use crate::time::SimTime;
use crate::traffic::permutation;

/// One fabric size.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub hosts: u32,
    pub planes: u8,
    pub switches: u32,
    pub events: u64,
    pub wall_secs: f64,
    pub events_per_sec: f64,
    pub virtual_us: f64,
    pub median_fct_us: f64,
    pub p99_fct_us: f64,
    pub peak_frames: usize,
    /// Heap bytes of the frame pool at the end (its high-water mark).
    pub frame_pool_bytes: usize,
}

/// Run it.
pub fn run(o: &ExpOpts) -> Result<Vec<Row>, ExpError> {
    let dir = o.out.join("scale");
    // (planes, racks, spines, hosts per rack): full bisection, 16 hosts per rack.
    let sizes: &[(u8, u16, u16, u16)] = if o.quick {
        &[(2, 2, 4, 4), (2, 4, 4, 4)]
    } else {
        &[(8, 8, 16, 16), (8, 32, 16, 16), (8, 64, 16, 16)]
    };
    let size = if o.quick { 256 * 1024 } else { 2 << 20 };
    let mut rows = Vec::new();
    for &(planes, racks, spines, hpr) in sizes {
        let hosts = u32::from(racks) * u32::from(hpr);
        let t = Transport::Mrc;
        let mut cfg = t.sim_config(o.seed);
        cfg.sample_every = Some(mrc_transport::Duration::from_micros(20));
        let sc = Scenario {
            name: format!("scale {hosts} hosts"),
            plan: fabric_toml(
                "scale",
                planes,
                racks,
                spines,
                hpr,
                50,
                512 * 1024,
                LATENCY_NS,
            ),
            cfg,
            msgs: permutation(hosts, size, SimTime::ZERO, o.seed),
            opts: t.workload(1),
            faults: Vec::new(),
            limit: SimTime(100_000_000_000),
        };
        let out = run_scenario(&sc, None, o.progress)?;
        require_intact(&out, false)?;
        rows.push(Row {
            hosts,
            planes,
            switches: out.sim.plan().switch_count(),
            events: out.summary.events,
            wall_secs: out.summary.wall_secs,
            events_per_sec: out.summary.events_per_sec(),
            virtual_us: out.summary.end.as_micros_f64(),
            median_fct_us: out.report.fct.median_us,
            p99_fct_us: out.report.fct.p99_us,
            peak_frames: out.sim.peak_frames(),
            frame_pool_bytes: out.sim.frame_pool_bytes(),
        });
    }
    let mut table = format!(
        "# Scale: permutation, {} KiB per flow, MRC, 50 Gb/s ports\n\n\
         | hosts | planes | switches | events | wall (s) | M events/s | virtual µs | median / p99 FCT µs | peak frames in flight | frame pool MB |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
        size / 1024
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "| {} | {} | {} | {} | {:.2} | {:.2} | {:.1} | {:.1} / {:.1} | {} | {:.1} |",
            r.hosts,
            r.planes,
            r.switches,
            r.events,
            r.wall_secs,
            r.events_per_sec / 1e6,
            r.virtual_us,
            r.median_fct_us,
            r.p99_fct_us,
            r.peak_frames,
            r.frame_pool_bytes as f64 / 1e6
        );
    }
    // Wall-clock numbers vary run to run: this experiment's files are the only ones that do.
    write_results(&dir, &table, &json!({"experiment": "scale", "rows": rows}))?;
    Ok(rows)
}
