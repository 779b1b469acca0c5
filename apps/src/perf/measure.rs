//! The figures perftest prints, computed from the applications' records.
//!
//! - BW average = bytes completed ÷ (last completion − first post); MsgRate = messages ÷ the
//!   same time, in Mpps. With `-b` each direction is measured on its own host and the two
//!   are added, as perftest reports the sum.
//! - BW peak, as perftest: the best message rate over every window that starts at a CQ
//!   moderation boundary of the posts and ends at a signalled completion (all QPs merged).
//!   Only in iterations mode; with `-D` it is 0, as perftest prints it.
//! - Latency: half the round trip of each ping (perftest halves it for writes); median,
//!   99 % and 99.9 % from an HDR histogram, min, max, mean and deviation exact.

use hdrhistogram::Histogram;
use mrc_transport::Instant;

use super::app::QpRecord;
use super::settings::BwUnits;

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
}

/// The bandwidth of one host's sending QPs.
fn host_bw(size: u64, qps: &[&QpRecord], cq_mod: u64) -> (u64, u64, f64, f64) {
    let messages: u64 = qps.iter().map(|q| q.completed).sum();
    let first = qps.iter().filter_map(|q| q.first_post).min();
    let last = qps.iter().filter_map(|q| q.last_completion).max();
    let elapsed = match (first, last) {
        (Some(a), Some(b)) => b.saturating_since(a).as_nanos(),
        _ => 0,
    };
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
    (
        messages,
        elapsed,
        best_rate * size as f64,
        messages as f64 * size as f64,
    )
}

/// A bandwidth row from the records of every host (`hosts[h]` = that host's QP records; only
/// sending QPs should be given).
pub fn bandwidth(
    size: u64,
    hosts: &[Vec<&QpRecord>],
    cq_mod: u32,
    units: BwUnits,
    counted_iters: Option<u64>,
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
    };
    let mut sending_qps = 0u64;
    for qps in hosts.iter().filter(|q| !q.is_empty()) {
        let (messages, elapsed, peak_bytes_per_ns, bytes) = host_bw(size, qps, u64::from(cq_mod));
        sending_qps += qps.len() as u64;
        r.messages += messages;
        r.bytes += bytes as u64;
        r.elapsed_ns = r.elapsed_ns.max(elapsed);
        let average = units.of(bytes, elapsed as f64);
        r.average += average;
        if counted_iters.is_some() {
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
    let rtts: Vec<u64> = qps.iter().flat_map(|q| q.rtts_ns.iter().copied()).collect();
    let n = rtts.len() as u64;
    // Half round trips in picoseconds, 1 ps to 1000 s, 3 significant digits.
    let mut h = Histogram::<u64>::new_with_bounds(1, 1_000_000_000_000_000, 3)
        .expect("bounds and precision are valid");
    for &r in &rtts {
        h.saturating_record((r * 1000 / 2).max(1));
    }
    let us = |ps: u64| ps as f64 / 1e6;
    let halves: Vec<f64> = rtts.iter().map(|&r| r as f64 / 2e3).collect();
    let mean = if n > 0 {
        halves.iter().sum::<f64>() / n as f64
    } else {
        0.0
    };
    let var = if n > 1 {
        halves.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
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
        iterations: n / (qps.len().max(1) as u64),
        t_min: if n > 0 {
            halves.iter().copied().fold(f64::INFINITY, f64::min)
        } else {
            0.0
        },
        t_max: halves.iter().copied().fold(0.0, f64::max),
        t_typical: us(h.value_at_quantile(0.5)),
        t_avg: mean,
        t_stdev: var.sqrt(),
        p99: us(h.value_at_quantile(0.99)),
        p99_9: us(h.value_at_quantile(0.999)),
        tps: if span > 0.0 {
            n as f64 * 1e9 / span
        } else {
            0.0
        },
    }
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
        let r = bandwidth(1 << 20, &[vec![&q]], 10, BwUnits::MiBps, Some(1000));
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
        let one = bandwidth(4096, &[vec![&a]], 10, BwUnits::Gbps, Some(100));
        let two = bandwidth(4096, &[vec![&a], vec![&b]], 10, BwUnits::Gbps, Some(100));
        assert_eq!(two.bytes, 2 * one.bytes);
        assert!((two.average - 2.0 * one.average).abs() < 1e-9);
        let dur = bandwidth(4096, &[vec![&a]], 10, BwUnits::Gbps, None);
        assert_eq!(dur.peak, 0.0, "no peak with -D, as perftest");
        assert_eq!(dur.iterations, 100);
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
        assert!((r.t_typical - 25.0).abs() < 0.05, "{}", r.t_typical);
        assert!((r.p99 - 49.5).abs() < 0.05, "{}", r.p99);
        assert!((r.tps - 100.0 / 5050e-6).abs() < 1e-6);
    }
}
