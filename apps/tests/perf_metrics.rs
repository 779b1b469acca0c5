//! The Prometheus endpoint during a run: scrape `mrc-perf --metrics` twice while it runs and
//! find the per-plane, per-QP and per-EV counters there and moving.

use std::io::{BufRead as _, BufReader, Read as _};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mrc_tests::Running;
use mrc_tests::prometheus::{scrape, values};

/// The value of the first series of `name` whose labels contain every one of `labels`.
fn value(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    values(text, name, labels).first().copied()
}

#[test]
fn counters_move_while_the_test_runs() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mrc-perf"))
        .args([
            "write_bw",
            "-D",
            "100us",
            "--run_infinitely",
            "--metrics",
            "127.0.0.1:0",
            "--loss=0.001",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("mrc-perf starts");
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let _run = Running(child);
    // Keep reading the period lines so the run never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = BufReader::new(stdout).read_to_end(&mut sink);
    });
    // stderr is read on a thread (to its end, so that pipe never fills either); the address
    // line is waited for with a deadline, not a blocking read.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut seen = Vec::new();
    let addr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = rx.recv_timeout(left).unwrap_or_else(|e| {
            panic!("mrc-perf named no metrics address ({e}); its stderr:\n{seen:#?}")
        });
        if let Some(a) = line
            .strip_prefix("metrics: http://")
            .and_then(|r| r.strip_suffix("/metrics"))
        {
            break a.to_owned();
        }
        seen.push(line);
    };

    let series = "mrc_port_xmit_data_bytes_total";
    let plane0 = ["host=\"h0\"", "plane=\"0\"", "test=\"write_bw\""];
    // Scrape until `pass` holds of the value (a loaded machine publishes late), a minute at
    // most.
    let wait = |what: &str, pass: &dyn Fn(Option<f64>) -> bool| {
        let deadline = Instant::now() + Duration::from_mins(1);
        loop {
            let v = value(&scrape(&addr), series, &plane0);
            if pass(v) {
                return v.unwrap_or_default();
            }
            assert!(Instant::now() < deadline, "{what}: {series} is {v:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    // The first samples may not have been published yet.
    let a = wait("per-plane transmit bytes", &|v| v.is_some_and(|v| v > 0.0));
    wait("the counter moves", &|v| v.is_some_and(|v| v > a));
    // 0.1 % loss on every link: retransmissions by some cause, once enough has been sent.
    let retransmitted = |text: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with("mrc_qp_retransmitted_packets_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let deadline = Instant::now() + Duration::from_mins(1);
    let last = loop {
        let text = scrape(&addr);
        if retransmitted(&text) > 0.0 {
            break text;
        }
        assert!(Instant::now() < deadline, "lossy links retransmit:\n{text}");
        std::thread::sleep(Duration::from_millis(50));
    };
    for plane in 0..4 {
        let p = format!("plane=\"{plane}\"");
        assert!(value(&last, series, &["host=\"h0\"", &p]).is_some_and(|v| v > 0.0));
        assert!(
            value(&last, "mrc_port_rcv_data_bytes_total", &["host=\"h2\"", &p])
                .is_some_and(|v| v > 0.0)
        );
    }
    for (name, labels) in [
        (
            "mrc_qp_retransmitted_packets_total",
            &["cause=\"inferred\""][..],
        ),
        ("mrc_local_ack_timeout_err_total", &["host=\"h0\""][..]),
        ("mrc_duplicate_request_total", &["host=\"h2\""][..]),
        ("mrc_out_of_sequence_total", &["host=\"h2\""][..]),
        ("mrc_np_ecn_marked_packets_total", &["host=\"h2\""][..]),
        ("mrc_plane_trimmed_packets_total", &["plane=\"1\""][..]),
        ("mrc_ev_state", &["ev=\"0\"", "plane=\"0\""][..]),
    ] {
        assert!(
            value(&last, name, labels).is_some(),
            "{name} {labels:?} in\n{last}"
        );
    }
}
