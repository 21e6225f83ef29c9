//! Striped datasets on disk: manifest, lanes, extents, crash-safe writing, import and export.
//!
//! A dataset is a directory holding `manifest.json` and L *lanes* (directories, normally one
//! per drive or NVMe-oF namespace; by default `lanes/0..L-1` inside the dataset). A *frame*
//! is one NanoVDB grid per attribute; its *slot image* is the grids concatenated, each at a
//! 4 KiB-aligned offset and zero-padded to 4 KiB — exactly the bytes a GPU frame-ring slot
//! receives. The slot image is cut into chunks of `chunk_size` bytes; chunk `c` of frame
//! `f` is appended to a data file of lane `(c + f) % L`. The manifest lists, per frame,
//! every [`Extent`] `(lane, file, offset, len, dst, crc32)`, all 4 KiB aligned, so O_DIRECT,
//! io_uring and cuFile engines can read them straight into the slot.
//!
//! - Write: [`DatasetWriter`] (crash-safe: a dataset never claims frames it does not hold).
//! - Read: [`Dataset::open`], [`Dataset::read_frame`], [`Dataset::frame_extents`].
//! - Check: [`verify`].
//! - Convert: [`import_nvdb_sequence`], [`export_frame`].

mod aligned;
pub mod bricks;
mod convert;
mod directory;
mod error;
mod headers;
mod lanes;
mod manifest;
mod naming;
mod nvdb;
pub mod ranks;
mod reader;
pub mod stripe;
mod verify;
mod writer;

pub use aligned::AlignedBuf;
pub use convert::{
    ImportOptions, ImportReport, export_frame, import_nvdb_sequence, import_sequence,
    import_sequence_ranks,
};
pub use error::{DatasetError, Result};
pub use headers::{BadGrid, ReadSlot, check_frame_headers, read_host_slot};
pub use manifest::{
    ARG_BYTES_MARKER, Attribute, BRICK_HALO, Brick, Extent, Frame, GridEntry, Lane, LaneFile,
    MAX_UNITS_BYTES, Manifest, Provenance, check_units,
};
pub use reader::{CrcCheck, Dataset};
pub use verify::{Problem, VerifyProgress, VerifyReport, verify};
pub use writer::{AttributeSpec, CrashPoint, DatasetWriter, LaneSpec, SharedWrite};

/// Alignment of every offset and length in a dataset (O_DIRECT and cuFile need it).
pub const ALIGN: u64 = 4096;
/// Default stripe chunk size: 8 MiB.
pub const DEFAULT_CHUNK_SIZE: u64 = 8 << 20;
/// Default cap on one lane data file: a new segment starts past 64 GiB.
pub const DEFAULT_SEGMENT_SIZE: u64 = 64 << 30;
/// `format` field of every manifest.
pub const FORMAT_NAME: &str = "supercell-dataset";
/// Manifest format version written and read by this build.
pub const FORMAT_VERSION: u32 = 1;
/// File name of the manifest inside a dataset directory.
pub const MANIFEST_FILE: &str = "manifest.json";
