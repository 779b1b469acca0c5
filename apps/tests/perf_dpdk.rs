//! mrc-perf on DPDK ports, as two processes the way perftest is run: a server
//! (`mrc-perf write_bw --backend dpdk --eal …`) and a client (`mrc-perf write_bw 127.0.0.1
//! --backend dpdk --eal …`) over two `net_memif` planes, QP attributes exchanged over TCP.
//! Every byte is checked; the exchange refuses mismatched parameters and an absent server.
//!
//! DPDK missing (a build without it) or a single CPU: skipped with a message, or a failure
//! under `MRC_REQUIRE_ALL=1`.

use std::process::Command;
use std::time::Duration;

use mrc_tests::{DpdkRuntimeDirs, Proc, free_port, text, unique};

/// The tests of this file one at a time: each picks free TCP ports, and two tests running at
/// once could be handed the same one.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn skip(why: &str) {
    mrc_tests::skip("perf_dpdk", why);
}

/// `mrc-perf ARGS`, killed if the test ends first; its DPDK runtime directory removed.
fn perf(args: &[&str], prefix: &str) -> (Proc, DpdkRuntimeDirs) {
    (
        Proc::spawn(
            Command::new(env!("CARGO_BIN_EXE_mrc-perf")).args(args),
            "mrc-perf",
        ),
        DpdkRuntimeDirs(prefix.to_owned()),
    )
}

/// Delivered bytes of the per-plane table's total row.
fn delivered(stdout: &str) -> u64 {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with(" Per plane"))
        .find(|l| l.trim_start().starts_with("total"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse().ok())
        .expect("a total row")
}

#[test]
fn server_and_client_over_memif_move_and_check_every_byte() {
    let _one = serial();
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return skip("one CPU: two DPDK processes with NIC threads need two");
    }
    let socket = format!("/{}.sock", unique("mrc-perf-memif"));
    let (sp, cp) = (unique("mrc-perf-s"), unique("mrc-perf-c"));
    let port = free_port().to_string();
    let common = [
        "write_imm_bw",
        "-n",
        "300",
        "-s",
        "16384",
        "-q",
        "2",
        "-b",
        "--check",
        "--no-live",
    ];
    let server_eal = mrc_tests::memif_eal(&sp, "server", &socket);
    let mut args: Vec<&str> = common.to_vec();
    args.extend(["--backend", "dpdk", "-p", &port, "--eal", &server_eal]);
    let (mut server, _sd) = perf(&args, &sp);
    let client_eal = mrc_tests::memif_eal(&cp, "client", &socket);
    let json = std::env::temp_dir().join(format!("{}.json", unique("mrc-perf-dpdk")));
    let json_s = json.to_str().unwrap().to_owned();
    let mut args: Vec<&str> = common.to_vec();
    args.extend([
        "127.0.0.1",
        "--backend",
        "dpdk",
        "-p",
        &port,
        "--eal",
        &client_eal,
        "--out_json_file",
        &json_s,
    ]);
    let (mut client, _cd) = perf(&args, &cp);
    let c = client.finish(Duration::from_mins(4));
    let s = server.finish(Duration::from_mins(1));
    let ((cout, cerr), (sout, serr)) = (text(&c), text(&s));
    if cerr.contains("DPDK is not available") || serr.contains("DPDK is not available") {
        return skip("this build has no DPDK");
    }
    assert!(
        c.status.success(),
        "client:\n{cout}\n{cerr}\nserver:\n{sout}\n{serr}"
    );
    assert!(s.status.success(), "server:\n{sout}\n{serr}");
    // Both ways: each side received 2 QPs x 300 x 16 KiB and checked every message of it.
    let each_way = 2 * 300 * 16384;
    for (who, out) in [("client", &cout), ("server", &sout)] {
        assert_eq!(delivered(out), each_way, "{who} delivered bytes:\n{out}");
        assert!(
            out.contains(
                "Data check: 600 messages (9830400 bytes) verified as they landed, all correct"
            ),
            "{who}:\n{out}"
        );
        assert!(out.contains(" Clock           : real"));
        assert!(out.contains("Data ex. method : Ethernet\n"));
    }
    let j: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("client JSON")).unwrap();
    let _ = std::fs::remove_file(&json);
    assert_eq!(
        j["results"]["bytes"],
        2 * each_way,
        "-b adds the server's direction"
    );
    assert_eq!(j["results"]["n_iterations"], 300);
}

#[test]
fn the_exchange_refuses_mismatched_parameters_and_an_absent_server() {
    let _one = serial();
    let port = free_port().to_string();
    let (sp, cp) = (unique("mrc-perf-ms"), unique("mrc-perf-mc"));
    let eal_s = "--no-huge --vdev=net_null0";
    let (mut server, _sd) = perf(
        &[
            "write_bw",
            "-n",
            "300",
            "--backend",
            "dpdk",
            "-p",
            &port,
            "--eal",
            eal_s,
        ],
        &sp,
    );
    let (mut client, _cd) = perf(
        &[
            "write_bw",
            "127.0.0.1",
            "-n",
            "200",
            "--backend",
            "dpdk",
            "-p",
            &port,
            "--eal",
            eal_s,
        ],
        &cp,
    );
    let (c, s) = (
        client.finish(Duration::from_mins(1)),
        server.finish(Duration::from_mins(1)),
    );
    let (_, cerr) = text(&c);
    let (_, serr) = text(&s);
    // Two command lines that disagree: a refusal (exit 2) on both sides, in one line.
    assert_eq!(c.status.code(), Some(2), "{cerr}");
    assert_eq!(s.status.code(), Some(2), "{serr}");
    assert_eq!(
        cerr.lines().filter(|l| l.starts_with("mrc-perf:")).count(),
        1,
        "{cerr}"
    );
    assert!(
        cerr.contains("mismatched parameters") && cerr.contains("-n: client 200, server 300"),
        "{cerr}"
    );
    assert!(serr.contains("mismatched parameters"), "{serr}");

    let nobody = free_port().to_string();
    let (mut lone, _ld) = perf(
        &[
            "write_bw",
            "127.0.0.1",
            "--backend",
            "dpdk",
            "-p",
            &nobody,
            "--eal",
            eal_s,
        ],
        &unique("mrc-perf-lone"),
    );
    let l = lone.finish(Duration::from_mins(1));
    let (_, lerr) = text(&l);
    assert_eq!(l.status.code(), Some(1));
    assert!(lerr.contains("cannot reach the server"), "{lerr}");
}
