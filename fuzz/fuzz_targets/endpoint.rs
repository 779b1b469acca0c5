#![no_main]
//! Two connected `Endpoint`s fed an arbitrary sequence of operations: their own traffic
//! delivered, lost, duplicated or reordered; raw bytes; their frames with bytes flipped (ICRC
//! fixed or not), cut short or trimmed; their frames re-forged with any header field changed
//! and a valid ICRC (so the fuzzer gets past the checksum into the QP logic); time passing;
//! port events; verbs calls (Writes with good and bad keys, receives, QP error, reset and
//! reconnect).
//!
//! The input's first field picks the mode both hosts run (docs/security.md, "Fuzzing"): MRC
//! over SRv6 paths, MRC in ECMP mode (hashed EVs, the remap detector armed with a small
//! burst), or the RoCE-like baseline (one path, go-back-N, DCQCN).
//!
//! After every operation (docs/security.md, "Invariants"):
//! - nothing panicked;
//! - no byte outside a region the peer may write changed: every region sits between guard
//!   bytes in its backing buffer, and the regions without remote-write access (the sources,
//!   a read-only neighbour) or of another protection domain keep their bytes, checked one by
//!   one;
//! - each host's `heap_bytes` stays at what it held once connected (no table grows with
//!   traffic), and the frames it emits per input stay bounded;
//! - every completion names a work request that was posted and not yet completed, on the
//!   host's QP and queue; send completions come in posting order (an unsignalled request
//!   before a completed one completed silently: the QP's `messages_completed` counts it, and
//!   the count must match the requests the harness retires that way);
//! - once a QP is in ERROR, every request posted on it has completed (the one that failed
//!   it with its error, the rest flushed) within the drain, and whatever completes later is
//!   flushed; a QP fatal event names a real error; no completion is lost to a full CQ;
//! - `EcmpRemap` events only in ECMP mode, for the host's QP, never more than its `remaps`.
//!
//! At the end the run settles: time passes from timer to timer (bounded), the frames either
//! delivered or lost (the input says which), until every posted send request has completed —
//! successfully or with an error — or the bound is hit, which is a failure: a request that
//! neither completes nor fails is a hung application.
use std::collections::VecDeque;
use std::net::Ipv6Addr;
use std::sync::{Arc, Mutex};

#[path = "endpoint/forge.rs"]
mod forge;

use arbitrary::Arbitrary;
use forge::{Edit, forge, refresh_icrc};
use libfuzzer_sys::fuzz_target;
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::cc::{CcProfile, DcqcnConfig};
use mrc_transport::ev::{PathSource, SrPath};
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, Memory, MrKeys, QpCap, QpInitAttr, QpState, QpTransition, Qpn,
    RecvWr, RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge, TransportMode, WcOpcode,
    WcStatus, WorkCompletion,
};
use mrc_transport::wire::{Trimmed, WireConfig, trim_frame};
use mrc_transport::{
    Duration, Endpoint, EndpointConfig, Event, Instant, PathMode, PortConfig, PortMask,
};

const PLANES: usize = 2;
const LEN: usize = 4096;
const GUARD: usize = 64;
const GUARD_BYTE: u8 = 0xa5;
const SRC: u64 = 0x1000_0000;
const DST: u64 = 0x2000_0000;
/// Frames kept in flight per direction (more are lost, as a full link would).
const IN_FLIGHT: usize = 256;
/// Frames one drain may emit before the run counts as a runaway.
const DRAIN_BOUND: usize = 4096;
/// Timer expiries (or delivery rounds) the final settling may take.
const SETTLE_BOUND: usize = 2048;

/// What both hosts run.
#[derive(Arbitrary, Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// MRC over SRv6 paths (two per plane, one through an SRH).
    Mrc,
    /// MRC in ECMP mode: EVs are hashed entropy, a burst of failing EVs is a remap (brief §8.2).
    Ecmp,
    /// The RoCE-like baseline: one path, go-back-N, DCQCN.
    RoceLike,
}

/// Two paths per plane; path 1 continues in a one-segment SRH (RFC 8754) so SRH parsing is
/// on the fuzzed path.
#[derive(Debug)]
struct TwoPaths;

impl PathSource for TwoPaths {
    fn path_count(&self, _: u32, _: u32, _: u8) -> usize {
        2
    }
    fn path(&self, _: u32, dst: u32, plane: u8, index: usize) -> Option<SrPath> {
        let da = |x| Ipv6Addr::new(0xfc00, u16::from(plane), dst as u16, x, 0, 0, 0, 0);
        match index {
            0 => Some(SrPath {
                outer_da: da(0),
                segment: None,
            }),
            1 => Some(SrPath {
                outer_da: da(1),
                segment: Some(da(2)),
            }),
            _ => None,
        }
    }
}

/// A region's bytes inside a larger buffer with guard bytes on both sides. Writes are not
/// bounds-checked here beyond the buffer's own: a write past the region lands in a guard and
/// is caught by the invariant check.
#[derive(Debug, Clone)]
struct Guarded(Arc<Mutex<Vec<u8>>>);

impl Guarded {
    fn new(fill: u8) -> Self {
        let mut v = vec![GUARD_BYTE; LEN + 2 * GUARD];
        v[GUARD..GUARD + LEN].fill(fill);
        Self(Arc::new(Mutex::new(v)))
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.lock().unwrap().clone()
    }
}

impl Memory for Guarded {
    fn len(&self) -> usize {
        LEN
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        let b = self.0.lock().unwrap();
        dst.copy_from_slice(&b[GUARD + offset..GUARD + offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        let mut b = self.0.lock().unwrap();
        b[GUARD + offset..GUARD + offset + src.len()].copy_from_slice(src);
    }
}

/// One host: its endpoint, handles and regions.
struct Host {
    ep: Endpoint,
    cq: CqHandle,
    qp: Qpn,
    src: MrKeys,
    dst: MrKeys,
    /// Every region and whether the peer may change its bytes.
    regions: Vec<(Guarded, bool)>,
    /// The initial bytes of the regions nobody may change.
    frozen: Vec<Vec<u8>>,
    heap_bound: usize,
    /// Send requests posted and not known complete, in posting order: (wr_id, signalled).
    sq: VecDeque<(u64, bool)>,
    /// Receives posted and not completed.
    rq: VecDeque<u64>,
    /// Signalled successful send completions seen, and unsignalled requests retired as
    /// completed silently: together they are the QP's `messages_completed`.
    signalled_ok: u64,
    silent_ok: u64,
    /// The QP was in ERROR at the end of the last drain.
    was_error: bool,
    /// `EcmpRemap` events seen.
    remaps: u64,
}

fn nic(h: usize) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, h as u16 + 1)
}

fn endpoint(h: usize, mode: Mode) -> Endpoint {
    let ports = (0..PLANES)
        .map(|p| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, h as u8, p as u8]),
                EthernetAddress([2, 0, 0, 0xff, 0, p as u8]),
            )
        })
        .collect();
    let path_mode = match mode {
        Mode::Mrc | Mode::RoceLike => PathMode::Srv6 {
            paths: Arc::new(TwoPaths),
            host: h as u32,
        },
        Mode::Ecmp => PathMode::Ecmp,
    };
    let mut cfg = EndpointConfig::new(7 + h as u64, nic(h), ports, path_mode);
    cfg.payload_mtu = 1024;
    cfg.limits.max_qps = 4;
    cfg.limits.max_events = 64;
    cfg.limits.max_control_backlog = 64;
    let ev = &mut cfg.ev_profiles[0];
    if mode == Mode::Ecmp {
        // Hashed EVs: more of them, and a remap read from three failing within the window.
        ev.evs_per_plane = 4;
        ev.active_per_plane = 2;
        ev.floor_per_plane = 1;
        ev.remap_burst = 3;
    } else {
        ev.evs_per_plane = 2;
        ev.active_per_plane = 1;
        ev.floor_per_plane = 1;
    }
    // Profile 1: DCQCN, for the RoCE-like mode (as in transport/tests/roce_like.rs).
    cfg.cc_profiles
        .push(CcProfile::Dcqcn(DcqcnConfig::default()));
    Endpoint::new(cfg).expect("valid config")
}

fn cap() -> QpCap {
    QpCap {
        max_send_wr: 16,
        max_recv_wr: 16,
        max_send_sge: 2,
    }
}

fn host(h: usize, mode: Mode) -> Host {
    let mut ep = endpoint(h, mode);
    let pd = ep.alloc_pd().unwrap();
    let other_pd = ep.alloc_pd().unwrap();
    let cq = ep.create_cq(64).unwrap();
    let qp = ep
        .create_qp(&QpInitAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: cap(),
            sq_sig_all: false,
        })
        .unwrap();
    let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let mut regions = Vec::new();
    let mut reg = |ep: &mut Endpoint, pd, iova, access, fill, writable| {
        let g = Guarded::new(fill);
        let k = ep.reg_mr(pd, iova, Box::new(g.clone()), access).unwrap();
        regions.push((g, writable));
        k
    };
    let src = reg(&mut ep, pd, SRC, Access::LOCAL_WRITE, 0x11, false);
    let dst = reg(&mut ep, pd, DST, rw, 0x22, true);
    // Neighbours in I/O address space: read-only just after, another PD's just before.
    reg(
        &mut ep,
        pd,
        DST + LEN as u64,
        Access::LOCAL_WRITE,
        0x33,
        false,
    );
    reg(&mut ep, other_pd, DST - LEN as u64, rw, 0x44, false);
    let frozen = regions
        .iter()
        .map(|(g, w)| if *w { Vec::new() } else { g.bytes() })
        .collect();
    Host {
        ep,
        cq,
        qp,
        src,
        dst,
        regions,
        frozen,
        heap_bound: 0,
        sq: VecDeque::new(),
        rq: VecDeque::new(),
        signalled_ok: 0,
        silent_ok: 0,
        was_error: false,
        remaps: 0,
    }
}

/// Move both QPs to RTS, connected to each other.
fn connect(hosts: &mut [Host; 2], mode: Mode) {
    let init = match mode {
        Mode::Mrc | Mode::Ecmp => InitAttr::default(),
        Mode::RoceLike => InitAttr {
            mode: TransportMode::RoceLike,
            cc_profile: 1,
            ev_profile: 0,
        },
    };
    for h in 0..2 {
        let peer = hosts[1 - h].qp;
        let ep = &mut hosts[h].ep;
        let qp = hosts[h].qp;
        ep.modify_qp(qp, QpTransition::Init(init)).unwrap();
        let mut rtr = RtrAttr::new(
            RemoteNic {
                addr: nic(1 - h),
                host: Some(1 - h as u32),
            },
            peer,
            (1 - h as u32) * 0xff_fff0,
        );
        rtr.mpr = 128;
        rtr.wimm_limit = 8;
        ep.modify_qp(qp, QpTransition::Rtr(rtr)).unwrap();
        let mut rts = RtsAttr::new(h as u32 * 0xff_fff0);
        rts.mpr = 128;
        rts.wimm_limit = 8;
        rts.timeout = 4;
        rts.retry_linear = 2;
        rts.retry_exp = 2;
        ep.modify_qp(qp, QpTransition::Rts(rts)).unwrap();
    }
}

impl Host {
    /// A completion polled from the host's CQ: it must name a request posted on its QP and
    /// not completed yet, sends in posting order.
    fn complete(&mut self, wc: &WorkCompletion) {
        assert_eq!(wc.qpn, self.qp, "completion of another QP {wc:?}");
        if self.was_error {
            assert_eq!(
                wc.status,
                WcStatus::WrFlushError,
                "a request completed on a QP in ERROR without being flushed {wc:?}"
            );
        }
        match wc.opcode {
            WcOpcode::RdmaWrite => {
                let Some(at) = self.sq.iter().position(|&(id, _)| id == wc.wr_id) else {
                    panic!("completion of an unknown or completed send {wc:?}");
                };
                // Sends complete in order: the ones before completed silently (successes of
                // unsignalled requests).
                for (id, signalled) in self.sq.drain(..at) {
                    assert!(!signalled, "send {id} skipped: {wc:?} completed after it");
                    self.silent_ok += 1;
                }
                self.sq.pop_front();
                if wc.status == WcStatus::Success {
                    self.signalled_ok += 1;
                }
            }
            WcOpcode::RecvRdmaWithImm => {
                let Some(at) = self.rq.iter().position(|&id| id == wc.wr_id) else {
                    panic!("completion of an unknown or completed receive {wc:?}");
                };
                self.rq.remove(at);
            }
        }
    }

    /// Retire the unsignalled sends the QP says completed silently since the last drain:
    /// they are the oldest outstanding, and none of them signalled.
    fn reconcile(&mut self) {
        let done = self.ep.qp_stats(self.qp).unwrap().messages_completed;
        let seen = self.signalled_ok + self.silent_ok;
        assert!(
            done >= seen,
            "{seen} successful sends seen, the QP counts {done}"
        );
        for _ in 0..done - seen {
            let Some((id, signalled)) = self.sq.pop_front() else {
                panic!("the QP counts {done} successful sends, only {seen} were outstanding");
            };
            assert!(!signalled, "send {id} succeeded without its completion");
            self.silent_ok += 1;
        }
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// Deliver the oldest frames in flight from host `from`, some dropped or duplicated.
    Deliver {
        from: bool,
        n: u8,
        drop_mask: u8,
        dup_mask: u8,
    },
    /// Deliver the newest frame in flight first (reordering).
    DeliverLast {
        from: bool,
    },
    Raw {
        to: bool,
        port: u8,
        bytes: Vec<u8>,
    },
    Mutate {
        from: bool,
        pick: u8,
        flips: Vec<(u16, u8)>,
        fix_icrc: bool,
        cut: Option<u16>,
    },
    Forge {
        from: bool,
        pick: u8,
        edits: Vec<Edit>,
        extend: u8,
    },
    Trim {
        from: bool,
        pick: u8,
        last_hop: bool,
    },
    Advance {
        us: u16,
    },
    Post {
        from: bool,
        len: u16,
        off: u16,
        remote_off: i32,
        imm: Option<u32>,
        key: u8,
        signaled: bool,
    },
    PostRecv {
        host: bool,
    },
    Error {
        host: bool,
    },
    Reconnect,
    Port {
        host: bool,
        port: u8,
        up: bool,
    },
}

#[derive(Arbitrary, Debug)]
struct Input {
    mode: Mode,
    /// Whether the final settling delivers the frames in flight (else they are lost).
    deliver_when_settling: bool,
    ops: Vec<Op>,
}

struct World {
    mode: Mode,
    hosts: [Host; 2],
    now: Instant,
    /// Frames in flight from host i: (port, bytes).
    flight: [VecDeque<(u8, Vec<u8>)>; 2],
    /// The last frames host i sent (templates for mutation).
    sent: [VecDeque<(u8, Vec<u8>)>; 2],
    next_wr: u64,
    buf: Vec<u8>,
}

impl World {
    fn new(mode: Mode) -> Self {
        let mut hosts = [host(0, mode), host(1, mode)];
        connect(&mut hosts, mode);
        let buf = vec![0u8; hosts[0].ep.max_frame_len()];
        let mut w = Self {
            mode,
            hosts,
            now: Instant::ZERO,
            flight: [VecDeque::new(), VecDeque::new()],
            sent: [VecDeque::new(), VecDeque::new()],
            next_wr: 1,
            buf,
        };
        for h in &mut w.hosts {
            h.heap_bound = h.ep.heap_bytes();
        }
        w
    }

    fn deliver(&mut self, to: usize, port: u8, frame: &[u8]) {
        self.hosts[to].ep.handle_packet(self.now, port, frame);
    }

    fn template(&self, from: usize, pick: u8) -> Option<(u8, Vec<u8>)> {
        let s = &self.sent[from];
        (!s.is_empty()).then(|| s[usize::from(pick) % s.len()].clone())
    }

    /// Drain both hosts (transmit, events, timers, completions) and check the invariants.
    fn drain_and_check(&mut self) {
        for h in 0..2 {
            let mut emitted = 0;
            while let Some(t) =
                self.hosts[h]
                    .ep
                    .poll_transmit(self.now, PortMask::ALL, &mut self.buf)
            {
                emitted += 1;
                assert!(emitted < DRAIN_BOUND, "host {h} emits without end");
                assert!(t.len <= self.buf.len() && usize::from(t.port) < PLANES);
                let f = self.buf[..t.len].to_vec();
                if self.sent[h].len() == 32 {
                    self.sent[h].pop_front();
                }
                self.sent[h].push_back((t.port, f.clone()));
                if self.flight[h].len() == IN_FLIGHT {
                    self.flight[h].pop_front();
                }
                self.flight[h].push_back((t.port, f));
            }
            let mode = self.mode;
            let host = &mut self.hosts[h];
            while let Some(e) = host.ep.poll_event() {
                match e {
                    Event::EcmpRemap { qpn } => {
                        assert_eq!(mode, Mode::Ecmp, "a remap outside ECMP mode");
                        assert_eq!(qpn, host.qp, "a remap of another QP");
                        host.remaps += 1;
                    }
                    Event::QpFatal { qpn, status } => {
                        assert_eq!(qpn, host.qp);
                        assert!(
                            !matches!(status, WcStatus::Success | WcStatus::WrFlushError),
                            "a fatal event without an error: {e:?}"
                        );
                    }
                    Event::CqOverrun { .. } => panic!("host {h}: a completion was lost: {e:?}"),
                    _ => {}
                }
            }
            let mut wcs = [WorkCompletion::EMPTY; 16];
            loop {
                let n = host.ep.poll_cq(host.cq, &mut wcs).unwrap();
                for wc in &wcs[..n] {
                    host.complete(wc);
                }
                if n < wcs.len() {
                    break;
                }
            }
            host.reconcile();
            let info = host.ep.query_qp(host.qp).unwrap();
            let stats = host.ep.qp_stats(host.qp).unwrap();
            assert!(
                host.remaps <= stats.remaps,
                "host {h}: {} remap events, {} remaps",
                host.remaps,
                stats.remaps
            );
            if mode != Mode::Ecmp {
                assert_eq!(stats.remaps, 0, "host {h}: a remap outside ECMP mode");
            }
            host.was_error = info.state == QpState::Error;
            if host.was_error {
                // Failing a QP completes all its work (the culprit with its error, the rest
                // flushed) at once (libibverbs; MRC brief §3.7).
                assert!(
                    host.sq.is_empty() && host.rq.is_empty(),
                    "host {h}: QP in ERROR with requests not flushed: sends {:?}, receives {:?}",
                    host.sq,
                    host.rq
                );
            }
            self.check(h);
        }
    }

    fn check(&self, h: usize) {
        let host = &self.hosts[h];
        for (i, (g, writable)) in host.regions.iter().enumerate() {
            let b = g.bytes();
            assert!(
                b[..GUARD].iter().all(|&x| x == GUARD_BYTE),
                "host {h} region {i}: guard before written"
            );
            assert!(
                b[GUARD + LEN..].iter().all(|&x| x == GUARD_BYTE),
                "host {h} region {i}: guard after written"
            );
            if !writable {
                assert!(
                    b == host.frozen[i],
                    "host {h} region {i}: written without remote-write access"
                );
            }
        }
        let heap = host.ep.heap_bytes();
        assert!(
            heap <= host.heap_bound,
            "host {h}: heap grew from {} to {heap}",
            host.heap_bound
        );
    }

    fn run(&mut self, op: Op) {
        self.now += Duration::from_nanos(100);
        match op {
            Op::Deliver {
                from,
                n,
                drop_mask,
                dup_mask,
            } => {
                let from = usize::from(from);
                for i in 0..usize::from(n % 32) {
                    let Some((port, f)) = self.flight[from].pop_front() else {
                        break;
                    };
                    let bit = 1 << (i % 8);
                    if drop_mask & bit != 0 && i % 3 == 0 {
                        continue;
                    }
                    self.deliver(1 - from, port, &f);
                    if dup_mask & bit != 0 && i % 2 == 0 {
                        self.deliver(1 - from, port, &f);
                    }
                }
            }
            Op::DeliverLast { from } => {
                let from = usize::from(from);
                if let Some((port, f)) = self.flight[from].pop_back() {
                    self.deliver(1 - from, port, &f);
                }
            }
            Op::Raw { to, port, bytes } => self.deliver(usize::from(to), port % 3, &bytes),
            Op::Mutate {
                from,
                pick,
                flips,
                fix_icrc,
                cut,
            } => {
                let from = usize::from(from);
                let Some((port, mut f)) = self.template(from, pick) else {
                    return;
                };
                for (at, x) in flips {
                    let at = usize::from(at) % f.len();
                    f[at] ^= x;
                }
                if let Some(c) = cut {
                    f.truncate(usize::from(c) % (f.len() + 1));
                }
                if fix_icrc {
                    refresh_icrc(&mut f);
                }
                self.deliver(1 - from, port, &f);
            }
            Op::Forge {
                from,
                pick,
                edits,
                extend,
            } => {
                let from = usize::from(from);
                let Some((port, f)) = self.template(from, pick) else {
                    return;
                };
                if let Some(f) = forge(&f, &edits, extend) {
                    self.deliver(1 - from, port, &f);
                }
            }
            Op::Trim {
                from,
                pick,
                last_hop,
            } => {
                let from = usize::from(from);
                let Some((port, mut f)) = self.template(from, pick) else {
                    return;
                };
                let at = if last_hop {
                    Trimmed::LastHop
                } else {
                    Trimmed::InFabric
                };
                if let Ok(n) = trim_frame(&mut f, &WireConfig::default(), at) {
                    self.deliver(1 - from, port, &f[..n]);
                }
            }
            Op::Advance { us } => {
                self.now += Duration::from_micros(u64::from(us));
            }
            Op::Post {
                from,
                len,
                off,
                remote_off,
                imm,
                key,
                signaled,
            } => {
                let from = usize::from(from);
                let peer_dst = self.hosts[1 - from].dst;
                let host = &mut self.hosts[from];
                let len = u32::from(len) % (LEN as u32 + 16);
                let sge = [Sge {
                    addr: SRC + u64::from(off) % LEN as u64,
                    length: len,
                    lkey: host.src.lkey,
                }];
                let rkey = match key % 4 {
                    0 | 1 => peer_dst.rkey,
                    2 => peer_dst.rkey ^ 0x0001_0000,
                    _ => peer_dst.rkey.wrapping_add(1),
                };
                let wr_id = self.next_wr;
                self.next_wr += 1;
                let wr = SendWr {
                    wr_id,
                    opcode: imm.map_or(SendOpcode::Write, SendOpcode::WriteWithImm),
                    sg_list: &sge,
                    remote_addr: DST.wrapping_add_signed(i64::from(remote_off)),
                    rkey,
                    signaled,
                };
                if host.ep.post_send(host.qp, &wr).is_ok() {
                    // Unsignalled successes complete silently (counted in the QP's
                    // `messages_completed`); errors and flushes complete whatever the flag.
                    host.sq.push_back((wr_id, signaled));
                }
            }
            Op::PostRecv { host } => {
                let host = &mut self.hosts[usize::from(host)];
                let wr_id = self.next_wr;
                self.next_wr += 1;
                if host.ep.post_recv(host.qp, &RecvWr { wr_id }).is_ok() {
                    host.rq.push_back(wr_id);
                }
            }
            Op::Error { host } => {
                let host = &mut self.hosts[usize::from(host)];
                host.ep.modify_qp(host.qp, QpTransition::Error).unwrap();
            }
            Op::Reconnect => {
                self.drain_and_check();
                for host in &mut self.hosts {
                    host.ep.modify_qp(host.qp, QpTransition::Reset).unwrap();
                    // RESET drops the queues without completions (libibverbs); completions
                    // queued before it stay in the CQ, and were drained.
                    host.sq.clear();
                    host.rq.clear();
                    host.was_error = false;
                }
                connect(&mut self.hosts, self.mode);
                self.flight = [VecDeque::new(), VecDeque::new()];
            }
            Op::Port { host, port, up } => {
                self.hosts[usize::from(host)]
                    .ep
                    .handle_port_status(self.now, port % 3, up);
            }
        }
        for h in 0..2 {
            if self.hosts[h]
                .ep
                .poll_timeout()
                .is_some_and(|t| t <= self.now)
            {
                self.hosts[h].ep.handle_timeout(self.now);
            }
        }
        self.drain_and_check();
    }

    /// Let time pass, timer to timer, until every posted send has completed (successfully
    /// or not) and nothing is in flight: frames delivered in order or lost. Failing to get
    /// there within the bound is a request that neither completes nor fails.
    fn settle(&mut self, deliver: bool) {
        for _ in 0..SETTLE_BOUND {
            let idle = self.flight.iter().all(VecDeque::is_empty);
            if idle && self.hosts.iter().all(|h| h.sq.is_empty()) {
                return;
            }
            if deliver && !idle {
                for from in 0..2 {
                    while let Some((port, f)) = self.flight[from].pop_front() {
                        self.deliver(1 - from, port, &f);
                    }
                }
            } else {
                self.flight = [VecDeque::new(), VecDeque::new()];
                let Some(t) = self.hosts.iter().filter_map(|h| h.ep.poll_timeout()).min() else {
                    break;
                };
                self.now = self.now.max(t);
            }
            for h in &mut self.hosts {
                if h.ep.poll_timeout().is_some_and(|t| t <= self.now) {
                    h.ep.handle_timeout(self.now);
                }
            }
            self.drain_and_check();
        }
        for (h, host) in self.hosts.iter().enumerate() {
            assert!(
                host.sq.is_empty(),
                "host {h}: sends neither completed nor failed once the run settled: {:?} \
                 (QP {:?})",
                host.sq,
                host.ep.query_qp(host.qp).map(|i| i.state)
            );
        }
    }
}

fuzz_target!(|input: Input| {
    let mut w = World::new(input.mode);
    w.drain_and_check();
    for op in input.ops.into_iter().take(256) {
        w.run(op);
    }
    w.settle(input.deliver_when_settling);
});
