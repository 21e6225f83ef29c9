//! Reads of sysfs and procfs under a root directory: `/` on a live machine, a directory
//! holding a copy (or a test's fake tree) otherwise. Every read is optional: a file an older
//! kernel lacks is `None`, never an error.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Where `/sys` and `/proc` are read from.
#[derive(Clone, Debug)]
pub struct SysRoot {
    root: PathBuf,
}

impl Default for SysRoot {
    fn default() -> SysRoot {
        SysRoot::new("/")
    }
}

impl SysRoot {
    /// Reads under `root` (`/` for this machine). The root is resolved once, so that paths
    /// canonicalised later (symlinks of sysfs) still start with it.
    pub fn new(root: impl AsRef<Path>) -> SysRoot {
        let root = root.as_ref();
        SysRoot {
            root: root.canonicalize().unwrap_or_else(|_| root.to_path_buf()),
        }
    }

    /// Whether this is the live machine's `/`.
    pub fn is_live(&self) -> bool {
        self.root == Path::new("/")
    }

    /// `abs` (e.g. `/sys/block`) under the root.
    pub fn path(&self, abs: &str) -> PathBuf {
        self.root.join(abs.trim_start_matches('/'))
    }

    /// A path under the root shown as the machine would name it (`/sys/...`).
    pub fn shown(&self, p: &Path) -> String {
        match p.strip_prefix(&self.root) {
            Ok(rel) => format!("/{}", rel.display()),
            Err(_) => p.display().to_string(),
        }
    }

    /// The target of sysfs links in `abs`, resolved; `None` where it does not exist or
    /// leads out of the root.
    pub fn canonical(&self, abs: &str) -> Option<PathBuf> {
        canonical_in(&self.root, &self.path(abs))
    }

    /// `p` (already under the root) resolved, `None` where it leaves the root.
    pub fn resolve(&self, p: &Path) -> Option<PathBuf> {
        canonical_in(&self.root, p)
    }

    /// A small file under the root, trimmed.
    pub fn read(&self, abs: &str) -> Option<String> {
        read_file(&self.path(abs))
    }

    /// The names in a directory under the root, sorted (empty where it is missing).
    pub fn list(&self, abs: &str) -> Vec<String> {
        list_dir(&self.path(abs))
    }
}

fn canonical_in(root: &Path, p: &Path) -> Option<PathBuf> {
    p.canonicalize().ok().filter(|c| c.starts_with(root))
}

/// A small file, trimmed; `None` where it is missing or unreadable.
pub(super) fn read_file(p: &Path) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// A number in a small file.
pub(super) fn read_num<T: std::str::FromStr>(p: &Path) -> Option<T> {
    read_file(p).and_then(|s| s.parse().ok())
}

/// The names in a directory, sorted (empty where it is missing).
pub(super) fn list_dir(p: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// The file name of `p` as a string.
pub(super) fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// A kernel CPU list ("0-3,8,10-11") as CPU numbers; `None` where it does not parse.
pub fn parse_cpu_list(s: &str) -> Option<BTreeSet<u32>> {
    let mut out = BTreeSet::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 16 {
                    return None;
                }
                out.extend(a..=b);
            }
            None => {
                out.insert(part.trim().parse().ok()?);
            }
        }
    }
    Some(out)
}

/// CPU numbers written as the kernel writes them ("0-3,8").
pub fn cpu_list(cpus: &BTreeSet<u32>) -> String {
    let mut parts = Vec::new();
    let mut it = cpus.iter().copied().peekable();
    while let Some(start) = it.next() {
        let mut end = start;
        while it.peek() == Some(&(end + 1)) {
            end = it.next().unwrap_or(end);
        }
        parts.push(if end == start {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
    }
    parts.join(",")
}

/// Whether `s` is a PCI function address, e.g. "0000:3d:00.0".
pub(super) fn is_pci_address(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 12
        && b[4] == b':'
        && b[7] == b':'
        && b[10] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10) || c.is_ascii_hexdigit())
}

/// The part of a sysfs device path from its last `/sys/devices/` on (the whole path where
/// it has none): the part that names the buses the device hangs off. A root above it (a
/// copy of sysfs in a test's temporary folder, whose random name could hold "xen" or
/// "virtio") says nothing about the device.
pub(super) fn devices_part(p: &Path) -> String {
    let path = p.to_string_lossy();
    match path.rfind("/sys/devices/") {
        Some(i) => path[i..].to_string(),
        None => path.into_owned(),
    }
}

/// The last PCI function on a sysfs device path (the controller a disk or NIC hangs off).
pub(super) fn pci_function_of(p: &Path) -> Option<String> {
    p.components()
        .filter_map(|c| c.as_os_str().to_str())
        .rfind(|c| is_pci_address(c))
        .map(str::to_string)
}

impl SysRoot {
    /// The NUMA node of a PCI function; `None` where unknown (`-1`: one node, or the
    /// firmware does not say).
    pub fn pci_numa_node(&self, pci: &str) -> Option<i32> {
        self.read(&format!("/sys/bus/pci/devices/{pci}/numa_node"))
            .and_then(|s| s.parse().ok())
            .filter(|n: &i32| *n >= 0)
    }

    /// NUMA nodes with CPUs, and their CPUs (empty where sysfs has no node directory).
    pub fn numa_nodes(&self) -> Vec<(i32, BTreeSet<u32>)> {
        self.list("/sys/devices/system/node")
            .into_iter()
            .filter_map(|n| {
                let id: i32 = n.strip_prefix("node")?.parse().ok()?;
                let cpus = self
                    .read(&format!("/sys/devices/system/node/{n}/cpulist"))
                    .and_then(|s| parse_cpu_list(&s))
                    .unwrap_or_default();
                Some((id, cpus))
            })
            .collect()
    }

    /// NVIDIA display and 3D controllers on the PCI bus (no driver needed), sorted.
    pub fn nvidia_gpus(&self) -> Vec<String> {
        self.list("/sys/bus/pci/devices")
            .into_iter()
            .filter(|a| {
                let f = |k: &str| self.read(&format!("/sys/bus/pci/devices/{a}/{k}"));
                f("vendor").as_deref() == Some("0x10de")
                    && f("class")
                        .is_some_and(|c| c.starts_with("0x0300") || c.starts_with("0x0302"))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_parse_and_print_as_the_kernel_writes_them() {
        let s = parse_cpu_list("0-3,8,10-11").unwrap();
        assert_eq!(s.len(), 7);
        assert_eq!(cpu_list(&s), "0-3,8,10-11");
        assert_eq!(parse_cpu_list("").unwrap().len(), 0);
        assert!(parse_cpu_list("3-1").is_none());
        assert!(parse_cpu_list("x").is_none());
    }

    #[test]
    fn paths_stay_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        let r = SysRoot::new(dir.path());
        std::fs::create_dir_all(r.path("/sys/a")).unwrap();
        std::fs::write(r.path("/sys/a/x"), " 5\n").unwrap();
        assert_eq!(r.read("/sys/a/x").as_deref(), Some("5"));
        assert_eq!(r.read("/sys/a/missing"), None);
        assert_eq!(r.shown(&r.path("/sys/a/x")), "/sys/a/x");
        assert_eq!(r.list("/sys/a"), vec!["x".to_string()]);
        // A link out of the root is not followed.
        std::os::unix::fs::symlink("/", r.path("/sys/out")).unwrap();
        assert_eq!(r.canonical("/sys/out"), None);
        assert!(SysRoot::default().is_live());
    }
}
