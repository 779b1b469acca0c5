//! One collective operation as a state machine over a [`Comm`]: it starts, reacts to data
//! arriving and to its own sends completing, and is done when both counts are full.
//!
//! Ring (all-reduce = reduce-scatter then all-gather; NCCL's ring algorithm), per slice:
//!
//! ```text
//!  reduce-scatter step k (0 ≤ k ≤ n-2): rank r sends block (r-k-1) mod n to r+1's staging
//!     region; r+1 adds its own input (partial ⊕ own) and, before the last step, writes the
//!     sum back into its staging region and sends it on; at step n-2 block r is complete at
//!     rank r (avg divides it there) and goes into r's output.
//!  all-gather step k (0 ≤ k ≤ n-2): rank r sends block (r-k) mod n from its output straight
//!     into r+1's output, and forwards what it receives until every rank has every block.
//! ```
//!
//! Every piece is one Write-with-Immediate (`proto::Imm::Data { step, slice }`); the slices
//! of a block are independent pipelines, so several are in flight on every connection and a
//! rank forwards slice j as soon as it has it. Each piece has its own landing place (staging
//! is laid out like the input), so no slot is ever reused within an operation and no credit
//! scheme can deadlock; reuse across operations is guarded by the "ready" tokens.
//!
//! Direct (all-to-all, send/recv): every rank writes each block straight into its peer's
//! output (in place: into the peer's staging region, copied into the output once every
//! arrival and every send is complete).
//!
//! Rooted (broadcast, reduce, gather, scatter): [`rooted`]. Recursive doubling (hypercube):
//! [`hypercube`].

mod hypercube;
mod rooted;

use mrc_transport::app::Verbs;

use crate::comm::{Buf, Comm, CommError, CommEvent, DataMsg, RemoteBuf};
use crate::dtype::RedOp;
use crate::proto::Imm;
use crate::reduce;
use crate::spec::{Collective, Layout, OpSpec};

/// Buffers an operation reads and reduces through.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    pub a: Vec<u8>,
    pub b: Vec<u8>,
}

/// One running operation.
#[derive(Debug)]
pub(crate) struct Op {
    spec: OpSpec,
    l: Layout,
    in_place: bool,
    /// Reduce-scatter and all-gather phases (ring), or neither (direct).
    rs: bool,
    ag: bool,
    arrivals: u64,
    expected_arrivals: u64,
    sent: u64,
    expected_sent: u64,
    finished: bool,
    /// Hypercube: the step this rank sends, and the pieces that arrived of each step.
    hc_step: u32,
    hc_arrivals: Vec<u64>,
}

fn block_off(l: &Layout, block: usize) -> u64 {
    block as u64 * l.block_elems * l.esize
}

impl Op {
    pub fn new(spec: OpSpec, in_place: bool) -> Self {
        let (rs, ag) = match spec.coll {
            Collective::AllReduce => (true, true),
            Collective::ReduceScatter => (true, false),
            Collective::AllGather => (false, true),
            _ => (false, false),
        };
        let n = spec.nranks as u64;
        let l = spec.layout();
        // Rooted collectives count their pieces when they start (they depend on the rank).
        let pieces = if spec.coll.rooted() {
            0
        } else if rs || ag {
            (u64::from(rs) + u64::from(ag)) * (n - 1) * l.slices
        } else if matches!(spec.coll, Collective::AllToAll | Collective::HyperCube) {
            (n - 1) * l.slices
        } else if n > 1 {
            l.slices
        } else {
            0
        };
        Self {
            spec,
            l,
            in_place,
            rs,
            ag,
            arrivals: 0,
            expected_arrivals: pieces,
            sent: 0,
            expected_sent: pieces,
            finished: false,
            hc_step: 0,
            hc_arrivals: Vec::new(),
        }
    }

    pub fn is_done(&self) -> bool {
        self.finished
    }

    /// The partial staged at `off` folded with this rank's own input there (partial ⊕ own),
    /// left in `scratch.a`; returns the operator.
    fn fold_staged(
        &self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
        r: usize,
        off: u64,
        len: u64,
    ) -> Result<RedOp, CommError> {
        let len_us = len as usize;
        scratch.a.resize(len_us, 0);
        scratch.b.resize(len_us, 0);
        comm.read(verbs, Buf::Stage, off, &mut scratch.a)?;
        let (ibuf, ibase) = self.input(r);
        comm.read(verbs, ibuf, ibase + off, &mut scratch.b)?;
        let op = self.spec.op.expect("a reducing collective");
        reduce::reduce(self.spec.dtype, op, &mut scratch.a, &scratch.b);
        Ok(op)
    }

    /// Copy this rank's own block of the input into its place in the output; returns where
    /// the input starts and where the block went.
    fn copy_own_block(
        &self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
        r: usize,
    ) -> Result<((Buf, u64), u64), CommError> {
        let (buf, base) = self.input(r);
        let own = block_off(&self.l, r);
        let bytes = self.spec.send_bytes();
        comm.copy(verbs, (buf, base), (Buf::Recv, own), bytes, &mut scratch.a)?;
        Ok(((buf, base), own))
    }

    /// Where the input starts.
    fn input(&self, rank: usize) -> (Buf, u64) {
        let ip = self.in_place;
        match self.spec.coll {
            Collective::AllReduce
            | Collective::AllToAll
            | Collective::SendRecv
            | Collective::Broadcast
            | Collective::Reduce
                if ip =>
            {
                (Buf::Recv, 0)
            }
            Collective::AllGather | Collective::HyperCube | Collective::Gather if ip => {
                (Buf::Recv, block_off(&self.l, rank))
            }
            _ => (Buf::Send, 0),
        }
    }

    /// Where the output of block `block` (at byte `off` of the block layout) goes.
    fn output_at(&self, rank: usize, off: u64) -> (Buf, u64) {
        match (self.spec.coll, self.in_place) {
            (Collective::ReduceScatter | Collective::Scatter, false) => {
                (Buf::Recv, off - block_off(&self.l, rank))
            }
            (Collective::ReduceScatter | Collective::Scatter, true) => (Buf::Send, off),
            _ => (Buf::Recv, off),
        }
    }

    pub fn start(
        &mut self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        let (r, n) = (comm.rank(), comm.nranks());
        if n == 1 {
            self.local_only(comm, verbs, scratch)?;
            self.finished = true;
            return Ok(());
        }
        match self.spec.coll {
            Collective::AllReduce | Collective::ReduceScatter | Collective::AllGather => {
                self.start_ring(comm, verbs, scratch, r, n)?;
            }
            Collective::AllToAll => self.start_alltoall(comm, verbs, scratch, r, n)?,
            Collective::HyperCube => self.start_hypercube(comm, verbs, scratch, r, n)?,
            Collective::Broadcast
            | Collective::Reduce
            | Collective::Gather
            | Collective::Scatter => self.start_rooted(comm, verbs, scratch, r, n)?,
            Collective::SendRecv => {
                comm.send_ready(comm.prev(), verbs)?;
                comm.expect_ready(comm.next())?;
                let (buf, base) = self.input(r);
                let dst = if self.in_place {
                    RemoteBuf::Stage
                } else {
                    RemoteBuf::Recv
                };
                for j in 0..self.l.slices {
                    let (off, len) = self.l.slice_bytes(0, j);
                    let msg = data(buf, base + off, len, dst, off, 0, j);
                    comm.send_data(comm.next(), msg, verbs)?;
                }
            }
        }
        self.check_finished(comm, verbs, scratch)
    }

    /// One rank: the output is the input (one rank's reduction is its input, avg divides by
    /// one).
    fn local_only(
        &self,
        comm: &Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        let from = self.input(0);
        let len = self.spec.recv_bytes();
        comm.copy(verbs, from, self.output_at(0, 0), len, &mut scratch.a)
    }

    fn start_ring(
        &mut self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
        r: usize,
        n: usize,
    ) -> Result<(), CommError> {
        comm.send_ready(comm.prev(), verbs)?;
        comm.expect_ready(comm.next())?;
        let next = comm.next();
        if self.rs {
            // Step 0: block r-1 of the input, to the next rank's staging region.
            let b = (r + n - 1) % n;
            let (buf, base) = self.input(r);
            for j in 0..self.l.slices {
                let (off, len) = self.l.slice_bytes(b, j);
                let msg = data(buf, base + off, len, RemoteBuf::Stage, off, 0, j);
                comm.send_data(next, msg, verbs)?;
            }
        } else {
            // All-gather: the own block goes into the own output, then to the next rank.
            let ((buf, base), own) = self.copy_own_block(comm, verbs, scratch, r)?;
            for j in 0..self.l.slices {
                let (off, len) = self.l.slice_bytes(r, j);
                let src = base + (off - own);
                let msg = data(buf, src, len, RemoteBuf::Recv, off, 0, j);
                comm.send_data(next, msg, verbs)?;
            }
        }
        Ok(())
    }

    fn start_alltoall(
        &mut self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
        r: usize,
        n: usize,
    ) -> Result<(), CommError> {
        for d in 1..n {
            let p = (r + d) % n;
            comm.send_ready(p, verbs)?;
            comm.expect_ready(p)?;
        }
        let (buf, base) = self.input(r);
        let block_bytes = self.l.block_elems * self.l.esize;
        if !self.in_place {
            let own = block_off(&self.l, r);
            comm.copy(
                verbs,
                (buf, own),
                (Buf::Recv, own),
                block_bytes,
                &mut scratch.a,
            )?;
        }
        let dst = if self.in_place {
            RemoteBuf::Stage
        } else {
            RemoteBuf::Recv
        };
        // Peers in the order r+1, r+2, …: at any moment the ranks write to different peers.
        for d in 1..n {
            let p = (r + d) % n;
            for j in 0..self.l.slices {
                let (off, len) = self.l.slice_bytes(p, j);
                let dst_off = block_off(&self.l, r) + (off - block_off(&self.l, p));
                comm.send_data(p, data(buf, base + off, len, dst, dst_off, 0, j), verbs)?;
            }
        }
        Ok(())
    }

    /// Reacts to a completion's meaning.
    pub fn on_event(
        &mut self,
        ev: CommEvent,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        match ev {
            CommEvent::Sent => self.sent += 1,
            CommEvent::Data { step, slice, .. } => {
                self.arrivals += 1;
                if self.rs || self.ag {
                    self.on_ring_data(step, u64::from(slice), comm, verbs, scratch)?;
                } else if self.spec.coll.rooted() {
                    self.on_rooted_data(u64::from(slice), comm, verbs, scratch)?;
                } else if self.spec.coll == Collective::HyperCube {
                    self.on_hypercube_data(step, comm, verbs)?;
                }
            }
            CommEvent::Nothing => return Ok(()),
        }
        self.check_finished(comm, verbs, scratch)
    }

    fn on_ring_data(
        &mut self,
        step: u32,
        slice: u64,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        let (r, n) = (comm.rank(), comm.nranks());
        let next = comm.next();
        let last = n as u32 - 2;
        let rs_steps = if self.rs { n as u32 - 1 } else { 0 };
        if step < rs_steps {
            // Reduce-scatter: partial ⊕ own input.
            let k = step as usize;
            let b = (r + 2 * n - k - 2) % n;
            let (off, len) = self.l.slice_bytes(b, slice);
            let op = self.fold_staged(comm, verbs, scratch, r, off, len)?;
            if step < last {
                comm.write(verbs, Buf::Stage, off, &scratch.a)?;
                let msg = data(Buf::Stage, off, len, RemoteBuf::Stage, off, step + 1, slice);
                comm.send_data(next, msg, verbs)?;
            } else {
                if op == RedOp::Avg {
                    reduce::divide(self.spec.dtype, &mut scratch.a, n as u32);
                }
                let (obuf, ooff) = self.output_at(r, off);
                comm.write(verbs, obuf, ooff, &scratch.a)?;
                if self.ag {
                    let msg = data(obuf, ooff, len, RemoteBuf::Recv, off, step + 1, slice);
                    comm.send_data(next, msg, verbs)?;
                }
            }
        } else {
            // All-gather: the piece is in place; pass it on.
            let k = step - rs_steps;
            if k < last {
                let b = (r + 2 * n - k as usize - 1) % n;
                let (off, len) = self.l.slice_bytes(b, slice);
                let msg = data(Buf::Recv, off, len, RemoteBuf::Recv, off, step + 1, slice);
                comm.send_data(next, msg, verbs)?;
            }
        }
        Ok(())
    }

    fn check_finished(
        &mut self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        if self.finished || self.arrivals < self.expected_arrivals || self.sent < self.expected_sent
        {
            return Ok(());
        }
        if self.in_place {
            // Direct in-place arrivals wait in the staging region.
            let (r, n) = (comm.rank(), comm.nranks());
            match self.spec.coll {
                Collective::AllToAll => {
                    let bytes = self.l.block_elems * self.l.esize;
                    for p in (0..n).filter(|&p| p != r) {
                        let at = block_off(&self.l, p);
                        comm.copy(
                            verbs,
                            (Buf::Stage, at),
                            (Buf::Recv, at),
                            bytes,
                            &mut scratch.a,
                        )?;
                    }
                }
                Collective::SendRecv => {
                    let bytes = self.spec.recv_bytes();
                    comm.copy(
                        verbs,
                        (Buf::Stage, 0),
                        (Buf::Recv, 0),
                        bytes,
                        &mut scratch.a,
                    )?;
                }
                Collective::Scatter => self.finish_scatter_in_place(comm, verbs, scratch)?,
                _ => {}
            }
        }
        self.finished = true;
        Ok(())
    }
}

fn data(
    src: Buf,
    src_off: u64,
    len: u64,
    dst: RemoteBuf,
    dst_off: u64,
    step: u32,
    slice: u64,
) -> DataMsg {
    DataMsg {
        src,
        src_off,
        len,
        dst,
        dst_off,
        imm: Imm::Data {
            step,
            slice: slice as u32,
        },
    }
}
