//! The renderer's bind group and pipeline layouts and its ray-march and acceleration
//! pipelines, built per frame shape (`binding.rs` holds the layouts, `march.rs` the pipelines).

use std::borrow::Cow;

use super::shader::{PART_BINDING, ShaderConfig, ShaderPart, shader_source_of};

/// Format of `Renderer::output`: tone-mapped, sRGB-encoded 8-bit.
pub const LDR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba8Unorm;
/// Format of `Renderer::output_linear`: linear radiance, alpha = coverage.
pub const HDR_FORMAT: wgpu::TextureFormat = wgpu::TextureFormat::Rgba32Float;

/// The layouts of the shapes that declare one count of parts.
pub(super) struct PipelineLayouts {
    /// The march's bind group (acceleration buffers read-only).
    pub(super) march_group: wgpu::BindGroupLayout,
    /// The acceleration passes' bind group (acceleration buffers writable).
    pub(super) accel_group: wgpu::BindGroupLayout,
    pub(super) march: wgpu::PipelineLayout,
    pub(super) accel: wgpu::PipelineLayout,
    pub(super) info: wgpu::PipelineLayout,
}

/// The ray-march and acceleration pipelines of one [`FrameShape`].
pub(super) struct Pipelines {
    pub(super) march: wgpu::ComputePipeline,
    pub(super) info: wgpu::ComputePipeline,
    pub(super) cells: wgpu::ComputePipeline,
    pub(super) dilate: wgpu::ComputePipeline,
    pub(super) sun: wgpu::ComputePipeline,
}

/// The bind group and pipeline layouts of shapes declaring `declared` parts: the uniforms,
/// transfer functions and output images, the parts from [`PART_BINDING`], then the three
/// acceleration buffers.
pub(super) fn make_layouts(
    device: &wgpu::Device,
    args_layout: &wgpu::BindGroupLayout,
    declared: u32,
) -> PipelineLayouts {
    let mut entries = vec![
        storage_entry(0, true),
        storage_entry(1, true),
        texture_entry(2, LDR_FORMAT),
        texture_entry(3, HDR_FORMAT),
    ];
    for i in 0..declared {
        entries.push(storage_entry(PART_BINDING + i, true));
    }
    // The march reads the acceleration grids; the accel passes write them.
    let mut accel_entries = entries.clone();
    let accel = PART_BINDING + declared;
    for b in accel..accel + 3 {
        entries.push(storage_entry(b, true));
        accel_entries.push(storage_entry(b, false));
    }
    let march_group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("supercell raymarch"),
        entries: &entries,
    });
    let accel_group = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
        label: Some("supercell accel"),
        entries: &accel_entries,
    });
    let accel = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("supercell accel"),
        bind_group_layouts: &[Some(&accel_group)],
        immediate_size: 0,
    });
    let info = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("supercell accel info"),
        bind_group_layouts: &[Some(&accel_group), Some(args_layout)],
        immediate_size: 0,
    });
    let march = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
        label: Some("supercell raymarch"),
        bind_group_layouts: &[Some(&march_group)],
        immediate_size: 0,
    });
    PipelineLayouts {
        march_group,
        accel_group,
        march,
        accel,
        info,
    }
}

pub(super) fn build_pipelines(
    device: &wgpu::Device,
    l: &PipelineLayouts,
    cfg: ShaderConfig,
) -> Pipelines {
    let module = |part: ShaderPart, label: &str| {
        device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some(label),
            source: wgpu::ShaderSource::Wgsl(Cow::Owned(shader_source_of(part, &cfg))),
        })
    };
    let march_module = module(ShaderPart::March, "supercell raymarch");
    let accel_module = module(ShaderPart::Accel, "supercell accel");
    let pipeline = |entry: &str, pl: &wgpu::PipelineLayout, m: &wgpu::ShaderModule| {
        device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
            label: Some(entry),
            layout: Some(pl),
            module: m,
            entry_point: Some(entry),
            compilation_options: Default::default(),
            cache: None,
        })
    };
    Pipelines {
        march: pipeline("main", &l.march, &march_module),
        info: pipeline("accel_info", &l.info, &accel_module),
        cells: pipeline("accel_cells", &l.accel, &accel_module),
        dilate: pipeline("accel_dilate", &l.accel, &accel_module),
        sun: pipeline("accel_sun", &l.accel, &accel_module),
    }
}

pub(super) fn storage_entry(binding: u32, read_only: bool) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::Buffer {
            ty: wgpu::BufferBindingType::Storage { read_only },
            has_dynamic_offset: false,
            min_binding_size: None,
        },
        count: None,
    }
}

pub(super) fn texture_entry(
    binding: u32,
    format: wgpu::TextureFormat,
) -> wgpu::BindGroupLayoutEntry {
    wgpu::BindGroupLayoutEntry {
        binding,
        visibility: wgpu::ShaderStages::COMPUTE,
        ty: wgpu::BindingType::StorageTexture {
            access: wgpu::StorageTextureAccess::WriteOnly,
            format,
            view_dimension: wgpu::TextureViewDimension::D2,
        },
        count: None,
    }
}
