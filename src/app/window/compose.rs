//! Composition: the renderer's image and the egui overlay into the swapchain, and a
//! screenshot of both when asked or a recording runs.

use std::path::PathBuf;

use super::super::offscreen::{self, egui_pass};
use super::super::overlay::{self, UiRequest, UiState};
use super::{Gfx, WindowError};

/// Composes the image and the overlay into the swapchain (and a screenshot when asked, and
/// the recording's next picture while one runs).
pub(super) fn compose(
    g: &mut Gfx,
    ui: &mut UiState,
    requests: &mut Vec<UiRequest>,
    screenshot: Option<PathBuf>,
) -> Result<(), WindowError> {
    let device = g.device.clone();
    let queue = g.queue.clone();
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("supercell compose"),
    });
    sync_display(g, &device, &mut enc);
    let raw = g.egui_state.take_egui_input(&g.window);
    let image = g.display.as_ref().map(|d| d.1);
    let player = g.play.lead();
    let full = g
        .egui_ctx
        .run_pass(raw, |ctx| overlay::draw(ctx, player, ui, image, requests));
    g.egui_state
        .handle_platform_output(&g.window, full.platform_output);
    let jobs = g.egui_ctx.tessellate(full.shapes, full.pixels_per_point);
    let mut textures = full.textures_delta;
    for (id, deltas) in textures.set.drain() {
        for delta in &deltas {
            g.egui_renderer.update_texture(&device, &queue, id, delta);
        }
    }
    // Freed after this frame's submission (egui may still draw them in it).
    let free: Vec<egui::TextureId> = textures.free.drain().collect();
    textures.clear();
    let frame = match g.surface.get_current_texture() {
        wgpu::CurrentSurfaceTexture::Success(t) | wgpu::CurrentSurfaceTexture::Suboptimal(t) => t,
        wgpu::CurrentSurfaceTexture::Outdated | wgpu::CurrentSurfaceTexture::Lost => {
            g.surface.configure(&device, &g.config);
            queue.submit([enc.finish()]);
            free.iter().for_each(|id| g.egui_renderer.free_texture(id));
            return Ok(());
        }
        wgpu::CurrentSurfaceTexture::Timeout | wgpu::CurrentSurfaceTexture::Occluded => {
            queue.submit([enc.finish()]);
            free.iter().for_each(|id| g.egui_renderer.free_texture(id));
            return Ok(());
        }
        other => {
            return Err(WindowError::Other(format!(
                "cannot get the next swapchain image: {other:?}"
            )));
        }
    };
    let sd = egui_wgpu::ScreenDescriptor {
        size_in_pixels: [g.config.width, g.config.height],
        pixels_per_point: full.pixels_per_point,
    };
    let mut cmds = g
        .egui_renderer
        .update_buffers(&device, &queue, &mut enc, &jobs, &sd);
    let target = frame.texture.create_view(&Default::default());
    egui_pass(&g.egui_renderer, &mut enc, &target, &jobs, &sd);
    let recording = g.recorder.active();
    let shot = (screenshot.is_some() || recording).then(|| {
        let (w, h) = (g.config.width, g.config.height);
        let tex = crate::device::texture_2d(
            &device,
            "supercell screenshot",
            (w, h),
            g.config.format,
            wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
        );
        egui_pass(
            &g.egui_renderer,
            &mut enc,
            &tex.create_view(&Default::default()),
            &jobs,
            &sd,
        );
        let (buf, bpr) = offscreen::copy_to_buffer(&device, &mut enc, &tex);
        (buf, bpr, w, h)
    });
    cmds.push(enc.finish());
    queue.submit(cmds);
    g.window.pre_present_notify();
    queue.present(frame);
    for id in &free {
        g.egui_renderer.free_texture(id);
    }
    if let Some((buf, bpr, w, h)) = shot {
        let picture = offscreen::read_picture(&device, &buf, bpr, (w, h), g.config.format)
            .map_err(|e| WindowError::Other(format!("screenshot: {e}")))?;
        if let Some(path) = screenshot {
            picture
                .write_png(&path)
                .map_err(|e| WindowError::Other(format!("screenshot: {e}")))?;
        }
        if recording && let Some(said) = g.recorder.push(&picture, ui) {
            ui.message = Some((said, std::time::Instant::now()));
        }
    }
    Ok(())
}

/// Keeps the display texture in step with the renderer's image: (re)made and registered with
/// egui when the image's size changes, and the image copied in when a new one was rendered.
fn sync_display(g: &mut Gfx, device: &wgpu::Device, enc: &mut wgpu::CommandEncoder) {
    // The picture on screen: the one player's image, or the frame presented on GPU 0 (its
    // own image, or the copy of another GPU's).
    let source = g.play.picture();
    if let Some(out) = source {
        let size = (out.width(), out.height());
        if g.display.as_ref().is_none_or(|d| d.2 != size) {
            let tex = crate::device::texture_2d(
                device,
                "supercell display",
                (size.0, size.1),
                crate::render::LDR_FORMAT,
                wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
            );
            let view = tex.create_view(&Default::default());
            let id = match g.display.take() {
                Some((_, id, _)) => {
                    g.egui_renderer.update_egui_texture_from_wgpu_texture(
                        device,
                        &view,
                        wgpu::FilterMode::Linear,
                        id,
                    );
                    id
                }
                None => {
                    g.egui_renderer
                        .register_native_texture(device, &view, wgpu::FilterMode::Linear)
                }
            };
            g.display = Some((tex, id, size));
            g.image_fresh = true;
        }
        if g.image_fresh
            && let Some((tex, _, _)) = &g.display
        {
            enc.copy_texture_to_texture(
                out.as_image_copy(),
                tex.as_image_copy(),
                wgpu::Extent3d {
                    width: size.0,
                    height: size.1,
                    depth_or_array_layers: 1,
                },
            );
            g.image_fresh = false;
        }
    }
}
