//! `mrc-coll`: nccl-tests' collective benchmarks over MRC (docs/mrc-coll.md).
//!
//! ```text
//!  cli ──► BenchOpts ──► setup: every refusal (ranks, root, window, planes, memory, -J)
//!                          ▼      before anything is printed
//!          backend: sim | mem | dpdk ──► Program per rank
//!                          │  per line: every rank's time and #wrong
//!                          ▼
//!          nccl-tests' table (time averaged over ranks or as -a says, #wrong summed) · JSON
//! ```
//!
//! The collectives and the table are `mrc-coll`'s; this module only parses the command line,
//! picks the backend and prints (through [`outln!`](crate::outln): a reader that goes away
//! ends the output quietly).

pub mod cli;
pub mod dpdk;
pub mod setup;

use std::fmt::Write as _;
use std::sync::Arc;

use anyhow::Context as _;
use mrc_coll::backend::sim::{MidRun, SimBackend, SimBackendError, default_plan};
use mrc_coll::backend::{mem, program_opts};
use mrc_coll::bench::{self, LineResult};
use mrc_coll::program::Blocking;
use mrc_coll::{BenchOpts, Row};
use mrc_sim::Fault;
use mrc_srv6::plan::{LinkTier, Plan};
use mrc_transport::Duration;

use crate::faults::{FaultSpec, describe, schedule};
use crate::metrics::coll::lines as coll_lines;
use crate::metrics::counters::Snapshot;
use crate::metrics::telemetry::Telemetry;
use crate::perf::nic_backend::host_counters;
use crate::{out, outln, usage};
use cli::Args;
use setup::{Backend, JsonFile};

/// What a run printed and whether it passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub lines: Vec<[Option<LineResult>; 2]>,
    /// Every line measured and every element right.
    pub ok: bool,
}

/// Runs the benchmark the command line asks for, printing as nccl-tests does (or, for
/// `switch`, the one-machine fabric of `--backend dpdk`). Everything the command line gets
/// wrong is refused (a [`Usage`](crate::tool::Usage) error) before the first line.
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.collective()? == "switch" {
        return dpdk::run_switch(args);
    }
    let opts = args.bench()?;
    let backend = Backend::of(args)?;
    let tele = telemetry(args, backend, opts.coll.name())?;
    let out = match backend {
        Backend::Sim => run_sim(args, &opts, tele.as_deref()),
        Backend::Mem => run_mem(args, &opts, tele.as_deref()),
        Backend::Dpdk => dpdk::run_dpdk(args, &opts, tele.as_ref()),
    };
    if let Some(t) = tele {
        // Failures are on stderr already; a telemetry failure does not fail the run.
        let _ = t.finish(&t.exporter().last());
        t.linger();
    }
    out
}

/// The one place mrc-coll's sinks are built (`TelemetryArgs`: `--metrics`, `--push`,
/// `--metrics-textfile`, `--sample-every`, `--metrics-linger`). The Pushgateway instance is
/// `HOSTNAME-rRANK` (every rank pushes its own group; sim and mem run every rank in one
/// process: `HOSTNAME-r0`).
fn telemetry(args: &Args, backend: Backend, test: &str) -> anyhow::Result<Option<Arc<Telemetry>>> {
    let rank = match backend {
        Backend::Dpdk => dpdk::ranks(args)?.0,
        Backend::Sim | Backend::Mem => 0,
    };
    let instance = format!("{}-r{rank}", crate::metrics::telemetry::hostname());
    let mut cfg = args
        .telemetry
        .config("mrc-coll", &instance, backend == Backend::Sim)
        .map_err(|e| usage!("{e}"))?;
    // One file per rank: the ranks of one machine share its textfile directory.
    cfg.textfile_name = format!("mrc-coll-r{rank}.prom");
    if !cfg.any_sink() {
        return Ok(None);
    }
    Telemetry::start(&cfg, &[("test", test)]).map(|t| Some(Arc::new(t)))
}

/// How often the engine counters are sampled while a line runs: `--sample-every`, or every
/// 100 ms (wall time; the simulator samples between its segments of simulated time, at most
/// this often in wall time).
pub fn sample_period(tele: Option<&Telemetry>) -> std::time::Duration {
    match tele {
        None => std::time::Duration::MAX,
        Some(t) => t
            .config()
            .sample_every
            .filter(|_| !t.config().simulated)
            .map_or(std::time::Duration::from_millis(100), |d| {
                std::time::Duration::from_nanos(d.0)
            }),
    }
}

/// Operations each rank times per line (`-n` iterations of `-m` operations).
pub fn timed_ops(opts: &BenchOpts) -> u64 {
    u64::from(opts.iters.max(1)) * u64::from(opts.agg_iters.max(1))
}

impl Outcome {
    /// The outcome of these lines: every one measured and every element right.
    pub fn of(lines: Vec<[Option<LineResult>; 2]>) -> Self {
        let ok = lines
            .iter()
            .flatten()
            .all(|l| l.is_some_and(|l| l.wrong.is_none_or(|w| w == 0)));
        Self { lines, ok }
    }
}

/// nccl-tests' first lines and the device list.
pub fn preamble(opts: &BenchOpts, devices: &[String]) -> String {
    let step = if opts.step_factor > 1 {
        format!("{}(factor)", opts.step_factor)
    } else {
        format!("{}(bytes)", opts.step_bytes)
    };
    let mut s = format!(
        "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: {} validation: {} graph: 0\n",
        opts.min_bytes, opts.max_bytes, opts.warmup, opts.iters, opts.agg_iters, opts.checks
    );
    match opts.blocking {
        Blocking::BarrierEach => s.push_str(
            "# Blocking Enabled: wait and barrier after each inner iteration (-m) \n",
        ),
        Blocking::Wait => {
            s.push_str("# Blocking Enabled: wait after each inner iteration (-m), no barrier \n");
        }
        Blocking::BarrierIterExcluded => s.push_str(
            "# Blocking Enabled: wait and barrier after each outer iteration (-n); time excludes barrier \n",
        ),
        Blocking::No => {}
    }
    s.push_str("#\n# Using devices\n");
    for (r, d) in devices.iter().enumerate() {
        let _ = writeln!(
            s,
            "#  Rank {r:>2} Group  0 Pid {:>6} on {d}",
            std::process::id()
        );
    }
    s
}

/// Prints the table as lines arrive and the footer; returns the outcome.
#[derive(Debug)]
pub struct Printer<'a> {
    rows: &'a [Row],
    lines: Vec<[Option<LineResult>; 2]>,
    /// `--metrics`: the exporter the lines go to, and the operations timed per line.
    metrics: Option<(Arc<crate::metrics::Exporter>, u64)>,
}

impl<'a> Printer<'a> {
    pub fn new(rows: &'a [Row]) -> Self {
        out!("#\n{}", bench::header());
        Self {
            rows,
            lines: vec![[None, None]; rows.len()],
            metrics: None,
        }
    }

    /// Publish every line printed to `tele`'s exporter too.
    pub fn with_metrics(mut self, tele: Option<&Telemetry>, opts: &BenchOpts) -> Self {
        self.metrics = tele.map(|t| (t.exporter().clone(), timed_ops(opts)));
        self
    }

    pub fn line(&mut self, i: usize, l: [Option<LineResult>; 2]) {
        self.lines[i] = l;
        outln!("{}", bench::line(&self.rows[i].spec, l));
        if let Some((e, ops)) = &self.metrics {
            e.publish_coll(coll_lines(self.rows, &self.lines, *ops));
        }
    }

    pub fn finish(self, json: Option<JsonFile>) -> anyhow::Result<Outcome> {
        out!("{}", bench::footer(&self.lines));
        if let Some(file) = json {
            let doc: Vec<serde_json::Value> = self
                .rows
                .iter()
                .zip(&self.lines)
                .map(|(r, l)| {
                    serde_json::json!({
                        "collective": r.spec.coll.name(),
                        "size": r.spec.size_bytes(),
                        "count": r.spec.count,
                        "type": r.spec.dtype.name(),
                        "redop": r.spec.op.map_or("none", |o| o.name()),
                        "root": bench::root_column(&r.spec),
                        "ranks": r.spec.nranks,
                        "out_of_place": l[0],
                        "in_place": l[1],
                    })
                })
                .collect();
            file.write(&serde_json::Value::Array(doc))?;
        }
        Ok(Outcome::of(self.lines))
    }
}

/// The `-J` file, if any, created now.
fn json_file(args: &Args) -> anyhow::Result<Option<JsonFile>> {
    args.json.as_deref().map(JsonFile::create).transpose()
}

fn load_plan(args: &Args) -> anyhow::Result<Plan> {
    match &args.plan {
        None => Ok(default_plan()),
        Some(p) => Plan::load_or_builtin(p).map_err(|e| usage!("--plan {p}: {e}")),
    }
}

/// The simulator's faults: absolute ones, and those without a time, which strike mid-way
/// through the last line's timed out-of-place loop.
fn sim_faults(
    backend: &mut SimBackend,
    specs: &[FaultSpec],
    rows: &[Row],
    iters: u32,
) -> anyhow::Result<()> {
    let timed = |s: &FaultSpec| match *s {
        FaultSpec::FailLink { at, .. } => at.is_some(),
        FaultSpec::FlapLink { start, .. } => start.is_some(),
        FaultSpec::Loss { .. } => true,
    };
    let client = backend.host_of(0);
    let (abs, rel): (Vec<FaultSpec>, Vec<FaultSpec>) = specs.iter().partition(|s| timed(s));
    backend.faults =
        schedule(&abs, &backend.plan, client, Duration::ZERO).map_err(|e| usage!("{e}"))?;
    if !rel.is_empty() {
        let row = rows.len() - 1;
        let spec = rows[row].spec;
        let bytes = spec.size_bytes() as f64 * spec.coll.bus_factor(spec.nranks).max(0.5);
        let op_ns = bytes / backend.host_rate_bytes() * 1e9;
        backend.mid_run = Some(MidRun {
            row,
            placement: 0,
            after_ns: (op_ns * f64::from(iters) / 2.0) as u64,
            faults: schedule(&rel, &backend.plan, client, Duration::ZERO)
                .map_err(|e| usage!("{e}"))?,
        });
    }
    Ok(())
}

fn run_sim(args: &Args, opts: &BenchOpts, tele: Option<&Telemetry>) -> anyhow::Result<Outcome> {
    let faults = args.faults()?;
    let plan = load_plan(args)?;
    let ranks = setup::sim_ranks(args, &plan)?;
    let rows = setup::rows(opts, ranks)?;
    setup::memory(&rows, ranks, true)?;
    let mut backend = SimBackend::new(plan, ranks);
    backend.seed = args.seed.unwrap_or(1);
    backend.window = args.window;
    backend.average = opts.average;
    // A reader that went away (`| head -1`) ends a long simulation early.
    backend.go_on = crate::tool::out_open;
    sim_faults(&mut backend, &faults.specs, &rows, opts.iters)?;
    let json = json_file(args)?;
    let plan = &backend.plan;
    let gbps = plan.link_params(LinkTier::Host).speed_gbps;
    let devices: Vec<String> = (0..ranks)
        .map(|r| {
            format!(
                "sim-h{} device {r:>2} [MRC {} planes x {gbps} Gb/s, plan {}]",
                backend.host_of(r),
                plan.planes(),
                plan.name()
            )
        })
        .collect();
    out!("{}", preamble(opts, &devices));
    let mut printer = Printer::new(&rows).with_metrics(tele, opts);
    // --metrics: every rank's engine counters (host = the plan's host), at most every 100 ms
    // of wall time and at the end.
    let mut published: Option<std::time::Instant> = None;
    let mut watch =
        |sim: &mrc_sim::Sim, hosts: &[u32], qpns: &[Vec<mrc_transport::verbs::Qpn>], last: bool| {
            if let Some(t) = tele
                && (last || published.is_none_or(|p| p.elapsed() >= sample_period(tele)))
            {
                let mut snap = crate::perf::sim_backend::snapshot(sim, hosts, qpns);
                for (r, h) in snap.hosts.iter_mut().enumerate() {
                    h.relabel(r as u32);
                }
                t.sample(&snap);
                published = Some(std::time::Instant::now());
            }
        };
    let run = backend.run_watched(
        &rows,
        &program_opts(opts, true),
        &mut |i, l| {
            printer.line(i, l);
        },
        &mut watch,
    );
    let run = match run {
        Ok(r) => r,
        Err(SimBackendError::Stopped) => {
            // Nobody reads on: what ran is the verdict (no line wrong so far).
            let lines = printer.finish(None)?.lines;
            let ok = lines
                .iter()
                .flatten()
                .flatten()
                .all(|l| l.wrong.is_none_or(|w| w == 0));
            return Ok(Outcome { lines, ok });
        }
        Err(e) => {
            let _ = printer.finish(None);
            return Err(e.into());
        }
    };
    let out = printer.finish(json)?;
    let rate = backend.host_rate_bytes() / 1e9;
    let peak = out
        .lines
        .iter()
        .flatten()
        .flatten()
        .map(|l| l.busbw)
        .fold(0.0_f64, f64::max);
    outln!(
        "# MRC sim: host line rate {rate:.1} GB/s ({} planes x {gbps} Gb/s); peak busbw {peak:.2} GB/s = {:.1} % of it",
        plan.planes(),
        100.0 * peak / rate
    );
    let mut faults: Vec<Fault> = backend.faults.clone();
    faults.extend(run.mid_run_faults.iter().copied());
    for f in describe(&faults) {
        outln!("# MRC sim: fault {f}");
    }
    let c = run.counters;
    outln!(
        "# MRC sim: {} EV state changes; switch ports: {} trimmed, {} ECN-marked, {} dropped, {} lost on failed links",
        run.ev_changes,
        c.switch_ports.trimmed,
        c.switch_ports.ecn_marked,
        c.switch_ports.tail_dropped + c.switch_ports.down_dropped,
        c.lost_in_flight
    );
    outln!(
        "# MRC sim: virtual time {:.3} ms, {} events in {:.1} s wall",
        run.summary.end.as_micros_f64() / 1000.0,
        run.summary.events,
        run.summary.wall_secs
    );
    for r in &run.reports {
        if let Some(e) = &r.error {
            outln!("# MRC sim: {e}");
        }
    }
    let failed = run.reports.iter().any(|r| r.error.is_some());
    Ok(Outcome {
        ok: out.ok && !failed,
        ..out
    })
}

fn run_mem(args: &Args, opts: &BenchOpts, tele: Option<&Telemetry>) -> anyhow::Result<Outcome> {
    let ranks = setup::mem_ranks(args)?;
    let planes = setup::planes(args)?;
    let rows = setup::rows(opts, ranks)?;
    setup::memory(&rows, ranks, false)?;
    let json = json_file(args)?;
    let backend = mem::MemBackend::new(ranks, planes);
    let devices: Vec<String> = (0..ranks)
        .map(|r| format!("thread {r} device {r:>2} [MRC NIC thread, {planes} in-memory planes]"))
        .collect();
    out!("{}", preamble(opts, &devices));
    let mut printer = Printer::new(&rows).with_metrics(tele, opts);
    // --metrics: every rank's engine counters and the lines measured so far, while it runs.
    let start = std::time::Instant::now();
    let mut watch = |p: &mem::Progress<'_>| {
        if let Some(t) = tele {
            let hosts = p
                .nics
                .iter()
                .enumerate()
                .filter_map(|(r, (h, q))| host_counters(r as u32, h, planes as u8, q).ok())
                .collect();
            let lines = mrc_coll::backend::fold_all(&rows, &p.reports, opts.average);
            t.exporter()
                .publish_coll(coll_lines(&rows, &lines, timed_ops(opts)));
            t.sample(&Snapshot {
                at_ns: start.elapsed().as_nanos() as u64,
                hosts,
            });
        }
    };
    let every = sample_period(tele);
    let reports = backend
        .run_watched(
            &rows,
            &program_opts(opts, false),
            args.window,
            every,
            &mut watch,
        )
        .context("--backend mem");
    let reports = match reports {
        Ok(r) => r,
        Err(e) => {
            let _ = printer.finish(None);
            return Err(e);
        }
    };
    for (i, l) in mrc_coll::backend::fold_all(&rows, &reports, opts.average)
        .into_iter()
        .enumerate()
    {
        printer.line(i, l);
    }
    let out = printer.finish(json)?;
    for r in &reports {
        if let Some(e) = &r.error {
            outln!("# MRC mem: {e}");
        }
    }
    let failed = reports.iter().any(|r| r.error.is_some());
    Ok(Outcome {
        ok: out.ok && !failed,
        ..out
    })
}
