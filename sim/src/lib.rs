//! `mrc-sim`: a deterministic discrete-event simulator of a multi-plane MRC fabric that drives
//! the real `mrc-transport` engines with real frames (docs/SIMULATOR.md).
//!
//! - The fabric comes from an `mrc_srv6::plan::Plan` (planes × two tiers, one host port per
//!   plane); switches forward by uSID shift-and-lookup on the plan's static tables, or by an
//!   ECMP hash of the EV ([`Routing`]).
//! - Switch egress ports ([`port`]) have a data queue and a strict-priority control queue,
//!   randomized ECN between two thresholds (not on the last hop), trimming with DSCP rewrite
//!   (its own code point at the last hop) or tail drop.
//! - Faults ([`fault`]): links down/up and flapping, per-link loss, gray links, switches that
//!   stop forwarding, host ports that go down, links that duplicate, corrupt or reorder
//!   frames; [`soak`] runs seeded campaigns of them all with every byte verified.
//! - Hosts run one [`mrc_transport::Endpoint`] each, driven by [`Application`]s over the
//!   verbs; [`workload`] has the standard ones (permutation, incast with a victim, all-to-all,
//!   ring all-reduce) and [`traffic`] the connection-matrix text format.
//! - [`report`] turns a run into tables, JSON and SVG plots.
//!
//! Time is integer picoseconds ([`SimTime`]); events are ordered by (time, sequence); every
//! random draw comes from seeded generators: the same inputs give byte-identical reports.
#![forbid(unsafe_code)]

pub mod allreduce;
pub mod app;
pub mod config;
pub mod experiments;
pub mod fabric;
pub mod fault;
pub mod memory;
pub mod pool;
pub mod port;
pub mod progress;
pub mod queue;
pub mod report;
pub mod rng;
mod sim;
pub mod soak;
pub mod svg;
pub mod switch;
pub mod time;
pub mod traffic;
pub mod workload;

pub use app::{Application, Verbs};
pub use config::{Routing, SimConfig};
pub use fault::{Fault, FaultKind, Impairment, parse_faults};
pub use report::QueueLevels;
pub use sim::{
    Conn, ConnOpts, Delivery, EvChange, FabricCounters, QpEnd, RunLimit, RunSummary, Sim, SimError,
};
pub use time::SimTime;
