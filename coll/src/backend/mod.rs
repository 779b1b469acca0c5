//! Where the ranks run: simulated hosts in virtual time ([`sim`]), threads over in-memory
//! links ([`mem`]), processes over DPDK ports ([`dpdk`]). Each builds the ranks' NICs,
//! connects their QPs (the ring; every pair for all-to-all; the root's star for gather and
//! scatter), registers the buffers,
//! exchanges what peers need, runs one [`Program`](crate::program::Program) per rank and
//! hands back the ranks' reports.

pub mod dpdk;
pub mod mem;
pub mod nic;
pub mod sim;
pub mod switch;

use std::collections::BTreeSet;

use crate::bench::{Average, BenchOpts, LineResult, fold_line};
use crate::comm::{PeerLink, Region, RemoteRegion};
use crate::program::{CopyCost, ProgramOpts, RankReport, Row};
use crate::spec::Collective;

/// IOVA of every rank's input buffer.
pub const SEND_VA: u64 = 0x1000_0000_0000;
/// IOVA of every rank's output buffer.
pub const RECV_VA: u64 = 0x2000_0000_0000;
/// IOVA of every rank's staging region.
pub const STAGE_VA: u64 = 0x3000_0000_0000;

/// Buffer sizes for every row of a run (a region is never empty, so it always has keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BufferSizes {
    pub send: u64,
    pub recv: u64,
    pub stage: u64,
}

impl BufferSizes {
    pub fn for_rows(rows: &[Row]) -> Self {
        let max = |f: fn(&Row) -> u64| rows.iter().map(f).max().unwrap_or(0).max(64);
        Self {
            send: max(|r| r.spec.send_bytes()),
            recv: max(|r| r.spec.recv_bytes()),
            stage: max(|r| r.spec.stage_bytes()),
        }
    }
}

/// The pairs of ranks the rows need a QP between (smaller rank first, in order): the ring
/// (every collective's barrier goes around it); every pair for all-to-all; the root and
/// every other rank for gather and scatter; `r` and `r ^ 2^k` for hypercube.
pub fn pairs(rows: &[Row], nranks: usize) -> Vec<(usize, usize)> {
    if nranks < 2 {
        return Vec::new();
    }
    let pair = |a: usize, b: usize| (a.min(b), a.max(b));
    let mut out: BTreeSet<(usize, usize)> =
        (0..nranks).map(|a| pair(a, (a + 1) % nranks)).collect();
    for row in rows {
        match (row.spec.coll, row.spec.root) {
            (Collective::AllToAll, _) => {
                for a in 0..nranks {
                    out.extend((a + 1..nranks).map(|b| (a, b)));
                }
            }
            (Collective::Gather | Collective::Scatter, Some(root)) => {
                out.extend((0..nranks).filter(|&p| p != root).map(|p| pair(root, p)));
            }
            (Collective::HyperCube, _) => {
                for a in 0..nranks {
                    let masks = (0..usize::BITS).map(|k| 1_usize << k);
                    out.extend(
                        masks
                            .take_while(|&m| m < nranks)
                            .filter(|&m| a ^ m < nranks)
                            .map(|m| pair(a, a ^ m)),
                    );
                }
            }
            _ => {}
        }
    }
    out.into_iter().collect()
}

/// What a rank publishes about itself for its peers (the out-of-band exchange).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct RankBuffers {
    pub recv: RemoteRegion,
    pub stage: RemoteRegion,
}

impl RankBuffers {
    pub fn of(recv: Region, recv_rkey: u32, stage: Region, stage_rkey: u32) -> Self {
        Self {
            recv: RemoteRegion {
                rkey: recv_rkey,
                va: recv.va,
                len: recv.len,
            },
            stage: RemoteRegion {
                rkey: stage_rkey,
                va: stage.va,
                len: stage.len,
            },
        }
    }

    /// The link to this peer over local QP `qpn`.
    pub fn link(&self, rank: usize, qpn: mrc_transport::verbs::Qpn) -> PeerLink {
        PeerLink {
            rank,
            qpn,
            recv: self.recv,
            stage: self.stage,
        }
    }
}

/// What a one-rank operation costs in the simulator's virtual time: a local copy, 1 µs plus
/// its size at 100 GB/s (so that a one-rank line has a time, as nccl-tests' one-GPU lines do).
pub const SIM_LOCAL_COPY: CopyCost = CopyCost {
    per_op_ns: 1_000,
    bytes_per_sec: 100e9,
};

/// The run's program settings from the command line; `virtual_time`: the simulator's clock,
/// which a local copy does not move.
pub fn program_opts(o: &BenchOpts, virtual_time: bool) -> ProgramOpts {
    ProgramOpts {
        warmup: o.warmup,
        iters: o.iters.max(1),
        agg_iters: o.agg_iters.max(1),
        blocking: o.blocking,
        checks: o.checks,
        compact: virtual_time,
        seed: 0x6d72_632d_636f_6c6c,
        timeout_secs: o.timeout_secs,
        local_copy: virtual_time.then_some(SIM_LOCAL_COPY),
    }
}

/// Every row's folded lines, once all ranks reported.
pub fn fold_all(
    rows: &[Row],
    ranks: &[RankReport],
    average: Average,
) -> Vec<[Option<LineResult>; 2]> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| [0, 1].map(|p| fold_line(&r.spec, ranks, i, p, average)))
        .collect()
}
