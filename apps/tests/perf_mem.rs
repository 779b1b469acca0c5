//! mrc-perf over two software NIC threads in one process (`--backend mem`): the same
//! applications as in the simulator, in real time; the table, the JSON and the bytes checked.

use std::process::Command;

use serde_json::Value;

fn perf(args: &[&str], json: &std::path::Path) -> (String, Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_mrc-perf"))
        .args(args)
        .args(["--backend", "mem", "--no-live", "--out_json_file"])
        .arg(json)
        .output()
        .expect("mrc-perf runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc = serde_json::from_str(&std::fs::read_to_string(json).expect("JSON written"))
        .expect("valid JSON");
    let _ = std::fs::remove_file(json);
    (stdout, doc)
}

fn json_path(tag: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("mrc-perf-mem-{}-{tag}.json", std::process::id()))
}

#[test]
fn mem_write_bw_moves_every_byte_over_every_plane() {
    let (out, j) = perf(
        &["write_bw", "-n", "200", "-s", "16384", "-q", "2", "--check"],
        &json_path("bw"),
    );
    assert!(out.contains(" Clock           : real"));
    assert!(
        out.contains(
            "Data check: 400 messages (6553600 bytes) verified as they landed, all correct"
        ),
        "{out}"
    );
    let r = &j["results"];
    assert_eq!(r["bytes"], 16384 * 200 * 2);
    assert_eq!(r["n_iterations"], 200);
    assert!(r["BW_average"].as_f64().unwrap() > 0.0);
    let planes = j["planes"].as_array().unwrap();
    assert_eq!(planes.len(), 4);
    let delivered: u64 = planes.iter().map(|p| p["rx_bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        delivered,
        16384 * 200 * 2,
        "per-plane bytes sum to the total"
    );
    assert!(
        planes.iter().all(|p| p["rx_bytes"].as_u64() > Some(0)),
        "sprayed"
    );
}

#[test]
fn mem_write_lat_measures_round_trips() {
    let (out, j) = perf(&["write_lat", "-n", "200", "-s", "32"], &json_path("lat"));
    assert!(out.contains("t_typical[usec]"));
    let r = &j["results"];
    assert_eq!(r["n_iterations"], 200);
    let (min, typ, max) = (
        r["t_min"].as_f64().unwrap(),
        r["t_typical"].as_f64().unwrap(),
        r["t_max"].as_f64().unwrap(),
    );
    assert!(min > 0.0 && min <= typ * 1.001 && typ <= max * 1.001, "{r}");
}

/// Starts `mrc-perf ARGS --backend mem --no-live --out_json_file JSON`, its output captured.
fn spawn_caught(args: &[&str], json: &std::path::Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_mrc-perf"))
        .args(args)
        .args(["--backend", "mem", "--no-live", "--out_json_file"])
        .arg(json)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("mrc-perf starts")
}

/// Whether process `pid` has its own handler for SIGINT (signal 2: bit 1 of `SigCgt`).
fn catches_sigint(pid: u32) -> Option<bool> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
    let mask = u64::from_str_radix(mask.trim(), 16).ok()?;
    Some(mask & (1 << 1) != 0)
}

/// `kill -SIG PID`.
fn signal(sig: &str, pid: u32) {
    let ok = Command::new("kill")
        .args([&format!("-{sig}"), &pid.to_string()])
        .status()
        .expect("kill runs")
        .success();
    assert!(ok, "kill -{sig} {pid}");
}

#[test]
fn ctrl_c_ends_a_timed_run_with_its_report() {
    let json = json_path("sigint");
    // Ten minutes: the signal, not the clock, ends it.
    let mut child = spawn_caught(&["write_bw", "-D", "600", "-s", "4096", "--check"], &json);
    // Before the handlers are in, SIGINT would kill it: wait for them (they come first).
    while catches_sigint(child.id()) != Some(true) {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "mrc-perf exited before it could be interrupted"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    signal("INT", child.id());
    let out = child.wait_with_output().expect("mrc-perf ends");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{}\n{stdout}\n{stderr}", out.status);
    assert!(
        stderr.contains("mrc-perf: interrupted: the run ended early"),
        "{stderr}"
    );
    // The report covers what ran, checked byte by byte: perftest's row, the JSON.
    assert!(stdout.contains(" #bytes     #iterations"), "{stdout}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("JSON written")).unwrap();
    let _ = std::fs::remove_file(&json);
    let elapsed = doc["results"]["elapsed_ns"].as_u64().expect("elapsed_ns");
    assert!(elapsed < 600_000_000_000, "ran its whole duration: {doc}");
    assert_eq!(doc["check"]["bytes_wrong"], 0, "{doc}");
    assert!(doc["error"].is_null(), "{doc}");
}

#[test]
fn a_counted_run_keeps_the_default_and_dies_on_sigterm() {
    use std::os::unix::process::ExitStatusExt as _;
    let json = json_path("sigterm-counted");
    let mut child = spawn_caught(&["write_bw", "-n", "100000000", "-s", "4096"], &json);
    // No handler of its own at any point: whenever SIGTERM comes, its default ends it.
    // (SIGTERM rather than SIGINT: a shell starts background jobs with SIGINT ignored, and
    // this test may run under one.)
    signal("TERM", child.id());
    let status = child.wait().expect("mrc-perf ends");
    assert_eq!(status.signal(), Some(15), "{status}");
    let _ = std::fs::remove_file(&json);
}
