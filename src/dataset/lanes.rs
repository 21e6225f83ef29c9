//! One lane's share of a write: the segment files it appends chunks to, and the chunk in
//! progress. Shared by every writer of a dataset, one process or several ranks.
//!
//! A lane's layout (which file, which offset each chunk gets) follows from the chunks
//! placed on it alone, so a writer can *place* a chunk without writing it (another rank
//! writes those bytes) and still give the next chunk the offset a single writer would. A
//! lane file is then written by several processes, each its own chunks at their offsets.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::ALIGN;
use super::directory::tmp_path;
use super::error::{DatasetError, IoContext, Result};
use super::manifest::{Extent, LaneFile};
use super::naming::lane_file_name;
use super::stripe::StripeChunk;

/// How a lane writer's segment files come to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum FileMode {
    /// This writer alone writes the dataset: it creates each file (`O_EXCL`).
    Alone,
    /// Several ranks write the same files, each its own chunks: whichever comes first
    /// creates a file, the others open it (never through a symbolic link).
    Shared,
}

pub(super) struct LaneWriter {
    pub(super) index: u32,
    pub(super) dir: PathBuf,
    pub(super) files: Vec<LaneFile>,
    pub(super) mode: FileMode,
    /// The segment file open for writing, by index into `files`, with its writer and the
    /// file position the writer's next byte goes to.
    current: Option<(usize, BufWriter<File>, u64)>,
    /// The chunk whose bytes are being written: a frame written grid by grid ends a span
    /// wherever its grid ends, often inside a chunk, and the chunk goes on with the next
    /// grid.
    pub(super) open: Option<OpenChunk>,
    /// Bytes of the current segment file already handed to the disk's writeback.
    handed: u64,
}

/// A chunk begun in a lane file: its extent so far.
pub(super) struct OpenChunk {
    extent: Extent,
    crc: crc32fast::Hasher,
}

/// A frame's slot image, described without materialising it: grids at their offsets with
/// zero padding between them.
pub(super) struct SlotImage<'a> {
    pub(super) grids: &'a [&'a [u8]],
    pub(super) offsets: &'a [u64],
}

static ZEROS: [u8; ALIGN as usize] = [0; ALIGN as usize];

impl SlotImage<'_> {
    /// Calls `f` with consecutive pieces covering slot bytes `dst..dst + len`.
    fn for_each_piece(
        &self,
        dst: u64,
        len: u64,
        mut f: impl FnMut(&[u8]) -> io::Result<()>,
    ) -> io::Result<()> {
        let end = dst + len;
        let mut pos = dst;
        // First grid whose padded extent reaches past `pos`.
        let mut g = self
            .offsets
            .partition_point(|&o| o <= pos)
            .saturating_sub(1);
        while pos < end {
            let off = self.offsets[g];
            let data_end = off + self.grids[g].len() as u64;
            let padded_end = self
                .offsets
                .get(g + 1)
                .copied()
                .unwrap_or(data_end.next_multiple_of(ALIGN));
            if pos < data_end {
                let stop = end.min(data_end);
                f(&self.grids[g][(pos - off) as usize..(stop - off) as usize])?;
                pos = stop;
            } else if pos < padded_end {
                // Padding is under 4 KiB per grid.
                let stop = end.min(padded_end);
                f(&ZEROS[..(stop - pos) as usize])?;
                pos = stop;
            } else {
                g += 1;
            }
        }
        Ok(())
    }
}

impl OpenChunk {
    pub(super) fn finish(self) -> Extent {
        Extent {
            crc32: self.crc.finalize(),
            ..self.extent
        }
    }
}

impl LaneWriter {
    /// Lane `index` in `dir`, with no files yet.
    pub(super) fn new(index: u32, dir: PathBuf, mode: FileMode) -> LaneWriter {
        LaneWriter {
            index,
            dir,
            files: Vec::new(),
            mode,
            current: None,
            open: None,
            handed: 0,
        }
    }

    /// Writes slot bytes `span` (`[from, to)`) of this lane's `chunks` (those meeting the
    /// span, in order) from `image`, going on with the chunk the previous span left open;
    /// returns the extents of the chunks that end within the span. With `image` `None` the
    /// chunks are placed (files and offsets advance as if written) but nothing is written:
    /// another rank writes those bytes.
    pub(super) fn write_span(
        &mut self,
        chunks: &[StripeChunk],
        [from, to]: [u64; 2],
        image: Option<&SlotImage<'_>>,
        segment_size: u64,
        write_id: &str,
    ) -> Result<Vec<Extent>> {
        let mut out = Vec::with_capacity(chunks.len());
        for c in chunks {
            if self.open.is_none() {
                self.open_chunk(c, segment_size, write_id);
            }
            let (lo, hi) = (from.max(c.dst), to.min(c.dst + c.len));
            if let Some(image) = image {
                self.write_piece(image, [lo, hi])?;
            }
            let meta = self.files.last_mut().expect("a chunk is open");
            let open = self.open.as_mut().expect("just ensured");
            open.extent.len += hi - lo;
            meta.size += hi - lo;
            if hi == c.dst + c.len {
                out.extend(self.open.take().map(OpenChunk::finish));
            }
        }
        if image.is_some() {
            self.start_writeback();
        }
        Ok(out)
    }

    /// Writes slot bytes `[lo, hi)` of `image` at the end of the open chunk.
    fn write_piece(&mut self, image: &SlotImage<'_>, [lo, hi]: [u64; 2]) -> Result<()> {
        let segment = self.files.len() - 1;
        let at = self.files[segment].size;
        let path = tmp_path(&self.dir.join(&self.files[segment].name));
        if self.current.as_ref().is_none_or(|c| c.0 != segment) {
            self.close_current()?;
            let file = self.open_segment(&path)?;
            self.current = Some((segment, BufWriter::with_capacity(1 << 20, file), 0));
            self.handed = 0;
        }
        let (_, w, pos) = self.current.as_mut().expect("just opened");
        let failed = |e| DatasetError::io("cannot write lane file", &path, e);
        if *pos != at {
            // Bytes between were another rank's chunks.
            w.seek(SeekFrom::Start(at)).map_err(failed)?;
            *pos = at;
        }
        let open = self.open.as_mut().expect("a chunk is open");
        image
            .for_each_piece(lo, hi - lo, |piece| {
                open.crc.update(piece);
                w.write_all(piece)
            })
            .map_err(failed)?;
        *pos += hi - lo;
        Ok(())
    }

    /// Opens a segment file (at its temporary name `path`) for writing.
    fn open_segment(&self, path: &std::path::Path) -> Result<File> {
        let mut opts = OpenOptions::new();
        opts.write(true);
        match self.mode {
            FileMode::Alone => opts.create_new(true),
            FileMode::Shared => opts.create(true).custom_flags(libc::O_NOFOLLOW),
        };
        opts.open(path).ctx("cannot create lane file", path)
    }

    /// Starts the disk writing what this lane has given the kernel so far, without waiting
    /// for it. A dataset smaller than the kernel's dirty-memory threshold would otherwise
    /// stay in the page cache until the fsync in `finish`, which then writes all of it while
    /// nothing else runs; this way the disk writes while the producer makes the next grids.
    fn start_writeback(&mut self) {
        let Some((_, w, pos)) = &self.current else {
            return;
        };
        let given = pos - w.buffer().len() as u64;
        if given > self.handed {
            start_file_writeback(w.get_ref(), self.handed, given - self.handed);
            self.handed = given;
        }
    }

    /// Begins chunk `c` at the end of the last segment file, or of a new one where `c`
    /// would not fit.
    fn open_chunk(&mut self, c: &StripeChunk, segment_size: u64, write_id: &str) {
        let need_new = self
            .files
            .last()
            .is_none_or(|f| f.size + c.len > segment_size);
        if need_new {
            self.files.push(LaneFile {
                name: lane_file_name(write_id, self.index, self.files.len()),
                size: 0,
            });
        }
        let meta = self.files.last().expect("just ensured");
        self.open = Some(OpenChunk {
            extent: Extent {
                lane: self.index,
                file: (self.files.len() - 1) as u32,
                offset: meta.size,
                len: 0,
                dst: c.dst,
                crc32: 0,
            },
            crc: crc32fast::Hasher::new(),
        });
    }

    /// Ends the chunk in progress at slot byte `at` (where its bytes so far end) as an
    /// extent of its own and goes on with the rest of the chunk as a new extent from `at`,
    /// in the same file right after it; returns the ended extent, or `None` where no chunk
    /// is open, or none that ends at `at` with bytes (nothing to cut).
    pub(super) fn cut_open_chunk(&mut self, at: u64) -> Option<Extent> {
        let open = self.open.as_ref()?;
        if open.extent.len == 0 || open.extent.dst + open.extent.len != at {
            return None;
        }
        let rest = OpenChunk {
            extent: Extent {
                offset: open.extent.offset + open.extent.len,
                len: 0,
                dst: at,
                crc32: 0,
                ..open.extent
            },
            crc: crc32fast::Hasher::new(),
        };
        self.open.replace(rest).map(OpenChunk::finish)
    }

    /// Flushes and fsyncs the open segment, if any.
    pub(super) fn close_current(&mut self) -> Result<()> {
        if let Some((segment, w, _)) = self.current.take() {
            let path = tmp_path(&self.dir.join(&self.files[segment].name));
            let file = w
                .into_inner()
                .map_err(|e| DatasetError::io("cannot write lane file", &path, e.into_error()))?;
            file.sync_all().ctx("cannot fsync lane file", &path)?;
        }
        Ok(())
    }

    /// Drops the open segment without flushing it (the write is abandoned).
    pub(super) fn abandon(&mut self) {
        self.current = None;
    }
}

/// Asks the kernel to start writing bytes `offset..offset + len` of `file` to its device
/// (Linux's `sync_file_range` with `SYNC_FILE_RANGE_WRITE`: no waiting for the writes, no
/// metadata). Only a head start: a failure here is left to the fsync, which reports it.
#[cfg(target_os = "linux")]
fn start_file_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a syscall on a descriptor `file` keeps open; it touches no memory of ours.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

/// Elsewhere the fsync in `finish` writes everything.
#[cfg(not(target_os = "linux"))]
fn start_file_writeback(_file: &File, _offset: u64, _len: u64) {}
