//! mrc-perf as a new user and a hostile tester meet it: every command line it cannot run is
//! one line and exit status 2 (no panic, no backtrace), a reader that goes away or a full
//! disk is no crash, `--on-off` shapes what is on the wire at any TX depth, and the per-plane
//! losses add up to the per-EV ones.

use mrc_tests::{assert_full_stdout, assert_head_one, assert_refused};

const BIN: &str = env!("CARGO_BIN_EXE_mrc-perf");

fn perf(args: &[&str]) -> (i32, String, String) {
    mrc_tests::run_tool(BIN, args)
}

#[test]
fn every_refusal_is_one_line_and_exit_2() {
    let bad_plan = std::env::temp_dir().join(format!("mrc-perf-user-{}.toml", std::process::id()));
    std::fs::write(&bad_plan, "name = \"x\"\nplanes = \"two\"\n").unwrap();
    let bad_plan = bad_plan.to_str().unwrap().to_owned();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken = taken.local_addr().unwrap().to_string();
    let cases: &[(&[&str], &str)] = &[
        (&["--planes", "0"], "--planes 0"),
        (&["--planes", "9"], "--planes 9"),
        (&["--plan", "small", "--planes", "4"], "does not match plan"),
        (&["--plan", &bad_plan], "planes"),
        (&["--plan", "/nonexistent/plan.toml"], "--plan"),
        (&["--fail-link=t0-0-0:t1-1-0"], "not neighbours"),
        (&["--backend", "dpdk"], "--eal"),
        (&["--evs", "0"], "--evs 0"),
        (&["--evs", "4000"], "--evs 4000"),
        (&["--metrics", &taken], "--metrics"),
        (&["--metrics", "no-such-host.invalid:1"], "--metrics"),
        (&["-Q", "0"], "-Q 0"),
        (&["--burst_size", "8"], "--burst_size"),
        (&["--all_evs"], "--all-evs"),
        (&["-s", "1073741824", "-q", "16", "-n", "1"], "-s"),
        (&["-n", "x"], "'x'"),
        (&["read_bw"], "unknown test"),
        (
            &["--out_json_file", "/nonexistent/dir/x.json"],
            "--out_json_file",
        ),
    ];
    for (args, names) in cases {
        assert_refused(BIN, args, names);
    }
    let _ = std::fs::remove_file(&bad_plan);
}

#[test]
fn a_reader_that_goes_away_or_a_full_disk_is_no_crash() {
    let first = assert_head_one(BIN, &["-n", "200", "--no-live"], 0);
    assert!(first.starts_with("-----"), "perftest's rule first: {first}");
    assert_head_one(BIN, &["write_lat", "-n", "50", "--no-live"], 0);
    assert_full_stdout(BIN, &["-n", "200", "--no-live"]);
}

#[test]
fn metrics_take_a_host_name() {
    let (code, out, err) = perf(&["-n", "50", "--no-live", "--metrics", "localhost:0"]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(err.contains("metrics: http://"), "{err}");
}

/// The per-plane live lines of a run: (end of the sample in µs, Gb/s of each plane).
fn live(stderr: &str) -> Vec<(f64, Vec<f64>)> {
    stderr
        .lines()
        .filter_map(|l| {
            let rest = l.strip_prefix('[')?;
            let (t, rest) = rest.split_once("ms]")?;
            let gbps = rest
                .split(" Gb/s")
                .next()?
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            Some((t.trim().parse::<f64>().ok()? * 1e3, gbps))
        })
        .collect()
}

#[test]
fn on_off_shapes_the_wire_at_the_default_depth() {
    // 64 KiB Writes, -t 128 (8 MiB outstanding: 168 µs of a 400 Gb/s host, more than an OFF
    // phase): on 50 µs, off 150 µs. Sampled every 25 µs.
    let (code, out, err) = perf(&[
        "-n",
        "3000",
        "--on-off",
        "50us,150us",
        "--live-every",
        "25us",
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let samples = live(&err);
    assert!(samples.len() > 40, "{err}");
    let mut on = Vec::new();
    let mut off = Vec::new();
    for (end_us, gbps) in &samples {
        let start = (end_us - 25.0).rem_euclid(200.0);
        let total: f64 = gbps.iter().sum();
        if start < 1.0 || (start - 25.0).abs() < 1.0 {
            on.push(total);
        } else if (74.0..=176.0).contains(&start) {
            // Wholly inside an OFF phase, past the drain of the last ON packets.
            off.push(total);
        }
    }
    assert!(on.len() >= 8 && off.len() >= 16, "{samples:?}");
    let on_avg = on.iter().sum::<f64>() / on.len() as f64;
    assert!(on_avg > 300.0, "ON phases saturate: {on:?}");
    for o in &off {
        assert!(*o < 1.0, "nothing on the wire in an OFF phase: {off:?}");
    }
}

/// The `losses` column of the per-plane table, and the sum of the per-EV table's.
fn losses(stdout: &str) -> (u64, u64) {
    let mut lines = stdout.lines();
    let mut plane_total = None;
    for l in lines.by_ref() {
        if l.starts_with(" plane  tx_bytes") {
            assert_eq!(l.split_whitespace().nth(8), Some("losses"), "{l}");
            break;
        }
    }
    for l in lines.by_ref() {
        if l.starts_with(" total") {
            plane_total = l.split_whitespace().nth(8).and_then(|w| w.parse().ok());
            break;
        }
    }
    let mut ev_sum = 0;
    let mut col = None;
    for l in lines {
        if l.starts_with(" host  qpn") {
            col = l.split_whitespace().position(|w| w == "losses");
            continue;
        }
        if let Some(c) = col {
            match l
                .split_whitespace()
                .nth(c)
                .and_then(|w| w.parse::<u64>().ok())
            {
                Some(n) if l.starts_with(' ') && l.split_whitespace().count() > c => ev_sum += n,
                _ => col = None,
            }
        }
    }
    (plane_total.expect("a per-plane total"), ev_sum)
}

#[test]
fn per_plane_losses_count_what_the_evs_count() {
    let (code, out, err) = perf(&["-n", "2000", "-s", "8192", "--loss", "0.002", "--no-live"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let (planes, evs) = losses(&out);
    assert!(evs > 0, "random loss is seen: {out}");
    assert_eq!(planes, evs, "the per-plane and per-EV tables agree:\n{out}");
}

#[test]
fn the_banner_shows_the_evs_a_qp_really_has() {
    let (code, out, err) = perf(&["-n", "10", "--no-live"]);
    assert_eq!(code, 0, "{err}");
    // The built-in fabric has 2 spines per plane: 2 paths, so 2 EVs per plane.
    assert!(
        out.contains("EV profile      : 2 per plane, 2 active"),
        "{out}"
    );
}

#[test]
fn mrc_soak_survives_its_reader_and_refuses_in_one_line() {
    let soak = env!("CARGO_BIN_EXE_mrc-soak");
    let first = assert_head_one(soak, &["--seeds", "3", "-v"], 0);
    assert!(first.starts_with("seed"), "{first}");
    assert_full_stdout(soak, &["--seeds", "1"]);
    assert_refused(soak, &["--seeds", "x"], "'x'");
}
