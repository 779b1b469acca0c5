//! Shared code of the mrc-rs command-line tools.

pub mod fabric;
