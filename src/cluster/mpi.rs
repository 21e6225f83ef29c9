//! [`Ranks`] over MPI (rsmpi over the system's Open MPI).

use mpi::Count;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use super::Ranks;

/// The ranks of `MPI_COMM_WORLD`, with the ranks sharing this host (an
/// `MPI_Comm_split_type(SHARED)` communicator) for the local rank.
pub struct MpiRanks {
    world: SimpleCommunicator,
    local_rank: usize,
    local_size: usize,
    host: String,
    // Last: MPI is finalized when the universe drops, after the communicators.
    _universe: Universe,
}

impl MpiRanks {
    /// Initializes MPI for this process (MPI calls come from the main thread only: the
    /// `FUNNELED` level). `None` where MPI was initialized before (once per process).
    pub fn init() -> Option<MpiRanks> {
        let (universe, _level) = mpi::initialize_with_threading(mpi::Threading::Funneled)?;
        let world = universe.world();
        let node = world.split_shared(world.rank());
        let host = mpi::environment::processor_name().unwrap_or_else(|_| super::host_name());
        Some(MpiRanks {
            local_rank: node.rank() as usize,
            local_size: node.size() as usize,
            world,
            host,
            _universe: universe,
        })
    }
}

impl Ranks for MpiRanks {
    fn rank(&self) -> usize {
        self.world.rank() as usize
    }

    fn size(&self) -> usize {
        self.world.size() as usize
    }

    fn local_rank(&self) -> usize {
        self.local_rank
    }

    fn local_size(&self) -> usize {
        self.local_size
    }

    fn host(&self) -> String {
        self.host.clone()
    }

    fn barrier(&self) {
        self.world.barrier();
    }

    fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        // Statuses and frame records: far under 2 GiB per rank.
        let len = Count::try_from(mine.len()).expect("a rank's part is under 2 GiB");
        let mut counts = vec![0 as Count; self.size()];
        self.world.all_gather_into(&len, &mut counts[..]);
        let displs = displacements(&counts);
        let total: usize = counts.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut parts);
        }
        split(&all, &counts, &displs)
    }

    fn gather(&self, mine: &[u8]) -> Option<Vec<Vec<u8>>> {
        let root = self.world.process_at_rank(0);
        // Results are JSON of a few kilobytes per rank: a length over 2 GiB is a bug.
        let len = Count::try_from(mine.len()).expect("a rank's result is under 2 GiB");
        if self.world.rank() != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(mine);
            return None;
        }
        let mut counts = vec![0 as Count; self.size()];
        root.gather_into_root(&len, &mut counts[..]);
        let displs = displacements(&counts);
        let total: usize = counts.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(mine, &mut parts);
        }
        Some(split(&all, &counts, &displs))
    }
}

/// Where each rank's part starts in the gathered bytes.
fn displacements(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &n| {
            let start = *at;
            *at += n;
            Some(start)
        })
        .collect()
}

/// The gathered bytes cut into each rank's part.
fn split(all: &[u8], counts: &[Count], displs: &[Count]) -> Vec<Vec<u8>> {
    counts
        .iter()
        .zip(displs)
        .map(|(&n, &at)| all[at as usize..(at + n) as usize].to_vec())
        .collect()
}
