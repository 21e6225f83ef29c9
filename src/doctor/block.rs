//! The block layer under each lane, as a storage engineer checks it first: the device stack
//! (partition → disk, device-mapper and md members through `slaves/`, a loop device's
//! backing file), and for each device its I/O scheduler, `nr_requests`, `max_sectors_kb`
//! against `max_hw_sectors_kb`, `read_ahead_kb`, `rotational`, a loop device's direct I/O,
//! an NVMe namespace's transport and the affinity of the interrupts that complete its
//! reads. Everything is read through a [`SysRoot`], so tests give a fake tree.

use std::path::{Path, PathBuf};

use serde_json::Value;

use super::cpu::irq_finding;
use super::nvme::{self, Controller};
use super::sysroot::{
    SysRoot, devices_part, list_dir, name_of, pci_function_of, read_file, read_num,
};
use super::{Check, Finding, Status};

/// bench's defaults keep this many reads in flight per device (8 threads × queue depth 8).
const DEFAULT_IN_FLIGHT: u64 = 64;
/// bench's default read size, KiB (`--io-size 1M`).
const DEFAULT_IO_KIB: u64 = 1024;
/// Read-ahead that keeps buffered whole-frame reads streaming, KiB.
const BUFFERED_READ_AHEAD_KIB: u64 = 1024;

/// What kind of block device a sysfs entry is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    Nvme,
    Virtio,
    Scsi,
    Loop,
    DeviceMapper,
    Md,
    Other,
}

impl Kind {
    fn of(name: &str, dir: &Path) -> Kind {
        let path = devices_part(dir);
        if name.starts_with("nvme") {
            Kind::Nvme
        } else if name.starts_with("loop") {
            Kind::Loop
        } else if name.starts_with("dm-") {
            Kind::DeviceMapper
        } else if name.starts_with("md") {
            Kind::Md
        } else if path.contains("/virtio") {
            Kind::Virtio
        } else if name.starts_with("sd") || name.starts_with("hd") {
            Kind::Scsi
        } else {
            Kind::Other
        }
    }

    fn word(self) -> &'static str {
        match self {
            Kind::Nvme => "NVMe",
            Kind::Virtio => "virtio disk",
            Kind::Scsi => "SCSI/SATA disk",
            Kind::Loop => "loop device",
            Kind::DeviceMapper => "device-mapper device",
            Kind::Md => "md RAID device",
            Kind::Other => "block device",
        }
    }

    /// Devices that only pass I/O on to others (their members or backing file).
    fn is_stacked(self) -> bool {
        matches!(self, Kind::Loop | Kind::DeviceMapper | Kind::Md)
    }
}

/// Where a device sits in a lane's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Role {
    /// The device the lane's file system is on (a partition's disk).
    Top,
    /// A member of a device-mapper or md device.
    Member,
    /// The device holding a loop device's backing file.
    Backing,
}

/// One block device under a lane.
#[derive(Clone, Debug)]
pub(super) struct Dev {
    pub name: String,
    /// Its sysfs directory, resolved (a whole device, never a partition).
    pub dir: PathBuf,
    pub kind: Kind,
    pub role: Role,
    /// How it was reached, in words ("nvme0n1p2 is a partition of it", "member of dm-0").
    pub via: String,
    /// Devices directly under it (members, the backing file's device).
    pub under: Vec<String>,
}

/// A partition's whole disk; other devices are their own.
pub(super) fn whole_disk(dir: &Path) -> PathBuf {
    match dir.parent() {
        Some(p) if dir.join("partition").exists() => p.to_path_buf(),
        _ => dir.to_path_buf(),
    }
}

/// The devices under `MAJ:MIN`, top first, each once; `None` where sysfs has no block
/// device of that number (tmpfs, overlay, network file systems).
pub(super) fn resolve(root: &SysRoot, major: u32, minor: u32) -> Option<Vec<Dev>> {
    let dir = root.canonical(&format!("/sys/dev/block/{major}:{minor}"))?;
    let whole = whole_disk(&dir);
    let via = if whole == dir {
        "the lane's file system is on it".to_string()
    } else {
        format!(
            "the lane's file system is on its partition {}",
            name_of(&dir)
        )
    };
    let mut out = Vec::new();
    walk(root, &whole, Role::Top, via, 0, &mut out);
    Some(out)
}

/// Adds the device at `dir` and everything under it (depth-limited: a loop whose backing
/// file lives on itself, or a corrupt tree, ends).
fn walk(root: &SysRoot, dir: &Path, role: Role, via: String, depth: u32, out: &mut Vec<Dev>) {
    if depth > 8 || out.iter().any(|d| d.dir == dir) {
        return;
    }
    let name = name_of(dir);
    let kind = Kind::of(&name, dir);
    let at = out.len();
    out.push(Dev {
        name: name.clone(),
        dir: dir.to_path_buf(),
        kind,
        role,
        via,
        under: Vec::new(),
    });
    let mut under = Vec::new();
    for s in list_dir(&dir.join("slaves")) {
        if let Some(member) = root.resolve(&dir.join("slaves").join(&s)) {
            let member = whole_disk(&member);
            under.push(name_of(&member));
            walk(
                root,
                &member,
                Role::Member,
                format!("member of {name}"),
                depth + 1,
                out,
            );
        }
    }
    if kind == Kind::Loop
        && let Some(file) = read_file(&dir.join("loop/backing_file"))
        && let Some(backing) = backing_device(root, &file)
    {
        under.push(name_of(&backing));
        let via = format!("holds {file}, the backing file of {name}");
        walk(root, &backing, Role::Backing, via, depth + 1, out);
    }
    out[at].under = under;
}

/// The sysfs directory of the device holding `file` (a loop device's backing file).
fn backing_device(root: &SysRoot, file: &str) -> Option<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let dev = std::fs::metadata(root.path(file)).ok()?.dev();
    let dir = root.canonical(&format!(
        "/sys/dev/block/{}:{}",
        libc::major(dev),
        libc::minor(dev)
    ))?;
    Some(whole_disk(&dir))
}

/// What the doctor found about one device: its findings, facts and NUMA placement.
pub(super) struct DevReport {
    pub dev: Dev,
    /// The lanes above it, each with how it is reached from that lane.
    pub reached: Vec<(String, String)>,
    pub findings: Vec<Finding>,
    /// NUMA node of what the device's reads come through (controller, or NIC for fabrics),
    /// with what that is in words.
    pub numa: Option<i32>,
    pub numa_from: Option<String>,
    pub controllers: Vec<Controller>,
}

/// The scheduler line (`none [mq-deadline] kyber`) as (active, available).
fn parse_scheduler(s: &str) -> (Option<String>, Vec<String>) {
    let mut active = None;
    let mut all = Vec::new();
    for w in s.split_whitespace() {
        let bare = w.trim_matches(|c| c == '[' || c == ']');
        if w.starts_with('[') {
            active = Some(bare.to_string());
        }
        all.push(bare.to_string());
    }
    if active.is_none() && all.len() == 1 {
        active = all.first().cloned();
    }
    (active, all)
}

/// The I/O scheduler, judged for the kind of device.
fn scheduler_finding(dev: &Dev, rotational: Option<bool>, text: Option<String>) -> Finding {
    let set = "scheduler";
    let Some(text) = text else {
        return Finding::unknown(
            set,
            "no queue/scheduler (older kernel or a bio-based device)",
        );
    };
    let (Some(active), available) = parse_scheduler(&text) else {
        return Finding::unknown(set, format!("cannot read \"{text}\""));
    };
    let fix = |to: &str| {
        let mut f = format!(
            "echo {to} | sudo tee /sys/block/{}/queue/scheduler",
            dev.name
        );
        if !available.iter().any(|a| a == to) {
            f += &format!(" (load it first: sudo modprobe {to})");
        }
        f + &format!(
            " (until reboot; to keep it, a udev rule: ACTION==\"add|change\", KERNEL==\"{}\", ATTR{{queue/scheduler}}=\"{to}\")",
            udev_kernel_match(&dev.name)
        )
    };
    let spinning = rotational == Some(true) && dev.kind == Kind::Scsi;
    match (dev.kind, active.as_str()) {
        (_, "none") if spinning => Finding::warn(
            set,
            active,
            "a spinning disk without a scheduler: reads are not sorted, seeks cost",
            fix("mq-deadline"),
        ),
        (_, "none") => Finding::ok(
            set,
            active,
            "no scheduler: requests go straight to the device's queues",
        ),
        (Kind::Nvme, _) => Finding::warn(
            set,
            active,
            "NVMe queues requests in the drive (one hardware queue per CPU); a scheduler only adds CPU time and latency per read",
            fix("none"),
        ),
        (_, "bfq") if !spinning => Finding::warn(
            set,
            active,
            "bfq's per-request accounting caps IOPS on a fast device",
            fix("none"),
        ),
        (Kind::Virtio, _) => Finding::ok(
            set,
            active,
            "the host's disk does the scheduling; none saves a little CPU per read",
        ),
        _ => Finding::ok(set, active, "fine for this kind of device"),
    }
}

/// The kernel-name pattern of a udev rule matching `name`'s kind of device.
fn udev_kernel_match(name: &str) -> String {
    if name.starts_with("nvme") {
        return "nvme[0-9]*n[0-9]*".into();
    }
    ["xvd", "sd", "vd", "hd"]
        .iter()
        .find(|p| name.starts_with(*p))
        .map_or(name.to_string(), |p| format!("{p}[a-z]*"))
}

/// `nr_requests`: enough to keep bench's reads in flight.
fn nr_requests_finding(dev: &Dev, n: Option<u64>) -> Finding {
    let set = "nr_requests";
    match n {
        None => Finding::unknown(set, "no queue/nr_requests"),
        Some(n) if n < DEFAULT_IN_FLIGHT => Finding::warn(
            set,
            n.to_string(),
            format!(
                "fewer requests than bench keeps in flight at its defaults ({DEFAULT_IN_FLIGHT}: 8 threads × queue depth 8): reads wait in the kernel"
            ),
            format!(
                "echo 256 | sudo tee /sys/block/{}/queue/nr_requests (the kernel refuses more than the device's tag depth)",
                dev.name
            ),
        ),
        Some(n) => Finding::ok(
            set,
            n.to_string(),
            format!("at least the {DEFAULT_IN_FLIGHT} reads bench keeps in flight"),
        ),
    }
}

/// `max_sectors_kb` against `max_hw_sectors_kb`: how a 1 MiB read is split.
fn max_sectors_finding(dev: &Dev, max: Option<u64>, hw: Option<u64>) -> Finding {
    let set = "max_sectors_kb";
    let Some(max) = max else {
        return Finding::unknown(set, "no queue/max_sectors_kb");
    };
    let hw_text = hw.map_or("unknown".to_string(), |h| format!("{h} KiB"));
    let value = format!("{max} (hardware limit {hw_text})");
    let want = hw.map_or(DEFAULT_IO_KIB, |h| h.min(DEFAULT_IO_KIB));
    if max < want {
        let pieces = DEFAULT_IO_KIB.div_ceil(max.max(1));
        Finding::warn(
            set,
            value,
            format!(
                "a 1 MiB read (bench's --io-size) goes down as {pieces} requests though the device takes {want} KiB at once"
            ),
            format!(
                "echo {want} | sudo tee /sys/block/{}/queue/max_sectors_kb",
                dev.name
            ),
        )
    } else if hw.is_some_and(|h| h < DEFAULT_IO_KIB) {
        Finding::ok(
            set,
            value,
            "the device's own limit (NVMe: its MDTS): larger reads are split, nothing to change",
        )
    } else {
        Finding::ok(set, value, "a 1 MiB read goes down whole")
    }
}

/// `read_ahead_kb` of the device the file system is on (the page cache reads ahead on it).
fn read_ahead_finding(dev: &Dev, kb: Option<u64>, buffered: bool) -> Finding {
    let set = "read_ahead_kb";
    let Some(kb) = kb else {
        return Finding::unknown(set, "no queue/read_ahead_kb");
    };
    if !buffered {
        return Finding::ok(
            set,
            kb.to_string(),
            "irrelevant to supercell's O_DIRECT reads; matters for buffered ones (bench --buffered, or a file system refusing O_DIRECT)",
        );
    }
    if kb < BUFFERED_READ_AHEAD_KIB {
        Finding::warn(
            set,
            kb.to_string(),
            "reads here go through the page cache (O_DIRECT refused): a small read-ahead turns each frame into many small synchronous reads",
            format!(
                "echo {BUFFERED_READ_AHEAD_KIB} | sudo tee /sys/block/{}/queue/read_ahead_kb (or sudo blockdev --setra {} /dev/{})",
                dev.name,
                BUFFERED_READ_AHEAD_KIB * 2,
                dev.name
            ),
        )
    } else {
        Finding::ok(
            set,
            kb.to_string(),
            "reads here go through the page cache (O_DIRECT refused): read-ahead large enough for whole-frame reads",
        )
    }
}

/// `rotational`: what the kernel (and schedulers, and supercell's lane check) believe.
fn rotational_finding(dev: &Dev, rotational: Option<bool>) -> Finding {
    let set = "rotational";
    let sysfs = devices_part(&dev.dir);
    let virtual_disk =
        dev.kind == Kind::Virtio || ["xen", "vmbus"].iter().any(|v| sysfs.contains(v));
    match rotational {
        None => Finding::unknown(set, "no queue/rotational"),
        Some(false) => Finding::ok(set, "0", "not rotational"),
        Some(true) if virtual_disk => Finding::ok(
            set,
            "1",
            "a virtual disk says so (the hypervisor decides; the host's storage sets the speed)",
        ),
        Some(true) if dev.kind == Kind::Nvme => Finding::warn(
            set,
            "1",
            "an NVMe drive flagged rotational: the kernel adds entropy and scheduling work meant for spinning disks",
            format!("echo 0 | sudo tee /sys/block/{}/queue/rotational", dev.name),
        ),
        Some(true) => Finding::warn(
            set,
            "1",
            "a spinning disk (or a RAID controller that says so): a few hundred MB/s at best",
            format!(
                "put the lane on an SSD or NVMe drive (if it is one behind a controller: echo 0 | sudo tee /sys/block/{}/queue/rotational)",
                dev.name
            ),
        ),
    }
}

/// A loop device: its backing file and whether it reads it with direct I/O.
fn loop_finding(dev: &Dev) -> Finding {
    let set = "loop_direct_io";
    let file = read_file(&dev.dir.join("loop/backing_file"));
    let on = file
        .as_deref()
        .map_or(String::new(), |f| format!(" on {f}"));
    match read_file(&dev.dir.join("loop/dio")).as_deref() {
        Some("1") => Finding::ok(
            set,
            "1",
            format!("reads its backing file{on} with direct I/O"),
        ),
        Some("0") => Finding::warn(
            set,
            "0",
            format!(
                "reads its backing file{on} through the page cache: O_DIRECT at the lane still caches, and bench measures memory, not the disk"
            ),
            format!("sudo losetup --direct-io=on /dev/{}", dev.name),
        ),
        _ => Finding::unknown(set, format!("no loop/dio (older kernel){on}")),
    }
}

/// Judges one device: its queue settings, and for NVMe its transport, for devices with
/// their own interrupts (NVMe, virtio, SCSI host adapters, a fabric's NIC) the affinity.
pub(super) fn report(root: &SysRoot, dev: &Dev, buffered: bool) -> DevReport {
    let q = |f: &str| read_file(&dev.dir.join("queue").join(f));
    let qn = |f: &str| read_num::<u64>(&dev.dir.join("queue").join(f));
    let rotational = qn("rotational").map(|r| r != 0);
    let leaf = dev.under.is_empty() && !dev.kind.is_stacked();
    let mut findings = vec![scheduler_finding(dev, rotational, q("scheduler"))];
    if !dev.kind.is_stacked() || dev.kind == Kind::Loop {
        findings.push(nr_requests_finding(dev, qn("nr_requests")));
    }
    findings.push(max_sectors_finding(
        dev,
        qn("max_sectors_kb"),
        qn("max_hw_sectors_kb"),
    ));
    if dev.role == Role::Top {
        findings.push(read_ahead_finding(dev, qn("read_ahead_kb"), buffered));
    }
    if leaf {
        findings.push(rotational_finding(dev, rotational));
    }
    if dev.kind == Kind::Loop {
        findings.push(loop_finding(dev));
    }
    let mut numa = None;
    let mut numa_from = None;
    let mut controllers = Vec::new();
    if dev.kind == Kind::Nvme {
        controllers = nvme::controllers_of(root, &dev.dir, &dev.name);
        findings.push(nvme::transport_finding(&controllers));
        for c in &controllers {
            if let Some((n, from)) = c.numa_node() {
                numa.get_or_insert(n);
                numa_from.get_or_insert(from);
            }
            if let Some((pci, owner, managed)) = c.interrupt_source() {
                let node = c.numa_node().map(|x| x.0);
                findings.push(irq_finding(root, &pci, &owner, node, managed));
            }
        }
    } else if leaf && let Some(pci) = pci_function_of(&dev.dir) {
        numa = root.pci_numa_node(&pci);
        numa_from = Some(format!("its controller {pci}"));
        let owner = format!("{}'s controller {pci}", dev.name);
        findings.push(irq_finding(root, &pci, &owner, numa, false));
    }
    DevReport {
        dev: dev.clone(),
        reached: Vec::new(),
        findings,
        numa,
        numa_from,
        controllers,
    }
}

impl DevReport {
    /// The device's check, `block.NAME`.
    pub(super) fn check(&self) -> Check {
        let d = &self.dev;
        // Lanes reaching it the same way are named together.
        let mut ways: Vec<(String, Vec<&str>)> = Vec::new();
        for (lane, via) in &self.reached {
            match ways.iter_mut().find(|w| &w.0 == via) {
                Some(w) => w.1.push(lane),
                None => ways.push((via.clone(), vec![lane])),
            }
        }
        let ways: Vec<String> = ways
            .iter()
            .map(|(via, lanes)| format!("{}: {via}", lanes.join(", ")))
            .collect();
        let mut head = format!("{} ({}): {}", d.name, d.kind.word(), ways.join("; "));
        if !d.under.is_empty() {
            head += &format!("; on {}", d.under.join(", "));
        }
        if let Some(from) = &self.numa_from {
            let n = self.numa.map_or("unknown".to_string(), |n| n.to_string());
            head += &format!("; NUMA node {n} ({from})");
        }
        let value = |set: &str| -> Value {
            self.findings
                .iter()
                .find(|f| f.setting == set && f.value != "unknown")
                .map_or(Value::Null, |f| Value::from(f.value.clone()))
        };
        let facts: Vec<(&str, Value)> = vec![
            ("device", d.name.clone().into()),
            ("kind", d.kind.word().into()),
            (
                "lanes",
                self.reached
                    .iter()
                    .map(|r| r.0.clone())
                    .collect::<Vec<_>>()
                    .into(),
            ),
            ("under", d.under.clone().into()),
            ("scheduler", value("scheduler")),
            (
                "nr_requests",
                read_num::<u64>(&d.dir.join("queue/nr_requests")).into(),
            ),
            (
                "max_sectors_kb",
                read_num::<u64>(&d.dir.join("queue/max_sectors_kb")).into(),
            ),
            (
                "max_hw_sectors_kb",
                read_num::<u64>(&d.dir.join("queue/max_hw_sectors_kb")).into(),
            ),
            (
                "read_ahead_kb",
                read_num::<u64>(&d.dir.join("queue/read_ahead_kb")).into(),
            ),
            (
                "rotational",
                read_num::<u64>(&d.dir.join("queue/rotational"))
                    .map(|r| r != 0)
                    .into(),
            ),
            ("numa_node", self.numa.into()),
            (
                "transport",
                self.controllers
                    .first()
                    .and_then(|c| c.transport.clone())
                    .into(),
            ),
            (
                "controllers",
                Value::Array(self.controllers.iter().map(Controller::to_json).collect()),
            ),
        ];
        let mut c = Check::from_findings(format!("block.{}", d.name), head, self.findings.clone());
        for (k, v) in facts {
            c = c.fact(k, v);
        }
        c
    }
}

/// The devices under a set of lanes, each judged once.
pub(super) struct LaneDevices {
    /// Every device under any lane, in the order first reached.
    pub devices: Vec<DevReport>,
    /// Each lane and the devices under it (indices into `devices`).
    pub lanes: Vec<(String, Vec<usize>)>,
    /// Checks of lanes with no block device underneath.
    pub unresolved: Vec<Check>,
}

/// Resolves every lane's stack and judges each device once: as the file system's device
/// where any lane has it so, with read-ahead judged for buffered reads where any lane
/// above it reads buffered.
pub(super) fn judge_lanes(root: &SysRoot, lanes: &[super::LaneDevice]) -> LaneDevices {
    /// (lane, how the lane reaches the device)
    type Ways = Vec<(String, String)>;
    // (device, read buffered by a lane above it, lanes reaching it)
    let mut unique: Vec<(Dev, bool, Ways)> = Vec::new();
    let mut per_lane = Vec::new();
    let mut unresolved = Vec::new();
    for l in lanes {
        let Some(stack) = resolve(root, l.major, l.minor) else {
            unresolved.push(no_block_device(&l.lane, l.major, l.minor));
            per_lane.push((l.lane.clone(), Vec::new()));
            continue;
        };
        let mut mine = Vec::new();
        for dev in stack {
            let at = match unique.iter().position(|u| u.0.dir == dev.dir) {
                Some(i) => i,
                None => {
                    unique.push((dev.clone(), false, Vec::new()));
                    unique.len() - 1
                }
            };
            let u = &mut unique[at];
            if dev.role == Role::Top {
                u.0.role = Role::Top;
                u.1 |= l.buffered;
            }
            if !u.2.iter().any(|r| r.0 == l.lane) {
                u.2.push((l.lane.clone(), dev.via.clone()));
            }
            mine.push(at);
        }
        per_lane.push((l.lane.clone(), mine));
    }
    let devices = unique
        .into_iter()
        .map(|(dev, buffered, reached)| DevReport {
            reached,
            ..report(root, &dev, buffered)
        })
        .collect();
    LaneDevices {
        devices,
        lanes: per_lane,
        unresolved,
    }
}

/// The check for a lane whose file system has no block device underneath.
pub(super) fn no_block_device(lane: &str, major: u32, minor: u32) -> Check {
    Check::new(
        format!("block.{lane}"),
        Status::Skip,
        format!("{lane}: its file system ({major}:{minor}) has no block device in sysfs (tmpfs, overlay, a network file system): no queue to tune"),
    )
    .fact("lanes", vec![lane.to_string()])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheduler_lines_give_the_active_one() {
        let (a, all) = parse_scheduler("none [mq-deadline] kyber");
        assert_eq!(a.as_deref(), Some("mq-deadline"));
        assert_eq!(all, ["none", "mq-deadline", "kyber"]);
        assert_eq!(parse_scheduler("none").0.as_deref(), Some("none"));
        assert_eq!(parse_scheduler("none kyber").0, None);
    }

    #[test]
    fn a_disk_s_kind_comes_from_its_sysfs_part_alone() {
        // A copy of sysfs in a temporary folder whose random name holds "virtio".
        let root = "/tmp/virtio.tmpXen";
        let sda = "/sys/devices/pci0000:00/0000:00:17.0/ata1/host0/target0:0:0/0:0:0:0/block/sda";
        let vda = "/sys/devices/pci0000:00/0000:00:04.0/virtio1/block/vda";
        let kind = |name: &str, dev: &str| Kind::of(name, Path::new(&format!("{root}{dev}")));
        assert_eq!(kind("sda", sda), Kind::Scsi);
        assert_eq!(kind("vda", vda), Kind::Virtio);
    }

    #[test]
    fn udev_rules_match_the_kind_of_device() {
        assert_eq!(udev_kernel_match("nvme0n1"), "nvme[0-9]*n[0-9]*");
        assert_eq!(udev_kernel_match("vda"), "vd[a-z]*");
        assert_eq!(udev_kernel_match("loop0"), "loop0");
    }
}
