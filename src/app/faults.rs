//! Frames that could not be shown: what went wrong, where, and the structural check of
//! a landed frame's grid headers.

use serde::Serialize;

use super::config::PathSel;
use crate::gpu::FrameRing;
use crate::ingest::Source;
use crate::scene::LoadedScene;

/// Why a frame could not be shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
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
#[derive(Clone, Debug, Serialize, PartialEq)]
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
}

/// Faults kept for the overlay and the JSON (the count goes on past it).
pub(super) const FAULTS_KEPT: usize = 1000;

/// The structural check of every grid header of `frame` in `slot` (see
/// [`crate::format::Grid::check_header`]): `None` when all pass, else the lane and
/// file offset of the first bad grid, where known, and what is wrong.
pub(super) fn check_headers(
    scene: &LoadedScene,
    source: &Source,
    ring: &FrameRing,
    slot: usize,
    frame: u32,
) -> Option<(Option<u32>, Option<u64>, String)> {
    let f = scene.dataset.frame(frame as usize)?;
    let mut prefix = Vec::new();
    for g in &f.grids {
        let (start, len) = (g.offset as usize, g.size as usize);
        let bad = |msg: String| {
            // Which lane holds the grid's first bytes, and where.
            let at = source.frames.get(frame as usize).and_then(|sf| {
                let e = sf
                    .extents
                    .iter()
                    .find(|e| e.dst <= g.offset && g.offset < e.dst + e.len)?;
                let file = source.files.get(e.file as usize)?;
                Some((file.lane, e.offset + (g.offset - e.dst)))
            });
            Some((
                at.map(|a| a.0),
                at.map(|a| a.1),
                format!(
                    "grid of attribute {} at slot offset {}: {msg}",
                    g.attribute, g.offset
                ),
            ))
        };

        if start
            .checked_add(len)
            .is_none_or(|end| end > ring.slot_len())
        {
            return bad(format!("{len} bytes do not fit the slot"));
        }
        let checked = match ring.host_bytes(slot) {
            Some(bytes) => crate::format::Grid::check_header(&bytes[start..start + len], g.size),
            None => {
                // Device memory: read the headers back (a few KiB).
                prefix.resize(len.min(crate::format::Grid::HEADER_PREFIX), 0);
                match ring.read_back(slot, start, &mut prefix) {
                    Ok(()) => crate::format::Grid::check_header(&prefix, g.size),
                    Err(e) => return bad(format!("cannot read the header back: {e}")),
                }
            }
        };
        match checked {
            Ok(size) if size == g.size => {}
            Ok(size) => {
                return bad(format!(
                    "the header says {size} bytes, the dataset {} bytes",
                    g.size
                ));
            }
            Err(e) => return bad(e.to_string()),
        }
    }
    None
}
