//! The read timeout of the commands that read frames with plain blocking reads (`render`,
//! `info`'s verification), as `play` and `bench` have one through their engines.
//!
//! A read the kernel holds (a lane that stopped answering: a dead NFS server, a failing
//! drive) can be neither cancelled nor, on most file systems, interrupted, so nothing on
//! the reading thread can end the wait. A watchdog thread can: when a read under way has
//! made no progress for `--read-timeout`, it says what was being read and ends the process,
//! without waiting for the read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// What the watchdog does with a read that made no progress in time: what was being read,
/// and for how long.
type OnExpire = Box<dyn Fn(&str, Duration) + Send>;

/// Reads under way, by id: what each is, and when it last made progress.
type Reads = Mutex<HashMap<u64, (String, Instant)>>;

/// The process's watchdog, once [`install`]ed.
static DOG: std::sync::OnceLock<Watchdog> = std::sync::OnceLock::new();

/// Starts the process's watchdog (see [`Watchdog::start`]); a second call changes nothing.
pub fn install(timeout: Option<Duration>) {
    let _ = DOG.set(Watchdog::start(timeout));
}

/// Watches a read of `what` with the process's watchdog, if one is installed, until the
/// returned guard drops.
pub fn reading(what: impl Into<String>) -> Option<Watched<'static>> {
    DOG.get().map(|d| d.reading(what))
}

/// A watchdog over the reads of one command; see the module documentation.
pub struct Watchdog {
    reads: Arc<Reads>,
    next: AtomicU64,
}

/// One read under way; dropping it ends the read's watch.
pub struct Watched<'a> {
    dog: &'a Watchdog,
    id: u64,
}

fn lock(r: &Reads) -> std::sync::MutexGuard<'_, HashMap<u64, (String, Instant)>> {
    // Inserts and removals are single operations: a poisoned map is still consistent.
    r.lock().unwrap_or_else(|p| p.into_inner())
}

impl Watchdog {
    /// A watchdog that ends the process (exit status 1) when a read makes no progress for
    /// `timeout`; `None`: reads may take forever (`--read-timeout 0`).
    pub fn start(timeout: Option<Duration>) -> Watchdog {
        Watchdog::with(
            timeout,
            Box::new(move |what, waited| {
                eprintln!(
                    "supercell: error: {what}: no progress for {:.1} s (--read-timeout): a lane \
                     stopped answering? A read the kernel holds cannot be cancelled: exiting \
                     without waiting for it",
                    waited.as_secs_f64()
                );
                std::process::exit(1);
            }),
        )
    }

    fn with(timeout: Option<Duration>, on_expire: OnExpire) -> Watchdog {
        let reads = Arc::new(Reads::default());
        if let Some(limit) = timeout {
            let weak = Arc::downgrade(&reads);
            // Detached: it ends when the watchdog goes, or with the process.
            let _ = std::thread::Builder::new()
                .name("sc-watchdog".into())
                .spawn(move || watch(weak, limit, on_expire));
        }
        Watchdog {
            reads,
            next: AtomicU64::new(0),
        }
    }

    /// Watches a read of `what` (e.g. "frame 3 of /data/storm") until the returned guard
    /// drops.
    pub fn reading(&self, what: impl Into<String>) -> Watched<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.reads).insert(id, (what.into(), Instant::now()));
        Watched { dog: self, id }
    }
}

impl Watched<'_> {
    /// The read made progress: its clock starts again.
    pub fn progress(&self) {
        if let Some(r) = lock(&self.dog.reads).get_mut(&self.id) {
            r.1 = Instant::now();
        }
    }
}

impl Drop for Watched<'_> {
    fn drop(&mut self) {
        lock(&self.dog.reads).remove(&self.id);
    }
}

fn watch(reads: Weak<Reads>, limit: Duration, on_expire: OnExpire) {
    let look = (limit / 4).clamp(Duration::from_millis(1), Duration::from_millis(100));
    loop {
        std::thread::sleep(look);
        let Some(reads) = reads.upgrade() else {
            return;
        };
        let stuck = lock(&reads)
            .values()
            .map(|(what, since)| (what.clone(), since.elapsed()))
            .filter(|(_, waited)| *waited >= limit)
            .max_by_key(|(_, waited)| *waited);
        if let Some((what, waited)) = stuck {
            on_expire(&what, waited);
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    fn dog(limit: Duration) -> (Watchdog, mpsc::Receiver<(String, Duration)>) {
        let (tx, rx) = mpsc::channel();
        let tx = Mutex::new(tx);
        let d = Watchdog::with(
            Some(limit),
            Box::new(move |what, waited| {
                let _ = tx.lock().unwrap().send((what.to_string(), waited));
            }),
        );
        (d, rx)
    }

    /// A read with no progress for the limit is named, within the limit and a look.
    #[test]
    fn a_read_without_progress_is_named_in_time() {
        let limit = Duration::from_millis(200);
        let (d, rx) = dog(limit);
        let t0 = Instant::now();
        let _r = d.reading("frame 3 of /data/storm");
        let (what, waited) = rx.recv_timeout(Duration::from_secs(5)).expect("fired");
        assert_eq!(what, "frame 3 of /data/storm");
        assert!(waited >= limit);
        assert!(
            t0.elapsed() < limit + Duration::from_millis(300),
            "{:?}",
            t0.elapsed()
        );
    }

    /// Reads that end, or make progress, in time are not named.
    #[test]
    fn reads_that_progress_or_end_are_left_alone() {
        let limit = Duration::from_millis(200);
        let (d, rx) = dog(limit);
        for _ in 0..4 {
            drop(d.reading("a quick read"));
        }
        let long = d.reading("a long read that progresses");
        for _ in 0..8 {
            std::thread::sleep(limit / 4);
            long.progress();
        }
        drop(long);
        assert!(rx.recv_timeout(limit * 2).is_err());
    }
}
