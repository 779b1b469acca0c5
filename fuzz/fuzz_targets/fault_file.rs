#![no_main]
//! A fault file (`mrc-experiments run --faults`) never panics the parser and never makes it
//! allocate past the file's size (a flap of any count is one fault); what parses passes the
//! plan check, and a short run with those faults does not panic the simulator.
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mrc_sim::traffic::Message;
use mrc_sim::workload::{Workload, WorkloadOpts};
use mrc_sim::{RunLimit, Sim, SimConfig, SimTime, parse_faults};
use mrc_srv6::plan::Plan;

fn plan() -> &'static Plan {
    static PLAN: OnceLock<Plan> = OnceLock::new();
    PLAN.get_or_init(|| Plan::builtin("small").expect("built-in plan"))
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let plan = plan();
    let faults = match parse_faults(text, plan) {
        Ok(f) => f,
        Err(e) => {
            assert!(!e.message.contains('\n'), "{e}");
            assert!(e.line >= 1 && e.line <= text.lines().count(), "{e}");
            return;
        }
    };
    assert!(faults.len() <= text.lines().count());
    for f in &faults {
        assert_eq!(f.check(plan), Ok(()));
    }
    if faults.is_empty() {
        return;
    }
    let mut sim = Sim::new(plan.clone(), SimConfig::default()).expect("the small plan builds");
    let msg = Message {
        src: 0,
        dst: 3,
        start: SimTime::ZERO,
        size: 20_000,
    };
    Workload::install(&mut sim, &[msg], &WorkloadOpts::default()).expect("one message installs");
    for f in &faults {
        sim.schedule(*f);
    }
    sim.run(
        RunLimit {
            until: SimTime(200_000_000),
            max_events: 3_000,
        },
        &mut |_| {},
    );
});
