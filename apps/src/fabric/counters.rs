//! `mrc-fabric counters PLAN [--prefix P]`: the counters of every interface of every switch of
//! the plan's Linux fabric, one line each: `node iface rx_packets tx_packets rx_dropped
//! tx_dropped forwarded no_route` (`forwarded`: IPv6 packets routed out of it,
//! `Ip6OutForwDatagrams`; `no_route`: packets in on it with no usable route, `Ip6InNoRoutes`).
//!
//! One process for the whole fabric: a thread enters each switch's namespace (setns) and reads
//! that namespace's `/proc/thread-self/net/dev` and `dev_snmp6`, where `ip netns exec` would
//! start two programs per switch (seconds for a fabric in an emulated kernel). Needs root.

use std::fmt::Write as _;
use std::os::fd::AsFd as _;

use anyhow::Context as _;
use mrc_srv6::plan::NodeId;

use super::{load_plan, refused};
use crate::usage;

/// Arguments of `mrc-fabric counters`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan file, or the name of a built-in plan (`small`).
    pub plan: String,
    /// Namespace name prefix the fabric was built with (`mrc-fabric linux --prefix`).
    #[arg(long, default_value = "mrc")]
    pub prefix: String,
}

/// One interface's counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    pub forwarded: u64,
    pub no_route: u64,
}

/// Print the lines. A fabric that is not there is a refusal; a namespace that cannot be entered
/// (not root) a failure.
pub fn run(args: &Args) -> anyhow::Result<()> {
    let plan = load_plan(&args.plan)?;
    let mut text = String::new();
    for sw in plan.switches() {
        let node = NodeId::Switch(sw);
        let ns = plan.netns_name(&args.prefix, node);
        let path = std::path::Path::new("/run/netns").join(&ns);
        if !path.exists() {
            return Err(refused(usage!(
                "no namespace {ns}: build the fabric first (scripts/fabric.sh up {} {})",
                args.plan,
                args.prefix
            )));
        }
        for (iface, c) in read_namespace(&path)? {
            let _ = writeln!(
                text,
                "{node} {iface} {} {} {} {} {} {}",
                c.rx_packets, c.tx_packets, c.rx_dropped, c.tx_dropped, c.forwarded, c.no_route
            );
        }
    }
    crate::out!("{text}");
    Ok(())
}

/// Every interface of the namespace bound at `path`, by name.
fn read_namespace(path: &std::path::Path) -> anyhow::Result<Vec<(String, IfCounters)>> {
    let file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    // A thread of its own: entering a network namespace changes the calling thread's.
    std::thread::scope(|s| {
        s.spawn(|| {
            rustix::thread::move_into_link_name_space(
                file.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .with_context(|| format!("entering {} (needs root)", path.display()))?;
            let dev = std::fs::read_to_string("/proc/thread-self/net/dev")
                .context("/proc/thread-self/net/dev")?;
            let mut out = parse_net_dev(&dev);
            for (iface, c) in &mut out {
                // No file for an interface without IPv6.
                if let Ok(snmp) =
                    std::fs::read_to_string(format!("/proc/thread-self/net/dev_snmp6/{iface}"))
                {
                    c.forwarded = snmp6(&snmp, "Ip6OutForwDatagrams");
                    c.no_route = snmp6(&snmp, "Ip6InNoRoutes");
                }
            }
            Ok(out)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("reading {} failed", path.display()))?
    })
}

/// `/proc/net/dev`: after two header lines, `name: rx_bytes rx_packets rx_errs rx_drop fifo
/// frame compressed multicast tx_bytes tx_packets tx_errs tx_drop ...`.
fn parse_net_dev(text: &str) -> Vec<(String, IfCounters)> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let v: Vec<u64> = rest
                .split_whitespace()
                .map(|w| w.parse().unwrap_or(0))
                .collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            Some((
                name.trim().to_owned(),
                IfCounters {
                    rx_packets: at(1),
                    rx_dropped: at(3),
                    tx_packets: at(9),
                    tx_dropped: at(11),
                    ..IfCounters::default()
                },
            ))
        })
        .collect()
}

/// One counter of a `dev_snmp6` file (`Name value` lines); 0 if absent.
fn snmp6(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| {
            let mut w = l.split_whitespace();
            (w.next() == Some(name)).then(|| w.next()?.parse().ok())?
        })
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_proc_net_dev_and_dev_snmp6() {
        let dev = "Inter-|   Receive                                                |  Transmit\n \
            face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets errs drop fifo colls carrier compressed\n    \
            lo:       0       0    0    0    0     0          0         0        0       0    0    0    0     0       0          0\n    \
            u0: 9204000    9204    0    2    0     0          0         0  9244000    9244    0    3    0     0       0          0\n";
        let got = parse_net_dev(dev);
        assert_eq!(got.len(), 2);
        assert_eq!(got[1].0, "u0");
        assert_eq!(
            got[1].1,
            IfCounters {
                rx_packets: 9204,
                tx_packets: 9244,
                rx_dropped: 2,
                tx_dropped: 3,
                ..IfCounters::default()
            }
        );
        let snmp = "Ip6InReceives                   	9204\nIp6InNoRoutes                   	7\nIp6OutForwDatagrams             	9241\n";
        assert_eq!(snmp6(snmp, "Ip6OutForwDatagrams"), 9241);
        assert_eq!(snmp6(snmp, "Ip6InNoRoutes"), 7);
        assert_eq!(snmp6(snmp, "Ip6Nothing"), 0);
    }

    #[test]
    fn a_fabric_that_is_not_there_is_refused() {
        let e = run(&Args {
            plan: "small".into(),
            prefix: "no-such-fabric".into(),
        })
        .unwrap_err();
        assert!(crate::tool::is_usage(&e), "{e}");
        assert!(
            e.to_string().contains("no namespace no-such-fabric-t0-0-0"),
            "{e}"
        );
    }
}
