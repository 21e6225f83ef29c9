//! A tiny CPU volume renderer for looking at generated frames: cloud and rain, lit by a sun
//! overhead, composited front to back along one axis. For previews, thumbnails and tests;
//! the real renderer is the GPU ray marcher.

use super::Attribute;
use crate::format::SparseVolume;

/// Which way the preview camera looks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// From the south, looking north: x to the right, z up (the storm's profile).
    Side,
    /// From above: x to the right, y up (the hook and rain shafts in plan view).
    Top,
}

/// An 8-bit RGB image, rows top to bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 3` bytes.
    pub rgb: Vec<u8>,
}

/// Densifies one attribute over the index box [lo, lo + n) (x-major, z fastest).
fn dense(vol: &SparseVolume, lo: [u32; 3], n: [usize; 3]) -> Vec<f32> {
    let [nx, ny, nz] = n;
    let mut d = vec![0f32; nx * ny * nz];
    for b in &vol.bricks {
        for v in 0..512 {
            if !b.is_active(v) {
                continue;
            }
            let ijk = [
                b.origin[0] as i64 + (v >> 6) as i64 - lo[0] as i64,
                b.origin[1] as i64 + (v >> 3 & 7) as i64 - lo[1] as i64,
                b.origin[2] as i64 + (v & 7) as i64 - lo[2] as i64,
            ];
            if (0..3).all(|a| ijk[a] >= 0 && (ijk[a] as usize) < n[a]) {
                let [i, j, k] = ijk.map(|c| c as usize);
                d[(i * ny + j) * nz + k] = b.values[v];
            }
        }
    }
    d
}

/// Renders cloud and rain of `volumes` (a frame from [`super::Storm::frame_volumes`])
/// inside the index box `[lo, hi)`, seen along `view`, one pixel per voxel column.
/// `voxel_m` scales optical depth so images at different resolutions look alike. The sun
/// shines from the south-west at 45° elevation. Memory: three dense `f32` copies of the box.
pub fn render(
    volumes: &[(Attribute, SparseVolume)],
    lo: [u32; 3],
    hi: [u32; 3],
    voxel_m: f32,
    view: View,
) -> Image {
    let n: [usize; 3] = std::array::from_fn(|a| hi[a].saturating_sub(lo[a]) as usize);
    let [nx, ny, nz] = n;
    let empty = SparseVolume::default();
    let get = |a| {
        volumes
            .iter()
            .find(|(x, _)| *x == a)
            .map(|(_, v)| v)
            .unwrap_or(&empty)
    };
    let cloud = dense(get(Attribute::Cloud), lo, n);
    let rain = dense(get(Attribute::Rain), lo, n);
    // Extinction per metre per g/kg: cloud nearly opaque within a few hundred metres,
    // rain a translucent veil.
    let (kc, kr) = (0.004f32, 0.0009f32);
    let idx = |i: usize, j: usize, k: usize| (i * ny + j) * nz + k;
    // Sun light reaching each voxel, marched one voxel diagonally (-x, -y, +z) at a time.
    let mut light = vec![1f32; nx * ny * nz];
    for k in (0..nz).rev() {
        for i in 0..nx {
            for j in 0..ny {
                if i > 0 && j > 0 && k + 1 < nz {
                    let p = idx(i - 1, j - 1, k + 1);
                    let tau = (kc * cloud[p] + kr * rain[p]) * voxel_m * 1.73;
                    light[idx(i, j, k)] = light[p] * (-tau).exp();
                }
            }
        }
    }
    let (w, h, depth) = match view {
        View::Side => (nx, nz, ny),
        View::Top => (nx, ny, nz),
    };
    let mut rgb = vec![0u8; w * h * 3];
    for py in 0..h {
        for px in 0..w {
            let mut col = [0f32; 3];
            let mut t = 1f32;
            for s in 0..depth {
                let i = match view {
                    View::Side => idx(px, s, nz - 1 - py),
                    View::Top => idx(px, ny - 1 - py, nz - 1 - s),
                };
                let (c, r) = (cloud[i], rain[i]);
                if c <= 0.0 && r <= 0.0 {
                    continue;
                }
                let sc = kc * c * voxel_m;
                let sr = kr * r * voxel_m;
                let a = 1.0 - (-(sc + sr)).exp();
                let lit = 0.22 + 0.78 * light[i];
                // Cloud scatters white; rain is a darker blue-grey.
                let mix = sc / (sc + sr);
                let alb = [
                    0.97 * mix + 0.40 * (1.0 - mix),
                    0.97 * mix + 0.44 * (1.0 - mix),
                    1.00 * mix + 0.52 * (1.0 - mix),
                ];
                for ch in 0..3 {
                    col[ch] += t * a * alb[ch] * lit;
                }
                t *= 1.0 - a;
                if t < 0.004 {
                    break;
                }
            }
            // Sky gradient behind (side view) or dark ground (top view).
            let bg = match view {
                View::Side => {
                    let f = py as f32 / h as f32;
                    [0.18 + 0.25 * f, 0.28 + 0.27 * f, 0.45 + 0.2 * f]
                }
                View::Top => [0.16, 0.22, 0.12],
            };
            let o = (py * w + px) * 3;
            for ch in 0..3 {
                let v = col[ch] + t * bg[ch];
                rgb[o + ch] = (v.clamp(0.0, 1.0).powf(1.0 / 2.2) * 255.0 + 0.5) as u8;
            }
        }
    }
    Image {
        width: w as u32,
        height: h as u32,
        rgb,
    }
}
