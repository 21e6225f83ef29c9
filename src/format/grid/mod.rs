//! A validated, read-only view of one NanoVDB grid buffer and a CPU value accessor.
//!
//! [`Grid::parse`] checks untrusted bytes once: header fields, the tree header, every root
//! tile, every internal-node child reference and every leaf. After that, every read made
//! through [`Grid`], [`ReadAccessor`] and [`LeafView`] lies inside the buffer. All reads go
//! through the bounds-checked `format::le::LeBytes`; the few accessors that cannot
//! return an error say how they treat a read that validation should have made impossible.
//!
//! The parse runs in phases, one file each: `header` (grid and tree headers, name, map),
//! `validate` (root, node arrays, overlaps, child references and origins), `leaves` (the leaf
//! array, FpN's variable-size leaves, and the leaf views), then `accessor` (value lookup) and
//! `bytes` (field reads and value widening) serve the validated grid.

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
mod sample;
#[cfg(test)]
pub(crate) mod tests;
mod validate;

use accessor::NoCache;
pub use accessor::ReadAccessor;
pub use bytes::half_to_f32;
use bytes::proven;
use header::check_header;
pub use leaves::{LeafView, Leaves};
pub use sample::{Interpolation, Sample};
use validate::Ctx;

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
        // The statistics lie inside the root, which parse checked.
        let le = self.le();
        let stat = |off: u32| -> f64 {
            let off = self.root + off as usize;
            proven(match self.layout.stats_size {
                8 => le.f64_at(off, "root statistic"),
                _ => le.f32_at(off, "root statistic").map(f64::from),
            })
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

/// Parses and validates the grid starting at byte `base` of `buf`, phase by phase.
fn parse_at(buf: &[u8], base: u64) -> Result<Grid<'_>, FormatError> {
    let (g, head) = header::grid_bytes(buf, base)?;
    let cx = Ctx { base, g };
    let tree = header::tree_head(&cx)?;
    let layout = head.layout;
    let root = validate::root(&cx, &layout)?;
    let levels = node_levels(&cx, &layout, &tree.node_counts)?;
    validate::check_no_overlap(&cx, &root, &levels)?;
    validate::check_links(&cx, &layout, &root, &levels)?;
    let header = header::grid_header(&cx, head, tree, root.offset)?;
    Ok(Grid {
        data: g,
        base,
        header,
        layout,
        root: root.offset,
        tile_count: root.tile_count,
        leaf_first: levels.leaves.first,
        fpn_leaves: levels.leaves.offsets.unwrap_or_default(),
    })
}

/// Each level is contiguous, starting at the tree header's offset for it.
fn node_levels(
    cx: &Ctx<'_>,
    layout: &TreeLayout,
    counts: &NodeCounts,
) -> Result<validate::Levels, FormatError> {
    Ok(validate::Levels {
        upper: validate::level(cx, "upper node", 2, counts.upper, layout.upper.size)?,
        lower: validate::level(cx, "lower node", 1, counts.lower, layout.lower.size)?,
        leaves: leaves::leaf_level(cx, &layout.leaf, counts.leaves)?,
    })
}
