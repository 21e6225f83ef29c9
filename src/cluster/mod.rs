//! The ranks of one run: this process alone, or one of several started by `mpirun`.
//!
//! A distributed command is written once against [`Ranks`]: who this process is among the
//! ranks, which host it runs on and its place there (the local rank picks the GPU), a
//! barrier that starts every rank together, and gathering each rank's result on rank 0.
//! [`Solo`] is the one-process case (N = 1, no MPI needed); [`MpiRanks`] (cargo feature
//! `mpi`) the Open MPI one. The transport is the only difference: the command's own code
//! is the same for one rank and for many.

#[cfg(feature = "mpi")]
mod mpi;
#[cfg(feature = "mpi")]
pub use mpi::MpiRanks;
mod all_within;
mod composite;
mod within;
pub use all_within::{all_gather_within, broadcast_within, gather_large_within};
pub use composite::{
    CompositeError, NotSplit, Over, all_reduce_within, composite_within, visibility_order,
};
pub use within::{Silent, barrier_within, gather_within};

use std::time::Instant;

/// This process's place among the ranks of a run, and the collective steps the ranks take
/// together. Every rank must make the same collective calls in the same order.
pub trait Ranks {
    /// This process's rank, `0..size()`; rank 0 reports.
    fn rank(&self) -> usize;
    /// How many ranks the run has.
    fn size(&self) -> usize;
    /// This rank's place among the ranks on its host (0 for the first): picks its GPU.
    fn local_rank(&self) -> usize;
    /// How many ranks share this host.
    fn local_size(&self) -> usize;
    /// The host's name, as the ranks report it.
    fn host(&self) -> String;
    /// Returns once every rank has called it.
    fn barrier(&self);
    /// Every rank's bytes in rank order, on rank 0; `None` on the other ranks.
    fn gather(&self, mine: &[u8]) -> Option<Vec<Vec<u8>>>;
    /// Every rank's bytes in rank order, on every rank (what each rank needs to make the
    /// same decision as the others, such as who shares its host).
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>>;
    /// Sends `bytes` to rank `to` under `tag` (point to point: only that rank takes part).
    fn send(&self, to: usize, tag: i32, bytes: &[u8]);
    /// As [`Ranks::send`], but gives up at `deadline` where rank `to` has not taken the
    /// message by then (a large message waits for its receiver): `false` then, and the
    /// caller must end the run ([`Ranks::abort`]), since the message may still be pending.
    /// Transports whose sends never wait for the receiver send and return `true`.
    fn send_until(&self, to: usize, tag: i32, bytes: &[u8], deadline: Option<Instant>) -> bool {
        let _ = deadline;
        self.send(to, tag, bytes);
        true
    }
    /// Posts `bytes` to rank `to` under `tag` without waiting for the receiver (an
    /// immediate send, `MPI_Isend`): the [`Posted`] send owns the bytes until the receiver
    /// has taken them ([`Posted::done`]). Messages to one rank under one tag arrive in the
    /// order they were sent or posted. Transports whose sends never wait for the receiver
    /// send at once.
    fn post(&self, to: usize, tag: i32, bytes: Vec<u8>) -> Posted {
        self.send(to, tag, &bytes);
        Posted::completed()
    }
    /// The next message under `tag` to this rank, from any rank: (sender, bytes); `None`
    /// where none came by `deadline` (`None`: wait as long as it takes).
    fn receive_until(&self, tag: i32, deadline: Option<Instant>) -> Option<(usize, Vec<u8>)>;
    /// Ends every rank of the run now with exit status `code` (`MPI_Abort`): how a rank
    /// that found another silent stops it, and the run, instead of waiting for it.
    fn abort(&self, code: i32) -> !;
}

/// A send still under way, as the transport sees it.
pub trait Pending {
    /// Whether the receiver has taken the message (the buffer is then let go).
    fn test(&mut self) -> bool;
}

/// A message posted with [`Ranks::post`]: its bytes stay alive until the receiver has
/// taken them. One dropped before it is done leaves its bytes to the transport (an
/// immediate send cannot be taken back): the caller should then end the run.
#[must_use = "a posted send is done only once the receiver took it"]
pub struct Posted(Option<Box<dyn Pending>>);

impl Posted {
    /// A send that completed at once.
    pub fn completed() -> Posted {
        Posted(None)
    }
    /// A send under way.
    pub fn pending(send: Box<dyn Pending>) -> Posted {
        Posted(Some(send))
    }
    /// Whether the receiver has taken the message (asks the transport, without waiting).
    pub fn done(&mut self) -> bool {
        let done = self.0.as_mut().is_none_or(|p| p.test());
        if done {
            self.0 = None;
        }
        done
    }
    /// Waits until the receiver has taken the message, at most until `deadline`: whether
    /// it did.
    pub fn wait_until(&mut self, deadline: Option<Instant>) -> bool {
        loop {
            if self.done() {
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(200));
        }
    }
}

/// The size of the job an MPI launcher started this process in, from the variables Open
/// MPI, PMIx and PMI-2 launchers set (`lookup` reads one; the binary passes the
/// environment): `None` for a plain run.
pub fn launched_size(lookup: impl Fn(&str) -> Option<String>) -> Option<usize> {
    ["OMPI_COMM_WORLD_SIZE", "PMIX_SIZE", "PMI_SIZE"]
        .iter()
        .find_map(|k| lookup(k)?.trim().parse().ok())
        .or_else(|| lookup("PMIX_RANK").map(|_| 1))
}

/// Why a process an MPI launcher started cannot run as one of its ranks.
#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    /// Started as one of several ranks by a build without MPI: each process would work
    /// alone as if it were the whole run.
    #[error(
        "started by an MPI launcher as one of {0} ranks, but this build has no MPI: build with \
         `--features mpi` (needs Open MPI's libopenmpi-dev and libclang-dev)"
    )]
    NoMpi(usize),
    /// MPI was initialised before in this process.
    #[error("MPI was initialised twice in one process")]
    Twice,
}

/// This process's ranks when an MPI launcher started it (see [`launched_size`]): `None`
/// for a plain run, which then behaves as it always has.
pub fn launched(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Option<Box<dyn Ranks>>, LaunchError> {
    let Some(size) = launched_size(lookup) else {
        return Ok(None);
    };
    #[cfg(feature = "mpi")]
    {
        let _ = size;
        match MpiRanks::init() {
            Some(r) => Ok(Some(Box::new(r))),
            None => Err(LaunchError::Twice),
        }
    }
    #[cfg(not(feature = "mpi"))]
    {
        if size > 1 {
            return Err(LaunchError::NoMpi(size));
        }
        Ok(None)
    }
}

/// One process alone: rank 0 of 1.
#[derive(Clone, Copy, Debug, Default)]
pub struct Solo;

impl Ranks for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn size(&self) -> usize {
        1
    }

    fn local_rank(&self) -> usize {
        0
    }

    fn local_size(&self) -> usize {
        1
    }

    fn host(&self) -> String {
        host_name()
    }

    fn barrier(&self) {}

    fn gather(&self, mine: &[u8]) -> Option<Vec<Vec<u8>>> {
        Some(vec![mine.to_vec()])
    }

    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        vec![mine.to_vec()]
    }

    fn send(&self, to: usize, _tag: i32, _bytes: &[u8]) {
        unreachable!("rank 0 of 1 has no rank {to} to send to")
    }

    fn receive_until(&self, _tag: i32, _deadline: Option<Instant>) -> Option<(usize, Vec<u8>)> {
        unreachable!("rank 0 of 1 has nobody to hear from")
    }

    fn abort(&self, code: i32) -> ! {
        std::process::exit(code)
    }
}

/// The kernel's host name (empty where it cannot be read).
pub fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is writable for its whole length, which is passed.
    let r = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if r != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The indices of `0..count` that `rank` of `size` owns: every `size`-th from `rank` (as
/// alternate frames are dealt out), so each rank's share spans the whole series.
pub fn share(count: usize, rank: usize, size: usize) -> impl Iterator<Item = usize> {
    (rank..count).step_by(size.max(1))
}

/// Ranks as threads of one process, for testing what ranks do together without MPI (this
/// crate's tests and those of the tools built on it).
pub mod threads {
    use std::sync::{Arc, Barrier, Condvar, Mutex};
    use std::time::Instant;

    use super::Ranks;

    /// Messages sent and not yet received: (from, to, tag, bytes).
    type Mail = (Mutex<Vec<(usize, usize, i32, Vec<u8>)>>, Condvar);

    /// One thread's rank among `size` threads on one (pretend) host each of `per_host`.
    pub struct ThreadRanks {
        rank: usize,
        size: usize,
        per_host: usize,
        barrier: Arc<Barrier>,
        slots: Arc<Mutex<Vec<Option<Vec<u8>>>>>,
        mail: Arc<Mail>,
    }

    /// Runs `f` on each of `size` thread ranks (`per_host` to a host) at once; their
    /// results in rank order.
    pub fn run_on<T: Send>(
        size: usize,
        per_host: usize,
        f: impl Fn(&ThreadRanks) -> T + Sync,
    ) -> Vec<T> {
        std::thread::scope(|s| {
            let runs: Vec<_> = ranks(size, per_host)
                .into_iter()
                .map(|r| {
                    let f = &f;
                    s.spawn(move || f(&r))
                })
                .collect();
            runs.into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        })
    }

    /// `size` ranks, `per_host` to a host (hosts named `host0`, `host1`, ...).
    pub fn ranks(size: usize, per_host: usize) -> Vec<ThreadRanks> {
        let barrier = Arc::new(Barrier::new(size));
        let slots = Arc::new(Mutex::new(vec![None; size]));
        let mail = Arc::new(Mail::default());
        (0..size)
            .map(|rank| ThreadRanks {
                rank,
                size,
                per_host: per_host.max(1),
                barrier: barrier.clone(),
                slots: slots.clone(),
                mail: mail.clone(),
            })
            .collect()
    }

    impl Ranks for ThreadRanks {
        fn rank(&self) -> usize {
            self.rank
        }

        fn size(&self) -> usize {
            self.size
        }

        fn local_rank(&self) -> usize {
            self.rank % self.per_host
        }

        fn local_size(&self) -> usize {
            self.per_host
                .min(self.size - self.rank / self.per_host * self.per_host)
        }

        fn host(&self) -> String {
            format!("host{}", self.rank / self.per_host)
        }

        fn barrier(&self) {
            self.barrier.wait();
        }

        fn gather(&self, mine: &[u8]) -> Option<Vec<Vec<u8>>> {
            self.slots.lock().unwrap()[self.rank] = Some(mine.to_vec());
            self.barrier.wait();
            let out = (self.rank == 0).then(|| {
                let mut slots = self.slots.lock().unwrap();
                slots.iter_mut().map(|s| s.take().unwrap()).collect()
            });
            // Nobody writes the next gather's slots before rank 0 has taken these.
            self.barrier.wait();
            out
        }

        fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
            self.slots.lock().unwrap()[self.rank] = Some(mine.to_vec());
            self.barrier.wait();
            let out = self
                .slots
                .lock()
                .unwrap()
                .iter()
                .map(|s| s.clone().unwrap())
                .collect();
            // Every rank has its copy before anyone writes the slots again.
            self.barrier.wait();
            out
        }

        fn send(&self, to: usize, tag: i32, bytes: &[u8]) {
            let (queue, arrived) = &*self.mail;
            queue
                .lock()
                .unwrap()
                .push((self.rank, to, tag, bytes.to_vec()));
            arrived.notify_all();
        }

        fn receive_until(&self, tag: i32, deadline: Option<Instant>) -> Option<(usize, Vec<u8>)> {
            let (queue, arrived) = &*self.mail;
            let mut q = queue.lock().unwrap();
            loop {
                if let Some(i) = q.iter().position(|m| m.1 == self.rank && m.2 == tag) {
                    let (from, _, _, bytes) = q.remove(i);
                    return Some((from, bytes));
                }
                q = match deadline {
                    None => arrived.wait(q).unwrap(),
                    Some(d) => {
                        let left = d.checked_duration_since(Instant::now())?;
                        arrived.wait_timeout(q, left).unwrap().0
                    }
                };
            }
        }

        fn abort(&self, code: i32) -> ! {
            panic!("rank {} aborted the run with status {code}", self.rank)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_deal_every_index_to_exactly_one_rank() {
        for size in 1..6 {
            let mut seen = vec![0; 17];
            for rank in 0..size {
                for i in share(17, rank, size) {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&n| n == 1), "size {size}: {seen:?}");
        }
        assert_eq!(share(5, 1, 2).collect::<Vec<_>>(), vec![1, 3]);
        assert_eq!(share(1, 3, 4).count(), 0);
    }

    #[test]
    fn thread_ranks_gather_in_rank_order_on_rank_zero_only() {
        let got: Vec<Option<Vec<Vec<u8>>>> = std::thread::scope(|s| {
            let handles: Vec<_> = threads::ranks(3, 2)
                .into_iter()
                .map(|r| {
                    s.spawn(move || {
                        r.barrier();
                        let first = r.gather(&[r.rank() as u8; 2]);
                        // A second gather reuses the slots.
                        let second = r.gather(&[10 + r.rank() as u8]);
                        assert_eq!(first.is_some(), second.is_some());
                        first.map(|f| {
                            let mut f = f;
                            f.extend(second.unwrap());
                            f
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert_eq!(
            got[0],
            Some(vec![
                vec![0, 0],
                vec![1, 1],
                vec![2, 2],
                vec![10],
                vec![11],
                vec![12]
            ])
        );
        assert!(got[1].is_none() && got[2].is_none());
    }

    #[test]
    fn thread_ranks_all_gather_on_every_rank() {
        let got: Vec<Vec<Vec<u8>>> = std::thread::scope(|s| {
            let handles: Vec<_> = threads::ranks(3, 1)
                .into_iter()
                .map(|r| {
                    s.spawn(move || {
                        let mut all = r.all_gather(&[r.rank() as u8]);
                        // A gather after it reuses the slots.
                        let _ = r.gather(&[0]);
                        all.extend(r.all_gather(&[20 + r.rank() as u8]));
                        all
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        for all in got {
            assert_eq!(
                all,
                vec![vec![0], vec![1], vec![2], vec![20], vec![21], vec![22]]
            );
        }
    }

    #[test]
    fn solo_is_rank_zero_of_one() {
        let s = Solo;
        assert_eq!(
            (s.rank(), s.size(), s.local_rank(), s.local_size()),
            (0, 1, 0, 1)
        );
        assert_eq!(s.gather(b"x"), Some(vec![b"x".to_vec()]));
        assert_eq!(s.all_gather(b"x"), vec![b"x".to_vec()]);
    }
}
