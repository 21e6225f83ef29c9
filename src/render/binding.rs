//! What both techniques bind as group 0: the bound frame (its parts and where each grid
//! lies in them), the uniforms and transfer functions, the output images and the
//! acceleration buffers, with the layouts of each count of declared parts. The march
//! ([`MarchPipeline`](super::march::MarchPipeline)) draws and builds the acceleration
//! grids through it; the path tracer and the point sampler read it.

use std::collections::HashMap;
use std::num::NonZeroU64;

use super::RenderError;
use super::layouts::{HDR_FORMAT, LDR_FORMAT, PipelineLayouts, make_layouts, storage_entry};
use super::params::{GpuGrid, GpuParams, MAX_ATTRIBUTES, MAX_PARTS};
use super::parts::{
    BoundParts, GridInParts, STORAGE_BUFFERS_PER_STAGE, SlotPart, check_grid_count,
    device_part_bytes, locate_grids, parts_of_device,
};
use super::scoped::create_scoped;
use super::shader::{ACCEL_CELLS, MIN_PART_BYTES, PART_BINDING, ShaderConfig};
use crate::device::DeviceCaps;

/// Bytes per pixel of the two output textures, their read-back copies and the host image.
const HOST_BYTES_PER_PIXEL: u64 = 4 + 16 + 4 + 16;

/// Bytes of `AccelInfo` in common.wgsl: a 32-byte record per channel, four u32 and the sun
/// cells' 32-byte record.
const ACCEL_INFO_BYTES: u64 = MAX_ATTRIBUTES as u64 * 32 + 16 + 32;

/// The output images of one size.
pub(super) struct Targets {
    pub(super) width: u32,
    pub(super) height: u32,
    pub(super) ldr: wgpu::Texture,
    pub(super) hdr: wgpu::Texture,
    /// Views made once per size, not per bind group.
    pub(super) ldr_view: wgpu::TextureView,
    pub(super) hdr_view: wgpu::TextureView,
}

/// How much of the channels and parts a frame uses: the shaders walk only these (every channel
/// and every part's read costs instructions on every sample). Parts are rounded up to a
/// power of two so that few pipelines serve every frame; channels are exact (on the H200 a
/// frame of one attribute marched 22 % faster walking one channel than four; docs/bench/HISTORY.md,
/// "Sixth round on the H200").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct FrameShape {
    /// 1 to [`MAX_ATTRIBUTES`]: the frame's channels.
    pub(super) attr_channels: u32,
    /// 1, 2, 4, 8, 16, 32 or 64, at most the device's parts.
    pub(super) parts: u32,
}

impl FrameShape {
    /// The shape of a frame whose highest bound channel is `channels - 1`, in `parts` parts, on a
    /// device that binds `max_parts`.
    pub(super) fn of(channels: usize, parts: usize, max_parts: usize) -> FrameShape {
        FrameShape {
            attr_channels: channels.clamp(1, MAX_ATTRIBUTES) as u32,
            parts: parts.max(1).next_power_of_two().min(max_parts) as u32,
        }
    }

    /// Parts its shaders and bind groups declare.
    pub(super) fn declared_parts(self) -> u32 {
        self.parts.max(MAX_PARTS as u32)
    }

    pub(super) fn config(self, accel_cells: u32, part_bytes: u64) -> ShaderConfig {
        ShaderConfig {
            accel_cells,
            part_bytes,
            attr_channels: self.attr_channels,
            parts: self.parts,
        }
    }
}

/// The acceleration and sun grids' buffers (shaders/accel.wgsl writes them, the march and
/// the path tracer read them) and the acceleration passes' indirect dispatch arguments.
pub(super) struct AccelBuffers {
    /// Group 1 of the accel info pipeline: the dispatch arguments.
    pub(super) args_bind_group: wgpu::BindGroup,
    pub(super) args: wgpu::Buffer,
    /// Per channel, [`FrameBinding::accel_cells`] cells of 4 floats (sort-last reads and
    /// writes them from the host, and passes the composite through them).
    pub(super) cells: wgpu::Buffer,
    sun: wgpu::Buffer,
    /// `AccelInfo` (sort-last reads the cell layout back).
    pub(super) info: wgpu::Buffer,
}

/// Group 0 of every pipeline and what it binds. See the module documentation.
pub(super) struct FrameBinding {
    device: wgpu::Device,
    caps: DeviceCaps,
    /// The layouts of each count of declared parts met so far.
    layouts: HashMap<u32, PipelineLayouts>,
    /// The dispatch arguments' bind group layout (every accel info pipeline's second group).
    args_layout: wgpu::BindGroupLayout,
    /// Parts this device binds for one frame.
    max_parts: usize,
    /// Bytes of one part (a power of two) the shaders were built for.
    part_bytes: u64,
    /// Acceleration cells per channel at most.
    accel_cells: u32,
    /// The bound frame's shape.
    shape: FrameShape,
    uniforms: wgpu::Buffer,
    tf: wgpu::Buffer,
    /// Bound in place of unused parts (no grid reads them).
    dummy: wgpu::Buffer,
    /// The bound frame's parts: buffer, offset, size.
    parts: Vec<(wgpu::Buffer, u64, u64)>,
    /// Where each channel's grid lies in the parts (uniform data).
    grid_bases: [GpuGrid; MAX_ATTRIBUTES],
    targets: Option<Targets>,
    /// Group 0 of the march and the path tracer (acceleration buffers read-only), and of
    /// the acceleration passes (writable); made again when the frame or the images change.
    march_group: Option<wgpu::BindGroup>,
    accel_group: Option<wgpu::BindGroup>,
    accel: AccelBuffers,
}

impl FrameBinding {
    /// The binding of an empty frame on `device` with parts of `part_bytes` (checked by
    /// [`checked_part_bytes`]). Creates GPU objects: call inside error scopes.
    pub(super) fn new(device: &wgpu::Device, caps: &DeviceCaps, part_bytes: u64) -> FrameBinding {
        let per_stage = device.limits().max_storage_buffers_per_shader_stage;
        // Acceleration cells per channel: as many as one binding of every channel's cells holds
        // (16 bytes each), up to ACCEL_CELLS.
        let accel_cells = (caps.max_storage_binding / (16 * MAX_ATTRIBUTES as u64))
            .min(u64::from(ACCEL_CELLS))
            .max(1 << 12) as u32;
        let accel_cells = 1u32 << (31 - accel_cells.leading_zeros());
        let args_layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("supercell accel dispatch"),
            entries: &[storage_entry(0, false)],
        });
        let max_parts = parts_of_device(per_stage);
        // The shape of a frame with up to four attributes in one part; others are built
        // when a frame needs them.
        let shape = FrameShape::of(1, 1, max_parts);
        let layouts = make_layouts(device, &args_layout, shape.declared_parts());
        let buf = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            crate::device::buffer(device, label, size, usage)
        };
        let storage_dst = wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST;
        let uniforms = buf(
            "supercell params",
            std::mem::size_of::<GpuParams>() as u64,
            storage_dst,
        );
        let tf = buf(
            "supercell transfer functions",
            (MAX_ATTRIBUTES * super::transfer::TF_SIZE * 16) as u64,
            storage_dst,
        );
        let dummy = buf("supercell empty grid", 256, wgpu::BufferUsages::STORAGE);
        let cells = buf(
            "supercell accel cells",
            u64::from(accel_cells) * 16 * MAX_ATTRIBUTES as u64,
            wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
        );
        let sun = buf(
            "supercell sun grid",
            u64::from(accel_cells) * 4,
            wgpu::BufferUsages::STORAGE,
        );
        let info = buf(
            "supercell accel info",
            ACCEL_INFO_BYTES,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
        );
        let args = buf(
            "supercell accel dispatch",
            48,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::INDIRECT,
        );
        let args_bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("supercell accel dispatch"),
            layout: &args_layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: args.as_entire_binding(),
            }],
        });
        FrameBinding {
            device: device.clone(),
            caps: caps.clone(),
            layouts: HashMap::from([(shape.declared_parts(), layouts)]),
            args_layout,
            max_parts,
            part_bytes,
            accel_cells,
            shape,
            uniforms,
            tf,
            dummy,
            parts: Vec::new(),
            grid_bases: [GpuGrid::default(); MAX_ATTRIBUTES],
            targets: None,
            march_group: None,
            accel_group: None,
            accel: AccelBuffers {
                args_bind_group,
                args,
                cells,
                sun,
                info,
            },
        }
    }

    /// The device it binds on.
    pub(super) fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Parts this device binds for one frame.
    pub(super) fn max_parts(&self) -> usize {
        self.max_parts
    }

    /// Bytes of one part.
    pub(super) fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    /// The bound frame's shape.
    pub(super) fn shape(&self) -> FrameShape {
        self.shape
    }

    /// The shader configuration of frames of `shape`.
    pub(super) fn config_of(&self, shape: FrameShape) -> ShaderConfig {
        shape.config(self.accel_cells, self.part_bytes)
    }

    /// The layouts of frames declaring `declared` parts ([`ensure_layouts`] made them).
    ///
    /// [`ensure_layouts`]: Self::ensure_layouts
    pub(super) fn layouts(&self, declared: u32) -> &PipelineLayouts {
        &self.layouts[&declared]
    }

    /// Whether the bound frame has a grid in channel `a`.
    pub(super) fn has_grid(&self, a: usize) -> bool {
        self.grid_bases.get(a).is_some_and(|g| g.words > 0)
    }

    /// Acceleration cells per channel (the shaders' `ACCEL_CELLS`).
    pub(super) fn accel_cells(&self) -> u32 {
        self.accel_cells
    }

    /// The acceleration buffers and dispatch arguments.
    pub(super) fn accel(&self) -> &AccelBuffers {
        &self.accel
    }

    /// The output images, once a render made them.
    pub(super) fn targets(&self) -> Option<&Targets> {
        self.targets.as_ref()
    }

    /// Group 0 of the march and the path tracer ([`prepare`](Self::prepare) made it).
    pub(super) fn march_group(&self) -> &wgpu::BindGroup {
        self.march_group.as_ref().expect("prepared before encoding")
    }

    /// Group 0 of the acceleration passes ([`prepare`](Self::prepare) made it).
    pub(super) fn accel_group(&self) -> &wgpu::BindGroup {
        self.accel_group.as_ref().expect("prepared before encoding")
    }

    /// Checks a frame's `parts` and `grids` and says which parts they bind and where each
    /// grid lies in them ([`locate_grids`]).
    pub(super) fn locate(
        &self,
        parts: &[SlotPart<'_>],
        grids: &[Option<GridInParts>],
    ) -> Result<BoundParts, RenderError> {
        check_grid_count(grids.len())?;
        locate_grids(
            parts,
            grids,
            self.max_parts,
            self.part_bytes,
            u64::from(self.caps.storage_offset_alignment),
        )
    }

    /// Builds the layouts of frames declaring `declared` parts, where not built yet.
    pub(super) fn ensure_layouts(&mut self, declared: u32) -> Result<(), RenderError> {
        if !self.layouts.contains_key(&declared) {
            let (device, args_layout) = (&self.device, &self.args_layout);
            let built = create_scoped(
                device,
                || format!("building the layouts of {declared} parts"),
                || make_layouts(device, args_layout, declared),
            )?;
            self.layouts.insert(declared, built);
        }
        Ok(())
    }

    /// Binds the frame of `parts` that `bound` located, of `shape` (whose layouts exist).
    pub(super) fn bind(&mut self, parts: &[SlotPart<'_>], bound: BoundParts, shape: FrameShape) {
        self.shape = shape;
        self.parts = bound
            .parts
            .iter()
            .map(|&k| (parts[k].buffer.clone(), parts[k].offset, parts[k].size))
            .collect();
        self.grid_bases = bound.bases;
        self.march_group = None;
        self.accel_group = None;
    }

    /// Checks that this device (and host memory) can hold the output textures, their
    /// read-back buffers and the image of a `width` × `height` render, before any of them is
    /// created.
    pub(super) fn check_image_size(&self, width: u32, height: u32) -> Result<(), RenderError> {
        let max = self.caps.max_texture_2d;
        if width == 0 || height == 0 || width > max || height > max {
            return Err(RenderError::Usage(format!(
                "image size {width}x{height}: this device renders 1 to {max} pixels on each side"
            )));
        }
        // The linear image's read-back buffer is the largest (16 bytes per pixel).
        let hdr_row =
            u64::from(width * 16).next_multiple_of(u64::from(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT));
        let hdr_bytes = hdr_row * u64::from(height);
        if hdr_bytes > self.caps.max_buffer_size {
            return Err(RenderError::Usage(format!(
                "image size {width}x{height}: reading the linear image back needs a \
                 {hdr_bytes}-byte buffer, over this device's largest ({} bytes)",
                self.caps.max_buffer_size
            )));
        }
        let host = u64::from(width) * u64::from(height) * HOST_BYTES_PER_PIXEL;
        crate::memory::check_available(
            || format!("image size {width}x{height}: reading the image back"),
            host,
        )
        .map_err(|e| RenderError::Usage(e.to_string()))
    }

    /// Output images of `width` × `height` (made again when the size changes).
    pub(super) fn ensure_targets(&mut self, width: u32, height: u32) -> Result<(), RenderError> {
        if self
            .targets
            .as_ref()
            .is_some_and(|t| t.width == width && t.height == height)
        {
            return Ok(());
        }
        self.check_image_size(width, height)?;
        let tex = |label: &str, format: wgpu::TextureFormat| {
            crate::device::texture_2d(
                &self.device,
                label,
                (width, height),
                format,
                wgpu::TextureUsages::STORAGE_BINDING
                    | wgpu::TextureUsages::TEXTURE_BINDING
                    | wgpu::TextureUsages::COPY_SRC,
            )
        };
        let (ldr, hdr) = create_scoped(
            &self.device,
            || format!("creating the {width}x{height} output images"),
            || {
                (
                    tex("supercell image", LDR_FORMAT),
                    tex("supercell linear image", HDR_FORMAT),
                )
            },
        )?;
        self.targets = Some(Targets {
            width,
            height,
            ldr_view: ldr.create_view(&Default::default()),
            hdr_view: hdr.create_view(&Default::default()),
            ldr,
            hdr,
        });
        self.march_group = None;
        self.accel_group = None;
        Ok(())
    }

    /// Makes the output images of `width` × `height` and the bind groups over them, and
    /// writes the uniforms of `params` (with the bound grids' places) and the transfer
    /// functions `tf`; returns the uniforms written.
    pub(super) fn prepare(
        &mut self,
        queue: &wgpu::Queue,
        params: &GpuParams,
        tf: &[[f32; 4]],
    ) -> Result<GpuParams, RenderError> {
        let [width, height] = params.size;
        self.ensure_targets(width, height)?;
        let declared = self.shape.declared_parts();
        if self.march_group.is_none() {
            let layout = &self.layouts[&declared].march_group;
            self.march_group =
                Some(self.bind_group_of(layout, declared, &self.uniforms, &self.parts));
        }
        if self.accel_group.is_none() {
            let layout = &self.layouts[&declared].accel_group;
            self.accel_group =
                Some(self.bind_group_of(layout, declared, &self.uniforms, &self.parts));
        }
        let mut params = *params;
        params.grids = self.grid_bases;
        queue.write_buffer(&self.uniforms, 0, bytemuck::bytes_of(&params));
        queue.write_buffer(&self.tf, 0, bytemuck::cast_slice(tf));
        Ok(params)
    }

    /// A group-0 bind group of `layout` over `uniforms` and `parts` (buffer, offset, size),
    /// with the renderer's own transfer functions, output images and acceleration buffers.
    pub(super) fn bind_group_of(
        &self,
        layout: &wgpu::BindGroupLayout,
        declared: u32,
        uniforms: &wgpu::Buffer,
        parts: &[(wgpu::Buffer, u64, u64)],
    ) -> wgpu::BindGroup {
        let t = self.targets.as_ref().expect("targets exist before binding");
        let (ldr, hdr) = (&t.ldr_view, &t.hdr_view);
        let mut entries = vec![
            wgpu::BindGroupEntry {
                binding: 0,
                resource: uniforms.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 1,
                resource: self.tf.as_entire_binding(),
            },
            wgpu::BindGroupEntry {
                binding: 2,
                resource: wgpu::BindingResource::TextureView(ldr),
            },
            wgpu::BindGroupEntry {
                binding: 3,
                resource: wgpu::BindingResource::TextureView(hdr),
            },
        ];
        for i in 0..declared as usize {
            let resource = match parts.get(i) {
                Some((buffer, offset, size)) => {
                    wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer,
                        offset: *offset,
                        size: NonZeroU64::new(*size),
                    })
                }
                None => self.dummy.as_entire_binding(),
            };
            entries.push(wgpu::BindGroupEntry {
                binding: PART_BINDING + i as u32,
                resource,
            });
        }
        let accel = PART_BINDING + declared;
        for (binding, buffer) in [
            (accel, &self.accel.cells),
            (accel + 1, &self.accel.sun),
            (accel + 2, &self.accel.info),
        ] {
            entries.push(wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            });
        }
        self.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("supercell raymarch"),
            layout,
            entries: &entries,
        })
    }
}

/// Refuses a device that binds too few storage buffers per stage for the renderer, and a
/// part size that is not a power of two from [`MIN_PART_BYTES`] to the device's own;
/// returns the part size to use (`requested`, else the device's).
pub(super) fn checked_part_bytes(
    device: &wgpu::Device,
    caps: &DeviceCaps,
    requested: Option<u64>,
) -> Result<u64, RenderError> {
    let per_stage = device.limits().max_storage_buffers_per_shader_stage;
    if per_stage < STORAGE_BUFFERS_PER_STAGE {
        return Err(RenderError::NoDevice(format!(
            "{} was opened with {per_stage} storage buffers per shader stage; the renderer \
             binds {STORAGE_BUFFERS_PER_STAGE} ({MAX_PARTS} frame parts and its own)",
            caps.describe()
        )));
    }
    let device_part = device_part_bytes(caps.max_storage_binding, caps.max_buffer_size);
    match requested {
        None => Ok(device_part),
        Some(b) if b.is_power_of_two() && (MIN_PART_BYTES..=device_part).contains(&b) => Ok(b),
        Some(b) => Err(RenderError::Usage(format!(
            "part size {b} bytes: parts are a power of two from {MIN_PART_BYTES} to \
             {device_part} bytes on {}",
            caps.describe()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_shapes_round_parts_up_within_the_device() {
        // Shapes round up to a power of two within the device's parts, and declare at least
        // MAX_PARTS (the layout every small frame shares).
        let shape = |parts, max| FrameShape::of(1, parts, max);
        assert_eq!((shape(1, 64).parts, shape(1, 64).declared_parts()), (1, 8));
        assert_eq!(shape(5, 64).parts, 8);
        assert_eq!(
            (shape(9, 64).parts, shape(9, 64).declared_parts()),
            (16, 16)
        );
        assert_eq!(shape(33, 64).parts, 64);
        assert_eq!(
            (shape(20, 27).parts, shape(20, 27).declared_parts()),
            (27, 27)
        );
    }
}
