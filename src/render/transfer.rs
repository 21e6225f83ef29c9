//! Transfer functions: how an attribute's values become colour and opacity.
//!
//! Each attribute has a colormap (colour stops in linear RGB), an opacity curve (piecewise
//! linear over the normalized value `u = (v − lo) / (hi − lo)`), the value range `[lo, hi]`
//! (by default the manifest's), and how the medium looks: a scattering medium lit by the sun
//! (cloud, rain) or an emissive one (wind speed, vorticity). Both renderers read the same
//! baked 256-entry table, so GPU and CPU agree on every value.

use serde::{Deserialize, Serialize};

/// Entries of a baked transfer-function table (per attribute).
pub const TF_SIZE: usize = 256;

/// Colour (linear RGB) and opacity at normalized value `u` (0..1) of one attribute's baked
/// table (`TF_SIZE` entries: a row of [`View::tf_table`](super::View::tf_table)), linearly
/// interpolated between entries as the shaders sample it. The CPU renderer and the
/// legend both read colours through this one function.
pub fn sample_table(row: &[[f32; 4]], u: f32) -> [f32; 4] {
    let top = row.len().saturating_sub(1);
    if top == 0 {
        return row.first().copied().unwrap_or([0.0; 4]);
    }
    let x = u * top as f32;
    let i = (x as u32).min(top as u32 - 1) as usize;
    let fr = x - i as f32;
    let (l, h) = (row[i], row[i + 1]);
    std::array::from_fn(|c| l[c] * (1.0 - fr) + h[c] * fr)
}

/// How an attribute's medium contributes light.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum MediumKind {
    /// Absorbs and scatters sunlight and sky light; the colormap is its albedo.
    #[default]
    Scatter,
    /// Absorbs and glows; the colormap is its emitted colour.
    Emissive,
}

/// A named colormap or explicit stops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Colormap {
    /// One of [`Colormap::NAMES`].
    Named(String),
    /// `(u, [r, g, b])` stops in sRGB (0..1), ascending in `u`.
    Stops(Vec<(f32, [f32; 3])>),
}

impl Colormap {
    /// The built-in colormap names.
    pub const NAMES: [&'static str; 13] = [
        "cloud",
        "rain",
        "inferno",
        "viridis",
        "coolwarm",
        "ice",
        "grey",
        "magma",
        "cividis",
        "blackbody",
        "smoke",
        "nws_reflectivity",
        "turbo",
    ];

    /// The sRGB stops of this colormap (an unknown name gives grey).
    pub fn stops(&self) -> Vec<(f32, [f32; 3])> {
        let s = |v: &[(f32, [u8; 3])]| {
            v.iter()
                .map(|&(u, c)| (u, c.map(|x| x as f32 / 255.0)))
                .collect::<Vec<_>>()
        };
        match self {
            Colormap::Stops(v) => v.clone(),
            Colormap::Named(n) => match n.as_str() {
                "cloud" => s(&[
                    (0.0, [196, 202, 212]),
                    (0.5, [232, 234, 238]),
                    (1.0, [250, 250, 250]),
                ]),
                "rain" => s(&[
                    (0.0, [70, 130, 230]),
                    (0.5, [40, 95, 210]),
                    (1.0, [25, 60, 180]),
                ]),
                "inferno" => s(&[
                    (0.0, [0, 0, 4]),
                    (0.14, [40, 11, 84]),
                    (0.29, [101, 21, 110]),
                    (0.43, [159, 42, 99]),
                    (0.57, [212, 72, 66]),
                    (0.71, [245, 125, 21]),
                    (0.86, [250, 193, 39]),
                    (1.0, [252, 255, 164]),
                ]),
                "magma" => s(&[
                    (0.0, [0, 0, 4]),
                    (0.25, [81, 18, 124]),
                    (0.5, [183, 55, 121]),
                    (0.75, [252, 137, 97]),
                    (1.0, [252, 253, 191]),
                ]),
                "viridis" => s(&[
                    (0.0, [68, 1, 84]),
                    (0.25, [59, 82, 139]),
                    (0.5, [33, 145, 140]),
                    (0.75, [94, 201, 98]),
                    (1.0, [253, 231, 37]),
                ]),
                "coolwarm" => s(&[
                    (0.0, [59, 76, 192]),
                    (0.5, [221, 221, 221]),
                    (1.0, [180, 4, 38]),
                ]),
                "ice" => s(&[
                    (0.0, [20, 40, 90]),
                    (0.5, [60, 150, 220]),
                    (1.0, [220, 245, 255]),
                ]),
                // Perceptually uniform and readable with colour-vision deficiency
                // (Nuñez, Anderton and Renslow 2018), sampled at five points.
                "cividis" => s(&[
                    (0.0, [0, 34, 78]),
                    (0.25, [65, 77, 107]),
                    (0.5, [124, 123, 120]),
                    (0.75, [188, 175, 111]),
                    (1.0, [254, 232, 56]),
                ]),
                // Black through red, orange and yellow to white: the colours of a
                // heated body as it gets hotter (Moreland's "black body" map), for fire.
                "blackbody" => s(&[
                    (0.0, [0, 0, 0]),
                    (0.39, [178, 34, 34]),
                    (0.58, [227, 105, 5]),
                    (0.84, [238, 210, 20]),
                    (1.0, [255, 255, 255]),
                ]),
                // Smoke and soot: a grey a little darker than cloud's, lit by the sun.
                "smoke" => s(&[(0.0, [150, 150, 155]), (1.0, [215, 215, 220])]),
                "nws_reflectivity" => nws_reflectivity(),
                "turbo" => turbo(),
                _ => s(&[(0.0, [0, 0, 0]), (1.0, [255, 255, 255])]),
            },
        }
    }
}

/// Reflectivity in the colours of the US National Weather Service's radar pictures: one
/// colour per 5 dBZ bin from 5 to 75 dBZ (the map's `u = 0` is 5 dBZ and `u = 1` is 75 dBZ,
/// so the range to give it is `[5, 75]`). Bins are steps, as on a radar display.
fn nws_reflectivity() -> Vec<(f32, [f32; 3])> {
    const BINS: [[u8; 3]; 14] = [
        [4, 233, 231],  // 5 dBZ
        [1, 159, 244],  // 10
        [3, 0, 244],    // 15
        [2, 253, 2],    // 20
        [1, 197, 1],    // 25
        [0, 142, 0],    // 30
        [253, 248, 2],  // 35
        [229, 188, 0],  // 40
        [253, 149, 0],  // 45
        [253, 0, 0],    // 50
        [212, 0, 0],    // 55
        [188, 0, 0],    // 60
        [248, 0, 253],  // 65
        [152, 84, 198], // 70 up to 75
    ];
    let rgb = |c: [u8; 3]| c.map(|x| x as f32 / 255.0);
    let mut stops = Vec::with_capacity(2 * BINS.len());
    for (i, &c) in BINS.iter().enumerate() {
        let lo = i as f32 / BINS.len() as f32;
        let hi = (i + 1) as f32 / BINS.len() as f32;
        stops.push((lo, rgb(c)));
        stops.push((hi, rgb(c)));
    }
    stops
}

/// Google's Turbo, an improved rainbow map (Anton Mikhailov, 2019: "Turbo, An Improved
/// Rainbow Colormap for Visualization", Google AI blog, and its 256-entry sRGB table in the
/// gist mikhailov-work/6a308c20e494d9e0ccc29036b28faa7a). Every 8th entry of that table (and
/// the last) as stops at `u = index / 255`; linear interpolation between them is within 2.5
/// of 255 of every entry of the table.
fn turbo() -> Vec<(f32, [f32; 3])> {
    const TABLE: [(u8, [u8; 3]); 33] = [
        (0, [48, 18, 59]),
        (8, [57, 42, 115]),
        (16, [64, 64, 162]),
        (24, [68, 86, 199]),
        (32, [70, 107, 227]),
        (40, [70, 128, 246]),
        (48, [66, 148, 255]),
        (56, [55, 168, 250]),
        (64, [40, 188, 235]),
        (72, [28, 205, 216]),
        (80, [24, 221, 194]),
        (88, [31, 233, 175]),
        (96, [50, 242, 152]),
        (104, [78, 249, 125]),
        (112, [109, 254, 98]),
        (120, [139, 255, 75]),
        (128, [164, 252, 60]),
        (136, [185, 246, 53]),
        (144, [205, 236, 52]),
        (152, [223, 223, 55]),
        (160, [238, 207, 58]),
        (168, [248, 190, 57]),
        (176, [253, 172, 52]),
        (184, [254, 150, 43]),
        (192, [251, 126, 33]),
        (200, [244, 102, 23]),
        (208, [235, 80, 14]),
        (216, [223, 63, 8]),
        (224, [208, 47, 5]),
        (232, [190, 33, 2]),
        (240, [169, 22, 1]),
        (248, [146, 11, 1]),
        (255, [122, 4, 3]),
    ];
    TABLE
        .iter()
        .map(|&(i, c)| (f32::from(i) / 255.0, c.map(|x| f32::from(x) / 255.0)))
        .collect()
}

/// The path tracer's single-scattering albedo of a scattering attribute, where it is not
/// the colormap's colour: one grey, or colour stops over `u`. Linear RGB, 0..1 (unlike the
/// colormap's sRGB stops: an albedo is a ratio of light, not a colour on the screen).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Albedo {
    /// The same albedo in every channel at every value.
    Grey(f32),
    /// `(u, [r, g, b])` stops in linear RGB (0..1), ascending in `u`.
    Stops(Vec<(f32, [f32; 3])>),
}

impl Albedo {
    /// The albedo at normalized value `u` (clamped to 0..1).
    pub fn eval(&self, u: f32) -> [f32; 3] {
        match self {
            Albedo::Grey(a) => [a.clamp(0.0, 1.0); 3],
            Albedo::Stops(stops) => std::array::from_fn(|c| {
                let pts: Vec<(f32, f32)> = stops.iter().map(|s| (s.0, s.1[c])).collect();
                piecewise(&pts, u).clamp(0.0, 1.0)
            }),
        }
    }
}

/// The look of one attribute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TransferFunction {
    /// Value mapped to `u = 0` and `u = 1`.
    pub range: [f32; 2],
    /// Colour over `u`.
    pub colormap: Colormap,
    /// Opacity curve: `(u, opacity)` points, ascending in `u`, opacity 0..1; constant beyond
    /// the first and last point. Opacity 0 is exactly transparent, which is what lets the
    /// renderer skip tiles holding such values.
    pub opacity: Vec<(f32, f32)>,
    /// Scattering or emissive medium.
    #[serde(default)]
    pub kind: MediumKind,
    /// Extinction coefficient at opacity 1, per world unit.
    pub extinction: f32,
    /// Emissive media: radiance per unit extinction (brightness of the glow).
    #[serde(default = "one")]
    pub emission: f32,
    /// Whether the medium shadows (attenuates sunlight towards) other samples.
    #[serde(default = "yes")]
    pub casts_shadow: bool,
    /// Scattering media: the path tracer's single-scattering albedo, where it differs from
    /// the colormap's colour (`None`: the colormap, as the march lights it). The march
    /// fakes multiple scattering and takes the colormap as a colour; the path tracer
    /// scatters for real, and a cloud's albedo (about 0.99) is far above any grey that
    /// reads well as the march's colour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub albedo: Option<Albedo>,
}

fn one() -> f32 {
    1.0
}
fn yes() -> bool {
    true
}

fn srgb_to_linear(c: f32) -> f32 {
    if c <= 0.04045 {
        c / 12.92
    } else {
        ((c + 0.055) / 1.055).powf(2.4)
    }
}

fn piecewise(points: &[(f32, f32)], u: f32) -> f32 {
    match points {
        [] => 0.0,
        [first, ..] if u <= first.0 => first.1,
        [.., last] if u >= last.0 => last.1,
        _ => {
            let i = points
                .iter()
                .position(|p| p.0 > u)
                .unwrap_or(points.len() - 1);
            let (a, b) = (points[i - 1], points[i]);
            let f = if b.0 > a.0 {
                (u - a.0) / (b.0 - a.0)
            } else {
                1.0
            };
            a.1 + (b.1 - a.1) * f
        }
    }
}

impl TransferFunction {
    /// The preset for an attribute name (`cloud`, `rain`, `wind_speed`, `vorticity`,
    /// `vertical_velocity`, `reflectivity` (radar colours: give it the range `[5, 75]`
    /// dBZ), `smoke` (also `density`, `soot`), `flame` (also `fire`: a blackbody map);
    /// anything else gets a grey emissive ramp) over `range`, for a
    /// scene whose largest world extent is `extent` (extinction scales with it so a storm
    /// looks the same at every resolution and unit).
    pub fn preset(name: &str, range: [f32; 2], extent: f32) -> TransferFunction {
        let per = |optical_depth: f32| optical_depth / extent.max(1e-12);
        let named = |n: &str| Colormap::Named(n.into());
        match name {
            // The funnel's nested grid is cloud too (its condensate and debris).
            "cloud" | "funnel_cloud" => TransferFunction {
                range,
                colormap: named("cloud"),
                opacity: vec![(0.01, 0.0), (0.08, 0.25), (0.3, 0.7), (1.0, 1.0)],
                kind: MediumKind::Scatter,
                extinction: per(150.0),
                emission: 1.0,
                casts_shadow: true,
                albedo: None,
            },
            "rain" => TransferFunction {
                range,
                colormap: named("rain"),
                opacity: vec![(0.02, 0.0), (0.15, 0.2), (0.5, 0.55), (1.0, 1.0)],
                kind: MediumKind::Scatter,
                extinction: per(18.0),
                emission: 1.0,
                casts_shadow: true,
                albedo: None,
            },
            "wind_speed" => TransferFunction {
                range,
                colormap: named("inferno"),
                opacity: vec![(0.25, 0.0), (0.4, 0.1), (0.7, 0.6), (1.0, 1.0)],
                kind: MediumKind::Emissive,
                extinction: per(25.0),
                emission: 5.0,
                casts_shadow: false,
                albedo: None,
            },
            "reflectivity" => TransferFunction {
                range,
                colormap: named("nws_reflectivity"),
                opacity: vec![
                    (0.0, 0.0),
                    (0.2, 0.05),
                    (0.43, 0.25),
                    (0.7, 0.6),
                    (1.0, 0.9),
                ],
                kind: MediumKind::Emissive,
                extinction: per(20.0),
                emission: 2.0,
                casts_shadow: false,
                albedo: None,
            },
            "smoke" | "density" | "soot" => TransferFunction {
                range,
                colormap: named("smoke"),
                opacity: vec![(0.01, 0.0), (0.1, 0.2), (0.5, 0.7), (1.0, 1.0)],
                kind: MediumKind::Scatter,
                extinction: per(40.0),
                emission: 1.0,
                casts_shadow: true,
                albedo: None,
            },
            "flame" | "fire" => TransferFunction {
                range,
                colormap: named("blackbody"),
                opacity: vec![(0.02, 0.0), (0.2, 0.3), (1.0, 1.0)],
                kind: MediumKind::Emissive,
                extinction: per(15.0),
                emission: 4.0,
                casts_shadow: false,
                albedo: None,
            },
            "vorticity" => TransferFunction {
                range,
                colormap: named("magma"),
                opacity: vec![(0.02, 0.0), (0.1, 0.2), (0.5, 0.7), (1.0, 1.0)],
                kind: MediumKind::Emissive,
                extinction: per(25.0),
                emission: 3.0,
                casts_shadow: false,
                albedo: None,
            },
            "vertical_velocity" => {
                // Transparent around zero, blue downdrafts, red updrafts.
                let zero = if range[1] > range[0] {
                    (-range[0] / (range[1] - range[0])).clamp(0.0, 1.0)
                } else {
                    0.5
                };
                TransferFunction {
                    range,
                    colormap: Colormap::Stops(vec![
                        (0.0, [0.1, 0.3, 1.0]),
                        (zero, [0.8, 0.8, 0.8]),
                        (1.0, [1.0, 0.25, 0.1]),
                    ]),
                    opacity: vec![
                        (0.0, 0.8),
                        ((zero - 0.12).max(0.0), 0.0),
                        ((zero + 0.12).min(1.0), 0.0),
                        (1.0, 0.8),
                    ],
                    kind: MediumKind::Emissive,
                    extinction: per(20.0),
                    emission: 2.0,
                    casts_shadow: false,
                    albedo: None,
                }
            }
            _ => TransferFunction {
                range,
                colormap: named("grey"),
                opacity: vec![(0.05, 0.0), (1.0, 1.0)],
                kind: MediumKind::Emissive,
                extinction: per(20.0),
                emission: 1.0,
                casts_shadow: false,
                albedo: None,
            },
        }
    }

    /// Colour (linear RGB) and opacity at normalized value `u`.
    pub fn eval(&self, u: f32) -> [f32; 4] {
        let stops = self.colormap.stops();
        let mut rgb = [0.0; 3];
        for (c, out) in rgb.iter_mut().enumerate() {
            let pts: Vec<(f32, f32)> = stops.iter().map(|s| (s.0, s.1[c])).collect();
            *out = srgb_to_linear(piecewise(&pts, u).clamp(0.0, 1.0));
        }
        let a = piecewise(&self.opacity, u).clamp(0.0, 1.0);
        [rgb[0], rgb[1], rgb[2], a]
    }

    /// The table both renderers interpolate: entry `i` is [`eval`](Self::eval) at
    /// `i / (TF_SIZE − 1)`.
    pub fn bake(&self) -> Vec<[f32; 4]> {
        (0..TF_SIZE)
            .map(|i| self.eval(i as f32 / (TF_SIZE - 1) as f32))
            .collect()
    }

    /// The table the path tracer reads: [`bake`](Self::bake) with the colour replaced by
    /// the [`albedo`](Self::albedo) where a scattering medium has one (the opacity, and so
    /// the extinction, is the same).
    pub fn bake_path(&self) -> Vec<[f32; 4]> {
        let mut t = self.bake();
        if let (Some(albedo), MediumKind::Scatter) = (&self.albedo, self.kind) {
            for (i, e) in t.iter_mut().enumerate() {
                let a = albedo.eval(i as f32 / (TF_SIZE - 1) as f32);
                e[..3].copy_from_slice(&a);
            }
        }
        t
    }

    /// `1 / (hi − lo)`, 0 for an empty range.
    pub fn range_inv(&self) -> f32 {
        let w = self.range[1] - self.range[0];
        if w.is_finite() && w > 0.0 {
            1.0 / w
        } else {
            0.0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opacity_is_exactly_zero_below_threshold() {
        let tf = TransferFunction::preset("cloud", [0.0, 4.0], 1000.0);
        let t = tf.bake();
        assert_eq!(t.len(), TF_SIZE);
        assert_eq!(t[0][3], 0.0);
        assert_eq!(t[2][3], 0.0);
        assert!(t[255][3] > 0.99);
        assert!(t.windows(2).all(|w| w[1][3] >= w[0][3]));
    }

    #[test]
    fn the_path_tracers_albedo_replaces_only_the_colour() {
        let mut tf = TransferFunction::preset("cloud", [0.0, 4.0], 1000.0);
        assert_eq!(tf.bake_path(), tf.bake(), "no albedo: the colormap");
        tf.albedo = Some(Albedo::Stops(vec![
            (0.0, [0.5, 0.4, 0.3]),
            (1.0, [0.99, 0.99, 0.99]),
        ]));
        let (march, path) = (tf.bake(), tf.bake_path());
        for (m, p) in march.iter().zip(&path) {
            assert_eq!(m[3], p[3], "the opacity is the march's");
        }
        assert_eq!(path[0][..3], [0.5, 0.4, 0.3]);
        assert_eq!(path[TF_SIZE - 1][..3], [0.99; 3]);
        assert!((path[TF_SIZE / 2][0] - 0.745).abs() < 0.01);
        tf.albedo = Some(Albedo::Grey(0.98));
        assert!(tf.bake_path().iter().all(|e| e[..3] == [0.98; 3]));
        // An emissive medium's colour is its glow, not an albedo.
        tf.kind = MediumKind::Emissive;
        assert_eq!(tf.bake_path(), tf.bake());
    }

    #[test]
    fn vertical_velocity_is_clear_at_zero() {
        let tf = TransferFunction::preset("vertical_velocity", [-40.0, 70.0], 1.0);
        let u0 = 40.0 / 110.0;
        assert_eq!(tf.eval(u0)[3], 0.0);
        assert!(tf.eval(0.0)[3] > 0.5 && tf.eval(1.0)[3] > 0.5);
        assert!(tf.eval(1.0)[0] > tf.eval(1.0)[2]);
    }

    #[test]
    fn reflectivity_is_in_the_nws_bins_and_fire_is_blackbody() {
        let tf = TransferFunction::preset("reflectivity", [5.0, 75.0], 1.0);
        let at = |dbz: f32| tf.eval((dbz - 5.0) / 70.0);
        let lin = |c: [u8; 3]| c.map(|x| srgb_to_linear(x as f32 / 255.0));
        // Each 5 dBZ bin has one colour: 52 dBZ is the 50–55 bin's red, 37 the 35–40 yellow.
        assert_eq!(at(52.0)[..3], lin([253, 0, 0]));
        assert_eq!(at(37.0)[..3], lin([253, 248, 2]));
        assert_eq!(at(22.0)[..3], lin([2, 253, 2]));
        assert_eq!(at(4.0)[3], 0.0, "below 5 dBZ is clear");
        let fire = TransferFunction::preset("flame", [0.0, 1.0], 1.0);
        let (cool, hot) = (fire.eval(0.3), fire.eval(1.0));
        assert!(cool[0] > 3.0 * cool[2], "a cool flame is red: {cool:?}");
        assert!(
            hot[..3].iter().all(|&c| c > 0.95),
            "the hottest is white: {hot:?}"
        );
        assert_eq!(fire.kind, MediumKind::Emissive);
    }

    #[test]
    fn colormaps_are_linear_rgb() {
        let tf = TransferFunction::preset("wind_speed", [0.0, 130.0], 1.0);
        let c = tf.eval(1.0);
        assert!((c[0] - srgb_to_linear(252.0 / 255.0)).abs() < 1e-6);
        assert!(c[2] < 0.4);
        for n in Colormap::NAMES {
            assert!(Colormap::Named(n.into()).stops().len() >= 2);
        }
    }
    #[test]
    fn turbo_matches_the_published_table() {
        // Entries of Turbo's published 256-entry sRGB table (Mikhailov 2019, the gist
        // mikhailov-work/6a308c20e494d9e0ccc29036b28faa7a; the same bytes are in OpenROAD's
        // heat maps), most of them between the stops kept here.
        let published: [(usize, [u8; 3]); 8] = [
            (0, [48, 18, 59]),
            (4, [53, 30, 88]),
            (100, [63, 246, 138]),
            (127, [161, 253, 61]),
            (128, [164, 252, 60]),
            (200, [244, 102, 23]),
            (250, [139, 9, 2]),
            (255, [122, 4, 3]),
        ];
        let map = Colormap::Named("turbo".into());
        assert!(Colormap::NAMES.contains(&"turbo"));
        let stops = map.stops();
        for (i, want) in published {
            let u = i as f32 / 255.0;
            let got: [f32; 3] = std::array::from_fn(|c| {
                let pts: Vec<(f32, f32)> = stops.iter().map(|s| (s.0, s.1[c])).collect();
                piecewise(&pts, u) * 255.0
            });
            for c in 0..3 {
                assert!(
                    (got[c] - f32::from(want[c])).abs() <= 2.5,
                    "turbo entry {i}: {got:?}, published {want:?}"
                );
            }
        }
        // The gist's float table: entry 0 is (0.18995, 0.07176, 0.23217) and entry 255
        // (0.47960, 0.01583, 0.01055); the byte table rounds them.
        let first = stops[0].1;
        let last = stops[stops.len() - 1].1;
        for (got, want) in [
            (first, [0.18995, 0.07176, 0.23217]),
            (last, [0.4796, 0.01583, 0.01055]),
        ] {
            for c in 0..3 {
                assert!(
                    (got[c] - want[c]).abs() < 0.5 / 255.0 + 1e-6,
                    "{got:?} vs {want:?}"
                );
            }
        }
    }
}
