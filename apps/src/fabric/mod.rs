//! `mrc-fabric` subcommands, one module each: the binary (`src/bin/mrc-fabric.rs`) only parses
//! the command line and dispatches here.

use mrc_srv6::plan::{HostId, NodeId, Plan};

use crate::{bail_usage, tool, usage};

pub mod capture;
pub mod counters;
pub mod decode;
pub mod demo;
pub mod dump;
pub mod linux;
pub mod paths;

/// `e` as a refusal of the user's input (exit status 2), in one line.
pub fn refused(e: anyhow::Error) -> anyhow::Error {
    if tool::is_usage(&e) {
        e
    } else {
        usage!("{}", tool::one_line(&e))
    }
}

/// Load a plan given as a built-in name (`small`) or a file path; errors name the file, line
/// and field, and are refusals.
pub fn load_plan(name_or_path: &str) -> anyhow::Result<Plan> {
    Plan::load_or_builtin(name_or_path).map_err(|e| usage!("{e}"))
}

/// Parse a host given as `h3` or `3`, and check it is in the plan (else a refusal).
pub fn parse_host(plan: &Plan, text: &str) -> anyhow::Result<HostId> {
    let node: NodeId = text.parse().map_err(|e| usage!("host {text:?}: {e}"))?;
    let NodeId::Host(host) = node else {
        bail_usage!("{text:?} is a switch, not a host");
    };
    if !plan.has_host(host) {
        bail_usage!(
            "host {host} is not in plan {:?} (hosts h0 to h{})",
            plan.name(),
            plan.host_count() - 1
        );
    }
    Ok(host)
}
