//! The path tracer's denoiser (`shaders/denoise.wgsl`): an edge-avoiding à-trous wavelet
//! filter steered by the variance of each pixel's mean, after SVGF (Schied et al. 2017)
//! without its temporal part (the progressive accumulation is the history).
//!
//! Input: the path tracer's accumulation (per pixel the sum of `n` samples' RGB radiance and
//! coverage) and the sum of the samples' squared luminance. The filter starts from the mean
//! and the variance of its luminance (the samples' variance over `n`) and runs
//! [`DenoiseParams::levels`] levels of a 5 × 5 B3-spline kernel whose taps lie 1, 2, 4, ..
//! pixels apart, each tap weighted down by its luminance difference to the centre pixel in
//! units of the centre's (locally blurred) standard deviation. The variance is carried
//! through the levels as a weighted mean's, so each level stops at smaller steps. As
//! samples accumulate the variance of the mean shrinks, the weights stop at ever smaller
//! luminance steps, and the filtered image converges to the unbiased mean.
//!
//! [`denoise_cpu`] is the same filter on the CPU (tests hold the two equal, and tune it on
//! saved accumulations); [`denoise_gpu`] runs the GPU filter on given sums.

use std::borrow::Cow;

use bytemuck::{Pod, Zeroable};

use super::RenderError;
use super::layouts::{storage_entry, texture_entry};
use super::scoped::create_scoped;
use super::shader::denoise_source;

/// The filter's knobs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DenoiseParams {
    /// À-trous levels (taps 1, 2, 4, .. pixels apart); 0 shows the mean unfiltered.
    pub levels: u32,
    /// The luminance edge stop at the first level, in standard deviations of the mean:
    /// larger smooths more.
    pub sigma: f32,
    /// The edge stop of each level after the first, as a multiple of the one before (below
    /// 1: later, wider levels stop at smaller steps).
    pub sigma_per_level: f32,
    /// Added to the edge stop (radiance units), so that a pixel of zero variance does not
    /// divide by zero.
    pub eps: f32,
}

/// Levels at most (taps 128 pixels apart at the last).
pub const MAX_LEVELS: u32 = 8;

impl Default for DenoiseParams {
    fn default() -> Self {
        // Tuned on the storm at touchdown, 192 × 108, 4 to 64 samples per pixel (relMSE
        // against a 256-sample reference, the CPU mirror on saved accumulations): σ 4 with
        // no decay (SVGF's) left 8–35 % more error than 5 and 0.7; 6 was no better than 5
        // and let a high-contrast edge leak about 3 times as much into its dark side.
        DenoiseParams {
            levels: 5,
            sigma: 5.0,
            sigma_per_level: 0.7,
            eps: 1e-4,
        }
    }
}

impl DenoiseParams {
    /// Levels within 0..=[`MAX_LEVELS`], σ, its factor per level and ε finite and positive.
    pub fn clamped(self) -> DenoiseParams {
        let pos = |x: f32, d: f32| if x.is_finite() && x > 0.0 { x } else { d };
        let d = DenoiseParams::default();
        DenoiseParams {
            levels: self.levels.min(MAX_LEVELS),
            sigma: pos(self.sigma, d.sigma),
            sigma_per_level: pos(self.sigma_per_level, d.sigma_per_level),
            eps: pos(self.eps, d.eps),
        }
    }
}

impl DenoiseParams {
    /// The edge stop of level `k` (from 0).
    pub fn sigma_at(&self, k: u32) -> f32 {
        self.sigma * self.sigma_per_level.powi(k as i32)
    }
}

/// The luminance the filter compares (Rec. 709 weights, as path.wgsl's squared sums).
pub fn luminance(c: [f32; 4]) -> f32 {
    0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2]
}

/// The mean and the variance of its luminance per pixel (WGSL `dn_init`).
fn init(sums: &[[f32; 4]], sums_sq: &[f32], samples: u32, w: usize, h: usize) -> Level {
    let n = samples.max(1) as f32;
    let mean: Vec<[f32; 4]> = sums.iter().map(|s| s.map(|x| x / n)).collect();
    let var = (0..w * h)
        .map(|i| {
            let l = luminance(mean[i]);
            if samples >= 2 {
                (sums_sq[i] / n - l * l).max(0.0) * n / (n - 1.0) / n
            } else {
                let (x, y) = ((i % w) as i64, (i / w) as i64);
                let (mut s1, mut s2, mut k) = (0.0f32, 0.0f32, 0.0f32);
                for dy in -1..=1 {
                    for dx in -1..=1 {
                        if let Some(j) = index(x + dx, y + dy, w, h) {
                            let q = luminance(sums[j].map(|v| v / n));
                            s1 += q;
                            s2 += q * q;
                            k += 1.0;
                        }
                    }
                }
                let m = s1 / k;
                (s2 / k - m * m).max(0.0)
            }
        })
        .collect();
    Level { color: mean, var }
}

struct Level {
    color: Vec<[f32; 4]>,
    var: Vec<f32>,
}

fn index(x: i64, y: i64, w: usize, h: usize) -> Option<usize> {
    (x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h).then(|| y as usize * w + x as usize)
}

const B3: [f32; 5] = [0.0625, 0.25, 0.375, 0.25, 0.0625];
const K3: [f32; 3] = [0.25, 0.5, 0.25];

/// One à-trous level (WGSL `dn_atrous`).
fn atrous(src: &Level, step: i64, sigma: f32, eps: f32, w: usize, h: usize) -> Level {
    let mut out = Level {
        color: vec![[0.0; 4]; w * h],
        var: vec![0.0; w * h],
    };
    for i in 0..w * h {
        let (x, y) = ((i % w) as i64, (i / w) as i64);
        let (mut gv, mut gw) = (0.0f32, 0.0f32);
        for dy in -1..=1i64 {
            for dx in -1..=1i64 {
                if let Some(j) = index(x + dx, y + dy, w, h) {
                    let k = K3[(dx + 1) as usize] * K3[(dy + 1) as usize];
                    gv += k * src.var[j];
                    gw += k;
                }
            }
        }
        let lp = luminance(src.color[i]);
        let stop = sigma * (gv / gw).max(0.0).sqrt() + eps;
        let (mut sc, mut sv, mut sw) = ([0.0f32; 4], 0.0f32, 0.0f32);
        for dy in -2..=2i64 {
            for dx in -2..=2i64 {
                if let Some(j) = index(x + dx * step, y + dy * step, w, h) {
                    let c = src.color[j];
                    let wt = B3[(dx + 2) as usize]
                        * B3[(dy + 2) as usize]
                        * (-(lp - luminance(c)).abs() / stop).exp();
                    for k in 0..4 {
                        sc[k] += wt * c[k];
                    }
                    sv += wt * wt * src.var[j];
                    sw += wt;
                }
            }
        }
        out.color[i] = sc.map(|v| v / sw);
        out.var[i] = sv / (sw * sw);
    }
    out
}

/// The filter on the CPU, as the GPU runs it: `sums` and `sums_sq` are the accumulation of
/// `samples` samples per pixel of a `width` × `height` image (row-major); returns the
/// filtered mean (RGB radiance and coverage).
pub fn denoise_cpu(
    sums: &[[f32; 4]],
    sums_sq: &[f32],
    samples: u32,
    width: u32,
    height: u32,
    params: &DenoiseParams,
) -> Vec<[f32; 4]> {
    let (w, h) = (width as usize, height as usize);
    assert!(
        sums.len() >= w * h && sums_sq.len() >= w * h,
        "sums cover the image"
    );
    let p = params.clamped();
    let mut level = init(sums, sums_sq, samples, w, h);
    for k in 0..p.levels {
        level = atrous(&level, 1 << k, p.sigma_at(k), p.eps, w, h);
    }
    level.color
}

/// The filter's uniform block (WGSL `DenoiseParams`), one record per pass.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
struct DenoiseUniform {
    size: [u32; 2],
    samples: u32,
    step: u32,
    sigma: f32,
    eps: f32,
    exposure: f32,
    pad: u32,
}

/// Bytes between uniform records (the dynamic-offset alignment every device accepts).
const UNIFORM_STRIDE: u64 = 256;
/// Records: the initial pass, the levels, the presentation.
const RECORDS: u64 = MAX_LEVELS as u64 + 2;
const WG: u32 = 8;

/// What one filtering reads and writes.
pub(super) struct DenoiseInput<'a> {
    /// The accumulation (RGBA f32 per pixel) and the sums of squared luminance (f32).
    pub sums: &'a wgpu::Buffer,
    pub sums_sq: &'a wgpu::Buffer,
    pub samples: u32,
    pub width: u32,
    pub height: u32,
    /// Applied before tone mapping the 8-bit image.
    pub exposure: f32,
    /// The output images (RGBA8 and RGBA32F storage textures); None: the result stays in
    /// the filter's buffer ([`Denoiser::result`]).
    pub targets: Option<(&'a wgpu::TextureView, &'a wgpu::TextureView)>,
}

/// The filter's pipelines and ping-pong buffers.
pub(super) struct Denoiser {
    layout: wgpu::BindGroupLayout,
    init: wgpu::ComputePipeline,
    atrous: wgpu::ComputePipeline,
    present: wgpu::ComputePipeline,
    uniform: wgpu::Buffer,
    /// Two (colour, variance) buffer pairs for `pixels`, and which holds the last result.
    buffers: Option<([(wgpu::Buffer, wgpu::Buffer); 2], u64)>,
    last: usize,
    /// 1 × 1 images bound when the result is not presented.
    dummy: (wgpu::TextureView, wgpu::TextureView),
    params: DenoiseParams,
}

impl Denoiser {
    pub(super) fn new(device: &wgpu::Device, params: DenoiseParams) -> Denoiser {
        let layout = device.create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
            label: Some("supercell denoise"),
            entries: &[
                wgpu::BindGroupLayoutEntry {
                    binding: 0,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: wgpu::BufferBindingType::Uniform,
                        has_dynamic_offset: true,
                        min_binding_size: wgpu::BufferSize::new(
                            std::mem::size_of::<DenoiseUniform>() as u64,
                        ),
                    },
                    count: None,
                },
                storage_entry(1, true),
                storage_entry(2, true),
                storage_entry(3, true),
                storage_entry(4, true),
                storage_entry(5, false),
                storage_entry(6, false),
                texture_entry(7, super::LDR_FORMAT),
                texture_entry(8, super::HDR_FORMAT),
            ],
        });
        let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
            label: Some("supercell denoise"),
            source: wgpu::ShaderSource::Wgsl(Cow::Owned(denoise_source())),
        });
        let pl = device.create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
            label: Some("supercell denoise"),
            bind_group_layouts: &[Some(&layout)],
            immediate_size: 0,
        });
        let make = |entry: &str| {
            device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(entry),
                layout: Some(&pl),
                module: &module,
                entry_point: Some(entry),
                compilation_options: Default::default(),
                cache: None,
            })
        };
        let uniform = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("supercell denoise params"),
            size: UNIFORM_STRIDE * RECORDS,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let tex = |format| {
            crate::device::texture_2d(
                device,
                "supercell denoise dummy",
                (1, 1),
                format,
                wgpu::TextureUsages::STORAGE_BINDING,
            )
            .create_view(&wgpu::TextureViewDescriptor::default())
        };
        Denoiser {
            init: make("dn_init"),
            atrous: make("dn_atrous"),
            present: make("dn_present"),
            layout,
            uniform,
            buffers: None,
            last: 0,
            dummy: (tex(super::LDR_FORMAT), tex(super::HDR_FORMAT)),
            params: params.clamped(),
        }
    }

    /// The knobs in use.
    pub(super) fn params(&self) -> DenoiseParams {
        self.params
    }

    /// Sets the knobs (clamped).
    pub(super) fn set_params(&mut self, params: DenoiseParams) {
        self.params = params.clamped();
    }

    /// Records the filter into `encoder` (the uniforms go through `queue`: submit the
    /// encoder before the next `encode`).
    pub(super) fn encode(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        encoder: &mut wgpu::CommandEncoder,
        input: DenoiseInput<'_>,
    ) -> Result<(), RenderError> {
        let (w, h) = (input.width.max(1), input.height.max(1));
        let pixels = u64::from(w) * u64::from(h);
        if self.buffers.as_ref().is_none_or(|b| b.1 != pixels) {
            self.buffers = None;
            let make = |what: &'static str, bytes: u64| {
                device.create_buffer(&wgpu::BufferDescriptor {
                    label: Some(what),
                    size: pixels * bytes,
                    usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                    mapped_at_creation: false,
                })
            };
            self.buffers = Some(create_scoped(
                device,
                || format!("creating the denoiser's buffers for {w}x{h}"),
                || {
                    (
                        [
                            (
                                make("supercell denoise a", 16),
                                make("supercell denoise va", 4),
                            ),
                            (
                                make("supercell denoise b", 16),
                                make("supercell denoise vb", 4),
                            ),
                        ],
                        pixels,
                    )
                },
            )?);
        }
        let (pairs, _) = self.buffers.as_ref().expect("made above");
        let p = self.params;
        let base = DenoiseUniform {
            size: [w, h],
            samples: input.samples,
            step: 0,
            sigma: p.sigma,
            eps: p.eps,
            exposure: input.exposure,
            pad: 0,
        };
        let mut records = vec![0u8; (UNIFORM_STRIDE * RECORDS) as usize];
        for k in 0..RECORDS as usize {
            let level = (k >= 1 && k <= MAX_LEVELS as usize).then(|| k as u32 - 1);
            let u = DenoiseUniform {
                step: level.map_or(0, |l| 1 << l),
                sigma: level.map_or(p.sigma, |l| p.sigma_at(l)),
                ..base
            };
            let at = k * UNIFORM_STRIDE as usize;
            records[at..at + std::mem::size_of::<DenoiseUniform>()]
                .copy_from_slice(bytemuck::bytes_of(&u));
        }
        queue.write_buffer(&self.uniform, 0, &records);
        let (ldr, hdr) = input.targets.unwrap_or((&self.dummy.0, &self.dummy.1));
        // Group `d` reads pair 1 − d and writes pair d.
        let group = |d: usize| {
            let (src, dst) = (&pairs[1 - d], &pairs[d]);
            let entries = [
                wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &self.uniform,
                        offset: 0,
                        size: wgpu::BufferSize::new(std::mem::size_of::<DenoiseUniform>() as u64),
                    }),
                },
                wgpu::BindGroupEntry {
                    binding: 1,
                    resource: input.sums.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 2,
                    resource: input.sums_sq.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 3,
                    resource: src.0.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 4,
                    resource: src.1.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 5,
                    resource: dst.0.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 6,
                    resource: dst.1.as_entire_binding(),
                },
                wgpu::BindGroupEntry {
                    binding: 7,
                    resource: wgpu::BindingResource::TextureView(ldr),
                },
                wgpu::BindGroupEntry {
                    binding: 8,
                    resource: wgpu::BindingResource::TextureView(hdr),
                },
            ];
            device.create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some("supercell denoise"),
                layout: &self.layout,
                entries: &entries,
            })
        };
        let groups = [group(0), group(1)];
        let (gx, gy) = (w.div_ceil(WG), h.div_ceil(WG));
        let offset = |k: u32| (UNIFORM_STRIDE * u64::from(k)) as u32;
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("supercell denoise"),
            timestamp_writes: None,
        });
        // The mean into pair 0, then each level from one pair into the other.
        pass.set_pipeline(&self.init);
        pass.set_bind_group(0, Some(&groups[0]), &[offset(0)]);
        pass.dispatch_workgroups(gx, gy, 1);
        let mut last = 0;
        pass.set_pipeline(&self.atrous);
        for k in 0..p.levels {
            last = 1 - last;
            pass.set_bind_group(0, Some(&groups[last]), &[offset(k + 1)]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        if input.targets.is_some() {
            // The present pass reads the group's source pair: the group that writes the other.
            pass.set_pipeline(&self.present);
            pass.set_bind_group(0, Some(&groups[1 - last]), &[offset(MAX_LEVELS + 1)]);
            pass.dispatch_workgroups(gx, gy, 1);
        }
        self.last = last;
        Ok(())
    }

    /// The buffer holding the last filtered image (RGBA f32 per pixel).
    pub(super) fn result(&self) -> Option<&wgpu::Buffer> {
        Some(&self.buffers.as_ref()?.0[self.last].0)
    }
}

/// The GPU filter on given sums (as [`denoise_cpu`] takes them): uploads them, filters and
/// reads the result back.
#[allow(clippy::too_many_arguments)]
pub fn denoise_gpu(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    sums: &[[f32; 4]],
    sums_sq: &[f32],
    samples: u32,
    width: u32,
    height: u32,
    params: &DenoiseParams,
) -> Result<Vec<[f32; 4]>, RenderError> {
    let pixels = width as usize * height as usize;
    if width == 0 || height == 0 || sums.len() != pixels || sums_sq.len() != pixels {
        return Err(RenderError::Usage(format!(
            "denoise: {} sums and {} squared sums for a {width}x{height} image",
            sums.len(),
            sums_sq.len()
        )));
    }
    use wgpu::util::DeviceExt;
    let upload = |what, bytes: &[u8]| {
        device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some(what),
            contents: bytes,
            usage: wgpu::BufferUsages::STORAGE,
        })
    };
    let s = upload("supercell denoise sums", bytemuck::cast_slice(sums));
    let q = upload("supercell denoise squares", bytemuck::cast_slice(sums_sq));
    let mut d = Denoiser::new(device, *params);
    let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
    d.encode(
        device,
        queue,
        &mut enc,
        DenoiseInput {
            sums: &s,
            sums_sq: &q,
            samples,
            width,
            height,
            exposure: 1.0,
            targets: None,
        },
    )?;
    queue.submit([enc.finish()]);
    let result = d.result().expect("encoded");
    let bytes = crate::device::read_buffer(device, queue, result, 0, pixels as u64 * 16)
        .map_err(|e| RenderError::Gpu(e.to_string()))?;
    Ok(bytemuck::pod_collect_to_vec::<u8, [f32; 4]>(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_denoise_shader_parses_and_validates() {
        let src = denoise_source();
        let module = naga::front::wgsl::parse_str(&src)
            .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::default(),
        )
        .validate(&module)
        .unwrap_or_else(|e| panic!("{}", e.emit_to_string(&src)));
    }

    /// A flat image with noise of a known variance per sample (deterministic).
    fn noisy(w: u32, h: u32, n: u32, value: impl Fn(u32, u32) -> f32) -> (Vec<[f32; 4]>, Vec<f32>) {
        let mut state = 12345u64;
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
                let (mut s, mut q) = ([0.0f32; 4], 0.0f32);
                for _ in 0..n {
                    // Mean `value`, uniform noise of ±value/2 in each sample (grey).
                    let v = value(x, y) * (0.5 + rnd());
                    for c in &mut s[..3] {
                        *c += v;
                    }
                    s[3] += 1.0;
                    q += v * v;
                }
                sums.push(s);
                sq.push(q);
            }
        }
        (sums, sq)
    }

    fn mse(a: &[[f32; 4]], f: impl Fn(usize) -> f32) -> f64 {
        a.iter()
            .enumerate()
            .map(|(i, p)| f64::from(p[0] - f(i)).powi(2))
            .sum::<f64>()
            / a.len() as f64
    }

    #[test]
    fn a_flat_noisy_image_comes_out_much_smoother_and_unbiased() {
        let (w, h, n) = (48, 40, 4);
        let (sums, sq) = noisy(w, h, n, |_, _| 0.5);
        let raw: Vec<[f32; 4]> = sums.iter().map(|s| s.map(|v| v / n as f32)).collect();
        let out = denoise_cpu(&sums, &sq, n, w, h, &DenoiseParams::default());
        let (before, after) = (mse(&raw, |_| 0.5), mse(&out, |_| 0.5));
        assert!(after * 20.0 < before, "MSE {before:.3e} -> {after:.3e}");
        let mean = out.iter().map(|p| f64::from(p[0])).sum::<f64>() / out.len() as f64;
        assert!((mean - 0.5).abs() < 2e-3, "mean {mean}");
        // Coverage (1 everywhere) stays 1.
        assert!(out.iter().all(|p| (p[3] - 1.0).abs() < 1e-5));
    }

    #[test]
    fn a_sharp_edge_stays_sharp() {
        // Left half 0.05, right half 1.0, each noisy: the filter must not blur across.
        let (w, h, n) = (48, 32, 8);
        let value = |x: u32, _| if x < w / 2 { 0.05 } else { 1.0 };
        let (sums, sq) = noisy(w, h, n, value);
        let out = denoise_cpu(&sums, &sq, n, w, h, &DenoiseParams::default());
        // The columns either side of the edge: each pixel within its noise, and the
        // column's mean (noise averaged away) within 8 % (the variance, blurred over 3 × 3
        // pixels, takes some of the bright side's: about 3 % leaks into the dark column
        // next to the edge, 0.15 % of the bright side's value; with no edge stop at all
        // it would be half way).
        for x in [w as usize / 2 - 1, w as usize / 2] {
            let want = value(x as u32, 0);
            let column: Vec<f32> = (0..h as usize)
                .map(|y| out[y * w as usize + x][0])
                .collect();
            for (y, got) in column.iter().enumerate() {
                assert!(
                    (got - want).abs() < 0.25 * want,
                    "pixel ({x}, {y}): {got} for {want}"
                );
            }
            let mean = column.iter().sum::<f32>() / column.len() as f32;
            assert!(
                (mean - want).abs() < 0.08 * want,
                "column {x}: mean {mean} for {want}"
            );
        }
        // Two columns from the edge, nothing leaks.
        let x = w as usize / 2 - 2;
        let mean = (0..h as usize)
            .map(|y| out[y * w as usize + x][0])
            .sum::<f32>()
            / h as f32;
        assert!((mean - 0.05).abs() < 0.02 * 0.05, "column {x}: mean {mean}");
    }

    #[test]
    fn a_converged_image_is_left_almost_alone() {
        // Smooth variation plus a step, with the variance of a long accumulation.
        let (w, h, n) = (40, 30, 4096);
        let value = |x: u32, y: u32| {
            0.2 + 0.3 * ((x as f32) * 0.3).sin().abs() + if y > 15 { 0.4 } else { 0.0 }
        };
        let (sums, sq) = noisy(w, h, n, value);
        let raw: Vec<[f32; 4]> = sums.iter().map(|s| s.map(|v| v / n as f32)).collect();
        let out = denoise_cpu(&sums, &sq, n, w, h, &DenoiseParams::default());
        let worst = raw
            .iter()
            .zip(&out)
            .map(|(a, b)| ((a[0] - b[0]) / a[0]).abs())
            .fold(0.0f32, f32::max);
        assert!(worst < 0.02, "largest relative change {worst}");
    }

    #[test]
    fn no_levels_is_the_mean() {
        let (sums, sq) = noisy(8, 8, 3, |x, y| 0.1 + (x + y) as f32 * 0.01);
        let p = DenoiseParams {
            levels: 0,
            ..Default::default()
        };
        let out = denoise_cpu(&sums, &sq, 3, 8, 8, &p);
        for (o, s) in out.iter().zip(&sums) {
            assert_eq!(*o, s.map(|v| v / 3.0));
        }
    }

    #[test]
    fn the_knobs_are_clamped() {
        let p = DenoiseParams {
            levels: 99,
            sigma: f32::NAN,
            sigma_per_level: 0.0,
            eps: -1.0,
        }
        .clamped();
        assert_eq!(p.sigma_per_level, DenoiseParams::default().sigma_per_level);
        assert_eq!(p.levels, MAX_LEVELS);
        assert_eq!(p.sigma, DenoiseParams::default().sigma);
        assert_eq!(p.eps, DenoiseParams::default().eps);
    }
}
