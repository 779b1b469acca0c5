//! What one collective operation is: which collective, how many elements of which type, its
//! root (broadcast, reduce, gather, scatter), and how its buffers are laid out and cut into
//! blocks (one per rank) and slices (the unit that moves in one Write-with-Immediate), plus
//! nccl-tests' byte counts and bus-bandwidth factors (peers.md §5.2; nccl-tests'
//! `*GetCollByteCount` and `*GetBw`).

use core::fmt;
use core::str::FromStr;

use crate::dtype::{DataType, RedOp, UnknownName};
use crate::proto;

/// The collectives of the benchmark (nccl-tests' `*_perf` binaries).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    /// Every rank sends its buffer to the next rank and receives the previous rank's.
    SendRecv,
    /// The root's buffer to every rank.
    Broadcast,
    /// The reduction of every rank's buffer, at the root.
    Reduce,
    /// Every rank's buffer, one block each, at the root.
    Gather,
    /// Block r of the root's buffer to rank r.
    Scatter,
    /// An all-gather by recursive doubling (nccl-tests' `hypercube`): at step k every rank
    /// swaps the 2^k blocks it has with rank `r ^ 2^k`. A power-of-two number of ranks.
    HyperCube,
}

impl Collective {
    pub const ALL: [Self; 10] = [
        Self::AllReduce,
        Self::AllGather,
        Self::ReduceScatter,
        Self::AllToAll,
        Self::SendRecv,
        Self::Broadcast,
        Self::Reduce,
        Self::Gather,
        Self::Scatter,
        Self::HyperCube,
    ];

    /// The command name (`all_reduce`, as nccl-tests' `all_reduce_perf`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::AllReduce => "all_reduce",
            Self::AllGather => "all_gather",
            Self::ReduceScatter => "reduce_scatter",
            Self::AllToAll => "alltoall",
            Self::SendRecv => "sendrecv",
            Self::Broadcast => "broadcast",
            Self::Reduce => "reduce",
            Self::Gather => "gather",
            Self::Scatter => "scatter",
            Self::HyperCube => "hypercube",
        }
    }

    /// It reduces (has a `redop`).
    pub const fn reduces(self) -> bool {
        matches!(self, Self::AllReduce | Self::ReduceScatter | Self::Reduce)
    }

    /// It has a root (nccl-tests' `-r`; `-1` runs every root in turn).
    pub const fn rooted(self) -> bool {
        matches!(
            self,
            Self::Broadcast | Self::Reduce | Self::Gather | Self::Scatter
        )
    }

    /// Its buffers are cut into one block per rank: nccl-tests' count is a rank's share of the
    /// size, rounded down to 16 bytes (`(count/nranks) & ~(16/eltSize - 1)`).
    pub const fn per_rank(self) -> bool {
        matches!(
            self,
            Self::AllGather
                | Self::ReduceScatter
                | Self::AllToAll
                | Self::Gather
                | Self::Scatter
                | Self::HyperCube
        )
    }

    /// busbw / algbw (nccl-tests' PERFORMANCE.md and `*GetBw`): 2(n-1)/n for all-reduce,
    /// (n-1)/n for all-gather, reduce-scatter, all-to-all, gather and scatter, 1 for send/recv,
    /// broadcast, reduce and hypercube (whose algbw counts the (n-1) blocks a rank receives,
    /// not the size: [`OpSpec::algbw`]).
    pub fn bus_factor(self, nranks: usize) -> f64 {
        let n = nranks as f64;
        match self {
            Self::AllReduce => 2.0 * (n - 1.0) / n,
            Self::AllGather
            | Self::ReduceScatter
            | Self::AllToAll
            | Self::Gather
            | Self::Scatter => (n - 1.0) / n,
            Self::SendRecv | Self::Broadcast | Self::Reduce | Self::HyperCube => 1.0,
        }
    }
}

impl fmt::Display for Collective {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Collective {
    type Err = UnknownName;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|c| c.name() == s || s.strip_suffix("_perf") == Some(c.name()))
            .ok_or_else(|| UnknownName {
                what: "collective",
                name: s.to_owned(),
                choices: "all_reduce all_gather reduce_scatter alltoall sendrecv broadcast reduce \
                          gather scatter hypercube",
            })
    }
}

/// An operation the ring or the direct scheme cannot express.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("{0} ranks: the immediate's step field allows at most {max}", max = proto::MAX_RANKS)]
    TooManyRanks(usize),
    #[error("a collective needs at least one rank")]
    NoRanks,
    #[error("{slices} slices per block exceed the immediate's slice field")]
    TooManySlices { slices: u64 },
    #[error("root {root} of {nranks} ranks (roots 0 to {last})", last = nranks - 1)]
    BadRoot { root: usize, nranks: usize },
    #[error("{0} has no root")]
    NoRoot(Collective),
    #[error("{0} needs a root")]
    NeedsRoot(Collective),
    #[error("hypercube needs a power-of-two number of ranks, not {0}")]
    NotPowerOfTwo(usize),
}

/// Bytes of a slice by default: small enough that a ring of 64 hops fills quickly, large
/// enough that a Write carries many packets.
pub const DEFAULT_SLICE_BYTES: u64 = 256 * 1024;

/// Blocks and slices start at multiples of this many bytes when a buffer is large enough,
/// so that whole packets and pattern blocks line up.
pub const ALIGN_BYTES: u64 = 4096;

/// One operation of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpSpec {
    pub coll: Collective,
    pub dtype: DataType,
    /// The operator (reducing collectives only).
    pub op: Option<RedOp>,
    /// nccl-tests' `count` column: the count argument of the NCCL call (all-reduce, send/recv,
    /// broadcast, reduce: the buffer; all-gather and gather: what each rank sends;
    /// reduce-scatter and scatter: what each rank receives; all-to-all: what each rank sends
    /// to each peer).
    pub count: u64,
    pub nranks: usize,
    /// The root (rooted collectives only).
    pub root: Option<usize>,
    /// Bytes moved per Write-with-Immediate, at most.
    pub slice_bytes: u64,
}

impl OpSpec {
    /// The operation nccl-tests runs for a `-b`..`-e` size of `bytes` (the largest buffer):
    /// counts are rounded down to whole elements, and where the buffer is cut per rank to a
    /// rank's share rounded down to 16 bytes (nccl-tests' `*GetCollByteCount`). `root` is
    /// the root of a rooted collective (`None` for the others).
    pub fn for_size(
        coll: Collective,
        dtype: DataType,
        op: RedOp,
        bytes: u64,
        nranks: usize,
        root: Option<usize>,
        slice_bytes: u64,
    ) -> Result<Self, SpecError> {
        if nranks == 0 {
            return Err(SpecError::NoRanks);
        }
        if nranks > proto::MAX_RANKS {
            return Err(SpecError::TooManyRanks(nranks));
        }
        if coll == Collective::HyperCube && !nranks.is_power_of_two() {
            return Err(SpecError::NotPowerOfTwo(nranks));
        }
        match (coll.rooted(), root) {
            (true, Some(r)) if r >= nranks => return Err(SpecError::BadRoot { root: r, nranks }),
            (true, None) => return Err(SpecError::NeedsRoot(coll)),
            (false, Some(_)) => return Err(SpecError::NoRoot(coll)),
            _ => {}
        }
        let esize = dtype.size() as u64;
        let elements = bytes / esize;
        let n = nranks as u64;
        let count = if coll.per_rank() {
            (elements / n) & !(16 / esize - 1)
        } else {
            elements
        };
        let spec = Self {
            coll,
            dtype,
            op: coll.reduces().then_some(op),
            count,
            nranks,
            root,
            slice_bytes: slice_bytes.max(ALIGN_BYTES).next_multiple_of(ALIGN_BYTES),
        };
        let slices = spec.layout().slices;
        if slices > u64::from(proto::MAX_SLICES) {
            return Err(SpecError::TooManySlices { slices });
        }
        Ok(spec)
    }

    fn esize(&self) -> u64 {
        self.dtype.size() as u64
    }

    /// Bytes of each rank's input buffer (broadcast and scatter: the root's).
    pub fn send_bytes(&self) -> u64 {
        let n = self.nranks as u64;
        self.esize()
            * match self.coll {
                Collective::AllReduce
                | Collective::SendRecv
                | Collective::AllGather
                | Collective::HyperCube
                | Collective::Broadcast
                | Collective::Reduce
                | Collective::Gather => self.count,
                Collective::ReduceScatter | Collective::AllToAll | Collective::Scatter => {
                    self.count * n
                }
            }
    }

    /// Bytes of each rank's output buffer (reduce and gather: the root's; the other ranks'
    /// are left as they were).
    pub fn recv_bytes(&self) -> u64 {
        let n = self.nranks as u64;
        self.esize()
            * match self.coll {
                Collective::AllReduce
                | Collective::SendRecv
                | Collective::ReduceScatter
                | Collective::Broadcast
                | Collective::Reduce
                | Collective::Scatter => self.count,
                Collective::AllGather
                | Collective::HyperCube
                | Collective::AllToAll
                | Collective::Gather => self.count * n,
            }
    }

    /// The `size` column: the larger buffer.
    pub fn size_bytes(&self) -> u64 {
        self.send_bytes().max(self.recv_bytes())
    }

    /// Bytes of the staging region peers write partial results (reductions) or in-place
    /// arrivals into: as large as the input (scatter: as the output).
    pub fn stage_bytes(&self) -> u64 {
        match self.coll {
            Collective::AllGather
            | Collective::HyperCube
            | Collective::Broadcast
            | Collective::Gather => 0,
            Collective::Scatter => self.recv_bytes(),
            _ => self.send_bytes(),
        }
    }

    /// How the operation's buffer is cut.
    pub fn layout(&self) -> Layout {
        let n = self.nranks as u64;
        let esize = self.esize();
        // Elements of one block: a rank's share, in the reducing ring and the exchanges.
        let (block_elems, total_elems) = match self.coll {
            Collective::AllReduce => {
                let share = self.count.div_ceil(n);
                let align = ALIGN_BYTES / esize;
                let share = if share * esize >= ALIGN_BYTES {
                    share.next_multiple_of(align)
                } else {
                    share
                };
                (share, self.count)
            }
            Collective::SendRecv | Collective::Broadcast | Collective::Reduce => {
                (self.count, self.count)
            }
            _ => (self.count, self.count * n),
        };
        let slice_elems = self.slice_bytes / esize;
        let slices = block_elems.div_ceil(slice_elems).max(1);
        Layout {
            esize,
            block_elems,
            total_elems,
            slice_elems,
            slices,
        }
    }

    /// Algorithm bandwidth in GB/s (10^9 bytes) for `secs` per operation: the size per
    /// second, except for hypercube, the (n-1) blocks a rank receives (nccl-tests'
    /// `HyperCubeGetBw`).
    pub fn algbw(&self, secs: f64) -> f64 {
        let bytes = match self.coll {
            Collective::HyperCube => {
                self.count * self.esize() * (self.nranks as u64).saturating_sub(1)
            }
            _ => self.size_bytes(),
        };
        bytes as f64 / 1e9 / secs
    }

    /// Bus bandwidth in GB/s.
    pub fn busbw(&self, secs: f64) -> f64 {
        self.algbw(secs) * self.coll.bus_factor(self.nranks)
    }
}

/// Blocks and slices of an operation's buffers, in elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub esize: u64,
    /// Elements of a full block (the last blocks of an all-reduce may be shorter or empty).
    pub block_elems: u64,
    /// Elements of the whole buffer that is cut into blocks.
    pub total_elems: u64,
    pub slice_elems: u64,
    /// Slices per block.
    pub slices: u64,
}

impl Layout {
    /// Elements `start..end` of slice `slice` of block `block`, clipped to the buffer.
    pub fn slice(&self, block: usize, slice: u64) -> (u64, u64) {
        let block_start = block as u64 * self.block_elems;
        let block_end = (block_start + self.block_elems).min(self.total_elems);
        let start = (block_start + slice * self.slice_elems).min(block_end);
        let end = (start + self.slice_elems).min(block_end);
        (start, end)
    }

    /// Byte offset and length of a slice.
    pub fn slice_bytes(&self, block: usize, slice: u64) -> (u64, u64) {
        let (s, e) = self.slice(block, slice);
        (s * self.esize, (e - s) * self.esize)
    }

    /// The block element `index` belongs to.
    pub fn block_of(&self, index: u64) -> usize {
        (index / self.block_elems.max(1)) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_sizes_and_factors_follow_nccl_tests() {
        let f = |c, bytes| {
            let root = Collective::rooted(c).then_some(3);
            OpSpec::for_size(c, DataType::Float, RedOp::Sum, bytes, 8, root, 1 << 20).unwrap()
        };
        let ar = f(Collective::AllReduce, 1 << 20);
        assert_eq!((ar.count, ar.size_bytes()), (1 << 18, 1 << 20));
        let ag = f(Collective::AllGather, 1 << 20);
        assert_eq!(
            (ag.count, ag.send_bytes(), ag.recv_bytes()),
            (1 << 15, 1 << 17, 1 << 20)
        );
        let rs = f(Collective::ReduceScatter, 1 << 20);
        assert_eq!(
            (rs.count, rs.send_bytes(), rs.recv_bytes()),
            (1 << 15, 1 << 20, 1 << 17)
        );
        // 250 floats over 8 ranks: 31 each, rounded down to 16 bytes.
        let a2a = f(Collective::AllToAll, 1000);
        assert_eq!((a2a.count, a2a.size_bytes()), (28, 28 * 8 * 4));
        assert!(a2a.op.is_none());
        let bc = f(Collective::Broadcast, 1 << 20);
        assert_eq!(
            (bc.count, bc.send_bytes(), bc.recv_bytes()),
            (1 << 18, 1 << 20, 1 << 20)
        );
        assert_eq!((bc.root, bc.op), (Some(3), None));
        let red = f(Collective::Reduce, 1 << 20);
        assert_eq!(
            (red.count, red.stage_bytes(), red.op),
            (1 << 18, 1 << 20, Some(RedOp::Sum))
        );
        let g = f(Collective::Gather, 1 << 20);
        assert_eq!(
            (g.count, g.send_bytes(), g.recv_bytes()),
            (1 << 15, 1 << 17, 1 << 20)
        );
        let sc = f(Collective::Scatter, 1 << 20);
        assert_eq!(
            (sc.count, sc.send_bytes(), sc.recv_bytes(), sc.size_bytes()),
            (1 << 15, 1 << 20, 1 << 17, 1 << 20)
        );
        // 100 int8 over 8 ranks: 12 each, rounded down to 16 bytes: none.
        let tiny = OpSpec::for_size(
            Collective::Gather,
            DataType::Int8,
            RedOp::Sum,
            100,
            8,
            Some(0),
            4096,
        );
        assert_eq!(tiny.unwrap().count, 0);
        assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Collective::AllGather.bus_factor(4), 0.75);
        assert_eq!(Collective::SendRecv.bus_factor(4), 1.0);
        assert_eq!(Collective::Broadcast.bus_factor(4), 1.0);
        assert_eq!(Collective::Reduce.bus_factor(4), 1.0);
        assert_eq!(Collective::Gather.bus_factor(4), 0.75);
        assert_eq!(Collective::Scatter.bus_factor(4), 0.75);
        let hc = f(Collective::HyperCube, 1 << 20);
        assert_eq!((hc.count, hc.size_bytes()), (1 << 15, 1 << 20));
        // nccl-tests: algbw of hypercube is count × (n-1) per second, busbw the same.
        assert!((hc.algbw(1.0) - 7.0 * f64::from(1u32 << 17) / 1e9).abs() < 1e-12);
        assert_eq!(hc.busbw(1.0), hc.algbw(1.0));
        assert_eq!(
            OpSpec::for_size(
                Collective::HyperCube,
                DataType::Float,
                RedOp::Sum,
                64,
                6,
                None,
                4096
            ),
            Err(SpecError::NotPowerOfTwo(6))
        );
        let bad = |c, root| OpSpec::for_size(c, DataType::Float, RedOp::Sum, 64, 4, root, 4096);
        assert_eq!(
            bad(Collective::Broadcast, Some(4)),
            Err(SpecError::BadRoot { root: 4, nranks: 4 })
        );
        assert_eq!(
            bad(Collective::Reduce, None),
            Err(SpecError::NeedsRoot(Collective::Reduce))
        );
        assert_eq!(
            bad(Collective::AllReduce, Some(0)),
            Err(SpecError::NoRoot(Collective::AllReduce))
        );
        assert!((ar.busbw(1e-3) - 1.048_576 * 1.75).abs() < 1e-9);
        assert_eq!(
            "all_reduce_perf".parse::<Collective>(),
            Ok(Collective::AllReduce)
        );
    }

    #[test]
    fn blocks_cover_the_buffer_once() {
        for (count, n) in [(2_u64, 64_usize), (1000, 3), (1 << 20, 64), (5, 1)] {
            let spec = OpSpec {
                coll: Collective::AllReduce,
                dtype: DataType::Float,
                op: Some(RedOp::Sum),
                count,
                nranks: n,
                root: None,
                slice_bytes: 8192,
            };
            let l = spec.layout();
            let mut next = 0;
            for b in 0..n {
                for s in 0..l.slices {
                    let (a, e) = l.slice(b, s);
                    assert!(a <= e);
                    if a < e {
                        assert_eq!(a, next, "count {count} ranks {n}");
                        assert_eq!(l.block_of(a), b);
                        next = e;
                    }
                }
            }
            assert_eq!(next, count);
        }
    }
}
