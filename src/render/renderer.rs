//! The renderer: the device it draws with, its settings and the bound frame, shared by its
//! two techniques, the ray march ([`MarchPipeline`]) and the path tracer ([`PathTracer`],
//! which owns its accumulation and the denoiser); [`View::settings`]' mode picks one per
//! render.

use super::RenderError;
use super::binding::{FrameBinding, FrameShape, checked_part_bytes};
use super::config::RenderConfig;
use super::denoise::DenoiseParams;
use super::image::Image;
use super::march::{MarchPipeline, cells_key};
use super::params::{Mode, View};
use super::parts::{GridInParts, GridSlice, SlotPart, check_grid_count, parts_of_slices};
use super::path_tracer::{PathTracer, TracePass, TracerKnobs, TracerStats};
use super::points::{PointSample, PointSampler};
use super::region::{PremultipliedImage, Region, RegionPasses, check_decomposes};
use super::scoped::{catch_uncaptured_errors, create_scoped, take_uncaptured_error};
use super::timing::{FrameTiming, PendingRender, Timer, wait};
use crate::device::{DeviceCaps, TextureReadback, block_on};

/// The volume renderer. Create one per device; bind a frame's grids with
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
    /// The bound frame, uniforms, output images and acceleration buffers: group 0 of both
    /// techniques.
    binding: FrameBinding,
    /// The ray march and the acceleration passes.
    march: MarchPipeline,
    /// The path tracer, made by the first render in path mode (or the first path-tracer
    /// setting).
    tracer: Option<PathTracer>,
    /// GPU timestamps, where the device has them.
    timer: Option<Timer>,
    /// The timed render in flight ([`submit_timed`](Self::submit_timed)).
    pending: Option<PendingRender>,
    /// Whether the last render ran the acceleration passes.
    last_prepared: bool,
    /// Counts frames bound ([`set_frame`](Self::set_frame)): the path tracer starts its
    /// accumulation afresh on a new one.
    frame_generation: u64,
    /// The point sampler ([`sample_points`](Self::sample_points)), made when first used.
    points: Option<PointSampler>,
    /// The part of the domain this renderer draws in sort-last rendering
    /// ([`set_region`](Self::set_region)); `None`: the whole frame.
    region: Option<Region>,
    /// The acceleration cells combined over every region
    /// ([`set_sun_extinction`](Self::set_sun_extinction)).
    combined_cells: Option<Vec<f32>>,
    /// What the cells of the last [`sun_extinction`](Self::sun_extinction) depend on in
    /// the view (mode, transfer functions): renders of a view that differs there refuse the
    /// combined cells rather than draw with stale ones.
    cells_view: Option<Vec<u8>>,
}

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
        let oom = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
        let binding = FrameBinding::new(device, &caps, part_bytes);
        let march = MarchPipeline::new(device, &binding);
        let timer = caps.timestamps.then(|| Timer::new(device, queue));
        let invalid = block_on(scope.pop());
        if let Some(e) = invalid.or(block_on(oom.pop())) {
            return Err(RenderError::Gpu(e.to_string()));
        }
        Ok(Renderer {
            device: device.clone(),
            queue: queue.clone(),
            caps,
            config,
            binding,
            march,
            tracer: None,
            timer,
            pending: None,
            last_prepared: false,
            frame_generation: 0,
            points: None,
            region: None,
            combined_cells: None,
            cells_view: None,
        })
    }

    /// The largest grid one slot can bind: [`max_frame_bytes`](Self::max_frame_bytes), at
    /// most 16 GiB (grids are addressed by 32-bit word).
    pub fn max_grid_bytes(&self) -> u64 {
        self.max_frame_bytes().min(4 << 32)
    }

    /// Parts this device binds for one frame: what its storage buffers per shader stage
    /// leave beside the renderer's own, from [`MAX_PARTS`](super::MAX_PARTS) up to
    /// [`PARTS_LIMIT`](super::PARTS_LIMIT).
    pub fn max_parts(&self) -> usize {
        self.binding.max_parts()
    }

    /// The largest frame one slot can bind: [`max_parts`](Self::max_parts) parts of
    /// [`part_bytes`](Self::part_bytes).
    pub fn max_frame_bytes(&self) -> u64 {
        self.max_parts() as u64 * self.part_bytes()
    }

    /// The part size this device addresses: a power of two no larger than the largest storage
    /// binding and buffer (2 GiB on the H200).
    pub fn part_bytes(&self) -> u64 {
        self.binding.part_bytes()
    }

    /// What the device this renderer draws with can do.
    pub fn caps(&self) -> &DeviceCaps {
        &self.caps
    }

    /// Binds grid `i` of `grids` to attribute channel `i` (at most [`MAX_ATTRIBUTES`](super::MAX_ATTRIBUTES); `None`
    /// leaves a channel empty). Each distinct buffer is bound as consecutive parts of
    /// [`part_bytes`](Self::part_bytes) over the range its grids span, or, where that takes
    /// more parts (grids far apart in a large buffer), each grid as its own run of parts (at
    /// most [`max_parts`](Self::max_parts) parts in all). The buffers are kept alive (cloned
    /// handles) until the next call.
    pub fn set_grids(&mut self, grids: &[Option<GridSlice<'_>>]) -> Result<(), RenderError> {
        check_grid_count(grids.len())?;
        let align = u64::from(self.caps.storage_offset_alignment).max(4);
        let (parts, located) = parts_of_slices(grids, self.part_bytes(), align, self.max_parts())?;
        self.set_frame(&parts, &located)
    }

    /// Binds a frame: grid i of `grids` to attribute channel i (at most [`MAX_ATTRIBUTES`](super::MAX_ATTRIBUTES);
    /// `None` leaves a channel empty), in `parts`, the frame-ring slot's parts in order. Only the parts the
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
        let bound = self.binding.locate(parts, grids)?;
        let channels = grids.iter().rposition(Option::is_some).map_or(0, |i| i + 1);
        let shape = FrameShape::of(channels, bound.parts.len(), self.max_parts());
        self.binding.ensure_layouts(shape.declared_parts())?;
        self.march
            .ensure_pipelines(&self.device, &self.binding, shape)?;
        self.binding.bind(parts, bound, shape);
        self.march.frame_changed();
        self.frame_generation += 1;
        // Sort-last: a new frame needs its own combined cells.
        self.combined_cells = None;
        self.cells_view = None;
        self.restart_tracer();
        Ok(())
    }

    /// Checks that this device (and host memory) can hold the output textures, their
    /// read-back buffers and the image of a `width` × `height` render, before any of them is
    /// created.
    pub fn check_image_size(&self, width: u32, height: u32) -> Result<(), RenderError> {
        self.binding.check_image_size(width, height)
    }

    /// Records the render of `view` at `width` × `height` into `encoder` (the output
    /// textures are resized as needed), by the technique its mode picks. Uniforms are
    /// written through the queue, so submit the encoder before the next `encode`.
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
        let tf = view.tf_table();
        let params = self
            .binding
            .prepare(&self.queue, &view.gpu_params(width, height), &tf)?;
        let timer = self.timer.as_ref().filter(|_| timed);
        let prepared = self
            .march
            .encode_accel(&self.binding, encoder, &params, &tf, timer);
        if view.settings.mode == Mode::Path {
            let shape = self.binding.shape();
            let tracer = self
                .tracer
                .get_or_insert_with(|| self.config.path_tracer(&self.device, &self.caps));
            let pass = TracePass {
                device: &self.device,
                queue: &self.queue,
                group0_layout: &self.binding.layouts(shape.declared_parts()).march_group,
                group0: self.binding.march_group(),
                config: self.binding.config_of(shape),
                frame_generation: self.frame_generation,
                accel_generation: self.march.accel_generation(),
                params: &params,
                tf: &tf,
                settings: &view.settings,
                timestamp_writes: timer.map(Timer::pass_writes),
                accel_args: &self.binding.accel().args,
            };
            let targets = self.binding.targets().expect("prepared above");
            tracer.render(encoder, pass, targets)?;
        } else {
            self.march
                .encode(&self.binding, encoder, [width, height], timer);
        }
        if let Some(t) = timer {
            t.record_resolve(encoder, prepared);
        }
        self.last_prepared = prepared;
        Ok(())
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
        self.pending = Some(PendingRender::submit(
            &self.queue,
            enc.finish(),
            self.last_prepared,
        ));
        Ok(earlier)
    }

    /// Whether the render submitted by [`submit_timed`](Self::submit_timed) has completed
    /// (`true` also when none is pending). Does not wait.
    pub fn pending_done(&self) -> bool {
        self.pending.as_ref().is_none_or(|p| p.done(&self.device))
    }

    /// Waits for the render submitted by [`submit_timed`](Self::submit_timed) and returns
    /// its timing; `None` when no render is pending.
    pub fn finish_pending(&mut self) -> Result<Option<FrameTiming>, RenderError> {
        match self.pending.take() {
            Some(p) => p.finish(&self.device, self.timer.as_ref()).map(Some),
            None => Ok(None),
        }
    }

    /// The tone-mapped image of the last render ([`LDR_FORMAT`](super::LDR_FORMAT)), for
    /// display.
    pub fn output(&self) -> Option<&wgpu::Texture> {
        self.binding.targets().map(|t| &t.ldr)
    }

    /// The linear image of the last render ([`HDR_FORMAT`](super::HDR_FORMAT)).
    pub fn output_linear(&self) -> Option<&wgpu::Texture> {
        self.binding.targets().map(|t| &t.hdr)
    }

    /// Copies the last render back (waits for the GPU).
    pub fn read_image(&self) -> Result<Image, RenderError> {
        self.read_back(true)
    }

    /// Copies the last render's tone-mapped picture back, without the linear image
    /// ([`Image::linear`] is left empty): a quarter of the bytes, for a picture that is only
    /// shown (an image another rank presents). Waits for the GPU.
    pub fn read_picture(&self) -> Result<Image, RenderError> {
        self.read_back(false)
    }

    /// The last render's `rgba8` picture, and its linear image where `linear`.
    fn read_back(&self, linear: bool) -> Result<Image, RenderError> {
        let t = self
            .binding
            .targets()
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
                    linear.then(|| TextureReadback::record(&self.device, &mut enc, &t.hdr, 16)),
                )
            },
        )?;
        let idx = self.queue.submit([enc.finish()]);
        wait(&self.device, idx)?;
        if let Some(e) = take_uncaptured_error() {
            return Err(RenderError::Gpu(e));
        }
        let read = |back: &TextureReadback| {
            back.read(&self.device, None)
                .map_err(|e| RenderError::Gpu(e.to_string()))
        };
        let ldr = read(&ldr_back)?;
        let mut img = Image::new(w, h);
        img.rgba8.copy_from_slice(&ldr);
        match &hdr_back {
            // The mapped bytes need not be 4-byte aligned: copy rather than cast in place.
            Some(back) => img
                .linear
                .copy_from_slice(&bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&read(back)?)),
            None => img.linear = Vec::new(),
        }
        Ok(img)
    }

    /// Sort-last rendering: draw only `region` of the domain (the bound grids hold that part
    /// of the whole frame, plus a halo), keeping every layout the whole frame's; `None`
    /// draws the whole bound frame, exactly as without this call. Forgets the combined
    /// cells of [`set_sun_extinction`](Self::set_sun_extinction). With a region set, use
    /// [`sun_extinction`](Self::sun_extinction), [`set_sun_extinction`](Self::set_sun_extinction),
    /// [`render_premultiplied`](Self::render_premultiplied) and
    /// [`finish_premultiplied`](Self::finish_premultiplied); [`render`](Self::render) and its
    /// kin draw the bound grids as a whole frame.
    ///
    /// The [`View`] given to those calls must be the whole frame's (its world box and voxel
    /// size, as the one-rank render would have), and the same on every rank.
    pub fn set_region(&mut self, region: Option<Region>) -> Result<(), RenderError> {
        if let Some(r) = &region {
            r.check()?;
        }
        self.region = region;
        self.combined_cells = None;
        self.cells_view = None;
        self.march.frame_changed();
        Ok(())
    }

    /// The region set by [`set_region`](Self::set_region).
    pub fn region(&self) -> Option<&Region> {
        self.region.as_ref()
    }

    /// Sort-last, step 1: this region's share of the coarse cells the acceleration and the
    /// sun grid are made from, for the bound frame and `view`, in the whole frame's cell
    /// layout (the same length on every rank): per cell of every channel, its smallest and
    /// largest value and its extinction sum (in quanta) over the 8³ blocks whose centre lies
    /// in this region. Combine every rank's with
    /// [`combine_sun_extinction`](super::combine_sun_extinction) (in any order) and give the
    /// result to [`set_sun_extinction`](Self::set_sun_extinction). Waits for the GPU.
    pub fn sun_extinction(&mut self, view: &View) -> Result<Vec<f32>, RenderError> {
        let region = self.region_for(view)?.clone();
        let cells = self.region_passes().local_cells(view, &region)?;
        self.cells_view = Some(cells_key(&view.gpu_params(1, 1), &view.tf_table()));
        Ok(cells)
    }

    /// Sort-last, step 2: the cells combined over every region (the combination of every
    /// rank's [`sun_extinction`](Self::sun_extinction)); the march's acceleration and the
    /// sun grid (shadows that other regions cast on this one and on the ground) are made
    /// from them. Checked against the frame's layout when rendering.
    pub fn set_sun_extinction(&mut self, combined: &[f32]) -> Result<(), RenderError> {
        if self.region.is_none() {
            return Err(RenderError::Usage(
                "set_sun_extinction needs a region (set_region)".into(),
            ));
        }
        self.combined_cells = Some(combined.to_vec());
        Ok(())
    }

    /// Sort-last, step 3: the volume inside this region alone, marched exactly as the
    /// whole frame's render marches it (its samples that lie in the region; it stops where
    /// the whole march stops: the ground), without ground, sky or tone mapping: linear,
    /// premultiplied RGBA. Composite the regions front to back with
    /// [`premultiplied_over`](super::premultiplied_over). Waits for the GPU.
    pub fn render_premultiplied(
        &mut self,
        view: &View,
        width: u32,
        height: u32,
    ) -> Result<PremultipliedImage, RenderError> {
        let (region, combined) = self.region_and_cells(view)?;
        let size = [width.max(1), height.max(1)];
        self.region_passes()
            .render(view, &region, &combined, size)?;
        let image = self.read_image()?;
        Ok(PremultipliedImage {
            width: image.width,
            height: image.height,
            rgba: image.linear.iter().flatten().copied().collect(),
        })
    }

    /// Sort-last, step 4 (on the rank that shows the picture): what lies behind the
    /// composited volume `image` (the ground, lit through the combined sun grid's shadows,
    /// and the sky) under its transmittance, tone-mapped as [`render`](Self::render) does:
    /// the image a whole-frame render of `view` gives, within rounding. Runs on the GPU
    /// (the march shader in a mode that takes the volume's colour from `image`); needs the
    /// region and the combined cells of this frame set. Waits for the GPU.
    pub fn finish_premultiplied(
        &mut self,
        view: &View,
        image: &PremultipliedImage,
    ) -> Result<Image, RenderError> {
        let (region, combined) = self.region_and_cells(view)?;
        self.region_passes()
            .finish(view, &region, &combined, image)?;
        self.read_image()
    }

    /// The region and the combined cells, where `view` decomposes; errors naming what is
    /// missing.
    fn region_and_cells(&mut self, view: &View) -> Result<(Region, Vec<f32>), RenderError> {
        let region = self.region_for(view)?.clone();
        let combined = self.combined_cells.clone().ok_or_else(|| {
            RenderError::Usage(
                "sort-last rendering needs the combined sun extinction of the bound frame \
                 (sun_extinction, then set_sun_extinction)"
                    .into(),
            )
        })?;
        let key = cells_key(&view.gpu_params(1, 1), &view.tf_table());
        if self.cells_view.as_ref() != Some(&key) {
            return Err(RenderError::Usage(
                "the combined sun extinction was made for another mode or other transfer \
                 functions than this view's (call sun_extinction with this view)"
                    .into(),
            ));
        }
        Ok((region, combined))
    }

    /// Sort-last's passes over this renderer's binding and pipelines.
    fn region_passes(&mut self) -> RegionPasses<'_> {
        RegionPasses {
            device: &self.device,
            queue: &self.queue,
            binding: &mut self.binding,
            march: &mut self.march,
        }
    }

    /// The region set, where `view` decomposes over regions; an error naming what does not.
    fn region_for(&self, view: &View) -> Result<&Region, RenderError> {
        check_decomposes(view)?;
        self.region.as_ref().ok_or_else(|| {
            RenderError::Usage("sort-last rendering needs a region (set_region)".into())
        })
    }

    /// The device this renderer draws with.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// Its queue.
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The values of a frame's grids at world positions `points` (metres, or whatever the
    /// grids' maps use), read as the march reads a sample: the same accessor and trilinear
    /// interpolation, in `f32`. `parts` and `grids` are as [`set_frame`](Self::set_frame)
    /// takes them, but bind nothing: the frame the renderer draws stays bound (a probe may
    /// read attributes that are not shown). Returns, per point, one entry per channel of
    /// `grids`: `None` where the channel has no grid, the grid is not one the march reads, or
    /// the position lies beyond ±10⁹ index units. Waits for the GPU.
    pub fn sample_points(
        &mut self,
        parts: &[SlotPart<'_>],
        grids: &[Option<GridInParts>],
        points: &[[f64; 3]],
    ) -> Result<Vec<Vec<Option<PointSample>>>, RenderError> {
        let device = &self.device;
        self.points
            .get_or_insert_with(|| PointSampler::new(device))
            .sample(&mut self.binding, &self.queue, parts, grids, points)
    }

    /// The path tracer, made on first use.
    fn tracer(&mut self) -> &mut PathTracer {
        let (device, config, caps) = (&self.device, &self.config, &self.caps);
        self.tracer
            .get_or_insert_with(|| config.path_tracer(device, caps))
    }

    /// Path mode: whether renders show the denoised mean (`shaders/denoise.wgsl`) instead of
    /// the accumulated mean itself (off by default; the accumulation is the same either
    /// way). The filter's knobs come from the renderer's [`RenderConfig::denoise`].
    pub fn set_tracer_denoise(&mut self, on: bool) {
        self.tracer().set_denoise(on);
    }

    /// Whether path-mode renders show the denoised mean.
    pub fn tracer_denoise(&self) -> bool {
        self.tracer.as_ref().is_some_and(PathTracer::denoise_on)
    }

    /// The denoiser's knobs (what the next filtering uses).
    pub fn denoise_params(&mut self) -> DenoiseParams {
        let device = self.device.clone();
        self.tracer().denoise_params(&device)
    }

    /// Path mode: shows the current accumulation again without adding samples, denoised
    /// (`denoised`) or as its plain mean, in the output images; submits the work (returns
    /// without waiting). An error before anything was path traced.
    pub fn show_tracer(&mut self, denoised: bool) -> Result<wgpu::SubmissionIndex, RenderError> {
        let tracer = self
            .tracer
            .as_mut()
            .ok_or_else(|| RenderError::Usage("nothing path traced yet".into()))?;
        let mut enc = self
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let targets = self.binding.targets();
        tracer.encode_denoise(&self.device, &self.queue, &mut enc, targets, denoised)?;
        Ok(self.queue.submit([enc.finish()]))
    }

    /// Path mode: the accumulation read back (waits for the GPU): per pixel the sum of the
    /// samples' RGB radiance and coverage, and the sum of their squared luminance (what
    /// [`denoise_cpu`](super::denoise_cpu) takes), over [`path_samples`](Self::path_samples)
    /// samples.
    pub fn tracer_sums(&self) -> Result<(Vec<[f32; 4]>, Vec<f32>), RenderError> {
        let tracer = self
            .tracer
            .as_ref()
            .ok_or_else(|| RenderError::Usage("nothing path traced yet".into()))?;
        tracer.read_sums(&self.device, &self.queue, self.binding.targets())
    }

    /// Path mode: samples per pixel accumulated in the current image (0 before the first
    /// path-traced render).
    pub fn tracer_samples(&self) -> u32 {
        self.tracer.as_ref().map_or(0, PathTracer::samples)
    }

    /// Path mode: the next render starts its accumulation afresh (with the view's
    /// `frame_seed`), as it does by itself whenever the frame or the view changes.
    pub fn restart_tracer(&mut self) {
        if let Some(t) = &mut self.tracer {
            t.restart();
        }
    }

    /// Path mode: from the next render on, count the path tracer's work (zeroing the
    /// counters), or stop counting. Counting runs a kernel built with the counters: leave
    /// it off when timing.
    pub fn set_tracer_stats(&mut self, on: bool) {
        let queue = self.queue.clone();
        self.tracer().set_stats(&queue, on);
    }

    /// Path mode: the kernel's speed knobs (by default the configuration's,
    /// [`RenderConfig::path_knobs`]); a change restarts the accumulation.
    pub fn set_tracer_knobs(&mut self, knobs: TracerKnobs) {
        self.tracer().set_knobs(knobs);
    }

    /// Path mode: the kernel's speed knobs in use.
    pub fn tracer_knobs(&mut self) -> TracerKnobs {
        self.tracer().knobs()
    }

    /// Path mode: the work counted since [`set_tracer_stats`](Self::set_tracer_stats)`(true)`
    /// (waits for the GPU).
    pub fn tracer_stats(&self) -> Result<TracerStats, RenderError> {
        match &self.tracer {
            Some(t) => t.read_stats(&self.device, &self.queue),
            None => Ok(TracerStats::default()),
        }
    }
}

#[cfg(test)]
mod tests {
    /// The render module's source files, name and text.
    fn render_files() -> Vec<(String, String)> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/render");
        let mut files = Vec::new();
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let name = path.file_name().unwrap().to_string_lossy().into_owned();
                    files.push((name, std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        files
    }

    #[test]
    fn the_renderer_is_one_impl_in_one_file_and_no_technique_imports_it() {
        for (name, text) in render_files() {
            if name == "renderer.rs" {
                continue;
            }
            assert!(
                !text.contains(&["impl", " Renderer {"].concat()),
                "{name} implements Renderer: its methods belong in renderer.rs"
            );
            assert!(
                !text.contains(&["super::", "renderer"].concat()),
                "{name} imports the renderer façade: arrows run from it to the techniques"
            );
        }
    }
}
