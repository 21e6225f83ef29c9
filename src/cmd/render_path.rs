//! `supercell render --mode path`: path-traced frames of a chosen sample count or time
//! budget, and the convergence report (`--converge REF_SPP`).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::Serialize;
use supercell::render::{Image, Renderer, View};

/// Samples per pixel one dispatch adds at most: short dispatches keep the GPU responsive
/// and let a time budget stop close to its end.
const CHUNK: u32 = 4;

/// Samples per pixel when neither `--spp` nor `--time-budget` is given.
pub const DEFAULT_SPP: u32 = 64;

/// When a path-traced render stops.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Stop {
    /// At this many samples per pixel.
    Samples(u32),
    /// Once this many seconds have passed (at least one sample).
    Seconds(f64),
}

/// How one progressive render went.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Progress {
    /// Samples per pixel in the image.
    pub samples: u32,
    /// Seconds from the first dispatch to the last one's completion.
    pub seconds: f64,
}

impl Progress {
    /// Path samples (one per pixel and sample) per second.
    pub fn samples_per_second(&self, width: u32, height: u32) -> f64 {
        f64::from(width) * f64::from(height) * f64::from(self.samples) / self.seconds.max(1e-9)
    }
}

fn wait(renderer: &Renderer, idx: wgpu::SubmissionIndex) -> anyhow::Result<()> {
    renderer
        .device()
        .poll(wgpu::PollType::Wait {
            submission_index: Some(idx),
            timeout: None,
        })
        .context("waiting for the path tracer")?;
    if let Some(e) = supercell::render::take_uncaptured_error() {
        bail!("GPU error while path tracing: {e}");
    }
    Ok(())
}

/// Adds samples to the image of `view` (path mode) on the bound frame until `stop`,
/// continuing the accumulation the renderer holds (a new frame or view starts afresh).
pub fn refine(
    renderer: &mut Renderer,
    view: &View,
    width: u32,
    height: u32,
    stop: Stop,
) -> anyhow::Result<Progress> {
    let mut v = view.clone();
    v.settings.path_max_samples = u32::MAX;
    let t0 = Instant::now();
    let mut first = true;
    let mut last = None;
    loop {
        // The first dispatch may start afresh (a new frame or view) or continue, which the
        // renderer decides as it records it: one sample, then count.
        let have = renderer.path_samples();
        let chunk = match stop {
            _ if first => 1,
            Stop::Samples(n) if have >= n => break,
            Stop::Samples(n) => (n - have).min(CHUNK),
            Stop::Seconds(s) if t0.elapsed().as_secs_f64() >= s => break,
            // One sample per dispatch, so the budget is met closely.
            Stop::Seconds(_) => 1,
        };
        first = false;
        v.settings.path_samples_per_frame = chunk;
        let idx = renderer.render(&v, width, height)?;
        if matches!(stop, Stop::Seconds(_)) {
            wait(renderer, idx.clone())?;
        }
        last = Some(idx);
    }
    if let Some(idx) = last {
        wait(renderer, idx)?;
    }
    Ok(Progress {
        samples: renderer.path_samples(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// relMSE of `x` against `reference`: the mean over pixels and RGB channels of
/// (x − ref)² / (ref² + 0.01), on linear radiance before exposure.
pub fn rel_mse(x: &Image, reference: &Image) -> f64 {
    let mut s = 0.0;
    for (p, q) in x.linear.iter().zip(&reference.linear) {
        for c in 0..3 {
            let (a, r) = (f64::from(p[c]), f64::from(q[c]));
            s += (a - r).powi(2) / (r * r + 1e-2);
        }
    }
    s / (3 * x.linear.len().max(1)) as f64
}

/// The definition printed with the report and written into its JSON.
pub const REL_MSE_DEFINITION: &str = "mean over pixels and RGB channels of (x - ref)^2 / \
    (ref^2 + 0.01), linear radiance before exposure";

/// The relMSE a path-traced picture should reach, and the time it should take, at 1080p
/// against a 4096-sample reference.
pub const TARGET_REL_MSE: f64 = 1e-3;

#[derive(Serialize)]
struct ConvergeRow {
    spp: u32,
    /// Seconds of path tracing to reach `spp` (read-backs excluded).
    seconds: f64,
    samples_per_second: f64,
    rel_mse: f64,
}

#[derive(Serialize)]
struct ConvergeReport {
    device: String,
    scene: String,
    frame: usize,
    width: u32,
    height: u32,
    max_bounces: u32,
    reference_spp: u32,
    reference_seconds: f64,
    warm_up_seconds: f64,
    rel_mse_definition: &'static str,
    rows: Vec<ConvergeRow>,
    /// The first row at or under [`TARGET_REL_MSE`].
    first_under_1e_3: Option<usize>,
}

/// `--converge REF_SPP`: renders a reference of `ref_spp` samples (another seed), then the
/// image again from scratch, measuring relMSE against the reference at 1, 2, 4, .. samples
/// (up to a quarter of the reference's), with the path-tracing time to each. Prints a table
/// and writes `json`.
#[allow(clippy::too_many_arguments)]
pub fn converge(
    renderer: &mut Renderer,
    view: &View,
    width: u32,
    height: u32,
    ref_spp: u32,
    device: String,
    scene: &Path,
    frame: usize,
    json: &Path,
) -> anyhow::Result<()> {
    if ref_spp < 4 {
        bail!("--converge {ref_spp}: the reference needs at least 4 samples per pixel");
    }
    // Warm-up: compiles the pipeline and builds the acceleration grids, which a player pays
    // once per frame shape and once per frame; the table times path tracing alone.
    let warm = refine(renderer, view, width, height, Stop::Samples(1))?;
    let mut reference_view = view.clone();
    reference_view.settings.frame_seed = view.settings.frame_seed ^ 0x9e37_79b9;
    renderer.restart_path();
    let r = refine(
        renderer,
        &reference_view,
        width,
        height,
        Stop::Samples(ref_spp),
    )?;
    let reference = renderer.read_image()?;
    println!("device: {device}");
    println!(
        "reference: {ref_spp} samples per pixel at {width}x{height} in {:.2} s ({:.2} M samples/s)",
        r.seconds,
        r.samples_per_second(width, height) / 1e6
    );
    println!("relMSE: {REL_MSE_DEFINITION}");
    println!(
        "{:>6} {:>10} {:>14} {:>12}",
        "spp", "seconds", "M samples/s", "relMSE"
    );
    renderer.restart_path();
    let mut rows = Vec::new();
    let mut seconds = 0.0;
    let mut spp = 1;
    while spp <= (ref_spp / 4).max(1) {
        let p = refine(renderer, view, width, height, Stop::Samples(spp))?;
        seconds += p.seconds;
        let img = renderer.read_image()?;
        let row = ConvergeRow {
            spp,
            seconds,
            samples_per_second: f64::from(width) * f64::from(height) * f64::from(spp)
                / seconds.max(1e-9),
            rel_mse: rel_mse(&img, &reference),
        };
        println!(
            "{:>6} {:>10.3} {:>14.3} {:>12.3e}",
            row.spp,
            row.seconds,
            row.samples_per_second / 1e6,
            row.rel_mse
        );
        rows.push(row);
        spp *= 2;
    }
    let first = rows.iter().position(|r| r.rel_mse <= TARGET_REL_MSE);
    match first {
        Some(i) => println!(
            "relMSE <= {TARGET_REL_MSE:e} at {} samples per pixel after {:.3} s",
            rows[i].spp, rows[i].seconds
        ),
        None => println!("relMSE stayed above {TARGET_REL_MSE:e}"),
    }
    let report = ConvergeReport {
        device,
        scene: scene.display().to_string(),
        frame,
        width,
        height,
        max_bounces: view.settings.path_max_bounces,
        reference_spp: ref_spp,
        reference_seconds: r.seconds,
        warm_up_seconds: warm.seconds,
        rel_mse_definition: REL_MSE_DEFINITION,
        rows,
        first_under_1e_3: first,
    };
    std::fs::write(json, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("{}", json.display()))?;
    println!("{}", json.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rel_mse_is_the_stated_definition() {
        let mut a = Image::new(2, 1);
        let mut b = Image::new(2, 1);
        a.linear[0] = [1.0, 0.0, 0.0, 1.0];
        b.linear[0] = [0.0, 0.0, 0.0, 1.0];
        b.linear[1] = [1.0, 1.0, 1.0, 1.0];
        // Pixel 0, red: 1 / 0.01; pixel 1: three channels of 1 / 1.01.
        let want = (100.0 + 3.0 / 1.01) / 6.0;
        assert!((rel_mse(&a, &b) - want).abs() < 1e-9);
        assert_eq!(rel_mse(&b, &b), 0.0);
    }
}
