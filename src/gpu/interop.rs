//! Zero-copy CUDA↔Vulkan sharing: device memory that CUDA (cuFile, copies) writes and the
//! wgpu renderer reads, with no copy in between.
//!
//! - [`InteropDevice::open`] finds the Vulkan adapter that *is* the CUDA GPU (equal device
//!   UUIDs: `VkPhysicalDeviceIDProperties::deviceUUID` against `cuDeviceGetUuid`) and
//!   creates a wgpu device on it with `VK_KHR_external_memory_fd` enabled, the adapter's own
//!   limits (full storage-binding size) and timestamp queries where available.
//! - [`SharedBuffer::new`] allocates device-local Vulkan memory (a dedicated, exportable
//!   allocation), binds it to a `VkBuffer` that wgpu uses as an ordinary [`wgpu::Buffer`]
//!   (`STORAGE | COPY_SRC | COPY_DST`), exports it as an opaque file descriptor and imports
//!   that into CUDA, which maps it at [`SharedBuffer::cuda_ptr`]. The same bytes, two names.
//! - [`SharedBuffer::slot_memory`] makes it a frame-ring slot ([`SlotMemory::Device`] of a
//!   borrowed [`DeviceBuffer`]), so the ingest engines write frames straight into memory the
//!   shader binds with [`GridSlice`](crate::render::GridSlice).
//! - [`probe`] says whether all of this works on a machine, and why not.
//!
//! # Synchronisation contract
//!
//! Nothing here synchronises the two APIs by itself; the frame ring's states do, on the host:
//!
//! 1. **CUDA → renderer.** An engine's `Completion` with `on_gpu` set means every byte of the
//!    frame is in device memory and the CUDA work that wrote it is synchronised (stream or
//!    event waited on by the host). Only after that (slot `Ready`, taken with
//!    `FrameRing::acquire`) may the renderer bind the slot and submit work that reads it.
//!    The host-side wait orders CUDA's writes before the Vulkan submission; no Vulkan
//!    semaphore is needed because the submission happens after the wait. (Strict Vulkan
//!    would also want a queue-family ownership acquire from `VK_QUEUE_FAMILY_EXTERNAL` for
//!    an `EXCLUSIVE` buffer written outside Vulkan; wgpu has no hook for it, NVIDIA's
//!    driver does not need it for buffers, and the GPU tests check the bytes.)
//! 2. **Renderer → CUDA.** The renderer must be done with a slot (the submission that reads
//!    it complete: `device.poll(PollType::Wait { submission_index, .. })` or an
//!    `on_submitted_work_done` callback) before it calls `FrameRing::release` and the ring
//!    lets an engine overwrite the slot.
//! 3. Raw CUDA calls need the context current on the calling thread: this module binds it
//!    ([`Gpu::bind`]) before every CUDA call it makes; callers writing through
//!    [`SharedBuffer::cuda_ptr`] themselves must do the same.
//!
//! # Lifetime and teardown
//!
//! The Vulkan buffer and memory belong to a reference-counted owner held by the
//! [`SharedBuffer`] and by wgpu (through the buffer's drop callback, which runs when wgpu
//! destroys the buffer: after the last handle is gone and every submission using it is
//! done). Dropping a [`SharedBuffer`] first releases CUDA's side (`cuMemFree` of the mapped
//! pointer, then `cuDestroyExternalMemory`), then its reference to the Vulkan memory. The
//! memory is freed exactly once, when both wgpu and the [`SharedBuffer`] are done with it,
//! so never while CUDA still maps it or while a submission reads it. The exported file
//! descriptor belongs to CUDA after a successful import (it is closed here only when the
//! import fails).

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use ash::vk;
use cudarc::driver::sys;
use wgpu::hal::api::Vulkan;

use super::cuda::{Gpu, cuda_probe, driver_err};
use super::{DeviceBuffer, SlotMemory};
use crate::render::block_on;

/// What can go wrong setting up CUDA↔Vulkan sharing. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    /// CUDA cannot be used on this machine or for this GPU.
    #[error(
        "CUDA is not usable: {0} (install the NVIDIA driver, or use the portable path without sharing)"
    )]
    NoCuda(String),
    /// No Vulkan adapter at all, or the Vulkan loader/driver is too old.
    #[error(
        "no usable Vulkan adapter: {0} (install the NVIDIA Vulkan driver, e.g. libnvidia-gl, and check `vulkaninfo`)"
    )]
    NoVulkan(String),
    /// Vulkan works, but none of its adapters is the CUDA GPU.
    #[error(
        "no Vulkan adapter is CUDA GPU {gpu} (UUID {uuid}); Vulkan sees {seen}. The NVIDIA Vulkan ICD may be missing (check /usr/share/vulkan/icd.d/nvidia_icd.json and VK_ICD_FILENAMES / VK_DRIVER_FILES)"
    )]
    NoMatchingAdapter {
        /// The CUDA device, e.g. "0 (NVIDIA H200)".
        gpu: String,
        /// Its UUID.
        uuid: String,
        /// The Vulkan adapters found, with their UUIDs.
        seen: String,
    },
    /// The adapter lacks a Vulkan extension or capability sharing needs.
    #[error(
        "the Vulkan driver of {adapter} does not support {what}; CUDA sharing needs it (update the driver, or run without the direct path)"
    )]
    Unsupported {
        /// The adapter's name.
        adapter: String,
        /// The missing extension or capability.
        what: String,
    },
    /// A Vulkan call failed.
    #[error("Vulkan: {what} failed: {result}")]
    Vulkan {
        /// What was being done.
        what: String,
        /// The Vulkan result code.
        result: vk::Result,
    },
    /// wgpu refused to create the device or wrap a buffer.
    #[error("wgpu: {0}")]
    Wgpu(String),
    /// A CUDA driver call failed.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// The caller asked for something impossible (zero bytes, more than the device allows,
    /// a buffer for a different GPU).
    #[error("{0}")]
    Usage(String),
}

type IResult<T> = std::result::Result<T, InteropError>;

/// Handle type of every export here.
const HANDLE: vk::ExternalMemoryHandleTypeFlags = vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// Vulkan usage of a shared buffer; matches [`WGPU_USAGE`] (wgpu maps both storage kinds
/// to `STORAGE_BUFFER`, copies to `TRANSFER_*`).
const VK_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// wgpu usage of a shared buffer.
const WGPU_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

fn vk_err(what: impl Into<String>) -> impl FnOnce(vk::Result) -> InteropError {
    let what = what.into();
    move |result| InteropError::Vulkan { what, result }
}

fn cuda_check(r: sys::CUresult, what: &str) -> IResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(InteropError::Cuda(format!("{what}: {}", driver_err(r))))
    }
}

/// A UUID as 8-4-4-4-12 hex digits.
fn uuid_str(u: &[u8; 16]) -> String {
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

/// The CUDA device's UUID (binds the context to this thread).
fn cuda_uuid(gpu: &Gpu) -> IResult<[u8; 16]> {
    gpu.bind()
        .map_err(|e| InteropError::NoCuda(e.to_string()))?;
    let u = gpu
        .context()
        .uuid()
        .map_err(|e| InteropError::Cuda(format!("cuDeviceGetUuid: {}", driver_err(e.0))))?;
    Ok(u.bytes.map(|b| b as u8))
}

/// Raw Vulkan handles and function tables of the device wgpu created (valid while the
/// `wgpu::Device` lives; every holder keeps a `wgpu::Device` clone for that).
#[derive(Clone)]
struct VkDevice {
    device: ash::Device,
    external_fd: ash::khr::external_memory_fd::Device,
    memory: vk::PhysicalDeviceMemoryProperties,
    /// `maxMemoryAllocationSize` (Vulkan 1.1), the largest allocation the driver promises
    /// (a soft limit: NVIDIA reports 4 GiB and allocates more).
    max_allocation: u64,
    /// `maxBufferSize` (Vulkan 1.3 / maintenance4), the hard limit of a `VkBuffer`'s size;
    /// `None` where the device does not report it.
    max_buffer: Option<u64>,
    /// Whether a dedicated allocation is required for exportable buffers.
    dedicated_only: bool,
}

/// A Vulkan adapter and device that CUDA can share memory with. The public fields are an
/// ordinary wgpu instance, adapter, device and queue: build the renderer (and, for the
/// player, surfaces) on them.
pub struct InteropDevice {
    /// The wgpu instance (Vulkan backend only).
    pub instance: wgpu::Instance,
    /// The adapter whose device UUID equals the CUDA GPU's.
    pub adapter: wgpu::Adapter,
    /// The device, with `VK_KHR_external_memory_fd` enabled.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// The adapter's device UUID (equal to the CUDA GPU's when opened with [`open`](Self::open)).
    uuid: [u8; 16],
    /// CUDA ordinal this device was matched with (`None`: opened without CUDA, tests only).
    cuda_ordinal: Option<usize>,
    vk: VkDevice,
}

impl std::fmt::Debug for InteropDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

/// The device UUID of a Vulkan adapter (needs Vulkan 1.1 on instance and device).
fn adapter_uuid(hal: &wgpu::hal::vulkan::Adapter) -> Option<[u8; 16]> {
    let caps = hal.physical_device_capabilities();
    if hal.shared_instance().instance_api_version() < vk::API_VERSION_1_1
        || caps.properties().api_version < vk::API_VERSION_1_1
    {
        return None;
    }
    let mut id = vk::PhysicalDeviceIDProperties::default();
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: a valid physical device of this instance; Vulkan 1.1 checked above.
        unsafe {
            hal.shared_instance()
                .raw_instance()
                .get_physical_device_properties2(hal.raw_physical_device(), &mut p2)
        };
    }
    Some(id.device_uuid)
}

impl InteropDevice {
    /// Opens the Vulkan adapter whose `VkPhysicalDeviceIDProperties::deviceUUID` equals the
    /// CUDA device's (`cuDeviceGetUuid`), and creates a device on it with
    /// `VK_KHR_external_memory(_fd)` enabled, `adapter.limits()` (the full storage-binding
    /// size) and `TIMESTAMP_QUERY` when available.
    ///
    /// Errors name why: no CUDA, no Vulkan, no Vulkan adapter with that UUID, extension or
    /// export capability missing.
    pub fn open(gpu: &Gpu) -> Result<InteropDevice, InteropError> {
        cuda_probe().map_err(InteropError::NoCuda)?;
        let uuid = cuda_uuid(gpu)?;
        Self::open_vulkan(Some((uuid, gpu)))
    }

    /// The Vulkan half of [`open`](Self::open): with `want`, the adapter with that UUID;
    /// without (tests on machines without CUDA), the first adapter that can export memory.
    fn open_vulkan(want: Option<([u8; 16], &Gpu)>) -> IResult<InteropDevice> {
        let mut desc = wgpu::InstanceDescriptor::new_without_display_handle().with_env();
        desc.backends = wgpu::Backends::VULKAN;
        let instance = wgpu::Instance::new(desc);
        let adapters = block_on(instance.enumerate_adapters(wgpu::Backends::VULKAN));
        if adapters.is_empty() {
            return Err(InteropError::NoVulkan(
                "the Vulkan loader found no adapter".into(),
            ));
        }
        let mut seen = Vec::new();
        let mut last_unsupported = None;
        for adapter in adapters {
            let name = adapter.get_info().name;
            // SAFETY: only reads the hal adapter's handles.
            let uuid = match unsafe { adapter.as_hal::<Vulkan>() } {
                Some(hal) => adapter_uuid(&hal),
                None => continue,
            };
            let Some(uuid) = uuid else {
                seen.push(format!("{name} (Vulkan 1.0: no device UUID)"));
                continue;
            };
            seen.push(format!("{name} ({})", uuid_str(&uuid)));
            match want {
                Some((w, _)) if w != uuid => continue,
                Some(_) => return Self::open_adapter(instance, adapter, uuid, want.map(|w| w.1)),
                None => match Self::open_adapter(instance.clone(), adapter, uuid, None) {
                    Ok(d) => return Ok(d),
                    Err(e @ InteropError::Unsupported { .. }) => last_unsupported = Some(e),
                    Err(e) => return Err(e),
                },
            }
        }
        if let Some(e) = last_unsupported {
            return Err(e);
        }
        match want {
            Some((uuid, gpu)) => Err(InteropError::NoMatchingAdapter {
                gpu: format!("{} ({})", gpu.ordinal, gpu.name),
                uuid: uuid_str(&uuid),
                seen: if seen.is_empty() {
                    "no Vulkan adapter".into()
                } else {
                    seen.join(", ")
                },
            }),
            None => Err(InteropError::NoVulkan(format!(
                "no Vulkan 1.1 adapter (found {})",
                seen.join(", ")
            ))),
        }
    }

    fn open_adapter(
        instance: wgpu::Instance,
        adapter: wgpu::Adapter,
        uuid: [u8; 16],
        gpu: Option<&Gpu>,
    ) -> IResult<InteropDevice> {
        let info = adapter.get_info();
        let unsupported = |what: &str| InteropError::Unsupported {
            adapter: info.name.clone(),
            what: what.into(),
        };
        let features = adapter.features() & wgpu::Features::TIMESTAMP_QUERY;
        let limits = adapter.limits();
        let hints = wgpu::MemoryHints::Performance;
        let (open, has_m4) = {
            // SAFETY: the guard is only used in this block, before wgpu sees the device.
            let hal = unsafe { adapter.as_hal::<Vulkan>() }
                .ok_or_else(|| InteropError::NoVulkan(format!("{} is not Vulkan", info.name)))?;
            let caps = hal.physical_device_capabilities();
            let mut needed: Vec<&'static std::ffi::CStr> = Vec::new();
            if caps.properties().api_version < vk::API_VERSION_1_1 {
                // Core in 1.1; only as an extension before (and then also needs the
                // instance extension, which wgpu does not enable: refuse).
                return Err(unsupported("Vulkan 1.1 (VK_KHR_external_memory)"));
            }
            if !caps.supports_extension(ash::khr::external_memory_fd::NAME) {
                return Err(unsupported("VK_KHR_external_memory_fd"));
            }
            needed.push(ash::khr::external_memory_fd::NAME);
            // The host path's slots are imported too, where the driver can (hostimport).
            super::hostimport::enable_on(&hal, &mut needed);
            // Can a storage buffer's memory be exported as an opaque fd at all?
            let ext = {
                let query = vk::PhysicalDeviceExternalBufferInfo::default()
                    .usage(VK_USAGE)
                    .handle_type(HANDLE);
                let mut out = vk::ExternalBufferProperties::default();
                // SAFETY: valid physical device; Vulkan 1.1 checked above.
                unsafe {
                    hal.shared_instance()
                        .raw_instance()
                        .get_physical_device_external_buffer_properties(
                            hal.raw_physical_device(),
                            &query,
                            &mut out,
                        )
                };
                out.external_memory_properties
            };
            if !ext
                .external_memory_features
                .contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE)
            {
                return Err(unsupported(
                    "exporting storage-buffer memory as an opaque file descriptor",
                ));
            }
            let cb: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(move |args| {
                for e in needed {
                    if !args.extensions.contains(&e) {
                        args.extensions.push(e);
                    }
                }
            });
            let has_m4 = caps.properties().api_version >= vk::API_VERSION_1_3
                || caps.supports_extension(ash::khr::maintenance4::NAME);
            // SAFETY: features and limits come from this adapter; the callback only adds
            // an extension the adapter supports (checked above).
            let open = unsafe { hal.open_with_callback(features, &limits, &hints, Some(cb)) }
                .map_err(|e| InteropError::Wgpu(format!("creating the Vulkan device: {e}")))?;
            (open, has_m4)
        };
        let desc = wgpu::DeviceDescriptor {
            label: Some("supercell interop"),
            required_features: features,
            required_limits: limits,
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: hints,
            trace: wgpu::Trace::Off,
        };
        // SAFETY: `open` was created from this adapter with these features and limits.
        let (device, queue) = unsafe { adapter.create_device_from_hal::<Vulkan>(open, &desc) }
            .map_err(|e| InteropError::Wgpu(format!("wrapping the Vulkan device: {e}")))?;
        let vk = {
            // SAFETY: handles are read, not destroyed; they live as long as `device`.
            let hal = unsafe { device.as_hal::<Vulkan>() }
                .ok_or_else(|| InteropError::Wgpu("the device is not a Vulkan device".into()))?;
            if !hal
                .enabled_device_extensions()
                .contains(&ash::khr::external_memory_fd::NAME)
            {
                return Err(unsupported(
                    "VK_KHR_external_memory_fd (not enabled on the device)",
                ));
            }
            let raw_instance = hal.shared_instance().raw_instance();
            let device = hal.raw_device().clone();
            let pd = hal.raw_physical_device();
            let external_fd = ash::khr::external_memory_fd::Device::new(raw_instance, &device);
            // SAFETY: valid physical device.
            let memory = unsafe { raw_instance.get_physical_device_memory_properties(pd) };
            let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
            let mut m4 = vk::PhysicalDeviceMaintenance4Properties::default();
            {
                let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut m3);
                if has_m4 {
                    p2 = p2.push_next(&mut m4);
                }
                // SAFETY: valid physical device; Vulkan 1.1 checked above; the maintenance4
                // struct is chained only where the device knows it.
                unsafe { raw_instance.get_physical_device_properties2(pd, &mut p2) };
            }
            let query = vk::PhysicalDeviceExternalBufferInfo::default()
                .usage(VK_USAGE)
                .handle_type(HANDLE);
            let mut out = vk::ExternalBufferProperties::default();
            // SAFETY: as above.
            unsafe {
                raw_instance.get_physical_device_external_buffer_properties(pd, &query, &mut out)
            };
            VkDevice {
                device,
                external_fd,
                memory,
                max_allocation: m3.max_memory_allocation_size,
                max_buffer: (has_m4 && m4.max_buffer_size > 0).then_some(m4.max_buffer_size),
                dedicated_only: out
                    .external_memory_properties
                    .external_memory_features
                    .contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY),
            }
        };
        Ok(InteropDevice {
            instance,
            adapter,
            device,
            queue,
            uuid,
            cuda_ordinal: gpu.map(|g| g.ordinal),
            vk,
        })
    }

    /// "name (Vulkan, type), driver …, UUID …, CUDA GPU n" for logs and `doctor`.
    pub fn describe(&self) -> String {
        let i = self.adapter.get_info();
        let cuda = match self.cuda_ordinal {
            Some(n) => format!("CUDA GPU {n}"),
            None => "no CUDA".into(),
        };
        format!(
            "{} ({:?}, {:?}), driver {} {}, UUID {}, max allocation {} MiB, max shared buffer {} MiB{}, {cuda}",
            i.name,
            i.backend,
            i.device_type,
            i.driver,
            i.driver_info,
            uuid_str(&self.uuid),
            self.vk.max_allocation >> 20,
            self.max_shared_bytes() >> 20,
            if self.vk.dedicated_only {
                ", export needs dedicated allocations"
            } else {
                ""
            }
        )
    }

    /// The largest shared buffer this device can make: Vulkan's `maxBufferSize` where the
    /// device reports it (Vulkan 1.3), else wgpu's `max_buffer_size`. wgpu caps its own
    /// limit at `maxMemoryAllocationSize`, which is a soft limit (NVIDIA reports 4 GiB and
    /// allocates more), so shared buffers may be larger than buffers wgpu creates; larger
    /// allocations are tried and a refusal by the driver comes back as an error. A single
    /// binding stays limited to `max_storage_buffer_binding_size` (4 GiB).
    pub fn max_shared_bytes(&self) -> u64 {
        self.vk
            .max_buffer
            .unwrap_or_else(|| self.device.limits().max_buffer_size)
    }

    /// Index of the memory type for an exportable buffer: device-local, preferring types
    /// without host visibility (the big VRAM heap rather than the BAR window).
    fn memory_type(&self, bits: u32) -> Option<u32> {
        let m = &self.vk.memory;
        let types = &m.memory_types[..m.memory_type_count as usize];
        let ok = |i: usize| bits & (1 << i) != 0;
        let local = vk::MemoryPropertyFlags::DEVICE_LOCAL;
        let host = vk::MemoryPropertyFlags::HOST_VISIBLE;
        let pick = |want_host: bool| {
            types.iter().enumerate().position(|(i, t)| {
                ok(i)
                    && t.property_flags.contains(local)
                    && t.property_flags.contains(host) == want_host
            })
        };
        pick(false)
            .or_else(|| pick(true))
            .or_else(|| (0..types.len()).find(|&i| ok(i)))
            .map(|i| i as u32)
    }
}

/// The Vulkan buffer and its memory. Freed (buffer destroyed, memory freed) exactly once,
/// when the last holder lets go: wgpu's drop callback and the buffer's owners each hold an
/// `Arc`.
struct VulkanAlloc {
    device: ash::Device,
    buffer: vk::Buffer,
    memory: vk::DeviceMemory,
}

impl Drop for VulkanAlloc {
    fn drop(&mut self) {
        // SAFETY: created on `device`, which outlives every holder (see `Exportable`);
        // no holder is left, so neither wgpu nor CUDA uses them.
        unsafe {
            if self.buffer != vk::Buffer::null() {
                self.device.destroy_buffer(self.buffer, None);
            }
            if self.memory != vk::DeviceMemory::null() {
                self.device.free_memory(self.memory, None);
            }
        }
    }
}

/// The Vulkan half of a [`SharedBuffer`]: an exportable allocation wrapped as a wgpu buffer.
struct Exportable {
    // Drop order: the wgpu handle, then our reference to the memory, then the device
    // (kept alive so the memory can be freed on it if we are the last holder).
    buffer: wgpu::Buffer,
    alloc: Arc<VulkanAlloc>,
    /// Bytes of the Vulkan allocation (≥ `len`).
    alloc_size: u64,
    len: u64,
    external_fd: ash::khr::external_memory_fd::Device,
    _device: wgpu::Device,
}

impl Exportable {
    fn new(dev: &InteropDevice, len: u64) -> IResult<Exportable> {
        if len == 0 {
            return Err(InteropError::Usage(
                "a shared buffer needs at least one byte".into(),
            ));
        }
        if !len.is_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT) {
            return Err(InteropError::Usage(format!(
                "a shared buffer's size must be a multiple of {} bytes ({len} is not)",
                wgpu::COPY_BUFFER_ALIGNMENT
            )));
        }
        let max = dev.max_shared_bytes();
        if len > max {
            return Err(InteropError::Usage(format!(
                "a shared buffer of {len} bytes is larger than this device allows ({max} bytes)"
            )));
        }
        let d = &dev.vk.device;
        let mut alloc = VulkanAlloc {
            device: d.clone(),
            buffer: vk::Buffer::null(),
            memory: vk::DeviceMemory::null(),
        };
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(len)
            .usage(VK_USAGE)
            .sharing_mode(vk::SharingMode::EXCLUSIVE)
            .push_next(&mut external);
        // SAFETY: valid create info; the handle is owned by `alloc` from here on.
        alloc.buffer = unsafe { d.create_buffer(&info, None) }
            .map_err(vk_err(format!("vkCreateBuffer of {len} bytes")))?;
        // SAFETY: a buffer of this device.
        let req = unsafe { d.get_buffer_memory_requirements(alloc.buffer) };
        let type_index =
            dev.memory_type(req.memory_type_bits)
                .ok_or_else(|| InteropError::Unsupported {
                    adapter: dev.adapter.get_info().name,
                    what: format!(
                        "a memory type for exportable buffers (type bits {:#x})",
                        req.memory_type_bits
                    ),
                })?;
        let mut export = vk::ExportMemoryAllocateInfo::default().handle_types(HANDLE);
        // Always dedicated (whether or not the driver requires it, `dedicated_only`): CUDA
        // imports it with the matching flag.
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(alloc.buffer);
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(req.size)
            .memory_type_index(type_index)
            .push_next(&mut export)
            .push_next(&mut dedicated);
        let over = if dev.vk.max_allocation != 0 && req.size > dev.vk.max_allocation {
            format!(
                ", above the driver's maxMemoryAllocationSize of {} bytes",
                dev.vk.max_allocation
            )
        } else {
            String::new()
        };
        // SAFETY: valid allocate info; the memory is owned by `alloc` from here on.
        alloc.memory = unsafe { d.allocate_memory(&ai, None) }.map_err(vk_err(format!(
            "vkAllocateMemory of {} bytes (exportable, dedicated, memory type {type_index}{over})",
            req.size
        )))?;
        // SAFETY: fresh buffer and memory of sufficient size, offset 0.
        unsafe { d.bind_buffer_memory(alloc.buffer, alloc.memory, 0) }
            .map_err(vk_err("vkBindBufferMemory"))?;
        let alloc = Arc::new(alloc);
        let raw = alloc.buffer;
        let for_wgpu = alloc.clone();
        // SAFETY: `raw` lives until the callback's reference (and ours) are gone; wgpu never
        // maps it (no MAP_* usage).
        let hal = unsafe {
            wgpu::hal::vulkan::Buffer::from_raw_externally_owned(
                raw,
                Box::new(move || drop(for_wgpu)),
            )
        };
        let scope = dev.device.push_error_scope(wgpu::ErrorFilter::Validation);
        // SAFETY: created on this device with the usage the descriptor states, bound to
        // memory, non-zero size. wgpu treats it as initialised (no clear on first use).
        let buffer = unsafe {
            dev.device.create_buffer_from_hal::<Vulkan>(
                hal,
                &wgpu::BufferDescriptor {
                    label: Some("supercell shared slot"),
                    size: len,
                    usage: WGPU_USAGE,
                    mapped_at_creation: false,
                },
            )
        };
        if let Some(e) = block_on(scope.pop()) {
            return Err(InteropError::Wgpu(format!(
                "wrapping the shared buffer: {e}"
            )));
        }
        Ok(Exportable {
            buffer,
            alloc,
            alloc_size: req.size,
            len,
            external_fd: dev.vk.external_fd.clone(),
            _device: dev.device.clone(),
        })
    }

    /// A new opaque file descriptor of the memory (the caller owns it).
    fn export_fd(&self) -> IResult<OwnedFd> {
        let info = vk::MemoryGetFdInfoKHR::default()
            .memory(self.alloc.memory)
            .handle_type(HANDLE);
        // SAFETY: exportable memory of this device.
        let fd =
            unsafe { self.external_fd.get_memory_fd(&info) }.map_err(vk_err("vkGetMemoryFdKHR"))?;
        if fd < 0 {
            return Err(InteropError::Vulkan {
                what: format!("vkGetMemoryFdKHR returned fd {fd}"),
                result: vk::Result::ERROR_UNKNOWN,
            });
        }
        // SAFETY: a fresh descriptor returned to us.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// CUDA's view of the memory: the imported external memory and the pointer mapped over it.
struct CudaImport {
    gpu: Gpu,
    ext: sys::CUexternalMemory,
    ptr: sys::CUdeviceptr,
}

// SAFETY: the handles are plain driver handles, usable from any thread with the context
// bound (done before every use).
unsafe impl Send for CudaImport {}
// SAFETY: as above; nothing here mutates through `&self`.
unsafe impl Sync for CudaImport {}

impl CudaImport {
    /// Imports `fd` (consumed: CUDA owns it on success, it is closed on failure) as a
    /// dedicated allocation of `alloc_size` bytes and maps `len` bytes at offset 0.
    fn new(gpu: &Gpu, fd: OwnedFd, alloc_size: u64, len: u64) -> IResult<CudaImport> {
        gpu.bind().map_err(|e| InteropError::Cuda(e.to_string()))?;
        let desc = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
            type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 {
                fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
            },
            size: alloc_size,
            flags: sys::CUDA_EXTERNAL_MEMORY_DEDICATED,
            reserved: [0; 16],
        };
        let mut ext: sys::CUexternalMemory = std::ptr::null_mut();
        // SAFETY: a valid descriptor; the context is current.
        let r = unsafe { sys::cuImportExternalMemory(&mut ext, &desc) };
        // `fd` still owned: dropping it on the error path closes it.
        cuda_check(
            r,
            &format!("cuImportExternalMemory (opaque fd, dedicated, {alloc_size} bytes)"),
        )?;
        // CUDA owns the descriptor now; it must not be closed here.
        let _ = fd.into_raw_fd();
        let mut import = CudaImport {
            gpu: gpu.clone(),
            ext,
            ptr: 0,
        };
        let bd = sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
            offset: 0,
            size: len,
            flags: 0,
            reserved: [0; 16],
        };
        let mut ptr: sys::CUdeviceptr = 0;
        // SAFETY: `ext` is a live import of at least `len` bytes; on failure `import`'s
        // Drop destroys it.
        cuda_check(
            unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, ext, &bd) },
            &format!("cuExternalMemoryGetMappedBuffer of {len} bytes"),
        )?;
        import.ptr = ptr;
        Ok(import)
    }
}

impl Drop for CudaImport {
    fn drop(&mut self) {
        if self.gpu.bind().is_err() {
            // The context is gone (driver failure): nothing can be released through it.
            return;
        }
        // SAFETY: mapped and imported in `new`, released once, here; the owner guarantees
        // no CUDA work on the pointer is in flight (frame-ring contract).
        unsafe {
            if self.ptr != 0 {
                sys::cuMemFree_v2(self.ptr);
            }
            sys::cuDestroyExternalMemory(self.ext);
        }
    }
}

/// Device memory that is both a [`wgpu::Buffer`] and a CUDA device pointer (see the module
/// documentation for the synchronisation contract and teardown order).
pub struct SharedBuffer {
    // Field order is drop order: CUDA lets go first, then the Vulkan side.
    cuda: CudaImport,
    vk: Exportable,
}

impl std::fmt::Debug for SharedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBuffer")
            .field("len", &self.vk.len)
            .field("alloc_size", &self.vk.alloc_size)
            .field("cuda_ptr", &format_args!("{:#x}", self.cuda.ptr))
            .finish()
    }
}

impl SharedBuffer {
    /// `len` bytes of device-local Vulkan memory (a dedicated allocation with
    /// `VkExportMemoryAllocateInfo` OPAQUE_FD) bound to a `VkBuffer` with
    /// `STORAGE | COPY_SRC | COPY_DST` usage, wrapped as a [`wgpu::Buffer`], exported with
    /// `vkGetMemoryFdKHR` and imported into CUDA (`cuImportExternalMemory`, OPAQUE_FD, the
    /// allocation's size, the dedicated flag; `cuExternalMemoryGetMappedBuffer`). The
    /// memory is zeroed (by CUDA) before it is returned.
    ///
    /// `len` must be a multiple of 4 and at most [`InteropDevice::max_shared_bytes`];
    /// `gpu` must be the GPU `dev` was opened for.
    pub fn new(dev: &InteropDevice, gpu: &Gpu, len: u64) -> Result<SharedBuffer, InteropError> {
        cuda_probe().map_err(InteropError::NoCuda)?;
        let uuid = cuda_uuid(gpu)?;
        if uuid != dev.uuid {
            return Err(InteropError::Usage(format!(
                "CUDA GPU {} ({}) is not the Vulkan device {}",
                gpu.ordinal,
                uuid_str(&uuid),
                dev.describe()
            )));
        }
        let vk = Exportable::new(dev, len)?;
        let fd = vk.export_fd()?;
        let cuda = CudaImport::new(gpu, fd, vk.alloc_size, len)?;
        let shared = SharedBuffer { cuda, vk };
        // Zero it (a slot never shows another frame's stale bytes), and prove the mapping.
        // SAFETY: the mapped range is `len` bytes; the context was bound by the import.
        cuda_check(
            unsafe { sys::cuMemsetD8_v2(shared.cuda.ptr, 0, len as usize) },
            "cuMemsetD8 of the shared buffer",
        )?;
        // SAFETY: waits for the memset (issued on the legacy default stream), not for the
        // context's other streams (engines may be reading into other slots).
        cuda_check(
            unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) },
            "cuStreamSynchronize",
        )?;
        Ok(shared)
    }

    /// The buffer as wgpu sees it (bind slices of it with
    /// [`GridSlice`](crate::render::GridSlice)). Clones keep the memory alive, not CUDA's
    /// mapping.
    pub fn wgpu(&self) -> &wgpu::Buffer {
        &self.vk.buffer
    }

    /// The same memory as a CUDA device pointer (valid while `self` lives; bind the
    /// context before using it).
    pub fn cuda_ptr(&self) -> sys::CUdeviceptr {
        self.cuda.ptr
    }

    /// Length in bytes (as asked; the allocation may be larger).
    pub fn len(&self) -> u64 {
        self.vk.len
    }

    /// Always false (shared buffers hold at least one byte).
    pub fn is_empty(&self) -> bool {
        self.vk.len == 0
    }

    /// A frame-ring slot over this memory: [`SlotMemory::Device`] of a borrowed
    /// [`DeviceBuffer`] that keeps `self` (CUDA's import and the Vulkan memory) alive.
    ///
    /// The slot belongs to `gpu`'s context handle, so pass the same [`Gpu`] (or a clone)
    /// you give the ingest engine: engines refuse slots of another context. `gpu` must be
    /// the GPU the buffer was made for (panics otherwise: a programming error).
    pub fn slot_memory(self: &Arc<Self>, gpu: &Gpu) -> SlotMemory {
        assert_eq!(
            gpu.ordinal, self.cuda.gpu.ordinal,
            "a shared buffer of CUDA GPU {} cannot be a slot of GPU {}",
            self.cuda.gpu.ordinal, gpu.ordinal
        );
        // SAFETY: the pointer maps `len` bytes of this device's primary context (every
        // `Gpu` of one ordinal shares it), alive as long as the boxed Arc; the ring hands a
        // slot to one writer at a time.
        let buf = unsafe {
            DeviceBuffer::borrowed(
                gpu,
                self.cuda.ptr,
                self.vk.len as usize,
                Box::new(self.clone()),
            )
        };
        SlotMemory::Device(buf)
    }
}

/// Whether zero-copy sharing works here: opens GPU 0 (or `gpu`), the matching Vulkan
/// device, makes a 64 KiB shared buffer, writes it with CUDA and reads it back through wgpu.
/// `Ok` says what was found; `Err` says why not (never panics, also without CUDA).
pub fn probe(gpu: Option<&Gpu>) -> Result<String, String> {
    cuda_probe().map_err(|e| format!("CUDA is not usable: {e}"))?;
    let opened;
    let gpu = match gpu {
        Some(g) => g,
        None => {
            opened = Gpu::open(0).map_err(|e| format!("cannot open CUDA GPU 0: {e}"))?;
            &opened
        }
    };
    let dev = InteropDevice::open(gpu).map_err(|e| e.to_string())?;
    let len = 64 << 10;
    let shared = SharedBuffer::new(&dev, gpu, len).map_err(|e| e.to_string())?;
    let word = 0x5ce1_1f00_u32;
    gpu.bind().map_err(|e| e.to_string())?;
    // SAFETY: `len` bytes mapped at the pointer; context bound.
    cuda_check(
        unsafe { sys::cuMemsetD32_v2(shared.cuda_ptr(), word, (len / 4) as usize) },
        "cuMemsetD32",
    )
    .map_err(|e| e.to_string())?;
    // SAFETY: waits for the legacy default stream, where the memset ran.
    cuda_check(
        unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) },
        "cuStreamSynchronize",
    )
    .map_err(|e| e.to_string())?;
    let back = read_buffer(&dev.device, &dev.queue, shared.wgpu(), 0, len)?;
    let bad = back
        .chunks_exact(4)
        .position(|c| u32::from_le_bytes(c.try_into().unwrap()) != word);
    if let Some(i) = bad {
        return Err(format!(
            "shared memory is not shared: word {i} of a CUDA-written buffer reads differently through Vulkan on {}",
            dev.describe()
        ));
    }
    Ok(format!(
        "zero-copy CUDA↔Vulkan sharing works on {} (64 KiB written by CUDA, read by wgpu)",
        dev.describe()
    ))
}

/// Copies `len` bytes at `offset` of `buffer` (COPY_SRC usage) back to the host through a
/// MAP_READ staging buffer and waits. Offset and length must be multiples of 4.
pub fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, String> {
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("supercell interop readback"),
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, len);
    let idx = queue.submit([enc.finish()]);
    if let Some(e) = block_on(scope.pop()) {
        return Err(format!("copying {len} bytes at {offset}: {e}"));
    }
    let (tx, rx) = std::sync::mpsc::channel();
    staging.map_async(wgpu::MapMode::Read, .., move |r| {
        let _ = tx.send(r);
    });
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(idx),
            timeout: None,
        })
        .map_err(|e| e.to_string())?;
    device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| e.to_string())?;
    rx.recv()
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    let out = staging
        .get_mapped_range(..)
        .map_err(|e| e.to_string())?
        .to_vec();
    staging.unmap();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The Vulkan half alone, or `None` (with the reason printed) where no adapter can
    /// export memory and `SUPERCELL_REQUIRE_GPU` is unset.
    fn vulkan_only() -> Option<InteropDevice> {
        match InteropDevice::open_vulkan(None) {
            Ok(d) => {
                eprintln!("exportable memory on {}", d.describe());
                Some(d)
            }
            Err(e) => {
                if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                    panic!("SUPERCELL_REQUIRE_GPU is set but: {e}");
                }
                eprintln!("skipping: {e}");
                None
            }
        }
    }

    #[test]
    fn probe_without_cuda_says_why() {
        if cuda_probe().is_ok() {
            eprintln!("CUDA present: probe(None) = {:?}", probe(None));
            return;
        }
        let e = probe(None).expect_err("no CUDA here");
        assert!(e.contains("CUDA"), "{e}");
        eprintln!("probe(None): {e}");
    }

    #[test]
    fn handles_can_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<InteropDevice>();
        send_sync::<SharedBuffer>();
        send_sync::<InteropError>();
    }

    #[test]
    fn uuids_print_like_nvidia_smi() {
        let u = [
            0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0, 0, 1, 2, 3, 4, 5, 6, 0xff,
        ];
        assert_eq!(uuid_str(&u), "12345678-9abc-def0-0001-0203040506ff");
    }

    #[test]
    fn exportable_buffer_round_trips_and_exports_an_fd() {
        let Some(dev) = vulkan_only() else { return };
        assert!(matches!(
            Exportable::new(&dev, 0),
            Err(InteropError::Usage(_))
        ));
        assert!(matches!(
            Exportable::new(&dev, 6),
            Err(InteropError::Usage(_))
        ));
        let len = (1u64 << 20) + 4100;
        let buf = Exportable::new(&dev, len).unwrap();
        assert_eq!(buf.buffer.size(), len);
        assert!(buf.alloc_size >= len);
        let pattern: Vec<u8> = (0..len)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        dev.queue.write_buffer(&buf.buffer, 0, &pattern);
        let back = read_buffer(&dev.device, &dev.queue, &buf.buffer, 0, len).unwrap();
        assert!(back == pattern, "whole buffer differs");
        let back = read_buffer(&dev.device, &dev.queue, &buf.buffer, 4096 + 12, 8192).unwrap();
        assert!(back == pattern[4108..4108 + 8192], "sub-range differs");
        // Two exports: two distinct, open descriptors.
        let a = buf.export_fd().unwrap();
        let b = buf.export_fd().unwrap();
        use std::os::fd::AsRawFd;
        assert_ne!(a.as_raw_fd(), b.as_raw_fd());
        // SAFETY: fcntl on descriptors we own.
        assert!(unsafe { libc::fcntl(a.as_raw_fd(), libc::F_GETFD) } >= 0);
        // The descriptor is the same memory: import it as a second allocation on the same
        // device and read the pattern through that (what CUDA's import does on NVIDIA).
        if let Some(alias) = import_alias(&dev, b, &buf) {
            let back = read_buffer(&dev.device, &dev.queue, &alias, 0, len).unwrap();
            assert!(back == pattern, "the imported alias does not see the bytes");
            eprintln!("the fd imported back into Vulkan sees the same {len} bytes");
        }
    }

    /// Imports `fd` into a new allocation of `dev` bound to a new buffer, wrapped for wgpu
    /// (owning its memory): the Vulkan stand-in for CUDA's import. `None` when the driver
    /// cannot import (printed).
    fn import_alias(dev: &InteropDevice, fd: OwnedFd, of: &Exportable) -> Option<wgpu::Buffer> {
        use std::os::fd::AsRawFd;
        let d = &dev.vk.device;
        let mut props = vk::MemoryFdPropertiesKHR::default();
        // SAFETY: a valid opaque fd of this device.
        if let Err(e) = unsafe {
            dev.vk
                .external_fd
                .get_memory_fd_properties(HANDLE, fd.as_raw_fd(), &mut props)
        } {
            // Opaque fds need not support the query (the spec leaves it to the driver).
            eprintln!("vkGetMemoryFdPropertiesKHR: {e} (continuing)");
        }
        let mut external = vk::ExternalMemoryBufferCreateInfo::default().handle_types(HANDLE);
        let info = vk::BufferCreateInfo::default()
            .size(of.len)
            .usage(VK_USAGE)
            .push_next(&mut external);
        // SAFETY: valid create info.
        let buffer = unsafe { d.create_buffer(&info, None) }.unwrap();
        // SAFETY: our buffer.
        let req = unsafe { d.get_buffer_memory_requirements(buffer) };
        let type_index = dev.memory_type(req.memory_type_bits).unwrap();
        let mut import = vk::ImportMemoryFdInfoKHR::default()
            .handle_type(HANDLE)
            .fd(fd.as_raw_fd());
        let mut dedicated = vk::MemoryDedicatedAllocateInfo::default().buffer(buffer);
        let ai = vk::MemoryAllocateInfo::default()
            .allocation_size(of.alloc_size)
            .memory_type_index(type_index)
            .push_next(&mut import)
            .push_next(&mut dedicated);
        // SAFETY: valid allocate info; on success Vulkan owns the fd.
        let memory = match unsafe { d.allocate_memory(&ai, None) } {
            Ok(m) => {
                let _ = fd.into_raw_fd();
                m
            }
            Err(e) => {
                eprintln!("this driver cannot import its own opaque fd: {e}; alias check skipped");
                // SAFETY: our unbound buffer.
                unsafe { d.destroy_buffer(buffer, None) };
                return None;
            }
        };
        // SAFETY: fresh buffer and memory.
        unsafe { d.bind_buffer_memory(buffer, memory, 0) }.unwrap();
        // SAFETY: wgpu owns buffer and memory from here (freed when the buffer goes).
        let hal = unsafe {
            wgpu::hal::vulkan::Buffer::from_raw_managed(buffer, memory, 0, of.alloc_size)
        };
        // SAFETY: created on this device with this usage.
        Some(unsafe {
            dev.device.create_buffer_from_hal::<Vulkan>(
                hal,
                &wgpu::BufferDescriptor {
                    label: Some("alias"),
                    size: of.len,
                    usage: WGPU_USAGE,
                    mapped_at_creation: false,
                },
            )
        })
    }

    #[test]
    fn vulkan_memory_is_freed_once_after_every_holder() {
        let Some(dev) = vulkan_only() else { return };
        // Dropped alone: freed at once.
        let a = Exportable::new(&dev, 4096).unwrap();
        let weak = Arc::downgrade(&a.alloc);
        drop(a);
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        assert!(weak.upgrade().is_none(), "memory not freed");
        // A wgpu clone (e.g. bound by the renderer) keeps it alive after its owner is gone.
        let b = Exportable::new(&dev, 4096).unwrap();
        let weak = Arc::downgrade(&b.alloc);
        let clone = b.buffer.clone();
        drop(b);
        assert!(weak.upgrade().is_some(), "freed while wgpu still holds it");
        dev.queue.write_buffer(&clone, 0, &[7u8; 16]);
        let back = read_buffer(&dev.device, &dev.queue, &clone, 0, 16).unwrap();
        assert_eq!(back, [7u8; 16]);
        drop(clone);
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        assert!(
            weak.upgrade().is_none(),
            "memory not freed after the last holder"
        );
        // The owner outliving wgpu's handle (the CUDA side holds it): alive until it goes.
        let c = Exportable::new(&dev, 4096).unwrap();
        let weak = Arc::downgrade(&c.alloc);
        let owner = c.alloc.clone();
        drop(c);
        dev.device
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
        assert_eq!(weak.strong_count(), 1, "only the CUDA-side holder is left");
        drop(owner);
        assert!(weak.upgrade().is_none());
    }

    /// A compute pass binds an exported buffer (wrapped, not created, by wgpu) at an offset
    /// like a buffer of its own: the CRC pass reads the same bytes from both. (The GPU
    /// machine's `tests/interop_gpu.rs` renders a frame from a CUDA-shared slot.)
    #[test]
    fn shaders_read_an_exported_buffer_like_an_uploaded_one() {
        use wgpu::util::DeviceExt;
        let Some(dev) = vulkan_only() else { return };
        let data: Vec<u8> = (0..300_003u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
            .collect();
        let mut padded = data.clone();
        padded.resize(data.len().div_ceil(4) * 4, 0);
        let len = (data.len() as u64 + 8192).div_ceil(4096) * 4096;
        let shared = Exportable::new(&dev, len).unwrap();
        // The bytes at a 4 KiB offset, as in a slot image.
        dev.queue.write_buffer(&shared.buffer, 4096, &padded);
        let uploaded = dev
            .device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some("uploaded"),
                contents: &padded,
                usage: WGPU_USAGE,
            });
        let ranges = [(0, data.len() as u64), (12288, 5000), (65536, 4096), (8, 3)];
        let at_4k: Vec<(u64, u64)> = ranges.iter().map(|&(o, l)| (o + 4096, l)).collect();
        let crc = super::super::WgpuCrc::new(&dev.device);
        let from_shared = crc
            .crc32(&dev.device, &dev.queue, &shared.buffer, &at_4k)
            .unwrap();
        let from_uploaded = crc
            .crc32(&dev.device, &dev.queue, &uploaded, &ranges)
            .unwrap();
        assert_eq!(from_shared, from_uploaded);
        for (&(o, l), got) in ranges.iter().zip(&from_shared) {
            assert_eq!(*got, crc32fast::hash(&data[o as usize..(o + l) as usize]));
        }
    }

    #[test]
    fn too_large_a_buffer_is_refused_with_the_limit() {
        let Some(dev) = vulkan_only() else { return };
        let max = dev.max_shared_bytes();
        let Some(too_big) = max.checked_add(4).map(|v| v / 4 * 4) else {
            eprintln!("no buffer-size limit to exceed ({max})");
            return;
        };
        match Exportable::new(&dev, too_big) {
            Err(InteropError::Usage(m)) => assert!(m.contains("larger"), "{m}"),
            other => panic!("expected a usage error, got {:?}", other.map(|e| e.len)),
        }
    }
}
