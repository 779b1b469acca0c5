#![no_main]
//! A plan file (`--plan FILE` of every tool) never panics the loader: it loads, or it is one
//! line naming the file (and the line and field when known). A plan that loads has a `[sim]`
//! table that configures the simulator or is refused, and a small one builds a simulator.
use libfuzzer_sys::fuzz_target;
use mrc_sim::{Sim, SimConfig};
use mrc_srv6::plan::Plan;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let plan = match Plan::from_toml(text, "fuzz.toml") {
        Ok(p) => p,
        Err(e) => {
            let shown = e.to_string();
            assert!(shown.starts_with("fuzz.toml"), "{shown}");
            assert!(!shown.contains('\n'), "{shown}");
            assert!(
                e.line
                    .is_none_or(|l| l >= 1 && l <= text.lines().count().max(1)),
                "{shown}"
            );
            return;
        }
    };
    let Ok(cfg) = SimConfig::from_plan(&plan) else {
        return;
    };
    if plan.host_count() * u32::from(plan.planes()) <= 32 && plan.switch_count() <= 32 {
        let _ = Sim::new(plan, cfg);
    }
});
