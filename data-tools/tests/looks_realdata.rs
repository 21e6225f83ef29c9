//! The first picture of every real file in `../shared/realdata` that imports: imported with
//! `supercell-data import --scene`, the scene it writes opened as `supercell play` opens it,
//! its first frame (the scene's start frame) and its last frame rendered at 160×90 by the
//! CPU reference renderer. Each picture must be neither empty nor a wall of one colour:
//!
//! - **data**: the fraction of pixels that differ from the same view with every attribute
//!   off (sky and ground alone) by more than [`DIFFERS`] (of 255) in some channel must lie
//!   in [`DATA_BAND`], 1 % to 90 %: below, the picture is empty; above, the data walls off
//!   the view;
//! - **variety**: among the pixels that show data, the fraction whose colour is more than
//!   [`NEAR`] (of 255) in some channel from their most common colour (the centre of the
//!   most common bucket of [`BUCKET`] levels per channel) must be at least
//!   [`MIN_VARIETY`], 5 %: a wall of one colour leaves 2–3 % (its edges); the pictures
//!   here leave 10–70 %.
//!
//! The test also renders real CM1 output with the look suggested before looks came from
//! the data (wind speed over the manifest's range, shown; `import --wind-speed --scene`'s
//! scene then) and checks that the same measure refuses it: a solid pink box.
//!
//! Every CM1 and WRF output file, `.vdb` and `.nvdb` there must import, except those
//! [`REFUSED`] names (refused with a reason; tests/vdb_realdata.rs and
//! import_realdata.rs hold the reasons). Skipped with a printed message where
//! `../shared/realdata` is absent.

use std::path::{Path, PathBuf};
use std::process::Command;

use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::format::Grid;
use supercell::render::{Image, render_cpu};
use supercell::scene::{LoadedScene, Scene};

const WIDTH: u32 = 160;
const HEIGHT: u32 = 90;
/// A pixel shows data where a channel differs from the empty view's by more than this.
const DIFFERS: i32 = 12;
/// The fraction of pixels that show data: at least 1 % (144 pixels), at most 90 %.
const DATA_BAND: [f64; 2] = [0.01, 0.90];
/// Colours are counted in buckets this wide per channel to find the most common one.
const BUCKET: i32 = 16;
/// A pixel is the most common colour where every channel is within this of its bucket's
/// centre.
const NEAR: i32 = 24;
/// At least 5 % of the data's pixels are not its most common colour.
const MIN_VARIETY: f64 = 0.05;

fn realdata() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/realdata");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "SKIPPED looks_realdata: {} is absent (CI has it)",
            dir.display()
        );
        None
    }
}

/// `supercell-data import FILES --out OUT --scene OUT/scene.toml EXTRA`; the scene's path
/// and what the tool printed, or the tool's message where it refuses.
fn import(files: &[PathBuf], out: &Path, extra: &[&str]) -> Result<(PathBuf, String), String> {
    let scene = out.join("scene.toml");
    let result = Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .arg("import")
        .args(files)
        .arg("--out")
        .arg(out.join("ds"))
        .arg("--scene")
        .arg(&scene)
        .args(extra)
        .output()
        .expect("run supercell-data");
    if result.status.success() {
        let printed = String::from_utf8_lossy(&result.stdout).to_string()
            + &String::from_utf8_lossy(&result.stderr);
        Ok((scene, printed))
    } else {
        Err(String::from_utf8_lossy(&result.stderr).trim().to_string())
    }
}

/// The scene's picture of `frame` and the same view with every attribute off.
fn first_picture(ls: &LoadedScene, frame: usize) -> (Image, Image) {
    let mut slot = AlignedBuf::new();
    ls.dataset
        .read_frame(frame, &mut slot, CrcCheck::Verify)
        .unwrap();
    let grids: Vec<Option<Grid<'_>>> = ls
        .slots
        .iter()
        .map(|s| s.map(|a| Grid::parse(ls.dataset.grid_bytes(frame, a, &slot).unwrap()).unwrap()))
        .collect();
    let refs: Vec<Option<&Grid<'_>>> = grids.iter().map(Option::as_ref).collect();
    let picture = render_cpu(&refs, &ls.view, WIDTH, HEIGHT);
    if let Some(dir) = std::env::var_os("LOOKS_PNG_DIR") {
        // Where asked, the pictures are kept to look at.
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        picture
            .write_png(&Path::new(&dir).join(format!("picture_{n:02}.png")))
            .unwrap();
    }
    let mut empty = ls.view.clone();
    for a in empty.attributes.iter_mut().flatten() {
        a.enabled = false;
    }
    (picture, render_cpu(&refs, &empty, WIDTH, HEIGHT))
}

/// The measures of the module documentation: (data, variety).
fn measure(picture: &Image, background: &Image) -> (f64, f64) {
    let px = |img: &Image, i: usize| -> [i32; 3] {
        std::array::from_fn(|c| i32::from(img.rgba8[4 * i + c]))
    };
    let n = (picture.width * picture.height) as usize;
    let data: Vec<[i32; 3]> = (0..n)
        .filter(|&i| {
            let (p, b) = (px(picture, i), px(background, i));
            (0..3).any(|c| (p[c] - b[c]).abs() > DIFFERS)
        })
        .map(|i| px(picture, i))
        .collect();
    let mut buckets = std::collections::HashMap::new();
    for p in &data {
        *buckets.entry(p.map(|x| x / BUCKET)).or_insert(0usize) += 1;
    }
    let mode = buckets
        .iter()
        .max_by_key(|(k, v)| (**v, **k))
        .map(|(k, _)| k.map(|x| x * BUCKET + BUCKET / 2))
        .unwrap_or([0; 3]);
    let other = data
        .iter()
        .filter(|p| (0..3).any(|c| (p[c] - mode[c]).abs() > NEAR))
        .count();
    let variety = if data.is_empty() {
        0.0
    } else {
        other as f64 / data.len() as f64
    };
    (data.len() as f64 / n as f64, variety)
}

/// Whether every grid of every frame of the dataset has no active voxel.
fn holds_nothing(ls: &LoadedScene) -> bool {
    let ds = &ls.dataset;
    let mut slot = AlignedBuf::new();
    (0..ds.frame_count()).all(|f| {
        ds.read_frame(f, &mut slot, CrcCheck::Verify).unwrap();
        (0..ds.manifest().attributes.len()).all(|a| {
            let grid = Grid::parse(ds.grid_bytes(f, a, &slot).unwrap()).unwrap();
            grid.active_voxel_count() == 0
        })
    })
}

fn readable(picture: &Image, background: &Image) -> Result<(f64, f64), String> {
    let (data, variety) = measure(picture, background);
    if data < DATA_BAND[0] {
        return Err(format!("empty: {:.1} % of pixels show data", 100.0 * data));
    }
    if data > DATA_BAND[1] {
        return Err(format!(
            "a wall: {:.1} % of pixels show data, nothing is seen past it",
            100.0 * data
        ));
    }
    if variety < MIN_VARIETY {
        return Err(format!(
            "a wall of one colour: {:.1} % of the data's pixels differ from its most common colour",
            100.0 * variety
        ));
    }
    Ok((data, variety))
}

/// Real files that are refused, with a reason other tests check: NCL's derived file has no
/// heights; fVDB's batch fails its own checksums.
const REFUSED: [&str; 2] = ["wrf/salem_wrf_cropped_ncl.nc", "nvdb/fvdb_tests_batch.nvdb"];

/// Imports `files`, opens the scene written and measures its first picture; a file that
/// does not import is a failure.
fn check(name: &str, files: &[PathBuf], extra: &[&str], failures: &mut Vec<String>) {
    let tmp = tempfile::tempdir().unwrap();
    let (scene_path, printed) = match import(files, tmp.path(), extra) {
        Ok(p) => p,
        Err(why) => {
            failures.push(format!("{name}: not imported: {why}"));
            return;
        }
    };
    let scene = Scene::load(&scene_path).unwrap();
    let ls = scene.open(WIDTH as f32 / HEIGHT as f32, None).unwrap();
    if holds_nothing(&ls) {
        // A file whose every grid is empty (Blender 2.8's first smoke frame) has no picture
        // to show; the import must say so, grid by grid.
        let grids = ls.dataset.manifest().attributes.len();
        let said = printed.matches("holds no active voxels").count();
        if said < grids {
            failures.push(format!(
                "{name}: every grid is empty, but the import said so for {said} of {grids}:\n{printed}"
            ));
        } else {
            println!("{name}: every grid is empty, and the import says so");
        }
        return;
    }
    let frame = scene.playback.start_frame as usize;
    let (picture, background) = first_picture(&ls, frame);
    let shown: Vec<String> = ls
        .slots
        .iter()
        .zip(&ls.view.attributes)
        .filter_map(|(s, v)| {
            let a = &ls.dataset.manifest().attributes[(*s)?];
            let on = v.as_ref().is_some_and(|v| v.enabled);
            Some(format!("{}{}", a.name, if on { "" } else { " (off)" }))
        })
        .collect();
    let last = ls.dataset.frame_count() - 1;
    if last != frame {
        // The opacity is set on the first frame with data; the storm grows after it.
        let (p, b) = first_picture(&ls, last);
        match readable(&p, &b) {
            Ok((data, variety)) => println!(
                "{name}: last frame {last}: data {:.1} %, variety {:.1} %",
                100.0 * data,
                100.0 * variety
            ),
            Err(why) => failures.push(format!("{name}: last frame {last}: {why}")),
        }
    }
    match readable(&picture, &background) {
        Ok((data, variety)) => println!(
            "{name}: frame {frame}, {}: data {:.1} %, variety {:.1} %",
            shown.join(", "),
            100.0 * data,
            100.0 * variety
        ),
        Err(why) => failures.push(format!(
            "{name}: frame {frame}, {}: {why}",
            shown.join(", ")
        )),
    }
}

#[test]
fn the_first_picture_of_every_real_file_shows_its_data() {
    let Some(root) = realdata() else { return };
    let mut failures = Vec::new();
    let cm1 = root.join("cm1/cm1r21.1_supercell_48x48x36_uniform_multitime/cm1out.nc");
    check(
        "cm1 uniform multitime --wind-speed",
        &[cm1],
        &["--wind-speed"],
        &mut failures,
    );
    let stretched: Vec<PathBuf> = (1..=4)
        .map(|i| {
            root.join(format!(
                "cm1/cm1r21.1_supercell_48x48x35_stretched/cm1out_00000{i}.nc"
            ))
        })
        .collect();
    check("cm1 stretched series", &stretched, &[], &mut failures);
    let mut files: Vec<PathBuf> = Vec::new();
    let mut dirs = ["cm1", "wrf", "vdb", "nvdb"].map(|d| root.join(d)).to_vec();
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                // The CM1 runs' folders are series, checked above.
                if !p.starts_with(root.join("cm1")) {
                    dirs.push(p);
                }
            } else if p
                .extension()
                .is_some_and(|x| x == "vdb" || x == "nvdb" || x == "nc")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    for f in &files {
        let name = f.strip_prefix(&root).unwrap().display().to_string();
        if !REFUSED.contains(&name.as_str()) {
            check(&name, std::slice::from_ref(f), &[], &mut failures);
        }
    }
    assert!(
        failures.is_empty(),
        "unreadable first pictures:\n{}",
        failures.join("\n")
    );
}

/// The scene `import --wind-speed --scene` wrote for the CM1 supercell before looks came
/// from the data (less its `dataset` line): every shown attribute on, ranges from the
/// manifest's smallest and largest values, the camera on the storm's body.
const OLD_CM1_LOOK: &str = r#"
[[attribute]]
name = "qc"
preset = "cloud"

[[attribute]]
name = "qr"
preset = "rain"

[[attribute]]
name = "dbz"
range = [5.0, 75.0]
colormap = "nws_reflectivity"
opacity = [[0.0, 0.0], [0.2, 0.05], [0.43, 0.25], [0.7, 0.6], [1.0, 0.9]]
kind = "emissive"
emission = 2.0

[[attribute]]
name = "wind_speed"
preset = "wind_speed"

[camera]
fit = ["qc", "qr", "dbz"]
yaw_deg = -62.0
pitch_deg = 16.0
"#;

/// The measure refuses the look suggested before looks came from the data: on real CM1
/// output, wind speed shown over its whole range (5 m/s and up fill 95 % of the domain).
#[test]
fn the_measure_refuses_the_wind_speed_wall() {
    let Some(root) = realdata() else { return };
    let cm1 = root.join("cm1/cm1r21.1_supercell_48x48x36_uniform_multitime/cm1out.nc");
    let tmp = tempfile::tempdir().unwrap();
    import(&[cm1], tmp.path(), &["--wind-speed"]).expect("the CM1 supercell imports");
    let old = tmp.path().join("old.toml");
    let ds = tmp.path().join("ds");
    std::fs::write(
        &old,
        format!("dataset = {:?}\n{OLD_CM1_LOOK}", ds.display().to_string()),
    )
    .unwrap();
    let scene = Scene::load(&old).unwrap();
    let ls = scene.open(WIDTH as f32 / HEIGHT as f32, None).unwrap();
    let (picture, background) = first_picture(&ls, 0);
    let verdict = readable(&picture, &background);
    assert!(
        verdict.as_ref().is_err_and(|why| why.contains("wall")),
        "the old look passes the measure: {verdict:?}"
    );
}
