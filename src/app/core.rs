//! The player core, without a window: dataset, scheduler, the two frame paths, the renderer
//! and per-path statistics. The window and the headless run both drive [`Player::tick`].
//!
//! Frame paths:
//! - *direct*: GDS engine (falling back to staged, with the reason) into ring slots that are
//!   wgpu buffers CUDA writes (see [`super::direct`]); a frame is shown by binding its slot.
//! - *host*: cpu-only engine (io_uring, O_DIRECT where the file system allows; portable,
//!   with the reason, where it cannot open) into page-aligned host slots; the GPU copies
//!   each frame out of its slot as reads land where host memory can be imported, else the
//!   CPU copies it into a staging buffer for a GPU copy (the upload routes of
//!   `route`).
//!
//! Each path is a [`FrameStream`](crate::stream::FrameStream) (its engine, ring and requests); both answer to the one
//! [`Scheduler`], which only the active path is fed from. A path switched away from drains
//! on its own: its reads still out are stale and never reach the scheduler.
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

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

pub use super::config::{DirectEngine, HostCopy, PathSel, PlayError, PlayerConfig};
use super::direct::{no_sharing_reason, open_direct_slots};
use super::faults::{FaultLog, check_headers};
pub use super::faults::{FrameFault, FrameFaultKind};
use super::path::FramePath;
pub use super::path::{PathReport, ring_slots};
use super::stats::{PathFigures, PathStats};
use crate::gpu::{SlotDemand, SlotPlan, SlotState};
use crate::ingest::{EngineConfig, IngestError, IoMode, Source};
use crate::pipeline::{Direction, FrameState, PlayMode, PlaybackConfig, Scheduler};
use crate::render::{FrameCapacity, Renderer, SlotPart, View};
use crate::scene::{LoadedScene, Scene};
use crate::stream::StreamEvent;

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
    /// How many slots, of what parts, and the memory they take.
    slot_plan: SlotPlan,
    /// A scrub in progress: target and when it was asked for.
    scrub: Option<(u32, Instant)>,
    last_scrub_ms: Option<f64>,
    dragging: bool,
    last_error: Option<String>,
    gpu_buffer_bytes: u64,
    last_gpu_ms: Option<f64>,
    /// Path mode: the refinement's progress (samples per pixel added by recent renders).
    path_progress: PathProgress,
    /// The render submitted and not yet seen complete.
    in_flight_render: Option<RenderInFlight>,
    /// Reads that completed cancelled (aborted read-ahead, left paths).
    cancelled_reads: u64,
    /// Frame faults, damaged frames and recoveries.
    faults: FaultLog,
    /// The parts of the frame bound to the renderer and which attributes were shown then:
    /// a view showing others binds that frame's grids again before it renders.
    bound: Option<BoundFrame>,
}

/// The frame the renderer binds: its parts (cloned handles) and the attributes bound.
struct BoundFrame {
    frame: usize,
    parts: Vec<wgpu::Buffer>,
    /// The dataset attribute bound in each slot (`None`: hidden or empty).
    shown: Vec<Option<usize>>,
}

/// The dataset attribute each slot shows: `slots[i]` where the view shows slot i.
fn shown_attributes(view: &View, slots: &[Option<usize>]) -> Vec<Option<usize>> {
    shown_slots(view)
        .iter()
        .zip(slots)
        .map(|(&on, &a)| a.filter(|_| on))
        .collect()
}

/// The scene file or dataset directory at `path`, loaded ([`Scene::load`]).
pub(crate) fn load_scene(path: &Path) -> Result<Scene, PlayError> {
    Ok(Scene::load(path)?)
}

/// Bytes in decimal megabytes, for messages.
fn mb(n: u64) -> String {
    format!("{:.1} MB", n as f64 / 1e6)
}

/// Which of a view's attribute slots are shown (bound and drawn).
fn shown_slots(view: &View) -> Vec<bool> {
    view.attributes
        .iter()
        .map(|a| a.as_ref().is_some_and(|a| a.enabled))
        .collect()
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
        let scene = load_scene(scene_path)?;
        Self::build(device, queue, Err(no_sharing_reason()), &scene, cfg)
    }

    /// Opens `scene_path` (a scene `.toml` or a dataset directory) on `gpu`: with the direct
    /// path where `gpu` shares memory with CUDA.
    pub fn open(
        gpu: &super::PlayerGpu,
        scene_path: &Path,
        cfg: &PlayerConfig,
    ) -> Result<Player, PlayError> {
        Self::open_scene(gpu, &load_scene(scene_path)?, cfg)
    }

    /// Opens a scene already loaded (such as [`Scene::builtin`], which has no file) on
    /// `gpu`, as [`Player::open`] does.
    pub fn open_scene(
        gpu: &super::PlayerGpu,
        scene: &Scene,
        cfg: &PlayerConfig,
    ) -> Result<Player, PlayError> {
        let interop = match &gpu.interop {
            Some((g, dev)) => Ok((g, dev)),
            None => Err(gpu
                .interop_unavailable
                .clone()
                .unwrap_or_else(no_sharing_reason)),
        };
        Self::build(&gpu.device, &gpu.queue, interop, scene, cfg)
    }

    fn build(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        interop: Result<(&crate::gpu::Gpu, &crate::gpu::InteropDevice), String>,
        scene_file: &Scene,
        cfg: &PlayerConfig,
    ) -> Result<Player, PlayError> {
        if cfg.width == 0 || cfg.height == 0 {
            return Err(PlayError::Usage("the image size must be positive".into()));
        }
        let aspect = cfg.width as f32 / cfg.height as f32;
        let mut scene = scene_file.open(aspect, cfg.attributes.as_deref())?;
        if let Some(keep) = &cfg.frames {
            // After the scene is open: the camera and the view are the whole dataset's.
            scene.dataset.retain_frames(keep)?;
        }
        let source = Source::from_manifest(scene.dataset.manifest());
        if source.frames.is_empty() {
            return Err(PlayError::Scene(format!(
                "{}: the dataset has no frames",
                scene_file.source.display()
            )));
        }
        // A dataset without a scene whose first frames are empty starts where data does
        // (the scene's notes say so).
        let start_frame = match &scene.suggestion {
            Some(s) if cfg.start_at_data && cfg.frames.is_none() => s.start_frame as u32,
            _ => cfg.start_frame,
        };
        if start_frame as usize >= source.frames.len() {
            return Err(PlayError::Usage(format!(
                "start frame {} (--start-frame) is past the end: the dataset has {} frames (0..={})",
                start_frame,
                source.frames.len(),
                source.frames.len() - 1
            )));
        }
        crate::stream::check_slots(cfg.slots).map_err(PlayError::Usage)?;
        let caps = crate::device::DeviceCaps::of(device);
        let mut renderer =
            Renderer::with_config(device, queue, caps, cfg.render, forced_part_bytes(cfg)?)?;
        renderer.set_path_denoise(cfg.path_denoise);
        let slot_plan = plan_player_slots(&renderer, interop.as_ref().ok(), &source, cfg)?;
        let (slots, slot_len) = (slot_plan.slots, slot_plan.slot_bytes as usize);
        let layout = slot_plan.layout()?;
        let ecfg = EngineConfig {
            threads: cfg.threads.max(1),
            queue_depth: cfg.queue_depth.max(1),
            io_size: cfg.io_size,
            io_mode: IoMode::Direct,
            verify: cfg.verify,
            read_timeout: cfg.read_timeout,
            faults: cfg.faults.clone(),
            host_pages: cfg.host_pages,
            backend: cfg.io_backend,
            ..EngineConfig::default()
        };

        // Host path: always there (it needs nothing but wgpu).
        let host_path =
            |label: &str| FramePath::host(device, queue, cfg, &ecfg, &source, slots, layout, label);
        let host = host_path("supercell host upload")?;
        // Direct path: only where shared buffers exist; else the reason is kept for the UI.
        let (direct, direct_reason) = if cfg.loopback_direct {
            (Some(host_path("supercell loopback upload")?), None)
        } else {
            match interop.and_then(|(g, dev)| open_direct_slots(g, dev, slots, layout)) {
                Ok(shared) => match FramePath::direct(shared, &source, &ecfg, cfg.direct_engine)? {
                    Ok(p) => (Some(p), None),
                    Err(why) => (None, Some(why)),
                },
                Err(why) => (None, Some(why)),
            }
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
            .flat_map(|p| p.route.buffers())
            .map(wgpu::Buffer::size)
            .sum::<u64>();
        let n = source.frames.len() as u32;
        let mut sched = Scheduler::new(PlaybackConfig {
            frame_count: n,
            mode: cfg.mode,
            speed_fps: cfg.speed_fps,
            window: slots,
        });
        sched.scrub(start_frame);
        sched.set_playing(cfg.playing);
        let epoch = Instant::now();
        // Each path's warm-up lasts until its ring has filled once.
        let mut stats = [PathStats::new(slots), PathStats::new(slots)];
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
            slot_plan,
            scrub: None,
            last_scrub_ms: None,
            dragging: false,
            last_error: None,
            gpu_buffer_bytes,
            last_gpu_ms: None,
            path_progress: PathProgress::starting(0.0),
            in_flight_render: None,
            bound: None,
            cancelled_reads: 0,
            faults: FaultLog::default(),
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
        self.copy_landed(self.active, None);
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
        } else if (self.view_dirty || self.path_refining()) && self.shown.is_some() {
            self.render()?;
            out.rendered = true;
        }
        let inflight = self.path(self.active).map_or(0, |p| p.stream.in_flight());
        self.stats[self.active.index()].sample(now, inflight);
        let other = self.active.other();
        let other_inflight = self.path(other).map_or(0, |p| p.stream.in_flight());
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
        if p.stream.in_flight() == 0 {
            std::thread::sleep(timeout.min(Duration::from_millis(5)));
            return;
        }
        match p.stream.next_event(&mut self.sched, timeout) {
            Ok(Some(ev)) => {
                if let Err(e) = self.on_event(active, ev) {
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
        p.stream
            .ring()
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

    /// Handles the completions that have arrived on `sel`.
    fn pump(&mut self, sel: PathSel) -> Result<(), PlayError> {
        loop {
            let Some(p) = self.paths[sel.index()].as_mut() else {
                return Ok(());
            };
            match p.stream.poll(&mut self.sched)? {
                Some(ev) => self.on_event(sel, ev)?,
                None => return Ok(()),
            }
        }
    }

    /// What the player does with a completion on `sel` (the stream has told the ring and
    /// the scheduler already): faults and statistics, and the frame's last checks before
    /// it can be shown.
    fn on_event(&mut self, sel: PathSel, ev: StreamEvent) -> Result<(), PlayError> {
        let now = self.now();
        let slot = ev.slot();
        let c = match ev {
            StreamEvent::Landed(c) => c,
            // The slot stays reserved (its range reports with it) until it is released.
            StreamEvent::Held(c) => {
                if let Err(e) = &c.result {
                    self.fault(sel, c.frame, FrameFaultKind::Timeout, e);
                }
                return Ok(());
            }
            other => {
                if let StreamEvent::Cancelled(c) | StreamEvent::Stale(c) = &other
                    && matches!(c.result, Err(IngestError::Cancelled(_)))
                {
                    self.cancelled_reads += 1;
                }
                if let Some(p) = self.paths[sel.index()].as_mut() {
                    p.route.read_ended(slot);
                }
                if let StreamEvent::Failed(c) = other
                    && let Err(e) = &c.result
                {
                    // The frame is marked damaged and passed over; it is read again on a
                    // later visit (a lane that comes back plays again).
                    self.fault(sel, c.frame, FrameFaultKind::Read, e);
                }
                return Ok(());
            }
        };
        // Every grid header of the frame passes the structural check before the frame can
        // be shown; a frame that fails is never handed to the renderer.
        let header = self.path(sel).and_then(|p| {
            let ring = p.stream.ring();
            let mut read_back = |at: usize, out: &mut [u8]| {
                p.route
                    .read_back(&self.device, &self.queue, ring, slot, at, out)
            };
            check_headers(
                &self.scene,
                &self.source,
                ring.slot_len(),
                &mut read_back,
                c.frame,
            )
        });
        let mut checksum = None;
        if header.is_none() {
            // The last ranges go to the GPU before the frame can be shown.
            self.copy_landed(sel, Some(slot));
            if let Some(p) = self.path(sel) {
                checksum =
                    p.route
                        .check_crcs(&self.device, &self.queue, &self.source, slot, c.frame)?;
            }
        }
        let Some(p) = self.paths[sel.index()].as_mut() else {
            return Ok(());
        };
        p.route.read_ended(slot);
        if let Some((lane, offset, msg)) = header {
            // Resident for the check only: the slot is freed again.
            p.stream.reject(&mut self.sched, c.frame);
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
            return Ok(());
        }
        if let Some(e) = checksum {
            // As the engine's own check reports it: a failed read of that frame.
            p.stream.reject(&mut self.sched, c.frame);
            self.fault(sel, c.frame, FrameFaultKind::Read, &e);
            return Ok(());
        }
        self.faults.played(c.frame);
        let done = c.on_gpu.or(c.last_byte).unwrap_or_else(Instant::now);
        let latency = done.saturating_duration_since(c.requested).as_secs_f64();
        self.stats[sel.index()].arrived(now, c.bytes, latency);
        Ok(())
    }

    /// Records a failed read of `frame` as a fault, with the lane and file it names.
    fn fault(&mut self, sel: PathSel, frame: u32, kind: FrameFaultKind, e: &IngestError) {
        let f = FrameFault::from_error(&self.source, sel, frame, kind, e, self.now());
        self.record_fault(f);
    }

    fn record_fault(&mut self, f: FrameFault) {
        self.last_error = Some(format!("frame {}: {}", f.frame, f.message));
        self.faults.record(f);
    }

    /// Issues reads the scheduler wants on the active path, as slots allow.
    fn feed(&mut self) -> Result<(), PlayError> {
        let Some(p) = self.paths[self.active.index()].as_mut() else {
            return Ok(());
        };
        let (device, route) = (&self.device, &mut p.route);
        p.stream
            .feed_with(&mut self.sched, &self.source, u64::MAX, |slot| {
                route.prepare_slot(device, slot)
            })?;
        Ok(())
    }

    /// Copies the ranges landed in `sel`'s slots (`only`: in that slot alone) to the GPU
    /// (imported-copy route; see [`UploadRoute::copy_landed`]).
    fn copy_landed(&mut self, sel: PathSel, only: Option<usize>) {
        if let Some(p) = self.paths[sel.index()].as_mut() {
            let stream = &p.stream;
            p.route
                .copy_landed(&self.device, &self.queue, only, |slot| {
                    stream.is_stale(slot)
                });
        }
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
        let slot = match p.stream.ring().ready_slot(frame) {
            Some(s) if same_slot(s) => s,
            _ => p
                .stream
                .ring_mut()
                .acquire(frame)
                .ok_or_else(|| PlayError::Usage(format!("frame {frame} is not resident")))?,
        };
        let len = self.source.frames[frame as usize].len as usize;
        let (parts, upload_s) =
            p.route
                .frame_parts(&self.device, &self.queue, p.stream.ring(), slot, len)?;
        if let Some(secs) = upload_s {
            self.stats[active.index()].uploaded(len as u64, secs);
        }
        // The previous frame's render must be done before its slot goes back to the engine
        // (below) and before the renderer's timestamp buffer is reused.
        self.complete_render(true)?;
        let shown = shown_attributes(&self.view, &self.scene.slots);
        bind_frame(
            &mut self.renderer,
            &self.scene,
            frame as usize,
            &parts,
            self.slot_plan.part_bytes,
            &shown_slots(&self.view),
        )?;
        self.bound = Some(BoundFrame {
            frame: frame as usize,
            parts,
            shown,
        });
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
            // Reported to the scheduler when the frame is the active path's.
            pp.stream
                .retire(prev.slot, (prev.path == active).then_some(&mut self.sched));
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
        // Attributes switched on or off since the frame was bound: bind its grids again
        // (only the shown attributes' grids are bound, and only the parts they span).
        let shown = shown_attributes(&self.view, &self.scene.slots);
        if let Some(b) = self.bound.as_mut()
            && b.shown != shown
        {
            bind_frame(
                &mut self.renderer,
                &self.scene,
                b.frame,
                &b.parts,
                self.slot_plan.part_bytes,
                &shown_slots(&self.view),
            )?;
            b.shown = shown;
        }
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
        if self.view.settings.mode == crate::render::Mode::Path {
            self.path_progress
                .rendered(now, self.renderer.path_samples());
        }
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
            // What is in flight is dropped on arrival; what is not yet issued is abandoned
            // so the path goes idle quickly.
            p.stream.leave();
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
            p.stream.enter();
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
    /// Whether a jump to `frame` has ended on a frame that cannot be shown: the playhead is
    /// there and the frame is damaged (its read failed, timed out, or its bytes failed a
    /// check; a jump to the frame already at the playhead does not read it again).
    pub fn jumped_to_damaged(&self, frame: u32) -> bool {
        self.sched.position() == frame && self.sched.state(frame) == Some(FrameState::Damaged)
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
            None => PathReport::unavailable(sel, self.direct_reason.clone()),
            Some(p) => p.report(sel),
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
        self.faults.latest.iter()
    }
    /// Frame faults since the start (the list keeps the latest 1000).
    pub fn fault_count(&self) -> u64 {
        self.faults.count
    }
    /// Frames marked damaged now, with why; a frame leaves the list when it plays.
    pub fn damaged_frames(&self) -> &BTreeMap<u32, FrameFaultKind> {
        &self.faults.damaged
    }
    /// Damaged frames that played later (read again once their lane came back).
    pub fn recovered_frames(&self) -> u64 {
        self.faults.recovered
    }
    /// Slots of the active path reserved by timed-out reads still out.
    pub fn held_slots(&self) -> usize {
        self.path(self.active).map_or(0, |p| p.stream.held_slots())
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
    /// How many slots each path holds, of what parts, the memory they take, and why.
    pub fn slot_plan(&self) -> &SlotPlan {
        &self.slot_plan
    }
    /// Reads in flight on the active path (frames).
    pub fn in_flight(&self) -> usize {
        self.path(self.active).map_or(0, |p| p.stream.in_flight())
    }
    /// Whether the path-traced picture should take more samples now: path mode, paused, the
    /// last render finished and the image short of `path_max_samples` (each render adds
    /// `path_samples_per_frame`; any change of frame or view starts it afresh).
    fn path_refining(&self) -> bool {
        let s = &self.view.settings;
        s.mode == crate::render::Mode::Path
            && !self.is_playing()
            && self.in_flight_render.is_none()
            && self.renderer.path_samples() < s.path_max_samples
    }
    /// Path mode: samples per pixel in the picture on screen.
    pub fn path_samples(&self) -> u32 {
        self.renderer.path_samples()
    }
    /// The render mode in use (the scene's, or path tracing after
    /// [`Player::toggle_path_tracing`]).
    pub fn render_mode(&self) -> crate::render::Mode {
        self.view.settings.mode
    }
    /// Switches between path tracing and the scene's mode (shaded where the scene itself
    /// path-traces); returns the mode now in use. The picture is rendered again at once.
    pub fn toggle_path_tracing(&mut self) -> crate::render::Mode {
        use crate::render::Mode;
        let to = match (self.view.settings.mode, self.scene.view.settings.mode) {
            (Mode::Path, Mode::Path) => Mode::Shaded,
            (Mode::Path, scene) => scene,
            _ => Mode::Path,
        };
        self.path_progress = PathProgress::starting(self.now());
        self.view_mut().settings.mode = to;
        to
    }
    /// Whether path mode shows the denoised mean (the default; `SUPERCELL_DENOISE=off` or
    /// [`Player::toggle_denoise`] shows the raw mean).
    pub fn path_denoise(&self) -> bool {
        self.renderer.path_denoise()
    }
    /// Switches the path tracer's denoiser on or off and, path-tracing, shows the picture
    /// again at once from the samples it has (none are added or dropped: the accumulation
    /// is the same either way); returns whether it is on now.
    pub fn toggle_denoise(&mut self) -> Result<bool, PlayError> {
        let on = !self.renderer.path_denoise();
        self.renderer.set_path_denoise(on);
        if self.view.settings.mode == crate::render::Mode::Path {
            // A render in flight was recorded with the previous setting: let it land first.
            self.complete_render(true)?;
            if self.renderer.path_samples() > 0 {
                self.renderer.show_path(on)?;
            }
        }
        Ok(on)
    }
    /// Path mode: samples per pixel the refinement added per second over the last second
    /// of wall time (0 when none were added then).
    pub fn path_samples_per_second(&self) -> f64 {
        self.path_progress.per_second(self.now())
    }
    /// Path mode: what the refinement is doing now: "refining" (paused, adding samples),
    /// "converged" (the cap `path_max_samples` reached), "playing" (each shown frame gets
    /// `path_samples_per_frame` only, so playback is not delayed) or "view changing" (the
    /// camera or the settings changed within the last half second; every change restarts
    /// the picture). `None` outside path mode.
    pub fn path_state(&self) -> Option<&'static str> {
        let s = &self.view.settings;
        if s.mode != crate::render::Mode::Path {
            return None;
        }
        Some(if self.is_playing() {
            "playing"
        } else if self.view_dirty || self.now() - self.path_progress.view_changed_at < 0.5 {
            "view changing"
        } else if self.renderer.path_samples() >= s.path_max_samples {
            "converged"
        } else {
            "refining"
        })
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
        self.path_progress.view_changed_at = self.now();
        &mut self.view
    }
    /// What the user should be told about the scene's data: attributes empty in the first
    /// frame and where their data starts (looks suggested for a dataset without a scene).
    pub fn scene_notes(&self) -> &[String] {
        self.scene
            .suggestion
            .as_ref()
            .map_or(&[], |s| s.notes.as_slice())
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
            p.stream.drain(end);
        }
    }
}

/// The part size a run forces on the renderer and the slots (`cfg.part_bytes`, checked);
/// `None`: the renderer's device decides (the largest power of two its buffers and storage
/// bindings hold).
fn forced_part_bytes(cfg: &PlayerConfig) -> Result<Option<u64>, PlayError> {
    cfg.part_bytes
        .map(|b| crate::gpu::check_part_bytes(b, "the part size"))
        .transpose()
        .map_err(PlayError::from)
}

/// How many slots each path holds and how they are cut into parts: what `--slots` asks for
/// (refused where it does not fit), else the memory-based default, fewer where the GPU or
/// host cannot hold that many. Per slot the player holds a host slot (two with the
/// loopback path), a device buffer the host route binds, and on the direct path a shared
/// slot.
fn plan_player_slots(
    renderer: &Renderer,
    interop: Option<&(&crate::gpu::Gpu, &crate::gpu::InteropDevice)>,
    source: &Source,
    cfg: &PlayerConfig,
) -> Result<SlotPlan, PlayError> {
    let (frame, frame_bytes) = source
        .frames
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u32, f.len))
        .max_by_key(|&(i, len)| (len, std::cmp::Reverse(i)))
        .unwrap_or((0, 4096));
    let gpu_free = interop
        .and_then(|(g, _)| g.mem_info().ok())
        .map(|(free, _)| free as u64);
    let host = crate::memory::available().bytes;
    let demand = SlotDemand {
        frame,
        frame_bytes: frame_bytes.max(1),
        part_bytes: renderer.part_bytes(),
        // A slot holds the whole frame, but the renderer binds only the parts the shown
        // grids span (Player::check_shown judges those).
        max_parts: usize::MAX,
        host_per_slot: if cfg.loopback_direct { 2 } else { 1 },
        gpu_per_slot: if interop.is_some() { 2 } else { 1 },
        gpu_fixed: 0,
    };
    let wanted = cfg.slots.unwrap_or_else(|| {
        ring_slots(frame_bytes as usize, host.min(gpu_free.unwrap_or(u64::MAX)))
    });
    crate::gpu::plan_slots(
        &demand,
        wanted,
        cfg.slots.is_some(),
        crate::stream::MIN_SLOTS,
        Some(host),
        gpu_free,
    )
    .map_err(PlayError::Usage)
}

/// Binds the grids of `frame` in the scene's slots that `shown` marks to the renderer, from
/// the buffers of the slot parts holding the frame (in order; every part but the last holds
/// `part_bytes`, the renderer's part size). The renderer binds only the parts those grids
/// span.
///
/// The one place a frame meets the renderer: each grid is located by its frame offset, as
/// a part and an offset inside it, and may run on into the following parts.
fn bind_frame(
    renderer: &mut Renderer,
    scene: &LoadedScene,
    frame: usize,
    parts: &[wgpu::Buffer],
    part_bytes: u64,
    shown: &[bool],
) -> Result<(), PlayError> {
    let mut grids = scene.grids_in_parts(frame, part_bytes)?;
    for (i, g) in grids.iter_mut().enumerate() {
        if !shown.get(i).copied().unwrap_or(false) {
            *g = None;
        }
    }
    let parts: Vec<SlotPart<'_>> = parts
        .iter()
        .map(|buffer| SlotPart {
            buffer,
            offset: 0,
            size: buffer.size().min(part_bytes),
        })
        .collect();
    renderer.set_frame(&parts, &grids)?;
    Ok(())
}

mod attributes;
mod looks;
pub use looks::{SavedScene, look_problem};
mod progress;
mod sampling;

use progress::PathProgress;
