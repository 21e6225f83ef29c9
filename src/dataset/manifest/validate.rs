//! The checks of a manifest that need no lane file: format and version, lanes, attributes,
//! every frame's grids and extents, and that no two extents share bytes. Each failure is a
//! message naming the frame and field.

use super::{
    ALIGN, Attribute, FORMAT_NAME, FORMAT_VERSION, Frame, GridEntry, Manifest, check_units, naming,
};
use crate::dataset::stripe::align_up;

/// Checks everything that can be checked without the lane files. Returns a message
/// naming the frame and field on failure.
pub(super) fn manifest(m: &Manifest) -> Result<(), String> {
    if m.format != FORMAT_NAME {
        return Err(format!(
            "format is {:?}, expected {FORMAT_NAME:?}",
            m.format
        ));
    }
    if m.version != FORMAT_VERSION {
        return Err(format!("version {} is not supported", m.version));
    }
    if !naming::is_write_id(&m.write_id) {
        return Err(format!(
            "write_id {:?} is not 1 to 96 ASCII letters, digits, '-' or '_'",
            m.write_id
        ));
    }
    if m.chunk_size == 0 || !m.chunk_size.is_multiple_of(ALIGN) {
        return Err(format!(
            "chunk_size {} is not a positive multiple of {ALIGN}",
            m.chunk_size
        ));
    }
    if m.lanes.is_empty() {
        return Err("lanes: none listed".into());
    }
    if u32::try_from(m.lanes.len()).is_err() {
        return Err(format!("lanes: {} is too many", m.lanes.len()));
    }
    lanes(m)?;
    attributes(m)?;
    bricks(m)?;
    if m.frame_count != m.frames.len() {
        return Err(format!(
            "frame_count is {} but {} frames are listed",
            m.frame_count,
            m.frames.len()
        ));
    }
    // (lane, file, start, end, frame, extent) of every extent, to find shared bytes.
    let total_extents: usize = m.frames.iter().map(|f| f.extents.len()).sum();
    let mut ranges: Vec<ExtentRange> = Vec::with_capacity(total_extents);
    let mut prev_time = f64::NEG_INFINITY;
    for (fi, frame) in m.frames.iter().enumerate() {
        frame_grids(m, fi, frame, prev_time)?;
        prev_time = frame.time;
        frame_extents(m, fi, frame, &mut ranges)?;
        frame_bricks(m, fi, frame)?;
    }
    ranges.sort_unstable();
    for w in ranges.windows(2) {
        let (a, b) = (w[0], w[1]);
        if a.0 == b.0 && a.1 == b.1 && a.3 > b.2 {
            return Err(format!(
                "frame {} extents[{}] and frame {} extents[{}] share bytes of lane {} file {} (from offset {})",
                a.4, a.5, b.4, b.5, a.0, a.1, b.2
            ));
        }
    }
    Ok(())
}

/// Lanes: named, plain file names of this write's pattern, aligned sizes, no file twice.
fn lanes(m: &Manifest) -> Result<(), String> {
    for (l, lane) in m.lanes.iter().enumerate() {
        if lane.path.is_empty() {
            return Err(format!("lanes[{l}].path is empty"));
        }
        if lane.path.contains('\0') {
            return Err(format!("lanes[{l}].path contains a NUL byte"));
        }
        if u32::try_from(lane.files.len()).is_err() {
            return Err(format!("lanes[{l}].files: too many"));
        }
        for (f, file) in lane.files.iter().enumerate() {
            if !is_plain_file_name(&file.name) {
                return Err(format!(
                    "lanes[{l}].files[{f}].name {:?} is not a plain file name",
                    file.name
                ));
            }
            // Only files of this write's naming pattern are ever opened, so a manifest
            // cannot point a reader at an arbitrary file of a lane directory.
            let expected = naming::lane_file_name(&m.write_id, l as u32, f);
            if file.name != expected {
                return Err(format!(
                    "lanes[{l}].files[{f}].name {:?} does not follow the dataset's naming pattern (expected {expected:?})",
                    file.name
                ));
            }
            if !file.size.is_multiple_of(ALIGN) {
                return Err(format!(
                    "lanes[{l}].files[{f}].size {} is not a multiple of {ALIGN}",
                    file.size
                ));
            }
        }
        // Two entries naming one file would make two lane-file ranges alias.
        let mut names: Vec<&str> = lane.files.iter().map(|f| f.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("lanes[{l}].files lists {:?} twice", w[0]));
        }
    }
    Ok(())
}

/// Attributes: named once each, sane value ranges, units and bounding boxes.
fn attributes(m: &Manifest) -> Result<(), String> {
    if m.attributes.is_empty() {
        return Err("attributes: none listed".into());
    }
    if u32::try_from(m.attributes.len()).is_err() {
        return Err("attributes: too many".into());
    }
    for (a, attr) in m.attributes.iter().enumerate() {
        if attr.name.is_empty() {
            return Err(format!("attributes[{a}].name is empty"));
        }
        if let Some(b) = m.attributes[..a].iter().position(|x| x.name == attr.name) {
            return Err(format!(
                "attributes[{a}].name {:?} is also attributes[{b}].name",
                attr.name
            ));
        }
        if let Some([lo, hi]) = attr.value_range
            && (lo.is_nan() || hi.is_nan() || lo > hi)
        {
            return Err(format!(
                "attributes[{a}].value_range [{lo}, {hi}] is inverted"
            ));
        }
        if let Some(units) = &attr.units {
            check_units(units).map_err(|why| format!("attributes[{a}].units {why}"))?;
        }
        check_boxes(a, attr)?;
    }
    Ok(())
}

/// One frame's time (finite, after `prev_time`), slot size and grids: one per attribute,
/// aligned, inside the slot image, not overlapping.
fn frame_grids(m: &Manifest, fi: usize, frame: &Frame, prev_time: f64) -> Result<(), String> {
    let err = |msg: String| format!("frame {fi}: {msg}");
    if !frame.time.is_finite() {
        return Err(err(format!("time {} is not finite", frame.time)));
    }
    if frame.time <= prev_time {
        return Err(err(format!(
            "time {} does not increase (previous frame: {prev_time})",
            frame.time
        )));
    }
    if frame.slot_size == 0 || !frame.slot_size.is_multiple_of(ALIGN) {
        return Err(err(format!(
            "slot_size {} is not a positive multiple of {ALIGN}",
            frame.slot_size
        )));
    }
    // Grids: one per attribute (and brick), aligned, inside the slot image, not
    // overlapping.
    let per_frame = m.attributes.len() * m.bricks.len().max(1);
    if frame.grids.len() != per_frame {
        return Err(err(format!(
            "{} grids listed, the dataset has {} attributes{}",
            frame.grids.len(),
            m.attributes.len(),
            match m.bricks.len() {
                0 => String::new(),
                n => format!(" in each of {n} bricks"),
            }
        )));
    }
    let mut seen = vec![false; per_frame];
    for (gi, g) in frame.grids.iter().enumerate() {
        let a = g.attribute as usize;
        if a >= m.attributes.len() {
            return Err(err(format!(
                "grids[{gi}].attribute {a} is not an attribute index (there are {})",
                m.attributes.len()
            )));
        }
        let b = match (g.brick, m.bricks.len()) {
            (None, 0) => 0,
            (Some(b), n) if (b as usize) < n => b as usize,
            (Some(b), n) => {
                return Err(err(format!(
                    "grids[{gi}].brick {b} is not a brick index (there are {n})"
                )));
            }
            (None, n) => {
                return Err(err(format!(
                    "grids[{gi}] has no brick, the dataset has {n} bricks"
                )));
            }
        };
        if std::mem::replace(&mut seen[b * m.attributes.len() + a], true) {
            return Err(err(match g.brick {
                None => format!("grids[{gi}].attribute {a} appears twice"),
                Some(b) => format!("grids[{gi}]: attribute {a} of brick {b} appears twice"),
            }));
        }
        if !g.offset.is_multiple_of(ALIGN) {
            return Err(err(format!(
                "grids[{gi}].offset {} is not a multiple of {ALIGN}",
                g.offset
            )));
        }
        if g.size == 0 {
            return Err(err(format!("grids[{gi}].size is 0")));
        }
        let end = g
            .offset
            .checked_add(g.size)
            .filter(|&e| e <= frame.slot_size);
        if end.is_none() {
            return Err(err(format!(
                "grids[{gi}] (offset {}, size {}) extends past slot_size {}",
                g.offset, g.size, frame.slot_size
            )));
        }
    }
    let mut by_offset: Vec<(usize, &GridEntry)> = frame.grids.iter().enumerate().collect();
    by_offset.sort_by_key(|(_, g)| g.offset);
    for w in by_offset.windows(2) {
        let ((i, a), (j, b)) = (w[0], w[1]);
        // Padded end: the padding belongs to the grid (the writer zeroes it).
        let a_end = align_up(a.offset + a.size).unwrap_or(u64::MAX);
        if a_end > b.offset {
            return Err(err(format!("grids[{i}] and grids[{j}] overlap")));
        }
    }
    Ok(())
}

/// The bricks (see [`crate::dataset::bricks`]), and that every attribute's world box lies
/// inside their domain's: a voxel outside every brick would be drawn by no rank. (World
/// boxes, since an attribute on a finer grid has an index space of its own.)
fn bricks(m: &Manifest) -> Result<(), String> {
    crate::dataset::bricks::check_bricks(&m.bricks)?;
    let Some(first) = m.bricks.first() else {
        return Ok(());
    };
    let [mut lo, mut hi] = first.world_box;
    for b in &m.bricks {
        for i in 0..3 {
            lo[i] = lo[i].min(b.world_box[0][i]);
            hi[i] = hi[i].max(b.world_box[1][i]);
        }
    }
    // Rounding of the world transform: a millionth of the domain's extent.
    let slack: [f64; 3] = std::array::from_fn(|i| (hi[i] - lo[i]).abs() * 1e-6);
    for (a, attr) in m.attributes.iter().enumerate() {
        if let Some([bmin, bmax]) = attr.world_bbox
            && (0..3).any(|i| bmin[i] < lo[i] - slack[i] || bmax[i] > hi[i] + slack[i])
        {
            return Err(format!(
                "attributes[{a}].world_bbox {bmin:?}..{bmax:?} reaches outside the bricks' domain {lo:?}..{hi:?}"
            ));
        }
    }
    Ok(())
}

/// A bricked frame's grids: brick-major (grid `i` is attribute `i % A` of brick `i / A`)
/// and in slot order, so each brick's grids are one contiguous range of the slot image;
/// and an extent starts where each brick's range does, so that no extent holds bytes of
/// two bricks (a rank reads its brick's extents only, each with its own CRC).
fn frame_bricks(m: &Manifest, fi: usize, frame: &Frame) -> Result<(), String> {
    if m.bricks.is_empty() {
        return Ok(());
    }
    let attributes = m.attributes.len();
    for (gi, g) in frame.grids.iter().enumerate() {
        let expected = ((gi % attributes) as u32, Some((gi / attributes) as u32));
        if (g.attribute, g.brick) != expected {
            return Err(format!(
                "frame {fi}: grids[{gi}] is attribute {} of brick {:?}; a bricked frame lists its grids brick by brick, each brick's in attribute order (expected attribute {} of brick {})",
                g.attribute,
                g.brick,
                expected.0,
                gi / attributes
            ));
        }
        if gi > 0 && frame.grids[gi - 1].offset >= g.offset {
            return Err(format!(
                "frame {fi}: grids[{gi}] does not follow grids[{}] in the slot image",
                gi - 1
            ));
        }
    }
    for b in 1..m.bricks.len() {
        let start = frame.grids[b * attributes].offset;
        if frame
            .extents
            .binary_search_by_key(&start, |e| e.dst)
            .is_err()
        {
            return Err(format!(
                "frame {fi}: no extent starts at byte {start}, where brick {b}'s grids begin (an extent holds bytes of two bricks)"
            ));
        }
    }
    Ok(())
}

/// One frame's extents: aligned, in bounds, sorted by dst and tiling 0..slot_size; each
/// one's lane-file byte range is added to `ranges`.
fn frame_extents(
    m: &Manifest,
    fi: usize,
    frame: &Frame,
    ranges: &mut Vec<ExtentRange>,
) -> Result<(), String> {
    let err = |msg: String| format!("frame {fi}: {msg}");
    // Extents: aligned, in bounds, sorted by dst and tiling 0..slot_size.
    if frame.extents.is_empty() {
        return Err(err("no extents".into()));
    }
    let mut expect_dst = 0u64;
    for (ei, e) in frame.extents.iter().enumerate() {
        let err = |msg: String| format!("frame {fi}: extents[{ei}]: {msg}");
        let lane = m.lanes.get(e.lane as usize).ok_or_else(|| {
            err(format!(
                "lane {} does not exist (there are {})",
                e.lane,
                m.lanes.len()
            ))
        })?;
        let file = lane.files.get(e.file as usize).ok_or_else(|| {
            err(format!(
                "file {} does not exist in lane {} (it has {})",
                e.file,
                e.lane,
                lane.files.len()
            ))
        })?;
        for (what, v) in [("offset", e.offset), ("len", e.len), ("dst", e.dst)] {
            if !v.is_multiple_of(ALIGN) {
                return Err(err(format!("{what} {v} is not a multiple of {ALIGN}")));
            }
        }
        if e.len == 0 || e.len > m.chunk_size {
            return Err(err(format!(
                "len {} is not in 1..={} (the chunk size)",
                e.len, m.chunk_size
            )));
        }
        let end = e.offset.checked_add(e.len);
        if end.is_none_or(|end| end > file.size) {
            return Err(err(format!(
                "bytes {}..{} lie outside lane {} file {} ({:?}, {} bytes)",
                e.offset,
                e.offset.saturating_add(e.len),
                e.lane,
                e.file,
                file.name,
                file.size
            )));
        }
        if e.dst != expect_dst {
            return Err(err(format!(
                "dst {} leaves {} (extents must cover the slot image in order with no gap or overlap; expected dst {expect_dst})",
                e.dst,
                if e.dst > expect_dst {
                    "a gap"
                } else {
                    "an overlap"
                }
            )));
        }
        expect_dst = e.dst + e.len; // e.len <= chunk_size, e.dst <= slot_size: no overflow
        if expect_dst > frame.slot_size {
            return Err(err(format!(
                "ends at {expect_dst}, past slot_size {}",
                frame.slot_size
            )));
        }
        ranges.push((e.lane, e.file, e.offset, e.offset + e.len, fi, ei));
    }
    if expect_dst != frame.slot_size {
        return Err(err(format!(
            "extents cover {expect_dst} bytes of slot_size {}",
            frame.slot_size
        )));
    }
    Ok(())
}

/// Checks an attribute's boxes and voxel size: a box inverted on any axis or a voxel size
/// that is not a finite number > 0 would give every reader a domain of no extent, or
/// divisions by zero when index and world coordinates are mapped.
/// One extent's lane-file byte range: (lane, file, start, end, frame, extent index), sorted
/// to find bytes two extents share.
type ExtentRange = (u32, u32, u64, u64, usize, usize);

fn check_boxes(a: usize, attr: &Attribute) -> Result<(), String> {
    if let Some([lo, hi]) = attr.index_bbox
        && let Some(axis) = (0..3).find(|&i| lo[i] > hi[i])
    {
        return Err(format!(
            "attributes[{a}].index_bbox {lo:?}..{hi:?} is inverted on axis {} (min > max)",
            AXES[axis]
        ));
    }
    if let Some([lo, hi]) = attr.world_bbox {
        if let Some(axis) = (0..3).find(|&i| !(lo[i].is_finite() && hi[i].is_finite())) {
            return Err(format!(
                "attributes[{a}].world_bbox {lo:?}..{hi:?} is not finite on axis {}",
                AXES[axis]
            ));
        }
        if let Some(axis) = (0..3).find(|&i| lo[i] > hi[i]) {
            return Err(format!(
                "attributes[{a}].world_bbox {lo:?}..{hi:?} is inverted on axis {} (min {} > max {})",
                AXES[axis], lo[axis], hi[axis]
            ));
        }
    }
    if let Some(v) = attr.voxel_size
        && let Some(axis) = (0..3).find(|&i| !(v[i].is_finite() && v[i] > 0.0))
    {
        return Err(format!(
            "attributes[{a}].voxel_size {v:?}: the {} size {} is not a finite number > 0",
            AXES[axis], v[axis]
        ));
    }
    Ok(())
}

/// Axis names for messages.
const AXES: [&str; 3] = ["x", "y", "z"];

fn is_plain_file_name(s: &str) -> bool {
    !s.is_empty() && s != "." && s != ".." && !s.contains(['/', '\\', '\0'])
}
