//! What a writer checks and takes before it writes: its arguments, the dataset's write
//! lock, and the lane folders it will write to.

use std::fs::{self, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};

use super::{AttributeSpec, LOCK_FILE, LaneSpec};
use crate::dataset::ALIGN;
use crate::dataset::directory::{default_lane_dir, open_control_file};
use crate::dataset::error::{DatasetError, IoContext, Result};
use crate::dataset::manifest::check_units;

/// Refuses a chunk size that is not a positive multiple of 4 KiB and attributes that are
/// missing, unnamed, named twice or of units the manifest would not take.
pub(super) fn check_create_args(chunk_size: u64, attributes: &[AttributeSpec]) -> Result<()> {
    if chunk_size == 0 || !chunk_size.is_multiple_of(ALIGN) {
        return Err(DatasetError::Usage(format!(
            "chunk size {chunk_size} is not a positive multiple of {ALIGN}"
        )));
    }
    if attributes.is_empty() {
        return Err(DatasetError::Usage(
            "a dataset needs at least one attribute".into(),
        ));
    }
    for (i, a) in attributes.iter().enumerate() {
        if a.name.is_empty() {
            return Err(DatasetError::Usage(format!(
                "attribute {i} has an empty name"
            )));
        }
        if attributes[..i].iter().any(|b| b.name == a.name) {
            return Err(DatasetError::Usage(format!(
                "attribute name {:?} is used twice",
                a.name
            )));
        }
        if let Some(units) = &a.units {
            check_units(units).map_err(|why| {
                DatasetError::Usage(format!("attribute {:?}: units {why}", a.name))
            })?;
        }
    }
    Ok(())
}

/// Takes the dataset's lock file (created if missing): another writer holding it is
/// [`DatasetError::Locked`].
pub(super) fn lock_dataset(dir: &Path) -> Result<fs::File> {
    // Lock first: recovery and everything after must not race another writer.
    let lock_path = dir.join(LOCK_FILE);
    let lock = open_control_file(
        OpenOptions::new().create(true).truncate(false).write(true),
        &lock_path,
    )?
    .ok_or_else(|| {
        // Only when the directory vanished between its creation and here.
        DatasetError::io(
            "cannot create lock file",
            &lock_path,
            io::ErrorKind::NotFound.into(),
        )
    })?;
    match lock.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => {
            return Err(DatasetError::Locked {
                dir: dir.to_path_buf(),
                lock: lock_path,
            });
        }
        Err(fs::TryLockError::Error(e)) => {
            return Err(DatasetError::io("cannot lock", &lock_path, e));
        }
    }
    Ok(lock)
}

/// The lane directories of `lanes` (made under `dir` for a count), resolved, each once,
/// with the paths the manifest stores for them (relative when inside the dataset, so the
/// dataset can be moved as a whole).
pub(super) fn resolve_lanes(dir: &Path, lanes: LaneSpec) -> Result<(Vec<PathBuf>, Vec<String>)> {
    let lane_dirs: Vec<PathBuf> = match lanes {
        LaneSpec::Count(0) => {
            return Err(DatasetError::Usage("lane count must be at least 1".into()));
        }
        LaneSpec::Count(n) => (0..n)
            .map(|i| default_lane_dir(dir, i))
            .collect::<Result<_>>()?,
        LaneSpec::Dirs(ds) => {
            if ds.is_empty() {
                return Err(DatasetError::Usage("no lane directories given".into()));
            }
            if u32::try_from(ds.len()).is_err() {
                return Err(DatasetError::Usage("too many lane directories".into()));
            }
            for d in &ds {
                if !d.is_dir() {
                    return Err(DatasetError::Usage(format!(
                        "lane directory {} does not exist or is not a directory",
                        d.display()
                    )));
                }
            }
            ds
        }
    };
    let mut canon = Vec::with_capacity(lane_dirs.len());
    let mut lane_paths = Vec::with_capacity(lane_dirs.len());
    for (i, d) in lane_dirs.iter().enumerate() {
        let c = d.canonicalize().ctx("cannot resolve lane directory", d)?;
        if let Some(j) = canon.iter().position(|x| *x == c) {
            return Err(DatasetError::Usage(format!(
                "lanes {j} and {i} are the same directory {}",
                c.display()
            )));
        }
        // Relative when inside the dataset, so the dataset can be moved as a whole.
        let stored = c
            .strip_prefix(dir)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| c.clone());
        let s = stored.to_str().ok_or_else(|| {
            DatasetError::Usage(format!("lane directory {} is not valid UTF-8", c.display()))
        })?;
        lane_paths.push(s.to_owned());
        canon.push(c);
    }

    Ok((canon, lane_paths))
}
