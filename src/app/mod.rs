//! The player (`supercell play`): the core that streams frames into GPU memory and renders
//! them ([`Player`]), its headless measurement run ([`headless`]), and the window with the
//! egui overlay ([`window`]), driven by keys, mouse or a test script ([`script`]).
//!
//! The renderer stays free of egui and winit: the window composes the renderer's output
//! texture and the overlay itself.

pub mod analysis;
mod config;
pub mod core;
pub mod direct;
mod faults;
mod figures;
pub mod gpumem;
pub mod gpus;
pub mod headless;
pub mod hostring;
pub mod legend;
pub mod movie;
pub mod offscreen;
pub mod overlay;
mod path;
pub mod ranks;
mod route;
pub mod script;
pub mod soak;
pub mod software;
pub mod stats;
pub mod window;

pub use self::core::{
    DirectEngine, FrameFault, FrameFaultKind, HostCopy, PathReport, PathSel, PlayError, Player,
    PlayerConfig, SavedScene, TickOutcome, look_problem,
};
pub use gpumem::{GpuMemory, gpu_memory};
pub use stats::{PathFigures, PathStats};

use crate::render::RenderError;

/// The wgpu objects the player draws with. On NVIDIA with CUDA↔Vulkan sharing the device
/// would come from `gpu::interop` (so direct-path slots are buffers CUDA writes); elsewhere
/// it is a plain wgpu device.
pub struct PlayerGpu {
    /// The instance (surfaces are created from it).
    pub instance: wgpu::Instance,
    /// The adapter.
    pub adapter: wgpu::Adapter,
    /// The device.
    pub device: wgpu::Device,
    /// Its queue.
    pub queue: wgpu::Queue,
    /// What the device can do.
    pub caps: crate::device::DeviceCaps,
    /// The CUDA GPU and the Vulkan device that is it, when CUDA↔Vulkan sharing works (the
    /// device above is then this one's).
    pub interop: Option<(crate::gpu::Gpu, crate::gpu::InteropDevice)>,
    /// Why there is no sharing, when there is none.
    pub interop_unavailable: Option<String>,
}

impl PlayerGpu {
    /// A new instance (environment overrides honoured, e.g. `WGPU_ADAPTER_NAME`).
    pub fn instance() -> wgpu::Instance {
        crate::device::instance(&crate::device::Want::HostImport)
    }

    /// Opens the best adapter of `instance` (compatible with `surface` when given), with
    /// its full buffer limits and timestamp queries where supported.
    pub fn open(
        instance: wgpu::Instance,
        surface: Option<&wgpu::Surface<'_>>,
    ) -> Result<PlayerGpu, RenderError> {
        // With VK_EXT_external_memory_host where the adapter has it: the host path's GPU
        // copies then read the host slots themselves.
        let g = crate::device::open_on(
            instance,
            surface,
            &crate::device::Want::HostImport,
            "supercell play",
        )
        .map_err(|e| RenderError::NoDevice(e.to_string()))?;
        Ok(PlayerGpu::without_sharing(g, None))
    }

    /// A player's device over an opened device that shares no memory with CUDA
    /// (`why`: what kept sharing from working, where it was tried).
    pub(crate) fn without_sharing(g: crate::device::GpuDevice, why: Option<String>) -> PlayerGpu {
        PlayerGpu {
            instance: g.instance,
            adapter: g.adapter,
            device: g.device,
            queue: g.queue,
            caps: g.caps,
            interop: None,
            interop_unavailable: why,
        }
    }

    /// Opens CUDA GPU 0 and the Vulkan device that is it, with memory sharing (the direct
    /// path), or says why not.
    pub fn open_shared() -> Result<PlayerGpu, String> {
        Self::open_shared_on(0)
    }

    /// Opens CUDA GPU `ordinal` and the Vulkan device that is it (the same device UUID),
    /// with memory sharing, or says why not.
    pub fn open_shared_on(ordinal: usize) -> Result<PlayerGpu, String> {
        crate::gpu::cuda_probe().map_err(|e| format!("no CUDA: {e}"))?;
        let gpu = crate::gpu::Gpu::open(ordinal).map_err(|e| format!("CUDA GPU {ordinal}: {e}"))?;
        let dev = crate::gpu::InteropDevice::open(&gpu)
            .map_err(|e| format!("CUDA↔Vulkan sharing: {e}"))?;
        Ok(PlayerGpu {
            instance: dev.instance.clone(),
            adapter: dev.adapter.clone(),
            device: dev.device.clone(),
            queue: dev.queue.clone(),
            caps: dev.caps.clone(),
            interop: Some((gpu, dev)),
            interop_unavailable: None,
        })
    }

    /// The shared device where it works, else any adapter (with the reason kept for the
    /// overlay and the JSON).
    pub fn open_best() -> Result<PlayerGpu, RenderError> {
        match Self::open_shared() {
            Ok(g) => Ok(g),
            Err(why) => {
                let mut g = Self::open(Self::instance(), None)?;
                g.interop_unavailable = Some(why);
                Ok(g)
            }
        }
    }

    /// "name (backend, device type)".
    pub fn describe(&self) -> String {
        self.caps.describe()
    }
}
