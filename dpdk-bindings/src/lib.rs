//! `mrc-dpdk`: bindings to DPDK 22.11 and a safe poll-mode layer.
