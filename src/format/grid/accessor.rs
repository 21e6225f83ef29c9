//! Value lookup: locating a coordinate in the tree and decoding the value there.

use super::super::layout::LeafKind;
use super::super::le::LeBytes;
use super::*;

/// Where a coordinate's value lives.
#[derive(Clone, Copy, Debug)]
pub(super) enum Loc {
    /// The root's background (no tile): value offset in the grid.
    Background(usize),
    /// A value tile in the root: offset of the tile.
    RootTile(usize),
    /// A tile in an upper (`level` 2) or lower (`level` 1) node.
    Internal { level: u8, node: usize, n: usize },
    /// A voxel of a leaf.
    Leaf { node: usize, n: usize },
}

#[inline]
pub(super) fn upper_offset(ijk: Coord) -> usize {
    ((((ijk[0] & 4095) >> 7) << 10) | (((ijk[1] & 4095) >> 7) << 5) | ((ijk[2] & 4095) >> 7))
        as usize
}
#[inline]
pub(super) fn lower_offset(ijk: Coord) -> usize {
    ((((ijk[0] & 127) >> 3) << 8) | (((ijk[1] & 127) >> 3) << 4) | ((ijk[2] & 127) >> 3)) as usize
}
#[inline]
pub(super) fn leaf_offset(ijk: Coord) -> usize {
    (((ijk[0] & 7) << 6) | ((ijk[1] & 7) << 3) | (ijk[2] & 7)) as usize
}
pub(super) fn masked(ijk: Coord, mask: i32) -> Coord {
    [ijk[0] & !mask, ijk[1] & !mask, ijk[2] & !mask]
}

// Lookups read only what parse validated: root tiles, the child and value masks of nodes and
// the child offsets under set child bits; such reads go through `proven`.
impl<'a> Grid<'a> {
    pub(super) fn check_supported(&self) -> Result<(), FormatError> {
        use GridType::*;
        match self.header.grid_type {
            Index | OnIndex | IndexMask | OnIndexMask | PointIndex | Unknown => {
                Err(FormatError::Unsupported {
                    grid_type: self.header.grid_type,
                    detail: "index and point grids store offsets into external arrays",
                })
            }
            _ => Ok(()),
        }
    }

    pub(super) fn leaf_at_index(&self, i: usize) -> Option<usize> {
        if self.layout.leaf.fixed_size() {
            (i < self.header.node_counts.leaves as usize)
                .then(|| self.leaf_first + i * self.layout.leaf.size as usize)
        } else {
            self.fpn_leaves.get(i).copied()
        }
    }

    /// Finds the root tile whose key matches `ijk` (linear search, as NanoVDB does).
    pub(super) fn find_tile(&self, ijk: Coord) -> Option<usize> {
        let key = l::coord_to_key(ijk);
        let first = self.root + self.layout.root.size as usize;
        let size = self.layout.root.tile_size as usize;
        (0..self.tile_count as usize)
            .map(|t| first + t * size)
            .find(|&tile| {
                proven(
                    self.le()
                        .u64_at(tile + l::ROOT_TILE_OFF_KEY as usize, "root tile key"),
                ) == key
            })
    }

    pub(super) fn child(&self, node: usize, table: u32, stride: u32, n: usize) -> usize {
        let entry = node + table as usize + n * stride as usize;
        // Validated at parse: node + offset is a node of the next level inside the grid.
        let child = proven(self.le().i64_at(entry, "child offset"));
        (node as i64).wrapping_add(child) as usize
    }

    pub(super) fn locate_from_root(&self, ijk: Coord, cache: &mut impl Cache) -> Loc {
        let Some(tile) = self.find_tile(ijk) else {
            return Loc::Background(self.root + self.layout.root.off_background as usize);
        };
        let child = proven(
            self.le()
                .i64_at(tile + l::ROOT_TILE_OFF_CHILD as usize, "root tile child"),
        );
        if child == 0 {
            return Loc::RootTile(tile);
        }
        let upper = (self.root as i64).wrapping_add(child) as usize;
        cache.set(2, masked(ijk, (1 << l::UPPER_TOTAL) - 1), upper);
        self.locate_from_upper(ijk, upper, cache)
    }

    pub(super) fn locate_from_upper(&self, ijk: Coord, node: usize, cache: &mut impl Cache) -> Loc {
        let u = &self.layout.upper;
        let n = upper_offset(ijk);
        if !self.mask_bit(node + u.off_child_mask as usize, n) {
            return Loc::Internal { level: 2, node, n };
        }
        let lower = self.child(node, u.off_table, u.table_stride, n);
        cache.set(1, masked(ijk, (1 << l::LOWER_TOTAL) - 1), lower);
        self.locate_from_lower(ijk, lower, cache)
    }

    pub(super) fn locate_from_lower(&self, ijk: Coord, node: usize, cache: &mut impl Cache) -> Loc {
        let lo = &self.layout.lower;
        let n = lower_offset(ijk);
        if !self.mask_bit(node + lo.off_child_mask as usize, n) {
            return Loc::Internal { level: 1, node, n };
        }
        let leaf = self.child(node, lo.off_table, lo.table_stride, n);
        cache.set(0, masked(ijk, 7), leaf);
        Loc::Leaf {
            node: leaf,
            n: leaf_offset(ijk),
        }
    }

    /// Bit `n` of the node mask at `mask_off` (a mask of a node parse validated).
    #[inline]
    pub(super) fn mask_bit(&self, mask_off: usize, n: usize) -> bool {
        proven(self.le().bit_at(mask_off, n, "node mask"))
    }

    pub(super) fn active_at(&self, loc: Loc) -> bool {
        match loc {
            Loc::Background(_) => false,
            Loc::RootTile(tile) => {
                proven(
                    self.le()
                        .u32_at(tile + l::ROOT_TILE_OFF_STATE as usize, "root tile state"),
                ) != 0
            }
            Loc::Internal { node, n, .. } => {
                self.mask_bit(node + l::INTERNAL_OFF_VALUE_MASK as usize, n)
            }
            Loc::Leaf { node, n } => self.mask_bit(node + l::LEAF_OFF_VALUE_MASK as usize, n),
        }
    }

    pub(super) fn value_at(&self, loc: Loc) -> Result<Value, FormatError> {
        match loc {
            Loc::Background(off) => self.tile_value(off),
            Loc::RootTile(tile) => self.tile_value(tile + self.layout.root.tile_off_value as usize),
            Loc::Internal { level, node, n } => {
                let nl = if level == 2 {
                    &self.layout.upper
                } else {
                    &self.layout.lower
                };
                self.tile_value(node + nl.off_table as usize + n * nl.table_stride as usize)
            }
            Loc::Leaf { node, n } => self.leaf_value(node, n),
        }
    }

    /// Decodes a value of the root/internal value type stored at `off`.
    pub(super) fn tile_value(&self, off: usize) -> Result<Value, FormatError> {
        use GridType::*;
        let b = self.le();
        let f = "value";
        Ok(match self.header.grid_type {
            Float | Fp4 | Fp8 | Fp16 | FpN => Value::Float(b.f32_at(off, f)?),
            Half => Value::Float(half_to_f32(b.u16_at(off, f)?)),
            Double => Value::Double(b.f64_at(off, f)?),
            Int16 => Value::Int(i64::from(b.u16_at(off, f)? as i16)),
            Int32 => Value::Int(i64::from(b.i32_at(off, f)?)),
            Int64 => Value::Int(b.i64_at(off, f)?),
            UInt32 => Value::Int(i64::from(b.u32_at(off, f)?)),
            UInt8 => Value::Int(i64::from(b.u8_at(off, f)?)),
            Vec3f => Value::Vec3f(b.f32s(off, f)?),
            Vec3d => Value::Vec3d(b.f64s(off, f)?),
            Vec4f => Value::Vec4f(b.f32s(off, f)?),
            Vec4d => Value::Vec4d(b.f64s(off, f)?),
            Mask | Boolean => Value::Bool(b.u8_at(off, f)? != 0),
            Rgba8 => Value::Rgba8(b.array(off, f)?),
            Vec3u8 => Value::Vec3u8(b.array(off, f)?),
            Vec3u16 => Value::Vec3u16(b.u16s(off, f)?),
            Index | OnIndex | IndexMask | OnIndexMask | PointIndex | Unknown => {
                self.check_supported()?;
                unreachable_value()
            }
        })
    }

    /// Decodes voxel `n` of the leaf at `leaf`.
    pub(super) fn leaf_value(&self, leaf: usize, n: usize) -> Result<Value, FormatError> {
        let b = self.le();
        let lf = &self.layout.leaf;
        let table = leaf + lf.off_table as usize;
        let quantized = |code: u32| -> Result<Value, FormatError> {
            let min = b.f32_at(leaf + l::LEAF_FP_OFF_MINIMUM as usize, "leaf minimum")?;
            let q = b.f32_at(leaf + l::LEAF_FP_OFF_QUANTUM as usize, "leaf quantum")?;
            // NanoVDB: float(code) * mQuantum + mMinimum, two roundings (no fused multiply-add).
            Ok(Value::Float(code as f32 * q + min))
        };
        Ok(match lf.kind {
            LeafKind::Plain => {
                let size = (lf.value_bits / 8) as usize;
                return self.tile_value(table + n * size);
            }
            LeafKind::Mask => Value::Bool(b.bit_at(
                leaf + l::LEAF_OFF_VALUE_MASK as usize,
                n,
                "leaf value mask",
            )?),
            LeafKind::Bits => Value::Bool(b.bit_at(table, n, "leaf value bits")?),
            LeafKind::Quantized { bits } => quantized(fp_code(&b, table, bits, n)?)?,
            LeafKind::QuantizedVariable => {
                let flags = b.u8_at(leaf + l::LEAF_OFF_FLAGS as usize, "leaf flags")?;
                // Parse checked every FpN leaf's bit-width code.
                let bits = l::fpn_bit_width(flags).unwrap_or(16);
                quantized(fp_code(&b, table, bits, n)?)?
            }
            LeafKind::Index | LeafKind::PointIndex => {
                self.check_supported()?;
                unreachable_value()
            }
        })
    }
}

/// Placeholder for arms that `check_supported` has already turned into errors.
pub(super) fn unreachable_value() -> Value {
    Value::Bool(false)
}

/// Code `n` of a little-endian packed array of `bits`-bit codes (1, 2, 4, 8 or 16 bits).
#[inline]
pub(super) fn fp_code(
    b: &LeBytes<'_>,
    table: usize,
    bits: u32,
    n: usize,
) -> Result<u32, FormatError> {
    let f = "quantized code";
    Ok(match bits {
        16 => u32::from(b.u16_at(table + 2 * n, f)?),
        8 => u32::from(b.u8_at(table + n, f)?),
        _ => {
            let bit = n * bits as usize;
            let byte = b.u8_at(table + (bit >> 3), f)?;
            u32::from(byte >> (bit & 7)) & ((1 << bits) - 1)
        }
    })
}

pub(super) trait Cache {
    fn set(&mut self, level: u8, key: Coord, node: usize);
}
pub(super) struct NoCache;
impl Cache for NoCache {
    #[inline]
    fn set(&mut self, _: u8, _: Coord, _: usize) {}
}

/// A value accessor that remembers the last leaf, lower and upper node it went through,
/// like NanoVDB's `ReadAccessor<BuildT, 0, 1, 2>`. Results equal [`Grid::value`] exactly.
#[derive(Clone, Debug)]
pub struct ReadAccessor<'g, 'a> {
    pub(super) grid: &'g Grid<'a>,
    pub(super) leaf: Option<(Coord, usize)>,
    pub(super) lower: Option<(Coord, usize)>,
    pub(super) upper: Option<(Coord, usize)>,
}

pub(super) struct AccCache<'c> {
    pub(super) leaf: &'c mut Option<(Coord, usize)>,
    pub(super) lower: &'c mut Option<(Coord, usize)>,
    pub(super) upper: &'c mut Option<(Coord, usize)>,
}
impl Cache for AccCache<'_> {
    #[inline]
    fn set(&mut self, level: u8, key: Coord, node: usize) {
        let slot = match level {
            0 => &mut *self.leaf,
            1 => &mut *self.lower,
            _ => &mut *self.upper,
        };
        *slot = Some((key, node));
    }
}

impl<'g, 'a> ReadAccessor<'g, 'a> {
    /// The grid this accessor reads.
    pub fn grid(&self) -> &'g Grid<'a> {
        self.grid
    }

    pub(super) fn locate(&mut self, ijk: Coord) -> Loc {
        let g = self.grid;
        let mut cache = AccCache {
            leaf: &mut self.leaf,
            lower: &mut self.lower,
            upper: &mut self.upper,
        };
        if let Some((key, node)) = *cache.leaf
            && key == masked(ijk, 7)
        {
            return Loc::Leaf {
                node,
                n: leaf_offset(ijk),
            };
        }
        if let Some((key, node)) = *cache.lower
            && key == masked(ijk, (1 << l::LOWER_TOTAL) - 1)
        {
            return g.locate_from_lower(ijk, node, &mut cache);
        }
        if let Some((key, node)) = *cache.upper
            && key == masked(ijk, (1 << l::UPPER_TOTAL) - 1)
        {
            return g.locate_from_upper(ijk, node, &mut cache);
        }
        g.locate_from_root(ijk, &mut cache)
    }

    /// The value at `ijk` (see [`Grid::value`]).
    pub fn value(&mut self, ijk: Coord) -> Result<Value, FormatError> {
        self.grid.check_supported()?;
        let loc = self.locate(ijk);
        self.grid.value_at(loc)
    }

    /// Whether `ijk` is active (see [`Grid::is_active`]).
    pub fn is_active(&mut self, ijk: Coord) -> bool {
        let loc = self.locate(ijk);
        self.grid.active_at(loc)
    }
}
