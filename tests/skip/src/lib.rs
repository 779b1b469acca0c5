//! The test suite's one skip rule, shared by every crate's tests (no dependencies, so the
//! lowest crates can use it).
//!
//! A test whose prerequisite (root, a tool, DPDK, a second CPU) is missing calls [`skip`] (a
//! libtest test) or [`skip_exit`] (a `harness = false` binary) with its name and the reason,
//! and returns. Then:
//! - under `MRC_REQUIRE_ALL=1` (root under `scripts/test.sh`) the test fails instead;
//!   except where the machine itself lacks it and no package can bring it (a kernel built
//!   without a feature): [`skip_lacking`] records the skip whatever the variable says;
//! - otherwise a `SKIP test: why` line goes to stderr, and when `MRC_SKIP_LOG` names a file,
//!   one `package test<TAB>why` line is appended to it, so `scripts/test.sh` can end with the list of
//!   what did not run and why (the test runner shows a skipped test as `ok`).

use std::io::Write;
use std::process::{Command, ExitCode, Stdio};

/// The variable that turns a missing prerequisite into a failure.
pub const REQUIRE_ALL: &str = "MRC_REQUIRE_ALL";
/// The variable naming the file skips are recorded in.
pub const SKIP_LOG: &str = "MRC_SKIP_LOG";

/// `MRC_REQUIRE_ALL=1`: a missing prerequisite fails the test.
pub fn require_all() -> bool {
    std::env::var(REQUIRE_ALL).as_deref() == Ok("1")
}

/// Skips `test` because of `why` (say what is missing and what to do: "needs root", "install
/// tshark"): records and prints it, or panics under `MRC_REQUIRE_ALL=1`.
pub fn skip(test: &str, why: &str) {
    assert!(
        !require_all(),
        "{test}: {REQUIRE_ALL}=1 but {why} (scripts/install-deps.sh installs the tools)"
    );
    record(test, why);
}

/// Skips `test` because the machine lacks `what`, which no package installs (a feature the
/// running kernel was built without): recorded and printed like [`skip`], even under
/// `MRC_REQUIRE_ALL=1`, so `scripts/test.sh` lists it among what did not run.
pub fn skip_lacking(test: &str, what: &str) {
    record(test, &format!("this machine lacks {what}"));
}

/// [`skip`] for a `harness = false` test binary: the exit code to return from `main`
/// (failure under `MRC_REQUIRE_ALL=1`).
pub fn skip_exit(test: &str, why: &str) -> ExitCode {
    if require_all() {
        eprintln!(
            "{test}: FAILED: {REQUIRE_ALL}=1 but {why} (scripts/install-deps.sh installs the tools)"
        );
        return ExitCode::FAILURE;
    }
    record(test, why);
    ExitCode::SUCCESS
}

fn record(test: &str, why: &str) {
    eprintln!("SKIP {test}: {why}");
    let Ok(path) = std::env::var(SKIP_LOG) else {
        return;
    };
    // Named with its package where cargo runs it (two crates have a `dpdk_af_packet`). One
    // short write with O_APPEND: lines from tests running at once do not interleave.
    let test = match std::env::var("CARGO_PKG_NAME") {
        Ok(pkg) => format!("{pkg} {test}"),
        Err(_) => test.to_owned(),
    };
    let line = format!("{test}\t{}\n", why.replace(['\t', '\n'], " "));
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    if let Err(e) = written {
        eprintln!("SKIP {test}: could not record the skip in {path}: {e}");
    }
}

/// `true` if `cmd args` runs and succeeds (its output discarded).
pub fn runs(cmd: &str, args: &[&str]) -> bool {
    Command::new(cmd)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `true` if this process runs as root (namespaces, raw sockets, veths).
pub fn is_root() -> bool {
    runs("sh", &["-c", "test \"$(id -u)\" -eq 0"])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs this binary's `child` test in a new process with `env` (the variables are
    /// process-wide and cannot be set in this one); its exit status and the skip log.
    fn run_child(tag: &str, env: &[(&str, &str)]) -> (bool, String) {
        let log = std::env::temp_dir().join(format!("mrc-skip-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_file(&log);
        let status = Command::new(std::env::current_exe().expect("the test binary"))
            .args(["--exact", "tests::child", "--test-threads=1"])
            .env_remove(REQUIRE_ALL)
            .env(SKIP_LOG, &log)
            .env("MRC_SKIP_CHILD", "1")
            .env("CARGO_PKG_NAME", "pkg")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("the test binary runs");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let _ = std::fs::remove_file(&log);
        (status.success(), text)
    }

    /// The skips the parent tests look at; does nothing unless started by [`run_child`].
    #[test]
    fn child() {
        if std::env::var("MRC_SKIP_CHILD").is_err() {
            return;
        }
        skip_lacking("zeroth", "a kernel feature");
        let exit = skip_exit("second", "tab\there\nnewline");
        skip("first", "needs root");
        assert_eq!(exit, ExitCode::SUCCESS, "skip_exit under MRC_REQUIRE_ALL=1");
    }

    #[test]
    fn a_skip_is_recorded_one_line_each() {
        let (ok, log) = run_child("record", &[]);
        assert!(ok, "skips pass");
        assert_eq!(
            log,
            "pkg zeroth\tthis machine lacks a kernel feature\n\
             pkg second\ttab here newline\npkg first\tneeds root\n"
        );
    }

    #[test]
    fn require_all_turns_a_skip_into_a_failure() {
        let (ok, log) = run_child("require", &[(REQUIRE_ALL, "1")]);
        assert!(!ok, "a skip under MRC_REQUIRE_ALL=1 fails the test");
        assert_eq!(
            log, "pkg zeroth\tthis machine lacks a kernel feature\n",
            "what no package brings is still a skip; a failure is not recorded as one"
        );
    }

    #[test]
    fn runs_tells_a_tool_from_a_missing_one() {
        assert!(runs("sh", &["-c", "true"]));
        assert!(!runs("sh", &["-c", "false"]));
        assert!(!runs("mrc-no-such-tool-anywhere", &[]));
    }
}
