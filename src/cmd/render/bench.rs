//! `render --bench`: the ray-marcher's timing mode. One frame rendered repeatedly at each
//! size, with and without empty-space skipping, median milliseconds per render.

use anyhow::{Context, bail};
use serde::Serialize;
use supercell::dataset::AlignedBuf;
use supercell::device::DeviceCaps;
use supercell::render::GpuContext;
use supercell::scene::LoadedScene;

use super::{
    RenderArgs, bind_uploaded, check_frame_fits, check_headers, check_size, open_renderer,
    progress_bar, read_frame, shown_grids, upload_shown,
};

/// What `render --bench` times: sizes and renders per size and march.
#[derive(Debug, PartialEq)]
struct BenchPlan {
    sizes: Vec<(u32, u32)>,
    frames: u32,
    /// Said before the table when the software defaults chose the plan.
    note: Option<String>,
}

/// `--bench-sizes` and `--bench-frames`, else the defaults: on a hardware adapter three
/// sizes up to 4K and 20 renders, on a software one one small size and 5 renders (each
/// 720p render takes seconds there, and the three sizes would run for hours).
fn bench_plan(args: &RenderArgs, caps: &DeviceCaps) -> anyhow::Result<BenchPlan> {
    let software = caps.software;
    let sizes = match &args.bench_sizes {
        Some(list) => list
            .iter()
            .map(|s| supercell::units::parse_image_size("--bench-sizes", s, u32::MAX))
            .collect::<Result<Vec<_>, _>>()?,
        None if software => vec![supercell::app::software::SOFTWARE_BENCH_SIZE],
        None => vec![(1280, 720), (1920, 1080), (3840, 2160)],
    };
    if sizes.is_empty() {
        bail!("--bench-sizes names no size");
    }
    let frames = args
        .bench_frames
        .unwrap_or(if software { 5 } else { 20 })
        .max(1);
    let mut chosen = Vec::new();
    if software && args.bench_sizes.is_none() {
        let (w, h) = sizes[0];
        chosen.push(format!("one size, {w}x{h}"));
    }
    if software && args.bench_frames.is_none() {
        chosen.push(format!("{frames} timed renders per march"));
    }
    let note = (!chosen.is_empty()).then(|| {
        format!(
            "software Vulkan adapter ({}): timing {} (--bench-sizes and --bench-frames time more)",
            caps.name,
            chosen.join(", ")
        )
    });
    Ok(BenchPlan {
        sizes,
        frames,
        note,
    })
}

#[derive(Serialize)]
struct BenchRow {
    width: u32,
    height: u32,
    /// "adaptive" (skipping + adaptive steps, the default), "skip" (skipping, fixed base
    /// steps) or "fixed" (every lattice point sampled).
    march: &'static str,
    /// Acceleration and sun-grid passes, when the grids or the look change (median).
    prepare_ms_median: Option<f64>,
    frames: u32,
    gpu_ms_median: Option<f64>,
    gpu_ms_min: Option<f64>,
    wall_ms_median: f64,
    mpix_per_s: f64,
}

#[derive(Serialize)]
struct BenchReport {
    device: String,
    dataset: String,
    frame: usize,
    grid_bytes: u64,
    timer: &'static str,
    rows: Vec<BenchRow>,
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    supercell::probe::percentile(v, 0.5)
}

pub(super) fn bench(args: &RenderArgs, ls: &mut LoadedScene, frame: usize) -> anyhow::Result<()> {
    let ctx = GpuContext::headless()?;
    let device = ctx.describe();
    let mut renderer = open_renderer(&ctx)?;
    let plan = bench_plan(args, &ctx.caps)?;
    let (sizes, bench_frames) = (plan.sizes, plan.frames);
    for &(w, h) in &sizes {
        check_size("--bench-sizes", Some(&renderer), w, h)?;
    }
    check_frame_fits(ls, &renderer, frame)?;
    let mut slot = AlignedBuf::new();
    read_frame(args, ls, frame, &mut slot)?;
    check_headers(ls, frame, &slot)?;
    let slices = shown_grids(&renderer, ls, frame)?;
    let uploaded = upload_shown(&ctx, &renderer, &slot, &slices)
        .with_context(|| format!("{}: frame {frame}", args.scene.display()))?;
    let grid_bytes = slices.iter().flatten().map(|s| s.size).sum();
    bind_uploaded(&mut renderer, &uploaded, &slices)?;
    let mut rows = Vec::new();
    let mut timer = "wall (submit to completion)";
    println!("device: {device}");
    if let Some(note) = &plan.note {
        println!("{note}");
    }
    println!(
        "frame {frame}: {} grids, {:.1} MB",
        slices.iter().flatten().count(),
        grid_bytes as f64 / 1e6
    );
    println!(
        "{:>11} {:>8} {:>12} {:>12} {:>12} {:>9} {:>10}",
        "size", "march", "GPU ms med", "GPU ms min", "wall ms med", "Mpix/s", "prepare ms"
    );
    let base = ls.view.clone();
    // Renders per size and march: warm-up, timed, and the preparation's.
    let per_march = u64::from(bench_frames) + 6;
    let bar = progress_bar(
        "bench [{elapsed_precise}] {bar:30} {pos}/{len} renders  {msg}",
        sizes.len() as u64 * 3 * per_march,
    );
    for &(w, h) in &sizes {
        let mut med = [0.0f64; 3];
        for (i, march) in ["adaptive", "skip", "fixed"].into_iter().enumerate() {
            bar.set_message(format!("{w}x{h} {march}"));
            let mut view = base.clone();
            view.camera.fit_to(view.world_bbox, w as f32 / h as f32);
            view.settings.hdda = march != "fixed";
            view.settings.accel = march != "fixed";
            if march != "adaptive" {
                view.settings.max_step_scale = 1;
            }
            for _ in 0..3 {
                renderer.render_timed(&view, w, h)?;
                bar.inc(1);
            }
            let (mut gpu, mut wall, mut prep) = (Vec::new(), Vec::new(), Vec::new());
            for _ in 0..bench_frames {
                let t = renderer.render_timed(&view, w, h)?;
                bar.inc(1);
                wall.push(t.wall_ms);
                if let Some(g) = t.gpu_ms {
                    gpu.push(g);
                }
            }
            // The per-frame preparation: rebinding the grids forces it.
            for _ in 0..3 {
                bind_uploaded(&mut renderer, &uploaded, &slices)?;
                if let Some(p) = renderer.render_timed(&view, w, h)?.prepare_ms {
                    prep.push(p);
                }
                bar.inc(1);
            }
            let gpu_med = (!gpu.is_empty()).then(|| median(&mut gpu));
            let gpu_min = gpu.iter().copied().reduce(f64::min);
            let prep_med = (!prep.is_empty()).then(|| median(&mut prep));
            if gpu_med.is_some() {
                timer = "GPU timestamp queries around the compute passes";
            }
            let wall_med = median(&mut wall);
            let ms = gpu_med.unwrap_or(wall_med);
            med[i] = ms;
            let mpix = w as f64 * h as f64 / (ms * 1e3);
            let f = |v: Option<f64>| v.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
            bar.suspend(|| {
                println!(
                    "{:>11} {:>8} {:>12} {:>12} {:>12.3} {:>9.1} {:>10}",
                    format!("{w}x{h}"),
                    march,
                    f(gpu_med),
                    f(gpu_min),
                    wall_med,
                    mpix,
                    f(prep_med)
                )
            });
            rows.push(BenchRow {
                width: w,
                height: h,
                march,
                prepare_ms_median: prep_med,
                frames: bench_frames,
                gpu_ms_median: gpu_med,
                gpu_ms_min: gpu_min,
                wall_ms_median: wall_med,
                mpix_per_s: mpix,
            });
        }
        bar.suspend(|| println!(
            "{:>11} speed-up over the fixed-step march: skipping {:.2}x, skipping + adaptive steps {:.2}x",
            format!("{w}x{h}"),
            med[2] / med[1].max(1e-9),
            med[2] / med[0].max(1e-9)
        ));
    }
    bar.finish_and_clear();
    println!("timer: {timer}");
    if let Some(p) = &args.bench_json {
        let report = BenchReport {
            device,
            dataset: args.scene.display().to_string(),
            frame,
            grid_bytes,
            timer,
            rows,
        };
        std::fs::write(p, serde_json::to_vec_pretty(&report)?)
            .with_context(|| format!("{}", p.display()))?;
    }
    Ok(())
}
