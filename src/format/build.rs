//! The NanoVDB writer: turns a [`SparseVolume`] (8³ bricks) into one NanoVDB grid buffer.
//!
//! The output is what NanoVDB's own builder (`tools/CreateNanoGrid.h` followed by
//! `tools/GridStats.h` and `tools/GridChecksum.h`, 32.9) produces for the same voxels:
//!
//! - Layout: `GridData | TreeData | RootData + tiles | upper nodes | lower nodes | leaves`, each
//!   level contiguous and breadth-first, children in the order the parent references them
//!   (root tiles in order, then child-mask order), so `TreeData`'s offsets point at the first
//!   node of each level and NanoVDB's `NodeManager` sees the same order.
//! - Root tiles are ordered by the signed coordinates of their upper nodes (x, then y, then z),
//!   as NanoVDB's `std::map<Coord, ..>` and its CUDA builders order them; the stored key is
//!   `RootData::CoordToKey` (the unsigned encoding, see [`layout::coord_to_key`]).
//! - Statistics: per leaf over its active values (decoded values for quantized leaves),
//!   Welford's running mean and variance in f64, merged upwards with Chan's formula in
//!   NanoVDB's serial order; bboxes, node flags and the grid flags as `GridStats` sets them.
//! - Quantization (Fp4/Fp8/Fp16/FpN) as `CreateNanoGrid` without dithering: per leaf the min
//!   and max of all 512 values, `code = trunc(encode * (v - min) + 0.5)` with
//!   `encode = (2^bits - 1) / (max - min)` in f32 (f64 for 16 bits). FpN picks the smallest
//!   of 1, 2, 4, 8 bits whose decoded values are all within the tolerance, else 16.
//!
//! # Version stamp, magic and checksum
//!
//! The layout is the same for every 32.x version; what differs is the grid magic, the version
//! field and the checksum scheme (see [`super::checksum`]). No stamp makes a full checksum
//! pass both NanoVDB 32.4's validator (Debian's `nanovdb_validate`) and 32.7+'s:
//!
//! - 32.4 accepts only the magic "NanoVDB0" and recomputes its node-wise checksum whatever
//!   the stamp says (head: headers, root and tiles; tail: per-node CRCs as 8-byte entries).
//! - 32.7+ picks the scheme by the stamped version. For stamps up to 32.6.0 it recomputes
//!   the node-wise tail with 4-byte entries (what 32.4 wrote on Windows, not on Linux); for
//!   later stamps it expects the blocked scheme, whose head 32.4 does not share.
//! - Readers (NanoVDB 32.9's `Grid`, PNanoVDB, warp-lang's loader) accept "NanoVDB0" with
//!   any 32.x version and never look at the checksum.
//!
//! Hence [`NanoVdbVersion`], checked against the real tools (Debian's 32.4 and a 32.9.2
//! `nanovdb_validate` built from the OpenVDB sources):
//!
//! | stamp | 32.4 validate | 32.9 validate | warp-lang 1.19 |
//! | --- | --- | --- | --- |
//! | `V32_4` (default): "NanoVDB0", 32.4.2, 32.4 checksum | passes | checksum tail disputed | reads |
//! | `V32_4` + [`ChecksumMode::Head`] | passes | passes | reads |
//! | `V32_9`: "NanoVDB1", 32.9.2, blocked checksum | fails (magic, or checksum) | passes | reads |
//!
//! Two quirks of 32.9's validator hit NanoVDB's own grids as much as ours: it rejects every
//! FpN grid ("Leaf node is not stored breadth-first": it steps through leaves by
//! `sizeof(LeafNode<FpN>)`, ignoring the codes), and it cannot checksum an empty grid stamped
//! ≤ 32.6 (the head ends at the first upper node, which does not exist). The default output is
//! byte-for-byte what NanoVDB 32.4's own converter (`nanovdb_convert`) writes for the same
//! voxels (tests/writer_crosscheck.rs).

use rayon::prelude::*;

use super::checksum::{self, ChecksumScheme};
use super::error::FormatError;
use super::layout::{
    self, GRID_FLAG_HAS_AVERAGE, GRID_FLAG_HAS_BBOX, GRID_FLAG_HAS_MIN_MAX,
    GRID_FLAG_HAS_STD_DEVIATION, GRID_FLAG_IS_BREADTH_FIRST, GRID_NAME_SIZE,
    GRID_OFF_BLIND_METADATA_COUNT, GRID_OFF_BLIND_METADATA_OFFSET, GRID_OFF_DATA0, GRID_OFF_DATA1,
    GRID_OFF_DATA2, GRID_OFF_FLAGS, GRID_OFF_GRID_CLASS, GRID_OFF_GRID_COUNT, GRID_OFF_GRID_INDEX,
    GRID_OFF_GRID_NAME, GRID_OFF_GRID_SIZE, GRID_OFF_GRID_TYPE, GRID_OFF_MAGIC, GRID_OFF_MAP,
    GRID_OFF_VERSION, GRID_OFF_VOXEL_SIZE, GRID_OFF_WORLD_BBOX, GRID_SIZE, INTERNAL_OFF_FLAGS,
    LEAF_FP_OFF_CODES, LEAF_FP_OFF_MINIMUM, LEAF_FP_OFF_QUANTUM, LEAF_FP_OFF_STATS,
    LEAF_FPN_BASE_SIZE, LEAF_OFF_BBOX_DIF, LEAF_OFF_BBOX_MIN, LEAF_OFF_FLAGS, LEAF_OFF_VALUE_MASK,
    MAP_OFF_INVMATD, MAP_OFF_INVMATF, MAP_OFF_MATD, MAP_OFF_MATF, MAP_OFF_TAPERD, MAP_OFF_TAPERF,
    MAP_OFF_VECD, MAP_OFF_VECF, NODE_OFF_BBOX_MAX, NODE_OFF_BBOX_MIN, NodeLayout,
    ROOT_OFF_TABLE_SIZE, ROOT_TILE_OFF_CHILD, ROOT_TILE_OFF_KEY, TREE_OFF_NODE_COUNT_LEAF,
    TREE_OFF_NODE_OFFSET_LEAF, TREE_OFF_TILE_COUNT_LOWER, TREE_OFF_VOXEL_COUNT, TREE_SIZE,
    TreeLayout,
};
use super::sparse::{LEAF_VOXELS, LeafBrick, SparseVolume};
use super::types::{Coord, GridClass, GridType, Version};

/// Which NanoVDB release a written grid identifies as: its magic, version field and checksum
/// scheme. The bytes of the tree are the same either way. See the module documentation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum NanoVdbVersion {
    /// Magic "NanoVDB0", version 32.4.2, 32.3–32.5 checksum (node-wise tail, LP64 entries).
    /// Passes Debian's NanoVDB 32.4 tools; read by every 32.x reader.
    #[default]
    V32_4,
    /// Magic "NanoVDB1", version 32.9.2, 32.7+ checksum (4 KiB-blocked tail).
    /// For NanoVDB 32.7+ tools; NanoVDB 32.4–32.5 reject the magic.
    V32_9,
}

impl NanoVdbVersion {
    /// The version number written into the grid header.
    pub const fn version(self) -> Version {
        match self {
            NanoVdbVersion::V32_4 => Version::new(32, 4, 2),
            NanoVdbVersion::V32_9 => Version::new(32, 9, 2),
        }
    }

    /// The grid magic number written at byte 0.
    pub const fn magic(self) -> u64 {
        match self {
            NanoVdbVersion::V32_4 => layout::MAGIC_NUMB,
            NanoVdbVersion::V32_9 => layout::MAGIC_GRID,
        }
    }

    /// The checksum scheme NanoVDB of this version computes.
    pub fn checksum_scheme(self) -> ChecksumScheme {
        ChecksumScheme::for_version(self.version())
    }
}

/// How much of the grid the stored checksum covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ChecksumMode {
    /// Head and tail (NanoVDB's `CheckMode::Full`): everything the version's scheme covers,
    /// which is every byte except, in 32.4's scheme, the codes of FpN leaves, and in 32.9's,
    /// all of a tree shorter than 4 KiB (see [`super::checksum`]).
    #[default]
    Full,
    /// Head only (NanoVDB's "partial"/"half"): the headers, tail all ones.
    Head,
    /// No checksum (all 64 bits set).
    Disabled,
}

/// What to build and how to stamp it.
#[derive(Clone, Debug, PartialEq)]
pub struct BuildOptions {
    /// Grid name, at most 255 bytes, no NUL (NanoVDB keeps longer names in blind data, which
    /// this writer does not produce).
    pub name: String,
    /// Value encoding: [`GridType::Float`], [`GridType::Fp4`], [`GridType::Fp8`],
    /// [`GridType::Fp16`] or [`GridType::FpN`].
    pub grid_type: GridType,
    /// What the values mean; must be a combination NanoVDB accepts for `grid_type`.
    pub grid_class: GridClass,
    /// Edge length of a voxel in world units (uniform scale, > 0).
    pub voxel_size: f64,
    /// World position of index coordinate (0, 0, 0).
    pub world_origin: [f64; 3],
    /// FpN only: the largest absolute error allowed per voxel. Negative means NanoVDB's
    /// default for the class (level sets: 0.1 · background / 3, fog volumes: 0.01, else 0).
    pub fpn_tolerance: f32,
    /// Which NanoVDB version the grid identifies as.
    pub version: NanoVdbVersion,
    /// How much of the grid the checksum covers.
    pub checksum: ChecksumMode,
}

impl Default for BuildOptions {
    fn default() -> BuildOptions {
        BuildOptions {
            name: String::new(),
            grid_type: GridType::Float,
            grid_class: GridClass::FogVolume,
            voxel_size: 1.0,
            world_origin: [0.0; 3],
            fpn_tolerance: -1.0,
            version: NanoVdbVersion::default(),
            checksum: ChecksumMode::default(),
        }
    }
}

/// Builds one complete NanoVDB grid buffer from `volume`.
///
/// The buffer is exactly the grid (`mGridSize` bytes, a multiple of 32); callers that need
/// 4 KiB alignment pad it themselves. Leaves are encoded in parallel on the current rayon
/// pool; building many grids from inside a rayon `par_iter` nests fine.
///
/// Errors: an unsupported grid type ([`FormatError::Unsupported`]), or invalid input
/// ([`FormatError::Corrupt`] naming the option or brick; for a brick, `offset` is its index
/// in `volume.bricks`): an origin that is not a multiple of 8, two bricks at one origin, a
/// non-finite value in a quantized grid, a bad voxel size, name or grid class.
pub fn build_grid(volume: &SparseVolume, opts: &BuildOptions) -> Result<Vec<u8>, FormatError> {
    let mut out = Vec::new();
    build_grid_into(volume, opts, &mut out)?;
    Ok(out)
}

/// [`build_grid`] into a caller-owned vector, which is cleared and resized to the grid size
/// (reusing its allocation saves page faults when building many frames).
pub fn build_grid_into(
    volume: &SparseVolume,
    opts: &BuildOptions,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let codec = LeafCodec::of(opts.grid_type)?;
    let tl = layout::layout(opts.grid_type).ok_or(FormatError::Unsupported {
        grid_type: opts.grid_type,
        detail: "the writer has no layout for this grid type",
    })?;
    check_options(opts)?;
    let plan = Plan::new(volume)?;
    let background = volume.background;

    // FpN: choose every leaf's bit width first, since it decides where later leaves start.
    let quant: Vec<Quant> = match codec {
        LeafCodec::Variable => {
            let tol = fpn_tolerance(opts, background);
            plan.order
                .par_iter()
                .with_min_len(64)
                .enumerate()
                .map(|(i, &b)| choose_fpn(&volume.bricks[b as usize], tol, b, i))
                .collect::<Result<_, _>>()?
        }
        _ => Vec::new(),
    };

    // Byte offsets of every level.
    let n_upper = plan.uppers.len();
    let n_lower = plan.lowers.len();
    let n_leaf = plan.order.len();
    let root_at = (GRID_SIZE + TREE_SIZE) as usize;
    let upper_at = root_at + tl.root.size as usize + n_upper * tl.root.tile_size as usize;
    let lower_at = upper_at + n_upper * tl.upper.size as usize;
    let leaf_at = lower_at + n_lower * tl.lower.size as usize;
    let leaf_offsets: Vec<usize> = match codec {
        LeafCodec::Variable => {
            let mut at = leaf_at;
            let mut offs = Vec::with_capacity(n_leaf + 1);
            for q in &quant {
                offs.push(at);
                at += (LEAF_FPN_BASE_SIZE + 64 * (1u32 << q.log2_bits)) as usize;
            }
            offs.push(at);
            offs
        }
        _ => (0..=n_leaf)
            .map(|i| leaf_at + i * tl.leaf.size as usize)
            .collect(),
    };
    let grid_size = leaf_offsets[n_leaf];

    out.clear();
    out.resize(grid_size, 0);
    let (head, rest) = out.split_at_mut(upper_at);
    let (uppers_buf, rest) = rest.split_at_mut(lower_at - upper_at);
    let (lowers_buf, leaves_buf) = rest.split_at_mut(leaf_at - lower_at);

    // Leaves, in parallel groups (see `welford_lanes`); each gives its statistics.
    let mut leaf_stats = vec![NodeStats::EMPTY; n_leaf];
    const GROUP: usize = LANES;
    match codec {
        LeafCodec::Variable => {
            let mut slices = Vec::with_capacity(n_leaf);
            let mut rest = leaves_buf;
            for w in leaf_offsets.windows(2) {
                let (leaf, tail) = rest.split_at_mut(w[1] - w[0]);
                slices.push(leaf);
                rest = tail;
            }
            slices
                .par_chunks_mut(GROUP)
                .zip(leaf_stats.par_chunks_mut(GROUP))
                .zip(plan.order.par_chunks(GROUP).zip(quant.par_chunks(GROUP)))
                .enumerate()
                .with_min_len(4)
                .try_for_each(|(g, ((dsts, stats), (bricks, quants)))| {
                    let jobs = dsts.iter_mut().zip(bricks).zip(quants).enumerate().map(
                        |(k, ((dst, &b), q))| {
                            (
                                &mut **dst,
                                &volume.bricks[b as usize],
                                Some(*q),
                                (b, g * GROUP + k),
                            )
                        },
                    );
                    write_leaf_group(codec, jobs, stats)
                })?;
        }
        _ => {
            let size = tl.leaf.size as usize;
            leaves_buf
                .par_chunks_mut(GROUP * size)
                .zip(leaf_stats.par_chunks_mut(GROUP))
                .zip(plan.order.par_chunks(GROUP))
                .enumerate()
                .with_min_len(4)
                .try_for_each(|(g, ((dst, stats), bricks))| {
                    let jobs =
                        dst.chunks_mut(size)
                            .zip(bricks)
                            .enumerate()
                            .map(|(k, (dst, &b))| {
                                (dst, &volume.bricks[b as usize], None, (b, g * GROUP + k))
                            });
                    write_leaf_group(codec, jobs, stats)
                })?;
        }
    }

    // Lower nodes: children are leaves.
    let mut lower_stats = vec![NodeStats::EMPTY; n_lower];
    lowers_buf
        .par_chunks_mut(tl.lower.size as usize)
        .zip(lower_stats.par_iter_mut())
        .zip(plan.lowers.par_iter().enumerate())
        .for_each(|((dst, st), (i, span))| {
            let node_at = lower_at + i * tl.lower.size as usize;
            let children = span.first as usize..(span.first + span.count) as usize;
            let kids = children.clone().map(|c| {
                let origin = volume.bricks[plan.order[c] as usize].origin;
                (child_index(origin, &tl.lower), leaf_offsets[c] - node_at)
            });
            *st = write_internal(&tl.lower, kids, &leaf_stats[children], background, dst);
        });

    // Upper nodes: children are lower nodes.
    let mut upper_stats = vec![NodeStats::EMPTY; n_upper];
    uppers_buf
        .par_chunks_mut(tl.upper.size as usize)
        .zip(upper_stats.par_iter_mut())
        .zip(plan.uppers.par_iter().enumerate())
        .for_each(|((dst, st), (i, span))| {
            let node_at = upper_at + i * tl.upper.size as usize;
            let children = span.first as usize..(span.first + span.count) as usize;
            let kids = children.clone().map(|c| {
                let origin = plan.lowers[c].origin;
                let child_at = lower_at + c * tl.lower.size as usize;
                (child_index(origin, &tl.upper), child_at - node_at)
            });
            *st = write_internal(&tl.upper, kids, &lower_stats[children], background, dst);
        });

    // Root, tree and grid headers.
    let root = write_root(
        &tl,
        &plan,
        &upper_stats,
        background,
        &mut head[root_at..],
        upper_at - root_at,
    );
    let voxel_count: u64 = leaf_stats.iter().map(|s| s.stats.n).sum();
    write_tree(
        &mut head[GRID_SIZE as usize..root_at],
        [leaf_at, lower_at, upper_at, root_at],
        [n_leaf, n_lower, n_upper],
        voxel_count,
    );
    write_grid_header(head, opts, grid_size, &root);

    let scheme = opts.version.checksum_scheme();
    let mode = match opts.checksum {
        ChecksumMode::Full => Some((scheme, true)),
        ChecksumMode::Head => Some((scheme, false)),
        ChecksumMode::Disabled => None,
    };
    checksum::store_checksum(out, mode)
}

// ------------------------------------------------------------------------------------------
// Options
// ------------------------------------------------------------------------------------------

fn invalid(what: impl Into<String>, offset: u64, detail: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        what: what.into(),
        offset,
        detail: detail.into(),
    }
}

fn check_options(opts: &BuildOptions) -> Result<(), FormatError> {
    if !(opts.voxel_size.is_finite() && opts.voxel_size > 0.0) {
        return Err(invalid(
            "build options",
            0,
            format!("voxel size {} is not a positive number", opts.voxel_size),
        ));
    }
    if !opts.world_origin.iter().all(|c| c.is_finite()) {
        return Err(invalid("build options", 0, "world origin is not finite"));
    }
    if opts.name.len() >= GRID_NAME_SIZE as usize || opts.name.contains('\0') {
        return Err(invalid(
            "build options",
            0,
            "grid name must be at most 255 bytes without NUL (long names need blind data)",
        ));
    }
    if !class_fits(opts.grid_type, opts.grid_class, opts.version) {
        return Err(invalid(
            "build options",
            0,
            format!(
                "NanoVDB does not allow grid class {} with grid type {}",
                opts.grid_class, opts.grid_type
            ),
        ));
    }
    Ok(())
}

/// NanoVDB's `isValid(GridType, GridClass)` for the value types this writer produces.
fn class_fits(t: GridType, c: GridClass, v: NanoVdbVersion) -> bool {
    let floating = matches!(
        t,
        GridType::Float | GridType::Fp4 | GridType::Fp8 | GridType::Fp16 | GridType::FpN
    );
    match c {
        GridClass::Unknown => true,
        GridClass::LevelSet | GridClass::FogVolume => floating,
        GridClass::VoxelVolume => t == GridType::Float,
        // TensorGrid is 32.9's; 32.4 rejects class numbers from 9 on.
        GridClass::TensorGrid => v == NanoVdbVersion::V32_9,
        GridClass::Staggered
        | GridClass::PointIndex
        | GridClass::PointData
        | GridClass::Topology
        | GridClass::IndexGrid => false,
    }
}

/// NanoVDB's `AbsDiff` oracle tolerance for FpN.
fn fpn_tolerance(opts: &BuildOptions, background: f32) -> f32 {
    if opts.fpn_tolerance >= 0.0 {
        return opts.fpn_tolerance;
    }
    match opts.grid_class {
        GridClass::LevelSet => 0.1f32 * background / 3.0f32,
        GridClass::FogVolume => 0.01,
        _ => 0.0,
    }
}

// ------------------------------------------------------------------------------------------
// Tree topology
// ------------------------------------------------------------------------------------------

/// A node and the contiguous run of its children in the next level's array.
#[derive(Clone, Copy, Debug)]
struct Span {
    origin: Coord,
    first: u32,
    count: u32,
}

/// The tree's shape: bricks in leaf order, grouped into lower and upper nodes.
struct Plan {
    /// Brick indices in NanoVDB's breadth-first leaf order.
    order: Vec<u32>,
    /// Lower nodes in order, each with its run of leaves.
    lowers: Vec<Span>,
    /// Upper nodes in root-tile order, each with its run of lower nodes.
    uppers: Vec<Span>,
}

/// Maps a coordinate's upper-node part to 20 bits that sort like the signed coordinate.
fn upper_bits(c: i32) -> u128 {
    u128::from((c as u32 ^ 0x8000_0000) >> 12)
}

/// Position of a child with origin `origin` in the table of its parent `node`.
fn child_index(origin: Coord, node: &NodeLayout) -> usize {
    let child_total = if node.log2dim == 5 {
        layout::LOWER_TOTAL
    } else {
        layout::LEAF_TOTAL
    };
    let mask = (1i32 << (child_total + node.log2dim)) - 1;
    let d = node.log2dim;
    let part = |c: i32| ((c & mask) >> child_total) as usize;
    part(origin[0]) << (2 * d) | part(origin[1]) << d | part(origin[2])
}

impl Plan {
    fn new(volume: &SparseVolume) -> Result<Plan, FormatError> {
        let n = volume.bricks.len();
        if n > u32::MAX as usize {
            return Err(invalid("sparse volume", 0, "more than 2^32 bricks"));
        }
        // Sort key: upper node (60 bits, signed order) | lower index (15) | leaf index (12) |
        // brick index (32). Sorting by it yields NanoVDB's breadth-first order at every level.
        let mut keys = Vec::with_capacity(n);
        for (i, b) in volume.bricks.iter().enumerate() {
            let [x, y, z] = b.origin;
            if (x | y | z) & 7 != 0 {
                return Err(invalid(
                    format!("brick {i}"),
                    i as u64,
                    format!("origin {:?} is not a multiple of 8", b.origin),
                ));
            }
            let lower = ((x & 4095) >> 7) << 10 | ((y & 4095) >> 7) << 5 | ((z & 4095) >> 7);
            let leaf = ((x & 127) >> 3) << 8 | ((y & 127) >> 3) << 4 | ((z & 127) >> 3);
            let upper = upper_bits(x) << 40 | upper_bits(y) << 20 | upper_bits(z);
            keys.push(upper << 59 | ((lower << 12 | leaf) as u128) << 32 | i as u128);
        }
        if n > 1 << 14 {
            keys.par_sort_unstable();
        } else {
            keys.sort_unstable();
        }

        let mut order = Vec::with_capacity(n);
        let mut lowers: Vec<Span> = Vec::new();
        let mut uppers: Vec<Span> = Vec::new();
        let mut prev: Option<u128> = None;
        for (pos, &k) in keys.iter().enumerate() {
            let idx = k as u32;
            let origin = volume.bricks[idx as usize].origin;
            let node = k >> 32;
            if prev == Some(node) {
                let first = order[pos - 1];
                return Err(invalid(
                    format!("brick {idx}"),
                    u64::from(idx),
                    format!("origin {origin:?} is also the origin of brick {first}"),
                ));
            }
            let new_upper = prev.is_none_or(|p| p >> 27 != node >> 27);
            let new_lower = new_upper || prev.is_none_or(|p| p >> 12 != node >> 12);
            if new_upper {
                uppers.push(Span {
                    origin: origin.map(|c| c & !4095),
                    first: lowers.len() as u32,
                    count: 0,
                });
            }
            if new_lower {
                lowers.push(Span {
                    origin: origin.map(|c| c & !127),
                    first: pos as u32,
                    count: 0,
                });
                uppers.last_mut().unwrap().count += 1;
            }
            lowers.last_mut().unwrap().count += 1;
            order.push(idx);
            prev = Some(node);
        }
        Ok(Plan {
            order,
            lowers,
            uppers,
        })
    }
}

// ------------------------------------------------------------------------------------------
// Statistics (NanoVDB's GridStats with Stats<float>)
// ------------------------------------------------------------------------------------------

/// Running statistics exactly as NanoVDB's `Stats<float>`: f32 extrema, f64 Welford mean and
/// sum of squared deviations, merged with Chan's formula.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Stats {
    n: u64,
    avg: f64,
    aux: f64,
    min: f32,
    max: f32,
}

impl Stats {
    const EMPTY: Stats = Stats {
        n: 0,
        avg: 0.0,
        aux: 0.0,
        min: f32::MAX,
        max: -f32::MAX,
    };

    /// NanoVDB's `Stats::add` for one value; the writer runs four of these chains at once in
    /// [`welford_lanes`], which tests check against this.
    #[cfg(test)]
    fn add(&mut self, v: f32) {
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += 1;
        let delta = f64::from(v) - self.avg;
        self.avg += delta / self.n as f64;
        self.aux += delta * (f64::from(v) - self.avg);
    }

    fn merge(&mut self, o: &Stats) {
        if o.n == 0 {
            return;
        }
        let denom = 1.0 / (self.n + o.n) as f64;
        let delta = o.avg - self.avg;
        self.avg += denom * delta * o.n as f64;
        self.aux += o.aux + denom * delta * delta * self.n as f64 * o.n as f64;
        if o.min < self.min {
            self.min = o.min;
        }
        if o.max > self.max {
            self.max = o.max;
        }
        self.n += o.n;
    }

    /// Population standard deviation.
    fn std(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.aux / self.n as f64).sqrt()
        }
    }
}

/// Statistics and active-voxel bbox of one node (NanoVDB's `GridStats::NodeStats`).
#[derive(Clone, Copy, Debug, PartialEq)]
struct NodeStats {
    stats: Stats,
    min: Coord,
    max: Coord,
}

impl NodeStats {
    /// No active values: NanoVDB's empty `CoordBBox` (max corner below min corner).
    const EMPTY: NodeStats = NodeStats {
        stats: Stats::EMPTY,
        min: [i32::MAX; 3],
        max: [i32::MIN; 3],
    };

    fn merge(&mut self, o: &NodeStats) {
        self.stats.merge(&o.stats);
        for a in 0..3 {
            self.min[a] = self.min[a].min(o.min[a]);
            self.max[a] = self.max[a].max(o.max[a]);
        }
    }

    fn is_empty(&self) -> bool {
        (0..3).any(|a| self.min[a] > self.max[a])
    }
}

// ------------------------------------------------------------------------------------------
// Leaves
// ------------------------------------------------------------------------------------------

/// How leaf values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LeafCodec {
    /// 512 f32.
    Float,
    /// Fixed-width codes of `1 << log2_bits` bits (Fp4, Fp8, Fp16).
    Fixed { log2_bits: u8 },
    /// FpN: per-leaf width, chosen by [`choose_fpn`].
    Variable,
}

impl LeafCodec {
    fn of(t: GridType) -> Result<LeafCodec, FormatError> {
        Ok(match t {
            GridType::Float => LeafCodec::Float,
            GridType::Fp4 => LeafCodec::Fixed { log2_bits: 2 },
            GridType::Fp8 => LeafCodec::Fixed { log2_bits: 3 },
            GridType::Fp16 => LeafCodec::Fixed { log2_bits: 4 },
            GridType::FpN => LeafCodec::Variable,
            _ => {
                return Err(FormatError::Unsupported {
                    grid_type: t,
                    detail: "the writer produces Float, Fp4, Fp8, Fp16 and FpN grids",
                });
            }
        })
    }
}

/// A quantized leaf's range and code width.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Quant {
    min: f32,
    max: f32,
    log2_bits: u8,
}

/// x86's float→integer truncation (`cvttss2si`/`cvttsd2si`), which is what NanoVDB's
/// `static_cast<uintN_t>(float)` compiles to: NaN and out-of-range give `i32::MIN`, whose low
/// bits are zero. Rust's saturating `as` would differ for those.
#[inline]
fn trunc_i32(x: f64) -> i32 {
    // NaN is outside every range.
    if !(-2147483648.0..2147483648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// Min and max of `values` exactly as NanoVDB's sequential `if (v < min) min = v` finds them
/// (NaN never wins; of equal extrema the first seen, which decides the sign of a zero).
fn extrema(values: &[f32]) -> (f32, f32) {
    // Lane-wise extrema vectorize; the only observable difference from the sequential scan,
    // the sign of a zero extremum, is fixed up below.
    let (mut lo, mut hi) = ([f32::MAX; 8], [-f32::MAX; 8]);
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            lo[j] = if c[j] < lo[j] { c[j] } else { lo[j] };
            hi[j] = if c[j] > hi[j] { c[j] } else { hi[j] };
        }
    }
    for (j, &v) in tail.iter().enumerate() {
        lo[j] = if v < lo[j] { v } else { lo[j] };
        hi[j] = if v > hi[j] { v } else { hi[j] };
    }
    let mut min = lo
        .iter()
        .copied()
        .fold(f32::MAX, |a, b| if b < a { b } else { a });
    let mut max = hi
        .iter()
        .copied()
        .fold(-f32::MAX, |a, b| if b > a { b } else { a });
    if min == 0.0 {
        min = *values.iter().find(|&&v| v == 0.0).unwrap_or(&min);
    }
    if max == 0.0 {
        max = *values.iter().find(|&&v| v == 0.0).unwrap_or(&max);
    }
    (min, max)
}

/// Min and max of all 512 values (see [`extrema`]), or the index of a non-finite value.
fn value_range(values: &[f32; LEAF_VOXELS]) -> Result<(f32, f32), usize> {
    let mut bad = 0u32;
    for &v in values.iter() {
        bad |= u32::from(v.to_bits() & 0x7f80_0000 == 0x7f80_0000);
    }
    if bad != 0 {
        return Err(values.iter().position(|v| !v.is_finite()).unwrap_or(0));
    }
    Ok(extrema(values))
}

/// Copies the active values of `all` (voxel order) to the front of `out`; returns how many.
fn gather_active(
    all: &[f32; LEAF_VOXELS],
    active: &[u64; 8],
    out: &mut [f32; LEAF_VOXELS],
) -> usize {
    let mut n = 0;
    for (w, &word) in active.iter().enumerate() {
        if word == u64::MAX {
            out[n..n + 64].copy_from_slice(&all[w * 64..w * 64 + 64]);
            n += 64;
            continue;
        }
        let mut bits = word;
        while bits != 0 {
            out[n] = all[w * 64 + bits.trailing_zeros() as usize];
            n += 1;
            bits &= bits - 1;
        }
    }
    n
}

fn non_finite(brick: u32, leaf: usize, voxel: usize) -> FormatError {
    invalid(
        format!("brick {brick} (leaf {leaf})"),
        u64::from(brick),
        format!("voxel {voxel} is not finite; quantized grids need finite values"),
    )
}

/// NanoVDB's code for `v`: `uintN_t(encode * (v - min) + 0.5)` in f32 (f64 for 16 bits).
/// `exact` selects the x86-faithful conversion, needed only when `encode` is not finite
/// (a leaf whose range is zero or denormal); otherwise every code is within 0..=units.
#[inline(always)]
fn code_f32(encode: f32, min: f32, v: f32, exact: bool) -> u32 {
    let x = encode * (v - min) + 0.5f32;
    // In range (0..=units) whenever `encode` is finite, where `as i32` is plain truncation.
    if exact {
        trunc_i32(f64::from(x)) as u32
    } else {
        x as i32 as u32
    }
}

#[inline(always)]
fn code_f64(encode: f64, min: f32, v: f32, exact: bool) -> u32 {
    let x = encode * f64::from(v - min) + 0.5;
    if exact {
        trunc_i32(x) as u32
    } else {
        x as i32 as u32
    }
}

/// FpN's bit-width search (`CreateNanoGrid::preProcess<FpN>` with the `AbsDiff` oracle):
/// the smallest of 1, 2, 4, 8 bits whose decoded values are all within `tolerance`, else 16.
fn choose_fpn(
    brick: &LeafBrick,
    tolerance: f32,
    index: u32,
    leaf: usize,
) -> Result<Quant, FormatError> {
    let (min, max) = value_range(&brick.values).map_err(|v| non_finite(index, leaf, v))?;
    let range = max - min;
    let mut log2 = 0u8;
    while range > 0.0 && log2 < 4 {
        let mask = (1u32 << (1u32 << log2)) - 1;
        let encode = mask as f32 / range;
        let decode = range / mask as f32;
        let exact = !encode.is_finite();
        let mut fits = true;
        for c in brick.values.chunks_exact(64) {
            let mut ok = true;
            for &v in c {
                let approx = code_f32(encode, min, v, exact) as f32 * decode + min;
                ok &= (v - approx).abs() <= tolerance;
            }
            if !ok {
                fits = false;
                break;
            }
        }
        if fits {
            break;
        }
        log2 += 1;
    }
    Ok(Quant {
        min,
        max,
        log2_bits: log2,
    })
}

/// A leaf whose bytes are written but whose mean and deviation still need the Welford pass.
struct Pending {
    /// Decoded active values in index order (the first `n`).
    vals: [f32; LEAF_VOXELS],
    n: usize,
    min: f32,
    max: f32,
    /// Quantized leaves: (minimum, quantum) to store the statistics as codes.
    codec: Option<(f32, f32)>,
    bbox: (Coord, Coord),
}

/// Writes one leaf's bytes into `dst` (exactly the leaf, zeroed) except its mean and
/// deviation; `quant` is the FpN width chosen beforehand (fixed widths derive it here).
fn write_leaf_body(
    codec: LeafCodec,
    brick: &LeafBrick,
    quant: Option<Quant>,
    dst: &mut [u8],
    (index, leaf): (u32, usize),
    p: &mut Pending,
) -> Result<(), FormatError> {
    let active = &brick.active;
    for (d, w) in dst[LEAF_OFF_VALUE_MASK as usize..][..64]
        .chunks_exact_mut(8)
        .zip(active)
    {
        d.copy_from_slice(&w.to_le_bytes());
    }
    let (bbox_min, bbox_dif, has_bbox) = leaf_bbox(brick.origin, active);
    put_i32s(dst, LEAF_OFF_BBOX_MIN as usize, &bbox_min);
    dst[LEAF_OFF_BBOX_DIF as usize..][..3].copy_from_slice(&bbox_dif);
    dst[LEAF_OFF_FLAGS as usize] = if has_bbox { 2 } else { 0 };
    p.bbox = if has_bbox {
        (
            bbox_min,
            [0, 1, 2].map(|a| bbox_min[a] + i32::from(bbox_dif[a])),
        )
    } else {
        (NodeStats::EMPTY.min, NodeStats::EMPTY.max)
    };
    match codec {
        LeafCodec::Float => {
            let values = &mut dst[96..96 + 4 * LEAF_VOXELS];
            for (d, v) in values.chunks_exact_mut(4).zip(brick.values.iter()) {
                d.copy_from_slice(&v.to_le_bytes());
            }
            p.codec = None;
            p.n = gather_active(&brick.values, active, &mut p.vals);
        }
        LeafCodec::Fixed { .. } | LeafCodec::Variable => {
            let q = match (codec, quant) {
                (LeafCodec::Fixed { log2_bits }, _) => {
                    let (min, max) =
                        value_range(&brick.values).map_err(|v| non_finite(index, leaf, v))?;
                    Quant {
                        min,
                        max,
                        log2_bits,
                    }
                }
                // FpN: chosen by `choose_fpn` before the leaf offsets were known.
                (_, q) => q.expect("FpN leaves come with their quantization"),
            };
            if codec == LeafCodec::Variable {
                // FpN keeps log2 of its bit width in the top three flag bits.
                dst[LEAF_OFF_FLAGS as usize] |= q.log2_bits << 5;
            }
            let bits = 1u32 << q.log2_bits;
            let quantum = (q.max - q.min) / ((1u32 << bits) - 1) as f32;
            put_f32(dst, LEAF_FP_OFF_MINIMUM as usize, q.min);
            put_f32(dst, LEAF_FP_OFF_QUANTUM as usize, quantum);
            let mut codes = [0u16; LEAF_VOXELS];
            encode_codes(&brick.values, q, &mut codes);
            pack_codes(
                &codes,
                bits,
                &mut dst[LEAF_FP_OFF_CODES as usize..][..64 * bits as usize],
            );
            p.codec = Some((q.min, quantum));
            // Statistics are over the values a reader decodes, as GridStats sees them.
            let mut decoded = [0f32; LEAF_VOXELS];
            for (d, &c) in decoded.iter_mut().zip(codes.iter()) {
                *d = f32::from(c) * quantum + q.min;
            }
            p.n = gather_active(&decoded, active, &mut p.vals);
        }
    }
    (p.min, p.max) = if p.n > 0 {
        extrema(&p.vals[..p.n])
    } else {
        (f32::MAX, -f32::MAX)
    };
    Ok(())
}

/// Leaves written together; their Welford chains run interleaved (see [`welford_lanes`]).
const LANES: usize = 8;

/// Welford's running mean and sum of squared deviations (NanoVDB's `Stats::add`, operation
/// for operation) for up to [`LANES`] leaves at once. One leaf's chain is a serial string of
/// f64 divisions; interleaving independent chains lets the divider pipeline them, which makes
/// this several times faster while every lane computes bit for bit what NanoVDB computes.
/// Returns (mean, aux) per leaf.
#[allow(clippy::needless_range_loop)] // lanes are indexed in lockstep across four arrays
fn welford_lanes(leaves: &[Pending]) -> [(f64, f64); LANES] {
    debug_assert!(leaves.len() <= LANES);
    let zero = [0f32; LEAF_VOXELS];
    let mut vals = [&zero; LANES];
    let mut n = [0usize; LANES];
    for (k, p) in leaves.iter().enumerate() {
        vals[k] = &p.vals;
        n[k] = p.n;
    }
    let (mut avg, mut aux) = ([0f64; LANES], [0f64; LANES]);
    let longest = n.iter().copied().max().unwrap_or(0);
    for i in 0..longest {
        let count = (i + 1) as f64;
        for k in 0..LANES {
            let v = f64::from(vals[k][i]);
            let delta = v - avg[k];
            let a = avg[k] + delta / count;
            let b = aux[k] + delta * (v - a);
            // Lanes past their last value keep their result.
            let live = i < n[k];
            avg[k] = if live { a } else { avg[k] };
            aux[k] = if live { b } else { aux[k] };
        }
    }
    std::array::from_fn(|k| (avg[k], aux[k]))
}

/// Stores a leaf's statistics (min, max, mean, deviation) and returns its node stats.
fn finish_leaf(p: &Pending, (avg, aux): (f64, f64), dst: &mut [u8]) -> NodeStats {
    let stats = Stats {
        n: p.n as u64,
        avg,
        aux,
        min: p.min,
        max: p.max,
    };
    if p.n > 0 {
        match p.codec {
            None => {
                put_f32(dst, 80, stats.min);
                put_f32(dst, 84, stats.max);
                put_f32(dst, 88, stats.avg as f32);
                put_f32(dst, 92, stats.std() as f32);
            }
            Some((min, quantum)) => {
                // LeafFnBase::setMin/Max/Avg/Dev store the statistics as codes of the leaf.
                let qz = |v: f32| trunc_i32(f64::from((v - min) / quantum + 0.5)) as u16;
                let dev = trunc_i32(f64::from(stats.std() as f32 / quantum + 0.5)) as u16;
                let s = LEAF_FP_OFF_STATS as usize;
                dst[s..s + 2].copy_from_slice(&qz(stats.min).to_le_bytes());
                dst[s + 2..s + 4].copy_from_slice(&qz(stats.max).to_le_bytes());
                dst[s + 4..s + 6].copy_from_slice(&qz(stats.avg as f32).to_le_bytes());
                dst[s + 6..s + 8].copy_from_slice(&dev.to_le_bytes());
            }
        }
    }
    NodeStats {
        stats,
        min: p.bbox.0,
        max: p.bbox.1,
    }
}

/// One leaf to write: destination bytes, source brick, FpN width, (brick index, leaf index).
type LeafJob<'a, 'b> = (&'a mut [u8], &'b LeafBrick, Option<Quant>, (u32, usize));

/// Writes up to [`LANES`] leaves and their statistics into `stats`.
fn write_leaf_group<'a, 'b>(
    codec: LeafCodec,
    jobs: impl Iterator<Item = LeafJob<'a, 'b>>,
    stats: &mut [NodeStats],
) -> Result<(), FormatError> {
    let mut pending: [Pending; LANES] = std::array::from_fn(|_| Pending {
        vals: [0.0; LEAF_VOXELS],
        n: 0,
        min: 0.0,
        max: 0.0,
        codec: None,
        bbox: ([0; 3], [0; 3]),
    });
    let mut dsts: [&mut [u8]; LANES] = std::array::from_fn(|_| -> &mut [u8] { &mut [] });
    let mut count = 0;
    for (k, (dst, brick, quant, id)) in jobs.enumerate() {
        write_leaf_body(codec, brick, quant, dst, id, &mut pending[k])?;
        dsts[k] = dst;
        count = k + 1;
    }
    let moments = welford_lanes(&pending[..count]);
    for k in 0..count {
        stats[k] = finish_leaf(&pending[k], moments[k], dsts[k]);
    }
    Ok(())
}

/// Quantizes all 512 values as `CreateNanoGrid::processLeafs` does (no dithering).
fn encode_codes(values: &[f32; LEAF_VOXELS], q: Quant, codes: &mut [u16; LEAF_VOXELS]) {
    let min = q.min;
    if q.log2_bits == 4 {
        // 16 bits: f64 arithmetic ("note that double is required!").
        let encode = 65535.0f64 / f64::from(q.max - q.min);
        if encode.is_finite() {
            for (c, &v) in codes.iter_mut().zip(values.iter()) {
                *c = code_f64(encode, min, v, false) as u16;
            }
        } else {
            for (c, &v) in codes.iter_mut().zip(values.iter()) {
                *c = code_f64(encode, min, v, true) as u16;
            }
        }
        return;
    }
    let bits = 1u32 << q.log2_bits;
    let encode = ((1u32 << bits) - 1) as f32 / (q.max - q.min);
    // C++ narrows each code to the leaf's code type (uint8_t) before packing.
    if encode.is_finite() {
        for (c, &v) in codes.iter_mut().zip(values.iter()) {
            *c = u16::from(code_f32(encode, min, v, false) as u8);
        }
    } else {
        for (c, &v) in codes.iter_mut().zip(values.iter()) {
            *c = u16::from(code_f32(encode, min, v, true) as u8);
        }
    }
}

/// Packs codes of `bits` bits little-endian, voxel 0 in the lowest bits of the first byte.
fn pack_codes(codes: &[u16; LEAF_VOXELS], bits: u32, out: &mut [u8]) {
    match bits {
        16 => {
            for (d, c) in out.chunks_exact_mut(2).zip(codes.iter()) {
                d.copy_from_slice(&c.to_le_bytes());
            }
        }
        8 => {
            for (d, &c) in out.iter_mut().zip(codes.iter()) {
                *d = c as u8;
            }
        }
        _ => {
            let per = (8 / bits) as usize;
            for (d, chunk) in out.iter_mut().zip(codes.chunks_exact(per)) {
                let mut byte = 0u8;
                for (k, &c) in chunk.iter().enumerate() {
                    // Shifts in u8, as the C++ stores `code << shift | ...` into a byte.
                    byte |= (c as u8) << (k as u32 * bits);
                }
                *d = byte;
            }
        }
    }
}

/// `LeafNode::updateBBox`: min corner and extent of the active voxels, and whether any are.
fn leaf_bbox(origin: Coord, active: &[u64; 8]) -> (Coord, [u8; 3], bool) {
    let any = active.iter().fold(0, |a, w| a | w);
    if any == 0 {
        return (origin, [0; 3], false);
    }
    // Word w holds x == w; bit b of a word is y = b >> 3, z = b & 7.
    let xmin = active.iter().position(|&w| w != 0).unwrap() as u32;
    let xmax = 7 - active.iter().rev().position(|&w| w != 0).unwrap() as u32;
    let ymin = any.trailing_zeros() >> 3;
    let ymax = (63 - any.leading_zeros()) >> 3;
    let bytes = any.to_le_bytes().iter().fold(0u8, |a, b| a | b);
    let zmin = bytes.trailing_zeros();
    let zmax = 7 - bytes.leading_zeros();
    let min = [
        origin[0] + xmin as i32,
        origin[1] + ymin as i32,
        origin[2] + zmin as i32,
    ];
    (
        min,
        [
            (xmax - xmin) as u8,
            (ymax - ymin) as u8,
            (zmax - zmin) as u8,
        ],
        true,
    )
}

// ------------------------------------------------------------------------------------------
// Internal nodes, root, tree, grid
// ------------------------------------------------------------------------------------------

/// Writes an internal node (zeroed `dst`) whose children are `(table index, byte offset)`
/// in table order, with `child_stats` their statistics in the same order.
fn write_internal(
    nl: &NodeLayout,
    children: impl Iterator<Item = (usize, usize)>,
    child_stats: &[NodeStats],
    background: f32,
    dst: &mut [u8],
) -> NodeStats {
    let mut total = NodeStats::EMPTY;
    for s in child_stats {
        total.merge(s);
    }
    let child_mask = nl.off_child_mask as usize;
    let table = nl.off_table as usize;
    let stride = nl.table_stride as usize;
    // Tiles hold the background: every voxel outside the bricks reads as background.
    if background.to_bits() != 0 {
        let bg = background.to_le_bytes();
        for entry in dst[table..table + stride * nl.table_count() as usize].chunks_exact_mut(stride)
        {
            entry[..4].copy_from_slice(&bg);
        }
    }
    for (n, offset) in children {
        dst[child_mask + n / 8] |= 1 << (n % 8);
        dst[table + n * stride..][..8].copy_from_slice(&(offset as i64).to_le_bytes());
    }
    if total.is_empty() {
        // No active values: bbox stays NanoVDB's empty sentinel, rendering off, no stats.
        put_i32s(dst, NODE_OFF_BBOX_MIN as usize, &total.min);
        put_i32s(dst, NODE_OFF_BBOX_MAX as usize, &total.max);
        dst[INTERNAL_OFF_FLAGS as usize..][..8].copy_from_slice(&1u64.to_le_bytes());
    } else {
        put_i32s(dst, NODE_OFF_BBOX_MIN as usize, &total.min);
        put_i32s(dst, NODE_OFF_BBOX_MAX as usize, &total.max);
        dst[INTERNAL_OFF_FLAGS as usize..][..8].copy_from_slice(&2u64.to_le_bytes());
        put_f32(dst, nl.off_min as usize, total.stats.min);
        put_f32(dst, nl.off_max as usize, total.stats.max);
        put_f32(dst, nl.off_avg as usize, total.stats.avg as f32);
        put_f32(dst, nl.off_stddev as usize, total.stats.std() as f32);
    }
    total
}

/// Writes the root and its tiles at the start of `dst`; `upper_rel` is the first upper node's
/// offset from the root.
fn write_root(
    tl: &TreeLayout,
    plan: &Plan,
    upper_stats: &[NodeStats],
    background: f32,
    dst: &mut [u8],
    upper_rel: usize,
) -> NodeStats {
    let r = &tl.root;
    let mut total = NodeStats::EMPTY;
    put_f32(dst, r.off_background as usize, background);
    dst[ROOT_OFF_TABLE_SIZE as usize..][..4]
        .copy_from_slice(&(plan.uppers.len() as u32).to_le_bytes());
    if plan.uppers.is_empty() {
        put_f32(dst, r.off_min as usize, background);
        put_f32(dst, r.off_max as usize, background);
    } else {
        for (i, (span, s)) in plan.uppers.iter().zip(upper_stats).enumerate() {
            let tile = r.size as usize + i * r.tile_size as usize;
            let child = upper_rel + i * tl.upper.size as usize;
            dst[tile + ROOT_TILE_OFF_KEY as usize..][..8]
                .copy_from_slice(&layout::coord_to_key(span.origin).to_le_bytes());
            dst[tile + ROOT_TILE_OFF_CHILD as usize..][..8]
                .copy_from_slice(&(child as i64).to_le_bytes());
            total.merge(s);
        }
        // GridStats sets the root's statistics even when no value is active.
        put_f32(dst, r.off_min as usize, total.stats.min);
        put_f32(dst, r.off_max as usize, total.stats.max);
        put_f32(dst, r.off_avg as usize, total.stats.avg as f32);
        put_f32(dst, r.off_stddev as usize, total.stats.std() as f32);
    }
    put_i32s(dst, NODE_OFF_BBOX_MIN as usize, &total.min);
    put_i32s(dst, NODE_OFF_BBOX_MAX as usize, &total.max);
    total
}

/// Writes `TreeData`; `at` holds absolute offsets of the first leaf, lower, upper node and root.
fn write_tree(dst: &mut [u8], at: [usize; 4], counts: [usize; 3], voxel_count: u64) {
    let tree = GRID_SIZE as usize;
    for level in 0..4 {
        let present = level == 3 || counts[level] > 0;
        let rel = if present {
            (at[level] - tree) as u64
        } else {
            0
        };
        dst[TREE_OFF_NODE_OFFSET_LEAF as usize + 8 * level..][..8]
            .copy_from_slice(&rel.to_le_bytes());
    }
    for (level, &c) in counts.iter().enumerate() {
        dst[TREE_OFF_NODE_COUNT_LEAF as usize + 4 * level..][..4]
            .copy_from_slice(&(c as u32).to_le_bytes());
    }
    // No active tiles at any level: the writer only produces voxels.
    dst[TREE_OFF_TILE_COUNT_LOWER as usize..][..12].fill(0);
    dst[TREE_OFF_VOXEL_COUNT as usize..][..8].copy_from_slice(&voxel_count.to_le_bytes());
}

/// NanoVDB's `Map::applyMap` (32.7+: fused multiply-adds) for a uniform scale `s` and
/// translation `t`.
fn apply_map(s: f64, t: [f64; 3], ijk: [f64; 3]) -> [f64; 3] {
    let m = |r: usize, c: usize| if r == c { s } else { 0.0 };
    let row = |r: usize| {
        ijk[0].mul_add(
            m(r, 0),
            ijk[1].mul_add(m(r, 1), ijk[2].mul_add(m(r, 2), t[r])),
        )
    };
    [row(0), row(1), row(2)]
}

fn write_grid_header(dst: &mut [u8], opts: &BuildOptions, grid_size: usize, root: &NodeStats) {
    let v = opts.version;
    dst[GRID_OFF_MAGIC as usize..][..8].copy_from_slice(&v.magic().to_le_bytes());
    dst[GRID_OFF_VERSION as usize..][..4].copy_from_slice(&v.version().0.to_le_bytes());
    dst[GRID_OFF_GRID_INDEX as usize..][..4].copy_from_slice(&0u32.to_le_bytes());
    dst[GRID_OFF_GRID_COUNT as usize..][..4].copy_from_slice(&1u32.to_le_bytes());
    dst[GRID_OFF_GRID_SIZE as usize..][..8].copy_from_slice(&(grid_size as u64).to_le_bytes());
    dst[GRID_OFF_GRID_NAME as usize..][..opts.name.len()].copy_from_slice(opts.name.as_bytes());

    // Map: uniform scale and translation, as Map::set(dx, trans).
    let (s, t) = (opts.voxel_size, opts.world_origin);
    let map = GRID_OFF_MAP as usize;
    for (i, &ti) in t.iter().enumerate() {
        // Row-major 3x3: the diagonal entries are 0, 4 and 8.
        let diag = map + 4 * (3 * i + i);
        put_f32(dst, diag + MAP_OFF_MATF as usize, s as f32);
        // f32 of the f64 inverse, as Map::set casts its double matrices.
        put_f32(dst, diag + MAP_OFF_INVMATF as usize, (1.0 / s) as f32);
        put_f32(dst, map + MAP_OFF_VECF as usize + 4 * i, ti as f32);
        let diag = map + 8 * (3 * i + i);
        put_f64(dst, diag + MAP_OFF_MATD as usize, s);
        put_f64(dst, diag + MAP_OFF_INVMATD as usize, 1.0 / s);
        put_f64(dst, map + MAP_OFF_VECD as usize + 8 * i, ti);
    }
    put_f32(dst, map + MAP_OFF_TAPERF as usize, 1.0);
    put_f64(dst, map + MAP_OFF_TAPERD as usize, 1.0);

    // World bbox: the index bbox with its max corner made exclusive, mapped corner by corner.
    let mut flags = GRID_FLAG_IS_BREADTH_FIRST
        | GRID_FLAG_HAS_MIN_MAX
        | GRID_FLAG_HAS_AVERAGE
        | GRID_FLAG_HAS_STD_DEVIATION;
    let (mut wmin, mut wmax) = ([f64::MAX; 3], [-f64::MAX; 3]);
    if !root.is_empty() {
        flags |= GRID_FLAG_HAS_BBOX;
        let lo = root.min.map(f64::from);
        let hi = root.max.map(|c| f64::from(c) + 1.0);
        for corner in 0..8 {
            let p = [
                if corner & 4 != 0 { hi[0] } else { lo[0] },
                if corner & 2 != 0 { hi[1] } else { lo[1] },
                if corner & 1 != 0 { hi[2] } else { lo[2] },
            ];
            let w = apply_map(s, t, p);
            for a in 0..3 {
                wmin[a] = wmin[a].min(w[a]);
                wmax[a] = wmax[a].max(w[a]);
            }
        }
    }
    for a in 0..3 {
        put_f64(dst, GRID_OFF_WORLD_BBOX as usize + 8 * a, wmin[a]);
        put_f64(dst, GRID_OFF_WORLD_BBOX as usize + 24 + 8 * a, wmax[a]);
    }
    let (one, zero) = (apply_map(s, t, [1.0; 3]), apply_map(s, t, [0.0; 3]));
    for a in 0..3 {
        put_f64(dst, GRID_OFF_VOXEL_SIZE as usize + 8 * a, one[a] - zero[a]);
    }
    dst[GRID_OFF_FLAGS as usize..][..4].copy_from_slice(&flags.to_le_bytes());
    dst[GRID_OFF_GRID_CLASS as usize..][..4]
        .copy_from_slice(&(opts.grid_class as u32).to_le_bytes());
    dst[GRID_OFF_GRID_TYPE as usize..][..4].copy_from_slice(&(opts.grid_type as u32).to_le_bytes());
    // No blind data. 32.4's builder stored offset 0, 32.7+ store the grid size.
    let blind = match v {
        NanoVdbVersion::V32_4 => 0,
        NanoVdbVersion::V32_9 => grid_size as u64,
    };
    dst[GRID_OFF_BLIND_METADATA_OFFSET as usize..][..8].copy_from_slice(&blind.to_le_bytes());
    dst[GRID_OFF_BLIND_METADATA_COUNT as usize..][..4].copy_from_slice(&0u32.to_le_bytes());
    dst[GRID_OFF_DATA0 as usize..][..4].fill(0);
    dst[GRID_OFF_DATA1 as usize..][..8].fill(0);
    dst[GRID_OFF_DATA2 as usize..][..8].fill(0);
}

#[inline]
fn put_f32(dst: &mut [u8], at: usize, v: f32) {
    dst[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn put_f64(dst: &mut [u8], at: usize, v: f64) {
    dst[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[inline]
fn put_i32s(dst: &mut [u8], at: usize, v: &Coord) {
    for (a, c) in v.iter().enumerate() {
        dst[at + 4 * a..at + 4 * a + 4].copy_from_slice(&c.to_le_bytes());
    }
}

#[cfg(test)]
#[allow(clippy::needless_range_loop)] // voxel loops index bricks, codes and expectations alike
mod tests {
    use super::*;
    use crate::format::grid::{Grid, Value};
    use crate::format::layout::{TREE_OFF_NODE_COUNT_LOWER, TREE_OFF_NODE_COUNT_UPPER};

    /// SplitMix64: deterministic test data without extra dependencies.
    pub(crate) struct Rng(u64);
    impl Rng {
        pub(crate) fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        pub(crate) fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 24) as f32
        }
        pub(crate) fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Bricks scattered over several upper nodes on both sides of zero, with every kind of
    /// mask: empty, full, sparse, single voxel; plus a brick of constant values.
    pub(crate) fn test_volume(seed: u64, bricks: usize) -> SparseVolume {
        let mut rng = Rng(seed);
        let mut seen = std::collections::HashSet::new();
        let mut out = SparseVolume {
            background: 0.25,
            bricks: Vec::new(),
        };
        while out.bricks.len() < bricks {
            let c = |r: &mut Rng| (r.below(2 * 1100) as i32 - 1100) * 8;
            let origin = if out.bricks.len() < 3 {
                [[-8, -8, -8], [0, 0, 0], [-4096, 4088, -4104]][out.bricks.len()]
            } else if out.bricks.len().is_multiple_of(3) {
                // Clusters: neighbours share lower nodes.
                let b = out.bricks[out.bricks.len() - 1].origin;
                [b[0], b[1], b[2] + 8]
            } else {
                [c(&mut rng), c(&mut rng), c(&mut rng)]
            };
            if !seen.insert(origin) {
                continue;
            }
            let k = out.bricks.len();
            let mut b = LeafBrick::filled(origin, 0.0);
            let scale = 1.0 + (k % 7) as f32 * 10.0;
            for v in b.values.iter_mut() {
                *v = (rng.unit() - 0.3) * scale;
            }
            match k % 6 {
                0 => {}
                1 => b.active = [u64::MAX; 8],
                2 => b.active[3] = 1 << 37,
                3 => {
                    b.values.fill(1.5);
                    b.active = [u64::MAX; 8];
                }
                _ => {
                    for w in b.active.iter_mut() {
                        *w = rng.next() & rng.next();
                    }
                }
            }
            out.bricks.push(b);
        }
        out
    }

    fn opts(t: GridType) -> BuildOptions {
        BuildOptions {
            name: format!("test_{t}"),
            grid_type: t,
            voxel_size: 0.5,
            world_origin: [10.0, -20.0, 0.125],
            fpn_tolerance: 0.01,
            ..BuildOptions::default()
        }
    }

    fn f32_at(b: &[u8], at: usize) -> f32 {
        f32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }
    fn coord_at(b: &[u8], at: usize) -> Coord {
        [0, 1, 2].map(|a| i32::from_le_bytes(b[at + 4 * a..at + 4 * a + 4].try_into().unwrap()))
    }

    /// An independent, deliberately plain transcription of NanoVDB's quantizer for one leaf:
    /// returns (bits, minimum, quantum, codes).
    fn reference_quantize(values: &[f32; 512], t: GridType, tol: f32) -> (u32, f32, f32, Vec<u32>) {
        let min = values.iter().copied().fold(f32::MAX, f32::min);
        let max = values.iter().copied().fold(-f32::MAX, f32::max);
        let to_code = |bits: u32, v: f32| -> u32 {
            if bits == 16 {
                let encode = 65535.0f64 / (max - min) as f64;
                let x = encode * (v - min) as f64 + 0.5;
                if x.is_nan() { 0 } else { x as u32 }
            } else {
                let encode = ((1u32 << bits) - 1) as f32 / (max - min);
                let x = encode * (v - min) + 0.5;
                if x.is_nan() { 0 } else { x as u32 }
            }
        };
        let bits = match t {
            GridType::Fp4 => 4,
            GridType::Fp8 => 8,
            GridType::Fp16 => 16,
            _ => {
                let mut bits = 16;
                for b in [1u32, 2, 4, 8] {
                    if max - min == 0.0 {
                        bits = 1;
                        break;
                    }
                    let q = (max - min) / ((1u32 << b) - 1) as f32;
                    if values
                        .iter()
                        .all(|&v| (v - (to_code(b, v) as f32 * q + min)).abs() <= tol)
                    {
                        bits = b;
                        break;
                    }
                }
                bits
            }
        };
        let quantum = (max - min) / ((1u32 << bits) - 1) as f32;
        (
            bits,
            min,
            quantum,
            values.iter().map(|&v| to_code(bits, v)).collect(),
        )
    }

    fn value_f32(v: Value) -> f32 {
        match v {
            Value::Float(f) => f,
            other => panic!("expected a float value, got {other:?}"),
        }
    }

    /// A synthetic storm-like volume: a dense core of fully active bricks with smooth values,
    /// wrapped in a shell of partially active bricks (about 50k bricks in all).
    pub(crate) fn synthetic(bricks_per_axis: i32) -> SparseVolume {
        let n = bricks_per_axis;
        let mut vol = SparseVolume {
            background: 0.0,
            bricks: Vec::new(),
        };
        let mut rng = Rng(7);
        for bx in -n / 2..n / 2 {
            for by in -n / 2..n / 2 {
                for bz in 0..n * 3 / 4 {
                    let (x, y, z) = (
                        bx as f32 / n as f32,
                        by as f32 / n as f32,
                        bz as f32 / n as f32 - 0.375,
                    );
                    let r = (x * x + y * y + z * z).sqrt();
                    if r > 0.5 {
                        continue;
                    }
                    let mut b = LeafBrick::filled([bx * 8, by * 8, bz * 8], 0.0);
                    for (i, v) in b.values.iter_mut().enumerate() {
                        let (u, w, t) = ((i >> 6) as f32, ((i >> 3) & 7) as f32, (i & 7) as f32);
                        *v = (1.0 - 2.0 * r)
                            * (0.6
                                + 0.4
                                    * ((u + bx as f32 * 8.0) * 0.05).sin()
                                    * ((w - t) * 0.07).cos());
                    }
                    b.active = if r < 0.45 {
                        [u64::MAX; 8]
                    } else {
                        std::array::from_fn(|_| rng.next())
                    };
                    vol.bricks.push(b);
                }
            }
        }
        vol
    }

    /// Writer throughput (run with `--release -- --ignored --nocapture`).
    #[test]
    #[ignore]
    fn bench_writer_throughput() {
        let n: i32 = std::env::var("WRITER_BENCH_N")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(48);
        let vol = synthetic(n);
        let input_mb = vol.bricks.len() as f64 * (512.0 * 4.0 + 64.0) / 1e6;
        let active: u64 = vol.bricks.iter().map(|b| u64::from(b.active_count())).sum();
        println!(
            "volume: {} bricks, {active} active voxels, {input_mb:.1} MB of input",
            vol.bricks.len()
        );
        let threads = rayon::current_num_threads();
        for t in [
            GridType::Float,
            GridType::Fp16,
            GridType::Fp8,
            GridType::Fp4,
            GridType::FpN,
        ] {
            let o = BuildOptions {
                grid_type: t,
                fpn_tolerance: 0.001,
                ..BuildOptions::default()
            };
            let mut out = Vec::new();
            build_grid_into(&vol, &o, &mut out).unwrap(); // warm-up, sizes the buffer
            let one = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .build()
                .unwrap();
            let time = |f: &dyn Fn()| {
                let reps = 3;
                let start = std::time::Instant::now();
                for _ in 0..reps {
                    f();
                }
                start.elapsed().as_secs_f64() / reps as f64
            };
            let build = |buf: &mut Vec<u8>| build_grid_into(&vol, &o, buf).unwrap();
            // One grid on one thread, fresh buffer each time (page faults included).
            let single = one.install(|| time(&|| build(&mut Vec::new())));
            // One grid on one thread into a reused buffer: the writer's own cost.
            let reuse = {
                let mut buf = out.clone();
                let start = std::time::Instant::now();
                one.install(|| {
                    for _ in 0..3 {
                        build(&mut buf);
                    }
                });
                start.elapsed().as_secs_f64() / 3.0
            };
            // One grid using every thread (leaf encoding in parallel), reused buffer.
            let all = {
                let mut buf = out.clone();
                let start = std::time::Instant::now();
                for _ in 0..3 {
                    build(&mut buf);
                }
                start.elapsed().as_secs_f64() / 3.0
            };
            // As a generator runs: one grid per thread, all threads busy, reused buffers.
            let mut bufs = vec![out.clone(); threads];
            let start = std::time::Instant::now();
            bufs.par_iter_mut().for_each(build);
            let batch = start.elapsed().as_secs_f64();
            let mb = out.len() as f64 / 1e6;
            println!(
                "{:>8}: grid {mb:6.1} MB | 1 thread: {:5.0} MB/s out ({:5.0} in), reused buffer {:5.0} out ({:5.0} in) | {threads} threads: one grid {:5.0} MB/s out, {threads} grids {:5.0} MB/s out ({:5.0} in)",
                t.name(),
                mb / single,
                input_mb / single,
                mb / reuse,
                input_mb / reuse,
                mb / all,
                threads as f64 * mb / batch,
                threads as f64 * input_mb / batch,
            );
        }
    }

    #[test]
    fn interleaved_welford_equals_sequential() {
        let mut rng = Rng(9);
        for lens in [
            [512; 8],
            [0, 3, 512, 77, 5, 511, 510, 0],
            [1, 0, 0, 0, 0, 0, 0, 0],
            [2, 400, 1, 12, 256, 256, 9, 64],
        ] {
            let leaves: Vec<Pending> = lens
                .iter()
                .map(|&n| {
                    let mut p = Pending {
                        vals: [0.0; 512],
                        n,
                        min: 0.0,
                        max: 0.0,
                        codec: None,
                        bbox: ([0; 3], [0; 3]),
                    };
                    for v in p.vals.iter_mut().take(n) {
                        *v = (rng.unit() - 0.5) * 1e3;
                    }
                    p
                })
                .collect();
            for count in 1..=LANES {
                let got = welford_lanes(&leaves[..count]);
                for (k, p) in leaves[..count].iter().enumerate() {
                    let mut s = Stats::EMPTY;
                    p.vals[..p.n].iter().for_each(|&v| s.add(v));
                    assert_eq!(got[k].0.to_bits(), s.avg.to_bits());
                    assert_eq!(got[k].1.to_bits(), s.aux.to_bits());
                }
            }
        }
    }

    #[test]
    fn extrema_match_a_sequential_scan() {
        let sequential = |v: &[f32]| {
            let (mut lo, mut hi) = (f32::MAX, -f32::MAX);
            for &x in v {
                if x < lo {
                    lo = x;
                }
                if x > hi {
                    hi = x;
                }
            }
            (lo.to_bits(), hi.to_bits())
        };
        let mut rng = Rng(11);
        for case in 0..200 {
            let n = 1 + (case * 7) % 512;
            let mut v: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.5) * 4.0).collect();
            if case % 3 == 0 {
                // Zeros of both signs as the extremum: the first one seen must win.
                v.iter_mut().for_each(|x| *x = x.abs());
                let i = rng.below(n as u64) as usize;
                v[i] = if case % 2 == 0 { -0.0 } else { 0.0 };
                let j = rng.below(n as u64) as usize;
                v[j] = if case % 2 == 0 { 0.0 } else { -0.0 };
            }
            if case % 5 == 0 {
                v[0] = f32::NAN;
            }
            let (lo, hi) = extrema(&v);
            assert_eq!((lo.to_bits(), hi.to_bits()), sequential(&v), "case {case}");
        }
    }

    #[test]
    fn float_round_trip_every_voxel() {
        let vol = test_volume(1, 300);
        let buf = build_grid(&vol, &opts(GridType::Float)).unwrap();
        let grid = Grid::parse(&buf).unwrap();
        assert_eq!(grid.grid_size() as usize, buf.len());
        assert_eq!(buf.len() % 32, 0);
        let mut acc = grid.accessor();
        let bricks: std::collections::HashSet<Coord> =
            vol.bricks.iter().map(|b| b.origin).collect();
        for b in &vol.bricks {
            for n in 0..512 {
                let ijk = [
                    b.origin[0] + (n >> 6) as i32,
                    b.origin[1] + ((n >> 3) & 7) as i32,
                    b.origin[2] + (n & 7) as i32,
                ];
                let v = value_f32(acc.value(ijk).unwrap());
                assert_eq!(v.to_bits(), b.values[n].to_bits(), "value at {ijk:?}");
                assert_eq!(acc.is_active(ijk), b.is_active(n), "state at {ijk:?}");
            }
            // Neighbouring bricks that do not exist read as inactive background.
            for d in [[8, 0, 0], [0, -8, 0], [0, 0, 4096], [-128, 0, 0]] {
                let o = [b.origin[0] + d[0], b.origin[1] + d[1], b.origin[2] + d[2]];
                if !bricks.contains(&o) {
                    assert_eq!(value_f32(grid.value(o).unwrap()), vol.background);
                    assert!(!grid.is_active(o));
                }
            }
        }
        assert_eq!(
            value_f32(grid.value([1 << 30, -(1 << 30), 7]).unwrap()),
            vol.background
        );
        assert_eq!(grid.name(), "test_float");
    }

    #[test]
    fn quantized_round_trip_matches_reference() {
        let vol = test_volume(2, 120);
        for t in [GridType::Fp4, GridType::Fp8, GridType::Fp16, GridType::FpN] {
            let o = opts(t);
            let buf = build_grid(&vol, &o).unwrap();
            let grid = Grid::parse(&buf).unwrap();
            let mut acc = grid.accessor();
            for b in &vol.bricks {
                let (bits, min, quantum, codes) = reference_quantize(&b.values, t, o.fpn_tolerance);
                for n in 0..512 {
                    let ijk = [
                        b.origin[0] + (n >> 6) as i32,
                        b.origin[1] + ((n >> 3) & 7) as i32,
                        b.origin[2] + (n & 7) as i32,
                    ];
                    let got = value_f32(acc.value(ijk).unwrap());
                    let want = codes[n] as f32 * quantum + min;
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{t} at {ijk:?} ({bits} bits)"
                    );
                    // Rounding to the nearest code: error at most half a quantum.
                    let err = (got - b.values[n]).abs();
                    assert!(
                        err <= 0.5 * quantum * 1.0001 + 1e-6 * b.values[n].abs(),
                        "{t} error {err} > q/2 = {}",
                        quantum / 2.0
                    );
                    if t == GridType::FpN && bits < 16 {
                        assert!(err <= o.fpn_tolerance, "FpN error {err} above tolerance");
                    }
                    assert_eq!(acc.is_active(ijk), b.is_active(n));
                }
            }
        }
    }

    #[test]
    fn fpn_leaf_widths_and_flags() {
        let mut vol = SparseVolume {
            background: 0.0,
            bricks: Vec::new(),
        };
        // A constant brick (1 bit), two levels (1 bit), a ramp needing 8 bits at 0.002.
        let mut b = LeafBrick::filled([0, 0, 0], 3.0);
        b.active[0] = 1;
        vol.bricks.push(b);
        let mut b = LeafBrick::filled([8, 0, 0], 0.0);
        for n in 0..512 {
            b.values[n] = if n % 2 == 0 { 0.0 } else { 1.0 };
        }
        vol.bricks.push(b);
        let mut b = LeafBrick::filled([16, 0, 0], 0.0);
        for n in 0..512 {
            b.values[n] = n as f32 / 511.0;
        }
        vol.bricks.push(b);
        let o = BuildOptions {
            grid_type: GridType::FpN,
            fpn_tolerance: 0.002,
            ..opts(GridType::FpN)
        };
        let buf = build_grid(&vol, &o).unwrap();
        let grid = Grid::parse(&buf).unwrap();
        let flags: Vec<u8> = grid.leaves().map(|l| l.flags()).collect();
        assert_eq!(flags, vec![2, 0, 3 << 5]);
        for b in &vol.bricks {
            let (bits, ..) = reference_quantize(&b.values, GridType::FpN, 0.002);
            assert!(bits <= 8);
        }
        let expect: u32 = [1u32, 1, 8].iter().map(|b| 96 + 64 * b).sum();
        let leaves_at = 736 + 64 + 32 + 270400 + 33856;
        assert_eq!(buf.len(), leaves_at + expect as usize);
    }

    /// Brute-force statistics of the active values (decoded) under a node spanning `dim`
    /// voxels from `origin`.
    fn brute(
        grid: &Grid<'_>,
        vol: &SparseVolume,
        origin: Coord,
        dim: i32,
    ) -> (usize, f32, f32, f64, f64, Coord, Coord) {
        let mut vals = Vec::new();
        let (mut lo, mut hi) = ([i32::MAX; 3], [i32::MIN; 3]);
        let mut acc = grid.accessor();
        for b in &vol.bricks {
            if (0..3).any(|a| b.origin[a] < origin[a] || b.origin[a] >= origin[a] + dim) {
                continue;
            }
            for n in 0..512 {
                if b.is_active(n) {
                    let ijk = [
                        b.origin[0] + (n >> 6) as i32,
                        b.origin[1] + ((n >> 3) & 7) as i32,
                        b.origin[2] + (n & 7) as i32,
                    ];
                    vals.push(value_f32(acc.value(ijk).unwrap()));
                    for a in 0..3 {
                        lo[a] = lo[a].min(ijk[a]);
                        hi[a] = hi[a].max(ijk[a]);
                    }
                }
            }
        }
        let n = vals.len();
        let min = vals.iter().copied().fold(f32::MAX, f32::min);
        let max = vals.iter().copied().fold(-f32::MAX, f32::max);
        let mean = vals.iter().map(|&v| v as f64).sum::<f64>() / n.max(1) as f64;
        let var = vals.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n.max(1) as f64;
        (n, min, max, mean, var.sqrt(), lo, hi)
    }

    fn close(a: f64, b: f64, scale: f64) -> bool {
        (a - b).abs() <= 1e-5 * scale.max(1.0)
    }

    #[test]
    fn statistics_equal_brute_force() {
        let vol = test_volume(3, 200);
        for t in [GridType::Float, GridType::Fp8, GridType::FpN] {
            let buf = build_grid(&vol, &opts(t)).unwrap();
            let grid = Grid::parse(&buf).unwrap();
            let l = layout::layout(t).unwrap();
            // Leaves.
            for leaf in grid.leaves() {
                let at = leaf.offset();
                let (n, min, max, mean, std, lo, hi) = brute(&grid, &vol, leaf.origin(), 8);
                let flags = leaf.flags();
                assert_eq!(flags & 2 != 0, n > 0);
                if n == 0 {
                    assert_eq!(coord_at(&buf, at), leaf.origin());
                    continue;
                }
                let dif = [buf[at + 12], buf[at + 13], buf[at + 14]];
                assert_eq!(coord_at(&buf, at), lo);
                assert_eq!([0, 1, 2].map(|a| lo[a] + dif[a] as i32), hi);
                let scale = (max.abs().max(min.abs())) as f64;
                if t == GridType::Float {
                    assert_eq!([f32_at(&buf, at + 80), f32_at(&buf, at + 84)], [min, max]);
                    assert!(close(f32_at(&buf, at + 88) as f64, mean, scale));
                    assert!(close(f32_at(&buf, at + 92) as f64, std, scale));
                } else {
                    let (m, q) = (f32_at(&buf, at + 80), f32_at(&buf, at + 84));
                    let s = |k: usize| {
                        u16::from_le_bytes([buf[at + 88 + 2 * k], buf[at + 89 + 2 * k]]) as f32
                    };
                    let tol = q as f64 * 0.5001 + 1e-6 * scale;
                    assert!(((s(0) * q + m) as f64 - min as f64).abs() <= tol);
                    assert!(((s(1) * q + m) as f64 - max as f64).abs() <= tol);
                    assert!(((s(2) * q + m) as f64 - mean).abs() <= tol);
                    assert!(((s(3) * q) as f64 - std).abs() <= tol);
                }
            }
            // Internal nodes and root.
            let tree = 672;
            let counts = [
                u32_at(&buf, tree + TREE_OFF_NODE_COUNT_LOWER as usize),
                u32_at(&buf, tree + TREE_OFF_NODE_COUNT_UPPER as usize),
            ];
            for (level, nl, dim) in [(1usize, &l.lower, 128), (2, &l.upper, 4096)] {
                let first = tree + u64_at(&buf, tree + 8 * level) as usize;
                for i in 0..counts[level - 1] as usize {
                    let at = first + i * nl.size as usize;
                    let lo_stored = coord_at(&buf, at);
                    let origin = lo_stored.map(|c| c & !(dim - 1));
                    let (n, min, max, mean, std, lo, hi) = brute(&grid, &vol, origin, dim);
                    let flags = u64_at(&buf, at + 24);
                    if n == 0 {
                        assert_eq!(flags, 1);
                        continue;
                    }
                    assert_eq!(flags, 2);
                    assert_eq!([coord_at(&buf, at), coord_at(&buf, at + 12)], [lo, hi]);
                    let scale = (max.abs().max(min.abs())) as f64;
                    assert_eq!(f32_at(&buf, at + nl.off_min as usize), min);
                    assert_eq!(f32_at(&buf, at + nl.off_max as usize), max);
                    assert!(close(
                        f32_at(&buf, at + nl.off_avg as usize) as f64,
                        mean,
                        scale
                    ));
                    assert!(close(
                        f32_at(&buf, at + nl.off_stddev as usize) as f64,
                        std,
                        scale
                    ));
                }
            }
            let (n, min, max, mean, std, lo, hi) = brute(&grid, &vol, [i32::MIN / 2; 3], i32::MAX);
            assert_eq!(grid.active_voxel_count(), n as u64);
            assert_eq!(grid.index_bbox(), [lo, hi]);
            let rs = grid.root_stats().unwrap();
            assert_eq!(rs.min, Value::Float(min));
            assert_eq!(rs.max, Value::Float(max));
            assert!(close(rs.avg, mean, 10.0) && close(rs.stddev, std, 10.0));
            let h = grid.header();
            assert_eq!(h.flags, 0b111110, "{t}");
            // World bbox: index bbox, max corner exclusive, through the map.
            let o = opts(t);
            for a in 0..3 {
                assert_eq!(h.world_bbox[0][a], lo[a] as f64 * 0.5 + o.world_origin[a]);
                assert_eq!(
                    h.world_bbox[1][a],
                    (hi[a] + 1) as f64 * 0.5 + o.world_origin[a]
                );
                assert_eq!(
                    h.voxel_size[a],
                    (0.5 + o.world_origin[a]) - o.world_origin[a]
                );
            }
            assert_eq!(h.map.mat[0], 0.5);
            assert_eq!(h.map.inv_mat[4], 2.0);
            assert_eq!(h.map.vec, o.world_origin);
        }
    }

    #[test]
    fn root_tiles_sorted_and_keyed_like_nanovdb() {
        let vol = test_volume(4, 150);
        let buf = build_grid(&vol, &opts(GridType::Float)).unwrap();
        let grid = Grid::parse(&buf).unwrap();
        let l = layout::layout(GridType::Float).unwrap();
        let root = 736;
        let count = u32_at(&buf, root + 24) as usize;
        let uppers: std::collections::BTreeSet<Coord> = vol
            .bricks
            .iter()
            .map(|b| b.origin.map(|c| c & !4095))
            .collect();
        assert_eq!(count, uppers.len());
        assert!(uppers.iter().any(|o| o.iter().any(|&c| c < 0)));
        // BTreeSet iterates [i32; 3] lexicographically with signed comparison.
        for (i, origin) in uppers.iter().enumerate() {
            let tile = root + l.root.size as usize + i * l.root.tile_size as usize;
            assert_eq!(
                u64_at(&buf, tile),
                layout::coord_to_key(*origin),
                "tile {i}"
            );
            let child = root + u64_at(&buf, tile + 8) as usize;
            assert_eq!(coord_at(&buf, child).map(|c| c & !4095), *origin);
            assert_eq!(u32_at(&buf, tile + 16), 0);
        }
        assert_eq!(grid.node_counts().upper as usize, uppers.len());
        let lowers: std::collections::HashSet<Coord> = vol
            .bricks
            .iter()
            .map(|b| b.origin.map(|c| c & !127))
            .collect();
        assert_eq!(grid.node_counts().lower as usize, lowers.len());
        assert_eq!(grid.node_counts().leaves as usize, vol.bricks.len());
        // Leaves come out in breadth-first order: sorted by (upper, lower index, leaf index).
        let order: Vec<Coord> = grid.leaves().map(|l| l.origin()).collect();
        let mut sorted = order.clone();
        sorted.sort_by_key(|o| {
            (
                o.map(|c| c >> 12),
                child_index(*o, &l.upper),
                child_index(*o, &l.lower),
            )
        });
        assert_eq!(order, sorted);
    }

    #[test]
    fn empty_volume_is_a_valid_grid() {
        for v in [NanoVdbVersion::V32_4, NanoVdbVersion::V32_9] {
            let vol = SparseVolume {
                background: -2.0,
                bricks: Vec::new(),
            };
            let o = BuildOptions {
                version: v,
                ..opts(GridType::Fp8)
            };
            let buf = build_grid(&vol, &o).unwrap();
            assert_eq!(buf.len(), 736 + 64);
            let grid = Grid::parse(&buf).unwrap();
            assert_eq!(value_f32(grid.value([0, 0, 0]).unwrap()), -2.0);
            assert_eq!(grid.active_voxel_count(), 0);
            assert_eq!(grid.header().flags & GRID_FLAG_HAS_BBOX, 0);
            assert_eq!(grid.index_bbox(), [[i32::MAX; 3], [i32::MIN; 3]]);
            assert_eq!(grid.world_bbox(), [[f64::MAX; 3], [-f64::MAX; 3]]);
            let rs = grid.root_stats().unwrap();
            assert_eq!((rs.min, rs.max), (Value::Float(-2.0), Value::Float(-2.0)));
            assert_eq!(
                checksum::verify_checksum(&buf, v.version()),
                checksum::ChecksumState::Valid
            );
            // 32.4 computes no tail for an empty root; 32.9's tail covers < 4 KiB: CRC of nothing.
            let tail = (grid.stored_checksum() >> 32) as u32;
            assert_eq!(
                tail,
                if v == NanoVdbVersion::V32_4 {
                    u32::MAX
                } else {
                    0
                }
            );
        }
    }

    #[test]
    fn bricks_without_active_voxels() {
        // A lone brick with no active voxel: nodes above it get NanoVDB's empty bbox, the
        // "no active values" node flag, and the grid no HasBBox flag.
        let mut b = LeafBrick::filled([-4096, 8, 16], 0.0);
        b.values
            .iter_mut()
            .enumerate()
            .for_each(|(n, v)| *v = n as f32);
        let vol = SparseVolume {
            background: 5.0,
            bricks: vec![b],
        };
        for t in [GridType::Float, GridType::Fp8, GridType::FpN] {
            let buf = build_grid(&vol, &opts(t)).unwrap();
            let grid = Grid::parse(&buf).unwrap();
            assert_eq!(grid.active_voxel_count(), 0);
            assert_eq!(grid.header().flags & GRID_FLAG_HAS_BBOX, 0);
            assert_eq!(grid.index_bbox(), [[i32::MAX; 3], [i32::MIN; 3]]);
            assert_eq!(value_f32(grid.value([-4096, 8, 16]).unwrap()), 0.0);
            assert_eq!(
                value_f32(grid.value([-4096 + 7, 8 + 7, 16 + 7]).unwrap()).round(),
                511.0
            );
            assert_eq!(value_f32(grid.value([0, 0, 0]).unwrap()), 5.0);
            let rs = grid.root_stats().unwrap();
            assert_eq!(
                (rs.min, rs.max),
                (Value::Float(f32::MAX), Value::Float(-f32::MAX))
            );
            let l = layout::layout(t).unwrap();
            let upper = 736 + l.root.size as usize + l.root.tile_size as usize;
            let lower = upper + l.upper.size as usize;
            assert_eq!(u64_at(&buf, upper + 24), 1);
            assert_eq!(u64_at(&buf, lower + 24), 1);
            assert_eq!(
                checksum::verify_checksum(&buf, Version::new(32, 4, 2)),
                checksum::ChecksumState::Valid
            );
        }
    }

    #[test]
    fn checksums_verify_and_detect_flips() {
        let vol = test_volume(5, 60);
        for (t, v) in [
            (GridType::Float, NanoVdbVersion::V32_4),
            (GridType::FpN, NanoVdbVersion::V32_4),
            (GridType::Fp16, NanoVdbVersion::V32_9),
        ] {
            let o = BuildOptions {
                version: v,
                ..opts(t)
            };
            let mut buf = build_grid(&vol, &o).unwrap();
            assert_eq!(
                &buf[0..8],
                if v == NanoVdbVersion::V32_4 {
                    b"NanoVDB0"
                } else {
                    b"NanoVDB1"
                }
            );
            assert_eq!(
                checksum::verify_checksum(&buf, v.version()),
                checksum::ChecksumState::Valid
            );
            assert_eq!(checksum::compute_checksum(&buf).unwrap(), u64_at(&buf, 8));
            let last = buf.len() - 1;
            if t == GridType::FpN && v == NanoVdbVersion::V32_4 {
                // 32.3–32.5 CRC only `sizeof` an FpN leaf, its 96-byte header: codes are not
                // covered, and NanoVDB 32.4 would not notice this flip either.
                buf[last] ^= 0x10;
                assert_eq!(
                    checksum::verify_checksum(&buf, v.version()),
                    checksum::ChecksumState::Valid
                );
                buf[last] ^= 0x10;
            }
            // Inside the last leaf's value mask.
            let leaf_header = Grid::parse(&buf).unwrap().leaves().last().unwrap().offset() + 40;
            for at in [20usize, 700, 900, leaf_header, buf.len() / 2] {
                buf[at] ^= 0x10;
                assert!(
                    matches!(
                        checksum::verify_checksum(&buf, v.version()),
                        checksum::ChecksumState::Mismatch { .. }
                    ),
                    "{t} flip at {at} went unnoticed"
                );
                buf[at] ^= 0x10;
            }
            assert_eq!(
                checksum::verify_checksum(&buf, v.version()),
                checksum::ChecksumState::Valid
            );
        }
        let o = BuildOptions {
            checksum: ChecksumMode::Disabled,
            ..opts(GridType::Float)
        };
        let buf = build_grid(&vol, &o).unwrap();
        assert_eq!(
            checksum::verify_checksum(&buf, Version::new(32, 4, 2)),
            checksum::ChecksumState::Absent
        );
        let o = BuildOptions {
            checksum: ChecksumMode::Head,
            ..opts(GridType::Float)
        };
        let mut buf = build_grid(&vol, &o).unwrap();
        assert_eq!(u64_at(&buf, 8) >> 32, u32::MAX as u64);
        let last = buf.len() - 1;
        buf[last] ^= 1; // outside the head: a head-only checksum does not see it
        assert_eq!(
            checksum::verify_checksum(&buf, Version::new(32, 4, 2)),
            checksum::ChecksumState::Valid
        );
    }

    #[test]
    fn rejects_bad_input() {
        let mut vol = test_volume(6, 10);
        let o = opts(GridType::Fp8);
        let dup = vol.bricks[4].clone();
        vol.bricks.push(dup);
        assert!(matches!(
            build_grid(&vol, &o),
            Err(FormatError::Corrupt { offset: 10, .. })
        ));
        vol.bricks.pop();
        vol.bricks[2].origin[1] += 4;
        assert!(matches!(
            build_grid(&vol, &o),
            Err(FormatError::Corrupt { offset: 2, .. })
        ));
        vol.bricks[2].origin[1] -= 4;
        vol.bricks[7].values[100] = f32::NAN;
        assert!(matches!(
            build_grid(&vol, &o),
            Err(FormatError::Corrupt { offset: 7, .. })
        ));
        // NaN is stored as is in Float grids, as NanoVDB does.
        assert!(build_grid(&vol, &opts(GridType::Float)).is_ok());
        vol.bricks[7].values[100] = 0.0;
        let bad = BuildOptions {
            grid_class: GridClass::VoxelVolume,
            ..o.clone()
        };
        assert!(build_grid(&vol, &bad).is_err());
        let bad = BuildOptions {
            grid_type: GridType::Double,
            ..o.clone()
        };
        assert!(matches!(
            build_grid(&vol, &bad),
            Err(FormatError::Unsupported { .. })
        ));
        let bad = BuildOptions {
            voxel_size: 0.0,
            ..o.clone()
        };
        assert!(build_grid(&vol, &bad).is_err());
        let bad = BuildOptions {
            name: "x".repeat(256),
            ..o.clone()
        };
        assert!(build_grid(&vol, &bad).is_err());
        assert!(build_grid(&vol, &o).is_ok());
    }
}
