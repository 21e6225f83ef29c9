//! What the first bytes of a compressed grid claim about its size, checked before the rest
//! is inflated.
//!
//! A NanoVDB grid is laid out as its writers lay it (`tools::GridBuilder`, `CreateNanoGrid`,
//! every version 32.3–32.9): grid header, tree header, root (with its tile table), upper,
//! lower and leaf nodes, then blind metadata and blind data. The tree header gives each
//! level's offset and node count, so the first [`HEAD_BYTES`] of a grid (grid and tree
//! headers, and the root's header up to its table size) say how many bytes the nodes take.
//! A grid size the nodes cannot explain (a real header whose size field was raised to 8 GiB,
//! followed by a stream of zeros) is refused after inflating those bytes alone.
//!
//! Blind data's sizes are in its metadata, after the nodes: a grid with blind data is
//! checked up to where its blind metadata starts, and the rest of its claim is bounded by
//! the ratio limit of [`super::codec`].

use super::layout::{self as l, DATA_ALIGNMENT, LeafKind};
use super::le::LeBytes;
use super::types::GridType;

/// Decompressed bytes [`check_head_claims`] reads: the grid and tree headers, and the root's
/// header up to and including its tile-table size (the root follows the tree header).
pub(crate) const HEAD_BYTES: u64 =
    (l::GRID_SIZE + l::TREE_SIZE + l::ROOT_OFF_TABLE_SIZE + 4) as u64;

/// Checks that the grid whose first bytes are `head` (at least [`HEAD_BYTES`]) can be the
/// `grid_size` bytes its header claims: every node level lies inside it, after the one
/// before, and without blind data the nodes end where the grid does.
pub(crate) fn check_head_claims(head: &[u8], grid_size: u64) -> Result<(), String> {
    let le = LeBytes::new(head);
    let field = |r: Result<u64, super::FormatError>| r.map_err(|e| e.to_string());
    let gtype = field(
        le.u32_at(l::GRID_OFF_GRID_TYPE as usize, "grid type")
            .map(u64::from),
    )?;
    let layout = GridType::from_u32(gtype as u32)
        .and_then(l::layout)
        .ok_or_else(|| format!("grid type {gtype} is not one this reader parses"))?;
    let tree = u64::from(l::GRID_SIZE);
    let tree_u64 = |off: u32, what: &str| field(le.u64_at((tree + u64::from(off)) as usize, what));
    let tree_u32 = |off: u32, what: &str| {
        field(
            le.u32_at((tree + u64::from(off)) as usize, what)
                .map(u64::from),
        )
    };
    let root = tree.saturating_add(tree_u64(l::TREE_OFF_NODE_OFFSET_ROOT, "root offset")?);
    let table_at = root.saturating_add(u64::from(l::ROOT_OFF_TABLE_SIZE));
    if table_at + 4 > head.len() as u64 {
        return Err(format!(
            "the root is at byte {root}, not after the tree header as NanoVDB writes it"
        ));
    }
    let table = field(
        le.u32_at(table_at as usize, "root table size")
            .map(u64::from),
    )?;
    let root_end = root
        .saturating_add(u64::from(layout.root.size))
        .saturating_add(table.saturating_mul(u64::from(layout.root.tile_size)));
    // FpN leaves take 96 + 64 × (1 to 16) bytes each; every other leaf type one size.
    let (leaf_min, leaf_max) = match layout.leaf.kind {
        LeafKind::QuantizedVariable => {
            (l::LEAF_FPN_BASE_SIZE + 64, l::LEAF_FPN_BASE_SIZE + 64 * 16)
        }
        _ => (layout.leaf.size, layout.leaf.size),
    };
    let levels = [
        (
            "upper",
            l::TREE_OFF_NODE_OFFSET_UPPER,
            l::TREE_OFF_NODE_COUNT_UPPER,
            layout.upper.size,
            layout.upper.size,
        ),
        (
            "lower",
            l::TREE_OFF_NODE_OFFSET_LOWER,
            l::TREE_OFF_NODE_COUNT_LOWER,
            layout.lower.size,
            layout.lower.size,
        ),
        (
            "leaf",
            l::TREE_OFF_NODE_OFFSET_LEAF,
            l::TREE_OFF_NODE_COUNT_LEAF,
            leaf_min,
            leaf_max,
        ),
    ];
    let (mut end_min, mut end_max) = (root_end, root_end);
    for (level, off, count, min, max) in levels {
        let count = tree_u32(count, "node count")?;
        if count == 0 {
            continue;
        }
        let start = tree.saturating_add(tree_u64(off, "node offset")?);
        if start < end_min {
            return Err(format!(
                "the {count} {level} nodes start at byte {start}, inside the nodes before them \
                 (which end at byte {end_min} or later)"
            ));
        }
        end_min = start.saturating_add(count.saturating_mul(u64::from(min)));
        end_max = start.saturating_add(count.saturating_mul(u64::from(max)));
        if end_min > grid_size {
            return Err(format!(
                "the {count} {level} nodes end at byte {end_min} or later, past the grid's \
                 claimed {grid_size} bytes"
            ));
        }
    }
    let aligned_max = end_max.next_multiple_of(u64::from(DATA_ALIGNMENT));
    let blind_count = field(
        le.u32_at(
            l::GRID_OFF_BLIND_METADATA_COUNT as usize,
            "blind data count",
        )
        .map(u64::from),
    )?;
    if blind_count == 0 {
        if grid_size > aligned_max {
            return Err(format!(
                "the grid header claims {grid_size} bytes, but its nodes (the tree header's \
                 node counts) end by byte {aligned_max} and it has no blind data"
            ));
        }
        return Ok(());
    }
    let blind_at = field(le.u64_at(
        l::GRID_OFF_BLIND_METADATA_OFFSET as usize,
        "blind metadata offset",
    ))?;
    let blind_end =
        blind_at.saturating_add(blind_count.saturating_mul(u64::from(l::BLIND_META_SIZE)));
    if blind_at < end_min || blind_at > aligned_max || blind_end > grid_size {
        return Err(format!(
            "{blind_count} blind metadata records at byte {blind_at} are not right after the \
             nodes (which end between bytes {end_min} and {aligned_max}) inside the grid's \
             claimed {grid_size} bytes"
        ));
    }
    Ok(())
}
