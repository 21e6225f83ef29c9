//! Looks chosen from a dataset's attribute names, grid classes and values, for datasets
//! imported from models (CM1, WRF) or other tools (Houdini, Blender), whose names are not
//! the built-in storm's.
//!
//! | attribute | kind | look |
//! | --- | --- | --- |
//! | `qc`, `qi`, `qs`, `QCLOUD`, `QICE`, `QSNOW` (cloud, ice, snow) | structure | the `cloud` preset: white, lit, shadowing |
//! | `qr`, `qg`, `qh`, `QRAIN`, `QGRAUP`, `QHAIL` (rain, graupel, hail) | structure | the `rain` preset |
//! | `dbz`, `refl*`, `*reflectivity*` | structure | the NWS radar colours over 5–75 dBZ, glowing |
//! | `density`, `*density*`, `smoke`, `soot` | structure | the `smoke` preset: grey, lit, shadowing |
//! | `flame`, `fire`, `heat` | structure | the `flame` preset: a blackbody map, glowing |
//! | another fog volume that fills at most half its box | structure (only where no named one is) | the `smoke` preset |
//! | `*speed*`, `vel*`, `*_magnitude` with no negative value (a vector's length) | fills the domain | inferno from 0 (`wind_speed`) |
//! | `w`, `winterp`, `W` (vertical velocity) | fills the domain | the `vertical_velocity` preset, symmetric about 0 |
//! | other signed fields (`u`, `v`, `*pert`, WRF's `P`, `T`, any with values of both signs) | fills the domain | coolwarm, symmetric about 0 |
//! | level sets (grid class, or `phi*` as Mantaflow names them) | surface | an isosurface at 0, only where no structure is shown |
//!
//! Structure (hydrometeors, reflectivity, smoke, flame) is chosen before fields that fill the
//! domain (wind, pressure), one attribute of each kind first; a field that fills the domain
//! is shown off by default beside structure (the overlay switches it on), and on its own
//! only the first is shown. Attributes with data in the frames read come before those
//! without. Up to [`SUGGESTED_ATTRIBUTES`] are chosen.
//!
//! Ranges come from the percentiles of the active values of the frames read
//! ([`DataSample`]): `[0, p99]` for non-negative quantities (so a few extreme voxels do not
//! wash the rest out), symmetric `±max(|p1|, |p99|)` for signed ones; reflectivity keeps
//! 5–75 dBZ, the scale the radar colours mean. Without a sample, the manifest's range.

use std::path::Path;

use super::sample::{DataSample, ValueSummary};
use super::{SceneAttribute, SceneError};
use crate::dataset::{Attribute, Manifest};
use crate::format::GridClass;
use crate::render::{
    Camera, Colormap, MAX_ATTRIBUTES, MediumKind, Mode, RenderSettings, SUPPORTED_TYPES,
};

/// Most attributes a suggested scene shows (the renderer takes up to [`MAX_ATTRIBUTES`];
/// four keep the picture readable and the frame rate up).
pub const SUGGESTED_ATTRIBUTES: usize = 4;

/// Fraction of its box above which an unnamed fog volume counts as filling the domain.
const FILLS: f64 = 0.5;

/// What an attribute is, judged by its name, class and values; in the order chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Role {
    Cloud,
    Rain,
    Reflectivity,
    Smoke,
    Flame,
    /// A fog volume with another name that has structure (fills at most half its box).
    Fog,
    Speed,
    VerticalVelocity,
    Signed,
    LevelSet,
    /// Not shown by default (integers, vectors, flags, moisture and pressure that fill the
    /// domain without a look that reads).
    Skip,
}

impl Role {
    /// Hydrometeors, reflectivity, smoke, flame: what shows the structure.
    fn is_structure(self) -> bool {
        self <= Role::Fog
    }
    /// Wind, vertical velocity, signed perturbations: what fills the domain.
    fn fills_domain(self) -> bool {
        matches!(self, Role::Speed | Role::VerticalVelocity | Role::Signed)
    }
}

fn role(a: &Attribute, values: Option<&ValueSummary>) -> Role {
    if !SUPPORTED_TYPES.contains(&a.grid_type) {
        return Role::Skip;
    }
    let n = a.name.to_ascii_lowercase();
    // `density#1`: the second grid of that name in a file.
    let n = n.split('#').next().unwrap_or_default();
    let is = |names: &[&str]| names.contains(&n);
    let non_negative = values.is_none_or(ValueSummary::non_negative);
    let level_set = a.grid_class == GridClass::LevelSet || n.starts_with("phi");
    if helper(n) && !level_set {
        // A simulation's bookkeeping (where smoke flows in), not what it simulates.
        return Role::Skip;
    }
    let signed = values.is_some_and(|v| v.min < 0.0 && v.max > 0.0);
    if level_set {
        Role::LevelSet
    } else if n == "dbz" || n.starts_with("refl") || n.contains("reflectivity") {
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
    } else if n.contains("density") || is(&["smoke", "soot"]) {
        Role::Smoke
    } else if n.contains("flame") || is(&["fire", "heat"]) {
        Role::Flame
    } else if (n.contains("speed")
        || n.starts_with("vel")
        || n.ends_with("_magnitude")
        || n.ends_with("_length"))
        && non_negative
    {
        Role::Speed
    } else if is(&["w", "winterp", "vertical_velocity"]) {
        Role::VerticalVelocity
    } else if n.starts_with('u')
        || n.starts_with('v')
        || n.ends_with("pert")
        || is(&["p", "t"])
        || signed
    {
        Role::Signed
    } else if a.grid_class == GridClass::FogVolume
        && non_negative
        && values.is_some_and(|v| v.fill <= FILLS)
    {
        Role::Fog
    } else {
        Role::Skip
    }
}

/// Whether a lower-cased grid name is a simulation's bookkeeping rather than what it
/// simulates: Mantaflow's inflow, outflow and obstacle grids and the previous step's.
fn helper(n: &str) -> bool {
    ["inflow", "obstacle", "outflow", "previous", "guiding"]
        .iter()
        .any(|h| n.contains(h))
        || n.ends_with("_out")
}

/// Which level set to show first (lower first): the surface itself (`phi`, `surface`,
/// `sdf`), then others, then bookkeeping ([`helper`]: obstacles, inflow, outflow).
fn level_set_rank(name: &str) -> u8 {
    let n = name.to_ascii_lowercase();
    if ["phi", "surface", "sdf", "levelset", "level_set"].contains(&n.as_str()) {
        0
    } else if helper(&n) {
        2
    } else {
        1
    }
}

/// `[0, p99]` of a non-negative attribute (its largest value where p99 is 0), the manifest's
/// range from 0 without values.
fn from_zero(a: &Attribute, values: Option<&ValueSummary>) -> Option<[f32; 2]> {
    match values {
        Some(v) if v.non_negative() => {
            let hi = if v.p99() > 0.0 { v.p99() } else { v.max };
            (hi > 0.0 && hi.is_finite()).then_some([0.0, hi])
        }
        Some(v) => (v.p99() > v.p01()).then_some([v.p01(), v.p99()]),
        None => a
            .value_range
            .map(|r| [0.0f32.min(r[0] as f32), r[1] as f32])
            .filter(|r| r[1] > r[0]),
    }
}

/// A range symmetric about zero: `±max(|p1|, |p99|)`, or the manifest's range's largest
/// magnitude without values.
fn symmetric(a: &Attribute, values: Option<&ValueSummary>) -> Option<[f32; 2]> {
    let m = match values {
        Some(v) => v.p01().abs().max(v.p99().abs()),
        None => {
            let r = a.value_range?;
            r[0].abs().max(r[1].abs()) as f32
        }
    };
    (m > 0.0 && m.is_finite()).then_some([-m, m])
}

fn look(a: &Attribute, role: Role, values: Option<&ValueSummary>) -> SceneAttribute {
    let mut s = SceneAttribute::named(a.name.clone());
    let preset = |p: &str| Some(p.to_string());
    match role {
        Role::Cloud => {
            s.preset = preset("cloud");
            s.range = from_zero(a, values);
        }
        Role::Rain => {
            s.preset = preset("rain");
            s.range = from_zero(a, values);
        }
        Role::Reflectivity => {
            s.preset = preset("reflectivity");
            s.range = Some([5.0, 75.0]);
        }
        Role::Smoke | Role::Fog => {
            s.preset = preset("smoke");
            s.range = from_zero(a, values);
        }
        Role::Flame => {
            s.preset = preset("flame");
            s.range = from_zero(a, values);
        }
        Role::Speed => {
            s.preset = preset("wind_speed");
            s.range = from_zero(a, values);
        }
        Role::VerticalVelocity => {
            s.preset = preset("vertical_velocity");
            s.range = symmetric(a, values);
        }
        Role::Signed => {
            s.colormap = Some(Colormap::Named("coolwarm".into()));
            s.range = symmetric(a, values);
            s.opacity = Some(vec![(0.0, 0.8), (0.4, 0.0), (0.6, 0.0), (1.0, 0.8)]);
        }
        Role::LevelSet => {
            // The isosurface takes its colour at the iso value 0: the middle of a range
            // symmetric about 0, a light blue.
            s.colormap = Some(Colormap::Named("ice".into()));
            s.range = symmetric(a, values);
        }
        Role::Skip => {}
    }
    s
}

/// The attributes to show and their looks, chosen by name, class and the values in `sample`
/// (see the module documentation; [`DataSample::none`] for names and the manifest alone);
/// empty where no attribute is recognised. Fields that fill the domain beside structure
/// with data come with `enabled = false`.
pub fn suggested_attributes(m: &Manifest, sample: &DataSample) -> Vec<SceneAttribute> {
    let summary = |i: usize| sample.summaries.get(i).and_then(Option::as_ref);
    let has_data =
        |i: usize| sample.frames_read == 0 || sample.first_data.get(i).copied().flatten().is_some();
    let mut ranked: Vec<(bool, Role, usize)> = m
        .attributes
        .iter()
        .enumerate()
        .map(|(i, a)| (!has_data(i), role(a, summary(i)), i))
        .filter(|(_, r, _)| *r != Role::Skip)
        .collect();
    ranked.sort_by_key(|&(empty, r, i)| (empty, r, i));
    let named_structure = ranked
        .iter()
        .any(|(_, r, _)| r.is_structure() && *r != Role::Fog);
    ranked.retain(|(_, r, _)| !(named_structure && *r == Role::Fog));
    let structure = ranked.iter().any(|(_, r, _)| r.is_structure());
    // A field is switched off beside structure that shows something: a dry run's (CM1's
    // warm bubble) hydrometeors are empty in every frame read, and its temperature
    // perturbation is then the picture.
    let structure_with_data = ranked
        .iter()
        .any(|(empty, r, _)| !*empty && r.is_structure());
    let mut chosen: Vec<(Role, usize)> = Vec::new();
    let full = |c: &Vec<(Role, usize)>| c.len() == SUGGESTED_ATTRIBUTES;
    let take = |c: &mut Vec<(Role, usize)>, r: Role, i: usize| {
        if c.len() < SUGGESTED_ATTRIBUTES && !c.iter().any(|&(_, j)| j == i) {
            c.push((r, i));
        }
    };
    // One of each kind of structure; then the first field that fills the domain (off
    // where there is structure); then more structure (other hydrometeors).
    for &(_, r, i) in &ranked {
        if r.is_structure() && !chosen.iter().any(|(c, _)| *c == r) {
            take(&mut chosen, r, i);
        }
    }
    if let Some(&(_, r, i)) = ranked.iter().find(|(_, r, _)| r.fills_domain()) {
        take(&mut chosen, r, i);
    }
    for &(_, r, i) in &ranked {
        if r.is_structure() && !full(&chosen) {
            take(&mut chosen, r, i);
        }
    }
    // Level sets only where no structure is shown: one isosurface at 0.
    let surface = ranked
        .iter()
        .filter(|(_, r, _)| *r == Role::LevelSet)
        .min_by_key(|&&(empty, _, i)| (empty, level_set_rank(&m.attributes[i].name), i));
    if !structure && let Some(&(_, r, i)) = surface {
        chosen.insert(0, (r, i));
        chosen.truncate(SUGGESTED_ATTRIBUTES);
    }
    chosen
        .into_iter()
        .map(|(r, i)| {
            let mut s = look(&m.attributes[i], r, summary(i));
            if r.fills_domain() && structure_with_data {
                s.enabled = Some(false);
            }
            s
        })
        .collect()
}

/// The mean transmittance each slot alone is calibrated to ([`super::calibrate`]): thin
/// for fields that fill the domain, half for the rest; none for level sets (an
/// isosurface has no opacity to set).
pub(crate) fn calibration_targets(
    m: &Manifest,
    sample: &DataSample,
    attributes: &[SceneAttribute],
) -> Vec<Option<f32>> {
    attributes
        .iter()
        .map(|a| {
            let i = m.attribute_index(&a.name)?;
            let values = sample.summaries.get(i).and_then(Option::as_ref);
            let r = role(&m.attributes[i], values);
            match r {
                Role::LevelSet | Role::Skip => None,
                _ if r.fills_domain() || a.enabled == Some(false) => {
                    Some(super::calibrate::TARGET_THIN)
                }
                _ => Some(super::calibrate::TARGET_SHOWN),
            }
        })
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
            .is_some_and(|i| role(&m.attributes[i], None) == Role::LevelSet)
    });
    if let Some(slot) = level_set {
        s.mode = Mode::Isosurface;
        s.iso_attribute = slot;
        s.iso_value = 0.0;
    }
    s
}

/// The attributes the camera frames: the structure shown (cloud, rain, reflectivity, smoke,
/// flame) where the scene shows any, else all it shows (None).
fn suggested_fit(
    m: &Manifest,
    sample: &DataSample,
    attributes: &[SceneAttribute],
) -> Option<Vec<String>> {
    let body: Vec<String> = attributes
        .iter()
        .filter(|a| a.enabled != Some(false))
        .filter(|a| {
            m.attribute_index(&a.name).is_some_and(|i| {
                let values = sample.summaries.get(i).and_then(Option::as_ref);
                role(&m.attributes[i], values).is_structure()
            })
        })
        .map(|a| a.name.clone())
        .collect();
    (!body.is_empty() && body.len() < attributes.len()).then_some(body)
}

/// `s` as a one-line TOML basic string: quoted, with quotes, backslashes and control
/// characters (newlines too) escaped, so no name from a file can end the string or the
/// line. (The `toml` crate writes a string holding a newline as a multi-line string, which
/// in a comment would end the comment.)
pub(super) fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `v` as a TOML float: always with a fraction or an exponent (`1.0`, `3e38`), never
/// the 39-digit integer `{}` prints for 3e38, which TOML reads as an integer out of range.
/// Non-finite values are written as TOML's `nan` and `inf`, which validation then refuses
/// naming the field. The text reads back as `v` bit for bit: TOML readers parse a float
/// as f64 and the scene narrows it to f32, and where that double rounding would land on
/// another f32 than the shortest text's, the f64 that is `v` exactly is written instead.
pub(super) fn toml_float(v: f32) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 { "inf" } else { "-inf" }.into()
    } else {
        // Debug prints the shortest text that reads back as `v`, with `.0` or an exponent.
        let short = format!("{v:?}");
        let read_back = short.parse::<f64>().map(|x| x as f32);
        if read_back.is_ok_and(|r| r.to_bits() == v.to_bits()) {
            short
        } else {
            format!("{:?}", f64::from(v))
        }
    }
}

/// Text from a file (names, notes that quote them) made safe for a `#` comment or a
/// terminal: control characters, a newline above all, are written escaped (`\n`), so a
/// comment cannot end early and what follows cannot become a key or a table, and no escape
/// sequence reaches a terminal.
pub(super) fn printable(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn pairs(v: &[(f32, f32)]) -> String {
    let items: Vec<String> = v
        .iter()
        .map(|(a, b)| format!("[{}, {}]", toml_float(*a), toml_float(*b)))
        .collect();
    format!("[{}]", items.join(", "))
}

/// Looks suggested from a dataset's data: what [`super::Scene::open`] shows for a dataset
/// without a scene, and what `supercell-data import --scene` writes.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    /// The attributes shown, in slot order, with their looks; `extinction_scale` is set
    /// where the opacity was calibrated ([`super::calibrate`]).
    pub attributes: Vec<SceneAttribute>,
    /// What reading the first frames found.
    pub sample: DataSample,
    /// The first frame where an enabled attribute has data: where playback starts (0 where
    /// none has data in the frames read).
    pub start_frame: usize,
    /// The mean transmittance of the enabled attributes together along the first view's
    /// rays that meet them, after calibration (None: not calibrated).
    pub mean_transmittance: Option<f32>,
    /// What to tell the user: attributes with no data in frame 0 and where their data
    /// starts, and the frame shown first.
    pub notes: Vec<String>,
    /// World box of the data of the attributes the camera frames, in the frames read
    /// ([`ValueSummary::data_box`]); None where unknown (the manifest's boxes are framed).
    pub fit_box: Option<[[f32; 3]; 2]>,
    /// The camera that frames `fit_box` for the aspect the scene was opened at (None: the
    /// scene's own fit).
    pub camera: Option<Camera>,
}

/// World box of the data of the attributes the camera frames (the structure shown, else the
/// level set drawn as an isosurface, else every attribute shown), from `sample`.
pub(crate) fn data_fit_box(
    m: &Manifest,
    sample: &DataSample,
    attributes: &[SceneAttribute],
) -> Option<[[f32; 3]; 2]> {
    let is_surface = |a: &SceneAttribute| {
        m.attribute_index(&a.name)
            .is_some_and(|i| role(&m.attributes[i], None) == Role::LevelSet)
    };
    let names: Vec<String> = suggested_fit(m, sample, attributes).unwrap_or_else(|| {
        // An isosurface is all that is drawn: frame it alone.
        let shown = attributes.iter().filter(|a| a.enabled != Some(false));
        match attributes.iter().find(|a| is_surface(a)) {
            Some(surface) => vec![surface.name.clone()],
            None => shown.map(|a| a.name.clone()).collect(),
        }
    });
    let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
    for n in &names {
        let b = m
            .attribute_index(n)
            .and_then(|i| sample.summaries.get(i)?.as_ref()?.data_box);
        if let Some([blo, bhi]) = b {
            for k in 0..3 {
                lo[k] = lo[k].min(blo[k] as f32);
                hi[k] = hi[k].max(bhi[k] as f32);
            }
        }
    }
    (0..3).all(|k| lo[k] <= hi[k]).then_some([lo, hi])
}

/// The frame to start at (the first where an enabled attribute of `attributes` has data)
/// and the notes that say which attributes are empty in frame 0 and where data starts.
pub(crate) fn start_and_notes(
    m: &Manifest,
    sample: &DataSample,
    attributes: &[SceneAttribute],
) -> (usize, Vec<String>) {
    if sample.frames_read == 0 {
        return (0, Vec::new());
    }
    let time = |f: usize| m.frames.get(f).map_or(0.0, |fr| fr.time);
    let first = |a: &SceneAttribute| {
        m.attribute_index(&a.name)
            .and_then(|i| sample.first_data.get(i).copied().flatten())
    };
    let start = attributes
        .iter()
        .filter(|a| a.enabled != Some(false))
        .filter_map(first)
        .min()
        .unwrap_or(0);
    let mut notes = Vec::new();
    for a in attributes {
        let name = printable(&a.name);
        match first(a) {
            Some(0) => {}
            Some(f) => notes.push(format!(
                "{name} is empty in frame 0 (t = {}); its data starts at frame {f} (t = {})",
                time(0),
                time(f)
            )),
            None if sample.frames_read >= m.frames.len() => {
                notes.push(format!("{name} is empty in every frame"));
            }
            None => notes.push(format!(
                "{name} is empty in frames 0 to {} (the frames read to choose the looks)",
                sample.frames_read - 1
            )),
        }
    }
    if start > 0 {
        notes.push(format!(
            "frame {start} (t = {}) is the first with data (where playback starts)",
            time(start)
        ));
    }
    (start, notes)
}

/// A scene file (the schema of `scenes/*.toml`) for the dataset at `dataset` with manifest
/// `m`, from `suggestion`: the attributes and looks, camera, settings and the frame to start
/// at, each field written out so that it can be edited, and the notes as comments. The
/// dataset is named by its absolute path where it can be resolved.
pub fn suggested_scene_toml(m: &Manifest, dataset: &Path, suggestion: &Suggestion) -> String {
    let dataset = dataset
        .canonicalize()
        .unwrap_or_else(|_| dataset.to_path_buf());
    let attributes = &suggestion.attributes;
    let settings = suggested_settings(m, attributes, &RenderSettings::default());
    let mut out = String::new();
    out.push_str(
        "# A scene written by `supercell-data import --scene`: looks chosen from the attributes'\n\
         # names and values (ranges from percentiles of the first frames' active values,\n\
         # opacity from the first view's transmittance). Every field can be edited;\n\
         # docs/SCENES.md lists them all.\n",
    );
    if let Some(t) = suggestion.mean_transmittance {
        out.push_str(&format!(
            "# Mean transmittance along the first view's rays that meet the data: {t:.2}.\n"
        ));
    }
    for n in &suggestion.notes {
        out.push_str(&format!("# Note: {}.\n", printable(n)));
    }
    out.push_str(&format!(
        "\ndataset = {}\n",
        toml_string(&dataset.to_string_lossy())
    ));
    let others: Vec<String> = m
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .filter(|n| !attributes.iter().any(|s| s.name == *n))
        .map(toml_string)
        .collect();
    if !others.is_empty() {
        out.push_str(&format!(
            "# Also in the dataset (up to {MAX_ATTRIBUTES} render at once): {}\n",
            others.join(", ")
        ));
    }
    for a in attributes {
        write_attribute(&mut out, a);
    }
    out.push_str("\n[camera]\n");
    if let Some(fit) = suggested_fit(m, &suggestion.sample, attributes) {
        let names: Vec<String> = fit.iter().map(|n| toml_string(n)).collect();
        out.push_str(&format!("fit = [{}]\n", names.join(", ")));
    }
    out.push_str("yaw_deg = -62.0              # azimuth, degrees counter-clockwise from +x\n");
    out.push_str("pitch_deg = 16.0             # elevation, -89..89\n");
    if let Some(c) = &suggestion.camera {
        // Where the data is in the frames read: a dense grid's active box can be far larger.
        let t = c.target;
        out.push_str(&format!(
            "target = [{}, {}, {}]  # the centre of the data's box\ndistance = {}\n",
            toml_float(t[0]),
            toml_float(t[1]),
            toml_float(t[2]),
            toml_float(c.distance)
        ));
    }
    out.push_str("\n[playback]\nmode = \"loop\"\n");
    if suggestion.start_frame > 0 {
        out.push_str(&format!(
            "start_frame = {}              # the first frame with data\n",
            suggestion.start_frame
        ));
    }
    if settings.mode == Mode::Isosurface {
        out.push_str(&format!(
            "\n[settings]\nmode = \"iso\"\niso_attribute = {}\niso_value = {}\n",
            settings.iso_attribute,
            toml_float(settings.iso_value)
        ));
    }
    out
}

/// [`suggested_scene_toml`], read back and validated as the player reads `scene_file`: the
/// text, or the error the player would give (naming `scene_file`, line and field), so that
/// a scene is never reported written that does not load, or loads other attributes than
/// were written. A dataset path that is not UTF-8 cannot be written in TOML: an error too.
pub fn checked_scene_toml(
    m: &Manifest,
    dataset: &Path,
    suggestion: &Suggestion,
    scene_file: &Path,
) -> Result<String, SceneError> {
    let resolved = dataset
        .canonicalize()
        .unwrap_or_else(|_| dataset.to_path_buf());
    if resolved.to_str().is_none() {
        return Err(SceneError::new(
            scene_file,
            format!(
                "the dataset path {} is not UTF-8, which a scene file (TOML) cannot name: \
                 play the dataset directory itself, or move it to a UTF-8 path",
                resolved.display()
            ),
        ));
    }
    let text = suggested_scene_toml(m, dataset, suggestion);
    let scene = super::Scene::parse(&text, scene_file)?;
    let written: Vec<&str> = suggestion
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    let read: Vec<&str> = scene.attributes.iter().map(|a| a.name.as_str()).collect();
    let dataset_read = match &scene.dataset {
        super::DatasetSpec::Path(p) => Some(p.as_path()),
        super::DatasetSpec::Default => None,
    };
    if written != read || dataset_read != Some(resolved.as_path()) {
        return Err(SceneError::new(
            scene_file,
            format!(
                "the scene written reads back as another scene (attributes {read:?}, dataset \
                 {dataset_read:?}; written: {written:?}, {})",
                resolved.display()
            ),
        ));
    }
    Ok(text)
}

/// One `[[attribute]]` table, every field the suggestion set.
fn write_attribute(out: &mut String, a: &SceneAttribute) {
    out.push_str("\n[[attribute]]\n");
    out.push_str(&format!("name = {}\n", toml_string(&a.name)));
    if let Some(e) = a.enabled {
        let why = if e {
            ""
        } else {
            "  # fills the domain: switch it on in the overlay"
        };
        out.push_str(&format!("enabled = {e}{why}\n"));
    }
    if let Some(p) = &a.preset {
        out.push_str(&format!("preset = {}\n", toml_string(p)));
    }
    if let Some(r) = a.range {
        out.push_str(&format!(
            "range = [{}, {}]\n",
            toml_float(r[0]),
            toml_float(r[1])
        ));
    }
    match &a.colormap {
        Some(Colormap::Named(n)) => out.push_str(&format!("colormap = {}\n", toml_string(n))),
        Some(Colormap::Stops(stops)) => {
            let items: Vec<String> = stops
                .iter()
                .map(|(u, c)| {
                    let [r, g, b] = c.map(toml_float);
                    format!("[{}, [{r}, {g}, {b}]]", toml_float(*u))
                })
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
    if let Some(x) = a.extinction_scale {
        out.push_str(&format!(
            "extinction_scale = {}  # from the first view's transmittance\n",
            toml_float(x)
        ));
    }
    if let Some(e) = a.emission {
        out.push_str(&format!("emission = {}\n", toml_float(e)));
    }
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
            units: None,
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
            frame_count: 4,
            bricks: Vec::new(),
            frames: (0..4)
                .map(|i| crate::dataset::Frame {
                    time: 900.0 * f64::from(i),
                    slot_size: 0,
                    grids: Vec::new(),
                    extents: Vec::new(),
                })
                .collect(),
            path: Default::default(),
            retained_brick: None,
        }
    }

    fn values(min: f32, p99: f32, max: f32, fill: f64) -> ValueSummary {
        ValueSummary {
            active: 1000,
            fill,
            min,
            max,
            p: [min, min, 0.5 * (min + p99), p99, p99],
            data_box: None,
        }
    }

    /// A sample where attribute `i` has `summaries[i]` and data from frame `first[i]`.
    fn sample(summaries: Vec<Option<ValueSummary>>, first: Vec<Option<usize>>) -> DataSample {
        DataSample {
            summaries,
            first_data: first,
            frames_read: 3,
        }
    }

    fn names(s: &[SceneAttribute]) -> Vec<&str> {
        s.iter().map(|a| a.name.as_str()).collect()
    }

    #[test]
    fn cm1_structure_comes_first_and_wind_speed_is_off() {
        let fog = GridClass::FogVolume;
        let m = manifest(vec![
            attr("thpert", GridClass::Unknown, [-3.0, 2.0]),
            attr("wind_speed", fog, [5.0, 60.0]),
            attr("qr", fog, [1e-5, 8e-3]),
            attr("dbz", fog, [-37.0, 66.0]),
            attr("qc", fog, [1e-5, 3e-3]),
            attr("winterp", GridClass::Unknown, [-20.0, 45.0]),
            attr("prs", fog, [8e3, 9.7e4]),
            attr("qv", fog, [2e-5, 1.4e-2]),
        ]);
        let smp = sample(
            vec![
                Some(values(-3.0, 1.5, 2.0, 1.0)),
                Some(values(0.5, 30.0, 60.0, 0.95)),
                Some(values(1e-7, 4e-3, 8e-3, 0.05)),
                Some(values(-37.0, 45.0, 66.0, 1.0)),
                Some(values(1e-6, 2e-3, 3e-3, 0.04)),
                Some(values(-7.0, 5.6, 27.0, 1.0)),
                Some(values(8e3, 9.7e4, 9.7e4, 1.0)),
                Some(values(2e-5, 1.4e-2, 1.4e-2, 1.0)),
            ],
            vec![
                Some(0),
                Some(0),
                Some(1),
                Some(1),
                Some(1),
                Some(0),
                Some(0),
                Some(0),
            ],
        );
        let s = suggested_attributes(&m, &smp);
        assert_eq!(names(&s), ["qc", "qr", "dbz", "wind_speed"]);
        assert_eq!(s[0].preset.as_deref(), Some("cloud"));
        assert_eq!(
            s[0].range,
            Some([0.0, 2e-3]),
            "[0, p99], not the largest value"
        );
        assert_eq!(s[1].range, Some([0.0, 4e-3]));
        assert_eq!(s[2].preset.as_deref(), Some("reflectivity"));
        assert_eq!(
            s[2].range,
            Some([5.0, 75.0]),
            "the radar scale, whatever the data"
        );
        assert_eq!(s[3].preset.as_deref(), Some("wind_speed"));
        assert_eq!(s[3].range, Some([0.0, 30.0]), "a length from 0 to its p99");
        assert_eq!(
            s[3].enabled,
            Some(false),
            "fills the domain beside structure: off"
        );
        assert!(s[..3].iter().all(|a| a.enabled.is_none()));
        // Where it starts: the first frame with data of an enabled attribute.
        let (start, notes) = start_and_notes(&m, &smp, &s);
        assert_eq!(start, 1);
        assert!(notes[0].starts_with("qc is empty in frame 0"), "{notes:?}");
        assert!(notes[0].contains("starts at frame 1"), "{notes:?}");
        assert!(
            notes
                .last()
                .unwrap()
                .starts_with("frame 1 (t = 900) is the first with data")
        );
    }

    #[test]
    fn a_dry_run_shows_its_field_when_its_hydrometeors_are_empty() {
        // CM1's warm bubble at t = 0: qc and qr exist but hold nothing; th_pert is the bubble.
        let m = manifest(vec![
            attr("qc", GridClass::FogVolume, [0.0, 0.0]),
            attr("qr", GridClass::FogVolume, [0.0, 0.0]),
            attr("th_pert", GridClass::Unknown, [-0.5, 2.0]),
        ]);
        let smp = sample(
            vec![None, None, Some(values(0.2, 1.8, 2.0, 0.0))],
            vec![None, None, Some(0)],
        );
        let s = suggested_attributes(&m, &smp);
        let th = s
            .iter()
            .find(|a| a.name == "th_pert")
            .expect("th_pert shown");
        assert_eq!(th.enabled, None, "the only data there is: on");
    }

    #[test]
    fn without_structure_one_field_is_shown_and_signed_ones_are_symmetric() {
        let m = manifest(vec![
            attr("W", GridClass::Unknown, [-20.0, 45.0]),
            attr("U", GridClass::Unknown, [-30.0, 10.0]),
        ]);
        let smp = sample(
            vec![
                Some(values(-20.0, 30.0, 45.0, 1.0)),
                Some(values(-25.0, 8.0, 10.0, 1.0)),
            ],
            vec![Some(0), Some(0)],
        );
        let s = suggested_attributes(&m, &smp);
        assert_eq!(names(&s), ["W"]);
        assert_eq!(s[0].range, Some([-30.0, 30.0]), "±max(|p1|, |p99|)");
        assert_eq!(s[0].enabled, None, "nothing else to show: on");
    }

    #[test]
    fn mantaflow_shows_density_and_flame_not_level_sets() {
        let fog = GridClass::FogVolume;
        let mut flags = attr("flags", fog, [0.0, 4.0]);
        flags.grid_type = GridType::Int32;
        let m = manifest(vec![
            attr("phi_obstacle", GridClass::LevelSet, [-3.0, 3.0]),
            attr("phi", GridClass::Unknown, [-3.0, 3.0]),
            flags,
            attr("vel", fog, [0.0, 4.0]),
            attr("flame", fog, [0.0, 1.0]),
            attr("density", fog, [0.0, 1.2]),
            attr("temperature", fog, [0.0, 3.0]),
        ]);
        let smp = sample(
            vec![
                Some(values(-3.0, 2.0, 3.0, 1.0)),
                Some(values(-3.0, 2.0, 3.0, 1.0)),
                None,
                Some(values(0.0, 3.0, 4.0, 0.3)),
                Some(values(0.01, 0.8, 1.0, 0.02)),
                Some(values(0.01, 1.0, 1.2, 0.1)),
                Some(values(0.01, 2.0, 3.0, 0.1)),
            ],
            vec![Some(0); 7],
        );
        let s = suggested_attributes(&m, &smp);
        assert_eq!(names(&s), ["density", "flame", "vel"]);
        assert_eq!(s[0].preset.as_deref(), Some("smoke"));
        assert_eq!(
            s[1].preset.as_deref(),
            Some("flame"),
            "fire in a blackbody map"
        );
        assert_eq!(
            s[2].preset.as_deref(),
            Some("wind_speed"),
            "a length: sequential"
        );
        assert_eq!(s[2].range, Some([0.0, 3.0]));
        let settings = suggested_settings(&m, &s, &RenderSettings::default());
        assert_eq!(
            settings.mode,
            Mode::Shaded,
            "no isosurface beside a fog volume"
        );
    }

    #[test]
    fn a_liquid_shows_its_surface_not_its_obstacle_or_inflow() {
        let ls = GridClass::LevelSet;
        let m = manifest(vec![
            attr("velocity", GridClass::Unknown, [0.2, 0.3]),
            attr("phi_obstacle", ls, [-0.5, 10.5]),
            attr("phi_inflow", ls, [-2.6, 1e4]),
            attr("phi", ls, [-2.5, 5.0]),
            attr("density_inflow", GridClass::FogVolume, [0.0, 1.0]),
        ]);
        let s = suggested_attributes(&m, &DataSample::none(5));
        assert_eq!(names(&s), ["phi", "velocity"], "no inflow grid is smoke");
        assert_eq!(s[0].colormap, Some(Colormap::Named("ice".into())));
        assert_eq!(
            s[0].range,
            Some([-5.0, 5.0]),
            "0, the surface, is mid-range"
        );
        let settings = suggested_settings(&m, &s, &RenderSettings::default());
        assert_eq!(
            (settings.mode, settings.iso_attribute),
            (Mode::Isosurface, 0)
        );
    }

    #[test]
    fn level_sets_are_isosurfaces_only_without_fog() {
        let m = manifest(vec![
            attr("W", GridClass::Unknown, [-20.0, 45.0]),
            attr("surface", GridClass::LevelSet, [-3.0, 3.0]),
        ]);
        let s = suggested_attributes(&m, &DataSample::none(2));
        assert_eq!(s[0].name, "surface");
        assert_eq!(
            s[1].range,
            Some([-45.0, 45.0]),
            "no data: the manifest's range"
        );
        let settings = suggested_settings(&m, &s, &RenderSettings::default());
        assert_eq!(settings.mode, Mode::Isosurface);
        assert_eq!(settings.iso_attribute, 0);
    }

    #[test]
    fn a_vector_length_is_sequential_and_a_signed_component_is_not() {
        let m = manifest(vec![attr("velocity", GridClass::FogVolume, [0.0, 9.0])]);
        let length = sample(vec![Some(values(0.0, 8.0, 9.0, 1.0))], vec![Some(0)]);
        let s = suggested_attributes(&m, &length);
        assert_eq!(s[0].preset.as_deref(), Some("wind_speed"));
        assert_eq!(s[0].range, Some([0.0, 8.0]));
        assert!(
            s[0].colormap.is_none(),
            "the preset's inferno, never coolwarm"
        );
        let component = sample(vec![Some(values(-4.0, 8.0, 9.0, 1.0))], vec![Some(0)]);
        let s = suggested_attributes(&m, &component);
        assert_eq!(s[0].colormap, Some(Colormap::Named("coolwarm".into())));
        assert_eq!(s[0].range, Some([-8.0, 8.0]));
    }

    #[test]
    fn attributes_with_data_come_before_empty_ones() {
        let fog = GridClass::FogVolume;
        let m = manifest(vec![
            attr("density", fog, [0.0, 1.0]),
            attr("density#1", fog, [0.0, 1.0]),
        ]);
        let smp = sample(
            vec![None, Some(values(0.0, 1.0, 1.0, 0.1))],
            vec![None, Some(0)],
        );
        let s = suggested_attributes(&m, &smp);
        assert_eq!(names(&s), ["density#1", "density"]);
        let (start, notes) = start_and_notes(&m, &smp, &s);
        assert_eq!(start, 0);
        assert_eq!(
            notes,
            ["density is empty in frames 0 to 2 (the frames read to choose the looks)"]
        );
    }

    /// A suggestion showing `shown` (with `range`), with a note quoting `hidden`.
    fn written(shown: &str, range: [f32; 2], hidden: &str) -> (Manifest, Suggestion) {
        let fog = GridClass::FogVolume;
        let m = manifest(vec![
            attr(shown, fog, [0.0, 1.0]),
            attr(hidden, fog, [0.0, 1.0]),
        ]);
        let mut a = SceneAttribute::named(shown);
        a.range = Some(range);
        a.opacity = Some(vec![(0.0, 0.0), (1.0, 0.5)]);
        a.extinction_scale = Some(3.5e-7);
        let suggestion = Suggestion {
            attributes: vec![a],
            sample: DataSample::none(2),
            start_frame: 0,
            mean_transmittance: None,
            notes: vec![format!("{hidden} is empty in every frame")],
            fit_box: None,
            camera: None,
        };
        (m, suggestion)
    }

    /// Names from a file cannot inject keys or tables through the comments, and huge
    /// values are written as TOML floats that read back as written.
    #[test]
    fn names_are_escaped_and_values_are_floats() {
        let dir = tempfile::tempdir().unwrap();
        let scene_file = dir.path().join("s.toml");
        for hidden in [
            "a\nexposure = 99\n[x]",
            "b\n[settings]\nexposure = 99\n",
            "c\r\n[[attribute]]\nname = \"evil\"",
        ] {
            let (m, sug) = written("cloud\n[x]\"", [0.0, 3e38], hidden);
            let text = checked_scene_toml(&m, dir.path(), &sug, &scene_file)
                .unwrap_or_else(|e| panic!("{e}\n{}", suggested_scene_toml(&m, dir.path(), &sug)));
            let scene = super::super::Scene::parse(&text, &scene_file).unwrap();
            assert_eq!(scene.settings.exposure, RenderSettings::default().exposure);
            assert_eq!(scene.attributes.len(), 1, "{text}");
            assert_eq!(scene.attributes[0].name, "cloud\n[x]\"");
            assert_eq!(scene.attributes[0].range, Some([0.0, 3e38]), "{text}");
            assert_eq!(scene.attributes[0].extinction_scale, Some(3.5e-7));
            assert!(text.contains("range = [0.0, 3e38]"), "{text}");
            // Every line outside strings is a comment, a key or a table header of the
            // writer's own.
            for line in text.lines() {
                assert!(
                    !line.starts_with("exposure") && !line.starts_with("[x]"),
                    "{text}"
                );
            }
        }
    }

    /// A scene that would not load is an error naming the field, not a file written.
    #[test]
    fn a_scene_that_does_not_validate_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let scene_file = dir.path().join("s.toml");
        let (m, sug) = written("cloud", [-3e38, 3e38], "rain");
        let e = checked_scene_toml(&m, dir.path(), &sug, &scene_file).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("attribute[0].range"), "{e}");
        let (m, sug) = written("cloud", [0.0, f32::INFINITY], "rain");
        let e = checked_scene_toml(&m, dir.path(), &sug, &scene_file).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("attribute[0].range"), "{e}");
    }

    #[test]
    fn a_dataset_path_that_is_not_utf8_is_an_error() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let ds = dir.path().join(std::ffi::OsStr::from_bytes(b"storm\xff"));
        std::fs::create_dir(&ds).unwrap();
        let (m, sug) = written("cloud", [0.0, 1.0], "rain");
        let e = checked_scene_toml(&m, &ds, &sug, &dir.path().join("s.toml")).unwrap_err();
        assert!(e.to_string().contains("is not UTF-8"), "{e}");
    }
}
