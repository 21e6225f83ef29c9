//! The GPU point sampler (`Renderer::sample_points`, what the player's probe, slices and
//! line plots read) against the CPU reader's `Grid::sample_world` at the same world
//! positions: several grid types and attributes in one frame, points at voxel centres, on
//! voxel faces and leaf boundaries, inside tiles of every level, and outside the active
//! region and the index bbox; an empty slot reads as none.
//!
//! Tolerance: 2e-5 absolute on values in 0..1 (the GPU interpolates in `f32` after an `f32`
//! world → index map, the CPU in `f64`), 1e-3 index units on the index coordinate.

mod render_support;

use render_support::*;
use supercell::format::{Grid, GridType, Interpolation, Value};
use supercell::render::{GridInParts, PointSample, SlotPart, upload_slot};

/// Index positions that cover the test grid's cases (see `render_support::test_volume`).
fn index_points() -> Vec<[f64; 3]> {
    let mut p = vec![
        // Voxel centres in the data, and between them.
        [128.0, 0.0, 0.0],
        [120.0, -5.0, -9.0],
        [125.3, 2.7, -3.1],
        // On voxel faces (half-integer index: nearest would flip here).
        [127.5, 0.5, -0.5],
        [131.5, -6.5, 2.5],
        // Across leaf boundaries (leaves start at multiples of 8).
        [119.5, -0.5, -8.5],
        [135.9, 7.99, 7.2],
        // Inside the upper-node tile (x ≥ 128, y ≥ 0, z ≥ 0), the root tile (y < 0, z ≥ 0)
        // and the lower-node tile's brick.
        [140.3, 10.2, 12.7],
        [120.2, -10.4, 8.1],
        [
            f64::from(LOWER_TILE_ORIGIN[0]) + 3.3,
            f64::from(LOWER_TILE_ORIGIN[1]) + 4.6,
            f64::from(LOWER_TILE_ORIGIN[2]) + 2.2,
        ],
        // Outside the active region and the index bbox.
        [100.2, 0.0, 0.0],
        [300.0, 40.0, -70.0],
        [-5000.5, 1e5, 3.0],
    ];
    // A line through the blob, across many leaves.
    for k in 0..40 {
        let t = f64::from(k) / 39.0;
        p.push([104.0 + 48.0 * t, -20.0 + 37.3 * t, 18.0 - 40.1 * t]);
    }
    p
}

fn cpu_value(grid: &Grid<'_>, xyz: [f64; 3]) -> (f64, [f64; 3]) {
    let s = grid.sample_world(xyz, Interpolation::Linear).unwrap();
    let v = match s.value {
        Value::Float(v) => f64::from(v),
        Value::Double(v) => v,
        other => panic!("a scalar grid gave {other:?}"),
    };
    (v, s.index)
}

fn check(grid: &Grid<'_>, xyz: [f64; 3], gpu: Option<PointSample>, what: &str) {
    let g = gpu.unwrap_or_else(|| panic!("{what}: no GPU sample at {xyz:?}"));
    let (v, index) = cpu_value(grid, xyz);
    assert!(
        (f64::from(g.value) - v).abs() <= 2e-5,
        "{what} at {xyz:?} (index {index:?}): GPU {} CPU {v}",
        g.value
    );
    for a in 0..3 {
        assert!(
            (f64::from(g.index[a]) - index[a]).abs() <= 1e-3 * index[a].abs().max(1.0),
            "{what} at {xyz:?}: GPU index {:?} CPU {index:?}",
            g.index
        );
    }
}

/// Grids in one buffer (each at a 256-byte boundary), located as a frame's are.
fn packed(grids: &[&[u8]]) -> (Vec<u8>, Vec<GridInParts>) {
    let mut bytes = Vec::new();
    let mut at = Vec::new();
    for g in grids {
        bytes.resize(bytes.len().next_multiple_of(256), 0);
        at.push(GridInParts {
            part: 0,
            offset: bytes.len() as u64,
            size: g.len() as u64,
        });
        bytes.extend_from_slice(g);
    }
    (bytes, at)
}

#[test]
fn gpu_point_samples_equal_the_cpu_reader_for_every_grid_type() {
    let Some(mut gpu) = gpu() else { return };
    let types = [
        GridType::Float,
        GridType::Half,
        GridType::Fp8,
        GridType::FpN,
    ];
    let grids: Vec<Vec<u8>> = types.iter().map(|&t| test_grid(t, true)).collect();
    // A third map: coarser voxels elsewhere in the world.
    let box_grid = solid_box_grid(12, 0.6);
    let mut all: Vec<&[u8]> = grids.iter().map(Vec::as_slice).collect();
    all.push(&box_grid);
    let (bytes, at) = packed(&all);
    let buffer = upload_slot(&gpu.ctx.device, &gpu.ctx.queue, &bytes);
    let parts = [SlotPart {
        buffer: &buffer,
        offset: 0,
        size: buffer.size(),
    }];
    // Slot 1 empty: the others still read, it reads as none.
    let slots: Vec<Option<GridInParts>> = vec![
        Some(at[0]),
        None,
        Some(at[1]),
        Some(at[2]),
        Some(at[3]),
        Some(at[4]),
    ];
    let parsed: Vec<Grid<'_>> = all.iter().map(|g| Grid::parse(g).unwrap()).collect();
    let reference = &parsed[0];
    let mut points: Vec<[f64; 3]> = index_points()
        .into_iter()
        .map(|ijk| reference.map().apply(ijk))
        .collect();
    // Points of the box grid's own lattice (its centre, a face, a corner past its edge).
    for ijk in [[6.0, 6.0, 6.0], [5.5, 2.0, 11.5], [11.7, -0.4, 3.0]] {
        points.push(parsed[4].map().apply(ijk));
    }
    let out = gpu
        .r
        .sample_points(&parts, &slots, &points)
        .expect("sample points");
    assert_eq!(out.len(), points.len());
    let mut nonzero = 0;
    for (xyz, per_slot) in points.iter().zip(&out) {
        assert_eq!(per_slot.len(), slots.len());
        assert_eq!(per_slot[1], None, "the empty slot at {xyz:?}");
        for (slot, grid) in [(0, 0), (2, 1), (3, 2), (4, 3), (5, 4)] {
            let what = format!("slot {slot} ({:?})", parsed[grid].grid_type());
            check(&parsed[grid], *xyz, per_slot[slot], &what);
            nonzero += usize::from(per_slot[slot].is_some_and(|s| s.value > 0.01));
        }
    }
    // The points do read data, not only background.
    assert!(nonzero > points.len(), "only {nonzero} samples read data");
}

#[test]
fn many_points_span_several_passes_and_bad_points_are_refused() {
    let Some(mut gpu) = gpu() else { return };
    let bytes = test_grid(GridType::Float, true);
    let grid = Grid::parse(&bytes).unwrap();
    let buffer = upload_slot(&gpu.ctx.device, &gpu.ctx.queue, &bytes);
    let parts = [SlotPart {
        buffer: &buffer,
        offset: 0,
        size: buffer.size(),
    }];
    let slots = [Some(GridInParts {
        part: 0,
        offset: 0,
        size: bytes.len() as u64,
    })];
    // More than one pass of 65536 points: a 300 × 240 slice through the blob at k = 0.
    let (w, h) = (300usize, 240usize);
    let points: Vec<[f64; 3]> = (0..w * h)
        .map(|n| {
            let ijk = [
                104.0 + 48.0 * (n % w) as f64 / w as f64,
                -24.0 + 48.0 * (n / w) as f64 / h as f64,
                0.25,
            ];
            grid.map().apply(ijk)
        })
        .collect();
    let out = gpu.r.sample_points(&parts, &slots, &points).unwrap();
    assert_eq!(out.len(), w * h);
    for n in (0..w * h).step_by(97).chain([w * h - 1]) {
        check(&grid, points[n], out[n][0], &format!("point {n}"));
    }
    let err = gpu
        .r
        .sample_points(&parts, &slots, &[[0.0, f64::NAN, 0.0]])
        .unwrap_err();
    assert!(err.to_string().contains("not a finite position"), "{err}");
}

/// A frame cut into parts of 128 KiB, so grids start in one part and run on
/// into the next ones, as large frames do on the H200: the same values as the CPU's.
#[test]
fn grids_running_over_several_parts_read_the_same() {
    let Some(gpu) = gpu() else { return };
    let part_bytes = 2 * supercell::render::MIN_PART_BYTES;
    let mut r =
        supercell::render::Renderer::with_part_bytes(&gpu.ctx.device, &gpu.ctx.queue, part_bytes)
            .expect("renderer");
    let grids: Vec<Vec<u8>> = [GridType::Float, GridType::Fp16]
        .iter()
        .map(|&t| test_grid(t, true))
        .collect();
    let all: Vec<&[u8]> = grids.iter().map(Vec::as_slice).collect();
    let (bytes, at) = packed(&all);
    assert!(bytes.len() as u64 > 3 * part_bytes, "{} bytes", bytes.len());
    let buffer = upload_slot(&gpu.ctx.device, &gpu.ctx.queue, &bytes);
    let parts: Vec<SlotPart<'_>> = (0..buffer.size().div_ceil(part_bytes))
        .map(|k| SlotPart {
            buffer: &buffer,
            offset: k * part_bytes,
            size: part_bytes.min(buffer.size() - k * part_bytes),
        })
        .collect();
    let slots: Vec<Option<GridInParts>> = at
        .iter()
        .map(|g| Some(GridInParts::locate(g.offset, g.size, part_bytes)))
        .collect();
    let parsed: Vec<Grid<'_>> = all.iter().map(|g| Grid::parse(g).unwrap()).collect();
    let points: Vec<[f64; 3]> = index_points()
        .into_iter()
        .map(|ijk| parsed[0].map().apply(ijk))
        .collect();
    let out = r.sample_points(&parts, &slots, &points).expect("sample");
    for (xyz, per_slot) in points.iter().zip(&out) {
        for (slot, grid) in parsed.iter().enumerate() {
            check(grid, *xyz, per_slot[slot], &format!("slot {slot} in parts"));
        }
    }
}
