//! What the two backends on software NICs (mrc-nic) share, `--backend mem` (both NICs in
//! this process) and `--backend dpdk` (one per process, on DPDK ports): the engine
//! configuration and addresses of a side, its QPs and buffer, the QP connection, the NIC's
//! counters, and the threads that drive the perf applications through the NIC's
//! application driver in real time.

use std::net::Ipv6Addr;
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use mrc_nic::{AppDriver, MemoryRegion, NicHandle};
use mrc_srv6::wire::EthernetAddress;
use mrc_transport::verbs::{
    Access, CqHandle, MrKeys, QpCap, QpInitAttr, QpTransition, Qpn, RemoteNic, RtrAttr, RtsAttr,
};
use mrc_transport::{Duration, EndpointConfig, PathMode, PortConfig};

use super::app::{PerfApp, SharedApp, lock};
use super::backend::{BUFFER_IOVA, Hooks, apply_profiles, layout_of, pattern_memory};
use super::check::SharedDest;
use super::live::Live;
use super::report::Periods;
use super::sampling::Sampling;
use super::settings::{Settings, TestKind};
use crate::metrics::counters::{HostCounters, Snapshot};

/// The PSNs the QPs of each side start at (client, server).
pub const PSNS: [u32; 2] = [100, 200];

/// The NIC address of host `h` (0 the client and 1 the server of a pair; a pattern's hosts
/// 0 to N-1).
pub fn nic_addr(h: u16) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0x6d72, 0x63, 0, 0, 0, 0, h + 1)
}

/// The engine configuration of one side: ECMP mode, `planes` ports, the CC and EV profiles
/// asked for, timers relaxed for threads that share cores.
pub fn endpoint_config(s: &Settings, host: u16, planes: u8) -> EndpointConfig {
    let ports = (0..planes)
        .map(|_| {
            PortConfig::new(
                EthernetAddress([2, 0, 0, 0, 0, 0]),
                EthernetAddress([2, 0, 0, 0, 0, 1]),
            )
        })
        .collect();
    let mut ec = EndpointConfig::new(
        s.seed ^ u64::from(host),
        nic_addr(host),
        ports,
        PathMode::Ecmp,
    );
    ec.timers.initial_rtt = Duration::from_micros(500);
    ec.timers.pto_min = Duration::from_millis(5);
    // Planes are served by threads the OS schedules: packets of one plane can trail another's
    // by a scheduling quantum without being lost.
    ec.timers.reorder_min = Duration::from_millis(1);
    apply_profiles(s, &mut ec);
    ec
}

/// One side's QPs (INIT), their CQ and the registered buffer they use.
#[derive(Debug)]
pub struct LocalQps {
    pub cq: CqHandle,
    pub qpns: Vec<Qpn>,
    pub keys: MrKeys,
    /// `--check`: what this side receives, checked as it lands.
    pub dest: Option<SharedDest>,
}

/// This side's QPs (INIT) and its registered buffer of `size` messages; `host`: 0 the client,
/// 1 the server (the `--check` pattern it expects is the other's).
pub fn create_qps(
    handle: &NicHandle,
    s: &Settings,
    size: u64,
    host: u32,
) -> anyhow::Result<LocalQps> {
    let senders: Vec<(u32, u32)> = (0..s.qps).map(|i| (1 - host, i)).collect();
    create_qps_from(handle, s, size, &senders)
}

/// A host's QPs (INIT), one per entry of `senders`, and its registered buffer: QP `i`
/// receives from `senders[i]` (a host and its QP index there), as a traffic pattern wires it.
pub fn create_qps_from(
    handle: &NicHandle,
    s: &Settings,
    size: u64,
    senders: &[(u32, u32)],
) -> anyhow::Result<LocalQps> {
    let pd = handle.alloc_pd()?;
    let cq = handle.create_cq(1 << 15)?;
    let mut qpns = Vec::new();
    for _ in senders {
        let q = handle.create_qp(&QpInitAttr {
            pd,
            send_cq: cq,
            recv_cq: cq,
            cap: QpCap {
                max_send_wr: s.tx_depth.max(s.cq_mod) + 1,
                max_recv_wr: s.rx_depth.max(1),
                max_send_sge: 1,
            },
            sq_sig_all: false,
        })?;
        handle.modify_qp(q, QpTransition::Init(s.init_attr()))?;
        qpns.push(q);
    }
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let (keys, dest) = if s.check {
        // Handed to the NIC thread: it checks every byte where the engine places it.
        let (mem, dest) = pattern_memory(s, size, senders);
        (handle.reg_mr_owned(pd, BUFFER_IOVA, mem, access)?, dest)
    } else {
        let l = layout_of(s, size, senders.len() as u32);
        let region = MemoryRegion::from_slice(&vec![0u8; l.registered_bytes() as usize]);
        (handle.reg_mr(pd, BUFFER_IOVA, &region, access)?, None)
    };
    Ok(LocalQps {
        cq,
        qpns,
        keys,
        dest,
    })
}

/// INIT → RTR → RTS towards the peer's QP.
pub fn connect(
    handle: &NicHandle,
    me: Qpn,
    remote: RemoteNic,
    peer: Qpn,
    my_psn: u32,
    peer_psn: u32,
) -> anyhow::Result<()> {
    handle.modify_qp(me, QpTransition::Rtr(RtrAttr::new(remote, peer, peer_psn)))?;
    handle.modify_qp(me, QpTransition::Rts(RtsAttr::new(my_psn)))?;
    Ok(())
}

/// Counters of one NIC's QPs.
pub fn host_counters(
    h: u32,
    handle: &NicHandle,
    planes: u8,
    qpns: &[Qpn],
) -> anyhow::Result<HostCounters> {
    let mut ps = Vec::new();
    for p in 0..planes {
        ps.push(handle.plane_stats(p)?.unwrap_or_default());
    }
    let mut qs = Vec::new();
    for &q in qpns {
        qs.push((
            q,
            handle.qp_stats(q)?.unwrap_or_default(),
            handle.ev_stats(q)?,
        ));
    }
    let mut hc = HostCounters::new(h, &ps, &qs, handle.endpoint_stats()?);
    hc.set_qp_states(|q| handle.query_qp(q).ok().map(|i| i.state));
    Ok(hc)
}

/// How long a host's applications may run before their driver gives up (unless the run is
/// endless): 120 s plus four times `-D`.
pub fn run_limit(s: &Settings) -> StdDuration {
    StdDuration::from_secs(
        120 + s
            .duration
            .map_or(0, |d| d.0 / 1_000_000_000)
            .saturating_mul(4),
    )
}

/// Run `apps` (one per NIC handle and CQ in `drivers`) on their own threads until they are
/// done, printing live lines, publishing metrics and `--run_infinitely` periods from here.
/// Returns the first failure and how long it ran.
pub fn drive(
    s: &Settings,
    size: u64,
    hooks: &Hooks,
    planes: u8,
    apps: &[Arc<Mutex<PerfApp>>],
    drivers: &[(&NicHandle, CqHandle)],
    snapshot: &dyn Fn(StdDuration) -> anyhow::Result<Snapshot>,
) -> anyhow::Result<(Option<String>, StdDuration)> {
    let limit = run_limit(s);
    let threads: Vec<_> = apps
        .iter()
        .zip(drivers)
        .map(|(app, &(handle, cq))| {
            let mut shared = SharedApp(app.clone());
            let mut driver = AppDriver::new(handle).cq(cq);
            if !s.run_infinitely {
                driver = driver.deadline(limit);
            }
            std::thread::spawn(move || driver.run(&mut shared).map(|_| ()))
        })
        .collect();
    let start = StdInstant::now();
    let period = match (s.run_infinitely, s.duration, s.live_every) {
        (true, Some(d), _) => d,
        (_, _, Some(d)) if d.0 > 0 => d,
        _ => Duration::from_millis(200),
    };
    let mut sampling = Sampling::new(s, period);
    let mut live = Live::new(planes, sampling.live_min_ns()).labelled(hooks.live_label.clone());
    let mut periods = Periods::default();
    let mut ending = false;
    // At least one turn, so a run has a sample whatever the scheduler did before this line.
    loop {
        // Until the next tick of the schedule (docs/metrics.md, "Resolution"), at most 50 ms
        // (to see the applications finish).
        let to_tick = sampling.until_next_tick_ns(start.elapsed().as_nanos() as u64);
        std::thread::sleep(StdDuration::from_nanos(to_tick).min(StdDuration::from_millis(50)));
        let now = start.elapsed();
        if hooks.live || hooks.telemetry.is_some() {
            let snap = snapshot(now)?;
            if hooks.live {
                live.print(&snap);
            }
            if let Some(t) = &hooks.telemetry
                && let Some(missed) = sampling.telemetry_due(snap.at_ns)
            {
                t.sample_after(&snap, missed);
            }
        }
        if s.run_infinitely {
            let delivered = snapshot(now)?.delivered_bytes();
            let rtts = periods.report(s, size, apps, now.as_nanos() as u64, delivered);
            if let Some(t) = &hooks.telemetry
                && s.test == TestKind::WriteLat
            {
                for (h, r) in rtts.iter().enumerate() {
                    t.exporter().latency.observe_round_trips(h as u32, r);
                }
            }
            std::thread::sleep(StdDuration::from_nanos(period.0));
        }
        if threads.iter().all(std::thread::JoinHandle::is_finished) {
            break;
        }
        if !ending && super::stop::requested() {
            // SIGINT or SIGTERM (stop.rs): the run ends here, as if its time were up.
            ending = true;
            for a in apps {
                lock(a).end_now();
            }
        }
    }
    let mut error = None;
    for d in threads {
        match d.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => error = Some(format!("application driver: {e}")),
            Err(_) => error = Some("an application thread panicked".to_owned()),
        }
    }
    if let Some(e) = apps.iter().find_map(|a| lock(a).error().map(str::to_owned)) {
        error = Some(e);
    }
    Ok((error, start.elapsed()))
}
