//! The collectives on the simulated fabric: every collective, type and operator gives exactly
//! the expected output at every size (ring neighbours in different racks, so every byte
//! crosses the spines), in place and out of place, the rooted ones from every root; a link
//! killed mid-run costs bandwidth and not one element; nccl-tests' `-m`, `-z`, `-c N`, `-a`
//! and `-T` do what they say.

use mrc_coll::backend::program_opts;
use mrc_coll::backend::sim::SimBackend;
use mrc_coll::bench::{Average, BenchOpts, LineResult};
use mrc_coll::program::{Blocking, RankReport};
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

/// The lines of a run and the ranks' reports.
fn run_reports(
    opts: &BenchOpts,
    ranks: usize,
    faults: Vec<Fault>,
) -> (Vec<[Option<LineResult>; 2]>, Vec<RankReport>) {
    let mut b = SimBackend::new(plan(), ranks);
    b.faults = faults;
    b.average = opts.average;
    let rows = opts.rows(ranks).expect("rows");
    let mut lines = vec![[None, None]; rows.len()];
    let out = b
        .run(&rows, &program_opts(opts, true), &mut |i, l| {
            lines[i] = l;
        })
        .expect("run");
    for r in &out.reports {
        assert_eq!(r.error, None);
        assert!(r.done);
    }
    (lines, out.reports)
}

fn run(opts: &BenchOpts, ranks: usize, faults: Vec<Fault>) -> Vec<[Option<LineResult>; 2]> {
    run_reports(opts, ranks, faults).0
}

/// Every element right; every operation took virtual time (one rank's too: a local copy),
/// so every bandwidth is a number.
fn assert_all_right(coll: Collective, ranks: usize, lines: &[[Option<LineResult>; 2]]) {
    for (i, l) in lines.iter().enumerate() {
        for (p, r) in l.iter().enumerate() {
            let r = r.unwrap_or_else(|| panic!("{coll} line {i} placement {p}: no result"));
            assert_eq!(
                r.wrong,
                Some(0),
                "{coll} {ranks} ranks line {i} placement {p}"
            );
            assert!(r.time_us > 0.0, "{coll} line {i} placement {p}: {r:?}");
            assert!(
                r.algbw.is_finite() && r.busbw.is_finite(),
                "{coll} line {i} placement {p}: {r:?}"
            );
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
        let mut o = opts(coll, 4, 2 << 20);
        // A root in the middle of the chain (every root in turn: below).
        o.root = coll.rooted().then_some(2);
        // Hypercube: a power of two.
        let ranks = if coll == Collective::HyperCube { 8 } else { 5 };
        assert_all_right(coll, ranks, &run(&o, ranks, Vec::new()));
    }
}

#[test]
fn rooted_collectives_are_exact_from_every_root() {
    for coll in [
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
    ] {
        // Several slices per block, a block that is not whole slices, and a count of zero.
        let mut o = opts(coll, 16, 80 * 1024);
        o.step_factor = 0;
        o.step_bytes = 80 * 1024 - 16;
        let lines = run(&o, 4, Vec::new());
        assert_eq!(lines.len(), 2 * 4, "{coll}: two sizes from each of 4 roots");
        assert_all_right(coll, 4, &lines);
    }
    // Every type and operator of reduce, at the root and left alone elsewhere.
    let mut o = opts(Collective::Reduce, 40, 40 * 1024);
    o.dtypes = DataType::ALL.to_vec();
    o.ops = RedOp::ALL.to_vec();
    o.iters = 1;
    o.warmup = 0;
    o.root = Some(1);
    assert_all_right(Collective::Reduce, 3, &run(&o, 3, Vec::new()));
    // Every type through the data-moving ones.
    for coll in [
        Collective::Broadcast,
        Collective::Gather,
        Collective::Scatter,
    ] {
        let mut o = opts(coll, 96, 96);
        o.dtypes = DataType::ALL.to_vec();
        o.root = Some(2);
        assert_all_right(coll, 3, &run(&o, 3, Vec::new()));
    }
}

#[test]
fn the_timed_loop_follows_m_z_c_and_a() {
    let base = opts(Collective::AllReduce, 64 * 1024, 64 * 1024);
    let time = |o: &BenchOpts| run(o, 4, Vec::new())[0][0].expect("measured").time_us;
    let plain = time(&base);
    // -m 4 -n 1: four operations, the time per operation.
    let mut agg = base.clone();
    agg.iters = 1;
    agg.agg_iters = 4;
    let t = time(&agg);
    assert!(
        (t - plain).abs() < 0.5 * plain,
        "-m 4: {t} vs {plain} us per op"
    );
    // -z 1: a barrier after every operation, in the time; -z 3: after every iteration,
    // out of it.
    let mut z1 = base.clone();
    z1.blocking = Blocking::BarrierEach;
    let mut z3 = base.clone();
    z3.blocking = Blocking::BarrierIterExcluded;
    let (t1, t3) = (time(&z1), time(&z3));
    assert!(
        t1 > t3,
        "-z 1 counts the barriers, -z 3 does not: {t1} vs {t3}"
    );
    // -c 3: three checks, every element right each time.
    let mut c3 = base.clone();
    c3.checks = 3;
    assert_all_right(Collective::AllReduce, 4, &run(&c3, 4, Vec::new()));
    // -c 0: nothing checked.
    let mut c0 = base.clone();
    c0.checks = 0;
    assert_eq!(run(&c0, 4, Vec::new())[0][0].expect("measured").wrong, None);
    // -a: rank 0's time, the mean, the min, the max of the ranks'.
    let mut a = base.clone();
    a.average = Average::Max;
    let (lines, reports) = run_reports(&a, 4, Vec::new());
    let times: Vec<f64> = reports
        .iter()
        .map(|r| r.rows[0][0].time_ns.expect("timed") / 1e3)
        .collect();
    let max = times.iter().copied().fold(0.0, f64::max);
    assert!((lines[0][0].expect("measured").time_us - max).abs() < 1e-9);
}

#[test]
fn a_timeout_fails_the_rank_whose_operation_does_not_complete() {
    // A ring whose every link from rack 1 is dead: rank 1 never gets its data through; -T 1
    // stops the run after a second of virtual time instead of retrying forever.
    let mut o = opts(Collective::AllReduce, 64 * 1024, 64 * 1024);
    o.timeout_secs = Some(1);
    let mut b = SimBackend::new(plan(), 4);
    for plane in 0..2 {
        for spine in 0..2 {
            b.faults.push(Fault::at_us(
                0,
                FaultKind::LinkDown(
                    NodeId::Switch(SwitchId::t0(plane, 1)),
                    NodeId::Switch(SwitchId::t1(plane, spine)),
                ),
            ));
        }
    }
    let rows = o.rows(4).expect("rows");
    let out = b.run(&rows, &program_opts(&o, true), &mut |_, _| {});
    let reports = match out {
        Ok(r) => r.reports,
        Err(e) => panic!("the run ends (every rank failed or done): {e}"),
    };
    let errors: Vec<&str> = reports.iter().filter_map(|r| r.error.as_deref()).collect();
    assert!(
        errors
            .iter()
            .any(|e| e.contains("timed out") && e.contains("1 s")),
        "{errors:?}"
    );
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
fn a_run_nobody_reads_stops_early() {
    // A sweep of many lines; asked to go on once, it stops at its second look.
    static LOOKS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let o = opts(Collective::AllReduce, 1 << 20, 64 << 20);
    let mut b = SimBackend::new(plan(), 4);
    b.go_on = || LOOKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) < 1;
    let rows = o.rows(4).expect("rows");
    let mut printed = 0;
    let out = b.run(&rows, &program_opts(&o, true), &mut |_, _| printed += 1);
    assert!(
        matches!(out, Err(mrc_coll::backend::sim::SimBackendError::Stopped)),
        "{out:?}"
    );
    assert_eq!(LOOKS.load(std::sync::atomic::Ordering::Relaxed), 2);
    assert!(printed < rows.len(), "{printed} of {} lines", rows.len());
}

#[test]
fn two_ranks_and_one_rank() {
    for coll in Collective::ALL {
        let o = opts(coll, 8, 512 * 1024);
        assert_all_right(coll, 2, &run(&o, 2, Vec::new()));
        // One rank: a local copy, which takes virtual time, so every figure is a number
        // (busbw 0 where the bus factor is, and for hypercube, which counts n-1 blocks).
        let lines = run(&o, 1, Vec::new());
        assert_all_right(coll, 1, &lines);
        let busbw = lines[0][0].expect("measured").busbw;
        let zero = coll.bus_factor(1) == 0.0 || coll == Collective::HyperCube;
        assert_eq!(busbw == 0.0, zero, "{coll}: {busbw}");
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
