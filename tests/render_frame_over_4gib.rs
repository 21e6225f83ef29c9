//! A frame over 4 GiB on whatever Vulkan device is present (Mesa's lavapipe in CI, whose 26
//! parts of 128 MiB bind 3.25 GiB at once): `supercell render` draws a single-frame dataset
//! of about 4.5 GB whose shown attributes lie past byte 4 GiB of the frame, one of them
//! across part boundaries, by uploading and binding only the parts those grids span; the
//! image matches the CPU reference.
//!
//! The frame holds the generator's fourteen attributes at a small resolution (real storm
//! grids). Two of them are padded ([`render_support::padded`]: zero bytes between the root
//! and the first upper node, every node offset moved past them): cloud, not shown, to just
//! over 4 GiB, so that everything after it lies past 4 GiB, and rain, shown, by 200 MiB, so
//! that its nodes run across part boundaries. The padding costs little memory (untouched
//! zero pages) but the frame is written to disk and read back whole: on the 2-core
//! development machine's lavapipe (under load from other builds) 52 to 67 s in all (writing
//! the dataset 22 to 33 s, the command 16 to 41 s) and 5.2 GB peak resident memory (the
//! command, which reads the frame whole; this process stays under 0.3 GB).

mod render_support;

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use render_support::padded;
use supercell::dataset::{DatasetWriter, LaneSpec, Provenance};
use supercell::format::{ChecksumMode, Grid, GridType};
use supercell::render::{FrameCapacity, GpuContext, Image, ImageDiff, render_cpu};
use supercell::scene::Scene;
use supercell::synth::generate::{GenerateOptions, attribute_specs, encode_frame};
use supercell::synth::{Attribute, Storm, StormParams, default_params};

const W: u32 = 64;
const H: u32 = 48;

/// The attributes shown: rain (padded across part boundaries) and five more, all past
/// byte 4 GiB.
const SHOWN: [&str; 6] = [
    "rain",
    "wind_speed",
    "vorticity",
    "cloud_water",
    "hail",
    "reflectivity",
];

/// Bytes of the padded cloud grid (not shown): just over 4 GiB.
const CLOUD_BYTES: u64 = (4 << 30) + (8 << 20);
/// Zero bytes inserted into the rain grid (shown).
const RAIN_GAP: u64 = 200 << 20;

fn check_close(d: &ImageDiff, what: &str) {
    eprintln!("{what}: {d:?}");
    assert!(
        d.mean <= 1e-4 && d.p99 <= 1e-3 && d.frac_over_5pct <= 0.002,
        "{what}: GPU and CPU differ: {d:?}"
    );
}

/// Reads a PFM image as `Image::write_pfm` writes it (RGB, little-endian, rows bottom-up);
/// alpha and the 8-bit image are left empty (only linear RGB is compared).
fn read_pfm(path: &Path) -> Image {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = bytes.splitn(4, |&b| b == b'\n');
    assert_eq!(lines.next(), Some(&b"PF"[..]), "{}", path.display());
    let dims = std::str::from_utf8(lines.next().unwrap()).unwrap();
    let (w, h) = dims.split_once(' ').unwrap();
    let (w, h): (u32, u32) = (w.parse().unwrap(), h.parse().unwrap());
    assert_eq!(lines.next(), Some(&b"-1.0"[..]));
    let data = lines.next().unwrap();
    assert_eq!(data.len(), (w * h * 12) as usize, "{}", path.display());
    let mut linear = vec![[0.0f32; 4]; (w * h) as usize];
    for (k, px) in data.chunks_exact(12).enumerate() {
        let (x, y_up) = (k % w as usize, k / w as usize);
        let y = h as usize - 1 - y_up;
        for c in 0..3 {
            linear[y * w as usize + x][c] =
                f32::from_le_bytes(px[c * 4..][..4].try_into().unwrap());
        }
    }
    Image {
        width: w,
        height: h,
        rgba8: Vec::new(),
        linear,
    }
}

/// Peak resident memory of this process so far (Linux), for the log.
fn peak_rss() -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM"))
                .map(str::to_string)
        })
        .unwrap_or_default()
}

#[test]
fn a_frame_over_4_gib_renders_its_shown_attributes_past_4_gib() {
    let t0 = Instant::now();
    let capacity = match GpuContext::headless() {
        Ok(ctx) => FrameCapacity::of(
            &ctx.caps,
            ctx.device.limits().max_storage_buffers_per_shader_stage,
        ),
        Err(e) => {
            if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                panic!("no GPU adapter and SUPERCELL_REQUIRE_GPU is set: {e}");
            }
            eprintln!("skipping: {e}");
            return;
        }
    };

    // The generator's attributes, one frame of the mature storm, at a small resolution.
    let params = StormParams {
        resolution: 64,
        attributes: Attribute::ALL.to_vec(),
        ..default_params()
    };
    let storm = Storm::new(params.clone());
    let opts = GenerateOptions {
        grid_type: GridType::Fp16,
        // The padding moves the head's offsets: the padded grids carry no checksum.
        checksum: ChecksumMode::Disabled,
        ..GenerateOptions::default()
    };
    let encoded = encode_frame(&storm, 30, &opts).expect("the frame generates");
    let specs = attribute_specs(&params);
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names[0], "cloud");
    assert_eq!(names[1], "rain");
    let mut grids = encoded.grids;
    let cloud_gap = (CLOUD_BYTES - grids[0].len() as u64) / 4096 * 4096;
    grids[0] = padded(&grids[0], cloud_gap);
    grids[1] = padded(&grids[1], RAIN_GAP);
    eprintln!("grids generated and padded in {:.1?}", t0.elapsed());

    // The grids shown, for the CPU reference (the small ones copied, rain's zero pages
    // shared).
    let shown: Vec<Vec<u8>> = SHOWN
        .iter()
        .map(|n| grids[names.iter().position(|x| x == n).unwrap()].clone())
        .collect();

    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("big");
    let t1 = Instant::now();
    let mut w = DatasetWriter::create(
        &data,
        LaneSpec::Count(2),
        supercell::dataset::DEFAULT_CHUNK_SIZE,
        specs.clone(),
        Provenance::new("test", ["render_frame_over_4gib"]),
    )
    .unwrap();
    w.push_frame(encoded.time, grids).unwrap();
    let manifest = w.finish().unwrap();
    eprintln!("dataset written in {:.1?}", t1.elapsed());

    // The frame: over 4 GiB (4.3 to 4.6 GB), more than the device binds at once on
    // lavapipe, with every shown grid past byte 4 GiB and rain across part boundaries.
    let frame = &manifest.frames[0];
    eprintln!("frame of {} bytes; {capacity:?}", frame.slot_size);
    assert!(
        (4_300_000_000..=4_600_000_000).contains(&frame.slot_size),
        "{}",
        frame.slot_size
    );
    let grid_of = |name: &str| {
        let a = names.iter().position(|x| *x == name).unwrap();
        frame
            .grids
            .iter()
            .find(|g| g.attribute as usize == a)
            .unwrap()
    };
    for n in SHOWN {
        assert!(grid_of(n).offset >= 4 << 30, "{n} lies before byte 4 GiB");
    }
    let rain = grid_of("rain");
    let p = capacity.part_bytes;
    let parts_shown =
        capacity.parts_for_grids(SHOWN.iter().map(|n| (grid_of(n).offset, grid_of(n).size)));
    if capacity.parts_for(frame.slot_size) > capacity.max_parts as u64 {
        assert!(
            rain.offset / p < (rain.offset + rain.size - 1) / p,
            "rain spans part boundaries"
        );
    } else {
        eprintln!("this device binds the whole frame ({capacity:?})");
    }
    assert!(parts_shown <= capacity.max_parts as u64);

    // The GPU image, from the command.
    let out = dir.path().join("out");
    let t2 = Instant::now();
    let run = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("render")
        .arg(&data)
        .args([
            "--attributes",
            &SHOWN.join(","),
            "--size",
            &format!("{W}x{H}"),
        ])
        .arg("--out")
        .arg(&out)
        .arg("--linear")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    eprintln!("supercell render ({:.1?}):\n{stderr}", t2.elapsed());
    assert!(run.status.success(), "supercell render failed");
    let n_parts = frame.slot_size.div_ceil(p);
    if n_parts > 1 {
        assert!(
            stderr.contains(&format!(
                "from {parts_shown} of the frame's {n_parts} parts"
            )),
            "the command uploads only the parts the shown grids span"
        );
    }
    let gpu = read_pfm(&out.join("frame_00000.pfm"));

    // The CPU reference: the same grids, the same view (the scene the command opens).
    let ls = Scene::load(&data)
        .unwrap()
        .open(W as f32 / H as f32, Some(&SHOWN.map(String::from)))
        .unwrap();
    let parsed: Vec<Grid<'_>> = shown
        .iter()
        .map(|g| Grid::parse(g).expect("grid parses"))
        .collect();
    let refs: Vec<Option<&Grid<'_>>> = parsed.iter().map(Some).collect();
    let cpu = render_cpu(&refs, &ls.view, W, H);
    let lit = cpu.linear.iter().filter(|p| p[3] > 0.05).count();
    assert!(
        lit > cpu.linear.len() / 20,
        "only {lit} of {} pixels show anything",
        cpu.linear.len()
    );
    check_close(&gpu.diff(&cpu), "frame over 4 GiB, GPU vs CPU");
    drop(dir);
    eprintln!("{:.1?} in all; this process's {}", t0.elapsed(), peak_rss());
}
