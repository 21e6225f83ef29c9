// The tone map of every pass that writes the 8-bit image (march.wgsl, path.wgsl and
// denoise.wgsl; src/render/shader.rs appends this file to each): exposure, ACES filmic
// (Narkowicz's fit), then the sRGB encoding. The CPU reference mirrors it
// (src/render/image.rs, `aces` and `srgb_encode`).

fn aces(x: vec3<f32>) -> vec3<f32> {
    return clamp((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14), vec3<f32>(0.0), vec3<f32>(1.0));
}

fn srgb(c: vec3<f32>) -> vec3<f32> {
    let lo = c * 12.92;
    let hi = 1.055 * pow(c, vec3<f32>(1.0 / 2.4)) - 0.055;
    return select(hi, lo, c <= vec3<f32>(0.0031308));
}

// The 8-bit image's texel of a display colour `ldr` (clamped to 0..1, sRGB-encoded,
// opaque).
fn ldr_texel(ldr: vec3<f32>) -> vec4<f32> {
    return vec4<f32>(srgb(clamp(ldr, vec3<f32>(0.0), vec3<f32>(1.0))), 1.0);
}

// The 8-bit image's texel of linear radiance `c` at `exposure`.
fn tone_map(c: vec3<f32>, exposure: f32) -> vec4<f32> {
    return ldr_texel(aces(c * exposure));
}
