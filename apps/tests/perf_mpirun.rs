//! mrc-perf testing a fabric from many processes, as network teams do: `mpirun -np 4 mrc-perf
//! write_bw --backend dpdk --pattern all2all --memif NAME --check`, each rank one host on its
//! own DPDK ports (memif links to `mrc-coll switch`, one per plane), rank 0 printing the
//! report for all (docs/mrc-perf.md, "Testing a fabric").
//!
//! - with this build (mpirun's ranks, TCP rendezvous) and with one built with the `mpi`
//!   feature (MPI bootstrap);
//! - parameters that differ across ranks: every rank names both values and exits 2, none
//!   hangs.
//!
//! Needs DPDK, two CPUs and Open MPI: otherwise skipped with a message, or failed under
//! `MRC_REQUIRE_ALL=1`. Processes are killed if a test ends first; memif sockets are
//! abstract; DPDK runtime directories are removed.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use mrc_tests::{DpdkRuntimeDirs, Proc, free_port, skip, unique};
use serde_json::Value;

const PERF: &str = env!("CARGO_BIN_EXE_mrc-perf");
const COLL: &str = env!("CARGO_BIN_EXE_mrc-coll");
const LIMIT: Duration = Duration::from_mins(4);

/// One run at a time: each is five busy processes on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    mrc_tests::one_at_a_time(&SERIAL)
}

/// Why this machine cannot run the test, if it cannot.
fn missing() -> Option<&'static str> {
    if std::thread::available_parallelism().map_or(1, usize::from) < 2 {
        return Some("one CPU: the ranks' NIC threads and the switch need two");
    }
    if mrc_dpdk::DPDK_VERSION.is_none() {
        return Some("this build has no DPDK (install libdpdk-dev)");
    }
    mrc_tests::mpirun_missing()
}

fn text(o: &Output) -> (String, String) {
    mrc_tests::text(o)
}

/// `mpirun -np 4` of `bin` (`mrc-perf`) with `args`, through a fresh switch; stdout and
/// stderr of mpirun (every rank's), and rank 0's JSON.
fn mpirun_perf(bin: &Path, tag: &str, args: &[&str]) -> (String, String, Value) {
    let name = unique(&format!("mrcperf-{tag}-"));
    let _dirs = DpdkRuntimeDirs(name.clone());
    let switch_addr = format!("127.0.0.1:{}", free_port());
    let tcp_addr = format!("127.0.0.1:{}", free_port());
    let json: PathBuf = std::env::temp_dir().join(format!("{name}.json"));
    let mut switch = Proc::spawn(
        Command::new(COLL).args([
            "switch",
            "--ranks",
            "4",
            "--memif",
            &name,
            "--switch",
            &switch_addr,
        ]),
        "mrc-coll switch",
    );
    let mut mpirun = mrc_tests::mpirun();
    mpirun
        .args(["-np", "4"])
        .arg(bin)
        .args(["write_bw", "--backend", "dpdk", "--memif", &name])
        .args(["--switch", &switch_addr, "--tcp-addr", &tcp_addr])
        .args(["--report_gbits", "--out_json_file"])
        .arg(&json)
        .args(args);
    let ranks = Proc::spawn(&mut mpirun, "mpirun").finish(LIMIT);
    let sw = switch.finish(LIMIT);
    let (out, err) = text(&ranks);
    let (sw_out, sw_err) = text(&sw);
    assert!(
        ranks.status.success(),
        "mpirun:\n{out}\n{err}\nswitch:\n{sw_out}{sw_err}"
    );
    assert!(sw.status.success(), "switch:\n{sw_out}{sw_err}");
    assert!(sw_out.contains("4 of 4 ranks stopped"), "{sw_out}");
    let doc = std::fs::read_to_string(&json).expect("rank 0 wrote the JSON");
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(json.with_extension("matrix.svg"));
    (
        out,
        err,
        serde_json::from_str(&doc).expect("the JSON document"),
    )
}

/// Every byte of every flow checked, the 4 × 4 matrix printed once (by rank 0), every other
/// host's traffic in it.
fn assert_all2all(out: &str, doc: &Value) {
    assert!(
        out.contains(" Data check: 600 messages") && out.contains("all correct"),
        "12 flows x 50 messages, every byte:\n{out}"
    );
    assert_eq!(
        out.matches(" Gb/s matrix (row: sender").count(),
        1,
        "rank 0 alone prints:\n{out}"
    );
    assert_eq!(out.matches("RDMA_Write BW Test").count(), 1, "{out}");
    let p = &doc["pattern"][0];
    let m = p["matrix_gbps"].as_array().expect("the matrix");
    assert_eq!(m.len(), 4);
    for (i, row) in m.iter().enumerate() {
        for (j, v) in row.as_array().unwrap().iter().enumerate() {
            assert_eq!(
                v.as_f64().unwrap() > 0.0,
                i != j,
                "h{i} -> h{j}: {v}\n{out}"
            );
        }
    }
    for (h, row) in p["per_host"].as_array().unwrap().iter().enumerate() {
        assert_eq!(row["host"], h);
        assert_eq!(row["sent_bytes"], 3 * 50 * 16384, "{row}");
        assert_eq!(row["received_bytes"], 3 * 50 * 16384, "{row}");
    }
}

const ALL2ALL: [&str; 8] = [
    "--pattern",
    "all2all",
    "--check",
    "-s",
    "16384",
    "-n",
    "50",
    "-t",
];

#[test]
fn mpirun_all2all_over_memif_planes_checks_every_byte() {
    let _one = serial();
    let test = "mpirun_all2all_over_memif_planes_checks_every_byte";
    if let Some(why) = missing() {
        return skip(test, why);
    }
    let (out, err, doc) = mpirun_perf(Path::new(PERF), "a2a", &[&ALL2ALL[..], &["16"]].concat());
    assert_all2all(&out, &doc);
    assert!(
        err.contains("rank 0 of 4, bootstrap: mpirun's ranks, TCP rendezvous"),
        "{err}"
    );
}

#[test]
fn mpirun_with_the_mpi_bootstrap_checks_every_byte() {
    let _one = serial();
    let test = "mpirun_with_the_mpi_bootstrap_checks_every_byte";
    if let Some(why) = missing() {
        return skip(test, why);
    }
    let bin = match mrc_tests::mpi_build(env!("CARGO_MANIFEST_DIR"), env!("CARGO")) {
        Ok(d) => d.join("mrc-perf"),
        Err(why) => return skip(test, &why),
    };
    let (out, err, doc) = mpirun_perf(
        &bin,
        "rsmpi",
        &[&ALL2ALL[..], &["16", "--no-live"]].concat(),
    );
    assert_all2all(&out, &doc);
    assert!(err.contains("bootstrap: MPI (mpirun)"), "{err}");
}

#[test]
fn a_rank_with_other_parameters_is_named_and_every_rank_exits() {
    let _one = serial();
    let test = "a_rank_with_other_parameters_is_named_and_every_rank_exits";
    if let Some(why) = missing() {
        return skip(test, why);
    }
    // Rank 3 asks for another message size: every rank refuses, naming both values, before
    // any takes its ports (no switch needed), and none waits for another.
    let tcp_addr = format!("127.0.0.1:{}", free_port());
    let common = [
        "write_bw",
        "--backend",
        "dpdk",
        "--memif",
        "unused",
        "--tcp-addr",
        &tcp_addr,
        "--pattern",
        "ring",
        "-n",
        "10",
    ];
    let mut mpirun = mrc_tests::mpirun();
    mpirun
        .args(["-np", "3", PERF])
        .args(common)
        .args(["-s", "4096", ":", "-np", "1", PERF])
        .args(common)
        .args(["-s", "65536"]);
    let o = Proc::spawn(&mut mpirun, "mpirun").finish(Duration::from_mins(1));
    let (out, err) = text(&o);
    assert!(!o.status.success(), "{out}{err}");
    let why = "the ranks' parameters differ (-s: rank 0 [4096], rank 3 [65536])";
    assert!(err.matches(why).count() >= 2, "every rank says why:\n{err}");
    assert!(!out.contains("#bytes"), "no rank ran:\n{out}");
}

#[test]
fn mpirun_sync_bursts_report_every_flows_start() {
    let _one = serial();
    let test = "mpirun_sync_bursts_report_every_flows_start";
    if let Some(why) = missing() {
        return skip(test, why);
    }
    // A ring of 4 hosts, bursts of 2 messages every 20 ms from the common start: 5 bursts,
    // each started by the 4 flows, their spread measured on rank 0's clock. Every rank
    // serves its own metrics and writes its own textfile.
    let dir = mrc_tests::prometheus::TempDir::new("perf-textfile");
    let args = [
        "--metrics",
        "127.0.0.1:0",
        "--metrics-textfile",
        dir.0.to_str().unwrap(),
        "--pattern",
        "ring",
        "--mode",
        "sync_burst",
        "--burst_size",
        "2",
        "--burst-gap",
        "20ms",
        "-s",
        "8192",
        "-n",
        "10",
        "--no-live",
    ];
    let (out, err, doc) = mpirun_perf(Path::new(PERF), "sync", &args);
    let bursts = doc["pattern"][0]["bursts"].as_array().expect("bursts");
    assert_eq!(bursts.len(), 5, "{out}");
    for b in bursts {
        assert_eq!(b["qps"], 4, "{b}\n{out}");
        // Every flow's start on one clock: within the period. 20 ms, not 2: four busy-polling
        // DPDK ranks on a 2-core runner are descheduled for whole quanta (3.1 ms seen in CI).
        assert!(b["spread_ns"].as_u64().unwrap() < 20_000_000, "{b}\n{out}");
    }
    assert!(out.contains("Burst starts across flows (5 bursts"), "{out}");
    assert_eq!(
        err.matches("metrics: http://127.0.0.1:").count(),
        4,
        "one metrics address per rank:\n{err}"
    );
    assert_rank_textfiles(&dir.0, 4, &out);
}

/// Rank r's DIR/mrc-perf-rR.prom: its own host's engine counters (`host="hR"`, which received
/// the ring's data) and no other host's.
fn assert_rank_textfiles(dir: &Path, ranks: usize, out: &str) {
    for r in 0..ranks {
        let path = dir.join(format!("mrc-perf-r{r}.prom"));
        let (text, rx, alone) = mrc_tests::prometheus::rank_textfile(&path, r, out);
        assert_eq!(
            rx,
            10.0 * 8192.0,
            "rank {r}: the ring's 10 messages in:\n{text}"
        );
        assert!(
            alone,
            "rank {r}'s file holds another host's counters:\n{text}"
        );
    }
}
