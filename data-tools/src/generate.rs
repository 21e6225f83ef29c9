//! `supercell-data generate OUT ...`: the synthetic supercell time series.

use crate::args::parse_size;
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use supercell::cluster::Ranks;
use supercell::dataset::{DEFAULT_CHUNK_SIZE, LaneSpec, Provenance};
use supercell::format::GridType;
use supercell::synth::{self, Attribute, GenerateOptions, StormParams, resolution_for_target};

/// Arguments of `generate`.
#[derive(clap::Args, Debug)]
pub struct GenerateArgs {
    /// Dataset directory to create (an existing dataset there is replaced atomically).
    pub out: PathBuf,
    /// Number of frames.
    #[arg(long, default_value_t = synth::default_params().frames)]
    pub frames: u32,
    /// Target bytes per frame, e.g. 64M, 1G, 7G; picks the resolution (K/M/G/T and
    /// KiB/MiB/GiB/TiB are powers of 1024, as in fio: 8M = 8MiB).
    #[arg(long, value_parser = parse_size, conflicts_with = "resolution")]
    pub frame_size: Option<u64>,
    /// Voxels across the horizontal domain (the vertical gets half).
    #[arg(long)]
    pub resolution: Option<u32>,
    /// Attributes to generate: `default` (cloud, rain, wind_speed, vertical_velocity,
    /// vorticity), `all` (those and cloud_water, cloud_ice, snow, graupel, hail,
    /// vapor_perturbation, reflectivity, pressure_perturbation, theta_perturbation), or
    /// comma-separated names, in output order. docs/ATTRIBUTES.md describes each.
    #[arg(long, default_value = "default", value_parser = parse_attributes)]
    pub attributes: AttributeSelection,
    /// Value encoding: float, fp16, fp8, fp4 or fpn.
    #[arg(long, default_value = "fp16", value_parser = parse_grid_type)]
    pub grid_type: GridType,
    /// Lanes: a count (lanes inside the dataset), a directory whose numbered
    /// subdirectories 0, 1, ... are the lanes (e.g. /mnt/lanes), or a comma-separated list
    /// of lane directories.
    #[arg(long, default_value = "4")]
    pub lanes: String,
    /// Stripe chunk size, a multiple of 4 KiB, e.g. 1M (K/M/G/T and KiB/MiB/GiB/TiB are
    /// powers of 1024, as in fio: 8M = 8MiB).
    #[arg(long, value_parser = parse_size, default_value_t = DEFAULT_CHUNK_SIZE)]
    pub chunk_size: u64,
    /// Storm time covered by the sequence, seconds.
    #[arg(long)]
    pub time_span: Option<f32>,
    /// Noise seed.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker threads (default: all cores; more than the cores this process may use are
    /// capped to them, with a note).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Frames generated at once at most (default: as many as fit both half the available
    /// memory and 1.5 x a frame's bytes plus 1 GiB, at most twice the thread count: one
    /// for frames of about 0.5 GB or more). More lets writing overlap generating, at the
    /// cost of about twice a frame's bytes each (its encoded leaves, and freed ones kept).
    #[arg(long)]
    pub frames_in_flight: Option<usize>,
    /// Write a JSON report of the run (sizes, timings, GB/s) to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Split every grid into N spatial bricks (a k-d split of the domain on 8-voxel leaf
    /// boundaries, each brick's grids with a one-leaf halo) for sort-last rendering across
    /// ranks (`mpirun -n N supercell render --split space`). Default: whole grids.
    #[arg(long)]
    pub bricks: Option<u32>,
    /// Across MPI ranks (`mpirun -n N`): seconds a rank waits at an exchange for the others
    /// (each round of frames, the start and the commit) before it names the ranks that did
    /// not answer (died or stopped), abandons the write (the directory keeps what it held
    /// before) and ends the run with a non-zero status. Must exceed the spread between
    /// ranks in converting one frame. No effect in one process.
    #[arg(long, value_parser = crate::args::parse_timeout, default_value = crate::args::DEFAULT_RANK_TIMEOUT_S)]
    pub timeout: std::time::Duration,
}

/// Largest `--resolution`: 16384 voxels across is ~100 GB per Float frame, beyond what a
/// 4 GiB-per-grid frame can hold anyway.
const MAX_RESOLUTION: u32 = 16384;
/// Smallest `--frame-size` the storm can meaningfully be sampled at (resolution 16 gives
/// about 1.6 MB).
const MIN_FRAME_SIZE: u64 = 2_000_000;
/// Largest `--frame-size`: the default five attributes each under the 4 GiB
/// storage-binding limit.
const MAX_FRAME_SIZE: u64 = 20_000_000_000;

/// The attributes `--attributes` selects, in output order.
#[derive(Clone, Debug, PartialEq)]
pub struct AttributeSelection(pub Vec<Attribute>);

/// Parses `--attributes` (see [`Attribute::parse_list`]).
pub fn parse_attributes(text: &str) -> Result<AttributeSelection> {
    Ok(AttributeSelection(Attribute::parse_list(text)?))
}

/// Parses a grid type name as the generator accepts it.
pub fn parse_grid_type(text: &str) -> Result<GridType> {
    Ok(match text.to_ascii_lowercase().as_str() {
        "float" | "f32" => GridType::Float,
        "fp16" => GridType::Fp16,
        "fp8" => GridType::Fp8,
        "fp4" => GridType::Fp4,
        "fpn" => GridType::FpN,
        other => bail!("unknown grid type '{other}' (use float, fp16, fp8, fp4 or fpn)"),
    })
}

/// Interprets `--lanes`.
pub fn parse_lanes(text: &str) -> Result<LaneSpec> {
    if let Ok(n) = text.parse::<u32>() {
        if n == 0 || n > 1024 {
            bail!("--lanes {n}: need between 1 and 1024 lanes");
        }
        return Ok(LaneSpec::Count(n));
    }
    let dirs: Vec<PathBuf> = text.split(',').map(PathBuf::from).collect();
    if let [root] = dirs.as_slice() {
        let numbered = numbered_subdirs(root)?;
        if !numbered.is_empty() {
            return Ok(LaneSpec::Dirs(numbered));
        }
    }
    for d in &dirs {
        if !d.is_dir() {
            bail!("--lanes: {} is not a directory", d.display());
        }
    }
    Ok(LaneSpec::Dirs(dirs))
}

/// The subdirectories of `root` named 0, 1, 2, ... (consecutive from 0), in order.
fn numbered_subdirs(root: &Path) -> Result<Vec<PathBuf>> {
    if !root.is_dir() {
        bail!("--lanes: {} is not a directory", root.display());
    }
    let mut found = Vec::new();
    for entry in std::fs::read_dir(root).with_context(|| format!("reading {}", root.display()))? {
        let entry = entry?;
        if let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
            && entry.path().is_dir()
        {
            found.push(n);
        }
    }
    found.sort_unstable();
    let consecutive = found.iter().enumerate().all(|(i, n)| *n as usize == i);
    if !consecutive {
        bail!(
            "--lanes: {} has numbered subdirectories {found:?}, expected 0..N-1",
            root.display()
        );
    }
    Ok(found.iter().map(|n| root.join(n.to_string())).collect())
}

/// Tells glibc's allocator to keep freed memory for reuse. A frame allocates and frees
/// gigabytes (a 2 KiB value box per brick and attribute, then the grids); by default glibc
/// returns freed heap tops to the kernel and maps buffers above a moving threshold afresh,
/// so every frame page-faults (and zeroes) its memory again, and the faults contend on the
/// address-space lock as threads are added (on 16 threads: sys time 30 → 22 s for 16 GB,
/// 0.72 → 0.77 GB/s).
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; called before the worker threads
    // start, with values glibc documents as valid (32 MiB is its largest mmap threshold).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX);
    }
}

/// User plus system CPU time of this process so far, seconds (None where unknown).
fn process_cpu_s() -> Option<f64> {
    #[cfg(unix)]
    {
        let mut u = std::mem::MaybeUninit::<libc::rusage>::zeroed();
        // SAFETY: getrusage fills the struct it is given; RUSAGE_SELF is always valid.
        let ok = unsafe { libc::getrusage(libc::RUSAGE_SELF, u.as_mut_ptr()) } == 0;
        // SAFETY: a zeroed rusage is a valid value, filled in when `ok`.
        let u = unsafe { u.assume_init() };
        let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
        ok.then(|| secs(u.ru_utime) + secs(u.ru_stime))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Runs `generate` as one of `ranks` (one process: `Solo`; under `mpirun` each rank
/// generates its share of the frames into the one dataset, and rank 0 reports).
pub fn run(args: &GenerateArgs, ranks: &dyn Ranks) -> Result<ExitCode> {
    if ranks.size() > 1 && args.json.is_some() {
        bail!("--json reports one process's run; across MPI ranks it is not written yet");
    }
    keep_freed_memory();
    if let Some(t) = args.threads {
        if t == 0 {
            bail!("--threads must be at least 1");
        }
        let (t, note) =
            supercell::probe::cap_threads("--threads", t, supercell::probe::max_compute_threads());
        if let Some(n) = note {
            eprintln!("note: {n}");
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(t)
            .build_global()
            .context("setting up the worker threads")?;
    }
    if args.frames == 0 {
        bail!("--frames must be at least 1");
    }
    let lanes = parse_lanes(&args.lanes)?;
    let (params, pick_s) = storm_params(args)?;
    // One frame in flight must fit in memory; say which flag asked for it.
    let flag = match (args.resolution, args.frame_size) {
        (Some(r), _) => format!("--resolution {r}"),
        (None, Some(t)) => format!("--frame-size {t} B (resolution {})", params.resolution),
        (None, None) => format!("resolution {}", params.resolution),
    };
    let [nx, ny, nz] = params.dims();
    supercell::memory::check_available(
        || format!("{flag}: generating one {nx}x{ny}x{nz}-voxel frame"),
        synth::frame_peak_memory(&params, args.grid_type),
    )?;
    if args.frames_in_flight == Some(0) {
        bail!("--frames-in-flight must be at least 1");
    }
    let bricks = match args.bricks {
        None => Vec::new(),
        Some(n) => params.bricks(n).with_context(|| format!("--bricks {n}"))?,
    };
    let opts = GenerateOptions {
        grid_type: args.grid_type,
        max_frames_in_flight: args.frames_in_flight.unwrap_or(0),
        bricks,
        ..GenerateOptions::default()
    };
    let provenance =
        Provenance::from_os_args("supercell-data generate", std::env::args_os().skip(1));
    let bar = match ranks.rank() {
        // Rank 0's own frames (every one for a single process).
        0 => ProgressBar::new(u64::from(params.frames).div_ceil(ranks.size() as u64)),
        _ => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template(
            "generate [{elapsed_precise}] [{wide_bar}] {pos}/{len} frames, {msg} (eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    let progress = |p: &synth::Progress| {
        bar.set_position(u64::from(p.frames_done));
        let secs = p.elapsed.as_secs_f64().max(1e-9);
        bar.set_message(format!(
            "{:.2} GB, {:.2} GB/s",
            p.bytes_done as f64 / 1e9,
            p.bytes_done as f64 / 1e9 / secs
        ));
    };
    let (out, chunk) = (&args.out, args.chunk_size);
    let (report, manifest) = if ranks.size() == 1 {
        synth::generate_dataset(&params, &opts, out, lanes, chunk, provenance, progress)
            .map(|(r, m)| (r, Some(m)))
            .with_context(|| format!("generating {}", out.display()))?
    } else {
        synth::generate_dataset_ranks(
            &params,
            &opts,
            out,
            lanes,
            chunk,
            provenance,
            supercell::dataset::ranks::WriteRanks {
                ranks,
                wait: Some(args.timeout),
            },
            progress,
        )
        .with_context(|| format!("generating {}", out.display()))?
    };
    bar.finish_and_clear();
    let Some(manifest) = manifest else {
        return Ok(ExitCode::SUCCESS);
    };
    crate::inspect::print_bricks(manifest.bricks());
    if ranks.size() > 1 {
        let bytes: u64 = manifest.frames.iter().map(|f| f.slot_size).sum();
        println!(
            "{}: {} frames at resolution {} ({}), {:.3} GB in {:.1} s across {} MPI ranks \
             (rank k generated frames k, k+{}, ...)",
            out.display(),
            manifest.frames.len(),
            report.resolution,
            args.grid_type,
            bytes as f64 / 1e9,
            report.elapsed_s,
            ranks.size(),
            ranks.size()
        );
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{}: {} frames at resolution {} ({}), {:.3} GB ({:.1}..{:.1} MB per frame) in {:.1} s: {:.2} GB/s on {} threads",
        args.out.display(),
        report.frames,
        report.resolution,
        args.grid_type,
        report.bytes as f64 / 1e9,
        report.frame_bytes_min as f64 / 1e6,
        report.frame_bytes_max as f64 / 1e6,
        report.elapsed_s,
        report.bytes_per_s() / 1e9,
        rayon::current_num_threads()
    );
    if let Some(path) = &args.json {
        write_report(path, args, &report, &manifest, pick_s)?;
    }
    Ok(ExitCode::SUCCESS)
}

/// The storm's parameters from the flags: frames, attributes, seed, time span, and the
/// resolution given or picked for `--frame-size` (with the seconds the pick took).
fn storm_params(args: &GenerateArgs) -> Result<(StormParams, Option<f64>)> {
    let mut params = StormParams {
        frames: args.frames,
        attributes: args.attributes.0.clone(),
        ..synth::default_params()
    };
    if let Some(s) = args.seed {
        params.seed = s;
    }
    if let Some(t) = args.time_span {
        if !(t.is_finite() && t > 0.0) {
            bail!("--time-span must be a positive number of seconds");
        }
        params.time_span_s = t;
    }
    if let Some(r) = args.resolution {
        if !(16..=MAX_RESOLUTION).contains(&r) {
            bail!("--resolution {r}: use 16 to {MAX_RESOLUTION} voxels");
        }
        params.resolution = r;
    }
    let mut pick_s = None;
    if let Some(target) = args.frame_size {
        if !(MIN_FRAME_SIZE..=MAX_FRAME_SIZE).contains(&target) {
            bail!(
                "--frame-size {target} B: use {} MB to {} GB (each grid must stay under the \
                 4 GiB a GPU storage binding can address)",
                MIN_FRAME_SIZE / 1_000_000,
                MAX_FRAME_SIZE / 1_000_000_000
            );
        }
        let pick = std::time::Instant::now();
        let est = resolution_for_target(&params, args.grid_type, target);
        pick_s = Some(pick.elapsed().as_secs_f64());
        eprintln!(
            "resolution {} for about {:.1} MB per frame as {} (target {:.1} MB)",
            est.resolution,
            est.frame_bytes as f64 / 1e6,
            args.grid_type,
            target as f64 / 1e6
        );
        params.resolution = est.resolution;
    }
    Ok((params, pick_s))
}

/// `--json`: the run's figures and each frame's times.
fn write_report(
    path: &std::path::Path,
    args: &GenerateArgs,
    report: &synth::Report,
    manifest: &supercell::dataset::Manifest,
    pick_s: Option<f64>,
) -> Result<()> {
    let doc = serde_json::json!({
        "dataset": args.out,
        "frames": report.frames,
        "resolution": report.resolution,
        "grid_type": args.grid_type.name(),
        "bytes": report.bytes,
        "frame_bytes_min": report.frame_bytes_min,
        "frame_bytes_max": report.frame_bytes_max,
        "largest_grid": report.largest_grid,
        "elapsed_s": report.elapsed_s,
        "gb_per_s": report.bytes_per_s() / 1e9,
        "eval_s": report.eval_s,
        "encode_s": report.encode_s,
        "write_s": report.write_s,
        "frames_in_flight": report.window,
        "frame_times": report
            .frame_times
            .iter()
            .map(|t| {
                serde_json::json!({
                    "frame": t.frame,
                    "began_s": t.began_s,
                    "evaluated_s": t.evaluated_s,
                    "encoded_s": t.encoded_s,
                    "write_began_s": t.write_began_s,
                    "written_s": t.written_s,
                })
            })
            .collect::<Vec<_>>(),
        "pick_s": pick_s,
        "process_cpu_s": process_cpu_s(),
        "threads": rayon::current_num_threads(),
        "lanes": manifest.lanes.len(),
        "chunk_size": manifest.chunk_size,
    });
    std::fs::write(path, serde_json::to_string_pretty(&doc)?)
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
