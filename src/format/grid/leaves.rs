//! Leaves: the leaf array of the parse (fixed-size, or FpN's variable-size leaves walked one
//! by one), and the iterator and views over a validated grid's leaves.

use super::accessor::masked;
use super::validate::{Ctx, Level, level};
use super::*;

/// The leaf level of the tree: `count` leaves of layout `lf` from the tree's leaf offset.
/// FpN leaves vary in size, so each one's size is read from its flags and checked in turn.
pub(super) fn leaf_level(
    cx: &Ctx<'_>,
    lf: &l::LeafLayout,
    count: u32,
) -> Result<Level, FormatError> {
    if lf.fixed_size() {
        return level(cx, "leaf", 0, count, lf.size);
    }
    // FpN: the smallest leaf (1-bit codes) has 160 bytes, which bounds the walk and the
    // allocation before any leaf is read.
    let mut lv = level(cx, "leaf", 0, count, l::LEAF_FPN_BASE_SIZE + 64)?;
    let mut offsets = Vec::with_capacity(lv.count);
    let mut off = lv.first;
    for i in 0..lv.count {
        cx.span(
            &|| format!("leaf {i}"),
            off,
            u64::from(l::LEAF_FPN_BASE_SIZE),
        )?;
        let flags = cx
            .le()
            .u8_at(off + l::LEAF_OFF_FLAGS as usize, "leaf flags")?;
        let size = l::fpn_leaf_size(flags).ok_or_else(|| {
            cx.corrupt(
                format!("leaf {i}"),
                off,
                format!(
                    "FpN bit-width code {} (flags {flags:#04x}) is not 1, 2, 4, 8 or 16 bits",
                    flags >> 5
                ),
            )
        })? as usize;
        cx.span(&|| format!("leaf {i}"), off, size as u64)?;
        offsets.push(off);
        off += size;
    }
    lv.size = 0;
    lv.offsets = Some(offsets);
    lv.end = off;
    Ok(lv)
}

// The views below read only the leaf parse validated (its header and mask lie inside the
// leaf, whose span was checked); such reads go through `proven`.

/// Iterator over the leaves of a grid, see [`Grid::leaves`].
#[derive(Clone, Debug)]
pub struct Leaves<'g, 'a> {
    pub(super) grid: &'g Grid<'a>,
    pub(super) next: usize,
}

impl<'g, 'a> Iterator for Leaves<'g, 'a> {
    type Item = LeafView<'g, 'a>;
    fn next(&mut self) -> Option<Self::Item> {
        let off = self.grid.leaf_at_index(self.next)?;
        self.next += 1;
        Some(LeafView {
            grid: self.grid,
            off,
        })
    }
    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = (self.grid.header.node_counts.leaves as usize).saturating_sub(self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Leaves<'_, '_> {}

/// One validated leaf node.
#[derive(Clone, Copy, Debug)]
pub struct LeafView<'g, 'a> {
    pub(super) grid: &'g Grid<'a>,
    pub(super) off: usize,
}

impl LeafView<'_, '_> {
    /// Byte offset of the leaf inside the grid buffer.
    pub fn offset(&self) -> usize {
        self.off
    }
    /// Index coordinate of voxel (0, 0, 0); multiples of 8 (checked at parse against the
    /// position the tree gives the leaf).
    pub fn origin(&self) -> Coord {
        let min = self
            .grid
            .le()
            .coord_at(self.off + l::LEAF_OFF_BBOX_MIN as usize, "leaf origin");
        masked(proven(min), 7)
    }
    /// The leaf's flags byte.
    pub fn flags(&self) -> u8 {
        proven(
            self.grid
                .le()
                .u8_at(self.off + l::LEAF_OFF_FLAGS as usize, "leaf flags"),
        )
    }
    /// Active-state mask: bit `n % 64` of word `n / 64` for voxel `n = x*64 + y*8 + z`.
    pub fn active_mask(&self) -> [u64; 8] {
        let m = self.off + l::LEAF_OFF_VALUE_MASK as usize;
        let le = self.grid.le();
        std::array::from_fn(|w| proven(le.u64_at(m + 8 * w, "leaf value mask")))
    }
    /// Number of active voxels.
    pub fn active_count(&self) -> u32 {
        self.active_mask().iter().map(|w| w.count_ones()).sum()
    }
    /// Whether voxel `n` (0..512) is active; false for `n >= 512`.
    pub fn is_active(&self, n: usize) -> bool {
        n < LEAF_VOXELS
            && self
                .grid
                .mask_bit(self.off + l::LEAF_OFF_VALUE_MASK as usize, n)
    }
    /// The value of voxel `n` (0..512), decoded as [`Grid::value`] does.
    pub fn value(&self, n: usize) -> Result<Value, FormatError> {
        self.grid.check_supported()?;
        if n >= LEAF_VOXELS {
            return Err(FormatError::Corrupt {
                what: "leaf voxel index".into(),
                offset: self.grid.base + self.off as u64,
                detail: format!("{n} is not below 512"),
            });
        }
        self.grid.leaf_value(self.off, n)
    }
    /// All 512 values as f32, for scalar grids (Float, Half, Fp4/8/16/N; Double and integers
    /// are converted with `as`). Vector, bool and index grids give `Unsupported`.
    pub fn values_f32(&self) -> Result<Box<[f32; LEAF_VOXELS]>, FormatError> {
        use GridType::*;
        let t = self.grid.header.grid_type;
        if !matches!(
            t,
            Float | Half | Fp4 | Fp8 | Fp16 | FpN | Double | Int16 | Int32 | Int64 | UInt32 | UInt8
        ) {
            return Err(FormatError::Unsupported {
                grid_type: t,
                detail: "not a scalar grid",
            });
        }
        let mut out = Box::new([0f32; LEAF_VOXELS]);
        for (n, v) in out.iter_mut().enumerate() {
            *v = self.grid.leaf_value(self.off, n)?.as_f32().unwrap_or(0.0);
        }
        Ok(out)
    }
    /// The leaf as a [`LeafBrick`] (origin, f32 values, active mask), for scalar grids.
    pub fn to_brick(&self) -> Result<LeafBrick, FormatError> {
        Ok(LeafBrick {
            origin: self.origin(),
            values: self.values_f32()?,
            active: self.active_mask(),
        })
    }
}
