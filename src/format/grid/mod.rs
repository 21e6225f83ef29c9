//! A validated, read-only view of one NanoVDB grid buffer and a CPU value accessor.
//!
//! [`Grid::parse`] checks untrusted bytes once: header fields, the tree header, every root
//! tile, every internal-node child reference and every leaf. After that, every read made
//! through [`Grid`], [`ReadAccessor`] and [`LeafView`] lies inside the buffer; the byte
//! helpers below still fall back to zeros instead of panicking, as a second line of defence.

use super::error::FormatError;
use super::layout::{self as l, TreeLayout};
use super::sparse::{LEAF_VOXELS, LeafBrick};
use super::types::{Coord, GridClass, GridType, Version};

mod accessor;
mod bytes;
#[cfg(test)]
mod corpus;
mod header;
mod leaves;
#[cfg(test)]
pub(crate) mod tests;
mod validate;

pub use accessor::ReadAccessor;
use accessor::{NoCache, masked};
pub use bytes::half_to_f32;
use bytes::*;
use header::{GridHead, check_header, grid_head};
pub use leaves::{LeafView, Leaves};
use validate::*;

// ------------------------------------------------------------------------------------------
// Public data types
// ------------------------------------------------------------------------------------------

/// A value read from a grid, in the grid's own precision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Value {
    /// Float, Half (widened exactly) and the quantized Fp4/Fp8/Fp16/FpN types.
    Float(f32),
    /// Double.
    Double(f64),
    /// Int16, Int32, Int64, UInt32 and UInt8, widened.
    Int(i64),
    /// Mask (the active state) and Boolean grids.
    Bool(bool),
    /// Vec3f.
    Vec3f([f32; 3]),
    /// Vec3d.
    Vec3d([f64; 3]),
    /// Vec4f.
    Vec4f([f32; 4]),
    /// Vec4d.
    Vec4d([f64; 4]),
    /// Rgba8, bytes in memory order (r, g, b, a).
    Rgba8([u8; 4]),
    /// Vec3u8.
    Vec3u8([u8; 3]),
    /// Vec3u16.
    Vec3u16([u16; 3]),
}

impl Value {
    /// The value as f32 if it is a scalar (integers and doubles are converted with `as`).
    pub fn as_f32(&self) -> Option<f32> {
        match *self {
            Value::Float(v) => Some(v),
            Value::Double(v) => Some(v as f32),
            Value::Int(v) => Some(v as f32),
            _ => None,
        }
    }
    /// The value as f64 if it is a scalar.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Float(v) => Some(f64::from(v)),
            Value::Double(v) => Some(v),
            Value::Int(v) => Some(v as f64),
            _ => None,
        }
    }
}

/// Which magic number a grid carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GridMagic {
    /// "NanoVDB0": written by 32.3–32.6 (and later versions built with old magic numbers).
    Legacy,
    /// "NanoVDB1": written by 32.7 and later.
    Grid,
}

/// NanoVDB's affine `Map` between index and world space (double-precision part, plus the
/// single-precision copy). Matrices are row-major: `world = mat · ijk + vec`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Map {
    /// Index → world 3×3 matrix, row-major.
    pub mat: [f64; 9],
    /// World → index 3×3 matrix, row-major.
    pub inv_mat: [f64; 9],
    /// Translation (world position of index origin).
    pub vec: [f64; 3],
    /// Taper (unused by NanoVDB, 1.0).
    pub taper: f64,
    /// Single-precision index → world matrix.
    pub mat_f: [f32; 9],
    /// Single-precision world → index matrix.
    pub inv_mat_f: [f32; 9],
    /// Single-precision translation.
    pub vec_f: [f32; 3],
}

impl Map {
    /// Index → world, with the same fused multiply-adds as NanoVDB's `Map::applyMap`.
    pub fn apply(&self, ijk: [f64; 3]) -> [f64; 3] {
        let m = &self.mat;
        std::array::from_fn(|r| {
            ijk[0].mul_add(
                m[3 * r],
                ijk[1].mul_add(m[3 * r + 1], ijk[2].mul_add(m[3 * r + 2], self.vec[r])),
            )
        })
    }
    /// World → index, as NanoVDB's `Map::applyInverseMap`.
    pub fn apply_inverse(&self, xyz: [f64; 3]) -> [f64; 3] {
        let d = [
            xyz[0] - self.vec[0],
            xyz[1] - self.vec[1],
            xyz[2] - self.vec[2],
        ];
        let m = &self.inv_mat;
        std::array::from_fn(|r| {
            d[0].mul_add(m[3 * r], d[1].mul_add(m[3 * r + 1], d[2] * m[3 * r + 2]))
        })
    }
}

/// Node counts of a tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct NodeCounts {
    /// 8³ leaves.
    pub leaves: u32,
    /// 16³ lower internal nodes.
    pub lower: u32,
    /// 32³ upper internal nodes.
    pub upper: u32,
}

/// Active tile counts per level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct TileCounts {
    /// Active tiles in lower nodes (each 8³ voxels).
    pub lower: u32,
    /// Active tiles in upper nodes (each 128³ voxels).
    pub upper: u32,
    /// Active tiles in the root (each 4096³ voxels).
    pub root: u32,
}

/// Statistics of the active values stored in the root.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RootStats {
    /// Minimum active value.
    pub min: Value,
    /// Maximum active value.
    pub max: Value,
    /// Average (of the values, or of vector lengths for vector grids).
    pub avg: f64,
    /// Standard deviation.
    pub stddev: f64,
}

/// The parsed grid header (`GridData` plus what the tree and root say about the whole grid).
#[derive(Clone, Debug, PartialEq)]
pub struct GridHeader {
    /// Which magic number the grid carries.
    pub magic: GridMagic,
    /// The checksum as stored (all ones: none was computed).
    pub checksum: u64,
    /// Version of NanoVDB that wrote the grid.
    pub version: Version,
    /// Grid flags (`layout::GRID_FLAG_*`).
    pub flags: u32,
    /// Index of this grid in its buffer.
    pub grid_index: u32,
    /// Number of grids in the buffer.
    pub grid_count: u32,
    /// Bytes of this grid including blind data.
    pub grid_size: u64,
    /// The grid name (from blind data when longer than 255 bytes); may be empty.
    pub name: String,
    /// Index ↔ world transform.
    pub map: Map,
    /// World-space bounding box of the active values: [min, max].
    pub world_bbox: [[f64; 3]; 2],
    /// Voxel size in world units.
    pub voxel_size: [f64; 3],
    /// Grid class (Unknown if the stored value is not one NanoVDB 32.9 defines).
    pub grid_class: GridClass,
    /// The stored class number.
    pub grid_class_raw: u32,
    /// Value type.
    pub grid_type: GridType,
    /// Offset of blind metadata from the grid start.
    pub blind_metadata_offset: i64,
    /// Number of blind data entries.
    pub blind_metadata_count: u32,
    /// `mData1` (value count of index grids).
    pub data1: u64,
    /// Index-space bounding box of the active values (inclusive): [min, max].
    pub index_bbox: [Coord; 2],
    /// Active voxels, including the voxels covered by active tiles.
    pub active_voxel_count: u64,
    /// Nodes per level.
    pub node_counts: NodeCounts,
    /// Active tiles per level.
    pub tile_counts: TileCounts,
}

// ------------------------------------------------------------------------------------------
// Grid
// ------------------------------------------------------------------------------------------

/// A validated NanoVDB grid borrowed from a byte buffer.
#[derive(Clone, Debug)]
pub struct Grid<'a> {
    /// Exactly `grid_size` bytes.
    data: &'a [u8],
    /// Offset of `data` in the buffer handed to `parse`/`parse_all` (for messages).
    base: u64,
    header: GridHeader,
    layout: TreeLayout,
    root: usize,
    tile_count: u32,
    leaf_first: usize,
    /// Leaf offsets, for variable-size (FpN) leaves only.
    fpn_leaves: Vec<usize>,
}

/// Where a coordinate's value lives.
impl<'a> Grid<'a> {
    /// The cheap structural checks of the grid at the start of `bytes`, for a frame that has
    /// just arrived and is about to be rendered: magic, version, grid size against the
    /// buffer, grid index and count, a grid type the renderer can draw, and the tree's
    /// offsets and node arrays inside the grid (with the root and its tile table). Reads a
    /// few hundred bytes whatever the grid's size: no node is visited, so it does not replace
    /// [`Grid::parse`] or the checksum.
    ///
    /// `bytes` is the start of the grid's `len` bytes (all of them, or a prefix: 4 KiB hold
    /// every header checked); returns the grid size, at most `len`.
    pub fn check_header(bytes: &[u8], len: u64) -> Result<u64, FormatError> {
        check_header(bytes, len)
    }

    /// Bytes of a grid that [`Grid::check_header`] needs to see.
    pub const HEADER_PREFIX: usize = 4096;

    /// Validates the first grid in `bytes` (trailing bytes are ignored) and returns a view.
    pub fn parse(bytes: &'a [u8]) -> Result<Grid<'a>, FormatError> {
        parse_at(bytes, 0)
    }

    /// Validates every grid of a multi-grid buffer: grids follow each other back to back, the
    /// first one's `grid_count` says how many, and grid `i` must say it is number `i`.
    pub fn parse_all(bytes: &'a [u8]) -> Result<Vec<Grid<'a>>, FormatError> {
        let first = parse_at(bytes, 0)?;
        let count = first.header.grid_count;
        if count == 0 {
            return Err(FormatError::Corrupt {
                what: "grid 0".into(),
                offset: 0,
                detail: "grid count is 0".into(),
            });
        }
        let mut offset = first.header.grid_size;
        let mut grids = Vec::with_capacity(count.min(1024) as usize);
        check_index(&first, 0, count)?;
        grids.push(first);
        for i in 1..count {
            let g = parse_at(bytes, offset)?;
            check_index(&g, i, count)?;
            offset += g.header.grid_size;
            grids.push(g);
        }
        Ok(grids)
    }

    /// The grid's bytes (exactly `grid_size` of them), as they go to the GPU.
    pub fn as_bytes(&self) -> &'a [u8] {
        self.data
    }
    /// The parsed header.
    pub fn header(&self) -> &GridHeader {
        &self.header
    }
    /// The node layout of this grid's type.
    pub fn layout(&self) -> &TreeLayout {
        &self.layout
    }
    /// The grid name (may be empty).
    pub fn name(&self) -> &str {
        &self.header.name
    }
    /// The value type.
    pub fn grid_type(&self) -> GridType {
        self.header.grid_type
    }
    /// The grid class.
    pub fn grid_class(&self) -> GridClass {
        self.header.grid_class
    }
    /// The NanoVDB version that wrote the grid.
    pub fn version(&self) -> Version {
        self.header.version
    }
    /// Bytes of this grid.
    pub fn grid_size(&self) -> u64 {
        self.header.grid_size
    }
    /// Index-space bbox of the active values (inclusive).
    pub fn index_bbox(&self) -> [Coord; 2] {
        self.header.index_bbox
    }
    /// World-space bbox of the active values.
    pub fn world_bbox(&self) -> [[f64; 3]; 2] {
        self.header.world_bbox
    }
    /// Voxel size in world units.
    pub fn voxel_size(&self) -> [f64; 3] {
        self.header.voxel_size
    }
    /// The index ↔ world map.
    pub fn map(&self) -> &Map {
        &self.header.map
    }
    /// Number of active voxels, including those of active tiles (NanoVDB's `mVoxelCount`).
    pub fn active_voxel_count(&self) -> u64 {
        self.header.active_voxel_count
    }
    /// Nodes per level.
    pub fn node_counts(&self) -> NodeCounts {
        self.header.node_counts
    }
    /// Active tiles per level.
    pub fn tile_counts(&self) -> TileCounts {
        self.header.tile_counts
    }
    /// The checksum as stored in the header: CRC-32 of the head in the low 32 bits, of the
    /// tail in the high 32 bits; all ones means none (see `checksum.rs` for the schemes).
    pub fn stored_checksum(&self) -> u64 {
        self.header.checksum
    }
    /// Checks the stored checksum against the bytes with the scheme(s) of the grid's version
    /// ([`super::checksum::verify_checksum`]). Costs a pass over the whole grid.
    pub fn verify_checksum(&self) -> super::checksum::ChecksumState {
        super::checksum::verify_checksum(self.data, self.header.version)
    }
    /// Number of root tiles (value tiles and child tiles).
    pub fn root_tile_count(&self) -> u32 {
        self.tile_count
    }

    /// The background value: what `value` returns outside every root tile.
    pub fn background(&self) -> Result<Value, FormatError> {
        self.tile_value(self.root + self.layout.root.off_background as usize)
    }

    /// Min, max, average and standard deviation stored in the root, where the type has them
    /// (not for Mask, Boolean and index grids). Whether they were computed is told by the
    /// `HAS_MIN_MAX`/`HAS_AVERAGE`/`HAS_STD_DEVIATION` header flags.
    pub fn root_stats(&self) -> Option<RootStats> {
        use GridType::*;
        if matches!(
            self.header.grid_type,
            Mask | Boolean | Index | OnIndex | IndexMask | OnIndexMask | PointIndex | Unknown
        ) {
            return None;
        }
        let r = &self.layout.root;
        let min = self.tile_value(self.root + r.off_min as usize).ok()?;
        let max = self.tile_value(self.root + r.off_max as usize).ok()?;
        let stat = |off: u32| -> f64 {
            let off = self.root + off as usize;
            match self.layout.stats_size {
                8 => f64_at(self.data, off),
                _ => f64::from(f32_at(self.data, off)),
            }
        };
        Some(RootStats {
            min,
            max,
            avg: stat(r.off_avg),
            stddev: stat(r.off_stddev),
        })
    }

    /// The value at `ijk`, exactly as NanoVDB's `ReadAccessor::getValue` returns it.
    /// Errors only for value types this reader does not decode ([`FormatError::Unsupported`]).
    pub fn value(&self, ijk: Coord) -> Result<Value, FormatError> {
        self.check_supported()?;
        let loc = self.locate_from_root(ijk, &mut NoCache);
        self.value_at(loc)
    }

    /// Whether `ijk` is active (an active voxel or inside an active tile).
    pub fn is_active(&self, ijk: Coord) -> bool {
        let loc = self.locate_from_root(ijk, &mut NoCache);
        self.active_at(loc)
    }

    /// A cached accessor for many nearby lookups.
    pub fn accessor(&self) -> ReadAccessor<'_, 'a> {
        ReadAccessor {
            grid: self,
            leaf: None,
            lower: None,
            upper: None,
        }
    }

    /// Iterates the leaves in storage order (NanoVDB's breadth-first order).
    pub fn leaves(&self) -> Leaves<'_, 'a> {
        Leaves {
            grid: self,
            next: 0,
        }
    }
}

fn check_index(g: &Grid<'_>, i: u32, count: u32) -> Result<(), FormatError> {
    if g.header.grid_index != i || g.header.grid_count != count {
        return Err(FormatError::Corrupt {
            what: format!("grid {i}"),
            offset: g.base,
            detail: format!(
                "header says grid {} of {}, expected grid {i} of {count}",
                g.header.grid_index, g.header.grid_count
            ),
        });
    }
    Ok(())
}

fn parse_at(buf: &[u8], base: u64) -> Result<Grid<'_>, FormatError> {
    let avail = usize::try_from(base)
        .ok()
        .and_then(|b| buf.get(b..))
        .ok_or(FormatError::Truncated {
            what: "grid header".into(),
            offset: base,
            need: u64::from(l::GRID_SIZE),
            len: buf.len() as u64,
            within: "buffer",
        })?;
    let trunc = |what: &str, need: u64| FormatError::Truncated {
        what: what.into(),
        offset: base,
        need,
        len: avail.len() as u64,
        within: "buffer",
    };
    if (avail.len() as u64) < u64::from(l::GRID_SIZE) {
        return Err(trunc("grid header", u64::from(l::GRID_SIZE)));
    }
    let GridHead {
        magic,
        version,
        grid_size,
        grid_type,
        layout,
        grid_index,
        grid_count,
    } = grid_head(avail, avail.len() as u64, base)?;
    let g = &avail[..grid_size as usize];
    let cx = Ctx { base, g };
    let class_raw = u32_at(g, l::GRID_OFF_GRID_CLASS as usize);
    let grid_class = GridClass::from_u32(class_raw).unwrap_or(GridClass::Unknown);
    let flags = u32_at(g, l::GRID_OFF_FLAGS as usize);

    // Tree header.
    let tree = l::GRID_SIZE as usize;
    let toff = |i: u32| u64_at(g, tree + (l::TREE_OFF_NODE_OFFSET_LEAF + 8 * i) as usize);
    let tcnt = |off: u32| u32_at(g, tree + off as usize);
    let node_counts = NodeCounts {
        leaves: tcnt(l::TREE_OFF_NODE_COUNT_LEAF),
        lower: tcnt(l::TREE_OFF_NODE_COUNT_LOWER),
        upper: tcnt(l::TREE_OFF_NODE_COUNT_UPPER),
    };
    let tile_counts = TileCounts {
        lower: tcnt(l::TREE_OFF_TILE_COUNT_LOWER),
        upper: tcnt(l::TREE_OFF_TILE_COUNT_UPPER),
        root: tcnt(l::TREE_OFF_TILE_COUNT_ROOT),
    };
    let active_voxel_count = u64_at(g, tree + l::TREE_OFF_VOXEL_COUNT as usize);

    // Root and its tiles.
    let root_rel = toff(3);
    let root = usize::try_from(root_rel)
        .ok()
        .and_then(|r| r.checked_add(tree))
        .filter(|&r| r < g.len())
        .ok_or_else(|| {
            cx.corrupt(
                "tree",
                tree,
                format!(
                    "root offset {root_rel} points outside the {}-byte grid",
                    g.len()
                ),
            )
        })?;
    if root < tree + l::TREE_SIZE as usize || root % l::DATA_ALIGNMENT as usize != 0 {
        return Err(cx.corrupt(
            "tree",
            tree,
            format!("root offset {root_rel} overlaps the headers or is not 32-byte aligned"),
        ));
    }
    let rl = layout.root;
    cx.span(&|| "root".into(), root, u64::from(rl.size))?;
    let tile_count = u32_at(g, root + l::ROOT_OFF_TABLE_SIZE as usize);
    let tiles_len = u64::from(tile_count) * u64::from(rl.tile_size);
    cx.span(
        &|| format!("root table of {tile_count} tiles"),
        root + rl.size as usize,
        tiles_len,
    )?;
    let root_end = root + rl.size as usize + tiles_len as usize;

    // Node arrays: each level is contiguous, starting at the tree's offset for it.
    let lf = layout.leaf;
    let level =
        |name: &'static str, idx: u32, count: u32, size: u32| -> Result<Level, FormatError> {
            let count = count as usize;
            let mut lv = Level {
                name,
                first: 0,
                count,
                size: size as usize,
                offsets: None,
                end: 0,
            };
            if count == 0 {
                return Ok(lv);
            }
            let rel = toff(idx);
            lv.first = usize::try_from(rel)
                .ok()
                .and_then(|r| r.checked_add(tree))
                .filter(|&f| f < g.len() && f % l::DATA_ALIGNMENT as usize == 0)
                .ok_or_else(|| {
                    cx.corrupt(
                    "tree",
                    tree,
                    format!(
                        "offset {rel} of the first {name} points outside the {}-byte grid or is \
                         not 32-byte aligned",
                        g.len()
                    ),
                )
                })?;
            let total = (count as u64).saturating_mul(u64::from(size));
            cx.span(&|| format!("array of {count} {name}s"), lv.first, total)?;
            lv.end = lv.first + total as usize;
            Ok(lv)
        };
    let upper = level("upper node", 2, node_counts.upper, layout.upper.size)?;
    let lower = level("lower node", 1, node_counts.lower, layout.lower.size)?;
    let leaves = if lf.fixed_size() {
        level("leaf", 0, node_counts.leaves, lf.size)?
    } else {
        // FpN: the smallest leaf (1-bit codes) has 160 bytes, which bounds the walk and the
        // allocation before any leaf is read.
        let mut lv = level("leaf", 0, node_counts.leaves, l::LEAF_FPN_BASE_SIZE + 64)?;
        let mut offsets = Vec::with_capacity(lv.count);
        let mut off = lv.first;
        for i in 0..lv.count {
            cx.span(
                &|| format!("leaf {i}"),
                off,
                u64::from(l::LEAF_FPN_BASE_SIZE),
            )?;
            let flags = u8_at(g, off + l::LEAF_OFF_FLAGS as usize);
            let size = l::fpn_leaf_size(flags).ok_or_else(|| {
                cx.corrupt(
                    format!("leaf {i}"),
                    off,
                    format!(
                        "FpN bit-width code {} (flags {flags:#04x}) is not 1, 2, 4, 8 or 16 bits",
                        flags >> 5
                    ),
                )
            })? as usize;
            cx.span(&|| format!("leaf {i}"), off, size as u64)?;
            offsets.push(off);
            off += size;
        }
        lv.size = 0;
        lv.offsets = Some(offsets);
        lv.end = off;
        lv
    };

    // The regions must not overlap (NanoVDB writes them in this order, back to back).
    let mut regions = vec![(
        0usize,
        tree + l::TREE_SIZE as usize,
        "grid and tree headers",
    )];
    regions.push((root, root_end, "root and its tiles"));
    for lv in [&upper, &lower, &leaves] {
        if lv.count > 0 {
            regions.push((lv.first, lv.end, lv.name));
        }
    }
    regions.sort();
    for w in regions.windows(2) {
        if w[0].1 > w[1].0 {
            return Err(cx.corrupt(
                w[1].2,
                w[1].0,
                format!("overlaps the {} (bytes {}..{})", w[0].2, w[0].0, w[0].1),
            ));
        }
    }

    // Root tiles → upper nodes. Every node must be referenced exactly once; origins follow
    // from the path (root key, then table positions) and are checked against the leaves.
    let mut upper_origin: Vec<Option<Coord>> = vec![None; upper.count];
    for t in 0..tile_count as usize {
        let tile = root + rl.size as usize + t * rl.tile_size as usize;
        let child = i64_at(g, tile + l::ROOT_TILE_OFF_CHILD as usize);
        if child == 0 {
            continue;
        }
        let what = || format!("root tile {t}");
        let target = cx.rel(&what, tile, root, child)?;
        let idx = upper.index_of(target).ok_or_else(|| {
            cx.corrupt(
                what(),
                tile,
                format!(
                    "child offset {child} does not point at one of the {} upper nodes",
                    upper.count
                ),
            )
        })?;
        if upper_origin[idx].is_some() {
            return Err(cx.corrupt(
                what(),
                tile,
                format!("upper node {idx} is referenced twice"),
            ));
        }
        let key = u64_at(g, tile + l::ROOT_TILE_OFF_KEY as usize);
        upper_origin[idx] = Some(l::key_to_coord(key));
    }
    let origins =
        |v: Vec<Option<Coord>>, lv: &Level, by: &str| -> Result<Vec<Coord>, FormatError> {
            v.iter()
                .enumerate()
                .map(|(i, o)| {
                    o.ok_or_else(|| {
                        cx.corrupt(
                            format!("{} {i}", lv.name),
                            lv.offset(i),
                            format!("is not referenced by any {by}"),
                        )
                    })
                })
                .collect()
        };
    let upper_origin = origins(upper_origin, &upper, "root tile")?;

    // Internal nodes → children.
    let check_children = |parent: &Level,
                          parent_origin: &[Coord],
                          nl: &l::NodeLayout,
                          child_level: &Level,
                          child_origin: &mut [Option<Coord>]|
     -> Result<(), FormatError> {
        let child_shift = if nl.log2dim == l::UPPER_LOG2DIM {
            l::LOWER_TOTAL
        } else {
            l::LEAF_TOTAL
        };
        let dim_mask = (1usize << nl.log2dim) - 1;
        for (i, &origin) in parent_origin.iter().enumerate() {
            let node = parent.offset(i);
            let what = || format!("{} {i}", parent.name);
            for_each_set_bit(
                g,
                node + nl.off_child_mask as usize,
                nl.table_count() as usize,
                |n| {
                    let entry = node + nl.off_table as usize + n * nl.table_stride as usize;
                    let child = i64_at(g, entry);
                    let target = cx.rel_as(&what, &format!("child {n}: "), node, node, child)?;
                    let idx = child_level.index_of(target).ok_or_else(|| {
                        cx.corrupt(
                            what(),
                            node,
                            format!(
                                "child {n}: offset {child} does not point at one of the {} {}s",
                                child_level.count, child_level.name
                            ),
                        )
                    })?;
                    if child_origin[idx].is_some() {
                        return Err(cx.corrupt(
                            what(),
                            node,
                            format!("child {n}: {} {idx} is referenced twice", child_level.name),
                        ));
                    }
                    let local = [
                        ((n >> (2 * nl.log2dim)) & dim_mask) as i32,
                        ((n >> nl.log2dim) & dim_mask) as i32,
                        (n & dim_mask) as i32,
                    ];
                    let local = local.map(|c| c << child_shift);
                    child_origin[idx] = Some(add_coord(origin, local));
                    Ok(())
                },
            )?;
        }
        Ok(())
    };
    let mut lower_origin = vec![None; lower.count];
    check_children(
        &upper,
        &upper_origin,
        &layout.upper,
        &lower,
        &mut lower_origin,
    )?;
    let lower_origin = origins(lower_origin, &lower, "upper node")?;
    let mut leaf_origin = vec![None; leaves.count];
    check_children(
        &lower,
        &lower_origin,
        &layout.lower,
        &leaves,
        &mut leaf_origin,
    )?;
    let leaf_origin = origins(leaf_origin, &leaves, "lower node")?;
    for (i, expected) in leaf_origin.iter().enumerate() {
        let off = leaves.offset(i);
        let stored = masked(coord_at(g, off + l::LEAF_OFF_BBOX_MIN as usize), 7);
        if stored != *expected {
            return Err(cx.corrupt(
                format!("leaf {i}"),
                off,
                format!("origin {stored:?} does not match its place {expected:?} in the tree"),
            ));
        }
    }

    // Blind metadata (and the long grid name, if there is one).
    let blind_metadata_offset = i64_at(g, l::GRID_OFF_BLIND_METADATA_OFFSET as usize);
    let blind_metadata_count = u32_at(g, l::GRID_OFF_BLIND_METADATA_COUNT as usize);
    let mut long_name = None;
    if blind_metadata_count > 0 {
        let what = || "blind metadata".to_string();
        let first = cx.rel(&what, 0, 0, blind_metadata_offset)?;
        cx.span(
            &what,
            first,
            u64::from(blind_metadata_count) * u64::from(l::BLIND_META_SIZE),
        )?;
        if flags & l::GRID_FLAG_HAS_LONG_GRID_NAME != 0 {
            for i in 0..blind_metadata_count as usize {
                let meta = first + i * l::BLIND_META_SIZE as usize;
                if u32_at(g, meta + l::BLIND_META_OFF_DATA_CLASS as usize)
                    != l::BLIND_CLASS_GRID_NAME
                {
                    continue;
                }
                let what = || format!("blind metadata {i} (grid name)");
                let data_rel = i64_at(g, meta + l::BLIND_META_OFF_DATA_OFFSET as usize);
                let data = cx.rel(&what, meta, meta, data_rel)?;
                let max = usize::try_from(u64_at(g, meta + l::BLIND_META_OFF_VALUE_COUNT as usize))
                    .unwrap_or(usize::MAX);
                let s = &g[data..g.len().min(data.saturating_add(max))];
                let s = s.split(|&c| c == 0).next().unwrap_or(s);
                long_name = Some(String::from_utf8_lossy(s).into_owned());
                break;
            }
        }
    }
    let name = long_name.unwrap_or_else(|| {
        let field = &g
            [l::GRID_OFF_GRID_NAME as usize..(l::GRID_OFF_GRID_NAME + l::GRID_NAME_SIZE) as usize];
        let s = field.split(|&c| c == 0).next().unwrap_or(field);
        String::from_utf8_lossy(s).into_owned()
    });

    let map_off = l::GRID_OFF_MAP as usize;
    let map = Map {
        mat: f64s(g, map_off + l::MAP_OFF_MATD as usize),
        inv_mat: f64s(g, map_off + l::MAP_OFF_INVMATD as usize),
        vec: f64s(g, map_off + l::MAP_OFF_VECD as usize),
        taper: f64_at(g, map_off + l::MAP_OFF_TAPERD as usize),
        mat_f: f32s(g, map_off + l::MAP_OFF_MATF as usize),
        inv_mat_f: f32s(g, map_off + l::MAP_OFF_INVMATF as usize),
        vec_f: f32s(g, map_off + l::MAP_OFF_VECF as usize),
    };
    let wb: [f64; 6] = f64s(g, l::GRID_OFF_WORLD_BBOX as usize);
    let header = GridHeader {
        magic,
        checksum: u64_at(g, l::GRID_OFF_CHECKSUM as usize),
        version,
        flags,
        grid_index,
        grid_count,
        grid_size,
        name,
        map,
        world_bbox: [[wb[0], wb[1], wb[2]], [wb[3], wb[4], wb[5]]],
        voxel_size: f64s(g, l::GRID_OFF_VOXEL_SIZE as usize),
        grid_class,
        grid_class_raw: class_raw,
        grid_type,
        blind_metadata_offset,
        blind_metadata_count,
        data1: u64_at(g, l::GRID_OFF_DATA1 as usize),
        index_bbox: [
            coord_at(g, root + l::NODE_OFF_BBOX_MIN as usize),
            coord_at(g, root + l::NODE_OFF_BBOX_MAX as usize),
        ],
        active_voxel_count,
        node_counts,
        tile_counts,
    };
    Ok(Grid {
        data: g,
        base,
        header,
        layout,
        root,
        tile_count,
        leaf_first: leaves.first,
        fpn_leaves: leaves.offsets.unwrap_or_default(),
    })
}
