//! mrc-rs hosts through a fabric of Linux kernel SRv6 switches (issue 8, docs/interop.md).
//!
//! `scripts/fabric.sh up` turns network namespaces into the small plan (2 planes × 2 T0 × 2
//! T1, 4 hosts): every switch is the kernel's `seg6local End flavors next-csid` (uN). Two
//! hosts run `mrc-perf write_bw --backend dpdk --plan small` over DPDK `net_af_packet` ports
//! on their namespace's veths, one per plane; each port finds its T0's MAC by neighbour
//! discovery; the perftest-style TCP exchange runs on a management veth between the two host
//! namespaces. The tests show:
//! - every byte of a write_bw run verified end to end (`--check`);
//! - path fidelity: each spine's downlink towards the server forwarded exactly the packets
//!   the client's EVs through that spine sent (and at least those they had acknowledged);
//!   dumpcap on the three switch hops of one path and tshark (with our MRC dissector) show the
//!   uSID container shifting one uSID per hop and decode the MRC headers;
//! - failover: a T0–T1 link set down mid-run; the transfer completes, the EVs through it lose
//!   packets (counted by the client and by the T0 as unroutable), retire and, once the link is
//!   back, return, and the spine carries traffic again;
//! - trimming through the kernel data path: a tc BPF program on a spine port trims every 8th
//!   data packet (`tools/bpf/trim.bpf.c`); the server NACKs what arrives trimmed, the client
//!   resends those, only EVs through that spine count trims, and the data is intact.
//!
//! Needs root, iproute2, DPDK, dumpcap/tshark and clang with libbpf: otherwise skipped with a
//! message, or failed under `MRC_REQUIRE_ALL=1`. The namespaces (and so every veth) carry a
//! unique prefix and are deleted by a guard on every exit path; the mrc-perf and dumpcap
//! processes are killed by theirs. The tests run one at a time (each is 4 DPDK threads and a
//! kernel fabric on a 2-core machine).

#[path = "interop/harness.rs"]
mod harness;

use std::net::Ipv6Addr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use harness::{
    Capture, Counters, Fabric, IfCounters, Perf, Tools, delta, eal, tshark_fields, unique,
};
use mrc_srv6::plan::{HostId, NodeId, Path, Plan, SwitchId};
use mrc_srv6::wire::UsidContainer;
use mrc_tests::trimmer::{Stats, Trimmer};
use serde_json::Value;

const TEST: &str = "kernel_interop";
const PLAN: &str = "small";
/// The perftest exchange port (each host namespace has its own port space).
const PORT: &str = "18515";
/// The server's address on the management veth (`fabric.sh mgmt`).
const SERVER_MGMT: &str = "192.0.2.2";
/// How long a run or a wait may take on real hardware ([`limit`] scales it).
const LIMIT: Duration = Duration::from_mins(1);

/// [`LIMIT`], longer when the switches run emulated (in the kernel VM).
fn limit() -> Duration {
    harness::deadline(LIMIT)
}
/// The trimmer's period: every 8th trimmable data packet through its port.
const TRIM_EVERY: u64 = 8;
/// The client's `mrc-perf --metrics` port, on the loopback of its namespace.
const METRICS_PORT: &str = "9464";

/// One test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `Some` if every prerequisite is there (else skipped, or failed under MRC_REQUIRE_ALL=1):
/// the fabric's, and the capture and trimming tools.
fn prerequisites(test: &str) -> Option<Tools> {
    harness::prerequisites(
        test,
        &[
            ("needs dumpcap (install tshark)", "dumpcap", &["--version"]),
            ("needs tshark (install tshark)", "tshark", &["--version"]),
            (
                "needs clang for the BPF trimmer (install clang)",
                "clang",
                &["--version"],
            ),
        ],
    )
}

/// The two ends of every run: the client is host 0, the server the first host of rack 1
/// (as `mrc-perf --backend dpdk --plan` picks them).
struct Ends {
    plan: Plan,
    client: HostId,
    server: HostId,
}

impl Ends {
    fn new() -> Self {
        let plan = Plan::load_or_builtin(PLAN).expect("the small plan");
        let server = plan.host_at(1, 0);
        Self {
            plan,
            client: HostId(0),
            server,
        }
    }

    /// The client's path to the server through `spine` of `plane`.
    fn path_via(&self, plane: u8, spine: u16) -> Path {
        let n = self
            .plan
            .path_count(self.client, self.server, plane)
            .expect("paths");
        (0..n)
            .map(|i| {
                self.plan
                    .path(self.client, self.server, plane, i)
                    .expect("a path")
            })
            .find(|p| p.spine == Some(spine))
            .expect("a path through the spine")
    }

    /// Spine (plane, T1 index) of the client's path whose uSID container is `da`.
    fn spine_of(&self, da: Ipv6Addr) -> Option<(u8, u16)> {
        (0..self.plan.planes()).find_map(|p| {
            let n = self.plan.path_count(self.client, self.server, p).ok()?;
            (0..n).find_map(|i| {
                let path = self.plan.path(self.client, self.server, p, i).ok()?;
                (path.da == da).then_some((p, path.spine?))
            })
        })
    }

    /// The T1's interface towards the server's rack: (node, ifname).
    fn spine_downlink(&self, plane: u8, spine: u16) -> (String, String) {
        let t1 = NodeId::Switch(SwitchId::t1(plane, spine));
        (
            t1.to_string(),
            self.plan.ifname(t1, self.plan.rack_of(self.server)),
        )
    }

    /// The client's T0 in `plane`, its uplink to `spine` and its downlink from the client:
    /// (node, uplink, downlink).
    fn client_t0(&self, plane: u8, spine: u16) -> (String, String, String) {
        let path = self.path_via(plane, spine);
        let hop = path.hops()[1];
        let down = self.plan.downlink_of(self.client);
        (
            hop.node.to_string(),
            self.plan.ifname(hop.node, hop.egress_port),
            self.plan.ifname(hop.node, down),
        )
    }
}

/// The fabric, the management link, the two hosts' ports handed to DPDK.
fn fabric(tools: &Tools, ends: &Ends, tag: &str) -> Fabric {
    let f = Fabric::up(tools, PLAN, &unique(tag));
    let (c, s) = (ends.client.to_string(), ends.server.to_string());
    f.script(&["mgmt", &c, &s]);
    f.script(&["dpdkhost", &c]);
    f.script(&["dpdkhost", &s]);
    f
}

/// A server and a client running `write_bw` with `args`; returns both once started (the
/// server is listening before the client starts).
fn start_pair(f: &Fabric, ends: &Ends, args: &[&str]) -> (Perf, Perf) {
    let planes = ends.plan.planes();
    let dir = std::env::temp_dir();
    let common = |file_prefix: &str| -> Vec<String> {
        let mut v: Vec<String> = [
            "write_bw",
            "--backend",
            "dpdk",
            "--plan",
            PLAN,
            "-p",
            PORT,
            "--no-live",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        v.push("--eal".into());
        v.push(eal(file_prefix, planes));
        v.extend(harness::pacing().iter().map(|s| (*s).to_owned()));
        v.extend(args.iter().map(|s| (*s).to_owned()));
        v
    };
    let (sp, cp) = (unique("mrc-ki-s"), unique("mrc-ki-c"));
    let server = Perf::spawn(
        &f.tools,
        &f.ns(&ends.server.to_string()),
        &common(&sp),
        &sp,
        dir.join(format!("{sp}.json")),
    );
    let mut cargs = vec!["write_bw".to_owned(), SERVER_MGMT.to_owned()];
    cargs.extend(common(&cp).into_iter().skip(1));
    let client = Perf::spawn(
        &f.tools,
        &f.ns(&ends.client.to_string()),
        &cargs,
        &cp,
        dir.join(format!("{cp}.json")),
    );
    (server, client)
}

/// A host's EVs (its rows of its report).
fn evs_of(report: &Value, host: u64) -> Vec<&Value> {
    report["evs"]
        .as_array()
        .expect("evs in the report")
        .iter()
        .filter(|e| e["host"] == host)
        .collect()
}

/// A host's QPs (its rows of its report).
fn qps_of(report: &Value, host: u64) -> Vec<&Value> {
    report["qps"]
        .as_array()
        .expect("qps in the report")
        .iter()
        .filter(|q| q["host"] == host)
        .collect()
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64().unwrap_or_else(|| panic!("{k} in {v}"))
}

/// `counter` summed over `rows` (a path like "retransmits.trim" goes into objects).
fn sum(rows: &[&Value], counter: &str) -> u64 {
    rows.iter()
        .map(|r| {
            let v = counter.split('.').fold(*r, |v, k| &v[k]);
            v.as_u64().unwrap_or_else(|| panic!("{counter} in {r}"))
        })
        .sum()
}

/// Every message the client completed arrived whole and right, each checked where it landed
/// at the server, whose QPs placed at least `messages` × `size` bytes.
fn assert_delivered(client: &Value, server: &Value, size: u64, messages: Option<u64>) {
    let check = &server["check"];
    assert_eq!(u(check, "bytes_wrong"), 0, "server check: {check}");
    assert_eq!(u(check, "messages_wrong"), 0, "server check: {check}");
    assert!(
        server["error"].is_null(),
        "server error: {}",
        server["error"]
    );
    assert!(
        client["error"].is_null(),
        "client error: {}",
        client["error"]
    );
    let done = u(&client["results"], "messages");
    if let Some(m) = messages {
        assert_eq!(done, m, "client results: {}", client["results"]);
    }
    assert_eq!(u(check, "messages_checked"), done, "server check: {check}");
    assert_eq!(
        u(check, "bytes_checked"),
        done * size,
        "server check: {check}"
    );
    let placed = sum(&qps_of(server, 1), "data_bytes_placed");
    assert!(
        placed >= done * size,
        "the server placed {placed} bytes of {done} messages of {size}"
    );
}

/// The client's EVs by the spine their path crosses, (plane, spine), checking each EV's path is
/// one of the plan's paths of its plane.
fn evs_by_spine<'a>(ends: &Ends, client: &'a Value) -> Vec<((u8, u16), Vec<&'a Value>)> {
    let mut out: Vec<((u8, u16), Vec<&Value>)> = Vec::new();
    for p in 0..ends.plan.planes() {
        for s in 0..ends.plan.t1_per_plane() {
            out.push(((p, s), Vec::new()));
        }
    }
    for ev in evs_of(client, 0) {
        let da: Ipv6Addr = ev["path"]
            .as_str()
            .unwrap_or_else(|| panic!("EV without an SRv6 path: {ev}"))
            .parse()
            .expect("an IPv6 path");
        let spine = ends
            .spine_of(da)
            .unwrap_or_else(|| panic!("EV path {da} is none of the plan's client→server paths"));
        assert_eq!(
            u64::from(spine.0),
            u(ev, "plane"),
            "EV {ev}: its path is in another plane"
        );
        out.iter_mut()
            .find(|r| r.0 == spine)
            .expect("a spine")
            .1
            .push(ev);
    }
    out
}

/// Frames a client may send after its report (its NIC runs until shutdown).
const LATE_FRAMES: u64 = 2;

/// Path fidelity from the switches' counters: the spine downlink towards the server forwarded
/// what the EVs naming that spine sent (data and probes; plus at most [`LATE_FRAMES`] sent
/// after the client's report), so at least what they had acknowledged; the client sprayed over
/// every spine.
fn assert_paths(ends: &Ends, client: &Value, before: &Counters, after: &Counters) {
    for ((p, s), evs) in evs_by_spine(ends, client) {
        let sent = sum(&evs, "packets") + sum(&evs, "probes");
        let acked = sum(&evs, "delivered");
        let (node, iface) = ends.spine_downlink(p, s);
        let d = delta(before, after, &node, &iface, |c| c.forwarded);
        println!(
            "{TEST}: plane {p} spine {s}: {} EVs sent {sent}, {acked} acknowledged; {node} {iface} forwarded {d}",
            evs.len()
        );
        // The client's report is taken while its NIC still runs: a probe (or a resend) that
        // leaves between the report and the NIC's shutdown reaches the switch but not the
        // report. One such frame was seen in CI (3201 forwarded, 3200 reported); more than
        // two would be frames the EVs never sent.
        assert!(
            d >= sent && d <= sent + LATE_FRAMES,
            "{node} {iface} forwarded {d} packets; the client's EVs through it sent {sent}"
        );
        assert!(
            acked > 0 && acked <= d,
            "{acked} acknowledged of {d} through {node}"
        );
    }
}

/// One frame of a capture: (destination QP, PSN) → (outer DA, hop limit).
type Seen = std::collections::HashMap<(String, u32), (Ipv6Addr, u8)>;

fn decode(cap: &mut Capture) -> Seen {
    let rows = tshark_fields(
        cap.finish(),
        // RDMA Write First/Middle/Last/Only and with Immediate (PROTOCOL.md: 0xC6–0xCB); the
        // probes that also cross the path carry no data.
        "mrc.bth.opcode >= 0xc6 && mrc.bth.opcode <= 0xcb && !mrc.trimmed",
        &[
            "mrc.bth.destqp",
            "mrc.bth.psn",
            "ipv6.dst",
            "ipv6.hlim",
            "mrc.bth.opcode",
        ],
    );
    let mut seen = Seen::new();
    for r in rows {
        let [qp, psn, da, hlim, opcode] = r.as_slice() else {
            panic!("tshark row {r:?}");
        };
        let op = u8::from_str_radix(opcode.trim_start_matches("0x"), 16).expect("an opcode");
        assert!(
            (0xc6..=0xcb).contains(&op),
            "tshark's filter let {opcode} through"
        );
        seen.entry((qp.clone(), psn.parse().expect("a PSN")))
            .or_insert((
                da.parse().expect("an address"),
                hlim.parse().expect("a hop limit"),
            ));
    }
    seen
}

/// Captures on the three switch hops of the plane-0 path through spine 0 (each switch's
/// egress port on the path): every frame seen at all three has the uSID container shifted
/// once more at each hop and one hop less to live.
struct PathCaptures {
    path: Path,
    caps: Vec<Capture>,
}

impl PathCaptures {
    fn start(f: &Fabric, ends: &Ends) -> Self {
        let path = ends.path_via(0, 0);
        let caps = path.hops()[1..]
            .iter()
            .map(|h| {
                let mac = ends.plan.mac(h.node, h.egress_port);
                let mac: Vec<String> = mac.iter().map(|b| format!("{b:02x}")).collect();
                Capture::start(
                    f,
                    &f.ns(&h.node.to_string()),
                    &ends.plan.ifname(h.node, h.egress_port),
                    &format!("ether src {} and ip6 proto 41", mac.join(":")),
                    400,
                    limit(),
                )
            })
            .collect();
        Self { path, caps }
    }

    fn check(mut self, plan: &Plan) {
        let seen: Vec<Seen> = self.caps.iter_mut().map(decode).collect();
        let mut expect = UsidContainer::from_addr(plan.format(), self.path.da);
        let mut want = Vec::new();
        for _ in &seen {
            assert!(expect.shift(), "the path's container ends early");
            want.push(expect.addr());
        }
        let common: Vec<_> = seen[0]
            .keys()
            .filter(|k| seen.iter().all(|s| s.contains_key(*k)))
            .collect();
        assert!(
            !common.is_empty(),
            "no frame of {} seen at every hop ({:?} frames)",
            self.path,
            seen.iter().map(Seen::len).collect::<Vec<_>>()
        );
        for k in &common {
            let hops: Vec<(Ipv6Addr, u8)> = seen.iter().map(|s| s[*k]).collect();
            for (i, ((da, hlim), want)) in hops.iter().zip(&want).enumerate() {
                assert_eq!(
                    da,
                    want,
                    "QP {} PSN {} at hop {}: {hops:?}",
                    k.0,
                    k.1,
                    i + 1
                );
                assert_eq!(*hlim, hops[0].1 - i as u8, "hop limits {hops:?}");
            }
        }
        let (k, hops): (_, Vec<String>) = (
            common[0],
            seen.iter().map(|s| s[common[0]].0.to_string()).collect(),
        );
        println!(
            "{TEST}: {} frames seen at the {} hops of {}; QP {} PSN {}: {}",
            common.len(),
            seen.len(),
            self.path,
            k.0,
            k.1,
            hops.join(" > ")
        );
    }
}

#[test]
fn write_bw_through_kernel_srv6_fabric() {
    let _one = serial();
    let Some(tools) = prerequisites("write_bw_through_kernel_srv6_fabric") else {
        return;
    };
    let ends = Ends::new();
    let f = fabric(&tools, &ends, "ki");
    let caps = PathCaptures::start(&f, &ends);
    let (size, iters) = (65_536_u64, 400_u64);
    let (s, n) = (size.to_string(), iters.to_string());
    let before = f.counters();
    let (mut server, mut client) = start_pair(&f, &ends, &["--check", "-s", &s, "-n", &n]);
    let (_, c) = client.finish(limit(), "client");
    let (_, sv) = server.finish(limit(), "server");
    let after = f.counters();
    assert_delivered(&c, &sv, size, Some(iters));
    assert_paths(&ends, &c, &before, &after);
    caps.check(&ends.plan);
    println!("{TEST}: write_bw {iters} x {size} B through the kernel fabric, every byte checked");
}

/// Waits until `node iface`'s counter `of` grew by `more` beyond `from`; the counters then.
fn wait_counter(
    f: &Fabric,
    node: &str,
    iface: &str,
    from: &Counters,
    of: fn(&IfCounters) -> u64,
    more: u64,
) -> Counters {
    let until = Instant::now() + limit();
    loop {
        let now = f.counters();
        if delta(from, &now, node, iface, of) >= more {
            return now;
        }
        assert!(
            Instant::now() < until,
            "{node} {iface}: the counter never grew by {more}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `name{plane=...}` summed over the hosts of the live Prometheus text that `mrc-perf
/// --metrics` serves in namespace `ns` (read with bash's /dev/tcp inside it), once it is at
/// least `at_least`; its value then.
fn wait_metric(ns: &str, name: &str, plane: &str, at_least: f64) -> f64 {
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{METRICS_PORT} && printf 'GET /metrics HTTP/1.0\\r\\nHost: \
         localhost\\r\\n\\r\\n' >&3 && cat <&3"
    );
    let series = format!("plane=\"{plane}\"");
    let until = Instant::now() + limit();
    loop {
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", ns, "bash", "-c", &script])
            .output()
            .expect("ip netns exec runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let values: Vec<f64> = text
            .lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
            .filter(|l| l.contains(&series))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .collect();
        let value: f64 = values.iter().sum();
        if !values.is_empty() && value >= at_least {
            return value;
        }
        assert!(
            Instant::now() < until,
            "{name}{{{series}}} in {ns} never reached {at_least}: {text}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_spine_link_fails_mid_run_and_comes_back() {
    let _one = serial();
    let Some(tools) = prerequisites("a_spine_link_fails_mid_run_and_comes_back") else {
        return;
    };
    let ends = Ends::new();
    let f = fabric(&tools, &ends, "kf");
    let (t0, up, down) = ends.client_t0(0, 0);
    let (t1, t1_down) = ends.spine_downlink(0, 0);
    let size = 65_536_u64;
    let s = size.to_string();
    let start = f.counters();
    let metrics = format!("127.0.0.1:{METRICS_PORT}");
    // Longer than anything below may take: the test ends the run (SIGINT, the client then
    // reports what ran) once the spine carries traffic again.
    let secs = limit().as_secs().to_string();
    let (mut server, mut client) = start_pair(
        &f,
        &ends,
        &["--check", "-s", &s, "-D", &secs, "--metrics", &metrics],
    );
    // Traffic flows through the spine, then its link from the client's T0 dies until the T0
    // has blackholed what the client sent that way and the client retired EVs of that plane
    // (its live metrics, read in its namespace).
    let flowing = wait_counter(&f, &t1, &t1_down, &start, |c| c.forwarded, 1000);
    let client_ns = f.ns(&ends.client.to_string());
    let retired_before = wait_metric(&client_ns, "mrc_plane_ev_retired_total", "0", 0.0);
    f.script(&["linkdown", &t0, &up]);
    let failed = f.counters();
    wait_metric(
        &client_ns,
        "mrc_plane_ev_retired_total",
        "0",
        retired_before + 1.0,
    );
    wait_counter(&f, &t0, &down, &failed, |c| c.no_route, 1);
    let before_up = f.counters();
    f.script(&["linkup", &t0, &up]);
    // ... and carries traffic again: its EVs were probed back.
    let restored = f.counters();
    wait_counter(&f, &t1, &t1_down, &restored, |c| c.forwarded, 1000);
    client.interrupt();
    let (_, c) = client.finish(limit(), "client");
    let (_, sv) = server.finish(limit(), "server");
    let end = f.counters();
    assert_delivered(&c, &sv, size, None);

    let during = delta(&failed, &before_up, &t1, &t1_down, |c| c.forwarded);
    let blackholed = delta(&flowing, &end, &t0, &down, |c: &IfCounters| c.no_route);
    let by_spine = evs_by_spine(&ends, &c);
    let dead = &by_spine.iter().find(|r| r.0 == (0, 0)).expect("spine 0").1;
    let (timeouts, inferred) = (sum(dead, "timeouts"), sum(dead, "inferred_losses"));
    let qps = qps_of(&c, 0);
    let resent = sum(&qps, "retransmits.timeout") + sum(&qps, "retransmits.inferred");
    // Nothing trims or marks here: an EV through the dead link that changed state retired
    // (ASSUMED_BAD, on a timeout or on losses inferred in a row) and came back.
    let retired: Vec<&&Value> = dead.iter().filter(|e| u(e, "state_changes") > 0).collect();
    println!(
        "{TEST}: {t0} {up} down: {t1} {t1_down} forwarded {during} meanwhile; {t0} \
         blackholed {blackholed} packets; the client counted {timeouts} timeouts and {inferred} \
         inferred losses on the {} EVs through it and resent {resent}; {} of them retired and \
         came back ({} probes answered)",
        dead.len(),
        retired.len(),
        sum(dead, "probes_ok"),
    );
    assert_eq!(
        during, 0,
        "{t1} forwarded towards the server with its uplink down"
    );
    assert!(blackholed > 0, "{t0} dropped nothing while {up} was down");
    assert!(
        timeouts + inferred > 0 && resent > 0,
        "the client saw no loss: {c}"
    );
    assert!(!retired.is_empty(), "no EV through the dead link retired");
    for e in &retired {
        // PROTOCOL.md: three probes answered in a row bring an EV back (and the spine carried
        // traffic again above: the EVs through it were back in use).
        assert!(u(e, "probes_ok") >= 3, "EV never probed back: {e}");
    }
    for ((p, s), evs) in &by_spine {
        if (*p, *s) != (0, 0) {
            assert!(
                sum(evs, "delivered") > 0,
                "plane {p} spine {s} carried nothing"
            );
        }
    }
}

#[test]
fn a_spine_trims_and_the_client_resends_the_trimmed_packets() {
    let _one = serial();
    let Some(tools) = prerequisites("a_spine_trims_and_the_client_resends_the_trimmed_packets")
    else {
        return;
    };
    let ends = Ends::new();
    let f = fabric(&tools, &ends, "kt");
    let (t1, t1_down) = ends.spine_downlink(0, 0);
    let trimmer = Trimmer::attach(
        Box::new(|argv: &[&str]| f.try_on_switches(argv, &[])),
        &f.scratch(),
        TRIM_EVERY,
        &f.ns(&t1),
        &t1_down,
    );
    let (size, iters) = (65_536_u64, 200_u64);
    let (s, n) = (size.to_string(), iters.to_string());
    let (mut server, mut client) = start_pair(&f, &ends, &["--check", "-s", &s, "-n", &n]);
    let (_, c) = client.finish(limit(), "client");
    let (_, sv) = server.finish(limit(), "server");
    assert_delivered(&c, &sv, size, Some(iters));
    let Stats {
        matched,
        trimmed,
        failed,
    } = trimmer.stats();
    let arrived = sum(&qps_of(&sv, 1), "trimmed_received");
    let qps = qps_of(&c, 0);
    let (nacks, resent) = (sum(&qps, "nacks_received"), sum(&qps, "retransmits.trim"));
    println!(
        "{TEST}: {t1} {t1_down} trimmed {trimmed} of {matched} data packets; the server received \
         {arrived} trimmed headers; the client got {nacks} NACKs and resent {resent}"
    );
    assert_eq!(
        trimmed,
        matched / TRIM_EVERY,
        "the trimmer's own arithmetic"
    );
    assert_eq!(failed, 0, "frames the trimmer could not trim");
    assert!(trimmed > 0, "nothing trimmed");
    // The trimmed headers reached the server (at most what was trimmed: a loaded kernel fabric
    // may still drop one), each NACK the client got named a packet in flight and was answered
    // by at most one retransmission (none when its packet was already declared lost: a NACK
    // can trail the inference by milliseconds here).
    assert!(
        arrived > 0 && arrived <= trimmed,
        "{arrived} of {trimmed} trimmed arrived"
    );
    assert!(
        nacks > 0 && nacks <= arrived,
        "{nacks} NACKs for {arrived} trimmed headers"
    );
    assert!(
        resent > 0 && resent <= nacks,
        "{resent} retransmissions for {nacks} NACKs"
    );
    for ((p, s), evs) in evs_by_spine(&ends, &c) {
        let trims = sum(&evs, "trims");
        if (p, s) == (0, 0) {
            assert_eq!(trims, nacks, "the trimming spine's EVs count every NACK");
        } else {
            assert_eq!(trims, 0, "plane {p} spine {s} never trims");
        }
    }
}
