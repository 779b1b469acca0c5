//! The figures perftest prints, computed from the applications' records.
//!
//! - BW average = bytes completed ÷ (last completion − first post); MsgRate = messages ÷ the
//!   same time, in Mpps. With `-b` each direction is measured on its own host and the two
//!   are added, as perftest reports the sum.
//! - BW peak, as perftest: the best message rate over every window that starts at a CQ
//!   moderation boundary of the posts and ends at a signalled completion (all QPs merged).
//!   Only in iterations mode; with `-D` or `-N` it is 0, as perftest prints it.
//! - Latency: half the round trip of each ping (perftest halves it for writes), every figure
//!   from the exact samples: t_typical is the median (the mean of the middle two of an even
//!   count, as perftest), the percentiles the nearest rank (the sample at rank ⌈q·n⌉), so no
//!   figure is ever above t_max.

use mrc_transport::Instant;

use super::app::QpRecord;
use super::backend::SizeOutcome;
use super::settings::{BwUnits, Settings};

/// A result row of either kind.
#[derive(Debug, Clone)]
pub enum Row {
    /// The table's row (both directions added with `-b`) and, with `-b --report-both`, each
    /// direction's own: the client's (local in one process) first.
    Bw {
        total: BwResult,
        directions: Vec<BwResult>,
    },
    Lat(LatResult),
}

/// One row of a bandwidth table.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct BwResult {
    pub size: u64,
    /// Iterations per QP (iterations mode) or messages per sending QP (duration mode).
    pub iterations: u64,
    /// Messages completed, all QPs and directions.
    pub messages: u64,
    /// Payload bytes completed, all QPs and directions.
    pub bytes: u64,
    /// Measured time of the slowest direction, ns.
    pub elapsed_ns: u64,
    pub peak: f64,
    pub average: f64,
    /// Million messages per second.
    pub msg_rate_mpps: f64,
    /// `--cpu_util`: the CPU the NIC thread(s) used, % of one core.
    pub cpu_util: Option<f64>,
}

/// One row of a latency table, microseconds (one way: half the round trip).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize)]
pub struct LatResult {
    pub size: u64,
    pub iterations: u64,
    pub t_min: f64,
    pub t_max: f64,
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p99_9: f64,
    /// Round trips per second over the run (perftest's `tps average` with `-D`).
    pub tps: f64,
    /// `--cpu_util`: the CPU the NIC thread(s) used, % of one core.
    pub cpu_util: Option<f64>,
}

/// The result row of one size, as perftest computes it from the records of the sending
/// (bandwidth) or pinging (latency) QPs; with `-b --report-both`, each direction's too.
pub fn row(s: &Settings, o: &SizeOutcome) -> Row {
    let senders: Vec<Vec<&QpRecord>> = o
        .records
        .iter()
        .zip(&o.sending)
        .map(|(recs, send)| {
            recs.iter()
                .zip(send)
                .filter(|(_, s)| **s)
                .map(|(r, _)| r)
                .collect()
        })
        .collect();
    if s.test.is_bw() {
        let counted = (s.duration.is_none() && !s.run_infinitely).then_some(s.iters);
        let peak = counted.is_some() && !s.perftest.no_peak;
        let bw = |hosts: &[Vec<&QpRecord>]| BwResult {
            cpu_util: o.nic_cpu_percent,
            ..bandwidth(o.size, hosts, s.cq_mod, s.units, counted, peak)
        };
        let directions = if s.perftest.report_both && s.bidirectional {
            senders
                .iter()
                .map(|h| bw(std::slice::from_ref(h)))
                .collect()
        } else {
            Vec::new()
        };
        Row::Bw {
            total: bw(&senders),
            directions,
        }
    } else {
        let pingers: Vec<&QpRecord> = senders.into_iter().flatten().collect();
        Row::Lat(LatResult {
            cpu_util: o.nic_cpu_percent,
            ..latency(o.size, &pingers)
        })
    }
}

/// The bandwidth of one host's sending QPs (its peak in bytes per ns if `peak`, else 0).
fn host_bw(size: u64, qps: &[&QpRecord], cq_mod: u64, peak: bool) -> (u64, u64, f64, f64) {
    let messages: u64 = qps.iter().map(|q| q.completed).sum();
    let first = qps.iter().filter_map(|q| q.first_post).min();
    let last = qps.iter().filter_map(|q| q.last_completion).max();
    let elapsed = match (first, last) {
        (Some(a), Some(b)) => b.saturating_since(a).as_nanos(),
        _ => 0,
    };
    let messages_bytes = messages as f64 * size as f64;
    if !peak {
        return (messages, elapsed, 0.0, messages_bytes);
    }
    let mut posts: Vec<Instant> = qps
        .iter()
        .flat_map(|q| q.post_times.iter().copied())
        .collect();
    posts.sort_unstable();
    // Completion marks of every QP merged into one cumulative count over time.
    let mut marks: Vec<(Instant, u64, usize)> = Vec::new();
    for (qi, q) in qps.iter().enumerate() {
        let mut prev = 0;
        for &(done, t) in &q.completions {
            marks.push((t, done - prev, qi));
            prev = done;
        }
    }
    marks.sort_unstable_by_key(|m| m.0);
    let mut best_rate = 0.0f64; // messages per ns
    let mut cumulative = Vec::with_capacity(marks.len());
    let mut c = 0u64;
    for m in &marks {
        c += m.1;
        cumulative.push((m.0, c));
    }
    for i in (0..posts.len()).step_by(cq_mod.max(1) as usize) {
        let tp = posts[i];
        for &(tc, done) in &cumulative {
            if done > i as u64 && tc > tp {
                let rate = (done - i as u64) as f64 / tc.saturating_since(tp).as_nanos() as f64;
                best_rate = best_rate.max(rate);
            }
        }
    }
    (messages, elapsed, best_rate * size as f64, messages_bytes)
}

/// A bandwidth row from the records of every host (`hosts[h]` = that host's QP records; only
/// sending QPs should be given). `counted_iters`: the iterations of an iterations-mode run;
/// `peak`: measure the peak (else 0, as perftest prints it with `-N` or `-D`).
pub fn bandwidth(
    size: u64,
    hosts: &[Vec<&QpRecord>],
    cq_mod: u32,
    units: BwUnits,
    counted_iters: Option<u64>,
    peak: bool,
) -> BwResult {
    let mut r = BwResult {
        size,
        iterations: 0,
        messages: 0,
        bytes: 0,
        elapsed_ns: 0,
        peak: 0.0,
        average: 0.0,
        msg_rate_mpps: 0.0,
        cpu_util: None,
    };
    let mut sending_qps = 0u64;
    for qps in hosts.iter().filter(|q| !q.is_empty()) {
        let (messages, elapsed, peak_bytes_per_ns, bytes) =
            host_bw(size, qps, u64::from(cq_mod), peak);
        sending_qps += qps.len() as u64;
        r.messages += messages;
        r.bytes += bytes as u64;
        r.elapsed_ns = r.elapsed_ns.max(elapsed);
        let average = units.of(bytes, elapsed as f64);
        r.average += average;
        if peak {
            // The whole run is one of the windows: the peak is never below the average
            // (the max only absorbs rounding).
            r.peak += units.of(peak_bytes_per_ns, 1.0).max(average);
        }
        if elapsed > 0 {
            r.msg_rate_mpps += messages as f64 * 1e3 / elapsed as f64;
        }
    }
    r.iterations = counted_iters.unwrap_or_else(|| r.messages / sending_qps.max(1));
    r
}

/// A latency row from the round trips of every pinging QP.
pub fn latency(size: u64, qps: &[&QpRecord]) -> LatResult {
    let mut rtts: Vec<u64> = qps.iter().flat_map(|q| q.rtts_ns.iter().copied()).collect();
    rtts.sort_unstable();
    let n = rtts.len();
    // One way: half the round trip, in µs.
    let us = |rtt_ns: u64| rtt_ns as f64 / 2e3;
    let mean = if n > 0 {
        rtts.iter().map(|&r| us(r)).sum::<f64>() / n as f64
    } else {
        0.0
    };
    let var = if n > 1 {
        rtts.iter().map(|&r| (us(r) - mean).powi(2)).sum::<f64>() / (n - 1) as f64
    } else {
        0.0
    };
    let first = qps.iter().filter_map(|q| q.first_post).min();
    let last = qps.iter().filter_map(|q| q.last_completion).max();
    let span = match (first, last) {
        (Some(a), Some(b)) => b.saturating_since(a).as_nanos() as f64,
        _ => 0.0,
    };
    LatResult {
        size,
        iterations: n as u64 / (qps.len().max(1) as u64),
        t_min: rtts.first().map_or(0.0, |&r| us(r)),
        t_max: rtts.last().map_or(0.0, |&r| us(r)),
        t_typical: median(&rtts).map_or(0.0, |m| m / 2e3),
        t_avg: mean,
        t_stdev: var.sqrt(),
        p99: nearest_rank(&rtts, 0.99).map_or(0.0, us),
        p99_9: nearest_rank(&rtts, 0.999).map_or(0.0, us),
        tps: if span > 0.0 {
            n as f64 * 1e9 / span
        } else {
            0.0
        },
        cpu_util: None,
    }
}

/// The median of sorted samples: the middle one, or the mean of the middle two (perftest's).
fn median(sorted: &[u64]) -> Option<f64> {
    let n = sorted.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(sorted[n / 2] as f64),
        _ => Some(f64::midpoint(
            sorted[n / 2 - 1] as f64,
            sorted[n / 2] as f64,
        )),
    }
}

/// The `q` quantile of sorted samples by nearest rank: the sample at rank ⌈q·n⌉ (1-based),
/// always one of the samples, so never above the largest.
fn nearest_rank(sorted: &[u64], q: f64) -> Option<u64> {
    let n = sorted.len();
    let rank = (q * n as f64).ceil() as usize;
    sorted.get(rank.clamp(1, n.max(1)) - 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_transport::Duration;
    use mrc_transport::verbs::Qpn;

    fn t(us: u64) -> Instant {
        Instant::ZERO + Duration::from_micros(us)
    }

    /// A QP that posted `n` messages 1 µs apart and completed them in `cq_mod` batches
    /// 10 µs after the batch's last post.
    fn steady(n: u64, cq_mod: u64) -> QpRecord {
        let mut q = QpRecord {
            qpn: Qpn(1),
            posted: n,
            completed: n,
            ..QpRecord::default()
        };
        for k in 0..n {
            q.post_times.push(t(k));
            if (k + 1) % cq_mod == 0 {
                q.completions.push((k + 1, t(k + 10)));
            }
        }
        q.first_post = Some(t(0));
        q.last_completion = Some(t(n - 1 + 10));
        q
    }

    #[test]
    fn average_is_bytes_over_time_and_peak_is_at_least_that() {
        let q = steady(1000, 10);
        let r = bandwidth(1 << 20, &[vec![&q]], 10, BwUnits::MiBps, Some(1000), true);
        assert_eq!(r.bytes, 1000 << 20);
        assert_eq!(r.elapsed_ns, 1_009_000);
        // 1000 MiB in 1.009 ms.
        assert!((r.average - 1000.0 / 1.009e-3).abs() < 1e-6 * r.average);
        assert!(r.peak >= r.average);
        // Steady state: one message per µs, so the best window approaches 1 MiB/µs.
        assert!(r.peak <= 1e6 + 1.0, "{}", r.peak);
        assert!((r.msg_rate_mpps - 1000.0 / 1009.0).abs() < 1e-9);
    }

    #[test]
    fn directions_add_up() {
        let a = steady(100, 10);
        let b = steady(100, 10);
        let one = bandwidth(4096, &[vec![&a]], 10, BwUnits::Gbps, Some(100), true);
        let two = bandwidth(
            4096,
            &[vec![&a], vec![&b]],
            10,
            BwUnits::Gbps,
            Some(100),
            true,
        );
        assert_eq!(two.bytes, 2 * one.bytes);
        assert!((two.average - 2.0 * one.average).abs() < 1e-9);
        let dur = bandwidth(4096, &[vec![&a]], 10, BwUnits::Gbps, None, false);
        assert_eq!(dur.peak, 0.0, "no peak with -D, as perftest");
        assert_eq!(dur.iterations, 100);
        let no_peak = bandwidth(4096, &[vec![&a]], 10, BwUnits::Gbps, Some(100), false);
        assert_eq!(no_peak.peak, 0.0, "-N: no peak");
        assert_eq!(no_peak.average, one.average);
    }

    #[test]
    fn latency_halves_the_round_trip() {
        let mut q = QpRecord {
            qpn: Qpn(1),
            ..QpRecord::default()
        };
        q.rtts_ns = (1..=100).map(|i| i * 1000).collect(); // 1..100 µs round trips
        q.first_post = Some(t(0));
        q.last_completion = Some(t(5050));
        let r = latency(8, &[&q]);
        assert_eq!(r.iterations, 100);
        assert!((r.t_min - 0.5).abs() < 1e-9);
        assert!((r.t_max - 50.0).abs() < 1e-9);
        assert!((r.t_avg - 25.25).abs() < 1e-9);
        // The median of 0.5 .. 50 in steps of 0.5: the mean of 25 and 25.5.
        assert!((r.t_typical - 25.25).abs() < 1e-9, "{}", r.t_typical);
        assert!((r.p99 - 49.5).abs() < 1e-9, "{}", r.p99);
        assert!((r.p99_9 - 50.0).abs() < 1e-9, "{}", r.p99_9);
        assert!((r.tps - 100.0 / 5050e-6).abs() < 1e-6);
    }

    #[test]
    fn percentiles_are_samples_and_never_above_t_max() {
        // Values a 3-digit HDR histogram (what this used to read percentiles from) reports
        // above the largest: a bucket answers with its highest equivalent value.
        let mut q = QpRecord {
            qpn: Qpn(1),
            ..QpRecord::default()
        };
        q.rtts_ns = vec![2_009_801, 2_009_803, 2_009_799, 1_000_001, 2_009_807];
        let r = latency(8, &[&q]);
        assert_eq!(r.t_max, 2_009_807.0 / 2e3);
        for (name, v) in [
            ("t_typical", r.t_typical),
            ("99%", r.p99),
            ("99.9%", r.p99_9),
        ] {
            assert!(v <= r.t_max, "{name} {v} above t_max {}", r.t_max);
            assert!(v >= r.t_min, "{name} {v} below t_min {}", r.t_min);
        }
        assert_eq!(r.p99, r.t_max, "the top rank of 5 samples is the largest");
        assert_eq!(r.t_typical, 2_009_801.0 / 2e3, "the middle of five");
        // One sample: every figure is it.
        q.rtts_ns = vec![7_000];
        let one = latency(8, &[&q]);
        assert_eq!(
            (one.t_min, one.t_typical, one.p99, one.p99_9),
            (3.5, 3.5, 3.5, 3.5)
        );
        assert_eq!(one.t_max, 3.5);
        // None: zeros, no panic.
        q.rtts_ns.clear();
        let none = latency(8, &[&q]);
        assert_eq!((none.t_max, none.p99_9, none.t_typical), (0.0, 0.0, 0.0));
    }

    #[test]
    fn nearest_rank_and_median() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&v, 0.99), Some(990));
        assert_eq!(nearest_rank(&v, 0.999), Some(999));
        assert_eq!(nearest_rank(&v, 1.0), Some(1000));
        assert_eq!(nearest_rank(&v[..3], 0.5), Some(2));
        assert_eq!(nearest_rank(&[], 0.5), None);
        assert_eq!(median(&[1, 2, 3, 10]), Some(2.5));
        assert_eq!(median(&[4]), Some(4.0));
    }
}
