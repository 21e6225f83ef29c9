//! The player core, without a window: it owns the dataset's two frame paths and the
//! presenter that shows their frames, and wires them. The window and the headless run both
//! drive [`Player::tick`].
//!
//! - The frame paths (`frame_paths`): the *direct* path (GDS engine, falling back to
//!   staged with the reason, into ring slots that are wgpu buffers CUDA writes, see
//!   [`super::direct`]) and the *host* path (cpu-only engine, io_uring with O_DIRECT where
//!   the file system allows, portable with the reason where it cannot open, into
//!   page-aligned host slots the GPU copies from, or the CPU through a staging buffer: the
//!   upload routes of `route`). Each is a [`FrameStream`](crate::stream::FrameStream); both
//!   answer to the one [`Scheduler`](crate::pipeline::Scheduler), which only the active path
//!   is fed from. A path switched away from drains on its own: its reads still out are stale
//!   and never reach the scheduler.
//! - The presenter (`presenter`): the view, the frame bound to the renderer and the
//!   render in flight. A render is submitted without waiting; the next frame's host-side
//!   work (the host path's copy into staging, reads landing) runs while the GPU renders,
//!   and the player waits for that render only just before it submits the next one.
//!
//! Neither knows the other: the player hands a staged frame's buffers to the presenter and
//! each finished render's figures to the frame paths.
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
use super::direct::no_sharing_reason;
pub use super::faults::{FrameFault, FrameFaultKind};
pub use super::path::{PathReport, ring_slots};
use super::stats::{PathFigures, PathStats};
use crate::gpu::SlotPlan;
use crate::ingest::Source;
use crate::pipeline::{Direction, PlayMode};
use crate::render::{Renderer, TransferFunction, View};
use crate::scene::{Scene, ValueSummary};

mod frame_paths;
mod presenter;

use frame_paths::FramePaths;
use presenter::{Presenter, RenderInFlight};
pub use presenter::{SavedScene, look_problem};

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
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// The two frame paths, the scheduler, faults and per-path statistics.
    frames: FramePaths,
    /// The view, the renderer, the frame bound and the render in flight.
    presenter: Presenter,
}

/// The scene file or dataset directory at `path`, loaded ([`Scene::load`]).
pub(crate) fn load_scene(path: &Path) -> Result<Scene, PlayError> {
    Ok(Scene::load(path)?)
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
        // A dataset split into bricks holds no whole grid to bind (render --split space).
        scene.dataset.check_whole_grids()?;
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
        renderer.set_tracer_denoise(cfg.path_denoise);
        let slot_plan =
            frame_paths::plan_slots(renderer.part_bytes(), interop.as_ref().ok(), &source, cfg)?;
        let part_bytes = slot_plan.part_bytes;
        let epoch = Instant::now();
        let frames = FramePaths::open(
            device,
            queue,
            interop,
            source,
            slot_plan,
            (cfg, start_frame),
            epoch,
        )?;
        let presenter = Presenter::new(scene, renderer, (cfg.width, cfg.height), part_bytes, epoch);
        Ok(Player {
            device: device.clone(),
            queue: queue.clone(),
            frames,
            presenter,
        })
    }

    /// Advances everything once: collects arrivals, issues reads, lets the scheduler pick the
    /// frame to show, and renders when the frame or the view changed.
    pub fn tick(&mut self) -> Result<TickOutcome, PlayError> {
        self.complete_render(false)?;
        self.frames.collect(&self.presenter.scene().dataset)?;
        let now = self.frames.now();
        let mut out = TickOutcome::default();
        if let Some(f) = self.frames.next_to_show(now) {
            self.show(f)?;
            out.shown = Some(f);
            out.rendered = true;
        } else if self.presenter.wants_render(self.is_playing()) && self.shown_frame().is_some() {
            self.render()?;
            out.rendered = true;
        }
        self.frames.sample(now);
        Ok(out)
    }

    /// Waits up to `timeout` for an arrival on the active path (to idle without spinning).
    pub fn wait(&mut self, timeout: Duration) {
        self.frames.wait(timeout, &self.presenter.scene().dataset);
    }

    /// Shows `frame` (resident on the active path): takes its slot, waits for the render in
    /// flight, binds the frame and submits its render; then the slot of the frame shown
    /// before goes back to its engine, as no render reads it any more.
    fn show(&mut self, frame: u32) -> Result<(), PlayError> {
        let mut staged = self.frames.stage(frame)?;
        // The previous frame's render must be done before its slot goes back to the engine
        // (below) and before the renderer's timestamp buffer is reused.
        self.complete_render(true)?;
        self.presenter
            .bind(frame, std::mem::take(&mut staged.parts))?;
        let (prev, scrub_asked) = self.frames.mark_shown(&staged);
        self.submit_render(RenderInFlight {
            new_frame_on: Some(self.frames.active()),
            scrub_asked,
        })?;
        self.frames.retire(prev);
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
        self.presenter.submit(what)
    }

    /// Records the render in flight once it has finished (in its path's statistics): waits
    /// for it with `wait`, else only looks.
    fn complete_render(&mut self, wait: bool) -> Result<(), PlayError> {
        if let Some(done) = self.presenter.complete_render(wait)? {
            let RenderInFlight {
                new_frame_on,
                scrub_asked,
            } = done.what;
            self.frames
                .rendered(done.at, done.gpu_ms, new_frame_on, scrub_asked);
        }
        Ok(())
    }

    /// Switches to `sel` at run time. The old path's queued requests are dropped, its reads
    /// not yet issued are cancelled, and what is in flight is discarded as it lands; the
    /// frame on screen stays until the new path delivers the same frame. Errors (with the
    /// reason) when the path cannot run here.
    pub fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        self.frames.set_path(sel)
    }

    /// Flips between direct and host (see [`Player::set_path`]).
    pub fn toggle_path(&mut self) -> Result<PathSel, String> {
        let to = self.frames.active().other();
        self.set_path(to).map(|()| to)
    }

    /// Jumps to `frame` (clamped); the time until that exact frame is shown is recorded as
    /// the scrub latency.
    pub fn scrub(&mut self, frame: u32) {
        self.frames.scrub(frame);
    }

    /// While dragging, nearby arrived frames are shown until the exact one arrives.
    pub fn set_dragging(&mut self, dragging: bool) {
        self.frames.set_dragging(dragging);
    }

    /// One frame forward or back (pauses).
    pub fn step(&mut self, direction: Direction) {
        self.frames.step(direction);
    }

    /// Play or pause.
    pub fn set_playing(&mut self, playing: bool) {
        self.frames.scheduler_mut().set_playing(playing);
    }
    /// Whether playing.
    pub fn is_playing(&self) -> bool {
        self.frames.scheduler().is_playing()
    }
    /// Playback direction.
    pub fn direction(&self) -> Direction {
        self.frames.scheduler().direction()
    }
    /// Sets the playback direction.
    pub fn set_direction(&mut self, d: Direction) {
        self.frames.scheduler_mut().set_direction(d);
    }
    /// End-of-timeline behaviour.
    pub fn mode(&self) -> PlayMode {
        self.frames.scheduler().config().mode
    }
    /// Sets the end-of-timeline behaviour.
    pub fn set_mode(&mut self, m: PlayMode) {
        self.frames.scheduler_mut().set_mode(m);
    }
    /// Playback rate (`None`: as fast as frames arrive).
    pub fn speed(&self) -> Option<f64> {
        self.frames.scheduler().config().speed_fps
    }
    /// Sets the playback rate.
    pub fn set_speed(&mut self, fps: Option<f64>) {
        self.frames.scheduler_mut().set_speed(fps);
    }
    /// The frame at the playhead (shown, or being fetched after a scrub).
    pub fn position(&self) -> u32 {
        self.frames.scheduler().position()
    }
    /// Whether a jump to `frame` has ended on a frame that cannot be shown: the playhead is
    /// there and the frame is damaged (its read failed, timed out, or its bytes failed a
    /// check; a jump to the frame already at the playhead does not read it again).
    pub fn jumped_to_damaged(&self, frame: u32) -> bool {
        self.frames.jumped_to_damaged(frame)
    }
    /// The frame on screen.
    pub fn shown_frame(&self) -> Option<u32> {
        self.frames.shown_frame()
    }
    /// Frames in the dataset.
    pub fn frame_count(&self) -> u32 {
        self.frames.frame_count()
    }
    /// Simulation time of `frame`.
    pub fn frame_time(&self, frame: u32) -> f64 {
        self.presenter
            .scene()
            .dataset
            .frame(frame as usize)
            .map_or(0.0, |f| f.time)
    }
    /// Bytes of `frame`'s slot image.
    pub fn frame_bytes(&self, frame: u32) -> u64 {
        self.frames
            .source()
            .frames
            .get(frame as usize)
            .map_or(0, |f| f.len)
    }
    /// Mean slot-image bytes per frame over the dataset.
    pub fn mean_frame_bytes(&self) -> f64 {
        let frames = &self.frames.source().frames;
        let n = frames.len().max(1) as f64;
        frames.iter().map(|f| f.len as f64).sum::<f64>() / n
    }
    /// The path showing frames.
    pub fn active_path(&self) -> PathSel {
        self.frames.active()
    }
    /// Why the direct path cannot run here, if it cannot.
    pub fn direct_unavailable(&self) -> Option<&str> {
        self.frames.direct_unavailable()
    }
    /// Availability and mode of a path.
    pub fn path_report(&self, sel: PathSel) -> PathReport {
        self.frames.report(sel)
    }
    /// Figures of a path as of now.
    pub fn figures(&self, sel: PathSel) -> PathFigures {
        self.frames.figures(sel)
    }
    /// Rolling statistics of a path (plot series, scrub latencies).
    pub fn stats(&self, sel: PathSel) -> &PathStats {
        self.frames.stats(sel)
    }
    /// Clears a path's statistics.
    pub fn reset_stats(&mut self, sel: PathSel) {
        self.frames.reset_stats(sel);
    }
    /// Seconds since the player started (the time axis of the statistics).
    pub fn clock(&self) -> f64 {
        self.frames.now()
    }
    /// Latency of the last completed scrub, ms.
    pub fn last_scrub_ms(&self) -> Option<f64> {
        self.frames.last_scrub_ms()
    }
    /// Frame reads the engines gave up part-way because the player cancelled them (a jump
    /// or a pause abandoned the read-ahead, or the path was switched).
    pub fn cancelled_reads(&self) -> u64 {
        self.frames.cancelled_reads()
    }
    /// The scheduler's counters (frames shown, stalls, cancelled and aborted reads).
    pub fn scheduler_stats(&self) -> crate::pipeline::SchedulerStats {
        self.frames.scheduler().stats()
    }
    /// Whether a scrub is still waiting for its frame to be rendered.
    pub fn scrub_pending(&self) -> bool {
        self.frames.scrub_waiting() || self.presenter.scrub_in_flight()
    }
    /// The latest frame faults (read errors, time-outs, damaged headers), oldest first.
    pub fn faults(&self) -> impl ExactSizeIterator<Item = &FrameFault> {
        self.frames.faults().latest.iter()
    }
    /// Frame faults since the start (the list keeps the latest 1000).
    pub fn fault_count(&self) -> u64 {
        self.frames.faults().count
    }
    /// Frames marked damaged now, with why; a frame leaves the list when it plays.
    pub fn damaged_frames(&self) -> &BTreeMap<u32, FrameFaultKind> {
        self.frames.damaged_frames()
    }
    /// Damaged frames that played later (read again once their lane came back).
    pub fn recovered_frames(&self) -> u64 {
        self.frames.faults().recovered
    }
    /// Slots of the active path reserved by timed-out reads still out.
    pub fn held_slots(&self) -> usize {
        self.frames.held_slots()
    }

    /// The last error (a failed read), if any.
    pub fn last_error(&self) -> Option<&str> {
        self.frames.last_error()
    }
    /// GPU memory the player allocated for frames (slots and upload buffers), bytes.
    pub fn gpu_buffer_bytes(&self) -> u64 {
        self.frames.gpu_buffer_bytes()
    }
    /// Bytes of one slot.
    pub fn slot_len(&self) -> usize {
        self.frames.slot_plan().slot_bytes as usize
    }
    /// Ring slots per path.
    pub fn slots(&self) -> usize {
        self.frames.slot_plan().slots
    }
    /// How many slots each path holds, of what parts, the memory they take, and why.
    pub fn slot_plan(&self) -> &SlotPlan {
        self.frames.slot_plan()
    }
    /// Reads in flight on the active path (frames).
    pub fn in_flight(&self) -> usize {
        self.frames.in_flight()
    }
    /// Path mode: samples per pixel in the picture on screen.
    pub fn tracer_samples(&self) -> u32 {
        self.presenter.tracer_samples()
    }
    /// The render mode in use (the scene's, or path tracing after
    /// [`Player::toggle_path_tracing`]).
    pub fn render_mode(&self) -> crate::render::Mode {
        self.presenter.view().settings.mode
    }
    /// Switches between path tracing and the scene's mode (shaded where the scene itself
    /// path-traces); returns the mode now in use. The picture is rendered again at once.
    pub fn toggle_path_tracing(&mut self) -> crate::render::Mode {
        self.presenter.toggle_path_tracing()
    }
    /// Whether path mode shows the denoised mean (the default; `SUPERCELL_DENOISE=off` or
    /// [`Player::toggle_denoise`] shows the raw mean).
    pub fn tracer_denoise(&self) -> bool {
        self.presenter.tracer_denoise()
    }
    /// Switches the path tracer's denoiser on or off and, path-tracing, shows the picture
    /// again at once from the samples it has (none are added or dropped: the accumulation
    /// is the same either way); returns whether it is on now.
    pub fn toggle_denoise(&mut self) -> Result<bool, PlayError> {
        let on = self.presenter.flip_tracer_denoise();
        if self.render_mode() == crate::render::Mode::Path {
            // A render in flight was recorded with the previous setting: let it land first.
            self.complete_render(true)?;
            self.presenter.show_tracer_picture(on)?;
        }
        Ok(on)
    }
    /// Path mode: samples per pixel the refinement added per second over the last second
    /// of wall time (0 when none were added then).
    pub fn tracer_samples_per_second(&self) -> f64 {
        self.presenter.tracer_samples_per_second()
    }
    /// Path mode: what the refinement is doing now: "refining" (paused, adding samples),
    /// "converged" (the cap `path_max_samples` reached), "playing" (each shown frame gets
    /// `path_samples_per_frame` only, so playback is not delayed) or "view changing" (the
    /// camera or the settings changed within the last half second; every change restarts
    /// the picture). `None` outside path mode.
    pub fn tracer_state(&self) -> Option<&'static str> {
        self.presenter.tracer_state(self.is_playing())
    }
    /// GPU time of the last render, ms (where timestamps exist).
    pub fn last_gpu_ms(&self) -> Option<f64> {
        self.presenter.last_gpu_ms()
    }

    /// The view (camera, attributes, settings).
    pub fn view(&self) -> &View {
        self.presenter.view()
    }
    /// Changes the view; the shown frame is rendered again on the next tick.
    pub fn view_mut(&mut self) -> &mut View {
        self.presenter.view_mut()
    }
    /// What the user should be told about the scene's data: attributes empty in the first
    /// frame and where their data starts (looks suggested for a dataset without a scene).
    pub fn scene_notes(&self) -> &[String] {
        self.presenter
            .scene()
            .suggestion
            .as_ref()
            .map_or(&[], |s| s.notes.as_slice())
    }
    /// The scene's original view (for "reset camera").
    pub fn scene_view(&self) -> &View {
        &self.presenter.scene().view
    }
    /// Whether the scene has a camera path (the kiosk flies it).
    pub fn has_camera_path(&self) -> bool {
        self.presenter.scene().camera_path.is_some()
    }
    /// The scene's camera at `time_s` seconds along its camera path (its camera without one).
    pub fn scene_camera_at(&self, time_s: f64) -> crate::render::Camera {
        self.presenter.scene().camera_at(time_s)
    }
    /// Render size.
    pub fn size(&self) -> (u32, u32) {
        self.presenter.size()
    }
    /// Changes the render size (the window's). A new aspect refits the scene's camera (and
    /// its camera path) to the data and keeps what the user framed in sight
    /// ([`crate::scene::Framing`]).
    pub fn set_size(&mut self, width: u32, height: u32) {
        self.presenter.set_size(width, height);
    }
    /// The rendered image (rgba8, sRGB-encoded values in a `Rgba8Unorm` texture).
    pub fn output(&self) -> Option<&wgpu::Texture> {
        self.presenter.renderer().output()
    }
    /// Reads the rendered image back.
    pub fn read_image(&self) -> Result<crate::render::Image, PlayError> {
        Ok(self.presenter.renderer().read_image()?)
    }
    /// Reads the rendered picture back without its linear image (see
    /// [`crate::render::Renderer::read_picture`]).
    pub fn read_picture(&self) -> Result<crate::render::Image, PlayError> {
        Ok(self.presenter.renderer().read_picture()?)
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
        self.presenter.scene().dataset.manifest()
    }

    /// Waits for the render in flight, if any, and records it in the figures (a render is
    /// counted once it has finished: at the next tick, else here).
    pub fn finish_render(&mut self) -> Result<(), PlayError> {
        self.complete_render(true)
    }

    /// Stops issuing reads and waits (up to `timeout`) for reads in flight to land, so the
    /// engines shut down idle.
    pub fn drain(&mut self, timeout: Duration) {
        if let Err(e) = self.complete_render(true) {
            self.frames.note_error(e.to_string());
        }
        self.frames.drain(Instant::now() + timeout);
    }
}

/// The view's attributes and looks, and the scene saved from them (the presenter's).
impl Player {
    /// Shows or hides the attribute in view slot `i`. Showing one is refused, with a message
    /// naming the attributes, their bytes and the device's limit, where the attributes then
    /// shown span more parts in some frame than the renderer binds at once (a frame larger
    /// than that renders as long as the grids shown fit).
    pub fn set_attribute_shown(&mut self, i: usize, on: bool) -> Result<(), String> {
        self.presenter.set_attribute_shown(i, on)
    }
    /// The dataset's attributes (all of them, in manifest order) and whether each is shown.
    pub fn dataset_attributes(&self) -> Vec<(String, bool)> {
        self.presenter.dataset_attributes()
    }
    /// Shows or hides dataset attribute `a` (manifest order), whether or not the scene
    /// names it. One not in a slot takes a new slot (the transfer function its name's
    /// preset gives, over the attribute's value range), or the first hidden one where all
    /// [`MAX_ATTRIBUTES`](crate::render::MAX_ATTRIBUTES) are taken; with that many shown
    /// it is refused, as is a choice whose grids do not fit the parts the device binds
    /// ([`Player::set_attribute_shown`]).
    pub fn set_dataset_attribute_shown(&mut self, a: usize, on: bool) -> Result<(), String> {
        self.presenter.set_dataset_attribute_shown(a, on)
    }
    /// Refuses a choice of shown slots (`shown[i]`: slot i shown) whose grids span, in some
    /// frame, more parts than the renderer binds: the message names the attributes and their
    /// bytes in the frame that needs the most parts, the parts and the limit.
    pub fn check_shown(&self, shown: &[bool]) -> Result<(), String> {
        self.presenter.check_shown(shown)
    }
    /// The dataset attribute (manifest index) each view slot shows, per slot: what a
    /// legend keys ([`crate::app::legend::Annotation::for_view`]).
    pub fn attribute_slots(&self) -> &[Option<usize>] {
        self.presenter.attribute_slots()
    }
    /// Attribute names per view slot.
    pub fn attribute_names(&self) -> Vec<String> {
        self.presenter.attribute_names()
    }
    /// The dataset's attributes in manifest order: name and units (`None` where the
    /// manifest gives none).
    pub fn attribute_units(&self) -> Vec<(String, Option<String>)> {
        self.presenter.attribute_units()
    }
    /// The shown attributes: dataset attribute (manifest order) and its look, slot order.
    pub fn shown_looks(&self) -> Vec<(usize, TransferFunction)> {
        self.presenter.shown_looks()
    }
    /// The look attribute `a` (manifest order) has in its view slot, shown or not; `None`
    /// where no slot holds it.
    pub fn look_of(&self, a: usize) -> Option<TransferFunction> {
        self.presenter.look_of(a)
    }
    /// The values of dataset attributes `attributes` (manifest order) at world positions
    /// `points` in the frame on screen: per point, one entry per attribute asked (`None`
    /// where the frame has no grid of it, or the grid is one the march does not read).
    /// Waits for the GPU; an error before a frame is on screen.
    pub fn sample_world(
        &mut self,
        attributes: &[usize],
        points: &[[f64; 3]],
    ) -> Result<Vec<Vec<Option<crate::render::PointSample>>>, PlayError> {
        self.presenter.sample_world(attributes, points)
    }
    /// The look the scene gave view slot `i` (for an attribute shown from the window, the
    /// preset of its name over the manifest's range, as it was first shown with).
    pub fn scene_look(&self, i: usize) -> Option<TransferFunction> {
        self.presenter.scene_look(i)
    }
    /// Gives view slot `i` the look `tf`; it shows from the next render on. Refused, saying
    /// why, for a slot without an attribute or a look that cannot be drawn ([`look_problem`]).
    pub fn set_look(&mut self, i: usize, tf: TransferFunction) -> Result<(), String> {
        self.presenter.set_look(i, tf)
    }
    /// What the first frames' values of view slot `i`'s attribute were (percentiles, from
    /// the sample that chose the looks of a dataset opened without a scene); None where no
    /// frame was sampled (a scene file, `--attributes`).
    pub fn value_summary(&self, i: usize) -> Option<&ValueSummary> {
        self.presenter.value_summary(i)
    }
    /// The manifest's smallest and largest value of view slot `i`'s attribute over all
    /// frames, and its unit, where the manifest records them.
    pub fn value_range(&self, i: usize) -> (Option<[f64; 2]>, Option<&str>) {
        self.presenter.value_range(i)
    }
    /// The scene that shows what the player shows now: the scene played, with every slot's
    /// look (range, colormap, opacity, medium, emission, shadows, albedo; its preset and
    /// extinction scale as the scene had them), whether it is shown, the camera (unless the
    /// scene flies a camera path), the render settings and the frame shown as the start.
    pub fn scene_as_shown(&self) -> Scene {
        self.presenter.scene_as_shown(self.start_frame_to_save())
    }
    /// Where [`Player::save_scene`] writes without a path: back into the scene file played
    /// (true), else a new file beside the dataset directory, `<dataset>.scene.toml` (or
    /// `-2`, `-3`, … where that exists).
    pub fn scene_file_to_save(&self) -> (std::path::PathBuf, bool) {
        self.presenter.scene_file_to_save()
    }
    /// Writes [`Player::scene_as_shown`] to `to` (None: [`Player::scene_file_to_save`]),
    /// atomically, once the text read back and opened shows the same looks, camera and
    /// settings as the player, bit for bit: an extinction the scene's preset and scale no
    /// longer give (an attribute shown from the window widens the world box that extinction
    /// scales with) gets the scale that gives it. An error says why nothing was written.
    pub fn save_scene(&self, to: Option<&Path>) -> Result<SavedScene, PlayError> {
        self.presenter.save_scene(to, self.start_frame_to_save())
    }
    /// The frame a saved scene starts at: the one shown, else the playhead's.
    fn start_frame_to_save(&self) -> u32 {
        self.shown_frame().unwrap_or_else(|| self.position())
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
