//! A valid `XDG_RUNTIME_DIR` before any Vulkan instance exists.
//!
//! Mesa's Vulkan drivers load libwayland-client, which prints "error: XDG_RUNTIME_DIR is
//! invalid or not set in the environment." (once per window-system probe, so twice per start)
//! whenever the variable is unset or not an absolute path. Sessions without a login
//! manager have no runtime directory: ssh without pam_systemd, cron, a systemd system unit
//! running a kiosk, containers. The message is harmless but reads like a failure, so
//! [`private_runtime_dir`] makes such processes a private one, as a login session would;
//! the binary reads the variables and sets `XDG_RUNTIME_DIR` to it (library code does not
//! touch the environment).

use std::ffi::OsString;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The environment variable.
pub const RUNTIME_DIR_VAR: &str = "XDG_RUNTIME_DIR";

/// Why a runtime directory is not usable (None: it is).
///
/// The XDG base directory specification asks for an absolute path to a directory owned by
/// the user, with access mode 0700.
pub fn runtime_dir_problem(value: Option<&OsString>) -> Option<String> {
    let Some(value) = value.filter(|v| !v.is_empty()) else {
        return Some("not set".into());
    };
    let path = Path::new(value);
    if !path.is_absolute() {
        return Some(format!("{} is not an absolute path", path.display()));
    }
    private_dir_problem(path)
}

/// Why `path` is not a directory owned by this user with mode 0700 (None: it is). Symbolic
/// links are not followed: a link is not a private directory.
fn private_dir_problem(path: &Path) -> Option<String> {
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) => return Some(format!("{}: {e}", path.display())),
    };
    if !meta.is_dir() {
        return Some(format!("{} is not a directory", path.display()));
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    if meta.uid() != uid {
        return Some(format!(
            "{} belongs to uid {}, not {uid}",
            path.display(),
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o777;
    if mode != 0o700 {
        return Some(format!("{} has mode {mode:o}, not 700", path.display()));
    }
    None
}

/// Makes (or reuses) a private runtime directory under the temporary directory:
/// `supercell-runtime-UID`, or, when that name is taken by something that is not ours and
/// private, a fresh `supercell-runtime-UID-XXXXXX` beside it.
fn make_private_dir() -> std::io::Result<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let tmp = std::env::temp_dir();
    let stable = tmp.join(format!("supercell-runtime-{uid}"));
    match std::fs::DirBuilder::new().mode(0o700).create(&stable) {
        Ok(()) => {
            // The umask may have cleared bits we asked for, never added any; set it exactly.
            std::fs::set_permissions(&stable, std::fs::Permissions::from_mode(0o700))?;
            return Ok(stable);
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            if private_dir_problem(&stable).is_none() {
                return Ok(stable);
            }
        }
        Err(e) => return Err(e),
    }
    // Someone else's file or directory holds the name: take a fresh one (creating a
    // directory is atomic, so a name already taken fails rather than being shared).
    let pid = std::process::id();
    let mut last = None;
    for n in 0..64 {
        let dir = tmp.join(format!("supercell-runtime-{uid}-{pid}-{n}"));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {
                std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
                return Ok(dir);
            }
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("no free name")))
}

/// Whether to replace the runtime directory `value`: when [`runtime_dir_problem`] finds one,
/// except in a Wayland session (`wayland_display` set) whose directory exists: the
/// compositor's socket lives there, and the window needs it however loose its mode.
fn should_replace(value: Option<&OsString>, wayland_display: Option<&OsString>) -> bool {
    if runtime_dir_problem(value).is_none() {
        return false;
    }
    let session = wayland_display.is_some_and(|d| !d.is_empty());
    let exists = value.is_some_and(|v| Path::new(v).is_absolute() && Path::new(v).is_dir());
    !(session && exists)
}

/// A private directory (see [`make_private_dir`]) for `XDG_RUNTIME_DIR` when its value
/// `current` is unset or unusable ([`runtime_dir_problem`]); `None` where a valid value, or
/// a Wayland session's directory (`wayland_display` set), should be left alone, or where the
/// directory cannot be made (the only cost is the loader's message).
///
/// The binary calls it first in `main` with the two variables' values and sets
/// `XDG_RUNTIME_DIR` to the result, before any thread starts and before any Vulkan or wgpu
/// instance is created (the loader reads the variable then).
pub fn private_runtime_dir(
    current: Option<&OsString>,
    wayland_display: Option<&OsString>,
) -> Option<PathBuf> {
    if !should_replace(current, wayland_display) {
        return None;
    }
    make_private_dir().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_are_named() {
        assert_eq!(runtime_dir_problem(None).as_deref(), Some("not set"));
        assert_eq!(
            runtime_dir_problem(Some(&OsString::new())).as_deref(),
            Some("not set")
        );
        let rel = runtime_dir_problem(Some(&"relative/dir".into())).unwrap();
        assert!(rel.contains("not an absolute path"), "{rel}");
        let tmp = tempfile::tempdir().unwrap();
        let d = tmp.path().join("rt");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        let open = runtime_dir_problem(Some(&d.clone().into_os_string())).unwrap();
        assert!(open.contains("mode 755"), "{open}");
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(runtime_dir_problem(Some(&d.clone().into_os_string())), None);
        let f = tmp.path().join("file");
        std::fs::write(&f, b"").unwrap();
        let file = runtime_dir_problem(Some(&f.into_os_string())).unwrap();
        assert!(file.contains("not a directory"), "{file}");
    }

    #[test]
    fn a_wayland_sessions_directory_is_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let loose = tmp.path().as_os_str().to_owned();
        std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let wl: OsString = "wayland-0".into();
        assert!(should_replace(Some(&loose), None));
        assert!(!should_replace(Some(&loose), Some(&wl)));
        assert!(should_replace(None, Some(&wl)));
        assert!(should_replace(Some(&"/nonexistent/run".into()), Some(&wl)));
    }

    #[test]
    fn made_directory_is_private() {
        let d = make_private_dir().unwrap();
        assert_eq!(private_dir_problem(&d), None);
        // A second call reuses it.
        assert_eq!(make_private_dir().unwrap(), d);
    }
}
