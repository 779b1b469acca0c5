//! `--backend dpdk --pattern …`: one host per process, as network teams test a fabric:
//! `mpirun -np N mrc-perf write_bw --backend dpdk --pattern all2all --memif NAME …` starts N
//! ranks, each on its own DPDK ports (one per plane) with its own NIC thread; rank r is host r
//! of the pattern. On one machine the ports are memif links to `mrc-coll switch --memif NAME`
//! (a star per plane, forwarding by NIC address); elsewhere `--eal` names each rank's ports
//! (`{rank}` is replaced by the rank).
//!
//! ```text
//!  ranks: mpirun's environment (OMPI_COMM_WORLD_*, PMI_*) ─► bootstrap: MPI (feature `mpi`)
//!         or a TCP rendezvous at --tcp-addr (rank 0 listens)
//!  all-gather parameters ─► any mismatch: every rank names it and exits 2
//!  switch HELLO ─► EAL, ports, NIC thread
//!  per size: all-gather QPs (address, rkey, QPNs) ─► connect ─► links ─► barrier ─► run
//!            all-gather records + counters ─► checks ─► all-gather checks ─► rank 0 prints
//!  barrier ─► stop polling ─► switch STOPPED ─► links down ─► close
//! ```

use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use anyhow::Context as _;
use mrc_coll::backend::dpdk::{SwitchLink, close_after_peer, eal_args, memif_rank_eal};
use mrc_coll::backend::nic::rank_addr;
use mrc_coll::bootstrap::{Bootstrap, mpirun_env};
use mrc_nic::io::dpdk::{DpdkIo, DpdkPorts};
use mrc_nic::io::mem::router_mac;
use mrc_nic::{NextHop, Nic, NicConfig, NicHandle};
use mrc_transport::verbs::{CqHandle, MrKeys, Qpn, RemoteNic};
use serde_json::{Value, json};

use super::app::{PerfApp, QpRecord, lock};
use super::backend::{
    Addresses, CheckResult, FabricInfo, Hooks, SizeOutcome, app_params, pattern_delivered,
    pattern_qps, roles,
};
use super::check::{SharedDest, lock_dest};
use super::dpdk_backend::exchange::{parameters, record_from, record_json};
use super::nic_backend::{
    LocalQps, PSNS, connect, create_qps_from, drive, endpoint_config, host_counters,
};
use super::settings::Settings;
use super::traffic::{self, TrafficSpec, Wiring};
use crate::metrics::counters::{HostCounters, PlaneRow, Snapshot};
use crate::ranks::{CONNECT_TIMEOUT, DEFAULT_SWITCH, bootstrap_at, socket_addr};

/// Planes of a `--memif` fabric without `--planes`.
pub const DEFAULT_MEMIF_PLANES: u8 = 2;

/// This process's host of a pattern run over DPDK ports.
pub struct RanksBackend {
    settings: Settings,
    rank: usize,
    ranks: usize,
    planes: u8,
    boot: Box<dyn Bootstrap>,
    /// How the ranks met, in words.
    pub how: String,
    nic: Option<Nic<DpdkIo>>,
    handle: NicHandle,
    eal: Option<mrc_dpdk::Eal>,
    switch: Option<SwitchLink>,
    wiring: Wiring,
    info: FabricInfo,
}

impl std::fmt::Debug for RanksBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RanksBackend")
            .field("rank", &self.rank)
            .field("ranks", &self.ranks)
            .finish_non_exhaustive()
    }
}

/// This host's QPs of one size, connected to their peers.
struct Connected {
    cq: CqHandle,
    qpns: Vec<Qpn>,
    keys: MrKeys,
    dest: Option<SharedDest>,
    /// Per rank: its rkey and QPNs (in its wiring order).
    peers: Vec<RankQps>,
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct RankQps {
    rank: usize,
    rkey: u32,
    qpns: Vec<u32>,
}

fn gather<T: serde::Serialize + serde::de::DeserializeOwned>(
    boot: &mut dyn Bootstrap,
    mine: &T,
    what: &str,
) -> anyhow::Result<Vec<T>> {
    let all = boot
        .all_gather(&serde_json::to_vec(mine)?)
        .with_context(|| format!("exchanging {what}"))?;
    all.iter()
        .enumerate()
        .map(|(r, b)| serde_json::from_slice(b).with_context(|| format!("rank {r}'s {what}")))
        .collect()
}

/// The parameters of every rank that differ from rank 0's, as `name: rank 0 X, rank R Y`.
pub fn rank_mismatches(all: &[Value]) -> Vec<String> {
    let Some(first) = all.first().and_then(Value::as_object) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (r, v) in all.iter().enumerate().skip(1) {
        let Some(o) = v.as_object() else {
            out.push(format!("rank {r}: unreadable parameters"));
            continue;
        };
        for (k, x) in first {
            let y = o.get(k).unwrap_or(&Value::Null);
            if y != x {
                out.push(format!("{k}: rank 0 {x}, rank {r} {y}"));
            }
        }
    }
    out
}

impl RanksBackend {
    pub fn new(s: &Settings) -> anyhow::Result<Self> {
        let Some(spec) = &s.traffic else {
            anyhow::bail!("the rank backend runs a --pattern");
        };
        // Every refusal before the ranks meet.
        let (eal, switch_addr, planes) = ports(s)?;
        let (rank, ranks) = match (s.tcp_rank, mpirun_env()) {
            (Some((r, n)), _) => (r, n),
            (None, Some(rn)) => rn,
            (None, None) => crate::bail_usage!(
                "--pattern on --backend dpdk runs one host per process: start them with \
                 `mpirun -np N mrc-perf …`, or give each --tcp-rank R --tcp-ranks N"
            ),
        };
        if ranks < 2 {
            crate::bail_usage!("--pattern over {ranks} process: mpirun -np 2 or more");
        }
        if let Some(h) = spec.hosts
            && h as usize != ranks
        {
            crate::bail_usage!(
                "--hosts {h}: on --backend dpdk the hosts are the {ranks} ranks of mpirun; \
                 leave --hosts out"
            );
        }
        let eal = eal_args(&eal, rank);
        let addr = socket_addr(
            s.tcp_addr
                .as_deref()
                .unwrap_or(&format!("127.0.0.1:{}", s.port)),
            "--tcp-addr",
        )?;
        let (mut boot, how) = bootstrap_at(addr, rank, ranks, s.tcp_rank.is_none())?;
        if rank == 0 {
            eprintln!("mrc-perf: rank 0 of {ranks}, bootstrap: {how}");
        }
        // Every rank must run the same test: refuse a difference by name, on every rank.
        let mut mine = parameters(s, usize::from(planes));
        mine["--pattern"] = json!(spec.pattern.name());
        let all: Vec<Value> = gather(boot.as_mut(), &mine, "parameters")?;
        let diff = rank_mismatches(&all);
        if !diff.is_empty() {
            crate::bail_usage!(
                "the ranks' parameters differ ({}): start every rank with the same options",
                diff.join("; ")
            );
        }
        let plan = mrc_srv6::plan::Plan::from_toml(
            &super::plan::sized_plan_toml(planes, ranks as u32),
            "<mpirun ranks>",
        )?;
        let spec = TrafficSpec {
            hosts: Some(ranks as u32),
            ..spec.clone()
        };
        let wiring = Wiring::new(traffic::flows(&spec, &plan, s.seed)?, s.qps);
        let switch = switch_addr
            .map(|a| SwitchLink::join(a, rank, usize::from(planes), CONNECT_TIMEOUT))
            .transpose()
            .map_err(|e| anyhow::anyhow!("rank {rank}: {e}"))?;
        let names = mrc_dpdk::eal_port_names(&eal);
        let dpdk = mrc_dpdk::Eal::init(&eal).map_err(|e| match e {
            mrc_dpdk::Error::NotBuilt { .. } => {
                crate::usage!("DPDK is not available: {e}: use --backend sim or mem")
            }
            _ => crate::usage!("--eal: DPDK cannot start with these arguments: {e}"),
        })?;
        let mut dports = DpdkPorts::new(names.clone());
        dports.promiscuous = false;
        dports.mbufs = 4095;
        let io = dports
            .open(&dpdk)
            .map_err(|e| anyhow::anyhow!("rank {rank}: cannot open {}: {e:#}", names.join(", ")))?
            .pop()
            .ok_or_else(|| anyhow::anyhow!("no DPDK port opened"))?;
        let mut ec = endpoint_config(s, rank as u16, planes);
        // The switch forwards by NIC address: mrc-coll's rank addresses.
        ec.nic_addr = rank_addr(rank);
        let (payload_mtu, ev) = (ec.payload_mtu, ec.ev_profiles[0].clone());
        let mut cfg = NicConfig::new(ec);
        cfg.next_hops = (0..planes)
            .map(|p| NextHop::Static(router_mac(p)))
            .collect();
        cfg.thread_name = format!("mrc-perf-nic{rank}");
        cfg.idle = mrc_nic::IdlePolicy::Yield { after: 64 };
        let (nic, handle) = Nic::spawn(cfg, io).context("starting the NIC thread")?;
        let info = FabricInfo {
            clock: "real",
            fabric: format!("dpdk, {ranks} ranks: {}", names.join(", ")),
            planes,
            hosts: ranks as u32,
            client: wiring.describe(&spec.pattern),
            server: "-".into(),
            link_gbps: 0,
            payload_mtu,
            paths_per_plane: 0,
            evs_per_plane: ev.evs_per_plane,
            active_evs_per_plane: ev.active_per_plane,
            faults: Vec::new(),
            routing: "ECMP",
            exchange: "mpirun ranks",
            addresses: Addresses::default(),
        };
        Ok(Self {
            settings: s.clone(),
            rank,
            ranks,
            planes,
            boot,
            how,
            nic: Some(nic),
            handle,
            eal: Some(dpdk),
            switch,
            wiring,
            info,
        })
    }

    pub fn info(&self) -> &FabricInfo {
        &self.info
    }

    pub fn wiring(&self) -> &Wiring {
        &self.wiring
    }

    /// This rank's sinks: `--metrics` on the port given plus the rank (every rank of one
    /// machine its own port; the address printed on stderr), its own Pushgateway instance
    /// (`…-rRANK`) and textfile (`mrc-perf-rRANK.prom`).
    pub fn rank_telemetry(&self, t: &mut crate::metrics::telemetry::TelemetryConfig) {
        if let Some(a) = t.metrics.as_mut()
            && a.port() != 0
        {
            a.set_port(a.port().saturating_add(self.rank as u16));
        }
        t.push_instance = format!("{}-r{}", t.push_instance, self.rank);
        t.textfile_name = format!("mrc-perf-r{}.prom", self.rank);
    }

    /// Rank 0 prints; the others only take part.
    pub fn lead(&self) -> bool {
        self.rank == 0
    }

    /// What this rank's sinks publish of the run's counters: its own host alone (every rank
    /// has every host's plane rows for the report; each host's series are its own rank's).
    /// `None` when the pattern gives this rank no flow: its NIC's samples stand.
    pub fn own_counters(&self, all: &Snapshot) -> Option<Snapshot> {
        let own = all.hosts.iter().find(|h| h.host as usize == self.rank)?;
        Some(Snapshot {
            at_ns: all.at_ns,
            hosts: vec![own.clone()],
        })
    }

    /// This rank's index in the wiring (`None`: the pattern gives it no flow).
    fn me(&self) -> Option<usize> {
        self.wiring.host_index(self.rank as u32)
    }

    fn connect_size(&mut self, size: u64) -> anyhow::Result<Connected> {
        let s = &self.settings;
        let w = &self.wiring;
        let local = self.me().map(|i| w.local[i].clone()).unwrap_or_default();
        let senders: Vec<(u32, u32)> = local
            .iter()
            .map(|q| (w.hosts[q.peer_host], q.peer_qp as u32))
            .collect();
        let LocalQps {
            cq,
            qpns,
            keys,
            dest,
        } = create_qps_from(&self.handle, s, size, &senders)?;
        let mine = RankQps {
            rank: self.rank,
            rkey: keys.rkey,
            qpns: qpns.iter().map(|q| q.0).collect(),
        };
        let peers = gather(self.boot.as_mut(), &mine, "QPs")?;
        for (q, &qpn) in local.iter().zip(&qpns) {
            let peer = w.hosts[q.peer_host] as usize;
            let theirs = peers
                .get(peer)
                .and_then(|p| p.qpns.get(q.peer_qp))
                .ok_or_else(|| anyhow::anyhow!("rank {peer} has no QP {}", q.peer_qp))?;
            let psn = |src: bool| if src { PSNS[0] } else { PSNS[1] };
            connect(
                &self.handle,
                qpn,
                RemoteNic {
                    addr: rank_addr(peer),
                    host: None,
                },
                Qpn(*theirs),
                psn(q.src_side),
                psn(!q.src_side),
            )?;
        }
        let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
        while !self.handle.ports()?.iter().all(|p| p.usable) {
            if std::time::Instant::now() > deadline {
                anyhow::bail!(
                    "rank {}: the DPDK links never came up (is `mrc-coll switch` running?)",
                    self.rank
                );
            }
            std::thread::sleep(StdDuration::from_millis(5));
        }
        // Every QP of every rank is ready before anyone sends.
        self.boot.barrier().context("the barrier before the run")?;
        Ok(Connected {
            cq,
            qpns,
            keys,
            dest,
            peers,
        })
    }

    /// Run one size on every rank; every rank gets every rank's records and counters.
    pub fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        let c = self.connect_size(size)?;
        let s = self.settings.clone();
        let w = self.wiring.clone();
        let me = self.me();
        let (c_send, _, s_send, _) = roles(s.test, s.bidirectional);
        let wiring = match me {
            Some(i) => pattern_qps(
                &s,
                size,
                &w,
                i,
                c.keys.lkey,
                |k| c.qpns[k],
                |p| c.peers[w.hosts[p] as usize].rkey,
            ),
            None => Vec::new(),
        };
        let (planes, rank, h) = (self.planes, self.rank as u32, self.handle.clone());
        let snapshot = |at: StdDuration| -> anyhow::Result<Snapshot> {
            Ok(Snapshot {
                at_ns: at.as_nanos() as u64,
                hosts: vec![host_counters(rank, &h, planes, &c.qpns)?],
            })
        };
        let hooks = Hooks {
            // Every rank's own host, one line each on mpirun's stderr.
            live_label: Some(format!("h{}", self.rank)),
            ..hooks.clone()
        };
        // Each NIC counts time from its own start: this rank's clock against the wall clock,
        // so rank 0 can put every rank's times on one axis (exact on one machine; across
        // machines as good as their clocks' sync, e.g. PTP).
        let anchor = wall_offset_ns(h.now());
        // One start time for every rank: rank 0 picks it a little after the latest rank's
        // now, every rank waits for it on its wall clock, so synchronized bursts (and on/off
        // phases) start together on every host.
        let nows: Vec<i64> = gather(self.boot.as_mut(), &wall_ns(), "start times")?;
        let start = nows.iter().copied().max().unwrap_or(0) + START_MARGIN_NS;
        let mut params = app_params(&s, size);
        // The common start on this NIC's clock: bursts are due at the same instants on every
        // rank, even one the OS runs late.
        params.pace_origin = Some(mrc_transport::Instant(
            u64::try_from(start - anchor).unwrap_or(0),
        ));
        let app = Arc::new(Mutex::new(PerfApp::new(params, wiring)));
        wait_until_wall(start);
        let (error, elapsed) = drive(
            &s,
            size,
            &hooks,
            planes,
            std::slice::from_ref(&app),
            &[(&h, c.cq)],
            &snapshot,
        )?;
        let mine: Vec<QpRecord> = lock(&app).records().cloned().collect();
        let counters = snapshot(elapsed)?;
        let planes_rows: Vec<PlaneRow> = counters
            .hosts
            .first()
            .map(|hc| hc.planes.clone())
            .unwrap_or_default();
        let done = json!({
            "records": mine.iter().map(record_json).collect::<Vec<_>>(),
            "planes": planes_rows,
            "error": error,
            "wall_offset_ns": anchor,
        });
        let all: Vec<Value> = gather(self.boot.as_mut(), &done, "results")?;
        // Every host's records, in wiring order, their times on rank 0's clock.
        let offset = |r: usize| all[r]["wall_offset_ns"].as_i64().unwrap_or(0);
        let records: Vec<Vec<QpRecord>> = w
            .hosts
            .iter()
            .map(|&r| {
                let by = offset(r as usize) - offset(0);
                all[r as usize]["records"]
                    .as_array()
                    .map(|a| a.iter().map(|v| shifted(record_from(v), by)).collect())
                    .unwrap_or_default()
            })
            .collect();
        // What this host received: each message its peers completed must be whole here.
        let check = match (&c.dest, me) {
            (Some(dest), Some(i)) => {
                Some(lock_dest(dest).finish(&pattern_delivered(s.test, &records, &w, i)))
            }
            _ => None,
        };
        let checks: Vec<Option<CheckResult>> = gather(self.boot.as_mut(), &check, "checks")?;
        let check = s.check.then(|| {
            let mut total = CheckResult::default();
            for c in checks.iter().flatten() {
                total.add(c);
            }
            total
        });
        let error = all
            .iter()
            .enumerate()
            .find_map(|(r, v)| v["error"].as_str().map(|e| format!("rank {r}: {e}")));
        let sending: Vec<Vec<bool>> = w
            .local
            .iter()
            .map(|qps| {
                qps.iter()
                    .map(|q| if q.src_side { c_send } else { s_send })
                    .collect()
            })
            .collect();
        let hosts: Vec<HostCounters> = w
            .hosts
            .iter()
            .map(|&r| {
                // This host's counters whole (QPs and EVs too); the others' plane rows.
                if r == rank
                    && let Some(own) = counters.hosts.first()
                {
                    return own.clone();
                }
                let planes: Vec<PlaneRow> =
                    serde_json::from_value(all[r as usize]["planes"].clone()).unwrap_or_default();
                HostCounters {
                    host: r,
                    planes,
                    ..HostCounters::default()
                }
            })
            .collect();
        Ok(SizeOutcome {
            size,
            records,
            sending,
            counters: Snapshot {
                at_ns: elapsed.as_nanos() as u64,
                hosts,
            },
            check,
            error,
            nic_cpu_percent: None,
        })
    }
}

impl Drop for RanksBackend {
    /// memif's teardown order (docs/nics.md): every rank done, then each stops polling, tells
    /// the switch, waits for it to close its side, and closes its own.
    fn drop(&mut self) {
        let _ = self.boot.barrier();
        let exit = self.nic.take().and_then(|n| n.shutdown().ok());
        if let Some(sw) = self.switch.as_mut() {
            sw.stopped();
        }
        if let Some(exit) = exit {
            close_after_peer(&exit.io, usize::from(self.planes), self.switch.is_some());
            drop(exit);
        }
        drop(self.eal.take());
        drop(self.switch.take());
    }
}

/// How far after the latest rank's clock the common start is: room for every rank to get
/// the time (a bootstrap round can take tens of milliseconds: TCP's delayed ACKs) and wait.
const START_MARGIN_NS: i64 = 250_000_000;

/// The wall clock, ns since the Unix epoch.
fn wall_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// Wall-clock time less this NIC's clock, ns: add it to a NIC time to get wall time.
fn wall_offset_ns(now: mrc_transport::Instant) -> i64 {
    wall_ns() - now.0 as i64
}

/// Sleep until the wall clock reads `at` (ns), the last 200 us spinning.
fn wait_until_wall(at: i64) {
    loop {
        let left = at - wall_ns();
        if left <= 0 {
            return;
        }
        if left > 200_000 {
            std::thread::sleep(StdDuration::from_nanos((left - 200_000) as u64));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// `r` with every time moved by `by` ns (from another rank's clock onto this one's).
fn shifted(mut r: QpRecord, by: i64) -> QpRecord {
    let mv = |t: mrc_transport::Instant| mrc_transport::Instant(t.0.saturating_add_signed(by));
    for t in &mut r.post_times {
        *t = mv(*t);
    }
    for c in &mut r.completions {
        c.1 = mv(c.1);
    }
    r.first_post = r.first_post.map(mv);
    r.last_completion = r.last_completion.map(mv);
    r
}

/// This rank's EAL template (`{rank}` in it), the switch to join and the planes.
fn ports(s: &Settings) -> anyhow::Result<(String, Option<std::net::SocketAddr>, u8)> {
    match (&s.eal, &s.memif) {
        (Some(_), Some(_)) => crate::bail_usage!("--eal or --memif, not both"),
        (Some(e), None) => {
            let n = mrc_dpdk::eal_port_names(&eal_args(e, 0)).len();
            let planes = u8::try_from(n)
                .ok()
                .filter(|p| (1..=8).contains(p))
                .ok_or_else(|| crate::usage!("--eal names {n} ports: 1 to 8, one per plane"))?;
            let switch = s
                .switch
                .as_deref()
                .map(|a| socket_addr(a, "--switch"))
                .transpose()?;
            Ok((e.clone(), switch, planes))
        }
        (None, Some(name)) => {
            let planes = s.planes.unwrap_or(DEFAULT_MEMIF_PLANES);
            let switch = socket_addr(s.switch.as_deref().unwrap_or(DEFAULT_SWITCH), "--switch")?;
            Ok((
                memif_rank_eal(name, usize::from(planes)),
                Some(switch),
                planes,
            ))
        }
        (None, None) => crate::bail_usage!(
            "--pattern on --backend dpdk needs each rank's ports: --memif NAME (one machine, \
             with `mrc-coll switch --ranks N --memif NAME`) or --eal \"...\" (with {{rank}})"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_move_onto_rank_0s_clock() {
        let r = QpRecord {
            post_times: vec![mrc_transport::Instant(100)],
            completions: vec![(1, mrc_transport::Instant(150))],
            first_post: Some(mrc_transport::Instant(100)),
            last_completion: Some(mrc_transport::Instant(150)),
            ..QpRecord::default()
        };
        let m = shifted(r, -40);
        assert_eq!(m.post_times[0].0, 60);
        assert_eq!(m.completions[0].1.0, 110);
        assert_eq!(
            (m.first_post.unwrap().0, m.last_completion.unwrap().0),
            (60, 110)
        );
    }

    #[test]
    fn mismatches_name_the_rank_and_both_values() {
        let a = json!({"-s": [4096], "-n": 5});
        let b = json!({"-s": [65536], "-n": 5});
        assert_eq!(
            rank_mismatches(&[a.clone(), a.clone(), b]),
            ["-s: rank 0 [4096], rank 2 [65536]"]
        );
        assert!(rank_mismatches(&[a.clone(), a]).is_empty());
    }
}
