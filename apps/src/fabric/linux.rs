//! `mrc-fabric linux PLAN [--prefix P] [--teardown | --routes] [--part hosts|switches --attach
//! BR]`: the shell script that makes network namespaces behave as the plan's switches and hosts
//! (pipe it to `sh`), the script that removes them, or only the routes and neighbours (to run
//! again after a link comes up); all of them for one side of the host links only with `--part`.

use mrc_srv6::plan::LinuxPart;

use super::{load_plan, refused};

/// One side of the host links.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Part {
    /// The hosts, for NICs that own their ports (no kernel SRv6 on them).
    Hosts,
    /// The switches.
    Switches,
}

/// Arguments of `mrc-fabric linux`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan file, or the name of a built-in plan (`small`).
    pub plan: String,
    /// Namespace name prefix: namespaces are `<prefix>-h0`, `<prefix>-t0-0-0`, ...
    #[arg(long, default_value = "mrc")]
    pub prefix: String,
    /// Print the teardown script instead.
    #[arg(long, conflicts_with = "routes")]
    pub teardown: bool,
    /// Print only the routes and neighbours (idempotent; after `ip link set up`).
    #[arg(long)]
    pub routes: bool,
    /// Only this side of the host links: host link K (host × planes + plane) ends in veth
    /// `hlK` of the namespace the script runs in, on its bridge `<attach>K`.
    #[arg(long, requires = "attach")]
    pub part: Option<Part>,
    /// The bridges the cut host links join (`--part`): `<attach>0`, `<attach>1`, ...
    #[arg(long, requires = "part")]
    pub attach: Option<String>,
}

/// Print the script. Every error is a refusal: only the plan and the arguments can be wrong.
pub fn run(args: &Args) -> anyhow::Result<()> {
    crate::out!("{}", render(args).map_err(refused)?);
    Ok(())
}

/// The script `run` prints.
pub fn render(args: &Args) -> anyhow::Result<String> {
    let plan = load_plan(&args.plan)?;
    let attach = args.attach.clone().unwrap_or_default();
    let part = match args.part {
        None => LinuxPart::All,
        Some(Part::Hosts) => LinuxPart::Hosts { attach },
        Some(Part::Switches) => LinuxPart::Switches { attach },
    };
    let script = if args.teardown {
        plan.linux_teardown_part(&args.prefix, &part)?
    } else if args.routes {
        plan.linux_routes_part(&args.prefix, &part)?
    } else {
        plan.linux_config_part(&args.prefix, &part)?
    };
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn emits_config_teardown_and_routes() {
        let mut a = Args {
            plan: "small".into(),
            prefix: "x1".into(),
            teardown: false,
            routes: false,
            part: None,
            attach: None,
        };
        let cfg = render(&a).unwrap();
        assert!(cfg.contains("ip netns add x1-t1-1-1\n"));
        a.teardown = true;
        assert!(render(&a).unwrap().contains("ip netns del x1-h3 "));
        a.teardown = false;
        a.routes = true;
        assert!(!render(&a).unwrap().contains("netns add"));
        a.prefix = "a b".into();
        let e = render(&a).unwrap_err().to_string();
        assert!(e.contains("bad namespace prefix"), "{e}");
        a.prefix = "x1".into();
        a.routes = false;
        a.part = Some(Part::Switches);
        a.attach = Some("b".into());
        let s = render(&a).unwrap();
        assert!(s.contains("ip link set hl7 master b7 up\n"), "{s}");
        assert!(!s.contains("netns add x1-h"), "{s}");
    }
}
