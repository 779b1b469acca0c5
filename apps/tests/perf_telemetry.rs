//! mrc-perf's telemetry sinks against the real components (docs/metrics.md "Push",
//! "node_exporter textfile", "Resolution"): Debian's `prometheus-pushgateway` and `promtool`,
//! started on 127.0.0.1 on free ports with a temporary directory, killed and removed after.

use std::io::Read as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const PROMTOOL: &str = "/usr/bin/promtool";

use mrc_tests::free_port;
use mrc_tests::prometheus::{Pushgateway as Gateway, TempDir, values};

/// Run mrc-perf to its end (killed, and the test failed, after a minute).
fn perf(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mrc-perf"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mrc-perf runs");
    // Drain both pipes so a full one never blocks the run.
    let drain = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = r.read_to_end(&mut v);
            v
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if t0.elapsed() > Duration::from_mins(1) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("mrc-perf {args:?} ran over a minute");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
    }
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Payload placed per plane, as the run's JSON says.
fn delivered(doc: &serde_json::Value) -> Vec<f64> {
    doc["planes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rx_bytes"].as_f64().unwrap())
        .collect()
}

#[test]
fn the_gateway_holds_the_final_counters_and_push_delete_removes_them() {
    let Some(gw) = Gateway::start("perf_telemetry push") else {
        return;
    };
    let dir = TempDir::new("push");
    let out = dir.0.join("o.json");
    let url = gw.url();
    let o = perf(&[
        "write_bw",
        "-n",
        "400",
        "--push",
        &url,
        "--push-every",
        "10ms",
        "--push-instance",
        "tel-1",
        "--no-live",
        "--out_json_file",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = delivered(&json(&out));
    assert!(want.iter().all(|&b| b > 0.0), "{want:?}");
    let text = gw.metrics();
    // Per plane, summed over the hosts: what the JSON says each plane delivered.
    for (plane, w) in want.iter().enumerate() {
        let got: f64 = values(
            &text,
            "mrc_port_rcv_data_bytes_total",
            &[
                "job=\"mrc-perf\"",
                "instance=\"tel-1\"",
                "test=\"write_bw\"",
                &format!("plane=\"{plane}\""),
            ],
        )
        .iter()
        .sum();
        assert_eq!(got, *w, "plane {plane} in\n{text}");
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("push_time_seconds{") && l.contains("instance=\"tel-1\"")),
        "{text}"
    );

    // --push-delete: the group is gone after the run.
    let o = perf(&[
        "write_bw",
        "-n",
        "100",
        "--push",
        &url,
        "--push-instance",
        "tel-2",
        "--push-delete",
        "--no-live",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = gw.metrics();
    assert!(!text.contains("instance=\"tel-2\""), "{text}");
    assert!(text.contains("instance=\"tel-1\""), "the other group stays");
}

#[test]
fn a_gateway_that_is_down_does_not_fail_the_run() {
    let url = format!("http://127.0.0.1:{}", free_port());
    let o = perf(&[
        "write_bw",
        "-n",
        "2000",
        "--push",
        &url,
        "--push-every",
        "10ms",
        "--no-live",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let failed: Vec<&str> = err.lines().filter(|l| l.contains("push to")).collect();
    assert!(
        !failed.is_empty() && failed.iter().all(|l| l.contains("failed")),
        "{err}"
    );
    // One line per kind of failure during the run, and the final push's own line.
    assert!(failed.len() <= 2, "{err}");
}

/// The textfile families every read must hold.
const TEXTFILE_FAMILIES: [&str; 6] = [
    "mrc_port_rcv_data_bytes_total{",
    "mrc_port_rcv_data_rate_bytes_per_second{",
    "mrc_port_rcv_data_peak_rate_bytes_per_second{",
    "mrc_qp_xmit_data_bytes_total{",
    "mrc_ev_state{",
    "mrc_run_time_seconds{",
];

#[test]
fn the_textfile_is_whole_at_every_read_and_promtool_accepts_it() {
    // While a run writes it at every sample (a run without end, so the reader sees as many
    // versions as it needs however the machine is loaded), every read is a whole file.
    let live_dir = TempDir::new("textfile-live");
    let file = live_dir.0.join("mrc.prom");
    let run = mrc_tests::Running(
        Command::new(env!("CARGO_BIN_EXE_mrc-perf"))
            .args([
                "write_bw",
                "--backend",
                "mem",
                "-D",
                "0.02",
                "--run_infinitely",
            ])
            .arg("--metrics-textfile")
            .arg(&live_dir.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("mrc-perf runs"),
    );
    let deadline = Instant::now() + Duration::from_mins(1);
    let (mut reads, mut versions, mut last) = (0u32, 0u32, String::new());
    while versions < 5 {
        assert!(
            Instant::now() < deadline,
            "{versions} versions of the file in {reads} reads"
        );
        if let Ok(t) = std::fs::read_to_string(&file) {
            reads += 1;
            assert!(t.ends_with('\n'), "a partial file:\n{t}");
            for fam in TEXTFILE_FAMILIES {
                assert!(t.contains(fam), "{fam} missing from a read:\n{t}");
            }
            if t != last {
                versions += 1;
                last = t;
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    drop((run, live_dir));

    // A run to its end leaves the file alone, which promtool accepts.
    let dir = TempDir::new("textfile");
    let file = dir.0.join("mrc.prom");
    let o = perf(&[
        "write_bw",
        "--backend",
        "mem",
        "-D",
        "0.3",
        "--no-live",
        "--sample-every",
        "20ms",
        "--metrics-textfile",
        dir.0.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let left: Vec<_> = std::fs::read_dir(&dir.0).unwrap().flatten().collect();
    assert_eq!(left.len(), 1, "no temporary file stays: {left:?}");
    let t = std::fs::read_to_string(&file).unwrap();
    for fam in TEXTFILE_FAMILIES {
        assert!(t.contains(fam), "{fam} missing from the final file:\n{t}");
    }
    if !Path::new(PROMTOOL).exists() {
        mrc_tests::skip(
            "perf_telemetry promtool",
            "needs promtool (apt install prometheus)",
        );
        return;
    }
    let check = Command::new(PROMTOOL)
        .args(["check", "metrics"])
        .stdin(std::fs::File::open(&file).unwrap())
        .output()
        .unwrap();
    assert!(
        check.status.success() && check.stdout.is_empty() && check.stderr.is_empty(),
        "promtool: {}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
}

/// The JSON samples' times on the sampler's own clock, ns (`t_s` is those ns over 1e9).
fn sample_ns(doc: &serde_json::Value) -> Vec<u64> {
    doc["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["t_s"].as_f64().unwrap() * 1e9).round() as u64)
        .collect()
}

/// The series follows `period_ns` on the sampler's own clock, however late the sampler woke:
/// one sample per period at most, and every period up to the last sample has its sample or
/// is counted in `samples_missed`. A sampler that ignored `--sample-every` (its default is
/// the live lines' period: 200 ms real, a tenth of the run simulated) would account for far
/// fewer periods than the last sample's time holds. Returns the samples' times and the
/// periods missed.
fn follows(doc: &serde_json::Value, period_ns: u64) -> (Vec<u64>, u64) {
    let t = sample_ns(doc);
    let missed = doc["samples_missed"].as_u64().unwrap();
    assert_eq!(doc["samples_dropped"], 0);
    assert!(!t.is_empty(), "no sample");
    let periods: Vec<u64> = t.iter().map(|t| t / period_ns).collect();
    assert!(
        periods.windows(2).all(|w| w[0] < w[1]),
        "two samples in one period: {t:?}"
    );
    assert_eq!(
        t.len() as u64 + missed,
        periods[periods.len() - 1],
        "{} samples and {missed} periods missed by {} ns: {t:?}",
        t.len(),
        t[t.len() - 1]
    );
    (t, missed)
}

#[test]
fn samples_follow_sample_every_in_real_and_simulated_time() {
    // Real time (mem): the sampler's clock is the wall clock, and a loaded machine wakes it
    // late; the series still accounts for every 1 ms period of the 0.3 s run.
    let dir = TempDir::new("resolution");
    let out = dir.0.join("mem.json");
    let o = perf(&[
        "write_bw",
        "--backend",
        "mem",
        "-D",
        "0.3",
        "--no-live",
        "--sample-every",
        "1ms",
        "--out_json_file",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&out);
    follows(&doc, 1_000_000);
    let planes = doc["samples"][0]["planes"].as_array().unwrap();
    assert!(!planes.is_empty() && planes[0]["gbps"].is_number());

    // Simulated time: never late, every 10 us of virtual time.
    let out = dir.0.join("sim.json");
    let o = perf(&[
        "write_bw",
        "-n",
        "300",
        "--no-live",
        "--sample-every",
        "10us",
        "--metrics-textfile",
        dir.0.to_str().unwrap(),
        "--out_json_file",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (t, missed) = follows(&json(&out), 10_000);
    assert_eq!(missed, 0);
    assert!(t.len() > 10, "{t:?}");
    assert!(t.windows(2).all(|w| w[1] - w[0] == 10_000), "{t:?}");
    let text = std::fs::read_to_string(dir.0.join("mrc.prom")).unwrap();
    let v = values(&text, "mrc_virtual_time_seconds", &[]);
    assert!(v.len() == 1 && v[0] > 0.0, "{text}");
    assert!(
        text.lines()
            .filter(|l| l.starts_with("# HELP "))
            .all(|l| l.contains("simulated time")),
        "{text}"
    );
}

#[test]
fn bad_telemetry_flags_are_one_line_and_exit_2() {
    for args in [
        &["--push", "ftp://x"][..],
        &["--metrics-textfile", "/nonexistent"],
        &["--sample-every", "0"],
        &["--backend", "mem", "--sample-every", "10us"],
        &["--push", "http://127.0.0.1:9091", "--push-every", "banana"],
    ] {
        let o = perf(args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
