//! The player's presenter: the view (camera, looks, attributes shown, render settings) and
//! the renderer it draws with: which frame's buffers are bound, the render in flight and,
//! path-tracing, the path tracer's progress.
//!
//! Overlap: a render is submitted without waiting ([`Renderer::submit_timed`]); the next
//! frame's host-side work runs while the GPU renders, and the player waits for that render
//! only just before it submits the next one. One render is in flight at a time.
//!
//! The presenter knows nothing of where frames come from: it is handed the GPU buffers of a
//! frame's slot parts to bind, and says when a render has finished.

use std::time::Instant;

use crate::app::config::{PathSel, PlayError};
use crate::render::{FrameCapacity, Mode, Renderer, SlotPart, View};
use crate::scene::{LoadedScene, Scene};

mod attributes;
mod looks;
mod progress;
mod sampling;

pub use looks::{SavedScene, look_problem};
use progress::TracerProgress;

/// What to record once the render in flight has finished.
#[derive(Clone, Copy, Debug)]
pub(super) struct RenderInFlight {
    /// The path whose newly shown frame it renders (`None`: the same frame, new view).
    pub(super) new_frame_on: Option<PathSel>,
    /// When the scrub it completes was asked for.
    pub(super) scrub_asked: Option<Instant>,
}

/// A render seen finished ([`Presenter::complete_render`]).
#[derive(Clone, Copy, Debug)]
pub(super) struct FinishedRender {
    /// When it was seen finished (seconds since the player started).
    pub(super) at: f64,
    /// Its GPU time, ms (the last one known, where this render has no timestamps).
    pub(super) gpu_ms: Option<f64>,
    /// What it was submitted for.
    pub(super) what: RenderInFlight,
}

/// The frame the renderer binds: its parts (cloned handles) and the attributes bound.
struct BoundFrame {
    frame: usize,
    parts: Vec<wgpu::Buffer>,
    /// The dataset attribute bound in each slot (`None`: hidden or empty).
    shown: Vec<Option<usize>>,
}

/// The view and the renderer; see the module documentation.
pub(super) struct Presenter {
    scene: LoadedScene,
    renderer: Renderer,
    view: View,
    view_dirty: bool,
    size: (u32, u32),
    /// The part size the frames' slots are cut into (every part but a slot's last holds
    /// this many bytes).
    part_bytes: u64,
    /// The start of the clock the path tracer's progress is timed on.
    epoch: Instant,
    last_gpu_ms: Option<f64>,
    /// Path mode: the refinement's progress (samples per pixel added by recent renders).
    tracer: TracerProgress,
    /// The render submitted and not yet seen complete.
    in_flight: Option<RenderInFlight>,
    /// The parts of the frame bound to the renderer and which attributes were shown then:
    /// a view showing others binds that frame's grids again before it renders.
    bound: Option<BoundFrame>,
}

/// The dataset attribute each slot shows: `slots[i]` where the view shows slot i.
fn shown_attributes(view: &View, slots: &[Option<usize>]) -> Vec<Option<usize>> {
    shown_slots(view)
        .iter()
        .zip(slots)
        .map(|(&on, &a)| a.filter(|_| on))
        .collect()
}

/// Which of a view's attribute slots are shown (bound and drawn).
fn shown_slots(view: &View) -> Vec<bool> {
    view.attributes
        .iter()
        .map(|a| a.as_ref().is_some_and(|a| a.enabled))
        .collect()
}

impl Presenter {
    /// Shows `scene`'s view with `renderer` at `size`, binding frames cut into parts of
    /// `part_bytes`; `epoch` starts the clock (the player's).
    pub(super) fn new(
        scene: LoadedScene,
        renderer: Renderer,
        size: (u32, u32),
        part_bytes: u64,
        epoch: Instant,
    ) -> Presenter {
        Presenter {
            view: scene.view.clone(),
            scene,
            renderer,
            view_dirty: true,
            size,
            part_bytes,
            epoch,
            last_gpu_ms: None,
            tracer: TracerProgress::starting(0.0),
            in_flight: None,
            bound: None,
        }
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// The scene played (its dataset, slots and looks as opened).
    pub(super) fn scene(&self) -> &LoadedScene {
        &self.scene
    }

    /// Binds `frame`, whose slot parts are the buffers `parts` (in order), to the renderer:
    /// the grids of the attributes the view shows. No render may be in flight.
    pub(super) fn bind(&mut self, frame: u32, parts: Vec<wgpu::Buffer>) -> Result<(), PlayError> {
        let shown = shown_attributes(&self.view, &self.scene.slots);
        bind_frame(
            &mut self.renderer,
            &self.scene,
            frame as usize,
            &parts,
            self.part_bytes,
            &shown_slots(&self.view),
        )?;
        self.bound = Some(BoundFrame {
            frame: frame as usize,
            parts,
            shown,
        });
        Ok(())
    }

    /// Submits a render of the bound frame with the view as it is now, recording `what`
    /// to report once it has finished. The render before must have been seen finished
    /// ([`Presenter::complete_render`]).
    pub(super) fn submit(&mut self, what: RenderInFlight) -> Result<(), PlayError> {
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
                self.part_bytes,
                &shown_slots(&self.view),
            )?;
            b.shown = shown;
        }
        let (w, h) = self.size;
        self.renderer.submit_timed(&self.view, w, h)?;
        self.in_flight = Some(what);
        self.view_dirty = false;
        Ok(())
    }

    /// The render in flight once it has finished: waits for it with `wait`, else only
    /// looks (`None`: none was in flight, or it is still running).
    pub(super) fn complete_render(
        &mut self,
        wait: bool,
    ) -> Result<Option<FinishedRender>, PlayError> {
        if self.in_flight.is_none() || (!wait && !self.renderer.pending_done()) {
            return Ok(None);
        }
        let timing = self.renderer.finish_pending()?;
        let Some(what) = self.in_flight.take() else {
            return Ok(None);
        };
        if let Some(t) = timing {
            self.last_gpu_ms = t.gpu_ms;
        }
        let now = self.now();
        if self.view.settings.mode == Mode::Path {
            self.tracer.rendered(now, self.renderer.tracer_samples());
        }
        Ok(Some(FinishedRender {
            at: now,
            gpu_ms: self.last_gpu_ms,
            what,
        }))
    }

    /// Whether the render in flight completes a scrub.
    pub(super) fn scrub_in_flight(&self) -> bool {
        self.in_flight.is_some_and(|r| r.scrub_asked.is_some())
    }

    /// Whether the frame on screen should be rendered again: the view changed, or the path
    /// tracer should add samples (`playing`: playback runs).
    pub(super) fn wants_render(&self, playing: bool) -> bool {
        self.view_dirty || self.tracer_refining(playing)
    }

    /// Whether the path-traced picture should take more samples now: path mode, paused
    /// (`playing` false), the last render finished and the image short of
    /// `path_max_samples` (each render adds `path_samples_per_frame`; any change of frame
    /// or view starts it afresh).
    fn tracer_refining(&self, playing: bool) -> bool {
        let s = &self.view.settings;
        s.mode == Mode::Path
            && !playing
            && self.in_flight.is_none()
            && self.renderer.tracer_samples() < s.path_max_samples
    }

    /// Path mode: samples per pixel in the picture on screen.
    pub(super) fn tracer_samples(&self) -> u32 {
        self.renderer.tracer_samples()
    }

    /// Switches between path tracing and the scene's mode (shaded where the scene itself
    /// path-traces); returns the mode now in use.
    pub(super) fn toggle_path_tracing(&mut self) -> Mode {
        let to = match (self.view.settings.mode, self.scene.view.settings.mode) {
            (Mode::Path, Mode::Path) => Mode::Shaded,
            (Mode::Path, scene) => scene,
            _ => Mode::Path,
        };
        self.tracer = TracerProgress::starting(self.now());
        self.view_mut().settings.mode = to;
        to
    }

    /// Whether path mode shows the denoised mean.
    pub(super) fn tracer_denoise(&self) -> bool {
        self.renderer.tracer_denoise()
    }

    /// Switches the path tracer's denoiser on or off; returns whether it is on now.
    pub(super) fn flip_tracer_denoise(&mut self) -> bool {
        let on = !self.renderer.tracer_denoise();
        self.renderer.set_tracer_denoise(on);
        on
    }

    /// Shows the path tracer's picture again from the samples it has (denoised with
    /// `denoise`), where it has any. No render may be in flight.
    pub(super) fn show_tracer_picture(&mut self, denoise: bool) -> Result<(), PlayError> {
        if self.renderer.tracer_samples() > 0 {
            self.renderer.show_tracer(denoise)?;
        }
        Ok(())
    }

    /// Path mode: samples per pixel the refinement added per second over the last second.
    pub(super) fn tracer_samples_per_second(&self) -> f64 {
        self.tracer.per_second(self.now())
    }

    /// Path mode: what the refinement is doing now (see `Player::tracer_state`; `playing`:
    /// playback runs). `None` outside path mode.
    pub(super) fn tracer_state(&self, playing: bool) -> Option<&'static str> {
        let s = &self.view.settings;
        if s.mode != Mode::Path {
            return None;
        }
        Some(if playing {
            "playing"
        } else if self.view_dirty || self.now() - self.tracer.view_changed_at < 0.5 {
            "view changing"
        } else if self.renderer.tracer_samples() >= s.path_max_samples {
            "converged"
        } else {
            "refining"
        })
    }

    /// GPU time of the last render, ms (where timestamps exist).
    pub(super) fn last_gpu_ms(&self) -> Option<f64> {
        self.last_gpu_ms
    }

    /// The view (camera, attributes, settings).
    pub(super) fn view(&self) -> &View {
        &self.view
    }

    /// Changes the view; the frame on screen is rendered again.
    pub(super) fn view_mut(&mut self) -> &mut View {
        self.view_dirty = true;
        self.tracer.view_changed_at = self.now();
        &mut self.view
    }

    /// Render size.
    pub(super) fn size(&self) -> (u32, u32) {
        self.size
    }

    /// Changes the render size; a new aspect refits the scene's camera (and its camera
    /// path) to the data and keeps what the user framed in sight.
    pub(super) fn set_size(&mut self, width: u32, height: u32) {
        let (w, h) = (width.max(1), height.max(1));
        if (w, h) != self.size {
            self.size = (w, h);
            self.view.camera = self.scene.set_aspect(w as f32 / h as f32, self.view.camera);
            self.view_dirty = true;
        }
    }

    /// The renderer (its output and read-back).
    pub(super) fn renderer(&self) -> &Renderer {
        &self.renderer
    }
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
