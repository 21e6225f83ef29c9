//! [`verify`]: re-read a whole dataset and report every problem, not just the first.

use std::fmt;
use std::path::PathBuf;

use super::aligned::AlignedBuf;
use super::error::DatasetError;
use super::nvdb;
use super::reader::{CrcCheck, Dataset};
use crate::format::GridType;

/// Problems beyond this many are counted but not kept (a wiped lane would otherwise
/// produce one entry per extent).
const MAX_PROBLEMS: usize = 10_000;

/// One thing wrong with a dataset, located as precisely as possible.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    /// Frame index.
    pub frame: usize,
    /// Attribute name, for grid-level problems.
    pub attribute: Option<String>,
    /// Lane index, for extent-level problems.
    pub lane: Option<u32>,
    /// File index within the lane, for extent-level problems.
    pub file: Option<u32>,
    /// Lane file path, for extent-level problems.
    pub path: Option<PathBuf>,
    /// Byte offset in the lane file (extent problems) or in the slot image (grid problems).
    pub offset: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "frame {}", self.frame)?;
        if let Some(a) = &self.attribute {
            write!(f, " attribute {a:?}")?;
        }
        if let Some(l) = self.lane {
            write!(f, " lane {l}")?;
        }
        if let Some(n) = self.file {
            write!(f, " file {n}")?;
        }
        if let Some(p) = &self.path {
            write!(f, " ({})", p.display())?;
        }
        if let Some(o) = self.offset {
            let what = if self.lane.is_some() {
                "offset"
            } else {
                "slot offset"
            };
            write!(f, " {what} {o}")?;
        }
        write!(f, ": {}", self.what)
    }
}

/// Progress of a running [`verify`], passed to its callback after every frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VerifyProgress {
    /// Frames finished.
    pub frames_done: usize,
    /// Frames in the dataset.
    pub frames_total: usize,
    /// Bytes read so far.
    pub bytes_done: u64,
    /// Bytes to read in all.
    pub bytes_total: u64,
    /// Problems found so far.
    pub problems: usize,
}

/// The outcome of [`verify`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct VerifyReport {
    /// Frames checked.
    pub frames: usize,
    /// Extents read.
    pub extents: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Grids parsed and checksum-checked as NanoVDB.
    pub grids_checked: u64,
    /// Grids not parsed because they are opaque payloads or their bytes were unreadable.
    pub grids_skipped: u64,
    /// The problems (at most 10 000; see `problems_omitted`).
    pub problems: Vec<Problem>,
    /// Problems found beyond those kept.
    pub problems_omitted: usize,
}

impl VerifyReport {
    /// Whether no problem was found.
    pub fn is_ok(&self) -> bool {
        self.problems.is_empty() && self.problems_omitted == 0
    }

    fn push(&mut self, p: Problem) {
        if self.problems.len() < MAX_PROBLEMS {
            self.problems.push(p);
        } else {
            self.problems_omitted += 1;
        }
    }

    fn problem_count(&self) -> usize {
        self.problems.len() + self.problems_omitted
    }
}

/// Re-reads every extent of every frame, checks its CRC32, then parses every grid as
/// NanoVDB, checks its checksum, and compares its header with the manifest. Calls
/// `progress` after each frame.
pub fn verify(ds: &Dataset, mut progress: impl FnMut(&VerifyProgress)) -> VerifyReport {
    let m = ds.manifest();
    let mut report = VerifyReport::default();
    let bytes_total = m.total_bytes();
    let mut buf = AlignedBuf::new();
    for (fi, frame) in m.frames.iter().enumerate() {
        let results = match ds.read_frame_extents(fi, &mut buf, CrcCheck::Verify) {
            Ok(r) => r,
            Err(e) => {
                report.push(Problem {
                    frame: fi,
                    attribute: None,
                    lane: None,
                    file: None,
                    path: None,
                    offset: None,
                    what: e.to_string(),
                });
                continue;
            }
        };
        // Slot ranges that could not be read intact: grids touching them are not parsed.
        let mut bad: Vec<(u64, u64)> = Vec::new();
        for (e, r) in frame.extents.iter().zip(results) {
            report.extents += 1;
            report.bytes += e.len;
            if let Err(err) = r {
                bad.push((e.dst, e.dst + e.len));
                let what = match err {
                    DatasetError::Crc {
                        expected, actual, ..
                    } => {
                        format!(
                            "CRC32 of {} bytes is {actual:08x}, manifest says {expected:08x}",
                            e.len
                        )
                    }
                    DatasetError::Io { op, err, .. } => format!("{op}: {err}"),
                    other => other.to_string(),
                };
                report.push(Problem {
                    frame: fi,
                    attribute: None,
                    lane: Some(e.lane),
                    file: Some(e.file),
                    path: Some(ds.lane_file_path(e.lane, e.file)),
                    offset: Some(e.offset),
                    what,
                });
            }
        }
        for g in &frame.grids {
            let attr = &m.attributes[g.attribute as usize];
            let (start, end) = (g.offset, g.offset + g.size);
            let grid_problem = |what: String| Problem {
                frame: fi,
                attribute: Some(attr.name.clone()),
                lane: None,
                file: None,
                path: None,
                offset: Some(g.offset),
                what,
            };
            if attr.grid_type == GridType::Unknown || bad.iter().any(|&(s, e)| s < end && start < e)
            {
                report.grids_skipped += 1;
                continue;
            }
            let bytes = &buf[start as usize..end as usize];
            report.grids_checked += 1;
            let info = match nvdb::inspect(bytes) {
                Ok(i) => i,
                Err(msg) => {
                    report.push(grid_problem(format!("not a valid NanoVDB grid: {msg}")));
                    continue;
                }
            };
            if let Err(msg) = nvdb::check_checksum(bytes, info.version) {
                report.push(grid_problem(msg));
            }
            if info.checksum != g.checksum {
                report.push(grid_problem(format!(
                    "header checksum {:016x} differs from the manifest's {:016x}",
                    info.checksum, g.checksum
                )));
            }
            // A grid that names itself must be the attribute the manifest says it is (a
            // manifest with swapped attribute indices would otherwise verify clean and
            // render one field as another).
            if !info.name.is_empty() && info.name != attr.name {
                report.push(grid_problem(format!(
                    "the grid is named {:?}, but the manifest files it under attribute {:?}",
                    info.name, attr.name
                )));
            }
            if info.grid_type != attr.grid_type || info.grid_class != attr.grid_class {
                report.push(grid_problem(format!(
                    "grid is {} {}, the attribute is {} {}",
                    info.grid_class, info.grid_type, attr.grid_class, attr.grid_type
                )));
            }
        }
        report.frames += 1;
        progress(&VerifyProgress {
            frames_done: fi + 1,
            frames_total: m.frames.len(),
            bytes_done: report.bytes,
            bytes_total,
            problems: report.problem_count(),
        });
    }
    report
}
