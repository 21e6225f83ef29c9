//! Opening the files of a workload for reading, with O_DIRECT where asked and possible.

use std::fs::File;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::error::{IngestError, Result};
use super::source::SourceFile;

/// How files are opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoMode {
    /// O_DIRECT: storage straight into the (aligned) buffer, no page cache.
    Direct,
    /// Through the page cache (what a warm re-read measures).
    Buffered,
}

/// One open file.
#[derive(Debug)]
pub struct OpenFile {
    /// The path.
    pub path: PathBuf,
    /// Lane of the file.
    pub lane: u32,
    /// Size in bytes.
    pub size: u64,
    /// Whether the descriptor has O_DIRECT.
    pub direct: bool,
    file: File,
}

impl OpenFile {
    /// The raw descriptor (valid while `self` lives).
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

/// The files of a workload, open, and what happened opening them.
#[derive(Debug)]
pub struct OpenFiles {
    /// Files in [`Source::files`](super::Source::files) order.
    pub files: Vec<OpenFile>,
    /// Things the user should know (e.g. a file system refused O_DIRECT).
    pub notes: Vec<String>,
}

impl OpenFiles {
    /// Opens every file. With [`IoMode::Direct`], a file system that refuses O_DIRECT
    /// (EINVAL at open) gets a buffered descriptor and a note saying so.
    pub fn open(files: &[SourceFile], mode: IoMode) -> Result<OpenFiles> {
        let mut out = Vec::with_capacity(files.len());
        let mut notes = Vec::new();
        for f in files {
            let open = |flags: i32| {
                std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(flags)
                    .open(&f.path)
            };
            let (file, direct) = match mode {
                IoMode::Buffered => (
                    open(0).map_err(|e| IngestError::io("cannot open", &f.path, e))?,
                    false,
                ),
                IoMode::Direct => match open(libc::O_DIRECT) {
                    Ok(file) => (file, true),
                    Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                        notes.push(format!(
                            "{}: the file system refuses O_DIRECT; reading it through the page cache",
                            f.path.display()
                        ));
                        (
                            open(0).map_err(|e| IngestError::io("cannot open", &f.path, e))?,
                            false,
                        )
                    }
                    Err(e) => return Err(IngestError::io("cannot open (O_DIRECT)", &f.path, e)),
                },
            };
            out.push(OpenFile {
                path: f.path.clone(),
                lane: f.lane,
                size: f.size,
                direct,
                file,
            });
        }
        Ok(OpenFiles { files: out, notes })
    }

    /// Whether every file is open with O_DIRECT.
    pub fn all_direct(&self) -> bool {
        self.files.iter().all(|f| f.direct)
    }
}
