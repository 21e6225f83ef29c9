//! The Vulkan device CUDA shares memory with: opened by [`crate::device`] (adapter matched
//! by UUID, memory export enabled), plus the Vulkan handles the allocations here need.

use super::*;
use crate::device::{DeviceCaps, SharingCaps, Want};

/// Raw Vulkan handles and function tables of the device wgpu created (valid while the
/// `wgpu::Device` lives; every holder keeps a `wgpu::Device` clone for that).
#[derive(Clone)]
pub(super) struct VkDevice {
    pub(super) device: ash::Device,
    pub(super) external_fd: ash::khr::external_memory_fd::Device,
    pub(super) memory: vk::PhysicalDeviceMemoryProperties,
    /// What the driver says of exported memory (from [`DeviceCaps::sharing`]).
    pub(super) sharing: SharingCaps,
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
    /// What it can do ([`DeviceCaps::sharing`] is always set).
    pub caps: DeviceCaps,
    /// The adapter's device UUID (equal to the CUDA GPU's when opened with [`open`](Self::open)).
    pub(super) uuid: [u8; 16],
    /// CUDA ordinal this device was matched with (`None`: opened without CUDA, tests only).
    pub(super) cuda_ordinal: Option<usize>,
    pub(super) vk: VkDevice,
}

impl std::fmt::Debug for InteropDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.describe())
    }
}

impl InteropDevice {
    /// Opens the Vulkan adapter whose `VkPhysicalDeviceIDProperties::deviceUUID` equals the
    /// CUDA device's (`cuDeviceGetUuid`), and creates a device on it with
    /// `VK_KHR_external_memory(_fd)` enabled, `adapter.limits()` (the full storage-binding
    /// size) and `TIMESTAMP_QUERY` when available (see [`crate::device::open`]).
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
    pub(super) fn open_vulkan(want: Option<([u8; 16], &Gpu)>) -> IResult<InteropDevice> {
        let kind = match want {
            Some((uuid, gpu)) => Want::CudaShared {
                uuid,
                name: format!("{} ({})", gpu.ordinal, gpu.name),
            },
            None => Want::AnyExporter,
        };
        let opened = crate::device::open(&kind, "supercell interop")?;
        let unsupported = |what: &str| InteropError::Unsupported {
            adapter: opened.caps.name.clone(),
            what: what.into(),
        };
        let (Some(uuid), Some(sharing)) = (opened.caps.uuid, opened.caps.sharing) else {
            return Err(unsupported(
                "VK_KHR_external_memory_fd (not enabled on the device)",
            ));
        };
        let vk = {
            // SAFETY: handles are read, not destroyed; they live as long as `device`.
            let hal = unsafe { opened.device.as_hal::<Vulkan>() }
                .ok_or_else(|| InteropError::Wgpu("the device is not a Vulkan device".into()))?;
            let raw_instance = hal.shared_instance().raw_instance();
            let device = hal.raw_device().clone();
            let external_fd = ash::khr::external_memory_fd::Device::new(raw_instance, &device);
            // SAFETY: valid physical device.
            let memory = unsafe {
                raw_instance.get_physical_device_memory_properties(hal.raw_physical_device())
            };
            VkDevice {
                device,
                external_fd,
                memory,
                sharing,
            }
        };
        Ok(InteropDevice {
            instance: opened.instance,
            adapter: opened.adapter,
            device: opened.device,
            queue: opened.queue,
            caps: opened.caps,
            uuid,
            cuda_ordinal: want.map(|(_, g)| g.ordinal),
            vk,
        })
    }

    /// "name (Vulkan, type), driver …, UUID …, CUDA GPU n" for logs and `doctor`.
    pub fn describe(&self) -> String {
        let c = &self.caps;
        let cuda = match self.cuda_ordinal {
            Some(n) => format!("CUDA GPU {n}"),
            None => "no CUDA".into(),
        };
        format!(
            "{} ({:?}, {:?}), driver {}, UUID {}, max allocation {} MiB, max shared buffer {} MiB{}, {cuda}",
            c.name,
            c.backend,
            c.device_type,
            c.driver,
            uuid_str(&self.uuid),
            self.vk.sharing.max_allocation >> 20,
            self.max_shared_bytes() >> 20,
            if self.vk.sharing.dedicated_only {
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
            .sharing
            .max_buffer
            .unwrap_or(self.caps.max_buffer_size)
    }

    /// Index of the memory type for an exportable buffer: device-local, preferring types
    /// without host visibility (the big VRAM heap rather than the BAR window).
    pub(super) fn memory_type(&self, bits: u32) -> Option<u32> {
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
