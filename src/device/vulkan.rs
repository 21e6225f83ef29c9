//! The Vulkan side of opening a device: extensions added to the device wgpu creates, device
//! UUIDs, what the driver says of exporting and importing memory, and the memory budget.
//! Everything here reads handles of an adapter or device wgpu made; nothing is destroyed.

use std::ffi::CStr;

use ash::vk;
use wgpu::hal::api::Vulkan;

use super::SharingCaps;

/// Handle type of memory shared with CUDA (an opaque file descriptor).
pub const SHARED_HANDLE: vk::ExternalMemoryHandleTypeFlags =
    vk::ExternalMemoryHandleTypeFlags::OPAQUE_FD;

/// Vulkan usage of a buffer shared with CUDA (wgpu maps both storage kinds to
/// `STORAGE_BUFFER`, copies to `TRANSFER_*`).
pub const SHARED_VK_USAGE: vk::BufferUsageFlags = vk::BufferUsageFlags::from_raw(
    vk::BufferUsageFlags::STORAGE_BUFFER.as_raw()
        | vk::BufferUsageFlags::TRANSFER_SRC.as_raw()
        | vk::BufferUsageFlags::TRANSFER_DST.as_raw(),
);

/// Host memory import (`VK_EXT_external_memory_host`).
pub const HOST_IMPORT: &CStr = ash::ext::external_memory_host::NAME;
/// Memory export as file descriptors (`VK_KHR_external_memory_fd`).
pub const EXTERNAL_FD: &CStr = ash::khr::external_memory_fd::NAME;

/// Adds `name` to `extensions` when `adapter` supports it; returns whether it did.
pub(super) fn enable_if_supported(
    adapter: &wgpu::hal::vulkan::Adapter,
    extensions: &mut Vec<&'static CStr>,
    name: &'static CStr,
) -> bool {
    if !adapter
        .physical_device_capabilities()
        .supports_extension(name)
    {
        return false;
    }
    if !extensions.contains(&name) {
        extensions.push(name);
    }
    true
}

/// Creates the device of `desc` on the Vulkan adapter `hal` with `extensions` enabled
/// besides wgpu's own, and wraps it for wgpu. The error says which step failed.
///
/// # Safety
/// `hal` must be `adapter`'s Vulkan adapter, and every name in `extensions` supported by it.
pub(super) unsafe fn open_with_extensions(
    adapter: &wgpu::Adapter,
    hal: &wgpu::hal::vulkan::Adapter,
    desc: &wgpu::DeviceDescriptor<'_>,
    extensions: Vec<&'static CStr>,
) -> Result<(wgpu::Device, wgpu::Queue), String> {
    let cb: Box<wgpu::hal::vulkan::CreateDeviceCallback<'_>> = Box::new(move |args| {
        for e in extensions {
            if !args.extensions.contains(&e) {
                args.extensions.push(e);
            }
        }
    });
    // SAFETY: features and limits of `desc` come from this adapter (the callers ask for
    // its own); the callback adds only extensions it supports (the caller's contract).
    let open = unsafe {
        hal.open_with_callback(
            desc.required_features,
            &desc.required_limits,
            &desc.memory_hints,
            Some(cb),
        )
    }
    .map_err(|e| format!("creating the Vulkan device: {e}"))?;
    // SAFETY: `open` was created from this adapter with these features and limits.
    unsafe { adapter.create_device_from_hal::<Vulkan>(open, desc) }
        .map_err(|e| format!("wrapping the Vulkan device: {e}"))
}

/// The device UUID of a Vulkan adapter (needs Vulkan 1.1 on instance and device).
pub(super) fn adapter_uuid(hal: &wgpu::hal::vulkan::Adapter) -> Option<[u8; 16]> {
    physical_device_uuid(
        hal.shared_instance(),
        hal.raw_physical_device(),
        hal.physical_device_capabilities().properties().api_version,
    )
}

fn physical_device_uuid(
    shared: &wgpu::hal::vulkan::InstanceShared,
    pd: vk::PhysicalDevice,
    device_version: u32,
) -> Option<[u8; 16]> {
    if shared.instance_api_version() < vk::API_VERSION_1_1 || device_version < vk::API_VERSION_1_1 {
        return None;
    }
    let mut id = vk::PhysicalDeviceIDProperties::default();
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut id);
        // SAFETY: a valid physical device of this instance; Vulkan 1.1 checked above.
        unsafe {
            shared
                .raw_instance()
                .get_physical_device_properties2(pd, &mut p2)
        };
    }
    Some(id.device_uuid)
}

/// What the driver says of buffers with [`SHARED_VK_USAGE`] exported as [`SHARED_HANDLE`].
/// Needs Vulkan 1.1.
fn export_properties(
    instance: &ash::Instance,
    pd: vk::PhysicalDevice,
) -> vk::ExternalMemoryProperties {
    let query = vk::PhysicalDeviceExternalBufferInfo::default()
        .usage(SHARED_VK_USAGE)
        .handle_type(SHARED_HANDLE);
    let mut out = vk::ExternalBufferProperties::default();
    // SAFETY: valid physical device; the callers checked Vulkan 1.1.
    unsafe { instance.get_physical_device_external_buffer_properties(pd, &query, &mut out) };
    out.external_memory_properties
}

/// Whether the adapter can export storage-buffer memory as an opaque file descriptor.
pub(super) fn can_export(hal: &wgpu::hal::vulkan::Adapter) -> bool {
    export_properties(
        hal.shared_instance().raw_instance(),
        hal.raw_physical_device(),
    )
    .external_memory_features
    .contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE)
}

/// `minImportedHostPointerAlignment` of a device created with `VK_EXT_external_memory_host`,
/// or why it cannot import host memory.
pub fn host_import_alignment(device: &wgpu::hal::vulkan::Device) -> Result<u64, String> {
    if !device.enabled_device_extensions().contains(&HOST_IMPORT) {
        return Err("the Vulkan device has no VK_EXT_external_memory_host".into());
    }
    let instance = device.shared_instance().raw_instance();
    let mut host = vk::PhysicalDeviceExternalMemoryHostPropertiesEXT::default();
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut host);
        // SAFETY: valid physical device; the extension (and so the struct) is supported.
        unsafe { instance.get_physical_device_properties2(device.raw_physical_device(), &mut p2) };
    }
    Ok(host.min_imported_host_pointer_alignment.max(1))
}

/// What a device created with `VK_KHR_external_memory_fd` offers memory shared with CUDA;
/// `None` without the extension or where storage-buffer memory cannot be exported.
fn sharing_caps(device: &wgpu::hal::vulkan::Device, device_version: u32) -> Option<SharingCaps> {
    if !device.enabled_device_extensions().contains(&EXTERNAL_FD)
        || device_version < vk::API_VERSION_1_1
    {
        return None;
    }
    let instance = device.shared_instance().raw_instance();
    let pd = device.raw_physical_device();
    // SAFETY: valid physical device.
    let has_m4 = device_version >= vk::API_VERSION_1_3
        || unsafe { instance.enumerate_device_extension_properties(pd) }
            .unwrap_or_default()
            .iter()
            .any(|e| e.extension_name_as_c_str() == Ok(ash::khr::maintenance4::NAME));
    let mut m3 = vk::PhysicalDeviceMaintenance3Properties::default();
    let mut m4 = vk::PhysicalDeviceMaintenance4Properties::default();
    {
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut m3);
        if has_m4 {
            p2 = p2.push_next(&mut m4);
        }
        // SAFETY: valid physical device; Vulkan 1.1 checked above; the maintenance4 struct
        // is chained only where the device knows it.
        unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
    }
    let export = export_properties(instance, pd).external_memory_features;
    if !export.contains(vk::ExternalMemoryFeatureFlags::EXPORTABLE) {
        return None;
    }
    Some(SharingCaps {
        max_allocation: m3.max_memory_allocation_size,
        max_buffer: (has_m4 && m4.max_buffer_size > 0).then_some(m4.max_buffer_size),
        dedicated_only: export.contains(vk::ExternalMemoryFeatureFlags::DEDICATED_ONLY),
    })
}

/// What [`super::DeviceCaps`] takes from Vulkan.
pub(super) struct VulkanCaps {
    pub uuid: Option<[u8; 16]>,
    pub host_import_alignment: Option<u64>,
    pub sharing: Option<SharingCaps>,
    pub device_local_bytes: u64,
}

/// Vulkan's side of a device's capabilities; `None` for other backends.
pub(super) fn caps(device: &wgpu::Device) -> Option<VulkanCaps> {
    // SAFETY: handles are only read while `hal` (and so the device) lives.
    let hal = unsafe { device.as_hal::<Vulkan>() }?;
    let shared = hal.shared_instance();
    let pd = hal.raw_physical_device();
    // SAFETY: valid physical device.
    let version = unsafe { shared.raw_instance().get_physical_device_properties(pd) }.api_version;
    // SAFETY: valid physical device.
    let mem = unsafe {
        shared
            .raw_instance()
            .get_physical_device_memory_properties(pd)
    };
    let device_local_bytes = mem.memory_heaps[..mem.memory_heap_count as usize]
        .iter()
        .filter(|h| h.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL))
        .map(|h| h.size)
        .sum();
    Some(VulkanCaps {
        uuid: physical_device_uuid(shared, pd, version),
        host_import_alignment: host_import_alignment(&hal).ok(),
        sharing: sharing_caps(&hal, version),
        device_local_bytes,
    })
}

/// What `VK_EXT_memory_budget` says of this process on a physical device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryBudget {
    /// Usage of the device-local heaps, bytes.
    pub used: u64,
    /// Budget of the device-local heaps, bytes.
    pub budget: u64,
    /// Usage of all heaps (host-visible ones too), bytes.
    pub all_used: u64,
}

/// This process's usage and budget of the heaps of `device`'s physical device, from
/// `VK_EXT_memory_budget`, or why there is none.
pub fn memory_budget(device: &wgpu::Device) -> Result<MemoryBudget, String> {
    // SAFETY: the raw handles are only used for queries while `hal` (and so the device)
    // lives.
    let hal = unsafe { device.as_hal::<Vulkan>() }.ok_or("not a Vulkan device")?;
    // The structure may be chained only where the physical device has the extension; wgpu
    // enables it on the device exactly when it does.
    if !hal
        .enabled_device_extensions()
        .contains(&ash::ext::memory_budget::NAME)
    {
        return Err("VK_EXT_memory_budget not supported by the device".into());
    }
    let shared = hal.shared_instance();
    let (instance, phd) = (shared.raw_instance(), hal.raw_physical_device());
    let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
    let mut props = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
    // vkGetPhysicalDeviceMemoryProperties2 is core in Vulkan 1.1 (instance and device),
    // else it comes with VK_KHR_get_physical_device_properties2 (an instance extension).
    // SAFETY: valid instance and physical device; `props` chains only the budget structure.
    let device_version = unsafe { instance.get_physical_device_properties(phd) }.api_version;
    let core = shared.instance_api_version() >= vk::API_VERSION_1_1
        && device_version >= vk::API_VERSION_1_1;
    if core {
        // SAFETY: as above.
        unsafe { instance.get_physical_device_memory_properties2(phd, &mut props) };
    } else if shared
        .extensions()
        .contains(&ash::khr::get_physical_device_properties2::NAME)
    {
        let ext =
            ash::khr::get_physical_device_properties2::Instance::new(shared.entry(), instance);
        // SAFETY: as above; the instance has the extension.
        unsafe { ext.get_physical_device_memory_properties2(phd, &mut props) };
    } else {
        return Err("no vkGetPhysicalDeviceMemoryProperties2 (Vulkan 1.0 instance)".into());
    }
    let mem = props.memory_properties;
    let mut b = MemoryBudget {
        used: 0,
        budget: 0,
        all_used: 0,
    };
    for (i, heap) in mem.memory_heaps[..mem.memory_heap_count as usize]
        .iter()
        .enumerate()
    {
        b.all_used += budget.heap_usage[i];
        if heap.flags.contains(vk::MemoryHeapFlags::DEVICE_LOCAL) {
            b.used += budget.heap_usage[i];
            b.budget += budget.heap_budget[i];
        }
    }
    Ok(b)
}
