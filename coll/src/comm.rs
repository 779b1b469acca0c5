//! A communicator: one rank's connections to its peers and the state that outlives single
//! operations (posted receives, "ready" tokens, the barrier, messages waiting for room).
//!
//! Flow control, per connection (QP):
//! - at most `window` Write-with-Immediates in flight (posted, not completed), at most the
//!   QP's Write-with-Immediate limit (the engine would stall its send queue beyond it);
//! - a data message of operation k towards a peer waits for that peer's k-th "ready" token,
//!   which the peer sends when it enters operation k (its buffers are then free to be
//!   written: the previous operation finished reading and sending them);
//! - `recv_depth` receives are kept posted: each arriving immediate consumes one and is
//!   replaced at once.

use std::collections::{HashMap, VecDeque};

use mrc_transport::app::Verbs;
use mrc_transport::verbs::{
    Qpn, RecvWr, SendOpcode, SendWr, Sge, VerbsError, WcOpcode, WorkCompletion,
};

use crate::proto::Imm;

/// A registered local region.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Region {
    pub lkey: u32,
    pub va: u64,
    pub len: u64,
}

/// A peer's registered region, as the out-of-band exchange tells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RemoteRegion {
    pub rkey: u32,
    pub va: u64,
    pub len: u64,
}

/// A connection to a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerLink {
    pub rank: usize,
    /// The local QP connected to the peer.
    pub qpn: Qpn,
    /// The peer's output buffer.
    pub recv: RemoteRegion,
    /// The peer's staging region.
    pub stage: RemoteRegion,
}

/// Which local buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buf {
    Send,
    Recv,
    Stage,
}

/// Which buffer of the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RemoteBuf {
    Recv,
    Stage,
}

/// What a rank is given before it runs: its place, its buffers, its connections.
#[derive(Debug, Clone)]
pub struct CommSetup {
    pub rank: usize,
    pub nranks: usize,
    pub send: Region,
    pub recv: Region,
    pub stage: Region,
    /// At least the ring neighbours; every peer for all-to-all.
    pub links: Vec<PeerLink>,
    /// Write-with-Immediates in flight per connection, at most.
    pub window: u32,
    /// Receives kept posted per connection.
    pub recv_depth: u32,
}

/// Default window: below the engine's default Write-with-Immediate limit (128).
pub const DEFAULT_WINDOW: u32 = 64;
/// Default receives posted per connection: the peer's window and its control tokens.
pub const DEFAULT_RECV_DEPTH: u32 = 128;

/// A data message waiting to be posted.
#[derive(Debug, Clone, Copy)]
pub(crate) struct DataMsg {
    pub src: Buf,
    pub src_off: u64,
    pub len: u64,
    pub dst: RemoteBuf,
    pub dst_off: u64,
    pub imm: Imm,
}

#[derive(Debug, Default)]
struct LinkState {
    in_flight: u32,
    ctrl: VecDeque<Imm>,
    data: VecDeque<DataMsg>,
    /// "Ready" tokens received from the peer, ever.
    ready_rcvd: u64,
    /// Tokens data towards the peer waits for (one per operation that writes to it).
    ready_needed: u64,
    recvs_posted: bool,
}

/// What an arriving completion meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CommEvent {
    /// A data message from `from` landed.
    Data { from: usize, step: u32, slice: u32 },
    /// A data message this rank sent completed.
    Sent,
    /// Bookkeeping only (tokens, control sends).
    Nothing,
}

/// Why a rank stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommError {
    #[error("verbs call failed: {0}")]
    Verbs(#[from] VerbsError),
    #[error("work completion with status {status:?} on {qpn} ({opcode:?})")]
    Completion {
        status: mrc_transport::verbs::WcStatus,
        qpn: Qpn,
        opcode: WcOpcode,
    },
    #[error("a completion for {0}, which is none of this rank's connections")]
    UnknownQp(Qpn),
    #[error("an immediate no rank sends: {0:#x}")]
    BadImmediate(u32),
    #[error("rank {rank} has no connection to rank {peer}")]
    NoLink { rank: usize, peer: usize },
    #[error("timed out: an operation or barrier did not complete within {secs} s")]
    Timeout { secs: u64 },
}

const DATA_FLAG: u64 = 1 << 32;

/// The runtime state of one rank's communicator.
#[derive(Debug)]
pub struct Comm {
    setup: CommSetup,
    link_of_rank: Vec<Option<usize>>,
    link_of_qpn: HashMap<Qpn, usize>,
    links: Vec<LinkState>,
    /// Barriers entered, tokens received from the previous rank and tokens handled.
    barriers: u64,
    barrier_rcvd: u64,
    barrier_done: u64,
    /// A post was refused for lack of room (NIC doorbell ring full): try again later.
    pub(crate) blocked: bool,
}

impl Comm {
    pub fn new(setup: CommSetup) -> Self {
        let mut link_of_rank = vec![None; setup.nranks];
        let mut link_of_qpn = HashMap::new();
        for (i, l) in setup.links.iter().enumerate() {
            link_of_rank[l.rank] = Some(i);
            link_of_qpn.insert(l.qpn, i);
        }
        let links = setup.links.iter().map(|_| LinkState::default()).collect();
        Self {
            setup,
            link_of_rank,
            link_of_qpn,
            links,
            barriers: 0,
            barrier_rcvd: 0,
            barrier_done: 0,
            blocked: false,
        }
    }

    pub fn rank(&self) -> usize {
        self.setup.rank
    }

    pub fn nranks(&self) -> usize {
        self.setup.nranks
    }

    pub fn next(&self) -> usize {
        (self.setup.rank + 1) % self.setup.nranks
    }

    pub fn prev(&self) -> usize {
        (self.setup.rank + self.setup.nranks - 1) % self.setup.nranks
    }

    pub fn setup(&self) -> &CommSetup {
        &self.setup
    }

    /// The local region of `buf`.
    pub fn region(&self, buf: Buf) -> Region {
        match buf {
            Buf::Send => self.setup.send,
            Buf::Recv => self.setup.recv,
            Buf::Stage => self.setup.stage,
        }
    }

    fn link(&self, peer: usize) -> Result<usize, CommError> {
        self.link_of_rank
            .get(peer)
            .copied()
            .flatten()
            .ok_or(CommError::NoLink {
                rank: self.setup.rank,
                peer,
            })
    }

    /// Posts the standing receives of every connection (once).
    pub fn post_receives(&mut self, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        for (i, l) in self.setup.links.iter().enumerate() {
            if self.links[i].recvs_posted {
                continue;
            }
            for _ in 0..self.setup.recv_depth {
                verbs.post_recv(l.qpn, &RecvWr { wr_id: i as u64 })?;
            }
            self.links[i].recvs_posted = true;
        }
        Ok(())
    }

    /// Tells `peer` this rank entered its next operation that `peer` writes into.
    pub(crate) fn send_ready(
        &mut self,
        peer: usize,
        verbs: &mut dyn Verbs,
    ) -> Result<(), CommError> {
        let l = self.link(peer)?;
        self.links[l].ctrl.push_back(Imm::Ready);
        self.pump(l, verbs)
    }

    /// Data towards `peer` in the operation being entered waits for its next "ready".
    pub(crate) fn expect_ready(&mut self, peer: usize) -> Result<(), CommError> {
        let l = self.link(peer)?;
        self.links[l].ready_needed += 1;
        Ok(())
    }

    /// Queues a data message to `peer` (posted when the window and the peer allow).
    pub(crate) fn send_data(
        &mut self,
        peer: usize,
        msg: DataMsg,
        verbs: &mut dyn Verbs,
    ) -> Result<(), CommError> {
        let l = self.link(peer)?;
        self.links[l].data.push_back(msg);
        self.pump(l, verbs)
    }

    /// Posts what the window of connection `l` allows.
    fn pump(&mut self, l: usize, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        let link = self.setup.links[l];
        loop {
            let st = &mut self.links[l];
            if st.in_flight >= self.setup.window {
                return Ok(());
            }
            let (imm, msg) = if let Some(&imm) = st.ctrl.front() {
                (imm, None)
            } else if let Some(&m) = st.data.front()
                && st.ready_rcvd >= st.ready_needed
            {
                (m.imm, Some(m))
            } else {
                return Ok(());
            };
            let (sge, remote_addr, rkey, wr_id) = match msg {
                None => (None, link.recv.va, link.recv.rkey, l as u64),
                Some(m) => {
                    let region = self.region(m.src);
                    let remote = match m.dst {
                        RemoteBuf::Recv => link.recv,
                        RemoteBuf::Stage => link.stage,
                    };
                    let sge = Sge {
                        addr: region.va + m.src_off,
                        length: m.len as u32,
                        lkey: region.lkey,
                    };
                    (
                        (m.len > 0).then_some(sge),
                        remote.va + m.dst_off,
                        remote.rkey,
                        l as u64 | DATA_FLAG,
                    )
                }
            };
            let sg = sge.as_slice();
            let wr = SendWr {
                wr_id,
                opcode: SendOpcode::WriteWithImm(imm.encode()),
                sg_list: sg,
                remote_addr,
                rkey,
                signaled: true,
            };
            match verbs.post_send(link.qpn, &wr) {
                Ok(()) => {}
                Err(VerbsError::SendQueueFull) => {
                    self.blocked = true;
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            }
            let st = &mut self.links[l];
            st.in_flight += 1;
            if msg.is_some() {
                st.data.pop_front();
            } else {
                st.ctrl.pop_front();
            }
        }
    }

    /// Retries every connection (after a refused post).
    pub(crate) fn pump_all(&mut self, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        self.blocked = false;
        for l in 0..self.links.len() {
            self.pump(l, verbs)?;
        }
        Ok(())
    }

    /// Digests a completion of this rank's CQ.
    pub(crate) fn handle(
        &mut self,
        wc: &WorkCompletion,
        verbs: &mut dyn Verbs,
    ) -> Result<CommEvent, CommError> {
        if !wc.status.is_success() {
            return Err(CommError::Completion {
                status: wc.status,
                qpn: wc.qpn,
                opcode: wc.opcode,
            });
        }
        let l = *self
            .link_of_qpn
            .get(&wc.qpn)
            .ok_or(CommError::UnknownQp(wc.qpn))?;
        match wc.opcode {
            WcOpcode::RdmaWrite => {
                let st = &mut self.links[l];
                st.in_flight = st.in_flight.saturating_sub(1);
                self.pump(l, verbs)?;
                Ok(if wc.wr_id & DATA_FLAG != 0 {
                    CommEvent::Sent
                } else {
                    CommEvent::Nothing
                })
            }
            WcOpcode::RecvRdmaWithImm => {
                verbs.post_recv(wc.qpn, &RecvWr { wr_id: l as u64 })?;
                let raw = wc.imm_data.unwrap_or(u32::MAX);
                let from = self.setup.links[l].rank;
                match Imm::decode(raw).ok_or(CommError::BadImmediate(raw))? {
                    Imm::Data { step, slice } => Ok(CommEvent::Data { from, step, slice }),
                    Imm::Ready => {
                        self.links[l].ready_rcvd += 1;
                        self.pump(l, verbs)?;
                        Ok(CommEvent::Nothing)
                    }
                    Imm::Barrier => {
                        if from == self.prev() {
                            self.barrier_rcvd += 1;
                            self.barrier_progress(verbs)?;
                        }
                        Ok(CommEvent::Nothing)
                    }
                }
            }
        }
    }

    // ---- barrier --------------------------------------------------------------------------

    /// Enters the next barrier: a token goes around the ring n-1 times, each rank passing it
    /// on only once it has itself arrived, so the (n-1)-th token to reach a rank proves that
    /// every rank arrived. Tokens are counted over the communicator's life, so those of the
    /// next barrier may arrive early.
    pub(crate) fn barrier_enter(&mut self, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        self.barriers += 1;
        if self.setup.nranks > 1 {
            let next = self.next();
            let l = self.link(next)?;
            self.links[l].ctrl.push_back(Imm::Barrier);
            self.pump(l, verbs)?;
        }
        self.barrier_progress(verbs)
    }

    fn barrier_progress(&mut self, verbs: &mut dyn Verbs) -> Result<(), CommError> {
        let per = self.setup.nranks as u64 - 1;
        let limit = self.barrier_rcvd.min(self.barriers * per);
        while self.barrier_done < limit {
            // Token k of its barrier: pass it on unless it is the last.
            let k = self.barrier_done % per;
            self.barrier_done += 1;
            if k + 1 < per {
                let next = self.next();
                let l = self.link(next)?;
                self.links[l].ctrl.push_back(Imm::Barrier);
                self.pump(l, verbs)?;
            }
        }
        Ok(())
    }

    /// The barrier entered last is complete.
    pub(crate) fn barrier_complete(&self) -> bool {
        self.barrier_done >= self.barriers * (self.setup.nranks as u64 - 1)
    }

    // ---- local memory -----------------------------------------------------------------------

    /// Reads `dst.len()` bytes at `off` of a local buffer.
    pub(crate) fn read(
        &self,
        verbs: &dyn Verbs,
        buf: Buf,
        off: u64,
        dst: &mut [u8],
    ) -> Result<(), CommError> {
        let r = self.region(buf);
        Ok(verbs.mr_read(r.lkey, r.va + off, dst)?)
    }

    /// Writes `src` at `off` of a local buffer.
    pub(crate) fn write(
        &self,
        verbs: &mut dyn Verbs,
        buf: Buf,
        off: u64,
        src: &[u8],
    ) -> Result<(), CommError> {
        let r = self.region(buf);
        Ok(verbs.mr_write(r.lkey, r.va + off, src)?)
    }

    /// Copies `len` bytes between local buffers through `scratch`.
    pub(crate) fn copy(
        &self,
        verbs: &mut dyn Verbs,
        from: (Buf, u64),
        to: (Buf, u64),
        len: u64,
        scratch: &mut Vec<u8>,
    ) -> Result<(), CommError> {
        if from == to {
            return Ok(());
        }
        let chunk = scratch.len().max(1 << 16) as u64;
        scratch.resize(chunk as usize, 0);
        let mut done = 0;
        while done < len {
            let n = (len - done).min(chunk) as usize;
            self.read(verbs, from.0, from.1 + done, &mut scratch[..n])?;
            self.write(verbs, to.0, to.1 + done, &scratch[..n])?;
            done += n as u64;
        }
        Ok(())
    }
}
