//! `--backend dpdk`: every rank a process on its own DPDK ports (one per plane, from its EAL
//! arguments), running its software NIC (`mrc-nic`) on a poll thread and its program on the
//! calling thread. The ranks find each other through a [`Bootstrap`] (mpirun or the TCP
//! rendezvous): each publishes its NIC address, buffers and QPNs, connects its QPs once it
//! has everyone's, and the ranks' reports are gathered at the end so every rank can print the
//! table. On one machine the ports are memif links to `mrc-coll switch` ([`super::switch`]).
//!
//! ```text
//!  switch control: HELLO (its memif servers listen) ─► EAL, ports, NIC thread
//!  bootstrap: all-gather RankInfo ─► connect QPs ─► links usable ─► barrier ─► Program
//!  bootstrap: all-gather RankReport ─► stop polling ─► switch: STOPPED ─► links down ─► close
//! ```

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use mrc_nic::io::dpdk::{DpdkIo, DpdkPorts};
use mrc_nic::io::mem::router_mac;
use mrc_nic::{AppDriver, IdlePolicy, NextHop, Nic, NicConfig, NicError};
use mrc_transport::verbs::{QpCap, Qpn};

use super::nic::{RankInfo, RankNic, endpoint_config, peers_of};
use super::{BufferSizes, pairs};
use crate::bootstrap::{Bootstrap, BootstrapError};
use crate::comm::{Comm, DEFAULT_RECV_DEPTH};
use crate::program::{Program, ProgramOpts, RankReport, Row};

/// Why a rank could not run.
#[derive(Debug, thiserror::Error)]
pub enum DpdkBackendError {
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    #[error("rank {rank}: {source}")]
    Nic { rank: usize, source: NicError },
    #[error("DPDK is not available: {0}")]
    Eal(mrc_dpdk::Error),
    #[error("the switch at {addr}: {why}")]
    Switch { addr: SocketAddr, why: String },
    #[error("{0}")]
    Setup(String),
}

/// EAL arguments common to every process of a one-machine run (no hugepages, no shared
/// config, a file prefix of its own, cores shared).
fn eal_base(file_prefix: &str) -> String {
    format!(
        "--no-huge --no-pci --no-shconf --no-telemetry -m 512 --lcores=0@(0-{}) \
         --log-level=lib.eal:error --file-prefix {file_prefix}",
        std::thread::available_parallelism().map_or(1, usize::from) - 1
    )
}

/// The memif socket of `plane` in the one-machine fabric `name` (abstract: nothing on disk).
fn memif_socket(name: &str, plane: usize) -> String {
    format!("/{name}-p{plane}.sock,socket-abstract=yes")
}

/// The ranks' EAL arguments in the one-machine fabric `name` of `mrc-coll switch`, with
/// `{rank}` where [`eal_args`] puts the rank: one memif client port per plane, on that plane's
/// socket, interface id = the rank.
pub fn memif_rank_eal(name: &str, planes: usize) -> String {
    let mut s = eal_base(&format!("{name}-r{{rank}}"));
    for p in 0..planes {
        let _ = write!(
            s,
            " --vdev=net_memif{p},role=client,socket={},id={{rank}},bsize=9216",
            memif_socket(name, p)
        );
    }
    s
}

/// The switch's EAL arguments in the one-machine fabric `name`: the memif server side of every
/// (rank, plane) link, rank-major, as [`super::switch::run`] expects them.
pub fn memif_switch_eal(name: &str, ranks: usize, planes: usize) -> String {
    let mut s = eal_base(&format!("{name}-switch"));
    for r in 0..ranks {
        for p in 0..planes {
            let _ = write!(
                s,
                " --vdev=net_memif{},role=server,socket={},id={r},bsize=9216",
                r * planes + p,
                memif_socket(name, p)
            );
        }
    }
    s
}

/// `eal` split into arguments, with every `{rank}` replaced by `rank`.
pub fn eal_args(eal: &str, rank: usize) -> Vec<String> {
    eal.split_whitespace()
        .map(|a| a.replace("{rank}", &rank.to_string()))
        .collect()
}

/// How a rank runs.
#[derive(Debug, Clone)]
pub struct DpdkRankOpts {
    /// This rank's EAL arguments (its ports, one per plane, in plane order).
    pub eal: Vec<String>,
    /// The switch's control address (`None`: the ports need no switch, e.g. NICs on a real
    /// fabric).
    pub switch: Option<SocketAddr>,
    pub window: u32,
    /// A rank whose program is not done by then fails.
    pub deadline: Duration,
    /// How long to wait for the switch and for the links.
    pub connect_timeout: Duration,
}

/// What a rank saw: every rank's report (in rank order) and its own ports.
#[derive(Debug, Clone)]
pub struct DpdkRun {
    pub reports: Vec<RankReport>,
    pub ports: Vec<String>,
}

/// The control connection to the switch (`mrc-coll switch`), which any program on memif
/// ports to it uses (mrc-coll's ranks, mrc-perf's).
#[derive(Debug)]
pub struct SwitchLink {
    stream: TcpStream,
}

impl SwitchLink {
    /// Says hello as `rank` with `planes` ports; returns once the switch answered (its memif
    /// servers listen).
    pub fn join(
        addr: SocketAddr,
        rank: usize,
        planes: usize,
        timeout: Duration,
    ) -> Result<Self, DpdkBackendError> {
        let err = |why: String| DpdkBackendError::Switch { addr, why };
        let until = Instant::now() + timeout;
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(s) => break s,
                Err(e) if Instant::now() >= until => {
                    return Err(err(format!("{e} (is `mrc-coll switch` running?)")));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        stream
            .set_read_timeout(Some(timeout))
            .map_err(|e| err(e.to_string()))?;
        writeln!(stream, "HELLO {rank} {planes}").map_err(|e| err(e.to_string()))?;
        let mut answer = String::new();
        BufReader::new(stream.try_clone().map_err(|e| err(e.to_string()))?)
            .read_line(&mut answer)
            .map_err(|e| err(e.to_string()))?;
        match answer.trim() {
            "OK" => Ok(Self { stream }),
            other => Err(err(other.strip_prefix("ERR ").unwrap_or(other).to_owned())),
        }
    }

    /// This rank stopped polling its ports.
    pub fn stopped(&mut self) {
        let _ = writeln!(self.stream, "STOPPED");
    }
}

fn json<T: serde::Serialize>(v: &T) -> Vec<u8> {
    serde_json::to_vec(v).unwrap_or_default()
}

fn unjson<T: serde::de::DeserializeOwned>(
    all: &[Vec<u8>],
    what: &str,
) -> Result<Vec<T>, DpdkBackendError> {
    all.iter()
        .enumerate()
        .map(|(r, b)| {
            serde_json::from_slice(b)
                .map_err(|e| DpdkBackendError::Setup(format!("rank {r}'s {what}: {e}")))
        })
        .collect()
}

/// Runs this process's rank of `rows`; every rank's report.
pub fn run_rank(
    boot: &mut dyn Bootstrap,
    opts: &DpdkRankOpts,
    rows: &[Row],
    popts: &ProgramOpts,
) -> Result<DpdkRun, DpdkBackendError> {
    run_rank_watched(boot, opts, rows, popts, &mut |_, _| Box::new(()))
}

/// What [`run_rank_watched`] calls once the rank's QPs exist: it gets the rank's NIC and
/// QPs (e.g. to sample their counters on a thread of its own) and returns a guard, dropped
/// once the program has ended and before the NIC stops (a sampler takes its last sample
/// and joins there).
pub type OnNic<'a> = &'a mut dyn FnMut(&mrc_nic::NicHandle, &[Qpn]) -> Box<dyn Send>;

/// As [`run_rank`], with `on_nic` told of the rank's NIC and QPs.
pub fn run_rank_watched(
    boot: &mut dyn Bootstrap,
    opts: &DpdkRankOpts,
    rows: &[Row],
    popts: &ProgramOpts,
    on_nic: OnNic<'_>,
) -> Result<DpdkRun, DpdkBackendError> {
    let rank = boot.rank();
    let names = mrc_dpdk::eal_port_names(&opts.eal);
    if names.is_empty() || names.len() > 8 {
        return Err(DpdkBackendError::Setup(format!(
            "--eal names {} ports: one to eight (--vdev=NAME,... or -a PCI), one per plane",
            names.len()
        )));
    }
    let planes = names.len();
    let mut switch = opts
        .switch
        .map(|a| SwitchLink::join(a, rank, planes, opts.connect_timeout))
        .transpose()?;
    let eal = mrc_dpdk::Eal::init(&opts.eal).map_err(DpdkBackendError::Eal)?;
    let nic_err = |source| DpdkBackendError::Nic { rank, source };
    let mut ports = DpdkPorts::new(names.clone());
    ports.promiscuous = false;
    ports.mbufs = 4095;
    let io = ports
        .open(&eal)
        .map_err(nic_err)?
        .pop()
        .ok_or_else(|| DpdkBackendError::Setup("no DPDK port opened".into()))?;
    let mut cfg = NicConfig::new(endpoint_config(rank, planes));
    cfg.next_hops = (0..planes)
        .map(|p| NextHop::Static(router_mac(p as u8)))
        .collect();
    cfg.thread_name = format!("mrc-coll-nic{rank}");
    cfg.idle = IdlePolicy::Yield { after: 64 };
    let (nic, handle) = Nic::spawn(cfg, io).map_err(nic_err)?;
    let mut nic = Some(nic);
    let result = run_program(boot, opts, &handle, rows, popts, on_nic);
    // Teardown in memif's order, whatever happened: stop polling, tell the switch, wait for
    // it to close the server side, then close.
    let exit = nic.take().and_then(|n| n.shutdown().ok());
    if let Some(s) = switch.as_mut() {
        s.stopped();
    }
    if let Some(exit) = exit {
        close_after_peer(&exit.io, planes, opts.switch.is_some());
        drop(exit);
    }
    drop(handle);
    drop(eal);
    drop(switch);
    Ok(DpdkRun {
        reports: result?,
        ports: names,
    })
}

/// With a switch: wait (a while) for it to close its side of every link (mrc-dpdk serialises
/// the close that follows with memif's own teardown).
pub fn close_after_peer(io: &DpdkIo, planes: usize, peer_closes: bool) {
    if !peer_closes {
        return;
    }
    let ports = io.ports();
    let until = Instant::now() + Duration::from_secs(5);
    while (0..planes).any(|p| ports.link(p).is_some_and(|l| l.up)) && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn run_program(
    boot: &mut dyn Bootstrap,
    opts: &DpdkRankOpts,
    handle: &mrc_nic::NicHandle,
    rows: &[Row],
    popts: &ProgramOpts,
    on_nic: OnNic<'_>,
) -> Result<Vec<RankReport>, DpdkBackendError> {
    let (rank, n) = (boot.rank(), boot.size());
    let nic_err = |source| DpdkBackendError::Nic { rank, source };
    let pairs = pairs(rows, n);
    let cap = QpCap {
        max_send_wr: (opts.window * 2).max(256),
        max_recv_wr: (DEFAULT_RECV_DEPTH * 2).max(256),
        max_send_sge: 1,
    };
    let me = RankNic::new(
        handle,
        rank,
        &peers_of(rank, &pairs),
        BufferSizes::for_rows(rows),
        cap,
    )
    .map_err(nic_err)?;
    let infos: Vec<RankInfo> = unjson(&boot.all_gather(&json(&me.info()))?, "QP attributes")?;
    if let Some((r, i)) = infos.iter().enumerate().find(|(r, i)| i.rank != *r) {
        return Err(DpdkBackendError::Setup(format!(
            "rank {r} says it is rank {}",
            i.rank
        )));
    }
    let watcher = on_nic(handle, &me.qpns());
    let links = me.connect(&infos).map_err(nic_err)?;
    let until = Instant::now() + opts.connect_timeout;
    while !handle.ports().map_err(nic_err)?.iter().all(|p| p.usable) {
        if Instant::now() > until {
            return Err(DpdkBackendError::Setup(format!(
                "rank {rank}: the DPDK links never came up (is every peer port running?)"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // Every QP is ready to receive before anyone sends.
    boot.barrier()?;
    let comm = Comm::new(me.setup(n, links, opts.window, DEFAULT_RECV_DEPTH));
    let (mut program, report) = Program::new(comm, rows.to_vec(), popts.clone());
    let result = AppDriver::new(handle)
        .cq(me.cq)
        .deadline(opts.deadline)
        .run(&mut program);
    let mut mine = report
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    if let Err(e) = result {
        mine.error
            .get_or_insert_with(|| format!("rank {rank}: {e}"));
    }
    // Peers' last ACKs come from this NIC: it polls until every rank is done.
    let reports = unjson(&boot.all_gather(&json(&mine))?, "report")?;
    drop(watcher);
    drop(me);
    Ok(reports)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_memif_fabric_pairs_every_rank_port_with_a_switch_port() {
        let names = |s: &str| mrc_dpdk::eal_port_names(&eal_args(s, 0));
        assert_eq!(names(&memif_rank_eal("t", 2)), ["net_memif0", "net_memif1"]);
        let sw = memif_switch_eal("t", 4, 2);
        assert_eq!(names(&sw).len(), 8);
        // Port i of the switch is rank i / planes on plane i % planes: same socket, same id.
        let args = eal_args(&sw, 0);
        let vdev = |i: usize| {
            args.iter()
                .find(|a| a.starts_with(&format!("--vdev=net_memif{i},")))
                .expect("a vdev")
                .clone()
        };
        assert!(vdev(7).contains("socket=/t-p1.sock") && vdev(7).contains("id=3,"));
        let rank = eal_args(&memif_rank_eal("t", 2), 3).join(" ");
        assert!(rank.contains("socket=/t-p1.sock,socket-abstract=yes,id=3,"));
        assert!(rank.contains("--file-prefix t-r3") && sw.contains("--file-prefix t-switch"));
    }

    #[test]
    fn ports_come_from_the_eal_arguments_in_order_with_the_rank_substituted() {
        let a = eal_args(
            "--no-huge --vdev=net_memif0,role=client,socket=/s/r{rank}p0 -a 0000:3b:00.0 --vdev net_ring{rank}",
            3,
        );
        assert_eq!(a[1], "--vdev=net_memif0,role=client,socket=/s/r3p0");
        assert_eq!(
            mrc_dpdk::eal_port_names(&a),
            ["net_memif0", "0000:3b:00.0", "net_ring3"]
        );
    }
}
