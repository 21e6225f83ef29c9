//! The WGSL ray-marcher against the CPU reference, on whatever Vulkan device is present
//! (Mesa's lavapipe in CI): every grid type, MIP and shaded modes, negative coordinates and
//! tiles at every level; empty-space skipping against the fixed-step march; corrupt grids.
//!
//! Tolerances (linear RGB, per channel; images 96 × 64):
//! - GPU vs CPU: mean |Δ| ≤ 1e-4, 99th percentile of the per-pixel max |Δ| ≤ 1e-3, at most
//!   0.2 % of pixels off by more than 0.05. Both sides do the same f32 arithmetic, but the
//!   GPU may fuse multiply-adds and its exp/pow differ in the last bits, which could move a
//!   sample across a voxel boundary on a grazing ray. On lavapipe the measured differences
//!   are about 1e-7 mean and 7e-6 max.
//! - HDDA vs fixed-step GPU march: the same bounds. They visit the same lattice and skipped
//!   samples contribute nothing; on lavapipe the images are identical.

mod render_support;

use render_support::*;
use supercell::format::{Grid, GridType};
use supercell::render::{Image, ImageDiff, Mode, Projection, View, render_cpu};

const W: u32 = 96;
const H: u32 = 64;

const TYPES: [GridType; 6] = [
    GridType::Float,
    GridType::Half,
    GridType::Fp4,
    GridType::Fp8,
    GridType::Fp16,
    GridType::FpN,
];

fn save(img: &Image, name: &str) {
    let _ = img.write_png(&out_dir().join(format!("{name}.png")));
}

fn check_close(d: &ImageDiff, what: &str) {
    eprintln!("{what}: {d:?}");
    assert!(
        d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
        "{what}: GPU and CPU differ: {d:?}"
    );
}

fn not_blank(img: &Image, what: &str) {
    let lit = img.linear.iter().filter(|p| p[3] > 0.05).count();
    assert!(
        lit > img.linear.len() / 20,
        "{what}: only {lit} of {} pixels show anything",
        img.linear.len()
    );
}

fn tweak(view: &mut View, mode: Mode) {
    view.settings.mode = mode;
    // Close enough that the volume fills the frame, looking slightly up from below so the
    // negative-z tiles show.
    view.camera.zoom(1.3);
}

#[test]
fn gpu_matches_cpu_for_every_grid_type_and_mode() {
    let Some(mut gpu) = gpu() else { return };
    for t in TYPES {
        let bytes = test_grid(t, true);
        let grid = Grid::parse(&bytes).unwrap();
        for mode in [Mode::Mip, Mode::Shaded] {
            let mut view = view_for(&grid, &["cloud"], W, H);
            tweak(&mut view, mode);
            let g = gpu.render(&[&bytes], &view, W, H);
            let c = render_cpu(&[Some(&grid)], &view, W, H);
            let name = format!("{t:?}_{mode:?}");
            save(&g, &format!("{name}_gpu"));
            save(&c, &format!("{name}_cpu"));
            not_blank(&c, &name);
            check_close(&g.diff(&c), &name);
        }
    }
}

#[test]
fn tiles_at_every_level_are_read() {
    let Some(mut gpu) = gpu() else { return };
    // MIP straight down the z axis (orthographic): each pixel's maximum includes the value
    // of every tile its column crosses; with tiles the image must change where they are.
    for t in [GridType::Float, GridType::Half, GridType::Fp8] {
        let plain = test_grid(t, false);
        let tiled = test_grid(t, true);
        let gp = Grid::parse(&plain).unwrap();
        let gt = Grid::parse(&tiled).unwrap();
        let mut view = view_for(&gt, &["cloud"], W, H);
        view.settings.mode = Mode::Mip;
        view.camera.projection = Projection::Orthographic;
        view.camera.pitch_deg = 30.0;
        view.camera.fit_to(view.world_bbox, W as f32 / H as f32);
        let a = gpu.render(&[&plain], &view, W, H);
        let b = gpu.render(&[&tiled], &view, W, H);
        let cb = render_cpu(&[Some(&gt)], &view, W, H);
        let ca = render_cpu(&[Some(&gp)], &view, W, H);
        save(&b, &format!("tiles_{t:?}_gpu"));
        check_close(&b.diff(&cb), &format!("tiles {t:?}"));
        check_close(&a.diff(&ca), &format!("no tiles {t:?}"));
        let changed = a
            .linear
            .iter()
            .zip(&b.linear)
            .filter(|(p, q)| (p[3] - q[3]).abs() > 0.05)
            .count();
        assert!(changed > 100, "{t:?}: tiles changed only {changed} pixels");
        // The maximum over a column through the 0.9 lower tile reaches 0.9.
        let top = b.linear.iter().map(|p| p[3]).fold(0.0, f32::max);
        assert!(top >= LOWER_TILE_VALUE - 0.02, "{t:?}: brightest MIP {top}");
    }
}

#[test]
fn hdda_matches_fixed_step() {
    let Some(mut gpu) = gpu() else { return };
    for t in [GridType::Float, GridType::FpN, GridType::Half] {
        let bytes = test_grid(t, true);
        let grid = Grid::parse(&bytes).unwrap();
        for mode in [Mode::Shaded, Mode::Mip, Mode::Isosurface] {
            let mut view = view_for(&grid, &["cloud"], W, H);
            tweak(&mut view, mode);
            view.settings.iso_value = 0.35;
            // Fixed base steps on both sides: skipping (tiles, acceleration cells) must
            // only drop samples that add nothing.
            view.settings.max_step_scale = 1;
            view.settings.hdda = true;
            view.settings.accel = true;
            let a = gpu.render(&[&bytes], &view, W, H);
            view.settings.hdda = false;
            view.settings.accel = false;
            let b = gpu.render(&[&bytes], &view, W, H);
            let d = a.diff(&b);
            eprintln!("hdda vs fixed {t:?} {mode:?}: {d:?}");
            save(&a, &format!("hdda_{t:?}_{mode:?}"));
            assert!(
                d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
                "{t:?} {mode:?}: HDDA and fixed-step images differ: {d:?}"
            );
        }
    }
}

#[test]
fn isosurface_and_orthographic_match_cpu() {
    let Some(mut gpu) = gpu() else { return };
    let bytes = test_grid(GridType::Float, true);
    let grid = Grid::parse(&bytes).unwrap();
    for (mode, ortho) in [
        (Mode::Isosurface, false),
        (Mode::Isosurface, true),
        (Mode::Shaded, true),
    ] {
        let mut view = view_for(&grid, &["cloud"], W, H);
        tweak(&mut view, mode);
        view.settings.iso_value = 0.35;
        if ortho {
            view.camera.projection = Projection::Orthographic;
            view.camera.fit_to(view.world_bbox, W as f32 / H as f32);
        }
        let g = gpu.render(&[&bytes], &view, W, H);
        let c = render_cpu(&[Some(&grid)], &view, W, H);
        let name = format!("{mode:?}_ortho{ortho}");
        save(&g, &format!("{name}_gpu"));
        check_close(&g.diff(&c), &name);
    }
}

#[test]
fn three_attributes_from_one_slot_buffer() {
    let Some(mut gpu) = gpu() else { return };
    // Three grids of different types at 4 KiB-aligned offsets of one buffer, as a frame
    // slot holds them.
    let grids = [
        test_grid(GridType::Fp16, true),
        test_grid(GridType::Fp8, false),
        test_grid(GridType::Float, false),
    ];
    let mut slot = Vec::new();
    let mut offsets = Vec::new();
    for g in &grids {
        offsets.push(slot.len() as u64);
        slot.extend_from_slice(g);
        slot.resize(slot.len().div_ceil(4096) * 4096, 0);
    }
    let parsed: Vec<Grid> = grids.iter().map(|g| Grid::parse(g).unwrap()).collect();
    let mut view = view_for(&parsed[0], &["cloud", "rain", "wind_speed"], W, H);
    tweak(&mut view, Mode::Shaded);
    // The wind preset hides values below 0.3 of its range; let this test grid show.
    if let Some(a) = view.attributes[2].as_mut() {
        a.tf.opacity = vec![(0.5, 0.0), (1.0, 1.0)];
    }
    let r = &mut gpu.r;
    let buf = supercell::render::upload_slot(&gpu.ctx.device, &gpu.ctx.queue, &slot);
    let slices: Vec<_> = grids
        .iter()
        .zip(&offsets)
        .map(|(g, &o)| {
            Some(supercell::render::GridSlice {
                buffer: &buf,
                offset: o,
                size: g.len() as u64,
            })
        })
        .collect();
    r.set_grids(&slices).unwrap();
    r.render(&view, W, H).unwrap();
    let g = r.read_image().unwrap();
    let refs: Vec<Option<&Grid>> = parsed.iter().map(Some).collect();
    let c = render_cpu(&refs, &view, W, H);
    save(&g, "three_attributes_gpu");
    check_close(&g.diff(&c), "three attributes");
    // Switching one attribute off changes the picture.
    view.attributes[1].as_mut().unwrap().enabled = false;
    r.render(&view, W, H).unwrap();
    let off = r.read_image().unwrap();
    let d = off.diff(&g);
    assert!(
        d.max > 0.02 && d.mean > 1e-3,
        "disabling rain changed nothing: {d:?}"
    );
}

fn corruptions(good: &[u8]) -> Vec<(String, Vec<u8>)> {
    let mut v = Vec::new();
    // Half-written: the second half never arrived.
    let mut half = good.to_vec();
    let n = half.len();
    half[n / 2..].fill(0);
    v.push(("half written".to_string(), half));
    // Truncated buffer.
    v.push(("truncated".into(), good[..good.len() / 3].to_vec()));
    // Random bytes all over, several seeds.
    for seed in 1..=4u64 {
        let mut b = good.to_vec();
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for _ in 0..2000 {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let i = (s % b.len() as u64) as usize;
            b[i] = (s >> 40) as u8;
        }
        v.push((format!("random bytes {seed}"), b));
    }
    // Header fields that steer the walk: root offset, tile count, child offsets, map.
    let root_field = supercell::format::layout::GRID_SIZE as usize
        + supercell::format::layout::TREE_OFF_NODE_OFFSET_ROOT as usize;
    let mut b = good.to_vec();
    b[root_field..root_field + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    v.push(("root offset -1".into(), b));
    let root = supercell::format::layout::GRID_SIZE as usize
        + u64::from_le_bytes(good[root_field..root_field + 8].try_into().unwrap()) as usize;
    let mut b = good.to_vec();
    let ts = root + supercell::format::layout::ROOT_OFF_TABLE_SIZE as usize;
    b[ts..ts + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    v.push(("root tile count 2^32-1".into(), b));
    let mut b = good.to_vec();
    for t in 0..8 {
        let c = root + 64 + t * 32 + 8;
        if c + 8 <= b.len() {
            b[c..c + 8].copy_from_slice(&(0x7fff_fff0u64 + t as u64 * 32).to_le_bytes());
        }
    }
    v.push(("child offsets past the end".into(), b));
    let mut b = good.to_vec();
    let m = supercell::format::layout::GRID_OFF_MAP as usize;
    for i in 0..21 {
        b[m + 4 * i..m + 4 * i + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    }
    v.push(("NaN map".into(), b));
    let mut b = good.to_vec();
    // Every internal-node mask set: children "everywhere", mostly pointing at garbage.
    let lowers = supercell::format::layout::GRID_SIZE as usize
        + u64::from_le_bytes(good[672 + 8..672 + 16].try_into().unwrap()) as usize;
    b[lowers + 32..lowers + 32 + 1024].fill(0xff);
    v.push(("lower masks all ones".into(), b));
    v
}

#[test]
fn corrupt_grids_render_without_fault() {
    let Some(mut gpu) = gpu() else { return };
    for t in [GridType::Float, GridType::FpN, GridType::Half] {
        let good = test_grid(t, true);
        let grid = Grid::parse(&good).unwrap();
        let mut view = view_for(&grid, &["cloud"], W, H);
        tweak(&mut view, Mode::Shaded);
        // Small step cap and work budget: a corrupt grid may send rays anywhere.
        view.settings.work_budget = 1 << 16;
        for (what, bytes) in corruptions(&good) {
            let start = std::time::Instant::now();
            let img = gpu.render(&[&bytes], &view, W, H);
            let secs = start.elapsed().as_secs_f64();
            eprintln!("{t:?} {what}: rendered in {secs:.2} s");
            assert_eq!(img.linear.len(), (W * H) as usize);
            assert!(secs < 60.0, "{t:?} {what}: took {secs:.1} s");
        }
        // The device survived: a good grid still renders as the CPU says.
        let g = gpu.render(&[&good], &view, W, H);
        let c = render_cpu(&[Some(&grid)], &view, W, H);
        check_close(&g.diff(&c), &format!("{t:?} after corrupt grids"));
    }
}

#[test]
fn adaptive_steps_stay_close_to_fixed_steps() {
    let Some(mut gpu) = gpu() else { return };
    for t in [GridType::Float, GridType::Fp8] {
        let bytes = test_grid(t, true);
        let grid = Grid::parse(&bytes).unwrap();
        let mut view = view_for(&grid, &["cloud"], W, H);
        tweak(&mut view, Mode::Shaded);
        // Thin enough that adaptive steps engage over much of the volume.
        if let Some(a) = view.attributes[0].as_mut() {
            a.tf.extinction *= 0.05;
        }
        view.settings.max_step_scale = 4;
        view.settings.step_voxels = 0.5;
        // Large enough that steps double over much of the volume (σ·dt is 0.05–0.1 here).
        view.settings.step_tau = 0.2;
        let a = gpu.render(&[&bytes], &view, W, H);
        let c = render_cpu(&[Some(&grid)], &view, W, H);
        check_close(&a.diff(&c), &format!("adaptive {t:?} GPU vs CPU"));
        view.settings.max_step_scale = 1;
        let b = gpu.render(&[&bytes], &view, W, H);
        let d = a.diff(&b);
        eprintln!("adaptive vs fixed {t:?}: {d:?}");
        save(&a, &format!("adaptive_{t:?}"));
        assert!(d.max > 0.0, "{t:?}: adaptive steps never engaged");
        // Doubled steps sample the test volume's sharp edges half as often, which moves
        // a few pixels by up to ~0.15 (measured on lavapipe: mean 0.0055, p99 0.07); the
        // bound catches a broken step rule (skipped media, wrong opacity per step).
        assert!(
            d.mean <= 1e-2 && d.p99 <= 0.1,
            "{t:?}: adaptive steps moved the picture too far: {d:?}"
        );
    }
}

/// `render --bench` with no `--bench-sizes`: on a software adapter (lavapipe in CI) one
/// small size, said in the output, so the timing ends in seconds rather than hours; on a
/// hardware adapter the three sizes up to 4K.
#[test]
fn render_bench_times_one_size_on_a_software_adapter() {
    let Some(gpu) = gpu() else { return };
    let software = gpu.ctx.caps.software;
    drop(gpu);
    let dir = out_dir().join("bench-default");
    let _ = std::fs::remove_dir_all(&dir);
    small_storm(
        &dir,
        24,
        1,
        vec![supercell::synth::Attribute::Cloud],
        "bench test",
    );
    let mut cmd = supercell_command();
    cmd.args([
        "render",
        dir.to_str().unwrap(),
        "--bench",
        "--attributes",
        "cloud",
    ]);
    if !software {
        // Three sizes up to 4K: a couple of renders each is enough to see them.
        cmd.args(["--bench-frames", "1"]);
    }
    let out = cmd.output().expect("run supercell render --bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One speed-up line per size timed.
    let sizes: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("speed-up over the fixed-step march"))
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    if software {
        assert_eq!(sizes, ["320x180"], "{stdout}");
        assert!(
            stdout.contains("software Vulkan adapter") && stdout.contains("one size, 320x180"),
            "the output says which size and why:\n{stdout}"
        );
    } else {
        assert_eq!(sizes, ["1280x720", "1920x1080", "3840x2160"], "{stdout}");
    }
}

/// `render` uploads a frame as parts of the renderer's size and binds them: with parts
/// forced to 64 KiB (`SUPERCELL_PART_BYTES`), a frame spanning several parts renders the
/// same image as in one part (as a frame over the device's part size does on any device).
#[test]
fn render_command_draws_a_frame_over_several_parts() {
    let Some(gpu) = gpu() else { return };
    drop(gpu);
    let dir = out_dir().join("render-parts");
    let _ = std::fs::remove_dir_all(&dir);
    let attributes = vec![
        supercell::synth::Attribute::Cloud,
        supercell::synth::Attribute::Rain,
    ];
    small_storm(&dir.join("data"), 48, 1, attributes, "render parts test");
    let slot = supercell::dataset::Dataset::open(dir.join("data"))
        .expect("dataset opens")
        .frame(0)
        .expect("frame 0")
        .slot_size;
    assert!(
        slot > 2 * 65536,
        "the frame spans several 64 KiB parts: {slot}"
    );
    let render = |out: &str, part_bytes: Option<&str>| {
        let mut cmd = supercell_command();
        cmd.args([
            "render",
            dir.join("data").to_str().unwrap(),
            "--size",
            "64x48",
        ])
        .args(["--attributes", "cloud,rain", "--out"])
        .arg(dir.join(out))
        .env_remove("SUPERCELL_PART_BYTES");
        if let Some(b) = part_bytes {
            cmd.env("SUPERCELL_PART_BYTES", b);
        }
        let o = cmd.output().expect("run supercell render");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let png = std::fs::read(dir.join(out).join("frame_00000.png")).expect("png written");
        (png, String::from_utf8_lossy(&o.stderr).into_owned())
    };
    let (whole, _) = render("whole", None);
    let (split, said) = render("split", Some("65536"));
    let parts = slot.div_ceil(65536);
    assert!(
        said.contains(&format!("from {parts} parts")),
        "the frame was bound as {parts} parts:\n{said}"
    );
    assert_eq!(whole, split, "the frame over parts renders as in one part");
}
