//! The player's legend, clean view and recorder: the legend's bars in the window's
//! screenshot and in the headless picture (`play --headless --screenshot`) show, value by
//! value, the colours of the transfer-function table the renderer uploads; U hides every
//! panel but the legend and shows them again; Shift+R (and the script's `record`) writes
//! what the window shows to a movie that decodes to as many frames, of the window's size, as
//! the recorder says it wrote; without ffmpeg it says so and the window goes on.
//!
//! Without a GPU adapter or Xvfb the tests print why and pass, unless
//! `SUPERCELL_REQUIRE_GPU` is set (CI sets it); without ffmpeg the movie's checks are
//! skipped the same way unless `SUPERCELL_REQUIRE_CROSSCHECK` is set.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::{Display, bin, dataset, gpu, out_dir, own_xvfb, read_png, skip, small_config};
use supercell::app::legend::legend_colour;
use supercell::app::overlay::LegendBar;
use supercell::render::{TF_SIZE, View};

/// The table row (as uploaded) of the slot showing attribute `name` in `view`.
fn table_of(view: &View, slots: &[Option<usize>], names: &[String], name: &str) -> Vec<[f32; 4]> {
    let slot = slots
        .iter()
        .position(|s| s.is_some_and(|a| names[a] == name))
        .unwrap_or_else(|| panic!("no slot shows {name}"));
    view.tf_table()[slot * TF_SIZE..(slot + 1) * TF_SIZE].to_vec()
}

/// Checks a bar drawn in `rgb` (`w` pixels wide) against `table`: at 41 values across the
/// range, the pixel of the value's column is the table's colour there (within egui's ±1
/// dithering).
fn check_bar(rgb: &[u8], w: u32, bar: &LegendBar, table: &[[f32; 4]], what: &str) {
    let [x0, y0, x1, y1] = bar.colour_px;
    assert!(x1 > x0 + 50 && y1 > y0, "{what}: {bar:?}");
    let n = x1 - x0;
    let y = (y0 + y1) / 2;
    let [lo, hi] = bar.range;
    for k in 0..=40 {
        let v = lo + (hi - lo) * k as f32 / 40.0;
        let i = (((v - lo) / (hi - lo) * n as f32) as u32).min(n - 1);
        let x = x0 + i;
        let p = ((y * w + x) * 3) as usize;
        let got = &rgb[p..p + 3];
        let want = legend_colour(table, (i as f32 + 0.5) / n as f32);
        for c in 0..3 {
            assert!(
                (i32::from(got[c]) - i32::from(want[c])).abs() <= 1,
                "{what}: {} at {v}: pixel {got:?} at ({x}, {y}), table {want:?}",
                bar.name
            );
        }
    }
}

/// Runs the window on `disp` with `args`, `script` and the environment `env`; its stderr,
/// or `None` where no window opens here.
fn play_window(
    disp: &Display,
    args: &[&str],
    script: &str,
    env: &[(&str, &str)],
) -> Option<String> {
    let mut cmd = Command::new(bin());
    cmd.args(["play", dataset().to_str().unwrap()])
        .args(args)
        .args(["--threads", "2", "--fps", "20"])
        .args(["--script", script])
        .env("DISPLAY", &disp.name)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("start the window");
    let end = Instant::now() + Duration::from_secs(300);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            panic!("the window ({args:?}) did not quit within 300 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if !out.status.success() && stderr.contains("cannot open a window") {
        skip(&format!("no window: {stderr}"));
        return None;
    }
    assert!(out.status.success(), "play {args:?} failed:\n{stderr}");
    Some(stderr)
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn fresh_dir(name: &str) -> PathBuf {
    let dir = out_dir().join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn panel_names(s: &serde_json::Value) -> Vec<String> {
    s["panels"].as_object().unwrap().keys().cloned().collect()
}

#[test]
fn window_legend_shows_the_transfer_functions_colours_and_u_hides_all_but_it() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = own_xvfb(800, 600) else {
        skip("no Xvfb");
        return;
    };
    let ds = dataset();
    let dir = fresh_dir("legend-window");
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "key Space; scrub 3; wait-shown 3; wait 500ms; screenshot {a}; dump-state {sa}; key U; \
         wait 500ms; screenshot {b}; dump-state {sb}; key U; wait 500ms; dump-state {sc}; quit",
        a = p("a.png"),
        sa = p("a.json"),
        b = p("b.png"),
        sb = p("b.json"),
        sc = p("c.json"),
    );
    // The scene's own attributes and looks: the test lays out the same scene below.
    let args = ["--window-size", "800x600", "--render-scale", "0.1"];
    if play_window(&disp, &args, &script, &[]).is_none() {
        return;
    }
    // The tables the window uploads: the scene's looks (no preset was picked).
    let scene = supercell::scene::Scene::load(&ds).unwrap();
    let ls = scene.open(800.0 / 600.0, None).unwrap();
    let manifest = ls.dataset.manifest();
    let names: Vec<String> = manifest.attributes.iter().map(|a| a.name.clone()).collect();
    for (shot, state) in [("a.png", "a.json"), ("b.png", "b.json")] {
        let s = read_json(&dir.join(state));
        let (w, _, rgb) = read_png(&dir.join(shot));
        let legend: supercell::app::overlay::LegendShown =
            serde_json::from_value(s["legend"].clone()).unwrap();
        assert_eq!(
            legend.time_label,
            supercell::app::legend::time_label(manifest, 3),
            "{state}"
        );
        assert!(!legend.bars.is_empty(), "{state}: {s}");
        for bar in &legend.bars {
            let attr = manifest
                .attributes
                .iter()
                .find(|a| a.name == bar.name)
                .unwrap();
            assert_eq!(bar.units, attr.units, "{state}");
            assert!(bar.look.contains("scene: "), "{state}: {bar:?}");
            let row = table_of(&ls.view, &ls.slots, &names, &bar.name);
            check_bar(&rgb, w, bar, &row, state);
        }
    }
    // U: the legend alone; U again: every panel back.
    let a = read_json(&dir.join("a.json"));
    let b = read_json(&dir.join("b.json"));
    let c = read_json(&dir.join("c.json"));
    assert_eq!(a["clean_view"], false);
    for n in ["legend", "timeline", "stats"] {
        assert!(panel_names(&a).iter().any(|p| p == n), "{n}: {a}");
    }
    assert_eq!(b["clean_view"], true);
    assert_eq!(panel_names(&b), ["legend"], "{b}");
    assert_eq!(c["clean_view"], false);
    assert_eq!(panel_names(&c), panel_names(&a), "{c}");
    assert_eq!(a["overlap_frames"], 0, "{}", a["first_overlap"]);
}

/// The picture `play --headless --screenshot` writes (composed offscreen) carries the
/// legend too, its bars the uploaded tables' colours.
#[test]
fn headless_picture_carries_the_legend() {
    use supercell::app::Player;
    use supercell::app::overlay::{UiState, presets_for};
    let Some(g) = gpu() else { return };
    let ds = dataset();
    let mut player = Player::open(&g, &ds, &small_config()).expect("player");
    let end = Instant::now() + Duration::from_secs(120);
    while player.shown_frame().is_none() {
        assert!(Instant::now() < end, "no frame shown in 120 s");
        player.tick().expect("tick");
        std::thread::sleep(Duration::from_millis(5));
    }
    let dir = fresh_dir("legend-headless");
    let size = (960, 540);
    let mut ui = UiState::new(size);
    ui.presets = presets_for(&player);
    let shot = dir.join("shot.png");
    supercell::app::offscreen::write_overlay_png(&player, &mut ui, size, &shot).unwrap();
    let (w, h, rgb) = read_png(&shot);
    assert_eq!((w, h), size);
    assert!(!ui.legend.bars.is_empty(), "{:?}", ui.legend);
    let names: Vec<String> = player
        .manifest()
        .attributes
        .iter()
        .map(|a| a.name.clone())
        .collect();
    for bar in &ui.legend.bars {
        let row = table_of(player.view(), player.attribute_slots(), &names, &bar.name);
        check_bar(&rgb, w, bar, &row, "headless");
    }
    player.drain(Duration::from_secs(10));
}

fn tool(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// ffprobe's frame count and size of a movie.
fn probe(ffprobe: &Path, movie: &Path) -> (u64, u32, u32) {
    let o = Command::new(ffprobe)
        .args(["-v", "error", "-select_streams", "v:0", "-count_frames"])
        .args(["-show_entries", "stream=width,height,nb_read_frames"])
        .args(["-of", "default=noprint_wrappers=1"])
        .arg(movie)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout).into_owned();
    let field = |k: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("ffprobe {}: no {k} in {text}", movie.display()))
            .parse()
            .unwrap()
    };
    (
        field("nb_read_frames"),
        field("width") as u32,
        field("height") as u32,
    )
}

#[test]
fn shift_r_records_what_the_window_shows_to_a_movie() {
    if gpu().is_none() {
        return;
    }
    let (Some(_), Some(ffprobe)) = (tool("ffmpeg"), tool("ffprobe")) else {
        assert!(
            std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_none(),
            "ffmpeg and ffprobe are required (apt install ffmpeg)"
        );
        eprintln!("SKIPPED: no ffmpeg/ffprobe on PATH (apt install ffmpeg)");
        return;
    };
    // An odd width: the movie is padded to even sides.
    let Some(disp) = own_xvfb(401, 300) else {
        skip("no Xvfb");
        return;
    };
    let dir = fresh_dir("legend-record");
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let script = format!(
        "wait-frames 2; record {m}; dump-state {s0}; wait-frames 4; wait 500ms; record stop; \
         dump-state {s1}; key R; wait-frames 3; wait 300ms; key R; dump-state {s2}; quit",
        m = p("named.mp4"),
        s0 = p("s0.json"),
        s1 = p("s1.json"),
        s2 = p("s2.json"),
    );
    let args = [
        "--window-size",
        "401x300",
        "--render-scale",
        "0.2",
        "--record-dir",
        dir.to_str().unwrap(),
    ];
    let Some(_) = play_window(&disp, &args, &script, &[]) else {
        return;
    };
    let s0 = read_json(&dir.join("s0.json"));
    assert!(
        s0["message"].as_str().unwrap().starts_with("recording "),
        "{s0}"
    );
    assert!(
        s0["message"].as_str().unwrap().contains("named.mp4"),
        "{s0}"
    );
    // The named movie: as many frames as the recorder wrote, the window's size made even.
    let s1 = read_json(&dir.join("s1.json"));
    let last = &s1["recording"]["last"];
    assert_eq!(last[0], p("named.mp4"), "{s1}");
    let frames = last[1].as_u64().unwrap();
    assert!(frames >= 1, "{s1}");
    let window = (
        s1["window_size"][0].as_u64().unwrap() as u32,
        s1["window_size"][1].as_u64().unwrap() as u32,
    );
    assert_eq!(last[2], serde_json::json!([window.0, window.1]), "{s1}");
    let even = (window.0.div_ceil(2) * 2, window.1.div_ceil(2) * 2);
    assert_eq!(
        probe(&ffprobe, &dir.join("named.mp4")),
        (frames, even.0, even.1)
    );
    assert!(
        s1["message"]
            .as_str()
            .unwrap()
            .contains(&format!("recorded {frames} frames"))
    );
    // Shift+R twice: a movie named by the time in --record-dir.
    let s2 = read_json(&dir.join("s2.json"));
    let auto = PathBuf::from(s2["recording"]["last"][0].as_str().unwrap());
    assert_eq!(auto.parent(), Some(dir.as_path()), "{s2}");
    let name = auto.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("supercell-") && name.ends_with(".mp4"),
        "{name}"
    );
    let n = s2["recording"]["last"][1].as_u64().unwrap();
    assert_eq!(probe(&ffprobe, &auto), (n, even.0, even.1));
    assert!(s2["recording"]["active"].is_null());
    let partial: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(partial.is_empty(), "{partial:?}");
}

#[test]
fn without_ffmpeg_recording_says_so_and_the_window_goes_on() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = own_xvfb(400, 300) else {
        skip("no Xvfb");
        return;
    };
    let dir = fresh_dir("legend-no-ffmpeg");
    let state = dir.join("s.json");
    let script = format!(
        "wait-frames 1; key R; wait-frames 1; dump-state {}; quit",
        state.display()
    );
    let empty = dir.join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    let args = ["--window-size", "400x300", "--render-scale", "0.2"];
    let env = [("PATH", empty.to_str().unwrap())];
    if play_window(&disp, &args, &script, &env).is_none() {
        return;
    }
    let s = read_json(&state);
    assert!(s["message"].as_str().unwrap().contains("no ffmpeg"), "{s}");
    assert!(s["recording"]["active"].is_null() && s["recording"]["last"].is_null());
}

/// `--record-dir` names a folder that exists, and drives the window only.
#[test]
fn record_dir_must_exist_and_needs_the_window() {
    let ds = dataset();
    let run = |extra: &[&str]| {
        let o = Command::new(bin())
            .args(["play", ds.to_str().unwrap()])
            .args(extra)
            .env_remove("DISPLAY")
            .env_remove("WAYLAND_DISPLAY")
            .output()
            .unwrap();
        assert!(!o.status.success(), "{extra:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let said = run(&["--record-dir", "/nonexistent/movies"]);
    assert!(
        said.contains("--record-dir /nonexistent/movies: no such folder"),
        "{said}"
    );
    let said = run(&["--headless", "--record-dir", "."]);
    assert!(said.contains("--record-dir drives the window"), "{said}");
}

/// In large print (egui at 1.33 pixels per point here) each bar's pixel column is still one
/// flat colour, the table's at the column's value.
#[test]
fn legend_bars_hold_in_large_print() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = own_xvfb(1280, 1024) else {
        skip("no Xvfb");
        return;
    };
    let ds = dataset();
    let dir = fresh_dir("legend-large");
    let (shot, state) = (dir.join("shot.png"), dir.join("s.json"));
    let script = format!(
        "key Space; wait 1s; screenshot {}; dump-state {}; quit",
        shot.display(),
        state.display()
    );
    let args = [
        "--window-size",
        "1280x1024",
        "--large-print",
        "--render-scale",
        "0.05",
    ];
    if play_window(&disp, &args, &script, &[]).is_none() {
        return;
    }
    let scene = supercell::scene::Scene::load(&ds).unwrap();
    let ls = scene.open(1.25, None).unwrap();
    let names: Vec<String> = (ls.dataset.manifest().attributes.iter())
        .map(|a| a.name.clone())
        .collect();
    let s = read_json(&state);
    let legend: supercell::app::overlay::LegendShown =
        serde_json::from_value(s["legend"].clone()).unwrap();
    let (w, _, rgb) = read_png(&shot);
    assert!(!legend.bars.is_empty(), "{s}");
    for bar in &legend.bars {
        // 160 points at 1.33 pixels a point.
        let width = bar.colour_px[2] - bar.colour_px[0];
        assert!((205..=220).contains(&width), "{bar:?}");
        let row = table_of(&ls.view, &ls.slots, &names, &bar.name);
        check_bar(&rgb, w, bar, &row, "large print");
    }
}
