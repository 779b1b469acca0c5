//! `--backend sim`: N ranks on N hosts of a simulated fabric (the 8-plane plan by default), in
//! virtual time, with faults injectable. Memory is [`CompactMemory`], so 64 ranks × 256 MB
//! buffers fit; times and bandwidths are virtual.
//!
//! Ranks are spread over the racks (rank r on rack r mod racks), so ring neighbours sit in
//! different racks and every byte crosses the spine layer, where faults strike.

use mrc_sim::{
    ConnOpts, FabricCounters, Fault, RunLimit, RunSummary, Sim, SimConfig, SimError, SimTime,
};
use mrc_srv6::plan::{LinkTier, Plan};
use mrc_transport::verbs::{QpCap, Qpn};

use super::{BufferSizes, RECV_VA, RankBuffers, SEND_VA, STAGE_VA, fold_all, pairs};
use crate::bench::{Average, LineResult};
use crate::comm::{Comm, CommSetup, DEFAULT_RECV_DEPTH, DEFAULT_WINDOW, Region};
use crate::memory::CompactMemory;
use crate::program::{Program, ProgramOpts, RankReport, ReportHandle, Row};

/// The default fabric: 8 planes × 8 racks × 16 hosts, 400 Gb/s links.
pub const DEFAULT_PLAN_TOML: &str = include_str!("../../../plans/8plane-128.toml");

/// Why a simulated run could not be made or did not finish.
#[derive(Debug, thiserror::Error)]
pub enum SimBackendError {
    #[error("plan: {0}")]
    Plan(String),
    #[error("{ranks} ranks do not fit the plan's {hosts} hosts")]
    TooManyRanks { ranks: usize, hosts: u32 },
    #[error(transparent)]
    Sim(#[from] SimError),
    #[error("stopped early: nobody reads the results any more")]
    Stopped,
}

/// Faults that strike "mid-run": during the timed loop of one line, once rank 0 started it.
#[derive(Debug, Clone)]
pub struct MidRun {
    pub row: usize,
    /// 0 out-of-place, 1 in-place.
    pub placement: usize,
    /// How long after the timed loop started (virtual ns).
    pub after_ns: u64,
    /// The faults, their times relative to the trigger.
    pub faults: Vec<Fault>,
}

/// How the simulated ranks are set up.
#[derive(Debug, Clone)]
pub struct SimBackend {
    pub plan: Plan,
    pub ranks: usize,
    pub seed: u64,
    /// Faults at absolute virtual times.
    pub faults: Vec<Fault>,
    pub mid_run: Option<MidRun>,
    pub window: u32,
    pub recv_depth: u32,
    /// How the ranks' times fold into a line (`-a`).
    pub average: Average,
    /// Asked between stretches of virtual time: `false` stops the run early
    /// ([`SimBackendError::Stopped`]), as when the reader of the table went away.
    pub go_on: fn() -> bool,
}

/// Virtual time between two looks at the ranks' reports.
const SEGMENT: SimTime = SimTime(50_000_000);

/// What a simulated run produced.
#[derive(Debug)]
pub struct SimRun {
    pub reports: Vec<RankReport>,
    pub summary: RunSummary,
    pub counters: FabricCounters,
    /// EV health changes seen (failover activity).
    pub ev_changes: usize,
    /// The faults that struck mid-run, at their absolute times.
    pub mid_run_faults: Vec<Fault>,
    /// The host of each rank.
    pub hosts: Vec<u32>,
}

/// The built-in 8-plane plan.
pub fn default_plan() -> Plan {
    Plan::from_toml(DEFAULT_PLAN_TOML, "<builtin 8plane-128>").expect("the built-in plan is valid")
}

impl SimBackend {
    pub fn new(plan: Plan, ranks: usize) -> Self {
        Self {
            plan,
            ranks,
            seed: 1,
            faults: Vec::new(),
            mid_run: None,
            window: DEFAULT_WINDOW,
            recv_depth: DEFAULT_RECV_DEPTH,
            average: Average::Mean,
            go_on: || true,
        }
    }

    /// Host of rank `r`: round-robin over the racks.
    pub fn host_of(&self, r: usize) -> u32 {
        let racks = usize::from(self.plan.t0_per_plane());
        let rack = (r % racks) as u16;
        let k = (r / racks) as u16;
        self.plan.host_at(rack, k).0
    }

    /// Bytes per second a host can send: every plane's port.
    pub fn host_rate_bytes(&self) -> f64 {
        let gbps = f64::from(self.plan.link_params(LinkTier::Host).speed_gbps);
        gbps * f64::from(self.plan.planes()) / 8.0 * 1e9
    }

    /// Runs every row on every rank; `on_line` gets each line as soon as every rank measured
    /// it.
    pub fn run(
        &self,
        rows: &[Row],
        popts: &ProgramOpts,
        on_line: &mut dyn FnMut(usize, [Option<LineResult>; 2]),
    ) -> Result<SimRun, SimBackendError> {
        self.run_watched(rows, popts, on_line, &mut |_, _, _, _| {})
    }

    /// As [`run`](Self::run), calling `watch(sim, hosts, qpns, last)` after every segment of
    /// virtual time and once at the end (`last`): the ranks' hosts and their QPs, to read the
    /// engines' counters.
    pub fn run_watched(
        &self,
        rows: &[Row],
        popts: &ProgramOpts,
        on_line: &mut dyn FnMut(usize, [Option<LineResult>; 2]),
        watch: &mut SimWatch<'_>,
    ) -> Result<SimRun, SimBackendError> {
        let n = self.ranks;
        let racks = usize::from(self.plan.t0_per_plane());
        let per_rack = usize::from(self.plan.hosts_per_t0());
        if n == 0 || n > racks * per_rack {
            return Err(SimBackendError::TooManyRanks {
                ranks: n,
                hosts: self.plan.host_count(),
            });
        }
        let mut cfg = SimConfig::from_plan(&self.plan).map_err(|e| SimBackendError::Plan(e.0))?;
        cfg.seed = self.seed;
        cfg.sample_every = None;
        let mut sim = Sim::new(self.plan.clone(), cfg)?;
        let hosts: Vec<u32> = (0..n).map(|r| self.host_of(r)).collect();

        let sizes = BufferSizes::for_rows(rows);
        let mut regions = Vec::with_capacity(n);
        let mut published = Vec::with_capacity(n);
        for &h in &hosts {
            let mut reg = |va: u64, len: u64| -> Result<(Region, u32), SimError> {
                let keys = sim.register(h, va, Box::new(CompactMemory::new(len as usize)))?;
                Ok((
                    Region {
                        lkey: keys.lkey,
                        va,
                        len,
                    },
                    keys.rkey,
                ))
            };
            let (send, _) = reg(SEND_VA, sizes.send)?;
            let (recv, recv_rkey) = reg(RECV_VA, sizes.recv)?;
            let (stage, stage_rkey) = reg(STAGE_VA, sizes.stage)?;
            regions.push((send, recv, stage));
            published.push(RankBuffers::of(recv, recv_rkey, stage, stage_rkey));
        }

        let opts = ConnOpts {
            cap: QpCap {
                max_send_wr: (self.window * 2).max(256),
                max_recv_wr: (self.recv_depth * 2).max(256),
                max_send_sge: 1,
            },
            ..ConnOpts::default()
        };
        let mut links = vec![Vec::new(); n];
        let mut qpns: Vec<Vec<Qpn>> = vec![Vec::new(); n];
        for (a, b) in pairs(rows, n) {
            let c = sim.connect(hosts[a], hosts[b], opts)?;
            qpns[a].push(c.a.qpn);
            qpns[b].push(c.b.qpn);
            links[a].push(published[b].link(b, c.a.qpn));
            links[b].push(published[a].link(a, c.b.qpn));
        }

        let mut handles: Vec<ReportHandle> = Vec::with_capacity(n);
        for (r, links) in links.into_iter().enumerate() {
            let (send, recv, stage) = regions[r];
            let comm = Comm::new(CommSetup {
                rank: r,
                nranks: n,
                send,
                recv,
                stage,
                links,
                window: self.window,
                recv_depth: self.recv_depth,
            });
            let (program, report) = Program::new(comm, rows.to_vec(), popts.clone());
            sim.set_app(hosts[r], Box::new(program))?;
            handles.push(report);
        }
        for f in &self.faults {
            sim.schedule(*f);
        }

        let mut printed = 0;
        let check = popts.checks > 0;
        let mut emit = |handles: &[ReportHandle], upto_all: bool| {
            while printed < rows.len() {
                let reports: Vec<RankReport> = handles
                    .iter()
                    .map(|h| h.lock().expect("report lock").clone())
                    .collect();
                let complete = reports.iter().all(|r| {
                    let m = r.rows[printed][1];
                    m.time_ns.is_some() && (!check || m.wrong.is_some())
                });
                if !complete && !upto_all {
                    return;
                }
                let lines = fold_all(
                    &rows[printed..=printed],
                    &trim(&reports, printed),
                    self.average,
                );
                on_line(printed, lines[0]);
                printed += 1;
            }
        };
        // Run in segments of virtual time: between two, print what is complete and strike
        // the mid-run faults when their line's timed loop has started.
        let mut mid = self.mid_run.clone();
        let mut struck = Vec::new();
        let mut summary = RunSummary {
            events: 0,
            end: sim.now(),
            apps_done: false,
            wall_secs: 0.0,
        };
        loop {
            let from = sim.now();
            let until = SimTime(from.0.saturating_add(SEGMENT.0));
            let seg = sim.run(RunLimit::until(until), &mut |_| {});
            summary.events += seg.events;
            summary.wall_secs += seg.wall_secs;
            summary.end = seg.end;
            summary.apps_done = seg.apps_done;
            emit(&handles, false);
            watch(&sim, &hosts, &qpns, false);
            // Done, or nothing left to happen at all.
            if seg.apps_done || (seg.events == 0 && seg.end <= from) {
                break;
            }
            if !(self.go_on)() {
                return Err(SimBackendError::Stopped);
            }
            if let Some(m) = &mid {
                let started =
                    handles[0].lock().expect("report lock").rows[m.row][m.placement].timed_start_ns;
                if let Some(t) = started {
                    let base = SimTime(t * 1000 + m.after_ns * 1000).max(sim.now());
                    for f in &m.faults {
                        let f = Fault {
                            at: base.plus_ps(f.at.0),
                            kind: f.kind,
                        };
                        sim.schedule(f);
                        struck.push(f);
                    }
                    mid = None;
                }
            }
        }
        emit(&handles, true);
        watch(&sim, &hosts, &qpns, true);
        let reports: Vec<RankReport> = handles
            .iter()
            .map(|h| h.lock().expect("report lock").clone())
            .collect();
        let ev_changes = sim.ev_changes().len();
        let counters = sim.fabric_counters();
        if !summary.apps_done {
            return Err(SimError::NotDone {
                now_us: summary.end.as_micros_f64(),
                events: summary.events,
            }
            .into());
        }
        Ok(SimRun {
            reports,
            summary,
            counters,
            ev_changes,
            mid_run_faults: struck,
            hosts,
        })
    }
}

/// What [`SimBackend::run_watched`] calls: `(sim, hosts, qpns, last)`.
pub type SimWatch<'a> = dyn FnMut(&Sim, &[u32], &[Vec<Qpn>], bool) + 'a;

/// The reports reduced to row `row` (for folding one line).
fn trim(reports: &[RankReport], row: usize) -> Vec<RankReport> {
    reports
        .iter()
        .map(|r| RankReport {
            rows: vec![r.rows[row]],
            error: r.error.clone(),
            done: r.done,
        })
        .collect()
}
