//! `mrc-coll`: collective operations over MRC, written once as application state machines over
//! the verbs (Write for data, Write-with-Immediate for signalling, as NCCL's IB transport
//! does), and the nccl-tests-like benchmark that runs them on the simulated fabric, on
//! threads and on processes (docs/mrc-coll.md).
//!
//! ```text
//!  bench (sizes, table) ─► Program per rank (program.rs): barrier · warm-up · timed ops · check
//!                              │  Op (ops.rs): ring all-reduce / reduce-scatter / all-gather,
//!                              │               direct all-to-all and send/recv
//!                              ▼
//!                           Comm (comm.rs): QPs to peers, windows, "ready" tokens, barrier
//!                              │  verbs: post_send(WriteWithImm) · post_recv · mr_read/mr_write
//!                              ▼
//!  backend: sim (virtual time) · mem (threads over in-memory links) · dpdk (processes)
//! ```
//!
//! - [`dtype`], [`reduce`]: element types and the reduction kernels (sum, prod, max, min,
//!   avg over int8 … uint64, half, float, double, bfloat16).
//! - [`spec`]: one operation's counts, layout (blocks per rank, slices per block) and
//!   nccl-tests' bus-bandwidth factors; [`proto`]: what the immediates say.
//! - [`pattern`], [`check`]: rank-dependent inputs and exact expected outputs (`-c 1`).
//! - [`memory`]: compact registered memory for the simulator at scale.
//! - [`bench`]: the command line's sweep and the table.
#![forbid(unsafe_code)]

pub mod backend;
pub mod bench;
pub mod bootstrap;
mod check;
pub mod comm;
pub mod dtype;
pub mod memory;
mod ops;
pub mod pattern;
pub mod program;
pub mod proto;
pub mod reduce;
pub mod spec;

pub use bench::BenchOpts;
pub use dtype::{DataType, RedOp};
pub use program::{Program, ProgramOpts, RankReport, Row};
pub use spec::{Collective, OpSpec};
