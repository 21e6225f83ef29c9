//! `supercell bench`: the headless ingest benchmark (see `supercell::bench`).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use clap::ValueEnum;

use supercell::bench::{self, BenchConfig, jobs, plot, report, sweep};
use supercell::dataset::{Dataset, MANIFEST_FILE};
use supercell::ingest::{EngineKind, IoBackend, Source};

/// Engine to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// GPUDirect Storage (cuFile) into GPU memory.
    Gds,
    /// io_uring O_DIRECT into pinned host buffers, then async copies to the GPU.
    Staged,
    /// Storage into host memory, no GPU: the storage ceiling.
    CpuOnly,
    /// Host memory for the wgpu renderer (no CUDA).
    Portable,
}

/// Host read mechanism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// io_uring when allowed, else pread threads.
    Auto,
    /// io_uring or fail.
    IoUring,
    /// pread threads.
    Pread,
}

/// Arguments of `supercell bench`.
#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// A dataset directory (or its manifest.json), or plain files to read.
    pub source: Vec<PathBuf>,
    /// Ingest engine: how bytes get from the lanes to memory (`--path` is the old name).
    #[arg(long, visible_alias = "path", value_enum, default_value = "staged")]
    pub engine: EngineArg,
    /// I/O threads.
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    /// Largest single read (e.g. 1M, 512K, 8MiB).
    #[arg(long, default_value = "1M")]
    pub io_size: String,
    /// Reads in flight per io_uring (per thread).
    #[arg(long, default_value_t = 8)]
    pub queue_depth: usize,
    /// Frame-ring slots.
    #[arg(long, default_value_t = 4)]
    pub slots: usize,
    /// Frames to read (default: every frame once, unless --duration).
    #[arg(long)]
    pub frames: Option<u64>,
    /// Seconds to run (frames loop).
    #[arg(long)]
    pub duration: Option<f64>,
    /// O_DIRECT and drop the page cache first (when root).
    #[arg(long)]
    pub cold: bool,
    /// Read through the page cache instead of O_DIRECT.
    #[arg(long, conflicts_with = "cold")]
    pub buffered: bool,
    /// GPU ordinal.
    #[arg(long, default_value_t = 0)]
    pub gpu: usize,
    /// Check every frame's bytes on arrival (checksums, or the files).
    #[arg(long)]
    pub verify: bool,
    /// Host read mechanism.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: BackendArg,
    /// CUDA streams of the staged path.
    #[arg(long, default_value_t = 4)]
    pub streams: usize,
    /// Frame size when reading plain files.
    #[arg(long, default_value = "256M")]
    pub frame_size: String,
    /// Write every figure as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Sweep threads (1, 2, 4, ... up to --threads, at most 1024) and --sweep-io-sizes.
    #[arg(long)]
    pub sweep: bool,
    /// I/O sizes of the sweep.
    #[arg(long, default_value = "64K,256K,1M,4M")]
    pub sweep_io_sizes: String,
    /// PNG plot of the sweep.
    #[arg(long, default_value = "sweep.png")]
    pub plot: PathBuf,
    /// Run the jobs of this job file together and sum them.
    #[arg(long, conflicts_with = "sweep")]
    pub job: Option<PathBuf>,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    /// Seconds a frame's reads may go without progress before it fails (a lane that stopped
    /// answering); 0: wait forever.
    #[arg(long, default_value_t = 10.0)]
    pub read_timeout: f64,
}

fn is_dataset(p: &Path) -> bool {
    p.join(MANIFEST_FILE).is_file() || p.file_name().is_some_and(|n| n == MANIFEST_FILE)
}

fn load(args: &BenchArgs, io_size: usize) -> Result<Source> {
    match args.source.as_slice() {
        [] => bail!("give a dataset directory or files to read (or --job FILE)"),
        [one] if is_dataset(one) => {
            let ds = Dataset::open(one)
                .with_context(|| format!("cannot open dataset {}", one.display()))?;
            Ok(Source::from_manifest(ds.manifest()))
        }
        files => {
            let fs = jobs::parse_size(&args.frame_size).map_err(anyhow::Error::msg)?;
            let chunk = (io_size as u64).max(4096);
            Ok(Source::from_files(files, fs, chunk)?)
        }
    }
}

fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_vec_pretty(v)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// Runs `supercell bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.frames == Some(0) {
        bail!("--frames must be at least 1 (a run that reads nothing measures nothing)");
    }
    if let Some(job) = &args.job {
        let text = std::fs::read_to_string(job)
            .with_context(|| format!("cannot read {}", job.display()))?;
        let specs = jobs::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", job.display()))?;
        eprintln!("running {} jobs together", specs.len());
        let r = jobs::run_jobs(&specs);
        let mut failed = false;
        for (name, res) in &r.jobs {
            match res {
                Ok(b) => print!("[{name}] {}", report::text(b)),
                Err(e) => {
                    failed = true;
                    println!("[{name}] FAILED: {e}");
                }
            }
        }
        println!(
            "all jobs: {:.3} GB in {:.3} s: {:.3} GB/s aggregate (sum of jobs {:.3} GB/s)",
            r.total_bytes as f64 / 1e9,
            r.wall_s,
            r.aggregate_gbps,
            r.sum_gbps
        );
        if let Some(j) = &args.json {
            write_json(j, &r)?;
        }
        if failed {
            bail!("at least one job failed");
        }
        return Ok(());
    }
    let io_size = jobs::parse_size(&args.io_size).map_err(anyhow::Error::msg)? as usize;
    let cfg = BenchConfig {
        engine: match args.engine {
            EngineArg::Gds => EngineKind::Gds,
            EngineArg::Staged => EngineKind::Staged,
            EngineArg::CpuOnly => EngineKind::CpuOnly,
            EngineArg::Portable => EngineKind::Portable,
        },
        threads: args.threads,
        io_size,
        queue_depth: args.queue_depth,
        slots: args.slots,
        frames: args.frames,
        duration: args.duration,
        cold: args.cold,
        buffered: args.buffered,
        gpu: args.gpu,
        verify: args.verify,
        backend: match args.backend {
            BackendArg::Auto => IoBackend::Auto,
            BackendArg::IoUring => IoBackend::IoUring,
            BackendArg::Pread => IoBackend::Pread,
        },
        streams: args.streams,
        progress: !args.quiet,
        read_timeout: crate::cmd::play::timeout_arg(args.read_timeout)?,
        faults: None,
    };
    if let Some(d) = cfg.duration
        && !(d.is_finite() && d > 0.0)
    {
        bail!("--duration must be a positive number of seconds");
    }
    let source = load(args, io_size)?;
    if args.sweep {
        let sizes: Vec<usize> = args
            .sweep_io_sizes
            .split(',')
            .map(|s| jobs::parse_size(s).map(|v| v as usize))
            .collect::<std::result::Result<_, _>>()
            .map_err(anyhow::Error::msg)?;
        let threads = sweep::thread_counts(args.threads);
        let points = sweep::sweep(&source, &cfg, &threads, &sizes, |_, r| {
            println!("{}", report::gdsio_line(r));
        })?;
        println!("\n{}", sweep::table(&points));
        let title = format!("supercell {} sweep", cfg.engine);
        plot::write_png(&points, &title, &args.plot)?;
        println!("plot written to {}", args.plot.display());
        if let Some(j) = &args.json {
            write_json(j, &points)?;
        }
        return Ok(());
    }
    let r = bench::run(&source, &cfg)?;
    print!("{}", report::text(&r));
    if let Some(j) = &args.json {
        write_json(j, &r)?;
    }
    if let Some(v) = &r.verify
        && v.mismatch_count > 0
    {
        bail!("--verify: {} extents differ", v.mismatch_count);
    }
    Ok(())
}
