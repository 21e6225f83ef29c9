//! A small synthetic storm on disk, for the tests that need a dataset to open, play or
//! render (the generator's own tests check what it writes).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use supercell::dataset::{LaneSpec, Provenance};
use supercell::synth::{Attribute, GenerateOptions, default_params, generate_dataset};

/// What to make: `resolution` voxels across, `frames` frames, over `lanes` lanes; the
/// built-in storm's attributes unless `attributes` names some.
#[derive(Clone, Debug)]
pub struct SmallStorm<'a> {
    /// Voxels across the domain.
    pub resolution: u32,
    /// Frames.
    pub frames: u32,
    /// Lanes the dataset stripes over.
    pub lanes: u32,
    /// Stripe chunk, bytes (small chunks spread a small frame over every lane).
    pub chunk: u64,
    /// The attributes, where not all.
    pub attributes: Option<&'a [Attribute]>,
    /// Who made it, for the manifest's provenance.
    pub made_by: &'a str,
}

impl SmallStorm<'_> {
    /// Writes the dataset at `dir` (panics with the generator's error: a test set-up fault).
    pub fn write(&self, dir: &Path) {
        let mut p = default_params();
        p.resolution = self.resolution;
        p.frames = self.frames;
        if let Some(a) = self.attributes {
            p.attributes = a.to_vec();
        }
        generate_dataset(
            &p,
            &GenerateOptions::default(),
            dir,
            LaneSpec::Count(self.lanes),
            self.chunk,
            Provenance::new(self.made_by, Vec::<String>::new()),
            |_| {},
        )
        .unwrap_or_else(|e| panic!("{}: cannot make the test storm: {e}", dir.display()));
    }

    /// The dataset at `dir`, made once and shared: by the tests of one binary (they run on
    /// parallel threads; the first one makes it) and by later runs (an existing dataset is
    /// kept). It is made under a private name and renamed into place, so a process that
    /// loses the race to another never sees half of it.
    pub fn shared(&self, dir: &Path) -> PathBuf {
        if dir.join("manifest.json").exists() {
            return dir.to_path_buf();
        }
        let name = dir.file_name().and_then(|n| n.to_str()).unwrap_or("storm");
        let tmp = dir.with_file_name(format!("{name}.tmp{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        self.write(&tmp);
        if std::fs::rename(&tmp, dir).is_err() {
            // Another process won the race; its dataset is the same.
            let _ = std::fs::remove_dir_all(&tmp);
        }
        dir.to_path_buf()
    }
}

/// The built-in storm scene's attributes in slot order (the scene compiled into the
/// binary), after checking that the funnel's grid is among them.
pub fn storm_scene_attributes() -> Vec<String> {
    let storm: Vec<String> = supercell::scene::Scene::builtin()
        .attributes
        .iter()
        .map(|a| a.name.clone())
        .collect();
    assert!(storm.iter().any(|n| n == "funnel_cloud"), "{storm:?}");
    storm
}

/// Where the first grid of `frame` of the dataset at `ds` starts: its lane file and the
/// byte offset in it.
pub fn grid_start(ds: &Path, frame: usize) -> (PathBuf, u64) {
    let d = supercell::dataset::Dataset::open(ds).unwrap();
    let g = d.frame(frame).unwrap().grids[0];
    let src = supercell::ingest::Source::from_manifest(d.manifest());
    let e = src.frames[frame]
        .extents
        .iter()
        .find(|e| e.dst <= g.offset && g.offset < e.dst + e.len)
        .copied()
        .unwrap();
    (
        src.files[e.file as usize].path.clone(),
        e.offset + (g.offset - e.dst),
    )
}

/// Damages the magic of `frame`'s first grid header in its lane file: the frame fails the
/// structural check every time it is read.
pub fn damage_magic(ds: &Path, frame: usize) {
    use std::os::unix::fs::FileExt;
    let (path, at) = grid_start(ds, frame);
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .unwrap();
    f.write_all_at(b"NotAGrid", at).unwrap();
}
