//! The GPU renderer: one compute pipeline over grids bound from a caller's buffer.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::RenderError;
use super::config::RenderConfig;
use super::denoise::{DenoiseInput, DenoiseParams, Denoiser};
use super::image::Image;
use super::layouts::*;
use super::params::FLAG_SHADOWS;
use super::params::{GpuGrid, GpuParams, MAX_ATTRIBUTES, MAX_PARTS, Mode, View};
use super::parts::*;
use super::path::{PathKnobs, PathPass, PathStats, PathTracer};
use super::scoped::*;
use super::shader::{ACCEL_CELLS, MIN_PART_BYTES, PART_BINDING, ShaderConfig};
use crate::device::{DeviceCaps, TextureReadback, block_on};

// The path tracer's side of the renderer: denoising, the accumulation, counters and knobs.
mod path_mode;
mod points;

/// Bytes per pixel of the two output textures, their read-back copies and the host image.
const HOST_BYTES_PER_PIXEL: u64 = 4 + 16 + 4 + 16;

/// Workgroup edge of the ray-march kernel (8 × 8 pixels).
const WG: u32 = 8;

struct Targets {
    width: u32,
    height: u32,
    ldr: wgpu::Texture,
    hdr: wgpu::Texture,
    /// Views made once per size, not per bind group.
    ldr_view: wgpu::TextureView,
    hdr_view: wgpu::TextureView,
}

struct Timer {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    period_ns: f64,
}

/// Timing of one [`Renderer::render_timed`] call (or of a render submitted with
/// [`Renderer::submit_timed`], once finished).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameTiming {
    /// Ray-march kernel time from GPU timestamps, where the device has them.
    pub gpu_ms: Option<f64>,
    /// Time of the acceleration and sun-grid passes, when this call ran them (new grids,
    /// transfer functions or light) and the device has timestamps.
    pub prepare_ms: Option<f64>,
    /// Wall time from submission until completion was seen (includes submission overhead;
    /// for [`Renderer::submit_timed`], until [`Renderer::finish_pending`] or
    /// [`Renderer::pending_done`] saw it done).
    pub wall_ms: f64,
}

/// A render submitted and not yet seen complete.
struct PendingRender {
    index: wgpu::SubmissionIndex,
    submitted: Instant,
    prepared: bool,
    /// Set by the queue's work-done callback (fired during a device poll).
    done: Arc<AtomicBool>,
}

/// The ray-marcher. Create one per device; bind a frame's grids with
/// [`set_grids`](Self::set_grids), then [`render`](Self::render) (or
/// [`encode`](Self::encode) into your own command encoder) and display
/// [`output`](Self::output) or [`read_image`](Self::read_image).
pub struct Renderer {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// What the device can do (limits, timestamps), probed once.
    caps: DeviceCaps,
    /// The settings the renderer was made with (the path tracer's and the denoiser's).
    config: RenderConfig,
    /// The layouts of each count of declared parts met so far.
    layouts: HashMap<u32, PipelineLayouts>,
    /// The dispatch arguments' bind group layout (every accel info pipeline's second group).
    args_layout: wgpu::BindGroupLayout,
    /// Parts this device binds for one frame.
    max_parts: usize,
    /// The pipelines of each frame shape met so far.
    pipelines: HashMap<FrameShape, Pipelines>,
    /// The bound frame's shape.
    shape: FrameShape,
    /// Acceleration cells per slot at most.
    accel_cells: u32,
    uniforms: wgpu::Buffer,
    tf: wgpu::Buffer,
    dummy: wgpu::Buffer,
    /// Bytes of one part (a power of two) the shaders were built for.
    part_bytes: u64,
    /// The bound frame's parts: buffer, offset, size.
    parts: Vec<(wgpu::Buffer, u64, u64)>,
    /// Where each slot's grid lies in the parts (uniform data).
    grid_bases: [GpuGrid; MAX_ATTRIBUTES],
    targets: Option<Targets>,
    bind_group: Option<wgpu::BindGroup>,
    timer: Option<Timer>,
    accel: Accel,
    last_prepared: bool,
    pending: Option<PendingRender>,
    /// The path tracer, made by the first render in path mode.
    path: Option<PathTracer>,
    /// Path mode: whether renders show the denoised mean ([`set_path_denoise`]), and the
    /// denoiser (made when first used).
    ///
    /// [`set_path_denoise`]: Self::set_path_denoise
    path_denoise: bool,
    denoiser: Option<Denoiser>,
    /// The exposure of the last path-traced render (for [`show_path`](Self::show_path)).
    path_exposure: f32,
    /// Counts frames bound ([`set_frame`](Self::set_frame)): the path tracer starts its
    /// accumulation afresh on a new one.
    frame_generation: u64,
    /// Counts the renders that recorded the acceleration passes: the path tracer builds its
    /// majorants from the cells again when this changes.
    accel_generation: u64,
    /// The point sampler ([`sample_points`](Self::sample_points)), made when first used.
    points: Option<points::PointSampler>,
}

/// The acceleration and sun grids (shaders/accel.wgsl) and what they were built from.
struct Accel {
    args_bind_group: wgpu::BindGroup,
    cells_buf: wgpu::Buffer,
    sun_buf: wgpu::Buffer,
    info_buf: wgpu::Buffer,
    args: wgpu::Buffer,
    bind_group: Option<wgpu::BindGroup>,
    /// Inputs of the last build of the cell grids (grids, transfer functions, mode), and of
    /// the sun grid (those plus the light); `None`: rebuild.
    cells_key: Option<Vec<u8>>,
    sun_key: Option<Vec<u8>>,
}

/// How much of the slots and parts a frame uses: the shaders walk only these (every slot
/// and every part's read costs instructions on every sample). Parts are rounded up to a
/// power of two so that few pipelines serve every frame; slots are exact (on the H200 a
/// frame of one attribute marched 22 % faster walking one slot than four; docs/bench/HISTORY.md,
/// "Sixth round on the H200").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct FrameShape {
    /// 1 to [`MAX_ATTRIBUTES`]: the frame's slots.
    attr_slots: u32,
    /// 1, 2, 4, 8, 16, 32 or 64, at most the device's parts.
    parts: u32,
}

impl FrameShape {
    /// The shape of a frame whose highest bound slot is `slots - 1`, in `parts` parts, on a
    /// device that binds `max_parts`.
    fn of(slots: usize, parts: usize, max_parts: usize) -> FrameShape {
        FrameShape {
            attr_slots: slots.clamp(1, MAX_ATTRIBUTES) as u32,
            parts: parts.max(1).next_power_of_two().min(max_parts) as u32,
        }
    }

    /// Parts its shaders and bind groups declare.
    fn declared_parts(self) -> u32 {
        self.parts.max(MAX_PARTS as u32)
    }

    fn config(self, accel_cells: u32, part_bytes: u64) -> ShaderConfig {
        ShaderConfig {
            accel_cells,
            part_bytes,
            attr_slots: self.attr_slots,
            parts: self.parts,
        }
    }
}

/// Where the march's timestamps are resolved (the preparation's go to 0).
const RESOLVE_MARCH: u64 = 256;
/// Bytes of the resolve and read-back buffers.
const RESOLVE_BYTES: u64 = RESOLVE_MARCH + 16;

/// Bytes of `AccelInfo` in common.wgsl: a 32-byte record per slot, four u32 and the sun
/// cells' 32-byte record.
const ACCEL_INFO_BYTES: u64 = MAX_ATTRIBUTES as u64 * 32 + 16 + 32;

/// What the cell grids depend on besides the grids themselves.
fn cells_key(p: &GpuParams, tf: &[[f32; 4]]) -> Vec<u8> {
    let mut k = Vec::with_capacity(tf.len() * 16 + 160);
    k.extend_from_slice(&p.mode.to_le_bytes());
    k.extend_from_slice(&p.work_budget.to_le_bytes());
    k.extend_from_slice(bytemuck::cast_slice(&p.attrs));
    k.extend_from_slice(bytemuck::cast_slice(tf));
    k
}

/// What the sun grid depends on besides the cell grids.
fn sun_key(p: &GpuParams) -> Vec<u8> {
    let mut k = Vec::with_capacity(32);
    k.extend_from_slice(bytemuck::cast_slice(&p.light_dir[..3]));
    k.extend_from_slice(&(p.flags & FLAG_SHADOWS).to_le_bytes());
    k.extend_from_slice(&p.shadow_steps.to_le_bytes());
    k.extend_from_slice(&p.shadow_tau_max.to_le_bytes());
    k
}

pub use super::layouts::{HDR_FORMAT, LDR_FORMAT};
pub use points::PointSample;

impl Renderer {
    /// Builds the pipeline on `device` with the default [`RenderConfig`], reading frames
    /// through parts of the device's [`part_bytes`](Self::part_bytes). Validation problems
    /// come back as errors rather than panics.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<Renderer, RenderError> {
        Self::with_config(
            device,
            queue,
            DeviceCaps::of(device),
            RenderConfig::default(),
            None,
        )
    }

    /// [`new`](Self::new) with parts of `part_bytes` (a power of two from 64 KiB up to the
    /// device's own part size), so small frames can exercise grids split over parts.
    pub fn with_part_bytes(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        part_bytes: u64,
    ) -> Result<Renderer, RenderError> {
        let caps = DeviceCaps::of(device);
        Self::with_config(
            device,
            queue,
            caps,
            RenderConfig::default(),
            Some(part_bytes),
        )
    }

    /// The renderer `config` describes on `device`, whose capabilities `caps` were probed
    /// when it was opened ([`DeviceCaps::of`]); parts of `part_bytes` where given (a power
    /// of two from 64 KiB up to the device's own part size), else the device's.
    pub fn with_config(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        caps: DeviceCaps,
        config: RenderConfig,
        part_bytes: Option<u64>,
    ) -> Result<Renderer, RenderError> {
        catch_uncaptured_errors(device);
        let part_bytes = checked_part_bytes(device, &caps, part_bytes)?;
        let per_stage = device.limits().max_storage_buffers_per_shader_stage;
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        // Acceleration cells per slot: as many as one binding of every slot's cells holds
        // (16 bytes each), up to ACCEL_CELLS.
        let binding = caps.max_storage_binding;
        let accel_cells = (binding / (16 * MAX_ATTRIBUTES as u64))
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
        let first = build_pipelines(device, &layouts, shape.config(accel_cells, part_bytes));
        let buf = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let uniforms = buf(
            "supercell params",
            std::mem::size_of::<GpuParams>() as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        let tf = buf(
            "supercell transfer functions",
            (MAX_ATTRIBUTES * super::transfer::TF_SIZE * 16) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        // Bound in place of unused parts (no grid reads them).
        let dummy = buf("supercell empty grid", 256, wgpu::BufferUsages::STORAGE);
        let cells_buf = buf(
            "supercell accel cells",
            u64::from(accel_cells) * 16 * MAX_ATTRIBUTES as u64,
            wgpu::BufferUsages::STORAGE,
        );
        let sun_buf = buf(
            "supercell sun grid",
            u64::from(accel_cells) * 4,
            wgpu::BufferUsages::STORAGE,
        );
        let info_buf = buf(
            "supercell accel info",
            ACCEL_INFO_BYTES,
            wgpu::BufferUsages::STORAGE,
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
        let timer = caps.timestamps.then(|| make_timer(device, queue));
        let invalid = block_on(scope.pop());
        if let Some(e) = invalid.or(block_on(oom.pop())) {
            return Err(RenderError::Gpu(e.to_string()));
        }
        Ok(Renderer {
            device: device.clone(),
            queue: queue.clone(),
            caps,
            config,
            layouts: HashMap::from([(shape.declared_parts(), layouts)]),
            args_layout,
            max_parts,
            pipelines: HashMap::from([(shape, first)]),
            shape,
            accel_cells,
            uniforms,
            tf,
            dummy,
            part_bytes,
            parts: Vec::new(),
            grid_bases: [GpuGrid::default(); MAX_ATTRIBUTES],
            targets: None,
            bind_group: None,
            timer,
            accel: Accel {
                args_bind_group,
                cells_buf,
                sun_buf,
                info_buf,
                args,
                bind_group: None,
                cells_key: None,
                sun_key: None,
            },
            last_prepared: false,
            pending: None,
            path: None,
            path_denoise: false,
            denoiser: None,
            path_exposure: 1.0,
            frame_generation: 0,
            accel_generation: 0,
            points: None,
        })
    }

    /// The largest grid one slot can bind: [`max_frame_bytes`](Self::max_frame_bytes), at
    /// most 16 GiB (grids are addressed by 32-bit word).
    pub fn max_grid_bytes(&self) -> u64 {
        self.max_frame_bytes().min(4 << 32)
    }

    /// Parts this device binds for one frame: what its storage buffers per shader stage
    /// leave beside the renderer's own, from [`MAX_PARTS`] up to [`PARTS_LIMIT`].
    pub fn max_parts(&self) -> usize {
        self.max_parts
    }

    /// The largest frame one slot can bind: [`max_parts`](Self::max_parts) parts of
    /// [`part_bytes`](Self::part_bytes).
    pub fn max_frame_bytes(&self) -> u64 {
        self.max_parts as u64 * self.part_bytes
    }

    /// The part size this device addresses: a power of two no larger than the largest storage
    /// binding and buffer (2 GiB on the H200).
    pub fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    /// What the device this renderer draws with can do.
    pub fn caps(&self) -> &DeviceCaps {
        &self.caps
    }

    /// Binds grid `i` of `grids` to attribute slot `i` (at most [`MAX_ATTRIBUTES`]; `None`
    /// leaves a slot empty). Each distinct buffer is bound as consecutive parts of
    /// [`part_bytes`](Self::part_bytes) over the range its grids span, or, where that takes
    /// more parts (grids far apart in a large buffer), each grid as its own run of parts (at
    /// most [`max_parts`](Self::max_parts) parts in all). The buffers are kept alive (cloned handles) until the
    /// next call.
    pub fn set_grids(&mut self, grids: &[Option<GridSlice<'_>>]) -> Result<(), RenderError> {
        check_grid_count(grids.len())?;
        let align = u64::from(self.caps.storage_offset_alignment).max(4);
        let part_bytes = self.part_bytes;
        // Each grid's buffer and byte range.
        let mut ranges: Vec<Option<(&wgpu::Buffer, u64, u64)>> = Vec::new();
        for (i, g) in grids.iter().enumerate() {
            let Some(g) = g else {
                ranges.push(None);
                continue;
            };
            let end = g
                .offset
                .checked_add(g.size.div_ceil(4) * 4)
                .filter(|&end| end <= g.buffer.size() && g.size > 0)
                .ok_or_else(|| {
                    RenderError::Usage(format!(
                        "grid {i} (bytes {}..{}) lies outside its {}-byte buffer or is empty",
                        g.offset,
                        g.offset.saturating_add(g.size),
                        g.buffer.size()
                    ))
                })?;
            ranges.push(Some((g.buffer, g.offset - g.offset % align, end)));
        }
        // Runs of parts: grids of one buffer, in offset order, share a run while that takes
        // no more parts than giving the next one a run of its own (grids close together
        // share parts, usually one; grids far apart in a large buffer get their own).
        let parts_of = |lo: u64, hi: u64| (hi - lo).div_ceil(part_bytes);
        let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].is_some()).collect();
        order.sort_by_key(|&i| ranges[i].map(|r| r.1));
        let mut runs: Vec<(&wgpu::Buffer, u64, u64)> = Vec::new();
        let mut run_of: Vec<Option<usize>> = vec![None; ranges.len()];
        for &i in &order {
            let Some((buffer, lo, hi)) = ranges[i] else {
                continue;
            };
            let joined = runs.iter().rposition(|r| {
                r.0 == buffer && parts_of(r.1, r.2.max(hi)) <= parts_of(r.1, r.2) + parts_of(lo, hi)
            });
            run_of[i] = Some(match joined {
                Some(k) => {
                    runs[k].2 = runs[k].2.max(hi);
                    k
                }
                None => {
                    runs.push((buffer, lo, hi));
                    runs.len() - 1
                }
            });
        }
        let mut parts = Vec::new();
        let mut first_part = Vec::new();
        for &(buffer, lo, hi) in &runs {
            first_part.push(parts.len());
            let mut at = lo;
            while at < hi {
                let size = part_bytes.min(hi - at);
                parts.push(SlotPart {
                    buffer,
                    offset: at,
                    size,
                });
                at += size;
            }
        }
        if parts.len() > self.max_parts {
            return Err(RenderError::Usage(format!(
                "the grids span {} parts of {part_bytes} bytes; a frame binds at most {} on \
                 this device",
                parts.len(),
                self.max_parts
            )));
        }
        let located: Vec<Option<GridInParts>> = grids
            .iter()
            .zip(&run_of)
            .map(|(g, k)| {
                let (g, k) = (g.as_ref()?, (*k)?);
                let mut at = GridInParts::locate(g.offset - runs[k].1, g.size, part_bytes);
                at.part += first_part[k];
                Some(at)
            })
            .collect();
        self.set_frame(&parts, &located)
    }

    /// Binds a frame: grid i of `grids` to attribute slot i (at most [`MAX_ATTRIBUTES`];
    /// `None` leaves a slot empty), in `parts`, the slot's parts in order. Only the parts the
    /// grids span are bound (their sorted union, at most [`max_parts`](Self::max_parts)), so
    /// a frame of more parts than the device binds renders where the grids shown lie in few
    /// enough of them; a frame in one part binds that part. The bound buffers are kept alive
    /// (cloned handles) until the next call.
    ///
    /// Every part needs `STORAGE` usage, an offset aligned to the device's
    /// `min_storage_buffer_offset_alignment` and a size that is a multiple of 4, at most
    /// [`part_bytes`](Self::part_bytes). A grid starts at a multiple of 4 bytes into its
    /// part and may run on into the following parts, each of which it runs past must be
    /// exactly `part_bytes` long; a grid has at most 16 GiB.
    pub fn set_frame(
        &mut self,
        parts: &[SlotPart<'_>],
        grids: &[Option<GridInParts>],
    ) -> Result<(), RenderError> {
        let bound = self.locate(parts, grids)?;
        let slots = grids.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        let shape = FrameShape::of(slots, bound.parts.len(), self.max_parts);
        if !self.pipelines.contains_key(&shape) {
            let config = shape.config(self.accel_cells, self.part_bytes);
            self.ensure_layouts(shape.declared_parts())?;
            let (device, layouts) = (&self.device, &self.layouts[&shape.declared_parts()]);
            let built = create_scoped(
                device,
                || format!("building the pipelines for {config:?}"),
                || build_pipelines(device, layouts, config),
            )?;
            self.pipelines.insert(shape, built);
        }
        self.shape = shape;
        self.parts = bound
            .parts
            .iter()
            .map(|&k| (parts[k].buffer.clone(), parts[k].offset, parts[k].size))
            .collect();
        self.grid_bases = bound.bases;
        self.bind_group = None;
        self.accel.bind_group = None;
        self.accel.cells_key = None;
        self.accel.sun_key = None;
        self.frame_generation += 1;
        self.restart_path();
        Ok(())
    }

    /// Checks a frame's `parts` and `grids` and says which parts they bind and where each
    /// grid lies in them ([`locate_grids`]).
    fn locate(
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
    fn ensure_layouts(&mut self, declared: u32) -> Result<(), RenderError> {
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

    /// Checks that this device (and host memory) can hold the output textures, their
    /// read-back buffers and the image of a `width` × `height` render, before any of them is
    /// created.
    pub fn check_image_size(&self, width: u32, height: u32) -> Result<(), RenderError> {
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

    fn ensure_targets(&mut self, width: u32, height: u32) -> Result<(), RenderError> {
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
        self.bind_group = None;
        self.accel.bind_group = None;
        Ok(())
    }

    fn ensure_bind_group(&mut self) {
        let declared = self.shape.declared_parts();
        let layouts = &self.layouts[&declared];
        if self.bind_group.is_none() {
            self.bind_group = Some(self.make_bind_group(&layouts.march_group, declared));
        }
        if self.accel.bind_group.is_none() {
            self.accel.bind_group = Some(self.make_bind_group(&layouts.accel_group, declared));
        }
    }

    fn make_bind_group(&self, layout: &wgpu::BindGroupLayout, declared: u32) -> wgpu::BindGroup {
        self.bind_group_of(layout, declared, &self.uniforms, &self.parts)
    }

    /// A group-0 bind group of `layout` over `uniforms` and `parts` (buffer, offset, size),
    /// with the renderer's own transfer functions, output images and acceleration buffers.
    fn bind_group_of(
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
            (accel, &self.accel.cells_buf),
            (accel + 1, &self.accel.sun_buf),
            (accel + 2, &self.accel.info_buf),
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

    /// Records the ray-march of `view` at `width` × `height` into `encoder` (the output
    /// textures are resized as needed). Uniforms are written through the queue, so submit
    /// the encoder before the next `encode`.
    ///
    /// An image size the device cannot hold (see [`check_image_size`](Self::check_image_size))
    /// is an error, and nothing is recorded.
    pub fn encode(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        view: &View,
        width: u32,
        height: u32,
    ) -> Result<(), RenderError> {
        self.encode_inner(encoder, view, width, height, false)
    }

    fn encode_inner(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        view: &View,
        width: u32,
        height: u32,
        timed: bool,
    ) -> Result<(), RenderError> {
        let (width, height) = (width.max(1), height.max(1));
        self.ensure_targets(width, height)?;
        self.ensure_bind_group();
        let mut params = view.gpu_params(width, height);
        params.grids = self.grid_bases;
        let tf = view.tf_table();
        self.queue
            .write_buffer(&self.uniforms, 0, bytemuck::bytes_of(&params));
        self.queue
            .write_buffer(&self.tf, 0, bytemuck::cast_slice(&tf));
        let prepared = self.encode_accel(encoder, &params, &tf, timed);
        self.accel_generation += u64::from(prepared);
        let timestamp_writes = match (&self.timer, timed) {
            (Some(t), true) => Some(wgpu::ComputePassTimestampWrites {
                query_set: &t.queries,
                beginning_of_pass_write_index: Some(2),
                end_of_pass_write_index: Some(3),
            }),
            _ => None,
        };
        if view.settings.mode == Mode::Path {
            let declared = self.shape.declared_parts();
            let tracer = self
                .path
                .get_or_insert_with(|| self.config.path_tracer(&self.device, &self.caps));
            tracer.encode(
                encoder,
                PathPass {
                    device: &self.device,
                    queue: &self.queue,
                    group0_layout: &self.layouts[&declared].march_group,
                    group0: self.bind_group.as_ref().expect("bound above"),
                    config: self.shape.config(self.accel_cells, self.part_bytes),
                    frame_generation: self.frame_generation,
                    accel_generation: self.accel_generation,
                    params: &params,
                    tf: &tf,
                    settings: &view.settings,
                    timestamp_writes,
                    accel_args: &self.accel.args,
                },
            )?;
            self.path_exposure = params.sky_horizon[3];
            if self.path_denoise {
                self.encode_denoise(encoder, true)?;
            }
        } else {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell raymarch"),
                timestamp_writes,
            });
            pass.set_pipeline(&self.pipelines[&self.shape].march);
            pass.set_bind_group(0, self.bind_group.as_ref(), &[]);
            pass.dispatch_workgroups(width.div_ceil(WG), height.div_ceil(WG), 1);
        }
        if let (Some(t), true) = (&self.timer, timed) {
            // Resolve offsets must be multiples of QUERY_RESOLVE_BUFFER_ALIGNMENT (256): the
            // preparation's pair at 0, the march's at 256.
            if prepared {
                encoder.resolve_query_set(&t.queries, 0..2, &t.resolve, 0);
            }
            encoder.resolve_query_set(&t.queries, 2..4, &t.resolve, RESOLVE_MARCH);
            encoder.copy_buffer_to_buffer(&t.resolve, 0, &t.read, 0, RESOLVE_BYTES);
        }
        self.last_prepared = prepared;
        Ok(())
    }

    /// Records the acceleration passes that `params` and `tf` need (none when nothing they
    /// depend on changed); returns whether any ran.
    fn encode_accel(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        params: &GpuParams,
        tf: &[[f32; 4]],
        timed: bool,
    ) -> bool {
        let ck = cells_key(params, tf);
        let sk = sun_key(params);
        let cells = self.accel.cells_key.as_ref() != Some(&ck);
        let sun = cells || self.accel.sun_key.as_ref() != Some(&sk);
        if !sun {
            return false;
        }
        let a = &self.accel;
        let p = &self.pipelines[&self.shape];
        let group = a.bind_group.as_ref();
        let ts = |begin: Option<u32>, end: Option<u32>| match (&self.timer, timed) {
            (Some(t), true) => Some(wgpu::ComputePassTimestampWrites {
                query_set: &t.queries,
                beginning_of_pass_write_index: begin,
                end_of_pass_write_index: end,
            }),
            _ => None,
        };
        {
            // Its own pass: the dispatch sizes it writes are read as indirect arguments next.
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell accel info"),
                timestamp_writes: ts(Some(0), None),
            });
            pass.set_pipeline(&p.info);
            pass.set_bind_group(0, group, &[]);
            pass.set_bind_group(1, Some(&a.args_bind_group), &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell accel grids"),
                timestamp_writes: ts(None, Some(1)),
            });
            pass.set_bind_group(0, group, &[]);
            if cells {
                pass.set_pipeline(&p.cells);
                pass.dispatch_workgroups_indirect(&a.args, 0);
                pass.set_pipeline(&p.dilate);
                pass.dispatch_workgroups_indirect(&a.args, 12);
            }
            pass.set_pipeline(&p.sun);
            pass.dispatch_workgroups_indirect(&a.args, 24);
        }
        self.accel.cells_key = Some(ck);
        self.accel.sun_key = Some(sk);
        true
    }

    /// Renders `view` and submits the work (returns without waiting).
    pub fn render(
        &mut self,
        view: &View,
        width: u32,
        height: u32,
    ) -> Result<wgpu::SubmissionIndex, RenderError> {
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        self.encode(&mut enc, view, width, height)?;
        Ok(self.queue.submit([enc.finish()]))
    }

    /// Renders `view`, waits for it, and says how long it took (GPU timestamps around the
    /// pass where available, and wall time from submission to completion).
    pub fn render_timed(
        &mut self,
        view: &View,
        width: u32,
        height: u32,
    ) -> Result<FrameTiming, RenderError> {
        self.submit_timed(view, width, height)?;
        self.finish_pending()?
            .ok_or_else(|| RenderError::Gpu("the render just submitted is not pending".into()))
    }

    /// Submits a timed render of `view` and returns without waiting for the GPU, so the
    /// caller can prepare the next frame while this one renders. A render still pending
    /// from an earlier call is finished first (its timing is returned): one timed render
    /// is in flight at a time, because its timestamps come back through one buffer.
    ///
    /// Buffers bound with [`set_grids`](Self::set_grids) must stay unchanged until the
    /// render is finished ([`finish_pending`](Self::finish_pending) or
    /// [`pending_done`](Self::pending_done) returning `true`).
    pub fn submit_timed(
        &mut self,
        view: &View,
        width: u32,
        height: u32,
    ) -> Result<Option<FrameTiming>, RenderError> {
        let earlier = self.finish_pending()?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        self.encode_inner(&mut enc, view, width, height, true)?;
        let cmd = enc.finish();
        let submitted = Instant::now();
        let index = self.queue.submit([cmd]);
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        self.queue
            .on_submitted_work_done(move || flag.store(true, Ordering::Release));
        self.pending = Some(PendingRender {
            index,
            submitted,
            prepared: self.last_prepared,
            done,
        });
        Ok(earlier)
    }

    /// Whether the render submitted by [`submit_timed`](Self::submit_timed) has completed
    /// (`true` also when none is pending). Does not wait.
    pub fn pending_done(&self) -> bool {
        let Some(p) = &self.pending else {
            return true;
        };
        // Polling runs the work-done callbacks of whatever has completed.
        let _ = self.device.poll(wgpu::PollType::Poll);
        p.done.load(Ordering::Acquire)
    }

    /// Waits for the render submitted by [`submit_timed`](Self::submit_timed) and returns
    /// its timing; `None` when no render is pending.
    pub fn finish_pending(&mut self) -> Result<Option<FrameTiming>, RenderError> {
        let Some(p) = self.pending.take() else {
            return Ok(None);
        };
        self.wait(p.index.clone())?;
        if let Some(e) = take_uncaptured_error() {
            return Err(RenderError::Gpu(e));
        }
        let wall_ms = p.submitted.elapsed().as_secs_f64() * 1e3;
        let (gpu_ms, prepare_ms) = match &self.timer {
            Some(t) => {
                // Wait for this render's submission only: work queued after it (the next
                // frame's copies) must not hold up its timing.
                let bytes = self.map_read_after(&t.read, RESOLVE_BYTES, Some(p.index))?;
                let ts =
                    |i: usize| -> u64 { bytemuck::pod_read_unaligned(&bytes[i * 8..i * 8 + 8]) };
                let ms = |a: u64, b: u64| b.wrapping_sub(a) as f64 * t.period_ns / 1e6;
                let m = RESOLVE_MARCH as usize / 8;
                (
                    Some(ms(ts(m), ts(m + 1))),
                    p.prepared.then(|| ms(ts(0), ts(1))),
                )
            }
            None => (None, None),
        };
        Ok(Some(FrameTiming {
            gpu_ms,
            prepare_ms,
            wall_ms,
        }))
    }

    fn wait(&self, idx: wgpu::SubmissionIndex) -> Result<(), RenderError> {
        self.device
            .poll(wgpu::PollType::Wait {
                submission_index: Some(idx),
                timeout: None,
            })
            .map(|_| ())
            .map_err(|e| RenderError::Gpu(e.to_string()))
    }

    fn map_read(&self, buffer: &wgpu::Buffer, len: u64) -> Result<Vec<u8>, RenderError> {
        self.map_read_after(buffer, len, None)
    }

    /// Maps `buffer` (last used by submission `after`, or by anything submitted so far when
    /// `None`) and copies out its first `len` bytes.
    fn map_read_after(
        &self,
        buffer: &wgpu::Buffer,
        len: u64,
        after: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u8>, RenderError> {
        crate::device::map_read(&self.device, buffer, 0..len, after, None)
            .map_err(|e| RenderError::Gpu(e.to_string()))
    }

    /// The tone-mapped image of the last render ([`LDR_FORMAT`]), for display.
    pub fn output(&self) -> Option<&wgpu::Texture> {
        self.targets.as_ref().map(|t| &t.ldr)
    }

    /// The linear image of the last render ([`HDR_FORMAT`]).
    pub fn output_linear(&self) -> Option<&wgpu::Texture> {
        self.targets.as_ref().map(|t| &t.hdr)
    }

    /// Copies the last render back (waits for the GPU).
    pub fn read_image(&self) -> Result<Image, RenderError> {
        let t = self
            .targets
            .as_ref()
            .ok_or_else(|| RenderError::Usage("nothing rendered yet".into()))?;
        let (w, h) = (t.width, t.height);
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let (ldr_back, hdr_back) = create_scoped(
            &self.device,
            || format!("creating the read-back buffers of a {w}x{h} image"),
            || {
                (
                    TextureReadback::record(&self.device, &mut enc, &t.ldr, 4),
                    TextureReadback::record(&self.device, &mut enc, &t.hdr, 16),
                )
            },
        )?;
        let idx = self.queue.submit([enc.finish()]);
        self.wait(idx)?;
        if let Some(e) = take_uncaptured_error() {
            return Err(RenderError::Gpu(e));
        }
        let ldr = ldr_back.unpad(&self.map_read(&ldr_back.buffer, ldr_back.len())?);
        let hdr = hdr_back.unpad(&self.map_read(&hdr_back.buffer, hdr_back.len())?);
        let mut img = Image::new(w, h);
        img.rgba8.copy_from_slice(&ldr);
        // The mapped bytes need not be 4-byte aligned: copy rather than cast in place.
        img.linear
            .copy_from_slice(&bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&hdr));
        Ok(img)
    }

    /// The device this renderer draws with.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Its queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }
}

/// Refuses a device that binds too few storage buffers per stage for the renderer, and a
/// part size that is not a power of two from [`MIN_PART_BYTES`] to the device's own;
/// returns the part size to use (`requested`, else the device's).
fn checked_part_bytes(
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

/// The GPU timer's queries and read-back buffers (devices with timestamp queries).
fn make_timer(device: &wgpu::Device, queue: &wgpu::Queue) -> Timer {
    let buf = |label: &str, size: u64, usage: wgpu::BufferUsages| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage,
            mapped_at_creation: false,
        })
    };
    Timer {
        queries: device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("supercell timer"),
            ty: wgpu::QueryType::Timestamp,
            count: 4,
        }),
        resolve: buf(
            "supercell timer resolve",
            RESOLVE_BYTES,
            wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
        ),
        read: buf(
            "supercell timer read",
            RESOLVE_BYTES,
            wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        ),
        period_ns: queue.get_timestamp_period() as f64,
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
