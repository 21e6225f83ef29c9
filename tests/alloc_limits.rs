//! Sizes that come from input (a manifest's slot and chunk sizes, `--slots`, `--size`) are
//! checked against what the machine and the GPU can give before anything is allocated: the
//! `supercell` commands fail with an error naming the flag or file and the numbers, never
//! abort, panic, hang or get killed.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
use supercell::synth::{GenerateOptions, default_params, generate_dataset};

/// Address space given to runs that must not allocate what their input claims (a process
/// that tried would fail the allocation and abort instead of exhausting the test machine).
const ADDRESS_SPACE_LIMIT: u64 = 4 << 30;

/// Runs `supercell` with `args`; with `limit_memory`, under [`ADDRESS_SPACE_LIMIT`]. Kills
/// it and fails the test after `timeout`.
fn run(args: &[&str], limit_memory: bool, timeout: Duration) -> Output {
    use std::os::unix::process::CommandExt;
    // `SUPERCELL_BIN` on the GPU machine, where this test travels without the build tree.
    let bin =
        std::env::var_os("SUPERCELL_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_supercell").into());
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env("XDG_RUNTIME_DIR", std::env::temp_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if limit_memory {
        // SAFETY: the closure runs in the forked child before exec and only calls
        // setrlimit, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: ADDRESS_SPACE_LIMIT as libc::rlim_t,
                    rlim_max: ADDRESS_SPACE_LIMIT as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().expect("run supercell");
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait for supercell").is_some() {
            return child.wait_with_output().expect("collect output");
        }
        if start.elapsed() > timeout {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collect output");
            panic!(
                "supercell {args:?} did not finish in {timeout:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The run failed cleanly (exit status 1, not a signal or a panic) with every `expect` in
/// its error.
fn failed_cleanly(args: &[&str], out: &Output, expect: &[&str]) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?} must fail cleanly, not abort or be killed ({}): {err}",
        out.status
    );
    for e in expect {
        assert!(err.contains(e), "{args:?}: expected {e:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

/// A one-frame storm dataset on one lane (real grids: it renders).
fn storm(dir: &Path) {
    let mut p = default_params();
    p.resolution = 16;
    p.frames = 1;
    generate_dataset(
        &p,
        &GenerateOptions::default(),
        dir,
        LaneSpec::Count(1),
        8 << 20,
        Provenance::new("alloc_limits test", ["16"]),
        |_| {},
    )
    .expect("storm dataset");
}

/// Rewrites `dir`'s one-frame, one-lane manifest so that the frame is one `bytes`-byte
/// extent of a sparse lane file of that size: every size agrees, only memory is missing.
fn make_frame_huge(dir: &Path, bytes: u64) {
    let mpath = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["chunk_size"] = bytes.into();
    m["frames"][0]["slot_size"] = bytes.into();
    m["frames"][0]["extents"] = serde_json::json!([[0, 0, 0, bytes, 0, 0]]);
    assert_eq!(m["lanes"][0]["files"].as_array().unwrap().len(), 1);
    m["lanes"][0]["files"][0]["size"] = bytes.into();
    let lane = dir
        .join(m["lanes"][0]["path"].as_str().unwrap())
        .join(m["lanes"][0]["files"][0]["name"].as_str().unwrap());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lane)
        .unwrap()
        .set_len(bytes)
        .unwrap();
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
}

/// A dataset of `frames` opaque frames of `frame_bytes` each, on two lanes.
fn opaque(dir: &Path, frames: u8, frame_bytes: usize) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(2),
        1 << 20,
        vec![AttributeSpec::new("density")],
        Provenance::new("alloc_limits test", ["x"]),
    )
    .unwrap();
    for f in 0..frames {
        w.push_frame_opaque(f64::from(f), vec![vec![f + 1; frame_bytes]])
            .unwrap();
    }
    w.finish().unwrap();
}

#[test]
fn info_refuses_a_64_gib_frame_instead_of_aborting() {
    let tmp = tempfile::tempdir().unwrap();
    storm(tmp.path());
    make_frame_huge(tmp.path(), 64 << 30);
    let args = ["info", tmp.path().to_str().unwrap()];
    let out = run(&args, true, Duration::from_secs(120));
    failed_cleanly(&args, &out, &["problems found"]);
    let err = String::from_utf8_lossy(&out.stderr);
    for e in ["frame 0", "68719476736 bytes", "can get at most"] {
        assert!(err.contains(e), "expected {e:?} in {err}");
    }
}

/// Without `--slots`, a frame so large that not even the fewest slots fit the memory is
/// refused naming the frame, its bytes and the memory available (bench and play), before
/// anything is allocated.
#[test]
fn a_frame_that_fits_no_slot_configuration_is_refused_with_the_memory() {
    let tmp = tempfile::tempdir().unwrap();
    storm(tmp.path());
    // One such frame fits in memory (the dataset opens), two slots of it do not.
    let bytes = (supercell::memory::available().bytes / 4 * 3).next_multiple_of(4096);
    make_frame_huge(tmp.path(), bytes);
    let ds = tmp.path().to_str().unwrap();
    let json = tmp.path().join("play.json");
    let expect = [
        format!("frame 0 of {bytes} bytes"),
        "fits no slot configuration".to_string(),
        "host memory".to_string(),
        "available".to_string(),
    ];
    let expect: Vec<&str> = expect.iter().map(String::as_str).collect();
    let args = ["bench", ds, "--engine", "cpu-only", "--quiet"];
    failed_cleanly(&args, &run(&args, false, Duration::from_secs(120)), &expect);
    if render_limits().is_some() {
        let args = [
            "play",
            ds,
            "--headless",
            "--frames",
            "1",
            "--json",
            json.to_str().unwrap(),
        ];
        // On a device whose parts are small (lavapipe: 128 MiB) the renderer's part count
        // refuses it first, also naming the frame and its bytes.
        let out = run(&args, false, Duration::from_secs(120));
        failed_cleanly(&args, &out, &expect[..1]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            expect.iter().all(|e| err.contains(e)) || err.contains("the renderer binds at most"),
            "{err}"
        );
    }
}

#[test]
fn bench_refuses_more_slots_than_memory() {
    let tmp = tempfile::tempdir().unwrap();
    // 16 MiB frames: 100000 slots are 1.6 TB, more than any test machine has.
    opaque(tmp.path(), 2, 16 << 20);
    let args = [
        "bench",
        tmp.path().to_str().unwrap(),
        "--engine",
        "cpu-only",
        "--slots",
        "100000",
        "--quiet",
    ];
    let out = run(&args, false, Duration::from_secs(120));
    failed_cleanly(
        &args,
        &out,
        &["--slots 100000", "16777216 bytes", "can get at most"],
    );
}

#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn bench_refuses_more_device_slots_than_the_gpu_has() {
    let tmp = tempfile::tempdir().unwrap();
    // 16 MiB frames: 100000 device slots are 1.6 TB, more than any GPU has.
    opaque(tmp.path(), 2, 16 << 20);
    let args = [
        "bench",
        tmp.path().to_str().unwrap(),
        "--engine",
        "staged",
        "--slots",
        "100000",
        "--quiet",
    ];
    let out = run(&args, false, Duration::from_secs(120));
    failed_cleanly(
        &args,
        &out,
        &[
            "--slots 100000",
            "device ring slots of 16777216 bytes",
            "free",
        ],
    );
}

#[test]
fn bench_with_any_accepted_slot_count_finishes() {
    let tmp = tempfile::tempdir().unwrap();
    opaque(tmp.path(), 3, 100_000);
    let ds = tmp.path().to_str().unwrap();
    let bench = |slots: &'static str| {
        let args = [
            "bench", ds, "--engine", "cpu-only", "--slots", slots, "--frames", "7", "--quiet",
        ];
        (args, run(&args, false, Duration::from_secs(60)))
    };
    // One slot cannot stream (the frame shown holds it): refused, not a hang.
    let (args, out) = bench("1");
    failed_cleanly(&args, &out, &["--slots 1", "at least 2"]);
    for slots in ["2", "3", "8"] {
        let (_, out) = bench(slots);
        assert!(
            out.status.success(),
            "--slots {slots} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Whether a GPU adapter (lavapipe, in CI) is here; without one the render tests have
/// nothing to check, unless `SUPERCELL_REQUIRE_GPU` says there must be one.
fn render_limits() -> Option<wgpu::Limits> {
    match supercell::render::GpuContext::headless() {
        Ok(ctx) => Some(ctx.device.limits()),
        Err(e) => {
            if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_some() {
                panic!("no GPU adapter and SUPERCELL_REQUIRE_GPU is set: {e}");
            }
            eprintln!("skipping: {e}");
            None
        }
    }
}

#[test]
fn render_refuses_an_image_the_device_cannot_hold() {
    let Some(limits) = render_limits() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    storm(&ds);
    let out_dir = tmp.path().join("out");
    let render = |size: &str| {
        let args = [
            "render",
            ds.to_str().unwrap(),
            "--size",
            size,
            "--out",
            out_dir.to_str().unwrap(),
        ];
        let out = run(&args, false, Duration::from_secs(300));
        (args.map(String::from), out)
    };
    // 16384 × 16384: its linear image alone is 4 GiB, more than the largest buffer of
    // lavapipe (and of most GPUs) can read back.
    let (args, out) = render("16384x16384");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    failed_cleanly(&args, &out, &["--size 16384x16384"]);
    // One pixel over the device's largest texture.
    let over = limits.max_texture_dimension_2d + 1;
    let size = format!("{over}x16");
    let (args, out) = render(&size);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    failed_cleanly(
        &args,
        &out,
        &[
            &format!("--size {size}"),
            &format!("1 to {} pixels", limits.max_texture_dimension_2d),
        ],
    );
    // A small image still renders.
    let (_, out) = render("32x16");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A frame whose shown grids span more parts than the renderer binds at once (its parts of
/// the device's part size) is refused before it is read, naming the frame, the attributes,
/// their bytes and the limit; below that limit a frame larger than the largest buffer
/// renders in parts (`render_gpu` checks the picture; `render_frame_over_4gib` a frame over
/// what the device binds whose shown grids fit).
#[test]
fn render_refuses_a_frame_over_what_the_device_binds() {
    let Some(ctx) = supercell::render::GpuContext::headless().ok() else {
        render_limits();
        return;
    };
    let r = supercell::render::Renderer::new(&ctx.device, &ctx.queue).expect("renderer");
    let (max, max_parts) = (r.max_frame_bytes(), r.max_parts());
    drop(r);
    drop(ctx);
    let tmp = tempfile::tempdir().unwrap();
    storm(tmp.path());
    let bytes = (max + 1).next_multiple_of(4096);
    make_frame_huge(tmp.path(), bytes);
    // The last grid (grids do not overlap) claims the rest of the frame; it is shown.
    let mpath = tmp.path().join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    let grids = m["frames"][0]["grids"].as_array_mut().unwrap();
    let last = grids
        .iter_mut()
        .max_by_key(|g| g["offset"].as_u64().unwrap())
        .expect("a grid");
    let size = bytes - last["offset"].as_u64().unwrap();
    last["size"] = size.into();
    let attribute = last["attribute"].as_u64().unwrap() as usize;
    let name = m["attributes"][attribute]["name"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    let out_dir = tmp.path().join("out");
    let args = [
        "render",
        tmp.path().to_str().unwrap(),
        "--attributes",
        &name,
        "--size",
        "32x16",
        "--out",
        out_dir.to_str().unwrap(),
    ];
    let out = run(&args, false, Duration::from_secs(120));
    failed_cleanly(
        &args,
        &out,
        &[
            "manifest.json",
            "frame 0",
            &format!("{name} {size} bytes"),
            "show fewer attributes",
            &format!("at most {max_parts} parts ({max} bytes)"),
        ],
    );
}

#[test]
fn play_refuses_one_slot_instead_of_waiting_forever() {
    let tmp = tempfile::tempdir().unwrap();
    storm(tmp.path());
    let json = tmp.path().join("play.json");
    let args = [
        "play",
        tmp.path().to_str().unwrap(),
        "--headless",
        "--frames",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--slots",
        "1",
    ];
    let out = run(&args, false, Duration::from_secs(60));
    failed_cleanly(&args, &out, &["--slots 1", "at least 2"]);
}

#[test]
fn play_refuses_more_slots_than_memory() {
    if render_limits().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    opaque(tmp.path(), 2, 16 << 20);
    let json = tmp.path().join("play.json");
    let args = [
        "play",
        tmp.path().to_str().unwrap(),
        "--headless",
        "--frames",
        "3",
        "--json",
        json.to_str().unwrap(),
        "--slots",
        "100000",
    ];
    let out = run(&args, false, Duration::from_secs(120));
    failed_cleanly(
        &args,
        &out,
        &["--slots 100000", "16777216 bytes", "can get at most"],
    );
}
