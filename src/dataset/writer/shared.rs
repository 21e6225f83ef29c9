//! Several ranks writing one dataset: the lead's [`SharedWrite`], the other ranks'
//! writers, frames placed for another rank, and the lead taking in the others' records
//! (`super::super::ranks` drives them).

use std::collections::HashSet;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{
    AttributeSpec, DatasetWriter, FileMode, LaneWriter, OpenFrame, Phase, Provenance, Role,
    check_create_args, merge_attribute, new_attribute,
};
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::manifest::{Attribute, Brick, Extent, Frame, GridEntry};
use crate::dataset::naming;
use crate::dataset::stripe::slot_layout;
use crate::format::GridType;

/// What the ranks that write a dataset together share: where, under which write id, and
/// the layout parameters ([`DatasetWriter::share`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SharedWrite {
    /// The dataset directory (canonical).
    pub dir: PathBuf,
    /// The write's id: every lane file name starts with it.
    pub write_id: String,
    /// The lane directories (canonical), in lane order.
    pub lane_dirs: Vec<PathBuf>,
    /// Stripe chunk size.
    pub chunk_size: u64,
    /// Size past which a lane starts a new file.
    pub segment_size: u64,
    /// The spatial bricks every grid is split into ([`DatasetWriter::set_bricks`]); empty
    /// for whole grids.
    #[serde(default)]
    pub bricks: Vec<Brick>,
}

impl DatasetWriter {
    /// Makes this writer the lead of several ranks that write the dataset together, each
    /// its own frames into the same lane files; returns what the other ranks need to
    /// [`join`](Self::join) it. Only before the first frame. Every rank then places every
    /// frame in order (its own pushed, the others' [skipped](Self::skip_frame) with their
    /// grid sizes), so all agree where each chunk goes; the lead [adopts](Self::adopt_frame)
    /// the others' frame records and commits as a single writer does.
    pub fn share(&mut self) -> Result<SharedWrite> {
        if !self.frames.is_empty() || self.open_frame.is_some() || self.role != Role::Alone {
            return Err(DatasetError::Usage(
                "a write is shared before its first frame, once".into(),
            ));
        }
        self.role = Role::Lead;
        for lane in &mut self.lanes {
            lane.mode = FileMode::Shared;
        }
        Ok(SharedWrite {
            dir: self.dir.clone(),
            write_id: self.write_id.clone(),
            lane_dirs: self.lanes.iter().map(|l| l.dir.clone()).collect(),
            chunk_size: self.chunk_size,
            segment_size: self.segment_size,
            bricks: self.bricks.clone(),
        })
    }

    /// A writer for one of the ranks that write the dataset `share` describes (from the lead's
    /// [`share`](Self::share)), with the lead's `attributes`. It writes its own frames'
    /// bytes and commits nothing: dropped, it leaves its files for the lead to keep or
    /// remove.
    pub fn join(share: &SharedWrite, attributes: Vec<AttributeSpec>) -> Result<DatasetWriter> {
        check_create_args(share.chunk_size, &attributes)?;
        if !naming::is_write_id(&share.write_id) || share.lane_dirs.is_empty() {
            return Err(DatasetError::Usage(format!(
                "shared write {:?}: not a write id, or no lanes",
                share.write_id
            )));
        }
        crate::dataset::bricks::check_bricks(&share.bricks).map_err(DatasetError::Usage)?;
        let lanes = share.lane_dirs.iter().enumerate();
        Ok(DatasetWriter {
            dir: share.dir.clone(),
            _lock: None,
            role: Role::Follower,
            described: 0,
            write_id: share.write_id.clone(),
            chunk_size: share.chunk_size,
            segment_size: share.segment_size,
            lane_paths: Vec::new(),
            lanes: lanes
                .map(|(i, d)| LaneWriter::new(i as u32, d.clone(), FileMode::Shared))
                .collect(),
            attributes: attributes.into_iter().map(new_attribute).collect(),
            bricks: share.bricks.clone(),
            frames: Vec::new(),
            foreign: Vec::new(),
            open_frame: None,
            provenance: Provenance::default(),
            replaced_files: Vec::new(),
            left_alone: Vec::new(),
            phase: Phase::Writing,
            failed: None,
            crash_at: None,
        })
    }

    /// Places the next frame, which another rank writes: `grid_sizes` are its grids'
    /// lengths, `whole` whether that rank pushes it whole ([`push_frame`](Self::push_frame)
    /// and the like) or grid by grid ([`begin_frame`](Self::begin_frame)), as this
    /// writer's own frames are. The lane files then hold a gap of exactly the bytes that
    /// rank writes there.
    pub fn skip_frame(&mut self, time: f64, grid_sizes: &[u64], whole: bool) -> Result<()> {
        let frame = self.frames.len();
        self.check_time(time)?;
        if self.open_frame.is_some() || grid_sizes.len() != self.grids_per_frame() {
            return Err(DatasetError::Usage(format!(
                "frame {frame}: skipped while a frame is open, or with {} grids for {} attributes{}",
                grid_sizes.len(),
                self.attributes.len(),
                self.bricks_note()
            )));
        }
        if grid_sizes.contains(&0) {
            return Err(DatasetError::Usage(format!("frame {frame}: an empty grid")));
        }
        let slot_size = slot_layout(grid_sizes).map(|(_, total)| total);
        if slot_size.is_none() {
            return Err(DatasetError::Usage(format!(
                "frame {frame}: slot image size overflows"
            )));
        }
        self.open_frame = Some(OpenFrame {
            time,
            slot_size: slot_size.filter(|_| whole),
            entries: Vec::with_capacity(grid_sizes.len()),
            end: 0,
            extents: Vec::new(),
        });
        for &len in grid_sizes {
            self.place_grid(None, len, 0)?;
        }
        self.foreign.push(frame);
        self.record_frame()
    }

    /// This writer's own frames (those not skipped), with their indices.
    pub fn own_frames(&self) -> Vec<(usize, Frame)> {
        let foreign: HashSet<usize> = self.foreign.iter().copied().collect();
        (0..self.frames.len())
            .filter(|i| !foreign.contains(i))
            .map(|i| (i, self.frames[i].clone()))
            .collect()
    }

    /// Each attribute's statistics over this writer's own frames.
    pub fn attributes(&self) -> &[Attribute] {
        &self.attributes
    }

    /// Takes frame `index`, which this writer skipped, as the rank that wrote it recorded it
    /// (its grids' checksums, its extents' CRCs). Its placement must be the one this writer
    /// gave it.
    pub fn adopt_frame(&mut self, index: usize, frame: Frame) -> Result<()> {
        let Some(at) = self.foreign.iter().position(|&f| f == index) else {
            return Err(DatasetError::Usage(format!(
                "frame {index}: not a frame another rank writes"
            )));
        };
        let mine = &self.frames[index];
        let strip =
            |e: &[Extent]| -> Vec<Extent> { e.iter().map(|x| Extent { crc32: 0, ..*x }).collect() };
        let grids = |g: &[GridEntry]| -> Vec<(u32, Option<u32>, u64, u64)> {
            g.iter()
                .map(|x| (x.attribute, x.brick, x.offset, x.size))
                .collect()
        };
        // The time is this writer's own (it came exactly, as bits; the record's went
        // through text).
        let same = mine.slot_size == frame.slot_size
            && strip(&mine.extents) == strip(&frame.extents)
            && grids(&mine.grids) == grids(&frame.grids);
        let time = mine.time;
        if !same {
            return Err(DatasetError::Usage(format!(
                "frame {index}: the rank that wrote it placed it elsewhere"
            )));
        }
        self.frames[index] = Frame { time, ..frame };
        self.foreign.swap_remove(at);
        Ok(())
    }

    /// Merges another rank's attribute statistics (its [`attributes`](Self::attributes))
    /// into this writer's; grid type, class and voxel size must agree, as between frames.
    pub fn merge_attributes(&mut self, theirs: &[Attribute]) -> Result<()> {
        if theirs.len() != self.attributes.len() {
            return Err(DatasetError::Usage(format!(
                "{} attributes from another rank, the dataset has {}",
                theirs.len(),
                self.attributes.len()
            )));
        }
        for (mine, t) in self.attributes.iter_mut().zip(theirs) {
            let known = mine.grid_type != GridType::Unknown && t.grid_type != GridType::Unknown;
            let agree = (mine.grid_type, mine.grid_class, mine.voxel_size)
                == (t.grid_type, t.grid_class, t.voxel_size);
            if known && !agree {
                return Err(DatasetError::Usage(format!(
                    "attribute {:?}: grid type, class or voxel size differ between ranks' frames",
                    mine.name
                )));
            }
            if t.grid_type != GridType::Unknown {
                merge_attribute(mine, t);
            }
        }
        Ok(())
    }

    /// Makes this writer's bytes durable (flush and fsync its open files), for a rank that
    /// does not commit: the lead commits once every rank has.
    pub fn sync_own(&mut self) -> Result<()> {
        for lane in &mut self.lanes {
            lane.close_current()?;
        }
        Ok(())
    }
}
