//! How much host memory this process can still get, checked before an allocation whose size
//! comes from input (a manifest's slot size, a `.nvdb` grid size, `--slots`, `--resolution`).
//!
//! Linux overcommits: a huge `Vec` is usually granted and the process is killed later, when
//! the pages are touched, or the allocator gives up and Rust aborts with "memory allocation
//! of N bytes failed". Neither says which file or flag asked for the memory. So every
//! input-sized allocation first asks [`check_available`] (or allocates through
//! [`try_zeroed_vec`]), and a request beyond what the machine can give becomes a
//! [`MemoryError`] that names what asked, how much, and how much there is.

use std::fmt;

use crate::probe;

/// A request for more host memory than this process can get.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryError {
    /// What needed the memory, e.g. "frame 3's slot image (dataset /data/storm)".
    pub what: String,
    /// Bytes asked for.
    pub requested: u64,
    /// Bytes this process can get now, and what limits it.
    pub available: Available,
}

impl fmt::Display for MemoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} needs {} bytes ({}), but this process can get at most {} bytes ({}; {})",
            self.what,
            self.requested,
            human(self.requested),
            self.available.bytes,
            human(self.available.bytes),
            self.available.limited_by
        )
    }
}

impl std::error::Error for MemoryError {}

/// [`Available::limited_by`] when no limit could be read: only the address space bounds it.
pub const UNKNOWN_LIMIT: &str = "the address space";

/// Host memory this process can get now, and which limit decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Available {
    /// Bytes.
    pub bytes: u64,
    /// The tightest limit: "MemAvailable in /proc/meminfo", "cgroup memory.max", "the
    /// address-space limit (RLIMIT_AS)", or "the address space" when nothing could be read.
    pub limited_by: &'static str,
}

/// Host memory this process can get now: the least of the kernel's `MemAvailable`, the
/// headroom below the cgroup's `memory.max`, and the headroom below the address-space limit
/// (`RLIMIT_AS`) given the process's current virtual size.
pub fn available() -> Available {
    let mut best = Available {
        bytes: isize::MAX as u64,
        limited_by: UNKNOWN_LIMIT,
    };
    let mut consider = |bytes: Option<u64>, limited_by: &'static str| {
        if let Some(b) = bytes
            && b < best.bytes
        {
            best = Available {
                bytes: b,
                limited_by,
            };
        }
    };
    consider(probe::mem_available(), "MemAvailable in /proc/meminfo");
    consider(probe::cgroup_memory_headroom(), "cgroup memory.max");
    consider(
        address_space_headroom(),
        "the address-space limit (RLIMIT_AS)",
    );
    best
}

/// Checks that this process can get `bytes` more bytes of host memory; `what` names the
/// request in the error (the file or flag it comes from).
pub fn check_available(what: impl FnOnce() -> String, bytes: u64) -> Result<(), MemoryError> {
    let available = available();
    if bytes > available.bytes {
        return Err(MemoryError {
            what: what(),
            requested: bytes,
            available,
        });
    }
    Ok(())
}

/// A zero-filled `Vec` of `len` bytes, after [`check_available`]; an allocation the
/// allocator refuses anyway is an error too, never an abort.
pub fn try_zeroed_vec(what: impl FnOnce() -> String, len: usize) -> Result<Vec<u8>, MemoryError> {
    let mut v = try_vec_with_capacity(what, len)?;
    v.resize(len, 0);
    Ok(v)
}

/// An empty `Vec` with room for exactly `len` bytes, after [`check_available`].
pub fn try_vec_with_capacity(
    what: impl FnOnce() -> String,
    len: usize,
) -> Result<Vec<u8>, MemoryError> {
    let mut what = Some(what);
    let mut name = || what.take().map_or_else(String::new, |f| f());
    check_available(&mut name, len as u64)?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| MemoryError {
        what: name(),
        requested: len as u64,
        available: available(),
    })?;
    Ok(v)
}

/// Bytes as a short human figure (binary units), for messages.
pub fn human(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// `RLIMIT_AS` minus the current virtual size, where a limit is set.
fn address_space_headroom() -> Option<u64> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a valid pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_AS, &mut lim) } != 0
        || lim.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    let used = probe::virtual_size()?;
    Some(lim.rlim_cur.saturating_sub(used))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impossible_request_is_an_error_naming_it() {
        let e = check_available(|| "--slots 100000 × 1 GiB".into(), u64::MAX).unwrap_err();
        let text = e.to_string();
        assert!(text.starts_with("--slots 100000 × 1 GiB needs 18446744073709551615 bytes"));
        assert!(text.contains("can get at most"), "{text}");
        assert!(try_zeroed_vec(|| "x".into(), usize::MAX).is_err());
    }

    #[test]
    fn a_small_request_is_granted() {
        assert!(available().bytes > 1 << 20);
        assert_eq!(
            try_zeroed_vec(|| "x".into(), 4096).unwrap(),
            vec![0u8; 4096]
        );
        assert!(check_available(|| "x".into(), 0).is_ok());
    }

    #[test]
    fn human_figures() {
        assert_eq!(human(512), "512 B");
        assert_eq!(human(64 << 30), "64.0 GiB");
        assert_eq!(human(1536), "1.5 KiB");
    }
}
