//! The ingest layer's error type.

use std::io;
use std::path::PathBuf;

use crate::dataset::DatasetError;

/// Everything that can go wrong reading frames. Messages name the file, offset and path
/// (engine) involved, so that a message alone says where to look.
#[derive(Debug, thiserror::Error)]
pub enum IngestError {
    /// An operating-system call on `path` failed.
    #[error("{op} {}: {err}", .path.display())]
    Io {
        /// What was being done, e.g. "cannot open".
        op: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The underlying error.
        err: io::Error,
    },
    /// A read failed or came back short.
    #[error("read of {len} bytes at offset {offset} of {}: {msg}", .path.display())]
    Read {
        /// The file read.
        path: PathBuf,
        /// Byte offset of the read in the file.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// What went wrong (errno text, cuFile error, short read).
        msg: String,
    },
    /// A CUDA driver call failed.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// A cuFile call failed.
    #[error("cuFile: {0}")]
    CuFile(String),
    /// A path is not available on this machine (no CUDA, no cuFile, no io_uring); the text
    /// says why and what to do.
    #[error("{0}")]
    Unavailable(String),
    /// The caller asked for something inconsistent (unknown slot, extent outside the slot,
    /// bad configuration).
    #[error("{0}")]
    Usage(String),
    /// Bytes that arrived do not match the checksum recorded for them (`--verify`). Names
    /// the first mismatching extent of the frame and counts the others.
    #[error(
        "frame {frame}: lane {lane}, {} at offset {offset} ({len} bytes): CRC-32 of the bytes that arrived is {actual:08x}, the manifest says {expected:08x}{}",
        .path.display(),
        more_extents(*.more)
    )]
    Checksum {
        /// Frame index.
        frame: u32,
        /// Lane of the file.
        lane: u32,
        /// File the bytes came from.
        path: PathBuf,
        /// Offset in that file.
        offset: u64,
        /// Extent length.
        len: u64,
        /// CRC32 recorded.
        expected: u32,
        /// CRC32 of the bytes that arrived.
        actual: u32,
        /// Further extents of the same frame that mismatch.
        more: u64,
    },
    /// The dataset layer failed.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The read was abandoned by [`IngestEngine::cancel`](super::IngestEngine::cancel)
    /// before all of it was issued; the slot holds a partial frame.
    #[error("frame {0}: read cancelled")]
    Cancelled(u32),
    /// The engine's worker thread has stopped (a bug or a panic); the text says what it saw.
    #[error("ingest engine stopped: {0}")]
    Stopped(String),
}

/// Result alias for the ingest layer.
pub type Result<T, E = IngestError> = std::result::Result<T, E>;

fn more_extents(more: u64) -> String {
    match more {
        0 => String::new(),
        1 => " (and 1 more extent of this frame)".into(),
        n => format!(" (and {n} more extents of this frame)"),
    }
}

impl IngestError {
    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, err: io::Error) -> IngestError {
        IngestError::Io {
            op,
            path: path.into(),
            err,
        }
    }
}
