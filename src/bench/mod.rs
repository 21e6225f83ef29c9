//! `supercell bench`: a headless ingest benchmark modelled on gdsio.
//!
//! One run plays a [`Source`] (a dataset or plain files) through an engine and its frame
//! ring, driven by the playback [`Scheduler`] (looping, as fast as frames arrive), for a
//! number of frames or seconds, and reports gdsio-style lines plus the frame-level figures
//! of [`Summary`]. [`sweep`] repeats runs over thread counts and I/O sizes; [`jobs`] runs
//! several jobs at once (GPUs, NUMA nodes, lanes) and sums them.

pub mod diskstats;
pub mod jobs;
pub mod peer;
pub mod plot;
pub mod ranks;
pub mod report;
mod run;
pub mod sweep;

pub use run::run;

use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::Serialize;

use crate::gpu::{FrameRing, Gpu, SlotDemand, SlotPlan};
use crate::ingest::gds::CuFileStats;
use crate::ingest::{Engine, EngineKind, IngestError, IoBackend, Result, Source};
use crate::pipeline::metrics::{FrameTimes, Summary};

pub use crate::stream::MIN_SLOTS;

/// Settings of one benchmark run.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchConfig {
    /// Path to measure.
    pub engine: EngineKind,
    /// I/O threads.
    pub threads: usize,
    /// Largest read, bytes.
    pub io_size: usize,
    /// Reads in flight per io_uring.
    pub queue_depth: usize,
    /// Frame-ring slots: exactly this many (refused where they do not fit the memory), or
    /// with `None` [`DEFAULT_SLOTS`], fewer where frames are too large for that many (the
    /// result's [`BenchResult::slot_plan`] says how many, and why).
    pub slots: Option<usize>,
    /// Bytes of a slot part (a power of two of at least 64 KiB); `None`:
    /// [`crate::gpu::DEFAULT_PART_BYTES`] (what the player uses on GPUs whose buffers reach
    /// 4 GiB). The binary passes `SUPERCELL_PART_BYTES` here.
    pub part_bytes: Option<u64>,
    /// Which pages back host slots (`SUPERCELL_HOST_HUGEPAGES`, read by the binary).
    pub host_pages: crate::gpu::HostPages,
    /// Stop after this many frames (default: every frame of the source once).
    pub frames: Option<u64>,
    /// Stop after this many seconds.
    pub duration: Option<f64>,
    /// O_DIRECT and a dropped page cache (when root).
    pub cold: bool,
    /// Read through the page cache instead of O_DIRECT.
    pub buffered: bool,
    /// GPU ordinal.
    pub gpu: usize,
    /// Check every frame against its checksums (or the files) on arrival.
    pub verify: bool,
    /// io_uring or pread.
    pub backend: IoBackend,
    /// CUDA streams of the staged path.
    pub streams: usize,
    /// Show a progress line on stderr.
    pub progress: bool,
    /// A frame whose reads make no progress for this long fails (see
    /// [`EngineConfig::read_timeout`]).
    pub read_timeout: Option<Duration>,
    /// Faults to inject ([`crate::ingest::FaultPlan`]; the binary passes the plan in
    /// `SUPERCELL_FAULTS`); `None`: none.
    pub faults: Option<std::sync::Arc<crate::ingest::FaultPlan>>,
    /// Sample bandwidth and latency this often ([`BenchResult::log`], fio's
    /// `log_avg_msec`); `None`: no log.
    pub log_interval: Option<Duration>,
}

impl Default for BenchConfig {
    fn default() -> Self {
        BenchConfig {
            engine: EngineKind::CpuOnly,
            threads: 8,
            io_size: 1 << 20,
            queue_depth: 8,
            slots: None,
            part_bytes: None,
            host_pages: crate::gpu::HostPages::Huge,
            frames: None,
            duration: None,
            cold: false,
            buffered: false,
            gpu: 0,
            verify: false,
            backend: IoBackend::Auto,
            streams: 4,
            progress: false,
            read_timeout: Some(crate::ingest::DEFAULT_READ_TIMEOUT),
            faults: None,
            log_interval: None,
        }
    }
}

/// Outcome of `--verify`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VerifyOutcome {
    /// Frames checked.
    pub frames: u64,
    /// Extents checked.
    pub extents: u64,
    /// Mismatches, described (at most 20 kept).
    pub mismatches: Vec<String>,
    /// Total mismatching extents.
    pub mismatch_count: u64,
}

/// Everything one run measured (what `--json` writes).
#[derive(Clone, Debug, Serialize)]
pub struct BenchResult {
    /// Engine asked for.
    pub requested_engine: String,
    /// Engine that ran.
    pub engine: String,
    /// How it ran (io_uring / pread, O_DIRECT, cuFile mode, streams).
    pub mode: String,
    /// Why the requested path did not run, if it did not.
    pub fallback: Option<String>,
    /// Other notes (page cache not dropped, files without O_DIRECT, ...).
    pub notes: Vec<String>,
    /// gdsio XferType.
    pub xfer_type: String,
    /// GPU used, if any.
    pub gpu: Option<String>,
    /// I/O threads.
    pub threads: usize,
    /// I/O size, bytes.
    pub io_size: usize,
    /// Queue depth.
    pub queue_depth: usize,
    /// Slots in the ring.
    pub slots: usize,
    /// How many slots, of what parts, the memory they take, and why that many.
    pub slot_plan: SlotPlan,
    /// Whether the page cache was dropped.
    pub cold: bool,
    /// Reads completed.
    pub ops: u64,
    /// Failed reads.
    pub op_errors: u64,
    /// Bytes read by the I/O threads.
    pub io_bytes: u64,
    /// Mean read latency, microseconds.
    pub avg_latency_us: f64,
    /// Read latencies, fio's way (nanoseconds: min, max, mean, percentiles).
    pub read_lat_ns: report::LatencyNs,
    /// User CPU seconds of this process during the run.
    pub usr_cpu_s: f64,
    /// System CPU seconds of this process during the run.
    pub sys_cpu_s: f64,
    /// Bytes the run meant to move.
    pub planned_bytes: u64,
    /// Wall time of the run, seconds.
    pub total_time_s: f64,
    /// Frame-level figures. Without `gbps_instant` ("last frame"): a frame's bytes over the
    /// span from its first read's completion to its last's. Reads of several frames are in
    /// flight at once, so a frame's reads finish bunched together after queueing behind the
    /// frames before it, and that span measured how closely completions bunch (61 to 870
    /// GB/s on a 2–3 GB/s disk), not a rate the storage delivered.
    #[serde(serialize_with = "summary_without_instant")]
    pub summary: Summary,
    /// cuFile's own counters (gds path): the live mode.
    pub cufile: Option<CuFileStatsJson>,
    /// `--verify` outcome.
    pub verify: Option<VerifyOutcome>,
    /// Every frame's timings.
    pub frames: Vec<FrameTimes>,
    /// Frames that failed (a read error, a time-out): they are counted here and left out
    /// of the rates, and the run goes on.
    pub failed_frames: u64,
    /// The failures by lane and file, most frequent first.
    pub errors: Vec<BenchErrors>,
    /// Each lane's bytes of the frames that landed.
    pub lanes: Vec<LaneShare>,
    /// The block devices under the files, as the kernel counted them over the run (all
    /// their I/O, this run's and any other's).
    pub disk_util: Vec<diskstats::DiskUtil>,
    /// With [`BenchConfig::log_interval`]: the reads of each interval.
    #[serde(skip)]
    pub log: Vec<LogSample>,
}

/// The reads completed in one interval of a run's log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogSample {
    /// End of the interval, milliseconds from the start of the run.
    pub t_ms: u64,
    /// Length of the interval, milliseconds.
    pub span_ms: u64,
    /// Bytes read in it.
    pub bytes: u64,
    /// Reads completed in it.
    pub ops: u64,
    /// Their latencies summed, nanoseconds.
    pub lat_ns: u64,
}

/// Takes a [`LogSample`] whenever an interval has passed.
struct LogSampler {
    every: Duration,
    last_at: Duration,
    last: (u64, u64, u64),
    samples: Vec<LogSample>,
}

impl LogSampler {
    fn new(every: Duration) -> LogSampler {
        LogSampler {
            every,
            last_at: Duration::ZERO,
            last: (0, 0, 0),
            samples: Vec::new(),
        }
    }

    /// Samples `counters` at `now` (from the start) if an interval has passed, or
    /// whatever is left when `force`.
    fn tick(&mut self, now: Duration, c: &crate::ingest::IoCounters, force: bool) {
        if !(force || now >= self.last_at + self.every) || now <= self.last_at {
            return;
        }
        let cur = (
            c.bytes.load(Ordering::Relaxed),
            c.ops.load(Ordering::Relaxed),
            c.latency_ns.load(Ordering::Relaxed),
        );
        let sample = LogSample {
            t_ms: now.as_millis() as u64,
            span_ms: (now - self.last_at).as_millis() as u64,
            bytes: cur.0.saturating_sub(self.last.0),
            ops: cur.1.saturating_sub(self.last.1),
            lat_ns: cur.2.saturating_sub(self.last.2),
        };
        // A short last interval holds the reads that drained after the run stopped issuing
        // them: on its own it would read as a burst no disk delivered, so it joins the one
        // before.
        match self.samples.last_mut() {
            Some(prev) if force && now - self.last_at < self.every / 2 => {
                prev.t_ms = sample.t_ms;
                prev.span_ms += sample.span_ms;
                prev.bytes += sample.bytes;
                prev.ops += sample.ops;
                prev.lat_ns += sample.lat_ns;
            }
            _ => self.samples.push(sample),
        }
        self.last = cur;
        self.last_at = now;
    }
}

/// One lane's part of a run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct LaneShare {
    /// The lane.
    pub lane: u32,
    /// Its files.
    pub files: Vec<String>,
    /// Bytes read from it, of the frames that landed.
    pub bytes: u64,
}

/// Each lane's bytes of the frames landed (`frames`: frame indices, once per landing).
fn lane_shares(source: &Source, frames: impl Iterator<Item = u32>) -> Vec<LaneShare> {
    let mut lanes: Vec<LaneShare> = (0..source.lanes)
        .map(|lane| LaneShare {
            lane,
            files: source
                .files
                .iter()
                .filter(|f| f.lane == lane)
                .map(|f| f.path.display().to_string())
                .collect(),
            bytes: 0,
        })
        .collect();
    for f in frames {
        let Some(frame) = source.frames.get(f as usize) else {
            continue;
        };
        for e in &frame.extents {
            let lane = source.files[e.file as usize].lane as usize;
            if let Some(l) = lanes.get_mut(lane) {
                l.bytes += e.len;
            }
        }
    }
    lanes
}

/// [`Summary`] without its `gbps_instant` (see [`BenchResult::summary`]).
fn summary_without_instant<S: serde::Serializer>(
    summary: &Summary,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    let mut v = serde_json::to_value(summary).map_err(serde::ser::Error::custom)?;
    if let Some(m) = v.as_object_mut() {
        m.remove("gbps_instant");
    }
    v.serialize(s)
}

impl BenchResult {
    /// Where no frame of the run arrived and some failed: which reads failed (lane, file,
    /// frames, the first error of each), for the command's error; None where any frame
    /// arrived or nothing was read.
    pub fn every_read_failed(&self) -> Option<String> {
        if self.summary.frames > 0 || self.failed_frames == 0 {
            return None;
        }
        let places: Vec<String> = self
            .errors
            .iter()
            .map(|e| {
                let lane = e.lane.map_or_else(|| "?".to_string(), |l| l.to_string());
                let file = e.file.as_deref().unwrap_or("-");
                format!("lane {lane} {file}: {} frames; first: {}", e.count, e.first)
            })
            .collect();
        Some(format!(
            "every read failed: {} frames failed, none arrived ({})",
            self.failed_frames,
            places.join("; ")
        ))
    }
}

/// Failed frames of one lane and file (or of no file, where the error names none).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct BenchErrors {
    /// The lane, where known.
    pub lane: Option<u32>,
    /// The file, where the error names one.
    pub file: Option<String>,
    /// Frames failed here.
    pub count: u64,
    /// The first failure, in full.
    pub first: String,
}

/// Adds a failure to the per-lane, per-file tally.
fn tally(errors: &mut Vec<BenchErrors>, source: &Source, e: &IngestError) {
    let (file, lane) = match e.site() {
        Some((path, _, lane)) => {
            let lane =
                lane.or_else(|| source.files.iter().find(|f| f.path == path).map(|f| f.lane));
            (Some(path.display().to_string()), lane)
        }
        None => (None, None),
    };
    match errors.iter_mut().find(|x| x.file == file && x.lane == lane) {
        Some(x) => x.count += 1,
        None => errors.push(BenchErrors {
            lane,
            file,
            count: 1,
            first: e.to_string(),
        }),
    }
}

/// [`CuFileStats`] for JSON, with the live mode in words.
#[derive(Clone, Debug, Serialize)]
pub struct CuFileStatsJson {
    /// Mode the counters show.
    pub live_mode: String,
    /// Bytes cuFile read.
    pub read_bytes: u64,
    /// P2P reads.
    pub p2p_reads: u64,
    /// nvidia-fs reads.
    pub nvfs_reads: u64,
    /// POSIX (compatibility) reads.
    pub posix_reads: u64,
    /// Failed reads.
    pub read_errors: u64,
}

impl From<CuFileStats> for CuFileStatsJson {
    fn from(s: CuFileStats) -> Self {
        CuFileStatsJson {
            live_mode: s.live_mode().into(),
            read_bytes: s.read_bytes,
            p2p_reads: s.p2p_reads,
            nvfs_reads: s.nvfs_reads,
            posix_reads: s.posix_reads,
            read_errors: s.read_errors,
        }
    }
}

/// Drops the page cache (root only); returns a note when it could not.
pub fn drop_page_cache() -> Option<String> {
    // SAFETY: sync has no preconditions.
    unsafe { libc::sync() };
    match std::fs::write("/proc/sys/vm/drop_caches", "3\n") {
        Ok(()) => None,
        Err(e) => Some(format!(
            "--cold: could not drop the page cache ({e}; needs root); reads are O_DIRECT, so the cache is bypassed anyway"
        )),
    }
}

impl VerifyOutcome {
    fn record(&mut self, mismatches: u64, text: String) {
        self.mismatch_count += mismatches;
        if self.mismatches.len() < 20 {
            self.mismatches.push(text);
        }
    }
}

/// Checks the extents of a frame that carry no checksum (plain files) against the files,
/// recording mismatches. Extents with a checksum are checked by the engine itself
/// ([`EngineConfig::verify`]); this slow path reads the slot back on the caller's thread.
fn verify_unchecksummed(
    source: &Source,
    ring: &FrameRing,
    slot: usize,
    frame: u32,
    out: &mut VerifyOutcome,
) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let mut reference = Vec::new();
    let mut got = Vec::new();
    for e in source.frames[frame as usize]
        .extents
        .iter()
        .filter(|e| e.crc32.is_none())
    {
        let file = &source.files[e.file as usize];
        // Two copies of the extent: sized by the file, so checked against what we can get.
        crate::memory::check_available(
            || {
                format!(
                    "--verify: two {}-byte copies of {}",
                    e.len,
                    file.path.display()
                )
            },
            e.len.saturating_mul(2),
        )
        .map_err(|err| IngestError::Usage(err.to_string()))?;
        reference.resize(e.len as usize, 0);
        got.resize(e.len as usize, 0);
        ring.read_back(slot, e.dst as usize, &mut got)?;
        std::fs::File::open(&file.path)
            .and_then(|f| f.read_exact_at(&mut reference, e.offset))
            .map_err(|err| IngestError::io("cannot read for --verify", &file.path, err))?;
        if reference != got {
            out.record(
                1,
                format!(
                    "frame {frame}: {} offset {} ({} bytes) -> slot offset {}: bytes differ",
                    file.path.display(),
                    e.offset,
                    e.len,
                    e.dst
                ),
            );
        }
    }
    Ok(())
}

/// Slots a benchmark holds when `--slots` does not say: enough to keep reads ahead of the
/// consumer.
pub const DEFAULT_SLOTS: usize = 4;

/// How many slots a run holds: `cfg.slots` exactly (the ring refuses a count that does not
/// fit, naming it), else [`DEFAULT_SLOTS`] or as many as fit (at least [`MIN_SLOTS`]) where
/// frames are too large for that many in device memory (GPU engines) or host memory.
fn plan_bench_slots(source: &Source, cfg: &BenchConfig, gpu: Option<&Gpu>) -> Result<SlotPlan> {
    let (frame, frame_bytes) = source.largest_frame();
    let part_bytes = crate::gpu::choose_part_bytes(cfg.part_bytes, crate::gpu::DEFAULT_PART_BYTES)?;
    let on_gpu = u64::from(gpu.is_some());
    let demand = SlotDemand {
        frame,
        frame_bytes: frame_bytes.max(1),
        part_bytes,
        // No renderer binds a benchmark's slots.
        max_parts: usize::MAX,
        host_per_slot: 1 - on_gpu,
        gpu_per_slot: on_gpu,
        gpu_fixed: 0,
    };
    let gpu_free = gpu
        .and_then(|g| g.mem_info().ok())
        .map(|(free, _)| free as u64);
    let host = crate::memory::available().bytes;
    let wanted = cfg.slots.unwrap_or(DEFAULT_SLOTS);
    crate::gpu::plan_slots(
        &demand,
        wanted,
        cfg.slots.is_some(),
        MIN_SLOTS,
        Some(host),
        gpu_free,
    )
    .map_err(IngestError::Usage)
}

/// The engine `bench` measures when none is named: the fastest that can run here, and why.
///
/// With an NVIDIA GPU that is gds (which itself falls back to staged, and says so, where
/// cuFile cannot run); without one, cpu-only (the storage ceiling into host memory).
pub fn default_engine(gpu: usize) -> (EngineKind, String) {
    match Gpu::open(gpu) {
        Ok(g) => (
            EngineKind::Gds,
            format!(
                "an NVIDIA GPU is present ({}): GPUDirect Storage, or staged where cuFile cannot run",
                g.name
            ),
        ),
        Err(e) => (
            EngineKind::CpuOnly,
            format!("no usable NVIDIA GPU ({e}): reads into host memory, the storage ceiling"),
        ),
    }
}

fn progress_bar(enabled: bool, total: u64) -> indicatif::ProgressBar {
    if !enabled {
        return indicatif::ProgressBar::hidden();
    }
    let bar = if total > 0 {
        indicatif::ProgressBar::new(total)
    } else {
        indicatif::ProgressBar::new_spinner()
    };
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{spinner} [{elapsed_precise}] {bytes}/{total_bytes} {msg}",
    ) {
        bar.set_style(style);
    }
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// The engine of a run, for callers that drive it themselves.
pub type BenchEngine = Engine;

/// fio's `ioengine` for what an engine's mode line says it ran.
pub fn fio_ioengine(mode: &str) -> &'static str {
    if mode.contains("io_uring") {
        "io_uring"
    } else {
        "psync"
    }
}

/// Seconds a run lasts when neither `--frames`, `--duration` nor `--frames-once` says (fio
/// and gdsio users expect a time-based run).
pub const DEFAULT_DURATION_S: f64 = 10.0;

/// How long a run goes, from the command line: `(frames, seconds)` for [`BenchConfig`].
/// `--frames-once` reads every frame once (neither limit); `--frames` alone stops after that
/// many frames; otherwise the run lasts `--duration`, or [`DEFAULT_DURATION_S`].
pub fn run_length(
    frames: Option<u64>,
    duration_s: Option<f64>,
    frames_once: bool,
) -> (Option<u64>, Option<f64>) {
    match (frames, duration_s, frames_once) {
        (_, _, true) => (None, None),
        (Some(f), d, false) => (Some(f), d),
        (None, d, false) => (None, Some(d.unwrap_or(DEFAULT_DURATION_S))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_time_based_unless_told_otherwise() {
        assert_eq!(
            run_length(None, None, false),
            (None, Some(DEFAULT_DURATION_S))
        );
        assert_eq!(run_length(None, Some(2.5), false), (None, Some(2.5)));
        assert_eq!(run_length(Some(7), None, false), (Some(7), None));
        assert_eq!(run_length(None, None, true), (None, None));
    }

    #[test]
    fn the_log_folds_a_short_drain_into_the_last_interval() {
        let c = crate::ingest::IoCounters::default();
        let mut l = LogSampler::new(Duration::from_millis(100));
        let ms = Duration::from_millis;
        c.bytes.store(1000, Ordering::Relaxed);
        c.ops.store(10, Ordering::Relaxed);
        l.tick(ms(50), &c, false); // not yet an interval
        l.tick(ms(100), &c, false);
        c.bytes.store(3000, Ordering::Relaxed);
        c.ops.store(30, Ordering::Relaxed);
        l.tick(ms(200), &c, false);
        c.bytes.store(3500, Ordering::Relaxed);
        l.tick(ms(210), &c, true); // the drain: 10 ms
        let got: Vec<(u64, u64, u64)> = l
            .samples
            .iter()
            .map(|s| (s.t_ms, s.span_ms, s.bytes))
            .collect();
        assert_eq!(got, vec![(100, 100, 1000), (210, 110, 2500)]);
        c.bytes.store(4000, Ordering::Relaxed);
        l.tick(ms(290), &c, true); // a long enough last interval stands alone
        assert_eq!(
            l.samples.last().map(|s| (s.span_ms, s.bytes)),
            Some((80, 500))
        );
    }
}
