//! Renders preview images of the synthetic storm (ignored by default: run in release with
//! `cargo test --release --test synth_preview -- --ignored`). Environment: `SYNTH_RES`,
//! `SYNTH_FRAMES` (comma-separated), `SYNTH_OUT` (a folder), and `SYNTH_CLOSEUP=1` for a
//! close-up of the tornado (a 4 km × 4 km × 2.5 km box around its ground point).

use std::path::Path;
use supercell::synth::preview::{Image, View, render};
use supercell::synth::{Storm, default_params};

/// Nearest-neighbour upscaling so that small close-ups are easy to look at.
fn upscale(img: &Image, k: u32) -> Image {
    let (w, h) = (img.width * k, img.height * k);
    let mut rgb = Vec::with_capacity((w * h * 3) as usize);
    for y in 0..h {
        for x in 0..w {
            let o = (((y / k) * img.width + x / k) * 3) as usize;
            rgb.extend_from_slice(&img.rgb[o..o + 3]);
        }
    }
    Image {
        width: w,
        height: h,
        rgb,
    }
}

fn save(img: &Image, path: &Path) {
    let file = std::fs::File::create(path).unwrap();
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), img.width, img.height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.write_header()
        .unwrap()
        .write_image_data(&img.rgb)
        .unwrap();
}

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[test]
#[ignore]
fn render_previews() {
    let res: u32 = env("SYNTH_RES", 384);
    let closeup: u32 = env("SYNTH_CLOSEUP", 0);
    let frames: Vec<u32> = std::env::var("SYNTH_FRAMES")
        .unwrap_or_else(|_| "0,24,47".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    let out = std::env::var("SYNTH_OUT").unwrap_or_else(|_| "target/synth-preview".into());
    std::fs::create_dir_all(&out).unwrap();
    let mut params = default_params();
    params.resolution = res;
    let storm = Storm::new(params.clone());
    let dx = params.voxel_size_m() as f32;
    for f in frames {
        let t = params.frame_time(f);
        let (lo, hi) = if closeup == 1 {
            let g = storm.model(t).tornado_ground;
            let c = g.map(|v| (v / dx) as u32);
            let r = (2_000.0 / dx) as u32;
            (
                [c[0] - r, c[1] - r, 0],
                [c[0] + r, c[1] + r, (2_500.0 / dx) as u32],
            )
        } else {
            ([0; 3], params.dims())
        };
        let t0 = std::time::Instant::now();
        let (vols, stats) = storm.volumes_in(t, lo, hi);
        let took = t0.elapsed();
        for (a, v) in &vols {
            eprintln!("  {a}: {} leaves", v.bricks.len());
        }
        eprintln!("  {stats:?}");
        let tag = if closeup == 1 { "closeup_" } else { "" };
        for (view, name) in [(View::Side, "side"), (View::Top, "top")] {
            let img = upscale(&render(&vols, lo, hi, dx, view), env("SYNTH_SCALE", 1));
            save(
                &img,
                &Path::new(&out).join(format!("{tag}frame{f:03}_{name}.png")),
            );
        }
        eprintln!("frame {f}: generated in {took:?}");
    }
}
