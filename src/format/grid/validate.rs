//! Structural checks of the tree: the root and its tiles, the node arrays, that no two regions
//! overlap, and that every node is referenced exactly once at the place its origin says.

use super::super::le::LeBytes;
use super::accessor::masked;
use super::*;

/// The grid being validated, for reads and for errors that give offsets in the whole buffer.
pub(super) struct Ctx<'b> {
    /// The whole buffer (for messages only).
    pub(super) base: u64,
    /// The grid's bytes.
    pub(super) g: &'b [u8],
}

impl<'b> Ctx<'b> {
    /// The grid's bytes through the bounds-checked reader.
    pub(super) fn le(&self) -> LeBytes<'b> {
        LeBytes::grid(self.g, self.base)
    }
    pub(super) fn corrupt(
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
    pub(super) fn truncated(&self, what: impl Into<String>, off: usize, need: u64) -> FormatError {
        FormatError::Truncated {
            what: what.into(),
            offset: self.base + off as u64,
            need,
            len: self.g.len() as u64,
            within: "grid",
        }
    }
    /// Checks that `[off, off + len)` lies in the grid.
    pub(super) fn span(
        &self,
        what: &dyn Fn() -> String,
        off: usize,
        len: u64,
    ) -> Result<(), FormatError> {
        let end = (off as u64).checked_add(len);
        match end {
            Some(end) if end <= self.g.len() as u64 => Ok(()),
            _ => Err(self.truncated(what(), off, len)),
        }
    }
    /// `base + rel`, checked to lie inside the grid; errors name `what` at byte `at`.
    pub(super) fn rel(
        &self,
        what: &dyn Fn() -> String,
        at: usize,
        base: usize,
        rel: i64,
    ) -> Result<usize, FormatError> {
        self.rel_as(what, "", at, base, rel)
    }
    /// As [`Ctx::rel`], with `role` (e.g. "child 12: ") before the message.
    pub(super) fn rel_as(
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
pub(super) struct Level {
    pub(super) name: &'static str,
    pub(super) first: usize,
    pub(super) count: usize,
    /// Node size (fixed-size levels).
    pub(super) size: usize,
    /// Sorted node offsets of variable-size (FpN) leaves.
    pub(super) offsets: Option<Vec<usize>>,
    /// One past the last byte of the last node.
    pub(super) end: usize,
}

impl Level {
    /// The index of the node starting at `off`, if one does.
    pub(super) fn index_of(&self, off: usize) -> Option<usize> {
        match &self.offsets {
            Some(o) => o.binary_search(&off).ok(),
            None => {
                let d = off.checked_sub(self.first)?;
                (self.size != 0 && d % self.size == 0 && d / self.size < self.count)
                    .then_some(d / self.size)
            }
        }
    }
    pub(super) fn offset(&self, i: usize) -> usize {
        match &self.offsets {
            Some(o) => o.get(i).copied().unwrap_or(0),
            None => self.first + i * self.size,
        }
    }
}

/// Calls `f(n)` for every set bit `n` of the `bits`-bit mask at `off`, in ascending order.
pub(super) fn for_each_set_bit(
    le: &LeBytes<'_>,
    off: usize,
    bits: usize,
    mut f: impl FnMut(usize) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    for w in 0..bits / 64 {
        let mut word = le.u64_at(off + 8 * w, "child mask")?;
        while word != 0 {
            let b = word.trailing_zeros() as usize;
            word &= word - 1;
            f(w * 64 + b)?;
        }
    }
    Ok(())
}

pub(super) fn add_coord(a: Coord, b: Coord) -> Coord {
    [
        a[0].wrapping_add(b[0]),
        a[1].wrapping_add(b[1]),
        a[2].wrapping_add(b[2]),
    ]
}

/// The tree header's offset (from the tree header) of the first node of `level` (0 leaves,
/// 1 lower, 2 upper, 3 the root).
pub(super) fn tree_offset(cx: &Ctx<'_>, level: u32) -> Result<u64, FormatError> {
    let tree = l::GRID_SIZE as usize;
    cx.le().u64_at(
        tree + (l::TREE_OFF_NODE_OFFSET_LEAF + 8 * level) as usize,
        "tree node offset",
    )
}

/// The root node and its tile table.
pub(super) struct Root {
    /// Offset of the root in the grid.
    pub(super) offset: usize,
    pub(super) tile_count: u32,
    /// One past the last tile.
    pub(super) end: usize,
}

/// Checks the root's offset, that it and its tiles lie in the grid, after the headers.
pub(super) fn root(cx: &Ctx<'_>, layout: &TreeLayout) -> Result<Root, FormatError> {
    let g = cx.g;
    let tree = l::GRID_SIZE as usize;
    let root_rel = tree_offset(cx, 3)?;
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
    let tile_count = cx
        .le()
        .u32_at(root + l::ROOT_OFF_TABLE_SIZE as usize, "root tile count")?;
    let tiles_len = u64::from(tile_count) * u64::from(rl.tile_size);
    cx.span(
        &|| format!("root table of {tile_count} tiles"),
        root + rl.size as usize,
        tiles_len,
    )?;
    Ok(Root {
        offset: root,
        tile_count,
        end: root + rl.size as usize + tiles_len as usize,
    })
}

/// The contiguous array of `count` nodes of `size` bytes that the tree header's offset for
/// level `idx` points at, checked to lie in the grid.
pub(super) fn level(
    cx: &Ctx<'_>,
    name: &'static str,
    idx: u32,
    count: u32,
    size: u32,
) -> Result<Level, FormatError> {
    let g = cx.g;
    let tree = l::GRID_SIZE as usize;
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
    let rel = tree_offset(cx, idx)?;
    lv.first = usize::try_from(rel)
        .ok()
        .and_then(|r| r.checked_add(tree))
        .filter(|&f| f < g.len() && f % l::DATA_ALIGNMENT as usize == 0)
        .ok_or_else(|| {
            cx.corrupt(
                "tree",
                tree,
                format!(
                    "offset {rel} of the first {name} points outside the {}-byte grid or is not \
                     32-byte aligned",
                    g.len()
                ),
            )
        })?;
    let total = (count as u64).saturating_mul(u64::from(size));
    cx.span(&|| format!("array of {count} {name}s"), lv.first, total)?;
    lv.end = lv.first + total as usize;
    Ok(lv)
}

/// The three node levels below the root.
pub(super) struct Levels {
    pub(super) upper: Level,
    pub(super) lower: Level,
    pub(super) leaves: Level,
}

/// The regions must not overlap (NanoVDB writes them in this order, back to back).
pub(super) fn check_no_overlap(
    cx: &Ctx<'_>,
    root: &Root,
    levels: &Levels,
) -> Result<(), FormatError> {
    let tree = l::GRID_SIZE as usize;
    let mut regions = vec![(
        0usize,
        tree + l::TREE_SIZE as usize,
        "grid and tree headers",
    )];
    regions.push((root.offset, root.end, "root and its tiles"));
    for lv in [&levels.upper, &levels.lower, &levels.leaves] {
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
    Ok(())
}

/// Root tiles → upper nodes → lower nodes → leaves: every node must be referenced exactly
/// once; origins follow from the path (root key, then table positions) and are checked
/// against the origins the leaves store.
pub(super) fn check_links(
    cx: &Ctx<'_>,
    layout: &TreeLayout,
    root: &Root,
    levels: &Levels,
) -> Result<(), FormatError> {
    let Levels {
        upper,
        lower,
        leaves,
    } = levels;
    let upper_origin = root_children(cx, layout, root, upper)?;
    let upper_origin = origins(cx, upper_origin, upper, "root tile")?;
    let mut lower_origin = vec![None; lower.count];
    check_children(
        cx,
        upper,
        &upper_origin,
        &layout.upper,
        lower,
        &mut lower_origin,
    )?;
    let lower_origin = origins(cx, lower_origin, lower, "upper node")?;
    let mut leaf_origin = vec![None; leaves.count];
    check_children(
        cx,
        lower,
        &lower_origin,
        &layout.lower,
        leaves,
        &mut leaf_origin,
    )?;
    let leaf_origin = origins(cx, leaf_origin, leaves, "lower node")?;
    for (i, expected) in leaf_origin.iter().enumerate() {
        let off = leaves.offset(i);
        let stored = cx
            .le()
            .coord_at(off + l::LEAF_OFF_BBOX_MIN as usize, "leaf origin")?;
        let stored = masked(stored, 7);
        if stored != *expected {
            return Err(cx.corrupt(
                format!("leaf {i}"),
                off,
                format!("origin {stored:?} does not match its place {expected:?} in the tree"),
            ));
        }
    }
    Ok(())
}

/// The upper nodes the root's child tiles point at, with the origins their keys give.
fn root_children(
    cx: &Ctx<'_>,
    layout: &TreeLayout,
    root: &Root,
    upper: &Level,
) -> Result<Vec<Option<Coord>>, FormatError> {
    let le = cx.le();
    let rl = layout.root;
    let mut upper_origin: Vec<Option<Coord>> = vec![None; upper.count];
    for t in 0..root.tile_count as usize {
        let tile = root.offset + rl.size as usize + t * rl.tile_size as usize;
        let child = le.i64_at(tile + l::ROOT_TILE_OFF_CHILD as usize, "root tile child")?;
        if child == 0 {
            continue;
        }
        let what = || format!("root tile {t}");
        let target = cx.rel(&what, tile, root.offset, child)?;
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
        let key = le.u64_at(tile + l::ROOT_TILE_OFF_KEY as usize, "root tile key")?;
        upper_origin[idx] = Some(l::key_to_coord(key));
    }
    Ok(upper_origin)
}

/// The origins of a level's nodes, each of which must have been reached by some `by`.
fn origins(
    cx: &Ctx<'_>,
    v: Vec<Option<Coord>>,
    lv: &Level,
    by: &str,
) -> Result<Vec<Coord>, FormatError> {
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
}

/// Follows the child references of every node of `parent` (layout `nl`) into `child_level`,
/// recording each child's origin; a child reached twice, or an offset that is not a node of
/// `child_level`, is an error.
fn check_children(
    cx: &Ctx<'_>,
    parent: &Level,
    parent_origin: &[Coord],
    nl: &l::NodeLayout,
    child_level: &Level,
    child_origin: &mut [Option<Coord>],
) -> Result<(), FormatError> {
    let le = cx.le();
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
            &le,
            node + nl.off_child_mask as usize,
            nl.table_count() as usize,
            |n| {
                let entry = node + nl.off_table as usize + n * nl.table_stride as usize;
                let child = le.i64_at(entry, "child offset")?;
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
}
