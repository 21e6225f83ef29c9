//! The player: the core on a small generated storm (frames arrive, scrubs land exactly, the
//! direct toggle says why it cannot run without CUDA), the headless run's JSON, and the
//! window under X (Xvfb started here when there is no `DISPLAY`) driven by a script: overlay
//! numbers, the toggle, a scrub, and a screenshot compared with a headless render of the same
//! frame away from the overlay.
//!
//! Without a GPU adapter (or a display, for the window test) the tests print why and pass,
//! unless `SUPERCELL_REQUIRE_GPU` is set (CI sets it). The `#[ignore]`d test needs the H200
//! (`scripts/gpu-tests.sh` runs it with `SUPERCELL_TEST_DATASET`).

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::{bin, dataset, gpu, out_dir, read_png, small_config};

use supercell::app::gpumem::{CUDA, VULKAN_BUDGET, WGPU_ALLOCATOR};
use supercell::app::{HostCopy, PathSel, Player, PlayerConfig, PlayerGpu, gpu_memory};
use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::render::{Renderer, upload_slot};
use supercell::scene::{DEFAULT_DATASET_NAME, Scene};

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
    for host_copy in [HostCopy::Auto, HostCopy::Ring] {
        if host_copy == HostCopy::Ring && !can_import(&g) {
            continue;
        }
        scrub_during_playback_aborts_the_read_ahead_with(&g, host_copy);
    }
}

/// Whether the device can import host memory (the ring route needs it).
fn can_import(g: &PlayerGpu) -> bool {
    match supercell::gpu::HostImporter::new(&g.device) {
        Ok(_) => true,
        Err(why) => {
            eprintln!("skipping the ring route: {why}");
            false
        }
    }
}

fn scrub_during_playback_aborts_the_read_ahead_with(g: &PlayerGpu, host_copy: HostCopy) {
    let ds = dataset();
    // One thread, 4 KiB reads, one at a time: the read-ahead is still in flight right
    // after it is issued.
    let cfg = PlayerConfig {
        threads: 1,
        queue_depth: 1,
        io_size: 4096,
        host_copy,
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
    for host_copy in [HostCopy::Auto, HostCopy::Staging, HostCopy::Ring] {
        if host_copy == HostCopy::Ring && !can_import(&g) {
            continue;
        }
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
    } else if host_copy == HostCopy::Ring {
        assert!(route.contains("ring of imported host buffers"), "{route}");
        let mode = player.path_report(PathSel::Host).mode.unwrap_or_default();
        assert!(mode.contains("bounce buffers"), "{mode}");
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
    for host_copy in [HostCopy::Auto, HostCopy::Staging, HostCopy::Ring] {
        if host_copy == HostCopy::Ring && !can_import(&g) {
            continue;
        }
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
        .args(["play", ds.to_str().unwrap(), "--headless", "--soak", "5s"])
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
    assert!((5.0..40.0).contains(&d), "{d}");
    let samples = s["samples"].as_array().unwrap();
    // A sample every 500 ms over 5 s is 11; a loaded machine (lavapipe renders on the same
    // cores) delays ticks, and the first render compiles the pipelines (seconds there under
    // load: a 3 s soak once got too few samples beside a build), so fewer are certain, but
    // never just one or two.
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

/// A soak long enough for its verdict (a minute settled after warm-up) holds flat: the
/// resident set within 1 %, no descriptor or thread more. On Mesa 22.3's lavapipe this
/// failed while the march's parameters were a uniform buffer (about 3.5 MB kept a frame:
/// lavapipe compiled the shader again for every new value its branches read).
#[test]
fn headless_soak_holds_memory_flat_for_a_minute() {
    if gpu().is_none() {
        return;
    }
    let ds = dataset();
    let json = out_dir().join("soak-flat.json");
    let _ = std::fs::remove_file(&json);
    let out = Command::new(bin())
        .args(["play", ds.to_str().unwrap(), "--headless", "--soak", "100s"])
        .args([
            "--sample-every",
            "1s",
            "--size",
            "32x24",
            "--threads",
            "2",
            "--json",
        ])
        .arg(&json)
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let verdict = &v["soak"]["verdict"];
    assert!(out.status.success(), "play failed:\n{stderr}\n{verdict}");
    assert!(stderr.contains("verdict: flat"), "{stderr}");
    assert_eq!(verdict["flat"], true, "{verdict}");
    assert!(verdict["settled_s"].as_f64().unwrap() >= 60.0, "{verdict}");
    assert!(
        verdict["rss_drift"].as_f64().unwrap().abs() <= 0.01,
        "{verdict}"
    );
    assert!(
        v["soak"]["frames"].as_u64().unwrap() >= 100,
        "{}",
        v["soak"]["frames"]
    );
}

/// `play --headless` without a scene plays the storm scene compiled into the binary (its
/// attributes, the funnel's grid among them) on the built-in dataset, not the dataset's
/// default look.
#[test]
fn headless_play_without_a_scene_plays_the_built_in_storm_scene() {
    if gpu().is_none() {
        return;
    }
    let cache = tempfile::tempdir().unwrap();
    // The built-in dataset's place holds the small storm (a link: nothing is copied).
    std::os::unix::fs::symlink(dataset(), cache.path().join(DEFAULT_DATASET_NAME)).unwrap();
    let json = cache.path().join("built-in.json");
    let out = Command::new(bin())
        .args(["play", "--headless", "--frames", "2", "--path", "host"])
        .args(["--size", "32x18", "--scrub-jumps", "0", "--threads", "2"])
        .args(["--json", json.to_str().unwrap()])
        .env("SUPERCELL_CACHE", cache.path())
        .output()
        .expect("run supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "play failed:\n{stderr}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["scene"], "built-in scenes/storm.toml", "{v:#}");
    let storm = storm_support::storm_scene_attributes();
    assert_eq!(
        v["dataset"]["attributes"],
        serde_json::json!(storm),
        "{v:#}"
    );
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
    assert_eq!(v["schema"], "supercell-play-headless/2");
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
    // The scene marches: the render mode is said, without path-tracing figures.
    assert_eq!(host["render"]["mode"], "shaded", "{}", host["render"]);
    assert!(host["render"]["path_samples"].is_null());
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
    // The peak leaves out the ring filling (reported apart): null until a window after it.
    assert!(
        f["gbps_peak"].is_null() || f["gbps_peak"].as_f64().unwrap() >= 0.0,
        "{f}"
    );
    assert!(f["warm_up_frames"].as_u64().unwrap() >= 1, "{f}");
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

/// The host path's routes and pages on the command line, as the GPU runs compare them:
/// `--host-copy ring` plays (exact scrubs) and its JSON names the ring and its huge pages;
/// the default route with `SUPERCELL_HOST_HUGEPAGES=0` notes its 4 KiB pages; a bad value
/// of the knob is refused naming it.
#[test]
fn headless_host_routes_and_pages_on_the_command_line() {
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let run = |copy: &str, pages: &str| {
        let json = out_dir().join(format!("headless-host-{copy}-{pages}.json"));
        let _ = std::fs::remove_file(&json);
        let out = Command::new(bin())
            .env("SUPERCELL_HOST_HUGEPAGES", pages)
            .args(["play", ds.to_str().unwrap(), "--headless", "--frames", "6"])
            .args(["--path", "host", "--host-copy", copy, "--size", "64x48"])
            .args(["--scrub-jumps", "4", "--threads", "2"])
            .args(["--json", json.to_str().unwrap()])
            .output()
            .expect("run supercell play");
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        let v: Option<serde_json::Value> = out
            .status
            .success()
            .then(|| serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap());
        (v, stderr)
    };
    if can_import(&g) {
        let (v, stderr) = run("ring", "1");
        let v = v.unwrap_or_else(|| panic!("ring route failed:\n{stderr}"));
        let host = &v["paths"][0];
        let upload = host["info"]["upload"].as_str().unwrap();
        assert!(upload.contains("ring of imported host buffers"), "{upload}");
        assert!(upload.contains("SUPERCELL_HOST_HUGEPAGES=1"), "{upload}");
        assert!(host["figures"]["frames_rendered"].as_u64().unwrap() >= 6);
        assert_eq!(host["scrub"]["exact"], true, "{}", host["scrub"]);
    }
    let (v, stderr) = run("auto", "0");
    let v = v.unwrap_or_else(|| panic!("default route failed:\n{stderr}"));
    let notes = v["paths"][0]["info"]["notes"].to_string();
    assert!(
        notes.contains("4 KiB pages (SUPERCELL_HOST_HUGEPAGES=0"),
        "{notes}"
    );
    let (v, stderr) = run("auto", "maybe");
    assert!(v.is_none(), "a bad SUPERCELL_HOST_HUGEPAGES was accepted");
    assert!(
        stderr.contains("SUPERCELL_HOST_HUGEPAGES") && !stderr.contains("panicked"),
        "{stderr}"
    );
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
