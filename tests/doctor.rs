//! `supercell doctor` end to end (CI: no GPU, lavapipe installed): plain JSON, every check
//! complete, lanes on one file system flagged, a missing CUDA reported with its fix, and
//! the Vulkan check naming a software adapter as such.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
use supercell::doctor::{Check, LaneDevice, Status, SysRoot, tuning_checks};

/// A dataset with two lanes inside its directory (so both on one file system).
fn make_dataset(dir: &Path) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(2),
        64 << 10,
        vec![AttributeSpec::new("density")],
        Provenance::new("doctor test", ["x"]),
    )
    .unwrap();
    for f in 0..3u8 {
        w.push_frame_opaque(f64::from(f), vec![vec![f ^ 0x5a; 200_000]])
            .unwrap();
    }
    w.finish().unwrap();
}

/// Runs `supercell doctor ARGS` (see [`run_doctor`]) and checks it succeeded.
fn doctor(args: &[&str], lavapipe: Option<&Path>) -> Output {
    let out = run_doctor(args, lavapipe);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "doctor failed: {err}");
    out
}

/// Runs `supercell doctor ARGS`, with the software Vulkan driver only where `lavapipe`
/// is given.
fn run_doctor(args: &[&str], lavapipe: Option<&Path>) -> Output {
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supercell"));
    cmd.arg("doctor")
        .args(args)
        .env("XDG_RUNTIME_DIR", runtime.path());
    if let Some(icd) = lavapipe {
        cmd.env("VK_DRIVER_FILES", icd).env("VK_ICD_FILENAMES", icd);
    }
    let out = cmd.output().expect("run supercell doctor");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "doctor panicked: {err}");
    out
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&out.stdout)))
}

/// Fails on any `Ok`/`Err` key anywhere: results are never serialised as Rust enums.
fn assert_plain(v: &Value, at: &str) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                assert!(k != "Ok" && k != "Err", "{at}.{k} is a Result wrapper");
                assert_plain(x, &format!("{at}.{k}"));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                assert_plain(x, &format!("{at}[{i}]"));
            }
        }
        _ => {}
    }
}

fn check<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no check {name} in {v:#}"))
}

/// The lavapipe driver file, where Mesa's is installed.
fn lavapipe_icd() -> Option<std::path::PathBuf> {
    std::fs::read_dir("/usr/share/vulkan/icd.d")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("lvp_icd"))
        })
}

#[test]
fn json_is_plain_complete_and_flags_lanes_sharing_one_device() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let out = doctor(
        &["--json", dir.path().to_str().unwrap()],
        lavapipe_icd().as_deref(),
    );
    let v = json_of(&out);
    assert_plain(&v, "$");
    assert_eq!(v["schema"], "supercell-doctor/1");
    let checks = v["checks"].as_array().unwrap();
    assert!(checks.len() > 10, "{v:#}");
    for c in checks {
        let status = c["status"].as_str().unwrap_or_else(|| panic!("{c}"));
        assert!(["ok", "warn", "fail", "skip"].contains(&status), "{c}");
        assert!(c["name"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        assert!(c["detail"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        assert!(c.get("fix").is_some(), "fix key missing: {c}");
        if status == "warn" || status == "fail" {
            assert!(c["fix"].as_str().is_some_and(|s| !s.is_empty()), "{c}");
        }
    }
    // The dataset and both its lanes, each with its device and an O_DIRECT verdict.
    assert_eq!(check(&v, "dataset")["status"], "ok");
    assert_eq!(check(&v, "dataset")["lanes"], 2);
    let dev = std::fs::metadata(dir.path()).unwrap();
    for lane in ["lane.0", "lane.1"] {
        let c = check(&v, lane);
        assert_eq!(
            c["major"].as_u64().unwrap(),
            u64::from(libc::major(std::os::unix::fs::MetadataExt::dev(&dev))),
            "{c}"
        );
        assert!(
            ["works", "refused", "untested"].contains(&c["o_direct"].as_str().unwrap()),
            "{c}"
        );
    }
    // Both lanes live on the temporary directory's file system: one device.
    let s = check(&v, "lanes.sharing");
    assert_eq!(s["status"], "warn", "{s}");
    assert_eq!(
        s["groups"],
        serde_json::json!([["lane.0", "lane.1"]]),
        "{s}"
    );
    assert!(s["fix"].as_str().unwrap().contains("own drive"), "{s}");
    // CUDA: where there is none, a skip (or fail where a GPU is on the bus) with the fix.
    let cuda = check(&v, "cuda.driver");
    if cuda["gpus"] == 0 {
        assert!(
            cuda["status"] == "skip" || cuda["status"] == "fail",
            "{cuda}"
        );
        assert!(cuda["fix"].as_str().is_some(), "{cuda}");
        assert_eq!(check(&v, "cufile.library")["status"], "skip");
        assert_eq!(check(&v, "cuda.vulkan_sharing")["status"], "skip");
    } else {
        assert_eq!(cuda["status"], "ok", "{cuda}");
    }
    for name in ["io_uring", "placement", "nvidia_fs", "cufile.json", "udev"] {
        check(&v, name);
    }
    // The block layer under the lanes (or why there is none), the governor, and each
    // lane's NUMA placement.
    assert!(
        checks
            .iter()
            .any(|c| c["name"].as_str().unwrap().starts_with("block.")),
        "{v:#}"
    );
    for name in ["cpu.governor", "numa.lane.0", "numa.lane.1"] {
        check(&v, name);
    }
}

#[test]
fn vulkan_check_finds_lavapipe_and_calls_it_software() {
    let Some(icd) = lavapipe_icd() else {
        eprintln!("skipping: Mesa's lavapipe is not installed");
        return;
    };
    let v = json_of(&doctor(&["--json"], Some(&icd)));
    let a = check(&v, "vulkan.adapter");
    assert_eq!(a["software"], true, "{a}");
    assert_eq!(a["status"], "warn", "{a}");
    assert!(a["adapter"].as_str().unwrap().contains("llvmpipe"), "{a}");
    assert!(a["fix"].as_str().is_some(), "{a}");
    let l = check(&v, "vulkan.limits");
    for k in ["max_buffer_size", "max_storage_binding", "max_texture_2d"] {
        assert!(l[k].as_u64().is_some_and(|n| n > 0), "{k}: {l}");
    }
    let x = check(&v, "vulkan.external_memory");
    assert!(
        x["host_import"].is_boolean() && x["fd_export"].is_boolean(),
        "{x}"
    );
}

#[test]
fn text_names_problems_with_fixes_and_json_file_is_written() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let json = dir.path().join("doctor.json");
    let out = run_doctor(
        &[
            &format!("--json={}", json.display()),
            dir.path().to_str().unwrap(),
            "/nonexistent/lane",
        ],
        lavapipe_icd().as_deref(),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("lanes.sharing"), "{text}");
    assert!(text.contains("share one device"), "{text}");
    assert!(text.contains("fix: give each lane its own drive"), "{text}");
    assert!(text.contains("CUDA driver"), "{text}");
    // A path that does not exist is a failed check with its fix, and the exit status
    // says a check failed.
    assert!(text.contains("fail  path.0"), "{text}");
    assert!(!out.status.success(), "a failed check exited 0");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_plain(&v, "$");
    assert_eq!(check(&v, "path.0")["status"], "fail");
}

/// Lanes on two file systems (the temporary directory's and /dev/shm's) are not flagged.
#[test]
fn lanes_on_separate_devices_are_not_flagged() {
    let shm = Path::new("/dev/shm");
    let root = tempfile::tempdir().unwrap();
    let here = root.path().join("lane0");
    std::fs::create_dir(&here).unwrap();
    let Ok(there) = tempfile::tempdir_in(shm) else {
        eprintln!("skipping: no /dev/shm");
        return;
    };
    use std::os::unix::fs::MetadataExt;
    if std::fs::metadata(&here).unwrap().dev() == std::fs::metadata(there.path()).unwrap().dev() {
        eprintln!("skipping: /dev/shm is on the temporary directory's file system");
        return;
    }
    let v = json_of(&doctor(
        &[
            "--json",
            here.to_str().unwrap(),
            there.path().to_str().unwrap(),
        ],
        lavapipe_icd().as_deref(),
    ));
    let s = check(&v, "lanes.sharing");
    assert_eq!(s["status"], "ok", "{s}");
    assert_eq!(s["groups"], serde_json::json!([]), "{s}");
    assert_eq!(check(&v, "path.1")["fs"], "tmpfs");
}

/// On the GPU machine (`cargo test --test doctor -- --ignored`): CUDA, its GPUs, sharing
/// with Vulkan and cuFile's mode are all found, and the adapter is the GPU, not software.
#[test]
#[ignore = "needs an NVIDIA GPU"]
fn on_a_gpu_machine_cuda_vulkan_and_cufile_are_found() {
    let v = json_of(&doctor(&["--json"], None));
    eprintln!("{v:#}");
    assert_eq!(check(&v, "cuda.driver")["status"], "ok");
    assert_eq!(check(&v, "cuda.gpu.0")["status"], "ok");
    assert_eq!(check(&v, "vulkan.adapter")["software"], false);
    assert_eq!(check(&v, "cuda.vulkan_sharing")["status"], "ok");
    let cufile = check(&v, "cufile.library");
    let mode = cufile["mode"].as_str().unwrap_or("none");
    assert!(
        ["p2p", "p2pdma-advertised", "compat"].contains(&mode),
        "{cufile}"
    );
    // P2P is claimed only with nvidia-fs loaded.
    if mode == "p2p" {
        assert_eq!(check(&v, "nvidia_fs")["loaded"], true);
    }
    assert!(
        !check(&v, "placement")["gpus"]
            .as_array()
            .unwrap()
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------
// Block layer, CPU and NUMA against fake sysfs trees

/// A fake `/sys` and `/proc` in a temporary directory, laid out as the kernel lays them
/// out (devices under `/sys/devices`, reached through links).
struct FakeSys {
    dir: tempfile::TempDir,
    interrupts: RefCell<Vec<String>>,
}

/// An NVMe drive's queue as the kernel sets it by default.
const NVME_GOOD: &[(&str, &str)] = &[
    ("scheduler", "[none] mq-deadline kyber"),
    ("nr_requests", "1023"),
    ("max_sectors_kb", "1280"),
    ("max_hw_sectors_kb", "2048"),
    ("read_ahead_kb", "128"),
    ("rotational", "0"),
];

impl FakeSys {
    fn new() -> FakeSys {
        FakeSys {
            dir: tempfile::tempdir().unwrap(),
            interrupts: RefCell::new(Vec::new()),
        }
    }

    fn root(&self) -> SysRoot {
        SysRoot::new(self.dir.path())
    }

    fn at(&self, abs: &str) -> PathBuf {
        self.dir.path().join(abs.trim_start_matches('/'))
    }

    fn file(&self, abs: &str, text: &str) {
        let p = self.at(abs);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{text}\n")).unwrap();
    }

    fn link(&self, abs: &str, target_abs: &str) {
        let p = self.at(abs);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(self.at(target_abs), p).unwrap();
    }

    /// A PCI function at `/sys/devices/PATH` (its last component the address).
    fn pci(&self, path: &str, numa: i32) -> String {
        let dir = format!("/sys/devices/{path}");
        self.file(&format!("{dir}/numa_node"), &numa.to_string());
        let bdf = path.rsplit('/').next().unwrap().to_string();
        self.link(&format!("/sys/bus/pci/devices/{bdf}"), &dir);
        dir
    }

    /// A block device NAME (MAJ:MIN) under the device directory `parent`.
    fn disk(&self, parent: &str, name: &str, majmin: &str, queue: &[(&str, &str)]) -> String {
        let dir = format!("{parent}/{name}");
        self.file(&format!("{dir}/dev"), majmin);
        for (k, v) in queue {
            self.file(&format!("{dir}/queue/{k}"), v);
        }
        self.link(&format!("/sys/dev/block/{majmin}"), &dir);
        self.link(&format!("/sys/class/block/{name}"), &dir);
        self.link(&format!("/sys/block/{name}"), &dir);
        dir
    }

    fn partition(&self, disk: &str, name: &str, majmin: &str) -> String {
        let dir = format!("{disk}/{name}");
        self.file(&format!("{dir}/partition"), "1");
        self.file(&format!("{dir}/dev"), majmin);
        self.link(&format!("/sys/dev/block/{majmin}"), &dir);
        self.link(&format!("/sys/class/block/{name}"), &dir);
        dir
    }

    /// A PCIe NVMe controller `ctrl` on the PCI function at `pci_dir`; returns its
    /// directory (namespaces go under it).
    fn nvme_pcie(&self, pci_dir: &str, ctrl: &str) -> String {
        let dir = format!("{pci_dir}/nvme/{ctrl}");
        self.file(&format!("{dir}/transport"), "pcie");
        self.link(&format!("{dir}/device"), pci_dir);
        self.link(&format!("/sys/class/nvme/{ctrl}"), &dir);
        dir
    }

    /// A fabrics controller (no PCI function).
    fn nvme_fabric(&self, ctrl: &str, transport: &str, address: &str) -> String {
        let dir = format!("/sys/devices/virtual/nvme-fabrics/ctl/{ctrl}");
        self.file(&format!("{dir}/transport"), transport);
        self.file(&format!("{dir}/address"), address);
        self.link(&format!("/sys/class/nvme/{ctrl}"), &dir);
        dir
    }

    /// Interrupt vectors of the PCI function `bdf`: (IRQ, name, affinity list).
    fn irqs(&self, bdf: &str, vectors: &[(u32, &str, &str)]) {
        for (irq, name, cpus) in vectors {
            self.file(
                &format!("/sys/bus/pci/devices/{bdf}/msi_irqs/{irq}"),
                "msix",
            );
            self.file(&format!("/proc/irq/{irq}/smp_affinity_list"), cpus);
            self.interrupts.borrow_mut().push(format!(
                "{irq:>4}:    100    0    0    0  PCI-MSIX-{bdf}  {irq}-edge  {name}"
            ));
        }
        let mut text = "           CPU0       CPU1       CPU2       CPU3\n".to_string();
        text += &self.interrupts.borrow().join("\n");
        self.file("/proc/interrupts", &text);
    }

    /// CPUs 0..n, online, with `governor` (none: no cpufreq), on NUMA nodes of
    /// `per_node` CPUs each.
    fn cpus(&self, n: u32, governor: Option<&str>, per_node: u32) {
        self.file("/sys/devices/system/cpu/online", &format!("0-{}", n - 1));
        for c in 0..n {
            let dir = format!("/sys/devices/system/cpu/cpu{c}");
            self.file(&format!("{dir}/online"), "1");
            if let Some(g) = governor {
                self.file(&format!("{dir}/cpufreq/scaling_governor"), g);
                self.file(
                    &format!("{dir}/cpufreq/scaling_available_governors"),
                    "performance powersave",
                );
            }
        }
        for node in 0..n.div_ceil(per_node) {
            let first = node * per_node;
            self.file(
                &format!("/sys/devices/system/node/node{node}/cpulist"),
                &format!("{first}-{}", (first + per_node).min(n) - 1),
            );
        }
    }

    /// An NVIDIA GPU (3D controller) at `/sys/devices/PATH`.
    fn gpu(&self, path: &str, numa: i32) {
        let dir = self.pci(path, numa);
        self.file(&format!("{dir}/vendor"), "0x10de");
        self.file(&format!("{dir}/class"), "0x030200");
    }

    /// A network interface on the PCI function at `pci_dir`.
    fn nic(&self, pci_dir: &str, iface: &str) {
        let dir = format!("{pci_dir}/net/{iface}");
        self.file(&format!("{dir}/operstate"), "up");
        self.link(&format!("/sys/class/net/{iface}"), &dir);
    }
}

/// A machine with one NVMe drive (nvme0 at 0000:01:00.0, NUMA 0; namespace nvme0n1 with
/// partition nvme0n1p1 at 259:1) whose queue is `queue`, its I/O vectors on `irq_cpus`,
/// four CPUs under `governor` on NUMA node 0, and a GPU on node 0.
fn one_nvme(queue: &[(&str, &str)], irq_cpus: [&str; 4], governor: &str) -> FakeSys {
    let s = FakeSys::new();
    let pci = s.pci("pci0000:00/0000:00:01.0/0000:01:00.0", 0);
    let ctrl = s.nvme_pcie(&pci, "nvme0");
    let disk = s.disk(&ctrl, "nvme0n1", "259:0", queue);
    s.partition(&disk, "nvme0n1p1", "259:1");
    let mut vectors = vec![(40, "nvme0q0".to_string(), "0".to_string())];
    for (i, c) in irq_cpus.iter().enumerate() {
        vectors.push((41 + i as u32, format!("nvme0q{}", i + 1), c.to_string()));
    }
    let v: Vec<(u32, &str, &str)> = vectors
        .iter()
        .map(|(n, a, b)| (*n, a.as_str(), b.as_str()))
        .collect();
    s.irqs("0000:01:00.0", &v);
    s.cpus(4, Some(governor), 4);
    s.gpu("pci0000:00/0000:00:02.0/0000:02:00.0", 0);
    s
}

fn lane(name: &str, majmin: (u32, u32), buffered: bool) -> LaneDevice {
    LaneDevice {
        lane: name.into(),
        major: majmin.0,
        minor: majmin.1,
        buffered,
    }
}

fn get<'a>(checks: &'a [Check], name: &str) -> &'a Check {
    checks
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no check {name} in {checks:#?}"))
}

fn finding<'a>(c: &'a Check, setting: &str) -> &'a supercell::doctor::Finding {
    c.findings
        .iter()
        .find(|f| f.setting == setting)
        .unwrap_or_else(|| panic!("no finding {setting} in {c:#?}"))
}

/// Every warning carries its fix, and the JSON form of each check is plain.
fn assert_complete(checks: &[Check]) {
    for c in checks {
        assert!(!c.detail.is_empty(), "{c:#?}");
        if matches!(c.status, Status::Warn | Status::Fail) {
            assert!(c.fix.is_some(), "a problem without a fix: {c:#?}");
        }
        for f in &c.findings {
            assert_eq!(f.fix.is_some(), f.status == Status::Warn, "{f:#?}");
        }
        assert_plain(&serde_json::to_value(c).unwrap(), &c.name);
    }
}

#[test]
fn nvme_on_pcie_with_good_settings_is_all_ok() {
    let s = one_nvme(NVME_GOOD, ["0", "1", "2", "3"], "performance");
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (259, 1), false)]);
    assert_complete(&checks);
    let b = get(&checks, "block.nvme0n1");
    assert_eq!(b.status, Status::Ok, "{b:#?}");
    assert!(b.detail.contains("partition nvme0n1p1"), "{}", b.detail);
    assert_eq!(finding(b, "scheduler").value, "none");
    assert_eq!(finding(b, "transport").value, "nvme0 pcie");
    assert_eq!(finding(b, "irq_affinity").status, Status::Ok);
    assert!(
        finding(b, "read_ahead_kb")
            .note
            .contains("irrelevant to supercell's O_DIRECT")
    );
    assert_eq!(b.facts["numa_node"], 0);
    assert_eq!(b.facts["transport"], "pcie");
    assert_eq!(get(&checks, "cpu.governor").status, Status::Ok);
    let n = get(&checks, "numa.lane.0");
    assert_eq!(n.status, Status::Ok, "{n:#?}");
    assert!(n.detail.contains("the same node"), "{}", n.detail);
}

#[test]
fn mq_deadline_and_small_queue_limits_on_nvme_are_warnings_with_fixes() {
    let queue = [
        ("scheduler", "none [mq-deadline] kyber"),
        ("nr_requests", "32"),
        ("max_sectors_kb", "128"),
        ("max_hw_sectors_kb", "2048"),
        ("read_ahead_kb", "128"),
        ("rotational", "0"),
    ];
    let s = one_nvme(&queue, ["0", "1", "2", "3"], "performance");
    // Buffered reads at the lane (O_DIRECT refused): read-ahead matters.
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (259, 1), true)]);
    assert_complete(&checks);
    let b = get(&checks, "block.nvme0n1");
    assert_eq!(b.status, Status::Warn);
    let sched = finding(b, "scheduler");
    assert_eq!(
        (sched.status, sched.value.as_str()),
        (Status::Warn, "mq-deadline")
    );
    assert!(
        sched
            .fix
            .as_deref()
            .unwrap()
            .starts_with("echo none | sudo tee /sys/block/nvme0n1/queue/scheduler"),
        "{sched:#?}"
    );
    let nr = finding(b, "nr_requests");
    assert_eq!(nr.status, Status::Warn);
    assert!(
        nr.fix
            .as_deref()
            .unwrap()
            .contains("/sys/block/nvme0n1/queue/nr_requests")
    );
    let ms = finding(b, "max_sectors_kb");
    assert_eq!(ms.status, Status::Warn);
    assert!(ms.note.contains("8 requests"), "{ms:#?}");
    assert!(
        ms.fix
            .as_deref()
            .unwrap()
            .starts_with("echo 1024 | sudo tee"),
        "{ms:#?}"
    );
    let ra = finding(b, "read_ahead_kb");
    assert_eq!(ra.status, Status::Warn);
    assert!(ra.note.contains("page cache"), "{ra:#?}");
    // The text shows each finding with its fix beneath.
    let text = supercell::doctor::Report {
        checks: checks.clone(),
    }
    .text();
    assert!(text.contains("warn scheduler mq-deadline"), "{text}");
    assert!(
        text.contains("fix: echo none | sudo tee /sys/block/nvme0n1/queue/scheduler"),
        "{text}"
    );
    // The JSON carries the findings with status and fix.
    let v = supercell::doctor::Report { checks }.to_json();
    let b = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "block.nvme0n1")
        .unwrap();
    assert_eq!(b["status"], "warn");
    assert_eq!(b["scheduler"], "mq-deadline");
    assert_eq!(b["nr_requests"], 32);
    let f = b["findings"].as_array().unwrap();
    assert!(
        f.iter()
            .any(|x| x["setting"] == "scheduler" && x["status"] == "warn" && x["fix"].is_string())
    );
}

#[test]
fn a_powersave_governor_is_a_warning_with_the_fix() {
    let s = one_nvme(NVME_GOOD, ["0", "1", "2", "3"], "powersave");
    let checks = tuning_checks(&s.root(), &[]);
    let g = get(&checks, "cpu.governor");
    assert_eq!(g.status, Status::Warn, "{g:#?}");
    assert!(g.detail.contains("powersave on CPUs 0-3"), "{}", g.detail);
    assert!(
        g.fix
            .as_deref()
            .unwrap()
            .contains("cpupower frequency-set -g performance")
    );
    assert_eq!(g.facts["governors"]["powersave"], "0-3");
    // No cpufreq at all (a VM): nothing to set.
    let vm = FakeSys::new();
    vm.cpus(2, None, 2);
    let g = tuning_checks(&vm.root(), &[])
        .into_iter()
        .find(|c| c.name == "cpu.governor")
        .unwrap();
    assert_eq!(g.status, Status::Skip, "{g:#?}");
}

#[test]
fn every_nvme_queue_interrupt_on_cpu_0_is_a_warning() {
    let s = one_nvme(NVME_GOOD, ["0", "0", "0", "0"], "performance");
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (259, 1), false)]);
    assert_complete(&checks);
    let irq = finding(get(&checks, "block.nvme0n1"), "irq_affinity");
    assert_eq!(irq.status, Status::Warn, "{irq:#?}");
    assert_eq!(
        irq.value, "4 I/O vector(s) on CPUs 0",
        "the admin queue's vector is not counted"
    );
    assert!(irq.note.contains("on CPU 0"), "{irq:#?}");
    let fix = irq.fix.as_deref().unwrap();
    assert!(
        fix.contains("for n in 41 42 43 44") && fix.contains("smp_affinity_list"),
        "{fix}"
    );
    // The effective affinity, where the kernel gives it, is what counts.
    for (i, n) in (41..45).enumerate() {
        s.file(
            &format!("/proc/irq/{n}/effective_affinity_list"),
            &i.to_string(),
        );
    }
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (259, 1), false)]);
    let irq = finding(get(&checks, "block.nvme0n1"), "irq_affinity");
    assert_eq!(irq.status, Status::Ok, "{irq:#?}");
}

/// Two machines' NVMe-oF namespaces whose NIC sits on NUMA node 1 while the GPU is on 0:
/// over TCP (NIC found by the route to traddr) and over RDMA with native multipath (NIC
/// named by host_iface).
#[test]
fn nvme_over_fabrics_is_placed_by_its_nic_against_the_gpu() {
    let s = FakeSys::new();
    s.cpus(4, Some("performance"), 2);
    s.gpu("pci0000:00/0000:00:02.0/0000:02:00.0", 0);
    let near_nic = s.pci("pci0000:00/0000:00:03.0/0000:03:00.0", 0);
    s.nic(&near_nic, "ens0");
    let far_nic = s.pci("pci0000:80/0000:80:01.0/0000:81:00.0", 1);
    s.nic(&far_nic, "ens1");
    s.irqs(
        "0000:81:00.0",
        &[(60, "mlx5_comp0", "2"), (61, "mlx5_comp1", "3")],
    );
    s.file(
        "/proc/net/route",
        "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\tMTU\tWindow\tIRTT\n\
         ens0\t00000000\t0100A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n\
         ens1\t0000000A\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0",
    );
    // TCP: nvme1, namespace nvme1n1 under the controller.
    let tcp = s.nvme_fabric(
        "nvme1",
        "tcp",
        "traddr=10.0.0.2,trsvcid=4420,src_addr=10.0.0.1",
    );
    s.disk(&tcp, "nvme1n1", "259:5", NVME_GOOD);
    // RDMA with multipath: head nvme2n1 under the subsystem, its path under nvme2.
    let rdma = s.nvme_fabric(
        "nvme2",
        "rdma",
        "traddr=192.168.7.2,trsvcid=4420,host_iface=ens1",
    );
    let head = s.disk(
        "/sys/devices/virtual/nvme-subsystem/nvme-subsys2",
        "nvme2n1",
        "259:6",
        NVME_GOOD,
    );
    s.file(&format!("{rdma}/nvme2c2n1/dev"), "259:7");
    s.link(
        &format!("{head}/multipath/nvme2c2n1"),
        &format!("{rdma}/nvme2c2n1"),
    );

    let checks = tuning_checks(
        &s.root(),
        &[
            lane("lane.0", (259, 5), false),
            lane("lane.1", (259, 6), false),
        ],
    );
    assert_complete(&checks);
    for (lane, disk, ctrl, transport) in [
        ("lane.0", "block.nvme1n1", "nvme1", "tcp"),
        ("lane.1", "block.nvme2n1", "nvme2", "rdma"),
    ] {
        let b = get(&checks, disk);
        assert_eq!(
            finding(b, "transport").value,
            format!("{ctrl} {transport}"),
            "{b:#?}"
        );
        assert_eq!(b.facts["transport"], transport);
        assert_eq!(b.facts["controllers"][0]["nic"]["iface"], "ens1", "{b:#?}");
        assert_eq!(b.facts["numa_node"], 1, "{b:#?}");
        // The NIC's interrupts are the ones judged (spread: fine).
        assert_eq!(finding(b, "irq_affinity").status, Status::Ok, "{b:#?}");
        let n = get(&checks, &format!("numa.{lane}"));
        assert_eq!(n.status, Status::Warn, "{n:#?}");
        assert!(n.detail.contains("cross the socket link"), "{}", n.detail);
        let fix = n.fix.as_deref().unwrap();
        assert!(
            fix.contains("--host-iface=ens0"),
            "the NIC on the GPU's node: {fix}"
        );
    }
    assert!(
        finding(get(&checks, "block.nvme1n1"), "transport")
            .note
            .contains("route to 10.0.0.2")
    );
    // The NIC's interrupts on the other node's CPUs: a warning naming its node's CPUs.
    for irq in [60, 61] {
        s.file(&format!("/proc/irq/{irq}/smp_affinity_list"), "0-1");
    }
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (259, 5), false)]);
    let irq = finding(get(&checks, "block.nvme1n1"), "irq_affinity");
    assert_eq!(irq.status, Status::Warn, "{irq:#?}");
    assert!(
        irq.fix.as_deref().unwrap().contains("echo 2-3 | sudo tee"),
        "{irq:#?}"
    );
}

/// dm-0 over two NVMe drives (one through a partition): both drives are checked, the
/// read-ahead only where the file system is.
#[test]
fn device_mapper_over_two_nvme_drives_checks_both() {
    let s = one_nvme(NVME_GOOD, ["0", "1", "2", "3"], "performance");
    let pci1 = s.pci("pci0000:00/0000:00:04.0/0000:04:00.0", 0);
    let ctrl1 = s.nvme_pcie(&pci1, "nvme1");
    let sched = [
        ("scheduler", "none [mq-deadline] kyber"),
        ("rotational", "0"),
    ];
    let disk1 = s.disk(&ctrl1, "nvme1n1", "259:2", &sched);
    s.partition(&disk1, "nvme1n1p1", "259:3");
    let dm = s.disk(
        "/sys/devices/virtual/block",
        "dm-0",
        "253:0",
        &[
            ("scheduler", "none"),
            ("read_ahead_kb", "128"),
            ("max_sectors_kb", "1280"),
        ],
    );
    s.link(&format!("{dm}/slaves/nvme0n1"), "/sys/block/nvme0n1");
    s.link(
        &format!("{dm}/slaves/nvme1n1p1"),
        &format!("{disk1}/nvme1n1p1"),
    );
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (253, 0), false)]);
    assert_complete(&checks);
    let top = get(&checks, "block.dm-0");
    assert_eq!(
        top.facts["under"],
        serde_json::json!(["nvme0n1", "nvme1n1"]),
        "{top:#?}"
    );
    assert_eq!(finding(top, "read_ahead_kb").status, Status::Ok);
    for disk in ["block.nvme0n1", "block.nvme1n1"] {
        let c = get(&checks, disk);
        assert!(c.detail.contains("member of dm-0"), "{}", c.detail);
        assert!(
            c.findings.iter().all(|f| f.setting != "read_ahead_kb"),
            "{c:#?}"
        );
    }
    assert_eq!(
        finding(get(&checks, "block.nvme1n1"), "scheduler").status,
        Status::Warn
    );
    assert_eq!(
        finding(get(&checks, "block.nvme1n1"), "nr_requests").value,
        "unknown"
    );
    // A file system on the member's partition itself is the same drive once.
    let checks = tuning_checks(
        &s.root(),
        &[
            lane("lane.0", (253, 0), false),
            lane("lane.1", (259, 3), false),
        ],
    );
    let n1 = get(&checks, "block.nvme1n1");
    assert_eq!(n1.facts["lanes"], serde_json::json!(["lane.0", "lane.1"]));
    assert_eq!(
        checks.iter().filter(|c| c.name == "block.nvme1n1").count(),
        1
    );
}

/// An older kernel's tree: a disk with only its `dev`, no queue, no cpufreq, no
/// /proc: every value unknown, never a panic; a lane without a block device is skipped.
#[test]
fn missing_sysfs_files_read_as_unknown() {
    let s = FakeSys::new();
    s.disk(
        "/sys/devices/pci0000:00/0000:00:05.0/host0/target0:0:0/0:0:0:0/block",
        "sda",
        "8:0",
        &[],
    );
    s.gpu("pci0000:00/0000:00:02.0/0000:02:00.0", -1);
    let checks = tuning_checks(
        &s.root(),
        &[lane("lane.0", (8, 0), true), lane("lane.1", (0, 45), false)],
    );
    assert_complete(&checks);
    let b = get(&checks, "block.sda");
    assert_eq!(b.status, Status::Skip, "{b:#?}");
    assert!(
        b.findings
            .iter()
            .all(|f| f.value == "unknown" && f.status == Status::Skip),
        "{b:#?}"
    );
    assert_eq!(b.facts["scheduler"], Value::Null);
    assert_eq!(get(&checks, "block.lane.1").status, Status::Skip);
    assert_eq!(get(&checks, "cpu.governor").status, Status::Skip);
    assert_ne!(get(&checks, "numa.lane.0").status, Status::Warn);
    let text = supercell::doctor::Report { checks }.text();
    assert!(text.contains("skip scheduler unknown"), "{text}");
    // An empty root: nothing found, nothing panics.
    let empty = tempfile::tempdir().unwrap();
    let checks = tuning_checks(
        &SysRoot::new(empty.path()),
        &[lane("lane.0", (259, 1), false)],
    );
    assert_eq!(get(&checks, "block.lane.0").status, Status::Skip);
    assert_eq!(get(&checks, "numa.lane.0").status, Status::Skip);
}

/// A loop device reading its backing file through the page cache is a warning with
/// `losetup --direct-io=on`; the backing file's own disk (a virtio disk here) is
/// checked as well.
#[test]
fn a_loop_device_names_its_backing_disk_and_direct_io() {
    use std::os::unix::fs::MetadataExt;
    let s = FakeSys::new();
    s.cpus(2, None, 2);
    s.file("/images/lane.img", "data");
    // The backing file's st_dev is this temporary directory's; the fake tree names it vda.
    let dev = std::fs::metadata(s.at("/images/lane.img")).unwrap().dev();
    let majmin = format!("{}:{}", libc::major(dev), libc::minor(dev));
    let pci = s.pci("pci0000:00/0000:00:02.0", -1);
    s.disk(
        &format!("{pci}/virtio1/block"),
        "vda",
        &majmin,
        &[
            ("scheduler", "none [mq-deadline] kyber"),
            ("nr_requests", "256"),
            ("max_sectors_kb", "4096"),
            ("max_hw_sectors_kb", "2147483647"),
            ("read_ahead_kb", "8192"),
            ("rotational", "1"),
        ],
    );
    s.irqs(
        "0000:00:02.0",
        &[(35, "virtio1-config", "0-1"), (36, "virtio1-req.0", "0-1")],
    );
    s.file("/proc/irq/36/effective_affinity_list", "1");
    let lp = s.disk(
        "/sys/devices/virtual/block",
        "loop0",
        "7:0",
        &[
            ("scheduler", "[none] mq-deadline kyber"),
            ("nr_requests", "128"),
        ],
    );
    s.file(&format!("{lp}/loop/backing_file"), "/images/lane.img");
    s.file(&format!("{lp}/loop/dio"), "0");
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (7, 0), false)]);
    assert_complete(&checks);
    let l = get(&checks, "block.loop0");
    assert_eq!(l.facts["under"], serde_json::json!(["vda"]), "{l:#?}");
    let dio = finding(l, "loop_direct_io");
    assert_eq!(dio.status, Status::Warn);
    assert_eq!(
        dio.fix.as_deref(),
        Some("sudo losetup --direct-io=on /dev/loop0")
    );
    let v = get(&checks, "block.vda");
    assert!(v.detail.contains("backing file of loop0"), "{}", v.detail);
    assert_eq!(
        finding(v, "scheduler").status,
        Status::Ok,
        "virtio: the host schedules"
    );
    assert_eq!(
        finding(v, "rotational").status,
        Status::Ok,
        "a virtual disk's claim"
    );
    let irq = finding(v, "irq_affinity");
    assert_eq!(
        (irq.status, irq.value.as_str()),
        (Status::Ok, "1 I/O vector(s) on CPUs 1")
    );
    s.file(&format!("{lp}/loop/dio"), "1");
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (7, 0), false)]);
    assert_eq!(
        finding(get(&checks, "block.loop0"), "loop_direct_io").status,
        Status::Ok
    );
}

/// On this machine's own sysfs: the temporary directory's device is found and judged,
/// and the report is complete.
#[test]
fn this_machine_block_layer_is_judged_without_panics() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let dev = std::fs::metadata(dir.path()).unwrap().dev();
    let checks = tuning_checks(
        &SysRoot::default(),
        &[lane("lane.0", (libc::major(dev), libc::minor(dev)), false)],
    );
    assert_complete(&checks);
    eprintln!(
        "{}",
        supercell::doctor::Report {
            checks: checks.clone()
        }
        .text()
    );
    assert!(checks.iter().any(|c| c.name.starts_with("block.")));
    get(&checks, "cpu.governor");
    get(&checks, "numa.lane.0");
}

/// A spinning SATA disk without a scheduler: the scheduler warning asks for mq-deadline
/// (not none, as on NVMe), and the disk is called rotational.
#[test]
fn a_spinning_disk_wants_a_scheduler() {
    let s = FakeSys::new();
    let hba = s.pci("pci0000:00/0000:00:17.0", 0);
    s.disk(
        &format!("{hba}/ata1/host0/target0:0:0/0:0:0:0/block"),
        "sda",
        "8:0",
        &[
            ("scheduler", "[none] mq-deadline bfq"),
            ("nr_requests", "64"),
            ("rotational", "1"),
        ],
    );
    let checks = tuning_checks(&s.root(), &[lane("lane.0", (8, 0), false)]);
    assert_complete(&checks);
    let b = get(&checks, "block.sda");
    let sched = finding(b, "scheduler");
    assert_eq!(sched.status, Status::Warn, "{sched:#?}");
    assert!(
        sched
            .fix
            .as_deref()
            .unwrap()
            .starts_with("echo mq-deadline | sudo tee /sys/block/sda/queue/scheduler")
    );
    assert!(
        sched
            .fix
            .as_deref()
            .unwrap()
            .contains("KERNEL==\"sd[a-z]*\"")
    );
    assert_eq!(finding(b, "rotational").status, Status::Warn);
    assert_eq!(finding(b, "nr_requests").status, Status::Ok);
}
