//! `--backend mem`: two software NICs (mrc-nic) in this process, one poll thread each, over
//! in-memory links (one switch per plane, ECMP mode), real time. The perf applications run
//! on their own threads through the NIC's application driver, the same `PerfApp` the
//! simulator drives.

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use anyhow::Context as _;
use mrc_nic::io::mem::router_mac;
use mrc_nic::{MemFabric, MemIo, NextHop, Nic, NicConfig, NicHandle};
use mrc_transport::verbs::{CqHandle, MrKeys, Qpn, RemoteNic};

use super::app::{PerfApp, QpWiring, lock};
use super::backend::{
    Addresses, CpuMeter, FabricInfo, Hooks, QpAddress, SizeOutcome, app_params, finish_checks,
    layout, roles,
};
use super::check::SharedDest;
use super::nic_backend::{
    LocalQps, PSNS, connect, create_qps, drive, endpoint_config, host_counters, nic_addr,
};
use super::settings::Settings;
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

/// A side's QPs (INIT) and its registered buffer.
fn make_side(handle: &NicHandle, s: &Settings, size: u64, host: u32) -> anyhow::Result<Side> {
    let LocalQps {
        cq,
        qpns,
        keys,
        dest,
    } = create_qps(handle, s, size, host)?;
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
    info: FabricInfo,
    /// The first size's NICs, QPs and buffers, connected before the banner (perftest prints
    /// the QPs' addresses after the exchange, before the table).
    prepared: Option<Connected>,
}

/// Two NIC threads with their QPs connected and their buffers registered, for one size.
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
    /// Both ends of every QP, from NIC 0's side.
    fn addresses(&self, s: &Settings) -> Addresses {
        let end = |h: usize| -> Vec<QpAddress> {
            self.sides[h]
                .qpns
                .iter()
                .enumerate()
                .map(|(i, q)| QpAddress {
                    qpn: q.0,
                    psn: PSNS[h],
                    rkey: self.sides[h].keys.rkey,
                    vaddr: layout(s, self.size).dst(i as u32),
                    gid: nic_addr(h as u16),
                })
                .collect()
        };
        Addresses {
            local: end(0),
            remote: end(1),
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
        let ev = ec.ev_profiles[0];
        let first = settings.sizes.first().copied().unwrap_or(0);
        let connected = connect_pair(settings, planes, first)?;
        if settings.perftest.cpu_util && connected.nics.iter().any(|n| n.cpu_time().is_none()) {
            crate::bail_usage!(
                "--cpu_util: this system does not expose a thread's CPU time (/proc/self/task)"
            );
        }
        Ok(Self {
            settings: settings.clone(),
            planes,
            info: FabricInfo {
                clock: "real",
                fabric: format!("in-memory links, {planes} planes, ECMP"),
                planes,
                hosts: 2,
                client: "nic0".into(),
                server: "nic1".into(),
                link_gbps: 0,
                payload_mtu: ec.payload_mtu,
                paths_per_plane: 0,
                evs_per_plane: ev.evs_per_plane,
                active_evs_per_plane: ev.active_per_plane,
                faults: Vec::new(),
                routing: "ECMP",
                exchange: "in process",
                addresses: connected.addresses(settings),
            },
            prepared: Some(connected),
        })
    }

    pub fn info(&self) -> &FabricInfo {
        &self.info
    }

    /// Run one size on two fresh NICs (the first size on those connected at the start).
    pub fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        let s = &self.settings;
        let planes = self.planes;
        let Connected { nics, sides, .. } = match self.prepared.take() {
            Some(c) if c.size == size => c,
            _ => connect_pair(s, planes, size)?,
        };
        let (c_send, c_recv, s_send, s_recv) = roles(s.test, s.bidirectional);
        let params = app_params(s, size);
        let l = layout(s, size);
        let apps: Vec<Arc<Mutex<PerfApp>>> = [(0, c_send, c_recv), (1, s_send, s_recv)]
            .into_iter()
            .map(|(me, send, receive)| {
                let wiring = (0..s.qps)
                    .map(|i| QpWiring {
                        qpn: sides[me].qpns[i as usize],
                        send,
                        receive,
                        lkey: sides[me].keys.lkey,
                        local_addr: l.src(i),
                        remote_addr: l.dst(i),
                        rkey: sides[1 - me].keys.rkey,
                        slots: l.slots,
                        pattern_host: s.check.then_some(me as u32),
                        start_offset: super::backend::start_offset(s, size, me as u32, i),
                    })
                    .collect();
                Arc::new(Mutex::new(PerfApp::new(params, wiring)))
            })
            .collect();
        let qpns = [sides[0].qpns.clone(), sides[1].qpns.clone()];
        let snapshot = |at: StdDuration| -> anyhow::Result<Snapshot> {
            Ok(Snapshot {
                at_ns: at.as_nanos() as u64,
                hosts: vec![
                    host_counters(0, &sides[0].handle, planes, &qpns[0])?,
                    host_counters(1, &sides[1].handle, planes, &qpns[1])?,
                ],
            })
        };
        let drivers = [
            (&sides[0].handle, sides[0].cq),
            (&sides[1].handle, sides[1].cq),
        ];
        let cpu_times = || nics.iter().map(Nic::cpu_time).collect::<Vec<_>>();
        let meter = s
            .perftest
            .cpu_util
            .then(|| CpuMeter::start(&cpu_times()))
            .flatten();
        let (error, elapsed) = drive(s, size, hooks, planes, &apps, &drivers, &snapshot)?;
        let nic_cpu_percent = meter.and_then(|m| m.percent(&cpu_times()));
        let counters = snapshot(elapsed)?;
        let records: Vec<Vec<_>> = apps
            .iter()
            .map(|a| lock(a).records().cloned().collect())
            .collect();
        let dests: Vec<_> = sides.iter().map(|x| x.dest.clone()).collect();
        let check = finish_checks(s.test, &records, &dests);
        for nic in nics {
            nic.shutdown().context("stopping a NIC thread")?;
        }
        Ok(SizeOutcome {
            size,
            records,
            sending: vec![vec![c_send; s.qps as usize], vec![s_send; s.qps as usize]],
            counters,
            check,
            error,
            nic_cpu_percent,
        })
    }
}

/// Two fresh NIC threads over a fresh in-memory fabric, their QPs connected to each other
/// and their buffers of `size` messages registered.
fn connect_pair(s: &Settings, planes: u8, size: u64) -> anyhow::Result<Connected> {
    let mut fabric = MemFabric::new(usize::from(planes)).ring_depth(RING_DEPTH);
    fabric.add_host(nic_addr(0));
    fabric.add_host(nic_addr(1));
    let (ios, _control) = fabric.build();
    let [io0, io1]: [MemIo; 2] = ios
        .try_into()
        .map_err(|_| anyhow::anyhow!("the in-memory fabric has two hosts"))?;
    let mut nics: Vec<Nic<MemIo>> = Vec::new();
    let mut sides = Vec::new();
    for (h, io) in [(0u16, io0), (1, io1)] {
        let mut cfg = NicConfig::new(endpoint_config(s, h, planes));
        cfg.next_hops = (0..planes)
            .map(|p| NextHop::Static(router_mac(p)))
            .collect();
        cfg.thread_name = format!("nic{h}");
        let (nic, handle) = Nic::spawn(cfg, io).context("starting a NIC thread")?;
        nics.push(nic);
        sides.push(make_side(&handle, s, size, u32::from(h))?);
    }
    for i in 0..s.qps as usize {
        for (me, peer) in [(0, 1), (1, 0)] {
            connect(
                &sides[me].handle,
                sides[me].qpns[i],
                RemoteNic {
                    addr: nic_addr(peer as u16),
                    host: None,
                },
                sides[peer].qpns[i],
                PSNS[me],
                PSNS[peer],
            )?;
        }
    }
    Ok(Connected { size, nics, sides })
}
