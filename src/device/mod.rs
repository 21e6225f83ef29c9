//! Opening GPU devices, in one place, and what an opened device can do.
//!
//! - [`open`] / [`open_on`]: a wgpu device of the kind asked for ([`Want`]): plain, with host
//!   memory import (`VK_EXT_external_memory_host`), or the Vulkan device that *is* a CUDA
//!   GPU with memory export (`VK_KHR_external_memory_fd`). Every kind gets the adapter's own
//!   limits (the full storage-binding size) and timestamp queries where the adapter has them.
//! - [`DeviceCaps`]: everything the renderer, the frame ring, the overlay and `doctor` ask of
//!   a device, probed once: adapter, limits, host import, CUDA sharing, memory heaps.
//! - [`private_runtime_dir`]: a private `XDG_RUNTIME_DIR` for the binary to set before the
//!   first instance (the Vulkan loader's drivers complain without one).
//! - [`read_buffer`] / [`map_read`]: the one way bytes come back from the GPU; [`block_on`]
//!   for wgpu's futures.
//!
//! This module knows wgpu and Vulkan only: CUDA identifies its GPU by UUID, which
//! [`Want::CudaShared`] carries.

mod readback;
mod runtime_dir;
pub mod vulkan;

/// A 2-D texture of one mip level and one sample, `size` texels of `format`.
pub fn texture_2d(
    device: &wgpu::Device,
    label: &str,
    (width, height): (u32, u32),
    format: wgpu::TextureFormat,
    usage: wgpu::TextureUsages,
) -> wgpu::Texture {
    device.create_texture(&wgpu::TextureDescriptor {
        label: Some(label),
        size: wgpu::Extent3d {
            width,
            height,
            depth_or_array_layers: 1,
        },
        mip_level_count: 1,
        sample_count: 1,
        dimension: wgpu::TextureDimension::D2,
        format,
        usage,
        view_formats: &[],
    })
}

pub use readback::{
    ReadbackError, TextureReadback, block_on, map_read, padded_row_bytes, read_buffer,
};
pub use runtime_dir::{RUNTIME_DIR_VAR, private_runtime_dir, runtime_dir_problem};

use wgpu::hal::api::Vulkan;

/// The kind of device to open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// Any adapter (the high-performance one first), a plain device.
    Plain,
    /// As [`Want::Plain`], with `VK_EXT_external_memory_host` where a Vulkan adapter has it
    /// (the host path's GPU copies then read the host slots themselves); other adapters get
    /// a plain device.
    HostImport,
    /// The Vulkan adapter whose device UUID is `uuid` (a CUDA GPU's), with
    /// `VK_KHR_external_memory_fd` (and host import where available).
    CudaShared {
        /// The GPU's device UUID (`cuDeviceGetUuid`).
        uuid: [u8; 16],
        /// How to name the GPU in errors, e.g. "0 (NVIDIA H200)".
        name: String,
    },
    /// The first Vulkan adapter that can export memory, whatever its UUID (checks of the
    /// Vulkan half of sharing on machines without CUDA).
    AnyExporter,
}

impl Want {
    fn shares(&self) -> bool {
        matches!(self, Want::CudaShared { .. } | Want::AnyExporter)
    }
}

/// Why no device of the kind asked for could be opened.
#[derive(Debug, thiserror::Error)]
pub enum DeviceError {
    /// No adapter (wgpu's message).
    #[error("{0}")]
    NoAdapter(String),
    /// No usable Vulkan adapter for sharing.
    #[error("{0}")]
    NoVulkan(String),
    /// Vulkan works, but none of its adapters has the UUID asked for.
    #[error("no Vulkan adapter is GPU {gpu} (UUID {uuid}); Vulkan sees {seen}")]
    NoMatchingAdapter {
        /// The GPU asked for ([`Want::CudaShared`]'s name).
        gpu: String,
        /// Its UUID.
        uuid: String,
        /// The Vulkan adapters found, with their UUIDs.
        seen: String,
    },
    /// The adapter lacks an extension or capability the kind needs.
    #[error("the Vulkan driver of {adapter} does not support {what}")]
    Unsupported {
        /// The adapter's name.
        adapter: String,
        /// The missing extension or capability.
        what: String,
    },
    /// The adapter refused the device (wgpu's or Vulkan's message).
    #[error("{0}")]
    Device(String),
}

/// What a device offers memory shared with CUDA.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SharingCaps {
    /// `maxMemoryAllocationSize` (Vulkan 1.1), the largest allocation the driver promises
    /// (a soft limit: NVIDIA reports 4 GiB and allocates more).
    pub max_allocation: u64,
    /// `maxBufferSize` (Vulkan 1.3 / maintenance4), the hard limit of a `VkBuffer`'s size;
    /// `None` where the device does not report it.
    pub max_buffer: Option<u64>,
    /// Whether exportable buffers need a dedicated allocation.
    pub dedicated_only: bool,
}

/// What one opened device can do, probed once when it is opened ([`DeviceCaps::of`]).
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceCaps {
    /// Adapter name, e.g. "NVIDIA H200" or "llvmpipe (LLVM 19.1.7, 256 bits)".
    pub name: String,
    /// Driver name and version, e.g. "NVIDIA 570.124.06" or "llvmpipe Mesa 25.0.7".
    pub driver: String,
    /// Backend.
    pub backend: wgpu::Backend,
    /// Device type (`Cpu` for software rasterisers).
    pub device_type: wgpu::DeviceType,
    /// A software adapter (lavapipe/llvmpipe, SwiftShader, WARP): correct but slow.
    pub software: bool,
    /// Whether the device was opened with timestamp queries.
    pub timestamps: bool,
    /// Largest buffer wgpu creates, bytes.
    pub max_buffer_size: u64,
    /// Largest storage-buffer binding, bytes.
    pub max_storage_binding: u64,
    /// Alignment of storage-binding offsets, bytes.
    pub storage_offset_alignment: u32,
    /// Largest 2D texture edge, pixels.
    pub max_texture_2d: u32,
    /// `minImportedHostPointerAlignment` where host memory can be imported (the device has
    /// `VK_EXT_external_memory_host`); `None`: it cannot.
    pub host_import_alignment: Option<u64>,
    /// Vulkan device UUID (Vulkan 1.1).
    pub uuid: Option<[u8; 16]>,
    /// Memory sharing with CUDA, where the device has `VK_KHR_external_memory_fd` enabled
    /// (wgpu enables it by itself where the driver has it; [`Want::CudaShared`] insists) and
    /// storage-buffer memory can be exported.
    pub sharing: Option<SharingCaps>,
    /// Size of the device-local memory heaps, bytes (Vulkan; the GPU's memory, or the
    /// host's for software adapters).
    pub device_local_bytes: Option<u64>,
}

impl DeviceCaps {
    /// Probes `device` (the adapter it came from, its limits, features and Vulkan
    /// extensions).
    pub fn of(device: &wgpu::Device) -> DeviceCaps {
        let info = device.adapter_info();
        let limits = device.limits();
        let vk = vulkan::caps(device);
        let lower = info.name.to_ascii_lowercase();
        let software = info.device_type == wgpu::DeviceType::Cpu
            || ["llvmpipe", "lavapipe", "swiftshader", "warp"]
                .iter()
                .any(|s| lower.contains(s));
        DeviceCaps {
            driver: format!("{} {}", info.driver, info.driver_info)
                .trim()
                .to_string(),
            name: info.name,
            backend: info.backend,
            device_type: info.device_type,
            software,
            timestamps: device.features().contains(wgpu::Features::TIMESTAMP_QUERY),
            max_buffer_size: limits.max_buffer_size,
            max_storage_binding: limits.max_storage_buffer_binding_size,
            storage_offset_alignment: limits.min_storage_buffer_offset_alignment,
            max_texture_2d: limits.max_texture_dimension_2d,
            host_import_alignment: vk.as_ref().and_then(|v| v.host_import_alignment),
            uuid: vk.as_ref().and_then(|v| v.uuid),
            sharing: vk.as_ref().and_then(|v| v.sharing),
            device_local_bytes: vk.map(|v| v.device_local_bytes),
        }
    }

    /// "name (backend, device type)".
    pub fn describe(&self) -> String {
        format!("{} ({:?}, {:?})", self.name, self.backend, self.device_type)
    }

    /// The largest buffer shared with CUDA: Vulkan's `maxBufferSize` where the device
    /// reports it (Vulkan 1.3), else wgpu's `max_buffer_size`. wgpu caps its own limit at
    /// `maxMemoryAllocationSize`, a soft limit (NVIDIA reports 4 GiB and allocates more), so
    /// shared buffers may be larger than buffers wgpu creates. `None`: no sharing.
    pub fn max_shared_bytes(&self) -> Option<u64> {
        self.sharing
            .map(|s| s.max_buffer.unwrap_or(self.max_buffer_size))
    }
}

/// An opened device: wgpu's objects and what the device can do.
pub struct GpuDevice {
    /// The instance (surfaces are created from it).
    pub instance: wgpu::Instance,
    /// The adapter.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// What it can do.
    pub caps: DeviceCaps,
}

impl std::fmt::Debug for GpuDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GpuDevice")
            .field("caps", &self.caps)
            .finish()
    }
}

/// A new instance with every backend compiled in (Vulkan only for the sharing kinds), the
/// environment's overrides honoured (e.g. `WGPU_ADAPTER_NAME`, `WGPU_BACKEND`).
pub fn instance(want: &Want) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle().with_env();
    if want.shares() {
        desc.backends = wgpu::Backends::VULKAN;
    }
    wgpu::Instance::new(desc)
}

/// Opens a device of the kind `want` on a new [`instance`]; `label` names it in wgpu's
/// messages.
pub fn open(want: &Want, label: &str) -> Result<GpuDevice, DeviceError> {
    open_on(instance(want), None, want, label)
}

/// Opens a device of the kind `want` on `instance`. For [`Want::Plain`] and
/// [`Want::HostImport`] the adapter must be able to present to `surface` when one is given;
/// the sharing kinds pick their adapter by what it can share and ignore `surface` (make the
/// surface from the returned instance).
pub fn open_on(
    instance: wgpu::Instance,
    surface: Option<&wgpu::Surface<'_>>,
    want: &Want,
    label: &str,
) -> Result<GpuDevice, DeviceError> {
    let (adapter, device, queue) = match want {
        Want::Plain | Want::HostImport => {
            let adapter = block_on(instance.request_adapter(&wgpu::RequestAdapterOptions {
                power_preference: wgpu::PowerPreference::HighPerformance,
                force_fallback_adapter: false,
                compatible_surface: surface,
                apply_limit_buckets: false,
            }))
            .map_err(|e| DeviceError::NoAdapter(e.to_string()))?;
            let (device, queue) = open_adapter(&adapter, want == &Want::HostImport, label)?;
            (adapter, device, queue)
        }
        Want::CudaShared { .. } | Want::AnyExporter => open_sharing(&instance, want, label)?,
    };
    let caps = DeviceCaps::of(&device);
    Ok(GpuDevice {
        instance,
        adapter,
        device,
        queue,
        caps,
    })
}

/// A device of the kind [`Want::Plain`] or [`Want::HostImport`] (`host_import`) on
/// `adapter`, an adapter of `instance` the caller chose (e.g. one GPU of several).
pub fn open_chosen(
    instance: wgpu::Instance,
    adapter: wgpu::Adapter,
    host_import: bool,
    label: &str,
) -> Result<GpuDevice, DeviceError> {
    let (device, queue) = open_adapter(&adapter, host_import, label)?;
    let caps = DeviceCaps::of(&device);
    Ok(GpuDevice {
        instance,
        adapter,
        device,
        queue,
        caps,
    })
}

/// Storage buffers per shader stage every device is opened with at least: the renderer
/// reads a frame through 8 storage bindings ("parts") beside 6 buffers of its own, more than
/// WebGPU's default of 8.
pub const MIN_STORAGE_BUFFERS_PER_STAGE: u32 = 14;

/// Refuses an adapter that cannot bind [`MIN_STORAGE_BUFFERS_PER_STAGE`] storage buffers
/// in one shader stage, naming it and what it offers.
fn check_adapter_limits(adapter: &wgpu::Adapter) -> Result<(), DeviceError> {
    let offered = adapter.limits().max_storage_buffers_per_shader_stage;
    if offered < MIN_STORAGE_BUFFERS_PER_STAGE {
        return Err(DeviceError::Unsupported {
            adapter: adapter.get_info().name,
            what: format!(
                "{MIN_STORAGE_BUFFERS_PER_STAGE} storage buffers per shader stage (it offers \
                 {offered}; the renderer binds a frame as at least 8 parts beside its own buffers)"
            ),
        });
    }
    Ok(())
}

/// What every kind asks of its adapter: its own limits (big grids need the real
/// storage-binding limit, not WebGPU's default, and the renderer more storage buffers per
/// stage than WebGPU's 8: at least [`MIN_STORAGE_BUFFERS_PER_STAGE`], checked by
/// [`check_adapter_limits`]) and timestamps where it has them.
fn descriptor<'a>(adapter: &wgpu::Adapter, label: &'a str) -> wgpu::DeviceDescriptor<'a> {
    wgpu::DeviceDescriptor {
        label: Some(label),
        required_features: adapter.features() & wgpu::Features::TIMESTAMP_QUERY,
        required_limits: adapter.limits(),
        experimental_features: wgpu::ExperimentalFeatures::disabled(),
        memory_hints: wgpu::MemoryHints::Performance,
        trace: wgpu::Trace::Off,
    }
}

/// A plain device on `adapter`, or with host import where `host_import` and the adapter
/// has it (should that device be refused, a plain one).
fn open_adapter(
    adapter: &wgpu::Adapter,
    host_import: bool,
    label: &str,
) -> Result<(wgpu::Device, wgpu::Queue), DeviceError> {
    check_adapter_limits(adapter)?;
    let desc = descriptor(adapter, label);
    if host_import {
        // SAFETY: the guard is used only in this block, before wgpu sees the device.
        if let Some(hal) = unsafe { adapter.as_hal::<Vulkan>() } {
            let mut extensions = Vec::new();
            if vulkan::enable_if_supported(&hal, &mut extensions, vulkan::HOST_IMPORT)
                && let Ok(opened) =
                    // SAFETY: `hal` is this adapter's; the extension is supported (checked).
                    unsafe { vulkan::open_with_extensions(adapter, &hal, &desc, extensions) }
            {
                return Ok(opened);
            }
        }
    }
    block_on(adapter.request_device(&desc)).map_err(|e| DeviceError::Device(e.to_string()))
}

/// A UUID as 8-4-4-4-12 hex digits (as `nvidia-smi -L` prints it).
pub fn uuid_str(u: &[u8; 16]) -> String {
    let h: String = u.iter().map(|b| format!("{b:02x}")).collect();
    format!(
        "{}-{}-{}-{}-{}",
        &h[..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..]
    )
}

/// The sharing kinds: the Vulkan adapter with the UUID asked for (or the first that can
/// export memory), opened with memory export.
fn open_sharing(
    instance: &wgpu::Instance,
    want: &Want,
    label: &str,
) -> Result<(wgpu::Adapter, wgpu::Device, wgpu::Queue), DeviceError> {
    let adapters = block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
    if adapters.is_empty() {
        return Err(DeviceError::NoVulkan(
            "the Vulkan loader found no adapter".into(),
        ));
    }
    let mut seen = Vec::new();
    let mut last_unsupported = None;
    for adapter in adapters {
        let name = adapter.get_info().name;
        // SAFETY: only reads the hal adapter's handles.
        let uuid = match unsafe { adapter.as_hal::<Vulkan>() } {
            Some(hal) => vulkan::adapter_uuid(&hal),
            None => continue,
        };
        let Some(uuid) = uuid else {
            seen.push(format!("{name} (Vulkan 1.0: no device UUID)"));
            continue;
        };
        seen.push(format!("{name} ({})", uuid_str(&uuid)));
        match want {
            Want::CudaShared { uuid: w, .. } if *w != uuid => continue,
            Want::CudaShared { .. } => {
                let (device, queue) = open_exporter(&adapter, label)?;
                return Ok((adapter, device, queue));
            }
            _ => match open_exporter(&adapter, label) {
                Ok((device, queue)) => return Ok((adapter, device, queue)),
                Err(e @ DeviceError::Unsupported { .. }) => last_unsupported = Some(e),
                Err(e) => return Err(e),
            },
        }
    }
    if let Some(e) = last_unsupported {
        return Err(e);
    }
    match want {
        Want::CudaShared { uuid, name } => Err(DeviceError::NoMatchingAdapter {
            gpu: name.clone(),
            uuid: uuid_str(uuid),
            seen: if seen.is_empty() {
                "no Vulkan adapter".into()
            } else {
                seen.join(", ")
            },
        }),
        _ => Err(DeviceError::NoVulkan(format!(
            "no Vulkan 1.1 adapter (found {})",
            seen.join(", ")
        ))),
    }
}

/// A device on `adapter` with `VK_KHR_external_memory_fd` (and host import where the
/// adapter has it), or which capability is missing.
fn open_exporter(
    adapter: &wgpu::Adapter,
    label: &str,
) -> Result<(wgpu::Device, wgpu::Queue), DeviceError> {
    let info = adapter.get_info();
    let unsupported = |what: &str| DeviceError::Unsupported {
        adapter: info.name.clone(),
        what: what.into(),
    };
    check_adapter_limits(adapter)?;
    let desc = descriptor(adapter, label);
    let (device, queue) = {
        // SAFETY: the guard is only used in this block, before wgpu sees the device.
        let hal = unsafe { adapter.as_hal::<Vulkan>() }
            .ok_or_else(|| DeviceError::NoVulkan(format!("{} is not Vulkan", info.name)))?;
        let caps = hal.physical_device_capabilities();
        if caps.properties().api_version < ash::vk::API_VERSION_1_1 {
            // Core in 1.1; only as an extension before (and then also needs the instance
            // extension, which wgpu does not enable: refuse).
            return Err(unsupported("Vulkan 1.1 (VK_KHR_external_memory)"));
        }
        let mut extensions = Vec::new();
        if !vulkan::enable_if_supported(&hal, &mut extensions, vulkan::EXTERNAL_FD) {
            return Err(unsupported("VK_KHR_external_memory_fd"));
        }
        // The host path's slots are imported too, where the driver can.
        vulkan::enable_if_supported(&hal, &mut extensions, vulkan::HOST_IMPORT);
        if !vulkan::can_export(&hal) {
            return Err(unsupported(
                "exporting storage-buffer memory as an opaque file descriptor",
            ));
        }
        // SAFETY: `hal` is this adapter's; every extension is supported (checked above).
        unsafe { vulkan::open_with_extensions(adapter, &hal, &desc, extensions) }
            .map_err(DeviceError::Device)?
    };
    // SAFETY: handles are read only while the guard lives.
    let enabled = unsafe { device.as_hal::<Vulkan>() }.is_some_and(|hal| {
        hal.enabled_device_extensions()
            .contains(&vulkan::EXTERNAL_FD)
    });
    if !enabled {
        return Err(unsupported(
            "VK_KHR_external_memory_fd (not enabled on the device)",
        ));
    }
    Ok((device, queue))
}

/// A buffer of `size` bytes for `usage`, not mapped at creation.
pub fn buffer(
    device: &wgpu::Device,
    label: &str,
    size: u64,
    usage: wgpu::BufferUsages,
) -> wgpu::Buffer {
    device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size,
        usage,
        mapped_at_creation: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use wgpu::util::DeviceExt;

    /// A device of kind `want`, or `None` (printed) where there is no adapter and
    /// `SUPERCELL_REQUIRE_GPU` is unset.
    fn opened(want: &Want) -> Option<GpuDevice> {
        match open(want, "device test") {
            Ok(g) => Some(g),
            Err(e) => {
                if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                    panic!("no device ({e}) and SUPERCELL_REQUIRE_GPU is set");
                }
                eprintln!("skipping: no device ({e})");
                None
            }
        }
    }

    /// The capabilities say what the device itself says, and a plain device offers no host
    /// import or sharing.
    #[test]
    fn caps_agree_with_the_device() {
        let Some(g) = opened(&Want::Plain) else {
            return;
        };
        let (l, info) = (g.device.limits(), g.adapter.get_info());
        let c = &g.caps;
        eprintln!("{c:?}");
        assert_eq!(c.name, info.name);
        assert_eq!((c.backend, c.device_type), (info.backend, info.device_type));
        assert_eq!(c.max_buffer_size, l.max_buffer_size);
        assert_eq!(c.max_storage_binding, l.max_storage_buffer_binding_size);
        assert_eq!(c.max_texture_2d, l.max_texture_dimension_2d);
        assert_eq!(
            c.timestamps,
            g.device
                .features()
                .contains(wgpu::Features::TIMESTAMP_QUERY)
        );
        // The adapter's own limits, not WebGPU's defaults: its largest binding, and all its
        // storage buffers per stage (the renderer binds as many frame parts as they allow).
        assert_eq!(
            l.max_storage_buffer_binding_size,
            g.adapter.limits().max_storage_buffer_binding_size
        );
        assert_eq!(
            l.max_storage_buffers_per_shader_stage,
            g.adapter.limits().max_storage_buffers_per_shader_stage
        );
        if info.device_type == wgpu::DeviceType::Cpu {
            assert!(c.software, "a CPU adapter is a software one");
        }
        assert_eq!(c.host_import_alignment, None, "not asked for");
        // wgpu enables memory export by itself where the driver has it; the caps say so.
        assert_eq!(
            c.max_shared_bytes(),
            c.sharing.map(|s| s.max_buffer.unwrap_or(c.max_buffer_size))
        );
        if info.backend == wgpu::Backend::Vulkan {
            assert!(c.device_local_bytes.is_some_and(|b| b > 0), "{c:?}");
        }
        assert_eq!(
            g.caps.describe(),
            format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
        );
    }

    #[test]
    fn software_adapters_are_recognised_by_name() {
        let Some(g) = opened(&Want::Plain) else {
            return;
        };
        let lower = g.caps.name.to_ascii_lowercase();
        if lower.contains("llvmpipe") || lower.contains("lavapipe") {
            assert!(g.caps.software);
        }
    }

    /// Whole buffers and sub-ranges come back byte-exact; a copy past the end is an error
    /// naming the range, not a panic.
    #[test]
    fn read_back_returns_the_bytes_and_names_a_bad_copy() {
        let Some(g) = opened(&Want::Plain) else {
            return;
        };
        let data: Vec<u8> = (0..8192u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 9) as u8)
            .collect();
        let buf = g
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("readback test"),
                contents: &data,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
            });
        assert_eq!(
            read_buffer(&g.device, &g.queue, &buf, 0, 8192).unwrap(),
            data
        );
        assert_eq!(
            read_buffer(&g.device, &g.queue, &buf, 4096 + 12, 100).unwrap(),
            data[4108..4208]
        );
        let e = read_buffer(&g.device, &g.queue, &buf, 8192 - 4, 8).unwrap_err();
        assert!(
            matches!(
                e,
                ReadbackError::Copy {
                    offset: 8188,
                    len: 8,
                    ..
                }
            ),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("copying 8 bytes at 8188: "),
            "{e}"
        );
        // The device is still usable afterwards.
        assert_eq!(
            read_buffer(&g.device, &g.queue, &buf, 0, 4).unwrap(),
            data[..4]
        );
    }

    #[test]
    fn uuids_print_like_nvidia_smi() {
        let u = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 0xff,
        ];
        assert_eq!(uuid_str(&u), "12345678-9abc-def0-0001-0203040506ff");
    }
}
