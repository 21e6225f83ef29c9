//! Camera paths: keyframes over time, interpolated smoothly (cubic Hermite with
//! Catmull-Rom tangents on non-uniform times) on yaw, pitch, log distance, target and field
//! of view, relative to the camera fitted to the data.

use serde::{Deserialize, Serialize};

use crate::render::Camera;

/// One keyframe of a [`CameraPath`]. Absent fields take the fitted camera's value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraKey {
    /// Time of the key, seconds from the start of the path.
    pub time_s: f64,
    /// Azimuth of the eye, degrees counter-clockwise from +x (default: the fitted camera's).
    #[serde(default)]
    pub yaw_deg: Option<f32>,
    /// Elevation of the eye, degrees, −89..89 (default: the fitted camera's).
    #[serde(default)]
    pub pitch_deg: Option<f32>,
    /// Distance as a multiple of the fitted camera's (default 1; < 1 is closer).
    #[serde(default)]
    pub distance_scale: Option<f32>,
    /// Target moved by this many world units from the fitted target (default 0).
    #[serde(default)]
    pub target_offset: Option<[f32; 3]>,
    /// Vertical field of view, degrees (default: the fitted camera's).
    #[serde(default)]
    pub fov_y_deg: Option<f32>,
}

/// A key resolved against a fitted camera: the interpolated channels.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Pose {
    /// yaw, pitch, ln(distance), target x, y, z, fov.
    ch: [f64; 7],
}

impl Pose {
    fn of(k: &CameraKey, fitted: &Camera) -> Pose {
        let off = k.target_offset.unwrap_or([0.0; 3]);
        let d = f64::from(fitted.distance.max(1e-12)) * f64::from(k.distance_scale.unwrap_or(1.0));
        Pose {
            ch: [
                f64::from(k.yaw_deg.unwrap_or(fitted.yaw_deg)),
                f64::from(k.pitch_deg.unwrap_or(fitted.pitch_deg)),
                d.max(1e-30).ln(),
                f64::from(fitted.target[0] + off[0]),
                f64::from(fitted.target[1] + off[1]),
                f64::from(fitted.target[2] + off[2]),
                f64::from(k.fov_y_deg.unwrap_or(fitted.fov_y_deg)),
            ],
        }
    }
}

/// A camera animation: keys at strictly increasing times, optionally looped.
#[derive(Clone, Debug, PartialEq)]
pub struct CameraPath {
    keys: Vec<CameraKey>,
    /// After the last key the path returns to the first and repeats (otherwise it holds the
    /// last key).
    pub looped: bool,
    duration_s: f64,
}

impl CameraPath {
    /// A path through `keys`. Times must be finite and strictly increasing, and there must
    /// be at least one key. `duration_s` is the loop period of a looped path (the segment
    /// from the last key back to the first lasts `duration_s − (last − first)`; it must be
    /// longer than the keys' span); `None` makes that return segment as long as the average
    /// gap between keys. For paths that do not loop it is ignored.
    pub fn new(
        keys: Vec<CameraKey>,
        looped: bool,
        duration_s: Option<f64>,
    ) -> Result<CameraPath, String> {
        if keys.is_empty() {
            return Err("a camera path needs at least one key".into());
        }
        for (i, k) in keys.iter().enumerate() {
            if !k.time_s.is_finite() {
                return Err(format!("key {i}: time_s must be a finite number"));
            }
            if i > 0 && k.time_s <= keys[i - 1].time_s {
                return Err(format!(
                    "key {i}: time_s {} is not after the previous key's {}",
                    k.time_s,
                    keys[i - 1].time_s
                ));
            }
        }
        let span = keys[keys.len() - 1].time_s - keys[0].time_s;
        let duration_s = match duration_s {
            Some(d) if !(d.is_finite() && d > span) => {
                return Err(format!(
                    "duration_s {d} must be a finite number larger than the keys' span ({span} s)"
                ));
            }
            Some(d) => d,
            None if keys.len() > 1 => span * keys.len() as f64 / (keys.len() - 1) as f64,
            None => 1.0,
        };
        Ok(CameraPath {
            keys,
            looped,
            duration_s,
        })
    }

    /// The keys, in time order.
    pub fn keys(&self) -> &[CameraKey] {
        &self.keys
    }

    /// Length of one pass: the loop period of a looped path, else the time of the last key.
    pub fn duration_s(&self) -> f64 {
        if self.looped {
            self.duration_s
        } else {
            self.keys[self.keys.len() - 1].time_s
        }
    }

    /// The camera at `time_s` seconds, with key fields taken relative to `fitted` (which
    /// also gives the projection). A looped path repeats with its period; one that does not
    /// loop holds its first key before it and its last key after it. Yaw turns the short way
    /// between consecutive keys; the result's yaw is in 0..360.
    pub fn at(&self, time_s: f64, fitted: &Camera) -> Camera {
        let n = self.keys.len();
        // Poses with yaw unwrapped key to key (and, for loops, back to the first key).
        let mut poses: Vec<Pose> = self.keys.iter().map(|k| Pose::of(k, fitted)).collect();
        let mut times: Vec<f64> = self.keys.iter().map(|k| k.time_s).collect();
        if self.looped {
            poses.push(poses[0]);
            times.push(times[0] + self.duration_s);
        }
        for i in 1..poses.len() {
            let prev = poses[i - 1].ch[0];
            let y = &mut poses[i].ch[0];
            *y += 360.0 * ((prev - *y) / 360.0).round();
        }
        let t0 = times[0];
        let t = if !time_s.is_finite() {
            t0
        } else if self.looped {
            if (t0..t0 + self.duration_s).contains(&time_s) {
                time_s // exact, so that keys are hit exactly
            } else {
                t0 + (time_s - t0).rem_euclid(self.duration_s)
            }
        } else {
            time_s.clamp(t0, times[n - 1])
        };
        let m = poses.len();
        // Segment i: times[i] ≤ t < times[i + 1] (the last key if t is at or past it).
        let i = match times.iter().rposition(|&k| k <= t) {
            Some(i) if i + 1 < m => i,
            _ => {
                return self.camera(&poses[m - 1], fitted);
            }
        };
        // Neighbours for the tangents; loops wrap around (one period apart).
        let neighbour = |j: isize| -> (f64, Pose) {
            if (0..m as isize).contains(&j) {
                return (times[j as usize], poses[j as usize]);
            }
            if !self.looped {
                let c = j.clamp(0, m as isize - 1) as usize;
                return (times[c], poses[c]);
            }
            // Loop: keys 0..n repeat every period with yaw shifted by the loop's wrap.
            let wrap = poses[n].ch[0] - poses[0].ch[0];
            let (k, shift) = if j < 0 {
                ((j + n as isize) as usize, -1.0)
            } else {
                ((j - n as isize) as usize, 1.0)
            };
            let mut p = poses[k];
            p.ch[0] += shift * wrap;
            (times[k] + shift * self.duration_s, p)
        };
        let (ta, pa) = neighbour(i as isize - 1);
        let (t1, p1) = (times[i], poses[i]);
        let (t2, p2) = (times[i + 1], poses[i + 1]);
        let (tb, pb) = neighbour(i as isize + 2);
        let h = t2 - t1;
        let s = (t - t1) / h;
        let (s2, s3) = (s * s, s * s * s);
        let h00 = 2.0 * s3 - 3.0 * s2 + 1.0;
        let h10 = s3 - 2.0 * s2 + s;
        let h01 = -2.0 * s3 + 3.0 * s2;
        let h11 = s3 - s2;
        let tangent = |a: f64, ta: f64, b: f64, tb: f64| {
            if tb > ta { (b - a) / (tb - ta) } else { 0.0 }
        };
        let mut out = p1;
        for c in 0..7 {
            let m1 = tangent(pa.ch[c], ta, p2.ch[c], t2);
            let m2 = tangent(p1.ch[c], t1, pb.ch[c], tb);
            out.ch[c] = h00 * p1.ch[c] + h10 * h * m1 + h01 * p2.ch[c] + h11 * h * m2;
        }
        self.camera(&out, fitted)
    }

    fn camera(&self, p: &Pose, fitted: &Camera) -> Camera {
        let mut c = *fitted;
        let [yaw, pitch, ln_d, x, y, z, fov] = p.ch;
        c.yaw_deg = yaw.rem_euclid(360.0) as f32;
        c.pitch_deg = Camera::clamp_pitch(pitch as f32);
        c.distance = ln_d.exp() as f32;
        c.target = [x as f32, y as f32, z as f32];
        c.fov_y_deg = fov.clamp(Camera::FOV_Y_DEG.min, Camera::FOV_Y_DEG.max) as f32;
        c.ortho_height = fitted.ortho_height * c.distance / fitted.distance.max(1e-12);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: f64, yaw: f32) -> CameraKey {
        CameraKey {
            time_s: t,
            yaw_deg: Some(yaw),
            ..Default::default()
        }
    }

    /// Angular difference in 0..180.
    fn ang(a: f32, b: f32) -> f32 {
        let d = (a - b).rem_euclid(360.0);
        d.min(360.0 - d)
    }

    #[test]
    fn hits_keys_and_unwraps_yaw_the_short_way() {
        let fitted = Camera::default();
        let p = CameraPath::new(vec![key(0.0, 350.0), key(2.0, 10.0)], false, None).unwrap();
        assert_eq!(p.at(0.0, &fitted).yaw_deg, 350.0);
        assert_eq!(p.at(2.0, &fitted).yaw_deg, 10.0);
        // Midway lies at 0°, not at 180° (the long way round).
        let mid = p.at(1.0, &fitted).yaw_deg;
        assert!(ang(mid, 0.0) < 1e-3, "{mid}");
        for i in 0..=2000 {
            let y = p.at(i as f64 * 1e-3, &fitted).yaw_deg;
            assert!(ang(y, 0.0) <= 10.0 + 1e-3, "{y} at {i} ms");
        }
    }

    #[test]
    fn single_key_and_clamping() {
        let fitted = Camera::default();
        let p = CameraPath::new(vec![key(1.0, 40.0)], false, None).unwrap();
        assert_eq!(p.at(-5.0, &fitted).yaw_deg, 40.0);
        assert_eq!(p.at(50.0, &fitted).yaw_deg, 40.0);
        assert!(CameraPath::new(vec![], true, None).is_err());
        assert!(CameraPath::new(vec![key(1.0, 0.0), key(1.0, 0.0)], true, None).is_err());
        assert!(CameraPath::new(vec![key(0.0, 0.0), key(5.0, 0.0)], true, Some(5.0)).is_err());
    }
}
