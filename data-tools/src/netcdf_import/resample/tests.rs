//! Tests of the resampling: brackets, weights, columns and bricks against the voxel-by-voxel
//! definitions.

use super::*;

fn field(nx: usize, ny: usize, nz: usize, f: impl Fn(usize, usize, usize) -> f32) -> NativeField {
    let mut values = Vec::new();
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                values.push(f(i, j, k));
            }
        }
    }
    NativeField { nx, ny, nz, values }
}

#[test]
fn linear_in_z_between_stretched_levels() {
    // Levels at 50, 150, 350, 750 m; value = level index × 10.
    let f = field(2, 2, 4, |_, _, k| k as f32 * 10.0);
    let h = Heights::Shared(vec![50.0, 150.0, 350.0, 750.0]);
    let g = VoxelGrid::covering(2, 2, [100.0, 100.0], [0.0, 0.0], 50.0, 750.0, [100.0; 3]);
    assert_eq!(g.dims, [2, 2, 8]);
    // z = 50 + 3·100 = 350: exactly level 2.
    assert_eq!(voxel_value(&f, &h, &g, 0, 0, 3), Some(20.0));
    // z = 250: halfway between 150 and 350.
    assert_eq!(voxel_value(&f, &h, &g, 1, 1, 2), Some(15.0));
    // z = 550: halfway between 350 and 750.
    assert_eq!(voxel_value(&f, &h, &g, 1, 0, 5), Some(25.0));
    // z = 750: the top level.
    assert_eq!(voxel_value(&f, &h, &g, 0, 1, 7), Some(30.0));
}

#[test]
fn per_column_heights_and_outside_columns() {
    // Column (1, 0) is 100 m higher than column (0, 0).
    let f = field(2, 1, 2, |_, _, k| k as f32);
    let h = Heights::PerColumn(vec![0.0, 100.0, 100.0, 200.0]);
    let g = VoxelGrid::covering(2, 1, [100.0, 100.0], [0.0, 0.0], 0.0, 200.0, [50.0; 3]);
    assert_eq!(g.dims, [3, 1, 5]);
    assert_eq!(voxel_value(&f, &h, &g, 0, 0, 1), Some(0.5));
    assert_eq!(
        voxel_value(&f, &h, &g, 0, 0, 3),
        None,
        "above column 0's top"
    );
    assert_eq!(voxel_value(&f, &h, &g, 2, 0, 3), Some(0.5));
    assert_eq!(
        voxel_value(&f, &h, &g, 2, 0, 0),
        None,
        "below column 1's bottom"
    );
    // x = 50 between the columns at 0 and 100, z = 100: 1.0 in column 0, 0.0 in 1.
    assert_eq!(voxel_value(&f, &h, &g, 1, 0, 2), Some(0.5));
}

#[test]
fn sparse_keeps_values_above_background_only() {
    let f = field(9, 1, 2, |i, _, _| if i == 8 { 1.0 } else { -2.0 });
    let h = Heights::Shared(vec![0.0, 10.0]);
    let g = VoxelGrid::covering(9, 1, [10.0, 10.0], [0.0, 0.0], 0.0, 10.0, [10.0; 3]);
    let one_sided = to_sparse(&f, &h, &g, Background::AtOrBelow(0.5));
    assert_eq!(one_sided.bricks.len(), 1);
    assert_eq!(one_sided.bricks[0].origin, [8, 0, 0]);
    assert_eq!(one_sided.bricks[0].active_count(), 2);
    let signed = to_sparse(&f, &h, &g, Background::MagnitudeAtOrBelow(0.5));
    assert_eq!(signed.bricks.len(), 2);
    assert_eq!(
        signed.bricks[0].active_count() + signed.bricks[1].active_count(),
        18
    );
}

#[test]
fn bricks_hold_exactly_the_per_voxel_values() {
    // Per-column stretched heights, a NaN, a voxel edge that is not the column spacing
    // (bilinear between columns), and a background that drops some voxels.
    let (nx, ny, nz) = (5, 4, 7);
    let f = field(nx, ny, nz, |i, j, k| {
        if (i, j, k) == (2, 1, 3) {
            f32::NAN
        } else {
            ((i * 7 + j * 13 + k * 29) % 17) as f32 * 0.37 - 1.5
        }
    });
    let mut z = Vec::new();
    for k in 0..nz {
        for j in 0..ny {
            for i in 0..nx {
                z.push((k * k) as f64 * 40.0 + k as f64 * 30.0 + (i + 2 * j) as f64 * 11.0);
            }
        }
    }
    let h = Heights::PerColumn(z);
    let g = VoxelGrid::covering(
        nx,
        ny,
        [100.0, 100.0],
        [0.0, 0.0],
        0.0,
        2100.0,
        [37.0, 61.0, 29.0],
    );
    let bg = Background::MagnitudeAtOrBelow(0.2);
    let sparse = to_sparse(&f, &h, &g, bg);
    let active = check_against_voxel_value(&sparse, &f, &h, &g, bg);
    assert!(active > 100, "{active}");
}

/// Every voxel of `sparse` against `voxel_value` and `bg`: active exactly where the
/// per-voxel rule keeps a value, with its bits; returns the number of active voxels.
fn check_against_voxel_value(
    sparse: &SparseVolume,
    f: &NativeField,
    h: &Heights,
    g: &VoxelGrid,
    bg: Background,
) -> usize {
    let mut active = 0;
    for b in &sparse.bricks {
        for n in 0..LEAF_DIM * LEAF_DIM * LEAF_DIM {
            let (x, y, zz) = (n >> 6, (n >> 3) & 7, n & 7);
            let (i, j, k) = (
                b.origin[0] as usize + x,
                b.origin[1] as usize + y,
                b.origin[2] as usize + zz,
            );
            let want = if i < g.dims[0] && j < g.dims[1] && k < g.dims[2] {
                voxel_value(f, h, g, i, j, k).filter(|v| bg.keeps(*v))
            } else {
                None
            };
            assert_eq!(b.is_active(n), want.is_some(), "({i}, {j}, {k})");
            match want {
                Some(v) => {
                    assert_eq!(b.values[n].to_bits(), v.to_bits(), "({i}, {j}, {k})");
                    active += 1;
                }
                None => assert_eq!(b.values[n].to_bits(), 0, "inactive ({i}, {j}, {k})"),
            }
        }
    }
    // And no voxel the per-voxel rule keeps is missing from the bricks (a brick left
    // out holds none).
    let mut expected = 0;
    for i in 0..g.dims[0] {
        for j in 0..g.dims[1] {
            for k in 0..g.dims[2] {
                let kept = voxel_value(f, h, g, i, j, k).is_some_and(|v| bg.keeps(v));
                expected += usize::from(kept);
            }
        }
    }
    assert_eq!(active, expected, "voxels kept by the rule but left out");
    active
}

#[test]
fn bricks_without_a_source_value_above_the_background_are_skipped_exactly() {
    // A sparse field (the cloud and rain case, where whole bricks are skipped from the
    // native values alone): zero but for a few spikes, at the grid's edges, on brick
    // boundaries after resampling, and a spike just above the background whose
    // interpolated voxels fall below it. Shared and per-column heights, voxels finer
    // and coarser than the columns, both background rules.
    let (nx, ny, nz) = (37, 29, 14);
    let spikes = [
        ((0, 0, 0), 5.0),
        ((36, 28, 13), -4.0),
        ((8, 8, 5), 3.0),
        ((15, 16, 9), -2.5),
        ((23, 4, 1), 0.31),
        ((30, 20, 12), 1.0),
    ];
    let f = field(nx, ny, nz, |i, j, k| {
        spikes
            .iter()
            .find(|(at, _)| *at == (i, j, k))
            .map_or(0.0, |(_, v)| *v)
    });
    let z: Vec<f64> = (0..nz)
        .map(|k| 10.0 + (k * k) as f64 * 21.0 + k as f64 * 40.0)
        .collect();
    let mut per_column = Vec::new();
    for level in &z {
        for j in 0..ny {
            for i in 0..nx {
                per_column.push(level + ((i * 3 + j * 5) % 7) as f64 * 6.0);
            }
        }
    }
    let (lo, hi) = (z[0], z[nz - 1] + 36.0);
    for h in [Heights::Shared(z.clone()), Heights::PerColumn(per_column)] {
        for voxel in [
            [50.0, 50.0, 13.0],
            [100.0, 100.0, 31.0],
            [220.0, 170.0, 90.0],
        ] {
            let g = VoxelGrid::covering(nx, ny, [100.0, 100.0], [0.0, 0.0], lo, hi, voxel);
            for bg in [
                Background::AtOrBelow(0.3),
                Background::MagnitudeAtOrBelow(0.3),
            ] {
                let sparse = to_sparse(&f, &h, &g, bg);
                let active = check_against_voxel_value(&sparse, &f, &h, &g, bg);
                assert!(active > 0, "{voxel:?} {bg:?}");
                let bricks = g
                    .dims
                    .iter()
                    .map(|d| d.div_ceil(LEAF_DIM))
                    .product::<usize>();
                assert!(
                    sparse.bricks.len() * 4 < bricks,
                    "{voxel:?} {bg:?}: not sparse"
                );
            }
        }
    }
}

#[test]
fn shared_levels_walked_once_give_the_per_voxel_values() {
    // Shared stretched levels (the CM1 case: one walk for every column), voxels both
    // finer and coarser than the columns, a NaN, and a grid that is not a whole number
    // of bricks along any axis.
    let (nx, ny, nz) = (19, 11, 9);
    let f = field(nx, ny, nz, |i, j, k| {
        if (i, j, k) == (7, 3, 4) {
            f32::NAN
        } else {
            ((i * 5 + j * 11 + k * 23) % 19) as f32 * 0.41 - 2.0
        }
    });
    let z: Vec<f64> = (0..nz)
        .map(|k| 25.0 + (k * k) as f64 * 37.5 + k as f64 * 50.0)
        .collect();
    let h = Heights::Shared(z.clone());
    for voxel in [
        [100.0, 100.0, 50.0],
        [37.0, 61.0, 29.0],
        [250.0, 130.0, 400.0],
    ] {
        let g = VoxelGrid::covering(nx, ny, [100.0, 100.0], [0.0, 0.0], z[0], z[nz - 1], voxel);
        let bg = Background::MagnitudeAtOrBelow(0.3);
        let sparse = to_sparse(&f, &h, &g, bg);
        let active = check_against_voxel_value(&sparse, &f, &h, &g, bg);
        assert!(active > 100, "{voxel:?}: {active}");
    }
}

#[test]
fn leaves_encoded_from_the_columns_build_the_volume_grid() {
    use supercell::format::{GridType, build_grid, build_grid_encoded_into};
    let (nx, ny, nz) = (21, 13, 6);
    let f = field(nx, ny, nz, |i, j, k| {
        ((i * 3 + j * 7 + k * 13) % 11) as f32 - 4.0
    });
    let z: Vec<f64> = (0..nz)
        .map(|k| (k * k) as f64 * 30.0 + k as f64 * 20.0)
        .collect();
    let per_column: Vec<f64> = (0..nz)
        .flat_map(|k| {
            (0..nx * ny).map(move |c| (k * k) as f64 * 30.0 + k as f64 * 20.0 + (c % 5) as f64)
        })
        .collect();
    for h in [Heights::Shared(z), Heights::PerColumn(per_column)] {
        for bg in [
            Background::AtOrBelow(1.5),
            Background::MagnitudeAtOrBelow(2.5),
        ] {
            let g = VoxelGrid::covering(
                nx,
                ny,
                [100.0, 100.0],
                [0.0, 0.0],
                0.0,
                900.0,
                [70.0, 100.0, 13.0],
            );
            let opts = BuildOptions {
                name: "x".into(),
                grid_type: GridType::Float,
                voxel_size: g.voxel,
                ..BuildOptions::default()
            };
            let volume = to_sparse(&f, &h, &g, bg);
            assert!(volume.bricks.len() > 10);
            let want = build_grid(&volume, &opts).unwrap();
            let leaves = encode_leaves(&f, &h, &g, bg, &opts, &Vec::new).unwrap();
            assert_eq!(leaves.len(), volume.bricks.len());
            let mut got = Vec::new();
            build_grid_encoded_into(&leaves, &opts, &mut got).unwrap();
            assert!(got == want, "{h:?} {bg:?}: the grids differ");
            // Again into the buffers of those leaves, scribbled over, and a small one
            // (as the import's pool hands them out): the same grid.
            let used: Vec<Vec<u8>> = leaves
                .into_buffers()
                .map(|mut b| {
                    b.fill(0xa5);
                    b
                })
                .chain([vec![0x5a; 7]])
                .collect();
            assert!(used.len() > 2);
            let pool = std::sync::Mutex::new(used);
            let take = || pool.lock().unwrap().pop().unwrap_or_default();
            let again = encode_leaves(&f, &h, &g, bg, &opts, &take).unwrap();
            build_grid_encoded_into(&again, &opts, &mut got).unwrap();
            assert!(
                got == want,
                "{h:?} {bg:?}: the grid from reused buffers differs"
            );
        }
    }
}

#[test]
fn default_dz_is_the_finest_low_layer_rounded() {
    assert_eq!(default_dz(499.999_88), 500.0);
    assert_eq!(default_dz(58.706_055), 58.7);
    assert_eq!(default_dz(214.285_74), 214.0);
    assert_eq!(default_dz(49.999_985), 50.0);
    assert_eq!(default_dz(72.471_82), 72.4);
    assert_eq!(default_dz(1234.5), 1230.0);
    // Column 1's low layers are thinner; the layer at 3.5 km above column 0 is not low.
    let h = Heights::PerColumn(vec![
        0.0, 10.0, // k = 0
        400.0, 110.0, // k = 1
        3500.0, 150.0, // k = 2
        3510.0, 4000.0, // k = 3
    ]);
    let span = HeightSpan::of(&h, 2, 1, 4);
    assert_eq!(span.lo, 0.0);
    assert_eq!(span.hi, 4000.0);
    assert_eq!(span.finest_low_layer, 40.0);
    let shared = HeightSpan::of(&Heights::Shared(vec![100.0, 300.0, 350.0]), 5, 5, 3);
    assert_eq!(shared.finest_low_layer, 50.0);
}

#[test]
fn level_means_removed() {
    let mut f = field(2, 1, 2, |i, _, k| (k * 100 + i) as f32);
    subtract_level_means(&mut f);
    assert_eq!(f.values, vec![-0.5, 0.5, -0.5, 0.5]);
}

#[test]
fn nan_values_are_left_out() {
    let f = field(1, 1, 2, |_, _, k| if k == 0 { f32::NAN } else { 1.0 });
    let h = Heights::Shared(vec![0.0, 10.0]);
    let g = VoxelGrid::covering(1, 1, [10.0, 10.0], [0.0, 0.0], 0.0, 10.0, [10.0; 3]);
    assert_eq!(voxel_value(&f, &h, &g, 0, 0, 0), None);
    assert_eq!(voxel_value(&f, &h, &g, 0, 0, 1), Some(1.0));
}
