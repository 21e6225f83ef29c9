//! The presenter's looks: each attribute slot's transfer function as edited in the window (the
//! view changes, so the renderer uploads its table again with the next render, as a preset
//! does), the look the scene gave it, what is known of its values (the panel's
//! distribution), and the looks and camera saved as a scene file that `play` and `render`
//! show the same.

use std::path::PathBuf;

use super::*;
use crate::render::{Camera, Colormap, TransferFunction};
use crate::scene::{
    BUILTIN_SCENE_FILE, CameraSpec, DatasetSpec, SceneAttribute, ValueSummary, checked_scene_text,
};

/// Where [`Player::save_scene`](crate::app::Player::save_scene) wrote the scene, and how.
#[derive(Clone, Debug, PartialEq)]
pub struct SavedScene {
    /// The scene file written.
    pub path: PathBuf,
    /// Written back into the scene file that was played (false: a file of its own).
    pub replaced: bool,
    /// The scene has a camera path, which was kept with the scene's own camera (the path's
    /// keys are relative to it): the camera shown now is not what the file holds.
    pub kept_camera_path: bool,
}

impl SavedScene {
    /// One line for the window's message: where, and what it holds.
    pub fn describe(&self) -> String {
        let how = if self.replaced {
            "looks and camera written back into the scene played"
        } else {
            "looks and camera written to a new scene file"
        };
        let path = if self.kept_camera_path {
            "; the scene's camera path was kept, with its camera"
        } else {
            ""
        };
        format!("{how}: {}{path}", self.path.display())
    }
}

/// The largest extent of a world box, as the scene's looks scale extinction by it.
fn extent_of(b: [[f32; 3]; 2]) -> f32 {
    (b[1][0] - b[0][0])
        .max(b[1][1] - b[0][1])
        .max(b[1][2] - b[0][2])
        .max(1e-6)
}

/// Why `tf` cannot be shown (and written in a scene): a range that is not increasing and
/// finite, an opacity curve that is empty, unsorted or outside 0..1, or an unknown colormap.
pub fn look_problem(tf: &TransferFunction) -> Option<String> {
    let [lo, hi] = tf.range;
    if !(lo.is_finite() && hi.is_finite() && lo < hi && (hi - lo).is_finite()) {
        return Some(format!(
            "the range [{lo}, {hi}] is not increasing and finite"
        ));
    }
    let sorted = tf.opacity.windows(2).all(|w| w[0].0 <= w[1].0);
    let valid = tf
        .opacity
        .iter()
        .all(|&(u, a)| u.is_finite() && (0.0..=1.0).contains(&a));
    if tf.opacity.is_empty() || !sorted || !valid {
        return Some("the opacity curve needs points sorted in u, opacity 0..1".into());
    }
    match &tf.colormap {
        Colormap::Named(n) if !Colormap::NAMES.contains(&n.as_str()) => {
            Some(format!("unknown colormap {n:?}"))
        }
        Colormap::Stops(s) if s.is_empty() => Some("a colormap needs stops".into()),
        _ => None,
    }
}

impl Presenter {
    /// The look the scene gave view slot `i` (for an attribute shown from the window, the
    /// preset of its name over the manifest's range, as it was first shown with).
    pub(crate) fn scene_look(&self, i: usize) -> Option<TransferFunction> {
        let m = self.scene.dataset.manifest();
        let attr = m.attributes.get((*self.scene.slots.get(i)?)?)?;
        let from_scene = self
            .scene
            .attributes
            .get(i)
            .is_some_and(|a| a.name == attr.name);
        match self.scene.view.attributes.get(i) {
            Some(Some(a)) if from_scene => Some(a.tf.clone()),
            _ => {
                let range = attr
                    .value_range
                    .map_or([0.0, 1.0], |r| [r[0] as f32, r[1] as f32]);
                let extent = extent_of(self.view.world_bbox);
                Some(TransferFunction::preset(&attr.name, range, extent))
            }
        }
    }

    /// Gives view slot `i` the look `tf`; it shows from the next render on. Refused, saying
    /// why, for a slot without an attribute or a look that cannot be drawn ([`look_problem`]).
    pub(crate) fn set_look(&mut self, i: usize, tf: TransferFunction) -> Result<(), String> {
        if let Some(why) = look_problem(&tf) {
            return Err(why);
        }
        match self.view_mut().attributes.get_mut(i) {
            Some(Some(a)) => {
                a.tf = tf;
                Ok(())
            }
            _ => Err(format!("slot {} holds no attribute", i + 1)),
        }
    }

    /// What the first frames' values of view slot `i`'s attribute were (percentiles, from
    /// the sample that chose the looks of a dataset opened without a scene); None where no
    /// frame was sampled (a scene file, `--attributes`).
    pub(crate) fn value_summary(&self, i: usize) -> Option<&ValueSummary> {
        let a = (*self.scene.slots.get(i)?)?;
        self.scene
            .suggestion
            .as_ref()?
            .sample
            .summaries
            .get(a)?
            .as_ref()
    }

    /// The manifest's smallest and largest value of view slot `i`'s attribute over all
    /// frames, and its unit, where the manifest records them.
    pub(crate) fn value_range(&self, i: usize) -> (Option<[f64; 2]>, Option<&str>) {
        let m = self.scene.dataset.manifest();
        match self.scene.slots.get(i).copied().flatten() {
            Some(a) => m
                .attributes
                .get(a)
                .map_or((None, None), |a| (a.value_range, a.units.as_deref())),
            None => (None, None),
        }
    }

    /// The scene that shows what the player shows now: the scene played, with every slot's
    /// look (range, colormap, opacity, medium, emission, shadows, albedo; its preset and
    /// extinction scale as the scene had them), whether it is shown, the camera (unless the
    /// scene flies a camera path), the render settings and `start_frame` (the frame shown)
    /// as the start.
    pub(crate) fn scene_as_shown(&self, start_frame: u32) -> Scene {
        let m = self.scene.dataset.manifest();
        let mut scene = self.scene.scene.clone();
        scene.warnings.clear();
        scene.attributes = (self.scene.slots.iter().enumerate())
            .zip(&self.view.attributes)
            .filter_map(|((i, slot), shown)| {
                let name = &m.attributes.get((*slot)?)?.name;
                let shown = shown.as_ref()?;
                let mut a = (self.scene.attributes.get(i))
                    .filter(|a| &a.name == name)
                    .cloned()
                    .unwrap_or_else(|| SceneAttribute::named(name.clone()));
                let tf = &shown.tf;
                a.enabled = Some(shown.enabled);
                a.range = Some(tf.range);
                a.colormap = Some(tf.colormap.clone());
                a.opacity = Some(tf.opacity.clone());
                a.kind = Some(tf.kind);
                a.emission = Some(tf.emission);
                a.casts_shadow = Some(tf.casts_shadow);
                a.albedo = tf.albedo.clone();
                Some(a)
            })
            .collect();
        if scene.camera_path.is_none() {
            scene.camera = camera_spec(&self.view.camera, scene.camera.fit.clone());
        }
        scene.settings = self.view.settings.clone();
        scene.playback.start_frame = start_frame;
        scene
    }

    /// Where [`Presenter::save_scene`] writes without a path: back into the scene file played
    /// (true), else a new file beside the dataset directory, `<dataset>.scene.toml` (or
    /// `-2`, `-3`, … where that exists).
    pub(crate) fn scene_file_to_save(&self) -> (PathBuf, bool) {
        let s = &self.scene.scene;
        let builtin = s.source == std::path::Path::new(BUILTIN_SCENE_FILE)
            && s.dataset == DatasetSpec::Default;
        if !builtin && s.source.is_file() && s.source.extension().is_some_and(|e| e == "toml") {
            return (s.source.clone(), true);
        }
        let dir = self.scene.dataset.manifest().path();
        let dir = if dir.is_dir() {
            dir
        } else {
            dir.parent().unwrap_or(dir)
        };
        let name = dir
            .file_name()
            .map_or_else(|| "dataset".into(), |n| n.to_string_lossy().into_owned());
        let beside = dir.parent().unwrap_or(dir);
        let candidate = |k: u32| match k {
            1 => beside.join(format!("{name}.scene.toml")),
            k => beside.join(format!("{name}.scene-{k}.toml")),
        };
        let free = (1..1000).map(candidate).find(|p| !p.exists());
        (free.unwrap_or_else(|| candidate(1)), false)
    }
}

/// The scene camera that resolves to `c` exactly, whatever the data's box and the aspect.
fn camera_spec(c: &Camera, fit: Option<Vec<String>>) -> CameraSpec {
    CameraSpec {
        fit,
        yaw_deg: Some(c.yaw_deg),
        pitch_deg: Some(c.pitch_deg),
        fov_y_deg: Some(c.fov_y_deg),
        projection: Some(c.projection),
        target: Some(c.target),
        target_offset: None,
        distance: Some(c.distance),
        distance_scale: None,
        ortho_height: Some(c.ortho_height),
    }
}

impl Presenter {
    /// Writes [`Presenter::scene_as_shown`] (starting at `start_frame`) to `to` (None:
    /// [`Presenter::scene_file_to_save`]),
    /// atomically, once the text read back and opened shows the same looks, camera and
    /// settings as the player, bit for bit: an extinction the scene's preset and scale no
    /// longer give (an attribute shown from the window widens the world box that extinction
    /// scales with) gets the scale that gives it. An error says why nothing was written.
    pub(crate) fn save_scene(
        &self,
        to: Option<&std::path::Path>,
        start_frame: u32,
    ) -> Result<SavedScene, PlayError> {
        let (path, replaced) = match to {
            Some(p) => (p.to_path_buf(), p == self.scene.scene.source),
            None => self.scene_file_to_save(),
        };
        let fail = |what: String| PlayError::Scene(format!("{}: {what}", path.display()));
        let mut scene = self.scene_as_shown(start_frame);
        let notes = vec![
            "A scene saved by supercell's player (Shift+S): its looks, camera and settings."
                .to_string(),
        ];
        let (w, h) = self.size;
        for fix in [true, false] {
            let text =
                checked_scene_text(&scene, &notes, &path).map_err(|e| fail(e.to_string()))?;
            let opened = Scene::parse(&text, &path)
                .and_then(|s| s.open(w as f32 / h as f32, None))
                .map_err(|e| fail(e.to_string()))?;
            if self.shows_as(&opened, &mut scene, fix).map_err(fail)? {
                crate::atomic_file::write_replacing(&path, text.as_bytes())
                    .map_err(|e| fail(e.to_string()))?;
                return Ok(SavedScene {
                    path,
                    replaced,
                    kept_camera_path: scene.camera_path.is_some(),
                });
            }
        }
        Err(fail(
            "the scene read back does not show what the player shows".into(),
        ))
    }

    /// Whether `opened` (the written `scene`, opened) shows this presenter's looks, camera and
    /// settings: Ok(true) if so; with `fix`, Ok(false) after giving `scene` the extinction
    /// scales that make it so (or as near as f32 allows: one unit in the last place, where
    /// no scale of the preset's extinction gives it exactly; accepted without `fix`); an
    /// error naming what differs otherwise.
    fn shows_as(&self, opened: &LoadedScene, scene: &mut Scene, fix: bool) -> Result<bool, String> {
        let ours: Vec<_> = self.view.attributes.iter().flatten().collect();
        let theirs: Vec<_> = opened.view.attributes.iter().flatten().collect();
        if ours.len() != theirs.len() {
            return Err(format!(
                "{} attributes read back, {} shown",
                theirs.len(),
                ours.len()
            ));
        }
        if scene.camera_path.is_none() && opened.fitted != self.view.camera {
            return Err(format!("camera read back as {:?}", opened.fitted));
        }
        if opened.view.settings != self.view.settings {
            return Err("render settings read back differ".into());
        }
        let extent = extent_of(opened.view.world_bbox);
        let mut same = true;
        for (k, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            let mut b_tf = b.tf.clone();
            b_tf.extinction = a.tf.extinction;
            if a.enabled != b.enabled || a.tf != b_tf {
                return Err(format!("attribute {} reads back with another look", k + 1));
            }
            let ulps = (a.tf.extinction.to_bits() as i64 - b.tf.extinction.to_bits() as i64).abs();
            if ulps > 1 || (ulps == 1 && fix) {
                if !fix {
                    return Err(format!("attribute {}'s extinction", k + 1));
                }
                same = false;
                let sa = &mut scene.attributes[k];
                let preset = sa.preset.clone().unwrap_or_else(|| sa.name.clone());
                let base = TransferFunction::preset(&preset, a.tf.range, extent).extinction;
                sa.extinction_scale = Some(
                    scale_giving(base, a.tf.extinction)
                        .ok_or_else(|| format!("attribute {}'s extinction", k + 1))?,
                );
            }
        }
        Ok(same)
    }
}

/// The scale `s` whose `base * s` in f32 (what the scene's look computes) is nearest to
/// `target`: exactly `target` where such a scale exists (a `base` above 1 leaves some
/// products unreachable, one unit in the last place away).
fn scale_giving(base: f32, target: f32) -> Option<f32> {
    let s0 = target / base;
    if !s0.is_finite() || s0 <= 0.0 {
        return None;
    }
    let off = |s: &f32| ((base * s).to_bits() as i64 - target.to_bits() as i64).abs();
    (0..8)
        .flat_map(|d: i32| [d, -d])
        .map(|d| f32::from_bits(s0.to_bits().wrapping_add_signed(d)))
        .min_by_key(off)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scale_gives_the_extinction_exactly_or_one_ulp_off() {
        for (base, target) in [(0.15f32, 0.3f32), (1.0 / 3.0, 0.7)] {
            let s = scale_giving(base, target).expect("a scale");
            assert_eq!((base * s).to_bits(), target.to_bits(), "{base} {target}");
        }
        // Where no scale gives it, the nearest: one unit in the last place.
        let mut exact = 0;
        for k in 1..200 {
            let (base, target) = (1.0 + k as f32 * 0.0137, 0.01 * k as f32);
            let s = scale_giving(base, target).unwrap();
            let off = ((base * s).to_bits() as i64 - target.to_bits() as i64).abs();
            assert!(off <= 1, "{base} {target}");
            exact += usize::from(off == 0);
        }
        assert!(exact > 100, "{exact} of 199 exact");
        assert_eq!(scale_giving(0.0, 1.0), None);
    }

    #[test]
    fn looks_that_cannot_be_drawn_are_named() {
        let tf = TransferFunction::preset("cloud", [0.0, 1.0], 1.0);
        assert_eq!(look_problem(&tf), None);
        let mut bad = tf.clone();
        bad.range = [1.0, 1.0];
        assert!(look_problem(&bad).unwrap().contains("range"));
        let mut bad = tf.clone();
        bad.opacity = vec![(0.5, 0.1), (0.2, 0.3)];
        assert!(look_problem(&bad).unwrap().contains("opacity"));
        let mut bad = tf;
        bad.colormap = Colormap::Named("jet".into());
        assert!(look_problem(&bad).unwrap().contains("jet"));
    }
}
