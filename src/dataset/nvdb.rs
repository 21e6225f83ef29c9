//! The dataset layer's narrow view of a NanoVDB grid: what the manifest records about it,
//! and whether it is intact. Everything NanoVDB-specific goes through here.

use crate::format::layout::{GRID_FLAG_HAS_BBOX, GRID_FLAG_HAS_MIN_MAX};
use crate::format::{
    ChecksumState, Coord, Grid, GridClass, GridType, Value, Version, verify_checksum,
};

/// What the manifest needs from a grid header.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct GridInfo {
    pub name: String,
    pub grid_type: GridType,
    pub grid_class: GridClass,
    pub version: Version,
    pub checksum: u64,
    pub value_range: Option<[f64; 2]>,
    pub index_bbox: Option<[Coord; 2]>,
    pub world_bbox: Option<[[f64; 3]; 2]>,
    pub voxel_size: Option<[f64; 3]>,
}

/// Parses and validates a grid buffer, which must hold exactly one grid (its `gridSize`
/// bytes: the manifest records that size, and trailing bytes would be silently dropped
/// on export), and extracts its header information.
pub(crate) fn inspect(bytes: &[u8]) -> Result<GridInfo, String> {
    let g = Grid::parse(bytes).map_err(|e| e.to_string())?;
    if g.grid_size() != bytes.len() as u64 {
        return Err(format!(
            "buffer is {} bytes but the grid header says {} (one grid per buffer)",
            bytes.len(),
            g.grid_size()
        ));
    }
    let h = g.header();
    let empty = g.active_voxel_count() == 0;
    let has_bbox = h.flags & GRID_FLAG_HAS_BBOX != 0 && !empty;
    let index_bbox =
        Some(g.index_bbox()).filter(|[lo, hi]| has_bbox && (0..3).all(|i| lo[i] <= hi[i]));
    let world_bbox = Some(g.world_bbox()).filter(|[lo, hi]| {
        has_bbox && (0..3).all(|i| lo[i].is_finite() && hi[i].is_finite() && lo[i] <= hi[i])
    });
    let value_range = if h.flags & GRID_FLAG_HAS_MIN_MAX != 0 && !empty {
        g.root_stats()
            .and_then(|s| Some([magnitude(&s.min)?, magnitude(&s.max)?]))
            .filter(|[lo, hi]| lo.is_finite() && hi.is_finite() && lo <= hi)
    } else {
        None
    };
    // A voxel size the manifest would refuse (zero, negative, non-finite) is not recorded.
    let voxel_size = Some(g.voxel_size()).filter(|v| v.iter().all(|x| x.is_finite() && *x > 0.0));
    Ok(GridInfo {
        name: g.name().to_owned(),
        grid_type: g.grid_type(),
        grid_class: g.grid_class(),
        version: g.version(),
        checksum: g.stored_checksum(),
        value_range,
        index_bbox,
        world_bbox,
        voxel_size,
    })
}

/// A scalar as itself, a vector as its length (NanoVDB orders vector min/max by length).
fn magnitude(v: &Value) -> Option<f64> {
    fn len(c: impl IntoIterator<Item = f64>) -> f64 {
        c.into_iter().map(|x| x * x).sum::<f64>().sqrt()
    }
    match *v {
        Value::Vec3f(c) => Some(len(c.map(f64::from))),
        Value::Vec3d(c) => Some(len(c)),
        Value::Vec4f(c) => Some(len(c.map(f64::from))),
        Value::Vec4d(c) => Some(len(c)),
        Value::Vec3u8(c) => Some(len(c.map(f64::from))),
        Value::Vec3u16(c) => Some(len(c.map(f64::from))),
        ref s => s.as_f64(),
    }
}

/// Recomputes the grid's checksum and compares it with the one in its header. A grid
/// without a checksum passes (there is nothing to compare).
pub(crate) fn check_checksum(bytes: &[u8], version: Version) -> Result<(), String> {
    match verify_checksum(bytes, version) {
        ChecksumState::Valid | ChecksumState::Absent => Ok(()),
        ChecksumState::Mismatch { stored, computed } => Err(format!(
            "NanoVDB checksum mismatch: header says {stored:016x}, bytes give {computed:016x}"
        )),
    }
}
