//! `mrc-nic`: the software NIC that runs an MRC engine on a poll-mode thread.
//!
//! ```text
//!  application threads                      NIC thread (one per engine)
//!  ───────────────────                      ───────────────────────────
//!  NicHandle::post_send ──doorbell ring──►  Endpoint::post_send
//!  NicHandle::poll_cq   ◄──CQ rings───────  Endpoint::poll_cq
//!  control calls        ──command ring──►   (alloc_pd, reg_mr, modify_qp, stats ...)
//!  MemoryRegion         ◄══ shared bytes ══ payload placed / gathered by the engine
//!                                           PacketIo: DPDK ports, in-memory links
//! ```
//!
//! - [`PacketIo`]: burst receive, burst transmit, link state, per port (= plane); implemented
//!   by [`DpdkIo`](io::dpdk::DpdkIo) over DPDK ports and by [`MemIo`] over in-memory links.
//! - [`NicRunner`] / [`Nic`]: the poll loop (one clock read per iteration, never blocking) and
//!   the thread that runs it; [`NicHandle`]: the application's cloneable handle (the engine's
//!   [`Verbs`](mrc_transport::app::Verbs) plus poll_cq and the control path).
//! - [`MemoryRegion`]: registered memory shared between the application and the NIC thread.
//! - [`ndp`]: IPv6 neighbour discovery, so switches reach the NIC without static entries.
//! - [`run_application`]: drives an [`Application`](mrc_transport::app::Application) from an
//!   application thread.
//!
//! `unsafe` in one fenced module only: DPDK is reached through `mrc-dpdk`'s safe layer, and
//! shared memory is made of atomic words copied byte-wise atomically by `memory/racy.rs` (inline
//! assembly, its soundness argument in the module doc), the rest of the
//! crate is denied `unsafe`.
#![deny(unsafe_code)]

pub mod app;
pub mod config;
pub mod error;
mod handle;
pub mod io;
pub mod memory;
pub mod ndp;
mod runtime;
mod shared;
mod status;

pub use app::{AppDriver, AppRunStats, run_application};
pub use config::{IdlePolicy, NicConfig};
pub use error::NicError;
pub use handle::NicHandle;
pub use io::mem::{MemControl, MemFabric, MemIo};
pub use io::{IoStats, PacketIo};
pub use memory::MemoryRegion;
pub use ndp::{NdpConfig, NextHop};
pub use runtime::{Nic, NicExit, NicRunner};
pub use shared::NicEvent;
pub use status::{NicStats, PortState};
