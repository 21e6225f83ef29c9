//! The nested grid of the tornado's funnel ([`Attribute::FunnelCloud`]).
//!
//! The condensation funnel is a few hundred metres wide (about 140 m in radius at the
//! ground), a handful of the storm grid's voxels. Its grid is [`NEST_REFINEMENT`] times
//! finer, in the same domain and index origin, and only the bricks inside the funnel's
//! feature bound (a box of a few kilometres around the vortex's sweep, from the ground to
//! [`FUNNEL_NEST_TOP`], where the cloud grid has taken the funnel over) are evaluated, so it follows the vortex from frame to
//! frame at the cost of a few thousand small bricks.
//!
//! The nested field is what the funnel and its debris add to the rest of the cloud
//! ([`BrickFields::funnel`]); the coarse cloud then holds the rest
//! ([`BrickFields::ambient_cloud`]). Their sum is the total condensate, so a renderer that
//! adds the two attributes' extinctions counts the funnel once, at the fine resolution, and
//! the wall cloud it hangs from stays on the coarse grid with no seam at the nest's faces.

use super::bricks::{Candidate, candidates, leaf, mixing};
use super::model::{BrickFields, F_FUNNEL, FUNNEL_NEST_TOP, FrameModel};
use super::{Attribute, BrickStats, NEST_REFINEMENT, Storm};
use crate::format::{
    BuildOptions, EncodedBlock, FormatError, LeafBrick, LeafEncoder, SparseVolume,
};
use rayon::prelude::*;

/// The funnel's nested grid within `region` encoded for `build`: the nest is small (a few
/// thousand leaves), so its leaves are encoded from its volume.
pub(super) fn encoded_funnel(
    storm: &Storm,
    model: &FrameModel<'_>,
    region: [[u32; 3]; 2],
    build: &BuildOptions,
) -> Result<(EncodedBlock, BrickStats), FormatError> {
    let (nested, stats) = funnel_volume(storm, model, region);
    let mut block = EncodedBlock::new(build, nested.background, nested.bricks.len())?;
    let mut enc = LeafEncoder::new();
    for b in &nested.bricks {
        enc.push(
            std::slice::from_mut(&mut block),
            0,
            b.origin,
            &b.values,
            &b.active,
        )?;
    }
    enc.flush(std::slice::from_mut(&mut block));
    Ok((block, stats))
}

/// The funnel's volume on the nested grid, within the storm-grid index box `region`
/// (`[lo, hi)` voxels of the storm grid), with statistics of the brick work. Empty before
/// the funnel forms.
pub(super) fn funnel_volume(
    storm: &Storm,
    model: &FrameModel<'_>,
    region: [[u32; 3]; 2],
) -> (SparseVolume, BrickStats) {
    let params = storm.params();
    let t = params.transform_of(Attribute::FunnelCloud);
    let dx = t.voxel_size_m as f32;
    let Some(bound) = model.bounds.iter().find(|b| b.bit == F_FUNNEL) else {
        return (SparseVolume::default(), BrickStats::default());
    };
    // Bricks of the nested grid: the funnel's bound up to the nested grid's top (above it
    // the cloud grid carries the funnel), within the region and the domain.
    let brick_m = 8.0 * dx;
    let bound_max = [
        bound.max[0],
        bound.max[1],
        bound.max[2].min(FUNNEL_NEST_TOP),
    ];
    let bricks: [[i32; 3]; 2] = [
        std::array::from_fn(|a| {
            let region_lo = (region[0][a].min(params.dims()[a]) * NEST_REFINEMENT / 8) as i32;
            ((bound.min[a] / brick_m).floor() as i32)
                .max(region_lo)
                .max(0)
        }),
        std::array::from_fn(|a| {
            let dim = region[1][a].min(params.dims()[a]) * NEST_REFINEMENT;
            let region_hi = dim.div_ceil(8) as i32;
            ((bound_max[a] / brick_m).floor() as i32 + 1).min(region_hi)
        }),
    ];
    if (0..3).any(|a| bricks[0][a] >= bricks[1][a]) {
        return (SparseVolume::default(), BrickStats::default());
    }
    let cands: Vec<Candidate> = candidates(model, bricks, dx)
        .into_iter()
        .filter(|c| c.mask & F_FUNNEL != 0)
        .collect();
    let leaves: Vec<Option<LeafBrick>> = cands
        .par_iter()
        .with_min_len(16)
        .map_init(
            || Box::new(BrickFields::new()),
            |f, c| {
                let p0 = c.origin.map(|o| o as f32 * dx);
                model.eval_brick(p0, dx, c.mask, f, false);
                leaf(c.origin, &f.funnel, mixing(&f.funnel))
            },
        )
        .collect();
    let volume = SparseVolume {
        bricks: leaves.into_iter().flatten().collect(),
        ..SparseVolume::default()
    };
    let stats = BrickStats {
        candidates: cands.len() as u64,
        emitted: volume.bricks.len() as u64,
    };
    (volume, stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::default_params;

    /// The built-in storm's volumes in a box of the storm grid around the tornado at `frame`.
    fn around_tornado(storm: &Storm, frame: u32) -> Vec<(Attribute, SparseVolume)> {
        let p = storm.params();
        let t = p.frame_time(frame);
        let g = storm.model(t).tornado_ground;
        let dx = p.voxel_size_m() as f32;
        let lo = [
            ((g[0] - 2_000.0) / dx) as u32,
            ((g[1] - 2_000.0) / dx) as u32,
            0,
        ];
        let hi = [
            ((g[0] + 2_000.0) / dx) as u32,
            ((g[1] + 2_000.0) / dx) as u32,
            24,
        ];
        storm.volumes_in(t, lo, hi).0
    }

    #[test]
    fn funnel_cloud_is_nested_finer_and_the_cloud_leaves_it_out() {
        let p = default_params();
        assert!(p.attributes.contains(&Attribute::FunnelCloud));
        let tf = p.transform_of(Attribute::FunnelCloud);
        let tc = p.transform_of(Attribute::Cloud);
        assert_eq!(
            tf.voxel_size_m * f64::from(NEST_REFINEMENT),
            tc.voxel_size_m
        );
        assert_eq!(tf.dims, tc.dims.map(|d| d * NEST_REFINEMENT));
        let storm = Storm::new(p.clone());
        // Before the funnel forms the nest is empty.
        let vols = around_tornado(&storm, 0);
        let funnel = &vols.iter().find(|(a, _)| a.is_nested()).expect("nested").1;
        assert!(funnel.bricks.is_empty());
        let frame = 20;
        let model = storm.model(p.frame_time(frame));
        let vols = around_tornado(&storm, frame);
        let get = |want: Attribute| &vols.iter().find(|(a, _)| *a == want).expect("made").1;
        let (funnel, cloud) = (get(Attribute::FunnelCloud), get(Attribute::Cloud));
        assert!(
            funnel.bricks.len() > 20,
            "{} nested leaves",
            funnel.bricks.len()
        );
        // Every nested leaf lies in the box around the vortex: within 1.5 km of its sweep
        // and below the wall cloud's base.
        let g = model.tornado_ground;
        let dxf = tf.voxel_size_m as f32;
        for b in &funnel.bricks {
            let w = b.origin.map(|o| o as f32 * dxf);
            assert!((w[0] - g[0]).abs() < 3_000.0 && (w[1] - g[1]).abs() < 3_000.0);
            assert!(w[2] < 1_000.0, "{w:?}");
        }
        // The nested voxel on the axis near the ground holds the funnel; the coarse cloud
        // there holds nothing (the funnel is not counted twice).
        let a = model.axis(40.0);
        let value_at = |v: &SparseVolume, dx: f32, w: [f32; 3]| {
            let ijk = w.map(|c| (c / dx).round() as i32);
            v.bricks
                .iter()
                .find(|b| (0..3).all(|k| (b.origin[k]..b.origin[k] + 8).contains(&ijk[k])))
                .map_or(0.0, |b| {
                    let l = ijk.map(|c| c.rem_euclid(8) as usize);
                    b.values[l[0] * 64 + l[1] * 8 + l[2]]
                })
        };
        assert!(value_at(funnel, dxf, [a[0], a[1], 40.0]) > 0.5);
        let dxc = tc.voxel_size_m as f32;
        assert_eq!(value_at(cloud, dxc, [a[0], a[1], 40.0]), 0.0);
    }
}
