//! The renderer's cost per frame on this machine's adapter, in CPU seconds of this process
//! (ignored: a measurement, not a check). On a software adapter (lavapipe) the render runs
//! on this process's threads, so its CPU time is the render's cost even on a machine that
//! other work shares, where wall times are not comparable from one run to the next.
//!
//! `XDG_RUNTIME_DIR=$(mktemp -d) cargo test --test render_cost -- --ignored --nocapture`
//! (`SUPERCELL_COST_SIZE=320x180`, `SUPERCELL_COST_RENDERS=4`). It renders frame 0 of the
//! built-in storm with `scenes/storm.toml` (three attributes), as `render --bench` does.

use std::time::Instant;

use supercell::dataset::{AlignedBuf, CrcCheck};
use supercell::render::{GpuContext, Renderer, try_upload_slot};
use supercell::scene::Scene;

/// User + system CPU seconds of this process so far (`/proc/self/stat`, clock ticks of
/// 10 ms).
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    ticks / 100.0
}

#[test]
#[ignore = "a measurement: run with --ignored --nocapture"]
fn storm_render_cost() {
    let size = std::env::var("SUPERCELL_COST_SIZE").unwrap_or_else(|_| "320x180".into());
    let (w, h) = size.split_once('x').expect("WxH");
    let (w, h): (u32, u32) = (w.parse().unwrap(), h.parse().unwrap());
    let renders: u32 = std::env::var("SUPERCELL_COST_RENDERS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(4);
    let scene_path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenes/storm.toml");
    let scene = Scene::load(&scene_path).expect("scene");
    let ls = scene.open(w as f32 / h as f32, None).expect("dataset");
    let ctx = GpuContext::headless().expect("adapter");
    let t0 = (cpu_seconds(), Instant::now());
    let mut r = Renderer::new(&ctx.device, &ctx.queue).expect("renderer");
    println!(
        "{}: renderer built in {:.2} CPU-s ({:.2} s)",
        ctx.describe(),
        cpu_seconds() - t0.0,
        t0.1.elapsed().as_secs_f64()
    );
    let mut slot = AlignedBuf::new();
    ls.dataset
        .read_frame(0, &mut slot, CrcCheck::Skip)
        .expect("frame 0");
    let buffer = try_upload_slot(&ctx.device, &ctx.queue, &slot).expect("upload");
    let slices = ls.grid_slices(0, &buffer).expect("slices");
    r.set_grids(&slices).expect("bind");
    for march in ["adaptive", "fixed"] {
        let mut view = ls.view.clone();
        view.camera.fit_to(view.world_bbox, w as f32 / h as f32);
        view.settings.hdda = march != "fixed";
        view.settings.accel = march != "fixed";
        for _ in 0..2 {
            r.render_timed(&view, w, h).expect("render");
        }
        let (c, t) = (cpu_seconds(), Instant::now());
        for _ in 0..renders {
            r.render_timed(&view, w, h).expect("render");
        }
        let per = (cpu_seconds() - c) / f64::from(renders);
        let wall = t.elapsed().as_secs_f64() / f64::from(renders);
        // With the preparation (acceleration and sun grids): rebinding forces it.
        let (pc, pt) = (cpu_seconds(), Instant::now());
        for _ in 0..2 {
            r.set_grids(&slices).expect("bind");
            r.render_timed(&view, w, h).expect("render");
        }
        let prep = (cpu_seconds() - pc) / 2.0 - per;
        let prep_wall = pt.elapsed().as_secs_f64() / 2.0 - wall;
        println!(
            "{w}x{h} {march:>8}: {per:.3} CPU-s per render ({wall:.3} s wall), preparation \
             {prep:.3} CPU-s ({prep_wall:.3} s) [{renders} renders]"
        );
    }
}
