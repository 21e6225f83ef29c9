//! The renderer's settings as one value ([`RenderConfig`]): the path tracer's kernel
//! switches and sampling, and the denoiser's filter. The binary makes it once, from its
//! flags and the environment through the settings table (`crate::settings`,
//! docs/SETTINGS.md), and hands it to [`Renderer::with_config`](super::Renderer::with_config)
//! with the device's probed [`DeviceCaps`]; no renderer code reads the environment.
//!
//! The march has no switches left: its kernel variants lost their measurements and were
//! deleted (docs/PERFORMANCE.md, "Deleted switches").

use crate::device::DeviceCaps;

use super::denoise::DenoiseParams;
use super::path_tracer::{PathTracer, TracerKnobs};

/// Random numbers per sample drawn from the scrambled Sobol sequence at most.
pub const QMC_DIMS_MAX: u32 = 64;

/// Samples per pixel one path dispatch may add at most.
pub const SAMPLES_PER_DISPATCH_MAX: u32 = 16;

/// Samples per pixel one dispatch adds on a software rasteriser: a render of n samples is
/// n dispatches, each with its own uniform record. One sample per dispatch keeps every
/// invocation's loop trip count small: on Mesa's lavapipe, invocations that ran many
/// samples stopped early, all lanes of a SIMD group at the same iteration, and the image
/// came out about half as bright (consistent with gallivm's loop limiter, 65535 iterations
/// over all loops of an invocation; a hypothesis, not checked in Mesa's source).
pub const SAMPLES_PER_DISPATCH_SOFTWARE: u32 = 1;

/// Samples per pixel one dispatch adds on a GPU: a lane whose path ends early starts its
/// pixel's next sample instead of idling until the longest path of its warp ends. On the
/// H200 (storm at touchdown, 1080p, 2026-12-02) 4 gave 34.2 M samples/s against 28.8 with
/// one, and 16 no more than 4 (docs/bench/HISTORY.md, "Fifth round on the H200").
pub const SAMPLES_PER_DISPATCH_GPU: u32 = 4;

/// Everything the renderer is told rather than finds out: made once at the program's edge
/// and passed in. [`Default`] is what every setting's documented default gives.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct RenderConfig {
    /// The path kernel's speed switches (pipeline constants of `shaders/path.wgsl`).
    pub path_knobs: TracerKnobs,
    /// A path sample's first random numbers that come from the scrambled Sobol sequence
    /// (0 to [`QMC_DIMS_MAX`]; 0, the default, turns it off: on the storm it did not lower
    /// relMSE, docs/bench/HISTORY.md).
    pub qmc_dims: u32,
    /// Samples per pixel one path dispatch adds (1 to [`SAMPLES_PER_DISPATCH_MAX`]);
    /// `None`: by device kind ([`RenderConfig::samples_per_dispatch_on`]).
    pub samples_per_dispatch: Option<u32>,
    /// The path tracer's denoising filter.
    pub denoise: DenoiseParams,
}

impl RenderConfig {
    /// Samples per pixel one path dispatch adds on the device `caps` describes: the
    /// configured count (clamped to 1..=[`SAMPLES_PER_DISPATCH_MAX`]), else
    /// [`SAMPLES_PER_DISPATCH_SOFTWARE`] on a software rasteriser and
    /// [`SAMPLES_PER_DISPATCH_GPU`] on a GPU.
    pub fn samples_per_dispatch_on(&self, caps: &DeviceCaps) -> u32 {
        match self.samples_per_dispatch {
            Some(n) => n.clamp(1, SAMPLES_PER_DISPATCH_MAX),
            None if caps.software => SAMPLES_PER_DISPATCH_SOFTWARE,
            None => SAMPLES_PER_DISPATCH_GPU,
        }
    }

    /// The Sobol dimensions in use (clamped to [`QMC_DIMS_MAX`]).
    pub fn qmc_dims(&self) -> u32 {
        self.qmc_dims.min(QMC_DIMS_MAX)
    }

    /// The path tracer this configuration asks for on the device `caps` describes.
    pub(super) fn path_tracer(&self, device: &wgpu::Device, caps: &DeviceCaps) -> PathTracer {
        PathTracer::new(
            device,
            self.path_knobs,
            self.qmc_dims(),
            self.samples_per_dispatch_on(caps),
            self.denoise,
        )
    }
}
