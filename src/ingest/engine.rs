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
//! A frame whose read failed is still only completed after all of its other reads have
//! finished, so nothing writes into a slot the ring believes is free.
//!
//! A frame whose reads make no progress for [`EngineConfig::read_timeout`] (a lane that
//! stopped answering) is reported at once as [`IngestError::TimedOut`], so playback can go
//! on; its slot stays reserved ([`Completion::holds_slot`]) because the kernel or cuFile may
//! still write into it, and a second completion, [`IngestError::Released`], frees it when
//! the reads really end. Faults can be injected for tests and demonstrations
//! ([`super::faults`]).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::error::{IngestError, Result};
use super::faults::FaultPlan;
use super::files::{IoMode, OpenFiles};
use super::gds::GdsState;
use super::io::{ActiveBackend, IoBackend, IoCounters, IoDone, IoPool, IoTask, PoolConfig, Target};
use super::source::{ReadExtent, SourceFile};
use super::verify::{DeviceChecker, HostChecker};
use crate::dataset::ALIGN;
use crate::gpu::{Gpu, PinnedBuffer, SlotMemory};

/// The data paths of the issue: which one to use, and which one ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathKind {
    /// GPUDirect Storage: cuFile reads into device memory.
    Gds,
    /// io_uring O_DIRECT reads into pinned host buffers, then async copies to the GPU.
    Staged,
    /// Reads into host memory for the renderer to upload through wgpu (no CUDA).
    Portable,
    /// Storage into host memory, no GPU at all: the storage ceiling.
    CpuOnly,
}

impl PathKind {
    /// The name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            PathKind::Gds => "gds",
            PathKind::Staged => "staged",
            PathKind::Portable => "portable",
            PathKind::CpuOnly => "cpu-only",
        }
    }

    /// gdsio's XferType for this path.
    pub fn xfer_type(self) -> &'static str {
        match self {
            PathKind::Gds => "GPUD",
            PathKind::Staged => "CPU_ASYNC_GPU",
            PathKind::Portable => "CPU_GPU",
            PathKind::CpuOnly => "CPUONLY",
        }
    }

    /// Whether the path needs CUDA.
    pub fn needs_cuda(self) -> bool {
        matches!(self, PathKind::Gds | PathKind::Staged)
    }
}

impl std::fmt::Display for PathKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Which path ran and how: reported with every result, so no number is shown without
/// the path that produced it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PathInfo {
    /// The path asked for.
    pub requested: PathKind,
    /// The path running (differs after a fallback).
    pub active: PathKind,
    /// How it runs, e.g. "cuFile compatibility mode" or "io_uring, registered buffers,
    /// O_DIRECT, 2 CUDA streams".
    pub mode: String,
    /// Why the requested path is not the active one.
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
    /// Faults to inject ([`FaultPlan`]); `None`: the plan in `SUPERCELL_FAULTS`, if any.
    pub faults: Option<Arc<FaultPlan>>,
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
    fn info(&self) -> &PathInfo;
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

enum Msg {
    Request(ReadRequest, Instant),
    Cancel(usize),
    Io(IoDone),
    /// A host piece's CRC (`--verify`): job, piece index, CRC, when its read landed.
    PieceChecked(u64, usize, u32, Instant),
    /// A device frame's extent CRCs (`--verify`).
    FrameChecked(u64, Result<Vec<u32>>),
    Stop,
}

/// How an engine checks arriving bytes (`EngineConfig::verify`).
enum Checks {
    Off,
    /// Host slots: each piece hashed on CPU threads as it lands.
    Host(HostChecker),
    /// Device slots: each complete frame's extents hashed where they are.
    Device(DeviceChecker),
}

impl Checks {
    fn host(cfg: &EngineConfig) -> Result<Checks> {
        if !cfg.verify {
            return Ok(Checks::Off);
        }
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        Ok(Checks::Host(HostChecker::new(threads)?))
    }

    fn device(cfg: &EngineConfig, gpu: &Gpu) -> Result<Checks> {
        if !cfg.verify {
            return Ok(Checks::Off);
        }
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        Ok(Checks::Device(DeviceChecker::new(gpu, threads)?))
    }

    fn note(&self) -> Option<String> {
        match self {
            Checks::Off => None,
            Checks::Host(h) => Some(format!(
                "--verify: every read's CRC-32 is computed on {} CPU threads as it lands",
                h.threads()
            )),
            Checks::Device(d) => Some(d.how.clone()),
        }
    }
}

/// An engine: a coordinator thread and its I/O pool. See the module documentation.
pub struct Engine {
    info: PathInfo,
    tx: Sender<Msg>,
    done: Receiver<Completion>,
    thread: Option<JoinHandle<()>>,
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

/// Staged-path state: pinned buffers, streams and their events.
struct Staged {
    gpu: Gpu,
    streams: Vec<Arc<cudarc::driver::CudaStream>>,
    bufs: Vec<StagingBuf>,
    free: Vec<usize>,
    pending: VecDeque<Piece>,
    /// Buffers whose copy is queued, per stream, in issue order (events complete in order).
    copying: Vec<VecDeque<usize>>,
    next_stream: usize,
}

struct StagingBuf {
    // Drop order: the event, then the pinned memory (unregistered, then unmapped).
    event: cudarc::driver::CudaEvent,
    mem: PinnedBuffer,
    piece: Option<Piece>,
}

#[derive(Clone, Copy, Debug)]
struct Piece {
    seq: u64,
    /// Index of the extent in the request.
    extent: u32,
    file: u32,
    offset: u64,
    len: usize,
    dst: u64,
}

struct Job {
    req: ReadRequest,
    /// The reads of a direct (non-staged) frame, indexed by the token's low 32 bits.
    pieces: Vec<Piece>,
    /// The CRC of each piece (host `--verify`), indexed like `pieces`.
    piece_crcs: Vec<u32>,
    /// Device `--verify`: the frame is complete and its check is running; the completion
    /// times wait here.
    checking: Option<(Option<Instant>, Option<Instant>)>,
    bytes: u64,
    submitted: Instant,
    left: usize,
    first: Option<Instant>,
    last: Option<Instant>,
    error: Option<IngestError>,
    /// The last time a read of this frame ended (or the frame was submitted).
    progress: Instant,
    /// Direct frames: which pieces have ended (to say which read timed out).
    ended: Vec<bool>,
    /// The frame was reported [`IngestError::TimedOut`]; its final completion is
    /// [`IngestError::Released`].
    timed_out: bool,
}

impl Job {
    /// Records a read's arrival. Workers report arrivals out of time order (the coordinator
    /// sees them in channel order), so first and last byte are the earliest and latest
    /// arrival, not the first and last reported.
    fn note_arrival(&mut self, at: Instant) {
        self.first = Some(self.first.map_or(at, |f| f.min(at)));
        self.last = Some(self.last.map_or(at, |l| l.max(at)));
        self.progress = self.progress.max(at);
    }
}

struct Coordinator {
    kind: PathKind,
    // Drop order matters: the pool (joins its workers, so no read is in flight) goes first,
    // then the staged buffers and cuFile registrations, then the files and the slots.
    pool: Option<IoPool>,
    staged: Option<Staged>,
    gds: Option<Arc<GdsState>>,
    files: OpenFiles,
    slots: Vec<Arc<SlotMemory>>,
    io_size: usize,
    jobs: HashMap<u64, Job>,
    next_seq: u64,
    done: Sender<Completion>,
    checks: Checks,
    /// The coordinator's own inbox, for check results.
    inbox: Sender<Msg>,
    read_timeout: Option<Duration>,
}

/// Splits a frame into reads of at most `io_size`, interleaved across lanes (round robin
/// over lanes, in slot order within a lane).
fn split(seq: u64, extents: &[ReadExtent], files: &[SourceFile], io_size: usize) -> Vec<Piece> {
    let mut per_lane: Vec<VecDeque<Piece>> = Vec::new();
    for (i, e) in extents.iter().enumerate() {
        let lane = files[e.file as usize].lane as usize;
        if per_lane.len() <= lane {
            per_lane.resize_with(lane + 1, VecDeque::new);
        }
        let mut off = 0u64;
        while off < e.len {
            let n = (io_size as u64).min(e.len - off);
            per_lane[lane].push_back(Piece {
                seq,
                extent: i as u32,
                file: e.file,
                offset: e.offset + off,
                len: n as usize,
                dst: e.dst + off,
            });
            off += n;
        }
    }
    let total = per_lane.iter().map(VecDeque::len).sum();
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        for l in per_lane.iter_mut() {
            if let Some(p) = l.pop_front() {
                out.push(p);
            }
        }
    }
    out
}

impl Engine {
    /// A host-memory engine: [`PathKind::Portable`] or [`PathKind::CpuOnly`]. The ring's
    /// slots must be host memory.
    pub fn host(
        kind: PathKind,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
    ) -> Result<Engine> {
        if kind.needs_cuda() {
            return Err(IngestError::Usage(format!("{kind} is not a host path")));
        }
        let mut regions = Vec::new();
        for (i, s) in slots.iter().enumerate() {
            match &**s {
                SlotMemory::Host(b) => regions.push((b.as_mut_ptr() as usize, b.len())),
                SlotMemory::Device(_) => {
                    return Err(IngestError::Usage(format!(
                        "the {kind} path reads into host memory, but slot {i} is device memory"
                    )));
                }
            }
        }
        let checks = Checks::host(cfg)?;
        Engine::start(
            kind, kind, None, files, slots, cfg, regions, None, None, checks,
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
        Engine::staged_with_fallback(gpu, files, slots, cfg, PathKind::Staged, None)
    }

    fn staged_with_fallback(
        gpu: &Gpu,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
        requested: PathKind,
        fallback: Option<String>,
    ) -> Result<Engine> {
        cfg.validate()?;
        check_device_slots(&slots, gpu)?;
        let streams_n = cfg.streams.max(2);
        let nbufs = if cfg.staging_buffers > 0 {
            cfg.staging_buffers
        } else {
            cfg.threads * cfg.queue_depth + 2 * streams_n
        };
        // Keep pinned memory bounded: at most 4 GiB of staging, at least 2 buffers per stream.
        let nbufs = nbufs.min((4usize << 30) / cfg.io_size).max(2 * streams_n);
        gpu.bind()?;
        let mut streams = Vec::with_capacity(streams_n);
        for _ in 0..streams_n {
            streams.push(
                gpu.context()
                    .new_stream()
                    .map_err(crate::gpu::cuda_err_pub("cuStreamCreate"))?,
            );
        }
        let mut bufs = Vec::with_capacity(nbufs);
        for _ in 0..nbufs {
            let mem = PinnedBuffer::new(gpu, cfg.io_size)?;
            let event = gpu
                .context()
                .new_event(None)
                .map_err(crate::gpu::cuda_err_pub("cuEventCreate"))?;
            bufs.push(StagingBuf {
                event,
                mem,
                piece: None,
            });
        }
        let regions = bufs
            .iter()
            .map(|b| (b.mem.host().as_mut_ptr() as usize, b.mem.host().len()))
            .collect();
        let checks = Checks::device(cfg, gpu)?;
        let staged = Staged {
            gpu: gpu.clone(),
            copying: (0..streams_n).map(|_| VecDeque::new()).collect(),
            streams,
            free: (0..nbufs).rev().collect(),
            bufs,
            pending: VecDeque::new(),
            next_stream: 0,
        };
        Engine::start(
            requested,
            PathKind::Staged,
            fallback,
            files,
            slots,
            cfg,
            regions,
            Some(staged),
            None,
            checks,
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
        Engine::start_with_files(
            PathKind::Gds,
            PathKind::Gds,
            None,
            files,
            opened,
            slots,
            cfg,
            Vec::new(),
            None,
            Some(Arc::new(state)),
            checks,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn start(
        requested: PathKind,
        kind: PathKind,
        fallback: Option<String>,
        files: &[SourceFile],
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
        regions: Vec<(usize, usize)>,
        staged: Option<Staged>,
        gds: Option<Arc<GdsState>>,
        checks: Checks,
    ) -> Result<Engine> {
        cfg.validate()?;
        let opened = OpenFiles::open(files, cfg.io_mode)?;
        Engine::start_with_files(
            requested, kind, fallback, files, opened, slots, cfg, regions, staged, gds, checks,
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn start_with_files(
        requested: PathKind,
        kind: PathKind,
        fallback: Option<String>,
        files: &[SourceFile],
        opened: OpenFiles,
        slots: Vec<Arc<SlotMemory>>,
        cfg: &EngineConfig,
        regions: Vec<(usize, usize)>,
        staged: Option<Staged>,
        gds: Option<Arc<GdsState>>,
        checks: Checks,
    ) -> Result<Engine> {
        let (tx, rx) = mpsc::channel::<Msg>();
        let (done_tx, done_rx) = mpsc::channel::<Completion>();
        let sink_tx = std::sync::Mutex::new(tx.clone());
        let sink: super::io::Sink = Arc::new(move |d: IoDone| {
            // Sender is Sync; the mutex only keeps older toolchains' bounds happy.
            let _ = sink_tx
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .send(Msg::Io(d));
        });
        let lanes = files.iter().map(|f| f.lane + 1).max().unwrap_or(1);
        let faults = match &cfg.faults {
            Some(p) => Some(p.clone()),
            None => FaultPlan::from_env()?,
        };
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
        let mode = match (&gds, &staged) {
            (Some(g), _) => format!("{}, {} cuFile threads", g.mode_text(), cfg.threads),
            (None, Some(s)) => format!(
                "{}, {direct}, queue depth {}, {} pinned {} KiB buffers, {} CUDA streams",
                pool.backend,
                cfg.queue_depth,
                s.bufs.len(),
                cfg.io_size >> 10,
                s.streams.len()
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
        let info = PathInfo {
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
            staged,
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
            .spawn(move || coord.run(rx, &source_files))
            .map_err(|e| IngestError::Usage(format!("cannot start the engine thread: {e}")))?;
        Ok(Engine {
            info,
            tx,
            done: done_rx,
            thread: Some(thread),
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
        match &**s {
            SlotMemory::Device(d) if Arc::ptr_eq(d.context(), gpu.context()) => {}
            SlotMemory::Device(_) => {
                return Err(IngestError::Usage(format!(
                    "slot {i} belongs to another GPU context"
                )));
            }
            SlotMemory::Host(_) => {
                return Err(IngestError::Usage(format!(
                    "the GPU paths read into device memory, but slot {i} is host memory"
                )));
            }
        }
    }
    if slots.is_empty() {
        return Err(IngestError::Usage("no slots".into()));
    }
    Ok(())
}

impl IngestEngine for Engine {
    fn info(&self) -> &PathInfo {
        &self.info
    }

    fn submit(&mut self, req: ReadRequest) -> Result<()> {
        let slot_len = *self.slot_lens.get(req.slot).ok_or_else(|| {
            IngestError::Usage(format!(
                "slot {} does not exist (the ring has {})",
                req.slot,
                self.slot_lens.len()
            ))
        })?;
        for e in &req.extents {
            if e.file as usize >= self.file_count {
                return Err(IngestError::Usage(format!(
                    "frame {}: extent names file {} of {}",
                    req.frame, e.file, self.file_count
                )));
            }
            let fits = e
                .dst
                .checked_add(e.len)
                .is_some_and(|end| end <= slot_len as u64);
            if !fits || e.len == 0 {
                return Err(IngestError::Usage(format!(
                    "frame {}: extent of {} bytes at slot offset {} does not fit a {slot_len}-byte slot",
                    req.frame, e.len, e.dst
                )));
            }
            if !(e.offset.is_multiple_of(ALIGN)
                && e.len.is_multiple_of(ALIGN)
                && e.dst.is_multiple_of(ALIGN))
            {
                return Err(IngestError::Usage(format!(
                    "frame {}: extent (offset {}, len {}, dst {}) is not 4 KiB aligned",
                    req.frame, e.offset, e.len, e.dst
                )));
            }
        }
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

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.tx.send(Msg::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Coordinator {
    fn run(&mut self, rx: Receiver<Msg>, files: &[SourceFile]) {
        if let Some(s) = &self.staged
            && let Err(e) = s.gpu.bind()
        {
            eprintln!("supercell: staged engine cannot bind its CUDA context: {e}");
        }
        loop {
            let busy = self
                .staged
                .as_ref()
                .is_some_and(|s| s.copying.iter().any(|c| !c.is_empty()));
            let first = if busy {
                // Copies in flight: come back soon to see their events.
                match rx.recv_timeout(Duration::from_micros(50)) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else if let (Some(t), false) = (self.read_timeout, self.jobs.is_empty()) {
                // Frames in flight: come back in time to see one time out.
                let look = (t / 4).clamp(Duration::from_millis(1), Duration::from_millis(250));
                match rx.recv_timeout(look) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => break,
                }
            };
            let mut stop = false;
            let mut msgs: Vec<Msg> = first.into_iter().collect();
            msgs.extend(rx.try_iter());
            for m in msgs {
                match m {
                    Msg::Request(req, t) => self.on_request(req, t, files),
                    Msg::Cancel(slot) => self.on_cancel(slot),
                    Msg::Io(d) => self.on_io(d),
                    Msg::PieceChecked(seq, idx, crc, at) => {
                        self.on_piece_checked(seq, idx, crc, at)
                    }
                    Msg::FrameChecked(seq, r) => self.on_frame_checked(seq, r),
                    Msg::Stop => stop = true,
                }
            }
            self.poll_copies();
            self.check_timeouts();
            self.dispatch_staged();
            if stop {
                break;
            }
        }
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // Joining the pool waits for every read in flight; then wait for every copy.
        self.pool.take();
        if let Some(s) = &self.staged {
            for st in &s.streams {
                let _ = st.synchronize();
            }
        }
        // The device checker's thread finishes the frame it is checking before the GPU
        // state goes.
        self.checks = Checks::Off;
        self.staged.take();
        self.gds.take();
    }

    fn on_request(&mut self, req: ReadRequest, at: Instant, files: &[SourceFile]) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut pieces = split(seq, &req.extents, files, self.io_size);
        let too_many = pieces.len() > u32::MAX as usize;
        if too_many {
            // Tokens carry the piece index in 32 bits; such a frame cannot be read.
            pieces.clear();
        }
        let bytes = req.extents.iter().map(|e| e.len).sum();
        let job = Job {
            pieces: Vec::new(),
            piece_crcs: Vec::new(),
            checking: None,
            bytes,
            submitted: at,
            left: pieces.len(),
            first: None,
            last: None,
            error: None,
            progress: at,
            ended: Vec::new(),
            timed_out: false,
            req,
        };
        let slot = job.req.slot;
        let mut job = job;
        if too_many {
            job.error = Some(IngestError::Usage(format!(
                "frame {} needs more than 2^32 reads; use a larger --io-size",
                job.req.frame
            )));
        }
        self.jobs.insert(seq, job);
        if pieces.is_empty() {
            self.finish_job(seq);
            return;
        }
        if let Some(s) = &mut self.staged {
            s.pending.extend(pieces);
            return;
        }
        let slot_mem = self.slots[slot].clone();
        let frame = self.jobs.get(&seq).map_or(0, |j| j.req.frame);
        let tasks: Vec<IoTask> = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let f = &self.files.files[p.file as usize];
                let target = match &*slot_mem {
                    SlotMemory::Host(b) => Target::Host {
                        addr: b.as_mut_ptr() as usize + p.dst as usize,
                    },
                    SlotMemory::Device(d) => Target::Device {
                        handle: self.gds.as_ref().map_or(0, |g| g.handle(p.file as usize)),
                        base: d.ptr(),
                        dev_offset: p.dst,
                    },
                };
                IoTask {
                    token: (seq << 32) | i as u64,
                    lane: f.lane,
                    fd: f.fd(),
                    offset: p.offset,
                    len: p.len,
                    target,
                    frame: Some(frame),
                }
            })
            .collect();
        if let Some(job) = self.jobs.get_mut(&seq) {
            if matches!(self.checks, Checks::Host(_)) {
                job.piece_crcs = vec![0; pieces.len()];
            }
            job.ended = vec![false; pieces.len()];
            job.pieces = pieces;
        }
        if let Some(pool) = &self.pool {
            pool.submit(tasks);
        }
    }

    /// Drops the queued reads of the job writing `slot` (see [`IngestEngine::cancel`]).
    fn on_cancel(&mut self, slot: usize) {
        let Some(seq) = self
            .jobs
            .iter()
            .find(|(_, j)| j.req.slot == slot)
            .map(|(s, _)| *s)
        else {
            return;
        };
        let dropped = self.drop_queued_reads(seq);
        if dropped == 0 {
            return;
        }
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        job.left -= dropped;
        if job.error.is_none() {
            job.error = Some(IngestError::Cancelled(job.req.frame));
        }
        if job.left == 0 {
            self.finish_job(seq);
        }
    }

    /// Fails the frames whose reads made no progress within the read timeout: each is
    /// reported [`IngestError::TimedOut`] at once (naming a read that did not answer), its
    /// reads not yet issued are dropped, and its slot stays reserved until the reads issued
    /// end ([`IngestError::Released`]): the kernel or cuFile may still write into it.
    fn check_timeouts(&mut self) {
        let Some(limit) = self.read_timeout else {
            return;
        };
        let now = Instant::now();
        let expired: Vec<u64> = self
            .jobs
            .iter()
            // A frame whose check is running (device --verify) has all its bytes: its reads
            // cannot be the ones that stopped answering.
            .filter(|(_, j)| {
                !j.timed_out
                    && j.checking.is_none()
                    && now.saturating_duration_since(j.progress) >= limit
            })
            .map(|(s, _)| *s)
            .collect();
        for seq in expired {
            // A read still out: a direct frame's first piece not ended, else (staged) one in
            // a staging buffer or still queued.
            let stuck = self.jobs.get(&seq).and_then(|j| {
                j.pieces
                    .iter()
                    .zip(&j.ended)
                    .find(|(_, e)| !**e)
                    .map(|(p, _)| *p)
            });
            let stuck = stuck.or_else(|| {
                let s = self.staged.as_ref()?;
                s.bufs
                    .iter()
                    .filter_map(|b| b.piece)
                    .chain(s.pending.iter().copied())
                    .find(|p| p.seq == seq)
            });
            let dropped = self.drop_queued_reads(seq);
            let Some(job) = self.jobs.get_mut(&seq) else {
                continue;
            };
            job.timed_out = true;
            job.left -= dropped;
            let (lane, path, offset) = match stuck {
                Some(p) => {
                    let f = &self.files.files[p.file as usize];
                    (Some(f.lane), Some(f.path.clone()), Some(p.offset))
                }
                None => (None, None, None),
            };
            let c = Completion {
                frame: job.req.frame,
                slot: job.req.slot,
                bytes: job.bytes,
                requested: job.req.requested,
                submitted: job.submitted,
                first_byte: job.first,
                last_byte: job.last,
                on_gpu: None,
                result: Err(IngestError::TimedOut {
                    frame: job.req.frame,
                    lane,
                    path,
                    offset,
                    waited: now.saturating_duration_since(job.progress),
                }),
            };
            let _ = self.done.send(c);
            if job.left == 0 {
                self.finish_job(seq);
            }
        }
    }

    /// Drops the reads of frame `seq` that are queued and not yet issued (staged: waiting for
    /// a staging buffer; direct: waiting in the I/O pool), returning how many. Reads already
    /// issued go on and report back.
    fn drop_queued_reads(&mut self, seq: u64) -> usize {
        match (&mut self.staged, &self.pool) {
            (Some(s), _) => {
                let before = s.pending.len();
                s.pending.retain(|p| p.seq != seq);
                before - s.pending.len()
            }
            (None, Some(pool)) => pool.cancel(|token| token >> 32 == seq),
            (None, None) => 0,
        }
    }

    fn piece_done(&mut self, seq: u64, at: Instant, err: Option<IngestError>) {
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        job.note_arrival(at);
        if job.error.is_none() {
            job.error = err;
        }
        job.left -= 1;
        if job.left == 0 {
            self.finish_job(seq);
        }
    }

    fn read_err(&self, p: &Piece, msg: String) -> IngestError {
        IngestError::Read {
            path: self.files.files[p.file as usize].path.clone(),
            offset: p.offset,
            len: p.len as u64,
            msg,
        }
    }

    fn on_io(&mut self, d: IoDone) {
        if self.staged.is_some() {
            return self.on_staged_io(d);
        }
        let seq = d.token >> 32;
        let idx = (d.token & 0xffff_ffff) as usize;
        if let Some(e) = self.jobs.get_mut(&seq).and_then(|j| j.ended.get_mut(idx)) {
            *e = true;
        }
        let err = match d.result {
            Ok(()) => {
                if let Some(job) = self.jobs.get(&seq)
                    && let (Some(p), Some(piece)) = (&job.req.progress, job.pieces.get(idx))
                {
                    p.push(piece.dst, piece.len as u64);
                }
                if let Checks::Host(h) = &self.checks
                    && let Some(job) = self.jobs.get(&seq)
                    && let Some(piece) = job.pieces.get(idx)
                    && job.req.extents[piece.extent as usize].crc32.is_some()
                {
                    // The piece counts as done once its CRC is back.
                    let inbox = self.inbox.clone();
                    let at = d.completed;
                    h.check_piece(
                        self.slots[job.req.slot].clone(),
                        piece.dst,
                        piece.len,
                        Box::new(move |crc| {
                            let _ = inbox.send(Msg::PieceChecked(seq, idx, crc, at));
                        }),
                    );
                    return;
                }
                None
            }
            Err(msg) => {
                let piece = self.jobs.get(&seq).and_then(|j| j.pieces.get(idx)).copied();
                Some(match piece {
                    Some(p) => self.read_err(&p, msg),
                    None => IngestError::Stopped(format!("read of an unknown frame failed: {msg}")),
                })
            }
        };
        self.piece_done(seq, d.completed, err);
    }

    fn on_staged_io(&mut self, d: IoDone) {
        let Some(mut s) = self.staged.take() else {
            return;
        };
        let b = d.token as usize;
        let Some(piece) = s.bufs.get(b).and_then(|x| x.piece) else {
            self.staged = Some(s);
            return;
        };
        let mut failed: Option<IngestError> = None;
        let abandoned = self.jobs.get(&piece.seq).is_none_or(|j| j.timed_out);
        match d.result {
            Err(msg) => failed = Some(self.read_err(&piece, msg)),
            Ok(()) if abandoned => {
                // The frame timed out: its slot gets nothing more. The buffer is free.
                s.bufs[b].piece = None;
                s.free.push(b);
                self.staged = Some(s);
                self.piece_done(piece.seq, d.completed, None);
                return;
            }
            Ok(()) => {
                // The read's arrival is the frame's first/last byte; the piece itself
                // completes when its copy does.
                let slot = self.jobs.get_mut(&piece.seq).map(|job| {
                    job.note_arrival(d.completed);
                    job.req.slot
                });
                let dev = slot.and_then(|sl| match &*self.slots[sl] {
                    SlotMemory::Device(dv) => Some(dv.ptr()),
                    SlotMemory::Host(_) => None,
                });
                match dev {
                    None => {
                        failed = Some(IngestError::Usage(
                            "staged slot is not device memory".into(),
                        ))
                    }
                    Some(dev) => {
                        let k = s.next_stream;
                        s.next_stream = (k + 1) % s.streams.len();
                        let stream = &s.streams[k];
                        let buf = &s.bufs[b];
                        // SAFETY: the source is a pinned buffer of at least `len` bytes that
                        // is not reused until the event recorded below completes; the
                        // destination lies inside the slot (checked at submit), whose memory
                        // this coordinator keeps alive. The context is bound to this thread.
                        let r = unsafe {
                            cudarc::driver::sys::cuMemcpyHtoDAsync_v2(
                                dev + piece.dst,
                                buf.mem.host().as_ptr().cast(),
                                piece.len,
                                stream.cu_stream(),
                            )
                        };
                        let r = crate::gpu::check_pub(r, "cuMemcpyHtoDAsync").and_then(|()| {
                            buf.event
                                .record(stream)
                                .map_err(crate::gpu::cuda_err_pub("cuEventRecord"))
                        });
                        match r {
                            Ok(()) => s.copying[k].push_back(b),
                            Err(e) => {
                                // Let whatever was queued finish so the buffer is idle
                                // before it is reused.
                                let _ = stream.synchronize();
                                failed = Some(e);
                            }
                        }
                    }
                }
            }
        }
        if failed.is_some() {
            s.bufs[b].piece = None;
            s.free.push(b);
        }
        self.staged = Some(s);
        if let Some(e) = failed {
            self.piece_done(piece.seq, d.completed, Some(e));
        }
    }

    fn poll_copies(&mut self) {
        let Some(s) = &mut self.staged else {
            return;
        };
        let mut finished = Vec::new();
        for k in 0..s.copying.len() {
            while let Some(&b) = s.copying[k].front() {
                match s.bufs[b].event.try_is_complete() {
                    Ok(true) => {
                        s.copying[k].pop_front();
                        let p = s.bufs[b].piece.take();
                        s.free.push(b);
                        if let Some(p) = p {
                            finished.push((p.seq, None));
                        }
                    }
                    Ok(false) => break,
                    Err(e) => {
                        s.copying[k].pop_front();
                        let _ = s.streams[k].synchronize();
                        let p = s.bufs[b].piece.take();
                        s.free.push(b);
                        if let Some(p) = p {
                            finished.push((
                                p.seq,
                                Some(IngestError::Cuda(format!("copy to the GPU failed: {e}"))),
                            ));
                        }
                    }
                }
            }
        }
        let now = Instant::now();
        for (seq, err) in finished {
            if let Some(job) = self.jobs.get_mut(&seq) {
                // The copy's completion is the on-GPU time; keep last-byte as the read's.
                let last = job.last;
                job.left -= 1;
                if job.error.is_none() {
                    job.error = err;
                }
                if job.left == 0 {
                    self.finish_job_at(seq, Some(now), last);
                }
            }
        }
    }

    fn dispatch_staged(&mut self) {
        let Some(s) = &mut self.staged else {
            return;
        };
        let mut tasks = Vec::new();
        while !s.pending.is_empty() && !s.free.is_empty() {
            let p = s.pending.pop_front().expect("not empty");
            let b = s.free.pop().expect("not empty");
            s.bufs[b].piece = Some(p);
            let f = &self.files.files[p.file as usize];
            let frame = self.jobs.get(&p.seq).map(|j| j.req.frame);
            tasks.push(IoTask {
                token: b as u64,
                lane: f.lane,
                fd: f.fd(),
                offset: p.offset,
                len: p.len,
                frame,
                target: Target::Host {
                    addr: s.bufs[b].mem.host().as_mut_ptr() as usize,
                },
            });
        }
        if !tasks.is_empty()
            && let Some(pool) = &self.pool
        {
            pool.submit(tasks);
        }
    }

    fn finish_job(&mut self, seq: u64) {
        let on_gpu = match self.kind {
            // cuFile returns once the bytes are in device memory.
            PathKind::Gds => self.jobs.get(&seq).and_then(|j| j.last),
            _ => None,
        };
        let last = self.jobs.get(&seq).and_then(|j| j.last);
        self.finish_job_at(seq, on_gpu, last);
    }

    /// A host piece's CRC is back: the piece is done.
    fn on_piece_checked(&mut self, seq: u64, idx: usize, crc: u32, at: Instant) {
        if let Some(c) = self
            .jobs
            .get_mut(&seq)
            .and_then(|job| job.piece_crcs.get_mut(idx))
        {
            *c = crc;
        }
        self.piece_done(seq, at, None);
    }

    /// A device frame's CRCs are back: compare them and complete the frame.
    fn on_frame_checked(&mut self, seq: u64, result: Result<Vec<u32>>) {
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        let Some((on_gpu, last)) = job.checking else {
            return;
        };
        job.error = match result {
            Ok(crcs) => first_mismatch(&job.req, &crcs, &self.files),
            Err(e) => Some(e),
        };
        self.finish_job_at(seq, on_gpu, last);
    }

    fn finish_job_at(&mut self, seq: u64, on_gpu: Option<Instant>, last: Option<Instant>) {
        // Device slots under --verify: check the complete frame first; the completion
        // follows when the CRCs are back (`on_frame_checked`).
        if let Checks::Device(checker) = &self.checks
            && let Some(job) = self.jobs.get_mut(&seq)
            && job.error.is_none()
            && !job.timed_out
            && job.checking.is_none()
            && job.req.extents.iter().any(|e| e.crc32.is_some())
        {
            job.checking = Some((on_gpu, last));
            let ranges = job.req.extents.iter().map(|e| (e.dst, e.len)).collect();
            let inbox = self.inbox.clone();
            checker.check_frame(
                self.slots[job.req.slot].clone(),
                ranges,
                Box::new(move |r| {
                    let _ = inbox.send(Msg::FrameChecked(seq, r));
                }),
            );
            return;
        }
        let Some(mut job) = self.jobs.remove(&seq) else {
            return;
        };
        if job.error.is_none() && !job.piece_crcs.is_empty() {
            // Host --verify: each extent's CRC from its pieces. `split` keeps an extent's
            // pieces in slot order, so folding in piece order is folding in byte order.
            let mut crcs = vec![0u32; job.req.extents.len()];
            for (p, &c) in job.pieces.iter().zip(&job.piece_crcs) {
                let e = p.extent as usize;
                crcs[e] = crate::crc32::combine(crcs[e], c, p.len as u64);
            }
            job.error = first_mismatch(&job.req, &crcs, &self.files);
        }
        let c = Completion {
            frame: job.req.frame,
            slot: job.req.slot,
            bytes: job.bytes,
            requested: job.req.requested,
            submitted: job.submitted,
            first_byte: job.first,
            last_byte: last,
            on_gpu,
            result: match job.error {
                _ if job.timed_out => Err(IngestError::Released(job.req.frame)),
                Some(e) => Err(e),
                None => Ok(()),
            },
        };
        let _ = self.done.send(c);
    }
}

/// The checksum error for the extents of `req` whose CRC in `crcs` (one per extent, in
/// order) differs from the one they carry, or `None` when all match.
fn first_mismatch(req: &ReadRequest, crcs: &[u32], files: &OpenFiles) -> Option<IngestError> {
    let mut bad = req
        .extents
        .iter()
        .zip(crcs)
        .filter(|(e, c)| e.crc32.is_some_and(|want| want != **c));
    let (e, &actual) = bad.next()?;
    let file = &files.files[e.file as usize];
    Some(IngestError::Checksum {
        frame: req.frame,
        lane: file.lane,
        path: file.path.clone(),
        offset: e.offset,
        len: e.len,
        expected: e.crc32.unwrap_or_default(),
        actual,
        more: bad.count() as u64,
    })
}

/// Opens the engine for `requested`, falling back from gds to staged when cuFile cannot be
/// used (the reason is in [`PathInfo::fallback`]; nothing pretends to be GDS).
pub fn open_engine(
    requested: PathKind,
    gpu: Option<&Gpu>,
    files: &[SourceFile],
    slots: Vec<Arc<SlotMemory>>,
    cfg: &EngineConfig,
) -> Result<Engine> {
    match requested {
        PathKind::Portable | PathKind::CpuOnly => Engine::host(requested, files, slots, cfg),
        PathKind::Staged => {
            let gpu =
                gpu.ok_or_else(|| IngestError::Unavailable("the staged path needs a GPU".into()))?;
            Engine::staged(gpu, files, slots, cfg)
        }
        PathKind::Gds => {
            let gpu =
                gpu.ok_or_else(|| IngestError::Unavailable("the gds path needs a GPU".into()))?;
            match Engine::gds(gpu, files, slots.clone(), cfg) {
                Ok(e) => Ok(e),
                Err(IngestError::Unavailable(why)) => {
                    Engine::staged_with_fallback(gpu, files, slots, cfg, PathKind::Gds, Some(why))
                }
                Err(e) => Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_interleaves_lanes_and_caps_reads() {
        let files = vec![
            SourceFile {
                path: "a".into(),
                lane: 0,
                size: 1 << 20,
            },
            SourceFile {
                path: "b".into(),
                lane: 1,
                size: 1 << 20,
            },
        ];
        let ext = |file: u32, dst: u64| ReadExtent {
            file,
            offset: 0,
            len: 3 * 4096,
            dst,
            crc32: None,
        };
        let pieces = split(1, &[ext(0, 0), ext(1, 3 * 4096)], &files, 8192);
        let lanes: Vec<u32> = pieces.iter().map(|p| files[p.file as usize].lane).collect();
        assert_eq!(lanes, vec![0, 1, 0, 1]);
        assert_eq!(pieces.iter().map(|p| p.len).sum::<usize>(), 6 * 4096);
        assert_eq!(pieces[2].dst, 8192);
        assert_eq!(pieces[2].len, 4096);
    }
}
