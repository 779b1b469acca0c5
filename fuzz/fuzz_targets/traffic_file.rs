#![no_main]
//! A traffic file (`mrc-experiments run --traffic`) never panics the parser and never makes it
//! allocate past the file's size; what parses names hosts of the plan, round-trips through
//! `format_traffic`, fits the engines' tables or is refused by them, and a short run of its
//! first messages does not panic the simulator (64-bit sizes split into work requests).
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use mrc_sim::traffic::{MAX_MESSAGE_BYTES, format_traffic, parse_traffic};
use mrc_sim::workload::{Workload, WorkloadOpts, check_limits};
use mrc_sim::{RunLimit, Sim, SimConfig, SimTime};
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
    let msgs = match parse_traffic(text, plan) {
        Ok(m) => m,
        Err(e) => {
            assert!(!e.message.contains('\n'), "{e}");
            assert!(
                e.line.is_none_or(|l| l >= 1 && l <= text.lines().count()),
                "{e}"
            );
            return;
        }
    };
    assert!(!msgs.is_empty() && msgs.len() <= text.lines().count());
    for m in &msgs {
        assert!(
            plan.has_host(mrc_srv6::plan::HostId(m.src))
                && plan.has_host(mrc_srv6::plan::HostId(m.dst))
        );
        assert!(m.src != m.dst && m.size <= MAX_MESSAGE_BYTES);
    }
    if msgs.iter().all(|m| m.start.0 < 1 << 50) {
        assert_eq!(
            parse_traffic(&format_traffic(&msgs), plan).as_ref(),
            Ok(&msgs)
        );
    }
    let few = &msgs[..msgs.len().min(3)];
    let limits = mrc_transport::config::Limits::default();
    if check_limits(few, 2, &limits).is_err() {
        return;
    }
    let mut sim = Sim::new(plan.clone(), SimConfig::default()).expect("the small plan builds");
    let opts = WorkloadOpts {
        qps_per_pair: 2,
        ..WorkloadOpts::default()
    };
    Workload::install(&mut sim, few, &opts).expect("a checked workload installs");
    sim.run(
        RunLimit {
            until: SimTime(100_000_000),
            max_events: 2_000,
        },
        &mut |_| {},
    );
});
