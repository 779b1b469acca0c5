//! `--backend mem`: software NICs (mrc-nic) in this process, one poll thread each, over
//! in-memory links (one switch per plane, ECMP mode), real time: the client and the server,
//! or with `--pattern` every host of the pattern. The perf applications run
//! on their own threads through the NIC's application driver, the same `PerfApp` the
//! simulator drives.

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use anyhow::Context as _;
use mrc_nic::io::mem::router_mac;
use mrc_nic::{MemFabric, MemIo, NextHop, Nic, NicConfig, NicHandle};
use mrc_transport::verbs::{CqHandle, MrKeys, Qpn, RemoteNic};

use super::app::{PerfApp, lock};
use super::backend::{
    Addresses, CpuMeter, FabricInfo, Hooks, QpAddress, SizeOutcome, app_params,
    finish_pattern_checks, layout_of, pattern_qps,
};
use super::check::SharedDest;
use super::nic_backend::{
    LocalQps, PSNS, connect, create_qps_from, drive, endpoint_config, host_counters, nic_addr,
};
use super::settings::Settings;
use super::traffic::{self, Flow, TrafficSpec, Wiring};
use crate::metrics::counters::Snapshot;

/// Planes of the in-memory fabric unless `--planes` says otherwise.
pub const DEFAULT_PLANES: u8 = 4;

/// Frames each in-memory port queues: a TX depth of 4 KiB messages in flight on one plane.
const RING_DEPTH: usize = 4096;

/// One side's verbs objects.
struct Side {
    handle: NicHandle,
    cq: CqHandle,
    qpns: Vec<Qpn>,
    keys: MrKeys,
    /// `--check`: what this side received, checked as it landed.
    dest: Option<SharedDest>,
}

/// A host's QPs (INIT) and its registered buffer; QP `i` receives from `senders[i]`.
fn make_side(
    handle: &NicHandle,
    s: &Settings,
    size: u64,
    senders: &[(u32, u32)],
) -> anyhow::Result<Side> {
    let LocalQps {
        cq,
        qpns,
        keys,
        dest,
    } = create_qps_from(handle, s, size, senders)?;
    Ok(Side {
        handle: handle.clone(),
        cq,
        qpns,
        keys,
        dest,
    })
}

/// The in-memory backend.
#[derive(Debug)]
pub struct MemBackend {
    settings: Settings,
    planes: u8,
    /// The hosts and their QPs: the client and server, or a pattern's.
    wiring: Wiring,
    info: FabricInfo,
    /// The first size's NICs, QPs and buffers, connected before the banner (perftest prints
    /// the QPs' addresses after the exchange, before the table).
    prepared: Option<Connected>,
}

/// The NIC threads with their QPs connected and their buffers registered, for one size.
struct Connected {
    size: u64,
    nics: Vec<Nic<MemIo>>,
    sides: Vec<Side>,
}

impl std::fmt::Debug for Connected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connected")
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

impl Connected {
    /// Both ends of every QP of the first flow (a pair's every QP), from its source's side.
    fn addresses(&self, s: &Settings, w: &Wiring) -> Addresses {
        let end = |h: usize, src_side: bool| -> Vec<QpAddress> {
            let l = layout_of(s, self.size, w.local[h].len() as u32);
            w.local[h]
                .iter()
                .zip(&self.sides[h].qpns)
                .enumerate()
                .filter(|(_, (q, _))| q.flow == 0 && q.src_side == src_side)
                .map(|(i, (_, qpn))| QpAddress {
                    qpn: qpn.0,
                    psn: psn(src_side),
                    rkey: self.sides[h].keys.rkey,
                    vaddr: l.dst(i as u32),
                    gid: nic_addr(w.hosts[h] as u16),
                })
                .collect()
        };
        let f = w.flows[0];
        let (c, v) = (
            w.host_index(f.src).unwrap_or_default(),
            w.host_index(f.dst).unwrap_or_default(),
        );
        Addresses {
            local: end(c, true),
            remote: end(v, false),
        }
    }
}

impl MemBackend {
    pub fn new(settings: &Settings) -> anyhow::Result<Self> {
        let planes = settings.planes.unwrap_or(DEFAULT_PLANES);
        if !(1..=8).contains(&planes) {
            crate::bail_usage!("--planes {planes}: the in-memory fabric has 1 to 8 planes");
        }
        let ec = endpoint_config(settings, 0, planes);
        ec.validate()
            .map_err(|e| crate::usage!("--evs {:?} on {planes} planes: {e}", settings.evs))?;
        let ev = ec.ev_profiles[0].clone();
        let wiring = mem_wiring(settings, planes)?;
        let first = settings.sizes.first().copied().unwrap_or(0);
        let connected = connect_hosts(settings, planes, first, &wiring)?;
        if settings.perftest.cpu_util && connected.nics.iter().any(|n| n.cpu_time().is_none()) {
            crate::bail_usage!(
                "--cpu_util: this system does not expose a thread's CPU time (/proc/self/task)"
            );
        }
        let (client, server) = match &settings.traffic {
            Some(t) => (wiring.describe(&t.pattern), "-".to_owned()),
            None => ("nic0".into(), "nic1".into()),
        };
        let addresses = connected.addresses(settings, &wiring);
        Ok(Self {
            settings: settings.clone(),
            planes,
            info: FabricInfo {
                clock: "real",
                fabric: format!("in-memory links, {planes} planes, ECMP"),
                planes,
                hosts: wiring.hosts.len() as u32,
                client,
                server,
                link_gbps: 0,
                payload_mtu: ec.payload_mtu,
                paths_per_plane: 0,
                evs_per_plane: ev.evs_per_plane,
                active_evs_per_plane: ev.active_per_plane,
                faults: Vec::new(),
                routing: "ECMP",
                exchange: "in process",
                addresses,
            },
            wiring,
            prepared: Some(connected),
        })
    }

    pub fn info(&self) -> &FabricInfo {
        &self.info
    }

    /// The hosts, flows and QPs of the run.
    pub fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// Run one size on two fresh NICs (the first size on those connected at the start).
    pub fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        let s = &self.settings;
        let planes = self.planes;
        let Connected { nics, sides, .. } = match self.prepared.take() {
            Some(c) if c.size == size => c,
            _ => connect_hosts(s, planes, size, &self.wiring)?,
        };
        let w = &self.wiring;
        let params = app_params(s, size);
        let mut sending = Vec::with_capacity(w.hosts.len());
        let apps: Vec<Arc<Mutex<PerfApp>>> = w
            .local
            .iter()
            .enumerate()
            .map(|(me, _)| {
                let wiring = pattern_qps(
                    s,
                    size,
                    w,
                    me,
                    sides[me].keys.lkey,
                    |i| sides[me].qpns[i],
                    |p| sides[p].keys.rkey,
                );
                sending.push(wiring.iter().map(|q| q.send).collect());
                Arc::new(Mutex::new(PerfApp::new(params, wiring)))
            })
            .collect();
        let snapshot = |at: StdDuration| -> anyhow::Result<Snapshot> {
            Ok(Snapshot {
                at_ns: at.as_nanos() as u64,
                hosts: sides
                    .iter()
                    .zip(&w.hosts)
                    .map(|(side, &h)| host_counters(h, &side.handle, planes, &side.qpns))
                    .collect::<anyhow::Result<_>>()?,
            })
        };
        let drivers: Vec<(&NicHandle, CqHandle)> =
            sides.iter().map(|x| (&x.handle, x.cq)).collect();
        let cpu_times = || nics.iter().map(Nic::cpu_time).collect::<Vec<_>>();
        let meter = s
            .perftest
            .cpu_util
            .then(|| CpuMeter::start(cpu_times))
            .flatten();
        let (error, elapsed) = drive(s, size, hooks, planes, &apps, &drivers, &snapshot)?;
        let nic_cpu_percent = meter.and_then(|m| m.percent(cpu_times));
        let counters = snapshot(elapsed)?;
        let records: Vec<Vec<_>> = apps
            .iter()
            .map(|a| lock(a).records().cloned().collect())
            .collect();
        let dests: Vec<_> = sides.iter().map(|x| x.dest.clone()).collect();
        let check = finish_pattern_checks(s.test, &records, &dests, w);
        for nic in nics {
            nic.shutdown().context("stopping a NIC thread")?;
        }
        Ok(SizeOutcome {
            size,
            records,
            sending,
            counters,
            check,
            error,
            nic_cpu_percent,
        })
    }
}

/// The PSN a QP starts at: the flow's source side's, or its destination side's.
const fn psn(src_side: bool) -> u32 {
    if src_side { PSNS[0] } else { PSNS[1] }
}

/// The hosts of a mem run: the client (0) and server (1), or a pattern's over `--hosts` (4
/// by default), numbered as in a built-in fabric of that size.
fn mem_wiring(s: &Settings, planes: u8) -> anyhow::Result<Wiring> {
    let flows = match &s.traffic {
        Some(t) => {
            let hosts = t.hosts.unwrap_or(DEFAULT_HOSTS);
            if hosts > MAX_HOSTS {
                crate::bail_usage!(
                    "--hosts {hosts}: the in-memory fabric runs a NIC thread per host, at most \
                     {MAX_HOSTS} (--backend sim for more)"
                );
            }
            let plan = mrc_srv6::plan::Plan::from_toml(
                &super::plan::sized_plan_toml(planes, hosts),
                "<in-memory hosts>",
            )?;
            let spec = TrafficSpec {
                hosts: Some(hosts),
                ..t.clone()
            };
            traffic::flows(&spec, &plan, s.seed)?
        }
        None => vec![Flow {
            src: 0,
            dst: 1,
            victim: false,
        }],
    };
    Ok(Wiring::new(flows, s.qps))
}

/// Hosts of a `--pattern` on the in-memory fabric without `--hosts`.
pub const DEFAULT_HOSTS: u32 = 4;
/// At most this many NIC threads.
pub const MAX_HOSTS: u32 = 64;

/// Fresh NIC threads over a fresh in-memory fabric, one per host of `w`, their QPs connected
/// to their peers and their buffers of `size` messages registered.
fn connect_hosts(s: &Settings, planes: u8, size: u64, w: &Wiring) -> anyhow::Result<Connected> {
    let mut fabric = MemFabric::new(usize::from(planes)).ring_depth(RING_DEPTH);
    for &h in &w.hosts {
        fabric.add_host(nic_addr(h as u16));
    }
    let (ios, _control) = fabric.build();
    let mut nics: Vec<Nic<MemIo>> = Vec::new();
    let mut sides = Vec::new();
    for ((me, io), &h) in ios.into_iter().enumerate().zip(&w.hosts) {
        let mut cfg = NicConfig::new(endpoint_config(s, h as u16, planes));
        cfg.next_hops = (0..planes)
            .map(|p| NextHop::Static(router_mac(p)))
            .collect();
        cfg.thread_name = format!("nic{h}");
        let (nic, handle) = Nic::spawn(cfg, io).context("starting a NIC thread")?;
        nics.push(nic);
        let senders: Vec<(u32, u32)> = w.local[me]
            .iter()
            .map(|q| (w.hosts[q.peer_host], q.peer_qp as u32))
            .collect();
        sides.push(make_side(&handle, s, size, &senders)?);
    }
    for (me, qps) in w.local.iter().enumerate() {
        for (i, q) in qps.iter().enumerate() {
            connect(
                &sides[me].handle,
                sides[me].qpns[i],
                RemoteNic {
                    addr: nic_addr(w.hosts[q.peer_host] as u16),
                    host: None,
                },
                sides[q.peer_host].qpns[q.peer_qp],
                psn(q.src_side),
                psn(!q.src_side),
            )?;
        }
    }
    Ok(Connected { size, nics, sides })
}
