//! What a dataset's values are, read from its frames: the data behind the looks suggested
//! for a dataset without a scene (`suggest.rs`).
//!
//! Why the frames and not a summary in the manifest: the opacity of a suggested look is set
//! from the transmittance along the first view's rays, which depends on where the values
//! lie, not only on their distribution; the grids have to be read for that anyway. Reading
//! them here also works on every dataset already written, and adds nothing to the
//! writer's work while it imports. What it costs is bounded by [`SAMPLE_BUDGET_BYTES`].

use rayon::prelude::*;

use crate::dataset::{AlignedBuf, CrcCheck, Dataset, DatasetError};
use crate::format::{Grid, GridType};
use crate::probe::percentile;

/// Slot bytes read at most to sample a dataset: frames are read from the first until the
/// next would pass this; a first frame larger than this is not read (looks then come from
/// names and the manifest's ranges alone).
pub const SAMPLE_BUDGET_BYTES: u64 = 1 << 30;

/// Values kept per grid for percentiles: leaves are taken at a stride that keeps at most
/// this many (a subsample of a large grid's leaves, evenly over its storage order).
const VALUES_PER_GRID: usize = 1 << 21;

/// The active values of one attribute over the frames sampled.
#[derive(Clone, Debug, PartialEq)]
pub struct ValueSummary {
    /// Active voxels counted (every leaf's, before subsampling).
    pub active: u64,
    /// Largest fraction (0..1) of the attribute's index box (the manifest's, over all
    /// frames) that one sampled frame's active voxels fill: near 1 for a field that fills
    /// the domain (wind, pressure), small for one that has structure (cloud, smoke).
    pub fill: f64,
    /// Smallest active value.
    pub min: f32,
    /// Largest active value.
    pub max: f32,
    /// The 1st, 5th, 50th, 95th and 99th percentiles of the active values (nearest rank,
    /// [`percentile`]).
    pub p: [f32; 5],
    /// World box of the leaves holding an active value other than the grid's background
    /// (for a level set, a value ≤ 0: inside its surface), over the frames read (of the leaves read, for a grid subsampled): where the data is,
    /// which in a dense grid (every voxel active, most of them 0) is far smaller than the
    /// active box.
    pub data_box: Option<[[f64; 3]; 2]>,
}

impl ValueSummary {
    /// The 1st percentile.
    pub fn p01(&self) -> f32 {
        self.p[0]
    }
    /// The 99th percentile.
    pub fn p99(&self) -> f32 {
        self.p[4]
    }
    /// Whether every active value is ≥ 0.
    pub fn non_negative(&self) -> bool {
        self.min >= 0.0
    }
}

/// What sampling a dataset's first frames found.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DataSample {
    /// Per manifest attribute: its values over the frames read (None: not a scalar grid,
    /// or no active voxel in them, or no frame read).
    pub summaries: Vec<Option<ValueSummary>>,
    /// Per manifest attribute: the first frame whose grid has an active voxel (None: none
    /// of the frames read has one).
    pub first_data: Vec<Option<usize>>,
    /// Frames read, from frame 0 on.
    pub frames_read: usize,
}

impl DataSample {
    /// A sample of nothing (no frame read) for `attributes` attributes: looks then come from
    /// names and the manifest alone.
    pub fn none(attributes: usize) -> DataSample {
        DataSample {
            summaries: vec![None; attributes],
            first_data: vec![None; attributes],
            frames_read: 0,
        }
    }
}

/// Reads frames of `ds` from frame 0 while their slot images total at most `budget` bytes
/// (every frame of a small dataset) and summarises each attribute's active values.
pub fn sample_dataset(ds: &Dataset, budget: u64) -> Result<DataSample, DatasetError> {
    let m = ds.manifest();
    let n_attr = m.attributes.len();
    let mut out = DataSample::none(n_attr);
    let mut values: Vec<Vec<f32>> = vec![Vec::new(); n_attr];
    let mut counts = vec![(0u64, 0f64); n_attr];
    let mut boxes: Vec<Option<[[f64; 3]; 2]>> = vec![None; n_attr];
    let mut spent = 0u64;
    let mut slot = AlignedBuf::new();
    for f in 0..ds.frame_count() {
        let size = ds.frame(f).map_or(0, |fr| fr.slot_size);
        if spent.saturating_add(size) > budget {
            break;
        }
        spent += size;
        ds.read_frame(f, &mut slot, CrcCheck::Skip)?;
        let grids = ds.frame_grids(f, &slot)?;
        let per_attr: Vec<Option<GridValues>> = (0..n_attr)
            .into_par_iter()
            .map(|a| {
                let voxels = box_voxels(m.attributes[a].index_bbox);
                // A bricked frame holds an attribute's grid in pieces: merged, each piece
                // counting only the leaves its brick owns, so no voxel counts twice.
                grids
                    .iter()
                    .filter(|(e, _)| e.attribute as usize == a)
                    .filter_map(|(e, bytes)| {
                        let grid = Grid::parse(bytes).ok()?;
                        let owned = e
                            .brick
                            .and_then(|b| owned_box(m.bricks().get(b as usize)?, &grid));
                        Some(grid_values(&grid, voxels, owned))
                    })
                    .reduce(GridValues::merge)
            })
            .collect();
        for (a, gv) in per_attr.into_iter().enumerate() {
            let Some(gv) = gv else { continue };
            if gv.active > 0 && out.first_data[a].is_none() {
                out.first_data[a] = Some(f);
            }
            counts[a].0 += gv.active;
            counts[a].1 = counts[a].1.max(gv.fill);
            values[a].extend(gv.values);
            boxes[a] = union_box(boxes[a], gv.data_box);
        }
        out.frames_read = f + 1;
    }
    for (a, mut v) in values.into_iter().enumerate() {
        v.retain(|x| x.is_finite());
        if v.is_empty() {
            continue;
        }
        v.sort_unstable_by(f32::total_cmp);
        out.summaries[a] = Some(ValueSummary {
            active: counts[a].0,
            fill: counts[a].1,
            min: v[0],
            max: v[v.len() - 1],
            p: [0.01, 0.05, 0.5, 0.95, 0.99].map(|p| percentile(&v, p)),
            data_box: boxes[a],
        });
    }
    Ok(out)
}

/// Voxels of an inclusive index box (0 when absent).
fn box_voxels(b: Option<[[i32; 3]; 2]>) -> u64 {
    b.map_or(0, |[lo, hi]| {
        (0..3)
            .map(|i| (i64::from(hi[i]) - i64::from(lo[i]) + 1).max(0) as u64)
            .product()
    })
}

/// The union of two optional boxes.
fn union_box(a: Option<[[f64; 3]; 2]>, b: Option<[[f64; 3]; 2]>) -> Option<[[f64; 3]; 2]> {
    match (a, b) {
        (Some([alo, ahi]), Some([blo, bhi])) => Some([
            std::array::from_fn(|i| alo[i].min(blo[i])),
            std::array::from_fn(|i| ahi[i].max(bhi[i])),
        ]),
        (a, b) => a.or(b),
    }
}

/// One grid's active voxel count, the fraction of `box_voxels` they fill, its active leaf
/// values other than the background (a subsample of the leaves of a large grid), and the
/// world box of the leaves holding those.
struct GridValues {
    active: u64,
    fill: f64,
    values: Vec<f32>,
    data_box: Option<[[f64; 3]; 2]>,
}

impl GridValues {
    /// Two pieces of one grid (bricks) as one.
    fn merge(mut self, other: GridValues) -> GridValues {
        self.active += other.active;
        self.fill = (self.fill + other.fill).min(1.0);
        self.values.extend(other.values);
        self.data_box = union_box(self.data_box, other.data_box);
        self
    }
}

/// The leaves `brick` owns in `grid` (one of its bricks' grids), in the grid's index space
/// (`[min, max)`): the brick's box scaled by how much finer the grid's voxels are than the
/// model grid's the box is given in.
fn owned_box(brick: &crate::dataset::Brick, grid: &Grid<'_>) -> Option<[[i32; 3]; 2]> {
    let [lo, hi] = brick.index_box;
    let model = (brick.world_box[1][0] - brick.world_box[0][0]) / f64::from(hi[0] - lo[0]);
    let refine = (model / grid.voxel_size()[0]).round();
    (refine >= 1.0 && refine.is_finite()).then(|| {
        let r = refine as i32;
        [lo.map(|v| v * r), hi.map(|v| v * r)]
    })
}

/// World box of the eight corners of the leaf at index `origin`.
fn leaf_box(g: &Grid<'_>, origin: [i32; 3]) -> [[f64; 3]; 2] {
    let (mut lo, mut hi) = ([f64::INFINITY; 3], [f64::NEG_INFINITY; 3]);
    for corner in 0..8 {
        let ijk: [f64; 3] = std::array::from_fn(|i| {
            let dim = crate::format::LEAF_DIM as f64;
            f64::from(origin[i]) + if corner >> i & 1 == 1 { dim } else { 0.0 }
        });
        let w = g.map().apply(ijk);
        for i in 0..3 {
            lo[i] = lo[i].min(w[i]);
            hi[i] = hi[i].max(w[i]);
        }
    }
    [lo, hi]
}

fn grid_values(g: &Grid<'_>, box_voxels: u64, owned: Option<[[i32; 3]; 2]>) -> GridValues {
    let owns = |origin: [i32; 3]| {
        owned.is_none_or(|[lo, hi]| (0..3).all(|i| origin[i] >= lo[i] && origin[i] < hi[i]))
    };
    let active = match owned {
        None => g.active_voxel_count(),
        // A brick's halo leaves are its neighbours' voxels.
        Some(_) => g
            .leaves()
            .filter(|l| owns(l.origin()))
            .map(|l| {
                l.active_mask()
                    .iter()
                    .map(|w| u64::from(w.count_ones()))
                    .sum::<u64>()
            })
            .sum(),
    };
    let fill = if box_voxels > 0 {
        (active as f64 / box_voxels as f64).min(1.0)
    } else {
        0.0
    };
    let mut values = Vec::new();
    let mut data_box = None;
    let scalar = !matches!(
        g.grid_type(),
        GridType::Vec3f | GridType::Vec3d | GridType::Mask | GridType::Unknown
    );
    // Values equal to the background are a dense grid's filler (every voxel active, most
    // of them 0), not data: left out of the percentiles and the data box.
    let background = g.background().ok().and_then(|v| v.as_f32());
    let level_set = g.grid_class() == crate::format::GridClass::LevelSet;
    let leaves = g.leaves();
    let stride = (leaves.len() * crate::format::LEAF_VOXELS)
        .div_ceil(VALUES_PER_GRID)
        .max(1);
    if scalar && active > 0 {
        for leaf in leaves.step_by(stride).filter(|l| owns(l.origin())) {
            let Ok(vals) = leaf.values_f32() else { break };
            let mask = leaf.active_mask();
            let before = values.len();
            let mut inside = false;
            for (n, &v) in vals.iter().enumerate() {
                if mask[n / 64] >> (n % 64) & 1 == 1 && Some(v) != background {
                    values.push(v);
                    inside |= v <= 0.0;
                }
            }
            // A level set's data is its surface: the leaves holding a value ≤ 0.
            let holds_data = if level_set {
                inside
            } else {
                values.len() > before
            };
            if holds_data {
                data_box = union_box(data_box, Some(leaf_box(g, leaf.origin())));
            }
        }
    }
    GridValues {
        active,
        fill,
        values,
        data_box,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn box_voxels_counts_inclusive_corners() {
        assert_eq!(box_voxels(Some([[0, 0, 0], [47, 47, 35]])), 48 * 48 * 36);
        assert_eq!(box_voxels(Some([[-2, 0, 0], [-2, 0, 0]])), 1);
        assert_eq!(box_voxels(None), 0);
    }
}
