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

mod encoded;
mod leaves;
mod plan;
mod stats;
#[cfg(test)]
mod tests;
mod write;

pub use encoded::{EncodedBlock, EncodedLeaves, LeafEncoder};
use leaves::*;
use plan::*;
use stats::*;
use write::*;

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
    /// Edge lengths of a voxel along x, y and z in world units (each > 0): NanoVDB's map is
    /// a per-axis scale and a translation, so anisotropic voxels (model levels thicker than
    /// the columns are wide) are stored as they are.
    pub voxel_size: [f64; 3],
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
            voxel_size: [1.0; 3],
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
    build_into(Source::Bricks(volume), opts, out)
}

/// [`build_grid_into`] from leaves encoded beforehand ([`EncodedLeaves`]): the same bytes as
/// building the volume of the same leaves, with each leaf's bytes and statistics copied
/// into place instead of computed here. `opts.grid_type` must be the leaves' grid type.
pub fn build_grid_encoded_into(
    leaves: &EncodedLeaves,
    opts: &BuildOptions,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    if leaves.grid_type() != opts.grid_type {
        return Err(invalid(
            "encoded leaves",
            0,
            format!(
                "leaves encoded as {} cannot make a {} grid",
                leaves.grid_type(),
                opts.grid_type
            ),
        ));
    }
    let index = leaves.index();
    build_into(Source::Encoded(leaves, &index), opts, out)
}

/// [`build_grid_encoded_into`] of only the leaves whose origin `keep` accepts: one spatial
/// brick of the grid (a box and its halo), whose every leaf is byte for byte the leaf the
/// whole grid holds there, so values read from it equal the whole grid's wherever it has
/// leaves. Returns how many leaves it kept.
pub fn build_grid_encoded_where_into(
    leaves: &EncodedLeaves,
    opts: &BuildOptions,
    keep: impl Fn(Coord) -> bool,
    out: &mut Vec<u8>,
) -> Result<usize, FormatError> {
    if leaves.grid_type() != opts.grid_type {
        return Err(invalid(
            "encoded leaves",
            0,
            format!(
                "leaves encoded as {} cannot make a {} grid",
                leaves.grid_type(),
                opts.grid_type
            ),
        ));
    }
    let mut index = leaves.index();
    index.retain(|&at| keep(leaves.leaf(at).origin));
    build_into(Source::Encoded(leaves, &index), opts, out)?;
    Ok(index.len())
}

/// A grid this process built, with the checksum the builder computed from its bytes (or
/// none, as its options said). The type gives no way to change the bytes, so the checksum
/// stays right and a consumer may store the grid without recomputing it; grids from files
/// or other hands come as plain bytes and get checked.
#[derive(Clone, Debug, Default)]
pub struct BuiltGrid {
    bytes: Vec<u8>,
}

impl BuiltGrid {
    /// [`build_grid_into`] of `volume` into `buffer` (its allocation reused).
    pub fn of_volume(
        volume: &SparseVolume,
        opts: &BuildOptions,
        mut buffer: Vec<u8>,
    ) -> Result<BuiltGrid, FormatError> {
        build_grid_into(volume, opts, &mut buffer)?;
        Ok(BuiltGrid { bytes: buffer })
    }

    /// [`build_grid_encoded_where_into`] of `leaves` into `buffer` (its allocation
    /// reused): the grid of the leaves whose origin `keep` accepts.
    pub fn of_leaves_where(
        leaves: &EncodedLeaves,
        opts: &BuildOptions,
        keep: impl Fn(Coord) -> bool,
        mut buffer: Vec<u8>,
    ) -> Result<BuiltGrid, FormatError> {
        build_grid_encoded_where_into(leaves, opts, keep, &mut buffer)?;
        Ok(BuiltGrid { bytes: buffer })
    }

    /// [`build_grid_encoded_into`] of `leaves` into `buffer` (its allocation reused).
    pub fn of_leaves(
        leaves: &EncodedLeaves,
        opts: &BuildOptions,
        mut buffer: Vec<u8>,
    ) -> Result<BuiltGrid, FormatError> {
        build_grid_encoded_into(leaves, opts, &mut buffer)?;
        Ok(BuiltGrid { bytes: buffer })
    }

    /// The grid's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The buffer, for building another grid into.
    pub fn into_buffer(self) -> Vec<u8> {
        self.bytes
    }
}

impl AsRef<[u8]> for BuiltGrid {
    fn as_ref(&self) -> &[u8] {
        &self.bytes
    }
}

/// Where the leaves come from: a volume's bricks (encoded here) or leaves encoded before.
#[derive(Clone, Copy)]
enum Source<'a> {
    Bricks(&'a SparseVolume),
    /// The leaves and their (block, leaf) positions in one flat order.
    Encoded(&'a EncodedLeaves, &'a [(u32, u32)]),
}

impl Source<'_> {
    fn len(self) -> usize {
        match self {
            Source::Bricks(v) => v.bricks.len(),
            Source::Encoded(_, index) => index.len(),
        }
    }

    fn origin(self, i: usize) -> Coord {
        match self {
            Source::Bricks(v) => v.bricks[i].origin,
            Source::Encoded(l, index) => l.leaf(index[i]).origin,
        }
    }

    fn background(self) -> f32 {
        match self {
            Source::Bricks(v) => v.background,
            Source::Encoded(l, _) => l.background(),
        }
    }
}

fn build_into(
    source: Source<'_>,
    opts: &BuildOptions,
    out: &mut Vec<u8>,
) -> Result<(), FormatError> {
    let codec = LeafCodec::of(opts.grid_type)?;
    let tl = layout::layout(opts.grid_type).ok_or(FormatError::Unsupported {
        grid_type: opts.grid_type,
        detail: "the writer has no layout for this grid type",
    })?;
    check_options(opts)?;
    let plan = Plan::of_origins(source.len(), |i| source.origin(i))?;
    let background = source.background();

    // FpN: choose every leaf's bit width first, since it decides where later leaves start.
    let quant = choose_quants(codec, source, &plan.order, opts, background)?;

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
    write_leaves(
        codec,
        source,
        &plan.order,
        &quant,
        &leaf_offsets,
        tl.leaf.size as usize,
        leaves_buf,
        &mut leaf_stats,
    )?;

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
                let origin = source.origin(plan.order[c] as usize);
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

/// FpN: every leaf's bit width, in tree order (copied from encoded leaves, else chosen to
/// meet the tolerance); empty for fixed-size codecs.
fn choose_quants(
    codec: LeafCodec,
    source: Source<'_>,
    order: &[u32],
    opts: &BuildOptions,
    background: f32,
) -> Result<Vec<Quant>, FormatError> {
    Ok(match (codec, source) {
        (LeafCodec::Variable, Source::Encoded(l, index)) => order
            .iter()
            .map(|&b| Quant {
                min: 0.0,
                max: 0.0,
                log2_bits: l.leaf(index[b as usize]).log2_bits,
            })
            .collect(),
        (LeafCodec::Variable, Source::Bricks(volume)) => {
            let tol = fpn_tolerance(opts, background);
            order
                .par_iter()
                .with_min_len(64)
                .enumerate()
                .map(|(i, &b)| choose_fpn(LeafView::of(&volume.bricks[b as usize]), tol, b, i))
                .collect::<Result<_, _>>()?
        }
        _ => Vec::new(),
    })
}

/// Writes every leaf into `leaves_buf` at `leaf_offsets` (tree order) and its statistics
/// into `stats_out`: encoded leaves are copied, bricks encoded in parallel groups.
#[allow(clippy::too_many_arguments)]
fn write_leaves(
    codec: LeafCodec,
    source: Source<'_>,
    order: &[u32],
    quant: &[Quant],
    leaf_offsets: &[usize],
    size: usize,
    leaves_buf: &mut [u8],
    stats_out: &mut [NodeStats],
) -> Result<(), FormatError> {
    const GROUP: usize = LANES;
    match (codec, source) {
        (_, Source::Encoded(l, index)) => {
            // Each leaf's bytes are final: copy them to where the tree puts them.
            let mut slices = split_at_offsets(leaves_buf, leaf_offsets);
            slices
                .par_iter_mut()
                .zip(stats_out.par_iter_mut())
                .zip(order.par_iter())
                .with_min_len(256)
                .for_each(|((dst, st), &b)| {
                    let (bytes, stats) = l.leaf_bytes(index[b as usize]);
                    dst.copy_from_slice(bytes);
                    *st = stats;
                });
        }
        (LeafCodec::Variable, Source::Bricks(volume)) => {
            let mut slices = split_at_offsets(leaves_buf, leaf_offsets);
            slices
                .par_chunks_mut(GROUP)
                .zip(stats_out.par_chunks_mut(GROUP))
                .zip(order.par_chunks(GROUP).zip(quant.par_chunks(GROUP)))
                .enumerate()
                .with_min_len(4)
                .try_for_each(|(g, ((dsts, stats), (bricks, quants)))| {
                    let jobs = dsts.iter_mut().zip(bricks).zip(quants).enumerate().map(
                        |(k, ((dst, &b), q))| {
                            (
                                &mut **dst,
                                LeafView::of(&volume.bricks[b as usize]),
                                Some(*q),
                                (b, g * GROUP + k),
                            )
                        },
                    );
                    write_leaf_group(codec, jobs, stats)
                })?;
        }
        (_, Source::Bricks(volume)) => {
            leaves_buf
                .par_chunks_mut(GROUP * size)
                .zip(stats_out.par_chunks_mut(GROUP))
                .zip(order.par_chunks(GROUP))
                .enumerate()
                .with_min_len(4)
                .try_for_each(|(g, ((dst, stats), bricks))| {
                    let jobs =
                        dst.chunks_mut(size)
                            .zip(bricks)
                            .enumerate()
                            .map(|(k, (dst, &b))| {
                                (
                                    dst,
                                    LeafView::of(&volume.bricks[b as usize]),
                                    None,
                                    (b, g * GROUP + k),
                                )
                            });
                    write_leaf_group(codec, jobs, stats)
                })?;
        }
    }
    Ok(())
}

/// `buf` cut into the pieces between consecutive `offsets` (relative to the first).
fn split_at_offsets<'a>(mut buf: &'a mut [u8], offsets: &[usize]) -> Vec<&'a mut [u8]> {
    let mut pieces = Vec::with_capacity(offsets.len().saturating_sub(1));
    for w in offsets.windows(2) {
        let (piece, tail) = std::mem::take(&mut buf).split_at_mut(w[1] - w[0]);
        pieces.push(piece);
        buf = tail;
    }
    pieces
}

fn invalid(what: impl Into<String>, offset: u64, detail: impl Into<String>) -> FormatError {
    FormatError::Corrupt {
        what: what.into(),
        offset,
        detail: detail.into(),
    }
}

fn check_options(opts: &BuildOptions) -> Result<(), FormatError> {
    if !opts.voxel_size.iter().all(|s| s.is_finite() && *s > 0.0) {
        return Err(invalid(
            "build options",
            0,
            format!(
                "voxel size {:?} is not three positive numbers",
                opts.voxel_size
            ),
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
