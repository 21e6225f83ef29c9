//! A grid with finer voxels than the others (a nested grid, as the storm's funnel has) is
//! marched at its own resolution inside its bbox, on the GPU and in the CPU reference.
//!
//! The scene: a coarse grid of 4-unit voxels (transparent values only, as a stand-in for
//! the storm's other grids) and a fine grid of 1-unit voxels holding a sheet two fine voxels
//! thick, seen face-on by an orthographic camera. The base step is the coarse voxel (4
//! units), twice the sheet's thickness: a march at that step would catch the sheet at one
//! sample or none, and the sheet's opacity would be anything from 0 to twice the right
//! amount. Stepped at the fine voxel, a linear opacity ramp integrates the trilinear
//! profile exactly: the optical depth is the extinction times two.

mod render_support;

use render_support::*;
use supercell::format::{
    BuildOptions, ChecksumMode, Grid, GridType, LeafBrick, SparseVolume, build_grid,
};
use supercell::render::{AttributeView, Projection, TransferFunction, View, render_cpu};

const W: u32 = 64;
const H: u32 = 48;
const COARSE: f64 = 4.0;
const FINE: f64 = 1.0;
/// Extinction of the sheet's value 1, per world unit.
const EXTINCTION: f32 = 0.5;
/// The sheet: fine voxels x ∈ {SHEET_X, SHEET_X + 1}, y and z in [32, 96).
const SHEET_X: i32 = 61;

fn grid(voxel: f64, bricks: Vec<LeafBrick>) -> Vec<u8> {
    let opts = BuildOptions {
        name: format!("voxel_{voxel}"),
        grid_type: GridType::Float,
        voxel_size: [voxel; 3],
        world_origin: [0.0; 3],
        checksum: ChecksumMode::Disabled,
        ..Default::default()
    };
    let vol = SparseVolume {
        background: 0.0,
        bricks,
    };
    build_grid(&vol, &opts).expect("build")
}

/// Zeros over world [0, 128)³ (two corner leaves of the coarse grid).
fn coarse_grid() -> Vec<u8> {
    grid(
        COARSE,
        vec![
            LeafBrick::filled([0, 0, 0], 0.0),
            LeafBrick::filled([24, 24, 24], 0.0),
        ],
    )
}

fn sheet_grid() -> Vec<u8> {
    let mut bricks = Vec::new();
    for by in (32..96).step_by(8) {
        for bz in (32..96).step_by(8) {
            let mut b = LeafBrick::filled([56, by, bz], 0.0);
            // Only the sheet's voxels are active (the rest is background, as in a real grid).
            b.active = [0; 8];
            for y in 0..8 {
                for z in 0..8 {
                    for x in [SHEET_X - 56, SHEET_X - 55] {
                        b.set_active(LeafBrick::index(x as usize, y, z), 1.0);
                    }
                }
            }
            bricks.push(b);
        }
    }
    grid(FINE, bricks)
}

fn view() -> View {
    let tf = || {
        let mut tf = TransferFunction::preset("cloud", [0.0, 1.0], 128.0);
        tf.opacity = vec![(0.0, 0.0), (1.0, 1.0)];
        tf.extinction = EXTINCTION;
        tf.casts_shadow = false;
        Some(AttributeView { enabled: true, tf })
    };
    let bbox = [[0.0; 3], [128.0; 3]];
    // The base voxel is the coarsest grid's, as scenes choose it.
    let mut v = View::new(bbox, COARSE as f32, vec![tf(), tf()], W as f32 / H as f32);
    v.camera.projection = Projection::Orthographic;
    v.camera.ortho_height = 48.0;
    v.camera.target = [62.0, 64.0, 64.0];
    v.camera.distance = 300.0;
    // Looking along −x, face-on to the sheet.
    v.camera.yaw_deg = 0.0;
    v.camera.pitch_deg = 0.0;
    v.settings.ground = false;
    v.settings.shadows = false;
    v.settings.jitter = false;
    v
}

/// Opacity (1 − transmittance) of every pixel whose ray crosses the sheet's middle.
fn sheet_alphas(img: &supercell::render::Image) -> Vec<f32> {
    let mut out = Vec::new();
    // The sheet spans y, z ∈ [32, 96) around the target (64, 64): ±32 units of the view's
    // 48 (ortho height) by 64 (width): the central two thirds of the image hold it.
    for y in H / 6..H - H / 6 {
        for x in W / 6..W - W / 6 {
            out.push(img.linear[(y * W + x) as usize][3]);
        }
    }
    out
}

#[test]
fn a_nested_grid_is_marched_at_its_own_voxels() {
    let coarse = coarse_grid();
    let fine = sheet_grid();
    let (cg, fg) = (Grid::parse(&coarse).unwrap(), Grid::parse(&fine).unwrap());
    let want = 1.0 - (-EXTINCTION * 2.0 * FINE as f32).exp();
    for accel in [true, false] {
        let mut v = view();
        v.settings.accel = accel;
        let c = render_cpu(&[Some(&cg), Some(&fg)], &v, W, H);
        let alphas = sheet_alphas(&c);
        for (i, a) in alphas.iter().enumerate() {
            assert!(
                (a - want).abs() <= 0.01,
                "accel {accel}: pixel {i} of the sheet has opacity {a}, want {want}"
            );
        }
        let Some(mut gpu) = gpu() else { continue };
        let g = gpu.render(&[&coarse, &fine], &v, W, H);
        let _ = g.write_png(&out_dir().join(format!("nested_sheet_accel_{accel}.png")));
        let d = g.diff(&c);
        eprintln!("accel {accel}: GPU vs CPU {d:?}");
        assert!(
            d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
            "accel {accel}: GPU and CPU differ: {d:?}"
        );
        for (i, a) in sheet_alphas(&g).iter().enumerate() {
            assert!(
                (a - want).abs() <= 0.01,
                "GPU, accel {accel}: pixel {i} of the sheet has opacity {a}, want {want}"
            );
        }
    }
}

/// A coarse grid whose lowest cells hold a dense block at one end (the reference grid of the
/// sun's shadows, as the storm's cloud with its wall cloud is) and a fine blob reaching
/// below that grid's bbox (as the nested funnel reaches below the cloud's lowest voxel):
/// the sun grid, on the reference grid's cells widened to every grid's box, is built and
/// read the same on the GPU as in the CPU reference.
#[test]
fn a_grid_below_the_shadow_reference_is_shadowed_alike_on_gpu_and_cpu() {
    // Coarse voxels x, y in [0, 32), z in [8, 16) (world z 32..64), zero but for the block
    // x in [27, 32), z in [12, 16) (world x 108..128, z 48..64).
    let coarse = |block: f32| {
        let mut bricks = Vec::new();
        for bx in (0..32).step_by(8) {
            for by in (0..32).step_by(8) {
                let mut b = LeafBrick::filled([bx, by, 8], 0.0);
                for x in 0..8 {
                    for y in 0..8 {
                        for z in 4..8 {
                            if bx + x as i32 >= 27 {
                                b.set_active(LeafBrick::index(x, y, z), block);
                            }
                        }
                    }
                }
                bricks.push(b);
            }
        }
        grid(COARSE, bricks)
    };
    // Fine voxels x, y in [56, 72), z in [8, 24): world z 8..24, below the coarse bbox.
    let mut blob = Vec::new();
    for bx in (56..72).step_by(8) {
        for by in (56..72).step_by(8) {
            for bz in (8..24).step_by(8) {
                blob.push(LeafBrick::filled([bx, by, bz], 1.0));
            }
        }
    }
    let blob = grid(FINE, blob);
    let bg = Grid::parse(&blob).unwrap();
    let mut v = view();
    v.settings.shadows = true;
    // From +x, 20° up: from the blob the sun's rays rise under the block and leave the
    // coarse bbox below it.
    v.settings.sun_azimuth_deg = 0.0;
    v.settings.sun_elevation_deg = 20.0;
    for a in v.attributes.iter_mut().flatten() {
        a.tf.casts_shadow = true;
    }
    // A dense block, a thin blob (lit through).
    if let [Some(c), Some(f)] = &mut v.attributes[..] {
        c.tf.extinction = 2.0;
        f.tf.extinction = 0.05;
    }
    v.camera.projection = Projection::Perspective;
    v.camera.fov_y_deg = 30.0;
    v.camera.target = [64.0, 64.0, 16.0];
    v.camera.yaw_deg = -90.0;
    v.camera.distance = 150.0;
    let dark = coarse(1.0);
    let dg = Grid::parse(&dark).unwrap();
    let under = render_cpu(&[Some(&dg), Some(&bg)], &v, W, H);
    let Some(mut gpu) = gpu() else { return };
    let g = gpu.render(&[&dark, &blob], &v, W, H);
    let _ = g.write_png(&out_dir().join("nested_blob_below_block.png"));
    let d = g.diff(&under);
    eprintln!("blob below the block: GPU vs CPU {d:?}");
    assert!(
        d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
        "GPU and CPU differ: {d:?}"
    );
}
