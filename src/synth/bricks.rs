//! Sparse brick generation: cull the domain hierarchically against feature bounds, evaluate
//! the surviving bricks in parallel, keep those with an active voxel.

use super::model::{Bound, BrickFields, FrameModel, MIXING_THRESHOLD, features_in};
use super::{Attribute, Storm};
use crate::format::{LeafBrick, SparseVolume};
use rayon::prelude::*;

/// Bricks per block edge in the coarse culling pass (a block is 64³ voxels).
const BLOCK: i32 = 8;

/// What one frame's brick work amounted to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BrickStats {
    /// Bricks the culling pass let through (each had all its voxels evaluated).
    pub candidates: u64,
    /// Bricks emitted, over all attributes.
    pub emitted: u64,
}

/// A candidate brick: its origin (index space) and the features it must evaluate.
pub(super) struct Candidate {
    pub(super) origin: [i32; 3],
    pub(super) mask: u32,
}

/// Culls the bricks of `region` (index-space brick ranges, inclusive-exclusive, in
/// bricks): blocks of 8³ bricks first, then the bricks of surviving blocks, each tested only
/// against the bounds its block touches. The result is in a fixed order (block-major, then
/// brick order), whatever the thread count.
pub(super) fn candidates(model: &FrameModel<'_>, region: [[i32; 3]; 2], dx: f32) -> Vec<Candidate> {
    let [r0, r1] = region;
    let nblk: [i32; 3] = std::array::from_fn(|a| (r1[a] - r0[a] + BLOCK - 1).max(0) / BLOCK);
    // World box of voxel centres of bricks [b0, b1) along each axis.
    let boxed = |b0: [i32; 3], b1: [i32; 3]| {
        let lo = b0.map(|b| (b * 8) as f32 * dx);
        let hi = b1.map(|b| (b * 8 - 1) as f32 * dx);
        (lo, hi)
    };
    let blocks = (nblk[0] * nblk[1] * nblk[2]) as usize;
    (0..blocks)
        .into_par_iter()
        .flat_map_iter(|bi| {
            let bi = bi as i32;
            let blk = [
                bi / (nblk[1] * nblk[2]),
                (bi / nblk[2]) % nblk[1],
                bi % nblk[2],
            ];
            let b0: [i32; 3] = std::array::from_fn(|a| r0[a] + blk[a] * BLOCK);
            let b1: [i32; 3] = std::array::from_fn(|a| (b0[a] + BLOCK).min(r1[a]));
            let (lo, hi) = boxed(b0, b1);
            let mut out = Vec::new();
            if !model.features_in(lo, hi).1 {
                return out.into_iter();
            }
            let near: Vec<Bound> = model
                .bounds
                .iter()
                .filter(|b| b.touches(lo, hi))
                .copied()
                .collect();
            for x in b0[0]..b1[0] {
                for y in b0[1]..b1[1] {
                    for z in b0[2]..b1[2] {
                        let (lo, hi) = boxed([x, y, z], [x + 1, y + 1, z + 1]);
                        let (mask, active) = features_in(&near, lo, hi);
                        if active {
                            out.push(Candidate {
                                origin: [x * 8, y * 8, z * 8],
                                mask,
                            });
                        }
                    }
                }
            }
            out.into_iter()
        })
        .collect()
}

/// Turns one attribute's values of a brick into a leaf, or `None` if no voxel is active.
pub(super) fn leaf(
    origin: [i32; 3],
    values: &[f32; 512],
    active: impl Fn(usize) -> bool,
) -> Option<LeafBrick> {
    // Branch-free so that both loops vectorise (this ran bit by bit before).
    let mut mask = [0u64; 8];
    for (w, word) in mask.iter_mut().enumerate() {
        let mut m = 0u64;
        for b in 0..64 {
            m |= u64::from(active(w * 64 + b)) << b;
        }
        *word = m;
    }
    if mask.iter().all(|&w| w == 0) {
        return None;
    }
    // Collected straight into a fresh allocation: no zeroing pass before the values.
    let vals: Box<[f32]> = (0..512)
        .map(|n| {
            // Inactive voxels hold the background (zero) so leaf statistics and
            // quantisation ranges cover active values only.
            let on = mask[n >> 6] >> (n & 63) & 1 == 1;
            if on { values[n] } else { 0.0 }
        })
        .collect();
    Some(LeafBrick {
        origin,
        values: vals.try_into().expect("512 values"),
        active: mask,
    })
}

/// Activity of a mixing ratio: above [`MIXING_THRESHOLD`].
pub(super) fn mixing(q: &[f32; 512]) -> impl Fn(usize) -> bool + '_ {
    move |n| q[n] > MIXING_THRESHOLD
}

/// Evaluates one brick into leaves for each attribute in `attrs` (same order).
fn brick_leaves(
    model: &FrameModel<'_>,
    c: &Candidate,
    dx: f32,
    attrs: &[Attribute],
    f: &mut BrickFields,
) -> Vec<Option<LeafBrick>> {
    let p0 = c.origin.map(|o| o as f32 * dx);
    let extended = attrs.iter().any(|a| a.is_extended());
    model.eval_brick(p0, dx, c.mask, f, extended);
    let storm = |n: usize| f.storm[n];
    // With the funnel on its own nested grid the cloud leaves it out (see nest.rs).
    let cloud = if attrs.contains(&Attribute::FunnelCloud) {
        &f.ambient_cloud
    } else {
        &f.cloud
    };
    attrs
        .iter()
        .map(|a| match a {
            Attribute::Cloud => leaf(c.origin, cloud, mixing(cloud)),
            // Made on its own grid by nest.rs.
            Attribute::FunnelCloud => None,
            Attribute::Rain => leaf(c.origin, &f.rain, mixing(&f.rain)),
            Attribute::WindSpeed => leaf(c.origin, &f.wind, storm),
            Attribute::VerticalVelocity => leaf(c.origin, &f.w, storm),
            Attribute::Vorticity => leaf(c.origin, &f.vort, storm),
            Attribute::CloudWater => leaf(c.origin, &f.qc, mixing(&f.qc)),
            Attribute::CloudIce => leaf(c.origin, &f.qi, mixing(&f.qi)),
            Attribute::Snow => leaf(c.origin, &f.snow, mixing(&f.snow)),
            Attribute::Graupel => leaf(c.origin, &f.graupel, mixing(&f.graupel)),
            Attribute::Hail => leaf(c.origin, &f.hail, mixing(&f.hail)),
            Attribute::VaporPerturbation => leaf(c.origin, &f.qv, storm),
            Attribute::Reflectivity => leaf(c.origin, &f.dbz, |n| f.precip[n]),
            Attribute::PressurePerturbation => leaf(c.origin, &f.prs, storm),
            Attribute::ThetaPerturbation => leaf(c.origin, &f.theta, storm),
        })
        .collect()
}

/// All volumes of one instant within `region` (index-space voxel box [lo, hi), clamped
/// to the domain and widened to whole bricks).
pub(super) fn volumes(
    storm: &Storm,
    model: &FrameModel<'_>,
    region: [[u32; 3]; 2],
) -> (Vec<(Attribute, SparseVolume)>, BrickStats) {
    let params = storm.params();
    let dims = params.dims();
    let dx = params.voxel_size_m() as f32;
    let attrs = &params.attributes;
    let bricks: [[i32; 3]; 2] = [
        std::array::from_fn(|a| (region[0][a].min(dims[a]) / 8) as i32),
        std::array::from_fn(|a| (region[1][a].min(dims[a]).div_ceil(8)) as i32),
    ];
    let cands = candidates(model, bricks, dx);
    let per_brick: Vec<Vec<Option<LeafBrick>>> = cands
        .par_iter()
        .with_min_len(16)
        .map_init(
            || Box::new(BrickFields::new()),
            |f, c| brick_leaves(model, c, dx, attrs, f),
        )
        .collect();
    let mut vols: Vec<SparseVolume> = attrs.iter().map(|_| SparseVolume::default()).collect();
    let mut emitted = 0u64;
    for leaves in per_brick {
        for (v, l) in vols.iter_mut().zip(leaves) {
            if let Some(l) = l {
                v.bricks.push(l);
                emitted += 1;
            }
        }
    }
    let stats = BrickStats {
        candidates: cands.len() as u64,
        emitted,
    };
    (attrs.iter().copied().zip(vols).collect(), stats)
}

/// Which attributes of `attrs` a brick has any active voxel of (bit `i` for `attrs[i]`):
/// what [`brick_leaves`] would emit, without making the leaves.
fn brick_census(
    model: &FrameModel<'_>,
    c: &Candidate,
    dx: f32,
    attrs: &[Attribute],
    f: &mut BrickFields,
) -> u32 {
    let p0 = c.origin.map(|o| o as f32 * dx);
    let extended = attrs.iter().any(|a| a.is_extended());
    model.eval_brick(p0, dx, c.mask, f, extended);
    let any = |q: &[f32; 512]| q.iter().any(|&v| v > MIXING_THRESHOLD);
    let cloud = if attrs.contains(&Attribute::FunnelCloud) {
        &f.ambient_cloud
    } else {
        &f.cloud
    };
    let mut bits = 0;
    for (i, a) in attrs.iter().enumerate() {
        let on = match a {
            Attribute::Cloud => any(cloud),
            Attribute::FunnelCloud => false,
            Attribute::Rain => any(&f.rain),
            Attribute::CloudWater => any(&f.qc),
            Attribute::CloudIce => any(&f.qi),
            Attribute::Snow => any(&f.snow),
            Attribute::Graupel => any(&f.graupel),
            Attribute::Hail => any(&f.hail),
            Attribute::Reflectivity => f.precip.iter().any(|&p| p),
            Attribute::WindSpeed
            | Attribute::VerticalVelocity
            | Attribute::Vorticity
            | Attribute::VaporPerturbation
            | Attribute::PressurePerturbation
            | Attribute::ThetaPerturbation => f.storm.iter().any(|&p| p),
        };
        bits |= u32::from(on) << i;
    }
    bits
}

/// The origins of the leaves each attribute of the whole domain has at this instant (in
/// the order [`volumes`] emits them), without their values: what sizes need, in a few
/// bytes per leaf instead of two kilobytes.
pub(super) fn leaf_origins(storm: &Storm, model: &FrameModel<'_>) -> Vec<Vec<[i32; 3]>> {
    let params = storm.params();
    let dx = params.voxel_size_m() as f32;
    let attrs = &params.attributes;
    let bricks = [[0; 3], params.dims().map(|d| (d / 8) as i32)];
    let cands = candidates(model, bricks, dx);
    let bits: Vec<u32> = cands
        .par_iter()
        .with_min_len(16)
        .map_init(
            || Box::new(BrickFields::new()),
            |f, c| brick_census(model, c, dx, attrs, f),
        )
        .collect();
    let mut origins: Vec<Vec<[i32; 3]>> = attrs.iter().map(|_| Vec::new()).collect();
    for (c, b) in cands.iter().zip(bits) {
        for (i, o) in origins.iter_mut().enumerate() {
            if b >> i & 1 == 1 {
                o.push(c.origin);
            }
        }
    }
    origins
}

#[cfg(test)]
mod tests {
    use super::super::model::{
        F_ANVIL, F_DOME, F_FFD, F_FUNNEL, F_HOOK, F_MESO, F_TORNADO, F_TOWER, F_WALL,
    };
    use super::*;
    use crate::synth::{StormParams, default_params};

    /// Every brick of the domain evaluated with every feature: what culling must reproduce.
    fn unculled(storm: &Storm, t: f32) -> Vec<(Attribute, SparseVolume)> {
        let model = storm.model(t);
        let params = storm.params();
        let dims = params.dims();
        let dx = params.voxel_size_m() as f32;
        let all = F_TOWER | F_DOME | F_ANVIL | F_WALL | F_FFD | F_HOOK | F_MESO;
        let formed = model.bounds.iter().any(|b| b.bit == F_FUNNEL);
        let all = if formed {
            all | F_FUNNEL | F_TORNADO
        } else {
            all
        };
        let mut vols: Vec<SparseVolume> = params
            .attributes
            .iter()
            .map(|_| SparseVolume::default())
            .collect();
        let mut f = BrickFields::new();
        for x in 0..dims[0] as i32 / 8 {
            for y in 0..dims[1] as i32 / 8 {
                for z in 0..dims[2] as i32 / 8 {
                    let c = Candidate {
                        origin: [x * 8, y * 8, z * 8],
                        mask: all,
                    };
                    let leaves = brick_leaves(&model, &c, dx, &params.attributes, &mut f);
                    for (v, l) in vols.iter_mut().zip(leaves) {
                        v.bricks.extend(l);
                    }
                }
            }
        }
        // The nested grid: every one of its bricks up to 1.2 km (the funnel's bound ends at
        // 960 m), with every feature, for the voxels the funnel adds.
        for (a, v) in params.attributes.iter().zip(vols.iter_mut()) {
            if !a.is_nested() || !formed {
                continue;
            }
            let tf = params.transform_of(*a);
            let dxf = tf.voxel_size_m as f32;
            let top = ((1_200.0 / (8.0 * dxf)).ceil() as u32).min(tf.dims[2] / 8);
            for x in 0..tf.dims[0] as i32 / 8 {
                for y in 0..tf.dims[1] as i32 / 8 {
                    for z in 0..top as i32 {
                        let origin = [x * 8, y * 8, z * 8];
                        model.eval_brick(origin.map(|o| o as f32 * dxf), dxf, all, &mut f, false);
                        v.bricks.extend(leaf(origin, &f.funnel, mixing(&f.funnel)));
                    }
                }
            }
        }
        params.attributes.iter().copied().zip(vols).collect()
    }

    fn sorted(mut v: SparseVolume) -> SparseVolume {
        v.bricks.sort_by_key(|b| b.origin);
        v
    }

    fn check_culling(params: StormParams, frames: &[u32]) {
        let storm = Storm::new(params.clone());
        for &frame in frames {
            let t = params.frame_time(frame);
            let (culled, stats) = storm.volumes_at(t);
            let full = unculled(&storm, t);
            let total = params
                .dims()
                .iter()
                .map(|d| (d / 8) as u64)
                .product::<u64>();
            assert!(
                stats.candidates * 10 < total * 6,
                "culling kept {stats:?} of {total}"
            );
            for ((a, c), (_, f)) in culled.into_iter().zip(full) {
                let (c, f) = (sorted(c), sorted(f));
                assert_eq!(
                    c.bricks.len(),
                    f.bricks.len(),
                    "frame {frame} {a}: brick count"
                );
                let dx = params.transform_of(a).voxel_size_m as f32;
                for (bc, bf) in c.bricks.iter().zip(&f.bricks) {
                    assert_eq!(bc.origin, bf.origin, "frame {frame} {a}");
                    if let Some(n) = (0..512).find(|&n| bc.values[n] != bf.values[n]) {
                        let lo = bc.origin.map(|o| o as f32 * dx);
                        let hi = bc.origin.map(|o| (o + 7) as f32 * dx);
                        panic!(
                            "frame {frame} {a} brick {:?} voxel {n}: culled {} full {} (mask {:#x})",
                            bc.origin,
                            bc.values[n],
                            bf.values[n],
                            storm.model(t).features_in(lo, hi).0
                        );
                    }
                    assert_eq!(bc.active, bf.active, "frame {frame} {a}");
                }
            }
        }
    }

    #[test]
    fn culling_loses_nothing() {
        let mut p = default_params();
        p.resolution = 64;
        check_culling(p.clone(), &[0, 10, 20, 30, 47]);
        p.resolution = 96;
        p.seed = 99;
        check_culling(p, &[25]);
    }

    #[test]
    fn culling_loses_nothing_with_every_attribute() {
        let mut p = default_params();
        p.resolution = 64;
        p.attributes = Attribute::ALL.to_vec();
        check_culling(p.clone(), &[5, 30, 47]);
        p.resolution = 96;
        p.seed = 7;
        check_culling(p, &[22]);
    }

    #[test]
    fn emitted_bricks_have_active_voxels_and_zero_background() {
        let mut p = default_params();
        p.resolution = 64;
        let storm = Storm::new(p);
        for (a, v) in storm.frame_volumes(30) {
            assert!(!v.bricks.is_empty(), "{a} is empty");
            for b in &v.bricks {
                assert!(b.active_count() > 0, "{a}: empty brick at {:?}", b.origin);
                for n in 0..512 {
                    if !b.is_active(n) {
                        assert_eq!(b.values[n], 0.0);
                    }
                }
            }
        }
    }
}
