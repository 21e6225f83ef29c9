//! Semantic checks of a parsed scene file; each failure points at the offending field.

use super::error::{Seg, Source};
use super::{CameraPathFile, MAX_PLOT_WINDOW_S, SceneAttribute, SceneError, SceneFile};
use crate::render::{
    Albedo, Camera, Colormap, Limits, MAX_ATTRIBUTES, limits, shown_value as shown,
};
use toml::de::{DeTable, DeValue};

/// A field path under construction.
#[derive(Clone)]
struct P(Vec<Seg>);

impl P {
    fn root() -> P {
        P(Vec::new())
    }
    fn k(&self, key: &str) -> P {
        let mut v = self.0.clone();
        v.push(Seg::Key(key.into()));
        P(v)
    }
    fn i(&self, index: usize) -> P {
        let mut v = self.0.clone();
        v.push(Seg::Index(index));
        P(v)
    }
}

struct Check<'a> {
    src: &'a Source,
}

type R = Result<(), SceneError>;

impl Check<'_> {
    fn fail(&self, p: &P, msg: impl Into<String>) -> R {
        Err(self.src.error_at_path(&p.0, msg))
    }

    fn finite(&self, p: &P, v: f64) -> R {
        if v.is_finite() {
            Ok(())
        } else {
            self.fail(p, format!("{v} is not a finite number"))
        }
    }

    fn positive(&self, p: &P, v: f64) -> R {
        if v.is_finite() && v > 0.0 {
            Ok(())
        } else {
            self.fail(p, format!("must be a finite number > 0, found {v}"))
        }
    }

    fn non_negative(&self, p: &P, v: f64) -> R {
        if v.is_finite() && v >= 0.0 {
            Ok(())
        } else {
            self.fail(p, format!("must be a finite number ≥ 0, found {v}"))
        }
    }

    fn within(&self, p: &P, v: f64, lim: Limits) -> R {
        if lim.contains(v) {
            Ok(())
        } else {
            self.fail(
                p,
                format!("must be {}, found {}", lim.describe(), shown(v as f32)),
            )
        }
    }

    fn fov(&self, p: &P, v: f32) -> R {
        let lim = Camera::FOV_Y_DEG;
        if lim.contains(f64::from(v)) {
            Ok(())
        } else {
            self.fail(
                p,
                format!(
                    "field of view must lie between {} and {} degrees, found {v}",
                    lim.min, lim.max
                ),
            )
        }
    }

    fn pitch(&self, p: &P, v: f32) -> R {
        let lim = Camera::PITCH_DEG;
        if lim.contains(f64::from(v)) {
            Ok(())
        } else {
            self.fail(
                p,
                format!(
                    "pitch must lie in −{}..{} degrees, found {v}",
                    -lim.min, lim.max
                ),
            )
        }
    }

    fn vec3(&self, p: &P, v: [f32; 3]) -> R {
        for (i, x) in v.iter().enumerate() {
            self.finite(&p.i(i), f64::from(*x))?;
        }
        Ok(())
    }

    fn attribute(&self, p: &P, a: &SceneAttribute) -> R {
        if a.name.trim().is_empty() {
            return self.fail(&p.k("name"), "attribute name is empty");
        }
        if let Some([lo, hi]) = a.range
            && !(lo.is_finite() && hi.is_finite() && lo < hi)
        {
            return self.fail(
                &p.k("range"),
                format!("range must be two finite numbers [low, high] with low < high, found [{lo}, {hi}]"),
            );
        }
        // The transfer function divides by the span: an infinite one maps every value to 0.
        if let Some([lo, hi]) = a.range
            && !(hi - lo).is_finite()
        {
            return self.fail(
                &p.k("range"),
                format!(
                    "the span high − low of [{lo}, {hi}] is too large for 32-bit floats (at most {:e})",
                    f32::MAX
                ),
            );
        }
        match &a.colormap {
            Some(Colormap::Named(n)) if !Colormap::NAMES.contains(&n.as_str()) => {
                return self.fail(
                    &p.k("colormap"),
                    format!(
                        "unknown colormap {n:?} (known: {})",
                        Colormap::NAMES.join(", ")
                    ),
                );
            }
            Some(Colormap::Stops(stops)) => {
                if stops.is_empty() {
                    return self.fail(&p.k("colormap"), "a colormap needs at least one stop");
                }
                for (i, (u, rgb)) in stops.iter().enumerate() {
                    let q = p.k("colormap").i(i);
                    if !u.is_finite() || (i > 0 && *u < stops[i - 1].0) {
                        return self.fail(
                            &q,
                            "colormap stops must be sorted by their position u (ascending, finite)",
                        );
                    }
                    if let Some(c) = rgb.iter().find(|c| !(0.0..=1.0).contains(*c)) {
                        return self.fail(
                            &q,
                            format!("colours are sRGB components in 0..1, found {c}"),
                        );
                    }
                }
            }
            _ => {}
        }
        if let Some(points) = &a.opacity {
            if points.is_empty() {
                return self.fail(&p.k("opacity"), "an opacity curve needs at least one point");
            }
            for (i, &(u, o)) in points.iter().enumerate() {
                let q = p.k("opacity").i(i);
                if !u.is_finite() || (i > 0 && u < points[i - 1].0) {
                    return self.fail(
                        &q,
                        "opacity points must be sorted by their position u (ascending, finite)",
                    );
                }
                if !(0.0..=1.0).contains(&o) {
                    return self.fail(&q, format!("opacity must lie in 0..1, found {o}"));
                }
            }
        }
        match &a.albedo {
            Some(Albedo::Grey(g)) if !(0.0..=1.0).contains(g) => {
                return self.fail(&p.k("albedo"), format!("an albedo lies in 0..1, found {g}"));
            }
            Some(Albedo::Stops(stops)) => {
                if stops.is_empty() {
                    return self.fail(&p.k("albedo"), "albedo stops need at least one stop");
                }
                for (i, (u, rgb)) in stops.iter().enumerate() {
                    let q = p.k("albedo").i(i);
                    if !u.is_finite() || (i > 0 && *u < stops[i - 1].0) {
                        return self.fail(
                            &q,
                            "albedo stops must be sorted by their position u (ascending, finite)",
                        );
                    }
                    if let Some(c) = rgb.iter().find(|c| !(0.0..=1.0).contains(*c)) {
                        return self
                            .fail(&q, format!("an albedo's components lie in 0..1, found {c}"));
                    }
                }
            }
            _ => {}
        }
        if let Some(s) = a.extinction_scale {
            self.within(
                &p.k("extinction_scale"),
                f64::from(s),
                limits::EXTINCTION_SCALE,
            )?;
        }
        if let Some(e) = a.emission {
            self.within(&p.k("emission"), f64::from(e), limits::EMISSION)?;
        }
        Ok(())
    }

    fn camera_path(&self, p: &P, cp: &CameraPathFile) -> R {
        if cp.key.is_empty() {
            return self.fail(p, "a camera path needs at least one [[camera_path.key]]");
        }
        for (i, k) in cp.key.iter().enumerate() {
            let q = p.k("key").i(i);
            self.finite(&q.k("time_s"), k.time_s)?;
            if i > 0 && k.time_s <= cp.key[i - 1].time_s {
                return self.fail(
                    &q.k("time_s"),
                    format!(
                        "key times must increase strictly: {} follows {}",
                        k.time_s,
                        cp.key[i - 1].time_s
                    ),
                );
            }
            if let Some(y) = k.yaw_deg {
                self.finite(&q.k("yaw_deg"), f64::from(y))?;
            }
            if let Some(v) = k.pitch_deg {
                self.pitch(&q.k("pitch_deg"), v)?;
            }
            if let Some(v) = k.distance_scale {
                self.positive(&q.k("distance_scale"), f64::from(v))?;
            }
            if let Some(v) = k.target_offset {
                self.vec3(&q.k("target_offset"), v)?;
            }
            if let Some(v) = k.fov_y_deg {
                self.fov(&q.k("fov_y_deg"), v)?;
            }
        }
        if let Some(d) = cp.duration_s {
            let span = cp.key[cp.key.len() - 1].time_s - cp.key[0].time_s;
            if !(d.is_finite() && d > span) {
                return self.fail(
                    &p.k("duration_s"),
                    format!(
                        "the loop period must be a finite number larger than the keys' span ({span} s), found {d}"
                    ),
                );
            }
        }
        Ok(())
    }
}

/// Fixed-length arrays of the format and their lengths; `*` stands for every index. The
/// TOML deserializer fills a `[f32; 3]` from the first three elements of a longer array and
/// ignores the rest, so lengths are checked on the document itself.
const FIXED_ARRAYS: &[(&[&str], usize)] = &[
    (&["settings", "sun_color"], 3),
    (&["settings", "sky_zenith"], 3),
    (&["settings", "sky_horizon"], 3),
    (&["camera", "target"], 3),
    (&["camera", "target_offset"], 3),
    (&["camera_path", "key", "*", "target_offset"], 3),
    (&["attribute", "*", "range"], 2),
    (&["attribute", "*", "opacity", "*"], 2),
    (&["attribute", "*", "colormap", "*"], 2),
    (&["attribute", "*", "colormap", "*", "1"], 3),
];

/// Checks that every array matched by `pattern` (from `value`, at `path`) has `len` items.
fn array_length(c: &Check<'_>, value: &DeValue<'_>, pattern: &[&str], path: &P, len: usize) -> R {
    let Some((first, rest)) = pattern.split_first() else {
        return match value {
            DeValue::Array(a) if a.len() != len => c.fail(
                path,
                format!(
                    "expected an array of length {len}, found one of length {}",
                    a.len()
                ),
            ),
            _ => Ok(()),
        };
    };
    match value {
        DeValue::Table(t) => match t.iter().find(|(k, _)| k.get_ref() == first) {
            Some((_, v)) => array_length(c, v.get_ref(), rest, &path.k(first), len),
            None => Ok(()),
        },
        DeValue::Array(a) if *first == "*" => {
            for (i, item) in a.iter().enumerate() {
                array_length(c, item.get_ref(), rest, &path.i(i), len)?;
            }
            Ok(())
        }
        DeValue::Array(a) => match first
            .parse::<usize>()
            .ok()
            .and_then(|i| a.get(i).map(|v| (i, v)))
        {
            Some((i, v)) => array_length(c, v.get_ref(), rest, &path.i(i), len),
            None => Ok(()),
        },
        _ => Ok(()),
    }
}

/// Checks the lengths of the format's fixed-length arrays ([`FIXED_ARRAYS`]); run before
/// deserializing, so that a short array is reported as such too, not as a type mismatch.
pub(super) fn array_lengths(src: &Source) -> Result<(), SceneError> {
    let c = Check { src };
    if let Ok(doc) = DeTable::parse(&src.text) {
        let doc = DeValue::Table(doc.into_inner());
        for (pattern, len) in FIXED_ARRAYS {
            array_length(&c, &doc, pattern, &P::root(), *len)?;
        }
    }
    Ok(())
}

/// Checks every value the types alone do not.
pub(super) fn scene_file(f: &SceneFile, src: &Source) -> Result<(), SceneError> {
    let c = Check { src };
    let root = P::root();
    if let Some(d) = &f.dataset
        && d.as_os_str().is_empty()
    {
        return c.fail(
            &root.k("dataset"),
            "dataset path is empty (leave it out for the built-in dataset)",
        );
    }
    if f.attributes.len() > MAX_ATTRIBUTES {
        return c.fail(
            &root.k("attribute").i(MAX_ATTRIBUTES),
            format!(
                "{} attributes; at most {MAX_ATTRIBUTES} render at once",
                f.attributes.len()
            ),
        );
    }
    for (i, a) in f.attributes.iter().enumerate() {
        c.attribute(&root.k("attribute").i(i), a)?;
    }

    let cam = &f.camera;
    let p = root.k("camera");
    if let Some(fit) = &cam.fit
        && fit.is_empty()
    {
        return c.fail(
            &p.k("fit"),
            "fit lists no attributes (leave it out to fit the shown ones)",
        );
    }
    if let Some(v) = cam.yaw_deg {
        c.finite(&p.k("yaw_deg"), f64::from(v))?;
    }
    if let Some(v) = cam.pitch_deg {
        c.pitch(&p.k("pitch_deg"), v)?;
    }
    if let Some(v) = cam.fov_y_deg {
        c.fov(&p.k("fov_y_deg"), v)?;
    }
    if let Some(v) = cam.target {
        c.vec3(&p.k("target"), v)?;
    }
    if let Some(v) = cam.target_offset {
        c.vec3(&p.k("target_offset"), v)?;
    }
    if let Some(v) = cam.distance {
        c.positive(&p.k("distance"), f64::from(v))?;
    }
    if let Some(v) = cam.distance_scale {
        c.positive(&p.k("distance_scale"), f64::from(v))?;
    }
    if let Some(v) = cam.ortho_height {
        c.positive(&p.k("ortho_height"), f64::from(v))?;
    }

    if let Some(cp) = &f.camera_path {
        c.camera_path(&root.k("camera_path"), cp)?;
    }

    c.non_negative(&root.k("playback").k("fps"), f.playback.fps)?;
    let window = f.overlay.plot_window_s;
    if !(window.is_finite() && window > 0.0 && window <= MAX_PLOT_WINDOW_S) {
        return c.fail(
            &root.k("overlay").k("plot_window_s"),
            format!(
                "the plots span more than 0 and at most {MAX_PLOT_WINDOW_S} seconds, found {window}"
            ),
        );
    }

    // The renderer's own limits (`render::limits`), so that what a scene accepts is what
    // the renderer draws.
    if let Err(bad) = f.settings.validate() {
        let mut q = root.k("settings").k(bad.field);
        if let Some(i) = bad.index {
            q = q.i(i);
        }
        return c.fail(&q, bad.message);
    }
    Ok(())
}
