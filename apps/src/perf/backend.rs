//! What a backend hands back, whichever world ran the engines: the fabric it ran on (for the
//! settings block) and, per message size, the applications' records and every host's
//! counters.

use std::net::Ipv6Addr;
use std::sync::Arc;

use mrc_transport::EndpointConfig;
use mrc_transport::cc::{CcProfile, DcqcnConfig, NsccConfig};
use mrc_transport::verbs::Memory;

use super::app::{AppParams, QpRecord};
pub use super::check::{BUFFER_IOVA, CheckResult};
use super::check::{CheckedMemory, Layout, SharedDest, lock_dest};
use super::settings::{CcChoice, Pattern, Settings, TestKind};
use crate::metrics::counters::Snapshot;
use crate::metrics::telemetry::Telemetry;

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
///
/// The wall clock is read before the threads' CPU times at the start and after them at the
/// end, so the CPU time measured falls within the wall time measured however this thread is
/// scheduled between the reads (a thread preempted after reading the CPU times but before the
/// clock would report more than a whole core on a short run).
#[derive(Debug, Clone, Copy)]
pub struct CpuMeter {
    start: std::time::Instant,
    cpu: std::time::Duration,
    threads: u32,
}

impl CpuMeter {
    /// Start, from the NIC threads' CPU times so far, which `cpu_times` reads (`None`: not
    /// available).
    pub fn start(cpu_times: impl FnOnce() -> Vec<Option<std::time::Duration>>) -> Option<Self> {
        let start = std::time::Instant::now();
        let times = cpu_times();
        let cpu = times.iter().copied().sum::<Option<std::time::Duration>>()?;
        Some(Self {
            start,
            cpu,
            threads: u32::try_from(times.len()).ok()?.max(1),
        })
    }

    /// The share of one core each thread used since the start, %, from their times now,
    /// which `cpu_times` reads.
    pub fn percent(
        &self,
        cpu_times: impl FnOnce() -> Vec<Option<std::time::Duration>>,
    ) -> Option<f64> {
        let now = cpu_times()
            .iter()
            .copied()
            .sum::<Option<std::time::Duration>>()?;
        let wall = self.start.elapsed().as_secs_f64() * f64::from(self.threads);
        (wall > 0.0).then(|| now.saturating_sub(self.cpu).as_secs_f64() * 100.0 / wall)
    }
}

/// Wraps a host's registered memory ([`Hooks::memory`]).
pub type WrapMemory = fn(Box<dyn Memory>) -> Box<dyn Memory>;

/// Hooks a backend calls while it runs.
#[derive(Debug, Clone, Default)]
pub struct Hooks {
    /// Print live per-plane bandwidth on stderr.
    pub live: bool,
    /// Start each live line with this (under mpirun: the rank's host, `h3`).
    pub live_label: Option<String>,
    /// Hand every counter sample to the telemetry sinks (and the JSON sample series).
    pub telemetry: Option<Arc<Telemetry>>,
    /// Interpose on each host's registered memory (tests: a fault between the engine and
    /// the memory, which `--check` must catch). Simulator backend only.
    pub memory: Option<WrapMemory>,
}

/// The messages completed in one reporting period (`--run_infinitely`).
#[derive(Debug, Clone)]
pub struct PeriodReport {
    pub size: u64,
    /// Messages' worth of payload placed in the period, all sending QPs.
    pub messages: u64,
    /// Payload bytes placed in the period.
    pub bytes: u64,
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
        line_gbps_per_qp: 0.0,
        pace_origin: None,
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

/// The buffer layout of a run of `size`-byte messages: one source and one destination slot
/// per QP, or under `--check` one per outstanding message (see [`check`](super::check)).
pub fn layout(s: &Settings, size: u64) -> Layout {
    layout_of(s, size, s.qps)
}

/// [`layout`] for a host with `qps` QPs (a traffic pattern gives hosts different counts).
pub fn layout_of(s: &Settings, size: u64, qps: u32) -> Layout {
    Layout {
        qps,
        slots: if s.check { s.tx_depth.max(1) } else { 1 },
        size,
    }
}

/// When QP `qp` of host `host` starts pacing, after its application: `--mode storage` gives
/// each QP its own seeded phase within one burst period (free-running clients); every other
/// mode starts every QP of every host together.
pub fn start_offset(s: &Settings, size: u64, host: u32, qp: u32) -> mrc_transport::Duration {
    let Pattern::Storage { rate, burst } = s.pattern else {
        return mrc_transport::Duration::ZERO;
    };
    let period = rate.burst_period_ns(burst, size).max(1.0);
    let h = super::check::message_salt(super::check::qp_salt(host, qp), s.seed);
    let unit = (h >> 11) as f64 / (1u64 << 53) as f64;
    mrc_transport::Duration((unit * period) as u64)
}

/// A host's memory: a plain buffer, or under `--check` one that checks every byte its peers
/// place, with the check's state. Its QP `i` receives from `senders[i]` (a host number, as
/// the check's patterns name it, and its QP index there).
pub fn pattern_memory(
    s: &Settings,
    size: u64,
    senders: &[(u32, u32)],
) -> (Box<dyn Memory>, Option<SharedDest>) {
    let l = layout_of(s, size, senders.len() as u32);
    if s.check {
        let (mem, dest) = CheckedMemory::with_senders(l, senders);
        (Box::new(mem), Some(dest))
    } else {
        (Box::new(vec![0u8; l.registered_bytes() as usize]), None)
    }
}

/// The messages known complete into each QP of host `h` (an index of `wiring`): its peers'
/// completions, or its own receive completions (`records[h]` as `wiring.local[h]`).
pub fn pattern_delivered(
    test: TestKind,
    records: &[Vec<QpRecord>],
    wiring: &super::traffic::Wiring,
    h: usize,
) -> Vec<u64> {
    wiring.local[h]
        .iter()
        .zip(&records[h])
        .map(|(q, mine)| {
            let sender = &records[q.peer_host][q.peer_qp];
            delivered(
                test,
                std::slice::from_ref(sender),
                std::slice::from_ref(mine),
            )[0]
        })
        .collect()
}

/// How host `me` (an index of `w`) takes part in each of its QPs: its role in the flow, its
/// buffer slots and its peer's (`qpn(i)`: its QP `i`; `rkey(p)`: the key host `p` registered
/// its buffer with). Every backend that runs a pattern wires its hosts with this.
pub fn pattern_qps(
    s: &Settings,
    size: u64,
    w: &super::traffic::Wiring,
    me: usize,
    lkey: u32,
    qpn: impl Fn(usize) -> mrc_transport::verbs::Qpn,
    rkey: impl Fn(usize) -> u32,
) -> Vec<super::app::QpWiring> {
    let (c_send, c_recv, s_send, s_recv) = roles(s.test, s.bidirectional);
    let host = w.hosts[me];
    let l = layout_of(s, size, w.local[me].len() as u32);
    w.local[me]
        .iter()
        .enumerate()
        .map(|(i, q)| {
            let (send, receive) = if q.src_side {
                (c_send, c_recv)
            } else {
                (s_send, s_recv)
            };
            let peer_l = layout_of(s, size, w.local[q.peer_host].len() as u32);
            super::app::QpWiring {
                qpn: qpn(i),
                send,
                receive,
                lkey,
                local_addr: l.src(i as u32),
                remote_addr: peer_l.dst(q.peer_qp as u32),
                rkey: rkey(q.peer_host),
                slots: l.slots,
                pattern_host: s.check.then_some(host),
                start_offset: start_offset(s, size, host, i as u32),
            }
        })
        .collect()
}

/// [`finish_checks`] for a traffic pattern: host `h`'s QP `i` was written by its peer in
/// `wiring`.
pub fn finish_pattern_checks(
    test: TestKind,
    records: &[Vec<QpRecord>],
    dests: &[Option<SharedDest>],
    wiring: &super::traffic::Wiring,
) -> Option<CheckResult> {
    let mut total: Option<CheckResult> = None;
    for (h, dest) in dests.iter().enumerate() {
        let Some(dest) = dest else { continue };
        let done = pattern_delivered(test, records, wiring, h);
        let r = lock_dest(dest).finish(&done);
        total.get_or_insert_default().add(&r);
    }
    total
}

/// The messages of each QP known complete in the direction `sender` → `receiver`: the
/// sender's completions (bandwidth tests) or the receiver's receive completions.
pub fn delivered(test: TestKind, sender: &[QpRecord], receiver: &[QpRecord]) -> Vec<u64> {
    sender
        .iter()
        .zip(receiver)
        .map(|(s, r)| {
            if test.is_bw() {
                s.completed.max(r.received)
            } else {
                r.received
            }
        })
        .collect()
}

/// Close the checks of a run: each direction's destination (`dests[h]`: what host `h`
/// received) against what its sender completed.
pub fn finish_checks(
    test: TestKind,
    records: &[Vec<QpRecord>],
    dests: &[Option<SharedDest>],
) -> Option<CheckResult> {
    let mut total: Option<CheckResult> = None;
    for (h, dest) in dests.iter().enumerate() {
        let Some(dest) = dest else { continue };
        let peer = 1 - h;
        let done = delivered(test, &records[peer], &records[h]);
        let r = lock_dest(dest).finish(&done);
        total.get_or_insert_default().add(&r);
    }
    total
}

/// The CC profile (`--cc`) and EV profile (`--evs`) every QP uses (profile 0 of each), and
/// the payload MTU (`-m`) where it is no larger than what the configuration carries (a
/// plan's MTU caps it; the backend refuses an `-m` it could not honour).
pub fn profiles(cc: CcChoice, evs: Option<u16>, mtu: Option<u32>, ec: &mut EndpointConfig) {
    if let Some(m) = mtu
        && m <= ec.payload_mtu
    {
        ec.payload_mtu = m;
    }
    ec.cc_profiles = vec![match cc {
        CcChoice::Nscc => CcProfile::Nscc(NsccConfig::default()),
        CcChoice::Fixed => CcProfile::Fixed { window_bytes: None },
        CcChoice::Roce => CcProfile::Dcqcn(DcqcnConfig::default()),
    }];
    if let Some(n) = evs {
        let p = &mut ec.ev_profiles[0];
        p.evs_per_plane = n;
        p.active_per_plane = p.active_per_plane.min(n);
        p.floor_per_plane = p.floor_per_plane.min(p.active_per_plane);
    }
}

/// [`profiles`] from the settings.
pub fn apply_profiles(s: &Settings, ec: &mut EndpointConfig) {
    profiles(s.cc, s.evs, s.perftest.mtu, ec);
}
