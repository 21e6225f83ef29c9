//! What a frame is rendered with: [`View`] (camera, attributes, settings) and its packing
//! into the uniform block both renderers read ([`GpuParams`]).

use bytemuck::{Pod, Zeroable};
use glam::Vec3;
use serde::{Deserialize, Serialize};

use super::camera::{Camera, Projection};
pub use super::range::Limits;
use super::transfer::{MediumKind, TF_SIZE, TransferFunction};

/// Grids (attributes) one frame can composite at once, each with its own transfer function.
pub const MAX_ATTRIBUTES: usize = 8;

/// Storage bindings ("parts") a frame's grids are read through. A grid starts at a word of
/// one part and may run on into the following ones, so a frame (and a grid) may be larger
/// than the device's largest storage binding: up to `MAX_PARTS` × the part size
/// (16 GiB with the 2 GiB parts of a 4 GiB-binding GPU). Every device supercell opens binds
/// at least this many; a device with more storage bindings per shader stage binds more
/// (`Renderer::max_parts`, at most [`PARTS_LIMIT`]).
pub const MAX_PARTS: usize = 8;

/// The most parts any device binds for one frame (where its storage bindings per shader
/// stage allow): 64 parts of 128 MiB hold 8 GiB on a software adapter.
pub const PARTS_LIMIT: usize = 64;

/// Rendering mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Emission-absorption with sun, sky, shadows and a ground plane.
    #[default]
    Shaded,
    /// Maximum-intensity projection of each attribute's normalized value.
    Mip,
    /// First crossing of one attribute's iso value (level sets: 0), lit. Spelled `iso`
    /// as `render --mode iso` does (`isosurface` is the old spelling).
    #[serde(rename = "iso", alias = "isosurface")]
    Isosurface,
    /// Progressive path tracing of the same medium (multiple scattering, sun and sky), an
    /// image that refines while nothing changes (`render::path`).
    Path,
}

/// Lighting, sampling and output knobs; the defaults are the trade-show look.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RenderSettings {
    /// Rendering mode.
    pub mode: Mode,
    /// Empty-space skipping over the tree's tiles (off: fixed-step march, for comparison).
    pub hdda: bool,
    /// Empty-space skipping and adaptive steps over the acceleration grid (cells of 8³
    /// voxels whose largest possible extinction under the transfer functions is known;
    /// shaded mode). Off: every lattice point is sampled.
    pub accel: bool,
    /// Adaptive steps span up to this many base steps where the medium is thin (1: fixed
    /// steps; needs `accel`); a step spans a power of two of them.
    pub max_step_scale: u32,
    /// Optical depth one adaptive step may span at the largest extinction around it.
    pub step_tau: f32,
    /// Base step length in voxel units ([`View::voxel_size`]: the smallest edge of the
    /// coarsest grid's voxel); grids with finer voxels refine it within their bbox.
    pub step_voxels: f32,
    /// Hard cap on march steps per ray.
    pub max_steps: u32,
    /// Rays stop once their transmittance falls below this.
    pub transmittance_cutoff: f32,
    /// Per-ray cap on traversal work (lookups plus root-tile comparisons), so that a corrupt
    /// grid cannot stall a frame.
    pub work_budget: u32,
    /// Sun shadows (from a sun-transmittance grid at acceleration-cell resolution, rebuilt
    /// when the grids, the look or the light change).
    pub shadows: bool,
    /// Most steps (one acceleration cell each) of a sun-grid march.
    pub shadow_steps: u32,
    /// Sun-grid marches stop at this optical depth (transmittance e^-x, about 0).
    pub shadow_tau_max: f32,
    /// Direction towards the sun: azimuth (degrees ccw from +x) and elevation (degrees).
    pub sun_azimuth_deg: f32,
    /// Sun elevation, degrees.
    pub sun_elevation_deg: f32,
    /// Sun colour times intensity (linear RGB).
    pub sun_color: [f32; 3],
    /// Henyey-Greenstein anisotropy of scattering media.
    pub phase_g: f32,
    /// Strength of the multiple-scattering approximation (light that still arrives through
    /// thick cloud): 1 gives two octaves of Wrenninge's approximation their nominal weight
    /// (1/2 and 1/4 of the energy, seeing 1/2 and 1/4 of the optical depth to the sun); 0
    /// leaves single scattering only.
    pub multiple_scattering: f32,
    /// Sky colour at the zenith (linear RGB).
    pub sky_zenith: [f32; 3],
    /// Sky colour at the horizon.
    pub sky_horizon: [f32; 3],
    /// Ambient (sky) light strength on the medium and ground.
    pub ambient: f32,
    /// Exposure before tone mapping.
    pub exposure: f32,
    /// Draw the ground plane (at the bottom of the world box) with a grid.
    pub ground: bool,
    /// Ground grid spacing, world units (0: a tenth of the box width, rounded).
    pub ground_spacing: f32,
    /// Ground albedo scale.
    pub ground_albedo: f32,
    /// Per-pixel random offset of the sample lattice (hides banding).
    pub jitter: bool,
    /// Seed of the jitter (vary it per frame for temporal accumulation).
    pub frame_seed: u32,
    /// Isosurface mode: attribute channel and value.
    pub iso_attribute: usize,
    /// Isosurface value.
    pub iso_value: f32,
    /// Path mode: scattering events per path at most (1: single scattering).
    pub path_max_bounces: u32,
    /// Path mode: samples per pixel each render adds (the player renders once per
    /// displayed frame, so this bounds the work per frame).
    pub path_samples_per_frame: u32,
    /// Path mode: the image stops refining at this many samples per pixel.
    pub path_max_samples: u32,
}

impl Default for RenderSettings {
    fn default() -> Self {
        RenderSettings {
            mode: Mode::Shaded,
            hdda: true,
            accel: true,
            max_step_scale: 16,
            step_tau: 0.3,
            step_voxels: 1.0,
            max_steps: 8192,
            transmittance_cutoff: 0.01,
            work_budget: 1 << 21,
            shadows: true,
            shadow_steps: 1024,
            shadow_tau_max: 12.0,
            sun_azimuth_deg: 200.0,
            sun_elevation_deg: 28.0,
            sun_color: [3.2, 2.95, 2.6],
            phase_g: 0.35,
            multiple_scattering: 1.0,
            sky_zenith: [0.16, 0.30, 0.60],
            sky_horizon: [0.50, 0.60, 0.72],
            ambient: 0.9,
            exposure: 0.85,
            ground: true,
            ground_spacing: 0.0,
            ground_albedo: 0.3,
            jitter: true,
            frame_seed: 0,
            iso_attribute: 0,
            iso_value: 0.0,
            path_max_bounces: 16,
            path_samples_per_frame: 1,
            path_max_samples: 4096,
        }
    }
}

/// The [`Limits`] of each numeric [`RenderSettings`] field, shared by the validator and the
/// renderer.
pub mod limits {
    use super::{Limits, MAX_ATTRIBUTES};

    /// `max_step_scale`: 1 (fixed steps) to 64 base steps.
    pub const MAX_STEP_SCALE: Limits = Limits::between(1.0, 64.0);
    /// `step_tau`: optical depth of one adaptive step.
    pub const STEP_TAU: Limits = Limits::between(0.0, 1.0);
    /// `step_voxels`: at least a hundredth of a voxel.
    pub const STEP_VOXELS: Limits = Limits::at_least(0.01);
    /// `max_steps`: at least one step per ray.
    pub const MAX_STEPS: Limits = Limits::at_least(1.0);
    /// `transmittance_cutoff`: 0 (never stop early) up to, not including, 1.
    pub const TRANSMITTANCE_CUTOFF: Limits = Limits::from_below(0.0, 1.0);
    /// `work_budget`: at least one lookup per ray.
    pub const WORK_BUDGET: Limits = Limits::at_least(1.0);
    /// `shadow_steps`: 1 to 65536 cells per sun-grid march.
    pub const SHADOW_STEPS: Limits = Limits::between(1.0, 65536.0);
    /// `shadow_tau_max`: 0 to 80 (transmittance e^-80 is 0 in f32).
    pub const SHADOW_TAU_MAX: Limits = Limits::between(0.0, 80.0);
    /// `sun_azimuth_deg`: any finite angle.
    pub const SUN_AZIMUTH_DEG: Limits = Limits::FINITE;
    /// `sun_elevation_deg`: −90..90 degrees.
    pub const SUN_ELEVATION_DEG: Limits = Limits::between(-90.0, 90.0);
    /// The largest light strength or exposure a scene may set. The tone curve squares
    /// radiance × exposure: past about 1e19 that overflows f32 to infinity, and ∞/∞ is NaN,
    /// which the picture shows as black. 1e4 (over 13 stops above 1) leaves every product of
    /// these settings far below that and is beyond any look a scene needs.
    pub const MAX_LIGHT: f64 = 1e4;
    /// Components of `sun_color`, `sky_zenith` and `sky_horizon`: linear RGB, 0 to
    /// [`MAX_LIGHT`].
    pub const COLOR: Limits = Limits::between(0.0, MAX_LIGHT);
    /// `phase_g`: Henyey-Greenstein anisotropy, strictly between −1 and 1.
    pub const PHASE_G: Limits = Limits::strictly_between(-1.0, 1.0);
    /// `multiple_scattering`: strength 0 to [`MAX_LIGHT`].
    pub const MULTIPLE_SCATTERING: Limits = Limits::between(0.0, MAX_LIGHT);
    /// `ambient`: strength 0 to [`MAX_LIGHT`].
    pub const AMBIENT: Limits = Limits::between(0.0, MAX_LIGHT);
    /// `exposure`: above 0, at most [`MAX_LIGHT`].
    pub const EXPOSURE: Limits = Limits {
        min: 0.0,
        min_inclusive: false,
        max: MAX_LIGHT,
        max_inclusive: true,
    };
    /// An attribute's `emission` (glow strength): 0 to [`MAX_LIGHT`].
    pub const EMISSION: Limits = Limits::between(0.0, MAX_LIGHT);
    /// An attribute's `extinction_scale`: 0 to 1e12. Calibration can suggest large scales
    /// for fields of small values (mixing ratios of 1e-5), so the bound is wide; beyond it
    /// every step's optical depth overflows to infinity.
    pub const EXTINCTION_SCALE: Limits = Limits::between(0.0, 1e12);
    /// `ground_spacing`: world units ≥ 0 (0: automatic).
    pub const GROUND_SPACING: Limits = Limits::at_least(0.0);
    /// `ground_albedo`: 0..1.
    pub const GROUND_ALBEDO: Limits = Limits::between(0.0, 1.0);
    /// `iso_attribute`: an attribute channel.
    pub const ISO_ATTRIBUTE: Limits = Limits::between(0.0, (MAX_ATTRIBUTES - 1) as f64);
    /// `iso_value`: any finite value.
    pub const ISO_VALUE: Limits = Limits::FINITE;
    /// `path_max_bounces`: 1 to 1024 scattering events.
    pub const PATH_MAX_BOUNCES: Limits = Limits::between(1.0, 1024.0);
    /// `path_samples_per_frame`: 1 to 1024 samples per pixel per render.
    pub const PATH_SAMPLES_PER_FRAME: Limits = Limits::between(1.0, 1024.0);
    /// `path_max_samples`: at least one sample per pixel.
    pub const PATH_MAX_SAMPLES: Limits = Limits::at_least(1.0);
}

/// A render setting outside its [`Limits`].
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{}: {message}", self.field_path())]
pub struct InvalidSetting {
    /// The field, as written in a scene's `[settings]` table.
    pub field: &'static str,
    /// The component, for colours.
    pub index: Option<usize>,
    /// What is wrong.
    pub message: String,
}

impl InvalidSetting {
    /// `field` or `field[index]`.
    pub fn field_path(&self) -> String {
        match self.index {
            Some(i) => format!("{}[{i}]", self.field),
            None => self.field.to_string(),
        }
    }
}

impl RenderSettings {
    /// Every numeric field: name, component (colours), value and limits.
    fn numeric_fields(&self) -> Vec<(&'static str, Option<usize>, f64, Limits)> {
        use limits as l;
        let mut v = vec![
            (
                "max_step_scale",
                None,
                f64::from(self.max_step_scale),
                l::MAX_STEP_SCALE,
            ),
            ("step_tau", None, f64::from(self.step_tau), l::STEP_TAU),
            (
                "step_voxels",
                None,
                f64::from(self.step_voxels),
                l::STEP_VOXELS,
            ),
            ("max_steps", None, f64::from(self.max_steps), l::MAX_STEPS),
            (
                "transmittance_cutoff",
                None,
                f64::from(self.transmittance_cutoff),
                l::TRANSMITTANCE_CUTOFF,
            ),
            (
                "work_budget",
                None,
                f64::from(self.work_budget),
                l::WORK_BUDGET,
            ),
            (
                "shadow_steps",
                None,
                f64::from(self.shadow_steps),
                l::SHADOW_STEPS,
            ),
            (
                "shadow_tau_max",
                None,
                f64::from(self.shadow_tau_max),
                l::SHADOW_TAU_MAX,
            ),
            (
                "sun_azimuth_deg",
                None,
                f64::from(self.sun_azimuth_deg),
                l::SUN_AZIMUTH_DEG,
            ),
            (
                "sun_elevation_deg",
                None,
                f64::from(self.sun_elevation_deg),
                l::SUN_ELEVATION_DEG,
            ),
        ];
        for (i, c) in self.sun_color.iter().enumerate() {
            v.push(("sun_color", Some(i), f64::from(*c), l::COLOR));
        }
        v.push(("phase_g", None, f64::from(self.phase_g), l::PHASE_G));
        v.push((
            "multiple_scattering",
            None,
            f64::from(self.multiple_scattering),
            l::MULTIPLE_SCATTERING,
        ));
        for (name, rgb) in [
            ("sky_zenith", self.sky_zenith),
            ("sky_horizon", self.sky_horizon),
        ] {
            for (i, c) in rgb.iter().enumerate() {
                v.push((name, Some(i), f64::from(*c), l::COLOR));
            }
        }
        v.extend([
            ("ambient", None, f64::from(self.ambient), l::AMBIENT),
            ("exposure", None, f64::from(self.exposure), l::EXPOSURE),
            (
                "ground_spacing",
                None,
                f64::from(self.ground_spacing),
                l::GROUND_SPACING,
            ),
            (
                "ground_albedo",
                None,
                f64::from(self.ground_albedo),
                l::GROUND_ALBEDO,
            ),
            (
                "iso_attribute",
                None,
                self.iso_attribute as f64,
                l::ISO_ATTRIBUTE,
            ),
            ("iso_value", None, f64::from(self.iso_value), l::ISO_VALUE),
            (
                "path_max_bounces",
                None,
                f64::from(self.path_max_bounces),
                l::PATH_MAX_BOUNCES,
            ),
            (
                "path_samples_per_frame",
                None,
                f64::from(self.path_samples_per_frame),
                l::PATH_SAMPLES_PER_FRAME,
            ),
            (
                "path_max_samples",
                None,
                f64::from(self.path_max_samples),
                l::PATH_MAX_SAMPLES,
            ),
        ]);
        v
    }

    /// Checks every numeric field against its [`limits`]; the first one outside them is the
    /// error.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        for (field, index, value, lim) in self.numeric_fields() {
            if !lim.contains(value) {
                // f32 settings print as written (1.0001, not 1.000100016593933).
                let shown = if f64::from(value as f32) == value || value.is_nan() {
                    super::range::shown(value as f32)
                } else {
                    format!("{value}")
                };
                return Err(InvalidSetting {
                    field,
                    index,
                    message: format!("must be {}, found {shown}", lim.describe()),
                });
            }
        }
        Ok(())
    }
}

/// One attribute channel of a view: its transfer function and switch.
#[derive(Clone, Debug, PartialEq)]
pub struct AttributeView {
    /// Shown or not.
    pub enabled: bool,
    /// Its look.
    pub tf: TransferFunction,
}

/// Everything needed to render a frame besides the grids themselves.
#[derive(Clone, Debug, PartialEq)]
pub struct View {
    /// The camera.
    pub camera: Camera,
    /// Attribute channel `i` styles grid `i` of the bound frame.
    pub attributes: Vec<Option<AttributeView>>,
    /// Settings.
    pub settings: RenderSettings,
    /// World box of the scene (ground height, ambient gradient, camera fit).
    pub world_bbox: [[f32; 3]; 2],
    /// The voxel unit, world units: the smallest edge of the coarsest grid's voxel (of
    /// voxels (10000, 10000, 250) m, 250 m; [`smallest_voxel_edge`]). Step lengths are given
    /// in this unit, and the march divides the step by a power of two within the bbox of
    /// each grid with finer voxels (march.wgsl's `refinement`). It sets how densely rays
    /// are sampled, never how much a step absorbs: steps and extinctions are in world
    /// units, and every grid is sampled through its own index ↔ world map, so voxels of
    /// any per-axis scale (or any affine map) give the optical depth of the world distance
    /// a ray crosses, whatever its direction.
    pub voxel_size: f32,
}

/// The voxel unit of a grid of voxel size `voxel_size` (NanoVDB's per-axis voxel size,
/// world units): its smallest edge, the finest spacing along which a ray can cross its
/// values; `None` where an edge is 0 or not finite. A negative edge (a mirrored axis)
/// counts by its length.
pub fn smallest_voxel_edge(voxel_size: [f64; 3]) -> Option<f32> {
    let edges = voxel_size.map(f64::abs);
    if !edges.iter().all(|e| e.is_finite() && *e > 0.0) {
        return None;
    }
    let e = edges.into_iter().fold(f64::INFINITY, f64::min) as f32;
    (e.is_finite() && e > 0.0).then_some(e)
}

impl View {
    /// A view of `world_bbox` with the default settings and camera fitted for `aspect`.
    pub fn new(
        world_bbox: [[f32; 3]; 2],
        voxel_size: f32,
        attributes: Vec<Option<AttributeView>>,
        aspect: f32,
    ) -> View {
        View {
            camera: Camera::fit(world_bbox, aspect),
            attributes,
            settings: RenderSettings::default(),
            world_bbox,
            voxel_size,
        }
    }

    /// The baked transfer-function table: `MAX_ATTRIBUTES` rows of `TF_SIZE` entries; in
    /// [`Mode::Path`] the path tracer's ([`TransferFunction::bake_path`]: the colour is the
    /// attribute's albedo where it has one).
    pub fn tf_table(&self) -> Vec<[f32; 4]> {
        let path = self.settings.mode == Mode::Path;
        let mut t = vec![[0.0f32; 4]; MAX_ATTRIBUTES * TF_SIZE];
        for (i, a) in self.attributes.iter().take(MAX_ATTRIBUTES).enumerate() {
            if let Some(a) = a {
                let row = if path { a.tf.bake_path() } else { a.tf.bake() };
                t[i * TF_SIZE..(i + 1) * TF_SIZE].copy_from_slice(&row);
            }
        }
        t
    }

    /// The uniform block for an image of `width` × `height`.
    pub fn gpu_params(&self, width: u32, height: u32) -> GpuParams {
        let s = &self.settings;
        let f = self.camera.frame();
        let aspect = width as f32 / height.max(1) as f32;
        let ortho = self.camera.projection == Projection::Orthographic;
        let (half, pixel_angle) = if ortho {
            (self.camera.ortho_height * 0.5, 0.0)
        } else {
            let h = (self.camera.fov_y_deg.to_radians() * 0.5).tan();
            (h, 2.0 * h / height.max(1) as f32)
        };
        let (az, el) = (
            s.sun_azimuth_deg.to_radians(),
            s.sun_elevation_deg.to_radians(),
        );
        let sun = Vec3::new(el.cos() * az.cos(), el.cos() * az.sin(), el.sin()).normalize();
        let voxel = self.voxel_size.max(1e-12);
        let [lo, hi] = self.world_bbox;
        let spacing = if s.ground_spacing > 0.0 {
            s.ground_spacing
        } else {
            nice_spacing((hi[0] - lo[0]).max(hi[1] - lo[1]) / 8.0)
        };
        let mut flags = 0;
        for (on, bit) in [
            (s.hdda, FLAG_HDDA),
            (ortho, FLAG_ORTHO),
            (s.shadows, FLAG_SHADOWS),
            (s.ground, FLAG_GROUND),
            (s.jitter, FLAG_JITTER),
            (s.accel, FLAG_ACCEL),
        ] {
            if on {
                flags |= bit;
            }
        }
        let mut attrs = [GpuAttr::zeroed(); MAX_ATTRIBUTES];
        for (i, a) in self.attributes.iter().take(MAX_ATTRIBUTES).enumerate() {
            let Some(a) = a else { continue };
            attrs[i] = GpuAttr {
                range_lo: a.tf.range[0],
                range_inv: a.tf.range_inv(),
                extinction: a.tf.extinction,
                emission: a.tf.emission,
                kind: match a.tf.kind {
                    MediumKind::Scatter => KIND_SCATTER,
                    MediumKind::Emissive => KIND_EMISSIVE,
                },
                enabled: a.enabled as u32,
                tf_row: i as u32,
                shadow: a.tf.casts_shadow as u32,
            };
        }
        let v4 = |v: Vec3, w: f32| [v.x, v.y, v.z, w];
        let a3 = |v: [f32; 3], w: f32| [v[0], v[1], v[2], w];
        GpuParams {
            cam_pos: v4(f.eye, ortho as u32 as f32),
            cam_fwd: v4(f.forward, half),
            cam_right: v4(f.right, aspect),
            cam_up: v4(f.up, voxel),
            light_dir: v4(sun, s.phase_g),
            light_color: a3(s.sun_color, s.multiple_scattering),
            sky_zenith: a3(s.sky_zenith, s.ambient),
            sky_horizon: a3(s.sky_horizon, s.exposure),
            ground: [lo[2], spacing, s.ground_albedo, hi[2]],
            size: [width, height],
            // Path mode shares the shaded mode's uniforms (its acceleration grids, the march
            // and the CPU reference see a shaded view); the renderer picks the path tracer
            // from the settings.
            mode: match s.mode {
                Mode::Path => Mode::Shaded,
                m => m,
            } as u32,
            flags,
            // The clamps below use the limits the validator enforces, so they never change
            // a validated setting; they keep settings built in code from breaking a frame.
            dt: limits::STEP_VOXELS.clamp(s.step_voxels, 1.0) * voxel,
            max_steps: s.max_steps,
            t_cutoff: s.transmittance_cutoff,
            iso_value: s.iso_value,
            iso_attr: limits::ISO_ATTRIBUTE
                .clamp_u32(s.iso_attribute.min(u32::MAX as usize) as u32),
            shadow_steps: limits::SHADOW_STEPS.clamp_u32(s.shadow_steps),
            step_tau: limits::STEP_TAU.clamp(s.step_tau, 0.0),
            shadow_tau_max: limits::SHADOW_TAU_MAX.clamp(s.shadow_tau_max, 12.0),
            frame_seed: s.frame_seed,
            work_budget: s.work_budget,
            pixel_angle,
            max_step_scale: limits::MAX_STEP_SCALE.clamp_u32(s.max_step_scale),
            attrs,
            // Where the grids lie is the renderer's to fill in (it binds the frame); an empty
            // record reads as no grid.
            grids: [GpuGrid::zeroed(); MAX_ATTRIBUTES],
            // The renderer fills these in for sort-last renders (`Region`).
            region_lo: [0.0; 4],
            region_hi: [0.0; 4],
            region_bmin: [[0; 4]; MAX_ATTRIBUTES],
            region_bmax: [[0; 4]; MAX_ATTRIBUTES],
        }
    }
}

/// 1, 2 or 5 times a power of ten, near `x`.
fn nice_spacing(x: f32) -> f32 {
    if !(x.is_finite() && x > 0.0) {
        return 1.0;
    }
    let p = 10f32.powf(x.log10().floor());
    let m = x / p;
    p * if m < 1.5 {
        1.0
    } else if m < 3.5 {
        2.0
    } else if m < 7.5 {
        5.0
    } else {
        10.0
    }
}

// The shader's `FLAG_*`, `KIND_*`, `MODE_*` and `MAX_ATTRS` are generated from these
// constants, [`Mode`] and [`MAX_ATTRIBUTES`] (`shader::prelude`).

/// Flag bits of [`GpuParams::flags`]: tile skipping (HDDA).
pub const FLAG_HDDA: u32 = 1;
/// Orthographic camera.
pub const FLAG_ORTHO: u32 = 2;
/// Shadow rays.
pub const FLAG_SHADOWS: u32 = 4;
/// Ground plane.
pub const FLAG_GROUND: u32 = 8;
/// Lattice jitter.
pub const FLAG_JITTER: u32 = 16;
/// Acceleration-grid skipping and adaptive steps.
pub const FLAG_ACCEL: u32 = 32;
/// Sort-last: draw only the region [`GpuParams::region_lo`]..`region_hi` of the whole
/// frame whose grids' bboxes are [`GpuParams::region_bmin`]..`region_bmax`: the march
/// writes the region's premultiplied colour, the acceleration cells count the region's
/// blocks only.
pub const FLAG_REGION: u32 = 64;
/// Sort-last: the march takes the volume's premultiplied colour from the acceleration-cell
/// buffer (one vec4 a pixel) and adds the ground and sky behind it.
pub const FLAG_COMPOSITE: u32 = 128;
/// [`GpuAttr::kind`] of a scattering medium ([`MediumKind::Scatter`]).
pub const KIND_SCATTER: u32 = 0;
/// [`GpuAttr::kind`] of an emissive medium ([`MediumKind::Emissive`]).
pub const KIND_EMISSIVE: u32 = 1;

/// Per-attribute uniform data (WGSL `Attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct GpuAttr {
    /// Value at u = 0.
    pub range_lo: f32,
    /// 1 / (hi − lo).
    pub range_inv: f32,
    /// Extinction at opacity 1, per world unit.
    pub extinction: f32,
    /// Emission strength.
    pub emission: f32,
    /// [`KIND_SCATTER`] or [`KIND_EMISSIVE`].
    pub kind: u32,
    /// 1 when shown.
    pub enabled: u32,
    /// Row of the transfer-function table.
    pub tf_row: u32,
    /// 1 when it shadows.
    pub shadow: u32,
}

/// Where one attribute channel's grid lies in the bound parts (WGSL `GridBase`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct GpuGrid {
    /// The part holding the grid's first word.
    pub part: u32,
    /// Word offset of the grid in that part (below the part size).
    pub offset_words: u32,
    /// Words of the grid (0: no grid; reads past the end give 0).
    pub words: u32,
    /// Padding to 16 bytes.
    pub pad: u32,
}

impl GpuParams {
    /// The camera ray through image point (`x`, `y`), in pixels from the image's top-left
    /// corner (pixel (i, j)'s centre is (i + 0.5, j + 0.5)): origin and unit direction, as
    /// march.wgsl's `camera_ray` casts it (the CPU reference casts its rays with this).
    pub fn pixel_ray(&self, x: f32, y: f32) -> (Vec3, Vec3) {
        let v3 = |a: [f32; 4]| Vec3::new(a[0], a[1], a[2]);
        let ndc_x = (x / self.size[0] as f32) * 2.0 - 1.0;
        let ndc_y = 1.0 - (y / self.size[1] as f32) * 2.0;
        let h = self.cam_fwd[3];
        let sx = ndc_x * h * self.cam_right[3];
        let sy = ndc_y * h;
        let (pos, fwd) = (v3(self.cam_pos), v3(self.cam_fwd));
        let (right, up) = (v3(self.cam_right), v3(self.cam_up));
        if self.flags & FLAG_ORTHO != 0 {
            (pos + sx * right + sy * up, fwd)
        } else {
            (pos, (fwd + sx * right + sy * up).normalize())
        }
    }
}

/// The uniform block (WGSL `Params`), field for field.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct GpuParams {
    /// Eye; w: 1 orthographic.
    pub cam_pos: [f32; 4],
    /// Forward; w: tan(fov/2) or half view height.
    pub cam_fwd: [f32; 4],
    /// Right; w: aspect.
    pub cam_right: [f32; 4],
    /// Up; w: the voxel unit ([`View::voxel_size`]; the refinement's base and the powder
    /// term's length scale).
    pub cam_up: [f32; 4],
    /// Towards the sun; w: phase g.
    pub light_dir: [f32; 4],
    /// Sun colour; w: multiple scattering.
    pub light_color: [f32; 4],
    /// Zenith colour; w: ambient.
    pub sky_zenith: [f32; 4],
    /// Horizon colour; w: exposure.
    pub sky_horizon: [f32; 4],
    /// Ground height, grid spacing, albedo, scene top.
    pub ground: [f32; 4],
    /// Image size.
    pub size: [u32; 2],
    /// [`Mode`] as u32.
    pub mode: u32,
    /// `FLAG_*` bits.
    pub flags: u32,
    /// Step, world units.
    pub dt: f32,
    /// Step cap.
    pub max_steps: u32,
    /// Transmittance cutoff.
    pub t_cutoff: f32,
    /// Iso value.
    pub iso_value: f32,
    /// Iso attribute channel.
    pub iso_attr: u32,
    /// Most steps of a sun-grid march.
    pub shadow_steps: u32,
    /// Optical depth of one adaptive step.
    pub step_tau: f32,
    /// Sun-grid marches stop at this optical depth.
    pub shadow_tau_max: f32,
    /// Jitter seed.
    pub frame_seed: u32,
    /// Work budget per ray.
    pub work_budget: u32,
    /// Angle subtended by a pixel (perspective), radians.
    pub pixel_angle: f32,
    /// Longest adaptive step, in base steps.
    pub max_step_scale: u32,
    /// Attribute channels.
    pub attrs: [GpuAttr; MAX_ATTRIBUTES],
    /// Where each channel's grid lies in the bound parts.
    pub grids: [GpuGrid; MAX_ATTRIBUTES],
    /// Sort-last (`FLAG_REGION`): the world box this render draws, `[lo, hi)` (faces on
    /// the domain's faces at ∓3e38); w unused.
    pub region_lo: [f32; 4],
    /// See [`region_lo`](Self::region_lo).
    pub region_hi: [f32; 4],
    /// Sort-last: per channel, the whole frame's grid's index bbox (inclusive), which the
    /// shaders use in place of the bound grid's; w unused.
    pub region_bmin: [[i32; 4]; MAX_ATTRIBUTES],
    /// See [`region_bmin`](Self::region_bmin).
    pub region_bmax: [[i32; 4]; MAX_ATTRIBUTES],
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_layout_matches_wgsl() {
        // 9 vec4 + 16 scalars + 8 × 32-byte attributes + 8 × 16-byte grid records, then the
        // region's 2 vec4 and 2 × 8 vec4<i32>; WGSL's uniform rules give the same offsets
        // because every member is naturally aligned (and the arrays start at multiples of
        // 16).
        assert_eq!(
            std::mem::size_of::<GpuParams>(),
            9 * 16 + 16 * 4 + 8 * 32 + 8 * 16 + 2 * 16 + 2 * 8 * 16
        );
        assert_eq!(std::mem::offset_of!(GpuParams, region_bmin), 624);
        assert_eq!(std::mem::offset_of!(GpuParams, attrs), 208);
        assert_eq!(std::mem::offset_of!(GpuParams, grids), 464);
        assert_eq!(nice_spacing(3800.0), 5000.0);
        assert_eq!(nice_spacing(1.2), 1.0);
    }

    #[test]
    fn the_voxel_unit_is_the_smallest_edge() {
        assert_eq!(smallest_voxel_edge([10000.0, 10000.0, 250.0]), Some(250.0));
        assert_eq!(smallest_voxel_edge([0.7034, 0.7034, 0.7165]), Some(0.7034));
        // A mirrored axis counts by its length.
        assert_eq!(smallest_voxel_edge([-2.0, 3.0, 4.0]), Some(2.0));
        assert_eq!(smallest_voxel_edge([4.0, -0.5, 4.0]), Some(0.5));
        for bad in [
            [0.0, 1.0, 1.0],
            [f64::NAN, 1.0, 1.0],
            [1.0, f64::INFINITY, 1.0],
        ] {
            assert_eq!(smallest_voxel_edge(bad), None, "{bad:?}");
        }
        // Below f32's range.
        assert_eq!(smallest_voxel_edge([1e-60, 1.0, 1.0]), None);
    }
}
