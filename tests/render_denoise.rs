//! The path tracer's denoiser (`shaders/denoise.wgsl`) on whatever Vulkan device is present
//! (lavapipe in CI):
//!
//! - the GPU filter computes what its CPU mirror (`denoise_cpu`) does, on a synthetic
//!   accumulation with flat regions, a gradient and sharp edges, at 1 sample (the spatial
//!   variance) and at 8;
//! - the renderer's denoised output is the CPU filter of its own accumulation, and its raw
//!   output the accumulation's mean;
//! - on a path-traced box of scattering medium, the filter lowers relMSE against a
//!   256-sample reference several times at 4 samples, and leaves a 256-sample image almost
//!   as it was.

mod render_support;

use render_support::{gpu, grey_path_view, solid_box_grid};
use supercell::render::{DenoiseParams, Image, View, denoise_cpu, denoise_gpu, rel_mse};

/// A synthetic accumulation of `n` samples: a dark flat left third, a bright flat right
/// third, a gradient between, a disc of another level, each sample noisy (deterministic).
fn synthetic(w: u32, h: u32, n: u32) -> (Vec<[f32; 4]>, Vec<f32>) {
    let mut state = 7u64;
    let mut rnd = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 40) as f32) / (1u64 << 24) as f32
    };
    let mut sums = Vec::new();
    let mut sq = Vec::new();
    for y in 0..h {
        for x in 0..w {
            let t = x as f32 / w as f32;
            let mut v = if t < 0.33 {
                0.02
            } else if t > 0.66 {
                1.5
            } else {
                0.02 + (t - 0.33) * 4.0
            };
            let (dx, dy) = (x as f32 - w as f32 * 0.5, y as f32 - h as f32 * 0.5);
            if dx * dx + dy * dy < 36.0 {
                v = 0.4;
            }
            let (mut s, mut q) = ([0.0f32; 4], 0.0f32);
            for _ in 0..n {
                let e = v * (0.2 + 1.6 * rnd());
                let c = [e, e * 0.9, e * 0.8];
                s[0] += c[0];
                s[1] += c[1];
                s[2] += c[2];
                s[3] += if rnd() < 0.7 { 1.0 } else { 0.0 };
                let l = 0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2];
                q += l * l;
            }
            sums.push(s);
            sq.push(q);
        }
    }
    (sums, sq)
}

fn assert_close(got: &[[f32; 4]], want: &[[f32; 4]], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}");
    for (i, (a, b)) in got.iter().zip(want).enumerate() {
        for c in 0..4 {
            assert!(
                (a[c] - b[c]).abs() <= 2e-4 * (1.0 + b[c].abs()),
                "{what}: pixel {i} channel {c}: GPU {} CPU {}",
                a[c],
                b[c]
            );
        }
    }
}

#[test]
fn the_gpu_filter_is_the_cpu_filter() {
    let Some(g) = gpu() else { return };
    let (w, h) = (37, 23);
    for n in [1, 8] {
        let (sums, sq) = synthetic(w, h, n);
        for p in [
            DenoiseParams::default(),
            DenoiseParams {
                levels: 2,
                sigma: 1.0,
                sigma_per_level: 1.5,
                eps: 1e-3,
            },
        ] {
            let cpu = denoise_cpu(&sums, &sq, n, w, h, &p);
            let gpu = denoise_gpu(&g.ctx.device, &g.ctx.queue, &sums, &sq, n, w, h, &p).unwrap();
            assert_close(&gpu, &cpu, &format!("{n} samples, {p:?}"));
        }
    }
}

/// The renderer's settings come in as one value (`Renderer::with_config`, made by the
/// binary from docs/SETTINGS.md's variables): the denoiser and the path kernel use what it
/// says, not the environment.
#[test]
fn the_configuration_reaches_the_denoiser_and_the_path_kernel() {
    use supercell::render::{RenderConfig, Renderer, TracerKnobs};
    let Some(g) = gpu() else { return };
    let config = RenderConfig {
        path_knobs: TracerKnobs {
            cache_cells: true,
            skip_levels: 0,
            ..TracerKnobs::default()
        },
        qmc_dims: 2,
        samples_per_dispatch: Some(2),
        denoise: DenoiseParams {
            levels: 2,
            sigma: 3.0,
            sigma_per_level: 0.5,
            eps: 1e-3,
        },
    };
    assert_ne!(config.path_knobs, TracerKnobs::default());
    let caps = g.ctx.caps.clone();
    let mut r = Renderer::with_config(&g.ctx.device, &g.ctx.queue, caps, config, None).unwrap();
    assert_eq!(r.denoise_params(), config.denoise);
    assert_eq!(r.tracer_knobs(), config.path_knobs);
    assert_eq!(config.samples_per_dispatch_on(&g.ctx.caps), 2);
    // The default configuration: one sample per dispatch on a software rasteriser.
    let d = RenderConfig::default();
    let want = if g.ctx.caps.software { 1 } else { 4 };
    assert_eq!(d.samples_per_dispatch_on(&g.ctx.caps), want);
}

const N: i32 = 32;
const VOXEL: f32 = 0.1;
const W: u32 = 40;
const H: u32 = 28;

fn box_grid() -> Vec<u8> {
    solid_box_grid(N, VOXEL)
}

fn box_view(grid: &[u8]) -> View {
    let mut v = grey_path_view(grid, VOXEL, 0.9, 2.0, W, H);
    v.camera.zoom(1.2);
    v.settings.path_max_bounces = 4;
    v
}

/// Path traces `spp` samples afresh with `seed`; returns the raw and the denoised image.
fn raw_and_denoised(
    g: &mut render_support::TestGpu,
    grid: &[u8],
    v: &View,
    spp: u32,
    seed: u32,
) -> (Image, Image) {
    let mut v = v.clone();
    v.settings.path_samples_per_frame = spp;
    v.settings.frame_seed = seed;
    g.r.restart_tracer();
    let raw = g.render(&[grid], &v, W, H);
    assert_eq!(g.r.tracer_samples(), spp);
    g.r.show_tracer(true).unwrap();
    let denoised = g.r.read_image().unwrap();
    (raw, denoised)
}

#[test]
fn the_renderer_denoises_its_accumulation_and_the_filter_helps() {
    let Some(mut g) = gpu() else { return };
    let grid = box_grid();
    let v = box_view(&grid);
    let params = g.r.denoise_params();

    // The denoised output is the CPU filter of the renderer's own sums; the raw output and
    // a plain `show_tracer(false)` are their mean.
    let (raw, denoised) = raw_and_denoised(&mut g, &grid, &v, 4, 1);
    let (sums, sq) = g.r.tracer_sums().unwrap();
    assert_close(
        &denoised.linear,
        &denoise_cpu(&sums, &sq, 4, W, H, &params),
        "renderer",
    );
    let mean: Vec<[f32; 4]> = sums.iter().map(|s| s.map(|x| x / 4.0)).collect();
    assert_close(&raw.linear, &mean, "raw output");
    g.r.show_tracer(false).unwrap();
    assert_close(
        &g.r.read_image().unwrap().linear,
        &mean,
        "show_tracer(false)",
    );
    // The renderer's switch: a render then shows the denoised mean itself.
    g.r.set_tracer_denoise(true);
    let mut same = v.clone();
    same.settings.path_samples_per_frame = 4;
    same.settings.frame_seed = 1;
    g.r.restart_tracer();
    let shown = g.render(&[&grid], &same, W, H);
    assert_close(&shown.linear, &denoised.linear, "set_tracer_denoise(true)");
    g.r.set_tracer_denoise(false);

    // Against a 256-sample reference (two halves of other seeds, its own noise removed).
    let (a, a_dn) = raw_and_denoised(&mut g, &grid, &v, 128, 2);
    let (b, _) = raw_and_denoised(&mut g, &grid, &v, 128, 3);
    let mut reference = a.clone();
    let mut ref_noise = 0.0;
    for ((r, p), q) in reference.linear.iter_mut().zip(&a.linear).zip(&b.linear) {
        for c in 0..4 {
            r[c] = 0.5 * (p[c] + q[c]);
        }
        for c in 0..3 {
            let (x, y, m) = (f64::from(p[c]), f64::from(q[c]), f64::from(r[c]));
            ref_noise += (x - y).powi(2) / 4.0 / (m * m + 1e-2);
        }
    }
    ref_noise /= (3 * reference.linear.len()) as f64;
    let raw_err = (rel_mse(&raw, &reference) - ref_noise).max(0.0);
    let dn_err = (rel_mse(&denoised, &reference) - ref_noise).max(1e-12);
    eprintln!(
        "4 samples: relMSE raw {raw_err:.3e}, denoised {dn_err:.3e} ({:.1}x); reference noise \
         {ref_noise:.3e}",
        raw_err / dn_err
    );
    assert!(
        raw_err > 4.0 * dn_err,
        "the filter lowered relMSE only {:.2}x",
        raw_err / dn_err
    );
    // A long accumulation is left almost alone: the filter moves a 128-sample image by
    // about its own noise (relMSE ≈ 2 × the 256-sample reference's), not more, and the
    // result is closer to an independent image than the raw one is.
    let change = rel_mse(&a_dn, &a);
    let (raw_b, dn_b) = (rel_mse(&a, &b), rel_mse(&a_dn, &b));
    eprintln!(
        "128 samples: the filter changed the image by relMSE {change:.3e} (its noise \
         {:.3e}); against the other half: raw {raw_b:.3e}, denoised {dn_b:.3e}",
        2.0 * ref_noise
    );
    assert!(
        change < 1.5 * 2.0 * ref_noise,
        "the filter changed a 128-sample image by {change:.3e} (its noise: {:.3e})",
        2.0 * ref_noise
    );
    assert!(dn_b < raw_b, "denoised {dn_b:.3e}, raw {raw_b:.3e}");
}
