//! What a backend hands back, whichever world ran the engines: the fabric it ran on (for the
//! settings block) and, per message size, the applications' records and every host's
//! counters.

use std::net::Ipv6Addr;
use std::sync::{Arc, Mutex};

use super::app::{AppParams, PerfApp, QpRecord, lock};
use super::counters::Snapshot;
use super::settings::{Settings, TestKind};
use crate::metrics::Exporter;

/// Facts about the fabric and clock, for the settings block and the JSON document.
#[derive(Debug, Clone, serde::Serialize)]
pub struct FabricInfo {
    /// `simulated` or `real`.
    pub clock: &'static str,
    /// The plan's name (or the device list on real ports).
    pub fabric: String,
    pub planes: u8,
    pub hosts: u32,
    /// Host names of the two ends.
    pub client: String,
    pub server: String,
    pub link_gbps: u32,
    pub payload_mtu: u32,
    /// Paths between the two ends per plane (0: not known).
    pub paths_per_plane: u32,
    pub evs_per_plane: u16,
    pub active_evs_per_plane: u16,
    /// The faults scheduled, one line each.
    pub faults: Vec<String>,
    /// How paths are chosen: `SRv6 uSID` (source routed) or `ECMP` (switches hash the EV).
    pub routing: &'static str,
    /// How QP attributes were exchanged (perftest's `Data ex. method`).
    pub exchange: &'static str,
    /// Both ends of every QP, as the exchange set them up (perftest's address lines).
    pub addresses: Addresses,
}

/// One end of a QP as perftest prints it after the exchange (`local address: …`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct QpAddress {
    pub qpn: u32,
    /// The first PSN this end sends.
    pub psn: u32,
    /// The key its peer writes into this end's buffer with.
    pub rkey: u32,
    /// Where its peer writes this QP's messages.
    pub vaddr: u64,
    /// The NIC's IPv6 address: perftest's GID.
    pub gid: Ipv6Addr,
}

/// Both ends of every QP of the first message size, seen from this process: `local` is the
/// client in a one-process run (sim, mem) and this host on DPDK ports.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Addresses {
    pub local: Vec<QpAddress>,
    pub remote: Vec<QpAddress>,
}

/// Result of checking the destination buffers (`--check`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct CheckResult {
    pub bytes_checked: u64,
    pub bytes_wrong: u64,
}

/// What one message size produced.
#[derive(Debug, Clone)]
pub struct SizeOutcome {
    pub size: u64,
    /// Per host: the records of its QPs.
    pub records: Vec<Vec<QpRecord>>,
    /// Per host: which of its QPs sent (bandwidth) or pinged (latency).
    pub sending: Vec<Vec<bool>>,
    pub counters: Snapshot,
    pub check: Option<CheckResult>,
    /// An application's failure (error completion, verbs error) or an unfinished run.
    pub error: Option<String>,
    /// `--cpu_util`: the CPU the NIC thread(s) used over the run, % of one core (the mean of
    /// the NICs when this process runs more than one).
    pub nic_cpu_percent: Option<f64>,
}

/// Measures the CPU NIC threads use over a run (`--cpu_util`).
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    start: std::time::Instant,
    cpu: std::time::Duration,
    threads: u32,
}

impl CpuMeter {
    /// Start, from the NIC threads' CPU times so far (`None`: not available).
    pub fn start(cpu_times: &[Option<std::time::Duration>]) -> Option<Self> {
        let cpu = cpu_times
            .iter()
            .copied()
            .sum::<Option<std::time::Duration>>()?;
        Some(Self {
            start: std::time::Instant::now(),
            cpu,
            threads: u32::try_from(cpu_times.len()).ok()?.max(1),
        })
    }

    /// The share of one core each thread used since the start, %, given their times now.
    pub fn percent(&self, cpu_times: &[Option<std::time::Duration>]) -> Option<f64> {
        let now = cpu_times
            .iter()
            .copied()
            .sum::<Option<std::time::Duration>>()?;
        let wall = self.start.elapsed().as_secs_f64() * f64::from(self.threads);
        (wall > 0.0).then(|| now.saturating_sub(self.cpu).as_secs_f64() * 100.0 / wall)
    }
}

/// Hooks a backend calls while it runs.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// Print live per-plane bandwidth on stderr.
    pub live: bool,
    /// Publish counters here.
    pub metrics: Option<Arc<Exporter>>,
}

/// The messages completed in one reporting period (`--run_infinitely`).
#[derive(Debug, Clone)]
pub struct PeriodReport {
    pub size: u64,
    /// Messages completed in the period, all sending QPs.
    pub messages: u64,
    pub qps: u32,
    pub period_ns: u64,
    /// Round trips of the period (latency), ns.
    pub rtts_ns: Vec<u64>,
}

/// The application parameters of one size.
pub fn app_params(s: &Settings, size: u64) -> AppParams {
    AppParams {
        test: s.test,
        size,
        iters: s.iters,
        duration: if s.run_infinitely { None } else { s.duration },
        infinite: s.run_infinitely,
        tx_depth: s.tx_depth,
        rx_depth: s.rx_depth,
        cq_mod: s.cq_mod,
        pattern: s.pattern,
    }
}

/// Which side sends and which receives on every QP: `(client send, client receive, server
/// send, server receive)`.
pub const fn roles(test: TestKind, bidirectional: bool) -> (bool, bool, bool, bool) {
    match test {
        TestKind::WriteBw => (true, false, bidirectional, false),
        TestKind::WriteImmBw => (true, bidirectional, bidirectional, true),
        TestKind::WriteLat => (true, false, false, true),
    }
}

/// Buffer layout of every host: QP `i` sends from `BASE + i·size` and writes into the peer's
/// `BASE + (qps + i)·size`.
pub const BUFFER_IOVA: u64 = 0x1000_0000;

/// The source buffer of QP `i`.
pub const fn src_addr(i: u32, size: u64) -> u64 {
    BUFFER_IOVA + i as u64 * size
}

/// The destination buffer of QP `i`.
pub const fn dst_addr(i: u32, qps: u32, size: u64) -> u64 {
    BUFFER_IOVA + (qps + i) as u64 * size
}

/// Bytes each host registers.
pub fn buffer_len(qps: u32, size: u64) -> usize {
    (2 * u64::from(qps) * size).max(64) as usize
}

/// The `--check` pattern of host `host`'s QP `i`.
pub fn pattern_salt(host: u32, i: u32) -> u64 {
    (u64::from(host) << 32 | u64::from(i)).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1
}

/// Fill the source buffers of a host for `--check`.
pub fn fill_sources(buf: &mut [u8], host: u32, qps: u32, size: u64) {
    for i in 0..qps {
        let a = (src_addr(i, size) - BUFFER_IOVA) as usize;
        mrc_sim::memory::fill_pattern(pattern_salt(host, i), 0, &mut buf[a..a + size as usize]);
    }
}

/// Compare a destination buffer with the pattern its sender filled.
pub fn check_dest(dst: &[u8], sender: u32, i: u32) -> CheckResult {
    let mut want = vec![0; dst.len()];
    mrc_sim::memory::fill_pattern(pattern_salt(sender, i), 0, &mut want);
    CheckResult {
        bytes_checked: dst.len() as u64,
        bytes_wrong: dst.iter().zip(&want).filter(|(a, b)| a != b).count() as u64,
    }
}

/// `--run_infinitely`: one result line per period.
#[derive(Debug, Default)]
pub struct Periods {
    last_done: u64,
    last_rtts: Vec<usize>,
    last_ns: u64,
}

impl Periods {
    /// Print the line of the period that ends at `now_ns`.
    pub fn report(&mut self, s: &Settings, size: u64, apps: &[Arc<Mutex<PerfApp>>], now_ns: u64) {
        let mut done = 0;
        let mut rtts = Vec::new();
        let mut k = 0;
        for a in apps {
            let app = lock(a);
            done += app.messages_done();
            for r in app.records() {
                if self.last_rtts.len() <= k {
                    self.last_rtts.push(0);
                }
                rtts.extend_from_slice(&r.rtts_ns[self.last_rtts[k]..]);
                self.last_rtts[k] = r.rtts_ns.len();
                k += 1;
            }
        }
        let report = PeriodReport {
            size,
            messages: done - self.last_done,
            qps: s.qps,
            period_ns: now_ns - self.last_ns,
            rtts_ns: rtts,
        };
        self.last_done = done;
        self.last_ns = now_ns;
        if report.period_ns > 0 {
            super::report::print_period(s, &report);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_patterns() {
        let (qps, size) = (3, 100);
        let mut buf = vec![0; buffer_len(qps, size)];
        fill_sources(&mut buf, 7, qps, size);
        let src = |i: u32| {
            let a = (src_addr(i, size) - BUFFER_IOVA) as usize;
            buf[a..a + size as usize].to_vec()
        };
        assert_eq!(check_dest(&src(2), 7, 2).bytes_wrong, 0);
        assert!(
            check_dest(&src(2), 7, 1).bytes_wrong > 50,
            "QPs carry different bytes"
        );
        assert_eq!(dst_addr(0, qps, size), src_addr(3, size));
        assert!(
            buf[(dst_addr(0, qps, size) - BUFFER_IOVA) as usize..]
                .iter()
                .all(|&b| b == 0)
        );
    }
}
