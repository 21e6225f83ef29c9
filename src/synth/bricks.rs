//! Sparse brick generation: cull the domain hierarchically against feature bounds, evaluate
//! the surviving bricks in parallel, keep those with an active voxel.

use super::model::{Bound, BrickFields, FrameModel, MIXING_THRESHOLD, features_in};
use super::{Attribute, Storm};
use crate::format::{
    BuildOptions, EncodedBlock, EncodedLeaves, FormatError, LeafBrick, LeafEncoder, SparseVolume,
};
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

/// The active-voxel mask of a brick (bit `n % 64` of word `n / 64` for voxel `n`).
fn activity(active: impl Fn(usize) -> bool) -> [u64; 8] {
    // Branch-free so that the loop vectorises (this ran bit by bit before).
    let mut mask = [0u64; 8];
    for (w, word) in mask.iter_mut().enumerate() {
        let mut m = 0u64;
        for b in 0..64 {
            m |= u64::from(active(w * 64 + b)) << b;
        }
        *word = m;
    }
    mask
}

/// A leaf's stored value of voxel `n`: inactive voxels hold the background (zero) so leaf
/// statistics and quantisation ranges cover active values only.
#[inline(always)]
fn stored(values: &[f32; 512], mask: &[u64; 8], n: usize) -> f32 {
    let on = mask[n >> 6] >> (n & 63) & 1 == 1;
    if on { values[n] } else { 0.0 }
}

/// Turns one attribute's values of a brick into a leaf, or `None` if no voxel is active.
pub(super) fn leaf(
    origin: [i32; 3],
    values: &[f32; 512],
    active: impl Fn(usize) -> bool,
) -> Option<LeafBrick> {
    let mask = activity(active);
    if mask.iter().all(|&w| w == 0) {
        return None;
    }
    // Collected straight into a fresh allocation: no zeroing pass before the values.
    let vals: Box<[f32]> = (0..512).map(|n| stored(values, &mask, n)).collect();
    Some(LeafBrick {
        origin,
        values: vals.try_into().expect("512 values"),
        active: mask,
    })
}

/// Encodes one attribute's values of a brick as a leaf of `blocks[which]` (nothing if no
/// voxel is active), as [`leaf`] and the grid build would, with the values still in cache.
fn encode_leaf(
    enc: &mut LeafEncoder,
    blocks: &mut [EncodedBlock],
    which: usize,
    origin: [i32; 3],
    field: Field<'_>,
    scratch: &mut [f32; 512],
) -> Result<(), FormatError> {
    // The masks and stored values spelled out per kind of field, from the activity test
    // itself (not from the mask's bits) so that the loops vectorise.
    let mut mask = [0u64; 8];
    match field {
        Field::Mixing(q) => {
            for (w, word) in mask.iter_mut().enumerate() {
                for (b, &v) in q[w * 64..w * 64 + 64].iter().enumerate() {
                    *word |= u64::from(v > MIXING_THRESHOLD) << b;
                }
            }
            if mask.iter().all(|&w| w == 0) {
                return Ok(());
            }
            for (s, &v) in scratch.iter_mut().zip(q) {
                *s = if v > MIXING_THRESHOLD { v } else { 0.0 };
            }
        }
        Field::Masked(values, on) => {
            for (w, word) in mask.iter_mut().enumerate() {
                for (b, &o) in on[w * 64..w * 64 + 64].iter().enumerate() {
                    *word |= u64::from(o) << b;
                }
            }
            if mask.iter().all(|&w| w == 0) {
                return Ok(());
            }
            for ((s, &v), &o) in scratch.iter_mut().zip(values).zip(on) {
                *s = if o { v } else { 0.0 };
            }
        }
    }
    enc.push(blocks, which, origin, scratch, &mask)
}

/// Activity of a mixing ratio: above [`MIXING_THRESHOLD`].
pub(super) fn mixing(q: &[f32; 512]) -> impl Fn(usize) -> bool + '_ {
    move |n| q[n] > MIXING_THRESHOLD
}

/// What an attribute's leaf of an evaluated brick is made of: its values and which voxels
/// are active.
#[derive(Clone, Copy)]
enum Field<'a> {
    /// A mixing ratio, active above [`MIXING_THRESHOLD`].
    Mixing(&'a [f32; 512]),
    /// Values active where the mask is set.
    Masked(&'a [f32; 512], &'a [bool; 512]),
}

/// The field of attribute `a` in the evaluated brick `f`, or `None` for attributes made on
/// their own grid (the funnel, by nest.rs). `funnel_apart` says whether the funnel is one
/// of the attributes: the cloud then leaves it out (see nest.rs).
fn field_of(a: Attribute, f: &BrickFields, funnel_apart: bool) -> Option<Field<'_>> {
    let cloud = if funnel_apart {
        &f.ambient_cloud
    } else {
        &f.cloud
    };
    Some(match a {
        Attribute::Cloud => Field::Mixing(cloud),
        Attribute::FunnelCloud => return None,
        Attribute::Rain => Field::Mixing(&f.rain),
        Attribute::WindSpeed => Field::Masked(&f.wind, &f.storm),
        Attribute::VerticalVelocity => Field::Masked(&f.w, &f.storm),
        Attribute::Vorticity => Field::Masked(&f.vort, &f.storm),
        Attribute::CloudWater => Field::Mixing(&f.qc),
        Attribute::CloudIce => Field::Mixing(&f.qi),
        Attribute::Snow => Field::Mixing(&f.snow),
        Attribute::Graupel => Field::Mixing(&f.graupel),
        Attribute::Hail => Field::Mixing(&f.hail),
        Attribute::VaporPerturbation => Field::Masked(&f.qv, &f.storm),
        Attribute::Reflectivity => Field::Masked(&f.dbz, &f.precip),
        Attribute::PressurePerturbation => Field::Masked(&f.prs, &f.storm),
        Attribute::ThetaPerturbation => Field::Masked(&f.theta, &f.storm),
    })
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
    let funnel_apart = attrs.contains(&Attribute::FunnelCloud);
    attrs
        .iter()
        .map(|&a| match field_of(a, f, funnel_apart)? {
            Field::Mixing(q) => leaf(c.origin, q, mixing(q)),
            Field::Masked(v, on) => leaf(c.origin, v, |n| on[n]),
        })
        .collect()
}

/// Bricks evaluated and encoded per task: each task's leaves of one attribute are one
/// [`EncodedBlock`] (tens of kilobytes, reused by the allocator from frame to frame).
const ENCODE_CHUNK: usize = 32;

/// Encodes nested attribute `i`'s leaves (one block) and counts its bricks: given by the
/// caller, so this module need not know the nest's (which builds on its bricks).
pub(super) type NestedEncoder<'a> =
    dyn Fn(usize) -> Result<(EncodedBlock, BrickStats), (usize, FormatError)> + 'a;

/// All leaves of one instant within `region` (as [`volumes`]), each encoded for the grid of
/// `builds[i]` (attribute `i`) right after its brick is evaluated, and the nested grids'
/// leaves; the attributes' leaves in attribute order. Errors name the attribute's index.
pub(super) fn encoded(
    storm: &Storm,
    model: &FrameModel<'_>,
    region: [[u32; 3]; 2],
    builds: &[BuildOptions],
    nested: &NestedEncoder<'_>,
) -> Result<(Vec<EncodedLeaves>, BrickStats), (usize, FormatError)> {
    let params = storm.params();
    let dims = params.dims();
    let dx = params.voxel_size_m() as f32;
    let attrs = &params.attributes;
    debug_assert_eq!(attrs.len(), builds.len());
    let bricks: [[i32; 3]; 2] = [
        std::array::from_fn(|a| (region[0][a].min(dims[a]) / 8) as i32),
        std::array::from_fn(|a| (region[1][a].min(dims[a]).div_ceil(8)) as i32),
    ];
    let cands = candidates(model, bricks, dx);
    let extended = attrs.iter().any(|a| a.is_extended());
    let funnel_apart = attrs.contains(&Attribute::FunnelCloud);
    let new_blocks = |expected: usize| -> Result<Vec<EncodedBlock>, (usize, FormatError)> {
        builds
            .iter()
            .enumerate()
            .map(|(i, b)| EncodedBlock::new(b, 0.0, expected).map_err(|e| (i, e)))
            .collect()
    };
    let per_chunk: Vec<Vec<EncodedBlock>> = cands
        .par_chunks(ENCODE_CHUNK)
        .map_init(
            || {
                (
                    Box::new(BrickFields::new()),
                    LeafEncoder::new(),
                    Box::new([0f32; 512]),
                )
            },
            |(f, enc, scratch), chunk| {
                let mut blocks = new_blocks(chunk.len())?;
                for c in chunk {
                    let p0 = c.origin.map(|o| o as f32 * dx);
                    model.eval_brick(p0, dx, c.mask, f, extended);
                    for (i, &a) in attrs.iter().enumerate() {
                        let r = match field_of(a, f, funnel_apart) {
                            None => Ok(()),
                            Some(field) => {
                                encode_leaf(enc, &mut blocks, i, c.origin, field, scratch)
                            }
                        };
                        if let Err(e) = r {
                            // Its pending leaves belong to blocks that are dropped here.
                            enc.discard();
                            return Err((i, e));
                        }
                    }
                }
                enc.flush(&mut blocks);
                blocks.iter_mut().for_each(EncodedBlock::shrink_to_fit);
                Ok(blocks)
            },
        )
        .collect::<Result<_, _>>()?;
    let mut per_attr: Vec<Vec<EncodedBlock>> = attrs
        .iter()
        .map(|_| Vec::with_capacity(per_chunk.len()))
        .collect();
    let mut emitted = 0u64;
    for blocks in per_chunk {
        for (list, b) in per_attr.iter_mut().zip(blocks) {
            if !b.is_empty() {
                emitted += b.len() as u64;
                list.push(b);
            }
        }
    }
    let mut stats = BrickStats {
        candidates: cands.len() as u64,
        emitted,
    };
    let mut out = Vec::with_capacity(attrs.len());
    for (i, (a, mut blocks)) in attrs.iter().zip(per_attr).enumerate() {
        if a.is_nested() {
            // A nested grid's leaves come from the caller (the nest has its own bricks).
            let (block, s) = nested(i)?;
            stats.candidates += s.candidates;
            stats.emitted += s.emitted;
            blocks = vec![block];
        }
        out.push(EncodedLeaves::new(builds[i].grid_type, 0.0, blocks).map_err(|e| (i, e))?);
    }
    Ok((out, stats))
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

    /// The leaves encoded as their bricks are evaluated make, byte for byte, the grids of
    /// the frame's volumes (the nested funnel included).
    #[test]
    fn encoded_leaves_make_the_grids_of_the_volumes() {
        use crate::format::{GridType, build_grid, build_grid_encoded_into};
        use crate::synth::GenerateOptions;
        use crate::synth::generate::grid_options;
        let cases = [
            (Attribute::DEFAULT.to_vec(), 64, 30, GridType::Fp16),
            (Attribute::ALL.to_vec(), 64, 40, GridType::Fp16),
            (Attribute::ALL.to_vec(), 48, 44, GridType::FpN),
            (Attribute::DEFAULT.to_vec(), 48, 20, GridType::Float),
            (Attribute::ALL.to_vec(), 48, 25, GridType::Fp4),
        ];
        for (attributes, resolution, frame, grid_type) in cases {
            let mut p = default_params();
            p.resolution = resolution;
            p.attributes = attributes;
            let opts = GenerateOptions {
                grid_type,
                ..GenerateOptions::default()
            };
            let storm = Storm::new(p.clone());
            let t = p.frame_time(frame);
            let builds = grid_options(&p, &opts);
            let (vols, _) = storm.volumes_at(t);
            let (encoded, _) = storm.encoded_leaves_at(t, &builds).unwrap();
            assert_eq!(vols.len(), encoded.len());
            for (i, ((a, vol), leaves)) in vols.iter().zip(&encoded).enumerate() {
                assert_eq!(vol.bricks.len(), leaves.len(), "{a} {grid_type}");
                let want = build_grid(vol, &builds[i]).unwrap();
                let mut got = Vec::new();
                build_grid_encoded_into(leaves, &builds[i], &mut got).unwrap();
                assert!(got == want, "{a} {grid_type} frame {frame}: grids differ");
            }
        }
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
