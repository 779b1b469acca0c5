//! `mrc-srv6`: the IPv6 side of mrc-rs.
//!
//! - [`wire`]: zero-copy views and reprs, smoltcp-shaped, for IPv6 (RFC 8200), the Segment
//!   Routing Header (RFC 8754) and uSID containers (RFC 9800, F3216). Ethernet, ICMPv6 and NDP
//!   are re-exported from smoltcp's wire module rather than written again.
//! - [`plan`]: the multi-plane two-tier fabric plan (planes, T0/T1 switches, hosts, the uSID
//!   allocation) that names every path between two hosts and emits the Linux configuration of
//!   the kernel switches used in interop tests. Reading a plan from TOML (serde, toml) is the
//!   `toml` feature, on by default; the engine (mrc-transport) goes without it.
//!
//! No clock, socket, thread or `unsafe` here.
#![forbid(unsafe_code)]

pub mod plan;
pub mod wire;
