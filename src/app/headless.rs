//! `supercell play --headless`: the coordinator ([`crate::app::gpus::MultiPlayer`]: one
//! GPU, several, or several ranks) with offscreen targets, for measurements. Each path
//! plays `frames` frames as fast as they arrive, then makes timed jumps to random frames
//! (scrub latency), and the figures go to JSON.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::core::{FrameFaultKind, PathReport, PathSel, PlayError, Player};
use super::stats::PathFigures;
use crate::probe::{cpu_seconds, percentile, rss_bytes};

/// Version tag of the JSON written by headless runs.
pub const SCHEMA: &str = "supercell-play-headless/2";

/// What a headless run does.
#[derive(Clone, Debug)]
pub struct HeadlessOptions {
    /// Frames to show per path.
    pub frames: u64,
    /// Paths, in order.
    pub paths: Vec<PathSel>,
    /// Timed jumps per path (at least 10 are reported as meaningful).
    pub scrub_jumps: usize,
    /// Give up on a path's playback after this long, and on its jumps after as long again
    /// (each phase has its own budget: slow playback does not eat the jumps' time).
    pub timeout: Duration,
}

/// What a headless run is doing, for a progress display.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The path being measured.
    pub path: PathSel,
    /// Playing (frames) or jumping (scrubs).
    pub phase: Phase,
    /// Frames rendered or jumps landed so far.
    pub done: u64,
    /// Frames or jumps planned.
    pub planned: u64,
}

/// The two phases of a path's headless run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Playing `frames` frames as fast as they arrive.
    Playing,
    /// Timed jumps to random frames.
    Scrubbing,
}

/// Scrub latency of one path: jump → exact frame shown.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ScrubReport {
    /// Timeline made.
    pub jumps: usize,
    /// Targets, in order.
    pub targets: Vec<u32>,
    /// Every latency, ms.
    pub latencies_ms: Vec<f64>,
    /// Mean, ms.
    pub mean_ms: f64,
    /// Median, ms.
    pub p50_ms: f64,
    /// Largest, ms.
    pub max_ms: f64,
    /// The bound to compare with: bytes per frame ÷ the path's mean GB/s + 20 ms.
    pub bound_ms: Option<f64>,
    /// Whether every jump landed on exactly its target.
    pub exact: bool,
    /// Several GPUs (or ranks): a jump while playing, whether its target was the next frame
    /// presented and playback went on in order from it (`None`: not made).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub playing_exact: Option<bool>,
}

/// Memory at the start and end of a path's run.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct MemoryReport {
    /// Resident set of this process, bytes, at the start.
    pub rss_start: u64,
    /// At the end.
    pub rss_end: u64,
    /// GPU memory in use, bytes, where a source gives it (see `gpu_memory_source`).
    pub gpu_used_start: Option<u64>,
    /// At the end.
    pub gpu_used_end: Option<u64>,
    /// Where `gpu_used_*` come from: "CUDA" (the device, all processes), "Vulkan memory
    /// budget: heap usage" (this process, device-local heaps) or "wgpu allocator" (this
    /// device's allocations through wgpu); `None` when no source gives a figure.
    pub gpu_memory_source: Option<&'static str>,
    /// GPU buffers the player allocated for frames (slots, upload buffers), bytes.
    pub player_gpu_buffers: u64,
}

/// One path's results.
#[derive(Clone, Debug, Serialize)]
pub struct PathRun {
    /// Availability and mode (engine, fallback reason, cuFile mode).
    pub info: PathReport,
    /// Whether the run completed.
    pub ran: bool,
    /// Why it did not, or what went wrong.
    pub error: Option<String>,
    /// Figures of the playback part (scrubs excluded).
    pub figures: Option<PathFigures>,
    /// Scrub latency.
    pub scrub: Option<ScrubReport>,
    /// Wall seconds of the playback part.
    pub wall_s: f64,
    /// CPU seconds (user + system, whole process) during playback.
    pub cpu_s: f64,
    /// CPU use during playback, percent of one core.
    pub cpu_percent: f64,
    /// Memory.
    pub memory: MemoryReport,
    /// Frames that could not be shown on this path during its run.
    pub faults: FaultReport,
    /// The render mode and, path-tracing, the refinement at the end of the run.
    pub render: RenderReport,
    /// With `--gpus`: each GPU's figures and all together, and the frames presented.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpus: Option<GpusRun>,
}

impl PathRun {
    /// A path's entry before it runs: its report, nothing measured yet.
    pub fn not_run(info: PathReport) -> Self {
        PathRun {
            info,
            ran: false,
            error: None,
            figures: None,
            scrub: None,
            wall_s: 0.0,
            cpu_s: 0.0,
            cpu_percent: 0.0,
            memory: MemoryReport::default(),
            faults: FaultReport::default(),
            render: RenderReport::default(),
            gpus: None,
        }
    }
}

/// One GPU's figures over a path's run.
#[derive(Clone, Debug, Serialize)]
pub struct GpuRun {
    /// Index in `--gpus` (GPU 0 is the display).
    pub index: usize,
    /// The ordinal named.
    pub ordinal: usize,
    /// The MPI rank that plays it (across ranks, where a rank may play several GPUs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// The host of the rank that runs it (across MPI ranks, where GPU `k` is rank `k`'s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Its wgpu adapter.
    pub device: String,
    /// How the adapter was chosen for the ordinal.
    pub matched: String,
    /// The path as this GPU runs it (engine, fallback).
    pub label: String,
    /// Frames of the dataset this GPU owns.
    pub frames_owned: usize,
    /// This GPU's player's figures: GB/s read, frames/s rendered, latencies.
    pub figures: PathFigures,
    /// Frames of this GPU presented.
    pub frames_presented: u64,
    /// Images copied to the display GPU.
    pub copies: usize,
    /// Mean copy time (read back + upload), ms.
    pub copy_ms_mean: Option<f64>,
    /// Longest copy, ms.
    pub copy_ms_max: Option<f64>,
    /// Copy rate, GB/s (image bytes over copy time).
    pub copy_gbps: Option<f64>,
    /// Frame faults of this GPU (rank) on the path (read errors, time-outs, damaged
    /// headers), each in the run's `faults` with its rank and host across ranks.
    pub faults: u64,
    /// Frames of this GPU (in the dataset's numbers) marked damaged at the end.
    pub damaged_frames: Vec<u32>,
    /// Errors its player saw and played on past (another rank's too).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

/// All GPUs together over a path's run.
#[derive(Clone, Debug, Serialize)]
pub struct GpusTotal {
    /// GB/s read, summed over GPUs (each its mean over the run).
    pub gbps_mean: f64,
    /// Frames rendered, all GPUs.
    pub frames_rendered: u64,
    /// Frames rendered per second, summed over GPUs.
    pub rendered_fps: f64,
    /// Frames presented.
    pub frames_presented: u64,
    /// Frames presented per second of the run.
    pub presented_fps: f64,
    /// Mean copy time over every copy, ms.
    pub copy_ms_mean: Option<f64>,
}

/// The GPUs of a path's run (`paths[].gpus` in the JSON of `play --headless --gpus`;
/// made by `app::gpus`).
#[derive(Clone, Debug, Serialize)]
pub struct GpusRun {
    /// How finished images reach the display GPU.
    pub display_copy: String,
    /// Per GPU.
    pub gpus: Vec<GpuRun>,
    /// All together.
    pub total: GpusTotal,
    /// The frames presented during playback, in order (at most 10000).
    pub presented: Vec<u32>,
    /// The GPU of each.
    pub presented_by: Vec<usize>,
    /// Whether playback presented each frame after the one before in play order (wrapping
    /// at the end of a looping timeline, turning at the ends of a ping-pong one): none left
    /// out, none twice, none out of order.
    pub in_order: bool,
}

/// The render mode of a run and, path-tracing, where its refinement stood at the end.
#[derive(Clone, Debug, Default, Serialize)]
pub struct RenderReport {
    /// "shaded", "mip", "iso" or "path" (the scene's `mode`).
    pub mode: String,
    /// Path mode: samples per pixel in the picture on screen at the end of the run.
    pub path_samples: Option<u32>,
    /// Path mode: samples per pixel the renders added a second over the run's last second.
    pub path_samples_per_second: Option<f64>,
    /// Path mode: "refining", "converged", "playing" or "view changing" at the end.
    pub path_state: Option<String>,
}

impl RenderReport {
    pub(crate) fn of(player: &Player) -> RenderReport {
        let state = player.tracer_state();
        RenderReport {
            mode: super::figures::render_mode_name(player.render_mode()).to_string(),
            path_samples: state.map(|_| player.tracer_samples()),
            path_samples_per_second: state.map(|_| player.tracer_samples_per_second()),
            path_state: state.map(str::to_string),
        }
    }
}

/// The faults of a run: every frame that could not be shown, and where and why.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FaultReport {
    /// Frame faults (read errors, time-outs, damaged headers).
    pub count: u64,
    /// Frames still marked damaged at the end.
    pub damaged_frames: Vec<u32>,
    /// Damaged frames that played later (their lane came back).
    pub recovered_frames: u64,
    /// The faults, oldest first (the player keeps the latest 1000).
    pub faults: Vec<super::core::FrameFault>,
}

impl FaultReport {
    /// The faults `player` recorded on `sel` since it had counted `since` faults and
    /// `recovered_since` recoveries.
    pub fn since(player: &Player, sel: PathSel, since: u64, recovered_since: u64) -> FaultReport {
        let kept: Vec<_> = player.faults().collect();
        FaultReport::of_log(
            &kept,
            (player.fault_count(), player.recovered_frames()),
            sel,
            (since, recovered_since),
            player.damaged_frames().keys().copied().collect(),
        )
    }

    /// The faults on `sel` of a log that keeps the latest faults `kept` (oldest first) and
    /// counted `now` (faults, recovered frames), since it had counted `since`; `damaged`:
    /// the frames marked damaged now.
    pub fn of_log(
        kept: &[&super::core::FrameFault],
        now: (u64, u64),
        sel: PathSel,
        since: (u64, u64),
        damaged_frames: Vec<u32>,
    ) -> FaultReport {
        let new = now.0.saturating_sub(since.0) as usize;
        let faults: Vec<_> = kept[kept.len().saturating_sub(new)..]
            .iter()
            .filter(|f| f.path == sel)
            .map(|f| (*f).clone())
            .collect();
        FaultReport {
            count: faults.len() as u64,
            damaged_frames,
            recovered_frames: now.1.saturating_sub(since.1),
            faults,
        }
    }
}

/// The machine a run was made on.
#[derive(Clone, Debug, Serialize)]
pub struct MachineReport {
    /// Host name.
    pub hostname: String,
    /// CPU model.
    pub cpu: String,
    /// Logical CPUs.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: String,
    /// wgpu adapter.
    pub adapter: String,
    /// CUDA availability (or why not).
    pub cuda: String,
}

/// The dataset a run played.
#[derive(Clone, Debug, Serialize)]
pub struct DatasetReport {
    /// Path given on the command line, or the built-in dataset's directory.
    pub path: String,
    /// Frames.
    pub frames: u32,
    /// Lanes.
    pub lanes: usize,
    /// Attribute names shown.
    pub attributes: Vec<String>,
    /// Mean slot-image bytes per frame.
    pub bytes_per_frame: f64,
    /// Total bytes.
    pub total_bytes: u64,
}

/// What `--json` writes.
#[derive(Clone, Debug, Serialize)]
pub struct HeadlessReport {
    /// [`SCHEMA`].
    pub schema: String,
    /// UTC date and time, ISO 8601.
    pub date: String,
    /// Machine.
    pub machine: MachineReport,
    /// The scene played: the scene file or dataset directory given (a dataset plays with
    /// its default look), or `built-in scenes/storm.toml` (compiled into the binary).
    pub scene: String,
    /// Dataset.
    pub dataset: DatasetReport,
    /// Image size.
    pub size: [u32; 2],
    /// Ring slots per path.
    pub slots: usize,
    /// How many slots, of what parts, the memory they take, and why that many.
    pub slot_plan: crate::gpu::SlotPlan,
    /// Frames asked for per path.
    pub frames_per_path: u64,
    /// One entry per path asked for (none in a `--soak` run).
    pub paths: Vec<PathRun>,
    /// The long run, with `--soak`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<super::soak::SoakReport>,
    /// The settings chosen for this adapter (the software defaults, with their `note`, on
    /// a software adapter).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings: Option<super::software::Interactive>,
}

/// Seconds since the Unix epoch as ISO 8601 UTC (days-to-civil, proleptic Gregorian).
pub fn iso8601(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let secs = unix % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn first_line_with(path: &str, key: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let l = s.lines().find(|l| l.starts_with(key))?;
    Some(l.split_once(':')?.1.trim().to_string())
}

/// Describes this machine.
pub fn machine(adapter: String) -> MachineReport {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    MachineReport {
        hostname: read("/proc/sys/kernel/hostname"),
        cpu: first_line_with("/proc/cpuinfo", "model name").unwrap_or_default(),
        cpus: std::thread::available_parallelism().map_or(1, |n| n.get()),
        kernel: read("/proc/sys/kernel/osrelease"),
        adapter,
        cuda: match crate::gpu::cuda_probe() {
            Ok(()) => "available".into(),
            Err(e) => format!("unavailable: {e}"),
        },
    }
}

/// A small deterministic generator for scrub targets (the same jumps on every path).
pub(crate) struct Lcg(pub(crate) u64);
impl Lcg {
    pub(crate) fn next(&mut self, n: u32) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % u64::from(n.max(1))) as u32
    }
}

/// "(--timeout 300 s; 2.5 s per rendered frame here)": what a time-out message adds so
/// that the reader sees whether the adapter or the storage was slow (`player`'s figures).
pub(crate) fn timeout_context(player: &Player, sel: PathSel, timeout: Duration) -> String {
    let f = player.figures(sel);
    // Slots held by reads that timed out are what a lane that stopped leaves behind: say
    // which read, so the message points at the lane rather than at the player.
    let held = match player.held_slots() {
        0 => String::new(),
        n => {
            let stuck = player
                .faults()
                .filter(|f| f.path == sel && f.kind == FrameFaultKind::Timeout)
                .last()
                .map_or(String::new(), |f| format!(": {}", f.message));
            format!("; {n} slot(s) held by reads that got no answer within --read-timeout{stuck}")
        }
    };
    timeout_line(timeout, f.rendered_fps, player.last_gpu_ms(), held)
}

/// The time-out context of [`timeout_context`] from figures: frames rendered a second, the
/// last render's GPU time (ms) where known, and what holds the slots (`held`).
pub(crate) fn timeout_line(
    timeout: Duration,
    rendered_fps: f64,
    last_gpu_ms: Option<f64>,
    held: String,
) -> String {
    let per_frame = match last_gpu_ms {
        Some(ms) => format!("; the last render took {:.1} s", ms / 1e3),
        None if rendered_fps > 0.0 => format!("; {:.1} s per frame", 1.0 / rendered_fps),
        None => String::new(),
    };
    format!("--timeout {:.0} s{per_frame}{held}", timeout.as_secs_f64())
}

/// Plays `frames` frames on `sel` as fast as they come (at most `timeout`), telling
/// `progress`.
pub(crate) fn play_frames(
    player: &mut dyn Timeline,
    sel: PathSel,
    frames: u64,
    timeout: Duration,
    progress: &mut dyn FnMut(Progress),
) -> Result<(), PlayError> {
    let deadline = Instant::now() + timeout;
    let mut reported = u64::MAX;
    let start = player.frames_done(sel);
    loop {
        let done = player.frames_done(sel) - start;
        if done != reported {
            reported = done;
            progress(Progress {
                path: sel,
                phase: Phase::Playing,
                done: done.min(frames),
                planned: frames,
            });
        }
        if done >= frames {
            // The last frame's render counted in the figures, and in the run's time.
            return player.finish_renders();
        }
        if Instant::now() > deadline {
            return Err(PlayError::Usage(format!(
                "timed out after {done} of {frames} frames ({})",
                player.timeout_context(sel, timeout)
            )));
        }
        if player.tick_shown()?.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
}

/// What a headless run needs of a timeline: the coordinator,
/// [`crate::app::gpus::MultiPlayer`], of one GPU, several, or several ranks;
/// [`play_frames`] and [`scrub_jumps`] are written against it.
pub(crate) trait Timeline {
    /// Frames done on `sel` so far: presented.
    fn frames_done(&self, sel: PathSel) -> u64;
    /// Frames on the timeline.
    fn frame_count(&self) -> u32;
    /// Starts or stops playback.
    fn set_playing(&mut self, playing: bool);
    /// Timeline to `frame`.
    fn scrub(&mut self, frame: u32);
    /// Advances once: the frame newly shown, if any.
    fn tick_shown(&mut self) -> Result<Option<u32>, PlayError>;
    /// The frame on screen.
    fn shown_frame(&self) -> Option<u32>;
    /// Whether a jump has not landed yet.
    fn scrub_pending(&self) -> bool;
    /// Waits a little for reads to land.
    fn wait(&mut self, timeout: Duration);
    /// The latency of the last jump, ms.
    fn last_scrub_ms(&self) -> Option<f64>;
    /// Faults counted so far (a jump's target may fail to read).
    fn fault_count(&self) -> u64;
    /// Whether the jump to `target` cannot land: its frame failed to read (since
    /// `faults_before`, or before, the playhead already on it).
    fn target_damaged(&self, target: u32, faults_before: u64) -> bool;
    /// What a time-out message adds on `sel` after `timeout`.
    fn timeout_context(&self, sel: PathSel, timeout: Duration) -> String;
    /// Waits for the renders in flight (they count in the figures once finished).
    fn finish_renders(&mut self) -> Result<(), PlayError>;
}

/// `jumps` timed jumps to pseudo-random frames (the same targets on every run), paused:
/// each lands when its exact frame is shown; playback is left playing.
pub(crate) fn scrub_jumps(
    player: &mut dyn Timeline,
    sel: PathSel,
    jumps: usize,
    timeout: Duration,
    progress: &mut dyn FnMut(Progress),
) -> Result<ScrubReport, PlayError> {
    let deadline = Instant::now() + timeout;
    player.set_playing(false);
    let n = player.frame_count();
    let mut rng = Lcg(0x5eed);
    let mut report = ScrubReport {
        exact: true,
        ..Default::default()
    };
    for jump in 0..jumps {
        progress(Progress {
            path: sel,
            phase: Phase::Scrubbing,
            done: jump as u64,
            planned: jumps as u64,
        });
        let mut target = rng.next(n);
        if n > 1 && Some(target) == player.shown_frame() {
            target = (target + 1) % n;
        }
        player.scrub(target);
        let start = Instant::now();
        let faults0 = player.fault_count();
        loop {
            // The target could not be read (this time, or before, when the playhead is
            // already on it): that jump has no latency to report, and nothing else to
            // wait for.
            if player.target_damaged(target, faults0) {
                break;
            }
            if Instant::now() > deadline {
                return Err(PlayError::Usage(format!(
                    "scrub to frame {target} (jump {} of {jumps}) did not land in time ({})",
                    jump + 1,
                    player.timeout_context(sel, timeout)
                )));
            }
            let shown = player.tick_shown()?;
            if !player.scrub_pending() && player.shown_frame() == Some(target) {
                break;
            }
            if shown.is_some_and(|f| f != target) {
                report.exact = false;
            }
            if shown.is_none() {
                player.wait(Duration::from_millis(1));
            }
        }
        if player.shown_frame() != Some(target) {
            continue;
        }
        let ms = player
            .last_scrub_ms()
            .unwrap_or_else(|| start.elapsed().as_secs_f64() * 1e3);
        report.targets.push(target);
        report.latencies_ms.push(ms);
    }
    let mut sorted = report.latencies_ms.clone();
    sorted.sort_by(f64::total_cmp);
    report.jumps = sorted.len();
    report.mean_ms = if sorted.is_empty() {
        0.0
    } else {
        sorted.iter().sum::<f64>() / sorted.len() as f64
    };
    report.p50_ms = percentile(&sorted, 0.5);
    report.max_ms = sorted.last().copied().unwrap_or(0.0);
    player.set_playing(true);
    Ok(report)
}

/// What a headless run of each path needs of what plays, besides its [`Timeline`]: the
/// coordinator's steps ([`crate::app::gpus::MultiPlayer`], of one GPU, several, or several
/// ranks). [`run_each_path`] is written against it.
pub(crate) trait PathRuns: Timeline {
    /// The counters a path's run is measured from, taken before the path is switched to.
    type Mark;
    /// GPUs playing (1 for one GPU's player).
    fn gpu_count(&self) -> usize;
    /// The path's availability and mode (GPU 0's where there are several).
    fn path_report(&self, sel: PathSel) -> PathReport;
    /// Switches to `sel`, or says why not.
    fn set_path(&mut self, sel: PathSel) -> Result<(), String>;
    /// Playback speed (`None`: as fast as frames come).
    fn set_speed(&mut self, fps: Option<f64>);
    /// Clears `sel`'s statistics on every GPU.
    fn reset_stats(&mut self, sel: PathSel);
    /// The counters now.
    fn mark(&mut self) -> Self::Mark;
    /// What memory says at the start of a path's playback (besides the RSS).
    fn memory_start(&self, _memory: &mut MemoryReport) {}
    /// Records the playback part's figures in `run` after `played` (its outcome), and the
    /// outcome with what recording them found.
    fn record_play(
        &mut self,
        sel: PathSel,
        mark: &Self::Mark,
        run: &mut PathRun,
        played: Result<(), String>,
    ) -> Result<(), String>;
    /// The timed jumps of the path's run.
    fn timed_jumps(
        &mut self,
        sel: PathSel,
        opts: &HeadlessOptions,
        progress: &mut dyn FnMut(Progress),
    ) -> Result<ScrubReport, String>;
    /// What memory says at the end of a path's run (besides the RSS).
    fn memory_end(&self, memory: &mut MemoryReport);
    /// The faults on `sel` since `mark`.
    fn faults_since(&self, sel: PathSel, mark: &Self::Mark) -> FaultReport;
    /// The render mode at the end of the run.
    fn render_report(&self) -> RenderReport;
    /// An error of the whole run that the path's run did not return.
    fn run_error(&self) -> Option<String> {
        None
    }
}

/// Runs each path of `opts` on `play`: frames played as fast as they come, then timed
/// jumps; one [`PathRun`] per path (one GPU's and several GPUs' runs alike).
pub(crate) fn run_each_path<T: PathRuns>(
    play: &mut T,
    opts: &HeadlessOptions,
    progress: &mut dyn FnMut(Progress),
) -> Vec<PathRun> {
    let mut runs = Vec::new();
    for &sel in &opts.paths {
        let mut run = PathRun::not_run(play.path_report(sel));
        let mark = play.mark();
        if let Err(why) = play.set_path(sel) {
            log::info!("play: {} path unavailable: {why}", sel.name());
            run.error = Some(why);
            runs.push(run);
            continue;
        }
        let on = match play.gpu_count() {
            1 => String::new(),
            n => format!(" on {n} GPUs"),
        };
        log::info!(
            "play: {} path ({}){on} for {} frames",
            sel.name(),
            run.info.label,
            opts.frames
        );
        play.set_playing(true);
        play.set_speed(None);
        play.reset_stats(sel);
        run.memory.rss_start = rss_bytes();
        play.memory_start(&mut run.memory);
        let (cpu0, t0) = (cpu_seconds(), Instant::now());
        let played =
            play_frames(play, sel, opts.frames, opts.timeout, progress).map_err(|e| e.to_string());
        run.wall_s = t0.elapsed().as_secs_f64();
        run.cpu_s = cpu_seconds() - cpu0;
        run.cpu_percent = if run.wall_s > 0.0 {
            run.cpu_s / run.wall_s * 100.0
        } else {
            0.0
        };
        let played = play.record_play(sel, &mark, &mut run, played);
        match played.and_then(|()| play.timed_jumps(sel, opts, progress)) {
            Ok(mut s) => {
                s.bound_ms = run.figures.as_ref().and_then(|f| {
                    (f.gbps_mean > 0.0)
                        .then(|| f.bytes_per_frame / (f.gbps_mean * 1e9) * 1e3 + 20.0)
                });
                run.scrub = Some(s);
                run.ran = true;
            }
            Err(e) => run.error = Some(e),
        }
        run.memory.rss_end = rss_bytes();
        play.memory_end(&mut run.memory);
        // Refresh: the cuFile mode is known only after reads.
        run.info = play.path_report(sel);
        run.faults = play.faults_since(sel, &mark);
        run.render = play.render_report();
        if let Some(e) = play.run_error() {
            run.error.get_or_insert(e);
        }
        runs.push(run);
    }
    runs
}

/// The human summary (stderr), of one GPU's run and of several GPUs' alike: the dataset
/// line, then [`paths_summary`].
pub fn summary(report: &HeadlessReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} frames of {:.1} MB, {} frames/path at {}x{}, {} slots, adapter {}",
        report.dataset.frames,
        report.dataset.bytes_per_frame / 1e6,
        report.frames_per_path,
        report.size[0],
        report.size[1],
        report.slots,
        report.machine.adapter
    );
    s + &paths_summary(&report.paths)
}

/// The summary's lines for each path: one GPU is the case without `gpus` (its figures on
/// the path's line); several GPUs or ranks put the total on the path's line and a line per
/// GPU under it. Scrub, fallback, upload, error and fault lines are the same for both.
pub fn paths_summary(runs: &[PathRun]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for r in runs {
        let name = r.info.path.name();
        if !r.info.available {
            let _ = writeln!(
                s,
                "  {name:<6} unavailable: {}",
                r.info.unavailable_reason.as_deref().unwrap_or("?")
            );
            continue;
        }
        match (&r.gpus, &r.figures) {
            // One GPU: its figures on the path's line, as its run has them.
            (g, Some(f)) if g.as_ref().is_none_or(|g| g.gpus.len() == 1) => {
                one_gpu_line(&mut s, r, f);
            }
            (Some(g), _) => super::gpus::summary_lines(&mut s, name, g),
            (None, _) => {}
        }
        if let Some(sc) = &r.scrub {
            let _ = writeln!(
                s,
                "         scrub: {} jumps, mean {:.1} ms, p50 {:.1} ms, max {:.1} ms (bound {}){}{}",
                sc.jumps,
                sc.mean_ms,
                sc.p50_ms,
                sc.max_ms,
                sc.bound_ms.map_or("n/a".into(), |b| format!("{b:.1} ms")),
                if sc.exact { "" } else { ", NOT exact" },
                match sc.playing_exact {
                    Some(true) => ", a jump while playing exact",
                    Some(false) => ", a jump while playing NOT exact",
                    None => "",
                }
            );
        }
        if let Some(fb) = &r.info.fallback {
            let _ = writeln!(s, "         fallback: {fb}");
        }
        if let Some(u) = &r.info.upload {
            let _ = writeln!(s, "         to the GPU: {u}");
        }
        if let Some(e) = &r.error {
            let _ = writeln!(s, "         error: {e}");
        }
        if r.faults.count > 0 {
            let _ = writeln!(
                s,
                "         faults: {} ({} frames damaged at the end, {} recovered); first: {}",
                r.faults.count,
                r.faults.damaged_frames.len(),
                r.faults.recovered_frames,
                r.faults
                    .faults
                    .first()
                    .map_or("?".to_string(), |f| match (f.rank, &f.host) {
                        (Some(rank), Some(host)) => format!(
                            "frame {} on rank {rank} (on {host}): {}",
                            f.frame, f.message
                        ),
                        _ => f.message.clone(),
                    })
            );
        }
    }
    s
}

/// One GPU's path line: its figures (and, where the coordinator found them out of order,
/// says so).
fn one_gpu_line(s: &mut String, r: &PathRun, f: &PathFigures) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "  {:<6} {:<10} {:6.2} GB/s avg (peak {}; {}), delivered {:.1} frames/s avg, rendered {:.1} frames/s avg{}, latency p50 {:.1} ms p99 {:.1} ms, CPU {:.0}%{}{}",
        r.info.path.name(),
        r.info.label,
        f.gbps_mean,
        super::figures::peak_text(f.gbps_peak),
        super::figures::warm_up_text(f),
        f.delivered_fps,
        f.rendered_fps,
        f.gpu_ms_per_frame
            .map_or(String::new(), |ms| format!(" ({ms:.1} GPU ms)")),
        f.latency_p50_ms,
        f.latency_p99_ms,
        r.cpu_percent,
        f.upload_gbps
            .map_or(String::new(), |g| format!(", upload {g:.2} GB/s")),
        if r.gpus.as_ref().is_some_and(|g| !g.in_order) {
            ", NOT in order"
        } else {
            ""
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_dates() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(iso8601(1_796_012_656), "2026-11-30T04:24:16Z");
    }

    fn host_run() -> PathRun {
        let mut run = PathRun::not_run(PathReport {
            path: PathSel::Host,
            available: true,
            unavailable_reason: None,
            label: "staged".into(),
            engine: None,
            mode: None,
            fallback: None,
            cufile_mode: None,
            slots: 3,
            upload: None,
            notes: Vec::new(),
        });
        run.scrub = Some(ScrubReport {
            jumps: 2,
            mean_ms: 3.0,
            p50_ms: 2.5,
            max_ms: 4.0,
            exact: true,
            ..Default::default()
        });
        run
    }

    /// One GPU's host run: its figures and CPU use.
    fn one_gpu_run() -> PathRun {
        let mut one = host_run();
        one.figures = Some(PathFigures {
            gbps_mean: 1.5,
            ..Default::default()
        });
        one.cpu_percent = 40.0;
        one
    }

    fn row(index: usize, host: Option<&str>) -> GpuRun {
        GpuRun {
            index,
            ordinal: index,
            rank: host.map(|_| index),
            host: host.map(str::to_string),
            device: "lavapipe".into(),
            matched: String::new(),
            label: "staged".into(),
            frames_owned: 2,
            figures: PathFigures::default(),
            frames_presented: 2,
            copies: 0,
            copy_ms_mean: None,
            copy_ms_max: None,
            copy_gbps: None,
            faults: 0,
            damaged_frames: Vec::new(),
            errors: Vec::new(),
        }
    }

    fn gpus_of(rows: Vec<GpuRun>) -> GpusRun {
        let n = rows.len();
        GpusRun {
            display_copy: String::new(),
            gpus: rows,
            total: GpusTotal {
                gbps_mean: 3.0,
                frames_rendered: 2 * n as u64,
                rendered_fps: 8.0,
                frames_presented: 2 * n as u64,
                presented_fps: 8.0,
                copy_ms_mean: None,
            },
            presented: (0..2 * n as u32).collect(),
            presented_by: (0..2 * n).map(|i| i % n).collect(),
            in_order: true,
        }
    }

    /// One GPU through the coordinator has its figures and a row of one GPU: the summary
    /// reads as one GPU's did (its figures on the path's line, no table of one).
    #[test]
    fn one_gpu_through_the_coordinator_reads_as_one_gpu() {
        let mut one = one_gpu_run();
        let alone = paths_summary(std::slice::from_ref(&one));
        one.gpus = Some(gpus_of(vec![row(0, None)]));
        assert_eq!(paths_summary(std::slice::from_ref(&one)), alone);
        // Out of order is said where the one GPU's row says so.
        if let Some(g) = &mut one.gpus {
            g.in_order = false;
        }
        let text = paths_summary(&[one]);
        assert!(
            text.lines().next().unwrap().ends_with(", NOT in order"),
            "{text}"
        );
    }

    #[test]
    fn one_gpu_and_several_share_the_summary_lines() {
        let one = one_gpu_run();
        let text = paths_summary(&[one]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("  host   staged       1.50 GB/s avg (peak "),
            "{text}"
        );
        assert!(lines[0].ends_with(", CPU 40%"), "{text}");
        assert_eq!(
            lines[1],
            "         scrub: 2 jumps, mean 3.0 ms, p50 2.5 ms, max 4.0 ms (bound n/a)"
        );

        let mut many = host_run();
        if let Some(sc) = &mut many.scrub {
            sc.playing_exact = Some(true);
        }
        many.gpus = Some(gpus_of(vec![row(0, Some("a")), row(1, Some("b"))]));
        let text = paths_summary(&[many]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("  host   2 GPUs: 3.00 GB/s"), "{text}");
        assert!(lines[1].contains("rank 0 (on a, GPU 0, staged)"), "{text}");
        assert!(lines[2].contains("rank 1 (on b, GPU 1, staged)"), "{text}");
        assert!(
            lines[3].starts_with("         scrub: 2 jumps, mean 3.0 ms, p50 2.5 ms"),
            "{text}"
        );
        assert!(lines[3].ends_with(", a jump while playing exact"), "{text}");
    }
}
