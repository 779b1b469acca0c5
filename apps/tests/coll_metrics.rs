//! The Prometheus endpoint of `mrc-coll --metrics` (every rank's series, the table's lines)
//! and of `mrc-perf write_lat --metrics` (the latency histogram), scraped after the last
//! line while `--metrics-linger` keeps it up.

use std::io::{BufRead as _, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use mrc_tests::Running;
use mrc_tests::prometheus::{scrape, values};

fn value(text: &str, name: &str, labels: &[&str]) -> f64 {
    match values(text, name, labels)[..] {
        [v] => v,
        ref v => panic!("{name} {labels:?}: {} series in\n{text}", v.len()),
    }
}

/// Start `bin args`, wait for its `metrics: http://ADDR/metrics` line and for its stdout to
/// show `done` (a line starting with it); the address and stdout so far.
fn run_until(bin: &str, args: &[&str], done: &str) -> (Running, String, String) {
    let mut child = Command::new(bin)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tool starts");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let run = Running(child);
    let mut err = BufReader::new(stderr);
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .trim()
        .strip_prefix("metrics: http://")
        .and_then(|r| r.strip_suffix("/metrics"))
        .unwrap_or_else(|| panic!("no address line: {line:?}"))
        .to_owned();
    let (tx, rx) = mpsc::channel();
    let done = done.to_owned();
    std::thread::spawn(move || {
        let mut out = String::new();
        for l in BufReader::new(stdout).lines() {
            let Ok(l) = l else { break };
            out.push_str(&l);
            out.push('\n');
            if l.trim_start().starts_with(&done) {
                let _ = tx.send(out.clone());
            }
        }
        let _ = tx.send(out);
    });
    let out = rx
        .recv_timeout(Duration::from_mins(5))
        .expect("the run prints its last line");
    (run, addr, out)
}

#[test]
fn coll_exports_every_rank_and_the_table() {
    coll_exports("mem");
}

#[test]
fn coll_sim_exports_every_rank_and_the_table() {
    coll_exports("sim");
}

fn coll_exports(backend: &str) {
    let (_run, addr, out) = run_until(
        env!("CARGO_BIN_EXE_mrc-coll"),
        &[
            "all_reduce",
            "--backend",
            backend,
            "--ranks",
            "3",
            "-b",
            "1K",
            "-e",
            "64K",
            "-f",
            "4",
            "-n",
            "5",
            "--metrics",
            "127.0.0.1:0",
            "--metrics-linger",
            // Long enough for a loaded machine to scrape; the run is killed after the test.
            "300s",
        ],
        "# Avg bus bandwidth",
    );
    let text = scrape(&addr);
    // The table: size count type redop root, then time algbw busbw #wrong per placement.
    let rows: Vec<Vec<&str>> = out
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| l.split_whitespace().collect())
        .filter(|c: &Vec<&str>| c.len() == 13)
        .collect();
    assert_eq!(rows.len(), 4, "1K 4K 16K 64K:\n{out}");
    for c in &rows {
        for (place, busbw, wrong) in [("out", c[7], c[8]), ("in", c[11], c[12])] {
            let lb = [
                format!("size=\"{}\"", c[0]),
                format!("place=\"{place}\""),
                "op=\"all_reduce\"".to_owned(),
                "type=\"float\"".to_owned(),
                "redop=\"sum\"".to_owned(),
                "test=\"all_reduce\"".to_owned(),
            ];
            let lb: Vec<&str> = lb.iter().map(String::as_str).collect();
            let table: f64 = busbw.parse().unwrap();
            let got = value(&text, "mrc_coll_busbw_bytes_per_second", &lb);
            // The table prints GB/s with two decimals.
            assert!(
                (got / 1e9 - table).abs() <= 0.005 + 1e-9,
                "{} {place}: {got} B/s vs the table's {table} GB/s",
                c[0]
            );
            assert_eq!(wrong, "0");
            assert_eq!(value(&text, "mrc_coll_wrong_elements_total", &lb), 0.0);
            assert_eq!(value(&text, "mrc_coll_operations_total", &lb), 5.0);
            let t = value(&text, "mrc_coll_time_seconds", &lb);
            let us: f64 = c[if place == "out" { 5 } else { 9 }].parse().unwrap();
            assert!((t * 1e6 - us).abs() <= 0.5 + us * 1e-3, "{t} s vs {us} us");
        }
    }
    // Every rank's engine, with traffic.
    for h in ["h0", "h1", "h2"] {
        let host = format!("host=\"{h}\"");
        let rcv: f64 = values(&text, "mrc_port_rcv_data_bytes_total", &[&host])
            .iter()
            .sum();
        assert!(rcv > 0.0, "{h} received nothing:\n{text}");
        let sent: f64 = values(&text, "mrc_qp_xmit_data_bytes_total", &[&host])
            .iter()
            .sum();
        assert!(sent > 0.0, "{h}'s QPs sent nothing:\n{text}");
        let states = values(&text, "mrc_qp_state", &[&host]);
        assert!(
            !states.is_empty() && states.iter().all(|&s| s == 3.0),
            "{h}'s QPs are RTS (3): {states:?}"
        );
    }
    assert!(values(&text, "mrc_port_rcv_data_bytes_total", &["host=\"h3\""]).is_empty());
}

#[test]
fn write_lat_histogram_counts_every_sample() {
    let (_run, addr, out) = run_until(
        env!("CARGO_BIN_EXE_mrc-perf"),
        &[
            "write_lat",
            "--backend",
            "mem",
            "-n",
            "300",
            "--metrics",
            "127.0.0.1:0",
            "--metrics-linger",
            // Long enough for a loaded machine to scrape; the run is killed after the test.
            "300s",
        ],
        "Per plane",
    );
    let text = scrape(&addr);
    // The latency row: #bytes #iterations t_min ...
    let row: Vec<&str> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|c| c.len() > 4 && c[0].parse::<u64>().is_ok())
        .unwrap_or_else(|| panic!("no latency row:\n{out}"));
    let iters: f64 = row[1].parse().unwrap();
    assert_eq!(iters, 300.0, "{out}");
    // The pinging host (h0) has the samples.
    let lb = ["test=\"write_lat\"", "host=\"h0\""];
    let count = value(&text, "mrc_write_latency_seconds_count", &lb);
    assert_eq!(count, iters, "one observation per sample:\n{text}");
    let sum = value(&text, "mrc_write_latency_seconds_sum", &lb);
    let t_avg_us: f64 = row[5].parse().unwrap();
    assert!(
        (sum / count * 1e6 - t_avg_us).abs() <= 0.01 + t_avg_us * 1e-3,
        "mean {} us vs the table's t_avg {t_avg_us} us",
        sum / count * 1e6
    );
    // Cumulative buckets: the agreed bounds in order, never decreasing, +Inf = count.
    let buckets: Vec<(String, f64)> = text
        .lines()
        .filter(|l| l.starts_with("mrc_write_latency_seconds_bucket{"))
        .map(|l| {
            let le = l.split("le=\"").nth(1).unwrap().split('"').next().unwrap();
            (
                le.to_owned(),
                l.rsplit(' ').next().unwrap().parse().unwrap(),
            )
        })
        .collect();
    let les: Vec<&str> = buckets.iter().map(|(le, _)| le.as_str()).collect();
    assert_eq!(les.len(), 14, "{les:?}");
    assert_eq!(les[13], "+Inf");
    let bounds: Vec<f64> = les[..13].iter().map(|l| l.parse().unwrap()).collect();
    assert_eq!(
        bounds,
        [
            1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2
        ]
    );
    assert!(
        buckets.windows(2).all(|w| w[0].1 <= w[1].1),
        "cumulative: {buckets:?}"
    );
    assert_eq!(buckets[13].1, count);
}

#[test]
fn bad_metrics_flags_are_one_line_and_exit_2() {
    for (bin, args, names) in [
        (
            env!("CARGO_BIN_EXE_mrc-coll"),
            &["all_reduce", "--backend", "mem", "--metrics", "nowhere"][..],
            "--metrics nowhere",
        ),
        (
            env!("CARGO_BIN_EXE_mrc-coll"),
            &["all_reduce", "--backend", "mem", "--metrics-linger", "5s"],
            "--metrics-linger 5s",
        ),
        (
            env!("CARGO_BIN_EXE_mrc-coll"),
            &[
                "all_reduce",
                "--backend",
                "mem",
                "--metrics",
                "127.0.0.1:0",
                "--metrics-linger",
                "soon",
            ],
            "--metrics-linger soon",
        ),
        (
            env!("CARGO_BIN_EXE_mrc-perf"),
            &["write_lat", "--metrics-linger", "5s"],
            "--metrics-linger 5s",
        ),
    ] {
        let out = Command::new(bin).args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(names), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing printed before");
    }
}
