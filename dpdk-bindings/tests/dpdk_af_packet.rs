//! `net_af_packet` over a veth pair in a network namespace (root only): the test makes a
//! namespace with a veth pair (MTU 9000, IPv6 off so the kernel sends nothing of its own), then
//! re-executes itself inside it (`--inner`), where one DPDK process drives both ends as two
//! af_packet ports and sends frames of 60 to 4200 bytes both ways, checking each. Names are
//! unique per run; the namespace (and with it the veths) is deleted on every exit path.

mod common;

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use common::ChildGuard;
use mrc_dpdk::{Eal, MbufBurst, Mempool, MempoolConfig, Port, PortConfig, Queues};

const TEST: &str = "dpdk_af_packet";
const FRAMES: u64 = 2000;
const MIN_LEN: usize = 60;
const MAX_LEN: usize = 4200;
const MTU: u16 = 9000;
/// af_packet ring geometry: `blocksz` must be a multiple of `framesz` (else TX stalls after one
/// ring), and the mbuf data room must hold `framesz` (minus 32) after the headroom.
const FRAMESZ: u16 = 8192;
const BURST: usize = 16;
/// How long the inner process waits for the link, or for a burst to arrive, before it fails:
/// generous, for a loaded machine (each wait ends as soon as it is over).
const WAIT: Duration = Duration::from_mins(1);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if let Some(spec) = args.iter().find_map(|a| a.strip_prefix("--inner=")) {
        let parts: Vec<&str> = spec.split(',').collect();
        return inner(parts[0], parts[1], parts[2]);
    }
    outer()
}

/// Deletes the namespace (and the veths in it) when the test ends, however it ends.
struct NetnsGuard(String);

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn run(args: &[&str]) {
    let status = Command::new(args[0])
        .args(&args[1..])
        .stdin(Stdio::null())
        .status()
        .expect("run a command");
    assert!(status.success(), "`{}` failed: {status}", args.join(" "));
}

fn outer() -> ExitCode {
    if mrc_dpdk::DPDK_VERSION.is_none() {
        return mrc_skip::skip_exit(TEST, "mrc-dpdk was built without DPDK");
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return mrc_skip::skip_exit(TEST, "needs root (network namespaces, AF_PACKET sockets)");
    }
    if Command::new("ip").arg("-V").output().is_err() {
        return mrc_skip::skip_exit(TEST, "`ip` (iproute2) not found");
    }
    let pid = std::process::id();
    let (ns, a, b) = (
        format!("mrcdpdk{pid}"),
        format!("mda{pid}"),
        format!("mdb{pid}"),
    );
    run(&["ip", "netns", "add", &ns]);
    let _ns = NetnsGuard(ns.clone());
    for key in ["all", "default"] {
        run(&[
            "ip",
            "netns",
            "exec",
            &ns,
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{key}.disable_ipv6=1"),
        ]);
    }
    let mtu = MTU.to_string();
    run(&[
        "ip", "-n", &ns, "link", "add", &a, "mtu", &mtu, "type", "veth", "peer", "name", &b, "mtu",
        &mtu,
    ]);
    run(&["ip", "-n", &ns, "link", "set", &a, "up"]);
    run(&["ip", "-n", &ns, "link", "set", &b, "up"]);

    let prefix = common::unique_prefix("afp");
    // Root's DPDK runtime directory; the inner process makes it, we make sure it goes.
    let _dir = common::RuntimeDirGuard(PathBuf::from("/var/run/dpdk").join(&prefix));
    let exe = std::env::current_exe().expect("test binary");
    let child = Command::new("ip")
        .args(["netns", "exec", &ns])
        .arg(exe)
        .arg(format!("--inner={a},{b},{prefix}"))
        .stdin(Stdio::null())
        .spawn()
        .expect("spawn the inner test");
    let status = ChildGuard(Some(child)).wait_for(Duration::from_mins(5));
    assert!(
        status.is_some_and(|s| s.success()),
        "inner test: {status:?}"
    );
    println!(
        "{TEST}: ok: {FRAMES} frames of {MIN_LEN}..={MAX_LEN} bytes each way over a veth pair"
    );
    ExitCode::SUCCESS
}

fn vdev(n: u8, iface: &str) -> String {
    format!("net_af_packet{n},iface={iface},blocksz={FRAMESZ},framesz={FRAMESZ},framecnt=512")
}

fn inner(a: &str, b: &str, prefix: &str) -> ExitCode {
    let eal =
        common::init_eal(&common::eal_args(prefix, "0", &[vdev(0, a), vdev(1, b)])).expect("EAL");
    let pool = Mempool::create(
        &eal,
        &MempoolConfig::new("afp_pool", 4095).frames_up_to(FRAMESZ),
    )
    .expect("pool");
    let (mut port_a, mut qa) = af_port(&eal, &pool, "net_af_packet0");
    let (mut port_b, mut qb) = af_port(&eal, &pool, "net_af_packet1");

    transfer(&pool, &mut qa, &mut qb, 0);
    transfer(&pool, &mut qb, &mut qa, 1_000_000);

    let (sa, sb) = (
        port_a.stats().expect("stats"),
        port_b.stats().expect("stats"),
    );
    assert!(
        sa.opackets >= FRAMES && sb.ipackets >= FRAMES,
        "{sa:?} {sb:?}"
    );
    drop((qa, qb));
    port_a.stop().expect("stop");
    port_b.stop().expect("stop");
    drop((port_a, port_b, pool));
    eal.cleanup().expect("cleanup");
    ExitCode::SUCCESS
}

fn af_port(eal: &Eal, pool: &Mempool, name: &str) -> (Port, Queues) {
    let mut port = Port::by_name(eal, name).expect("af_packet port");
    let info = port.info().expect("info");
    assert_eq!(info.driver, "net_af_packet");
    let mtu = (info.max_rx_frame >= u32::from(MTU) + 18).then_some(MTU);
    let queues = port
        .configure(
            &PortConfig {
                mtu,
                ..PortConfig::default()
            },
            pool,
        )
        .expect("configure");
    port.start().expect("start");
    let deadline = Instant::now() + WAIT;
    while !port.link().expect("link").up {
        assert!(Instant::now() < deadline, "{name}: link never came up");
        std::thread::sleep(Duration::from_millis(10));
    }
    (port, queues)
}

/// Sends FRAMES test frames (sequence numbers from `first`) from `from` to `to`, a burst at a
/// time, waiting for each burst to arrive (the af_packet RX ring is small); checks every frame.
fn transfer(pool: &Mempool, from: &mut Queues, to: &mut Queues, first: u64) {
    let (tx, rx) = (&mut from.tx[0], &mut to.rx[0]);
    let mut out = MbufBurst::<BURST>::new();
    let mut got = MbufBurst::<32>::new();
    let mut next = first;
    let mut seq = first;
    let end = first + FRAMES;
    while next < end {
        while !out.is_full() && seq < end {
            let len = common::frame_len(seq, MIN_LEN, MAX_LEN);
            out.push(common::frame_mbuf(pool, seq, len)).expect("room");
            seq += 1;
        }
        let deadline = Instant::now() + WAIT;
        while next < seq {
            assert!(
                Instant::now() < deadline,
                "frames {next}..{seq} never arrived"
            );
            tx.tx_burst(&mut out);
            rx.rx_burst(&mut got);
            for m in got.drain() {
                match common::check_frame(m.data()) {
                    None => {} // not ours
                    Some(Ok(s)) => {
                        assert_eq!(s, next, "in order, none lost");
                        assert_eq!(
                            m.len(),
                            common::frame_len(s, MIN_LEN, MAX_LEN),
                            "frame {s} length"
                        );
                        next += 1;
                    }
                    Some(Err(e)) => panic!("frame {next}: {e}"),
                }
            }
        }
    }
}
