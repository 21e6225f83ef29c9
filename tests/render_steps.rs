//! Adaptive steps against fixed steps where a thin medium borders a dense one: a long step
//! taken in the thin medium's acceleration cells must not run into the dense medium's cells
//! (whose near part it would leave unsampled), on the GPU and in the CPU reference.
//!
//! The volume (index x ∈ [0, 40), y, z ∈ [0, 32), cells of 8 voxels): a thin medium over
//! x < 32 whose cells, up to x = 24, allow 16 base steps per step, then an 8-voxel slab of a
//! dense medium (optical depth about 0.8 across). Seen along +x, a 16-voxel step from
//! x ∈ [16, 24) used to land anywhere in the slab, so rays lost a random part of it.

mod render_support;

use render_support::*;
use supercell::format::{Grid, LEAF_DIM, LeafBrick, SparseVolume, build_grid};
use supercell::render::{Image, Mode, View, render_cpu};

const W: u32 = 96;
const H: u32 = 64;

/// Value of the thin medium (opacity about 0.16 under [`view`]'s transfer function).
const THIN: f32 = 0.2;
/// Value of the dense slab (opacity 1).
const DENSE: f32 = 1.0;

fn thin_then_dense() -> Vec<u8> {
    let mut bricks = Vec::new();
    for bx in (0..40).step_by(LEAF_DIM) {
        for by in (0..32).step_by(LEAF_DIM) {
            for bz in (0..32).step_by(LEAF_DIM) {
                let mut b = LeafBrick::filled([bx, by, bz], 0.0);
                let v = if bx < 32 { THIN } else { DENSE };
                for n in 0..LEAF_DIM * LEAF_DIM * LEAF_DIM {
                    b.set_active(n, v);
                }
                bricks.push(b);
            }
        }
    }
    let vol = SparseVolume {
        background: 0.0,
        bricks,
    };
    build_grid(&vol, &options(supercell::format::GridType::Float)).expect("test grid builds")
}

/// Looking along +x (slightly down), through the thin medium into the slab, with steps of
/// one voxel and the default `step_tau` (0.3) and `max_step_scale` (16).
fn view(grid: &Grid<'_>) -> View {
    let mut v = view_for(grid, &["cloud"], W, H);
    v.settings.mode = Mode::Shaded;
    v.settings.step_voxels = 1.0;
    v.settings.step_tau = 0.3;
    v.settings.max_step_scale = 16;
    v.camera.yaw_deg = 180.0;
    v.camera.pitch_deg = 8.0;
    v.camera.zoom(1.4);
    let voxel = grid.voxel_size()[0] as f32;
    if let Some(a) = v.attributes[0].as_mut() {
        a.tf.opacity = vec![(0.05, 0.0), (1.0, 1.0)];
        // 0.1 of optical depth per voxel at opacity 1: the thin medium's cells (bound
        // 0.016 per voxel) take 16 base steps per step, the cells next to the slab 3.
        a.tf.extinction = 0.1 / voxel;
    }
    v
}

fn save(img: &Image, name: &str) {
    let _ = img.write_png(&out_dir().join(format!("{name}.png")));
}

/// The largest |mean of a − b| over 8 × 8-pixel tiles, of coverage (alpha) and of linear
/// RGB: a systematic difference (a region drawn thinner or denser), which the per-pixel
/// noise of longer steps (a random sample position per pixel) averages out of.
fn tile_bias(a: &Image, b: &Image) -> f32 {
    let mut worst = 0.0f32;
    for ty in (0..a.height).step_by(8) {
        for tx in (0..a.width).step_by(8) {
            let mut sum = [0.0f64; 4];
            for y in ty..(ty + 8).min(a.height) {
                for x in tx..(tx + 8).min(a.width) {
                    let i = (y * a.width + x) as usize;
                    for c in 0..4 {
                        sum[c] += f64::from(a.linear[i][c] - b.linear[i][c]);
                    }
                }
            }
            eprint!("{:+.3} ", sum[3] / 64.0);
            if tx + 8 >= a.width { eprintln!(); }
            for v in sum {
                worst = worst.max((v / 64.0).abs() as f32);
            }
        }
    }
    worst
}

/// Largest tile bias allowed between adaptive and fixed steps.
const MAX_BIAS: f32 = 0.01;

#[test]
fn long_steps_end_where_the_cells_bound_stops_holding() {
    let bytes = thin_then_dense();
    let grid = Grid::parse(&bytes).unwrap();
    let mut view = view(&grid);
    let adaptive_cpu = render_cpu(&[Some(&grid)], &view, W, H);
    view.settings.max_step_scale = 1;
    let fixed_cpu = render_cpu(&[Some(&grid)], &view, W, H);
    save(&adaptive_cpu, "steps_adaptive_cpu");
    save(&fixed_cpu, "steps_fixed_cpu");
    let bias = tile_bias(&adaptive_cpu, &fixed_cpu);
    eprintln!(
        "CPU adaptive vs fixed: {:?}, tile bias {bias}",
        adaptive_cpu.diff(&fixed_cpu)
    );
    // Measured (CPU and lavapipe): tile bias BEFORE before long steps stopped where the
    // cell's bound stops holding (they crossed the slab's near part at random), AFTER after.
    assert!(
        bias <= MAX_BIAS,
        "CPU: adaptive steps drew the slab differently from fixed steps: tile bias {bias}"
    );

    let Some(mut gpu) = gpu() else { return };
    view.settings.max_step_scale = 16;
    let adaptive = gpu.render(&[&bytes], &view, W, H);
    save(&adaptive, "steps_adaptive");
    let g = adaptive.diff(&adaptive_cpu);
    eprintln!("adaptive GPU vs CPU: {g:?}");
    assert!(
        g.mean <= 1e-4 && g.p99 <= 1e-3 && g.frac_over_5pct <= 0.002,
        "adaptive steps: GPU and CPU differ: {g:?}"
    );
    view.settings.max_step_scale = 1;
    let fixed = gpu.render(&[&bytes], &view, W, H);
    save(&fixed, "steps_fixed");
    let d = adaptive.diff(&fixed);
    let bias = tile_bias(&adaptive, &fixed);
    eprintln!("GPU adaptive vs fixed: {d:?}, tile bias {bias}");
    assert!(d.max > 0.0, "adaptive steps never engaged");
    assert!(
        bias <= MAX_BIAS,
        "GPU: adaptive steps drew the slab differently from fixed steps: tile bias {bias}"
    );
}
