//! mrc-perf on the simulated fabric, as a user runs it: the binary's own table and JSON are
//! parsed and the figures checked against each other (bytes = size × iterations × QPs,
//! per-plane bytes sum to the total, averages are bytes over time), the traffic patterns
//! shape the bandwidth as asked, and refusals name what to fix.

fn perf(args: &[&str]) -> (i32, String, String) {
    mrc_tests::run_tool(env!("CARGO_BIN_EXE_mrc-perf"), args)
}

/// The numbers of the result rows under the column header.
fn rows(stdout: &str) -> Vec<Vec<f64>> {
    let mut lines = stdout.lines().skip_while(|l| !l.starts_with(" #bytes"));
    let header = lines.next().expect("a result table");
    assert!(header.contains("#iterations"), "{header}");
    lines
        .take_while(|l| !l.starts_with("---"))
        .map(|l| {
            l.split_whitespace()
                .map(|w| {
                    w.parse::<f64>()
                        .unwrap_or_else(|_| panic!("number in {l:?}"))
                })
                .collect()
        })
        .collect()
}

/// `(plane, tx_bytes, delivered_bytes)` of a per-plane table row.
type PlaneRow = (u64, u64, u64);

/// The per-plane table: its rows and the total row's `(tx_bytes, delivered_bytes)`.
fn planes(stdout: &str) -> (Vec<PlaneRow>, (u64, u64)) {
    let mut lines = stdout
        .lines()
        .skip_while(|l| !l.starts_with(" Per plane"))
        .skip(2);
    let mut rows = Vec::new();
    for l in lines.by_ref() {
        let w: Vec<&str> = l.split_whitespace().collect();
        if w[0] == "total" {
            return (rows, (w[1].parse().unwrap(), w[2].parse().unwrap()));
        }
        rows.push((
            w[0].parse().unwrap(),
            w[1].parse().unwrap(),
            w[2].parse().unwrap(),
        ));
    }
    panic!("no total row in\n{stdout}");
}

use mrc_tests::TempFile;

#[test]
fn write_bw_table_and_json_add_up_through_a_link_failure() {
    let f = TempFile::new("bw.json");
    let path = f.0.to_str().unwrap();
    let (code, out, err) = perf(&[
        "write_bw",
        "-n",
        "400",
        "-q",
        "2",
        "--fail-link",
        "--out_json_file",
        path,
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("RDMA_Write BW Test"));
    assert!(out.contains(" Clock           : simulated"));
    let r = rows(&out);
    assert_eq!(r.len(), 1);
    let [size, iters, peak, avg, rate] = r[0][..] else {
        panic!("five columns: {:?}", r[0]);
    };
    assert_eq!((size, iters), (65536.0, 400.0));
    assert!(peak >= avg && avg > 0.0 && rate > 0.0);

    let j = f.json();
    let res = &j["results"];
    let bytes = res["bytes"].as_u64().unwrap();
    assert_eq!(bytes, 65536 * 400 * 2, "bytes = size x iterations x QPs");
    assert_eq!(res["MsgSize"], 65536);
    assert_eq!(res["n_iterations"], 400);
    // The table prints the JSON's figures.
    assert!((res["BW_average"].as_f64().unwrap() - avg).abs() < 0.006);
    assert!((res["BW_peak"].as_f64().unwrap() - peak).abs() < 0.006);
    // MB/s (perftest's MB: 2^20 bytes) = bytes / elapsed.
    let elapsed = res["elapsed_ns"].as_f64().unwrap();
    let mibps = bytes as f64 / (elapsed / 1e9) / f64::from(1 << 20);
    assert!((mibps - avg).abs() < 0.01 * avg, "{mibps} vs {avg}");
    let msgs = res["messages"].as_f64().unwrap();
    assert!((msgs / elapsed * 1e3 - rate).abs() < 1e-5);

    // Per-plane delivered bytes sum to the total, in the JSON and in the table.
    let jp = j["planes"].as_array().unwrap();
    assert_eq!(jp.len(), 4, "the built-in fabric has 4 planes");
    let delivered: u64 = jp.iter().map(|p| p["rx_bytes"].as_u64().unwrap()).sum();
    assert_eq!(delivered, bytes);
    for p in jp {
        assert!(p["tx_bytes"].as_u64() >= p["rx_bytes"].as_u64());
        assert!(
            p["rx_bytes"].as_u64().unwrap() > bytes / 8,
            "every plane carries a share"
        );
    }
    let (tp, (_, total_rx)) = planes(&out);
    assert_eq!(tp.len(), 4);
    assert_eq!(tp.iter().map(|p| p.2).sum::<u64>(), bytes);
    assert_eq!(total_rx, bytes);

    // The failure happened and was ridden through: retransmissions, and every message done.
    assert!(out.contains(" Faults          :") && out.contains("link down t0-0-0:t1-0-0"));
    let retx: u64 = jp.iter().map(|p| p["retransmits"].as_u64().unwrap()).sum();
    assert!(retx > 0, "a dead link loses packets");
    assert!(out.contains("every message completed"), "{out}");
    // The dead path's silence was seen on plane 0: its packets declared lost, by RACK from
    // the holes (which now usually retires the EV first) or by the per-packet timeout.
    let evs = j["evs"].as_array().unwrap();
    assert!(evs.iter().any(|e| e["plane"] == 0
        && e["timeouts"].as_u64().unwrap() + e["inferred_losses"].as_u64().unwrap() > 0));
    assert_eq!(j["test_info"]["Clock"], "simulated");

    // Live per-plane bandwidth on stderr while it ran: every plane on every line, and the
    // failure visible as it happens (retransmissions and a retired EV appear mid-run).
    let live: Vec<&str> = err
        .lines()
        .filter(|l| l.contains("Gb/s delivered"))
        .collect();
    assert!(live.len() >= 3, "live lines: {err}");
    for l in &live {
        for p in 0..4 {
            assert!(l.contains(&format!("plane{p} ")), "{l}");
        }
    }
    let counter = |l: &str, key: &str| -> u64 {
        l.split(key)
            .nth(1)
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {l}"))
    };
    assert_eq!(
        counter(live[0], "retx "),
        0,
        "nothing resent before the failure"
    );
    let last = live[live.len() - 1];
    assert!(
        counter(last, "retx ") > 0 && counter(last, "EVs out ") > 0,
        "{last}"
    );
}

#[test]
fn write_imm_bw_both_ways_sums_directions_and_checks_bytes() {
    let f = TempFile::new("imm.json");
    let (code, out, err) = perf(&[
        "write_imm_bw",
        "-n",
        "150",
        "-q",
        "3",
        "-s",
        "8192",
        "-b",
        "--check",
        "--report_gbits",
        "--no-live",
        "--out_json_file",
        f.0.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("BW average[Gb/sec]"));
    assert!(
        out.contains(
            "Data check: 900 messages (7372800 bytes) verified as they landed, all correct"
        ),
        "{out}"
    );
    let j = f.json();
    assert_eq!(j["results"]["bytes"], 8192 * 150 * 3 * 2);
    let placed: u64 = j["qps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["data_bytes_placed"].as_u64().unwrap())
        .sum();
    assert_eq!(
        placed,
        8192 * 150 * 3 * 2,
        "every QP placed its peer's bytes once"
    );
    let (_, (_, delivered)) = planes(&out);
    assert_eq!(delivered, 8192 * 150 * 3 * 2);
}

#[test]
fn write_lat_prints_perftest_latency_columns() {
    let f = TempFile::new("lat.json");
    let (code, out, err) = perf(&[
        "write_lat",
        "-s",
        "64",
        "-n",
        "300",
        "--out_json_file",
        f.0.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("t_typical[usec]") && out.contains("99.9% percentile[usec]"));
    let r = rows(&out);
    let [size, iters, min, max, typ, avg, sd, p99, p999] = r[0][..] else {
        panic!("nine columns: {:?}", r[0]);
    };
    assert_eq!((size, iters), (64.0, 300.0));
    assert!(min > 0.5 && min <= typ && typ <= max, "{:?}", r[0]);
    assert!(min <= avg && avg <= max && sd >= 0.0);
    // Percentiles are samples (nearest rank): in order, and never above t_max.
    assert!(typ <= p99 && p99 <= p999 && p999 <= max, "{:?}", r[0]);
    let j = f.json();
    assert_eq!(j["results"]["n_iterations"], 300);
    for k in [
        "t_min",
        "t_max",
        "t_typical",
        "t_avg",
        "t_stdev",
        "percentile_99",
        "percentile_99.9",
    ] {
        assert!(j["results"][k].is_number(), "{k}");
    }
    // A ping and a pong per iteration: 2 x 300 x 64 bytes delivered.
    let (_, (_, delivered)) = planes(&out);
    assert_eq!(delivered, 2 * 300 * 64);
}

#[test]
fn size_sweep_prints_one_row_per_size() {
    let (code, out, err) = perf(&["write_bw", "-a", "-n", "3", "--no-live", "--planes", "2"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r = rows(&out);
    let sizes: Vec<u64> = r.iter().map(|x| x[0] as u64).collect();
    assert_eq!(sizes, (1..=23).map(|i| 1u64 << i).collect::<Vec<_>>());
    assert!(r.iter().all(|x| x[1] == 3.0 && x[3] > 0.0));
    let total: u64 = sizes.iter().map(|s| s * 3).sum();
    let (p, (_, delivered)) = planes(&out);
    assert_eq!(p.len(), 2);
    assert_eq!(delivered, total, "the plane table covers the whole sweep");
}

#[test]
fn duration_mode_has_no_peak_and_counts_what_completed() {
    let f = TempFile::new("dur.json");
    let (code, out, err) = perf(&[
        "write_bw",
        "-D",
        "300us",
        "-s",
        "16384",
        "--no-live",
        "--out_json_file",
        f.0.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r = rows(&out);
    assert_eq!(r[0][2], 0.0, "perftest prints no peak with -D");
    let j = f.json();
    let msgs = j["results"]["messages"].as_u64().unwrap();
    assert_eq!(j["results"]["bytes"].as_u64().unwrap(), msgs * 16384);
    assert_eq!(r[0][1] as u64, msgs, "one QP: iterations = messages");
    // 300 µs at up to 400 Gb/s: at most ~1 MB more than the duration allows.
    assert!(msgs * 16384 < 300 * 400 / 8 * 1000 + 1_000_000);
}

/// Average Gb/s of a run.
fn gbps(args: &[&str]) -> f64 {
    let mut a = vec!["write_bw", "--report_gbits", "--no-live"];
    a.extend_from_slice(args);
    let (code, out, err) = perf(&a);
    assert_eq!(code, 0, "{out}\n{err}");
    rows(&out)[0][3]
}

#[test]
fn traffic_patterns_shape_the_bandwidth() {
    let full = gbps(&["-s", "4096", "-n", "2000"]);
    assert!(full > 200.0, "saturating 4 x 100G: {full}");
    let limited = gbps(&["-s", "4096", "-n", "2000", "--rate_limit", "20"]);
    assert!(
        (limited - 20.0).abs() < 1.0,
        "rate limit 20 Gb/s gave {limited}"
    );
    // Bursts of 10 x 4 KiB every 10 µs: 32.8 Gb/s.
    let bursts = gbps(&[
        "-s",
        "4096",
        "-n",
        "500",
        "--burst_size",
        "10",
        "--burst-gap",
        "10us",
    ]);
    assert!((bursts - 32.8).abs() < 3.0, "bursts gave {bursts}");
    // On 50 µs, off 150 µs: about a quarter of saturation (plus what the TX depth still
    // has in flight when a phase ends).
    let on_off = gbps(&["-s", "4096", "-n", "4000", "--on-off", "50us,150us"]);
    assert!(
        on_off < full * 0.4 && on_off > full * 0.15,
        "on/off gave {on_off} of {full}"
    );
}

#[test]
fn refusals_name_what_to_fix() {
    let (code, _, err) = perf(&["write_lat", "-b"]);
    assert_eq!(code, 2);
    assert!(err.contains("bandwidth tests"), "{err}");
    let (code, _, err) = perf(&["write_bw", "--plan", "small", "--planes", "3"]);
    assert_eq!(code, 2);
    assert!(err.contains("does not match plan"), "{err}");
    let bad = TempFile::new("bad-plan.toml");
    std::fs::write(&bad.0, "name = \"x\"\nplanes = \"two\"\n").unwrap();
    let (code, _, err) = perf(&["write_bw", "--plan", bad.0.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(
        err.contains("planes"),
        "the plan error names the field: {err}"
    );
    let (code, _, err) = perf(&["write_bw", "--fail-link=t0-0-0:t1-1-0"]);
    assert_eq!(code, 2);
    assert!(err.contains("not neighbours"), "{err}");
}
