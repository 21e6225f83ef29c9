//! The Vulkan device CUDA shares memory with: adapter matching by UUID, device creation.

use super::*;

/// Raw Vulkan handles and function tables of the device wgpu created (valid while the
/// `wgpu::Device` lives; every holder keeps a `wgpu::Device` clone for that).
#[derive(Clone)]
pub(super) struct VkDevice {
    pub(super) device: ash::Device,
    pub(super) external_fd: ash::khr::external_memory_fd::Device,
    pub(super) memory: vk::PhysicalDeviceMemoryProperties,
    /// `maxMemoryAllocationSize` (Vulkan 1.1), the largest allocation the driver promises
    /// (a soft limit: NVIDIA reports 4 GiB and allocates more).
    pub(super) max_allocation: u64,
    /// `maxBufferSize` (Vulkan 1.3 / maintenance4), the hard limit of a `VkBuffer`'s size;
    /// `None` where the device does not report it.
    pub(super) max_buffer: Option<u64>,
    /// Whether a dedicated allocation is required for exportable buffers.
    pub(super) dedicated_only: bool,
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
    pub(super) fn open_vulkan(want: Option<([u8; 16], &Gpu)>) -> IResult<InteropDevice> {
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

