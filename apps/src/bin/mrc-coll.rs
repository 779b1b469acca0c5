//! `mrc-coll`: nccl-tests' collective benchmarks over MRC (docs/mrc-coll.md).
//!
//! ```text
//! mrc-coll all_reduce --backend sim --ranks 64 -b 8 -e 256M -f 2 -n 1 -w 0
//! mrc-coll all_reduce --backend sim --ranks 64 -b 256M -e 256M -n 2 --fail-link
//! mrc-coll alltoall --backend mem --ranks 4 -b 1K -e 4M -f 4
//! mrc-coll switch --ranks 4 --memif demo &
//! mpirun --allow-run-as-root --oversubscribe -np 4 mrc-coll all_reduce --backend dpdk --memif demo
//! ```
//!
//! Exit status: 0 when every line ran and (with `-c 1`) every element is right, 1 when a run
//! failed or an element is wrong, 2 for a command line it cannot run.

use std::process::ExitCode;

use clap::Parser as _;
use mrc_apps::coll::{self, cli::Args};

fn main() -> ExitCode {
    let args = Args::parse();
    let checked = if args.collective == "switch" {
        Ok(())
    } else {
        args.bench().and_then(|_| args.faults()).map(|_| ())
    };
    if let Err(e) = checked {
        eprintln!("mrc-coll: {e:#}");
        return ExitCode::from(2);
    }
    match coll::run(&args) {
        Ok(out) if out.ok => ExitCode::SUCCESS,
        Ok(_) => {
            eprintln!("mrc-coll: wrong or missing results");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("mrc-coll: {e:#}");
            ExitCode::from(1)
        }
    }
}
