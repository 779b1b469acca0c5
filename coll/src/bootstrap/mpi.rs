//! The MPI bootstrap (Open MPI through rsmpi): under `mpirun`, ranks and size come from MPI,
//! the barrier is `MPI_Barrier` and the all-gather `MPI_Allgather` of the lengths then
//! `MPI_Allgatherv` of the bytes.

use mpi::Count;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::traits::{Communicator, CommunicatorCollectives};

use super::{Bootstrap, BootstrapError};

/// MPI's world communicator (MPI stays initialised while this lives).
pub struct MpiBootstrap {
    universe: Universe,
}

impl std::fmt::Debug for MpiBootstrap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MpiBootstrap")
            .field("rank", &self.rank())
            .field("size", &self.size())
            .finish()
    }
}

impl MpiBootstrap {
    /// Initialises MPI (once per process).
    pub fn init() -> Result<Self, BootstrapError> {
        let universe = mpi::initialize()
            .ok_or_else(|| BootstrapError::Mpi("MPI was already initialised".into()))?;
        Ok(Self { universe })
    }
}

impl Bootstrap for MpiBootstrap {
    fn rank(&self) -> usize {
        self.universe.world().rank() as usize
    }

    fn size(&self) -> usize {
        self.universe.world().size() as usize
    }

    fn all_gather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, BootstrapError> {
        let world = self.universe.world();
        let n = world.size() as usize;
        let len = Count::try_from(mine.len())
            .map_err(|_| BootstrapError::Mpi("message too long".into()))?;
        let mut lens: Vec<Count> = vec![0; n];
        world.all_gather_into(&len, &mut lens[..]);
        let displs: Vec<Count> = lens
            .iter()
            .scan(0, |acc, &l| {
                let d = *acc;
                *acc += l;
                Some(d)
            })
            .collect();
        let total: usize = lens.iter().map(|&l| l as usize).sum();
        let mut buf = vec![0u8; total];
        {
            let mut part = PartitionMut::new(&mut buf[..], lens.clone(), &displs[..]);
            world.all_gather_varcount_into(mine, &mut part);
        }
        Ok(lens
            .iter()
            .zip(&displs)
            .map(|(&l, &d)| buf[d as usize..(d + l) as usize].to_vec())
            .collect())
    }

    fn barrier(&mut self) -> Result<(), BootstrapError> {
        self.universe.world().barrier();
        Ok(())
    }
}
