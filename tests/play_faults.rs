//! The player under storage faults (software Vulkan in CI): a frame whose read fails, whose
//! lane stops answering, or whose grid header is damaged is marked damaged (never handed to
//! the renderer), playback goes on with the next frames, and the frame plays again once its
//! lane is back; lane files truncated or removed while playing; the headless JSON lists the
//! faults (with `SUPERCELL_FAULTS`); `render` refuses a frame with a damaged grid header.
//! Reads run on the io_uring and the pread backends, and on the host path's default route
//! and its ring route (`--host-copy ring`).
//!
//! Without a GPU adapter the tests print why and pass, unless `SUPERCELL_REQUIRE_GPU` is set.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod storm_support;
use storm_support::{SmallStorm, damage_magic};

use supercell::app::gpus::{MultiPlayer, open_gpus, run_paths};
use supercell::app::headless::HeadlessOptions;
use supercell::app::{FrameFaultKind, HostCopy, PathSel, Player, PlayerConfig, PlayerGpu};
use supercell::dataset::Dataset;
use supercell::ingest::{FaultPlan, IoBackend, Source, io_uring_probe};
use supercell::pipeline::PlayMode;

fn gpu() -> Option<PlayerGpu> {
    match PlayerGpu::open(PlayerGpu::instance(), None) {
        Ok(g) => Some(g),
        Err(e) => {
            if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                panic!("no GPU adapter ({e}) and SUPERCELL_REQUIRE_GPU is set");
            }
            eprintln!("skipping: no GPU adapter ({e})");
            None
        }
    }
}

fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("play-fault-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small storm (8 frames, two lanes), built once.
fn storm() -> PathBuf {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            SmallStorm {
                resolution: 32,
                frames: 8,
                lanes: 2,
                chunk: 64 << 10,
                attributes: None,
                made_by: "fault test",
            }
            .shared(&out_dir().join("storm32x8"))
        })
        .clone()
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dst = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), dst).unwrap();
        }
    }
}

/// A private copy of the storm, for tests that damage it.
fn storm_copy() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir_in(out_dir()).unwrap();
    let d = t.path().join("storm");
    copy_dir(&storm(), &d);
    (t, d)
}

fn source(ds: &Path) -> Source {
    Source::from_manifest(Dataset::open(ds).unwrap().manifest())
}

fn backends() -> Vec<IoBackend> {
    let mut v = vec![IoBackend::Pread];
    if io_uring_probe().is_ok() {
        v.push(IoBackend::IoUring);
    }
    v
}

/// Each backend on the default host route, and the last on the ring route (reads into a
/// ring of imported host buffers, copied on by the GPU) where the device can import host
/// memory.
fn runs(g: &PlayerGpu) -> Vec<(IoBackend, HostCopy)> {
    let b = backends();
    let mut v: Vec<_> = b.iter().map(|&b| (b, HostCopy::Auto)).collect();
    match supercell::gpu::HostImporter::new(&g.device) {
        Ok(_) => v.push((*b.last().expect("a backend"), HostCopy::Ring)),
        Err(why) => eprintln!("skipping the ring route: {why}"),
    }
    v
}

fn config(backend: IoBackend, plan: Option<Arc<FaultPlan>>) -> PlayerConfig {
    PlayerConfig {
        width: 32,
        height: 24,
        path: PathSel::Host,
        threads: 2,
        slots: Some(3),
        mode: PlayMode::Loop,
        io_backend: backend,
        faults: plan,
        ..PlayerConfig::default()
    }
}

/// Ticks until `done`, collecting the frames shown.
fn run_until(
    player: &mut Player,
    shown: &mut Vec<u32>,
    what: &str,
    mut done: impl FnMut(&Player, &[u32]) -> bool,
) {
    let end = Instant::now() + Duration::from_secs(60);
    while !done(player, shown) {
        assert!(
            Instant::now() < end,
            "timed out waiting for {what}; shown {shown:?}, faults {:?}",
            player.faults().collect::<Vec<_>>()
        );
        let t = player.tick().expect("tick");
        match t.shown {
            Some(f) => shown.push(f),
            None => player.wait(Duration::from_millis(2)),
        }
    }
}

/// An EIO on one extent: the frame is marked damaged (reason, lane, file), never shown,
/// the frames after it play, and once the fault is gone the frame plays again.
#[test]
fn failed_read_marks_the_frame_damaged_and_playback_goes_on() {
    let Some(g) = gpu() else { return };
    let ds = storm();
    let src = source(&ds);
    // Frame 3's first extent: its lane.
    let e = src.frames[3].extents[0];
    let lane = src.files[e.file as usize].lane;
    for (backend, host_copy) in runs(&g) {
        let plan = Arc::new(FaultPlan::parse(&format!("eio:lane={lane},frame=3")).unwrap());
        let cfg = PlayerConfig {
            host_copy,
            ..config(backend, Some(plan.clone()))
        };
        let mut p = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
        let mut shown = Vec::new();
        run_until(&mut p, &mut shown, "two passes", |p, _| {
            p.figures(PathSel::Host).frames_rendered >= 14
        });
        assert!(
            !shown.contains(&3),
            "{backend:?} {host_copy:?}: a failed frame was shown: {shown:?}"
        );
        let after: Vec<u32> = shown.iter().copied().filter(|&f| f > 3).collect();
        assert!(after.len() >= 4, "playback went on past frame 3: {shown:?}");
        assert_eq!(p.damaged_frames().get(&3), Some(&FrameFaultKind::Read));
        let f = p.faults().find(|f| f.frame == 3).expect("fault listed");
        assert_eq!(f.lane, Some(lane));
        assert!(f.message.contains("(injected)"), "{}", f.message);
        assert!(
            f.file.as_deref().is_some_and(|x| x.contains("lane")),
            "{f:?}"
        );
        assert!(p.scheduler_stats().damaged_skipped >= 1);
        // The lane comes back: frame 3 plays on a later pass.
        plan.lift();
        run_until(&mut p, &mut shown, "frame 3 after the fault", |_, s| {
            s.iter().rev().take(20).any(|&f| f == 3)
        });
        assert!(p.recovered_frames() >= 1);
        assert!(!p.damaged_frames().contains_key(&3));
        p.drain(Duration::from_secs(5));
    }
}

/// A lane that stops answering: the frame times out (the overlay says so), playback goes
/// on, its slot is held until the read really ends, and after the lane comes back the frame
/// plays again and the slot is free.
#[test]
fn hung_lane_times_out_and_recovers() {
    let Some(g) = gpu() else { return };
    let ds = storm();
    let src = source(&ds);
    let e = src.frames[2].extents[0];
    let lane = src.files[e.file as usize].lane;
    for (backend, host_copy) in runs(&g) {
        let plan = Arc::new(FaultPlan::parse(&format!("hang:lane={lane},frame=2")).unwrap());
        let cfg = PlayerConfig {
            read_timeout: Some(Duration::from_millis(300)),
            threads: 4,
            host_copy,
            ..config(backend, Some(plan.clone()))
        };
        let mut p = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
        let mut shown = Vec::new();
        run_until(&mut p, &mut shown, "the time-out", |p, _| {
            p.damaged_frames().contains_key(&2)
        });
        assert_eq!(p.damaged_frames()[&2], FrameFaultKind::Timeout);
        assert!(p.held_slots() >= 1, "the hung read keeps its slot");
        let f = p.faults().find(|f| f.frame == 2).unwrap();
        assert_eq!(f.lane, Some(lane), "{f:?}");
        let lines = supercell::app::overlay::fault_lines(&p);
        assert!(
            lines.iter().any(|l| l.contains("frame 2 damaged (timeout")),
            "{lines:?}"
        );
        assert!(lines.iter().any(|l| l.contains("held")), "{lines:?}");
        // Playback goes on: the playhead passes the frame instead of waiting for it. With
        // io_uring the hung read holds only a ring entry, so the frames after it play;
        // blocking pread threads all end up waiting on the hung lane (as they would on a
        // real one), so there every frame with bytes on that lane times out in turn.
        let n = shown.len();
        run_until(&mut p, &mut shown, "the playhead past frame 2", |p, s| {
            p.scheduler_stats().damaged_skipped >= 1
                && p.position() != 2
                && (backend == IoBackend::Pread || s[n..].iter().any(|&f| f > 2))
        });
        plan.lift();
        run_until(
            &mut p,
            &mut shown,
            "frame 2 once the lane is back",
            |p, s| s[n..].contains(&2) && p.held_slots() == 0,
        );
        assert!(p.recovered_frames() >= 1);
        p.drain(Duration::from_secs(5));
    }
}

/// A lane file truncated while playing: the frames with bytes past its new end are marked
/// damaged, the others go on playing; restored in place, the damaged frames play again.
#[test]
fn truncated_lane_file_while_playing_marks_frames_and_recovers() {
    let Some(g) = gpu() else { return };
    for backend in backends() {
        let (_t, ds) = storm_copy();
        let src = source(&ds);
        let victim = src.files.iter().find(|f| f.lane == 1).unwrap();
        let saved = std::fs::read(&victim.path).unwrap();
        let cut = (saved.len() as u64 / 2) & !4095;
        let hit: BTreeSet<u32> = (0..src.frames.len() as u32)
            .filter(|&f| {
                src.frames[f as usize].extents.iter().any(|e| {
                    src.files[e.file as usize].path == victim.path && e.offset + e.len > cut
                })
            })
            .collect();
        assert!(!hit.is_empty());
        let mut p = Player::new(&g.device, &g.queue, &ds, &config(backend, None)).unwrap();
        let mut shown = Vec::new();
        run_until(&mut p, &mut shown, "first frames", |_, s| s.len() >= 3);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&victim.path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let n = shown.len();
        run_until(&mut p, &mut shown, "a damaged frame", |p, _| {
            p.fault_count() > 0
        });
        let f = p.faults().next().unwrap().clone();
        assert!(hit.contains(&f.frame), "{f:?} not among {hit:?}");
        assert!(f.message.contains("end of file"), "{}", f.message);
        assert_eq!(f.lane, Some(1));
        if hit.len() < src.frames.len() {
            // The frames whose bytes are all still there keep playing.
            run_until(&mut p, &mut shown, "unharmed frames", |_, s| {
                s[n..].iter().filter(|f| !hit.contains(f)).count() >= 3
            });
        }
        std::fs::write(&victim.path, &saved).unwrap();
        run_until(&mut p, &mut shown, "recovery", |p, _| {
            p.recovered_frames() >= 1
        });
        p.drain(Duration::from_secs(5));
    }
}

/// A lane file removed while playing: the open descriptor still holds its data, so
/// playback goes on without a fault.
#[test]
fn removed_lane_file_while_playing_keeps_playing() {
    let Some(g) = gpu() else { return };
    for backend in backends() {
        let (_t, ds) = storm_copy();
        let src = source(&ds);
        let mut p = Player::new(&g.device, &g.queue, &ds, &config(backend, None)).unwrap();
        let mut shown = Vec::new();
        run_until(&mut p, &mut shown, "first frames", |_, s| s.len() >= 2);
        std::fs::remove_file(&src.files.iter().find(|f| f.lane == 1).unwrap().path).unwrap();
        let n = shown.len();
        run_until(&mut p, &mut shown, "a full pass", |_, s| s.len() >= n + 10);
        assert_eq!(p.fault_count(), 0, "{:?}", p.faults().collect::<Vec<_>>());
        p.drain(Duration::from_secs(5));
    }
}

/// Where frame `frame`'s first grid starts in its lane file.
/// A frame whose grid header fails the structural check never reaches the renderer: the
/// player marks it damaged (with the reason) and plays the others.
#[test]
fn frame_with_a_damaged_grid_header_is_never_rendered() {
    let Some(g) = gpu() else { return };
    let (_t, ds) = storm_copy();
    damage_magic(&ds, 2);
    for (backend, host_copy) in runs(&g) {
        let cfg = PlayerConfig {
            host_copy,
            ..config(backend, None)
        };
        let mut p = Player::new(&g.device, &g.queue, &ds, &cfg).unwrap();
        let mut shown = Vec::new();
        run_until(&mut p, &mut shown, "two passes", |p, _| {
            p.figures(PathSel::Host).frames_rendered >= 14
        });
        assert!(
            !shown.contains(&2),
            "{backend:?} {host_copy:?}: damaged frame shown: {shown:?}"
        );
        assert_eq!(p.damaged_frames().get(&2), Some(&FrameFaultKind::Header));
        let f = p.faults().find(|f| f.frame == 2).unwrap();
        assert!(f.message.contains("magic"), "{}", f.message);
        assert!(f.lane.is_some() && f.offset.is_some(), "{f:?}");
        p.drain(Duration::from_secs(5));
    }
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_supercell")
}

/// `SUPERCELL_FAULTS` reaches the engines of `play --headless`, and its JSON lists each
/// fault with frame, lane, kind and message.
#[test]
fn headless_json_lists_the_faults() {
    if gpu().is_none() {
        return;
    }
    let ds = storm();
    let src = source(&ds);
    let lane = src.files[src.frames[3].extents[0].file as usize].lane;
    let json = out_dir().join(format!("faults{}.json", std::process::id()));
    let out = Command::new(bin())
        .env("SUPERCELL_FAULTS", format!("eio:lane={lane},frame=3"))
        .args(["play", ds.to_str().unwrap(), "--headless", "--path", "host"])
        .args(["--frames", "12", "--scrub-jumps", "3", "--size", "32x24"])
        .args(["--threads", "2", "--read-timeout", "5", "--json"])
        .arg(&json)
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    assert!(stderr.contains("faults: "), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let run = &v["paths"][0];
    assert_eq!(run["ran"], true, "{run}");
    let faults = &run["faults"];
    assert!(faults["count"].as_u64().unwrap() >= 1, "{faults}");
    let f = &faults["faults"][0];
    assert_eq!(f["frame"], 3);
    assert_eq!(f["lane"], lane);
    assert_eq!(f["kind"], "read");
    assert_eq!(f["path"], "host");
    assert!(f["message"].as_str().unwrap().contains("(injected)"), "{f}");
    assert!(f["file"].as_str().is_some(), "{f}");
    let notes = run["info"]["notes"].as_array().unwrap();
    assert!(
        notes
            .iter()
            .any(|n| n.as_str().unwrap().contains("fault injection")),
        "{notes:?}"
    );
}

/// `render` refuses a frame whose grid header is damaged, saying which grid and why, and
/// renders the others.
#[test]
fn render_refuses_a_frame_with_a_damaged_grid_header() {
    if gpu().is_none() {
        return;
    }
    let (t, ds) = storm_copy();
    damage_magic(&ds, 2);
    let out_png = t.path().join("out");
    let render = |frame: &str| {
        Command::new(bin())
            .args(["render", ds.to_str().unwrap(), "--frame", frame])
            .args(["--size", "32x24", "--out"])
            .arg(&out_png)
            .output()
            .expect("run supercell render")
    };
    let bad = render("2");
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success(), "rendered a damaged frame:\n{stderr}");
    assert!(
        stderr.contains("frame 2") && stderr.contains("damaged grid header"),
        "{stderr}"
    );
    let good = render("1");
    assert!(
        good.status.success(),
        "{}",
        String::from_utf8_lossy(&good.stderr)
    );
}

/// `--verify` on the host route with imported slots: the CRC-32 is computed on the GPU
/// after each frame's copy (the engine computes none on the CPU), and a byte flipped on
/// storage after the manifest was written marks exactly that frame damaged, naming its
/// lane, file and offset; the other frames play.
#[test]
fn host_verify_on_the_gpu_marks_a_flipped_frame_damaged() {
    use std::os::unix::fs::FileExt;
    let Some(g) = gpu() else { return };
    let (_t, ds) = storm_copy();
    let src = source(&ds);
    // The last byte of frame 5's last extent (past its grid headers).
    let e = *src.frames[5].extents.last().unwrap();
    assert!(e.crc32.is_some(), "the manifest records CRCs");
    let file = &src.files[e.file as usize];
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&file.path)
        .unwrap();
    let at = e.offset + e.len - 1;
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, at).unwrap();
    f.write_all_at(&[b[0] ^ 0x40], at).unwrap();
    // Also with slots of several parts: extents crossing a part boundary are hashed on the GPU
    // as their pieces in each part, and the pieces' CRCs combined.
    let part = src
        .max_frame_len()
        .div_ceil(8)
        .max(64 << 10)
        .next_power_of_two();
    assert!(part < src.max_frame_len(), "frames too small to cut");
    // And on the ring route (the GPU copies each read out of a ring of imported host
    // buffers), in one part and in several.
    let ring: Vec<_> = runs(&g)
        .into_iter()
        .filter(|r| r.1 == HostCopy::Ring)
        .flat_map(|(b, h)| [(b, None, h), (b, Some(part), h)])
        .collect();
    let runs = backends()
        .into_iter()
        .map(|b| (b, None, HostCopy::Auto))
        .chain([(IoBackend::Pread, Some(part), HostCopy::Auto)])
        .chain(ring);
    for (backend, part_bytes, host_copy) in runs {
        let cfg = PlayerConfig {
            verify: true,
            part_bytes,
            host_copy,
            ..config(backend, None)
        };
        let mut p = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
        let report = p.path_report(PathSel::Host);
        if !report
            .upload
            .as_deref()
            .is_some_and(|u| u.contains("external_memory_host"))
        {
            eprintln!("skipping: host slots cannot be imported here ({report:?})");
            return;
        }
        assert!(
            report
                .notes
                .iter()
                .any(|n| n.contains("on the GPU after its copy")),
            "{report:?}"
        );
        assert!(
            !report.notes.iter().any(|n| n.contains("CPU threads")),
            "the engine still checks on the CPU: {report:?}"
        );
        let mut shown = Vec::new();
        run_until(&mut p, &mut shown, "two passes", |p, _| {
            p.figures(PathSel::Host).frames_rendered >= 14
        });
        assert!(
            !shown.contains(&5),
            "{backend:?} {host_copy:?}, parts {part_bytes:?}: a frame with a flipped byte was shown: {shown:?}"
        );
        let played: BTreeSet<u32> = shown.iter().copied().collect();
        assert_eq!(
            played,
            (0..8).filter(|&f| f != 5).collect::<BTreeSet<u32>>(),
            "the other frames play"
        );
        assert_eq!(p.damaged_frames().get(&5), Some(&FrameFaultKind::Read));
        let fault = p.faults().find(|f| f.frame == 5).expect("fault listed");
        assert!(fault.message.contains("CRC-32"), "{}", fault.message);
        assert_eq!(fault.lane, Some(file.lane));
        assert_eq!(fault.offset, Some(e.offset));
        assert_eq!(
            fault.file.as_deref(),
            Some(file.path.display().to_string().as_str())
        );
        p.drain(Duration::from_secs(5));
    }
}

/// The coordinator as `play --headless` opens it: over one GPU (`gpus` `None`: the best
/// adapter, `MultiPlayer::open_one`) or over the GPUs of `--gpus` (adapter 0 named twice
/// here: two devices, two players, alternate frames).
fn coordinator(gpus: Option<&[usize]>, ds: &Path, cfg: &PlayerConfig) -> MultiPlayer {
    let scene = supercell::scene::Scene::load(ds).expect("dataset as a scene");
    match gpus {
        None => MultiPlayer::open_one(PlayerGpu::open_best().unwrap(), &scene, cfg).unwrap(),
        Some(o) => MultiPlayer::open_scene(open_gpus(o).unwrap(), &scene, cfg).unwrap(),
    }
}

/// A jump to a damaged frame ends as soon as the damage is known, not after the whole
/// `--timeout`, through the coordinator of one GPU and of two (`--gpus 0,0`): with two
/// frames, the second damaged, every jump after frame 0 is shown goes to frame 1, so a
/// jump finds the playhead already on the damaged frame (which is not read again) or its
/// read failing again, and has nothing to wait for.
#[test]
fn a_jump_to_a_damaged_frame_ends_at_once() {
    if gpu().is_none() {
        return;
    }
    let t = tempfile::tempdir_in(out_dir()).unwrap();
    let ds = t.path().join("storm2");
    SmallStorm {
        resolution: 32,
        frames: 2,
        lanes: 2,
        chunk: 64 << 10,
        attributes: None,
        made_by: "fault test",
    }
    .shared(&ds);
    damage_magic(&ds, 1);
    let timeout = Duration::from_secs(20);
    for gpus in [None, Some(&[0, 0][..])] {
        for backend in backends() {
            let mut mp = coordinator(gpus, &ds, &config(backend, None));
            let opts = HeadlessOptions {
                frames: 4,
                paths: vec![PathSel::Host],
                scrub_jumps: 4,
                timeout,
            };
            let t0 = Instant::now();
            let runs = run_paths(&mut mp, &opts, &mut |_| {});
            let took = t0.elapsed();
            let run = &runs[0];
            eprintln!(
                "{gpus:?} {backend:?}: playback and 4 jumps in {:.2} s",
                took.as_secs_f64()
            );
            assert_eq!(run.error, None, "{gpus:?} {backend:?}");
            assert!(
                took < Duration::from_secs(10),
                "{gpus:?} {backend:?}: {took:?}"
            );
            assert!(
                run.faults.damaged_frames.contains(&1),
                "{gpus:?} {backend:?}: {:?}",
                run.faults
            );
            let scrub = run.scrub.as_ref().unwrap();
            assert!(!scrub.targets.contains(&1), "{scrub:?}");
            mp.drain(Duration::from_secs(5));
        }
    }
}

/// A lane that never answers (its reads stay out even when the engine stops, as a read the
/// kernel holds would): headless playback through the coordinator (one GPU, and two) gives
/// up after its `--timeout`, saying which lane holds the slots of the GPU whose frame it
/// waited for, and the players' drain and drop do not wait for those reads.
#[test]
fn a_lane_that_never_answers_does_not_hold_up_the_end_of_play() {
    if gpu().is_none() {
        return;
    }
    let ds = storm();
    for gpus in [None, Some(&[0, 0][..])] {
        for backend in backends() {
            let plan = Arc::new(FaultPlan::parse("hang:lane=1").unwrap());
            let cfg = PlayerConfig {
                read_timeout: Some(Duration::from_millis(300)),
                ..config(backend, Some(plan.clone()))
            };
            let mut mp = coordinator(gpus, &ds, &cfg);
            let opts = HeadlessOptions {
                frames: 8,
                paths: vec![PathSel::Host],
                scrub_jumps: 2,
                timeout: Duration::from_secs(2),
            };
            let runs = run_paths(&mut mp, &opts, &mut |_| {});
            let error = runs[0].error.clone().expect("playback cannot finish");
            assert!(
                error.contains("held by reads") && error.contains("lane 1"),
                "{gpus:?} {backend:?}: {error}"
            );
            let t0 = Instant::now();
            mp.drain(Duration::from_secs(10));
            drop(mp);
            let took = t0.elapsed();
            eprintln!(
                "{gpus:?} {backend:?}: drained and dropped in {:.3} s",
                took.as_secs_f64()
            );
            assert!(
                took < Duration::from_millis(1500),
                "{gpus:?} {backend:?}: {took:?}"
            );
            // The abandoned reads may land now, into memory their threads kept alive.
            plan.lift();
        }
    }
}
