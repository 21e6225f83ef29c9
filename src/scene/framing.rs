//! Keeping the camera's framing when the image's aspect changes (a window resized).

use crate::render::Camera;

use super::CameraSpec;

/// The scene's camera fit and the user's framing across image aspects.
///
/// While the camera shown is the scene's own (fitted to the data, `[camera]` applied), a new
/// aspect refits it to the data at that aspect. Once the user has moved the camera, what
/// they framed (the camera and the aspect they framed it at) is kept in sight at any
/// aspect through [`Camera::reframed`]: narrower keeps its width, wider its height, and
/// returning to the aspect gives their camera back exactly.
#[derive(Clone, Debug, PartialEq)]
pub struct Framing {
    spec: CameraSpec,
    fit_box: [[f32; 3]; 2],
    aspect: f32,
    user: Option<UserFraming>,
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct UserFraming {
    /// The camera as the user left it.
    camera: Camera,
    /// The aspect they framed it at.
    aspect: f32,
    /// What it was reframed to last (a camera still equal to it was not moved since).
    shown: Camera,
}

impl Framing {
    /// The framing of `spec` for world box `fit_box` in images of aspect `aspect`.
    pub fn new(spec: CameraSpec, fit_box: [[f32; 3]; 2], aspect: f32) -> Framing {
        Framing {
            spec,
            fit_box,
            aspect,
            user: None,
        }
    }

    /// The image aspect (width / height) framed for.
    pub fn aspect(&self) -> f32 {
        self.aspect
    }

    /// The scene's camera at the current aspect.
    pub fn fitted(&self) -> Camera {
        self.spec.resolve(self.fit_box, self.aspect)
    }

    /// Moves to images of aspect `aspect`, the camera shown until now being `current`:
    /// returns the camera to show instead ([`Framing::fitted`] is the scene's camera at the
    /// new aspect). `None` when nothing changes.
    pub fn set_aspect(&mut self, aspect: f32, current: Camera) -> Option<Camera> {
        if !(aspect.is_finite() && aspect > 0.0) || aspect == self.aspect {
            return None;
        }
        let untouched = current == self.fitted();
        let old = self.aspect;
        self.aspect = aspect;
        if untouched {
            self.user = None;
            return Some(self.fitted());
        }
        let (camera, at) = match self.user {
            Some(u) if u.shown == current => (u.camera, u.aspect),
            _ => (current, old),
        };
        let shown = camera.reframed(at, aspect);
        self.user = Some(UserFraming {
            camera,
            aspect: at,
            shown,
        });
        Some(shown)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{Projection, box_corners as corners};
    use glam::Vec3;

    const WIDE: f32 = 16.0 / 9.0;
    const TALL: f32 = 9.0 / 16.0;

    #[test]
    fn the_scene_camera_is_refitted_and_a_moved_one_keeps_its_framing() {
        // The storm's proportions: twice as wide as deep, flat.
        let b = [[-40.0, -20.0, 0.0], [40.0, 20.0, 16.0]];
        for projection in [Projection::Perspective, Projection::Orthographic] {
            let spec = CameraSpec {
                projection: Some(projection),
                ..CameraSpec::default()
            };
            let mut f = Framing::new(spec, b, WIDE);
            let fitted = f.fitted();
            assert!(corners(b).all(|p| fitted.sees(p, WIDE)));
            assert!(!corners(b).all(|p| fitted.sees(p, TALL)), "crops unchanged");

            // Untouched: the scene's camera fitted at the new aspect, and back.
            let tall = f.set_aspect(TALL, fitted).unwrap();
            assert_eq!(tall, f.fitted());
            assert!(corners(b).all(|p| tall.sees(p, TALL)), "{projection:?}");
            assert_eq!(f.set_aspect(WIDE, tall), Some(fitted));
            assert_eq!(f.set_aspect(WIDE, fitted), None);

            // Moved (orbited, zoomed in): its view stays in sight, and returning to the
            // aspect it was framed at gives it back exactly, through any sizes between.
            let mut user = fitted;
            user.orbit(20.0, 5.0);
            user.zoom(1.2);
            let seen: Vec<Vec3> = corners(b).filter(|&p| user.sees(p, WIDE)).collect();
            let mut shown = user;
            for a in [1.2, 0.8, TALL, 0.7, 2.4] {
                shown = f.set_aspect(a, shown).unwrap();
                assert!(seen.iter().all(|&p| shown.sees(p, a)), "{projection:?} {a}");
            }
            assert_eq!(f.set_aspect(WIDE, shown), Some(user));
            // Moved again after a resize: the new camera is the new reference.
            let mut again = f.set_aspect(TALL, user).unwrap();
            again.orbit(-10.0, 0.0);
            let back = f.set_aspect(WIDE, again).unwrap();
            assert_eq!(f.set_aspect(TALL, back), Some(again));
        }
    }
}
