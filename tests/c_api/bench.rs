//! The C benchmark of `examples/benchmark` (`mrc_bench`) for the tests that run it: built with
//! the system C compiler against `include/mrc.h`, linked with this build's `lib_mrc.so` and the
//! software verbs device's `libibverbs.so` (as the example's makefile links them), run with a
//! device configuration of the test's own.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use mrc_tests::text;

/// What the server prints once its device is open and it listens (the client may start).
pub const SERVER_READY: &str = "mrc_bench: server waiting on TCP port";

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The software device's configuration keys (docs/c-api.md) and the controller's profile
/// directory: removed from a C program's environment, so that only what a test sets counts.
const DEVICE_KEYS: [&str; 11] = [
    "MRC_CTL_DIR",
    "MRC_CONFIG",
    "MRC_DEVICE",
    "MRC_MEM_HOSTS",
    "MRC_MEM_PLANES",
    "MRC_EAL",
    "MRC_ADDR",
    "MRC_PLAN",
    "MRC_HOST",
    "MRC_SEED",
    "MRC_DEBUG",
];

/// A scratch directory, removed when dropped (also when the test fails).
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(mrc_tests::unique(tag));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The directory of `lib_mrc.so` and `libibverbs.so`, built for these tests into a target
/// directory of their own (`target/c-api/<profile>/`). `cargo test` builds neither where a C
/// program can link it (mrc-verbs has no test; mrc-capi's cdylib stays in `deps/`), and a
/// build into the shared target directory would rewrite `deps/lib_mrc.so` with other features
/// than the workspace's (a cdylib's file name carries no hash) while programs of other tests
/// use it. Cargo serialises the tests' builds on that directory; after the first they are
/// no-ops.
pub fn libraries() -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    // target/<profile>/deps/<test>-… → target/<profile>/ and target/
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>")
        .to_path_buf();
    let release = profile_dir.file_name().is_some_and(|n| n == "release");
    let target = profile_dir.parent().expect("target/").join("c-api");
    let mut cargo = Command::new(env!("CARGO"));
    cargo
        .current_dir(workspace())
        .args(["build", "--quiet", "-p", "mrc-capi", "-p", "mrc-verbs"])
        .arg("--target-dir")
        .arg(&target);
    if release {
        cargo.arg("--release");
    }
    let out = cargo.output().expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo build -p mrc-capi -p mrc-verbs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dir = target.join(if release { "release" } else { "debug" });
    for lib in ["lib_mrc.so", "libibverbs.so"] {
        assert!(
            dir.join(lib).exists(),
            "{lib} not in {} after cargo build",
            dir.display()
        );
    }
    dir
}

/// Why this machine cannot build a verbs program, if it cannot: no C compiler (`$CC`, else
/// `cc`) or no `<infiniband/verbs.h>` (libibverbs-dev).
pub fn cannot_build() -> Option<&'static str> {
    if !mrc_tests::runs(&compiler(), &["--version"]) {
        return Some("no C compiler (apt-get install gcc, or set CC)");
    }
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        return Some("no <infiniband/verbs.h> (apt-get install libibverbs-dev)");
    }
    None
}

fn compiler() -> String {
    std::env::var("CC").unwrap_or_else(|_| "cc".to_owned())
}

/// `mrc_bench` built in `dir` against `include/` and the libraries in `lib`, as the makefile
/// builds it (warnings are errors).
pub fn build(dir: &Path, lib: &Path) -> PathBuf {
    let src = workspace().join("examples/benchmark");
    compile(
        dir,
        lib,
        "mrc_bench",
        &["mrc_bench.c", "bench_run.c", "bench_net.c"].map(|f| src.join(f)),
    )
}

/// A C program of `sources` built into `dir/name` the way OCP's example makefile builds one:
/// against `include/` and rdma-core's headers, `lib_mrc.so` by path, `-L lib -libverbs` and
/// an rpath to `lib` (warnings are errors).
pub fn compile(dir: &Path, lib: &Path, name: &str, sources: &[PathBuf]) -> PathBuf {
    let exe = dir.join(name);
    let cc = compiler();
    let out = Command::new(&cc)
        .args(["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"])
        .arg("-I")
        .arg(workspace().join("include"))
        .arg("-o")
        .arg(&exe)
        .args(sources)
        .arg("-L")
        .arg(lib)
        .arg(format!("-Wl,-rpath,{}", lib.display()))
        .arg(lib.join("lib_mrc.so"))
        .args(["-libverbs", "-pthread"])
        .output()
        .unwrap_or_else(|e| panic!("{cc}: {e}"));
    let (so, se) = text(&out);
    assert!(out.status.success(), "{name} does not build:\n{so}{se}");
    exe
}

/// `mrc_bench` (or `prefix... mrc_bench`, e.g. `ip netns exec NS`) with the device
/// configuration `env` only, and `MRC_DEBUG=1` (lib_mrc.so says why a call failed).
pub fn command(prefix: &[&str], exe: &Path, env: &[(&str, &str)]) -> Command {
    let mut cmd = match prefix.split_first() {
        Some((first, rest)) => {
            let mut c = Command::new(first);
            c.args(rest).arg(exe);
            c
        }
        None => Command::new(exe),
    };
    for k in DEVICE_KEYS {
        cmd.env_remove(k);
    }
    // The program finds its libraries through its rpath, as a user's does: cargo runs tests
    // with build scripts' directories on LD_LIBRARY_PATH.
    cmd.env_remove("LD_LIBRARY_PATH");
    cmd.env("MRC_DEBUG", "1").envs(env.iter().copied());
    cmd
}

/// `mrc_ctl_evs ARGS` (examples/controller) on the default in-memory device with the profile
/// directory `ctl_dir`, `stdin` on its standard input; waits for it.
#[allow(dead_code)] // c_api_interop's; the other tests share this module
pub fn controller(exe: &Path, ctl_dir: &str, args: &[&str], stdin: &str) -> Output {
    use std::io::Write as _;
    let mut child = command(&[], exe, &[("MRC_CTL_DIR", ctl_dir)])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("mrc_ctl_evs: {e}"));
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes())
            .expect("the controller's stdin");
    }
    child.wait_with_output().expect("wait for mrc_ctl_evs")
}

/// A benchmark process whose stdout and stderr go to files of a scratch directory (read while
/// it runs); killed and reaped if still running when dropped.
#[derive(Debug)]
pub struct Bench {
    child: Option<Child>,
    out: PathBuf,
    err: PathBuf,
    what: String,
}

impl Bench {
    /// Starts `cmd` as `what` (`server`, `client`), its output in `dir`.
    pub fn spawn(cmd: &mut Command, dir: &Path, what: &str) -> Self {
        let (out, err) = (
            dir.join(format!("{what}.out")),
            dir.join(format!("{what}.err")),
        );
        let file = |p: &Path| std::fs::File::create(p).expect("an output file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file(&out))
            .stderr(file(&err))
            .spawn()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        Self {
            child: Some(child),
            out,
            err,
            what: what.to_owned(),
        }
    }

    /// Waits (at most `limit`) until its stdout has a line starting with `prefix`: true, or
    /// false if it ended first (its output says why).
    pub fn wait_for(&mut self, prefix: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        loop {
            let printed = std::fs::read_to_string(&self.out).unwrap_or_default();
            if printed.lines().any(|l| l.starts_with(prefix)) {
                return true;
            }
            let child = self.child.as_mut().expect("running");
            if child.try_wait().expect("wait").is_some() {
                return false;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let o = self.finish(Duration::from_secs(5));
                panic!("no {prefix:?} in {limit:?}: {}", shown(&self.what, &o));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Waits (at most `limit`, else kills it and panics with what it printed) for the exit;
    /// its status and output.
    pub fn finish(&mut self, limit: Duration) -> Output {
        let deadline = Instant::now() + limit;
        let mut child = self.child.take().expect("running");
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let status = child.wait().expect("wait");
                let o = self.output(status);
                panic!("did not finish in {limit:?}: {}", shown(&self.what, &o));
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.output(status)
    }

    fn output(&self, status: std::process::ExitStatus) -> Output {
        Output {
            status,
            stdout: std::fs::read(&self.out).unwrap_or_default(),
            stderr: std::fs::read(&self.err).unwrap_or_default(),
        }
    }
}

impl Drop for Bench {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// What a benchmark process printed, for messages.
pub fn shown(who: &str, o: &Output) -> String {
    let (so, se) = text(o);
    format!("{who} ({}):\n{so}{se}", o.status)
}

/// True when the benchmark failed because lib_mrc.so was built without DPDK.
pub fn no_dpdk(o: &Output) -> bool {
    text(o).1.contains("built without DPDK")
}

/// The client's result rows: (size, iterations), from the lines under its `#bytes` header.
pub fn rows(stdout: &str) -> Vec<(u64, u64)> {
    stdout
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("#bytes"))
        .skip(1)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            if w.len() != 5 {
                return None;
            }
            Some((w[0].parse().ok()?, w[1].parse().ok()?))
        })
        .collect()
}

/// The sizes of a sweep: `min`, `min * step`, ... and `max` last.
pub fn sweep(min: u64, max: u64, step: u64) -> Vec<u64> {
    let mut v = vec![min];
    while *v.last().expect("one size") < max {
        v.push((v.last().expect("one size") * step).min(max));
    }
    v
}

/// Asserts a run's outputs: both ends exited 0 and say so (with `check`, that every byte was
/// checked); the client printed a row per size with `iters` iterations; the server received
/// every Write (`iters` + `warmup` per size).
pub fn assert_run(
    client: &Output,
    server: &Output,
    sizes: &[u64],
    (iters, warmup): (u64, u64),
    check: bool,
) {
    let all = format!("{}\n{}", shown("client", client), shown("server", server));
    assert!(client.status.success(), "{all}");
    assert!(server.status.success(), "{all}");
    let ((cout, _), (sout, _)) = (text(client), text(server));
    let ok = if check {
        "mrc_bench: ok, every byte checked"
    } else {
        "mrc_bench: ok"
    };
    assert!(cout.lines().any(|l| l == ok), "client: {all}");
    assert!(sout.lines().any(|l| l == ok), "server: {all}");
    let want: Vec<(u64, u64)> = sizes.iter().map(|&s| (s, iters)).collect();
    assert_eq!(rows(&cout), want, "client rows: {all}");
    let checked = if check { ", every byte checked" } else { "" };
    for s in sizes {
        let line = format!("mrc_bench: size {s}: {iters} Writes received{checked}");
        assert!(sout.lines().any(|l| l == line), "no {line:?}: {all}");
    }
    let writes = sizes.len() as u64 * (iters + warmup);
    let bytes: u64 = sizes.iter().map(|s| s * (iters + warmup)).sum();
    let total = format!("mrc_bench: {writes} Writes, {bytes} bytes received");
    assert!(sout.lines().any(|l| l == total), "no {total:?}: {all}");
}
