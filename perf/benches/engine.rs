//! The engine's cost per data packet, sender and receiver together: two `Endpoint`s in one
//! thread, A's frames handed straight to B and B's SACKs back to A, no network model. One
//! iteration moves a 256-packet Write and its acknowledgements; criterion reports packets per
//! second (Melem/s = Mpps per core). A plain `memcpy` of the same bytes is measured in the
//! same run, and the summary at the end prints Mpps at 64 B, 1 KiB and 4 KiB and, at 4 KiB,
//! the ratio of engine throughput to that of the faster of memcpy and the NIC's
//! registered-memory copy (where glibc's memcpy is slow at 4 KiB, memcpy alone would flatter
//! the engine).
//!
//! `cargo bench -p mrc-perf-bench --bench engine -- --quick`

use std::fmt::Write as _;
use std::hint::black_box;
use std::net::Ipv6Addr;
use std::sync::Arc;
use std::time::Instant as WallClock;

use criterion::{Criterion, Throughput};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::cc::CcProfile;
use mrc_transport::ev::{PathSource, SrPath};
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, QpCap, QpInitAttr, QpTransition, Qpn, RemoteNic, RtrAttr, RtsAttr,
    SendOpcode, SendWr, Sge, WorkCompletion,
};
use mrc_transport::{Endpoint, EndpointConfig, Instant, PathMode, PortConfig, PortMask, Transmit};

/// Data packets per iteration.
const BATCH: u32 = 256;
/// Frames per TX/RX burst, as a NIC loop moves them (issue #13); the summary also runs bursts
/// of one frame (one buffer, which stays in L1 between sender and receiver).
const BURST: usize = 32;
const SRC_VA: u64 = 0x1000_0000;
const DST_VA: u64 = 0x2000_0000;

/// One path per plane.
#[derive(Debug)]
struct OnePath;

impl PathSource for OnePath {
    fn path_count(&self, _src: u32, _dst: u32, _plane: u8) -> usize {
        1
    }
    fn path(&self, _src: u32, dst: u32, plane: u8, _index: usize) -> Option<SrPath> {
        Some(SrPath {
            outer_da: Ipv6Addr::new(0xfcbb, 0, u16::from(plane), dst as u16, 0, 0, 0, 0),
            segment: None,
        })
    }
}

/// Two connected endpoints and a Write of `BATCH` packets of `payload` bytes ready to post.
struct Pair {
    a: Endpoint,
    b: Endpoint,
    qp: Qpn,
    cq: CqHandle,
    lkey: u32,
    rkey: u32,
    len: u32,
    /// One TX burst of frame buffers, as a NIC's descriptors (issue #13: bursts of 32).
    bufs: Vec<Vec<u8>>,
    sent: [Transmit; BURST],
    now: Instant,
    wcs: [WorkCompletion; 4],
}

fn nic(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i + 1)
}

impl Pair {
    fn new(payload: u32, burst: usize) -> Self {
        Self::with(payload, burst, true)
    }

    /// `verify_icrc`: whether the receiver checks the ICRC (the sender always writes it).
    fn with(payload: u32, burst: usize, verify_icrc: bool) -> Self {
        let paths: Arc<dyn PathSource> = Arc::new(OnePath);
        let mk = |h: u16| {
            let port = PortConfig::new(
                EthernetAddress([2, 0, 0, 0, 0, h as u8]),
                EthernetAddress([2, 0, 0, 0, 1, h as u8]),
            );
            let mut cfg = EndpointConfig::new(
                u64::from(h) + 1,
                nic(h),
                vec![port],
                PathMode::Srv6 {
                    paths: paths.clone(),
                    host: u32::from(h),
                },
            );
            cfg.payload_mtu = payload;
            cfg.wire.verify_icrc = verify_icrc;
            cfg.cc_profiles = vec![CcProfile::Fixed {
                window_bytes: Some(u64::MAX / 2),
            }];
            Endpoint::new(cfg).unwrap()
        };
        let (mut a, mut b) = (mk(0), mk(1));
        let len = payload * BATCH;
        let mut qps = Vec::new();
        let mut keys = Vec::new();
        for (h, ep) in [&mut a, &mut b].into_iter().enumerate() {
            let pd = ep.alloc_pd().unwrap();
            let cq = ep.create_cq(1024).unwrap();
            let qp = ep
                .create_qp(&QpInitAttr {
                    pd,
                    send_cq: cq,
                    recv_cq: cq,
                    cap: QpCap::default(),
                    sq_sig_all: false,
                })
                .unwrap();
            ep.modify_qp(qp, QpTransition::Init(InitAttr::default()))
                .unwrap();
            let va = if h == 0 { SRC_VA } else { DST_VA };
            let mem: Vec<u8> = (0..len).map(|i| i as u8).collect();
            keys.push(
                ep.reg_mr(
                    pd,
                    va,
                    Box::new(mem),
                    Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                )
                .unwrap(),
            );
            qps.push((qp, cq));
        }
        for (h, ep) in [&mut a, &mut b].into_iter().enumerate() {
            let peer = 1 - h;
            let remote = RemoteNic {
                addr: nic(peer as u16),
                host: Some(peer as u32),
            };
            let mut rtr = RtrAttr::new(remote, qps[peer].0, 0);
            rtr.mpr = 4096;
            ep.modify_qp(qps[h].0, QpTransition::Rtr(rtr)).unwrap();
            let mut rts = RtsAttr::new(0);
            rts.mpr = 4096;
            ep.modify_qp(qps[h].0, QpTransition::Rts(rts)).unwrap();
        }
        let bufs = vec![vec![0u8; a.max_frame_len()]; burst.clamp(1, BURST)];
        Self {
            a,
            b,
            qp: qps[0].0,
            cq: qps[0].1,
            lkey: keys[0].lkey,
            rkey: keys[1].rkey,
            len,
            bufs,
            sent: [Transmit { len: 0, port: 0 }; BURST],
            now: Instant(1_000),
            wcs: [WorkCompletion::EMPTY; 4],
        }
    }

    /// Post one Write and move it (and its acknowledgements) until it completes.
    fn write_once(&mut self) {
        let sge = [Sge {
            addr: SRC_VA,
            length: self.len,
            lkey: self.lkey,
        }];
        let wr = SendWr {
            wr_id: 1,
            opcode: SendOpcode::Write,
            sg_list: &sge,
            remote_addr: DST_VA,
            rkey: self.rkey,
            signaled: true,
        };
        self.a.post_send(self.qp, &wr).unwrap();
        loop {
            self.now.0 += 100;
            let now = self.now;
            // Bursts of frames from one end to the other, as a NIC loop moves them (one port
            // here: every frame of a burst arrives on it).
            burst(
                &mut self.a,
                &mut self.b,
                now,
                &mut self.bufs,
                &mut self.sent,
            );
            burst(
                &mut self.b,
                &mut self.a,
                now,
                &mut self.bufs,
                &mut self.sent,
            );
            for ep in [&mut self.a, &mut self.b] {
                if ep.poll_timeout().is_some_and(|d| d <= now) {
                    ep.handle_timeout(now);
                }
            }
            if self.a.poll_cq(self.cq, &mut self.wcs).unwrap() > 0 {
                return;
            }
        }
    }
}

/// Every frame `from` has to send now, in bursts of `bufs.len()`, handed to `to`.
fn burst(
    from: &mut Endpoint,
    to: &mut Endpoint,
    now: Instant,
    bufs: &mut [Vec<u8>],
    sent: &mut [Transmit; BURST],
) {
    loop {
        let n = from.poll_transmit_burst(now, PortMask::ALL, bufs, sent);
        let frames = bufs[..n].iter().zip(&sent[..n]);
        to.handle_packets(now, 0, frames.map(|(b, t)| &b[..t.len]));
        if n < bufs.len() {
            return;
        }
    }
}

const PAYLOADS: [u32; 3] = [64, 1024, 4096];

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(u64::from(BATCH)));
    for payload in PAYLOADS {
        let mut p = Pair::new(payload, BURST);
        g.bench_function(format!("write_{payload}B"), |b| b.iter(|| p.write_once()));
    }
    g.finish();
    let mut g = c.benchmark_group("memcpy");
    let bytes = 4096 * BATCH as usize;
    g.throughput(Throughput::Bytes(bytes as u64));
    let src = vec![7u8; bytes];
    let mut dst = vec![0u8; bytes];
    g.bench_function("4096B_x256", |b| {
        b.iter(|| {
            for (d, s) in dst.chunks_mut(4096).zip(src.chunks(4096)) {
                d.copy_from_slice(black_box(s));
            }
            black_box(&mut dst);
        });
    });
    g.finish();
}

/// CPU time this thread has run, from the scheduler (`/proc/thread-self/schedstat`, ns):
/// on a machine shared with other work, time on the CPU is what a packet costs a core; wall
/// time also counts the waits for it.
fn cpu_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().next()?.parse().ok()
}

/// Run `f` for about `secs` seconds of wall time; the seconds of CPU (or, where the scheduler
/// does not say, of wall time) one call takes.
fn per_call(secs: f64, mut f: impl FnMut()) -> f64 {
    f();
    let mut n = 0u64;
    let start = WallClock::now();
    let cpu0 = cpu_ns();
    while start.elapsed().as_secs_f64() < secs {
        f();
        n += 1;
    }
    let wall = start.elapsed().as_secs_f64();
    let cpu = cpu0.zip(cpu_ns()).map(|(a, b)| (b - a) as f64 / 1e9);
    cpu.unwrap_or(wall) / n as f64
}

/// The summary the issue asks for: Mpps per core, and at 4 KiB the ratio to a copy; with
/// bursts of 32 frames (the criterion figures), of one frame, and with the receiver's ICRC
/// check off.
fn summary() {
    println!("\nengine, sender + receiver on one core ({BATCH}-packet Writes), per CPU second:");
    println!("  payload   bursts of {BURST:<2}            bursts of 1     ICRC check off");
    let mut engine_4k = [0.0; 3];
    for payload in PAYLOADS {
        let mut line = format!("  {payload:>5} B");
        for (i, (burst, verify)) in [(BURST, true), (1, true), (BURST, false)]
            .into_iter()
            .enumerate()
        {
            let mut p = Pair::with(payload, burst, verify);
            let t = per_call(0.5, || p.write_once());
            let mpps = f64::from(BATCH) / t / 1e6;
            let gbps = f64::from(BATCH * payload) * 8.0 / t / 1e9;
            let _ = write!(line, "  {mpps:6.2} Mpps {gbps:6.1} Gb/s");
            if payload == 4096 {
                engine_4k[i] = t;
            }
        }
        println!("{line}");
    }
    let bytes = 4096 * BATCH as usize;
    let src = vec![7u8; bytes];
    let mut dst = vec![0u8; bytes];
    let t = per_call(0.5, || {
        for (d, s) in dst.chunks_mut(4096).zip(src.chunks(4096)) {
            d.copy_from_slice(black_box(s));
        }
        black_box(&mut dst);
    });
    // The NIC's copy into registered memory (vector moves, no `rep movsb` where that is slow):
    // on CPUs where glibc's memcpy takes `rep movsb` at 4 KiB and `rep movsb` is slow (the
    // Zen 3 VMs of docs/benchmarks.md), memcpy alone would flatter the engine.
    let region = mrc_nic::MemoryRegion::new(bytes);
    let t_region = per_call(0.5, || {
        for (i, s) in src.chunks(4096).enumerate() {
            region.write(i * 4096, black_box(s));
        }
        black_box(&region);
    });
    let best = t.min(t_region);
    println!(
        "  memcpy of the same 4 KiB payloads: {:.1} Gb/s; the NIC's registered-memory copy: \
         {:.1} Gb/s",
        bytes as f64 * 8.0 / t / 1e9,
        bytes as f64 * 8.0 / t_region / 1e9,
    );
    println!(
        "  engine / the faster copy = {:.2} (bursts of {BURST}), {:.2} (bursts of 1), {:.2} \
         (ICRC check off)",
        best / engine_4k[0],
        best / engine_4k[1],
        best / engine_4k[2],
    );
}

/// `engine --count-iters N PAYLOAD`: N Writes of PAYLOAD-byte packets and nothing else, for
/// instruction counts that do not depend on what else the machine runs:
/// `valgrind --tool=callgrind target/release/deps/engine-* --count-iters 200 64`
/// (docs/benchmarks.md, the stage table).
fn count_iters(args: &[String]) -> Option<()> {
    let at = args.iter().position(|a| a == "--count-iters")?;
    let iters: u32 = args.get(at + 1)?.parse().ok()?;
    let payload: u32 = args.get(at + 2)?.parse().ok()?;
    let mut p = Pair::new(payload, BURST);
    p.write_once();
    for _ in 0..iters {
        p.write_once();
    }
    Some(())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if count_iters(&args).is_some() {
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
    // `cargo bench` passes --bench; `cargo test --benches` does not (then criterion only checks
    // each benchmark runs once, and so do we).
    // Under `--profile-time` (perf record) the profile is of the one benchmark named, alone.
    if args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "--profile-time") {
        summary();
    }
}
