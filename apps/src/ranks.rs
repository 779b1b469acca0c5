//! The ranks of a run spread over processes, one per host (`mrc-coll --backend dpdk` and
//! `mrc-perf --backend dpdk --pattern`, under `mpirun` or `--tcp-rank`): the addresses they
//! meet at and how they meet. Both tools' ranks join the same `mrc-coll switch`.

use std::net::{SocketAddr, ToSocketAddrs as _};
use std::time::Duration as StdDuration;

use anyhow::Context as _;
use mrc_coll::bootstrap::Bootstrap;
use mrc_coll::bootstrap::tcp::TcpBootstrap;

use crate::usage;

/// The switch's control address with `--memif` and no `--switch`.
pub const DEFAULT_SWITCH: &str = "127.0.0.1:18600";
/// How long ranks wait for each other, the switch and the links.
pub const CONNECT_TIMEOUT: StdDuration = StdDuration::from_mins(1);

/// `host:port` from the command line (`what` names the flag in the refusal).
pub fn socket_addr(s: &str, what: &str) -> anyhow::Result<SocketAddr> {
    s.to_socket_addrs()
        .map_err(|e| usage!("{what} {s}: {e}: give host:port"))?
        .next()
        .ok_or_else(|| usage!("{what} {s} names no address: give host:port"))
}

/// The out-of-band channel of process `rank` of `size`: with `mpirun`, MPI when built with the
/// `mpi` feature, else (and without mpirun) a TCP rendezvous at `addr` (rank 0 listens); and
/// how, in words.
pub fn bootstrap_at(
    addr: SocketAddr,
    rank: usize,
    size: usize,
    mpirun: bool,
) -> anyhow::Result<(Box<dyn Bootstrap>, String)> {
    let tcp = |rank: usize, size: usize| -> anyhow::Result<Box<dyn Bootstrap>> {
        Ok(Box::new(
            TcpBootstrap::join(rank, size, addr, CONNECT_TIMEOUT)
                .with_context(|| format!("rank {rank} of {size}, rendezvous at {addr}"))?,
        ))
    };
    if !mpirun {
        return Ok((tcp(rank, size)?, format!("TCP rendezvous at {addr}")));
    }
    #[cfg(feature = "mpi")]
    {
        let b = mrc_coll::bootstrap::mpi::MpiBootstrap::init()?;
        anyhow::ensure!(
            (b.rank(), b.size()) == (rank, size),
            "MPI says rank {} of {}, mpirun's environment {rank} of {size}",
            b.rank(),
            b.size()
        );
        Ok((Box::new(b), "MPI (mpirun)".to_owned()))
    }
    #[cfg(not(feature = "mpi"))]
    Ok((
        tcp(rank, size)?,
        format!("mpirun's ranks, TCP rendezvous at {addr} (built without the mpi feature)"),
    ))
}
