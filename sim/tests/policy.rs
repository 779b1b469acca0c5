//! MRC's policy at scale in quick form (issue #14): what the engine does on a fabric with no
//! fault, asserted on behaviour so it cannot regress silently. The full-size figures come
//! from `mrc-experiments` (docs/SIMULATOR.md).

mod common;

use mrc_sim::experiments::{LATENCY_NS, fabric_toml};

/// A permutation of 2 MiB flows over 8 planes × 50 Gb/s, 4 racks of 8 hosts, 8 spines per
/// plane: non-blocking, nothing fails. Sprayed paths differ only by their queues, so a hole is
/// reordering, never loss: no EV is retired, (almost) nothing is resent, and nothing is
/// trimmed. Before the first policy round (a 20 µs RTT guess in NSCC, the RACK rule alone)
/// this run retired an EV and resent 78 packets (0.48 %).
#[test]
fn a_clean_permutation_retires_no_ev_and_resends_almost_nothing() {
    let plan = fabric_toml("clean", 8, 4, 8, 8, 50, 512 * 1024, LATENCY_NS);
    let out = common::mrc_permutation("clean permutation", plan, 32, 2 << 20);
    let r = &out.report;
    assert!(out.verified.is_ok(), "{:?}", out.verified);
    assert_eq!(r.fct.completed, 32);
    let sent: u64 = r.plane_counters.iter().map(|p| p.packets_sent).sum();
    let resent: u64 = r.plane_counters.iter().map(|p| p.retransmits).sum();
    let retired: u64 = r.plane_counters.iter().map(|p| p.evs_retired).sum();
    assert_eq!(
        retired, 0,
        "no EV retired without a fault: {:?}",
        r.ev_changes
    );
    assert!(r.ev_changes.is_empty(), "{:?}", r.ev_changes);
    assert!(
        resent * 2000 <= sent,
        "spurious resends under 0.05 %: {resent} of {sent}"
    );
    assert_eq!(r.fabric.switch_ports.trimmed, 0);
    // Queues by hop are reported, and no port came near its buffer.
    assert_eq!(r.queues.len(), 4);
    assert!(
        r.queues.iter().all(|q| q.max_bytes < 256 * 1024),
        "{:?}",
        r.queues
            .iter()
            .map(|q| (&q.tier, q.max_bytes))
            .collect::<Vec<_>>()
    );
}
