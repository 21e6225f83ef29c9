//! A rendered image: tone-mapped 8-bit RGBA plus the linear float image, PNG and PFM output,
//! and image comparison for tests.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use super::RenderError;

/// A rendered image, rows top to bottom.
#[derive(Clone, Debug, PartialEq)]
pub struct Image {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Tone-mapped sRGB, 4 bytes per pixel.
    pub rgba8: Vec<u8>,
    /// Linear radiance; alpha is coverage (1 − transmittance) in shaded mode.
    pub linear: Vec<[f32; 4]>,
}

/// Differences between two images' linear RGB, per channel.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ImageDiff {
    /// Largest absolute difference.
    pub max: f32,
    /// Mean absolute difference.
    pub mean: f32,
    /// 99th percentile of the per-pixel largest channel difference.
    pub p99: f32,
    /// Fraction of pixels whose largest channel difference exceeds 0.05.
    pub frac_over_5pct: f32,
}

impl Image {
    /// A black image.
    pub fn new(width: u32, height: u32) -> Image {
        let n = width as usize * height as usize;
        Image {
            width,
            height,
            rgba8: vec![0; n * 4],
            linear: vec![[0.0; 4]; n],
        }
    }

    /// Writes the 8-bit image as PNG (sRGB).
    pub fn write_png(&self, path: &Path) -> Result<(), RenderError> {
        let io = |e: std::io::Error| RenderError::Io(format!("{}: {e}", path.display()));
        let f = BufWriter::new(File::create(path).map_err(io)?);
        let mut enc = png::Encoder::new(f, self.width, self.height);
        enc.set_color(png::ColorType::Rgba);
        enc.set_depth(png::BitDepth::Eight);
        enc.set_source_srgb(png::SrgbRenderingIntent::Perceptual);
        let mut w = enc
            .write_header()
            .map_err(|e| RenderError::Io(format!("{}: {e}", path.display())))?;
        w.write_image_data(&self.rgba8)
            .map_err(|e| RenderError::Io(format!("{}: {e}", path.display())))?;
        w.finish()
            .map_err(|e| RenderError::Io(format!("{}: {e}", path.display())))
    }

    /// Writes the linear image as a colour PFM (portable float map: little-endian f32 RGB,
    /// rows bottom to top as the format wants).
    pub fn write_pfm(&self, path: &Path) -> Result<(), RenderError> {
        let io = |e: std::io::Error| RenderError::Io(format!("{}: {e}", path.display()));
        let mut f = BufWriter::new(File::create(path).map_err(io)?);
        write!(f, "PF\n{} {}\n-1.0\n", self.width, self.height).map_err(io)?;
        for y in (0..self.height as usize).rev() {
            let row = &self.linear[y * self.width as usize..][..self.width as usize];
            for p in row {
                for c in &p[..3] {
                    f.write_all(&c.to_le_bytes()).map_err(io)?;
                }
            }
        }
        f.flush().map_err(io)
    }

    /// Compares the linear RGB of two images of the same size.
    pub fn diff(&self, other: &Image) -> ImageDiff {
        assert_eq!(
            (self.width, self.height),
            (other.width, other.height),
            "image sizes differ"
        );
        let mut per_pixel: Vec<f32> = Vec::with_capacity(self.linear.len());
        let (mut max, mut sum) = (0.0f32, 0.0f64);
        for (a, b) in self.linear.iter().zip(&other.linear) {
            let mut m = 0.0f32;
            for c in 0..3 {
                let d = (a[c] - b[c]).abs();
                let d = if d.is_nan() { f32::INFINITY } else { d };
                m = m.max(d);
                sum += f64::from(d);
            }
            max = max.max(m);
            per_pixel.push(m);
        }
        per_pixel.sort_by(f32::total_cmp);
        let n = per_pixel.len().max(1);
        let p99 = crate::probe::percentile(&per_pixel, 0.99);
        let over = per_pixel.iter().filter(|&&d| d > 0.05).count();
        ImageDiff {
            max,
            mean: (sum / (3.0 * n as f64)) as f32,
            p99,
            frac_over_5pct: over as f32 / n as f32,
        }
    }
}

/// relMSE of `x` against `reference`: the mean over pixels and RGB channels of
/// (x − ref)² / (ref² + 0.01), on linear radiance before exposure (the 0.01 keeps dark
/// pixels from dominating). `render --converge` reports it; the path tracer's tests use it.
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

/// ACES filmic curve (Narkowicz's fit), as the shader applies it.
pub fn aces(x: f32) -> f32 {
    ((x * (2.51 * x + 0.03)) / (x * (2.43 * x + 0.59) + 0.14)).clamp(0.0, 1.0)
}

/// Linear → sRGB transfer, as the shader applies it.
pub fn srgb_encode(c: f32) -> f32 {
    if c <= 0.003_130_8 {
        c * 12.92
    } else {
        1.055 * c.powf(1.0 / 2.4) - 0.055
    }
}
