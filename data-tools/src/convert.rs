//! `supercell-data import` and `supercell-data export`.

use crate::args::parse_size;
use crate::generate::parse_lanes;
use crate::target;
use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use supercell::dataset::ranks::WriteRanks;
use supercell::dataset::{
    AlignedBuf, CrcCheck, DEFAULT_CHUNK_SIZE, ImportOptions, Provenance, import_sequence_ranks,
};
use supercell::format::{Codec, Grid, GridType, write_nvdb};

/// Arguments of `import`.
#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The .nvdb or OpenVDB .vdb files, one per frame, in frame order (each with the same
    /// set of grids); or CM1/WRF netCDF output files, one or more records each, in time
    /// order.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// Dataset directory to create.
    #[arg(long)]
    pub out: PathBuf,
    /// Lanes: a count, a directory with numbered lane subdirectories, or a comma-separated
    /// list of lane directories.
    #[arg(long, default_value = "4")]
    pub lanes: String,
    /// Stripe chunk size, a multiple of 4 KiB, e.g. 1M (K/M/G/T and KiB/MiB/GiB/TiB are
    /// powers of 1024, as in fio: 8M = 8MiB).
    #[arg(long, value_parser = parse_size, default_value_t = DEFAULT_CHUNK_SIZE)]
    pub chunk_size: u64,
    /// Seconds between frames (frame f is at f × this); default 1. netCDF files carry
    /// their own times.
    #[arg(long, default_value_t = 1.0)]
    pub frame_interval: f64,
    /// Value encoding of grids converted from .vdb files: float (exact), fp16 or fp8
    /// (quantised; the largest error is reported). .nvdb grids are stored as they are.
    #[arg(long, default_value = "float", value_parser = parse_import_grid_type)]
    pub grid_type: GridType,
    /// Also import each .vdb vector grid's components as attributes NAME.x, NAME.y, NAME.z
    /// (NAME itself holds the vector's length).
    #[arg(long)]
    pub vector_components: bool,
    /// .vdb/.nvdb: import only these grids, by the names the manifest lists (a file's second
    /// grid named density is density#1); repeatable or comma-separated.
    #[arg(long = "grid", value_delimiter = ',')]
    pub grids: Vec<String>,
    /// .nvdb: import grids whose stored NanoVDB checksum does not match their bytes, with
    /// their checksum cleared (and a note), instead of refusing the file.
    #[arg(long)]
    pub allow_bad_checksum: bool,
    /// netCDF: the variables to import, comma-separated (default: every 3-D variable; CM1's
    /// prs and th become prs_pert and th_pert, their level means removed).
    #[arg(long)]
    pub vars: Option<String>,
    /// netCDF: the voxels' height in metres (default: the model's thinnest layer in the
    /// lowest 3 km, rounded). Model levels are interpolated linearly in z onto it.
    #[arg(long)]
    pub dz: Option<f64>,
    /// netCDF: the voxels' width along x and y in metres (default: the files' horizontal
    /// spacing); columns are interpolated bilinearly onto it.
    #[arg(long)]
    pub dx: Option<f64>,
    /// netCDF: NAME=VALUE, drop values of NAME at or below VALUE (|value| for signed
    /// fields) instead of the default background; repeatable or comma-separated.
    #[arg(long)]
    pub background: Vec<String>,
    /// netCDF: also import the speed of the velocity components (uinterp/vinterp/winterp,
    /// U/V/W or u/v/w) as the attribute wind_speed.
    #[arg(long)]
    pub wind_speed: bool,
    /// netCDF: split every grid into N spatial bricks of the voxel grid (a k-d split on
    /// 8-voxel leaf boundaries, each brick's grids with a one-leaf halo), for sort-last
    /// rendering across ranks (`mpirun -n N supercell render --split space`). .nvdb and
    /// .vdb files are refused: their domain is known only once every file is read.
    #[arg(long)]
    pub bricks: Option<u32>,
    /// Across MPI ranks (`mpirun -n N`): seconds a rank waits at an exchange for the others
    /// (each round of frames, the start and the commit) before it names the ranks that did
    /// not answer (died or stopped), abandons the write (the directory keeps what it held
    /// before) and ends the run with a non-zero status. Must exceed the spread between
    /// ranks in converting one frame. No effect in one process.
    #[arg(long, value_parser = crate::args::parse_timeout, default_value = crate::args::DEFAULT_RANK_TIMEOUT_S)]
    pub timeout: std::time::Duration,
    /// Also write a scene for the new dataset to this .toml file (transfer functions and
    /// camera chosen from the attributes' names and value ranges; edit it, then `supercell
    /// play FILE`).
    #[arg(long)]
    pub scene: Option<PathBuf>,
}

fn parse_import_grid_type(text: &str) -> Result<GridType> {
    Ok(match text.to_ascii_lowercase().as_str() {
        "float" => GridType::Float,
        "fp16" => GridType::Fp16,
        "fp8" => GridType::Fp8,
        other => bail!("unknown grid type '{other}' (use float, fp16 or fp8)"),
    })
}

/// Arguments of `export`.
#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// The dataset directory.
    pub dataset: PathBuf,
    /// The frame to export.
    #[arg(long)]
    pub frame: usize,
    /// The .nvdb file to write.
    #[arg(long)]
    pub out: PathBuf,
    /// Compression of the grids in the file: none, zip or blosc.
    #[arg(long, default_value = "none", value_parser = parse_codec)]
    pub codec: Codec,
    /// Export only these attributes (names as the manifest lists them, or indices);
    /// repeatable or comma-separated. Default: every attribute.
    #[arg(long = "grid", value_delimiter = ',')]
    pub grids: Vec<String>,
    /// Export grids whose stored checksum does not match their bytes (with a warning)
    /// instead of refusing the frame.
    #[arg(long)]
    pub allow_bad_checksum: bool,
}

fn parse_codec(text: &str) -> Result<Codec> {
    Ok(match text.to_ascii_lowercase().as_str() {
        "none" => Codec::None,
        "zip" => Codec::Zip,
        "blosc" => Codec::Blosc,
        other => bail!("unknown codec '{other}' (use none, zip or blosc)"),
    })
}

/// Runs `import`.
pub fn run_import(args: &ImportArgs, ranks: &dyn supercell::cluster::Ranks) -> Result<ExitCode> {
    if !(args.frame_interval.is_finite() && args.frame_interval > 0.0) {
        bail!("--frame-interval must be a positive number of seconds");
    }
    let lanes = parse_lanes(&args.lanes)?;
    if (!args.grids.is_empty() || args.allow_bad_checksum)
        && crate::netcdf_magic::is_netcdf(&args.files[0])
    {
        bail!(
            "--grid and --allow-bad-checksum apply to .vdb and .nvdb files; netCDF variables \
             are chosen with --vars"
        );
    }
    if crate::netcdf_magic::is_netcdf(&args.files[0]) {
        #[cfg(not(feature = "netcdf"))]
        {
            let _ = lanes;
            bail!(
                "{}: a netCDF file, and this supercell-data was built without netCDF support \
                 (build it with the default features, which need the system netCDF-C library: \
                 apt-get install libnetcdf-dev)",
                args.files[0].display()
            );
        }
        #[cfg(feature = "netcdf")]
        {
            if args.frame_interval != 1.0 || args.vector_components {
                bail!(
                    "--frame-interval and --vector-components do not apply to netCDF files \
                     (their times come from the files; velocity components stay separate \
                     attributes, --wind-speed adds their speed)"
                );
            }
            crate::netcdf_import::run(&crate::netcdf_import::NetcdfOptions {
                files: &args.files,
                out: &args.out,
                lanes,
                chunk_size: args.chunk_size,
                grid_type: args.grid_type,
                vars: args.vars.as_deref(),
                dz: args.dz,
                dx: args.dx,
                backgrounds: &args.background,
                wind_speed: args.wind_speed,
                ranks,
                bricks: args.bricks,
                wait: Some(args.timeout),
            })?;
            if ranks.rank() != 0 {
                return Ok(ExitCode::SUCCESS);
            }
            return write_scene(args);
        }
    }
    if args.bricks.is_some() {
        bail!(
            "--bricks applies to netCDF imports and `generate`: a .nvdb or .vdb sequence's \
             domain (the union of every frame's bounding box) is known only once every file \
             is read, and the bricks must be fixed before the first frame is written; import \
             {} without --bricks",
            args.files[0].display()
        );
    }
    if args.vars.is_some()
        || args.dz.is_some()
        || args.dx.is_some()
        || !args.background.is_empty()
        || args.wind_speed
    {
        bail!("--vars, --dz, --dx, --background and --wind-speed apply to netCDF files only");
    }
    let times: Vec<f64> = (0..args.files.len())
        .map(|f| f as f64 * args.frame_interval)
        .collect();
    // Across ranks rank 0 shows its own files (every one for a single process).
    let bar = match ranks.rank() {
        0 => ProgressBar::new(args.files.len().div_ceil(ranks.size()) as u64),
        _ => ProgressBar::hidden(),
    };
    bar.set_style(
        ProgressStyle::with_template("import [{elapsed_precise}] [{wide_bar}] {pos}/{len} files")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let options = ImportOptions {
        vdb_grid_type: args.grid_type,
        vector_components: args.vector_components,
        grids: (!args.grids.is_empty()).then(|| args.grids.clone()),
        allow_bad_checksum: args.allow_bad_checksum,
        ..ImportOptions::default()
    };
    let started = std::time::Instant::now();
    let provenance = Provenance::from_os_args("supercell-data import", std::env::args_os().skip(1));
    let progress = |done: usize| bar.set_position(done as u64);
    let (chunk, out) = (args.chunk_size, &args.out);
    // One process is the single writer; across ranks each converts its share.
    let team = WriteRanks {
        ranks,
        wait: Some(args.timeout),
    };
    let imported = import_sequence_ranks(
        &args.files,
        out,
        lanes,
        chunk,
        Some(&times),
        provenance,
        &options,
        team,
        progress,
    );
    let imported = imported.with_context(|| format!("importing into {}", out.display()))?;
    // Across ranks rank 0 reports every rank's files.
    let Some((manifest, report)) = imported else {
        return Ok(ExitCode::SUCCESS);
    };
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    print_import_summary(&args.out, &manifest, seconds);
    for (name, err) in &report.max_abs_error {
        println!(
            "{name}: {} quantisation, max abs error {err:.3e}",
            match args.grid_type {
                GridType::Fp16 => "fp16",
                GridType::Fp8 => "fp8",
                _ => "float",
            }
        );
    }
    for name in &report.vector_magnitudes {
        if args.vector_components {
            println!("{name}: a vector grid, imported as its length, components as {name}.x/.y/.z");
        } else {
            println!(
                "{name}: a vector grid, imported as its length (--vector-components keeps the \
                 components too)"
            );
        }
    }
    for (name, err) in &report.narrowed {
        println!(
            "note: {name}: a double-precision grid, stored as 32-bit floats (largest rounding \
             error {err:.3e})"
        );
    }
    for n in &report.notes {
        eprintln!("note: {n}");
    }
    for s in &report.skipped {
        eprintln!("note: not imported: {s}");
    }
    write_scene(args)
}

/// Writes `--scene`, if asked for, for the dataset just imported.
fn write_scene(args: &ImportArgs) -> Result<ExitCode> {
    let Some(path) = &args.scene else {
        return Ok(ExitCode::SUCCESS);
    };
    use supercell::scene::{DataSample, DatasetSpec, Scene, Suggestion, default_attributes};
    // Opened as `supercell play DATASET` would open it (16:9): the looks, the first frame
    // with data and the opacity from the first view are the player's.
    let ls = Scene::for_dataset(DatasetSpec::Path(args.out.clone())).open(16.0 / 9.0, None)?;
    let m = ls.dataset.manifest();
    let suggestion = ls.suggestion.clone().unwrap_or_else(|| Suggestion {
        attributes: default_attributes(m),
        sample: DataSample::none(m.attributes.len()),
        start_frame: 0,
        mean_transmittance: None,
        notes: Vec::new(),
        fit_box: None,
        camera: None,
    });
    for n in &suggestion.notes {
        println!("note: {n}");
    }
    // Read back and validated as `play` will read it: a scene that would not load is an
    // error here, and nothing is left at `path` (written whole under a temporary name, then
    // renamed).
    let text = supercell::scene::checked_scene_toml(m, &args.out, &suggestion, path).with_context(
        || {
            format!(
                "{} is imported, but no scene was written (it would not load)",
                args.out.display()
            )
        },
    )?;
    supercell::atomic_file::write_replacing(path, text.as_bytes())?;
    println!(
        "{}: a scene for {} (edit it, then `supercell play {}`)",
        path.display(),
        args.out.display(),
        path.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// Runs `export`.
pub fn run_export(args: &ExportArgs) -> Result<ExitCode> {
    let ds = target::open_dataset(&args.dataset)?;
    if args.frame >= ds.frame_count() {
        bail!(
            "{}: frame {} does not exist (the dataset has {} frames)",
            args.dataset.display(),
            args.frame,
            ds.frame_count()
        );
    }
    // Writing into the dataset itself could replace its manifest or a lane file.
    let inside = |dir: &std::path::Path| {
        let out_dir = args
            .out
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(std::path::Path::new("."));
        match (out_dir.canonicalize(), dir.canonicalize()) {
            (Ok(o), Ok(d)) => o.starts_with(d),
            _ => false,
        }
    };
    let m = ds.manifest();
    if inside(&args.dataset) || (0..m.lanes.len()).any(|l| inside(&m.lane_dir(l as u32))) {
        bail!(
            "{}: refusing to export into the dataset or one of its lanes",
            args.out.display()
        );
    }
    let context = || {
        format!(
            "exporting frame {} of {} to {}",
            args.frame,
            args.dataset.display(),
            args.out.display()
        )
    };
    // The extent CRCs (checked on the read) prove the bytes are what was written; the grid
    // checksums prove the grids are what their producer made. A damaged grid is not copied
    // into a file that would then look as trustworthy as any other.
    let mut buf = AlignedBuf::new();
    ds.read_frame(args.frame, &mut buf, CrcCheck::Verify)
        .with_context(context)?;
    let names: Vec<String> = m.attributes.iter().map(|a| a.name.clone()).collect();
    let mut chosen = Vec::new();
    for sel in &args.grids {
        let a = target::select_grid(&names, sel).with_context(|| {
            format!(
                "{}: no attribute named or numbered {sel:?} (attributes: {})",
                args.dataset.display(),
                names.join(", ")
            )
        })?;
        if !chosen.contains(&a) {
            chosen.push(a);
        }
    }
    if chosen.is_empty() {
        chosen = (0..names.len()).collect();
    }
    // Whole grids in the order chosen; a bricked frame's chosen grids brick by brick.
    let picked: Vec<(usize, &[u8])> = match m.bricks.is_empty() {
        true => (chosen.iter())
            .map(|&a| Ok((a, ds.grid_bytes(args.frame, a, &buf)?)))
            .collect::<Result<_, supercell::dataset::DatasetError>>(),
        false => ds.frame_grids(args.frame, &buf).map(|all| {
            (all.into_iter())
                .map(|(g, bytes)| (g.attribute as usize, bytes))
                .filter(|(a, _)| chosen.contains(a))
                .collect()
        }),
    }
    .with_context(context)?;
    let mut grids = Vec::with_capacity(picked.len());
    for (a, bytes) in picked {
        let attr = &m.attributes[a];
        let grid = Grid::parse(bytes).with_context(|| {
            format!(
                "{}: frame {} grid {a} ({:?})",
                args.dataset.display(),
                args.frame,
                attr.name
            )
        })?;
        target::check_checksum(
            &format!(
                "{}: frame {} grid {a} ({:?})",
                args.dataset.display(),
                args.frame,
                attr.name
            ),
            bytes,
            grid.version(),
            args.allow_bad_checksum,
        )?;
        grids.push(bytes);
    }
    write_nvdb(&args.out, &grids, args.codec).with_context(context)?;
    println!(
        "{}: frame {} ({} grids, codec {})",
        args.out.display(),
        args.frame,
        grids.len(),
        args.codec
    );
    Ok(ExitCode::SUCCESS)
}

/// Prints what an import wrote: frames, attributes, bytes, and the speed in GB/s of output.
pub(crate) fn print_import_summary(
    out: &std::path::Path,
    manifest: &supercell::dataset::Manifest,
    seconds: f64,
) {
    let gb = manifest.total_bytes() as f64 / 1e9;
    println!(
        "{}: {} frames, {} attributes ({}), {gb:.3} GB in {seconds:.2} s ({:.3} GB/s of output)",
        out.display(),
        manifest.frame_count(),
        manifest.attributes.len(),
        manifest
            .attributes
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>()
            .join(", "),
        gb / seconds.max(1e-9)
    );
    crate::inspect::print_bricks(manifest.bricks());
}
