//! Radar reflectivity of the hydrometeors (Rayleigh scattering from exponential size
//! distributions) and the environment's air density it depends on.

use super::DBZ_FLOOR;

/// Air density of the environment at height z, kg/m³ (scale height 9.4 km).
#[inline]
pub fn air_density(z: f32) -> f32 {
    1.16 * (-z * (1.0 / 9_400.0)).exp()
}

/// The Rayleigh reflectivity coefficient `C` of one hydrometeor species in
/// `Z = C (rho q)^1.75` (Z in mm⁶/m³, rho q in kg/m³), for an exponential size distribution
/// `N(D) = n0 exp(-lambda D)` of spheres of density `density` (kg/m³):
/// `Z = 720 n0 lambda^-7 * 1e18` with `lambda = (pi density n0 / (rho q))^(1/4)`, times
/// `dielectric` (1 for water; for ice spheres `|K_i|²/|K_w|² (density / 917)²` with
/// `|K_i|² = 0.176`, `|K_w|² = 0.93`, after Smith 1984).
pub fn reflectivity_coefficient(n0: f64, density: f64, dielectric: f64) -> f32 {
    let pi = std::f64::consts::PI;
    (720.0e18 * dielectric * n0.powf(-0.75) * (pi * density).powf(-1.75)) as f32
}

/// Dielectric factor of dry ice spheres of `density` relative to water (Smith 1984).
fn dry_ice(density: f64) -> f64 {
    0.176 / 0.93 * (density / 917.0) * (density / 917.0)
}

/// A species' reflectivity coefficients, dry (frozen) and wet (melting, water-coated).
#[derive(Clone, Copy, Debug)]
pub struct ReflectivityCoefficients {
    /// Above the melting level.
    pub dry: f32,
    /// Below the melting level.
    pub wet: f32,
}

/// Rain: Marshall–Palmer intercept 8×10⁶ m⁻⁴, water spheres (the classic 3.63×10⁹).
pub const RAIN_Z: f32 = 3.6308e9;
/// Snow: intercept 3×10⁶ m⁻⁴, density 100 kg/m³, dry.
pub const SNOW_Z: f32 = 9.5889e8;
/// Graupel: intercept 4×10⁶ m⁻⁴, density 400 kg/m³.
pub const GRAUPEL_Z: ReflectivityCoefficients = ReflectivityCoefficients {
    dry: 1.0929e9,
    wet: 3.0351e10,
};
/// Hail: intercept 4×10⁴ m⁻⁴, density 900 kg/m³.
pub const HAIL_Z: ReflectivityCoefficients = ReflectivityCoefficients {
    dry: 4.2328e10,
    wet: 2.3219e11,
};

/// The coefficients above from their size distributions (tests check the constants).
pub fn reflectivity_coefficients_from_distributions() -> [f32; 6] {
    [
        reflectivity_coefficient(8.0e6, 1_000.0, 1.0),
        reflectivity_coefficient(3.0e6, 100.0, dry_ice(100.0)),
        reflectivity_coefficient(4.0e6, 400.0, dry_ice(400.0)),
        reflectivity_coefficient(4.0e6, 400.0, 1.0),
        reflectivity_coefficient(4.0e4, 900.0, dry_ice(900.0)),
        reflectivity_coefficient(4.0e4, 900.0, 1.0),
    ]
}

/// `x^1.75` from square roots (exact to rounding; no `powf` per voxel).
#[inline(always)]
fn pow175(x: f32) -> f32 {
    let s = x.sqrt();
    x * s * s.sqrt()
}

/// Equivalent reflectivity, dBZ, of rain, snow, graupel and hail mixing ratios (g/kg) in
/// air of density `rho` (kg/m³): `10 log10(sum C_x (rho q_x)^1.75)` with the species'
/// coefficients ([`reflectivity_coefficient`]; graupel's and hail's, `z_graupel` and
/// `z_hail`, depend on whether they are melting), at least [`DBZ_FLOOR`].
#[inline]
pub fn reflectivity_dbz(
    rho: f32,
    rain: f32,
    snow: f32,
    graupel: f32,
    hail: f32,
    z_graupel: f32,
    z_hail: f32,
) -> f32 {
    let m = rho * 1e-3;
    let z = RAIN_Z * pow175(m * rain)
        + SNOW_Z * pow175(m * snow)
        + z_graupel * pow175(m * graupel)
        + z_hail * pow175(m * hail);
    if z > 0.0 {
        (10.0 * z.log10()).max(DBZ_FLOOR)
    } else {
        DBZ_FLOOR
    }
}
