//! `nic_memif`: goodput of the full MRC stack between two processes over `net_memif` — the
//! application posts RDMA Writes through a `NicHandle`, the engine builds the frames into
//! mbufs, memif carries them, the peer's engine places the payload into registered memory and
//! acknowledges. Compare with `raw_memif` (same memif, no MRC) in the same run:
//! `perf/nic_memif.sh` runs both and prints the ratio.
//!
//! ```text
//! nic_memif --size 4096 --secs 3      # this process receives (memif server), a child sends
//! nic_memif --size 64 --secs 3        # the 64-byte message rate
//! nic_memif --print-frame-size --size 4096   # the Ethernet frame of one data packet
//! ```
//!
//! Each side runs its NIC loop and its application on one thread (one lcore, as `raw_memif`
//! gives each side one): `NicRunner::poll_once`, then the completions, then new posts. The
//! sender keeps `--window` signalled Writes of `--size` bytes outstanding, counts completed
//! bytes over `--secs` after a warm-up, then drains. Stopping follows the memif rules of
//! docs/nics.md: the sender stops polling first and says so (on the pipe between the two
//! processes), the receiver then closes its port, the sender closes ~100 ms after its link
//! went down. Output: one JSON line per side (the parent prints the sender's too), then one
//! line of text.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::{Parser, ValueEnum};
use mrc_dpdk::Eal;
use mrc_nic::io::dpdk::{DpdkIo, DpdkPorts};
use mrc_nic::{IdlePolicy, MemoryRegion, NicConfig, NicHandle, NicRunner};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::cc::CcProfile;
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, MrKeys, QpCap, QpInitAttr, QpTransition, Qpn, RemoteNic, RtrAttr,
    RtsAttr, SendOpcode, SendWr, Sge, WcStatus, WorkCompletion,
};
use mrc_transport::wire::icrc::ICRC_LEN;
use mrc_transport::wire::{BTH_LEN, METH_LEN, RETH_LEN, TSETH_LEN, UDP_HEADER_LEN};
use mrc_transport::{EndpointConfig, PathMode, PortConfig};
use serde_json::json;

const VA: u64 = 0x4000_0000;
/// Time to let the window and the congestion controller settle before measuring.
const WARMUP: Duration = Duration::from_millis(500);
/// How long a side waits for its peer before giving up.
const PEER_TIMEOUT: Duration = Duration::from_secs(20);

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Role {
    /// Receiver here (memif server), sender as a child process.
    Pair,
    /// The sender (memif client), talking to its parent on stdin/stdout.
    Tx,
}

#[derive(Parser, Debug, Clone)]
#[command(about = "Full-stack MRC goodput over memif between two processes (issue-5 benchmark)")]
struct Args {
    #[arg(long, value_enum, default_value_t = Role::Pair)]
    role: Role,
    /// Bytes per RDMA Write (one data packet up to the 4096-byte payload MTU).
    #[arg(long, default_value_t = 4096)]
    size: u32,
    /// Measurement window of the sender, in seconds.
    #[arg(long, default_value_t = 3.0)]
    secs: f64,
    /// Writes kept outstanding.
    #[arg(long, default_value_t = 1024)]
    window: u32,
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
    /// Buffers of `--size` bytes the Writes cycle through, on each side. 1 (perftest's
    /// default: every Write from and to the same buffer) keeps the payload in cache, as
    /// `raw_memif`'s frames are; more measure the memory traffic of placement too.
    #[arg(long, default_value_t = 1)]
    slots: u32,
    /// Congestion window of the engine (a fixed window: see `side`), in bytes.
    #[arg(long, default_value_t = 8 << 20)]
    cc_window: u64,
    /// Smallest per-packet loss timeout of the engine, in microseconds (see `side`).
    #[arg(long, default_value_t = 100_000)]
    pto_min_us: u64,
    /// Print the Ethernet frame size of one data packet of `--size` bytes and exit (what
    /// `raw_memif --frame-size` must send to be compared).
    #[arg(long)]
    print_frame_size: bool,
}

type Result<T> = std::result::Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn main() -> ExitCode {
    let args = Args::parse();
    if args.print_frame_size {
        println!("{}", data_frame_len(args.size));
        return ExitCode::SUCCESS;
    }
    if !(1..=4096).contains(&args.size) || args.window == 0 || args.slots == 0 {
        eprintln!("nic_memif: --size must be 1..=4096, --window and --slots at least 1");
        return ExitCode::FAILURE;
    }
    let result = match args.role {
        Role::Pair => receive(&args),
        Role::Tx => send(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nic_memif {:?}: {e}", args.role);
            ExitCode::FAILURE
        }
    }
}

/// Ethernet frame bytes of one ECMP-mode Write packet carrying `payload` bytes (BTH, METH,
/// TSETH, RETH, payload padded to 4, ICRC).
fn data_frame_len(payload: u32) -> usize {
    14 + 40
        + UDP_HEADER_LEN
        + BTH_LEN
        + METH_LEN
        + TSETH_LEN
        + RETH_LEN
        + (payload as usize).next_multiple_of(4)
        + ICRC_LEN
}

/// Bytes per mbuf and per memif buffer: the engine's largest frame, rounded up.
const FRAME_ROOM: u16 = 4352;

fn nic_addr(i: u16) -> std::net::Ipv6Addr {
    std::net::Ipv6Addr::new(0xfd00, 0x6d72, 0x63, 0xbe, 0, 0, 0, i + 1)
}

/// One side: its EAL, and a NIC over one memif port polled by this thread.
struct Side {
    runner: NicRunner<DpdkIo>,
    handle: NicHandle,
    _eal: Eal,
    dir: std::path::PathBuf,
}

impl Drop for Side {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn side(args: &Args, server: bool, socket: &str) -> Result<Side> {
    let (role, lcore, host) = if server {
        ("server", args.rx_lcore, 0)
    } else {
        ("client", args.tx_lcore, 1)
    };
    let prefix = format!("mrc-nicmemif-{role}-{}", std::process::id());
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
            "--vdev=net_memif0,role={role},id=0,socket={socket},socket-abstract=yes,bsize={FRAME_ROOM}"
        ),
    ];
    eal_args.extend(args.eal.split_whitespace().map(str::to_owned));
    let eal = Eal::init(&eal_args)?;
    let dir = eal.runtime_dir();
    let mut ports = DpdkPorts::new(["net_memif0"]);
    ports.frame_room = FRAME_ROOM;
    ports.mbufs = 16383;
    ports.promiscuous = false;
    let io = ports.open(&eal)?.pop().ok_or("no engine")?;
    let mac = EthernetAddress([0x02, 0, 0, 0, 0, 0x10 + host as u8]);
    let endpoint = EndpointConfig::new(
        7 + u64::from(host),
        nic_addr(host),
        vec![PortConfig::new(
            mac,
            EthernetAddress([0x02, 0, 0, 0, 0, 0x11 - host as u8]),
        )],
        PathMode::Ecmp,
    );
    let mut endpoint = endpoint;
    // The window, not congestion control, is what this measures: a memif "link" between two
    // processes on a shared machine has a bandwidth-delay product set by the scheduler.
    endpoint.cc_profiles = vec![CcProfile::Fixed {
        window_bytes: Some(args.cc_window),
    }];
    // memif does not lose frames; what looks like loss on a shared machine is a peer that was
    // not scheduled for a few milliseconds. Loss timers above that keep such stalls from
    // turning into spurious retransmissions.
    endpoint.timers.initial_rtt = mrc_transport::Duration::from_micros(args.pto_min_us / 4);
    endpoint.timers.pto_min = mrc_transport::Duration::from_micros(args.pto_min_us);
    let mut config = NicConfig::new(endpoint);
    config.idle = IdlePolicy::Spin;
    let (runner, handle) = NicRunner::new(config, io)?;
    Ok(Side {
        runner,
        handle,
        _eal: eal,
        dir,
    })
}

/// What the peer needs: address, QPN, rkey.
fn peer_line(qpn: Qpn, rkey: u32, host: u16) -> String {
    format!("PEER {} {} {rkey}", nic_addr(host), qpn.0)
}

fn parse_peer(line: &str) -> Result<(std::net::Ipv6Addr, Qpn, u32)> {
    let w: Vec<&str> = line.split_whitespace().collect();
    match w.as_slice() {
        ["PEER", addr, qpn, rkey] => Ok((addr.parse()?, Qpn(qpn.parse()?), rkey.parse()?)),
        _ => Err(format!("bad peer line {line:?}").into()),
    }
}

/// PD, CQ, QP (INIT) and one region of `bytes`, through the control path (the caller polls).
fn setup(handle: &NicHandle, bytes: usize) -> Result<(Qpn, CqHandle, MrKeys, MemoryRegion)> {
    let pd = handle.alloc_pd()?;
    let cq = handle.create_cq(8192)?;
    let qpn = handle.create_qp(&QpInitAttr {
        pd,
        send_cq: cq,
        recv_cq: cq,
        cap: QpCap {
            max_send_wr: 8192,
            max_recv_wr: 16,
            max_send_sge: 1,
        },
        sq_sig_all: false,
    })?;
    handle.modify_qp(qpn, QpTransition::Init(InitAttr::default()))?;
    let region = MemoryRegion::new(bytes);
    let keys = handle.reg_mr(pd, VA, &region, Access::LOCAL_WRITE | Access::REMOTE_WRITE)?;
    Ok((qpn, cq, keys, region))
}

/// INIT → RTR → RTS, with a PSN window (MPR) that holds `window` one-packet messages.
fn connect(
    handle: &NicHandle,
    qpn: Qpn,
    peer: (std::net::Ipv6Addr, Qpn, u32),
    window: u32,
) -> Result<()> {
    let remote = RemoteNic {
        addr: peer.0,
        host: None,
    };
    let mpr = window.next_multiple_of(64).max(1024);
    let mut rtr = RtrAttr::new(remote, peer.1, 1);
    rtr.mpr = mpr;
    handle.modify_qp(qpn, QpTransition::Rtr(rtr))?;
    let mut rts = RtsAttr::new(1);
    rts.mpr = mpr;
    handle.modify_qp(qpn, QpTransition::Rts(rts))?;
    Ok(())
}

/// Lines from a pipe, read on a helper thread.
fn lines(r: impl std::io::Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines().map_while(std::result::Result::ok) {
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// Polls the NIC until a line arrives on `rx`.
fn poll_until_line(side: &mut Side, rx: &mpsc::Receiver<String>) -> Result<String> {
    let deadline = Instant::now() + PEER_TIMEOUT;
    let mut i = 0_u32;
    loop {
        side.runner.poll_once();
        i = i.wrapping_add(1);
        if i.is_multiple_of(1024) {
            match rx.try_recv() {
                Ok(line) => return Ok(line),
                Err(mpsc::TryRecvError::Disconnected) => return Err("the peer went away".into()),
                Err(mpsc::TryRecvError::Empty) if Instant::now() > deadline => {
                    return Err("the peer said nothing".into());
                }
                Err(mpsc::TryRecvError::Empty) => {}
            }
        }
    }
}

/// Receiver (memif server): sets up, starts the sender, polls until it says it stopped.
fn receive(args: &Args) -> Result<()> {
    let socket = format!("/mrc-nicmemif-{}.sock", std::process::id());
    let mut side = side(args, true, &socket)?;
    let h = side.handle.clone();
    let bytes = (args.slots * args.size) as usize;
    let (qpn, _cq, keys, _region) = side.runner.poll_while(move || setup(&h, bytes))?;

    let mut child = KillOnDrop(
        Command::new(std::env::current_exe()?)
            .args(["--role", "tx", "--socket", &socket])
            .arg(format!("--size={}", args.size))
            .arg(format!("--secs={}", args.secs))
            .arg(format!("--window={}", args.window))
            .arg(format!("--slots={}", args.slots))
            .arg(format!("--cc-window={}", args.cc_window))
            .arg(format!("--pto-min-us={}", args.pto_min_us))
            .arg(format!("--rx-lcore={}", args.rx_lcore))
            .arg(format!("--tx-lcore={}", args.tx_lcore))
            .arg(format!("--eal={}", args.eal))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()?,
    );
    let mut to_child = child.0.stdin.take().ok_or("no stdin")?;
    let from_child = lines(child.0.stdout.take().ok_or("no stdout")?);
    writeln!(to_child, "{}", peer_line(qpn, keys.rkey, 0))?;
    let peer = parse_peer(&poll_until_line(&mut side, &from_child)?)?;
    let h = side.handle.clone();
    let window = args.window;
    side.runner
        .poll_while(move || connect(&h, qpn, peer, window))?;

    // Serve until the sender has stopped polling: its RESULT line says so.
    let start = Instant::now();
    let result = loop {
        let line = poll_until_line(&mut side, &from_child)?;
        if let Some(json) = line.strip_prefix("RESULT ") {
            break json.to_owned();
        }
    };
    let elapsed = start.elapsed();
    let stats = side.runner.stats();
    let endpoint = side.handle.clone();
    let placed = side.runner.poll_while(move || endpoint.endpoint_stats())?;
    drop(side); // closes the memif server port
    let status = child.wait(PEER_TIMEOUT)?;
    if !status.success() {
        return Err(format!("sender: {status}").into());
    }
    println!("{result}");
    println!(
        "{}",
        json!({
            "tool": "nic_memif",
            "role": "rx",
            "payload_bytes": args.size,
            "secs": elapsed.as_secs_f64(),
            "frames_in": stats.io.rx_frames,
            "bytes_in": stats.io.rx_bytes,
            "frames_out": stats.io.tx_frames,
            "frames_received_by_engine": placed.frames_received,
            "engine_drops": format!("{:?}", placed.drops),
            "rx_dropped": stats.io.rx_dropped,
        })
    );
    let r: serde_json::Value = serde_json::from_str(&result)?;
    println!(
        "nic_memif: {} B Writes: {:.3} M messages/s, goodput {:.2} Gb/s ({} completed in {:.2} s, window {})",
        args.size,
        r["msg_mpps"].as_f64().unwrap_or(0.0),
        r["goodput_gbps"].as_f64().unwrap_or(0.0),
        r["messages"],
        r["secs"].as_f64().unwrap_or(0.0),
        args.window
    );
    Ok(())
}

/// Sender (memif client): sets up, exchanges, posts Writes for the window, drains, reports.
fn send(args: &Args) -> Result<()> {
    let socket = args.socket.as_deref().ok_or("--role tx needs --socket")?;
    let mut side = side(args, false, socket)?;
    let h = side.handle.clone();
    let bytes = (args.slots * args.size) as usize;
    let (qpn, cq, keys, _region) = side.runner.poll_while(move || setup(&h, bytes))?;
    let from_parent = lines(std::io::stdin());
    let say = |line: &str| -> Result<()> {
        let mut out = std::io::stdout().lock();
        writeln!(out, "{line}")?;
        out.flush()?;
        Ok(())
    };
    say(&peer_line(qpn, keys.rkey, 1))?;
    let peer = parse_peer(&poll_until_line(&mut side, &from_parent)?)?;
    let h = side.handle.clone();
    let window = args.window;
    side.runner.poll_while(move || -> Result<()> {
        connect(&h, qpn, peer, window)?;
        let deadline = Instant::now() + PEER_TIMEOUT;
        while !h.ports()?.iter().all(|p| p.usable) {
            if Instant::now() > deadline {
                return Err("the memif link did not come up".into());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(())
    })?;

    let mut traffic = Writes {
        qpn,
        lkey: keys.lkey,
        rkey: peer.2,
        size: args.size,
        window: args.window,
        slots: args.slots,
        outstanding: 0,
        next: 0,
        completed: 0,
        errors: 0,
    };
    let handle = side.handle.clone();
    let mut wcs = [WorkCompletion::EMPTY; 64];
    let begin = Instant::now();
    let window = Duration::from_secs_f64(args.secs);
    let mut measured: Option<(Instant, u64)> = None;
    let mut end = None;
    loop {
        let now = Instant::now();
        if measured.is_none() && now - begin >= WARMUP {
            measured = Some((now, traffic.completed));
        }
        if let Some((t0, _)) = measured
            && end.is_none()
            && now - t0 >= window
        {
            end = Some((now, traffic.completed));
        }
        side.runner.poll_once();
        let n = handle.poll_cq(cq, &mut wcs)?;
        traffic.completed_batch(&wcs[..n]);
        if end.is_none() {
            traffic.post(&handle);
        } else if traffic.outstanding == 0 || now - begin > window + WARMUP + PEER_TIMEOUT {
            break;
        }
    }
    let stats = side.runner.stats();
    let h = side.handle.clone();
    let qp = side
        .runner
        .poll_while(move || h.qp_stats(qpn))?
        .unwrap_or_default();
    // Stop polling, tell the receiver, wait for it to close, then close.
    let ((t0, c0), (t1, c1)) = (measured.ok_or("no warm-up")?, end.ok_or("no end")?);
    let secs = (t1 - t0).as_secs_f64();
    let messages = c1 - c0;
    let result = json!({
        "tool": "nic_memif",
        "role": "tx",
        "payload_bytes": args.size,
        "frame_bytes": data_frame_len(args.size),
        "window": args.window,
        "slots": args.slots,
        "cc_window_bytes": args.cc_window,
        "pto_min_us": args.pto_min_us,
        "secs": secs,
        "messages": messages,
        "msg_mpps": messages as f64 / secs / 1e6,
        "goodput_gbps": (messages * u64::from(args.size)) as f64 * 8.0 / secs / 1e9,
        "errors": traffic.errors,
        "frames_out": stats.io.tx_frames,
        "frames_in": stats.io.rx_frames,
        "tx_refused": stats.io.tx_refused,
        "tx_dropped": stats.io.tx_dropped,
        "doorbells_deferred": stats.doorbells_deferred,
        "data_packets_sent": qp.data_packets_sent,
        "retransmits": format!("{:?}", qp.retransmits),
        "timeouts": qp.timeouts,
        "sacks_received": qp.sacks_received,
        "acks_received": qp.acks_received,
        "srtt_us": qp.srtt_ns as f64 / 1e3,
        "min_rtt_us": qp.min_rtt_ns as f64 / 1e3,
        "dpdk": mrc_dpdk::DPDK_VERSION,
    });
    say(&format!("RESULT {result}"))?;
    let ports = side.runner.io().ports().clone();
    let deadline = Instant::now() + PEER_TIMEOUT;
    while ports.link(0).is_some_and(|l| l.up) {
        if Instant::now() > deadline {
            return Err("the receiver never closed".into());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // No grace period: mrc-dpdk serialises the close with memif's own teardown.
    drop(ports);
    drop(side);
    if traffic.errors > 0 {
        return Err(format!("{} Writes failed", traffic.errors).into());
    }
    Ok(())
}

/// The sender's application: `window` signalled Writes of `size` bytes in flight, cycling
/// through `slots` buffers (the same slot on both sides).
struct Writes {
    qpn: Qpn,
    lkey: u32,
    rkey: u32,
    size: u32,
    window: u32,
    slots: u32,
    outstanding: u32,
    next: u64,
    completed: u64,
    errors: u64,
}

impl Writes {
    fn post(&mut self, handle: &NicHandle) {
        while self.outstanding < self.window {
            let slot = (self.next % u64::from(self.slots)) * u64::from(self.size);
            let sge = [Sge {
                addr: VA + slot,
                length: self.size,
                lkey: self.lkey,
            }];
            let wr = SendWr {
                wr_id: self.next,
                opcode: SendOpcode::Write,
                sg_list: &sge,
                remote_addr: VA + slot,
                rkey: self.rkey,
                signaled: true,
            };
            if handle.post_send(self.qpn, &wr).is_err() {
                return; // doorbell ring full: next iteration
            }
            self.next += 1;
            self.outstanding += 1;
        }
    }

    fn completed_batch(&mut self, wcs: &[WorkCompletion]) {
        for wc in wcs {
            self.outstanding = self.outstanding.saturating_sub(1);
            if wc.status == WcStatus::Success {
                self.completed += 1;
            } else {
                self.errors += 1;
            }
        }
    }
}

/// Kills the sender if the receiver ends early.
struct KillOnDrop(Child);

impl KillOnDrop {
    fn wait(&mut self, limit: Duration) -> Result<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.0.try_wait()? {
                return Ok(status);
            }
            if Instant::now() > deadline {
                return Err("the sender did not exit".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
