//! Slices, probes and line plots on the player's frame on screen (`app::analysis`), against
//! the CPU reader: a slice's 2-D pixels equal `Grid::sample_world` at their world
//! positions; the probe at chosen pixels lands where the pixel's ray meets the slice plane
//! (or turns opaque) and names the voxel and the values the CPU reads there; a line plot's
//! values are the CPU's along the segment. Then the window under Xvfb driven by a script
//! (`slice`, `probe`, `line`, keys) with the panels on, read back through `dump-state`.
//!
//! The small generated storm; the real CM1 series where `../shared/realdata` has it is
//! checked by the data-tools' import test. Without a GPU (or a display for the window) the
//! tests print why and pass, unless `SUPERCELL_REQUIRE_GPU` is set.

use std::path::Path;
use std::time::{Duration, Instant};

mod play_support;
mod storm_support;
use play_support::{bin, dataset, display, gpu, out_dir, skip, small_config};

use supercell::app::Player;
use supercell::app::analysis::{self, Axis, Slice};
use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
use supercell::format::{Grid, Interpolation, Value};

/// Values agree to this, relative to max(1, |value|): the GPU interpolates in `f32` after
/// an `f32` world → index map, the CPU in `f64`.
const TOL: f64 = 1e-4;

fn shown_player(ds: &Path) -> Option<(supercell::app::PlayerGpu, Player)> {
    shown_player_with(ds, small_config())
}

fn shown_player_with(
    ds: &Path,
    cfg: supercell::app::PlayerConfig,
) -> Option<(supercell::app::PlayerGpu, Player)> {
    let g = gpu()?;
    let mut player = Player::new(&g.device, &g.queue, ds, &cfg).expect("player");
    player.set_playing(false);
    player.scrub(3);
    let end = Instant::now() + Duration::from_secs(60);
    while player.scrub_pending() || player.shown_frame() != Some(3) {
        assert!(
            Instant::now() < end,
            "frame 3 was not shown: {:?}",
            player.last_error()
        );
        if player.tick().expect("tick").shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
    Some((g, player))
}

/// The frame's grids read on the CPU.
struct CpuFrame {
    slot: AlignedBuf,
    ds: Dataset,
    frame: usize,
}

impl CpuFrame {
    fn read(ds: &Path, frame: usize) -> CpuFrame {
        let ds = Dataset::open(ds).unwrap();
        let mut slot = AlignedBuf::new();
        ds.read_frame(frame, &mut slot, CrcCheck::Verify).unwrap();
        CpuFrame { slot, ds, frame }
    }

    /// Attribute `a`'s value and nearest voxel at `p`.
    fn sample(&self, a: usize, p: [f64; 3]) -> (f64, [i32; 3]) {
        let bytes = self.ds.grid_bytes(self.frame, a, &self.slot).unwrap();
        let grid = Grid::parse(bytes).unwrap();
        let s = grid.sample_world(p, Interpolation::Linear).unwrap();
        let v = match s.value {
            Value::Float(v) => f64::from(v),
            Value::Double(v) => v,
            other => panic!("{other:?}"),
        };
        (v, s.index.map(|c| c.round() as i32))
    }
}

fn close(gpu: f64, cpu: f64) -> bool {
    (gpu - cpu).abs() <= TOL * cpu.abs().max(1.0)
}

#[test]
fn slices_probes_and_lines_read_what_the_cpu_reads() {
    let ds = dataset();
    let Some((_g, mut player)) = shown_player(&ds) else {
        return;
    };
    let cpu = CpuFrame::read(&ds, 3);
    let bbox = player.view().world_bbox.map(|c| c.map(f64::from));
    let attrs = player.attribute_units();
    assert!(attrs.len() >= 2, "{attrs:?}");
    let mid = |i: usize| 0.5 * (bbox[0][i] + bbox[1][i]);

    // Slices across each axis: every pixel equals the CPU's sample at its world position.
    let mut lit = 0;
    for (axis, a) in [(Axis::Z, 0), (Axis::X, 1), (Axis::Y, 0)] {
        let i = axis.index();
        let at = bbox[0][i] + 0.37 * (bbox[1][i] - bbox[0][i]);
        let s = Slice {
            axis,
            at,
            attribute: a,
        };
        let img = analysis::slice_image(&mut player, &s).expect("slice");
        assert!(
            img.width > 8 && img.height > 8,
            "{}x{}",
            img.width,
            img.height
        );
        assert_eq!(img.values.len(), img.width * img.height);
        for j in 0..img.height {
            for i in 0..img.width {
                let p = img.world_at(i as f64, j as f64);
                let (want, _) = cpu.sample(a, p);
                let got = f64::from(img.values[j * img.width + i]);
                assert!(
                    close(got, want),
                    "{axis:?} slice pixel ({i}, {j}) at {p:?}: GPU {got} CPU {want}"
                );
                lit += usize::from(want.abs() > 1e-3);
            }
        }
    }
    assert!(lit > 100, "the slices cut through the storm ({lit} pixels)");

    // The probe on a horizontal slice: the ray's point on the plane, every attribute there.
    let (w, h) = player.size();
    let plane = Slice {
        axis: Axis::Z,
        at: mid(2),
        attribute: 0,
    };
    let mut probed = 0;
    for px in [
        [w as f32 / 2.0, h as f32 / 2.0],
        [29.5, 23.0],
        [35.25, 25.75],
    ] {
        let Some(r) = analysis::probe(&mut player, Some(&plane), px).expect("probe") else {
            continue;
        };
        probed += 1;
        assert_eq!(r.found_by, "slice");
        assert_eq!(r.world[2], plane.at);
        let (o, d) = analysis::pixel_ray(&player, px);
        let t = (plane.at - f64::from(o.z)) / f64::from(d.z);
        for k in 0..3 {
            let on_ray = f64::from(o[k]) + t * f64::from(d[k]);
            assert!(
                (on_ray - r.world[k]).abs() < 1e-3 * (1.0 + on_ray.abs()),
                "{r:?}"
            );
        }
        assert!(
            (r.km[2] - (plane.at - bbox[0][2]) / 1e3).abs() < 1e-9,
            "{r:?}"
        );
        assert_eq!(r.values.len(), attrs.len());
        for (a, v) in r.values.iter().enumerate() {
            let (want, voxel) = cpu.sample(a, r.world);
            assert_eq!(v.name, attrs[a].0);
            assert_eq!(v.units, attrs[a].1);
            let got = v.value.expect("a value");
            assert!(close(got, want), "{}: GPU {got} CPU {want}", v.name);
            assert_eq!(v.voxel, Some(voxel), "{}", v.name);
        }
    }
    assert_eq!(probed, 3, "the probes' rays meet the plane");

    // Without a slice: where the shown volume turns opaque, if it does; the values there
    // are the CPU's.
    let centre = [w as f32 / 2.0, h as f32 / 2.0];
    if let Some(r) = analysis::probe(&mut player, None, centre).expect("probe") {
        assert_eq!(r.found_by, "opacity");
        for (a, v) in r.values.iter().enumerate() {
            let (want, _) = cpu.sample(a, r.world);
            assert!(close(v.value.unwrap(), want), "{}", v.name);
        }
    }

    // A line through the domain's centre.
    let from = [bbox[0][0], mid(1), mid(2)];
    let to = [bbox[1][0], bbox[1][1], mid(2)];
    let line = analysis::line_plot(&mut player, from, to, 1).expect("line");
    assert_eq!(line.points.len(), analysis::LINE_SAMPLES);
    let length = (0..3)
        .map(|k| (to[k] - from[k]).powi(2))
        .sum::<f64>()
        .sqrt()
        / 1e3;
    assert!((line.points.last().unwrap().0 - length).abs() < 1e-9);
    for (k, &(dist, v)) in line.points.iter().enumerate() {
        let f = dist / length;
        let p: [f64; 3] = std::array::from_fn(|i| from[i] + f * (to[i] - from[i]));
        let (want, _) = cpu.sample(1, p);
        assert!(
            close(v.unwrap(), want),
            "line point {k}: {v:?} against {want}"
        );
    }
}

#[test]
fn window_slice_probe_and_line_by_script() {
    if gpu().is_none() {
        return;
    }
    let Some(disp) = display() else {
        skip("no X display (DISPLAY unset and Xvfb not installed)");
        return;
    };
    let ds = dataset();
    let dir = out_dir().join("analysis-window");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    // The storm's world box: the slice at its middle height, the line across it.
    let scene = supercell::scene::Scene::load(&ds)
        .and_then(|s| s.open(4.0 / 3.0, None))
        .expect("scene");
    let bbox = scene.view.world_bbox.map(|c| c.map(f64::from));
    let zmid = 0.5 * (bbox[0][2] + bbox[1][2]);
    let zlow = bbox[0][2] + 0.1 * (bbox[1][2] - bbox[0][2]);
    // The first slot's attribute, hidden with key 1 and then sliced: the legend keys the
    // slice by its look.
    let manifest = supercell::dataset::Dataset::open(&ds)
        .unwrap()
        .manifest()
        .clone();
    let hidden = scene.slots[0]
        .map(|a| manifest.attributes[a].name.clone())
        .unwrap();
    let script = format!(
        "key Space; scrub 2; wait-shown 2; slice z {zmid}; probe 200 150; key k; key i; \
         line {x0},{y0},{zmid} {x1},{y1},{zmid}; wait 300ms; screenshot {shot}; \
         dump-state {s1}; pick 200 150; pick 230 160; dump-state {s4}; slice z {zlow}; key ]; key }}; wait 300ms; dump-state {s2}; key z; dump-state {s3}; \
         key 1; slice z {zmid} {hidden}; wait 300ms; dump-state {s5}; quit",
        x0 = bbox[0][0],
        y0 = bbox[0][1],
        x1 = bbox[1][0],
        y1 = bbox[1][1],
        shot = p("shot.png"),
        s1 = p("s1.json"),
        s2 = p("s2.json"),
        s3 = p("s3.json"),
        s4 = p("s4.json"),
        s5 = p("s5.json"),
    );
    let out = std::process::Command::new(bin())
        .args(["play", ds.to_str().unwrap()])
        .args(["--window-size", "400x300", "--render-scale", "0.5"])
        .args(["--threads", "2", "--fps", "20", "--script", &script])
        .env("DISPLAY", &disp.name)
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .expect("run the window");
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() && stderr.contains("cannot open a window") {
        skip(&format!("no window: {stderr}"));
        return;
    }
    assert!(out.status.success(), "the window failed:\n{stderr}");
    let read = |n: &str| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(dir.join(n)).unwrap()).unwrap()
    };
    let s1 = read("s1.json");
    let a = &s1["analysis"];
    assert_eq!(a["slice"]["axis"], "z", "{a}");
    assert_eq!(a["slice"]["at"].as_f64(), Some(zmid));
    assert!(a["slice_image"]["width"].as_u64().unwrap() > 8, "{a}");
    let probe = &a["probe"];
    assert_eq!(probe["found_by"], "slice", "{a}");
    assert_eq!(probe["world"][2].as_f64(), Some(zmid));
    // The window's pixel (200, 150) is the render image's (100, 75) at scale 0.5.
    let px = probe["pixel"][0].as_f64().unwrap();
    assert!((px - 100.0).abs() <= 1.0, "{probe}");
    let cpu = CpuFrame::read(&ds, 2);
    let world: [f64; 3] = std::array::from_fn(|k| probe["world"][k].as_f64().unwrap());
    for (k, v) in probe["values"].as_array().unwrap().iter().enumerate() {
        let (want, voxel) = cpu.sample(k, world);
        let got = v["value"].as_f64().unwrap();
        assert!(close(got, want), "{v}: CPU {want}");
        let named: Vec<i64> = (0..3).map(|c| v["voxel"][c].as_i64().unwrap()).collect();
        assert_eq!(named, voxel.map(i64::from), "{v}");
    }
    assert_eq!(
        a["line"]["points"].as_array().unwrap().len(),
        analysis::LINE_SAMPLES
    );
    assert!(dir.join("shot.png").is_file());
    // Two picks: a line between the probe's points at those pixels (on the slice plane).
    let s4 = read("s4.json");
    let line = &s4["analysis"]["line"];
    assert_eq!(line["from"], probe["world"], "{line}");
    assert_eq!(line["to"][2].as_f64(), Some(zmid), "{line}");
    assert_ne!(line["to"], line["from"]);
    // ] moves the slice up a voxel, } ten more (the image follows on the next frame); z then cycles
    // z → none.
    let s2 = read("s2.json");
    let moved = zlow + 11.0 * f64::from(scene.view.voxel_size);
    let at = s2["analysis"]["slice"]["at"].as_f64().unwrap();
    assert!((at - moved).abs() < 1e-6, "{at} against {moved}");
    assert_eq!(
        s2["analysis"]["slice_image"]["slice"]["at"].as_f64(),
        Some(at)
    );
    let s3 = read("s3.json");
    assert!(s3["analysis"]["slice"].is_null(), "{}", s3["analysis"]);
    assert!(
        s3["analysis"]["slice_image"].is_null(),
        "{}",
        s3["analysis"]
    );
    // The volume's keys alone while the slice shows a shown attribute; a slice of a hidden
    // attribute adds its key, named by its look.
    let bars = |v: &serde_json::Value| -> Vec<(String, String)> {
        v["legend"]["bars"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| {
                let s = |k: &str| b[k].as_str().unwrap().to_string();
                (s("name"), s("look"))
            })
            .collect()
    };
    let before = bars(&s1);
    assert!(
        before.iter().all(|(_, look)| !look.starts_with("slice:")),
        "{before:?}"
    );
    let after = bars(&read("s5.json"));
    let keys: Vec<&(String, String)> = after.iter().filter(|(n, _)| *n == hidden).collect();
    assert_eq!(keys.len(), 1, "{after:?}");
    assert!(keys[0].1.starts_with("slice: "), "{after:?}");
    assert_eq!(
        after.last(),
        Some(keys[0]),
        "the slice's key comes last: {after:?}"
    );
}
