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
//! failed under `MRC_REQUIRE_ALL=1`; and a kernel with SRv6 (CONFIG_IPV6_SEG6_LWTUNNEL):
//! otherwise skipped and listed, whatever the variable says. Namespaces carry a unique prefix
//! and a Drop guard removes them, also when the test fails.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};

use mrc_srv6::plan::{HostId, NodeId, Path, Plan, SwitchId};

const PYTHON: &str = "/usr/bin/python3";
const UDP_PORT: u16 = 4791;

/// Receiver, run in the destination host's namespace: counts datagrams per payload tag until
/// it reads `END` (or a deadline), then prints `tag=count` lines and `done`.
const RECEIVER: &str = r#"
import select, socket, sys, time
s = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
print("ready", flush=True)
counts, end = {}, time.monotonic() + float(sys.argv[3])
while time.monotonic() < end:
    if not select.select([s], [], [], 0.05)[0]:
        continue
    tag = s.recv(4096).decode(errors="replace")
    if tag == "END":
        break
    counts[tag] = counts.get(tag, 0) + 1
for tag, n in sorted(counts.items()):
    print(f"{tag}={n}")
print("done", flush=True)
"#;

/// Sender, run in the source host's namespace: Ether / IPv6 (DA = uSID path) / IPv6 (NIC to
/// NIC) / UDP / tag, for each `iface,dst_mac,da,tag,count` argument; the last batch is sent
/// after a short pause so that it arrives last.
const SENDER: &str = r#"
import logging, sys, time
logging.getLogger("scapy.runtime").setLevel(logging.ERROR)
from scapy.all import Ether, IPv6, UDP, Raw, sendp
src, dst, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
batches = [b.split(",") for b in sys.argv[4:]]
for i, (iface, mac, da, tag, n) in enumerate(batches):
    if i == len(batches) - 1:
        time.sleep(0.2)
    pkt = (Ether(dst=mac) / IPv6(src=src, dst=da, hlim=64) / IPv6(src=src, dst=dst)
           / UDP(sport=port, dport=port) / Raw(tag.encode()))
    sendp(pkt, iface=iface, count=int(n), verbose=False)
"#;

/// `true` if every prerequisite is there; otherwise skip `test` (or fail under
/// MRC_REQUIRE_ALL=1; a kernel without SRv6 is a skip whatever it says).
fn prerequisites(test: &str) -> bool {
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
            &["-c", "import scapy.all"],
        ),
    ];
    for (why, cmd, args) in checks {
        if !mrc_tests::runs(cmd, args) {
            mrc_tests::skip(test, why);
            return false;
        }
    }
    if !mrc_tests::has_kernel_srv6(test) {
        return false;
    }
    true
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
}

impl Fabric {
    /// Build `plan` in namespaces named `srk<pid><tag>-...` (`tag` differs per test, so the
    /// tests of this binary run side by side).
    fn up(plan: Plan, tag: &str) -> Self {
        let prefix = format!("srk{}{tag}", std::process::id());
        let fabric = Self { plan, prefix };
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
        let text = String::from_utf8_lossy(&out.stdout);
        let counter = |name: &str| {
            text.lines()
                .find_map(|l| {
                    let mut it = l.split_whitespace();
                    (it.next() == Some(name)).then(|| it.next()?.parse::<u64>().ok())?
                })
                .unwrap_or_else(|| panic!("{name} missing from {file}"))
        };
        counter("Ip6InReceives") - counter("Ip6InMcastPkts")
    }

    /// Send `count` packets tagged with the path index on each path, then an end marker on
    /// `end_path`; return the count received per tag at the destination's UDP socket.
    fn send(&self, batches: &[(Path, u32)], end_path: &Path) -> HashMap<String, u32> {
        let (src, dst) = (end_path.src, end_path.dst);
        let mut rx = Command::new("ip")
            .args(["netns", "exec", &self.ns(NodeId::Host(dst)), PYTHON, "-c"])
            .arg(RECEIVER)
            .arg(self.plan.nic_addr(dst).to_string())
            .arg(UDP_PORT.to_string())
            .arg("8")
            .stdout(Stdio::piped())
            .spawn()
            .expect("receiver starts");
        let mut lines = BufReader::new(rx.stdout.take().expect("piped")).lines();
        let first = lines.next().and_then(Result::ok);
        let rx = KillOnDrop(rx);
        assert_eq!(first.as_deref(), Some("ready"), "receiver did not start");

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
        let mut tx = Command::new("ip");
        tx.args(["netns", "exec", &self.ns(NodeId::Host(src)), PYTHON, "-c"])
            .arg(SENDER)
            .arg(self.plan.nic_addr(src).to_string())
            .arg(self.plan.nic_addr(dst).to_string())
            .arg(UDP_PORT.to_string());
        for (path, count) in batches {
            tx.arg(arg(path, &tag(path), *count));
        }
        tx.arg(arg(end_path, "END", 1));
        let out = tx.output().expect("sender runs");
        assert!(
            out.status.success(),
            "sender failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );

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
}

impl Drop for Fabric {
    fn drop(&mut self) {
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
    if !prerequisites("kernel_un_switches_follow_the_plan") {
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
    if !prerequisites("kernel_downlink_mode_and_same_rack_paths") {
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
