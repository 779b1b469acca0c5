//! Where the ranks run: simulated hosts in virtual time ([`sim`]), threads over in-memory
//! links ([`mem`]), processes over DPDK ports ([`dpdk`]). Each builds the ranks' NICs,
//! connects their QPs (the ring, and every pair for all-to-all), registers the buffers,
//! exchanges what peers need, runs one [`Program`](crate::program::Program) per rank and
//! hands back the ranks' reports.

pub mod dpdk;
pub mod mem;
pub mod nic;
pub mod sim;
pub mod switch;

use crate::bench::{BenchOpts, LineResult, fold_line};
use crate::comm::{PeerLink, Region, RemoteRegion};
use crate::program::{ProgramOpts, RankReport, Row};
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

/// The pairs of ranks that need a QP: the ring, and every pair for all-to-all.
pub fn pairs(coll: Collective, nranks: usize) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    if nranks < 2 {
        return out;
    }
    if coll == Collective::AllToAll {
        for a in 0..nranks {
            for b in a + 1..nranks {
                out.push((a, b));
            }
        }
    } else {
        for a in 0..nranks {
            let b = (a + 1) % nranks;
            let pair = (a.min(b), a.max(b));
            if !out.contains(&pair) {
                out.push(pair);
            }
        }
    }
    out
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

/// The run's program settings from the command line.
pub fn program_opts(o: &BenchOpts, compact: bool) -> ProgramOpts {
    ProgramOpts {
        warmup: o.warmup,
        iters: o.iters.max(1),
        check: o.check,
        compact,
        seed: 0x6d72_632d_636f_6c6c,
    }
}

/// Every row's folded lines, once all ranks reported.
pub fn fold_all(rows: &[Row], ranks: &[RankReport]) -> Vec<[Option<LineResult>; 2]> {
    rows.iter()
        .enumerate()
        .map(|(i, r)| [0, 1].map(|p| fold_line(&r.spec, ranks, i, p)))
        .collect()
}
