//! `raw_memif`: raw DPDK frame rate between two processes over `net_memif`, no MRC at all. It is
//! the baseline of the issue-5 benchmark (full MRC stack goodput / raw frame rate over the same
//! memif).
//!
//! ```text
//! raw_memif --frame-size 64 --secs 3          # both sides: this process receives, a child sends
//! raw_memif --role rx --socket /s ...         # or run the two sides by hand
//! raw_memif --role tx --socket /s ...
//! ```
//!
//! Stopping: DPDK 22.11's memif crashes (SIGSEGV) a side that is inside a burst call while its
//! peer disconnects (its control thread unmaps the shared rings under it), and a server whose
//! client leaves first logs a rejected double free ("EAL: Error: Invalid memory"). So the
//! receiver (memif server) ends its window and sends a STOP frame back; the sender, which looks
//! for it every few milliseconds, stops sending, answers ACK and from then on only watches the
//! link; on the ACK the receiver closes its port; the sender sees the link go down and closes
//! a moment later (memif reports the link down before its control thread is done with the
//! disconnect).
//! Each side prints one JSON line and one line of text. Rates count Ethernet frame bytes (no FCS,
//! preamble or inter-frame gap), from the first frame received to the end of the window.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use mrc_dpdk::{
    Eal, HEADROOM, MbufBurst, Mempool, MempoolConfig, Port, PortConfig, Queues, TxQueue,
};
use serde_json::json;

const BURST: usize = 32;
/// Local-experimental EtherType of the frames.
const ETHERTYPE: [u8; 2] = [0x88, 0xb5];
/// Ethernet header + sequence number.
const MIN_FRAME: u16 = 22;
/// The sequence numbers of the receiver's STOP frame and of the sender's answer.
const STOP: u64 = u64::MAX;
const ACK: u64 = u64::MAX - 1;
/// How often the sender looks for the STOP frame and at the link.
const CHECK_EVERY: Duration = Duration::from_millis(5);
/// How long a side waits for its peer (link up, first frame, link down) before giving up.
const PEER_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Role {
    /// Receiver (memif server) here, sender spawned as a child process.
    Pair,
    /// Receiver only (memif server).
    Rx,
    /// Sender only (memif client).
    Tx,
}

#[derive(Parser, Debug, Clone)]
#[command(about = "Raw DPDK frame rate over memif between two processes (the issue-5 baseline)")]
struct Args {
    #[arg(long, value_enum, default_value_t = Role::Pair)]
    role: Role,
    /// Ethernet frame size in bytes (without FCS), 22..=9216.
    #[arg(long, default_value_t = 64)]
    frame_size: u16,
    /// Measurement window of the receiver, in seconds.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// memif socket (abstract name); `pair` picks a unique one.
    #[arg(long)]
    socket: Option<String>,
    /// Lcore (CPU) of the receiver.
    #[arg(long, default_value_t = 0)]
    rx_lcore: u32,
    /// Lcore (CPU) of the sender.
    #[arg(long, default_value_t = 1)]
    tx_lcore: u32,
    /// Extra EAL arguments, appended (e.g. "--in-memory" with hugepages instead of "--no-huge").
    #[arg(long, allow_hyphen_values = true, default_value = "--no-huge -m 512")]
    eal: String,
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !(MIN_FRAME..=9216).contains(&args.frame_size) {
        eprintln!("raw_memif: --frame-size must be {MIN_FRAME}..=9216");
        return ExitCode::FAILURE;
    }
    let result = match args.role {
        Role::Pair => pair(&args),
        Role::Rx => receive(&args, |_| Ok(())),
        Role::Tx => send(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_memif {:?}: {e}", args.role);
            ExitCode::FAILURE
        }
    }
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

/// memif buffer size: one buffer per frame. DPDK's memif corrupts frames that span buffers
/// (client to server, after the ring wraps; see docs/nics.md), and a buffer at least as big as
/// the mbuf data takes its single-copy fast path.
fn memif_bsize(frame_size: u16) -> u16 {
    frame_size.next_multiple_of(128).max(2048)
}

/// One side: EAL (one lcore, unique file prefix) with one memif port. Dropping it tears down in
/// field order: queues, port (stop, close), pool, EAL (cleanup), then its runtime directory.
struct Side {
    queues: Queues,
    port: Port,
    pool: Mempool,
    _eal: Eal,
    dir: RemoveOnDrop,
}

fn side(args: &Args, server: bool, socket: &str) -> Result<Side> {
    let (role, lcore) = if server {
        ("server", args.rx_lcore)
    } else {
        ("client", args.tx_lcore)
    };
    let prefix = format!("mrc-rawmemif-{role}-{}", std::process::id());
    let bsize = memif_bsize(args.frame_size);
    let mut eal_args: Vec<String> = vec![
        "-l".into(),
        lcore.to_string(),
        "--no-pci".into(),
        "--no-shconf".into(),
        "--no-telemetry".into(),
        "--log-level=lib.eal:error".into(),
        "--file-prefix".into(),
        prefix,
        format!(
            "--vdev=net_memif0,role={role},id=0,socket={socket},socket-abstract=yes,bsize={bsize}"
        ),
    ];
    eal_args.extend(args.eal.split_whitespace().map(str::to_owned));
    let eal = Eal::init(&eal_args)?;
    let dir = RemoveOnDrop(eal.runtime_dir());
    let pool_config = MempoolConfig {
        data_room: bsize + HEADROOM,
        ..MempoolConfig::new("raw_memif", 8191)
    };
    let pool = Mempool::create(&eal, &pool_config)?;
    let mut port = Port::by_name(&eal, "net_memif0")?;
    let queues = port.configure(&PortConfig::default(), &pool)?;
    port.start()?;
    Ok(Side {
        queues,
        port,
        pool,
        _eal: eal,
        dir,
    })
}

/// Removes a DPDK runtime directory (ours, of a unique prefix) when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait_link(port: &Port, up: bool) -> Result<()> {
    let deadline = Instant::now() + PEER_TIMEOUT;
    while port.link()?.up != up {
        if Instant::now() > deadline {
            return Err(format!("memif link did not go {}", if up { "up" } else { "down" }).into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(())
}

fn report(
    args: &Args,
    role: &str,
    frames: u64,
    bytes: u64,
    elapsed: Duration,
    extra: serde_json::Value,
) {
    let secs = elapsed.as_secs_f64().max(f64::MIN_POSITIVE);
    let mpps = frames as f64 / secs / 1e6;
    let gbps = bytes as f64 * 8.0 / secs / 1e9;
    let mut line = json!({
        "tool": "raw_memif",
        "role": role,
        "frame_bytes": args.frame_size,
        "burst": BURST,
        "secs": secs,
        "frames": frames,
        "bytes": bytes,
        "mpps": mpps,
        "gbps": gbps,
        "dpdk": mrc_dpdk::DPDK_VERSION,
    });
    if let (Some(line), serde_json::Value::Object(extra)) = (line.as_object_mut(), extra) {
        line.extend(extra);
    }
    println!("{line}");
    println!(
        "raw_memif {role}: {frames} frames of {} B in {secs:.2} s = {mpps:.3} Mpps, {gbps:.2} Gb/s",
        args.frame_size
    );
}

/// Receiver: counts frames for `secs` from the first one, checks the sequence numbers, then
/// stops first (see the top of the file). `on_ready` runs once the port is up (the pair mode
/// starts the sender there); it gets the directory that holds the DPDK runtime directories.
fn receive(args: &Args, on_ready: impl FnOnce(&Path) -> Result<()>) -> Result<()> {
    let socket = args.socket.as_deref().ok_or("--role rx needs --socket")?;
    let mut side = side(args, true, socket)?;
    on_ready(side.dir.0.parent().unwrap_or(Path::new("")))?;
    let rx = &mut side.queues.rx[0];
    let window = Duration::from_secs_f64(args.secs);
    let mut burst = MbufBurst::<BURST>::new();
    let (mut frames, mut bytes, mut gaps) = (0_u64, 0_u64, 0_u64);
    let mut next_seq = None;
    let waiting_since = Instant::now();
    let mut start = None;
    loop {
        let now = Instant::now(); // one timestamp per iteration
        match start {
            Some(t0) if now - t0 >= window => break,
            None if now - waiting_since > PEER_TIMEOUT => return Err("no frame arrived".into()),
            _ => {}
        }
        if rx.rx_burst(&mut burst) == 0 {
            continue;
        }
        start.get_or_insert(now);
        for m in burst.iter() {
            let seq = frame_seq(m.data());
            if next_seq.is_some() && next_seq != seq {
                gaps += 1;
            }
            next_seq = seq.map(|s| s + 1);
            bytes += m.len() as u64;
        }
        frames += burst.len() as u64;
        burst.clear();
    }
    let elapsed = start.map_or(Duration::ZERO, |t0| t0.elapsed());
    let stats = side.port.stats()?;

    // Tell the sender to stop; close once it answered (it only watches the link by then).
    send_control(&side.pool, &mut side.queues.tx[0], STOP)?;
    let deadline = Instant::now() + PEER_TIMEOUT;
    let mut acked = false;
    while !acked && Instant::now() < deadline {
        rx.rx_burst(&mut burst);
        acked = burst.iter().any(|m| frame_seq(m.data()) == Some(ACK));
        burst.clear();
    }
    if !acked {
        drop(side);
        return Err("the sender never answered STOP".into());
    }
    // The figures are final: report them before the teardown, which DPDK 22.11's memif
    // still crashes now and then (SIGSEGV on EAL's interrupt thread as the peer disconnects;
    // perf/nic_memif.sh retries a run that printed nothing).
    let extra = json!({ "seq_gaps": gaps, "imissed": stats.imissed });
    report(args, "rx", frames, bytes, elapsed, extra);
    drop(side);
    Ok(())
}

/// Sends one control frame (STOP or ACK), retrying while the ring is full.
fn send_control(pool: &Mempool, tx: &mut TxQueue, what: u64) -> Result<()> {
    let mut frame = pool.alloc()?;
    template(frame.append(usize::from(MIN_FRAME))?, what);
    let mut burst = MbufBurst::<1>::new();
    burst
        .push(frame)
        .map_err(|_| "an empty burst takes a frame")?;
    let deadline = Instant::now() + PEER_TIMEOUT;
    while !burst.is_empty() {
        if Instant::now() > deadline {
            return Err("the peer's ring stayed full".into());
        }
        tx.tx_burst(&mut burst);
    }
    Ok(())
}

/// Sender: as fast as the ring takes them, until the receiver says STOP.
fn send(args: &Args) -> Result<()> {
    let socket = args.socket.as_deref().ok_or("--role tx needs --socket")?;
    let mut side = side(args, false, socket)?;
    wait_link(&side.port, true)?;
    let Side {
        queues, port, pool, ..
    } = &mut side;
    let (tx, rx) = (&mut queues.tx[0], &mut queues.rx[0]);
    let len = usize::from(args.frame_size);
    let mut burst = MbufBurst::<BURST>::new();
    let mut control = MbufBurst::<BURST>::new();
    let (mut seq, mut bytes) = (0_u64, 0_u64);
    let start = Instant::now();
    let mut last_check = start;
    loop {
        let now = Instant::now(); // one timestamp per iteration
        if now - last_check > CHECK_EVERY {
            last_check = now;
            rx.rx_burst(&mut control);
            let stop = control.iter().any(|m| frame_seq(m.data()) == Some(STOP));
            control.clear();
            if stop {
                send_control(pool, tx, ACK)?;
                // The receiver closes now; no more bursts here. The close that follows
                // needs no grace period: mrc-dpdk serialises it with memif's own teardown.
                wait_link(port, false)?;
                break;
            }
            if !port.link()?.up {
                return Err("the receiver left without STOP".into());
            }
            if now - start > Duration::from_secs_f64(args.secs) + PEER_TIMEOUT {
                return Err("the receiver never said STOP".into());
            }
        }
        let have = burst.len();
        if pool.alloc_bulk(&mut burst, BURST - have).is_ok() {
            for m in &mut burst[have..] {
                // The header template patched with the sequence number; the body is whatever
                // the buffer held (memif copies it all the same).
                template(m.append(len)?, seq);
                seq += 1;
            }
        }
        let sent = tx.tx_burst(&mut burst); // refused frames stay for the next round
        bytes += (sent * len) as u64;
    }
    let elapsed = start.elapsed();
    let sent = seq - burst.len() as u64;
    drop(burst);
    drop(side);
    report(args, "tx", sent, bytes, elapsed, json!({}));
    Ok(())
}

/// Writes our header into the first 22 bytes of `frame`: Ethernet, then the sequence number.
fn template(frame: &mut [u8], seq: u64) {
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    frame[12..14].copy_from_slice(&ETHERTYPE);
    frame[14..22].copy_from_slice(&seq.to_be_bytes());
}

/// The sequence number of one of our frames.
fn frame_seq(frame: &[u8]) -> Option<u64> {
    if frame.get(12..14)? != ETHERTYPE {
        return None;
    }
    Some(u64::from_be_bytes(frame.get(14..22)?.try_into().ok()?))
}

/// Both sides: this process receives, a child process sends (on another lcore), started once
/// the memif server is listening.
fn pair(args: &Args) -> Result<()> {
    let socket = format!("/mrc-rawmemif-{}.sock", std::process::id());
    let rx_args = Args {
        role: Role::Rx,
        socket: Some(socket.clone()),
        ..args.clone()
    };
    let mut sender = None;
    receive(&rx_args, |runtime_dirs| {
        let child = Command::new(std::env::current_exe()?)
            .args(["--role", "tx", "--socket", &socket])
            .arg(format!("--frame-size={}", args.frame_size))
            .arg(format!("--secs={}", args.secs))
            .arg(format!("--rx-lcore={}", args.rx_lcore))
            .arg(format!("--tx-lcore={}", args.tx_lcore))
            .arg(format!("--eal={}", args.eal))
            .stdin(Stdio::null())
            .spawn()?;
        let dir = runtime_dirs.join(format!("mrc-rawmemif-client-{}", child.id()));
        sender = Some(KillOnDrop(child, dir));
        Ok(())
    })?;
    let mut sender = sender.ok_or("the sender was not started")?;
    let deadline = Instant::now() + PEER_TIMEOUT;
    loop {
        if let Some(status) = sender.0.try_wait()? {
            return if status.success() {
                Ok(())
            } else {
                Err(format!("sender: {status}").into())
            };
        }
        if Instant::now() > deadline {
            return Err("the sender did not exit".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Kills the sender if the pair ends early, and removes its runtime directory (which a sender
/// that exits normally removes itself).
struct KillOnDrop(Child, PathBuf);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
        // Gone already if the sender exited cleanly.
        let _ = std::fs::remove_dir_all(&self.1);
    }
}
