//! Same seed and inputs, byte-identical reports; another seed, another run.

mod common;

use common::{SMALL16, limit, us};
use mrc_sim::report::{Recorder, Report};
use mrc_sim::traffic::permutation;
use mrc_sim::workload::{Workload, WorkloadOpts};
use mrc_sim::{Fault, FaultKind, Sim, SimConfig, SimTime};
use mrc_srv6::plan::{NodeId, SwitchId};
use mrc_transport::Duration;

fn report(seed: u64) -> String {
    let cfg = SimConfig {
        seed,
        sample_every: Some(Duration::from_micros(2)),
        ..SimConfig::default()
    };
    let mut s = Sim::new(common::plan(SMALL16), cfg).unwrap();
    let msgs = permutation(16, 256 * 1024, SimTime::ZERO, 5);
    let w = Workload::install(&mut s, &msgs, &WorkloadOpts::default()).unwrap();
    s.schedule(Fault::at_us(0, FaultKind::LossEverywhere(0.005)));
    s.schedule(Fault::at_us(
        6,
        FaultKind::LinkDown(
            NodeId::Switch(SwitchId::t0(0, 1)),
            NodeId::Switch(SwitchId::t1(0, 2)),
        ),
    ));
    s.schedule(Fault::at_us(40, FaultKind::HostPortDown(3, 1)));
    let _ = us(0);
    let mut rec = Recorder::default();
    let sum = s
        .run_to_completion(limit(), &mut |s| rec.observe(s))
        .unwrap();
    w.verify().unwrap();
    let r = Report::build("determinism", &s, sum.events, &w.records(), &rec);
    let mut text = serde_json::to_string(&r).unwrap();
    for (_, chart) in r.charts() {
        text.push_str(&chart.to_svg());
    }
    text + &r.table() + &r.flow_table()
}

#[test]
fn same_seed_same_bytes_other_seed_other_run() {
    let a = report(42);
    let b = report(42);
    assert!(a == b, "two runs with one seed differ");
    let c = report(43);
    assert_ne!(a, c, "the seed reaches the fabric and the engines");
}
