//! Scene files written from a [`Scene`]: what the player saves (its looks and camera) so
//! that `play` and `render` show the same picture again. Every f32 is written as text that
//! reads back as the same bits ([`super::suggest`]'s `toml_float`), and the text is parsed
//! and validated again before anyone is told it was written ([`checked_scene_text`]).

use std::path::Path;

use serde::Serialize;

use super::suggest::{printable, toml_float, toml_string};
use super::{CameraPath, DatasetSpec, Scene, SceneError};

/// Keys of an `[[attribute]]` table in the order written (then any others, sorted).
const ATTRIBUTE_KEYS: [&str; 11] = [
    "name",
    "enabled",
    "preset",
    "range",
    "colormap",
    "opacity",
    "kind",
    "extinction_scale",
    "emission",
    "casts_shadow",
    "albedo",
];

/// `scene` as the text of a scene file (the schema of `docs/SCENES.md`), with `notes` as
/// `#` comments at the top: the dataset by its absolute path (none for the built-in
/// dataset), each attribute with the fields it sets, the camera, the camera path, and the
/// playback, overlay and render settings that differ from their defaults. An error where a
/// value cannot be written (a dataset path that is not UTF-8).
pub fn scene_text(scene: &Scene, notes: &[String]) -> Result<String, SceneError> {
    let mut out = String::new();
    for n in notes {
        for line in n.lines() {
            out.push_str(&format!("# {}\n", printable(line)));
        }
    }
    if let DatasetSpec::Path(p) = &scene.dataset {
        let abs = p.canonicalize().unwrap_or_else(|_| p.clone());
        let Some(text) = abs.to_str() else {
            return Err(SceneError::new(
                &scene.source,
                format!(
                    "the dataset path {} is not UTF-8, which a scene file (TOML) cannot name",
                    abs.display()
                ),
            ));
        };
        out.push_str(&format!("\ndataset = {}\n", toml_string(text)));
    }
    for a in &scene.attributes {
        out.push_str("\n[[attribute]]\n");
        write_table(&mut out, &to_table(&scene.source, a)?, &ATTRIBUTE_KEYS);
    }
    out.push_str("\n[camera]\n");
    let camera_keys = [
        "fit",
        "yaw_deg",
        "pitch_deg",
        "fov_y_deg",
        "projection",
        "target",
    ];
    write_table(
        &mut out,
        &to_table(&scene.source, &scene.camera)?,
        &camera_keys,
    );
    if let Some(path) = &scene.camera_path {
        out.push_str(&format!("\n[camera_path]\nlooped = {}\n", path.looped));
        if path.looped {
            out.push_str(&format!("duration_s = {}\n", f64_text(path.duration_s())));
        }
        for k in path.keys() {
            out.push_str("\n[[camera_path.key]]\n");
            write_table(&mut out, &to_table(&scene.source, k)?, &["time_s"]);
        }
    }
    let sections = [
        (
            "playback",
            differing(&scene.source, &scene.playback, &Default::default())?,
        ),
        (
            "overlay",
            differing(&scene.source, &scene.overlay, &Default::default())?,
        ),
        (
            "settings",
            differing(&scene.source, &scene.settings, &Default::default())?,
        ),
    ];
    for (name, table) in sections {
        if !table.is_empty() {
            out.push_str(&format!("\n[{name}]\n"));
            write_table(&mut out, &table, &[]);
        }
    }
    Ok(out)
}

/// [`scene_text`], read back as the player reads `file` and refused unless it is the same
/// scene: same dataset, attributes, camera, camera path, playback, overlay and settings.
pub fn checked_scene_text(
    scene: &Scene,
    notes: &[String],
    file: &Path,
) -> Result<String, SceneError> {
    let text = scene_text(scene, notes)?;
    let read = Scene::parse(&text, file)?;
    let same = read.attributes == scene.attributes
        && read.camera == scene.camera
        && same_path(read.camera_path.as_ref(), scene.camera_path.as_ref())
        && read.playback == scene.playback
        && read.overlay == scene.overlay
        && read.settings == scene.settings
        && match (&read.dataset, &scene.dataset) {
            (DatasetSpec::Default, DatasetSpec::Default) => true,
            (DatasetSpec::Path(a), DatasetSpec::Path(b)) => {
                a.canonicalize().ok() == b.canonicalize().ok()
            }
            _ => false,
        };
    if !same {
        return Err(SceneError::new(
            file,
            "the scene written reads back as another scene (a value that TOML cannot hold \
             exactly); nothing was written",
        ));
    }
    Ok(text)
}

/// Whether two camera paths fly the same: keys, looping and period (a path that does not
/// loop keeps a period it never uses, which is not written).
fn same_path(a: Option<&CameraPath>, b: Option<&CameraPath>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => {
            a.keys() == b.keys() && a.looped == b.looped && a.duration_s() == b.duration_s()
        }
        _ => false,
    }
}

/// `value` as a TOML table (its `None` fields left out).
fn to_table<T: Serialize>(file: &Path, value: &T) -> Result<toml::Table, SceneError> {
    match toml::Value::try_from(value) {
        Ok(toml::Value::Table(t)) => Ok(t),
        Ok(other) => Err(SceneError::new(
            file,
            format!("a scene table serialised as {}", other.type_str()),
        )),
        Err(e) => Err(SceneError::new(file, format!("writing the scene: {e}"))),
    }
}

/// The fields of `value` that differ from `default`'s.
fn differing<T: Serialize>(file: &Path, value: &T, default: &T) -> Result<toml::Table, SceneError> {
    let base = to_table(file, default)?;
    Ok(to_table(file, value)?
        .into_iter()
        .filter(|(k, v)| base.get(k) != Some(v))
        .collect())
}

/// `key = value` lines of `table`: the keys of `first` in that order, then the others.
fn write_table(out: &mut String, table: &toml::Table, first: &[&str]) {
    let ordered = first
        .iter()
        .filter_map(|k| table.get_key_value(*k))
        .chain(table.iter().filter(|(k, _)| !first.contains(&k.as_str())));
    for (k, v) in ordered {
        out.push_str(&format!("{} = {}\n", key_text(k), value_text(v)));
    }
}

/// A key bare where TOML allows it, else quoted.
fn key_text(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { k.to_string() } else { toml_string(k) }
}

/// One value as TOML text; floats as [`f64_text`].
fn value_text(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => toml_string(s),
        toml::Value::Integer(i) => i.to_string(),
        toml::Value::Float(f) => f64_text(*f),
        toml::Value::Boolean(b) => b.to_string(),
        toml::Value::Datetime(d) => d.to_string(),
        toml::Value::Array(items) => {
            let parts: Vec<String> = items.iter().map(value_text).collect();
            // Colour stops on a line each: a colormap of many reads as a table.
            if items.len() > 4 && items.iter().all(toml::Value::is_array) {
                format!("[\n  {},\n]", parts.join(",\n  "))
            } else {
                format!("[{}]", parts.join(", "))
            }
        }
        toml::Value::Table(t) => {
            let parts: Vec<String> = t
                .iter()
                .map(|(k, v)| format!("{} = {}", key_text(k), value_text(v)))
                .collect();
            format!("{{ {} }}", parts.join(", "))
        }
    }
}

/// A float that was an f32 (every scene field but times) as the shortest text that reads
/// back as that f32; any other f64 as its own shortest text.
fn f64_text(f: f64) -> String {
    let narrow = f as f32;
    if f64::from(narrow) == f {
        toml_float(narrow)
    } else if f.is_finite() {
        format!("{f:?}")
    } else {
        toml_float(narrow)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{Albedo, Colormap, MediumKind, Mode, Projection};
    use crate::scene::{CameraKey, CameraSpec, SceneAttribute};

    /// A scene with every kind of field set, values that are not short decimals among them.
    fn full_scene(dir: &Path) -> Scene {
        let mut s = Scene::for_dataset(DatasetSpec::Path(dir.to_path_buf()));
        s.source = dir.join("s.toml");
        s.attributes = vec![
            SceneAttribute {
                range: Some([0.1, 1.0 / 3.0]),
                colormap: Some(Colormap::Named("turbo".into())),
                opacity: Some(vec![(0.0, 0.0), (0.123_456_79, 0.7), (1.0, 1.0)]),
                kind: Some(MediumKind::Emissive),
                emission: Some(2.5),
                casts_shadow: Some(false),
                ..SceneAttribute::named("dbz")
            },
            SceneAttribute {
                enabled: Some(false),
                preset: Some("cloud".into()),
                colormap: Some(Colormap::Stops(vec![
                    (0.0, [0.1, 0.2, 0.3]),
                    (0.5, [f32::MIN_POSITIVE, 0.999_999_9, 1.0]),
                    (1.0, [1.0, 1.0, 1.0]),
                ])),
                extinction_scale: Some(0.731),
                albedo: Some(Albedo::Stops(vec![
                    (0.0, [0.9, 0.9, 0.9]),
                    (1.0, [0.99; 3]),
                ])),
                ..SceneAttribute::named("qc \"cloud\"")
            },
        ];
        s.camera = CameraSpec {
            yaw_deg: Some(-61.999_99),
            pitch_deg: Some(16.000_002),
            fov_y_deg: Some(35.0),
            projection: Some(Projection::Orthographic),
            target: Some([1.0e-7, 12_345.678, -3.0]),
            distance: Some(98_765.43),
            ortho_height: Some(0.3),
            ..Default::default()
        };
        s.camera_path = Some(
            CameraPath::new(
                vec![
                    CameraKey {
                        time_s: 0.0,
                        yaw_deg: Some(10.0),
                        ..Default::default()
                    },
                    CameraKey {
                        time_s: 2.5,
                        distance_scale: Some(0.7),
                        ..Default::default()
                    },
                ],
                true,
                Some(4.1),
            )
            .unwrap(),
        );
        s.playback.start_frame = 3;
        s.playback.playing = false;
        s.overlay.annotate = true;
        s.settings.mode = Mode::Mip;
        s.settings.sun_color = [1.0, 0.95, 0.9];
        s.settings.step_voxels = 0.7;
        s
    }

    #[test]
    fn a_written_scene_reads_back_the_same_bit_for_bit() {
        let dir = tempfile::tempdir().unwrap();
        let scene = full_scene(dir.path());
        let file = dir.path().join("s.toml");
        let text = checked_scene_text(&scene, &["saved by a test".into()], &file)
            .unwrap_or_else(|e| panic!("{e}\n{}", scene_text(&scene, &[]).unwrap()));
        let read = Scene::parse(&text, &file).unwrap();
        assert_eq!(read.attributes, scene.attributes, "{text}");
        assert_eq!(read.camera, scene.camera);
        assert_eq!(read.camera_path, scene.camera_path);
        assert_eq!(read.settings, scene.settings);
        assert_eq!(read.playback, scene.playback);
        assert_eq!(read.overlay, scene.overlay);
        // Bit for bit, not only equal as floats.
        let bits = |a: &SceneAttribute| a.range.map(|r| r.map(f32::to_bits));
        assert_eq!(bits(&read.attributes[0]), bits(&scene.attributes[0]));
        assert!(text.starts_with("# saved by a test\n"), "{text}");
        assert!(text.contains("colormap = \"turbo\""), "{text}");
        // Defaults are not written: a scene file stays short enough to edit.
        assert!(!text.contains("shadow_steps"), "{text}");
    }

    #[test]
    fn floats_read_back_as_the_same_f32() {
        // Values across the f32 range, subnormals and the largest among them.
        let mut x = 1.0e-44f32;
        while x < 3.0e38 {
            for v in [x, -x, x * 1.000_001, x / 3.0] {
                let text = toml_float(v);
                let back = text.parse::<f64>().unwrap() as f32;
                assert_eq!(back.to_bits(), v.to_bits(), "{v:e} written as {text}");
            }
            x *= 7.3;
        }
        assert_eq!(f64_text(2.5), "2.5");
        assert_eq!(f64_text(0.1), "0.1");
        assert_eq!(f64_text(f64::from(0.1f32)), "0.1");
    }

    #[test]
    fn a_dataset_path_that_is_not_utf8_is_an_error() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let bad = dir.path().join(std::ffi::OsStr::from_bytes(b"ds\xff"));
        let scene = Scene::for_dataset(DatasetSpec::Path(bad));
        let e = scene_text(&scene, &[]).unwrap_err();
        assert!(e.to_string().contains("not UTF-8"), "{e}");
    }
}
