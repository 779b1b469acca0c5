//! `mrc-transport`: the sans-IO MRC engine and its verbs-like API.
//!
//! No clock, socket, thread, DPDK or `unsafe` here: time comes in as [`Instant`] arguments,
//! packets as byte slices, and everything the engine wants to send is drained by the caller.
#![forbid(unsafe_code)]

pub mod cc;
pub mod time;
pub mod wire;

pub use time::{Duration, Instant};
