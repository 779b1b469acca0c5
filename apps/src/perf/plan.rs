//! The fabric plan of a run on the simulator (`--backend sim`) or on DPDK ports with
//! `--plan` (`--backend dpdk`): `--plan` (a file or a built-in name) or a small built-in one,
//! `--planes` planes (4 by default) × 2 racks × 2 spines, 2 hosts per rack, 100 Gb/s links,
//! or for `--hosts N` a non-blocking one of N hosts. Who sends to whom is
//! [`traffic`](super::traffic)'s.

use mrc_srv6::plan::Plan;

use super::settings::Settings;

/// The built-in fabric: `planes` planes, 2 racks, 2 spines, 2 hosts per rack.
pub fn builtin_plan_toml(planes: u8) -> String {
    sized_plan_toml(planes, 4)
}

/// The built-in fabric for a pattern over `hosts` hosts (`--hosts` without `--plan`): up to
/// 4 hosts the fabric above; beyond, racks of 8 hosts (fewer below 16 hosts, two racks) and
/// as many spines as a rack has hosts, so every plane is non-blocking.
pub fn sized_plan_toml(planes: u8, hosts: u32) -> String {
    let (racks, per_rack, spines) = if hosts <= 4 {
        (2, 2, 2)
    } else {
        let per_rack = if hosts >= 16 { 8 } else { hosts.div_ceil(2) };
        (hosts.div_ceil(per_rack), per_rack, per_rack)
    };
    let name = if hosts <= 4 {
        format!("perf-{planes}-plane")
    } else {
        format!("perf-{planes}-plane-{}-host", racks * per_rack)
    };
    format!(
        "name = \"{name}\"\nplanes = {planes}\nt0_per_plane = {racks}\nt1_per_plane = {spines}\n\
         hosts_per_t0 = {per_rack}\nusid_block = \"fcbb:bb00::/32\"\nhost_usids = \"downlink\"\n\
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
        let hosts = s.traffic.as_ref().and_then(|t| t.hosts).unwrap_or(4);
        Plan::from_toml(&sized_plan_toml(planes, hosts), "<built-in perf fabric>")?
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

#[cfg(test)]
mod tests {
    use mrc_srv6::plan::HostId;

    use super::*;
    use crate::perf::traffic::ends;

    #[test]
    fn sized_plans_hold_the_hosts_and_are_non_blocking() {
        for hosts in [2, 4, 5, 9, 16, 32, 100, 128, 1024] {
            let p = Plan::from_toml(&sized_plan_toml(2, hosts), "t").unwrap();
            assert!(p.host_count() >= hosts, "{hosts}");
            assert!(p.host_count() < hosts + 8, "{hosts}: {}", p.host_count());
            assert!(
                p.t1_per_plane() >= p.hosts_per_t0(),
                "{hosts}: one spine per host port"
            );
        }
    }

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
