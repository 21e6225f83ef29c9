// The path tracer's denoiser (src/render/denoise.rs drives it and mirrors it on the CPU):
// an edge-avoiding à-trous wavelet filter steered by the variance of each pixel's mean
// (as in SVGF, without the temporal part: the accumulation is the history).
//
// `dn_init` turns the accumulation (per pixel the sum of n samples' RGB radiance and
// coverage, and the sum of their squared luminance) into the mean and the variance of its
// luminance: s² / n, s² the samples' unbiased variance; with one sample, the variance of the
// luminance over the pixel's 3 × 3 neighbours stands in for s². Each `dn_atrous` level
// then filters with the 5 × 5 B3-spline kernel (1, 4, 6, 4, 1) / 16 per axis, its taps
// `step` pixels apart (1, 2, 4, ..), each weighted by exp(−|Y_p − Y_q| / (σ · sd_p + ε))
// (σ per level, set by the driver):
// Y the luminance of the level's input, sd_p the square root of its variance blurred over
// p's 3 × 3 neighbours ((1, 2, 1) / 4 per axis). The variance goes through each level as a
// weighted mean's does (Σ w² v / (Σ w)²), so later levels stop at smaller differences. As
// samples accumulate the variance shrinks and the weights stop at ever smaller luminance
// steps: the filtered image converges to the accumulated mean. Taps outside the image are
// left out. `dn_present` writes the result to the output images as the path tracer does
// (tonemap.wgsl, appended by src/render/shader.rs).

struct DenoiseParams {
    size: vec2<u32>,
    samples: u32,    // samples per pixel in the accumulation
    step: u32,       // pixels between taps (this level)
    sigma: f32,      // luminance edge stop, in standard deviations of the mean (this level)
    eps: f32,        // added to σ · sd (radiance units): keeps a zero variance finite
    exposure: f32,   // applied before tone mapping (the path tracer's P.sky_horizon.w)
    pad: u32,
}

@group(0) @binding(0) var<uniform> D: DenoiseParams;
@group(0) @binding(1) var<storage, read> sums: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> sums_sq: array<f32>;
@group(0) @binding(3) var<storage, read> src_c: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> src_v: array<f32>;
@group(0) @binding(5) var<storage, read_write> dst_c: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> dst_v: array<f32>;
@group(0) @binding(7) var out_ldr: texture_storage_2d<rgba8unorm, write>;
@group(0) @binding(8) var out_hdr: texture_storage_2d<rgba32float, write>;

fn dn_lum(c: vec3<f32>) -> f32 {
    return dot(c, vec3<f32>(0.2126, 0.7152, 0.0722));
}

fn dn_inside(x: i32, y: i32) -> bool {
    return x >= 0 && y >= 0 && x < i32(D.size.x) && y < i32(D.size.y);
}

fn dn_index(x: i32, y: i32) -> u32 {
    return u32(y) * D.size.x + u32(x);
}

@compute @workgroup_size(8, 8, 1)
fn dn_init(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= D.size.x || gid.y >= D.size.y { return; }
    let x = i32(gid.x);
    let y = i32(gid.y);
    let i = dn_index(x, y);
    let n = f32(max(D.samples, 1u));
    let c = sums[i] / n;
    let l = dn_lum(c.rgb);
    var v = 0.0;
    if D.samples >= 2u {
        // The samples' variance (unbiased), over n: the variance of the mean.
        v = max(sums_sq[i] / n - l * l, 0.0) * n / (n - 1.0) / n;
    } else {
        // One sample: the spread of the neighbours' luminance.
        var s1 = 0.0;
        var s2 = 0.0;
        var k = 0.0;
        for (var dy = -1; dy <= 1; dy++) {
            for (var dx = -1; dx <= 1; dx++) {
                if dn_inside(x + dx, y + dy) {
                    let q = dn_lum(sums[dn_index(x + dx, y + dy)].rgb / n);
                    s1 += q;
                    s2 += q * q;
                    k += 1.0;
                }
            }
        }
        let m = s1 / k;
        v = max(s2 / k - m * m, 0.0);
    }
    dst_c[i] = c;
    dst_v[i] = v;
}

@compute @workgroup_size(8, 8, 1)
fn dn_atrous(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= D.size.x || gid.y >= D.size.y { return; }
    let x = i32(gid.x);
    let y = i32(gid.y);
    let i = dn_index(x, y);
    let k3 = array<f32, 3>(0.25, 0.5, 0.25);
    var gv = 0.0;
    var gw = 0.0;
    for (var dy = -1; dy <= 1; dy++) {
        for (var dx = -1; dx <= 1; dx++) {
            if dn_inside(x + dx, y + dy) {
                let w = k3[dx + 1] * k3[dy + 1];
                gv += w * src_v[dn_index(x + dx, y + dy)];
                gw += w;
            }
        }
    }
    let lp = dn_lum(src_c[i].rgb);
    let stop = D.sigma * sqrt(max(gv / gw, 0.0)) + D.eps;
    let h = array<f32, 5>(0.0625, 0.25, 0.375, 0.25, 0.0625);
    let s = i32(D.step);
    var sc = vec4<f32>(0.0);
    var sv = 0.0;
    var sw = 0.0;
    for (var dy = -2; dy <= 2; dy++) {
        for (var dx = -2; dx <= 2; dx++) {
            let qx = x + dx * s;
            let qy = y + dy * s;
            if dn_inside(qx, qy) {
                let j = dn_index(qx, qy);
                let c = src_c[j];
                let w = h[dx + 2] * h[dy + 2] * exp(-abs(lp - dn_lum(c.rgb)) / stop);
                sc += w * c;
                sv += w * w * src_v[j];
                sw += w;
            }
        }
    }
    // The centre tap's weight is h₀² > 0, so sw > 0.
    dst_c[i] = sc / sw;
    dst_v[i] = sv / (sw * sw);
}

@compute @workgroup_size(8, 8, 1)
fn dn_present(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= D.size.x || gid.y >= D.size.y { return; }
    let c = src_c[dn_index(i32(gid.x), i32(gid.y))];
    textureStore(out_hdr, vec2<i32>(gid.xy), c);
    textureStore(out_ldr, vec2<i32>(gid.xy), tone_map(c.rgb, D.exposure));
}
