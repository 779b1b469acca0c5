//! The signalling between ranks: every message is an RDMA Write-with-Immediate (MRC 1.0
//! carries Write and Write-with-Immediate only, brief §1, §3.8), as NCCL's IB transport
//! signals with immediates. The 32-bit immediate says what arrived:
//!
//! ```text
//!  31 30 | 29 ............ 18 | 17 ............... 0
//!  kind  | step (12 bits)     | slice (18 bits)        kind 0: data of (step, slice)
//!  kind  | 0                                           kind 1: ready for the next operation
//!  kind  | 0                                           kind 2: barrier token
//! ```
//!
//! Data lands at its final place (or the peer's staging region) by the Write itself; the
//! immediate only tells the receiver which piece is complete. "Ready" and barrier tokens are
//! zero-length Writes.

/// Ranks the step field can serve: a ring all-reduce has 2(n-1) steps.
pub const MAX_RANKS: usize = 2048;
/// Slices per block the slice field can name.
pub const MAX_SLICES: u32 = 1 << 18;

const KIND_SHIFT: u32 = 30;
const STEP_SHIFT: u32 = 18;
const STEP_MASK: u32 = (1 << 12) - 1;
const SLICE_MASK: u32 = MAX_SLICES - 1;

/// A decoded immediate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Imm {
    /// Slice `slice` of the piece of step `step` is in place.
    Data { step: u32, slice: u32 },
    /// The sender entered its next operation: its buffers may be written.
    Ready,
    /// A barrier token (see `comm::Comm::barrier`).
    Barrier,
}

impl Imm {
    /// The 32-bit immediate.
    pub fn encode(self) -> u32 {
        match self {
            Self::Data { step, slice } => {
                debug_assert!(step <= STEP_MASK && slice <= SLICE_MASK);
                (step & STEP_MASK) << STEP_SHIFT | (slice & SLICE_MASK)
            }
            Self::Ready => 1 << KIND_SHIFT,
            Self::Barrier => 2 << KIND_SHIFT,
        }
    }

    /// The meaning of an immediate; `None` for one no rank sends.
    pub fn decode(imm: u32) -> Option<Self> {
        match imm >> KIND_SHIFT {
            0 => Some(Self::Data {
                step: (imm >> STEP_SHIFT) & STEP_MASK,
                slice: imm & SLICE_MASK,
            }),
            1 if imm & !(3 << KIND_SHIFT) == 0 => Some(Self::Ready),
            2 if imm & !(3 << KIND_SHIFT) == 0 => Some(Self::Barrier),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_round_trip_and_garbage_is_refused() {
        for imm in [
            Imm::Data { step: 0, slice: 0 },
            Imm::Data {
                step: 2 * (MAX_RANKS as u32 - 1) - 1,
                slice: MAX_SLICES - 1,
            },
            Imm::Ready,
            Imm::Barrier,
        ] {
            assert_eq!(Imm::decode(imm.encode()), Some(imm));
        }
        assert_eq!(Imm::decode(3 << 30), None);
        assert_eq!(Imm::decode((1 << 30) | 5), None);
    }
}
