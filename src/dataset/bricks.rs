//! Spatial bricks: a dataset's domain cut into boxes by a k-d split, so that the ranks of a
//! sort-last run each read and render one box of every frame (`--bricks N` of
//! `supercell-data generate|import`, [`Dataset::retain_brick`](super::Dataset::retain_brick)).
//!
//! The split: the domain (made leaf-aligned) is cut across its longest axis into two boxes
//! whose voxel counts are proportional to the bricks each side gets (`N / 2` rounded down
//! and the rest), at a multiple of the alignment (8, a leaf), then each side again, until
//! every box is one brick. `N` need not be a power of two. A brick's grids hold the leaves
//! whose origin lies in its box grown by [`BRICK_HALO`] on every side.
//!
//! The renderer's acceleration and sun cells (shaders/accel.wgsl) are `2^shift` voxels on
//! a side with `shift >= 3` chosen per grid from its index bounding box so that the cells
//! fit `ACCEL_CELLS`; they start at multiples of `2^shift` in index space. Their size is
//! therefore not fixed in index space; boundaries at multiples of a larger power of two
//! (the `align` argument of [`split_domain`]) line up with every cell size up to it.

use super::manifest::{BRICK_HALO, Brick};
use crate::format::{Coord, LEAF_DIM};

/// Most bricks a dataset may have: the checks compare every pair of boxes.
pub const MAX_BRICKS: usize = 4096;

const LEAF: i32 = LEAF_DIM as i32;

/// The k-d split of `domain` (index box, `[min, max)`: min inclusive, max exclusive) into
/// `count` boxes, each `[min, max)` with boundaries on multiples of `align` (a power of two,
/// at least 8) except where the domain's own leaf-aligned faces are. The boxes are disjoint
/// and their union is the domain grown to leaf boundaries. Errors where `count` is 0 or
/// above [`MAX_BRICKS`], `align` is not a power of two of at least 8, or the domain is too
/// small to cut that often.
pub fn split_domain(domain: [Coord; 2], count: u32, align: i32) -> Result<Vec<[Coord; 2]>, String> {
    if count == 0 || count as usize > MAX_BRICKS {
        return Err(format!(
            "{count} bricks: the count must be 1 to {MAX_BRICKS}"
        ));
    }
    if align < LEAF || !(align as u32).is_power_of_two() {
        return Err(format!(
            "brick alignment {align} is not a power of two of at least {LEAF}"
        ));
    }
    let [lo, hi] = domain;
    if (0..3).any(|i| lo[i] >= hi[i]) {
        return Err(format!("domain {lo:?}..{hi:?} is empty"));
    }
    let grown = [
        lo.map(|v| v.div_euclid(LEAF) * LEAF),
        hi.map(|v| (v + LEAF - 1).div_euclid(LEAF) * LEAF),
    ];
    let mut out = Vec::with_capacity(count as usize);
    split_into(grown, count, i64::from(align), &mut out)?;
    Ok(out)
}

/// Appends the split of `b` into `n` boxes to `out` (see [`split_domain`]).
fn split_into(b: [Coord; 2], n: u32, align: i64, out: &mut Vec<[Coord; 2]>) -> Result<(), String> {
    if n == 1 {
        out.push(b);
        return Ok(());
    }
    let left = n / 2;
    let len = |a: usize| i64::from(b[1][a]) - i64::from(b[0][a]);
    // Longest axis first; a shorter one where the longest cannot be cut on the alignment.
    let mut axes = [0usize, 1, 2];
    axes.sort_by_key(|&a| std::cmp::Reverse(len(a)));
    for a in axes {
        let (lo, hi) = (i64::from(b[0][a]), i64::from(b[1][a]));
        let ideal = lo as f64 + (hi - lo) as f64 * f64::from(left) / f64::from(n);
        let snapped = (ideal / align as f64).round() as i64 * align;
        // Both sides keep at least one aligned step (or reach the domain's face).
        let first = (lo.div_euclid(align) + 1) * align;
        let last = (hi - 1).div_euclid(align) * align;
        if first > last {
            continue;
        }
        let cut = snapped.clamp(first, last) as i32;
        let (mut l, mut r) = (b, b);
        l[1][a] = cut;
        r[0][a] = cut;
        split_into(l, left, align, out)?;
        return split_into(r, n - left, align, out);
    }
    Err(format!(
        "the domain box {:?}..{:?} is too small to cut into {n} bricks on {align}-voxel boundaries",
        b[0], b[1]
    ))
}

/// The bricks of the boxes `boxes` (`[min, max)`), with world boxes from the grids'
/// transform: `world = origin + voxel_size * index`.
pub fn bricks_of(boxes: &[[Coord; 2]], voxel_size: [f64; 3], origin: [f64; 3]) -> Vec<Brick> {
    let world = |c: Coord| std::array::from_fn(|i| origin[i] + voxel_size[i] * f64::from(c[i]));
    boxes
        .iter()
        .map(|&[lo, hi]| Brick {
            index_box: [lo, hi],
            world_box: [world(lo), world(hi)],
        })
        .collect()
}

/// The box a brick's grid of an attribute holds, in that attribute's index space
/// (`[min, max)`): the brick's box scaled by `refine` (the attribute's voxels are `refine`
/// times smaller than the model grid's: 1 for most, 4 for the generator's nested
/// `funnel_cloud`), grown by [`BRICK_HALO`] of the attribute's voxels on every side.
pub fn halo_box(brick: &Brick, refine: i32) -> [Coord; 2] {
    let [lo, hi] = brick.index_box;
    [
        lo.map(|v| v.saturating_mul(refine).saturating_sub(BRICK_HALO)),
        hi.map(|v| v.saturating_mul(refine).saturating_add(BRICK_HALO)),
    ]
}

/// Whether the leaf at `origin` (a multiple of 8) of an attribute whose voxels are `refine`
/// times smaller than the model grid's belongs in `brick`'s grid of it: it lies inside
/// the brick's [`halo_box`].
pub fn holds_leaf(brick: &Brick, refine: i32, origin: Coord) -> bool {
    let [lo, hi] = halo_box(brick, refine);
    (0..3).all(|i| origin[i] >= lo[i] && origin[i] < hi[i])
}

/// The box the bricks cover together (`[min, max)`), or `None` for no bricks.
pub fn domain_of(bricks: &[Brick]) -> Option<[Coord; 2]> {
    let first = bricks.first()?.index_box;
    Some(bricks.iter().fold(first, |[lo, hi], b| {
        [
            std::array::from_fn(|i| lo[i].min(b.index_box[0][i])),
            std::array::from_fn(|i| hi[i].max(b.index_box[1][i])),
        ]
    }))
}

/// Checks a list of bricks: at most [`MAX_BRICKS`], each box non-empty with leaf-aligned
/// faces and a finite world box that is not inverted, no two boxes sharing a voxel, and
/// together exactly their bounding box (the domain). The message names the brick.
pub(crate) fn check_bricks(bricks: &[Brick]) -> Result<(), String> {
    if bricks.len() > MAX_BRICKS {
        return Err(format!(
            "bricks: {} listed, at most {MAX_BRICKS}",
            bricks.len()
        ));
    }
    for (i, b) in bricks.iter().enumerate() {
        let [lo, hi] = b.index_box;
        if let Some(a) = (0..3).find(|&a| lo[a] >= hi[a]) {
            return Err(format!(
                "bricks[{i}].index_box {lo:?}..{hi:?} is empty or inverted on axis {a} (min inclusive, max exclusive)"
            ));
        }
        if let Some(v) = lo.iter().chain(&hi).find(|v| v.rem_euclid(LEAF) != 0) {
            return Err(format!(
                "bricks[{i}].index_box {lo:?}..{hi:?}: {v} is not on a leaf boundary (a multiple of {LEAF})"
            ));
        }
        let [wlo, whi] = b.world_box;
        if let Some(a) =
            (0..3).find(|&a| !(wlo[a].is_finite() && whi[a].is_finite() && wlo[a] <= whi[a]))
        {
            return Err(format!(
                "bricks[{i}].world_box {wlo:?}..{whi:?} is not finite or is inverted on axis {a}"
            ));
        }
    }
    let volume = |[lo, hi]: [Coord; 2]| -> i128 {
        (0..3)
            .map(|a| i128::from(hi[a]) - i128::from(lo[a]))
            .product()
    };
    for (i, a) in bricks.iter().enumerate() {
        for (j, b) in bricks.iter().enumerate().skip(i + 1) {
            let overlap = (0..3).all(|k| {
                a.index_box[0][k] < b.index_box[1][k] && b.index_box[0][k] < a.index_box[1][k]
            });
            if overlap {
                return Err(format!(
                    "bricks[{i}] and bricks[{j}] overlap ({:?}..{:?} and {:?}..{:?})",
                    a.index_box[0], a.index_box[1], b.index_box[0], b.index_box[1]
                ));
            }
        }
    }
    check_world_map(bricks)?;
    if let Some(domain) = domain_of(bricks) {
        let covered: i128 = bricks.iter().map(|b| volume(b.index_box)).sum();
        if covered != volume(domain) {
            return Err(format!(
                "bricks leave holes in their domain {:?}..{:?} (they cover {covered} of its {} voxels)",
                domain[0],
                domain[1],
                volume(domain)
            ));
        }
    }
    Ok(())
}

/// Checks that one transform (`world = origin + scale * index` per axis) maps every
/// brick's index box onto its world box, as the grids' transform does: a world box that
/// disagrees with its index box would send a renderer to the wrong place.
fn check_world_map(bricks: &[Brick]) -> Result<(), String> {
    let Some(first) = bricks.first() else {
        return Ok(());
    };
    let [ilo, ihi] = first.index_box;
    let [wlo, whi] = first.world_box;
    let scale: [f64; 3] =
        std::array::from_fn(|a| (whi[a] - wlo[a]) / (f64::from(ihi[a]) - f64::from(ilo[a])));
    let origin: [f64; 3] = std::array::from_fn(|a| wlo[a] - scale[a] * f64::from(ilo[a]));
    for (i, b) in bricks.iter().enumerate() {
        for a in 0..3 {
            for k in 0..2 {
                let want = origin[a] + scale[a] * f64::from(b.index_box[k][a]);
                let slack = 1e-9 * (want.abs() + scale[a].abs() + 1.0);
                let positive = scale[a].partial_cmp(&0.0) == Some(std::cmp::Ordering::Greater);
                if !positive || (b.world_box[k][a] - want).abs() > slack {
                    return Err(format!(
                        "bricks[{i}].world_box {:?}..{:?} does not map to its index_box {:?}..{:?} as bricks[0]'s does",
                        b.world_box[0], b.world_box[1], b.index_box[0], b.index_box[1]
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Shares `bricks` (in the order the manifest lists them) among `ranks` ranks for a
/// sort-last run: each rank gets a contiguous run of bricks whose boxes together are one
/// box, so that the ranks' parts are ordered front to back like the bricks themselves.
/// The runs follow the writer's k-d split ([`split_domain`]: `n / 2` ranks take the first
/// side), each as near its share of the bricks as a cut between whole boxes allows.
/// Errors, in words, where there are fewer bricks than ranks, no ranks, or the bricks
/// cannot be cut into boxes for that many ranks (a manifest listing them in another order).
pub fn share_bricks(bricks: &[Brick], ranks: usize) -> Result<Vec<std::ops::Range<usize>>, String> {
    if ranks == 0 {
        return Err("no ranks to share the bricks among".into());
    }
    if bricks.len() < ranks {
        return Err(format!(
            "{} brick(s) cannot be shared by {ranks} ranks: each rank needs at least one",
            bricks.len()
        ));
    }
    if bricks.len() == ranks {
        // One brick each: any order of the boxes will do (the compositing orders them).
        return Ok((0..ranks).map(|k| k..k + 1).collect());
    }
    let mut out = Vec::with_capacity(ranks);
    share_into(bricks, 0..bricks.len(), ranks, &mut out).map_err(|e| {
        format!(
            "{e}: run one rank per brick ({}), or write the dataset again with --bricks {ranks} \
             (or a multiple of it)",
            bricks.len()
        )
    })?;
    Ok(out)
}

/// Appends the share of `run` (bricks that together are one box) among `ranks` to `out`.
fn share_into(
    bricks: &[Brick],
    run: std::ops::Range<usize>,
    ranks: usize,
    out: &mut Vec<std::ops::Range<usize>>,
) -> Result<(), String> {
    if ranks == 1 {
        out.push(run);
        return Ok(());
    }
    let first = ranks / 2;
    let len = run.len() as f64;
    let wanted = first as f64 / ranks as f64;
    // Cuts that leave every rank a brick and both sides whole boxes, the nearest its share.
    let cut = (run.start + first..=run.end - (ranks - first))
        .filter(|&m| is_one_box(&bricks[run.start..m]) && is_one_box(&bricks[m..run.end]))
        .min_by(|&a, &b| {
            let off = |m: usize| ((m - run.start) as f64 / len - wanted).abs();
            off(a).total_cmp(&off(b))
        })
        .ok_or_else(|| {
            format!(
                "bricks {}..{} cannot be cut into two boxes for {first} and {} ranks",
                run.start,
                run.end - 1,
                ranks - first
            )
        })?;
    share_into(bricks, run.start..cut, first, out)?;
    share_into(bricks, cut..run.end, ranks - first, out)
}

/// Whether disjoint `bricks` together fill their bounding box.
fn is_one_box(bricks: &[Brick]) -> bool {
    let Some([lo, hi]) = domain_of(bricks) else {
        return false;
    };
    let volume = |b: [Coord; 2]| -> i128 {
        (0..3)
            .map(|i| i128::from(b[1][i]) - i128::from(b[0][i]))
            .product()
    };
    bricks.iter().map(|b| volume(b.index_box)).sum::<i128>() == volume([lo, hi])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check_tiles(domain: [Coord; 2], n: u32) -> Vec<[Coord; 2]> {
        let boxes = split_domain(domain, n, 8).unwrap();
        assert_eq!(boxes.len(), n as usize);
        let bricks = bricks_of(&boxes, [1.0; 3], [0.0; 3]);
        check_bricks(&bricks).unwrap();
        assert_eq!(domain_of(&bricks), Some(domain));
        boxes
    }

    #[test]
    fn a_split_tiles_the_domain_on_leaf_boundaries() {
        for n in 1..=9 {
            check_tiles([[0, 0, 0], [128, 96, 64]], n);
        }
        // Two bricks cut the longest axis in half; three cut it 1 : 2.
        let two = check_tiles([[0, 0, 0], [128, 96, 64]], 2);
        assert_eq!(
            two,
            vec![[[0, 0, 0], [64, 96, 64]], [[64, 0, 0], [128, 96, 64]]]
        );
        let three = check_tiles([[0, 0, 0], [96, 32, 32]], 3);
        assert_eq!(three[0], [[0, 0, 0], [32, 32, 32]]);
    }

    #[test]
    fn bricks_are_shared_among_ranks_as_boxes_in_their_order() {
        let domain = [[0, 0, 0], [128, 96, 64]];
        for n in 1..=12u32 {
            let bricks = bricks_of(&check_tiles(domain, n), [1.0; 3], [0.0; 3]);
            for ranks in 1..=n as usize {
                let shares = share_bricks(&bricks, ranks)
                    .unwrap_or_else(|e| panic!("{n} bricks, {ranks} ranks: {e}"));
                assert_eq!(shares.len(), ranks);
                let mut next = 0;
                for s in &shares {
                    assert_eq!(s.start, next, "{n} bricks, {ranks} ranks: {shares:?}");
                    assert!(!s.is_empty() && is_one_box(&bricks[s.clone()]));
                    next = s.end;
                }
                assert_eq!(next, n as usize);
                if (n as usize).is_multiple_of(ranks) && ranks.is_power_of_two() {
                    // The writer's split of n = k·ranks (ranks a power of two) gives every
                    // rank k bricks.
                    assert!(
                        shares.iter().all(|s| s.len() == n as usize / ranks),
                        "{n} bricks, {ranks} ranks: {shares:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn bricks_that_cannot_be_shared_are_refused_in_words() {
        let bricks = bricks_of(
            &check_tiles([[0, 0, 0], [128, 128, 8]], 4),
            [1.0; 3],
            [0.0; 3],
        );
        assert!(share_bricks(&bricks, 5).unwrap_err().contains("4 brick(s)"));
        assert!(share_bricks(&bricks, 0).is_err());
        // Listed diagonally, no two neighbours in the list make a box.
        let crossed = vec![bricks[0], bricks[3], bricks[1], bricks[2]];
        let e = share_bricks(&crossed, 2).unwrap_err();
        assert!(e.contains("cannot be cut into two boxes"), "{e}");
        assert_eq!(share_bricks(&crossed, 4).unwrap().len(), 4);
    }

    #[test]
    fn a_domain_too_small_or_a_bad_count_is_refused() {
        assert!(split_domain([[0, 0, 0], [8, 8, 8]], 2, 8).is_err());
        assert!(split_domain([[0, 0, 0], [64, 64, 64]], 0, 8).is_err());
        assert!(split_domain([[0, 0, 0], [64, 64, 64]], 2, 12).is_err());
        // A cut on a larger alignment, where it fits.
        let b = split_domain([[0, 0, 0], [128, 16, 16]], 2, 64).unwrap();
        assert_eq!(b[0][1][0], 64);
    }

    #[test]
    fn overlapping_or_holey_bricks_are_named() {
        let check = |second: [Coord; 2]| {
            let b = bricks_of(&[[[0, 0, 0], [16, 8, 8]], second], [1.0; 3], [0.0; 3]);
            check_bricks(&b).unwrap_err()
        };
        assert!(check([[8, 0, 0], [24, 8, 8]]).contains("overlap"));
        assert!(check([[24, 0, 0], [32, 8, 8]]).contains("holes"));
        assert!(check([[16, 0, 0], [20, 8, 8]]).contains("leaf boundary"));
        let mut b = bricks_of(
            &[[[0, 0, 0], [16, 8, 8]], [[16, 0, 0], [32, 8, 8]]],
            [1.0; 3],
            [0.0; 3],
        );
        check_bricks(&b).unwrap();
        b[1].world_box[1][0] = 40.0;
        assert!(check_bricks(&b).unwrap_err().contains("does not map"));
    }
}
