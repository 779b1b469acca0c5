//! `mrc-experiments`: the simulator experiments of docs/SIMULATOR.md. Each subcommand writes
//! its table (`results.md`), JSON and SVG plots under `<out>/<experiment>/` and prints the
//! table; every run prints its events per second.
//!
//! ```text
//! cargo run --release -p mrc-perf-bench --bin mrc-experiments -- all --out results
//! cargo run --release -p mrc-perf-bench --bin mrc-experiments -- failover --quick
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use mrc_sim::experiments::{ExpError, ExpOpts, failover, incast, load_balance, loss, scale};

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
}

fn run(e: Experiment, o: &ExpOpts) -> Result<(), ExpError> {
    match e {
        Experiment::LoadBalance => load_balance::run(o).map(drop),
        Experiment::Failover => failover::run(o).map(drop),
        Experiment::Incast => incast::run(o).map(drop),
        Experiment::Loss => loss::run(o).map(drop),
        Experiment::Scale => scale::run(o).map(drop),
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
    let opts = ExpOpts {
        quick: a.quick,
        out: a.out,
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
