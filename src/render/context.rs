//! A headless wgpu device to render with when there is no window.

use super::RenderError;
use crate::device::{DeviceCaps, Want};

/// A headless wgpu device for rendering without a window (tests, `supercell render`).
pub struct GpuContext {
    /// The adapter the device came from.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// What the device can do.
    pub caps: DeviceCaps,
}

impl GpuContext {
    /// Opens the best adapter available (any backend compiled in; Vulkan on Linux, which
    /// is Mesa's lavapipe on machines without a GPU), with its full storage-binding limit and
    /// timestamp queries where supported ([`Want::Plain`]).
    pub fn headless() -> Result<GpuContext, RenderError> {
        let g = crate::device::open(&Want::Plain, "supercell render")
            .map_err(|e| RenderError::NoDevice(e.to_string()))?;
        Ok(GpuContext {
            adapter: g.adapter,
            device: g.device,
            queue: g.queue,
            caps: g.caps,
        })
    }

    /// "name (backend, device type)" of the adapter.
    pub fn describe(&self) -> String {
        self.caps.describe()
    }
}
