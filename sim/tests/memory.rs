//! What a simulated fabric holds in memory (issue #14: a 4 096-host permutation took 4.8 GB,
//! mostly payloads in flight and rings sized for their limits): frames crossing the fabric
//! keep their headers, not their pattern payloads, and every byte still arrives checked.

mod common;

use mrc_sim::experiments::{LATENCY_NS, fabric_toml};

#[test]
fn frames_in_flight_hold_their_headers_not_their_payloads() {
    // 2 planes × 4 racks × 4 hosts, 4 KiB payloads: hundreds of full frames in flight.
    let plan = fabric_toml("mem", 2, 4, 4, 4, 50, 512 * 1024, LATENCY_NS);
    let out = common::mrc_permutation("memory", plan, 16, 1 << 20);
    assert!(
        out.verified.is_ok(),
        "every byte checked: {:?}",
        out.verified
    );
    assert_eq!(out.report.fct.completed, 16);
    let peak = out.sim.peak_frames();
    let pool = out.sim.frame_pool_bytes();
    let full = out.sim.endpoint(0).max_frame_len();
    assert!(
        full > 4096 && peak > 200,
        "a real load: {peak} frames of up to {full} B"
    );
    // Holding the payloads would take `peak` full bodies; headers take a small one each (plus
    // the one scratch buffer and the tables).
    assert!(
        pool < peak * 512 + 2 * full,
        "frame pool {pool} B for {peak} frames in flight at once"
    );
}
