//! `mrc-perf`: perftest-style bandwidth and latency tests over MRC (docs/mrc-perf.md).
//!
//! ```text
//! mrc-perf                         write_bw on the built-in simulated 4-plane fabric
//! mrc-perf write_bw --fail-link    ... with a link failing mid-run
//! mrc-perf write_lat -s 64
//! ```
//!
//! Exit status: 0 when every message completed (and, with `--check`, every byte is right),
//! 1 when the run failed, 2 for a command line it cannot run. Ctrl-C ends a timed run early
//! with its report (docs/mrc-perf.md).

use std::process::ExitCode;

use mrc_apps::perf::{self, cli::Args};
use mrc_apps::tool;

const TOOL: &str = "mrc-perf";

fn main() -> ExitCode {
    let args: Args = match tool::parse_args(TOOL) {
        Ok(a) => a,
        Err(code) => return code,
    };
    let settings = match args.settings() {
        Ok(s) => s,
        Err(e) => return tool::fail(TOOL, &mrc_apps::usage!("{}", tool::one_line(&e)), 2),
    };
    let outcome = perf::run(&settings);
    if perf::stop::requested() {
        eprintln!("{TOOL}: interrupted: the run ended early; the figures cover what ran");
    }
    let code = match outcome {
        Ok(out) if out.ok() => ExitCode::SUCCESS,
        Ok(out) => {
            if let Some(e) = &out.error {
                eprintln!("{TOOL}: {e}");
            }
            if let Some(c) = out.check.as_ref().filter(|c| c.bytes_wrong > 0) {
                eprintln!("{TOOL}: data check failed: {c}");
            }
            ExitCode::from(tool::EXIT_FAILED)
        }
        Err(e) => tool::fail(TOOL, &e, tool::EXIT_FAILED),
    };
    tool::finish(TOOL, code)
}
