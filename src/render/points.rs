//! Point sampling (`shaders/points.wgsl`): the grids' values at world positions, read on the
//! GPU with the march's accessor and trilinear interpolation, so that a probe, a slice or a
//! line plot shows exactly what the march samples, from frames that live only in GPU memory.

use std::borrow::Cow;
use std::collections::HashMap;

use bytemuck::Zeroable;

use wgpu::util::DeviceExt;

use super::RenderError;
use super::binding::{FrameBinding, FrameShape};
use super::layouts::storage_entry;
use super::params::{GpuParams, RenderSettings};
use super::parts::{BoundParts, GridInParts, SlotPart};
use super::scoped::{create_scoped, take_uncaptured_error};
use super::shader::{ShaderPart, shader_source_of};

/// Points sampled per dispatch (and per read-back): 64 Ki points of every channel's two
/// records are 8 MiB at eight channels, well inside any storage binding.
const POINTS_PER_PASS: usize = 1 << 16;

/// Workgroup size of `sample_points`.
const POINTS_WG: u32 = 64;

/// One grid read at one world position.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PointSample {
    /// The trilinear value the march reads there (voxel centres at integer index
    /// coordinates, as `format::grid::Interpolation::Linear`).
    pub value: f32,
    /// The position's continuous index coordinate in the grid (its nearest voxel is this
    /// rounded).
    pub index: [f32; 3],
}

impl PointSample {
    /// The voxel whose centre is nearest (index coordinates rounded half away from zero,
    /// as NanoVDB's `Round`).
    pub fn voxel(&self) -> [i32; 3] {
        self.index.map(|c| c.round() as i32)
    }
}

/// The point sampler's own buffers and pipelines.
pub(super) struct PointSampler {
    /// Group 1: the points and the results, in one buffer.
    layout: wgpu::BindGroupLayout,
    /// Its own uniform block: the march's stays as the last render wrote it.
    params: wgpu::Buffer,
    pipelines: HashMap<FrameShape, wgpu::ComputePipeline>,
}

impl PointSampler {
    pub(super) fn new(device: &wgpu::Device) -> PointSampler {
        PointSampler {
            layout: device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("supercell points"),
                entries: &[storage_entry(0, false)],
            }),
            params: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("supercell points params"),
                size: std::mem::size_of::<GpuParams>() as u64,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            pipelines: HashMap::new(),
        }
    }
}

/// Refuses points that are not finite `f32` positions (the shader reads in `f32`).
fn check_points(points: &[[f64; 3]]) -> Result<(), RenderError> {
    let bad = points.iter().position(|p| {
        p.iter()
            .any(|c| !c.is_finite() || c.abs() > f64::from(f32::MAX))
    });
    match bad {
        Some(k) => Err(RenderError::Usage(format!(
            "point {k} ({:?}) is not a finite position",
            points[k]
        ))),
        None => Ok(()),
    }
}

impl PointSampler {
    /// The values of a frame's grids at world positions `points`, as
    /// [`Renderer::sample_points`](super::Renderer::sample_points) describes: `parts` and
    /// `grids` bind nothing (the frame `binding` holds stays bound). Waits for the GPU.
    pub(super) fn sample(
        &mut self,
        binding: &mut FrameBinding,
        queue: &wgpu::Queue,
        parts: &[SlotPart<'_>],
        grids: &[Option<GridInParts>],
        points: &[[f64; 3]],
    ) -> Result<Vec<Vec<Option<PointSample>>>, RenderError> {
        check_points(points)?;
        let bound = binding.locate(parts, grids)?;
        let shape = FrameShape::of(grids.len(), bound.parts.len(), binding.max_parts());
        if binding.targets().is_none() {
            // The group-0 layout has the output images; the sampler writes neither.
            binding.ensure_targets(1, 1)?;
        }
        binding.ensure_layouts(shape.declared_parts())?;
        let job = Job {
            binding,
            queue,
            shape,
        };
        job.sample(self, parts, grids, &bound, points)
    }
}

/// One [`PointSampler::sample`] call's frame binding, queue and frame shape.
struct Job<'a> {
    binding: &'a FrameBinding,
    queue: &'a wgpu::Queue,
    shape: FrameShape,
}

impl Job<'_> {
    fn sample(
        &self,
        sampler: &mut PointSampler,
        parts: &[SlotPart<'_>],
        grids: &[Option<GridInParts>],
        bound: &BoundParts,
        points: &[[f64; 3]],
    ) -> Result<Vec<Vec<Option<PointSample>>>, RenderError> {
        let shape = self.shape;
        let declared = shape.declared_parts();
        let group0_layout = &self.binding.layouts(declared).march_group;
        if !sampler.pipelines.contains_key(&shape) {
            let pipeline = self.points_pipeline(&sampler.layout, group0_layout, shape)?;
            sampler.pipelines.insert(shape, pipeline);
        }
        let mut params = GpuParams::zeroed();
        params.grids = bound.bases;
        params.work_budget = RenderSettings::default().work_budget;
        for (attr, g) in params.attrs.iter_mut().zip(grids) {
            attr.enabled = u32::from(g.is_some());
        }
        self.queue
            .write_buffer(&sampler.params, 0, bytemuck::bytes_of(&params));
        let bound_parts: Vec<(wgpu::Buffer, u64, u64)> = bound
            .parts
            .iter()
            .map(|&k| (parts[k].buffer.clone(), parts[k].offset, parts[k].size))
            .collect();
        let group0 =
            self.binding
                .bind_group_of(group0_layout, declared, &sampler.params, &bound_parts);
        let pipeline = &sampler.pipelines[&shape];
        let stride = shape.attr_channels as usize;
        let mut out = Vec::with_capacity(points.len());
        for chunk in points.chunks(POINTS_PER_PASS) {
            let records = self.sample_chunk(pipeline, &sampler.layout, &group0, chunk, stride)?;
            for per_point in records.chunks_exact(2 * stride) {
                out.push(
                    (0..grids.len())
                        .map(|a| {
                            let (v, i) = (per_point[2 * a], per_point[2 * a + 1]);
                            (v[1] == 1.0).then_some(PointSample {
                                value: v[0],
                                index: [i[0], i[1], i[2]],
                            })
                        })
                        .collect(),
                );
            }
        }
        Ok(out)
    }

    /// Samples one chunk of points: one dispatch and one read-back of its records (two
    /// `vec4` per point and channel after the points, see `shaders/points.wgsl`).
    fn sample_chunk(
        &self,
        pipeline: &wgpu::ComputePipeline,
        layout: &wgpu::BindGroupLayout,
        group0: &wgpu::BindGroup,
        chunk: &[[f64; 3]],
        stride: usize,
    ) -> Result<Vec<[f32; 4]>, RenderError> {
        let device = self.binding.device();
        // The header (the point count), the points, then room for the records.
        let records = chunk.len() * stride * 2;
        let mut io: Vec<[f32; 4]> = Vec::with_capacity(1 + chunk.len() + records);
        io.push([f32::from_bits(chunk.len() as u32), 0.0, 0.0, 0.0]);
        io.extend(
            chunk
                .iter()
                .map(|p| [p[0] as f32, p[1] as f32, p[2] as f32, 0.0]),
        );
        let first = io.len() as u64 * 16;
        io.resize(io.len() + records, [0.0; 4]);
        let out_bytes = records as u64 * 16;
        let buffer = create_scoped(
            device,
            || format!("creating the buffer of {} sample points", chunk.len()),
            || {
                device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
                    label: Some("supercell points"),
                    contents: bytemuck::cast_slice(&io),
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                })
            },
        )?;
        let group1 = device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("supercell points"),
            layout,
            entries: &[wgpu::BindGroupEntry {
                binding: 0,
                resource: buffer.as_entire_binding(),
            }],
        });
        let mut enc = device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell points"),
                timestamp_writes: None,
            });
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, Some(group0), &[]);
            pass.set_bind_group(1, Some(&group1), &[]);
            pass.dispatch_workgroups((chunk.len() as u32).div_ceil(POINTS_WG), 1, 1);
        }
        self.queue.submit([enc.finish()]);
        let bytes = crate::device::read_buffer(device, self.queue, &buffer, first, out_bytes)
            .map_err(|e| RenderError::Gpu(e.to_string()))?;
        if let Some(e) = take_uncaptured_error() {
            return Err(RenderError::Gpu(e));
        }
        Ok(bytemuck::pod_collect_to_vec(&bytes))
    }

    /// The `sample_points` pipeline of frames of `shape`.
    fn points_pipeline(
        &self,
        layout: &wgpu::BindGroupLayout,
        group0_layout: &wgpu::BindGroupLayout,
        shape: FrameShape,
    ) -> Result<wgpu::ComputePipeline, RenderError> {
        let device = self.binding.device();
        let config = self.binding.config_of(shape);
        create_scoped(
            device,
            || format!("building the point sampler for {config:?}"),
            || {
                let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some("supercell points"),
                    source: wgpu::ShaderSource::Wgsl(Cow::Owned(shader_source_of(
                        ShaderPart::Points,
                        &config,
                    ))),
                });
                let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                    label: Some("supercell points"),
                    bind_group_layouts: &[Some(group0_layout), Some(layout)],
                    immediate_size: 0,
                });
                device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some("sample_points"),
                    layout: Some(&pl),
                    module: &module,
                    entry_point: Some("sample_points"),
                    compilation_options: Default::default(),
                    cache: None,
                })
            },
        )
    }
}
