//! The ingest layer's error type.

use std::io;
use std::path::PathBuf;

use crate::dataset::DatasetError;
use crate::gpu::GpuError;

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
    /// Reads of the frame made no progress within the read timeout (a lane stopped
    /// answering). The slot is still being written: it stays reserved until a second
    /// completion for it, [`IngestError::Released`], says the reads have ended.
    #[error(
        "frame {frame}: no answer for {:.1} s{}",
        .waited.as_secs_f64(),
        timed_out_site(*.lane, .path.as_deref(), *.offset, *.len, *.behind)
    )]
    TimedOut {
        /// Frame index.
        frame: u32,
        /// The lane of the read that does not answer, where known: the frame's own oldest
        /// read out, or (see `behind`) the read its reads wait behind.
        lane: Option<u32>,
        /// Its file.
        path: Option<PathBuf>,
        /// Its offset in the file.
        offset: Option<u64>,
        /// Its length, bytes.
        len: Option<u64>,
        /// The read belongs to this other frame: none of this frame's reads had gone out,
        /// they wait behind it (every I/O thread is busy with the lane that stopped).
        behind: Option<u32>,
        /// How long the frame went without progress.
        waited: std::time::Duration,
    },
    /// Reads that timed out are still out and the caller cannot go on without them (every
    /// slot is held by such reads, or the run is over): they are abandoned, not waited
    /// for, since a read the kernel holds cannot be cancelled. `first` is the time-out of
    /// the first such frame (it names the lane, file and bytes).
    #[error(
        "{frames} frame(s) held by reads that got no answer within the read timeout ({why}); \
         the reads are abandoned (the kernel holds them: they cannot be cancelled, and the \
         process exits without waiting for them); {first}"
    )]
    Abandoned {
        /// Frames whose reads are still out.
        frames: usize,
        /// Why the caller gave up on them.
        why: String,
        /// The time-out of the first of them.
        first: Box<IngestError>,
    },
    /// A frame that had timed out: its last reads have ended and its slot may be written
    /// again. The frame itself was already reported failed.
    #[error("frame {0}: the reads that had timed out have ended; the slot is free again")]
    Released(u32),
    /// The engine's worker thread has stopped (a bug or a panic); the text says what it saw.
    #[error("ingest engine stopped: {0}")]
    Stopped(String),
    /// The system refused a thread the engine needs (too many threads, too little memory).
    #[error("cannot start {what}: {source}")]
    Thread {
        /// Which thread or pool, e.g. "the engine thread".
        what: &'static str,
        /// Why the system refused it.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

/// The GPU layer's errors keep their text: each has an ingest variant of the same wording.
impl From<GpuError> for IngestError {
    fn from(e: GpuError) -> IngestError {
        match e {
            GpuError::Cuda(m) => IngestError::Cuda(m),
            GpuError::Unavailable(m) => IngestError::Unavailable(m),
            GpuError::Usage(m) => IngestError::Usage(m),
        }
    }
}

/// The same, for an error that stays where it is (one failure reported to many callers).
impl From<&GpuError> for IngestError {
    fn from(e: &GpuError) -> IngestError {
        match e {
            GpuError::Cuda(m) => IngestError::Cuda(m.clone()),
            GpuError::Unavailable(m) => IngestError::Unavailable(m.clone()),
            GpuError::Usage(m) => IngestError::Usage(m.clone()),
        }
    }
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

    /// [`IngestError::Thread`]: `what` could not start, because of `source`.
    pub(crate) fn thread(
        what: &'static str,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> IngestError {
        IngestError::Thread {
            what,
            source: source.into(),
        }
    }
}

fn timed_out_site(
    lane: Option<u32>,
    path: Option<&std::path::Path>,
    offset: Option<u64>,
    len: Option<u64>,
    behind: Option<u32>,
) -> String {
    let (Some(l), Some(p), Some(o)) = (lane, path, offset) else {
        return String::new();
    };
    let bytes = match len {
        Some(n) => format!("bytes {o}..{}", o + n),
        None => format!("at offset {o}"),
    };
    let site = format!("lane {l} ({}, {bytes})", p.display());
    match behind {
        Some(f) => {
            format!(": its reads wait behind frame {f}'s read from {site}, which does not answer")
        }
        None => format!(" from {site}"),
    }
}

impl IngestError {
    /// The file, offset and lane a read error or time-out points at, where it names one
    /// (the lane only for time-outs; map the file to its lane otherwise).
    pub fn site(&self) -> Option<(&std::path::Path, u64, Option<u32>)> {
        match self {
            IngestError::Read { path, offset, .. } => Some((path, *offset, None)),
            IngestError::Checksum { path, offset, .. } => Some((path, *offset, None)),
            IngestError::TimedOut {
                path: Some(p),
                offset: Some(o),
                lane,
                ..
            } => Some((p, *o, *lane)),
            IngestError::Abandoned { first, .. } => first.site(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A GPU error reads the same, and keeps its kind, once it is an ingest error (callers
    /// match `Unavailable` to fall back, and users see the text).
    #[test]
    fn gpu_errors_keep_their_kind_and_text() {
        let cases = [
            GpuError::Cuda("cuMemAlloc of 4096 bytes: out of memory".into()),
            GpuError::Unavailable("GPU 3 does not exist (CUDA sees 1)".into()),
            GpuError::Usage("a device buffer needs at least one byte".into()),
        ];
        for e in cases {
            let text = e.to_string();
            let kind = std::mem::discriminant(&e);
            // By reference (the device checker reports one failed bind to every frame): the
            // same text, not the GPU text wrapped again ("CUDA: CUDA: ...").
            let by_ref = IngestError::from(&e);
            let converted = IngestError::from(e);
            assert_eq!(by_ref.to_string(), text);
            assert_eq!(
                std::mem::discriminant(&by_ref),
                std::mem::discriminant(&converted)
            );
            assert_eq!(converted.to_string(), text);
            let same_kind = match converted {
                IngestError::Cuda(_) => {
                    kind == std::mem::discriminant(&GpuError::Cuda(String::new()))
                }
                IngestError::Unavailable(_) => {
                    kind == std::mem::discriminant(&GpuError::Unavailable(String::new()))
                }
                IngestError::Usage(_) => {
                    kind == std::mem::discriminant(&GpuError::Usage(String::new()))
                }
                _ => false,
            };
            assert!(same_kind, "{text}");
        }
    }

    /// A thread the system refuses keeps the refusal as its cause, and the message the
    /// user reads still says it.
    #[test]
    fn a_refused_thread_keeps_its_cause() {
        let refused = io::Error::from(io::ErrorKind::OutOfMemory);
        let cause = refused.to_string();
        let e = IngestError::thread("the engine thread", refused);
        assert_eq!(
            e.to_string(),
            format!("cannot start the engine thread: {cause}")
        );
        let source = std::error::Error::source(&e).expect("a cause");
        let io = source.downcast_ref::<io::Error>().expect("the io::Error");
        assert_eq!(io.kind(), io::ErrorKind::OutOfMemory);
    }
}
