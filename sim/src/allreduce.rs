//! Ring all-reduce as an application (the collective pattern of brief §6.2 #16): `n` ranks
//! each hold `n` chunks; `n − 1` reduce-scatter steps send a chunk to the right neighbour's
//! staging slot, where it is added (bytewise, wrapping) into the local chunk; `n − 1`
//! all-gather steps pass the reduced chunks around. Every step is a Write-with-Immediate whose
//! receive completion triggers the next; a chunk is never modified after it was sent, so
//! retransmissions read the bytes the first transmission did.

use std::cell::RefCell;
use std::rc::Rc;

use mrc_transport::Instant;
use mrc_transport::verbs::{Qpn, RecvWr, SendOpcode, SendWr, Sge, WcOpcode, WorkCompletion};

use crate::app::{Application, Verbs};
use crate::memory::fill_pattern;
use crate::sim::{ConnOpts, Sim, SimError};
use crate::time::SimTime;

const BUF: u64 = 0x3000_0000_0000;
const STAGE: u64 = 0x4000_0000_0000;

/// One rank.
struct Rank {
    n: usize,
    r: usize,
    chunk: usize,
    to_right: Qpn,
    from_left: Qpn,
    buf_lkey: u32,
    stage_lkey: u32,
    right_stage_rkey: u32,
    /// Next step to send, steps received so far.
    next_send: usize,
    received: usize,
    sends_done: usize,
    done_at: Rc<RefCell<Vec<Option<SimTime>>>>,
    errors: u32,
    scratch: Vec<u8>,
    acc: Vec<u8>,
}

impl core::fmt::Debug for Rank {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Rank")
            .field("r", &self.r)
            .field("next_send", &self.next_send)
            .field("received", &self.received)
            .finish_non_exhaustive()
    }
}

impl Rank {
    fn steps(&self) -> usize {
        2 * (self.n - 1)
    }

    /// The chunk sent at step `k` (and received by the right neighbour at `k`).
    fn send_chunk(&self, k: usize) -> usize {
        let n = self.n;
        if k < n - 1 {
            (self.r + n - k % n) % n
        } else {
            (self.r + 1 + n - (k - (n - 1)) % n) % n
        }
    }

    /// The chunk the left neighbour sends at step `k`.
    fn recv_chunk(&self, k: usize) -> usize {
        (self.send_chunk(k) + self.n - 1) % self.n
    }

    fn send(&mut self, verbs: &mut dyn Verbs) {
        let k = self.next_send;
        let c = self.send_chunk(k);
        let sge = [Sge {
            addr: BUF + (c * self.chunk) as u64,
            length: self.chunk as u32,
            lkey: self.buf_lkey,
        }];
        let wr = SendWr {
            wr_id: k as u64,
            opcode: SendOpcode::WriteWithImm(k as u32),
            sg_list: &sge,
            remote_addr: STAGE + (k * self.chunk) as u64,
            rkey: self.right_stage_rkey,
            signaled: true,
        };
        if verbs.post_send(self.to_right, &wr).is_err() {
            self.errors += 1;
        }
        self.next_send += 1;
    }

    /// Fold the staging slot of step `k` into its chunk.
    fn absorb(&mut self, k: usize, verbs: &mut dyn Verbs) {
        let c = self.recv_chunk(k);
        let at = BUF + (c * self.chunk) as u64;
        self.scratch.resize(self.chunk, 0);
        self.acc.resize(self.chunk, 0);
        let ok = verbs
            .mr_read(
                self.stage_lkey,
                STAGE + (k * self.chunk) as u64,
                &mut self.scratch,
            )
            .is_ok()
            && verbs.mr_read(self.buf_lkey, at, &mut self.acc).is_ok();
        if !ok {
            self.errors += 1;
            return;
        }
        if k < self.n - 1 {
            for (a, s) in self.acc.iter_mut().zip(&self.scratch) {
                *a = a.wrapping_add(*s);
            }
        } else {
            self.acc.copy_from_slice(&self.scratch);
        }
        if verbs.mr_write(self.buf_lkey, at, &self.acc).is_err() {
            self.errors += 1;
        }
    }
}

impl Application for Rank {
    fn start(&mut self, _now: Instant, verbs: &mut dyn Verbs) {
        for k in 0..self.steps() {
            if verbs
                .post_recv(self.from_left, &RecvWr { wr_id: k as u64 })
                .is_err()
            {
                self.errors += 1;
            }
        }
        self.send(verbs);
    }

    fn on_completion(&mut self, now: Instant, wc: &WorkCompletion, verbs: &mut dyn Verbs) {
        if !wc.status.is_success() {
            self.errors += 1;
            return;
        }
        match wc.opcode {
            WcOpcode::RdmaWrite => self.sends_done += 1,
            WcOpcode::RecvRdmaWithImm => {
                let k = wc.imm_data.unwrap_or(u32::MAX) as usize;
                if k != self.received {
                    self.errors += 1;
                    return;
                }
                self.absorb(k, verbs);
                self.received += 1;
                if self.next_send < self.steps() {
                    self.send(verbs);
                }
            }
        }
        if self.is_done() {
            self.done_at.borrow_mut()[self.r] = Some(SimTime::from_instant(now));
        }
    }

    fn is_done(&self) -> bool {
        self.errors > 0 || (self.sends_done == self.steps() && self.received == self.steps())
    }
}

/// A ring all-reduce installed on a simulator.
#[derive(Debug)]
pub struct RingAllReduce {
    ranks: Vec<u32>,
    chunk: usize,
    buf_lkeys: Vec<u32>,
    done_at: Rc<RefCell<Vec<Option<SimTime>>>>,
}

/// The initial bytes of rank `r`'s buffer.
fn initial(r: usize, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    fill_pattern(0xa11_0000 + r as u64, 0, &mut v);
    v
}

impl RingAllReduce {
    /// Ranks on `hosts` (in ring order), `chunk` bytes per chunk (the buffer is
    /// `hosts.len() × chunk` bytes per rank).
    pub fn install(
        sim: &mut Sim,
        hosts: &[u32],
        chunk: usize,
        opts: ConnOpts,
    ) -> Result<Self, SimError> {
        let n = hosts.len();
        assert!(
            n >= 2 && chunk > 0,
            "a ring needs two ranks and non-empty chunks"
        );
        let mut to_right = Vec::new();
        for r in 0..n {
            let c = sim.connect(hosts[r], hosts[(r + 1) % n], opts)?;
            to_right.push(c);
        }
        let mut buf_lkeys = Vec::new();
        let mut stage = Vec::new();
        for (r, &h) in hosts.iter().enumerate() {
            buf_lkeys.push(sim.register(h, BUF, Box::new(initial(r, n * chunk)))?.lkey);
            stage.push(sim.register(h, STAGE, Box::new(vec![0u8; 2 * (n - 1) * chunk]))?);
        }
        let done_at = Rc::new(RefCell::new(vec![None; n]));
        for (r, &h) in hosts.iter().enumerate() {
            let left = (r + n - 1) % n;
            let app = Rank {
                n,
                r,
                chunk,
                to_right: to_right[r].a.qpn,
                from_left: to_right[left].b.qpn,
                buf_lkey: buf_lkeys[r],
                stage_lkey: stage[r].lkey,
                right_stage_rkey: stage[(r + 1) % n].rkey,
                next_send: 0,
                received: 0,
                sends_done: 0,
                done_at: done_at.clone(),
                errors: 0,
                scratch: Vec::new(),
                acc: Vec::new(),
            };
            sim.set_app(h, Box::new(app))?;
        }
        Ok(Self {
            ranks: hosts.to_vec(),
            chunk,
            buf_lkeys,
            done_at,
        })
    }

    /// When each rank finished.
    pub fn finish_times(&self) -> Vec<Option<SimTime>> {
        self.done_at.borrow().clone()
    }

    /// Check every rank holds the bytewise sum of every rank's initial buffer.
    pub fn verify(&self, sim: &Sim) -> Result<(), String> {
        let n = self.ranks.len();
        let len = n * self.chunk;
        let mut want = vec![0u8; len];
        for r in 0..n {
            for (w, b) in want.iter_mut().zip(initial(r, len)) {
                *w = w.wrapping_add(b);
            }
        }
        for (r, &h) in self.ranks.iter().enumerate() {
            let mut got = vec![0u8; len];
            sim.endpoint(h)
                .mr_read(self.buf_lkeys[r], BUF, &mut got)
                .map_err(|e| format!("rank {r}: {e}"))?;
            if let Some(i) = got.iter().zip(&want).position(|(a, b)| a != b) {
                return Err(format!(
                    "rank {r} (host {h}): byte {i} is {} not {}",
                    got[i], want[i]
                ));
            }
        }
        Ok(())
    }
}
