//! `mrc-experiments run` refuses the files it cannot use before anything runs: one line on
//! stderr naming the file, the line and what to change, exit status 2, never a panic (also
//! with RUST_BACKTRACE=1); sizes are 64-bit; a flap of any count costs one fault; its stdout
//! survives `| head -1` and a full disk.

use std::path::PathBuf;
use std::process::Command;

use mrc_tests::{assert_full_stdout, assert_head_one, assert_refused, text, unique};

const BIN: &str = env!("CARGO_BIN_EXE_mrc-experiments");

/// A scratch directory with `files` written in it.
struct Dir(PathBuf);

impl Dir {
    fn with(files: &[(&str, &str)]) -> Self {
        let d = std::env::temp_dir().join(unique("mrc-experiments-"));
        std::fs::create_dir_all(&d).unwrap();
        for (name, body) in files {
            std::fs::write(d.join(name), body).unwrap();
        }
        Self(d)
    }

    fn path(&self, name: &str) -> String {
        self.0.join(name).display().to_string()
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const TRAFFIC: &str = "0->1 0 65536\n2->3 5 100000\n";

/// `run --traffic t.txt [--faults f.txt] ...` in `d`, refused with a line containing `names`.
fn refused(d: &Dir, extra: &[&str], names: &str) -> String {
    let (t, out) = (d.path("t.txt"), d.path("out"));
    let mut args = vec!["run", "--no-progress", "--out", &out, "--traffic", &t];
    args.extend_from_slice(extra);
    assert_refused(BIN, &args, names)
}

fn run(d: &Dir, extra: &[&str]) -> (Option<i32>, String, String) {
    let (t, out) = (d.path("t.txt"), d.path("out"));
    let o = Command::new(BIN)
        .args(["run", "--no-progress", "--out", &out, "--traffic", &t])
        .args(extra)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert!(!stderr.contains("panicked"), "{stderr}");
    (o.status.code(), stdout, stderr)
}

#[test]
fn a_host_outside_the_plan_is_refused_with_its_line() {
    let d = Dir::with(&[("t.txt", "0->1 0 65536\n\n9->1 0 5\n")]);
    let line = refused(&d, &[], "t.txt:3: host 9 is not in the plan (hosts 0-3");
    assert!(line.starts_with("mrc-experiments: "), "{line}");
}

#[test]
fn an_empty_traffic_file_is_refused() {
    let d = Dir::with(&[("t.txt", "# nothing yet\n\n")]);
    refused(&d, &[], "t.txt: no messages");
}

#[test]
fn nodes_past_the_plan_and_wrong_counts_are_refused() {
    let d = Dir::with(&[("t.txt", "Nodes 16\n0->1 0 5\n")]);
    refused(&d, &[], "t.txt:1: Nodes 16: plan \"small\" has 4 hosts");
    let d = Dir::with(&[("t.txt", "Nodes 4\nConnections 3\n0->1 0 5\n")]);
    refused(
        &d,
        &[],
        "t.txt:2: Connections 3, but the file has 1 messages",
    );
}

#[test]
fn sizes_past_what_addresses_hold_are_refused_by_name() {
    let d = Dir::with(&[("t.txt", "0->1 0 18446744073709551616\n")]);
    refused(
        &d,
        &[],
        "t.txt:1: size 18446744073709551616: at most 4611686018427387904 bytes",
    );
}

#[test]
fn a_message_past_4_gib_is_neither_cut_nor_a_panic() {
    // 5 GB cannot finish in 20 µs; the run says how far it got, of all 5 000 000 000 bytes.
    let d = Dir::with(&[("t.txt", "0->1 0 5000000000\n")]);
    let (code, _, stderr) = run(&d, &["--limit-us", "20"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("of 5000000000 bytes placed"), "{stderr}");
    assert!(stderr.contains("raise --limit-us"), "{stderr}");
}

#[test]
fn fault_refusals_name_the_file_line_and_what_to_change() {
    for (faults, names) in [
        (
            "18446744073709551615 link-down t0-0-0 t1-0-0\n",
            "f.txt:1: time 18446744073709551615 µs is past the end of the simulator's clock",
        ),
        (
            "# ok\n0 link-down t0-0-0 t0-0-1\n",
            "f.txt:2: t0-0-0 and t0-0-1 are not neighbours",
        ),
        (
            "0 link-down t0-0-0 t1-0-7\n",
            "f.txt:1: t1-0-7 is not in the plan",
        ),
        (
            "0 switch-stop t1-3-0\n",
            "f.txt:1: t1-3-0 is not in the plan",
        ),
        ("0 port-down h4 0\n", "f.txt:1: h4 is not in the plan"),
        ("0 port-down h3 2\n", "f.txt:1: h3 has no port 2"),
        (
            "flap t0-0-0 t1-0-0 start 0 period 2000000000 down 5 count 4000000000\n",
            "f.txt:1: the last flap is past the end of the simulator's clock",
        ),
        ("10 explode h1\n", "f.txt:1: unknown fault \"explode\""),
    ] {
        let d = Dir::with(&[("t.txt", TRAFFIC), ("f.txt", faults)]);
        let f = d.path("f.txt");
        refused(&d, &["--faults", &f], names);
    }
}

#[test]
fn a_flap_of_four_billion_costs_one_fault() {
    // Expanded up front this was 8 billion faults (384 GB); now the run just goes.
    let d = Dir::with(&[
        ("t.txt", TRAFFIC),
        (
            "f.txt",
            "flap t0-0-0 t1-0-0 start 1 period 3 down 1 count 4000000000\n",
        ),
    ]);
    let f = d.path("f.txt");
    let (code, stdout, stderr) = run(&d, &["--faults", &f]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("flows      2 done      2"), "{stdout}");
}

#[test]
fn bad_plans_and_options_are_refused() {
    let d = Dir::with(&[
        ("t.txt", TRAFFIC),
        ("p.toml", "planes = 9\n"),
        (
            "q.toml",
            &mrc_srv6::plan::SMALL_PLAN_TOML.replace("planes = 2", "planes = 9"),
        ),
        (
            "s.toml",
            &format!("{}\n[sim]\ntrim = 3\n", mrc_srv6::plan::SMALL_PLAN_TOML),
        ),
    ]);
    let p = |n: &str| d.path(n);
    refused(
        &d,
        &["--plan", &p("p.toml")],
        "p.toml: missing field `t0_per_plane`",
    );
    refused(
        &d,
        &["--plan", &p("q.toml")],
        "q.toml:5: planes: 9 is out of range",
    );
    refused(
        &d,
        &["--plan", &p("s.toml")],
        "s.toml: plan [sim] table: trim = 3",
    );
    refused(&d, &["--plan", &p("none.toml")], "none.toml: no such file");
    refused(&d, &["--qps", "0"], "--qps 0");
    refused(
        &d,
        &["--limit-us", "99999999999999999"],
        "--limit-us 99999999999999999: at most",
    );
    refused(
        &d,
        &["--faults", &p("none.txt")],
        "none.txt: cannot read the fault file",
    );
    refused(&d, &["--quick"], "--quick is for the experiments");
    let out = p("out");
    assert_refused(BIN, &["run", "--out", &out], "run needs --traffic FILE");
    let t = p("t.txt");
    assert_refused(BIN, &["loss", "--traffic", &t], "--traffic is for `run`");
    assert_refused(BIN, &["run", "--trafic", &t], "'--trafic'");
}

#[test]
fn stdout_survives_head_and_a_full_disk() {
    let d = Dir::with(&[("t.txt", TRAFFIC)]);
    let (t, out) = (d.path("t.txt"), d.path("out"));
    let args = ["run", "--no-progress", "--out", &out, "--traffic", &t];
    let first = assert_head_one(BIN, &args, 0);
    assert!(first.starts_with("# small MRC: plan small"), "{first}");
    assert_full_stdout(BIN, &args);
}
