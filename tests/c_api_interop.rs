//! The C benchmark of `examples/benchmark` (`mrc_bench` over `include/mrc.h`) as two hosts of
//! the kernel SRv6 fabric (docs/interop.md), as `kernel_interop` runs mrc-perf: `scripts/fabric.sh
//! up` makes the small plan's switches out of network namespaces; each host's lib_mrc.so runs its
//! DPDK device on the host's veths, one `net_af_packet` port per plane, in SRv6 mode
//! (`MRC_PLAN=small`, `MRC_HOST=hN`: the plan's address, T0s found by neighbour discovery); the
//! benchmark's TCP exchange runs on a management veth between the two host namespaces. A sweep
//! of a few sizes with `--check`: the server verified every byte of every Write.
//!
//! Needs root, iproute2, bash, DPDK and a C compiler with libibverbs-dev's header: otherwise
//! skipped with a message, or failed under `MRC_REQUIRE_ALL=1`. The namespaces (and so every
//! veth) carry a unique prefix and are deleted by the fabric's guard on every exit path; the
//! benchmark processes are killed by theirs, their DPDK runtime directories and the scratch
//! directory removed.

// The fabric and the tools that build it; the captures and mrc-perf's processes are
// kernel_interop's.
#[allow(dead_code)]
#[path = "interop/harness.rs"]
mod harness;

#[path = "c_api/bench.rs"]
mod bench;

use std::time::Duration;

use bench::{Bench, Scratch};
use harness::{Fabric, Tools, delta, eal, skip, unique};
use mrc_srv6::plan::{HostId, Plan};
use mrc_tests::DpdkRuntimeDirs;

const PLAN: &str = "small";
/// The server's address on the management veth (`fabric.sh mgmt`).
const SERVER_MGMT: &str = "192.0.2.2";
/// How long a run may take on real hardware ([`limit`] scales it).
const LIMIT: Duration = Duration::from_mins(1);

/// [`LIMIT`], longer when the switches run emulated (in the kernel VM).
fn limit() -> Duration {
    harness::deadline(LIMIT)
}

/// `Some` if every prerequisite is there (else skipped, or failed under MRC_REQUIRE_ALL=1):
/// the fabric's and a C compiler with libibverbs-dev's header.
fn prerequisites(test: &str) -> Option<Tools> {
    if let Some(why) = bench::cannot_build() {
        skip(test, why);
        return None;
    }
    harness::prerequisites(test, &[])
}

#[test]
fn mrc_bench_between_two_hosts_of_the_kernel_srv6_fabric() {
    run(
        "mrc_bench_between_two_hosts_of_the_kernel_srv6_fabric",
        None,
    );
}

/// A controller (`examples/controller/mrc_ctl_evs`, in another process) gives each end an EXP
/// EV profile of the plan's paths through the second spine of each plane (`mrc-fabric paths
/// --evs` form); `mrc_bench -e` takes them at INIT. Every byte is checked as above, and the
/// switches' counters show the traffic of both directions crossed those spines only.
#[test]
fn mrc_bench_on_a_controllers_srv6_paths() {
    run("mrc_bench_on_a_controllers_srv6_paths", Some(1));
}

/// The sweep between two hosts; with `spine`, on EXP profiles of the paths through that spine
/// index of each plane.
fn run(test: &str, spine: Option<usize>) {
    let Some(tools) = prerequisites(test) else {
        return;
    };
    let lib = bench::libraries();
    let scratch = Scratch::new("mrc-bench-ki-");
    let exe = bench::build(&scratch.0, &lib);

    // The ends mrc-perf --plan picks: host 0 the client, the first host of rack 1 the server.
    let plan = Plan::load_or_builtin(PLAN).expect("the small plan");
    let (client, server) = (HostId(0), plan.host_at(1, 0));
    let (c, s) = (client.to_string(), server.to_string());
    let f = Fabric::up(&tools, PLAN, &unique("kc"));
    f.script(&["mgmt", &c, &s]);
    f.script(&["dpdkhost", &c]);
    f.script(&["dpdkhost", &s]);

    let ctl_dir = scratch.0.join("ctl");
    let ctl_dir_s = ctl_dir.to_string_lossy().into_owned();
    let (mut client_extra, mut server_extra) = (vec![SERVER_MGMT.to_owned()], vec![]);
    if let Some(spine) = spine {
        let ctl = bench::compile(
            &scratch.0,
            &lib,
            "mrc_ctl_evs",
            &[bench::workspace().join("examples/controller/mrc_ctl_evs.c")],
        );
        // Profile 7: client -> server; 8: server -> client. One path per plane.
        for (id, from, to) in [("7", client, server), ("8", server, client)] {
            // `mrc-fabric paths --evs`, the controller's input: line `spine` of each plane.
            let mut evs = String::new();
            for plane in 0..plan.planes() {
                let out = std::process::Command::new(&tools.mrc_fabric)
                    .args(["paths", PLAN, "--from", &from.to_string(), "--to"])
                    .args([&to.to_string(), "--plane", &plane.to_string(), "--evs"])
                    .output()
                    .expect("mrc-fabric runs");
                let (text, err) = mrc_tests::text(&out);
                assert!(out.status.success(), "mrc-fabric paths --evs: {err}");
                let line = text.lines().nth(spine).expect("a path through that spine");
                evs.push_str(line);
                evs.push('\n');
            }
            let out = bench::controller(&ctl, &ctl_dir_s, &["set", id], &evs);
            assert!(
                out.status.success(),
                "mrc_ctl_evs set {id}: {}",
                bench::shown("controller", &out)
            );
        }
        client_extra.extend(["-e".to_owned(), "7".to_owned()]);
        server_extra.extend(["-e".to_owned(), "8".to_owned()]);
    }

    let (iters, warmup) = (20_u64, 2_u64);
    let (n, w) = (iters.to_string(), warmup.to_string());
    let args = [
        "-c",
        "-n",
        &n,
        "-w",
        &w,
        "--min-size",
        "64",
        "-s",
        "1M",
        "--step-factor",
        "16",
    ];
    let start = |host: &str, prefix: &str, extra: &[String], what: &str| -> Bench {
        let ns = f.ns(host);
        let host_eal = eal(prefix, plan.planes());
        let env = [
            ("MRC_EAL", host_eal.as_str()),
            ("MRC_PLAN", PLAN),
            ("MRC_HOST", host),
            ("MRC_CTL_DIR", ctl_dir_s.as_str()),
        ];
        Bench::spawn(
            bench::command(&["ip", "netns", "exec", &ns], &exe, &env)
                .args(args)
                .args(extra),
            &scratch.0,
            what,
        )
    };
    let (sp, cp) = (unique("mrc-kc-s"), unique("mrc-kc-c"));
    let _dirs = (DpdkRuntimeDirs(sp.clone()), DpdkRuntimeDirs(cp.clone()));
    let before = f.counters();
    // The default TCP port: each host namespace has its own.
    let mut server_proc = start(&s, &sp, &server_extra, "server");
    if !server_proc.wait_for(bench::SERVER_READY, limit()) {
        let out = server_proc.finish(limit());
        if bench::no_dpdk(&out) {
            return skip(
                test,
                "lib_mrc.so was built without DPDK (install libdpdk-dev)",
            );
        }
        panic!("{}", bench::shown("server", &out));
    }
    let mut client_proc = start(&c, &cp, &client_extra, "client");
    let out_c = client_proc.finish(limit());
    assert!(out_c.status.success(), "{}", bench::shown("client", &out_c));
    let out_s = server_proc.finish(limit());
    let sizes = bench::sweep(64, 1 << 20, 16);
    bench::assert_run(&out_c, &out_s, &sizes, (iters, warmup), true);
    let rows = mrc_tests::text(&out_c).0;
    println!("{test}: client {c}, server {s}: every byte of sizes {sizes:?} checked\n{rows}");
    if let Some(spine) = spine {
        // Packets the spines routed, by spine index (the plan's t1-<plane>-<spine>).
        let after = f.counters();
        let mut by_spine = [0u64; 2];
        for (node, iface) in after.keys() {
            let Some(rest) = node.strip_prefix("t1-") else {
                continue;
            };
            let idx: usize = rest
                .rsplit('-')
                .next()
                .and_then(|i| i.parse().ok())
                .unwrap_or(9);
            if let Some(n) = by_spine.get_mut(idx) {
                *n += delta(&before, &after, node, iface, |c| c.forwarded);
            }
        }
        let (used, unused) = (by_spine[spine], by_spine[1 - spine]);
        println!("{test}: packets routed by spines {spine}: {used}, by the others: {unused}");
        assert!(used > 1000, "the listed spines routed only {used} packets");
        assert_eq!(
            unused, 0,
            "spines off the listed paths routed {unused} packets"
        );
    }
}
