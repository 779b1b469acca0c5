//! `--backend dpdk`: one side per process, on DPDK ports (one per plane), with perftest's
//! out-of-band exchange over TCP: `mrc-perf write_bw --backend dpdk --eal "…"` waits on
//! `-p` as the server, `mrc-perf write_bw SERVER --backend dpdk --eal "…"` connects as the
//! client. One line of text per message:
//!
//! ```text
//! client → server  HELLO {parameters}          server → client  OK | MISMATCH why | ERR why
//! both, per size   QPS addr rkey qpn,qpn,...   (then connect, wait for the links; the
//!                                              first size's before the banner, whose
//!                                              address lines print what was exchanged)
//! both             READY                       (then run)
//! both             DONE {records, check}
//! client           STOPPED  (its NIC stopped polling: memif teardown order, docs/nics.md)
//! ```
//!
//! Each side prints the tables of what its own NIC saw; the client's result row adds the
//! server's direction with `-b`, as perftest does.

use std::net::{Ipv6Addr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::Duration as StdDuration;

use anyhow::{Context as _, bail};
use mrc_nic::io::dpdk::{DpdkIo, DpdkPorts};
use mrc_nic::{Nic, NicConfig, NicHandle};
use mrc_transport::verbs::{CqHandle, MrKeys, Qpn};
use serde_json::{Value, json};

use super::app::{PerfApp, QpRecord, QpWiring, lock};
use super::backend::{
    Addresses, CpuMeter, FabricInfo, Hooks, QpAddress, SizeOutcome, app_params, finish_checks,
    layout, roles,
};
use super::check::SharedDest;
use super::dpdk_plan::PlanEnds;
use super::nic_backend::{
    LocalQps, PSNS, connect, create_qps, drive, endpoint_config, host_counters, nic_addr,
};
use super::settings::Settings;
use crate::metrics::counters::Snapshot;
use exchange::{
    EXCHANGE_TIMEOUT, Peer, connect_with_retry, mismatches, parameters, record_from, record_json,
};
use mrc_transport::verbs::RemoteNic;

pub(crate) mod exchange;

/// This process's side of a two-host run.
#[derive(Debug)]
pub struct DpdkBackend {
    settings: Settings,
    /// 0: client, 1: server (the `--check` pattern and role numbers).
    me: u16,
    planes: u8,
    /// The NIC and its ports; dropped in the memif-safe order by [`Drop`].
    nic: Option<Nic<DpdkIo>>,
    handle: NicHandle,
    peer: Option<Peer>,
    /// The two hosts in the plan with `--plan` (SRv6 mode), `None` in ECMP mode.
    ends: Option<PlanEnds>,
    peer_addr: Ipv6Addr,
    info: FabricInfo,
    eal: Option<mrc_dpdk::Eal>,
    /// The first size's QPs, connected to the peer's before the banner (perftest prints the
    /// QPs' addresses after the exchange, before the table).
    prepared: Option<Connected>,
}

/// This side's QPs of one size, connected to the peer's, and the buffer they use.
#[derive(Debug)]
struct Connected {
    size: u64,
    cq: CqHandle,
    qpns: Vec<Qpn>,
    keys: MrKeys,
    /// `--check`: what this side receives, checked as it lands.
    dest: Option<SharedDest>,
    /// The peer's rkey, QPNs and NIC address, from its QPS line.
    peer_rkey: u32,
    peer_qpns: Vec<Qpn>,
    peer_addr: Ipv6Addr,
}

impl DpdkBackend {
    pub fn new(s: &Settings) -> anyhow::Result<Self> {
        let eal_args: Vec<String> = s
            .eal
            .as_deref()
            .unwrap_or_default()
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        let names = mrc_dpdk::eal_port_names(&eal_args);
        if names.is_empty() {
            crate::bail_usage!(
                "--backend dpdk needs its ports in --eal: one --vdev=NAME,... or -a PCI per plane, in plane order"
            );
        }
        let planes = u8::try_from(names.len())
            .ok()
            .filter(|p| (1..=8).contains(p))
            .ok_or_else(|| {
                crate::usage!(
                    "--eal names {} ports: 1 to 8 ports (one per plane)",
                    names.len()
                )
            })?;
        // Role numbers: 0 the client, 1 the server.
        let me = u16::from(s.server.is_none());
        // The exchange first: a peer that is not there fails before the EAL takes the ports.
        let (mut peer, what) = if let Some(host) = &s.server {
            let addr = format!("{host}:{}", s.port);
            let stream = connect_with_retry(&addr).with_context(|| {
                format!(
                    "cannot reach the server at {addr}: is `mrc-perf {} --backend dpdk` running there with -p {}?",
                    s.test.name(),
                    s.port
                )
            })?;
            (Peer::new(stream)?, format!("client of {addr}"))
        } else {
            let listener = TcpListener::bind(("0.0.0.0", s.port)).map_err(|e| {
                crate::usage!(
                    "-p {}: cannot listen ({e}): give a free port with -p",
                    s.port
                )
            })?;
            eprintln!("waiting for the client on TCP port {}", s.port);
            let (stream, from) = listener.accept()?;
            (Peer::new(stream)?, format!("server, client {from}"))
        };
        let mine = parameters(s, names.len());
        if me == 0 {
            peer.send(&format!("HELLO {mine}"))?;
            // The server's ports are open when it answers: a memif client port (or any port
            // that connects to its peer at start) then finds the other side listening.
            peer.expect("OK")?;
        } else {
            let theirs: Value =
                serde_json::from_str(&peer.expect("HELLO")?).context("the client's parameters")?;
            let diff = mismatches(&theirs, &mine);
            if !diff.is_empty() {
                let why = format!("mismatched parameters ({})", diff.join("; "));
                peer.send(&format!("MISMATCH {why}"))?;
                crate::bail_usage!("{why}: run both sides with the same options");
            }
        }
        // The server opens its ports before it answers, the client after: ports that connect
        // to their peer when started (memif clients) never race a peer not yet listening.
        let open = || -> anyhow::Result<_> {
            let eal = mrc_dpdk::Eal::init(&eal_args).map_err(|e| match e {
                mrc_dpdk::Error::NotBuilt { .. } => {
                    crate::usage!("DPDK is not available: {e}: use --backend sim or mem")
                }
                _ => crate::usage!("--eal: DPDK cannot start with these arguments: {e}"),
            })?;
            let mut ports = DpdkPorts::new(names.clone());
            ports.promiscuous = false;
            let io = ports
                .open(&eal)
                .map_err(|e| {
                    crate::usage!("--eal: cannot open the ports {}: {e:#}", names.join(", "))
                })?
                .pop()
                .ok_or_else(|| anyhow::anyhow!("no DPDK port opened"))?;
            Ok((eal, io))
        };
        let (eal, io) = if me == 1 {
            let opened = open();
            match &opened {
                Ok(_) => peer.send("OK")?,
                Err(e) => peer.send(&format!("ERR the server could not open its ports: {e:#}"))?,
            }
            opened?
        } else {
            open()?
        };
        let ends = s
            .plan
            .is_some()
            .then(|| PlanEnds::new(s, me, planes))
            .transpose()?;
        let mut ec = endpoint_config(s, me, planes);
        if let Some(e) = &ends {
            e.apply(&mut ec);
        }
        let (payload_mtu, ev) = (ec.payload_mtu, ec.ev_profiles[0].clone());
        if let Some(m) = s.perftest.mtu
            && m != payload_mtu
        {
            crate::bail_usage!(
                "-m {m}: the plan's IP MTU carries at most {payload_mtu}-byte payloads"
            );
        }
        let mut cfg = NicConfig::new(ec);
        cfg.thread_name = "mrc-perf-nic".into();
        if let Some(e) = &ends {
            cfg.next_hops = e.next_hops();
            cfg.ndp.extra_addrs = vec![e.plan.host_sid_addr(e.me)];
        }
        let (nic, handle) = Nic::spawn(cfg, io).context("starting the NIC thread")?;
        let info = FabricInfo {
            clock: "real",
            fabric: format!("dpdk: {}", names.join(", ")),
            planes,
            hosts: 2,
            client: if me == 0 {
                "this host".into()
            } else {
                "peer".into()
            },
            server: if me == 1 {
                "this host".into()
            } else {
                "peer".into()
            },
            link_gbps: 0,
            payload_mtu,
            paths_per_plane: ends.as_ref().map_or(0, PlanEnds::paths_per_plane),
            evs_per_plane: ev.evs_per_plane,
            active_evs_per_plane: ev.active_per_plane,
            routing: if ends.is_some() { "SRv6" } else { "ECMP" },
            faults: Vec::new(),
            // perftest's name for its TCP exchange (as opposed to rdma_cm).
            exchange: "Ethernet",
            addresses: Addresses::default(),
        };
        eprintln!("mrc-perf: {what}");
        if s.perftest.cpu_util && nic.cpu_time().is_none() {
            crate::bail_usage!(
                "--cpu_util: this system does not expose a thread's CPU time (/proc/self/task)"
            );
        }
        let mut this = Self {
            settings: s.clone(),
            me,
            planes,
            nic: Some(nic),
            handle,
            peer: Some(peer),
            peer_addr: ends.as_ref().map_or(nic_addr(1 - me), PlanEnds::peer_addr),
            ends,
            info,
            eal: Some(eal),
            prepared: None,
        };
        let first = this.connect_size(s.sizes.first().copied().unwrap_or(0))?;
        this.info.addresses = this.addresses(&first);
        this.prepared = Some(first);
        Ok(this)
    }

    /// This side's NIC address.
    fn my_addr(&self) -> Ipv6Addr {
        self.ends
            .as_ref()
            .map_or(nic_addr(self.me), PlanEnds::nic_addr)
    }

    /// Both ends of every QP, from this side.
    fn addresses(&self, c: &Connected) -> Addresses {
        let s = &self.settings;
        let me = usize::from(self.me);
        let end = |qpns: &[Qpn], psn, rkey, gid| -> Vec<QpAddress> {
            qpns.iter()
                .enumerate()
                .map(|(i, q)| QpAddress {
                    qpn: q.0,
                    psn,
                    rkey,
                    vaddr: layout(s, c.size).dst(i as u32),
                    gid,
                })
                .collect()
        };
        Addresses {
            local: end(&c.qpns, PSNS[me], c.keys.rkey, self.my_addr()),
            remote: end(&c.peer_qpns, PSNS[1 - me], c.peer_rkey, c.peer_addr),
        }
    }

    pub fn info(&self) -> &FabricInfo {
        &self.info
    }

    fn peer(&mut self) -> &mut Peer {
        self.peer
            .as_mut()
            .expect("the exchange lives as long as the backend")
    }

    /// This side's QPs and buffer for `size`, exchanged with the peer's and connected.
    fn connect_size(&mut self, size: u64) -> anyhow::Result<Connected> {
        let s = self.settings.clone();
        let handle = self.handle.clone();
        let h = &handle;
        let LocalQps {
            cq,
            qpns,
            keys,
            dest,
        } = create_qps(h, &s, size, u32::from(self.me))?;
        let my_addr = self.my_addr();
        let list: Vec<String> = qpns.iter().map(|q| q.0.to_string()).collect();
        self.peer()
            .send(&format!("QPS {my_addr} {} {}", keys.rkey, list.join(",")))?;
        let line = self.peer().expect("QPS")?;
        let mut w = line.split_whitespace();
        let (Some(addr), Some(rkey), Some(theirs)) = (w.next(), w.next(), w.next()) else {
            bail!("a malformed QPS line from the peer: {line:?}");
        };
        self.peer_addr = addr.parse().context("the peer's NIC address")?;
        let rkey: u32 = rkey.parse().context("the peer's rkey")?;
        let theirs: Vec<Qpn> = theirs
            .split(',')
            .map(|q| q.parse().map(Qpn))
            .collect::<Result<_, _>>()
            .context("the peer's QPNs")?;
        if theirs.len() != qpns.len() {
            bail!(
                "the peer has {} QPs, this side {}",
                theirs.len(),
                qpns.len()
            );
        }
        let me = usize::from(self.me);
        let remote = RemoteNic {
            addr: self.peer_addr,
            host: self.ends.as_ref().map(|e| e.peer.0),
        };
        for (mine, theirs) in qpns.iter().zip(&theirs) {
            connect(h, *mine, remote, *theirs, PSNS[me], PSNS[1 - me])?;
        }
        wait_links(h)?;
        Ok(Connected {
            size,
            cq,
            qpns,
            keys,
            dest,
            peer_rkey: rkey,
            peer_qpns: theirs,
            peer_addr: self.peer_addr,
        })
    }

    /// Run one size against the peer (the first on the QPs connected at the start).
    pub fn run_size(&mut self, size: u64, hooks: &Hooks) -> anyhow::Result<SizeOutcome> {
        let s = self.settings.clone();
        let handle = self.handle.clone();
        let h = &handle;
        let Connected {
            cq,
            qpns,
            keys,
            dest,
            peer_rkey: rkey,
            ..
        } = match self.prepared.take() {
            Some(c) if c.size == size => c,
            _ => self.connect_size(size)?,
        };
        self.peer().send("READY")?;
        self.peer().expect("READY")?;

        let (c_send, c_recv, s_send, s_recv) = roles(s.test, s.bidirectional);
        let (send, receive) = if self.me == 0 {
            (c_send, c_recv)
        } else {
            (s_send, s_recv)
        };
        let l = layout(&s, size);
        let wiring = (0..s.qps)
            .map(|i| QpWiring {
                qpn: qpns[i as usize],
                send,
                receive,
                lkey: keys.lkey,
                local_addr: l.src(i),
                remote_addr: l.dst(i),
                rkey,
                slots: l.slots,
                pattern_host: s.check.then_some(u32::from(self.me)),
                start_offset: super::backend::start_offset(&s, size, u32::from(self.me), i),
            })
            .collect();
        let app = Arc::new(Mutex::new(PerfApp::new(app_params(&s, size), wiring)));
        let planes = self.planes;
        let me = u32::from(self.me);
        let snapshot = |at: StdDuration| -> anyhow::Result<Snapshot> {
            Ok(Snapshot {
                at_ns: at.as_nanos() as u64,
                hosts: vec![host_counters(me, h, planes, &qpns)?],
            })
        };
        let cpu_time = || vec![self.nic.as_ref().and_then(Nic::cpu_time)];
        let meter = s
            .perftest
            .cpu_util
            .then(|| CpuMeter::start(cpu_time))
            .flatten();
        let (mut error, elapsed) = drive(
            &s,
            size,
            hooks,
            planes,
            std::slice::from_ref(&app),
            &[(h, cq)],
            &snapshot,
        )?;
        let nic_cpu_percent = meter.and_then(|m| m.percent(cpu_time));
        let mine: Vec<QpRecord> = lock(&app).records().cloned().collect();
        let done = json!({
            "records": mine.iter().map(record_json).collect::<Vec<_>>(),
            "error": error,
        });
        self.peer().send(&format!("DONE {done}"))?;
        // The peer may still be running (a server's part of write_bw ends at once): as long
        // as its run may take.
        let theirs: Value =
            serde_json::from_str(&self.peer().expect_within("DONE", done_wait(&s))?)
                .context("the peer's results")?;
        if let Some(e) = theirs["error"].as_str() {
            error.get_or_insert_with(|| format!("peer: {e}"));
        }
        let counters = snapshot(elapsed)?;
        let peer_records: Vec<QpRecord> = theirs["records"]
            .as_array()
            .map(|a| a.iter().map(record_from).collect())
            .unwrap_or_default();
        let (records, sending) = if self.me == 0 {
            (
                vec![mine, peer_records],
                vec![vec![c_send; s.qps as usize], vec![s_send; s.qps as usize]],
            )
        } else {
            (
                vec![peer_records, mine],
                vec![vec![c_send; s.qps as usize], vec![s_send; s.qps as usize]],
            )
        };
        // What the peer completed was placed here: every message it names must be whole.
        let mut dests = vec![None, None];
        dests[usize::from(self.me)] = dest;
        let check = finish_checks(s.test, &records, &dests);
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

impl Drop for DpdkBackend {
    /// memif's teardown order (docs/nics.md): the client stops polling first and says so; the
    /// server then stops and closes its ports; the client closes its own once it saw the links
    /// go down (mrc-dpdk serialises that close with memif's own teardown).
    fn drop(&mut self) {
        let nic = self.nic.take();
        if self.me == 0 {
            let exit = nic.and_then(|n| n.shutdown().ok());
            if let Some(p) = self.peer.as_mut() {
                let _ = p.send("STOPPED");
            }
            if let Some(exit) = exit {
                let ports = exit.io.ports().clone();
                let deadline = std::time::Instant::now() + StdDuration::from_secs(5);
                while (0..usize::from(self.planes)).any(|p| ports.link(p).is_some_and(|l| l.up))
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(StdDuration::from_millis(1));
                }
                drop(ports);
                drop(exit);
            }
        } else {
            if let Some(p) = self.peer.as_mut() {
                let _ = p.expect("STOPPED");
            }
            drop(nic.and_then(|n| n.shutdown().ok()));
        }
        self.peer = None;
        drop(self.eal.take());
    }
}

/// How long one side waits for the other's DONE after its own run ended: as long as the
/// other's run may still take (its driver's limit) and the exchange's own timeout; for a run
/// without end, as long as it takes.
fn done_wait(s: &Settings) -> Option<StdDuration> {
    (!s.run_infinitely).then(|| super::nic_backend::run_limit(s) + EXCHANGE_TIMEOUT)
}

/// Wait until every port can send (link up, next hop known).
fn wait_links(h: &NicHandle) -> anyhow::Result<()> {
    let deadline = std::time::Instant::now() + EXCHANGE_TIMEOUT;
    while !h.ports()?.iter().all(|p| p.usable) {
        if std::time::Instant::now() > deadline {
            bail!("the DPDK links never came up (is the peer's side of every port running?)");
        }
        std::thread::sleep(StdDuration::from_millis(5));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_side_waits_for_its_peers_done_as_long_as_the_peers_run_may_take() {
        let wait = |args: &[&str]| done_wait(&super::super::cli::parse(args).expect("parses"));
        // A server's part of write_bw ends at once; its client runs -D and then drains.
        assert!(wait(&["-D", "600"]).expect("bounded") > StdDuration::from_mins(10));
        assert!(wait(&["-n", "5"]).expect("bounded") >= EXCHANGE_TIMEOUT);
        assert_eq!(wait(&["-D", "1", "--run_infinitely"]), None);
    }
}
