//! fio's `disk_util`: the block devices under a run's files, as the kernel counted their
//! I/O over the run (`/sys/dev/block/MAJ:MIN/stat`, sampled before and after).
//!
//! The counters are the whole device's, so other I/O to the same device during the run is
//! in them too; that is what makes them a cross-check of the bytes the run says it read.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// A block device found under the run's files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// The kernel's name (`vda1`, `nvme0n1`), or `MAJ:MIN` where it gives none.
    pub name: String,
    /// Its `stat` file.
    stat: PathBuf,
}

/// The block devices the `files` live on, each once; files on devices without block
/// counters (tmpfs, network file systems) are left out.
pub fn devices_of<'a>(files: impl IntoIterator<Item = &'a Path>) -> Vec<BlockDevice> {
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for f in files {
        let Ok(meta) = std::fs::metadata(f) else {
            continue;
        };
        let dev = meta.dev();
        if seen.contains(&dev) {
            continue;
        }
        seen.push(dev);
        let (major, minor) = (libc::major(dev), libc::minor(dev));
        let dir = PathBuf::from(format!("/sys/dev/block/{major}:{minor}"));
        let stat = dir.join("stat");
        if !stat.is_file() {
            continue;
        }
        let name = std::fs::read_to_string(dir.join("uevent"))
            .ok()
            .and_then(|u| {
                u.lines()
                    .find_map(|l| l.strip_prefix("DEVNAME=").map(str::to_string))
            })
            .unwrap_or_else(|| format!("{major}:{minor}"));
        out.push(BlockDevice { name, stat });
    }
    out
}

/// The counters of a `stat` file (see the kernel's Documentation/block/stat.rst): read
/// I/Os, read merges, read sectors, read ticks, write I/Os, write merges, write sectors,
/// write ticks, in flight, I/O ticks, time in queue.
pub type Counters = [u64; 11];

/// Reads a `stat` file's first eleven counters; `None` where it cannot be read.
pub fn parse_stat(text: &str) -> Option<Counters> {
    let mut c = [0u64; 11];
    let mut fields = text.split_whitespace();
    for slot in &mut c {
        *slot = fields.next()?.parse().ok()?;
    }
    Some(c)
}

/// Every device's counters now (`None` for one that cannot be read).
pub fn sample(devices: &[BlockDevice]) -> Vec<Option<Counters>> {
    devices
        .iter()
        .map(|d| {
            std::fs::read_to_string(&d.stat)
                .ok()
                .and_then(|t| parse_stat(&t))
        })
        .collect()
}

/// One device's I/O over a run, in fio's `disk_util` terms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DiskUtil {
    /// The device.
    pub name: String,
    /// Reads completed.
    pub read_ios: u64,
    /// Writes completed.
    pub write_ios: u64,
    /// Reads merged with others before going to the device.
    pub read_merges: u64,
    /// Writes merged.
    pub write_merges: u64,
    /// Milliseconds spent reading (summed over requests).
    pub read_ticks: u64,
    /// Milliseconds spent writing.
    pub write_ticks: u64,
    /// Milliseconds requests spent in the queue, weighted by their number.
    pub in_queue: u64,
    /// Percent of the run the device was busy.
    pub util: f64,
    /// Bytes read (sectors × 512; not in fio's `disk_util`).
    pub read_bytes: u64,
}

/// The change between two samples over `run_ms` milliseconds; devices not read both times
/// are left out.
pub fn disk_util(
    devices: &[BlockDevice],
    before: &[Option<Counters>],
    after: &[Option<Counters>],
    run_ms: f64,
) -> Vec<DiskUtil> {
    devices
        .iter()
        .zip(before.iter().zip(after))
        .filter_map(|(d, (b, a))| {
            let (b, a) = (b.as_ref()?, a.as_ref()?);
            let delta = |i: usize| a[i].saturating_sub(b[i]);
            Some(DiskUtil {
                name: d.name.clone(),
                read_ios: delta(0),
                read_merges: delta(1),
                read_bytes: delta(2) * 512,
                read_ticks: delta(3),
                write_ios: delta(4),
                write_merges: delta(5),
                write_ticks: delta(7),
                in_queue: delta(10),
                util: if run_ms > 0.0 {
                    (delta(9) as f64 / run_ms * 100.0).min(100.0)
                } else {
                    0.0
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_become_fio_disk_util() {
        let before = parse_stat("10 1 800 5 2 0 16 1 0 20 30\n").unwrap();
        let after = parse_stat("  110   11   2848   105 3 0 24 2 1 520 630 0 0 0 0").unwrap();
        let dev = BlockDevice {
            name: "vda".into(),
            stat: PathBuf::new(),
        };
        let u = disk_util(&[dev], &[Some(before)], &[Some(after)], 1000.0);
        assert_eq!(u.len(), 1);
        let u = &u[0];
        assert_eq!((u.read_ios, u.read_merges, u.read_ticks), (100, 10, 100));
        assert_eq!(
            (u.write_ios, u.in_queue, u.read_bytes),
            (1, 600, 2048 * 512)
        );
        assert!((u.util - 50.0).abs() < 1e-9);
        assert!(parse_stat("1 2 x").is_none());
        assert!(parse_stat("1 2 3").is_none());
    }

    #[test]
    fn files_on_a_disk_name_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a");
        let b = dir.path().join("b");
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"y").unwrap();
        let devs = devices_of([a.as_path(), b.as_path(), Path::new("/nonexistent")]);
        // A temporary directory on tmpfs has no block device; on a disk, one.
        assert!(devs.len() <= 1, "{devs:?}");
        if let Some(d) = devs.first() {
            assert!(!d.name.is_empty());
            assert!(sample(&devs)[0].is_some());
        }
    }
}
