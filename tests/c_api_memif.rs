//! The C benchmark of `examples/benchmark` (`mrc_bench`: OCP's benchmark shape over
//! `include/mrc.h`, built here with the system C compiler) as two processes on this machine, the
//! way it is run between two hosts: a server and a client, each on lib_mrc.so's DPDK device
//! with two `net_memif` planes between them (ECMP mode), the exchange over TCP on loopback.
//! - a sweep 1 B .. 1 MiB with `--check`: the server verified every byte of every Write;
//! - a sweep without it, more Writes per size than the send queue holds (the window);
//! - what does not fit is refused: a bad command line with exit status 2 and one line, and
//!   options the two ends disagree on with exit status 1 on both (on `mem` devices).
//!
//! Needs a C compiler and libibverbs-dev's header; the runs need DPDK in the build and two
//! CPUs. Otherwise skipped with a message, or failed under `MRC_REQUIRE_ALL=1`.

#[path = "c_api/bench.rs"]
mod bench;

use std::path::Path;
use std::process::Output;
use std::sync::Mutex;
use std::time::Duration;

use bench::{Bench, Scratch};
use mrc_tests::{DpdkRuntimeDirs, assert_refused, free_port, one_at_a_time, skip, unique};

/// One test at a time: each is two busy processes (or picks a free port another could take).
static ONE: Mutex<()> = Mutex::new(());

const LIMIT: Duration = Duration::from_mins(2);

/// Each end's NIC address (ECMP mode): given, so the run does not depend on the default's
/// derivation from the process id.
const SERVER_ADDR: &str = "fd00:6d72:63:b::1";
const CLIENT_ADDR: &str = "fd00:6d72:63:b::2";

/// The benchmark built for this test, in its scratch directory; `None` when skipped (one CPU,
/// or nothing to build it with).
fn built(test: &str) -> Option<(Scratch, std::path::PathBuf)> {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        skip(
            test,
            "one CPU: two DPDK processes with NIC threads need two",
        );
        return None;
    }
    if let Some(why) = bench::cannot_build() {
        skip(test, why);
        return None;
    }
    let lib = bench::libraries();
    let scratch = Scratch::new("mrc-bench-");
    let exe = bench::build(&scratch.0, &lib);
    Some((scratch, exe))
}

/// A server and a client with `args` over two memif planes, their output in `dir`; their
/// outputs, or `None` when this build has no DPDK (skipped).
fn memif_pair(test: &str, dir: &Path, exe: &Path, args: &[&str]) -> Option<(Output, Output)> {
    let socket = format!("/{}.sock", unique("mrc-bench-memif"));
    let (sp, cp) = (unique("mrc-bench-s"), unique("mrc-bench-c"));
    let _dirs = (DpdkRuntimeDirs(sp.clone()), DpdkRuntimeDirs(cp.clone()));
    let port = free_port().to_string();
    let server_eal = mrc_tests::memif_eal(&sp, "server", &socket);
    let mut server = Bench::spawn(
        bench::command(
            &[],
            exe,
            &[("MRC_EAL", &server_eal), ("MRC_ADDR", SERVER_ADDR)],
        )
        .args(args)
        .args(["-p", &port]),
        dir,
        "server",
    );
    // The client's memif ports connect to the server's: a memif client port cannot start
    // while nobody listens, so the client starts once the server's device is open.
    if !server.wait_for(bench::SERVER_READY, LIMIT) {
        let s = server.finish(LIMIT);
        if bench::no_dpdk(&s) {
            skip(
                test,
                "lib_mrc.so was built without DPDK (install libdpdk-dev)",
            );
            return None;
        }
        panic!("{}", bench::shown("server", &s));
    }
    let client_eal = mrc_tests::memif_eal(&cp, "client", &socket);
    let mut client = Bench::spawn(
        bench::command(
            &[],
            exe,
            &[("MRC_EAL", &client_eal), ("MRC_ADDR", CLIENT_ADDR)],
        )
        .args(args)
        .args(["-p", &port, "127.0.0.1"]),
        dir,
        "client",
    );
    let c = client.finish(LIMIT);
    // A client that failed leaves its server waiting: show the client's reason.
    assert!(c.status.success(), "{}", bench::shown("client", &c));
    Some((c, server.finish(LIMIT)))
}

#[test]
fn mrc_bench_over_two_memif_planes_checks_every_byte() {
    let _one = one_at_a_time(&ONE);
    let test = "mrc_bench_over_two_memif_planes_checks_every_byte";
    let Some((scratch, exe)) = built(test) else {
        return;
    };
    // 1 MiB of slots: one round for the small sizes, several for 256 KiB .. 1 MiB.
    let args = ["-c", "-n", "8", "-w", "2", "--min-size", "1", "-s", "1M"];
    let Some((c, s)) = memif_pair(test, &scratch.0, &exe, &args) else {
        return;
    };
    let sizes = bench::sweep(1, 1 << 20, 2);
    bench::assert_run(&c, &s, &sizes, (8, 2), true);
    println!(
        "{test}: {} sizes 1 B .. 1 MiB x 10 Writes, every byte checked",
        sizes.len()
    );
}

#[test]
fn mrc_bench_keeps_a_window_of_writes_in_flight() {
    let _one = one_at_a_time(&ONE);
    let test = "mrc_bench_keeps_a_window_of_writes_in_flight";
    let Some((scratch, exe)) = built(test) else {
        return;
    };
    // 300 Writes per size: more than the send queue's 128, so the client waits for
    // completions to post the rest.
    let args = [
        "-n",
        "300",
        "-w",
        "20",
        "--min-size",
        "64",
        "-s",
        "64K",
        "--step-factor",
        "4",
    ];
    let Some((c, s)) = memif_pair(test, &scratch.0, &exe, &args) else {
        return;
    };
    let sizes = bench::sweep(64, 64 << 10, 4);
    bench::assert_run(&c, &s, &sizes, (300, 20), false);
}

#[test]
fn mrc_bench_refuses_a_bad_command_line() {
    let _one = one_at_a_time(&ONE);
    let Some((_scratch, exe)) = built("mrc_bench_refuses_a_bad_command_line") else {
        return;
    };
    let exe = exe.to_str().expect("a UTF-8 path");
    for (args, names) in [
        (&["-m", "300"][..], "-m 300"),
        (&["-x"][..], "-x"),
        (&["--frobnicate"][..], "--frobnicate"),
        (&["-n"][..], "-n"),
        (&["-n", "0"][..], "-n 0"),
        (&["--step-factor", "1"][..], "--step-factor 1"),
        (&["-s", "2G"][..], "-s 2G"),
        (&["--min-size", "2M", "-s", "1M"][..], "--min-size"),
        (&["server-a", "server-b"][..], "server-b"),
    ] {
        assert_refused(exe, args, names);
    }
}

#[test]
fn mrc_bench_ends_refuse_options_they_disagree_on() {
    let _one = one_at_a_time(&ONE);
    let Some((scratch, exe)) = built("mrc_bench_ends_refuse_options_they_disagree_on") else {
        return;
    };
    // Each end's own in-memory device: the exchange fails before any Write.
    let port = free_port().to_string();
    let mem = [("MRC_DEVICE", "mem")];
    let mut server = Bench::spawn(
        bench::command(&[], &exe, &mem).args(["-n", "10", "-p", &port]),
        &scratch.0,
        "server",
    );
    assert!(
        server.wait_for(bench::SERVER_READY, LIMIT),
        "{}",
        bench::shown("server", &server.finish(LIMIT))
    );
    let mut client = Bench::spawn(
        bench::command(&[], &exe, &mem).args(["-n", "20", "-p", &port, "127.0.0.1"]),
        &scratch.0,
        "client",
    );
    let (c, s) = (client.finish(LIMIT), server.finish(LIMIT));
    for (o, who, line) in [
        (
            &c,
            "client",
            "mrc_bench: the peer runs with other options: -n/--iters 20 here, 10 there",
        ),
        (
            &s,
            "server",
            "mrc_bench: the peer runs with other options: -n/--iters 10 here, 20 there",
        ),
    ] {
        let all = bench::shown(who, o);
        assert_eq!(o.status.code(), Some(1), "{all}");
        let (_, stderr) = mrc_tests::text(o);
        assert_eq!(stderr.trim_end(), line, "{all}");
    }
}
