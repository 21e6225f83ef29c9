//! The devices a window plays on, and its swapchain's configuration.

use std::sync::Arc;

use winit::window::Window;

use super::{PlayOn, WindowError};
use crate::app::PlayerGpu;
use crate::app::core::PlayError;
use crate::app::gpus;

/// The devices a window plays on: the one player's device (one GPU), every GPU's opened
/// device (several), or this rank's GPUs across ranks, each named (the other ranks' GPUs
/// are theirs).
pub(super) enum Opened {
    One(Box<PlayerGpu>),
    Gpus(Vec<gpus::OpenedGpu>),
    Rank(Vec<(PlayerGpu, gpus::GpuName)>),
}

impl Opened {
    /// The presenting device: the one GPU's, or GPU 0's.
    pub(super) fn lead(&self) -> &PlayerGpu {
        match self {
            Opened::One(g) => g,
            Opened::Rank(v) => &v[0].0,
            Opened::Gpus(o) => &o[0].gpu,
        }
    }
}

/// The devices a window plays on (as `on` says) and its surface on the presenting one.
/// Several GPUs: each ordinal's device as `play --headless --gpus` opens it, GPU 0's
/// presenting. Across ranks: this rank's GPUs as the headless run across ranks opens them
/// ([`gpus::open_rank_gpus`]: its local rank's, or those `--gpus` names), the first
/// presenting. One GPU: the device that shares memory with CUDA where there
/// is one (the direct path), else any adapter that can present to the window.
pub(super) fn open_devices(
    on: &PlayOn,
    window: &Arc<Window>,
) -> Result<(Opened, wgpu::Surface<'static>), WindowError> {
    let no_surface =
        |e: wgpu::CreateSurfaceError| WindowError::Other(format!("cannot create a surface: {e}"));
    let opened = match on {
        PlayOn::Gpus(ordinals) => {
            let opened = gpus::open_gpus(ordinals).map_err(PlayError::from)?;
            for (k, g) in opened.iter().enumerate() {
                log::info!("play: GPU {k} (--gpus {}): {}", g.ordinal, g.matched);
            }
            Opened::Gpus(opened)
        }
        PlayOn::Ranks(r) => {
            let opened =
                gpus::open_rank_gpus(&*r.ranks, r.gpus.as_deref()).map_err(PlayError::from)?;
            for (_, name) in &opened {
                log::info!("play: rank 0: {}", name.matched);
            }
            Opened::Rank(opened)
        }
        PlayOn::One => match PlayerGpu::open_shared() {
            Ok(g) => Opened::One(Box::new(g)),
            Err(why) => {
                let instance = PlayerGpu::instance();
                let surface = instance
                    .create_surface(window.clone())
                    .map_err(no_surface)?;
                let mut g = PlayerGpu::open(instance, Some(&surface)).map_err(PlayError::from)?;
                g.interop_unavailable = Some(why);
                return Ok((Opened::One(Box::new(g)), surface));
            }
        },
    };
    let surface = opened
        .lead()
        .instance
        .create_surface(window.clone())
        .map_err(no_surface)?;
    Ok((opened, surface))
}

/// The swapchain's configuration for a window of `size`: a plain (not sRGB) 8-bit format
/// (see the module's note on composition), vsync, two frames of latency.
pub(super) fn surface_config(
    caps: &wgpu::SurfaceCapabilities,
    (sw, sh): (u32, u32),
) -> Result<wgpu::SurfaceConfiguration, WindowError> {
    let format = caps
        .formats
        .iter()
        .copied()
        .find(|f| {
            !f.is_srgb()
                && matches!(
                    f,
                    wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Rgba8Unorm
                )
        })
        .or_else(|| caps.formats.first().copied())
        .ok_or_else(|| WindowError::Other("the surface supports no format".into()))?;
    Ok(wgpu::SurfaceConfiguration {
        usage: wgpu::TextureUsages::RENDER_ATTACHMENT,
        format,
        width: sw,
        height: sh,
        present_mode: wgpu::PresentMode::AutoVsync,
        desired_maximum_frame_latency: 2,
        alpha_mode: caps
            .alpha_modes
            .first()
            .copied()
            .unwrap_or(wgpu::CompositeAlphaMode::Auto),
        view_formats: vec![],
        color_space: wgpu::SurfaceColorSpace::Auto,
    })
}
