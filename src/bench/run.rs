//! One benchmark run: the engine and its ring opened for the request ([`Opened`]), the
//! frames played through them as fast as they land ([`Run::play`]), and the figures of what
//! landed ([`Run::into_result`]).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::{
    BenchConfig, BenchErrors, BenchResult, CuFileStatsJson, LogSampler, VerifyOutcome, diskstats,
    drop_page_cache, lane_shares, plan_bench_slots, progress_bar, report, tally,
    verify_unchecksummed,
};
use crate::gpu::{FrameRing, Gpu, GpuError, SlotPlan, SlotState};
use crate::ingest::{
    EngineConfig, EngineInfo, IngestEngine, IngestError, IoMode, Result, Source, open_engine,
};
use crate::pipeline::metrics::Metrics;
use crate::pipeline::{PlayMode, PlaybackConfig, Scheduler};
use crate::stream::{FrameStream, StreamEvent};

/// Runs one benchmark. Prints nothing itself except the progress line (when enabled).
pub fn run(source: &Source, cfg: &BenchConfig) -> Result<BenchResult> {
    run_when_ready(source, cfg, || true)
}

/// [`run`], calling `ready` once the engine and ring are open (or failed to open) and
/// before the first read: where every rank of a run waits for the others
/// ([`super::ranks`]), so setup is not timed and all ranks read together. `ready`
/// returning `false` (the others did not come) ends the run before it reads.
pub(super) fn run_when_ready(
    source: &Source,
    cfg: &BenchConfig,
    ready: impl FnOnce() -> bool,
) -> Result<BenchResult> {
    let opened = Opened::new(source, cfg);
    if !ready() {
        return Err(IngestError::Usage(
            "the run did not start: other ranks did not come".into(),
        ));
    }
    let opened = opened?;
    let mut run = Run::new(source, cfg, opened);
    let bar = progress_bar(cfg.progress, run.planned_bytes);
    let played = run.play(cfg, &bar);
    bar.finish_and_clear();
    played?;
    Ok(run.into_result(cfg))
}

/// What a run reads with: the engine's stream, the slots, the GPU (GPU engines) and what
/// the engine and the request noted on the way.
///
/// Fields drop in declaration order: the stream (engine and ring, with their device
/// memory) before the GPU whose context holds that memory.
struct Opened {
    stream: FrameStream,
    slot_plan: SlotPlan,
    info: EngineInfo,
    notes: Vec<String>,
    gpu: Option<Gpu>,
}

impl Opened {
    /// Checks the request, drops the page cache where asked, and opens the GPU, the ring of
    /// slots and the engine.
    fn new(source: &Source, cfg: &BenchConfig) -> Result<Opened> {
        if source.frames.is_empty() {
            return Err(IngestError::Usage("nothing to read".into()));
        }
        crate::stream::check_slots(cfg.slots).map_err(IngestError::Usage)?;
        let mut notes = Vec::new();
        if source.skipped_tail_bytes > 0 {
            notes.push(format!(
                "{} bytes of partial trailing pages are not read (O_DIRECT reads whole 4 KiB pages)",
                source.skipped_tail_bytes
            ));
        }
        let io_mode = if cfg.buffered && !cfg.cold {
            IoMode::Buffered
        } else {
            IoMode::Direct
        };
        if cfg.cold
            && let Some(n) = drop_page_cache()
        {
            notes.push(n);
        }
        let gpu = if cfg.engine.needs_cuda() {
            Some(Gpu::open(cfg.gpu).map_err(|e| match e {
                GpuError::Unavailable(m) => IngestError::Unavailable(format!(
                    "{m}; the {} engine needs an NVIDIA GPU (--engine portable or cpu-only run without one)",
                    cfg.engine
                )),
                other => other.into(),
            })?)
        } else {
            None
        };
        let slot_plan = plan_bench_slots(source, cfg, gpu.as_ref())?;
        let layout = slot_plan.layout()?;
        let ring = match &gpu {
            Some(g) => FrameRing::device(g, slot_plan.slots, layout)?,
            None => FrameRing::host(slot_plan.slots, layout.with_pages(cfg.host_pages))?,
        };
        let ecfg = EngineConfig {
            threads: cfg.threads,
            queue_depth: cfg.queue_depth,
            io_size: cfg.io_size,
            backend: cfg.backend,
            io_mode,
            streams: cfg.streams,
            staging_buffers: 0,
            verify: cfg.verify,
            read_timeout: cfg.read_timeout,
            faults: cfg.faults.clone(),
            host_pages: cfg.host_pages,
        };
        let engine = open_engine(
            cfg.engine,
            gpu.as_ref(),
            &source.files,
            ring.memories(),
            &ecfg,
        )?;
        let info: EngineInfo = engine.info().clone();
        notes.extend(info.notes.iter().cloned());
        // A checksum mismatch is counted, and the frame is played on as if it were good: the
        // run measures, and reports every bad extent at the end.
        let stream = FrameStream::new(engine, ring).land_checksum_mismatches();
        Ok(Opened {
            stream,
            slot_plan,
            info,
            notes,
            gpu,
        })
    }
}

/// A run in progress: the stream and its schedule, and what has landed, failed and is held.
struct Run<'s> {
    source: &'s Source,
    opened: Opened,
    sched: Scheduler,
    metrics: Metrics,
    verify: Option<VerifyOutcome>,
    /// Frames to complete (`u64::MAX` for a timed run).
    target_frames: u64,
    /// Bytes of the frames a frame-counted run reads; 0 for a timed one.
    planned_bytes: u64,
    requested: u64,
    completed: u64,
    failed_frames: u64,
    errors: Vec<BenchErrors>,
    /// The slot of the frame the consumer holds ("on screen").
    on_screen: Option<usize>,
    /// Each landed frame's index in `metrics`.
    metric_index: HashMap<u32, usize>,
    held: HeldFrames,
    sampler: Option<LogSampler>,
    disks: Vec<diskstats::BlockDevice>,
    disks_before: Vec<Option<diskstats::Counters>>,
    cpu_start: (f64, f64),
    start: Instant,
}

impl<'s> Run<'s> {
    fn new(source: &'s Source, cfg: &BenchConfig, opened: Opened) -> Run<'s> {
        let n = source.frames.len() as u32;
        let target_frames = match (cfg.frames, cfg.duration) {
            (Some(f), _) => f,
            (None, Some(_)) => u64::MAX,
            (None, None) => u64::from(n),
        };
        let planned_bytes = if target_frames == u64::MAX {
            0
        } else {
            (0..target_frames)
                .map(|i| source.frames[(i % u64::from(n)) as usize].bytes())
                .sum()
        };
        let mut sched = Scheduler::new(PlaybackConfig {
            frame_count: n,
            mode: PlayMode::Loop,
            speed_fps: None,
            window: opened.slot_plan.slots,
        });
        sched.set_playing(true);
        let disks = diskstats::devices_of(source.files.iter().map(|f| f.path.as_path()));
        let disks_before = diskstats::sample(&disks);
        let metrics = Metrics::new(Duration::from_secs(1));
        let start = metrics.start();
        Run {
            source,
            opened,
            sched,
            metrics,
            verify: cfg.verify.then(VerifyOutcome::default),
            target_frames,
            planned_bytes,
            requested: 0,
            completed: 0,
            failed_frames: 0,
            errors: Vec::new(),
            on_screen: None,
            metric_index: HashMap::new(),
            held: HeldFrames::default(),
            sampler: cfg.log_interval.map(LogSampler::new),
            disks,
            disks_before,
            cpu_start: crate::probe::cpu_times(),
            start,
        }
    }

    /// Plays until the run's frames or seconds are done (or only held frames are out).
    fn play(&mut self, cfg: &BenchConfig, bar: &indicatif::ProgressBar) -> Result<()> {
        let deadline = cfg.duration.map(Duration::from_secs_f64);
        let mut stopping = false;
        let mut last_progress = Instant::now();
        loop {
            if let Some(l) = self.sampler.as_mut() {
                l.tick(
                    self.start.elapsed(),
                    self.opened.stream.engine().counters(),
                    false,
                );
            }
            if !stopping
                && (self.completed >= self.target_frames
                    || deadline.is_some_and(|d| self.start.elapsed() >= d))
            {
                stopping = true;
            }
            // A frame that timed out keeps its slot while its reads are out (held). While
            // one is, no new read is issued: a lane that stopped would only collect more of
            // them, one read timeout each. Once nothing but held frames is out, the run ends
            // with the reads abandoned (the lane had the read timeout to answer and may
            // never); if they are released first (the lane answered late), the run goes on.
            let stream = &mut self.opened.stream;
            let held_now = stream.held_slots();
            if (stopping || held_now > 0) && stream.in_flight() == held_now {
                return match self.held.abandon() {
                    Some(e) => Err(e),
                    None => Ok(()),
                };
            }
            if !stopping && held_now == 0 {
                let room = self.target_frames.saturating_sub(self.requested);
                self.requested += stream.feed_with(&mut self.sched, self.source, room, |_| {
                    Ok::<_, IngestError>(None)
                })? as u64;
            }
            let event = stream.next_event(&mut self.sched, Duration::from_millis(2))?;
            self.on_event(event, bar)?;
            if let Some(f) = self.sched.tick(self.start.elapsed().as_secs_f64()) {
                self.show(f);
            }
            if last_progress.elapsed() > Duration::from_millis(250) {
                last_progress = Instant::now();
                let s = self.metrics.summary();
                bar.set_message(format!(
                    "{:.2} GB/s (1 s: {:.2}), {:.1} frames/s",
                    s.gbps, s.gbps_window, s.frames_per_s
                ));
            }
        }
    }

    /// Counts what the stream reported.
    fn on_event(&mut self, event: Option<StreamEvent>, bar: &indicatif::ProgressBar) -> Result<()> {
        match event {
            Some(StreamEvent::Landed(c)) => {
                self.completed += 1;
                let idx = self.metrics.record(
                    c.frame,
                    c.bytes,
                    c.requested,
                    c.first_byte,
                    c.last_byte,
                    c.on_gpu,
                );
                self.metric_index.insert(c.frame, idx);
                if let Some(v) = self.verify.as_mut() {
                    v.frames += 1;
                    v.extents += self.source.frames[c.frame as usize].extents.len() as u64;
                    if let Err(e @ IngestError::Checksum { more, .. }) = &c.result {
                        v.record(1 + more, e.to_string());
                    }
                    let ring = self.opened.stream.ring();
                    verify_unchecksummed(self.source, ring, c.slot, c.frame, v)?;
                }
                bar.set_position(self.metrics.frames().iter().map(|f| f.bytes).sum());
            }
            Some(StreamEvent::Failed(c)) if matches!(c.result, Err(IngestError::Stopped(_))) => {
                let e = c.result.err().map(|e| e.to_string()).unwrap_or_default();
                return Err(IngestError::Stopped(e));
            }
            // Any other failure is counted (by lane and file) and the frame skipped, and the
            // run goes on: one bad extent or a lane that stops answering is a finding to
            // report with the figures of what did work, not a reason to lose them. It counts
            // toward --frames, so a run whose every read fails still ends. A timed-out frame
            // (held) keeps its slot reserved until its reads end (released).
            Some(StreamEvent::Failed(c) | StreamEvent::Held(c)) => {
                self.failed_frames += 1;
                self.completed += 1;
                if let Err(e) = c.result {
                    tally(&mut self.errors, self.source, &e);
                    if matches!(e, IngestError::TimedOut { .. }) {
                        self.held.insert(c.slot, c.frame, e);
                    }
                }
            }
            Some(StreamEvent::Released { slot }) => self.held.remove(slot),
            // A run plays on in a loop without jumping, so the scheduler abandons no read
            // (nothing is cancelled) and no path is left (nothing is stale).
            Some(StreamEvent::Cancelled(_) | StreamEvent::Stale(_)) | None => {}
        }
        Ok(())
    }

    /// The consumer "shows" frame `f` by taking its slot; the previous one is released and
    /// dropped from the ring: a benchmark streams every frame it shows from storage, so a
    /// dataset that fits in the slots must not turn into a cache (it would stop issuing
    /// reads, and a --frames run would never finish).
    fn show(&mut self, f: u32) {
        let stream = &mut self.opened.stream;
        if let Some(h) = self.on_screen.take() {
            if stream.ring().states().get(h) == Some(&SlotState::InUse(f)) {
                // The same frame again (a one-frame loop): it stays.
                stream.ring_mut().release(h);
            } else {
                stream.retire(h, Some(&mut self.sched));
            }
        }
        self.on_screen = stream.ring_mut().acquire(f);
        if let Some(&i) = self.metric_index.get(&f) {
            self.metrics.shown(i, Instant::now());
        }
    }

    /// The figures of the run (its engine's counters, CPU time, the disks' counters).
    fn into_result(mut self, cfg: &BenchConfig) -> BenchResult {
        let engine = self.opened.stream.engine();
        if let Some(l) = self.sampler.as_mut() {
            l.tick(self.start.elapsed(), engine.counters(), true);
        }
        let total_time_s = self.start.elapsed().as_secs_f64();
        let cpu_end = crate::probe::cpu_times();
        let disk_util = diskstats::disk_util(
            &self.disks,
            &self.disks_before,
            &diskstats::sample(&self.disks),
            total_time_s * 1e3,
        );
        let summary = self.metrics.summary();
        let c = engine.counters();
        let ops = c.ops.load(Ordering::Relaxed);
        let lat = c.latency_ns.load(Ordering::Relaxed);
        let cufile = engine.cufile_stats().map(CuFileStatsJson::from);
        let Opened {
            gpu,
            slot_plan,
            info,
            notes,
            ..
        } = &self.opened;
        self.errors.sort_by_key(|e| std::cmp::Reverse(e.count));
        BenchResult {
            requested_engine: info.requested.name().into(),
            engine: info.active.name().into(),
            mode: info.mode.clone(),
            fallback: info.fallback.clone(),
            notes: notes.clone(),
            xfer_type: info.active.xfer_type().into(),
            gpu: gpu
                .as_ref()
                .map(|g| format!("{} ({}) #{}", g.name, g.pci_bus_id, g.ordinal)),
            threads: cfg.threads,
            io_size: cfg.io_size,
            queue_depth: cfg.queue_depth,
            slots: slot_plan.slots,
            slot_plan: slot_plan.clone(),
            cold: cfg.cold,
            ops,
            op_errors: c.errors.load(Ordering::Relaxed),
            io_bytes: c.bytes.load(Ordering::Relaxed),
            avg_latency_us: if ops > 0 {
                lat as f64 / ops as f64 / 1e3
            } else {
                0.0
            },
            read_lat_ns: report::LatencyNs::from_histogram(&c.latency, lat, ops),
            usr_cpu_s: (cpu_end.0 - self.cpu_start.0).max(0.0),
            sys_cpu_s: (cpu_end.1 - self.cpu_start.1).max(0.0),
            planned_bytes: if self.planned_bytes == 0 {
                summary.bytes
            } else {
                self.planned_bytes
            },
            total_time_s,
            summary,
            cufile,
            verify: self.verify.take(),
            lanes: lane_shares(self.source, self.metrics.frames().iter().map(|f| f.frame)),
            disk_util,
            log: self.sampler.take().map(|l| l.samples).unwrap_or_default(),
            frames: self.metrics.frames().to_vec(),
            failed_frames: self.failed_frames,
            errors: std::mem::take(&mut self.errors),
        }
    }
}

/// The frames of a run that timed out with reads still out, by slot, with their time-outs.
#[derive(Default)]
struct HeldFrames(BTreeMap<usize, (u32, IngestError)>);

impl HeldFrames {
    fn insert(&mut self, slot: usize, frame: u32, e: IngestError) {
        self.0.insert(slot, (frame, e));
    }
    fn remove(&mut self, slot: usize) {
        self.0.remove(&slot);
    }
    /// The run's error when it ends with such frames; `None` when no read is still out.
    fn abandon(&mut self) -> Option<IngestError> {
        let frames = self.0.len();
        // The first frame whose own read does not answer names the lane best.
        let first = std::mem::take(&mut self.0)
            .into_values()
            .min_by_key(|(f, e)| {
                let behind = matches!(
                    e,
                    IngestError::TimedOut {
                        behind: Some(_),
                        ..
                    }
                );
                (behind, *f)
            })?
            .1;
        Some(IngestError::Abandoned {
            frames,
            why: "no other read is out, so the run stops".into(),
            first: Box::new(first),
        })
    }
}
