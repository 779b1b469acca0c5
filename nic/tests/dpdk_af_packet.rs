//! NICs on kernel interfaces through DPDK's `net_af_packet`, in a fresh network namespace
//! (root). This process builds the namespace and runs itself again inside it (`ip netns exec`)
//! for the traffic; the namespace and everything in it are deleted on every exit path.
//!
//! 1. A wire: two NICs of two planes on two veth pairs (kernel IPv6 off on them). Each NIC
//!    resolves the other's address with neighbour discovery, then Writes and
//!    Write-with-Immediates go both ways, every byte checked.
//! 2. A Linux router: two NICs, each on a veth whose other end is a kernel interface with an
//!    address, the namespace forwarding IPv6 between them. The NICs resolve the router's MAC
//!    (our solicitation, its advertisement); the router reaches the NICs' addresses by
//!    soliciting them (our advertisements): no static neighbour anywhere. Traffic goes both
//!    ways through the kernel's forwarding, and `ip -6 neigh` on the router shows our MACs.

mod support;

use std::net::Ipv6Addr;
use std::process::{Command, ExitCode};
use std::time::Duration;

use mrc_nic::io::dpdk::{DpdkIo, DpdkPorts};
use mrc_nic::{NextHop, Nic, NicHandle, PacketIo};
use mrc_srv6::wire::EthernetAddress;
use support::eal::{Child, RuntimeDir, eal_args, init, lcores, unique};
use support::{Plan, both_ways, connect_pair, nic_addr, nic_config, run_apps, side};

const TEST: &str = "dpdk_af_packet";
const ROLE: &str = "MRC_NIC_AFP_NETNS";
const LIMIT: Duration = Duration::from_mins(1);
/// Interfaces, all inside the test's own namespace: `a*`/`b*` the wire, `c0`/`d0` the NICs
/// behind the router, `r0`/`r1` the router's ends.
const WIRE: [(&str, &str); 2] = [("a0", "b0"), ("a1", "b1")];
const ROUTED: [(&str, &str); 2] = [("c0", "r0"), ("d0", "r1")];

fn router_addr(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x6d72, 0xff, i, 0, 0, 0, 1)
}

fn main() -> ExitCode {
    if let Ok(ns) = std::env::var(ROLE) {
        inside(&ns);
        return ExitCode::SUCCESS;
    }
    if !is_root() {
        return mrc_skip::skip_exit(TEST, "needs root (network namespaces, raw sockets)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return mrc_skip::skip_exit(TEST, "iproute2 (`ip`) is not installed");
    }
    if mrc_dpdk::DPDK_VERSION.is_none() {
        return mrc_skip::skip_exit(TEST, "mrc-dpdk was built without DPDK");
    }
    let ns = Netns::create(&unique("nafp"));
    ns.setup();
    let exe = std::env::current_exe().expect("own path");
    let mut child = Child(Some(
        Command::new("ip")
            .args(["netns", "exec", &ns.0])
            .arg(exe)
            .env(ROLE, &ns.0)
            .spawn()
            .expect("run inside the namespace"),
    ));
    let status = child
        .wait_for(2 * LIMIT)
        .expect("the test inside the namespace hung");
    assert!(status.success(), "inside the namespace: {status}");
    ExitCode::SUCCESS
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0")
}

/// A network namespace of our own, deleted (with its interfaces) when dropped.
struct Netns(String);

impl Netns {
    fn create(name: &str) -> Self {
        run("ip", &["netns", "add", name]);
        Self(name.to_owned())
    }

    fn ip(&self, args: &str) {
        let mut all = vec!["-n", &self.0];
        all.extend(args.split_whitespace());
        run("ip", &all);
    }

    fn sysctl(&self, setting: &str) {
        run(
            "ip",
            &["netns", "exec", &self.0, "sysctl", "-q", "-w", setting],
        );
    }

    fn setup(&self) {
        self.ip("link set lo up");
        self.sysctl("net.ipv6.conf.all.accept_dad=0");
        self.sysctl("net.ipv6.conf.default.accept_dad=0");
        self.sysctl("net.ipv6.conf.all.forwarding=1");
        for (nic, peer) in WIRE.iter().chain(&ROUTED) {
            self.ip(&format!(
                "link add {nic} mtu 9000 type veth peer name {peer} mtu 9000"
            ));
        }
        // Only our NICs speak on these: no kernel IPv6 (link-local addresses, solicitations).
        for name in WIRE
            .iter()
            .flat_map(|(a, b)| [a, b])
            .chain(ROUTED.iter().map(|(n, _)| n))
        {
            self.sysctl(&format!("net.ipv6.conf.{name}.disable_ipv6=1"));
        }
        for (i, (nic, router)) in ROUTED.iter().enumerate() {
            let i = i as u16;
            self.ip(&format!(
                "addr add {}/64 dev {router} nodad",
                router_addr(i)
            ));
            self.ip(&format!("link set {router} up"));
            self.ip(&format!("link set {nic} up"));
            // The router reaches the NIC on-link: it must solicit the NIC's address.
            self.ip(&format!(
                "-6 route add {}/128 dev {router}",
                nic_addr(2 + i)
            ));
        }
        for (a, b) in WIRE {
            self.ip(&format!("link set {a} up"));
            self.ip(&format!("link set {b} up"));
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    assert!(
        out.status.success(),
        "{cmd} {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn vdev(index: usize, iface: &str) -> String {
    format!("net_af_packet{index},iface={iface},blocksz=8192,framesz=8192,framecnt=512")
}

/// The ports of one NIC: af_packet vdevs `indices`, frames of up to 8192 bytes (the mbuf data
/// room must hold `framesz - 32`).
fn open(eal: &mrc_dpdk::Eal, indices: &[usize], pool: &str) -> DpdkIo {
    let mut p = DpdkPorts::new(indices.iter().map(|i| format!("net_af_packet{i}")));
    p.frame_room = 8192;
    p.mbufs = 2047;
    pool.clone_into(&mut p.pool_name);
    p.open(eal)
        .expect("af_packet ports")
        .pop()
        .expect("one engine")
}

fn wait_usable(handles: &[&NicHandle], what: &str) {
    let deadline = std::time::Instant::now() + LIMIT;
    while !handles
        .iter()
        .all(|h| h.ports().expect("ports").iter().all(|p| p.usable))
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{what}: ports never usable"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Connects hosts `a` and `b` (NIC addresses `nic_addr(a)`, `nic_addr(b)`) and runs traffic
/// both ways, every byte checked.
fn traffic(handles: [&NicHandle; 2], hosts: [u16; 2], msgs: usize) {
    let plan = Plan::new(msgs, 16_000);
    let addrs = hosts.map(nic_addr);
    let salts = hosts.map(|h| 40 + u64::from(h));
    let sides = [
        side(handles[0], &plan, salts[0]),
        side(handles[1], &plan, salts[1]),
    ];
    connect_pair(&sides[0], addrs[0], &sides[1], addrs[1]);
    for t in &run_apps(&sides, both_ways(&plan, &sides, addrs, salts), LIMIT) {
        t.assert_clean();
    }
}

fn mac_of(iface: &str) -> EthernetAddress {
    let text = std::fs::read_to_string(format!("/sys/class/net/{iface}/address"))
        .expect("interface address");
    let bytes: Vec<u8> = text
        .trim()
        .split(':')
        .map(|h| u8::from_str_radix(h, 16).expect("hex"))
        .collect();
    EthernetAddress::from_bytes(&bytes)
}

/// The test proper, inside the namespace.
fn inside(ns: &str) {
    let prefix = unique("nicafp");
    let ifaces = [
        WIRE[0].0,
        WIRE[1].0,
        WIRE[0].1,
        WIRE[1].1,
        ROUTED[0].0,
        ROUTED[1].0,
    ];
    let vdevs: Vec<String> = ifaces.iter().enumerate().map(|(i, n)| vdev(i, n)).collect();
    let eal = init(&eal_args(&prefix, &lcores(), &vdevs)).expect("EAL");
    let _dir = RuntimeDir::of(&eal);

    // 1. The wire: each NIC resolves the other's address on both planes.
    let a = open(&eal, &[0, 1], "afp-a");
    let b = open(&eal, &[2, 3], "afp-b");
    let (a_macs, b_macs) = ([a.mac(0), a.mac(1)], [b.mac(0), b.mac(1)]);
    let resolve = |peer: u16| vec![NextHop::Resolve(nic_addr(peer)); 2];
    let (nic_a, ha) = Nic::spawn(nic_config(0, 2, resolve(1)), a).expect("nic a");
    let (nic_b, hb) = Nic::spawn(nic_config(1, 2, resolve(0)), b).expect("nic b");
    wait_usable(&[&ha, &hb], "wire");
    let hops =
        |h: &NicHandle| -> Vec<_> { h.ports().unwrap().iter().map(|p| p.next_hop).collect() };
    assert_eq!(hops(&ha), b_macs.map(Some));
    assert_eq!(hops(&hb), a_macs.map(Some));
    traffic([&ha, &hb], [0, 1], 120);
    for nic in [nic_a, nic_b] {
        let s = nic.shutdown().expect("shutdown").stats;
        assert_eq!((s.io.rx_dropped, s.io.tx_dropped), (0, 0), "{s:?}");
    }
    println!("{TEST}: wire: 120 messages each way over 2 af_packet planes, next hops by NDP");

    // 2. Through the Linux router.
    let c = open(&eal, &[4], "afp-c");
    let d = open(&eal, &[5], "afp-d");
    let nic_macs = [c.mac(0), d.mac(0)];
    let (nic_c, hc) =
        Nic::spawn(nic_config(2, 1, vec![NextHop::Resolve(router_addr(0))]), c).expect("nic c");
    let (nic_d, hd) =
        Nic::spawn(nic_config(3, 1, vec![NextHop::Resolve(router_addr(1))]), d).expect("nic d");
    wait_usable(&[&hc, &hd], "router");
    assert_eq!(hops(&hc), vec![Some(mac_of(ROUTED[0].1))]);
    assert_eq!(hops(&hd), vec![Some(mac_of(ROUTED[1].1))]);
    traffic([&hc, &hd], [2, 3], 60);
    for (i, h) in [&hc, &hd].into_iter().enumerate() {
        let s = h.nic_stats().unwrap().ndp;
        assert!(s.advertisements_received >= 1, "NIC {i}: {s:?}");
        assert!(
            s.solicitations_received >= 1,
            "NIC {i}: the router never solicited us: {s:?}"
        );
    }
    // The kernel learnt our addresses from our advertisements.
    for (i, (_, router)) in ROUTED.iter().enumerate() {
        let neigh = run("ip", &["-6", "neigh", "show", "dev", router]);
        let entry = neigh
            .lines()
            .find(|l| l.starts_with(&nic_addr(2 + i as u16).to_string()))
            .unwrap_or_else(|| panic!("no neighbour entry on {router}: {neigh}"));
        let [m0, m1, m2, m3, m4, m5] = nic_macs[i].0;
        let mac = format!("{m0:02x}:{m1:02x}:{m2:02x}:{m3:02x}:{m4:02x}:{m5:02x}");
        assert!(entry.contains(&mac), "{router}: {entry} (want {mac})");
        assert!(
            !entry.contains("FAILED") && !entry.contains("INCOMPLETE"),
            "{router}: {entry}"
        );
    }
    for nic in [nic_c, nic_d] {
        let s = nic.shutdown().expect("shutdown").stats;
        assert_eq!((s.io.rx_dropped, s.io.tx_dropped), (0, 0), "{s:?}");
    }
    println!(
        "{TEST}: router: 60 messages each way through Linux IPv6 forwarding in {ns}, \
         neighbours resolved both ways without static entries"
    );
}
