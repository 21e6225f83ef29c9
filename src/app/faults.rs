//! Frames that could not be shown: what went wrong, where, and the structural check of
//! a landed frame's grid headers.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::config::PathSel;
use crate::dataset::Dataset;
use crate::ingest::{IngestError, Source};

/// Why a frame could not be shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FrameFaultKind {
    /// A read failed (an I/O error, an unexpected end of file, a cuFile error).
    Read,
    /// A lane did not answer within the read timeout.
    Timeout,
    /// The bytes arrived, but a grid header failed the structural check.
    Header,
}

impl FrameFaultKind {
    /// The word used in the overlay.
    pub fn name(self) -> &'static str {
        match self {
            FrameFaultKind::Read => "read error",
            FrameFaultKind::Timeout => "timeout",
            FrameFaultKind::Header => "damaged header",
        }
    }
}

/// A frame that could not be shown, and where and why: the overlay shows the latest, the
/// timeline marks the frame, the headless JSON lists them all.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FrameFault {
    /// The frame.
    pub frame: u32,
    /// The path that read it.
    pub path: PathSel,
    /// What went wrong.
    pub kind: FrameFaultKind,
    /// The lane of the read or grid at fault, where known.
    pub lane: Option<u32>,
    /// The lane file, where known.
    pub file: Option<String>,
    /// The byte offset in that file, where known.
    pub offset: Option<u64>,
    /// The full message.
    pub message: String,
    /// Seconds since the player started.
    pub at_s: f64,
    /// Across ranks: the rank whose player met it (`None` in one process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<usize>,
    /// Across ranks: that rank's host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

/// Faults kept for the overlay and the JSON (the count goes on past it).
const FAULTS_KEPT: usize = 1000;

impl FrameFault {
    /// A failed read of `frame` on `path` at `at_s`, with the lane and file the error names
    /// (the lane looked up in `source` where the error names only the file).
    pub(super) fn from_error(
        source: &Source,
        path: PathSel,
        frame: u32,
        kind: FrameFaultKind,
        e: &IngestError,
        at_s: f64,
    ) -> FrameFault {
        let (file, offset, lane) = match e.site() {
            Some((file, offset, lane)) => {
                let lane =
                    lane.or_else(|| source.files.iter().find(|f| f.path == file).map(|f| f.lane));
                (Some(file.display().to_string()), Some(offset), lane)
            }
            None => (None, None, None),
        };
        FrameFault {
            frame,
            path,
            kind,
            lane,
            file,
            offset,
            message: e.to_string(),
            at_s,
            rank: None,
            host: None,
        }
    }
}

/// The player's record of frame faults: the latest ones, how many in all, which frames are
/// damaged now, and how many damaged frames played later.
#[derive(Debug, Default)]
pub(super) struct FaultLog {
    /// The latest frame faults, oldest first (at most [`FAULTS_KEPT`]).
    pub(super) latest: VecDeque<FrameFault>,
    /// Frame faults since the start.
    pub(super) count: u64,
    /// Frames marked damaged now (until they play), with why.
    pub(super) damaged: BTreeMap<u32, FrameFaultKind>,
    /// Damaged frames that played later (their lane came back).
    pub(super) recovered: u64,
}

impl FaultLog {
    /// Records `f`: its frame is damaged until it plays.
    pub(super) fn record(&mut self, f: FrameFault) {
        self.damaged.insert(f.frame, f.kind);
        self.count += 1;
        if self.latest.len() == FAULTS_KEPT {
            self.latest.pop_front();
        }
        self.latest.push_back(f);
    }

    /// `frame` arrived whole and checked: it is no longer damaged (a recovery if it was).
    pub(super) fn played(&mut self, frame: u32) {
        if self.damaged.remove(&frame).is_some() {
            self.recovered += 1;
        }
    }
}

/// Reads a slot's bytes back: (slot offset, buffer to fill), or why not.
pub(super) type ReadBack<'a> = crate::dataset::ReadSlot<'a>;

/// The structural check of every grid header of `frame` in a slot of `slot_len` bytes,
/// whose bytes `read_back` (slot offset, buffer) reads
/// ([`crate::dataset::check_frame_headers`]): `None` when all pass, else the lane and
/// file offset of the first bad grid, where known, and what is wrong.
pub(super) fn check_headers(
    dataset: &Dataset,
    source: &Source,
    slot_len: usize,
    read_back: &mut ReadBack<'_>,
    frame: u32,
) -> Option<(Option<u32>, Option<u64>, String)> {
    let f = dataset.frame(frame as usize)?;
    let bad = crate::dataset::check_frame_headers(f, slot_len, read_back).err()?;
    // Which lane holds the grid's first bytes, and where.
    let at = source.frames.get(frame as usize).and_then(|sf| {
        let e = sf
            .extents
            .iter()
            .find(|e| e.dst <= bad.offset && bad.offset < e.dst + e.len)?;
        let file = source.files.get(e.file as usize)?;
        Some((file.lane, e.offset + (bad.offset - e.dst)))
    });
    Some((at.map(|a| a.0), at.map(|a| a.1), bad.to_string()))
}
