//! The ray-march technique: its pipelines per frame shape, the acceleration and sun grid
//! passes (shaders/accel.wgsl, which the path tracer's majorants are built from too) and
//! the march's own pass (shaders/march.wgsl), all over the group 0 of a
//! [`FrameBinding`].

use std::collections::HashMap;

use super::RenderError;
use super::binding::{FrameBinding, FrameShape};
use super::layouts::{Pipelines, build_pipelines};
use super::params::{FLAG_SHADOWS, GpuParams};
use super::scoped::create_scoped;
use super::timing::{PREPARE_BEGIN, PREPARE_END, Timer};

/// Workgroup edge of the ray-march kernel (8 × 8 pixels).
const WG: u32 = 8;

/// The march's pipelines and what the acceleration grids were last built from.
pub(super) struct MarchPipeline {
    /// The pipelines of each frame shape met so far.
    pipelines: HashMap<FrameShape, Pipelines>,
    /// Inputs of the last build of the cell grids (grids, transfer functions, mode), and of
    /// the sun grid (those plus the light); `None`: rebuild.
    cells_key: Option<Vec<u8>>,
    sun_key: Option<Vec<u8>>,
    /// Counts the renders that recorded the acceleration passes: the path tracer builds its
    /// majorants from the cells again when this changes.
    accel_generation: u64,
}

impl MarchPipeline {
    /// The pipelines of `binding`'s current frame shape. Creates GPU objects: call inside
    /// error scopes.
    pub(super) fn new(device: &wgpu::Device, binding: &FrameBinding) -> MarchPipeline {
        let shape = binding.shape();
        let layouts = binding.layouts(shape.declared_parts());
        let first = build_pipelines(device, layouts, binding.config_of(shape));
        MarchPipeline {
            pipelines: HashMap::from([(shape, first)]),
            cells_key: None,
            sun_key: None,
            accel_generation: 0,
        }
    }

    /// Builds the pipelines of frames of `shape`, where not built yet (`binding` has their
    /// layouts).
    pub(super) fn ensure_pipelines(
        &mut self,
        device: &wgpu::Device,
        binding: &FrameBinding,
        shape: FrameShape,
    ) -> Result<(), RenderError> {
        if let std::collections::hash_map::Entry::Vacant(slot) = self.pipelines.entry(shape) {
            let config = binding.config_of(shape);
            let layouts = binding.layouts(shape.declared_parts());
            slot.insert(create_scoped(
                device,
                || format!("building the pipelines for {config:?}"),
                || build_pipelines(device, layouts, config),
            )?);
        }
        Ok(())
    }

    /// A new frame was bound: the next render builds the acceleration grids again.
    pub(super) fn frame_changed(&mut self) {
        self.cells_key = None;
        self.sun_key = None;
    }

    /// Counts the renders that recorded the acceleration passes.
    pub(super) fn accel_generation(&self) -> u64 {
        self.accel_generation
    }

    /// Records the acceleration passes that `params` and `tf` need (none when nothing they
    /// depend on changed), timed by `timer` where given; returns whether any ran.
    pub(super) fn encode_accel(
        &mut self,
        binding: &FrameBinding,
        encoder: &mut wgpu::CommandEncoder,
        params: &GpuParams,
        tf: &[[f32; 4]],
        timer: Option<&Timer>,
    ) -> bool {
        let ck = cells_key(params, tf);
        let sk = sun_key(params);
        let cells = self.cells_key.as_ref() != Some(&ck);
        let sun = cells || self.sun_key.as_ref() != Some(&sk);
        if !sun {
            return false;
        }
        let a = binding.accel();
        let p = &self.pipelines[&binding.shape()];
        let group = Some(binding.accel_group());
        {
            // Its own pass: the dispatch sizes it writes are read as indirect arguments next.
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell accel info"),
                timestamp_writes: timer.map(|t| t.writes(Some(PREPARE_BEGIN), None)),
            });
            pass.set_pipeline(&p.info);
            pass.set_bind_group(0, group, &[]);
            pass.set_bind_group(1, Some(&a.args_bind_group), &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        {
            let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                label: Some("supercell accel grids"),
                timestamp_writes: timer.map(|t| t.writes(None, Some(PREPARE_END))),
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
        self.cells_key = Some(ck);
        self.sun_key = Some(sk);
        self.accel_generation += 1;
        true
    }

    /// Sort-last: records the chosen acceleration passes over `binding`'s uniforms (already
    /// written): `info` (the cell layout and the dispatch sizes), `cells` (this region's
    /// cells) and `finish` (dilation and the sun grid, from the cells in the buffer, which
    /// may be the regions' combined cells written from the host). Forgets what the cells
    /// were last built from: the next whole-frame render builds them again.
    pub(super) fn encode_passes(
        &mut self,
        binding: &FrameBinding,
        encoder: &mut wgpu::CommandEncoder,
        info: bool,
        cells: bool,
        finish: bool,
    ) {
        let a = binding.accel();
        let p = &self.pipelines[&binding.shape()];
        let group = Some(binding.accel_group());
        if info {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&p.info);
            pass.set_bind_group(0, group, &[]);
            pass.set_bind_group(1, Some(&a.args_bind_group), &[]);
            pass.dispatch_workgroups(1, 1, 1);
        }
        if cells || finish {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_bind_group(0, group, &[]);
            if cells {
                pass.set_pipeline(&p.cells);
                pass.dispatch_workgroups_indirect(&a.args, 0);
            }
            if finish {
                pass.set_pipeline(&p.dilate);
                pass.dispatch_workgroups_indirect(&a.args, 12);
                pass.set_pipeline(&p.sun);
                pass.dispatch_workgroups_indirect(&a.args, 24);
            }
        }
        self.frame_changed();
        self.accel_generation += 1;
    }

    /// Records the ray-march of a `width` × `height` image (the uniforms already written,
    /// [`FrameBinding::prepare`]), timed by `timer` where given.
    pub(super) fn encode(
        &self,
        binding: &FrameBinding,
        encoder: &mut wgpu::CommandEncoder,
        size: [u32; 2],
        timer: Option<&Timer>,
    ) {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("supercell raymarch"),
            timestamp_writes: timer.map(Timer::pass_writes),
        });
        pass.set_pipeline(&self.pipelines[&binding.shape()].march);
        pass.set_bind_group(0, Some(binding.march_group()), &[]);
        pass.dispatch_workgroups(size[0].div_ceil(WG), size[1].div_ceil(WG), 1);
    }
}

/// What the cell grids depend on besides the grids themselves.
pub(super) fn cells_key(p: &GpuParams, tf: &[[f32; 4]]) -> Vec<u8> {
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
