//! A validated, read-only view of one NanoVDB grid buffer and a CPU value accessor.
//!
//! [`Grid::parse`] checks untrusted bytes once: header fields, the tree header, every root
//! tile, every internal-node child reference and every leaf. After that, every read made
//! through [`Grid`], [`ReadAccessor`] and [`LeafView`] lies inside the buffer; the byte
//! helpers below still fall back to zeros instead of panicking, as a second line of defence.

use super::error::FormatError;
use super::layout::{self as l, LeafKind, TreeLayout};
use super::sparse::{LEAF_VOXELS, LeafBrick};
use super::types::{Coord, GridClass, GridType, Version};

// ------------------------------------------------------------------------------------------
// Little-endian reads that never panic
// ------------------------------------------------------------------------------------------

#[inline]
fn bytes<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    off.checked_add(N)
        .and_then(|end| b.get(off..end))
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}
#[inline]
fn u8_at(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}
#[inline]
fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(bytes(b, off))
}
#[inline]
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(bytes(b, off))
}
#[inline]
fn i32_at(b: &[u8], off: usize) -> i32 {
    i32::from_le_bytes(bytes(b, off))
}
#[inline]
fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(bytes(b, off))
}
#[inline]
fn i64_at(b: &[u8], off: usize) -> i64 {
    i64::from_le_bytes(bytes(b, off))
}
#[inline]
fn f32_at(b: &[u8], off: usize) -> f32 {
    f32::from_le_bytes(bytes(b, off))
}
#[inline]
fn f64_at(b: &[u8], off: usize) -> f64 {
    f64::from_le_bytes(bytes(b, off))
}
fn coord_at(b: &[u8], off: usize) -> Coord {
    [i32_at(b, off), i32_at(b, off + 4), i32_at(b, off + 8)]
}
fn f64s<const N: usize>(b: &[u8], off: usize) -> [f64; N] {
    std::array::from_fn(|i| f64_at(b, off + 8 * i))
}
fn f32s<const N: usize>(b: &[u8], off: usize) -> [f32; N] {
    std::array::from_fn(|i| f32_at(b, off + 4 * i))
}
#[inline]
fn bit_at(b: &[u8], mask_off: usize, n: usize) -> bool {
    u8_at(b, mask_off + (n >> 3)) >> (n & 7) & 1 == 1
}

/// IEEE 754 binary16 → binary32, exact for every input (as NanoVDB's `Half` → `float`).
pub fn half_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: man * 2^-24, exact in f32 (a power-of-two scaling of a small integer).
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}

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
#[derive(Clone, Copy, Debug)]
enum Loc {
    /// The root's background (no tile): value offset in the grid.
    Background(usize),
    /// A value tile in the root: offset of the tile.
    RootTile(usize),
    /// A tile in an upper (`level` 2) or lower (`level` 1) node.
    Internal { level: u8, node: usize, n: usize },
    /// A voxel of a leaf.
    Leaf { node: usize, n: usize },
}

#[inline]
fn upper_offset(ijk: Coord) -> usize {
    ((((ijk[0] & 4095) >> 7) << 10) | (((ijk[1] & 4095) >> 7) << 5) | ((ijk[2] & 4095) >> 7))
        as usize
}
#[inline]
fn lower_offset(ijk: Coord) -> usize {
    ((((ijk[0] & 127) >> 3) << 8) | (((ijk[1] & 127) >> 3) << 4) | ((ijk[2] & 127) >> 3)) as usize
}
#[inline]
fn leaf_offset(ijk: Coord) -> usize {
    (((ijk[0] & 7) << 6) | ((ijk[1] & 7) << 3) | (ijk[2] & 7)) as usize
}
fn masked(ijk: Coord, mask: i32) -> Coord {
    [ijk[0] & !mask, ijk[1] & !mask, ijk[2] & !mask]
}

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

    // --------------------------------------------------------------------------------------

    fn check_supported(&self) -> Result<(), FormatError> {
        use GridType::*;
        match self.header.grid_type {
            Index | OnIndex | IndexMask | OnIndexMask | PointIndex | Unknown => {
                Err(FormatError::Unsupported {
                    grid_type: self.header.grid_type,
                    detail: "index and point grids store offsets into external arrays",
                })
            }
            _ => Ok(()),
        }
    }

    fn leaf_at_index(&self, i: usize) -> Option<usize> {
        if self.layout.leaf.fixed_size() {
            (i < self.header.node_counts.leaves as usize)
                .then(|| self.leaf_first + i * self.layout.leaf.size as usize)
        } else {
            self.fpn_leaves.get(i).copied()
        }
    }

    /// Finds the root tile whose key matches `ijk` (linear search, as NanoVDB does).
    fn find_tile(&self, ijk: Coord) -> Option<usize> {
        let key = l::coord_to_key(ijk);
        let first = self.root + self.layout.root.size as usize;
        let size = self.layout.root.tile_size as usize;
        (0..self.tile_count as usize)
            .map(|t| first + t * size)
            .find(|&tile| u64_at(self.data, tile + l::ROOT_TILE_OFF_KEY as usize) == key)
    }

    fn child(&self, node: usize, table: u32, stride: u32, n: usize) -> usize {
        let entry = node + table as usize + n * stride as usize;
        // Validated at parse: node + offset is a node of the next level inside the grid.
        (node as i64).wrapping_add(i64_at(self.data, entry)) as usize
    }

    fn locate_from_root(&self, ijk: Coord, cache: &mut impl Cache) -> Loc {
        let Some(tile) = self.find_tile(ijk) else {
            return Loc::Background(self.root + self.layout.root.off_background as usize);
        };
        let child = i64_at(self.data, tile + l::ROOT_TILE_OFF_CHILD as usize);
        if child == 0 {
            return Loc::RootTile(tile);
        }
        let upper = (self.root as i64).wrapping_add(child) as usize;
        cache.set(2, masked(ijk, (1 << l::UPPER_TOTAL) - 1), upper);
        self.locate_from_upper(ijk, upper, cache)
    }

    fn locate_from_upper(&self, ijk: Coord, node: usize, cache: &mut impl Cache) -> Loc {
        let u = &self.layout.upper;
        let n = upper_offset(ijk);
        if !bit_at(self.data, node + u.off_child_mask as usize, n) {
            return Loc::Internal { level: 2, node, n };
        }
        let lower = self.child(node, u.off_table, u.table_stride, n);
        cache.set(1, masked(ijk, (1 << l::LOWER_TOTAL) - 1), lower);
        self.locate_from_lower(ijk, lower, cache)
    }

    fn locate_from_lower(&self, ijk: Coord, node: usize, cache: &mut impl Cache) -> Loc {
        let lo = &self.layout.lower;
        let n = lower_offset(ijk);
        if !bit_at(self.data, node + lo.off_child_mask as usize, n) {
            return Loc::Internal { level: 1, node, n };
        }
        let leaf = self.child(node, lo.off_table, lo.table_stride, n);
        cache.set(0, masked(ijk, 7), leaf);
        Loc::Leaf {
            node: leaf,
            n: leaf_offset(ijk),
        }
    }

    fn active_at(&self, loc: Loc) -> bool {
        match loc {
            Loc::Background(_) => false,
            Loc::RootTile(tile) => u32_at(self.data, tile + l::ROOT_TILE_OFF_STATE as usize) != 0,
            Loc::Internal { node, n, .. } => {
                bit_at(self.data, node + l::INTERNAL_OFF_VALUE_MASK as usize, n)
            }
            Loc::Leaf { node, n } => bit_at(self.data, node + l::LEAF_OFF_VALUE_MASK as usize, n),
        }
    }

    fn value_at(&self, loc: Loc) -> Result<Value, FormatError> {
        match loc {
            Loc::Background(off) => self.tile_value(off),
            Loc::RootTile(tile) => self.tile_value(tile + self.layout.root.tile_off_value as usize),
            Loc::Internal { level, node, n } => {
                let nl = if level == 2 {
                    &self.layout.upper
                } else {
                    &self.layout.lower
                };
                self.tile_value(node + nl.off_table as usize + n * nl.table_stride as usize)
            }
            Loc::Leaf { node, n } => self.leaf_value(node, n),
        }
    }

    /// Decodes a value of the root/internal value type stored at `off`.
    fn tile_value(&self, off: usize) -> Result<Value, FormatError> {
        use GridType::*;
        let b = self.data;
        Ok(match self.header.grid_type {
            Float | Fp4 | Fp8 | Fp16 | FpN => Value::Float(f32_at(b, off)),
            Half => Value::Float(half_to_f32(u16_at(b, off))),
            Double => Value::Double(f64_at(b, off)),
            Int16 => Value::Int(i64::from(u16_at(b, off) as i16)),
            Int32 => Value::Int(i64::from(i32_at(b, off))),
            Int64 => Value::Int(i64_at(b, off)),
            UInt32 => Value::Int(i64::from(u32_at(b, off))),
            UInt8 => Value::Int(i64::from(u8_at(b, off))),
            Vec3f => Value::Vec3f(f32s(b, off)),
            Vec3d => Value::Vec3d(f64s(b, off)),
            Vec4f => Value::Vec4f(f32s(b, off)),
            Vec4d => Value::Vec4d(f64s(b, off)),
            Mask | Boolean => Value::Bool(u8_at(b, off) != 0),
            Rgba8 => Value::Rgba8(bytes(b, off)),
            Vec3u8 => Value::Vec3u8(bytes(b, off)),
            Vec3u16 => Value::Vec3u16(std::array::from_fn(|i| u16_at(b, off + 2 * i))),
            Index | OnIndex | IndexMask | OnIndexMask | PointIndex | Unknown => {
                self.check_supported()?;
                unreachable_value()
            }
        })
    }

    /// Decodes voxel `n` of the leaf at `leaf`.
    fn leaf_value(&self, leaf: usize, n: usize) -> Result<Value, FormatError> {
        let b = self.data;
        let lf = &self.layout.leaf;
        let table = leaf + lf.off_table as usize;
        let quantized = |code: u32| -> Value {
            let min = f32_at(b, leaf + l::LEAF_FP_OFF_MINIMUM as usize);
            let q = f32_at(b, leaf + l::LEAF_FP_OFF_QUANTUM as usize);
            // NanoVDB: float(code) * mQuantum + mMinimum, two roundings (no fused multiply-add).
            Value::Float(code as f32 * q + min)
        };
        Ok(match lf.kind {
            LeafKind::Plain => {
                let size = (lf.value_bits / 8) as usize;
                return self.tile_value(table + n * size);
            }
            LeafKind::Mask => Value::Bool(bit_at(b, leaf + l::LEAF_OFF_VALUE_MASK as usize, n)),
            LeafKind::Bits => Value::Bool(bit_at(b, table, n)),
            LeafKind::Quantized { bits } => quantized(fp_code(b, table, bits, n)),
            LeafKind::QuantizedVariable => {
                let flags = u8_at(b, leaf + l::LEAF_OFF_FLAGS as usize);
                let bits = l::fpn_bit_width(flags).unwrap_or(16);
                quantized(fp_code(b, table, bits, n))
            }
            LeafKind::Index | LeafKind::PointIndex => {
                self.check_supported()?;
                unreachable_value()
            }
        })
    }
}

/// Placeholder for arms that `check_supported` has already turned into errors.
fn unreachable_value() -> Value {
    Value::Bool(false)
}

/// Code `n` of a little-endian packed array of `bits`-bit codes (1, 2, 4, 8 or 16 bits).
#[inline]
fn fp_code(b: &[u8], table: usize, bits: u32, n: usize) -> u32 {
    match bits {
        16 => u32::from(u16_at(b, table + 2 * n)),
        8 => u32::from(u8_at(b, table + n)),
        _ => {
            let bit = n * bits as usize;
            let byte = u8_at(b, table + (bit >> 3));
            u32::from(byte >> (bit & 7)) & ((1 << bits) - 1)
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

// ------------------------------------------------------------------------------------------
// Cached accessor
// ------------------------------------------------------------------------------------------

trait Cache {
    fn set(&mut self, level: u8, key: Coord, node: usize);
}
struct NoCache;
impl Cache for NoCache {
    #[inline]
    fn set(&mut self, _: u8, _: Coord, _: usize) {}
}

/// A value accessor that remembers the last leaf, lower and upper node it went through,
/// like NanoVDB's `ReadAccessor<BuildT, 0, 1, 2>`. Results equal [`Grid::value`] exactly.
#[derive(Clone, Debug)]
pub struct ReadAccessor<'g, 'a> {
    grid: &'g Grid<'a>,
    leaf: Option<(Coord, usize)>,
    lower: Option<(Coord, usize)>,
    upper: Option<(Coord, usize)>,
}

struct AccCache<'c> {
    leaf: &'c mut Option<(Coord, usize)>,
    lower: &'c mut Option<(Coord, usize)>,
    upper: &'c mut Option<(Coord, usize)>,
}
impl Cache for AccCache<'_> {
    #[inline]
    fn set(&mut self, level: u8, key: Coord, node: usize) {
        let slot = match level {
            0 => &mut *self.leaf,
            1 => &mut *self.lower,
            _ => &mut *self.upper,
        };
        *slot = Some((key, node));
    }
}

impl<'g, 'a> ReadAccessor<'g, 'a> {
    /// The grid this accessor reads.
    pub fn grid(&self) -> &'g Grid<'a> {
        self.grid
    }

    fn locate(&mut self, ijk: Coord) -> Loc {
        let g = self.grid;
        let mut cache = AccCache {
            leaf: &mut self.leaf,
            lower: &mut self.lower,
            upper: &mut self.upper,
        };
        if let Some((key, node)) = *cache.leaf
            && key == masked(ijk, 7)
        {
            return Loc::Leaf {
                node,
                n: leaf_offset(ijk),
            };
        }
        if let Some((key, node)) = *cache.lower
            && key == masked(ijk, (1 << l::LOWER_TOTAL) - 1)
        {
            return g.locate_from_lower(ijk, node, &mut cache);
        }
        if let Some((key, node)) = *cache.upper
            && key == masked(ijk, (1 << l::UPPER_TOTAL) - 1)
        {
            return g.locate_from_upper(ijk, node, &mut cache);
        }
        g.locate_from_root(ijk, &mut cache)
    }

    /// The value at `ijk` (see [`Grid::value`]).
    pub fn value(&mut self, ijk: Coord) -> Result<Value, FormatError> {
        self.grid.check_supported()?;
        let loc = self.locate(ijk);
        self.grid.value_at(loc)
    }

    /// Whether `ijk` is active (see [`Grid::is_active`]).
    pub fn is_active(&mut self, ijk: Coord) -> bool {
        let loc = self.locate(ijk);
        self.grid.active_at(loc)
    }
}

// ------------------------------------------------------------------------------------------
// Leaves
// ------------------------------------------------------------------------------------------

/// Iterator over the leaves of a grid, see [`Grid::leaves`].
#[derive(Clone, Debug)]
pub struct Leaves<'g, 'a> {
    grid: &'g Grid<'a>,
    next: usize,
}

impl<'g, 'a> Iterator for Leaves<'g, 'a> {
    type Item = LeafView<'g, 'a>;
    fn next(&mut self) -> Option<Self::Item> {
        let off = self.grid.leaf_at_index(self.next)?;
        self.next += 1;
        Some(LeafView {
            grid: self.grid,
            off,
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.grid.header.node_counts.leaves as usize).saturating_sub(self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Leaves<'_, '_> {}

/// One validated leaf node.
#[derive(Clone, Copy, Debug)]
pub struct LeafView<'g, 'a> {
    grid: &'g Grid<'a>,
    off: usize,
}

impl LeafView<'_, '_> {
    /// Byte offset of the leaf inside the grid buffer.
    pub fn offset(&self) -> usize {
        self.off
    }
    /// Index coordinate of voxel (0, 0, 0); multiples of 8 (checked at parse against the
    /// position the tree gives the leaf).
    pub fn origin(&self) -> Coord {
        masked(
            coord_at(self.grid.data, self.off + l::LEAF_OFF_BBOX_MIN as usize),
            7,
        )
    }
    /// The leaf's flags byte.
    pub fn flags(&self) -> u8 {
        u8_at(self.grid.data, self.off + l::LEAF_OFF_FLAGS as usize)
    }
    /// Active-state mask: bit `n % 64` of word `n / 64` for voxel `n = x*64 + y*8 + z`.
    pub fn active_mask(&self) -> [u64; 8] {
        let m = self.off + l::LEAF_OFF_VALUE_MASK as usize;
        std::array::from_fn(|w| u64_at(self.grid.data, m + 8 * w))
    }
    /// Number of active voxels.
    pub fn active_count(&self) -> u32 {
        self.active_mask().iter().map(|w| w.count_ones()).sum()
    }
    /// Whether voxel `n` (0..512) is active; false for `n >= 512`.
    pub fn is_active(&self, n: usize) -> bool {
        n < LEAF_VOXELS
            && bit_at(
                self.grid.data,
                self.off + l::LEAF_OFF_VALUE_MASK as usize,
                n,
            )
    }
    /// The value of voxel `n` (0..512), decoded as [`Grid::value`] does.
    pub fn value(&self, n: usize) -> Result<Value, FormatError> {
        self.grid.check_supported()?;
        if n >= LEAF_VOXELS {
            return Err(FormatError::Corrupt {
                what: "leaf voxel index".into(),
                offset: self.grid.base + self.off as u64,
                detail: format!("{n} is not below 512"),
            });
        }
        self.grid.leaf_value(self.off, n)
    }
    /// All 512 values as f32, for scalar grids (Float, Half, Fp4/8/16/N; Double and integers
    /// are converted with `as`). Vector, bool and index grids give `Unsupported`.
    pub fn values_f32(&self) -> Result<Box<[f32; LEAF_VOXELS]>, FormatError> {
        use GridType::*;
        let t = self.grid.header.grid_type;
        if !matches!(
            t,
            Float | Half | Fp4 | Fp8 | Fp16 | FpN | Double | Int16 | Int32 | Int64 | UInt32 | UInt8
        ) {
            return Err(FormatError::Unsupported {
                grid_type: t,
                detail: "not a scalar grid",
            });
        }
        let mut out = Box::new([0f32; LEAF_VOXELS]);
        for (n, v) in out.iter_mut().enumerate() {
            *v = self.grid.leaf_value(self.off, n)?.as_f32().unwrap_or(0.0);
        }
        Ok(out)
    }
    /// The leaf as a [`LeafBrick`] (origin, f32 values, active mask), for scalar grids.
    pub fn to_brick(&self) -> Result<LeafBrick, FormatError> {
        Ok(LeafBrick {
            origin: self.origin(),
            values: self.values_f32()?,
            active: self.active_mask(),
        })
    }
}

// ------------------------------------------------------------------------------------------
// Validation
// ------------------------------------------------------------------------------------------

struct Ctx<'b> {
    /// The whole buffer (for messages only).
    base: u64,
    /// The grid's bytes.
    g: &'b [u8],
}

impl Ctx<'_> {
    fn corrupt(
        &self,
        what: impl Into<String>,
        off: usize,
        detail: impl Into<String>,
    ) -> FormatError {
        FormatError::Corrupt {
            what: what.into(),
            offset: self.base + off as u64,
            detail: detail.into(),
        }
    }
    fn truncated(&self, what: impl Into<String>, off: usize, need: u64) -> FormatError {
        FormatError::Truncated {
            what: what.into(),
            offset: self.base + off as u64,
            need,
            len: self.g.len() as u64,
            within: "grid",
        }
    }
    /// Checks that `[off, off + len)` lies in the grid.
    fn span(&self, what: &dyn Fn() -> String, off: usize, len: u64) -> Result<(), FormatError> {
        let end = (off as u64).checked_add(len);
        match end {
            Some(end) if end <= self.g.len() as u64 => Ok(()),
            _ => Err(self.truncated(what(), off, len)),
        }
    }
    /// `base + rel`, checked to lie inside the grid; errors name `what` at byte `at`.
    fn rel(
        &self,
        what: &dyn Fn() -> String,
        at: usize,
        base: usize,
        rel: i64,
    ) -> Result<usize, FormatError> {
        self.rel_as(what, "", at, base, rel)
    }
    /// As [`Ctx::rel`], with `role` (e.g. "child 12: ") before the message.
    fn rel_as(
        &self,
        what: &dyn Fn() -> String,
        role: &str,
        at: usize,
        base: usize,
        rel: i64,
    ) -> Result<usize, FormatError> {
        let target = (base as i128) + i128::from(rel);
        if target < 0 || target >= self.g.len() as i128 {
            return Err(self.corrupt(
                what(),
                at,
                format!(
                    "{role}offset {rel} points outside the {}-byte grid",
                    self.g.len()
                ),
            ));
        }
        Ok(target as usize)
    }
}

/// The contiguous array of nodes of one level.
struct Level {
    name: &'static str,
    first: usize,
    count: usize,
    /// Node size (fixed-size levels).
    size: usize,
    /// Sorted node offsets of variable-size (FpN) leaves.
    offsets: Option<Vec<usize>>,
    /// One past the last byte of the last node.
    end: usize,
}

impl Level {
    /// The index of the node starting at `off`, if one does.
    fn index_of(&self, off: usize) -> Option<usize> {
        match &self.offsets {
            Some(o) => o.binary_search(&off).ok(),
            None => {
                let d = off.checked_sub(self.first)?;
                (self.size != 0 && d % self.size == 0 && d / self.size < self.count)
                    .then_some(d / self.size)
            }
        }
    }
    fn offset(&self, i: usize) -> usize {
        match &self.offsets {
            Some(o) => o.get(i).copied().unwrap_or(0),
            None => self.first + i * self.size,
        }
    }
}

/// Calls `f(n)` for every set bit `n` of the `bits`-bit mask at `off`, in ascending order.
fn for_each_set_bit(
    g: &[u8],
    off: usize,
    bits: usize,
    mut f: impl FnMut(usize) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    for w in 0..bits / 64 {
        let mut word = u64_at(g, off + 8 * w);
        while word != 0 {
            let b = word.trailing_zeros() as usize;
            word &= word - 1;
            f(w * 64 + b)?;
        }
    }
    Ok(())
}

fn add_coord(a: Coord, b: Coord) -> Coord {
    [
        a[0].wrapping_add(b[0]),
        a[1].wrapping_add(b[1]),
        a[2].wrapping_add(b[2]),
    ]
}

/// The grid header's fields that both the full parse ([`parse_at`]) and the cheap arrival
/// check ([`check_header`]) start from, validated once, in one place.
struct GridHead {
    magic: GridMagic,
    version: Version,
    grid_size: u64,
    grid_type: GridType,
    layout: l::TreeLayout,
    grid_index: u32,
    grid_count: u32,
}

/// Validates the grid header at the start of `h` (which holds at least the 672-byte grid
/// header): magic, version, a grid size between the two headers' size and `limit` (the bytes
/// the grid may span), a grid type with a layout, and the grid index and count. `base` is the
/// header's offset, for the errors.
fn grid_head(h: &[u8], limit: u64, base: u64) -> Result<GridHead, FormatError> {
    let header_need = u64::from(l::GRID_SIZE + l::TREE_SIZE);
    let magic: [u8; 8] = bytes(h, 0);
    let magic = match magic {
        l::MAGIC_NUMB_BYTES => GridMagic::Legacy,
        l::MAGIC_GRID_BYTES => GridMagic::Grid,
        other => {
            let mut found = String::from_utf8_lossy(&other).into_owned();
            if other == l::MAGIC_FILE_BYTES {
                found.push_str(" (a segmented .nvdb file header, not a grid)");
            }
            return Err(FormatError::BadMagic {
                offset: base,
                found,
            });
        }
    };
    let version = Version(u32_at(h, l::GRID_OFF_VERSION as usize));
    if version.major() != l::MAJOR_VERSION
        || !(l::MIN_MINOR_VERSION..=l::MAX_MINOR_VERSION).contains(&version.minor())
    {
        return Err(FormatError::Version {
            offset: base,
            version,
        });
    }
    let hdr_err = |detail: String| FormatError::Corrupt {
        what: "grid header".into(),
        offset: base,
        detail,
    };
    let grid_size = u64_at(h, l::GRID_OFF_GRID_SIZE as usize);
    if grid_size < header_need {
        return Err(hdr_err(format!(
            "grid size {grid_size} is smaller than the {header_need}-byte grid and tree headers"
        )));
    }
    if grid_size > limit {
        return Err(FormatError::Truncated {
            what: "grid".into(),
            offset: base,
            need: grid_size,
            len: limit,
            within: "buffer",
        });
    }
    let type_raw = u32_at(h, l::GRID_OFF_GRID_TYPE as usize);
    let grid_type = GridType::from_u32(type_raw)
        .ok_or_else(|| hdr_err(format!("unknown grid type {type_raw}")))?;
    let layout = l::layout(grid_type).ok_or_else(|| {
        hdr_err(format!(
            "grid type {type_raw} ({grid_type:?}) has no defined layout"
        ))
    })?;
    let grid_index = u32_at(h, l::GRID_OFF_GRID_INDEX as usize);
    let grid_count = u32_at(h, l::GRID_OFF_GRID_COUNT as usize);
    if grid_count == 0 || grid_index >= grid_count {
        return Err(hdr_err(format!(
            "grid index {grid_index} is not below grid count {grid_count}"
        )));
    }
    Ok(GridHead {
        magic,
        version,
        grid_size,
        grid_type,
        layout,
        grid_index,
        grid_count,
    })
}

/// See [`Grid::check_header`].
fn check_header(g: &[u8], len: u64) -> Result<u64, FormatError> {
    let header_need = u64::from(l::GRID_SIZE + l::TREE_SIZE);
    let have = (g.len() as u64).min(len);
    if have < header_need {
        return Err(FormatError::Truncated {
            what: "grid header".into(),
            offset: 0,
            need: header_need,
            len: have,
            within: "buffer",
        });
    }
    let GridHead {
        grid_size,
        grid_type,
        layout,
        ..
    } = grid_head(g, len, 0)?;
    {
        use GridType::*;
        if matches!(
            grid_type,
            Index | OnIndex | IndexMask | OnIndexMask | PointIndex | Unknown
        ) {
            return Err(FormatError::Unsupported {
                grid_type,
                detail: "index and point grids store offsets into external arrays",
            });
        }
    }
    let tree = l::GRID_SIZE as usize;
    let tree_err = |detail: String| FormatError::Corrupt {
        what: "tree".into(),
        offset: tree as u64,
        detail,
    };
    let span = |what: String, off: u64, n: u64| match off.checked_add(n) {
        Some(end) if end <= grid_size => Ok(()),
        _ => Err(FormatError::Truncated {
            what,
            offset: off,
            need: n,
            len: grid_size,
            within: "grid",
        }),
    };
    let toff = |i: u32| u64_at(g, tree + (l::TREE_OFF_NODE_OFFSET_LEAF + 8 * i) as usize);
    let tcnt = |off: u32| u32_at(g, tree + off as usize);
    let align = u64::from(l::DATA_ALIGNMENT);
    let root_rel = toff(3);
    let root = root_rel
        .checked_add(tree as u64)
        .filter(|&r| r >= header_need && r < grid_size && r % align == 0)
        .ok_or_else(|| {
            tree_err(format!(
                "root offset {root_rel} points outside the {grid_size}-byte grid, overlaps the \
                 headers or is not 32-byte aligned"
            ))
        })?;
    let rl = layout.root;
    span("root".into(), root, u64::from(rl.size))?;
    // The root follows the tree header in every NanoVDB grid, so it lies in any prefix
    // of a few KiB; the tile count is the one value read past the headers.
    let count_at = root + u64::from(l::ROOT_OFF_TABLE_SIZE);
    if count_at + 4 > have {
        return Err(tree_err(format!(
            "the root at byte {root} lies past the first {have} bytes, where it always starts"
        )));
    }
    let tile_count = u32_at(g, count_at as usize);
    span(
        format!("root table of {tile_count} tiles"),
        root + u64::from(rl.size),
        u64::from(tile_count) * u64::from(rl.tile_size),
    )?;
    let leaf_size = if layout.leaf.fixed_size() {
        layout.leaf.size
    } else {
        // FpN leaves vary in size; none is smaller than this.
        l::LEAF_FPN_BASE_SIZE
    };
    for (idx, name, count, size) in [
        (
            2,
            "upper node",
            tcnt(l::TREE_OFF_NODE_COUNT_UPPER),
            layout.upper.size,
        ),
        (
            1,
            "lower node",
            tcnt(l::TREE_OFF_NODE_COUNT_LOWER),
            layout.lower.size,
        ),
        (0, "leaf", tcnt(l::TREE_OFF_NODE_COUNT_LEAF), leaf_size),
    ] {
        if count == 0 {
            continue;
        }
        let rel = toff(idx);
        let first = rel
            .checked_add(tree as u64)
            .filter(|&f| f < grid_size && f % align == 0)
            .ok_or_else(|| {
                tree_err(format!(
                    "offset {rel} of the first {name} points outside the {grid_size}-byte grid \
                     or is not 32-byte aligned"
                ))
            })?;
        span(
            format!("array of {count} {name}s"),
            first,
            u64::from(count).saturating_mul(u64::from(size)),
        )?;
    }
    Ok(grid_size)
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

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::format::layout::*;

    fn put(b: &mut [u8], off: usize, v: &[u8]) {
        b[off..off + v.len()].copy_from_slice(v);
    }

    /// What [`tiny_grid`] builds: one leaf under one lower under one upper node, plus a value
    /// tile at each level (root tile at x - 4096, an upper tile and a lower tile next to the
    /// children) so every path of the accessor is exercised.
    pub(crate) struct Tiny {
        pub grid_type: GridType,
        /// Leaf origin (multiple of 8).
        pub origin: Coord,
        /// Background value bytes (value size of the type).
        pub background: Vec<u8>,
        /// Tile value bytes used for the three tiles.
        pub tile: Vec<u8>,
        /// Leaf bytes from offset 80 to the end of the leaf.
        pub leaf_tail: Vec<u8>,
        /// Leaf flags byte.
        pub leaf_flags: u8,
        /// Leaf active mask.
        pub mask: [u64; 8],
    }

    /// Builds the grid buffer described by `t` (NanoVDB 32.9 layout, no checksum).
    pub(crate) fn tiny_grid(t: &Tiny) -> Vec<u8> {
        let lay = layout(t.grid_type).unwrap();
        let (rl, ul, ll) = (lay.root, lay.upper, lay.lower);
        let root = (GRID_SIZE + TREE_SIZE) as usize;
        let tiles = 2usize;
        let upper = root + rl.size as usize + tiles * rl.tile_size as usize;
        let upper = upper.next_multiple_of(32);
        let lower = upper + ul.size as usize;
        let leaf = lower + ll.size as usize;
        let leaf_size = 80 + t.leaf_tail.len();
        let size = (leaf + leaf_size).next_multiple_of(32);
        let mut b = vec![0u8; size];
        put(&mut b, 0, &MAGIC_GRID_BYTES);
        put(&mut b, 8, &u64::MAX.to_le_bytes());
        put(&mut b, 16, &Version::new(32, 9, 2).0.to_le_bytes());
        put(&mut b, 20, &GRID_FLAG_IS_BREADTH_FIRST.to_le_bytes());
        put(&mut b, 28, &1u32.to_le_bytes());
        put(&mut b, 32, &(size as u64).to_le_bytes());
        put(&mut b, 40, b"tiny");
        let m = GRID_OFF_MAP as usize;
        for i in [0, 4, 8] {
            put(
                &mut b,
                m + MAP_OFF_MATD as usize + 8 * i,
                &1f64.to_le_bytes(),
            );
            put(
                &mut b,
                m + MAP_OFF_INVMATD as usize + 8 * i,
                &1f64.to_le_bytes(),
            );
        }
        put(
            &mut b,
            GRID_OFF_GRID_CLASS as usize,
            &(GridClass::FogVolume as u32).to_le_bytes(),
        );
        put(
            &mut b,
            GRID_OFF_GRID_TYPE as usize,
            &(t.grid_type as u32).to_le_bytes(),
        );
        put(
            &mut b,
            GRID_OFF_BLIND_METADATA_OFFSET as usize,
            &(size as i64).to_le_bytes(),
        );
        let tr = GRID_SIZE as usize;
        for (i, off) in [leaf, lower, upper, root].iter().enumerate() {
            put(&mut b, tr + 8 * i, &((off - tr) as u64).to_le_bytes());
        }
        for i in 0..3 {
            put(&mut b, tr + 32 + 4 * i, &1u32.to_le_bytes());
            put(&mut b, tr + 44 + 4 * i, &1u32.to_le_bytes());
        }
        let ones: u32 = t.mask.iter().map(|w| w.count_ones()).sum();
        put(&mut b, tr + 56, &u64::from(ones).to_le_bytes());
        // Root.
        put(&mut b, root, &bytes_of_coord(t.origin));
        put(&mut b, root + 12, &bytes_of_coord(t.origin.map(|c| c + 7)));
        put(&mut b, root + 24, &(tiles as u32).to_le_bytes());
        put(&mut b, root + rl.off_background as usize, &t.background);
        let t0 = root + rl.size as usize;
        put(&mut b, t0, &coord_to_key(t.origin).to_le_bytes());
        put(&mut b, t0 + 8, &((upper - root) as i64).to_le_bytes());
        let t1 = t0 + rl.tile_size as usize;
        let tile_origin = [t.origin[0].wrapping_sub(4096), t.origin[1], t.origin[2]];
        put(&mut b, t1, &coord_to_key(tile_origin).to_le_bytes());
        put(&mut b, t1 + 16, &1u32.to_le_bytes());
        put(&mut b, t1 + rl.tile_off_value as usize, &t.tile);
        // Upper: the child, and an active tile in the next slot along z.
        let n = upper_offset(t.origin);
        let nt = n ^ 1;
        set_bit(&mut b, upper + ul.off_child_mask as usize, n);
        set_bit(&mut b, upper + INTERNAL_OFF_VALUE_MASK as usize, nt);
        put(
            &mut b,
            upper + ul.off_table as usize + n * ul.table_stride as usize,
            &((lower - upper) as i64).to_le_bytes(),
        );
        put(
            &mut b,
            upper + ul.off_table as usize + nt * ul.table_stride as usize,
            &t.tile,
        );
        // Lower: the child leaf and an (inactive) tile next to it.
        let n = lower_offset(t.origin);
        set_bit(&mut b, lower + ll.off_child_mask as usize, n);
        put(
            &mut b,
            lower + ll.off_table as usize + n * ll.table_stride as usize,
            &((leaf - lower) as i64).to_le_bytes(),
        );
        put(
            &mut b,
            lower + ll.off_table as usize + (n ^ 1) * ll.table_stride as usize,
            &t.tile,
        );
        // Leaf.
        put(&mut b, leaf, &bytes_of_coord(t.origin));
        b[leaf + 15] = t.leaf_flags;
        for (w, word) in t.mask.iter().enumerate() {
            put(&mut b, leaf + 16 + 8 * w, &word.to_le_bytes());
        }
        put(&mut b, leaf + 80, &t.leaf_tail);
        b
    }

    fn bytes_of_coord(c: Coord) -> Vec<u8> {
        c.iter().flat_map(|v| v.to_le_bytes()).collect()
    }
    fn set_bit(b: &mut [u8], off: usize, n: usize) {
        b[off + n / 8] |= 1 << (n % 8);
    }

    /// Leaf bytes after the 80-byte header for a plain leaf of `layout(t)`, with `values`
    /// (already encoded) written at the table.
    fn plain_tail(t: GridType, values: &[u8]) -> Vec<u8> {
        let lf = layout(t).unwrap().leaf;
        let mut tail = vec![0u8; lf.size as usize - 80];
        let at = lf.off_table as usize - 80;
        tail[at..at + values.len()].copy_from_slice(values);
        tail
    }

    fn leaf_ijk(origin: Coord, n: usize) -> Coord {
        [
            origin[0] + (n >> 6) as i32,
            origin[1] + ((n >> 3) & 7) as i32,
            origin[2] + (n & 7) as i32,
        ]
    }

    fn check_paths(g: &Grid<'_>, origin: Coord, bg: Value, tile: Value) {
        assert_eq!(g.value([origin[0] + 100_000, 0, 0]).unwrap(), bg);
        assert!(!g.is_active([origin[0] + 100_000, 0, 0]));
        // Root tile at x - 4096: active.
        let rt = [origin[0].wrapping_sub(4096), origin[1], origin[2]];
        assert_eq!(g.value(rt).unwrap(), tile);
        assert!(g.is_active(rt));
        // Upper tile: the neighbouring 128³ block along z (n ^ 1 flips the lowest z bit).
        let ut = [origin[0], origin[1], origin[2] ^ 128];
        assert_eq!(g.value(ut).unwrap(), tile);
        assert!(g.is_active(ut));
        // Lower tile: the neighbouring 8³ block along z (inactive).
        let lt = [origin[0], origin[1], origin[2] ^ 8];
        assert_eq!(g.value(lt).unwrap(), tile);
        assert!(!g.is_active(lt));
    }

    #[test]
    fn half_grid_values_and_tiles() {
        let halves: Vec<u16> = (0..512u16).map(|i| i.wrapping_mul(131) ^ 0x3c00).collect();
        let vals: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
        let t = Tiny {
            grid_type: GridType::Half,
            origin: [-8, 16, -4096],
            background: 0x3c00u16.to_le_bytes().to_vec(), // 1.0
            tile: 0xc000u16.to_le_bytes().to_vec(),       // -2.0
            leaf_tail: plain_tail(GridType::Half, &vals),
            leaf_flags: 0,
            mask: [0x5555_5555_5555_5555; 8],
        };
        let b = tiny_grid(&t);
        let g = Grid::parse(&b).unwrap();
        check_paths(&g, t.origin, Value::Float(1.0), Value::Float(-2.0));
        let mut acc = g.accessor();
        for (n, &h) in halves.iter().enumerate() {
            let ijk = leaf_ijk(t.origin, n);
            let want = Value::Float(half_to_f32(h));
            assert!(same_bits(g.value(ijk).unwrap(), want), "{n}");
            assert!(same_bits(acc.value(ijk).unwrap(), want));
            assert_eq!(g.is_active(ijk), n % 2 == 0);
        }
        let leaf = g.leaves().next().unwrap();
        assert_eq!(leaf.origin(), t.origin);
        assert_eq!(leaf.active_count(), 256);
    }

    /// The cheap header check accepts a good grid (whole or a 4 KiB prefix) and names each
    /// structural damage: magic, version, size, type, grid index, tree offsets.
    #[test]
    fn header_check_accepts_good_grids_and_names_damage() {
        let halves: Vec<u8> = (0..512u16).flat_map(|h| h.to_le_bytes()).collect();
        let t = Tiny {
            grid_type: GridType::Half,
            origin: [0, 0, 0],
            background: 0x3c00u16.to_le_bytes().to_vec(),
            tile: 0xc000u16.to_le_bytes().to_vec(),
            leaf_tail: plain_tail(GridType::Half, &halves),
            leaf_flags: 0,
            mask: [u64::MAX; 8],
        };
        let good = tiny_grid(&t);
        let len = good.len() as u64;
        assert_eq!(Grid::check_header(&good, len).unwrap(), len);
        let prefix = &good[..Grid::HEADER_PREFIX.min(good.len())];
        assert_eq!(Grid::check_header(prefix, len).unwrap(), len);
        let tree = GRID_SIZE as usize;
        type Damage = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(&str, Damage, &str)> = vec![
            ("magic", Box::new(|b| b[0] ^= 0xff), "magic"),
            (
                "version",
                Box::new(|b| put(b, 16, &Version::new(99, 0, 0).0.to_le_bytes())),
                "version",
            ),
            (
                "size",
                Box::new(|b| {
                    let n = b.len() as u64 * 2;
                    put(b, 32, &n.to_le_bytes())
                }),
                "grid",
            ),
            (
                "type",
                Box::new(|b| put(b, GRID_OFF_GRID_TYPE as usize, &999u32.to_le_bytes())),
                "unknown grid type 999",
            ),
            (
                "index",
                Box::new(|b| put(b, GRID_OFF_GRID_INDEX as usize, &5u32.to_le_bytes())),
                "grid index 5",
            ),
            (
                "root",
                Box::new(move |b| {
                    put(
                        b,
                        tree + TREE_OFF_NODE_OFFSET_LEAF as usize + 24,
                        &(1u64 << 40).to_le_bytes(),
                    )
                }),
                "root offset",
            ),
            (
                "leaves",
                Box::new(move |b| {
                    put(
                        b,
                        tree + TREE_OFF_NODE_OFFSET_LEAF as usize,
                        &(1u64 << 40).to_le_bytes(),
                    )
                }),
                "first leaf",
            ),
        ];
        for (name, damage, needle) in cases {
            let mut b = good.clone();
            damage(&mut b);
            let e = Grid::check_header(&b, len).expect_err(name).to_string();
            assert!(e.contains(needle), "{name}: {e}");
        }
        // Too short to hold the headers at all.
        assert!(Grid::check_header(&good[..100], len).is_err());
    }

    fn same_bits(a: Value, b: Value) -> bool {
        match (a, b) {
            (Value::Float(x), Value::Float(y)) => {
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
            }
            _ => a == b,
        }
    }

    #[test]
    fn half_conversion_is_exact() {
        assert_eq!(half_to_f32(0x0000), 0.0);
        assert_eq!(half_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(half_to_f32(0x3c00), 1.0);
        assert_eq!(half_to_f32(0xc000), -2.0);
        assert_eq!(half_to_f32(0x7bff), 65504.0);
        assert_eq!(half_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(half_to_f32(0x03ff), 1023.0 * 2f32.powi(-24));
        assert_eq!(half_to_f32(0x0400), 2f32.powi(-14));
        assert_eq!(half_to_f32(0x3555), 0.333_251_95);
        assert_eq!(half_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(half_to_f32(0xfc00), f32::NEG_INFINITY);
        assert!(half_to_f32(0x7e00).is_nan());
        // Every finite half: value = (-1)^s · 2^(e-15) · (1 + m/1024), or m · 2^-24.
        for h in 0..=u16::MAX {
            let (s, e, m) = (h >> 15, (h >> 10) & 31, h & 1023);
            if e == 31 {
                continue;
            }
            let mag = if e == 0 {
                f64::from(m) * 2f64.powi(-24)
            } else {
                2f64.powi(i32::from(e) - 15) * (1.0 + f64::from(m) / 1024.0)
            };
            let v = if s == 1 { -mag } else { mag };
            assert_eq!(f64::from(half_to_f32(h)), v, "{h:#06x}");
        }
    }

    #[test]
    fn other_value_types() {
        // (type, background, tile value, leaf value encoder, expected leaf value, bg, tile)
        type Case = (
            GridType,
            Vec<u8>,
            Vec<u8>,
            Box<dyn Fn(usize) -> Vec<u8>>,
            Box<dyn Fn(usize) -> Value>,
            Value,
            Value,
        );
        let cases: Vec<Case> = vec![
            (
                GridType::Double,
                2.5f64.to_le_bytes().into(),
                (-1f64).to_le_bytes().into(),
                Box::new(|n| (n as f64 * 0.1).to_le_bytes().into()),
                Box::new(|n| Value::Double(n as f64 * 0.1)),
                Value::Double(2.5),
                Value::Double(-1.0),
            ),
            (
                GridType::Int32,
                7i32.to_le_bytes().into(),
                (-9i32).to_le_bytes().into(),
                Box::new(|n| (n as i32 - 300).to_le_bytes().into()),
                Box::new(|n| Value::Int(n as i64 - 300)),
                Value::Int(7),
                Value::Int(-9),
            ),
            (
                GridType::Int16,
                7i16.to_le_bytes().into(),
                (-9i16).to_le_bytes().into(),
                Box::new(|n| (n as i16 - 300).to_le_bytes().into()),
                Box::new(|n| Value::Int(n as i64 - 300)),
                Value::Int(7),
                Value::Int(-9),
            ),
            (
                GridType::Int64,
                7i64.to_le_bytes().into(),
                (-9i64).to_le_bytes().into(),
                Box::new(|n| (n as i64 * -1_000_000_007).to_le_bytes().into()),
                Box::new(|n| Value::Int(n as i64 * -1_000_000_007)),
                Value::Int(7),
                Value::Int(-9),
            ),
            (
                GridType::UInt32,
                7u32.to_le_bytes().into(),
                u32::MAX.to_le_bytes().into(),
                Box::new(|n| (n as u32 * 3).to_le_bytes().into()),
                Box::new(|n| Value::Int(n as i64 * 3)),
                Value::Int(7),
                Value::Int(u32::MAX as i64),
            ),
            (
                GridType::UInt8,
                vec![7],
                vec![200],
                Box::new(|n| vec![n as u8]),
                Box::new(|n| Value::Int((n as u8) as i64)),
                Value::Int(7),
                Value::Int(200),
            ),
            (
                GridType::Vec3f,
                [1f32, 2., 3.]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                [4f32, 5., 6.]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                Box::new(|n| {
                    [n as f32, -(n as f32), 0.5]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect()
                }),
                Box::new(|n| Value::Vec3f([n as f32, -(n as f32), 0.5])),
                Value::Vec3f([1., 2., 3.]),
                Value::Vec3f([4., 5., 6.]),
            ),
            (
                GridType::Vec3d,
                [1f64, 2., 3.]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                [4f64, 5., 6.]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                Box::new(|n| {
                    [n as f64, 1.0, -2.0]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect()
                }),
                Box::new(|n| Value::Vec3d([n as f64, 1.0, -2.0])),
                Value::Vec3d([1., 2., 3.]),
                Value::Vec3d([4., 5., 6.]),
            ),
            (
                GridType::Vec4f,
                [1f32, 2., 3., 4.]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                [4f32, 5., 6., 7.]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect(),
                Box::new(|n| {
                    [n as f32, 1.0, -2.0, 3.0]
                        .iter()
                        .flat_map(|v| v.to_le_bytes())
                        .collect()
                }),
                Box::new(|n| Value::Vec4f([n as f32, 1.0, -2.0, 3.0])),
                Value::Vec4f([1., 2., 3., 4.]),
                Value::Vec4f([4., 5., 6., 7.]),
            ),
            (
                GridType::Rgba8,
                vec![1, 2, 3, 4],
                vec![9, 8, 7, 6],
                Box::new(|n| vec![n as u8, 1, 2, 3]),
                Box::new(|n| Value::Rgba8([n as u8, 1, 2, 3])),
                Value::Rgba8([1, 2, 3, 4]),
                Value::Rgba8([9, 8, 7, 6]),
            ),
        ];
        for (t, bg, tile, enc, dec, bgv, tilev) in cases {
            let vals: Vec<u8> = (0..512).flat_map(&enc).collect();
            let tiny = Tiny {
                grid_type: t,
                origin: [4088, -4096, 120],
                background: bg,
                tile,
                leaf_tail: plain_tail(t, &vals),
                leaf_flags: 0,
                mask: [u64::MAX, 0, 1, 2, 3, 4, 5, 6],
            };
            let b = tiny_grid(&tiny);
            let g = Grid::parse(&b).unwrap_or_else(|e| panic!("{t:?}: {e}"));
            check_paths(&g, tiny.origin, bgv, tilev);
            assert_eq!(g.background().unwrap(), bgv);
            for n in 0..512 {
                assert_eq!(
                    g.value(leaf_ijk(tiny.origin, n)).unwrap(),
                    dec(n),
                    "{t:?} voxel {n}"
                );
            }
            let leaf = g.leaves().next().unwrap();
            assert_eq!(leaf.value(3).unwrap(), dec(3));
            assert_eq!(
                leaf.values_f32().is_ok(),
                dec(0).as_f32().is_some(),
                "{t:?}"
            );
        }
    }

    #[test]
    fn bool_and_mask_grids() {
        // Boolean: values in a second mask at byte 80 of the leaf.
        let mut tail = vec![0u8; 80];
        tail[0] = 0b1010_0101;
        let t = Tiny {
            grid_type: GridType::Boolean,
            origin: [0, 0, 0],
            background: vec![0],
            tile: vec![1],
            leaf_tail: tail,
            leaf_flags: 0,
            mask: [0b11, 0, 0, 0, 0, 0, 0, 0],
        };
        let b = tiny_grid(&t);
        let g = Grid::parse(&b).unwrap();
        check_paths(&g, t.origin, Value::Bool(false), Value::Bool(true));
        let want = [true, false, true, false, false, true, false, true];
        for (n, w) in want.iter().enumerate() {
            assert_eq!(g.value(leaf_ijk(t.origin, n)).unwrap(), Value::Bool(*w));
        }
        assert!(g.is_active([0, 0, 1]) && !g.is_active([0, 0, 2]));
        assert!(g.root_stats().is_none());
        // Mask: the value is the active state.
        let t = Tiny {
            grid_type: GridType::Mask,
            leaf_tail: vec![0u8; 16],
            ..t
        };
        let b = tiny_grid(&t);
        let g = Grid::parse(&b).unwrap();
        assert_eq!(g.value([0, 0, 1]).unwrap(), Value::Bool(true));
        assert_eq!(g.value([0, 0, 2]).unwrap(), Value::Bool(false));
    }

    #[test]
    fn fpn_every_bit_width() {
        for log2 in 0..=4u8 {
            let bits = 1u32 << log2;
            let codes: Vec<u32> = (0..512u32)
                .map(|n| (n.wrapping_mul(2_654_435_761) >> 7) & ((1u64 << bits) - 1) as u32)
                .collect();
            let mut packed = vec![0u8; 64 * bits as usize];
            for (n, c) in codes.iter().enumerate() {
                let bit = n * bits as usize;
                if bits == 16 {
                    packed[2 * n..2 * n + 2].copy_from_slice(&(*c as u16).to_le_bytes());
                } else {
                    packed[bit / 8] |= (*c as u8) << (bit % 8);
                }
            }
            let (min, q) = (-1.25f32, 0.0371f32);
            let mut tail = Vec::new();
            tail.extend_from_slice(&min.to_le_bytes());
            tail.extend_from_slice(&q.to_le_bytes());
            tail.extend_from_slice(&[0u8; 8]);
            tail.extend_from_slice(&packed);
            let t = Tiny {
                grid_type: GridType::FpN,
                origin: [-4096, -8, 4096],
                background: 0.5f32.to_le_bytes().to_vec(),
                tile: 9f32.to_le_bytes().to_vec(),
                leaf_tail: tail,
                leaf_flags: log2 << 5 | 0x12,
                mask: [1; 8],
            };
            let b = tiny_grid(&t);
            let g = Grid::parse(&b).unwrap_or_else(|e| panic!("{bits} bits: {e}"));
            check_paths(&g, t.origin, Value::Float(0.5), Value::Float(9.0));
            for (n, &code) in codes.iter().enumerate() {
                let want = code as f32 * q + min;
                assert_eq!(
                    g.value(leaf_ijk(t.origin, n)).unwrap(),
                    Value::Float(want),
                    "{bits} bits voxel {n}"
                );
            }
        }
        // Bit-width code 5 (32 bits) is not one NanoVDB decodes: rejected at parse.
        let t = Tiny {
            grid_type: GridType::FpN,
            origin: [0; 3],
            background: vec![0; 4],
            tile: vec![0; 4],
            leaf_tail: vec![0; 16 + 64 * 32],
            leaf_flags: 5 << 5,
            mask: [0; 8],
        };
        let e = Grid::parse(&tiny_grid(&t)).unwrap_err().to_string();
        assert!(e.contains("leaf 0") && e.contains("bit-width"), "{e}");
    }

    #[test]
    fn index_grids_parse_but_values_are_unsupported() {
        let t = Tiny {
            grid_type: GridType::OnIndex,
            origin: [0; 3],
            background: vec![0; 8],
            tile: vec![0; 8],
            leaf_tail: vec![0; 16],
            leaf_flags: 0,
            mask: [0; 8],
        };
        let b = tiny_grid(&t);
        let g = Grid::parse(&b).unwrap();
        let e = g.value([0, 0, 0]).unwrap_err();
        assert!(
            matches!(
                e,
                FormatError::Unsupported {
                    grid_type: GridType::OnIndex,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("OnIndex"));
        assert!(g.background().is_err());
        assert!(!g.is_active([0, 0, 0]));
    }

    #[test]
    fn long_grid_name_from_blind_data() {
        let t = Tiny {
            grid_type: GridType::Float,
            origin: [0; 3],
            background: 0f32.to_le_bytes().to_vec(),
            tile: 0f32.to_le_bytes().to_vec(),
            leaf_tail: plain_tail(GridType::Float, &[]),
            leaf_flags: 0,
            mask: [0; 8],
        };
        let mut b = tiny_grid(&t);
        let long: String = (0..300)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect();
        let meta = b.len();
        let data = meta + BLIND_META_SIZE as usize;
        b.resize(data + (long.len() + 1).next_multiple_of(32), 0);
        let size = b.len() as u64;
        put(&mut b, GRID_OFF_GRID_SIZE as usize, &size.to_le_bytes());
        put(
            &mut b,
            GRID_OFF_FLAGS as usize,
            &(GRID_FLAG_HAS_LONG_GRID_NAME | GRID_FLAG_IS_BREADTH_FIRST).to_le_bytes(),
        );
        put(
            &mut b,
            GRID_OFF_BLIND_METADATA_OFFSET as usize,
            &(meta as i64).to_le_bytes(),
        );
        put(
            &mut b,
            GRID_OFF_BLIND_METADATA_COUNT as usize,
            &1u32.to_le_bytes(),
        );
        put(&mut b, meta, &((data - meta) as i64).to_le_bytes());
        put(&mut b, meta + 8, &(long.len() as u64 + 1).to_le_bytes());
        put(&mut b, meta + 16, &1u32.to_le_bytes());
        put(&mut b, meta + 24, &BLIND_CLASS_GRID_NAME.to_le_bytes());
        put(&mut b, data, long.as_bytes());
        let g = Grid::parse(&b).unwrap();
        assert_eq!(g.name(), long);
        // Its data offset pointing outside the grid is an error naming the entry.
        put(&mut b, meta, &(1i64 << 40).to_le_bytes());
        let e = Grid::parse(&b).unwrap_err().to_string();
        assert!(e.contains("blind metadata 0 (grid name)"), "{e}");
    }

    #[test]
    fn multi_grid_buffers() {
        let t = Tiny {
            grid_type: GridType::Float,
            origin: [0; 3],
            background: 1f32.to_le_bytes().to_vec(),
            tile: 2f32.to_le_bytes().to_vec(),
            leaf_tail: plain_tail(GridType::Float, &[]),
            leaf_flags: 0,
            mask: [0; 8],
        };
        let one = tiny_grid(&t);
        let mut buf = Vec::new();
        for i in 0..3u32 {
            let mut g = one.clone();
            g[24..28].copy_from_slice(&i.to_le_bytes());
            g[28..32].copy_from_slice(&3u32.to_le_bytes());
            g[40] = b'a' + i as u8;
            buf.extend_from_slice(&g);
        }
        let grids = Grid::parse_all(&buf).unwrap();
        assert_eq!(
            grids
                .iter()
                .map(|g| g.name().to_owned())
                .collect::<Vec<_>>(),
            ["ainy", "biny", "ciny"]
        );
        assert_eq!(grids[2].as_bytes().len(), one.len());
        // A missing third grid, a wrong index: errors that say which grid.
        let e = Grid::parse_all(&buf[..2 * one.len() + 100]).unwrap_err();
        assert!(
            e.to_string().contains(&format!("byte {}", 2 * one.len())),
            "{e}"
        );
        let mut bad = buf.clone();
        bad[one.len() + 24] = 2;
        assert!(
            Grid::parse_all(&bad)
                .unwrap_err()
                .to_string()
                .contains("grid 1")
        );
    }
}

#[cfg(test)]
mod corpus {
    //! Malformed inputs: every one must give `Err` (or, for harmless flips, a grid whose
    //! reads stay in bounds), never a panic.
    use super::*;
    use crate::format::file::read_nvdb;
    use crate::format::layout::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/nanovdb")
            .join(name);
        read_nvdb(&path).unwrap().remove(0).bytes
    }

    /// Reads through everything a parsed grid offers.
    fn exercise(g: &Grid<'_>) {
        let _ = g.background();
        let _ = g.root_stats();
        let mut acc = g.accessor();
        let [lo, hi] = g.index_bbox();
        for i in 0..16i32 {
            let ijk = [
                lo[0].wrapping_add(i.wrapping_mul(7)),
                lo[1].wrapping_add(i.wrapping_mul(3)),
                hi[2].wrapping_sub(i),
            ];
            let _ = g.value(ijk);
            let _ = acc.value(ijk);
            let _ = g.is_active(ijk);
        }
        // The first and the last leaf (debug builds decode slowly; the sweep runs thousands).
        let n = g.leaves().len();
        for leaf in g
            .leaves()
            .take(1)
            .chain(g.leaves().skip(n.saturating_sub(1)))
        {
            let _ = leaf.values_f32();
            let _ = leaf.value(511);
        }
    }

    struct Bounds {
        marks: Vec<usize>,
    }

    /// Offsets of every structure boundary of a valid grid.
    fn boundaries(g: &Grid<'_>) -> Bounds {
        let l = g.layout();
        let mut marks = vec![0, 8, 16, 20, 32, 40, 296, 632, 640, 671, 672, 700, 735, 736];
        marks.push(g.root);
        marks.push(g.root + l.root.size as usize);
        for t in 0..=g.tile_count as usize {
            marks.push(g.root + l.root.size as usize + t * l.root.tile_size as usize);
        }
        let b = g.as_bytes();
        let tree = GRID_SIZE as usize;
        let counts = g.node_counts();
        for (idx, n, size) in [
            (2, counts.upper, l.upper.size),
            (1, counts.lower, l.lower.size),
        ] {
            let first = tree + u64_at(b, tree + 8 * idx) as usize;
            for i in 0..=n as usize {
                marks.push(first + i * size as usize);
                marks.push(first + i * size as usize + 40);
            }
        }
        for i in 0..counts.leaves as usize {
            if let Some(off) = g.leaf_at_index(i) {
                marks.extend([off, off + 16, off + 80, off + 96]);
            }
        }
        marks.push(b.len());
        marks.sort();
        marks.dedup();
        Bounds { marks }
    }

    fn bases() -> Vec<(&'static str, Vec<u8>)> {
        vec![
            ("sphere", fixture("sphere_ls.nvdb")),
            ("fog", fixture("fog_zip.nvdb")),
            ("fpn", fixture("sphere_fpn.nvdb")),
            ("velocity", fixture("velocity_zip.nvdb")),
        ]
    }

    #[test]
    fn truncation_everywhere_is_an_error() {
        for (name, b) in bases() {
            let g = Grid::parse(&b).unwrap();
            let mut cuts = boundaries(&g).marks;
            cuts.extend((0..64).map(|i| b.len() * i / 64));
            for cut in cuts.into_iter().filter(|&c| c < b.len()) {
                // The buffer ends early...
                assert!(Grid::parse(&b[..cut]).is_err(), "{name}: cut at {cut}");
                // ...and also when the header agrees with the shorter length.
                let mut t = b[..cut].to_vec();
                if t.len() >= 40 {
                    t[32..40].copy_from_slice(&(cut as u64).to_le_bytes());
                }
                assert!(
                    Grid::parse(&t).is_err(),
                    "{name}: cut at {cut} with grid size patched"
                );
            }
        }
    }

    #[test]
    fn bad_header_fields() {
        let b = fixture("sphere_ls.nvdb");
        let patch = |off: usize, v: &[u8]| {
            let mut c = b.clone();
            c[off..off + v.len()].copy_from_slice(v);
            c
        };
        let err = |c: &[u8]| Grid::parse(c).unwrap_err().to_string();
        assert!(err(&patch(0, b"NanoVDB2")).contains("segmented .nvdb file"));
        assert!(err(&patch(0, b"OpenVDB!")).contains("bad magic"));
        for (maj, min) in [(31, 9), (32, 2), (32, 10), (33, 0)] {
            let e = err(&patch(16, &Version::new(maj, min, 0).0.to_le_bytes()));
            assert!(e.contains("unsupported NanoVDB version"), "{e}");
        }
        for gs in [0u64, 735, b.len() as u64 + 1, u64::MAX] {
            assert!(
                Grid::parse(&patch(32, &gs.to_le_bytes())).is_err(),
                "grid size {gs}"
            );
        }
        assert!(err(&patch(636, &99u32.to_le_bytes())).contains("unknown grid type 99"));
        assert!(err(&patch(636, &0u32.to_le_bytes())).contains("no defined layout"));
        // A wrong value type changes every node size: caught structurally.
        assert!(Grid::parse(&patch(636, &(GridType::Double as u32).to_le_bytes())).is_err());
        assert!(Grid::parse(&patch(28, &0u32.to_le_bytes())).is_err()); // grid count 0
        assert!(Grid::parse(&patch(24, &5u32.to_le_bytes())).is_err()); // index >= count
        // Blind metadata pointing outside.
        let mut c = patch(648, &1u32.to_le_bytes());
        c[640..648].copy_from_slice(&(b.len() as i64 - 100).to_le_bytes());
        assert!(err(&c).contains("blind metadata"));
        // Unknown classes are metadata only.
        let g = patch(632, &77u32.to_le_bytes());
        let g = Grid::parse(&g).unwrap();
        assert_eq!(
            (g.grid_class(), g.header().grid_class_raw),
            (GridClass::Unknown, 77)
        );
    }

    #[test]
    fn offsets_pointing_outside_and_absurd_counts() {
        let b = fixture("sphere_ls.nvdb");
        let g = Grid::parse(&b).unwrap();
        let tree = GRID_SIZE as usize;
        let (root, l) = (g.root, *g.layout());
        let first_tile = root + l.root.size as usize;
        let upper = tree + u64_at(&b, tree + 16) as usize;
        let child_slot = {
            // The first child entry of the upper node.
            let mut n = 0;
            while !bit_at(&b, upper + l.upper.off_child_mask as usize, n) {
                n += 1;
            }
            upper + l.upper.off_table as usize + n * l.upper.table_stride as usize
        };
        let cases: Vec<(&str, usize, Vec<u8>, &str)> = vec![
            (
                "root offset huge",
                tree + 24,
                u64::MAX.to_le_bytes().into(),
                "root offset",
            ),
            (
                "root offset past end",
                tree + 24,
                (b.len() as u64).to_le_bytes().into(),
                "root offset",
            ),
            (
                "root offset misaligned",
                tree + 24,
                (root as u64 - tree as u64 + 8).to_le_bytes().into(),
                "aligned",
            ),
            (
                "leaf offset huge",
                tree,
                (1u64 << 40).to_le_bytes().into(),
                "first leaf",
            ),
            (
                "upper offset misaligned",
                tree + 16,
                (upper as u64 - tree as u64 + 4).to_le_bytes().into(),
                "upper node",
            ),
            (
                "leaf count huge",
                tree + 32,
                u32::MAX.to_le_bytes().into(),
                "leafs",
            ),
            (
                "lower count huge",
                tree + 36,
                u32::MAX.to_le_bytes().into(),
                "lower nodes",
            ),
            (
                "upper count 0",
                tree + 40,
                0u32.to_le_bytes().into(),
                "upper nodes",
            ),
            (
                "leaf count -1",
                tree + 32,
                (g.node_counts().leaves - 1).to_le_bytes().into(),
                "leaf",
            ),
            (
                "table size huge",
                root + 24,
                u32::MAX.to_le_bytes().into(),
                "root table",
            ),
            (
                "tile child outside",
                first_tile + 8,
                (1i64 << 40).to_le_bytes().into(),
                "root tile 0",
            ),
            (
                "tile child negative",
                first_tile + 8,
                (-(root as i64) - 1).to_le_bytes().into(),
                "root tile 0",
            ),
            (
                "tile child into root",
                first_tile + 8,
                32i64.to_le_bytes().into(),
                "upper nodes",
            ),
            (
                "upper child outside",
                child_slot,
                (1i64 << 33).to_le_bytes().into(),
                "upper node 0",
            ),
            (
                "upper child misaligned",
                child_slot,
                (l.upper.size as i64 + 32).to_le_bytes().into(),
                "lower nodes",
            ),
        ];
        for (what, off, v, needle) in cases {
            let mut c = b.clone();
            c[off..off + v.len()].copy_from_slice(&v);
            let e = Grid::parse(&c)
                .err()
                .unwrap_or_else(|| panic!("{what}: accepted"))
                .to_string();
            assert!(e.contains(needle), "{what}: {e}");
        }
        // A stray child bit: the table entry there is a value, not a child offset.
        let mut c = b.clone();
        let mask = upper + l.upper.off_child_mask as usize;
        let n = (0..32768).find(|&n| !bit_at(&b, mask, n)).unwrap();
        c[mask + n / 8] |= 1 << (n % 8);
        let e = Grid::parse(&c).unwrap_err().to_string();
        assert!(
            e.contains("upper node 0") && e.contains(&format!("child {n}")),
            "{e}"
        );
        // A leaf whose stored origin disagrees with its place in the tree.
        let mut c = b.clone();
        let leaf = g.leaf_at_index(3).unwrap();
        c[leaf] ^= 0x10;
        assert!(Grid::parse(&c).unwrap_err().to_string().contains("leaf 3"));
    }

    #[test]
    fn byte_flip_sweep() {
        // The fog grid (6.8 MB, 4 ms per parse in debug builds) is left to the other tests.
        for (name, b) in bases().into_iter().filter(|(n, _)| *n != "fog") {
            let g = Grid::parse(&b).unwrap();
            let root_end = g.root
                + g.layout().root.size as usize
                + g.tile_count as usize * g.layout().root.tile_size as usize;
            let structural: Vec<std::ops::Range<usize>> = vec![
                0..8,                                             // magic
                32..40,                                           // grid size
                GRID_SIZE as usize + 24..GRID_SIZE as usize + 28, // root offset (low bytes)
                GRID_SIZE as usize + 32..GRID_SIZE as usize + 44, // node counts
            ];
            let mut offsets: Vec<usize> = (0..(root_end + 64).min(b.len())).collect();
            offsets.extend((root_end..b.len()).step_by(b.len() / 500 + 1));
            let mut c = b.clone();
            for off in offsets {
                for mask in [0x01u8, 0x10, 0x80, 0xff] {
                    c[off] ^= mask;
                    // "NanoVDB0" with the last bit flipped is "NanoVDB1": still a grid.
                    let benign = off == 7 && mask == 0x01;
                    match Grid::parse(&c) {
                        Ok(g) => {
                            assert!(
                                benign || !structural.iter().any(|r| r.contains(&off)),
                                "{name}: flip {mask:#x} at byte {off} accepted"
                            );
                            exercise(&g);
                        }
                        Err(e) => assert!(!e.to_string().is_empty()),
                    }
                    c[off] ^= mask;
                }
            }
        }
    }

    #[test]
    fn random_mutations_never_panic() {
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut rnd = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for (_, b) in bases() {
            let len = b.len();
            let mut c = b.clone();
            for _ in 0..300 {
                let mut changed = Vec::new();
                for _ in 0..1 + rnd() % 8 {
                    let off = if rnd() % 2 == 0 {
                        (rnd() % 2048) as usize % len
                    } else {
                        (rnd() as usize) % len
                    };
                    changed.push((off, c[off]));
                    c[off] = rnd() as u8;
                }
                if let Ok(g) = Grid::parse(&c) {
                    exercise(&g);
                }
                let _ = Grid::parse_all(&c);
                for (off, v) in changed.into_iter().rev() {
                    c[off] = v;
                }
            }
        }
    }
}
