//! `mrc-experiments`: the simulator experiments of docs/SIMULATOR.md. Each subcommand writes
//! its table (`results.md`), JSON and SVG plots under `<out>/<experiment>/` and prints the
//! table; every run prints its events per second.
//!
//! ```text
//! cargo run --release -p mrc-perf-bench --bin mrc-experiments -- all --out results
//! cargo run --release -p mrc-perf-bench --bin mrc-experiments -- failover --quick
//! cargo run --release -p mrc-perf-bench --bin mrc-experiments -- run --plan plans/8plane-128.toml \
//!     --traffic my.cm --faults my.faults --out results/mine
//! ```
//!
//! `run` takes any plan, a connection matrix (`src->dst start US size BYTES` lines) and a fault
//! schedule (docs/SIMULATOR.md, "Text formats") and writes one report. A file it cannot use is
//! refused before anything runs, in one line naming the file, the line and what to change
//! (exit status 2); a run whose data check fails is exit status 1.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use mrc_apps::{bail_usage, out, tool, usage};
use mrc_sim::experiments::{
    ExpError, ExpOpts, Scenario, Transport, failover, incast, load_balance, loss, paths,
    run_scenario, scale, uec,
};
use mrc_sim::{SimTime, fault, traffic, workload};
use mrc_srv6::plan::{Plan, SMALL_PLAN_TOML};

const TOOL: &str = "mrc-experiments";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Experiment {
    /// Permutation: 1 MRC QP vs RoCE-like with 1 and 16 QPs per pair.
    LoadBalance,
    /// A T0–T1 link dies mid-transfer; a flapping link.
    Failover,
    /// 7→1 incast plus a victim flow sharing the target's T0.
    Incast,
    /// 0.1 % and 1 % random loss on every link.
    Loss,
    /// 128, 512 and 1024 hosts: wall time and events/s.
    Scale,
    /// The UEC simulator's fabric (one 400G plane, one-BDP buffers): p99 FCT against the ideal.
    Uec,
    /// Dead links, three dead links and a gray link, in SRv6 and in ECMP mode.
    Paths,
    /// Every experiment, in this order.
    All,
    /// One run of a plan, a traffic file and a fault file (see --plan, --traffic, --faults).
    Run,
}

impl Experiment {
    /// The results subdirectory of an experiment.
    fn dir(self) -> &'static str {
        match self {
            Self::LoadBalance => "load_balance",
            Self::Failover => "failover",
            Self::Incast => "incast",
            Self::Loss => "loss",
            Self::Scale => "scale",
            Self::Uec => "uec",
            Self::Paths => "paths",
            Self::All | Self::Run => "",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    Mrc,
    Roce,
}

#[derive(Debug, Parser)]
#[command(
    version,
    about = "Run the mrc-sim fabric experiments and write their tables and plots"
)]
struct Args {
    experiment: Experiment,
    /// Small fabrics and flows: seconds instead of minutes (not for `run`).
    #[arg(long)]
    quick: bool,
    /// Results directory (one subdirectory per experiment).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    /// Seed of every random draw [default: 1; `run`: the plan's `[sim] seed`, else 1].
    #[arg(long)]
    seed: Option<u64>,
    /// No progress bars even on a terminal.
    #[arg(long)]
    no_progress: bool,
    /// `run`: the fabric plan (`small`, the built-in one, or a TOML file) [default: small].
    #[arg(long)]
    plan: Option<String>,
    /// `run`: the connection matrix.
    #[arg(long)]
    traffic: Option<PathBuf>,
    /// `run`: the fault schedule.
    #[arg(long)]
    faults: Option<PathBuf>,
    /// `run`: MRC or the RoCE-like baseline [default: mrc].
    #[arg(long, value_enum)]
    transport: Option<TransportArg>,
    /// `run`: QPs per communicating pair [default: 1].
    #[arg(long)]
    qps: Option<u16>,
    /// `run`: give up after this much virtual time, µs [default: 1000000].
    #[arg(long)]
    limit_us: Option<u64>,
}

impl Args {
    /// The `run` options given to another experiment: refused, not ignored.
    fn run_only_given(&self) -> Option<&'static str> {
        [
            (self.plan.is_some(), "--plan"),
            (self.traffic.is_some(), "--traffic"),
            (self.faults.is_some(), "--faults"),
            (self.transport.is_some(), "--transport"),
            (self.qps.is_some(), "--qps"),
            (self.limit_us.is_some(), "--limit-us"),
        ]
        .into_iter()
        .find_map(|(given, name)| given.then_some(name))
    }
}

fn read(path: &Path, what: &str) -> anyhow::Result<String> {
    std::fs::read_to_string(path)
        .map_err(|e| usage!("{}: cannot read the {what}: {e}", path.display()))
}

/// A refusal of `path` at `line` (or of the whole file).
fn refuse(path: &Path, line: Option<usize>, message: &str) -> anyhow::Error {
    match line {
        Some(l) => usage!("{}:{l}: {message}", path.display()),
        None => usage!("{}: {message}", path.display()),
    }
}

/// `run`: the plan (its name and TOML text).
fn load_plan(name: &str) -> anyhow::Result<(Plan, String)> {
    let text = if name == "small" {
        SMALL_PLAN_TOML.to_owned()
    } else if Path::new(name).exists() {
        read(Path::new(name), "plan")?
    } else {
        bail_usage!(
            "--plan {name}: no such file, and not a built-in plan (built-ins: {})",
            Plan::BUILTINS.join(", ")
        );
    };
    let plan = Plan::from_toml(&text, name).map_err(|e| usage!("{e}"))?;
    Ok((plan, text))
}

/// `run`: one scenario from files.
fn run_files(a: &Args) -> anyhow::Result<()> {
    if a.quick {
        bail_usage!("--quick is for the experiments: `run` runs what its files say");
    }
    let plan_name = a.plan.as_deref().unwrap_or("small");
    let (plan, plan_text) = load_plan(plan_name)?;
    let Some(traffic_path) = &a.traffic else {
        bail_usage!(
            "run needs --traffic FILE: a connection matrix, `SRC->DST start US size BYTES` a line"
        );
    };
    let msgs = traffic::parse_traffic(&read(traffic_path, "traffic file")?, &plan)
        .map_err(|e| refuse(traffic_path, e.line, &e.message))?;
    let faults = match &a.faults {
        Some(f) => fault::parse_faults(&read(f, "fault file")?, &plan)
            .map_err(|e| refuse(f, Some(e.line), &e.message))?,
        None => Vec::new(),
    };
    let qps = a.qps.unwrap_or(1);
    if qps == 0 {
        bail_usage!("--qps 0: give at least 1 QP per pair");
    }
    workload::check_limits(&msgs, qps, &mrc_transport::config::Limits::default())
        .map_err(|e| refuse(traffic_path, None, &format!("{e} (--qps {qps})")))?;
    let limit_us = a.limit_us.unwrap_or(1_000_000);
    let limit = SimTime::from_micros(limit_us).ok_or_else(|| {
        usage!(
            "--limit-us {limit_us}: at most {} (the simulator's clock, about 213 days)",
            SimTime::MAX_MICROS
        )
    })?;
    let t = match a.transport.unwrap_or(TransportArg::Mrc) {
        TransportArg::Mrc => Transport::Mrc,
        TransportArg::Roce => Transport::RoceLike,
    };
    // The transport's configuration, then what the plan's [sim] table sets, then --seed.
    let mut cfg = t.sim_config(1);
    cfg.apply_plan(&plan)
        .map_err(|e| usage!("{plan_name}: {e}"))?;
    if let Some(s) = a.seed {
        cfg.seed = s;
    }
    let sc = Scenario {
        name: format!("{plan_name} {}", t.name()),
        plan: plan_text,
        cfg,
        msgs,
        opts: t.workload(qps),
        faults,
        limit,
    };
    let out = run_scenario(&sc, Some(&a.out), !a.no_progress).map_err(exp_error)?;
    out!("{}", out.report.table());
    match out.verified {
        Ok(_) => Ok(()),
        Err(e) if !out.summary.apps_done => Err(anyhow::anyhow!(
            "the run reached --limit-us {limit_us} before every message completed ({e}): \
             raise --limit-us"
        )),
        Err(e) => Err(anyhow::anyhow!("data check: {e}")),
    }
}

/// An experiment's error: results that cannot be written are the `--out` the user gave.
fn exp_error(e: ExpError) -> anyhow::Error {
    match e {
        ExpError::Io(io) => usage!("--out: cannot write the results: {io}"),
        other => anyhow::Error::new(other),
    }
}

fn run_one(e: Experiment, o: &ExpOpts) -> anyhow::Result<()> {
    match e {
        Experiment::LoadBalance => load_balance::run(o).map(drop),
        Experiment::Failover => failover::run(o).map(drop),
        Experiment::Incast => incast::run(o).map(drop),
        Experiment::Loss => loss::run(o).map(drop),
        Experiment::Scale => scale::run(o).map(drop),
        Experiment::Uec => uec::run(o).map(drop),
        Experiment::Paths => paths::run(o).map(drop),
        Experiment::All | Experiment::Run => unreachable!("not a single experiment"),
    }
    .map_err(exp_error)?;
    let table = o.out.join(e.dir()).join("results.md");
    out!("{}", read(&table, "results table")?);
    Ok(())
}

fn run(a: &Args) -> anyhow::Result<()> {
    if a.experiment != Experiment::Run
        && let Some(opt) = a.run_only_given()
    {
        bail_usage!(
            "{opt} is for `run` (the experiments build their own fabrics and traffic): drop it \
             or use `mrc-experiments run`"
        );
    }
    std::fs::create_dir_all(&a.out)
        .map_err(|e| usage!("--out {}: cannot create it: {e}", a.out.display()))?;
    if a.experiment == Experiment::Run {
        return run_files(a);
    }
    let opts = ExpOpts {
        quick: a.quick,
        out: a.out.clone(),
        seed: a.seed.unwrap_or(1),
        progress: !a.no_progress,
    };
    let list = match a.experiment {
        Experiment::All => vec![
            Experiment::LoadBalance,
            Experiment::Failover,
            Experiment::Incast,
            Experiment::Loss,
            Experiment::Scale,
            Experiment::Uec,
            Experiment::Paths,
        ],
        e => vec![e],
    };
    for e in list {
        // Nobody reads the tables any more (`| head`): the rest would be minutes for nothing.
        if !tool::out_open() {
            break;
        }
        run_one(e, &opts)?;
    }
    Ok(())
}

fn main() -> ExitCode {
    let a: Args = match tool::parse_args(TOOL) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let code = match run(&a) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => tool::fail(TOOL, &e, tool::EXIT_FAILED),
    };
    tool::finish(TOOL, code)
}
