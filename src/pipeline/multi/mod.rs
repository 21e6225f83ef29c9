//! Several GPUs, one timeline: alternate-frame rendering (AFR) as pure logic.
//!
//! Each GPU has its own engine, frame ring and renderer; frame `f` belongs to one GPU
//! ([`Ownership::owner`]: `f mod G`, or in proportion to weights), which reads it, renders
//! it, and hands the finished image to the display GPU. [`MultiScheduler`] sits on top of
//! the one global [`Scheduler`]: the global plan says which frames are wanted and in what
//! order; this module splits it into per-GPU request queues, tracks each frame from request
//! to finished image on its GPU, and tells the global scheduler a frame is *ready* only once
//! its image is finished. The global scheduler's playhead then shows frames strictly in
//! order, never one that is not finished, and a jump lands on its exact target whichever
//! GPU owns it (queued requests no longer wanted are cancelled on every GPU, reads no longer
//! wanted are abandoned, and the target is the most urgent request of its owner).
//!
//! Like the scheduler it knows nothing of slots, engines or renderers, and the caller
//! supplies the clock (seconds, monotonic), so it is tested against simulated GPUs. A
//! caller's loop, per tick:
//!
//! 1. [`MultiScheduler::plan`]: per GPU, queued requests to cancel, reads to abort and
//!    resident frames to evict;
//! 2. per GPU, [`MultiScheduler::take_requests`] for as many free ring slots as it has,
//!    issuing each [`Ticket`]'s reads on that GPU's engine;
//! 3. reports: [`MultiScheduler::landed`] (the frame is in the GPU's slot),
//!    [`MultiScheduler::next_render`] / [`MultiScheduler::rendered`] (its image is
//!    finished on that GPU);
//! 4. [`MultiScheduler::tick`]: the frame to present now, if any, with the GPU holding its
//!    image (copied to the display GPU peer-to-peer or through the host, then
//!    [`MultiScheduler::copied`] records how long that took).
//!
//! The frame path (direct or host) is one choice for every GPU: [`MultiScheduler::set_path`]
//! switches them all at once, and reports of reads issued before the switch are stale
//! ([`Report::Stale`]), as in the single-GPU player.

use std::collections::{BTreeMap, VecDeque};

use super::rate::RateWindow;
use super::scheduler::{Direction, PlayMode, PlaybackConfig, Scheduler};

/// Which GPU owns which frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ownership {
    /// Frames per GPU in each period of `sum(weights)` frames (all 1: plain AFR).
    weights: Vec<u32>,
    period: u32,
}

impl Ownership {
    /// Plain alternate-frame rendering: frame `f` belongs to GPU `f mod gpus`.
    pub fn alternate(gpus: usize) -> Result<Ownership, String> {
        Ownership::weighted(vec![1; gpus])
    }

    /// In each period of `sum(weights)` consecutive frames, GPU 0 owns the first
    /// `weights[0]`, GPU 1 the next `weights[1]`, and so on (a faster GPU takes more
    /// frames). Every weight is at least 1, and there are 1 to 64 GPUs.
    pub fn weighted(weights: Vec<u32>) -> Result<Ownership, String> {
        if weights.is_empty() || weights.len() > 64 {
            return Err(format!("{} GPUs: 1 to 64 are supported", weights.len()));
        }
        if weights.iter().any(|&w| w == 0 || w > 1024) {
            return Err(format!("weights {weights:?}: each is 1 to 1024"));
        }
        let period = weights.iter().sum();
        Ok(Ownership { weights, period })
    }

    /// Number of GPUs.
    pub fn gpus(&self) -> usize {
        self.weights.len()
    }

    /// The GPU that reads and renders `frame`.
    pub fn owner(&self, frame: u32) -> usize {
        let mut at = frame % self.period;
        for (gpu, &w) in self.weights.iter().enumerate() {
            if at < w {
                return gpu;
            }
            at -= w;
        }
        unreachable!("the weights sum to the period")
    }

    /// The longest playback window in which no GPU owns more frames than its slots, on a
    /// timeline of `frame_count` frames: any `period` consecutive frames hold `weights[k]`
    /// of GPU k's, so `period * min(slots[k] / weights[k])` fits where the window does not
    /// wrap; where a looping timeline wraps (its length no multiple of the period) one GPU
    /// may own both ends, and the window shrinks until that fits too. At least 2 (the frame
    /// shown holds a slot while the next is read), else an error.
    pub fn window(&self, slots: &[usize], frame_count: u32) -> Result<usize, String> {
        if slots.len() != self.gpus() {
            return Err(format!(
                "{} slot counts for {} GPUs",
                slots.len(),
                self.gpus()
            ));
        }
        let per_period = self
            .weights
            .iter()
            .zip(slots)
            .map(|(&w, &s)| s / w as usize)
            .min()
            .unwrap_or(0);
        let mut window = per_period * self.period as usize;
        while window >= 2 && !self.wrap_fits(slots, frame_count, window) {
            window -= 1;
        }
        if window < 2 {
            return Err(format!(
                "slots {slots:?} for {frame_count} frames on weights {:?}: no playback window of at least 2 frames fits (each GPU needs at least as many slots as its weight, and a looping timeline's last and first frames may fall on one GPU)",
                self.weights
            ));
        }
        Ok(window)
    }

    /// Whether every window of `window` frames that wraps from the end of a looping
    /// timeline to its start gives no GPU more frames than its slots.
    fn wrap_fits(&self, slots: &[usize], frame_count: u32, window: usize) -> bool {
        let n = u64::from(frame_count.max(1));
        let len = (window as u64).min(n);
        // Windows starting at n - len + 1 ... n - 1 wrap; the others lie inside one run of
        // whole periods and parts of periods and fit by the weights.
        for start in (n - len + 1)..n {
            let mut count = vec![0usize; self.gpus()];
            for i in 0..len {
                let frame = ((start + i) % n) as u32;
                let k = self.owner(frame);
                count[k] += 1;
                if count[k] > slots[k] {
                    return false;
                }
            }
        }
        true
    }
}

/// A read issued on one GPU: report it back with [`MultiScheduler::landed`], and its render
/// with [`MultiScheduler::rendered`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ticket {
    /// The GPU that reads and renders the frame.
    pub gpu: usize,
    /// The frame.
    pub frame: u32,
    /// The path switch count when issued: a report from an earlier path is stale.
    epoch: u64,
}

/// How a report was taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// Recorded.
    Accepted,
    /// The frame is no longer wanted (a jump abandoned its read): the caller frees its slot.
    Dropped,
    /// Issued on a path since switched away from: ignored; the caller frees its slot on
    /// the old path.
    Stale,
    /// A render for a view since changed: its image is not used, and the frame is offered
    /// by [`MultiScheduler::next_render`] again.
    Outdated,
    /// No such read or render in progress: ignored.
    Unknown,
}

/// What one GPU should do after a [`MultiScheduler::plan`] or a path switch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GpuActions {
    /// Requested frames whose reads were never issued, no longer wanted: nothing to undo.
    pub cancel: Vec<u32>,
    /// Frames whose reads are in flight, no longer wanted: abandon the reads not yet issued;
    /// the frame still reports back ([`MultiScheduler::landed`], answered
    /// [`Report::Dropped`]).
    pub abort: Vec<u32>,
    /// Frames resident (read, rendering or rendered) no longer wanted: free their slots
    /// (after a render in flight on the slot has finished).
    pub evict: Vec<u32>,
}

impl GpuActions {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.cancel.is_empty() && self.abort.is_empty() && self.evict.is_empty()
    }
}

/// A frame to present now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Present {
    /// The frame.
    pub frame: u32,
    /// The GPU whose finished image it is.
    pub gpu: usize,
    /// Whether the image has to be copied to the display GPU first.
    pub needs_copy: bool,
    /// The frame on screen again, in an image rendered for a new view
    /// ([`MultiScheduler::invalidate_images`]); not a step of playback.
    pub again: bool,
}

/// Where a frame is on its GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    /// Reads in flight.
    Loading,
    /// Resident, not yet rendered.
    Loaded,
    /// Its render is in flight.
    Rendering,
    /// Its image is finished: the global scheduler has it as ready.
    Finished,
}

#[derive(Clone, Copy, Debug)]
struct Held {
    stage: Stage,
    /// Request order: lower is more urgent.
    seq: u64,
    /// Its read or render was abandoned: dropped when it reports back.
    aborted: bool,
    /// Its render in flight is for a view since changed: rendered again when it ends.
    outdated: bool,
}

/// Counters of one GPU, and of all together.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GpuFigures {
    /// Frames read into this GPU's slots.
    pub frames_landed: u64,
    /// Bytes read into them.
    pub bytes_landed: u64,
    /// Frames rendered to finished images.
    pub frames_rendered: u64,
    /// Frames presented.
    pub frames_shown: u64,
    /// Bytes of images copied to the display GPU, and the seconds the copies took.
    pub copy_bytes: u64,
    /// Seconds of those copies.
    pub copy_seconds: f64,
    /// GB/s read (10^9 bytes), **now** ([`super::rate`]).
    pub gbps: f64,
    /// Frames rendered per second, **now** ([`super::rate`]).
    pub frames_per_s: f64,
    /// Image copy rate to the display GPU, GB/s (0 where nothing was copied).
    pub copy_gbps: f64,
}

#[derive(Clone, Debug, Default)]
struct GpuState {
    /// Requested, not yet issued: most urgent first.
    queue: VecDeque<(u32, u64)>,
    /// Frames holding a slot on this GPU.
    held: BTreeMap<u32, Held>,
    figures: GpuFigures,
    /// Landings (time, bytes) and renders, for their **now** rates.
    landings: RateWindow,
    renders: RateWindow,
}

/// The global scheduler, split over GPUs; see the module documentation.
#[derive(Clone, Debug)]
pub struct MultiScheduler {
    sched: Scheduler,
    ownership: Ownership,
    slots: Vec<usize>,
    display_gpu: usize,
    gpus: Vec<GpuState>,
    path: usize,
    epoch: u64,
    seq: u64,
    /// Presentations, for the **now** rate of all GPUs together.
    shown_times: RateWindow,
    /// The frame last presented, while it is still the playhead's (cleared by a jump).
    on_screen: Option<u32>,
    /// The frame on screen, to be presented again once rendered for a new view.
    refresh: Option<u32>,
}

impl MultiScheduler {
    /// A timeline of `frame_count` frames over GPUs with `slots[k]` ring slots each, frames
    /// given out by `ownership`, images shown on `display_gpu`, starting on frame path
    /// `path` (the caller's numbering, e.g. 0 direct, 1 host). The playback window is
    /// [`Ownership::window`]; rates ([`MultiScheduler::figures`]) are **now** readings as [`super::rate`] defines them.
    pub fn new(
        frame_count: u32,
        mode: PlayMode,
        speed_fps: Option<f64>,
        ownership: Ownership,
        slots: Vec<usize>,
        display_gpu: usize,
        path: usize,
    ) -> Result<MultiScheduler, String> {
        let window = ownership.window(&slots, frame_count)?;
        if display_gpu >= ownership.gpus() {
            return Err(format!(
                "display GPU #{display_gpu} of {} GPUs",
                ownership.gpus()
            ));
        }
        Ok(MultiScheduler {
            sched: Scheduler::new(PlaybackConfig {
                frame_count,
                mode,
                speed_fps,
                window,
            }),
            gpus: vec![GpuState::default(); ownership.gpus()],
            ownership,
            slots,
            display_gpu,
            path,
            epoch: 0,
            seq: 0,
            shown_times: RateWindow::default(),
            on_screen: None,
            refresh: None,
        })
    }

    /// The global scheduler (position, direction, state, counters).
    pub fn scheduler(&self) -> &Scheduler {
        &self.sched
    }
    /// Who owns which frame.
    pub fn ownership(&self) -> &Ownership {
        &self.ownership
    }
    /// The frame path every GPU uses now.
    pub fn path(&self) -> usize {
        self.path
    }
    /// Frames holding a slot on `gpu` (reading, resident, rendering or rendered).
    pub fn held(&self, gpu: usize) -> usize {
        self.gpus.get(gpu).map_or(0, |g| g.held.len())
    }
    /// Frames requested on `gpu` and not yet issued, most urgent first.
    pub fn queued(&self, gpu: usize) -> Vec<u32> {
        self.gpus
            .get(gpu)
            .map(|g| g.queue.iter().map(|&(f, _)| f).collect())
            .unwrap_or_default()
    }

    /// Starts or stops the clock.
    pub fn set_playing(&mut self, playing: bool) {
        self.sched.set_playing(playing);
    }
    /// Sets the direction of playback.
    pub fn set_direction(&mut self, direction: Direction) {
        self.sched.set_direction(direction);
    }
    /// Changes the end-of-timeline behaviour (loop, once, ping-pong). The playback window
    /// fits every mode: [`Ownership::window`] allows for a loop's wrap, and a ping-pong
    /// window holds consecutive frames on both sides of its turn.
    pub fn set_mode(&mut self, mode: PlayMode) {
        self.sched.set_mode(mode);
    }
    /// Sets the playback rate (`None`: as fast as frames are finished).
    pub fn set_speed(&mut self, speed_fps: Option<f64>) {
        self.sched.set_speed(speed_fps);
    }
    /// The playback window: how many frames ahead of the playhead are requested.
    pub fn window(&self) -> usize {
        self.sched.config().window
    }
    /// `gpu` no longer holds `frame` (its image or its data was let go outside a plan, e.g.
    /// its player moved on): the frame leaves the GPU's slots and is requested again
    /// when it is wanted. Returns whether the GPU held it.
    pub fn forget(&mut self, gpu: usize, frame: u32) -> bool {
        let Some(g) = self.gpus.get_mut(gpu) else {
            return false;
        };
        if g.held.remove(&frame).is_none() {
            return false;
        }
        self.sched.evicted(frame);
        if self.on_screen == Some(frame) {
            self.refresh = None;
        }
        true
    }
    /// Jumps to `target` (clamped): the next [`MultiScheduler::plan`] cancels what no GPU
    /// needs any more and makes the target its owner's most urgent request; the target is
    /// the next frame presented.
    pub fn scrub(&mut self, target: u32) {
        self.sched.scrub(target);
        self.on_screen = None;
        self.refresh = None;
    }
    /// Steps one frame (pausing), as the step keys do.
    pub fn step(&mut self, direction: Direction) {
        self.sched.step(direction);
        self.on_screen = None;
        self.refresh = None;
    }

    /// The view changed (camera, look, image size): every finished image is out of date,
    /// though the frames' data is still right. Frames whose images were finished go back
    /// to resident and are rendered again (their slots stay) before they are shown; renders
    /// in flight are done again ([`Report::Outdated`]); the frame on screen is presented
    /// again ([`Present::again`]) once its new image is finished.
    pub fn invalidate_images(&mut self) {
        for g in &mut self.gpus {
            for (&f, h) in &mut g.held {
                match h.stage {
                    Stage::Finished => {
                        h.stage = Stage::Loaded;
                        // Not ready to the playhead until rendered again.
                        self.sched.started(f);
                    }
                    Stage::Rendering => h.outdated = true,
                    Stage::Loading | Stage::Loaded => {}
                }
            }
        }
        if self.on_screen == Some(self.sched.position()) {
            self.refresh = self.on_screen;
        }
    }

    /// Switches every GPU to frame path `path`. Everything of the old path is let go: the
    /// returned actions (one per GPU) cancel its queued requests, abort its reads and evict
    /// its resident frames; later reports of its tickets are [`Report::Stale`]. Playback
    /// goes on at the same position, direction and play state on the new path.
    pub fn set_path(&mut self, path: usize) -> Vec<GpuActions> {
        let mut actions = vec![GpuActions::default(); self.gpus.len()];
        if path == self.path {
            return actions;
        }
        for (g, a) in self.gpus.iter_mut().zip(&mut actions) {
            a.cancel = g.queue.drain(..).map(|(f, _)| f).collect();
            for (f, h) in std::mem::take(&mut g.held) {
                if h.stage == Stage::Loading {
                    a.abort.push(f);
                } else {
                    a.evict.push(f);
                }
            }
        }
        let old = &self.sched;
        let mut s = Scheduler::new(old.config());
        s.set_direction(old.direction());
        s.scrub(old.position());
        s.set_playing(old.is_playing());
        self.sched = s;
        self.path = path;
        self.epoch += 1;
        self.on_screen = None;
        self.refresh = None;
        actions
    }

    /// What each GPU should cancel, abort and evict now; new requests go to their owners'
    /// queues ([`MultiScheduler::take_requests`]).
    pub fn plan(&mut self) -> Vec<GpuActions> {
        let mut actions = vec![GpuActions::default(); self.gpus.len()];
        // Finished images behind the playhead or outside the window.
        for f in self.sched.evictable() {
            let gpu = self.ownership.owner(f);
            if self.gpus[gpu].held.remove(&f).is_some() {
                actions[gpu].evict.push(f);
            }
            self.sched.evicted(f);
        }
        let plan = self.sched.plan();
        for f in plan.cancel {
            let gpu = self.ownership.owner(f);
            let q = &mut self.gpus[gpu].queue;
            q.retain(|&(x, _)| x != f);
            actions[gpu].cancel.push(f);
        }
        for f in plan.abort {
            // The global scheduler has the frame as loading: anything short of a finished
            // image. Reads and renders in flight finish first; a resident frame goes now.
            let gpu = self.ownership.owner(f);
            let g = &mut self.gpus[gpu];
            match g.held.get_mut(&f) {
                Some(h) if h.stage == Stage::Loaded => {
                    g.held.remove(&f);
                    self.sched.evicted(f);
                    actions[gpu].evict.push(f);
                }
                Some(h) => {
                    h.aborted = true;
                    if h.stage == Stage::Loading {
                        actions[gpu].abort.push(f);
                    }
                }
                // Issued on no GPU (cannot happen: queued frames are cancelled, not aborted).
                None => self.sched.evicted(f),
            }
        }
        for f in plan.request {
            let gpu = self.ownership.owner(f);
            self.seq += 1;
            self.gpus[gpu].queue.push_back((f, self.seq));
        }
        actions
    }

    /// Takes up to `free` of `gpu`'s queued requests, most urgent first, never more than its
    /// slots allow: the caller issues their reads on that GPU.
    pub fn take_requests(&mut self, gpu: usize, free: usize) -> Vec<Ticket> {
        let Some(g) = self.gpus.get_mut(gpu) else {
            return Vec::new();
        };
        let room = self.slots[gpu].saturating_sub(g.held.len()).min(free);
        let mut out = Vec::with_capacity(room);
        while out.len() < room {
            let Some((frame, seq)) = g.queue.pop_front() else {
                break;
            };
            g.held.insert(
                frame,
                Held {
                    stage: Stage::Loading,
                    seq,
                    aborted: false,
                    outdated: false,
                },
            );
            self.sched.started(frame);
            out.push(Ticket {
                gpu,
                frame,
                epoch: self.epoch,
            });
        }
        out
    }

    /// Checks a ticket: the GPU's record of the frame if it is current.
    fn current(&mut self, t: Ticket) -> Result<&mut Held, Report> {
        if t.epoch != self.epoch {
            return Err(Report::Stale);
        }
        self.gpus
            .get_mut(t.gpu)
            .and_then(|g| g.held.get_mut(&t.frame))
            .ok_or(Report::Unknown)
    }

    /// The reads of `ticket` ended at `now`: `Some(bytes)` if the whole frame is in its slot,
    /// `None` if they failed (playback passes over the frame and reads it on a later visit).
    /// A frame no longer wanted is dropped ([`Report::Dropped`]: free its slot).
    pub fn landed(&mut self, ticket: Ticket, bytes: Option<u64>, now: f64) -> Report {
        let held = match self.current(ticket) {
            Ok(h) if h.stage == Stage::Loading => *h,
            Ok(_) => return Report::Unknown,
            Err(r) => return r,
        };
        let (gpu, frame) = (ticket.gpu, ticket.frame);
        let g = &mut self.gpus[gpu];
        if held.aborted {
            g.held.remove(&frame);
            self.sched.evicted(frame);
            return Report::Dropped;
        }
        match bytes {
            Some(bytes) => {
                g.held.get_mut(&frame).expect("checked").stage = Stage::Loaded;
                g.figures.frames_landed += 1;
                g.figures.bytes_landed += bytes;
                g.landings.record(now, bytes);
            }
            None => {
                g.held.remove(&frame);
                self.sched.failed(frame);
            }
        }
        Report::Accepted
    }

    /// The frame `gpu` should render next, if any (its most urgent resident frame): it is
    /// then rendering until [`MultiScheduler::rendered`].
    pub fn next_render(&mut self, gpu: usize) -> Option<Ticket> {
        let g = self.gpus.get_mut(gpu)?;
        let (&frame, held) = g
            .held
            .iter_mut()
            .filter(|(_, h)| h.stage == Stage::Loaded && !h.aborted)
            .min_by_key(|(_, h)| h.seq)?;
        held.stage = Stage::Rendering;
        Some(Ticket {
            gpu,
            frame,
            epoch: self.epoch,
        })
    }

    /// The render of `ticket` ended at `now`: with `ok` its image is finished and the frame
    /// may be presented; without, playback passes over it. A frame no longer wanted is
    /// dropped ([`Report::Dropped`]: free its slot and image).
    pub fn rendered(&mut self, ticket: Ticket, ok: bool, now: f64) -> Report {
        let held = match self.current(ticket) {
            Ok(h) if h.stage == Stage::Rendering => *h,
            Ok(_) => return Report::Unknown,
            Err(r) => return r,
        };
        let (gpu, frame) = (ticket.gpu, ticket.frame);
        let g = &mut self.gpus[gpu];
        if held.aborted {
            g.held.remove(&frame);
            self.sched.evicted(frame);
            return Report::Dropped;
        }
        if held.outdated {
            let h = g.held.get_mut(&frame).expect("checked");
            h.stage = Stage::Loaded;
            h.outdated = false;
            return Report::Outdated;
        }
        if ok {
            g.held.get_mut(&frame).expect("checked").stage = Stage::Finished;
            g.figures.frames_rendered += 1;
            g.renders.record(now, 0);
            self.sched.loaded(frame);
        } else {
            g.held.remove(&frame);
            self.sched.failed(frame);
        }
        Report::Accepted
    }

    /// Advances the clock to `now` and returns the frame to present, if a new one is due:
    /// always the next in play order (or a jump's target), always a finished image.
    /// The frame on screen may also be presented again, in a new view's image
    /// ([`Present::again`]).
    pub fn tick(&mut self, now: f64) -> Option<Present> {
        let (frame, again) = match self.sched.tick(now) {
            Some(f) => (f, false),
            None => {
                let f = self.refresh?;
                if f != self.sched.position() {
                    // The playhead left it (a damaged successor passed over): nothing to
                    // refresh.
                    self.refresh = None;
                    return None;
                }
                let gpu = self.ownership.owner(f);
                if self.gpus[gpu].held.get(&f).map(|h| h.stage) != Some(Stage::Finished) {
                    return None;
                }
                (f, true)
            }
        };
        self.refresh = None;
        self.on_screen = Some(frame);
        let gpu = self.ownership.owner(frame);
        debug_assert_eq!(
            self.gpus[gpu].held.get(&frame).map(|h| h.stage),
            Some(Stage::Finished)
        );
        if !again {
            self.gpus[gpu].figures.frames_shown += 1;
            self.shown_times.record(now, 0);
        }
        Some(Present {
            frame,
            gpu,
            needs_copy: gpu != self.display_gpu,
            again,
        })
    }

    /// An image of `bytes` was copied from `gpu` to the display GPU in `seconds`.
    pub fn copied(&mut self, gpu: usize, bytes: u64, seconds: f64) {
        if let Some(g) = self.gpus.get_mut(gpu) {
            g.figures.copy_bytes += bytes;
            g.figures.copy_seconds += seconds.max(0.0);
        }
    }

    /// Per GPU and all together: counters since the start, and the **now** rates at `now`
    /// ([`super::rate`]). The total's frames/s is the presentation rate.
    pub fn figures(&self, now: f64) -> (Vec<GpuFigures>, GpuFigures) {
        let mut total = GpuFigures::default();
        let per: Vec<GpuFigures> = self
            .gpus
            .iter()
            .map(|g| {
                let mut f = g.figures;
                f.gbps = g.landings.reading(now).amount_per_s / 1e9;
                f.frames_per_s = g.renders.reading(now).per_s;
                f.copy_gbps = if f.copy_seconds > 0.0 {
                    f.copy_bytes as f64 / f.copy_seconds / 1e9
                } else {
                    0.0
                };
                total.frames_landed += f.frames_landed;
                total.bytes_landed += f.bytes_landed;
                total.frames_rendered += f.frames_rendered;
                total.frames_shown += f.frames_shown;
                total.copy_bytes += f.copy_bytes;
                total.copy_seconds += f.copy_seconds;
                total.gbps += f.gbps;
                f
            })
            .collect();
        total.frames_per_s = self.shown_times.reading(now).per_s;
        total.copy_gbps = if total.copy_seconds > 0.0 {
            total.copy_bytes as f64 / total.copy_seconds / 1e9
        } else {
            0.0
        };
        (per, total)
    }
}

#[cfg(test)]
mod tests;
