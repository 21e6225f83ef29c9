//! [`DatasetWriter`]: writes frames into lane files and commits a manifest, crash-safely.
//!
//! Commit protocol (the manifest is the commit record):
//! 1. `create` takes an exclusive lock (`.supercell-write.lock`, an advisory `flock` the
//!    kernel drops if the process dies), cleans up after an interrupted earlier write (see
//!    the intent file below), and durably records an *intent* (`.supercell-write.intent`:
//!    this write's id, its lane directories, the files of the manifest it replaces).
//! 2. Frames are appended to lane files under temporary names `<final>.tmp`. File names
//!    start with a per-write unique id, so nothing an existing manifest references is
//!    ever opened for writing.
//! 3. `finish`: fsync the lane files, rename them to their final names, fsync the lane
//!    directories, write `manifest.json.tmp`, fsync, rename over `manifest.json`, fsync the
//!    dataset directory. Only then are the replaced manifest's files deleted and the intent
//!    removed.
//!
//! A crash anywhere before the manifest rename leaves the old manifest (or none) in place,
//! and it references only old files, which are untouched. A crash after it leaves the new
//! one, complete. Either way the next writer's `create` reads the intent and deletes the
//! orphans: this write's files if its manifest never landed, the replaced files if it did.
//!
//! What a writer may delete or replace. The existing manifest and intent come with the
//! directory and may have been written by anyone, so a path they name proves nothing. A
//! writer deletes only files that are provably its own: names of the lane-file pattern
//! (see `naming`) inside an *owned* lane directory, which is one of this write's lane
//! directories or a real (not symlinked) `lanes/<n>` directory of the dataset. Files the
//! replaced manifest or an intent names anywhere else are left alone and listed by
//! [`DatasetWriter::left_alone`]. A `manifest.json` that is not a supercell manifest is
//! refused before anything is created. Files are created with `O_EXCL` (a planted symlink
//! at the name makes creation fail instead of redirecting it), control files are opened
//! with `O_NOFOLLOW`, and renames replace whatever is at the target name, never what a
//! symlink there points to.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use rayon::prelude::*;

use super::directory::{
    Existing, INTENT_FILE, Intent, canonical_files, existing_manifest, new_write_id,
    owned_lane_dirs, owned_lane_file, recover, remove_unreferenced, tmp_path, write_small_atomic,
};
use super::error::{DatasetError, IoContext, Result};
use super::lanes::{FileMode, LaneWriter, SlotImage};
use super::manifest::{
    Attribute, Brick, Extent, Frame, GridEntry, Lane, Manifest, Provenance, sync_dir,
};
use super::nvdb::{self, GridInfo};
use super::stripe::{StripeChunk, slot_layout, stripe};
use super::{ALIGN, DEFAULT_SEGMENT_SIZE, FORMAT_NAME, FORMAT_VERSION, MANIFEST_FILE};
use crate::format::{BuiltGrid, GridType};
pub use shared::SharedWrite;

mod attributes;
mod setup;
mod shared;
use attributes::{merge_attribute, merge_stats, new_attribute};
use setup::{check_create_args, lock_dataset, resolve_lanes};

const LOCK_FILE: &str = ".supercell-write.lock";

/// Where the lanes of a new dataset live.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LaneSpec {
    /// `n` lanes at `DATASET/lanes/0..n-1` (created as needed).
    Count(u32),
    /// These existing directories, one lane each (e.g. `/mnt/lanes/0`..`/mnt/lanes/7`).
    /// They must exist: a missing mount point should fail rather than silently fill the
    /// root file system.
    Dirs(Vec<PathBuf>),
}

/// An attribute of a new dataset. Grid type, class and statistics come from the grids.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttributeSpec {
    /// Attribute (grid) name; unique and non-empty.
    pub name: String,
    /// The values' physical unit, where the source names one ([`check_units`] applies).
    pub units: Option<String>,
}

impl AttributeSpec {
    /// An attribute called `name`, without a unit.
    pub fn new(name: impl Into<String>) -> Self {
        AttributeSpec {
            name: name.into(),
            units: None,
        }
    }

    /// The same attribute with the unit `units` (or none).
    pub fn with_units(mut self, units: Option<String>) -> Self {
        self.units = units;
        self
    }
}

/// Points where a test can make [`DatasetWriter::finish`] stop as if the process had died
/// there: it returns an error and the writer's `Drop` leaves everything as it is.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CrashPoint {
    /// After the lane files got their final names, before the manifest rename.
    BeforeManifestRename,
    /// After the manifest rename, before the replaced files are deleted.
    AfterManifestRename,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Accepting frames; lane files have temporary names.
    Writing,
    /// Lane files renamed to final names; manifest not yet in place.
    Renamed,
    /// New manifest in place: the dataset is the new one.
    Committed,
    /// `finish` completed.
    Done,
    /// A simulated crash: leave everything for the next writer's recovery.
    Crashed,
}

/// A writer's part in a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The only writer.
    Alone,
    /// The rank that created the write (lock, intent) and commits it.
    Lead,
    /// Another rank: writes its frames, commits nothing.
    Follower,
}

/// Whether the writer recomputes a grid's checksum before storing it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Checksums {
    /// Bytes from anywhere: a stored checksum must match them.
    Recompute,
    /// A [`BuiltGrid`]: its checksum was computed from its bytes in this process.
    Trusted,
}

/// A frame whose grids are being written one at a time (see
/// [`DatasetWriter::begin_frame`]).
struct OpenFrame {
    time: f64,
    /// Slot bytes the whole frame will take, where known before its grids arrive (a frame
    /// pushed whole): the last chunk is then sized as [`stripe`] sizes it.
    slot_size: Option<u64>,
    entries: Vec<GridEntry>,
    /// Slot bytes written so far (a multiple of 4 KiB).
    end: u64,
    extents: Vec<Extent>,
}

/// Writes a striped dataset frame by frame; see the module docs for the commit protocol.
///
/// Frames arrive in time order with one grid per attribute, whole (`push_frame`) or grid by
/// grid (`begin_frame`, `push_grid`, `end_frame`: the caller then holds one grid at a time).
/// Each grid's chunks go to all lanes in parallel (one thread per lane: lanes are separate
/// devices). Nothing is visible to readers until [`finish`](DatasetWriter::finish)
/// succeeds; dropping the writer earlier removes what it wrote (best effort).
pub struct DatasetWriter {
    dir: PathBuf,
    /// The dataset's lock; `None` for a follower (the lead rank holds it).
    _lock: Option<File>,
    /// Whether this writer commits the dataset, or is one of several ranks writing it.
    role: Role,
    /// Frames whose grids this writer checked (its own), for the checks against earlier
    /// frames' grids; frames other ranks write are only placed.
    described: usize,
    write_id: String,
    chunk_size: u64,
    segment_size: u64,
    lane_paths: Vec<String>,
    lanes: Vec<LaneWriter>,
    attributes: Vec<Attribute>,
    /// The spatial bricks every grid is split into (empty: whole grids); see
    /// [`set_bricks`](Self::set_bricks).
    bricks: Vec<Brick>,
    frames: Vec<Frame>,
    /// Frames another rank writes (placed by [`skip_frame`](Self::skip_frame)), until
    /// adopted.
    foreign: Vec<usize>,
    /// The frame [`begin_frame`](Self::begin_frame) started, until `end_frame`.
    open_frame: Option<OpenFrame>,
    provenance: Provenance,
    /// Lane files of the replaced dataset to delete after the commit (owned, canonical).
    replaced_files: Vec<PathBuf>,
    left_alone: Vec<PathBuf>,
    phase: Phase,
    failed: Option<String>,
    crash_at: Option<CrashPoint>,
}

impl DatasetWriter {
    /// Starts writing a dataset in `dir` (created if missing). An existing dataset there
    /// stays readable, unchanged, until `finish` replaces it.
    ///
    /// `chunk_size` must be a positive multiple of 4 KiB ([`DEFAULT_CHUNK_SIZE`](super::DEFAULT_CHUNK_SIZE)
    /// suits NVMe). Fails if another writer holds the dataset.
    pub fn create(
        dir: impl AsRef<Path>,
        lanes: LaneSpec,
        chunk_size: u64,
        attributes: Vec<AttributeSpec>,
        provenance: Provenance,
    ) -> Result<DatasetWriter> {
        let dir = dir.as_ref();
        check_create_args(chunk_size, &attributes)?;
        fs::create_dir_all(dir).ctx("cannot create dataset directory", dir)?;
        let dir = dir.canonicalize().ctx("cannot resolve", dir)?;
        let manifest_path = dir.join(MANIFEST_FILE);
        // Another program's directory is refused before anything (even a lock) is put in it.
        existing_manifest(&manifest_path)?;

        // Lock first: recovery and everything after must not race another writer.
        let lock = lock_dataset(&dir)?;
        // Again under the lock: this is the manifest that gets replaced.
        let existing = existing_manifest(&manifest_path)?;

        let (canon, lane_paths) = resolve_lanes(&dir, lanes)?;

        let owned = owned_lane_dirs(&dir, &canon);
        let mut left_alone = Vec::new();
        recover(&dir, &owned, &mut left_alone)?;
        // The replaced dataset's files in owned lane directories are deleted once the new
        // manifest is in place; the rest are not ours to delete.
        let mut replaced_files = Vec::new();
        match &existing {
            Existing::Absent => {}
            Existing::Dataset(old) => {
                for f in old.all_file_paths() {
                    match owned_lane_file(&f, &owned) {
                        Some(p) => replaced_files.push(p),
                        None => left_alone.push(f),
                    }
                }
            }
            Existing::Damaged(why) => log::info!(
                "supercell: note: replacing damaged {why}; its lane files are unknown and left alone"
            ),
        }
        if !left_alone.is_empty() {
            log::info!(
                "supercell: note: {} lane file(s) or director(ies) that the replaced manifest or an interrupted write of {} names lie outside this write's lane directories; they are left alone (e.g. {})",
                left_alone.len(),
                dir.display(),
                left_alone[0].display()
            );
        }
        let write_id = new_write_id();
        let intent = Intent {
            write_id: write_id.clone(),
            lane_dirs: canon.clone(),
            replaced_files: replaced_files.clone(),
        };
        write_small_atomic(
            &dir,
            INTENT_FILE,
            &serde_json::to_vec_pretty(&intent).expect("intent serializes"),
        )?;

        let lanes = canon
            .into_iter()
            .enumerate()
            .map(|(i, d)| LaneWriter::new(i as u32, d, FileMode::Alone))
            .collect();
        Ok(DatasetWriter {
            dir,
            _lock: Some(lock),
            role: Role::Alone,
            described: 0,
            write_id,
            chunk_size,
            segment_size: DEFAULT_SEGMENT_SIZE,
            lane_paths,
            lanes,
            attributes: attributes.into_iter().map(new_attribute).collect(),
            bricks: Vec::new(),
            frames: Vec::new(),
            foreign: Vec::new(),
            open_frame: None,
            provenance,
            replaced_files,
            left_alone,
            phase: Phase::Writing,
            failed: None,
            crash_at: None,
        })
    }

    /// Sets the size past which a lane starts a new data file (default 64 GiB). Must be a
    /// multiple of 4 KiB and at least the chunk size; only before the first frame.
    pub fn set_segment_size(&mut self, bytes: u64) -> Result<()> {
        if !self.frames.is_empty() {
            return Err(DatasetError::Usage(
                "segment size must be set before the first frame".into(),
            ));
        }
        if bytes < self.chunk_size || !bytes.is_multiple_of(ALIGN) {
            return Err(DatasetError::Usage(format!(
                "segment size {bytes} must be a multiple of {ALIGN} and at least the chunk size {}",
                self.chunk_size
            )));
        }
        self.segment_size = bytes;
        Ok(())
    }

    /// Makes this a bricked dataset: every frame then takes one grid per (brick, attribute),
    /// brick-major (brick 0's grids in attribute order, then brick 1's, ...), each holding
    /// the voxels of its brick's box and halo (see [`Brick`]); the manifest lists `bricks`.
    /// The boxes must be disjoint, leaf-aligned and tile their bounding box (see
    /// [`super::bricks`]). Only before the first frame, and before [`share`](Self::share).
    pub fn set_bricks(&mut self, bricks: Vec<Brick>) -> Result<()> {
        if !self.frames.is_empty() || self.open_frame.is_some() || self.role != Role::Alone {
            return Err(DatasetError::Usage(
                "bricks are set before the first frame and before the write is shared".into(),
            ));
        }
        super::bricks::check_bricks(&bricks).map_err(DatasetError::Usage)?;
        self.bricks = bricks;
        Ok(())
    }

    /// Grids each frame takes: one per attribute, per brick where bricked.
    fn grids_per_frame(&self) -> usize {
        self.attributes.len() * self.bricks.len().max(1)
    }

    /// The attribute of a frame's grid `i` (grids are brick-major).
    fn attribute_of(&self, i: usize) -> usize {
        i % self.attributes.len()
    }

    /// Makes `finish` stop at `point` as if the process died there (for crash tests).
    #[doc(hidden)]
    pub fn crash_at(&mut self, point: CrashPoint) {
        self.crash_at = Some(point);
    }

    /// Number of frames pushed so far.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// The dataset directory (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Lane files (or, for an interrupted write, lane directories) that the replaced
    /// dataset's manifest or an interrupted write's intent names outside this write's lane
    /// directories and the dataset's own `lanes/<n>`: this writer does not delete them.
    pub fn left_alone(&self) -> &[PathBuf] {
        &self.left_alone
    }

    /// Appends a frame: one NanoVDB grid buffer per attribute, in attribute order, at
    /// `time` (finite, greater than the previous frame's). Each grid is parsed and
    /// validated; its type and class must match the attribute's earlier grids, and its
    /// header statistics extend the attribute's.
    ///
    /// After an error the writer refuses further frames; drop it to clean up.
    pub fn push_frame(&mut self, time: f64, grids: Vec<Vec<u8>>) -> Result<()> {
        self.push_frame_borrowed(time, &grids)
    }

    /// [`push_frame`](Self::push_frame) from borrowed buffers, which the caller keeps (and
    /// may reuse for the next frame: the generator does, saving the page faults of fresh
    /// gigabyte-sized allocations every frame).
    pub fn push_frame_borrowed(&mut self, time: f64, grids: &[Vec<u8>]) -> Result<()> {
        self.push_checked_frame(time, grids, Checksums::Recompute)
    }

    /// [`push_frame_borrowed`](Self::push_frame_borrowed) of grids built in this process:
    /// their headers are parsed and checked the same way, but their checksums are not
    /// recomputed (a pass over every byte), since the builder computed them from these very
    /// bytes and a [`BuiltGrid`] lets nobody change them. The lanes get the same bytes.
    pub fn push_built_frame(&mut self, time: f64, grids: &[BuiltGrid]) -> Result<()> {
        self.push_checked_frame(time, grids, Checksums::Trusted)
    }

    fn push_checked_frame<G: AsRef<[u8]> + Sync>(
        &mut self,
        time: f64,
        grids: &[G],
        checksums: Checksums,
    ) -> Result<()> {
        self.check_frame(time, grids)?;
        let frame = self.frames.len();
        // Parse and (plain bytes) checksum the grids in parallel (both walk every byte); a
        // corrupt grid is refused here rather than stored faithfully and flagged by every
        // later verify.
        let infos: Vec<GridInfo> = grids
            .par_iter()
            .enumerate()
            .map(|(i, g)| self.inspect_grid(frame, i, g.as_ref(), checksums))
            .collect::<Result<_>>()?;
        for (i, info) in infos.iter().enumerate() {
            self.check_consistent(frame, i, info)?;
        }
        let checksums: Vec<u64> = infos.iter().map(|i| i.checksum).collect();
        self.write_frame(time, grids, &checksums)?;
        for (i, info) in infos.iter().enumerate() {
            let a = self.attribute_of(i);
            merge_stats(&mut self.attributes[a], info);
        }
        Ok(())
    }

    /// Starts a frame at `time` (finite, greater than the previous frame's) whose grids
    /// come one at a time, in attribute order, through [`push_grid`](Self::push_grid);
    /// [`end_frame`](Self::end_frame) records it. Each grid is written to the lanes as it
    /// comes, so a producer need hold only one grid of a frame at once (the generator's
    /// frames are several gigabytes). The frame's bytes on the lanes are those
    /// [`push_frame`](Self::push_frame) writes for the same grids.
    pub fn begin_frame(&mut self, time: f64) -> Result<()> {
        self.check_time(time)?;
        if self.open_frame.is_some() {
            return Err(DatasetError::Usage(format!(
                "frame {}: begun before the previous frame ended",
                self.frames.len()
            )));
        }
        self.open_frame = Some(OpenFrame {
            time,
            slot_size: None,
            entries: Vec::with_capacity(self.grids_per_frame()),
            end: 0,
            extents: Vec::new(),
        });
        Ok(())
    }

    /// Appends the next attribute's grid to the frame [`begin_frame`](Self::begin_frame)
    /// started: parsed, checksummed and checked as [`push_frame`](Self::push_frame) checks
    /// a frame's grids, then written. The caller may reuse `grid` once this returns.
    pub fn push_grid(&mut self, grid: &[u8]) -> Result<()> {
        self.check_writable()?;
        let frame = self.frames.len();
        let a = match &self.open_frame {
            None => {
                return Err(DatasetError::Usage(format!(
                    "frame {frame}: a grid pushed outside begin_frame/end_frame"
                )));
            }
            Some(f) => f.entries.len(),
        };
        if a >= self.grids_per_frame() {
            return Err(DatasetError::Usage(format!(
                "frame {frame}: more grids than the dataset's {} attributes{}",
                self.attributes.len(),
                self.bricks_note()
            )));
        }
        self.check_not_empty(frame, a, grid)?;
        let info = self.inspect_grid(frame, a, grid, Checksums::Recompute)?;
        self.check_consistent(frame, a, &info)?;
        self.write_grid(grid, info.checksum)?;
        let a = self.attribute_of(a);
        merge_stats(&mut self.attributes[a], &info);
        Ok(())
    }

    /// Records the frame [`begin_frame`](Self::begin_frame) started, once every attribute's
    /// grid is in.
    pub fn end_frame(&mut self) -> Result<()> {
        self.check_writable()?;
        let frame = self.frames.len();
        let given = self.open_frame.as_ref().map(|f| f.entries.len());
        match given {
            None => Err(DatasetError::Usage(format!(
                "frame {frame}: ended without begin_frame"
            ))),
            Some(n) if n != self.grids_per_frame() => Err(DatasetError::Usage(format!(
                "frame {frame}: {n} grids given, the dataset has {} attributes{}",
                self.attributes.len(),
                self.bricks_note()
            ))),
            Some(_) => self.close_frame(),
        }
    }

    /// ", in N bricks" where the dataset is bricked (for messages about grid counts).
    fn bricks_note(&self) -> String {
        match self.bricks.len() {
            0 => String::new(),
            n => format!(" in each of {n} bricks"),
        }
    }

    /// The grid's header and checksum, or why it is not a valid NanoVDB grid.
    fn inspect_grid(
        &self,
        frame: usize,
        a: usize,
        grid: &[u8],
        checksums: Checksums,
    ) -> Result<GridInfo> {
        nvdb::inspect(grid)
            .and_then(|info| match checksums {
                Checksums::Recompute => nvdb::check_checksum(grid, info.version).map(|()| info),
                Checksums::Trusted => Ok(info),
            })
            .map_err(|msg| {
                DatasetError::Usage(format!(
                    "frame {frame} {}: not a valid NanoVDB grid: {msg}",
                    self.grid_label(a)
                ))
            })
    }

    /// Appends a frame of opaque payloads: like [`push_frame`](Self::push_frame) but the
    /// buffers are stored without being parsed. Attributes written this way have grid type
    /// `unknown`, no statistics, and `verify` checks only their CRCs. For tests and for
    /// payloads that are not NanoVDB; a dataset cannot mix both kinds in one attribute.
    pub fn push_frame_opaque(&mut self, time: f64, grids: Vec<Vec<u8>>) -> Result<()> {
        self.check_frame(time, &grids)?;
        if let Some(a) = self
            .attributes
            .iter()
            .find(|a| a.grid_type != GridType::Unknown)
        {
            return Err(DatasetError::Usage(format!(
                "attribute {:?} holds NanoVDB grids; opaque frames cannot be added",
                a.name
            )));
        }
        let checksums = vec![0; grids.len()];
        self.write_frame(time, &grids, &checksums)
    }

    fn check_frame<G: AsRef<[u8]>>(&self, time: f64, grids: &[G]) -> Result<()> {
        self.check_time(time)?;
        if self.open_frame.is_some() {
            return Err(DatasetError::Usage(format!(
                "frame {}: pushed while a frame begun with begin_frame is open",
                self.frames.len()
            )));
        }
        let frame = self.frames.len();
        if grids.len() != self.grids_per_frame() {
            return Err(DatasetError::Usage(format!(
                "frame {frame}: {} grids given, the dataset has {} attributes{}",
                grids.len(),
                self.attributes.len(),
                self.bricks_note()
            )));
        }
        for (a, g) in grids.iter().enumerate() {
            self.check_not_empty(frame, a, g.as_ref())?;
        }
        Ok(())
    }

    /// The writer takes frames: it has not failed and is not finished.
    fn check_writable(&self) -> Result<()> {
        if let Some(msg) = &self.failed {
            return Err(DatasetError::Usage(format!("writer failed earlier: {msg}")));
        }
        if self.phase != Phase::Writing {
            return Err(DatasetError::Usage("writer is finished".into()));
        }
        Ok(())
    }

    /// A new frame may start at `time`.
    fn check_time(&self, time: f64) -> Result<()> {
        self.check_writable()?;
        let frame = self.frames.len();
        if !time.is_finite() {
            return Err(DatasetError::Usage(format!(
                "frame {frame}: time {time} is not finite"
            )));
        }
        if let Some(prev) = self.frames.last()
            && time <= prev.time
        {
            return Err(DatasetError::Usage(format!(
                "frame {frame}: time {time} is not greater than the previous frame's {}",
                prev.time
            )));
        }
        Ok(())
    }

    fn check_not_empty(&self, frame: usize, a: usize, grid: &[u8]) -> Result<()> {
        if grid.is_empty() {
            return Err(DatasetError::Usage(format!(
                "frame {frame} {}: empty grid",
                self.grid_label(a)
            )));
        }
        Ok(())
    }

    /// `attribute "name"` of a frame's grid `i`, with its brick where bricked.
    fn grid_label(&self, i: usize) -> String {
        let name = &self.attributes[self.attribute_of(i)].name;
        match self.bricks.len() {
            0 => format!("attribute {name:?}"),
            _ => format!("attribute {name:?} brick {}", i / self.attributes.len()),
        }
    }

    fn check_consistent(&self, frame: usize, i: usize, info: &GridInfo) -> Result<()> {
        let attr = &self.attributes[self.attribute_of(i)];
        let bad = |msg: String| {
            Err(DatasetError::Usage(format!(
                "frame {frame} {}: {msg}",
                self.grid_label(i)
            )))
        };
        if info.grid_type == GridType::Unknown {
            return bad("grid type is unknown".into());
        }
        if self.described == 0 {
            return Ok(());
        }
        if attr.grid_type == GridType::Unknown {
            return bad("earlier frames of this attribute were opaque".into());
        }
        if info.grid_type != attr.grid_type {
            return bad(format!(
                "grid type {} differs from earlier frames' {}",
                info.grid_type, attr.grid_type
            ));
        }
        if info.grid_class != attr.grid_class {
            return bad(format!(
                "grid class {} differs from earlier frames' {}",
                info.grid_class, attr.grid_class
            ));
        }
        if info.voxel_size != attr.voxel_size {
            return bad(format!(
                "voxel size {:?} differs from earlier frames' {:?}",
                info.voxel_size, attr.voxel_size
            ));
        }
        Ok(())
    }

    /// Stripes one frame over the lanes and records it.
    fn write_frame<G: AsRef<[u8]>>(
        &mut self,
        time: f64,
        grids: &[G],
        checksums: &[u64],
    ) -> Result<()> {
        let frame = self.frames.len();
        let sizes: Vec<u64> = grids.iter().map(|g| g.as_ref().len() as u64).collect();
        let (_, slot_size) = slot_layout(&sizes).ok_or_else(|| {
            DatasetError::Usage(format!("frame {frame}: slot image size overflows"))
        })?;
        self.open_frame = Some(OpenFrame {
            time,
            slot_size: Some(slot_size),
            entries: Vec::with_capacity(grids.len()),
            end: 0,
            extents: Vec::new(),
        });
        for (g, &checksum) in grids.iter().zip(checksums) {
            self.write_grid(g.as_ref(), checksum)?;
        }
        self.close_frame()
    }

    /// Writes the open frame's next grid at the end of its slot image so far, each lane's
    /// share by its own thread (lanes are separate devices).
    fn write_grid(&mut self, grid: &[u8], checksum: u64) -> Result<()> {
        self.place_grid(Some(grid), grid.len() as u64, checksum)
    }

    /// Places the open frame's next grid, `len` bytes, at the end of its slot image so far,
    /// and writes it where this writer has its bytes (`grid`); `None`: another rank writes
    /// it (see [`skip_frame`](Self::skip_frame)).
    fn place_grid(&mut self, grid: Option<&[u8]>, len: u64, checksum: u64) -> Result<()> {
        let frame = self.frames.len() as u64;
        let index = self.open_frame.as_ref().map_or(0, |f| f.entries.len());
        let attributes = self.attributes.len();
        let brick = (!self.bricks.is_empty()).then_some((index / attributes) as u32);
        if brick.is_some() && index > 0 && index.is_multiple_of(attributes) {
            // A brick's first grid: the chunk in progress ends here and goes on as a new
            // extent, so that no extent holds bytes of two bricks (a rank reading one
            // brick reads only its bytes, and each piece has its own CRC). The lanes get
            // the same bytes at the same places either way.
            let at = self.open_frame.as_ref().map_or(0, |f| f.end);
            for lane in &mut self.lanes {
                if let Some(done) = lane.cut_open_chunk(at) {
                    self.open_frame
                        .as_mut()
                        .expect("a frame is open")
                        .extents
                        .push(done);
                }
            }
        }
        let open = self.open_frame.as_mut().expect("a frame is open");
        let offset = open.end;
        let end = slot_layout(&[len])
            .and_then(|(_, padded)| offset.checked_add(padded))
            .ok_or_else(|| {
                DatasetError::Usage(format!("frame {frame}: slot image size overflows"))
            })?;
        // Chunks as `stripe` cuts the whole slot image: where its size is not known yet,
        // the chunk in progress counts as a whole one (it only decides when a lane starts a
        // new segment file).
        let image_len = open
            .slot_size
            .unwrap_or_else(|| end.next_multiple_of(self.chunk_size));
        let mut per_lane: Vec<Vec<StripeChunk>> = vec![Vec::new(); self.lanes.len()];
        for c in stripe(image_len, self.chunk_size, self.lanes.len() as u32, frame) {
            if c.dst < end && c.dst + c.len > offset {
                per_lane[c.lane as usize].push(c);
            }
        }
        let grids = [grid.unwrap_or_default()];
        let offsets = [offset];
        let image = grid.map(|_| SlotImage {
            grids: &grids,
            offsets: &offsets,
        });
        let span = [offset, end];
        let (segment_size, write_id) = (self.segment_size, self.write_id.as_str());
        let results: Vec<Result<Vec<Extent>>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .lanes
                .iter_mut()
                .zip(&per_lane)
                .filter(|(_, chunks)| !chunks.is_empty())
                .map(|(lane, chunks)| {
                    let image = image.as_ref();
                    s.spawn(move || lane.write_span(chunks, span, image, segment_size, write_id))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        for r in results {
            match r {
                Ok(e) => open.extents.extend(e),
                Err(e) => {
                    self.failed = Some(e.to_string());
                    return Err(e);
                }
            }
        }
        open.entries.push(GridEntry {
            attribute: (index % attributes) as u32,
            offset,
            size: len,
            checksum,
            brick,
        });
        open.end = end;
        Ok(())
    }

    /// Ends the lanes' last chunks of the open frame (the last one shorter than the chunk
    /// size, as `stripe` cuts it) and records the frame.
    fn close_frame(&mut self) -> Result<()> {
        self.described += 1;
        self.record_frame()
    }

    /// Ends the open frame's chunks and records it (its grids checked or not).
    fn record_frame(&mut self) -> Result<()> {
        let mut open = self.open_frame.take().expect("a frame is open");
        for lane in &mut self.lanes {
            if let Some(c) = lane.open.take() {
                open.extents.push(c.finish());
            }
        }
        open.extents.sort_unstable_by_key(|e| e.dst);
        self.frames.push(Frame {
            time: open.time,
            slot_size: open.end,
            grids: open.entries,
            extents: open.extents,
        });
        Ok(())
    }

    /// Makes the dataset durable and visible; returns its manifest (see the module docs
    /// for the order of operations). On error the previous dataset, if any, remains.
    pub fn finish(mut self) -> Result<Manifest> {
        if self.role == Role::Follower {
            return Err(DatasetError::Usage(
                "the lead rank commits a shared write".into(),
            ));
        }
        if let Some(f) = self.foreign.first() {
            return Err(DatasetError::Usage(format!(
                "frame {f}: written by another rank, not adopted"
            )));
        }
        if let Some(msg) = &self.failed {
            return Err(DatasetError::Usage(format!("writer failed earlier: {msg}")));
        }
        if self.open_frame.is_some() {
            return Err(DatasetError::Usage(format!(
                "frame {}: begun and not ended",
                self.frames.len()
            )));
        }
        let result = self.commit();
        if result.is_err() && self.phase == Phase::Writing {
            // Stop accepting work; Drop removes the temporaries.
            self.failed = Some("finish failed".into());
        }
        result
    }

    fn commit(&mut self) -> Result<Manifest> {
        // 1. Lane data durable (in parallel: the lanes are separate devices).
        let results: Vec<Result<()>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .lanes
                .iter_mut()
                .map(|l| s.spawn(move || l.close_current()))
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>>>()?;
        // 2. Final names, made durable before the manifest can refer to them.
        for lane in &self.lanes {
            for f in &lane.files {
                let final_path = lane.dir.join(&f.name);
                fs::rename(tmp_path(&final_path), &final_path)
                    .ctx("cannot rename lane file into place", &final_path)?;
            }
        }
        self.phase = Phase::Renamed;
        for lane in &self.lanes {
            sync_dir(&lane.dir)?;
        }
        if self.crash_at == Some(CrashPoint::BeforeManifestRename) {
            self.phase = Phase::Crashed;
            return Err(DatasetError::Usage(
                "simulated crash before the manifest rename".into(),
            ));
        }
        // 3. The commit point.
        let mut provenance = self.provenance.clone();
        provenance.tool_version = env!("CARGO_PKG_VERSION").to_owned();
        provenance.unix_time = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        let mut manifest = Manifest {
            format: FORMAT_NAME.to_owned(),
            version: FORMAT_VERSION,
            created: provenance,
            write_id: self.write_id.clone(),
            chunk_size: self.chunk_size,
            lanes: self
                .lanes
                .iter()
                .zip(&self.lane_paths)
                .map(|(l, p)| Lane {
                    path: p.clone(),
                    files: l.files.clone(),
                })
                .collect(),
            attributes: self.attributes.clone(),
            bricks: self.bricks.clone(),
            frame_count: self.frames.len(),
            frames: std::mem::take(&mut self.frames),
            path: PathBuf::new(),
            retained_brick: None,
        };
        // Never commit something the loader would reject.
        if let Err(msg) = manifest.validate() {
            return Err(DatasetError::manifest(
                self.dir.join(MANIFEST_FILE),
                format!("internal error: {msg}"),
            ));
        }
        manifest.write_atomic(&self.dir)?;
        self.phase = Phase::Committed;
        if self.crash_at == Some(CrashPoint::AfterManifestRename) {
            self.phase = Phase::Crashed;
            return Err(DatasetError::Usage(
                "simulated crash after the manifest rename".into(),
            ));
        }
        // 4. Clean up the replaced dataset. Failures here do not undo the commit; the
        // intent stays and the next writer retries.
        let replaced = std::mem::take(&mut self.replaced_files);
        if remove_unreferenced(&replaced, &canonical_files(&manifest)) {
            let intent = self.dir.join(INTENT_FILE);
            if fs::remove_file(&intent).is_ok() {
                let _ = sync_dir(&self.dir);
            }
        }
        self.phase = Phase::Done;
        Ok(manifest)
    }
}

impl Drop for DatasetWriter {
    fn drop(&mut self) {
        match self.phase {
            Phase::Writing | Phase::Renamed if self.role == Role::Follower => {
                for lane in &mut self.lanes {
                    lane.abandon();
                }
            }
            Phase::Writing | Phase::Renamed => {
                // Not committed: remove everything this write created (best effort; a
                // leftover is removed by the next writer's recovery via the intent).
                let renamed = self.phase == Phase::Renamed;
                for lane in &mut self.lanes {
                    lane.abandon();
                    for f in &lane.files {
                        let p = lane.dir.join(&f.name);
                        let _ = fs::remove_file(tmp_path(&p));
                        if renamed {
                            let _ = fs::remove_file(&p);
                        }
                    }
                }
                let _ = fs::remove_file(self.dir.join(INTENT_FILE));
            }
            Phase::Committed | Phase::Done | Phase::Crashed => {}
        }
    }
}
