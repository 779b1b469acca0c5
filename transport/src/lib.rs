//! `mrc-transport`: the sans-IO MRC engine and its verbs-like API.
//!
//! No clock, socket, thread, DPDK or `unsafe` here: time comes in as [`Instant`] arguments,
//! packets as byte slices, and everything the engine wants to send is drained by the caller.
//!
//! The deterministic test harness (module `harness`) sits behind the `harness` feature (off by
//! default; this crate's tests turn it on): it is not part of the production library.
#![forbid(unsafe_code)]

pub mod app;
pub mod cc;
pub mod config;
mod ctx;
mod endpoint;
pub mod ev;
mod event;
#[cfg(feature = "harness")]
pub mod harness;
mod path;
mod qp;
pub mod reliability;
mod rng;
mod slab;
pub mod stats;
pub mod time;
pub mod verbs;
pub mod wire;

pub use config::{EndpointConfig, PathMode, PortConfig};
pub use endpoint::{CcState, Endpoint, PortMask};
pub use event::Event;
pub use qp::Transmit;
pub use time::{Duration, Instant};
