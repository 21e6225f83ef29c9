//! An attribute's record as frames are written: made from its spec, then widened by each
//! grid's statistics (value range, boxes, types), or by another rank's record of it.

use super::AttributeSpec;
use crate::dataset::manifest::Attribute;
use crate::dataset::nvdb::GridInfo;
use crate::format::{GridClass, GridType};

/// An attribute of `spec`, before any grid.
pub(super) fn new_attribute(spec: AttributeSpec) -> Attribute {
    Attribute {
        name: spec.name,
        grid_type: GridType::Unknown,
        grid_class: GridClass::Unknown,
        value_range: None,
        index_bbox: None,
        world_bbox: None,
        voxel_size: None,
        units: spec.units,
    }
}

pub(super) fn merge_stats(attr: &mut Attribute, info: &GridInfo) {
    let grid = Attribute {
        grid_type: info.grid_type,
        grid_class: info.grid_class,
        voxel_size: info.voxel_size,
        value_range: info.value_range,
        index_bbox: info.index_bbox,
        world_bbox: info.world_bbox,
        ..new_attribute(AttributeSpec::new(String::new()))
    };
    merge_attribute(attr, &grid);
}

/// Extends `attr`'s statistics by `info`'s (its type, class and voxel size where `attr`
/// has none yet).
pub(super) fn merge_attribute(attr: &mut Attribute, info: &Attribute) {
    if attr.grid_type == GridType::Unknown {
        attr.grid_type = info.grid_type;
        attr.grid_class = info.grid_class;
        attr.voxel_size = info.voxel_size;
        attr.value_range = info.value_range;
        attr.index_bbox = info.index_bbox;
        attr.world_bbox = info.world_bbox;
        return;
    }
    attr.value_range = union(attr.value_range, info.value_range, |[a0, a1], [b0, b1]| {
        [a0.min(b0), a1.max(b1)]
    });
    attr.index_bbox = union(
        attr.index_bbox,
        info.index_bbox,
        |[amin, amax], [bmin, bmax]| {
            [
                std::array::from_fn(|i| amin[i].min(bmin[i])),
                std::array::from_fn(|i| amax[i].max(bmax[i])),
            ]
        },
    );
    attr.world_bbox = union(
        attr.world_bbox,
        info.world_bbox,
        |[amin, amax], [bmin, bmax]| {
            [
                std::array::from_fn(|i| amin[i].min(bmin[i])),
                std::array::from_fn(|i| amax[i].max(bmax[i])),
            ]
        },
    );
}

fn union<T: Copy>(a: Option<T>, b: Option<T>, f: impl Fn(T, T) -> T) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(f(a, b)),
        (a, b) => a.or(b),
    }
}
