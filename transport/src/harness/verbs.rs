//! Helpers for scenario tests over real [`Endpoint`]s: connect a QP pair (both sides' verbs
//! calls through INIT, RTR and RTS), register regions filled with a pattern, check every byte of
//! a destination region, collect completions.

use crate::Endpoint;
use crate::config::PathMode;
use crate::verbs::{
    Access, CqHandle, InitAttr, MrKeys, PdHandle, QpCap, QpInitAttr, QpTransition, Qpn, RemoteNic,
    RtrAttr, RtsAttr, VerbsError, WorkCompletion,
};

use super::{Harness, NodeId};

/// One side of a connected QP: its node, protection domain, completion queue (send and
/// receive) and QP number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpEnd {
    pub node: NodeId,
    pub pd: PdHandle,
    pub cq: CqHandle,
    pub qpn: Qpn,
}

/// Both sides of a connected QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpPair {
    pub a: QpEnd,
    pub b: QpEnd,
}

/// The first byte where a region differs from what was expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum RegionError {
    #[error("region {lkey:#x} cannot be read: {0}", lkey = .1)]
    Unreadable(VerbsError, u32),
    #[error("byte {offset} is {got:#04x}, expected {want:#04x}")]
    Mismatch { offset: usize, got: u8, want: u8 },
}

/// A deterministic byte pattern: byte `i` of a region filled with `salt`.
pub fn pattern(salt: u64, i: usize) -> u8 {
    let x = (i as u64 ^ salt.rotate_left(17)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (x >> 56) as u8
}

/// How a peer names `ep`'s NIC: its address, and its host id in SRv6 mode.
fn remote_of(ep: &Endpoint) -> RemoteNic {
    let cfg = ep.config();
    RemoteNic {
        addr: cfg.nic_addr,
        host: match cfg.path_mode {
            PathMode::Srv6 { host, .. } => Some(host),
            PathMode::Ecmp => None,
        },
    }
}

impl Harness<Endpoint> {
    /// Create a PD, a CQ of `cq_depth` and a QP on each of `a` and `b`, and take both QPs
    /// RESET → INIT (with `init`) → RTR → RTS towards each other, first PSN 0 both ways.
    pub fn connect_qps(
        &mut self,
        a: NodeId,
        b: NodeId,
        init: InitAttr,
        cq_depth: u32,
    ) -> Result<QpPair, VerbsError> {
        let mut make = |node: NodeId| -> Result<QpEnd, VerbsError> {
            let ep = self.node_mut(node);
            let pd = ep.alloc_pd()?;
            let cq = ep.create_cq(cq_depth)?;
            let qpn = ep.create_qp(&QpInitAttr {
                pd,
                send_cq: cq,
                recv_cq: cq,
                cap: QpCap::default(),
                sq_sig_all: false,
            })?;
            ep.modify_qp(qpn, QpTransition::Init(init))?;
            Ok(QpEnd { node, pd, cq, qpn })
        };
        let ea = make(a)?;
        let eb = make(b)?;
        for (me, peer) in [(ea, eb), (eb, ea)] {
            let remote = remote_of(self.node(peer.node));
            let ep = self.node_mut(me.node);
            ep.modify_qp(me.qpn, QpTransition::Rtr(RtrAttr::new(remote, peer.qpn, 0)))?;
            ep.modify_qp(me.qpn, QpTransition::Rts(RtsAttr::new(0)))?;
        }
        Ok(QpPair { a: ea, b: eb })
    }

    /// Register `len` bytes at `iova` on `end`'s node, filled with [`pattern`]`(salt, _)`,
    /// writable locally and remotely.
    pub fn reg_pattern(
        &mut self,
        end: &QpEnd,
        iova: u64,
        len: usize,
        salt: u64,
    ) -> Result<MrKeys, VerbsError> {
        let mem: Vec<u8> = (0..len).map(|i| pattern(salt, i)).collect();
        self.node_mut(end.node).reg_mr(
            end.pd,
            iova,
            Box::new(mem),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
    }

    /// Check bytes `offset..offset + len` of region `lkey` on `node` against `want(i)` for
    /// `i` in `0..len`.
    pub fn check_region(
        &self,
        node: NodeId,
        lkey: u32,
        offset: usize,
        len: usize,
        want: impl Fn(usize) -> u8,
    ) -> Result<(), RegionError> {
        let Some(slice) = self.node(node).mr_slice(lkey) else {
            return Err(RegionError::Unreadable(VerbsError::InvalidLkey(lkey), lkey));
        };
        let Some(got) = slice.get(offset..offset.saturating_add(len)) else {
            return Err(RegionError::Unreadable(VerbsError::OutOfBounds, lkey));
        };
        match got.iter().enumerate().find(|&(i, &b)| b != want(i)) {
            Some((i, &b)) => Err(RegionError::Mismatch {
                offset: offset + i,
                got: b,
                want: want(i),
            }),
            None => Ok(()),
        }
    }

    /// Every completion waiting on `cq` of `node`.
    pub fn poll_all(&mut self, node: NodeId, cq: CqHandle) -> Vec<WorkCompletion> {
        let mut out = Vec::new();
        let mut buf = [WorkCompletion::EMPTY; 64];
        loop {
            let n = self.node_mut(node).poll_cq(cq, &mut buf).unwrap_or(0);
            out.extend_from_slice(&buf[..n]);
            if n < buf.len() {
                return out;
            }
        }
    }
}
