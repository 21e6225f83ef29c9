//! NanoVDB grid checksums: two CRC-32s packed into `GridData::mChecksum`.
//!
//! The 64-bit field holds `head | tail << 32` (little-endian, so `head` is the first four
//! bytes). All 64 bits set means "no checksum"; a tail of all ones means only the head was
//! computed ("partial" or "half" in NanoVDB). The CRC is the common reflected CRC-32
//! (polynomial 0xEDB88320, as zlib), which `crc32fast` computes.
//!
//! What the two halves cover changed twice (git history of `GridChecksum.h`):
//!
//! | written by | head covers | tail covers |
//! | --- | --- | --- |
//! | 32.3 – 32.5 | bytes `[16, 736 + root + tiles)` | CRC of the list of per-node CRCs |
//! | 32.6 | bytes `[16, first upper node)` | 4 KiB-blocked CRC of `[first upper node, end)` |
//! | 32.7 – 32.9 | bytes `[16, 736)` (grid + tree headers) | 4 KiB-blocked CRC of `[736, grid size)` |
//!
//! Bytes 0..16 (magic and the checksum itself) are never covered.
//!
//! The node-wise tail (32.3 – 32.5) is a CRC over one entry per node, upper nodes first, then
//! lower nodes, then leaves, in breadth-first order; each entry is the CRC of `sizeof(node)`
//! bytes (for FpN leaves only their 96-byte header, since `sizeof` does not see the codes).
//! The entries were `std::uint_fast32_t`, which is **8 bytes** on LP64 platforms (Linux, macOS:
//! Debian's 32.4 tools) and 4 bytes on Windows. A grid whose root has no tiles gets no tail.
//!
//! NanoVDB 32.7+ re-verifies grids stamped ≤ 32.6.0 with its own reading of the old scheme:
//! 4-byte entries and the whole FpN leaf, which matches Windows-written 32.3 – 32.5 grids but
//! not Linux-written ones, nor the blocked tail 32.6 actually wrote. [`verify_checksum`]
//! therefore accepts every scheme a grid of the given version may plausibly carry.
//!
//! The blocked tail splits its range into `len / 4096` blocks (the last one takes the
//! remainder) and CRCs the little-endian u32 block CRCs. A range shorter than 4096 bytes
//! has zero blocks and a tail CRC of 0 (the CRC of nothing): NanoVDB does that, so we do too.

use rayon::prelude::*;

use super::error::FormatError;
use super::layout::{
    self, DATA_ALIGNMENT, GRID_FLAG_IS_BREADTH_FIRST, GRID_NAME_SIZE, GRID_OFF_CHECKSUM,
    GRID_OFF_FLAGS, GRID_OFF_GRID_NAME, GRID_OFF_GRID_SIZE, GRID_OFF_GRID_TYPE, GRID_OFF_VERSION,
    GRID_SIZE, LEAF_FPN_BASE_SIZE, LEAF_OFF_FLAGS, ROOT_OFF_TABLE_SIZE, ROOT_TILE_OFF_CHILD,
    TREE_OFF_NODE_COUNT_LEAF, TREE_OFF_NODE_OFFSET_LEAF, TREE_OFF_NODE_OFFSET_ROOT,
    TREE_OFF_NODE_OFFSET_UPPER, TREE_SIZE,
};
use super::le::LeBytes;
use super::types::{GridType, Version};

/// The stored value meaning "no checksum" (all bits set).
pub const CHECKSUM_DISABLED: u64 = u64::MAX;
/// A tail half of all ones: only the head was computed.
const EMPTY32: u32 = u32::MAX;
/// Bytes before the head's range: the magic and the checksum field.
const HEAD_START: usize = 16;
/// Offset of the first byte after the grid and tree headers.
const HEADERS_END: usize = (GRID_SIZE + TREE_SIZE) as usize;
/// log2 of the block size of the blocked tail CRC (NanoVDB's `NANOVDB_CRC32_LOG2_BLOCK_SIZE`).
const LOG2_BLOCK: u32 = 12;
/// Below this many blocks or nodes the CRCs are computed on the calling thread.
const PARALLEL_MIN: usize = 64;

/// Result of checking a grid's stored checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumState {
    /// The grid carries no checksum (all 64 bits set).
    Absent,
    /// The stored checksum (head only, or head and tail) matches the bytes.
    Valid,
    /// The stored checksum does not match; `computed` is what the version's primary scheme
    /// gives, with the tail all ones when only a head was stored.
    Mismatch {
        /// The stored 64-bit value.
        stored: u64,
        /// The value computed from the bytes.
        computed: u64,
    },
}

/// Which checksum a grid carries, from its stored 64-bit value alone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumKind {
    /// Head and tail: every byte of the grid after the checksum field is covered.
    Full,
    /// Head only (NanoVDB's "partial" mode, the default of its tools): the grid and tree
    /// headers (and, before 32.6, the root and its tiles) are covered, the nodes and leaves
    /// are not, so damage to voxel data goes unnoticed.
    HeadOnly,
    /// No checksum (all 64 bits set).
    None,
}

impl ChecksumKind {
    /// The kind of a stored checksum value.
    pub fn of(stored: u64) -> ChecksumKind {
        if stored == CHECKSUM_DISABLED {
            ChecksumKind::None
        } else if (stored >> 32) as u32 == EMPTY32 {
            ChecksumKind::HeadOnly
        } else {
            ChecksumKind::Full
        }
    }

    /// `full`, `head-only` or `none`.
    pub fn name(self) -> &'static str {
        match self {
            ChecksumKind::Full => "full",
            ChecksumKind::HeadOnly => "head-only",
            ChecksumKind::None => "none",
        }
    }
}

/// One of NanoVDB's checksum algorithms (see the module documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ChecksumScheme {
    /// 32.3 – 32.5: head over grid, tree, root and tiles; tail over per-node CRCs.
    NodeWise {
        /// Bytes per per-node CRC entry: 8 (LP64 builds: Linux, macOS) or 4 (Windows, and how
        /// NanoVDB 32.7+ re-verifies old grids).
        entry_bytes: u8,
        /// Whether an FpN leaf's CRC covers its codes (32.7+'s re-verification) or only its
        /// 96-byte header (what 32.3 – 32.5 computed).
        fpn_whole_leaf: bool,
    },
    /// 32.6: head up to the first upper node, blocked tail from there to the end.
    Blocked32_6,
    /// 32.7 and later: head over the two headers, blocked tail over everything after them.
    Blocked,
}

impl ChecksumScheme {
    /// What NanoVDB 32.3 – 32.5 on Linux (for example Debian's 32.4 tools) computes.
    pub const LEGACY_LP64: ChecksumScheme = ChecksumScheme::NodeWise {
        entry_bytes: 8,
        fpn_whole_leaf: false,
    };

    /// The scheme NanoVDB of `version` writes on Linux.
    pub fn for_version(version: Version) -> ChecksumScheme {
        if version.minor() >= 7 || version.major() > 32 {
            ChecksumScheme::Blocked
        } else if version.minor() == 6 {
            ChecksumScheme::Blocked32_6
        } else {
            ChecksumScheme::LEGACY_LP64
        }
    }

    /// Every scheme a grid stamped `version` may carry, the primary one first.
    fn candidates(version: Version) -> &'static [ChecksumScheme] {
        use ChecksumScheme::*;
        const LEGACY: [ChecksumScheme; 4] = [
            ChecksumScheme::LEGACY_LP64,
            NodeWise {
                entry_bytes: 4,
                fpn_whole_leaf: false,
            },
            NodeWise {
                entry_bytes: 4,
                fpn_whole_leaf: true,
            },
            NodeWise {
                entry_bytes: 8,
                fpn_whole_leaf: true,
            },
        ];
        const V32_6: [ChecksumScheme; 5] = [
            Blocked32_6,
            // 32.7+ tools recompute checksums of grids stamped 32.6.0 node-wise.
            NodeWise {
                entry_bytes: 4,
                fpn_whole_leaf: true,
            },
            ChecksumScheme::LEGACY_LP64,
            NodeWise {
                entry_bytes: 4,
                fpn_whole_leaf: false,
            },
            NodeWise {
                entry_bytes: 8,
                fpn_whole_leaf: true,
            },
        ];
        const CURRENT: [ChecksumScheme; 1] = [Blocked];
        match ChecksumScheme::for_version(version) {
            Blocked => &CURRENT,
            Blocked32_6 => &V32_6,
            NodeWise { .. } => &LEGACY,
        }
    }
}

/// Computes the full checksum (head and tail) of one grid with the scheme of the version
/// stamped in its header, as NanoVDB of that version would store it.
///
/// `grid` must start at the grid header and hold at least the grid's `mGridSize` bytes (extra
/// trailing bytes, such as 4 KiB padding, are ignored).
pub fn compute_checksum(grid: &[u8]) -> Result<u64, FormatError> {
    let version = Version(LeBytes::new(grid).u32_at(GRID_OFF_VERSION as usize, "grid version")?);
    compute_checksum_with(grid, ChecksumScheme::for_version(version), true)
}

/// Computes the checksum of `grid` with an explicit scheme; with `full == false` only the head
/// (tail all ones), as NanoVDB's partial mode.
pub fn compute_checksum_with(
    grid: &[u8],
    scheme: ChecksumScheme,
    full: bool,
) -> Result<u64, FormatError> {
    let grid = grid_slice(grid)?;
    let head = head_crc(grid, scheme)?;
    let tail = if full {
        tail_crc(grid, scheme)?
    } else {
        EMPTY32
    };
    Ok(pack(head, tail))
}

/// Checks the checksum stored in `grid` against its bytes, using the schemes a grid of
/// `version` may carry (the grid's own stamp or, for files, the file header's version).
///
/// A stored head-only checksum is checked on the head alone. Bytes whose tree cannot be
/// walked (truncated, offsets out of bounds) count as a mismatch with a computed value of all
/// ones; [`super::grid::Grid::parse`] reports such damage in detail.
pub fn verify_checksum(grid: &[u8], version: Version) -> ChecksumState {
    let Ok(stored) = LeBytes::new(grid).u64_at(GRID_OFF_CHECKSUM as usize, "grid checksum") else {
        return ChecksumState::Mismatch {
            stored: CHECKSUM_DISABLED,
            computed: CHECKSUM_DISABLED,
        };
    };
    if stored == CHECKSUM_DISABLED {
        return ChecksumState::Absent;
    }
    let (stored_head, stored_tail) = (stored as u32, (stored >> 32) as u32);
    let full = stored_tail != EMPTY32;
    let mut primary = None;
    for &scheme in ChecksumScheme::candidates(version) {
        let Ok(g) = grid_slice(grid) else { break };
        let Ok(head) = head_crc(g, scheme) else {
            continue;
        };
        let tail = if !full || head != stored_head {
            EMPTY32
        } else {
            match tail_crc(g, scheme) {
                Ok(t) => t,
                Err(_) => continue,
            }
        };
        let computed = pack(head, tail);
        if head == stored_head && (!full || tail == stored_tail) {
            return ChecksumState::Valid;
        }
        primary.get_or_insert(computed);
    }
    ChecksumState::Mismatch {
        stored,
        computed: primary.unwrap_or(CHECKSUM_DISABLED),
    }
}

/// Writes the checksum of `scheme` into the header of `grid` (full or head only), or marks
/// the grid as having none.
pub(crate) fn store_checksum(
    grid: &mut [u8],
    scheme: Option<(ChecksumScheme, bool)>,
) -> Result<(), FormatError> {
    let value = match scheme {
        Some((scheme, full)) => compute_checksum_with(grid, scheme, full)?,
        None => CHECKSUM_DISABLED,
    };
    let at = GRID_OFF_CHECKSUM as usize;
    grid[at..at + 8].copy_from_slice(&value.to_le_bytes());
    Ok(())
}

/// Writes `name` into the header's name field of `grid` (a grid buffer whose stored
/// checksum was checked for `version`), and re-stamps a checksum that matched before with
/// the scheme it matched; an absent or mismatched checksum stays as stored. Refused: a name
/// that does not fit the 255-byte field or holds a NUL, and a grid whose name lives in its
/// blind data (the long-name flag), which a header name would contradict.
pub fn rename_grid(grid: &mut [u8], name: &str, version: Version) -> Result<(), FormatError> {
    let refuse = |detail: String| FormatError::Corrupt {
        what: "grid name".into(),
        offset: u64::from(GRID_OFF_GRID_NAME),
        detail,
    };
    let le = LeBytes::new(grid);
    let flags = le.u32_at(GRID_OFF_FLAGS as usize, "grid flags")?;
    if flags & layout::GRID_FLAG_HAS_LONG_GRID_NAME != 0 {
        return Err(refuse(format!(
            "cannot rename the grid to {name:?}: its name is stored in blind data"
        )));
    }
    if name.len() >= GRID_NAME_SIZE as usize || name.as_bytes().contains(&0) {
        return Err(refuse(format!(
            "cannot rename the grid to {name:?}: a header name holds at most {} bytes and no NUL",
            GRID_NAME_SIZE - 1
        )));
    }
    let stored = le.u64_at(GRID_OFF_CHECKSUM as usize, "grid checksum")?;
    let matched = if verify_checksum(grid, version) == ChecksumState::Valid {
        let full = (stored >> 32) as u32 != EMPTY32;
        ChecksumScheme::candidates(version)
            .iter()
            .copied()
            .find(|&s| compute_checksum_with(grid, s, full).is_ok_and(|c| c == stored))
            .map(|s| (s, full))
    } else {
        None
    };
    let field = &mut grid[GRID_OFF_GRID_NAME as usize..][..GRID_NAME_SIZE as usize];
    field.fill(0);
    field[..name.len()].copy_from_slice(name.as_bytes());
    if let Some(scheme) = matched {
        store_checksum(grid, Some(scheme))?;
    }
    Ok(())
}

fn pack(head: u32, tail: u32) -> u64 {
    u64::from(head) | u64::from(tail) << 32
}

/// The grid's own bytes: `grid[..mGridSize]`.
fn grid_slice(grid: &[u8]) -> Result<&[u8], FormatError> {
    let size = LeBytes::new(grid).u64_at(GRID_OFF_GRID_SIZE as usize, "grid size")?;
    let size = usize::try_from(size).map_err(|_| malformed("grid size does not fit in memory"))?;
    if size < HEADERS_END || size > grid.len() {
        return Err(malformed("grid size outside the buffer"));
    }
    Ok(&grid[..size])
}

fn head_crc(grid: &[u8], scheme: ChecksumScheme) -> Result<u32, FormatError> {
    let end = match scheme {
        ChecksumScheme::Blocked => HEADERS_END,
        ChecksumScheme::Blocked32_6 => {
            let t = Tree::read(grid)?;
            match t.first_upper {
                Some(upper) => upper,
                // No upper nodes: 32.6 covers everything up to the blind metadata.
                None => blind_start(grid)?,
            }
        }
        ChecksumScheme::NodeWise { .. } => {
            // 32.3 – 32.5 assumed the root right after the tree: grid + tree + root + tiles.
            let t = Tree::read(grid)?;
            HEADERS_END
                + t.layout.root.size as usize
                + t.table_size * t.layout.root.tile_size as usize
        }
    };
    let bytes = grid
        .get(HEAD_START..end)
        .ok_or_else(|| malformed("checksum head range outside the grid"))?;
    Ok(crc32fast::hash(bytes))
}

fn tail_crc(grid: &[u8], scheme: ChecksumScheme) -> Result<u32, FormatError> {
    match scheme {
        ChecksumScheme::Blocked => Ok(blocked_crc32(&grid[HEADERS_END..])),
        ChecksumScheme::Blocked32_6 => {
            let t = Tree::read(grid)?;
            match t.first_upper {
                Some(upper) => Ok(blocked_crc32(&grid[upper..])),
                // Nothing after the head: 32.6 stored a head-only checksum.
                None => Ok(EMPTY32),
            }
        }
        ChecksumScheme::NodeWise {
            entry_bytes,
            fpn_whole_leaf,
        } => node_wise_tail(grid, entry_bytes, fpn_whole_leaf),
    }
}

/// NanoVDB's `blockedCrc32`: CRC of the little-endian CRCs of 4 KiB blocks.
fn blocked_crc32(data: &[u8]) -> u32 {
    if data.is_empty() {
        return EMPTY32;
    }
    let blocks = data.len() >> LOG2_BLOCK;
    let block = |i: usize| {
        let start = i << LOG2_BLOCK;
        // The last block absorbs the remainder.
        let end = if i + 1 == blocks {
            data.len()
        } else {
            start + (1 << LOG2_BLOCK)
        };
        crc32fast::hash(&data[start..end])
    };
    let crcs: Vec<u32> = if blocks >= PARALLEL_MIN {
        (0..blocks).into_par_iter().map(block).collect()
    } else {
        (0..blocks).map(block).collect()
    };
    let mut h = crc32fast::Hasher::new();
    for c in crcs {
        h.update(&c.to_le_bytes());
    }
    h.finalize()
}

/// 32.3 – 32.5's tail: a CRC over per-node CRCs, each widened to `entry_bytes`.
fn node_wise_tail(grid: &[u8], entry_bytes: u8, fpn_whole_leaf: bool) -> Result<u32, FormatError> {
    let t = Tree::read(grid)?;
    if t.table_size == 0 {
        // An empty root: NanoVDB skipped the tail and left it all ones.
        return Ok(EMPTY32);
    }
    let nodes = t.nodes_breadth_first(grid, fpn_whole_leaf)?;
    let crc = |&(start, len): &(usize, usize)| crc32fast::hash(&grid[start..start + len]);
    let crcs: Vec<u32> = if nodes.len() >= PARALLEL_MIN {
        nodes.par_iter().map(crc).collect()
    } else {
        nodes.iter().map(crc).collect()
    };
    let mut h = crc32fast::Hasher::new();
    for c in crcs {
        if entry_bytes == 8 {
            h.update(&u64::from(c).to_le_bytes());
        } else {
            h.update(&c.to_le_bytes());
        }
    }
    Ok(h.finalize())
}

/// Start of the blind metadata, or the grid's end when it has none.
fn blind_start(grid: &[u8]) -> Result<usize, FormatError> {
    let count = LeBytes::new(grid).u32_at(
        layout::GRID_OFF_BLIND_METADATA_COUNT as usize,
        "blind metadata count",
    )?;
    if count == 0 {
        return Ok(grid.len());
    }
    let off = LeBytes::new(grid).u64_at(
        layout::GRID_OFF_BLIND_METADATA_OFFSET as usize,
        "blind metadata offset",
    )?;
    usize::try_from(off)
        .ok()
        .filter(|&o| (HEADERS_END..=grid.len()).contains(&o))
        .ok_or_else(|| malformed("blind metadata offset outside the grid"))
}

/// What the checksum needs from the tree header and root, read with bounds checks.
struct Tree {
    layout: layout::TreeLayout,
    breadth_first: bool,
    root: usize,
    table_size: usize,
    node_offsets: [usize; 3],
    node_counts: [usize; 3],
    first_upper: Option<usize>,
}

impl Tree {
    fn read(grid: &[u8]) -> Result<Tree, FormatError> {
        let le = LeBytes::new(grid);
        let type_id = le.u32_at(GRID_OFF_GRID_TYPE as usize, "grid type")?;
        let grid_type = GridType::from_u32(type_id)
            .filter(|t| *t != GridType::Unknown)
            .ok_or_else(|| malformed("unknown grid type"))?;
        let layout = layout::layout(grid_type).ok_or_else(|| malformed("unknown grid type"))?;
        let flags = le.u32_at(GRID_OFF_FLAGS as usize, "grid flags")?;
        let tree = GRID_SIZE as usize;
        let node_offset = |level: u32| -> Result<Option<usize>, FormatError> {
            let off = le.u64_at(
                tree + (TREE_OFF_NODE_OFFSET_LEAF + 8 * level) as usize,
                "tree node offset",
            )?;
            if off == 0 {
                return Ok(None);
            }
            usize::try_from(off)
                .ok()
                .and_then(|o| o.checked_add(tree))
                .filter(|&o| o < grid.len() && o % DATA_ALIGNMENT as usize == 0)
                .map(Some)
                .ok_or_else(|| malformed("tree node offset outside the grid"))
        };
        let root = node_offset(3)?.ok_or_else(|| malformed("grid has no root"))?;
        debug_assert_eq!(TREE_OFF_NODE_OFFSET_ROOT, TREE_OFF_NODE_OFFSET_LEAF + 24);
        debug_assert_eq!(TREE_OFF_NODE_OFFSET_UPPER, TREE_OFF_NODE_OFFSET_LEAF + 16);
        let table_size =
            le.u32_at(root + ROOT_OFF_TABLE_SIZE as usize, "root tile count")? as usize;
        let mut node_offsets = [0; 3];
        let mut node_counts = [0; 3];
        for level in 0..3u32 {
            node_offsets[level as usize] = node_offset(level)?.unwrap_or(0);
            node_counts[level as usize] = le.u32_at(
                tree + (TREE_OFF_NODE_COUNT_LEAF + 4 * level) as usize,
                "tree node count",
            )? as usize;
        }
        let first_upper = (node_counts[2] > 0 && node_offsets[2] != 0).then_some(node_offsets[2]);
        Ok(Tree {
            layout,
            breadth_first: flags & GRID_FLAG_IS_BREADTH_FIRST != 0,
            root,
            table_size,
            node_offsets,
            node_counts,
            first_upper,
        })
    }

    /// (start, length) of every upper node, then every lower node, then every leaf, in the
    /// order NanoVDB's `NodeManager` lists them: linearly from the first node of each level
    /// for breadth-first grids of fixed-size nodes, otherwise by walking the tree.
    fn nodes_breadth_first(
        &self,
        grid: &[u8],
        fpn_whole_leaf: bool,
    ) -> Result<Vec<(usize, usize)>, FormatError> {
        let l = &self.layout;
        let le = LeBytes::new(grid);
        let fixed = l.leaf.fixed_size();
        let sizes = [
            l.leaf.size as usize,
            l.lower.size as usize,
            l.upper.size as usize,
        ];
        let total: usize = self.node_counts.iter().sum();
        let mut out = Vec::with_capacity(total.min(grid.len() / 96 + 1));
        let in_grid = |start: usize, len: usize| {
            start
                .checked_add(len)
                .filter(|&end| end <= grid.len())
                .map(|_| (start, len))
                .ok_or_else(|| malformed("tree node outside the grid"))
        };
        if fixed && self.breadth_first {
            for level in [2usize, 1, 0] {
                for i in 0..self.node_counts[level] {
                    let start = self.node_offsets[level]
                        .checked_add(i.checked_mul(sizes[level]).ok_or_else(overflow)?)
                        .ok_or_else(overflow)?;
                    out.push(in_grid(start, sizes[level])?);
                }
            }
            return Ok(out);
        }
        // Depth-first walk, breadth-first insertion.
        let (mut uppers, mut lowers, mut leaves) = (Vec::new(), Vec::new(), Vec::new());
        let tiles = self.root + l.root.size as usize;
        for i in 0..self.table_size {
            let tile = tiles + i * l.root.tile_size as usize;
            let child = le.i64_at(tile + ROOT_TILE_OFF_CHILD as usize, "root tile child")?;
            if child != 0 {
                uppers.push(in_grid(offset_by(self.root, child)?, sizes[2])?);
            }
        }
        let children = |node: usize, nl: &layout::NodeLayout| -> Result<Vec<usize>, FormatError> {
            let mut found = Vec::new();
            let words = nl.mask_bytes() as usize / 8;
            for w in 0..words {
                let mut bits =
                    le.u64_at(node + nl.off_child_mask as usize + 8 * w, "child mask")?;
                while bits != 0 {
                    let n = w * 64 + bits.trailing_zeros() as usize;
                    bits &= bits - 1;
                    let entry = node + nl.off_table as usize + n * nl.table_stride as usize;
                    found.push(offset_by(node, le.i64_at(entry, "child offset")?)?);
                }
            }
            Ok(found)
        };
        for &(upper, _) in &uppers {
            for lower in children(upper, &l.upper)? {
                lowers.push(in_grid(lower, sizes[1])?);
            }
        }
        for &(lower, _) in &lowers {
            for leaf in children(lower, &l.lower)? {
                let len = if fixed {
                    sizes[0]
                } else if fpn_whole_leaf {
                    let flags = *grid
                        .get(leaf + LEAF_OFF_FLAGS as usize)
                        .ok_or_else(|| malformed("leaf outside the grid"))?;
                    layout::fpn_leaf_size(flags)
                        .ok_or_else(|| malformed("FpN leaf with an invalid bit width"))?
                        as usize
                } else {
                    LEAF_FPN_BASE_SIZE as usize
                };
                leaves.push(in_grid(leaf, len)?);
            }
        }
        out.extend(uppers);
        out.extend(lowers);
        out.extend(leaves);
        Ok(out)
    }
}

fn offset_by(base: usize, rel: i64) -> Result<usize, FormatError> {
    base.checked_add_signed(rel as isize)
        .ok_or_else(|| malformed("child offset outside the grid"))
}

fn overflow() -> FormatError {
    malformed("node offsets overflow")
}

/// The grid cannot be walked for its checksum; Grid::parse gives the detailed reason.
fn malformed(detail: &'static str) -> FormatError {
    FormatError::Corrupt {
        what: "grid (checksum)".into(),
        offset: 0,
        detail: detail.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::build::{BuildOptions, ChecksumMode, NanoVdbVersion, build_grid};
    use crate::format::layout::GRID_OFF_VERSION;
    use crate::format::{LeafBrick, SparseVolume};

    fn volume() -> SparseVolume {
        let mut vol = SparseVolume {
            background: 0.0,
            bricks: Vec::new(),
        };
        for i in 0..40 {
            let mut b = LeafBrick::filled([8 * i - 160, -8 * (i % 5), 4096 * (i % 3) - 4096], 0.0);
            for (n, v) in b.values.iter_mut().enumerate() {
                *v = ((n as i32 * 31 + i * 7) % 101) as f32 * 0.01;
            }
            b.active = [u64::MAX, 0, 0xF0F0, 1, 0, 0, u64::MAX, 3];
            vol.bricks.push(b);
        }
        vol
    }

    fn grid(t: GridType, v: NanoVdbVersion) -> Vec<u8> {
        let o = BuildOptions {
            grid_type: t,
            version: v,
            fpn_tolerance: 0.01,
            ..BuildOptions::default()
        };
        build_grid(&volume(), &o).unwrap()
    }

    fn restamp(g: &mut [u8], version: Version, scheme: ChecksumScheme, full: bool) {
        let at = GRID_OFF_VERSION as usize;
        g[at..at + 4].copy_from_slice(&version.0.to_le_bytes());
        store_checksum(g, Some((scheme, full))).unwrap();
    }

    /// The textbook bitwise CRC-32 that NanoVDB's `crc32` implements.
    fn crc32_bitwise(data: &[u8]) -> u32 {
        let mut crc = !0u32;
        for &b in data {
            crc ^= u32::from(b);
            for _ in 0..8 {
                crc = (crc >> 1) ^ (0xEDB8_8320 & (crc & 1).wrapping_neg());
            }
        }
        !crc
    }

    #[test]
    fn crc_is_nanovdbs() {
        assert_eq!(crc32_bitwise(b"123456789"), 0xCBF4_3926);
        let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + i / 13) as u8).collect();
        assert_eq!(crc32fast::hash(&data), crc32_bitwise(&data));
    }

    #[test]
    fn blocked_crc_blocks() {
        let data: Vec<u8> = (0..9000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(blocked_crc32(&[]), EMPTY32);
        // Fewer than 4096 bytes: zero blocks, the CRC of nothing.
        assert_eq!(blocked_crc32(&data[..4095]), crc32_bitwise(&[]));
        let one = crc32_bitwise(&data[..5000]).to_le_bytes();
        assert_eq!(blocked_crc32(&data[..5000]), crc32_bitwise(&one));
        let mut two = crc32_bitwise(&data[..4096]).to_le_bytes().to_vec();
        two.extend_from_slice(&crc32_bitwise(&data[4096..]).to_le_bytes());
        assert_eq!(blocked_crc32(&data), crc32_bitwise(&two));
        // Many blocks (the parallel path) agree with a serial computation.
        let big: Vec<u8> = (0..(PARALLEL_MIN as u32 + 3) * 4096 + 17)
            .map(|i| (i % 253) as u8)
            .collect();
        let mut crcs = Vec::new();
        let blocks = big.len() / 4096;
        for i in 0..blocks {
            let end = if i + 1 == blocks {
                big.len()
            } else {
                (i + 1) * 4096
            };
            crcs.extend_from_slice(&crc32_bitwise(&big[i * 4096..end]).to_le_bytes());
        }
        assert_eq!(blocked_crc32(&big), crc32_bitwise(&crcs));
    }

    #[test]
    fn current_scheme_covers_headers_then_blocks() {
        let g = grid(GridType::Fp8, NanoVdbVersion::V32_9);
        let stored = LeBytes::new(&g).u64_at(8, "checksum").unwrap();
        assert_eq!(stored as u32, crc32_bitwise(&g[16..736]));
        assert_eq!((stored >> 32) as u32, blocked_crc32(&g[736..]));
        assert_eq!(compute_checksum(&g).unwrap(), stored);
        assert_eq!(
            verify_checksum(&g, Version::new(32, 9, 2)),
            ChecksumState::Valid
        );
        assert_eq!(
            verify_checksum(&g, Version::new(32, 7, 0)),
            ChecksumState::Valid
        );
        // Trailing padding (4 KiB alignment) is not part of the grid.
        let mut padded = g.clone();
        padded.resize(g.len().next_multiple_of(4096), 0xAA);
        assert_eq!(
            verify_checksum(&padded, Version::new(32, 9, 2)),
            ChecksumState::Valid
        );
        // The same bytes judged as a 32.4 grid do not match.
        assert!(matches!(
            verify_checksum(&g, Version::new(32, 4, 2)),
            ChecksumState::Mismatch { .. }
        ));
    }

    #[test]
    fn legacy_scheme_covers_root_and_nodes() {
        let g = grid(GridType::Float, NanoVdbVersion::V32_4);
        let stored = LeBytes::new(&g).u64_at(8, "checksum").unwrap();
        let tiles = LeBytes::new(&g).u32_at(736 + 24, "tiles").unwrap() as usize;
        assert_eq!(stored as u32, crc32_bitwise(&g[16..736 + 64 + 32 * tiles]));
        // Tail: CRC of the per-node CRCs widened to 8 bytes, nodes in memory order here.
        let l = layout::layout(GridType::Float).unwrap();
        let counts: Vec<usize> = (0..3)
            .map(|i| LeBytes::new(&g).u32_at(672 + 32 + 4 * i, "count").unwrap() as usize)
            .collect();
        let mut at = 736 + 64 + 32 * tiles;
        let mut list = Vec::new();
        for (count, size) in [
            (counts[2], l.upper.size),
            (counts[1], l.lower.size),
            (counts[0], l.leaf.size),
        ] {
            for _ in 0..count {
                list.extend_from_slice(
                    &u64::from(crc32_bitwise(&g[at..at + size as usize])).to_le_bytes(),
                );
                at += size as usize;
            }
        }
        assert_eq!(at, g.len());
        assert_eq!((stored >> 32) as u32, crc32_bitwise(&list));
    }

    #[test]
    fn older_variants_verify_for_their_versions() {
        let v32_4 = Version::new(32, 4, 2);
        let v32_6 = Version::new(32, 6, 0);
        for t in [GridType::Float, GridType::FpN] {
            let base = grid(t, NanoVdbVersion::V32_4);
            let variants = [
                ChecksumScheme::LEGACY_LP64,
                ChecksumScheme::NodeWise {
                    entry_bytes: 4,
                    fpn_whole_leaf: false,
                },
                ChecksumScheme::NodeWise {
                    entry_bytes: 4,
                    fpn_whole_leaf: true,
                },
            ];
            for scheme in variants {
                let mut g = base.clone();
                restamp(&mut g, v32_4, scheme, true);
                assert_eq!(
                    verify_checksum(&g, v32_4),
                    ChecksumState::Valid,
                    "{t} {scheme:?}"
                );
                assert!(matches!(
                    verify_checksum(&g, Version::new(32, 9, 0)),
                    ChecksumState::Mismatch { .. }
                ));
            }
            // 32.6 wrote the blocked tail from the first upper node; 32.7+ re-verify 32.6.0
            // grids node-wise. Both count as valid for a 32.6 stamp.
            for scheme in [
                ChecksumScheme::Blocked32_6,
                ChecksumScheme::NodeWise {
                    entry_bytes: 4,
                    fpn_whole_leaf: true,
                },
            ] {
                let mut g = base.clone();
                restamp(&mut g, v32_6, scheme, true);
                assert_eq!(
                    verify_checksum(&g, v32_6),
                    ChecksumState::Valid,
                    "{t} {scheme:?}"
                );
            }
            // A head-only checksum is checked on the head alone.
            let mut g = base.clone();
            restamp(&mut g, v32_4, ChecksumScheme::LEGACY_LP64, false);
            let last = g.len() - 1;
            g[last] ^= 0xFF;
            assert_eq!(verify_checksum(&g, v32_4), ChecksumState::Valid);
            g[100] ^= 1;
            let ChecksumState::Mismatch { stored, computed } = verify_checksum(&g, v32_4) else {
                panic!("head change not detected");
            };
            assert_eq!((stored >> 32, computed >> 32), (0xFFFF_FFFF, 0xFFFF_FFFF));
            assert_ne!(stored as u32, computed as u32);
        }
        // 8- and 4-byte entries really differ, so the variants are distinguishable.
        let g = grid(GridType::Float, NanoVdbVersion::V32_4);
        let a = compute_checksum_with(&g, ChecksumScheme::LEGACY_LP64, true).unwrap();
        let b = compute_checksum_with(
            &g,
            ChecksumScheme::NodeWise {
                entry_bytes: 4,
                fpn_whole_leaf: false,
            },
            true,
        )
        .unwrap();
        assert_eq!(a as u32, b as u32);
        assert_ne!(a >> 32, b >> 32);
    }

    #[test]
    fn broken_bytes_are_a_mismatch_not_a_panic() {
        let g = grid(GridType::Float, NanoVdbVersion::V32_4);
        let v = Version::new(32, 4, 2);
        for cut in [0, 10, 700, 800, g.len() / 2] {
            assert!(matches!(
                verify_checksum(&g[..cut], v),
                ChecksumState::Mismatch { .. }
            ));
        }
        let mut bad = g.clone();
        // A child offset pointing far outside the grid.
        bad[736 + 64 + 8..736 + 64 + 16].copy_from_slice(&(1i64 << 40).to_le_bytes());
        assert!(matches!(
            verify_checksum(&bad, v),
            ChecksumState::Mismatch { .. }
        ));
        assert!(
            compute_checksum(&bad).is_err()
                || compute_checksum(&bad).unwrap() != compute_checksum(&g).unwrap()
        );
        let empty = SparseVolume::default();
        let e = build_grid(
            &empty,
            &BuildOptions {
                checksum: ChecksumMode::Full,
                ..BuildOptions::default()
            },
        )
        .unwrap();
        assert_eq!(verify_checksum(&e, v), ChecksumState::Valid);
    }
}
