//! The sparse voxel source the NanoVDB writer consumes: a set of 8³ leaf bricks.

use super::types::Coord;

/// Voxels along one edge of a leaf brick (NanoVDB's leaf `DIM`).
pub const LEAF_DIM: usize = 8;
/// Voxels in one leaf brick.
pub const LEAF_VOXELS: usize = LEAF_DIM * LEAF_DIM * LEAF_DIM;

/// One 8³ brick of scalar voxels. Voxel (x, y, z) inside the brick (each 0..8) is at index
/// `x * 64 + y * 8 + z`, NanoVDB's leaf order, and at index coordinate `origin + (x, y, z)`.
#[derive(Clone, Debug, PartialEq)]
pub struct LeafBrick {
    /// Index coordinate of voxel (0, 0, 0); every component a multiple of 8.
    pub origin: Coord,
    /// Values in NanoVDB leaf order.
    pub values: Box<[f32; LEAF_VOXELS]>,
    /// Active-state bit mask, bit `n % 64` of word `n / 64` for voxel index `n`.
    pub active: [u64; LEAF_VOXELS / 64],
}

impl LeafBrick {
    /// A brick at `origin` with every voxel set to `value` and inactive.
    pub fn filled(origin: Coord, value: f32) -> LeafBrick {
        LeafBrick {
            origin,
            values: Box::new([value; LEAF_VOXELS]),
            active: [0; LEAF_VOXELS / 64],
        }
    }

    /// Linear index of local voxel (x, y, z) in NanoVDB leaf order.
    #[inline]
    pub fn index(x: usize, y: usize, z: usize) -> usize {
        (x << 6) | (y << 3) | z
    }

    /// Whether voxel `n` is active.
    #[inline]
    pub fn is_active(&self, n: usize) -> bool {
        self.active[n >> 6] >> (n & 63) & 1 == 1
    }

    /// Sets voxel `n`'s value and marks it active.
    #[inline]
    pub fn set_active(&mut self, n: usize, value: f32) {
        self.values[n] = value;
        self.active[n >> 6] |= 1 << (n & 63);
    }

    /// Number of active voxels.
    pub fn active_count(&self) -> u32 {
        self.active.iter().map(|w| w.count_ones()).sum()
    }
}

/// A sparse scalar volume: leaf bricks plus the value everywhere else.
///
/// Bricks must have distinct origins that are multiples of 8; order does not matter
/// (the writer sorts them). Coordinates outside every brick read as `background`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SparseVolume {
    /// Value of every voxel not inside a brick (inactive).
    pub background: f32,
    /// The bricks.
    pub bricks: Vec<LeafBrick>,
}
