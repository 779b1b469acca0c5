//! `mrc-coll`: nccl-tests' collective benchmarks over MRC (docs/mrc-coll.md).
//!
//! ```text
//! mrc-coll all_reduce --backend sim --ranks 64 -b 8 -e 256M -f 2 -n 1 -w 0
//! mrc-coll all_reduce --backend sim --ranks 64 -b 256M -e 256M -n 2 --fail-link
//! mrc-coll broadcast --backend sim --ranks 8 -b 1K -e 64M -f 4 -r 0
//! mrc-coll alltoall --backend mem --ranks 4 -b 1K -e 4M -f 4
//! mrc-coll switch --ranks 4 --memif demo &
//! mpirun --allow-run-as-root --oversubscribe -np 4 mrc-coll all_reduce --backend dpdk --memif demo
//! ```
//!
//! Exit status: 0 when every line ran and (with `-c 1`) every element is right, 1 when a run
//! failed or an element is wrong, 2 for a command line it cannot run (one line on stderr,
//! before anything is printed).

use std::process::ExitCode;

use mrc_apps::coll::{self, cli::Args};
use mrc_apps::tool;

const TOOL: &str = "mrc-coll";

fn main() -> ExitCode {
    let args: Args = match tool::parse_args(TOOL) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let code = match coll::run(&args) {
        Ok(out) if out.ok => ExitCode::SUCCESS,
        Ok(_) => {
            eprintln!("{TOOL}: wrong or missing results");
            ExitCode::from(tool::EXIT_FAILED)
        }
        Err(e) => tool::fail(TOOL, &e, tool::EXIT_FAILED),
    };
    tool::finish(TOOL, code)
}
