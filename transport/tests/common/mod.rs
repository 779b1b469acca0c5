//! A deterministic test fabric for engine scenarios: endpoints joined plane by plane through
//! N paths each, every path with its own latency, rate and queue, ECN marking, trimming, loss,
//! reordering (jitter), duplication and an up/down schedule. Virtual time, one seeded RNG: the
//! same test gives the same run. Packets are the engine's real frames.
//!
//! Path choice: in SRv6 mode the outer DA names the path (see [`Grid`]); in ECMP mode the
//! fabric hashes the UDP source port and flow label, as switches do.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv6Addr;
use std::sync::Arc;

use mrc_srv6::wire::{Dscp, Ecn, EthernetAddress, Ipv6Packet};
use mrc_transport::ev::{PathSource, SrPath};
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, MrKeys, PdHandle, QpCap, QpInitAttr, QpTransition, Qpn, RecvWr,
    RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use mrc_transport::{Duration, Endpoint, EndpointConfig, Instant, PathMode, PortConfig, PortMask};

/// SRv6 test plan: path `i` of `plane` towards host `dst` has DA `fc00:plane:dst:i::`.
#[derive(Debug)]
pub struct Grid {
    pub paths_per_plane: usize,
}

impl PathSource for Grid {
    fn path_count(&self, _src: u32, _dst: u32, _plane: u8) -> usize {
        self.paths_per_plane
    }
    fn path(&self, _src: u32, dst: u32, plane: u8, index: usize) -> Option<SrPath> {
        (index < self.paths_per_plane).then(|| SrPath {
            outer_da: Ipv6Addr::new(
                0xfc00,
                u16::from(plane),
                dst as u16,
                index as u16,
                0,
                0,
                0,
                0,
            ),
            segment: None,
        })
    }
}

/// The NIC address of host `i`.
pub fn nic(i: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, i as u16 + 1)
}

/// One path's behaviour.
#[derive(Debug, Clone)]
pub struct PathSpec {
    pub latency: Duration,
    /// Bits per second; 0 = no serialisation delay.
    pub rate_bps: u64,
    /// Bytes queued before a packet is trimmed (or dropped).
    pub queue_bytes: u64,
    /// Bytes queued above which ECT packets are marked CE (0: never).
    pub ecn_bytes: u64,
    /// Trim instead of dropping when the queue is full.
    pub trim: bool,
    /// Trims are marked as last-hop trims.
    pub trim_last_hop: bool,
    /// Random loss probability per packet.
    pub loss: f64,
    /// Random extra delay, uniform in [0, jitter): reorders packets.
    pub jitter: Duration,
    /// Probability that a packet is delivered twice.
    pub dup: f64,
    /// Intervals [from, to) during which the path silently drops everything.
    pub down: Vec<(Instant, Instant)>,
}

impl Default for PathSpec {
    fn default() -> Self {
        Self {
            latency: Duration::from_micros(2),
            rate_bps: 0,
            queue_bytes: u64::MAX,
            ecn_bytes: 0,
            trim: false,
            trim_last_hop: false,
            loss: 0.0,
            jitter: Duration::ZERO,
            dup: 0.0,
            down: Vec::new(),
        }
    }
}

impl PathSpec {
    fn is_down(&self, t: Instant) -> bool {
        self.down.iter().any(|&(a, b)| a <= t && t < b)
    }
}

/// Counters of what the fabric did.
#[derive(Debug, Default, Clone, Copy)]
pub struct FabricStats {
    pub sent: u64,
    pub delivered: u64,
    pub lost: u64,
    pub blackholed: u64,
    /// Data frames (Writes) among the blackholed ones.
    pub blackholed_data: u64,
    pub trimmed: u64,
    pub marked: u64,
    pub duplicated: u64,
    pub dropped_full: u64,
}

struct InFlight {
    host: usize,
    port: u8,
    bytes: Vec<u8>,
}

/// SplitMix64, for the fabric's own randomness.
pub struct TestRng(pub u64);

impl TestRng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The fabric and its endpoints.
pub struct Net {
    pub eps: Vec<Endpoint>,
    pub now: Instant,
    pub planes: usize,
    pub paths_per_plane: usize,
    /// `specs[plane][path]`, used in both directions.
    pub specs: Vec<Vec<PathSpec>>,
    busy_until: Vec<Instant>,
    queue: BinaryHeap<Reverse<(Instant, u64, usize)>>,
    packets: Vec<Option<InFlight>>,
    free: Vec<usize>,
    order: u64,
    pub rng: TestRng,
    pub stats: FabricStats,
    pub srv6: bool,
    /// Ports that refuse frames (TX full) at the moment, per host.
    pub tx_full: Vec<u32>,
    buf: Vec<u8>,
    trim_size: usize,
    /// When set, every frame sent is also kept here as (source host, port, bytes).
    pub capture: Option<Vec<(usize, u8, Vec<u8>)>>,
    /// Data frames carried per `[plane][path]` (both directions).
    pub path_writes: Vec<Vec<u64>>,
    /// ECMP mode: from this time on, switches hash with another salt (a remap).
    pub remap_at: Option<Instant>,
}

/// How to build a [`Net`].
#[derive(Debug, Clone)]
pub struct NetBuilder {
    pub hosts: usize,
    pub planes: usize,
    pub paths_per_plane: usize,
    pub srv6: bool,
    pub seed: u64,
    pub spec: PathSpec,
    pub tweak: fn(&mut EndpointConfig),
}

impl Default for NetBuilder {
    fn default() -> Self {
        Self {
            hosts: 2,
            planes: 2,
            paths_per_plane: 4,
            srv6: true,
            seed: 1,
            spec: PathSpec::default(),
            tweak: |_| {},
        }
    }
}

impl NetBuilder {
    pub fn build(self) -> Net {
        let grid: Arc<dyn PathSource> = Arc::new(Grid {
            paths_per_plane: self.paths_per_plane,
        });
        let eps: Vec<Endpoint> = (0..self.hosts)
            .map(|h| {
                let ports = (0..self.planes)
                    .map(|p| {
                        PortConfig::new(
                            EthernetAddress([2, 0, 0, 0, h as u8, p as u8]),
                            EthernetAddress([2, 0, 0, 0xff, 0, p as u8]),
                        )
                    })
                    .collect();
                let mode = if self.srv6 {
                    PathMode::Srv6 {
                        paths: grid.clone(),
                        host: h as u32,
                    }
                } else {
                    PathMode::Ecmp
                };
                let mut cfg =
                    EndpointConfig::new(self.seed ^ ((h as u64 + 1) * 7919), nic(h), ports, mode);
                (self.tweak)(&mut cfg);
                Endpoint::new(cfg).expect("valid config")
            })
            .collect();
        let trim_size = usize::from(eps[0].config().wire.trim_size);
        let buf = vec![0u8; eps[0].max_frame_len()];
        let n = self.hosts;
        Net {
            tx_full: vec![0; n],
            eps,
            now: Instant(0),
            planes: self.planes,
            paths_per_plane: self.paths_per_plane,
            specs: vec![vec![self.spec; self.paths_per_plane]; self.planes],
            busy_until: vec![Instant(0); n * n * self.planes * self.paths_per_plane],
            queue: BinaryHeap::new(),
            packets: Vec::new(),
            free: Vec::new(),
            order: 0,
            rng: TestRng(self.seed.wrapping_mul(0x1234_5678_9abc_def1)),
            stats: FabricStats::default(),
            srv6: self.srv6,
            buf,
            trim_size,
            capture: None,
            path_writes: vec![vec![0; self.paths_per_plane]; self.planes],
            remap_at: None,
        }
    }
}

impl Net {
    /// Where a frame from `src` on `port` goes: (destination host, path index).
    fn route(&self, frame: &[u8]) -> Option<(usize, usize)> {
        let outer = Ipv6Packet::new_checked(frame.get(14..)?).ok()?;
        if self.srv6 {
            let da = outer.dst_addr().segments();
            Some((
                usize::from(da[2]),
                usize::from(da[3]) % self.paths_per_plane,
            ))
        } else {
            let dst = outer.dst_addr().segments()[7] as usize - 1;
            let udp = frame.get(54..56)?;
            let sport = u64::from(u16::from_be_bytes([udp[0], udp[1]]));
            let salt = if self.remap_at.is_some_and(|t| self.now >= t) {
                0x5555_0000_0000
            } else {
                0
            };
            let mut h = (salt ^ (sport << 20) ^ u64::from(outer.flow_label()))
                .wrapping_mul(0x9e37_79b9_7f4a_7c15);
            h ^= h >> 29;
            Some((dst, (h % self.paths_per_plane as u64) as usize))
        }
    }

    /// Whether a frame is an RDMA Write (BTH opcode 0xC6..=0xCB).
    pub fn is_write(&self, frame: &[u8]) -> bool {
        let bth = if self.srv6 {
            14 + 40 + 40 + 8
        } else {
            14 + 40 + 8
        };
        frame.get(bth).is_some_and(|op| (0xC6..=0xCB).contains(op))
    }

    fn enqueue(&mut self, at: Instant, host: usize, port: u8, bytes: Vec<u8>) {
        let slot = InFlight { host, port, bytes };
        let i = if let Some(i) = self.free.pop() {
            self.packets[i] = Some(slot);
            i
        } else {
            self.packets.push(Some(slot));
            self.packets.len() - 1
        };
        self.order += 1;
        self.queue.push(Reverse((at, self.order, i)));
    }

    /// A frame leaves `src` on `port`.
    fn send(&mut self, src: usize, port: u8, mut bytes: Vec<u8>) {
        self.stats.sent += 1;
        if let Some(c) = self.capture.as_mut() {
            c.push((src, port, bytes.clone()));
        }
        let Some((dst, path)) = self.route(&bytes) else {
            panic!("unroutable frame from host {src}");
        };
        let plane = usize::from(port);
        if self.is_write(&bytes) {
            self.path_writes[plane][path] += 1;
        }
        let spec = self.specs[plane][path].clone();
        if spec.is_down(self.now) {
            self.stats.blackholed += 1;
            if self.is_write(&bytes) {
                self.stats.blackholed_data += 1;
            }
            return;
        }
        if spec.loss > 0.0 && self.rng.unit() < spec.loss {
            self.stats.lost += 1;
            return;
        }
        let k = ((src * self.eps.len() + dst) * self.planes + plane) * self.paths_per_plane + path;
        let start = self.busy_until[k].max(self.now);
        let backlog = if spec.rate_bps == 0 {
            0
        } else {
            (u128::from((start - self.now).as_nanos()) * u128::from(spec.rate_bps) / 8_000_000_000)
                as u64
        };
        let len = bytes.len();
        let mut at;
        if backlog + len as u64 > spec.queue_bytes {
            if spec.trim && len > self.trim_size {
                Ipv6Packet::new_unchecked(&mut bytes[14..]).set_dscp(Dscp(if spec.trim_last_hop {
                    16
                } else {
                    12
                }));
                bytes.truncate(self.trim_size);
                self.stats.trimmed += 1;
                // Trimmed headers go out on a priority queue: latency only.
                at = self.now + spec.latency;
            } else {
                self.stats.dropped_full += 1;
                return;
            }
        } else {
            let mut ip = Ipv6Packet::new_unchecked(&mut bytes[14..]);
            if spec.ecn_bytes > 0 && backlog > spec.ecn_bytes && ip.ecn() != Ecn::NotEct {
                ip.set_ecn(Ecn::Ce);
                self.stats.marked += 1;
            }
            let tx = if spec.rate_bps == 0 {
                Duration::ZERO
            } else {
                Duration((len as u128 * 8_000_000_000 / u128::from(spec.rate_bps)) as u64)
            };
            self.busy_until[k] = start + tx;
            at = start + tx + spec.latency;
        }
        if spec.jitter.as_nanos() > 0 {
            at += Duration(self.rng.next() % spec.jitter.as_nanos());
        }
        if spec.dup > 0.0 && self.rng.unit() < spec.dup {
            self.stats.duplicated += 1;
            let extra = Duration(1 + self.rng.next() % (spec.jitter.as_nanos() + 1_000));
            self.enqueue(at + extra, dst, port, bytes.clone());
        }
        self.enqueue(at, dst, port, bytes);
    }

    /// Drain every endpoint's transmit queue into the fabric.
    fn pump(&mut self) {
        for h in 0..self.eps.len() {
            let ready = PortMask(!self.tx_full[h]);
            while let Some(t) = self.eps[h].poll_transmit(self.now, ready, &mut self.buf) {
                let frame = self.buf[..t.len].to_vec();
                self.send(h, t.port, frame);
            }
        }
    }

    /// The next time anything happens.
    fn next_time(&self) -> Option<Instant> {
        let pkt = self.queue.peek().map(|Reverse((t, _, _))| *t);
        let timers = self.eps.iter().filter_map(Endpoint::poll_timeout).min();
        match (pkt, timers) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// One step: send what is ready, then advance to the next event and process it.
    /// `false` when nothing is left to happen.
    pub fn step(&mut self) -> bool {
        self.pump();
        let Some(t) = self.next_time() else {
            return false;
        };
        self.now = self.now.max(t);
        while let Some(&Reverse((at, _, i))) = self.queue.peek() {
            if at > self.now {
                break;
            }
            self.queue.pop();
            let p = self.packets[i].take().expect("queued packet");
            self.free.push(i);
            self.stats.delivered += 1;
            self.eps[p.host].handle_packet(self.now, p.port, &p.bytes);
        }
        for ep in &mut self.eps {
            if ep.poll_timeout().is_some_and(|d| d <= self.now) {
                ep.handle_timeout(self.now);
            }
        }
        self.pump();
        true
    }

    /// Run until `done` holds, failing the test if virtual time passes `limit` first.
    pub fn run_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Net) -> bool) {
        let end = self.now + limit;
        loop {
            if done(self) {
                return;
            }
            assert!(
                self.now <= end,
                "not done after {limit} of virtual time (now {})",
                self.now
            );
            if !self.step() {
                assert!(done(self), "idle before done at {}", self.now);
                return;
            }
        }
    }

    /// Run for `d` of virtual time.
    pub fn run_for(&mut self, d: Duration) {
        let end = self.now + d;
        while self.now < end {
            if !self.step() {
                self.now = end;
                return;
            }
            if self.next_time().is_some_and(|t| t > end) {
                self.now = end;
                return;
            }
        }
    }

    /// No packet in the fabric.
    pub fn quiet(&self) -> bool {
        self.queue.is_empty()
    }
}

/// A connected QP pair between hosts `a` and `b`, and what tests need to use it.
#[derive(Debug, Clone, Copy)]
pub struct Conn {
    pub a: usize,
    pub b: usize,
    pub qp_a: Qpn,
    pub qp_b: Qpn,
    pub cq_a: CqHandle,
    pub cq_b: CqHandle,
    pub pd_a: PdHandle,
    pub pd_b: PdHandle,
}

/// Options of [`connect`].
#[derive(Debug, Clone, Copy)]
pub struct ConnOpts {
    pub init: InitAttr,
    pub rtr_mpr: u32,
    pub rts: fn(RtsAttr) -> RtsAttr,
    pub cap: QpCap,
    pub cq_depth: u32,
}

impl Default for ConnOpts {
    fn default() -> Self {
        Self {
            init: InitAttr::default(),
            rtr_mpr: 1024,
            rts: |a| a,
            cap: QpCap {
                max_send_wr: 256,
                max_recv_wr: 256,
                max_send_sge: 4,
            },
            cq_depth: 4096,
        }
    }
}

/// Create, and move to RTS, a QP on each of `a` and `b`, connected to each other.
pub fn connect(net: &mut Net, a: usize, b: usize, opts: ConnOpts) -> Conn {
    let mut side = |h: usize| {
        let ep = &mut net.eps[h];
        let pd = ep.alloc_pd().unwrap();
        let cq = ep.create_cq(opts.cq_depth).unwrap();
        let qp = ep
            .create_qp(&QpInitAttr {
                pd,
                send_cq: cq,
                recv_cq: cq,
                cap: opts.cap,
                sq_sig_all: false,
            })
            .unwrap();
        ep.modify_qp(qp, QpTransition::Init(opts.init)).unwrap();
        (pd, cq, qp)
    };
    let (pd_a, cq_a, qp_a) = side(a);
    let (pd_b, cq_b, qp_b) = side(b);
    for (h, me, peer, peer_host, psn) in
        [(a, qp_a, qp_b, b, 100u32), (b, qp_b, qp_a, a, 0xff_fff0u32)]
    {
        let remote = RemoteNic {
            addr: nic(peer_host),
            host: Some(peer_host as u32),
        };
        let peer_psn = if psn == 100 { 0xff_fff0 } else { 100 };
        let mut rtr = RtrAttr::new(remote, peer, peer_psn);
        rtr.mpr = opts.rtr_mpr;
        net.eps[h].modify_qp(me, QpTransition::Rtr(rtr)).unwrap();
        let rts = (opts.rts)(RtsAttr::new(psn));
        net.eps[h].modify_qp(me, QpTransition::Rts(rts)).unwrap();
    }
    Conn {
        a,
        b,
        qp_a,
        qp_b,
        cq_a,
        cq_b,
        pd_a,
        pd_b,
    }
}

/// Register a buffer of `len` bytes at `iova` on host `h`, filled by `fill(i)`.
pub fn region(
    net: &mut Net,
    h: usize,
    pd: PdHandle,
    iova: u64,
    len: usize,
    fill: impl Fn(usize) -> u8,
) -> MrKeys {
    let mem: Vec<u8> = (0..len).map(fill).collect();
    net.eps[h]
        .reg_mr(
            pd,
            iova,
            Box::new(mem),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap()
}

/// Every completion waiting on `cq` of host `h`.
pub fn drain_cq(net: &mut Net, h: usize, cq: CqHandle) -> Vec<WorkCompletion> {
    let mut out = Vec::new();
    let mut buf = [WorkCompletion::EMPTY; 64];
    loop {
        let n = net.eps[h].poll_cq(cq, &mut buf).unwrap();
        out.extend_from_slice(&buf[..n]);
        if n < buf.len() {
            return out;
        }
    }
}

/// A deterministic byte pattern, different per `salt`.
pub fn pattern(salt: u64) -> impl Fn(usize) -> u8 {
    move |i| {
        let x = (i as u64 ^ salt).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        (x >> 56) as u8
    }
}

pub const SRC: u64 = 0x1_0000_0000;
pub const DST: u64 = 0x7_0000_0000;

/// Write `len` bytes from a to b (with an immediate when `imm`), run to completion, check
/// every byte of b's region and both completions.
pub fn write_and_check(net: &mut Net, c: &Conn, len: usize, imm: Option<u32>, salt: u64) {
    let src = region(net, c.a, c.pd_a, SRC, len.max(1), pattern(salt));
    let dst = region(net, c.b, c.pd_b, DST, len.max(1) + 64, |_| 0xee);
    if imm.is_some() {
        net.eps[c.b]
            .post_recv(c.qp_b, &RecvWr { wr_id: 77 })
            .unwrap();
    }
    let sge = [Sge {
        addr: SRC,
        length: len as u32,
        lkey: src.lkey,
    }];
    net.eps[c.a]
        .post_send(
            c.qp_a,
            &SendWr {
                wr_id: 42,
                opcode: imm.map_or(SendOpcode::Write, SendOpcode::WriteWithImm),
                sg_list: &sge,
                remote_addr: DST + 32,
                rkey: dst.rkey,
                signaled: true,
            },
        )
        .unwrap();
    let mut send_wcs = Vec::new();
    let mut recv_wcs = Vec::new();
    net.run_until(Duration::from_secs(10), |n| {
        send_wcs.extend(drain_cq(n, c.a, c.cq_a));
        recv_wcs.extend(drain_cq(n, c.b, c.cq_b));
        !send_wcs.is_empty() && (imm.is_none() || !recv_wcs.is_empty())
    });
    assert_eq!(send_wcs.len(), 1);
    assert_eq!(send_wcs[0].wr_id, 42);
    assert_eq!(send_wcs[0].status, WcStatus::Success);
    assert_eq!(send_wcs[0].opcode, WcOpcode::RdmaWrite);
    assert_eq!(send_wcs[0].byte_len, len as u32);
    if let Some(v) = imm {
        assert_eq!(recv_wcs.len(), 1);
        assert_eq!(recv_wcs[0].wr_id, 77);
        assert_eq!(recv_wcs[0].opcode, WcOpcode::RecvRdmaWithImm);
        assert_eq!(recv_wcs[0].imm_data, Some(v));
        assert_eq!(recv_wcs[0].byte_len, len as u32);
    } else {
        assert!(recv_wcs.is_empty());
    }
    let got = net.eps[c.b].mr_slice(dst.lkey).unwrap();
    let want = pattern(salt);
    assert!(
        got[..32].iter().all(|&b| b == 0xee),
        "bytes before the target untouched"
    );
    for (i, &b) in got[32..32 + len].iter().enumerate() {
        assert_eq!(b, want(i), "byte {i} of {len}");
    }
    assert!(
        got[32 + len..].iter().all(|&b| b == 0xee),
        "bytes after the target untouched"
    );
    net.eps[c.a].dereg_mr(src.lkey).unwrap();
    net.eps[c.b].dereg_mr(dst.lkey).unwrap();
}
