//! Workloads as applications (docs/ARCHITECTURE.md): each host runs a [`MessageApp`] that
//! posts its messages as Write-with-Immediate at their start times, pre-posts the receives its
//! incoming messages consume, and logs when each message completed at both ends.
//!
//! [`Workload::install`] does the out-of-band part (QPs between the pairs that talk, one
//! pattern source region and one checking destination region per message), so every byte of
//! every message is verified on arrival ([`crate::memory`]).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use mrc_transport::Instant;
use mrc_transport::verbs::{
    Qpn, RecvWr, SendOpcode, SendWr, Sge, VerbsError, WcOpcode, WorkCompletion,
};

use crate::app::{Application, Verbs};
use crate::memory::{CheckState, CheckedMemory, PatternMemory};
use crate::sim::{ConnOpts, Sim, SimError};
use crate::time::SimTime;
use crate::traffic::Message;

/// How messages become QPs and work requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkloadOpts {
    /// QPs per communicating pair; each message is split evenly over them (the RoCE
    /// practice of many QPs per peer).
    pub qps_per_pair: u16,
    pub conn: ConnOpts,
}

impl Default for WorkloadOpts {
    fn default() -> Self {
        Self {
            qps_per_pair: 1,
            conn: ConnOpts::default(),
        }
    }
}

/// What happened to one message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowRecord {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    pub start: SimTime,
    /// Every part completed at the sender (acknowledged).
    pub end: Option<SimTime>,
    /// Every part's Write-with-Immediate completed at the receiver.
    pub recv_end: Option<SimTime>,
    /// Parts that completed with an error status.
    pub errors: u32,
    parts_left: u32,
    recv_parts_left: u32,
}

impl FlowRecord {
    /// A record of `size` bytes from host 0 to host 1 starting at 0 (report tests).
    #[doc(hidden)]
    pub fn for_test(id: u32, size: u64) -> Self {
        Self {
            id,
            src: 0,
            dst: 1,
            size,
            start: SimTime::ZERO,
            end: None,
            recv_end: None,
            errors: 0,
            parts_left: 0,
            recv_parts_left: 0,
        }
    }

    /// Flow completion time (sender side), nanoseconds.
    pub fn fct_ns(&self) -> Option<u64> {
        self.end.map(|e| (e.0 - self.start.0) / 1000)
    }
}

type Log = Rc<RefCell<Vec<FlowRecord>>>;

#[derive(Debug, Clone, Copy)]
struct PlannedSend {
    start: Instant,
    qpn: Qpn,
    sge: Sge,
    remote_addr: u64,
    rkey: u32,
    flow: u32,
}

/// The application of one host: its sends in start order and the receives it expects.
pub struct MessageApp {
    sends: Vec<PlannedSend>,
    next: usize,
    recvs: Vec<(Qpn, u32)>,
    sends_left: usize,
    recvs_left: usize,
    log: Log,
}

impl core::fmt::Debug for MessageApp {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("MessageApp")
            .field("sends", &self.sends.len())
            .field("next", &self.next)
            .field("sends_left", &self.sends_left)
            .field("recvs_left", &self.recvs_left)
            .finish_non_exhaustive()
    }
}

impl MessageApp {
    /// Post every send whose time has come, stopping at the first the QP refuses for now.
    fn post_due(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        while let Some(s) = self.sends.get(self.next).copied() {
            if s.start > now {
                return;
            }
            let sge = [s.sge];
            let wr = SendWr {
                wr_id: u64::from(s.flow),
                opcode: SendOpcode::WriteWithImm(s.flow),
                sg_list: &sge,
                remote_addr: s.remote_addr,
                rkey: s.rkey,
                signaled: true,
            };
            match verbs.post_send(s.qpn, &wr) {
                Ok(()) => self.next += 1,
                Err(VerbsError::SendQueueFull) => return,
                Err(_) => {
                    self.log.borrow_mut()[s.flow as usize].errors += 1;
                    self.sends_left -= 1;
                    self.next += 1;
                }
            }
        }
    }
}

impl Application for MessageApp {
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        for &(qpn, n) in &self.recvs {
            for i in 0..n {
                if verbs
                    .post_recv(
                        qpn,
                        &RecvWr {
                            wr_id: u64::from(i),
                        },
                    )
                    .is_err()
                {
                    break;
                }
            }
        }
        self.post_due(now, verbs);
    }

    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        let t = SimTime::from_instant(now);
        let mut log = self.log.borrow_mut();
        match wc.opcode {
            WcOpcode::RdmaWrite => {
                self.sends_left = self.sends_left.saturating_sub(1);
                if let Some(r) = log.get_mut(wc.wr_id as usize) {
                    r.parts_left = r.parts_left.saturating_sub(1);
                    if !wc.status.is_success() {
                        r.errors += 1;
                    }
                    if r.parts_left == 0 && r.errors == 0 {
                        r.end = Some(t);
                    }
                }
            }
            WcOpcode::RecvRdmaWithImm => {
                self.recvs_left = self.recvs_left.saturating_sub(1);
                if let Some(r) = wc.imm_data.and_then(|f| log.get_mut(f as usize)) {
                    r.recv_parts_left = r.recv_parts_left.saturating_sub(1);
                    if r.recv_parts_left == 0 && wc.status.is_success() {
                        r.recv_end = Some(t);
                    }
                }
            }
        }
        drop(log);
        self.post_due(now, verbs);
    }

    fn on_timer(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        self.post_due(now, verbs);
    }

    fn next_timer(&self) -> Option<Instant> {
        self.sends.get(self.next).map(|s| s.start)
    }

    fn is_done(&self) -> bool {
        self.sends_left == 0 && self.recvs_left == 0
    }
}

/// Messages installed on a simulator: their log and the checks of their destination regions.
#[derive(Debug)]
pub struct Workload {
    log: Log,
    checks: Vec<(u32, u64, Arc<Mutex<CheckState>>)>,
}

/// Bytes checked by [`Workload::verify`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verified {
    pub messages: usize,
    pub bytes: u64,
}

/// I/O virtual addresses: source regions at `SRC_BASE + flow << 32`, destinations likewise.
const SRC_BASE: u64 = 0x1000_0000_0000;
const DST_BASE: u64 = 0x2000_0000_0000;

impl Workload {
    /// Connect the pairs that talk, register every message's regions and give every host
    /// involved a [`MessageApp`]. Hosts with an application already keep it only if they are
    /// not involved.
    pub fn install(sim: &mut Sim, msgs: &[Message], opts: &WorkloadOpts) -> Result<Self, SimError> {
        let k = u32::from(opts.qps_per_pair.max(1));
        let log: Log = Rc::new(RefCell::new(Vec::with_capacity(msgs.len())));
        let mut qps: BTreeMap<(u32, u32), Vec<(Qpn, Qpn)>> = BTreeMap::new();
        let mut sends: BTreeMap<u32, Vec<PlannedSend>> = BTreeMap::new();
        let mut recvs: BTreeMap<u32, BTreeMap<Qpn, u32>> = BTreeMap::new();
        let mut checks = Vec::with_capacity(msgs.len());
        for (id, m) in msgs.iter().enumerate() {
            let id = id as u32;
            if let std::collections::btree_map::Entry::Vacant(e) = qps.entry((m.src, m.dst)) {
                let mut v = Vec::new();
                for _ in 0..k {
                    let c = sim.connect(m.src, m.dst, opts.conn)?;
                    v.push((c.a.qpn, c.b.qpn));
                }
                e.insert(v);
            }
            let salt = u64::from(id).wrapping_mul(0x2545_f491_4f6c_dd1d) ^ 0x5eed;
            let len = m.size as usize;
            let src_iova = SRC_BASE + (u64::from(id) << 32);
            let dst_iova = DST_BASE + (u64::from(id) << 32);
            let src_keys = sim.register(m.src, src_iova, Box::new(PatternMemory { len, salt }))?;
            let (mem, state) = CheckedMemory::new(len, salt);
            let dst_keys = sim.register(m.dst, dst_iova, Box::new(mem))?;
            checks.push((id, m.size, state));
            // Split evenly over the pair's QPs (at least one byte per part, or one empty part).
            let parts = if m.size == 0 { 1 } else { k.min(m.size as u32) };
            let base = m.size / u64::from(parts);
            let start = m.start.instant();
            let mut off = 0;
            for p in 0..parts {
                let len = if p + 1 == parts { m.size - off } else { base };
                let (qa, qb) = qps[&(m.src, m.dst)][p as usize];
                sends.entry(m.src).or_default().push(PlannedSend {
                    start,
                    qpn: qa,
                    sge: Sge {
                        addr: src_iova + off,
                        length: len as u32,
                        lkey: src_keys.lkey,
                    },
                    remote_addr: dst_iova + off,
                    rkey: dst_keys.rkey,
                    flow: id,
                });
                *recvs.entry(m.dst).or_default().entry(qb).or_default() += 1;
                off += len;
            }
            log.borrow_mut().push(FlowRecord {
                id,
                src: m.src,
                dst: m.dst,
                size: m.size,
                start: m.start,
                end: None,
                recv_end: None,
                errors: 0,
                parts_left: parts,
                recv_parts_left: parts,
            });
        }
        let hosts: std::collections::BTreeSet<u32> =
            sends.keys().chain(recvs.keys()).copied().collect();
        for h in hosts {
            let mut s = sends.remove(&h).unwrap_or_default();
            s.sort_by_key(|p| (p.start, p.flow));
            let r: Vec<(Qpn, u32)> = recvs.remove(&h).unwrap_or_default().into_iter().collect();
            let app = MessageApp {
                sends_left: s.len(),
                recvs_left: r.iter().map(|&(_, n)| n as usize).sum(),
                sends: s,
                next: 0,
                recvs: r,
                log: log.clone(),
            };
            sim.set_app(h, Box::new(app))?;
        }
        Ok(Self { log, checks })
    }

    /// Every message's record, by id.
    pub fn records(&self) -> Vec<FlowRecord> {
        self.log.borrow().clone()
    }

    /// Check every byte of every message arrived, intact: every destination region written
    /// completely, no write that differs from the source's bytes, every message completed at
    /// both ends without error.
    pub fn verify(&self) -> Result<Verified, String> {
        let log = self.log.borrow();
        let mut bytes = 0;
        for (id, len, state) in &self.checks {
            let st = state
                .lock()
                .map_err(|_| "poisoned check state".to_owned())?;
            let r = &log[*id as usize];
            if st.corrupt_writes > 0 {
                return Err(format!(
                    "message {id}: {} corrupt writes",
                    st.corrupt_writes
                ));
            }
            if !st.complete(*len as usize) {
                return Err(format!(
                    "message {id} ({}->{}): {} of {len} bytes placed",
                    r.src,
                    r.dst,
                    st.covered()
                ));
            }
            if r.errors > 0 || r.end.is_none() || r.recv_end.is_none() {
                return Err(format!(
                    "message {id} ({}->{}): errors {}, sender done {}, receiver done {}",
                    r.src,
                    r.dst,
                    r.errors,
                    r.end.is_some(),
                    r.recv_end.is_some()
                ));
            }
            bytes += len;
        }
        Ok(Verified {
            messages: self.checks.len(),
            bytes,
        })
    }
}
