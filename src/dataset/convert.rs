//! Import of `.nvdb` sequences into the striped layout, and export of frames back to
//! standard `.nvdb` files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;

use super::AlignedBuf;
use super::error::{DatasetError, Result};
use super::manifest::{Manifest, Provenance};
use super::reader::{CrcCheck, Dataset};
use super::writer::{AttributeSpec, DatasetWriter, LaneSpec};
use crate::format::{Codec, FileGrid, read_nvdb, write_nvdb};

/// How grids of later files are matched to attributes.
enum Matching {
    /// Every grid of the first file has a distinct non-empty name: match by name.
    ByName,
    /// Otherwise: match by position.
    ByPosition,
}

/// Imports a sequence of `.nvdb` files, one per frame, into a new dataset at `out`
/// (replacing any dataset there, crash-safely) and returns its manifest.
///
/// The first file defines the attributes: its grids, in file order. When all of them have
/// distinct non-empty names, grids of later files are matched by name (their order may
/// differ); otherwise by position, and unnamed attributes are called `grid0`, `grid1`, ...
/// Every file must hold the same set of grids, of the same type and class; a mismatch is
/// an error naming the file. Compressed grids (ZIP, Blosc) are decoded and stored raw.
///
/// `times` gives each frame's time (one per file, finite, increasing); by default frame
/// `i` is at time `i`. `progress` is called with the number of frames written so far.
/// Files are read one ahead of the writer, so decoding overlaps striping.
pub fn import_nvdb_sequence(
    files: &[PathBuf],
    out: impl AsRef<Path>,
    lanes: LaneSpec,
    chunk_size: u64,
    times: Option<&[f64]>,
    provenance: Provenance,
    mut progress: impl FnMut(usize),
) -> Result<Manifest> {
    if files.is_empty() {
        return Err(DatasetError::Usage("no .nvdb files to import".into()));
    }
    if let Some(t) = times {
        if t.len() != files.len() {
            return Err(DatasetError::Usage(format!(
                "{} times given for {} files",
                t.len(),
                files.len()
            )));
        }
        for (i, w) in t.windows(2).enumerate() {
            if !(w[0].is_finite() && w[1].is_finite() && w[0] < w[1]) {
                return Err(DatasetError::Usage(format!(
                    "times must be finite and increasing: {} ({}) is followed by {} ({})",
                    w[0],
                    files[i].display(),
                    w[1],
                    files[i + 1].display()
                )));
            }
        }
    }
    std::thread::scope(|s| {
        // Read (and decompress) the next file while the current one is striped. Bounded
        // so that at most two frames wait in memory.
        let (tx, rx) = mpsc::sync_channel::<(usize, Result<Vec<FileGrid>>)>(1);
        s.spawn(move || {
            for (i, f) in files.iter().enumerate() {
                let r = read_nvdb(f).map_err(DatasetError::from);
                let stop = r.is_err();
                if tx.send((i, r)).is_err() || stop {
                    break;
                }
            }
        });
        let mut writer: Option<(DatasetWriter, Vec<String>, Matching)> = None;
        for (i, grids) in rx {
            let path = &files[i];
            let grids = grids?;
            if grids.is_empty() {
                return Err(input(path, "holds no grids".into()));
            }
            let (w, names, matching) = match &mut writer {
                Some(w) => w,
                None => {
                    let (names, matching) = attribute_names(&grids);
                    let attrs = names.iter().map(AttributeSpec::new).collect();
                    let w = DatasetWriter::create(
                        out.as_ref(),
                        lanes.clone(),
                        chunk_size,
                        attrs,
                        provenance.clone(),
                    )?;
                    writer.insert((w, names, matching))
                }
            };
            let ordered = match_grids(grids, names, matching, path, &files[0])?;
            let time = times.map_or(i as f64, |t| t[i]);
            w.push_frame(time, ordered)
                .map_err(|e| input(path, e.to_string()))?;
            progress(i + 1);
        }
        let (w, _, _) = writer.expect("at least one file was read");
        w.finish()
    })
}

fn input(path: &Path, msg: String) -> DatasetError {
    DatasetError::Input {
        path: path.to_path_buf(),
        msg,
    }
}

/// A grid's name: the file metadata's, else the one in the grid header.
fn grid_name(g: &FileGrid) -> String {
    if !g.name.is_empty() {
        return g.name.clone();
    }
    g.grid().map(|p| p.name().to_owned()).unwrap_or_default()
}

fn attribute_names(grids: &[FileGrid]) -> (Vec<String>, Matching) {
    let names: Vec<String> = grids.iter().map(grid_name).collect();
    let distinct = names
        .iter()
        .enumerate()
        .all(|(i, n)| !n.is_empty() && !names[..i].contains(n));
    if distinct {
        (names, Matching::ByName)
    } else {
        let named = names
            .into_iter()
            .enumerate()
            .map(|(i, n)| if n.is_empty() { format!("grid{i}") } else { n })
            .collect::<Vec<_>>();
        // Positional names must still be unique attribute names.
        let unique = named
            .iter()
            .enumerate()
            .map(|(i, n)| {
                if named[..i].contains(n) {
                    format!("{n}#{i}")
                } else {
                    n.clone()
                }
            })
            .collect();
        (unique, Matching::ByPosition)
    }
}

/// Puts the grids of one file into attribute order.
fn match_grids(
    grids: Vec<FileGrid>,
    names: &[String],
    matching: &Matching,
    path: &Path,
    first: &Path,
) -> Result<Vec<Vec<u8>>> {
    match matching {
        Matching::ByPosition => {
            if grids.len() != names.len() {
                return Err(input(
                    path,
                    format!(
                        "holds {} grids, the first file ({}) holds {}",
                        grids.len(),
                        first.display(),
                        names.len()
                    ),
                ));
            }
            Ok(grids.into_iter().map(|g| g.bytes).collect())
        }
        Matching::ByName => {
            let mut by_name: HashMap<String, Vec<u8>> = HashMap::with_capacity(grids.len());
            for g in grids {
                let n = grid_name(&g);
                if !names.contains(&n) {
                    return Err(input(
                        path,
                        format!(
                            "grid {n:?} is not in the first file ({}), which has {names:?}",
                            first.display()
                        ),
                    ));
                }
                if by_name.insert(n.clone(), g.bytes).is_some() {
                    return Err(input(path, format!("holds two grids named {n:?}")));
                }
            }
            names
                .iter()
                .map(|n| {
                    by_name.remove(n).ok_or_else(|| {
                        input(
                            path,
                            format!(
                                "has no grid named {n:?} (the first file, {}, has)",
                                first.display()
                            ),
                        )
                    })
                })
                .collect()
        }
    }
}

/// Writes frame `frame` of `ds` as a standard `.nvdb` file at `out`: its grids in
/// attribute order, encoded with `codec`. The frame's extents are CRC-checked on the way.
pub fn export_frame(ds: &Dataset, frame: usize, out: impl AsRef<Path>, codec: Codec) -> Result<()> {
    let mut buf = AlignedBuf::new();
    ds.read_frame(frame, &mut buf, CrcCheck::Verify)?;
    let grids = (0..ds.manifest().attributes.len())
        .map(|a| ds.grid_bytes(frame, a, &buf))
        .collect::<Result<Vec<&[u8]>>>()?;
    write_nvdb(out.as_ref(), &grids, codec)?;
    Ok(())
}
