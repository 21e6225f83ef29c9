//! GPUDirect Storage through cuFile: the library probe, the live mode (true P2P through
//! nvidia-fs or PCI P2PDMA, or compatibility mode through host bounce buffers), file and
//! buffer registration, and the read hook the I/O pool calls.
//!
//! cuFile is reached through its C ABI with our own function-pointer types (looked up in
//! the library cudarc loads), not cudarc's typed wrappers: those return error structs made
//! of Rust enums, and a code the enum does not list (a newer libcufile) would be undefined
//! behaviour, while a missing symbol would panic. Here every code is a plain integer and a
//! missing symbol is an error message.

use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, OnceLock};

use cudarc::cufile::sys as cf;

use super::error::{IngestError, Result};
use super::files::OpenFiles;
use super::io::{DeviceRead, OnStart};
use crate::gpu::{Gpu, PartMemory, SlotMemory};

/// `CUfileError_t` with its fields as plain integers.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct RawErr {
    err: c_uint,
    cu_err: c_uint,
}

/// `CUfileDescr_t` for a file descriptor.
#[repr(C)]
struct RawDescr {
    type_: c_uint,
    handle: RawHandleUnion,
    fs_ops: *const c_void,
}

#[repr(C)]
union RawHandleUnion {
    fd: c_int,
    handle: *mut c_void,
}

const CU_FILE_HANDLE_TYPE_OPAQUE_FD: c_uint = 1;

struct Api {
    driver_open: unsafe extern "C" fn() -> RawErr,
    driver_close: Option<unsafe extern "C" fn() -> RawErr>,
    get_version: Option<unsafe extern "C" fn(*mut c_int) -> RawErr>,
    get_properties: unsafe extern "C" fn(*mut c_void) -> RawErr,
    handle_register: unsafe extern "C" fn(*mut *mut c_void, *mut RawDescr) -> RawErr,
    handle_deregister: unsafe extern "C" fn(*mut c_void),
    buf_register: unsafe extern "C" fn(*const c_void, usize, c_int) -> RawErr,
    buf_deregister: unsafe extern "C" fn(*const c_void) -> RawErr,
    read: unsafe extern "C" fn(*mut c_void, *mut c_void, usize, i64, i64) -> isize,
    set_stats_level: Option<unsafe extern "C" fn(c_int) -> RawErr>,
    stats_start: Option<unsafe extern "C" fn() -> RawErr>,
    get_stats_l3: Option<unsafe extern "C" fn(*mut c_void) -> RawErr>,
}

fn api() -> std::result::Result<&'static Api, String> {
    static API: OnceLock<std::result::Result<Api, String>> = OnceLock::new();
    API.get_or_init(|| {
        // SAFETY: only tries to dlopen libcufile.
        if !unsafe { cf::is_culib_present() } {
            return Err(
                "libcufile.so (GPUDirect Storage) is not installed or not on the loader path"
                    .into(),
            );
        }
        // SAFETY: present (checked), so culib() does not panic.
        let lib = unsafe { cf::culib() };
        macro_rules! sym {
            ($name:literal) => {
                // SAFETY: the types mirror cufile.h's prototypes.
                *unsafe { lib.get($name) }.map_err(|e| format!("libcufile lacks {}: {e}", $name))?
            };
        }
        macro_rules! opt {
            ($name:literal) => {
                // SAFETY: as above.
                unsafe { lib.get($name) }.ok().map(|s| *s)
            };
        }
        Ok(Api {
            driver_open: sym!("cuFileDriverOpen"),
            driver_close: opt!("cuFileDriverClose_v2").or(opt!("cuFileDriverClose")),
            get_version: opt!("cuFileGetVersion"),
            get_properties: sym!("cuFileDriverGetProperties"),
            handle_register: sym!("cuFileHandleRegister"),
            handle_deregister: sym!("cuFileHandleDeregister"),
            buf_register: sym!("cuFileBufRegister"),
            buf_deregister: sym!("cuFileBufDeregister"),
            read: sym!("cuFileRead"),
            set_stats_level: opt!("cuFileSetStatsLevel"),
            stats_start: opt!("cuFileStatsStart"),
            get_stats_l3: opt!("cuFileGetStatsL3"),
        })
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The cuFile error a `cufile` fault rule makes a read return: CU_FILE_NVFS_DRIVER_ERROR.
pub const INJECTED_CUFILE_ERROR: u32 = 5010;

/// The name of a cuFile error code (cufile.h's `CUfileOpError`).
pub fn op_error_name(code: u32) -> &'static str {
    match code {
        0 => "CU_FILE_SUCCESS",
        5001 => "CU_FILE_DRIVER_NOT_INITIALIZED",
        5002 => "CU_FILE_DRIVER_INVALID_PROPS",
        5003 => "CU_FILE_DRIVER_UNSUPPORTED_LIMIT",
        5004 => "CU_FILE_DRIVER_VERSION_MISMATCH",
        5005 => "CU_FILE_DRIVER_VERSION_READ_ERROR",
        5006 => "CU_FILE_DRIVER_CLOSING",
        5007 => "CU_FILE_PLATFORM_NOT_SUPPORTED",
        5008 => "CU_FILE_IO_NOT_SUPPORTED",
        5009 => "CU_FILE_DEVICE_NOT_SUPPORTED",
        5010 => "CU_FILE_NVFS_DRIVER_ERROR",
        5011 => "CU_FILE_CUDA_DRIVER_ERROR",
        5012 => "CU_FILE_CUDA_POINTER_INVALID",
        5013 => "CU_FILE_CUDA_MEMORY_TYPE_INVALID",
        5014 => "CU_FILE_CUDA_POINTER_RANGE_ERROR",
        5015 => "CU_FILE_CUDA_CONTEXT_MISMATCH",
        5016 => "CU_FILE_INVALID_MAPPING_SIZE",
        5017 => "CU_FILE_INVALID_MAPPING_RANGE",
        5018 => "CU_FILE_INVALID_FILE_TYPE",
        5019 => "CU_FILE_INVALID_FILE_OPEN_FLAG",
        5020 => "CU_FILE_DIO_NOT_SET",
        5022 => "CU_FILE_INVALID_VALUE",
        5023 => "CU_FILE_MEMORY_ALREADY_REGISTERED",
        5024 => "CU_FILE_MEMORY_NOT_REGISTERED",
        5025 => "CU_FILE_PERMISSION_DENIED",
        5026 => "CU_FILE_DRIVER_ALREADY_OPEN",
        5027 => "CU_FILE_HANDLE_NOT_REGISTERED",
        5028 => "CU_FILE_HANDLE_ALREADY_REGISTERED",
        5029 => "CU_FILE_DEVICE_NOT_FOUND",
        5030 => "CU_FILE_INTERNAL_ERROR",
        5031 => "CU_FILE_GETNEWFD_FAILED",
        5033 => "CU_FILE_NVFS_SETUP_ERROR",
        5034 => "CU_FILE_IO_DISABLED",
        5035 => "CU_FILE_BATCH_SUBMIT_FAILED",
        5036 => "CU_FILE_GPU_MEMORY_PINNING_FAILED",
        5037 => "CU_FILE_BATCH_FULL",
        5038 => "CU_FILE_ASYNC_NOT_SUPPORTED",
        5043 => "CU_FILE_NOMEM_ERROR",
        5044 => "CU_FILE_IO_ERROR",
        5045 => "CU_FILE_INTERNAL_BUF_REGISTER_ERROR",
        5047 => "CU_FILE_INVALID_CONTEXT_ERROR",
        5048 => "CU_FILE_NVFS_INTERNAL_DRIVER_ERROR",
        _ => "unknown cuFile error",
    }
}

fn err_text(e: RawErr) -> String {
    if e.err == 5011 {
        format!(
            "{} ({}; CUDA error {})",
            op_error_name(e.err),
            e.err,
            e.cu_err
        )
    } else {
        format!("{} ({})", op_error_name(e.err), e.err)
    }
}

fn ok(e: RawErr, what: &str) -> std::result::Result<(), String> {
    if e.err == 0 {
        Ok(())
    } else {
        Err(format!("{what}: {}", err_text(e)))
    }
}

/// The file system type of `path` (from statfs), e.g. "ext4", "tmpfs".
pub fn fs_type(path: &std::path::Path) -> Option<&'static str> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    // SAFETY: statfs writes one struct; `c` is a valid C string.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above: one struct written, `c` NUL-terminated and alive.
    if unsafe { libc::statfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    Some(match st.f_type as i64 {
        0xEF53 => "ext4",
        0x5846_5342 => "xfs",
        0x0102_1994 => "tmpfs",
        0x794c_7630 => "overlayfs",
        0x9123_683E => "btrfs",
        0x6969 => "nfs",
        0x6573_5546 => "fuse",
        0x0BD0_0BD0 => "lustre",
        0x858458f6 => "ramfs",
        0x5346_544e => "ntfs",
        0x2fc1_2fc1 => "zfs",
        0x4244 => "hfs",
        _ => "other",
    })
}

/// What cuFile says about itself: library version, nvidia-fs, P2P support and mode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CuFileInfo {
    /// libcufile version as the library reports it (e.g. 1150 for 1.15.0), if it says.
    pub version: Option<i32>,
    /// nvidia-fs version the driver reports (0.0 when the module is absent).
    pub nvfs_version: (u32, u32),
    /// Whether the nvidia-fs kernel module is loaded (/proc/driver/nvidia-fs).
    pub nvfs_loaded: bool,
    /// Whether cuFile reports PCI P2PDMA support for NVMe (no nvidia-fs needed).
    pub pci_p2pdma: bool,
    /// Whether compatibility mode is allowed (cufile.json `allow_compat_mode`).
    pub compat_allowed: bool,
    /// Driver status flags (`CUfileDriverStatusFlags` bits).
    pub status_flags: u32,
    /// Maximum direct I/O size, bytes.
    pub max_direct_io_size: usize,
}

impl CuFileInfo {
    /// Whether reads can go storage → GPU without host memory.
    pub fn p2p(&self) -> bool {
        self.nvfs_loaded || self.pci_p2pdma
    }

    /// The mode in words, as reports show it.
    pub fn mode_text(&self) -> String {
        if self.nvfs_loaded {
            format!(
                "cuFile P2P (nvidia-fs {}.{})",
                self.nvfs_version.0, self.nvfs_version.1
            )
        } else if self.pci_p2pdma {
            "cuFile with PCI P2PDMA advertised (the live counters show whether reads were P2P)"
                .into()
        } else {
            "cuFile compatibility mode (no nvidia-fs, no PCI P2PDMA: reads bounce through host memory)".into()
        }
    }
}

static DRIVER: OnceLock<std::result::Result<CuFileInfo, String>> = OnceLock::new();

/// Set once the driver has been closed, so that it is closed exactly once.
static DRIVER_CLOSED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Closes the cuFile driver at process exit, before libcufile's own exit-time teardown.
///
/// The driver lives as long as the process (as KvikIO's driver singleton does): it is opened
/// once by [`cufile_open`], and this hook, registered with `atexit` right after the open,
/// closes it. Left open, libcufile tears itself down in its static destructors, and on the
/// H200 machine that crashed the process (SIGSEGV, exit status 139, after all output was
/// written) once a handle registration had failed and a run fell back to staged. Exit
/// handlers run in the reverse order of their registration, and libcufile (and libcuda,
/// which it needs) registered theirs when they were loaded, before the open: this one
/// therefore runs first, while both libraries are still whole. Every binary, test harnesses
/// included, gets this without a call of its own. By the time `exit` runs, every engine
/// has been dropped (engines join their workers when dropped), so no handle, buffer or read
/// is live.
extern "C" fn close_driver_at_exit() {
    if DRIVER_CLOSED.swap(true, std::sync::atomic::Ordering::SeqCst) {
        return;
    }
    if let Ok(Api {
        driver_close: Some(close),
        ..
    }) = api()
    {
        // SAFETY: the driver was opened by `cufile_open` (the hook is registered only after
        // a successful open) and, at exit, nothing uses it any more (see above).
        let _ = unsafe { close() };
    }
}

/// Opens the cuFile driver (once per process) and reports what it says. Never panics; the
/// error says what is missing.
pub fn cufile_open() -> std::result::Result<CuFileInfo, String> {
    DRIVER
        .get_or_init(|| {
            let api = api()?;
            // SAFETY: no arguments; cuFile needs a CUDA driver, which callers probed.
            let r = unsafe { (api.driver_open)() };
            if r.err != 0 && r.err != 5026 {
                return Err(format!(
                    "cuFileDriverOpen failed: {} (is /etc/cufile.json valid, and compat mode allowed when nvidia-fs is absent?)",
                    err_text(r)
                ));
            }
            // SAFETY: registers a plain `extern "C" fn()` with the C library; it runs once,
            // at exit.
            if unsafe { libc::atexit(close_driver_at_exit) } != 0 {
                // Without the hook the driver would be left to libcufile's own teardown:
                // close it now and use no cuFile in this process rather than risk that.
                close_driver_at_exit();
                return Err("cannot register the cuFile driver's exit hook (atexit failed)".into());
            }
            let mut version = None;
            if let Some(gv) = api.get_version {
                let mut v: c_int = 0;
                // SAFETY: writes one int.
                if unsafe { gv(&mut v) }.err == 0 {
                    version = Some(v);
                }
            }
            // Oversized buffer: a newer library with a larger struct cannot overrun it.
            let mut buf = vec![0u64; 64];
            // SAFETY: writes a CUfileDrvProps_t (well under 512 bytes).
            ok(unsafe { (api.get_properties)(buf.as_mut_ptr().cast()) }, "cuFileDriverGetProperties")?;
            // SAFETY: the buffer is larger than the struct and 8-byte aligned; every field
            // is an integer, so any bit pattern is valid.
            let props: cf::CUfileDrvProps = unsafe { std::ptr::read(buf.as_ptr().cast()) };
            let flags = props.nvfs.dstatusflags;
            let control = props.nvfs.dcontrolflags;
            Ok(CuFileInfo {
                version,
                nvfs_version: (props.nvfs.major_version, props.nvfs.minor_version),
                nvfs_loaded: std::path::Path::new("/proc/driver/nvidia-fs").exists(),
                // CU_FILE_NVME_P2P_SUPPORTED = bit 11 (cufile.h, CUDA 12.8+).
                pci_p2pdma: flags & (1 << 11) != 0,
                // CU_FILE_ALLOW_COMPAT_MODE = bit 1 of the control flags.
                compat_allowed: control & (1 << 1) != 0,
                status_flags: flags,
                max_direct_io_size: props.nvfs.max_direct_io_size,
            })
        })
        .clone()
}

/// cuFile's per-GPU read counters: what actually happened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CuFileStats {
    /// Bytes cuFile read.
    pub read_bytes: u64,
    /// Reads done peer to peer (storage → GPU).
    pub p2p_reads: u64,
    /// Reads through nvidia-fs.
    pub nvfs_reads: u64,
    /// Reads through POSIX (compatibility mode: host bounce buffers).
    pub posix_reads: u64,
    /// Failed reads.
    pub read_errors: u64,
}

impl CuFileStats {
    /// The mode the counters show.
    pub fn live_mode(&self) -> &'static str {
        if self.p2p_reads + self.nvfs_reads > 0 && self.posix_reads == 0 {
            "P2P"
        } else if self.posix_reads > 0 && self.p2p_reads + self.nvfs_reads == 0 {
            "compatibility (POSIX)"
        } else if self.posix_reads > 0 {
            "mixed P2P and POSIX"
        } else {
            "no reads counted"
        }
    }
}

/// Reads cuFile's level-3 statistics summed over GPUs (`None` if the library does not
/// offer them or statistics are off).
pub fn read_stats() -> Option<CuFileStats> {
    let api = api().ok()?;
    let get = api.get_stats_l3?;
    // Oversized, zeroed, 8-byte aligned buffer for CUfileStatsLevel3_t.
    let words = std::mem::size_of::<cf::CUfileStatsLevel3_t>() / 8 + 512;
    let mut buf = vec![0u64; words];
    // SAFETY: writes one CUfileStatsLevel3_t into a larger buffer.
    if unsafe { get(buf.as_mut_ptr().cast()) }.err != 0 {
        return None;
    }
    // SAFETY: integers and byte arrays only: any bit pattern is valid.
    let s: cf::CUfileStatsLevel3_t = unsafe { std::ptr::read(buf.as_ptr().cast()) };
    let n = (s.num_gpus as usize).min(s.per_gpu_stats.len());
    let mut out = CuFileStats {
        read_bytes: s.detailed.basic.read_bytes,
        ..CuFileStats::default()
    };
    for g in &s.per_gpu_stats[..n] {
        out.p2p_reads += g.n_p2p_reads;
        out.nvfs_reads += g.n_nvfs_reads;
        out.posix_reads += g.n_posix_reads;
        out.read_errors += g.n_reads_err;
    }
    Some(out)
}

/// Why cuFile refused a file, in words that say what to fix.
fn explain_handle_error(code: u32, path: &std::path::Path) -> String {
    let fs = fs_type(path).unwrap_or("unknown");
    let why = match code {
        5027 | 5029 | 5009 => format!(
            "cuFile cannot identify the block device under it (file system {fs}); without \
             udev (containers, VMs) write a udev record for the device in /run/udev/data \
             (scripts/rig/lanes.sh does), and tmpfs/overlayfs are never supported"
        ),
        5008 | 5018 | 5007 => format!(
            "cuFile does not support this file system ({fs}); use ext4 or xfs on a block device"
        ),
        5019 | 5020 => "the file is not open with O_DIRECT".into(),
        5034 | 5010 | 5033 => "nvidia-fs is absent and compatibility mode is disabled in cufile.json (set properties.allow_compat_mode to true)".into(),
        5025 => "permission denied".into(),
        _ => format!("file system {fs}"),
    };
    format!(
        "cuFileHandleRegister refused {}: {} [{}]",
        path.display(),
        why,
        op_error_name(code)
    )
}

/// cuFile state of a GDS engine: registered files and slot buffers. Deregisters on drop
/// (after the engine's workers have stopped).
pub(crate) struct GdsState {
    gpu: Gpu,
    info: CuFileInfo,
    handles: Vec<usize>,
    bufs: Vec<u64>,
    /// What the user should know (unregistered buffers).
    pub(crate) notes: Vec<String>,
}

impl GdsState {
    pub(crate) fn new(gpu: &Gpu, files: &OpenFiles, slots: &[Arc<SlotMemory>]) -> Result<GdsState> {
        let info = cufile_open().map_err(IngestError::Unavailable)?;
        let api = api().map_err(IngestError::Unavailable)?;
        gpu.bind()?;
        // Ask for per-GPU statistics: they show which path cuFile really took.
        if let (Some(level), Some(start)) = (api.set_stats_level, api.stats_start) {
            // SAFETY: plain calls; failures only mean no statistics.
            unsafe {
                let _ = level(3);
                let _ = start();
            }
        }
        let mut st = GdsState {
            gpu: gpu.clone(),
            info,
            handles: Vec::with_capacity(files.files.len()),
            bufs: Vec::new(),
            notes: Vec::new(),
        };
        for f in &files.files {
            if !f.direct {
                return Err(IngestError::Unavailable(format!(
                    "{} cannot be opened with O_DIRECT, which cuFile needs",
                    f.path.display()
                )));
            }
            let mut d = RawDescr {
                type_: CU_FILE_HANDLE_TYPE_OPAQUE_FD,
                handle: RawHandleUnion { fd: f.fd() },
                fs_ops: std::ptr::null(),
            };
            let mut h: *mut c_void = std::ptr::null_mut();
            // SAFETY: `d` describes an open descriptor that outlives the handle (the
            // engine drops this state before its files).
            let r = unsafe { (api.handle_register)(&mut h, &mut d) };
            if r.err != 0 {
                // `st` deregisters what was registered so far when dropped.
                return Err(IngestError::Unavailable(explain_handle_error(
                    r.err, &f.path,
                )));
            }
            st.handles.push(h as usize);
        }
        for part in slots.iter().flat_map(|s| s.parts()) {
            if let PartMemory::Device(d) = part {
                // Each part of a slot is its own allocation, registered on its own.
                // Length in BYTES (cudarc's safe wrapper passes an element count here).
                // SAFETY: a live device allocation of `len` bytes in the current context.
                let r = unsafe { (api.buf_register)(d.ptr() as *const c_void, d.len(), 0) };
                if r.err != 0 {
                    // Unregistered buffers still work: cuFile then stages through its own
                    // bounce buffers. Say so rather than fail or pretend.
                    st.notes.push(format!(
                        "cuFileBufRegister of a {}-byte slot part failed ({}): cuFile reads through its internal bounce buffers (check max_device_pinned_mem_size_kb in cufile.json)",
                        d.len(),
                        err_text(r)
                    ));
                    continue;
                }
                st.bufs.push(d.ptr());
            }
        }
        Ok(st)
    }

    pub(crate) fn handle(&self, file: usize) -> usize {
        self.handles[file]
    }

    pub(crate) fn mode_text(&self) -> String {
        self.info.mode_text()
    }

    pub(crate) fn on_start(&self) -> OnStart {
        let gpu = self.gpu.clone();
        Arc::new(move || gpu.bind().map_err(|e| e.to_string()))
    }

    /// The device-read hook: reads with cuFile into a registered slot. Its last argument
    /// makes the call fail with [`INJECTED_CUFILE_ERROR`] instead (a `cufile` fault rule).
    pub(crate) fn device_read(&self) -> DeviceRead {
        Arc::new(|handle, base, dev_offset, file_offset, len, inject| {
            let api = api()?;
            let mut done = 0usize;
            while done < len {
                let n = if inject {
                    // A fault plan's `cufile` rule: cuFileRead's answer is an error code,
                    // handled below like a real one.
                    -(INJECTED_CUFILE_ERROR as isize)
                } else {
                    // SAFETY: `handle` is registered for an open file; `base` is a registered
                    // device buffer (a slot part) and `dev_offset + len` lies inside it (checked at
                    // submit; the plan cuts reads at part boundaries).
                    unsafe {
                        (api.read)(
                            handle as *mut c_void,
                            base as *mut c_void,
                            len - done,
                            (file_offset + done as u64) as i64,
                            (dev_offset + done as u64) as i64,
                        )
                    }
                };
                if n > 0 {
                    done += n as usize;
                } else if n == 0 {
                    return Err(format!(
                        "cuFileRead: unexpected end of file after {done} of {len} bytes"
                    ));
                } else if n == -1 {
                    let e = std::io::Error::last_os_error();
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        return Err(format!("cuFileRead: {e}"));
                    }
                } else {
                    let code = n.unsigned_abs() as u32;
                    let what = format!("cuFileRead: {} ({code})", op_error_name(code));
                    return Err(if inject {
                        super::faults::injected(&what)
                    } else {
                        what
                    });
                }
            }
            Ok(())
        })
    }
}

impl Drop for GdsState {
    fn drop(&mut self) {
        let Ok(api) = api() else {
            return;
        };
        let _ = self.gpu.bind();
        for &b in &self.bufs {
            // SAFETY: registered in `new`; no read targets it any more.
            let _ = unsafe { (api.buf_deregister)(b as *const c_void) };
        }
        for &h in &self.handles {
            // SAFETY: registered in `new`; no read uses it any more.
            unsafe { (api.handle_deregister)(h as *mut c_void) };
        }
    }
}
