//! nccl-tests' `hypercube`: an all-gather by recursive doubling over a power-of-two number of
//! ranks. At step k (mask m = 2^k) rank r holds the m blocks `s .. s + m` (s = r with its
//! low k bits cleared) and writes them into rank `r ^ m`'s output at their own offsets, while
//! `r ^ m` writes its m blocks into r's; after log2(n) steps every rank has every block.
//!
//! ```text
//!  step 0: 0 ↔ 1, 2 ↔ 3, …   (one block each way)
//!  step 1: 0 ↔ 2, 1 ↔ 3, …   (two blocks)
//!  step k: r ↔ r ^ 2^k       (2^k blocks), once every piece of step k-1 landed
//! ```
//!
//! Every piece is one Write-with-Immediate (`Imm::Data { step: k, slice }`); a peer already
//! at step k+1 writes blocks this rank does not have yet, so early arrivals need no buffer.

use mrc_transport::app::Verbs;

use super::{Op, Scratch, data};
use crate::comm::{Buf, Comm, CommError, RemoteBuf};

impl Op {
    /// The steps of `n` ranks: log2(n).
    fn hc_steps(n: usize) -> u32 {
        n.trailing_zeros()
    }

    pub(super) fn start_hypercube(
        &mut self,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
        scratch: &mut Scratch,
        r: usize,
        n: usize,
    ) -> Result<(), CommError> {
        let steps = Self::hc_steps(n);
        self.hc_step = 0;
        self.hc_arrivals = vec![0; steps as usize];
        for k in 0..steps {
            let peer = r ^ (1 << k);
            comm.send_ready(peer, verbs)?;
            comm.expect_ready(peer)?;
        }
        // The own block goes into the own output first: every step sends from there.
        self.copy_own_block(comm, verbs, scratch, r)?;
        self.hc_send(comm, verbs, r)
    }

    /// Sends the blocks of step `self.hc_step` to its peer.
    fn hc_send(&self, comm: &mut Comm, verbs: &mut dyn Verbs, r: usize) -> Result<(), CommError> {
        let k = self.hc_step;
        let mask = 1_usize << k;
        let first = r & !(mask - 1);
        for b in first..first + mask {
            for j in 0..self.l.slices {
                let (off, len) = self.l.slice_bytes(b, j);
                let msg = data(Buf::Recv, off, len, RemoteBuf::Recv, off, k, j);
                comm.send_data(r ^ mask, msg, verbs)?;
            }
        }
        Ok(())
    }

    /// A piece of step `step` landed; once a step is whole, the next one is sent.
    pub(super) fn on_hypercube_data(
        &mut self,
        step: u32,
        comm: &mut Comm,
        verbs: &mut dyn Verbs,
    ) -> Result<(), CommError> {
        let steps = Self::hc_steps(comm.nranks());
        let count = self
            .hc_arrivals
            .get_mut(step as usize)
            .ok_or(CommError::BadImmediate(step))?;
        *count += 1;
        let whole = |op: &Self, k: u32| op.hc_arrivals[k as usize] == (1_u64 << k) * op.l.slices;
        while self.hc_step + 1 < steps && whole(self, self.hc_step) {
            self.hc_step += 1;
            self.hc_send(comm, verbs, comm.rank())?;
        }
        Ok(())
    }
}
