//! The player: the core on a small generated storm (frames arrive, scrubs land exactly, the
//! direct toggle says why it cannot run without CUDA), the headless run's JSON, and the
//! window under X (Xvfb started here when there is no `DISPLAY`) driven by a script: overlay
//! numbers, the toggle, a scrub, and a screenshot compared with a headless render of the same
//! frame away from the overlay.
//!
//! Without a GPU adapter (or a display, for the window test) the tests print why and pass,
//! unless `SUPERCELL_REQUIRE_GPU` is set (CI sets it). The `#[ignore]`d test needs the H200
//! (`scripts/gpu-tests.sh` runs it with `SUPERCELL_TEST_DATASET`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

mod storm_support;
use storm_support::SmallStorm;

use supercell::app::gpumem::{CUDA, VULKAN_BUDGET, WGPU_ALLOCATOR};
use supercell::app::{HostCopy, PathSel, Player, PlayerConfig, PlayerGpu, gpu_memory};
use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::render::{Renderer, upload_slot};
use supercell::scene::Scene;

fn require_gpu() -> bool {
    std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some()
}

fn skip(why: &str) {
    if require_gpu() {
        panic!("{why} and SUPERCELL_REQUIRE_GPU is set");
    }
    eprintln!("skipping: {why}");
}

fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("play-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small storm (8 frames, two lanes), made once and shared by the tests.
fn dataset() -> PathBuf {
    // The tests of this binary run on parallel threads of one process: build it once here
    // (the temporary name below only separates processes).
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_dataset).clone()
}

fn build_dataset() -> PathBuf {
    SmallStorm {
        resolution: 48,
        frames: 8,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "play test",
    }
    .shared(&out_dir().join("storm48x8"))
}

fn gpu() -> Option<PlayerGpu> {
    match PlayerGpu::open(PlayerGpu::instance(), None) {
        Ok(g) => Some(g),
        Err(e) => {
            skip(&format!("no GPU adapter ({e})"));
            None
        }
    }
}

fn small_config() -> PlayerConfig {
    PlayerConfig {
        width: 64,
        height: 48,
        path: PathSel::Host,
        threads: 2,
        ..PlayerConfig::default()
    }
}

fn run_until(player: &mut Player, what: &str, mut done: impl FnMut(&Player) -> bool) {
    let end = Instant::now() + Duration::from_secs(60);
    while !done(player) {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        if player.tick().expect("tick").shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
}

#[test]
fn core_plays_scrubs_exactly_and_reports_the_direct_path() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let mut player = Player::new(&g.device, &g.queue, &ds, &small_config()).expect("player");
    assert!(player.slots() >= 3, "at least 3 slots");
    // More frames than slots: the ring streams.
    assert!(player.frame_count() as usize > player.slots().min(8) - 1);
    run_until(&mut player, "12 frames", |p| {
        p.figures(PathSel::Host).frames_rendered >= 12
    });
    let f = player.figures(PathSel::Host);
    assert!(f.frames_delivered >= 12 && f.bytes > 0, "{f:?}");
    assert!(f.bytes_per_frame > 0.0);
    assert_eq!(player.last_error(), None);

    // Scrubs land on exactly the frame asked for, paused or playing.
    player.set_playing(false);
    for target in [5u32, 1, 7, 7, 0, 3] {
        player.scrub(target);
        run_until(&mut player, "scrub", |p| {
            !p.scrub_pending() && p.shown_frame() == Some(target)
        });
        assert_eq!(player.shown_frame(), Some(target));
    }
    assert_eq!(
        player.stats(PathSel::Host).scrub_latencies().len(),
        6,
        "every scrub timed"
    );

    // Without CUDA (and CUDA↔Vulkan sharing) the direct path is unavailable, with a reason;
    // the toggle leaves the host path running.
    if supercell::gpu::cuda_probe().is_err() {
        let why = player
            .direct_unavailable()
            .expect("direct unavailable here");
        assert!(!why.is_empty());
        let err = player.toggle_path().expect_err("toggle refused");
        assert!(err.contains("CUDA"), "{err}");
        assert_eq!(player.active_path(), PathSel::Host);
        let rep = player.path_report(PathSel::Direct);
        assert!(!rep.available && rep.unavailable_reason.is_some());
    }
    // Keeps playing after the refused toggle.
    player.set_playing(true);
    let before = player.figures(PathSel::Host).frames_rendered;
    run_until(&mut player, "frames after the toggle", |p| {
        p.figures(PathSel::Host).frames_rendered >= before + 4
    });
    player.drain(Duration::from_secs(5));
}

/// The host path (cpu-only reads into host slots, a parallel copy into a reused staging
/// buffer, a GPU copy into an upload buffer) shows exactly the frame: the player's image of
/// each frame is byte-identical to the renderer's image of the same frame read with the
/// dataset reader and uploaded with `queue.write_buffer` (what `supercell render` does),
/// including revisits, which reuse the staging and upload buffers.
/// A jump while reads are in flight abandons the read-ahead (its queued reads are
/// cancelled in the engine) rather than waiting behind it, lands on the exact frame, and
/// leaves no error and no slot behind: playback goes on afterwards.
#[test]
fn scrub_during_playback_aborts_the_read_ahead() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    // One thread, 4 KiB reads, one at a time: the read-ahead is still in flight right
    // after it is issued.
    let cfg = PlayerConfig {
        threads: 1,
        queue_depth: 1,
        io_size: 4096,
        ..small_config()
    };
    let mut player = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
    let n = player.frame_count();
    run_until(&mut player, "first frame", |p| p.shown_frame().is_some());
    // Scheduling can delay the jump until the reads have landed: try a few times.
    let mut attempts = 0;
    while player.cancelled_reads() == 0 {
        attempts += 1;
        assert!(attempts <= 20, "no read-ahead was ever aborted");
        let from = player.position();
        let target = (from + n / 2) % n;
        player.set_playing(true);
        player.tick().expect("tick issues the read-ahead");
        player.set_playing(false);
        player.scrub(target);
        run_until(&mut player, "the exact frame", |p| {
            !p.scrub_pending() && p.shown_frame() == Some(target)
        });
    }
    assert!(player.scheduler_stats().aborted >= player.cancelled_reads());
    assert_eq!(player.last_error(), None, "an aborted read is not an error");
    // Every slot comes back: playback goes on through the whole ring.
    player.set_playing(true);
    let before = player.figures(PathSel::Host).frames_rendered;
    run_until(&mut player, "playback after the aborts", |p| {
        p.figures(PathSel::Host).frames_rendered >= before + 2 * n as u64
    });
    assert_eq!(player.last_error(), None);
    player.drain(Duration::from_secs(5));
}

/// Both host routes (the GPU copying from imported host slots, and the CPU's staging copy)
/// show byte-identical images to a plain upload of the same frame.
#[test]
fn host_path_shows_the_exact_frames() {
    let Some(g) = gpu() else { return };
    for host_copy in [HostCopy::Auto, HostCopy::Staging] {
        host_path_shows_the_exact_frames_with(&g, host_copy);
    }
}

fn host_path_shows_the_exact_frames_with(g: &PlayerGpu, host_copy: HostCopy) {
    let ds = dataset();
    // 4 KiB reads on one thread: a frame lands over many ticks, so the imported route
    // copies it to the GPU in many pieces while it is read.
    let cfg = PlayerConfig {
        host_copy,
        io_size: 4096,
        threads: 1,
        ..small_config()
    };
    let mut player = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
    let rep = player.path_report(PathSel::Host);
    assert_eq!(rep.engine.as_deref(), Some("cpu-only"), "{rep:?}");
    assert!(rep.label.starts_with("cpu-only ("), "{rep:?}");
    player.set_playing(false);
    let ls = Scene::load(&ds)
        .and_then(|s| s.open(cfg.width as f32 / cfg.height as f32, None))
        .expect("scene");
    let mut renderer = Renderer::new(&g.device, &g.queue).expect("renderer");
    let mut slot = AlignedBuf::new();
    for target in [3u32, 0, 7, 1, 3, 0] {
        player.scrub(target);
        run_until(&mut player, "scrub", |p| {
            !p.scrub_pending() && p.shown_frame() == Some(target)
        });
        let got = player.read_image().expect("player image");
        ls.dataset
            .read_frame(target as usize, &mut slot, CrcCheck::Verify)
            .expect("read frame");
        let buffer = upload_slot(&g.device, &g.queue, &slot);
        renderer
            .set_grids(&ls.grid_slices(target as usize, &buffer).expect("slices"))
            .expect("grids");
        renderer
            .render_timed(player.view(), cfg.width, cfg.height)
            .expect("render");
        let want = renderer.read_image().expect("reference image");
        assert_eq!((got.width, got.height), (want.width, want.height));
        assert!(
            got.rgba8 == want.rgba8,
            "frame {target}: the host path's image differs from a plain upload's"
        );
    }
    assert_eq!(player.last_error(), None);
    // The route the frames took: the GPU copying from imported host slots, or (where the
    // device cannot import) the CPU's staging copy, whose rate is then reported.
    let f = player.figures(PathSel::Host);
    let route = player
        .path_report(PathSel::Host)
        .upload
        .expect("host route");
    if host_copy == HostCopy::Staging {
        assert!(route.contains("staging"), "{route}");
    } else if let Ok(imp) = supercell::gpu::HostImporter::new(&g.device) {
        // A device that can import must take the imported route.
        assert!(
            route.contains("VK_EXT_external_memory_host"),
            "{route} ({imp:?})"
        );
    }
    if route.contains("VK_EXT_external_memory_host") {
        assert_eq!(f.upload_gbps, None, "no CPU copy to time: {f:?}");
    } else {
        assert!(f.upload_gbps.is_some_and(|g| g > 0.0), "{route}: {f:?}");
    }
    eprintln!("host path route: {route}");
    player.drain(Duration::from_secs(5));
}

/// A part size that cuts the storm's largest frame into several parts (grids then cross part
/// boundaries) without exceeding the parts the renderer binds: a power of two of at least
/// 64 KiB.
fn small_parts(player: &Player) -> u64 {
    let len = (0..player.frame_count())
        .map(|f| player.frame_bytes(f))
        .max()
        .unwrap();
    let part = len.div_ceil(8).max(64 << 10).next_power_of_two();
    assert!(
        part < len,
        "the test storm's frames ({len} bytes) are too small to cut"
    );
    part
}

/// Slots of several parts (parts forced small, so the storm's frames span several and grids
/// cross part boundaries) on the host path, both upload routes, with `--verify` (CRCs over
/// the parts): the same images as one-part slots, frame for frame; and `bench --verify` of
/// the same storm in those parts delivers byte-identical frames.
#[test]
fn host_path_in_small_parts_shows_the_same_images_as_one_part() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    for host_copy in [HostCopy::Auto, HostCopy::Staging] {
        let cfg = PlayerConfig {
            host_copy,
            verify: true,
            ..small_config()
        };
        let mut one = Player::new(&g.device, &g.queue, &ds, &cfg).expect("one-part player");
        let part = small_parts(&one);
        let mut many = Player::new(
            &g.device,
            &g.queue,
            &ds,
            &PlayerConfig {
                part_bytes: Some(part),
                ..cfg.clone()
            },
        )
        .expect("multi-part player");
        assert_eq!(one.slot_plan().parts, 1, "{:?}", one.slot_plan());
        assert!(many.slot_plan().parts > 1, "{:?}", many.slot_plan());
        assert_eq!(many.slot_plan().part_bytes, part);
        for p in [&mut one, &mut many] {
            p.set_playing(false);
        }
        for target in [3u32, 0, 7, 5] {
            let mut images = Vec::new();
            for p in [&mut one, &mut many] {
                p.scrub(target);
                run_until(p, "scrub", |p| {
                    // A frame whose bytes or CRCs went wrong across parts is never shown.
                    let faults: Vec<_> = p.faults().collect();
                    assert!(faults.is_empty(), "{host_copy:?}: {faults:?}");
                    !p.scrub_pending() && p.shown_frame() == Some(target)
                });
                images.push(p.read_image().expect("image"));
            }
            assert!(
                images[0].rgba8 == images[1].rgba8,
                "{host_copy:?}: frame {target} renders differently from {}-byte parts",
                part
            );
        }
        for p in [&mut one, &mut many] {
            assert_eq!(p.last_error(), None);
            p.drain(Duration::from_secs(5));
        }
    }
    let manifest = Scene::load(&ds).expect("scene");
    let ls = manifest.open(1.0, None).expect("open");
    let source = supercell::ingest::Source::from_manifest(ls.dataset.manifest());
    let len = source.max_frame_len();
    let part = len.div_ceil(8).max(64 << 10).next_power_of_two();
    let r = supercell::bench::run(
        &source,
        &supercell::bench::BenchConfig {
            engine: supercell::ingest::EngineKind::CpuOnly,
            verify: true,
            part_bytes: Some(part),
            ..Default::default()
        },
    )
    .expect("bench");
    let v = r.verify.as_ref().unwrap();
    assert_eq!(v.mismatch_count, 0, "{:?}", v.mismatches);
    assert_eq!(v.frames, 8);
    assert!(r.slot_plan.parts > 1, "{:?}", r.slot_plan);
}

/// The run-time toggle's machinery (queued reads dropped, reads in flight discarded as they
/// land, a fresh schedule at the same playhead, the old frame on screen until the new path
/// delivers) with a second host engine standing in for the direct path: frames keep coming
/// on both, nothing fails, and no slot is left behind (with 3 slots per path, a slot lost per
/// toggle would stall playback within a few rounds).
#[test]
fn toggling_paths_during_playback_neither_stalls_nor_leaks() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let cfg = PlayerConfig {
        loopback_direct: true,
        slots: Some(3),
        ..small_config()
    };
    let mut player = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
    assert_eq!(player.path_report(PathSel::Direct).label, "loopback (test)");
    for round in 0..8 {
        let sel = player.active_path();
        let before = player.figures(sel).frames_rendered;
        run_until(&mut player, "frames after a toggle", |p| {
            p.figures(sel).frames_rendered >= before + 2
        });
        // Toggle while reads are in flight (every other round, at once after a scrub).
        if round % 2 == 1 {
            player.scrub((round * 3) % player.frame_count());
        }
        player.toggle_path().expect("toggle");
        assert_ne!(player.active_path(), sel);
    }
    assert_eq!(player.last_error(), None);
    for sel in [PathSel::Direct, PathSel::Host] {
        let f = player.figures(sel);
        assert!(f.frames_rendered >= 8, "{sel:?}: {f:?}");
    }
    // A scrub after all that still lands exactly.
    player.set_playing(false);
    player.scrub(6);
    run_until(&mut player, "scrub after toggles", |p| {
        !p.scrub_pending() && p.shown_frame() == Some(6)
    });
    player.drain(Duration::from_secs(5));
}

/// A resize refits the scene's camera (what "reset camera" and the kiosk's path use) while
/// the user has not moved it; a moved camera keeps its view in sight and comes back exactly.
#[test]
fn resizing_refits_the_scene_camera_and_keeps_a_moved_one() {
    let Some(g) = gpu() else { return };
    let mut player = Player::new(&g.device, &g.queue, &dataset(), &small_config()).unwrap();
    let wide = player.view().camera;
    assert_eq!(wide, player.scene_view().camera);
    // Landscape 64 × 48 to portrait 48 × 64: further back, so that the width stays framed.
    player.set_size(48, 64);
    let tall = player.view().camera;
    assert!(tall.distance > wide.distance * 1.2, "{wide:?} → {tall:?}");
    assert_eq!(tall, player.scene_view().camera);
    assert_eq!(tall, player.scene_camera_at(3.0));
    player.set_size(64, 48);
    assert_eq!(player.view().camera, wide);
    // Moved by the user: the view it had at 4:3 is kept whole at 3:4, and it comes back.
    player.view_mut().camera.orbit(30.0, 5.0);
    let moved = player.view().camera;
    player.set_size(48, 64);
    let r = player.view().camera.distance / moved.distance;
    assert!((r - 16.0 / 9.0).abs() < 1e-4, "{r}");
    assert_eq!(player.scene_view().camera, tall);
    player.set_size(64, 48);
    assert_eq!(player.view().camera, moved);
}

/// GPU memory has a labelled source that sees allocations: without CUDA, Vulkan's memory
/// budget (where the driver counts this process's use) or the wgpu allocator; a fresh
/// 64 MiB buffer, filled, raises the figure by at least its size.
#[test]
fn gpu_memory_is_labelled_and_sees_a_64_mib_buffer() {
    let Some(g) = gpu() else { return };
    let first = gpu_memory(&g.device).expect("a GPU memory figure on Vulkan");
    eprintln!("GPU memory: {first:?}");
    let cuda = supercell::gpu::cuda_probe().is_ok();
    assert_eq!(first.source == CUDA, cuda, "{first:?}");
    if !cuda {
        // Each source passed over says why.
        assert!(first.absent[0].starts_with("CUDA: "), "{first:?}");
        if first.source == WGPU_ALLOCATOR {
            assert!(first.absent[1].starts_with(VULKAN_BUDGET), "{first:?}");
        }
    }
    if let Some(total) = first.total {
        assert!(
            first.used <= total.max(first.used) && total > 0,
            "{first:?}"
        );
    }
    // Other tests of this binary allocate and free on other threads (the process-wide
    // figures see them): a few tries, one of which must see the whole buffer.
    const SIZE: u64 = 64 << 20;
    let mut grew = Vec::new();
    for _ in 0..5 {
        let before = gpu_memory(&g.device).unwrap();
        let buf = g.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("64 MiB"),
            size: SIZE,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        // Touch every page (a driver may commit memory lazily).
        g.queue.write_buffer(&buf, 0, &vec![1u8; SIZE as usize]);
        g.queue.submit([]);
        g.device.poll(wgpu::PollType::wait_indefinitely()).unwrap();
        let after = gpu_memory(&g.device).unwrap();
        assert_eq!(after.source, before.source);
        drop(buf);
        grew.push(after.used as i64 - before.used as i64);
        if after.used >= before.used + SIZE {
            return;
        }
    }
    panic!(
        "{}: a 64 MiB buffer did not show, growth {grew:?}",
        first.source
    );
}

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_supercell")
}

/// `--soak`: the kiosk's workload for a set time, sampling memory and handles.
#[test]
fn headless_soak_samples_memory_and_handles() {
    if gpu().is_none() {
        return;
    }
    let ds = dataset();
    let json = out_dir().join("soak.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(bin())
        .args(["play", ds.to_str().unwrap(), "--headless", "--soak", "3s"])
        .args(["--sample-every", "500ms", "--toggle-every", "1s"])
        .args(["--size", "32x24", "--threads", "2", "--json"])
        .arg(&json)
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    assert!(stderr.contains("soak: "), "{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["paths"].as_array().unwrap().len(), 0);
    let s = &v["soak"];
    let d = s["duration_s"].as_f64().unwrap();
    assert!((3.0..30.0).contains(&d), "{d}");
    let samples = s["samples"].as_array().unwrap();
    // A sample every 500 ms over 3 s is 7; a loaded machine (lavapipe renders on the same
    // cores) delays ticks, so fewer are certain, but never just one or two.
    assert!(samples.len() >= 4, "{} samples", samples.len());
    let t: Vec<f64> = samples.iter().map(|x| x["t_s"].as_f64().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[1] > w[0]), "{t:?}");
    assert!(s["frames"].as_u64().unwrap() > 0 && s["bytes"].as_u64().unwrap() > 0);
    let last = &samples[samples.len() - 1];
    assert!(last["rss"].as_u64().unwrap() > 1 << 20);
    assert!(last["fds"].as_u64().unwrap() >= 3);
    assert!(last["threads"].as_u64().unwrap() >= 3, "I/O threads run");
    let fds = s["fds_range"].as_array().unwrap();
    assert!(fds[0].as_u64().unwrap() <= fds[1].as_u64().unwrap());
    if s["toggle_unavailable"].is_null() {
        assert!(s["toggles"].as_u64().unwrap() >= 2, "{s}");
    } else {
        // No direct path: no flips, and the report says why.
        assert_eq!(s["toggles"], 0);
        let why = s["toggle_unavailable"].as_str().unwrap();
        if supercell::gpu::cuda_probe().is_err() {
            assert!(why.contains("CUDA"), "{why}");
        }
    }
    assert_eq!(s["errors"].as_array().unwrap().len(), 0, "{s}");
}

#[test]
fn headless_run_writes_sane_json() {
    if gpu().is_none() {
        return;
    }
    let ds = dataset();
    let json = out_dir().join("headless.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(bin())
        .args(["play", ds.to_str().unwrap(), "--headless", "--frames", "10"])
        .args(["--path", "both", "--size", "64x48", "--scrub-jumps", "10"])
        .args(["--threads", "2", "--json", json.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    assert!(
        stderr.contains("GB/s"),
        "human summary on stderr:\n{stderr}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "supercell-play-headless/1");
    assert!(v["date"].as_str().unwrap().starts_with("20"));
    assert!(!v["machine"]["adapter"].as_str().unwrap().is_empty());
    assert_eq!(v["dataset"]["frames"], 8);
    assert_eq!(v["size"], serde_json::json!([64, 48]));
    // The slots chosen, said on stderr and in the JSON.
    assert!(stderr.contains("play: slots: "), "{stderr}");
    assert_eq!(v["slot_plan"]["slots"], v["slots"]);
    assert_eq!(v["slot_plan"]["parts"], 1, "{}", v["slot_plan"]);
    assert!(v["slot_plan"]["host_bytes"].as_u64().unwrap() > 0);
    let paths = v["paths"].as_array().unwrap();
    assert_eq!(paths.len(), 2);
    let host = &paths[0];
    assert_eq!(host["info"]["path"], "host");
    assert_eq!(host["info"]["available"], true);
    // The host path names its route to the GPU; lavapipe imports host memory.
    let upload = host["info"]["upload"].as_str().unwrap();
    assert!(
        upload.contains("VK_EXT_external_memory_host") || upload.contains("staging"),
        "{upload}"
    );
    assert_eq!(host["ran"], true, "{host}");
    // GPU memory with its source: on Vulkan one always gives a figure (the wgpu allocator
    // at least), and CUDA only where it exists.
    let mem = &host["memory"];
    let source = mem["gpu_memory_source"]
        .as_str()
        .expect("a GPU memory source");
    assert!(
        [CUDA, VULKAN_BUDGET, WGPU_ALLOCATOR].contains(&source),
        "{mem}"
    );
    assert_eq!(
        source == CUDA,
        supercell::gpu::cuda_probe().is_ok(),
        "{mem}"
    );
    assert!(mem["gpu_used_end"].as_u64().unwrap() > 0, "{mem}");
    let f = &host["figures"];
    assert!(f["frames_rendered"].as_u64().unwrap() >= 10);
    assert!(f["frames_delivered"].as_u64().unwrap() >= 10);
    assert!(f["gbps_mean"].as_f64().unwrap() > 0.0);
    assert!(f["gbps_peak"].as_f64().unwrap() >= 0.0);
    assert!(f["rendered_fps"].as_f64().unwrap() > 0.0);
    assert!(f["bytes_per_frame"].as_f64().unwrap() > 4096.0);
    let (p50, p99) = (
        f["latency_p50_ms"].as_f64().unwrap(),
        f["latency_p99_ms"].as_f64().unwrap(),
    );
    assert!(p50 > 0.0 && p99 >= p50, "{f}");
    let s = &host["scrub"];
    assert_eq!(s["jumps"], 10);
    assert_eq!(s["exact"], true);
    assert!(s["max_ms"].as_f64().unwrap() >= s["p50_ms"].as_f64().unwrap());
    assert!(s["bound_ms"].as_f64().unwrap() > 20.0);
    assert!(host["memory"]["rss_end"].as_u64().unwrap() > 0);
    assert!(host["memory"]["player_gpu_buffers"].as_u64().unwrap() > 0);
    assert!(host["cpu_s"].as_f64().unwrap() >= 0.0);
    let direct = &paths[1];
    assert_eq!(direct["info"]["path"], "direct");
    if supercell::gpu::cuda_probe().is_err() {
        assert_eq!(direct["info"]["available"], false);
        assert!(
            direct["info"]["unavailable_reason"]
                .as_str()
                .unwrap()
                .contains("CUDA")
        );
        assert_eq!(direct["ran"], false);
    }

    // Bad input is refused with a message, not a panic.
    for args in [
        vec!["--frames", "0"],
        vec!["--size", "0x10"],
        vec!["--fps", "-1"],
    ] {
        let out = Command::new(bin())
            .args(["play", ds.to_str().unwrap(), "--headless"])
            .args(&args)
            .output()
            .unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        let e = String::from_utf8_lossy(&out.stderr);
        assert!(e.contains("error"), "{args:?}: {e}");
        assert!(!e.contains("panicked"), "{args:?}: {e}");
    }
}

/// The README's headless command with no size or step flags: on a software adapter
/// (lavapipe in CI) it says once that it uses the interactive settings, renders at the
/// software size and finishes; with the flags given, nothing is chosen for the user.
/// `--screenshot` composes the overlay over the last frame offscreen, as a window would
/// show it: the picture has the asked size and the figures panel's text is in its top left
/// (sharp edges where the sky and the volume behind it are smooth).
#[test]
fn headless_screenshot_composes_the_overlay_offscreen() {
    if gpu().is_none() {
        return;
    }
    let ds = dataset();
    let shot = out_dir().join("headless-overlay.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(bin())
        .args(["play", ds.to_str().unwrap(), "--headless", "--frames", "3"])
        .args(["--scrub-jumps", "1", "--size", "480x270", "--threads", "2"])
        .args(["--screenshot", shot.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    let (w, h, rgb) = read_png(&shot);
    assert_eq!((w, h), (480, 270));
    // Text strokes: neighbouring pixels whose luminance differs by more than 40, in the
    // band where the figures panel's first lines are.
    let luma = |x: u32, y: u32| {
        let i = ((y * w + x) * 3) as usize;
        (u32::from(rgb[i]) * 3 + u32::from(rgb[i + 1]) * 6 + u32::from(rgb[i + 2])) / 10
    };
    let mut edges = 0;
    for y in h / 20..h / 5 {
        for x in w / 30..w * 2 / 5 {
            if luma(x, y).abs_diff(luma(x + 1, y)) > 40 {
                edges += 1;
            }
        }
    }
    assert!(
        edges > 50,
        "only {edges} sharp edges where the figures are: no overlay?"
    );
}

#[test]
fn headless_run_on_a_software_adapter_uses_the_interactive_settings() {
    let Some(g) = gpu() else { return };
    let software = g.caps.software;
    drop(g);
    let ds = dataset();
    let json = out_dir().join("headless-defaults.json");
    let _ = std::fs::remove_file(&json);
    let t0 = Instant::now();
    let out = Command::new(bin())
        .args(["play", ds.to_str().unwrap(), "--headless", "--frames", "10"])
        .args(["--threads", "2", "--json", json.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let wall = t0.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let settings = &v["settings"];
    assert_eq!(settings["software_adapter"], software, "{settings}");
    let notes = stderr.matches("software Vulkan adapter").count();
    if software {
        use supercell::app::software::{
            SOFTWARE_RENDER_SCALE, SOFTWARE_STEP_VOXELS, SOFTWARE_WINDOW, scaled,
        };
        let (w, h) = scaled(SOFTWARE_WINDOW, SOFTWARE_RENDER_SCALE);
        assert_eq!(v["size"], serde_json::json!([w, h]), "{settings}");
        assert_eq!(settings["step_voxels"], f64::from(SOFTWARE_STEP_VOXELS));
        let note = settings["note"].as_str().expect("a note in the JSON");
        assert!(note.contains("--size"), "{note}");
        assert_eq!(notes, 1, "said once:\n{stderr}");
        eprintln!("headless run with the software settings: {wall:?}");
    } else {
        assert_eq!(v["size"], serde_json::json!([1280, 720]));
        assert!(settings["note"].is_null(), "{settings}");
        assert_eq!(notes, 0, "{stderr}");
    }
    let host = &v["paths"][0];
    assert_eq!(host["ran"], true, "{host}");
    assert_eq!(host["scrub"]["jumps"], 12, "{host}");

    // Flags win: the size, step and attributes given are used, and nothing is said.
    let out = Command::new(bin())
        .args(["play", ds.to_str().unwrap(), "--headless", "--frames", "2"])
        .args([
            "--path",
            "host",
            "--scrub-jumps",
            "1",
            "--size",
            "64x48",
            "--step",
            "1",
            "--attributes",
            "cloud,rain,wind_speed",
        ])
        .args(["--threads", "2", "--json", json.to_str().unwrap()])
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["size"], serde_json::json!([64, 48]));
    assert_eq!(v["settings"]["step_voxels"], 1.0);
    assert!(v["settings"]["note"].is_null(), "{}", v["settings"]);
    assert!(!stderr.contains("software Vulkan adapter"), "{stderr}");
}

/// An X display: `DISPLAY`, or an Xvfb started here (killed on drop).
struct Display {
    name: String,
    child: Option<Child>,
}

impl Drop for Display {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn display() -> Option<Display> {
    if let Some(d) = std::env::var_os("DISPLAY").filter(|d| !d.is_empty()) {
        return Some(Display {
            name: d.to_string_lossy().into_owned(),
            child: None,
        });
    }
    let n = 90 + std::process::id() % 500;
    let child = Command::new("Xvfb")
        .args([
            format!(":{n}").as_str(),
            "-screen",
            "0",
            "1280x1024x24",
            "-nolisten",
            "tcp",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let d = Display {
        name: format!(":{n}"),
        child: Some(child),
    };
    let sock = PathBuf::from(format!("/tmp/.X11-unix/X{n}"));
    let end = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        if Instant::now() > end {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(d)
}

fn read_png(p: &Path) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let ch = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let mut rgb = Vec::with_capacity((info.width * info.height * 3) as usize);
    for px in buf[..info.buffer_size()].chunks_exact(ch) {
        rgb.extend_from_slice(&px[..3]);
    }
    (info.width, info.height, rgb)
}

/// Mean absolute difference (0..255) of two RGB images over the pixel box `[x0, x1) × [y0, y1)`.
fn mean_abs_diff(a: &[u8], b: &[u8], w: u32, (x0, y0, x1, y1): (u32, u32, u32, u32)) -> f64 {
    let mut sum = 0u64;
    let mut n = 0u64;
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y * w + x) * 3) as usize;
            for c in 0..3 {
                sum += u64::from(a[i + c].abs_diff(b[i + c]));
                n += 1;
            }
        }
    }
    sum as f64 / n.max(1) as f64
}

#[test]
fn window_overlay_toggle_scrub_and_screenshot() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = display() else {
        skip("no X display (DISPLAY unset and Xvfb not installed)");
        return;
    };
    let ds = dataset();
    let dir = out_dir().join("window");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "wait-frames 4; dump-state {s1}; key D; wait 300ms; dump-state {s2}; key Space; \
         scrub 5; wait-shown 5; wait 300ms; screenshot {shot}; render {img}; dump-state {s3}; \
         key H; wait 100ms; dump-state {s4}; drag 2; wait 200ms; drag 3; wait 200ms; \
         release 1; wait-shown 1; dump-state {s5}; quit",
        s1 = p("s1.json"),
        s2 = p("s2.json"),
        s3 = p("s3.json"),
        s4 = p("s4.json"),
        s5 = p("s5.json"),
        shot = p("shot.png"),
        img = p("img.png"),
    );
    // Software Vulkan on a busy machine takes seconds per full-size frame: render at a
    // quarter of the window and let the window scale it up.
    // The scene's step and attributes (as `render` uses), not the software ones.
    let args = [
        "--window-size",
        "800x600",
        "--render-scale",
        "0.25",
        "--step",
        "1",
        "--attributes",
        "cloud,rain,wind_speed",
    ];
    if !play_window(&disp, &args, &script) {
        return;
    }
    let read = |n: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(n)).unwrap()).unwrap()
    };
    // The overlay shows numbers.
    let s1 = read("s1.json");
    assert!(s1["frames_shown"].as_u64().unwrap() >= 4, "{s1}");
    let lines: Vec<String> = serde_json::from_value(s1["lines"].clone()).unwrap();
    assert!(lines.iter().any(|l| l.contains("GB/s")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("frames/s")), "{lines:?}");
    assert!(s1["host"]["frames_delivered"].as_u64().unwrap() >= 4);
    assert!(s1["host"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(s1["active_path"], "host");
    // The toggle: without CUDA it is refused with the reason, and the host path keeps going.
    let s2 = read("s2.json");
    if supercell::gpu::cuda_probe().is_err() {
        assert_eq!(s2["direct_available"], false);
        assert!(
            s2["direct_unavailable_reason"]
                .as_str()
                .unwrap()
                .contains("CUDA")
        );
        assert_eq!(s2["active_path"], "host");
        assert!(
            s2["message"].as_str().unwrap().contains("unavailable"),
            "{s2}"
        );
        assert!(lines.iter().any(|l| l.contains("direct path unavailable")));
    } else {
        assert_eq!(s2["active_path"], "direct", "{s2}");
    }
    // The scrub landed on exactly frame 5, paused.
    let s3 = read("s3.json");
    assert_eq!(s3["shown_frame"], 5, "{s3}");
    assert_eq!(s3["playing"], false);
    assert!(s3["last_scrub_ms"].as_f64().is_some());
    assert_eq!(s3["help_visible"], false);
    assert_eq!(read("s4.json")["help_visible"], true);
    // Dragging the slider, then releasing it: the exact frame of the release is shown.
    let s5 = read("s5.json");
    assert_eq!(s5["shown_frame"], 1, "{s5}");
    assert_eq!(s5["position"], 1);

    // The screenshot is the window (image + overlay); away from the overlay it matches a
    // headless render of frame 5 at the render size (the window shows it scaled up 4×, so
    // the screenshot is averaged back down over 4 × 4 blocks before comparing).
    let dim =
        |v: &serde_json::Value| (v[0].as_u64().unwrap() as u32, v[1].as_u64().unwrap() as u32);
    let (ww, wh) = dim(&s3["window_size"]);
    let (rw, rh) = dim(&s3["render_size"]);
    let (sw, sh, shot) = read_png(&dir.join("shot.png"));
    assert_eq!((sw, sh), (ww, wh));
    assert_eq!((rw * 4, rh * 4), (ww, wh), "render scale 0.25");
    let rdir = dir.join("render");
    let out = Command::new(bin())
        .args(["render", ds.to_str().unwrap(), "--frame", "5"])
        .args([
            "--size",
            &format!("{rw}x{rh}"),
            "--out",
            rdir.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (_, _, reference) = read_png(&rdir.join("frame_00005.png"));
    let (iw, ih, img) = read_png(&dir.join("img.png"));
    assert_eq!((iw, ih), (rw, rh));
    // The player's own image is the renderer's image of frame 5 (same data, same view).
    let d_img = mean_abs_diff(&img, &reference, rw, (0, 0, rw, rh));
    assert!(
        d_img < 2.0,
        "player image vs headless render: mean abs diff {d_img}"
    );
    let mut small = vec![0u8; (rw * rh * 3) as usize];
    for y in 0..rh {
        for x in 0..rw {
            for c in 0..3 {
                let mut sum = 0u32;
                for dy in 0..4 {
                    for dx in 0..4 {
                        let i = (((y * 4 + dy) * ww + x * 4 + dx) * 3 + c) as usize;
                        sum += u32::from(shot[i]);
                    }
                }
                small[((y * rw + x) * 3 + c) as usize] = (sum / 16) as u8;
            }
        }
    }
    // A box in the middle of the window, clear of the panels (stats top left, down to about
    // 59 % with the refused toggle's message, plots top right, timeline bottom).
    let free = (rw * 30 / 100, rh * 62 / 100, rw * 70 / 100, rh * 78 / 100);
    let d_free = mean_abs_diff(&small, &reference, rw, free);
    assert!(
        d_free < 10.0,
        "screenshot vs headless render away from the overlay: {d_free}"
    );
    // Where the stats panel is, the overlay changed the picture.
    let panel = (4, 4, rw * 30 / 100, rh * 20 / 100);
    let d_panel = mean_abs_diff(&small, &reference, rw, panel);
    assert!(
        d_panel > d_free + 3.0,
        "no overlay in the screenshot? {d_panel} vs {d_free}"
    );
}

/// An Xvfb of this test's own with one screen of `w` × `h` (what a fullscreen kiosk fills),
/// on a display number Xvfb picks; `None` without Xvfb.
fn own_xvfb(w: u32, h: u32) -> Option<Display> {
    use std::io::BufRead;
    let mut child = Command::new("Xvfb")
        .args(["-displayfd", "1", "-screen", "0", &format!("{w}x{h}x24")])
        .args(["-nolisten", "tcp"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let mut n = String::new();
    let read = std::io::BufReader::new(child.stdout.as_mut()?).read_line(&mut n);
    let mut d = Display {
        name: format!(":{}", n.trim()),
        child: Some(child),
    };
    if read.is_err() || n.trim().parse::<u32>().is_err() {
        d.name.clear();
        return None;
    }
    Some(d)
}

/// Runs the player's window on display `disp` with `args` and `script`; false when no window
/// could open here (after saying why).
fn play_window(disp: &Display, args: &[&str], script: &str) -> bool {
    let ds = dataset();
    let mut child = Command::new(bin())
        .args(["play", ds.to_str().unwrap()])
        .args(args)
        .args(["--threads", "2", "--fps", "20"])
        .args(["--script", script])
        .env("DISPLAY", &disp.name)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the window");
    let end = Instant::now() + Duration::from_secs(300);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the window ({args:?}) did not quit within 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !status.success() && stderr.contains("cannot open a window") {
        skip(&format!("no window: {stderr}"));
        return false;
    }
    assert!(status.success(), "play {args:?} failed:\n{stderr}");
    true
}

/// At the default 1280 × 720 and at 960 × 540 (compact figures, plots off at start), and in
/// large print and in kiosk mode at 960 × 540 and at 640 × 360: the overlay's panels (figures, plots, timeline, help) never overlap and stay
/// inside the window, with the help card shown or not, the plots on or off. The rectangles
/// are what each panel painted (its shapes, cut to their clip rectangles), taken both once
/// the layout has settled and in the very frame after a key changed it; the overlay also
/// counts every frame in which two panels painted over each other, and there must be none.
#[test]
fn panels_as_drawn_never_overlap() {
    if gpu().is_none() {
        return;
    }
    dataset();
    // (width, height, mode): "normal", "large" (large print) or "kiosk".
    let cases = [
        (1280, 720, "normal"),
        (960, 540, "normal"),
        (960, 540, "large"),
        (640, 360, "large"),
        (960, 540, "kiosk"),
        (640, 360, "kiosk"),
    ];
    // Settled dumps, each followed by the same layout's dump one frame after the next key.
    let names = ["a", "a1", "b", "b1", "c", "c1", "d"];
    let runs: Vec<_> = cases
        .into_iter()
        .map(|(w, h, mode)| {
            std::thread::spawn(move || -> Option<Vec<(String, serde_json::Value)>> {
                let Some(disp) = own_xvfb(w, h) else {
                    skip("no Xvfb");
                    return None;
                };
                let dir = out_dir().join(format!("panels-{w}x{h}-{mode}"));
                let _ = std::fs::remove_dir_all(&dir);
                std::fs::create_dir_all(&dir).unwrap();
                let p = |n: &str| dir.join(format!("{n}.json")).to_string_lossy().into_owned();
                let settle = "wait-frames 2; wait 700ms";
                let next = "wait-frames 1";
                let script = format!(
                    "{settle}; dump-state {a}; key H; {next}; dump-state {a1}; {settle}; \
                     dump-state {b}; key P; {next}; dump-state {b1}; {settle}; dump-state {c}; \
                     key H; {next}; dump-state {c1}; {settle}; dump-state {d}; quit",
                    a = p("a"),
                    a1 = p("a1"),
                    b = p("b"),
                    b1 = p("b1"),
                    c = p("c"),
                    c1 = p("c1"),
                    d = p("d"),
                );
                let size = format!("{w}x{h}");
                // The image only needs to be there: the kiosk's flying camera renders it
                // on every redraw.
                let mut args = vec!["--window-size", &size, "--render-scale", "0.1"];
                match mode {
                    "kiosk" => args.push("--kiosk"),
                    "large" => args.push("--large-print"),
                    _ => {}
                }
                if !play_window(&disp, &args, &script) {
                    return None;
                }
                Some(
                    names
                        .iter()
                        .map(|n| {
                            let t = std::fs::read_to_string(dir.join(format!("{n}.json"))).unwrap();
                            (
                                format!("{size} {mode} {n}"),
                                serde_json::from_str(&t).unwrap(),
                            )
                        })
                        .collect(),
                )
            })
        })
        .collect();
    for (run, (w, h, mode)) in runs.into_iter().zip(cases) {
        let Some(dumps) = run.join().unwrap() else {
            continue;
        };
        for ((what, s), name) in dumps.iter().zip(names) {
            assert_eq!(s["window_size"], serde_json::json!([w, h]), "{what}");
            assert_eq!(s["large_print"], mode != "normal", "{what}");
            let panels: Vec<(String, [f32; 4])> = serde_json::from_value::<
                std::collections::BTreeMap<String, [f32; 4]>,
            >(s["panels"].clone())
            .unwrap()
            .into_iter()
            .collect();
            let has = |n: &str| panels.iter().any(|(p, _)| p == n);
            let help = matches!(name, "a1" | "b" | "b1" | "c");
            assert_eq!(s["help_visible"], help, "{what}");
            // Narrow windows (the software adapter's 960 × 540) start compact, plots off.
            let compact = mode == "normal" && w < 1100;
            assert_eq!(s["compact"], compact, "{what}");
            if name.len() == 1 {
                // Settled: every panel that should show is there.
                assert_eq!(has("timeline"), mode != "kiosk", "{what}: {panels:?}");
                assert_eq!(has("help"), help, "{what}: {panels:?}");
                assert_eq!(
                    has("stats"),
                    s["help_alone"] == false,
                    "{what}: the figures show unless the help card takes their place: {panels:?}"
                );
                // P is pressed between b and b1.
                let plots_on = matches!(name, "a" | "b") != compact;
                assert_eq!(
                    has("plots"),
                    plots_on && s["plots_no_room"] == false && s["help_alone"] == false,
                    "{what}: {s}"
                );
            }
            // Every frame drawn so far, not only this one.
            assert_eq!(
                s["overlap_frames"], 0,
                "{what}: panels painted over each other in some frame: {}",
                s["first_overlap"]
            );
            for (n, r) in &panels {
                assert!(r[0] < r[2] && r[1] < r[3], "{what}: {n} empty {r:?}");
                let inside = r[0] >= -0.5 && r[1] >= -0.5;
                assert!(
                    inside && r[2] <= w as f32 + 0.5 && r[3] <= h as f32 + 0.5,
                    "{what}: {n} {r:?} outside the window"
                );
            }
            if compact && !help {
                // The compact figures leave the picture free: under a tenth of the window.
                let (_, r) = panels.iter().find(|(n, _)| n == "stats").unwrap();
                let share = (r[2] - r[0]) * (r[3] - r[1]) / (w * h) as f32;
                assert!(
                    share < 0.1,
                    "{what}: the figures cover {share:.2} of the window"
                );
            }
            for (i, (na, a)) in panels.iter().enumerate() {
                for (nb, b) in &panels[i + 1..] {
                    let apart = a[2] <= b[0] || b[2] <= a[0] || a[3] <= b[1] || b[3] <= a[1];
                    assert!(apart, "{what}: {na} {a:?} overlaps {nb} {b:?}");
                }
            }
        }
        // At 960 × 540 and wider there is room for the plots next to the figures.
        if w >= 960 {
            assert_eq!(dumps[0].1["plots_no_room"], false, "{}", dumps[0].1);
        }
    }
}

/// On the H200: slots of several parts (about four per frame) on both paths, with `--verify`:
/// the direct path's slots are several shared CUDA↔Vulkan allocations each, written by cuFile
/// or the staged copies part by part, and each frame renders exactly as the host path (its
/// imported host parts) renders it.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn direct_path_in_slot_parts_renders_as_the_host_path_on_the_gpu() {
    let ds = std::env::var_os("SUPERCELL_TEST_DATASET")
        .map(PathBuf::from)
        .unwrap_or_else(dataset);
    let g = PlayerGpu::open_best().expect("GPU");
    let cfg = PlayerConfig {
        width: 320,
        height: 180,
        path: PathSel::Direct,
        threads: 8,
        verify: true,
        playing: false,
        ..PlayerConfig::default()
    };
    let probe = Player::open(&g, &ds, &cfg).expect("player");
    let len = (0..probe.frame_count())
        .map(|f| probe.frame_bytes(f))
        .max()
        .unwrap();
    let frames = probe.frame_count();
    drop(probe);
    let part = len.div_ceil(4).max(64 << 10).next_power_of_two();
    let mut player = Player::open(
        &g,
        &ds,
        &PlayerConfig {
            part_bytes: Some(part),
            ..cfg
        },
    )
    .expect("player in parts");
    assert!(
        player.direct_unavailable().is_none(),
        "direct path unavailable on the GPU machine: {:?}",
        player.direct_unavailable()
    );
    eprintln!("{}", player.slot_plan().line());
    assert!(player.slot_plan().parts > 1, "{:?}", player.slot_plan());
    for target in [0, frames - 1, frames / 2] {
        let mut images = Vec::new();
        for _ in 0..2 {
            // The frame must come from the active path (after a toggle the other path's frame
            // stays on screen until this one delivers).
            let sel = player.active_path();
            let before = player.figures(sel).frames_rendered;
            player.scrub(target);
            run_until(&mut player, "scrub", |p| {
                !p.scrub_pending()
                    && p.shown_frame() == Some(target)
                    && p.figures(sel).frames_rendered > before
            });
            images.push((player.active_path(), player.read_image().expect("image")));
            player.toggle_path().expect("toggle");
        }
        assert!(
            images[0].1.rgba8 == images[1].1.rgba8,
            "frame {target}: {:?} and {:?} render differently",
            images[0].0,
            images[1].0
        );
    }
    assert_eq!(player.last_error(), None);
    player.drain(Duration::from_secs(10));
}

/// On the H200: both paths, toggled during playback, each delivering frames, no errors, no
/// growth of resident memory across toggles.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn toggle_during_playback_on_the_gpu() {
    let ds = std::env::var_os("SUPERCELL_TEST_DATASET")
        .map(PathBuf::from)
        .unwrap_or_else(dataset);
    // The device that shares memory with CUDA: the direct path's slots are its buffers.
    let g = PlayerGpu::open_best().expect("GPU");
    let mut player = Player::open(
        &g,
        &ds,
        &PlayerConfig {
            width: 640,
            height: 360,
            path: PathSel::Direct,
            threads: 8,
            ..PlayerConfig::default()
        },
    )
    .expect("player");
    assert!(
        player.direct_unavailable().is_none(),
        "direct path unavailable on the GPU machine: {:?}",
        player.direct_unavailable()
    );
    let rss0 = supercell::probe::rss_bytes();
    for round in 0..6 {
        let sel = player.active_path();
        let before = player.figures(sel).frames_rendered;
        run_until(&mut player, "frames on this path", |p| {
            p.figures(sel).frames_rendered >= before + 5
        });
        eprintln!("round {round}: {} {:?}", sel.name(), player.figures(sel));
        player.toggle_path().expect("toggle");
    }
    assert_eq!(player.last_error(), None);
    for sel in [PathSel::Direct, PathSel::Host] {
        let f = player.figures(sel);
        assert!(
            f.frames_delivered >= 15 && f.gbps_mean > 0.0,
            "{sel:?}: {f:?}"
        );
    }
    let rss1 = supercell::probe::rss_bytes();
    assert!(
        rss1 < rss0 + (512 << 20),
        "resident memory grew from {rss0} to {rss1} over 6 toggles"
    );
    player.drain(Duration::from_secs(10));
    drop(player);
}

#[test]
fn start_frame_past_the_end_is_refused() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let mut cfg = small_config();
    cfg.start_frame = 8;
    let e = match Player::new(&g.device, &g.queue, &ds, &cfg) {
        Ok(_) => panic!("start frame 8 of an 8-frame dataset was accepted"),
        Err(e) => e.to_string(),
    };
    assert!(e.contains("start frame 8") && e.contains("8 frames"), "{e}");
    cfg.start_frame = 7;
    Player::new(&g.device, &g.queue, &ds, &cfg).expect("the last frame is a valid start");
}
