//! The renderer: a WGSL compute ray-marcher that walks NanoVDB grids straight from GPU
//! storage buffers, and a CPU reference of the same algorithm.
//!
//! - [`Renderer`]: create for a `wgpu::Device`/`Queue` (yours, or a headless
//!   [`GpuContext`]), bind a frame with [`Renderer::set_frame`] (the [`SlotPart`]s of a
//!   frame-ring slot and where each grid lies in them, [`GridInParts`]) or
//!   [`Renderer::set_grids`] (slices of buffers you own), then [`Renderer::render`] or
//!   [`Renderer::encode`] a [`View`] and show [`Renderer::output`] or
//!   [`Renderer::read_image`].
//! - Frames and grids larger than one storage binding: the shaders read a frame through up
//!   to [`Renderer::max_parts`] storage bindings (8 to [`PARTS_LIMIT`], as the device's
//!   storage buffers per stage allow) of [`Renderer::part_bytes`] (2 GiB on the H200) and
//!   address every grid by 32-bit word through one accessor, so a grid may run over several
//!   parts and be up to 16 GiB.
//! - [`View`]: [`Camera`] (orbit, pan, zoom, fit; perspective or orthographic), one
//!   [`AttributeView`] per attribute channel ([`TransferFunction`]: colormap, opacity curve, value
//!   range, scattering or emissive), and [`RenderSettings`] (mode, lighting, steps).
//! - [`Renderer::sample_points`]: a frame's grid values at world positions (the player's
//!   probes, slices and line plots), read with the march's accessor and interpolation.
//! - [`render_cpu`]: the reference, for tests.
//! - Sort-last (`render --split space`): [`Renderer::set_region`] with a [`Region`], then
//!   [`Renderer::sun_extinction`], [`combine_sun_extinction`] over the ranks,
//!   [`Renderer::set_sun_extinction`], [`Renderer::render_premultiplied`],
//!   [`premultiplied_over`] front to back and [`Renderer::finish_premultiplied`]: the
//!   whole frame's picture from ranks that each hold one region of it (`region.rs`).
//!
//! Words: an attribute *channel* is one of the [`MAX_ATTRIBUTES`] grids a frame binds
//! (grid i of a frame, styled by attribute view i); a *slot* is a frame-ring slot, the
//! memory a frame lies in (its [`SlotPart`]s); the *path tracer* (`path_tracer.rs`) is
//! [`Mode::Path`]'s technique, never "the path", which elsewhere means a frame path.
//!
//! The march: rays are clipped to each grid's index bbox, then sampled on a fixed lattice
//! `t = (k + jitter)·dt`. At every sample the accessor walks root → upper → lower → leaf
//! (starting from the deepest cached node); when the sample lies inside a tile (of any
//! level) or outside every root tile, and the whole trilinear stencil of the region reads
//! that one value, the ray skips that grid to the region's exit (a hierarchical DDA over the
//! tree: 8³, 128³ or 4096³ cells) provided the value does not contribute (transparent in
//! shaded mode; any constant in MIP and isosurface modes). Skipped samples are exactly those
//! that would have added nothing, so the image equals the fixed-step march.

mod binding;
mod camera;
mod config;
mod context;
mod cpu;
mod denoise;
mod image;
mod layouts;
mod march;
mod params;
mod parts;
mod path_tracer;
mod points;
mod range;
mod region;
mod renderer;
mod scoped;
mod shader;
mod timing;
mod transfer;

#[cfg(test)]
pub(crate) use camera::box_corners;
pub use camera::{Camera, CameraFrame, Projection};
pub use config::{
    QMC_DIMS_MAX, RenderConfig, SAMPLES_PER_DISPATCH_GPU, SAMPLES_PER_DISPATCH_MAX,
    SAMPLES_PER_DISPATCH_SOFTWARE,
};
pub use context::GpuContext;
pub use cpu::{MarchWork, render_cpu, render_cpu_counted};
pub use denoise::{
    DenoiseParams, MAX_LEVELS as DENOISE_MAX_LEVELS, denoise_cpu, denoise_gpu, luminance,
};
pub use image::{Image, ImageDiff, aces, rel_mse, srgb_encode};
pub use layouts::{HDR_FORMAT, LDR_FORMAT};
pub use params::{
    AttributeView, GpuAttr, GpuGrid, GpuParams, InvalidSetting, Limits, MAX_ATTRIBUTES, MAX_PARTS,
    Mode, PARTS_LIMIT, RenderSettings, View, limits, smallest_voxel_edge,
};
pub use parts::{
    FrameCapacity, GridInParts, GridSlice, STORAGE_BUFFERS_PER_STAGE, SlotPart, parts_of_buffers,
    parts_spanned, try_upload_parts, try_upload_slot, upload_slot,
};
pub use path_tracer::{RR_DEPTH, SKIP_LEVELS_MAX, TracerKnobs, TracerStats, TracerUniform};
pub use points::PointSample;
pub use range::shown as shown_value;
pub use region::{PremultipliedImage, Region, combine_sun_extinction, premultiplied_over};
pub use renderer::Renderer;
pub use scoped::{catch_uncaptured_errors, create_scoped, take_uncaptured_error};
pub use shader::{
    ACCEL_CELLS, DEFAULT_PART_BYTES, MAX_ROOT_TILES, MIN_PART_BYTES, SUPPORTED_TYPES, ShaderConfig,
    ShaderPart, prelude, shader_source, shader_source_of,
};
pub use timing::FrameTiming;
pub use transfer::{Albedo, Colormap, MediumKind, TF_SIZE, TransferFunction, sample_table};

/// What can go wrong while rendering.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// No usable adapter or device.
    #[error("no GPU device: {0}")]
    NoDevice(String),
    /// wgpu reported a validation or device error.
    #[error("GPU error: {0}")]
    Gpu(String),
    /// The caller asked for something impossible.
    #[error("{0}")]
    Usage(String),
    /// Reading or writing files.
    #[error("{0}")]
    Io(String),
    /// Sort-last rendering (`--split space`, [`Renderer::set_region`]) was asked for
    /// something whose picture does not decompose over regions of the domain; names it.
    #[error("{0} cannot be rendered split over regions of the domain (sort-last)")]
    NotDecomposable(&'static str),
}
