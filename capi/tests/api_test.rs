//! `tests/c/mrc_api_test.c`, every function of `include/mrc.h` and of the software verbs
//! device on its success and error paths: built with the system C compiler the way OCP's
//! example makefile builds a program (`lib_mrc.so` by path, `-L <dir> -libverbs`, an rpath to
//! both) and run on the default in-memory device; it must exit 0 with its ok line.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TEST: &str = "api_test";

/// The program stops itself after 240 s (a watchdog alarm); this is the backstop.
const DEADLINE: Duration = Duration::from_mins(5);

/// The configuration keys of the software device: unset, so the program gets the default
/// in-memory device (two hosts on two planes) whatever the caller's environment says.
const DEVICE_KEYS: [&str; 9] = [
    "MRC_CONFIG",
    "MRC_DEVICE",
    "MRC_MEM_HOSTS",
    "MRC_MEM_PLANES",
    "MRC_EAL",
    "MRC_ADDR",
    "MRC_PLAN",
    "MRC_HOST",
    "MRC_API_TEST_CONTINUE",
];

/// The directory holding the `lib_mrc.so` cargo built for this test run (next to the test
/// binary, in `deps/` or its parent) and the `libibverbs.so` of package mrc-verbs.
fn library_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let deps = exe.parent().expect("deps directory");
    let candidates = [deps, deps.parent().unwrap_or(deps)];
    let dir = candidates
        .into_iter()
        .find(|d| d.join("lib_mrc.so").exists())
        .unwrap_or_else(|| panic!("lib_mrc.so not found in {} or its parent", deps.display()));
    assert!(
        dir.join("libibverbs.so").exists(),
        "libibverbs.so (package mrc-verbs) is not next to lib_mrc.so in {}: build it for the \
         same profile first (`cargo build -p mrc-verbs`)",
        dir.display()
    );
    dir.to_path_buf()
}

/// Removes the scratch directory on every exit path (a failed assertion unwinds through it).
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn every_mrc_h_function_behaves_as_documented() {
    if !mrc_skip::runs("cc", &["--version"]) {
        mrc_skip::skip(TEST, "needs a C compiler (install gcc)");
        return;
    }
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        mrc_skip::skip(TEST, "needs rdma-core's verbs.h (install libibverbs-dev)");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root");
    let lib = library_dir();
    let scratch =
        Scratch(std::env::temp_dir().join(format!("mrc-api-test-{}", std::process::id())));
    std::fs::create_dir_all(&scratch.0).expect("scratch dir");
    let exe = scratch.0.join("mrc_api_test");

    // OCP's makefile: $(CC) $(CFLAGS) -o prog src -L$(MRC_LIB_DIR) -Wl,-rpath,$(MRC_LIB_DIR)
    // $(MRC_LIB_DIR)/lib_mrc.so -libverbs.
    let built = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-g", "-I"])
        .arg(root.join("include"))
        .arg("-o")
        .arg(&exe)
        .arg(root.join("tests/c/mrc_api_test.c"))
        .arg("-L")
        .arg(&lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg(lib.join("lib_mrc.so"))
        .args(["-libverbs", "-pthread"])
        .output()
        .expect("run cc");
    assert!(
        built.status.success(),
        "tests/c/mrc_api_test.c does not build:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    // Output into files (no pipe to fill and block on), the child killed past the deadline.
    let out_path = scratch.0.join("stdout");
    let err_path = scratch.0.join("stderr");
    let mut cmd = Command::new(&exe);
    for key in DEVICE_KEYS {
        cmd.env_remove(key);
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .expect("run mrc_api_test");
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for mrc_api_test") {
            break Some(status);
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = std::fs::read_to_string(&out_path).unwrap_or_default();
    let stderr = std::fs::read_to_string(&err_path).unwrap_or_default();
    let Some(status) = status else {
        panic!("mrc_api_test still running after {DEADLINE:?}, killed:\n{stdout}{stderr}");
    };
    assert!(
        status.success(),
        "mrc_api_test failed ({status}):\n{stdout}{stderr}"
    );
    assert!(
        stdout.lines().any(|l| l.starts_with("mrc_api_test: ok (")),
        "no ok line:\n{stdout}{stderr}"
    );
    print!("{stdout}");
}
