//! The synthetic supercell generator: a deterministic, evolving tornadic storm as sparse volumes.
//!
//! A [`Storm`] evaluates a procedural model of a tornadic supercell (updraft tower,
//! overshooting top, anvil, wall cloud, tornado funnel with a Rankine vortex and debris
//! cloud, forward- and rear-flank rain curtains with the hook) on a sparse voxel grid, one
//! [`SparseVolume`] per [`Attribute`] and frame. [`generate_dataset`] encodes every frame as
//! NanoVDB grids and writes them, in order, to a dataset.
//!
//! The same [`StormParams`] always give bit-identical volumes, whatever the thread count:
//! every brick is computed independently from its coordinates, and results are collected in
//! brick order.

mod bricks;
pub mod generate;
pub mod model;
mod nest;
pub mod noise;
pub mod preview;
pub mod size;

use crate::format::{GridClass, SparseVolume};
use serde::{Deserialize, Serialize};
use std::fmt;

pub use bricks::BrickStats;
use model::{DOMAIN_XY_M, DOMAIN_Z_M, FrameModel};
use noise::NoiseTile;

/// One scalar field of the storm; each is its own grid (the same index space and transform,
/// except the nested [`Attribute::FunnelCloud`]'s: see [`StormParams::transform_of`]).
///
/// The fields are those a cloud model such as CM1 or WRF writes for a supercell, named in
/// words (the CM1 output variable is given with each) and in the units a meteorologist
/// plots. Every value comes from one evaluation of the storm model per voxel, so the fields
/// agree with each other: the hail core sits in the reflectivity maximum, the pressure is
/// lowest in the tornado's core, the cold pool lies under the rain. docs/ATTRIBUTES.md
/// describes each one: range, what it shows, how it is modelled, where it is active.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribute {
    /// Total cloud condensate, cloud water plus cloud ice (CM1 `qc + qi`), g/kg, with lofted
    /// debris near the tornado's base added as if it were condensate (so it shows up in
    /// renderings of the cloud).
    Cloud,
    /// Rain mixing ratio (CM1 `qr`), g/kg.
    Rain,
    /// Ground-relative three-dimensional wind speed (|(u, v, w)|, CM1 `uinterp`, `vinterp`,
    /// `winterp`), m/s.
    WindSpeed,
    /// Vertical velocity (CM1 `w`/`winterp`), m/s: positive in updrafts, negative in
    /// downdrafts.
    VerticalVelocity,
    /// Vertical vorticity (CM1 `zvort`), 1/s: positive (cyclonic) in the mesocyclone and
    /// tornado.
    Vorticity,
    /// Cloud water mixing ratio (CM1 `qc`), g/kg: the liquid part of [`Attribute::Cloud`]
    /// (supercooled in the updraft up to about 9.5 km).
    CloudWater,
    /// Cloud ice mixing ratio (CM1 `qi`), g/kg: the frozen part of [`Attribute::Cloud`]
    /// (upper updraft, overshooting top, anvil).
    CloudIce,
    /// Snow mixing ratio (CM1 `qs`), g/kg: aggregates in the anvil and above the melting
    /// level of the forward flank.
    Snow,
    /// Graupel mixing ratio (CM1 `qg`), g/kg: rimed ice on the updraft's flanks and in the
    /// forward flank above and just below the melting level.
    Graupel,
    /// Hail mixing ratio (CM1 `qhl` in the NSSL scheme, `qg` with hail parameters in
    /// Morrison's), g/kg: the hail shaft on the updraft's north-east flank, reaching the
    /// ground.
    Hail,
    /// Water vapour mixing ratio perturbation from the environment (CM1 `qvpert`), g/kg:
    /// moist in the updraft, dry in the downdrafts.
    VaporPerturbation,
    /// Equivalent radar reflectivity factor (CM1 `dbz`), dBZ, from rain, snow, graupel and
    /// hail by the Rayleigh relation for exponential size distributions (see
    /// [`model::reflectivity_dbz`]).
    Reflectivity,
    /// Pressure perturbation from the environment (CM1 `prspert`, written there in Pa),
    /// hPa: lowest in the tornado and mesocyclone, high under the cold pool and atop the
    /// updraft.
    PressurePerturbation,
    /// Potential-temperature perturbation from the environment (CM1 `thpert`), K: warm in
    /// the updraft, cold in the overshooting top and in the cold pool under the downdrafts.
    ThetaPerturbation,
    /// The tornado's condensation funnel and its debris cloud, g/kg, on a grid
    /// [`NEST_REFINEMENT`] times finer than the others that covers only a box around the
    /// vortex (a nested grid): the condensate and debris the funnel adds to the rest of the
    /// cloud. Where it is generated, [`Attribute::Cloud`] leaves the funnel out, so the two
    /// add up to the total condensate without counting the funnel twice.
    FunnelCloud,
}

/// How many times finer than the storm's grid the nested grid of
/// [`Attribute::FunnelCloud`] is (a power of two: its voxels nest in the coarse ones).
pub const NEST_REFINEMENT: u32 = 4;

/// Descriptive metadata of an [`Attribute`], for manifests and transfer functions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AttributeInfo {
    /// Grid name (snake case), as written into the NanoVDB grid and the manifest.
    pub name: &'static str,
    /// Physical units.
    pub units: &'static str,
    /// Nominal value range: values the model produces fall inside it.
    pub range: (f32, f32),
    /// NanoVDB grid class.
    pub class: GridClass,
    /// One-line description.
    pub description: &'static str,
    /// The variable a CM1 output file holds it in (as in CM1's `cm1out` files).
    pub cm1_name: &'static str,
}

/// An `--attributes` value names an attribute the generator does not make, twice, or none.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct AttributeListError(String);

impl Attribute {
    /// Every attribute, in the order they are generated when all are asked for.
    pub const ALL: [Attribute; 15] = [
        Attribute::Cloud,
        Attribute::Rain,
        Attribute::WindSpeed,
        Attribute::VerticalVelocity,
        Attribute::Vorticity,
        Attribute::CloudWater,
        Attribute::CloudIce,
        Attribute::Snow,
        Attribute::Graupel,
        Attribute::Hail,
        Attribute::VaporPerturbation,
        Attribute::Reflectivity,
        Attribute::PressurePerturbation,
        Attribute::ThetaPerturbation,
        Attribute::FunnelCloud,
    ];

    /// The attributes of the built-in dataset and of `supercell-data generate` without
    /// `--attributes`: what the default scenes show, and cheap to generate.
    pub const DEFAULT: [Attribute; 6] = [
        Attribute::Cloud,
        Attribute::Rain,
        Attribute::WindSpeed,
        Attribute::VerticalVelocity,
        Attribute::Vorticity,
        Attribute::FunnelCloud,
    ];

    /// Metadata of this attribute.
    pub fn info(self) -> AttributeInfo {
        // All are fog volumes (a density-like scalar sampled through a transfer function);
        // the signed ones simply use a transfer function centred on zero.
        let (name, units, range, cm1_name, description) = match self {
            Attribute::Cloud => (
                "cloud",
                "g/kg",
                (0.0, 4.0),
                "qc+qi",
                "total cloud condensate (cloud water plus cloud ice), with lofted debris at the tornado's base",
            ),
            Attribute::Rain => ("rain", "g/kg", (0.0, 8.0), "qr", "rain mixing ratio"),
            Attribute::WindSpeed => (
                "wind_speed",
                "m/s",
                (0.0, 130.0),
                "uinterp,vinterp,winterp",
                "ground-relative wind speed",
            ),
            Attribute::VerticalVelocity => (
                "vertical_velocity",
                "m/s",
                (-40.0, 70.0),
                "winterp",
                "vertical velocity: updrafts positive, downdrafts negative",
            ),
            Attribute::Vorticity => (
                "vorticity",
                "1/s",
                (-0.1, 4.0),
                "zvort",
                "vertical vorticity, cyclonic positive",
            ),
            Attribute::CloudWater => (
                "cloud_water",
                "g/kg",
                (0.0, 4.0),
                "qc",
                "cloud water mixing ratio (liquid, supercooled aloft)",
            ),
            Attribute::CloudIce => (
                "cloud_ice",
                "g/kg",
                (0.0, 4.0),
                "qi",
                "cloud ice mixing ratio",
            ),
            Attribute::Snow => ("snow", "g/kg", (0.0, 3.0), "qs", "snow mixing ratio"),
            Attribute::Graupel => ("graupel", "g/kg", (0.0, 6.0), "qg", "graupel mixing ratio"),
            Attribute::Hail => ("hail", "g/kg", (0.0, 10.0), "qhl", "hail mixing ratio"),
            Attribute::VaporPerturbation => (
                "vapor_perturbation",
                "g/kg",
                (-6.0, 8.0),
                "qvpert",
                "water vapour mixing ratio minus the environment's",
            ),
            Attribute::Reflectivity => (
                "reflectivity",
                "dBZ",
                (-10.0, 80.0),
                "dbz",
                "equivalent radar reflectivity factor of rain, snow, graupel and hail",
            ),
            Attribute::PressurePerturbation => (
                "pressure_perturbation",
                "hPa",
                (-120.0, 10.0),
                "prspert",
                "pressure minus the environment's",
            ),
            Attribute::ThetaPerturbation => (
                "theta_perturbation",
                "K",
                (-20.0, 15.0),
                "thpert",
                "potential temperature minus the environment's",
            ),
            Attribute::FunnelCloud => (
                "funnel_cloud",
                "g/kg",
                (0.0, 4.0),
                "qc+qi",
                "condensation funnel and debris cloud of the tornado, on a finer nested grid around the vortex",
            ),
        };
        AttributeInfo {
            name,
            units,
            range,
            class: GridClass::FogVolume,
            description,
            cm1_name,
        }
    }

    /// The grid name, e.g. `"cloud"`.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// The attribute whose grid name is `name`.
    pub fn from_name(name: &str) -> Option<Attribute> {
        Attribute::ALL.into_iter().find(|a| a.name() == name)
    }

    /// Whether this attribute's grid is the nested one: [`NEST_REFINEMENT`] times finer,
    /// over a box around the tornado only.
    pub fn is_nested(self) -> bool {
        self == Attribute::FunnelCloud
    }

    /// Whether evaluating this attribute needs the model's extended fields (the
    /// microphysics, thermodynamics and reflectivity beyond the default five), which cost
    /// extra work per voxel.
    pub fn is_extended(self) -> bool {
        !Attribute::DEFAULT.contains(&self)
    }

    /// Parses an attribute selection: `default` ([`Attribute::DEFAULT`]), `all`
    /// ([`Attribute::ALL`]), or comma-separated grid names (`cloud,rain,hail`), in the order
    /// given. Unknown or repeated names are errors that name the value.
    pub fn parse_list(text: &str) -> Result<Vec<Attribute>, AttributeListError> {
        let known = || {
            Attribute::ALL
                .iter()
                .map(|a| a.name())
                .collect::<Vec<_>>()
                .join(", ")
        };
        match text.trim() {
            "all" => return Ok(Attribute::ALL.to_vec()),
            "default" => return Ok(Attribute::DEFAULT.to_vec()),
            "" => {
                return Err(AttributeListError(
                    "no attributes given: use all, default, or names such as cloud,rain".into(),
                ));
            }
            _ => {}
        }
        let mut out = Vec::new();
        for part in text.split(',') {
            let name = part.trim();
            let Some(a) = Attribute::from_name(name) else {
                return Err(AttributeListError(if name.is_empty() {
                    format!("'{text}' has an empty attribute name")
                } else {
                    format!(
                        "unknown attribute '{name}' in '{text}' (known: {}; or all, default)",
                        known()
                    )
                }));
            };
            if out.contains(&a) {
                return Err(AttributeListError(format!(
                    "attribute '{name}' is listed twice in '{text}'"
                )));
            }
            out.push(a);
        }
        Ok(out)
    }
}

impl fmt::Display for Attribute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The knobs of the generator. The physical storm does not depend on `resolution`: it only
/// sets how finely the fixed 32 km × 32 km × 16 km domain is sampled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StormParams {
    /// Voxels along each horizontal axis (rounded up to a multiple of 8); the vertical axis
    /// gets half as many (the domain is half as tall as it is wide).
    pub resolution: u32,
    /// Number of frames.
    pub frames: u32,
    /// Storm time covered by the sequence, seconds; frame `f` is at
    /// `time_span_s * f / (frames - 1)`. The storm moves at about 12.5 m/s, so spans beyond
    /// about 15 minutes carry it off the domain.
    pub time_span_s: f32,
    /// Fraction of the sequence at which the tornado touches down (0.1..0.9).
    pub touchdown_fraction: f32,
    /// Seed for the noise and the storm's small placement jitter.
    pub seed: u64,
    /// The attributes to generate, in output order.
    pub attributes: Vec<Attribute>,
}

impl Default for StormParams {
    fn default() -> Self {
        default_params()
    }
}

/// The small built-in dataset: 48 frames over four minutes of storm time at 384 voxels
/// across (83 m voxels), the six [`Attribute::DEFAULT`] attributes (the funnel's on a nested
/// grid of 21 m voxels).
///
/// A frame has about 24,000 active leaves over all attributes: about 30 MB per frame as
/// Fp16 (1,120 B per leaf), 1.5 GB for the sequence, generated in about 20 CPU-seconds.
/// Fp16 halves the bytes of Float at a precision (about 1/1000 of each leaf's range) no
/// transfer function can tell apart, and keeps the dataset small enough to ship in CI.
pub fn default_params() -> StormParams {
    StormParams {
        resolution: 384,
        frames: 48,
        time_span_s: 240.0,
        touchdown_fraction: 0.35,
        seed: 0x5EED_CE11,
        attributes: Attribute::DEFAULT.to_vec(),
    }
}

/// Index→world mapping shared by every grid of a dataset: `world = origin + voxel_size * ijk`
/// (voxel centres at integer index coordinates); metres, x east, y north, z up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorldTransform {
    /// Edge length of a voxel, metres.
    pub voxel_size_m: f64,
    /// World position of index (0, 0, 0), metres.
    pub origin_m: [f64; 3],
    /// Index extent of the domain: voxels `0..dims` along each axis hold the storm.
    pub dims: [u32; 3],
}

impl StormParams {
    /// Index extent of the domain (multiples of 8).
    pub fn dims(&self) -> [u32; 3] {
        let n = self.resolution.max(8).div_ceil(8) * 8;
        [n, n, (n / 2).div_ceil(8) * 8]
    }

    /// Voxel edge length, metres.
    pub fn voxel_size_m(&self) -> f64 {
        DOMAIN_XY_M as f64 / self.dims()[0] as f64
    }

    /// The storm's domain (`0..dims` voxels) cut into `count` spatial bricks
    /// ([`crate::dataset::bricks::split_domain`] on leaf boundaries), with their world
    /// boxes: for [`GenerateOptions::bricks`].
    pub fn bricks(&self, count: u32) -> Result<Vec<crate::dataset::Brick>, SynthError> {
        let dims = self.dims().map(|d| d as i32);
        let boxes = crate::dataset::bricks::split_domain([[0; 3], dims], count, 8)
            .map_err(SynthError::Usage)?;
        let t = self.transform();
        Ok(crate::dataset::bricks::bricks_of(
            &boxes,
            [t.voxel_size_m; 3],
            t.origin_m,
        ))
    }

    /// The index→world transform of the storm's grid.
    pub fn transform(&self) -> WorldTransform {
        WorldTransform {
            voxel_size_m: self.voxel_size_m(),
            origin_m: [0.0; 3],
            dims: self.dims(),
        }
    }

    /// The index→world transform of `attribute`'s grid: the storm's, or for a nested
    /// attribute ([`Attribute::is_nested`]) one [`NEST_REFINEMENT`] times finer over the same
    /// domain (its leaves cover only a box around the tornado).
    pub fn transform_of(&self, attribute: Attribute) -> WorldTransform {
        let t = self.transform();
        if !attribute.is_nested() {
            return t;
        }
        WorldTransform {
            voxel_size_m: t.voxel_size_m / f64::from(NEST_REFINEMENT),
            origin_m: t.origin_m,
            dims: t.dims.map(|d| d * NEST_REFINEMENT),
        }
    }

    /// Storm time of `frame`, seconds.
    pub fn frame_time(&self, frame: u32) -> f32 {
        if self.frames <= 1 {
            0.0
        } else {
            // f64 so that every frame's time is the same correctly rounded value whatever the
            // frame count arithmetic.
            (self.time_span_s as f64 * frame as f64 / (self.frames - 1) as f64) as f32
        }
    }
}

/// The generator for one [`StormParams`]: owns the baked noise tile.
pub struct Storm {
    params: StormParams,
    noise: NoiseTile,
}

impl Storm {
    /// Prepares the generator (bakes the noise tile, a few tens of milliseconds).
    pub fn new(params: StormParams) -> Storm {
        let noise = NoiseTile::new(params.seed);
        Storm { params, noise }
    }

    /// The parameters.
    pub fn params(&self) -> &StormParams {
        &self.params
    }

    /// The storm model at time `t` seconds.
    pub fn model(&self, t: f32) -> FrameModel<'_> {
        let p = &self.params;
        FrameModel::new(&self.noise, p.seed, t, p.time_span_s, p.touchdown_fraction)
    }

    /// The volumes of `frame`, one per requested attribute, in the order of
    /// [`StormParams::attributes`]. Runs on the current rayon pool.
    pub fn frame_volumes(&self, frame: u32) -> Vec<(Attribute, SparseVolume)> {
        self.volumes_at(self.params.frame_time(frame)).0
    }

    /// The volumes at storm time `t`, with statistics of the brick work.
    pub fn volumes_at(&self, t: f32) -> (Vec<(Attribute, SparseVolume)>, BrickStats) {
        let all = [[0; 3], self.params.dims()];
        self.volumes_region(t, all)
    }

    /// The volumes within the (storm-grid) index box `region`, nested grids included.
    fn volumes_region(
        &self,
        t: f32,
        region: [[u32; 3]; 2],
    ) -> (Vec<(Attribute, SparseVolume)>, BrickStats) {
        let model = self.model(t);
        let (mut vols, mut stats) = bricks::volumes(self, &model, region);
        for (a, v) in vols.iter_mut() {
            if a.is_nested() {
                let (nested, s) = nest::funnel_volume(self, &model, region);
                *v = nested;
                stats.candidates += s.candidates;
                stats.emitted += s.emitted;
            }
        }
        (vols, stats)
    }

    /// Every attribute's leaves at storm time `t` (nested grids included), each encoded for
    /// the grid `builds[i]` describes (attribute `i` of [`StormParams::attributes`]) as its
    /// brick is evaluated: what [`crate::format::build_grid_encoded_into`] turns into the
    /// same grids as the volumes of [`Storm::volumes_at`]. Errors name the attribute's index.
    pub(crate) fn encoded_leaves_at(
        &self,
        t: f32,
        builds: &[crate::format::BuildOptions],
    ) -> Result<(Vec<crate::format::EncodedLeaves>, BrickStats), (usize, crate::format::FormatError)>
    {
        let model = self.model(t);
        let all = [[0; 3], self.params.dims()];
        let nested =
            |i: usize| nest::encoded_funnel(self, &model, all, &builds[i]).map_err(|e| (i, e));
        bricks::encoded(self, &model, all, builds, &nested)
    }

    /// The origins of every attribute's leaves at storm time `t`, in the order of
    /// [`StormParams::attributes`] (the bricks [`Storm::volumes_at`] would emit, without
    /// their values: for exact frame sizes at resolutions whose volumes would not fit in
    /// memory).
    pub fn leaf_origins_at(&self, t: f32) -> Vec<Vec<[i32; 3]>> {
        let model = self.model(t);
        let mut origins = bricks::leaf_origins(self, &model);
        for (o, a) in origins.iter_mut().zip(&self.params.attributes) {
            if a.is_nested() {
                // The nest is small (a few hundred leaves): its values cost little.
                let all = [[0; 3], self.params.dims()];
                let (v, _) = nest::funnel_volume(self, &model, all);
                *o = v.bricks.iter().map(|b| b.origin).collect();
            }
        }
        origins
    }

    /// The volumes at storm time `t` restricted to the index-space box `[lo, hi)` (widened
    /// to whole bricks): identical to the same bricks of the whole domain, for close-ups and
    /// tests of one feature at high resolution.
    pub fn volumes_in(
        &self,
        t: f32,
        lo: [u32; 3],
        hi: [u32; 3],
    ) -> (Vec<(Attribute, SparseVolume)>, BrickStats) {
        self.volumes_region(t, [lo, hi])
    }
}

/// Convenience: the volumes of one frame (bakes the noise tile each call; keep a [`Storm`]
/// to generate many frames).
pub fn frame_volumes(params: &StormParams, frame: u32) -> Vec<(Attribute, SparseVolume)> {
    Storm::new(params.clone()).frame_volumes(frame)
}

/// Height of the domain, metres.
pub const DOMAIN_HEIGHT_M: f32 = DOMAIN_Z_M;
/// Width (and depth) of the domain, metres.
pub const DOMAIN_WIDTH_M: f32 = DOMAIN_XY_M;

pub use generate::{
    EncodedFrame, FrameTimes, GenerateOptions, GridOut, Progress, Report, SynthError,
    attribute_specs, encode_frame, frame_bytes_estimate, frame_peak_memory, generate_dataset,
    generate_dataset_ranks, generate_frames, generate_frames_borrowed, generate_grids,
    writer_memory_ceiling,
};
pub use size::{SizeEstimate, resolution_for_target};
