//! `--backend dpdk` (one rank per process, on its own DPDK ports) and `mrc-coll switch` (the
//! one-machine memif fabric those ranks join).
//!
//! ```text
//!  mrc-coll switch --ranks 4 --memif demo &
//!  mpirun -np 4 mrc-coll all_reduce --backend dpdk --memif demo
//!      bootstrap: MPI (feature `mpi`) · else TCP rendezvous (--tcp-rank/--tcp-ranks, or the
//!      ranks mpirun put in the environment) ─► mrc_coll::backend::dpdk::run_rank ─► rank 0 prints
//! ```

use super::{sample_period, timed_ops};
use crate::metrics::coll::lines as coll_lines;
use crate::metrics::counters::Snapshot;
use crate::metrics::telemetry::Telemetry;
use crate::perf::nic_backend::host_counters;
use crate::ranks::{CONNECT_TIMEOUT, DEFAULT_SWITCH, bootstrap_at, socket_addr};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use mrc_coll::BenchOpts;
use mrc_coll::backend::dpdk::{
    DpdkRankOpts, eal_args, memif_rank_eal, memif_switch_eal, run_rank_watched,
};
use mrc_coll::backend::switch::{self, SwitchOpts};
use mrc_coll::backend::{fold_all, program_opts};
use mrc_coll::bootstrap::{Bootstrap, mpirun_env};

use super::cli::Args;
use super::setup::{self, JsonFile};
use super::{Outcome, Printer, preamble};
use crate::{bail_usage, outln};

/// Rank 0's rendezvous address without `--tcp-addr`.
pub const DEFAULT_TCP_ADDR: &str = "127.0.0.1:18515";
/// A rank whose program is not done by then fails.
const RUN_DEADLINE: StdDuration = StdDuration::from_mins(10);

/// This rank's EAL template (`{rank}` still in it) and the switch to join, if any.
fn fabric(args: &Args) -> anyhow::Result<(String, Option<SocketAddr>)> {
    let switch = match (&args.switch, &args.memif) {
        (Some(s), _) => Some(socket_addr(s, "--switch")?),
        (None, Some(_)) => Some(socket_addr(DEFAULT_SWITCH, "--switch")?),
        (None, None) => None,
    };
    let eal = match (&args.eal, &args.memif) {
        (Some(_), Some(_)) => bail_usage!("--eal or --memif, not both"),
        (Some(e), None) => e.clone(),
        (None, Some(name)) => memif_rank_eal(name, setup::planes(args)?),
        (None, None) => bail_usage!(
            "--backend dpdk needs this rank's ports: --memif NAME (one machine, with `mrc-coll \
             switch --memif NAME`) or --eal \"...\" (e.g. -a <PCI> per plane, or vdevs with {{rank}})"
        ),
    };
    let ports = mrc_dpdk::eal_port_names(&eal_args(&eal, 0)).len();
    if !(1..=setup::MAX_PLANES).contains(&ports) {
        bail_usage!(
            "--eal names {ports} ports: 1 to {} (--vdev=NAME,... or -a PCI), one per plane",
            setup::MAX_PLANES
        );
    }
    Ok((eal, switch))
}

/// This process's rank and the number of ranks, from `--tcp-rank`/`--tcp-ranks` or mpirun's
/// environment, checked before anyone connects; whether they are mpirun's.
pub fn ranks(args: &Args) -> anyhow::Result<(usize, usize, bool)> {
    let (rank, n, mpirun) = match (args.tcp_rank, args.tcp_ranks) {
        (Some(r), Some(n)) if r < n => (r, n, false),
        (Some(r), Some(n)) => bail_usage!("--tcp-rank {r} --tcp-ranks {n}: a rank is 0 to N-1"),
        (None, None) => match mpirun_env() {
            Some((r, n)) => (r, n, true),
            None => bail_usage!(
                "--backend dpdk runs one rank per process: start the ranks under mpirun, or \
                 give each --tcp-rank R --tcp-ranks N (rank 0 listens on --tcp-addr)"
            ),
        },
        _ => bail_usage!("--tcp-rank and --tcp-ranks go together"),
    };
    if n < 2 {
        bail_usage!("--backend dpdk needs two ranks or more (got {n}): mpirun -np 2 or more");
    }
    if let Some(r) = args.ranks
        && r != n
    {
        bail_usage!(
            "--ranks {r}: --backend dpdk has the {n} ranks of mpirun or --tcp-ranks: leave \
             --ranks out"
        );
    }
    Ok((rank, n, mpirun))
}

/// The ranks' out-of-band channel: `--tcp-rank`/`--tcp-ranks`, else mpirun's (MPI when built
/// with the `mpi` feature, else a TCP rendezvous at `--tcp-addr` with mpirun's ranks).
fn bootstrap(
    args: &Args,
    rank: usize,
    size: usize,
    mpirun: bool,
) -> anyhow::Result<(Box<dyn Bootstrap>, String)> {
    let addr = socket_addr(
        args.tcp_addr.as_deref().unwrap_or(DEFAULT_TCP_ADDR),
        "--tcp-addr",
    )?;
    bootstrap_at(addr, rank, size, mpirun)
}

/// One rank of `--backend dpdk`; rank 0 prints nccl-tests' table for all. Every refusal
/// comes before the ranks meet.
pub fn run_dpdk(
    args: &Args,
    opts: &BenchOpts,
    tele: Option<&Arc<Telemetry>>,
) -> anyhow::Result<Outcome> {
    let (eal, switch) = fabric(args)?;
    let (rank, n, mpirun) = ranks(args)?;
    let rows = setup::rows(opts, n)?;
    setup::memory(&rows, 1, false)?;
    let lead = rank == 0;
    let json = match &args.json {
        Some(path) if lead => Some(JsonFile::create(path)?),
        _ => None,
    };
    let (mut boot, how) = bootstrap(args, rank, n, mpirun)?;
    let mut printer = None;
    if lead {
        let devices: Vec<String> = (0..n)
            .map(|r| {
                let ports = mrc_dpdk::eal_port_names(&eal_args(&eal, r));
                format!("mrc-dpdk device {r:>2} [MRC NIC on {}]", ports.join(", "))
            })
            .collect();
        crate::out!("{}", preamble(opts, &devices));
        outln!("# Bootstrap: {how}");
        printer = Some(Printer::new(&rows));
    }
    let ropts = DpdkRankOpts {
        eal: eal_args(&eal, rank),
        switch,
        window: args.window,
        deadline: RUN_DEADLINE,
        connect_timeout: CONNECT_TIMEOUT,
    };
    let planes = mrc_dpdk::eal_port_names(&ropts.eal).len() as u8;
    // With a sink: this rank's engine counters, sampled on a thread of their own while the
    // program runs, and once more when it has ended (NIC still up).
    let mut on_nic = |h: &mrc_nic::NicHandle, q: &[mrc_transport::verbs::Qpn]| -> Box<dyn Send> {
        match tele {
            Some(t) => Box::new(Sampler::start(
                t.clone(),
                h.clone(),
                q.to_vec(),
                rank,
                planes,
            )),
            None => Box::new(()),
        }
    };
    let run = run_rank_watched(
        boot.as_mut(),
        &ropts,
        &rows,
        &program_opts(opts, false),
        &mut on_nic,
    );
    let run = match run {
        Ok(r) => r,
        Err(e) => {
            if let Some(p) = printer {
                let _ = p.finish(None);
            }
            return Err(anyhow::Error::new(e).context(format!("rank {rank}")));
        }
    };
    let lines = fold_all(&rows, &run.reports, opts.average);
    if let Some(t) = tele {
        // Every rank exports the table (its own sinks), the lead too.
        t.exporter()
            .publish_coll(coll_lines(&rows, &lines, timed_ops(opts)));
    }
    let out = match printer {
        Some(mut p) => {
            for (i, l) in lines.into_iter().enumerate() {
                p.line(i, l);
            }
            p.finish(json)?
        }
        None => Outcome::of(lines),
    };
    for r in run.reports.iter().filter(|_| lead) {
        if let Some(e) = &r.error {
            outln!("# MRC dpdk: {e}");
        }
    }
    let failed = run.reports.iter().any(|r| r.error.is_some());
    Ok(Outcome {
        ok: out.ok && !failed,
        ..out
    })
}

/// `mrc-coll switch`: forwards between the ranks' ports until every rank stopped.
pub fn run_switch(args: &Args) -> anyhow::Result<Outcome> {
    let ranks = args.ranks.unwrap_or(setup::DEFAULT_RANKS);
    if !(2..=mrc_coll::proto::MAX_RANKS).contains(&ranks) {
        bail_usage!(
            "--ranks {ranks}: the switch joins 2 to {} ranks",
            mrc_coll::proto::MAX_RANKS
        );
    }
    let planes = setup::planes(args)?;
    let eal = match (&args.eal, &args.memif) {
        (Some(_), Some(_)) => bail_usage!("--eal or --memif, not both"),
        (Some(e), None) => e.clone(),
        (None, Some(name)) => memif_switch_eal(name, ranks, planes),
        (None, None) => bail_usage!(
            "the switch needs its ports: --memif NAME, or --eal with one port per rank and plane"
        ),
    };
    let control = socket_addr(args.switch.as_deref().unwrap_or(DEFAULT_SWITCH), "--switch")?;
    let opts = SwitchOpts {
        eal: eal_args(&eal, 0),
        ranks,
        planes,
        control,
        lifetime: RUN_DEADLINE,
    };
    let stats = switch::run(&opts, &mut |addr| {
        outln!("# mrc-coll switch: {ranks} ranks x {planes} planes, control on {addr}");
    })?;
    outln!(
        "# mrc-coll switch: {} frames in, {} forwarded, {} unroutable, {} dropped at TX; {} of \
         {ranks} ranks stopped",
        stats.received,
        stats.forwarded,
        stats.unroutable,
        stats.tx_dropped,
        stats.ranks_stopped,
    );
    Ok(Outcome {
        lines: Vec::new(),
        ok: stats.ranks_stopped == ranks,
    })
}

/// Samples one rank's engine counters into its sinks every `--sample-every` (100 ms by
/// default) on its own thread; the last sample is taken when it is dropped.
struct Sampler {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Sampler {
    fn start(
        tele: Arc<Telemetry>,
        nic: mrc_nic::NicHandle,
        qpns: Vec<mrc_transport::verbs::Qpn>,
        rank: usize,
        planes: u8,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let every = sample_period(Some(&tele));
        let thread = std::thread::Builder::new()
            .name(format!("mrc-coll-sample{rank}"))
            .spawn(move || {
                let start = std::time::Instant::now();
                let sample = || {
                    if let Ok(h) = host_counters(rank as u32, &nic, planes, &qpns) {
                        tele.sample(&Snapshot {
                            at_ns: start.elapsed().as_nanos() as u64,
                            hosts: vec![h],
                        });
                    }
                };
                let mut next = start;
                while !flag.load(Ordering::Relaxed) {
                    if std::time::Instant::now() >= next {
                        sample();
                        next += every;
                    }
                    std::thread::sleep(every.min(StdDuration::from_millis(10)));
                }
                sample();
            })
            .ok();
        Self { stop, thread }
    }
}

impl Drop for Sampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
