//! `mrc-fabric` subcommands, one module each: the binary (`src/bin/mrc-fabric.rs`) only parses
//! the command line and dispatches here.

use anyhow::Context as _;
use mrc_srv6::plan::{HostId, NodeId, Plan};

pub mod demo;
pub mod dump;
pub mod linux;
pub mod paths;

/// Load a plan given as a built-in name (`small`) or a file path; errors name the file, line
/// and field.
pub fn load_plan(name_or_path: &str) -> anyhow::Result<Plan> {
    Ok(Plan::load_or_builtin(name_or_path)?)
}

/// Parse a host given as `h3` or `3`, and check it is in the plan.
pub fn parse_host(plan: &Plan, text: &str) -> anyhow::Result<HostId> {
    let node: NodeId = text.parse().with_context(|| format!("host {text:?}"))?;
    let NodeId::Host(host) = node else {
        anyhow::bail!("{text:?} is a switch, not a host");
    };
    anyhow::ensure!(
        plan.has_host(host),
        "host {host} is not in plan {:?} (hosts h0 to h{})",
        plan.name(),
        plan.host_count() - 1
    );
    Ok(host)
}
