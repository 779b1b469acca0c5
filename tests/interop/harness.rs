//! The pieces of the kernel-interop test: the tools it drives (`scripts/fabric.sh`,
//! `mrc-fabric`, `mrc-perf`), the fabric of network namespaces as a guard that tears it down
//! on every exit path, the switches' interface counters, and `mrc-perf` processes inside the
//! host namespaces.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use mrc_tests::{DpdkRuntimeDirs, Proc, text};
use serde_json::Value;

pub use mrc_tests::{runs, skip, unique};

/// The workspace root.
pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The binaries of mrc-apps, in this test's target directory.
#[derive(Debug, Clone)]
pub struct Tools {
    pub fabric_sh: PathBuf,
    pub mrc_fabric: PathBuf,
    pub mrc_perf: PathBuf,
}

impl Tools {
    pub fn find() -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        // target/<profile>/deps/kernel_interop-… → target/<profile>/
        let dir = exe
            .parent()
            .and_then(Path::parent)
            .ok_or("no target directory")?
            .to_path_buf();
        let (fabric, perf) = (dir.join("mrc-fabric"), dir.join("mrc-perf"));
        // `cargo test --workspace` builds them first; alone (`cargo test -p mrc-tests`) they
        // are built here if missing (build mrc-apps first when they may be stale).
        if !(fabric.exists() && perf.exists()) {
            let target = dir.parent().ok_or("no target directory")?;
            let ok = Command::new(env!("CARGO"))
                .current_dir(workspace())
                .args([
                    "build",
                    "-p",
                    "mrc-apps",
                    "--bin",
                    "mrc-fabric",
                    "--bin",
                    "mrc-perf",
                ])
                .env("CARGO_TARGET_DIR", target)
                .status()
                .is_ok_and(|s| s.success());
            if !(ok && fabric.exists() && perf.exists()) {
                return Err(format!("mrc-fabric and mrc-perf not in {}", dir.display()));
            }
        }
        Ok(Self {
            fabric_sh: workspace().join("scripts/fabric.sh"),
            mrc_fabric: fabric,
            mrc_perf: perf,
        })
    }
}

fn output_ok(cmd: &mut Command, what: &str) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Counters of one switch interface (/sys/class/net/IF/statistics and the interface's IPv6
/// counters in /proc/net/dev_snmp6/IF).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct IfCounters {
    pub rx_packets: u64,
    pub tx_packets: u64,
    pub rx_dropped: u64,
    pub tx_dropped: u64,
    /// IPv6 packets routed out of this interface (`Ip6OutForwDatagrams`): what the switch
    /// forwarded, without the neighbour discovery it sent itself.
    pub forwarded: u64,
    /// Packets in on this interface with no usable route (`Ip6InNoRoutes`): what a dead link
    /// behind it blackholed.
    pub no_route: u64,
}

/// Every switch interface's counters, by (node, interface).
pub type Counters = HashMap<(String, String), IfCounters>;

/// A check of what a fabric test needs: why it is missing, and a command that must run.
pub type Check<'a> = (&'a str, &'a str, &'a [&'a str]);

/// `Some` if root, iproute2 with netns, bash, then every one of `extra`, and the tools are
/// there (else skipped, or failed under MRC_REQUIRE_ALL=1), and the kernel has SRv6 (else
/// skipped whatever MRC_REQUIRE_ALL says: no package brings it).
pub fn prerequisites(test: &str, extra: &[Check<'_>]) -> Option<Tools> {
    let base: [Check<'_>; 3] = [
        ("needs root", "sh", &["-c", "test \"$(id -u)\" -eq 0"]),
        (
            "needs iproute2 with netns (install iproute2)",
            "ip",
            &["netns", "list"],
        ),
        ("needs bash", "bash", &["-c", "true"]),
    ];
    for &(why, cmd, args) in base.iter().chain(extra) {
        if !runs(cmd, args) {
            skip(test, why);
            return None;
        }
    }
    if !mrc_tests::has_kernel_srv6(test) {
        return None;
    }
    match Tools::find() {
        Ok(t) => Some(t),
        Err(e) => {
            skip(test, &e);
            None
        }
    }
}

/// The plan's fabric in namespaces `<prefix>-<node>`; torn down when dropped.
#[derive(Debug)]
pub struct Fabric {
    pub tools: Tools,
    pub plan: String,
    pub prefix: String,
}

impl Fabric {
    pub fn up(tools: &Tools, plan: &str, prefix: &str) -> Self {
        let f = Self {
            tools: tools.clone(),
            plan: plan.to_owned(),
            prefix: prefix.to_owned(),
        };
        // The guard exists before the first namespace does: a half-built fabric goes too.
        f.script(&["up"]);
        f
    }

    /// `scripts/fabric.sh CMD PLAN PREFIX ARGS...`, which must succeed; its stdout.
    pub fn script(&self, args: &[&str]) -> String {
        let (cmd, rest) = args.split_first().expect("a command");
        output_ok(
            Command::new("bash")
                .arg(&self.tools.fabric_sh)
                .args([*cmd, &self.plan, &self.prefix])
                .args(rest)
                .env("MRC_FABRIC", &self.tools.mrc_fabric),
            &format!("fabric.sh {}", args.join(" ")),
        )
    }

    pub fn ns(&self, node: &str) -> String {
        format!("{}-{node}", self.prefix)
    }

    pub fn counters(&self) -> Counters {
        self.script(&["counters"])
            .lines()
            .filter_map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                let n = |i: usize| w.get(i)?.parse::<u64>().ok();
                Some((
                    ((*w.first()?).to_owned(), (*w.get(1)?).to_owned()),
                    IfCounters {
                        rx_packets: n(2)?,
                        tx_packets: n(3)?,
                        rx_dropped: n(4)?,
                        tx_dropped: n(5)?,
                        forwarded: n(6)?,
                        no_route: n(7)?,
                    },
                ))
            })
            .collect()
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(&self.tools.fabric_sh)
            .args(["down", &self.plan, &self.prefix])
            .env("MRC_FABRIC", &self.tools.mrc_fabric)
            .stdout(Stdio::null())
            .status();
    }
}

/// `after - before` of one counter of one interface.
pub fn delta(
    before: &Counters,
    after: &Counters,
    node: &str,
    iface: &str,
    counter: fn(&IfCounters) -> u64,
) -> u64 {
    let key = (node.to_owned(), iface.to_owned());
    let get = |c: &Counters| {
        c.get(&key)
            .map_or_else(|| panic!("no counters for {node} {iface}"), counter)
    };
    get(after) - get(before)
}

/// One `mrc-perf` process in a host namespace; killed if still running when dropped, its DPDK
/// runtime directory removed.
#[derive(Debug)]
pub struct Perf {
    proc: Proc,
    pub json: PathBuf,
    _dirs: DpdkRuntimeDirs,
}

/// The EAL arguments of a host's two af_packet ports (one per plane) on its veths `p0`, `p1`.
pub fn eal(file_prefix: &str, planes: u8) -> String {
    let cores = if std::thread::available_parallelism().map_or(1, usize::from) >= 2 {
        "--lcores=0@(0-1)"
    } else {
        "--lcores=0@0"
    };
    // af_packet: blocksz a multiple of framesz, the mbuf data room (9216) >= framesz - 32.
    let vdevs: Vec<String> = (0..planes)
        .map(|p| {
            format!("--vdev=net_af_packet{p},iface=p{p},blocksz=4096,framesz=4096,framecnt=1024")
        })
        .collect();
    format!(
        "--no-huge --no-pci --no-shconf --no-telemetry -m 512 {cores} --log-level=lib.eal:error \
         --file-prefix {file_prefix} {}",
        vdevs.join(" ")
    )
}

impl Perf {
    /// `mrc-perf ARGS --out_json_file JSON` in namespace `ns`.
    pub fn spawn(
        tools: &Tools,
        ns: &str,
        args: &[String],
        file_prefix: &str,
        json: PathBuf,
    ) -> Self {
        let proc = Proc::spawn(
            Command::new("ip")
                .args(["netns", "exec", ns])
                .arg(&tools.mrc_perf)
                .args(args)
                .arg("--out_json_file")
                .arg(&json),
            &format!("mrc-perf in {ns}"),
        );
        Self {
            proc,
            json,
            _dirs: DpdkRuntimeDirs(file_prefix.to_owned()),
        }
    }

    /// Waits (at most `limit`) for the exit; panics with the output unless it succeeded. The
    /// JSON report it wrote.
    pub fn finish(&mut self, limit: Duration, what: &str) -> (Output, Value) {
        let out = self.proc.finish(limit);
        let (so, se) = text(&out);
        assert!(out.status.success(), "{what}: {}\n{so}\n{se}", out.status);
        let doc = std::fs::read_to_string(&self.json)
            .unwrap_or_else(|e| panic!("{what}: no JSON report: {e}\n{so}\n{se}"));
        let _ = std::fs::remove_file(&self.json);
        (
            out,
            serde_json::from_str(&doc).expect("the JSON report parses"),
        )
    }
}

impl Drop for Perf {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.json);
    }
}

/// A `dumpcap` capture on one interface of one namespace, into a pcapng file removed on drop.
#[derive(Debug)]
pub struct Capture {
    child: Option<Child>,
    pub file: PathBuf,
    pub what: String,
}

impl Capture {
    /// Starts capturing `filter` (a capture filter) on `iface` in `ns`, at most `count` packets
    /// or `limit`; returns once dumpcap writes its file (packets sent after that are seen).
    pub fn start(ns: &str, iface: &str, filter: &str, count: u32, limit: Duration) -> Self {
        let file =
            std::env::temp_dir().join(format!("{}.pcapng", unique(&format!("{ns}-{iface}-"))));
        let mut child = Command::new("ip")
            .args([
                "netns", "exec", ns, "dumpcap", "-q", "-i", iface, "-f", filter,
            ])
            .args(["-c", &count.to_string()])
            .args(["-a", &format!("duration:{}", limit.as_secs().max(1))])
            .arg("-w")
            .arg(&file)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dumpcap starts");
        let what = format!("{ns} {iface}");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead as _;
            let mut said = Vec::new();
            for line in std::io::BufReader::new(stderr)
                .lines()
                .map_while(Result::ok)
            {
                let ready = line.starts_with("File:");
                said.push(line);
                if ready {
                    let _ = tx.send(Ok(()));
                }
            }
            let _ = tx.send(Err(said.join("\n")));
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(Ok(())) => {}
            Ok(Err(said)) => panic!("dumpcap on {what} did not start: {said}"),
            Err(e) => panic!("dumpcap on {what} did not start in 30 s: {e}"),
        }
        Self {
            child: Some(child),
            file,
            what,
        }
    }

    /// Waits for dumpcap to stop (its count or its time limit), then its file.
    pub fn finish(&mut self) -> &Path {
        if let Some(mut c) = self.child.take() {
            let status = c.wait().expect("dumpcap");
            assert!(status.success(), "dumpcap on {}: {status}", self.what);
        }
        &self.file
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_file(&self.file);
    }
}

/// `tshark` with our MRC dissector on `file`: per frame, the `fields` asked (first occurrence
/// of each: the outer IPv6 header's, for IPv6 fields), only frames that match `filter`.
pub fn tshark_fields(file: &Path, filter: &str, fields: &[&str]) -> Vec<Vec<String>> {
    let lua = workspace().join("tools/wireshark/mrc.lua");
    let mut cmd = Command::new("tshark");
    cmd.arg("-r")
        .arg(file)
        .arg("-X")
        .arg(format!("lua_script:{}", lua.display()))
        .args(["-o", "udp.try_heuristic_first:TRUE", "-Y", filter])
        .args(["-T", "fields", "-E", "occurrence=f", "-E", "separator=|"]);
    for f in fields {
        cmd.args(["-e", f]);
    }
    output_ok(&mut cmd, "tshark")
        .lines()
        .map(|l| l.split('|').map(str::to_owned).collect())
        .collect()
}
