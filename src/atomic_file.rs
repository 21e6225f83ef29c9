//! Files written whole or not at all, and temporary files a signal does not leave behind.
//!
//! [`write_replacing`] writes into a temporary file beside the target (`.NAME.tmp-PID-N`),
//! syncs it, renames it over the target and syncs the directory, so a reader sees the old
//! file or the new one, never a part. While the temporary file exists its path is
//! registered ([`TempFile`]); a program that called [`remove_on_signal`] removes every
//! registered file when SIGINT, SIGTERM or SIGHUP ends it, then dies of that signal as it
//! would have (the exit status still says which). SIGKILL cannot be caught: what it leaves
//! is a dot-file named after the target, which the next write of the same target ignores.
//!
//! The signal handler only reads atomics and calls `unlink` (both async-signal-safe); a path
//! registered is a C string that the handler may be reading, so unregistering frees it only
//! where no handler has started.

use std::ffi::CString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// Temporary files registered at once at most; more are still written, only not removed
/// by a signal.
const SLOTS: usize = 64;

static REGISTERED: [AtomicPtr<libc::c_char>; SLOTS] =
    [const { AtomicPtr::new(std::ptr::null_mut()) }; SLOTS];
/// Set by the signal handler before it reads any slot.
static HANDLING: AtomicBool = AtomicBool::new(false);

/// A temporary file's path, registered for removal by a signal until dropped. Dropping it
/// removes the file unless [`TempFile::keep`] said it was renamed away.
#[derive(Debug)]
pub struct TempFile {
    path: PathBuf,
    slot: Option<usize>,
    kept: bool,
}

impl TempFile {
    /// Registers `path` (the file need not exist yet).
    pub fn register(path: PathBuf) -> TempFile {
        let slot = CString::new(path.as_os_str().as_bytes())
            .ok()
            .and_then(|c| {
                let raw = c.into_raw();
                let slot = REGISTERED.iter().position(|s| {
                    s.compare_exchange(
                        std::ptr::null_mut(),
                        raw,
                        Ordering::SeqCst,
                        Ordering::SeqCst,
                    )
                    .is_ok()
                });
                if slot.is_none() {
                    // SAFETY: `raw` came from `into_raw` just above and was stored nowhere.
                    drop(unsafe { CString::from_raw(raw) });
                }
                slot
            });
        TempFile {
            path,
            slot,
            kept: false,
        }
    }

    /// The temporary file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file was renamed into place: nothing to remove any more.
    pub fn keep(mut self) {
        self.kept = true;
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(slot) = self.slot {
            let raw = REGISTERED[slot].swap(std::ptr::null_mut(), Ordering::SeqCst);
            // A handler that started after the swap sees the slot empty; one that started
            // before may be reading the string, so it is left allocated (the process is
            // ending then anyway).
            if !raw.is_null() && !HANDLING.load(Ordering::SeqCst) {
                // SAFETY: `raw` came from `CString::into_raw` in `register`, and no handler
                // can reach it any more.
                drop(unsafe { CString::from_raw(raw) });
            }
        }
        if !self.kept {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

extern "C" fn remove_and_die(signal: libc::c_int) {
    HANDLING.store(true, Ordering::SeqCst);
    for slot in &REGISTERED {
        let p = slot.load(Ordering::SeqCst);
        if !p.is_null() {
            // SAFETY: a registered pointer is a live NUL-terminated string (see `Drop`);
            // unlink is async-signal-safe.
            unsafe { libc::unlink(p) };
        }
    }
    // SAFETY: restoring the default action and raising the signal again are
    // async-signal-safe; the process then ends as the signal would have ended it.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        libc::raise(signal);
    }
}

/// Installs the handler that removes registered temporary files on SIGINT, SIGTERM and
/// SIGHUP (a signal that is ignored, as under `nohup`, stays ignored). For binaries, once,
/// before threads start.
pub fn remove_on_signal() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: sigaction with a zeroed struct reads the current action; the new action
        // names an `extern "C"` handler that only does async-signal-safe work.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(signal, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut new: libc::sigaction = std::mem::zeroed();
            new.sa_sigaction = remove_and_die as *const () as libc::sighandler_t;
            libc::sigemptyset(&mut new.sa_mask);
            libc::sigaction(signal, &new, std::ptr::null_mut());
        }
    }
}

/// What failed in [`write_replacing`], and on which file.
#[derive(Debug, thiserror::Error)]
#[error("cannot {op} {}: {source}", path.display())]
pub struct WriteError {
    /// The file the step was on (the temporary file, or the target for the rename).
    pub path: PathBuf,
    /// The step: "create temporary file", "write", "fsync", "rename".
    pub op: &'static str,
    /// The OS error.
    #[source]
    pub source: std::io::Error,
}

/// Writes `data` to `path` whole or not at all (see the module documentation).
pub fn write_replacing(path: &Path, data: &[u8]) -> Result<(), WriteError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_owned(),
        _ => PathBuf::from("."),
    };
    let Some(file_name) = path.file_name() else {
        return Err(WriteError {
            path: path.to_owned(),
            op: "name a file for",
            source: std::io::Error::from(std::io::ErrorKind::InvalidInput),
        });
    };
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(file_name);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    tmp_name.push(format!(".tmp-{}-{n}", std::process::id()));
    let tmp = TempFile::register(dir.join(tmp_name));
    let err = |op: &'static str, p: &Path| {
        let p = p.to_owned();
        move |source| WriteError {
            path: p,
            op,
            source,
        }
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp.path())
        .map_err(err("create temporary file", tmp.path()))?;
    f.write_all(data).map_err(err("write", tmp.path()))?;
    f.sync_all().map_err(err("fsync", tmp.path()))?;
    drop(f);
    std::fs::rename(tmp.path(), path).map_err(err("rename into place", path))?;
    tmp.keep();
    // The rename is durable once the directory is synced; not every platform or file system
    // can open a directory for that, which is no reason to fail the write.
    if let Ok(d) = std::fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_whole_files_and_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out.bin");
        write_replacing(&target, b"first").unwrap();
        write_replacing(&target, b"second").unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"second");
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "{names:?}");
        // A failed write (into a directory that does not exist) leaves nothing either.
        let missing = dir.path().join("no/such/dir/out.bin");
        let e = write_replacing(&missing, b"x").unwrap_err();
        assert_eq!(e.op, "create temporary file", "{e}");
    }

    #[test]
    fn a_dropped_registration_removes_its_file() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join(".x.tmp");
        let t = TempFile::register(p.clone());
        std::fs::write(&p, b"partial").unwrap();
        drop(t);
        assert!(!p.exists());
        let t = TempFile::register(p.clone());
        std::fs::write(&p, b"whole").unwrap();
        t.keep();
        assert!(p.exists());
    }
}
