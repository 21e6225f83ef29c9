//! What the player's test binaries share: skipping without a GPU (unless CI requires one),
//! their output folder, the small storm they play, the GPU they open, and the binary.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use supercell::app::PlayerGpu;

use crate::storm_support::SmallStorm;

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
