//! `play --gpus`: several GPUs of one host play one timeline, alternate frames each. On a
//! machine without CUDA one adapter is named twice (`--gpus 0,0`: two wgpu devices, two
//! players with their engines and rings), which exercises the whole driver: frames
//! presented in order and each once, both GPUs rendering half, exact jumps, the same
//! pictures as one GPU, the path toggle reaching every GPU, and the JSON.
//!
//! Without a GPU adapter the tests print why and pass, unless `SUPERCELL_REQUIRE_GPU` is
//! set (CI sets it). The `#[ignore]`d test needs CUDA (`scripts/gpu-tests.sh` runs it).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::{bin, dataset, gpu, out_dir, small_config};

use std::rc::Rc;
use std::sync::atomic::{AtomicUsize, Ordering};

use supercell::app::gpus::{self, GpuName, LocalGpu, MultiPlayer, open_gpus};
use supercell::app::ranks::{RankWorkers, serve};
use supercell::app::{PathSel, Player, PlayerConfig, PlayerGpu};
use supercell::cluster::Ranks;
use supercell::pipeline::{Direction, PlayMode};
use supercell::render::{Colormap, View};
use supercell::scene::Scene;

fn run_until(mp: &mut MultiPlayer, what: &str, mut done: impl FnMut(&MultiPlayer) -> bool) {
    let end = Instant::now() + Duration::from_secs(60);
    while !done(mp) {
        assert!(
            Instant::now() < end,
            "timed out waiting for {what} (presented {:?}, last error {:?}; {})",
            mp.presented(),
            mp.last_error(),
            mp.state()
        );
        if mp.tick().expect("tick").shown.is_none() {
            mp.wait(Duration::from_millis(2));
        }
    }
}

/// The image of each frame of `frames` as one GPU's player renders it.
fn one_gpu_images(frames: &[u32]) -> Vec<Vec<u8>> {
    one_gpu_images_with(frames, |_| {})
}

/// [`one_gpu_images`] of a player `edit` changed first (its view).
fn one_gpu_images_with(frames: &[u32], edit: impl FnOnce(&mut Player)) -> Vec<Vec<u8>> {
    let g = gpu().expect("adapter");
    let cfg = PlayerConfig {
        playing: false,
        ..small_config()
    };
    let mut p = Player::new(&g.device, &g.queue, &dataset(), &cfg).expect("player");
    edit(&mut p);
    frames
        .iter()
        .map(|&f| {
            p.scrub(f);
            let end = Instant::now() + Duration::from_secs(30);
            while p.scrub_pending() || p.shown_frame() != Some(f) {
                assert!(Instant::now() < end, "one GPU: frame {f} not shown");
                if p.tick().expect("tick").shown.is_none() {
                    p.wait(Duration::from_millis(2));
                }
            }
            p.read_image().expect("image").rgba8
        })
        .collect()
}

#[test]
fn two_players_on_one_adapter_present_in_order_jump_exactly_and_match_one_gpu() {
    if gpu().is_none() {
        return;
    }
    let opened = open_gpus(&[0, 0]).expect("two devices on adapter 0");
    assert_eq!(opened.len(), 2);
    for g in &opened {
        assert!(
            g.matched.contains("adapter 0") || g.matched.contains("UUID"),
            "{}",
            g.matched
        );
    }
    let cfg = PlayerConfig {
        // A second host path stands in for the direct path: the toggle runs without CUDA.
        loopback_direct: true,
        ..small_config()
    };
    let mut mp = MultiPlayer::open(opened, &dataset(), &cfg).expect("players");
    plays_one_timeline(&mut mp);
    attributes_reach_every_gpu(&mut mp);
    mp.drain(Duration::from_secs(5));
}

/// Frames rendered on GPU `k` on `sel`, as its player (in this process or another rank's)
/// reports them now.
fn rendered(mp: &mut MultiPlayer, k: usize, sel: PathSel) -> u64 {
    mp.workers_mut().settle().expect("reports");
    mp.workers().figures(k, sel).0.frames_rendered
}

/// Two GPUs on one timeline (in this process or across ranks): in order, each frame once
/// per pass from its owner, one GPU's pictures, exact jumps paused and playing, the toggle
/// reaching both GPUs.
fn plays_one_timeline(mp: &mut MultiPlayer) {
    assert_eq!(mp.gpu_count(), 2);
    assert_eq!(mp.frame_count(), 8);
    mp.set_capture(true);

    // Forward: every frame once per pass, in order, each from its owner.
    run_until(mp, "16 frames", |m| m.presented().len() >= 16);
    let log = mp.presented()[..16].to_vec();
    let frames: Vec<u32> = log.iter().map(|&(f, _)| f).collect();
    assert_eq!(frames, (0..16).map(|i| i % 8).collect::<Vec<u32>>());
    assert!(log.iter().all(|&(f, k)| k == f as usize % 2), "{log:?}");
    // Both GPUs rendered about half.
    for k in 0..2 {
        let r = rendered(mp, k, PathSel::Host);
        // The last render is counted when its player next looks.
        assert!((7..=12).contains(&r), "GPU {k} rendered {r}");
    }
    // GPU 1's images were copied to the display GPU, and timed.
    let (per, total) = mp.scheduler().figures(1e9);
    assert_eq!(per[0].copy_bytes, 0, "GPU 0 is the display");
    let image = 64 * 48 * 4;
    assert!(per[1].copy_bytes >= 8 * image && per[1].copy_bytes % image == 0);
    assert!(total.copy_seconds > 0.0);

    // The pictures are one GPU's pictures of the same frames.
    let all: Vec<u32> = (0..8).collect();
    let reference = one_gpu_images(&all);
    for (f, k, img) in mp.captured().iter().take(8) {
        assert!(
            *img == reference[*f as usize],
            "frame {f} from GPU {k} differs from one GPU's picture"
        );
    }

    // Jumps land on their exact target, whichever GPU owns it.
    mp.set_playing(false);
    for target in [5u32, 2, 7, 0, 3, 3] {
        mp.scrub(target);
        run_until(mp, "a jump", |m| {
            !m.scrub_pending() && m.shown_frame() == Some(target)
        });
        let &(f, k) = mp.presented().last().unwrap();
        assert_eq!((f, k), (target, target as usize % 2));
        let (cf, _, img) = mp.captured().last().unwrap();
        assert_eq!(*cf, target);
        assert!(
            *img == reference[target as usize],
            "jump to {target}: picture"
        );
    }
    assert!(mp.last_scrub_ms().is_some());

    // The toggle switches every GPU, and playback goes on in order on the other path.
    mp.set_playing(true);
    let at = mp.presented().len();
    mp.toggle_path().expect("toggle to the loopback path");
    assert_eq!(mp.active_path(), PathSel::Direct);
    assert_eq!(mp.player(0).active_path(), PathSel::Direct, "GPU 0");
    run_until(mp, "frames after the toggle", |m| {
        m.presented().len() >= at + 6
    });
    let after: Vec<u32> = mp.presented()[at..at + 6].iter().map(|&(f, _)| f).collect();
    assert!(
        after.windows(2).all(|w| (w[0] + 1) % 8 == w[1]),
        "in order after the toggle: {after:?}"
    );
    for k in 0..2 {
        assert!(
            rendered(mp, k, PathSel::Direct) >= 2,
            "GPU {k} rendered on the new path"
        );
    }

    // A jump while playing: the target is next, and playback goes on in order from it.
    let at = mp.presented().len();
    mp.scrub(5);
    run_until(mp, "a jump while playing", |m| {
        !m.scrub_pending() && m.shown_frame() == Some(5)
    });
    assert_eq!(
        mp.presented()[at],
        (5, 1),
        "the target is the next frame presented"
    );
    run_until(mp, "frames after the jump", |m| {
        m.presented().len() >= at + 5
    });
    let after: Vec<u32> = mp.presented()[at..at + 5].iter().map(|&(f, _)| f).collect();
    assert_eq!(after, [5, 6, 7, 0, 1]);
    assert_eq!(mp.last_error(), None);

    plays_in_every_order(mp, &reference);
}

/// Attributes shown and hidden at run time (the window's overlay and 1-8 keys) reach every
/// GPU of `mp` (in this process or another rank): the frame on screen is presented again,
/// and every frame then, from either GPU, is one GPU's picture with the same change.
fn attributes_reach_every_gpu(mp: &mut MultiPlayer) {
    mp.set_playing(false);
    mp.scrub(3);
    run_until(mp, "frame 3", |m| {
        !m.scrub_pending() && m.shown_frame() == Some(3)
    });
    let attributes = mp.player(0).dataset_attributes();
    let shown = attributes
        .iter()
        .position(|(_, on)| *on)
        .expect("a shown attribute");
    let hidden = attributes.iter().position(|(_, on)| !*on);
    let hide_and_show = |p: &mut Player| {
        p.set_dataset_attribute_shown(shown, false).expect("hide");
        if let Some(a) = hidden {
            p.set_dataset_attribute_shown(a, true).expect("show");
        }
    };
    let before = mp.captured().len();
    mp.set_dataset_attribute_shown(shown, false)
        .expect("hidden on every GPU");
    if let Some(a) = hidden {
        mp.set_dataset_attribute_shown(a, true)
            .expect("shown on every GPU");
    }
    assert!(!mp.player(0).dataset_attributes()[shown].1);
    run_until(mp, "frame 3 with other attributes", |m| {
        m.captured()[before..].iter().any(|(f, _, _)| *f == 3)
    });
    let all: Vec<u32> = (0..8).collect();
    let reference = one_gpu_images_with(&all, hide_and_show);
    assert!(
        reference[3] != one_gpu_images(&[3])[0],
        "the attributes changed the picture"
    );
    let (_, k, img) = mp.captured()[before..]
        .iter()
        .rfind(|(f, _, _)| *f == 3)
        .unwrap()
        .clone();
    assert_eq!(k, 1);
    assert!(
        img == reference[3],
        "frame 3 from GPU 1 with the new attributes"
    );
    // Slot 0 off and on again (the 1 key twice): every GPU follows.
    if mp.player(0).view().attributes[0]
        .as_ref()
        .is_some_and(|a| a.enabled)
    {
        mp.set_attribute_shown(0, false).expect("slot 1 off");
        mp.set_attribute_shown(0, true).expect("slot 1 on");
    }
    let at = mp.presented().len();
    mp.set_playing(true);
    presented_from(mp, at, 6, &reference);
    mp.set_playing(false);
}

/// The frames presented from `at` on, once `count` are; each checked against one GPU's
/// picture (`reference`) and its owner of `mp`'s GPUs.
fn presented_from(
    mp: &mut MultiPlayer,
    at: usize,
    count: usize,
    reference: &[Vec<u8>],
) -> Vec<u32> {
    run_until(mp, "frames", |m| m.presented().len() >= at + count);
    let g = mp.gpu_count();
    let log = mp.presented()[at..at + count].to_vec();
    assert!(
        log.iter().all(|&(f, k)| k == f as usize % g),
        "owners: {log:?}"
    );
    // Images are captured for every presentation (re-presentations in a new view too).
    for (f, k, img) in mp.captured().iter().rev().take(count) {
        assert!(
            *img == reference[*f as usize],
            "frame {f} from GPU {k} differs from one GPU's picture"
        );
    }
    log.iter().map(|&(f, _)| f).collect()
}

/// Backwards, once and ping-pong at run time on `mp`'s 8 frames: the presented order is
/// one GPU's (`Scheduler`'s), each frame from its owner, in one GPU's pictures
/// (`reference`).
fn plays_in_every_order(mp: &mut MultiPlayer, reference: &[Vec<u8>]) {
    assert_eq!(mp.frame_count(), 8);
    // Reverse while playing (a loop): from the frame before the one on screen, strictly
    // descending, wrapping.
    mp.set_playing(true);
    let at = mp.presented().len();
    let on_screen = mp.shown_frame().expect("a frame on screen");
    mp.set_direction(Direction::Reverse);
    assert_eq!(mp.direction(), Direction::Reverse);
    let back = presented_from(mp, at, 12, reference);
    let expected: Vec<u32> = (1..=12).map(|i| (on_screen + 8 * 2 - i) % 8).collect();
    assert_eq!(
        back, expected,
        "backwards from {on_screen}, wrapping on the loop"
    );

    // Once, backwards: down to frame 0, where playback stops.
    mp.set_mode(PlayMode::Once);
    run_until(mp, "the end of a once timeline", |m| !m.is_playing());
    let at = mp.presented().len();
    let last = mp.presented()[at - 4..].to_vec();
    assert!(
        last.windows(2).all(|w| w[0].0 == w[1].0 + 1) && last[3].0 == 0,
        "descending to 0: {last:?}"
    );
    std::thread::sleep(Duration::from_millis(100));
    for _ in 0..20 {
        mp.tick().expect("tick");
    }
    assert_eq!(mp.presented().len(), at, "nothing after the end");

    // Ping-pong from 5 forward: the end frames shown once, the direction flips, as one
    // GPU's scheduler plays it.
    mp.set_mode(PlayMode::PingPong);
    mp.set_direction(Direction::Forward);
    mp.set_playing(false);
    mp.scrub(5);
    run_until(mp, "frame 5", |m| {
        !m.scrub_pending() && m.shown_frame() == Some(5)
    });
    let at = mp.presented().len();
    mp.set_playing(true);
    let bounced = presented_from(mp, at, 14, reference);
    assert_eq!(bounced, [6, 7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4, 5]);
    assert_eq!(mp.mode(), PlayMode::PingPong);

    // Back to a loop, forward.
    mp.set_mode(PlayMode::Loop);
    let at = mp.presented().len();
    let d = mp.direction();
    let looped = presented_from(mp, at, 10, reference);
    let step = |w: &[u32]| match d {
        Direction::Forward => (w[0] + 1) % 8 == w[1],
        Direction::Reverse => (w[1] + 1) % 8 == w[0],
    };
    assert!(looped.windows(2).all(step), "{d:?} on a loop: {looped:?}");
    assert_eq!(mp.last_error(), None);
}

/// The same timeline with GPU 1 in another rank ([`RankWorkers`] over ranks as threads:
/// the messages MPI carries between processes): in order, one GPU's pictures, exact jumps
/// paused and playing, the toggle reaching the other rank, and a new camera that the other
/// rank renders.
#[test]
fn two_ranks_play_one_timeline_jump_toggle_and_take_the_view() {
    if gpu().is_none() {
        return;
    }
    let cfg = PlayerConfig {
        loopback_direct: true,
        ..small_config()
    };
    let scene = Scene::load(&dataset()).expect("scene");
    let timeout = Duration::from_secs(20);
    let mut ranks = supercell::cluster::threads::ranks(2, 2);
    let one = ranks.pop().expect("rank 1");
    let zero = ranks.pop().expect("rank 0");
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            let g = PlayerGpu::open_best().expect("rank 1's device");
            let (player, _) = gpus::open_part(&g, &scene, &cfg, 2, 1).expect("rank 1");
            let name = GpuName {
                ordinal: 1,
                device: "rank 1's adapter".into(),
                ..GpuName::default()
            };
            let mut gpus = [LocalGpu::new(name, Some(g), player)];
            serve(&one, &mut gpus, timeout).expect("rank 1 serves");
        });
        let g = PlayerGpu::open_best().expect("rank 0's device");
        let (player, frames) = gpus::open_part(&g, &scene, &cfg, 2, 0).expect("rank 0");
        let name = GpuName {
            device: g.describe(),
            ..GpuName::default()
        };
        let local = LocalGpu::new(name, Some(g), player);
        let ranks: Rc<dyn Ranks> = Rc::new(zero);
        let workers = RankWorkers::connect(ranks, vec![local], timeout).expect("rank 1's hello");
        let mut mp = MultiPlayer::over(Box::new(workers), frames, &cfg).expect("coordinator");
        assert!(mp.workers().player(1).is_none(), "GPU 1 is rank 1's");
        assert_eq!(mp.workers().name(1).device, "rank 1's adapter");
        assert_eq!(mp.workers().name(1).host.as_deref(), Some("host0"));
        assert_eq!(mp.workers().name(1).ordinal, 1);
        plays_one_timeline(&mut mp);
        assert_eq!(
            mp.workers().figures(1, PathSel::Direct).1,
            "loopback (test)"
        );

        // A new camera, paused on a frame of rank 1: presented again in the new view,
        // which is one GPU's picture of that frame in that view.
        mp.set_playing(false);
        mp.scrub(3);
        run_until(&mut mp, "frame 3", |m| {
            !m.scrub_pending() && m.shown_frame() == Some(3)
        });
        let before = mp.captured().len();
        let original = mp.player(0).view().camera;
        mp.player_mut(0).view_mut().camera.yaw_deg += 40.0;
        let camera = mp.player(0).view().camera;
        run_until(&mut mp, "frame 3 in the new view", |m| {
            m.captured()[before..].iter().any(|(f, _, _)| *f == 3)
        });
        let (_, k, turned) = mp.captured()[before..]
            .iter()
            .find(|(f, _, _)| *f == 3)
            .unwrap()
            .clone();
        assert_eq!(k, 1);
        let reference = one_gpu_images_with(&[3], |p| p.view_mut().camera = camera);
        assert!(
            turned == reference[0],
            "frame 3 from rank 1 in the new view"
        );
        assert!(
            turned != one_gpu_images(&[3])[0],
            "the view changed the picture"
        );

        // A new look of an attribute on GPU 0 (colour map, opacity, extinction, emission):
        // frame 3 is presented again from rank 1 with that look, one GPU's picture of it.
        let plain = mp.player(0).view().attributes.clone();
        let before = mp.captured().len();
        restyle(mp.player_mut(0).view_mut());
        run_until(&mut mp, "frame 3 in the new look", |m| {
            m.captured()[before..].iter().any(|(f, _, _)| *f == 3)
        });
        let (_, k, styled) = mp.captured()[before..]
            .iter()
            .find(|(f, _, _)| *f == 3)
            .unwrap()
            .clone();
        assert_eq!(k, 1);
        let reference = one_gpu_images_with(&[3], |p| {
            p.view_mut().camera = camera;
            restyle(p.view_mut());
        });
        assert!(styled != turned, "the look changed the picture");
        assert!(
            styled == reference[0],
            "frame 3 from rank 1 in the new look"
        );
        // The scene's camera and looks again, and other attributes shown.
        mp.player_mut(0).view_mut().attributes = plain;
        mp.player_mut(0).view_mut().camera = original;
        attributes_reach_every_gpu(&mut mp);
        mp.workers_mut().finish();
        mp.drain(Duration::from_secs(5));
        other.join().expect("rank 1");
    });
}

/// A look unlike the default of the first attribute shown: another colour map, a steeper
/// opacity, denser and glowing.
fn restyle(view: &mut View) {
    let a = view
        .attributes
        .iter_mut()
        .flatten()
        .find(|a| a.enabled)
        .expect("an attribute shown");
    a.tf.colormap = Colormap::Named("inferno".into());
    a.tf.opacity = vec![(0.0, 0.0), (0.1, 0.8), (1.0, 1.0)];
    a.tf.extinction *= 3.0;
    a.tf.emission *= 2.0;
}

/// A rank that stops answering mid-run: ranks as threads, rank 1's messages lost after
/// its first few (as if its process died).
struct Dying {
    inner: supercell::cluster::threads::ThreadRanks,
    sends_left: AtomicUsize,
}

impl Ranks for Dying {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn size(&self) -> usize {
        self.inner.size()
    }
    fn local_rank(&self) -> usize {
        self.inner.local_rank()
    }
    fn local_size(&self) -> usize {
        self.inner.local_size()
    }
    fn host(&self) -> String {
        self.inner.host()
    }
    fn barrier(&self) {
        self.inner.barrier();
    }
    fn gather(&self, mine: &[u8]) -> Option<Vec<Vec<u8>>> {
        self.inner.gather(mine)
    }
    fn all_gather(&self, mine: &[u8]) -> Vec<Vec<u8>> {
        self.inner.all_gather(mine)
    }
    fn send(&self, to: usize, tag: i32, bytes: &[u8]) {
        let left = self.sends_left.load(Ordering::Relaxed);
        if left > 0 {
            self.sends_left.store(left - 1, Ordering::Relaxed);
            self.inner.send(to, tag, bytes);
        }
    }
    fn receive_until(&self, tag: i32, deadline: Option<Instant>) -> Option<(usize, Vec<u8>)> {
        self.inner.receive_until(tag, deadline)
    }
    fn abort(&self, code: i32) -> ! {
        self.inner.abort(code)
    }
}

/// Rank 0 names a rank that stopped answering mid-run within the timeout, and stops.
#[test]
fn a_rank_that_stops_answering_is_named_within_the_timeout() {
    stops_answering(1);
}

/// As above with two GPUs in each rank (`--gpus` within a rank): the silent rank is named
/// once, whichever of its GPUs went quiet, and every one of its GPUs stops with it.
#[test]
fn a_rank_of_two_gpus_that_stops_answering_is_named_once() {
    stops_answering(2);
}

/// Two ranks of `per_rank` GPUs each; rank 1 stops sending after 8 messages.
fn stops_answering(per_rank: usize) {
    if gpu().is_none() {
        return;
    }
    let cfg = small_config();
    let scene = Scene::load(&dataset()).expect("scene");
    let timeout = Duration::from_secs(3);
    let mut ranks = supercell::cluster::threads::ranks(2, 2);
    let one = Dying {
        inner: ranks.pop().expect("rank 1"),
        sends_left: AtomicUsize::new(8),
    };
    let zero = ranks.pop().expect("rank 0");
    let workers = 2 * per_rank;
    let open_rank = |rank: usize| -> (Vec<LocalGpu>, u32) {
        let mut frames = 0;
        let gpus = (0..per_rank)
            .map(|slot| {
                let g = PlayerGpu::open_best().expect("a device");
                let k = rank * per_rank + slot;
                let (player, n) = gpus::open_part(&g, &scene, &cfg, workers, k).expect("a part");
                frames = n;
                LocalGpu::new(GpuName::default(), Some(g), player)
            })
            .collect();
        (gpus, frames)
    };
    std::thread::scope(|s| {
        let other = s.spawn(|| {
            let (mut gpus, _) = open_rank(1);
            // Rank 1 in turn hears nothing from rank 0 once rank 0 gave up on it.
            serve(&one, &mut gpus, timeout)
        });
        let (locals, frames) = open_rank(0);
        let workers = RankWorkers::connect(Rc::new(zero), locals, timeout).expect("rank 1's hello");
        let mut mp = MultiPlayer::over(Box::new(workers), frames, &cfg).expect("coordinator");
        assert_eq!(mp.gpu_count(), 2 * per_rank);
        let started = Instant::now();
        let err = loop {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "rank 1's silence was never named"
            );
            match mp.tick() {
                Ok(t) if t.shown.is_none() => mp.wait(Duration::from_millis(2)),
                Ok(_) => {}
                Err(e) => break e.to_string(),
            }
        };
        assert!(err.contains("rank 1 did not answer within 3.0 s"), "{err}");
        assert_eq!(
            mp.workers().silent().map(|s| s.ranks.clone()),
            Some(vec![1])
        );
        // Rank 1 names rank 0 in turn (nothing more comes from it) before rank 0's
        // device goes: on the H100's Vulkan driver, one thread tearing its device down while
        // another thread's device is in use crashed this process (SIGSEGV, 5 runs of 6;
        // ranks are processes outside this test).
        let gone = other.join().expect("rank 1");
        assert!(gone.is_err(), "rank 1 names rank 0 in turn");
        drop(mp);
    });
}

#[test]
fn headless_gpus_json_has_each_gpu_and_the_total() {
    if gpu().is_none() {
        return;
    }
    let json = out_dir().join("gpus.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(bin())
        .args(["play", dataset().to_str().unwrap(), "--headless"])
        .args(["--gpus", "0,0", "--frames", "16", "--path", "host"])
        .args(["--size", "64x48", "--scrub-jumps", "4", "--threads", "2"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    assert!(stderr.contains("GPU 1 (--gpus 0"), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &v["paths"][0];
    assert_eq!(run["ran"], true, "{run}");
    let g = &run["gpus"];
    assert_eq!(g["in_order"], true, "{g}");
    let presented: Vec<u64> = g["presented"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(presented, (0..16).map(|i| i % 8).collect::<Vec<u64>>());
    let by: Vec<u64> = g["presented_by"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect();
    assert_eq!(by, (0..16).map(|i| i % 2).collect::<Vec<u64>>());
    let gpus = g["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2);
    for (k, x) in gpus.iter().enumerate() {
        assert_eq!(x["ordinal"], 0);
        assert_eq!(x["frames_owned"], 4);
        assert_eq!(x["frames_presented"], 8, "{x}");
        // (The last render is counted when its player next looks.)
        assert!(
            x["figures"]["frames_rendered"].as_u64().unwrap() >= 7,
            "{x}"
        );
        assert!(!x["matched"].as_str().unwrap().is_empty());
        assert_eq!(x["copies"], if k == 0 { 0 } else { 8 }, "{x}");
    }
    assert!(gpus[1]["copy_ms_mean"].as_f64().unwrap() > 0.0);
    assert!(g["display_copy"].as_str().unwrap().contains("peer-to-peer"));
    assert_eq!(g["total"]["frames_presented"], 16);
    assert!(g["total"]["gbps_mean"].as_f64().unwrap() > 0.0);
    assert_eq!(run["scrub"]["exact"], true);
    assert_eq!(run["scrub"]["jumps"], 4);
}

/// `--mode ping-pong` with `--gpus`, headless: the frames presented are one GPU's
/// ping-pong order (the end frames once, the direction flips), each from its owner, and
/// the JSON says they are in order; a jump while playing (backwards by then) goes on in
/// play order.
#[test]
fn headless_gpus_play_ping_pong_in_one_gpus_order() {
    if gpu().is_none() {
        return;
    }
    let json = out_dir().join("gpus-ping-pong.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(bin())
        .args(["play", dataset().to_str().unwrap(), "--headless"])
        .args(["--gpus", "0,0", "--frames", "12", "--path", "host"])
        .args(["--size", "64x48", "--threads", "2", "--mode", "ping-pong"])
        .args(["--scrub-jumps", "3"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let g = &v["paths"][0]["gpus"];
    let list = |key: &str| -> Vec<u64> {
        g[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .collect()
    };
    let presented = list("presented");
    // One GPU's scheduler on 8 frames, ping-pong from frame 0.
    let mut expected = vec![0u64];
    let (mut f, mut d) = (0u32, Direction::Forward);
    while expected.len() < 12 {
        (f, d) = supercell::pipeline::scheduler::successor(8, PlayMode::PingPong, f, d).unwrap();
        expected.push(u64::from(f));
    }
    assert_eq!(presented, expected, "{g}");
    // It ends playing backwards: the jump while playing goes on backwards from its target.
    assert_eq!(expected, [0, 1, 2, 3, 4, 5, 6, 7, 6, 5, 4, 3]);
    let by = list("presented_by");
    assert!(presented.iter().zip(&by).all(|(f, k)| f % 2 == *k), "{g}");
    assert_eq!(g["in_order"], true, "{g}");
    let scrub = &v["paths"][0]["scrub"];
    assert_eq!(scrub["exact"], true, "{scrub}");
    assert_eq!(scrub["playing_exact"], true, "{scrub}");
}

/// `--gpus` naming no GPU it can play is refused, naming the flag.
#[test]
fn gpus_that_cannot_be_played_are_refused_with_reasons() {
    let out = Command::new(bin())
        .args(["play", dataset().to_str().unwrap()])
        .args(["--headless", "--gpus", "nine"])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "--gpus nine accepted");
    assert!(stderr.contains("--gpus"), "{stderr}");
}

/// A frame whose reads fail is passed over on its GPU and on the timeline, the frames
/// after it are presented in order, and once the fault is gone it is presented again.
#[test]
fn a_damaged_frame_is_passed_over_and_plays_again_once_it_reads() {
    if gpu().is_none() {
        return;
    }
    // Each GPU's player numbers its own frames: its frame 1 is frame 2 on GPU 0 and frame
    // 3 on GPU 1.
    // With few slots (a window shorter than the timeline) and with many (a window over
    // all of it, so the damaged frame is always ahead).
    for slots in [Some(3), Some(8)] {
        damaged_frame_with(slots);
    }
}

fn damaged_frame_with(slots: Option<usize>) {
    let plan = std::sync::Arc::new(supercell::ingest::FaultPlan::parse("eio:frame=1").unwrap());
    let cfg = PlayerConfig {
        slots,
        faults: Some(plan.clone()),
        ..small_config()
    };
    let mut mp = MultiPlayer::open(open_gpus(&[0, 0]).unwrap(), &dataset(), &cfg).unwrap();
    run_until(&mut mp, "two passes", |m| m.presented().len() >= 12);
    let shown: Vec<u32> = mp.presented().iter().map(|&(f, _)| f).collect();
    assert!(
        !shown.contains(&2) && !shown.contains(&3),
        "slots {slots:?}: {shown:?}"
    );
    let skipping = [0u32, 1, 4, 5, 6, 7];
    for w in shown.windows(2) {
        let i = skipping.iter().position(|&f| f == w[0]).unwrap();
        assert_eq!(
            w[1],
            skipping[(i + 1) % 6],
            "slots {slots:?}: in order around the damage: {shown:?}"
        );
    }
    plan.lift();
    let at = mp.presented().len();
    run_until(&mut mp, "frames 2 and 3 again", |m| {
        let later: Vec<u32> = m.presented()[at..].iter().map(|&(f, _)| f).collect();
        later.contains(&2) && later.contains(&3)
    });
    mp.drain(Duration::from_secs(5));
}

/// `render --gpus 0,0` writes every frame of the range, each as one GPU renders it.
#[test]
fn render_deals_frames_to_gpus_and_writes_one_gpus_pictures() {
    if gpu().is_none() {
        return;
    }
    let ds = dataset();
    let render = |dir: &str, extra: &[&str]| {
        let out = out_dir().join(dir);
        let _ = std::fs::remove_dir_all(&out);
        let o = Command::new(bin())
            .args(["render", ds.to_str().unwrap(), "--frames", "1..6"])
            .args(["--size", "32x24", "--out", out.to_str().unwrap()])
            .args(extra)
            .output()
            .expect("run supercell render");
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(o.status.success(), "render {extra:?} failed:\n{stderr}");
        (out, stderr)
    };
    let (one, _) = render("render-one-gpu", &[]);
    let (two, stderr) = render("render-two-gpus", &["--gpus", "0,0"]);
    assert!(stderr.contains("GPU 0: 2 frames"), "{stderr}");
    assert!(stderr.contains("GPU 1: 3 frames"), "{stderr}");
    for f in 1..6 {
        assert!(
            stderr.contains(&format!("frame {f} on GPU {}", f % 2)),
            "{stderr}"
        );
        let name = format!("frame_{f:05}.png");
        assert_eq!(
            play_support::read_png(&one.join(&name)),
            play_support::read_png(&two.join(&name)),
            "{name}"
        );
    }
    assert!(!two.join("frame_00000.png").exists());
}

/// On the GPU machine: the direct path on two players of GPU 0 (two engines, two rings,
/// two devices sharing memory with CUDA), presented in order; with `SUPERCELL_TEST_GPUS`
/// (e.g. `0,1`) on those GPUs instead.
#[test]
#[ignore = "needs CUDA"]
fn direct_path_on_two_gpus_presents_in_order() {
    let ds = std::env::var_os("SUPERCELL_TEST_DATASET")
        .map(PathBuf::from)
        .unwrap_or_else(dataset);
    let gpus = std::env::var("SUPERCELL_TEST_GPUS").unwrap_or_else(|_| "0,0".into());
    let sc = std::env::var_os("SUPERCELL_BIN").unwrap_or_else(|| bin().into());
    let json = out_dir().join("gpus-direct.json");
    let out = Command::new(sc)
        .args(["play", ds.to_str().unwrap(), "--headless", "--gpus", &gpus])
        .args(["--frames", "48", "--path", "both", "--size", "640x360"])
        .args(["--scrub-jumps", "10", "--threads", "8"])
        .args(["--json", json.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stderr}");
    assert!(out.status.success(), "play failed:\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    for run in v["paths"].as_array().unwrap() {
        let name = run["info"]["path"].as_str().unwrap();
        assert_eq!(run["ran"], true, "{name}: {run}");
        let g = &run["gpus"];
        assert_eq!(g["in_order"], true, "{name}");
        assert_eq!(run["scrub"]["exact"], true, "{name}");
        for x in g["gpus"].as_array().unwrap() {
            assert!(
                x["figures"]["frames_rendered"].as_u64().unwrap() >= 20,
                "{name}: {x}"
            );
            assert!(x["matched"].as_str().unwrap().contains("UUID"), "{x}");
        }
        if name == "direct" {
            for x in g["gpus"].as_array().unwrap() {
                assert_ne!(x["label"], "host", "{x}");
            }
        }
    }
}

/// One GPU as a player of several GPUs of one (the coordinator over one player): in order,
/// backwards, once and ping-pong as one GPU's scheduler plays them.
#[test]
fn one_gpu_through_the_coordinator_plays_in_every_order() {
    if gpu().is_none() {
        return;
    }
    let opened = open_gpus(&[0]).expect("a device on adapter 0");
    let mut mp = MultiPlayer::open(opened, &dataset(), &small_config()).expect("player");
    mp.set_capture(true);
    run_until(&mut mp, "8 frames", |m| m.presented().len() >= 8);
    let frames: Vec<u32> = mp.presented().iter().map(|&(f, _)| f).collect();
    assert_eq!(frames[..8], [0, 1, 2, 3, 4, 5, 6, 7]);
    let all: Vec<u32> = (0..8).collect();
    plays_in_every_order(&mut mp, &one_gpu_images(&all));
    mp.drain(Duration::from_secs(5));
}

/// One GPU through the one coordinator keeps what its player did alone while the timeline's
/// slider is dragged: a frame it has stands in for a target still being read (shown, not
/// presented on the timeline), and the target itself is presented once it lands.
#[test]
fn dragging_one_gpu_shows_a_frame_it_has_until_the_target_lands() {
    let Some(g) = gpu() else { return };
    // Frame 6's reads are held back until the test lifts the rule: the jump to it cannot
    // land before, while frames read before it can stand in, however slow the machine.
    let plan =
        std::sync::Arc::new(supercell::ingest::faults::FaultPlan::parse("hang:frame=6").unwrap());
    let cfg = PlayerConfig {
        faults: Some(plan.clone()),
        slots: Some(8),
        ..small_config()
    };
    let scene = Scene::load(&dataset()).expect("the dataset as a scene");
    let mut mp = MultiPlayer::open_one(g, &scene, &cfg).expect("one GPU");
    assert_eq!(mp.gpu_count(), 1);
    run_until(&mut mp, "frame 3", |mp| mp.shown_frame() == Some(3));
    mp.set_dragging(true);
    mp.scrub(6);
    let before = mp.presented().len();
    let mut stand_ins = Vec::new();
    let end = Instant::now() + Duration::from_secs(60);
    while stand_ins.is_empty() {
        assert!(
            Instant::now() < end,
            "no frame stood in for frame 6: {}",
            mp.state()
        );
        match mp.tick().expect("tick").shown {
            Some((f, k)) => {
                assert_ne!(f, 6, "frame 6 landed while its reads were held back");
                assert_eq!(k, 0);
                stand_ins.push(f);
                // Shown on screen: GPU 0's own image.
                assert!(mp.presented_image().is_some());
            }
            None => mp.wait(Duration::from_millis(2)),
        }
    }
    assert_eq!(mp.shown_frame(), Some(stand_ins[0]));
    assert!(mp.scrub_pending());
    plan.lift();
    run_until(&mut mp, "frame 6", |mp| !mp.scrub_pending());
    assert_eq!(mp.shown_frame(), Some(6));
    // Stand-ins are not presentations of the timeline: after the jump it presented 6.
    assert_eq!(
        mp.presented()[before..].first(),
        Some(&(6, 0)),
        "stood in: {stand_ins:?}"
    );
    mp.set_dragging(false);
    mp.drain(Duration::from_secs(5));
}

/// One GPU's headless run goes through the coordinator and keeps what one GPU's player
/// reported, with or without `--gpus`: the path's own figures, the GPU memory at the start
/// and end, the jumps' bound; and the coordinator's one GPU row beside them.
#[test]
fn one_gpus_headless_json_has_its_figures_memory_and_bound() {
    if gpu().is_none() {
        return;
    }
    for gpus in [&[][..], &["--gpus", "1"][..]] {
        let json = out_dir().join(format!("one-gpu{}.json", gpus.len()));
        let _ = std::fs::remove_file(&json);
        let out = Command::new(bin())
            .args(["play", dataset().to_str().unwrap(), "--headless"])
            .args(gpus)
            .args(["--frames", "10", "--path", "host", "--size", "64x48"])
            .args(["--scrub-jumps", "3", "--threads", "2"])
            .args(["--json", json.to_str().unwrap()])
            .output()
            .expect("run supercell play");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{gpus:?}: play failed:\n{stderr}");
        // The summary's path line is one GPU's: its figures, not a table of GPUs.
        assert!(stderr.contains("GB/s avg (peak "), "{gpus:?}: {stderr}");
        assert!(!stderr.contains("1 GPUs:"), "{gpus:?}: {stderr}");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let run = &v["paths"][0];
        assert_eq!(run["ran"], true, "{gpus:?}: {run}");
        let f = &run["figures"];
        // Every frame presented was rendered, and its render counted.
        assert!(
            f["frames_rendered"].as_u64().unwrap() >= 10,
            "{gpus:?}: {f}"
        );
        assert!(f["gbps_mean"].as_f64().unwrap() > 0.0, "{gpus:?}: {f}");
        assert!(f["latency_p50_ms"].as_f64().is_some(), "{gpus:?}: {f}");
        let m = &run["memory"];
        assert!(m["gpu_used_start"].as_u64().is_some(), "{gpus:?}: {m}");
        assert!(m["gpu_used_end"].as_u64().is_some(), "{gpus:?}: {m}");
        assert!(m["gpu_memory_source"].as_str().is_some(), "{gpus:?}: {m}");
        let scrub = &run["scrub"];
        assert!(
            scrub["bound_ms"].as_f64().unwrap() > 20.0,
            "{gpus:?}: {scrub}"
        );
        assert_eq!(scrub["exact"], true, "{gpus:?}: {scrub}");
        let g = &run["gpus"];
        assert_eq!(g["gpus"].as_array().unwrap().len(), 1, "{gpus:?}: {g}");
        assert_eq!(g["in_order"], true, "{gpus:?}: {g}");
    }
}

/// `--soak` and `--screenshot` with `--gpus`: the long run through the coordinator of two
/// GPUs (both GPUs' frames counted, presented in order), then the picture of the
/// presented frame with the GPUs' rows over it.
#[test]
fn soak_and_screenshot_run_on_several_gpus() {
    if gpu().is_none() {
        return;
    }
    let json = out_dir().join("gpus-soak.json");
    let shot = out_dir().join("gpus-soak.png");
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(bin())
        .args(["play", dataset().to_str().unwrap(), "--headless"])
        // Long enough beside the first renders, which compile the pipelines on both
        // devices (seconds on lavapipe under load).
        .args(["--gpus", "0,0", "--soak", "10s", "--sample-every", "500ms"])
        .args(["--size", "160x90", "--threads", "2"])
        .args(["--json", json.to_str().unwrap()])
        .args(["--screenshot", shot.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    assert!(stderr.contains("soak: "), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let s = &v["soak"];
    assert!(s["samples"].as_array().unwrap().len() >= 3, "{s}");
    let presented = s["presented"].as_u64().unwrap();
    assert!(presented >= 2, "{s}");
    assert_eq!(s["presented_in_order"], true, "{s}");
    // Each GPU renders the frames it owns: the frames counted are both players'.
    assert!(s["frames"].as_u64().unwrap() + 2 >= presented, "{s}");
    assert_eq!(s["errors"].as_array().unwrap().len(), 0, "{s}");
    let png = std::fs::read(&shot).expect("the screenshot");
    assert_eq!(&png[1..4], b"PNG");
    // IHDR: width and height, big-endian, at bytes 16..24.
    let dim = |at: usize| u32::from_be_bytes(png[at..at + 4].try_into().unwrap());
    assert_eq!((dim(16), dim(20)), (160, 90));
}

/// A dataset played without a scene whose first frames are empty starts where its data
/// does, through the coordinator of one GPU as one GPU's player started
/// (`PlayerConfig::start_at_data`, set where no `--start-frame` was given).
#[test]
fn the_coordinator_starts_where_the_data_does() {
    use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
    use supercell::format::{BuildOptions, LeafBrick, SparseVolume, build_grid};
    if gpu().is_none() {
        return;
    }
    let tmp = tempfile::tempdir_in(out_dir()).unwrap();
    let ds = tmp.path().join("late");
    // Frames 0 and 1 hold a brick without an active voxel; frames 2 and 3 hold data.
    let grid = |data: bool| {
        let mut brick = LeafBrick::filled([0, 0, 0], 0.0);
        if data {
            for n in 0..512 {
                brick.set_active(n, 10.0 + (n % 7) as f32);
            }
        }
        let volume = SparseVolume {
            background: 0.0,
            bricks: vec![brick],
        };
        let opts = BuildOptions {
            name: "dbz".into(),
            ..BuildOptions::default()
        };
        build_grid(&volume, &opts).unwrap()
    };
    let mut w = DatasetWriter::create(
        &ds,
        LaneSpec::Count(1),
        1 << 20,
        vec![AttributeSpec::new("dbz")],
        Provenance::default(),
    )
    .unwrap();
    for f in 0..4 {
        w.push_frame(f as f64, vec![grid(f >= 2)]).unwrap();
    }
    w.finish().unwrap();
    let cfg = PlayerConfig {
        start_at_data: true,
        ..small_config()
    };
    let scene = Scene::load(&ds).unwrap();
    let gpu = PlayerGpu::open_best().unwrap();
    let mut mp = MultiPlayer::open_one(gpu, &scene, &cfg).unwrap();
    run_until(&mut mp, "a frame", |m| !m.presented().is_empty());
    assert_eq!(mp.presented()[0].0, 2, "{:?}", mp.presented());
    mp.drain(Duration::from_secs(5));
}
