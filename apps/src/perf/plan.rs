//! The fabric plan of a run on the simulator (`--backend sim`) or on DPDK ports with
//! `--plan` (`--backend dpdk`): `--plan` (a file or a built-in name) or a small built-in one,
//! `--planes` planes (4 by default) × 2 racks × 2 spines, 2 hosts per rack, 100 Gb/s links;
//! and its two ends, host 0 and the first host of the next rack, so every path crosses a
//! spine and a T0–T1 link failure is felt.

use mrc_srv6::plan::Plan;

use super::settings::Settings;

/// The built-in fabric: `planes` planes, 2 racks, 2 spines, 2 hosts per rack.
pub fn builtin_plan_toml(planes: u8) -> String {
    format!(
        "name = \"perf-{planes}-plane\"\nplanes = {planes}\nt0_per_plane = 2\nt1_per_plane = 2\n\
         hosts_per_t0 = 2\nusid_block = \"fcbb:bb00::/32\"\nhost_usids = \"downlink\"\n\
         mtu = 9000\n\n[links.host]\nspeed_gbps = 100\nlatency_ns = 200\n\n\
         [links.fabric]\nspeed_gbps = 100\nlatency_ns = 500\n"
    )
}

/// Default number of planes of the built-in fabric.
pub const DEFAULT_PLANES: u8 = 4;

/// The plan of a run: `--plan` (a file or a built-in name) or the built-in fabric.
pub fn load_plan(s: &Settings) -> anyhow::Result<Plan> {
    let plan = if let Some(p) = &s.plan {
        Plan::load_or_builtin(p).map_err(|e| crate::usage!("--plan {p}: {e:#}"))?
    } else {
        let planes = s.planes.unwrap_or(DEFAULT_PLANES);
        if !(1..=8).contains(&planes) {
            crate::bail_usage!("--planes {planes}: the built-in fabric has 1 to 8 planes");
        }
        Plan::from_toml(&builtin_plan_toml(planes), "<built-in perf fabric>")?
    };
    if let (Some(want), Some(_)) = (s.planes, &s.plan)
        && want != plan.planes()
    {
        crate::bail_usage!(
            "--planes {want} does not match plan {:?}, which has {} planes (drop --planes or edit the plan)",
            plan.name(),
            plan.planes()
        );
    }
    if plan.host_count() < 2 {
        crate::bail_usage!(
            "plan {:?} has {} host(s): a perf test needs two",
            plan.name(),
            plan.host_count()
        );
    }
    Ok(plan)
}

/// The two ends: host 0 and the first host of the next rack (or host 1 in a one-rack plan).
pub fn ends(plan: &Plan) -> (u32, u32) {
    let server = if plan.t0_per_plane() > 1 {
        plan.host_at(1, 0).0
    } else {
        1
    };
    (0, server)
}

#[cfg(test)]
mod tests {
    use mrc_srv6::plan::HostId;

    use super::*;

    #[test]
    fn builtin_plan_is_valid_for_every_plane_count() {
        for planes in 1..=8 {
            let p = Plan::from_toml(&builtin_plan_toml(planes), "t").unwrap();
            assert_eq!(p.planes(), planes);
            let (c, s) = ends(&p);
            assert_ne!(
                p.rack_of(HostId(c)),
                p.rack_of(HostId(s)),
                "the ends are in two racks"
            );
        }
    }
}
