//! `mrc-coll` as a user meets it, on the simulator and on threads (fast: small sizes, few
//! ranks, `-n 1 -w 0`):
//!
//! - every refusal is one line on stderr, exit status 2, no panic or backtrace (with
//!   `RUST_BACKTRACE=1`), and nothing on stdout (it comes before the table's header);
//! - `| head -1` and `>/dev/full` end quietly (exit 0) or with one line (exit 2);
//! - the output reads with a parser written to nccl-tests' strings (its header, units line,
//!   data lines and the `# Out of bounds values` / `# Avg bus bandwidth` footer), the bus
//!   bandwidth follows nccl-tests' factors, and the rooted collectives run from every root
//!   with `#wrong` 0;
//! - one rank prints numbers (no inf, NaN or JSON null); nccl-tests' `-g 1 -t 1`, `-m`, `-z`,
//!   `-N`, `-a`, `-T`, `-c` are taken.

use std::process::Command;

use mrc_tests::{assert_full_stdout, assert_head_one, assert_refused, unique};

const COLL: &str = env!("CARGO_BIN_EXE_mrc-coll");

/// `mrc-coll args`: its stdout, stderr and exit status.
fn run(args: &[&str]) -> (String, String, Option<i32>) {
    let out = Command::new(COLL)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("mrc-coll runs");
    let (stdout, stderr) = mrc_tests::text(&out);
    (stdout, stderr, out.status.code())
}

/// A refusal: exit 2, one line naming `names`, no panic, and nothing printed before it.
fn refused(args: &[&str], names: &str) {
    assert_refused(COLL, args, names);
    let (stdout, _, _) = run(args);
    assert!(
        stdout.is_empty(),
        "mrc-coll {}: the refusal comes before any output, got:\n{stdout}",
        args.join(" ")
    );
}

/// The small, quick run the tests start from (4 ranks, 64 B to 4 KiB by 8, one timed
/// iteration), with `extra` options added or in place of these.
fn quick<'a>(coll: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let base = [
        ("--ranks", "4"),
        ("-b", "64"),
        ("-e", "4K"),
        ("-f", "8"),
        ("-n", "1"),
        ("-w", "0"),
    ];
    let mut v = vec![coll];
    for (flag, value) in base {
        if !extra.contains(&flag) {
            v.extend([flag, value]);
        }
    }
    v.extend_from_slice(extra);
    v
}

#[test]
fn every_refusal_is_one_line_and_exit_2_before_any_output() {
    let q = |extra: &[&'static str]| quick("all_reduce", extra);
    for (args, names) in [
        (q(&["--ranks", "0"]), "--ranks 0"),
        (q(&["--ranks", "129"]), "--ranks 129"),
        (q(&["--backend", "mem", "--ranks", "0"]), "--ranks 0"),
        (q(&["--window", "0"]), "--window 0"),
        (q(&["--window", "129"]), "--window 129"),
        (q(&["--backend", "mem", "--planes", "0"]), "--planes 0"),
        (q(&["--backend", "mem", "--planes", "9"]), "--planes 9"),
        (q(&["--planes", "2"]), "--planes"),
        (q(&["--backend", "mem", "--plan", "x"]), "--plan"),
        (q(&["--backend", "mem", "--fail-link"]), "--fail-link"),
        (q(&["--memif", "x"]), "--memif"),
        (q(&["--backend", "tcp"]), "--backend tcp"),
        (q(&["--plan", "/nonexistent.toml"]), "--plan"),
        (q(&["-e", "1M", "-i", "0", "-f", "1"]), "-i 0"),
        (q(&["-b", "0", "-e", "1M", "-f", "2"]), "-b 0"),
        (q(&["-b", "1", "-e", "1G", "-i", "1", "-f", "1"]), "sizes"),
        (q(&["-b", "8K"]), "-b 8K"),
        (q(&["-e", "many"]), "-e many"),
        (q(&["-n", "0"]), "-n 0"),
        (q(&["-m", "0"]), "-m 0"),
        (q(&["-N", "0"]), "-N 0"),
        (q(&["-g", "2"]), "-g 2 cannot be honoured, give -g 1"),
        (q(&["-t", "2"]), "-t 2"),
        (q(&["-G", "1"]), "-G 1"),
        (q(&["-C", "1"]), "-C 1"),
        (q(&["-a", "4"]), "-a 4"),
        (q(&["-z", "4"]), "-z 4"),
        (q(&["-r", "1"]), "all_reduce has no root"),
        (q(&["-d", "quad"]), "quad"),
        (q(&["-o", "xor"]), "xor"),
        (q(&["--slice-bytes", "1000"]), "--slice-bytes 1000"),
        (
            q(&["-J", "/nonexistent-dir/out.json"]),
            "-J /nonexistent-dir/out.json",
        ),
        (
            q(&["-e", "4096G", "--slice-bytes", "1G"]),
            "memory available",
        ),
        (q(&["-e", "4096G"]), "--slice-bytes"),
        (
            q(&["--backend", "mem", "-e", "256G", "--slice-bytes", "1G"]),
            "memory available",
        ),
        (q(&["--no-such-option"]), "--no-such-option"),
        (q(&["-n", "-3"]), "-3"),
        (
            quick("broadcast", &["-r", "9"]),
            "-r 9: 4 ranks have roots 0 to 3",
        ),
        (quick("gather", &["-r", "-2"]), "-r -2"),
        (quick("allreduce", &[]), "allreduce"),
        (
            quick("hypercube", &["--ranks", "3"]),
            "--ranks 3: hypercube needs a power-of-two",
        ),
        (
            quick("all_reduce", &["--backend", "dpdk", "--memif", "x"]),
            "under mpirun",
        ),
        (vec!["switch", "--ranks", "1", "--memif", "x"], "--ranks 1"),
        (vec!["switch", "--ranks", "2"], "--memif NAME"),
        (vec!["-b", "8"], "name the collective first: all_reduce"),
    ] {
        refused(&args, names);
    }
}

#[test]
fn head_one_and_a_full_disk_end_quietly() {
    // 10 000 lines: far more than a pipe holds, so the writes after `head` left fail.
    let line = assert_head_one(
        COLL,
        &[
            "sendrecv", "--ranks", "1", "-b", "4", "-e", "40000", "-i", "4",
        ],
        0,
    );
    assert!(line.starts_with("# nThread 1 nGpus 1"), "{line}");
    let line = assert_head_one(COLL, &quick("broadcast", &[]), 0);
    assert!(line.starts_with("# nThread"), "{line}");
    assert_head_one(COLL, &["--help"], 0);
    assert_full_stdout(COLL, &quick("reduce", &["-r", "0"]));
}

/// One data line of nccl-tests' table.
#[derive(Debug, Clone, PartialEq)]
struct Line {
    size: u64,
    count: u64,
    dtype: String,
    redop: String,
    root: i64,
    /// Out-of-place, then in-place: (time us, algbw, busbw, #wrong; None for N/A).
    results: [(f64, f64, f64, Option<u64>); 2],
}

/// What an nccl-tests output says.
#[derive(Debug)]
struct Table {
    lines: Vec<Line>,
    out_of_bounds: u64,
    ok: bool,
    avg_busbw: f64,
}

/// Parses nccl-tests' output (written to nccl-tests' own strings: `common.cu`'s header,
/// units line, data lines and footer). Panics with the offending line when it is not
/// nccl-tests' format.
fn parse_nccl_tests(out: &str) -> Table {
    const HEADER: [&str; 14] = [
        "#", "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong",
    ];
    const UNITS: [&str; 9] = [
        "#",
        "(B)",
        "(elements)",
        "(us)",
        "(GB/s)",
        "(GB/s)",
        "(us)",
        "(GB/s)",
        "(GB/s)",
    ];
    let all: Vec<&str> = out.lines().collect();
    let h = all
        .iter()
        .position(|l| l.split_whitespace().eq(HEADER.iter().copied()))
        .unwrap_or_else(|| panic!("no nccl-tests header line in:\n{out}"));
    assert!(
        all[h - 1].starts_with('#')
            && all[h - 1].contains("out-of-place")
            && all[h - 1].contains("in-place"),
        "the placement line above the header: {:?}",
        all[h - 1]
    );
    assert!(
        all[h + 1].split_whitespace().eq(UNITS.iter().copied()),
        "units line: {:?}",
        all[h + 1]
    );
    let mut lines = Vec::new();
    let mut footer = None;
    for l in &all[h + 2..] {
        if let Some(rest) = l.strip_prefix("# Out of bounds values : ") {
            let (n, verdict) = rest.split_once(' ').expect("count and verdict");
            footer = Some((n.parse::<u64>().expect("a count"), verdict == "OK"));
            continue;
        }
        if let Some(rest) = l.strip_prefix("# Avg bus bandwidth    : ") {
            let bw: f64 = rest.trim().parse().expect("a bandwidth");
            let (n, ok) = footer.expect("out of bounds before the average");
            return Table {
                lines,
                out_of_bounds: n,
                ok,
                avg_busbw: bw,
            };
        }
        assert!(!l.starts_with('#'), "a comment inside the table: {l:?}");
        let t: Vec<&str> = l.split_whitespace().collect();
        assert_eq!(t.len(), 13, "a data line has 13 fields: {l:?}");
        let num = |s: &str| -> f64 { s.parse().unwrap_or_else(|_| panic!("{s:?} in {l:?}")) };
        let result = |i: usize| {
            let wrong = (t[i + 3] != "N/A").then(|| t[i + 3].parse().expect("#wrong"));
            (num(t[i]), num(t[i + 1]), num(t[i + 2]), wrong)
        };
        lines.push(Line {
            size: t[0].parse().expect("size"),
            count: t[1].parse().expect("count"),
            dtype: t[2].to_owned(),
            redop: t[3].to_owned(),
            root: t[4].parse().expect("root"),
            results: [result(5), result(9)],
        });
    }
    panic!("no nccl-tests footer in:\n{out}");
}

/// Runs a collective and parses its table; every line checked and right.
fn table(args: &[&str]) -> Table {
    let (stdout, stderr, code) = run(args);
    assert_eq!(
        code,
        Some(0),
        "mrc-coll {}:\n{stdout}\n{stderr}",
        args.join(" ")
    );
    let t = parse_nccl_tests(&stdout);
    assert_eq!((t.out_of_bounds, t.ok), (0, true), "{stdout}");
    for l in &t.lines {
        for r in l.results {
            assert_eq!(r.3, Some(0), "{l:?}\n{stdout}");
            assert!(r.0 > 0.0 && r.1.is_finite() && r.2.is_finite(), "{l:?}");
        }
    }
    t
}

#[test]
fn the_table_reads_as_nccl_tests_with_its_bus_factors() {
    let n = 4.0;
    for (coll, factor) in [
        ("all_reduce", 2.0 * (n - 1.0) / n),
        ("all_gather", (n - 1.0) / n),
        ("reduce_scatter", (n - 1.0) / n),
        ("alltoall", (n - 1.0) / n),
        ("sendrecv", 1.0),
        ("broadcast", 1.0),
        ("reduce", 1.0),
        ("gather", (n - 1.0) / n),
        ("scatter", (n - 1.0) / n),
        ("hypercube", 1.0),
    ] {
        let t = table(&quick(coll, &["-b", "64K", "-e", "64K"]));
        assert!(!t.lines.is_empty(), "{coll}");
        let mut sum = 0.0;
        for l in &t.lines {
            for (_, algbw, busbw, _) in l.results {
                // Both are printed to 2 decimals.
                assert!(
                    (busbw - algbw * factor).abs() <= 0.01 + 0.005 * factor,
                    "{coll}: busbw {busbw} = algbw {algbw} x {factor}"
                );
                sum += busbw;
                // nccl-tests' hypercube counts the n-1 blocks a rank receives.
                let bytes = if coll == "hypercube" {
                    l.count * 4 * 3
                } else {
                    l.size
                };
                let time = l.results[0].0;
                let want = bytes as f64 / 1e3 / l.results[0].0;
                assert!(
                    (l.results[0].1 - want).abs() <= 0.01 + want * 0.01,
                    "{coll}: algbw {} for {bytes} B in {time} us",
                    l.results[0].1
                );
            }
            assert_eq!(l.dtype, "float", "{coll}");
            let reduces = ["all_reduce", "reduce_scatter", "reduce"].contains(&coll);
            assert_eq!(l.redop, if reduces { "sum" } else { "none" }, "{coll}");
        }
        let mean = sum / (2 * t.lines.len()) as f64;
        assert!(
            (t.avg_busbw - mean).abs() <= 0.01,
            "{coll}: Avg bus bandwidth {} vs {mean}",
            t.avg_busbw
        );
    }
}

#[test]
fn rooted_collectives_run_from_every_root_with_nccl_tests_counts() {
    for coll in ["broadcast", "reduce", "gather", "scatter"] {
        // -r -1 (the default): every root in turn, every size of each.
        let t = table(&quick(coll, &[]));
        let roots: Vec<i64> = t.lines.iter().map(|l| l.root).collect();
        assert_eq!(
            roots,
            [0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3],
            "{coll}: sizes 64, 512 and 4096 from each root"
        );
        for l in &t.lines {
            let elements = l.size / 4;
            match coll {
                // The buffer is the count.
                "broadcast" | "reduce" => assert_eq!(l.count, elements, "{l:?}"),
                // A rank's share, the size is of the whole.
                _ => assert_eq!(l.count * 4, elements, "{coll} {l:?}"),
            }
        }
        let t = table(&quick(coll, &["-r", "2", "--backend", "mem", "-d", "int8"]));
        assert!(t.lines.iter().all(|l| l.root == 2 && l.dtype == "int8"));
    }
    // Every type and operator of reduce, in and out of place, at the root.
    let t = table(&quick(
        "reduce",
        &["-r", "3", "-d", "all", "-o", "all", "-e", "64"],
    ));
    assert_eq!(t.lines.len(), 10 * 5);
    // nccl-tests rounds a rank's share down to 16 bytes: 100 int8 over 4 ranks is 16 each.
    let t = table(&[
        "gather", "--ranks", "4", "-b", "100", "-e", "100", "-d", "int8", "-r", "0", "-n", "1",
        "-w", "0",
    ]);
    assert_eq!((t.lines[0].count, t.lines[0].size), (16, 64));
}

#[test]
fn one_rank_prints_numbers_and_no_nulls() {
    let json = std::env::temp_dir().join(unique("coll-one-rank-") + ".json");
    let json_s = json.to_str().expect("a path").to_owned();
    for coll in ["all_reduce", "broadcast", "alltoall"] {
        let (stdout, stderr, code) = run(&[
            coll, "--ranks", "1", "-b", "8", "-e", "1M", "-f", "32", "-n", "1", "-w", "0", "-J",
            &json_s,
        ]);
        assert_eq!(code, Some(0), "{stdout}\n{stderr}");
        for bad in ["inf", "NaN", "nan"] {
            assert!(!stdout.contains(bad), "{coll}: {bad} in\n{stdout}");
        }
        let t = parse_nccl_tests(&stdout);
        for l in &t.lines {
            for (time, algbw, busbw, wrong) in l.results {
                // (All-to-all's share of 8 bytes rounds down to none.)
                assert!(time > 0.0 && (algbw > 0.0) == (l.size > 0), "{coll}: {l:?}");
                // nccl-tests' factors at one rank: 0 for all-reduce and all-to-all, 1 else.
                let factor = if coll == "broadcast" { 1.0 } else { 0.0 };
                assert!((busbw - algbw * factor).abs() <= 0.01, "{coll}: {l:?}");
                assert_eq!(wrong, Some(0));
            }
        }
        let doc = std::fs::read_to_string(&json).expect("the JSON file");
        assert!(!doc.contains("null"), "{coll}: a null in\n{doc}");
        let rows: Vec<serde_json::Value> = serde_json::from_str(&doc).expect("JSON");
        assert_eq!(rows.len(), t.lines.len());
        assert_eq!(rows[0]["root"], if coll == "broadcast" { 0 } else { -1 });
    }
    let _ = std::fs::remove_file(&json);
}

#[test]
fn nccl_tests_habits_are_taken() {
    // The flags of nearly every pasted command, and the timing ones.
    let args = quick(
        "all_reduce",
        &[
            "-g", "1", "-t", "1", "-m", "2", "-z", "1", "-N", "2", "-a", "3", "-T", "60", "-c", "2",
        ],
    );
    let (stdout, stderr, code) = run(&args);
    assert_eq!(code, Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("agg iters: 2 validation: 2"), "{stdout}");
    assert!(stdout.contains("# Blocking Enabled"), "{stdout}");
    let t = parse_nccl_tests(&stdout);
    // -N 2: the sweep (64, 512, 4096) twice.
    let sizes: Vec<u64> = t.lines.iter().map(|l| l.size).collect();
    assert_eq!(sizes, [64, 512, 4096, 64, 512, 4096]);
    // A single size needs no step, -i 0 included.
    table(&quick("sendrecv", &["-b", "1K", "-e", "1K", "-i", "0"]));
    // -r -1 on a collective without a root is nccl-tests' default, taken.
    table(&quick("all_gather", &["-r", "-1", "-z", "3"]));
}
