//! NanoVDB: parse, validate and write grid buffers and `.nvdb` files.
//!
//! A NanoVDB grid is one position-independent buffer (grid header, tree header, root with
//! tiles, upper 32³ nodes, lower 16³ nodes, 8³ leaves, all referenced by relative offsets).
//! supercell moves these buffers to the GPU unchanged, so everything here works on byte
//! slices: [`Grid::parse`] validates untrusted bytes once, after which reads are in bounds.

pub mod build;
pub mod checksum;
pub mod codec;
pub mod error;
pub mod file;
pub mod grid;
mod head_claims;
pub mod layout;
pub(crate) mod le;
pub mod netcdf;
pub mod openvdb;
pub mod sparse;
pub mod types;

pub use build::{
    BuildOptions, BuiltGrid, ChecksumMode, EncodedBlock, EncodedLeaves, LeafEncoder,
    NanoVdbVersion, build_grid, build_grid_encoded_into, build_grid_encoded_where_into,
    build_grid_into,
};
pub use checksum::{
    ChecksumKind, ChecksumScheme, ChecksumState, compute_checksum, verify_checksum,
};
pub use error::{FormatError, NvdbError};
pub use file::{FileGrid, FileGridMeta, encode_nvdb, read_nvdb, read_nvdb_bytes, write_nvdb};
pub use grid::{Grid, GridHeader, Interpolation, LeafView, ReadAccessor, Sample, Value};
pub use sparse::{LEAF_DIM, LEAF_VOXELS, LeafBrick, SparseVolume};
pub use types::{Codec, Coord, GridClass, GridType, Version};
