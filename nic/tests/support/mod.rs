//! Shared by the NIC tests: engine configurations, QP setup over handles, and a traffic
//! application (Writes and Write-with-Immediates of many sizes, both directions) whose every
//! byte is checked at the receiver. In-process and two-process tests use the same plan: it is
//! a function of a seed, so the receiver knows what each message must hold.
#![allow(dead_code)] // each test binary uses a different part

#[cfg(feature = "dpdk")]
pub mod eal;

use std::net::Ipv6Addr;

use mrc_nic::{AppDriver, MemoryRegion, NextHop, NicConfig, NicHandle};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::app::{Application, Verbs};
use mrc_transport::verbs::{
    Access, CqHandle, InitAttr, MrKeys, PdHandle, QpCap, QpInitAttr, QpTransition, Qpn, RecvWr,
    RemoteNic, RtrAttr, RtsAttr, SendOpcode, SendWr, Sge, WcOpcode, WcStatus, WorkCompletion,
};
use mrc_transport::{Duration, EndpointConfig, Instant, PathMode, PortConfig};

/// The NIC address of host `i`.
pub fn nic_addr(i: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x6d72, 0x63, 0, 0, 0, 0, i + 1)
}

/// An ECMP-mode engine for host `host` with `planes` ports. MACs are placeholders (the NIC
/// takes its ports' own); timers are relaxed for test machines whose threads share cores.
pub fn endpoint_config(host: u16, planes: usize) -> EndpointConfig {
    let ports = (0..planes)
        .map(|_| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, 0, 0]),
                EthernetAddress([2, 0, 0, 0, 0, 1]),
            )
        })
        .collect();
    let mut cfg = EndpointConfig::new(
        0x5eed ^ u64::from(host),
        nic_addr(host),
        ports,
        PathMode::Ecmp,
    );
    cfg.timers.initial_rtt = Duration::from_micros(500);
    cfg.timers.pto_min = Duration::from_millis(5);
    cfg
}

/// A NIC configuration around [`endpoint_config`] with these next hops.
pub fn nic_config(host: u16, planes: usize, next_hops: Vec<NextHop>) -> NicConfig {
    let mut c = NicConfig::new(endpoint_config(host, planes));
    c.next_hops = next_hops;
    c.thread_name = format!("nic{host}");
    c
}

pub const SRC_VA: u64 = 0x10_0000_0000;
pub const DST_VA: u64 = 0x20_0000_0000;

/// One side of a connection: a QP with its CQ, a source region filled with a pattern and a
/// destination region for the peer's writes.
pub struct Side {
    pub handle: NicHandle,
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub qpn: Qpn,
    pub src: MemoryRegion,
    pub src_keys: MrKeys,
    pub dst: MemoryRegion,
    pub dst_keys: MrKeys,
}

/// What the peer needs to know about a [`Side`] (exchanged out of band).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerInfo {
    pub addr: Ipv6Addr,
    pub qpn: Qpn,
    pub rkey: u32,
}

impl PeerInfo {
    /// One line of text, for the two-process tests.
    pub fn to_line(self) -> String {
        format!("PEER {} {} {}", self.addr, self.qpn.0, self.rkey)
    }

    pub fn from_line(line: &str) -> Option<Self> {
        let mut w = line.split_whitespace();
        (w.next()? == "PEER").then_some(())?;
        Some(Self {
            addr: w.next()?.parse().ok()?,
            qpn: Qpn(w.next()?.parse().ok()?),
            rkey: w.next()?.parse().ok()?,
        })
    }
}

/// The byte at offset `i` of the source region of the side with `salt`.
pub fn pattern(salt: u64, i: usize) -> u8 {
    let x = (i as u64 ^ salt.wrapping_mul(0x9e37_79b9)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

/// Creates the PD, CQ, QP (INIT) and regions of one side.
pub fn side(handle: &NicHandle, plan: &Plan, salt: u64) -> Side {
    let pd = handle.alloc_pd().expect("pd");
    let cq = handle.create_cq(8192).expect("cq");
    let qpn = handle
        .create_qp(&QpInitAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap {
                max_send_wr: 256,
                max_recv_wr: 1024,
                max_send_sge: 4,
            },
            sq_sig_all: false,
        })
        .expect("qp");
    handle
        .modify_qp(qpn, QpTransition::Init(InitAttr::default()))
        .expect("init");
    let src_bytes: Vec<u8> = (0..plan.src_len).map(|i| pattern(salt, i)).collect();
    let src = MemoryRegion::from_slice(&src_bytes);
    let dst = MemoryRegion::new(plan.dst_len);
    dst.fill(0xee);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let src_keys = handle.reg_mr(pd, SRC_VA, &src, access).expect("src mr");
    let dst_keys = handle.reg_mr(pd, DST_VA, &dst, access).expect("dst mr");
    Side {
        handle: handle.clone(),
        pd,
        cq,
        qpn,
        src,
        src_keys,
        dst,
        dst_keys,
    }
}

impl Side {
    pub fn info(&self, addr: Ipv6Addr) -> PeerInfo {
        PeerInfo {
            addr,
            qpn: self.qpn,
            rkey: self.dst_keys.rkey,
        }
    }

    /// INIT → RTR → RTS towards `peer`; this side sends from `my_psn`, the peer from
    /// `peer_psn`.
    pub fn connect(&self, peer: PeerInfo, my_psn: u32, peer_psn: u32) {
        let remote = RemoteNic {
            addr: peer.addr,
            host: None,
        };
        self.handle
            .modify_qp(
                self.qpn,
                QpTransition::Rtr(RtrAttr::new(remote, peer.qpn, peer_psn)),
            )
            .expect("rtr");
        self.handle
            .modify_qp(self.qpn, QpTransition::Rts(RtsAttr::new(my_psn)))
            .expect("rts");
    }
}

/// Connects two sides in one process.
pub fn connect_pair(a: &Side, a_addr: Ipv6Addr, b: &Side, b_addr: Ipv6Addr) {
    a.connect(b.info(b_addr), 100, 0xff_fff0);
    b.connect(a.info(a_addr), 0xff_fff0, 100);
}

/// One message of a [`Plan`]: `len` bytes from `src_off` of the sender's source region to
/// `dst_off` of the receiver's destination region, with an immediate or not.
#[derive(Debug, Clone, Copy)]
pub struct Msg {
    pub len: usize,
    pub src_off: usize,
    pub dst_off: usize,
    pub imm: Option<u32>,
}

/// A deterministic list of messages: sizes from 1 byte to several packets, every other one
/// a Write-with-Immediate, each to its own slot of the destination region.
#[derive(Debug, Clone)]
pub struct Plan {
    pub msgs: Vec<Msg>,
    pub src_len: usize,
    pub dst_len: usize,
}

impl Plan {
    pub fn new(count: usize, max_len: usize) -> Self {
        let src_len = max_len + 4096;
        let mut msgs = Vec::with_capacity(count);
        let mut dst_off = 0;
        for i in 0..count {
            let len = match i % 8 {
                0 => 1,
                1 => 4096,
                2 => 4097,
                3 => max_len,
                _ => 1 + (i * 7919) % max_len,
            };
            msgs.push(Msg {
                len,
                src_off: (i * 131) % 4096,
                dst_off,
                imm: (i % 2 == 1).then_some(0x1000_0000 + i as u32),
            });
            dst_off += len.next_multiple_of(64) + 64;
        }
        Self {
            msgs,
            src_len,
            dst_len: dst_off,
        }
    }

    /// Receives the sender must have posted for.
    pub fn imm_count(&self) -> usize {
        self.msgs.iter().filter(|m| m.imm.is_some()).count()
    }

    /// Checks message `i` in `dst`, as written from a source with `salt`.
    pub fn check(&self, i: usize, dst: &MemoryRegion, salt: u64) -> Result<(), String> {
        let m = self.msgs[i];
        let got = dst.read_vec(m.dst_off, m.len + 64);
        for (k, &b) in got[..m.len].iter().enumerate() {
            let want = pattern(salt, m.src_off + k);
            if b != want {
                return Err(format!(
                    "message {i} ({} bytes): byte {k} is {b:#04x}, want {want:#04x}",
                    m.len
                ));
            }
        }
        if got[m.len..].iter().any(|&b| b != 0xee) {
            return Err(format!("message {i}: bytes after it were written"));
        }
        Ok(())
    }

    /// Checks every message.
    pub fn check_all(&self, dst: &MemoryRegion, salt: u64) -> Result<(), String> {
        (0..self.msgs.len()).try_for_each(|i| self.check(i, dst, salt))
    }
}

/// Sends a [`Plan`] to the peer (keeping up to `window` messages outstanding, every one
/// signalled) and receives the peer's, checking each Write-with-Immediate's bytes when its
/// completion arrives. Done when both directions are.
pub struct Traffic {
    pub plan: Plan,
    pub qpn: Qpn,
    pub lkey: u32,
    pub peer_rkey: u32,
    /// Salt of the peer's source pattern (to check what it wrote here).
    pub peer_salt: u64,
    pub dst: MemoryRegion,
    pub window: usize,
    /// Whether this side sends (a side may only receive).
    pub send: bool,
    /// Whether the peer sends to this side.
    pub receive: bool,
    pub next: usize,
    pub completed: usize,
    pub imms: Vec<u32>,
    pub errors: Vec<String>,
    /// Called on every send completion (e.g. to fail a link half way).
    pub on_progress: Option<Box<dyn FnMut(usize) + Send>>,
}

impl Traffic {
    pub fn new(plan: &Plan, side: &Side, peer: PeerInfo, peer_salt: u64) -> Self {
        Self {
            plan: plan.clone(),
            qpn: side.qpn,
            lkey: side.src_keys.lkey,
            peer_rkey: peer.rkey,
            peer_salt,
            dst: side.dst.clone(),
            window: 32,
            send: true,
            receive: true,
            next: 0,
            completed: 0,
            imms: Vec::new(),
            errors: Vec::new(),
            on_progress: None,
        }
    }

    fn post_next(&mut self, verbs: &mut dyn Verbs) {
        while self.send
            && self.next < self.plan.msgs.len()
            && self.next - self.completed < self.window
        {
            let m = self.plan.msgs[self.next];
            let sge = [Sge {
                addr: SRC_VA + m.src_off as u64,
                length: m.len as u32,
                lkey: self.lkey,
            }];
            let wr = SendWr {
                wr_id: self.next as u64,
                opcode: m.imm.map_or(SendOpcode::Write, SendOpcode::WriteWithImm),
                sg_list: &sge,
                remote_addr: DST_VA + m.dst_off as u64,
                rkey: self.peer_rkey,
                signaled: true,
            };
            match verbs.post_send(self.qpn, &wr) {
                Ok(()) => self.next += 1,
                Err(_) => return, // doorbell ring full: again on the next completion
            }
        }
    }
}

impl Application for Traffic {
    fn start(&mut self, _now: Instant, verbs: &mut dyn Verbs) {
        if self.receive {
            for i in 0..self.plan.imm_count() {
                verbs
                    .post_recv(self.qpn, &RecvWr { wr_id: i as u64 })
                    .expect("post_recv");
            }
        }
        self.post_next(verbs);
    }

    fn on_completion(&mut self, _now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        if wc.status != WcStatus::Success {
            self.errors.push(format!("completion {wc:?}"));
        }
        match wc.opcode {
            WcOpcode::RdmaWrite => {
                if wc.wr_id != self.completed as u64 {
                    self.errors
                        .push(format!("send completion {} out of order", wc.wr_id));
                }
                self.completed += 1;
                if let Some(f) = self.on_progress.as_mut() {
                    f(self.completed);
                }
                self.post_next(verbs);
            }
            WcOpcode::RecvRdmaWithImm => {
                let imm = wc.imm_data.unwrap_or(0);
                let i = imm.wrapping_sub(0x1000_0000) as usize;
                match self.plan.msgs.get(i) {
                    Some(m) if m.imm == Some(imm) && m.len as u32 == wc.byte_len => {
                        if let Err(e) = self.plan.check(i, &self.dst, self.peer_salt) {
                            self.errors.push(e);
                        }
                    }
                    _ => self.errors.push(format!("unexpected receive {wc:?}")),
                }
                self.imms.push(imm);
            }
        }
    }

    fn is_done(&self) -> bool {
        let sent = !self.send || self.completed == self.plan.msgs.len();
        let received = !self.receive || self.imms.len() == self.plan.imm_count();
        (sent && received) || !self.errors.is_empty()
    }
}

impl Traffic {
    /// Panics with what went wrong, if anything: errors, receive order, bytes.
    pub fn assert_clean(&self) {
        assert!(
            self.errors.is_empty(),
            "errors: {:?}",
            &self.errors[..self.errors.len().min(5)]
        );
        if self.receive {
            let want: Vec<u32> = self.plan.msgs.iter().filter_map(|m| m.imm).collect();
            assert_eq!(self.imms, want, "immediates in message order");
            self.plan
                .check_all(&self.dst, self.peer_salt)
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// Runs `apps[i]` over `sides[i]`'s handle, each on its own application thread, until both
/// are done (or `limit` of wall time passed: a panic).
pub fn run_apps<const N: usize>(
    sides: &[Side; N],
    apps: [Traffic; N],
    limit: std::time::Duration,
) -> [Traffic; N] {
    let threads: Vec<_> = sides
        .iter()
        .zip(apps)
        .map(|(s, mut app)| {
            let handle = s.handle.clone();
            let cq = s.cq;
            std::thread::spawn(move || {
                AppDriver::new(&handle)
                    .cq(cq)
                    .deadline(limit)
                    .run(&mut app)
                    .map(|_| app)
            })
        })
        .collect();
    let done: Vec<Traffic> = threads
        .into_iter()
        .map(|t| t.join().expect("app thread").expect("application finished"))
        .collect();
    done.try_into().unwrap_or_else(|_| unreachable!())
}

/// The traffic of two connected sides, both ways (`salts`: of each side's source pattern).
pub fn both_ways(
    plan: &Plan,
    sides: &[Side; 2],
    addrs: [Ipv6Addr; 2],
    salts: [u64; 2],
) -> [Traffic; 2] {
    [
        Traffic::new(plan, &sides[0], sides[1].info(addrs[1]), salts[1]),
        Traffic::new(plan, &sides[1], sides[0].info(addrs[0]), salts[0]),
    ]
}
