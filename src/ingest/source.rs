//! What to read: a list of files (each on a lane) and, per frame, the extents that fill its
//! slot. Built from a dataset's manifest (the extents are used as they are) or from plain
//! files (each cut into frames, as gdsio reads a file).

use std::path::{Path, PathBuf};

use super::error::{IngestError, Result};
use crate::dataset::{ALIGN, Manifest};

/// One file an engine reads from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFile {
    /// Path of the file.
    pub path: PathBuf,
    /// The lane (device) the file lives on; reads are spread over lanes.
    pub lane: u32,
    /// Size in bytes.
    pub size: u64,
}

/// A contiguous run of a frame: `len` bytes at `offset` of file `file` go to `dst` in the
/// slot. Offsets and lengths are multiples of 4 KiB (O_DIRECT and cuFile need it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReadExtent {
    /// Index into [`Source::files`] (and the engine's open files).
    pub file: u32,
    /// Byte offset in the file.
    pub offset: u64,
    /// Length in bytes.
    pub len: u64,
    /// Byte offset in the slot.
    pub dst: u64,
    /// CRC32 of the bytes, when known (datasets record one per extent).
    pub crc32: Option<u32>,
}

/// One frame: its slot size and the extents that tile it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceFrame {
    /// Bytes of the slot image.
    pub len: u64,
    /// Extents in `dst` order.
    pub extents: Vec<ReadExtent>,
}

impl SourceFrame {
    /// Bytes the frame's extents cover (less than `len` when extents were filtered).
    pub fn bytes(&self) -> u64 {
        self.extents.iter().map(|e| e.len).sum()
    }
}

/// The files and frames of a read workload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// Files, indexed by [`ReadExtent::file`].
    pub files: Vec<SourceFile>,
    /// Frames in order.
    pub frames: Vec<SourceFrame>,
    /// Number of lanes (distinct `lane` values are `0..lanes`).
    pub lanes: u32,
    /// Bytes left out because plain files end in a partial 4 KiB page (O_DIRECT cannot read
    /// them without reading past the end); always 0 for datasets.
    pub skipped_tail_bytes: u64,
}

impl Source {
    /// The workload of a dataset: its lane files and every frame's extents, unchanged.
    pub fn from_manifest(m: &Manifest) -> Source {
        let mut files = Vec::new();
        let mut index = Vec::with_capacity(m.lanes.len());
        for (l, lane) in m.lanes.iter().enumerate() {
            let mut v = Vec::with_capacity(lane.files.len());
            for (f, file) in lane.files.iter().enumerate() {
                v.push(files.len() as u32);
                files.push(SourceFile {
                    path: m.lane_file_path(l as u32, f as u32),
                    lane: l as u32,
                    size: file.size,
                });
            }
            index.push(v);
        }
        let frames = m
            .frames
            .iter()
            .map(|fr| SourceFrame {
                len: fr.slot_size,
                extents: fr
                    .extents
                    .iter()
                    .map(|e| ReadExtent {
                        file: index[e.lane as usize][e.file as usize],
                        offset: e.offset,
                        len: e.len,
                        dst: e.dst,
                        crc32: Some(e.crc32),
                    })
                    .collect(),
            })
            .collect();
        Source {
            files,
            frames,
            lanes: m.lanes.len() as u32,
            skipped_tail_bytes: 0,
        }
    }

    /// A workload over plain files: each file is its own lane, cut into frames of
    /// `frame_size` bytes (the last one shorter), each frame one extent per `chunk` bytes.
    /// A trailing partial 4 KiB page of each file is left out (and counted in
    /// `skipped_tail_bytes`).
    pub fn from_files(paths: &[PathBuf], frame_size: u64, chunk: u64) -> Result<Source> {
        if paths.is_empty() {
            return Err(IngestError::Usage("no files given".into()));
        }
        if frame_size == 0 || !frame_size.is_multiple_of(ALIGN) {
            return Err(IngestError::Usage(format!(
                "frame size {frame_size} is not a positive multiple of {ALIGN}"
            )));
        }
        if chunk == 0 || !chunk.is_multiple_of(ALIGN) {
            return Err(IngestError::Usage(format!(
                "chunk size {chunk} is not a positive multiple of {ALIGN}"
            )));
        }
        let mut files = Vec::new();
        let mut frames = Vec::new();
        let mut skipped = 0;
        for (i, p) in paths.iter().enumerate() {
            let md = std::fs::metadata(p).map_err(|e| IngestError::io("cannot stat", p, e))?;
            if !md.is_file() {
                return Err(IngestError::Usage(format!(
                    "{} is not a regular file",
                    p.display()
                )));
            }
            let size = md.len();
            let usable = size / ALIGN * ALIGN;
            skipped += size - usable;
            files.push(SourceFile {
                path: p.clone(),
                lane: i as u32,
                size,
            });
            let mut start = 0;
            while start < usable {
                let len = frame_size.min(usable - start);
                let mut extents = Vec::new();
                let mut off = 0;
                while off < len {
                    let n = chunk.min(len - off);
                    extents.push(ReadExtent {
                        file: i as u32,
                        offset: start + off,
                        len: n,
                        dst: off,
                        crc32: None,
                    });
                    off += n;
                }
                frames.push(SourceFrame { len, extents });
                start += len;
            }
        }
        if frames.is_empty() {
            return Err(IngestError::Usage(format!(
                "the files hold no complete 4 KiB page to read ({} files)",
                paths.len()
            )));
        }
        Ok(Source {
            files,
            frames,
            lanes: paths.len() as u32,
            skipped_tail_bytes: skipped,
        })
    }

    /// Total bytes of all frames.
    pub fn total_bytes(&self) -> u64 {
        self.frames.iter().map(|f| f.len).sum()
    }

    /// The largest frame (the slot size a frame ring needs).
    pub fn max_frame_len(&self) -> u64 {
        self.frames.iter().map(|f| f.len).max().unwrap_or(0)
    }

    /// The largest frame and its length (the first of equals; frame 0 and 4096 bytes for a
    /// source without frames): what a slot plan sizes its slots by.
    pub fn largest_frame(&self) -> (u32, u64) {
        self.frames
            .iter()
            .enumerate()
            .map(|(i, f)| (i as u32, f.len))
            .max_by_key(|&(i, len)| (len, std::cmp::Reverse(i)))
            .unwrap_or((0, 4096))
    }

    /// Paths of all files.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.files.iter().map(|f| f.path.as_path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_files_are_cut_into_frames_and_chunks() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        std::fs::write(&a, vec![1u8; 5 * 4096 + 100]).unwrap();
        let s = Source::from_files(&[a], 2 * 4096, 4096).unwrap();
        assert_eq!(s.frames.len(), 3);
        assert_eq!(s.skipped_tail_bytes, 100);
        assert_eq!(s.total_bytes(), 5 * 4096);
        assert_eq!(s.frames[2].extents.len(), 1);
        assert_eq!(s.frames[1].extents[1].offset, 3 * 4096);
        assert_eq!(s.frames[1].extents[1].dst, 4096);
        assert!(Source::from_files(&[], 4096, 4096).is_err());
        let tiny = dir.path().join("tiny");
        std::fs::write(&tiny, [0u8; 10]).unwrap();
        assert!(Source::from_files(&[tiny], 4096, 4096).is_err());
    }
}
