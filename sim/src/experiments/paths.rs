//! Experiment 7, path failures in both path modes (issue #14): on a 32-host fabric (4 planes ×
//! 4 racks × 8 hosts, 8 spines per plane, 100 Gb/s links of 500 ns) a cross-rack permutation of
//! 8 MB flows meets, at 60 µs, one dead T0–T1 link, three dead links on three planes, or a gray
//! link silently dropping 20 % of its frames; each in SRv6 mode (the sender names the path) and
//! in ECMP mode (the sender draws entropies the switches hash, and cannot see the paths). The
//! p99 FCT is compared with the same mode's fault-free run, and EVs retired are counted on the
//! planes with a fault and on the planes without one (which should retire none). White paper:
//! a path with 20 % injected drop goes inactive at once and line rate holds (brief §6.2 #1,
//! #7, #13); Harp: ECMP flows move to a known-good path within 100 µs.

use core::fmt::Write as _;

use mrc_srv6::plan::{NodeId, SwitchId};
use serde_json::json;

use super::{
    ExpError, ExpOpts, Scenario, Transport, fabric_toml, require_intact, run_scenario,
    write_results,
};
use crate::config::Routing;
use crate::fault::{Fault, FaultKind};
use crate::time::SimTime;
use crate::traffic::cross_rack_permutation;

/// Line rate of every link, Gb/s.
const GBPS: u32 = 100;
/// One-way latency of every link, ns.
const LINK_NS: u64 = 500;
/// Planes of the fabric.
const PLANES: u8 = 4;
/// Per-port buffer, bytes (about 2.5 BDP of this fabric: 100 Gb/s × 4 µs plus serialisation).
const BUFFER: u64 = 128 * 1024;

/// Which fault a run meets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum PathFault {
    /// None: the baseline of its mode.
    None,
    /// t0-0-0 – t1-0-0 dies.
    OneDead,
    /// t0-0-0 – t1-0-0, t0-1-0 – t1-1-0 and t0-2-0 – t1-2-3 die.
    ThreeDead,
    /// t0-0-0 – t1-0-1 silently drops 20 % of its frames, both ways.
    Gray,
}

impl PathFault {
    pub const ALL: [Self; 4] = [Self::None, Self::OneDead, Self::ThreeDead, Self::Gray];

    /// Its name in tables.
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::OneDead => "one dead link",
            Self::ThreeDead => "three dead links",
            Self::Gray => "gray link, 20 % drop",
        }
    }

    /// Its runs' directory names.
    fn slug(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::OneDead => "one_dead_link",
            Self::ThreeDead => "three_dead_links",
            Self::Gray => "gray_link",
        }
    }

    /// The bound on p99 FCT against the fault-free run.
    fn goal(self) -> Option<f64> {
        match self {
            Self::None => None,
            Self::OneDead => Some(1.10),
            Self::ThreeDead => Some(1.20),
            Self::Gray => Some(1.05),
        }
    }

    /// The links it touches, as (plane, rack, spine).
    fn links(self) -> &'static [(u8, u16, u16)] {
        match self {
            Self::None => &[],
            Self::OneDead => &[(0, 0, 0)],
            Self::ThreeDead => &[(0, 0, 0), (1, 0, 0), (2, 0, 3)],
            Self::Gray => &[(0, 0, 1)],
        }
    }

    fn faults(self, at_us: u64) -> Vec<Fault> {
        self.links()
            .iter()
            .map(|&(plane, rack, spine)| {
                let (a, b) = link(plane, rack, spine);
                let kind = match self {
                    Self::Gray => FaultKind::LinkLoss(a, b, 0.2),
                    _ => FaultKind::LinkDown(a, b),
                };
                Fault::at_us(at_us, kind)
            })
            .collect()
    }
}

fn link(plane: u8, rack: u16, spine: u16) -> (NodeId, NodeId) {
    (
        NodeId::Switch(SwitchId::t0(plane, rack)),
        NodeId::Switch(SwitchId::t1(plane, spine)),
    )
}

/// One mode with one fault.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// `SRv6` or `ECMP`.
    pub mode: &'static str,
    pub fault: PathFault,
    pub fault_name: &'static str,
    pub p99_fct_us: f64,
    pub mean_fct_us: f64,
    /// p99 FCT / the same mode's fault-free p99 FCT.
    pub p99_of_fault_free: f64,
    /// The bound on that ratio.
    pub goal: Option<f64>,
    /// Data frames the faulted links dropped (down, in flight, or the gray link's drops).
    pub packets_lost: u64,
    pub retransmits: u64,
    /// EVs retired on the planes with a faulted link.
    pub evs_retired_faulted_planes: u64,
    /// EVs retired on the planes without one (no fault: should be 0).
    pub evs_retired_healthy_planes: u64,
    pub completed: usize,
    pub flows: usize,
}

/// The fabric's shape and the flows of a run, in full or `quick`.
struct Shape {
    racks: u16,
    spines: u16,
    hosts_per_rack: u16,
    flow_bytes: u64,
    fault_at_us: u64,
}

impl Shape {
    fn of(quick: bool) -> Self {
        let (racks, spines, hosts_per_rack, flow_bytes, fault_at_us) = if quick {
            (2, 4, 4, 2 << 20, 10)
        } else {
            (4, 8, 8, 8 << 20, 60)
        };
        Self {
            racks,
            spines,
            hosts_per_rack,
            flow_bytes,
            fault_at_us,
        }
    }

    fn hosts(&self) -> u32 {
        u32::from(self.racks) * u32::from(self.hosts_per_rack)
    }

    fn plan(&self) -> String {
        let (racks, spines, hpr) = (self.racks, self.spines, self.hosts_per_rack);
        fabric_toml(
            "paths",
            PLANES,
            racks,
            spines,
            hpr,
            GBPS,
            BUFFER,
            (LINK_NS, LINK_NS),
        )
    }
}

/// Run it: both modes, every fault.
pub fn run(o: &ExpOpts) -> Result<Vec<Row>, ExpError> {
    let dir = o.out.join("paths");
    let shape = Shape::of(o.quick);
    let (plan, hpr) = (shape.plan(), u32::from(shape.hosts_per_rack));
    let msgs = cross_rack_permutation(shape.hosts(), hpr, shape.flow_bytes, SimTime::ZERO, o.seed);
    let t = Transport::Mrc;
    let mut rows = Vec::new();
    for (mode, routing) in [("SRv6", Routing::Srv6), ("ECMP", Routing::Ecmp)] {
        let mut clean_p99 = f64::NAN;
        for fault in PathFault::ALL {
            let mut cfg = t.sim_config(o.seed);
            cfg.routing = routing;
            let sc = Scenario {
                name: format!("{mode}, {}", fault.name()),
                plan: plan.clone(),
                cfg,
                msgs: msgs.clone(),
                opts: t.workload(1),
                faults: fault.faults(shape.fault_at_us),
                limit: SimTime(100_000_000_000),
            };
            let slug = format!("{}_{}", mode.to_lowercase(), fault.slug());
            let out = run_scenario(&sc, Some(&dir.join(slug)), o.progress)?;
            require_intact(&out, false)?;
            let r = &out.report;
            if fault == PathFault::None {
                clean_p99 = r.fct.p99_us;
            }
            let faulted: Vec<u8> = fault.links().iter().map(|l| l.0).collect();
            let retired = |on_faulted: bool| -> u64 {
                r.plane_counters
                    .iter()
                    .filter(|p| faulted.contains(&p.plane) == on_faulted)
                    .map(|p| p.evs_retired)
                    .sum()
            };
            let lost: u64 = fault
                .links()
                .iter()
                .map(|&(p, k, s)| {
                    let (a, b) = link(p, k, s);
                    super::failover::data_lost_on(&out.sim, a, b)
                })
                .sum::<u64>()
                + out.sim.fabric_counters().lost_in_flight_data;
            rows.push(Row {
                mode,
                fault,
                fault_name: fault.name(),
                p99_fct_us: r.fct.p99_us,
                mean_fct_us: r.fct.mean_us,
                p99_of_fault_free: r.fct.p99_us / clean_p99,
                goal: fault.goal(),
                packets_lost: lost,
                retransmits: r.plane_counters.iter().map(|p| p.retransmits).sum(),
                evs_retired_faulted_planes: retired(true),
                evs_retired_healthy_planes: retired(false),
                completed: r.fct.completed,
                flows: r.fct.flows,
            });
        }
    }
    let (hosts, planes) = (shape.hosts(), PLANES);
    let Shape {
        racks,
        spines,
        hosts_per_rack: hpr,
        flow_bytes,
        fault_at_us: at_us,
    } = shape;
    let mut table = format!(
        "# Path failures in both path modes ({hosts} hosts: {planes} planes × {racks} racks × \
         {hpr} hosts, {spines} spines per plane, {GBPS} Gb/s links of {LINK_NS} ns; cross-rack \
         permutation of {} KB flows, faults at {at_us} µs, MRC)\n\n\
         | mode | fault | p99 FCT µs | mean FCT µs | p99 / fault-free | goal | data packets lost | \
         retransmitted | EVs retired, faulted planes | EVs retired, other planes | done |\n\
         |---|---|---|---|---|---|---|---|---|---|---|\n",
        flow_bytes / 1000
    );
    for r in &rows {
        let _ = writeln!(
            table,
            "| {} | {} | {:.1} | {:.1} | {:.3} | {} | {} | {} | {} | {} | {}/{} |",
            r.mode,
            r.fault_name,
            r.p99_fct_us,
            r.mean_fct_us,
            r.p99_of_fault_free,
            r.goal.map_or("—".into(), |g| format!("≤ {g:.2}")),
            r.packets_lost,
            r.retransmits,
            r.evs_retired_faulted_planes,
            r.evs_retired_healthy_planes,
            r.completed,
            r.flows
        );
    }
    write_results(&dir, &table, &json!({"experiment": "paths", "rows": rows}))?;
    Ok(rows)
}
