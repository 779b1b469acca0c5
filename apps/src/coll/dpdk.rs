//! `--backend dpdk` (one rank per process, on its own DPDK ports) and `mrc-coll switch` (the
//! one-machine memif fabric those ranks join).
//!
//! ```text
//!  mrc-coll switch --ranks 4 --memif demo &
//!  mpirun -np 4 mrc-coll all_reduce --backend dpdk --memif demo
//!      bootstrap: MPI (feature `mpi`) · else TCP rendezvous (--tcp-rank/--tcp-ranks, or the
//!      ranks mpirun put in the environment) ─► mrc_coll::backend::dpdk::run_rank ─► rank 0 prints
//! ```

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::time::Duration as StdDuration;

use anyhow::Context as _;
use mrc_coll::BenchOpts;
use mrc_coll::backend::dpdk::{DpdkRankOpts, eal_args, memif_rank_eal, memif_switch_eal, run_rank};
use mrc_coll::backend::switch::{self, SwitchOpts};
use mrc_coll::backend::{fold_all, program_opts};
use mrc_coll::bootstrap::tcp::TcpBootstrap;
use mrc_coll::bootstrap::{Bootstrap, mpirun_env};

use super::cli::Args;
use super::{Outcome, Printer, preamble};

/// The switch's control address with `--memif` and no `--switch`.
pub const DEFAULT_SWITCH: &str = "127.0.0.1:18600";
/// How long ranks wait for each other, the switch and the links.
const CONNECT_TIMEOUT: StdDuration = StdDuration::from_mins(1);
/// A rank whose program is not done by then fails.
const RUN_DEADLINE: StdDuration = StdDuration::from_mins(10);

fn socket_addr(s: &str, what: &str) -> anyhow::Result<SocketAddr> {
    s.to_socket_addrs()
        .with_context(|| format!("{what} {s:?} (host:port)"))?
        .next()
        .with_context(|| format!("{what} {s:?} names no address"))
}

/// This rank's EAL template (`{rank}` still in it) and the switch to join, if any.
fn fabric(args: &Args) -> anyhow::Result<(String, Option<SocketAddr>)> {
    let switch = match (&args.switch, &args.memif) {
        (Some(s), _) => Some(socket_addr(s, "--switch")?),
        (None, Some(_)) => Some(socket_addr(DEFAULT_SWITCH, "--switch")?),
        (None, None) => None,
    };
    let eal = match (&args.eal, &args.memif) {
        (Some(_), Some(_)) => anyhow::bail!("--eal or --memif, not both"),
        (Some(e), None) => e.clone(),
        (None, Some(name)) => memif_rank_eal(name, args.planes),
        (None, None) => anyhow::bail!(
            "--backend dpdk needs this rank's ports: --memif NAME (one machine, with `mrc-coll \
             switch --memif NAME`) or --eal \"...\" (e.g. -a <PCI> per plane, or vdevs with {{rank}})"
        ),
    };
    Ok((eal, switch))
}

/// The ranks' out-of-band channel: `--tcp-rank`/`--tcp-ranks`, else mpirun's (MPI when built
/// with the `mpi` feature, else a TCP rendezvous at `--tcp-addr` with mpirun's ranks).
fn bootstrap(args: &Args) -> anyhow::Result<(Box<dyn Bootstrap>, String)> {
    let addr = socket_addr(&args.tcp_addr, "--tcp-addr")?;
    let tcp = |rank: usize, size: usize| -> anyhow::Result<Box<dyn Bootstrap>> {
        Ok(Box::new(
            TcpBootstrap::join(rank, size, addr, CONNECT_TIMEOUT)
                .with_context(|| format!("rank {rank} of {size}, rendezvous at {addr}"))?,
        ))
    };
    match (args.tcp_rank, args.tcp_ranks) {
        (Some(r), Some(n)) => return Ok((tcp(r, n)?, format!("TCP rendezvous at {addr}"))),
        (None, None) => {}
        _ => anyhow::bail!("--tcp-rank and --tcp-ranks go together"),
    }
    let Some((rank, size)) = mpirun_env() else {
        anyhow::bail!(
            "--backend dpdk runs one rank per process: start the ranks under mpirun, or give each \
             --tcp-rank R --tcp-ranks N (rank 0 listens on --tcp-addr)"
        );
    };
    #[cfg(feature = "mpi")]
    {
        let _ = (rank, size);
        let b = mrc_coll::bootstrap::mpi::MpiBootstrap::init()?;
        Ok((Box::new(b), "MPI (mpirun)".to_owned()))
    }
    #[cfg(not(feature = "mpi"))]
    Ok((
        tcp(rank, size)?,
        format!("mpirun's ranks, TCP rendezvous at {addr} (built without the mpi feature)"),
    ))
}

/// One rank of `--backend dpdk`; rank 0 prints nccl-tests' table for all.
pub fn run_dpdk(args: &Args, opts: &BenchOpts) -> anyhow::Result<Outcome> {
    let (eal, switch) = fabric(args)?;
    let (mut boot, how) = bootstrap(args)?;
    let (rank, n) = (boot.rank(), boot.size());
    anyhow::ensure!(n >= 2, "--backend dpdk needs two ranks or more (got {n})");
    let rows = opts.rows(n)?;
    anyhow::ensure!(!rows.is_empty(), "no sizes between -b and -e");
    let lead = rank == 0;
    let mut printer = None;
    if lead {
        let devices: Vec<String> = (0..n)
            .map(|r| {
                let ports = mrc_dpdk::eal_port_names(&eal_args(&eal, r));
                format!("mrc-dpdk device {r:>2} [MRC NIC on {}]", ports.join(", "))
            })
            .collect();
        print!("{}", preamble(opts, &devices));
        println!("# Bootstrap: {how}");
        printer = Some(Printer::new(&rows, opts.root));
    }
    let ropts = DpdkRankOpts {
        eal: eal_args(&eal, rank),
        switch,
        window: args.window,
        deadline: RUN_DEADLINE,
        connect_timeout: CONNECT_TIMEOUT,
    };
    let run = run_rank(
        boot.as_mut(),
        &ropts,
        opts.coll,
        &rows,
        &program_opts(opts, false),
    )
    .with_context(|| format!("rank {rank}"))?;
    let lines = fold_all(&rows, &run.reports);
    let out = match printer {
        Some(mut p) => {
            for (i, l) in lines.into_iter().enumerate() {
                p.line(i, l);
            }
            p.finish(args.json.as_deref())?
        }
        None => Outcome::of(lines),
    };
    for r in run.reports.iter().filter(|_| lead) {
        if let Some(e) = &r.error {
            println!("# MRC dpdk: {e}");
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
    anyhow::ensure!(args.ranks >= 2, "--ranks: two or more");
    let eal = match (&args.eal, &args.memif) {
        (Some(_), Some(_)) => anyhow::bail!("--eal or --memif, not both"),
        (Some(e), None) => e.clone(),
        (None, Some(name)) => memif_switch_eal(name, args.ranks, args.planes),
        (None, None) => anyhow::bail!(
            "the switch needs its ports: --memif NAME, or --eal with one port per rank and plane"
        ),
    };
    let control = socket_addr(args.switch.as_deref().unwrap_or(DEFAULT_SWITCH), "--switch")?;
    let opts = SwitchOpts {
        eal: eal_args(&eal, 0),
        ranks: args.ranks,
        planes: args.planes,
        control,
        lifetime: RUN_DEADLINE,
    };
    let stats = switch::run(&opts, &mut |addr| {
        println!(
            "# mrc-coll switch: {} ranks x {} planes, control on {addr}",
            args.ranks, args.planes
        );
    })?;
    println!(
        "# mrc-coll switch: {} frames in, {} forwarded, {} unroutable, {} dropped at TX; {} of {} \
         ranks stopped",
        stats.received,
        stats.forwarded,
        stats.unroutable,
        stats.tx_dropped,
        stats.ranks_stopped,
        args.ranks
    );
    Ok(Outcome {
        lines: Vec::new(),
        ok: stats.ranks_stopped == args.ranks,
    })
}
