//! Which frames to read next, and which frame to show now.
//!
//! The scheduler is pure logic over frame numbers and a clock the caller supplies, so it is
//! tested against a simulated clock. It knows nothing of slots, engines or the renderer: the
//! pipeline asks it for a [`Plan`] (frames to request, queued requests to cancel), reports
//! progress with [`Scheduler::started`], [`Scheduler::loaded`] and [`Scheduler::evicted`],
//! and asks [`Scheduler::tick`] which frame to show.
//!
//! Back-pressure works both ways: the prefetch window caps how far reading runs ahead of the
//! playhead (storage faster than rendering: reads wait for slots), and the playhead never
//! moves onto a frame that has not arrived (storage slower than the clock: playback stalls
//! rather than showing a half-written or stale frame, and the stall is counted).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// What happens at the ends of the timeline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PlayMode {
    /// After the last frame comes the first.
    #[default]
    Loop,
    /// Playback reverses direction at either end.
    PingPong,
    /// Playback stops at the end.
    Once,
}

/// Direction of playback.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Direction {
    /// Increasing frame numbers.
    #[default]
    Forward,
    /// Decreasing frame numbers.
    Reverse,
}

/// The frame after `frame` of a timeline of `frame_count` frames when moving in
/// `direction`, and the direction after it, following `mode`; `None` at the end of a `Once`
/// timeline. The order every player presents its frames in (one GPU's or several GPUs').
pub fn successor(
    frame_count: u32,
    mode: PlayMode,
    frame: u32,
    direction: Direction,
) -> Option<(u32, Direction)> {
    let last = frame_count.max(1) - 1;
    if last == 0 {
        return match mode {
            PlayMode::Once => None,
            _ => Some((0, direction)),
        };
    }
    match (direction, mode) {
        (Direction::Forward, _) if frame < last => Some((frame + 1, direction)),
        (Direction::Reverse, _) if frame > 0 => Some((frame - 1, direction)),
        (_, PlayMode::Once) => None,
        (Direction::Forward, PlayMode::Loop) => Some((0, direction)),
        (Direction::Reverse, PlayMode::Loop) => Some((last, direction)),
        (Direction::Forward, PlayMode::PingPong) => Some((last - 1, Direction::Reverse)),
        (Direction::Reverse, PlayMode::PingPong) => Some((1, Direction::Forward)),
    }
}

/// Whether `frames` (presented one after another) follow play order on a timeline of
/// `frame_count` frames in `mode` ([`successor`]), starting in either direction: none left
/// out, none twice, none out of order.
pub fn in_play_order(frames: &[u32], frame_count: u32, mode: PlayMode) -> bool {
    [Direction::Forward, Direction::Reverse]
        .into_iter()
        .any(|mut direction| {
            frames
                .windows(2)
                .all(|w| match successor(frame_count, mode, w[0], direction) {
                    Some((next, d)) if next == w[1] => {
                        direction = d;
                        true
                    }
                    _ => false,
                })
        })
}

impl PlayMode {
    /// The next mode in the window's cycle (the `l` key): loop, ping-pong, once.
    pub fn cycled(self) -> PlayMode {
        match self {
            PlayMode::Loop => PlayMode::PingPong,
            PlayMode::PingPong => PlayMode::Once,
            PlayMode::Once => PlayMode::Loop,
        }
    }
}

impl Direction {
    /// The other direction.
    pub fn reversed(self) -> Direction {
        match self {
            Direction::Forward => Direction::Reverse,
            Direction::Reverse => Direction::Forward,
        }
    }
}

/// Where a frame is in its journey to the screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameState {
    /// Requested, no read issued yet: can still be cancelled.
    Queued,
    /// Reads in flight: will arrive, or, once aborted ([`Plan::abort`]), complete early
    /// without the frame (the pipeline then reports [`Scheduler::evicted`]).
    Loading,
    /// Whole frame resident in a slot, ready to show.
    Ready,
    /// Its read failed (an error, a time-out, a damaged header): playback passes over it
    /// without showing it, and it is read again on a later visit (once the playhead has
    /// moved past it), so a lane that comes back plays again.
    Damaged,
}

/// What the pipeline should do next.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Queued frames no longer wanted (a scrub moved the playhead away): drop their requests.
    pub cancel: Vec<u32>,
    /// Loading frames no longer wanted: abandon their reads not yet issued, so the frames
    /// now wanted do not wait behind them. Each is listed once; it keeps its slot until the
    /// read reports back.
    pub abort: Vec<u32>,
    /// Frames to request, most urgent first.
    pub request: Vec<u32>,
}

/// Playback settings.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PlaybackConfig {
    /// Frames in the dataset (at least 1).
    pub frame_count: u32,
    /// End-of-timeline behaviour.
    pub mode: PlayMode,
    /// Frames per second of playback; `None` shows every frame as soon as it arrives.
    pub speed_fps: Option<f64>,
    /// How many frames (including the one shown) may be requested, in flight or resident.
    /// Normally the frame-ring slot count.
    pub window: usize,
}

/// Counters the overlay and benchmarks report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SchedulerStats {
    /// Frames shown.
    pub shown: u64,
    /// Ticks where the clock wanted a frame that had not arrived.
    pub stalls: u64,
    /// Requests cancelled before their reads started.
    pub cancelled: u64,
    /// Loading frames whose reads were abandoned.
    pub aborted: u64,
    /// Damaged frames the playhead passed over.
    pub damaged_skipped: u64,
}

/// Decides what to read and what to show; see the module documentation.
#[derive(Clone, Debug)]
pub struct Scheduler {
    config: PlaybackConfig,
    playing: bool,
    direction: Direction,
    /// The frame on screen, or about to be (after a scrub, the target).
    position: u32,
    /// Whether `position` has been shown since it was set.
    position_shown: bool,
    /// Clock time of the last tick, and frames owed by the clock but not yet taken.
    last_tick: Option<f64>,
    owed: f64,
    frames: BTreeMap<u32, FrameState>,
    /// Loading frames already listed in a [`Plan::abort`].
    aborting: BTreeSet<u32>,
    stats: SchedulerStats,
}

impl Scheduler {
    /// A scheduler paused at frame 0, moving forward. `frame_count` and `window` are clamped
    /// to at least 1.
    pub fn new(mut config: PlaybackConfig) -> Scheduler {
        config.frame_count = config.frame_count.max(1);
        config.window = config.window.max(1);
        Scheduler {
            config,
            playing: false,
            direction: Direction::Forward,
            position: 0,
            position_shown: false,
            last_tick: None,
            owed: 0.0,
            frames: BTreeMap::new(),
            aborting: BTreeSet::new(),
            stats: SchedulerStats::default(),
        }
    }

    /// The playback settings.
    pub fn config(&self) -> PlaybackConfig {
        self.config
    }
    /// The frame on screen (or about to be).
    pub fn position(&self) -> u32 {
        self.position
    }
    /// Whether the clock advances the playhead.
    pub fn is_playing(&self) -> bool {
        self.playing
    }
    /// Current direction.
    pub fn direction(&self) -> Direction {
        self.direction
    }
    /// Counters since creation.
    pub fn stats(&self) -> SchedulerStats {
        self.stats
    }
    /// The state of `frame`, if the scheduler tracks it.
    pub fn state(&self, frame: u32) -> Option<FrameState> {
        self.frames.get(&frame).copied()
    }

    /// Starts or stops the clock.
    pub fn set_playing(&mut self, playing: bool) {
        self.playing = playing;
        self.last_tick = None;
        self.owed = 0.0;
    }
    /// Sets the direction of playback.
    pub fn set_direction(&mut self, direction: Direction) {
        self.direction = direction;
    }
    /// Changes the end-of-timeline behaviour.
    pub fn set_mode(&mut self, mode: PlayMode) {
        self.config.mode = mode;
    }
    /// Changes the speed (`None`: as fast as frames arrive). Non-positive or non-finite
    /// speeds are ignored.
    pub fn set_speed(&mut self, speed_fps: Option<f64>) {
        if speed_fps.is_none_or(|s| s.is_finite() && s > 0.0) {
            self.config.speed_fps = speed_fps;
            self.owed = 0.0;
        }
    }

    /// Jumps to `target` (clamped to the timeline). The target becomes the most urgent read;
    /// queued reads outside the new window are cancelled by the next [`Scheduler::plan`].
    pub fn scrub(&mut self, target: u32) {
        self.position = target.min(self.config.frame_count - 1);
        self.position_shown = false;
        self.owed = 0.0;
    }

    /// Steps one frame in `direction` (as the step keys do), pausing playback.
    pub fn step(&mut self, direction: Direction) {
        self.set_playing(false);
        if let Some((next, _)) = self.successor(self.position, direction) {
            self.scrub(next);
        }
    }

    /// The frame after `frame` when moving in `direction`, and the direction after it,
    /// following the play mode; `None` at the end of a `Once` timeline.
    fn successor(&self, frame: u32, direction: Direction) -> Option<(u32, Direction)> {
        successor(self.config.frame_count, self.config.mode, frame, direction)
    }

    /// How many steps of playback from the playhead (in the current direction, following
    /// the play mode) reach `frame` first: 0 for the playhead itself; `None` where playback
    /// never reaches it (behind the playhead on a `Once` timeline, or off the timeline).
    /// Those that wait on the coordinator of several GPUs rank their frames by it.
    pub fn steps_to(&self, frame: u32) -> Option<u32> {
        let n = self.config.frame_count;
        let (pos, last) = (self.position, n - 1);
        if frame > last {
            return None;
        }
        let forward = self.direction == Direction::Forward;
        match self.config.mode {
            PlayMode::Loop if forward => Some((frame + n - pos) % n),
            PlayMode::Loop => Some((pos + n - frame) % n),
            PlayMode::Once if forward => frame.checked_sub(pos),
            PlayMode::Once => pos.checked_sub(frame),
            // Up to the end, then back from the frame before it.
            PlayMode::PingPong if forward && frame >= pos => Some(frame - pos),
            PlayMode::PingPong if forward => Some((last - pos) + (last - frame)),
            PlayMode::PingPong if frame <= pos => Some(pos - frame),
            PlayMode::PingPong => Some(pos + frame),
        }
    }

    /// The frames the window should hold, most urgent first: the position, then, while
    /// playing, its successors in play order (without repeats). Paused, only the position:
    /// a paused timeline is scrubbed or stepped, and a read-ahead still in flight would make
    /// the next jump wait behind it (reads already issued cannot be recalled).
    fn wanted(&self) -> Vec<u32> {
        let window = if self.playing { self.config.window } else { 1 };
        let mut wanted = Vec::with_capacity(window);
        let (mut frame, mut dir) = (self.position, self.direction);
        wanted.push(frame);
        while wanted.len() < window {
            match self.successor(frame, dir) {
                Some((next, next_dir)) if !wanted.contains(&next) => {
                    wanted.push(next);
                    (frame, dir) = (next, next_dir);
                }
                _ => break,
            }
        }
        wanted
    }

    /// What to request and cancel now. Requests are limited so that queued, loading and
    /// resident frames together never exceed the window; resident frames outside the window
    /// are left for the pipeline to evict (it reports that with [`Scheduler::evicted`]).
    pub fn plan(&mut self) -> Plan {
        let wanted = self.wanted();
        let mut plan = Plan::default();
        let stale: Vec<u32> = self
            .frames
            .iter()
            .filter(|(f, s)| **s == FrameState::Queued && !wanted.contains(f))
            .map(|(f, _)| *f)
            .collect();
        for f in stale {
            self.frames.remove(&f);
            self.stats.cancelled += 1;
            plan.cancel.push(f);
        }
        let abandoned: Vec<u32> = self
            .frames
            .iter()
            .filter(|(f, s)| {
                **s == FrameState::Loading && !wanted.contains(f) && !self.aborting.contains(f)
            })
            .map(|(f, _)| *f)
            .collect();
        for f in abandoned {
            self.aborting.insert(f);
            self.stats.aborted += 1;
            plan.abort.push(f);
        }
        // A damaged frame out of the window is forgotten: the next visit reads it again.
        self.frames
            .retain(|f, s| *s != FrameState::Damaged || wanted.contains(f));
        // Frames outside the window that are loading or resident still hold slots.
        let held_elsewhere = self.frames.keys().filter(|f| !wanted.contains(f)).count();
        let mut budget = self.config.window.saturating_sub(held_elsewhere);
        for f in wanted {
            if self.frames.get(&f) == Some(&FrameState::Damaged) {
                // Holds no slot: the frames after it get the room.
                continue;
            }
            if budget == 0 {
                break;
            }
            budget -= 1;
            if let Entry::Vacant(e) = self.frames.entry(f) {
                e.insert(FrameState::Queued);
                plan.request.push(f);
            }
        }
        plan
    }

    /// Frames resident but outside the wanted window: the pipeline may evict these (oldest
    /// distance first) to make room.
    pub fn evictable(&self) -> Vec<u32> {
        let wanted = self.wanted();
        self.frames
            .iter()
            .filter(|(f, s)| {
                **s == FrameState::Ready && !wanted.contains(f) && **f != self.position
            })
            .map(|(f, _)| *f)
            .collect()
    }

    /// The pipeline issued the reads of `frame`: from now on it can only be aborted.
    pub fn started(&mut self, frame: u32) {
        if let Some(s) = self.frames.get_mut(&frame) {
            *s = FrameState::Loading;
        }
    }
    /// All of `frame` is resident.
    pub fn loaded(&mut self, frame: u32) {
        self.aborting.remove(&frame);
        self.frames.insert(frame, FrameState::Ready);
    }
    /// `frame` could not be read (or is damaged): playback passes over it until the playhead
    /// has left it, then reads it again.
    pub fn failed(&mut self, frame: u32) {
        self.aborting.remove(&frame);
        // An aborted read that failed is no longer wanted: forget it instead.
        if self.frames.contains_key(&frame) {
            self.frames.insert(frame, FrameState::Damaged);
        }
    }

    /// `frame`'s slot was reused, or its read failed or was aborted: it is not resident.
    pub fn evicted(&mut self, frame: u32) {
        self.aborting.remove(&frame);
        self.frames.remove(&frame);
    }

    /// Advances the clock to `now` (seconds, monotonic) and returns the frame to show, if a
    /// new one should be shown. The playhead only moves onto frames that are `Ready`.
    pub fn tick(&mut self, now: f64) -> Option<u32> {
        // A scrub target (or the first frame) is shown as soon as it arrives.
        if !self.position_shown {
            match self.state(self.position) {
                Some(FrameState::Ready) => {
                    self.position_shown = true;
                    self.stats.shown += 1;
                    self.last_tick = Some(now);
                    return Some(self.position);
                }
                Some(FrameState::Damaged) => {
                    // Nothing to show here; playing moves on from it.
                    self.position_shown = true;
                    self.stats.damaged_skipped += 1;
                    self.last_tick = Some(now);
                }
                _ => {}
            }
            return None;
        }
        if !self.playing {
            return None;
        }
        let due = match self.config.speed_fps {
            None => true,
            Some(fps) => {
                let dt = self.last_tick.map_or(0.0, |t| (now - t).max(0.0));
                self.owed = (self.owed + dt * fps).min(1.0);
                self.owed >= 1.0
            }
        };
        self.last_tick = Some(now);
        if !due {
            return None;
        }
        let Some((next, dir)) = self.successor(self.position, self.direction) else {
            self.playing = false; // end of a `Once` timeline
            return None;
        };
        if self.state(next) == Some(FrameState::Damaged) {
            // Pass over it: the playhead moves on, the screen keeps the last good frame, and
            // the frame is read again on its next visit.
            self.owed = (self.owed - 1.0).max(0.0);
            self.leave_position();
            self.position = next;
            self.direction = dir;
            self.stats.damaged_skipped += 1;
            return None;
        }
        if self.state(next) != Some(FrameState::Ready) {
            self.stats.stalls += 1;
            return None;
        }
        self.owed = (self.owed - 1.0).max(0.0);
        self.leave_position();
        self.position = next;
        self.direction = dir;
        self.stats.shown += 1;
        Some(next)
    }

    /// The playhead moves on: a damaged frame it leaves has had its visit and is read again
    /// for the next one (in a short loop it may still be in the window).
    fn leave_position(&mut self) {
        if self.state(self.position) == Some(FrameState::Damaged) {
            self.frames.remove(&self.position);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(frames: u32, mode: PlayMode, fps: Option<f64>, window: usize) -> PlaybackConfig {
        PlaybackConfig {
            frame_count: frames,
            mode,
            speed_fps: fps,
            window,
        }
    }

    /// [`in_play_order`] takes one GPU's order in each mode and refuses a frame left out,
    /// repeated or out of order.
    #[test]
    fn play_order_is_checked_in_every_mode() {
        let pp = [5, 6, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2];
        assert!(in_play_order(&pp, 8, PlayMode::PingPong));
        assert!(!in_play_order(&pp, 8, PlayMode::Loop));
        assert!(!in_play_order(&[6, 7, 7, 6], 8, PlayMode::PingPong));
        assert!(in_play_order(&[2, 1, 0, 7, 6], 8, PlayMode::Loop));
        assert!(!in_play_order(&[2, 1, 0, 7, 6], 8, PlayMode::Once));
        assert!(in_play_order(&[6, 7, 0, 1], 8, PlayMode::Loop));
        assert!(!in_play_order(&[6, 7, 1], 8, PlayMode::Loop));
        assert!(in_play_order(&[3, 2, 1, 0], 8, PlayMode::Once));
    }

    /// [`Scheduler::steps_to`] counts the steps [`Scheduler::successor`] takes, in every
    /// mode and direction, from every position.
    #[test]
    fn steps_to_counts_the_successors() {
        for mode in [PlayMode::Loop, PlayMode::Once, PlayMode::PingPong] {
            for n in [1u32, 2, 5] {
                for dir in [Direction::Forward, Direction::Reverse] {
                    for pos in 0..n {
                        let mut s = Scheduler::new(config(n, mode, None, 2));
                        s.scrub(pos);
                        s.set_direction(dir);
                        let mut first = BTreeMap::new();
                        let (mut f, mut d, mut steps) = (pos, dir, 0u32);
                        loop {
                            first.entry(f).or_insert(steps);
                            match s.successor(f, d) {
                                Some((next, next_dir)) if steps < 4 * n => {
                                    (f, d) = (next, next_dir);
                                    steps += 1;
                                }
                                _ => break,
                            }
                        }
                        for frame in 0..=n {
                            assert_eq!(
                                s.steps_to(frame),
                                first.get(&frame).copied(),
                                "{mode:?} {dir:?} n {n} from {pos} to {frame}"
                            );
                        }
                    }
                }
            }
        }
    }

    /// A simulated pipeline: each request is started at once and lands `latency` seconds
    /// later; slots are freed by evicting what the scheduler no longer wants.
    struct Sim {
        sched: Scheduler,
        in_flight: Vec<(u32, f64)>,
        latency: f64,
        requested: Vec<u32>,
        shown: Vec<u32>,
    }

    impl Sim {
        fn new(sched: Scheduler, latency: f64) -> Sim {
            Sim {
                sched,
                in_flight: Vec::new(),
                latency,
                requested: Vec::new(),
                shown: Vec::new(),
            }
        }
        fn step(&mut self, now: f64) {
            for f in self.sched.evictable() {
                self.sched.evicted(f);
            }
            let plan = self.sched.plan();
            for f in plan.request {
                self.sched.started(f);
                self.requested.push(f);
                self.in_flight.push((f, now + self.latency));
            }
            let (done, pending): (Vec<_>, Vec<_>) =
                self.in_flight.iter().partition(|(_, t)| *t <= now);
            self.in_flight = pending;
            for (f, _) in done {
                self.sched.loaded(f);
            }
            if let Some(f) = self.sched.tick(now) {
                self.shown.push(f);
            }
        }
        /// Runs `steps` ticks `dt` seconds apart, starting at time 0.
        fn run(&mut self, steps: u32, dt: f64) {
            for i in 0..steps {
                self.step(f64::from(i) * dt);
            }
        }
    }

    /// A frame whose read fails is passed over (not waited for), the frames after it play,
    /// and it is read again on the next pass, where it plays once its lane is back.
    #[test]
    fn damaged_frames_are_skipped_and_read_again_later() {
        let mut s = Scheduler::new(config(6, PlayMode::Loop, None, 3));
        s.set_playing(true);
        let mut shown = Vec::new();
        let mut requests = Vec::new();
        let mut broken = true;
        for i in 0..40 {
            let now = f64::from(i) * 0.1;
            for f in s.evictable() {
                s.evicted(f);
            }
            for f in s.plan().request {
                s.started(f);
                requests.push(f);
                if f == 2 && broken {
                    s.failed(f);
                } else {
                    s.loaded(f);
                }
            }
            if let Some(f) = s.tick(now) {
                shown.push(f);
            }
            if shown.len() >= 8 {
                broken = false; // the lane comes back
            }
        }
        // First pass: 0, 1, then 3 (2 skipped), ...
        assert_eq!(&shown[..5], &[0, 1, 3, 4, 5], "{shown:?}");
        assert!(s.stats().damaged_skipped >= 1);
        assert_eq!(s.stats().stalls, 0, "a damaged frame is not waited for");
        // Frame 2 was asked for again and plays once it can be read.
        assert!(
            requests.iter().filter(|&&f| f == 2).count() >= 2,
            "{requests:?}"
        );
        let first_two = shown
            .iter()
            .position(|&f| f == 2)
            .expect("frame 2 plays again");
        assert!(first_two > 4);
    }

    /// A damaged frame holds no slot: with the shown frame still held (not evicted), the
    /// frame after the damaged one is still asked for, so playback does not wait forever.
    #[test]
    fn damaged_frames_leave_their_window_room_to_the_next() {
        let mut s = Scheduler::new(config(6, PlayMode::Loop, None, 2));
        s.set_playing(true);
        assert_eq!(s.plan().request, vec![0, 1]);
        s.started(0);
        s.started(1);
        s.loaded(0);
        s.failed(1);
        assert_eq!(s.tick(0.0), Some(0));
        // Frame 0 stays on screen (its slot held); the playhead passes frame 1.
        assert_eq!(s.tick(0.1), None);
        assert_eq!(s.position(), 1);
        assert_eq!(s.plan().request, vec![2]);
    }

    /// Paused on a damaged frame, the scheduler does not ask for it again and again.
    #[test]
    fn paused_on_a_damaged_frame_does_not_reread_it() {
        let mut s = Scheduler::new(config(6, PlayMode::Loop, None, 3));
        s.scrub(4);
        let plan = s.plan();
        assert_eq!(plan.request, vec![4]);
        s.started(4);
        s.failed(4);
        for i in 0..5 {
            assert_eq!(s.tick(f64::from(i)), None);
            assert!(s.plan().request.is_empty());
        }
        assert_eq!(s.state(4), Some(FrameState::Damaged));
        // Stepping away and back reads it again.
        s.scrub(3);
        let _ = s.plan();
        s.scrub(4);
        assert!(s.plan().request.contains(&4));
    }

    #[test]
    fn loop_plays_every_frame_in_order_and_wraps() {
        let mut s = Scheduler::new(config(5, PlayMode::Loop, None, 3));
        s.set_playing(true);
        let mut sim = Sim::new(s, 0.0);
        sim.run(12, 0.1);
        assert_eq!(sim.shown, vec![0, 1, 2, 3, 4, 0, 1, 2, 3, 4, 0, 1]);
    }

    #[test]
    fn ping_pong_reverses_at_both_ends() {
        let mut s = Scheduler::new(config(4, PlayMode::PingPong, None, 2));
        s.set_playing(true);
        let mut sim = Sim::new(s, 0.0);
        sim.run(10, 0.1);
        assert_eq!(sim.shown, vec![0, 1, 2, 3, 2, 1, 0, 1, 2, 3]);
    }

    #[test]
    fn once_stops_at_the_end_and_reverse_plays_backwards() {
        let mut s = Scheduler::new(config(4, PlayMode::Once, None, 2));
        s.scrub(3);
        s.set_direction(Direction::Reverse);
        s.set_playing(true);
        let mut sim = Sim::new(s, 0.0);
        sim.run(10, 0.1);
        assert_eq!(sim.shown, vec![3, 2, 1, 0]);
        assert!(!sim.sched.is_playing());
    }

    #[test]
    fn clock_paces_playback_and_stalls_when_storage_is_slow() {
        // 10 frames/s wanted, frames take 0.25 s to arrive with a window of 3 (the frame on
        // screen plus two reads in flight): storage delivers at most 8/s, so the playhead
        // must stall sometimes and never skip a frame.
        let mut s = Scheduler::new(config(100, PlayMode::Once, Some(10.0), 3));
        s.set_playing(true);
        let mut sim = Sim::new(s, 0.25);
        sim.run(500, 0.01);
        let shown = &sim.shown;
        assert!(
            shown.windows(2).all(|w| w[1] == w[0] + 1),
            "no frame skipped"
        );
        assert!(sim.sched.stats().stalls > 0);
        assert!(shown.len() < 45, "slower than the clock: {}", shown.len());
        assert!(
            shown.len() > 25,
            "but as fast as storage allows: {}",
            shown.len()
        );
    }

    #[test]
    fn fast_storage_is_held_back_by_the_window() {
        // Instant storage, slow clock: never more than `window` frames requested ahead.
        let mut s = Scheduler::new(config(1000, PlayMode::Once, Some(2.0), 4));
        s.set_playing(true);
        let mut sim = Sim::new(s, 0.0);
        sim.run(300, 0.01);
        let last_shown = *sim.shown.last().unwrap();
        let max_requested = *sim.requested.iter().max().unwrap();
        assert!(
            max_requested <= last_shown + 3,
            "{max_requested} vs {last_shown}"
        );
        assert!((5..=8).contains(&sim.shown.len()), "{:?}", sim.shown);
    }

    #[test]
    fn scrub_cancels_queued_reads_and_puts_the_target_first() {
        let mut s = Scheduler::new(config(100, PlayMode::Loop, None, 4));
        s.set_playing(true);
        let first = s.plan();
        assert_eq!(first.request, vec![0, 1, 2, 3]);
        s.started(0);
        s.started(1); // 2 and 3 are still queued
        s.scrub(50);
        let plan = s.plan();
        assert_eq!(plan.cancel, vec![2, 3]);
        // Frames 0 and 1 are loading and hold two of the four slots.
        assert_eq!(plan.request, vec![50, 51]);
        assert_eq!(s.stats().cancelled, 2);
        // Once they land and are evicted, the window fills in order.
        s.loaded(0);
        s.loaded(1);
        for f in s.evictable() {
            s.evicted(f);
        }
        assert_eq!(s.plan().request, vec![52, 53]);
        // The target is shown as soon as it arrives.
        assert_eq!(s.tick(0.0), None);
        s.loaded(51);
        assert_eq!(
            s.tick(0.0),
            None,
            "never shows a frame other than the target"
        );
        s.loaded(50);
        assert_eq!(s.tick(0.0), Some(50));
    }

    #[test]
    fn scrub_aborts_reads_in_flight_once_and_keeps_their_slots_until_they_report() {
        let mut s = Scheduler::new(config(100, PlayMode::Loop, None, 4));
        s.set_playing(true);
        assert_eq!(s.plan().request, vec![0, 1, 2, 3]);
        for f in 0..4 {
            s.started(f);
        }
        s.loaded(0);
        assert_eq!(s.tick(0.0), Some(0));
        s.scrub(60);
        let plan = s.plan();
        // 0 is resident (evictable, not aborted); 1..3 are loading and not wanted.
        assert_eq!(plan.abort, vec![1, 2, 3]);
        assert!(plan.cancel.is_empty());
        // The aborted reads still hold three slots; 0 is resident: nothing fits yet.
        assert!(plan.request.is_empty(), "{plan:?}");
        assert!(s.plan().abort.is_empty(), "each frame is aborted once");
        assert_eq!(s.stats().aborted, 3);
        s.evicted(0);
        assert_eq!(s.plan().request, vec![60]);
        // Aborted reads report back (failed, or whole if they were already issued).
        s.evicted(1);
        s.loaded(2);
        s.evicted(3);
        assert_eq!(s.evictable(), vec![2]);
        s.evicted(2);
        assert_eq!(s.plan().request, vec![61, 62, 63]);
        // Pausing aborts the read-ahead, not the frame asked for.
        for f in 60..64 {
            s.started(f);
        }
        s.set_playing(false);
        assert_eq!(s.plan().abort, vec![61, 62, 63]);
    }

    #[test]
    fn paused_reads_only_the_frame_asked_for() {
        // Paused, nothing is read ahead: the next jump finds no read in flight to wait
        // behind, and every slot is free for it.
        let mut s = Scheduler::new(config(100, PlayMode::Loop, None, 4));
        assert_eq!(s.plan().request, vec![0]);
        s.started(0);
        s.loaded(0);
        assert_eq!(s.tick(0.0), Some(0));
        assert!(s.plan().request.is_empty(), "no read-ahead while paused");
        s.scrub(70);
        assert_eq!(s.plan().request, vec![70]);
        s.started(70);
        s.loaded(70);
        assert_eq!(s.tick(0.0), Some(70));
        // Playing again reads ahead through the whole window.
        s.set_playing(true);
        assert_eq!(s.plan().request, vec![71, 72]);
    }

    #[test]
    fn step_moves_one_frame_and_pauses() {
        let mut s = Scheduler::new(config(3, PlayMode::Loop, None, 2));
        s.set_playing(true);
        s.step(Direction::Reverse);
        assert_eq!(s.position(), 2);
        assert!(!s.is_playing());
        s.step(Direction::Forward);
        assert_eq!(s.position(), 0);
    }

    #[test]
    fn single_frame_timelines_do_not_spin() {
        let mut s = Scheduler::new(config(1, PlayMode::Loop, None, 4));
        assert_eq!(s.plan().request, vec![0]);
        s.loaded(0);
        s.set_playing(true);
        assert_eq!(s.tick(0.0), Some(0));
        let mut z = Scheduler::new(config(0, PlayMode::Once, Some(-1.0), 0));
        assert_eq!(z.plan().request, vec![0]);
    }
}
