//! `supercell doctor`: what this machine offers each part of supercell, like NVIDIA's
//! `gdscheck -p`, and for every problem the one-line fix. Works without a GPU: what is
//! missing is reported, never a panic.
//!
//! What is checked, in this order:
//!
//! - **Vulkan** (`vulkan.*`): the loader and its drivers; the adapter the player opens
//!   (name, driver, software or not); the limits that decide what it can draw (largest
//!   buffer, largest storage binding, largest 2D texture; compared with a dataset's largest
//!   frame and grid when one is given); external memory (host import for the host path, fd
//!   export for sharing with CUDA).
//! - **CUDA and GPUDirect Storage** (`cuda.*`, `cufile.*`, `nvidia_fs`, `udev`): the driver
//!   and its GPUs (PCIe link, NUMA node, memory); whether the Vulkan device that is GPU 0
//!   can share memory with CUDA (the player's direct path); libcufile's version and mode —
//!   P2P only where nvidia-fs is loaded (or P2PDMA is advertised, which is said as such),
//!   never assumed; the knobs of the `cufile.json` in force (read as cuFile reads it:
//!   comments and trailing commas allowed); the nvidia-fs module; the udev database cuFile
//!   identifies block devices with.
//! - **Lanes** (`dataset`, `lane.N`, `path.N`, `lanes.sharing`): for a dataset (or lane
//!   directories) given on the command line, each lane's block device (from the directory's
//!   `st_dev` through `/sys/dev/block/MAJ:MIN`: device, whole disk, rotational, queue depth,
//!   logical block size), its file system, whether an `O_DIRECT` read works there, and
//!   whether several lanes sit on one device (striping over one device gains nothing).
//! - **Block layer** (`block.DEV`): every device under the lanes (a partition resolved
//!   to its disk, device-mapper and md members through `slaves/`, a loop device's backing
//!   file's disk), each setting a [`Finding`] with its own status and fix: I/O scheduler
//!   (`none` on NVMe), `nr_requests`, `max_sectors_kb` against `max_hw_sectors_kb`,
//!   `read_ahead_kb` (judged only where reads are buffered), `rotational`, a loop device's
//!   direct I/O, an NVMe namespace's transport per controller (for fabrics the NIC the
//!   connection leaves through), and the interrupt affinity of the drive's or that NIC's
//!   vectors. Unknown where an older kernel lacks the file.
//! - **CPU** (`cpu.governor`): the frequency governor of every CPU (`performance`).
//! - **NUMA** (`numa.LANE`): each lane's NUMA node (its controller's, or its NIC's for
//!   NVMe-oF) against every NVIDIA GPU's.
//! - **Placement** (`placement`): the NUMA node of every NVIDIA GPU and NVMe controller
//!   from sysfs, how each lane's controller reaches GPU 0 over PCIe (same switch, same host
//!   bridge, across host bridges or NUMA nodes), and `nvidia-smi topo -m` where the binary
//!   exists.
//!
//! The block-layer, CPU and NUMA checks read `/sys` and `/proc` under a [`SysRoot`]
//! ([`Request::sys_root`], `/` by default), so they run against a copied or fake tree.
//! - **io_uring** (`io_uring`): whether a ring can be created, `kernel.io_uring_disabled`,
//!   and `RLIMIT_MEMLOCK` against what registered buffers need (each I/O thread's ring
//!   registers every host slot).
//!
//! # JSON (`supercell doctor --json`)
//!
//! ```json
//! {
//!   "schema": "supercell-doctor/1",
//!   "summary": { "ok": 9, "warn": 3, "fail": 0, "skip": 5 },
//!   "checks": [
//!     { "name": "vulkan.adapter", "status": "warn",
//!       "detail": "llvmpipe (LLVM 19.1.7, 256 bits): a software (CPU) rasteriser ...",
//!       "fix": "install the GPU's Vulkan driver ...",
//!       "adapter": "llvmpipe (LLVM 19.1.7, 256 bits)", "software": true, ... }
//!   ]
//! }
//! ```
//!
//! Every check has `name`, `status` (`ok`, `warn`, `fail` or `skip`), `detail` (what was
//! found, in words) and `fix` (one line; `null` when there is nothing to do; always set for
//! `warn` and `fail`). The other keys of a check are its facts as plain JSON values
//! (numbers in bytes, booleans, strings, `null` when unknown); no value is wrapped in
//! `Ok`/`Err`. `skip` means the check does not apply here (e.g. cuFile without CUDA).
//! Checks made of several settings (`block.DEV`) also carry `findings`: `[{ "setting",
//! "value" ("unknown" where unread), "status", "note", "fix" }]`; their `fix` is the
//! findings' fixes in order.

mod block;
mod cpu;
mod gpu;
mod numa;
mod nvme;
mod storage;
mod sysroot;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value};

pub use gpu::{CufileJson, cufile_json_path, parse_cufile_json};
pub use storage::{BlockDevice, block_device};
pub use sysroot::{SysRoot, cpu_list, parse_cpu_list};

/// How a check came out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Works as supercell wants it.
    Ok,
    /// Does not apply on this machine (e.g. cuFile without CUDA).
    Skip,
    /// Works, but slower or with less than it could: see the fix.
    Warn,
    /// Does not work: see the fix.
    Fail,
}

impl Status {
    /// The word used in text and JSON.
    pub fn word(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Skip => "skip",
            Status::Warn => "warn",
            Status::Fail => "fail",
        }
    }
}

/// One check: what was found, and the fix where something is wrong.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Check {
    /// Stable identifier, e.g. `vulkan.adapter`, `lane.0`, `lanes.sharing`.
    pub name: String,
    /// Outcome.
    pub status: Status,
    /// What was found, in words (may span lines).
    pub detail: String,
    /// What to do, in one line; `None` where there is nothing to do.
    pub fix: Option<String>,
    /// Settings judged one by one (block-layer checks), each with its own status and fix;
    /// empty for most checks (and then left out of the JSON).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Facts as plain JSON values (flattened into the check's JSON object).
    #[serde(flatten)]
    pub facts: Map<String, Value>,
}

/// One setting of a check judged on its own, e.g. a disk's I/O scheduler.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// What was read, e.g. `scheduler`, `nr_requests`, `irq_affinity`.
    pub setting: String,
    /// Its value as read (`unknown` where the kernel does not have the file).
    pub value: String,
    /// Outcome (`skip` where the value is unknown).
    pub status: Status,
    /// What the value means here, in words.
    pub note: String,
    /// The command or setting that fixes it; `None` where nothing is to do.
    pub fix: Option<String>,
}

impl Finding {
    /// A setting that is as it should be (or only reported).
    pub fn ok(setting: &str, value: impl Into<String>, note: impl Into<String>) -> Finding {
        Finding {
            setting: setting.to_string(),
            value: value.into(),
            status: Status::Ok,
            note: note.into(),
            fix: None,
        }
    }

    /// A setting that costs speed, with its fix.
    pub fn warn(
        setting: &str,
        value: impl Into<String>,
        note: impl Into<String>,
        fix: impl Into<String>,
    ) -> Finding {
        Finding {
            status: Status::Warn,
            fix: Some(fix.into()),
            ..Finding::ok(setting, value, note)
        }
    }

    /// A setting the kernel does not show (an older kernel, another driver).
    pub fn unknown(setting: &str, note: impl Into<String>) -> Finding {
        Finding {
            status: Status::Skip,
            ..Finding::ok(setting, "unknown", note)
        }
    }
}

impl Check {
    /// A check with `status` and `detail`, no fix and no facts.
    pub fn new(name: impl Into<String>, status: Status, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            status,
            detail: detail.into(),
            fix: None,
            findings: Vec::new(),
            facts: Map::new(),
        }
    }

    /// A check made of findings: its status is the worst of theirs (`skip` only where
    /// every one is unknown), its fix their fixes in order.
    pub fn from_findings(
        name: impl Into<String>,
        head: impl Into<String>,
        findings: Vec<Finding>,
    ) -> Check {
        let worst = findings.iter().map(|f| f.status).max();
        let status = match worst {
            Some(Status::Skip) if findings.iter().any(|f| f.status == Status::Ok) => Status::Ok,
            Some(s) => s,
            None => Status::Skip,
        };
        let fixes: Vec<&str> = findings.iter().filter_map(|f| f.fix.as_deref()).collect();
        let mut c = Check::new(name, status, head);
        if !fixes.is_empty() {
            c.fix = Some(fixes.join("; "));
        }
        c.findings = findings;
        c
    }

    /// With the fix.
    pub fn fix(mut self, fix: impl Into<String>) -> Check {
        self.fix = Some(fix.into());
        self
    }

    /// With one more fact (`key` must not be one of the four fixed keys).
    pub fn fact(mut self, key: &str, value: impl Into<Value>) -> Check {
        debug_assert!(!matches!(
            key,
            "name" | "status" | "detail" | "fix" | "findings"
        ));
        self.facts.insert(key.to_string(), value.into());
        self
    }
}

/// What to check besides the machine itself.
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// Datasets (directories or manifests) whose lanes are checked.
    pub datasets: Vec<PathBuf>,
    /// Lane directories or files checked one by one (and for sharing among themselves).
    pub paths: Vec<PathBuf>,
    /// Skip opening a Vulkan device (the loader is still checked).
    pub no_vulkan_device: bool,
    /// Where the block-layer, CPU and NUMA checks read `/sys` and `/proc` (`/` when
    /// `None`).
    pub sys_root: Option<PathBuf>,
}

/// A lane's device, for the block-layer checks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaneDevice {
    /// The lane's name in the report (`lane.0`, `path.1`).
    pub lane: String,
    /// Major number of the lane's file system's device (`st_dev`).
    pub major: u32,
    /// Minor number.
    pub minor: u32,
    /// Whether reads there go through the page cache (`O_DIRECT` refused), so that
    /// read-ahead matters.
    pub buffered: bool,
}

/// The block-layer, CPU and NUMA checks, read under `root`: `block.DEV` for every device
/// under the lanes (partitions resolved to their disk, device-mapper and md members
/// through `slaves/`, a loop device's backing file's device), `cpu.governor`, and
/// `numa.LANE` against each NVIDIA GPU. Files an older kernel lacks come out `unknown`.
pub fn tuning_checks(root: &SysRoot, lanes: &[LaneDevice]) -> Vec<Check> {
    let found = block::judge_lanes(root, lanes);
    let mut checks = found.unresolved;
    checks.extend(found.devices.iter().map(block::DevReport::check));
    checks.push(cpu::governor_check(root));
    let gpus = numa::gpus(root);
    for (lane, idx) in &found.lanes {
        let devs: Vec<&block::DevReport> = idx.iter().map(|&i| &found.devices[i]).collect();
        checks.push(numa::lane_check(root, lane, &devs, &gpus));
    }
    checks
}

/// The lanes' devices as the lane checks found them.
fn tunable_lanes(checks: &[Check]) -> Vec<LaneDevice> {
    checks
        .iter()
        .filter_map(|c| {
            let num = |k: &str| c.facts.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
            Some(LaneDevice {
                lane: c.name.clone(),
                major: num("major")?,
                minor: num("minor")?,
                buffered: c.facts.get("o_direct").and_then(Value::as_str) == Some("refused"),
            })
        })
        .collect()
}

/// Everything the doctor found, in check order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// The checks.
    pub checks: Vec<Check>,
}

/// The JSON form of a [`Report`] (see the module docs).
#[derive(Serialize)]
struct ReportJson<'a> {
    schema: &'static str,
    summary: Summary,
    checks: &'a [Check],
}

/// How many checks came out each way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Summary {
    /// Checks that are fine.
    pub ok: usize,
    /// Checks with a warning.
    pub warn: usize,
    /// Checks that failed.
    pub fail: usize,
    /// Checks that do not apply.
    pub skip: usize,
}

impl Report {
    /// The check called `name`.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// How many checks came out each way.
    pub fn summary(&self) -> Summary {
        let mut s = Summary::default();
        for c in &self.checks {
            match c.status {
                Status::Ok => s.ok += 1,
                Status::Warn => s.warn += 1,
                Status::Fail => s.fail += 1,
                Status::Skip => s.skip += 1,
            }
        }
        s
    }

    fn json_form(&self) -> ReportJson<'_> {
        ReportJson {
            schema: "supercell-doctor/1",
            summary: self.summary(),
            checks: &self.checks,
        }
    }

    /// The report as a JSON value (see the module docs for the schema).
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self.json_form()).expect("a report is plain JSON")
    }

    /// The report as pretty-printed JSON text, each check's `name`, `status`, `detail` and
    /// `fix` first (as [`Report::to_json`], in a fixed order).
    pub fn to_json_string(&self) -> String {
        serde_json::to_string_pretty(&self.json_form()).expect("a report is plain JSON")
    }

    /// The report as text: one block per check, its fix underneath.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let width = self
            .checks
            .iter()
            .map(|c| c.name.chars().count())
            .max()
            .unwrap_or(0)
            .clamp(8, 22);
        for c in &self.checks {
            let mut lines = c.detail.lines();
            let _ = writeln!(
                s,
                "{:>4}  {:<width$}  {}",
                c.status.word(),
                c.name,
                lines.next().unwrap_or("")
            );
            for l in lines {
                let _ = writeln!(s, "{:>4}  {:<width$}  {l}", "", "");
            }
            for f in &c.findings {
                let _ = writeln!(
                    s,
                    "{:>4}  {:<width$}  {:<4} {} {}: {}",
                    "",
                    "",
                    f.status.word(),
                    f.setting,
                    f.value,
                    f.note
                );
                if let Some(fix) = &f.fix {
                    let _ = writeln!(s, "{:>4}  {:<width$}       fix: {fix}", "", "");
                }
            }
            // A check made of findings shows each fix under its finding.
            if let Some(f) = &c.fix
                && c.findings.iter().all(|x| x.fix.is_none())
            {
                let _ = writeln!(s, "{:>4}  {:<width$}  fix: {f}", "", "");
            }
        }
        let sum = self.summary();
        let _ = writeln!(
            s,
            "\n{} ok, {} warn, {} fail, {} skip{}",
            sum.ok,
            sum.warn,
            sum.fail,
            sum.skip,
            if sum.warn + sum.fail == 0 {
                ": nothing to fix"
            } else {
                ""
            }
        );
        s
    }
}

/// Runs every check: the machine, then the datasets and paths of `req`.
pub fn diagnose(req: &Request) -> Report {
    let mut checks = Vec::new();
    let datasets: Vec<storage::DatasetLanes> = req
        .datasets
        .iter()
        .map(|d| storage::open_dataset(d))
        .collect();
    let largest = datasets
        .iter()
        .filter_map(|d| d.sizes)
        .fold(None, |acc: Option<storage::FrameSizes>, s| {
            Some(acc.map_or(s, |a| a.max(s)))
        });

    let vulkan = gpu::vulkan_checks(req.no_vulkan_device, largest);
    checks.extend(vulkan.checks);
    let cuda = gpu::cuda_checks(largest);
    checks.extend(cuda.checks);
    let cufile = gpu::cufile_checks(cuda.present);
    checks.extend(cufile.checks);

    let mut lane_devices = Vec::new();
    let mut tuned = Vec::new();
    for d in &datasets {
        checks.push(d.check.clone());
        let lanes: Vec<(String, PathBuf)> = d
            .lanes
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("lane.{i}"), p.clone()))
            .collect();
        let (lane_checks, devices) = storage::lane_checks(&lanes, cufile.usable);
        tuned.extend(tunable_lanes(&lane_checks));
        checks.extend(lane_checks);
        checks.push(storage::sharing_check(&d.label, &devices));
        lane_devices.extend(devices);
    }
    if !req.paths.is_empty() {
        let paths: Vec<(String, PathBuf)> = req
            .paths
            .iter()
            .enumerate()
            .map(|(i, p)| (format!("path.{i}"), p.clone()))
            .collect();
        let (path_checks, devices) = storage::lane_checks(&paths, cufile.usable);
        tuned.extend(tunable_lanes(&path_checks));
        checks.extend(path_checks);
        checks.push(storage::sharing_check("the paths given", &devices));
        lane_devices.extend(devices);
    }
    let root = req
        .sys_root
        .as_deref()
        .map_or_else(SysRoot::default, SysRoot::new);
    checks.extend(tuning_checks(&root, &tuned));
    checks.push(storage::placement_check(&lane_devices));
    checks.push(storage::io_uring_check(largest));
    Report { checks }
}

/// Reads a small sysfs or procfs file, trimmed.
fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

/// Bytes in binary units, e.g. "1.5 GiB".
fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else if v.fract() == 0.0 {
        format!("{v:.0} {}", UNITS[u])
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Walks `v` and fails on any `Ok`/`Err` key: results are never serialised as Rust
    /// enums.
    fn assert_no_result_wrappers(v: &Value, at: &str) {
        match v {
            Value::Object(m) => {
                for (k, x) in m {
                    assert!(k != "Ok" && k != "Err", "{at}.{k} is a Result wrapper");
                    assert_no_result_wrappers(x, &format!("{at}.{k}"));
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    assert_no_result_wrappers(x, &format!("{at}[{i}]"));
                }
            }
            _ => {}
        }
    }

    #[test]
    fn json_is_plain_and_every_check_says_status_detail_and_fix() {
        let r = Report {
            checks: vec![
                Check::new("a", Status::Ok, "fine").fact("bytes", 5u64),
                Check::new("b", Status::Warn, "slow").fix("do x"),
            ],
        };
        let v = r.to_json();
        assert_no_result_wrappers(&v, "$");
        let text: Value = serde_json::from_str(&r.to_json_string()).unwrap();
        assert_eq!(text, v);
        assert_eq!(v["schema"], "supercell-doctor/1");
        assert_eq!(v["summary"]["ok"], 1);
        assert_eq!(v["summary"]["warn"], 1);
        let checks = v["checks"].as_array().unwrap();
        assert_eq!(checks[0]["status"], "ok");
        assert_eq!(checks[0]["fix"], Value::Null);
        assert_eq!(checks[0]["bytes"], 5);
        assert_eq!(checks[1]["fix"], "do x");
        let t = r.text();
        assert!(t.contains("warn  b"), "{t}");
        assert!(t.contains("fix: do x"), "{t}");
        assert!(t.contains("1 ok, 1 warn, 0 fail, 0 skip"), "{t}");
    }

    /// The whole report on this machine (no dataset): plain JSON, every check complete,
    /// every problem with a fix, and a missing CUDA is reported, not a panic.
    #[test]
    fn this_machine_gives_a_complete_plain_report() {
        let r = diagnose(&Request {
            no_vulkan_device: true,
            ..Request::default()
        });
        let v = r.to_json();
        assert_no_result_wrappers(&v, "$");
        for c in &r.checks {
            assert!(!c.detail.is_empty(), "{c:?}");
            if matches!(c.status, Status::Warn | Status::Fail) {
                assert!(c.fix.is_some(), "a problem without a fix: {c:?}");
            }
        }
        for name in ["vulkan.loader", "cuda.driver", "cufile.library", "io_uring"] {
            assert!(r.get(name).is_some(), "{name} missing:\n{}", r.text());
        }
        if crate::gpu::cuda_probe().is_err() {
            let c = r.get("cuda.driver").unwrap();
            assert_eq!(c.status, Status::Skip, "{c:?}");
            assert!(c.fix.is_some(), "{c:?}");
            assert_eq!(r.get("cufile.library").unwrap().status, Status::Skip);
        }
    }

    #[test]
    fn byte_counts_read_in_binary_units() {
        assert_eq!(bytes(512), "512 B");
        assert_eq!(bytes(4096), "4 KiB");
        assert_eq!(bytes(3 << 29), "1.5 GiB");
    }
}
