//! The pieces of the kernel-interop test: the tools it drives (`scripts/fabric.sh`,
//! `mrc-fabric`, `mrc-perf`), the fabric of network namespaces as a guard that tears it down
//! on every exit path, the switches' interface counters, and `mrc-perf` processes inside the
//! host namespaces.
//!
//! The switches run in this machine's kernel when it has SRv6, else in the kernel VM
//! (`mrc_tests::kernel`): then the hosts' namespaces (and their DPDK ports) stay here, the
//! switches' are in the guest, and each host link crosses a TAP between the two
//! (`mrc-fabric linux --part`); every command on a switch goes to the guest.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use mrc_tests::kernel::{self, Feature, Kernel};
use mrc_tests::vm::{self, Vm};
use mrc_tests::{DpdkRuntimeDirs, Proc, text};
use serde_json::Value;

pub use mrc_tests::{runs, skip, unique};

/// A deadline for what crosses the kernel fabric: `base` on real hardware, longer when its
/// switches run emulated (`mrc_tests::kernel::deadline`).
pub fn deadline(base: Duration) -> Duration {
    kernel::deadline(base)
}

pub use mrc_tests::workspace;

/// mrc-perf's pacing where the switches run emulated: 40 Mb/s per QP, about a third of what one
/// emulated CPU forwards through the small plan (~7 000 frames/s both ways), so the guest
/// keeps time for the test's own commands (a read of every switch's counters) and its queues
/// stay short; none on real hardware.
pub fn pacing() -> &'static [&'static str] {
    if kernel::emulated() {
        &["--rate_limit", "40", "--rate_units", "M"]
    } else {
        &[]
    }
}

/// The binaries of mrc-apps, in this test's target directory, and the kernel the switches
/// run in.
#[derive(Debug, Clone)]
pub struct Tools {
    pub fabric_sh: PathBuf,
    pub mrc_fabric: PathBuf,
    pub mrc_perf: PathBuf,
    pub switches: Kernel,
}

impl Tools {
    pub fn find(switches: Kernel) -> Result<Self, String> {
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
            switches,
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

/// `Some` if root, iproute2 with netns, bash, then every one of `extra`, the tools, and a
/// kernel with SRv6 for the switches (this one, or the VM's) are there; else skipped, or
/// failed under MRC_REQUIRE_ALL=1.
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
    let switches = kernel::kernel_for(test, Feature::Srv6)?;
    match Tools::find(switches) {
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
    /// With the switches in the VM: its host links, this fabric's until dropped (after the
    /// teardown: fields drop after `Drop::drop`).
    _links: Option<std::sync::MutexGuard<'static, ()>>,
}

/// The bridges a split fabric's host links join: `br<K>` in the VM's namespace here, `b<K>` in
/// the guest (`scripts/kernel-vm.sh`, `tests/vm/agent.py`).
const HOST_SIDE: [&str; 4] = ["--part", "hosts", "--attach", "br"];
const SWITCH_SIDE: [&str; 4] = ["--part", "switches", "--attach", "b"];

impl Fabric {
    pub fn up(tools: &Tools, plan: &str, prefix: &str) -> Self {
        let links = match tools.switches {
            Kernel::Vm(vm) => Some(vm.host_links()),
            Kernel::Here => None,
        };
        let f = Self {
            tools: tools.clone(),
            plan: plan.to_owned(),
            prefix: prefix.to_owned(),
            _links: links,
        };
        if let Kernel::Vm(_) = tools.switches {
            let plan = mrc_srv6::plan::Plan::load_or_builtin(plan).expect("the plan loads");
            let links = plan.host_count() * u32::from(plan.planes());
            assert!(
                links <= vm::LINKS,
                "plan {} has {links} host links; the kernel VM has {}",
                plan.name(),
                vm::LINKS
            );
        }
        // The guard exists before the first namespace does: a half-built fabric goes too.
        f.script(&["up"]);
        f
    }

    /// `scripts/fabric.sh CMD PLAN PREFIX ARGS...`, which must succeed; its stdout. With the
    /// switches in the VM: `up` and `down` build or remove both sides, `mgmt` and `dpdkhost`
    /// run here (hosts), the rest in the guest (switches).
    pub fn script(&self, args: &[&str]) -> String {
        let (cmd, rest) = args.split_first().expect("a command");
        let Kernel::Vm(vm) = self.tools.switches else {
            return self.script_here(None, cmd, rest);
        };
        match *cmd {
            "up" | "down" | "routes" => {
                let mut out = self.script_here(Some(vm), cmd, &HOST_SIDE);
                out += &self.script_in_guest(vm, cmd, &SWITCH_SIDE);
                out
            }
            "counters" => self.script_in_guest(vm, cmd, &[]),
            "mgmt" | "dpdkhost" => self.script_here(None, cmd, rest),
            _ => self.script_in_guest(vm, cmd, rest),
        }
    }

    fn fabric_sh(&self, cmd: &str, rest: &[&str]) -> Vec<String> {
        let mut argv = vec![
            "bash".to_owned(),
            self.tools.fabric_sh.to_string_lossy().into_owned(),
            cmd.to_owned(),
            self.plan.clone(),
            self.prefix.clone(),
        ];
        argv.extend(rest.iter().map(|a| (*a).to_owned()));
        argv
    }

    /// fabric.sh here; `in_vm_ns`: in the VM's network namespace (where its bridges are).
    fn script_here(&self, in_vm_ns: Option<&Vm>, cmd: &str, rest: &[&str]) -> String {
        let argv = self.fabric_sh(cmd, rest);
        let mut c = if let Some(vm) = in_vm_ns {
            let mut c = Command::new("nsenter");
            c.arg(format!("--net={}", vm.netns().expect("the VM runs")));
            c.args(&argv);
            c
        } else {
            let mut c = Command::new(&argv[0]);
            c.args(&argv[1..]);
            c
        };
        c.env("MRC_FABRIC", &self.tools.mrc_fabric);
        let what = format!("fabric.sh {cmd} {}", rest.join(" "));
        if cmd == "down" {
            // Teardown never fails a test (it also runs on the way out of a failed one).
            let _ = c.stdout(Stdio::null()).status();
            return String::new();
        }
        output_ok(&mut c, &what)
    }

    fn script_in_guest(&self, vm: &Vm, cmd: &str, rest: &[&str]) -> String {
        let argv = self.fabric_sh(cmd, rest);
        let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
        let fabric = self.tools.mrc_fabric.to_string_lossy();
        let out = vm.run(
            &argv,
            &[("MRC_FABRIC", &fabric)],
            None,
            deadline(Duration::from_mins(1)),
        );
        let what = format!("fabric.sh {cmd} {} (in the kernel VM)", rest.join(" "));
        match out {
            Ok(o) if o.success() || cmd == "down" => o.stdout,
            Ok(o) => panic!("{what}: {:?}\n{}", o.rc, o.stderr),
            Err(e) if cmd == "down" => {
                eprintln!("{what}: {e}");
                String::new()
            }
            Err(e) => panic!("{what}: {e}"),
        }
    }

    /// Runs `argv` where the switches are (here, or in the guest), with `env`: its stdout, or
    /// why it failed.
    pub fn try_on_switches(&self, argv: &[&str], env: &[(&str, &str)]) -> Result<String, String> {
        let (rc, stdout, stderr) = match self.tools.switches {
            Kernel::Here => {
                let o = Command::new(argv[0])
                    .args(&argv[1..])
                    .envs(env.iter().copied())
                    .output()
                    .map_err(|e| e.to_string())?;
                let (so, se) = text(&o);
                (o.status.code(), so, se)
            }
            Kernel::Vm(vm) => {
                let o = vm.run(argv, env, None, deadline(Duration::from_mins(1)))?;
                (o.rc, o.stdout, o.stderr)
            }
        };
        if rc == Some(0) {
            Ok(stdout)
        } else {
            Err(format!("exit status {rc:?}: {stderr}"))
        }
    }

    /// A directory for files both this process and the switches' side read and write.
    pub fn scratch(&self) -> PathBuf {
        match self.tools.switches {
            Kernel::Here => std::env::temp_dir(),
            Kernel::Vm(vm) => vm.share().to_path_buf(),
        }
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
        self.script(&["down"]);
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

    /// Ends its timed run now (SIGINT: the senders stop, both ends report what ran).
    pub fn interrupt(&self) {
        self.proc.interrupt();
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

/// A `dumpcap` capture on one interface of one switch's namespace (here, or in the guest),
/// into a pcapng file removed on drop.
#[derive(Debug)]
pub struct Capture {
    running: Option<Running>,
    pub file: PathBuf,
    pub what: String,
}

#[derive(Debug)]
enum Running {
    Here(Child),
    Guest(&'static Vm, u64),
}

impl Capture {
    /// Starts capturing `filter` (a capture filter) on `iface` in `ns`, at most `count` packets
    /// or `limit`; returns once dumpcap writes its file (packets sent after that are seen).
    pub fn start(
        f: &Fabric,
        ns: &str,
        iface: &str,
        filter: &str,
        count: u32,
        limit: Duration,
    ) -> Self {
        let file = f
            .scratch()
            .join(format!("{}.pcapng", unique(&format!("{ns}-{iface}-"))));
        let what = format!("{ns} {iface}");
        let (count, secs) = (
            count.to_string(),
            format!("duration:{}", limit.as_secs().max(1)),
        );
        let file_s = file.to_string_lossy().into_owned();
        let argv = [
            "ip", "netns", "exec", ns, "dumpcap", "-q", "-i", iface, "-f", filter, "-c", &count,
            "-a", &secs, "-w", &file_s,
        ];
        let running = match f.tools.switches {
            Kernel::Here => Running::Here(Self::start_here(&argv, &what)),
            Kernel::Vm(vm) => {
                let h = vm
                    .spawn(&argv, &[], "File:", deadline(Duration::from_secs(30)))
                    .unwrap_or_else(|e| panic!("dumpcap on {what} did not start: {e}"));
                Running::Guest(vm, h)
            }
        };
        Self {
            running: Some(running),
            file,
            what,
        }
    }

    fn start_here(argv: &[&str], what: &str) -> Child {
        let mut child = Command::new(argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("dumpcap starts");
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
            Ok(Ok(())) => child,
            Ok(Err(said)) => panic!("dumpcap on {what} did not start: {said}"),
            Err(e) => panic!("dumpcap on {what} did not start in 30 s: {e}"),
        }
    }

    /// Waits for dumpcap to stop (its count or its time limit), then its file.
    pub fn finish(&mut self) -> &Path {
        match self.running.take() {
            Some(Running::Here(mut c)) => {
                let status = c.wait().expect("dumpcap");
                assert!(status.success(), "dumpcap on {}: {status}", self.what);
            }
            Some(Running::Guest(vm, h)) => {
                let o = vm
                    .wait(h, deadline(Duration::from_secs(90)))
                    .unwrap_or_else(|e| panic!("dumpcap on {}: {e}", self.what));
                assert!(
                    o.success(),
                    "dumpcap on {}: {:?} {}",
                    self.what,
                    o.rc,
                    o.stderr
                );
            }
            None => {}
        }
        &self.file
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        match self.running.take() {
            Some(Running::Here(mut c)) => {
                let _ = c.kill();
                let _ = c.wait();
            }
            Some(Running::Guest(vm, h)) => {
                let _ = vm.kill(h);
            }
            None => {}
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
