//! The player's window under X (Xvfb started here when there is no `DISPLAY`), driven by a
//! script: overlay numbers, the toggle, a scrub and a screenshot compared with a headless
//! render of the same frame away from the overlay; and the overlay's panels as painted, at
//! several window sizes and modes, never overlapping.
//!
//! Without a GPU adapter or Xvfb the tests print why and pass, unless
//! `SUPERCELL_REQUIRE_GPU` is set (CI sets it).

use std::process::Command;
use std::time::Duration;

mod play_support;
mod storm_support;
use play_support::window::{
    AS_RENDERED, fresh_dir, on_display, presented_is_a_render_of, read_state, run_window, size_in,
};
use play_support::{
    Display, bin, dataset, display, gpu, mean_abs_diff_in, out_dir, own_xvfb, read_png, skip,
};

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
    let dir = fresh_dir("window");
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "wait-frames 4; dump-state {s1}; key D; wait 300ms; dump-state {s2}; key Space; \
         scrub 5; wait-shown 5; wait 300ms; screenshot {shot}; render {img}; dump-state {s3}; \
         key a; key a; wait 1500ms; screenshot {shot2}; key H; wait 100ms; dump-state {s4}; drag 2; wait 200ms; drag 3; wait 200ms; \
         release 1; wait-shown 1; dump-state {s5}; quit",
        s1 = p("s1.json"),
        s2 = p("s2.json"),
        s3 = p("s3.json"),
        s4 = p("s4.json"),
        s5 = p("s5.json"),
        shot = p("shot.png"),
        shot2 = p("shot2.png"),
        img = p("img.png"),
    );
    let args = [&["--window-size", "800x600"][..], AS_RENDERED].concat();
    if !play_window(&disp, &args, &script) {
        return;
    }
    let read = |n: &str| read_state(&dir, n);
    // The overlay shows numbers.
    let s1 = read("s1.json");
    assert!(s1["frames_shown"].as_u64().unwrap() >= 4, "{s1}");
    let lines: Vec<String> = serde_json::from_value(s1["lines"].clone()).unwrap();
    assert!(lines.iter().any(|l| l.contains("GB/s")), "{lines:?}");
    assert!(lines.iter().any(|l| l.contains("frames/s")), "{lines:?}");
    assert!(s1["host"]["frames_delivered"].as_u64().unwrap() >= 4);
    assert!(s1["host"]["bytes"].as_u64().unwrap() > 0);
    assert_eq!(s1["active_path"], "host");
    one_gpu_through_the_coordinator(&s1, &lines);
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
    let (ww, wh) = size_in(&s3, "window_size");
    let (rw, rh) = size_in(&s3, "render_size");
    let (sw, sh, shot) = read_png(&dir.join("shot.png"));
    assert_eq!((sw, sh), (ww, wh));
    assert_eq!((rw * 4, rh * 4), (ww, wh), "render scale 0.25");
    // The player's own image is the renderer's image of frame 5 (same data, same view).
    let (_, reference) = presented_is_a_render_of(&ds, &dir, &s3, 5);
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
    // A box in the middle of the window, clear of the panels: below the figures (top left,
    // with the refused toggle's message) and above the legend (over the timeline), as the
    // panels were drawn (window pixels, 4 to a render pixel).
    let panels = &s3["panels"];
    let below_stats = (panels["stats"][3].as_f64().unwrap() / 4.0).ceil() as u32 + 1;
    let above_legend = (panels["legend"][1].as_f64().unwrap() / 4.0).floor() as u32 - 1;
    assert!(
        above_legend >= below_stats + 10,
        "little picture left between the panels: {panels}"
    );
    let free = (rw * 30 / 100, below_stats, rw * 70 / 100, above_legend);
    let d_free = mean_abs_diff_in(&small, &reference, rw, free);
    assert!(
        d_free < 10.0,
        "screenshot vs headless render away from the overlay: {d_free}"
    );
    // Where the stats panel is, the overlay changed the picture.
    let panel = (4, 4, rw * 30 / 100, rh * 20 / 100);
    let d_panel = mean_abs_diff_in(&small, &reference, rw, panel);
    assert!(
        d_panel > d_free + 3.0,
        "no overlay in the screenshot? {d_panel} vs {d_free}"
    );
    // Paused, the camera turned: the window shows frame 5 drawn again in the new view (one
    // GPU's player draws it again by itself; the window must take that picture).
    let (_, _, shot2) = read_png(&dir.join("shot2.png"));
    let free_window = (free.0 * 4, free.1 * 4, free.2 * 4, free.3 * 4);
    let turned = mean_abs_diff_in(&shot2, &shot, ww, free_window);
    assert!(
        turned > 1.0,
        "the window's picture did not follow the camera while paused: {turned}"
    );
}

/// Runs the player's window on display `disp` with `args` and `script`; false when no window
/// could open here (after saying why).
/// One GPU plays through the one coordinator (as several do): the timeline's state names
/// one GPU's row and the order it presented, and the figures panel is one GPU's, as it
/// was before: the active path's title and rates, and both paths side by side in the table
/// (no per-GPU rows).
fn one_gpu_through_the_coordinator(s1: &serde_json::Value, lines: &[String]) {
    let rows = s1["gpus"]["rows"].as_array().expect("the timeline's rows");
    assert_eq!(rows.len(), 1, "{s1}");
    assert_eq!(rows[0]["gpu"], 0);
    assert!(rows[0]["frames_shown"].as_u64().unwrap() >= 4, "{s1}");
    let order: Vec<u64> = s1["gpus"]["presented"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p[0].as_u64().unwrap())
        .collect();
    assert!(order.len() >= 4, "{order:?}");
    for w in order.windows(2) {
        assert_eq!(w[1], (w[0] + 1) % 8, "out of order: {order:?}");
    }
    assert!(lines[0].starts_with("HOST path: "), "{lines:?}");
    assert!(!lines.iter().any(|l| l.starts_with("GPU0")), "{lines:?}");
    let table: Vec<Vec<String>> = serde_json::from_value(s1["table"].clone()).unwrap();
    assert_eq!(table.len(), 4, "{table:?}");
    assert_eq!(table[0][1], "direct avg");
    assert_eq!(table[1][0], "frames/s rendered");
}

fn play_window(disp: &Display, args: &[&str], script: &str) -> bool {
    play_window_stderr(disp, args, script).is_some()
}

/// [`play_window`], returning what the window said on stderr (`None`: no window here).
fn play_window_stderr(disp: &Display, args: &[&str], script: &str) -> Option<String> {
    let ds = dataset();
    let mut cmd = Command::new(bin());
    cmd.args(["play", ds.to_str().unwrap()])
        .args(args)
        .args(["--threads", "2", "--fps", "20"])
        .args(["--script", script]);
    run_window(on_display(&mut cmd, &disp.name), Duration::from_secs(300))
}

/// Runs the kiosk (and `extra` flags) on its own Xvfb of `size` under the name `name`:
/// waits as `wait` says (script commands), then dumps the overlay's state. The state and
/// stderr, or `None` where there is no adapter, Xvfb or window here.
fn kiosk_state(
    size: (u32, u32),
    name: &str,
    extra: &[&str],
    wait: &str,
) -> Option<(serde_json::Value, String)> {
    gpu()?;
    let Some(disp) = own_xvfb(size.0, size.1) else {
        skip("no Xvfb");
        return None;
    };
    let dir = out_dir().join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let state = dir.join("state.json");
    let _ = std::fs::remove_file(&state);
    let script = format!("{wait}; dump-state {}; quit", state.display());
    let mut args = vec!["--kiosk", "--render-scale", "0.1"];
    args.extend_from_slice(extra);
    let stderr = play_window_stderr(&disp, &args, &script)?;
    Some((read_state(&dir, "state.json"), stderr))
}

/// The kiosk flipping direct/host every 300 ms where the direct path cannot run says why
/// once, at the start, not again at every flip.
#[test]
fn kiosk_says_once_why_the_direct_path_cannot_run() {
    let every = ["--toggle-every", "300ms"];
    let Some((s, _)) = kiosk_state((960, 540), "kiosk-direct-once", &every, "wait 4s") else {
        return;
    };
    let message = s["message"].as_str().unwrap_or_default();
    if !message.starts_with("direct path unavailable") {
        skip(&format!("the direct path runs here: {message}"));
        return;
    }
    // Said when the kiosk started, four seconds and a dozen flips ago.
    let age = s["message_age_s"].as_f64().unwrap();
    assert!(age > 3.0, "said again {age:.2} s ago: {s}");
}

/// `--kiosk` on a bare X server (Xvfb, where no window manager honours fullscreen): the
/// window does not stay at its starting size unnoticed; it is sized to the monitor, and
/// stderr says why, once.
#[test]
fn kiosk_without_a_window_manager_fills_the_monitor_and_says_so() {
    let wait = "wait 3s; wait-frames 1; wait 500ms";
    let Some((s, stderr)) = kiosk_state((1600, 900), "kiosk-no-wm", &[], wait) else {
        return;
    };
    let warnings = stderr
        .matches("play: warning: fullscreen was asked for")
        .count();
    assert_eq!(warnings, 1, "one warning:\n{stderr}");
    assert_eq!(
        s["window_size"],
        serde_json::json!([1600, 900]),
        "{stderr}\n{s}"
    );
}

/// The kiosk on the storm scene (none named: the built-in one) at 1920 × 1080: the figures
/// and the plots sit in corners of the screen, where the layout clear of the storm puts
/// them, in every frame (not swinging between two zooms, each frame's panels laid out in
/// the other's rooms).
#[test]
fn kiosk_panels_sit_in_the_corners_on_the_storm_scene() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = own_xvfb(1920, 1080) else {
        skip("no Xvfb");
        return;
    };
    let cache = tempfile::tempdir().unwrap();
    let builtin = cache.path().join(supercell::scene::DEFAULT_DATASET_NAME);
    std::os::unix::fs::symlink(dataset(), builtin).unwrap();
    let dumps: Vec<_> = (0..3)
        .map(|i| cache.path().join(format!("{i}.json")))
        .collect();
    let script = format!(
        "wait 3s; wait-frames 1; dump-state {}; wait-frames 1; dump-state {}; wait 1s; \
         dump-state {}; quit",
        dumps[0].display(),
        dumps[1].display(),
        dumps[2].display()
    );
    let out = Command::new(bin())
        .args(["play", "--kiosk", "--render-scale", "0.1", "--threads", "2"])
        .args(["--script", &script])
        .env("SUPERCELL_CACHE", cache.path())
        .env("DISPLAY", &disp.name)
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("run the kiosk");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("cannot open a window") {
        skip(&format!("no window: {stderr}"));
        return;
    }
    assert!(out.status.success(), "kiosk failed:\n{stderr}");
    for d in &dumps {
        let s: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(d).unwrap()).unwrap();
        let panels: std::collections::BTreeMap<String, [f32; 4]> =
            serde_json::from_value(s["panels"].clone()).unwrap();
        assert!(panels.contains_key("stats"), "{s}");
        for (name, r) in &panels {
            // Near a side and the top or the bottom: within the gap (12 points, 36 pixels at
            // the largest zoom) and what the plots' panel, aligned to the bottom of its room,
            // draws short of the room's height.
            let near = |a: f32, edge: f32| (a - edge).abs() <= 64.0;
            let side = near(r[0], 0.0) || near(r[2], 1920.0);
            let end = near(r[1], 0.0) || near(r[3], 1080.0);
            assert!(side && end, "{name} {r:?} is in no corner: {s}");
        }
    }
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
                    "{what}: the figures cover {share:.2} of the window: {r:?}, state {s}"
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

/// M in the window switches path tracing on (the overlay names the render mode, the samples
/// per pixel and their rate) and off again.
#[test]
fn m_key_switches_path_tracing_in_the_window() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = own_xvfb(800, 600) else {
        skip("no Xvfb");
        return;
    };
    let dir = fresh_dir("window-path");
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "wait-frames 2; key Space; key M; wait 1s; dump-state {on}; key M; wait 300ms; \
         dump-state {off}; quit",
        on = p("on.json"),
        off = p("off.json"),
    );
    let args = ["--window-size", "800x600", "--render-scale", "0.125"];
    if !play_window(&disp, &args, &script) {
        return;
    }
    let read = |n: &str| read_state(&dir, n);
    let on = read("on.json");
    assert_eq!(on["render_mode"], "path", "{on}");
    assert!(on["path_samples"].as_u64().unwrap() >= 1, "{on}");
    let lines: Vec<String> = serde_json::from_value(on["lines"].clone()).unwrap();
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("render: path") && l.contains(" spp")),
        "{lines:?}"
    );
    let off = read("off.json");
    assert_eq!(off["render_mode"], "shaded", "{off}");
    assert!(off["path_samples"].is_null(), "{off}");
}

/// The transfer panel in the window: E opens it, a colormap is chosen (as the panel's list
/// does, by script), the look box names the edit, and saving (the script's `save-scene`,
/// then Shift+S, which writes to the same file again) writes a scene that loads with it.
#[test]
fn transfer_panel_edit_shows_in_the_look_box_and_saves() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = own_xvfb(800, 600) else {
        skip("no Xvfb");
        return;
    };
    let dir = fresh_dir("window-looks");
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "wait-frames 1; key Space; key e; wait 200ms; colormap 1 turbo; wait 300ms; \
         dump-state {edited}; save-scene {scene}; key e; colormap 2 magma; key S; \
         wait 100ms; dump-state {saved}; quit",
        edited = p("edited.json"),
        scene = p("saved.toml"),
        saved = p("saved.json"),
    );
    let args = ["--window-size", "800x600", "--render-scale", "0.125"];
    if !play_window(&disp, &args, &script) {
        return;
    }
    let read = |n: &str| read_state(&dir, n);
    let edited = read("edited.json");
    assert_eq!(edited["looks"]["panel"], 0, "{}", edited["looks"]);
    assert_eq!(
        edited["looks"]["labels"][0], "edited: turbo",
        "{}",
        edited["looks"]
    );
    assert!(
        edited["looks"]["labels"][1]
            .as_str()
            .is_some_and(|l| l.starts_with("scene: ")),
        "{}",
        edited["looks"]
    );
    let saved = read("saved.json");
    assert!(
        saved["looks"]["panel"].is_null(),
        "E closed it: {}",
        saved["looks"]
    );
    let message = saved["message"].as_str().unwrap_or_default();
    assert!(message.contains("saved.toml"), "{message}");
    let scene = supercell::scene::Scene::load(&dir.join("saved.toml")).expect("saved scene");
    let colormap = |i: usize| match &scene.attributes[i].colormap {
        Some(supercell::render::Colormap::Named(n)) => n.clone(),
        other => panic!("attribute {i}: {other:?}"),
    };
    assert_eq!(colormap(0), "turbo");
    assert_eq!(
        colormap(1),
        "magma",
        "Shift+S wrote the later edit to the same file"
    );
    assert!(scene.camera.target.is_some() && scene.camera.distance.is_some());
}
