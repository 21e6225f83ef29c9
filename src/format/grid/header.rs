//! The headers: the grid header (magic, version, size, type, name, map) and the tree header
//! (node offsets and counts), for the full parse and for the cheap arrival check.

use super::super::le::LeBytes;
use super::validate::Ctx;
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
    // Both callers check that `h` holds the grid header, so these reads are in bounds.
    let le = LeBytes::grid(h, base);
    let magic: [u8; 8] = le.array(0, "grid magic")?;
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
    let version = Version(le.u32_at(l::GRID_OFF_VERSION as usize, "grid version")?);
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
    let grid_size = le.u64_at(l::GRID_OFF_GRID_SIZE as usize, "grid size")?;
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
    let type_raw = le.u32_at(l::GRID_OFF_GRID_TYPE as usize, "grid type")?;
    let grid_type = GridType::from_u32(type_raw)
        .ok_or_else(|| hdr_err(format!("unknown grid type {type_raw}")))?;
    let layout = l::layout(grid_type).ok_or_else(|| {
        hdr_err(format!(
            "grid type {type_raw} ({grid_type:?}) has no defined layout"
        ))
    })?;
    let grid_index = le.u32_at(l::GRID_OFF_GRID_INDEX as usize, "grid index")?;
    let grid_count = le.u32_at(l::GRID_OFF_GRID_COUNT as usize, "grid count")?;
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
    // The tree header lies inside the `have` bytes checked above.
    let le = LeBytes::new(g);
    let toff = |i: u32| {
        le.u64_at(
            tree + (l::TREE_OFF_NODE_OFFSET_LEAF + 8 * i) as usize,
            "tree node offset",
        )
    };
    let tcnt = |off: u32| le.u32_at(tree + off as usize, "tree node count");
    let align = u64::from(l::DATA_ALIGNMENT);
    let root_rel = toff(3)?;
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
    let tile_count = le.u32_at(count_at as usize, "root tile count")?;
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
            tcnt(l::TREE_OFF_NODE_COUNT_UPPER)?,
            layout.upper.size,
        ),
        (
            1,
            "lower node",
            tcnt(l::TREE_OFF_NODE_COUNT_LOWER)?,
            layout.lower.size,
        ),
        (0, "leaf", tcnt(l::TREE_OFF_NODE_COUNT_LEAF)?, leaf_size),
    ] {
        if count == 0 {
            continue;
        }
        let rel = toff(idx)?;
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

/// The grid at byte `base` of `buf`: its `grid_size` bytes and validated header fields.
pub(super) fn grid_bytes(buf: &[u8], base: u64) -> Result<(&[u8], GridHead), FormatError> {
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
    if (avail.len() as u64) < u64::from(l::GRID_SIZE) {
        return Err(FormatError::Truncated {
            what: "grid header".into(),
            offset: base,
            need: u64::from(l::GRID_SIZE),
            len: avail.len() as u64,
            within: "buffer",
        });
    }
    let head = grid_head(avail, avail.len() as u64, base)?;
    // `grid_head` checked the size against `avail`.
    Ok((&avail[..head.grid_size as usize], head))
}

/// The tree header's counts (its node offsets are read where each level is checked).
pub(super) struct TreeHead {
    pub(super) node_counts: NodeCounts,
    pub(super) tile_counts: TileCounts,
    pub(super) active_voxel_count: u64,
}

/// Reads the tree header, which follows the grid header (the grid size covers both).
pub(super) fn tree_head(cx: &Ctx<'_>) -> Result<TreeHead, FormatError> {
    let tree = l::GRID_SIZE as usize;
    let le = cx.le();
    let tcnt = |off: u32| le.u32_at(tree + off as usize, "tree count");
    Ok(TreeHead {
        node_counts: NodeCounts {
            leaves: tcnt(l::TREE_OFF_NODE_COUNT_LEAF)?,
            lower: tcnt(l::TREE_OFF_NODE_COUNT_LOWER)?,
            upper: tcnt(l::TREE_OFF_NODE_COUNT_UPPER)?,
        },
        tile_counts: TileCounts {
            lower: tcnt(l::TREE_OFF_TILE_COUNT_LOWER)?,
            upper: tcnt(l::TREE_OFF_TILE_COUNT_UPPER)?,
            root: tcnt(l::TREE_OFF_TILE_COUNT_ROOT)?,
        },
        active_voxel_count: le.u64_at(tree + l::TREE_OFF_VOXEL_COUNT as usize, "voxel count")?,
    })
}

/// The grid's name: the long name from blind data where the header flags one, else the
/// 256-byte name field. Checks the blind metadata array lies inside the grid.
fn grid_name(
    cx: &Ctx<'_>,
    flags: u32,
    blind_metadata_offset: i64,
    blind_metadata_count: u32,
) -> Result<String, FormatError> {
    let g = cx.g;
    let le = cx.le();
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
                let class = le.u32_at(
                    meta + l::BLIND_META_OFF_DATA_CLASS as usize,
                    "blind data class",
                )?;
                if class != l::BLIND_CLASS_GRID_NAME {
                    continue;
                }
                let what = || format!("blind metadata {i} (grid name)");
                let data_rel = le.i64_at(
                    meta + l::BLIND_META_OFF_DATA_OFFSET as usize,
                    "blind data offset",
                )?;
                let data = cx.rel(&what, meta, meta, data_rel)?;
                let max = le.u64_at(
                    meta + l::BLIND_META_OFF_VALUE_COUNT as usize,
                    "blind value count",
                )?;
                let max = usize::try_from(max).unwrap_or(usize::MAX);
                // The name runs to its NUL, the value count or the end of the grid.
                let end = g.len().min(data.saturating_add(max));
                let s = le.span(data, end - data, "grid name")?;
                let s = s.split(|&c| c == 0).next().unwrap_or(s);
                long_name = Some(String::from_utf8_lossy(s).into_owned());
                break;
            }
        }
    }
    match long_name {
        Some(name) => Ok(name),
        None => {
            let field = le.span(
                l::GRID_OFF_GRID_NAME as usize,
                l::GRID_NAME_SIZE as usize,
                "grid name",
            )?;
            let s = field.split(|&c| c == 0).next().unwrap_or(field);
            Ok(String::from_utf8_lossy(s).into_owned())
        }
    }
}

/// The full [`GridHeader`], from the validated head and tree header and the root at `root`
/// (which holds the index bounding box).
pub(super) fn grid_header(
    cx: &Ctx<'_>,
    head: GridHead,
    tree: TreeHead,
    root: usize,
) -> Result<GridHeader, FormatError> {
    let le = cx.le();
    let class_raw = le.u32_at(l::GRID_OFF_GRID_CLASS as usize, "grid class")?;
    let grid_class = GridClass::from_u32(class_raw).unwrap_or(GridClass::Unknown);
    let flags = le.u32_at(l::GRID_OFF_FLAGS as usize, "grid flags")?;
    let blind_metadata_offset = le.i64_at(
        l::GRID_OFF_BLIND_METADATA_OFFSET as usize,
        "blind metadata offset",
    )?;
    let blind_metadata_count = le.u32_at(
        l::GRID_OFF_BLIND_METADATA_COUNT as usize,
        "blind metadata count",
    )?;
    let name = grid_name(cx, flags, blind_metadata_offset, blind_metadata_count)?;
    let map_off = l::GRID_OFF_MAP as usize;
    let f = "grid map";
    let map = Map {
        mat: le.f64s(map_off + l::MAP_OFF_MATD as usize, f)?,
        inv_mat: le.f64s(map_off + l::MAP_OFF_INVMATD as usize, f)?,
        vec: le.f64s(map_off + l::MAP_OFF_VECD as usize, f)?,
        taper: le.f64_at(map_off + l::MAP_OFF_TAPERD as usize, f)?,
        mat_f: le.f32s(map_off + l::MAP_OFF_MATF as usize, f)?,
        inv_mat_f: le.f32s(map_off + l::MAP_OFF_INVMATF as usize, f)?,
        vec_f: le.f32s(map_off + l::MAP_OFF_VECF as usize, f)?,
    };
    let wb: [f64; 6] = le.f64s(l::GRID_OFF_WORLD_BBOX as usize, "world bounding box")?;
    Ok(GridHeader {
        magic: head.magic,
        checksum: le.u64_at(l::GRID_OFF_CHECKSUM as usize, "grid checksum")?,
        version: head.version,
        flags,
        grid_index: head.grid_index,
        grid_count: head.grid_count,
        grid_size: head.grid_size,
        name,
        map,
        world_bbox: [[wb[0], wb[1], wb[2]], [wb[3], wb[4], wb[5]]],
        voxel_size: le.f64s(l::GRID_OFF_VOXEL_SIZE as usize, "voxel size")?,
        grid_class,
        grid_class_raw: class_raw,
        grid_type: head.grid_type,
        blind_metadata_offset,
        blind_metadata_count,
        data1: le.u64_at(l::GRID_OFF_DATA1 as usize, "grid data1")?,
        index_bbox: [
            le.coord_at(root + l::NODE_OFF_BBOX_MIN as usize, "root bounding box")?,
            le.coord_at(root + l::NODE_OFF_BBOX_MAX as usize, "root bounding box")?,
        ],
        active_voxel_count: tree.active_voxel_count,
        node_counts: tree.node_counts,
        tile_counts: tree.tile_counts,
    })
}
