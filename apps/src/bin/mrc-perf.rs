//! `mrc-perf`: perftest-style bandwidth and latency tests over MRC (docs/mrc-perf.md).
//!
//! ```text
//! mrc-perf                         write_bw on the built-in simulated 4-plane fabric
//! mrc-perf write_bw --fail-link    ... with a link failing mid-run
//! mrc-perf write_lat -s 64
//! ```
//!
//! Exit status: 0 when every message completed (and, with `--check`, every byte is right),
//! 1 when the run failed, 2 for a command line it cannot run.

use std::process::ExitCode;

use clap::Parser as _;
use mrc_apps::perf::{self, cli::Args};

fn main() -> ExitCode {
    let args = Args::parse();
    let settings = match args.settings() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mrc-perf: {e:#}");
            return ExitCode::from(2);
        }
    };
    match perf::run(&settings) {
        Ok(out) if out.ok() => ExitCode::SUCCESS,
        Ok(out) => {
            if let Some(e) = &out.error {
                eprintln!("mrc-perf: {e}");
            }
            if out.check.is_some_and(|c| c.bytes_wrong > 0) {
                eprintln!("mrc-perf: data check failed");
            }
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("mrc-perf: {e:#}");
            ExitCode::from(1)
        }
    }
}
