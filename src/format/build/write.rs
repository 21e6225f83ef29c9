//! Internal nodes, root, tree and grid headers.

use super::*;

/// Writes an internal node (zeroed `dst`) whose children are `(table index, byte offset)`
/// in table order, with `child_stats` their statistics in the same order.
pub(super) fn write_internal(
    nl: &NodeLayout,
    children: impl Iterator<Item = (usize, usize)>,
    child_stats: &[NodeStats],
    background: f32,
    dst: &mut [u8],
) -> NodeStats {
    let mut total = NodeStats::EMPTY;
    for s in child_stats {
        total.merge(s);
    }
    let child_mask = nl.off_child_mask as usize;
    let table = nl.off_table as usize;
    let stride = nl.table_stride as usize;
    // Tiles hold the background: every voxel outside the bricks reads as background.
    if background.to_bits() != 0 {
        let bg = background.to_le_bytes();
        for entry in dst[table..table + stride * nl.table_count() as usize].chunks_exact_mut(stride)
        {
            entry[..4].copy_from_slice(&bg);
        }
    }
    for (n, offset) in children {
        dst[child_mask + n / 8] |= 1 << (n % 8);
        dst[table + n * stride..][..8].copy_from_slice(&(offset as i64).to_le_bytes());
    }
    if total.is_empty() {
        // No active values: bbox stays NanoVDB's empty sentinel, rendering off, no stats.
        put_i32s(dst, NODE_OFF_BBOX_MIN as usize, &total.min);
        put_i32s(dst, NODE_OFF_BBOX_MAX as usize, &total.max);
        dst[INTERNAL_OFF_FLAGS as usize..][..8].copy_from_slice(&1u64.to_le_bytes());
    } else {
        put_i32s(dst, NODE_OFF_BBOX_MIN as usize, &total.min);
        put_i32s(dst, NODE_OFF_BBOX_MAX as usize, &total.max);
        dst[INTERNAL_OFF_FLAGS as usize..][..8].copy_from_slice(&2u64.to_le_bytes());
        put_f32(dst, nl.off_min as usize, total.stats.min);
        put_f32(dst, nl.off_max as usize, total.stats.max);
        put_f32(dst, nl.off_avg as usize, total.stats.avg as f32);
        put_f32(dst, nl.off_stddev as usize, total.stats.std() as f32);
    }
    total
}

/// Writes the root and its tiles at the start of `dst`; `upper_rel` is the first upper node's
/// offset from the root.
pub(super) fn write_root(
    tl: &TreeLayout,
    plan: &Plan,
    upper_stats: &[NodeStats],
    background: f32,
    dst: &mut [u8],
    upper_rel: usize,
) -> NodeStats {
    let r = &tl.root;
    let mut total = NodeStats::EMPTY;
    put_f32(dst, r.off_background as usize, background);
    dst[ROOT_OFF_TABLE_SIZE as usize..][..4]
        .copy_from_slice(&(plan.uppers.len() as u32).to_le_bytes());
    if plan.uppers.is_empty() {
        put_f32(dst, r.off_min as usize, background);
        put_f32(dst, r.off_max as usize, background);
    } else {
        for (i, (span, s)) in plan.uppers.iter().zip(upper_stats).enumerate() {
            let tile = r.size as usize + i * r.tile_size as usize;
            let child = upper_rel + i * tl.upper.size as usize;
            dst[tile + ROOT_TILE_OFF_KEY as usize..][..8]
                .copy_from_slice(&layout::coord_to_key(span.origin).to_le_bytes());
            dst[tile + ROOT_TILE_OFF_CHILD as usize..][..8]
                .copy_from_slice(&(child as i64).to_le_bytes());
            total.merge(s);
        }
        // GridStats sets the root's statistics even when no value is active.
        put_f32(dst, r.off_min as usize, total.stats.min);
        put_f32(dst, r.off_max as usize, total.stats.max);
        put_f32(dst, r.off_avg as usize, total.stats.avg as f32);
        put_f32(dst, r.off_stddev as usize, total.stats.std() as f32);
    }
    put_i32s(dst, NODE_OFF_BBOX_MIN as usize, &total.min);
    put_i32s(dst, NODE_OFF_BBOX_MAX as usize, &total.max);
    total
}

/// Writes `TreeData`; `at` holds absolute offsets of the first leaf, lower, upper node and root.
pub(super) fn write_tree(dst: &mut [u8], at: [usize; 4], counts: [usize; 3], voxel_count: u64) {
    let tree = GRID_SIZE as usize;
    for level in 0..4 {
        let present = level == 3 || counts[level] > 0;
        let rel = if present {
            (at[level] - tree) as u64
        } else {
            0
        };
        dst[TREE_OFF_NODE_OFFSET_LEAF as usize + 8 * level..][..8]
            .copy_from_slice(&rel.to_le_bytes());
    }
    for (level, &c) in counts.iter().enumerate() {
        dst[TREE_OFF_NODE_COUNT_LEAF as usize + 4 * level..][..4]
            .copy_from_slice(&(c as u32).to_le_bytes());
    }
    // No active tiles at any level: the writer only produces voxels.
    dst[TREE_OFF_TILE_COUNT_LOWER as usize..][..12].fill(0);
    dst[TREE_OFF_VOXEL_COUNT as usize..][..8].copy_from_slice(&voxel_count.to_le_bytes());
}

/// NanoVDB's `Map::applyMap` (32.7+: fused multiply-adds) for a uniform scale `s` and
/// translation `t`.
pub(super) fn apply_map(s: [f64; 3], t: [f64; 3], ijk: [f64; 3]) -> [f64; 3] {
    let m = |r: usize, c: usize| if r == c { s[r] } else { 0.0 };
    let row = |r: usize| {
        ijk[0].mul_add(
            m(r, 0),
            ijk[1].mul_add(m(r, 1), ijk[2].mul_add(m(r, 2), t[r])),
        )
    };
    [row(0), row(1), row(2)]
}

pub(super) fn write_grid_header(
    dst: &mut [u8],
    opts: &BuildOptions,
    grid_size: usize,
    root: &NodeStats,
) {
    let v = opts.version;
    dst[GRID_OFF_MAGIC as usize..][..8].copy_from_slice(&v.magic().to_le_bytes());
    dst[GRID_OFF_VERSION as usize..][..4].copy_from_slice(&v.version().0.to_le_bytes());
    dst[GRID_OFF_GRID_INDEX as usize..][..4].copy_from_slice(&0u32.to_le_bytes());
    dst[GRID_OFF_GRID_COUNT as usize..][..4].copy_from_slice(&1u32.to_le_bytes());
    dst[GRID_OFF_GRID_SIZE as usize..][..8].copy_from_slice(&(grid_size as u64).to_le_bytes());
    dst[GRID_OFF_GRID_NAME as usize..][..opts.name.len()].copy_from_slice(opts.name.as_bytes());

    // Map: a per-axis scale and a translation, as Map::set(Vec3d(dx, dy, dz), trans).
    let (s, t) = (opts.voxel_size, opts.world_origin);
    let map = GRID_OFF_MAP as usize;
    for (i, &ti) in t.iter().enumerate() {
        // Row-major 3x3: the diagonal entries are 0, 4 and 8.
        let diag = map + 4 * (3 * i + i);
        put_f32(dst, diag + MAP_OFF_MATF as usize, s[i] as f32);
        // f32 of the f64 inverse, as Map::set casts its double matrices.
        put_f32(dst, diag + MAP_OFF_INVMATF as usize, (1.0 / s[i]) as f32);
        put_f32(dst, map + MAP_OFF_VECF as usize + 4 * i, ti as f32);
        let diag = map + 8 * (3 * i + i);
        put_f64(dst, diag + MAP_OFF_MATD as usize, s[i]);
        put_f64(dst, diag + MAP_OFF_INVMATD as usize, 1.0 / s[i]);
        put_f64(dst, map + MAP_OFF_VECD as usize + 8 * i, ti);
    }
    put_f32(dst, map + MAP_OFF_TAPERF as usize, 1.0);
    put_f64(dst, map + MAP_OFF_TAPERD as usize, 1.0);

    // World bbox: the index bbox with its max corner made exclusive, mapped corner by corner.
    let mut flags = GRID_FLAG_IS_BREADTH_FIRST
        | GRID_FLAG_HAS_MIN_MAX
        | GRID_FLAG_HAS_AVERAGE
        | GRID_FLAG_HAS_STD_DEVIATION;
    let (mut wmin, mut wmax) = ([f64::MAX; 3], [-f64::MAX; 3]);
    if !root.is_empty() {
        flags |= GRID_FLAG_HAS_BBOX;
        let lo = root.min.map(f64::from);
        let hi = root.max.map(|c| f64::from(c) + 1.0);
        for corner in 0..8 {
            let p = [
                if corner & 4 != 0 { hi[0] } else { lo[0] },
                if corner & 2 != 0 { hi[1] } else { lo[1] },
                if corner & 1 != 0 { hi[2] } else { lo[2] },
            ];
            let w = apply_map(s, t, p);
            for a in 0..3 {
                wmin[a] = wmin[a].min(w[a]);
                wmax[a] = wmax[a].max(w[a]);
            }
        }
    }
    for a in 0..3 {
        put_f64(dst, GRID_OFF_WORLD_BBOX as usize + 8 * a, wmin[a]);
        put_f64(dst, GRID_OFF_WORLD_BBOX as usize + 24 + 8 * a, wmax[a]);
    }
    let (one, zero) = (apply_map(s, t, [1.0; 3]), apply_map(s, t, [0.0; 3]));
    for a in 0..3 {
        put_f64(dst, GRID_OFF_VOXEL_SIZE as usize + 8 * a, one[a] - zero[a]);
    }
    dst[GRID_OFF_FLAGS as usize..][..4].copy_from_slice(&flags.to_le_bytes());
    dst[GRID_OFF_GRID_CLASS as usize..][..4]
        .copy_from_slice(&(opts.grid_class as u32).to_le_bytes());
    dst[GRID_OFF_GRID_TYPE as usize..][..4].copy_from_slice(&(opts.grid_type as u32).to_le_bytes());
    // No blind data. 32.4's builder stored offset 0, 32.7+ store the grid size.
    let blind = match v {
        NanoVdbVersion::V32_4 => 0,
        NanoVdbVersion::V32_9 => grid_size as u64,
    };
    dst[GRID_OFF_BLIND_METADATA_OFFSET as usize..][..8].copy_from_slice(&blind.to_le_bytes());
    dst[GRID_OFF_BLIND_METADATA_COUNT as usize..][..4].copy_from_slice(&0u32.to_le_bytes());
    dst[GRID_OFF_DATA0 as usize..][..4].fill(0);
    dst[GRID_OFF_DATA1 as usize..][..8].fill(0);
    dst[GRID_OFF_DATA2 as usize..][..8].fill(0);
}

#[inline]
pub(super) fn put_f32(dst: &mut [u8], at: usize, v: f32) {
    dst[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(super) fn put_f64(dst: &mut [u8], at: usize, v: f64) {
    dst[at..at + 8].copy_from_slice(&v.to_le_bytes());
}

#[inline]
pub(super) fn put_i32s(dst: &mut [u8], at: usize, v: &Coord) {
    for (a, c) in v.iter().enumerate() {
        dst[at + 4 * a..at + 4 * a + 4].copy_from_slice(&c.to_le_bytes());
    }
}
