//! `--backend mem`: every rank a thread over its own software NIC (`mrc-nic`, a poll thread
//! running the engine), the NICs joined by in-memory links (one tiny switch per plane). Real
//! time, real threads, the same programs as on the simulator.

use std::time::Duration as StdDuration;

use mrc_nic::io::mem::{PlanesError, router_mac};
use mrc_nic::{AppDriver, MemFabric, NextHop, Nic, NicConfig, NicError, NicHandle};
use mrc_transport::verbs::{QpCap, Qpn};

use super::nic::{RankInfo, RankNic, endpoint_config, peers_of, rank_addr};
use super::{BufferSizes, pairs};
use crate::comm::{Comm, DEFAULT_RECV_DEPTH};
use crate::program::{Program, ProgramOpts, RankReport, ReportHandle, Row};

/// What a watcher sees of a run while it goes (and once more when every rank is done, before
/// the NICs shut down): every rank's NIC handle and QPs (to read its counters) and the ranks'
/// reports so far (the lines measured).
#[derive(Debug)]
pub struct Progress<'a> {
    /// Per rank: its NIC and its QPs, one per peer.
    pub nics: &'a [(NicHandle, Vec<Qpn>)],
    /// Per rank: what it measured so far.
    pub reports: Vec<RankReport>,
}

/// Why the threads could not run.
#[derive(Debug, thiserror::Error)]
pub enum MemBackendError {
    #[error("rank {rank}: {source}")]
    Nic { rank: usize, source: NicError },
    #[error("rank {0}'s thread panicked")]
    Panicked(usize),
    #[error(transparent)]
    Planes(#[from] PlanesError),
}

/// Ranks as threads over in-memory links.
#[derive(Debug, Clone)]
pub struct MemBackend {
    pub ranks: usize,
    pub planes: usize,
    /// A rank whose program is not done by then fails.
    pub deadline: StdDuration,
}

impl MemBackend {
    pub fn new(ranks: usize, planes: usize) -> Self {
        Self {
            ranks,
            planes,
            deadline: StdDuration::from_mins(10),
        }
    }

    /// The NIC of rank `r`.
    pub fn nic_config(&self, r: usize) -> NicConfig {
        let mut c = NicConfig::new(endpoint_config(r, self.planes));
        c.next_hops = (0..self.planes)
            .map(|p| NextHop::Static(router_mac(p as u8)))
            .collect();
        c.thread_name = format!("mrc-coll-nic{r}");
        c
    }

    /// Runs every row on every rank; the ranks' reports.
    pub fn run(
        &self,
        rows: &[Row],
        popts: &ProgramOpts,
        window: u32,
    ) -> Result<Vec<RankReport>, MemBackendError> {
        self.run_watched(rows, popts, window, StdDuration::MAX, &mut |_| {})
    }

    /// As [`run`](Self::run), calling `watch` about every `every` while the ranks run and
    /// once after they all ended (NICs still up).
    pub fn run_watched(
        &self,
        rows: &[Row],
        popts: &ProgramOpts,
        window: u32,
        every: StdDuration,
        watch: &mut dyn FnMut(&Progress<'_>),
    ) -> Result<Vec<RankReport>, MemBackendError> {
        let n = self.ranks;
        let nic_err = |rank| move |source| MemBackendError::Nic { rank, source };
        let mut fabric = MemFabric::try_new(self.planes)?;
        for r in 0..n {
            fabric.add_host(rank_addr(r));
        }
        let (ios, _control) = fabric.build();
        let mut nics = Vec::new();
        let mut ranks = Vec::new();
        let pairs = pairs(rows, n);
        let sizes = BufferSizes::for_rows(rows);
        let cap = QpCap {
            max_send_wr: (window * 2).max(256),
            max_recv_wr: (DEFAULT_RECV_DEPTH * 2).max(256),
            max_send_sge: 1,
        };
        for (r, io) in ios.into_iter().enumerate() {
            let (nic, handle) = Nic::spawn(self.nic_config(r), io).map_err(nic_err(r))?;
            nics.push(nic);
            let rank =
                RankNic::new(&handle, r, &peers_of(r, &pairs), sizes, cap).map_err(nic_err(r))?;
            ranks.push(rank);
        }
        let infos: Vec<RankInfo> = ranks.iter().map(RankNic::info).collect();
        let mut threads = Vec::new();
        let watched: Vec<(NicHandle, Vec<Qpn>)> =
            ranks.iter().map(|r| (r.handle.clone(), r.qpns())).collect();
        let mut handles: Vec<ReportHandle> = Vec::new();
        for rank in ranks {
            let r = rank.rank;
            let links = rank.connect(&infos).map_err(nic_err(r))?;
            let comm = Comm::new(rank.setup(n, links, window, DEFAULT_RECV_DEPTH));
            let (mut program, report) = Program::new(comm, rows.to_vec(), popts.clone());
            handles.push(report.clone());
            let deadline = self.deadline;
            threads.push(std::thread::spawn(move || {
                let result = AppDriver::new(&rank.handle)
                    .cq(rank.cq)
                    .deadline(deadline)
                    .run(&mut program);
                let mut rep = report.lock().expect("report lock").clone();
                if let Err(e) = result {
                    rep.error.get_or_insert_with(|| format!("rank {r}: {e}"));
                }
                drop(rank);
                rep
            }));
        }
        let progress = || Progress {
            nics: &watched,
            reports: handles
                .iter()
                .map(|h| {
                    h.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .clone()
                })
                .collect(),
        };
        if every < StdDuration::MAX {
            let tick = every.min(StdDuration::from_millis(50));
            let mut last = std::time::Instant::now();
            while threads.iter().any(|t| !t.is_finished()) {
                std::thread::sleep(tick);
                if last.elapsed() >= every {
                    last = std::time::Instant::now();
                    watch(&progress());
                }
            }
        }
        let mut reports = Vec::new();
        for (r, t) in threads.into_iter().enumerate() {
            reports.push(t.join().map_err(|_| MemBackendError::Panicked(r))?);
        }
        watch(&Progress {
            nics: &watched,
            reports: reports.clone(),
        });
        for nic in nics {
            let _ = nic.shutdown();
        }
        Ok(reports)
    }
}
