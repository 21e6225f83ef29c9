//! The player core, without a window: dataset, scheduler, the two frame paths, the renderer
//! and per-path statistics. The window and the headless run both drive [`Player::tick`].
//!
//! Frame paths:
//! - *direct*: GDS engine (falling back to staged, with the reason) into ring slots that are
//!   wgpu buffers CUDA writes (see [`super::direct`]); a frame is shown by binding its slot.
//! - *host*: cpu-only engine (io_uring, O_DIRECT where the file system allows; portable,
//!   with the reason, where it cannot open) into page-aligned host slots; a frame is shown by
//!   copying its bytes with rayon into a persistently mapped staging buffer, a GPU copy into
//!   one of two upload buffers, then binding that (see [`Staging`]).
//!
//! Overlap: a render is submitted without waiting ([`Renderer::submit_timed`]); the next
//! frame's host-side work (the host path's copy into staging, reads landing) runs while the
//! GPU renders, and the player waits for that render only just before it submits the next
//! one. One render is in flight at a time.
//!
//! Slot lifetime: the shown frame's slot is `InUse` until the render that reads it has
//! finished and the next frame's render has been submitted with other buffers, so no slot is
//! rewritten while a render still reads it. Every previously shown frame is evicted as the
//! next one appears, so playback streams from storage even when the dataset fits in the ring
//! (a benchmark must not turn into a cache).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::direct::{DirectSlots, no_sharing_reason, open_direct_slots};
use super::route::{Staging, copy_len, new_buffer};
use super::stats::{PathFigures, PathStats};
use crate::gpu::{FrameRing, SlotState, WgpuCrc};
use crate::ingest::{
    Engine, EngineConfig, FaultPlan, IngestEngine, IngestError, IoMode, PathInfo, PathKind,
    ReadProgress, ReadRequest, Source, open_engine,
};
use crate::pipeline::{Direction, FrameState, PlayMode, PlaybackConfig, Scheduler};
use crate::render::{RenderError, Renderer, View};
use crate::scene::{LoadedScene, Scene};

/// What can go wrong in the player.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    /// The scene or dataset could not be opened.
    #[error("{0}")]
    Scene(String),
    /// No GPU device, or the GPU reported an error.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// An ingest engine failed.
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
    /// The caller asked for something impossible.
    #[error("{0}")]
    Usage(String),
}

/// Which of the two frame paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSel {
    /// GPUDirect Storage (or staged CUDA copies) into shared GPU buffers.
    Direct,
    /// Reads into host memory, uploaded through wgpu.
    Host,
}

impl PathSel {
    /// "direct" or "host".
    pub fn name(self) -> &'static str {
        match self {
            PathSel::Direct => "direct",
            PathSel::Host => "host",
        }
    }
    fn index(self) -> usize {
        match self {
            PathSel::Direct => 0,
            PathSel::Host => 1,
        }
    }
    /// The other path.
    pub fn other(self) -> PathSel {
        match self {
            PathSel::Direct => PathSel::Host,
            PathSel::Host => PathSel::Direct,
        }
    }
}

/// How the host path moves a frame from its host slot to the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostCopy {
    /// The GPU copies from the host slots themselves where the device can import host
    /// memory (`VK_EXT_external_memory_host`); else as [`HostCopy::Staging`].
    #[default]
    Auto,
    /// The CPU copies each frame into a mapped staging buffer, then the GPU copies that.
    Staging,
}

/// Player settings.
#[derive(Clone, Debug)]
pub struct PlayerConfig {
    /// Attributes in slot order (default: the scene's).
    pub attributes: Option<Vec<String>>,
    /// Render size.
    pub width: u32,
    /// Render height.
    pub height: u32,
    /// Ring slots per path (default: from frame size and memory, at least 3).
    pub slots: Option<usize>,
    /// I/O threads per engine.
    pub threads: usize,
    /// Reads in flight per thread.
    pub queue_depth: usize,
    /// Largest read, bytes.
    pub io_size: usize,
    /// Start on this path (falls back to host when direct is unavailable).
    pub path: PathSel,
    /// The host path's route to the GPU.
    pub host_copy: HostCopy,
    /// End-of-timeline behaviour.
    pub mode: PlayMode,
    /// Playback rate; `None`: as fast as frames arrive.
    pub speed_fps: Option<f64>,
    /// Start playing.
    pub playing: bool,
    /// First frame.
    pub start_frame: u32,
    /// Check every extent's CRC-32 on arrival (`--verify`); a mismatching frame is not
    /// shown and its error is reported.
    pub verify: bool,
    /// Tests only: stand a second host-path engine in for the direct path (reported as
    /// "loopback (test)", never as direct), so the run-time toggle's drain and hand-over can
    /// be exercised on machines without CUDA.
    #[doc(hidden)]
    pub loopback_direct: bool,
    /// A frame whose reads make no progress for this long is marked damaged and playback
    /// goes on; `None`: wait forever.
    pub read_timeout: Option<Duration>,
    /// Faults to inject into the engines (tests, demonstrations); `None`: the plan in
    /// `SUPERCELL_FAULTS`, if any.
    pub faults: Option<Arc<FaultPlan>>,
    /// How the host engines read: io_uring where allowed (else pread), or pread.
    pub io_backend: crate::ingest::IoBackend,
}

/// Why a frame could not be shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameFaultKind {
    /// A read failed (an I/O error, an unexpected end of file, a cuFile error).
    Read,
    /// A lane did not answer within the read timeout.
    Timeout,
    /// The bytes arrived, but a grid header failed the structural check.
    Header,
}

impl FrameFaultKind {
    /// The word used in the overlay.
    pub fn name(self) -> &'static str {
        match self {
            FrameFaultKind::Read => "read error",
            FrameFaultKind::Timeout => "timeout",
            FrameFaultKind::Header => "damaged header",
        }
    }
}

/// A frame that could not be shown, and where and why: the overlay shows the latest, the
/// timeline marks the frame, the headless JSON lists them all.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct FrameFault {
    /// The frame.
    pub frame: u32,
    /// The path that read it.
    pub path: PathSel,
    /// What went wrong.
    pub kind: FrameFaultKind,
    /// The lane of the read or grid at fault, where known.
    pub lane: Option<u32>,
    /// The lane file, where known.
    pub file: Option<String>,
    /// The byte offset in that file, where known.
    pub offset: Option<u64>,
    /// The full message.
    pub message: String,
    /// Seconds since the player started.
    pub at_s: f64,
}

/// Faults kept for the overlay and the JSON (the count goes on past it).
const FAULTS_KEPT: usize = 1000;

impl Default for PlayerConfig {
    fn default() -> Self {
        PlayerConfig {
            attributes: None,
            width: 1280,
            height: 720,
            slots: None,
            threads: 4,
            queue_depth: 8,
            io_size: 1 << 20,
            path: PathSel::Direct,
            host_copy: HostCopy::Auto,
            mode: PlayMode::Loop,
            speed_fps: None,
            playing: true,
            start_frame: 0,
            verify: false,
            loopback_direct: false,
            read_timeout: Some(crate::ingest::DEFAULT_READ_TIMEOUT),
            faults: None,
            io_backend: crate::ingest::IoBackend::Auto,
        }
    }
}

/// One frame path: engine, ring, and the wgpu buffers frames are bound from.
struct FramePath {
    engine: Engine,
    ring: FrameRing,
    /// Direct: one buffer per ring slot (the same memory). Host with imports: one device
    /// buffer per ring slot (a copy). Host with staging: two upload buffers.
    buffers: Vec<wgpu::Buffer>,
    /// Host, where the device can import host memory: each ring slot as a GPU copy source
    /// (same index as the slot). The ranges of a frame are copied into `buffers[slot]` (a
    /// device buffer per slot) as their reads land, so the copy overlaps the read.
    imported: Vec<wgpu::Buffer>,
    /// Host with imports: the landed ranges of the frame being read into each slot.
    progress: Vec<Option<Arc<ReadProgress>>>,
    /// Host with imports: the last submission that copies from each slot. A slot can go
    /// back to Free without being shown (an aborted or failed read, an evicted read-ahead,
    /// a path switch); before the engine may write it again, that copy must be done.
    last_copy: Vec<Option<wgpu::SubmissionIndex>>,
    /// Host with imports and `--verify`: the CRC pass run on each frame's device buffer
    /// after its last copy (the engine then computes no CRCs on the CPU).
    gpu_crc: Option<WgpuCrc>,
    /// Host without imports: one staging buffer per upload buffer (same index); else none.
    staging: Vec<Staging>,
    /// Host: how frames reach the GPU, for the report.
    upload_route: Option<String>,
    next_upload: usize,
    /// Requested by the scheduler, not yet submitted (waiting for a free slot).
    pending: VecDeque<(u32, Instant)>,
    /// Slots whose writes were issued before the path was last left: their frames are
    /// dropped on arrival.
    stale: HashSet<usize>,
    /// Slots whose frame timed out while reads into them were still out: reserved until
    /// the engine releases them ([`IngestError::Released`]).
    held: HashSet<usize>,
    info: PathInfo,
    /// Reading host slots into upload buffers (host path) or binding slots (direct).
    direct: bool,
}

/// The frame on screen and where its bytes are.
#[derive(Clone, Copy, Debug)]
struct Shown {
    frame: u32,
    path: PathSel,
    slot: usize,
}

/// The render in flight and what to record when it completes.
#[derive(Clone, Copy, Debug)]
struct RenderInFlight {
    /// The path whose newly shown frame it renders (`None`: the same frame, new view).
    new_frame_on: Option<PathSel>,
    /// When the scrub it completes was asked for.
    scrub_asked: Option<Instant>,
}

/// What one [`Player::tick`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TickOutcome {
    /// A new frame was shown (and rendered).
    pub shown: Option<u32>,
    /// The output image changed (new frame or new view).
    pub rendered: bool,
}

/// A path's availability and how it runs, for the overlay and the JSON.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct PathReport {
    /// "direct" or "host".
    pub path: PathSel,
    /// Whether the path can run here.
    pub available: bool,
    /// Why not, when it cannot.
    pub unavailable_reason: Option<String>,
    /// Short label: "GDS P2P", "GDS compat", "staged", "cpu-only (io_uring)" (or
    /// "cpu-only (pread)", "…, page cache" where reads cannot be O_DIRECT), "portable".
    pub label: String,
    /// Engine that runs (gds, staged, cpu-only, portable).
    pub engine: Option<String>,
    /// How it runs (the engine's words, e.g. cuFile mode, io_uring, O_DIRECT).
    pub mode: Option<String>,
    /// Why the engine asked for is not the one running (gds → staged).
    pub fallback: Option<String>,
    /// cuFile's live mode from its counters (P2P / compatibility), where known.
    pub cufile_mode: Option<String>,
    /// Ring slots.
    pub slots: usize,
    /// Host path: how frames get from the host slots to the GPU.
    pub upload: Option<String>,
    /// Notes from the engine.
    pub notes: Vec<String>,
}

/// The player; see the module documentation.
pub struct Player {
    scene: LoadedScene,
    source: Source,
    device: wgpu::Device,
    queue: wgpu::Queue,
    renderer: Renderer,
    sched: Scheduler,
    paths: [Option<FramePath>; 2],
    direct_reason: Option<String>,
    active: PathSel,
    shown: Option<Shown>,
    stats: [PathStats; 2],
    epoch: Instant,
    view: View,
    view_dirty: bool,
    size: (u32, u32),
    slot_len: usize,
    slots: usize,
    /// A scrub in progress: target and when it was asked for.
    scrub: Option<(u32, Instant)>,
    last_scrub_ms: Option<f64>,
    dragging: bool,
    last_error: Option<String>,
    gpu_buffer_bytes: u64,
    last_gpu_ms: Option<f64>,
    /// The render submitted and not yet seen complete.
    in_flight_render: Option<RenderInFlight>,
    /// Reads that completed cancelled (aborted read-ahead, left paths).
    cancelled_reads: u64,
    /// The latest frame faults, oldest first (at most [`FAULTS_KEPT`]).
    faults: VecDeque<FrameFault>,
    /// Frame faults since the start.
    fault_count: u64,
    /// Frames marked damaged now (until they play), with why.
    damaged: BTreeMap<u32, FrameFaultKind>,
    /// Damaged frames that played later (their lane came back).
    recovered: u64,
}

/// Frames a ring should hold: at least 3 (one shown, one arriving, one ahead), at most 8,
/// and no more than a quarter of `budget` bytes.
pub fn ring_slots(slot_len: usize, budget: u64) -> usize {
    let by_memory = budget / 4 / (slot_len.max(1) as u64);
    (by_memory as usize).clamp(3, 8)
}

impl Player {
    /// Opens `scene_path` (a scene `.toml` or a dataset directory) on a plain `device`: the
    /// host path only (the direct path needs [`Player::open`] on a device with CUDA↔Vulkan
    /// sharing).
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        scene_path: &Path,
        cfg: &PlayerConfig,
    ) -> Result<Player, PlayError> {
        Self::build(device, queue, Err(no_sharing_reason()), scene_path, cfg)
    }

    /// Opens `scene_path` on `gpu`: with the direct path where `gpu` shares memory with CUDA.
    pub fn open(
        gpu: &super::PlayerGpu,
        scene_path: &Path,
        cfg: &PlayerConfig,
    ) -> Result<Player, PlayError> {
        let interop = match &gpu.interop {
            Some((g, dev)) => Ok((g, dev)),
            None => Err(gpu
                .interop_unavailable
                .clone()
                .unwrap_or_else(no_sharing_reason)),
        };
        Self::build(&gpu.device, &gpu.queue, interop, scene_path, cfg)
    }

    fn build(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        interop: Result<(&crate::gpu::Gpu, &crate::gpu::InteropDevice), String>,
        scene_path: &Path,
        cfg: &PlayerConfig,
    ) -> Result<Player, PlayError> {
        if cfg.width == 0 || cfg.height == 0 {
            return Err(PlayError::Usage("the image size must be positive".into()));
        }
        let aspect = cfg.width as f32 / cfg.height as f32;
        let scene = Scene::load(scene_path)
            .and_then(|s| s.open(aspect, cfg.attributes.as_deref()))
            .map_err(|e| PlayError::Scene(e.to_string()))?;
        let source = Source::from_manifest(scene.dataset.manifest());
        if source.frames.is_empty() {
            return Err(PlayError::Scene(format!(
                "{}: the dataset has no frames",
                scene_path.display()
            )));
        }
        if cfg.start_frame as usize >= source.frames.len() {
            return Err(PlayError::Usage(format!(
                "start frame {} (--start-frame) is past the end: the dataset has {} frames (0..={})",
                cfg.start_frame,
                source.frames.len(),
                source.frames.len() - 1
            )));
        }
        let slot_len = source.frames.iter().map(|f| f.len).max().unwrap_or(4096) as usize;
        let limits = device.limits();
        if slot_len as u64 > limits.max_buffer_size {
            return Err(PlayError::Usage(format!(
                "a frame of {slot_len} bytes exceeds this device's largest buffer ({} bytes)",
                limits.max_buffer_size
            )));
        }
        let slots = match cfg.slots {
            Some(n) if n < crate::bench::MIN_SLOTS => {
                return Err(PlayError::Usage(format!(
                    "--slots {n}: at least {} are needed (the frame shown holds one slot while the next is read into another)",
                    crate::bench::MIN_SLOTS
                )));
            }
            Some(n) => n,
            None => {
                // Direct slots live in GPU memory: budget by the smaller of the two.
                let gpu_free = interop
                    .as_ref()
                    .ok()
                    .and_then(|(g, _)| g.mem_info().ok())
                    .map_or(u64::MAX, |(free, _)| free as u64);
                ring_slots(slot_len, crate::memory::available().bytes.min(gpu_free))
            }
        };
        let ecfg = EngineConfig {
            threads: cfg.threads.max(1),
            queue_depth: cfg.queue_depth.max(1),
            io_size: cfg.io_size,
            io_mode: IoMode::Direct,
            verify: cfg.verify,
            read_timeout: cfg.read_timeout,
            faults: cfg.faults.clone(),
            backend: cfg.io_backend,
            ..EngineConfig::default()
        };
        let renderer = Renderer::new(device, queue)?;

        // Host path: always there (it needs nothing but wgpu).
        let host_path = |label: &str| -> Result<FramePath, PlayError> {
            let ring = FrameRing::host(slots, slot_len)?;
            // Best: the GPU copies straight out of the host slots (imported host memory);
            // else each frame is copied by the CPU into a staging buffer first.
            let imported = match cfg.host_copy {
                HostCopy::Staging => Err(String::new()),
                HostCopy::Auto => crate::gpu::HostImporter::new(device),
            }
            .and_then(|imp| {
                ring.memories()
                    .into_iter()
                    .map(|m| imp.import(device, m, "supercell host slot"))
                    .collect::<Result<Vec<_>, _>>()
            });
            // The imported route needs a device buffer per slot; where the GPU has no room
            // for them, the staging route needs only two.
            let imported = imported.and_then(|b| {
                (0..slots)
                    .map(|_| new_buffer(device, copy_len(slot_len), label))
                    .collect::<Result<Vec<_>, _>>()
                    .map(|d| (b, d))
                    .map_err(|e| e.to_string())
            });
            // With imported slots every frame passes through a device buffer, so `--verify`
            // checks it there (on the GPU) rather than on CPU threads as reads land.
            let gpu_crc = (cfg.verify && imported.is_ok()).then(|| WgpuCrc::new(device));
            let ecfg = EngineConfig {
                verify: cfg.verify && gpu_crc.is_none(),
                ..ecfg.clone()
            };
            // cpu-only: io_uring with O_DIRECT straight into the page-aligned host slots
            // (the engine itself notes files whose file system refuses O_DIRECT, e.g.
            // tmpfs, and reads those through the page cache). Where it cannot start at
            // all, the portable engine runs and the reason is kept.
            let (engine, fallback) = match open_engine(
                PathKind::CpuOnly,
                None,
                &source.files,
                ring.memories(),
                &ecfg,
            ) {
                Ok(e) => (e, None),
                Err(e) => (
                    open_engine(
                        PathKind::Portable,
                        None,
                        &source.files,
                        ring.memories(),
                        &ecfg,
                    )?,
                    Some(format!("cpu-only: {e}")),
                ),
            };
            let mut info = engine.info().clone();
            if fallback.is_some() {
                info.requested = PathKind::CpuOnly;
                info.fallback = fallback;
            }
            if gpu_crc.is_some() {
                info.notes.push(
                    "--verify: each frame's CRC-32 is computed on the GPU after its copy".into(),
                );
            }
            let (imported, buffers, staging, route) = match imported {
                Ok((b, d)) => (
                    b,
                    d,
                    Vec::new(),
                    "GPU copies from the host slots as reads land (VK_EXT_external_memory_host)"
                        .to_string(),
                ),
                Err(why) => (
                    Vec::new(),
                    (0..2)
                        .map(|_| new_buffer(device, copy_len(slot_len), label))
                        .collect::<Result<Vec<_>, _>>()?,
                    (0..2)
                        .map(|_| Staging::new(device, slot_len))
                        .collect::<Result<Vec<_>, _>>()?,
                    if why.is_empty() {
                        "CPU copy into a staging buffer, then a GPU copy (as asked)".to_string()
                    } else {
                        format!(
                            "CPU copy into a staging buffer, then a GPU copy (host memory cannot be imported: {why})"
                        )
                    },
                ),
            };
            Ok(FramePath {
                info,
                engine,
                buffers,
                progress: if imported.is_empty() {
                    Vec::new()
                } else {
                    vec![None; ring.len()]
                },
                last_copy: if imported.is_empty() {
                    Vec::new()
                } else {
                    vec![None; ring.len()]
                },
                ring,
                imported,
                gpu_crc,
                staging,
                upload_route: Some(route),
                next_upload: 0,
                pending: VecDeque::new(),
                stale: HashSet::new(),
                held: HashSet::new(),
                direct: false,
            })
        };
        let host = host_path("supercell host upload")?;

        // Direct path: only where shared buffers exist; else the reason is kept for the UI.
        let (direct, direct_reason) =
            match interop.and_then(|(g, dev)| open_direct_slots(g, dev, slots, slot_len)) {
                Ok(DirectSlots {
                    gpu,
                    memories,
                    buffers,
                }) => {
                    let ring = FrameRing::new(memories)?;
                    match open_engine(
                        PathKind::Gds,
                        Some(&gpu),
                        &source.files,
                        ring.memories(),
                        &ecfg,
                    ) {
                        Ok(engine) => (
                            Some(FramePath {
                                info: engine.info().clone(),
                                engine,
                                ring,
                                buffers,
                                imported: Vec::new(),
                                gpu_crc: None,
                                progress: Vec::new(),
                                last_copy: Vec::new(),
                                staging: Vec::new(),
                                upload_route: None,
                                next_upload: 0,
                                pending: VecDeque::new(),
                                stale: HashSet::new(),
                                held: HashSet::new(),
                                direct: true,
                            }),
                            None,
                        ),
                        Err(e) => (None, Some(e.to_string())),
                    }
                }
                Err(why) => (None, Some(why)),
            };
        let (direct, direct_reason) = if cfg.loopback_direct {
            (Some(host_path("supercell loopback upload")?), None)
        } else {
            (direct, direct_reason)
        };
        let active = if cfg.path == PathSel::Direct && direct.is_some() {
            PathSel::Direct
        } else {
            PathSel::Host
        };
        // GPU memory held for frames: shared slots, per-slot copies, upload buffers.
        let gpu_buffer_bytes = direct
            .iter()
            .chain(std::iter::once(&host))
            .flat_map(|p| p.buffers.iter())
            .map(wgpu::Buffer::size)
            .sum::<u64>();
        let n = source.frames.len() as u32;
        let mut sched = Scheduler::new(PlaybackConfig {
            frame_count: n,
            mode: cfg.mode,
            speed_fps: cfg.speed_fps,
            window: slots,
        });
        sched.scrub(cfg.start_frame);
        sched.set_playing(cfg.playing);
        let epoch = Instant::now();
        let mut stats: [PathStats; 2] = Default::default();
        stats[active.index()].set_active(true, 0.0);
        let view = scene.view.clone();
        Ok(Player {
            scene,
            source,
            device: device.clone(),
            queue: queue.clone(),
            renderer,
            sched,
            paths: [direct, Some(host)],
            direct_reason,
            active,
            shown: None,
            stats,
            epoch,
            view,
            view_dirty: true,
            size: (cfg.width, cfg.height),
            slot_len,
            slots,
            scrub: None,
            last_scrub_ms: None,
            dragging: false,
            last_error: None,
            gpu_buffer_bytes,
            last_gpu_ms: None,
            in_flight_render: None,
            cancelled_reads: 0,
            faults: VecDeque::new(),
            fault_count: 0,
            damaged: BTreeMap::new(),
            recovered: 0,
        })
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    fn path(&self, p: PathSel) -> Option<&FramePath> {
        self.paths[p.index()].as_ref()
    }

    /// Advances everything once: collects arrivals, issues reads, lets the scheduler pick the
    /// frame to show, and renders when the frame or the view changed.
    pub fn tick(&mut self) -> Result<TickOutcome, PlayError> {
        self.complete_render(false)?;
        self.pump(PathSel::Direct)?;
        self.pump(PathSel::Host)?;
        self.copy_landed(None)?;
        self.feed()?;
        let now = self.now();
        let mut out = TickOutcome::default();
        let mut next = self.sched.tick(now);
        if next.is_none()
            && self.dragging
            && self.sched.state(self.sched.position()) != Some(FrameState::Ready)
        {
            // While the scrub slider is dragged, show whatever nearby frame has arrived
            // rather than nothing; the exact frame follows once it is released.
            next = self.nearest_ready();
        }
        if let Some(f) = next {
            self.show(f)?;
            out.shown = Some(f);
            out.rendered = true;
        } else if self.view_dirty && self.shown.is_some() {
            self.render()?;
            out.rendered = true;
        }
        let inflight = self.path(self.active).map_or(0, |p| p.engine.in_flight());
        self.stats[self.active.index()].sample(now, inflight);
        let other = self.active.other();
        let other_inflight = self.path(other).map_or(0, |p| p.engine.in_flight());
        self.stats[other.index()].sample(now, other_inflight);
        Ok(out)
    }

    /// Waits up to `timeout` for an arrival on the active path (to idle without spinning).
    pub fn wait(&mut self, timeout: Duration) {
        let active = self.active;
        let Some(p) = self.paths[active.index()].as_mut() else {
            std::thread::sleep(timeout);
            return;
        };
        if p.engine.in_flight() == 0 {
            std::thread::sleep(timeout.min(Duration::from_millis(5)));
            return;
        }
        match p.engine.next_completion(timeout) {
            Ok(Some(c)) => {
                if let Err(e) = self.on_completion(active, c) {
                    self.last_error = Some(e.to_string());
                }
            }
            Ok(None) => {}
            Err(e) => self.last_error = Some(e.to_string()),
        }
    }

    fn nearest_ready(&self) -> Option<u32> {
        let p = self.path(self.active)?;
        let pos = i64::from(self.sched.position());
        p.ring
            .states()
            .iter()
            .filter_map(|s| match s {
                SlotState::Ready(f) => Some(*f),
                _ => None,
            })
            .filter(|f| {
                self.shown
                    .is_none_or(|s| s.frame != *f || s.path != self.active)
            })
            .min_by_key(|f| (i64::from(*f) - pos).abs())
    }

    fn pump(&mut self, sel: PathSel) -> Result<(), PlayError> {
        loop {
            let Some(p) = self.paths[sel.index()].as_mut() else {
                return Ok(());
            };
            if p.engine.in_flight() == 0 {
                return Ok(());
            }
            match p.engine.next_completion(Duration::ZERO)? {
                Some(c) => self.on_completion(sel, c)?,
                None => return Ok(()),
            }
        }
    }

    fn on_completion(
        &mut self,
        sel: PathSel,
        c: crate::ingest::Completion,
    ) -> Result<(), PlayError> {
        let now = self.now();
        let active = sel == self.active;
        let Some(p) = self.paths[sel.index()].as_mut() else {
            return Ok(());
        };
        if c.holds_slot() {
            // The frame failed, but reads into its slot are still out: the slot stays
            // `Writing` (reserved) until the engine releases it.
            p.held.insert(c.slot);
            let stale = p.stale.contains(&c.slot);
            if let Err(e) = &c.result
                && active
                && !stale
            {
                self.fault(sel, c.frame, FrameFaultKind::Timeout, e);
                self.sched.failed(c.frame);
            }
            return Ok(());
        }
        if matches!(c.result, Err(IngestError::Released(_))) {
            p.held.remove(&c.slot);
            p.stale.remove(&c.slot);
            if let Some(pr) = p.progress.get_mut(c.slot) {
                *pr = None;
            }
            p.ring.finish_write(c.slot, false)?;
            return Ok(());
        }
        let ok = c.result.is_ok();
        if matches!(c.result, Err(IngestError::Cancelled(_))) {
            self.cancelled_reads += 1;
        }
        let stale = p.stale.remove(&c.slot);
        if !active || stale {
            // A read of a path no longer shown (or issued before it was left): free its slot
            // (by slot: the same frame may be resident elsewhere, read for the new schedule).
            if let Some(pr) = p.progress.get_mut(c.slot) {
                *pr = None;
            }
            p.ring.finish_write(c.slot, false)?;
            return Ok(());
        }
        p.ring.finish_write(c.slot, ok)?;
        // Every grid header of the frame passes the structural check before the frame can
        // be shown; a frame that fails is never handed to the renderer.
        let header = if ok {
            self.check_headers(sel, c.slot, c.frame)
        } else {
            None
        };
        let mut checksum = None;
        if ok && header.is_none() {
            // The last ranges go to the GPU before the frame can be shown.
            self.copy_landed(Some(c.slot))?;
            checksum = self.check_crcs(sel, c.slot, c.frame)?;
        }
        let Some(p) = self.paths[sel.index()].as_mut() else {
            return Ok(());
        };
        if let Some(pr) = p.progress.get_mut(c.slot) {
            *pr = None;
        }
        if header.is_some() || checksum.is_some() {
            // Resident for the check only: free the slot again.
            p.ring.evict(c.frame);
        }
        match c.result {
            Ok(()) => {
                if let Some((lane, offset, msg)) = header {
                    self.record_fault(FrameFault {
                        frame: c.frame,
                        path: sel,
                        kind: FrameFaultKind::Header,
                        lane,
                        file: None,
                        offset,
                        message: msg,
                        at_s: now,
                    });
                    self.sched.failed(c.frame);
                    return Ok(());
                }
                if let Some(e) = checksum {
                    // As the engine's own check reports it: a failed read of that frame.
                    self.fault(sel, c.frame, FrameFaultKind::Read, &e);
                    self.sched.failed(c.frame);
                    return Ok(());
                }
                if self.damaged.remove(&c.frame).is_some() {
                    self.recovered += 1;
                }
                let done = c.on_gpu.or(c.last_byte).unwrap_or_else(Instant::now);
                let latency = done.saturating_duration_since(c.requested).as_secs_f64();
                self.stats[sel.index()].arrived(now, c.bytes, latency);
                self.sched.loaded(c.frame);
            }
            Err(IngestError::Cancelled(_)) => {
                // An aborted read is no error: the scheduler asks again if it still wants it.
                self.sched.evicted(c.frame);
            }
            Err(e) => {
                // The frame is marked damaged and passed over; it is read again on a later
                // visit (a lane that comes back plays again).
                self.fault(sel, c.frame, FrameFaultKind::Read, &e);
                self.sched.failed(c.frame);
            }
        }
        Ok(())
    }

    /// Host route with imported slots and `--verify`: the CRC-32 of each extent of `frame`
    /// in `slot`'s device buffer (computed on the GPU after the last copy), compared with
    /// the manifest's. The checksum error for the first mismatch, as the engine reports one;
    /// `None` when all match or the path has no GPU check.
    fn check_crcs(
        &mut self,
        sel: PathSel,
        slot: usize,
        frame: u32,
    ) -> Result<Option<IngestError>, PlayError> {
        let Some(p) = self.paths[sel.index()].as_ref() else {
            return Ok(None);
        };
        let (Some(crc), Some(f)) = (&p.gpu_crc, self.source.frames.get(frame as usize)) else {
            return Ok(None);
        };
        let ranges: Vec<(u64, u64)> = f.extents.iter().map(|e| (e.dst, e.len)).collect();
        let got = crc
            .crc32(&self.device, &self.queue, &p.buffers[slot], &ranges)
            .map_err(|e| IngestError::Unavailable(format!("GPU CRC check: {e}")))?;
        let mut bad = f
            .extents
            .iter()
            .zip(&got)
            .filter(|(e, c)| e.crc32.is_some_and(|want| want != **c));
        let Some((e, &actual)) = bad.next() else {
            return Ok(None);
        };
        let file = &self.source.files[e.file as usize];
        Ok(Some(IngestError::Checksum {
            frame,
            lane: file.lane,
            path: file.path.clone(),
            offset: e.offset,
            len: e.len,
            expected: e.crc32.unwrap_or_default(),
            actual,
            more: bad.count() as u64,
        }))
    }

    /// Records a failed read of `frame` as a fault, with the lane and file it names.
    fn fault(&mut self, sel: PathSel, frame: u32, kind: FrameFaultKind, e: &IngestError) {
        let (file, offset, lane) = match e.site() {
            Some((path, offset, lane)) => {
                let lane = lane.or_else(|| {
                    self.source
                        .files
                        .iter()
                        .find(|f| f.path == path)
                        .map(|f| f.lane)
                });
                (Some(path.display().to_string()), Some(offset), lane)
            }
            None => (None, None, None),
        };
        let at_s = self.now();
        self.record_fault(FrameFault {
            frame,
            path: sel,
            kind,
            lane,
            file,
            offset,
            message: e.to_string(),
            at_s,
        });
    }

    fn record_fault(&mut self, f: FrameFault) {
        self.last_error = Some(format!("frame {}: {}", f.frame, f.message));
        self.damaged.insert(f.frame, f.kind);
        self.fault_count += 1;
        if self.faults.len() == FAULTS_KEPT {
            self.faults.pop_front();
        }
        self.faults.push_back(f);
    }

    /// The structural check of every grid header of `frame` in `slot` (see
    /// [`crate::format::Grid::check_header`]): `None` when all pass, else the lane and
    /// file offset of the first bad grid, where known, and what is wrong.
    fn check_headers(
        &self,
        sel: PathSel,
        slot: usize,
        frame: u32,
    ) -> Option<(Option<u32>, Option<u64>, String)> {
        let p = self.path(sel)?;
        let f = self.scene.dataset.frame(frame as usize)?;
        let mut prefix = Vec::new();
        for g in &f.grids {
            let (start, len) = (g.offset as usize, g.size as usize);
            let bad = |msg: String| {
                // Which lane holds the grid's first bytes, and where.
                let at = self.source.frames.get(frame as usize).and_then(|sf| {
                    let e = sf
                        .extents
                        .iter()
                        .find(|e| e.dst <= g.offset && g.offset < e.dst + e.len)?;
                    let file = self.source.files.get(e.file as usize)?;
                    Some((file.lane, e.offset + (g.offset - e.dst)))
                });
                Some((
                    at.map(|a| a.0),
                    at.map(|a| a.1),
                    format!(
                        "grid of attribute {} at slot offset {}: {msg}",
                        g.attribute, g.offset
                    ),
                ))
            };
            if start
                .checked_add(len)
                .is_none_or(|end| end > p.ring.slot_len())
            {
                return bad(format!("{len} bytes do not fit the slot"));
            }
            let checked = match p.ring.host_bytes(slot) {
                Some(bytes) => {
                    crate::format::Grid::check_header(&bytes[start..start + len], g.size)
                }
                None => {
                    // Device memory: read the headers back (a few KiB).
                    prefix.resize(len.min(crate::format::Grid::HEADER_PREFIX), 0);
                    match p.ring.read_back(slot, start, &mut prefix) {
                        Ok(()) => crate::format::Grid::check_header(&prefix, g.size),
                        Err(e) => return bad(format!("cannot read the header back: {e}")),
                    }
                }
            };
            match checked {
                Ok(size) if size == g.size => {}
                Ok(size) => {
                    return bad(format!(
                        "the header says {size} bytes, the dataset {} bytes",
                        g.size
                    ));
                }
                Err(e) => return bad(e.to_string()),
            }
        }
        None
    }

    /// Issues reads the scheduler wants on the active path, as slots allow.
    fn feed(&mut self) -> Result<(), PlayError> {
        let Some(p) = self.paths[self.active.index()].as_mut() else {
            return Ok(());
        };
        for f in self.sched.evictable() {
            if p.ring.evict(f) {
                self.sched.evicted(f);
            }
        }
        let plan = self.sched.plan();
        p.pending.retain(|(f, _)| !plan.cancel.contains(f));
        for f in &plan.abort {
            // The frame's slot is freed when the engine reports the read (cancelled).
            if let Some(slot) = p.ring.states().iter().enumerate().position(|(i, s)| {
                *s == SlotState::Writing(*f) && !p.stale.contains(&i) && !p.held.contains(&i)
            }) {
                p.engine.cancel(slot)?;
            }
        }
        let now = Instant::now();
        p.pending.extend(plan.request.into_iter().map(|f| (f, now)));
        while let Some(&(f, at)) = p.pending.front() {
            let Some(slot) = p.ring.begin_write(f) else {
                break;
            };
            p.pending.pop_front();
            if let Some(copy) = p.last_copy.get_mut(slot).and_then(Option::take) {
                // Normally long done; a slot freed without being shown may still be copied.
                self.device
                    .poll(wgpu::PollType::Wait {
                        submission_index: Some(copy),
                        timeout: None,
                    })
                    .map_err(|e| PlayError::Usage(format!("waiting for a slot copy: {e}")))?;
            }
            let extents = self.source.frames[f as usize].extents.clone();
            // Host slots the GPU can copy from: copy each range as it lands.
            // (`progress` has an entry per slot on that route only.)
            let progress = p.progress.get_mut(slot).map(|entry| {
                let fresh = ReadProgress::new();
                *entry = Some(fresh.clone());
                fresh
            });
            if let Err(e) = p.engine.submit(ReadRequest {
                frame: f,
                slot,
                extents,
                requested: at,
                progress,
            }) {
                let _ = p.ring.finish_write(slot, false);
                return Err(e.into());
            }
            self.sched.started(f);
        }
        Ok(())
    }

    /// Host path with imported slots: submits GPU copies of the byte ranges that have landed
    /// since the last call, in the slots being read (`only`: in that slot alone), from each
    /// host slot into its device buffer. The copies overlap the rest of the read, so a frame
    /// is on the GPU a moment after its last byte arrives. Each slot stays `Writing` (then
    /// `Ready`, then `InUse` until its render has finished) while copies from it may run,
    /// so the engine never rewrites bytes a copy still reads.
    fn copy_landed(&mut self, only: Option<usize>) -> Result<(), PlayError> {
        let Some(p) = self.paths[self.active.index()].as_mut() else {
            return Ok(());
        };
        if p.imported.is_empty() {
            return Ok(());
        }
        let mut enc: Option<wgpu::CommandEncoder> = None;
        let mut copied = Vec::new();
        for slot in 0..p.progress.len() {
            if only.is_some_and(|o| o != slot) {
                continue;
            }
            let Some(progress) = &p.progress[slot] else {
                continue;
            };
            let ranges = progress.take();
            if ranges.is_empty() || p.stale.contains(&slot) {
                continue;
            }
            let enc = enc.get_or_insert_with(|| {
                self.device
                    .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                        label: Some("supercell host slot copies"),
                    })
            });
            for (dst, len) in ranges {
                // Extents are 4 KiB aligned (checked at submit), so copies are too.
                enc.copy_buffer_to_buffer(&p.imported[slot], dst, &p.buffers[slot], dst, len);
            }
            copied.push(slot);
        }
        if let Some(enc) = enc {
            let idx = self.queue.submit([enc.finish()]);
            for slot in copied {
                p.last_copy[slot] = Some(idx.clone());
            }
        }
        Ok(())
    }

    fn show(&mut self, frame: u32) -> Result<(), PlayError> {
        let active = self.active;
        let prev = self.shown;
        let same_slot = |slot: usize| {
            prev.is_some_and(|s| s.path == active && s.slot == slot && s.frame == frame)
        };
        let p = self.paths[active.index()]
            .as_mut()
            .ok_or_else(|| PlayError::Usage("the active path has no engine".into()))?;
        let slot = match p.ring.ready_slot(frame) {
            Some(s) if same_slot(s) => s,
            _ => p
                .ring
                .acquire(frame)
                .ok_or_else(|| PlayError::Usage(format!("frame {frame} is not resident")))?,
        };
        let buffer = if p.direct || !p.imported.is_empty() {
            // The slot itself (direct), or its device copy, whose copies were all submitted
            // (the last when the read completed) before this render, on the same queue.
            p.buffers[slot].clone()
        } else {
            let b = p.next_upload;
            p.next_upload = (b + 1) % p.buffers.len();
            let bytes = p
                .ring
                .host_bytes(slot)
                .ok_or_else(|| PlayError::Usage(format!("slot {slot} holds no host bytes")))?;
            let len = self.source.frames[frame as usize].len as usize;
            // This runs while the GPU still renders the previous frame (that render reads
            // the other upload buffer). Upload buffer `b` was last bound by the render before
            // that one, which has finished: the player waits for each render before it
            // submits the next. The GPU copy is ordered before the render submitted next.
            // The bytes are copied out before this returns.
            let t0 = Instant::now();
            p.staging[b].upload(&self.device, &self.queue, &bytes[..len], &p.buffers[b])?;
            self.stats[active.index()].uploaded(len as u64, t0.elapsed().as_secs_f64());
            p.buffers[b].clone()
        };
        let slices = self.scene.grid_slices(frame as usize, &buffer)?;
        // The previous frame's render must be done before its slot goes back to the engine
        // (below) and before the renderer's timestamp buffer is reused.
        self.complete_render(true)?;
        self.renderer.set_grids(&slices)?;
        self.shown = Some(Shown {
            frame,
            path: active,
            slot,
        });
        let scrub_asked = match self.scrub {
            Some((target, at)) if target == frame => {
                self.scrub = None;
                Some(at)
            }
            _ => None,
        };
        self.submit_render(RenderInFlight {
            new_frame_on: Some(active),
            scrub_asked,
        })?;
        // No render in flight reads the previous frame's slot: free it.
        if let Some(prev) = prev
            && !(prev.path == active && prev.slot == slot)
            && let Some(pp) = self.paths[prev.path.index()].as_mut()
        {
            pp.ring.release(prev.slot);
            if pp.ring.evict(prev.frame) && prev.path == active {
                self.sched.evicted(prev.frame);
            }
        }
        Ok(())
    }

    /// Renders the shown frame again (new view or size).
    fn render(&mut self) -> Result<(), PlayError> {
        self.submit_render(RenderInFlight {
            new_frame_on: None,
            scrub_asked: None,
        })
    }

    fn submit_render(&mut self, what: RenderInFlight) -> Result<(), PlayError> {
        self.complete_render(true)?;
        let (w, h) = self.size;
        self.renderer.submit_timed(&self.view, w, h)?;
        self.in_flight_render = Some(what);
        self.view_dirty = false;
        Ok(())
    }

    /// Records the render in flight once it has finished: waits for it with `wait`, else
    /// only looks.
    fn complete_render(&mut self, wait: bool) -> Result<(), PlayError> {
        if self.in_flight_render.is_none() || (!wait && !self.renderer.pending_done()) {
            return Ok(());
        }
        let timing = self.renderer.finish_pending()?;
        let Some(done) = self.in_flight_render.take() else {
            return Ok(());
        };
        if let Some(t) = timing {
            self.last_gpu_ms = t.gpu_ms;
        }
        let now = self.now();
        if let Some(path) = done.new_frame_on {
            self.stats[path.index()].rendered(now, self.last_gpu_ms);
        }
        if let Some(at) = done.scrub_asked {
            let ms = at.elapsed().as_secs_f64() * 1e3;
            self.last_scrub_ms = Some(ms);
            if let Some(path) = done.new_frame_on {
                self.stats[path.index()].scrubbed(ms);
            }
        }
        Ok(())
    }

    /// Switches to `sel` at run time. The old path's queued requests are dropped, its reads
    /// not yet issued are cancelled, and what is in flight is discarded as it lands; the
    /// frame on screen stays until the new path delivers the same frame. Errors (with the
    /// reason) when the path cannot run here.
    pub fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        if sel == self.active {
            return Ok(());
        }
        if self.path(sel).is_none() {
            return Err(self
                .direct_reason
                .clone()
                .unwrap_or_else(|| format!("the {} path is unavailable", sel.name())));
        }
        let now = self.now();
        let old = self.active;
        if let Some(p) = self.paths[old.index()].as_mut() {
            p.pending.clear();
            let states: Vec<SlotState> = p.ring.states().to_vec();
            for (i, s) in states.into_iter().enumerate() {
                match s {
                    SlotState::Writing(_) => {
                        // Dropped on arrival; abandon what is not yet issued so the path
                        // goes idle quickly (a failed cancel only means a slower drain).
                        p.stale.insert(i);
                        let _ = p.engine.cancel(i);
                    }
                    SlotState::Ready(f) => {
                        p.ring.evict(f);
                    }
                    _ => {}
                }
            }
        }
        self.stats[old.index()].set_active(false, now);
        self.stats[sel.index()].set_active(true, now);
        let old_sched = &self.sched;
        let mut s = Scheduler::new(PlaybackConfig {
            window: self.slots,
            ..old_sched.config()
        });
        s.set_direction(old_sched.direction());
        s.scrub(old_sched.position());
        s.set_playing(old_sched.is_playing());
        self.sched = s;
        self.active = sel;
        // Resident frames of the new path from an earlier visit are stale by now.
        if let Some(p) = self.paths[sel.index()].as_mut() {
            let states: Vec<SlotState> = p.ring.states().to_vec();
            for s in states {
                if let SlotState::Ready(f) = s {
                    p.ring.evict(f);
                }
            }
        }
        Ok(())
    }

    /// Flips between direct and host (see [`Player::set_path`]).
    pub fn toggle_path(&mut self) -> Result<PathSel, String> {
        let to = self.active.other();
        self.set_path(to).map(|()| to)
    }

    /// Jumps to `frame` (clamped); the time until that exact frame is shown is recorded as
    /// the scrub latency.
    pub fn scrub(&mut self, frame: u32) {
        let target = frame.min(self.frame_count() - 1);
        self.sched.scrub(target);
        self.scrub = Some((target, Instant::now()));
    }

    /// While dragging, nearby arrived frames are shown until the exact one arrives.
    pub fn set_dragging(&mut self, dragging: bool) {
        self.dragging = dragging;
    }

    /// One frame forward or back (pauses).
    pub fn step(&mut self, direction: Direction) {
        self.sched.step(direction);
        self.scrub = Some((self.sched.position(), Instant::now()));
    }

    /// Play or pause.
    pub fn set_playing(&mut self, playing: bool) {
        self.sched.set_playing(playing);
    }
    /// Whether playing.
    pub fn is_playing(&self) -> bool {
        self.sched.is_playing()
    }
    /// Playback direction.
    pub fn direction(&self) -> Direction {
        self.sched.direction()
    }
    /// Sets the playback direction.
    pub fn set_direction(&mut self, d: Direction) {
        self.sched.set_direction(d);
    }
    /// End-of-timeline behaviour.
    pub fn mode(&self) -> PlayMode {
        self.sched.config().mode
    }
    /// Sets the end-of-timeline behaviour.
    pub fn set_mode(&mut self, m: PlayMode) {
        self.sched.set_mode(m);
    }
    /// Playback rate (`None`: as fast as frames arrive).
    pub fn speed(&self) -> Option<f64> {
        self.sched.config().speed_fps
    }
    /// Sets the playback rate.
    pub fn set_speed(&mut self, fps: Option<f64>) {
        self.sched.set_speed(fps);
    }
    /// The frame at the playhead (shown, or being fetched after a scrub).
    pub fn position(&self) -> u32 {
        self.sched.position()
    }
    /// The frame on screen.
    pub fn shown_frame(&self) -> Option<u32> {
        self.shown.map(|s| s.frame)
    }
    /// Frames in the dataset.
    pub fn frame_count(&self) -> u32 {
        self.source.frames.len() as u32
    }
    /// Simulation time of `frame`.
    pub fn frame_time(&self, frame: u32) -> f64 {
        self.scene
            .dataset
            .frame(frame as usize)
            .map_or(0.0, |f| f.time)
    }
    /// Bytes of `frame`'s slot image.
    pub fn frame_bytes(&self, frame: u32) -> u64 {
        self.source.frames.get(frame as usize).map_or(0, |f| f.len)
    }
    /// Mean slot-image bytes per frame over the dataset.
    pub fn mean_frame_bytes(&self) -> f64 {
        let n = self.source.frames.len().max(1) as f64;
        self.source.frames.iter().map(|f| f.len as f64).sum::<f64>() / n
    }
    /// The path showing frames.
    pub fn active_path(&self) -> PathSel {
        self.active
    }
    /// Why the direct path cannot run here, if it cannot.
    pub fn direct_unavailable(&self) -> Option<&str> {
        self.path(PathSel::Direct)
            .is_none()
            .then(|| self.direct_reason.as_deref().unwrap_or("unavailable"))
    }
    /// Availability and mode of a path.
    pub fn path_report(&self, sel: PathSel) -> PathReport {
        match self.path(sel) {
            None => PathReport {
                path: sel,
                available: false,
                unavailable_reason: self.direct_reason.clone(),
                label: "unavailable".into(),
                engine: None,
                mode: None,
                fallback: None,
                cufile_mode: None,
                slots: 0,
                upload: None,
                notes: Vec::new(),
            },
            Some(p) => {
                let cufile = p.engine.cufile_stats().map(|s| s.live_mode().to_string());
                let label = match p.info.active {
                    PathKind::Gds => match cufile.as_deref() {
                        Some("P2P") => "GDS P2P".to_string(),
                        Some(m) if m.starts_with("compat") => "GDS compat".to_string(),
                        _ if p.info.mode.contains("compat") => "GDS compat".to_string(),
                        _ => "GDS".to_string(),
                    },
                    _ if !p.direct && sel == PathSel::Direct => "loopback (test)".to_string(),
                    // Honest about how the reads really run: io_uring or pread threads,
                    // and whether every file is read with O_DIRECT.
                    PathKind::CpuOnly => {
                        let io = if p.info.mode.starts_with("io_uring") {
                            "io_uring"
                        } else {
                            "pread"
                        };
                        if p.info.mode.contains(", O_DIRECT") {
                            format!("cpu-only ({io})")
                        } else {
                            format!("cpu-only ({io}, page cache)")
                        }
                    }
                    k => k.name().to_string(),
                };
                PathReport {
                    path: sel,
                    available: true,
                    unavailable_reason: None,
                    label,
                    engine: Some(p.info.active.name().into()),
                    mode: Some(p.info.mode.clone()),
                    fallback: p.info.fallback.clone(),
                    cufile_mode: cufile,
                    slots: p.ring.len(),
                    upload: p.upload_route.clone(),
                    notes: p.info.notes.clone(),
                }
            }
        }
    }
    /// Figures of a path as of now.
    pub fn figures(&self, sel: PathSel) -> PathFigures {
        self.stats[sel.index()].figures(self.now())
    }
    /// Rolling statistics of a path (plot series, scrub latencies).
    pub fn stats(&self, sel: PathSel) -> &PathStats {
        &self.stats[sel.index()]
    }
    /// Clears a path's statistics.
    pub fn reset_stats(&mut self, sel: PathSel) {
        let now = self.now();
        self.stats[sel.index()].reset(now);
    }
    /// Seconds since the player started (the time axis of the statistics).
    pub fn clock(&self) -> f64 {
        self.now()
    }
    /// Latency of the last completed scrub, ms.
    pub fn last_scrub_ms(&self) -> Option<f64> {
        self.last_scrub_ms
    }
    /// Frame reads the engines gave up part-way because the player cancelled them (a jump
    /// or a pause abandoned the read-ahead, or the path was switched).
    pub fn cancelled_reads(&self) -> u64 {
        self.cancelled_reads
    }
    /// The scheduler's counters (frames shown, stalls, cancelled and aborted reads).
    pub fn scheduler_stats(&self) -> crate::pipeline::SchedulerStats {
        self.sched.stats()
    }
    /// Whether a scrub is still waiting for its frame to be rendered.
    pub fn scrub_pending(&self) -> bool {
        self.scrub.is_some()
            || self
                .in_flight_render
                .is_some_and(|r| r.scrub_asked.is_some())
    }
    /// The latest frame faults (read errors, time-outs, damaged headers), oldest first.
    pub fn faults(&self) -> impl ExactSizeIterator<Item = &FrameFault> {
        self.faults.iter()
    }
    /// Frame faults since the start (the list keeps the latest 1000).
    pub fn fault_count(&self) -> u64 {
        self.fault_count
    }
    /// Frames marked damaged now, with why; a frame leaves the list when it plays.
    pub fn damaged_frames(&self) -> &BTreeMap<u32, FrameFaultKind> {
        &self.damaged
    }
    /// Damaged frames that played later (read again once their lane came back).
    pub fn recovered_frames(&self) -> u64 {
        self.recovered
    }
    /// Slots of the active path reserved by timed-out reads still out.
    pub fn held_slots(&self) -> usize {
        self.path(self.active).map_or(0, |p| p.held.len())
    }

    /// The last error (a failed read), if any.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
    /// GPU memory the player allocated for frames (slots and upload buffers), bytes.
    pub fn gpu_buffer_bytes(&self) -> u64 {
        self.gpu_buffer_bytes
    }
    /// Bytes of one slot.
    pub fn slot_len(&self) -> usize {
        self.slot_len
    }
    /// Ring slots per path.
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// Reads in flight on the active path (frames).
    pub fn in_flight(&self) -> usize {
        self.path(self.active).map_or(0, |p| p.engine.in_flight())
    }
    /// GPU time of the last render, ms (where timestamps exist).
    pub fn last_gpu_ms(&self) -> Option<f64> {
        self.last_gpu_ms
    }

    /// The view (camera, attributes, settings).
    pub fn view(&self) -> &View {
        &self.view
    }
    /// Changes the view; the shown frame is rendered again on the next tick.
    pub fn view_mut(&mut self) -> &mut View {
        self.view_dirty = true;
        &mut self.view
    }
    /// The scene's original view (for "reset camera").
    pub fn scene_view(&self) -> &View {
        &self.scene.view
    }
    /// Whether the scene has a camera path (the kiosk flies it).
    pub fn has_camera_path(&self) -> bool {
        self.scene.camera_path.is_some()
    }
    /// The scene's camera at `time_s` seconds along its camera path (its camera without one).
    pub fn scene_camera_at(&self, time_s: f64) -> crate::render::Camera {
        self.scene.camera_at(time_s)
    }
    /// Attribute names per view slot.
    pub fn attribute_names(&self) -> Vec<String> {
        let m = self.scene.dataset.manifest();
        self.scene
            .slots
            .iter()
            .map(|s| {
                s.and_then(|a| m.attributes.get(a))
                    .map_or_else(String::new, |a| a.name.clone())
            })
            .collect()
    }
    /// Render size.
    pub fn size(&self) -> (u32, u32) {
        self.size
    }
    /// Changes the render size (the window's). A new aspect refits the scene's camera (and
    /// its camera path) to the data and keeps what the user framed in sight
    /// ([`crate::scene::Framing`]).
    pub fn set_size(&mut self, width: u32, height: u32) {
        let (w, h) = (width.max(1), height.max(1));
        if (w, h) != self.size {
            self.size = (w, h);
            self.view.camera = self.scene.set_aspect(w as f32 / h as f32, self.view.camera);
            self.view_dirty = true;
        }
    }
    /// The rendered image (rgba8, sRGB-encoded values in a `Rgba8Unorm` texture).
    pub fn output(&self) -> Option<&wgpu::Texture> {
        self.renderer.output()
    }
    /// Reads the rendered image back.
    pub fn read_image(&self) -> Result<crate::render::Image, PlayError> {
        Ok(self.renderer.read_image()?)
    }
    /// The device.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }
    /// The queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
    /// The dataset's manifest.
    pub fn manifest(&self) -> &crate::dataset::Manifest {
        self.scene.dataset.manifest()
    }

    /// Stops issuing reads and waits (up to `timeout`) for reads in flight to land, so the
    /// engines shut down idle.
    pub fn drain(&mut self, timeout: Duration) {
        if let Err(e) = self.complete_render(true) {
            self.last_error = Some(e.to_string());
        }
        let end = Instant::now() + timeout;
        for p in self.paths.iter_mut().flatten() {
            p.pending.clear();
            for (i, s) in p.ring.states().iter().enumerate() {
                if matches!(s, SlotState::Writing(_)) {
                    let _ = p.engine.cancel(i);
                }
            }
            while p.engine.in_flight() > 0 && Instant::now() < end {
                if let Ok(Some(c)) = p.engine.next_completion(Duration::from_millis(10)) {
                    if c.holds_slot() {
                        // Reads still out: the slot is freed when they end.
                        p.held.insert(c.slot);
                        continue;
                    }
                    let _ = p.ring.finish_write(c.slot, c.result.is_ok());
                    p.stale.remove(&c.slot);
                    p.held.remove(&c.slot);
                }
            }
        }
    }
}
