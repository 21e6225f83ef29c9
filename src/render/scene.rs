//! Scenes: a dataset plus how to show it (attributes and their transfer functions, camera,
//! settings), from a TOML file or from a dataset's manifest alone.
//!
//! ```toml
//! dataset = "../storm"            # relative to the scene file
//! [[attribute]]
//! name = "cloud"                  # preset look by name; every field below is optional
//! [[attribute]]
//! name = "wind_speed"
//! colormap = "inferno"
//! opacity = [[0.4, 0.0], [1.0, 1.0]]
//! extinction_scale = 0.5
//! [camera]
//! yaw_deg = -50.0
//! [settings]
//! sun_elevation_deg = 35.0
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::camera::Camera;
use super::params::{AttributeView, MAX_ATTRIBUTES, RenderSettings, View};
use super::transfer::{Colormap, MediumKind, TransferFunction};
use super::{GridSlice, RenderError};
use crate::dataset::{Dataset, Manifest};

/// Attributes shown by default, in slot order, where the dataset has them.
pub const DEFAULT_ATTRIBUTES: [&str; 3] = ["cloud", "rain", "wind_speed"];

/// One attribute of a scene file: a preset (by name) with optional overrides.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneAttribute {
    /// Attribute (grid) name in the dataset.
    pub name: String,
    /// Shown (default true).
    #[serde(default)]
    pub enabled: Option<bool>,
    /// Preset whose look to start from (default: the attribute's name).
    #[serde(default)]
    pub preset: Option<String>,
    /// Value range (default: the manifest's).
    #[serde(default)]
    pub range: Option<[f32; 2]>,
    /// Colormap name or stops.
    #[serde(default)]
    pub colormap: Option<Colormap>,
    /// Opacity curve points.
    #[serde(default)]
    pub opacity: Option<Vec<(f32, f32)>>,
    /// Scattering or emissive.
    #[serde(default)]
    pub kind: Option<MediumKind>,
    /// Multiplies the preset's extinction.
    #[serde(default)]
    pub extinction_scale: Option<f32>,
    /// Emission strength.
    #[serde(default)]
    pub emission: Option<f32>,
    /// Casts shadows.
    #[serde(default)]
    pub casts_shadow: Option<bool>,
}

/// A scene file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SceneFile {
    /// Dataset directory (relative paths are relative to the scene file).
    pub dataset: PathBuf,
    /// Attributes in slot order (at most four); default: [`DEFAULT_ATTRIBUTES`].
    #[serde(default, rename = "attribute")]
    pub attributes: Vec<SceneAttribute>,
    /// Camera; default: fitted to the world box.
    #[serde(default)]
    pub camera: Option<Camera>,
    /// Settings.
    #[serde(default)]
    pub settings: RenderSettings,
}

/// A dataset opened for rendering: which attribute goes to which slot, and the view.
pub struct LoadedScene {
    /// The dataset.
    pub dataset: Dataset,
    /// Manifest attribute index per slot.
    pub slots: Vec<Option<usize>>,
    /// The view (camera fitted unless the scene gave one).
    pub view: View,
}

impl LoadedScene {
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
}

/// Opens a scene file (`.toml`) or a dataset directory, for images of aspect `aspect`.
/// `attributes`, when given, replaces the scene's attribute list (names, in slot order).
pub fn load(
    path: &Path,
    aspect: f32,
    attributes: Option<&[String]>,
) -> Result<LoadedScene, RenderError> {
    let io = |e: &dyn std::fmt::Display| RenderError::Io(format!("{}: {e}", path.display()));
    let mut scene = if path.is_file() {
        let text = std::fs::read_to_string(path).map_err(|e| io(&e))?;
        let mut s: SceneFile = toml::from_str(&text).map_err(|e| io(&e))?;
        if s.dataset.is_relative() {
            s.dataset = path.parent().unwrap_or(Path::new(".")).join(&s.dataset);
        }
        s
    } else {
        SceneFile {
            dataset: path.to_path_buf(),
            ..Default::default()
        }
    };
    let dataset = Dataset::open(&scene.dataset)
        .map_err(|e| RenderError::Io(format!("{}: {e}", scene.dataset.display())))?;
    if let Some(names) = attributes {
        scene.attributes = names
            .iter()
            .map(|n| SceneAttribute {
                name: n.clone(),
                ..Default::default()
            })
            .collect();
    }
    if scene.attributes.is_empty() {
        scene.attributes = default_attributes(dataset.manifest());
    }
    if scene.attributes.len() > MAX_ATTRIBUTES {
        return Err(RenderError::Usage(format!(
            "{} attributes requested; at most {MAX_ATTRIBUTES} render at once",
            scene.attributes.len()
        )));
    }
    let (view, slots) = build_view(dataset.manifest(), &scene, aspect)?;
    Ok(LoadedScene {
        dataset,
        slots,
        view,
    })
}

/// [`DEFAULT_ATTRIBUTES`] the manifest has, or its first three attributes if none.
pub fn default_attributes(m: &Manifest) -> Vec<SceneAttribute> {
    let mut v: Vec<SceneAttribute> = DEFAULT_ATTRIBUTES
        .iter()
        .filter(|n| m.attribute_index(n).is_some())
        .map(|n| SceneAttribute {
            name: (*n).into(),
            ..Default::default()
        })
        .collect();
    if v.is_empty() {
        v = m
            .attributes
            .iter()
            .take(3)
            .map(|a| SceneAttribute {
                name: a.name.clone(),
                ..Default::default()
            })
            .collect();
    }
    v
}

fn build_view(
    m: &Manifest,
    scene: &SceneFile,
    aspect: f32,
) -> Result<(View, Vec<Option<usize>>), RenderError> {
    let mut slots = Vec::new();
    let (mut lo, mut hi) = ([f32::INFINITY; 3], [f32::NEG_INFINITY; 3]);
    let mut voxel = f32::INFINITY;
    for sa in &scene.attributes {
        let idx = m.attribute_index(&sa.name).ok_or_else(|| {
            RenderError::Usage(format!(
                "the dataset has no attribute {:?} (it has {})",
                sa.name,
                m.attributes
                    .iter()
                    .map(|a| a.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        let a = &m.attributes[idx];
        if let Some(b) = a.world_bbox {
            for i in 0..3 {
                lo[i] = lo[i].min(b[0][i] as f32);
                hi[i] = hi[i].max(b[1][i] as f32);
            }
        }
        if let Some(v) = a.voxel_size {
            voxel = voxel.min(v[0].min(v[1]).min(v[2]) as f32);
        }
        slots.push(Some(idx));
    }
    if !(lo[0] <= hi[0] && lo[1] <= hi[1] && lo[2] <= hi[2]) {
        (lo, hi) = ([0.0; 3], [1.0; 3]);
    }
    if !voxel.is_finite() || voxel <= 0.0 {
        voxel = (hi[0] - lo[0])
            .max(hi[1] - lo[1])
            .max(hi[2] - lo[2])
            .max(1e-6)
            / 256.0;
    }
    let extent = (hi[0] - lo[0])
        .max(hi[1] - lo[1])
        .max(hi[2] - lo[2])
        .max(1e-6);
    let mut attrs = Vec::new();
    for (sa, idx) in scene.attributes.iter().zip(&slots) {
        let a = &m.attributes[idx.expect("every slot resolved above")];
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
        attrs.push(Some(AttributeView {
            enabled: sa.enabled.unwrap_or(true),
            tf,
        }));
    }
    let mut view = View::new([lo, hi], voxel, attrs, aspect);
    view.settings = scene.settings.clone();
    if let Some(c) = scene.camera {
        view.camera = c;
    }
    Ok((view, slots))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scene_file_parses() {
        let s: SceneFile = toml::from_str(
            r#"
            dataset = "storm"
            [[attribute]]
            name = "cloud"
            [[attribute]]
            name = "wind_speed"
            colormap = "viridis"
            opacity = [[0.4, 0.0], [1.0, 1.0]]
            [camera]
            yaw_deg = -50.0
            projection = "orthographic"
            [settings]
            mode = "mip"
            sun_elevation_deg = 35.0
            "#,
        )
        .unwrap();
        assert_eq!(s.attributes.len(), 2);
        assert_eq!(
            s.attributes[1].colormap,
            Some(Colormap::Named("viridis".into()))
        );
        assert_eq!(s.camera.unwrap().yaw_deg, -50.0);
        assert_eq!(s.settings.mode, super::super::Mode::Mip);
        assert_eq!(s.settings.sun_elevation_deg, 35.0);
    }
}
