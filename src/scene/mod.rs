//! Scenes: a dataset and how to show it — attributes and their transfer functions, camera
//! and camera path, render settings, playback and overlay defaults — from a TOML file
//! (`scenes/*.toml`, format in `docs/SCENES.md`) or from a dataset directory alone.
//!
//! - [`Scene::load`] reads and validates a scene file (or makes the default scene of a
//!   dataset directory); [`Scene::builtin`] is the shipped storm scene (`scenes/storm.toml`)
//!   on the built-in dataset.
//! - [`Scene::open`] opens the dataset, maps attributes to render slots and builds the
//!   renderer's [`View`] ([`LoadedScene`]).
//! - [`CameraPath::at`] animates the camera relative to the scene's fitted camera.
//!
//! Every problem is a [`SceneError`] naming the file, line, column and field path.
//!
//! ```toml
//! dataset = "../storm"            # relative to the scene file; absent: the built-in dataset
//! [[attribute]]
//! name = "cloud"                  # preset look by name; every field below is optional
//! [[attribute]]
//! name = "wind_speed"
//! colormap = "inferno"
//! opacity = [[0.4, 0.0], [1.0, 1.0]]
//! [camera]
//! yaw_deg = -50.0
//! [settings]
//! sun_elevation_deg = 35.0
//! ```

mod cache;
mod calibrate;
mod camera_path;
mod error;
mod framing;
mod sample;
mod spelling;
mod suggest;
mod validate;
mod write;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

pub use cache::{DEFAULT_DATASET_NAME, default_dataset_dir, ensure_default_dataset};
pub use calibrate::{BAND, TARGET_SHOWN, TARGET_THIN};
pub use camera_path::{CameraKey, CameraPath};
pub use error::SceneError;
use error::{Seg, Source, plain_message, resolve_relative};
pub use framing::Framing;
pub use sample::{DataSample, SAMPLE_BUDGET_BYTES, ValueSummary, sample_dataset};
pub use suggest::{
    Suggestion, checked_scene_toml, suggested_attributes, suggested_scene_toml, suggested_settings,
};
pub use write::{checked_scene_text, scene_text};

use crate::dataset::{AlignedBuf, CrcCheck, Dataset, Manifest};
use crate::format::Grid;
use crate::pipeline::PlayMode;
use crate::render::{
    Albedo, AttributeView, Camera, Colormap, GridInParts, GridSlice, MAX_ATTRIBUTES, MediumKind,
    Mode, Projection, RenderError, RenderSettings, TransferFunction, View, smallest_voxel_edge,
};

/// Attributes shown by default, in slot order, where the dataset has them.
pub const DEFAULT_ATTRIBUTES: [&str; 3] = ["cloud", "rain", "wind_speed"];

/// The shipped storm scene, embedded: [`Scene::builtin`].
pub const BUILTIN_SCENE_TOML: &str = include_str!("../../scenes/storm.toml");

/// Name the built-in scene's errors are reported against.
pub const BUILTIN_SCENE_FILE: &str = "scenes/storm.toml";

/// Which dataset a scene shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DatasetSpec {
    /// A dataset directory (or its `manifest.json`).
    Path(PathBuf),
    /// The built-in default dataset, generated into the cache on first use
    /// ([`ensure_default_dataset`]; the binary resolves it to a path before it opens the
    /// scene, as only it knows the cache directory).
    Default,
}

impl DatasetSpec {
    /// The dataset's directory; for [`DatasetSpec::Default`] in `cache_base`
    /// ([`ensure_default_dataset`]), created first if missing (with a progress bar when
    /// `progress`).
    pub fn resolve(
        &self,
        cache_base: Option<&Path>,
        progress: bool,
    ) -> Result<PathBuf, SceneError> {
        match self {
            DatasetSpec::Path(p) => Ok(p.clone()),
            DatasetSpec::Default => ensure_default_dataset(cache_base, progress),
        }
    }
}

/// One attribute of a scene: a preset look (by name) with optional overrides.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneAttribute {
    /// Attribute (grid) name in the dataset.
    pub name: String,
    /// Shown (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Preset whose look to start from (default: the attribute's name; see
    /// [`TransferFunction::preset`]).
    #[serde(default)]
    pub preset: Option<String>,
    /// Value range mapped onto the colormap and opacity curve (default: the manifest's).
    #[serde(default)]
    pub range: Option<[f32; 2]>,
    /// Colormap name (one of [`Colormap::NAMES`]) or `[u, [r, g, b]]` stops.
    #[serde(default)]
    pub colormap: Option<Colormap>,
    /// Opacity curve: `[u, opacity]` points, ascending in `u`, opacity 0..1.
    #[serde(default)]
    pub opacity: Option<Vec<(f32, f32)>>,
    /// Scattering or emissive medium.
    #[serde(default)]
    pub kind: Option<MediumKind>,
    /// Multiplies the preset's extinction.
    #[serde(default)]
    pub extinction_scale: Option<f32>,
    /// Emission strength (emissive media).
    #[serde(default)]
    pub emission: Option<f32>,
    /// Whether it shadows other samples.
    #[serde(default)]
    pub casts_shadow: Option<bool>,
    /// The path tracer's single-scattering albedo (scattering media): one linear grey, or
    /// `[u, [r, g, b]]` stops in linear RGB; default: the colormap's colour.
    #[serde(default)]
    pub albedo: Option<Albedo>,
}

impl SceneAttribute {
    /// An attribute with the preset look of its name.
    pub fn named(name: impl Into<String>) -> SceneAttribute {
        SceneAttribute {
            name: name.into(),
            ..Default::default()
        }
    }
}

/// The scene's camera: fitted to the data, then adjusted. Every field is optional.
///
/// The camera is first fitted (with the given angles, field of view and projection) to the
/// union of the world boxes of the `fit` attributes; then `target`/`target_offset`,
/// `distance`/`distance_scale` and `ortho_height` apply. The result is also what
/// [`CameraPath`] keys are relative to.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CameraSpec {
    /// Attributes whose world boxes (over all frames) the camera frames (default: the
    /// enabled attributes shown).
    #[serde(default)]
    pub fit: Option<Vec<String>>,
    /// Azimuth of the eye, degrees counter-clockwise from +x (default −62).
    #[serde(default)]
    pub yaw_deg: Option<f32>,
    /// Elevation of the eye, degrees, −89..89 (default 16).
    #[serde(default)]
    pub pitch_deg: Option<f32>,
    /// Vertical field of view, degrees, 1..179 exclusive (default 35).
    #[serde(default)]
    pub fov_y_deg: Option<f32>,
    /// Perspective (default) or orthographic.
    #[serde(default)]
    pub projection: Option<Projection>,
    /// Point looked at, world units (default: the fitted box's centre).
    #[serde(default)]
    pub target: Option<[f32; 3]>,
    /// Added to the target, world units.
    #[serde(default)]
    pub target_offset: Option<[f32; 3]>,
    /// Distance from the target, world units (default: fitted).
    #[serde(default)]
    pub distance: Option<f32>,
    /// Multiplies the distance (and the orthographic height); < 1 is closer.
    #[serde(default)]
    pub distance_scale: Option<f32>,
    /// Height of the orthographic view, world units (default: fitted).
    #[serde(default)]
    pub ortho_height: Option<f32>,
}

impl CameraSpec {
    /// The camera for world box `bbox` (what `fit` selects) and image aspect `aspect`.
    pub fn resolve(&self, bbox: [[f32; 3]; 2], aspect: f32) -> Camera {
        let mut c = Camera::default();
        if let Some(v) = self.yaw_deg {
            c.yaw_deg = v;
        }
        if let Some(v) = self.pitch_deg {
            c.pitch_deg = v;
        }
        if let Some(v) = self.fov_y_deg {
            c.fov_y_deg = v;
        }
        if let Some(v) = self.projection {
            c.projection = v;
        }
        c.fit_to(bbox, aspect);
        if let Some(t) = self.target {
            c.target = t;
        }
        if let Some(o) = self.target_offset {
            c.target = [c.target[0] + o[0], c.target[1] + o[1], c.target[2] + o[2]];
        }
        if let Some(d) = self.distance {
            c.distance = d;
        }
        if let Some(h) = self.ortho_height {
            c.ortho_height = h;
        }
        if let Some(s) = self.distance_scale {
            c.distance *= s;
            c.ortho_height *= s;
        }
        c
    }
}

/// Serde mirror of [`PlayMode`]: `"loop"`, `"ping-pong"`, `"once"`, as `play --mode` spells
/// them (`"ping_pong"` is accepted with a warning: `spelling`).
#[derive(Serialize, Deserialize)]
#[serde(remote = "PlayMode", rename_all = "kebab-case")]
enum PlayModeDef {
    Loop,
    #[serde(alias = "ping_pong")]
    PingPong,
    Once,
}

/// How the player starts.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlaybackDefaults {
    /// Frames per second; 0 shows frames as fast as they arrive (default 24).
    pub fps: f64,
    /// `"loop"` (default), `"ping-pong"` or `"once"`.
    #[serde(with = "PlayModeDef")]
    pub mode: PlayMode,
    /// First frame shown (default 0).
    pub start_frame: u32,
    /// Start playing (default true) rather than paused.
    pub playing: bool,
    /// Start with the direct paths (GPUDirect Storage, CUDA↔Vulkan sharing) on (default
    /// true).
    pub direct: bool,
}

impl Default for PlaybackDefaults {
    fn default() -> Self {
        PlaybackDefaults {
            fps: 24.0,
            mode: PlayMode::Loop,
            start_frame: 0,
            playing: true,
            direct: true,
        }
    }
}

/// Longest span the overlay's plots can show, seconds: the statistics keep this much
/// history.
pub const MAX_PLOT_WINDOW_S: f64 = 60.0;

/// What the player's overlay shows at start.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OverlayOptions {
    /// Large figures for a trade-show floor (default false).
    pub large_print: bool,
    /// Frames/s and GB/s plots (default true).
    pub plots: bool,
    /// Time span of the plots, seconds, at most [`MAX_PLOT_WINDOW_S`] (default 30).
    pub plot_window_s: f64,
    /// Show the key help (default false).
    pub show_help: bool,
    /// `render` burns the legend (a colour bar per shown attribute with its name, unit and
    /// range) and the time into every image, as `render --annotate` does (default false).
    pub annotate: bool,
}

impl Default for OverlayOptions {
    fn default() -> Self {
        OverlayOptions {
            large_print: false,
            plots: true,
            plot_window_s: 30.0,
            show_help: false,
            annotate: false,
        }
    }
}

/// The `[camera_path]` table as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CameraPathFile {
    #[serde(default = "yes")]
    looped: bool,
    #[serde(default)]
    duration_s: Option<f64>,
    #[serde(default)]
    key: Vec<CameraKey>,
}

fn yes() -> bool {
    true
}

/// A scene file as written.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SceneFile {
    #[serde(default)]
    dataset: Option<PathBuf>,
    #[serde(default, rename = "attribute")]
    attributes: Vec<SceneAttribute>,
    #[serde(default)]
    camera: CameraSpec,
    #[serde(default)]
    camera_path: Option<CameraPathFile>,
    #[serde(default)]
    playback: PlaybackDefaults,
    #[serde(default)]
    overlay: OverlayOptions,
    #[serde(default)]
    settings: RenderSettings,
}

/// A validated scene: what to show and how.
#[derive(Clone, Debug, PartialEq)]
pub struct Scene {
    /// The scene file, or the dataset directory for a scene made from a dataset alone.
    pub source: PathBuf,
    /// The dataset (relative paths already resolved against the scene file's folder).
    pub dataset: DatasetSpec,
    /// Attributes in slot order (at most [`MAX_ATTRIBUTES`]); empty: [`DEFAULT_ATTRIBUTES`]
    /// that the dataset has.
    pub attributes: Vec<SceneAttribute>,
    /// Render settings.
    pub settings: RenderSettings,
    /// The camera (fitted to the data unless it says otherwise).
    pub camera: CameraSpec,
    /// Camera animation, relative to the scene's camera.
    pub camera_path: Option<CameraPath>,
    /// How playback starts.
    pub playback: PlaybackDefaults,
    /// What the overlay shows.
    pub overlay: OverlayOptions,
    /// Notes about the file that do not stop it loading, each located like an error: old
    /// spellings of values, with the spelling to write instead. [`Scene::load`] prints
    /// them to stderr.
    pub warnings: Vec<SceneError>,
    /// The file's text, to locate errors found when the dataset is opened.
    origin: Option<Arc<Source>>,
}

impl Scene {
    /// The default scene of a dataset: [`DEFAULT_ATTRIBUTES`] it has, fitted camera,
    /// default settings, playback and overlay, no camera path.
    pub fn for_dataset(dataset: DatasetSpec) -> Scene {
        let source = match &dataset {
            DatasetSpec::Path(p) => p.clone(),
            DatasetSpec::Default => PathBuf::from(DEFAULT_DATASET_NAME),
        };
        Scene {
            source,
            dataset,
            attributes: Vec::new(),
            settings: RenderSettings::default(),
            camera: CameraSpec::default(),
            camera_path: None,
            playback: PlaybackDefaults::default(),
            overlay: OverlayOptions::default(),
            warnings: Vec::new(),
            origin: None,
        }
    }

    /// Loads a scene file (`.toml`), or makes the default scene of a dataset directory (or
    /// of a `manifest.json`). The file is parsed and validated; the dataset is not opened
    /// (see [`Scene::open`]). Warnings ([`Scene::warnings`]) go to stderr.
    pub fn load(path: &Path) -> Result<Scene, SceneError> {
        let is_manifest = path.file_name().is_some_and(|n| n == "manifest.json");
        if path.is_dir() || is_manifest {
            return Ok(Scene::for_dataset(DatasetSpec::Path(path.to_path_buf())));
        }
        let text = std::fs::read_to_string(path).map_err(|e| {
            let what = if path.exists() {
                format!("cannot read the scene file: {e}")
            } else {
                "no such scene file or dataset directory".to_string()
            };
            SceneError::new(path, what)
        })?;
        let scene = Scene::parse(&text, path)?;
        for w in &scene.warnings {
            log::warn!("warning: {w}");
        }
        Ok(scene)
    }

    /// Parses and validates scene text as if read from `file` (relative dataset paths
    /// resolve against `file`'s folder; errors name `file`).
    pub fn parse(text: &str, file: &Path) -> Result<Scene, SceneError> {
        let src = Source {
            file: file.to_path_buf(),
            text: text.to_string(),
        };
        validate::array_lengths(&src)?;
        let raw: SceneFile = toml::from_str(text)
            .map_err(|e| src.error_at_span(e.span(), plain_message(e.message())))?;
        validate::scene_file(&raw, &src)?;
        let warnings = spelling::old_spellings(&src);
        let camera_path = match raw.camera_path {
            None => None,
            Some(p) => Some(
                CameraPath::new(p.key, p.looped, p.duration_s)
                    .map_err(|m| src.error_at_path(&[Seg::Key("camera_path".into())], m))?,
            ),
        };
        let dataset = match raw.dataset {
            Some(p) => DatasetSpec::Path(resolve_relative(file, &p)),
            None => DatasetSpec::Default,
        };
        Ok(Scene {
            source: file.to_path_buf(),
            dataset,
            attributes: raw.attributes,
            settings: raw.settings,
            camera: raw.camera,
            camera_path,
            playback: raw.playback,
            overlay: raw.overlay,
            warnings,
            origin: Some(Arc::new(src)),
        })
    }

    /// The shipped storm scene (`scenes/storm.toml`, embedded in the binary) on the
    /// built-in dataset.
    pub fn builtin() -> Scene {
        Scene::parse(BUILTIN_SCENE_TOML, Path::new(BUILTIN_SCENE_FILE))
            .expect("the shipped storm scene is valid (tested)")
    }

    /// An error about field `path` of this scene (located in its file when it has one).
    fn error(&self, path: &[Seg], message: impl Into<String>) -> SceneError {
        match &self.origin {
            Some(src) => src.error_at_path(path, message),
            None => {
                let mut e = SceneError::new(&self.source, message);
                e.field = Some(error::path_string(path));
                e
            }
        }
    }

    /// Opens the dataset (creating the built-in one if needed), maps the attributes (or
    /// `attributes_override`, names in slot order: each with the scene's look where the
    /// scene has it, else its name's preset) to render slots and builds the [`View`] for
    /// images of aspect `aspect` (width / height).
    pub fn open(
        &self,
        aspect: f32,
        attributes_override: Option<&[String]>,
    ) -> Result<LoadedScene, SceneError> {
        // The binary resolved a built-in dataset to its path already (the cache directory
        // is its to know); here one still unresolved has no directory.
        let dir = self.dataset.resolve(None, true)?;
        let dataset = Dataset::open(&dir).map_err(|e| {
            let msg = format!("cannot open the dataset {}: {e}", dir.display());
            if self.origin.is_some() && matches!(self.dataset, DatasetSpec::Path(_)) {
                self.error(&[Seg::Key("dataset".into())], msg)
            } else {
                SceneError::new(&dir, msg)
            }
        })?;
        let m = dataset.manifest();
        let from_cli = attributes_override.is_some();
        let mut suggestion = None;
        let attributes: Vec<SceneAttribute> = match attributes_override {
            // A name the scene has keeps the scene's look (shown: it was asked for).
            Some(names) => names
                .iter()
                .map(|n| match self.attributes.iter().find(|a| &a.name == n) {
                    Some(a) => SceneAttribute {
                        enabled: None,
                        ..a.clone()
                    },
                    None => SceneAttribute::named(n),
                })
                .collect(),
            None if self.attributes.is_empty() => match suggest_from_data(&dataset)? {
                Some(s) => {
                    let a = s.attributes.clone();
                    suggestion = Some(s);
                    a
                }
                None => default_attributes(m),
            },
            None => self.attributes.clone(),
        };
        let has = || {
            m.attributes
                .iter()
                .map(|a| a.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        if attributes.len() > MAX_ATTRIBUTES {
            return Err(SceneError::new(
                &self.source,
                format!(
                    "{} attributes requested (--attributes); at most {MAX_ATTRIBUTES} render at once",
                    attributes.len()
                ),
            ));
        }
        let mut slots = Vec::new();
        for (i, a) in attributes.iter().enumerate() {
            let Some(idx) = m.attribute_index(&a.name) else {
                let msg = format!(
                    "the dataset has no attribute {:?} (it has {})",
                    a.name,
                    has()
                );
                return Err(if from_cli {
                    let mut e = SceneError::new(&self.source, msg);
                    e.field = Some("--attributes".into());
                    e
                } else {
                    self.error(
                        &[
                            Seg::Key("attribute".into()),
                            Seg::Index(i),
                            Seg::Key("name".into()),
                        ],
                        msg,
                    )
                });
            };
            slots.push(Some(idx));
        }
        if let Some(fit) = &self.camera.fit {
            for (i, n) in fit.iter().enumerate() {
                if m.attribute_index(n).is_none() {
                    return Err(self.error(
                        &[
                            Seg::Key("camera".into()),
                            Seg::Key("fit".into()),
                            Seg::Index(i),
                        ],
                        format!("the dataset has no attribute {n:?} (it has {})", has()),
                    ));
                }
            }
        }
        // The isosurface of a slot that holds no attribute would be an empty picture.
        let iso = self.settings.iso_attribute;
        if self.settings.mode == Mode::Isosurface && iso >= attributes.len() {
            return Err(self.error(
                &[Seg::Key("settings".into()), Seg::Key("iso_attribute".into())],
                format!(
                    "iso_attribute {iso} is not an attribute slot of this scene, which renders {} attribute(s) (slots from 0)",
                    attributes.len()
                ),
            ));
        }
        let frames = m.frame_count();
        if self.playback.start_frame as usize >= frames.max(1) {
            return Err(self.error(
                &[Seg::Key("playback".into()), Seg::Key("start_frame".into())],
                format!(
                    "start_frame {} is past the dataset's last frame ({} frames)",
                    self.playback.start_frame, frames
                ),
            ));
        }
        let (mut view, mut fitted, mut fit_box) = build_view(m, &attributes, &slots, self, aspect);
        if let Some(s) = &mut suggestion
            && let Some(b) = s.fit_box
        {
            // The camera on where the data is, not on the active voxels' box.
            fitted = self.camera.resolve(b, aspect);
            view.camera = fitted;
            fit_box = b;
            s.camera = Some(fitted);
        }
        if self.attributes.is_empty() && !from_cli {
            // A dataset without a scene: an isosurface where a level set is shown.
            view.settings = suggested_settings(m, &attributes, &view.settings);
        }
        if let Some(s) = &mut suggestion {
            calibrate_suggestion(&dataset, &slots, &mut view, s, aspect)?;
        }
        // Calibrated looks: the suggestion's extinction scales are the ones the view has.
        let attributes = suggestion
            .as_ref()
            .map_or(attributes, |s| s.attributes.clone());
        Ok(LoadedScene {
            scene: self.clone(),
            attributes,
            suggestion,
            dataset,
            slots,
            view,
            fitted,
            framing: Framing::new(self.camera.clone(), fit_box, aspect),
            camera_path: self.camera_path.clone(),
        })
    }
}

/// The looks suggested from the data of `dataset` (a dataset opened without a scene): None
/// for the built-in storm's attributes (its own presets fit) or where no attribute is
/// recognised.
fn suggest_from_data(dataset: &Dataset) -> Result<Option<Suggestion>, SceneError> {
    let m = dataset.manifest();
    let storm_like = ["cloud", "rain"]
        .iter()
        .any(|n| m.attribute_index(n).is_some());
    if storm_like {
        return Ok(None);
    }
    let sample = sample_dataset(dataset, SAMPLE_BUDGET_BYTES)
        .map_err(|e| SceneError::new(m.path(), format!("reading frames to choose looks: {e}")))?;
    let attributes = suggested_attributes(m, &sample);
    if attributes.is_empty() {
        return Ok(None);
    }
    let (start_frame, notes) = suggest::start_and_notes(m, &sample, &attributes);
    let fit_box = suggest::data_fit_box(m, &sample, &attributes);
    Ok(Some(Suggestion {
        attributes,
        sample,
        start_frame,
        mean_transmittance: None,
        notes,
        fit_box,
        camera: None,
    }))
}

/// Sets the extinction of `s`'s attributes from the transmittance along the first view's
/// rays ([`calibrate`]): each alone on the first frame where it has data, then those shown
/// together on frame `s.start_frame`; in `view` and as each attribute's
/// `extinction_scale` (three significant digits, the same in both). Nothing is calibrated
/// for an isosurface, nor on a frame larger than [`SAMPLE_BUDGET_BYTES`].
fn calibrate_suggestion(
    dataset: &Dataset,
    slots: &[Option<usize>],
    view: &mut View,
    s: &mut Suggestion,
    aspect: f32,
) -> Result<(), SceneError> {
    if view.settings.mode != Mode::Shaded {
        return Ok(());
    }
    if !dataset.bricks().is_empty() {
        // Calibrating renders whole grids on the CPU; a bricked frame holds pieces.
        s.notes.push(
            "opacity not calibrated from the data: the dataset is split into bricks (a scene \
             file's looks, or the unbricked dataset's, apply as they are)"
                .into(),
        );
        return Ok(());
    }
    let m = dataset.manifest();
    let targets = suggest::calibration_targets(m, &s.sample, &s.attributes);
    let first_data =
        |slot: usize| slots[slot].and_then(|a| s.sample.first_data.get(a).copied().flatten());
    let mut scales = vec![1.0f32; slots.len()];
    let mut frames: Vec<usize> = (0..slots.len())
        .filter(|&i| targets.get(i).copied().flatten().is_some())
        .filter_map(first_data)
        .collect();
    frames.sort_unstable();
    frames.dedup();
    let mut buf = AlignedBuf::new();
    for frame in frames {
        let Some(grids) = frame_grids(dataset, slots, frame, &mut buf)? else {
            continue;
        };
        let refs: Vec<Option<&Grid<'_>>> = grids.iter().map(Option::as_ref).collect();
        for (slot, target) in targets.iter().enumerate() {
            if let Some(t) = target
                && first_data(slot) == Some(frame)
            {
                scales[slot] = calibrate::scale_alone(view, &refs, aspect, slot, *t);
            }
        }
    }
    if let Some(grids) = frame_grids(dataset, slots, s.start_frame, &mut buf)? {
        let refs: Vec<Option<&Grid<'_>>> = grids.iter().map(Option::as_ref).collect();
        for k in scales.iter_mut() {
            *k = round_significant(*k, 3);
        }
        s.mean_transmittance = calibrate::together(view, &refs, aspect, &mut scales);
    }
    for (i, &k) in scales.iter().enumerate() {
        let k = round_significant(k, 3);
        if k == 1.0 {
            continue;
        }
        if let Some(Some(a)) = view.attributes.get_mut(i) {
            a.tf.extinction *= k;
        }
        s.attributes[i].extinction_scale = Some(k);
    }
    Ok(())
}

/// The grids of frame `frame` in slot order, read into `buf` (None where the frame is larger
/// than [`SAMPLE_BUDGET_BYTES`] and is not read).
fn frame_grids<'b>(
    dataset: &Dataset,
    slots: &[Option<usize>],
    frame: usize,
    buf: &'b mut AlignedBuf,
) -> Result<Option<Vec<Option<Grid<'b>>>>, SceneError> {
    let m = dataset.manifest();
    if m.frames
        .get(frame)
        .is_none_or(|f| f.slot_size > SAMPLE_BUDGET_BYTES)
    {
        return Ok(None);
    }
    dataset
        .read_frame(frame, buf, CrcCheck::Skip)
        .map_err(|e| {
            SceneError::new(
                m.path(),
                format!("reading frame {frame} to set opacity: {e}"),
            )
        })?;
    let slot: &'b [u8] = buf;
    Ok(Some(
        slots
            .iter()
            .map(|a| {
                let bytes = dataset.grid_bytes(frame, (*a)?, slot).ok()?;
                Grid::parse(bytes).ok()
            })
            .collect(),
    ))
}

/// `x` rounded to `digits` significant decimal digits.
fn round_significant(x: f32, digits: i32) -> f32 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(digits - 1 - (x.abs() as f64).log10().floor() as i32);
    ((x as f64 * scale).round() / scale) as f32
}

/// Union of the world boxes of attributes `idx` (None when none has one).
fn union_bbox(m: &Manifest, idx: impl IntoIterator<Item = usize>) -> Option<[[f32; 3]; 2]> {
    let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
    for i in idx {
        if let Some(b) = m.attributes[i].world_bbox {
            for k in 0..3 {
                lo[k] = lo[k].min(b[0][k] as f32);
                hi[k] = hi[k].max(b[1][k] as f32);
            }
        }
    }
    (lo[0] <= hi[0] && lo[1] <= hi[1] && lo[2] <= hi[2]).then_some([lo, hi])
}

fn build_view(
    m: &Manifest,
    attributes: &[SceneAttribute],
    slots: &[Option<usize>],
    scene: &Scene,
    aspect: f32,
) -> (View, Camera, [[f32; 3]; 2]) {
    let all: Vec<usize> = slots.iter().flatten().copied().collect();
    let world = union_bbox(m, all.iter().copied()).unwrap_or([[0.0; 3], [1.0; 3]]);
    let [lo, hi] = world;
    // The base step follows the coarsest grid shown; the march refines it within the
    // bbox of each finer one (a nested grid), so a small fine grid does not slow the rest.
    // A grid's voxel unit is its smallest edge (`smallest_voxel_edge`): anisotropic voxels
    // are stepped at their thinnest axis, so a ray along it still samples every voxel.
    let mut voxel = f32::NEG_INFINITY;
    for &i in &all {
        if let Some(v) = m.attributes[i].voxel_size.and_then(smallest_voxel_edge) {
            voxel = voxel.max(v);
        }
    }
    let extent = (hi[0] - lo[0])
        .max(hi[1] - lo[1])
        .max(hi[2] - lo[2])
        .max(1e-6);
    if !voxel.is_finite() || voxel <= 0.0 {
        voxel = extent / 256.0;
    }
    let mut attrs = Vec::new();
    for (sa, idx) in attributes.iter().zip(slots) {
        let a = &m.attributes[idx.expect("every slot resolved")];
        let range = sa
            .range
            .or(a.value_range.map(|r| [r[0] as f32, r[1] as f32]))
            .unwrap_or([0.0, 1.0]);
        let preset = sa.preset.as_deref().unwrap_or(&sa.name);
        let mut tf = TransferFunction::preset(preset, range, extent);
        if let Some(c) = &sa.colormap {
            tf.colormap = c.clone();
        }
        if let Some(o) = &sa.opacity {
            tf.opacity = o.clone();
        }
        if let Some(k) = sa.kind {
            tf.kind = k;
        }
        if let Some(s) = sa.extinction_scale {
            tf.extinction *= s;
        }
        if let Some(e) = sa.emission {
            tf.emission = e;
        }
        if let Some(s) = sa.casts_shadow {
            tf.casts_shadow = s;
        }
        if let Some(a) = &sa.albedo {
            tf.albedo = Some(a.clone());
        }
        attrs.push(Some(AttributeView {
            enabled: sa.enabled.unwrap_or(true),
            tf,
        }));
    }
    let fit_idx: Vec<usize> = match &scene.camera.fit {
        Some(names) => names.iter().filter_map(|n| m.attribute_index(n)).collect(),
        None => attributes
            .iter()
            .zip(slots)
            .filter(|(a, _)| a.enabled.unwrap_or(true))
            .filter_map(|(_, s)| *s)
            .collect(),
    };
    let fit_box = union_bbox(m, fit_idx).unwrap_or(world);
    let fitted = scene.camera.resolve(fit_box, aspect);
    let mut view = View::new(world, voxel, attrs, aspect);
    view.settings = scene.settings.clone();
    view.camera = fitted;
    (view, fitted, fit_box)
}

/// [`DEFAULT_ATTRIBUTES`] the manifest has where it has the built-in storm's `cloud` or
/// `rain`; otherwise looks chosen from the attributes' names, classes and the manifest's
/// ranges ([`suggested_attributes`] without data: [`Scene::open`] reads the first frames
/// and chooses from their values instead) where any is recognised; else the
/// [`DEFAULT_ATTRIBUTES`] it has, or its first three attributes.
pub fn default_attributes(m: &Manifest) -> Vec<SceneAttribute> {
    let builtin: Vec<SceneAttribute> = DEFAULT_ATTRIBUTES
        .iter()
        .filter(|n| m.attribute_index(n).is_some())
        .map(|n| SceneAttribute::named(*n))
        .collect();
    let storm_like = ["cloud", "rain"]
        .iter()
        .any(|n| m.attribute_index(n).is_some());
    if storm_like {
        return builtin;
    }
    let suggested = suggested_attributes(m, &DataSample::none(m.attributes.len()));
    if !suggested.is_empty() {
        return suggested;
    }
    if !builtin.is_empty() {
        return builtin;
    }
    m.attributes
        .iter()
        .take(3)
        .map(|a| SceneAttribute::named(a.name.clone()))
        .collect()
}

/// A scene with its dataset open: which attribute goes to which slot, and the view.
pub struct LoadedScene {
    /// The scene opened (what a saved scene starts from).
    pub scene: Scene,
    /// The scene's attributes in slot order as opened: the file's, `--attributes`, the
    /// looks suggested from the data or the defaults.
    pub attributes: Vec<SceneAttribute>,
    /// The looks suggested from the data, for a dataset opened without a scene (None: a
    /// scene file, `--attributes`, the built-in storm's presets, or names not recognised).
    /// Its `notes` are for the user (empty attributes, the frame data starts at).
    pub suggestion: Option<Suggestion>,
    /// The dataset.
    pub dataset: Dataset,
    /// Manifest attribute index per render slot.
    pub slots: Vec<Option<usize>>,
    /// The view: attributes' transfer functions, settings, and the scene's camera.
    pub view: View,
    /// The scene's camera (fitted to the data, `[camera]` applied): what the camera path is
    /// relative to.
    pub fitted: Camera,
    /// The scene's camera fit and the user's framing across image aspects.
    pub framing: Framing,
    /// The scene's camera path.
    pub camera_path: Option<CameraPath>,
}

impl LoadedScene {
    /// Moves to images of aspect `aspect` (width / height): refits the scene's camera (and
    /// so its camera path) to the data at that aspect, and returns the camera to show
    /// instead of `current` (see [`Framing`]): the new scene camera while the user has not
    /// moved it, else what they framed, kept in sight.
    pub fn set_aspect(&mut self, aspect: f32, current: Camera) -> Camera {
        let Some(shown) = self.framing.set_aspect(aspect, current) else {
            return current;
        };
        self.fitted = self.framing.fitted();
        self.view.camera = self.fitted;
        shown
    }

    /// The camera at `time_s` seconds: the camera path's, or the scene's camera when it has
    /// no path.
    pub fn camera_at(&self, time_s: f64) -> Camera {
        match &self.camera_path {
            Some(p) => p.at(time_s, &self.fitted),
            None => self.fitted,
        }
    }

    /// Grid slices of frame `frame` in `buffer` (holding that frame's slot image), in slot
    /// order.
    pub fn grid_slices<'b>(
        &self,
        frame: usize,
        buffer: &'b wgpu::Buffer,
    ) -> Result<Vec<Option<GridSlice<'b>>>, RenderError> {
        let f = self.dataset.frame(frame).ok_or_else(|| {
            RenderError::Usage(format!(
                "frame {frame} does not exist (the dataset has {})",
                self.dataset.frame_count()
            ))
        })?;
        Ok(self
            .slots
            .iter()
            .map(|s| {
                let a = (*s)?;
                let g = f.grids.iter().find(|g| g.attribute as usize == a)?;
                Some(GridSlice {
                    buffer,
                    offset: g.offset,
                    size: g.size,
                })
            })
            .collect())
    }

    /// Where frame `frame`'s grids lie in a slot made of consecutive parts of `part_bytes`
    /// each ([`Renderer::set_frame`](crate::render::Renderer::set_frame)), in slot order.
    pub fn grids_in_parts(
        &self,
        frame: usize,
        part_bytes: u64,
    ) -> Result<Vec<Option<GridInParts>>, RenderError> {
        let f = self.dataset.frame(frame).ok_or_else(|| {
            RenderError::Usage(format!(
                "frame {frame} does not exist (the dataset has {})",
                self.dataset.frame_count()
            ))
        })?;
        if part_bytes == 0 {
            return Err(RenderError::Usage("parts of 0 bytes".into()));
        }
        Ok(self
            .slots
            .iter()
            .map(|s| {
                let a = (*s)?;
                let g = f.grids.iter().find(|g| g.attribute as usize == a)?;
                Some(GridInParts::locate(g.offset, g.size, part_bytes))
            })
            .collect())
    }
}
