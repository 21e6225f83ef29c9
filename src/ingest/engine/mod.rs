//! The engines behind one interface, [`IngestEngine`]: "read these extents into this slot,
//! tell me when all of it has arrived, with timings".
//!
//! Every [`Engine`] runs a coordinator thread that splits requests into reads of at most
//! `io_size` bytes (interleaved across lanes so every lane stays busy), hands them to an
//! I/O worker pool, and completes a frame once every byte is where it belongs:
//!
//! - **portable / cpu-only**: reads land straight in the slot's host memory;
//! - **gds**: cuFile reads land straight in the slot's device memory;
//! - **staged**: reads land in pinned staging buffers; each filled buffer is copied to the
//!   slot with `cuMemcpyHtoDAsync` on one of several streams, an event recorded after it,
//!   and the buffer is reused only once its event has completed. Reads and copies overlap.
//!
//! A slot is one or more parts, separate allocations ([`SlotMemory`]): the plan splits every
//! read that would cross a part boundary there, so each read lands in one part.
//!
//! A frame whose read failed is still only completed after all of its other reads have
//! finished, so nothing writes into a slot the ring believes is free.
//!
//! A frame whose reads make no progress for [`EngineConfig::read_timeout`] (a lane that
//! stopped answering) is reported at once as [`IngestError::TimedOut`], so playback can go
//! on; its slot stays reserved ([`Completion::holds_slot`]) because the kernel or cuFile may
//! still write into it, and a second completion, [`IngestError::Released`], frees it when
//! the reads really end. Stopping an engine ([`Engine::stop`], or dropping it) waits for
//! the reads issued up to the read timeout, and abandons those that timed out: a read the
//! kernel holds may never end, so nothing joins the threads it keeps. Faults can be
//! injected for tests and demonstrations ([`super::faults`]).
//!
//! This file is the interface and the engines' construction (each on a [`Backend`]);
//! `piece` splits requests into reads; `plan` is the coordinator thread, which keeps each
//! frame's books and calls the engine's copy stage (`copy_stage`), if it has one:
//! `staged` (pinned buffers, CUDA copies, events) or `bounce` (buffers a caller's copier
//! moves on). The stages know nothing of the coordinator.

mod bounce;
mod copy_stage;
mod piece;
mod plan;
mod staged;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::error::{IngestError, Result};
use super::faults::FaultPlan;
use super::files::{IoMode, OpenFiles};
use super::gds::GdsState;
use super::io::{ActiveBackend, IoBackend, IoCounters, IoDone, IoPool, PoolConfig};
use super::source::{ReadExtent, SourceFile};
use crate::dataset::ALIGN;
use crate::gpu::{Gpu, PartMemory, SlotMemory};
use bounce::Bounce;
pub use bounce::BounceCopier;
use copy_stage::CopyStage;
use plan::{Checks, Coordinator, Msg};
use staged::Staged;

/// How an engine reads: the four kinds of ingest engine ("engine kind"; "path" in the player
/// means its direct or host frame path, and "upload route" how a slot reaches the renderer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EngineKind {
    /// GPUDirect Storage: cuFile reads into device memory.
    Gds,
    /// io_uring O_DIRECT reads into pinned host buffers, then async copies to the GPU.
    Staged,
    /// Reads into host memory for the renderer to upload through wgpu (no CUDA).
    Portable,
    /// Storage into host memory, no GPU at all: the storage ceiling.
    CpuOnly,
}

impl EngineKind {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Gds => "gds",
            EngineKind::Staged => "staged",
            EngineKind::Portable => "portable",
            EngineKind::CpuOnly => "cpu-only",
        }
    }

    /// gdsio's XferType for this engine.
    pub fn xfer_type(self) -> &'static str {
        match self {
            EngineKind::Gds => "GPUD",
            EngineKind::Staged => "CPU_ASYNC_GPU",
            EngineKind::Portable => "CPU_GPU",
            EngineKind::CpuOnly => "CPUONLY",
        }
    }

    /// Whether the engine needs CUDA.
    pub fn needs_cuda(self) -> bool {
        matches!(self, EngineKind::Gds | EngineKind::Staged)
    }
}

impl std::fmt::Display for EngineKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which engine ran and how: reported with every result, so no number is shown without
/// the engine that produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineInfo {
    /// The engine asked for.
    pub requested: EngineKind,
    /// The engine running (differs after a fallback).
    pub active: EngineKind,
    /// How it runs, e.g. "cuFile compatibility mode" or "io_uring, registered buffers,
    /// O_DIRECT, 2 CUDA streams".
    pub mode: String,
    /// Why the requested engine is not the active one.
    pub fallback: Option<String>,
    /// Other things the user should know (buffered files, pread fallback, ...).
    pub notes: Vec<String>,
}

/// Engine settings (gdsio's knobs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EngineConfig {
    /// I/O threads (for gds: cuFile worker threads).
    pub threads: usize,
    /// Reads in flight per io_uring (per thread).
    pub queue_depth: usize,
    /// Largest single read, bytes (multiple of 4 KiB).
    pub io_size: usize,
    /// io_uring or pread.
    pub backend: IoBackend,
    /// O_DIRECT or page cache.
    pub io_mode: IoMode,
    /// CUDA streams for the staged copies (at least 2).
    pub streams: usize,
    /// Pinned staging buffers of `io_size` bytes (staged path); 0 picks
    /// `threads * queue_depth + 2 * streams`.
    pub staging_buffers: usize,
    /// Check every extent that carries a CRC-32 against the bytes that arrived, off the
    /// caller's thread (see `super::verify`); a mismatch completes the frame with
    /// [`IngestError::Checksum`].
    pub verify: bool,
    /// A frame whose reads make no progress for this long fails with
    /// [`IngestError::TimedOut`] (its slot stays reserved until the reads really end);
    /// `None`: wait forever.
    pub read_timeout: Option<Duration>,
    /// Faults to inject ([`FaultPlan`]; the binary passes the plan in `SUPERCELL_FAULTS`);
    /// `None`: none.
    pub faults: Option<Arc<FaultPlan>>,
    /// Which pages back the staged engine's pinned buffers (`SUPERCELL_HOST_HUGEPAGES`, read
    /// by the binary).
    pub host_pages: crate::gpu::HostPages,
}

/// The default [`EngineConfig::read_timeout`]: long enough for any healthy read of a frame,
/// short enough that a lane that stopped answering is noticed while someone watches.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            threads: 8,
            queue_depth: 8,
            io_size: 1 << 20,
            backend: IoBackend::Auto,
            io_mode: IoMode::Direct,
            streams: 4,
            staging_buffers: 0,
            verify: false,
            read_timeout: Some(DEFAULT_READ_TIMEOUT),
            faults: None,
            host_pages: crate::gpu::HostPages::Huge,
        }
    }
}

impl EngineConfig {
    fn validate(&self) -> Result<()> {
        if self.io_size == 0
            || !(self.io_size as u64).is_multiple_of(ALIGN)
            || self.io_size > 1 << 30
        {
            return Err(IngestError::Usage(format!(
                "I/O size {} is not a multiple of 4 KiB between 4 KiB and 1 GiB",
                self.io_size
            )));
        }
        if !(1..=4096).contains(&self.threads) {
            return Err(IngestError::Usage(format!(
                "thread count {} is not in 1..=4096",
                self.threads
            )));
        }
        if !(1..=4096).contains(&self.queue_depth) {
            return Err(IngestError::Usage(format!(
                "queue depth {} is not in 1..=4096",
                self.queue_depth
            )));
        }
        if self.read_timeout.is_some_and(|t| t.is_zero()) {
            return Err(IngestError::Usage(
                "the read timeout must be positive (or none)".into(),
            ));
        }
        Ok(())
    }
}

/// Read `extents` of `frame` into slot `slot`.
#[derive(Clone, Debug)]
pub struct ReadRequest {
    /// Frame number (reported back).
    pub frame: u32,
    /// Destination slot of the engine's frame ring.
    pub slot: usize,
    /// The extents; `dst + len` must lie inside the slot.
    pub extents: Vec<ReadExtent>,
    /// When the frame was requested (by the scheduler), for latency figures.
    pub requested: Instant,
    /// Where to report the slot's byte ranges as their reads land (host-memory and gds
    /// engines; the staged engine reports nothing before the frame completes).
    pub progress: Option<Arc<ReadProgress>>,
}

/// The byte ranges of a slot whose reads have landed, while its frame is still being read:
/// a consumer can start moving those bytes on (the player copies them to the GPU) before
/// the whole frame is in.
#[derive(Debug, Default)]
pub struct ReadProgress {
    landed: std::sync::Mutex<Vec<(u64, u64)>>,
}

impl ReadProgress {
    /// An empty report.
    pub fn new() -> Arc<ReadProgress> {
        Arc::new(ReadProgress::default())
    }

    fn push(&self, dst: u64, len: u64) {
        self.landed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((dst, len));
    }

    /// The ranges (slot offset, length) that landed since the last call, sorted, with
    /// touching ranges merged. Every byte is reported once, after its read completed.
    pub fn take(&self) -> Vec<(u64, u64)> {
        let mut v = std::mem::take(&mut *self.landed.lock().unwrap_or_else(|p| p.into_inner()));
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (start, len) in v {
            match out.last_mut() {
                Some((s, l)) if *s + *l == start => *l += len,
                _ => out.push((start, len)),
            }
        }
        out
    }
}

/// A frame that has arrived (or failed), with its timings.
#[derive(Debug)]
pub struct Completion {
    /// Frame number.
    pub frame: u32,
    /// Slot written.
    pub slot: usize,
    /// Bytes of the frame.
    pub bytes: u64,
    /// When the frame was requested.
    pub requested: Instant,
    /// When the engine issued its first read.
    pub submitted: Instant,
    /// When the first read completed.
    pub first_byte: Option<Instant>,
    /// When the last read completed.
    pub last_byte: Option<Instant>,
    /// When every byte was in device memory (gds and staged paths).
    pub on_gpu: Option<Instant>,
    /// `Ok` when every byte arrived.
    pub result: Result<()>,
}

impl Completion {
    /// Whether the slot is still being written: the frame timed out
    /// ([`IngestError::TimedOut`]) with reads outstanding. A second completion for the same
    /// slot ([`IngestError::Released`]) follows once they end; only then may the slot be
    /// written again.
    pub fn holds_slot(&self) -> bool {
        matches!(self.result, Err(IngestError::TimedOut { .. }))
    }
}

/// The interface every engine offers. Engines know nothing of the renderer: they fill
/// slots and say when.
pub trait IngestEngine: Send {
    /// Which path runs, and how.
    fn info(&self) -> &EngineInfo;
    /// Starts reading a frame; returns at once.
    fn submit(&mut self, req: ReadRequest) -> Result<()>;
    /// The next finished frame, waiting up to `timeout`; `None` on timeout.
    fn next_completion(&mut self, timeout: Duration) -> Result<Option<Completion>>;
    /// Abandons the read into `slot` (a scrub moved away from its frame): reads not yet
    /// issued are dropped, reads in flight finish, and the frame then completes with
    /// [`IngestError::Cancelled`] (or `Ok` where every read had already been issued). Returns
    /// at once; a slot with no read in flight is left alone. The slot must not be reused
    /// before the completion arrives.
    fn cancel(&mut self, slot: usize) -> Result<()>;
    /// Frames submitted and not yet completed.
    fn in_flight(&self) -> usize;
    /// I/O counters (reads, bytes, latency) for gdsio-style reports.
    fn counters(&self) -> &IoCounters;
}

/// An engine: a coordinator thread and its I/O pool. See the module documentation.
pub struct Engine {
    info: EngineInfo,
    tx: Sender<Msg>,
    done: Receiver<Completion>,
    thread: Option<JoinHandle<()>>,
    /// Where the coordinator, once stopped, says whether it abandons reads still out.
    exit: Receiver<Option<String>>,
    in_flight: usize,
    counters: Arc<IoCounters>,
    slot_lens: Vec<usize>,
    file_count: usize,
    gds_stats: Option<Arc<dyn Fn() -> Option<super::gds::CuFileStats> + Send + Sync>>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine").field("info", &self.info).finish()
    }
}

/// Where an engine's reads land, and what moves the bytes on from there.
enum Backend {
    /// Reads straight into host slots ([`EngineKind::Portable`] or [`EngineKind::CpuOnly`]).
    Host(EngineKind),
    /// Reads into pinned staging buffers, copied to device slots on CUDA streams.
    Staged(Staged),
    /// cuFile reads straight into device slots.
    Gds(Arc<GdsState>),
    /// Reads into a copier's host buffers, moved on to the slots by the copier
    /// ([`EngineKind::CpuOnly`]: no CUDA).
    Bounce(Bounce),
}

impl Backend {
    /// The path that runs.
    fn kind(&self) -> EngineKind {
        match self {
            Backend::Host(kind) => *kind,
            Backend::Staged(_) => EngineKind::Staged,
            Backend::Gds(_) => EngineKind::Gds,
            Backend::Bounce(_) => EngineKind::CpuOnly,
        }
    }
}

/// What every engine is started with, besides its backend and configuration.
struct Launch<'a> {
    /// The path asked for (differs from the backend's after a fallback).
    requested: EngineKind,
    /// Why the requested path is not the one running.
    fallback: Option<String>,
    /// The dataset's files, as the requests name them.
    files: &'a [SourceFile],
    /// Those files, open.
    opened: OpenFiles,
    /// The ring's slot memories.
    slots: Vec<Arc<SlotMemory>>,
    /// Host memory the reads land in (slots or staging buffers), for io_uring to register.
    regions: Vec<(usize, usize)>,
    /// How arriving bytes are checked.
    checks: Checks,
}

impl Engine {
    /// A host-memory engine: [`EngineKind::Portable`] or [`EngineKind::CpuOnly`]. The ring's
    /// slots must be host memory.
    pub fn host(
        kind: EngineKind,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
    ) -> Result<Engine> {
        if kind.needs_cuda() {
            return Err(IngestError::Usage(format!("{kind} is not a host path")));
        }
        let mut regions = Vec::new();
        for (i, s) in slots.iter().enumerate() {
            for part in s.parts() {
                match part {
                    PartMemory::Host(b) => regions.push((b.as_mut_ptr() as usize, b.len())),
                    PartMemory::Device(_) => {
                        return Err(IngestError::Usage(format!(
                            "the {kind} path reads into host memory, but slot {i} is device memory"
                        )));
                    }
                }
            }
        }
        let checks = Checks::host(cfg)?;
        cfg.validate()?;
        let opened = OpenFiles::open(files, cfg.io_mode)?;
        Engine::start(
            Backend::Host(kind),
            Launch {
                requested: kind,
                fallback: None,
                files,
                opened,
                slots,
                regions,
                checks,
            },
            cfg,
        )
    }

    /// The bounce engine (reported as [`EngineKind::CpuOnly`]): reads land in `copier`'s
    /// host buffers and the copier moves them on to the slots, whose memory the engine
    /// never touches (`slots` give the ring's layout only). The copier does any checking:
    /// `cfg.verify` is refused.
    pub fn bounce(
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        copier: Box<dyn BounceCopier>,
        cfg: &EngineConfig,
    ) -> Result<Engine> {
        cfg.validate()?;
        if cfg.verify {
            return Err(IngestError::Usage(
                "the bounce engine does not check CRCs itself (its copier does)".into(),
            ));
        }
        if slots.is_empty() {
            return Err(IngestError::Usage("no slots".into()));
        }
        let regions = copier.buffers();
        if regions.is_empty() {
            return Err(IngestError::Usage("the copier has no buffers".into()));
        }
        let page = crate::gpu::page_size();
        if let Some((addr, len)) = regions
            .iter()
            .find(|(a, l)| *l < cfg.io_size || !a.is_multiple_of(page))
        {
            return Err(IngestError::Usage(format!(
                "a bounce buffer of {len} bytes at {addr:#x} is not page aligned or is smaller \
                 than the {}-byte I/O size",
                cfg.io_size
            )));
        }
        let opened = OpenFiles::open(files, cfg.io_mode)?;
        Engine::start(
            Backend::Bounce(Bounce::new(copier)),
            Launch {
                requested: EngineKind::CpuOnly,
                fallback: None,
                files,
                opened,
                slots,
                regions,
                checks: Checks::Off,
            },
            cfg,
        )
    }

    /// The staged engine: O_DIRECT reads into pinned buffers, async copies to the slots'
    /// device memory.
    pub fn staged(
        gpu: &Gpu,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
    ) -> Result<Engine> {
        Engine::staged_with_fallback(gpu, files, slots, cfg, EngineKind::Staged, None)
    }

    fn staged_with_fallback(
        gpu: &Gpu,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
        requested: EngineKind,
        fallback: Option<String>,
    ) -> Result<Engine> {
        cfg.validate()?;
        check_device_slots(&slots, gpu)?;
        let staged = Staged::new(gpu, cfg)?;
        let regions = staged.regions();
        let checks = Checks::device(cfg, gpu)?;
        let opened = OpenFiles::open(files, cfg.io_mode)?;
        Engine::start(
            Backend::Staged(staged),
            Launch {
                requested,
                fallback,
                files,
                opened,
                slots,
                regions,
                checks,
            },
            cfg,
        )
    }

    /// The GPUDirect Storage engine. Fails with [`IngestError::Unavailable`] (saying why)
    /// when cuFile cannot be used for these files; [`open_engine`] then falls back to the
    /// staged path.
    pub fn gds(
        gpu: &Gpu,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
    ) -> Result<Engine> {
        cfg.validate()?;
        check_device_slots(&slots, gpu)?;
        let opened = OpenFiles::open(files, IoMode::Direct)?;
        let state = GdsState::new(gpu, &opened, &slots)?;
        let checks = Checks::device(cfg, gpu)?;
        Engine::start(
            Backend::Gds(Arc::new(state)),
            Launch {
                requested: EngineKind::Gds,
                fallback: None,
                files,
                opened,
                slots,
                regions: Vec::new(),
                checks,
            },
            cfg,
        )
    }

    /// Starts the I/O pool and the coordinator thread of an engine on `backend`.
    fn start(backend: Backend, launch: Launch<'_>, cfg: &EngineConfig) -> Result<Engine> {
        let Launch {
            requested,
            fallback,
            files,
            opened,
            slots,
            regions,
            checks,
        } = launch;
        let kind = backend.kind();
        let (copy, gds): (Option<Box<dyn CopyStage>>, _) = match backend {
            Backend::Host(_) => (None, None),
            Backend::Staged(s) => (Some(Box::new(s)), None),
            Backend::Gds(g) => (None, Some(g)),
            Backend::Bounce(b) => (Some(Box::new(b)), None),
        };
        let (tx, rx) = mpsc::channel::<Msg>();
        let (done_tx, done_rx) = mpsc::channel::<Completion>();
        let (exit_tx, exit_rx) = mpsc::channel::<Option<String>>();
        let sink_tx = std::sync::Mutex::new(tx.clone());
        let sink: super::io::Sink = Arc::new(move |d: IoDone| {
            // Sender is Sync; the mutex only keeps older toolchains' bounds happy.
            let _ = sink_tx
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(Msg::Io(d));
        });
        let lanes = files.iter().map(|f| f.lane + 1).max().unwrap_or(1);
        let faults = cfg.faults.clone();
        let (device_read, on_start) = match &gds {
            Some(g) => (Some(g.device_read()), Some(g.on_start())),
            None => (None, None),
        };
        let pool = IoPool::new(
            PoolConfig {
                threads: cfg.threads,
                queue_depth: cfg.queue_depth,
                lanes,
                backend: cfg.backend,
                regions,
                device_read,
                on_start,
                faults: faults.clone(),
            },
            sink,
        )?;
        let mut notes = opened.notes.clone();
        if faults.is_some() {
            notes.push("fault injection is on: some reads fail on purpose".into());
        }
        notes.extend(pool.notes.iter().cloned());
        if let Some(g) = &gds {
            notes.extend(g.notes.iter().cloned());
        }
        notes.extend(checks.note());
        let direct = if opened.all_direct() {
            "O_DIRECT"
        } else if opened.files.iter().any(|f| f.direct) {
            "partly O_DIRECT"
        } else {
            "page cache"
        };
        let mode = match (&gds, &copy) {
            (Some(g), _) => format!("{}, {} cuFile threads", g.mode_text(), cfg.threads),
            (None, Some(c)) => format!(
                "{}, {direct}, queue depth {}, {}",
                pool.backend,
                cfg.queue_depth,
                c.describe(cfg.io_size)
            ),
            (None, None) => {
                let qd = if matches!(pool.backend, ActiveBackend::IoUring { .. }) {
                    format!(", queue depth {}", cfg.queue_depth)
                } else {
                    String::new()
                };
                format!("{}, {direct}{qd}, into host memory", pool.backend)
            }
        };
        let info = EngineInfo {
            requested,
            active: kind,
            mode,
            fallback,
            notes,
        };
        let counters = pool.counters.clone();
        let slot_lens = slots.iter().map(|s| s.len()).collect();
        let file_count = files.len();
        let gds_stats: Option<Arc<dyn Fn() -> Option<super::gds::CuFileStats> + Send + Sync>> =
            gds.as_ref().map(|_| {
                Arc::new(super::gds::read_stats)
                    as Arc<dyn Fn() -> Option<super::gds::CuFileStats> + Send + Sync>
            });
        let mut coord = Coordinator {
            kind,
            pool: Some(pool),
            copy,
            gds,
            files: opened,
            slots,
            io_size: cfg.io_size,
            jobs: HashMap::new(),
            next_seq: 1,
            done: done_tx,
            checks,
            inbox: tx.clone(),
            read_timeout: cfg.read_timeout,
        };
        let source_files: Vec<SourceFile> = files.to_vec();
        let thread = std::thread::Builder::new()
            .name(format!("sc-{}", kind.name()))
            .spawn(move || coord.run(rx, &source_files, exit_tx))
            .map_err(|e| IngestError::thread("the engine thread", e))?;
        Ok(Engine {
            info,
            tx,
            done: done_rx,
            thread: Some(thread),
            exit: exit_rx,
            in_flight: 0,
            counters,
            slot_lens,
            file_count,
            gds_stats,
        })
    }

    /// cuFile's own statistics (GDS path only): what cuFile says it did, P2P or POSIX.
    pub fn cufile_stats(&self) -> Option<super::gds::CuFileStats> {
        self.gds_stats.as_ref().and_then(|f| f())
    }
}

fn check_device_slots(slots: &[Arc<SlotMemory>], gpu: &Gpu) -> Result<()> {
    for (i, s) in slots.iter().enumerate() {
        for part in s.parts() {
            match part {
                PartMemory::Device(d) if Arc::ptr_eq(d.context(), gpu.context()) => {}
                PartMemory::Device(_) => {
                    return Err(IngestError::Usage(format!(
                        "slot {i} belongs to another GPU context"
                    )));
                }
                PartMemory::Host(_) => {
                    return Err(IngestError::Usage(format!(
                        "the GPU paths read into device memory, but slot {i} is host memory"
                    )));
                }
            }
        }
    }
    if slots.is_empty() {
        return Err(IngestError::Usage("no slots".into()));
    }
    Ok(())
}

impl IngestEngine for Engine {
    fn info(&self) -> &EngineInfo {
        &self.info
    }

    fn submit(&mut self, req: ReadRequest) -> Result<()> {
        plan::check_request(&req, &self.slot_lens, self.file_count)?;
        self.tx
            .send(Msg::Request(req, Instant::now()))
            .map_err(|_| IngestError::Stopped("the coordinator thread has exited".into()))?;
        self.in_flight += 1;
        Ok(())
    }

    fn next_completion(&mut self, timeout: Duration) -> Result<Option<Completion>> {
        match self.done.recv_timeout(timeout) {
            Ok(c) => {
                // A timed-out frame's reads are still out: it counts until it is released.
                if !c.holds_slot() {
                    self.in_flight = self.in_flight.saturating_sub(1);
                }
                Ok(Some(c))
            }
            Err(RecvTimeoutError::Timeout) => Ok(None),
            Err(RecvTimeoutError::Disconnected) => Err(IngestError::Stopped(
                "the coordinator thread has exited (see the log above)".into(),
            )),
        }
    }

    fn cancel(&mut self, slot: usize) -> Result<()> {
        self.tx
            .send(Msg::Cancel(slot))
            .map_err(|_| IngestError::Stopped("the coordinator thread has exited".into()))
    }

    fn in_flight(&self) -> usize {
        self.in_flight
    }

    fn counters(&self) -> &IoCounters {
        &self.counters
    }
}

impl Engine {
    /// Stops the engine: reads not yet issued are dropped, reads issued are waited for up
    /// to the read timeout (without one, for as long as they take). Returns `None` when
    /// every read ended, else what is abandoned: reads that timed out and are still out,
    /// which no one can cancel (the kernel holds them). Their coordinator and I/O threads
    /// are left running, detached, with the slot memory, files and buffers those reads
    /// write into, until the reads end or the process exits; nothing here waits for them.
    pub fn stop(mut self) -> Option<String> {
        self.stop_inner()
    }

    fn stop_inner(&mut self) -> Option<String> {
        let thread = self.thread.take()?;
        let _ = self.tx.send(Msg::Stop);
        match self.exit.recv() {
            Ok(Some(abandoned)) => {
                drop(thread);
                Some(abandoned)
            }
            // Nothing left out (or the thread is gone): it shuts down at once.
            _ => {
                let _ = thread.join();
                None
            }
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop_inner();
    }
}

/// Opens the engine for `requested`, falling back from gds to staged when cuFile cannot be
/// used (the reason is in [`EngineInfo::fallback`]; nothing pretends to be GDS).
pub fn open_engine(
    requested: EngineKind,
    gpu: Option<&Gpu>,
    files: &[SourceFile],
    slots: Vec<Arc<SlotMemory>>,
    cfg: &EngineConfig,
) -> Result<Engine> {
    match requested {
        EngineKind::Portable | EngineKind::CpuOnly => Engine::host(requested, files, slots, cfg),
        EngineKind::Staged => {
            let gpu =
                gpu.ok_or_else(|| IngestError::Unavailable("the staged path needs a GPU".into()))?;
            Engine::staged(gpu, files, slots, cfg)
        }
        EngineKind::Gds => {
            let gpu =
                gpu.ok_or_else(|| IngestError::Unavailable("the gds path needs a GPU".into()))?;
            match Engine::gds(gpu, files, slots.clone(), cfg) {
                Ok(e) => Ok(e),
                Err(IngestError::Unavailable(why)) => {
                    Engine::staged_with_fallback(gpu, files, slots, cfg, EngineKind::Gds, Some(why))
                }
                Err(e) => Err(e),
            }
        }
    }
}
