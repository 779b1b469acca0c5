//! The text formats users hand the simulator (traffic files, fault files, plan TOML) on random
//! input: never a panic, never an allocation past the input's size, and whatever parses keeps
//! the promises of the parser (hosts in the plan, faults that pass the plan check, messages
//! that round-trip). The fuzz targets `traffic_file`, `fault_file` and `plan_toml` run the same
//! properties for longer.

use mrc_sim::traffic::{MAX_MESSAGE_BYTES, format_traffic, parse_traffic};
use mrc_sim::workload::{Workload, WorkloadOpts};
use mrc_sim::{RunLimit, Sim, SimConfig, SimTime, parse_faults};
use mrc_srv6::plan::{Plan, SMALL_PLAN_TOML};
use proptest::prelude::*;

/// Pieces of every format, glued at random: most inputs are near-misses of real lines.
const WORDS: &[&str] = &[
    "->",
    "h",
    "0->1",
    "3->2",
    "h1->h3",
    "start",
    "size",
    "id",
    "Nodes",
    "Connections",
    "#",
    "flap",
    "period",
    "down",
    "count",
    "link-down",
    "link-up",
    "loss",
    "all",
    "switch-stop",
    "switch-start",
    "port-down",
    "port-up",
    "dup",
    "corrupt",
    "reorder",
    "t0-0-0",
    "t1-0-1",
    "t0-1-1",
    "t1-1-0",
    "t0-0-9",
    "t2-0-0",
    "h3",
    "h9",
    "0",
    "1",
    "2",
    "3",
    "4",
    "0.5",
    "2.5",
    "1e30",
    "-1",
    "nan",
    "inf",
    "18446744073709551615",
    "18446744073709551616",
    "4611686018427387904",
    "4000000000",
    "4294967296",
    "=",
    "[",
    "]",
    "\"",
    "[links.host]",
    "[sim]",
    "trim",
    "true",
    "planes",
    "latency_ns",
    "9223372036854775807",
];

fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => prop::sample::select(WORDS).prop_map(str::to_owned),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => "[ -~]{0,6}",
        1 => "\\PC{0,3}",
    ];
    let sep = prop::sample::select(&["", " ", " ", "\n", "\t"][..]);
    prop::collection::vec((piece, sep), 0..48).prop_map(|v| {
        v.into_iter()
            .flat_map(|(p, s)| [p, s.to_owned()])
            .collect::<String>()
    })
}

/// A number of any magnitude, mostly small.
fn number() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => (0u64..8).prop_map(|n| n.to_string()),
        2 => (0u64..100_000).prop_map(|n| n.to_string()),
        1 => any::<u64>().prop_map(|n| n.to_string()),
        1 => prop::sample::select(WORDS).prop_map(str::to_owned),
    ]
}

/// Lines that are nearly right: every form of both files with numbers of any size.
fn line() -> impl Strategy<Value = String> {
    let n = number;
    prop_oneof![
        (n(), n(), n(), n()).prop_map(|(a, b, t, z)| format!("{a}->{b} {t} {z}")),
        (n(), n(), n(), n()).prop_map(|(a, b, t, z)| format!("h{a}->h{b} start {t} size {z} id 1")),
        n().prop_map(|x| format!("Nodes {x}")),
        n().prop_map(|x| format!("Connections {x}")),
        (n(), n(), n()).prop_map(|(t, p, i)| format!("{t} link-down t0-{p}-{i} t1-{p}-0")),
        (n(), n(), n()).prop_map(|(t, h, p)| format!("{t} port-down h{h} {p}")),
        (n(), n()).prop_map(|(t, p)| format!("{t} loss all 0.{p}")),
        (n(), n(), n()).prop_map(|(t, p, d)| format!("{t} reorder t0-0-0 t1-0-1 0.{p} {d}")),
        (n(), n()).prop_map(|(t, i)| format!("{t} switch-stop t1-0-{i}")),
        (n(), n(), n(), n()).prop_map(|(s, p, d, c)| {
            format!("flap t0-1-1 t1-1-0 start {s} period {p} down {d} count {c}")
        }),
        text(),
    ]
}

/// Traffic lines, mostly right.
fn traffic_line() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => (0u32..4, 0u32..4, 0u32..50, number()).prop_map(|(a, b, t, z)| format!("{a}->{b} {t} {z}")),
        1 => Just("# a comment".to_owned()),
        1 => Just(String::new()),
        1 => line(),
    ]
}

fn file() -> impl Strategy<Value = String> {
    prop::collection::vec(line(), 0..6).prop_map(|l| l.join("\n"))
}

fn traffic_file() -> impl Strategy<Value = String> {
    prop::collection::vec(traffic_line(), 0..6).prop_map(|l| l.join("\n"))
}

/// A value for a plan key: numbers, strings, booleans, or anything.
fn plan_value() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => number(),
        1 => "\"[a-z0-9:/]{0,12}\"",
        1 => prop::sample::select(&["true", "\"global\"", "\"downlink\"", "\"fcbb:bb00::/32\""][..]).prop_map(str::to_owned),
        1 => text(),
    ]
}

fn small() -> Plan {
    Plan::builtin("small").unwrap()
}

/// A short run of `msgs` and `faults` on the small plan: whatever parsed must not panic the
/// simulator either.
fn short_run(msgs: &[mrc_sim::traffic::Message], faults: &[mrc_sim::Fault]) {
    let mut sim = Sim::new(small(), SimConfig::default()).unwrap();
    Workload::install(&mut sim, msgs, &WorkloadOpts::default()).unwrap();
    for f in faults {
        sim.schedule(*f);
    }
    sim.run(
        RunLimit {
            until: SimTime(200_000_000),
            max_events: 3_000,
        },
        &mut |_| {},
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn traffic_files_parse_or_are_refused_by_line(t in traffic_file()) {
        let plan = small();
        match parse_traffic(&t, &plan) {
            Ok(msgs) => {
                prop_assert!(!msgs.is_empty());
                prop_assert!(msgs.len() <= t.lines().count());
                for m in &msgs {
                    prop_assert!(m.src < plan.host_count() && m.dst < plan.host_count());
                    prop_assert!(m.src != m.dst && m.size <= MAX_MESSAGE_BYTES);
                }
                if msgs.iter().all(|m| m.start.0 < 1 << 50) {
                    prop_assert_eq!(parse_traffic(&format_traffic(&msgs), &plan).unwrap(), msgs.clone());
                }
                short_run(&msgs[..msgs.len().min(3)], &[]);
            }
            Err(e) => {
                prop_assert!(e.line.is_none_or(|l| l >= 1 && l <= t.lines().count()));
                prop_assert!(!e.message.is_empty() && !e.message.contains('\n'));
            }
        }
    }

    #[test]
    fn fault_files_parse_into_faults_the_plan_has(t in file()) {
        let plan = small();
        match parse_faults(&t, &plan) {
            Ok(faults) => {
                prop_assert!(faults.len() <= t.lines().count());
                for f in &faults {
                    prop_assert_eq!(f.check(&plan), Ok(()));
                }
                let msg = mrc_sim::traffic::Message {
                    src: 0,
                    dst: 3,
                    start: SimTime::ZERO,
                    size: 20_000,
                };
                short_run(&[msg], &faults);
            }
            Err(e) => {
                prop_assert!(e.line >= 1 && e.line <= t.lines().count());
                prop_assert!(!e.message.is_empty() && !e.message.contains('\n'));
            }
        }
    }

    #[test]
    fn plan_files_load_or_name_what_to_fix(
        line in 0..SMALL_PLAN_TOML.lines().count(),
        value in plan_value(),
        append in prop_oneof![3 => Just(String::new()), 1 => text()],
    ) {
        // The built-in plan with one line's value replaced, and random lines after it.
        let mut lines: Vec<String> = SMALL_PLAN_TOML.lines().map(str::to_owned).collect();
        if let Some((key, _)) = lines[line].clone().split_once('=') {
            lines[line] = format!("{key}= {value}");
        } else {
            lines[line] = value;
        }
        let toml = format!("{}\n{append}", lines.join("\n"));
        match Plan::from_toml(&toml, "p.toml") {
            Ok(plan) => {
                if let Ok(cfg) = SimConfig::from_plan(&plan)
                    && plan.host_count() * u32::from(plan.planes()) <= 64
                {
                    let _ = Sim::new(plan, cfg);
                }
            }
            Err(e) => {
                let shown = e.to_string();
                prop_assert!(shown.starts_with("p.toml"), "{}", shown);
                prop_assert!(!shown.contains('\n'), "{}", shown);
            }
        }
    }
}
