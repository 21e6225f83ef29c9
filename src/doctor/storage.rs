//! The storage side of the doctor: datasets and their lanes (block device, file system,
//! O_DIRECT, devices shared by several lanes), PCIe/NUMA placement, io_uring limits.

use std::collections::BTreeSet;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use super::block::{resolve, whole_disk};
use super::sysroot::{SysRoot, devices_part, is_pci_address, pci_function_of};
use super::{Check, Status, bytes, read_trim};
use crate::dataset::{Dataset, MANIFEST_FILE, Manifest};
use crate::ingest::gds::fs_type;

/// The largest slot image and grid of a dataset, bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct FrameSizes {
    pub slot: u64,
    pub grid: u64,
}

impl FrameSizes {
    pub(super) fn max(self, o: FrameSizes) -> FrameSizes {
        FrameSizes {
            slot: self.slot.max(o.slot),
            grid: self.grid.max(o.grid),
        }
    }
}

/// A dataset given to the doctor: its check, lane directories and sizes.
pub(super) struct DatasetLanes {
    /// How the sharing check names it.
    pub label: String,
    pub check: Check,
    pub lanes: Vec<PathBuf>,
    pub sizes: Option<FrameSizes>,
}

/// Opens the dataset at `path` (directory or manifest). A manifest that loads but whose
/// files do not open still gives its lanes, so they are checked.
pub(super) fn open_dataset(path: &Path) -> DatasetLanes {
    let label = path.display().to_string();
    let manifest_path = if path.is_dir() {
        path.join(MANIFEST_FILE)
    } else {
        path.to_path_buf()
    };
    let manifest = match Manifest::load(&manifest_path) {
        Ok(m) => m,
        Err(e) => {
            return DatasetLanes {
                label,
                check: Check::new("dataset", Status::Fail, format!("{e}"))
                    .fix("give a dataset directory (with manifest.json); supercell-data verify DATASET says what is wrong with one")
                    .fact("path", path.display().to_string()),
                lanes: Vec::new(),
                sizes: None,
            };
        }
    };
    let lanes: Vec<PathBuf> = (0..manifest.lanes.len())
        .map(|l| manifest.lane_dir(l as u32))
        .collect();
    let sizes = FrameSizes {
        slot: manifest
            .frames
            .iter()
            .map(|f| f.slot_size)
            .max()
            .unwrap_or(0),
        grid: manifest
            .frames
            .iter()
            .flat_map(|f| f.grids.iter().map(|g| g.size))
            .max()
            .unwrap_or(0),
    };
    let head = format!(
        "{}: {} frames, {} lanes, largest frame {}, chunk {}",
        path.display(),
        manifest.frames.len(),
        manifest.lanes.len(),
        bytes(sizes.slot),
        bytes(manifest.chunk_size)
    );
    let check = match Dataset::open(path) {
        Ok(_) => Check::new("dataset", Status::Ok, head),
        Err(e) => Check::new("dataset", Status::Fail, format!("{head}\n{e}")).fix(
            "mount the lanes where the manifest says, or run supercell-data verify on the dataset",
        ),
    };
    DatasetLanes {
        label,
        check: check
            .fact("path", path.display().to_string())
            .fact("frames", manifest.frames.len())
            .fact("lanes", manifest.lanes.len())
            .fact("largest_frame", sizes.slot)
            .fact("largest_grid", sizes.grid)
            .fact("chunk_size", manifest.chunk_size),
        lanes,
        sizes: Some(sizes),
    }
}

// ---------------------------------------------------------------------------------------
// Block devices

/// The block device a path lives on, as sysfs describes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockDevice {
    /// Major and minor of the file system's device (`st_dev`).
    pub major: u32,
    /// Minor.
    pub minor: u32,
    /// Kernel name of that device (`nvme0n1p2`, `dm-0`, `sda1`); `None` where it is no
    /// block device (tmpfs, overlay, network file systems).
    pub name: Option<String>,
    /// The whole disks underneath, sorted: a partition's disk, the members of a
    /// device-mapper or md device.
    pub disks: Vec<String>,
    /// Whether the kernel calls the device rotational.
    pub rotational: Option<bool>,
    /// Request queue depth (`queue/nr_requests`).
    pub queue_depth: Option<u32>,
    /// Logical block size, bytes (`O_DIRECT` alignment).
    pub logical_block_size: Option<u32>,
    /// Largest request the kernel sends, KiB (`queue/max_sectors_kb`).
    pub max_sectors_kb: Option<u32>,
    /// PCI function of the first disk's controller, e.g. "0000:3d:00.0".
    pub pci: Option<String>,
    /// Whether the disks sit behind a virtual controller (virtio, Xen, VMware...).
    pub virtual_disk: bool,
}

impl BlockDevice {
    /// "nvme0n1p2 (259:2) on nvme0n1", or "no block device (0:45)".
    pub fn describe(&self) -> String {
        let dev = format!("{}:{}", self.major, self.minor);
        match &self.name {
            None => format!("no block device ({dev})"),
            Some(n) if self.disks.len() == 1 && &self.disks[0] == n => format!("{n} ({dev})"),
            Some(n) if self.disks.is_empty() => format!("{n} ({dev})"),
            Some(n) => format!("{n} ({dev}) on {}", self.disks.join(", ")),
        }
    }

    /// What two lanes on one device have in common: its whole disks (and for NVMe, the
    /// controller: namespaces of one drive share it), or the device number itself where
    /// there is no block device (one tmpfs, one overlay).
    fn sharing_keys(&self) -> BTreeSet<String> {
        let mut keys: BTreeSet<String> = self.disks.iter().cloned().collect();
        if let Some(p) = &self.pci
            && self.disks.iter().any(|d| d.starts_with("nvme"))
        {
            keys.insert(format!("nvme controller {p}"));
        }
        if keys.is_empty() {
            keys.insert(format!("{}:{}", self.major, self.minor));
        }
        keys
    }
}

/// The block device `path` lives on.
pub fn block_device(path: &Path) -> std::io::Result<BlockDevice> {
    let md = std::fs::metadata(path)?;
    let dev = md.dev();
    let (major, minor) = (libc::major(dev), libc::minor(dev));
    let mut b = BlockDevice {
        major,
        minor,
        name: None,
        disks: Vec::new(),
        rotational: None,
        queue_depth: None,
        logical_block_size: None,
        max_sectors_kb: None,
        pci: None,
        virtual_disk: false,
    };
    let root = SysRoot::default();
    let Some(sys) = root.canonical(&format!("/sys/dev/block/{major}:{minor}")) else {
        return Ok(b);
    };
    b.name = sys.file_name().map(|n| n.to_string_lossy().into_owned());
    let top = whole_disk(&sys);
    let q = |f: &str| read_trim(top.join("queue").join(f)).and_then(|s| s.parse::<u32>().ok());
    b.rotational = q("rotational").map(|r| r != 0);
    b.queue_depth = q("nr_requests");
    b.logical_block_size = q("logical_block_size");
    b.max_sectors_kb = q("max_sectors_kb");
    // The physical disks: the stack's leaves (a dm or md device's members, a loop
    // device's backing file's disk).
    let disks: Vec<PathBuf> = resolve(&root, major, minor)
        .unwrap_or_default()
        .into_iter()
        .filter(|d| d.under.is_empty())
        .map(|d| d.dir)
        .collect();
    b.disks = disks
        .iter()
        .filter_map(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    b.disks.sort();
    if let Some(first) = disks.first() {
        b.virtual_disk = behind_virtual_controller(first);
        b.pci = pci_function_of(first);
    }
    Ok(b)
}

/// Whether the disk at sysfs directory `disk` sits behind a virtual controller (virtio,
/// Xen, Hyper-V's VMBus, a virtual device), by its sysfs part alone ([`devices_part`]).
fn behind_virtual_controller(disk: &Path) -> bool {
    let sysfs = devices_part(disk);
    ["virtio", "xen", "vmbus", "/virtual/"]
        .iter()
        .any(|v| sysfs.contains(v))
}

// ---------------------------------------------------------------------------------------
// O_DIRECT

/// Whether an `O_DIRECT` read works at a lane.
#[derive(Clone, Debug, PartialEq, Eq)]
enum ODirect {
    Works,
    Refused(String),
    Untested(String),
}

impl ODirect {
    fn word(&self) -> &'static str {
        match self {
            ODirect::Works => "works",
            ODirect::Refused(_) => "refused",
            ODirect::Untested(_) => "untested",
        }
    }
}

/// Reads the first 4 KiB of `f` into a 4 KiB-aligned buffer (what `O_DIRECT` asks).
fn aligned_read(f: &File) -> std::io::Result<usize> {
    let mut buf = vec![0u8; 8192];
    let skip = buf.as_ptr().align_offset(4096);
    f.read_at(&mut buf[skip..skip + 4096], 0)
}

/// Tries an `O_DIRECT` read at `path`: the file itself, the first regular file of a
/// directory, or else an unnamed temporary file there (`O_TMPFILE`, gone when closed).
fn o_direct(path: &Path) -> ODirect {
    let target = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.is_file())
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files.into_iter().next()
    } else {
        Some(path.to_path_buf())
    };
    let direct = |p: &Path| {
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(p)
    };
    if let Some(t) = target {
        return match direct(&t).and_then(|f| aligned_read(&f)) {
            Ok(_) => ODirect::Works,
            Err(e) => ODirect::Refused(format!("{}: {e}", t.display())),
        };
    }
    // An empty directory: a temporary file, written and read back.
    let tmp = |flags: i32| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_TMPFILE | flags)
            .open(path)
    };
    if let Err(e) = tmp(0) {
        return ODirect::Untested(format!("no file to read, and no temporary file ({e})"));
    }
    let probe = tmp(libc::O_DIRECT).and_then(|f| {
        let buf = vec![7u8; 8192];
        let skip = buf.as_ptr().align_offset(4096);
        f.write_all_at(&buf[skip..skip + 4096], 0)?;
        aligned_read(&f)
    });
    match probe {
        Ok(_) => ODirect::Works,
        Err(e) => ODirect::Refused(format!("{}: {e}", path.display())),
    }
}

// ---------------------------------------------------------------------------------------
// Lanes

/// One lane's check and its device (`None` where the path is missing).
pub(super) fn lane_checks(
    lanes: &[(String, PathBuf)],
    cufile_usable: bool,
) -> (Vec<Check>, Vec<(String, Option<BlockDevice>)>) {
    let mut checks = Vec::new();
    let mut devices = Vec::new();
    for (name, path) in lanes {
        let (check, dev) = lane_check(name, path, cufile_usable);
        checks.push(check);
        devices.push((name.clone(), dev));
    }
    (checks, devices)
}

fn lane_check(name: &str, path: &Path, cufile_usable: bool) -> (Check, Option<BlockDevice>) {
    let dev = match block_device(path) {
        Ok(d) => d,
        Err(e) => {
            return (
                Check::new(name, Status::Fail, format!("{}: {e}", path.display()))
                    .fix("mount the lane's drive at this path (the manifest names it), or give the right path")
                    .fact("path", path.display().to_string()),
                None,
            );
        }
    };
    let fs = fs_type(path);
    let od = o_direct(path);
    let udev = dev
        .name
        .as_ref()
        .map(|_| Path::new(&format!("/run/udev/data/b{}:{}", dev.major, dev.minor)).exists());
    let mut parts = vec![
        format!("{} on {}", path.display(), dev.describe()),
        fs.unwrap_or("unknown file system").to_string(),
    ];
    if let Some(r) = dev.rotational {
        parts.push(
            match (r, dev.virtual_disk) {
                (false, _) => "not rotational",
                (true, true) => "rotational (a virtual disk says so)",
                (true, false) => "rotational",
            }
            .into(),
        );
    }
    if let Some(q) = dev.queue_depth {
        parts.push(format!("queue depth {q}"));
    }
    if let Some(l) = dev.logical_block_size {
        parts.push(format!("logical block {l} B"));
    }
    parts.push(format!("O_DIRECT {}", od.word()));
    let mut detail = parts.join(", ");
    let mut status = Status::Ok;
    let mut fixes: Vec<String> = Vec::new();
    match &od {
        ODirect::Refused(why) => {
            status = Status::Warn;
            detail += &format!(
                "\nO_DIRECT refused ({why}): reads go through the page cache, and --cold measures the cache"
            );
            fixes.push("put the lane on ext4 or xfs on a local drive, where O_DIRECT works".into());
        }
        ODirect::Untested(why) => detail += &format!(" ({why})"),
        ODirect::Works => {}
    }
    if dev.rotational == Some(true) && !dev.virtual_disk {
        status = status.max(Status::Warn);
        detail += "\na rotational disk: a few hundred MB/s at best";
        fixes.push("put the lane on an SSD or NVMe drive".into());
    }
    if cufile_usable {
        if matches!(fs, Some("tmpfs" | "overlayfs" | "ramfs")) {
            status = status.max(Status::Warn);
            detail += &format!(
                "\ncuFile cannot register files on {}: the gds engine falls back to staged",
                fs.unwrap_or("")
            );
            fixes.push("for the gds engine, put the lane on ext4 or xfs on an NVMe drive".into());
        } else if udev == Some(false) {
            status = status.max(Status::Warn);
            detail += "\nno udev record for the device: cuFileHandleRegister fails (5027)";
            fixes.push(format!(
                "write /run/udev/data/b{}:{} (udevadm trigger, or bind-mount /run/udev in a container)",
                dev.major, dev.minor
            ));
        }
    }
    let mut c = Check::new(name, status, detail);
    if !fixes.is_empty() {
        c = c.fix(fixes.join("; "));
    }
    let numa = dev.pci.as_deref().and_then(pci_numa_node);
    let c = c
        .fact("path", path.display().to_string())
        .fact("device", dev.name.clone())
        .fact("major", dev.major)
        .fact("minor", dev.minor)
        .fact("disks", dev.disks.clone())
        .fact("fs", fs)
        .fact("rotational", dev.rotational)
        .fact("queue_depth", dev.queue_depth)
        .fact("logical_block_size", dev.logical_block_size)
        .fact("max_sectors_kb", dev.max_sectors_kb)
        .fact("o_direct", od.word())
        .fact("udev_record", udev)
        .fact("pci", dev.pci.clone())
        .fact("numa_node", numa);
    (c, Some(dev))
}

/// Groups of lanes (indices into `keys`) that share a device: connected components of
/// "has a sharing key in common".
fn shared_groups(keys: &[BTreeSet<String>]) -> Vec<Vec<usize>> {
    let mut group: Vec<usize> = (0..keys.len()).collect();
    fn root(g: &mut [usize], mut i: usize) -> usize {
        while g[i] != i {
            g[i] = g[g[i]];
            i = g[i];
        }
        i
    }
    for a in 0..keys.len() {
        for b in a + 1..keys.len() {
            if !keys[a].is_disjoint(&keys[b]) {
                let (ra, rb) = (root(&mut group, a), root(&mut group, b));
                group[rb.max(ra)] = rb.min(ra);
            }
        }
    }
    let mut out: Vec<Vec<usize>> = Vec::new();
    for i in 0..keys.len() {
        let r = root(&mut group, i);
        match out.iter_mut().find(|g| g[0] == r) {
            Some(g) => g.push(i),
            None => out.push(vec![i]),
        }
    }
    out.retain(|g| g.len() > 1);
    out
}

/// Whether several lanes of one dataset (or of the paths given) sit on one device.
pub(super) fn sharing_check(label: &str, devices: &[(String, Option<BlockDevice>)]) -> Check {
    let present: Vec<(&String, &BlockDevice)> = devices
        .iter()
        .filter_map(|(n, d)| d.as_ref().map(|d| (n, d)))
        .collect();
    let name = "lanes.sharing";
    let base = Check::new(name, Status::Ok, "").fact("of", label);
    if present.len() < 2 {
        let mut c = base;
        c.status = if present.is_empty() {
            Status::Skip
        } else {
            Status::Ok
        };
        c.detail = format!(
            "{label}: {} lane(s) found: nothing to compare",
            present.len()
        );
        return c.fact("groups", Vec::<Vec<String>>::new());
    }
    let keys: Vec<BTreeSet<String>> = present.iter().map(|(_, d)| d.sharing_keys()).collect();
    let groups = shared_groups(&keys);
    let named: Vec<Vec<String>> = groups
        .iter()
        .map(|g| g.iter().map(|&i| present[i].0.clone()).collect())
        .collect();
    let mut c = base;
    if groups.is_empty() {
        c.detail = format!(
            "{label}: {} lanes on {} separate devices",
            present.len(),
            present.len()
        );
    } else {
        c.status = Status::Warn;
        c.detail = groups
            .iter()
            .zip(&named)
            .map(|(g, n)| {
                format!(
                    "{label}: {} share one device, {}: striping over them adds no bandwidth",
                    n.join(", "),
                    present[g[0]].1.describe()
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        c = c.fix("give each lane its own drive (one mount per NVMe), e.g. supercell-data generate DATASET --lanes /mnt/nvme0,/mnt/nvme1 (fine as it is for trying things out)");
    }
    c.fact("groups", named)
}

// ---------------------------------------------------------------------------------------
// PCIe and NUMA

/// The sysfs directory of a PCI function as CUDA names it ("00000000:1B:00.0" or
/// "0000:1b:00.0").
pub(super) fn pci_dir(bus_id: &str) -> PathBuf {
    let lower = bus_id.to_ascii_lowercase();
    let parts: Vec<&str> = lower.split(':').collect();
    let norm = if parts.len() == 3 {
        let d = parts[0];
        let d = if d.len() > 4 { &d[d.len() - 4..] } else { d };
        format!("{d:0>4}:{}:{}", parts[1], parts[2])
    } else {
        lower
    };
    PathBuf::from("/sys/bus/pci/devices").join(norm)
}

fn pci_numa_node(addr: &str) -> Option<i32> {
    read_trim(pci_dir(addr).join("numa_node"))
        .and_then(|s| s.parse().ok())
        .filter(|n: &i32| *n >= 0)
}

/// NVIDIA display and 3D controllers on the PCI bus (sysfs; no driver needed).
pub(super) fn nvidia_gpus_on_pci() -> Vec<String> {
    SysRoot::default().nvidia_gpus()
}

/// NVMe controllers on the PCI bus: (name, PCI address).
fn nvme_controllers() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir("/sys/class/nvme")
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| {
                    let dev = e.path().join("device").canonicalize().ok()?;
                    let addr = dev.file_name()?.to_str()?.to_string();
                    is_pci_address(&addr)
                        .then(|| (e.file_name().to_string_lossy().into_owned(), addr))
                })
                .collect()
        })
        .unwrap_or_default();
    out.sort();
    out
}

/// How two PCI functions reach each other, from their sysfs paths (as `nvidia-smi topo`
/// words them).
pub(super) fn pci_relation(a: &Path, b: &Path) -> &'static str {
    let parts = |p: &Path| -> Vec<String> {
        p.components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .skip_while(|c| !c.starts_with("pci"))
            .collect()
    };
    let (pa, pb) = (parts(a), parts(b));
    let common = pa.iter().zip(&pb).take_while(|(x, y)| x == y).count();
    match common {
        0 => "across host bridges (NODE/SYS)",
        1 => "through the host bridge (PHB)",
        _ => "behind one PCIe switch or bridge (PXB/PIX)",
    }
}

/// `nvidia-smi topo -m`, where the binary exists (10 s at most).
fn nvidia_smi_topo() -> Option<String> {
    let mut child = std::process::Command::new("nvidia-smi")
        .args(["topo", "-m"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if start.elapsed() < Duration::from_secs(10) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim_end().to_string())
}

/// Where GPUs and NVMe drives sit (NUMA node, PCIe path from each lane to GPU 0).
pub(super) fn placement_check(lanes: &[(String, Option<BlockDevice>)]) -> Check {
    let gpus = nvidia_gpus_on_pci();
    let nvme = nvme_controllers();
    let numa = |a: &str| pci_numa_node(a).map_or("none".to_string(), |n| n.to_string());
    let mut lines = Vec::new();
    if !gpus.is_empty() {
        lines.push(format!(
            "NVIDIA GPUs: {}",
            gpus.iter()
                .map(|g| format!("{g} (NUMA {})", numa(g)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if !nvme.is_empty() {
        lines.push(format!(
            "NVMe: {}",
            nvme.iter()
                .map(|(n, a)| format!("{n} at {a} (NUMA {})", numa(a)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let gpu0 = gpus.first();
    for (name, dev) in lanes {
        let Some(addr) = dev.as_ref().and_then(|d| d.pci.clone()) else {
            continue;
        };
        let mut line = format!("{name}: controller {addr} (NUMA {})", numa(&addr));
        if let Some(g) = gpu0 {
            if let (Ok(pa), Ok(pg)) = (pci_dir(&addr).canonicalize(), pci_dir(g).canonicalize()) {
                line += &format!(", to GPU {g}: {}", pci_relation(&pa, &pg));
            }
            if let (Some(a), Some(b)) = (pci_numa_node(&addr), pci_numa_node(g))
                && a != b
            {
                // numa.LANE judges this against every GPU, with the fix.
                line += &format!(", another NUMA node than GPU 0 ({b}): see numa.{name}");
            }
        }
        lines.push(line);
    }
    if gpus.is_empty() && !lines.is_empty() {
        lines.insert(0, "no NVIDIA GPU on the PCI bus".into());
    }
    let topo = nvidia_smi_topo();
    if let Some(t) = &topo {
        lines.push("nvidia-smi topo -m:".into());
        lines.extend(t.lines().map(str::to_string));
    }
    let facts = |c: Check| {
        c.fact("gpus", gpus.clone())
            .fact(
                "nvme",
                nvme.iter()
                    .map(|(n, a)| serde_json::json!({"name": n, "pci": a, "numa_node": pci_numa_node(a)}))
                    .collect::<Vec<Value>>(),
            )
            .fact("nvidia_smi_topo", topo.clone())
    };
    if lines.is_empty() {
        return facts(Check::new(
            "placement",
            Status::Skip,
            "no NVIDIA GPU or NVMe controller visible in sysfs",
        ));
    }
    facts(Check::new("placement", Status::Ok, lines.join("\n")))
}

// ---------------------------------------------------------------------------------------
// io_uring

/// bench's default I/O threads and frame-ring slots (`supercell bench --threads/--slots`).
const DEFAULT_THREADS: u64 = 8;
const DEFAULT_SLOTS: u64 = 4;

/// Bit of `CAP_IPC_LOCK` in the capability sets (linux/capability.h).
const CAP_IPC_LOCK: u32 = 14;

/// Whether this process has `CAP_IPC_LOCK` (locked memory is then not counted).
fn has_ipc_lock() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps & (1 << CAP_IPC_LOCK) != 0)
}

/// `RLIMIT_MEMLOCK` (soft), `None` when unlimited.
fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0
        || r.rlim_cur == libc::RLIM_INFINITY
    {
        return None;
    }
    Some(r.rlim_cur)
}

/// What registered buffers need: every I/O thread's ring registers every host slot, and
/// each registration is counted against `RLIMIT_MEMLOCK`.
pub(super) fn registered_bytes(threads: u64, slots: u64, slot: u64) -> u64 {
    threads.saturating_mul(slots).saturating_mul(slot)
}

/// The io_uring verdict from what was found (pure, for tests).
pub(super) fn io_uring_verdict(
    probe: Result<(), String>,
    disabled: Option<u32>,
    memlock: Option<u64>,
    ipc_lock: bool,
    need: Option<u64>,
) -> Check {
    let name = "io_uring";
    let limit_text = match (memlock, ipc_lock) {
        (_, true) => "not limited (CAP_IPC_LOCK)".to_string(),
        (None, _) => "unlimited".to_string(),
        (Some(l), _) => bytes(l),
    };
    let c = match probe {
        Err(e) => {
            let fix = match disabled {
                Some(2) => "sudo sysctl kernel.io_uring_disabled=0",
                Some(1) => {
                    "add the user to the group in kernel.io_uring_group, or sudo sysctl kernel.io_uring_disabled=0"
                }
                _ => {
                    "allow io_uring_setup, io_uring_enter and io_uring_register in the container's seccomp profile"
                }
            };
            Check::new(
                name,
                Status::Warn,
                format!("blocked ({e}): the staged and cpu-only engines use pread threads instead"),
            )
            .fix(fix)
        }
        Ok(()) => {
            let mut d = format!("available; RLIMIT_MEMLOCK {limit_text}");
            let limited = memlock.filter(|_| !ipc_lock);
            let short = match (limited, need) {
                (Some(l), Some(n)) => {
                    d += &format!(
                        "; registered buffers need about {} (threads × slots × largest frame, {DEFAULT_THREADS} × {DEFAULT_SLOTS} at bench's defaults)",
                        bytes(n)
                    );
                    l < n
                }
                (Some(l), None) => l < 64 << 20,
                _ => false,
            };
            if short {
                Check::new(
                    name,
                    Status::Warn,
                    format!("{d}: buffers cannot be registered, reads are a little slower (plain, not fixed, buffers)"),
                )
                .fix("raise the locked-memory limit: ulimit -l unlimited (systemd LimitMEMLOCK=infinity, docker --ulimit memlock=-1)")
            } else {
                Check::new(name, Status::Ok, d)
            }
        }
    };
    c.fact("io_uring_disabled", disabled)
        .fact("memlock_limit", memlock)
        .fact("cap_ipc_lock", ipc_lock)
        .fact("registered_bytes_needed", need)
}

/// io_uring: can a ring be created, and can its buffers be registered.
pub(super) fn io_uring_check(largest: Option<FrameSizes>) -> Check {
    io_uring_verdict(
        crate::ingest::io_uring_probe().map_err(|e| e.to_string()),
        read_trim("/proc/sys/kernel/io_uring_disabled").and_then(|s| s.parse().ok()),
        memlock_limit(),
        has_ipc_lock(),
        largest.map(|l| registered_bytes(DEFAULT_THREADS, DEFAULT_SLOTS, l.slot)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_disk_is_virtual_by_its_sysfs_part_alone() {
        // A copy of sysfs in a temporary folder whose random name holds the buses' words.
        let root = "/tmp/.tmpxenVirtio/virtio-xen-vmbus/virtual";
        let nvme = "/sys/devices/pci0000:00/0000:00:1d.0/0000:3d:00.0/nvme/nvme0/nvme0n1";
        let vda = "/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda";
        let xvda = "/sys/devices/xen/vbd-51712/block/xvda";
        let on =
            |root: &str, dev: &str| behind_virtual_controller(Path::new(&format!("{root}{dev}")));
        assert!(!on(root, nvme), "a physical NVMe disk under {root}");
        assert!(!on("", nvme));
        for dev in [vda, xvda, "/sys/devices/virtual/block/loop0"] {
            assert!(on(root, dev), "{dev}");
            assert!(on("", dev), "{dev}");
        }
    }

    #[test]
    fn pci_paths_are_normalised() {
        assert_eq!(
            pci_dir("00000000:1B:00.0"),
            PathBuf::from("/sys/bus/pci/devices/0000:1b:00.0")
        );
        assert_eq!(
            pci_dir("0000:1b:00.0"),
            PathBuf::from("/sys/bus/pci/devices/0000:1b:00.0")
        );
        assert!(is_pci_address("0000:3d:00.0"));
        assert!(!is_pci_address("nvme0n1"));
        assert!(!is_pci_address("pci0000:00"));
    }

    #[test]
    fn pci_relations_follow_the_sysfs_tree() {
        let p = |s: &str| PathBuf::from(s);
        let gpu = p("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0");
        let same_switch =
            p("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:04:00.0");
        let same_bridge = p("/sys/devices/pci0000:00/0000:00:03.0/0000:05:00.0");
        let other = p("/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0");
        assert!(pci_relation(&gpu, &same_switch).contains("PIX"));
        assert!(pci_relation(&gpu, &same_bridge).contains("PHB"));
        assert!(pci_relation(&gpu, &other).contains("SYS"));
    }

    fn keys(k: &[&str]) -> BTreeSet<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lanes_sharing_a_disk_are_grouped() {
        let g = shared_groups(&[
            keys(&["sda"]),
            keys(&["nvme0n1"]),
            keys(&["sda"]),
            keys(&["nvme1n1", "nvme2n1"]),
            keys(&["nvme2n1"]),
            keys(&["0:45"]),
        ]);
        assert_eq!(g, vec![vec![0, 2], vec![3, 4]]);
        assert!(shared_groups(&[keys(&["a"]), keys(&["b"])]).is_empty());
    }

    #[test]
    fn namespaces_of_one_nvme_drive_share_it() {
        let d = |disk: &str| BlockDevice {
            major: 259,
            minor: 1,
            name: Some(disk.into()),
            disks: vec![disk.into()],
            rotational: Some(false),
            queue_depth: None,
            logical_block_size: None,
            max_sectors_kb: None,
            pci: Some("0000:3d:00.0".into()),
            virtual_disk: false,
        };
        let a = d("nvme0n1");
        let b = d("nvme0n2");
        assert!(!a.sharing_keys().is_disjoint(&b.sharing_keys()));
        // SATA disks behind one HBA do not.
        let (mut s, mut t) = (d("sda"), d("sdb"));
        s.pci = Some("0000:00:17.0".into());
        t.pci = s.pci.clone();
        assert!(s.sharing_keys().is_disjoint(&t.sharing_keys()));
    }

    #[test]
    fn memlock_short_of_registered_buffers_is_a_warning_with_the_fix() {
        let need = registered_bytes(8, 4, 256 << 20);
        assert_eq!(need, 8 << 30);
        let c = io_uring_verdict(Ok(()), Some(0), Some(8 << 20), false, Some(need));
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.as_deref().unwrap().contains("ulimit -l"), "{c:?}");
        let c = io_uring_verdict(Ok(()), Some(0), Some(8 << 20), true, Some(need));
        assert_eq!(c.status, Status::Ok, "CAP_IPC_LOCK is not limited");
        let c = io_uring_verdict(Ok(()), Some(0), None, false, Some(need));
        assert_eq!(c.status, Status::Ok);
        let c = io_uring_verdict(Err("EPERM".into()), Some(2), None, false, None);
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.as_deref().unwrap().contains("io_uring_disabled=0"));
    }

    /// A directory's file system and device, and O_DIRECT tried on a real file.
    #[test]
    fn a_temporary_directory_has_a_device_and_an_o_direct_verdict() {
        let dir = tempfile::tempdir().unwrap();
        let d = block_device(dir.path()).unwrap();
        let md = std::fs::metadata(dir.path()).unwrap();
        assert_eq!(
            (d.major, d.minor),
            (libc::major(md.dev()), libc::minor(md.dev()))
        );
        std::fs::write(dir.path().join("f"), vec![1u8; 8192]).unwrap();
        assert_ne!(o_direct(dir.path()).word(), "untested");
        let (c, _) = lane_check("lane.0", &dir.path().join("missing"), false);
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.is_some());
    }
}
