//! Workloads as applications (docs/ARCHITECTURE.md): each host runs a [`MessageApp`] that
//! posts its messages as Write-with-Immediate at their start times, pre-posts the receives its
//! incoming messages consume, and logs when each message completed at both ends.
//!
//! [`Workload::install`] does the out-of-band part (QPs between the pairs that talk, one
//! pattern source region and one checking destination region per message), so every byte of
//! every message is verified on arrival ([`crate::memory`]).
//!
//! Sizes are 64-bit: a message is split evenly over its pair's QPs, and each part is posted
//! as work requests of at most the engine's largest message (`Limits::max_message_bytes`), one
//! at a time as the send queue takes them; receives are posted as the incoming writes consume
//! them. [`check_limits`] tells before installing whether the engines' tables hold a workload.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use mrc_transport::Instant;
use mrc_transport::config::Limits;
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
    /// Work requests that completed with an error status (or could not be posted).
    pub errors: u32,
    parts_left: u64,
    recv_parts_left: u64,
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

/// One part of a message on one QP: what is left of it to post.
#[derive(Debug, Clone, Copy)]
struct PlannedSend {
    start: Instant,
    qpn: Qpn,
    /// The next byte to post, in the source region and in the destination region.
    addr: u64,
    remote_addr: u64,
    /// Bytes of the part not yet posted (0 for an empty message's one work request).
    left: u64,
    lkey: u32,
    rkey: u32,
    flow: u32,
}

/// Work requests that carry `bytes` at most `max_wr` at a time (an empty part is one).
fn work_requests(bytes: u64, max_wr: u64) -> u64 {
    bytes.div_ceil(max_wr).max(1)
}

/// The largest work request host `h`'s engine takes.
fn max_wr_bytes(sim: &Sim, h: u32) -> u64 {
    sim.endpoint(h)
        .config()
        .limits
        .max_message_bytes
        .clamp(1, u64::from(u32::MAX))
}

/// The application of one host: its sends in start order and the receives it expects.
pub struct MessageApp {
    sends: Vec<PlannedSend>,
    next: usize,
    max_wr_bytes: u64,
    /// Receives still to post, per QP (one per incoming work request).
    recvs: BTreeMap<Qpn, u64>,
    /// Work requests still to complete, sent and received.
    sends_left: u64,
    recvs_left: u64,
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
    /// Post every send whose time has come, a work request at a time, stopping at the first
    /// the QP refuses for now.
    fn post_due(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        while let Some(s) = self.sends.get_mut(self.next) {
            if s.start > now {
                return;
            }
            let len = s.left.min(self.max_wr_bytes);
            let sge = [Sge {
                addr: s.addr,
                length: len as u32,
                lkey: s.lkey,
            }];
            let wr = SendWr {
                wr_id: u64::from(s.flow),
                opcode: SendOpcode::WriteWithImm(s.flow),
                sg_list: &sge,
                remote_addr: s.remote_addr,
                rkey: s.rkey,
                signaled: true,
            };
            match verbs.post_send(s.qpn, &wr) {
                Ok(()) => {
                    s.addr += len;
                    s.remote_addr += len;
                    s.left -= len;
                    if s.left == 0 {
                        self.next += 1;
                    }
                }
                Err(VerbsError::SendQueueFull) => return,
                Err(_) => {
                    // Neither this work request nor the rest of its part will complete.
                    let lost = work_requests(s.left, self.max_wr_bytes);
                    self.log.borrow_mut()[s.flow as usize].errors += 1;
                    self.sends_left = self.sends_left.saturating_sub(lost);
                    self.next += 1;
                }
            }
        }
    }

    /// Post the receives still due on `qpn`, as many as its receive queue takes.
    fn post_recvs(&mut self, qpn: Qpn, verbs: &mut dyn Verbs) {
        let Some(n) = self.recvs.get_mut(&qpn) else {
            return;
        };
        while *n > 0 && verbs.post_recv(qpn, &RecvWr { wr_id: 0 }).is_ok() {
            *n -= 1;
        }
    }
}

impl Application for MessageApp {
    fn start(&mut self, now: Instant, verbs: &mut dyn Verbs) {
        let qpns: Vec<Qpn> = self.recvs.keys().copied().collect();
        for qpn in qpns {
            self.post_recvs(qpn, verbs);
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
                drop(log);
                self.post_recvs(wc.qpn, verbs);
                self.post_due(now, verbs);
                return;
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

/// I/O virtual addresses: every source region starts at `SRC_BASE`, every destination region
/// at `DST_BASE` (their keys tell them apart, as verbs allow); with sizes up to
/// [`crate::traffic::MAX_MESSAGE_BYTES`] no address passes 2^64.
const SRC_BASE: u64 = 0x1000_0000_0000;
const DST_BASE: u64 = 0x2000_0000_0000;

/// A workload the engines' tables cannot hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct LimitError(pub String);

/// Whether the engines (with `limits`) can hold `msgs` with `qps_per_pair` QPs per pair that
/// talks: every message registers a region at each end, every pair opens its QPs on both hosts.
pub fn check_limits(
    msgs: &[Message],
    qps_per_pair: u16,
    limits: &Limits,
) -> Result<(), LimitError> {
    let k = u64::from(qps_per_pair.max(1));
    let mut regions: BTreeMap<u32, u64> = BTreeMap::new();
    let mut pairs: BTreeSet<(u32, u32)> = BTreeSet::new();
    let mut peers: BTreeMap<u32, u64> = BTreeMap::new();
    for m in msgs {
        *regions.entry(m.src).or_default() += 1;
        *regions.entry(m.dst).or_default() += 1;
        if pairs.insert((m.src, m.dst)) {
            *peers.entry(m.src).or_default() += 1;
            *peers.entry(m.dst).or_default() += 1;
        }
    }
    if let Some((h, n)) = regions
        .iter()
        .find(|&(_, &n)| n > u64::from(limits.max_mrs))
    {
        return Err(LimitError(format!(
            "host {h} sends or receives {n} messages, but an engine registers at most {} memory \
             regions (one per message at each end): spread the messages over more hosts or \
             merge some",
            limits.max_mrs
        )));
    }
    if let Some((h, n)) = peers
        .iter()
        .find(|&(_, &n)| n * k > u64::from(limits.max_qps))
    {
        return Err(LimitError(format!(
            "host {h} needs {} QPs ({n} pairs that talk × {k} QPs per pair), but an engine has \
             at most {}: use fewer QPs per pair or fewer peers",
            n * k,
            limits.max_qps
        )));
    }
    Ok(())
}

impl Workload {
    /// Connect the pairs that talk, register every message's regions and give every host
    /// involved a [`MessageApp`]. Hosts with an application already keep it only if they are
    /// not involved.
    pub fn install(sim: &mut Sim, msgs: &[Message], opts: &WorkloadOpts) -> Result<Self, SimError> {
        let k = u64::from(opts.qps_per_pair.max(1));
        let log: Log = Rc::new(RefCell::new(Vec::with_capacity(msgs.len())));
        let mut qps: BTreeMap<(u32, u32), Vec<(Qpn, Qpn)>> = BTreeMap::new();
        let mut sends: BTreeMap<u32, Vec<PlannedSend>> = BTreeMap::new();
        let mut recvs: BTreeMap<u32, BTreeMap<Qpn, u64>> = BTreeMap::new();
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
            let src_keys = sim.register(m.src, SRC_BASE, Box::new(PatternMemory { len, salt }))?;
            let (mem, state) = CheckedMemory::new(len, salt);
            let dst_keys = sim.register(m.dst, DST_BASE, Box::new(mem))?;
            checks.push((id, m.size, state));
            // Split evenly over the pair's QPs (at least one byte per part, or one empty part),
            // each part in work requests the sender's engine takes.
            let max_wr = max_wr_bytes(sim, m.src);
            let parts = if m.size == 0 { 1 } else { k.min(m.size) };
            let base = m.size / parts;
            let start = m.start.instant();
            let mut off = 0;
            let mut wrs = 0;
            for p in 0..parts {
                let len = if p + 1 == parts { m.size - off } else { base };
                let (qa, qb) = qps[&(m.src, m.dst)][p as usize];
                sends.entry(m.src).or_default().push(PlannedSend {
                    start,
                    qpn: qa,
                    addr: SRC_BASE + off,
                    remote_addr: DST_BASE + off,
                    left: len,
                    lkey: src_keys.lkey,
                    rkey: dst_keys.rkey,
                    flow: id,
                });
                let n = work_requests(len, max_wr);
                *recvs.entry(m.dst).or_default().entry(qb).or_default() += n;
                wrs += n;
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
                parts_left: wrs,
                recv_parts_left: wrs,
            });
        }
        let hosts: BTreeSet<u32> = sends.keys().chain(recvs.keys()).copied().collect();
        for h in hosts {
            let mut s = sends.remove(&h).unwrap_or_default();
            s.sort_by_key(|p| (p.start, p.flow));
            let max_wr = max_wr_bytes(sim, h);
            let r = recvs.remove(&h).unwrap_or_default();
            let app = MessageApp {
                sends_left: s.iter().map(|p| work_requests(p.left, max_wr)).sum(),
                recvs_left: r.values().sum(),
                sends: s,
                next: 0,
                max_wr_bytes: max_wr,
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
