//! supercell's pictures against an independent renderer, Mitsuba 3 (PyPI `mitsuba`,
//! `scalar_rgb` variant): one generated storm frame's cloud, exported with
//! `supercell-data export-mitsuba` and rendered by `scripts/mitsuba_compare.py`, against
//! `supercell render --linear` of the same scene file, at 160x90.
//!
//! - Transmittance: a black medium (albedo 0) and no sun, so both pictures are the sky times
//!   the medium's transmittance. Checks the camera, the medium's box and the extinction
//!   mapping against the ray marcher (the CPU reference, which the GPU tests hold the
//!   shaders to).
//! - Path tracing: a grey medium (albedo about 0.9) lit by the sun and the sky, multiple
//!   scattering, against `render --mode path` (runs where that mode exists).
//!
//! Each also checks that it can fail: a wrong extinction (doubled) or sun (flipped) in the
//! export must push the difference far beyond the limit.
//!
//! Skipped with a printed reason where Mitsuba or supercell-data is missing, unless
//! `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

mod crosscheck_support;

/// Direction towards the sun: azimuth and elevation, degrees.
const SUN: [f32; 2] = [200.0, 35.0];
/// Image size of every comparison.
const SIZE: &str = "160x90";
/// Largest relative RMSE (over pixels and channels, of the mean radiance) that passes.
const MAX_REL_RMSE: f64 = 0.03;

/// The Python with Mitsuba: the cross-check virtual environment's where it exists, else
/// `python3` from PATH (scripts/test.sh puts the environment first on PATH).
fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/crosscheck-venv/bin/python3");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

/// `supercell-data`, built beside `supercell` by `cargo test --workspace`.
fn data_tool(test: &str) -> Option<PathBuf> {
    let bin = Path::new(env!("CARGO_BIN_EXE_supercell")).with_file_name("supercell-data");
    if bin.exists() {
        Some(bin)
    } else {
        crosscheck_support::skip(
            test,
            &format!(
                "{} is not built (cargo build -p supercell-data)",
                bin.display()
            ),
        );
        None
    }
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// One frame of the generated storm, cloud only, float values, in `dir/ds`.
fn generate(tool: &Path, dir: &Path) {
    run(Command::new(tool)
        .arg("generate")
        .arg(dir.join("ds"))
        .args([
            "--frames",
            "1",
            "--resolution",
            "40",
            "--attributes",
            "cloud",
            "--grid-type",
            "float",
            "--lanes",
            "1",
            "--seed",
            "7",
        ]));
}

/// The comparison scene: the cloud with a linear opacity ramp and one colour (sRGB grey
/// `grey`), `extinction_scale`, the sun towards `sun_dir` (azimuth and elevation, degrees)
/// with colour `sun`, a dim sky of one colour (weight 1), phase g 0.6, no ground; fixed, fine march steps.
fn write_scene(path: &Path, grey: f32, extinction_scale: f32, sun: f32, sun_dir: [f32; 2]) {
    let [sun_azimuth, sun_elevation] = sun_dir;
    let text = format!(
        r#"dataset = "ds"
[[attribute]]
name = "cloud"
range = [0.0, 1.0]
colormap = [[0.0, [{grey:?}, {grey:?}, {grey:?}]], [1.0, [{grey:?}, {grey:?}, {grey:?}]]]
opacity = [[0.0, 0.0], [1.0, 1.0]]
extinction_scale = {extinction_scale:?}
[camera]
yaw_deg = -62.0
pitch_deg = 16.0
distance_scale = 0.45
[settings]
ground = false
sun_color = [{sun:?}, {:?}, {:?}]
sun_azimuth_deg = {sun_azimuth:?}
sun_elevation_deg = {sun_elevation:?}
sky_zenith = [0.1, 0.12, 0.14]
sky_horizon = [0.1, 0.12, 0.14]
ambient = 1.0
phase_g = 0.6
jitter = false
accel = false
max_step_scale = 1
step_voxels = 0.25
transmittance_cutoff = 0.0
"#,
        sun * 0.92,
        sun * 0.81,
    );
    std::fs::write(path, text).unwrap();
}

fn export(tool: &Path, scene: &Path, out: &Path) {
    run(Command::new(tool)
        .arg("export-mitsuba")
        .arg(scene)
        .args(["--size", SIZE, "--supersample", "2", "--out"])
        .arg(out));
}

/// Runs the comparison script; `None` (after reporting the skip) where Mitsuba is missing.
fn compare(
    test: &str,
    export: &Path,
    pfm: &Path,
    out: &Path,
    spp: u32,
    max_depth: u32,
) -> Option<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mitsuba_compare.py");
    let py = python();
    let status = Command::new(&py)
        .arg(script)
        .arg(export)
        .arg("--supercell")
        .arg(pfm)
        .args(["--spp", &spp.to_string()])
        .args(["--max-depth", &max_depth.to_string()])
        .arg("--out")
        .arg(out)
        .status();
    match status {
        Err(e) => {
            crosscheck_support::skip(test, &format!("cannot run {}: {e}", py.display()));
            return None;
        }
        Ok(s) if s.code() == Some(3) => {
            crosscheck_support::skip(
                test,
                "mitsuba is not installed for python3 (pip install mitsuba==3.9.1)",
            );
            return None;
        }
        Ok(s) => assert!(s.success(), "mitsuba_compare.py failed ({s})"),
    }
    let text = std::fs::read_to_string(out.join("compare.json")).unwrap();
    Some(serde_json::from_str(&text).unwrap())
}

/// Relative RMSE over pixels.
fn rel_rmse(json: &serde_json::Value) -> f64 {
    json["rel_rmse"].as_f64().unwrap()
}

/// Relative RMSE over the means of 5x5-pixel blocks: Mitsuba's noise in a path-traced
/// picture is several per cent per pixel at hundreds of samples, and 25 times less
/// variance per block leaves the systematic differences.
fn rel_rmse_block(json: &serde_json::Value) -> f64 {
    assert_eq!(json["block"], 5);
    json["rel_rmse_block"].as_f64().unwrap()
}

/// Where to keep the pictures: `SUPERCELL_MITSUBA_OUT` (to look at them), else a temporary
/// directory.
fn work_dir() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = match std::env::var_os("SUPERCELL_MITSUBA_OUT") {
        Some(d) => PathBuf::from(d),
        None => tmp.path().to_path_buf(),
    };
    std::fs::create_dir_all(&dir).unwrap();
    (tmp, dir)
}

#[test]
fn transmittance_matches_mitsuba() {
    const TEST: &str = "transmittance_matches_mitsuba";
    let Some(tool) = data_tool(TEST) else { return };
    let (_tmp, dir) = work_dir();
    generate(&tool, &dir);
    let scene = dir.join("transmittance.toml");
    write_scene(&scene, 0.0, 0.05, 0.0, SUN);
    let ours = dir.join("transmittance-supercell");
    run(Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("render")
        .arg(&scene)
        .args(["--cpu", "--linear", "--size", SIZE, "--out"])
        .arg(&ours));
    let pfm = ours.join("frame_00000.pfm");
    let exported = dir.join("transmittance-export");
    export(&tool, &scene, &exported);
    let Some(json) = compare(
        TEST,
        &exported,
        &pfm,
        &dir.join("transmittance-compare"),
        256,
        2,
    ) else {
        return;
    };
    println!("transmittance: {json}");
    assert!(
        rel_rmse(&json) <= MAX_REL_RMSE,
        "supercell's ray marcher and Mitsuba differ by {:.2} % (RMSE of the mean radiance)",
        100.0 * rel_rmse(&json)
    );

    // The check can fail: an export of twice the extinction is far off.
    let doubled = dir.join("transmittance-doubled.toml");
    write_scene(&doubled, 0.0, 0.1, 0.0, SUN);
    let exported = dir.join("transmittance-doubled-export");
    export(&tool, &doubled, &exported);
    let json = compare(
        TEST,
        &exported,
        &pfm,
        &dir.join("transmittance-doubled-compare"),
        16,
        2,
    )
    .expect("mitsuba ran above");
    println!("transmittance, extinction doubled: {json}");
    assert!(
        rel_rmse(&json) > 2.0 * MAX_REL_RMSE,
        "twice the extinction went unnoticed: {:.2} %",
        100.0 * rel_rmse(&json)
    );
}

/// Whether this `supercell` has the path tracer (`render --mode path --spp N`).
fn has_path_tracer() -> bool {
    let help = run(Command::new(env!("CARGO_BIN_EXE_supercell")).args(["render", "--help"]));
    help.contains("--spp")
}

/// Samples per pixel of supercell's path-traced picture.
const PATH_SPP: u32 = 1024;
/// Samples per pixel of Mitsuba's: its noise alone is about 6 % per pixel and 1.2 % per
/// 5x5-pixel block (relative RMSE) at 512.
const MITSUBA_PATH_SPP: u32 = 512;

/// Scattering events per path of `render --mode path` (the `path_max_bounces` setting's
/// default); Mitsuba's `max_depth` counts one more (the segment to the light).
const PATH_BOUNCES: u32 = 16;

#[test]
fn path_tracer_matches_mitsuba() {
    const TEST: &str = "path_tracer_matches_mitsuba";
    if !has_path_tracer() {
        println!("SKIPPED {TEST}: this supercell has no path tracer (render --mode path)");
        return;
    }
    let Some(tool) = data_tool(TEST) else { return };
    let (_tmp, dir) = work_dir();
    generate(&tool, &dir);
    let scene = dir.join("path.toml");
    // sRGB 0.955 is albedo 0.9.
    write_scene(&scene, 0.955, 0.05, 3.2, SUN);
    let ours = dir.join("path-supercell");
    run(Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("render")
        .arg(&scene)
        .args(["--mode", "path", "--spp", &PATH_SPP.to_string()])
        .args(["--linear", "--size", SIZE])
        .arg("--out")
        .arg(&ours));
    let pfm = ours.join("frame_00000.pfm");
    let exported = dir.join("path-export");
    export(&tool, &scene, &exported);
    let Some(json) = compare(
        TEST,
        &exported,
        &pfm,
        &dir.join("path-compare"),
        MITSUBA_PATH_SPP,
        PATH_BOUNCES + 1,
    ) else {
        return;
    };
    println!("path tracing: {json}");
    assert!(
        rel_rmse_block(&json) <= MAX_REL_RMSE,
        "supercell's path tracer and Mitsuba differ by {:.2} % (RMSE of 5x5-pixel means, of \
         the mean radiance; per pixel {:.2} %)",
        100.0 * rel_rmse_block(&json),
        100.0 * rel_rmse(&json)
    );

    // The check can fail: light travelling towards the sun (a sign error in the sun's
    // direction), or twice the extinction.
    let reversed = [SUN[0] + 180.0, -SUN[1]];
    for (name, scale, sun_dir) in [("sun-reversed", 0.05, reversed), ("doubled", 0.1, SUN)] {
        let wrong = dir.join(format!("path-{name}.toml"));
        write_scene(&wrong, 0.955, scale, 3.2, sun_dir);
        let exported = dir.join(format!("path-{name}-export"));
        export(&tool, &wrong, &exported);
        let json = compare(
            TEST,
            &exported,
            &pfm,
            &dir.join(format!("path-{name}-compare")),
            128,
            PATH_BOUNCES + 1,
        )
        .expect("mitsuba ran above");
        println!("path tracing, {name}: {json}");
        assert!(
            rel_rmse_block(&json) > 3.0 * MAX_REL_RMSE,
            "{name} went unnoticed: {:.2} %",
            100.0 * rel_rmse_block(&json)
        );
    }
}
