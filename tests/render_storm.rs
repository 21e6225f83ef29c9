//! Renders the synthetic storm through the whole path (generator → dataset → scene → GPU),
//! and checks the GPU image against the CPU reference on a small storm.
//!
//! `storm_small_matches_cpu` runs by default (a 96-voxel storm, 96 × 64 image).
//! `storm_picture` is ignored: run it in release to refresh `docs/images/storm.png`:
//! `cargo test --release --test render_storm -- --ignored` (`STORM_RES`, `STORM_FRAME`,
//! `STORM_SIZE` = `WxH` choose the storm and image).

mod render_support;

use std::path::{Path, PathBuf};

use render_support::{gpu, out_dir};
use supercell::dataset::{AlignedBuf, CrcCheck, LaneSpec, Provenance};
use supercell::format::Grid;
use supercell::render::{Renderer, render_cpu, upload_slot};
use supercell::scene::{LoadedScene, Scene};
use supercell::synth::{GenerateOptions, default_params, generate_dataset};

fn make_dataset(dir: &Path, res: u32, frames: u32) {
    if dir.join("manifest.json").exists() {
        return;
    }
    let _ = std::fs::remove_dir_all(dir);
    let mut p = default_params();
    p.resolution = res;
    p.frames = frames;
    generate_dataset(
        &p,
        &GenerateOptions::default(),
        dir,
        LaneSpec::Count(1),
        8 << 20,
        Provenance::new("render_storm test", [format!("{res}")]),
        |_| {},
    )
    .expect("storm dataset");
}

fn render_frame(ls: &LoadedScene, frame: usize, w: u32, h: u32) -> supercell::render::Image {
    let ctx = gpu().expect("a GPU adapter").ctx;
    let mut slot = AlignedBuf::new();
    ls.dataset
        .read_frame(frame, &mut slot, CrcCheck::Verify)
        .unwrap();
    let buf = upload_slot(&ctx.device, &ctx.queue, &slot);
    let mut r = Renderer::new(&ctx.device, &ctx.queue).unwrap();
    r.set_grids(&ls.grid_slices(frame, &buf).unwrap()).unwrap();
    let t = r.render_timed(&ls.view, w, h).unwrap();
    eprintln!("{w}x{h}: {t:?}");
    r.read_image().unwrap()
}

#[test]
fn storm_small_matches_cpu() {
    if gpu().is_none() {
        return;
    }
    let dir = out_dir().join("storm96");
    make_dataset(&dir, 96, 2);
    let (w, h) = (96, 64);
    let ls = Scene::load(&dir)
        .unwrap()
        .open(w as f32 / h as f32, None)
        .unwrap();
    let frame = 1;
    let g = render_frame(&ls, frame, w, h);
    let mut slot = AlignedBuf::new();
    ls.dataset
        .read_frame(frame, &mut slot, CrcCheck::Skip)
        .unwrap();
    let grids: Vec<Option<Grid>> = ls
        .slots
        .iter()
        .map(|s| s.map(|a| Grid::parse(ls.dataset.grid_bytes(frame, a, &slot).unwrap()).unwrap()))
        .collect();
    let refs: Vec<Option<&Grid>> = grids.iter().map(|g| g.as_ref()).collect();
    let c = render_cpu(&refs, &ls.view, w, h);
    g.write_png(&out_dir().join("storm96_gpu.png")).unwrap();
    c.write_png(&out_dir().join("storm96_cpu.png")).unwrap();
    let d = g.diff(&c);
    eprintln!("storm GPU vs CPU: {d:?}");
    assert!(
        d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
        "storm: GPU and CPU differ: {d:?}"
    );
}

#[test]
#[ignore]
fn storm_picture() {
    let res: u32 = std::env::var("STORM_RES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256);
    let frame: usize = std::env::var("STORM_FRAME")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let (w, h) = std::env::var("STORM_SIZE")
        .ok()
        .and_then(|s| {
            let (a, b) = s.split_once('x')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        })
        .unwrap_or((1280u32, 720u32));
    let dir = out_dir().join(format!("storm{res}"));
    make_dataset(&dir, res, 3);
    let ls = Scene::load(&dir)
        .unwrap()
        .open(w as f32 / h as f32, None)
        .unwrap();
    let img = render_frame(&ls, frame, w, h);
    let out = std::env::var_os("STORM_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/images/storm.png"));
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    img.write_png(&out).unwrap();
    eprintln!("wrote {}", out.display());
}
