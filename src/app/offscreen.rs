//! The window's picture without a window: the player's image and the egui overlay composed
//! into an offscreen texture and written as a PNG, exactly as the window composes them
//! (`play --headless --screenshot FILE`). This is how a machine with no display (a GPU
//! server) shows its live figures in a picture.
//!
//! Composition matches the window's: the renderer's `Rgba8Unorm` image (sRGB-encoded
//! values) is a texture egui paints full-screen behind the overlay, and egui blends in gamma
//! space on a non-sRGB target, so the pixels are the ones a window would show.

use std::path::Path;

use super::core::Player;
use super::overlay::{self, UiState};
use crate::render::{Image, LDR_FORMAT};

/// Passes egui runs before the picture is taken: its first pass only measures windows and
/// areas, and the overlay places its panels from the sizes of the pass before.
const LAYOUT_PASSES: usize = 4;

/// Composes `player`'s current image and the overlay (`ui`'s panels) into a picture of
/// `size` pixels and writes it to `path` as PNG.
pub fn write_overlay_png(
    player: &Player,
    ui: &mut UiState,
    size: (u32, u32),
    path: &Path,
) -> Result<(), String> {
    write_picture_png(player, player.output(), ui, size, path)
}

/// [`write_overlay_png`] with `image` (a texture of `player`'s device) behind the overlay:
/// the coordinator's presented image, which another GPU may have rendered and copied to
/// the display GPU's `player`.
pub fn write_picture_png(
    player: &Player,
    image: Option<&wgpu::Texture>,
    ui: &mut UiState,
    size: (u32, u32),
    path: &Path,
) -> Result<(), String> {
    let (w, h) = size;
    let device = player.device();
    let queue = player.queue();
    let max = device.limits().max_texture_dimension_2d;
    if w == 0 || h == 0 || w > max || h > max {
        return Err(format!(
            "a {w}x{h} picture: each side must be 1..={max} pixels on this device"
        ));
    }
    let mut renderer =
        egui_wgpu::Renderer::new(device, LDR_FORMAT, egui_wgpu::RendererOptions::default());
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
        label: Some("supercell offscreen overlay"),
    });
    // The image as an egui texture (a copy: the renderer's own texture is not sampled).
    let image = image.map(|out| {
        let extent = out.size();
        let tex = crate::device::texture_2d(
            device,
            "supercell offscreen image",
            (extent.width, extent.height),
            LDR_FORMAT,
            wgpu::TextureUsages::TEXTURE_BINDING | wgpu::TextureUsages::COPY_DST,
        );
        enc.copy_texture_to_texture(out.as_image_copy(), tex.as_image_copy(), extent);
        let view = tex.create_view(&Default::default());
        let id = renderer.register_native_texture(device, &view, wgpu::FilterMode::Linear);
        (tex, id)
    });
    ui.window_size = size;
    let ctx = egui::Context::default();
    let input = || egui::RawInput {
        screen_rect: Some(egui::Rect::from_min_size(
            egui::Pos2::ZERO,
            egui::vec2(w as f32, h as f32),
        )),
        ..Default::default()
    };
    let mut requests = Vec::new();
    let mut last = None;
    let mut freed = Vec::new();
    for _ in 0..LAYOUT_PASSES {
        let out = ctx.run_pass(input(), |c| {
            overlay::draw(c, player, ui, image.as_ref().map(|i| i.1), &mut requests)
        });
        // Every pass's texture updates (the font atlas comes in the first) are applied in
        // order; frees wait until the picture is drawn.
        let mut textures = out.textures_delta;
        for (id, deltas) in textures.set.drain() {
            for delta in &deltas {
                renderer.update_texture(device, queue, id, delta);
            }
        }
        freed.extend(textures.free.drain());
        textures.clear();
        last = Some((out.shapes, out.pixels_per_point));
    }
    let Some((shapes, pixels_per_point)) = last else {
        return Err("the overlay drew nothing".into());
    };
    let jobs = ctx.tessellate(shapes, pixels_per_point);
    let sd = egui_wgpu::ScreenDescriptor {
        size_in_pixels: [w, h],
        pixels_per_point,
    };
    let mut cmds = renderer.update_buffers(device, queue, &mut enc, &jobs, &sd);
    let target = crate::device::texture_2d(
        device,
        "supercell offscreen picture",
        (w, h),
        LDR_FORMAT,
        wgpu::TextureUsages::RENDER_ATTACHMENT | wgpu::TextureUsages::COPY_SRC,
    );
    egui_pass(
        &renderer,
        &mut enc,
        &target.create_view(&Default::default()),
        &jobs,
        &sd,
    );
    let (buf, bpr) = copy_to_buffer(device, &mut enc, &target);
    cmds.push(enc.finish());
    queue.submit(cmds);
    for id in &freed {
        renderer.free_texture(id);
    }
    write_png(device, &buf, bpr, (w, h), LDR_FORMAT, path)
}

/// Paints egui's `jobs` into `target`, cleared to black first.
pub(super) fn egui_pass(
    r: &egui_wgpu::Renderer,
    enc: &mut wgpu::CommandEncoder,
    target: &wgpu::TextureView,
    jobs: &[egui::ClippedPrimitive],
    sd: &egui_wgpu::ScreenDescriptor,
) {
    let pass = enc.begin_render_pass(&wgpu::RenderPassDescriptor {
        label: Some("supercell overlay"),
        color_attachments: &[Some(wgpu::RenderPassColorAttachment {
            view: target,
            resolve_target: None,
            depth_slice: None,
            ops: wgpu::Operations {
                load: wgpu::LoadOp::Clear(wgpu::Color::BLACK),
                store: wgpu::StoreOp::Store,
            },
        })],
        depth_stencil_attachment: None,
        timestamp_writes: None,
        occlusion_query_set: None,
        multiview_mask: None,
    });
    let mut pass = pass.forget_lifetime();
    r.render(&mut pass, jobs, sd);
}

/// Records a copy of `tex` (4 bytes per pixel) into a new read-back buffer; the buffer and
/// its bytes per row.
pub(super) fn copy_to_buffer(
    device: &wgpu::Device,
    enc: &mut wgpu::CommandEncoder,
    tex: &wgpu::Texture,
) -> (wgpu::Buffer, u32) {
    let r = crate::device::TextureReadback::record(device, enc, tex, 4);
    (r.buffer, r.row_bytes)
}

/// Reads back a picture copied by [`copy_to_buffer`] (RGBA or BGRA, 8 bits per channel)
/// and writes it to `path` as an opaque PNG.
pub(super) fn write_png(
    device: &wgpu::Device,
    buf: &wgpu::Buffer,
    bpr: u32,
    size: (u32, u32),
    format: wgpu::TextureFormat,
    path: &Path,
) -> Result<(), String> {
    let img = read_picture(device, buf, bpr, size, format)?;
    img.write_png(path).map_err(|e| e.to_string())
}

/// Reads back a picture copied by [`copy_to_buffer`] (RGBA or BGRA, 8 bits per channel) as
/// an opaque 8-bit image.
pub(super) fn read_picture(
    device: &wgpu::Device,
    buf: &wgpu::Buffer,
    bpr: u32,
    (w, h): (u32, u32),
    format: wgpu::TextureFormat,
) -> Result<Image, String> {
    let data = crate::device::map_read(device, buf, 0..buf.size(), None, None)
        .map_err(|e| e.to_string())?;
    let bgra = matches!(
        format,
        wgpu::TextureFormat::Bgra8Unorm | wgpu::TextureFormat::Bgra8UnormSrgb
    );
    let mut img = Image::new(w, h);
    for y in 0..h as usize {
        let row = &data[y * bpr as usize..][..w as usize * 4];
        let dst = &mut img.rgba8[y * w as usize * 4..][..w as usize * 4];
        for (d, s) in dst.chunks_exact_mut(4).zip(row.chunks_exact(4)) {
            if bgra {
                d.copy_from_slice(&[s[2], s[1], s[0], 255]);
            } else {
                d.copy_from_slice(&[s[0], s[1], s[2], 255]);
            }
        }
    }
    Ok(img)
}
