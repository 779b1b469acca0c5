//! Raw bindings: bindgen's output for `csrc/wrapper.h` (narrow allowlist, see `build.rs`), with
//! `static inline` functions reached through generated C wrappers, and the hand shim for macros
//! (`mrc_shim_*`). Everything here is `unsafe` to use; prefer the safe layer of this crate.
#![allow(
    non_upper_case_globals,
    non_camel_case_types,
    non_snake_case,
    dead_code,
    unreachable_pub,
    missing_debug_implementations,
    unsafe_op_in_unsafe_fn,
    unused_qualifications,
    rust_2018_idioms,
    clippy::all,
    clippy::pedantic,
    clippy::undocumented_unsafe_blocks
)]

include!(concat!(env!("OUT_DIR"), "/bindings.rs"));
