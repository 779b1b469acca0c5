//! Two DPDK processes over `net_memif` (shared-memory packet interface): this test binary is
//! the receiver (memif server) and re-executes itself as the sender (memif client, `--sender`).
//! Frames of 60 to 4200 bytes (4 KB payloads need a jumbo MTU) carry a sequence number and a
//! checksum; the receiver checks each, in order, and stops first (the memif server of DPDK
//! 22.11 can crash if its client disconnects while it still polls); the sender then sees the
//! link go down and exits.

mod common;

use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use common::ChildGuard;
use mrc_dpdk::{Eal, MbufBurst, Mempool, MempoolConfig, Port, PortConfig, Queues};

const TEST: &str = "dpdk_memif";
const FRAMES: u64 = 20_000;
const MIN_LEN: usize = 60;
const MAX_LEN: usize = 4200;
const MTU: u16 = 9000;
const LIMIT: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    match args.iter().find_map(|a| a.strip_prefix("--sender=")) {
        Some(socket_and_prefix) => {
            let (socket, prefix) = socket_and_prefix
                .split_once(',')
                .expect("--sender=SOCKET,PREFIX");
            sender(socket, prefix)
        }
        None => receiver(),
    }
}

/// `bsize=9216`: every frame fits one memif buffer. With the default 2048, DPDK's memif
/// (22.11, and main as of this writing) corrupts client-to-server traffic: its copy-mode TX sets
/// the NEXT flag on the descriptors of a frame that spans buffers but never clears it on a
/// frame's first descriptor, so once the ring wraps, a short frame landing on such a slot gets
/// the next frame glued to it (seen here as frame 666 = frames 666 + 667).
fn vdev(role: &str, socket: &str) -> String {
    format!("net_memif0,role={role},id=0,socket={socket},socket-abstract=yes,bsize=9216")
}

/// Sets up the one memif port of this process: jumbo MTU, one queue pair, started.
fn memif_port(eal: &Eal, pool: &Mempool) -> (Port, Queues) {
    let mut port = Port::by_name(eal, "net_memif0").expect("memif port");
    let info = port.info().expect("info");
    assert_eq!(info.driver, "net_memif");
    // memif of DPDK 22.11 reports a 1518-byte max frame (so ethdev refuses a jumbo MTU) but
    // carries bigger frames anyway, chaining its 2 KB buffers: keep the MTU where allowed.
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
    (port, queues)
}

fn pool(eal: &Eal) -> Mempool {
    Mempool::create(
        eal,
        &MempoolConfig::new("memif_pool", 8191).frames_up_to(MTU + 18),
    )
    .expect("pool")
}

fn receiver() -> ExitCode {
    let prefix = common::unique_prefix("memif-rx");
    // An abstract socket name: nothing to clean up in the filesystem.
    let socket = format!("/{prefix}.sock");
    let eal = match common::init_eal(&common::eal_args(&prefix, "0", &[vdev("server", &socket)])) {
        Ok(eal) => eal,
        Err(why) => return mrc_skip::skip_exit(TEST, &why),
    };
    let _dir = common::RuntimeDirGuard::new(&eal);
    let pool = pool(&eal);
    let (mut port, mut queues) = memif_port(&eal, &pool);

    let exe = std::env::current_exe().expect("test binary");
    let child_prefix = common::unique_prefix("memif-tx");
    // Removes the sender's runtime directory too, should it have to be killed.
    let _child_dir = common::RuntimeDirGuard(eal.runtime_dir().with_file_name(&child_prefix));
    let child = Command::new(exe)
        .arg(format!("--sender={socket},{child_prefix}"))
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn sender");
    let mut child = ChildGuard(Some(child));
    // What the sender's EAL prints; read to the end on a thread so the pipe never fills.
    let mut sender_err = child
        .0
        .as_mut()
        .and_then(|c| c.stderr.take())
        .expect("stderr");
    let sender_err = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut sender_err, &mut text);
        text
    });

    let mut next = 0_u64;
    let mut burst = MbufBurst::<32>::new();
    let deadline = Instant::now() + LIMIT;
    while next < FRAMES && Instant::now() < deadline {
        if queues.rx[0].rx_burst(&mut burst) == 0 {
            if let Some(status) = child.0.as_mut().and_then(|c| c.try_wait().ok().flatten()) {
                panic!("the sender exited early ({status}) after {next} frames");
            }
            continue;
        }
        for m in burst.drain() {
            let seq = match common::check_frame(m.data()) {
                Some(Ok(seq)) => seq,
                other => panic!("frame {next}: {other:?}"),
            };
            assert!(m.is_contiguous(), "the data room holds a whole jumbo frame");
            assert_eq!(seq, next, "in order, none lost");
            assert_eq!(
                m.len(),
                common::frame_len(seq, MIN_LEN, MAX_LEN),
                "frame {seq} length"
            );
            next += 1;
        }
    }
    let stats = port.stats().expect("stats");
    // Receiver stops first; the sender sees the link go down and exits.
    drop(queues);
    port.stop().expect("stop");
    let status = child.wait_for(LIMIT);
    assert_eq!(next, FRAMES, "received {next} of {FRAMES} frames");
    assert_eq!(stats.ipackets, FRAMES, "{stats:?}");
    assert!(status.is_some_and(|s| s.success()), "sender: {status:?}");
    // The sender closes its port right after it saw the link go down, while memif's control
    // thread may still be tearing the connection down: the bindings serialise the two (see
    // `mrc_shim_dev_close`); a double free shows as DPDK's "Invalid memory".
    let sender_err = sender_err.join().expect("stderr reader");
    eprint!("{sender_err}");
    assert!(
        !sender_err.contains("Invalid memory") && !sender_err.contains("panicked"),
        "sender: {sender_err}"
    );
    drop(port);
    drop(pool);
    eal.cleanup().expect("cleanup");
    println!("{TEST}: ok: {FRAMES} frames of {MIN_LEN}..={MAX_LEN} bytes checked");
    ExitCode::SUCCESS
}

fn sender(socket: &str, prefix: &str) -> ExitCode {
    // Its own core when there is one: two busy-polling processes on one core starve each other.
    let lcore = if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        "1"
    } else {
        "0"
    };
    let eal =
        common::init_eal(&common::eal_args(prefix, lcore, &[vdev("client", socket)])).expect("EAL");
    let _dir = common::RuntimeDirGuard::new(&eal);
    let pool = pool(&eal);
    let (mut port, mut queues) = memif_port(&eal, &pool);
    let tx = &mut queues.tx[0];

    wait_link(&port, true, "up");
    let mut seq = 0_u64;
    let mut burst = MbufBurst::<32>::new();
    let deadline = Instant::now() + LIMIT;
    while (seq < FRAMES || !burst.is_empty()) && Instant::now() < deadline {
        while !burst.is_full() && seq < FRAMES {
            let len = common::frame_len(seq, MIN_LEN, MAX_LEN);
            burst
                .push(common::frame_mbuf(&pool, seq, len))
                .expect("room");
            seq += 1;
        }
        tx.tx_burst(&mut burst); // what the ring refused stays in the burst for the next round
    }
    assert!(
        seq == FRAMES && burst.is_empty(),
        "sender: only {seq} frames built, {} unsent",
        burst.len()
    );
    wait_link(&port, false, "down (receiver stopped)");
    drop(burst);
    drop(queues);
    port.stop().expect("stop");
    drop(port);
    drop(pool);
    eal.cleanup().expect("cleanup");
    ExitCode::SUCCESS
}

fn wait_link(port: &Port, up: bool, what: &str) {
    let deadline = Instant::now() + LIMIT;
    while port.link().expect("link").up != up {
        assert!(Instant::now() < deadline, "memif link never went {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}
