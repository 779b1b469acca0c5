//! What a traffic-pattern run shows beyond the perftest row (docs/mrc-perf.md, "Testing a
//! fabric"): every flow's Gb/s as an N × N matrix (text, JSON and an SVG heatmap), a
//! per-host table, and for the paced modes the spread of every burst's start across flows.
//!
//! - A flow's Gb/s: its payload bytes known complete over its own time (first post to last
//!   completion of its QPs), as perftest measures one pair.
//! - A burst's start on a QP: when its first message was posted (the sender's release; in
//!   the simulator the engine puts the first packet on the wire in the same instant when the
//!   QP's queue is empty, as it is between bursts). The spread of burst k is the latest start
//!   less the earliest over every sending QP: 0 when every flow is in step, up to a period
//!   when flows run free.

use std::fmt::Write as _;

use mrc_transport::Instant;

use super::app::QpRecord;
use super::backend::SizeOutcome;
use super::settings::{Pattern, Settings};
use super::traffic::Wiring;

/// One direction of one flow.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct FlowResult {
    pub src: u32,
    pub dst: u32,
    pub victim: bool,
    pub bytes: u64,
    pub elapsed_ns: u64,
    pub gbps: f64,
}

/// One host's line of the per-host table.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct HostRow {
    pub host: u32,
    /// Payload bytes this host's sending QPs completed, and its peers' completed into it.
    pub sent_bytes: u64,
    pub received_bytes: u64,
    pub out_gbps: f64,
    pub in_gbps: f64,
    pub retransmits: u64,
    pub trims: u64,
    pub ecn: u64,
    pub evs_retired: u64,
}

/// The start spread of one burst across flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BurstSpread {
    pub burst: u64,
    /// Sending QPs that started this burst.
    pub qps: u32,
    pub spread_ns: u64,
}

/// Everything a pattern run reports for one message size.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct PatternReport {
    pub size: u64,
    pub pattern: String,
    pub mode: &'static str,
    /// The hosts in matrix order.
    pub hosts: Vec<u32>,
    pub flows: Vec<FlowResult>,
    /// `matrix[i][j]`: Gb/s from `hosts[i]` to `hosts[j]`.
    pub matrix_gbps: Vec<Vec<f64>>,
    pub per_host: Vec<HostRow>,
    /// Paced modes in iterations mode: every burst's spread.
    pub bursts: Vec<BurstSpread>,
    /// One message on one host's line (all planes), ns: the yardstick of "in step".
    pub message_serialisation_ns: f64,
}

fn gbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        0.0
    } else {
        bytes as f64 * 8.0 / ns as f64
    }
}

/// First post to last completion of some QPs, ns.
fn span<'a>(recs: impl Iterator<Item = &'a QpRecord> + Clone) -> u64 {
    let first = recs.clone().filter_map(|r| r.first_post).min();
    let last = recs.filter_map(|r| r.last_completion).max();
    match (first, last) {
        (Some(a), Some(b)) => b.saturating_since(a).as_nanos(),
        _ => 0,
    }
}

/// Start times of each burst of one QP (post times of the first message of each burst, or
/// of the first post in each on/off period).
fn burst_starts(p: &Pattern, size: u64, origin: Instant, r: &QpRecord) -> Vec<(u64, Instant)> {
    if let Some(burst) = p.burst() {
        return r
            .post_times
            .iter()
            .step_by(burst.max(1) as usize)
            .enumerate()
            .map(|(k, &t)| (k as u64, t))
            .collect();
    }
    let Some(period) = p.period_ns(size).map(|x| x.max(1.0) as u64) else {
        return Vec::new();
    };
    let mut out: Vec<(u64, Instant)> = Vec::new();
    for &t in &r.post_times {
        let k = t.saturating_since(origin).as_nanos() / period;
        if out.last().is_none_or(|l| l.0 != k) {
            out.push((k, t));
        }
    }
    out
}

/// The report of one size of a pattern run (`o.records[h]` as `w.local[h]`).
pub fn build(s: &Settings, w: &Wiring, o: &SizeOutcome, host_line_gbps: f64) -> PatternReport {
    let n = w.hosts.len();
    let size = o.size;
    let bytes_of = |r: &QpRecord| r.completed * size;
    // Per directed host pair: the sending QPs' records.
    let mut per_pair: Vec<Vec<Vec<&QpRecord>>> = vec![vec![Vec::new(); n]; n];
    for (h, (qps, recs)) in w.local.iter().zip(&o.records).enumerate() {
        for ((q, r), send) in qps.iter().zip(recs).zip(&o.sending[h]) {
            if *send {
                per_pair[h][q.peer_host].push(r);
            }
        }
    }
    let mut matrix = vec![vec![0.0; n]; n];
    let mut flows = Vec::new();
    for (i, row) in per_pair.iter().enumerate() {
        for (j, recs) in row.iter().enumerate() {
            if recs.is_empty() {
                continue;
            }
            let bytes: u64 = recs.iter().map(|r| bytes_of(r)).sum();
            let elapsed = span(recs.iter().copied());
            let g = gbps(bytes, elapsed);
            matrix[i][j] = g;
            let (src, dst) = (w.hosts[i], w.hosts[j]);
            let victim = w
                .flows
                .iter()
                .any(|f| f.victim && f.src == src && f.dst == dst);
            flows.push(FlowResult {
                src,
                dst,
                victim,
                bytes,
                elapsed_ns: elapsed,
                gbps: g,
            });
        }
    }
    let per_host = (0..n)
        .map(|h| {
            let out: Vec<&QpRecord> = per_pair[h].iter().flatten().copied().collect();
            let inn: Vec<&QpRecord> = per_pair.iter().flat_map(|r| r[h].iter().copied()).collect();
            let sent: u64 = out.iter().map(|r| bytes_of(r)).sum();
            let received: u64 = inn.iter().map(|r| bytes_of(r)).sum();
            let mut row = HostRow {
                host: w.hosts[h],
                sent_bytes: sent,
                received_bytes: received,
                out_gbps: gbps(sent, span(out.iter().copied())),
                in_gbps: gbps(received, span(inn.iter().copied())),
                retransmits: 0,
                trims: 0,
                ecn: 0,
                evs_retired: 0,
            };
            if let Some(c) = o.counters.hosts.get(h) {
                for p in &c.planes {
                    row.retransmits += p.retransmits;
                    row.trims += p.trims;
                    row.ecn += p.ecn;
                    row.evs_retired += p.evs_retired;
                }
            }
            row
        })
        .collect();
    PatternReport {
        size,
        pattern: s
            .traffic
            .as_ref()
            .map_or_else(|| "pair".into(), |t| t.pattern.name()),
        mode: s.pattern.mode(),
        hosts: w.hosts.clone(),
        flows,
        matrix_gbps: matrix,
        per_host,
        bursts: spreads(s, o),
        message_serialisation_ns: if host_line_gbps > 0.0 {
            size as f64 * 8.0 / host_line_gbps
        } else {
            0.0
        },
    }
}

/// Every burst's start spread across the sending QPs (none for saturate).
fn spreads(s: &Settings, o: &SizeOutcome) -> Vec<BurstSpread> {
    if matches!(s.pattern, Pattern::Saturate) {
        return Vec::new();
    }
    let senders: Vec<&QpRecord> = o
        .records
        .iter()
        .zip(&o.sending)
        .flat_map(|(recs, send)| recs.iter().zip(send).filter(|x| *x.1).map(|x| x.0))
        .collect();
    let Some(origin) = senders.iter().filter_map(|r| r.first_post).min() else {
        return Vec::new();
    };
    let mut by_burst: std::collections::BTreeMap<u64, (u32, Instant, Instant)> =
        std::collections::BTreeMap::new();
    for r in &senders {
        for (k, t) in burst_starts(&s.pattern, o.size, origin, r) {
            let e = by_burst.entry(k).or_insert((0, t, t));
            e.0 += 1;
            e.1 = e.1.min(t);
            e.2 = e.2.max(t);
        }
    }
    by_burst
        .into_iter()
        .map(|(burst, (qps, lo, hi))| BurstSpread {
            burst,
            qps,
            spread_ns: hi.saturating_since(lo).as_nanos(),
        })
        .collect()
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// The largest matrix printed as text (beyond, the JSON and the heatmap carry it).
pub const TEXT_MATRIX_MAX: usize = 32;

/// The text a pattern run prints after the perftest table.
pub fn text(r: &PatternReport) -> String {
    let mut o = String::new();
    let rule = super::report::RULE;
    let mut g: Vec<f64> = r.flows.iter().map(|f| f.gbps).collect();
    g.sort_by(f64::total_cmp);
    let _ = writeln!(o, "{rule}");
    let _ = writeln!(
        o,
        " Pattern {} over {} hosts, {} flows, mode {}, {} B messages",
        r.pattern,
        r.hosts.len(),
        r.flows.len(),
        r.mode,
        r.size
    );
    let _ = writeln!(
        o,
        " Flow Gb/s: min {:.2}  p50 {:.2}  p99 {:.2}  max {:.2}  sum {:.2}",
        quantile(&g, 0.0),
        quantile(&g, 0.5),
        quantile(&g, 0.99),
        g.last().copied().unwrap_or(0.0),
        g.iter().sum::<f64>()
    );
    for f in r.flows.iter().filter(|f| f.victim) {
        let _ = writeln!(o, " Victim h{} -> h{}: {:.2} Gb/s", f.src, f.dst, f.gbps);
    }
    let _ = writeln!(o, "{rule}");
    let _ = writeln!(o, " Per host (payload bytes)");
    let _ = writeln!(
        o,
        " host   sent_bytes       received_bytes   out_Gb/s   in_Gb/s    retx     trims    ECN      EVs_retired"
    );
    for h in &r.per_host {
        let _ = writeln!(
            o,
            " {:<6} {:<16} {:<16} {:<10.2} {:<10.2} {:<8} {:<8} {:<8} {}",
            format!("h{}", h.host),
            h.sent_bytes,
            h.received_bytes,
            h.out_gbps,
            h.in_gbps,
            h.retransmits,
            h.trims,
            h.ecn,
            h.evs_retired
        );
    }
    let n = r.hosts.len();
    let _ = writeln!(o, "{rule}");
    if n <= TEXT_MATRIX_MAX {
        let _ = writeln!(o, " Gb/s matrix (row: sender, column: receiver; . no flow)");
        let mut head = String::from("        ");
        for h in &r.hosts {
            let _ = write!(head, "{:>8}", format!("h{h}"));
        }
        let _ = writeln!(o, "{head}");
        for (i, row) in r.matrix_gbps.iter().enumerate() {
            let mut line = format!(" {:<7}", format!("h{}", r.hosts[i]));
            for v in row {
                if *v > 0.0 {
                    let _ = write!(line, "{v:>8.2}");
                } else {
                    let _ = write!(line, "{:>8}", ".");
                }
            }
            let _ = writeln!(o, "{line}");
        }
    } else {
        let _ = writeln!(
            o,
            " Gb/s matrix: {n} x {n}, in the JSON (\"pattern\") and the heatmap (--matrix-svg)"
        );
    }
    if !r.bursts.is_empty() {
        let mut sp: Vec<f64> = r.bursts.iter().map(|b| b.spread_ns as f64).collect();
        let _ = writeln!(o, "{rule}");
        let yardstick = if r.message_serialisation_ns > 0.0 {
            format!(
                "; one message on a host's line: {:.0} ns",
                r.message_serialisation_ns
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            " Burst starts across flows ({} bursts{yardstick})",
            r.bursts.len()
        );
        let show: Vec<&BurstSpread> = if r.bursts.len() <= 8 {
            r.bursts.iter().collect()
        } else {
            let k = r.bursts.len();
            r.bursts[..4].iter().chain(&r.bursts[k - 4..]).collect()
        };
        let _ = writeln!(o, " burst    QPs      spread_ns");
        for b in show {
            let _ = writeln!(o, " {:<8} {:<8} {}", b.burst, b.qps, b.spread_ns);
        }
        sp.sort_by(f64::total_cmp);
        let _ = writeln!(
            o,
            " spread: p50 {:.0} ns, max {:.0} ns",
            quantile(&sp, 0.5),
            sp.last().copied().unwrap_or(0.0)
        );
    }
    o
}

/// The matrix as an SVG heatmap: one cell per host pair, darker for more Gb/s, with a scale.
pub fn svg(r: &PatternReport) -> String {
    let n = r.hosts.len().max(1);
    let cell = (640.0 / n as f64).clamp(2.0, 40.0);
    let (left, top) = (60.0, 50.0);
    let side = cell * n as f64;
    let (w, h) = (left + side + 120.0, top + side + 40.0);
    let max = r
        .matrix_gbps
        .iter()
        .flatten()
        .copied()
        .fold(0.0f64, f64::max)
        .max(1e-9);
    let color = |v: f64| {
        // White to deep blue.
        let t = (v / max).clamp(0.0, 1.0);
        let c = |a: f64, b: f64| (a + (b - a) * t).round() as u8;
        format!(
            "#{:02x}{:02x}{:02x}",
            c(247.0, 8.0),
            c(251.0, 48.0),
            c(255.0, 107.0)
        )
    };
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" \
         viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"sans-serif\" font-size=\"11\">"
    );
    let _ = writeln!(
        o,
        "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"20\" \
         font-size=\"14\">mrc-perf {} over {} hosts, {} B: Gb/s per flow (row: sender, \
         column: receiver)</text>",
        r.pattern,
        r.hosts.len(),
        r.size
    );
    let label_every = n.div_ceil(16);
    for (i, row) in r.matrix_gbps.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            let _ = writeln!(
                o,
                "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{cell:.1}\" height=\"{cell:.1}\" \
                 fill=\"{}\" stroke=\"#ddd\" stroke-width=\"0.3\"><title>h{} -> h{}: {v:.2} \
                 Gb/s</title></rect>",
                left + j as f64 * cell,
                top + i as f64 * cell,
                color(*v),
                r.hosts[i],
                r.hosts[j]
            );
        }
        if i % label_every == 0 {
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">h{}</text>",
                left - 4.0,
                top + (i as f64 + 0.5) * cell + 4.0,
                r.hosts[i]
            );
            let _ = writeln!(
                o,
                "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">h{}</text>",
                left + (i as f64 + 0.5) * cell,
                top - 6.0,
                r.hosts[i]
            );
        }
    }
    // The scale.
    let sx = left + side + 30.0;
    for k in 0..=10 {
        let v = max * f64::from(10 - k) / 10.0;
        let y = top + f64::from(k) * side.min(300.0) / 10.0;
        let _ = writeln!(
            o,
            "<rect x=\"{sx:.1}\" y=\"{y:.1}\" width=\"16\" height=\"{:.1}\" fill=\"{}\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{v:.1}</text>",
            side.min(300.0) / 10.0,
            color(v),
            sx + 20.0,
            y + 9.0
        );
    }
    let _ = writeln!(o, "</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::counters::Snapshot;
    use crate::perf::traffic::Flow;
    use mrc_transport::verbs::Qpn;

    fn rec(first: u64, last: u64, completed: u64, posts: &[u64]) -> QpRecord {
        QpRecord {
            qpn: Qpn(1),
            posted: completed,
            completed,
            first_post: Some(Instant(first)),
            last_completion: Some(Instant(last)),
            post_times: posts.iter().map(|&t| Instant(t)).collect(),
            ..QpRecord::default()
        }
    }

    #[test]
    fn matrix_hosts_and_spreads_from_the_records() {
        let flows = vec![
            Flow {
                src: 0,
                dst: 1,
                victim: false,
            },
            Flow {
                src: 2,
                dst: 1,
                victim: true,
            },
        ];
        let w = Wiring::new(flows, 1);
        assert_eq!(w.hosts, [0, 1, 2]);
        // h0 sends 10 x 1000 B in 1 us (80 Gb/s), h2 the same in 2 us; bursts of 2.
        let o = SizeOutcome {
            size: 1000,
            records: vec![
                vec![rec(0, 1000, 10, &[0, 1, 100, 101, 200])],
                vec![QpRecord::default(), QpRecord::default()],
                vec![rec(0, 2000, 10, &[30, 31, 150, 151, 400])],
            ],
            sending: vec![vec![true], vec![false, false], vec![true]],
            counters: Snapshot::default(),
            check: None,
            error: None,
            nic_cpu_percent: None,
        };
        let mut s =
            super::super::cli::parse(&["--burst_size", "2", "--burst-gap", "100ns"]).unwrap();
        s.traffic = None;
        let r = build(&s, &w, &o, 100.0);
        assert_eq!(r.matrix_gbps[0][1], 80.0);
        assert_eq!(r.matrix_gbps[2][1], 40.0);
        assert_eq!(r.matrix_gbps[1][0], 0.0);
        assert!(r.flows.iter().any(|f| f.victim && f.src == 2));
        let h1 = r.per_host[1];
        assert_eq!((h1.received_bytes, h1.sent_bytes), (20_000, 0));
        assert!((h1.in_gbps - 80.0).abs() < 1e-9, "20 kB in 2 us");
        let spreads: Vec<u64> = r.bursts.iter().map(|b| b.spread_ns).collect();
        assert_eq!(spreads, [30, 50, 200]);
        assert_eq!(r.message_serialisation_ns, 80.0);
        let t = text(&r);
        assert!(t.contains("Victim h2 -> h1: 40.00 Gb/s"), "{t}");
        assert!(t.contains("spread: p50 50 ns, max 200 ns"), "{t}");
        let svg = svg(&r);
        assert_eq!(svg.matches("<title>").count(), 9, "one cell per host pair");
        assert!(svg.contains("h0 -> h1: 80.00 Gb/s"));
    }
}
