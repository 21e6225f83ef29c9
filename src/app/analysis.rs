//! Slices, probes and line plots in world units, on the frame on screen: what a scientist
//! asks of a volume ("which value is where"), read from the resident frame on the GPU
//! ([`Player::sample_world`]) as the march reads it. No drawing here: the overlay
//! (`overlay::analysis`) shows what these compute, and scripts drive them headlessly.
//!
//! Positions are world metres; the panels show them in kilometres as the dataset places
//! them (a CM1 or WRF import keeps the model's heights: z is the height above the ground,
//! so a slice "at 1 km" is at world z = 1000 m, not 1 km above the lowest level).

use glam::Vec3;
use serde::Serialize;

use super::core::{PlayError, Player};
use crate::render::{Projection, TransferFunction, View};

/// Accumulated opacity at which a probe without a slice plane stops along its ray.
pub const PROBE_OPACITY: f32 = 0.5;

/// Samples a probe takes along its ray (without a slice plane), at most.
const PROBE_RAY_SAMPLES: usize = 1024;

/// Longest side of a slice's 2-D image, pixels.
pub const SLICE_MAX_PIXELS: usize = 384;

/// Points of a line plot.
pub const LINE_SAMPLES: usize = 256;

/// An axis of the world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Axis {
    /// x (east).
    X,
    /// y (north).
    Y,
    /// z (up).
    Z,
}

impl Axis {
    /// 0, 1 or 2.
    pub fn index(self) -> usize {
        self as usize
    }

    /// "x", "y" or "z".
    pub fn name(self) -> &'static str {
        ["x", "y", "z"][self.index()]
    }

    /// `x`, `y` or `z` (either case).
    pub fn parse(s: &str) -> Option<Axis> {
        match s.to_ascii_lowercase().as_str() {
            "x" => Some(Axis::X),
            "y" => Some(Axis::Y),
            "z" => Some(Axis::Z),
            _ => None,
        }
    }

    /// The two axes of a slice across this one, as its image shows them (horizontal,
    /// vertical): a z slice is a map (x right, y up), like a radar's PPI; an x or y slice a
    /// vertical section with z up, like an RHI.
    pub fn plane_axes(self) -> (Axis, Axis) {
        match self {
            Axis::X => (Axis::Y, Axis::Z),
            Axis::Y => (Axis::X, Axis::Z),
            Axis::Z => (Axis::X, Axis::Y),
        }
    }
}

/// An axis-aligned slice plane: world coordinate `axis` = `at` metres, showing dataset
/// attribute `attribute` (manifest order).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Slice {
    /// The axis the plane is across.
    pub axis: Axis,
    /// Where, world metres.
    pub at: f64,
    /// The attribute shown on it.
    pub attribute: usize,
}

/// One attribute's reading at a point.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttributeReading {
    /// The attribute's name.
    pub name: String,
    /// Its units (the manifest's), where known.
    pub units: Option<String>,
    /// The value there (`None`: no grid of it in this frame).
    pub value: Option<f64>,
    /// The voxel (index coordinates) whose centre is nearest.
    pub voxel: Option<[i32; 3]>,
}

/// What a probe found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ProbeReading {
    /// The render-image point probed: pixels from the top-left corner.
    pub pixel: [f32; 2],
    /// The ray through it: origin and unit direction (world).
    pub ray: [[f32; 3]; 2],
    /// How the point was found: `"slice"` (where the ray meets the slice plane) or
    /// `"opacity"` (where the shown volume's accumulated opacity passes
    /// [`PROBE_OPACITY`]).
    pub found_by: &'static str,
    /// The point, world metres.
    pub world: [f64; 3],
    /// The point in km, as the world places it.
    pub km: [f64; 3],
    /// Every dataset attribute there, manifest order.
    pub values: Vec<AttributeReading>,
}

/// A slice's 2-D image: values on a pixel lattice over the domain's extent in the plane.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SliceImage {
    /// The slice.
    pub slice: Slice,
    /// Pixels across and down.
    pub width: usize,
    /// Pixels down.
    pub height: usize,
    /// The image's horizontal and vertical world axes.
    pub axes: (Axis, Axis),
    /// World ranges (metres) the image spans along them: pixel (i, j)'s centre lies at
    /// `u = u0 + (i + ½)·(u1 − u0)/width`, `v = v1 − (j + ½)·(v1 − v0)/height` (row 0 at the
    /// top).
    pub ranges: [[f64; 2]; 2],
    /// Row-major values, `NaN` where the frame has no grid of the attribute.
    #[serde(skip)]
    pub values: Vec<f32>,
}

impl SliceImage {
    /// The world position of pixel (`i`, `j`)'s centre; fractional pixels lie between
    /// centres (pixel (0, 0)'s top-left corner is (−½, −½)).
    pub fn world_at(&self, i: f64, j: f64) -> [f64; 3] {
        let (u, v) = self.axes;
        let [ur, vr] = self.ranges;
        let mut p = [0.0; 3];
        p[self.slice.axis.index()] = self.slice.at;
        p[u.index()] = ur[0] + (i + 0.5) * (ur[1] - ur[0]) / self.width as f64;
        p[v.index()] = vr[1] - (j + 0.5) * (vr[1] - vr[0]) / self.height as f64;
        p
    }
}

/// A line plot: an attribute's values along a segment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinePlot {
    /// The segment's ends, world metres.
    pub from: [f64; 3],
    /// Its other end.
    pub to: [f64; 3],
    /// The attribute (manifest order).
    pub attribute: usize,
    /// Distance from `from` (km) and the value there (`None`: no grid).
    pub points: Vec<(f64, Option<f64>)>,
}

/// The domain box as `f64`.
fn domain(player: &Player) -> [[f64; 3]; 2] {
    player.view().world_bbox.map(|c| c.map(f64::from))
}

/// `world` in km, as the world places it.
pub fn km_of(world: [f64; 3]) -> [f64; 3] {
    world.map(|m| m / 1e3)
}

/// The ray through render-image point `pixel` (pixels from the top-left corner) of the view
/// on screen, as the march casts it.
pub fn pixel_ray(player: &Player, pixel: [f32; 2]) -> (Vec3, Vec3) {
    ray_in(player.view(), player.size(), pixel)
}

/// The ray through `pixel` of `view` rendered at `size`.
fn ray_in(view: &View, size: (u32, u32), pixel: [f32; 2]) -> (Vec3, Vec3) {
    view.gpu_params(size.0, size.1)
        .pixel_ray(pixel[0], pixel[1])
}

/// Where world point `p` appears in the render image (pixels from the top-left corner):
/// the inverse of [`pixel_ray`]; `None` behind the eye.
pub fn project(player: &Player, p: [f64; 3]) -> Option<[f32; 2]> {
    project_in(player.view(), player.size(), p)
}

/// [`project`] into `view` rendered at `size`.
fn project_in(view: &View, size: (u32, u32), p: [f64; 3]) -> Option<[f32; 2]> {
    let (w, h) = size;
    let g = view.gpu_params(w, h);
    let v3 = |a: [f32; 4]| Vec3::new(a[0], a[1], a[2]);
    let d = Vec3::new(p[0] as f32, p[1] as f32, p[2] as f32) - v3(g.cam_pos);
    let (mut sx, mut sy) = (d.dot(v3(g.cam_right)), d.dot(v3(g.cam_up)));
    if view.camera.projection == Projection::Perspective {
        let z = d.dot(v3(g.cam_fwd));
        if z <= 1e-6 * d.length().max(1.0) {
            return None;
        }
        sx /= z;
        sy /= z;
    }
    let half = g.cam_fwd[3];
    let ndc = [sx / (half * g.cam_right[3]), sy / half];
    Some([
        (ndc[0] + 1.0) * 0.5 * w as f32,
        (1.0 - ndc[1]) * 0.5 * h as f32,
    ])
}

/// Where the ray `o + t·d` (t ≥ 0) meets `slice`'s plane inside the domain (its other two
/// coordinates within the box), if it does.
pub fn plane_hit(o: Vec3, d: Vec3, slice: &Slice, bbox: [[f64; 3]; 2]) -> Option<[f64; 3]> {
    let a = slice.axis.index();
    let (o, d) = (o.to_array().map(f64::from), d.to_array().map(f64::from));
    if d[a].abs() < 1e-12 {
        return None;
    }
    let t = (slice.at - o[a]) / d[a];
    if t < 0.0 {
        return None;
    }
    let mut p: [f64; 3] = std::array::from_fn(|i| o[i] + t * d[i]);
    p[a] = slice.at;
    let inside = (0..3).all(|i| i == a || (bbox[0][i]..=bbox[1][i]).contains(&p[i]));
    inside.then_some(p)
}

/// The entry and exit of the ray `o + t·d` through the box (`t` ≥ 0), if it meets it.
fn ray_box(o: [f64; 3], d: [f64; 3], bbox: [[f64; 3]; 2]) -> Option<(f64, f64)> {
    let (mut t0, mut t1) = (0.0f64, f64::INFINITY);
    for i in 0..3 {
        if d[i].abs() < 1e-300 {
            if o[i] < bbox[0][i] || o[i] > bbox[1][i] {
                return None;
            }
            continue;
        }
        let (a, b) = ((bbox[0][i] - o[i]) / d[i], (bbox[1][i] - o[i]) / d[i]);
        t0 = t0.max(a.min(b));
        t1 = t1.min(a.max(b));
    }
    (t0 < t1).then_some((t0, t1))
}

/// Where the shown volume's accumulated opacity along the ray first passes
/// [`PROBE_OPACITY`]: the ray is sampled through the domain at the view's voxel unit (at
/// most [`PROBE_RAY_SAMPLES`] samples), each shown attribute absorbing as its look says
/// (extinction × opacity per world unit).
fn opacity_hit(player: &mut Player, o: Vec3, d: Vec3) -> Result<Option<[f64; 3]>, PlayError> {
    let looks = player.shown_looks();
    let (o, d) = (o.to_array().map(f64::from), d.to_array().map(f64::from));
    let Some((t0, t1)) = ray_box(o, d, domain(player)) else {
        return Ok(None);
    };
    if looks.is_empty() {
        return Ok(None);
    }
    let voxel = f64::from(player.view().voxel_size).max(1e-9);
    let n = (((t1 - t0) / voxel).ceil() as usize).clamp(2, PROBE_RAY_SAMPLES);
    let dt = (t1 - t0) / n as f64;
    let points: Vec<[f64; 3]> = (0..n)
        .map(|k| {
            let t = t0 + (k as f64 + 0.5) * dt;
            std::array::from_fn(|i| o[i] + t * d[i])
        })
        .collect();
    let attrs: Vec<usize> = looks.iter().map(|(a, _)| *a).collect();
    let read = player.sample_world(&attrs, &points)?;
    let mut tau = 0.0f64;
    let stop = -f64::from(1.0 - PROBE_OPACITY).ln();
    for (p, per_attr) in points.iter().zip(&read) {
        for ((_, tf), s) in looks.iter().zip(per_attr) {
            if let Some(s) = s {
                tau += f64::from(extinction(tf, s.value)) * dt;
            }
        }
        if tau >= stop {
            return Ok(Some(*p));
        }
    }
    Ok(None)
}

/// Extinction per world unit of `value` under `tf` (the march's: extinction × opacity).
fn extinction(tf: &TransferFunction, value: f32) -> f32 {
    if !value.is_finite() {
        return 0.0;
    }
    let u = ((value - tf.range[0]) * tf.range_inv()).clamp(0.0, 1.0);
    tf.extinction * tf.eval(u)[3]
}

/// Every dataset attribute's reading at world point `p`.
pub fn read_all(player: &mut Player, p: [f64; 3]) -> Result<Vec<AttributeReading>, PlayError> {
    let names = player.attribute_units();
    let all: Vec<usize> = (0..names.len()).collect();
    let read = player.sample_world(&all, &[p])?;
    Ok(names
        .into_iter()
        .zip(&read[0])
        .map(|((name, units), s)| AttributeReading {
            name,
            units,
            value: s.map(|s| f64::from(s.value)),
            voxel: s.map(|s| s.voxel()),
        })
        .collect())
}

/// The probe at render-image point `pixel`: where its ray meets `slice`'s plane, or without
/// one where the shown volume turns opaque; `None` where it meets neither.
pub fn probe(
    player: &mut Player,
    slice: Option<&Slice>,
    pixel: [f32; 2],
) -> Result<Option<ProbeReading>, PlayError> {
    let (o, d) = pixel_ray(player, pixel);
    let (hit, found_by) = match slice {
        Some(s) => (plane_hit(o, d, s, domain(player)), "slice"),
        None => (opacity_hit(player, o, d)?, "opacity"),
    };
    let Some(world) = hit else { return Ok(None) };
    Ok(Some(ProbeReading {
        pixel,
        ray: [o.to_array(), d.to_array()],
        found_by,
        world,
        km: km_of(world),
        values: read_all(player, world)?,
    }))
}

/// The 2-D image of `slice` over the domain, at most [`SLICE_MAX_PIXELS`] on its longer side
/// and about one pixel per voxel unit.
pub fn slice_image(player: &mut Player, slice: &Slice) -> Result<SliceImage, PlayError> {
    let bbox = domain(player);
    let axes = slice.axis.plane_axes();
    let ranges = [axes.0, axes.1].map(|a| [bbox[0][a.index()], bbox[1][a.index()]]);
    let extent = ranges.map(|r| (r[1] - r[0]).max(0.0));
    let voxel = f64::from(player.view().voxel_size).max(1e-9);
    let longest = extent[0].max(extent[1]).max(1e-9);
    let scale = (longest / voxel).ceil().clamp(1.0, SLICE_MAX_PIXELS as f64) / longest;
    let size = extent.map(|e| ((e * scale).round() as usize).max(1));
    let mut image = SliceImage {
        slice: *slice,
        width: size[0],
        height: size[1],
        axes,
        ranges,
        values: Vec::new(),
    };
    let points: Vec<[f64; 3]> = (0..size[1])
        .flat_map(|j| (0..size[0]).map(move |i| (i, j)))
        .map(|(i, j)| image.world_at(i as f64, j as f64))
        .collect();
    let read = player.sample_world(&[slice.attribute], &points)?;
    image.values = read
        .iter()
        .map(|r| r[0].map_or(f32::NAN, |s| s.value))
        .collect();
    Ok(image)
}

/// Attribute `attribute`'s values along the segment `from` → `to` (world metres), at
/// [`LINE_SAMPLES`] evenly spaced points.
pub fn line_plot(
    player: &mut Player,
    from: [f64; 3],
    to: [f64; 3],
    attribute: usize,
) -> Result<LinePlot, PlayError> {
    let points: Vec<[f64; 3]> = (0..LINE_SAMPLES)
        .map(|k| {
            let f = k as f64 / (LINE_SAMPLES - 1) as f64;
            std::array::from_fn(|i| from[i] + f * (to[i] - from[i]))
        })
        .collect();
    let read = player.sample_world(&[attribute], &points)?;
    let length_km = (0..3)
        .map(|i| (to[i] - from[i]).powi(2))
        .sum::<f64>()
        .sqrt()
        / 1e3;
    Ok(LinePlot {
        from,
        to,
        attribute,
        points: read
            .iter()
            .enumerate()
            .map(|(k, r)| {
                let f = k as f64 / (LINE_SAMPLES - 1) as f64;
                (f * length_km, r[0].map(|s| f64::from(s.value)))
            })
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::Camera;

    fn view(projection: Projection) -> View {
        let bbox = [[-5000.0, 2000.0, 0.0], [30000.0, 26000.0, 14000.0]];
        let mut v = View::new(bbox, 500.0, Vec::new(), 4.0 / 3.0);
        v.camera = Camera {
            projection,
            ..Camera::fit(bbox, 4.0 / 3.0)
        };
        v.camera.orbit(23.0, 11.0);
        v
    }

    #[test]
    fn projecting_a_point_of_a_pixels_ray_gives_that_pixel() {
        for projection in [Projection::Perspective, Projection::Orthographic] {
            let v = view(projection);
            for px in [[0.5f32, 0.5], [40.25, 31.0], [63.5, 47.5], [12.0, 40.75]] {
                let (o, d) = ray_in(&v, (64, 48), px);
                for t in [2000.0f32, 30000.0, 60000.0] {
                    let p = (o + t * d).to_array().map(f64::from);
                    let back = project_in(&v, (64, 48), p).expect("in front");
                    for k in 0..2 {
                        assert!(
                            (back[k] - px[k]).abs() < 1e-2,
                            "{projection:?} {px:?} t {t}: {back:?}"
                        );
                    }
                }
            }
        }
        // Behind a perspective eye: nowhere in the image.
        let v = view(Projection::Perspective);
        let (o, d) = ray_in(&v, (64, 48), [32.0, 24.0]);
        let behind = (o - 100.0 * d).to_array().map(f64::from);
        assert_eq!(project_in(&v, (64, 48), behind), None);
    }

    #[test]
    fn a_ray_meets_a_slice_plane_inside_the_domain_only() {
        let bbox = [[0.0, 0.0, 0.0], [10.0, 10.0, 5.0]];
        let s = Slice {
            axis: Axis::Z,
            at: 2.0,
            attribute: 0,
        };
        let down = Vec3::new(0.0, 0.0, -1.0);
        assert_eq!(
            plane_hit(Vec3::new(3.0, 4.0, 9.0), down, &s, bbox),
            Some([3.0, 4.0, 2.0])
        );
        // Behind the origin, parallel to the plane, and outside the domain: no hit.
        assert_eq!(plane_hit(Vec3::new(3.0, 4.0, 1.0), down, &s, bbox), None);
        assert_eq!(plane_hit(Vec3::new(3.0, 4.0, 9.0), Vec3::X, &s, bbox), None);
        assert_eq!(plane_hit(Vec3::new(11.0, 4.0, 9.0), down, &s, bbox), None);
        // An x slice, met at a slant.
        let x = Slice { axis: Axis::X, ..s };
        let d = Vec3::new(1.0, 1.0, 0.0).normalize();
        let p = plane_hit(Vec3::new(0.0, 1.0, 1.0), d, &x, bbox).unwrap();
        assert_eq!(p[0], 2.0);
        assert!(
            (p[1] - 3.0).abs() < 1e-6 && (p[2] - 1.0).abs() < 1e-12,
            "{p:?}"
        );
    }

    #[test]
    fn a_slice_image_spans_the_domain_with_pixel_centres_inside() {
        let img = SliceImage {
            slice: Slice {
                axis: Axis::Y,
                at: 7.0,
                attribute: 0,
            },
            width: 4,
            height: 2,
            axes: Axis::Y.plane_axes(),
            ranges: [[0.0, 8.0], [100.0, 104.0]],
            values: Vec::new(),
        };
        assert_eq!(img.axes, (Axis::X, Axis::Z));
        // Pixel (0, 0) is the top-left: x low, z high.
        assert_eq!(img.world_at(0.0, 0.0), [1.0, 7.0, 103.0]);
        assert_eq!(img.world_at(3.0, 1.0), [7.0, 7.0, 101.0]);
        // Its corners, half a pixel out.
        assert_eq!(img.world_at(-0.5, -0.5), [0.0, 7.0, 104.0]);
        assert_eq!(Axis::parse("Z"), Some(Axis::Z));
        assert_eq!(Axis::parse("w"), None);
    }
}
