//! Resampling a model field from its native grid (uniform horizontally, stretched
//! vertically, heights per column or shared by all columns) onto box voxels, and turning
//! the voxels above a background into sparse 8³ bricks.
//!
//! The method, in the words the README uses: voxel (i, j, k) sits at
//! `x = x0 + i·hx, y = y0 + j·hy, z = z0 + k·hz` (hx, hy, hz the voxel's size along each
//! axis, z0 the lowest model level of any column at any time). Each native column is
//! interpolated linearly in z between the two model levels around `z`; columns are
//! combined bilinearly in x and y (with hx and hy equal to the files' horizontal spacing,
//! the default, voxel column (i, j) is native column (i, j) and the bilinear weights are 1
//! and 0). A voxel whose z lies outside a contributing column's levels, or whose value is
//! NaN, is left out.

use std::ops::Range;

use supercell::format::{
    BuildOptions, Coord, EncodedBlock, EncodedLeaves, FormatError, LEAF_DIM, LEAF_VOXELS,
    LeafBrick, LeafEncoder, SparseVolume,
};

/// Heights (metres) of a field's model levels.
#[derive(Clone, Debug, PartialEq)]
pub enum Heights {
    /// One set of levels for every column (CM1's `zh`), strictly increasing.
    Shared(Vec<f64>),
    /// Per column (WRF): `nz × ny × nx` values, `[k][j][i]` with `i` fastest, each column
    /// strictly increasing.
    PerColumn(Vec<f64>),
}

impl Heights {
    /// Height of level `k` of column `(i, j)` in a grid `nx` columns wide and `ny` deep.
    #[inline]
    fn at(&self, k: usize, j: usize, i: usize, nx: usize, ny: usize) -> f64 {
        match self {
            Heights::Shared(z) => z[k],
            Heights::PerColumn(z) => z[(k * ny + j) * nx + i],
        }
    }
}

/// How far above a column's lowest level the layers lie whose thickness sets the default
/// vertical voxel size ([`default_dz`]): the lowest kilometres, where models put their finest
/// levels and storms their low-level structure.
pub const LOW_LAYERS_M: f64 = 3000.0;

/// What the voxel grid needs to know of a record's heights.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeightSpan {
    /// The lowest level of any column, metres.
    pub lo: f64,
    /// The highest level of any column, metres.
    pub hi: f64,
    /// The thinnest layer (between adjacent levels of a column) whose lower level lies at
    /// most [`LOW_LAYERS_M`] above the column's lowest level, metres.
    pub finest_low_layer: f64,
}

impl HeightSpan {
    /// The span of `heights` (`nz` levels of `nx × ny` columns).
    pub fn of(heights: &Heights, nx: usize, ny: usize, nz: usize) -> HeightSpan {
        let mut span = HeightSpan {
            lo: f64::INFINITY,
            hi: f64::NEG_INFINITY,
            finest_low_layer: f64::INFINITY,
        };
        let columns = match heights {
            Heights::Shared(_) => 1,
            Heights::PerColumn(_) => nx * ny,
        };
        for c in 0..columns {
            let (i, j) = (c % nx, c / nx);
            let level = |k: usize| heights.at(k, j, i, nx, ny);
            let bottom = level(0);
            span.lo = span.lo.min(bottom);
            span.hi = span.hi.max(level(nz - 1));
            for k in 0..nz - 1 {
                if level(k) - bottom > LOW_LAYERS_M {
                    break;
                }
                span.finest_low_layer = span.finest_low_layer.min(level(k + 1) - level(k));
            }
        }
        span
    }

    /// The span covering both.
    pub fn union(self, other: HeightSpan) -> HeightSpan {
        HeightSpan {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
            finest_low_layer: self.finest_low_layer.min(other.finest_low_layer),
        }
    }
}

/// The default vertical voxel size from the finest low layer ([`HeightSpan`]): its
/// thickness rounded to 4 significant digits (which removes the float32 noise of the
/// heights: 499.99988 m becomes 500 m) and then down to 3 (so that the voxels are not
/// thicker than the layer and read well: 58.706 m becomes 58.7 m, 214.2857 m 214 m).
pub fn default_dz(finest_low_layer: f64) -> f64 {
    let significant = |x: f64, digits: i32, round: fn(f64) -> f64| {
        let step = 10f64.powi(x.log10().floor() as i32 + 1 - digits);
        let digits_after = (-step.log10().round()).max(0.0) as usize;
        let v = round(x / step) * step;
        format!("{v:.digits_after$}").parse::<f64>().unwrap_or(v)
    };
    let four = significant(finest_low_layer, 4, f64::round);
    significant(four, 3, f64::floor)
}

/// A field on the native grid at mass points: `nz × ny × nx` values, `[k][j][i]`, `i`
/// fastest (netCDF's order for `(zh, yh, xh)`).
#[derive(Clone, Debug, PartialEq)]
pub struct NativeField {
    /// Columns along x.
    pub nx: usize,
    /// Columns along y.
    pub ny: usize,
    /// Model levels.
    pub nz: usize,
    /// The values.
    pub values: Vec<f32>,
}

/// Where the voxels lie relative to the native grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VoxelGrid {
    /// Voxel size along x, y and z, metres.
    pub voxel: [f64; 3],
    /// Horizontal spacing of the native columns, metres (x, y).
    pub spacing: [f64; 2],
    /// World position of voxel (0, 0, 0), metres: the first column's x and y, the lowest
    /// model level's z.
    pub origin: [f64; 3],
    /// Voxels along x, y and z.
    pub dims: [usize; 3],
}

impl VoxelGrid {
    /// The voxels covering `nx × ny` columns spaced `spacing` apart with origin `origin`,
    /// whose levels span `z_lo..=z_hi`, of size `voxel`.
    pub fn covering(
        nx: usize,
        ny: usize,
        spacing: [f64; 2],
        origin_xy: [f64; 2],
        z_lo: f64,
        z_hi: f64,
        voxel: [f64; 3],
    ) -> VoxelGrid {
        // A small slack so that a span that is an exact multiple of the edge in decimal
        // (3000 m at 250 m) keeps its last voxel despite rounding in the heights.
        let count = |span: f64, edge: f64| (span / edge + 1e-9).floor() as usize + 1;
        VoxelGrid {
            voxel,
            spacing,
            origin: [origin_xy[0], origin_xy[1], z_lo],
            dims: [
                count((nx - 1) as f64 * spacing[0], voxel[0]),
                count((ny - 1) as f64 * spacing[1], voxel[1]),
                count(z_hi - z_lo, voxel[2]),
            ],
        }
    }

    /// Voxels in all.
    pub fn voxel_count(&self) -> u64 {
        self.dims.iter().map(|&d| d as u64).product()
    }
}

/// Which values are dropped as background.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Background {
    /// Values `<= threshold` (mixing ratios, reflectivity, speeds).
    AtOrBelow(f32),
    /// Values with `|v| <= threshold` (signed fields: velocity components, perturbations).
    MagnitudeAtOrBelow(f32),
}

impl Background {
    /// The rule as `(threshold, on_magnitude)`: `v` is kept (an active voxel) where `v`,
    /// or `|v|` when `on_magnitude`, is above the threshold (never NaN).
    #[inline]
    fn threshold(self) -> (f32, bool) {
        match self {
            Background::AtOrBelow(t) => (t, false),
            Background::MagnitudeAtOrBelow(t) => (t, true),
        }
    }

    /// Whether `v` is kept (an active voxel).
    #[cfg(test)]
    pub fn keeps(self, v: f32) -> bool {
        let (threshold, magnitude) = self.threshold();
        (if magnitude { v.abs() } else { v }) > threshold
    }
}

// The per-voxel definition of the method (`bracket`, `column_value`, `voxel_value`): the
// reference the tests hold `to_sparse`'s column walk to, bit for bit.

/// The index of the interval `[z[m], z[m+1]]` of column levels containing `z`, and the
/// weight of `z[m+1]`; `None` outside the column. `level(m)` returns the column's level `m`.
#[cfg(test)]
fn bracket(z: f64, nz: usize, level: impl Fn(usize) -> f64) -> Option<(usize, f64)> {
    let (lo, hi) = (level(0), level(nz - 1));
    if !(z >= lo && z <= hi) {
        return None;
    }
    if nz == 1 {
        return Some((0, 0.0));
    }
    // Binary search for the last level <= z.
    let (mut a, mut b) = (0usize, nz - 1);
    while b - a > 1 {
        let mid = (a + b) / 2;
        if level(mid) <= z { a = mid } else { b = mid }
    }
    let (za, zb) = (level(a), level(a + 1));
    Some((a, (z - za) / (zb - za)))
}

/// The field's value at height `z` in column `(i, j)`, linear between the two levels
/// around it; `None` outside the column's levels.
#[cfg(test)]
fn column_value(field: &NativeField, heights: &Heights, i: usize, j: usize, z: f64) -> Option<f64> {
    let (nx, ny) = (field.nx, field.ny);
    let (m, t) = bracket(z, field.nz, |k| heights.at(k, j, i, nx, ny))?;
    let at = |k: usize| f64::from(field.values[(k * ny + j) * nx + i]);
    // At a level itself only that level's value counts (a NaN on the other side does not).
    if t == 0.0 {
        return Some(at(m));
    }
    if t == 1.0 {
        return Some(at(m + 1));
    }
    Some((1.0 - t) * at(m) + t * at(m + 1))
}

/// Source columns and weights for a voxel coordinate along one axis: `(c0, c1, w1)`.
#[inline]
fn axis_weights(index: usize, edge: f64, spacing: f64, n: usize) -> (usize, usize, f64) {
    let f = index as f64 * edge / spacing;
    let c0 = (f.floor() as usize).min(n - 1);
    let w = f - c0 as f64;
    if c0 + 1 >= n || w <= 1e-12 {
        (c0, c0, 0.0)
    } else {
        (c0, c0 + 1, w)
    }
}

/// The value of voxel `(i, j, k)`, or `None` where it lies outside the data.
#[cfg(test)]
pub fn voxel_value(
    field: &NativeField,
    heights: &Heights,
    grid: &VoxelGrid,
    i: usize,
    j: usize,
    k: usize,
) -> Option<f32> {
    let z = grid.origin[2] + k as f64 * grid.voxel[2];
    let (x0, x1, wx) = axis_weights(i, grid.voxel[0], grid.spacing[0], field.nx);
    let (y0, y1, wy) = axis_weights(j, grid.voxel[1], grid.spacing[1], field.ny);
    let mut sum = 0.0;
    for (ci, cw) in [(x0, 1.0 - wx), (x1, wx)] {
        for (cj, w) in [(y0, 1.0 - wy), (y1, wy)] {
            let w = cw * w;
            if w == 0.0 {
                continue;
            }
            sum += w * column_value(field, heights, ci, cj, z)?;
        }
    }
    let v = sum as f32;
    (!v.is_nan()).then_some(v)
}

/// Where voxel level `k` falls in one column's model levels: `(m, t)`, the interval
/// `[z[m], z[m+1]]` and the weight of `z[m+1]` (`(0, 0.0)` in a one-level column), or `None`
/// outside the levels. The same intervals and weights as `bracket`, found by walking the
/// levels upwards once for all voxel levels instead of searching them for every voxel.
type LevelStep = Option<(usize, f64)>;

/// The [`LevelStep`] of voxel levels `ks` of a column whose level `m` is `level(m)`, into
/// `out` (cleared first).
fn walk_levels(
    grid: &VoxelGrid,
    nz: usize,
    ks: Range<usize>,
    level: impl Fn(usize) -> f64,
    out: &mut Vec<LevelStep>,
) {
    out.clear();
    let (lo, hi) = (level(0), level(nz - 1));
    // The largest m <= nz - 2 with level(m) <= z, as `bracket` finds it.
    let mut m = 0;
    out.extend(ks.map(|k| {
        let z = grid.origin[2] + k as f64 * grid.voxel[2];
        if !(z >= lo && z <= hi) {
            return None;
        }
        if nz == 1 {
            return Some((0, 0.0));
        }
        while m + 2 < nz && level(m + 1) <= z {
            m += 1;
        }
        let (za, zb) = (level(m), level(m + 1));
        Some((m, (z - za) / (zb - za)))
    }));
}

/// The model levels `lo..=hi` that the voxels of each brick level (8 voxel levels) read in
/// a column walked as `steps` (every voxel level), into `out`; `None` where the brick level
/// lies outside the column. A brick none of whose source columns holds a value above the
/// background in these levels holds none either (its voxels are convex combinations of
/// them), so it is skipped before any voxel is interpolated.
fn brick_levels(steps: &[LevelStep], nz: usize, out: &mut Vec<Option<(usize, usize)>>) {
    out.clear();
    out.extend(steps.chunks(LEAF_DIM).map(|chunk| {
        let mut span: Option<(usize, usize)> = None;
        for &(m, _) in chunk.iter().flatten() {
            let top = (m + 1).min(nz - 1);
            span = Some(span.map_or((m, top), |(lo, hi)| (lo.min(m), hi.max(top))));
        }
        span
    }));
}

/// The level walk of the heights shared by every column, done once per field.
struct SharedLevels {
    /// Every voxel level's [`LevelStep`].
    steps: Vec<LevelStep>,
    /// Every brick level's model levels ([`brick_levels`]).
    bricks: Vec<Option<(usize, usize)>>,
}

/// The [`SharedLevels`] of `heights` (`None` for per-column heights, walked column by
/// column).
fn shared_levels(heights: &Heights, grid: &VoxelGrid, nz: usize) -> Option<SharedLevels> {
    match heights {
        Heights::Shared(z) => {
            let mut steps = Vec::new();
            walk_levels(grid, nz, 0..grid.dims[2], |k| z[k], &mut steps);
            let mut bricks = Vec::new();
            brick_levels(&steps, nz, &mut bricks);
            Some(SharedLevels { steps, bricks })
        }
        Heights::PerColumn(_) => None,
    }
}

/// The values of voxel column `(i, j)` at voxel levels `ks` (NaN where `voxel_value` has
/// none), into `out` (one per level of `ks`): the same arithmetic as `voxel_value`, in the
/// same order, with each source column's levels walked once ([`walk_levels`], or `shared`
/// where every column has the same levels), reading the columns from `block`. `scratch`
/// holds a per-column walk.
#[allow(clippy::too_many_arguments)]
fn voxel_column(
    field: &NativeField,
    block: &NativeBlock,
    heights: &Heights,
    grid: &VoxelGrid,
    shared: Option<&SharedLevels>,
    (i, j): (usize, usize),
    ks: Range<usize>,
    out: &mut [f64],
    scratch: &mut Vec<LevelStep>,
) {
    out.fill(0.0);
    let (nx, ny, nz) = (field.nx, field.ny, field.nz);
    let (x0, x1, wx) = axis_weights(i, grid.voxel[0], grid.spacing[0], nx);
    let (y0, y1, wy) = axis_weights(j, grid.voxel[1], grid.spacing[1], ny);
    for (ci, cw) in [(x0, 1.0 - wx), (x1, wx)] {
        for (cj, w) in [(y0, 1.0 - wy), (y1, wy)] {
            let w = cw * w;
            if w == 0.0 {
                continue;
            }
            let steps: &[LevelStep] = match shared {
                Some(shared) => &shared.steps[ks.clone()],
                None => {
                    let level = |k| heights.at(k, cj, ci, nx, ny);
                    walk_levels(grid, nz, ks.clone(), level, scratch);
                    &scratch[..]
                }
            };
            let column = block.column(ci, cj, nz);
            let at = |k: usize| f64::from(column[k]);
            for (sum, step) in out.iter_mut().zip(steps) {
                let Some((m, t)) = *step else {
                    *sum = f64::NAN;
                    continue;
                };
                let value = if t == 0.0 {
                    at(m)
                } else if t == 1.0 {
                    at(m + 1)
                } else {
                    (1.0 - t) * at(m) + t * at(m + 1)
                };
                *sum += w * value;
            }
        }
    }
}

/// The native columns one brick column's voxel columns read, copied out of the field so
/// that each column's levels lie side by side: in the field a column's next level is a
/// whole x–y plane away (590 KB at 384 × 384), a cache and TLB miss per level read.
#[derive(Default)]
struct NativeBlock {
    /// The native columns' x indices, increasing.
    xs: Vec<usize>,
    /// The native columns' y indices, increasing.
    ys: Vec<usize>,
    nz: usize,
    /// `[x][y][k]`: column `(xs[a], ys[b])` at `(a · ys.len() + b) · nz`.
    values: Vec<f32>,
}

impl NativeBlock {
    /// Copies the columns `(x, y)` for `x` in `xs`, `y` in `ys` (each sorted, no repeats).
    fn gather(&mut self, field: &NativeField) {
        let (nx, ny, nz) = (field.nx, field.ny, field.nz);
        let (cx, cy) = (self.xs.len(), self.ys.len());
        self.nz = nz;
        // Every value is overwritten below: no clearing first.
        self.values.resize(cx * cy * nz, 0.0);
        // Levels in blocks of 16 (a cache line of f32 per column): each column's block is
        // written as one run, and the 16 rows it reads are reused by the next 15 columns
        // along x. Writing level by level instead strides every write a column apart.
        const LEVELS: usize = 16;
        for k0 in (0..nz).step_by(LEVELS) {
            let depth = LEVELS.min(nz - k0);
            for (b, &y) in self.ys.iter().enumerate() {
                let rows = (k0 * ny + y) * nx;
                for (a, &x) in self.xs.iter().enumerate() {
                    let dst = &mut self.values[(a * cy + b) * nz + k0..][..depth];
                    for (dk, d) in dst.iter_mut().enumerate() {
                        *d = field.values[rows + dk * ny * nx + x];
                    }
                }
            }
        }
    }

    /// The levels of native column `(x, y)`, one of the gathered ones.
    #[inline]
    fn column(&self, x: usize, y: usize, nz: usize) -> &[f32] {
        let find = |list: &[usize], c: usize| match list.get(c.wrapping_sub(list[0])) {
            // Contiguous lists (all but coarse --dx) index directly.
            Some(&at) if at == c => c - list[0],
            _ => list.binary_search(&c).expect("column gathered"),
        };
        let (a, b) = (find(&self.xs, x), find(&self.ys, y));
        &self.values[(a * self.ys.len() + b) * nz..][..nz]
    }
}

/// The native columns (`c0`, `c1` of [`axis_weights`]) read by voxel columns `range` along
/// one axis, sorted and without repeats, into `out`.
fn source_columns(
    range: std::ops::Range<usize>,
    edge: f64,
    spacing: f64,
    n: usize,
    out: &mut Vec<usize>,
) {
    out.clear();
    for index in range {
        let (c0, c1, _) = axis_weights(index, edge, spacing, n);
        out.extend([c0, c1]);
    }
    out.sort_unstable();
    out.dedup();
}

/// Working memory of [`brick_column`], reused across calls.
#[derive(Default)]
struct Workspace {
    /// The 8 × 8 voxel columns, all heights.
    columns: Vec<f64>,
    /// A per-column level walk.
    scratch: Vec<LevelStep>,
    /// A per-column [`brick_levels`].
    scratch_bricks: Vec<Option<(usize, usize)>>,
    /// The native columns one brick column reads, along x and y.
    sources: (Vec<usize>, Vec<usize>),
    /// Per brick level of the brick column: whether a source value above the background
    /// may reach it.
    live: Vec<bool>,
    /// Per native column x: whether a value above the background lies in it at any level
    /// of the strip's rows ([`live_columns`]).
    live_x: Vec<bool>,
    block: NativeBlock,
}

/// Marks in `live_x` the native columns x holding a value above the background `(threshold,
/// magnitude)` at any level of rows `ys`; returns whether any does. One pass over the
/// strip's rows in memory order (vectorised, no transposition): a strip of a sparse field
/// with nothing in it is left before [`NativeBlock::gather`], the costlier copy.
fn live_columns(
    field: &NativeField,
    ys: &[usize],
    (threshold, magnitude): (f32, bool),
    live_x: &mut Vec<bool>,
) -> bool {
    let (nx, ny) = (field.nx, field.ny);
    live_x.clear();
    live_x.resize(nx, false);
    for k in 0..field.nz {
        for &y in ys {
            let row = &field.values[(k * ny + y) * nx..][..nx];
            if magnitude {
                for (live, v) in live_x.iter_mut().zip(row) {
                    *live |= v.abs() > threshold;
                }
            } else {
                for (live, &v) in live_x.iter_mut().zip(row) {
                    *live |= v > threshold;
                }
            }
        }
        // A dense field (wind components) marks every column in its first level.
        if !live_x.contains(&false) {
            break;
        }
    }
    live_x.contains(&true)
}

/// Whether a value of `column` at levels `levels` is above the background `(threshold,
/// magnitude)` ([`Background::threshold`]; NaN never is).
#[inline]
fn may_keep(
    column: &[f32],
    levels: Option<(usize, usize)>,
    (threshold, magnitude): (f32, bool),
) -> bool {
    let Some((lo, hi)) = levels else {
        return false;
    };
    let values = &column[lo..=hi];
    if magnitude {
        values.iter().any(|v| v.abs() > threshold)
    } else {
        values.iter().any(|&v| v > threshold)
    }
}

/// Marks in `work.live` the brick levels of brick column `(bi, bj)` that a source value
/// above the background may reach; returns whether any does. Reads a few native values
/// per brick instead of interpolating its 512 voxels: most bricks of a sparse field (cloud,
/// rain) hold none.
fn mark_live_bricks(
    field: &NativeField,
    heights: &Heights,
    grid: &VoxelGrid,
    shared: Option<&SharedLevels>,
    bg: (f32, bool),
    (is, js): (Range<usize>, Range<usize>),
    work: &mut Workspace,
) -> bool {
    let (nx, ny, nz) = (field.nx, field.ny, field.nz);
    let Workspace {
        scratch,
        scratch_bricks,
        sources: (xs, ys),
        live,
        live_x,
        block,
        ..
    } = work;
    source_columns(is, grid.voxel[0], grid.spacing[0], nx, xs);
    // Source columns with nothing above the background at any level add nothing.
    xs.retain(|&x| live_x[x]);
    if xs.is_empty() {
        return false;
    }
    source_columns(js, grid.voxel[1], grid.spacing[1], ny, ys);
    live.clear();
    live.resize(grid.dims[2].div_ceil(LEAF_DIM), false);
    for &ci in xs.iter() {
        for &cj in ys.iter() {
            let levels: &[Option<(usize, usize)>] = match shared {
                Some(shared) => &shared.bricks,
                None => {
                    let level = |k| heights.at(k, cj, ci, nx, ny);
                    walk_levels(grid, nz, 0..grid.dims[2], level, scratch);
                    brick_levels(scratch, nz, scratch_bricks);
                    scratch_bricks
                }
            };
            let column = block.column(ci, cj, nz);
            for (live, &levels) in live.iter_mut().zip(levels) {
                *live = *live || may_keep(column, levels, bg);
            }
        }
    }
    live.iter().any(|&l| l)
}

/// The bricks of brick column `(bi, bj)` (8 × 8 voxel columns, all heights) holding at
/// least one voxel that `background` keeps, each passed to `emit` with its origin, values
/// (kept voxels their value, the others 0) and active mask. The native columns it reads
/// are those `work.block` holds ([`brick_strip`] gathers them). Only the brick levels
/// [`mark_live_bricks`] finds are interpolated.
#[allow(clippy::too_many_arguments)]
fn brick_column<E>(
    field: &NativeField,
    heights: &Heights,
    grid: &VoxelGrid,
    shared: Option<&SharedLevels>,
    background: Background,
    (bi, bj): (usize, usize),
    work: &mut Workspace,
    emit: &mut impl FnMut(Coord, &[f32; LEAF_VOXELS], &[u64; LEAF_VOXELS / 64]) -> Result<(), E>,
) -> Result<(), E> {
    let nk = grid.dims[2];
    // The background as a threshold on v or |v|, hoisted out of the voxel loop; NaN
    // compares false, so it is never kept.
    let bg = background.threshold();
    let is = bi * LEAF_DIM..(bi * LEAF_DIM + LEAF_DIM).min(grid.dims[0]);
    let js = bj * LEAF_DIM..(bj * LEAF_DIM + LEAF_DIM).min(grid.dims[1]);
    let around = (is.clone(), js.clone());
    if !mark_live_bricks(field, heights, grid, shared, bg, around, work) {
        return Ok(());
    }
    let Workspace {
        columns,
        scratch,
        live,
        block,
        ..
    } = work;
    let block = &*block;
    columns.resize(LEAF_DIM * LEAF_DIM * nk, f64::NAN);
    if is.len() < LEAF_DIM || js.len() < LEAF_DIM {
        // Voxel columns past the grid's edge stay NaN: never kept.
        columns.fill(f64::NAN);
    }
    for i in is {
        let x = i - bi * LEAF_DIM;
        for j in js.clone() {
            let y = j - bj * LEAF_DIM;
            let column = &mut columns[(x * LEAF_DIM + y) * nk..][..nk];
            // Each run of live brick levels in one go (the per-column walk is per run).
            let mut bk = 0;
            while bk < live.len() {
                if !live[bk] {
                    bk += 1;
                    continue;
                }
                let start = bk;
                while bk < live.len() && live[bk] {
                    bk += 1;
                }
                let ks = start * LEAF_DIM..(bk * LEAF_DIM).min(nk);
                let out = &mut column[ks.clone()];
                voxel_column(
                    field,
                    block,
                    heights,
                    grid,
                    shared,
                    (i, j),
                    ks,
                    out,
                    scratch,
                );
            }
        }
    }
    let mut values = [0f32; LEAF_VOXELS];
    for bk in (0..nk.div_ceil(LEAF_DIM)).filter(|&bk| live[bk]) {
        let mut active = [0u64; LEAF_VOXELS / 64];
        values.fill(0.0);
        let depth = LEAF_DIM.min(nk - bk * LEAF_DIM);
        for xy in 0..LEAF_DIM * LEAF_DIM {
            let col = &columns[xy * nk + bk * LEAF_DIM..][..depth];
            // NanoVDB leaf order: x, y, z with z fastest (`LeafBrick::index`); a brick
            // column's 8 z of one (x, y) are one byte of the mask. Branch-free: whether a
            // voxel is kept follows the data, which a branch predictor cannot.
            let dst = &mut values[xy * LEAF_DIM..][..depth];
            let bits = if depth == LEAF_DIM {
                // Full bricks (all but the top one) with the length known: vectorised.
                let col = col.try_into().expect("a full brick column");
                keep_above::<LEAF_DIM>(col, dst.try_into().expect("a full brick column"), bg)
            } else {
                keep_above_slice(col, dst, bg)
            };
            let n = xy * LEAF_DIM;
            active[n >> 6] |= bits << (n & 63);
        }
        if active.iter().any(|&w| w != 0) {
            let origin: Coord = [
                (bi * LEAF_DIM) as i32,
                (bj * LEAF_DIM) as i32,
                (bk * LEAF_DIM) as i32,
            ];
            emit(origin, &values, &active)?;
        }
    }
    Ok(())
}

/// `v` narrowed to f32 and whether it is above the background `(threshold, magnitude)`
/// ([`Background::threshold`]; NaN never is), and the value stored for it (0 where not).
#[inline(always)]
fn keep_one(v: f64, (threshold, magnitude): (f32, bool)) -> (f32, bool) {
    let v = v as f32;
    let keep = (if magnitude { v.abs() } else { v }) > threshold;
    (if keep { v } else { 0.0 }, keep)
}

/// [`keep_one`] of each of `col` into `dst`; returns the kept ones' bits.
#[inline]
fn keep_above<const N: usize>(col: &[f64; N], dst: &mut [f32; N], bg: (f32, bool)) -> u64 {
    let mut bits = 0u64;
    for z in 0..N {
        let (v, keep) = keep_one(col[z], bg);
        dst[z] = v;
        bits |= u64::from(keep) << z;
    }
    bits
}

/// [`keep_above`] of a column shorter than a brick (the top of the grid).
fn keep_above_slice(col: &[f64], dst: &mut [f32], bg: (f32, bool)) -> u64 {
    let mut bits = 0u64;
    for (z, (&v, d)) in col.iter().zip(dst).enumerate() {
        let (v, keep) = keep_one(v, bg);
        *d = v;
        bits |= u64::from(keep) << z;
    }
    bits
}

/// [`brick_column`] of every brick column `(bi, bj)` of strip `bj` (all `bi`), the native
/// columns they read gathered first: whole rows of the field, read in memory order.
#[allow(clippy::too_many_arguments)]
fn brick_strip<E>(
    field: &NativeField,
    heights: &Heights,
    grid: &VoxelGrid,
    shared: Option<&SharedLevels>,
    background: Background,
    bj: usize,
    work: &mut Workspace,
    mut emit: impl FnMut(Coord, &[f32; LEAF_VOXELS], &[u64; LEAF_VOXELS / 64]) -> Result<(), E>,
) -> Result<(), E> {
    let block = &mut work.block;
    let js = bj * LEAF_DIM..(bj * LEAF_DIM + LEAF_DIM).min(grid.dims[1]);
    source_columns(
        0..grid.dims[0],
        grid.voxel[0],
        grid.spacing[0],
        field.nx,
        &mut block.xs,
    );
    source_columns(js, grid.voxel[1], grid.spacing[1], field.ny, &mut block.ys);
    if !live_columns(field, &block.ys, background.threshold(), &mut work.live_x) {
        return Ok(());
    }
    let block = &mut work.block;
    block.gather(field);
    for bi in 0..grid.dims[0].div_ceil(LEAF_DIM) {
        let at = (bi, bj);
        brick_column(
            field, heights, grid, shared, background, at, work, &mut emit,
        )?;
    }
    Ok(())
}

/// The field on the voxel grid as 8³ bricks holding the voxels `background` keeps (the
/// others inactive, value 0), and the bricks with none left out. Bricks are built in
/// parallel, a strip of brick columns (8 voxel columns deep in y, the whole x) per task.
pub fn to_sparse(
    field: &NativeField,
    heights: &Heights,
    grid: &VoxelGrid,
    background: Background,
) -> SparseVolume {
    use rayon::prelude::*;
    let shared = shared_levels(heights, grid, field.nz);
    let bricks: Vec<LeafBrick> = (0..grid.dims[1].div_ceil(LEAF_DIM))
        .into_par_iter()
        .map_init(Workspace::default, |work, bj| {
            let mut out = Vec::new();
            let emitted = brick_strip(
                field,
                heights,
                grid,
                shared.as_ref(),
                background,
                bj,
                work,
                |origin, values, active| {
                    out.push(LeafBrick {
                        origin,
                        values: Box::new(*values),
                        active: *active,
                    });
                    Ok::<(), std::convert::Infallible>(())
                },
            );
            let Ok(()) = emitted;
            out
        })
        .flatten_iter()
        .collect();
    SparseVolume {
        background: 0.0,
        bricks,
    }
}

/// The leaves of [`to_sparse`]'s volume encoded for the grid `opts` describes, each as soon
/// as its brick is made ([`LeafEncoder`]): no boxed brick per leaf, and the values are
/// encoded while in cache. `build_grid_encoded_into` of them writes the bytes `build_grid`
/// writes of the volume. Each strip's leaves go into a buffer from `buffers` (an empty
/// vector will do; reused ones save the page faults of fresh memory, which is why the
/// blocks keep the room they reserved).
pub fn encode_leaves(
    field: &NativeField,
    heights: &Heights,
    grid: &VoxelGrid,
    background: Background,
    opts: &BuildOptions,
    buffers: &(impl Fn() -> Vec<u8> + Sync),
) -> Result<EncodedLeaves, FormatError> {
    use rayon::prelude::*;
    let shared = shared_levels(heights, grid, field.nz);
    let per_strip = grid.dims[0].div_ceil(LEAF_DIM) * grid.dims[2].div_ceil(LEAF_DIM);
    let blocks: Vec<EncodedBlock> = (0..grid.dims[1].div_ceil(LEAF_DIM))
        .into_par_iter()
        .map_init(Workspace::default, |work, bj| {
            let mut blocks = [EncodedBlock::with_buffer(opts, 0.0, per_strip, buffers())?];
            let mut encoder = LeafEncoder::new();
            brick_strip(
                field,
                heights,
                grid,
                shared.as_ref(),
                background,
                bj,
                work,
                |origin, values, active| encoder.push(&mut blocks, 0, origin, values, active),
            )?;
            encoder.flush(&mut blocks);
            let [block] = blocks;
            Ok(block)
        })
        .collect::<Result<_, FormatError>>()?;
    EncodedLeaves::new(opts.grid_type, 0.0, blocks)
}

/// Subtracts from every value the mean of its model level (over all columns, NaNs left
/// out): the perturbation CM1 users look at for pressure and potential temperature.
pub fn subtract_level_means(field: &mut NativeField) {
    let per_level = field.nx * field.ny;
    for level in field.values.chunks_mut(per_level) {
        let (mut sum, mut n) = (0.0f64, 0usize);
        for &v in level.iter() {
            if !v.is_nan() {
                sum += f64::from(v);
                n += 1;
            }
        }
        if n == 0 {
            continue;
        }
        let mean = sum / n as f64;
        for v in level.iter_mut() {
            *v = (f64::from(*v) - mean) as f32;
        }
    }
}

#[cfg(test)]
mod tests;
