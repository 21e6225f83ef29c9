//! What the player's test binaries share: skipping without a GPU (unless CI requires one),
//! their output folder, the small storm they play, the GPU they open, and the binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use supercell::app::{PathSel, PlayerConfig, PlayerGpu};

use crate::storm_support::SmallStorm;

pub mod window;

pub fn require_gpu() -> bool {
    std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some()
}

pub fn skip(why: &str) {
    if require_gpu() {
        panic!("{why} and SUPERCELL_REQUIRE_GPU is set");
    }
    eprintln!("skipping: {why}");
}

pub fn out_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("play-tests");
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A small storm (8 frames, two lanes), made once and shared by the tests.
pub fn dataset() -> PathBuf {
    // The tests of this binary run on parallel threads of one process: build it once here
    // (the temporary name below only separates processes).
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_dataset).clone()
}

fn build_dataset() -> PathBuf {
    SmallStorm {
        resolution: 48,
        frames: 8,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "play test",
    }
    .shared(&out_dir().join("storm48x8"))
}

pub fn gpu() -> Option<PlayerGpu> {
    match PlayerGpu::open(PlayerGpu::instance(), None) {
        Ok(g) => Some(g),
        Err(e) => {
            skip(&format!("no GPU adapter ({e})"));
            None
        }
    }
}

/// A player of 64 × 48 pixels on the host path with 2 reading threads.
pub fn small_config() -> PlayerConfig {
    PlayerConfig {
        width: 64,
        height: 48,
        path: PathSel::Host,
        threads: 2,
        ..PlayerConfig::default()
    }
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_supercell")
}

pub fn read_png(p: &Path) -> (u32, u32, Vec<u8>) {
    let dec = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(p).unwrap()));
    let mut r = dec.read_info().unwrap();
    let mut buf = vec![0; r.output_buffer_size().unwrap()];
    let info = r.next_frame(&mut buf).unwrap();
    assert_eq!(info.bit_depth, png::BitDepth::Eight);
    let ch = match info.color_type {
        png::ColorType::Rgba => 4,
        png::ColorType::Rgb => 3,
        other => panic!("unexpected PNG colour type {other:?}"),
    };
    let mut rgb = Vec::with_capacity((info.width * info.height * 3) as usize);
    for px in buf[..info.buffer_size()].chunks_exact(ch) {
        rgb.extend_from_slice(&px[..3]);
    }
    (info.width, info.height, rgb)
}

/// An X display for the window tests: `DISPLAY`, or an Xvfb started by the test (killed on
/// drop).
pub struct Display {
    pub name: String,
    child: Option<std::process::Child>,
}

impl Drop for Display {
    fn drop(&mut self) {
        if let Some(c) = self.child.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// `DISPLAY` when set, else an Xvfb of the test's own (1280 × 1024); `None` when neither.
pub fn display() -> Option<Display> {
    if let Some(d) = std::env::var_os("DISPLAY").filter(|d| !d.is_empty()) {
        return Some(Display {
            name: d.to_string_lossy().into_owned(),
            child: None,
        });
    }
    own_xvfb(1280, 1024)
}

/// An Xvfb of this test's own with one screen of `w` × `h` (what a fullscreen kiosk fills),
/// on a display number Xvfb picks; `None` without Xvfb.
pub fn own_xvfb(w: u32, h: u32) -> Option<Display> {
    use std::io::BufRead;
    let mut child = std::process::Command::new("Xvfb")
        .args(["-displayfd", "1", "-screen", "0", &format!("{w}x{h}x24")])
        .args(["-nolisten", "tcp"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    // Xvfb writes the display number it picked once it accepts connections.
    let mut n = String::new();
    let read = std::io::BufReader::new(child.stdout.as_mut()?).read_line(&mut n);
    let d = Display {
        name: format!(":{}", n.trim()),
        child: Some(child),
    };
    (read.is_ok() && n.trim().parse::<u32>().is_ok()).then_some(d)
}

/// Mean absolute difference (0..255) of two RGB images of the same size.
pub fn mean_abs_diff(a: &[u8], b: &[u8]) -> f64 {
    assert_eq!(a.len(), b.len());
    let sum: u64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| u64::from(x.abs_diff(*y)))
        .sum();
    sum as f64 / a.len().max(1) as f64
}

/// Mean absolute difference (0..255) of two RGB images `w` pixels wide over the pixel box
/// `[x0, x1) × [y0, y1)`.
pub fn mean_abs_diff_in(a: &[u8], b: &[u8], w: u32, (x0, y0, x1, y1): (u32, u32, u32, u32)) -> f64 {
    let mut sum = 0u64;
    let mut n = 0u64;
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y * w + x) * 3) as usize;
            for c in 0..3 {
                sum += u64::from(a[i + c].abs_diff(b[i + c]));
                n += 1;
            }
        }
    }
    sum as f64 / n.max(1) as f64
}
