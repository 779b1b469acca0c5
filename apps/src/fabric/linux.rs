//! `mrc-fabric linux PLAN [--prefix P] [--teardown | --routes]`: the shell script that makes
//! network namespaces behave as the plan's switches and hosts (pipe it to `sh`), the script
//! that removes them, or only the routes and neighbours (to run again after a link comes up).

use super::{load_plan, refused};

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
}

/// Print the script. Every error is a refusal: only the plan and the arguments can be wrong.
pub fn run(args: &Args) -> anyhow::Result<()> {
    crate::out!("{}", render(args).map_err(refused)?);
    Ok(())
}

/// The script `run` prints.
pub fn render(args: &Args) -> anyhow::Result<String> {
    let plan = load_plan(&args.plan)?;
    let script = if args.teardown {
        plan.linux_teardown(&args.prefix)?
    } else if args.routes {
        plan.linux_routes(&args.prefix)?
    } else {
        plan.linux_config(&args.prefix)?
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
    }
}
