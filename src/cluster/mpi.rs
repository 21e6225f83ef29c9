//! [`Ranks`] over MPI (rsmpi over the system's Open MPI).

use mpi::Count;
use mpi::datatype::PartitionMut;
use mpi::environment::Universe;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;

use std::time::{Duration, Instant};

use super::{Pending, Posted, Ranks};

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
        let displs = offsets(&counts);
        let total: usize = counts.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            root.gather_varcount_into_root(mine, &mut parts);
        }
        Some(split(&all, &counts, &displs))
    }

    fn send(&self, to: usize, tag: i32, bytes: &[u8]) {
        let to = i32::try_from(to).expect("a rank fits MPI's int");
        self.world.process_at_rank(to).send_with_tag(bytes, tag);
    }

    fn send_until(&self, to: usize, tag: i32, bytes: &[u8], deadline: Option<Instant>) -> bool {
        if deadline.is_none() {
            self.send(to, tag, bytes);
            return true;
        }
        // Not done by the deadline: the send stays posted (its buffer with it) and the
        // caller ends the run.
        self.post(to, tag, bytes.to_vec()).wait_until(deadline)
    }

    fn post(&self, to: usize, tag: i32, bytes: Vec<u8>) -> Posted {
        let to = i32::try_from(to).expect("a rank fits MPI's int");
        // The buffer must outlive the request: it is let go when the request completes.
        let buffer: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        let request = self.world.process_at_rank(to).immediate_send_with_tag(
            mpi::request::StaticScope,
            buffer,
            tag,
        );
        Posted::pending(Box::new(MpiSend {
            request: Some(request),
            buffer: std::ptr::from_ref(buffer).cast_mut(),
        }))
    }

    fn receive_until(&self, tag: i32, deadline: Option<Instant>) -> Option<(usize, Vec<u8>)> {
        loop {
            // A probe that does not wait, so the deadline holds whoever stays silent.
            if let Some(probed) = self
                .world
                .any_process()
                .immediate_matched_probe_with_tag(tag)
            {
                let (bytes, status) = probed.matched_receive_vec::<u8>();
                return Some((status.source_rank() as usize, bytes));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn abort(&self, code: i32) -> ! {
        self.world.abort(code)
    }

    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        let len = Count::try_from(mine.len()).expect("a rank's message is under 2 GiB");
        let mut counts = vec![0 as Count; self.size()];
        self.world.all_gather_into(&len, &mut counts[..]);
        let displs = offsets(&counts);
        let total: usize = counts.iter().map(|&n| n as usize).sum();
        let mut all = vec![0u8; total];
        {
            let mut parts = PartitionMut::new(&mut all[..], &counts[..], &displs[..]);
            self.world.all_gather_varcount_into(mine, &mut parts);
        }
        split(&all, &counts, &displs)
    }
}

/// An immediate send under way and the buffer it reads.
struct MpiSend {
    request: Option<mpi::request::Request<'static, [u8]>>,
    /// Leaked from a `Box<[u8]>` by [`Ranks::post`]; freed once the request completed.
    buffer: *mut [u8],
}

impl Pending for MpiSend {
    fn test(&mut self) -> bool {
        let Some(request) = self.request.take() else {
            return true;
        };
        match request.test() {
            Ok(_) => {
                // SAFETY: `buffer` came from `Box::leak` in `post` and MPI is done with it
                // (the request completed); nothing else refers to it, and `request` is
                // gone, so it is freed once.
                drop(unsafe { Box::from_raw(self.buffer) });
                true
            }
            Err(pending) => {
                self.request = Some(pending);
                false
            }
        }
    }
}

impl Drop for MpiSend {
    fn drop(&mut self) {
        // A send not completed cannot be taken back (MPI has no reliable cancel of a
        // send): its request and buffer are left to MPI, and the run ends.
        if let Some(request) = self.request.take() {
            std::mem::forget(request);
        }
    }
}

/// Where each rank's bytes start in the gathered buffer.
fn offsets(counts: &[Count]) -> Vec<Count> {
    counts
        .iter()
        .scan(0, |at, &n| {
            let start = *at;
            *at += n;
            Some(start)
        })
        .collect()
}

/// The gathered buffer cut back into each rank's bytes.
fn split(all: &[u8], counts: &[Count], displs: &[Count]) -> Vec<Vec<u8>> {
    counts
        .iter()
        .zip(displs)
        .map(|(&n, &at)| all[at as usize..(at + n) as usize].to_vec())
        .collect()
}
