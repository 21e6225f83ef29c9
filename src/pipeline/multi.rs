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
    /// GB/s read (10^9 bytes), over the rate window.
    pub gbps: f64,
    /// Frames rendered per second, over the rate window.
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
    /// (time, bytes) of landings and times of renders within the rate window.
    landings: VecDeque<(f64, u64)>,
    renders: VecDeque<f64>,
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
    rate_window: f64,
    shown_times: VecDeque<f64>,
    /// The frame last presented, while it is still the playhead's (cleared by a jump).
    on_screen: Option<u32>,
    /// The frame on screen, to be presented again once rendered for a new view.
    refresh: Option<u32>,
}

impl MultiScheduler {
    /// A timeline of `frame_count` frames over GPUs with `slots[k]` ring slots each, frames
    /// given out by `ownership`, images shown on `display_gpu`, starting on frame path
    /// `path` (the caller's numbering, e.g. 0 direct, 1 host). The playback window is
    /// [`Ownership::window`]; rates ([`MultiScheduler::figures`]) are over the last second.
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
            rate_window: 1.0,
            shown_times: VecDeque::new(),
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
                g.landings.push_back((now, bytes));
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
            g.renders.push_back(now);
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
            self.shown_times.push_back(now);
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

    /// Per GPU and all together: counters since the start, and rates over the last
    /// second before `now`. The total's frames/s is the presentation rate.
    pub fn figures(&mut self, now: f64) -> (Vec<GpuFigures>, GpuFigures) {
        let since = now - self.rate_window;
        let mut total = GpuFigures::default();
        let per: Vec<GpuFigures> = self
            .gpus
            .iter_mut()
            .map(|g| {
                while g.landings.front().is_some_and(|&(t, _)| t < since) {
                    g.landings.pop_front();
                }
                while g.renders.front().is_some_and(|&t| t < since) {
                    g.renders.pop_front();
                }
                let mut f = g.figures;
                f.gbps =
                    g.landings.iter().map(|&(_, b)| b).sum::<u64>() as f64 / self.rate_window / 1e9;
                f.frames_per_s = g.renders.len() as f64 / self.rate_window;
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
        while self.shown_times.front().is_some_and(|&t| t < since) {
            self.shown_times.pop_front();
        }
        total.frames_per_s = self.shown_times.len() as f64 / self.rate_window;
        total.copy_gbps = if total.copy_seconds > 0.0 {
            total.copy_bytes as f64 / total.copy_seconds / 1e9
        } else {
            0.0
        };
        (per, total)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use proptest::prelude::*;

    use super::*;

    const MB: u64 = 1 << 20;

    fn afr(frames: u32, gpus: usize, slots: usize) -> MultiScheduler {
        MultiScheduler::new(
            frames,
            PlayMode::Loop,
            None,
            Ownership::alternate(gpus).unwrap(),
            vec![slots; gpus],
            0,
            0,
        )
        .unwrap()
    }

    /// Simulated GPUs: reads and renders in flight, finished images (shadowed to check
    /// that only those are presented), and what was presented.
    struct Sim {
        m: MultiScheduler,
        reading: Vec<Ticket>,
        rendering: Vec<Ticket>,
        /// (gpu, frame) whose image is finished on the current path and not evicted.
        finished: HashSet<(usize, u32)>,
        shown: Vec<Present>,
        now: f64,
    }

    impl Sim {
        fn new(m: MultiScheduler) -> Sim {
            Sim {
                m,
                reading: Vec::new(),
                rendering: Vec::new(),
                finished: HashSet::new(),
                shown: Vec::new(),
                now: 0.0,
            }
        }
        fn apply(&mut self, actions: Vec<GpuActions>) {
            for (gpu, a) in actions.into_iter().enumerate() {
                for f in a.cancel.iter().chain(&a.abort).chain(&a.evict) {
                    assert_eq!(self.m.ownership().owner(*f), gpu, "action on the owner");
                }
                for f in a.evict {
                    self.finished.remove(&(gpu, f));
                }
            }
        }
        fn plan(&mut self) {
            let a = self.m.plan();
            self.apply(a);
        }
        fn take(&mut self, gpu: usize) {
            for t in self.m.take_requests(gpu, usize::MAX) {
                assert_eq!(t.gpu, gpu);
                assert_eq!(self.m.ownership().owner(t.frame), gpu, "read on its owner");
                self.reading.push(t);
            }
        }
        fn land(&mut self, i: usize, ok: bool) {
            if self.reading.is_empty() {
                return;
            }
            let t = self.reading.remove(i % self.reading.len());
            self.m.landed(t, ok.then_some(MB), self.now);
        }
        fn render(&mut self, gpu: usize) {
            if let Some(t) = self.m.next_render(gpu) {
                self.rendering.push(t);
            }
        }
        fn rendered(&mut self, i: usize, ok: bool) {
            if self.rendering.is_empty() {
                return;
            }
            let t = self.rendering.remove(i % self.rendering.len());
            if self.m.rendered(t, ok, self.now) == Report::Accepted && ok {
                self.finished.insert((t.gpu, t.frame));
            }
        }
        fn tick(&mut self, dt: f64) -> Option<Present> {
            self.now += dt;
            let p = self.m.tick(self.now)?;
            assert_eq!(p.gpu, self.m.ownership().owner(p.frame));
            assert!(
                self.finished.contains(&(p.gpu, p.frame)),
                "frame {} presented without a finished image on GPU {} of this path",
                p.frame,
                p.gpu
            );
            assert_eq!(p.needs_copy, p.gpu != 0);
            if p.again {
                assert_eq!(
                    self.shown.last().map(|l| l.frame),
                    Some(p.frame),
                    "only the frame on screen is presented again"
                );
                return Some(p);
            }
            self.shown.push(p);
            Some(p)
        }
        fn check(&self) {
            for gpu in 0..self.m.ownership().gpus() {
                assert!(
                    self.m.held(gpu) <= self.m.slots[gpu],
                    "GPU {gpu} over its slots"
                );
                for f in self.m.queued(gpu) {
                    assert_eq!(self.m.ownership().owner(f), gpu);
                }
            }
        }
        /// Every GPU does all it can once: plan, issue, land, render, present.
        fn pump(&mut self) -> Option<Present> {
            self.plan();
            for g in 0..self.m.ownership().gpus() {
                self.take(g);
            }
            while !self.reading.is_empty() {
                self.land(0, true);
            }
            for g in 0..self.m.ownership().gpus() {
                while self.m.next_render(g).is_some_and(|t| {
                    self.rendering.push(t);
                    true
                }) {}
            }
            while !self.rendering.is_empty() {
                self.rendered(0, true);
            }
            let p = self.tick(0.01);
            self.check();
            p
        }
    }

    fn successor(frame: u32, n: u32, dir: Direction) -> u32 {
        match dir {
            Direction::Forward => (frame + 1) % n,
            Direction::Reverse => (frame + n - 1) % n,
        }
    }

    #[test]
    fn frames_alternate_between_gpus() {
        let own = Ownership::alternate(2).unwrap();
        assert_eq!(
            (0..6).map(|f| own.owner(f)).collect::<Vec<_>>(),
            [0, 1, 0, 1, 0, 1]
        );
        let own = Ownership::weighted(vec![2, 1]).unwrap();
        assert_eq!(
            (0..7).map(|f| own.owner(f)).collect::<Vec<_>>(),
            [0, 0, 1, 0, 0, 1, 0]
        );
        assert_eq!(own.window(&[4, 2], 300).unwrap(), 6);
        assert_eq!(own.window(&[4, 4], 300).unwrap(), 6);
        assert!(own.window(&[1, 4], 300).is_err());
        assert!(own.window(&[4], 300).is_err());
        let two = Ownership::alternate(2).unwrap();
        assert!(Ownership::alternate(1).unwrap().window(&[1], 10).is_err());
        assert_eq!(two.window(&[1, 1], 10).unwrap(), 2);
        // 15 frames: 14 and 0 are both GPU 0's, so a window over the wrap needs 2 of its
        // slots.
        assert!(two.window(&[1, 1], 15).is_err());
        assert_eq!(two.window(&[2, 2], 15).unwrap(), 3);
        assert_eq!(two.window(&[3, 3], 15).unwrap(), 5);
        assert!(Ownership::alternate(0).is_err());
        assert!(Ownership::weighted(vec![1, 0]).is_err());
        assert_eq!(
            Ownership::alternate(3)
                .unwrap()
                .window(&[2, 3, 4], 30)
                .unwrap(),
            6
        );
    }

    #[test]
    fn playback_presents_every_frame_in_order_from_its_owner() {
        let mut sim = Sim::new(afr(7, 2, 3));
        sim.m.set_playing(true);
        for _ in 0..30 {
            sim.pump();
        }
        let frames: Vec<u32> = sim.shown.iter().map(|p| p.frame).collect();
        assert!(frames.len() >= 14, "{frames:?}");
        for (i, f) in frames.iter().enumerate() {
            assert_eq!(*f, i as u32 % 7);
        }
        assert!(sim.shown.iter().all(|p| p.gpu == p.frame as usize % 2));
        // Both GPUs worked, and the figures add up.
        let (per, total) = sim.m.figures(sim.now);
        assert!(
            per.iter()
                .all(|g| g.frames_rendered > 0 && g.bytes_landed > 0)
        );
        assert_eq!(
            total.frames_shown,
            per.iter().map(|g| g.frames_shown).sum::<u64>()
        );
        assert_eq!(total.frames_shown, frames.len() as u64);
        assert_eq!(total.bytes_landed, total.frames_landed * MB);
        assert!((total.gbps - per.iter().map(|g| g.gbps).sum::<f64>()).abs() < 1e-12);
    }

    #[test]
    fn a_jump_cancels_every_gpus_queue_and_goes_to_the_targets_owner_first() {
        let mut m = afr(20, 2, 3);
        m.set_playing(true);
        m.plan();
        assert_eq!(m.queued(0), [0, 2, 4]);
        assert_eq!(m.queued(1), [1, 3, 5]);
        m.scrub(13);
        let a = m.plan();
        assert_eq!(a[0].cancel, [0, 2, 4]);
        assert_eq!(a[1].cancel, [1, 3, 5]);
        assert_eq!(
            m.queued(1).first(),
            Some(&13),
            "the target first, on its owner"
        );
        assert_eq!(m.queued(0).first(), Some(&14));
        let t = m.take_requests(1, 1);
        assert_eq!((t[0].gpu, t[0].frame), (1, 13));
        // Reads in flight that a second jump leaves behind are aborted, and dropped when
        // they land; the new target is the next frame shown.
        m.scrub(2);
        let a = m.plan();
        assert_eq!(a[1].abort, [13]);
        assert_eq!(m.landed(t[0], Some(MB), 0.1), Report::Dropped);
        assert_eq!(m.held(1), 0);
        let mut sim = Sim::new(m);
        let first = (0..10).find_map(|_| sim.pump()).unwrap();
        assert_eq!((first.frame, first.gpu), (2, 0));
    }

    #[test]
    fn the_path_switch_applies_to_every_gpu_and_stales_old_reports() {
        let mut sim = Sim::new(afr(10, 2, 2));
        sim.m.set_playing(true);
        sim.pump();
        sim.pump();
        sim.plan();
        sim.take(0);
        sim.take(1);
        let in_flight = sim.reading.clone();
        assert!(!in_flight.is_empty());
        let position = sim.m.scheduler().position();
        let a = sim.m.set_path(1);
        assert_eq!(sim.m.path(), 1);
        for (gpu, acts) in a.iter().enumerate() {
            assert!(!acts.is_empty(), "GPU {gpu} lets its old path go");
            assert_eq!(sim.m.held(gpu), 0);
            assert!(sim.m.queued(gpu).is_empty());
        }
        sim.apply(a);
        sim.finished.clear();
        for t in in_flight {
            assert_eq!(sim.m.landed(t, Some(MB), 1.0), Report::Stale);
        }
        sim.reading.clear();
        assert!(sim.m.set_path(1).iter().all(GpuActions::is_empty));
        // The same position is shown again, from the new path.
        let p = (0..10).find_map(|_| sim.pump()).unwrap();
        assert_eq!(p.frame, position);
        assert!(sim.m.scheduler().is_playing());
    }

    #[test]
    fn a_new_view_renders_finished_frames_again_and_presents_the_one_on_screen_again() {
        let mut m = afr(8, 2, 2);
        m.set_playing(true);
        m.plan();
        let mut reads = m.take_requests(0, 2);
        reads.extend(m.take_requests(1, 2));
        assert_eq!(reads.len(), 4);
        for t in reads {
            assert_eq!(m.landed(t, Some(MB), 0.1), Report::Accepted);
        }
        let r0 = m.next_render(0).unwrap();
        assert_eq!(r0.frame, 0);
        assert_eq!(m.rendered(r0, true, 0.2), Report::Accepted);
        let p = m.tick(0.2).unwrap();
        assert!(p.frame == 0 && !p.again);
        m.set_playing(false);
        // Frame 1 renders on GPU 1 while the view changes: that render is done again.
        let r1 = m.next_render(1).unwrap();
        assert_eq!(r1.frame, 1);
        m.invalidate_images();
        assert_eq!(m.rendered(r1, true, 0.3), Report::Outdated);
        let r1 = m.next_render(1).unwrap();
        assert_eq!(r1.frame, 1, "offered again");
        // Nothing is presented until frame 0 is rendered again; then it is, once, as the
        // same frame again.
        assert_eq!(m.tick(0.3), None);
        let r0 = m.next_render(0).unwrap();
        assert_eq!(r0.frame, 0, "the frame on screen first");
        assert_eq!(m.rendered(r0, true, 0.4), Report::Accepted);
        let p = m.tick(0.4).unwrap();
        assert!(p.again && p.frame == 0);
        assert_eq!(m.tick(0.5), None);
        // Playing on, frame 1 is shown only in an image of the new view.
        m.set_playing(true);
        assert_eq!(m.tick(0.6), None);
        assert_eq!(m.rendered(r1, true, 0.7), Report::Accepted);
        let p = m.tick(0.7).unwrap();
        assert!(p.frame == 1 && !p.again);
        let (_, total) = m.figures(0.7);
        assert_eq!(
            total.frames_shown, 2,
            "a frame shown again is not counted twice"
        );
    }

    #[test]
    fn the_copy_to_the_display_gpu_is_measured() {
        let mut m = afr(4, 2, 2);
        m.copied(1, 8_000_000, 0.004);
        m.copied(1, 8_000_000, 0.004);
        let (per, total) = m.figures(1.0);
        assert_eq!(per[0].copy_gbps, 0.0);
        assert!((per[1].copy_gbps - 2.0).abs() < 1e-9);
        assert!((total.copy_gbps - 2.0).abs() < 1e-9);
        assert!(
            MultiScheduler::new(
                4,
                PlayMode::Loop,
                None,
                Ownership::alternate(2).unwrap(),
                vec![2, 2],
                2,
                0
            )
            .is_err()
        );
    }

    #[test]
    fn paced_playback_waits_for_the_clock_and_for_finished_images() {
        let mut m = MultiScheduler::new(
            6,
            PlayMode::Once,
            Some(10.0),
            Ownership::alternate(3).unwrap(),
            vec![2; 3],
            0,
            0,
        )
        .unwrap();
        m.set_playing(true);
        let mut sim = Sim::new(m);
        for _ in 0..200 {
            sim.pump();
        }
        let frames: Vec<u32> = sim.shown.iter().map(|p| p.frame).collect();
        assert_eq!(frames, [0, 1, 2, 3, 4, 5]);
        // 10 frames/s on a 10 ms tick: about ten ticks apart.
        assert!(sim.now > 0.45, "{}", sim.now);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Plan,
        Take(usize),
        Land(usize, bool),
        Render(usize),
        Rendered(usize, bool),
        Tick,
        Scrub(u32),
        Toggle,
        Play(bool),
        Reverse(bool),
        Invalidate,
    }

    fn op(failures: bool) -> impl Strategy<Value = Op> {
        let ok = if failures {
            prop::bool::weighted(0.8).boxed()
        } else {
            Just(true).boxed()
        };
        prop_oneof![
            4 => Just(Op::Plan),
            4 => (0..4usize).prop_map(Op::Take),
            4 => (0..64usize, ok.clone()).prop_map(|(i, ok)| Op::Land(i, ok)),
            4 => (0..4usize).prop_map(Op::Render),
            4 => (0..64usize, ok).prop_map(|(i, ok)| Op::Rendered(i, ok)),
            6 => Just(Op::Tick),
            1 => (0..40u32).prop_map(Op::Scrub),
            1 => Just(Op::Toggle),
            1 => any::<bool>().prop_map(Op::Play),
            1 => any::<bool>().prop_map(Op::Reverse),
            1 => Just(Op::Invalidate),
        ]
    }

    /// Runs `ops`, checking after each that no GPU holds more than its slots and that only
    /// finished images of the current path are presented, each by its owner. Without
    /// failures, also that presentation is exact: after a jump (or a path switch) its
    /// target first, then each frame's successor in the direction of play, so each frame
    /// once per pass. At the end, every GPU working fairly presents a whole pass in order
    /// (nothing is left stuck). `weights` give the frames out (all 1: plain AFR), and
    /// every GPU has `slots` slots.
    fn run_ops(frames: u32, weights: Vec<u32>, slots: usize, ops: &[Op], failures: bool) {
        let gpus = weights.len();
        let Ok(m) = MultiScheduler::new(
            frames,
            PlayMode::Loop,
            None,
            Ownership::weighted(weights).unwrap(),
            vec![slots; gpus],
            0,
            0,
        ) else {
            // Too few slots for any window: refused (Ownership::window's tests say when).
            return;
        };
        let mut sim = Sim::new(m);
        let mut dir = Direction::Forward;
        // What the next presentation must be: after a jump its target, else the successor
        // of the last one (None: anything, before the first).
        let mut expect: Option<u32> = None;
        let mut after_jump = true;
        for o in ops {
            match o {
                Op::Plan => sim.plan(),
                Op::Take(g) => sim.take(g % gpus),
                Op::Land(i, ok) => sim.land(*i, *ok),
                Op::Render(g) => sim.render(g % gpus),
                Op::Rendered(i, ok) => sim.rendered(*i, *ok),
                Op::Invalidate => {
                    sim.m.invalidate_images();
                    sim.finished.clear();
                }
                Op::Tick => {
                    if let Some(p) = sim.tick(0.01)
                        && !failures
                        && !p.again
                    {
                        if let Some(e) = expect {
                            assert_eq!(p.frame, e, "after a jump: {after_jump}");
                        } else {
                            assert_eq!(p.frame, sim.m.scheduler().position());
                        }
                        after_jump = false;
                        expect = Some(successor(p.frame, frames, dir));
                    }
                }
                Op::Scrub(t) => {
                    let t = t % (frames + 2); // now and then past the end: clamped
                    sim.m.scrub(t);
                    expect = Some(t.min(frames - 1));
                    after_jump = true;
                }
                Op::Toggle => {
                    let to = 1 - sim.m.path();
                    let a = sim.m.set_path(to);
                    sim.apply(a);
                    sim.finished.clear();
                    expect = Some(sim.m.scheduler().position());
                    after_jump = true;
                }
                Op::Play(p) => sim.m.set_playing(*p),
                Op::Reverse(r) => {
                    dir = if *r {
                        Direction::Reverse
                    } else {
                        Direction::Forward
                    };
                    sim.m.set_direction(dir);
                    if !after_jump && let Some(last) = sim.shown.last() {
                        expect = Some(successor(last.frame, frames, dir));
                    }
                }
            }
            sim.check();
        }
        // Liveness: every GPU working fairly, with no more failures, presents a whole pass
        // in order. Reads left over from before are landed first (stale ones are ignored).
        while !sim.reading.is_empty() {
            sim.land(0, true);
        }
        while !sim.rendering.is_empty() {
            sim.rendered(0, true);
        }
        sim.m.set_playing(true);
        let start = sim.shown.len();
        for _ in 0..(frames * 4 + 20) {
            sim.pump();
        }
        let tail: Vec<u32> = sim.shown[start..].iter().map(|p| p.frame).collect();
        // Frames that failed before are passed over once more (they are read again on the
        // visit after), so with failures the second pass is the exact one.
        let passes = if failures { 2 } else { 1 };
        assert!(
            tail.len() >= passes * frames as usize,
            "only {} frames presented: {tail:?}",
            tail.len()
        );
        let last_pass = &tail[tail.len() - frames as usize..];
        for w in last_pass.windows(2) {
            assert_eq!(w[1], successor(w[0], frames, dir), "{tail:?}");
        }
        if !failures {
            for w in tail.windows(2) {
                assert_eq!(w[1], successor(w[0], frames, dir), "{tail:?}");
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn presentation_is_exact_in_order_and_from_finished_images(
            frames in 1u32..24,
            gpus in 1usize..4,
            slots in 1usize..4,
            ops in prop::collection::vec(op(false), 0..300),
        ) {
            run_ops(frames, vec![1; gpus], slots, &ops, false);
        }

        #[test]
        fn failed_reads_and_renders_never_show_a_frame_that_is_not_finished(
            frames in 1u32..24,
            gpus in 1usize..4,
            slots in 1usize..4,
            ops in prop::collection::vec(op(true), 0..300),
        ) {
            run_ops(frames, vec![1; gpus], slots, &ops, true);
        }

        #[test]
        fn weighted_ownership_presents_exactly_too(
            frames in 1u32..24,
            weights in prop::collection::vec(1u32..4, 1..4),
            slots in 1usize..6,
            ops in prop::collection::vec(op(false), 0..300),
        ) {
            run_ops(frames, weights, slots, &ops, false);
        }
    }
}
