//! The Linux kernel as an oracle for `mrc_srv6::plan`: the emitted configuration turns network
//! namespaces into the small plan's uN switches (`seg6local End flavors next-csid`), scapy
//! sends IPv6-in-IPv6 + UDP packets whose outer DA is the plan's uSID path, and:
//! - each path's packets cross exactly the spine the plan says (per-interface IPv6 counters
//!   of the spines and of the destination T0's uplinks) and arrive at the destination host's
//!   UDP socket (after the host's End.DT6 decapsulates them);
//! - with one T0–T1 link down, exactly the paths through it blackhole; after the link is up
//!   again and the routes are re-applied, every path works.
//!
//! Needs root, `ip` and /usr/bin/python3 with scapy: otherwise skipped with a message, or
//! failed under `MRC_REQUIRE_ALL=1`. The hosts here are kernel hosts (End.DT6), so where this
//! machine's kernel lacks SRv6 each test runs whole in the kernel VM's guest
//! (`mrc_tests::kernel`). Namespaces carry a unique prefix and a Drop guard removes them, also
//! when the test fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use std::time::Duration;

use mrc_srv6::plan::{HostId, NodeId, Path, Plan, SwitchId};
use mrc_tests::kernel::{self, Feature, Kernel};
use mrc_tests::trimmer::{self, Trimmer};

const PYTHON: &str = "/usr/bin/python3";
const UDP_PORT: u16 = 4791;

/// Receiver, run in the destination host's namespace: counts datagrams per payload tag (the
/// payload's first word) until it reads `END` (or a deadline), then prints `tag=count` lines
/// and `done`.
const RECEIVER: &str = r#"
import select, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
counts, end = {}, time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    if not select.select([s], [], [], 0.05)[0]:
        continue
    tag = s.recv(65536).decode(errors="replace").split(" ", 1)[0]
    if tag == "END":
        break
    counts[tag] = counts.get(tag, 0) + 1
for tag, n in sorted(counts.items()):
    print(f"{tag}={n}")
print("done", flush=True)
"#;

/// Sender, run in the source host's namespace and kept for the fabric's life (scapy takes 20 s
/// to import in an emulated guest): for each line `src dst port iface,dst_mac,da,tag,count...`
/// on stdin, Ether / IPv6 (DA = uSID path) / IPv6 (NIC to NIC) / UDP / tag for each batch, the
/// last one after a short pause so that it arrives last; then `sent`.
const SENDER: &str = r#"
import logging, sys, time
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import Ether, IPv6, UDP, Raw, sendp
print("ready", flush=True)
for line in sys.stdin:
    src, dst, port, *batches = line.split()
    port, batches = int(port), [b.split(",") for b in batches]
    for i, (iface, mac, da, tag, n) in enumerate(batches):
        if i == len(batches) - 1:
            time.sleep(0.2)
        pkt = (Ether(dst=mac) / IPv6(src=src, dst=da, hlim=64) / IPv6(src=src, dst=dst)
               / UDP(sport=port, dport=port) / Raw(tag.encode()))
        sendp(pkt, iface=iface, count=int(n), verbose=False)
    print("sent", flush=True)
"#;

/// A [`SENDER`] process in one host's namespace.
struct Sender {
    stdin: std::process::ChildStdin,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
    _child: KillOnDrop,
}

impl Sender {
    fn start(ns: &str) -> Self {
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns, PYTHON, "-c", SENDER])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sender starts");
        let stdin = child.stdin.take().expect("piped");
        let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        let first = lines.next().and_then(Result::ok);
        assert_eq!(
            first.as_deref(),
            Some("ready"),
            "sender in {ns} did not start"
        );
        Self {
            stdin,
            lines,
            _child: KillOnDrop(child),
        }
    }

    fn send(&mut self, line: &str) {
        writeln!(self.stdin, "{line}").expect("sender reads");
        let said = self.lines.next().and_then(Result::ok);
        assert_eq!(said.as_deref(), Some("sent"), "sender failed on {line}");
    }
}

/// `true` if `test` runs here: every prerequisite is there and this kernel has `needs`.
/// Otherwise it is skipped (or fails under MRC_REQUIRE_ALL=1), or it ran in the kernel VM's
/// guest (and panicked there if it failed).
fn runs_here(test: &str, needs: Feature) -> bool {
    let checks: [(&str, &str, &[&str]); 3] = [
        ("needs root", "sh", &["-c", "test \"$(id -u)\" -eq 0"]),
        (
            "needs iproute2 with netns (install iproute2)",
            "ip",
            &["netns", "list"],
        ),
        (
            "needs scapy for /usr/bin/python3 (install python3-scapy)",
            PYTHON,
            // Found, not imported: an import takes 20 s in an emulated guest.
            &[
                "-c",
                "import importlib.util, sys; sys.exit(importlib.util.find_spec('scapy') is None)",
            ],
        ),
    ];
    for (why, cmd, args) in checks {
        if !mrc_tests::runs(cmd, args) {
            mrc_tests::skip(test, why);
            return false;
        }
    }
    match kernel::kernel_for(test, needs) {
        Some(Kernel::Here) => true,
        Some(Kernel::Vm(vm)) => {
            kernel::run_in_vm(vm, test);
            false
        }
        None => false,
    }
}

fn sh(script: &str) {
    let mut child = Command::new("sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("sh runs");
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(script.as_bytes())
        .expect("script written");
    let out = child.wait_with_output().expect("sh finishes");
    assert!(
        out.status.success(),
        "script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The small plan as namespaces; deleted on drop, also when the test panics.
struct Fabric {
    plan: Plan,
    prefix: String,
    senders: std::cell::RefCell<HashMap<HostId, Sender>>,
}

impl Fabric {
    /// Build `plan` in namespaces named `srk<pid><tag>-...` (`tag` differs per test, so the
    /// tests of this binary run side by side).
    fn up(plan: Plan, tag: &str) -> Self {
        let prefix = format!("srk{}{tag}", std::process::id());
        let fabric = Self {
            plan,
            prefix,
            senders: std::cell::RefCell::default(),
        };
        sh(&fabric
            .plan
            .linux_config(&fabric.prefix)
            .expect("small plan emits"));
        fabric
    }

    fn ns(&self, node: NodeId) -> String {
        self.plan.netns_name(&self.prefix, node)
    }

    /// IPv6 unicast packets received on `port` of `switch` (per-interface snmp6 counters:
    /// every IPv6 packet in, minus multicast such as MLD reports).
    fn unicast_in(&self, switch: SwitchId, port: u16) -> u64 {
        let c = self.snmp6(switch, port);
        c("Ip6InReceives") - c("Ip6InMcastPkts")
    }

    /// The per-interface IPv6 counters of `port` of `switch`, by name.
    fn snmp6(&self, switch: SwitchId, port: u16) -> impl Fn(&str) -> u64 {
        let node = NodeId::Switch(switch);
        let file = format!("/proc/net/dev_snmp6/{}", self.plan.ifname(node, port));
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns(node), "cat", &file])
            .output()
            .expect("ip netns exec runs");
        assert!(
            out.status.success(),
            "cannot read {file} in {}",
            self.ns(node)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        move |name: &str| {
            text.lines()
                .find_map(|l| {
                    let mut it = l.split_whitespace();
                    (it.next() == Some(name)).then(|| it.next()?.parse::<u64>().ok())?
                })
                .unwrap_or_else(|| panic!("{name} missing from {file}"))
        }
    }

    /// Runs `send` while a receiver on `dst`'s NIC address counts what arrives; the count per
    /// tag once the `END` datagram came.
    fn receive(&self, dst: HostId, send: impl FnOnce()) -> HashMap<String, u32> {
        let mut rx = Command::new("ip")
            .args(["netns", "exec", &self.ns(NodeId::Host(dst)), PYTHON, "-c"])
            .arg(RECEIVER)
            .arg(self.plan.nic_addr(dst).to_string())
            .arg(UDP_PORT.to_string())
            .arg(
                kernel::deadline(Duration::from_secs(8))
                    .as_secs()
                    .to_string(),
            )
            .stdout(Stdio::piped())
            .spawn()
            .expect("receiver starts");
        let mut lines = BufReader::new(rx.stdout.take().expect("piped")).lines();
        let first = lines.next().and_then(Result::ok);
        let rx = KillOnDrop(rx);
        assert_eq!(first.as_deref(), Some("ready"), "receiver did not start");
        send();
        let mut counts = HashMap::new();
        for line in lines.map_while(Result::ok) {
            if line == "done" {
                break;
            }
            let (tag, n) = line.split_once('=').expect("tag=count");
            counts.insert(tag.to_owned(), n.parse().expect("count"));
        }
        drop(rx);
        counts
    }

    /// Send `count` packets tagged with the path index on each path, then an end marker on
    /// `end_path`; return the count received per tag at the destination's UDP socket.
    fn send(&self, batches: &[(Path, u32)], end_path: &Path) -> HashMap<String, u32> {
        let (src, dst) = (end_path.src, end_path.dst);
        let arg = |path: &Path, tag: &str, count: u32| {
            let t0 = self
                .plan
                .link(NodeId::Host(path.src), u16::from(path.plane))
                .expect("host port");
            format!(
                "{},{},{},{tag},{count}",
                self.plan
                    .ifname(NodeId::Host(path.src), u16::from(path.plane)),
                mac(self.plan.mac(t0.peer, t0.peer_port)),
                path.da
            )
        };
        let mut line = format!(
            "{} {} {UDP_PORT}",
            self.plan.nic_addr(src),
            self.plan.nic_addr(dst)
        );
        for (path, count) in batches {
            line.push(' ');
            line.push_str(&arg(path, &tag(path), *count));
        }
        line.push(' ');
        line.push_str(&arg(end_path, "END", 1));
        self.receive(dst, || {
            self.senders
                .borrow_mut()
                .entry(src)
                .or_insert_with(|| Sender::start(&self.ns(NodeId::Host(src))))
                .send(&line);
        })
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.senders.borrow_mut().clear();
        if let Ok(script) = self.plan.linux_teardown(&self.prefix) {
            sh(&script);
        }
    }
}

struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mac(b: [u8; 6]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

fn tag(path: &Path) -> String {
    format!("p{}s{}", path.plane, path.index)
}

/// Per-spine view of where packets from rack `a` to rack `b` went: unicast packets into the
/// spine from T0(p, a), and into T0(p, b) from the spine.
fn spine_counters(f: &Fabric, a: u16, b: u16) -> HashMap<(u8, u16), (u64, u64)> {
    let hpt = f.plan.hosts_per_t0();
    let mut m = HashMap::new();
    for plane in 0..f.plan.planes() {
        for s in 0..f.plan.t1_per_plane() {
            let into_spine = f.unicast_in(SwitchId::t1(plane, s), a);
            let into_t0 = f.unicast_in(SwitchId::t0(plane, b), hpt + s);
            m.insert((plane, s), (into_spine, into_t0));
        }
    }
    m
}

/// Send a different number of packets on every path from `src` to `dst`: each arrives, and
/// each spine sees exactly the packets of the path through it (none for a direct path).
fn each_path_crosses_its_spine(fabric: &Fabric, src: HostId, dst: HostId) -> Vec<Path> {
    let plan = &fabric.plan;
    let (a, b) = (plan.rack_of(src), plan.rack_of(dst));
    let paths: Vec<Path> = plan.paths_all_planes(src, dst).unwrap().collect();
    let batches: Vec<(Path, u32)> = paths.iter().zip(3u32..).map(|(p, n)| (*p, n)).collect();
    let before = spine_counters(fabric, a, b);
    let got = fabric.send(&batches, &paths[0]);
    let after = spine_counters(fabric, a, b);
    for (key, (s0, t0)) in &before {
        let (s1, t1) = after[key];
        // The end marker travels paths[0] too.
        let expect: u64 = batches
            .iter()
            .filter(|(p, _)| (p.plane, p.spine) == (key.0, Some(key.1)))
            .map(|(p, n)| u64::from(*n) + u64::from(p == &paths[0]))
            .sum();
        assert_eq!(s1 - s0, expect, "packets into spine {key:?}");
        assert_eq!(
            t1 - t0,
            expect,
            "packets from spine {key:?} into the last T0"
        );
    }
    for (path, n) in &batches {
        assert_eq!(got.get(&tag(path)), Some(n), "{path}: received {got:?}");
    }
    paths
}

#[test]
fn kernel_un_switches_follow_the_plan() {
    if !runs_here("kernel_un_switches_follow_the_plan", Feature::Srv6) {
        return;
    }
    let fabric = Fabric::up(Plan::builtin("small").expect("built-in plan"), "g");
    let plan = &fabric.plan;
    let (src, dst) = (HostId(0), HostId(3));
    let a = plan.rack_of(src);
    assert_ne!(a, plan.rack_of(dst), "the test wants a cross-rack pair");

    // 1. Every path crosses exactly its spine and arrives.
    let paths = each_path_crosses_its_spine(&fabric, src, dst);
    assert_eq!(paths.len(), 4);

    // 2. Take the T0(0, a)–T1(0, 1) link down: exactly the paths through it blackhole.
    let t0 = SwitchId::t0(0, a);
    let uplink = plan.hosts_per_t0() + 1;
    let down_if = plan.ifname(NodeId::Switch(t0), uplink);
    let crosses_down_link = |p: &Path| {
        p.hops()
            .iter()
            .any(|h| h.node == NodeId::Switch(t0) && h.egress_port == uplink)
    };
    assert_eq!(paths.iter().filter(|p| crosses_down_link(p)).count(), 1);
    let end_path = paths.iter().find(|p| p.plane == 1).expect("a plane-1 path");
    sh(&format!(
        "ip -n {} link set {down_if} down",
        fabric.ns(NodeId::Switch(t0))
    ));
    let batches: Vec<(Path, u32)> = paths.iter().map(|p| (*p, 5)).collect();
    let got = fabric.send(&batches, end_path);
    for path in &paths {
        let expect = if crosses_down_link(path) {
            None
        } else {
            Some(&5)
        };
        assert_eq!(got.get(&tag(path)), expect, "link down: {path}: {got:?}");
    }

    // 3. Up again, routes re-applied (admin-down flushed them): every path works.
    sh(&format!(
        "ip -n {} link set {down_if} up",
        fabric.ns(NodeId::Switch(t0))
    ));
    sh(&plan.linux_routes(&fabric.prefix).expect("routes emit"));
    let got = fabric.send(&batches, end_path);
    for path in &paths {
        assert_eq!(
            got.get(&tag(path)),
            Some(&5),
            "link up again: {path}: {got:?}"
        );
    }
}

/// The same fabric with "downlink" host uSIDs (the last uSID is the T0's local downlink, which
/// the host owns), and same-rack paths: straight through the T0, and bounced off each spine.
#[test]
fn kernel_downlink_mode_and_same_rack_paths() {
    if !runs_here("kernel_downlink_mode_and_same_rack_paths", Feature::Srv6) {
        return;
    }
    let text = mrc_srv6::plan::SMALL_PLAN_TOML
        .replace("host_usids = \"global\"", "host_usids = \"downlink\"");
    let plan = Plan::from_toml(&text, "small-downlink").expect("downlink variant parses");
    let direct = plan.path(HostId(0), HostId(1), 0, 2).expect("direct path");
    assert_eq!(direct.da.to_string(), "fcbb:bb00:1000:e001::");
    let fabric = Fabric::up(plan, "d");
    let same_rack = each_path_crosses_its_spine(&fabric, HostId(0), HostId(1));
    assert_eq!(same_rack.iter().filter(|p| p.spine.is_none()).count(), 2);
    each_path_crosses_its_spine(&fabric, HostId(0), HostId(3));
}

/// The small plan with adjacency switch uSIDs (uA: `End.X` with next-csid, Linux 6.12): after
/// the source T0's uN uSID, each uSID names the port its switch leaves by. Every path's packets
/// leave the source T0 by the uplink its second uSID names and the spine by the downlink its
/// third names (the counters of exactly those links), and arrive.
#[test]
fn kernel_ua_switches_leave_by_the_named_adjacency() {
    if !runs_here(
        "kernel_ua_switches_leave_by_the_named_adjacency",
        Feature::Ua,
    ) {
        return;
    }
    let text = mrc_srv6::plan::SMALL_PLAN_TOML.replace(
        "host_usids = \"global\"",
        "host_usids = \"global\"\nswitch_usids = \"adjacency\"",
    );
    let plan = Plan::from_toml(&text, "small-ua").expect("adjacency variant parses");
    let path = plan.path(HostId(0), HostId(3), 0, 1).expect("a path");
    assert_eq!(path.da.to_string(), "fcbb:bb00:1000:e803:e801:8003::");
    let fabric = Fabric::up(plan, "a");
    // The switches hold uA routes (the emitted script read one back on each).
    let t1 = NodeId::Switch(SwitchId::t1(0, 1));
    let out = Command::new("ip")
        .args([
            "-n",
            &fabric.ns(t1),
            "-6",
            "route",
            "show",
            "fcbb:bb00:e801::/48",
        ])
        .output()
        .expect("ip runs");
    let route = String::from_utf8_lossy(&out.stdout);
    assert!(
        route.contains("End.X") && route.contains("next-csid"),
        "t1-0-1's uA route: {route}"
    );
    let paths = each_path_crosses_its_spine(&fabric, HostId(0), HostId(3));
    assert_eq!(paths.len(), 4);
    let same_rack = each_path_crosses_its_spine(&fabric, HostId(0), HostId(1));
    assert_eq!(same_rack.iter().filter(|p| p.spine.is_none()).count(), 2);
}

/// A kernel UDP sender: `n` datagrams of `size` bytes tagged `k`, then `END`, from the host's
/// NIC address, in MRC's trimmable data class (DSCP 4; the kernel's SRv6 encapsulation copies
/// the traffic class to the outer header).
const UDP_SENDER: &str = r#"
import socket, sys, time
src, dst, port, n, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, 4 << 2)
s.bind((src, 0))
for _ in range(n):
    s.sendto(b"k " + b"." * (size - 2), (dst, port))
time.sleep(0.2)
s.sendto(b"END", (dst, port))
"#;

/// The tc BPF trimmer (`tools/bpf/trim.bpf.c`) trims, and does not drop, what the kernel's
/// own UDP stack sends: h0 routes h3's NIC address through the kernel's SRv6 encapsulation
/// (`encap seg6 mode encap.red`, the plan's uSID path through spine 0 of plane 0), so the
/// frames reaching the spine are skbs of the kernel's (checksum left to the device, marked
/// encapsulated), not a packet socket's. The spine's port trims every second one: the next
/// switch forwards all of them, the host receives the others whole.
#[test]
fn the_trimmer_trims_what_the_kernels_udp_stack_sends() {
    let test = "the_trimmer_trims_what_the_kernels_udp_stack_sends";
    for (why, cmd) in [
        ("needs clang for the BPF trimmer (install clang)", "clang"),
        ("needs bpftool (install bpftool)", "bpftool"),
    ] {
        if !mrc_tests::runs(cmd, &["--version"]) {
            return mrc_tests::skip(test, why);
        }
    }
    if !runs_here(test, Feature::Srv6) {
        return;
    }
    const N: u64 = 16;
    let fabric = Fabric::up(Plan::builtin("small").expect("built-in plan"), "u");
    let plan = &fabric.plan;
    let (src, dst) = (HostId(0), HostId(3));
    let path = plan.path(src, dst, 0, 0).expect("the path through spine 0");
    let spine = SwitchId::t1(0, 0);
    let down = plan.ifname(NodeId::Switch(spine), plan.rack_of(dst));
    let trimmer = Trimmer::attach(
        Box::new(trimmer::run_here),
        &std::env::temp_dir(),
        2,
        &fabric.ns(NodeId::Switch(spine)),
        &down,
    );
    sh(&format!(
        "ip -n {} -6 route add {}/128 encap seg6 mode encap.red segs {} dev p0",
        fabric.ns(NodeId::Host(src)),
        plan.nic_addr(dst),
        path.da
    ));
    // The last switch, on its downlink to the host.
    let (last, port) = (SwitchId::t0(0, plan.rack_of(dst)), plan.downlink_of(dst));
    let before = fabric.snmp6(last, port)("Ip6OutForwDatagrams");
    let capture = std::env::temp_dir().join(format!("{}.pcap", mrc_tests::unique("mrc-trim-udp")));
    let _gone = mrc_tests::TempFile(capture.clone());
    let dumpcap = start_dumpcap(&fabric.ns(NodeId::Host(dst)), "p0", &capture, N + 1);
    let got = fabric.receive(dst, || {
        let out = Command::new("ip")
            .args(["netns", "exec", &fabric.ns(NodeId::Host(src)), PYTHON, "-c"])
            .arg(UDP_SENDER)
            .arg(plan.nic_addr(src).to_string())
            .arg(plan.nic_addr(dst).to_string())
            .args([UDP_PORT.to_string(), N.to_string(), "1000".to_owned()])
            .output()
            .expect("the sender runs");
        assert!(
            out.status.success(),
            "kernel UDP sender: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    });
    let forwarded = fabric.snmp6(last, port)("Ip6OutForwDatagrams") - before;
    let status = dumpcap.wait_with_output().expect("dumpcap").status;
    assert!(status.success(), "dumpcap: {status}");
    let frames = pcap_frames(&std::fs::read(&capture).expect("the capture"));
    let stats = trimmer.stats();
    println!(
        "{test}: {spine} {down} matched {} and trimmed {} of {N} kernel UDP datagrams ({} it \
         could not trim); {last} forwarded {forwarded}; h3 received {got:?}",
        stats.matched, stats.trimmed, stats.failed
    );
    assert_eq!(stats.matched, N, "the spine saw every datagram: {stats:?}");
    assert_eq!(
        stats.failed, 0,
        "the trimmer failed on kernel skbs: {stats:?}"
    );
    assert_eq!(stats.trimmed, N / 2, "{stats:?}");
    assert_eq!(
        forwarded,
        N + 1,
        "the next switch forwarded every datagram (and END), trimmed or not"
    );
    assert_eq!(
        got.get("k").copied().map(u64::from),
        Some(N / 2),
        "the untrimmed datagrams arrived whole: {got:?}"
    );
    // On the wire to h3: the trimmed frames are the first 256 bytes of the others (outer DSCP
    // 12 and payload length aside), as a trimming switch sends them.
    let (cut, whole): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) = frames
        .iter()
        .filter(|f| f.len() > 256 || f.len() == 256)
        .partition(|f| f.len() == 256);
    assert_eq!((cut.len(), whole.len()), (8, 8), "frames seen on h3's port");
    let dscp = |f: &[u8]| ((u16::from(f[14]) << 8 | u16::from(f[15])) >> 6) & 0x3f;
    let plen = |f: &[u8]| u16::from_be_bytes([f[18], f[19]]);
    for f in &cut {
        assert_eq!(
            (dscp(f), plen(f)),
            (12, 256 - 54),
            "a trimmed frame's outer header"
        );
        assert_eq!(
            f[54..],
            whole[0][54..256],
            "a trimmed frame keeps the first bytes"
        );
    }
    for f in &whole {
        assert_eq!(dscp(f), 4, "an untrimmed frame keeps its class");
    }
}

/// dumpcap writing the first `count` SRv6 (IPv6-in-IPv6) frames on `iface` of `ns` to `file`
/// (classic pcap), once it is capturing.
fn start_dumpcap(ns: &str, iface: &str, file: &std::path::Path, count: u64) -> Child {
    let limit = kernel::deadline(Duration::from_secs(30))
        .as_secs()
        .to_string();
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, "dumpcap", "-q", "-P", "-i", iface])
        .args(["-f", "ip6 proto 41", "-c", &count.to_string()])
        .args(["-a", &format!("duration:{limit}"), "-w"])
        .arg(file)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dumpcap starts");
    let mut lines = BufReader::new(child.stderr.take().expect("piped")).lines();
    let mut said = String::new();
    for line in lines.by_ref().map_while(Result::ok) {
        if line.starts_with("File:") {
            // Read the rest, so dumpcap never writes to a closed pipe.
            std::thread::spawn(move || lines.for_each(drop));
            return child;
        }
        said.push_str(&line);
    }
    let status = child.wait();
    panic!("dumpcap on {ns} {iface} did not start ({status:?}): {said}");
}

/// The frames of a classic little-endian pcap file.
fn pcap_frames(data: &[u8]) -> Vec<Vec<u8>> {
    assert_eq!(
        data.get(..4),
        Some(&[0xd4, 0xc3, 0xb2, 0xa1][..]),
        "a pcap file"
    );
    let u32_at = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"));
    let (mut at, mut frames) = (24, Vec::new());
    while at + 16 <= data.len() {
        let len = u32_at(at + 8) as usize;
        frames.push(data[at + 16..at + 16 + len].to_vec());
        at += 16 + len;
    }
    frames
}
