//! Fabrics and helpers shared by the simulator's story tests.
#![allow(dead_code)]

use mrc_sim::experiments::{Outcome, Scenario, Transport, run_scenario};
use mrc_sim::traffic::permutation;
use mrc_sim::{RunLimit, Sim, SimConfig, SimTime};
use mrc_srv6::plan::Plan;

/// 2 planes × 2 racks × 2 spines × 2 hosts per rack, 100 Gb/s, downlink host uSIDs, small
/// buffers so that trimming happens.
pub const TINY: &str = r#"
name = "tiny"
planes = 2
t0_per_plane = 2
t1_per_plane = 2
hosts_per_t0 = 2
usid_block = "fcbb:bb00::/32"
host_usids = "downlink"
mtu = 9000

[links.host]
speed_gbps = 100
latency_ns = 500
buffer_bytes = 262144

[links.fabric]
speed_gbps = 100
latency_ns = 500
buffer_bytes = 262144
"#;

/// 2 planes × 4 racks × 4 spines × 4 hosts per rack (16 hosts).
pub const SMALL16: &str = r#"
name = "small16"
planes = 2
t0_per_plane = 4
t1_per_plane = 4
hosts_per_t0 = 4
usid_block = "fcbb:bb00::/32"
host_usids = "downlink"
mtu = 9000

[links.host]
speed_gbps = 100
latency_ns = 500
buffer_bytes = 131072
ecn_min_bytes = 32768
ecn_max_bytes = 98304

[links.fabric]
speed_gbps = 100
latency_ns = 500
buffer_bytes = 131072
ecn_min_bytes = 32768
ecn_max_bytes = 98304
"#;

pub fn plan(text: &str) -> Plan {
    Plan::from_toml(text, "<test>").expect("test plan")
}

pub fn sim(text: &str, cfg: SimConfig) -> Sim {
    Sim::new(plan(text), cfg).expect("sim builds")
}

/// A bound no test should reach: 50 ms of virtual time.
pub fn limit() -> RunLimit {
    RunLimit::until(SimTime(50_000_000_000))
}

pub fn us(x: u64) -> SimTime {
    SimTime(x * 1_000_000)
}

/// A fault-free MRC permutation of `size`-byte flows over `hosts` hosts of `plan` (seed 1),
/// run to the end within 10 ms of virtual time.
pub fn mrc_permutation(name: &str, plan: String, hosts: u32, size: u64) -> Outcome {
    let t = Transport::Mrc;
    let sc = Scenario {
        name: name.into(),
        plan,
        cfg: t.sim_config(1),
        msgs: permutation(hosts, size, SimTime::ZERO, 1),
        opts: t.workload(1),
        faults: Vec::new(),
        limit: SimTime(10_000_000_000),
    };
    run_scenario(&sc, None, false).unwrap()
}
