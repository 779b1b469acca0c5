//! The collectives on the simulated fabric: every collective, type and operator gives exactly
//! the expected output at every size (ring neighbours in different racks, so every byte
//! crosses the spines), in place and out of place; a link killed mid-run costs bandwidth and
//! not one element.

use mrc_coll::backend::program_opts;
use mrc_coll::backend::sim::SimBackend;
use mrc_coll::bench::{BenchOpts, LineResult};
use mrc_coll::{Collective, DataType, RedOp};
use mrc_sim::{Fault, FaultKind};
use mrc_srv6::plan::{NodeId, Plan, SwitchId};

/// 2 planes × 4 racks × 2 spines × 4 hosts, 100 Gb/s.
const PLAN: &str = r#"
name = "coll16"
planes = 2
t0_per_plane = 4
t1_per_plane = 2
hosts_per_t0 = 4
usid_block = "fcbb:bb00::/32"
host_usids = "downlink"
mtu = 9000

[links.host]
speed_gbps = 100
latency_ns = 300
buffer_bytes = 1048576

[links.fabric]
speed_gbps = 100
latency_ns = 300
buffer_bytes = 1048576
"#;

fn plan() -> Plan {
    Plan::from_toml(PLAN, "<test>").expect("plan")
}

fn run(opts: &BenchOpts, ranks: usize, faults: Vec<Fault>) -> Vec<[Option<LineResult>; 2]> {
    let mut b = SimBackend::new(plan(), ranks);
    b.faults = faults;
    let rows = opts.rows(ranks).expect("rows");
    let mut lines = vec![[None, None]; rows.len()];
    let out = b
        .run(opts.coll, &rows, &program_opts(opts, true), &mut |i, l| {
            lines[i] = l;
        })
        .expect("run");
    for r in &out.reports {
        assert_eq!(r.error, None);
        assert!(r.done);
    }
    lines
}

/// Every element right; with peers, every operation took virtual time.
fn assert_all_right(coll: Collective, ranks: usize, lines: &[[Option<LineResult>; 2]]) {
    for (i, l) in lines.iter().enumerate() {
        for (p, r) in l.iter().enumerate() {
            let r = r.unwrap_or_else(|| panic!("{coll} line {i} placement {p}: no result"));
            assert_eq!(r.wrong, Some(0), "{coll} line {i} placement {p}");
            if ranks > 1 {
                assert!(r.time_us > 0.0, "{coll} line {i} placement {p}: {r:?}");
            }
        }
    }
}

fn opts(coll: Collective, min: u64, max: u64) -> BenchOpts {
    let mut o = BenchOpts::new(coll);
    o.min_bytes = min;
    o.max_bytes = max;
    o.step_factor = 8;
    o.iters = 2;
    o.warmup = 1;
    o.slice_bytes = 16 * 1024;
    o
}

#[test]
fn every_collective_is_exact_from_one_element_to_megabytes() {
    for coll in Collective::ALL {
        let o = opts(coll, 4, 2 << 20);
        assert_all_right(coll, 5, &run(&o, 5, Vec::new()));
    }
}

#[test]
fn every_type_and_operator_reduces_exactly() {
    let mut o = opts(Collective::AllReduce, 24, 96 * 1024);
    o.dtypes = DataType::ALL.to_vec();
    o.ops = RedOp::ALL.to_vec();
    o.iters = 1;
    o.warmup = 0;
    assert_all_right(Collective::AllReduce, 3, &run(&o, 3, Vec::new()));
    let mut o = opts(Collective::ReduceScatter, 64, 64 * 1024);
    o.dtypes = vec![DataType::Half, DataType::Int64, DataType::Uint8];
    o.ops = vec![RedOp::Avg, RedOp::Max];
    assert_all_right(Collective::ReduceScatter, 4, &run(&o, 4, Vec::new()));
}

#[test]
fn two_ranks_and_one_rank() {
    for coll in Collective::ALL {
        let o = opts(coll, 8, 512 * 1024);
        assert_all_right(coll, 2, &run(&o, 2, Vec::new()));
        assert_all_right(coll, 1, &run(&o, 1, Vec::new()));
    }
}

#[test]
fn a_spine_link_killed_mid_run_costs_bandwidth_not_data() {
    let mut o = opts(Collective::AllReduce, 8 << 20, 8 << 20);
    o.iters = 4;
    let clean = run(&o, 8, Vec::new());
    assert_all_right(Collective::AllReduce, 8, &clean);
    // Rank r sits on rack r mod 4: every rack's uplink to spine 0 of plane 0 carries ring
    // traffic. Kill one early in the timed loop.
    let link = FaultKind::LinkDown(
        NodeId::Switch(SwitchId::t0(0, 1)),
        NodeId::Switch(SwitchId::t1(0, 0)),
    );
    let hurt = run(&o, 8, vec![Fault::at_us(800, link)]);
    assert_all_right(Collective::AllReduce, 8, &hurt);
    let (c, h) = (clean[0][0].unwrap().busbw, hurt[0][0].unwrap().busbw);
    assert!(h < c, "a dead link should cost something: {h} vs {c}");
}
