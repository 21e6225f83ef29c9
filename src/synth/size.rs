//! Frame sizes: exact NanoVDB grid sizes from brick counts, and a resolution picker that
//! hits a target frame size.
//!
//! A grid's size follows from its node counts (header, root, one root tile and upper node
//! per 4096³ region, one lower node per 128³ region, one leaf per brick). The picker
//! generates a few frames at two coarse resolutions, fits the leaf count as
//! `a·N³ + b·N²` (volume plus boundary bricks) per attribute, counts the internal nodes the
//! coarse leaves would need at the candidate resolution, and bisects for the resolution
//! whose estimate is closest to the target; a census of the chosen resolution's middle
//! frame (leaf and node counts without values) then corrects the model.

use super::{Attribute, Storm, StormParams};
use crate::format::layout::{GRID_SIZE, TREE_SIZE, layout};
use crate::format::{GridType, SparseVolume};

/// Grids are stored in datasets padded to this alignment.
const DATASET_ALIGN: u64 = 4096;
/// Coarse resolutions the picker calibrates at.
const CALIBRATION: [u32; 2] = [96, 192];

/// Leaf size in bytes for `grid_type`; FpN (variable) is estimated at 8 bits per voxel.
/// `None` for types the generator cannot write.
pub fn leaf_bytes(grid_type: GridType) -> Option<u64> {
    match grid_type {
        GridType::Float | GridType::Fp4 | GridType::Fp8 | GridType::Fp16 => {
            layout(grid_type).map(|l| l.leaf.size as u64)
        }
        GridType::FpN => Some(96 + 64 * 8),
        _ => None,
    }
}

/// Size of a grid with these node counts (exact for fixed-size leaf types).
pub fn grid_bytes(grid_type: GridType, leaves: u64, lowers: u64, uppers: u64) -> u64 {
    let Some(l) = layout(grid_type) else { return 0 };
    let leaf = leaf_bytes(grid_type).unwrap_or(l.leaf.size as u64);
    (GRID_SIZE + TREE_SIZE + l.root.size) as u64
        + uppers * (l.root.tile_size + l.upper.size) as u64
        + lowers * l.lower.size as u64
        + leaves * leaf
}

/// Exact size of the grid [`crate::format::build_grid`] makes of `vol` (fixed-size types).
pub fn volume_grid_bytes(vol: &SparseVolume, grid_type: GridType) -> u64 {
    let (lowers, uppers) = node_counts(vol.bricks.iter().map(|b| b.origin), 1.0);
    grid_bytes(grid_type, vol.bricks.len() as u64, lowers, uppers)
}

/// Distinct lower (128³) and upper (4096³) node regions touched by bricks at `origins`
/// after scaling index space by `scale` (a brick then spans `8 * scale` voxels).
fn node_counts(origins: impl Iterator<Item = [i32; 3]>, scale: f64) -> (u64, u64) {
    // Regions packed into one integer each (42 bits an axis, biased), collected, sorted and
    // deduplicated: several times cheaper than a set insert per region. Neighbouring bricks
    // mostly share their region, so a repeat of the last one is not even collected.
    const BITS: u32 = 42;
    const BIAS: i64 = 1 << (BITS - 1);
    // Regions are at most 2^31 voxels times the scale from zero: far inside the range.
    let biased = |c: i64| (c.clamp(-BIAS, BIAS - 1) + BIAS) as u128;
    let pack = |x: i64, y: i64, z: i64| biased(x) << (2 * BITS) | biased(y) << BITS | biased(z);
    let mut lowers: Vec<u128> = Vec::new();
    for o in origins {
        let lo = o.map(|c| (c as f64 * scale).floor() as i64);
        let hi = o.map(|c| (((c + 8) as f64 * scale).ceil() as i64 - 1).max(0));
        for x in lo[0] >> 7..=hi[0] >> 7 {
            for y in lo[1] >> 7..=hi[1] >> 7 {
                for z in lo[2] >> 7..=hi[2] >> 7 {
                    let key = pack(x, y, z);
                    if lowers.last() != Some(&key) {
                        lowers.push(key);
                    }
                }
            }
        }
    }
    lowers.sort_unstable();
    lowers.dedup();
    let field = |k: u128, at: u32| ((k >> at) as u64 & ((1 << BITS) - 1)) as i64 - BIAS;
    let mut uppers: Vec<u128> = lowers
        .iter()
        .map(|&k| {
            pack(
                field(k, 2 * BITS) >> 5,
                field(k, BITS) >> 5,
                field(k, 0) >> 5,
            )
        })
        .collect();
    uppers.sort_unstable();
    uppers.dedup();
    (lowers.len() as u64, uppers.len() as u64)
}

/// Rounds up to the dataset alignment.
pub fn padded(bytes: u64) -> u64 {
    bytes.div_ceil(DATASET_ALIGN) * DATASET_ALIGN
}

/// A predicted (or measured) frame size.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeEstimate {
    /// Horizontal resolution the estimate is for.
    pub resolution: u32,
    /// Grid type.
    pub grid_type: GridType,
    /// Bytes of one frame in a dataset: every grid padded to 4 KiB.
    pub frame_bytes: u64,
    /// Per attribute: leaf count and grid bytes (unpadded).
    pub per_attribute: Vec<(Attribute, u64, u64)>,
}

impl SizeEstimate {
    /// The largest grid, which must stay under 4 GiB for the GPU.
    pub fn largest_grid(&self) -> u64 {
        self.per_attribute.iter().map(|a| a.2).max().unwrap_or(0)
    }
}

/// The frames the calibration samples: first, middle and last (sizes change over time).
fn sample_frames(frames: u32) -> Vec<u32> {
    let mut v = vec![0, frames / 2, frames.saturating_sub(1)];
    v.dedup();
    v
}

/// Measured size of frame `frame` (generates it; for calibration and reports).
pub fn measure_frame(storm: &Storm, frame: u32, grid_type: GridType) -> SizeEstimate {
    let vols = storm.frame_volumes(frame);
    let per_attribute: Vec<_> = vols
        .iter()
        .map(|(a, v)| (*a, v.bricks.len() as u64, volume_grid_bytes(v, grid_type)))
        .collect();
    SizeEstimate {
        resolution: storm.params().resolution,
        grid_type,
        frame_bytes: per_attribute.iter().map(|a| padded(a.2)).sum(),
        per_attribute,
    }
}

/// One attribute of one calibration frame: leaves at both resolutions, and the brick
/// origins at the finer one.
type Sample = (u64, u64, Vec<[i32; 3]>);

/// Calibration data: per sampled frame and attribute, leaf counts at both calibration
/// resolutions, and the brick origins at the finer one (to count internal nodes).
pub struct Calibration {
    attributes: Vec<Attribute>,
    /// The two resolutions sampled.
    res: [u32; 2],
    /// `[frame][attribute] -> (leaves at N0, leaves at N1, origins at N1)`.
    samples: Vec<Vec<Sample>>,
}

impl Calibration {
    /// Generates the sample frames of `params` at the calibration resolutions.
    pub fn new(params: &StormParams) -> Calibration {
        Calibration::at(params, CALIBRATION)
    }

    /// Generates the sample frames of `params` at resolutions `res` (multiples of 8).
    fn at(params: &StormParams, res: [u32; 2]) -> Calibration {
        let frames = sample_frames(params.frames.max(1));
        let at = |n: u32| {
            let mut p = params.clone();
            p.resolution = n;
            Storm::new(p)
        };
        let (s0, s1) = (at(res[0]), at(res[1]));
        let samples = frames
            .iter()
            .map(|&f| {
                let v0 = s0.frame_volumes(f);
                let v1 = s1.frame_volumes(f);
                v0.iter()
                    .zip(v1)
                    .map(|((_, a), (_, b))| {
                        let origins = b.bricks.iter().map(|l| l.origin).collect();
                        (a.bricks.len() as u64, b.bricks.len() as u64, origins)
                    })
                    .collect()
            })
            .collect();
        Calibration {
            attributes: params.attributes.clone(),
            res,
            samples,
        }
    }

    /// Predicted leaves and grid bytes of attribute `ai` in sampled frame `fi` at
    /// horizontal resolution `n` (a multiple of 8).
    fn predict(&self, n: u32, grid_type: GridType, fi: usize, ai: usize) -> (f64, u64) {
        let (n0, n1) = (self.res[0] as f64, self.res[1] as f64);
        let nf = n as f64;
        let (l0, l1, origins) = &self.samples[fi][ai];
        let (l0, l1) = (*l0 as f64, *l1 as f64);
        // Solve a·n0³ + b·n0² = l0, a·n1³ + b·n1² = l1.
        let det = n0.powi(3) * n1.powi(2) - n1.powi(3) * n0.powi(2);
        let a = (l0 * n1.powi(2) - l1 * n0.powi(2)) / det;
        let b = (n0.powi(3) * l1 - n1.powi(3) * l0) / det;
        let l = if a > 0.0 && b >= 0.0 {
            a * nf.powi(3) + b * nf.powi(2)
        } else if l0 > 0.0 && l1 > 0.0 {
            // Not volume-like (thin features only): a power law through both points.
            let p = ((l1 / l0).ln() / (n1 / n0).ln()).clamp(1.0, 3.0);
            l1 * (nf / n1).powf(p)
        } else {
            l1 * (nf / n1).powi(3)
        };
        let (lowers, uppers) = node_counts(origins.iter().copied(), nf / n1);
        (l, grid_bytes(grid_type, l.round() as u64, lowers, uppers))
    }

    /// Predicted mean frame size at horizontal resolution `n`.
    pub fn estimate(&self, n: u32, grid_type: GridType) -> SizeEstimate {
        let n = n.max(8).div_ceil(8) * 8;
        let count = self.samples.len() as f64;
        let mut per_attribute = Vec::new();
        for (ai, &attr) in self.attributes.iter().enumerate() {
            let (mut leaves, mut bytes) = (0f64, 0f64);
            for fi in 0..self.samples.len() {
                let (l, b) = self.predict(n, grid_type, fi, ai);
                leaves += l;
                bytes += b as f64;
            }
            per_attribute.push((attr, (leaves / count) as u64, (bytes / count) as u64));
        }
        SizeEstimate {
            resolution: n,
            grid_type,
            frame_bytes: per_attribute.iter().map(|a| padded(a.2)).sum(),
            per_attribute,
        }
    }

    /// The resolution (a multiple of 8, 16..=16384) whose predicted frame size is closest
    /// to `target_bytes`, with its estimate.
    pub fn resolution_for(&self, target_bytes: u64, grid_type: GridType) -> SizeEstimate {
        // Sizes grow monotonically with resolution: bisect on n / 8.
        let (mut lo, mut hi) = (2u32, 2048u32);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.estimate(mid * 8, grid_type).frame_bytes < target_bytes {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let above = self.estimate(lo * 8, grid_type);
        if lo > 2 {
            let below = self.estimate((lo - 1) * 8, grid_type);
            if target_bytes.abs_diff(below.frame_bytes) < above.frame_bytes.abs_diff(target_bytes) {
                return below;
            }
        }
        above
    }
}

/// Exact size of frame `frame` without generating its values ([`Storm::leaf_origins_at`]):
/// the same figures as [`measure_frame`], in a few bytes of memory per leaf.
pub fn census_frame(storm: &Storm, frame: u32, grid_type: GridType) -> SizeEstimate {
    let params = storm.params();
    let origins = storm.leaf_origins_at(params.frame_time(frame));
    let per_attribute: Vec<_> = params
        .attributes
        .iter()
        .zip(&origins)
        .map(|(a, o)| {
            let (lowers, uppers) = node_counts(o.iter().copied(), 1.0);
            let leaves = o.len() as u64;
            (*a, leaves, grid_bytes(grid_type, leaves, lowers, uppers))
        })
        .collect();
    SizeEstimate {
        resolution: params.resolution,
        grid_type,
        frame_bytes: per_attribute.iter().map(|a| padded(a.2)).sum(),
        per_attribute,
    }
}

/// The calibrated model's choice for `target_bytes`, before the census: calibration at the
/// coarse resolutions, and, for a resolution above twice the coarse ones, again at a half
/// and a quarter of it (extrapolating far underestimates: fine features resolve as the
/// grid refines, +25 % at 768, +30 % at 1480).
fn calibrated(params: &StormParams, grid_type: GridType, target_bytes: u64) -> Calibration {
    let cal = Calibration::new(params);
    let first = cal.resolution_for(target_bytes, grid_type);
    if first.resolution <= 2 * CALIBRATION[1] {
        return cal;
    }
    let n1 = (first.resolution / 2).div_ceil(8) * 8;
    let n0 = (n1 / 2).div_ceil(8) * 8;
    Calibration::at(params, [n0, n1])
}

/// The resolution that makes a frame of `params` (all else as given) about `target_bytes`
/// in a dataset, encoded as `grid_type`, with the predicted mean frame size.
///
/// The calibrated model picks a resolution (six small frames, about a second on two cores,
/// plus a refinement at a half and a quarter of a large pick, about 0.4 frames' work). A
/// census there counts the sampled frames' (first, middle, last) leaves and nodes exactly
/// (field evaluation without values, about half a frame's work each): their mean against
/// the middle frame gives the change over time. The model, scaled to agree with the census,
/// picks again; each further resolution it picks is counted at its middle frame only, up to
/// three resolutions, then the neighbour on the target's side of the closest if that one is
/// more than 1 % off, and the one whose mean frame is closest to the target wins. The
/// census matters: brick counts are not smooth in the resolution (a flat layer such as the
/// anvil's top spans one brick layer more or less as it aligns with the brick grid; at 300
/// voxels one step of 8 can change a frame by 20 %, at 2000 by about 1 %).
pub fn resolution_for_target(
    params: &StormParams,
    grid_type: GridType,
    target_bytes: u64,
) -> SizeEstimate {
    let cal = calibrated(params, grid_type, target_bytes);
    let frames = sample_frames(params.frames.max(1));
    let mid = params.frames.max(1) / 2;
    let first = cal.resolution_for(target_bytes, grid_type);
    let attrs = params.attributes.len();
    // Per attribute: mean over the sampled frames / the middle frame, bytes.
    let mut ratio = vec![1.0f64; attrs];
    // (resolution, estimate) of each resolution counted.
    let mut counted: Vec<SizeEstimate> = Vec::new();
    let count_at = |n: u32, ratio: &mut Vec<f64>, first_count: bool| -> SizeEstimate {
        let storm = Storm::new(StormParams {
            resolution: n,
            ..params.clone()
        });
        let middle = census_frame(&storm, mid, grid_type);
        if first_count {
            let others: Vec<SizeEstimate> = frames
                .iter()
                .filter(|&&f| f != mid)
                .map(|&f| census_frame(&storm, f, grid_type))
                .collect();
            let count = (others.len() + 1) as f64;
            for (ai, r) in ratio.iter_mut().enumerate() {
                let m = middle.per_attribute[ai].2 as f64;
                let sum = m + others
                    .iter()
                    .map(|o| o.per_attribute[ai].2 as f64)
                    .sum::<f64>();
                if m > 0.0 {
                    *r = sum / count / m;
                }
            }
        }
        let mut est = middle;
        for (a, r) in est.per_attribute.iter_mut().zip(ratio.iter()) {
            a.1 = (a.1 as f64 * r).round() as u64;
            a.2 = (a.2 as f64 * r).round() as u64;
        }
        est.frame_bytes = est.per_attribute.iter().map(|a| padded(a.2)).sum();
        est
    };
    let mut n = first.resolution;
    while counted.len() < 3 && !counted.iter().any(|c| c.resolution == n) {
        let est = count_at(n, &mut ratio, counted.is_empty());
        let model = cal.estimate(n, grid_type).frame_bytes as f64;
        if model <= 0.0 || est.frame_bytes == 0 {
            break;
        }
        // The model scaled to agree with the census at n picks again.
        let k = est.frame_bytes as f64 / model;
        counted.push(est);
        n = cal
            .resolution_for((target_bytes as f64 / k).round() as u64, grid_type)
            .resolution;
    }
    // Off by more than 1 %: the neighbour on the target's side may be closer (sizes jump
    // between resolutions), so count it too.
    let best = |c: &[SizeEstimate]| {
        c.iter()
            .min_by_key(|e| e.frame_bytes.abs_diff(target_bytes))
            .cloned()
    };
    if let Some(b) = best(&counted)
        && b.frame_bytes.abs_diff(target_bytes) * 100 > target_bytes
    {
        let m = if b.frame_bytes < target_bytes {
            b.resolution + 8
        } else {
            b.resolution.saturating_sub(8)
        };
        if m >= 16 && !counted.iter().any(|c| c.resolution == m) {
            let est = count_at(m, &mut ratio, false);
            counted.push(est);
        }
    }
    best(&counted).unwrap_or(first)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::noise::mix64;
    use std::collections::HashSet;

    /// The node regions of `origins`, one set insert per region touched.
    fn node_counts_by_set(origins: &[[i32; 3]], scale: f64) -> (u64, u64) {
        let (mut lowers, mut uppers) = (HashSet::new(), HashSet::new());
        for o in origins {
            let lo = o.map(|c| (c as f64 * scale).floor() as i64);
            let hi = o.map(|c| (((c + 8) as f64 * scale).ceil() as i64 - 1).max(0));
            for x in lo[0] >> 7..=hi[0] >> 7 {
                for y in lo[1] >> 7..=hi[1] >> 7 {
                    for z in lo[2] >> 7..=hi[2] >> 7 {
                        lowers.insert([x, y, z]);
                        uppers.insert([x >> 5, y >> 5, z >> 5]);
                    }
                }
            }
        }
        (lowers.len() as u64, uppers.len() as u64)
    }

    /// Sorted counting agrees with a set of every region touched, for clustered and
    /// scattered bricks, origins just below zero and the picker's scales. (Far negative
    /// origins do not occur: the domain starts at zero, and the brick span's upper end is
    /// clamped to zero, so such a brick would span every node up to the origin.)
    #[test]
    fn node_counts_match_a_set() {
        let mut seed = 3u64;
        let mut next = |n: i32| {
            seed = mix64(seed);
            (seed >> 33) as i32 % n
        };
        for case in 0..40 {
            let spread = [64, 1024, 9000, 300_000][case % 4];
            let count = 1 + next(3000) as usize;
            let origins: Vec<[i32; 3]> = (0..count)
                .map(|_| [0; 3].map(|_| (next(2 * spread) - 64) / 8 * 8))
                .collect();
            for scale in [1.0, 0.5, 1.75, 2.0, 3.3] {
                assert_eq!(
                    node_counts(origins.iter().copied(), scale),
                    node_counts_by_set(&origins, scale),
                    "case {case} scale {scale}"
                );
            }
        }
    }
}
