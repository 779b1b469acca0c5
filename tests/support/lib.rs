//! Shared helpers for the cross-crate integration tests: what a test that drives other
//! processes needs (prerequisites that skip or fail, unique names, free ports, a child
//! process killed if the test ends first, DPDK runtime directories removed).

pub mod kernel;
pub mod prometheus;
pub mod trimmer;
pub mod vm;

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

// The skip rule (skip, or fail under `MRC_REQUIRE_ALL=1`; recorded for scripts/test.sh).
pub use mrc_skip::{is_root, require_all, runs, skip, skip_lacking};

/// The workspace root.
pub fn workspace() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// A name no other run uses (namespace prefixes, DPDK file prefixes, memif sockets).
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{tag}{}x{}", std::process::id(), nanos % 1_000_000)
}

/// The EAL arguments of one end of a two-plane memif link on the abstract socket `socket`:
/// ports `net_memif0` and `net_memif1` (planes 0 and 1) in `role` (`server` or `client`),
/// no hugepages, file prefix `prefix`, the EAL thread on both CPUs when there are two.
/// `bsize=9216`: every frame fits one memif buffer (DPDK 22.11's memif corrupts frames that
/// span buffers; dpdk-bindings/tests/dpdk_memif.rs).
pub fn memif_eal(prefix: &str, role: &str, socket: &str) -> String {
    let cores = if std::thread::available_parallelism().map_or(1, usize::from) >= 2 {
        "--lcores=0@(0-1)"
    } else {
        "--lcores=0@0"
    };
    let vdev = |p: u8| {
        format!(
            "--vdev=net_memif{p},role={role},id={p},socket={socket},socket-abstract=yes,bsize=9216"
        )
    };
    format!(
        "--no-huge --no-pci --no-shconf --no-telemetry -m 512 {cores} --log-level=lib.eal:error \
         --file-prefix {prefix} {} {}",
        vdev(0),
        vdev(1)
    )
}

/// A TCP port free right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// A child process, killed (and reaped) if it is still running when dropped.
#[derive(Debug)]
pub struct Proc {
    child: Option<Child>,
    what: String,
}

impl Proc {
    /// Starts `cmd` with its stdout and stderr captured.
    pub fn spawn(cmd: &mut Command, what: &str) -> Self {
        let child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        Self {
            child: Some(child),
            what: what.to_owned(),
        }
    }

    /// Sends it SIGINT (Ctrl-C): `mrc-perf` ends a timed run there, with its report.
    pub fn interrupt(&self) {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let ok = Command::new("kill")
            .args(["-INT", &pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "{}: kill -INT {pid} failed", self.what);
    }

    /// Waits at most `limit` for the exit (else kills it and panics with what it printed).
    pub fn finish(&mut self, limit: Duration) -> Output {
        let deadline = Instant::now() + limit;
        let child = self.child.as_mut().expect("running");
        while child.try_wait().expect("wait").is_none() {
            if Instant::now() > deadline {
                let _ = child.kill();
                let out = self.child.take().expect("running").wait_with_output();
                panic!("{}: did not finish in {limit:?}: {out:?}", self.what);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.child
            .take()
            .expect("running")
            .wait_with_output()
            .expect("output")
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A child the test reads from itself (its pipes taken), killed and reaped however the test
/// ends.
#[derive(Debug)]
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// stdout then stderr of an output, as text.
pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// Removes, when dropped, the DPDK runtime directories (`/var/run/dpdk/<prefix>*`, and under
/// `$XDG_RUNTIME_DIR/dpdk` for a user) of the EAL file prefixes starting with `prefix`.
#[derive(Debug)]
pub struct DpdkRuntimeDirs(pub String);

impl Drop for DpdkRuntimeDirs {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let user = std::env::var("XDG_RUNTIME_DIR").map(|d| format!("{d}/dpdk"));
        for base in std::iter::once("/var/run/dpdk".to_owned()).chain(user) {
            let Ok(dir) = std::fs::read_dir(Path::new(&base)) else {
                continue;
            };
            for e in dir.flatten() {
                if e.file_name().to_string_lossy().starts_with(&self.0) {
                    let _ = std::fs::remove_dir_all(e.path());
                }
            }
        }
    }
}

/// Run `bin args` as a user would, with `RUST_BACKTRACE=1`, and assert it refuses: exit
/// status 2, exactly one line on stderr that mentions `names` (what to change), nothing that
/// looks like a panic or a backtrace. Returns that line.
pub fn assert_refused(bin: &str, args: &[&str], names: &str) -> String {
    let out = Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{bin} runs: {e}"));
    let (stdout, stderr) = text(&out);
    let shown = format!("{bin} {}", args.join(" "));
    assert_eq!(
        out.status.code(),
        Some(2),
        "{shown}: exit status 2 for a refusal\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    for bad in ["panicked", "stack backtrace", "RUST_BACKTRACE", "Error: "] {
        assert!(
            !stderr.contains(bad),
            "{shown}: {bad:?} on stderr:\n{stderr}"
        );
    }
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(
        lines.len(),
        1,
        "{shown}: one line on stderr, got:\n{stderr}"
    );
    assert!(
        lines[0].contains(names),
        "{shown}: the refusal names {names:?}: {}",
        lines[0]
    );
    lines[0].to_owned()
}

/// Run `bin args | head -1` (through `sh`, with `RUST_BACKTRACE=1`) and assert the tool
/// neither panics nor complains when its reader goes away: its exit status is `0` or
/// `expected`, its stderr free of panics. Returns the one line `head` printed.
pub fn assert_head_one(bin: &str, args: &[&str], expected: i32) -> String {
    let quoted: Vec<String> = std::iter::once(bin)
        .chain(args.iter().copied())
        .map(|a| format!("'{}'", a.replace('\'', r"'\''")))
        .collect();
    let script = format!(
        "set -o pipefail; {} 2>\"$ERR\" | head -1; echo \"status ${{PIPESTATUS[0]}}\"",
        quoted.join(" ")
    );
    let err = std::env::temp_dir().join(unique("head-err"));
    let out = Command::new("bash")
        .args(["-c", &script])
        .env("RUST_BACKTRACE", "1")
        .env("ERR", &err)
        .output()
        .expect("bash runs");
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let _ = std::fs::remove_file(&err);
    let (stdout, _) = text(&out);
    let shown = format!("{bin} {} | head -1", args.join(" "));
    for bad in ["panicked", "stack backtrace", "Broken pipe", "broken pipe"] {
        assert!(
            !stderr.contains(bad),
            "{shown}: {bad:?} on stderr:\n{stderr}"
        );
    }
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default().to_owned();
    let status = lines.next().unwrap_or_default();
    assert!(
        status == "status 0" || status == format!("status {expected}"),
        "{shown}: {status} (stderr:\n{stderr})"
    );
    first
}

/// Run `bin args >/dev/full` and assert one line on stderr about stdout, exit status 2, no
/// panic.
pub fn assert_full_stdout(bin: &str, args: &[&str]) {
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .expect("/dev/full");
    let out = Command::new(bin)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .stdout(full)
        .output()
        .expect("runs");
    let (_, stderr) = text(&out);
    let shown = format!("{bin} {} >/dev/full", args.join(" "));
    assert_eq!(out.status.code(), Some(2), "{shown}: exit 2\n{stderr}");
    assert!(!stderr.contains("panicked"), "{shown}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("stdout")).collect();
    assert_eq!(lines.len(), 1, "{shown}: one line about stdout:\n{stderr}");
}

/// Run `bin args`: its exit status (-1 if killed), stdout and stderr.
pub fn run_tool(bin: &str, args: &[&str]) -> (i32, String, String) {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{bin} runs: {e}"));
    let (stdout, stderr) = text(&out);
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

/// A file in the temporary folder, named uniquely after `name`, removed when dropped.
#[derive(Debug)]
pub struct TempFile(pub std::path::PathBuf);

impl TempFile {
    pub fn new(name: &str) -> Self {
        Self(std::env::temp_dir().join(unique(&format!("mrc-{name}-"))))
    }

    pub fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }

    /// Its contents as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(&self.0).expect("the file was written"))
            .expect("valid JSON")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The workspace's apps built with the `mpi` feature (rsmpi over Open MPI), `mrc-coll` and
/// `mrc-perf`, in a target directory of their own next to the calling test's build
/// (`target/mpi`): the directory their binaries are in. `manifest_dir` and `cargo` are the
/// calling crate's `CARGO_MANIFEST_DIR` and `CARGO`. Every test that needs them shares one
/// build (cargo locks the directory; the second caller finds it done).
pub fn mpi_build(manifest_dir: &str, cargo: &str) -> Result<std::path::PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    // target/<profile>/deps/<test>-… → target/
    let target = exe
        .ancestors()
        .nth(3)
        .ok_or("no target directory")?
        .join("mpi");
    let root = Path::new(manifest_dir).parent().ok_or("no workspace")?;
    let out = Command::new(cargo)
        .current_dir(root)
        .args([
            "build",
            "--quiet",
            "-p",
            "mrc-apps",
            "--features",
            "mpi",
            "--bin",
            "mrc-coll",
            "--bin",
            "mrc-perf",
        ])
        .arg("--target-dir")
        .arg(&target)
        .output()
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "building the apps with the mpi feature failed (libopenmpi-dev and libclang-dev?):\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(target.join("debug"))
}

/// `mpirun` as the tests run it: as root, more ranks than cores, MPI's own traffic on loopback.
pub fn mpirun() -> Command {
    let mut c = Command::new("mpirun");
    c.args(["--allow-run-as-root", "--oversubscribe"]).args([
        "--mca",
        "btl",
        "self,tcp",
        "--mca",
        "btl_tcp_if_include",
        "lo",
    ]);
    c
}

/// Why this machine cannot run `mpirun`, if it cannot.
pub fn mpirun_missing() -> Option<&'static str> {
    (!runs("mpirun", &["--version"])).then_some("no mpirun (apt-get install openmpi-bin)")
}

/// One test of a file at a time (each is several busy processes on a small machine): hold the
/// guard of the file's `static ONE: Mutex<()>` while the test runs; a test that failed with
/// it leaves it usable.
pub fn one_at_a_time(m: &'static std::sync::Mutex<()>) -> std::sync::MutexGuard<'static, ()> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
