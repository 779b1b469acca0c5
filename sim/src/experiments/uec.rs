//! Experiment 6, the UEC reference simulator's fabric (issue #14): one 400 Gb/s plane, 1 µs
//! links, per-port buffers of one BDP with ECN marking from 0.2 to 0.8 BDP; a permutation of
//! 2 MB flows on 128 and 1024 hosts (32 hosts per rack, as many spines as hosts per rack), its
//! p99 FCT against the ideal (every byte on the wire at line rate, plus the unloaded RTT), and
//! what the policy cost on the way: trims, ECN marks, retransmissions, EVs retired, queues.
//! Each size runs twice: with the engine's default EV selection (spraying in SRv6 mode) and
//! with recycling (REPS-style: clean EVs reused first, as the UEC simulator's load balancer),
//! the comparison the next policy change is judged by. The plans are shipped as
//! `plans/uec-128.toml` and `plans/uec-1024.toml`.

use core::fmt::Write as _;
use std::path::Path;

use mrc_transport::config::SelectorKind;
use serde_json::json;

use super::{ExpError, ExpOpts, Scenario, Transport, require_intact, run_scenario, write_results};
use crate::time::SimTime;
use crate::traffic::permutation;

/// Line rate of every port, Gb/s.
const GBPS: u32 = 400;
/// One-way latency of every link, ns.
const LINK_NS: u64 = 1_000;
/// Bytes per flow.
const FLOW_BYTES: u64 = 2_000_000;
/// The BDP the buffers and ECN thresholds are sized from: 400 Gb/s × 8.3 µs, the fabric's
/// unloaded RTT (4 links each way).
const BDP_BYTES: u64 = 415_000;

/// The plan of a UEC-style fabric of `racks` racks of `hosts_per_rack` hosts and `spines`
/// spines (what `plans/uec-*.toml` hold).
pub fn uec_toml(name: &str, racks: u16, spines: u16, hosts_per_rack: u16) -> String {
    let link = format!(
        "speed_gbps = {GBPS}\nlatency_ns = {LINK_NS}\nbuffer_bytes = {BDP_BYTES}\n\
         ecn_min_bytes = {}\necn_max_bytes = {}\necn_max_prob = 1.0\n",
        BDP_BYTES / 5,
        BDP_BYTES * 4 / 5
    );
    format!(
        "# A UEC-style fabric (mrc-experiments uec, issue #14): one {GBPS} Gb/s plane, {racks} racks \
         of\n# {hosts_per_rack} hosts, {spines} spines, 1 us links, one-BDP buffers (400 Gb/s x 8.3 us) \
         with ECN\n# from 0.2 to 0.8 BDP.\n\
         name = \"{name}\"\nplanes = 1\nt0_per_plane = {racks}\nt1_per_plane = {spines}\n\
         hosts_per_t0 = {hosts_per_rack}\nusid_block = \"fcbb:bb00::/32\"\nhost_usids = \"downlink\"\n\
         mtu = 9000\n\n[links.host]\n{link}\n[links.fabric]\n{link}\n[sim]\ntrim = true\n"
    )
}

/// One fabric size with one EV selection policy.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    pub hosts: u32,
    /// `default` (the engine's: spraying in SRv6 mode) or `recycle`.
    pub selector: &'static str,
    pub ideal_fct_us: f64,
    pub median_fct_us: f64,
    pub p99_fct_us: f64,
    /// p99 FCT / ideal FCT.
    pub p99_of_ideal: f64,
    pub trimmed: u64,
    pub ecn_marked: u64,
    pub retransmits: u64,
    pub evs_retired: u64,
    /// Largest mean-over-time 99th-percentile queue of any hop, bytes.
    pub p99_queue_bytes: f64,
    pub completed: usize,
    pub flows: usize,
}

/// Run it.
pub fn run(o: &ExpOpts) -> Result<Vec<Row>, ExpError> {
    let dir = o.out.join("uec");
    // (racks, spines, hosts per rack).
    let sizes: &[(u16, u16, u16)] = if o.quick {
        &[(4, 8, 8)]
    } else {
        &[(4, 32, 32), (32, 32, 32)]
    };
    let size = if o.quick { 1 << 20 } else { FLOW_BYTES };
    let mut rows = Vec::new();
    for &fabric in sizes {
        for selector in [None, Some(SelectorKind::Recycle)] {
            rows.push(run_one(o, &dir, fabric, size, selector)?);
        }
    }
    let mut table = format!(
        "# UEC-style fabric: one {GBPS} Gb/s plane, 1 µs links, one-BDP buffers, ECN 0.2–0.8 BDP; \
         permutation of {} KB flows, MRC\n\n\
         | hosts | EV selection | ideal FCT µs | median FCT µs | p99 FCT µs | p99 / ideal | trimmed | \
         ECN marked | retransmitted | EVs retired | worst hop's p99 queue KB | done |\n\
         |---|---|---|---|---|---|---|---|---|---|---|---|\n",
        size / 1000
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "| {} | {} | {:.1} | {:.1} | {:.1} | {:.2} | {} | {} | {} | {} | {:.1} | {}/{} |",
            r.hosts,
            r.selector,
            r.ideal_fct_us,
            r.median_fct_us,
            r.p99_fct_us,
            r.p99_of_ideal,
            r.trimmed,
            r.ecn_marked,
            r.retransmits,
            r.evs_retired,
            r.p99_queue_bytes / 1000.0,
            r.completed,
            r.flows
        );
    }
    write_results(&dir, &table, &json!({"experiment": "uec", "rows": rows}))?;
    Ok(rows)
}

/// One run: the `(racks, spines, hosts per rack)` fabric, a permutation of `size`-byte
/// flows, with the engine's default EV selection or `selector`.
fn run_one(
    o: &ExpOpts,
    dir: &Path,
    (racks, spines, hpr): (u16, u16, u16),
    size: u64,
    selector: Option<SelectorKind>,
) -> Result<Row, ExpError> {
    let hosts = u32::from(racks) * u32::from(hpr);
    let t = Transport::Mrc;
    let mut cfg = t.sim_config(o.seed);
    let (label, name, out_dir) = match selector {
        None => (
            "default",
            format!("MRC {hosts} hosts"),
            format!("mrc_{hosts}"),
        ),
        Some(kind) => {
            cfg.tweak_endpoints(move |_, c| {
                c.ev_profiles.iter_mut().for_each(|p| p.selector = kind);
            });
            (
                "recycle",
                format!("MRC {hosts} hosts, recycle"),
                format!("mrc_{hosts}_recycle"),
            )
        }
    };
    let sc = Scenario {
        name,
        plan: uec_toml(&format!("uec-{hosts}"), racks, spines, hpr),
        cfg,
        msgs: permutation(hosts, size, SimTime::ZERO, o.seed),
        opts: t.workload(1),
        faults: Vec::new(),
        limit: SimTime(100_000_000_000),
    };
    let out = run_scenario(&sc, Some(&dir.join(out_dir)), o.progress)?;
    require_intact(&out, false)?;
    let r = &out.report;
    let ideal_fct_us = out.ideal_us(out.wire_bytes(size), f64::from(GBPS));
    Ok(Row {
        hosts,
        selector: label,
        ideal_fct_us,
        median_fct_us: r.fct.median_us,
        p99_fct_us: r.fct.p99_us,
        p99_of_ideal: r.fct.p99_us / ideal_fct_us,
        trimmed: r.fabric.switch_ports.trimmed,
        ecn_marked: r.fabric.switch_ports.ecn_marked,
        retransmits: r.plane_counters.iter().map(|p| p.retransmits).sum(),
        evs_retired: r.plane_counters.iter().map(|p| p.evs_retired).sum(),
        p99_queue_bytes: r
            .queues
            .iter()
            .map(|q| q.mean_p99_bytes)
            .fold(0.0, f64::max),
        completed: r.fct.completed,
        flows: r.fct.flows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_plans_are_the_experiments_own() {
        let shipped = |f: &str| {
            std::fs::read_to_string(
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("../plans")
                    .join(f),
            )
            .unwrap()
        };
        assert_eq!(shipped("uec-128.toml"), uec_toml("uec-128", 4, 32, 32));
        assert_eq!(shipped("uec-1024.toml"), uec_toml("uec-1024", 32, 32, 32));
    }
}
