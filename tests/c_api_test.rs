//! The C test programs of `tests/c/`, built the way OCP's example makefile builds a program and
//! run on the default in-memory device; each must exit 0 with its ok line:
//! - `mrc_api_test.c`: every function of `include/mrc.h` and of the software verbs device on
//!   its success and error paths (bad masks, wrong transitions, refused opcodes, over-long
//!   scatter lists, full queues, objects in use, completion and async events);
//! - `mrc_ctl_test.c`: the controller API (`include/mrc_ctl.h`) across two processes.
//!
//! Needs a C compiler and libibverbs-dev's header: otherwise skipped with a message, or failed
//! under `MRC_REQUIRE_ALL=1`.

#[path = "c_api/bench.rs"]
#[allow(dead_code)] // the benchmark's helpers this test does not use
mod bench;

use std::time::Duration;

use bench::{Bench, Scratch};
use mrc_tests::skip;

const TEST: &str = "c_api_test";

/// The programs stop themselves after 240 s (a watchdog alarm); this is the backstop.
const DEADLINE: Duration = Duration::from_mins(5);

#[test]
fn every_mrc_h_function_behaves_as_documented() {
    run_program("mrc_api_test", "mrc-api-test-", &[]);
}

/// `tests/c/mrc_ctl_test.c`: the controller API as OCP's controller examples use it (EV Format
/// profiles, EXP/GEN/SRv6 EV profiles and their operations, an EV event CQ on a completion
/// channel), the controller in one process and an application using its EXP profile in
/// another; the events of a port going down and up reach the controller.
#[test]
fn the_controller_api_reaches_applications_in_other_processes() {
    let ctl = Scratch::new("mrc-ctl-dir-");
    let dir = ctl.0.to_string_lossy().into_owned();
    run_program("mrc_ctl_test", "mrc-ctl-test-", &[("MRC_CTL_DIR", &dir)]);
    let left: Vec<_> = std::fs::read_dir(&ctl.0)
        .expect("the profile directory")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(left.is_empty(), "the programs left {left:?} in MRC_CTL_DIR");
}

/// Builds `tests/c/<name>.c` the way OCP's makefile builds a program, runs it on the default
/// in-memory device with `env` only, and checks that it exits 0 with its ok line.
fn run_program(name: &str, tag: &str, env: &[(&str, &str)]) {
    if let Some(why) = bench::cannot_build() {
        skip(TEST, why);
        return;
    }
    let lib = bench::libraries();
    let scratch = Scratch::new(tag);
    let exe = bench::compile(
        &scratch.0,
        &lib,
        name,
        &[bench::workspace().join(format!("tests/c/{name}.c"))],
    );
    // The default in-memory device whatever the caller's environment says, its libraries
    // through its rpath; output into files, the child killed past the deadline.
    let mut cmd = bench::command(&[], &exe, env);
    cmd.env_remove("MRC_API_TEST_CONTINUE");
    let out = Bench::spawn(&mut cmd, &scratch.0, name).finish(DEADLINE);
    let (stdout, stderr) = mrc_tests::text(&out);
    let status = out.status;
    assert!(
        status.success(),
        "{name} failed ({status}):\n{stdout}{stderr}"
    );
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with(&format!("{name}: ok ("))),
        "no ok line:\n{stdout}{stderr}"
    );
    print!("{stdout}");
}
