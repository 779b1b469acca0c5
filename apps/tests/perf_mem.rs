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
