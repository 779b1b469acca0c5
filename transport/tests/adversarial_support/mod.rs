//! What the adversarial suites share: guarded memory regions (guard bytes around every MR,
//! checked byte by byte), a lab of three hosts with the frames of one real Write recorded as
//! templates, and `forge` to rebuild a template with changed headers and a valid ICRC.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use mrc_transport::Duration;
use mrc_transport::stats::DropReason;
use mrc_transport::verbs::{Access, Memory, MrKeys, PdHandle, SendOpcode, SendWr, Sge};
use mrc_transport::wire::{Body, FrameRepr, Opcode, WireConfig, WriteHeaders, parse_frame};

use super::common::{
    Conn, ConnOpts, Net, NetBuilder, connect, drain_cq, is_write, pattern, region,
};

/// Guard bytes on each side of a region's bytes in its backing buffer.
pub const GUARD: usize = 256;
pub const GUARD_BYTE: u8 = 0xa5;

/// A region's bytes inside a larger buffer with guard bytes on both sides. The engine is
/// trusted with nothing: writes are not bounds-checked here beyond the buffer's own, so a
/// write past the region lands in a guard and shows in [`Guarded::check_guards`].
#[derive(Debug, Clone)]
pub struct Guarded {
    buf: Arc<Mutex<Vec<u8>>>,
    len: usize,
}

impl Guarded {
    pub fn new(len: usize, fill: impl Fn(usize) -> u8) -> Self {
        let mut v = vec![GUARD_BYTE; len + 2 * GUARD];
        for (i, b) in v[GUARD..GUARD + len].iter_mut().enumerate() {
            *b = fill(i);
        }
        Self {
            buf: Arc::new(Mutex::new(v)),
            len,
        }
    }

    /// The whole backing buffer, guards included.
    pub fn backing(&self) -> Vec<u8> {
        self.buf.lock().unwrap().clone()
    }

    /// The region's bytes.
    pub fn bytes(&self) -> Vec<u8> {
        self.buf.lock().unwrap()[GUARD..GUARD + self.len].to_vec()
    }

    /// Panic if a guard byte changed.
    pub fn check_guards(&self, what: &str) {
        let b = self.buf.lock().unwrap();
        let bad = b[..GUARD]
            .iter()
            .chain(&b[GUARD + self.len..])
            .position(|&x| x != GUARD_BYTE);
        assert_eq!(bad, None, "{what}: a guard byte changed");
    }
}

impl Memory for Guarded {
    fn len(&self) -> usize {
        self.len
    }
    fn read(&self, offset: usize, dst: &mut [u8]) {
        let b = self.buf.lock().unwrap();
        dst.copy_from_slice(&b[GUARD + offset..GUARD + offset + dst.len()]);
    }
    fn write(&mut self, offset: usize, src: &[u8]) {
        let mut b = self.buf.lock().unwrap();
        b[GUARD + offset..GUARD + offset + src.len()].copy_from_slice(src);
    }
}

/// A registered guarded region.
#[derive(Debug, Clone)]
pub struct GuardedMr {
    pub name: &'static str,
    pub host: usize,
    pub iova: u64,
    pub keys: MrKeys,
    pub mem: Guarded,
}

/// Register a guarded region of `len` bytes at `iova` on host `h`.
pub fn guarded_mr(
    n: &mut Net,
    name: &'static str,
    h: usize,
    pd: PdHandle,
    iova: u64,
    len: usize,
    access: Access,
) -> GuardedMr {
    let mem = Guarded::new(len, pattern(iova));
    let keys = n
        .ep(h)
        .reg_mr(pd, iova, Box::new(mem.clone()), access)
        .unwrap();
    GuardedMr {
        name,
        host: h,
        iova,
        keys,
        mem,
    }
}

/// Every guarded region's backing bytes, to compare after an attack.
#[derive(Debug)]
pub struct Snapshot(Vec<Vec<u8>>);

impl Snapshot {
    /// Region `i`'s bytes, guards stripped.
    pub fn region(&self, i: usize) -> Vec<u8> {
        let b = &self.0[i];
        b[GUARD..b.len() - GUARD].to_vec()
    }

    /// The snapshot without its first `n` regions.
    pub fn skip(&self, n: usize) -> Self {
        Self(self.0[n..].to_vec())
    }
}

pub fn snapshot(mrs: &[GuardedMr]) -> Snapshot {
    Snapshot(mrs.iter().map(|m| m.mem.backing()).collect())
}

/// Every byte of every guarded region and its guards is as in `before`.
pub fn assert_untouched(mrs: &[GuardedMr], before: &Snapshot, what: &str) {
    for (m, old) in mrs.iter().zip(&before.0) {
        m.mem
            .check_guards(&format!("{what}: {} on host {}", m.name, m.host));
        let now = m.mem.backing();
        let first = now.iter().zip(old).position(|(a, b)| a != b);
        assert_eq!(
            first,
            None,
            "{what}: byte {:?} of {} on host {} changed",
            first.map(|i| i as isize - GUARD as isize),
            m.name,
            m.host
        );
    }
}

pub const SRC_VA: u64 = 0x4000_0000;
pub const SCRATCH_VA: u64 = 0x5000_0000;
pub const LEN: usize = 8192;
pub const DST_VA: u64 = 0x9000_0000;
pub const RO_VA: u64 = 0xa000_0000;
pub const FOREIGN_VA: u64 = 0xb000_0000;

/// Three hosts on one plane, one path each way. Host 0's QP is connected to host 1's
/// `qp_b` (the victim), host 2's to host 1's `qp_c`. Host 1 holds guarded regions: `dst`
/// (remote write) with remote-writable neighbours `below` and `above` in I/O address space,
/// `ro` (no remote access) and `foreign` (remote write, another protection domain).
pub struct Lab {
    pub n: Net,
    pub c: Conn,
    pub c2: Conn,
    pub dst: GuardedMr,
    pub ro: GuardedMr,
    pub foreign: GuardedMr,
    pub mrs: Vec<GuardedMr>,
    /// A Write frame host 0 sent to host 1, and a SACK host 1 sent back.
    pub write: Vec<u8>,
    pub sack: Vec<u8>,
    /// PSN host 1 expects next from host 0.
    pub next_psn: u32,
}

impl Lab {
    pub fn new() -> Self {
        Self::with(ConnOpts::default())
    }

    /// A lab whose QP pairs are connected with `opts`.
    pub fn with(opts: ConnOpts) -> Self {
        let mut n = NetBuilder {
            hosts: 3,
            planes: 1,
            paths_per_plane: 1,
            ..NetBuilder::default()
        }
        .build();
        let c = connect(&mut n, 0, 1, opts);
        let c2 = connect(&mut n, 2, 1, opts);
        let rw = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let dst = guarded_mr(&mut n, "dst", 1, c.pd_b, DST_VA, LEN, rw);
        let below = guarded_mr(&mut n, "below", 1, c.pd_b, DST_VA - 4096, 4096, rw);
        let above = guarded_mr(&mut n, "above", 1, c.pd_b, DST_VA + LEN as u64, 4096, rw);
        let ro = guarded_mr(&mut n, "ro", 1, c.pd_b, RO_VA, LEN, Access::LOCAL_WRITE);
        let other_pd = n.ep(1).alloc_pd().unwrap();
        let foreign = guarded_mr(&mut n, "foreign", 1, other_pd, FOREIGN_VA, LEN, rw);
        let src_guarded = guarded_mr(
            &mut n,
            "src",
            0,
            c.pd_a,
            SRC_VA + 0x10_0000,
            LEN,
            Access::LOCAL_WRITE,
        );
        let mrs = vec![
            dst.clone(),
            below,
            above,
            ro.clone(),
            foreign.clone(),
            src_guarded,
        ];

        // One real Write into a scratch region, recorded on both sides.
        let src = region(&mut n, 0, c.pd_a, SRC_VA, LEN, pattern(1));
        let scratch = region(&mut n, 1, c.pd_b, SCRATCH_VA, LEN, |_| 0);
        n.capture(0, true);
        n.capture(1, true);
        let sge = [Sge {
            addr: SRC_VA,
            length: LEN as u32,
            lkey: src.lkey,
        }];
        n.ep(0)
            .post_send(
                c.qp_a,
                &SendWr {
                    wr_id: 1,
                    opcode: SendOpcode::Write,
                    sg_list: &sge,
                    remote_addr: SCRATCH_VA,
                    rkey: scratch.rkey,
                    signaled: true,
                },
            )
            .unwrap();
        n.run_until(Duration::from_millis(10), |n| {
            !drain_cq(n, 0, c.cq_a).is_empty()
        });
        n.run_for(Duration::from_micros(100));
        let wire = WireConfig::default();
        let write = n.captured(0).into_iter().find(|f| is_write(f)).unwrap();
        let sack = n
            .captured(1)
            .into_iter()
            .find(|f| parse_frame(f, &wire).is_ok_and(|p| p.bth.opcode == Opcode::Sack))
            .unwrap();
        let first = parse_frame(&write, &wire).unwrap().bth.psn;
        let packets = LEN.div_ceil(n.ep_ref(0).config().payload_mtu as usize) as u32;
        Self {
            n,
            c,
            c2,
            dst,
            ro,
            foreign,
            mrs,
            write,
            sack,
            next_psn: (first + packets) & 0xff_ffff,
        }
    }

    /// Deliver `frame` to host `h` now and let the fabric run a little (answers leave).
    pub fn inject(&mut self, h: usize, frame: &[u8]) {
        let now = self.n.now();
        self.n.ep(h).handle_packet(now, 0, frame);
        self.n.run_for(Duration::from_micros(50));
    }

    pub fn drops(&self, h: usize, r: DropReason) -> u64 {
        self.n.ep_ref(h).stats().drops.get(r)
    }

    pub fn all_drops(&self, h: usize) -> u64 {
        self.n.ep_ref(h).stats().drops.total()
    }
}

/// Rebuild `frame` after `f` changed its headers or payload, with a valid ICRC: only the
/// engine's own checks can refuse it.
pub fn forge(frame: &[u8], f: impl FnOnce(&mut FrameRepr, &mut Vec<u8>)) -> Vec<u8> {
    let wire = WireConfig::default();
    let p = parse_frame(frame, &wire).unwrap();
    let mut repr = p.to_repr().unwrap();
    let mut payload = p.payload.to_vec();
    f(&mut repr, &mut payload);
    let mut buf = vec![0u8; 16 * 1024];
    let len = repr.build(&mut buf, &payload, &wire).unwrap();
    buf.truncate(len);
    buf
}

/// The Write headers of a forged frame.
pub fn write_headers(r: &mut FrameRepr) -> &mut WriteHeaders {
    match &mut r.body {
        Body::Write(w) => w,
        other => panic!("not a write: {other:?}"),
    }
}
