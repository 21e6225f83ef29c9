//! The dataset layer's error type.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong reading or writing a dataset. Every variant names the file
/// (and, where it applies, the frame, lane and offset) so that a message alone says where
/// to look.
#[derive(Debug, thiserror::Error)]
pub enum DatasetError {
    /// An operating-system call on `path` failed.
    #[error("{op} {}: {err}", .path.display())]
    Io {
        /// What was being done, e.g. "cannot read".
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        err: io::Error,
    },
    /// The manifest is missing, malformed or inconsistent; `msg` names the frame and field.
    #[error("manifest {}: {msg}", .path.display())]
    Manifest {
        /// The manifest file.
        path: PathBuf,
        /// What is wrong, with the frame and field.
        msg: String,
    },
    /// Bytes read from a lane file do not match the CRC32 the manifest recorded.
    #[error(
        "frame {frame}: lane {lane} file {file} ({}) offset {offset} length {len}: CRC32 is {actual:08x}, manifest says {expected:08x}",
        .path.display()
    )]
    Crc {
        /// Frame index.
        frame: usize,
        /// Lane index.
        lane: u32,
        /// File index within the lane.
        file: u32,
        /// Path of the lane file.
        path: PathBuf,
        /// Byte offset of the extent in the lane file.
        offset: u64,
        /// Extent length.
        len: u64,
        /// CRC32 recorded in the manifest.
        expected: u32,
        /// CRC32 of the bytes read.
        actual: u32,
    },
    /// A bricked dataset (its grids split into spatial bricks) opened by code that binds one
    /// whole grid per attribute ([`Manifest::check_whole_grids`](super::Manifest::check_whole_grids)).
    #[error(
        "{}: the dataset's grids are split into {bricks} spatial bricks; it is drawn by sort-last rendering: mpirun -n R supercell render --split space (R ranks, 1 to {bricks}, sharing the bricks; one process draws them all in turn)",
        .path.display()
    )]
    Bricked {
        /// The manifest.
        path: PathBuf,
        /// Number of bricks.
        bricks: usize,
    },
    /// An input file (e.g. a `.nvdb` being imported) is not valid; `msg` says why.
    #[error("{}: {msg}", .path.display())]
    Input {
        /// The offending file.
        path: PathBuf,
        /// What is wrong with it.
        msg: String,
    },
    /// Reading or writing a `.nvdb` file failed (the error names the file).
    #[error(transparent)]
    Nvdb(#[from] crate::format::NvdbError),
    /// The caller asked for something inconsistent (wrong grid count, times out of order,
    /// frame index out of range, ...).
    #[error("{0}")]
    Usage(String),
    /// A read needs more host memory than this process can get (a manifest's slot size is
    /// input: it is checked before it is allocated).
    #[error(transparent)]
    Memory(#[from] crate::memory::MemoryError),
    /// A rank of a write shared by several ranks failed (or this one did): the write is
    /// abandoned on every rank.
    #[error("{}", rank_failures(.failed))]
    RankFailed {
        /// Each failed rank, its host and what went wrong there, in rank order.
        failed: Vec<(usize, String, String)>,
    },
    /// Ranks of a write shared by several ranks did not answer in time (they died or
    /// stopped): the write is abandoned, and the run must end (no rank can finish it).
    #[error("{0} (it died or stopped answering): the shared write is abandoned")]
    RanksSilent(crate::cluster::Silent),
    /// Another writer holds the dataset's write lock.
    #[error("dataset {} is being written by another writer (lock {} is held)", .dir.display(), .lock.display())]
    Locked {
        /// The dataset directory.
        dir: PathBuf,
        /// The lock file.
        lock: PathBuf,
    },
}

/// Result alias for the dataset layer.
pub type Result<T, E = DatasetError> = std::result::Result<T, E>;

impl DatasetError {
    pub(crate) fn io(op: &'static str, path: impl AsRef<Path>, err: io::Error) -> DatasetError {
        DatasetError::Io {
            op,
            path: path.as_ref().to_path_buf(),
            err,
        }
    }

    pub(crate) fn manifest(path: impl AsRef<Path>, msg: impl Into<String>) -> DatasetError {
        DatasetError::Manifest {
            path: path.as_ref().to_path_buf(),
            msg: msg.into(),
        }
    }
}

/// Attaches a path and operation to an `io::Result`.
pub(crate) trait IoContext<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T>;
}

impl<T> IoContext<T> for io::Result<T> {
    fn ctx(self, op: &'static str, path: &Path) -> Result<T> {
        self.map_err(|e| DatasetError::io(op, path, e))
    }
}

/// "rank 1 (host) failed: why; rank 2 ...".
fn rank_failures(failed: &[(usize, String, String)]) -> String {
    failed
        .iter()
        .map(|(rank, host, msg)| format!("rank {rank} ({host}) failed: {msg}"))
        .collect::<Vec<_>>()
        .join("; ")
}
