//! The procedural storm: time-dependent feature geometry and per-brick field evaluation.
//!
//! World space is metres, x east, y north, z up, with the domain's south-west ground corner at
//! the origin. The storm moves east-north-east; upper-level winds blow its anvil east (+x).
//! Every feature is an analytic shape (tilted cylinder, ellipsoid, spiral band, vortex)
//! roughened by [`NoiseTile`] samples taken in a frame that moves with the feature (rising
//! in the updraft, spinning around the funnel), so texture evolves continuously with time.
//!
//! Each feature also has a conservative bound ([`Bound`]); a brick evaluates only the
//! features whose bounds it touches, and one that touches none is skipped without looking
//! at its voxels. That is what makes empty air free and keeps per-voxel work small.

use super::noise::{NoiseTile, unit};

mod bound;
pub use bound::{Bound, Shape, features_in};
mod reflectivity;
pub use reflectivity::{
    GRAUPEL_Z, HAIL_Z, RAIN_Z, ReflectivityCoefficients, SNOW_Z, air_density,
    reflectivity_coefficient, reflectivity_coefficients_from_distributions, reflectivity_dbz,
};

/// Horizontal extent of the domain (both x and y), metres.
pub const DOMAIN_XY_M: f32 = 32_000.0;
/// Vertical extent of the domain, metres (half the horizontal extent).
pub const DOMAIN_Z_M: f32 = 16_000.0;

/// Height of the lifting condensation level (flat cloud base), metres.
const CLOUD_BASE: f32 = 1_400.0;
/// Tropopause height: where the updraft spreads into the anvil, metres.
const TROPOPAUSE: f32 = 11_600.0;
/// Horizontal displacement of the updraft axis per metre of height (downshear tilt).
const TOWER_TILT: f32 = 0.15;
/// Peak updraft speed, m/s.
const UPDRAFT_MAX: f32 = 48.0;
/// Height at which the tornado attaches to the wall cloud, metres.
const FUNNEL_TOP: f32 = 850.0;
/// Heights (m) over which the funnel's condensation fades into the cloud above it: well
/// into the wall cloud's base (750 m at its lowest, 1,400 m at its rim), so the funnel
/// meets the cloud wherever the base lies, and ends inside it.
const FUNNEL_FADE: [f32; 2] = [FUNNEL_TOP + 50.0, FUNNEL_TOP + 350.0];
/// Heights (m) over which the funnel's nested grid hands its share to the cloud grid.
pub const FUNNEL_NEST_FADE: [f32; 2] = [FUNNEL_TOP - 100.0, FUNNEL_TOP + 75.0];
/// Top (m) of the funnel's nested grid's box: a nested voxel (21 m) above the hand-over.
pub const FUNNEL_NEST_TOP: f32 = FUNNEL_TOP + 110.0;
/// Outer radius of the tornado's wind field (tapered to zero there), metres.
const TORNADO_WIND_RADIUS: f32 = 1_500.0;
/// Core radius of the mesocyclone, metres.
const MESO_RADIUS: f32 = 2_200.0;
/// Outer radius of the mesocyclone's wind field, metres.
const MESO_OUTER: f32 = 5_000.0;
/// Pressure deficit that condenses the air at the wall cloud's base, Pa (small: the air
/// there is nearly saturated).
const CONDENSATION_DEFICIT_TOP: f32 = 600.0;
/// Pressure deficit that condenses surface air, Pa: lifting it to the condensation level
/// takes a larger pressure drop the further below cloud base it is.
const CONDENSATION_DEFICIT_GROUND: f32 = 3_000.0;
/// Radius of the wall cloud, metres.
const WALL_RADIUS: f32 = 1_700.0;
/// Depth by which the wall cloud hangs below the cloud base at its centre, metres.
const WALL_DROP: f32 = 650.0;
/// Height of the environment's 0 °C level (the melting level), metres.
pub const FREEZING_LEVEL: f32 = 4_200.0;
/// Height above which all condensate is ice (about -38 °C, homogeneous freezing), metres.
pub const ALL_ICE_LEVEL: f32 = 9_500.0;
/// Radius of the hail shaft, metres.
const HAIL_RADIUS: f32 = 1_600.0;
/// Reflectivity written where precipitation is so light that the Rayleigh sum falls below
/// it, dBZ (the bottom of the nominal range).
pub const DBZ_FLOOR: f32 = -10.0;

/// Feature bits: which parts of the model a brick must evaluate.
pub const F_TOWER: u32 = 1 << 0;
/// Overshooting top.
pub const F_DOME: u32 = 1 << 1;
/// Anvil.
pub const F_ANVIL: u32 = 1 << 2;
/// Wall cloud.
pub const F_WALL: u32 = 1 << 3;
/// Condensation funnel and debris cloud.
pub const F_FUNNEL: u32 = 1 << 4;
/// Tornado vortex winds.
pub const F_TORNADO: u32 = 1 << 5;
/// Forward-flank downdraft rain.
pub const F_FFD: u32 = 1 << 6;
/// Rear-flank downdraft rain (the hook).
pub const F_HOOK: u32 = 1 << 7;
/// Mesocyclone winds.
pub const F_MESO: u32 = 1 << 8;

/// Values below this (g/kg) count as no cloud or rain: voxels stay inactive.
pub const MIXING_THRESHOLD: f32 = 0.01;
/// Storm-induced horizontal wind (m/s) above which the wind fields are active without cloud.
const WIND_PERTURBATION_THRESHOLD: f32 = 10.0;
/// Vertical velocity magnitude (m/s) above which the wind fields are active without cloud.
const VERTICAL_THRESHOLD: f32 = 3.0;

/// Anvil half-width at the tower top, metres.
const ANVIL_HALF: f32 = 3_900.0;
/// Anvil widening per metre downwind.
const ANVIL_SPREAD: f32 = 0.55;
/// The anvil reaches at most this many half-widths off its centre line (noise included).
const ANVIL_LAT_MAX: f32 = 1.4;

/// Lowest possible anvil base at or downwind of `ddx` metres past the tower top and at
/// least `lat` half-widths off the centre line (see the anvil in `eval_brick`: the top is
/// at least TROPOPAUSE + 40, thickness and mammatus at most as below, and the noise lowers
/// the base by at most 320 m).
fn anvil_lowest_base(ddx: f32, lat: f32) -> f32 {
    let thick = anvil_thickness(ddx.max(0.0)) * (1.0 - 0.65 * lat * lat).max(0.0);
    let mam = if ddx < 14_000.0 {
        450.0 * 1.3 * (1.0 - ddx.max(0.0) / 14_000.0)
    } else {
        0.0
    };
    TROPOPAUSE + 40.0 - thick - mam - 320.0 - 10.0
}

/// The pressure deficit (Pa) at which air at height z condenses in the tornado.
#[inline]
fn condensation_deficit(z: f32) -> f32 {
    let below = 1.0 - sat(z / FUNNEL_TOP);
    CONDENSATION_DEFICIT_TOP + (CONDENSATION_DEFICIT_GROUND - CONDENSATION_DEFICIT_TOP) * below
}

/// Radius (m) of the condensation funnel of a Rankine vortex of core radius `rc` whose
/// `rho V^2` is `rho_v2` (Pa): where the cyclostrophic pressure deficit, `rho V^2
/// (1 - r^2 / (2 rc^2))` inside the core and `rho V^2 rc^2 / (2 r^2)` outside, reaches
/// `deficit`; 0 where even the axis does not reach it.
#[inline]
pub fn condensation_radius(rho_v2: f32, deficit: f32, rc: f32) -> f32 {
    if deficit >= rho_v2 {
        0.0
    } else if 2.0 * deficit >= rho_v2 {
        rc * (2.0 * (1.0 - deficit / rho_v2)).sqrt()
    } else {
        rc * (rho_v2 / (2.0 * deficit)).sqrt()
    }
}

/// Radius of the updraft tower at height z: widening above cloud base, narrowing a little
/// in mid levels, flaring into the anvil near the tropopause.
#[inline]
fn tower_radius(z: f32) -> f32 {
    2_600.0 + 1_200.0 * smoothstep(CLOUD_BASE, 6_000.0, z) - 500.0 * smoothstep(7_000.0, 9_500.0, z)
        + 1_600.0 * smoothstep(9_000.0, TROPOPAUSE, z)
}

/// Anvil thickness on its centre line, `ddx` metres downwind of the tower top.
#[inline(always)]
fn anvil_thickness(ddx: f32) -> f32 {
    3_200.0 - 2_500.0 * sat(ddx * (1.0 / 20_000.0))
}

/// Field values of one 8³ brick, in NanoVDB leaf order. The fields after `storm` are
/// written only by an extended evaluation (see [`FrameModel::eval_brick`]).
pub struct BrickFields {
    /// Cloud condensate (plus lofted debris), g/kg.
    pub cloud: [f32; 512],
    /// Rain mixing ratio, g/kg.
    pub rain: [f32; 512],
    /// Wind speed, m/s.
    pub wind: [f32; 512],
    /// Vertical velocity, m/s.
    pub w: [f32; 512],
    /// Vertical vorticity, 1/s.
    pub vort: [f32; 512],
    /// Whether the storm is present at the voxel (activity of the wind-derived fields).
    pub storm: [bool; 512],
    /// Cloud water, g/kg.
    pub qc: [f32; 512],
    /// Cloud ice, g/kg.
    pub qi: [f32; 512],
    /// Snow, g/kg.
    pub snow: [f32; 512],
    /// Graupel, g/kg.
    pub graupel: [f32; 512],
    /// Hail, g/kg.
    pub hail: [f32; 512],
    /// Water vapour perturbation, g/kg.
    pub qv: [f32; 512],
    /// Reflectivity, dBZ.
    pub dbz: [f32; 512],
    /// Pressure perturbation, hPa.
    pub prs: [f32; 512],
    /// Potential-temperature perturbation, K.
    pub theta: [f32; 512],
    /// Whether any precipitation is present (activity of the reflectivity).
    pub precip: [bool; 512],
    /// Cloud condensate without the tornado's funnel and debris, g/kg: `cloud` where the
    /// funnel is on its own nested grid.
    pub ambient_cloud: [f32; 512],
    /// What the funnel and its debris add to the rest of the cloud (`cloud` minus
    /// `ambient_cloud`), g/kg: the nested grid's field.
    pub funnel: [f32; 512],
}

impl Default for BrickFields {
    fn default() -> Self {
        Self::new()
    }
}

impl BrickFields {
    /// Zeroed fields.
    pub fn new() -> BrickFields {
        BrickFields {
            cloud: [0.0; 512],
            rain: [0.0; 512],
            wind: [0.0; 512],
            w: [0.0; 512],
            vort: [0.0; 512],
            storm: [false; 512],
            qc: [0.0; 512],
            qi: [0.0; 512],
            snow: [0.0; 512],
            graupel: [0.0; 512],
            hail: [0.0; 512],
            qv: [0.0; 512],
            dbz: [0.0; 512],
            prs: [0.0; 512],
            theta: [0.0; 512],
            precip: [false; 512],
            ambient_cloud: [0.0; 512],
            funnel: [0.0; 512],
        }
    }
}

/// Terms that depend on height only, computed for the eight z levels of a brick.
#[derive(Clone, Copy, Default)]
struct ZTerms {
    z: f32,
    env: [f32; 2],
    // Updraft tower.
    tower_c: [f32; 2],
    tower_inv_r: f32,
    tower_q: f32,
    tower_w: f32,
    // Overshooting top: squared normalised height above the tropopause.
    dome_h2: f32,
    // Tornado.
    axis: [f32; 2],
    funnel_inv_r: f32,
    funnel_q: f32,
    // The nested grid's part of what the funnel adds (the rest stays in the cloud grid).
    funnel_nest: f32,
    core_r: f32,
    tor_v: f32,
    tor_rot: [f32; 2],
    tor_inflow: f32,
    tor_w: f32,
    debris_r: f32,
    debris_q: f32,
    // Mesocyclone.
    meso_c: [f32; 2],
    meso_v: f32,
    // Rain.
    ffd_shift: f32,
    ffd_q: f32,
    hook_top: f32,
    // Extended fields only.
    ext: ExtZTerms,
}

/// Height-only terms of the extended fields (microphysics, thermodynamics, reflectivity).
#[derive(Clone, Copy, Default)]
struct ExtZTerms {
    /// Fraction of cloud condensate that is ice.
    f_ice: f32,
    /// Air density, kg/m³.
    rho: f32,
    /// Potential-temperature excess of the updraft core, K (negative in the overshoot).
    theta_up: f32,
    /// Vapour excess of the updraft core, g/kg.
    qv_up: f32,
    /// Pressure excess above the updraft's top (upper-level divergence), hPa.
    p_top: f32,
    /// Snow, graupel and hail per unit of forward-flank precipitation pattern.
    snow_prof: f32,
    graupel_prof: f32,
    /// Graupel on the updraft's flanks per g/kg of updraft cloud.
    ring_prof: f32,
    /// Hail shaft centre and peak mixing ratio, g/kg.
    hail_c: [f32; 2],
    hail_prof: f32,
    /// Weight of evaporative cooling with height (the cold pool's depth).
    cold_prof: f32,
    /// Reflectivity coefficients of graupel and hail (wet below the melting level).
    z_graupel: f32,
    z_hail: f32,
}

/// Anvil terms of one column.
struct AnvilColumn {
    yy: f32,
    lat: f32,
    thick: f32,
    inv_thick: f32,
    mam: f32,
    q: f32,
}

/// Wall-cloud terms of one column.
struct WallColumn {
    rot: [f32; 2],
    r2: f32,
    r: f32,
}

/// Hook terms of one column.
struct HookColumn {
    band: f32,
    top: f32,
    q: f32,
}

/// Column-invariant terms of the features a brick evaluates.
#[derive(Default)]
struct Column {
    anvil: Option<AnvilColumn>,
    wall: Option<WallColumn>,
    hook: Option<HookColumn>,
}

/// Noise of one column's eight voxels, per feature (zero for features not evaluated).
#[derive(Default)]
struct ColumnNoise {
    tower: [f32; 8],
    tower_fine: [f32; 8],
    anvil: [f32; 8],
    wall: [f32; 8],
    funnel: [f32; 8],
    rain: [f32; 8],
}

/// Smooth Hermite step from 0 at `e0` to 1 at `e1`.
#[inline(always)]
pub fn smoothstep(e0: f32, e1: f32, x: f32) -> f32 {
    // A product with the reciprocal: with constant edges (the usual case) it folds to one
    // multiplication instead of a division per call.
    let t = ((x - e0) * (1.0 / (e1 - e0))).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

#[inline(always)]
fn sat(x: f32) -> f32 {
    x.clamp(0.0, 1.0)
}

/// atan2 in [0, 2π) from a degree-7 odd polynomial (max error about 1e-4 rad): pure
/// arithmetic, no libm call, used only where the hook's spiral needs an angle.
#[inline(always)]
fn angle(y: f32, x: f32) -> f32 {
    use std::f32::consts::{FRAC_PI_2, PI, TAU};
    let (ax, ay) = (x.abs(), y.abs());
    let (mn, mx) = (ax.min(ay), ax.max(ay));
    let a = mn / mx.max(1e-20);
    let s = a * a;
    let mut r = ((-0.046_496_473 * s + 0.159_314_22) * s - 0.327_622_77) * s * a + a;
    if ay > ax {
        r = FRAC_PI_2 - r;
    }
    if x < 0.0 {
        r = PI - r;
    }
    if y < 0.0 {
        r = TAU - r;
    }
    r
}

/// Linear interpolation through a height table (metres, value).
fn table(z: f32, pts: &[(f32, [f32; 2])]) -> [f32; 2] {
    if z <= pts[0].0 {
        return pts[0].1;
    }
    for w in pts.windows(2) {
        let ((z0, a), (z1, b)) = (w[0], w[1]);
        if z <= z1 {
            let t = (z - z0) / (z1 - z0);
            return [a[0] + (b[0] - a[0]) * t, a[1] + (b[1] - a[1]) * t];
        }
    }
    pts[pts.len() - 1].1
}

/// Ground-relative environmental wind (u east, v north) at height z: a veering, strongly
/// sheared hodograph typical of tornadic supercells.
fn environment_wind(z: f32) -> [f32; 2] {
    table(
        z,
        &[
            (0.0, [2.0, 9.0]),
            (1_000.0, [7.0, 13.0]),
            (3_000.0, [13.0, 10.0]),
            (6_000.0, [21.0, 5.0]),
            (10_000.0, [31.0, 2.0]),
            (13_000.0, [33.0, 0.0]),
        ],
    )
}

/// The storm at one instant: every time-dependent parameter, ready for brick evaluation.
pub struct FrameModel<'a> {
    noise: &'a NoiseTile,
    /// Storm time, seconds.
    pub t: f32,
    /// Progress through the sequence, 0..1 (drives the tornado's life cycle).
    pub s: f32,
    /// Low-level mesocyclone centre (storm reference point), metres.
    pub meso: [f32; 2],
    /// Ground contact point of the tornado axis (also where it would touch down), metres.
    pub tornado_ground: [f32; 2],
    /// Height of the funnel's tip: FUNNEL_TOP before it forms, below 0 once touched down.
    pub funnel_tip: f32,
    /// Debris amount 0..1 (grows after touchdown).
    pub debris: f32,
    tornado_top: [f32; 2],
    bow: [f32; 2],
    rope_amp: f32,
    rope_phase: f32,
    funnel_r_bot: f32,
    funnel_r_top: f32,
    tor_vmax: f32,
    tor_spin: f32,
    meso_spin: [f32; 2],
    wobble_phase: f32,
    dome_height: f32,
    anvil_x0: f32,
    seed_off: [f32; 3],
    /// Feature bounds, indexed by feature bit number.
    pub bounds: Vec<Bound>,
}

impl<'a> FrameModel<'a> {
    /// The storm at time `t` (seconds) of a sequence spanning `span` seconds with touchdown at
    /// fraction `touchdown` of the span. `seed` shifts the storm slightly and the noise.
    pub fn new(noise: &'a NoiseTile, seed: u64, t: f32, span: f32, touchdown: f32) -> Self {
        let s = if span > 0.0 { sat(t / span) } else { 0.0 };
        // The seed nudges the storm's start by up to ±600 m so different seeds differ in
        // more than texture, while the anatomy stays in the same place in the domain.
        let jx = (unit(seed, 101) as f32 - 0.5) * 1_200.0;
        let jy = (unit(seed, 102) as f32 - 0.5) * 1_200.0;
        let meso = [9_800.0 + jx + 12.0 * t, 14_500.0 + jy + 3.5 * t];
        let seed_off = [
            unit(seed, 1) as f32 * 64.0,
            unit(seed, 2) as f32 * 64.0,
            unit(seed, 3) as f32 * 64.0,
        ];

        // Tornado life cycle: a funnel lowers from the wall cloud from s = 0.05, touches down
        // at `touchdown`, intensifies, then tilts and ropes out towards the end.
        let td = touchdown.clamp(0.1, 0.9);
        let lower = smoothstep(0.05, td, s);
        // The tip reaches the ground exactly at `touchdown`, then sinks 80 m below it so the
        // funnel meets the ground at nearly its full width rather than at a point.
        let funnel_tip = FUNNEL_TOP * (1.0 - lower) - 80.0 * smoothstep(td, td + 0.03, s);
        let formed = smoothstep(0.0, 0.08, s);
        let rope = smoothstep(0.72, 1.0, s);
        let debris = smoothstep(td, td + 0.06, s) * (1.0 - 0.5 * rope);
        let top_rel = [250.0, -250.0];
        // The ground point drifts rearward and to the left of the storm motion.
        let ground_rel = [350.0 - 900.0 * s, -450.0 - 350.0 * s * s];
        let tornado_top = [meso[0] + top_rel[0], meso[1] + top_rel[1]];
        let tornado_ground = [meso[0] + ground_rel[0], meso[1] + ground_rel[1]];
        let d = [top_rel[0] - ground_rel[0], top_rel[1] - ground_rel[1]];
        let bow = [-d[1] * (0.15 + 0.25 * rope), d[0] * (0.15 + 0.25 * rope)];
        // The vortex spins up while the funnel lowers (its pressure deficit, and so the
        // condensation funnel, reaches further down as it does).
        let tor_vmax = formed * (40.0 + 50.0 * smoothstep(0.05, td + 0.04, s));

        let dome_height = 1_900.0 + 350.0 * (std::f32::consts::TAU * t / 200.0).sin();
        let bounds = Self::make_bounds(
            meso,
            tornado_ground,
            tornado_top,
            bow,
            40.0 + 140.0 * rope,
            dome_height,
        );
        let mut m = FrameModel {
            noise,
            t,
            s,
            meso,
            tornado_ground,
            funnel_tip,
            debris,
            tornado_top,
            bow,
            rope_amp: 15.0 + 140.0 * rope,
            rope_phase: 0.5 * t,
            funnel_r_bot: 110.0 * (1.0 - 0.45 * rope),
            funnel_r_top: 230.0 * (1.0 - 0.3 * rope),
            tor_vmax,
            tor_spin: 0.09 * t,
            meso_spin: [(0.025 * t).cos(), (0.025 * t).sin()],
            wobble_phase: 0.004 * t,
            dome_height,
            anvil_x0: meso[0] + TOWER_TILT * TROPOPAUSE,
            seed_off,
            bounds,
        };
        if formed <= 0.0 {
            m.bounds.retain(|b| b.bit != F_FUNNEL && b.bit != F_TORNADO);
        }
        m
    }

    fn make_bounds(
        meso: [f32; 2],
        ground: [f32; 2],
        top: [f32; 2],
        bow: [f32; 2],
        rope: f32,
        dome_height: f32,
    ) -> Vec<Bound> {
        let [mx, my] = meso;
        // Margins below follow from each feature's formula in `eval_brick`: where noise
        // (|n| <= 1.4) can push an edge out, the bound is widened by the same amount.
        let wob = 260.0;
        let tilt = [TOWER_TILT, 0.0];
        let ax0 = mx + TOWER_TILT * TROPOPAUSE;
        let mut b = vec![
            // Below cloud base only the updraft's core (w > 0) reaches out, to 0.66 R.
            Bound::cylinder(
                F_TOWER,
                [mx, my],
                tilt,
                [2_000.0 + wob; 2],
                [0.0, CLOUD_BASE - 280.0],
            ),
            Bound::cylinder(
                F_TOWER,
                [mx, my],
                tilt,
                [1.45 * tower_radius(6_500.0) + wob; 2],
                [CLOUD_BASE - 300.0, 9_000.0],
            ),
            Bound::cylinder(
                F_TOWER,
                [mx, my],
                tilt,
                [1.45 * tower_radius(TROPOPAUSE) + wob; 2],
                [9_000.0, TROPOPAUSE + 320.0],
            ),
            // The updraft's core (w > 0, out to 0.645 R) continues into the overshooting top.
            Bound::cylinder(
                F_TOWER,
                [mx, my],
                tilt,
                [0.65 * tower_radius(TROPOPAUSE) + wob; 2],
                [TROPOPAUSE, TROPOPAUSE + dome_height],
            ),
            Bound::cylinder(
                F_DOME,
                [ax0, my],
                [0.0, 0.0],
                [1.18 * 2_900.0; 2],
                [TROPOPAUSE - 700.0, TROPOPAUSE - 400.0 + 1.18 * dome_height],
            ),
            Bound {
                bit: F_ANVIL,
                activates: true,
                min: [ax0 - 4_800.0, -1e9, anvil_lowest_base(0.0, 0.0)],
                max: [1e9, 1e9, TROPOPAUSE + 250.0 + 150.0 * 1.4 + 10.0],
                shape: Shape::Fan { x0: ax0, y0: my },
            },
            Bound::cylinder(
                F_WALL,
                [mx - 200.0, my - 150.0],
                [0.0, 0.0],
                [1.42 * WALL_RADIUS; 2],
                [0.0, CLOUD_BASE + 300.0],
            ),
            Bound::cylinder(
                F_FFD,
                [mx + 4_800.0, my + 3_000.0],
                [0.3, 0.0],
                [1.16 * 7_000.0, 1.16 * 3_200.0],
                [0.0, 8_000.0],
            ),
            Bound::cylinder(
                F_HOOK,
                [mx, my],
                [0.0, 0.0],
                [4_000.0 + 1.49 * 1_300.0; 2],
                [0.0, 5_000.0],
            ),
            // The mesocyclone's wind reaches MESO_OUTER, but exceeds the activity threshold
            // only within about 3 km and above 500 m.
            Bound::cylinder(
                F_MESO,
                [mx, my],
                [0.5 * TOWER_TILT, 0.0],
                [MESO_OUTER + wob; 2],
                [0.0, 10_000.0],
            )
            .passive(),
            Bound::cylinder(
                F_MESO,
                [mx, my],
                [0.5 * TOWER_TILT, 0.0],
                [3_000.0 + wob; 2],
                [500.0, 10_000.0],
            ),
        ];
        // Tornado: the box around the axis' sweep (straight line, bow and rope wiggle).
        let reach = bow[0].hypot(bow[1]) + rope;
        let lo = [ground[0].min(top[0]) - reach, ground[1].min(top[1]) - reach];
        let hi = [ground[0].max(top[0]) + reach, ground[1].max(top[1]) + reach];
        // The debris cloud reaches 1.63 times its radius (at most 730 m); the funnel 1.31
        // times its condensation radius (at most about 800 m), up to where it has faded
        // into the cloud (the nested grid stops at FUNNEL_NEST_TOP).
        let m = 1_100.0;
        b.push(Bound::aabb(
            F_FUNNEL,
            [lo[0] - m, lo[1] - m, 0.0],
            [hi[0] + m, hi[1] + m, FUNNEL_FADE[1] + 10.0],
        ));
        let m = TORNADO_WIND_RADIUS;
        b.push(Bound::aabb(
            F_TORNADO,
            [lo[0] - m, lo[1] - m, 0.0],
            [hi[0] + m, hi[1] + m, FUNNEL_TOP + 60.0],
        ));
        b
    }

    /// Feature bits whose bounds touch the world box [lo, hi], and whether any of them can
    /// make a voxel active (if not, the box holds nothing).
    pub fn features_in(&self, lo: [f32; 3], hi: [f32; 3]) -> (u32, bool) {
        features_in(&self.bounds, lo, hi)
    }

    /// Tornado axis position at height z (straight line ground → top, bowed, with a helical
    /// rope wiggle that grows late in life).
    pub fn axis(&self, z: f32) -> [f32; 2] {
        let u = sat(z / FUNNEL_TOP);
        let bow = 4.0 * u * (1.0 - u);
        let ph = std::f32::consts::TAU * 1.5 * u + self.rope_phase;
        let wig = self.rope_amp * u * (1.0 - u) * 4.0;
        [
            self.tornado_ground[0]
                + (self.tornado_top[0] - self.tornado_ground[0]) * u
                + self.bow[0] * bow
                + wig * ph.sin(),
            self.tornado_ground[1]
                + (self.tornado_top[1] - self.tornado_ground[1]) * u
                + self.bow[1] * bow
                + wig * 0.6 * ph.cos(),
        ]
    }

    /// Updraft tower axis at height z.
    fn tower_centre(&self, z: f32) -> [f32; 2] {
        let ph = self.wobble_phase + z / 2_600.0;
        [
            self.meso[0] + TOWER_TILT * z + 250.0 * ph.sin(),
            self.meso[1] + 250.0 * (0.7 * ph + 1.3).cos(),
        ]
    }

    fn zterms(&self, z: f32, mask: u32, extended: bool) -> ZTerms {
        let mut k = ZTerms {
            z,
            env: environment_wind(z),
            ..ZTerms::default()
        };
        if mask & (F_TOWER | F_DOME | F_MESO) != 0 {
            k.tower_c = self.tower_centre(z);
            let r = tower_radius(z);
            k.tower_inv_r = 1.0 / r;
            k.tower_q = (1.1 + 1.4 * smoothstep(CLOUD_BASE, 6_000.0, z)
                - 1.5 * smoothstep(8_000.0, 12_000.0, z))
                * smoothstep(CLOUD_BASE - 150.0, CLOUD_BASE + 250.0, z)
                * (1.0 - smoothstep(TROPOPAUSE - 300.0, TROPOPAUSE + 300.0, z));
            k.tower_w = UPDRAFT_MAX
                * smoothstep(0.0, 5_500.0, z)
                * (1.0 - 0.75 * smoothstep(9_500.0, TROPOPAUSE + 1_500.0, z))
                * (1.0 - smoothstep(TROPOPAUSE, TROPOPAUSE + self.dome_height, z));
            let h = (z - TROPOPAUSE + 400.0).max(0.0) / self.dome_height;
            k.dome_h2 = if z > TROPOPAUSE - 700.0 { h * h } else { 4.0 };
            k.meso_c = [k.tower_c[0] - TOWER_TILT * z * 0.5, k.tower_c[1]];
            k.meso_v = 24.0
                * (0.4 + 0.6 * smoothstep(300.0, 3_000.0, z))
                * (1.0 - smoothstep(6_500.0, 10_000.0, z));
        }
        if mask & (F_FUNNEL | F_TORNADO) != 0 {
            let u = sat(z / FUNNEL_TOP);
            k.axis = self.axis(z);
            // Core radius of the Rankine vortex: narrow at the ground, widening towards
            // the wall cloud.
            let rc = self.funnel_r_bot + (self.funnel_r_top - self.funnel_r_bot) * u * u;
            k.core_r = rc;
            // The circulation reaches about 250 m below the visible funnel tip.
            let below_tip = sat((z - self.funnel_tip + 250.0) / 250.0);
            let gate = below_tip * (1.0 - smoothstep(FUNNEL_TOP - 150.0, FUNNEL_TOP + 50.0, z));
            k.tor_v = self.tor_vmax * (1.0 - 0.3 * u) * gate;
            // The condensation funnel: the isobar where the vortex's pressure deficit (see the
            // cyclostrophic pressure in `eval_brick`) lifts air to its condensation level.
            // Its radius follows from the Rankine profile; the funnel tapers to a point at
            // its tip while it lowers.
            let v = self.tor_vmax * (1.0 - 0.3 * u) * below_tip;
            let r_cond = condensation_radius(air_density(z) * v * v, condensation_deficit(z), rc);
            let tip = sat((z - self.funnel_tip) / 220.0);
            let r_cond = r_cond * tip.sqrt();
            // No funnel below the tip: an infinitesimal radius keeps the edge test negative.
            k.funnel_inv_r = 1.0 / r_cond.max(1e-3);
            // (Not even the axis condenses where the radius is below a metre.)
            // The funnel fades into the wall cloud (FUNNEL_FADE) instead of ending at a cut
            // (which drew a flat top where the cloud's base lies higher).
            k.funnel_q = if z <= FUNNEL_FADE[1] && self.tor_vmax > 0.0 && r_cond >= 1.0 {
                2.2 * (1.0 - smoothstep(FUNNEL_FADE[0], FUNNEL_FADE[1], z))
            } else {
                0.0
            };
            // The nested grid carries the funnel up to FUNNEL_TOP − 100 m and hands it over
            // to the cloud grid by FUNNEL_TOP + 75 m, below its box's top
            // (FUNNEL_NEST_TOP): the sum stays the same, and neither grid ends in a cut.
            k.funnel_nest = 1.0 - smoothstep(FUNNEL_NEST_FADE[0], FUNNEL_NEST_FADE[1], z);
            let a = self.tor_spin + z * 0.003;
            k.tor_rot = [a.cos(), a.sin()];
            k.tor_inflow = 0.6 * (-z / 120.0).exp();
            k.tor_w = 35.0 * gate * smoothstep(0.0, 150.0, z);
            // The debris cloud: a skirt of lofted dirt around the contact point, widening
            // with height.
            k.debris_r = 120.0 + 180.0 * self.debris + 0.6 * z;
            let dh = 120.0 + 280.0 * self.debris;
            k.debris_q = 1.8 * self.debris * sat(1.0 - z / dh);
        }
        if mask & (F_FFD | F_HOOK) != 0 {
            k.ffd_shift = 0.3 * z;
            k.ffd_q = smoothstep(8_000.0, 4_200.0, z) * (0.75 + 0.25 * smoothstep(0.0, 1_000.0, z));
            k.hook_top = z;
        }
        if extended {
            k.ext = self.ext_zterms(z, mask);
        }
        k
    }

    /// The extended fields' height-only terms at height z.
    fn ext_zterms(&self, z: f32, mask: u32) -> ExtZTerms {
        // The updraft's signature fades out where the tower's core (and its bound) ends,
        // as its vertical velocity does.
        let tower_top = 1.0 - smoothstep(TROPOPAUSE, TROPOPAUSE + self.dome_height, z);
        let wet = 1.0 - smoothstep(FREEZING_LEVEL - 300.0, FREEZING_LEVEL + 300.0, z);
        let z_coeff = |c: ReflectivityCoefficients| c.dry + (c.wet - c.dry) * wet;
        let mut e = ExtZTerms {
            f_ice: smoothstep(FREEZING_LEVEL, ALL_ICE_LEVEL, z),
            rho: air_density(z),
            // Latent heating warms the core up to about 8 K; a parcel overshooting the
            // tropopause is far colder than the stratosphere around it.
            theta_up: (8.0
                * smoothstep(CLOUD_BASE, 6_000.0, z)
                * (1.0 - smoothstep(9_500.0, TROPOPAUSE, z))
                - 14.0 * smoothstep(TROPOPAUSE - 200.0, TROPOPAUSE + 1_200.0, z))
                * tower_top,
            // Boundary-layer air lifted into a drier environment; the excess shrinks with
            // the saturation mixing ratio aloft.
            qv_up: 5.0
                * smoothstep(500.0, 3_000.0, z)
                * (-(z - 3_000.0).max(0.0) * (1.0 / 2_500.0)).exp()
                * tower_top,
            p_top: 3.0 * smoothstep(9_000.0, 11_500.0, z) * tower_top,
            snow_prof: 0.45
                * smoothstep(3_800.0, 5_500.0, z)
                * (1.0 - smoothstep(7_000.0, 7_900.0, z)),
            graupel_prof: 0.5
                * smoothstep(FREEZING_LEVEL - 1_200.0, FREEZING_LEVEL + 300.0, z)
                * (1.0 - smoothstep(6_500.0, 7_900.0, z)),
            ring_prof: 0.6
                * smoothstep(4_500.0, 6_500.0, z)
                * (1.0 - smoothstep(9_000.0, 10_500.0, z)),
            hail_c: [0.0; 2],
            // Largest aloft where it grows; partly melted on the way down.
            hail_prof: (3.0 + 4.0 * smoothstep(1_500.0, 5_000.0, z))
                * (1.0 - smoothstep(6_500.0, 7_800.0, z)),
            cold_prof: smoothstep(2_500.0, 300.0, z),
            z_graupel: z_coeff(GRAUPEL_Z),
            z_hail: z_coeff(HAIL_Z),
        };
        if mask & F_FFD != 0 {
            // On the updraft's north-north-east flank, where hailstones grown in the
            // updraft's edge fall out (the "hail cascade" beside the weak echo region).
            let c = self.tower_centre(z);
            let r = tower_radius(z);
            e.hail_c = [c[0] + 0.35 * r, c[1] + 0.85 * r];
        }
        e
    }

    /// Terms that are constant along a vertical column of voxels.
    #[inline(always)]
    fn column(&self, x: f32, y: f32, mask: u32) -> Column {
        let mut c = Column::default();
        if mask & F_ANVIL != 0 {
            let ddx = x - self.anvil_x0;
            let yy = y - self.meso[1];
            // Fan that widens downwind; rounded, short upwind (backsheared) edge.
            let (half, round) = if ddx >= 0.0 {
                (ANVIL_HALF + ANVIL_SPREAD * ddx, 1.0)
            } else {
                let f = sat(1.0 - (ddx * (1.0 / 4_800.0)).powi(2)).sqrt();
                (ANVIL_HALF * f, f)
            };
            let lat = yy.abs() / half.max(1.0);
            if lat < ANVIL_LAT_MAX {
                let thick = anvil_thickness(ddx.max(0.0)) * round * (1.0 - 0.65 * lat * lat);
                // Mammatus: pouches hanging from the base, near the tower.
                let mam = if (0.0..14_000.0).contains(&ddx) {
                    let so = self.seed_off;
                    let nm = self.noise.sample(
                        x * 0.022 + so[0] + 7.0,
                        y * 0.022 + so[1],
                        so[2] + 0.01 * self.t,
                    );
                    450.0 * (nm - 0.1).max(0.0) * (1.0 - ddx / 14_000.0)
                } else {
                    0.0
                };
                c.anvil = Some(AnvilColumn {
                    yy,
                    lat,
                    thick,
                    inv_thick: 1.0 / thick.max(100.0),
                    mam,
                    // Thinner downwind, fading out before the domain's edge.
                    q: (0.7 - 0.3 * smoothstep(0.0, 12_000.0, ddx))
                        * (1.0 - 0.85 * smoothstep(8_000.0, 19_000.0, ddx)),
                });
            }
        }
        if mask & F_WALL != 0 {
            let wx = x - self.meso[0] + 200.0;
            let wy = y - self.meso[1] + 150.0;
            // Texture turns with the mesocyclone.
            let (cm, sm) = (self.meso_spin[0], self.meso_spin[1]);
            let r2 = (wx * wx + wy * wy) * (1.0 / (WALL_RADIUS * WALL_RADIUS));
            c.wall = Some(WallColumn {
                rot: [wx * cm + wy * sm, -wx * sm + wy * cm],
                r2,
                r: r2.sqrt(),
            });
        }
        if mask & F_HOOK != 0 {
            let sx = x - self.meso[0];
            let sy = y - self.meso[1];
            let r = (sx * sx + sy * sy).sqrt();
            let phi = angle(sy, sx);
            // Spiral band from east-north-east (20°) round to the south (270°), narrowing
            // and lowering towards its tip near the tornado.
            let v = (phi - 0.35) * (1.0 / 4.36);
            if (0.0..=1.0).contains(&v) {
                let rh = 4_000.0 - 2_700.0 * v;
                let wh = 1_300.0 - 800.0 * v;
                let ends = smoothstep(0.0, 0.08, v) * smoothstep(1.0, 0.9, v);
                c.hook = Some(HookColumn {
                    band: 1.0 - (r - rh).abs() / wh,
                    top: 5_000.0 - 2_000.0 * v,
                    q: (2.6 - 1.6 * v) * ends,
                });
            }
        }
        c
    }

    /// The noise samples of the features a column evaluates, for its eight voxels at once
    /// ([`NoiseTile::sample8`]): the same values, bit for bit, as sampling voxel by voxel.
    #[inline(always)]
    fn column_noise(
        &self,
        x: f32,
        y: f32,
        mask: u32,
        col: &Column,
        zt: &[ZTerms; 8],
    ) -> ColumnNoise {
        let nz = self.noise;
        let so = self.seed_off;
        let t = self.t;
        let mut out = ColumnNoise::default();
        let mut c = [[0f32; 8]; 3];
        if mask & (F_TOWER | F_DOME) != 0 {
            let mut f = [[0f32; 8]; 3];
            for (k, zk) in zt.iter().enumerate() {
                // Texture rises with the updraft (10 m/s) and drifts with the storm:
                // billows of 1-4 km from the coarse sample, detail from a finer one.
                let (ux, uy, uz) = (x - self.meso[0], y - self.meso[1], zk.z - 10.0 * t);
                c[0][k] = ux * (1.0 / 230.0) + so[0];
                c[1][k] = uy * (1.0 / 230.0) + so[1];
                c[2][k] = uz * (1.0 / 230.0) + so[2];
                f[0][k] = (0.36 * ux + 0.48 * uy - 0.8 * uz) * (1.0 / 70.0) + 5.0;
                f[1][k] = (-0.8 * ux + 0.6 * uy) * (1.0 / 70.0) + 9.0;
                f[2][k] = (0.48 * ux + 0.64 * uy + 0.6 * uz) * (1.0 / 70.0) + 3.0;
            }
            out.tower = nz.sample8(&c[0], &c[1], &c[2]);
            out.tower_fine = nz.sample8(&f[0], &f[1], &f[2]);
        }
        if let Some(ac) = &col.anvil {
            // Anvil ice drifts downwind at about 20 m/s relative to the storm.
            for (k, zk) in zt.iter().enumerate() {
                c[0][k] = (x - self.meso[0] - 20.0 * t) * 0.0035 + so[1] + 11.0;
                c[1][k] = ac.yy * 0.008 + so[2];
                c[2][k] = zk.z * 0.012 + so[0];
            }
            out.anvil = nz.fbm8(&c[0], &c[1], &c[2]);
        }
        if let Some(wc) = &col.wall {
            for (k, zk) in zt.iter().enumerate() {
                c[0][k] = wc.rot[0] * 0.006 + so[2];
                c[1][k] = wc.rot[1] * 0.006 + so[0];
                c[2][k] = zk.z * 0.006 + so[1] + 23.0;
            }
            out.wall = nz.fbm8(&c[0], &c[1], &c[2]);
        }
        if mask & F_FUNNEL != 0 {
            // Texture spins with the vortex.
            for (k, zk) in zt.iter().enumerate() {
                let fx = x - zk.axis[0];
                let fy = y - zk.axis[1];
                let rx = fx * zk.tor_rot[0] + fy * zk.tor_rot[1];
                let ry = -fx * zk.tor_rot[1] + fy * zk.tor_rot[0];
                c[0][k] = rx * 0.02 + so[0];
                c[1][k] = ry * 0.02 + so[1];
                c[2][k] = zk.z * 0.006 + so[2];
            }
            out.funnel = nz.fbm8(&c[0], &c[1], &c[2]);
        }
        if mask & (F_FFD | F_HOOK) != 0 {
            // Shafts: noise stretched vertically (streaks several kilometres long, a few
            // hundred metres across), slanted by the shear, falling at 9 m/s.
            let sx = x - self.meso[0];
            let sy = y - self.meso[1];
            for (k, zk) in zt.iter().enumerate() {
                c[0][k] = (sx - zk.ffd_shift) * 0.008 + so[2] + 31.0;
                c[1][k] = sy * 0.008 + so[0];
                c[2][k] = (zk.z + 9.0 * t) * 0.0009 + so[1];
            }
            out.rain = nz.fbm8(&c[0], &c[1], &c[2]);
        }
        out
    }
}

mod eval;

#[cfg(test)]
mod reference;
#[cfg(test)]
mod tests;
