//! The `supercell` binary refuses bad command-line values with a clear error before it
//! touches a dataset or a GPU.

use std::process::Command;

fn fails(args: &[&str], expect: &str) {
    let out = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .args(args)
        .output()
        .expect("run supercell");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(
        err.contains(expect),
        "{args:?}: expected {expect:?} in {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

#[test]
fn render_refuses_non_finite_camera_values() {
    fails(&["render", "/nonexistent", "--zoom", "NaN"], "--zoom");
    fails(
        &["render", "/nonexistent", "--zoom", "0"],
        "--zoom must be positive",
    );
    fails(&["render", "/nonexistent", "--yaw", "inf"], "--yaw");
    fails(&["render", "/nonexistent", "--iso", "NaN"], "--iso");
    fails(&["render", "/nonexistent", "--step=-1"], "--step");
    // The renderer would clamp a shorter step to 0.01 voxels: refused instead.
    fails(&["render", "/nonexistent", "--step", "0.001"], "≥ 0.01");
    fails(
        &["render", "/nonexistent", "--frame", "18446744073709551615"],
        "too large",
    );
    fails(
        &[
            "render",
            "/nonexistent",
            "--frames",
            "0..=18446744073709551615",
        ],
        "too large",
    );
}

#[test]
fn bench_refuses_an_empty_run() {
    fails(
        &["bench", "/nonexistent", "--frames", "0"],
        "--frames must be at least 1",
    );
}

#[test]
fn play_refuses_window_flags_with_headless() {
    for flag in [
        &["--script", "quit"][..],
        &["--exit-after", "3"],
        &["--kiosk"],
        &["--fullscreen"],
    ] {
        let mut args = vec!["play", "/nonexistent", "--headless"];
        args.extend_from_slice(flag);
        fails(&args, &format!("{} drives the window", flag[0]));
    }
}

#[test]
fn play_refuses_frames_out_with_flags_it_cannot_honour() {
    // `--gpus` is honoured (the run across ranks with one rank, its GPUs in turn).
    for flag in [["--soak", "1s"], ["--screenshot", "x.png"]] {
        let mut args = vec![
            "play",
            "/nonexistent",
            "--headless",
            "--frames-out",
            "/tmp/x",
        ];
        args.extend(flag);
        fails(
            &args,
            "--frames-out cannot be used with --soak or --screenshot",
        );
    }
}

#[test]
fn play_refuses_bad_render_scale_and_step() {
    for mode in [&[][..], &["--headless"]] {
        let mut args = vec!["play", "/nonexistent"];
        args.extend_from_slice(mode);
        let with = |extra: &[&'static str]| {
            let mut a = args.clone();
            a.extend_from_slice(extra);
            a
        };
        fails(
            &with(&["--render-scale", "0"]),
            "--render-scale must be in (0, 4]",
        );
        fails(
            &with(&["--render-scale", "NaN"]),
            "--render-scale must be in (0, 4]",
        );
        fails(
            &with(&["--step", "0.001"]),
            "--step 0.001: the step length in voxels must be",
        );
    }
}

#[test]
fn image_sizes_name_the_flag_and_the_form() {
    let expect = |flag: &str, value: &str| {
        format!("{flag}: expected WIDTHxHEIGHT, e.g. 1280x720; got \"{value}\"")
    };
    for bad in ["64x", "x64", "64", "64x-3", "axb"] {
        fails(
            &["render", "/nonexistent", "--size", bad],
            &expect("--size", bad),
        );
        fails(
            &["play", "/nonexistent", "--headless", "--size", bad],
            &expect("--size", bad),
        );
        fails(
            &["play", "/nonexistent", "--window-size", bad],
            &expect("--window-size", bad),
        );
    }
    fails(
        &["render", "/nonexistent", "--size", "0x720"],
        "--size: \"0x720\": each side must be 1 to",
    );
    fails(
        &["play", "/nonexistent", "--headless", "--size", "20000x10"],
        "each side must be 1 to 16384 pixels",
    );
}

/// A finite but absurd exposure rendered black with exit 0: `render` now refuses the scene,
/// naming the key and the range.
#[test]
fn render_refuses_an_absurd_exposure() {
    let dir = tempfile::tempdir().unwrap();
    let scene = dir.path().join("bright.toml");
    std::fs::write(&scene, "[settings]\nexposure = 3e38\n").unwrap();
    fails(
        &["render", scene.to_str().unwrap(), "--size", "32x32"],
        "settings.exposure: must be in (0, 10000], found 3e38",
    );
}
