//! `mrc-coll`: nccl-tests' collective benchmarks over MRC (docs/mrc-coll.md).
//!
//! ```text
//!  cli ──► BenchOpts (mrc-coll) ──► backend: sim | mem | dpdk ──► Program per rank
//!                                     │  per line: every rank's time and #wrong
//!                                     ▼
//!          nccl-tests' table (time averaged over ranks, #wrong summed) · JSON
//! ```
//!
//! The collectives and the table are `mrc-coll`'s; this module only parses the command line,
//! picks the backend and prints.

pub mod cli;
pub mod dpdk;

use std::fmt::Write as _;
use std::io::Write as _;

use anyhow::Context as _;
use mrc_coll::backend::sim::{MidRun, SimBackend, default_plan};
use mrc_coll::backend::{mem, program_opts};
use mrc_coll::bench::{self, LineResult};
use mrc_coll::{BenchOpts, Row};
use mrc_sim::Fault;
use mrc_srv6::plan::{LinkTier, Plan};
use mrc_transport::Duration;

use crate::perf::faults::{FaultSpec, describe, schedule};
use cli::{Args, FaultArgs};

/// What a run printed and whether it passed.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub lines: Vec<[Option<LineResult>; 2]>,
    /// Every line measured and every element right.
    pub ok: bool,
}

/// Runs the benchmark the command line asks for, printing as nccl-tests does (or, for
/// `switch`, the one-machine fabric of `--backend dpdk`).
pub fn run(args: &Args) -> anyhow::Result<Outcome> {
    if args.collective == "switch" {
        return dpdk::run_switch(args);
    }
    let opts = args.bench()?;
    let faults = args.faults()?;
    match args.backend.as_str() {
        "sim" => run_sim(args, &opts, &faults),
        "mem" | "dpdk" if !faults.specs.is_empty() => {
            anyhow::bail!("faults are for --backend sim")
        }
        "mem" => run_mem(args, &opts),
        "dpdk" => dpdk::run_dpdk(args, &opts),
        other => anyhow::bail!("unknown backend {other:?} (sim, mem or dpdk)"),
    }
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

/// nccl-tests' first line and the device list.
pub fn preamble(opts: &BenchOpts, devices: &[String]) -> String {
    let step = if opts.step_factor > 1 {
        format!("{}(factor)", opts.step_factor)
    } else {
        format!("{}(bytes)", opts.step_bytes)
    };
    let mut s = format!(
        "# nThread 1 nGpus 1 minBytes {} maxBytes {} step: {step} warmup iters: {} iters: {} agg iters: 1 validation: {} graph: 0\n#\n# Using devices\n",
        opts.min_bytes,
        opts.max_bytes,
        opts.warmup,
        opts.iters,
        u8::from(opts.check)
    );
    for (r, d) in devices.iter().enumerate() {
        let _ = writeln!(
            s,
            "#  Rank {r:>2} Group  0 Pid {:>6} on {d}",
            std::process::id()
        );
    }
    s.push_str("#\n");
    s
}

/// Prints the table as lines arrive and the footer; returns the outcome.
#[derive(Debug)]
pub struct Printer<'a> {
    rows: &'a [Row],
    root: i32,
    lines: Vec<[Option<LineResult>; 2]>,
}

impl<'a> Printer<'a> {
    pub fn new(rows: &'a [Row], root: i32) -> Self {
        print!("{}", bench::header());
        let _ = std::io::stdout().flush();
        Self {
            rows,
            root,
            lines: vec![[None, None]; rows.len()],
        }
    }

    pub fn line(&mut self, i: usize, l: [Option<LineResult>; 2]) {
        self.lines[i] = l;
        println!("{}", bench::line(&self.rows[i].spec, self.root, l));
        let _ = std::io::stdout().flush();
    }

    pub fn finish(self, json: Option<&str>) -> anyhow::Result<Outcome> {
        print!("{}", bench::footer(&self.lines));
        if let Some(path) = json {
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
                        "ranks": r.spec.nranks,
                        "out_of_place": l[0],
                        "in_place": l[1],
                    })
                })
                .collect();
            std::fs::write(path, serde_json::to_string_pretty(&doc)?)
                .with_context(|| format!("-J {path}"))?;
        }
        Ok(Outcome::of(self.lines))
    }
}

fn load_plan(args: &Args) -> anyhow::Result<Plan> {
    match &args.plan {
        None => Ok(default_plan()),
        Some(p) => Plan::load_or_builtin(p).with_context(|| format!("--plan {p}")),
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
        schedule(&abs, &backend.plan, client, Duration::ZERO).map_err(anyhow::Error::msg)?;
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
                .map_err(anyhow::Error::msg)?,
        });
    }
    Ok(())
}

fn run_sim(args: &Args, opts: &BenchOpts, faults: &FaultArgs) -> anyhow::Result<Outcome> {
    let plan = load_plan(args)?;
    let mut backend = SimBackend::new(plan, args.ranks);
    backend.seed = args.seed;
    backend.window = args.window;
    let rows = opts.rows(args.ranks)?;
    anyhow::ensure!(!rows.is_empty(), "no sizes between -b and -e");
    sim_faults(&mut backend, &faults.specs, &rows, opts.iters)?;
    let plan = &backend.plan;
    let gbps = plan.link_params(LinkTier::Host).speed_gbps;
    let devices: Vec<String> = (0..args.ranks)
        .map(|r| {
            format!(
                "sim-h{} device {r:>2} [MRC {} planes x {gbps} Gb/s, plan {}]",
                backend.host_of(r),
                plan.planes(),
                plan.name()
            )
        })
        .collect();
    print!("{}", preamble(opts, &devices));
    let mut printer = Printer::new(&rows, opts.root);
    let run = backend.run(opts.coll, &rows, &program_opts(opts, true), &mut |i, l| {
        printer.line(i, l);
    });
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            let _ = printer.finish(None);
            return Err(e.into());
        }
    };
    let out = printer.finish(args.json.as_deref())?;
    let rate = backend.host_rate_bytes() / 1e9;
    let peak = out
        .lines
        .iter()
        .flatten()
        .flatten()
        .map(|l| l.busbw)
        .fold(0.0_f64, f64::max);
    println!(
        "# MRC sim: host line rate {rate:.1} GB/s ({} planes x {gbps} Gb/s); peak busbw {peak:.2} GB/s = {:.1} % of it",
        plan.planes(),
        100.0 * peak / rate
    );
    let mut faults: Vec<Fault> = backend.faults.clone();
    faults.extend(run.mid_run_faults.iter().copied());
    for f in describe(&faults) {
        println!("# MRC sim: fault {f}");
    }
    let c = run.counters;
    println!(
        "# MRC sim: {} EV state changes; switch ports: {} trimmed, {} ECN-marked, {} dropped, {} lost on failed links",
        run.ev_changes,
        c.switch_ports.trimmed,
        c.switch_ports.ecn_marked,
        c.switch_ports.tail_dropped + c.switch_ports.down_dropped,
        c.lost_in_flight
    );
    println!(
        "# MRC sim: virtual time {:.3} ms, {} events in {:.1} s wall",
        run.summary.end.as_micros_f64() / 1000.0,
        run.summary.events,
        run.summary.wall_secs
    );
    for r in &run.reports {
        if let Some(e) = &r.error {
            println!("# MRC sim: {e}");
        }
    }
    Ok(out)
}

fn run_mem(args: &Args, opts: &BenchOpts) -> anyhow::Result<Outcome> {
    let rows = opts.rows(args.ranks)?;
    anyhow::ensure!(!rows.is_empty(), "no sizes between -b and -e");
    let backend = mem::MemBackend::new(args.ranks, args.planes);
    let devices: Vec<String> = (0..args.ranks)
        .map(|r| {
            format!(
                "thread {r} device {r:>2} [MRC NIC thread, {} in-memory planes]",
                args.planes
            )
        })
        .collect();
    print!("{}", preamble(opts, &devices));
    let mut printer = Printer::new(&rows, opts.root);
    let reports = backend.run(opts.coll, &rows, &program_opts(opts, false), args.window)?;
    for (i, l) in mrc_coll::backend::fold_all(&rows, &reports)
        .into_iter()
        .enumerate()
    {
        printer.line(i, l);
    }
    let out = printer.finish(args.json.as_deref())?;
    for r in &reports {
        if let Some(e) = &r.error {
            println!("# MRC mem: {e}");
        }
    }
    Ok(out)
}
