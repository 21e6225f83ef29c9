//! The devices a window plays on, and its swapchain's configuration.

use std::sync::Arc;

use winit::window::Window;

use super::WindowError;
use crate::app::PlayerGpu;
use crate::app::core::PlayError;
use crate::app::gpus;

/// The one player's device (one GPU), or every GPU's opened device (several), and the
/// window's surface on the presenting one.
pub(super) type Devices = (
    Option<PlayerGpu>,
    Option<Vec<gpus::OpenedGpu>>,
    wgpu::Surface<'static>,
);

/// The devices a window plays on and its surface. Several GPUs (`gpus`): each ordinal's
/// device as `play --headless --gpus` opens it, GPU 0's presenting. One GPU: the device that
/// shares memory with CUDA where there is one (the direct path), else any adapter that can
/// present to the window.
pub(super) fn open_devices(
    gpus: Option<&[usize]>,
    window: &Arc<Window>,
) -> Result<Devices, WindowError> {
    let no_surface =
        |e: wgpu::CreateSurfaceError| WindowError::Other(format!("cannot create a surface: {e}"));
    match gpus {
        Some(ordinals) => {
            let opened = gpus::open_gpus(ordinals).map_err(PlayError::from)?;
            for (k, g) in opened.iter().enumerate() {
                log::info!("play: GPU {k} (--gpus {}): {}", g.ordinal, g.matched);
            }
            let surface = opened[0]
                .gpu
                .instance
                .create_surface(window.clone())
                .map_err(no_surface)?;
            Ok((None, Some(opened), surface))
        }
        None => match PlayerGpu::open_shared() {
            Ok(g) => {
                let surface = g
                    .instance
                    .create_surface(window.clone())
                    .map_err(no_surface)?;
                Ok((Some(g), None, surface))
            }
            Err(why) => {
                let instance = PlayerGpu::instance();
                let surface = instance
                    .create_surface(window.clone())
                    .map_err(no_surface)?;
                let mut g = PlayerGpu::open(instance, Some(&surface)).map_err(PlayError::from)?;
                g.interop_unavailable = Some(why);
                Ok((Some(g), None, surface))
            }
        },
    }
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
