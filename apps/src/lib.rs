//! Shared code of the mrc-rs command-line tools.

pub mod coll;
pub mod fabric;
pub mod faults;
pub mod metrics;
pub mod perf;
pub mod ranks;
pub mod tool;
pub mod units;
