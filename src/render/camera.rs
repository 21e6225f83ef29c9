//! An orbit camera (z up): perspective or orthographic, orbit, pan, zoom, fit to a box.

use glam::Vec3;
use serde::{Deserialize, Serialize};

use super::range::Limits;

/// How rays leave the camera.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Projection {
    /// Rays from one point through the image plane.
    #[default]
    Perspective,
    /// Parallel rays; the view height is [`Camera::ortho_height`].
    Orthographic,
}

/// An orbit camera around `target`, world z up.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Camera {
    /// The point orbited and looked at.
    pub target: [f32; 3],
    /// Distance from the target to the eye.
    pub distance: f32,
    /// Azimuth of the eye around the target, degrees counter-clockwise from +x.
    pub yaw_deg: f32,
    /// Elevation of the eye above the target's horizontal plane, degrees (−89..89).
    pub pitch_deg: f32,
    /// Vertical field of view, degrees (perspective).
    pub fov_y_deg: f32,
    /// Projection.
    pub projection: Projection,
    /// Height of the view in world units (orthographic).
    pub ortho_height: f32,
}

impl Default for Camera {
    fn default() -> Self {
        Camera {
            target: [0.0; 3],
            distance: 10.0,
            yaw_deg: -62.0,
            pitch_deg: 16.0,
            fov_y_deg: 35.0,
            projection: Projection::Perspective,
            ortho_height: 10.0,
        }
    }
}

impl Camera {
    /// The pitches a camera takes, degrees: short of the poles, where the orbit's basis
    /// degenerates. Scenes and `render --pitch` are held to it, and the orbit clamps to it.
    pub const PITCH_DEG: Limits = Limits::between(-89.0, 89.0);
    /// The vertical fields of view a scene may ask for, degrees (both bounds excluded).
    pub const FOV_Y_DEG: Limits = Limits::strictly_between(1.0, 179.0);

    /// `pitch` moved into [`Camera::PITCH_DEG`].
    pub fn clamp_pitch(pitch: f32) -> f32 {
        pitch.clamp(Self::PITCH_DEG.min as f32, Self::PITCH_DEG.max as f32)
    }
}

/// Eye position and orthonormal basis of a camera.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CameraFrame {
    /// Eye position.
    pub eye: Vec3,
    /// Viewing direction.
    pub forward: Vec3,
    /// Image right.
    pub right: Vec3,
    /// Image up.
    pub up: Vec3,
}

impl Camera {
    /// A camera with the default angles that frames the world box `bbox` (min, max) in an
    /// image of aspect `aspect` (width / height), for either projection.
    pub fn fit(bbox: [[f32; 3]; 2], aspect: f32) -> Camera {
        let mut c = Camera::default();
        c.fit_to(bbox, aspect);
        c
    }

    /// Re-targets this camera (keeping its angles and projection) to frame `bbox`.
    pub fn fit_to(&mut self, bbox: [[f32; 3]; 2], aspect: f32) {
        let lo = Vec3::from(bbox[0]);
        let hi = Vec3::from(bbox[1]);
        let centre = (lo + hi) * 0.5;
        // The bounding sphere always fits; it wastes some border on flat boxes, so shrink a
        // little (the storm's box is twice as wide as tall).
        let radius = ((hi - lo).length() * 0.5).max(1e-6) * 0.82;
        let half_v = (self.fov_y_deg.to_radians() * 0.5).max(1e-3);
        let half_h = (half_v.tan() * aspect.max(1e-3)).atan();
        let half = half_v.min(half_h);
        self.target = centre.into();
        self.distance = radius / half.sin();
        self.ortho_height = 2.0 * radius / aspect.clamp(1e-3, 1.0);
        // The shrunk sphere can cut the box's corners off: narrower than square, where the
        // sides bind, and at any aspect for a flat box (a model domain tens of times wider
        // than tall, as WRF's 10 km columns over 20 km of height are): keep every corner
        // inside the image's edges (with a hair of margin, so that rounding keeps them in).
        let f = self.frame();
        let aspect = aspect.max(1e-3);
        let (tan_v, tan_h) = (half_v.tan(), half_h.tan());
        const MARGIN: f32 = 1.0 + 1e-4;
        for p in box_corners(bbox) {
            let q = p - centre;
            let (x, y, z) = (q.dot(f.right).abs(), q.dot(f.up).abs(), q.dot(f.forward));
            let need = (x / tan_h).max(y / tan_v) * MARGIN - z;
            self.distance = self.distance.max(need);
            self.ortho_height = self.ortho_height.max(2.0 * MARGIN * (x / aspect).max(y));
        }
    }

    /// This camera for an image of aspect `to` (width / height) that keeps in sight what it
    /// showed at aspect `from`: the view's rectangle at the target's distance becomes the
    /// smallest one of the new aspect that contains it. A narrower image keeps the width (and
    /// shows more above and below); a wider one keeps the height. Angles, target and field of
    /// view stay; the distance (perspective) or the orthographic height grows.
    pub fn reframed(&self, from: f32, to: f32) -> Camera {
        let s = (from.max(1e-3) / to.max(1e-3)).max(1.0);
        let mut c = *self;
        c.distance *= s;
        c.ortho_height *= s;
        c
    }

    /// Whether world point `p` is inside the view of an image of aspect `aspect`
    /// (width / height): in front of the eye and within the image's edges.
    pub fn sees(&self, p: Vec3, aspect: f32) -> bool {
        let f = self.frame();
        let d = p - f.eye;
        let (x, y, z) = (d.dot(f.right), d.dot(f.up), d.dot(f.forward));
        let half_h = match self.projection {
            Projection::Perspective => {
                if z <= 0.0 {
                    return false;
                }
                z * (self.fov_y_deg.to_radians() * 0.5).tan()
            }
            Projection::Orthographic => self.ortho_height * 0.5,
        };
        y.abs() <= half_h && x.abs() <= half_h * aspect
    }

    /// Eye position and basis.
    pub fn frame(&self) -> CameraFrame {
        let (yaw, pitch) = (
            self.yaw_deg.to_radians(),
            Self::clamp_pitch(self.pitch_deg).to_radians(),
        );
        let offset = Vec3::new(
            pitch.cos() * yaw.cos(),
            pitch.cos() * yaw.sin(),
            pitch.sin(),
        );
        let target = Vec3::from(self.target);
        let eye = target + offset * self.distance;
        let forward = -offset;
        let right = forward.cross(Vec3::Z).normalize_or(Vec3::X);
        let up = right.cross(forward);
        CameraFrame {
            eye,
            forward,
            right,
            up,
        }
    }

    /// Orbits by `d_yaw` and `d_pitch` degrees.
    pub fn orbit(&mut self, d_yaw: f32, d_pitch: f32) {
        self.yaw_deg = (self.yaw_deg + d_yaw).rem_euclid(360.0);
        self.pitch_deg = Self::clamp_pitch(self.pitch_deg + d_pitch);
    }

    /// Moves the target in the image plane by `dx`, `dy` view heights.
    pub fn pan(&mut self, dx: f32, dy: f32) {
        let f = self.frame();
        let h = self.view_height_at_target();
        let t = Vec3::from(self.target) + (f.right * dx + f.up * dy) * h;
        self.target = t.into();
    }

    /// Zooms by `factor` (> 1 moves closer / narrows the orthographic view).
    pub fn zoom(&mut self, factor: f32) {
        let f = factor.max(1e-3);
        self.distance /= f;
        self.ortho_height /= f;
    }

    /// Height of the view at the target's distance, world units.
    pub fn view_height_at_target(&self) -> f32 {
        match self.projection {
            Projection::Perspective => {
                2.0 * self.distance * (self.fov_y_deg.to_radians() * 0.5).tan()
            }
            Projection::Orthographic => self.ortho_height,
        }
    }
}

/// The eight corners of box `b` (min, max).
pub(crate) fn box_corners(b: [[f32; 3]; 2]) -> impl Iterator<Item = Vec3> {
    (0..8).map(move |i| Vec3::new(b[i & 1][0], b[(i >> 1) & 1][1], b[(i >> 2) & 1][2]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basis_is_orthonormal_and_looks_at_target() {
        let mut c = Camera::fit([[-1.0, -2.0, 0.0], [3.0, 2.0, 1.0]], 1.5);
        c.orbit(33.0, 10.0);
        let f = c.frame();
        assert!((f.forward.length() - 1.0).abs() < 1e-5);
        assert!(f.forward.dot(f.right).abs() < 1e-5);
        assert!(f.up.dot(f.right).abs() < 1e-5);
        assert!(f.up.z > 0.0);
        let to_target = (Vec3::from(c.target) - f.eye).normalize();
        assert!(to_target.dot(f.forward) > 0.9999);
        let before = c.distance;
        c.zoom(2.0);
        assert!((c.distance - before / 2.0).abs() < 1e-4);
        let t0 = Vec3::from(c.target);
        c.pan(0.1, 0.0);
        assert!((Vec3::from(c.target) - t0).dot(f.right) > 0.0);
    }

    #[test]
    fn a_flat_box_is_framed_whole_at_any_aspect() {
        // A WRF domain: 480 km square, 20 km high.
        let b = [[0.0, 0.0, 0.0], [480e3, 480e3, 20e3]];
        for projection in [Projection::Perspective, Projection::Orthographic] {
            for aspect in [0.5, 1.0, 16.0 / 9.0, 3.0] {
                for yaw in [-62.0, 0.0, 45.0, 100.0] {
                    let mut c = Camera {
                        projection,
                        yaw_deg: yaw,
                        ..Camera::default()
                    };
                    c.fit_to(b, aspect);
                    assert!(
                        box_corners(b).all(|p| c.sees(p, aspect)),
                        "{projection:?} aspect {aspect} yaw {yaw}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_box_framed_landscape_stays_in_view_in_portrait_and_back() {
        // The storm's proportions: twice as wide as deep, flat.
        let b = [[-40.0, -20.0, 0.0], [40.0, 20.0, 16.0]];
        let (wide, tall) = (16.0 / 9.0, 9.0 / 16.0);
        for projection in [Projection::Perspective, Projection::Orthographic] {
            let mut c = Camera {
                projection,
                ..Camera::default()
            };
            c.fit_to(b, wide);
            assert!(box_corners(b).all(|p| c.sees(p, wide)), "{projection:?}");
            // Unchanged, the camera crops the box in a portrait window.
            assert!(!box_corners(b).all(|p| c.sees(p, tall)), "{projection:?}");
            let r = c.reframed(wide, tall);
            assert!(box_corners(b).all(|p| r.sees(p, tall)), "{projection:?}");
            // Wider keeps the framing: the same camera from the reference.
            assert_eq!(c.reframed(wide, 21.0 / 9.0), c);
            // Not a zoom of the angles or the target.
            assert_eq!(
                (r.yaw_deg, r.pitch_deg, r.target),
                (c.yaw_deg, c.pitch_deg, c.target)
            );
        }
    }
}
