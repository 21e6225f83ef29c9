//! The seam between the one coordinator ([`super::MultiPlayer`] over
//! [`crate::pipeline::multi::MultiScheduler`]) and the GPUs that read and render: the
//! [`Workers`] trait. A GPU is a whole single-GPU [`Player`] over the frames it owns,
//! which numbers them `0..` (its *local* frames); the coordinator maps them to the
//! dataset's.
//!
//! Two transports carry it: [`InProcess`] (every GPU's player in this process, called
//! directly: `play --gpus`) and [`crate::app::ranks::RankWorkers`] (GPU `k` is MPI rank
//! `k`'s player: control messages out, reports and finished images back). The coordinator
//! is the same for both.
//!
//! The contract: a GPU plays on by itself (its player ticks) until it has rendered a frame
//! ([`Workers::poll`] returns it); it then holds that frame (renders nothing further) until
//! the coordinator lets it go on ([`Workers::go_on`]) or points it elsewhere
//! ([`Workers::point`]), so no GPU runs more than one finished frame ahead of the screen.

use std::time::Duration;

use crate::app::PlayerGpu;
use crate::app::config::{PathSel, PlayError};
use crate::app::core::Player;
use crate::app::headless::FaultReport;
use crate::app::stats::PathFigures;
use crate::pipeline::{Direction, PlayMode};
use crate::render::View;

/// Who a GPU is, for the reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GpuName {
    /// The ordinal named by `--gpus` (the rank's local GPU across ranks).
    pub ordinal: usize,
    /// How its adapter was chosen.
    pub matched: String,
    /// Its adapter.
    pub device: String,
    /// The host it runs on (across ranks; `None` in this process).
    pub host: Option<String>,
    /// The MPI rank that plays it (across ranks; `None` in this process). A rank may play
    /// several GPUs (`--gpus` within a rank).
    pub rank: Option<usize>,
}

/// The GPUs the coordinator drives, wherever their players run; see the module
/// documentation. `k` is a GPU's index (0 is the display).
pub trait Workers {
    /// How many GPUs.
    fn count(&self) -> usize;
    /// Who GPU `k` is.
    fn name(&self, k: usize) -> &GpuName;
    /// GPU `k`'s player where it runs in this process (GPU 0's always does).
    fn player(&self, k: usize) -> Option<&Player>;
    /// GPU `k`'s player where it runs in this process, to change it.
    fn player_mut(&mut self, k: usize) -> Option<&mut Player>;
    /// Ring slots of GPU `k`'s player.
    fn slots(&self, k: usize) -> usize;
    /// Simulation time of GPU `k`'s local frame `local`.
    fn frame_time(&self, k: usize, local: u32) -> f64;
    /// Points GPU `k`'s player at its local frame `local` (a jump): what it held is let go.
    fn point(&mut self, k: usize, local: u32);
    /// Starts or stops GPU `k`'s player.
    fn set_playing(&mut self, k: usize, playing: bool);
    /// Sets the direction GPU `k`'s player plays its frames in.
    fn set_direction(&mut self, k: usize, direction: Direction);
    /// Sets GPU `k`'s player's end-of-timeline behaviour (over its own frames: a ping-pong
    /// player turns at its own first and last frames, the coordinator re-points it where
    /// the timeline wants a frame again).
    fn set_mode(&mut self, k: usize, mode: PlayMode);
    /// Whether GPU `k` can run `sel`: `Err` gives the reason.
    fn path_available(&self, k: usize, sel: PathSel) -> Result<(), String>;
    /// Switches GPU `k` to `sel`.
    fn set_path(&mut self, k: usize, sel: PathSel) -> Result<(), String>;
    /// Gives GPU `k` the `view` and render `size` (GPU 0's).
    fn set_view(&mut self, k: usize, view: &View, size: (u32, u32));
    /// Shows or hides view slot `slot`'s attribute on GPU `k` ([`Player::set_attribute_shown`]):
    /// `Err` gives GPU `k`'s refusal where it answers at once (a GPU in another process
    /// refuses later, ending the run with its reason).
    fn show_attribute(&mut self, k: usize, slot: usize, on: bool) -> Result<(), String>;
    /// Shows or hides dataset attribute `attribute` on GPU `k`
    /// ([`Player::set_dataset_attribute_shown`]; a new slot's look is made alike on every
    /// GPU from the manifest); `Err` as [`Workers::show_attribute`].
    fn show_dataset_attribute(
        &mut self,
        k: usize,
        attribute: usize,
        on: bool,
    ) -> Result<(), String>;
    /// Lets GPU `k` play on unless it holds a frame: the local frame it has newly
    /// rendered, which it then holds.
    fn poll(&mut self, k: usize) -> Result<Option<u32>, PlayError>;
    /// GPU `k` may go on past the frame it holds (the display took its image).
    fn go_on(&mut self, k: usize);
    /// Whether GPU `k`'s player drew the frame it shows again since the last call (a new
    /// view, a path tracer's refinement) without a new frame; the call clears it. Only the
    /// display GPU's matters (its picture is on screen), so a transport may say `false`.
    fn take_redrawn(&mut self, _k: usize) -> bool {
        false
    }
    /// Local frames GPU `k` passed over as damaged (their reads failed).
    fn damaged(&self, k: usize) -> Vec<u32>;
    /// Bytes of GPU `k`'s local frame `local`.
    fn frame_bytes(&self, k: usize, local: u32) -> u64;
    /// GPU `k`'s finished image of the frame it holds (its render finished first).
    fn image(&mut self, k: usize) -> Result<Image, PlayError>;
    /// GPU `k`'s figures on `sel`, and its label of the path.
    fn figures(&self, k: usize, sel: PathSel) -> (PathFigures, String);
    /// Starts GPU `k`'s figures on `sel` again.
    fn reset_stats(&mut self, k: usize, sel: PathSel);
    /// Waits up to `timeout` for something to happen on a GPU that is not holding a frame.
    fn wait(&mut self, timeout: Duration);
    /// Lets every GPU's reads finish (at most `timeout` each).
    fn drain(&mut self, timeout: Duration);
    /// Brings what [`Workers::figures`] and [`Workers::damaged`] say up to date (another
    /// rank's figures arrive with its reports).
    fn settle(&mut self) -> Result<(), PlayError> {
        Ok(())
    }
    /// Waits for the renders in flight on the GPUs of this process, so their figures count
    /// every frame presented (a render is counted once it has finished).
    fn finish_renders(&mut self) -> Result<(), PlayError> {
        Ok(())
    }
    /// The run is over: GPUs in other processes stop.
    fn finish(&mut self) {}
    /// The ranks that stopped answering, where the transport has ranks.
    fn silent(&self) -> Option<&crate::cluster::Silent> {
        None
    }
    /// Asks GPU `k`'s process, where it is another rank's, to sample itself (memory,
    /// descriptors, threads: [`crate::app::soak::sample`]) at `t_s` of a long run; the
    /// sample comes back with its next report. Nothing for a GPU of this process.
    fn ask_sample(&mut self, _k: usize, _t_s: f64) {}
    /// The samples GPU `k`'s process sent since they were last taken (none for a GPU of
    /// this process: this process samples itself).
    fn take_samples(&mut self, _k: usize) -> Vec<crate::app::soak::SoakSample> {
        Vec::new()
    }
    /// GPU `k`'s fault counters, which a run's faults are counted from: faults met and
    /// damaged frames recovered so far (another rank's as its last report said).
    fn fault_mark(&self, k: usize) -> (u64, u64) {
        self.player(k)
            .map_or((0, 0), |p| (p.fault_count(), p.recovered_frames()))
    }
    /// GPU `k`'s faults on `sel` since `mark` ([`Workers::fault_mark`]), in its player's
    /// own frame numbers.
    fn faults_since(&self, k: usize, sel: PathSel, mark: (u64, u64)) -> FaultReport {
        self.player(k)
            .map(|p| FaultReport::since(p, sel, mark.0, mark.1))
            .unwrap_or_default()
    }
    /// The errors GPU `k`'s player has seen (distinct messages, oldest first).
    fn errors(&self, k: usize) -> Vec<String> {
        self.player(k)
            .and_then(Player::last_error)
            .map(|e| vec![e.to_string()])
            .unwrap_or_default()
    }
}

/// A finished image as the coordinator takes it.
#[derive(Clone, Debug, Default)]
pub struct Image {
    /// Width, pixels.
    pub width: u32,
    /// Height, pixels.
    pub height: u32,
    /// RGBA8 rows, sRGB-encoded.
    pub rgba8: Vec<u8>,
    /// Milliseconds from the finished render to the pixels in this process: the read back
    /// here, or the read back and the send in another rank.
    pub transfer_ms: f64,
}

/// One GPU's player in this process.
pub struct LocalGpu {
    name: GpuName,
    /// Kept alive for the player's device (and its CUDA context); `None` where the caller
    /// owns the device.
    _gpu: Option<PlayerGpu>,
    player: Player,
    holding: bool,
    /// Its player drew its shown frame again since [`LocalGpu::take_redrawn`].
    redrawn: bool,
}

impl LocalGpu {
    /// `player` as a GPU named `name`, keeping `gpu` (its device) alive where given.
    pub fn new(name: GpuName, gpu: Option<PlayerGpu>, player: Player) -> LocalGpu {
        LocalGpu {
            name,
            _gpu: gpu,
            player,
            holding: false,
            redrawn: false,
        }
    }
    /// Who it is.
    pub fn name(&self) -> &GpuName {
        &self.name
    }
    /// Its player.
    pub fn player(&self) -> &Player {
        &self.player
    }
    /// Its player, to change it.
    pub fn player_mut(&mut self) -> &mut Player {
        &mut self.player
    }
    /// See [`Workers::point`].
    pub fn point(&mut self, local: u32) {
        self.holding = false;
        self.player.scrub(local);
    }
    /// See [`Workers::set_view`].
    pub fn set_view(&mut self, view: &View, (w, h): (u32, u32)) {
        // The size first: a new aspect refits a player's camera, which the given one replaces.
        self.player.set_size(w, h);
        if self.player.view() != view {
            *self.player.view_mut() = view.clone();
        }
    }
    /// See [`Workers::poll`].
    pub fn poll(&mut self) -> Result<Option<u32>, PlayError> {
        if self.holding {
            return Ok(None);
        }
        let tick = self.player.tick()?;
        self.redrawn |= tick.rendered && tick.shown.is_none();
        self.holding = tick.shown.is_some();
        Ok(tick.shown)
    }
    /// See [`Workers::go_on`].
    pub fn go_on(&mut self) {
        self.holding = false;
    }
    /// Whether its player drew the frame it shows again (a new view, a path tracer's
    /// refinement) since the last call.
    pub fn take_redrawn(&mut self) -> bool {
        std::mem::take(&mut self.redrawn)
    }
    /// Whether it holds a finished frame.
    pub fn holding(&self) -> bool {
        self.holding
    }
    /// See [`Workers::damaged`].
    pub fn damaged(&self) -> Vec<u32> {
        self.player.damaged_frames().keys().copied().collect()
    }
    /// See [`Workers::path_available`].
    pub fn path_available(&self, sel: PathSel) -> Result<(), String> {
        let r = self.player.path_report(sel);
        if r.available {
            return Ok(());
        }
        Err(r
            .unavailable_reason
            .unwrap_or_else(|| format!("the {} path is unavailable", sel.name())))
    }
    /// See [`Workers::image`]: its render finished first, then read back.
    pub fn image(&mut self) -> Result<Image, PlayError> {
        self.player
            .device()
            .poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout: None,
            })
            .map_err(|e| PlayError::Usage(format!("waiting for a render: {e}")))?;
        let t0 = std::time::Instant::now();
        let texture = self
            .player
            .output()
            .ok_or_else(|| PlayError::Usage("nothing rendered yet".into()))?;
        let (width, height, rgba8) =
            super::read_texture(self.player.device(), self.player.queue(), texture)?;
        Ok(Image {
            width,
            height,
            rgba8,
            transfer_ms: t0.elapsed().as_secs_f64() * 1e3,
        })
    }
    /// See [`Workers::figures`].
    pub fn figures(&self, sel: PathSel) -> (PathFigures, String) {
        (self.player.figures(sel), self.player.path_report(sel).label)
    }
}

/// Every GPU's player in this process, called directly (`play --gpus`).
pub struct InProcess {
    gpus: Vec<LocalGpu>,
}

impl InProcess {
    /// The GPUs, GPU 0 (the display) first.
    pub fn new(gpus: Vec<LocalGpu>) -> InProcess {
        InProcess { gpus }
    }
}

impl Workers for InProcess {
    fn count(&self) -> usize {
        self.gpus.len()
    }
    fn name(&self, k: usize) -> &GpuName {
        &self.gpus[k].name
    }
    fn player(&self, k: usize) -> Option<&Player> {
        self.gpus.get(k).map(|g| &g.player)
    }
    fn player_mut(&mut self, k: usize) -> Option<&mut Player> {
        self.gpus.get_mut(k).map(|g| &mut g.player)
    }
    fn slots(&self, k: usize) -> usize {
        self.gpus[k].player.slots()
    }
    fn frame_time(&self, k: usize, local: u32) -> f64 {
        self.gpus[k].player.frame_time(local)
    }
    fn point(&mut self, k: usize, local: u32) {
        self.gpus[k].point(local);
    }
    fn set_playing(&mut self, k: usize, playing: bool) {
        self.gpus[k].player.set_playing(playing);
    }
    fn set_direction(&mut self, k: usize, direction: Direction) {
        self.gpus[k].player.set_direction(direction);
    }
    fn set_mode(&mut self, k: usize, mode: PlayMode) {
        self.gpus[k].player.set_mode(mode);
    }
    fn path_available(&self, k: usize, sel: PathSel) -> Result<(), String> {
        self.gpus[k].path_available(sel)
    }
    fn set_path(&mut self, k: usize, sel: PathSel) -> Result<(), String> {
        self.gpus[k].player.set_path(sel)
    }
    fn set_view(&mut self, k: usize, view: &View, size: (u32, u32)) {
        self.gpus[k].set_view(view, size);
    }
    fn show_attribute(&mut self, k: usize, slot: usize, on: bool) -> Result<(), String> {
        self.gpus[k].player.set_attribute_shown(slot, on)
    }
    fn show_dataset_attribute(
        &mut self,
        k: usize,
        attribute: usize,
        on: bool,
    ) -> Result<(), String> {
        self.gpus[k]
            .player
            .set_dataset_attribute_shown(attribute, on)
    }
    fn poll(&mut self, k: usize) -> Result<Option<u32>, PlayError> {
        self.gpus[k].poll()
    }
    fn go_on(&mut self, k: usize) {
        self.gpus[k].go_on();
    }
    fn take_redrawn(&mut self, k: usize) -> bool {
        self.gpus[k].take_redrawn()
    }
    fn damaged(&self, k: usize) -> Vec<u32> {
        self.gpus[k].damaged()
    }
    fn frame_bytes(&self, k: usize, local: u32) -> u64 {
        self.gpus[k].player.frame_bytes(local)
    }
    fn image(&mut self, k: usize) -> Result<Image, PlayError> {
        self.gpus[k].image()
    }
    fn figures(&self, k: usize, sel: PathSel) -> (PathFigures, String) {
        self.gpus[k].figures(sel)
    }
    fn reset_stats(&mut self, k: usize, sel: PathSel) {
        self.gpus[k].player.reset_stats(sel);
    }
    fn wait(&mut self, timeout: Duration) {
        match self.gpus.iter_mut().find(|g| !g.holding) {
            Some(g) => g.player.wait(timeout),
            None => std::thread::sleep(timeout.min(Duration::from_millis(1))),
        }
    }
    fn drain(&mut self, timeout: Duration) {
        for g in &mut self.gpus {
            g.player.drain(timeout);
        }
    }
    fn finish_renders(&mut self) -> Result<(), PlayError> {
        self.gpus
            .iter_mut()
            .try_for_each(|g| g.player.finish_render())
    }
}
