//! NanoVDB: parse, validate and write grid buffers and `.nvdb` files.
//!
//! A NanoVDB grid is one position-independent buffer (grid header, tree header, root with
//! tiles, upper 32³ nodes, lower 16³ nodes, 8³ leaves, all referenced by relative offsets).
//! supercell moves these buffers to the GPU unchanged, so everything here works on byte
//! slices: [`Grid::parse`] validates untrusted bytes once, after which reads are in bounds.

pub mod sparse;
pub mod types;

pub use sparse::{LEAF_DIM, LEAF_VOXELS, LeafBrick, SparseVolume};
pub use types::{Codec, Coord, GridClass, GridType, Version};
