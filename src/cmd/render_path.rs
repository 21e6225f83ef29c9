//! `supercell render --mode path`: path-traced frames of a chosen sample count or time
//! budget, and the convergence report (`--converge REF_SPP`).

use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};
use serde::Serialize;
use supercell::render::{Image, Renderer, View, rel_mse};

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
        let have = renderer.tracer_samples();
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
        samples: renderer.tracer_samples(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// Shows the renderer's accumulation again without adding samples, denoised or not (the
/// output images then hold it; `Renderer::show_tracer`), and waits: returns the seconds from
/// submission to completion.
pub fn show(renderer: &mut Renderer, denoised: bool) -> anyhow::Result<f64> {
    let t0 = Instant::now();
    let idx = renderer.show_tracer(denoised)?;
    wait(renderer, idx)?;
    Ok(t0.elapsed().as_secs_f64())
}

/// The reference's own share of a relMSE figure, from its two independent halves `a` and
/// `b` (the reference is their mean): with x independent of both, E[(x − ref)²] =
/// E[(x − truth)²] + Var(ref), and Var(ref) = E[(a − b)²] / 4, weighted per pixel and
/// channel as in [`rel_mse`] (against `reference`).
pub fn reference_noise(a: &Image, b: &Image, reference: &Image) -> f64 {
    let mut s = 0.0;
    for ((p, q), r) in a.linear.iter().zip(&b.linear).zip(&reference.linear) {
        for c in 0..3 {
            let (x, y, r) = (f64::from(p[c]), f64::from(q[c]), f64::from(r[c]));
            s += (x - y).powi(2) / 4.0 / (r * r + 1e-2);
        }
    }
    s / (3 * reference.linear.len().max(1)) as f64
}

/// The mean of two images of the same size, pixel by pixel (linear radiance and alpha).
pub fn mean_image(a: &Image, b: &Image) -> Image {
    let mut m = a.clone();
    for (p, q) in m.linear.iter_mut().zip(&b.linear) {
        for c in 0..4 {
            p[c] = 0.5 * (p[c] + q[c]);
        }
    }
    m
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
    /// relMSE against the reference as measured.
    rel_mse: f64,
    /// `rel_mse` less the reference's own noise (`reference_noise`): the estimate against
    /// the converged image.
    rel_mse_corrected: f64,
    /// The same image denoised (`shaders/denoise.wgsl`): relMSE against the (raw) reference.
    rel_mse_denoised: f64,
    /// `rel_mse_denoised` less the reference's own noise.
    rel_mse_denoised_corrected: f64,
    /// Seconds the filter took (submission to completion, the least of 3 runs).
    denoise_seconds: f64,
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
    /// The reference is the mean of two independent halves of `reference_spp / 2` samples
    /// (other seeds); this is its own relMSE against the converged image, estimated from
    /// the halves' difference (mean of (a − b)² / 4 / (ref² + 0.01)). Every row's
    /// `rel_mse_corrected` is its `rel_mse` less this (at least 0).
    reference_noise: f64,
    rows: Vec<ConvergeRow>,
    /// The first row at or under [`TARGET_REL_MSE`], raw.
    first_under_1e_3: Option<usize>,
    /// The first row at or under [`TARGET_REL_MSE`], corrected for the reference's noise.
    first_under_1e_3_corrected: Option<usize>,
    /// The same for the denoised images, as measured and corrected.
    first_under_1e_3_denoised: Option<usize>,
    first_under_1e_3_denoised_corrected: Option<usize>,
    /// The denoiser's knobs (`SUPERCELL_DENOISE_LEVELS`, `_SIGMA`, `_SIGMA_PER_LEVEL`,
    /// `_EPS`).
    denoise_levels: u32,
    denoise_sigma: f32,
    denoise_sigma_per_level: f32,
    denoise_eps: f32,
    /// The path tracer's work per sample (counters over `stats_spp` samples per pixel,
    /// rendered after the timed rows with counting on).
    stats_spp: u32,
    work_per_sample: std::collections::BTreeMap<&'static str, f64>,
}

/// `--converge REF_SPP`: renders a reference of `ref_spp` samples (another seed), then the
/// image again from scratch, measuring relMSE against the reference at 1, 2, 4, .. samples
/// (up to a quarter of the reference's), with the path-tracing time to each, raw and
/// denoised (the reference is raw), with the filter's time. Prints a table and writes
/// `json`. With `SUPERCELL_DENOISE_DUMP=DIR` it also writes the reference and each row's
/// accumulation there as raw little-endian f32 (for tuning the filter on the CPU).
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
    // The denoiser's pipelines too.
    show(renderer, true)?;
    let dump = std::env::var_os("SUPERCELL_DENOISE_DUMP").map(std::path::PathBuf::from);
    let dn = renderer.denoise_params();
    // The reference: two independent halves (their own seeds), whose difference measures
    // the reference's own noise.
    let half = ref_spp / 2;
    let mut halves = Vec::new();
    let mut reference_seconds = 0.0;
    for salt in [0x9e37_79b9u32, 0x85eb_ca6b] {
        let mut reference_view = view.clone();
        reference_view.settings.frame_seed = view.settings.frame_seed ^ salt;
        renderer.restart_tracer();
        let r = refine(
            renderer,
            &reference_view,
            width,
            height,
            Stop::Samples(half),
        )?;
        reference_seconds += r.seconds;
        halves.push(renderer.read_image()?);
    }
    let reference = mean_image(&halves[0], &halves[1]);
    let noise = reference_noise(&halves[0], &halves[1], &reference);
    if let Some(dir) = &dump {
        std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
        for (name, img) in [
            ("reference", &reference),
            ("half_a", &halves[0]),
            ("half_b", &halves[1]),
        ] {
            let f = dir.join(format!("{name}_{width}x{height}.f32"));
            std::fs::write(&f, bytemuck::cast_slice::<[f32; 4], u8>(&img.linear))
                .with_context(|| format!("{}", f.display()))?;
        }
    }
    let ref_rate =
        f64::from(width) * f64::from(height) * f64::from(2 * half) / reference_seconds.max(1e-9);
    println!("device: {device}");
    println!(
        "reference: 2 x {half} samples per pixel at {width}x{height} in {reference_seconds:.2} s \
         ({:.2} M samples/s); its own relMSE (from its halves' difference): {noise:.3e}",
        ref_rate / 1e6
    );
    println!("relMSE: {REL_MSE_DEFINITION}");
    println!(
        "denoiser: {} levels, sigma {} (x {} per level), eps {:e}",
        dn.levels, dn.sigma, dn.sigma_per_level, dn.eps
    );
    println!(
        "{:>6} {:>10} {:>14} {:>12} {:>12} {:>12} {:>12} {:>10}",
        "spp",
        "seconds",
        "M samples/s",
        "relMSE",
        "corrected",
        "denoised",
        "dn corrected",
        "filter ms"
    );
    renderer.restart_tracer();
    let mut rows = Vec::new();
    let mut seconds = 0.0;
    let mut spp = 1;
    while spp <= (ref_spp / 4).max(1) {
        let row = converge_row(
            renderer,
            (view, width, height),
            spp,
            (&reference, noise),
            dump.as_deref(),
            &mut seconds,
        )?;
        rows.push(row);
        spp *= 2;
    }
    let [
        first,
        first_corrected,
        first_denoised,
        first_denoised_corrected,
    ] = firsts(&rows);
    // Where a sample's work goes: a few samples more with the counters on (untimed).
    let stats_spp = (ref_spp / 4).clamp(1, 4);
    renderer.restart_tracer();
    renderer.set_tracer_stats(true);
    refine(renderer, view, width, height, Stop::Samples(stats_spp))?;
    let stats = renderer.tracer_stats()?;
    renderer.set_tracer_stats(false);
    let work_per_sample: std::collections::BTreeMap<_, _> =
        stats.per_sample().into_iter().collect();
    println!(
        "work per sample ({stats_spp} samples per pixel): {}",
        work_per_sample
            .iter()
            .map(|(k, v)| format!("{k} {v:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let report = ConvergeReport {
        device,
        scene: scene.display().to_string(),
        frame,
        width,
        height,
        max_bounces: view.settings.path_max_bounces,
        reference_spp: 2 * half,
        reference_seconds,
        warm_up_seconds: warm.seconds,
        rel_mse_definition: REL_MSE_DEFINITION,
        reference_noise: noise,
        rows,
        first_under_1e_3: first,
        first_under_1e_3_corrected: first_corrected,
        first_under_1e_3_denoised: first_denoised,
        first_under_1e_3_denoised_corrected: first_denoised_corrected,
        denoise_levels: dn.levels,
        denoise_sigma: dn.sigma,
        denoise_sigma_per_level: dn.sigma_per_level,
        denoise_eps: dn.eps,
        stats_spp,
        work_per_sample,
    };
    std::fs::write(json, serde_json::to_vec_pretty(&report)?)
        .with_context(|| format!("{}", json.display()))?;
    println!("{}", json.display());
    Ok(())
}

/// One row of `--converge`: the image refined to `spp` samples from where it was (adding
/// the time to `seconds`), its relMSE raw and denoised against `reference` (and less the
/// reference's own `noise`), the filter's best time of three; printed, and its sums
/// written to `dump` where given.
fn converge_row(
    renderer: &mut Renderer,
    (view, width, height): (&View, u32, u32),
    spp: u32,
    (reference, noise): (&Image, f64),
    dump: Option<&Path>,
    seconds: &mut f64,
) -> anyhow::Result<ConvergeRow> {
    let p = refine(renderer, view, width, height, Stop::Samples(spp))?;
    *seconds += p.seconds;
    let img = renderer.read_image()?;
    let raw = rel_mse(&img, reference);
    if let Some(dir) = dump {
        let (sums, sq) = renderer.tracer_sums()?;
        let f = dir.join(format!("sums_{spp}_{width}x{height}.f32"));
        std::fs::write(&f, bytemuck::cast_slice::<[f32; 4], u8>(&sums))
            .with_context(|| format!("{}", f.display()))?;
        let f = dir.join(format!("sq_{spp}_{width}x{height}.f32"));
        std::fs::write(&f, bytemuck::cast_slice::<f32, u8>(&sq))
            .with_context(|| format!("{}", f.display()))?;
    }
    let mut denoise_seconds = f64::INFINITY;
    for _ in 0..3 {
        denoise_seconds = denoise_seconds.min(show(renderer, true)?);
    }
    let denoised = rel_mse(&renderer.read_image()?, reference);
    let row = ConvergeRow {
        spp,
        seconds: *seconds,
        samples_per_second: f64::from(width) * f64::from(height) * f64::from(spp)
            / seconds.max(1e-9),
        rel_mse: raw,
        rel_mse_corrected: (raw - noise).max(0.0),
        rel_mse_denoised: denoised,
        rel_mse_denoised_corrected: (denoised - noise).max(0.0),
        denoise_seconds,
    };
    println!(
        "{:>6} {:>10.3} {:>14.3} {:>12.3e} {:>12.3e} {:>12.3e} {:>12.3e} {:>10.3}",
        row.spp,
        row.seconds,
        row.samples_per_second / 1e6,
        row.rel_mse,
        row.rel_mse_corrected,
        row.rel_mse_denoised,
        row.rel_mse_denoised_corrected,
        row.denoise_seconds * 1e3
    );
    Ok(row)
}

/// The first rows under [`TARGET_REL_MSE`]: raw, corrected for the reference's noise,
/// denoised, and denoised and corrected; each said on stdout.
fn firsts(rows: &[ConvergeRow]) -> [Option<usize>; 4] {
    let first = rows.iter().position(|r| r.rel_mse <= TARGET_REL_MSE);
    let first_corrected = rows
        .iter()
        .position(|r| r.rel_mse_corrected <= TARGET_REL_MSE);
    let first_denoised = rows
        .iter()
        .position(|r| r.rel_mse_denoised <= TARGET_REL_MSE);
    let first_denoised_corrected = rows
        .iter()
        .position(|r| r.rel_mse_denoised_corrected <= TARGET_REL_MSE);
    for (what, first) in [
        ("raw", first),
        ("corrected", first_corrected),
        ("denoised", first_denoised),
        ("denoised, corrected", first_denoised_corrected),
    ] {
        match first {
            Some(i) => println!(
                "relMSE ({what}) <= {TARGET_REL_MSE:e} at {} samples per pixel after {:.3} s \
             (+ {:.3} ms filter when denoised)",
                rows[i].spp,
                rows[i].seconds,
                rows[i].denoise_seconds * 1e3
            ),
            None => println!("relMSE ({what}) stayed above {TARGET_REL_MSE:e}"),
        }
    }
    [
        first,
        first_corrected,
        first_denoised,
        first_denoised_corrected,
    ]
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

    #[test]
    fn the_reference_noise_is_a_quarter_of_the_halves_squared_difference() {
        let mut a = Image::new(2, 1);
        let mut b = Image::new(2, 1);
        a.linear[0] = [1.0, 1.0, 1.0, 1.0];
        b.linear[0] = [3.0, 1.0, 1.0, 1.0];
        a.linear[1] = [0.5, 0.5, 0.5, 0.0];
        b.linear[1] = [0.5, 0.5, 0.5, 1.0];
        let m = mean_image(&a, &b);
        assert_eq!(m.linear[0], [2.0, 1.0, 1.0, 1.0]);
        assert_eq!(m.linear[1], [0.5, 0.5, 0.5, 0.5]);
        // Pixel 0, red: (3 - 1)^2 / 4 / (2^2 + 0.01); the rest agree.
        let want = 1.0 / 4.01 / 6.0;
        assert!((reference_noise(&a, &b, &m) - want).abs() < 1e-12);
        assert_eq!(reference_noise(&a, &a, &a), 0.0);
    }
}
