//! The grid header: magic, version, size, type, and the cheap arrival check.

use super::*;

/// The grid header's fields that both the full parse ([`parse_at`]) and the cheap arrival
/// check ([`check_header`]) start from, validated once, in one place.
pub(super) struct GridHead {
    pub(super) magic: GridMagic,
    pub(super) version: Version,
    pub(super) grid_size: u64,
    pub(super) grid_type: GridType,
    pub(super) layout: l::TreeLayout,
    pub(super) grid_index: u32,
    pub(super) grid_count: u32,
}

/// Validates the grid header at the start of `h` (which holds at least the 672-byte grid
/// header): magic, version, a grid size between the two headers' size and `limit` (the bytes
/// the grid may span), a grid type with a layout, and the grid index and count. `base` is the
/// header's offset, for the errors.
pub(super) fn grid_head(h: &[u8], limit: u64, base: u64) -> Result<GridHead, FormatError> {
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
pub(super) fn check_header(g: &[u8], len: u64) -> Result<u64, FormatError> {
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
