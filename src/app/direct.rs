//! The direct path's memory: ring slots that are wgpu buffers CUDA writes into (Vulkan
//! memory exported to CUDA, [`crate::gpu::interop`]), so cuFile's bytes are the bytes the
//! shader reads, with no copy.
//!
//! Where CUDA or the sharing is unavailable the player runs the host path only and says why;
//! it never substitutes a copy through host memory and calls it direct.

use std::sync::Arc;

use crate::gpu::{Gpu, InteropDevice, SharedBuffer, SlotMemory};

/// Ring slots for the direct path: each is CUDA-visible memory and a wgpu buffer over the
/// same bytes.
pub struct DirectSlots {
    /// The CUDA GPU the engine writes with.
    pub gpu: Gpu,
    /// Slot memories for the engine (device memory aliasing `buffers`).
    pub memories: Vec<SlotMemory>,
    /// The same slots as wgpu storage buffers, for the renderer.
    pub buffers: Vec<wgpu::Buffer>,
}

/// Why there is no direct path when the player's device was not opened with sharing.
pub fn no_sharing_reason() -> String {
    match crate::gpu::cuda_probe() {
        Err(e) => format!("no CUDA: {e}"),
        Ok(()) => "the player's GPU device was opened without CUDA↔Vulkan sharing".into(),
    }
}

/// Makes `count` shared slots of `len` bytes on `dev` (the Vulkan device that is `gpu`).
pub fn open_direct_slots(
    gpu: &Gpu,
    dev: &InteropDevice,
    count: usize,
    len: usize,
) -> Result<DirectSlots, String> {
    let len4 = (len as u64).div_ceil(4) * 4;
    if len4 > dev.max_shared_bytes() {
        return Err(format!(
            "a frame of {len} bytes exceeds the largest shared buffer ({} bytes)",
            dev.max_shared_bytes()
        ));
    }
    let total = (count as u64).saturating_mul(len4);
    if let Ok((free, _)) = gpu.mem_info()
        && total > free as u64
    {
        return Err(format!(
            "{count} shared slots of {len4} bytes need {total} bytes, but the GPU has {free} bytes free"
        ));
    }
    let mut memories = Vec::with_capacity(count);
    let mut buffers = Vec::with_capacity(count);
    for i in 0..count {
        let shared = Arc::new(
            SharedBuffer::new(dev, gpu, len4)
                .map_err(|e| format!("shared slot {i} of {len4} bytes: {e}"))?,
        );
        // The slot memory keeps the CUDA mapping alive; the wgpu handle keeps the Vulkan
        // memory alive until the last submission reading it is done.
        memories.push(shared.slot_memory(gpu));
        buffers.push(shared.wgpu().clone());
    }
    Ok(DirectSlots {
        gpu: gpu.clone(),
        memories,
        buffers,
    })
}
