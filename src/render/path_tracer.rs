//! The progressive path tracer (`shaders/path.wgsl`): [`Mode::Path`](super::Mode::Path)
//! renders through it instead of the ray-marcher.
//!
//! Each render adds `path_samples_per_frame` samples per pixel to a float accumulation
//! buffer and writes the running mean to the renderer's output images (the linear image is
//! radiance before exposure; alpha is the fraction of camera rays that met the medium). The
//! accumulation starts afresh whenever anything the picture depends on changes: the bound
//! frame (every [`Renderer::set_frame`](super::Renderer::set_frame)), the image size, the
//! camera, the attributes and transfer functions, or any setting the shader reads, except
//! exposure (applied to the mean) and the jitter seed. It stops growing at
//! `path_max_samples`; later renders only show the mean again.
//!
//! The pass binds the march's bind group (uniforms, transfer functions, output images, the
//! frame's parts, the acceleration cells) as group 0 and its own (accumulation buffer,
//! [`TracerUniform`], work counters, majorants) as group 1. The majorants are built when an
//! accumulation starts, by a dispatch before the first sample's (`path_majorants`, sized by
//! the acceleration passes' indirect arguments): per attribute, cells of 4 voxels (the
//! acceleration cells, which the renderer builds for shaded views, split in 2 per axis where
//! they fit), each bounding the extinction of every trilinear sample based in it.
//! [`TracerStats`] counts where a sample's work goes.
//!
//! The tracer owns its accumulation and the denoiser that filters it ([`super::denoise`]):
//! a render shows the accumulated mean raw or denoised, and the accumulation can be shown
//! again, read back or restarted.

use std::borrow::Cow;
use std::collections::HashMap;

use bytemuck::{Pod, Zeroable};

use super::RenderError;
use super::binding::Targets;
use super::denoise::{DenoiseInput, DenoiseParams, Denoiser};
use super::params::{GpuParams, MAX_ATTRIBUTES, RenderSettings, limits};
use super::scoped::create_scoped;
use super::shader::{ShaderConfig, ShaderPart, shader_source_of};

/// Bounces before Russian roulette may end a path.
pub const RR_DEPTH: u32 = 3;

/// Workgroup edge of the path kernel (8 × 8 pixels).
const WG: u32 = 8;

/// Dispatches one render records at most (the uniform records the buffer holds).
const MAX_DISPATCHES: u32 = 1024;

/// Bytes between the uniform records (the dynamic-offset alignment every device accepts).
const UNIFORM_STRIDE: u64 = 256;

/// The path pass's own uniform block (WGSL `PathParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct TracerUniform {
    /// Samples per pixel already accumulated (0: this dispatch starts afresh).
    pub first_sample: u32,
    /// Samples per pixel this dispatch adds.
    pub samples: u32,
    /// Scattering events per path at most.
    pub max_bounces: u32,
    /// Seed of every pixel's random streams.
    pub seed: u32,
    /// Bounces before Russian roulette.
    pub rr_depth: u32,
    /// 1: the dispatch adds its work to the counters ([`TracerStats`]).
    pub stats: u32,
    /// A sample's first random numbers that come from the scrambled Sobol sequence (the
    /// rest from a pseudo-random stream).
    pub qmc_dims: u32,
    /// Padding to 32 bytes.
    pub pad: u32,
}

/// Choices in the path kernel that only change its speed (path.wgsl's pipeline constants
/// of the same names), kept because their measurements did not decide between the two
/// (docs/bench/HISTORY.md, "Fifth round on the H200": each within ±5 % of the defaults);
/// each is a [`RenderConfig`](super::RenderConfig) field, set at the edge (docs/SETTINGS.md):
/// - `carry_depth` (default on): one exponential draw per tentative collision, its optical
///   depth used up across segments; off: a fresh draw per segment;
/// - `cache_cells` (default off): each channel keeps its majorant cell until the ray leaves it,
///   so a segment looks up only the channels whose cell ended (grids on one lattice, as the
///   storm's attributes, end their cells together: nothing to gain there);
/// - `always_count`: the work counters compiled into every dispatch, as they were before
///   they were compiled out when not counting (only added up when counting);
/// - `skip_levels` (0 to 2, default 1): empty-space levels above the acceleration cells
///   (level l: blocks of 4^l cells per axis); a ray in empty space crosses the coarsest
///   empty block as one segment; 0: one acceleration cell at a time (on the storm the
///   second level crossed no more cells than the first).
///
/// The inner loop of majorant lookups (`SEGMENT_LOOP`) is no longer a switch: the loop it
/// replaced lost on lavapipe (1.7×) and on the H200 (25.0 against 28.8 M samples/s).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TracerKnobs {
    /// Optical depth carried across majorant segments (`CARRY_DEPTH`).
    pub carry_depth: bool,
    /// Each channel keeps its majorant cell until the ray leaves it (`CACHE_CELLS`).
    pub cache_cells: bool,
    /// The counting pipeline for every dispatch (`COUNT_WORK` always on).
    pub always_count: bool,
    /// Empty-space levels a segment may cross at once (`SKIP_LEVELS`, 0 to
    /// [`SKIP_LEVELS_MAX`]).
    pub skip_levels: u32,
}

/// The most empty-space levels path.wgsl builds (its `SKIP_LEVELS_MAX`).
pub const SKIP_LEVELS_MAX: u32 = 2;

/// Words of the path majorant buffer (WGSL `pmaj`) for `cells` acceleration cells per
/// channel: every channel's majorant cells, then its empty-space levels (level l: up to
/// `cells / 16^l` per channel; path.wgsl's `skip_base`).
fn majorant_words(cells: u32) -> u64 {
    let channels = MAX_ATTRIBUTES as u64;
    let cells = u64::from(cells);
    channels * (cells + (1..=SKIP_LEVELS_MAX).map(|l| cells >> (4 * l)).sum::<u64>())
}

impl Default for TracerKnobs {
    fn default() -> Self {
        TracerKnobs {
            carry_depth: true,
            cache_cells: false,
            always_count: false,
            skip_levels: 1,
        }
    }
}

impl TracerKnobs {
    /// Every knob off (the segment loop, no longer a knob, stays in).
    pub fn none() -> TracerKnobs {
        TracerKnobs {
            carry_depth: false,
            cache_cells: false,
            always_count: false,
            skip_levels: 0,
        }
    }

    /// path.wgsl's pipeline constants for a pipeline that counts work (`counting`) or not,
    /// with the Sobol sequence compiled in where `qmc_dims` > 0.
    fn constants(self, counting: bool, qmc_dims: u32) -> [(&'static str, f64); 5] {
        let flag = |b: bool| if b { 1.0 } else { 0.0 };
        [
            ("COUNT_WORK", flag(counting || self.always_count)),
            ("CARRY_DEPTH", flag(self.carry_depth)),
            ("CACHE_CELLS", flag(self.cache_cells)),
            ("USE_QMC", flag(qmc_dims > 0)),
            (
                "SKIP_LEVELS",
                f64::from(self.skip_levels.min(SKIP_LEVELS_MAX)),
            ),
        ]
    }
}

/// Work counters of the path tracer, summed over the dispatches recorded while counting was
/// on ([`Renderer::set_tracer_stats`](super::Renderer::set_tracer_stats)): where a sample's time
/// goes, in units that do not depend on the device.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TracerStats {
    /// Samples finished (pixels × samples per pixel).
    pub samples: u64,
    /// Path rays traced (the camera ray and one per scattering event that continues).
    pub path_rays: u64,
    /// Shadow rays towards the sun (one per scattering event).
    pub shadow_rays: u64,
    /// Tentative collisions on path rays: each evaluates the medium at one point (a
    /// trilinear sample of every attribute the ray is inside).
    pub path_steps: u64,
    /// Tentative collisions on shadow rays.
    pub shadow_steps: u64,
    /// Majorant segments looked up (acceleration cells entered).
    pub segments: u64,
    /// Tree lookups and root-tile comparisons (the kernel's `work` units).
    pub lookups: u64,
    /// Path vertices: real collisions and ground hits.
    pub scatters: u64,
    /// The sum over tentative collisions (path and shadow rays) of 1000 · extinction /
    /// majorant there: divided by their count, how tight the majorants are (1000: exact).
    pub tightness_milli: u64,
    /// Tentative collisions where the extinction exceeded the majorant (by more than
    /// 0.01 %): values the majorants missed, which the estimators then treat as a real
    /// collision (path rays) or clamp (shadow rays). 0 when the majorants are right.
    pub over_majorant: u64,
    /// Majorant cells looked up, per attribute channel (a segment looks up only the channels
    /// whose cell ended where [`TracerKnobs::cache_cells`] is on, every channel the ray is in
    /// where it is off).
    pub cell_lookups: u64,
}

/// Counters in the shader's `stats` buffer (pairs of 32-bit words).
const STAT_COUNT: usize = 11;

impl TracerStats {
    fn from_words(w: &[u32]) -> TracerStats {
        let c = |k: usize| u64::from(w[2 * k]) | (u64::from(w[2 * k + 1]) << 32);
        TracerStats {
            samples: c(0),
            path_rays: c(1),
            shadow_rays: c(2),
            path_steps: c(3),
            shadow_steps: c(4),
            segments: c(5),
            lookups: c(6),
            scatters: c(7),
            tightness_milli: c(8),
            over_majorant: c(9),
            cell_lookups: c(10),
        }
    }

    /// Each counter per sample, named as in the struct.
    pub fn per_sample(&self) -> Vec<(&'static str, f64)> {
        let n = self.samples.max(1) as f64;
        [
            ("path_rays", self.path_rays),
            ("shadow_rays", self.shadow_rays),
            ("path_steps", self.path_steps),
            ("shadow_steps", self.shadow_steps),
            ("segments", self.segments),
            ("lookups", self.lookups),
            ("scatters", self.scatters),
            ("over_majorant", self.over_majorant),
            ("cell_lookups", self.cell_lookups),
        ]
        .into_iter()
        .map(|(k, v)| (k, v as f64 / n))
        .chain([("majorant_tightness", self.majorant_tightness())])
        .collect()
    }

    /// The mean over tentative collisions of extinction / majorant (1: every one real).
    pub fn majorant_tightness(&self) -> f64 {
        self.tightness_milli as f64 / 1000.0 / (self.path_steps + self.shadow_steps).max(1) as f64
    }
}

/// What the path pass needs of the renderer for one dispatch.
pub(super) struct TracePass<'a> {
    pub device: &'a wgpu::Device,
    pub queue: &'a wgpu::Queue,
    /// The march's bind group layout and bind group (group 0).
    pub group0_layout: &'a wgpu::BindGroupLayout,
    pub group0: &'a wgpu::BindGroup,
    /// What the bound frame's shaders are built for.
    pub config: ShaderConfig,
    /// Counts [`Renderer::set_frame`](super::Renderer::set_frame) calls: a new value
    /// restarts the accumulation.
    pub frame_generation: u64,
    /// Counts the renders that recorded the acceleration passes: a new value (or a new
    /// majorant buffer) builds the majorants again; camera moves and the like do not.
    pub accel_generation: u64,
    pub params: &'a GpuParams,
    pub tf: &'a [[f32; 4]],
    pub settings: &'a RenderSettings,
    pub timestamp_writes: Option<wgpu::ComputePassTimestampWrites<'a>>,
    /// The acceleration passes' indirect dispatch sizes: the majorant pass runs as
    /// `accel_cells` does (at byte 0: a thread per acceleration cell, z = channel).
    pub accel_args: &'a wgpu::Buffer,
}

/// The path tracer's pipelines, accumulation buffer and progress.
pub(super) struct PathTracer {
    layout: wgpu::BindGroupLayout,
    /// Per shader configuration and whether it counts work: the path kernel and the
    /// majorant pass.
    pipelines: HashMap<(ShaderConfig, bool), (wgpu::ComputePipeline, wgpu::ComputePipeline)>,
    /// The path majorants (WGSL `pmaj`: one f32 per channel and acceleration cell), for
    /// `accel_cells` cells per channel.
    majorants: Option<(wgpu::Buffer, u32)>,
    /// The `accel_generation` the majorants were built from (None: not built).
    majorants_from: Option<u64>,
    uniform: wgpu::Buffer,
    /// The accumulation buffer (RGBA f32 per pixel) and its bind group, for `pixels`.
    accum: Option<(wgpu::Buffer, wgpu::BindGroup, u64)>,
    /// Per pixel, the sum of the samples' squared luminance (f32; the denoiser's variance).
    moments: Option<wgpu::Buffer>,
    /// What the accumulated samples were rendered with.
    key: Option<Vec<u8>>,
    samples: u32,
    seed: u32,
    /// The work counters (binding 2) and whether dispatches add to them.
    stats: wgpu::Buffer,
    stats_on: bool,
    /// Sobol dimensions per sample ([`RenderConfig::qmc_dims`]).
    qmc_dims: u32,
    /// Samples per dispatch ([`RenderConfig::samples_per_dispatch_on`]).
    per_dispatch: u32,
    /// The kernel's speed knobs ([`RenderConfig::path_knobs`]).
    knobs: TracerKnobs,
    /// Whether renders show the denoised mean.
    denoise_on: bool,
    /// The denoiser (made when first used) and the knobs it starts with
    /// ([`RenderConfig::denoise`]).
    denoiser: Option<Denoiser>,
    denoise_params: DenoiseParams,
    /// The exposure of the last render (what [`show`](Self::show) tone maps with).
    exposure: f32,
}

/// What the accumulation depends on: the frame, the uniforms (less exposure and the jitter
/// seed), the transfer functions and the path knobs.
fn key_of(
    params: &GpuParams,
    tf: &[[f32; 4]],
    settings: &RenderSettings,
    frame_generation: u64,
) -> Vec<u8> {
    let mut p = *params;
    p.sky_horizon[3] = 0.0;
    p.frame_seed = 0;
    let mut k = Vec::with_capacity(std::mem::size_of::<GpuParams>() + tf.len() * 16 + 16);
    k.extend_from_slice(&frame_generation.to_le_bytes());
    k.extend_from_slice(bytemuck::bytes_of(&p));
    k.extend_from_slice(bytemuck::cast_slice(tf));
    k.extend_from_slice(&max_bounces(settings).to_le_bytes());
    k
}

fn max_bounces(s: &RenderSettings) -> u32 {
    limits::PATH_MAX_BOUNCES.clamp_u32(s.path_max_bounces)
}

impl PathTracer {
    /// A tracer with the kernel's speed `knobs`, `qmc_dims` Sobol dimensions per sample
    /// and `per_dispatch` samples per dispatch (the renderer's `RenderConfig` for its
    /// device).
    pub(super) fn new(
        device: &wgpu::Device,
        knobs: TracerKnobs,
        qmc_dims: u32,
        per_dispatch: u32,
        denoise_params: DenoiseParams,
    ) -> PathTracer {
        let entry = |binding, ty| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty,
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("supercell path"),
            entries: &[
                entry(0, wgpu::BufferBindingType::Storage { read_only: false }),
                entry(2, wgpu::BufferBindingType::Storage { read_only: false }),
                entry(3, wgpu::BufferBindingType::Storage { read_only: false }),
                entry(4, wgpu::BufferBindingType::Storage { read_only: false }),
                wgpu::BindGroupLayoutEntry {
                    binding: 1,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(
                            std::mem::size_of::<TracerUniform>() as u64,
                        ),
                    },
                    count: None,
                },
            ],
        });
        let uniform = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("supercell path params"),
            size: UNIFORM_STRIDE * u64::from(MAX_DISPATCHES),
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let stats = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("supercell path stats"),
            size: (STAT_COUNT * 8) as u64,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        PathTracer {
            layout,
            pipelines: HashMap::new(),
            majorants: None,
            majorants_from: None,
            uniform,
            accum: None,
            moments: None,
            key: None,
            samples: 0,
            seed: 0,
            stats,
            stats_on: false,
            qmc_dims,
            per_dispatch,
            knobs,
            denoise_on: false,
            denoiser: None,
            denoise_params,
            exposure: 1.0,
        }
    }

    /// Turns the work counters on (zeroing them) or off. Counting runs a pipeline built
    /// with the counters (a few registers or local-memory words per invocation, an add per
    /// query and a few atomic adds per pixel and dispatch): leave it off when timing.
    pub(super) fn set_stats(&mut self, queue: &wgpu::Queue, on: bool) {
        if on {
            queue.write_buffer(&self.stats, 0, &[0u8; STAT_COUNT * 8]);
        }
        self.stats_on = on;
    }

    /// Sets the kernel's speed knobs (the next render builds its pipelines again and
    /// starts afresh).
    pub(super) fn set_knobs(&mut self, knobs: TracerKnobs) {
        if knobs != self.knobs {
            self.knobs = knobs;
            self.pipelines.clear();
            self.restart();
        }
    }

    /// The kernel's speed knobs.
    pub(super) fn knobs(&self) -> TracerKnobs {
        self.knobs
    }

    /// The work counters so far (waits for the GPU).
    pub(super) fn read_stats(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
    ) -> Result<TracerStats, RenderError> {
        let len = (STAT_COUNT * 8) as u64;
        let bytes = crate::device::read_buffer(device, queue, &self.stats, 0, len)
            .map_err(|e| RenderError::Gpu(e.to_string()))?;
        Ok(TracerStats::from_words(&bytemuck::pod_collect_to_vec::<
            u8,
            u32,
        >(&bytes)))
    }

    /// Whether renders show the denoised mean (`shaders/denoise.wgsl`) instead of the
    /// accumulated mean itself (the accumulation is the same either way).
    pub(super) fn set_denoise(&mut self, on: bool) {
        self.denoise_on = on;
    }

    /// Whether renders show the denoised mean.
    pub(super) fn denoise_on(&self) -> bool {
        self.denoise_on
    }

    /// The denoiser, made on first use.
    fn denoiser(&mut self, device: &wgpu::Device) -> &mut Denoiser {
        let params = self.denoise_params;
        self.denoiser
            .get_or_insert_with(|| Denoiser::new(device, params))
    }

    /// The denoiser's knobs (what the next filtering uses).
    pub(super) fn denoise_params(&mut self, device: &wgpu::Device) -> DenoiseParams {
        self.denoiser(device).params()
    }

    /// Records the denoiser on the current accumulation into `encoder`, writing the output
    /// images `targets` filtered (`filtered`) or as the unfiltered mean (no levels).
    pub(super) fn encode_denoise(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        encoder: &mut wgpu::CommandEncoder,
        targets: Option<&Targets>,
        filtered: bool,
    ) -> Result<(), RenderError> {
        let (t, sums, sums_sq) = self.accumulation(targets)?;
        let (sums, sums_sq) = (sums.clone(), sums_sq.clone());
        let (samples, exposure) = (self.samples, self.exposure);
        let denoiser = self.denoiser(device);
        let saved = denoiser.params();
        if !filtered {
            denoiser.set_params(DenoiseParams { levels: 0, ..saved });
        }
        let r = denoiser.encode(
            device,
            queue,
            encoder,
            DenoiseInput {
                sums: &sums,
                sums_sq: &sums_sq,
                samples,
                width: t.width,
                height: t.height,
                exposure,
                targets: Some((&t.ldr_view, &t.hdr_view)),
            },
        );
        denoiser.set_params(saved);
        r
    }

    /// The accumulation read back (waits for the GPU): per pixel the sum of the samples'
    /// RGB radiance and coverage, and the sum of their squared luminance.
    pub(super) fn read_sums(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        targets: Option<&Targets>,
    ) -> Result<(Vec<[f32; 4]>, Vec<f32>), RenderError> {
        let (t, sums, sums_sq) = self.accumulation(targets)?;
        let pixels = u64::from(t.width) * u64::from(t.height);
        let read = |b, bytes| {
            crate::device::read_buffer(device, queue, b, 0, bytes)
                .map_err(|e| RenderError::Gpu(e.to_string()))
        };
        let s = read(sums, pixels * 16)?;
        let q = read(sums_sq, pixels * 4)?;
        Ok((
            bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&s),
            bytemuck::pod_collect_to_vec::<u8, f32>(&q),
        ))
    }

    /// The output images and the accumulation's two buffers (sums of radiance and coverage,
    /// sums of squared luminance), when something of the images' size has been path traced.
    fn accumulation<'s, 't>(
        &'s self,
        targets: Option<&'t Targets>,
    ) -> Result<(&'t Targets, &'s wgpu::Buffer, &'s wgpu::Buffer), RenderError> {
        let (Some(t), Some((sums, sums_sq))) = (targets, self.sums()) else {
            return Err(RenderError::Usage("nothing path traced yet".into()));
        };
        if sums.size() != u64::from(t.width) * u64::from(t.height) * 16 {
            return Err(RenderError::Usage(
                "the accumulation is not of the output images' size: path trace first".into(),
            ));
        }
        Ok((t, sums, sums_sq))
    }

    /// Samples per pixel accumulated so far.
    pub(super) fn samples(&self) -> u32 {
        self.samples
    }

    /// The accumulation (per pixel the sum of the samples' RGB radiance and coverage) and
    /// the sum of their squared luminance, once a render has made them.
    pub(super) fn sums(&self) -> Option<(&wgpu::Buffer, &wgpu::Buffer)> {
        Some((&self.accum.as_ref()?.0, self.moments.as_ref()?))
    }

    /// Starts the next render afresh.
    pub(super) fn restart(&mut self) {
        self.key = None;
        self.samples = 0;
    }

    /// The majorant grid's buffer for `cells` acceleration cells per attribute (made again,
    /// with the accumulation's bind group that names it, when the cell count changes).
    fn ensure_majorants(&mut self, device: &wgpu::Device, cells: u32) -> Result<(), RenderError> {
        if self.majorants.as_ref().is_none_or(|m| m.1 != cells) {
            let buffer = create_scoped(
                device,
                || format!("creating the path majorants ({cells} cells per attribute)"),
                || {
                    device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("supercell path majorants"),
                        size: majorant_words(cells) * 4,
                        usage: wgpu::BufferUsages::STORAGE,
                        mapped_at_creation: false,
                    })
                },
            )?;
            self.majorants = Some((buffer, cells));
            self.majorants_from = None;
            // The accumulation's bind group names the buffer: make it again.
            self.accum = None;
        }
        Ok(())
    }

    /// The accumulation and moments buffers and their bind group for a `width` × `height`
    /// image (made again, restarting the sum, when the pixel count changes).
    fn ensure_accum(
        &mut self,
        device: &wgpu::Device,
        width: u32,
        height: u32,
    ) -> Result<(), RenderError> {
        let pixels = u64::from(width) * u64::from(height);
        if self.accum.as_ref().is_none_or(|a| a.2 != pixels) {
            let layout = &self.layout;
            let uniform = &self.uniform;
            let stats = &self.stats;
            let majorants = &self.majorants.as_ref().expect("created above").0;
            let mut moments = None;
            self.accum = Some(create_scoped(
                device,
                || format!("creating the {width}x{height} accumulation buffer"),
                || {
                    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("supercell path accumulation"),
                        size: pixels * 16,
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                        mapped_at_creation: false,
                    });
                    let sq = device.create_buffer(&wgpu::BufferDescriptor {
                        label: Some("supercell path moments"),
                        size: pixels * 4,
                        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                        mapped_at_creation: false,
                    });
                    let group = device.create_bind_group(&wgpu::BindGroupDescriptor {
                        label: Some("supercell path"),
                        layout,
                        entries: &[
                            wgpu::BindGroupEntry {
                                binding: 0,
                                resource: buffer.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 1,
                                resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                                    buffer: uniform,
                                    offset: 0,
                                    size: wgpu::BufferSize::new(
                                        std::mem::size_of::<TracerUniform>() as u64,
                                    ),
                                }),
                            },
                            wgpu::BindGroupEntry {
                                binding: 2,
                                resource: stats.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 3,
                                resource: majorants.as_entire_binding(),
                            },
                            wgpu::BindGroupEntry {
                                binding: 4,
                                resource: sq.as_entire_binding(),
                            },
                        ],
                    });
                    moments = Some(sq);
                    (buffer, group, pixels)
                },
            )?);
            self.moments = moments;
            self.samples = 0;
        }
        Ok(())
    }

    /// The path tracer's pipelines for this pass's frame shape (built on first use); their
    /// key.
    fn ensure_pipeline(
        &mut self,
        pass: &TracePass<'_>,
    ) -> Result<(ShaderConfig, bool), RenderError> {
        let pipeline_key = (pass.config, self.stats_on);
        if !self.pipelines.contains_key(&pipeline_key) {
            let (device, layout, config) = (pass.device, &self.layout, pass.config);
            let constants = self.knobs.constants(self.stats_on, self.qmc_dims);
            let pipeline = create_scoped(
                device,
                || format!("building the path tracer for {config:?}"),
                || {
                    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                        label: Some("supercell path"),
                        source: wgpu::ShaderSource::Wgsl(Cow::Owned(shader_source_of(
                            ShaderPart::Path,
                            &config,
                        ))),
                    });
                    let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                        label: Some("supercell path"),
                        bind_group_layouts: &[Some(pass.group0_layout), Some(layout)],
                        immediate_size: 0,
                    });
                    let make = |entry: &str| {
                        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                            label: Some(entry),
                            layout: Some(&pl),
                            module: &module,
                            entry_point: Some(entry),
                            compilation_options: wgpu::PipelineCompilationOptions {
                                constants: &constants,
                                ..Default::default()
                            },
                            cache: None,
                        })
                    };
                    (make("path_main"), make("path_majorants"))
                },
            )?;
            self.pipelines.insert(pipeline_key, pipeline);
        }
        Ok(pipeline_key)
    }

    /// Records a render into `encoder`: the samples `pass` adds to the accumulation, and
    /// where denoising is on, the denoised mean over the output images `targets` (the
    /// bound group 0's); returns the samples per pixel added.
    pub(super) fn render(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        pass: TracePass<'_>,
        targets: &Targets,
    ) -> Result<u32, RenderError> {
        let (device, queue) = (pass.device, pass.queue);
        let exposure = pass.params.sky_horizon[3];
        let samples = self.encode(encoder, pass)?;
        self.exposure = exposure;
        if self.denoise_on {
            self.encode_denoise(device, queue, encoder, Some(targets), true)?;
        }
        Ok(samples)
    }

    /// Records one dispatch into `encoder`; returns the samples per pixel it adds.
    fn encode(
        &mut self,
        encoder: &mut wgpu::CommandEncoder,
        pass: TracePass<'_>,
    ) -> Result<u32, RenderError> {
        let [width, height] = pass.params.size;
        let key = key_of(pass.params, pass.tf, pass.settings, pass.frame_generation);
        if self.key.as_ref() != Some(&key) {
            self.key = Some(key);
            self.samples = 0;
            self.seed = pass.settings.frame_seed;
        }
        self.ensure_majorants(pass.device, pass.config.accel_cells)?;
        self.ensure_accum(pass.device, width, height)?;
        let pipeline_key = self.ensure_pipeline(&pass)?;
        let cap = limits::PATH_MAX_SAMPLES.clamp_u32(pass.settings.path_max_samples);
        let per_frame =
            limits::PATH_SAMPLES_PER_FRAME.clamp_u32(pass.settings.path_samples_per_frame);
        let samples = per_frame
            .min(cap.saturating_sub(self.samples))
            .min(MAX_DISPATCHES * self.per_dispatch);
        // One record per dispatch; a render that adds nothing (the cap reached) still shows
        // the mean once.
        let dispatches = samples.div_ceil(self.per_dispatch).max(1);
        let mut records = vec![0u8; (UNIFORM_STRIDE * u64::from(dispatches)) as usize];
        for k in 0..dispatches {
            let first = self.samples + k * self.per_dispatch;
            let uniform = TracerUniform {
                first_sample: first,
                samples: (self.samples + samples)
                    .saturating_sub(first)
                    .min(self.per_dispatch),
                max_bounces: max_bounces(pass.settings),
                seed: self.seed,
                rr_depth: RR_DEPTH,
                stats: u32::from(self.stats_on),
                qmc_dims: self.qmc_dims,
                pad: 0,
            };
            let at = (UNIFORM_STRIDE * u64::from(k)) as usize;
            records[at..at + std::mem::size_of::<TracerUniform>()]
                .copy_from_slice(bytemuck::bytes_of(&uniform));
        }
        pass.queue.write_buffer(&self.uniform, 0, &records);
        let (_, group1, _) = self.accum.as_ref().expect("created above");
        {
            let mut cpass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell path"),
                timestamp_writes: pass.timestamp_writes,
            });
            let (path, majorants) = &self.pipelines[&pipeline_key];
            cpass.set_bind_group(0, Some(pass.group0), &[]);
            if self.majorants_from != Some(pass.accel_generation) {
                // The acceleration cells changed (they are recorded before this pass), or
                // the majorants were never built from them: build them.
                cpass.set_pipeline(majorants);
                cpass.set_bind_group(1, Some(group1), &[0]);
                cpass.dispatch_workgroups_indirect(pass.accel_args, 0);
            }
            cpass.set_pipeline(path);
            for k in 0..dispatches {
                cpass.set_bind_group(1, Some(group1), &[(UNIFORM_STRIDE * u64::from(k)) as u32]);
                cpass.dispatch_workgroups(width.div_ceil(WG), height.div_ceil(WG), 1);
            }
        }
        self.majorants_from = Some(pass.accel_generation);
        self.samples += samples;
        Ok(samples)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_shader_parses_and_validates() {
        for cfg in [
            ShaderConfig::default(),
            ShaderConfig {
                attr_channels: 4,
                parts: 1,
                ..Default::default()
            },
        ] {
            let src = shader_source_of(ShaderPart::Path, &cfg);
            let module = naga::front::wgsl::parse_str(&src)
                .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
            let caps = naga::valid::Capabilities::default()
                | naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32;
            naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps)
                .validate(&module)
                .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
        }
    }

    #[test]
    fn every_knob_names_a_pipeline_constant_of_the_kernel() {
        let src = shader_source_of(ShaderPart::Path, &ShaderConfig::default());
        let module = naga::front::wgsl::parse_str(&src).expect("parses");
        let overrides: Vec<&str> = module
            .overrides
            .iter()
            .filter_map(|(_, o)| o.name.as_deref())
            .collect();
        let all = TracerKnobs {
            carry_depth: true,
            cache_cells: true,
            always_count: false,
            skip_levels: SKIP_LEVELS_MAX,
        };
        let constants = all.constants(true, 1);
        for (name, value) in constants {
            assert!(overrides.contains(&name), "{name} is not in path.wgsl");
            let on = if name == "SKIP_LEVELS" {
                f64::from(SKIP_LEVELS_MAX)
            } else {
                1.0
            };
            assert_eq!(value, on, "{name}");
        }
        assert!(
            src.contains(&format!("const SKIP_LEVELS_MAX: u32 = {SKIP_LEVELS_MAX}u;")),
            "SKIP_LEVELS_MAX differs from path.wgsl's"
        );
        assert_eq!(overrides.len(), constants.len(), "{overrides:?}");
        for (name, value) in TracerKnobs::none().constants(false, 0) {
            assert_eq!(value, 0.0, "{name}");
        }
    }

    #[test]
    fn the_uniform_block_is_32_bytes() {
        assert_eq!(std::mem::size_of::<TracerUniform>(), 32);
    }

    #[test]
    fn exposure_and_seed_do_not_restart_the_accumulation_but_the_camera_does() {
        use super::super::View;
        let mut view = View::new([[0.0; 3], [1.0; 3]], 0.01, Vec::new(), 1.0);
        let key = |v: &View| {
            let params = v.gpu_params(8, 8);
            key_of(&params, &v.tf_table(), &v.settings, 1)
        };
        let base = key(&view);
        view.settings.exposure *= 2.0;
        view.settings.frame_seed = 7;
        assert_eq!(key(&view), base, "exposure and seed");
        view.camera.orbit(5.0, 0.0);
        assert_ne!(key(&view), base, "camera");
    }

    /// Sobol's direction numbers for dimensions 0..3 from their primitive polynomials
    /// (degree, coefficients, initial numbers), as Joe and Kuo define them.
    fn sobol_directions() -> Vec<u32> {
        let params: [(usize, u32, &[u32]); 3] = [(1, 0, &[1]), (2, 1, &[1, 3]), (3, 1, &[1, 3, 1])];
        let mut out: Vec<u32> = (0..32).map(|b| 1u32 << (31 - b)).collect();
        for (s, a, m) in params {
            let mut v = [0u32; 33];
            for k in 1..=s {
                v[k] = m[k - 1] << (32 - k);
            }
            for k in s + 1..=32 {
                let mut x = v[k - s] ^ (v[k - s] >> s);
                for j in 1..s {
                    if (a >> (s - 1 - j)) & 1 == 1 {
                        x ^= v[k - j];
                    }
                }
                v[k] = x;
            }
            out.extend_from_slice(&v[1..]);
        }
        out
    }

    /// path.wgsl's table, read from its source.
    fn shader_table() -> Vec<u32> {
        let src = include_str!("../../shaders/path.wgsl");
        let start = src.find("SOBOL_DIRS: array").expect("table");
        let end = start + src[start..].find(");").expect("end of table");
        src[start..end]
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter_map(|w| w.strip_prefix("0x")?.strip_suffix('u'))
            .map(|h| u32::from_str_radix(h, 16).unwrap())
            .collect()
    }

    // The shader's sequence, step for step (pcg_hash, lk_permute, owen_scramble, sobol4,
    // qmc).
    fn pcg_hash(v: u32) -> u32 {
        let state = v.wrapping_mul(747796405).wrapping_add(2891336453);
        let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277803737);
        (word >> 22) ^ word
    }

    fn owen_scramble(v: u32, seed: u32) -> u32 {
        let mut x = v.reverse_bits().wrapping_add(seed);
        for c in [0x6c50b47cu32, 0xb82f1e52, 0xc7afe638, 0x8d22f6e6] {
            x ^= x.wrapping_mul(c);
        }
        x.reverse_bits()
    }

    fn qmc(table: &[u32], index: u32, dim: u32, pixel_seed: u32) -> u32 {
        let set_seed = pcg_hash(pixel_seed ^ pcg_hash(dim >> 2));
        let i = owen_scramble(index, set_seed);
        let d = (dim & 3) as usize;
        let x = (0..32)
            .filter(|b| (i >> b) & 1 == 1)
            .fold(0, |x, b| x ^ table[d * 32 + b]);
        owen_scramble(x, pcg_hash(set_seed ^ (dim & 3)))
    }

    #[test]
    fn the_shaders_sobol_table_is_joe_and_kuos() {
        assert_eq!(shader_table(), sobol_directions());
    }

    #[test]
    fn every_pixels_sequence_is_stratified_at_every_power_of_two() {
        let table = shader_table();
        for pixel_seed in [1u32, 0xdead_beef, 12345] {
            for m in 1..=8u32 {
                let n = 1u32 << m;
                let pts: Vec<Vec<u32>> = (0..n)
                    .map(|i| (0..8).map(|d| qmc(&table, i, d, pixel_seed)).collect())
                    .collect();
                for d in 0..8 {
                    let mut cells: Vec<u32> = pts.iter().map(|p| p[d] >> (32 - m)).collect();
                    cells.sort_unstable();
                    cells.dedup();
                    assert_eq!(cells.len(), n as usize, "dimension {d}, {n} points");
                }
                // Dimensions 0, 1 (the camera position) and 4, 5: one point in each of the
                // 2^m cells of 2^a × 2^b.
                let (a, b) = (m / 2, m - m / 2);
                for (d1, d2) in [(0, 1), (4, 5)] {
                    let mut cells: Vec<(u32, u32)> = pts
                        .iter()
                        .map(|p| {
                            let x = if a == 0 { 0 } else { p[d1] >> (32 - a) };
                            (x, p[d2] >> (32 - b))
                        })
                        .collect();
                    cells.sort_unstable();
                    cells.dedup();
                    assert_eq!(cells.len(), n as usize, "dimensions {d1}, {d2}, {n} points");
                }
            }
        }
    }
}
