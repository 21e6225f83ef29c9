//! The seam to the direct path's memory: ring slots that are wgpu buffers CUDA writes into
//! (Vulkan memory exported to CUDA), so cuFile's bytes are the bytes the shader reads.
//!
//! The shared buffers come from `gpu::interop` (built on its own branch). Until it is part
//! of this build, [`open_direct_slots`] says why the direct path is unavailable, and the
//! player runs the host path only; it never substitutes a copy through host memory and calls
//! it direct.

use crate::gpu::{Gpu, SlotMemory};

/// Ring slots for the direct path: each is CUDA-visible memory and a wgpu buffer over the
/// same bytes.
pub struct DirectSlots {
    /// The CUDA context the engine writes with.
    pub gpu: Gpu,
    /// Slot memories for the engine (device memory aliasing `buffers`).
    pub memories: Vec<SlotMemory>,
    /// The same slots as wgpu storage buffers, for the renderer.
    pub buffers: Vec<wgpu::Buffer>,
}

/// Why the direct path cannot run here, checked before anything is allocated: no CUDA
/// driver, or no CUDA↔Vulkan sharing in this build.
pub fn direct_unavailable_reason() -> Option<String> {
    if let Err(e) = crate::gpu::cuda_probe() {
        return Some(format!("no CUDA: {e}"));
    }
    Some(
        "CUDA↔Vulkan shared buffers (gpu::interop) are not part of this build, so GPUDirect \
         reads cannot land in the renderer's memory without a host copy"
            .into(),
    )
}

/// Opens `count` direct-path slots of `len` bytes on the wgpu `device`, or says why not.
pub fn open_direct_slots(
    _device: &wgpu::Device,
    _count: usize,
    _len: usize,
) -> Result<DirectSlots, String> {
    Err(direct_unavailable_reason().unwrap_or_else(|| "direct path unavailable".into()))
}
