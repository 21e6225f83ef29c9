//! The window: winit 0.30 application, a wgpu surface on the player's device, the renderer's
//! image and the egui overlay composed into the swapchain, keys and mouse, kiosk mode and
//! scripted input.
//!
//! Composition: the renderer's `Rgba8Unorm` output (sRGB-encoded values) is copied into a
//! display texture of the same format and size, registered with egui and painted full-window
//! behind the overlay. egui treats texture values as gamma-encoded (as ours are) and blends in
//! gamma space on a non-sRGB swapchain, its preferred case, so the image reaches the screen
//! unchanged. (The copy keeps the egui bind group valid while the renderer resizes its
//! targets.) A screenshot renders the same egui output once more into an offscreen texture of
//! the swapchain's format and size, and reads that back.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use winit::application::ApplicationHandler;
use winit::event::{ElementState, MouseButton, MouseScrollDelta, WindowEvent};
use winit::event_loop::{ActiveEventLoop, ControlFlow, EventLoop};
use winit::keyboard::{Key, ModifiersState, NamedKey};
use winit::window::{Fullscreen, Window, WindowId};

use super::core::{PlayError, PlayerConfig};
use super::figures::render_mode_name;
use super::overlay::{self, PRESETS, UiRequest, UiState, zoom_for};
use super::script::{Action, Command, key_action};
use super::software::{self, Requested};
use crate::render::TransferFunction;

mod compose;
mod devices;
mod open;
mod play;
mod record;
use crate::app::gpus::MultiPlayer;
use compose::compose;
use devices::{open_devices, surface_config};
pub use open::{PlayOn, RanksPlay};
pub use record::RecordOptions;

/// What the window does.
#[derive(Clone, Debug)]
pub struct WindowOptions {
    /// The scene: loaded from a file or a dataset directory, or the built-in one.
    pub scene: crate::scene::Scene,
    /// Player settings (its size is replaced by the window's).
    pub player: PlayerConfig,
    /// Window size, render scale and step the command line fixed; the adapter's defaults
    /// fill in the rest ([`software::choose`]: smaller and coarser on a software adapter).
    pub requested: Requested,
    /// Start fullscreen.
    pub fullscreen: bool,
    /// Large print.
    pub large_print: bool,
    /// Plots shown at start.
    pub plots: bool,
    /// Seconds of history in the plots (at most 60).
    pub plot_window_s: f64,
    /// Help card shown at start.
    pub help: bool,
    /// Kiosk: camera flies, loops forever, no timeline.
    pub kiosk: bool,
    /// Flip direct/host on this period.
    pub toggle_every: Option<Duration>,
    /// Scripted input.
    pub script: Vec<Command>,
    /// Quit after this many frames have been shown.
    pub exit_after: Option<u64>,
    /// Where the players run: one GPU, several GPUs of this process (`--gpus`) or MPI
    /// ranks (this process rank 0, presenting).
    pub play_on: PlayOn,
    /// Tells the operator something that needs no answer (the binary prints it on stderr):
    /// a fullscreen the window manager did not honour.
    pub warn: fn(&str),
    /// Where Shift+R's movies go and which ffmpeg writes them.
    pub record: RecordOptions,
}

/// What can go wrong with the window.
#[derive(Debug, thiserror::Error)]
pub enum WindowError {
    /// No display to open a window on.
    #[error("cannot open a window (no display? use --headless): {0}")]
    NoDisplay(String),
    /// The player failed.
    #[error(transparent)]
    Play(#[from] PlayError),
    /// Ranks stopped answering (across MPI ranks): the caller ends the run
    /// ([`crate::cluster::Ranks::abort`]).
    #[error("{0}: a rank died or stopped answering")]
    Silent(crate::cluster::Silent),
    /// Anything else (surface, script files).
    #[error("{0}")]
    Other(String),
}

struct Gfx {
    window: Arc<Window>,
    surface: wgpu::Surface<'static>,
    config: wgpu::SurfaceConfiguration,
    /// The presenting device (GPU 0's with several GPUs).
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// What plays: the coordinator over one GPU or several (each player keeps its device).
    play: MultiPlayer,
    egui_ctx: egui::Context,
    egui_state: egui_winit::State,
    egui_renderer: egui_wgpu::Renderer,
    /// Display texture (sRGB view of the renderer's image), its egui id and size.
    display: Option<(wgpu::Texture, egui::TextureId, (u32, u32))>,
    image_fresh: bool,
    /// Shift+R's movie.
    recorder: record::Recorder,
}

/// Script progress: what the current command waits for.
enum Waiting {
    Until(Instant),
    Frames(u64),
    Shown(u32, Instant),
}

struct App {
    opts: WindowOptions,
    gfx: Option<Gfx>,
    ui: UiState,
    error: Option<WindowError>,
    script: VecDeque<Command>,
    waiting: Option<Waiting>,
    screenshot: Option<PathBuf>,
    mouse: (Option<(f64, f64)>, bool, bool),
    modifiers: ModifiersState,
    cpu_mark: (Instant, f64),
    gpu_mark: Instant,
    toggle_mark: Instant,
    last_frame: Instant,
    /// When the scene's camera path started flying (its clock).
    flight_start: Instant,
    /// The camera flies the scene's camera path: always in the kiosk; in the window until
    /// the user moves the camera (C, reset camera, flies it again).
    flying: bool,
    /// Why the direct path cannot run was said (on screen): the timed flips of
    /// `--toggle-every` do not say it again every period.
    said_direct_unavailable: bool,
    /// When to check that `--fullscreen` took (no window manager may honour it).
    fullscreen_check_at: Option<Instant>,
    /// Render at this fraction of the window (chosen once the adapter is known).
    render_scale: f32,
    /// Least time between two compositions (zero: as often as the event loop turns). On a
    /// software adapter every composition is CPU work taken from the ray-marcher.
    compose_every: Duration,
    /// When the last composition began.
    last_compose: Instant,
    /// Since when the window says that ranks stopped answering (it ends the run shortly).
    silent_since: Option<Instant>,
}

/// How long the window shows that ranks stopped answering before the run ends.
const SILENT_SHOWN: Duration = Duration::from_secs(3);

/// Opens the window and runs until it is closed, Esc, `quit` or `--exit-after`.
pub fn run(opts: WindowOptions) -> Result<(), WindowError> {
    let event_loop = EventLoop::new().map_err(|e| WindowError::NoDisplay(e.to_string()))?;
    event_loop.set_control_flow(ControlFlow::Poll);
    let now = Instant::now();
    let render_scale = opts.requested.render_scale.unwrap_or(1.0);
    let mut app = App {
        ui: UiState {
            help: opts.help,
            plots: opts.plots,
            // `init` makes a small window compact once the adapter has fixed its size.
            compact: false,
            large_print: opts.large_print,
            fullscreen: opts.fullscreen,
            kiosk: opts.kiosk,
            plot_window_s: opts.plot_window_s,
            ..UiState::new(opts.requested.window_size.unwrap_or(software::WINDOW))
        },
        script: opts.script.iter().cloned().collect(),
        opts,
        gfx: None,
        error: None,
        waiting: None,
        screenshot: None,
        mouse: (None, false, false),
        modifiers: ModifiersState::empty(),
        cpu_mark: (now, crate::probe::cpu_seconds()),
        gpu_mark: now,
        toggle_mark: now,
        last_frame: now,
        flight_start: now,
        flying: false,
        said_direct_unavailable: false,
        fullscreen_check_at: None,
        render_scale,
        compose_every: Duration::ZERO,
        last_compose: now,
        silent_since: None,
    };
    event_loop
        .run_app(&mut app)
        .map_err(|e| WindowError::Other(e.to_string()))?;
    if let Some(g) = app.gfx.as_mut() {
        if g.recorder.active() {
            (app.opts.warn)(&format!("at exit: {}", g.recorder.stop(&mut app.ui)));
        }
        g.play.drain(Duration::from_secs(5));
        // Across ranks: every rank is told to stop (each exits once it has).
        g.play.finish();
    }
    match app.error {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

fn render_size(window: (u32, u32), scale: f32) -> (u32, u32) {
    software::scaled(window, scale)
}

impl App {
    fn init(&mut self, event_loop: &ActiveEventLoop) -> Result<(), WindowError> {
        let (w, h) = self.ui.window_size;
        // Hidden until the adapter is known: a software one gets a smaller window.
        let mut attrs = Window::default_attributes()
            .with_title("supercell")
            .with_visible(false)
            .with_inner_size(winit::dpi::PhysicalSize::new(w, h));
        if self.opts.fullscreen {
            attrs = attrs.with_fullscreen(Some(Fullscreen::Borderless(None)));
        }
        let window = Arc::new(
            event_loop
                .create_window(attrs)
                .map_err(|e| WindowError::NoDisplay(e.to_string()))?,
        );
        if self.opts.fullscreen {
            // A window manager makes the window fullscreen after it is mapped, if at all.
            self.fullscreen_check_at = Some(Instant::now() + Duration::from_secs(2));
        }
        let (opened, surface) = open_devices(&self.opts.play_on, &window)?;
        // The presenting device: the one GPU's, or GPU 0's.
        let lead = opened.lead();
        let (device, queue) = (lead.device.clone(), lead.queue.clone());
        let max_texture_2d = lead.caps.max_texture_2d;
        let surface_caps = surface.get_capabilities(&lead.adapter);
        let settings = software::choose(&lead.caps, &self.opts.requested);
        self.render_scale = settings.render_scale;
        if settings.software_adapter {
            // 20 compositions a second at most (each is CPU work on a software adapter): the
            // overlay and the mouse stay responsive, the CPU marches.
            self.compose_every = Duration::from_millis(50);
        }
        let mut size = window.inner_size();
        if settings.window_size != self.ui.window_size && !self.opts.fullscreen {
            // Applied at once where the platform can, else with the next Resized event.
            let (w, h) = settings.window_size;
            if let Some(s) = window.request_inner_size(winit::dpi::PhysicalSize::new(w, h)) {
                size = s;
            }
        }
        window.set_visible(true);
        if overlay::starts_compact(settings.window_size, self.opts.large_print, self.opts.kiosk) {
            // Small windows (the software adapter's) keep most of the picture free.
            self.ui.compact = true;
            self.ui.plots = false;
        }
        if let Some(note) = &settings.note {
            log::info!("play: {note}");
            self.ui.message = Some((note.clone(), Instant::now()));
        }
        let (sw, sh) = (size.width.max(1), size.height.max(1));
        let config = surface_config(&surface_caps, (sw, sh))?;
        surface.configure(&device, &config);
        let mut pcfg = self.opts.player.clone();
        (pcfg.width, pcfg.height) = render_size((sw, sh), self.render_scale);
        let opening = open::open_play(
            opened,
            &self.opts.play_on,
            &self.opts.scene,
            &pcfg,
            &settings,
        )?;
        if !opening.notes.is_empty() {
            // Said on screen too: an empty first frame looks like a broken player.
            self.ui.message = Some((opening.notes.join("; "), Instant::now()));
        }
        let mut play = opening.play;
        self.ui.gpus = Some(play.gpus_overlay());
        let player = play.lead_mut();
        self.flying = player.has_camera_path();
        self.ui.presets = overlay::presets_for(player);
        if self.opts.kiosk
            && let Some(why) = player.direct_unavailable()
        {
            // The kiosk starts on the direct path where it can; the audience sees why not.
            self.ui.message = Some((format!("direct path unavailable: {why}"), Instant::now()));
            self.said_direct_unavailable = true;
        }
        let egui_ctx = egui::Context::default();
        egui_ctx.set_zoom_factor(zoom_for(
            self.ui.large_print,
            (sw, sh),
            window.scale_factor(),
        ));
        let egui_state = egui_winit::State::new(
            egui_ctx.clone(),
            egui::ViewportId::ROOT,
            &window,
            Some(window.scale_factor() as f32),
            None,
            Some(max_texture_2d as usize),
        );
        let egui_renderer = egui_wgpu::Renderer::new(
            &device,
            config.format,
            egui_wgpu::RendererOptions::default(),
        );
        self.ui.window_size = (sw, sh);
        self.gfx = Some(Gfx {
            window,
            surface,
            config,
            device,
            queue,
            play,
            egui_ctx,
            egui_state,
            egui_renderer,
            display: None,
            image_fresh: false,
            // Movies at the composition rate's cap (20 a second on a software adapter).
            recorder: record::Recorder::new(
                self.opts.record.clone(),
                1.0 / self.compose_every.as_secs_f64().max(1.0 / 30.0),
            ),
        });
        Ok(())
    }

    fn message(&mut self, m: impl Into<String>) {
        self.ui.message = Some((m.into(), Instant::now()));
    }

    fn apply_action(&mut self, a: Action, event_loop: &ActiveEventLoop) {
        let Some(g) = self.gfx.as_mut() else { return };
        if let Some(said) = g.play.timeline_action(a) {
            if let Some(text) = said {
                self.message(text);
            }
            return;
        }
        self.apply_view_action(a, event_loop);
    }

    /// Actions on the one player, or on GPU 0's view (and the window) with several GPUs.
    fn apply_view_action(&mut self, a: Action, event_loop: &ActiveEventLoop) {
        let Some(g) = self.gfx.as_mut() else { return };
        let p = g.play.lead_mut();
        match a {
            // The timeline's: `MultiPlayer::timeline_action` took them.
            Action::TogglePlay
            | Action::Step(_)
            | Action::ToggleDirect
            | Action::Reverse
            | Action::CycleMode
            | Action::First
            | Action::Last
            | Action::ToggleAttribute(_) => {}
            Action::ToggleFullscreen => {
                self.ui.fullscreen = !self.ui.fullscreen;
                g.window
                    .set_fullscreen(self.ui.fullscreen.then_some(Fullscreen::Borderless(None)));
            }
            Action::ToggleHelp => self.ui.help = !self.ui.help,
            Action::Quit => event_loop.exit(),
            Action::TogglePlots => self.ui.plots = !self.ui.plots,
            Action::ToggleCompact => self.ui.compact = !self.ui.compact,
            Action::ToggleLargePrint => {
                self.ui.large_print = !self.ui.large_print;
                let size = (g.config.width, g.config.height);
                g.egui_ctx.set_zoom_factor(zoom_for(
                    self.ui.large_print,
                    size,
                    g.window.scale_factor(),
                ));
            }
            Action::ResetCamera => {
                let cam = p.scene_view().camera;
                p.view_mut().camera = cam;
                self.flying = p.has_camera_path();
            }
            Action::NextPreset => {
                // From the scene's look, the first preset; then each in turn.
                let next = match self.ui.presets.first().copied().flatten() {
                    Some(k) => (k + 1) % PRESETS.len(),
                    None => 0,
                };
                self.apply_request(UiRequest::SetPreset(0, next), event_loop);
            }
            Action::Orbit(dy, dp) => {
                self.flying = false;
                p.view_mut()
                    .camera
                    .orbit(f32::from(dy) * 10.0, f32::from(dp) * 5.0);
            }
            Action::Zoom(z) => {
                self.flying = false;
                p.view_mut()
                    .camera
                    .zoom(if z > 0 { 1.15 } else { 1.0 / 1.15 });
            }
            Action::TogglePathTracing => {
                let to = p.toggle_path_tracing();
                self.message(format!("render mode: {}", render_mode_name(to)));
            }
            Action::Analysis(k) => self.ui.analysis.key(k, p),
            Action::ToggleDenoise => match p.toggle_denoise() {
                Ok(on) => self.message(format!(
                    "path tracing shows the {} mean",
                    if on { "denoised" } else { "raw" }
                )),
                Err(why) => self.message(format!("denoiser: {why}")),
            },
            Action::ToggleClean => self.ui.clean = !self.ui.clean,
            Action::ToggleRecord => self.record(None),
            Action::ToggleTransferPanel => self.ui.tf_panel.toggle(p),
            Action::SaveScene => _ = self.save_scene(None),
        }
    }

    /// Shift+R (`None`) or the script's `record`: see [`record::Recorder::apply`].
    fn record(&mut self, what: Option<Option<PathBuf>>) {
        let Some(g) = self.gfx.as_mut() else { return };
        let said = (g.recorder).apply(what, (g.config.width, g.config.height), &mut self.ui);
        self.message(said);
    }

    /// Writes the looks and camera as a scene (Shift+S, `save-scene`) and says where.
    fn save_scene(&mut self, to: Option<PathBuf>) -> Result<(), String> {
        let Some(g) = self.gfx.as_ref() else {
            return Ok(());
        };
        let to = to.or_else(|| self.ui.tf_panel.saved_to.clone());
        let saved = g.play.lead().save_scene(to.as_deref());
        let said = saved
            .as_ref()
            .map_or_else(|e| format!("scene not saved: {e}"), |s| s.describe());
        self.message(said.clone());
        self.ui.tf_panel.saved_to = Some(saved.map_err(|_| said)?.path);
        Ok(())
    }

    fn apply_request(&mut self, r: UiRequest, event_loop: &ActiveEventLoop) {
        let Some(g) = self.gfx.as_mut() else { return };
        if let Some(said) = g.play.timeline_request(&r) {
            if let Some(text) = said {
                self.message(text);
            }
            return;
        }
        match r {
            UiRequest::Action(a) => self.apply_action(a, event_loop),
            UiRequest::SetPath(sel) => {
                if let Err(why) = g.play.set_path(sel) {
                    self.message(format!("{} path unavailable: {why}", sel.name()));
                }
            }
            UiRequest::Scrub(f) => g.play.scrub(f),
            UiRequest::Dragging(_)
            | UiRequest::SetSpeed(_)
            | UiRequest::SetMode(_)
            | UiRequest::SetAttribute(..)
            | UiRequest::ShowDatasetAttribute(..)
            | UiRequest::SetLook(..)
            | UiRequest::SetPreset(..) => self.apply_view_request(r),
        }
    }

    /// Requests of the one player, or of GPU 0's view with several GPUs.
    fn apply_view_request(&mut self, r: UiRequest) {
        let Some(g) = self.gfx.as_mut() else { return };
        let p = g.play.lead_mut();
        match r {
            // The window's, or the timeline's (`MultiPlayer::timeline_request` took them).
            UiRequest::Action(_)
            | UiRequest::SetPath(_)
            | UiRequest::Scrub(_)
            | UiRequest::Dragging(_)
            | UiRequest::SetSpeed(_)
            | UiRequest::SetMode(_)
            | UiRequest::SetAttribute(..)
            | UiRequest::ShowDatasetAttribute(..) => {}
            UiRequest::SetLook(i, tf) => match p.set_look(i, *tf) {
                Ok(()) => _ = self.ui.presets.get_mut(i).map(|s| *s = None),
                Err(why) => self.message(why),
            },
            UiRequest::SetPreset(i, k) => {
                let Some(name) = PRESETS.get(k) else { return };
                let v = p.view();
                let b = v.world_bbox;
                let extent = (0..3).map(|a| b[1][a] - b[0][a]).fold(1e-6f32, f32::max);
                if let Some(Some(a)) = p.view_mut().attributes.get_mut(i) {
                    a.tf = TransferFunction::preset(name, a.tf.range, extent);
                }
                if let Some(slot) = self.ui.presets.get_mut(i) {
                    *slot = Some(k);
                }
            }
        }
    }

    /// Runs script commands whose wait is over.
    fn run_script(&mut self, event_loop: &ActiveEventLoop) {
        loop {
            let Some(g) = self.gfx.as_ref() else { return };
            match &self.waiting {
                Some(Waiting::Until(t)) if Instant::now() < *t => return,
                Some(Waiting::Frames(n)) if self.ui.frames_shown < *n => return,
                Some(Waiting::Shown(f, deadline))
                    if g.play.shown_frame() != Some(*f) || g.play.scrub_pending() =>
                {
                    if Instant::now() > *deadline {
                        self.error = Some(WindowError::Other(format!(
                            "script: frame {f} was not shown within 60 s"
                        )));
                        event_loop.exit();
                    }
                    return;
                }
                _ => {}
            }
            self.waiting = None;
            let Some(cmd) = self.script.pop_front() else {
                return;
            };
            match cmd {
                Command::Wait(d) => self.waiting = Some(Waiting::Until(Instant::now() + d)),
                Command::WaitFrames(n) => {
                    self.waiting = Some(Waiting::Frames(self.ui.frames_shown + n));
                }
                Command::WaitShown(f) => {
                    self.waiting =
                        Some(Waiting::Shown(f, Instant::now() + Duration::from_secs(60)));
                }
                Command::Key(a) => self.apply_action(a, event_loop),
                Command::Scrub(f) => {
                    if let Some(g) = self.gfx.as_mut() {
                        g.play.scrub(f);
                    }
                }
                Command::Drag(f) => {
                    self.ui.dragging = true;
                    self.ui.slider = f;
                    self.apply_request(UiRequest::Dragging(true), event_loop);
                    self.apply_request(UiRequest::Scrub(f), event_loop);
                }
                Command::Release(f) => {
                    self.ui.dragging = false;
                    self.ui.slider = f;
                    self.apply_request(UiRequest::Dragging(false), event_loop);
                    self.apply_request(UiRequest::Scrub(f), event_loop);
                }
                Command::Path(sel) => self.apply_request(UiRequest::SetPath(sel), event_loop),
                Command::Screenshot(p) => {
                    // Taken at the end of the next composed frame; later commands wait for it.
                    self.screenshot = Some(p);
                    return;
                }
                Command::Render(path) => {
                    // The picture on screen (with several GPUs, as presented on GPU 0).
                    let image = g.play.read_picture();
                    let r = image
                        .map_err(|e| e.to_string())
                        .and_then(|img| img.write_png(&path).map_err(|e| e.to_string()));
                    if let Err(e) = r {
                        self.error = Some(WindowError::Other(format!("script render: {e}")));
                        event_loop.exit();
                        return;
                    }
                }
                Command::DumpState(path) => {
                    let d = overlay::dump(g.play.lead(), &self.ui);
                    let r = serde_json::to_string_pretty(&d)
                        .map_err(|e| e.to_string())
                        .and_then(|t| std::fs::write(&path, t).map_err(|e| e.to_string()));
                    if let Err(e) = r {
                        self.error = Some(WindowError::Other(format!(
                            "script dump-state {}: {e}",
                            path.display()
                        )));
                        event_loop.exit();
                        return;
                    }
                }
                Command::Record(path) => self.record(Some(path)),
                Command::Colormap(i, name) => {
                    let panel = &mut self.ui.tf_panel;
                    let r =
                        overlay::transfer_panel::colormap_request(g.play.lead(), panel, i, &name);
                    match r {
                        Ok(r) => self.apply_request(r, event_loop),
                        Err(e) => self.error = Some(WindowError::Other(format!("script: {e}"))),
                    }
                }
                Command::SaveScene(to) => {
                    if let Err(e) = self.save_scene(to) {
                        self.error = Some(WindowError::Other(format!("script: {e}")));
                    }
                }
                Command::Quit => {
                    event_loop.exit();
                    return;
                }
                c @ (Command::Slice(_)
                | Command::Probe(_)
                | Command::Pick(_)
                | Command::Line(..)) => {
                    let Some(g) = self.gfx.as_mut() else { return };
                    let window = self.ui.window_size;
                    if let Err(e) = self.ui.analysis.script(g.play.lead_mut(), &c, window) {
                        self.error = Some(WindowError::Other(format!("script: {e}")));
                        event_loop.exit();
                        return;
                    }
                }
            }
            if self.error.is_some() {
                event_loop.exit();
                return;
            }
        }
    }

    fn timers(&mut self) {
        let Some(g) = self.gfx.as_mut() else { return };
        let now = Instant::now();
        let dt = now.duration_since(self.last_frame).as_secs_f32().min(0.25);
        self.last_frame = now;
        let p = g.play.lead_mut();
        if self.opts.kiosk || self.flying {
            // The scene's camera path flies (it loops with the clock), else the kiosk orbits
            // slowly.
            if p.has_camera_path() {
                let t = now.duration_since(self.flight_start).as_secs_f64();
                let cam = p.scene_camera_at(t);
                p.view_mut().camera = cam;
            } else if self.opts.kiosk {
                p.view_mut().camera.orbit(dt * 6.0, 0.0);
            }
        }
        if let Some(every) = self.opts.toggle_every
            && now.duration_since(self.toggle_mark) >= every
        {
            self.toggle_mark = now;
            match g.play.toggle_path() {
                Ok(to) => {
                    let label = g.play.lead().path_report(to).label;
                    self.ui.message = Some((format!("{} path: {label}", to.name()), now));
                }
                // Said once: the figures panel says it for good, and a kiosk flipping every
                // 20 s all day would otherwise repeat it on every flip to the direct path.
                Err(why) if !self.said_direct_unavailable => {
                    self.said_direct_unavailable = true;
                    self.ui.message = Some((format!("direct path unavailable: {why}"), now));
                }
                Err(_) => {}
            }
        }
        if self.fullscreen_check_at.is_some_and(|at| now >= at) {
            self.fullscreen_check_at = None;
            let inner = g.window.inner_size();
            let monitor = g
                .window
                .current_monitor()
                .or_else(|| g.window.primary_monitor());
            let size = monitor.as_ref().map(|m| (m.size().width, m.size().height));
            match overlay::fullscreen_check(true, (inner.width, inner.height), size) {
                overlay::FullscreenCheck::Fine => {}
                overlay::FullscreenCheck::Resize { to, warning } => {
                    if let Some(m) = &monitor {
                        g.window.set_outer_position(m.position());
                    }
                    // The surface follows with the Resized event.
                    let _ = g
                        .window
                        .request_inner_size(winit::dpi::PhysicalSize::new(to.0, to.1));
                    (self.opts.warn)(&warning);
                }
                overlay::FullscreenCheck::Warn(warning) => (self.opts.warn)(&warning),
            }
        }
        let secs = now.duration_since(self.cpu_mark.0).as_secs_f64();
        if secs >= 1.0 {
            let cpu = crate::probe::cpu_seconds();
            self.ui.cpu_percent = (cpu - self.cpu_mark.1) / secs * 100.0;
            self.cpu_mark = (now, cpu);
        }
        if now.duration_since(self.gpu_mark) >= Duration::from_secs(2) {
            self.gpu_mark = now;
            self.ui.gpu_memory = super::gpumem::gpu_memory(g.play.lead().device());
            if g.play.gpu_count() > 1 {
                // Every GPU whose device is in this process (another rank's is not).
                self.ui.gpus_memory = (0..g.play.gpu_count())
                    .map(|k| {
                        let p = g.play.workers().player(k)?;
                        super::gpumem::gpu_memory(p.device()).map(|m| m.used)
                    })
                    .collect();
            }
        }
    }

    fn redraw(&mut self, event_loop: &ActiveEventLoop) {
        self.last_compose = Instant::now();
        self.run_script(event_loop);
        self.timers();
        let Some(g) = self.gfx.as_mut() else { return };
        let ticked = g.play.advance();
        self.ui.gpus = Some(g.play.gpus_overlay());
        match ticked {
            Ok((shown, rendered)) => {
                if shown {
                    self.ui.frames_shown += 1;
                }
                g.image_fresh |= rendered;
            }
            Err(e) => {
                self.ui.message = Some((format!("error: {e}"), Instant::now()));
            }
        }
        if let Some(s) = g.play.silent().cloned() {
            // Said on screen, then the run ends naming the silent ranks.
            let since = *self.silent_since.get_or_insert_with(Instant::now);
            self.ui.message = Some((
                format!("{s}: a rank died or stopped answering; ending the run"),
                since,
            ));
            if since.elapsed() >= SILENT_SHOWN {
                self.error = Some(WindowError::Silent(s));
                event_loop.exit();
            }
        }
        if let Some(n) = self.opts.exit_after
            && self.ui.frames_shown >= n
        {
            event_loop.exit();
        }
        self.ui
            .analysis
            .update(g.play.lead_mut(), self.ui.window_size);
        let mut requests = Vec::new();
        if let Err(e) = compose(g, &mut self.ui, &mut requests, self.screenshot.take()) {
            self.error = Some(e);
            event_loop.exit();
            return;
        }
        for r in requests {
            self.apply_request(r, event_loop);
        }
    }
}

impl ApplicationHandler for App {
    fn resumed(&mut self, event_loop: &ActiveEventLoop) {
        if self.gfx.is_some() {
            return;
        }
        if let Err(e) = self.init(event_loop) {
            self.error = Some(e);
            event_loop.exit();
        }
    }

    fn window_event(&mut self, event_loop: &ActiveEventLoop, _id: WindowId, event: WindowEvent) {
        let Some(g) = self.gfx.as_mut() else { return };
        let resp = g.egui_state.on_window_event(&g.window, &event);
        let egui_pointer =
            g.egui_ctx.egui_wants_pointer_input() || g.egui_ctx.is_pointer_over_egui();
        match event {
            WindowEvent::CloseRequested => event_loop.exit(),
            WindowEvent::Resized(size) if size.width > 0 && size.height > 0 => {
                g.config.width = size.width;
                g.config.height = size.height;
                g.surface.configure(&g.device, &g.config);
                let (w, h) = render_size((size.width, size.height), self.render_scale);
                // With several GPUs GPU 0's size reaches every GPU ([`MultiPlayer::sync_view`]).
                g.play.lead_mut().set_size(w, h);
                self.ui.window_size = (size.width, size.height);
                g.egui_ctx.set_zoom_factor(zoom_for(
                    self.ui.large_print,
                    (size.width, size.height),
                    g.window.scale_factor(),
                ));
            }
            WindowEvent::RedrawRequested => self.redraw(event_loop),
            WindowEvent::ModifiersChanged(m) => self.modifiers = m.state(),
            WindowEvent::KeyboardInput { event, .. }
                if !resp.consumed && event.state == ElementState::Pressed =>
            {
                let name = match &event.logical_key {
                    Key::Named(NamedKey::Space) => Some("space".to_string()),
                    Key::Named(NamedKey::ArrowLeft) => Some("left".into()),
                    Key::Named(NamedKey::ArrowRight) => Some("right".into()),
                    Key::Named(NamedKey::Home) => Some("home".into()),
                    Key::Named(NamedKey::End) => Some("end".into()),
                    Key::Named(NamedKey::Escape) => Some("escape".into()),
                    Key::Character(c) => Some(c.to_string()),
                    _ => None,
                };
                // Held step keys repeat; toggles do not.
                let action = name.as_deref().and_then(key_action);
                if let Some(a) = action
                    && (!event.repeat
                        || matches!(a, Action::Step(_) | Action::Orbit(..) | Action::Zoom(_)))
                {
                    self.apply_action(a, event_loop);
                }
            }
            WindowEvent::MouseInput { state, button, .. } => {
                let down = state == ElementState::Pressed && !egui_pointer;
                if down && button == MouseButton::Left && self.modifiers.control_key() {
                    self.ui.analysis.pick();
                }
                match button {
                    MouseButton::Left => self.mouse.1 = down,
                    MouseButton::Right | MouseButton::Middle => self.mouse.2 = down,
                    _ => {}
                }
            }
            WindowEvent::CursorMoved { position, .. } => {
                let (x, y) = (position.x, position.y);
                if let Some((px, py)) = self.mouse.0 {
                    let (dx, dy) = ((x - px) as f32, (y - py) as f32);
                    let h = g.config.height.max(1) as f32;
                    let pan = self.mouse.2 || (self.mouse.1 && self.modifiers.shift_key());
                    if pan || self.mouse.1 {
                        // The user takes the camera: the window stops flying the camera path.
                        self.flying = false;
                    }
                    if pan {
                        g.play.lead_mut().view_mut().camera.pan(-dx / h, dy / h);
                    } else if self.mouse.1 {
                        g.play
                            .lead_mut()
                            .view_mut()
                            .camera
                            .orbit(-dx * 0.3, dy * 0.3);
                    }
                }
                self.mouse.0 = Some((x, y));
                self.ui.analysis.hover = Some([x as f32, y as f32]);
            }
            WindowEvent::MouseWheel { delta, .. } if !egui_pointer => {
                let lines = match delta {
                    MouseScrollDelta::LineDelta(_, y) => y,
                    MouseScrollDelta::PixelDelta(p) => p.y as f32 / 40.0,
                };
                self.flying = false;
                g.play.lead_mut().view_mut().camera.zoom(1.1f32.powf(lines));
            }
            _ => {}
        }
    }

    fn about_to_wait(&mut self, event_loop: &ActiveEventLoop) {
        let Some(g) = &self.gfx else { return };
        let next = self.last_compose + self.compose_every;
        if Instant::now() >= next {
            event_loop.set_control_flow(ControlFlow::Poll);
            g.window.request_redraw();
        } else {
            event_loop.set_control_flow(ControlFlow::WaitUntil(next));
        }
    }
}
