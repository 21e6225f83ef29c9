//! The direct path's memory: ring slots that are wgpu buffers CUDA writes into (Vulkan
//! memory exported to CUDA, [`crate::gpu::interop`]), so cuFile's bytes are the bytes the
//! shader reads, with no copy.
//!
//! Where CUDA or the sharing is unavailable the player runs the host path only and says why;
//! it never substitutes a copy through host memory and calls it direct.

use std::sync::Arc;

use crate::gpu::{Gpu, InteropDevice, SharedBuffer, SlotLayout, SlotMemory};

/// Ring slots for the direct path: each part of each slot is CUDA-visible memory and a wgpu
/// buffer over the same bytes.
pub struct DirectSlots {
    /// The CUDA GPU the engine writes with.
    pub gpu: Gpu,
    /// Slot memories for the engine (device memory aliasing `buffers`).
    pub memories: Vec<SlotMemory>,
    /// The same slots as wgpu storage buffers, one per part, for the renderer.
    pub buffers: Vec<Vec<wgpu::Buffer>>,
}

/// Why there is no direct path when the player's device was not opened with sharing.
pub fn no_sharing_reason() -> String {
    match crate::gpu::cuda_probe() {
        Err(e) => format!("no CUDA: {e}"),
        Ok(()) => "the player's GPU device was opened without CUDA↔Vulkan sharing".into(),
    }
}

/// Makes `count` shared slots of `layout` on `dev` (the Vulkan device that is `gpu`): one
/// exported allocation per part of each slot.
pub fn open_direct_slots(
    gpu: &Gpu,
    dev: &InteropDevice,
    count: usize,
    layout: SlotLayout,
) -> Result<DirectSlots, String> {
    // Parts are multiples of 4 bytes (the last one rounded up), as wgpu's buffers must be.
    let part_len4 = |i: usize| layout.part_len(i).div_ceil(4) * 4;
    if part_len4(0) > dev.max_shared_bytes() {
        return Err(format!(
            "a slot part of {} bytes exceeds the largest shared buffer ({} bytes)",
            part_len4(0),
            dev.max_shared_bytes()
        ));
    }
    let slot4: u64 = (0..layout.parts()).map(part_len4).sum();
    let total = (count as u64).saturating_mul(slot4);
    if let Ok((free, _)) = gpu.mem_info()
        && total > free as u64
    {
        return Err(format!(
            "{count} shared slots of {slot4} bytes need {total} bytes, but the GPU has {free} bytes free"
        ));
    }
    let mut memories = Vec::with_capacity(count);
    let mut buffers = Vec::with_capacity(count);
    for i in 0..count {
        let mut parts = Vec::with_capacity(layout.parts());
        let mut wgpu_parts = Vec::with_capacity(layout.parts());
        for p in 0..layout.parts() {
            let shared = Arc::new(SharedBuffer::new(dev, gpu, part_len4(p)).map_err(|e| {
                format!("shared slot {i}, part {p} of {} bytes: {e}", part_len4(p))
            })?);
            // The slot memory keeps the CUDA mapping alive; the wgpu handle keeps the Vulkan
            // memory alive until the last submission reading it is done.
            parts.push(shared.part_memory(gpu));
            wgpu_parts.push(shared.wgpu().clone());
        }
        memories.push(
            SlotMemory::new(parts, layout.part_bytes())
                .map_err(|e| format!("shared slot {i}: {e}"))?,
        );
        buffers.push(wgpu_parts);
    }
    Ok(DirectSlots {
        gpu: gpu.clone(),
        memories,
        buffers,
    })
}
