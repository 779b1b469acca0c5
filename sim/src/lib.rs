//! `mrc-sim`: a deterministic discrete-event simulator of a multi-plane MRC fabric.
#![forbid(unsafe_code)]
