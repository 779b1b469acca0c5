//! Fault soak (docs/security.md, "Fault soak"): seeded randomized campaigns on a small
//! two-plane fabric. Each seed draws a workload (a permutation plus random messages of
//! random sizes and start times) and a fault schedule (loss, duplication, reordering and
//! corruption on every link; gray links, flapping and dead links, switches that stop, host
//! ports that go down), runs it to completion and verifies every byte of every message, every
//! completion, and that no engine's memory grew.
//!
//! Hard faults (links, switches, ports) strike one plane per seed, so the fabric always keeps
//! a way between every pair of hosts; the random impairments hit both planes and heal at
//! [`HEAL_AT_US`]. A seed fails when a message is not delivered intact by [`LIMIT_MS`] of
//! virtual time, a completion carries an error, or an engine's heap moved. The same seed
//! replays the same run, event for event.

use mrc_srv6::plan::{HostId, NodeId, Plan, SwitchId};

use crate::SimConfig;
use crate::fault::{Fault, FaultKind, Impairment};
use crate::rng::SimRng;
use crate::sim::{RunLimit, Sim};
use crate::time::SimTime;
use crate::traffic::{Message, permutation};
use crate::workload::{Workload, WorkloadOpts};

/// 2 planes × 2 racks × 2 spines × 4 hosts per rack, 100 Gb/s, small buffers (so trimming
/// happens too).
pub const SOAK_PLAN: &str = r#"
name = "soak8"
planes = 2
t0_per_plane = 2
t1_per_plane = 2
hosts_per_t0 = 4
usid_block = "fcbb:bb00::/32"
host_usids = "downlink"
mtu = 9000

[links.host]
speed_gbps = 100
latency_ns = 500
buffer_bytes = 131072
ecn_min_bytes = 32768
ecn_max_bytes = 98304

[links.fabric]
speed_gbps = 100
latency_ns = 500
buffer_bytes = 131072
ecn_min_bytes = 32768
ecn_max_bytes = 98304
"#;

/// Random impairments end here (hard faults may last for the whole run).
pub const HEAL_AT_US: u64 = 3_000;
/// Virtual time a seed's workload must finish in.
pub const LIMIT_MS: u64 = 400;

/// Faults a seed scheduled, by kind, and what the fabric did with them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct FaultCounts {
    /// Scheduled: links taken down (flaps count each time), switches stopped, host ports
    /// taken down, links given random loss, and the fabric-wide impairments.
    pub link_downs: u64,
    pub switch_stops: u64,
    pub port_downs: u64,
    pub lossy_links: u64,
    pub impairments: u64,
    /// Done to frames: lost at random, lost to a down link, duplicated, corrupted,
    /// reordered, trimmed, dropped by a dead switch.
    pub frames_lost: u64,
    pub frames_down_dropped: u64,
    pub frames_duplicated: u64,
    pub frames_corrupted: u64,
    pub frames_reordered: u64,
    pub frames_trimmed: u64,
    pub frames_dead_switch: u64,
    /// Corrupted frames the engines refused on their ICRC.
    pub bad_icrc_dropped: u64,
}

impl FaultCounts {
    /// Scheduled faults, every kind together.
    pub const fn scheduled(&self) -> u64 {
        self.link_downs + self.switch_stops + self.port_downs + self.lossy_links + self.impairments
    }

    /// Frames a fault touched, every kind together.
    pub const fn frames(&self) -> u64 {
        self.frames_lost
            + self.frames_down_dropped
            + self.frames_duplicated
            + self.frames_corrupted
            + self.frames_reordered
            + self.frames_trimmed
            + self.frames_dead_switch
    }

    fn add(&mut self, o: &Self) {
        self.link_downs += o.link_downs;
        self.switch_stops += o.switch_stops;
        self.port_downs += o.port_downs;
        self.lossy_links += o.lossy_links;
        self.impairments += o.impairments;
        self.frames_lost += o.frames_lost;
        self.frames_down_dropped += o.frames_down_dropped;
        self.frames_duplicated += o.frames_duplicated;
        self.frames_corrupted += o.frames_corrupted;
        self.frames_reordered += o.frames_reordered;
        self.frames_trimmed += o.frames_trimmed;
        self.frames_dead_switch += o.frames_dead_switch;
        self.bad_icrc_dropped += o.bad_icrc_dropped;
    }
}

/// What one seed drew: its messages and fault schedule.
#[derive(Debug, Clone)]
pub struct SeedPlan {
    pub seed: u64,
    pub messages: Vec<Message>,
    pub faults: Vec<Fault>,
    pub counts: FaultCounts,
}

/// How one seed went.
#[derive(Debug, Clone)]
pub struct SeedReport {
    pub seed: u64,
    pub messages: usize,
    pub bytes_verified: u64,
    pub faults: FaultCounts,
    pub events: u64,
    pub end: SimTime,
    /// `Err`: why the seed failed.
    pub outcome: Result<(), String>,
}

/// The soak fabric.
pub fn soak_plan() -> Plan {
    Plan::from_toml(SOAK_PLAN, "<soak>").expect("the soak plan is valid")
}

fn t0(plane: u8, rack: u16) -> NodeId {
    NodeId::Switch(SwitchId::t0(plane, rack))
}

fn t1(plane: u8, spine: u16) -> NodeId {
    NodeId::Switch(SwitchId::t1(plane, spine))
}

fn us(x: u64) -> SimTime {
    SimTime(x * 1_000_000)
}

/// A probability in `[0, max)` drawn half the time (else 0).
fn sometimes(rng: &mut SimRng, max: f64) -> f64 {
    if rng.chance(0.5) {
        rng.unit() * max
    } else {
        0.0
    }
}

/// Draw seed `seed`'s workload and faults on `plan`.
pub fn draw(plan: &Plan, seed: u64) -> SeedPlan {
    let mut rng = SimRng::new(seed ^ 0x50a4_50a4);
    let hosts = plan.host_count();
    let kib = |rng: &mut SimRng, max: u64| 1 + rng.below(max * 1024);
    // A permutation, then random messages: odd sizes, some tiny, some empty.
    let size = kib(&mut rng, 256);
    let mut messages = permutation(hosts, size, SimTime::ZERO, seed);
    for _ in 0..4 + rng.below(8) {
        let src = rng.below(u64::from(hosts)) as u32;
        let dst = (src + 1 + rng.below(u64::from(hosts) - 1) as u32) % hosts;
        let size = match rng.below(8) {
            0 => 0,
            1 => 1 + rng.below(64),
            _ => kib(&mut rng, 192),
        };
        messages.push(Message {
            src,
            dst,
            start: us(rng.below(300)),
            size,
        });
    }

    let mut faults = Vec::new();
    let mut c = FaultCounts::default();
    let heal = |f: &mut Vec<Fault>, kind| f.push(Fault::at_us(HEAL_AT_US, kind));
    // Impairments on every link of both planes.
    let loss = sometimes(&mut rng, 0.02);
    if loss > 0.0 {
        faults.push(Fault::at_us(0, FaultKind::LossEverywhere(loss)));
        heal(&mut faults, FaultKind::LossEverywhere(0.0));
        c.impairments += 1;
    }
    let impairments = [
        Impairment::Duplicate(sometimes(&mut rng, 0.02)),
        Impairment::Corrupt(sometimes(&mut rng, 0.01)),
        Impairment::Reorder {
            prob: sometimes(&mut rng, 0.1),
            max_delay_ps: 1_000_000 + rng.below(4_000_000),
        },
    ];
    for imp in impairments {
        let (on, off) = match imp {
            Impairment::Duplicate(p) => (p, Impairment::Duplicate(0.0)),
            Impairment::Corrupt(p) => (p, Impairment::Corrupt(0.0)),
            Impairment::Reorder { prob, .. } => (
                prob,
                Impairment::Reorder {
                    prob: 0.0,
                    max_delay_ps: 0,
                },
            ),
        };
        if on > 0.0 {
            faults.push(Fault::at_us(0, FaultKind::Impair(None, imp)));
            heal(&mut faults, FaultKind::Impair(None, off));
            c.impairments += 1;
        }
    }

    // Hard faults, all in one plane.
    let v = rng.below(u64::from(plan.planes())) as u8;
    let racks = plan.t0_per_plane();
    let spines = plan.t1_per_plane();
    let fabric_link = |rng: &mut SimRng| {
        (
            t0(v, rng.below(u64::from(racks)) as u16),
            t1(v, rng.below(u64::from(spines)) as u16),
        )
    };
    if rng.chance(0.4) {
        let (a, b) = fabric_link(&mut rng);
        let p = 0.2 + rng.unit() * 0.3;
        faults.push(Fault::at_us(rng.below(200), FaultKind::LinkLoss(a, b, p)));
        c.lossy_links += 1;
    }
    for _ in 0..rng.below(3) {
        let (a, b) = if rng.chance(0.3) {
            let h = HostId(rng.below(u64::from(plan.host_count())) as u32);
            (NodeId::Host(h), t0(v, plan.rack_of(h)))
        } else {
            fabric_link(&mut rng)
        };
        let period = 20 + rng.below(200);
        let down = 1 + rng.below(period - 1);
        let count = 1 + rng.below(5) as u32;
        faults.extend(Fault::flap(
            a,
            b,
            us(rng.below(400)),
            period * 1_000_000,
            down * 1_000_000,
            count,
        ));
        c.link_downs += u64::from(count);
    }
    if rng.chance(0.3) {
        let (a, b) = fabric_link(&mut rng);
        faults.push(Fault::at_us(rng.below(300), FaultKind::LinkDown(a, b)));
        c.link_downs += 1;
    }
    if rng.chance(0.4) {
        // A spine or a leaf of the plane stops forwarding, silently; maybe for good.
        let s = if rng.chance(0.5) {
            SwitchId::t1(v, rng.below(u64::from(spines)) as u16)
        } else {
            SwitchId::t0(v, rng.below(u64::from(racks)) as u16)
        };
        let at = rng.below(300);
        faults.push(Fault::at_us(at, FaultKind::SwitchStop(s)));
        if rng.chance(0.5) {
            faults.push(Fault::at_us(
                at + 1 + rng.below(2_000),
                FaultKind::SwitchStart(s),
            ));
        }
        c.switch_stops += 1;
    }
    if rng.chance(0.4) {
        let h = rng.below(u64::from(plan.host_count())) as u32;
        let at = rng.below(300);
        faults.push(Fault::at_us(at, FaultKind::HostPortDown(h, v)));
        if rng.chance(0.7) {
            faults.push(Fault::at_us(
                at + 1 + rng.below(2_000),
                FaultKind::HostPortUp(h, v),
            ));
        }
        c.port_downs += 1;
    }
    SeedPlan {
        seed,
        messages,
        faults,
        counts: c,
    }
}

/// Run seed `seed` on the soak fabric and verify it.
pub fn run_seed(seed: u64) -> SeedReport {
    let plan = soak_plan();
    let p = draw(&plan, seed);
    let cfg = SimConfig {
        seed,
        ..SimConfig::default()
    };
    let mut report = SeedReport {
        seed,
        messages: p.messages.len(),
        bytes_verified: 0,
        faults: p.counts,
        events: 0,
        end: SimTime::ZERO,
        outcome: Ok(()),
    };
    let mut sim = match Sim::new(plan, cfg) {
        Ok(s) => s,
        Err(e) => {
            report.outcome = Err(e.to_string());
            return report;
        }
    };
    let w = match Workload::install(&mut sim, &p.messages, &WorkloadOpts::default()) {
        Ok(w) => w,
        Err(e) => {
            report.outcome = Err(e.to_string());
            return report;
        }
    };
    let heap: Vec<usize> = (0..sim.host_count())
        .map(|h| sim.endpoint(h).heap_bytes())
        .collect();
    for f in &p.faults {
        sim.schedule(*f);
    }
    let limit = RunLimit {
        until: SimTime(LIMIT_MS * 1_000_000_000),
        max_events: 50_000_000,
    };
    let run = sim.run(limit, &mut |_| {});
    report.events = run.events;
    report.end = run.end;
    let fc = sim.fabric_counters();
    let f = &mut report.faults;
    for ports in [&fc.switch_ports, &fc.host_ports] {
        f.frames_lost += ports.lost;
        f.frames_down_dropped += ports.down_dropped;
        f.frames_duplicated += ports.duplicated;
        f.frames_corrupted += ports.corrupted;
        f.frames_reordered += ports.reordered;
        f.frames_trimmed += ports.trimmed;
    }
    f.frames_lost += fc.lost_in_flight;
    f.frames_dead_switch = fc.switches.dead_dropped;
    f.bad_icrc_dropped = (0..sim.host_count())
        .map(|h| {
            sim.endpoint(h)
                .stats()
                .drops
                .get(mrc_transport::stats::DropReason::BadIcrc)
        })
        .sum();
    report.outcome = check(&sim, &w, run.apps_done, &heap).map(|bytes| {
        report.bytes_verified = bytes;
    });
    report
}

/// Every message intact and completed, every engine's heap where it started.
fn check(sim: &Sim, w: &Workload, done: bool, heap: &[usize]) -> Result<u64, String> {
    let v = w.verify()?;
    if !done {
        return Err(format!("not done by {LIMIT_MS} ms of virtual time"));
    }
    for (h, &before) in heap.iter().enumerate() {
        let now = sim.endpoint(h as u32).heap_bytes();
        if now != before {
            return Err(format!("host {h}: heap went from {before} to {now} bytes"));
        }
    }
    Ok(v.bytes)
}

/// Totals of a campaign.
#[derive(Debug, Clone, Default)]
pub struct Campaign {
    pub seeds_run: u64,
    pub seeds_failed: u64,
    /// Messages of the seeds that passed (each verified byte for byte).
    pub messages_verified: u64,
    pub bytes_verified: u64,
    pub faults: FaultCounts,
    pub events: u64,
    /// The first seed that failed, to replay.
    pub first_failure: Option<SeedReport>,
}

impl Campaign {
    /// Fold one seed's report in.
    pub fn add(&mut self, r: &SeedReport) {
        self.seeds_run += 1;
        self.bytes_verified += r.bytes_verified;
        self.faults.add(&r.faults);
        self.events += r.events;
        if r.outcome.is_ok() {
            self.messages_verified += r.messages as u64;
        } else {
            self.seeds_failed += 1;
            if self.first_failure.is_none() {
                self.first_failure = Some(r.clone());
            }
        }
    }
}

/// Run seeds `first, first + 1, ...` while `go_on(seeds run so far)` holds, calling
/// `on_seed` after each.
pub fn campaign(
    first: u64,
    go_on: &mut dyn FnMut(u64) -> bool,
    on_seed: &mut dyn FnMut(&SeedReport),
) -> Campaign {
    let mut c = Campaign::default();
    let mut seed = first;
    while go_on(c.seeds_run) {
        let r = run_seed(seed);
        c.add(&r);
        on_seed(&r);
        seed = seed.wrapping_add(1);
    }
    c
}
