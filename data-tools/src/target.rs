//! What a PATH argument names: a dataset directory, or a file of NanoVDB grids.

use anyhow::{Context, Result, bail};
use std::path::Path;
use supercell::dataset::{AlignedBuf, CrcCheck, Dataset, MANIFEST_FILE};
use supercell::format::{
    ChecksumKind, ChecksumState, FileGrid, Version, read_nvdb, verify_checksum,
};

/// Grids loaded from a PATH argument, with where they came from.
pub struct LoadedGrids {
    /// The grids, in file (or attribute) order.
    pub grids: Vec<FileGrid>,
    /// For datasets: the frame the grids belong to.
    pub frame: Option<usize>,
}

/// Whether `path` names a dataset (a directory) rather than a file of grids; whether it
/// really is one is checked by [`open_dataset`], which says what is missing.
pub fn is_dataset(path: &Path) -> bool {
    path.is_dir()
}

/// Opens the dataset at `path`, with an error that says what was expected.
pub fn open_dataset(path: &Path) -> Result<Dataset> {
    if !path.join(MANIFEST_FILE).is_file() {
        bail!(
            "{}: not a supercell dataset (no {MANIFEST_FILE}; an interrupted write leaves none)",
            path.display()
        );
    }
    Dataset::open(path).with_context(|| format!("opening dataset {}", path.display()))
}

/// Loads the grids of a `.nvdb`/raw grid file, or of frame `frame` of a dataset, verifying
/// the dataset's extent CRCs on the way.
pub fn load(path: &Path, frame: Option<usize>) -> Result<LoadedGrids> {
    if !path.exists() {
        bail!("{}: no such file or directory", path.display());
    }
    if is_dataset(path) {
        let ds = open_dataset(path)?;
        let f = frame.unwrap_or(0);
        if f >= ds.frame_count() {
            bail!(
                "{}: frame {f} does not exist (the dataset has {} frames)",
                path.display(),
                ds.frame_count()
            );
        }
        let mut buf = AlignedBuf::new();
        ds.read_frame(f, &mut buf, CrcCheck::Verify)
            .with_context(|| format!("{}: reading frame {f}", path.display()))?;
        let m = ds.manifest();
        let mut grids = Vec::new();
        for (entry, bytes) in ds.frame_grids(f, &buf)? {
            let attr = &m.attributes[entry.attribute as usize];
            let mut loaded = supercell::format::read_nvdb_bytes(bytes).with_context(|| {
                format!("{}: frame {f} attribute {:?}", path.display(), attr.name)
            })?;
            let mut g = loaded.remove(0);
            // The manifest's name (unique, `density#1` for a second `density`) is the one
            // every command shows and accepts; a brick's grid is `NAME@brickB`, so that no
            // brick passes for the whole grid.
            g.name = match entry.brick {
                None => attr.name.clone(),
                Some(b) => format!("{}@brick{b}", attr.name),
            };
            grids.push(g);
        }
        return Ok(LoadedGrids {
            grids,
            frame: Some(f),
        });
    }
    if frame.is_some() {
        bail!("--frame applies to datasets; {} is a file", path.display());
    }
    let grids = read_nvdb(path)?;
    Ok(LoadedGrids { grids, frame: None })
}

/// The grid `sel` names among grids called `names` (in order): a name as the manifest lists
/// it (a second grid called `density` is `density#1`), or an index. `None`: no such grid.
pub fn select_grid(names: &[String], sel: &str) -> Option<usize> {
    let unique = supercell::format::openvdb::unique_grid_names(names.iter().map(String::as_str));
    unique
        .iter()
        .position(|n| n == sel)
        .or_else(|| sel.parse::<usize>().ok().filter(|&i| i < names.len()))
}

/// Checks the NanoVDB checksum stored in grid `bytes` (of NanoVDB `version`) against its
/// bytes. `what` names the grid in messages (`storm: frame 0 grid 1 ("rain")`).
///
/// A mismatch is an error, or with `allow_bad` (the `--allow-bad-checksum` flag) a warning on
/// stderr; a grid without a checksum, or one whose checksum matches, passes silently.
pub fn check_checksum(what: &str, bytes: &[u8], version: Version, allow_bad: bool) -> Result<()> {
    let ChecksumState::Mismatch { stored, computed } = verify_checksum(bytes, version) else {
        return Ok(());
    };
    let kind = ChecksumKind::of(stored).name();
    let problem = format!(
        "{what}: NanoVDB checksum mismatch ({kind} checksum stored {stored:016x}, the bytes give \
         {computed:016x}): the grid is damaged"
    );
    if allow_bad {
        eprintln!("supercell-data: warning: {problem}; reading it anyway (--allow-bad-checksum)");
        Ok(())
    } else {
        bail!("{problem} (--allow-bad-checksum reads it anyway)")
    }
}
