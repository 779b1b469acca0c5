//! `mrc-fabric paths PLAN --from H --to H [--plane P]`: the uSID paths between two hosts, as a
//! table (plane, spine, uSID list, outer destination address, hops with egress interfaces).

use core::fmt::Write as _;

use mrc_srv6::plan::{NodeId, Path, Plan};

use super::{load_plan, parse_host, refused};

/// Arguments of `mrc-fabric paths`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Plan file, or the name of a built-in plan (`small`).
    pub plan: String,
    /// Source host (`h0` or `0`).
    #[arg(long)]
    pub from: String,
    /// Destination host.
    #[arg(long)]
    pub to: String,
    /// Only this plane (default: every plane).
    #[arg(long)]
    pub plane: Option<u8>,
    /// Print at most this many paths.
    #[arg(long)]
    pub limit: Option<usize>,
    /// Print the paths as OCP controller EVs instead of a table: one line per path, `<port>
    /// <value>`, the port 1-based (plane + 1) and the value the 32 bytes of an SRv6
    /// `mrc_ctl_ev_t` in hex (the outer destination address, then 16 zero bytes: no SRH
    /// segment). What a controller passes to `REPLACE_EV` of an EXP EV profile.
    #[arg(long)]
    pub evs: bool,
}

/// Print the table. Every error is a refusal: only the plan and the arguments can be wrong.
pub fn run(args: &Args) -> anyhow::Result<()> {
    crate::out!("{}", render(args).map_err(refused)?);
    Ok(())
}

fn hops_text(plan: &Plan, path: &Path) -> String {
    let mut s = String::new();
    for hop in path.hops() {
        let _ = write!(
            s,
            "{}:{} > ",
            hop.node,
            plan.ifname(hop.node, hop.egress_port)
        );
    }
    s.push_str(&NodeId::Host(path.dst).to_string());
    s
}

/// The table `run` prints.
pub fn render(args: &Args) -> anyhow::Result<String> {
    let plan = load_plan(&args.plan)?;
    let (src, dst) = (parse_host(&plan, &args.from)?, parse_host(&plan, &args.to)?);
    let planes: Vec<u8> = match args.plane {
        Some(p) => {
            anyhow::ensure!(
                p < plan.planes(),
                "plane {p} is not in plan {:?} (planes 0 to {})",
                plan.name(),
                plan.planes() - 1
            );
            vec![p]
        }
        None => (0..plan.planes()).collect(),
    };
    let mut total = 0u32;
    for &p in &planes {
        total += plan.path_count(src, dst, p)?;
    }
    let limit = args.limit.unwrap_or(usize::MAX);
    if args.evs {
        let mut out = String::new();
        for &p in &planes {
            for path in plan.paths(src, dst, p)? {
                if out.lines().count() == limit {
                    return Ok(out);
                }
                let mut hex = String::with_capacity(64);
                for b in path.da.octets().iter().chain(&[0u8; 16]) {
                    let _ = write!(hex, "{b:02x}");
                }
                let _ = writeln!(out, "{} {hex}", path.plane + 1);
            }
        }
        return Ok(out);
    }
    let mut out = format!(
        "plan {}: {src} (rack {}) -> {dst} (rack {}), {} plane(s), {total} paths\n",
        plan.name(),
        plan.rack_of(src),
        plan.rack_of(dst),
        planes.len(),
    );
    let _ = writeln!(
        out,
        "{:<5} {:<5} {:<6} {:<24} {:<40} hops",
        "plane", "index", "spine", "uSIDs", "DA"
    );
    let mut shown = 0usize;
    'planes: for &p in &planes {
        for path in plan.paths(src, dst, p)? {
            if shown == limit {
                let _ = writeln!(out, "... ({} more)", total as usize - shown);
                break 'planes;
            }
            let usids: Vec<String> = path.usids().iter().map(ToString::to_string).collect();
            let spine = path
                .spine
                .map_or_else(|| "direct".to_owned(), |s| s.to_string());
            let _ = writeln!(
                out,
                "{:<5} {:<5} {:<6} {:<24} {:<40} {}",
                path.plane,
                path.index,
                spine,
                usids.join(" "),
                path.da,
                hops_text(&plan, &path)
            );
            shown += 1;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(from: &str, to: &str, plane: Option<u8>) -> Args {
        Args {
            plan: "small".into(),
            from: from.into(),
            to: to.into(),
            plane,
            limit: None,
            evs: false,
        }
    }

    #[test]
    fn evs_are_the_paths_das_by_port() {
        let table = render(&args("h0", "3", None)).unwrap();
        let evs = render(&Args {
            evs: true,
            ..args("h0", "3", None)
        })
        .unwrap();
        assert_eq!(evs.lines().count(), 4);
        // Path "plane 0, DA fcbb:bb00:1000:2001:1001:8003::" of the table.
        assert!(table.contains("fcbb:bb00:1000:2001:1001:8003::"));
        assert!(
            evs.lines()
                .any(|l| l == format!("1 fcbbbb00100020011001800300000000{}", "0".repeat(32))),
            "{evs}"
        );
        assert!(evs.lines().all(|l| l.len() == 2 + 64));
    }

    #[test]
    fn lists_every_path_with_its_da_and_hops() {
        let out = render(&args("h0", "3", None)).unwrap();
        assert!(out.starts_with("plan small: h0 (rack 0) -> h3 (rack 1), 2 plane(s), 4 paths\n"));
        let row = out
            .lines()
            .find(|l| l.contains("fcbb:bb00:1000:2001:1001:8003::"))
            .unwrap();
        assert!(
            row.starts_with("0     1     1      1000 2001 1001 8003"),
            "{row}"
        );
        assert!(
            row.ends_with("h0:p0 > t0-0-0:u1 > t1-0-1:d1 > t0-0-1:d1 > h3"),
            "{row}"
        );
        let one_plane = render(&args("h0", "h1", Some(1))).unwrap();
        assert_eq!(one_plane.lines().count(), 2 + 3);
        assert!(one_plane.contains("direct"));
    }

    #[test]
    fn bad_input_says_what_is_wrong() {
        let e = render(&args("h0", "h9", None)).unwrap_err().to_string();
        assert!(
            e.contains("h9 is not in plan \"small\" (hosts h0 to h3)"),
            "{e}"
        );
        let e = render(&args("t0-0-0", "h1", None)).unwrap_err().to_string();
        assert!(e.contains("is a switch"), "{e}");
        let e = render(&args("h0", "h1", Some(2))).unwrap_err().to_string();
        assert!(e.contains("plane 2 is not in plan"), "{e}");
        let e = render(&args("h1", "h1", None)).unwrap_err().to_string();
        assert!(e.contains("same host"), "{e}");
        let mut a = args("h0", "h1", None);
        a.plan = "nope.toml".into();
        let e = render(&a).unwrap_err().to_string();
        assert!(
            e.contains("nope.toml: no such file, and not a built-in plan"),
            "{e}"
        );
    }
}
