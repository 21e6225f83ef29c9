//! `supercell doctor`: what this machine offers the ingest paths, like gdscheck, and what
//! to fix. Works without a GPU (it says what is missing).

use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::gpu::{Gpu, cuda_probe, device_count, driver_version};
use crate::ingest::gds::{cufile_open, fs_type};
use crate::ingest::io_uring_probe;

/// One GPU as the doctor sees it.
#[derive(Clone, Debug, Serialize)]
pub struct GpuReport {
    /// CUDA ordinal.
    pub ordinal: usize,
    /// Name.
    pub name: String,
    /// PCI bus id.
    pub pci_bus_id: String,
    /// PCIe link now, e.g. "32.0 GT/s PCIe x16".
    pub link: Option<String>,
    /// PCIe link at best.
    pub max_link: Option<String>,
    /// NUMA node (-1: none).
    pub numa_node: Option<i32>,
    /// Free / total memory, bytes.
    pub memory: Option<(usize, usize)>,
}

/// One lane directory or file.
#[derive(Clone, Debug, Serialize)]
pub struct LaneReport {
    /// The path checked.
    pub path: PathBuf,
    /// Block device (name and major:minor).
    pub device: Option<String>,
    /// File system type.
    pub fs: Option<String>,
    /// Whether a file there opens with O_DIRECT.
    pub o_direct: Option<bool>,
    /// Whether udev has a record for the device (cuFile needs it).
    pub udev_record: Option<bool>,
}

/// Everything the doctor found.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// CUDA driver: version or why it is missing.
    pub cuda: Result<String, String>,
    /// GPUs.
    pub gpus: Vec<GpuReport>,
    /// libcufile and its driver: version and mode, or why not.
    pub cufile: Result<String, String>,
    /// Whether true P2P is possible.
    pub p2p: bool,
    /// nvidia-fs module: version and stats excerpt, or absent.
    pub nvidia_fs: Option<String>,
    /// The cufile.json in force and its key settings.
    pub cufile_json: Option<(PathBuf, Vec<(String, String)>)>,
    /// Whether /run/udev/data exists.
    pub udev: bool,
    /// io_uring: available, or why not.
    pub io_uring: Result<(), String>,
    /// Lanes checked.
    pub lanes: Vec<LaneReport>,
    /// Vulkan loader and ICDs.
    pub vulkan: Result<String, String>,
    /// What to fix.
    pub fixes: Vec<String>,
}

fn read_trim(p: impl AsRef<Path>) -> Option<String> {
    std::fs::read_to_string(p)
        .ok()
        .map(|s| s.trim().to_string())
}

fn pci_dir(bus_id: &str) -> PathBuf {
    // CUDA prints "00000000:1B:00.0" or "0000:1b:00.0"; sysfs wants "0000:1b:00.0".
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

/// The `cufile.json` in force: `$CUFILE_ENV_PATH_JSON`, else /etc/cufile.json.
pub fn cufile_json_path() -> PathBuf {
    std::env::var_os("CUFILE_ENV_PATH_JSON")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/etc/cufile.json"))
}

/// Key settings of a cufile.json (which allows `//` comments).
pub fn cufile_json_settings(text: &str) -> Result<Vec<(String, String)>, String> {
    let clean: String = text
        .lines()
        .map(|l| {
            // Strip // comments outside strings (cufile.json has no "//" inside strings
            // except URLs, which appear only in comments).
            let mut in_str = false;
            let b = l.as_bytes();
            let mut cut = l.len();
            for i in 0..b.len() {
                if b[i] == b'"' && (i == 0 || b[i - 1] != b'\\') {
                    in_str = !in_str;
                } else if !in_str && b[i] == b'/' && b.get(i + 1) == Some(&b'/') {
                    cut = i;
                    break;
                }
            }
            &l[..cut]
        })
        .collect::<Vec<_>>()
        .join("\n");
    // Trailing commas are common in hand-edited files: drop a comma (outside strings)
    // whose next non-blank character closes an object or array.
    let chars: Vec<char> = clean.chars().collect();
    let mut out = String::with_capacity(clean.len());
    let mut in_str = false;
    for (i, &c) in chars.iter().enumerate() {
        if c == '"' && (i == 0 || chars[i - 1] != '\\') {
            in_str = !in_str;
        }
        if c == ',' && !in_str {
            let next = chars[i + 1..].iter().find(|c| !c.is_whitespace());
            if matches!(next, Some('}' | ']')) {
                continue;
            }
        }
        out.push(c);
    }
    let clean = out;
    let v: serde_json::Value =
        serde_json::from_str(&clean).map_err(|e| format!("not valid JSON: {e}"))?;
    let keys = [
        "properties.allow_compat_mode",
        "properties.use_pci_p2pdma",
        "properties.max_direct_io_size_kb",
        "properties.max_device_cache_size_kb",
        "properties.max_device_pinned_mem_size_kb",
        "properties.use_poll_mode",
        "properties.io_batchsize",
        "execution.parallel_io",
        "execution.max_io_threads",
        "execution.max_io_queue_depth",
        "logging.level",
        "profile.cufile_stats",
    ];
    Ok(keys
        .iter()
        .filter_map(|k| {
            let mut cur = &v;
            for part in k.split('.') {
                cur = cur.get(part)?;
            }
            Some((k.to_string(), cur.to_string()))
        })
        .collect())
}

fn block_device(path: &Path) -> Option<(String, u32, u32)> {
    let md = std::fs::metadata(path).ok()?;
    let dev = md.dev();
    let (maj, min) = (libc::major(dev), libc::minor(dev));
    let link = std::fs::read_link(format!("/sys/dev/block/{maj}:{min}")).ok();
    let name = link
        .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| "(no block device)".into());
    Some((name, maj, min))
}

fn o_direct_ok(path: &Path) -> Option<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    let target = if path.is_dir() {
        // Any regular file in the directory; else try creating a probe file.
        std::fs::read_dir(path)
            .ok()?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.is_file())
    } else {
        Some(path.to_path_buf())
    }?;
    Some(
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(target)
            .is_ok(),
    )
}

/// Checks one lane path.
pub fn check_lane(path: &Path) -> LaneReport {
    let dev = block_device(path);
    LaneReport {
        path: path.to_path_buf(),
        device: dev.as_ref().map(|(n, a, b)| format!("{n} ({a}:{b})")),
        fs: fs_type(path).map(str::to_string),
        o_direct: o_direct_ok(path),
        udev_record: dev.map(|(_, a, b)| Path::new(&format!("/run/udev/data/b{a}:{b}")).exists()),
    }
}

fn vulkan() -> Result<String, String> {
    // SAFETY: dlopen of the Vulkan loader; closed at once.
    let h = unsafe {
        libc::dlopen(
            c"libvulkan.so.1".as_ptr(),
            libc::RTLD_NOW | libc::RTLD_LOCAL,
        )
    };
    if h.is_null() {
        return Err("the Vulkan loader (libvulkan.so.1) is not installed".into());
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
        "/usr/local/nvidia/share/vulkan/icd.d",
    ] {
        if let Ok(rd) = std::fs::read_dir(d) {
            icds.extend(
                rd.filter_map(|e| e.ok())
                    .map(|e| e.path().display().to_string()),
            );
        }
    }
    if icds.is_empty() {
        return Err("the Vulkan loader is present but no driver (ICD) is registered".into());
    }
    Ok(format!(
        "loader present; drivers: {} (adapter and CUDA memory sharing are checked by the renderer)",
        icds.join(", ")
    ))
}

/// Runs every check. `lanes` are lane directories or files to check (a dataset's lanes).
pub fn diagnose(lanes: &[PathBuf]) -> Report {
    let mut r = Report {
        cuda: cuda_probe().and_then(|()| {
            driver_version()
                .map(|(a, b)| format!("CUDA driver API {a}.{b}"))
                .map_err(|e| e.to_string())
        }),
        gpus: Vec::new(),
        cufile: Err("not checked".into()),
        p2p: false,
        nvidia_fs: None,
        cufile_json: None,
        udev: false,
        io_uring: Ok(()),
        lanes: Vec::new(),
        vulkan: Err("not checked".into()),
        fixes: Vec::new(),
    };
    if r.cuda.is_ok() {
        for i in 0..device_count() {
            match Gpu::open(i) {
                Ok(g) => {
                    let dir = pci_dir(&g.pci_bus_id);
                    let link = |s: &str, w: &str| {
                        Some(format!(
                            "{} x{}",
                            read_trim(dir.join(s))?,
                            read_trim(dir.join(w))?
                        ))
                    };
                    r.gpus.push(GpuReport {
                        ordinal: i,
                        name: g.name.clone(),
                        pci_bus_id: g.pci_bus_id.clone(),
                        link: link("current_link_speed", "current_link_width"),
                        max_link: link("max_link_speed", "max_link_width"),
                        numa_node: read_trim(dir.join("numa_node")).and_then(|s| s.parse().ok()),
                        memory: g.mem_info().ok(),
                    })
                }
                Err(e) => r.fixes.push(format!("GPU {i} cannot be opened: {e}")),
            }
        }
    } else {
        r.fixes.push("no usable CUDA driver: only the portable and cpu-only paths can run (install the NVIDIA driver for gds/staged)".into());
    }
    r.cufile = if r.cuda.is_ok() {
        cufile_open().map(|i| {
            r.p2p = i.p2p();
            let v = i
                .version
                .map_or("version unknown".into(), |v| format!("version {v}"));
            format!(
                "libcufile {v}; {}; compat mode {}",
                i.mode_text(),
                if i.compat_allowed {
                    "allowed"
                } else {
                    "NOT allowed"
                }
            )
        })
    } else {
        Err("not checked (no CUDA driver)".into())
    };
    if let Err(e) = &r.cufile
        && r.cuda.is_ok()
    {
        r.fixes.push(format!(
            "GDS unavailable: {e} — the gds path will fall back to staged"
        ));
    }
    r.nvidia_fs = read_trim("/proc/driver/nvidia-fs/version").map(|v| {
        let stats = read_trim("/proc/driver/nvidia-fs/stats").unwrap_or_default();
        let head: Vec<&str> = stats.lines().take(6).collect();
        format!("{v}; {}", head.join(" | "))
    });
    if r.nvidia_fs.is_none() && r.cufile.is_ok() && !r.p2p {
        r.fixes.push("nvidia-fs is not loaded and PCI P2PDMA is not offered: cuFile runs in compatibility mode (reads bounce through host memory); load nvidia-fs (or use a P2PDMA-capable kernel and NVMe) for true GPUDirect".into());
    }
    let jp = cufile_json_path();
    r.cufile_json = std::fs::read_to_string(&jp).ok().map(|t| {
        let settings = cufile_json_settings(&t).unwrap_or_else(|e| vec![("error".into(), e)]);
        (jp.clone(), settings)
    });
    if r.cufile.is_ok() && r.cufile_json.is_none() {
        r.fixes.push(format!(
            "{} not found: cuFile uses built-in defaults",
            jp.display()
        ));
    }
    r.udev = Path::new("/run/udev/data").is_dir();
    r.io_uring = io_uring_probe().map_err(|e| e.to_string());
    if let Err(e) = &r.io_uring {
        r.fixes.push(format!("io_uring is blocked ({e}): the staged path uses pread threads; allow io_uring in the container's seccomp profile and set kernel.io_uring_disabled=0"));
    }
    for l in lanes {
        let lr = check_lane(l);
        if lr.o_direct == Some(false) {
            r.fixes.push(format!(
                "{}: O_DIRECT is refused ({}); reads go through the page cache",
                l.display(),
                lr.fs.as_deref().unwrap_or("?")
            ));
        }
        if lr.udev_record == Some(false) && r.cufile.is_ok() {
            r.fixes.push(format!("{}: no udev record for {} — cuFileHandleRegister will fail (5027); write /run/udev/data/b<major>:<minor> (lanes.sh does)", l.display(), lr.device.as_deref().unwrap_or("its device")));
        }
        if matches!(lr.fs.as_deref(), Some("tmpfs" | "overlayfs" | "ramfs")) && r.cufile.is_ok() {
            r.fixes.push(format!(
                "{}: {} is not supported by cuFile; use ext4/xfs on a block device",
                l.display(),
                lr.fs.as_deref().unwrap_or("")
            ));
        }
        r.lanes.push(lr);
    }
    r.vulkan = vulkan();
    if let Err(e) = &r.vulkan {
        r.fixes.push(format!(
            "{e}: the renderer cannot run (install libvulkan1 and the GPU's Vulkan driver)"
        ));
    }
    r
}

/// The report as text.
pub fn text(r: &Report) -> String {
    let mut s = String::new();
    let res = |x: &Result<String, String>| match x {
        Ok(v) => v.clone(),
        Err(e) => format!("MISSING — {e}"),
    };
    let _ = writeln!(s, "CUDA driver     : {}", res(&r.cuda));
    for g in &r.gpus {
        let _ = writeln!(
            s,
            "GPU {}           : {} at {} link {} (max {}) NUMA node {} memory {}",
            g.ordinal,
            g.name,
            g.pci_bus_id,
            g.link.as_deref().unwrap_or("?"),
            g.max_link.as_deref().unwrap_or("?"),
            g.numa_node.map_or("?".into(), |n| n.to_string()),
            g.memory.map_or("?".into(), |(f, t)| format!(
                "{:.1}/{:.1} GiB free",
                f as f64 / 1073741824.0,
                t as f64 / 1073741824.0
            ))
        );
    }
    let _ = writeln!(s, "cuFile          : {}", res(&r.cufile));
    let _ = writeln!(
        s,
        "GPUDirect mode  : {}",
        if r.cufile.is_err() {
            "none (no cuFile)"
        } else if r.p2p {
            "P2P possible"
        } else {
            "compatibility mode (no P2P)"
        }
    );
    let _ = writeln!(
        s,
        "nvidia-fs       : {}",
        r.nvidia_fs.as_deref().unwrap_or("not loaded")
    );
    match &r.cufile_json {
        Some((p, kv)) => {
            let _ = writeln!(s, "cufile.json     : {}", p.display());
            for (k, v) in kv {
                let _ = writeln!(s, "    {k} = {v}");
            }
        }
        None => {
            let _ = writeln!(
                s,
                "cufile.json     : not found ({})",
                cufile_json_path().display()
            );
        }
    }
    let _ = writeln!(
        s,
        "udev database   : {}",
        if r.udev {
            "/run/udev/data present"
        } else {
            "absent (cuFile cannot identify block devices)"
        }
    );
    let _ = writeln!(
        s,
        "io_uring        : {}",
        match &r.io_uring {
            Ok(()) => "available".to_string(),
            Err(e) => format!("BLOCKED — {e}"),
        }
    );
    for l in &r.lanes {
        let _ = writeln!(
            s,
            "lane {:<10} : device {}, fs {}, O_DIRECT {}, udev record {}",
            l.path.display(),
            l.device.as_deref().unwrap_or("?"),
            l.fs.as_deref().unwrap_or("?"),
            l.o_direct.map_or("?", |b| if b { "yes" } else { "NO" }),
            l.udev_record.map_or("?", |b| if b { "yes" } else { "no" })
        );
    }
    let _ = writeln!(s, "Vulkan          : {}", res(&r.vulkan));
    if r.fixes.is_empty() {
        let _ = writeln!(s, "\nnothing to fix");
    } else {
        let _ = writeln!(s, "\nwhat to fix:");
        for f in &r.fixes {
            let _ = writeln!(s, "  - {f}");
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cufile_json_with_comments() {
        let text = r#"{
            // a comment
            "logging": { "level": "ERROR" },
            "properties": {
                "allow_compat_mode": true, // inline
                "max_direct_io_size_kb": 16384,
            },
            "fs": { "url": "http://x" }
        }"#;
        let kv = cufile_json_settings(text).unwrap();
        assert!(kv.contains(&("properties.allow_compat_mode".into(), "true".into())));
        assert!(kv.contains(&("logging.level".into(), "\"ERROR\"".into())));
        assert!(cufile_json_settings("{").is_err());
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
    }
}
