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

/// Direction towards the sun: azimuth and elevation, degrees. Behind the cloud as the
/// camera (azimuth −62°) sees it, so the picture depends on the phase function's forward
/// peak: 0.5 is the cosine between the sunlight and the way to the camera.
const SUN: [f32; 2] = [150.0, 35.0];
/// The cloud attribute's `extinction_scale`: optical depths of a few across the cloud.
const EXTINCTION: f32 = 0.125;
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

/// The comparison scene: the cloud with a linear opacity ramp over all its values (so that
/// Mitsuba's interpolation of the extinction equals the renderer's transfer function of the
/// interpolated value) and one colour (sRGB grey
/// `grey`), `extinction_scale`, the sun towards `sun_dir` (azimuth and elevation, degrees)
/// with colour `sun`, a dim sky of one colour (weight 1), phase g 0.6, no ground; fixed, fine march steps.
fn write_scene(path: &Path, grey: f32, extinction_scale: f32, sun: f32, sun_dir: [f32; 2]) {
    let [sun_azimuth, sun_elevation] = sun_dir;
    let text = format!(
        r#"dataset = "ds"
[[attribute]]
name = "cloud"
range = [0.0, 2.5]
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

/// Exports `scene` with two extinction samples per voxel edge.
fn export(tool: &Path, scene: &Path, out: &Path) {
    export_with(tool, scene, out, 2);
}

fn export_with(tool: &Path, scene: &Path, out: &Path, supersample: u32) {
    run(Command::new(tool)
        .arg("export-mitsuba")
        .arg(scene)
        .args(["--size", SIZE, "--supersample", &supersample.to_string()])
        .arg("--out")
        .arg(out));
}

/// A colour PFM: width, height and RGB values, rows bottom-up as stored.
fn read_pfm(path: &Path) -> (usize, usize, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8_lossy(&bytes[..64.min(bytes.len())]).into_owned();
    let mut tokens = text.split_ascii_whitespace();
    assert_eq!(tokens.next(), Some("PF"), "{}", path.display());
    let w: usize = tokens.next().unwrap().parse().unwrap();
    let h: usize = tokens.next().unwrap().parse().unwrap();
    assert!(tokens.next().unwrap().starts_with('-'), "little-endian");
    let data = &bytes[bytes.len() - w * h * 12..];
    let values = data
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (w, h, values)
}

/// How Mitsuba renders a comparison.
struct Mitsuba {
    /// Samples per pixel.
    spp: u32,
    /// `volpath`'s `max_depth`: scattering events + 1.
    max_depth: u32,
    /// Edge of the pixel blocks of `rel_rmse_block`.
    block: u32,
    /// `march` (the ray marcher's background) or `path` (the path tracer's sky).
    sky_model: &'static str,
}

/// The transmittance check's Mitsuba render of `spp` samples per pixel.
fn transmittance_run(spp: u32) -> Mitsuba {
    Mitsuba {
        spp,
        max_depth: 2,
        block: 5,
        sky_model: "march",
    }
}

/// Runs the comparison script; `None` (after reporting the skip) where Mitsuba is missing.
fn compare(
    test: &str,
    export: &Path,
    pfm: &Path,
    out: &Path,
    how: &Mitsuba,
) -> Option<serde_json::Value> {
    let status = compare_command(export, pfm, out, how).status();
    match status {
        Err(e) => {
            crosscheck_support::skip(test, &format!("cannot run {}: {e}", python().display()));
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

/// The comparison script's command line (`compare` runs it).
fn compare_command(export: &Path, pfm: &Path, out: &Path, how: &Mitsuba) -> Command {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/mitsuba_compare.py");
    let mut cmd = Command::new(python());
    cmd.arg(script)
        .arg(export)
        .arg("--supercell")
        .arg(pfm)
        .args(["--spp", &how.spp.to_string()])
        .args(["--max-depth", &how.max_depth.to_string()])
        .args(["--block", &how.block.to_string()])
        .args(["--sky-model", how.sky_model])
        .arg("--out")
        .arg(out);
    cmd
}

/// Relative RMSE over pixels.
fn rel_rmse(json: &serde_json::Value) -> f64 {
    json["rel_rmse"].as_f64().unwrap()
}

/// Relative RMSE over the means of blocks of pixels: the noise of a path-traced picture is
/// several per cent per pixel at hundreds of samples, and a block of B×B pixels has B² times
/// less variance but the same systematic differences.
fn rel_rmse_block(json: &serde_json::Value) -> f64 {
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
    write_scene(&scene, 0.0, EXTINCTION, 0.0, SUN);
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
        &transmittance_run(512),
    ) else {
        return;
    };
    println!("transmittance: {json}");
    assert!(
        rel_rmse(&json) <= MAX_REL_RMSE,
        "supercell's ray marcher and Mitsuba differ by {:.2} % (RMSE of the mean radiance)",
        100.0 * rel_rmse(&json)
    );

    // The cloud is not mirror-symmetric: Mitsuba's picture mirrored left to right is far
    // off, so the match above also says that the two cameras agree on handedness.
    let (w, h, theirs) = read_pfm(&dir.join("transmittance-compare/mitsuba.pfm"));
    let (_, _, ours_px) = read_pfm(&pfm);
    let mirrored: Vec<f32> = (0..h)
        .flat_map(|y| {
            (0..w)
                .rev()
                .flat_map(move |x| (0..3).map(move |c| (y, x, c)))
        })
        .map(|(y, x, c)| theirs[(y * w + x) * 3 + c])
        .collect();
    let mean = theirs.iter().map(|v| f64::from(*v)).sum::<f64>() / theirs.len() as f64;
    let mse = ours_px
        .iter()
        .zip(&mirrored)
        .map(|(a, b)| f64::from(a - b).powi(2))
        .sum::<f64>()
        / theirs.len() as f64;
    let mirrored_rel = mse.sqrt() / mean;
    println!(
        "transmittance, Mitsuba mirrored: {:.2} %",
        100.0 * mirrored_rel
    );
    assert!(mirrored_rel > 3.0 * MAX_REL_RMSE, "{mirrored_rel}");

    // `--reuse` compares against the saved halves without rendering again: the same
    // figures; halves of another sample count are refused, naming the file.
    let compared = dir.join("transmittance-compare");
    let again = compare_command(&exported, &pfm, &compared, &transmittance_run(512))
        .arg("--reuse")
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "--reuse failed: {}",
        String::from_utf8_lossy(&again.stderr)
    );
    let reused: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(compared.join("compare.json")).unwrap())
            .unwrap();
    assert_eq!(reused["reused"], true);
    for key in [
        "rel_rmse",
        "rel_rmse_block",
        "mean_mitsuba",
        "rel_noise_mitsuba",
        "seconds",
    ] {
        assert_eq!(reused[key], json[key], "{key} after --reuse");
    }
    let wrong = compare_command(&exported, &pfm, &compared, &transmittance_run(256))
        .arg("--reuse")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert_eq!(wrong.status.code(), Some(2), "{err}");
    assert!(
        err.contains("mitsuba-halves.npz") && err.contains("512 samples per pixel"),
        "{err}"
    );

    // The check can fail: an export of twice the extinction is far off.
    let doubled = dir.join("transmittance-doubled.toml");
    write_scene(&doubled, 0.0, 2.0 * EXTINCTION, 0.0, SUN);
    let exported = dir.join("transmittance-doubled-export");
    export(&tool, &doubled, &exported);
    let json = compare(
        TEST,
        &exported,
        &pfm,
        &dir.join("transmittance-doubled-compare"),
        &transmittance_run(16),
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

/// Samples per pixel of supercell's path-traced picture (on lavapipe about 0.7 s per sample
/// per pixel at 160x90 on two busy cores).
const PATH_SPP: u32 = 128;
/// Samples per pixel of Mitsuba's: its noise alone is about 9 % per pixel, 1.8 % per
/// 5x5-pixel block and 0.9 % per 10x10 block (relative RMSE) at 256.
const MITSUBA_PATH_SPP: u32 = 256;
/// Edge of the pixel blocks the path-traced pictures are compared by.
const PATH_BLOCK: u32 = 10;

/// The path-tracing check's Mitsuba render of `spp` samples per pixel.
fn path_run(spp: u32) -> Mitsuba {
    Mitsuba {
        spp,
        max_depth: PATH_BOUNCES + 1,
        block: PATH_BLOCK,
        sky_model: "path",
    }
}

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
    write_scene(&scene, 0.955, EXTINCTION, 3.2, SUN);
    let ours = dir.join("path-supercell");
    run(Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("render")
        .arg(&scene)
        .args(["--mode", "path", "--spp", &PATH_SPP.to_string()])
        .args(["--max-bounces", &PATH_BOUNCES.to_string()])
        // The unbiased mean: the denoiser would blur the block means compared.
        .args(["--denoise", "off"])
        .args(["--linear", "--size", SIZE])
        .arg("--out")
        .arg(&ours));
    // The path-traced mode's flags are refused in another mode, naming the flag.
    let refused = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("render")
        .arg(&scene)
        .args(["--mode", "shaded", "--denoise", "off", "--size", SIZE])
        .arg("--out")
        .arg(dir.join("refused"))
        .output()
        .expect("run supercell");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success(),
        "--denoise outside path mode should fail"
    );
    assert!(
        err.contains("--denoise is for the path-traced mode"),
        "unexpected refusal: {err}"
    );
    let pfm = ours.join("frame_00000.pfm");
    let exported = dir.join("path-export");
    export(&tool, &scene, &exported);
    let Some(json) = compare(
        TEST,
        &exported,
        &pfm,
        &dir.join("path-compare"),
        &path_run(MITSUBA_PATH_SPP),
    ) else {
        return;
    };
    println!("path tracing: {json}");
    assert!(
        rel_rmse_block(&json) <= MAX_REL_RMSE,
        "supercell's path tracer and Mitsuba differ by {:.2} % (RMSE of 10x10-pixel means, \
         of the mean radiance; per pixel {:.2} %)",
        100.0 * rel_rmse_block(&json),
        100.0 * rel_rmse(&json)
    );

    // The check can fail: light travelling towards the sun (a sign error in the sun's
    // direction), or twice the extinction.
    let reversed = [SUN[0] + 180.0, -SUN[1]];
    for (name, scale, sun_dir) in [
        ("sun-reversed", EXTINCTION, reversed),
        ("doubled", 2.0 * EXTINCTION, SUN),
    ] {
        let wrong = dir.join(format!("path-{name}.toml"));
        write_scene(&wrong, 0.955, scale, 3.2, sun_dir);
        let exported = dir.join(format!("path-{name}-export"));
        export(&tool, &wrong, &exported);
        let json = compare(
            TEST,
            &exported,
            &pfm,
            &dir.join(format!("path-{name}-compare")),
            &path_run(128),
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

/// A `.vol` file: (x, y, z) resolution, channels and the values.
fn read_vol(path: &Path) -> ([usize; 3], usize, Vec<f32>) {
    let b = std::fs::read(path).unwrap();
    assert_eq!(&b[..4], b"VOL\x03", "{}", path.display());
    let word = |i: usize| i32::from_le_bytes(b[i..i + 4].try_into().unwrap());
    assert_eq!(word(4), 1, "float32 encoding");
    let dims = [word(8), word(12), word(16)].map(|d| d as usize);
    let channels = word(20) as usize;
    let values: Vec<f32> = b[48..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values.len(), dims[0] * dims[1] * dims[2] * channels);
    (dims, channels, values)
}

fn apply(m: &serde_json::Value, p: [f64; 3]) -> [f64; 3] {
    std::array::from_fn(|r| {
        let row = &m[r];
        (0..3).map(|c| row[c].as_f64().unwrap() * p[c]).sum::<f64>() + row[3].as_f64().unwrap()
    })
}

/// The exported extinction is the transfer function of the grid's values (a linear opacity
/// ramp: proportional to the value, clamped), sample `k` sits at the world position of index
/// `bmin − 1 + k`, the cube covers the marched box, and the albedo is the colormap's.
/// Needs neither Mitsuba nor Python.
#[test]
fn export_holds_the_marchers_extinction() {
    const TEST: &str = "export_holds_the_marchers_extinction";
    let Some(tool) = data_tool(TEST) else { return };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    generate(&tool, dir);
    let scene = dir.join("scene.toml");
    write_scene(&scene, 0.955, EXTINCTION, 3.2, SUN);
    let out = dir.join("export");
    export_with(&tool, &scene, &out, 1);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("scene.json")).unwrap()).unwrap();
    let (n, channels, sigma) = read_vol(&out.join("sigma_t.vol"));
    assert_eq!(channels, 1);

    let ds = supercell::dataset::Dataset::open(dir.join("ds")).unwrap();
    let mut buf = supercell::dataset::AlignedBuf::new();
    ds.read_frame(0, &mut buf, supercell::dataset::CrcCheck::Verify)
        .unwrap();
    let grid = supercell::format::Grid::parse(ds.grid_bytes(0, 0, &buf).unwrap()).unwrap();
    let [bmin, bmax] = grid.index_bbox();
    let lo = bmin.map(|v| v - 1);
    assert_eq!(n, std::array::from_fn(|i| (bmax[i] - bmin[i] + 3) as usize));
    let mut acc = grid.accessor();
    // The opacity is u = v / 2.5 over the value range [0, 2.5]: extinction = clamp(v) × e.
    let values: Vec<f32> = (0..n[2])
        .flat_map(|z| (0..n[1]).flat_map(move |y| (0..n[0]).map(move |x| [x, y, z])))
        .map(|k| {
            let ijk = std::array::from_fn(|i| lo[i] + k[i] as i32);
            acc.value(ijk).unwrap().as_f32().unwrap().clamp(0.0, 2.5)
        })
        .collect();
    let (imax, vmax) = values
        .iter()
        .enumerate()
        .fold((0, 0.0f32), |m, (i, v)| if *v > m.1 { (i, *v) } else { m });
    assert!(vmax > 0.5, "the test grid has dense cloud");
    let e = sigma[imax] / vmax;
    assert!(e > 0.0);
    for (i, (s, v)) in sigma.iter().zip(&values).enumerate() {
        assert!(
            (s - v * e).abs() <= 1e-4 * e,
            "sample {i}: extinction {s}, value {v} × {e}"
        );
    }
    // Padding: the marched box's faces hold the background.
    assert_eq!(sigma[0], 0.0);

    // Sample k at (k + 0.5) / n of the unit cube is index lo + k in the world.
    let med = &json["medium"];
    for k in [[0usize, 0, 0], [3, 5, 7], [n[0] - 1, n[1] - 1, n[2] - 1]] {
        let u = std::array::from_fn(|i| (k[i] as f64 + 0.5) / n[i] as f64);
        let world = apply(&med["volume_to_world"], u);
        let want = grid
            .map()
            .apply(std::array::from_fn(|i| f64::from(lo[i]) + k[i] as f64));
        for i in 0..3 {
            assert!(
                (world[i] - want[i]).abs() < 1e-6 * want[i].abs().max(1.0),
                "{k:?}"
            );
        }
    }
    let corner_lo = apply(&med["cube_to_world"], [-1.0; 3]);
    let corner_hi = apply(&med["cube_to_world"], [1.0; 3]);
    let want_lo = grid.map().apply(lo.map(f64::from));
    let want_hi = grid.map().apply(bmax.map(|v| f64::from(v + 1)));
    for i in 0..3 {
        assert!((corner_lo[i] - want_lo[i]).abs() < 1e-6 * want_lo[i].abs().max(1.0));
        assert!((corner_hi[i] - want_hi[i]).abs() < 1e-6 * want_hi[i].abs().max(1.0));
    }
    for c in med["albedo"].as_array().unwrap() {
        assert!((c.as_f64().unwrap() - 0.9).abs() < 2e-3, "albedo {c}");
    }
    assert_eq!(json["phase_g"].as_f64().unwrap() as f32, 0.6);
    assert_eq!(json["width"], 160);
    // The sun's irradiance is the path tracer's: π · sun_color (shaders/path.wgsl, "Units").
    let irradiance = json["sun"]["irradiance"].as_array().unwrap();
    for (c, want) in irradiance.iter().zip([3.2, 3.2 * 0.92, 3.2 * 0.81]) {
        let want = std::f64::consts::PI * want;
        assert!(
            (c.as_f64().unwrap() - want).abs() < 1e-4 * want,
            "irradiance {c} vs {want}"
        );
    }

    // An `albedo` key is the path tracer's albedo, so it is the one exported (the colormap
    // stays the march's colour).
    let text = std::fs::read_to_string(&scene).unwrap();
    let with_albedo = dir.join("scene-albedo.toml");
    std::fs::write(
        &with_albedo,
        text.replacen(
            "opacity =",
            "albedo = [[0.0, [0.2, 0.5, 0.97]]]\nopacity =",
            1,
        ),
    )
    .unwrap();
    let out = dir.join("export-albedo");
    export_with(&tool, &with_albedo, &out, 1);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("scene.json")).unwrap()).unwrap();
    let albedo: Vec<f64> = json["medium"]["albedo"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_f64().unwrap())
        .collect();
    for (got, want) in albedo.iter().zip([0.2, 0.5, 0.97]) {
        assert!((got - want).abs() < 1e-6, "albedo {albedo:?}");
    }

    // Wrong requests are refused with the reason.
    let refused = |args: &[&str], says: &str| {
        let o = Command::new(&tool)
            .arg("export-mitsuba")
            .arg(&scene)
            .args(args)
            .arg("--out")
            .arg(dir.join("refused"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success() && err.contains(says), "{args:?}: {err}");
    };
    refused(&["--attribute", "rain"], "no enabled attribute \"rain\"");
    refused(&["--supersample", "0"], "--supersample");
    refused(&["--size", "0x10"], "each side must be 1");
    refused(&["--frame", "5"], "not within the dataset's 1 frames");
}
