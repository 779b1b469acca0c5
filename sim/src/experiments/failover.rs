//! Experiment 2, failover: a T0–T1 link dies mid-transfer — time from the failure until the
//! affected flows' goodput is back, packets lost per affected QP, bytes retransmitted — and a
//! link that flaps every few milliseconds. White paper: path failures bypassed in a few tens
//! of µs; often just one packet lost per QP per flap (brief §6.2 #1, #7, #13).

use mrc_srv6::plan::{NodeId, SwitchId};
use serde_json::json;

use super::{
    ExpError, ExpOpts, Scenario, Transport, nonblocking_toml, require_intact, write_results,
};
use crate::fault::{Fault, FaultKind};
use crate::progress::Progress;
use crate::report::{Recorder, Report};
use crate::sim::{RunLimit, Sim};
use crate::svg::{Chart, Series};
use crate::time::SimTime;
use crate::traffic::{Message, permutation};
use crate::workload::Workload;

/// The numbers of the link-failure run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failure {
    pub fail_at_us: f64,
    /// First sample after the failure whose affected-flow goodput is back to 90 % of its
    /// level before the failure, minus the failure time.
    pub recovery_us: Option<f64>,
    /// Affected-flow goodput before the failure and its lowest sample after, Gb/s.
    pub before_gbps: f64,
    pub dip_gbps: f64,
    pub affected_qps: usize,
    pub packets_lost: u64,
    pub packets_lost_per_affected_qp: f64,
    pub retransmitted_packets: u64,
    pub retransmitted_bytes: u64,
    pub evs_retired: u64,
    pub completed: usize,
    pub flows: usize,
}

/// The numbers of the flapping-link run.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Flap {
    pub flaps: u32,
    pub period_us: f64,
    pub down_us: f64,
    pub packets_lost: u64,
    pub packets_lost_per_flap_per_qp: f64,
    pub retransmitted_packets: u64,
    pub mean_fct_us: f64,
    pub mean_fct_no_flap_us: f64,
    pub completed: usize,
    pub flows: usize,
}

/// A run's simulator, report and the watched hosts' goodput samples `(t_us, Gb/s)`.
type Watched = (Sim, Report, Vec<(f64, f64)>);

/// Data frames (Writes and probes; not SACKs or other control) the link between `a` and `b`
/// dropped, both ways: down, or to its random loss.
pub(super) fn data_lost_on(sim: &Sim, a: NodeId, b: NodeId) -> u64 {
    let one = |x, y| {
        sim.link_stats(x, y)
            .map_or(0, |s| s.down_dropped_data + s.lost_data)
    };
    one(a, b) + one(b, a)
}

/// Run a scenario with a per-sample observer of the bytes delivered to `watch` hosts.
fn run_watching(
    sc: &Scenario,
    watch: &[u32],
    every_ps: u64,
    progress: bool,
) -> Result<Watched, ExpError> {
    let plan = mrc_srv6::plan::Plan::from_toml(&sc.plan, &format!("<{}>", sc.name))?;
    let mut cfg = sc.cfg.clone();
    cfg.sample_every = Some(mrc_transport::Duration(every_ps / 1000));
    let mut sim = Sim::new(plan, cfg)?;
    let w = Workload::install(&mut sim, &sc.msgs, &sc.opts)?;
    for f in &sc.faults {
        sim.schedule(*f);
    }
    let mut rec = Recorder::default();
    let mut last = (SimTime::ZERO, 0u64);
    let mut rate = Vec::new();
    let mut bar = progress.then(|| Progress::new(&sc.name, sim.app_count()));
    let summary = sim.run(RunLimit::until(sc.limit), &mut |s| {
        rec.observe(s);
        let bytes: u64 = watch.iter().map(|&h| s.host_delivered_bytes(h)).sum();
        let dt = s.now().0.saturating_sub(last.0.0);
        if dt > 0 {
            rate.push((
                s.now().as_micros_f64(),
                (bytes - last.1) as f64 * 8000.0 / dt as f64,
            ));
        }
        last = (s.now(), bytes);
        if let Some(b) = bar.as_mut() {
            b.observe(s);
        }
    });
    if let Some(b) = bar {
        b.finish();
    }
    eprintln!("{}: {summary}", sc.name);
    let report = Report::build(&sc.name, &sim, summary.events, &w.records(), &rec);
    let out = super::Outcome {
        report,
        summary,
        verified: w.verify(),
        sim,
    };
    require_intact(&out, false)?;
    Ok((out.sim, out.report, rate))
}

/// The hosts of rack `rack`.
fn rack_hosts(plan: &mrc_srv6::plan::Plan, rack: u16) -> Vec<u32> {
    (0..plan.hosts_per_t0())
        .map(|k| plan.host_at(rack, k).0)
        .collect()
}

fn retransmits(r: &Report) -> u64 {
    r.plane_counters.iter().map(|p| p.retransmits).sum()
}

/// Run both parts.
pub fn run(o: &ExpOpts) -> Result<(Failure, Flap), ExpError> {
    let dir = o.out.join("failover");
    let (planes, racks, hpr, gbps, size) = if o.quick {
        (2u8, 4u16, 4u16, 50u32, 2u64 << 20)
    } else {
        (8, 4, 8, 50, 8 << 20)
    };
    let plan_text = nonblocking_toml("failover", planes, racks, hpr, gbps);
    let plan = mrc_srv6::plan::Plan::from_toml(&plan_text, "<failover>")?;
    let hosts = plan.host_count();
    let t = Transport::Mrc;
    let (a, b) = (
        NodeId::Switch(SwitchId::t0(0, 0)),
        NodeId::Switch(SwitchId::t1(0, 0)),
    );

    // Part 1: the link dies mid-transfer.
    let msgs = permutation(hosts, size, SimTime::ZERO, o.seed);
    let rack0: Vec<u32> = rack_hosts(&plan, 0);
    let affected: Vec<&Message> = msgs
        .iter()
        .filter(|m| rack0.contains(&m.src) || rack0.contains(&m.dst))
        .collect();
    let watch: Vec<u32> = affected.iter().map(|m| m.dst).collect();
    let fail_us = if o.quick { 30 } else { 60 };
    let sc = Scenario {
        name: "link failure".into(),
        plan: plan_text.clone(),
        cfg: t.sim_config(o.seed),
        msgs: msgs.clone(),
        opts: t.workload(1),
        faults: vec![Fault::at_us(fail_us, FaultKind::LinkDown(a, b))],
        limit: SimTime(100_000_000_000),
    };
    let (sim, report, rate) = run_watching(&sc, &watch, 2_000_000, o.progress)?;
    report.write(&dir.join("link_failure"))?;
    let fail_t = fail_us as f64;
    let before: Vec<f64> = rate
        .iter()
        .filter(|(t, _)| *t > fail_t / 2.0 && *t <= fail_t)
        .map(|x| x.1)
        .collect();
    let before_gbps = before.iter().sum::<f64>() / before.len().max(1) as f64;
    // After the failure and before the transfer's tail: flows slow down as they end (their
    // last packets, then nothing), which is no dip. The window stops at 90 % of the way from
    // the failure to the first completion.
    let first_done = report
        .flows
        .iter()
        .filter_map(|f| Some(f.start_us + f.fct_us?))
        .fold(f64::INFINITY, f64::min);
    let tail = fail_t + 0.9 * (first_done - fail_t);
    let after: Vec<&(f64, f64)> = rate
        .iter()
        .filter(|(t, _)| *t > fail_t && *t < tail)
        .collect();
    let dip_gbps = after.iter().map(|x| x.1).fold(f64::INFINITY, f64::min);
    // No dip below 90 %: nothing to recover from (0); else the first sample back above it.
    let recovery_us = match after.iter().position(|x| x.1 < 0.9 * before_gbps) {
        None => Some(0.0),
        Some(i) => after[i..]
            .iter()
            .find(|x| x.1 >= 0.9 * before_gbps)
            .map(|x| x.0 - fail_t),
    };
    let lost = data_lost_on(&sim, a, b) + sim.fabric_counters().lost_in_flight_data;
    let rtx = retransmits(&report);
    let mtu = u64::from(sim.endpoint(0).config().payload_mtu);
    let failure = Failure {
        fail_at_us: fail_t,
        recovery_us,
        before_gbps,
        dip_gbps: if dip_gbps.is_finite() { dip_gbps } else { 0.0 },
        affected_qps: affected.len(),
        packets_lost: lost,
        packets_lost_per_affected_qp: lost as f64 / affected.len().max(1) as f64,
        retransmitted_packets: rtx,
        retransmitted_bytes: rtx * mtu,
        evs_retired: report.plane_counters.iter().map(|p| p.evs_retired).sum(),
        completed: report.fct.completed,
        flows: report.fct.flows,
    };
    let chart = Chart {
        title: format!("Link t0-0-0 — t1-0-0 fails at {fail_t} µs: affected flows"),
        x_label: "time (µs)".into(),
        y_label: "goodput into affected flows' receivers (Gb/s)".into(),
        series: vec![Series {
            name: "affected flows".into(),
            points: rate,
        }],
        steps: false,
    };
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("link_failure_goodput.svg"), chart.to_svg())?;

    // Part 2: a link that flaps while long flows from rack 0 to rack 1 cross it.
    let (flow, period_us, down_us, flaps) = if o.quick {
        (8u64 << 20, 200u64, 50u64, 3u32)
    } else {
        (256 << 20, 2000, 500, 3)
    };
    let pairs = 2;
    let rack1 = rack_hosts(&plan, 1);
    let fmsgs: Vec<Message> = (0..pairs)
        .map(|i| Message {
            src: rack0[i],
            dst: rack1[i],
            start: SimTime::ZERO,
            size: flow,
        })
        .collect();
    let flap_faults = Fault::flap(
        a,
        b,
        SimTime(period_us * 1_000_000 / 4),
        period_us * 1_000_000,
        down_us * 1_000_000,
        flaps,
    );
    let mut runs = Vec::new();
    for (name, faults) in [("flapping link", flap_faults), ("no flap", Vec::new())] {
        let sc = Scenario {
            name: name.into(),
            plan: plan_text.clone(),
            cfg: t.sim_config(o.seed),
            msgs: fmsgs.clone(),
            opts: t.workload(1),
            faults,
            limit: SimTime(1_000_000_000_000),
        };
        let watch: Vec<u32> = fmsgs.iter().map(|m| m.dst).collect();
        let (sim, report, _) = run_watching(&sc, &watch, 20_000_000, o.progress)?;
        report.write(&dir.join(name.replace(' ', "_")))?;
        runs.push((
            data_lost_on(&sim, a, b) + sim.fabric_counters().lost_in_flight_data,
            report,
        ));
    }
    let flap = Flap {
        flaps,
        period_us: period_us as f64,
        down_us: down_us as f64,
        packets_lost: runs[0].0,
        packets_lost_per_flap_per_qp: runs[0].0 as f64 / f64::from(flaps) / pairs as f64,
        retransmitted_packets: retransmits(&runs[0].1),
        mean_fct_us: runs[0].1.fct.mean_us,
        mean_fct_no_flap_us: runs[1].1.fct.mean_us,
        completed: runs[0].1.fct.completed,
        flows: runs[0].1.fct.flows,
    };
    let table = format!(
        "# Failover ({hosts} hosts, {planes} planes × {gbps} Gb/s, MRC)\n\n\
         ## A T0–T1 link dies at {fail_t} µs (permutation, {} KiB per flow)\n\n\
         | recovery (µs) | affected-flow goodput before / dip (Gb/s) | affected QPs | data packets lost | lost per affected QP | retransmitted packets | retransmitted bytes | EVs retired | done |\n\
         |---|---|---|---|---|---|---|---|---|\n\
         | {} | {:.0} / {:.0} | {} | {} | {:.2} | {} | {} | {} | {}/{} |\n\n\
         ## A link flapping every {period_us} µs (down {down_us} µs, {flaps} times), {pairs} flows of {} MiB across it\n\n\
         | data packets lost | lost per flap per QP | retransmitted packets | mean FCT µs (flapping) | mean FCT µs (no flap) | done |\n\
         |---|---|---|---|---|---|\n\
         | {} | {:.2} | {} | {:.1} | {:.1} | {}/{} |\n",
        size / 1024,
        failure
            .recovery_us
            .map_or("not within run".into(), |r| format!("{r:.1}")),
        failure.before_gbps,
        failure.dip_gbps,
        failure.affected_qps,
        failure.packets_lost,
        failure.packets_lost_per_affected_qp,
        failure.retransmitted_packets,
        failure.retransmitted_bytes,
        failure.evs_retired,
        failure.completed,
        failure.flows,
        flow >> 20,
        flap.packets_lost,
        flap.packets_lost_per_flap_per_qp,
        flap.retransmitted_packets,
        flap.mean_fct_us,
        flap.mean_fct_no_flap_us,
        flap.completed,
        flap.flows,
    );
    write_results(
        &dir,
        &table,
        &json!({"experiment": "failover", "failure": failure, "flap": flap}),
    )?;
    Ok((failure, flap))
}
