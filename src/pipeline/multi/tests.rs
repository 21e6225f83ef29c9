//! Tests of alternate-frame rendering against simulated GPUs: unit cases and property
//! tests over random sequences of reads, renders, failures, jumps, toggles and new views.

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

#[test]
fn a_forgotten_image_is_read_and_rendered_again_before_it_is_presented() {
    let mut m = afr(8, 2, 3);
    m.set_playing(false);
    m.plan();
    // Frame 0 (the first shown) is finished on GPU 0, then its player lets it go.
    let t = m.take_requests(0, 8);
    assert_eq!(t[0].frame, 0);
    assert_eq!(m.landed(t[0], Some(MB), 0.0), Report::Accepted);
    let r = m.next_render(0).unwrap();
    assert_eq!(m.rendered(r, true, 0.0), Report::Accepted);
    assert!(m.forget(0, 0));
    assert!(!m.forget(0, 0), "held no more");
    assert!(!m.forget(1, 0), "GPU 1 never held it");
    assert_eq!(m.tick(0.1), None, "not presented without its image");
    m.plan();
    let again = m.take_requests(0, 8);
    assert!(
        again.iter().any(|t| t.frame == 0),
        "requested again: {again:?}"
    );
    let t0 = *again.iter().find(|t| t.frame == 0).unwrap();
    assert_eq!(m.landed(t0, Some(MB), 0.2), Report::Accepted);
    let r = m.next_render(0).unwrap();
    assert_eq!(r.frame, 0);
    assert_eq!(m.rendered(r, true, 0.2), Report::Accepted);
    assert_eq!(m.tick(0.3).map(|p| p.frame), Some(0));
}
