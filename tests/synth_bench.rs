//! Speed of the synthetic storm generator (ignored by default; run in release:
//! `cargo test --release --test synth_bench -- --ignored --nocapture`). `SYNTH_RES` sets the
//! resolution (default 512), `SYNTH_FRAMES` the frame count of the pipeline run (default 8).

use supercell::dataset::{LaneSpec, Provenance};
use supercell::format::{BuildOptions, GridType, build_grid};
use supercell::synth::{
    GenerateOptions, Storm, default_params, encode_frame, generate_dataset, generate_frames,
};

fn env<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// CPU time of the calling thread, seconds: on a shared, busy machine wall time would
/// count other processes' time slices too.
fn cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU time of the whole process, seconds.
fn process_cpu() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through a valid pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// One core: where the time of one frame goes (thread CPU time).
#[test]
#[ignore]
fn single_core_breakdown() {
    let mut params = default_params();
    params.resolution = env("SYNTH_RES", 512);
    let storm = Storm::new(params.clone());
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| {
        for frame in [params.frames / 2, params.frames - 1] {
            let t0 = cpu();
            let (vols, stats) = storm.volumes_at(params.frame_time(frame));
            let eval = cpu() - t0;
            let leaves: usize = vols.iter().map(|(_, v)| v.bricks.len()).sum();
            eprintln!(
                "res {} frame {frame}: eval {eval:.3} s, {stats:?}, {:.0} ns per evaluated voxel",
                params.resolution,
                eval * 1e9 / (stats.candidates as f64 * 512.0)
            );
            for gt in [GridType::Float, GridType::Fp16, GridType::Fp8] {
                let t1 = cpu();
                let mut bytes = 0;
                for (a, v) in &vols {
                    let opts = BuildOptions {
                        name: a.name().into(),
                        grid_type: gt,
                        voxel_size: [params.voxel_size_m(); 3],
                        ..BuildOptions::default()
                    };
                    bytes += build_grid(v, &opts).unwrap().len();
                }
                let enc = cpu() - t1;
                eprintln!(
                    "  {gt}: {leaves} leaves, {:.1} MB; encode {enc:.3} s; eval+encode {:.1} MB/s per core (eval alone {:.1})",
                    bytes as f64 / 1e6,
                    bytes as f64 / 1e6 / (eval + enc),
                    bytes as f64 / 1e6 / eval
                );
            }
        }
    });
}

/// All cores: the whole pipeline (generate, encode, reorder, write a dataset).
#[test]
#[ignore]
fn pipeline_throughput() {
    let mut params = default_params();
    params.resolution = env("SYNTH_RES", 512);
    params.frames = env("SYNTH_FRAMES", 8);
    let threads = rayon::current_num_threads();
    for gt in [GridType::Fp16, GridType::Float] {
        let opts = GenerateOptions {
            grid_type: gt,
            ..GenerateOptions::default()
        };
        let storm = Storm::new(params.clone());
        let c0 = process_cpu();
        let report = generate_frames(&storm, &opts, |_| Ok(()), |_| {}).unwrap();
        let cpu_s = process_cpu() - c0;
        eprintln!(
            "{gt} res {} x{} frames, no writer: {:.1} MB/frame, {:.1} MB/s wall on {threads} threads; {:.1} MB per CPU-second (window {})",
            params.resolution,
            params.frames,
            report.bytes as f64 / 1e6 / params.frames as f64,
            report.bytes_per_s() / 1e6,
            report.bytes as f64 / 1e6 / cpu_s,
            report.window
        );
        let dir = tempfile::tempdir().unwrap();
        let c0 = process_cpu();
        let (report, _) = generate_dataset(
            &params,
            &opts,
            dir.path(),
            LaneSpec::Count(2),
            8 << 20,
            Provenance::new("synth_bench", Vec::<String>::new()),
            |_| {},
        )
        .unwrap();
        let cpu_s = process_cpu() - c0;
        eprintln!(
            "{gt} with dataset writer: {:.1} MB/s wall; {:.1} MB per CPU-second (writer {:.2} s of {:.2} s wall)",
            report.bytes_per_s() / 1e6,
            report.bytes as f64 / 1e6 / cpu_s,
            report.write_s,
            report.elapsed_s
        );
    }
    // Keep encode_frame in the public API exercised here too.
    let storm = Storm::new(params.clone());
    let f = encode_frame(&storm, 0, &GenerateOptions::default()).unwrap();
    assert_eq!(f.grids.len(), params.attributes.len());
}

/// One core: the field evaluation alone (a census: leaf origins, no values, no
/// allocation), the least of `SYNTH_REPEATS` runs (default 5) in thread CPU time, so that
/// a busy machine disturbs it as little as possible. Default and all attributes.
#[test]
#[ignore]
fn census_speed() {
    let repeats = env("SYNTH_REPEATS", 5usize);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    for attributes in [
        supercell::synth::Attribute::DEFAULT.to_vec(),
        supercell::synth::Attribute::ALL.to_vec(),
    ] {
        let mut params = default_params();
        params.resolution = env("SYNTH_RES", 512);
        params.attributes = attributes;
        let storm = Storm::new(params.clone());
        let t = params.frame_time(params.frames / 2);
        let (best, leaves) = pool.install(|| {
            (0..repeats)
                .map(|_| {
                    let t0 = cpu();
                    let o = storm.leaf_origins_at(t);
                    (cpu() - t0, o.iter().map(Vec::len).sum::<usize>())
                })
                .fold((f64::MAX, 0), |a, b| (a.0.min(b.0), b.1))
        });
        eprintln!(
            "census, {} attributes, res {}: {best:.3} CPU-s (least of {repeats}), {leaves} leaves",
            params.attributes.len(),
            params.resolution
        );
    }
}
