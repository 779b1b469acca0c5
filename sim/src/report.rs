//! Reports of a run: per-flow completion times (min, median, p99, max), delivered bytes over
//! time per plane, queued bytes by hop over time, per-EV health timelines, fabric and engine
//! counters; written as a text table, as JSON for tooling and as SVG plots. Nothing here reads a clock: the same run gives
//! byte-identical files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use mrc_transport::ev::EvState;
use mrc_transport::stats::PlaneStats;

use crate::fabric::QueueTier;
use crate::sim::{FabricCounters, Sim};
use crate::svg::{Chart, Series, decimate};

/// Points kept per time series in reports and plots (longer series are averaged down).
const MAX_SERIES_POINTS: usize = 500;
use crate::time::SimTime;
use crate::workload::FlowRecord;

/// Collects periodic samples from a run (use as, or inside, the observer).
#[derive(Debug, Clone, Default)]
pub struct Recorder {
    /// (time, cumulative data bytes delivered per plane).
    pub samples: Vec<(SimTime, Vec<u64>)>,
    /// (time, queued bytes by hop in [`QueueTier::ALL`]'s order).
    pub queues: Vec<(SimTime, [QueueLevels; 4])>,
}

impl Recorder {
    /// Take one sample.
    pub fn observe(&mut self, sim: &Sim) {
        if self.samples.last().is_some_and(|(t, _)| *t == sim.now()) {
            return;
        }
        self.samples
            .push((sim.now(), sim.plane_delivered_bytes().to_vec()));
        let mut by_tier: [Vec<u64>; 4] = Default::default();
        sim.queued_bytes_by_tier(&mut by_tier);
        self.queues
            .push((sim.now(), by_tier.map(|mut v| QueueLevels::of(&mut v))));
    }

    /// The queue-occupancy series of each hop, summarised.
    pub fn queue_rows(&self) -> Vec<QueueRow> {
        let n = self.queues.len().max(1) as f64;
        QueueTier::ALL
            .iter()
            .enumerate()
            .map(|(i, tier)| {
                let at = |f: fn(&QueueLevels) -> u64| -> Vec<(f64, f64)> {
                    let pts: Vec<(f64, f64)> = self
                        .queues
                        .iter()
                        .map(|(t, q)| (t.as_micros_f64(), f(&q[i]) as f64 / 1000.0))
                        .collect();
                    decimate(&pts, MAX_SERIES_POINTS)
                };
                let sum = |f: fn(&QueueLevels) -> u64| -> f64 {
                    self.queues
                        .iter()
                        .map(|(_, q)| f(&q[i]) as f64)
                        .sum::<f64>()
                        / n
                };
                QueueRow {
                    tier: tier.name().to_owned(),
                    mean_p50_bytes: sum(|l| l.p50),
                    mean_p99_bytes: sum(|l| l.p99),
                    max_bytes: self.queues.iter().map(|(_, q)| q[i].max).max().unwrap_or(0),
                    p99_kb: at(|l| l.p99),
                    max_kb: at(|l| l.max),
                }
            })
            .collect()
    }

    /// Delivered Gb/s per plane between consecutive samples: `(plane, [(t_us, gbps)])`.
    pub fn plane_rates(&self) -> Vec<Vec<(f64, f64)>> {
        let planes = self.samples.first().map_or(0, |(_, v)| v.len());
        let mut out = vec![Vec::new(); planes];
        for w in self.samples.windows(2) {
            let ((t0, a), (t1, b)) = (&w[0], &w[1]);
            let dt_ps = (t1.0 - t0.0) as f64;
            if dt_ps <= 0.0 {
                continue;
            }
            for p in 0..planes {
                // bytes * 8 / ps * 1e12 / 1e9 = bytes * 8000 / ps Gb/s.
                let gbps = (b[p] - a[p]) as f64 * 8000.0 / dt_ps;
                out[p].push((t1.as_micros_f64(), gbps));
            }
        }
        out
    }
}

/// The `q` quantile of `sorted` by nearest rank (a real sample, never an interpolation);
/// `None` when it is empty.
fn nearest_rank<T: Copy>(sorted: &[T], q: f64) -> Option<T> {
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len().max(1));
    sorted.get(rank - 1).copied()
}

/// Queued bytes over a set of ports at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct QueueLevels {
    pub p50: u64,
    pub p99: u64,
    pub max: u64,
}

impl QueueLevels {
    /// The levels of `v` (reordered); all zero when it is empty.
    pub fn of(v: &mut [u64]) -> Self {
        v.sort_unstable();
        let pick = |q: f64| nearest_rank(v, q).unwrap_or(0);
        Self {
            p50: pick(0.5),
            p99: pick(0.99),
            max: v.last().copied().unwrap_or(0),
        }
    }
}

/// Completion-time statistics, microseconds.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize)]
pub struct FctStats {
    pub flows: usize,
    pub completed: usize,
    pub min_us: f64,
    pub median_us: f64,
    pub p99_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
}

impl FctStats {
    /// Statistics of the flows that completed.
    pub fn of(records: &[FlowRecord]) -> Self {
        let mut v: Vec<f64> = records
            .iter()
            .filter_map(|r| r.fct_ns().map(|n| n as f64 / 1000.0))
            .collect();
        v.sort_by(f64::total_cmp);
        let pick = |q: f64| nearest_rank(&v, q).unwrap_or(0.0);
        Self {
            flows: records.len(),
            completed: v.len(),
            min_us: v.first().copied().unwrap_or(0.0),
            median_us: pick(0.5),
            p99_us: pick(0.99),
            max_us: v.last().copied().unwrap_or(0.0),
            mean_us: if v.is_empty() {
                0.0
            } else {
                v.iter().sum::<f64>() / v.len() as f64
            },
        }
    }
}

/// One flow in the report.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FlowRow {
    pub id: u32,
    pub src: u32,
    pub dst: u32,
    pub bytes: u64,
    pub start_us: f64,
    pub fct_us: Option<f64>,
    /// Payload bits per second over the flow's completion time.
    pub goodput_gbps: Option<f64>,
}

/// One EV health change.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct EvRow {
    pub t_us: f64,
    pub host: u32,
    pub qpn: u32,
    pub ev: u16,
    pub plane: u8,
    pub from: String,
    pub to: String,
}

/// The queues of one hop over a run (issue #14): at every sample, the median, 99th percentile
/// and largest queue over the hop's ports; here their means over the samples, the largest
/// queue seen at a sample, and the series.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct QueueRow {
    pub tier: String,
    pub mean_p50_bytes: f64,
    pub mean_p99_bytes: f64,
    pub max_bytes: u64,
    /// `(t_us, KB)`: the 99th percentile over the hop's ports.
    pub p99_kb: Vec<(f64, f64)>,
    /// `(t_us, KB)`: the largest queue of the hop.
    pub max_kb: Vec<(f64, f64)>,
}

/// Engine counters of one plane, summed over every host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct PlaneRow {
    pub plane: u8,
    pub packets_sent: u64,
    pub bytes_sent: u64,
    pub retransmits: u64,
    pub trims: u64,
    pub nacks: u64,
    pub ecn: u64,
    pub timeouts: u64,
    pub evs_retired: u64,
    pub evs_restored: u64,
}

/// Everything a run reports.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Report {
    pub name: String,
    pub plan: String,
    pub hosts: u32,
    pub planes: u8,
    pub seed: u64,
    pub end_us: f64,
    pub events: u64,
    pub fct: FctStats,
    pub flows: Vec<FlowRow>,
    /// `[plane][(t_us, Gb/s)]`: data bytes delivered to hosts per sampling interval.
    pub plane_gbps: Vec<Vec<(f64, f64)>>,
    /// Queued bytes by hop (T0 uplinks, T1 downlinks, ...) over the run.
    pub queues: Vec<QueueRow>,
    pub ev_changes: Vec<EvRow>,
    pub fabric: FabricCounters,
    pub plane_counters: Vec<PlaneRow>,
    /// Endpoint drops by cause, summed over hosts (causes with zero left out).
    pub drops: BTreeMap<String, u64>,
}

fn state(s: EvState) -> String {
    s.to_string()
}

impl Report {
    /// The report of `sim` after a run of `events` events, its flows and samples.
    pub fn build(
        name: &str,
        sim: &Sim,
        events: u64,
        records: &[FlowRecord],
        rec: &Recorder,
    ) -> Self {
        let planes = sim.plan().planes();
        let flows = records
            .iter()
            .map(|r| {
                let fct = r.fct_ns().map(|n| n as f64 / 1000.0);
                FlowRow {
                    id: r.id,
                    src: r.src,
                    dst: r.dst,
                    bytes: r.size,
                    start_us: r.start.as_micros_f64(),
                    fct_us: fct,
                    goodput_gbps: fct
                        .filter(|&f| f > 0.0)
                        .map(|f| r.size as f64 * 8.0 / (f * 1000.0)),
                }
            })
            .collect();
        let ev_changes = sim
            .ev_changes()
            .iter()
            .map(|c| EvRow {
                t_us: c.at.as_micros_f64(),
                host: c.host,
                qpn: c.qpn.0,
                ev: c.ev,
                plane: c.plane,
                from: state(c.from),
                to: state(c.to),
            })
            .collect();
        let mut plane_counters: Vec<PlaneRow> = (0..planes)
            .map(|plane| PlaneRow {
                plane,
                ..PlaneRow::default()
            })
            .collect();
        let mut drops = BTreeMap::new();
        for h in 0..sim.host_count() {
            let ep = sim.endpoint(h);
            for (p, row) in plane_counters.iter_mut().enumerate() {
                let s: PlaneStats = ep.plane_stats(p as u8).unwrap_or_default();
                row.packets_sent += s.packets_sent;
                row.bytes_sent += s.bytes_sent;
                row.retransmits += s.retransmits;
                row.trims += s.trims;
                row.nacks += s.nacks;
                row.ecn += s.ecn;
                row.timeouts += s.timeouts;
                row.evs_retired += s.evs_retired;
                row.evs_restored += s.evs_restored;
            }
            for (r, n) in ep.stats().drops.iter() {
                if n > 0 {
                    *drops.entry(r.name().to_owned()).or_insert(0) += n;
                }
            }
        }
        Self {
            name: name.to_owned(),
            plan: sim.plan().name().to_owned(),
            hosts: sim.host_count(),
            planes,
            seed: sim.config().seed,
            end_us: sim.now().as_micros_f64(),
            events,
            fct: FctStats::of(records),
            flows,
            plane_gbps: rec
                .plane_rates()
                .iter()
                .map(|pts| decimate(pts, MAX_SERIES_POINTS))
                .collect(),
            queues: rec.queue_rows(),
            ev_changes,
            fabric: sim.fabric_counters(),
            plane_counters,
            drops,
        }
    }

    /// The summary table (text).
    pub fn table(&self) -> String {
        let mut s = String::new();
        let f = &self.fct;
        let _ = writeln!(
            s,
            "# {}: plan {} ({} hosts, {} planes), seed {}, virtual end {:.1} µs, {} events",
            self.name, self.plan, self.hosts, self.planes, self.seed, self.end_us, self.events
        );
        let _ = writeln!(
            s,
            "flows {:>6} done {:>6}  FCT µs  min {:>9.2}  median {:>9.2}  p99 {:>9.2}  max {:>9.2}",
            f.flows, f.completed, f.min_us, f.median_us, f.p99_us, f.max_us
        );
        let _ = writeln!(
            s,
            "plane  pkts_sent     bytes_sent  rtx     trims  nacks   ecn     timeouts retired restored"
        );
        for p in &self.plane_counters {
            let _ = writeln!(
                s,
                "{:>5}  {:>9}  {:>13}  {:>6}  {:>6}  {:>6}  {:>6}  {:>8}  {:>6}  {:>7}",
                p.plane,
                p.packets_sent,
                p.bytes_sent,
                p.retransmits,
                p.trims,
                p.nacks,
                p.ecn,
                p.timeouts,
                p.evs_retired,
                p.evs_restored
            );
        }
        let _ = write!(s, "queues KB, mean p50 / mean p99 / max over ports:");
        for q in &self.queues {
            let _ = write!(
                s,
                "  {} {:.1}/{:.1}/{:.1}",
                q.tier,
                q.mean_p50_bytes / 1000.0,
                q.mean_p99_bytes / 1000.0,
                q.max_bytes as f64 / 1000.0
            );
        }
        s.push('\n');
        let c = &self.fabric;
        let _ = writeln!(
            s,
            "fabric: trimmed {} ecn_marked {} tail_dropped {} lost {} down_dropped {} in_flight_lost {} dead_switch_dropped {}",
            c.switch_ports.trimmed,
            c.switch_ports.ecn_marked,
            c.switch_ports.tail_dropped,
            c.switch_ports.lost + c.host_ports.lost,
            c.switch_ports.down_dropped + c.host_ports.down_dropped,
            c.lost_in_flight,
            c.switches.dead_dropped
        );
        s
    }

    /// The flows as a text table.
    pub fn flow_table(&self) -> String {
        let mut s = String::from("id\tsrc\tdst\tbytes\tstart_us\tfct_us\tgoodput_gbps\n");
        for r in &self.flows {
            let _ = writeln!(
                s,
                "{}\t{}\t{}\t{}\t{:.3}\t{}\t{}",
                r.id,
                r.src,
                r.dst,
                r.bytes,
                r.start_us,
                r.fct_us.map_or("-".into(), |v| format!("{v:.3}")),
                r.goodput_gbps.map_or("-".into(), |v| format!("{v:.2}"))
            );
        }
        s
    }

    /// Charts: FCT CDF, delivered Gb/s per plane over time, EVs out of service over time.
    pub fn charts(&self) -> Vec<(&'static str, Chart)> {
        let mut fcts: Vec<f64> = self.flows.iter().filter_map(|r| r.fct_us).collect();
        fcts.sort_by(f64::total_cmp);
        let n = fcts.len().max(1) as f64;
        let cdf: Vec<(f64, f64)> = fcts
            .iter()
            .enumerate()
            .map(|(i, &f)| (f, (i + 1) as f64 / n))
            .collect();
        let mut bad = 0i64;
        let mut timeline = vec![(0.0, 0.0)];
        for c in &self.ev_changes {
            if c.to == "ASSUMED_BAD" {
                bad += 1;
            }
            if c.from == "ASSUMED_BAD" {
                bad -= 1;
            }
            timeline.push((c.t_us, bad.max(0) as f64));
        }
        timeline.push((self.end_us, bad.max(0) as f64));
        let timeline = if timeline.len() > 2 * MAX_SERIES_POINTS {
            decimate(&timeline, MAX_SERIES_POINTS)
        } else {
            timeline
        };
        let cdf = decimate(&cdf, MAX_SERIES_POINTS);
        vec![
            (
                "fct_cdf.svg",
                Chart {
                    title: format!("{}: flow completion times", self.name),
                    x_label: "FCT (µs)".into(),
                    y_label: "fraction of flows".into(),
                    series: vec![Series {
                        name: "CDF".into(),
                        points: cdf,
                    }],
                    steps: true,
                },
            ),
            (
                "plane_goodput.svg",
                Chart {
                    title: format!("{}: data delivered per plane", self.name),
                    x_label: "time (µs)".into(),
                    y_label: "Gb/s (all hosts)".into(),
                    series: self
                        .plane_gbps
                        .iter()
                        .enumerate()
                        .map(|(p, pts)| Series {
                            name: format!("plane {p}"),
                            points: pts.clone(),
                        })
                        .collect(),
                    steps: false,
                },
            ),
            (
                "queues.svg",
                Chart {
                    title: format!("{}: queues by hop (99th percentile over ports)", self.name),
                    x_label: "time (µs)".into(),
                    y_label: "KB queued".into(),
                    series: self
                        .queues
                        .iter()
                        .map(|q| Series {
                            name: q.tier.clone(),
                            points: q.p99_kb.clone(),
                        })
                        .collect(),
                    steps: false,
                },
            ),
            (
                "ev_states.svg",
                Chart {
                    title: format!("{}: EVs retired (ASSUMED_BAD)", self.name),
                    x_label: "time (µs)".into(),
                    y_label: "EVs".into(),
                    series: vec![Series {
                        name: "assumed bad".into(),
                        points: timeline,
                    }],
                    steps: true,
                },
            ),
        ]
    }

    /// Write `report.json`, `summary.txt`, `flows.tsv` and the SVG charts under `dir`.
    pub fn write(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        let json = serde_json::to_string_pretty(self).map_err(std::io::Error::other)?;
        std::fs::write(dir.join("report.json"), json + "\n")?;
        std::fs::write(dir.join("summary.txt"), self.table())?;
        std::fs::write(dir.join("flows.tsv"), self.flow_table())?;
        for (file, chart) in self.charts() {
            std::fs::write(dir.join(file), chart.to_svg())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_levels_pick_real_ports() {
        let mut v: Vec<u64> = (1..=200).rev().collect();
        let l = QueueLevels::of(&mut v);
        assert_eq!((l.p50, l.p99, l.max), (100, 198, 200));
        assert_eq!(QueueLevels::of(&mut []), QueueLevels::default());
    }

    #[test]
    fn percentiles_pick_real_samples() {
        let rec = |i: u32, fct: u64| {
            let mut r = FlowRecord::for_test(i, 1000);
            r.end = Some(SimTime(fct * 1_000_000));
            r
        };
        let rs: Vec<FlowRecord> = (1..=100).map(|i| rec(i, u64::from(i))).collect();
        let f = FctStats::of(&rs);
        assert_eq!(
            (f.min_us, f.median_us, f.p99_us, f.max_us),
            (1.0, 50.0, 99.0, 100.0)
        );
        assert_eq!(f.completed, 100);
    }
}
