//! A real Prometheus (Debian's `prometheus`, `promtool`) against mrc-perf's `--metrics`
//! endpoint: the delivered-bytes counters it scrapes are the bytes mrc-perf reports, every
//! PromQL expression of dashboards/grafana-mrc.json returns series, `promtool check metrics`
//! finds nothing in the exposition, and dashboards/mrc-alerts.yml passes `promtool check
//! rules` and its unit tests. Skipped (via mrc_skip) where the binaries are missing.

use std::io::{BufRead as _, BufReader, Read as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mrc_tests::prometheus::{
    PROMTOOL, Prometheus, Pushgateway, Target, http_get, http_send, tool, vector,
};

/// A tool run, killed however the test ends.
struct Run {
    child: Child,
}

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `bin args` serving metrics on `addr`; its stdout is drained, its stderr echoed.
fn start(bin: &str, args: &[&str], addr: &str) -> Run {
    let mut child = Command::new(bin)
        .args(args)
        .args(["--metrics", addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the tool starts");
    let out = child.stdout.take().unwrap();
    let err = child.stderr.take().unwrap();
    // Drained so the run never blocks on a full pipe.
    std::thread::spawn(move || {
        let mut sink = Vec::new();
        let _ = BufReader::new(out).read_to_end(&mut sink);
    });
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            // The period lines are many; the rest (errors) is shown with a failure.
            if !line.starts_with('[') {
                eprintln!("tool: {line}");
            }
        }
    });
    Run { child }
}

fn free_addr() -> String {
    format!("127.0.0.1:{}", mrc_tests::free_port())
}

/// (a) What a real Prometheus scraped of a run is what mrc-perf reports: at the end (the
/// endpoint stays up after the run, `--metrics-linger`) `mrc_port_rcv_data_bytes_total` holds
/// each plane's delivered bytes of the JSON, whose sum is `results.bytes` (what `BW
/// average[MB/sec]` divides by the elapsed time, in MiB), and every series it scraped only
/// grew: a counter, so `rate()` of it is the delivered rate the dashboard plots. (How closely
/// a rate over scrape times agrees with the run's bandwidth depends on when the scrapes
/// came: a timing, not a test.)
#[test]
fn the_scraped_counters_are_the_reported_bytes() {
    let addr = free_addr();
    let Some(prom) = Prometheus::start(
        "the_scraped_counters_are_the_reported_bytes",
        &[Target::Static(vec![addr.clone()])],
    ) else {
        return;
    };
    let dir = mrc_tests::prometheus::TempDir::new("promrate");
    let json = dir.0.join("bw.json");
    let json_s = json.to_str().unwrap().to_owned();
    let mut run = start(
        env!("CARGO_BIN_EXE_mrc-perf"),
        &[
            "write_bw",
            "--backend",
            "mem",
            "-D",
            "1",
            "--metrics-linger",
            "300s",
            "--out_json_file",
            &json_s,
        ],
        &addr,
    );
    // The JSON is written at the end of the run, before the linger (whole once it parses).
    let deadline = Instant::now() + Duration::from_mins(2);
    let report: serde_json::Value = loop {
        if let Some(v) = std::fs::read_to_string(&json)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
        {
            break v;
        }
        if let Some(st) = run.child.try_wait().unwrap() {
            panic!("mrc-perf ended ({st}) without its JSON");
        }
        assert!(Instant::now() < deadline, "mrc-perf did not finish");
        std::thread::sleep(Duration::from_millis(50));
    };
    let bytes = report["results"]["bytes"].as_f64().unwrap();
    let elapsed_ns = report["results"]["elapsed_ns"].as_f64().unwrap();
    let reported = bytes / (elapsed_ns / 1e9);
    let bw_mib = report["results"]["BW_average"].as_f64().unwrap();
    assert!(
        (bw_mib * 1048576.0 / reported - 1.0).abs() < 1e-6,
        "BW_average {bw_mib} MiB/s is bytes/elapsed {reported} B/s"
    );
    let want = plane_rx_bytes(&report);
    assert_eq!(want.iter().sum::<f64>(), bytes, "{want:?}");

    // Prometheus scrapes the final counters while the endpoint lingers.
    let expr = "sum by (plane) (mrc_port_rcv_data_bytes_total)";
    let deadline = Instant::now() + Duration::from_mins(1);
    loop {
        let got = vector(
            &prom
                .query(expr)
                .unwrap_or_else(|e| panic!("{e}\n{}", prom.log())),
        );
        let mut per_plane = vec![0.0; want.len()];
        for (labels, x) in &got {
            let plane: usize = labels["plane"].as_str().unwrap().parse().unwrap();
            if let Some(p) = per_plane.get_mut(plane) {
                *p = *x;
            }
        }
        if per_plane == want {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{expr}: {got:?}, the JSON's {want:?}\n{}",
            prom.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    // Every scraped series only grew, to its final value.
    let raw = prom
        .query("mrc_port_rcv_data_bytes_total[10m]")
        .unwrap_or_else(|e| panic!("{e}\n{}", prom.log()));
    let series = raw["result"].as_array().expect("a matrix");
    assert!(!series.is_empty(), "scraped nothing: {raw}");
    for s in series {
        let v: Vec<f64> = s["values"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_str().unwrap().parse().unwrap())
            .collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{s}");
    }
}

/// The PromQL expressions of the dashboard: its panels' targets and its query variables
/// (`label_values(metric, label)` becomes `group by (label) (metric)`), with `$host` etc.
/// replaced by `.*` and `$__rate_interval` by 1s.
fn dashboard_exprs() -> Vec<(String, String)> {
    let text = include_str!("../../dashboards/grafana-mrc.json");
    let d: serde_json::Value = serde_json::from_str(text).expect("the dashboard is JSON");
    let subst = |e: &str| {
        let mut e = e.replace("$__rate_interval", "1s");
        for v in ["host", "test", "plane"] {
            e = e.replace(&format!("${{{v}}}"), ".*");
            e = e.replace(&format!("${v}"), ".*");
        }
        e
    };
    let mut out = Vec::new();
    for p in d["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            if let Some(e) = t["expr"].as_str() {
                out.push((p["title"].as_str().unwrap_or("?").to_owned(), subst(e)));
            }
        }
    }
    for v in d["templating"]["list"].as_array().unwrap() {
        let Some(q) = v["query"]["query"].as_str() else {
            continue;
        };
        let inner = q
            .strip_prefix("label_values(")
            .and_then(|r| r.strip_suffix(')'))
            .unwrap_or_else(|| panic!("variable query {q}: only label_values(m, l) is handled"));
        let (metric, label) = inner.rsplit_once(',').expect("label_values(metric, label)");
        out.push((
            format!("variable {}", v["name"]),
            format!("group by ({}) ({})", label.trim(), subst(metric.trim())),
        ));
    }
    out
}

/// (b) While a write_bw and a write_lat run are scraped every 100 ms, every expression of the
/// dashboard evaluates without error and returns at least one series.
#[test]
fn every_dashboard_expression_returns_series() {
    let bw = free_addr();
    let lat = free_addr();
    let coll = free_addr();
    let Some(prom) = Prometheus::start(
        "every_dashboard_expression_returns_series",
        &[Target::Static(vec![bw.clone(), lat.clone(), coll.clone()])],
    ) else {
        return;
    };
    // mrc-coll's panels: a short all_reduce sweep whose endpoint stays up with its final
    // lines (`--metrics-linger`) while Prometheus scrapes.
    let _coll = start(
        env!("CARGO_BIN_EXE_mrc-coll"),
        &[
            "all_reduce",
            "--backend",
            "mem",
            "--ranks",
            "3",
            "-b",
            "1K",
            "-e",
            "16K",
            "--metrics-linger",
            "300s",
        ],
        &coll,
    );
    let perf = env!("CARGO_BIN_EXE_mrc-perf");
    let _bw = start(
        perf,
        &[
            "write_bw",
            "--backend",
            "mem",
            "-D",
            "1",
            "--run_infinitely",
        ],
        &bw,
    );
    let _lat = start(
        perf,
        &[
            "write_lat",
            "--backend",
            "mem",
            "-D",
            "1",
            "--run_infinitely",
        ],
        &lat,
    );
    prom.wait_targets_up(Duration::from_mins(1));
    let exprs = dashboard_exprs();
    assert!(exprs.len() >= 10, "{exprs:?}");
    // Each expression is queried until it returns series, a minute at most: a 1 s rate
    // window needs two scrapes in its last second, which a loaded machine may not have had.
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut left: Vec<&(String, String)> = exprs.iter().collect();
    let mut failed = Vec::new();
    loop {
        let mut empty = Vec::new();
        for x @ (title, e) in left {
            match prom.query(e) {
                Err(err) => failed.push(format!("{title}: {e}: error {err}")),
                Ok(d) if vector(&d).is_empty() => empty.push(x),
                Ok(_) => {}
            }
        }
        left = empty;
        if left.is_empty() || Instant::now() >= deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    failed.extend(
        left.iter()
            .map(|(title, e)| format!("{title}: {e}: no series")),
    );
    assert!(
        failed.is_empty(),
        "{} of {} dashboard expressions failed:\n{}",
        failed.len(),
        exprs.len(),
        failed.join("\n")
    );
}

/// (c) `promtool check metrics` on a scrape of mrc-perf's exposition reports no problem.
#[test]
fn promtool_finds_no_lint_in_the_exposition() {
    let Some(promtool) = tool("promtool_finds_no_lint_in_the_exposition", PROMTOOL) else {
        return;
    };
    let addr = free_addr();
    let _run = start(
        env!("CARGO_BIN_EXE_mrc-perf"),
        &[
            "write_bw",
            "--backend",
            "mem",
            "-D",
            "1",
            "--run_infinitely",
        ],
        &addr,
    );
    let deadline = Instant::now() + Duration::from_mins(1);
    let body = loop {
        match http_get(&addr, "/metrics") {
            Ok((200, b)) if b.contains("mrc_port_rcv_data_bytes_total{") => break b,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            r => panic!("no metrics from {addr}: {r:?}"),
        }
    };
    let mut check = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(&mut check.stdin.take().unwrap(), body.as_bytes()).unwrap();
    let out = check.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics: {:?}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// dashboards/mrc-alerts.yml: `promtool check rules` passes, and so do its unit tests
/// (dashboards/mrc-alerts.test.yml: each alert fires on its series, with its exact labels and
/// annotations, and stays quiet on the others).
#[test]
fn alert_rules_check_and_pass_their_unit_tests() {
    let Some(promtool) = tool("alert_rules_check_and_pass_their_unit_tests", PROMTOOL) else {
        return;
    };
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../dashboards");
    for args in [
        ["check", "rules", "mrc-alerts.yml"],
        ["test", "rules", "mrc-alerts.test.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {}: {:?}\n{}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn the_dashboard_names_its_variables() {
    let exprs = dashboard_exprs();
    for v in ["host", "test", "plane"] {
        assert!(
            exprs.iter().any(|(t, _)| t == &format!("variable \"{v}\"")),
            "no {v} variable: {exprs:?}"
        );
    }
}

/// The harness's Pushgateway path: a group pushed to a Pushgateway reaches a Prometheus that
/// scrapes it with `honor_labels`, with the pushed `job` and `instance`; deleting the group
/// removes it from the Pushgateway.
#[test]
fn a_pushed_group_reaches_prometheus_through_the_pushgateway() {
    let test = "a_pushed_group_reaches_prometheus_through_the_pushgateway";
    let Some(gw) = Pushgateway::start(test) else {
        return;
    };
    let Some(prom) = Prometheus::start(test, &[Target::Pushgateway(gw.addr().to_owned())]) else {
        return;
    };
    // A short run (the simulator, the default backend) pushes its final counters.
    let dir = mrc_tests::prometheus::TempDir::new("prompush");
    let json = dir.0.join("run.json");
    let out = Command::new(env!("CARGO_BIN_EXE_mrc-perf"))
        .args(["write_bw", "-n", "300", "--no-live", "--push", &gw.url()])
        .args(["--push-instance", "ci-run", "--out_json_file"])
        .arg(&json)
        .output()
        .expect("mrc-perf runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let want = plane_rx_bytes(&report);
    // Prometheus, scraping the gateway, sees them with the run's job and instance.
    let expr = "sum by (plane) (mrc_port_rcv_data_bytes_total{job=\"mrc-perf\",instance=\"ci-run\",test=\"write_bw\"})";
    let deadline = Instant::now() + Duration::from_secs(30);
    let got = loop {
        let v = vector(&prom.query(expr).unwrap());
        if v.len() == want.len() {
            break v;
        }
        assert!(Instant::now() < deadline, "{expr}: {v:?}\n{}", prom.log());
        std::thread::sleep(Duration::from_millis(50));
    };
    for (labels, x) in &got {
        let plane: usize = labels["plane"].as_str().unwrap().parse().unwrap();
        assert_eq!(
            *x, want[plane],
            "plane {plane}: {got:?} against the JSON's {want:?}"
        );
    }
    // Deleting the group (what --push-delete does at the end of a run) removes it.
    let group = "/metrics/job/mrc-perf/instance/ci-run";
    let (status, _) = http_send(gw.addr(), "DELETE", group, "").unwrap();
    assert!((200..300).contains(&status));
    assert!(!gw.metrics().contains("instance=\"ci-run\""));
}

/// The report's per-plane received bytes, each of them non-zero.
fn plane_rx_bytes(report: &serde_json::Value) -> Vec<f64> {
    let bytes: Vec<f64> = report["planes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rx_bytes"].as_f64().unwrap())
        .collect();
    assert!(bytes.iter().all(|&b| b > 0.0), "{bytes:?}");
    bytes
}
