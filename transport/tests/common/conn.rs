//! QP pairs, regions and Writes over a [`Net`]: connect two hosts, register patterned
//! regions, post a Write and check every byte and completion it produced.

use mrc_transport::Duration;
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, MrKeys, PdHandle, QpCap, QpInitAttr, QpTransition, Qpn, RecvWr,
    RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};

use super::{Net, nic};

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
    /// Applied to both sides' RTR attributes after `rtr_mpr`.
    pub rtr: fn(RtrAttr) -> RtrAttr,
    pub rts: fn(RtsAttr) -> RtsAttr,
    pub cap: QpCap,
    pub cq_depth: u32,
}

impl Default for ConnOpts {
    fn default() -> Self {
        Self {
            init: InitAttr::default(),
            rtr_mpr: 1024,
            rtr: |a| a,
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
        let ep = net.ep(h);
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
        let rtr = (opts.rtr)(rtr);
        net.ep(h).modify_qp(me, QpTransition::Rtr(rtr)).unwrap();
        let rts = (opts.rts)(RtsAttr::new(psn));
        net.ep(h).modify_qp(me, QpTransition::Rts(rts)).unwrap();
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
    net.ep(h)
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
        let n = net.ep(h).poll_cq(cq, &mut buf).unwrap();
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
    let job = start_write(net, c, len, imm, salt);
    finish_write(net, c, job);
}

/// A Write posted by [`start_write`], checked by [`finish_write`].
#[derive(Debug, Clone, Copy)]
pub struct WriteJob {
    src: MrKeys,
    dst: MrKeys,
    len: usize,
    imm: Option<u32>,
    salt: u64,
}

/// Register the regions and post the Write of [`write_and_check`], without running.
pub fn start_write(net: &mut Net, c: &Conn, len: usize, imm: Option<u32>, salt: u64) -> WriteJob {
    let src = region(net, c.a, c.pd_a, SRC, len.max(1), pattern(salt));
    let dst = region(net, c.b, c.pd_b, DST, len.max(1) + 64, |_| 0xee);
    if imm.is_some() {
        net.ep(c.b)
            .post_recv(c.qp_b, &RecvWr { wr_id: 77 })
            .unwrap();
    }
    let sge = [Sge {
        addr: SRC,
        length: len as u32,
        lkey: src.lkey,
    }];
    net.ep(c.a)
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
    WriteJob {
        src,
        dst,
        len,
        imm,
        salt,
    }
}

/// Run a [`start_write`] Write to completion and check it (see [`write_and_check`]).
pub fn finish_write(net: &mut Net, c: &Conn, job: WriteJob) {
    let WriteJob {
        src,
        dst,
        len,
        imm,
        salt,
    } = job;
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
    let got = net.ep(c.b).mr_slice(dst.lkey).unwrap();
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
    net.ep(c.a).dereg_mr(src.lkey).unwrap();
    net.ep(c.b).dereg_mr(dst.lkey).unwrap();
}
