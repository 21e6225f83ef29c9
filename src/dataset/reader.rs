//! [`Dataset`]: an opened, validated dataset and simple (pread) frame reads.
//!
//! The fast engines in `src/ingest` read the same extents with O_DIRECT, io_uring or
//! cuFile; this reader is the reference they are compared against, and what `verify`,
//! export and the portable path use.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use super::MANIFEST_FILE;
use super::aligned::AlignedBuf;
use super::error::{DatasetError, IoContext, Result};
use super::manifest::{Extent, Frame, GridEntry, Manifest};

/// Whether a read checks each extent's CRC32 against the manifest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrcCheck {
    /// Trust the bytes (playback: the CRC costs CPU time the fast paths do not spend).
    Skip,
    /// Recompute every extent's CRC32 and fail on a mismatch.
    Verify,
}

/// An opened dataset: its validated manifest and an open handle to every lane file.
#[derive(Debug)]
pub struct Dataset {
    manifest: Manifest,
    files: Vec<Vec<File>>,
}

impl Dataset {
    /// Opens the dataset at `path`: a dataset directory, or its `manifest.json`. Loads and
    /// validates the manifest (see [`Manifest::load`]) and opens every lane file.
    pub fn open(path: impl AsRef<Path>) -> Result<Dataset> {
        let path = path.as_ref();
        let manifest_path = if path.is_dir() {
            path.join(MANIFEST_FILE)
        } else {
            path.to_path_buf()
        };
        let manifest = Manifest::load(&manifest_path)?;
        let mut files = Vec::with_capacity(manifest.lanes.len());
        for (l, lane) in manifest.lanes.iter().enumerate() {
            let mut v = Vec::with_capacity(lane.files.len());
            for f in 0..lane.files.len() {
                let p = manifest.lane_file_path(l as u32, f as u32);
                // No symlink at the lane file itself (check_files refused one; this closes
                // the window between that check and the open).
                let file = OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW)
                    .open(&p)
                    .ctx("cannot open lane file", &p)?;
                v.push(file);
            }
            files.push(v);
        }
        Ok(Dataset { manifest, files })
    }

    /// The validated manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// Number of frames.
    pub fn frame_count(&self) -> usize {
        self.manifest.frames.len()
    }

    /// Keeps only the frames `keep` (indices into the current frames, in the order given),
    /// which become frames `0..keep.len()`: one GPU of several plays the frames it owns as
    /// a timeline of its own. Errors, changing nothing, on an index past the end or no frame.
    pub fn retain_frames(&mut self, keep: &[u32]) -> Result<()> {
        let n = self.manifest.frames.len();
        if keep.is_empty() {
            return Err(DatasetError::Manifest {
                path: self.manifest.path.clone(),
                msg: "no frame kept".into(),
            });
        }
        if let Some(bad) = keep.iter().find(|&&f| f as usize >= n) {
            return Err(DatasetError::Manifest {
                path: self.manifest.path.clone(),
                msg: format!("frame {bad} kept, but the dataset has {n} frames"),
            });
        }
        let frames = keep
            .iter()
            .map(|&f| self.manifest.frames[f as usize].clone())
            .collect::<Vec<_>>();
        self.manifest.frame_count = frames.len();
        self.manifest.frames = frames;
        Ok(())
    }

    /// The dataset one rank of a sort-last run reads: every frame holds only brick
    /// `brick`'s grids (one per attribute), its slot image the brick's byte range of the
    /// whole slot image rebased to 0, and its extents those covering that range (the writer
    /// starts an extent at each brick's range, and the manifest check insists, so none is
    /// split and every CRC stays right). Attributes keep their statistics over the whole
    /// domain (value range, index and world boxes: the camera and transfer functions use
    /// them), and [`bricks`](Self::bricks) still lists every brick. Reading a frame of it
    /// reads only brick `brick`'s bytes. Errors where the dataset is not bricked, the brick
    /// does not exist, or this dataset is already one brick's.
    pub fn retain_brick(&self, brick: u32) -> Result<Dataset> {
        let m = &self.manifest;
        let refuse = |msg: String| {
            Err(DatasetError::Manifest {
                path: m.path.clone(),
                msg,
            })
        };
        if let Some(b) = m.retained_brick {
            return refuse(format!(
                "brick {brick} asked of brick {b}'s part of the dataset"
            ));
        }
        if brick as usize >= m.bricks.len() {
            return refuse(format!(
                "brick {brick} asked, the dataset has {} bricks",
                m.bricks.len()
            ));
        }
        let attributes = m.attributes.len();
        let frames = m
            .frames
            .iter()
            .map(|f| brick_frame(f, brick as usize, attributes))
            .collect();
        let files = self
            .files
            .iter()
            .map(|lane| {
                lane.iter()
                    .map(File::try_clone)
                    .collect::<std::io::Result<Vec<_>>>()
            })
            .collect::<std::io::Result<Vec<_>>>()
            .map_err(|e| DatasetError::io("cannot duplicate lane file handle of", &m.path, e))?;
        let manifest = Manifest {
            frames,
            retained_brick: Some(brick),
            ..m.clone()
        };
        Ok(Dataset { manifest, files })
    }

    /// [`Manifest::check_whole_grids`]: errors ([`DatasetError::Bricked`], naming the
    /// manifest and saying how to play it) where frames hold several bricks' grids, for the
    /// code that binds one grid per attribute.
    pub fn check_whole_grids(&self) -> Result<()> {
        self.manifest.check_whole_grids()
    }

    /// The spatial bricks (empty for a dataset of whole grids): the box of each.
    pub fn bricks(&self) -> &[super::manifest::Brick] {
        &self.manifest.bricks
    }

    /// Frame `frame`'s manifest entry (time, grids, extents), or `None` past the end.
    pub fn frame(&self, frame: usize) -> Option<&Frame> {
        self.manifest.frames.get(frame)
    }

    /// The extents of frame `frame`, sorted by `dst`, tiling its slot image; each is
    /// 4 KiB aligned in file offset, length and destination, and no longer than the
    /// chunk size.
    ///
    /// # Panics
    /// Panics if `frame >= frame_count()`.
    pub fn frame_extents(&self, frame: usize) -> &[Extent] {
        &self.manifest.frames[frame].extents
    }

    /// Path of file `file` of lane `lane` (what an extent's `(lane, file)` refers to).
    ///
    /// # Panics
    /// Panics if the indices are out of range.
    pub fn lane_file_path(&self, lane: u32, file: u32) -> PathBuf {
        self.manifest.lane_file_path(lane, file)
    }

    /// The open handle of a lane file (for engines that issue their own reads).
    ///
    /// # Panics
    /// Panics if the indices are out of range.
    pub fn lane_file(&self, lane: u32, file: u32) -> &File {
        &self.files[lane as usize][file as usize]
    }

    /// Reads one extent into `out` (exactly `extent.len` bytes), checking its CRC32 if
    /// asked. `frame` is only used in error messages.
    pub fn read_extent(
        &self,
        frame: usize,
        e: &Extent,
        out: &mut [u8],
        check: CrcCheck,
    ) -> Result<()> {
        let path = || self.lane_file_path(e.lane, e.file);
        let file = self
            .files
            .get(e.lane as usize)
            .and_then(|l| l.get(e.file as usize))
            .ok_or_else(|| DatasetError::Usage(format!("extent {e:?} is not in this dataset")))?;
        if out.len() as u64 != e.len {
            return Err(DatasetError::Usage(format!(
                "read_extent: buffer is {} bytes, extent is {}",
                out.len(),
                e.len
            )));
        }
        file.read_exact_at(out, e.offset)
            .map_err(|err| DatasetError::io("cannot read lane file", path(), err))?;
        if check == CrcCheck::Verify {
            let actual = crc32fast::hash(out);
            if actual != e.crc32 {
                return Err(DatasetError::Crc {
                    frame,
                    lane: e.lane,
                    file: e.file,
                    path: path(),
                    offset: e.offset,
                    len: e.len,
                    expected: e.crc32,
                    actual,
                });
            }
        }
        Ok(())
    }

    /// Reassembles frame `frame`'s slot image into `buf` (resized to the slot size),
    /// reading all lanes in parallel.
    pub fn read_frame(&self, frame: usize, buf: &mut AlignedBuf, check: CrcCheck) -> Result<()> {
        let results = self.read_frame_extents(frame, buf, check)?;
        results.into_iter().collect()
    }

    /// Reads every extent of `frame` into `buf`, returning each extent's outcome (in
    /// extent order) instead of stopping at the first failure; `verify` reports them all.
    pub(crate) fn read_frame_extents(
        &self,
        frame: usize,
        buf: &mut AlignedBuf,
        check: CrcCheck,
    ) -> Result<Vec<Result<()>>> {
        let f = self.frame(frame).ok_or_else(|| {
            DatasetError::Usage(format!(
                "frame {frame} does not exist (the dataset has {})",
                self.frame_count()
            ))
        })?;
        // The slot size comes from the manifest: ask before allocating it.
        let what = || {
            format!(
                "reading frame {frame} of dataset {}: its slot image",
                self.manifest.path.display()
            )
        };
        let slot = usize::try_from(f.slot_size).map_err(|_| {
            DatasetError::Memory(crate::memory::MemoryError {
                what: what(),
                requested: f.slot_size,
                available: crate::memory::available(),
            })
        })?;
        buf.try_resize(slot, what)?;
        // Extents tile the slot image in dst order (validated at load), so splitting the
        // buffer in that order hands each extent its own disjoint destination slice.
        let mut per_lane: Vec<Vec<(usize, &Extent, &mut [u8])>> =
            (0..self.files.len()).map(|_| Vec::new()).collect();
        let mut rest: &mut [u8] = buf;
        for (i, e) in f.extents.iter().enumerate() {
            let (head, tail) = rest.split_at_mut(e.len as usize);
            per_lane[e.lane as usize].push((i, e, head));
            rest = tail;
        }
        let mut results: Vec<Result<()>> = (0..f.extents.len()).map(|_| Ok(())).collect();
        let lane_results: Vec<Vec<(usize, Result<()>)>> = std::thread::scope(|s| {
            let handles: Vec<_> = per_lane
                .into_iter()
                .filter(|v| !v.is_empty())
                .map(|jobs| {
                    s.spawn(move || {
                        jobs.into_iter()
                            .map(|(i, e, out)| (i, self.read_extent(frame, e, out, check)))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for (i, r) in lane_results.into_iter().flatten() {
            results[i] = r;
        }
        Ok(results)
    }

    /// The bytes of attribute `attribute`'s grid inside a slot image of frame `frame`
    /// (as filled by [`read_frame`](Self::read_frame)), without padding. A bricked dataset
    /// (not [retained](Self::retain_brick) to one brick) has no one grid per attribute:
    /// [`DatasetError::Bricked`] ([`frame_grids`](Self::frame_grids) gives every grid).
    pub fn grid_bytes<'a>(
        &self,
        frame: usize,
        attribute: usize,
        slot: &'a [u8],
    ) -> Result<&'a [u8]> {
        self.check_whole_grids()?;
        let f = self
            .frame(frame)
            .ok_or_else(|| DatasetError::Usage(format!("frame {frame} does not exist")))?;
        let g = f
            .grids
            .iter()
            .find(|g| g.attribute as usize == attribute)
            .ok_or_else(|| {
                DatasetError::Usage(format!("frame {frame} has no attribute {attribute}"))
            })?;
        slot.get(g.offset as usize..(g.offset + g.size) as usize)
            .ok_or_else(|| {
                DatasetError::Usage(format!(
                    "slot image of {} bytes is too short for frame {frame}",
                    slot.len()
                ))
            })
    }
}

impl Dataset {
    /// Every grid of frame `frame` in the manifest's order (a bricked frame's brick by
    /// brick), with its entry and its bytes inside a slot image of the frame (as filled by
    /// [`read_frame`](Self::read_frame)), without padding: for code that handles grids as
    /// bytes (export, inspect, checks), bricked or not.
    pub fn frame_grids<'a>(
        &self,
        frame: usize,
        slot: &'a [u8],
    ) -> Result<Vec<(GridEntry, &'a [u8])>> {
        let f = self
            .frame(frame)
            .ok_or_else(|| DatasetError::Usage(format!("frame {frame} does not exist")))?;
        f.grids
            .iter()
            .map(|g| {
                let bytes = slot
                    .get(g.offset as usize..(g.offset + g.size) as usize)
                    .ok_or_else(|| {
                        DatasetError::Usage(format!(
                            "slot image of {} bytes is too short for frame {frame}",
                            slot.len()
                        ))
                    })?;
                Ok((*g, bytes))
            })
            .collect()
    }
}

/// Brick `b`'s part of frame `f` of a validated bricked manifest with `attributes`
/// attributes: its grids and the extents of their byte range, rebased to 0.
fn brick_frame(f: &Frame, b: usize, attributes: usize) -> Frame {
    let grids = &f.grids[b * attributes..(b + 1) * attributes];
    let start = grids[0].offset;
    let end = f
        .grids
        .get((b + 1) * attributes)
        .map_or(f.slot_size, |next| next.offset);
    Frame {
        time: f.time,
        slot_size: end - start,
        grids: grids
            .iter()
            .map(|g| GridEntry {
                offset: g.offset - start,
                ..*g
            })
            .collect(),
        extents: f
            .extents
            .iter()
            .filter(|e| e.dst >= start && e.dst < end)
            .map(|e| Extent {
                dst: e.dst - start,
                ..*e
            })
            .collect(),
    }
}
