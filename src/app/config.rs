//! The player's settings, the path names and the player's error.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use crate::ingest::FaultPlan;
use crate::pipeline::PlayMode;
use crate::render::RenderError;

/// What can go wrong in the player.
#[derive(Debug, thiserror::Error)]
pub enum PlayError {
    /// The scene or dataset could not be opened (a message naming the file).
    #[error("{0}")]
    Scene(String),
    /// The scene file or its dataset could not be loaded or opened.
    #[error(transparent)]
    SceneFile(#[from] crate::scene::SceneError),
    /// The dataset refused what was asked of it.
    #[error(transparent)]
    Dataset(#[from] crate::dataset::DatasetError),
    /// No GPU device, or the GPU reported an error.
    #[error(transparent)]
    Render(#[from] RenderError),
    /// An ingest engine failed.
    #[error(transparent)]
    Ingest(#[from] crate::ingest::IngestError),
    /// The caller asked for something impossible.
    #[error("{0}")]
    Usage(String),
}

impl From<crate::gpu::GpuError> for PlayError {
    fn from(e: crate::gpu::GpuError) -> PlayError {
        PlayError::Ingest(e.into())
    }
}

/// Which of the two frame paths.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathSel {
    /// GPUDirect Storage (or staged CUDA copies) into shared GPU buffers.
    Direct,
    /// Reads into host memory, uploaded through wgpu.
    Host,
}

impl PathSel {
    /// "direct" or "host".
    pub fn name(self) -> &'static str {
        match self {
            PathSel::Direct => "direct",
            PathSel::Host => "host",
        }
    }
    pub(super) fn index(self) -> usize {
        match self {
            PathSel::Direct => 0,
            PathSel::Host => 1,
        }
    }
    /// The other path.
    pub fn other(self) -> PathSel {
        match self {
            PathSel::Direct => PathSel::Host,
            PathSel::Host => PathSel::Direct,
        }
    }
}

/// How the host path moves a frame from its host slot to the GPU.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostCopy {
    /// The GPU copies from the host slots themselves where the device can import host
    /// memory (`VK_EXT_external_memory_host`); else as [`HostCopy::Staging`].
    #[default]
    Auto,
    /// The CPU copies each frame into a mapped staging buffer, then the GPU copies that.
    Staging,
    /// Reads land in a small ring of host buffers imported into Vulkan, and the GPU copies
    /// each into the slot's device buffers as it lands (needs `VK_EXT_external_memory_host`;
    /// no host slots).
    Ring,
}

/// Which engine the direct path runs into the shared slots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum DirectEngine {
    /// GPUDirect Storage where cuFile reads peer to peer (nvidia-fs or PCI P2PDMA); staged
    /// CUDA copies where cuFile would run in compatibility mode (its reads bounce through
    /// host memory on its own threads, slower than the staged engine's io_uring reads into
    /// pinned buffers: `bench` read 24.4 against 42.7 GB/s on the H200's 16-lane rig,
    /// 2026-12-01).
    #[default]
    Auto,
    /// cuFile, whatever its mode (falls back to staged only where cuFile cannot run).
    Gds,
    /// Staged CUDA copies (io_uring into pinned host buffers, then to the slots).
    Staged,
}

/// Player settings.
#[derive(Clone, Debug)]
pub struct PlayerConfig {
    /// Attributes in slot order (default: the scene's).
    pub attributes: Option<Vec<String>>,
    /// Render size.
    pub width: u32,
    /// Render height.
    pub height: u32,
    /// Ring slots per path (default: from frame size and memory, at least 3).
    pub slots: Option<usize>,
    /// Bytes of a slot part (a power of two of at least 64 KiB); `None`: the device's (its
    /// largest buffer and binding). Tests (and `SUPERCELL_PART_BYTES`, read by the binary)
    /// force small parts so small frames span several.
    pub part_bytes: Option<u64>,
    /// I/O threads per engine.
    pub threads: usize,
    /// Reads in flight per thread.
    pub queue_depth: usize,
    /// Largest read, bytes.
    pub io_size: usize,
    /// Start on this path (falls back to host when direct is unavailable).
    pub path: PathSel,
    /// The host path's route to the GPU.
    pub host_copy: HostCopy,
    /// The direct path's engine.
    pub direct_engine: DirectEngine,
    /// End-of-timeline behaviour.
    pub mode: PlayMode,
    /// Playback rate; `None`: as fast as frames arrive.
    pub speed_fps: Option<f64>,
    /// Start playing.
    pub playing: bool,
    /// First frame.
    pub start_frame: u32,
    /// Start at the first frame with data instead of `start_frame` where the scene's looks
    /// were suggested from the data (a dataset played without a scene) and its first
    /// frames are empty: set where no start frame was asked for.
    pub start_at_data: bool,
    /// Check every extent's CRC-32 on arrival (`--verify`); a mismatching frame is not
    /// shown and its error is reported.
    pub verify: bool,
    /// Tests only: stand a second host-path engine in for the direct path (reported as
    /// "loopback (test)", never as direct), so the run-time toggle's drain and hand-over can
    /// be exercised on machines without CUDA.
    #[doc(hidden)]
    pub loopback_direct: bool,
    /// A frame whose reads make no progress for this long is marked damaged and playback
    /// goes on; `None`: wait forever.
    pub read_timeout: Option<Duration>,
    /// Which pages back the host path's slots (`SUPERCELL_HOST_HUGEPAGES`, read by the
    /// binary).
    pub host_pages: crate::gpu::HostPages,
    /// Faults to inject into the engines (tests, demonstrations; the binary passes the plan
    /// in `SUPERCELL_FAULTS`); `None`: none.
    pub faults: Option<Arc<FaultPlan>>,
    /// How the host engines read: io_uring where allowed (else pread), or pread.
    pub io_backend: crate::ingest::IoBackend,
    /// The dataset's frames this player plays, in order, as a timeline of its own (frame
    /// `i` of the player is frame `frames[i]` of the dataset; `start_frame` counts in the
    /// player's frames): one GPU of several owns these. `None`: every frame.
    pub frames: Option<Vec<u32>>,
    /// The renderer's settings (the path tracer's and the denoiser's; docs/SETTINGS.md).
    pub render: crate::render::RenderConfig,
    /// Path mode shows the denoised mean (the default; `SUPERCELL_DENOISE=off`, read by the
    /// binary, shows the raw mean).
    pub path_denoise: bool,
}

impl Default for PlayerConfig {
    fn default() -> Self {
        PlayerConfig {
            attributes: None,
            width: 1280,
            height: 720,
            slots: None,
            part_bytes: None,
            threads: 4,
            queue_depth: 8,
            io_size: 1 << 20,
            path: PathSel::Direct,
            host_copy: HostCopy::Auto,
            direct_engine: DirectEngine::Auto,
            mode: PlayMode::Loop,
            speed_fps: None,
            playing: true,
            start_frame: 0,
            start_at_data: false,
            verify: false,
            loopback_direct: false,
            read_timeout: Some(crate::ingest::DEFAULT_READ_TIMEOUT),
            host_pages: crate::gpu::HostPages::Huge,
            faults: None,
            io_backend: crate::ingest::IoBackend::Auto,
            frames: None,
            render: crate::render::RenderConfig::default(),
            path_denoise: true,
        }
    }
}
