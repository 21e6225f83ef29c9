//! [`import_sequence`](super::import_sequence) across ranks: each rank converts the files
//! (frames) it owns, every N-th from its rank, and the ranks write the one dataset together
//! ([`crate::dataset::ranks`]), byte for byte the one a single process writes.
//!
//! Every input this import takes splits by frames: each `.nvdb` or `.vdb` file is one
//! frame. What later files depend on comes from the first file alone (the attributes, their
//! units, how grids are matched, the classes of grids that carry none), so rank 0, which
//! converts the first file anyway, tells the others; each rank's findings (quantisation
//! errors, notes, skipped grids) reach rank 0 with its frame records, in frame order.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};

use super::{
    FileFrame, Findings, ImportOptions, ImportReport, Matching, attribute_names, attribute_specs,
    check_import, fold_findings, grid_classes, input, match_grids, read_ahead, select_grids,
    take_findings,
};
use crate::cluster::broadcast_within;
use crate::dataset::error::{DatasetError, Result};
use crate::dataset::manifest::{Manifest, Provenance};
use crate::dataset::ranks::{FrameHandover, RankWriter, WriteRanks};
use crate::dataset::writer::LaneSpec;
use crate::format::GridClass;

/// What the first file says about every frame, as rank 0 tells the other ranks.
#[derive(Clone, Serialize, Deserialize)]
struct FirstFile {
    /// The attributes' names, in order.
    names: Vec<String>,
    /// Whether later files' grids are matched by name (else by position).
    by_name: bool,
    /// Each attribute's unit.
    units: Vec<Option<String>>,
    /// The class of each of the first file's grids, by name.
    classes: Vec<(String, GridClass)>,
}

/// Rank 0's first file: its grids in attribute order (its frame), what converting it
/// found, what it says about every frame, and notes on units the manifest cannot hold.
type FirstRead = ((Vec<Vec<u8>>, Findings), FirstFile, Vec<String>);

/// Rank 0's word on the first file: what it says, or (host, why) it could not be read.
type FirstWord = std::result::Result<FirstFile, (String, String)>;

/// [`import_sequence`](super::import_sequence) as one of the ranks of `team` (each calls
/// it with the same arguments; one rank alone is `import_sequence` itself): this rank
/// converts files `rank`, `rank + N`, ... Returns
/// the manifest and the report of every rank's files on rank 0, `None` on the others. A
/// failure on any rank is an error on every rank, naming it; a rank silent past the team's
/// wait is named by those that waited ([`DatasetError::RanksSilent`]).
#[allow(clippy::too_many_arguments)]
pub fn import_sequence_ranks(
    files: &[PathBuf],
    out: impl AsRef<Path>,
    lanes: LaneSpec,
    chunk_size: u64,
    times: Option<&[f64]>,
    provenance: Provenance,
    options: &ImportOptions,
    team: WriteRanks<'_>,
    mut progress: impl FnMut(usize),
) -> Result<Option<(Manifest, ImportReport)>> {
    let ranks = team.ranks;
    if ranks.size() == 1 {
        return super::import_sequence(
            files, out, lanes, chunk_size, times, provenance, options, progress,
        )
        .map(Some);
    }
    check_import(files, times, options)?;
    let mut report = ImportReport::default();
    // Rank 0 reads the first file (its own first frame) and tells the others about it.
    let first_frame = (ranks.rank() == 0).then(|| read_first(files, options));
    let word: FirstWord = match &first_frame {
        Some(Ok((_, first, unit_notes))) => {
            report.notes.extend(unit_notes.iter().cloned());
            Ok(first.clone())
        }
        Some(Err(e)) => Err((ranks.host(), e.to_string())),
        None => Err((String::new(), String::new())),
    };
    let bytes = serde_json::to_vec(&word).expect("the first file's word serializes");
    let heard = broadcast_within(ranks, &bytes, team.wait).map_err(DatasetError::RanksSilent)?;
    let first: FirstFile = match serde_json::from_slice::<FirstWord>(&heard) {
        Ok(Ok(first)) => first,
        Ok(Err((host, why))) => {
            return Err(DatasetError::RankFailed {
                failed: vec![(0, host, why)],
            });
        }
        Err(e) => {
            return Err(DatasetError::RankFailed {
                failed: vec![(
                    0,
                    String::new(),
                    format!("garbled word on the first file: {e}"),
                )],
            });
        }
    };
    let attrs = first
        .names
        .iter()
        .zip(&first.units)
        .map(|(n, u)| crate::dataset::AttributeSpec::new(n).with_units(u.clone()))
        .collect();
    let mut writer = RankWriter::create(
        team,
        out.as_ref(),
        lanes,
        chunk_size,
        attrs,
        // A .vdb/.nvdb sequence's domain is known only once every file is read: whole grids.
        Vec::new(),
        provenance,
        files.len(),
        FrameHandover::Whole,
    )?;
    let first_frame = first_frame.and_then(|r| r.ok()).map(|(frame, _, _)| frame);
    let mine = convert_own(
        files,
        times,
        options,
        &first,
        first_frame,
        &mut writer,
        &mut progress,
    );
    let findings = match &mine {
        Ok(found) => serde_json::to_string(found).expect("findings serialize"),
        Err(_) => String::new(),
    };
    let converted = mine.map(|_| ()).map_err(|e| e.to_string());
    let Some((manifest, reports)) = writer.finish_reporting(converted, findings)? else {
        return Ok(None);
    };
    let mut by_frame: Vec<(usize, Findings)> = Vec::with_capacity(files.len());
    for (rank, text) in reports.iter().enumerate() {
        let found: Vec<(usize, Findings)> = serde_json::from_str(text)
            .map_err(|e| DatasetError::Usage(format!("rank {rank}'s findings do not read: {e}")))?;
        by_frame.extend(found);
    }
    by_frame.sort_by_key(|(frame, _)| *frame);
    // In frame order, as one process reports them (the first file's unit notes after
    // its own, as there).
    let unit_notes = std::mem::take(&mut report.notes);
    for (frame, found) in by_frame {
        fold_findings(&mut report, found);
        if frame == 0 {
            report.notes.extend(unit_notes.iter().cloned());
        }
    }
    Ok(Some((manifest, report)))
}

impl FirstFile {
    fn matching(&self) -> Matching {
        match self.by_name {
            true => Matching::ByName,
            false => Matching::ByPosition,
        }
    }
}

/// Rank 0: the first file read, with its grids selected (the frame to push), what it says
/// about every frame, and the notes on units it gives that the manifest cannot hold.
fn read_first(files: &[PathBuf], options: &ImportOptions) -> Result<FirstRead> {
    let path = &files[0];
    let (tx, rx) = mpsc::sync_channel(1);
    read_ahead(files, vec![0], options, HashMap::new(), tx);
    let (_, frame) = rx.recv().expect("the first file was read");
    let mut frame: FileFrame = frame?;
    let classes = grid_classes(&frame).into_iter().collect();
    let found = take_findings(&mut frame);
    let grids = select_grids(frame.grids, options.grids.as_deref(), path)?;
    let (names, matching) = attribute_names(&grids);
    let mut unit_notes = Vec::new();
    let specs = attribute_specs(&names, &frame.units, path, &mut unit_notes);
    let first = FirstFile {
        units: specs.into_iter().map(|s| s.units).collect(),
        by_name: matches!(matching, Matching::ByName),
        names,
        classes,
    };
    let ordered = match_grids(grids, &first.names, &matching, path, path)?;
    Ok(((ordered, found), first, unit_notes))
}

/// Converts and hands over this rank's files in turn (rank 0's first, already read, given
/// as `first_frame`), one read ahead of the writer; each file's findings by frame.
fn convert_own(
    files: &[PathBuf],
    times: Option<&[f64]>,
    options: &ImportOptions,
    first: &FirstFile,
    first_frame: Option<(Vec<Vec<u8>>, Findings)>,
    writer: &mut RankWriter<'_>,
    progress: &mut impl FnMut(usize),
) -> Result<Vec<(usize, Findings)>> {
    let own: Vec<usize> = (0..files.len()).filter(|&i| writer.owns(i)).collect();
    let time = |i: usize| times.map_or(i as f64, |t| t[i]);
    let mut found = Vec::with_capacity(own.len());
    let mut done = 0;
    if let Some((grids, f)) = first_frame {
        writer.push_frame(0, time(0), &grids)?;
        found.push((0, f));
        done += 1;
        progress(done);
    }
    let later: Vec<usize> = own.into_iter().filter(|&i| i != 0).collect();
    let classes: HashMap<String, GridClass> = first.classes.iter().cloned().collect();
    let matching = first.matching();
    std::thread::scope(|s| {
        let (tx, rx) = mpsc::sync_channel::<(usize, Result<FileFrame>)>(1);
        s.spawn(move || read_ahead(files, later, options, classes, tx));
        for (i, frame) in rx {
            let path = &files[i];
            let mut frame = frame?;
            found.push((i, take_findings(&mut frame)));
            let grids = select_grids(frame.grids, options.grids.as_deref(), path)?;
            let ordered = match_grids(grids, &first.names, &matching, path, &files[0])?;
            writer
                .push_frame(i, time(i), &ordered)
                .map_err(|e| input(path, e.to_string()))?;
            done += 1;
            progress(done);
        }
        Ok(found)
    })
}
