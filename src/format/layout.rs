//! Byte layout of a NanoVDB grid buffer (ABI major version 32, minors 3 through 9).
//!
//! Every structure in a NanoVDB buffer is 32-byte aligned and little-endian; references are
//! signed byte offsets relative to the structure that holds them:
//!
//! ```text
//! GridData (672 B) | TreeData (64 B) | RootData + tiles | upper nodes | lower nodes | leaves | blind data
//! ```
//!
//! - `TreeData` sits right after `GridData`; its node offsets are relative to the tree.
//! - A root tile's child offset is relative to the start of `RootData`.
//! - An internal node's child offset (in its table) is relative to the start of that node.
//! - Blind-metadata offsets are relative to the grid, blind-data offsets to their metadata entry.
//!
//! The numbers here were read from NanoVDB's `NanoVDB.h` (struct layouts) and `PNanoVDB.h`
//! (its per-type offset table) and are checked against the latter in this module's tests.
//! Versions 32.3 to 32.9 share one layout for all value types up to `Vec4d`; what differs
//! between versions is noted where it matters (magic numbers, checksum semantics, index leaves).

use super::types::GridType;

/// Rounds `n` up to a multiple of `a` (a power of two). Only used on small constants.
const fn align_up(n: u32, a: u32) -> u32 {
    (n + a - 1) & !(a - 1)
}

// ------------------------------------------------------------------------------------------
// Magic numbers and versions
// ------------------------------------------------------------------------------------------

/// "NanoVDB0" (little-endian u64): the only magic before 32.6 for grids and files alike; still
/// written by NanoVDB versions built without `NANOVDB_USE_NEW_MAGIC_NUMBERS`.
pub const MAGIC_NUMB: u64 = 0x3042_4456_6f6e_614e;
/// "NanoVDB1": the grid-buffer magic since 32.7 (32.6 wrote it into `mData2` instead).
pub const MAGIC_GRID: u64 = 0x3142_4456_6f6e_614e;
/// "NanoVDB2": the segmented-file header magic since 32.7.
pub const MAGIC_FILE: u64 = 0x3242_4456_6f6e_614e;
/// The eight bytes of [`MAGIC_NUMB`] as they appear in a buffer.
pub const MAGIC_NUMB_BYTES: [u8; 8] = *b"NanoVDB0";
/// The eight bytes of [`MAGIC_GRID`] as they appear in a buffer.
pub const MAGIC_GRID_BYTES: [u8; 8] = *b"NanoVDB1";
/// The eight bytes of [`MAGIC_FILE`] as they appear in a buffer.
pub const MAGIC_FILE_BYTES: [u8; 8] = *b"NanoVDB2";

/// The ABI (major) version every layout in this module describes.
pub const MAJOR_VERSION: u32 = 32;
/// Oldest minor version whose buffers this crate reads.
pub const MIN_MINOR_VERSION: u32 = 3;
/// Newest minor version whose buffers this crate reads.
pub const MAX_MINOR_VERSION: u32 = 9;

/// Every structure in a grid buffer starts at a multiple of this many bytes.
pub const DATA_ALIGNMENT: u32 = 32;

// ------------------------------------------------------------------------------------------
// GridData (672 bytes, at offset 0 of every grid)
// ------------------------------------------------------------------------------------------

/// Size of `GridData`, the grid header.
pub const GRID_SIZE: u32 = 672;
/// u64 magic ([`MAGIC_NUMB`] or [`MAGIC_GRID`]).
pub const GRID_OFF_MAGIC: u32 = 0;
/// u64 checksum; since 32.6 two u32 halves (head CRC, tail CRC); all ones = disabled.
pub const GRID_OFF_CHECKSUM: u32 = 8;
/// u32 packed version (`major << 21 | minor << 10 | patch`).
pub const GRID_OFF_VERSION: u32 = 16;
/// u32 grid flags ([`GRID_FLAG_HAS_LONG_GRID_NAME`] ...).
pub const GRID_OFF_FLAGS: u32 = 20;
/// u32 index of this grid among the grids of one buffer.
pub const GRID_OFF_GRID_INDEX: u32 = 24;
/// u32 number of grids in the buffer.
pub const GRID_OFF_GRID_COUNT: u32 = 28;
/// u64 byte size of this grid including its blind data.
pub const GRID_OFF_GRID_SIZE: u32 = 32;
/// 256-byte NUL-terminated name.
pub const GRID_OFF_GRID_NAME: u32 = 40;
/// Capacity of the name field (255 characters plus NUL).
pub const GRID_NAME_SIZE: u32 = 256;
/// `Map` (264 bytes), see the `MAP_OFF_*` constants.
pub const GRID_OFF_MAP: u32 = 296;
/// 6 x f64: world-space bounding box (min xyz, max xyz).
pub const GRID_OFF_WORLD_BBOX: u32 = 560;
/// 3 x f64: voxel size in world units.
pub const GRID_OFF_VOXEL_SIZE: u32 = 608;
/// u32 `GridClass`.
pub const GRID_OFF_GRID_CLASS: u32 = 632;
/// u32 `GridType`.
pub const GRID_OFF_GRID_TYPE: u32 = 636;
/// i64 offset from the grid to its first `GridBlindMetaData`.
pub const GRID_OFF_BLIND_METADATA_OFFSET: u32 = 640;
/// u32 number of `GridBlindMetaData` entries.
pub const GRID_OFF_BLIND_METADATA_COUNT: u32 = 648;
/// u32 padding (zero).
pub const GRID_OFF_DATA0: u32 = 652;
/// u64: value count of index grids (32.5+), otherwise zero.
pub const GRID_OFF_DATA1: u32 = 656;
/// u64: 32.6 wrote [`MAGIC_GRID`] here (with [`MAGIC_NUMB`] in the magic field); else zero.
pub const GRID_OFF_DATA2: u32 = 664;

/// Grid flag: the name is longer than 255 bytes and stored in blind data.
pub const GRID_FLAG_HAS_LONG_GRID_NAME: u32 = 1 << 0;
/// Grid flag: bounding boxes are computed.
pub const GRID_FLAG_HAS_BBOX: u32 = 1 << 1;
/// Grid flag: min/max statistics are computed.
pub const GRID_FLAG_HAS_MIN_MAX: u32 = 1 << 2;
/// Grid flag: averages are computed.
pub const GRID_FLAG_HAS_AVERAGE: u32 = 1 << 3;
/// Grid flag: standard deviations are computed.
pub const GRID_FLAG_HAS_STD_DEVIATION: u32 = 1 << 4;
/// Grid flag: nodes of each level are stored breadth-first (always set by NanoVDB builders).
pub const GRID_FLAG_IS_BREADTH_FIRST: u32 = 1 << 5;

// ------------------------------------------------------------------------------------------
// Map (264 bytes at GRID_OFF_MAP). Matrices are 3x3 row-major: world = mat * index + vec.
// ------------------------------------------------------------------------------------------

/// Size of `Map`.
pub const MAP_SIZE: u32 = 264;
/// 9 x f32 index→world matrix.
pub const MAP_OFF_MATF: u32 = 0;
/// 9 x f32 world→index matrix.
pub const MAP_OFF_INVMATF: u32 = 36;
/// 3 x f32 translation.
pub const MAP_OFF_VECF: u32 = 72;
/// f32 taper (unused, 1).
pub const MAP_OFF_TAPERF: u32 = 84;
/// 9 x f64 index→world matrix.
pub const MAP_OFF_MATD: u32 = 88;
/// 9 x f64 world→index matrix.
pub const MAP_OFF_INVMATD: u32 = 160;
/// 3 x f64 translation.
pub const MAP_OFF_VECD: u32 = 232;
/// f64 taper (unused, 1).
pub const MAP_OFF_TAPERD: u32 = 256;

// ------------------------------------------------------------------------------------------
// GridBlindMetaData (288 bytes each)
// ------------------------------------------------------------------------------------------

/// Size of one `GridBlindMetaData` entry.
pub const BLIND_META_SIZE: u32 = 288;
/// i64 offset from this metadata entry to its data.
pub const BLIND_META_OFF_DATA_OFFSET: u32 = 0;
/// u64 number of values (elements).
pub const BLIND_META_OFF_VALUE_COUNT: u32 = 8;
/// u32: byte size of one value since 32.7 (32.3–32.6: flags).
pub const BLIND_META_OFF_VALUE_SIZE: u32 = 16;
/// u32 semantic.
pub const BLIND_META_OFF_SEMANTIC: u32 = 20;
/// u32 data class ([`BLIND_CLASS_GRID_NAME`] ...).
pub const BLIND_META_OFF_DATA_CLASS: u32 = 24;
/// u32 `GridType` of the values.
pub const BLIND_META_OFF_DATA_TYPE: u32 = 28;
/// 256-byte name.
pub const BLIND_META_OFF_NAME: u32 = 32;
/// Blind data class of the long grid name (a NUL-terminated char array).
pub const BLIND_CLASS_GRID_NAME: u32 = 3;

// ------------------------------------------------------------------------------------------
// TreeData (64 bytes, right after GridData)
// ------------------------------------------------------------------------------------------

/// Size of `TreeData`.
pub const TREE_SIZE: u32 = 64;
/// u64 offset from the tree to the first leaf (0 when there are none).
pub const TREE_OFF_NODE_OFFSET_LEAF: u32 = 0;
/// u64 offset from the tree to the first lower node (0 when there are none).
pub const TREE_OFF_NODE_OFFSET_LOWER: u32 = 8;
/// u64 offset from the tree to the first upper node (0 when there are none).
pub const TREE_OFF_NODE_OFFSET_UPPER: u32 = 16;
/// u64 offset from the tree to the root.
pub const TREE_OFF_NODE_OFFSET_ROOT: u32 = 24;
/// u32 number of leaves.
pub const TREE_OFF_NODE_COUNT_LEAF: u32 = 32;
/// u32 number of lower (16³) internal nodes.
pub const TREE_OFF_NODE_COUNT_LOWER: u32 = 36;
/// u32 number of upper (32³) internal nodes.
pub const TREE_OFF_NODE_COUNT_UPPER: u32 = 40;
/// u32 number of active tiles in lower nodes (PNanoVDB 32.3/32.4 misnamed it "leaf").
pub const TREE_OFF_TILE_COUNT_LOWER: u32 = 44;
/// u32 number of active tiles in upper nodes.
pub const TREE_OFF_TILE_COUNT_UPPER: u32 = 48;
/// u32 number of active tiles in the root.
pub const TREE_OFF_TILE_COUNT_ROOT: u32 = 52;
/// u64 number of active values, counting every voxel of an active tile.
pub const TREE_OFF_VOXEL_COUNT: u32 = 56;

// ------------------------------------------------------------------------------------------
// Shared node fields
// ------------------------------------------------------------------------------------------

/// Root and internal nodes: 3 x i32 index bbox min.
pub const NODE_OFF_BBOX_MIN: u32 = 0;
/// Root and internal nodes: 3 x i32 index bbox max (inclusive).
pub const NODE_OFF_BBOX_MAX: u32 = 12;
/// Root: u32 number of tiles following `RootData`.
pub const ROOT_OFF_TABLE_SIZE: u32 = 24;
/// Internal nodes: u64 flags.
pub const INTERNAL_OFF_FLAGS: u32 = 24;
/// Internal nodes: value (active) mask.
pub const INTERNAL_OFF_VALUE_MASK: u32 = 32;

/// Root tile: u64 key ([`coord_to_key`]).
pub const ROOT_TILE_OFF_KEY: u32 = 0;
/// Root tile: i64 child offset relative to `RootData` (0 = a value tile).
pub const ROOT_TILE_OFF_CHILD: u32 = 8;
/// Root tile: u32 active state of a value tile.
pub const ROOT_TILE_OFF_STATE: u32 = 16;

/// Leaf: 3 x i32 min corner of the active voxels' bbox; the leaf origin is this with the
/// low three bits of each component cleared (NanoVDB's `LeafNode::origin`).
pub const LEAF_OFF_BBOX_MIN: u32 = 0;
/// Leaf: 3 x u8 bbox extent of the active voxels.
pub const LEAF_OFF_BBOX_DIF: u32 = 12;
/// Leaf: u8 flags (bit 0 skip render, bit 1 has bbox, bit 4 has stats, bits 5..8 FpN log2
/// bit width).
pub const LEAF_OFF_FLAGS: u32 = 15;
/// Leaf: 512-bit value (active) mask.
pub const LEAF_OFF_VALUE_MASK: u32 = 16;
/// Quantized leaves (Fp4/Fp8/Fp16/FpN): f32 minimum of all values.
pub const LEAF_FP_OFF_MINIMUM: u32 = 80;
/// Quantized leaves: f32 quantum (`(max - min) / (2^bits - 1)`).
pub const LEAF_FP_OFF_QUANTUM: u32 = 84;
/// Quantized leaves: 4 x u16 quantized min, max, average, std deviation.
pub const LEAF_FP_OFF_STATS: u32 = 88;
/// Quantized leaves: start of the code array.
pub const LEAF_FP_OFF_CODES: u32 = 96;
/// Size of an FpN leaf without its codes; the codes take `64 * bit_width` bytes.
pub const LEAF_FPN_BASE_SIZE: u32 = 96;

/// log2 of the upper internal node's dimension (32³ children).
pub const UPPER_LOG2DIM: u32 = 5;
/// log2 of the lower internal node's dimension (16³ children).
pub const LOWER_LOG2DIM: u32 = 4;
/// log2 of the leaf dimension (8³ voxels).
pub const LEAF_LOG2DIM: u32 = 3;
/// Voxels spanned along one axis by a leaf, lower and upper node: 3, 7, 12 bits.
pub const LEAF_TOTAL: u32 = LEAF_LOG2DIM;
/// Bits of a coordinate resolved below an upper node's children (lower + leaf).
pub const LOWER_TOTAL: u32 = LOWER_LOG2DIM + LEAF_TOTAL;
/// Bits of a coordinate resolved below the root (upper + lower + leaf): 12.
pub const UPPER_TOTAL: u32 = UPPER_LOG2DIM + LOWER_TOTAL;

/// NanoVDB's `RootData::CoordToKey` (single 64-bit key): each coordinate is reinterpreted as
/// u32, shifted right by 12, and packed as x:21 | y:21 | z:21 bits. Negative coordinates map
/// to large keys; that is how NanoVDB builds them, so lookups must do exactly the same.
pub const fn coord_to_key(ijk: [i32; 3]) -> u64 {
    ((ijk[2] as u32 >> UPPER_TOTAL) as u64)
        | (((ijk[1] as u32 >> UPPER_TOTAL) as u64) << 21)
        | (((ijk[0] as u32 >> UPPER_TOTAL) as u64) << 42)
}

/// NanoVDB's `RootData::KeyToCoord`: the origin of the upper node a key names.
pub const fn key_to_coord(key: u64) -> [i32; 3] {
    const MASK: u64 = (1 << 21) - 1;
    [
        (((key >> 42) & MASK) << UPPER_TOTAL) as u32 as i32,
        (((key >> 21) & MASK) << UPPER_TOTAL) as u32 as i32,
        ((key & MASK) << UPPER_TOTAL) as u32 as i32,
    ]
}

// ------------------------------------------------------------------------------------------
// Per-type layouts
// ------------------------------------------------------------------------------------------

/// How a leaf stores its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeafKind {
    /// 512 values of the grid's value type at [`LeafLayout::off_table`].
    Plain,
    /// `ValueMask`: no values, the value is the active state.
    Mask,
    /// `bool`: a second 512-bit mask of values at [`LeafLayout::off_table`].
    Bits,
    /// Fixed-width quantized floats (Fp4/Fp8/Fp16): `code * quantum + minimum`.
    Quantized {
        /// Bits per code: 4, 8 or 16.
        bits: u32,
    },
    /// Variable-width quantized floats: bit width `1 << (flags >> 5)` (1, 2, 4, 8 or 16),
    /// so the leaf is `96 + 64 * bit_width` bytes.
    QuantizedVariable,
    /// Index grids (`ValueIndex`, `ValueOnIndex`, masks): u64 offset + u64 prefix sum.
    Index,
    /// Point index grids: u64 offset, u64 point count, 512 u16 values.
    PointIndex,
}

/// Layout of the root node of one grid type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RootLayout {
    /// Offset of the background value.
    pub off_background: u32,
    /// Offset of the minimum active value.
    pub off_min: u32,
    /// Offset of the maximum active value.
    pub off_max: u32,
    /// Offset of the average (stats type).
    pub off_avg: u32,
    /// Offset of the standard deviation (stats type).
    pub off_stddev: u32,
    /// Size of `RootData`; tiles follow at this offset.
    pub size: u32,
    /// Offset of the value inside a tile.
    pub tile_off_value: u32,
    /// Size of one tile.
    pub tile_size: u32,
}

/// Layout of an internal node (upper 32³ or lower 16³) of one grid type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeLayout {
    /// log2 of the node's dimension in children per axis (5 upper, 4 lower).
    pub log2dim: u32,
    /// Offset of the child mask (the value mask is at [`INTERNAL_OFF_VALUE_MASK`]).
    pub off_child_mask: u32,
    /// Offset of the minimum active value.
    pub off_min: u32,
    /// Offset of the maximum active value.
    pub off_max: u32,
    /// Offset of the average.
    pub off_avg: u32,
    /// Offset of the standard deviation.
    pub off_stddev: u32,
    /// Offset of the table of tiles: each entry a value or an i64 child offset.
    pub off_table: u32,
    /// Bytes per table entry (`max(value size, 8)`, rounded to the entry's alignment).
    pub table_stride: u32,
    /// Size of the node.
    pub size: u32,
}

impl NodeLayout {
    /// Number of table entries (children or tiles): 32768 upper, 4096 lower.
    pub const fn table_count(&self) -> u32 {
        1 << (3 * self.log2dim)
    }
    /// Bytes in one of the node's bit masks.
    pub const fn mask_bytes(&self) -> u32 {
        self.table_count() / 8
    }
}

/// Layout of a leaf of one grid type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafLayout {
    /// How values are stored.
    pub kind: LeafKind,
    /// Offset of the minimum (quantized leaves: the u16 quantized min); same as `off_table`
    /// where the leaf has no statistics.
    pub off_min: u32,
    /// Offset of the maximum.
    pub off_max: u32,
    /// Offset of the average.
    pub off_avg: u32,
    /// Offset of the standard deviation.
    pub off_stddev: u32,
    /// Offset of the value array (codes for quantized leaves, value bits for `bool`).
    pub off_table: u32,
    /// Bits per value in the table (0 for mask leaves and FpN, whose width varies).
    pub value_bits: u32,
    /// Leaf size in bytes; for FpN the size without codes ([`LEAF_FPN_BASE_SIZE`]).
    pub size: u32,
}

impl LeafLayout {
    /// Whether every leaf of this type has the same size.
    pub const fn fixed_size(&self) -> bool {
        !matches!(self.kind, LeafKind::QuantizedVariable)
    }
}

/// The complete node layout of one grid type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeLayout {
    /// The grid type described.
    pub grid_type: GridType,
    /// Bytes of one value in root and internal nodes (the tile value type; bool is 1).
    pub value_size: u32,
    /// Bytes of one average/std-deviation statistic.
    pub stats_size: u32,
    /// Root node.
    pub root: RootLayout,
    /// Upper internal node (32³).
    pub upper: NodeLayout,
    /// Lower internal node (16³).
    pub lower: NodeLayout,
    /// Leaf node (8³).
    pub leaf: LeafLayout,
}

/// Size, alignment and statistics size of the value type stored in root and internal nodes.
const fn value_traits(t: GridType) -> Option<(u32, u32, u32)> {
    use GridType::*;
    // (value size, value alignment, stats size); stats alignment equals stats size.
    Some(match t {
        Float | Fp4 | Fp8 | Fp16 | FpN => (4, 4, 4),
        Double => (8, 8, 8),
        Int16 => (2, 2, 4),
        Int32 | UInt32 => (4, 4, 4),
        Int64 => (8, 8, 8),
        Vec3f => (12, 4, 4),
        Vec3d => (24, 8, 8),
        Mask | Boolean => (1, 1, 1),
        Half => (2, 2, 4),
        Rgba8 => (4, 4, 4),
        Vec4f => (16, 4, 4),
        Vec4d => (32, 8, 8),
        Index | OnIndex | IndexMask | OnIndexMask | PointIndex => (8, 8, 8),
        Vec3u8 => (3, 1, 4),
        Vec3u16 => (6, 2, 4),
        UInt8 => (1, 1, 4),
        Unknown => return None,
    })
}

const fn node_layout(log2dim: u32, v: u32, a: u32, s: u32) -> NodeLayout {
    let mask = (1u32 << (3 * log2dim)) / 8;
    let off_child_mask = INTERNAL_OFF_VALUE_MASK + mask;
    let off_min = align_up(off_child_mask + mask, a);
    let off_max = off_min + v;
    let off_avg = align_up(off_max + v, s);
    let off_stddev = off_avg + s;
    let off_table = align_up(off_stddev + s, DATA_ALIGNMENT);
    // The table entry is a union of the value and an i64 child offset.
    let stride = align_up(if v > 8 { v } else { 8 }, if a > 8 { a } else { 8 });
    let size = align_up(off_table + (1u32 << (3 * log2dim)) * stride, DATA_ALIGNMENT);
    NodeLayout {
        log2dim,
        off_child_mask,
        off_min,
        off_max,
        off_avg,
        off_stddev,
        off_table,
        table_stride: stride,
        size,
    }
}

const fn fp_leaf(kind: LeafKind, bits: u32) -> LeafLayout {
    LeafLayout {
        kind,
        off_min: LEAF_FP_OFF_STATS,
        off_max: LEAF_FP_OFF_STATS + 2,
        off_avg: LEAF_FP_OFF_STATS + 4,
        off_stddev: LEAF_FP_OFF_STATS + 6,
        off_table: LEAF_FP_OFF_CODES,
        value_bits: bits,
        size: LEAF_FP_OFF_CODES + 512 * bits / 8,
    }
}

const fn no_stats_leaf(kind: LeafKind, off_table: u32, value_bits: u32, size: u32) -> LeafLayout {
    LeafLayout {
        kind,
        off_min: off_table,
        off_max: off_table,
        off_avg: off_table,
        off_stddev: off_table,
        off_table,
        value_bits,
        size,
    }
}

const fn leaf_layout(t: GridType, v: u32, a: u32, s: u32) -> LeafLayout {
    use GridType::*;
    const VALUES: u32 = 512;
    match t {
        Fp4 => fp_leaf(LeafKind::Quantized { bits: 4 }, 4),
        Fp8 => fp_leaf(LeafKind::Quantized { bits: 8 }, 8),
        Fp16 => fp_leaf(LeafKind::Quantized { bits: 16 }, 16),
        FpN => fp_leaf(LeafKind::QuantizedVariable, 0),
        Mask => LeafLayout {
            off_table: 96,
            ..no_stats_leaf(LeafKind::Mask, 80, 0, 96)
        },
        // LeafData<bool>: value mask (16..80), value bits (80..144), 16 bytes padding. NOTE:
        // PNanoVDB's table says 96 for the bool table offset, which disagrees with NanoVDB.h's
        // struct; the C++ struct is what NanoVDB's own accessors read, so we follow it (checked
        // against a BoolGrid converted by nanovdb_convert 32.4: tests/fixtures/nanovdb).
        Boolean => no_stats_leaf(LeafKind::Bits, 80, 1, 160),
        Index | OnIndex => no_stats_leaf(LeafKind::Index, 80, 0, 96),
        // Retired in 32.7; 32.5/32.6 stored an extra 512-bit mask after the offsets.
        IndexMask | OnIndexMask => no_stats_leaf(LeafKind::Index, 80, 0, 160),
        PointIndex => LeafLayout {
            kind: LeafKind::PointIndex,
            off_min: 80,
            off_max: 88,
            off_avg: 96,
            off_stddev: 96,
            off_table: 96,
            value_bits: 16,
            size: 96 + VALUES * 2,
        },
        _ => {
            let off_min = align_up(LEAF_OFF_VALUE_MASK + 64, a);
            let off_max = off_min + v;
            let off_avg = align_up(off_max + v, s);
            let off_stddev = off_avg + s;
            let off_table = align_up(off_stddev + s, DATA_ALIGNMENT);
            LeafLayout {
                kind: LeafKind::Plain,
                off_min,
                off_max,
                off_avg,
                off_stddev,
                off_table,
                value_bits: v * 8,
                size: align_up(off_table + VALUES * v, DATA_ALIGNMENT),
            }
        }
    }
}

/// The layout of grids of type `grid_type` (every version 32.3–32.9), or `None` for
/// [`GridType::Unknown`]. Index-grid leaves (`Index`, `OnIndex`) changed between 32.4 and 32.5;
/// the layout given is the 32.5+ one, and only their size is relied on.
pub const fn layout(grid_type: GridType) -> Option<TreeLayout> {
    let Some((v, a, s)) = value_traits(grid_type) else {
        return None;
    };
    let off_background = align_up(24 + 4, a);
    let off_min = off_background + v;
    let off_max = off_min + v;
    let off_avg = align_up(off_max + v, s);
    let off_stddev = off_avg + s;
    let root_size = align_up(off_stddev + s, DATA_ALIGNMENT);
    let tile_off_value = align_up(ROOT_TILE_OFF_STATE + 4, a);
    let tile_size = align_up(tile_off_value + v, DATA_ALIGNMENT);
    Some(TreeLayout {
        grid_type,
        value_size: v,
        stats_size: s,
        root: RootLayout {
            off_background,
            off_min,
            off_max,
            off_avg,
            off_stddev,
            size: root_size,
            tile_off_value,
            tile_size,
        },
        upper: node_layout(UPPER_LOG2DIM, v, a, s),
        lower: node_layout(LOWER_LOG2DIM, v, a, s),
        leaf: leaf_layout(grid_type, v, a, s),
    })
}

/// Size of an FpN leaf whose flags byte is `flags`, or `None` if the encoded bit width is not
/// one NanoVDB writes (1, 2, 4, 8, 16).
pub const fn fpn_leaf_size(flags: u8) -> Option<u32> {
    match fpn_bit_width(flags) {
        Some(bits) => Some(LEAF_FPN_BASE_SIZE + 64 * bits),
        None => None,
    }
}

/// Bit width of an FpN leaf from its flags byte (`1 << (flags >> 5)`), limited to the widths
/// NanoVDB's decoder handles.
pub const fn fpn_bit_width(flags: u8) -> Option<u32> {
    let log2 = (flags >> 5) as u32;
    if log2 <= 4 { Some(1 << log2) } else { None }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `pnanovdb_grid_type_constants` from PNanoVDB.h (32.9.2, rows identical in 32.3.3 for
    /// types 0..=18): root bg/min/max/ave/stddev/size, value stride bits, table stride, root
    /// tile value offset, tile size, upper min/max/ave/stddev/table/size, lower (same), leaf.
    #[rustfmt::skip]
    const PNANOVDB: [[u32; 28]; 27] = [
        [28, 28, 28, 28, 28, 32, 0, 8, 20, 32, 8224, 8224, 8224, 8224, 8224, 270368, 1056, 1056, 1056, 1056, 1056, 33824, 80, 80, 80, 80, 96, 96],
        [28, 32, 36, 40, 44, 64, 32, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 80, 84, 88, 92, 96, 2144],
        [32, 40, 48, 56, 64, 96, 64, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 88, 96, 104, 128, 4224],
        [28, 30, 32, 36, 40, 64, 16, 8, 20, 32, 8224, 8226, 8228, 8232, 8256, 270400, 1056, 1058, 1060, 1064, 1088, 33856, 80, 82, 84, 88, 96, 1120],
        [28, 32, 36, 40, 44, 64, 32, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 80, 84, 88, 92, 96, 2144],
        [32, 40, 48, 56, 64, 96, 64, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 88, 96, 104, 128, 4224],
        [28, 40, 52, 64, 68, 96, 96, 16, 20, 32, 8224, 8236, 8248, 8252, 8256, 532544, 1056, 1068, 1080, 1084, 1088, 66624, 80, 92, 104, 108, 128, 6272],
        [32, 56, 80, 104, 112, 128, 192, 24, 24, 64, 8224, 8248, 8272, 8280, 8288, 794720, 1056, 1080, 1104, 1112, 1120, 99424, 80, 104, 128, 136, 160, 12448],
        [28, 29, 30, 31, 32, 64, 0, 8, 20, 32, 8224, 8225, 8226, 8227, 8256, 270400, 1056, 1057, 1058, 1059, 1088, 33856, 80, 80, 80, 80, 96, 96],
        [28, 30, 32, 36, 40, 64, 16, 8, 20, 32, 8224, 8226, 8228, 8232, 8256, 270400, 1056, 1058, 1060, 1064, 1088, 33856, 80, 82, 84, 88, 96, 1120],
        [28, 32, 36, 40, 44, 64, 32, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 80, 84, 88, 92, 96, 2144],
        [28, 29, 30, 31, 32, 64, 1, 8, 20, 32, 8224, 8225, 8226, 8227, 8256, 270400, 1056, 1057, 1058, 1059, 1088, 33856, 80, 80, 80, 80, 96, 160],
        [28, 32, 36, 40, 44, 64, 32, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 80, 84, 88, 92, 96, 2144],
        [28, 32, 36, 40, 44, 64, 0, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 88, 90, 92, 94, 96, 352],
        [28, 32, 36, 40, 44, 64, 0, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 88, 90, 92, 94, 96, 608],
        [28, 32, 36, 40, 44, 64, 0, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 88, 90, 92, 94, 96, 1120],
        [28, 32, 36, 40, 44, 64, 0, 8, 20, 32, 8224, 8228, 8232, 8236, 8256, 270400, 1056, 1060, 1064, 1068, 1088, 33856, 88, 90, 92, 94, 96, 96],
        [28, 44, 60, 76, 80, 96, 128, 16, 20, 64, 8224, 8240, 8256, 8260, 8288, 532576, 1056, 1072, 1088, 1092, 1120, 66656, 80, 96, 112, 116, 128, 8320],
        [32, 64, 96, 128, 136, 160, 256, 32, 24, 64, 8224, 8256, 8288, 8296, 8320, 1056896, 1056, 1088, 1120, 1128, 1152, 132224, 80, 112, 144, 152, 160, 16544],
        [32, 40, 48, 56, 64, 96, 0, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 80, 80, 80, 80, 96],
        [32, 40, 48, 56, 64, 96, 0, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 80, 80, 80, 80, 96],
        [32, 40, 48, 56, 64, 96, 0, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 80, 80, 80, 80, 160],
        [32, 40, 48, 56, 64, 96, 0, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 80, 80, 80, 80, 160],
        [32, 40, 48, 56, 64, 96, 16, 8, 24, 32, 8224, 8232, 8240, 8248, 8256, 270400, 1056, 1064, 1072, 1080, 1088, 33856, 80, 88, 96, 96, 96, 1120],
        [28, 31, 34, 40, 44, 64, 24, 8, 20, 32, 8224, 8227, 8232, 8236, 8256, 270400, 1056, 1059, 1064, 1068, 1088, 33856, 80, 83, 88, 92, 96, 1632],
        [28, 34, 40, 48, 52, 64, 48, 8, 20, 32, 8224, 8230, 8236, 8240, 8256, 270400, 1056, 1062, 1068, 1072, 1088, 33856, 80, 86, 92, 96, 128, 3200],
        [28, 29, 30, 32, 36, 64, 8, 8, 20, 32, 8224, 8225, 8228, 8232, 8256, 270400, 1056, 1057, 1060, 1064, 1088, 33856, 80, 81, 84, 88, 96, 608],
    ];

    #[test]
    fn offsets_match_pnanovdb() {
        for t in GridType::ALL {
            let row = &PNANOVDB[t as usize];
            let Some(l) = layout(t) else {
                assert_eq!(t, GridType::Unknown);
                continue;
            };
            let r = &l.root;
            let ctx = format!("{t:?}");
            assert_eq!(
                [
                    r.off_background,
                    r.off_min,
                    r.off_max,
                    r.off_avg,
                    r.off_stddev,
                    r.size
                ],
                row[0..6],
                "root {ctx}"
            );
            assert_eq!([r.tile_off_value, r.tile_size], row[8..10], "tile {ctx}");
            for (n, base) in [(&l.upper, 10), (&l.lower, 16)] {
                assert_eq!(n.table_stride, row[7], "stride {ctx}");
                assert_eq!(
                    [
                        n.off_min,
                        n.off_max,
                        n.off_avg,
                        n.off_stddev,
                        n.off_table,
                        n.size
                    ],
                    row[base..base + 6],
                    "internal {ctx}"
                );
            }
            let f = &l.leaf;
            let leaf = [
                f.off_min,
                f.off_max,
                f.off_avg,
                f.off_stddev,
                f.off_table,
                f.size,
            ];
            match t {
                // Index leaves: PNanoVDB names the stats offsets differently; sizes agree.
                GridType::Index | GridType::OnIndex | GridType::PointIndex => {
                    assert_eq!(f.size, row[27], "leaf size {ctx}")
                }
                // Retired in 32.7 (PNanoVDB keeps the 32.6 row); only the size is used.
                GridType::IndexMask | GridType::OnIndexMask => {
                    assert_eq!(f.size, row[27], "leaf size {ctx}")
                }
                GridType::Boolean => {
                    // See leaf_layout: the C++ struct puts the value bits at 80.
                    assert_eq!(leaf, [80, 80, 80, 80, 80, 160]);
                    assert_eq!(row[26..28], [96, 160]);
                }
                GridType::Fp4 | GridType::Fp8 | GridType::Fp16 | GridType::FpN => {
                    // PNanoVDB lists the f32 minimum/quantum by negative offsets from the
                    // table and the u16 stats at 88..96.
                    assert_eq!(leaf, row[22..28], "leaf {ctx}");
                    assert_eq!(LEAF_FP_OFF_CODES - 16, LEAF_FP_OFF_MINIMUM);
                    assert_eq!(LEAF_FP_OFF_CODES - 12, LEAF_FP_OFF_QUANTUM);
                }
                _ => {
                    assert_eq!(leaf, row[22..28], "leaf {ctx}");
                    assert_eq!(f.value_bits, row[6], "value bits {ctx}");
                }
            }
        }
    }

    #[test]
    fn fpn_sizes() {
        assert_eq!(fpn_leaf_size(0), Some(96 + 64));
        assert_eq!(fpn_leaf_size(4 << 5), Some(96 + 64 * 16));
        assert_eq!(fpn_leaf_size(5 << 5), None);
        assert_eq!(fpn_bit_width(2 << 5 | 0x13), Some(4));
    }

    #[test]
    fn root_keys_like_nanovdb() {
        assert_eq!(coord_to_key([0, 0, 0]), 0);
        assert_eq!(coord_to_key([4095, 4095, 4095]), 0);
        assert_eq!(coord_to_key([4096, 0, 0]), 1 << 42);
        assert_eq!(coord_to_key([0, 0, -1]), 0xF_FFFF);
        assert_eq!(
            key_to_coord(coord_to_key([-1, -4097, 8191])),
            [-4096, -8192, 4096]
        );
        assert_eq!(&MAGIC_NUMB.to_le_bytes(), b"NanoVDB0");
        assert_eq!(&MAGIC_GRID.to_le_bytes(), b"NanoVDB1");
        assert_eq!(&MAGIC_FILE.to_le_bytes(), b"NanoVDB2");
    }
}
