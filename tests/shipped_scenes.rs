//! Every scene shipped in `scenes/` works from a fresh clone: it names no dataset a clone
//! lacks (only the built-in one, which the main command creates), and it renders. Each
//! scene is opened on a small generated storm standing in for the built-in dataset and
//! rendered small on the GPU (lavapipe in CI); the picture must show the volume, not only
//! the sky and ground behind it.

mod render_support;
mod storm_support;

use std::path::{Path, PathBuf};

use render_support::{gpu, out_dir};
use storm_support::SmallStorm;
use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::render::{Image, Renderer, upload_slot};
use supercell::scene::{DatasetSpec, LoadedScene, Scene};

/// A small storm with every attribute the built-in dataset has.
fn small_storm(dir: &Path) {
    SmallStorm {
        resolution: 48,
        frames: 2,
        lanes: 1,
        chunk: 1 << 20,
        attributes: None,
        made_by: "shipped scenes test",
    }
    .write(dir);
}

fn shipped_scenes() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    v.sort();
    assert!(v.len() >= 3, "scenes/ holds {} scenes", v.len());
    v
}

/// Loads a shipped scene and points it at `dataset` in place of the built-in dataset.
fn load_on(scene: &Path, dataset: &Path) -> Scene {
    let mut s = Scene::load(scene).unwrap_or_else(|e| panic!("{e}"));
    match &s.dataset {
        DatasetSpec::Default => s.dataset = DatasetSpec::Path(dataset.to_path_buf()),
        DatasetSpec::Path(p) => panic!(
            "{}: names the dataset {}, which a fresh clone does not have; leave the `dataset` line out to show the built-in storm",
            scene.display(),
            p.display()
        ),
    }
    assert!(
        s.warnings.is_empty(),
        "{}: {:?}",
        scene.display(),
        s.warnings
    );
    s
}

fn render(r: &mut Renderer, ls: &LoadedScene, buf: &wgpu::Buffer, frame: usize) -> Image {
    let (w, h) = (64, 36);
    let mut view = ls.view.clone();
    view.camera = ls.camera_at(0.0);
    r.set_grids(&ls.grid_slices(frame, buf).unwrap()).unwrap();
    r.render_timed(&view, w, h).unwrap();
    r.read_image().unwrap()
}

#[test]
fn every_shipped_scene_renders() {
    let Some(mut g) = gpu() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    small_storm(&ds);
    for path in shipped_scenes() {
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let scene = load_on(&path, &ds);
        let (w, h) = (64.0f32, 36.0f32);
        let ls = scene
            .open(w / h, None)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let frame = (scene.playback.start_frame as usize).min(ls.dataset.frame_count() - 1);
        let mut slot = AlignedBuf::new();
        ls.dataset
            .read_frame(frame, &mut slot, CrcCheck::Verify)
            .unwrap();
        let buf = upload_slot(&g.ctx.device, &g.ctx.queue, &slot);
        let shown = render(&mut g.r, &ls, &buf, frame);
        shown
            .write_png(&out_dir().join(format!("scene_{name}.png")))
            .unwrap();
        // The same view with every attribute hidden: sky and ground only.
        let mut bare = ls;
        for a in bare.view.attributes.iter_mut().flatten() {
            a.enabled = false;
        }
        let empty = render(&mut g.r, &bare, &buf, frame);
        let d = shown.diff(&empty);
        eprintln!("{name}: against sky and ground alone {d:?}");
        assert!(
            d.frac_over_5pct >= 0.02,
            "{}: the volume hardly shows ({:.1}% of pixels differ from sky and ground alone)",
            path.display(),
            d.frac_over_5pct * 100.0
        );
    }
}
