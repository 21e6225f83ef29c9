//! Several GPUs of one host in the player (`play --gpus`, `render --gpus`): alternate-frame
//! rendering driven by [`MultiScheduler`].
//!
//! Each GPU gets a whole single-GPU [`Player`] of its own — its wgpu device, its engines,
//! its rings and its renderer — over the frames it owns ([`Ownership::alternate`]), which
//! that player sees as a timeline of its own ([`PlayerConfig::frames`]). The one global
//! timeline is the [`MultiScheduler`]'s: it requests each frame of its window from the
//! frame's owner, records it finished when the owner's player has rendered it, and says
//! which frame to present next, strictly in order. A player that has rendered a frame
//! holds it (it is not ticked again) until the display has taken its image, so no GPU runs
//! more than one finished frame ahead of the screen while its engine goes on reading ahead.
//!
//! The display is GPU 0: its own images are shown where they are; another GPU's image is
//! read back to the host and uploaded to a texture on GPU 0, and each copy is timed
//! ([`MultiScheduler::copied`]). Peer-to-peer copies are out of reach: wgpu has no copy
//! between devices.
//!
//! Why beside [`Player`] and not inside it: the player's streams answer to one
//! [`crate::pipeline::Scheduler`] each; one GPU here is a whole player, so the single-GPU
//! path runs unchanged, and with one GPU (`--gpus 1`) this driver is a player gated by a
//! one-GPU [`MultiScheduler`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::app::PlayerGpu;
use crate::app::config::{PathSel, PlayError, PlayerConfig};
use crate::app::core::Player;
use crate::app::headless::{
    FaultReport, GpuRun, GpusRun, GpusTotal, HeadlessOptions, PathRun, RenderReport,
};
use crate::pipeline::multi::{GpuActions, MultiScheduler, Ownership, Report, Ticket};
use crate::pipeline::scheduler::{PlaybackConfig, Scheduler};
use crate::pipeline::{Direction, PlayMode};
use crate::render::View;

mod open;
mod overlay;
mod run;
mod workers;
pub use open::{OpenedGpu, open_gpu, open_gpus, open_rank_gpu, open_rank_gpus, open_rank_parts};
pub use run::run_paths;
pub(crate) use run::summary_lines;
pub use workers::{GpuName, Image, InProcess, LocalGpu, Workers};

/// How images of the other GPUs reach the display GPU.
pub const DISPLAY_COPY: &str = "through the host: read back from the rendering GPU, uploaded to the display GPU (GPU 0); wgpu has no copy between devices, so peer-to-peer is out of reach";

/// The frame a player has rendered and holds until the display takes its image.
#[derive(Clone, Copy, Debug)]
struct Held {
    /// The frame, in the dataset's numbering.
    frame: u32,
    /// Reported to the multi-scheduler as finished.
    reported: bool,
}

/// What the driver tracks of one GPU (its player is the [`Workers`]').
struct GpuShare {
    /// The dataset frames this GPU owns, ascending: the player's frame `i` is `frames[i]`.
    frames: Vec<u32>,
    held: Option<Held>,
    /// The multi-scheduler's requests issued on this GPU, by frame.
    tickets: BTreeMap<u32, Ticket>,
    /// Every image copy to the display GPU, ms (bounded; see [`MAX_LOG`]).
    copies_ms: Vec<f64>,
    copy_bytes: u64,
}

impl GpuShare {
    fn local(&self, frame: u32) -> Option<u32> {
        self.frames.binary_search(&frame).ok().map(|i| i as u32)
    }
    /// The frame of this GPU that playback on `timeline` reaches first from its playhead,
    /// at least `min_steps` steps on ([`Scheduler::steps_to`]: any direction, any play
    /// mode), in the player's numbering; where playback reaches none of its frames (the
    /// end of a `Once` timeline), the one nearest that end.
    fn first_reached(&self, timeline: &Scheduler, min_steps: u32) -> u32 {
        let best = self
            .frames
            .iter()
            .enumerate()
            .filter_map(|(i, &f)| {
                let steps = timeline.steps_to(f).filter(|&d| d >= min_steps)?;
                Some((steps, i))
            })
            .min();
        match best {
            Some((_, i)) => i as u32,
            None if timeline.direction() == Direction::Reverse => 0,
            None => self.frames.len() as u32 - 1,
        }
    }
}

/// What one [`MultiPlayer::tick`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MultiTick {
    /// The frame presented, and the GPU (index in `--gpus`) that rendered it.
    pub shown: Option<(u32, usize)>,
    /// The frame on screen is GPU 0's and its player drew it again (a new view, a path
    /// tracer's refinement): the display has a new picture of the same frame.
    pub redrawn: bool,
}

/// Frames presented that the driver remembers (for the order checks of a run).
const MAX_LOG: usize = 100_000;

/// Several GPUs playing one timeline; see the module documentation.
pub struct MultiPlayer {
    shares: Vec<GpuShare>,
    /// The GPUs' players, in this process or in other ranks.
    workers: Box<dyn Workers>,
    multi: MultiScheduler,
    frame_count: u32,
    mode: PlayMode,
    epoch: Instant,
    active: PathSel,
    shown: Option<u32>,
    /// Presentations so far (a frame on screen presented again in a new view included).
    presentations: u64,
    /// The frame on screen and the GPU that rendered it: the multi-scheduler has it as
    /// finished until the next frame is presented (its player has moved on already).
    on_screen: Option<(u32, usize)>,
    /// A jump in progress: its target and when it was asked for.
    scrub: Option<(u32, Instant)>,
    last_scrub_ms: Option<f64>,
    /// Frames presented and the GPU of each, oldest first (at most [`MAX_LOG`]).
    presented: Vec<(u32, usize)>,
    /// The display GPU's texture the other GPUs' images are uploaded to.
    display: Option<wgpu::Texture>,
    /// Keep every presented image (tests compare them).
    capture: bool,
    captured: Vec<(u32, usize, Vec<u8>)>,
    last_error: Option<String>,
    /// GPU 0's view and render size as last given to every GPU ([`MultiPlayer::sync_view`]).
    synced: Option<(View, (u32, u32))>,
    /// Simulation time of every frame, from its owner's player.
    frame_times: Vec<f64>,
    /// The timeline's slider is being dragged: while a jump is under way, a frame GPU 0's
    /// player has stands in for its target (as one GPU's player shows one).
    dragging: bool,
    /// The frame on screen stands in for a jump's target (GPU 0's own image).
    stand_in: bool,
}

impl MultiPlayer {
    /// Opens `scene_path` once per GPU of `gpus` (GPU 0 is the display), each player over
    /// the frames its GPU owns (alternate frames). `cfg` is the single-GPU player's; its
    /// `start_frame` counts in the dataset's frames, and its `frames` must be `None`.
    pub fn open(
        gpus: Vec<OpenedGpu>,
        scene_path: &Path,
        cfg: &PlayerConfig,
    ) -> Result<MultiPlayer, PlayError> {
        Self::open_scene(gpus, &crate::app::core::load_scene(scene_path)?, cfg)
    }

    /// [`MultiPlayer::open`] on a scene already loaded (such as
    /// [`crate::scene::Scene::builtin`]).
    pub fn open_scene(
        gpus: Vec<OpenedGpu>,
        scene: &crate::scene::Scene,
        cfg: &PlayerConfig,
    ) -> Result<MultiPlayer, PlayError> {
        if gpus.is_empty() {
            return Err(PlayError::Usage("--gpus names no GPU".into()));
        }
        let g = gpus.len();
        let (frame_count, start_frame) = timeline_from(scene, cfg, g)?;
        let cfg = &PlayerConfig {
            start_frame,
            ..cfg.clone()
        };
        let ownership = Ownership::alternate(g).map_err(PlayError::Usage)?;
        let mut locals = Vec::with_capacity(g);
        for (k, opened) in gpus.into_iter().enumerate() {
            let frames = owned_frames(&ownership, frame_count, k);
            let player = open_share(&opened.gpu, scene, cfg, frames)?;
            let name = GpuName {
                ordinal: opened.ordinal,
                matched: opened.matched,
                device: opened.gpu.describe(),
                host: None,
                rank: None,
            };
            locals.push(LocalGpu::new(name, Some(opened.gpu), player));
        }
        MultiPlayer::over(Box::new(InProcess::new(locals)), frame_count, cfg)
    }

    /// One GPU, `gpu` (the best adapter found: [`PlayerGpu::open_best`]), played through the
    /// coordinator as several are: the one-GPU player of `play --headless` and the window.
    pub fn open_one(
        gpu: PlayerGpu,
        scene: &crate::scene::Scene,
        cfg: &PlayerConfig,
    ) -> Result<MultiPlayer, PlayError> {
        let matched = format!("{}: the best adapter found", gpu.describe());
        let opened = OpenedGpu {
            ordinal: 0,
            gpu,
            matched,
        };
        Self::open_scene(vec![opened], scene, cfg)
    }

    /// The coordinator over `workers` (one GPU each, GPU 0 the display, each player over the
    /// frames its GPU owns: alternate frames, [`owned_frames`]) on a timeline of
    /// `frame_count` frames; `cfg` gives the mode, speed, start frame and play state.
    pub fn over(
        mut workers: Box<dyn Workers>,
        frame_count: u32,
        cfg: &PlayerConfig,
    ) -> Result<MultiPlayer, PlayError> {
        let g = workers.count();
        let ownership = Ownership::alternate(g).map_err(PlayError::Usage)?;
        // The timeline at its start, for where each GPU's player starts.
        let mut start = Scheduler::new(PlaybackConfig {
            frame_count,
            mode: cfg.mode,
            speed_fps: None,
            window: 1,
        });
        start.scrub(cfg.start_frame);
        let mut shares = Vec::with_capacity(g);
        for k in 0..g {
            let share = GpuShare {
                frames: owned_frames(&ownership, frame_count, k),
                held: None,
                tickets: BTreeMap::new(),
                copies_ms: Vec::new(),
                copy_bytes: 0,
            };
            workers.set_mode(k, cfg.mode);
            workers.point(k, share.first_reached(&start, 0));
            workers.set_playing(k, cfg.playing);
            shares.push(share);
        }
        // One path for every GPU: the first GPU's, where every GPU has it.
        let mut active = workers
            .player(0)
            .ok_or_else(|| PlayError::Usage("GPU 0 runs in another process".into()))?
            .active_path();
        if (0..g).any(|k| workers.path_available(k, active).is_err()) {
            active = PathSel::Host;
        }
        for k in 0..g {
            workers.set_path(k, active).map_err(PlayError::Usage)?;
        }
        let slots = (0..g).map(|k| workers.slots(k)).collect();
        let mut multi = MultiScheduler::new(
            frame_count,
            cfg.mode,
            cfg.speed_fps,
            ownership,
            slots,
            0,
            active.index(),
        )
        .map_err(PlayError::Usage)?;
        multi.scrub(cfg.start_frame);
        multi.set_playing(cfg.playing);
        let frame_times = (0..frame_count)
            .map(|f| {
                let k = multi.ownership().owner(f);
                shares[k].local(f).map_or(0.0, |l| workers.frame_time(k, l))
            })
            .collect();
        Ok(MultiPlayer {
            shares,
            workers,
            multi,
            frame_count,
            mode: cfg.mode,
            epoch: Instant::now(),
            active,
            shown: None,
            presentations: 0,
            on_screen: None,
            scrub: None,
            last_scrub_ms: None,
            presented: Vec::new(),
            display: None,
            capture: false,
            captured: Vec::new(),
            last_error: None,
            synced: None,
            frame_times,
            dragging: false,
            stand_in: false,
        })
    }

    fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    /// GPUs.
    pub fn gpu_count(&self) -> usize {
        self.shares.len()
    }
    /// GPU `k`'s player (its figures, view, device).
    ///
    /// # Panics
    /// Where GPU `k`'s player runs in another process (another rank's: GPU 0's never
    /// does); [`MultiPlayer::workers`] says.
    pub fn player(&self, k: usize) -> &Player {
        self.workers
            .player(k)
            .unwrap_or_else(|| panic!("GPU {k}'s player runs in another process"))
    }
    /// GPU `k`'s player, to change its view.
    ///
    /// # Panics
    /// As [`MultiPlayer::player`].
    pub fn player_mut(&mut self, k: usize) -> &mut Player {
        self.workers
            .player_mut(k)
            .unwrap_or_else(|| panic!("GPU {k}'s player runs in another process"))
    }
    /// The GPUs (their players here, or their transport to other ranks).
    pub fn workers(&self) -> &dyn Workers {
        &*self.workers
    }
    /// The GPUs, to change them.
    pub fn workers_mut(&mut self) -> &mut dyn Workers {
        &mut *self.workers
    }
    /// The ordinal GPU `k` was named by, and how its adapter was chosen.
    pub fn gpu_names(&self, k: usize) -> (usize, &str) {
        let n = self.workers.name(k);
        (n.ordinal, &n.matched)
    }
    /// Frames on the timeline.
    pub fn frame_count(&self) -> u32 {
        self.frame_count
    }
    /// The frame on screen.
    pub fn shown_frame(&self) -> Option<u32> {
        self.shown
    }
    /// Whether a jump has not landed yet.
    pub fn scrub_pending(&self) -> bool {
        self.scrub.is_some()
    }
    /// The latency of the last jump, ms.
    pub fn last_scrub_ms(&self) -> Option<f64> {
        self.last_scrub_ms
    }
    /// The path every GPU uses.
    pub fn active_path(&self) -> PathSel {
        self.active
    }
    /// The global timeline.
    pub fn scheduler(&self) -> &MultiScheduler {
        &self.multi
    }
    /// Frames presented so far and the GPU of each, oldest first.
    pub fn presented(&self) -> &[(u32, usize)] {
        &self.presented
    }
    /// The last problem the driver met (a GPU's player errors are its own).
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
    /// What each GPU holds and is asked for, in words (for error messages and tests).
    pub fn state(&self) -> String {
        let mut out = format!(
            "playhead {} ({:?})",
            self.multi.scheduler().position(),
            self.multi
                .scheduler()
                .state(self.multi.scheduler().position())
        );
        for (k, s) in self.shares.iter().enumerate() {
            let global = |l: u32| s.frames.get(l as usize).copied().unwrap_or(u32::MAX);
            let at = self.workers.player(k).map_or_else(
                || "in another process".to_string(),
                |p| {
                    format!(
                        "at {} showing {:?}",
                        global(p.position()),
                        p.shown_frame().map(global)
                    )
                },
            );
            out += &format!(
                "; GPU {k}: holds {:?}, requests {:?}, queued {:?}, its player {at}, damaged {:?}",
                s.held.map(|h| (h.frame, h.reported)),
                s.tickets.keys().collect::<Vec<_>>(),
                self.multi.queued(k),
                self.workers
                    .damaged(k)
                    .into_iter()
                    .map(global)
                    .collect::<Vec<_>>()
            );
        }
        out
    }

    /// Keep every presented image from now on ([`MultiPlayer::captured`]).
    pub fn set_capture(&mut self, on: bool) {
        self.capture = on;
    }
    /// Presented images kept: frame, GPU, RGBA8 pixels.
    pub fn captured(&self) -> &[(u32, usize, Vec<u8>)] {
        &self.captured
    }

    /// Starts or stops playback on every GPU.
    pub fn set_playing(&mut self, playing: bool) {
        self.multi.set_playing(playing);
        for k in 0..self.shares.len() {
            self.workers.set_playing(k, playing);
        }
    }
    /// Playback rate of the timeline (`None`: as fast as frames are finished).
    pub fn set_speed(&mut self, fps: Option<f64>) {
        self.multi.set_speed(fps);
    }

    /// The timeline's slider is dragged, or let go: while dragged, until a jump's target is
    /// presented, the frames GPU 0's player has nearest it are shown in its place, as one
    /// GPU's player shows them ([`Player::set_dragging`]); the target follows.
    pub fn set_dragging(&mut self, dragging: bool) {
        self.dragging = dragging;
        self.player_mut(0).set_dragging(dragging);
    }

    /// Whether GPU 0's newly rendered `frame` stands in for a jump's target: the slider is
    /// dragged and the target is another frame.
    fn stands_in(&self, frame: u32) -> bool {
        self.dragging && self.scrub.is_some_and(|(target, _)| target != frame)
    }

    /// Whether the timeline plays.
    pub fn is_playing(&self) -> bool {
        self.multi.scheduler().is_playing()
    }
    /// The timeline's direction.
    pub fn direction(&self) -> Direction {
        self.multi.scheduler().direction()
    }
    /// The timeline's playback rate (`None`: as fast as frames are finished).
    pub fn speed(&self) -> Option<f64> {
        self.multi.scheduler().config().speed_fps
    }
    /// The end-of-timeline behaviour.
    pub fn mode(&self) -> PlayMode {
        self.mode
    }
    /// The playhead.
    pub fn position(&self) -> u32 {
        self.multi.scheduler().position()
    }

    /// Steps one frame in `direction`, pausing, as the step keys do: the frame stepped to
    /// is the next one presented, whichever GPU owns it.
    pub fn step(&mut self, direction: Direction) {
        self.set_playing(false);
        self.multi.step(direction);
        let at = self.multi.scheduler().position();
        self.align();
        self.scrub = Some((at, Instant::now()));
    }

    /// The simulation time of dataset frame `frame` (from its owner's player).
    pub fn frame_time(&self, frame: u32) -> f64 {
        self.frame_times.get(frame as usize).copied().unwrap_or(0.0)
    }

    /// The image of the frame on screen, on the display GPU (GPU 0): GPU 0's own output
    /// where it rendered the frame, else the texture another GPU's image was copied to.
    pub fn presented_image(&self) -> Option<&wgpu::Texture> {
        if self.stand_in {
            return self.player(0).output();
        }
        match self.on_screen {
            Some((_, 0)) => self.player(0).output(),
            Some(_) => self.display.as_ref(),
            None => None,
        }
    }

    /// Reads the image of the frame on screen back from the display GPU: width, height and
    /// RGBA8 rows.
    pub fn read_presented(&self) -> Result<(u32, u32, Vec<u8>), PlayError> {
        let texture = self
            .presented_image()
            .ok_or_else(|| PlayError::Usage("nothing presented yet".into()))?;
        let lead = self.player(0);
        read_texture(lead.device(), lead.queue(), texture)
    }

    /// Lets go of what a GPU's player holds for the display, telling the multi-scheduler
    /// where it had the frame as finished.
    fn release(&mut self, k: usize) {
        let s = &mut self.shares[k];
        if let Some(h) = s.held.take()
            && h.reported
        {
            s.tickets.remove(&h.frame);
            self.multi.forget(k, h.frame);
        }
    }

    /// The frame on screen is let go on its GPU (its player holds it no more): a visit
    /// to it reads and renders it again, as one GPU's player does.
    fn forget_on_screen(&mut self) {
        if let Some((f, k)) = self.on_screen.take() {
            self.shares[k].tickets.remove(&f);
            self.multi.forget(k, f);
        }
    }

    /// Points every GPU's player at its first frame from the playhead on (in play order),
    /// dropping what they hold: after a jump or a path switch the timeline goes on from
    /// there.
    fn align(&mut self) {
        self.forget_on_screen();
        for k in 0..self.shares.len() {
            self.release(k);
            let local = self.shares[k].first_reached(self.multi.scheduler(), 0);
            self.point(k, local);
        }
    }

    /// Points every GPU's player at its first frame after the playhead (in play order),
    /// dropping what they hold; the frame on screen stays there.
    fn repoint_ahead(&mut self) {
        for k in 0..self.shares.len() {
            self.release(k);
            let local = self.shares[k].first_reached(self.multi.scheduler(), 1);
            self.point(k, local);
        }
    }

    /// The order of play changed (direction or mode): every GPU's player goes on from its
    /// first frame in the new order, after the frame on screen where the playhead's is
    /// shown, else from the playhead's (a jump, or the first frame, still to come).
    fn follow_order(&mut self) {
        let pos = self.multi.scheduler().position();
        if self.scrub.is_none() && self.on_screen.is_some_and(|(f, _)| f == pos) {
            self.repoint_ahead();
        } else {
            self.align();
        }
    }

    /// Plays the timeline in `direction` on every GPU (the window's R key): each GPU's
    /// player goes on from its first frame after the playhead in that direction.
    pub fn set_direction(&mut self, direction: Direction) {
        if direction == self.direction() {
            return;
        }
        self.multi.set_direction(direction);
        self.follow_order();
    }

    /// Sets the end-of-timeline behaviour (loop, once, ping-pong) on every GPU: the
    /// presented order is one GPU's in that mode ([`Scheduler`]'s).
    pub fn set_mode(&mut self, mode: PlayMode) {
        if mode == self.mode {
            return;
        }
        self.multi.set_mode(mode);
        self.mode = mode;
        for k in 0..self.shares.len() {
            self.workers.set_mode(k, mode);
        }
        self.follow_order();
    }

    /// Jumps to `frame` (clamped): the exact frame is the next one presented, whichever
    /// GPU owns it; the time until it is presented is the jump's latency.
    pub fn scrub(&mut self, frame: u32) {
        let target = frame.min(self.frame_count - 1);
        self.multi.scrub(target);
        self.align();
        self.scrub = Some((target, Instant::now()));
    }

    /// Switches every GPU to `sel`, or none (with the reason) where a GPU cannot run it.
    pub fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        if sel == self.active {
            return Ok(());
        }
        for k in 0..self.shares.len() {
            if let Err(why) = self.workers.path_available(k, sel) {
                // One GPU's reason reads as it did without the coordinator.
                if self.shares.len() == 1 {
                    return Err(why);
                }
                return Err(format!(
                    "GPU {k} (--gpus {}): {why}",
                    self.workers.name(k).ordinal
                ));
            }
        }
        for k in 0..self.shares.len() {
            self.workers.set_path(k, sel)?;
        }
        let now = self.now();
        let actions = self.multi.set_path(sel.index());
        self.apply(actions, now);
        for s in &mut self.shares {
            // Every ticket of the old path is stale now.
            s.tickets.clear();
            s.held = None;
        }
        self.active = sel;
        self.align();
        Ok(())
    }

    /// Shows or hides view slot `slot`'s attribute on every GPU (the window's 1-8 keys),
    /// or on none where a GPU in this process refuses (with its reason).
    pub fn set_attribute_shown(&mut self, slot: usize, on: bool) -> Result<(), String> {
        let was = self
            .player(0)
            .view()
            .attributes
            .get(slot)
            .and_then(|a| a.as_ref().map(|a| a.enabled));
        if was == Some(on) {
            return Ok(());
        }
        self.on_every_gpu(|w, k, on| w.show_attribute(k, slot, on), on)
    }

    /// Shows or hides dataset attribute `attribute` (manifest order) on every GPU (the
    /// overlay's attribute list), or on none where a GPU in this process refuses.
    pub fn set_dataset_attribute_shown(
        &mut self,
        attribute: usize,
        on: bool,
    ) -> Result<(), String> {
        let was = self
            .player(0)
            .dataset_attributes()
            .get(attribute)
            .map(|&(_, shown)| shown);
        if was == Some(on) {
            return Ok(());
        }
        self.on_every_gpu(|w, k, on| w.show_dataset_attribute(k, attribute, on), on)
    }

    /// `change(workers, k, on)` on GPU 0, then on each other GPU; where one refuses, the
    /// GPUs changed are changed back (`change` with `!on`) and its reason returned. The
    /// new view reaches the images at the next [`MultiPlayer::sync_view`].
    fn on_every_gpu(
        &mut self,
        change: impl Fn(&mut dyn Workers, usize, bool) -> Result<(), String>,
        on: bool,
    ) -> Result<(), String> {
        for k in 0..self.shares.len() {
            if let Err(why) = change(&mut *self.workers, k, on) {
                for back in 0..k {
                    // Each took the change a moment ago: taking it back cannot be refused
                    // where hiding, and showing again what was shown fits as it did.
                    let _ = change(&mut *self.workers, back, !on);
                }
                return Err(if k == 0 {
                    why
                } else {
                    format!("GPU {k} (--gpus {}): {why}", self.workers.name(k).ordinal)
                });
            }
        }
        Ok(())
    }

    /// Flips every GPU between direct and host.
    pub fn toggle_path(&mut self) -> Result<PathSel, String> {
        let to = self.active.other();
        self.set_path(to).map(|()| to)
    }

    /// Carries out a plan's cancels, aborts and evictions.
    fn apply(&mut self, actions: Vec<GpuActions>, now: f64) {
        for (k, a) in actions.into_iter().enumerate() {
            for f in a.abort {
                if let Some(t) = self.shares[k].tickets.remove(&f) {
                    // The player gave up the frame too (it was aligned elsewhere).
                    self.multi.landed(t, None, now);
                }
            }
            for f in a.evict {
                let s = &mut self.shares[k];
                s.tickets.remove(&f);
                if s.held.is_some_and(|h| h.frame == f) {
                    s.held = None;
                    self.workers.go_on(k);
                }
            }
        }
    }

    /// Whether `frame` is ahead of the playhead within the window (to be requested soon).
    fn wanted_soon(&self, frame: u32) -> bool {
        self.multi
            .scheduler()
            .steps_to(frame)
            .is_some_and(|ahead| ahead as usize <= self.multi.window())
    }

    /// Gives every GPU's player GPU 0's view and render size (the view is shared: the
    /// window changes GPU 0's); the players render from the new view on.
    ///
    /// Paused (or with a jump under way), where they changed since the last call, every
    /// image finished for the old view is out of date and none is presented after the
    /// change: each GPU's player holds at most one finished image, which is let go (the
    /// timeline forgets it, as [`MultiScheduler::invalidate_images`] would put it back to
    /// be rendered again), and the timeline jumps to the frame on screen (or to the jump's
    /// target): its owner renders it again and it is presented again. Playing, the frames
    /// under way are presented as rendered and the ones after are rendered for the new
    /// view: so a view that changes every tick (a kiosk's flight, a drag) does not hold
    /// playback. Returns whether the view changed (never with one GPU: nothing to give).
    pub fn sync_view(&mut self) -> bool {
        if self.shares.len() == 1 {
            // One GPU: no other player to give the view to, and its own draws the frame it
            // shows again in its new view by itself ([`MultiTick::redrawn`] says so), as it
            // did before the coordinator; pointing it again would read and render that
            // frame once more.
            return false;
        }
        let lead = self.player(0);
        // Compared in place: the view is cloned only where it changed (every tick asks).
        if self
            .synced
            .as_ref()
            .is_some_and(|(v, s)| v == lead.view() && *s == lead.size())
        {
            return false;
        }
        let key = (lead.view().clone(), lead.size());
        let (view, size) = &key;
        for k in 1..self.shares.len() {
            self.workers.set_view(k, view, *size);
        }
        let first = self.synced.is_none();
        self.synced = Some(key);
        if first {
            // Nothing was rendered yet.
            return false;
        }

        if self.is_playing() && self.scrub.is_none() {
            // Playing, no GPU is pointed again: its frame under way (rendered, held, or on
            // its way from another rank) is presented in the view before, and its next
            // ones are rendered in the new view. Pointing every GPU again would drop each
            // frame under way, and a view that changes every tick (a kiosk's flight, a
            // drag) would then hold playback for good wherever a frame takes longer than a
            // tick to render (a software adapter) or to arrive (another rank).
            return true;
        }
        let at = match self.scrub {
            Some((target, _)) => target,
            None => self
                .shown
                .unwrap_or_else(|| self.multi.scheduler().position()),
        };
        // Not a jump of the user's: its latency is not recorded (a jump under way keeps its
        // own).
        self.multi.scrub(at);
        self.align();
        true
    }

    /// Advances every GPU once and presents the next frame when its image is finished.
    pub fn tick(&mut self) -> Result<MultiTick, PlayError> {
        self.sync_view();
        let now = self.now();
        let actions = self.multi.plan();
        self.apply(actions, now);
        for k in 0..self.shares.len() {
            for t in self.multi.take_requests(k, usize::MAX) {
                self.shares[k].tickets.insert(t.frame, t);
            }
        }
        let mut stood_in = None;
        for k in 0..self.shares.len() {
            if self.shares[k].held.is_none()
                && let Some(local) = self.workers.poll(k)?
            {
                let frame = self.shares[k].frames[local as usize];
                if k == 0 && self.stands_in(frame) {
                    // Shown at once, not presented on the timeline; the player goes on to
                    // the target.
                    self.workers.go_on(0);
                    stood_in = Some((frame, 0));
                } else {
                    self.shares[k].held = Some(Held {
                        frame,
                        reported: false,
                    });
                }
            }
            // Frames its player passed over as damaged, before its new frame is judged.
            self.fail_damaged(k, now);
            self.report_held(k, now);
        }
        let mut out = MultiTick {
            redrawn: self.workers.take_redrawn(0)
                && (self.stand_in || matches!(self.on_screen, Some((_, 0)))),
            shown: stood_in,
        };
        if let Some((frame, _)) = stood_in {
            self.stand_in = true;
            self.shown = Some(frame);
        }
        let presented = self.multi.tick(now);
        if presented.is_none()
            && self
                .on_screen
                .is_some_and(|(f, _)| f != self.multi.scheduler().position())
        {
            // The playhead passed over a damaged frame: the frame on screen is behind it,
            // and a visit to it (where playback comes round to it again, every other
            // frame damaged) reads and renders it again, as one GPU's player does.
            self.forget_on_screen();
        }
        if let Some(p) = presented {
            let k = p.gpu;
            if self.shares[k].held.map(|h| h.frame) != Some(p.frame) {
                // Cannot happen while every finished image is held: say so rather than
                // show a wrong picture.
                self.last_error = Some(format!(
                    "frame {} was due from GPU {k}, which holds {:?}",
                    p.frame,
                    self.shares[k].held.map(|h| h.frame)
                ));
                return Ok(out);
            }
            if p.needs_copy || self.capture {
                self.take_image(k, p.frame, p.needs_copy)?;
            }
            // The display has the image: the GPU's player may go on, and the frame shown
            // before is let go.
            self.shares[k].held = None;
            self.workers.go_on(k);
            if self.on_screen != Some((p.frame, k)) {
                self.forget_on_screen();
            }
            self.on_screen = Some((p.frame, k));
            self.shown = Some(p.frame);
            self.stand_in = false;
            if !p.again && self.presented.len() < MAX_LOG {
                self.presented.push((p.frame, k));
            }
            if let Some((target, at)) = self.scrub
                && target == p.frame
            {
                self.last_scrub_ms = Some(at.elapsed().as_secs_f64() * 1e3);
                self.scrub = None;
            }
            out.shown = Some((p.frame, k));
            self.presentations += 1;
        }
        Ok(out)
    }

    /// Reports the frame GPU `k`'s player holds as finished, or lets it go when the
    /// timeline no longer wants it.
    fn report_held(&mut self, k: usize, now: f64) {
        let Some(h) = self.shares[k].held else {
            return;
        };
        if h.reported {
            return;
        }
        // The frame of this GPU the timeline wants first (the one on screen aside).
        let next = self.most_urgent(k);
        let t = match self.shares[k].tickets.get(&h.frame) {
            Some(&t) if next == Some(h.frame) => t,
            // The timeline wants another frame of this GPU first (it passed over this one
            // while its reads failed, and wants it again): the player goes there.
            Some(_) => return self.resync(k),
            None => {
                // Requested and waiting for a slot on this GPU, or ahead of every request
                // so far (the window has not reached it): wait. Otherwise the player goes
                // to the frame the timeline wants.
                if self.multi.queued(k).contains(&h.frame)
                    || (next.is_none() && self.wanted_soon(h.frame))
                {
                    return;
                }
                return self.resync(k);
            }
        };
        let s = &mut self.shares[k];
        let bytes = s
            .local(h.frame)
            .map_or(0, |l| self.workers.frame_bytes(k, l));
        match self.multi.landed(t, Some(bytes), now) {
            Report::Accepted => {}
            Report::Dropped | Report::Stale | Report::Unknown | Report::Outdated => {
                s.tickets.remove(&h.frame);
                s.held = None;
                self.workers.go_on(k);
                return;
            }
        }
        // Only the frame just landed is resident and not rendered on this GPU.
        match self.multi.next_render(k) {
            Some(r) if r.frame == h.frame => {
                self.multi.rendered(r, true, now);
                if let Some(held) = self.shares[k].held.as_mut() {
                    held.reported = true;
                }
            }
            other => {
                self.last_error = Some(format!(
                    "GPU {k}: frame {} rendered, the timeline offered {other:?}",
                    h.frame
                ));
                if let Some(r) = other {
                    self.multi.rendered(r, false, now);
                }
            }
        }
    }

    /// The frame of GPU `k`'s requests nearest ahead of the playhead, the one on screen
    /// aside.
    fn most_urgent(&self, k: usize) -> Option<u32> {
        let timeline = self.multi.scheduler();
        let on_screen = self.on_screen.filter(|&(_, g)| g == k).map(|(f, _)| f);
        self.shares[k]
            .tickets
            .keys()
            .copied()
            .filter(|&f| Some(f) != on_screen)
            .min_by_key(|&f| (timeline.steps_to(f).unwrap_or(u32::MAX), f))
    }

    /// Drops what GPU `k`'s player holds and points it at the frame of its requests nearest
    /// ahead of the playhead (else at its first frame from the playhead on).
    fn resync(&mut self, k: usize) {
        self.release(k);
        let next = self.most_urgent(k);
        let s = &self.shares[k];
        let local = match next.and_then(|f| s.local(f)) {
            Some(l) => l,
            None => s.first_reached(self.multi.scheduler(), 0),
        };
        self.point(k, local);
    }

    /// Points GPU `k`'s player at its local frame `local`, playing in the timeline's
    /// direction: where the frame lies past a ping-pong turn it is the GPU's frame nearest
    /// that end, where its own player turns too.
    fn point(&mut self, k: usize, local: u32) {
        let direction = self.direction();
        self.workers.set_direction(k, direction);
        self.workers.point(k, local);
    }

    /// Frames GPU `k`'s player marked damaged (its reads failed): the timeline passes over
    /// them, as one GPU's does.
    fn fail_damaged(&mut self, k: usize, now: f64) {
        let s = &self.shares[k];
        let marked = self.workers.damaged(k);
        let damaged: Vec<u32> = s
            .tickets
            .keys()
            .copied()
            .filter(|&f| s.held.is_none_or(|h| h.frame != f))
            .filter(|&f| s.local(f).is_some_and(|l| marked.contains(&l)))
            .collect();
        for f in damaged {
            if let Some(t) = self.shares[k].tickets.remove(&f) {
                self.multi.landed(t, None, now);
            }
        }
    }

    /// Takes GPU `k`'s finished image of `frame` to the display GPU (read back, uploaded
    /// and waited for, timed) where `copy`, and keeps it where capturing.
    fn take_image(&mut self, k: usize, frame: u32, copy: bool) -> Result<(), PlayError> {
        let Image {
            width: w,
            height: h,
            rgba8,
            transfer_ms,
        } = self.workers.image(k)?;
        if copy {
            let t0 = Instant::now();
            let display = self.player(0);
            let (device, queue) = (display.device().clone(), display.queue().clone());
            let fits = self
                .display
                .as_ref()
                .is_some_and(|t| t.width() == w && t.height() == h);
            if !fits {
                self.display = Some(crate::device::texture_2d(
                    &device,
                    "supercell display copy",
                    (w, h),
                    wgpu::TextureFormat::Rgba8Unorm,
                    wgpu::TextureUsages::COPY_DST
                        | wgpu::TextureUsages::COPY_SRC
                        | wgpu::TextureUsages::TEXTURE_BINDING,
                ));
            }
            let texture = self.display.as_ref().expect("made above");
            queue.write_texture(
                wgpu::TexelCopyTextureInfo {
                    texture,
                    mip_level: 0,
                    origin: wgpu::Origin3d::ZERO,
                    aspect: wgpu::TextureAspect::All,
                },
                &rgba8,
                wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(4 * w),
                    rows_per_image: Some(h),
                },
                wgpu::Extent3d {
                    width: w,
                    height: h,
                    depth_or_array_layers: 1,
                },
            );
            // Queued on the display GPU behind its own render, not waited for: the figure
            // is the read back and the hand-over of the pixels to the display GPU's queue.
            queue.submit([]);
            let secs = t0.elapsed().as_secs_f64() + transfer_ms / 1e3;
            let bytes = rgba8.len() as u64;
            self.multi.copied(k, bytes, secs);
            let s = &mut self.shares[k];
            s.copy_bytes += bytes;
            if s.copies_ms.len() < MAX_LOG {
                s.copies_ms.push(secs * 1e3);
            }
        }
        if self.capture {
            self.captured.push((frame, k, rgba8));
        }
        Ok(())
    }

    /// Waits a little for reads to land on a GPU whose player is not holding a frame.
    pub fn wait(&mut self, timeout: Duration) {
        self.workers.wait(timeout);
    }

    /// Lets every GPU's reads finish (at most `timeout` each).
    pub fn drain(&mut self, timeout: Duration) {
        self.workers.drain(timeout);
    }
}

/// The frame count of `scene`'s dataset, once `cfg` is checked for a timeline dealt to
/// `gpus` GPUs (alternate frames): its frames are the coordinator's to deal, every GPU
/// needs a frame and the start frame must be on the timeline.
pub fn timeline(
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
    gpus: usize,
) -> Result<u32, PlayError> {
    timeline_from(scene, cfg, gpus).map(|(frame_count, _)| frame_count)
}

/// [`timeline`], and the frame the timeline starts at: `cfg`'s, or where `cfg` starts at
/// data ([`PlayerConfig::start_at_data`]) and the scene's looks were suggested from the
/// data, the first frame with data (as one GPU's player starts).
fn timeline_from(
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
    gpus: usize,
) -> Result<(u32, u32), PlayError> {
    if cfg.frames.is_some() {
        return Err(PlayError::Usage(
            "a player of several GPUs deals the frames itself".into(),
        ));
    }
    let opened = scene
        .open(1.0, cfg.attributes.as_deref())
        .map_err(|e| PlayError::Scene(e.to_string()))?;
    let frame_count = opened.dataset.frame_count() as u32;
    let start = match &opened.suggestion {
        Some(s) if cfg.start_at_data => (s.start_frame as u32).min(frame_count.max(1) - 1),
        _ => cfg.start_frame,
    };
    if (frame_count as usize) < gpus {
        return Err(PlayError::Usage(format!(
            "{frame_count} frames for {gpus} GPUs: every GPU needs a frame of its own"
        )));
    }
    if start >= frame_count {
        return Err(PlayError::Usage(format!(
            "start frame {start} (--start-frame) is past the end: the dataset has {frame_count} frames (0..={})",
            frame_count - 1
        )));
    }
    Ok((frame_count, start))
}

/// GPU `k` of `gpus`'s player on `gpu` (alternate frames: [`timeline`], [`owned_frames`],
/// [`open_share`]), and the timeline's frame count: what each rank of a run across ranks
/// opens.
pub fn open_part(
    gpu: &PlayerGpu,
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
    gpus: usize,
    k: usize,
) -> Result<(Player, u32), PlayError> {
    let frame_count = timeline(scene, cfg, gpus)?;
    let ownership = Ownership::alternate(gpus).map_err(PlayError::Usage)?;
    let frames = owned_frames(&ownership, frame_count, k);
    Ok((open_share(gpu, scene, cfg, frames)?, frame_count))
}

/// The dataset frames GPU `k` owns, ascending: its player's frame `i` is the `i`-th.
pub fn owned_frames(ownership: &Ownership, frame_count: u32, k: usize) -> Vec<u32> {
    (0..frame_count)
        .filter(|&f| ownership.owner(f) == k)
        .collect()
}

/// One GPU's player on `gpu` over the dataset `frames` it owns: it shows its frames as
/// soon as it has them (the coordinator's timeline paces presentation).
pub fn open_share(
    gpu: &PlayerGpu,
    scene: &crate::scene::Scene,
    cfg: &PlayerConfig,
    frames: Vec<u32>,
) -> Result<Player, PlayError> {
    let mut share_cfg = cfg.clone();
    share_cfg.speed_fps = None;
    share_cfg.frames = Some(frames);
    share_cfg.start_frame = 0;
    Player::open_scene(gpu, scene, &share_cfg)
}

/// Reads an RGBA8 `texture` of `device` back: width, height and rows.
fn read_texture(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    texture: &wgpu::Texture,
) -> Result<(u32, u32, Vec<u8>), PlayError> {
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    let readback = crate::device::TextureReadback::record(device, &mut enc, texture, 4);
    let done = queue.submit([enc.finish()]);
    let out = readback
        .read(device, Some(done))
        .map_err(|e| PlayError::Usage(format!("reading an image back: {e}")))?;
    let (w, h) = readback.size;
    Ok((w, h, out))
}
