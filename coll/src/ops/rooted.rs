//! The rooted collectives (nccl-tests' `broadcast`, `reduce`, `gather`, `scatter`, `-r ROOT`)
//! over the same [`Comm`]: ring neighbours for the chains, the root's direct links for the
//! others. Every piece is one Write-with-Immediate (`Imm::Data { step: 0, slice }`); the
//! immediate only says which slice landed.
//!
//! ```text
//!  broadcast  chain from the root, pipelined per slice: root → root+1 → … → root-1; each
//!             rank forwards slice j from its output as soon as it landed there
//!  reduce     chain towards the root: root+1 → root+2 → … → root; each rank folds the
//!             partial it received with its own input (partial ⊕ own) in its staging region
//!             and sends it on; the root folds last (and divides for avg) into its output.
//!             The order is the one `Pattern::reduced(owner = root)` folds in, so every
//!             element is bit-exact
//!  gather     direct: every rank writes its block into the root's output at rank × count
//!  scatter    direct: the root writes block r of its input into rank r's output (in place:
//!             into r's staging region, copied into place once it all landed)
//! ```
//!
//! The other ranks' outputs of a reduce or a gather are not written (nccl-tests checks that
//! they are left as they were).

use mrc_transport::app::Verbs;

use super::{Op, Scratch, block_off, data};
use crate::comm::{Buf, Comm, CommError, RemoteBuf};
use crate::dtype::RedOp;
use crate::reduce;
use crate::spec::Collective;

impl Op {
    fn root(&self) -> usize {
        self.spec.root.expect("a rooted collective has a root")
    }

    /// How far `rank` is from the root along the ring (0: the root).
    fn hops_from_root(&self, rank: usize, n: usize) -> usize {
        (rank + n - self.root()) % n
    }

    /// A rank of a chain along the ring (broadcast, reduce): it expects every slice from its
    /// previous rank if it `receives` (and says it is ready for them), and sends every slice to
    /// its next one if it `sends` (once that one is ready).
    fn join_chain(
        &mut self,
        receives: bool,
        sends: bool,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
    ) -> Result<(), CommError> {
        let slices = self.l.slices;
        self.expected_arrivals = if receives { slices } else { 0 };
        self.expected_sent = if sends { slices } else { 0 };
        if receives {
            comm.send_ready(comm.prev(), verbs)?;
        }
        if sends {
            comm.expect_ready(comm.next())?;
        }
        Ok(())
    }

    /// Counts this rank's pieces, sends the ready tokens and the first pieces.
    pub(super) fn start_rooted(
        &mut self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
        r: usize,
        n: usize,
    ) -> Result<(), CommError> {
        let slices = self.l.slices;
        let root = self.root();
        let d = self.hops_from_root(r, n);
        let others = (1..n).map(|k| (root + k) % n);
        match self.spec.coll {
            Collective::Broadcast => {
                // Every rank but the root receives; every rank but the last forwards.
                let (receives, sends) = (d > 0, d + 1 < n);
                self.join_chain(receives, sends, comm, verbs)?;
                if d == 0 {
                    let (buf, base) = self.input(r);
                    let bytes = self.spec.recv_bytes();
                    comm.copy(verbs, (buf, base), (Buf::Recv, 0), bytes, &mut scratch.a)?;
                    for j in 0..slices {
                        let (off, len) = self.l.slice_bytes(0, j);
                        let msg = data(buf, base + off, len, RemoteBuf::Recv, off, 0, j);
                        comm.send_data(comm.next(), msg, verbs)?;
                    }
                }
            }
            Collective::Reduce => {
                // Every rank but the chain's first (root+1) receives a partial; every rank
                // but the root sends one.
                let (receives, sends) = (d != 1, d != 0);
                self.join_chain(receives, sends, comm, verbs)?;
                if d == 1 {
                    let (buf, base) = self.input(r);
                    for j in 0..slices {
                        let (off, len) = self.l.slice_bytes(0, j);
                        let msg = data(buf, base + off, len, RemoteBuf::Stage, off, 0, j);
                        comm.send_data(comm.next(), msg, verbs)?;
                    }
                }
            }
            Collective::Gather => {
                let (buf, base) = self.input(r);
                if d == 0 {
                    self.expected_arrivals = (n as u64 - 1) * slices;
                    self.expected_sent = 0;
                    for p in others {
                        comm.send_ready(p, verbs)?;
                    }
                    let own = block_off(&self.l, r);
                    let bytes = self.spec.send_bytes();
                    comm.copy(verbs, (buf, base), (Buf::Recv, own), bytes, &mut scratch.a)?;
                } else {
                    self.expected_arrivals = 0;
                    self.expected_sent = slices;
                    comm.expect_ready(root)?;
                    let own = block_off(&self.l, r);
                    for j in 0..slices {
                        let (off, len) = self.l.slice_bytes(r, j);
                        let msg = data(buf, base + (off - own), len, RemoteBuf::Recv, off, 0, j);
                        comm.send_data(root, msg, verbs)?;
                    }
                }
            }
            Collective::Scatter => {
                if d == 0 {
                    self.expected_arrivals = 0;
                    self.expected_sent = (n as u64 - 1) * slices;
                    let (buf, base) = self.input(r);
                    let (obuf, ooff) = self.output_at(r, block_off(&self.l, r));
                    let bytes = self.spec.recv_bytes();
                    let own = base + block_off(&self.l, r);
                    comm.copy(verbs, (buf, own), (obuf, ooff), bytes, &mut scratch.a)?;
                    let dst = if self.in_place {
                        RemoteBuf::Stage
                    } else {
                        RemoteBuf::Recv
                    };
                    // Peers in the order root+1, root+2, …, as the chains go.
                    for p in others {
                        comm.expect_ready(p)?;
                        for j in 0..slices {
                            let (off, len) = self.l.slice_bytes(p, j);
                            let at = off - block_off(&self.l, p);
                            comm.send_data(p, data(buf, base + off, len, dst, at, 0, j), verbs)?;
                        }
                    }
                } else {
                    self.expected_arrivals = slices;
                    self.expected_sent = 0;
                    comm.send_ready(root, verbs)?;
                }
            }
            _ => unreachable!("start_rooted runs the rooted collectives only"),
        }
        Ok(())
    }

    /// A piece landed: a chain passes it on (folding it first in a reduce).
    pub(super) fn on_rooted_data(
        &mut self,
        slice: u64,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        let (r, n) = (comm.rank(), comm.nranks());
        let d = self.hops_from_root(r, n);
        let (off, len) = self.l.slice_bytes(0, slice);
        match self.spec.coll {
            Collective::Broadcast if d + 1 < n => {
                let msg = data(Buf::Recv, off, len, RemoteBuf::Recv, off, 0, slice);
                comm.send_data(comm.next(), msg, verbs)?;
            }
            Collective::Reduce => {
                let op = self.fold_staged(comm, verbs, scratch, r, off, len)?;
                if d == 0 {
                    if op == RedOp::Avg {
                        reduce::divide(self.spec.dtype, &mut scratch.a, n as u32);
                    }
                    comm.write(verbs, Buf::Recv, off, &scratch.a)?;
                } else {
                    comm.write(verbs, Buf::Stage, off, &scratch.a)?;
                    let msg = data(Buf::Stage, off, len, RemoteBuf::Stage, off, 0, slice);
                    comm.send_data(comm.next(), msg, verbs)?;
                }
            }
            // Gather and scatter pieces land in place; the chain's last rank keeps its copy.
            _ => {}
        }
        Ok(())
    }

    /// In place, a scatter's block waits in the staging region until it all landed.
    pub(super) fn finish_scatter_in_place(
        &self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
    ) -> Result<(), CommError> {
        let r = comm.rank();
        if self.hops_from_root(r, comm.nranks()) == 0 {
            return Ok(());
        }
        let to = self.output_at(r, block_off(&self.l, r));
        let bytes = self.spec.recv_bytes();
        comm.copy(verbs, (Buf::Stage, 0), to, bytes, &mut scratch.a)
    }
}
