//! How the processes of a run find each other before any QP exists: their rank, their number,
//! a barrier, and an all-gather of small byte strings (the QP attributes and buffer keys each
//! rank publishes, then the ranks' results). Under `mpirun` it is MPI ([`mpi`], cargo feature
//! `mpi`); without MPI, a TCP rendezvous at rank 0 ([`tcp`]), as perftest exchanges QP
//! attributes over a socket.

#[cfg(feature = "mpi")]
pub mod mpi;
pub mod tcp;

/// Why the exchange failed.
#[derive(Debug, thiserror::Error)]
pub enum BootstrapError {
    #[error("rendezvous: {0}")]
    Io(#[from] std::io::Error),
    #[error("rendezvous: {0}")]
    Protocol(String),
    #[error("MPI: {0}")]
    Mpi(String),
}

/// The out-of-band channel between the ranks of one run.
pub trait Bootstrap {
    fn rank(&self) -> usize;
    fn size(&self) -> usize;
    /// Every rank's `mine`, in rank order (every rank calls it, in the same order).
    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError>;
    /// Returns once every rank called it.
    fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.all_gather(&[]).map(|_| ())
    }
}

/// `Some((rank, size))` when this process runs under Open MPI's `mpirun` (read from its
/// environment, before MPI is initialised).
pub fn mpirun_env() -> Option<(usize, usize)> {
    let get = |k: &str| std::env::var(k).ok()?.parse::<usize>().ok();
    Some((
        get("OMPI_COMM_WORLD_RANK").or_else(|| get("PMI_RANK"))?,
        get("OMPI_COMM_WORLD_SIZE").or_else(|| get("PMI_SIZE"))?,
    ))
}
