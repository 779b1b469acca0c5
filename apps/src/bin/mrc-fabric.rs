//! `mrc-fabric`: fabric plans, uSID paths and the Linux SRv6 namespace fabric.
//!
//! ```text
//! mrc-fabric paths small --from h0 --to h3 [--plane 0]
//! mrc-fabric linux small --prefix mrc | sh
//! mrc-fabric linux small --prefix mrc --teardown | sh
//! mrc-fabric counters small --prefix mrc
//! mrc-fabric dump capture.pcapng
//! mrc-fabric demo [small --from h0 --to h3]
//! ```
//! Each subcommand lives in its own module under `mrc_apps::fabric`. Exit status: 0, 1 when
//! the tool itself failed, 2 for a command line, plan, host or capture it cannot use (one line
//! on stderr), including a capture cut short (after the records before the cut).

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use mrc_apps::{fabric, tool};

const TOOL: &str = "mrc-fabric";

#[derive(Debug, Parser)]
#[command(
    name = "mrc-fabric",
    version,
    about = "MRC fabric plans, uSID paths and Linux SRv6 fabrics"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List the uSID paths between two hosts of a plan.
    Paths(fabric::paths::Args),
    /// Print the shell script that builds (or tears down) the plan as Linux namespaces.
    Linux(fabric::linux::Args),
    /// Print the counters of every switch interface of the plan's Linux fabric (needs root).
    Counters(fabric::counters::Args),
    /// Decode the MRC frames of a pcap/pcapng capture, one line per header.
    Dump(fabric::dump::Args),
    /// Show a plan's paths and build + decode a Write, SACK, trimmed Write and NACK.
    Demo(fabric::demo::Args),
}

fn main() -> ExitCode {
    let cli: Cli = match tool::parse_args(TOOL) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let ran = match cli.command {
        Command::Paths(args) => fabric::paths::run(&args),
        Command::Linux(args) => fabric::linux::run(&args),
        Command::Counters(args) => fabric::counters::run(&args),
        Command::Dump(args) => fabric::dump::run(&args),
        Command::Demo(args) => fabric::demo::run(&args),
    };
    let code = match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => tool::fail(TOOL, &e, tool::EXIT_FAILED),
    };
    tool::finish(TOOL, code)
}
