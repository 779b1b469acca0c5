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
//! schedule (docs/SIMULATOR.md, "Text formats") and writes one report.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use mrc_sim::experiments::{
    ExpError, ExpOpts, Scenario, Transport, failover, incast, load_balance, loss, run_scenario,
    scale,
};

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
    /// Every experiment, in this order.
    All,
    /// One run of a plan, a traffic file and a fault file (see --plan, --traffic, --faults).
    Run,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum TransportArg {
    Mrc,
    Roce,
}

#[derive(Debug, Parser)]
#[command(about = "Run the mrc-sim fabric experiments and write their tables and plots")]
struct Args {
    experiment: Experiment,
    /// Small fabrics and flows: seconds instead of minutes.
    #[arg(long)]
    quick: bool,
    /// Results directory (one subdirectory per experiment).
    #[arg(long, default_value = "results")]
    out: PathBuf,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// No progress bars even on a terminal.
    #[arg(long)]
    no_progress: bool,
    /// `run`: the fabric plan (`small`, the built-in one, or a TOML file).
    #[arg(long, default_value = "small")]
    plan: String,
    /// `run`: the connection matrix.
    #[arg(long)]
    traffic: Option<PathBuf>,
    /// `run`: the fault schedule.
    #[arg(long)]
    faults: Option<PathBuf>,
    /// `run`: MRC or the RoCE-like baseline.
    #[arg(long, value_enum, default_value = "mrc")]
    transport: TransportArg,
    /// `run`: QPs per communicating pair.
    #[arg(long, default_value_t = 1)]
    qps: u16,
    /// `run`: give up after this much virtual time (µs).
    #[arg(long, default_value_t = 1_000_000)]
    limit_us: u64,
}

/// `run`: one scenario from files.
fn run_files(a: &Args) -> Result<(), String> {
    let read =
        |p: &PathBuf| std::fs::read_to_string(p).map_err(|e| format!("{}: {e}", p.display()));
    let plan_text = if a.plan == "small" {
        mrc_srv6::plan::SMALL_PLAN_TOML.to_owned()
    } else {
        read(&PathBuf::from(&a.plan))?
    };
    let traffic = a.traffic.as_ref().ok_or("run needs --traffic FILE")?;
    let msgs = mrc_sim::traffic::parse_traffic(&read(traffic)?).map_err(|e| e.to_string())?;
    let faults = match &a.faults {
        Some(f) => mrc_sim::parse_faults(&read(f)?).map_err(|e| e.to_string())?,
        None => Vec::new(),
    };
    let t = match a.transport {
        TransportArg::Mrc => Transport::Mrc,
        TransportArg::Roce => Transport::RoceLike,
    };
    let mut cfg = t.sim_config(a.seed);
    let plan = mrc_srv6::plan::Plan::from_toml(&plan_text, &a.plan).map_err(|e| e.to_string())?;
    let table = mrc_sim::SimConfig::from_plan(&plan).map_err(|e| e.to_string())?;
    cfg.routing = table.routing;
    cfg.host_tx_ring = table.host_tx_ring;
    let sc = Scenario {
        name: format!("{} {}", a.plan, t.name()),
        plan: plan_text,
        cfg,
        msgs,
        opts: t.workload(a.qps),
        faults,
        limit: mrc_sim::SimTime(a.limit_us * 1_000_000),
    };
    let out = run_scenario(&sc, Some(&a.out), !a.no_progress).map_err(|e| e.to_string())?;
    print!("{}", out.report.table());
    out.verified
        .map(drop)
        .map_err(|e| format!("data check: {e}"))
}

fn run(e: Experiment, o: &ExpOpts) -> Result<(), ExpError> {
    match e {
        Experiment::LoadBalance => load_balance::run(o).map(drop),
        Experiment::Failover => failover::run(o).map(drop),
        Experiment::Incast => incast::run(o).map(drop),
        Experiment::Loss => loss::run(o).map(drop),
        Experiment::Scale => scale::run(o).map(drop),
        Experiment::Run => unreachable!("handled by main"),
        Experiment::All => [
            Experiment::LoadBalance,
            Experiment::Failover,
            Experiment::Incast,
            Experiment::Loss,
            Experiment::Scale,
        ]
        .into_iter()
        .try_for_each(|e| run(e, o)),
    }
}

fn main() -> ExitCode {
    let a = Args::parse();
    if a.experiment == Experiment::Run {
        return match run_files(&a) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mrc-experiments run: {e}");
                ExitCode::FAILURE
            }
        };
    }
    let opts = ExpOpts {
        quick: a.quick,
        out: a.out.clone(),
        seed: a.seed,
        progress: !a.no_progress,
    };
    match run(a.experiment, &opts) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mrc-experiments: {e}");
            ExitCode::FAILURE
        }
    }
}
