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
    match crate::device::vulkan::memory_budget(device) {
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
