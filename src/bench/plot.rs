//! A small PNG line plot (GB/s against threads, one line per I/O size), drawn by hand so
//! that no font or system library is needed: labels use a built-in 3×5 pixel font.

use std::path::Path;

use super::sweep::SweepPoint;
use crate::ingest::{IngestError, Result};

const W: usize = 900;
const H: usize = 560;
const LEFT: usize = 80;
const RIGHT: usize = 170;
const TOP: usize = 40;
const BOTTOM: usize = 60;

const PALETTE: [[u8; 3]; 8] = [
    [31, 119, 180],
    [255, 127, 14],
    [44, 160, 44],
    [214, 39, 40],
    [148, 103, 189],
    [140, 86, 75],
    [227, 119, 194],
    [23, 190, 207],
];

/// 3×5 glyphs, rows top to bottom, 3 bits each (MSB = left).
fn glyph(c: char) -> [u8; 5] {
    match c.to_ascii_uppercase() {
        '0' => [7, 5, 5, 5, 7],
        '1' => [2, 6, 2, 2, 7],
        '2' => [7, 1, 7, 4, 7],
        '3' => [7, 1, 7, 1, 7],
        '4' => [5, 5, 7, 1, 1],
        '5' => [7, 4, 7, 1, 7],
        '6' => [7, 4, 7, 5, 7],
        '7' => [7, 1, 1, 1, 1],
        '8' => [7, 5, 7, 5, 7],
        '9' => [7, 5, 7, 1, 7],
        '.' => [0, 0, 0, 0, 2],
        '/' => [1, 1, 2, 4, 4],
        '-' => [0, 0, 7, 0, 0],
        '(' => [1, 2, 2, 2, 1],
        ')' => [4, 2, 2, 2, 4],
        'A' => [2, 5, 7, 5, 5],
        'B' => [6, 5, 6, 5, 6],
        'C' => [7, 4, 4, 4, 7],
        'D' => [6, 5, 5, 5, 6],
        'E' => [7, 4, 6, 4, 7],
        'F' => [7, 4, 6, 4, 4],
        'G' => [7, 4, 5, 5, 7],
        'H' => [5, 5, 7, 5, 5],
        'I' => [7, 2, 2, 2, 7],
        'K' => [5, 5, 6, 5, 5],
        'L' => [4, 4, 4, 4, 7],
        'M' => [5, 7, 7, 5, 5],
        'N' => [6, 5, 5, 5, 5],
        'O' => [7, 5, 5, 5, 7],
        'P' => [7, 5, 7, 4, 4],
        'R' => [6, 5, 6, 5, 5],
        'S' => [7, 4, 7, 1, 7],
        'T' => [7, 2, 2, 2, 2],
        'U' => [5, 5, 5, 5, 7],
        'W' => [5, 5, 7, 7, 5],
        'Y' => [5, 5, 2, 2, 2],
        _ => [0; 5],
    }
}

struct Canvas {
    px: Vec<u8>,
}

impl Canvas {
    fn new() -> Canvas {
        Canvas {
            px: vec![255; W * H * 3],
        }
    }
    fn set(&mut self, x: i64, y: i64, c: [u8; 3]) {
        if x >= 0 && y >= 0 && (x as usize) < W && (y as usize) < H {
            let i = (y as usize * W + x as usize) * 3;
            self.px[i..i + 3].copy_from_slice(&c);
        }
    }
    fn line(&mut self, x0: f64, y0: f64, x1: f64, y1: f64, c: [u8; 3], thick: i64) {
        let n = ((x1 - x0).abs().max((y1 - y0).abs()).ceil() as usize).max(1);
        for i in 0..=n {
            let t = i as f64 / n as f64;
            let (x, y) = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
            for dx in -thick / 2..=thick / 2 {
                for dy in -thick / 2..=thick / 2 {
                    self.set(x.round() as i64 + dx, y.round() as i64 + dy, c);
                }
            }
        }
    }
    fn text(&mut self, x: i64, y: i64, s: &str, scale: i64, c: [u8; 3]) {
        for (k, ch) in s.chars().enumerate() {
            let g = glyph(ch);
            for (row, bits) in g.iter().enumerate() {
                for col in 0..3 {
                    if bits & (4 >> col) != 0 {
                        for sx in 0..scale {
                            for sy in 0..scale {
                                self.set(
                                    x + (k as i64 * 4 + col) * scale + sx,
                                    y + row as i64 * scale + sy,
                                    c,
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Writes the sweep as a PNG: x = threads (log2), y = GB/s, one line per I/O size.
pub fn write_png(points: &[SweepPoint], title: &str, path: &Path) -> Result<()> {
    let mut c = Canvas::new();
    let mut sizes: Vec<usize> = points.iter().map(|p| p.io_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let tmax = points.iter().map(|p| p.threads).max().unwrap_or(1).max(2);
    let ymax = points
        .iter()
        .map(|p| p.gbps)
        .fold(0.0f64, f64::max)
        .max(0.001)
        * 1.1;
    let (pw, ph) = ((W - LEFT - RIGHT) as f64, (H - TOP - BOTTOM) as f64);
    let lx = (tmax as f64).log2();
    let xof = |t: usize| LEFT as f64 + (t as f64).log2() / lx * pw;
    let yof = |g: f64| TOP as f64 + ph - g / ymax * ph;
    let grey = [200, 200, 200];
    let black = [0, 0, 0];
    // Axes, grid and labels.
    for k in 0..=5 {
        let g = ymax * k as f64 / 5.0;
        let y = yof(g);
        c.line(LEFT as f64, y, (W - RIGHT) as f64, y, grey, 1);
        c.text(8, y as i64 - 5, &format!("{g:.1}"), 2, black);
    }
    let mut t = 1;
    while t <= tmax {
        let x = xof(t);
        c.line(x, TOP as f64, x, (H - BOTTOM) as f64, grey, 1);
        c.text(
            x as i64 - 6,
            (H - BOTTOM + 8) as i64,
            &t.to_string(),
            2,
            black,
        );
        t *= 2;
    }
    c.line(
        LEFT as f64,
        TOP as f64,
        LEFT as f64,
        (H - BOTTOM) as f64,
        black,
        2,
    );
    c.line(
        LEFT as f64,
        (H - BOTTOM) as f64,
        (W - RIGHT) as f64,
        (H - BOTTOM) as f64,
        black,
        2,
    );
    c.text((W / 2 - 40) as i64, (H - 24) as i64, "THREADS", 3, black);
    c.text(8, 10, "GB/S", 3, black);
    c.text(LEFT as i64 + 60, 10, &title.to_uppercase(), 3, black);
    for (i, io) in sizes.iter().enumerate() {
        let col = PALETTE[i % PALETTE.len()];
        let mut pts: Vec<&SweepPoint> = points.iter().filter(|p| p.io_size == *io).collect();
        pts.sort_by_key(|p| p.threads);
        for w in pts.windows(2) {
            c.line(
                xof(w[0].threads),
                yof(w[0].gbps),
                xof(w[1].threads),
                yof(w[1].gbps),
                col,
                3,
            );
        }
        for p in &pts {
            c.line(
                xof(p.threads) - 3.0,
                yof(p.gbps),
                xof(p.threads) + 3.0,
                yof(p.gbps),
                col,
                5,
            );
        }
        let ly = (TOP + 20 + i * 24) as i64;
        c.line(
            (W - RIGHT + 15) as f64,
            ly as f64 + 5.0,
            (W - RIGHT + 40) as f64,
            ly as f64 + 5.0,
            col,
            3,
        );
        let label = if io % (1 << 20) == 0 {
            format!("{} MIB", io >> 20)
        } else {
            format!("{} KIB", io >> 10)
        };
        c.text((W - RIGHT + 48) as i64, ly, &label, 2, black);
    }
    let file =
        std::fs::File::create(path).map_err(|e| IngestError::io("cannot create", path, e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), W as u32, H as u32);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let err =
        |e: png::EncodingError| IngestError::io("cannot write PNG", path, std::io::Error::other(e));
    let mut w = enc.write_header().map_err(err)?;
    w.write_image_data(&c.px).map_err(err)?;
    w.finish().map_err(err)?;
    Ok(())
}
