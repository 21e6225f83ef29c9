//! The GPU side of the doctor: Vulkan (loader, adapter, limits, external memory), CUDA
//! (driver, GPUs, sharing with Vulkan) and GPUDirect Storage (libcufile, nvidia-fs,
//! cufile.json, udev).

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::storage::{FrameSizes, nvidia_gpus_on_pci, pci_dir};
use super::{Check, Status, bytes, read_trim};
use crate::device::{DeviceCaps, Want, block_on, uuid_str};
use crate::gpu::{Gpu, InteropDevice, cuda_probe, device_count, driver_version};
use crate::ingest::gds::{CuFileInfo, cufile_open};
use crate::render::FrameCapacity;

/// The checks of one part, and what later parts need to know.
pub(super) struct Outcome {
    pub checks: Vec<Check>,
    /// CUDA: a driver initialised. cuFile: the driver opened.
    pub present: bool,
    /// cuFile: reads through cuFile can work (P2P, or compatibility mode allowed).
    pub usable: bool,
}

// ---------------------------------------------------------------------------------------
// Vulkan

fn loader_check() -> Check {
    // SAFETY: dlopen of the Vulkan loader; closed at once.
    let h = unsafe {
        libc::dlopen(
            c"libvulkan.so.1".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL,
        )
    };
    if h.is_null() {
        return Check::new(
            "vulkan.loader",
            Status::Fail,
            "the Vulkan loader (libvulkan.so.1) is not installed: nothing can be drawn",
        )
        .fix("install libvulkan1 and a Vulkan driver (the GPU's, or mesa-vulkan-drivers for software rendering)");
    }
    // SAFETY: handle from dlopen above.
    unsafe { libc::dlclose(h) };
    let mut icds = Vec::new();
    if let Some(v) =
        std::env::var_os("VK_DRIVER_FILES").or_else(|| std::env::var_os("VK_ICD_FILENAMES"))
    {
        icds.extend(std::env::split_paths(&v).map(|p| p.display().to_string()));
    }
    for d in [
        "/usr/share/vulkan/icd.d",
        "/etc/vulkan/icd.d",
        "/usr/local/share/vulkan/icd.d",
        "/usr/local/nvidia/share/vulkan/icd.d",
    ] {
        if let Ok(rd) = std::fs::read_dir(d) {
            let mut found: Vec<String> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path().display().to_string())
                .collect();
            found.sort();
            icds.extend(found);
        }
    }
    let check = if icds.is_empty() {
        Check::new(
            "vulkan.loader",
            Status::Fail,
            "the Vulkan loader is present but no driver (ICD) is registered",
        )
        .fix("install the GPU's Vulkan driver, or mesa-vulkan-drivers (lavapipe) for software rendering")
    } else {
        Check::new(
            "vulkan.loader",
            Status::Ok,
            format!("libvulkan.so.1; drivers: {}", icds.join(", ")),
        )
    };
    check.fact("drivers", icds)
}

/// The adapter the player opens (its instance and kind), its limits and external memory.
pub(super) fn vulkan_checks(no_device: bool, largest: Option<FrameSizes>) -> Outcome {
    let mut checks = vec![loader_check()];
    if no_device || checks[0].status == Status::Fail {
        checks.push(Check::new(
            "vulkan.adapter",
            Status::Skip,
            if no_device {
                "not opened (asked not to)"
            } else {
                "not opened: no Vulkan driver"
            },
        ));
        return Outcome {
            checks,
            present: false,
            usable: false,
        };
    }
    let want = Want::HostImport;
    let instance = crate::device::instance(&want);
    let seen: Vec<String> = block_on(instance.enumerate_adapters(wgpu::Backends::all()))
        .iter()
        .map(|a| {
            let i = a.get_info();
            format!("{} ({:?}, {:?})", i.name, i.backend, i.device_type)
        })
        .collect();
    let opened = match crate::device::open_on(instance, None, &want, "supercell doctor") {
        Ok(g) => g,
        Err(e) => {
            checks.push(
                Check::new(
                    "vulkan.adapter",
                    Status::Fail,
                    format!("no adapter could be opened: {e}"),
                )
                .fix("install a Vulkan driver: the GPU's, or mesa-vulkan-drivers (lavapipe) for software rendering")
                .fact("adapters", seen),
            );
            return Outcome {
                checks,
                present: false,
                usable: false,
            };
        }
    };
    let caps = &opened.caps;
    checks.push(adapter_check(caps, &seen, !nvidia_gpus_on_pci().is_empty()));
    let per_stage = opened.device.limits().max_storage_buffers_per_shader_stage;
    checks.push(limits_check(caps, per_stage, largest));
    checks.push(external_memory_check(caps));
    Outcome {
        checks,
        present: true,
        usable: true,
    }
}

fn adapter_check(caps: &DeviceCaps, seen: &[String], nvidia_on_pci: bool) -> Check {
    let what = format!(
        "{} ({:?}, {:?}), driver {}",
        caps.name, caps.backend, caps.device_type, caps.driver
    );
    let mut check = if caps.software {
        let fix = if nvidia_on_pci {
            "Vulkan does not see the NVIDIA GPU: install the NVIDIA Vulkan driver (nvidia_icd.json; in a container set NVIDIA_DRIVER_CAPABILITIES=all)"
        } else {
            "for full speed, a GPU with its Vulkan driver (a software adapter is for trying things out: small windows, low frame rates)"
        };
        Check::new(
            "vulkan.adapter",
            Status::Warn,
            format!("{what}: a software (CPU) rasteriser: correct but slow"),
        )
        .fix(fix)
    } else {
        Check::new("vulkan.adapter", Status::Ok, what)
    };
    if seen.len() > 1 {
        check.detail += &format!("\nadapters seen: {}", seen.join(", "));
    }
    check
        .fact("adapter", caps.name.clone())
        .fact("driver", caps.driver.clone())
        .fact("backend", format!("{:?}", caps.backend))
        .fact("device_type", format!("{:?}", caps.device_type))
        .fact("software", caps.software)
        .fact("uuid", caps.uuid.as_ref().map(uuid_str))
        .fact("adapters", seen.to_vec())
}

/// The device's limits, and whether the dataset's frames and grids fit them: the renderer
/// binds only the parts the shown grids span ([`FrameCapacity`]), so a frame needing more
/// parts than the device binds is a warning (fewer attributes are shown at once), and a
/// grid that alone may span more (or over 16 GiB) a failure.
fn limits_check(caps: &DeviceCaps, per_stage: u32, largest: Option<FrameSizes>) -> Check {
    let capacity = FrameCapacity::of(caps, per_stage);
    let mut detail = format!(
        "largest buffer {}, largest storage binding {}, largest 2D texture {} px, \
         storage offset alignment {} B, device-local memory {}, timestamps {}",
        bytes(caps.max_buffer_size),
        bytes(caps.max_storage_binding),
        caps.max_texture_2d,
        caps.storage_offset_alignment,
        caps.device_local_bytes.map_or("unknown".into(), bytes),
        if caps.timestamps {
            "yes"
        } else {
            "no (GPU times are not measured)"
        }
    );
    detail += &format!(
        "\nframes of up to {} parts of {} ({})",
        capacity.max_parts,
        bytes(capacity.part_bytes),
        bytes(capacity.max_frame_bytes())
    );
    let mut status = Status::Ok;
    let mut fixes = Vec::new();
    if let Some(l) = largest {
        detail += &format!(
            "\nthe dataset's largest frame {}, largest grid {}",
            bytes(l.slot),
            bytes(l.grid)
        );
        if capacity.parts_for(l.slot) > capacity.max_parts as u64 {
            status = Status::Warn;
            detail += &format!(
                "\nframes up to {} need {} parts of {}; this device binds {} ({}) at once: \
                 only attributes whose grids together span at most that many are shown at once \
                 (render and play refuse more, naming them)",
                bytes(l.slot),
                capacity.parts_for(l.slot),
                bytes(capacity.part_bytes),
                capacity.max_parts,
                bytes(capacity.max_frame_bytes())
            );
            fixes.push("show fewer attributes at once, write the dataset with smaller frames, or use a GPU whose driver allows larger storage bindings or more of them");
        }
        if !capacity.grid_fits(l.grid) {
            status = Status::Fail;
            detail += &format!(
                "\ngrids up to {} exceed the largest grid this device binds ({}): they cannot be drawn",
                bytes(l.grid),
                bytes(capacity.max_grid_bytes())
            );
            fixes.push("use coarser or smaller grids (fp8/fp4 grid types shrink them), or a GPU with a larger storage-binding limit");
        }
    }
    let mut check = Check::new("vulkan.limits", status, detail);
    if !fixes.is_empty() {
        check = check.fix(fixes.join("; "));
    }
    check
        .fact("max_buffer_size", caps.max_buffer_size)
        .fact("max_storage_binding", caps.max_storage_binding)
        .fact("max_texture_2d", caps.max_texture_2d)
        .fact("storage_offset_alignment", caps.storage_offset_alignment)
        .fact("device_local_bytes", caps.device_local_bytes)
        .fact("timestamps", caps.timestamps)
        .fact("part_bytes", capacity.part_bytes)
        .fact("max_parts", capacity.max_parts)
        .fact("max_frame_bytes", capacity.max_frame_bytes())
        .fact("largest_frame", largest.map(|l| l.slot))
        .fact("largest_grid", largest.map(|l| l.grid))
}

fn external_memory_check(caps: &DeviceCaps) -> Check {
    let host = match caps.host_import_alignment {
        Some(a) => format!("host memory import yes (VK_EXT_external_memory_host, alignment {a} B)"),
        None => "host memory import no".into(),
    };
    let export = match caps.sharing {
        Some(s) => format!(
            "fd export yes (VK_KHR_external_memory_fd, max allocation {}, max shared buffer {}{})",
            bytes(s.max_allocation),
            caps.max_shared_bytes().map_or("?".into(), bytes),
            if s.dedicated_only {
                ", dedicated allocations only"
            } else {
                ""
            }
        ),
        None => "fd export no".into(),
    };
    let detail = format!("{host}; {export}");
    let check = if caps.host_import_alignment.is_some() {
        Check::new("vulkan.external_memory", Status::Ok, detail)
    } else {
        Check::new("vulkan.external_memory", Status::Warn, format!("{detail}: the host path copies each frame through a staging buffer"))
            .fix("a Vulkan driver with VK_EXT_external_memory_host (NVIDIA, Mesa RADV/ANV/lavapipe) lets the GPU read host slots directly")
    };
    check
        .fact("host_import", caps.host_import_alignment.is_some())
        .fact("host_import_alignment", caps.host_import_alignment)
        .fact("fd_export", caps.sharing.is_some())
        .fact("max_shared_bytes", caps.max_shared_bytes())
        .fact(
            "export_dedicated_only",
            caps.sharing.map(|s| s.dedicated_only),
        )
}

// ---------------------------------------------------------------------------------------
// CUDA

/// The NVIDIA kernel module's version (`/proc/driver/nvidia/version`), e.g. "570.124.06".
fn nvidia_kernel_version() -> Option<String> {
    let text = read_trim("/proc/driver/nvidia/version")?;
    let line = text.lines().next()?;
    let after = line.split("Kernel Module").nth(1)?;
    after.split_whitespace().next().map(str::to_string)
}

/// `cuda.driver` from what the probe said: a missing driver is `skip` (or `fail` where an
/// NVIDIA GPU is on the PCI bus), always with the fix.
pub(super) fn driver_check(
    probe: Result<(i32, i32), String>,
    kernel: Option<String>,
    gpus: usize,
    nvidia_on_pci: usize,
) -> Check {
    match probe {
        Ok((major, minor)) => Check::new(
            "cuda.driver",
            if gpus == 0 { Status::Fail } else { Status::Ok },
            format!(
                "CUDA driver API {major}.{minor}, NVIDIA kernel module {}, {gpus} GPU(s)",
                kernel.as_deref().unwrap_or("version unknown")
            ),
        )
        .fact("cuda_version", format!("{major}.{minor}"))
        .fact("kernel_module", kernel)
        .fact("gpus", gpus),
        Err(why) => {
            let c = if nvidia_on_pci > 0 {
                Check::new(
                    "cuda.driver",
                    Status::Fail,
                    format!("no usable CUDA driver ({why}), though {nvidia_on_pci} NVIDIA GPU(s) are on the PCI bus"),
                )
                .fix("install or load the NVIDIA driver (nvidia-smi should list the GPU); in a container run with --gpus all")
            } else {
                Check::new(
                    "cuda.driver",
                    Status::Skip,
                    format!("no CUDA driver ({why}): the gds and staged engines and the player's direct path need one; the portable and cpu-only engines and the host path run without"),
                )
                .fix("on a machine with an NVIDIA GPU, install the NVIDIA driver (libcuda.so.1); nothing to do without one")
            };
            c.fact("cuda_version", Value::Null)
                .fact("kernel_module", kernel)
                .fact("gpus", 0)
        }
    }
}

/// The CUDA driver, each GPU, and whether the Vulkan device that is GPU 0 shares memory
/// with CUDA.
pub(super) fn cuda_checks(largest: Option<FrameSizes>) -> Outcome {
    let probe = cuda_probe().and_then(|()| driver_version().map_err(|e| e.to_string()));
    let present = probe.is_ok();
    let gpus = if present { device_count() } else { 0 };
    let mut checks = vec![driver_check(
        probe,
        nvidia_kernel_version(),
        gpus,
        nvidia_gpus_on_pci().len(),
    )];
    if !present {
        checks.push(Check::new(
            "cuda.vulkan_sharing",
            Status::Skip,
            "no CUDA: the player shows frames through the host path (no CUDA↔Vulkan sharing)",
        ));
        return Outcome {
            checks,
            present,
            usable: false,
        };
    }
    for i in 0..gpus {
        checks.push(match Gpu::open(i) {
            Ok(g) => gpu_check(&g),
            Err(e) => Check::new(format!("cuda.gpu.{i}"), Status::Fail, format!("GPU {i} cannot be opened: {e}"))
                .fix("check nvidia-smi for errors; the GPU may be in use exclusively or in a bad state (nvidia-smi -r)"),
        });
    }
    checks.push(sharing_check(largest));
    Outcome {
        checks,
        present,
        usable: gpus > 0,
    }
}

fn gpu_check(g: &Gpu) -> Check {
    let dir = pci_dir(&g.pci_bus_id);
    let speed = |s: &str| read_trim(dir.join(s));
    let width = |s: &str| read_trim(dir.join(s)).and_then(|w| w.parse::<u32>().ok());
    let (cur_w, max_w) = (width("current_link_width"), width("max_link_width"));
    let link = |sp: Option<String>, w: Option<u32>| match (sp, w) {
        (Some(s), Some(w)) => Some(format!("{s} x{w}")),
        _ => None,
    };
    let now = link(speed("current_link_speed"), cur_w);
    let max = link(speed("max_link_speed"), max_w);
    let numa = read_trim(dir.join("numa_node")).and_then(|s| s.parse::<i32>().ok());
    let mem = g.mem_info().ok();
    let detail = format!(
        "{} at {}, PCIe {} (max {}; idle GPUs lower the speed), NUMA node {}, memory {}",
        g.name,
        g.pci_bus_id,
        now.as_deref().unwrap_or("?"),
        max.as_deref().unwrap_or("?"),
        numa.filter(|n| *n >= 0)
            .map_or("none".into(), |n| n.to_string()),
        mem.map_or("?".into(), |(f, t)| format!(
            "{} free of {}",
            bytes(f as u64),
            bytes(t as u64)
        ))
    );
    let narrow = matches!((cur_w, max_w), (Some(c), Some(m)) if c < m);
    let c = if narrow {
        Check::new(
            format!("cuda.gpu.{}", g.ordinal),
            Status::Warn,
            format!("{detail}\nthe link runs narrower than it can: less bandwidth to the GPU"),
        )
        .fix("reseat the GPU in a full-width slot, or check the slot's lane sharing in the BIOS")
    } else {
        Check::new(format!("cuda.gpu.{}", g.ordinal), Status::Ok, detail)
    };
    c.fact("name", g.name.clone())
        .fact("pci_bus_id", g.pci_bus_id.clone())
        .fact("link", now)
        .fact("max_link", max)
        .fact("numa_node", numa)
        .fact("memory_free", mem.map(|m| m.0 as u64))
        .fact("memory_total", mem.map(|m| m.1 as u64))
}

/// Whether a frame of `slot` bytes fits in shared parts: each no larger than the largest
/// shared buffer `max_shared` (each part is its own allocation; the renderer binds only the
/// parts the shown grids span, which [`limits_check`] judges).
fn shared_frame_fits(capacity: FrameCapacity, max_shared: u64, slot: u64) -> bool {
    let part = capacity.part_bytes.min(slot.div_ceil(4) * 4);
    part <= max_shared
}

fn sharing_check(largest: Option<FrameSizes>) -> Check {
    let opened = Gpu::open(0)
        .map_err(|e| format!("CUDA GPU 0: {e}"))
        .and_then(|g| InteropDevice::open(&g).map_err(|e| e.to_string()));
    match opened {
        Ok(dev) => {
            let max = dev.max_shared_bytes();
            // A shared slot is one exported allocation per part, each a part of the
            // renderer's size: a frame fits where its parts do and each part does.
            let capacity = FrameCapacity::of(
                &dev.caps,
                dev.device.limits().max_storage_buffers_per_shader_stage,
            );
            let mut c = Check::new(
                "cuda.vulkan_sharing",
                Status::Ok,
                format!(
                    "GPU 0 and Vulkan share memory: {} (the player's direct path works)",
                    dev.describe()
                ),
            );
            if let Some(l) = largest.filter(|l| !shared_frame_fits(capacity, max, l.slot)) {
                c.status = Status::Fail;
                c.detail += &format!(
                    "\nframes up to {} need {} shared parts of {}: this device shares buffers \
                     of up to {}",
                    bytes(l.slot),
                    capacity.parts_for(l.slot),
                    bytes(capacity.part_bytes),
                    bytes(max)
                );
                c = c.fix("write the dataset with smaller frames; the player's host path is not limited by this");
            }
            c.fact("max_shared_bytes", max)
                .fact("adapter", dev.caps.name.clone())
                .fact("driver", dev.caps.driver.clone())
        }
        Err(e) => Check::new(
            "cuda.vulkan_sharing",
            Status::Fail,
            format!("GPU 0 cannot share memory with Vulkan: {e}; the player falls back to the host path"),
        )
        .fix("install the NVIDIA Vulkan driver of the same version as the kernel module (nvidia_icd.json), so Vulkan sees the GPU with VK_KHR_external_memory_fd"),
    }
}

// ---------------------------------------------------------------------------------------
// GPUDirect Storage

/// The `cufile.json` in force: `$CUFILE_ENV_PATH_JSON`, else /etc/cufile.json.
pub fn cufile_json_path() -> PathBuf {
    std::env::var_os("CUFILE_ENV_PATH_JSON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/cufile.json"))
}

/// Parses a `cufile.json` as cuFile does: `//` and `/* */` comments and trailing commas
/// are allowed (the shipped file has both kinds of comment). The error names the line and
/// column.
pub fn parse_cufile_json(text: &str) -> Result<Value, String> {
    // Comments become spaces (newlines kept) so serde_json's line:column still point into
    // the original text.
    let b: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut in_str = false;
    while i < b.len() {
        let c = b[i];
        if in_str {
            out.push(c);
            if c == '\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == '"' {
                in_str = false;
            }
            i += 1;
            continue;
        }
        match (c, b.get(i + 1)) {
            ('"', _) => {
                in_str = true;
                out.push(c);
                i += 1;
            }
            ('/', Some('/')) => {
                while i < b.len() && b[i] != '\n' {
                    out.push(' ');
                    i += 1;
                }
            }
            ('/', Some('*')) => {
                out.push_str("  ");
                i += 2;
                while i < b.len() && !(b[i] == '*' && b.get(i + 1) == Some(&'/')) {
                    out.push(if b[i] == '\n' { '\n' } else { ' ' });
                    i += 1;
                }
                out.push_str("  ");
                i = (i + 2).min(b.len());
            }
            (',', _) => {
                // A trailing comma before } or ] (after blanks or comments) is dropped.
                let mut j = i + 1;
                loop {
                    while j < b.len() && b[j].is_whitespace() {
                        j += 1;
                    }
                    if b.get(j) == Some(&'/') && b.get(j + 1) == Some(&'/') {
                        while j < b.len() && b[j] != '\n' {
                            j += 1;
                        }
                    } else if b.get(j) == Some(&'/') && b.get(j + 1) == Some(&'*') {
                        j += 2;
                        while j < b.len() && !(b[j] == '*' && b.get(j + 1) == Some(&'/')) {
                            j += 1;
                        }
                        j += 2;
                    } else {
                        break;
                    }
                }
                out.push(if matches!(b.get(j), Some('}' | ']')) {
                    ' '
                } else {
                    ','
                });
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    serde_json::from_str(&out).map_err(|e| format!("not valid JSON: {e}"))
}

/// The knobs of a `cufile.json` that matter to supercell's reads, where set.
const KNOBS: &[&str] = &[
    "properties.allow_compat_mode",
    "properties.use_pci_p2pdma",
    "properties.use_poll_mode",
    "properties.poll_mode_max_size_kb",
    "properties.max_direct_io_size_kb",
    "properties.max_device_cache_size_kb",
    "properties.max_device_pinned_mem_size_kb",
    "properties.io_batchsize",
    "properties.gds_rdma_write_support",
    "properties.rdma_dev_addr_list",
    "properties.rdma_load_balancing_policy",
    "properties.rdma_dynamic_routing",
    "properties.rdma_dynamic_routing_order",
    "execution.parallel_io",
    "execution.max_io_threads",
    "execution.max_io_queue_depth",
    "execution.max_request_parallelism",
    "execution.min_io_threshold_size_kb",
    "logging.level",
    "profile.cufile_stats",
    "profile.nvtx",
];

/// A parsed `cufile.json`: the knobs that matter and what is wrong with them.
#[derive(Clone, Debug, PartialEq)]
pub struct CufileJson {
    /// The knobs set in the file (dotted key → value).
    pub knobs: Map<String, Value>,
    /// Problems: status, what, fix.
    pub problems: Vec<(Status, String, String)>,
}

impl CufileJson {
    /// Reads the knobs of `v` and judges them; `p2p`: whether cuFile can read without
    /// host memory here (`None`: not known).
    pub fn judge(v: &Value, p2p: Option<bool>) -> CufileJson {
        let mut knobs = Map::new();
        for k in KNOBS {
            let mut cur = Some(v);
            for part in k.split('.') {
                cur = cur.and_then(|c| c.get(part));
            }
            if let Some(x) = cur {
                knobs.insert((*k).to_string(), x.clone());
            }
        }
        let mut problems = Vec::new();
        let get = |k: &str| knobs.get(k);
        if get("properties.allow_compat_mode") == Some(&Value::Bool(false)) && p2p == Some(false) {
            problems.push((
                Status::Fail,
                "allow_compat_mode is false and there is no P2P here: every cuFile read fails"
                    .into(),
                "set properties.allow_compat_mode to true, or load nvidia-fs".into(),
            ));
        }
        if let Some(kb) = get("properties.max_direct_io_size_kb").and_then(Value::as_u64)
            && kb < 1024
        {
            problems.push((
                Status::Warn,
                format!(
                    "max_direct_io_size_kb is {kb}: cuFile splits reads into pieces this small"
                ),
                "set properties.max_direct_io_size_kb to 16384 (the default)".into(),
            ));
        }
        if let Some(level) = get("logging.level").and_then(Value::as_str)
            && matches!(level.to_ascii_uppercase().as_str(), "DEBUG" | "TRACE")
        {
            problems.push((
                Status::Warn,
                format!("logging.level is {level}: every read is logged, which slows I/O"),
                "set logging.level to \"ERROR\"".into(),
            ));
        }
        if let Some(n) = get("profile.cufile_stats").and_then(Value::as_u64)
            && n >= 3
        {
            problems.push((
                Status::Warn,
                format!("profile.cufile_stats is {n}: per-I/O histograms cost time"),
                "set profile.cufile_stats to 0 (or 1) outside profiling runs".into(),
            ));
        }
        if get("properties.use_pci_p2pdma") == Some(&Value::Bool(true)) && p2p == Some(false) {
            problems.push((
                Status::Warn,
                "use_pci_p2pdma is true but the driver offers no P2PDMA here".into(),
                "P2PDMA needs a kernel with PCI P2PDMA for NVMe (6.2+, CONFIG_PCI_P2PDMA) and an open NVIDIA kernel module; otherwise load nvidia-fs".into(),
            ));
        }
        CufileJson { knobs, problems }
    }
}

fn cufile_json_check(path: &Path, present: bool, p2p: Option<bool>) -> Check {
    let name = "cufile.json";
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => {
            let c = if present {
                Check::new(
                    name,
                    Status::Warn,
                    format!("{} cannot be read ({e}): cuFile uses its built-in defaults", path.display()),
                )
                .fix("copy the shipped example (/usr/local/cuda/gds/cufile.json) to /etc/cufile.json, or point CUFILE_ENV_PATH_JSON at one")
            } else {
                Check::new(
                    name,
                    Status::Skip,
                    format!("{} not found (no cuFile here)", path.display()),
                )
            };
            return c.fact("path", path.display().to_string());
        }
    };
    let v = match parse_cufile_json(&text) {
        Ok(v) => v,
        Err(e) => {
            return Check::new(name, if present { Status::Fail } else { Status::Warn }, format!("{}: {e}", path.display()))
                .fix(format!("correct the JSON of {} at the place named (comments and trailing commas are allowed)", path.display()))
                .fact("path", path.display().to_string());
        }
    };
    let j = CufileJson::judge(&v, p2p);
    let mut lines = vec![path.display().to_string()];
    lines.extend(j.knobs.iter().map(|(k, v)| format!("{k} = {v}")));
    let status = j.problems.iter().map(|p| p.0).max().unwrap_or(if present {
        Status::Ok
    } else {
        Status::Skip
    });
    lines.extend(j.problems.iter().map(|p| p.1.clone()));
    let mut c = Check::new(name, status, lines.join("\n"));
    if !j.problems.is_empty() {
        c = c.fix(
            j.problems
                .iter()
                .map(|p| p.2.as_str())
                .collect::<Vec<_>>()
                .join("; "),
        );
    }
    c.fact("path", path.display().to_string())
        .fact("knobs", Value::Object(j.knobs))
}

/// libcufile's version as x.y.z (it reports 1150 for 1.15.0).
fn cufile_version(v: i32) -> String {
    format!("{}.{}.{}", v / 1000, (v % 1000) / 10, v % 10)
}

/// What cuFile's mode is, in one word: `p2p` (nvidia-fs), `p2pdma-advertised` (the driver
/// advertises PCI P2PDMA; whether reads use it shows only in the live counters) or
/// `compat` (reads bounce through host memory).
pub(super) fn cufile_mode(i: &CuFileInfo) -> &'static str {
    if i.nvfs_loaded {
        "p2p"
    } else if i.pci_p2pdma {
        "p2pdma-advertised"
    } else {
        "compat"
    }
}

fn library_check(opened: &Result<CuFileInfo, String>) -> Check {
    let name = "cufile.library";
    match opened {
        Ok(i) => {
            let version = i.version.map(cufile_version);
            let mode = cufile_mode(i);
            let head = format!(
                "libcufile {}; {}; compatibility mode {}",
                version.as_deref().unwrap_or("(version unknown)"),
                i.mode_text(),
                if i.compat_allowed { "allowed" } else { "not allowed" }
            );
            let c = match (mode, i.compat_allowed) {
                ("compat", false) => Check::new(name, Status::Fail, format!("{head}: without P2P and without compatibility mode every cuFile read fails"))
                    .fix("load nvidia-fs (sudo modprobe nvidia-fs), or set properties.allow_compat_mode to true in cufile.json"),
                ("compat", true) => Check::new(name, Status::Warn, format!("{head}: the gds engine works, but no faster than staged"))
                    .fix("for GPUDirect reads load nvidia-fs (sudo modprobe nvidia-fs, from the nvidia-gds package); until then prefer --engine staged"),
                _ => Check::new(name, Status::Ok, head),
            };
            c.fact("version", version)
                .fact("version_code", i.version)
                .fact("mode", mode)
                .fact("compat_allowed", i.compat_allowed)
                .fact("pci_p2pdma_advertised", i.pci_p2pdma)
                .fact("nvidia_fs_version", format!("{}.{}", i.nvfs_version.0, i.nvfs_version.1))
                .fact("status_flags", i.status_flags)
                .fact("max_direct_io_size", i.max_direct_io_size as u64)
        }
        Err(e) if e.contains("not installed") => Check::new(
            name,
            Status::Warn,
            format!("{e}: the gds engine falls back to staged"),
        )
        .fix("install GPUDirect Storage (the nvidia-gds package of your CUDA version) for the gds engine")
        .fact("mode", Value::Null),
        Err(e) => Check::new(name, Status::Fail, format!("{e}: the gds engine falls back to staged"))
            .fix("run /usr/local/cuda/gds/tools/gdscheck -p and read cufile.log in the working directory")
            .fact("mode", Value::Null),
    }
}

fn nvidia_fs_check(cufile: Option<&CuFileInfo>) -> Check {
    let version = read_trim("/proc/driver/nvidia-fs/version");
    let in_modules = std::fs::read_to_string("/proc/modules")
        .map(|m| m.lines().any(|l| l.starts_with("nvidia_fs ")))
        .unwrap_or(false);
    let loaded = version.is_some() || in_modules;
    let c = if loaded {
        let stats = read_trim("/proc/driver/nvidia-fs/stats").unwrap_or_default();
        let head: Vec<&str> = stats.lines().take(4).collect();
        let mut d = format!(
            "loaded: {}",
            version.as_deref().unwrap_or("version unknown")
        );
        if !head.is_empty() {
            d += &format!("\n{}", head.join("\n"));
        }
        Check::new("nvidia_fs", Status::Ok, d)
    } else {
        match cufile {
            None => Check::new(
                "nvidia_fs",
                Status::Skip,
                "not loaded (no cuFile here to use it)",
            ),
            Some(i) if i.pci_p2pdma => Check::new(
                "nvidia_fs",
                Status::Ok,
                "not loaded; cuFile advertises PCI P2PDMA instead",
            ),
            Some(_) => Check::new(
                "nvidia_fs",
                Status::Warn,
                "not loaded: cuFile reads bounce through host memory (compatibility mode)",
            )
            .fix("sudo modprobe nvidia-fs (from the nvidia-gds package; the module must match the NVIDIA driver)"),
        }
    };
    c.fact("loaded", loaded).fact("version", version)
}

fn udev_check(cufile_present: bool) -> Check {
    let present = Path::new("/run/udev/data").is_dir();
    let c = if present {
        Check::new("udev", Status::Ok, "/run/udev/data present")
    } else if cufile_present {
        Check::new("udev", Status::Warn, "/run/udev/data is absent: cuFile cannot identify block devices (cuFileHandleRegister fails with 5027)")
            .fix("run udevd, or in a container bind-mount /run/udev from the host (read-only)")
    } else {
        Check::new(
            "udev",
            Status::Skip,
            "/run/udev/data is absent (only cuFile needs it)",
        )
    };
    c.fact("database", present)
}

/// libcufile, nvidia-fs, cufile.json and udev. cuFile is opened only where CUDA works.
pub(super) fn cufile_checks(cuda_present: bool) -> Outcome {
    let path = cufile_json_path();
    if !cuda_present {
        return Outcome {
            checks: vec![
                Check::new(
                    "cufile.library",
                    Status::Skip,
                    "not checked: no CUDA driver (GPUDirect Storage needs one)",
                )
                .fact("mode", Value::Null),
                nvidia_fs_check(None),
                cufile_json_check(&path, false, None),
                udev_check(false),
            ],
            present: false,
            usable: false,
        };
    }
    let opened = cufile_open();
    let info = opened.as_ref().ok();
    let usable = info.is_some_and(|i| i.p2p() || i.compat_allowed);
    Outcome {
        checks: vec![
            library_check(&opened),
            nvidia_fs_check(info),
            cufile_json_check(&path, info.is_some(), info.map(CuFileInfo::p2p)),
            udev_check(info.is_some()),
        ],
        present: info.is_some(),
        usable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn cufile_json_with_comments_and_trailing_commas() {
        let text = r#"{
            // a comment
            /* a block
               comment */
            "logging": { "level": "ERROR" },
            "properties": {
                "allow_compat_mode": true, // inline
                "max_direct_io_size_kb": 16384, /* trailing */
                "rdma_dev_addr_list": [ "192.168.0.1", ],
            },
            "fs": { "url": "http://x//y" }
        }"#;
        let v = parse_cufile_json(text).unwrap();
        assert_eq!(v["fs"]["url"], "http://x//y", "// inside strings is kept");
        let j = CufileJson::judge(&v, Some(false));
        assert_eq!(j.knobs["properties.allow_compat_mode"], true);
        assert_eq!(j.knobs["logging.level"], "ERROR");
        assert_eq!(
            j.knobs["properties.rdma_dev_addr_list"],
            json!(["192.168.0.1"])
        );
        assert!(j.problems.is_empty(), "{:?}", j.problems);
        let e = parse_cufile_json("{\n  \"a\": 1\n  \"b\": 2\n}").unwrap_err();
        assert!(e.contains("line 3"), "{e}");
    }

    #[test]
    fn cufile_knobs_that_break_or_slow_reads_are_named_with_fixes() {
        let v = json!({
            "properties": { "allow_compat_mode": false, "max_direct_io_size_kb": 256 },
            "logging": { "level": "TRACE" }
        });
        let j = CufileJson::judge(&v, Some(false));
        assert_eq!(j.problems.len(), 3, "{:?}", j.problems);
        assert_eq!(j.problems[0].0, Status::Fail);
        assert!(j.problems[0].2.contains("allow_compat_mode"));
        // With P2P, compatibility mode is not needed.
        let j = CufileJson::judge(&v, Some(true));
        assert!(j.problems.iter().all(|p| p.0 == Status::Warn));
    }

    #[test]
    fn a_missing_cuda_is_skipped_with_a_fix_or_failed_where_a_gpu_is_on_the_bus() {
        let c = driver_check(Err("libcuda.so is not installed".into()), None, 0, 0);
        assert_eq!(c.status, Status::Skip);
        assert!(c.fix.is_some() && c.detail.contains("libcuda.so"), "{c:?}");
        assert_eq!(c.facts["gpus"], 0);
        let c = driver_check(Err("cuInit failed".into()), None, 0, 2);
        assert_eq!(c.status, Status::Fail);
        assert!(c.fix.as_deref().unwrap().contains("NVIDIA driver"), "{c:?}");
        let c = driver_check(Ok((12, 8)), Some("570.124.06".into()), 1, 1);
        assert_eq!(c.status, Status::Ok);
        assert_eq!(c.facts["cuda_version"], "12.8");
        assert!(c.detail.contains("570.124.06"));
    }

    fn lavapipe_like_caps() -> DeviceCaps {
        DeviceCaps {
            name: "llvmpipe (LLVM 19.1.7, 256 bits)".into(),
            driver: "llvmpipe Mesa 25.0.7".into(),
            backend: wgpu::Backend::Vulkan,
            device_type: wgpu::DeviceType::Cpu,
            software: true,
            timestamps: true,
            max_buffer_size: 2 << 30,
            max_storage_binding: 128 << 20,
            storage_offset_alignment: 32,
            max_texture_2d: 16384,
            host_import_alignment: None,
            uuid: None,
            sharing: None,
            device_local_bytes: Some(2 << 30),
        }
    }

    /// Frames and grids are judged by parts: a frame fits where it needs no more parts than
    /// the device binds (frames and grids larger than one buffer or binding included), and
    /// past that fails with the fix.
    #[test]
    fn limits_are_compared_with_the_dataset() {
        let caps = lavapipe_like_caps();
        // Mesa 22.3's lavapipe: 32 storage buffers per stage, 26 parts of 128 MiB.
        let per_stage = 32;
        let fits = FrameSizes {
            slot: 64 << 20,
            grid: 32 << 20,
        };
        assert_eq!(
            limits_check(&caps, per_stage, Some(fits)).status,
            Status::Ok
        );
        // Larger than the largest buffer (2 GiB) and binding (128 MiB), within 26 parts.
        let over_one_buffer = FrameSizes {
            slot: 3 << 30,
            grid: 3 << 30,
        };
        let c = limits_check(&caps, per_stage, Some(over_one_buffer));
        assert_eq!(c.status, Status::Ok, "{c:?}");
        assert_eq!(c.facts["max_parts"], 26);
        assert_eq!(c.facts["max_frame_bytes"], 26u64 << 27);
        // With the fewest storage buffers a device is opened with, 8 parts (1 GiB).
        let c = limits_check(&caps, 14, Some(over_one_buffer));
        assert_eq!(c.status, Status::Fail);
        assert!(
            c.detail.contains("need 24 parts") && c.detail.contains("grids up to"),
            "{c:?}"
        );
        let big = FrameSizes {
            slot: 4 << 30,
            grid: 256 << 20,
        };
        // A frame over the 26 parts bound, of grids that fit: fewer attributes shown at once.
        let c = limits_check(&caps, per_stage, Some(big));
        assert_eq!(c.status, Status::Warn);
        assert!(
            c.detail.contains("need 32 parts")
                && c.detail.contains("binds 26 (")
                && !c.detail.contains("grids up to")
                && c.fix.is_some(),
            "{c:?}"
        );
        assert_eq!(c.facts["largest_grid"], 256u64 << 20);
        // A GPU with 4 GiB bindings and many storage buffers per stage: 64 parts of 2 GiB,
        // grids up to 16 GiB.
        let h200 = DeviceCaps {
            max_buffer_size: 4_292_870_144,
            max_storage_binding: 4_292_870_144,
            ..lavapipe_like_caps()
        };
        let seven_gb = FrameSizes {
            slot: 7_007_526_912,
            grid: 7_007_526_912,
        };
        assert_eq!(
            limits_check(&h200, 1 << 20, Some(seven_gb)).status,
            Status::Ok
        );
        let huge_grid = FrameSizes {
            slot: 17 << 30,
            grid: 17 << 30,
        };
        let c = limits_check(&h200, 1 << 20, Some(huge_grid));
        assert!(
            c.status == Status::Fail && c.detail.contains("grids up to"),
            "{c:?}"
        );
        // Shared slots: parts of 2 GiB within 4 GiB shared buffers hold a 7 GB frame; a
        // device sharing only 1 GiB buffers cannot hold 2 GiB parts.
        let cap = FrameCapacity::of(&h200, 1 << 20);
        assert!(shared_frame_fits(cap, 4 << 30, 7_007_526_912));
        assert!(!shared_frame_fits(cap, 1 << 30, 7_007_526_912));
        assert!(shared_frame_fits(cap, 1 << 30, 64 << 20));
        // Each part is its own shared allocation: a frame of more parts than are bound fits.
        assert!(shared_frame_fits(cap, 4 << 30, 200 << 30));
        // A grid fits where, wherever it starts in a part, it spans no more parts than
        // are bound (and has at most 16 GiB).
        let lavapipe = FrameCapacity::of(&caps, per_stage);
        assert!(lavapipe.grid_fits(25 << 27));
        assert!(lavapipe.grid_fits((25 << 27) + 4));
        assert!(!lavapipe.grid_fits((25 << 27) + 8));
        assert!(!cap.grid_fits((16 << 30) + 4));
        let c = adapter_check(&caps, &[], false);
        assert_eq!(
            (c.status, &c.facts["software"]),
            (Status::Warn, &json!(true))
        );
        let c = external_memory_check(&caps);
        assert_eq!(c.status, Status::Warn);
        assert_eq!(c.facts["fd_export"], false);
    }

    #[test]
    fn cufile_modes_never_claim_p2p_without_nvidia_fs_or_p2pdma() {
        let mut i = CuFileInfo {
            version: Some(1150),
            nvfs_version: (0, 0),
            nvfs_loaded: false,
            pci_p2pdma: false,
            compat_allowed: true,
            status_flags: 0,
            max_direct_io_size: 16 << 20,
        };
        assert_eq!(cufile_mode(&i), "compat");
        let c = library_check(&Ok(i.clone()));
        assert_eq!(c.status, Status::Warn);
        assert_eq!(c.facts["mode"], "compat");
        assert_eq!(c.facts["version"], "1.15.0");
        i.compat_allowed = false;
        assert_eq!(library_check(&Ok(i.clone())).status, Status::Fail);
        i.pci_p2pdma = true;
        assert_eq!(cufile_mode(&i), "p2pdma-advertised");
        i.nvfs_loaded = true;
        assert_eq!(cufile_mode(&i), "p2p");
        assert_eq!(library_check(&Ok(i)).status, Status::Ok);
        let c = library_check(&Err(
            "libcufile.so (GPUDirect Storage) is not installed or not on the loader path".into(),
        ));
        assert_eq!(c.status, Status::Warn);
        assert!(c.fix.is_some());
    }
}
