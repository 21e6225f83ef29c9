//! The I/O worker pool: reads `(fd, offset, len)` into host memory with one io_uring per
//! worker thread (O_DIRECT, registered buffers, `ReadFixed`, many reads in flight), or with
//! blocking `pread` per thread where io_uring is unavailable (seccomp, old kernels), or
//! through a device-read hook (cuFile) for the GPUDirect path.
//!
//! Work is queued per lane. A worker serves its own lanes first (so every lane keeps reads
//! in flight however the frames are striped) and helps other lanes when its own are empty.
//! Every read is completed exactly once through the sink: short reads are continued,
//! EAGAIN/EINTR retried, errors reported with the file offset.

use std::collections::{HashMap, VecDeque};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use io_uring::{IoUring, opcode, types};

use super::error::{IngestError, Result};
use super::faults::{FaultKind, FaultPlan, ReadSite, injected};

/// Which host read mechanism to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum IoBackend {
    /// io_uring when the kernel allows it, else pread threads (and say so).
    #[default]
    Auto,
    /// io_uring or fail.
    IoUring,
    /// A pool of threads doing blocking `pread`.
    Pread,
}

/// The mechanism a pool actually uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActiveBackend {
    /// io_uring; `fixed` when the buffers are registered (`ReadFixed`).
    IoUring {
        /// Whether reads use registered buffers.
        fixed: bool,
    },
    /// Blocking `pread` (or the device-read hook) per thread.
    Pread,
}

impl std::fmt::Display for ActiveBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActiveBackend::IoUring { fixed: true } => f.write_str("io_uring, registered buffers"),
            ActiveBackend::IoUring { fixed: false } => f.write_str("io_uring"),
            ActiveBackend::Pread => f.write_str("pread threads"),
        }
    }
}

/// Where a read's bytes go.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// Host memory at this address (must lie inside memory that outlives the read).
    Host { addr: usize },
    /// Device memory through the pool's device-read hook (cuFile).
    Device {
        handle: usize,
        base: u64,
        dev_offset: u64,
    },
}

/// One read.
#[derive(Clone, Copy, Debug)]
pub(crate) struct IoTask {
    /// Caller's id, returned in [`IoDone`].
    pub token: u64,
    /// Lane queue to put the read on.
    pub lane: u32,
    pub fd: RawFd,
    pub offset: u64,
    pub len: usize,
    pub target: Target,
    /// The frame the read belongs to (for fault rules that select frames).
    pub frame: Option<u32>,
}

/// A finished read.
#[derive(Debug)]
pub(crate) struct IoDone {
    pub token: u64,
    pub result: std::result::Result<(), String>,
    pub completed: Instant,
}

/// A read a worker has taken off its queue and not finished: in the kernel, in a blocking
/// call, or held back by a `hang` fault. The engine asks for these when a frame times out,
/// to name the read that does not answer rather than one still queued behind it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Outstanding {
    /// The read's token ([`IoTask::token`]).
    pub token: u64,
    pub fd: RawFd,
    pub offset: u64,
    pub len: usize,
    /// When a worker took it.
    pub since: Instant,
}

/// The reads one worker has taken and not finished, by token.
type Taken = Arc<Mutex<HashMap<u64, Outstanding>>>;

fn lock_taken(t: &Taken) -> std::sync::MutexGuard<'_, HashMap<u64, Outstanding>> {
    // Inserts and removals are single operations: a poisoned map is still consistent.
    t.lock().unwrap_or_else(|p| p.into_inner())
}

/// Counters of a pool, for gdsio-style reports.
#[derive(Debug, Default)]
pub struct IoCounters {
    /// Reads completed successfully.
    pub ops: AtomicU64,
    /// Bytes read.
    pub bytes: AtomicU64,
    /// Sum of read latencies (queued at the device to completed), nanoseconds.
    pub latency_ns: AtomicU64,
    /// Reads that failed.
    pub errors: AtomicU64,
    /// Latencies of the successful reads, for percentiles.
    pub latency: super::latency::LatencyHistogram,
}

/// Reads `len` bytes of `fd` at `file_offset` into device memory; the GDS engine's hook.
/// The last argument asks for an injected cuFile error (a `cufile` fault rule).
pub(crate) type DeviceRead =
    Arc<dyn Fn(usize, u64, u64, u64, usize, bool) -> std::result::Result<(), String> + Send + Sync>;
/// Where finished reads go.
pub(crate) type Sink = Arc<dyn Fn(IoDone) + Send + Sync>;
/// Runs first on every worker thread (binds the CUDA context for cuFile).
pub(crate) type OnStart = Arc<dyn Fn() -> std::result::Result<(), String> + Send + Sync>;

/// Pool settings.
pub(crate) struct PoolConfig {
    pub threads: usize,
    pub queue_depth: usize,
    pub lanes: u32,
    pub backend: IoBackend,
    /// Host memory that reads target, registered with every ring (`ReadFixed`).
    pub regions: Vec<(usize, usize)>,
    pub device_read: Option<DeviceRead>,
    pub on_start: Option<OnStart>,
    /// Faults to inject into the reads (tests, demonstrations).
    pub faults: Option<Arc<FaultPlan>>,
}

/// Largest buffer io_uring registers in one piece.
const MAX_REGION: usize = 1 << 30;

struct Queues {
    lanes: Vec<VecDeque<IoTask>>,
    queued: usize,
    shutdown: bool,
}

struct Shared {
    q: Mutex<Queues>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queues> {
        // A worker that panicked holding the lock left consistent queues (pushes and pops
        // are single operations), so the poison flag carries no information.
        self.q.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The lanes worker `i` of `threads` serves first.
fn own_lanes(i: usize, threads: usize, lanes: usize) -> Vec<usize> {
    if threads >= lanes {
        vec![i % lanes]
    } else {
        (0..lanes).filter(|l| l % threads == i).collect()
    }
}

fn pop(q: &mut Queues, own: &[usize], rr: &mut usize) -> Option<IoTask> {
    if q.queued == 0 {
        return None;
    }
    let n = own.len();
    for k in 0..n {
        let l = own[(*rr + k) % n];
        if let Some(t) = q.lanes[l].pop_front() {
            *rr = (*rr + k + 1) % n;
            q.queued -= 1;
            return Some(t);
        }
    }
    // Own lanes idle: help the longest queue.
    let l = (0..q.lanes.len()).max_by_key(|&l| q.lanes[l].len())?;
    let t = q.lanes[l].pop_front()?;
    q.queued -= 1;
    Some(t)
}

/// The worker pool. Dropping it stops the workers after their reads in flight complete.
pub(crate) struct IoPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Each worker's reads taken and not finished.
    taken: Vec<Taken>,
    /// What the pool uses.
    pub backend: ActiveBackend,
    /// What the user should know (fallbacks).
    pub notes: Vec<String>,
    /// Counters.
    pub counters: Arc<IoCounters>,
}

/// Whether this process may create an io_uring; the error otherwise.
pub fn io_uring_probe() -> std::result::Result<(), std::io::Error> {
    IoUring::new(4).map(drop)
}

impl IoPool {
    pub(crate) fn new(cfg: PoolConfig, sink: Sink) -> Result<IoPool> {
        if cfg.threads == 0 || cfg.threads > 4096 {
            return Err(IngestError::Usage(format!(
                "thread count {} is not in 1..=4096",
                cfg.threads
            )));
        }
        if cfg.queue_depth == 0 || cfg.queue_depth > 4096 {
            return Err(IngestError::Usage(format!(
                "queue depth {} is not in 1..=4096",
                cfg.queue_depth
            )));
        }
        let lanes = cfg.lanes.max(1) as usize;
        let mut notes = Vec::new();
        let mut backend = match cfg.backend {
            IoBackend::Pread => ActiveBackend::Pread,
            IoBackend::IoUring | IoBackend::Auto => match io_uring_probe() {
                Ok(()) => ActiveBackend::IoUring { fixed: true },
                Err(e) if cfg.backend == IoBackend::IoUring => {
                    return Err(IngestError::Unavailable(format!(
                        "io_uring is not available here ({e}); a seccomp profile or \
                         kernel.io_uring_disabled may block it"
                    )));
                }
                Err(e) => {
                    notes.push(format!(
                        "io_uring is not available ({e}; a seccomp profile or \
                         kernel.io_uring_disabled may block it): using {} pread threads",
                        cfg.threads
                    ));
                    ActiveBackend::Pread
                }
            },
        };
        if cfg.device_read.is_some() {
            // cuFile reads are blocking calls; the ring has nothing to do with them.
            backend = ActiveBackend::Pread;
        }
        // Split regions into pieces io_uring accepts, sorted for lookup.
        let mut regions: Vec<(usize, usize)> = Vec::new();
        for &(start, len) in &cfg.regions {
            let mut off = 0;
            while off < len {
                let n = MAX_REGION.min(len - off);
                regions.push((start + off, n));
                off += n;
            }
        }
        regions.sort_unstable();
        if regions.len() > u16::MAX as usize {
            regions.clear();
        }
        if backend == (ActiveBackend::IoUring { fixed: true }) {
            if regions.is_empty() {
                backend = ActiveBackend::IoUring { fixed: false };
            } else if let Err(e) = register_probe(&regions) {
                notes.push(format!(
                    "io_uring cannot register the buffers ({e}; RLIMIT_MEMLOCK?): plain reads"
                ));
                backend = ActiveBackend::IoUring { fixed: false };
            }
        }
        let shared = Arc::new(Shared {
            q: Mutex::new(Queues {
                lanes: (0..lanes).map(|_| VecDeque::new()).collect(),
                queued: 0,
                shutdown: false,
            }),
            cv: Condvar::new(),
        });
        let counters = Arc::new(IoCounters::default());
        let regions = Arc::new(regions);
        let mut workers = Vec::with_capacity(cfg.threads);
        let taken: Vec<Taken> = (0..cfg.threads).map(|_| Taken::default()).collect();
        for (i, taken) in taken.iter().enumerate() {
            let w = Worker {
                shared: shared.clone(),
                taken: taken.clone(),
                own: own_lanes(i, cfg.threads, lanes),
                rr: 0,
                sink: sink.clone(),
                counters: counters.clone(),
                regions: regions.clone(),
                device_read: cfg.device_read.clone(),
                faults: cfg.faults.clone(),
            };
            let on_start = cfg.on_start.clone();
            let depth = cfg.queue_depth;
            let handle = std::thread::Builder::new()
                .name(format!("sc-io-{i}"))
                .spawn(move || {
                    let start_err = on_start.and_then(|f| f().err());
                    match backend {
                        ActiveBackend::IoUring { fixed } if start_err.is_none() => {
                            w.run_uring(depth, fixed)
                        }
                        _ => w.run_blocking(start_err),
                    }
                })
                .map_err(|e| IngestError::thread("I/O thread", e));
            match handle {
                Ok(h) => workers.push(h),
                Err(e) => {
                    // Stop the ones already running before failing.
                    shared.lock().shutdown = true;
                    shared.cv.notify_all();
                    for h in workers {
                        let _ = h.join();
                    }
                    return Err(e);
                }
            }
        }
        Ok(IoPool {
            shared,
            workers,
            taken,
            backend,
            notes,
            counters,
        })
    }

    /// Queues reads; they complete through the sink.
    pub(crate) fn submit(&self, tasks: impl IntoIterator<Item = IoTask>) {
        let mut q = self.shared.lock();
        let nl = q.lanes.len();
        let mut n = 0usize;
        for t in tasks {
            q.lanes[t.lane as usize % nl].push_back(t);
            q.queued += 1;
            n += 1;
        }
        drop(q);
        // Wake one idle worker per read rather than all of them for every batch (busy
        // workers pick reads up themselves between completions).
        if n >= self.workers.len() {
            self.shared.cv.notify_all();
        } else {
            for _ in 0..n {
                self.shared.cv.notify_one();
            }
        }
    }
}

impl IoPool {
    /// Drops the queued (not yet issued) reads whose token `matches`; returns how many.
    /// Reads already issued complete as usual.
    pub(crate) fn cancel(&self, matches: impl Fn(u64) -> bool) -> usize {
        let mut q = self.shared.lock();
        let mut removed = 0;
        for l in &mut q.lanes {
            let before = l.len();
            l.retain(|t| !matches(t.token));
            removed += before - l.len();
        }
        q.queued -= removed;
        removed
    }

    /// The reads workers have taken and not finished (see [`Outstanding`]).
    pub(crate) fn outstanding(&self) -> Vec<Outstanding> {
        self.taken
            .iter()
            .flat_map(|t| lock_taken(t).values().copied().collect::<Vec<_>>())
            .collect()
    }
}

impl Drop for IoPool {
    fn drop(&mut self) {
        {
            let mut q = self.shared.lock();
            q.shutdown = true;
            for l in &mut q.lanes {
                l.clear();
            }
            q.queued = 0;
        }
        self.shared.cv.notify_all();
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

fn register_probe(regions: &[(usize, usize)]) -> std::io::Result<()> {
    let ring = IoUring::new(4)?;
    let iov = iovecs(regions);
    // SAFETY: the regions are live memory owned by the engine, which outlives the probe
    // ring (dropped at the end of this function, unregistering them).
    unsafe { ring.submitter().register_buffers(&iov) }
}

fn iovecs(regions: &[(usize, usize)]) -> Vec<libc::iovec> {
    regions
        .iter()
        .map(|&(a, n)| libc::iovec {
            iov_base: a as *mut libc::c_void,
            iov_len: n,
        })
        .collect()
}

struct InFlight {
    task: IoTask,
    done: usize,
    submitted: Instant,
    /// An injected short read: the first attempt asks for this many bytes only.
    short: Option<usize>,
}

/// What the fault plan does to a read about to be issued.
enum Injected {
    /// Nothing: issue it.
    None,
    /// Fail it with this message (nothing is read).
    Fail(String),
    /// Hold it back while rule `0` lasts, then issue it.
    Hang(usize),
    /// Ask for this many bytes first.
    Short(usize),
}

/// How long a worker holding hung reads sleeps between looks at the plan and the queue.
const HANG_POLL: Duration = Duration::from_millis(5);

struct Worker {
    shared: Arc<Shared>,
    /// The reads this worker has taken and not finished.
    taken: Taken,
    own: Vec<usize>,
    rr: usize,
    sink: Sink,
    counters: Arc<IoCounters>,
    regions: Arc<Vec<(usize, usize)>>,
    device_read: Option<DeviceRead>,
    faults: Option<Arc<FaultPlan>>,
}

impl Worker {
    /// Next task; blocks while none is queued. `None`: shut down.
    fn pop_blocking(&mut self) -> Option<IoTask> {
        let mut q = self.shared.lock();
        loop {
            if q.shutdown {
                return None;
            }
            if let Some(t) = pop(&mut q, &self.own, &mut self.rr) {
                // Noted before the queue lock goes: a read is always queued or taken.
                self.take(&t);
                return Some(t);
            }
            q = self.shared.cv.wait(q).unwrap_or_else(|p| p.into_inner());
        }
    }

    fn try_pop(&mut self) -> Option<IoTask> {
        let mut q = self.shared.lock();
        if q.shutdown {
            return None;
        }
        let t = pop(&mut q, &self.own, &mut self.rr)?;
        self.take(&t);
        Some(t)
    }

    fn take(&self, t: &IoTask) {
        let read = Outstanding {
            token: t.token,
            fd: t.fd,
            offset: t.offset,
            len: t.len,
            since: Instant::now(),
        };
        lock_taken(&self.taken).insert(t.token, read);
    }

    fn finish(&self, task: &IoTask, submitted: Instant, result: std::result::Result<(), String>) {
        let completed = Instant::now();
        lock_taken(&self.taken).remove(&task.token);
        if result.is_ok() {
            self.counters.ops.fetch_add(1, Ordering::Relaxed);
            self.counters
                .bytes
                .fetch_add(task.len as u64, Ordering::Relaxed);
            let ns = completed.duration_since(submitted).as_nanos() as u64;
            self.counters.latency_ns.fetch_add(ns, Ordering::Relaxed);
            self.counters.latency.record(ns);
        } else {
            self.counters.errors.fetch_add(1, Ordering::Relaxed);
        }
        (self.sink)(IoDone {
            token: task.token,
            result,
            completed,
        });
    }

    /// Consults the fault plan for `task` (see [`super::faults`]).
    fn inject(&self, task: &IoTask) -> Injected {
        let Some(plan) = &self.faults else {
            return Injected::None;
        };
        let site = ReadSite {
            lane: task.lane,
            frame: task.frame,
            offset: task.offset,
            len: task.len,
        };
        if plan.fire(FaultKind::Eio, &site).is_some() {
            return Injected::Fail(injected(
                &std::io::Error::from_raw_os_error(libc::EIO).to_string(),
            ));
        }
        if let Some(rule) = plan.fire(FaultKind::Hang, &site) {
            return Injected::Hang(rule);
        }
        // Half the read, in whole pages (O_DIRECT), when it has at least two.
        let half = (task.len / 2) & !4095;
        if half > 0 && plan.fire(FaultKind::Short, &site).is_some() {
            return Injected::Short(half);
        }
        Injected::None
    }

    /// Whether the plan makes this worker's next `io_uring_enter` fail (`site`: a read it has
    /// in the kernel).
    fn enter_fails(&self, site: Option<ReadSite>) -> bool {
        match (&self.faults, site) {
            (Some(plan), Some(site)) => plan.fire(FaultKind::Enter, &site).is_some(),
            _ => false,
        }
    }

    /// Holds a hung read (blocking backend) until its rule ends. Stopping the pool does
    /// not end it: a read the kernel holds does not notice the engine going away either,
    /// and the engine must get by without it (see `engine::plan`, abandoned reads).
    fn hold(&self, rule: usize) {
        if let Some(plan) = &self.faults {
            while plan.still_active(rule) {
                plan.wait(HANG_POLL);
            }
        }
    }

    fn run_blocking(mut self, start_err: Option<String>) {
        while let Some(task) = self.pop_blocking() {
            let submitted = Instant::now();
            let mut first = None;
            match self.inject(&task) {
                Injected::Fail(msg) => {
                    self.finish(&task, submitted, Err(msg));
                    continue;
                }
                Injected::Hang(rule) => self.hold(rule),
                Injected::Short(n) => first = Some(n),
                Injected::None => {}
            }
            let result = match (&start_err, task.target) {
                (Some(e), _) => Err(format!("I/O thread could not start: {e}")),
                (None, Target::Host { addr }) => {
                    pread_all(task.fd, addr, task.len, task.offset, first)
                }
                (
                    None,
                    Target::Device {
                        handle,
                        base,
                        dev_offset,
                    },
                ) => match &self.device_read {
                    Some(f) => {
                        let inject = self.faults.as_ref().is_some_and(|p| {
                            let site = ReadSite {
                                lane: task.lane,
                                frame: task.frame,
                                offset: task.offset,
                                len: task.len,
                            };
                            p.fire(FaultKind::CuFile, &site).is_some()
                        });
                        f(handle, base, dev_offset, task.offset, task.len, inject)
                    }
                    None => Err("device read without a device-read hook".into()),
                },
            };
            self.finish(&task, submitted, result);
        }
    }

    fn region_of(&self, addr: usize, len: usize) -> Option<u16> {
        let i = self.regions.partition_point(|&(s, _)| s <= addr);
        let (s, n) = *self.regions.get(i.checked_sub(1)?)?;
        (addr + len <= s + n).then_some((i - 1) as u16)
    }

    fn sqe(&self, f: &InFlight, key: u64, fixed: bool) -> io_uring::squeue::Entry {
        let Target::Host { addr } = f.task.target else {
            unreachable!("device targets never reach a ring")
        };
        let ptr = (addr + f.done) as *mut u8;
        // u32 length: reads are at most a chunk; clamp in case (the rest is continued).
        let want = match f.short {
            Some(n) if f.done == 0 => n,
            _ => f.task.len - f.done,
        };
        let len = want.min(1 << 30) as u32;
        let off = f.task.offset + f.done as u64;
        let fd = types::Fd(f.task.fd);
        match fixed
            .then(|| self.region_of(addr + f.done, len as usize))
            .flatten()
        {
            Some(idx) => opcode::ReadFixed::new(fd, ptr, len, idx)
                .offset(off)
                .build()
                .user_data(key),
            None => opcode::Read::new(fd, ptr, len)
                .offset(off)
                .build()
                .user_data(key),
        }
    }

    fn run_uring(mut self, depth: usize, fixed_wanted: bool) {
        let ring = match IoUring::builder().setup_clamp().build(depth as u32) {
            Ok(r) => r,
            Err(e) => {
                let msg = format!("cannot create io_uring: {e}");
                return self.run_blocking(Some(msg));
            }
        };
        let mut fixed = false;
        if fixed_wanted && !self.regions.is_empty() {
            let iov = iovecs(&self.regions);
            // SAFETY: the regions belong to the engine, which joins this worker (dropping
            // the ring and its registration) before freeing them.
            fixed = unsafe { ring.submitter().register_buffers(&iov) }.is_ok();
        }
        let mut u = UringLoop {
            ring,
            fixed,
            slab: (0..depth).map(|_| None).collect(),
            free: (0..depth).rev().collect(),
            inflight: 0,
            hung: Vec::new(),
            broken: None,
        };
        loop {
            if !u.hung.is_empty() {
                self.reissue_hung(&mut u);
            }
            if !self.fill_ring(&mut u) {
                return;
            }
            if u.inflight == 0 {
                if u.hung.is_empty()
                    && let Some(msg) = u.broken.take()
                {
                    // Nothing of ours is in the kernel any more: the ring (and its buffer
                    // registration) can go; later reads use pread.
                    drop(u);
                    log::warn!("supercell: {msg}; this I/O thread continues with pread");
                    return self.run_blocking(None);
                }
                if !u.hung.is_empty()
                    && let Some(p) = &self.faults
                {
                    p.wait(HANG_POLL);
                }
                continue;
            }
            if u.broken.is_some() {
                // The ring cannot be waited on. Completions still reach the completion
                // queue (the kernel posts them when this thread returns from a system call,
                // such as this sleep): look there until every read we issued has ended.
                // Entries the failed call left unsubmitted go in if the ring works again.
                let _ = u.ring.submit();
                std::thread::sleep(Duration::from_millis(1));
            } else if !self.wait_ring(&mut u) {
                continue;
            }
            self.reap(&mut u);
        }
    }

    /// Puts `f` in the ring under `slot`. A full submission queue cannot happen (at most
    /// `depth` entries are outstanding and the queue has at least `depth` slots); should
    /// it, the read fails rather than hangs: the slot is freed and false returned.
    fn submit(&self, u: &mut UringLoop, slot: usize, f: InFlight) -> bool {
        let e = self.sqe(&f, slot as u64, u.fixed);
        u.slab[slot] = Some(f);
        // SAFETY: the entry points into live memory (see `register_buffers`) that stays
        // valid until the completion is reaped.
        if unsafe { u.ring.submission().push(&e) }.is_ok() {
            return true;
        }
        let f = u.slab[slot].take().expect("just stored");
        u.free.push(slot);
        self.finish(&f.task, f.submitted, Err("submission queue full".into()));
        false
    }

    /// Issues hung reads whose lane came back (stopping the pool does not end them, as it
    /// would not end a read the kernel holds: see `hold`).
    fn reissue_hung(&mut self, u: &mut UringLoop) {
        let plan = self.faults.clone();
        let hung = std::mem::take(&mut u.hung);
        let mut still = Vec::with_capacity(hung.len());
        for (slot, rule) in hung {
            if plan.as_ref().is_some_and(|p| p.still_active(rule)) {
                still.push((slot, rule));
                continue;
            }
            let Some(f) = u.slab[slot].take() else {
                u.free.push(slot);
                continue;
            };
            if let Some(msg) = &u.broken {
                u.free.push(slot);
                self.finish(&f.task, f.submitted, Err(msg.clone()));
                continue;
            }
            if self.submit(u, slot, f) {
                u.inflight += 1;
            }
        }
        u.hung = still;
    }

    /// Fills the ring with queued reads (blocking for one when nothing is in flight).
    /// Returns false when the pool has stopped and nothing is left to do.
    fn fill_ring(&mut self, u: &mut UringLoop) -> bool {
        while u.broken.is_none()
            && let Some(&slot) = u.free.last()
        {
            let task = if u.inflight == 0 && u.hung.is_empty() {
                match self.pop_blocking() {
                    Some(t) => t,
                    None => return false,
                }
            } else {
                match self.try_pop() {
                    Some(t) => t,
                    None => break,
                }
            };
            if !matches!(task.target, Target::Host { .. }) {
                self.finish(
                    &task,
                    Instant::now(),
                    Err("device read on a host pool".into()),
                );
                continue;
            }
            let mut short = None;
            match self.inject(&task) {
                Injected::Fail(msg) => {
                    self.finish(&task, Instant::now(), Err(msg));
                    continue;
                }
                Injected::Hang(rule) => {
                    u.free.pop();
                    u.slab[slot] = Some(InFlight {
                        task,
                        done: 0,
                        submitted: Instant::now(),
                        short: None,
                    });
                    u.hung.push((slot, rule));
                    continue;
                }
                Injected::Short(n) => short = Some(n),
                Injected::None => {}
            }
            u.free.pop();
            let f = InFlight {
                task,
                done: 0,
                submitted: Instant::now(),
                short,
            };
            if self.submit(u, slot, f) {
                u.inflight += 1;
            }
        }
        true
    }

    /// Submits and waits for at least one completion (or, with hung reads, a short while).
    /// Returns false when the wait was interrupted and the loop should start over.
    fn wait_ring(&mut self, u: &mut UringLoop) -> bool {
        let site = u.slab.iter().flatten().next().map(|f| ReadSite {
            lane: f.task.lane,
            frame: f.task.frame,
            offset: f.task.offset,
            len: f.task.len,
        });
        let waited = if self.enter_fails(site) {
            // The reads go to the kernel, then the wait fails: the case where
            // memory is still being written after the error.
            let _ = u.ring.submit();
            Err(std::io::Error::other(injected("io_uring_enter: I/O error")))
        } else if u.hung.is_empty() {
            u.ring.submit_and_wait(1)
        } else {
            // Come back to look at the hung reads.
            let ts = types::Timespec::new().nsec(HANG_POLL.as_nanos() as u32);
            let args = types::SubmitArgs::new().timespec(&ts);
            match u.ring.submitter().submit_with_args(1, &args) {
                Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                    // Kernels before 5.11 cannot wait with a time limit: submit,
                    // and look again shortly.
                    std::thread::sleep(HANG_POLL);
                    u.ring.submit()
                }
                r => r,
            }
        };
        match waited {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => return false,
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    || e.raw_os_error() == Some(libc::ETIME) => {}
            Err(e) => {
                // The reads already in the kernel may still be writing: they are
                // not reported until their completions arrive (above).
                u.broken = Some(format!("io_uring_enter failed: {e}"));
            }
        }
        true
    }

    /// Reaps completions: finished reads are reported, short reads continued.
    fn reap(&mut self, u: &mut UringLoop) {
        let cqes: Vec<(u64, i32)> = u
            .ring
            .completion()
            .map(|c: io_uring::cqueue::Entry| (c.user_data(), c.result()))
            .collect();
        for (key, res) in cqes {
            let slot = key as usize;
            let Some(mut f) = u.slab.get_mut(slot).and_then(Option::take) else {
                continue;
            };
            let outcome: Option<std::result::Result<(), String>> = if res > 0 {
                f.done += res as usize;
                (f.done >= f.task.len).then_some(Ok(()))
            } else if res == 0 {
                Some(Err(format!(
                    "unexpected end of file after {} of {} bytes",
                    f.done, f.task.len
                )))
            } else if res == -libc::EAGAIN || res == -libc::EINTR {
                None
            } else {
                Some(Err(std::io::Error::from_raw_os_error(-res).to_string()))
            };
            let outcome = match (outcome, &u.broken) {
                // A short read cannot be continued on a ring that no longer works.
                (None, Some(msg)) => Some(Err(format!(
                    "{msg} after {} of {} bytes",
                    f.done, f.task.len
                ))),
                (o, _) => o,
            };
            match outcome {
                Some(r) => {
                    u.inflight -= 1;
                    u.free.push(slot);
                    self.finish(&f.task, f.submitted, r);
                }
                None => {
                    // Continue a short read (or retry) from where it stopped.
                    if !self.submit(u, slot, f) {
                        u.inflight -= 1;
                    }
                }
            }
        }
    }
}

/// The io_uring worker's state between passes of its loop.
struct UringLoop {
    ring: IoUring,
    /// Buffers are registered: reads into them go as `ReadFixed`.
    fixed: bool,
    /// Reads issued or held, by slot (the completion's user data).
    slab: Vec<Option<InFlight>>,
    /// Slots free for a new read.
    free: Vec<usize>,
    /// Reads the kernel holds (their memory is the kernel's until their completion).
    inflight: usize,
    /// Reads held back by a `hang` fault: (slab slot, rule). They keep their slab slot.
    hung: Vec<(usize, usize)>,
    /// Set once `io_uring_enter` failed: the ring takes nothing new; the reads the kernel
    /// holds are waited for (their completions still arrive in the completion queue), then
    /// the worker carries on with blocking reads.
    broken: Option<String>,
}

/// Reads exactly `len` bytes at `offset` into `addr`, continuing short reads; `first`: ask
/// for only this many bytes in the first call (an injected short read).
fn pread_all(
    fd: RawFd,
    addr: usize,
    len: usize,
    offset: u64,
    first: Option<usize>,
) -> std::result::Result<(), String> {
    let mut done = 0usize;
    while done < len {
        let want = match first {
            Some(n) if done == 0 => n.min(len),
            _ => len - done,
        };
        // SAFETY: `addr..addr+len` is live memory reserved for this read by the engine.
        let n = unsafe {
            libc::pread(
                fd,
                (addr + done) as *mut libc::c_void,
                want,
                (offset + done as u64) as libc::off_t,
            )
        };
        if n > 0 {
            done += n as usize;
        } else if n == 0 {
            return Err(format!(
                "unexpected end of file after {done} of {len} bytes"
            ));
        } else {
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(e.to_string());
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_shared_out() {
        assert_eq!(own_lanes(0, 2, 5), vec![0, 2, 4]);
        assert_eq!(own_lanes(1, 2, 5), vec![1, 3]);
        assert_eq!(own_lanes(5, 8, 3), vec![2]);
    }
}
