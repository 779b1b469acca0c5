//! Writing an operation's inputs and checking its output (`-c 1`): where each output element
//! comes from, the expected value, and the count of wrong elements (nccl-tests' `#wrong`).
//! As in nccl-tests, the output of a reduce or a gather at a rank other than the root must be
//! left as it was (poisoned, or the rank's own in-place input).

use mrc_transport::app::Verbs;

use crate::comm::{Buf, Comm, CommError};
use crate::pattern::{Granularity, Pattern, Reduced};
use crate::spec::{Collective, Layout, OpSpec};

/// Bytes read or written per verbs call.
const CHUNK: usize = 1 << 20;
/// What an output buffer holds before the operation writes it.
const POISON: u8 = 0xa5;

/// Where output element `index` comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// The reduction over every rank of input element `index`, finished by `owner`.
    Reduced { owner: usize, index: u64 },
    /// Input element `index` of `rank`.
    Value { rank: usize, index: u64 },
    /// Not written by the operation: the poison [`init`] left.
    Poison,
}

impl Source {
    fn shifted(self, by: u64) -> Self {
        match self {
            Self::Reduced { owner, index } => Self::Reduced {
                owner,
                index: index + by,
            },
            Self::Value { rank, index } => Self::Value {
                rank,
                index: index + by,
            },
            Self::Poison => Self::Poison,
        }
    }

    fn index(self) -> u64 {
        match self {
            Self::Reduced { index, .. } | Self::Value { index, .. } => index,
            Self::Poison => 0,
        }
    }
}

/// The input and output places of an operation at a rank.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Places {
    pub input: (Buf, u64),
    pub output: (Buf, u64),
}

impl Places {
    pub fn of(spec: &OpSpec, in_place: bool, rank: usize) -> Self {
        let block = spec.layout().block_elems * spec.dtype.size() as u64;
        let input = match spec.coll {
            Collective::AllGather | Collective::HyperCube | Collective::Gather if in_place => {
                (Buf::Recv, rank as u64 * block)
            }
            Collective::AllReduce
            | Collective::AllToAll
            | Collective::SendRecv
            | Collective::Broadcast
            | Collective::Reduce
                if in_place =>
            {
                (Buf::Recv, 0)
            }
            _ => (Buf::Send, 0),
        };
        let output = match spec.coll {
            Collective::ReduceScatter | Collective::Scatter if in_place => {
                (Buf::Send, rank as u64 * block)
            }
            _ => (Buf::Recv, 0),
        };
        Self { input, output }
    }
}

/// Where output element `out` of `rank` comes from.
fn source(spec: &OpSpec, l: &Layout, rank: usize, in_place: bool, out: u64) -> Source {
    let n = spec.nranks;
    let root = spec.root.unwrap_or(0);
    match spec.coll {
        Collective::AllReduce => Source::Reduced {
            owner: l.block_of(out),
            index: out,
        },
        Collective::ReduceScatter => Source::Reduced {
            owner: rank,
            index: rank as u64 * spec.count + out,
        },
        Collective::AllGather | Collective::HyperCube => {
            let b = (out / spec.count) as usize;
            Source::Value {
                rank: b,
                index: out - b as u64 * spec.count,
            }
        }
        Collective::AllToAll => {
            let p = (out / spec.count) as usize;
            Source::Value {
                rank: p,
                index: rank as u64 * spec.count + out - p as u64 * spec.count,
            }
        }
        Collective::SendRecv => Source::Value {
            rank: (rank + n - 1) % n,
            index: out,
        },
        Collective::Broadcast => Source::Value {
            rank: root,
            index: out,
        },
        Collective::Reduce if rank == root => Source::Reduced {
            owner: root,
            index: out,
        },
        Collective::Reduce if in_place => Source::Value { rank, index: out },
        Collective::Gather if rank == root || (in_place && out / spec.count == rank as u64) => {
            let b = (out / spec.count) as usize;
            Source::Value {
                rank: b,
                index: out - b as u64 * spec.count,
            }
        }
        Collective::Reduce | Collective::Gather => Source::Poison,
        Collective::Scatter => Source::Value {
            rank: root,
            index: rank as u64 * spec.count + out,
        },
    }
}

/// Where the run of [`Source::Poison`] that holds element `out` of `rank`'s output ends.
fn poison_end(spec: &OpSpec, rank: usize, in_place: bool, out: u64, total: u64) -> u64 {
    let own = rank as u64 * spec.count;
    if spec.coll == Collective::Gather && in_place && out < own {
        own
    } else {
        total
    }
}

/// The ranks whose input an operation reads (broadcast and scatter: the root's only).
fn has_input(spec: &OpSpec, rank: usize) -> bool {
    match spec.coll {
        Collective::Broadcast | Collective::Scatter => spec.root == Some(rank),
        _ => true,
    }
}

/// Writes `rank`'s input for `spec` and poisons its output (before the input, so an
/// in-place input survives).
pub(crate) fn init(
    comm: &Comm,
    verbs: &mut dyn Verbs,
    spec: &OpSpec,
    in_place: bool,
    pattern: &Pattern,
    scratch: &mut Vec<u8>,
) -> Result<(), CommError> {
    let places = Places::of(spec, in_place, comm.rank());
    let overlaps = spec.coll == Collective::ReduceScatter && in_place;
    if !overlaps {
        scratch.clear();
        scratch.resize(CHUNK.min(spec.recv_bytes() as usize), POISON);
        let mut done = 0;
        while done < spec.recv_bytes() {
            let n = (spec.recv_bytes() - done).min(CHUNK as u64) as usize;
            let (buf, base) = places.output;
            comm.write(verbs, buf, base + done, &scratch[..n])?;
            done += n as u64;
        }
    }
    if !has_input(spec, comm.rank()) {
        return Ok(());
    }
    let esize = spec.dtype.size() as u64;
    let mut done = 0;
    while done < spec.send_bytes() {
        let n = (spec.send_bytes() - done).min(CHUNK as u64) as usize;
        scratch.resize(n, 0);
        pattern.fill(comm.rank(), done / esize, &mut scratch[..n]);
        let (buf, base) = places.input;
        comm.write(verbs, buf, base + done, &scratch[..n])?;
        done += n as u64;
    }
    Ok(())
}

/// Counts the wrong elements of `rank`'s output.
pub(crate) fn count_wrong(
    comm: &Comm,
    verbs: &dyn Verbs,
    spec: &OpSpec,
    in_place: bool,
    pattern: &Pattern,
    scratch: &mut Vec<u8>,
) -> Result<u64, CommError> {
    let rank = comm.rank();
    let l = spec.layout();
    let places = Places::of(spec, in_place, rank);
    let esize = spec.dtype.size();
    let mut reduced = Reduced::new(pattern, spec.nranks);
    let mut expected = |s: Source| match s {
        Source::Reduced { owner, index } => reduced.get(owner, index),
        Source::Value { rank, index } => pattern.value(rank, index),
        Source::Poison => u64::from_le_bytes([POISON; 8]),
    };
    // A block pattern repeats one word per `g` bytes: a `g`-byte run of the output whose
    // source is one aligned run of one rank's input is checked word by word.
    let run = match pattern.granularity {
        Granularity::Block(g) => g as usize / esize,
        Granularity::Element => 0,
    };
    let total = spec.recv_bytes() / esize as u64;
    let mut wrong = 0;
    let mut first = 0_u64;
    while first < total {
        let n = (total - first).min((CHUNK / esize) as u64) as usize;
        scratch.resize(n * esize, 0);
        let (buf, base) = places.output;
        comm.read(verbs, buf, base + first * esize as u64, scratch)?;
        let mut i = 0;
        while i < n {
            let out = first + i as u64;
            let s = source(spec, &l, rank, in_place, out);
            if s == Source::Poison {
                // Left as it was: compared as bytes, up to the end of the run.
                let end = poison_end(spec, rank, in_place, out, total).min(first + n as u64);
                let bytes = &scratch[i * esize..(end - first) as usize * esize];
                if bytes.iter().any(|&b| b != POISON) {
                    wrong += bytes
                        .chunks_exact(esize)
                        .filter(|e| e.iter().any(|&b| b != POISON))
                        .count() as u64;
                }
                i = (end - first) as usize;
                continue;
            }
            let whole = run > 1
                && i + run <= n
                && (s.index() as usize).is_multiple_of(run)
                && source(spec, &l, rank, in_place, out + run as u64 - 1)
                    == s.shifted(run as u64 - 1);
            if whole {
                let lanes = 8 / esize;
                let mut word = [0u8; 8];
                for k in 0..lanes {
                    let v = expected(s.shifted(k as u64)).to_le_bytes();
                    word[k * esize..(k + 1) * esize].copy_from_slice(&v[..esize]);
                }
                for got in scratch[i * esize..(i + run) * esize].chunks_exact(8) {
                    if got != word {
                        wrong += got
                            .chunks_exact(esize)
                            .zip(word.chunks_exact(esize))
                            .filter(|(a, b)| a != b)
                            .count() as u64;
                    }
                }
                i += run;
            } else {
                let want = expected(s).to_le_bytes();
                if scratch[i * esize..(i + 1) * esize] != want[..esize] {
                    wrong += 1;
                }
                i += 1;
            }
        }
        first += n as u64;
    }
    Ok(wrong)
}
