//! The bare `supercell` command, the main job. Without a display it makes a short headless
//! run of the player on the built-in dataset (here a small storm placed where the built-in
//! one would be, through `SUPERCELL_CACHE`) and writes a picture, the frames/s and GB/s it
//! measured as JSON, and the command that opens the window. `--help` starts from `play`.
//!
//! Without a GPU adapter (lavapipe will do) the headless tests print why and pass, unless
//! `SUPERCELL_REQUIRE_GPU` is set (CI sets it).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

mod storm_support;
use storm_support::SmallStorm;

use supercell::app::PlayerGpu;
use supercell::scene::DEFAULT_DATASET_NAME;

fn has_adapter() -> bool {
    match PlayerGpu::open(PlayerGpu::instance(), None) {
        Ok(_) => true,
        Err(e) if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() => {
            panic!("no GPU adapter ({e}) and SUPERCELL_REQUIRE_GPU is set")
        }
        Err(e) => {
            eprintln!("skipping: no GPU adapter ({e})");
            false
        }
    }
}

/// A cache directory holding a small storm (8 frames, 48 voxels across) under the built-in
/// dataset's name, so the bare command plays it instead of generating the full one.
fn cache_with_small_storm() -> tempfile::TempDir {
    let cache = tempfile::tempdir().expect("temp dir");
    SmallStorm {
        resolution: 48,
        frames: 8,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "main command test",
    }
    .write(&cache.path().join(DEFAULT_DATASET_NAME));
    cache
}

/// Runs the bare command with `display` as `DISPLAY` (unset when `None`) and no Wayland;
/// as `cargo run` would run it when `under_cargo`, else as from a user's shell.
fn run_bare(cache: &Path, display: Option<&str>, under_cargo: bool) -> (Output, Duration) {
    let runtime = tempfile::tempdir().expect("runtime dir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supercell"));
    cmd.env_remove("WAYLAND_DISPLAY")
        .env("SUPERCELL_CACHE", cache)
        .env("XDG_RUNTIME_DIR", runtime.path());
    // `cargo run` sets these for the program it runs (and `cargo test` for this test).
    if under_cargo {
        cmd.env("CARGO", "cargo").env("CARGO_PKG_NAME", "supercell");
    } else {
        cmd.env_remove("CARGO").env_remove("CARGO_PKG_NAME");
    }
    match display {
        Some(d) => cmd.env("DISPLAY", d),
        None => cmd.env_remove("DISPLAY"),
    };
    let start = Instant::now();
    let out = cmd.output().expect("run supercell");
    (out, start.elapsed())
}

/// Checks what the headless run left: a PNG with a picture in it, JSON with positive
/// figures, and stdout naming both files and `window_command`.
fn check_headless_run(cache: &Path, out: &Output, window_command: &str) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bare supercell failed:\n{stdout}\n{stderr}"
    );
    let preview: PathBuf = cache.join("preview");
    let picture = preview.join("storm.png");
    let json = preview.join("storm.json");

    // The picture: the run's size, and a storm in it (many colours, not one flat fill).
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&picture).unwrap_or_else(|e| {
            panic!(
                "{}: {e}\nstdout:\n{stdout}\nstderr:\n{stderr}",
                picture.display()
            )
        }),
    ));
    let mut reader = decoder.read_info().expect("PNG header");
    let mut buf = vec![0; reader.output_buffer_size().expect("PNG size")];
    let info = reader.next_frame(&mut buf).expect("PNG data");
    assert_eq!((info.width, info.height), (320, 180), "picture size");
    let pixels: std::collections::HashSet<&[u8]> =
        buf[..info.buffer_size()].chunks_exact(4).collect();
    assert!(
        pixels.len() > 64,
        "the picture has only {} colours: nothing rendered?",
        pixels.len()
    );

    // The figures.
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("storm.json"))
            .expect("storm.json is JSON");
    assert_eq!(v["schema"], "supercell-main-headless/2");
    assert_eq!(v["picture"], picture.display().to_string());
    assert_eq!(v["window_command"], window_command);
    // The storm scene compiled into the binary: its attributes (the funnel's grid among
    // them), not the dataset's default look.
    assert_eq!(v["scene"], "built-in scenes/storm.toml", "{v:#}");
    let storm = storm_support::storm_scene_attributes();
    assert_eq!(v["attributes"], serde_json::json!(storm), "{v:#}");
    let host = &v["paths"][0];
    assert_eq!(host["path"], "host", "{v:#}");
    for key in ["rendered_fps", "delivered_fps", "gbps_mean"] {
        let x = host[key].as_f64().unwrap_or(0.0);
        assert!(x > 0.0, "{key} = {x}, expected > 0: {v:#}");
    }
    assert!(host["frames_rendered"].as_u64().unwrap_or(0) >= 1, "{v:#}");

    // What the user reads.
    for expect in [
        "frames/s",
        "GB/s",
        &picture.display().to_string(),
        &json.display().to_string(),
        "open the window",
        window_command,
    ] {
        assert!(
            stdout.contains(expect),
            "{expect:?} not in stdout:\n{stdout}"
        );
    }
}

#[test]
fn bare_command_without_a_display_pictures_and_measures_the_storm() {
    if !has_adapter() {
        return;
    }
    let cache = cache_with_small_storm();
    let (out, took) = run_bare(cache.path(), None, false);
    check_headless_run(cache.path(), &out, "supercell play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no display"), "{stderr}");
    eprintln!("bare supercell without a display took {took:.1?}");
}

#[test]
fn bare_command_falls_back_when_the_display_cannot_open() {
    if !has_adapter() {
        return;
    }
    let cache = cache_with_small_storm();
    // A display nobody serves: the window cannot open, and the run goes on headless.
    // Run from the source tree, the window command is the `cargo run` form.
    let (out, _) = run_bare(cache.path(), Some(":4711"), true);
    check_headless_run(cache.path(), &out, "cargo run --release -- play");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no window could open"), "{stderr}");
}

#[test]
fn help_starts_from_play() {
    let out = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("--help")
        .output()
        .expect("run supercell --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let commands: Vec<&str> = help
        .split("Commands:")
        .nth(1)
        .expect("a Commands section")
        .lines()
        .skip(1)
        .map_while(|l| l.strip_prefix("  "))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(
        commands.first(),
        Some(&"play"),
        "play should come first:\n{help}"
    );
    assert!(commands.contains(&"info"), "{help}");
    assert!(help.contains("Examples:"), "{help}");
    // A subcommand's options do not mix with the bare command's.
    let out = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .args(["--headless", "info"])
        .output()
        .expect("run supercell");
    assert!(!out.status.success());
}
