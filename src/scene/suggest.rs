//! Looks chosen from a dataset's attribute names, grid classes and value ranges, for datasets
//! imported from models (CM1, WRF) or other tools, whose names are not the built-in storm's:
//!
//! | attribute | look |
//! | --- | --- |
//! | `dbz`, `refl*` (reflectivity) | radar colours over 5–75 dBZ, glowing |
//! | `qc`, `qi`, `qs`, `QCLOUD`, `QICE`, `QSNOW` (cloud, ice, snow) | the `cloud` preset: white, lit, shadowing |
//! | `qr`, `qg`, `qh`, `QRAIN`, `QGRAUP`, `QHAIL` (rain, graupel, hail) | the `rain` preset |
//! | `wind_speed`, `*speed*` | the `wind_speed` preset: a sequential map (inferno) |
//! | `w`, `winterp`, `W` (vertical velocity) | the `vertical_velocity` preset, range symmetric about 0 |
//! | other signed fields (`u`, `v`, `uinterp`, `vinterp`, `*pert`, WRF's `P`, `T`) | coolwarm, range symmetric about 0 |
//! | level sets (grid class) | an isosurface at 0 |
//!
//! Up to [`SUGGESTED_ATTRIBUTES`] are shown, in the order of the table; the camera frames the
//! cloud, rain and reflectivity attributes (the storm's body) where there are any.

use std::path::Path;

use super::SceneAttribute;
use crate::dataset::{Attribute, Manifest};
use crate::format::GridClass;
use crate::render::{Colormap, MAX_ATTRIBUTES, MediumKind, Mode, RenderSettings};

/// Most attributes a suggested scene shows (the renderer takes up to [`MAX_ATTRIBUTES`];
/// four keep the picture readable and the frame rate up).
pub const SUGGESTED_ATTRIBUTES: usize = 4;

/// What an attribute is, judged by its name and class.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    LevelSet,
    Cloud,
    Rain,
    Reflectivity,
    Speed,
    VerticalVelocity,
    Signed,
    Other,
}

fn role(a: &Attribute) -> Role {
    if a.grid_class == GridClass::LevelSet {
        return Role::LevelSet;
    }
    let n = a.name.to_ascii_lowercase();
    let is = |names: &[&str]| names.contains(&n.as_str());
    if n == "dbz" || n.starts_with("refl") {
        Role::Reflectivity
    } else if is(&[
        "qc",
        "qi",
        "qs",
        "qcloud",
        "qice",
        "qsnow",
        "cloud",
        "funnel_cloud",
    ]) {
        Role::Cloud
    } else if is(&["qr", "qg", "qh", "qrain", "qgraup", "qhail", "rain"]) {
        Role::Rain
    } else if n.contains("speed") {
        Role::Speed
    } else if is(&["w", "winterp", "vertical_velocity"]) {
        Role::VerticalVelocity
    } else if n.starts_with('u') || n.starts_with('v') || n.ends_with("pert") || is(&["p", "t"]) {
        Role::Signed
    } else {
        Role::Other
    }
}

/// The radar reflectivity colours (sRGB), as weather services draw 5–75 dBZ.
fn radar_colormap() -> Colormap {
    let dbz = |d: f32| (d - 5.0) / 70.0;
    Colormap::Stops(vec![
        (dbz(5.0), [0.0, 0.93, 0.93]),
        (dbz(10.0), [0.0, 0.63, 0.96]),
        (dbz(20.0), [0.0, 0.78, 0.0]),
        (dbz(30.0), [0.0, 0.56, 0.0]),
        (dbz(35.0), [1.0, 1.0, 0.0]),
        (dbz(45.0), [1.0, 0.56, 0.0]),
        (dbz(50.0), [1.0, 0.0, 0.0]),
        (dbz(60.0), [0.75, 0.0, 0.0]),
        (dbz(65.0), [1.0, 0.0, 1.0]),
        (dbz(75.0), [0.6, 0.33, 0.79]),
    ])
}

/// A range symmetric about zero covering `r`.
fn symmetric(r: Option<[f64; 2]>) -> Option<[f32; 2]> {
    let r = r?;
    let m = r[0].abs().max(r[1].abs()) as f32;
    (m > 0.0 && m.is_finite()).then_some([-m, m])
}

fn look(a: &Attribute, role: Role) -> SceneAttribute {
    let mut s = SceneAttribute::named(a.name.clone());
    let lower_from_zero = a
        .value_range
        .map(|r| [0.0f32.min(r[0] as f32), r[1] as f32])
        .filter(|r| r[1] > r[0]);
    match role {
        Role::Cloud => {
            s.preset = Some("cloud".into());
            s.range = lower_from_zero;
        }
        Role::Rain => {
            s.preset = Some("rain".into());
            s.range = lower_from_zero;
        }
        Role::Reflectivity => {
            s.range = Some([5.0, 75.0]);
            s.colormap = Some(radar_colormap());
            s.opacity = Some(vec![
                (0.0, 0.0),
                (0.2, 0.05),
                (0.43, 0.25),
                (0.7, 0.6),
                (1.0, 0.9),
            ]);
            s.kind = Some(MediumKind::Emissive);
            s.emission = Some(2.0);
        }
        Role::Speed => s.preset = Some("wind_speed".into()),
        Role::VerticalVelocity => {
            s.preset = Some("vertical_velocity".into());
            s.range = symmetric(a.value_range);
        }
        Role::Signed => {
            s.colormap = Some(Colormap::Named("coolwarm".into()));
            s.range = symmetric(a.value_range);
            s.opacity = Some(vec![(0.0, 0.8), (0.4, 0.0), (0.6, 0.0), (1.0, 0.8)]);
        }
        Role::LevelSet | Role::Other => {}
    }
    s
}

/// The attributes to show and their looks, chosen by name, class and range (see the module
/// documentation); empty where no attribute's name or class is recognised.
pub fn suggested_attributes(m: &Manifest) -> Vec<SceneAttribute> {
    let mut ranked: Vec<(Role, usize)> = m
        .attributes
        .iter()
        .enumerate()
        .map(|(i, a)| (role(a), i))
        .filter(|(r, _)| *r != Role::Other)
        .collect();
    ranked.sort();
    // One level set at most (one isosurface is drawn), and one of each other kind before a
    // second of any.
    let mut chosen: Vec<(Role, usize)> = Vec::new();
    for pass in 0..2 {
        for &(r, i) in &ranked {
            if chosen.len() == SUGGESTED_ATTRIBUTES {
                break;
            }
            let seen = chosen.iter().any(|(c, _)| *c == r);
            let take = if pass == 0 {
                !seen
            } else {
                r != Role::LevelSet
            };
            if take && !chosen.iter().any(|&(_, j)| j == i) {
                chosen.push((r, i));
            }
        }
    }
    chosen
        .into_iter()
        .map(|(r, i)| look(&m.attributes[i], r))
        .collect()
}

/// Render settings for `attributes` (in slot order): an isosurface at 0 of the first level
/// set, else `base` unchanged.
pub fn suggested_settings(
    m: &Manifest,
    attributes: &[SceneAttribute],
    base: &RenderSettings,
) -> RenderSettings {
    let mut s = base.clone();
    let level_set = attributes.iter().position(|a| {
        m.attribute_index(&a.name)
            .is_some_and(|i| m.attributes[i].grid_class == GridClass::LevelSet)
    });
    if let Some(slot) = level_set {
        s.mode = Mode::Isosurface;
        s.iso_attribute = slot;
        s.iso_value = 0.0;
    }
    s
}

/// The attributes the camera frames: the storm body (cloud, rain, reflectivity) where the
/// scene shows any, else all it shows (None).
fn suggested_fit(m: &Manifest, attributes: &[SceneAttribute]) -> Option<Vec<String>> {
    let body: Vec<String> = attributes
        .iter()
        .filter(|a| {
            m.attribute_index(&a.name).is_some_and(|i| {
                matches!(
                    role(&m.attributes[i]),
                    Role::Cloud | Role::Rain | Role::Reflectivity
                )
            })
        })
        .map(|a| a.name.clone())
        .collect();
    (!body.is_empty() && body.len() < attributes.len()).then_some(body)
}

fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_string()).to_string()
}

fn pairs(v: &[(f32, f32)]) -> String {
    let items: Vec<String> = v.iter().map(|(a, b)| format!("[{a}, {b}]")).collect();
    format!("[{}]", items.join(", "))
}

/// A scene file (the schema of `scenes/*.toml`) for dataset `dataset` with manifest `m`,
/// to be saved at `scene_path`: the suggested attributes and looks, camera and settings,
/// each field written out so that it can be edited. The dataset is named by its absolute
/// path where it can be resolved.
pub fn suggested_scene_toml(m: &Manifest, scene_path: &Path, dataset: &Path) -> String {
    let _ = scene_path;
    let dataset = dataset
        .canonicalize()
        .unwrap_or_else(|_| dataset.to_path_buf());
    let attributes = suggested_attributes(m);
    let settings = suggested_settings(m, &attributes, &RenderSettings::default());
    let mut out = String::new();
    out.push_str(
        "# A scene written by `supercell-data import --scene`: looks chosen from the attributes'\n\
         # names and value ranges. Every field can be edited; docs/SCENES.md lists them all.\n\n",
    );
    out.push_str(&format!(
        "dataset = {}\n",
        toml_string(&dataset.to_string_lossy())
    ));
    let others: Vec<&str> = m
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .filter(|n| !attributes.iter().any(|s| s.name == *n))
        .collect();
    if !others.is_empty() {
        out.push_str(&format!(
            "# Also in the dataset (up to {MAX_ATTRIBUTES} render at once): {}\n",
            others.join(", ")
        ));
    }
    for a in &attributes {
        out.push_str("\n[[attribute]]\n");
        out.push_str(&format!("name = {}\n", toml_string(&a.name)));
        if let Some(p) = &a.preset {
            out.push_str(&format!("preset = {}\n", toml_string(p)));
        }
        if let Some(r) = a.range {
            out.push_str(&format!("range = [{}, {}]\n", r[0], r[1]));
        }
        match &a.colormap {
            Some(Colormap::Named(n)) => out.push_str(&format!("colormap = {}\n", toml_string(n))),
            Some(Colormap::Stops(stops)) => {
                let items: Vec<String> = stops
                    .iter()
                    .map(|(u, c)| format!("[{u}, [{}, {}, {}]]", c[0], c[1], c[2]))
                    .collect();
                out.push_str(&format!("colormap = [\n  {},\n]\n", items.join(",\n  ")));
            }
            None => {}
        }
        if let Some(o) = &a.opacity {
            out.push_str(&format!("opacity = {}\n", pairs(o)));
        }
        if let Some(k) = a.kind {
            let k = match k {
                MediumKind::Scatter => "scatter",
                MediumKind::Emissive => "emissive",
            };
            out.push_str(&format!("kind = {}\n", toml_string(k)));
        }
        if let Some(e) = a.emission {
            out.push_str(&format!("emission = {e}\n"));
        }
    }
    out.push_str("\n[camera]\n");
    if let Some(fit) = suggested_fit(m, &attributes) {
        let names: Vec<String> = fit.iter().map(|n| toml_string(n)).collect();
        out.push_str(&format!("fit = [{}]\n", names.join(", ")));
    }
    out.push_str("yaw_deg = -62.0              # azimuth, degrees counter-clockwise from +x\n");
    out.push_str("pitch_deg = 16.0             # elevation, -89..89\n");
    out.push_str("\n[playback]\nmode = \"loop\"\n");
    if settings.mode == Mode::Isosurface {
        out.push_str(&format!(
            "\n[settings]\nmode = \"iso\"\niso_attribute = {}\niso_value = {}\n",
            settings.iso_attribute, settings.iso_value
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::GridType;

    fn attr(name: &str, class: GridClass, range: [f64; 2]) -> Attribute {
        Attribute {
            name: name.into(),
            grid_type: GridType::Float,
            grid_class: class,
            value_range: Some(range),
            index_bbox: None,
            world_bbox: None,
            voxel_size: None,
        }
    }

    fn manifest(attrs: Vec<Attribute>) -> Manifest {
        Manifest {
            format: "supercell-dataset".into(),
            version: 1,
            created: Default::default(),
            write_id: String::new(),
            chunk_size: 4096,
            lanes: Vec::new(),
            attributes: attrs,
            frame_count: 0,
            frames: Vec::new(),
            path: Default::default(),
        }
    }

    #[test]
    fn cm1_names_get_radar_cloud_rain_and_speed_looks() {
        let m = manifest(vec![
            attr("th_pert", GridClass::Unknown, [-3.0, 2.0]),
            attr("wind_speed", GridClass::FogVolume, [5.0, 60.0]),
            attr("qr", GridClass::FogVolume, [1e-5, 8e-3]),
            attr("dbz", GridClass::FogVolume, [5.0, 71.0]),
            attr("qc", GridClass::FogVolume, [1e-5, 3e-3]),
            attr("winterp", GridClass::Unknown, [-20.0, 45.0]),
        ]);
        let s = suggested_attributes(&m);
        let names: Vec<&str> = s.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["qc", "qr", "dbz", "wind_speed"]);
        assert_eq!(s[0].preset.as_deref(), Some("cloud"));
        assert_eq!(s[0].range, Some([0.0, 3e-3]));
        assert_eq!(s[2].range, Some([5.0, 75.0]));
        assert!(matches!(s[2].colormap, Some(Colormap::Stops(_))));
        assert_eq!(s[3].preset.as_deref(), Some("wind_speed"));
    }

    #[test]
    fn vertical_velocity_range_is_symmetric_and_level_sets_are_isosurfaces() {
        let m = manifest(vec![
            attr("W", GridClass::Unknown, [-20.0, 45.0]),
            attr("surface", GridClass::LevelSet, [-3.0, 3.0]),
        ]);
        let s = suggested_attributes(&m);
        assert_eq!(s[0].name, "surface");
        assert_eq!(s[1].range, Some([-45.0, 45.0]));
        let settings = suggested_settings(&m, &s, &RenderSettings::default());
        assert_eq!(settings.mode, Mode::Isosurface);
        assert_eq!(settings.iso_attribute, 0);
    }
}
