//! Errors of the NanoVDB reader: what is wrong with a grid buffer and where.

use super::types::{GridType, Version};
use std::path::PathBuf;
use thiserror::Error;

/// A problem found in (untrusted) grid bytes, or a request the reader cannot serve.
///
/// Byte offsets are relative to the start of the buffer handed to
/// [`Grid::parse`](super::Grid::parse) / [`Grid::parse_all`](super::Grid::parse_all).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum FormatError {
    /// The buffer ends before a structure does.
    #[error("{what} at byte {offset} needs {need} bytes but the {within} has only {len}")]
    Truncated {
        /// The structure, e.g. "grid header" or "leaf 12".
        what: String,
        /// Where the structure starts.
        offset: u64,
        /// Bytes needed from `offset` on.
        need: u64,
        /// Bytes available in total.
        len: u64,
        /// What `len` measures: "buffer" or "grid".
        within: &'static str,
    },
    /// The first eight bytes are not a NanoVDB grid magic.
    #[error("grid at byte {offset}: bad magic {found:?}, expected \"NanoVDB0\" or \"NanoVDB1\"")]
    BadMagic {
        /// Where the grid starts.
        offset: u64,
        /// The bytes found, lossily as text.
        found: String,
    },
    /// The version is not 32.3 through 32.9.
    #[error(
        "grid at byte {offset}: unsupported NanoVDB version {version} (this reader handles 32.3 to 32.9)"
    )]
    Version {
        /// Where the grid starts.
        offset: u64,
        /// The version found.
        version: Version,
    },
    /// A structure holds an impossible value.
    #[error("{what} at byte {offset}: {detail}")]
    Corrupt {
        /// The structure, e.g. "lower node 17" or "root tile 3".
        what: String,
        /// Where the structure starts.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// The grid parses, but its values cannot be decoded by this reader.
    #[error("values of {grid_type} grids are not supported by this reader ({detail})")]
    Unsupported {
        /// The grid's value type.
        grid_type: GridType,
        /// Why, or what was asked.
        detail: &'static str,
    },
}

/// An error reading or writing a `.nvdb` file.
#[derive(Debug, Error)]
pub enum NvdbError {
    /// Opening, reading, writing, syncing or renaming failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file's segment structure is wrong (header, metadata, sizes).
    #[error("{path}: byte {offset}: {detail}")]
    File {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// Where in the file.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
    /// One grid's data is wrong (decompression, or its buffer fails validation).
    #[error("{path}: grid {index} ({name:?}): {detail}")]
    Grid {
        /// The file (or `<memory>`).
        path: PathBuf,
        /// Index of the grid in the file, counting across segments.
        index: usize,
        /// The grid's name from the file metadata (may be empty).
        name: String,
        /// What is wrong.
        detail: String,
    },
    /// A grid buffer handed to the writer is invalid.
    #[error("{path}: input grid {index}: {source}")]
    Input {
        /// The file being written.
        path: PathBuf,
        /// Index into the grids handed to the writer.
        index: usize,
        /// What is wrong with it.
        #[source]
        source: FormatError,
    },
}
