//! How large an import's output can get, and whether the disks it goes to can take it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::{Result, anyhow, bail};
use supercell::dataset::LaneSpec;
use supercell::format::GridType;
use supercell::memory::human;

/// Bytes of a NanoVDB upper internal node (32³ entries of 8 bytes, two 4 KiB masks, header).
const UPPER_NODE_BYTES: u64 = 32 * 32 * 32 * 8 + 2 * 4096 + 64;
/// Bytes of a lower internal node (16³ entries, two 512-byte masks, header).
const LOWER_NODE_BYTES: u64 = 16 * 16 * 16 * 8 + 2 * 512 + 64;
/// Bytes of a leaf besides its values (bounding box, flags, mask, statistics).
const LEAF_HEADER_BYTES: u64 = 96;
/// Grid, tree and root headers and a root tile, rounded up.
const GRID_HEADER_BYTES: u64 = 4096;

/// The largest size of one grid over `dims` voxels of `grid_type`: every voxel active, so
/// every leaf, lower and upper node that can exist does.
pub fn worst_case_bytes(dims: [usize; 3], grid_type: GridType) -> u64 {
    let nodes = |edge: u64| -> u64 { dims.iter().map(|&d| (d as u64).div_ceil(edge)).product() };
    let value_bytes: u64 = match grid_type {
        GridType::Fp8 => 1,
        GridType::Fp16 => 2,
        _ => 4,
    };
    nodes(4096)
        .saturating_mul(UPPER_NODE_BYTES)
        .saturating_add(nodes(128).saturating_mul(LOWER_NODE_BYTES))
        .saturating_add(nodes(8).saturating_mul(LEAF_HEADER_BYTES + 512 * value_bytes))
        .saturating_add(GRID_HEADER_BYTES)
}

/// The nearest existing folder at or above `path`.
fn existing_ancestor(path: &Path) -> PathBuf {
    let mut p = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("."))
            .join(path)
    };
    while !p.exists() {
        if !p.pop() {
            return PathBuf::from("/");
        }
    }
    p
}

/// `(device id, bytes free to this user)` of the file system holding `path`.
fn free_space(path: &Path) -> Result<(u64, u64)> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::MetadataExt;
    let device = std::fs::metadata(path)
        .map_err(|e| anyhow!("{}: {e}", path.display()))?
        .dev();
    let c = std::ffi::CString::new(path.as_os_str().as_bytes())
        .map_err(|_| anyhow!("{}: a path with a NUL byte", path.display()))?;
    // SAFETY: statvfs is plain old data, for which all zero bytes are a valid value.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a valid NUL-terminated path and `st` a writable statvfs.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        bail!(
            "{}: cannot read the free space: {}",
            path.display(),
            std::io::Error::last_os_error()
        );
    }
    #[allow(clippy::unnecessary_cast)]
    let free = (st.f_bavail as u64).saturating_mul(st.f_frsize as u64);
    Ok((device, free))
}

/// Refuses to write `bytes` striped over the lanes of a dataset at `out` where a file
/// system would not hold its lanes' share.
pub fn check_disk(out: &Path, lanes: &LaneSpec, bytes: u64) -> Result<()> {
    let dirs: Vec<PathBuf> = match lanes {
        LaneSpec::Count(n) => vec![out.to_path_buf(); (*n).max(1) as usize],
        LaneSpec::Dirs(d) => d.clone(),
    };
    let share = bytes / dirs.len().max(1) as u64 + 1;
    let mut need: HashMap<u64, (PathBuf, u64, u64)> = HashMap::new();
    for d in &dirs {
        let at = existing_ancestor(d);
        let (fs, free) = free_space(&at)?;
        need.entry(fs).or_insert((at, free, 0)).2 += share;
    }
    for (at, free, wanted) in need.values() {
        if wanted > free {
            bail!(
                "the output can take up to {} on the file system of {}, which has {} free",
                human(*wanted),
                at.display(),
                human(*free)
            );
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn worst_case_counts_every_node() {
        // 48 × 48 × 78 voxels: one upper, one lower node, 6 × 6 × 10 leaves.
        let float = worst_case_bytes([48, 48, 78], GridType::Float);
        assert_eq!(
            float,
            UPPER_NODE_BYTES + LOWER_NODE_BYTES + 360 * (96 + 2048) + GRID_HEADER_BYTES
        );
        let fp8 = worst_case_bytes([48, 48, 78], GridType::Fp8);
        assert_eq!(float - fp8, 360 * 3 * 512);
    }

    #[test]
    fn a_disk_too_small_is_refused() {
        let dir = std::env::temp_dir();
        assert!(check_disk(&dir.join("new/ds"), &LaneSpec::Count(2), 1 << 20).is_ok());
        let e = check_disk(&dir.join("new/ds"), &LaneSpec::Count(2), u64::MAX / 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("free"), "{e}");
    }
}
