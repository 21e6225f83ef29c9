//! GPU memory in use, from the best source the machine has: CUDA (`cuMemGetInfo`: the
//! device, all processes), else Vulkan's memory budget (`VK_EXT_memory_budget`: this
//! process's use of the device-local heaps, as the driver counts it), else the wgpu
//! allocator's report (what this device allocated through wgpu).

use serde::Serialize;

/// Label of the CUDA figure.
pub const CUDA: &str = "CUDA";
/// Label of the Vulkan memory-budget figure.
pub const VULKAN_BUDGET: &str = "Vulkan memory budget: heap usage";
/// Label of the wgpu allocator's figure.
pub const WGPU_ALLOCATOR: &str = "wgpu allocator";

/// GPU memory in use, with where the figure comes from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuMemory {
    /// Bytes in use.
    pub used: u64,
    /// What `used` is out of, where the source says: CUDA's device total, or the budget of
    /// the device-local heaps.
    pub total: Option<u64>,
    /// Where the figure comes from: [`CUDA`], [`VULKAN_BUDGET`] or [`WGPU_ALLOCATOR`].
    pub source: &'static str,
    /// The better sources that gave nothing here, and why.
    pub absent: Vec<String>,
}

/// GPU memory in use on `device` (see the module's note on the sources), `None` when no
/// source gives a figure.
pub fn gpu_memory(device: &wgpu::Device) -> Option<GpuMemory> {
    let mut absent = Vec::new();
    match cuda() {
        Ok((used, total)) => {
            return Some(GpuMemory {
                used,
                total: Some(total),
                source: CUDA,
                absent,
            });
        }
        Err(why) => absent.push(format!("{CUDA}: {why}")),
    }
    let report = device.generate_allocator_report();
    let allocated = report.as_ref().map_or(0, |r| r.total_allocated_bytes);
    match vulkan_budget(device) {
        // The driver's count over all heaps must at least hold what wgpu itself allocated;
        // a driver that does not count this process's allocations reports less.
        Ok(b) if b.all_used > 0 && b.all_used >= allocated => {
            return Some(GpuMemory {
                used: b.used,
                total: Some(b.budget),
                source: VULKAN_BUDGET,
                absent,
            });
        }
        Ok(b) => absent.push(format!(
            "{VULKAN_BUDGET}: the driver counts {} bytes in all heaps, less than the {allocated} \
             bytes wgpu allocated",
            b.all_used
        )),
        Err(why) => absent.push(format!("{VULKAN_BUDGET}: {why}")),
    }
    report.map(|r| GpuMemory {
        used: r.total_allocated_bytes,
        total: None,
        source: WGPU_ALLOCATOR,
        absent,
    })
}

/// Bytes in use and the device's total, as CUDA sees device 0.
fn cuda() -> Result<(u64, u64), String> {
    crate::gpu::cuda_probe()?;
    let g = crate::gpu::Gpu::open(0).map_err(|e| e.to_string())?;
    let (free, total) = g.mem_info().map_err(|e| e.to_string())?;
    Ok((total.saturating_sub(free) as u64, total as u64))
}

/// What `VK_EXT_memory_budget` says of this process on a physical device.
struct Budget {
    /// Usage of the device-local heaps, bytes.
    used: u64,
    /// Budget of the device-local heaps, bytes.
    budget: u64,
    /// Usage of all heaps (host-visible ones too), bytes.
    all_used: u64,
}

/// This process's usage and budget of the heaps of `device`'s physical device, from
/// `VK_EXT_memory_budget`.
fn vulkan_budget(device: &wgpu::Device) -> Result<Budget, String> {
    use ash::vk;
    use wgpu::hal::api::Vulkan;
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
        unsafe { instance.get_physical_device_memory_properties2(phd, &mut props) };
    } else if shared
        .extensions()
        .contains(&ash::khr::get_physical_device_properties2::NAME)
    {
        let ext =
            ash::khr::get_physical_device_properties2::Instance::new(shared.entry(), instance);
        unsafe { ext.get_physical_device_memory_properties2(phd, &mut props) };
    } else {
        return Err("no vkGetPhysicalDeviceMemoryProperties2 (Vulkan 1.0 instance)".into());
    }
    let mem = props.memory_properties;
    let mut b = Budget {
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
