//! What a dataset directory holds besides its frames, and how a writer keeps it valid
//! across crashes: the write-intent record, control files written atomically, which lane
//! directories and files a write owns, and the recovery of an interrupted write. The
//! writer ([`super::writer`]) drives these; nothing here knows of frames or grids.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::MANIFEST_FILE;
use super::error::{DatasetError, IoContext, Result};
use super::manifest::{Manifest, Provenance, check_header, sync_dir};
use super::naming::{TMP_EXT, is_write_id, parse_lane_file_name};

/// The write-intent record's file name.
pub(super) const INTENT_FILE: &str = ".supercell-write.intent";
/// Largest write-intent record read back (it lists the replaced dataset's lane files).
pub(super) const MAX_INTENT_BYTES: u64 = 64 << 20;

/// What `.supercell-write.intent` records, so an interrupted write can be cleaned up.
/// Paths are written as provenance arguments are ([`Provenance::arg_text`]): as they are
/// where UTF-8, else marked and escaped, so a dataset under a path with byte 0xff is
/// recorded (JSON strings cannot hold such a path) and read back exactly.
#[derive(Serialize, Deserialize)]
pub(super) struct Intent {
    pub(super) write_id: String,
    #[serde(with = "os_paths")]
    pub(super) lane_dirs: Vec<PathBuf>,
    #[serde(with = "os_paths")]
    pub(super) replaced_files: Vec<PathBuf>,
}

/// Paths as lossless text (see [`Intent`]).
mod os_paths {
    use super::Provenance;
    use serde::{Deserialize, Deserializer, Serializer};
    use std::path::PathBuf;

    pub(super) fn serialize<S: Serializer>(v: &[PathBuf], s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter().map(|p| Provenance::arg_text(p.as_os_str())))
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<PathBuf>, D::Error> {
        Vec::<String>::deserialize(d)?
            .iter()
            .map(|t| {
                Provenance::arg_os(t)
                    .map(PathBuf::from)
                    .ok_or_else(|| serde::de::Error::custom(format!("malformed path {t:?}")))
            })
            .collect()
    }
}

/// The temporary name a file is written under before its rename to `final_path`.
pub(super) fn tmp_path(final_path: &Path) -> PathBuf {
    let mut s = final_path.as_os_str().to_owned();
    s.push(".");
    s.push(TMP_EXT);
    PathBuf::from(s)
}

/// A write id unique across processes and writes: time, process id, and a counter.
pub(super) fn new_write_id() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format!(
        "w{:x}{:08x}-{:x}-{}",
        t.as_secs(),
        t.subsec_nanos(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes a small file durably and atomically (temp, fsync, rename, fsync dir).
pub(super) fn write_small_atomic(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let dst = dir.join(name);
    let tmp = tmp_path(&dst);
    // A leftover temp is ours to replace: unlinking removes a symlink itself, never what
    // it points to, and `create_new` (O_EXCL) refuses to follow one planted since.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(DatasetError::io("cannot remove stale", &tmp, e)),
    }
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .ctx("cannot create", &tmp)?;
    f.write_all(bytes).ctx("cannot write", &tmp)?;
    f.sync_all().ctx("cannot fsync", &tmp)?;
    drop(f);
    fs::rename(&tmp, &dst).ctx("cannot rename into place", &dst)?;
    sync_dir(dir)
}

/// Opens one of the writer's control files (the lock, the intent) without following a
/// symbolic link at its name and without blocking on a FIFO; anything but a regular file
/// is refused. `None` when the file does not exist and `opts` does not create it.
pub(super) fn open_control_file(opts: &mut OpenOptions, path: &Path) -> Result<Option<File>> {
    let file = match opts
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(DatasetError::Input {
                path: path.to_path_buf(),
                msg: "is a symbolic link; the writer's lock and intent files are regular files it creates itself (check where it points, then remove it)".into(),
            });
        }
        Err(e) => return Err(DatasetError::io("cannot open", path, e)),
    };
    let md = file.metadata().ctx("cannot inspect", path)?;
    if !md.is_file() {
        return Err(DatasetError::Input {
            path: path.to_path_buf(),
            msg: "is not a regular file; the writer's lock and intent files are regular files it creates itself".into(),
        });
    }
    Ok(Some(file))
}

/// What `manifest.json` holds in a directory about to be written.
pub(super) enum Existing {
    /// Nothing: a new dataset.
    Absent,
    /// A supercell manifest that loads: its lane files are candidates for deletion.
    Dataset(Box<Manifest>),
    /// A supercell manifest of this version that does not load (the message says why): it
    /// is replaced, but which files it had is unknown, so none are deleted.
    Damaged(String),
}

/// Looks at the manifest a write would replace. Anything that is not a supercell manifest
/// of this format version (another program's JSON, not JSON at all, a directory, a newer
/// version) is refused: the directory is not ours to write into.
pub(super) fn existing_manifest(path: &Path) -> Result<Existing> {
    let refuse = |why: String| {
        DatasetError::manifest(
            path,
            format!(
                "{why}; not a supercell dataset this build can replace, so nothing in this directory is changed (choose another directory, or move the file away)"
            ),
        )
    };
    let md = match fs::metadata(path) {
        Ok(md) => md,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if fs::symlink_metadata(path).is_ok() {
                return Err(refuse("is a symbolic link to nothing".into()));
            }
            return Ok(Existing::Absent);
        }
        Err(e) => return Err(DatasetError::io("cannot inspect", path, e)),
    };
    if !md.is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    let text = fs::read(path).ctx("cannot read", path)?;
    check_header(&text).map_err(refuse)?;
    Ok(match Manifest::from_json(&text, path) {
        Ok(m) => Existing::Dataset(Box::new(m)),
        Err(e) => Existing::Damaged(e.to_string()),
    })
}

/// `DATASET/lanes/<i>`, created if missing. An existing one must be a real directory: a
/// symbolic link there (say, in a dataset copied from elsewhere) would send this write's
/// files, and later deletions, somewhere else.
pub(super) fn default_lane_dir(dir: &Path, i: u32) -> Result<PathBuf> {
    let lanes = dir.join("lanes");
    let lane = lanes.join(i.to_string());
    for p in [&lanes, &lane] {
        match fs::create_dir(p) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                let md = fs::symlink_metadata(p).ctx("cannot inspect", p)?;
                if !md.is_dir() {
                    let what = if md.file_type().is_symlink() {
                        "a symbolic link"
                    } else {
                        "not a directory"
                    };
                    return Err(DatasetError::Usage(format!(
                        "{} is {what}; a dataset's own lanes are real directories inside it (name lane directories elsewhere explicitly instead)",
                        p.display()
                    )));
                }
            }
            Err(e) => return Err(DatasetError::io("cannot create lane directory", p, e)),
        }
    }
    Ok(lane)
}

/// The lane directories whose lane files a writer of `dir` may delete, canonical: this
/// write's own (`this_write`, canonical) and every real directory `DATASET/lanes/<n>`.
pub(super) fn owned_lane_dirs(dir: &Path, this_write: &[PathBuf]) -> Vec<PathBuf> {
    let mut owned = this_write.to_vec();
    let lanes = dir.join("lanes");
    // `symlink_metadata`: a symlinked `lanes` is not the dataset's own directory.
    if fs::symlink_metadata(&lanes).is_ok_and(|m| m.is_dir())
        && let Ok(entries) = fs::read_dir(&lanes)
    {
        for e in entries.flatten() {
            let numbered = e
                .file_name()
                .to_str()
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            // `DirEntry::file_type` does not follow a symlink either.
            if numbered && e.file_type().is_ok_and(|t| t.is_dir()) && !owned.contains(&e.path()) {
                owned.push(e.path());
            }
        }
    }
    owned
}

/// `path` with its directory resolved, if it may be deleted by a writer that owns the lane
/// directories `owned`: its name follows the lane-file pattern and its directory is owned.
pub(super) fn owned_lane_file(path: &Path, owned: &[PathBuf]) -> Option<PathBuf> {
    let name = path.file_name()?.to_str()?;
    parse_lane_file_name(name)?;
    let dir = path.parent()?.canonicalize().ok()?;
    owned.contains(&dir).then(|| dir.join(name))
}

/// Every lane file `m` references, with resolved directories (comparable with
/// [`owned_lane_file`]'s paths).
pub(super) fn canonical_files(m: &Manifest) -> Vec<PathBuf> {
    m.all_file_paths()
        .into_iter()
        .map(
            |p| match (p.parent().map(Path::canonicalize), p.file_name()) {
                (Some(Ok(d)), Some(n)) => d.join(n),
                _ => p,
            },
        )
        .collect()
}

/// Deletes `files` (owned lane files, resolved) that `keep` does not list; returns whether
/// all went well.
pub(super) fn remove_unreferenced(files: &[PathBuf], keep: &[PathBuf]) -> bool {
    let mut ok = true;
    let mut dirs = Vec::new();
    for p in files {
        if keep.contains(p) {
            continue;
        }
        match fs::remove_file(p) {
            Ok(()) => {
                if let Some(d) = p.parent()
                    && !dirs.iter().any(|x: &PathBuf| x == d)
                {
                    dirs.push(d.to_path_buf());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(_) => ok = false,
        }
    }
    for d in dirs {
        ok &= sync_dir(&d).is_ok();
    }
    ok
}

/// Finishes or rolls back a write that was interrupted (crash, kill, power loss), using
/// its intent file. Called with the write lock held. The intent is as untrusted as the
/// rest of the directory: only lane files in `owned` lane directories are deleted; what it
/// names elsewhere is added to `left_alone`.
pub(super) fn recover(dir: &Path, owned: &[PathBuf], left_alone: &mut Vec<PathBuf>) -> Result<()> {
    let intent_path = dir.join(INTENT_FILE);
    let Some(file) = open_control_file(OpenOptions::new().read(true), &intent_path)? else {
        return Ok(());
    };
    let mut text = Vec::new();
    file.take(MAX_INTENT_BYTES + 1)
        .read_to_end(&mut text)
        .ctx("cannot read", &intent_path)?;
    // The intent is written atomically, so an unparsable one was not written by us;
    // refuse rather than guess which files are safe to delete.
    let unreadable = |why: String| DatasetError::Input {
        path: intent_path.clone(),
        msg: format!(
            "unreadable write-intent record ({why}); remove it by hand after checking the lanes"
        ),
    };
    if text.len() as u64 > MAX_INTENT_BYTES {
        return Err(unreadable(format!("larger than {MAX_INTENT_BYTES} bytes")));
    }
    let intent: Intent = serde_json::from_slice(&text).map_err(|e| unreadable(e.to_string()))?;
    if !is_write_id(&intent.write_id) {
        return Err(unreadable(format!(
            "write id {:?} is not one a writer makes",
            intent.write_id
        )));
    }
    let manifest_path = dir.join(MANIFEST_FILE);
    let current = Manifest::load_unchecked_files(&manifest_path).ok();
    let id = intent.write_id.as_bytes();
    if current.is_none()
        && fs::read(&manifest_path).is_ok_and(|t| t.windows(id.len()).any(|w| w == id))
    {
        // A manifest that names the interrupted write but no longer parses was committed
        // and damaged since: its files may be all that is left of the data, so leave them.
        return Err(DatasetError::manifest(
            &manifest_path,
            format!(
                "is damaged and belongs to interrupted write {}; not cleaning up its files (remove {} by hand to proceed)",
                intent.write_id,
                intent_path.display()
            ),
        ));
    }
    let keep = current.as_ref().map(canonical_files).unwrap_or_default();
    match current {
        Some(m) if m.write_id == intent.write_id => {
            // The interrupted write committed; only the replaced files remain to go.
            let mut doomed = Vec::new();
            for f in &intent.replaced_files {
                match owned_lane_file(f, owned) {
                    Some(p) => doomed.push(p),
                    None => left_alone.push(f.clone()),
                }
            }
            if !remove_unreferenced(&doomed, &keep) {
                return Ok(()); // keep the intent for another try
            }
        }
        _ => {
            // Never committed: delete everything it created (its id prefixes every name).
            for d in &intent.lane_dirs {
                let Ok(canon) = d.canonicalize() else {
                    continue; // gone: nothing to clean
                };
                if !owned.contains(&canon) {
                    left_alone.push(d.clone());
                    continue;
                }
                let Ok(entries) = fs::read_dir(&canon) else {
                    continue;
                };
                for e in entries.flatten() {
                    let name = e.file_name();
                    let ours = name
                        .to_str()
                        .and_then(parse_lane_file_name)
                        .is_some_and(|n| n.write_id == intent.write_id);
                    let not_dir = e.file_type().is_ok_and(|t| !t.is_dir());
                    if ours && not_dir && !keep.contains(&e.path()) {
                        let _ = fs::remove_file(e.path());
                    }
                }
                let _ = sync_dir(&canon);
            }
        }
    }
    fs::remove_file(&intent_path).ctx("cannot remove", &intent_path)?;
    sync_dir(dir)
}
