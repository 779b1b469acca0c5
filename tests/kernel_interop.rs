//! mrc-rs hosts through a fabric of Linux kernel SRv6 switches (issue 8, docs/interop.md).
//!
//! `scripts/fabric.sh up` turns network namespaces into the small plan (2 planes × 2 T0 × 2
//! T1, 4 hosts): every switch is the kernel's `seg6local End flavors next-csid` (uN). Two
//! hosts run `mrc-perf write_bw --backend dpdk --plan small` over DPDK `net_af_packet` ports
//! on their namespace's veths, one per plane; each port finds its T0's MAC by neighbour
//! discovery; the perftest-style TCP exchange runs on a management veth between the two host
//! namespaces. The test shows:
//! - every byte of the write_bw run verified end to end (`--check`);
//! - path fidelity: each spine's downlink towards the server forwarded at least the packets
//!   the client's EVs through that spine had acknowledged and at most those they sent; a spine
//!   no EV named forwarded nothing;
//!
//! Needs root, iproute2 and DPDK: otherwise skipped with a message, or failed under
//! `MRC_REQUIRE_ALL=1`. The namespaces (and so every veth) carry a unique prefix and are
//! deleted by a guard on every exit path; the mrc-perf processes are killed by theirs.

#[path = "interop/harness.rs"]
mod harness;

use std::net::Ipv6Addr;
use std::time::Duration;

use harness::{Counters, Fabric, Perf, Tools, delta, eal, runs, skip, unique};
use mrc_srv6::plan::{HostId, NodeId, Plan, SwitchId};
use serde_json::Value;

const TEST: &str = "kernel_interop";
const PLAN: &str = "small";
/// The perftest exchange port (each host namespace has its own port space).
const PORT: &str = "18515";
/// The server's address on the management veth (`fabric.sh mgmt`).
const SERVER_MGMT: &str = "192.0.2.2";
const LIMIT: Duration = Duration::from_mins(1);

/// `true` if every prerequisite is there (else skipped, or failed under MRC_REQUIRE_ALL=1).
fn prerequisites() -> Option<Tools> {
    let checks: [(&str, &str, &[&str]); 3] = [
        ("root", "sh", &["-c", "test \"$(id -u)\" -eq 0"]),
        ("iproute2 with netns", "ip", &["netns", "list"]),
        ("bash", "bash", &["-c", "true"]),
    ];
    for (what, cmd, args) in checks {
        if !runs(cmd, args) {
            skip(TEST, &format!("{what} not available"));
            return None;
        }
    }
    match Tools::find() {
        Ok(t) => Some(t),
        Err(e) => {
            skip(TEST, &e);
            None
        }
    }
}

/// The two ends of every run: the client is host 0, the server the first host of rack 1
/// (as `mrc-perf --backend dpdk --plan` picks them).
struct Ends {
    plan: Plan,
    client: HostId,
    server: HostId,
}

impl Ends {
    fn new() -> Self {
        let plan = Plan::load_or_builtin(PLAN).expect("the small plan");
        let server = plan.host_at(1, 0);
        Self {
            plan,
            client: HostId(0),
            server,
        }
    }

    /// Spine (plane, T1 index) of the client's path whose uSID container is `da`.
    fn spine_of(&self, da: Ipv6Addr) -> Option<(u8, u16)> {
        (0..self.plan.planes()).find_map(|p| {
            let n = self.plan.path_count(self.client, self.server, p).ok()?;
            (0..n).find_map(|i| {
                let path = self.plan.path(self.client, self.server, p, i).ok()?;
                (path.da == da).then_some((p, path.spine?))
            })
        })
    }

    /// The T1's interface towards the server's rack: (node, ifname).
    fn spine_downlink(&self, plane: u8, spine: u16) -> (String, String) {
        let t1 = NodeId::Switch(SwitchId::t1(plane, spine));
        (
            t1.to_string(),
            self.plan.ifname(t1, self.plan.rack_of(self.server)),
        )
    }
}

/// The fabric, the management link, the two hosts' ports handed to DPDK.
fn fabric(tools: &Tools, ends: &Ends, tag: &str) -> Fabric {
    let f = Fabric::up(tools, PLAN, &unique(tag));
    let (c, s) = (ends.client.to_string(), ends.server.to_string());
    f.script(&["mgmt", &c, &s]);
    f.script(&["dpdkhost", &c]);
    f.script(&["dpdkhost", &s]);
    f
}

/// A server and a client running `write_bw` with `args`; returns both once started (the
/// server is listening before the client starts).
fn start_pair(f: &Fabric, ends: &Ends, args: &[&str]) -> (Perf, Perf) {
    let planes = ends.plan.planes();
    let dir = std::env::temp_dir();
    let common = |file_prefix: &str| -> Vec<String> {
        let mut v: Vec<String> = [
            "write_bw",
            "--backend",
            "dpdk",
            "--plan",
            PLAN,
            "-p",
            PORT,
            "--no-live",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.push("--eal".into());
        v.push(eal(file_prefix, planes));
        v.extend(args.iter().map(|s| (*s).to_owned()));
        v
    };
    let (sp, cp) = (unique("mrc-ki-s"), unique("mrc-ki-c"));
    let server = Perf::spawn(
        &f.tools,
        &f.ns(&ends.server.to_string()),
        &common(&sp),
        &sp,
        dir.join(format!("{sp}.json")),
    );
    let mut cargs = vec!["write_bw".to_owned(), SERVER_MGMT.to_owned()];
    cargs.extend(common(&cp).into_iter().skip(1));
    let client = Perf::spawn(
        &f.tools,
        &f.ns(&ends.client.to_string()),
        &cargs,
        &cp,
        dir.join(format!("{cp}.json")),
    );
    (server, client)
}

/// The client's EVs (host 0 rows of its report).
fn client_evs(report: &Value) -> Vec<&Value> {
    report["evs"]
        .as_array()
        .expect("evs in the report")
        .iter()
        .filter(|e| e["host"] == 0)
        .collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// Every byte the client wrote arrived and was checked at the server.
fn assert_checked(server: &Value, want_bytes: u64) {
    let check = &server["check"];
    assert_eq!(u(check, "bytes_wrong"), 0, "server check: {check}");
    assert_eq!(
        u(check, "bytes_checked"),
        want_bytes,
        "server check: {check}"
    );
    assert!(
        server["error"].is_null(),
        "server error: {}",
        server["error"]
    );
}

/// Per spine: the client's EVs through it (packets + probes sent, packets acknowledged).
fn ev_load(ends: &Ends, client: &Value) -> Vec<((u8, u16), u64, u64)> {
    let mut load = Vec::new();
    for p in 0..ends.plan.planes() {
        for s in 0..ends.plan.t1_per_plane() {
            load.push(((p, s), 0, 0));
        }
    }
    for ev in client_evs(client) {
        let da: Ipv6Addr = ev["path"]
            .as_str()
            .unwrap_or_else(|| panic!("EV without an SRv6 path: {ev}"))
            .parse()
            .expect("an IPv6 path");
        let spine = ends
            .spine_of(da)
            .unwrap_or_else(|| panic!("EV path {da} is none of the plan's h0→h2 paths"));
        assert_eq!(
            u64::from(spine.0),
            u(ev, "plane"),
            "EV {ev}: its path is in another plane"
        );
        let row = load.iter_mut().find(|r| r.0 == spine).expect("a spine");
        row.1 += u(ev, "packets") + u(ev, "probes");
        row.2 += u(ev, "delivered");
    }
    load
}

/// Path fidelity from the switches' counters: the spine downlink towards the server carried
/// at least what the EVs naming that spine had acknowledged and at most what they sent.
fn assert_paths(ends: &Ends, client: &Value, before: &Counters, after: &Counters) {
    let load = ev_load(ends, client);
    let mut used = 0;
    for ((p, s), sent, acked) in load {
        let (node, iface) = ends.spine_downlink(p, s);
        let d = delta(before, after, &node, &iface, |c| c.forwarded);
        println!(
            "{TEST}: plane {p} spine {s}: EVs sent {sent}, acked {acked}; {node} {iface} forwarded {d}"
        );
        assert!(
            acked <= d && d <= sent,
            "{node} {iface} forwarded {d} packets; the client's EVs through it sent {sent}, {acked} acknowledged"
        );
        used += usize::from(acked > 0);
    }
    assert!(used >= 2, "the client sprayed over {used} spines only");
}

#[test]
fn write_bw_through_kernel_srv6_fabric() {
    let Some(tools) = prerequisites() else {
        return;
    };
    let ends = Ends::new();
    let f = fabric(&tools, &ends, "ki");
    let (size, iters) = (65_536_u64, 400_u64);
    let (s, n) = (size.to_string(), iters.to_string());
    let before = f.counters();
    let (mut server, mut client) = start_pair(&f, &ends, &["--check", "-s", &s, "-n", &n]);
    let (_, c) = client.finish(LIMIT, "client");
    let (_, sv) = server.finish(LIMIT, "server");
    let after = f.counters();
    assert_checked(&sv, size);
    assert_eq!(
        u(&c["results"], "messages"),
        iters,
        "client results: {}",
        c["results"]
    );
    assert_paths(&ends, &c, &before, &after);
    println!("{TEST}: write_bw {iters} x {size} B through the kernel fabric, every byte checked");
}
