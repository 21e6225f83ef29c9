//! `supercell bench`: the headless ingest benchmark (see `supercell::bench`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::ValueEnum;

use supercell::bench::{self, BenchConfig, jobs, peer, plot, report, sweep};
use supercell::dataset::{Dataset, MANIFEST_FILE};
use supercell::ingest::{EngineKind, IoBackend, Source};
use supercell::units;

mod ranks;
pub(crate) use ranks::launched as launched_ranks;

/// Engine to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum EngineArg {
    /// GPUDirect Storage (cuFile) into GPU memory.
    Gds,
    /// io_uring O_DIRECT into pinned host buffers, then async copies to the GPU.
    Staged,
    /// Storage into host memory, no GPU: the storage ceiling.
    CpuOnly,
    /// Into host memory as the wgpu renderer's host path reads (no CUDA); the upload to the
    /// GPU is not timed here, only in `supercell play`.
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
    /// A dataset directory (or its manifest.json), or plain files to read; the built-in
    /// storm dataset (created on first use) when omitted.
    pub source: Vec<PathBuf>,
    /// Ingest engine: how bytes get from the lanes to memory (`--path` is the old name).
    /// Default: the fastest that works here (gds with an NVIDIA GPU, which falls back to
    /// staged where cuFile cannot run; cpu-only without one), named in the output.
    #[arg(long, visible_alias = "path", value_enum)]
    pub engine: Option<EngineArg>,
    /// Repeat the run N times and report min/median/max (as fio's repeated runs); with
    /// --sweep, N runs per point (median and spread, error bars in the plot).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000),
          conflicts_with_all = ["job"])]
    pub runs: u32,
    /// I/O threads.
    #[arg(long, default_value_t = 8)]
    pub threads: usize,
    /// Largest single read, e.g. 512K, 1M, 8MiB (K/M/G/T and KiB/MiB/GiB/TiB are powers of
    /// 1024, as in fio: 8M = 8MiB).
    #[arg(long, default_value = "1M", value_parser = units::parse_size_usize)]
    pub io_size: usize,
    /// Reads in flight per io_uring (per thread).
    #[arg(long, default_value_t = 8)]
    pub queue_depth: usize,
    /// Frame-ring slots (default: 4, fewer where frames are too large for that many to fit
    /// the memory; the output says how many).
    #[arg(long)]
    pub slots: Option<usize>,
    /// Stop after this many frames (frames loop), or at --duration if that comes first.
    #[arg(long)]
    pub frames: Option<u64>,
    /// How long to run, frames looping: 10 (seconds), 2.5s, 500ms, 2min. Default: 10 s
    /// (time-based, as fio's time_based/runtime), unless --frames or --frames-once.
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub duration: Option<Duration>,
    /// One pass: read every frame once, then stop (the run is as long as that takes).
    #[arg(long, conflicts_with_all = ["frames", "duration"])]
    pub frames_once: bool,
    /// Run fio on the same lane files before and after supercell's run, with the same
    /// block size, threads (numjobs), reads in flight (iodepth), O_DIRECT and read
    /// mechanism (io_uring, or psync for pread threads), read-only and time-based
    /// (--duration, 10 s by default), and print both and their ratio; `--json` carries
    /// fio's figures, version and command line under `peer`. `fio` finds fio on PATH;
    /// `fio=/path/to/fio` names it.
    #[arg(long, value_name = "fio|fio=PATH", conflicts_with_all = ["job", "sweep", "gpus"])]
    pub peer: Option<String>,
    /// An fio option for --peer on top of the matched ones (repeatable): KEY=VALUE or KEY,
    /// e.g. iomem=mmaphuge:/mnt/huge/fio (fio's buffers in huge pages, as supercell's).
    #[arg(long, value_name = "KEY=VALUE", requires = "peer")]
    pub peer_fio_option: Vec<String>,
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
    /// Frame size when reading plain files, e.g. 256M (K/M/G/T and KiB/MiB/GiB/TiB are
    /// powers of 1024, as in fio: 8M = 8MiB).
    #[arg(long, default_value = "256M", value_parser = units::parse_size)]
    pub frame_size: u64,
    /// Write every figure as JSON here, in fio's shape (fio's tools read it): `jobs[]` with
    /// `job options`, `read.bw_bytes`, `read.iops`, `read.runtime`, `read.clat_ns`/`lat_ns`
    /// (min, max, mean, stddev, N, percentile, json+ bins), `usr_cpu`, `sys_cpu`, per-lane
    /// `lanes`; supercell's own figures under each job's `supercell` key; `peer` with --peer.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Sweep threads (1, 2, 4, ... up to --threads, at most 1024), --sweep-io-sizes and
    /// --sweep-queue-depths.
    #[arg(long)]
    pub sweep: bool,
    /// I/O sizes of the sweep, comma-separated (K/M/G/T and KiB/MiB/GiB/TiB are powers of
    /// 1024, as in fio: 8M = 8MiB).
    #[arg(long, value_delimiter = ',', default_value = "64K,256K,1M,4M", value_parser = units::parse_size_usize)]
    pub sweep_io_sizes: Vec<usize>,
    /// Queue depths of the sweep, comma-separated (default: --queue-depth alone).
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub sweep_queue_depths: Vec<u32>,
    /// PNG plot of the sweep.
    #[arg(long, default_value = "sweep.png")]
    pub plot: PathBuf,
    /// Run the jobs of this job file together and sum them. The file: a [global] section of
    /// defaults, then one [name] section per job, key=value lines, # comments. Keys:
    /// engine, threads, io_size, queue_depth, slots, streams, frames, duration (default
    /// 10s), gpu, numa_node, cold, buffered, verify, backend, dataset=DIR or files=A,B with
    /// frame_size, lanes=0-3 (README: "--job FILE").
    #[arg(long, conflicts_with = "sweep")]
    pub job: Option<PathBuf>,
    /// One job per GPU, run together and summed (as gdsio with several GPUs): `all` (every
    /// CUDA device), a count `N` (GPUs 0..N-1) or ordinals `0,1` (`0,0`: two engines on
    /// one GPU). Each job reads its own share of the lanes (those nearest its GPU by NUMA
    /// node, then PCIe switch, where the machine says; evenly otherwise), its threads on its
    /// GPU's NUMA node, with --threads, --queue-depth, --slots ... each.
    #[arg(long, value_parser = jobs::parse_gpus,
          conflicts_with_all = ["job", "sweep", "gpu", "runs"])]
    pub gpus: Option<jobs::GpuSelection>,
    /// Log bandwidth, IOPS and latency every this often (e.g. 500ms, 1s), in fio's log
    /// format (as fio's write_bw_log/write_lat_log with log_avg_msec): files
    /// {--log-prefix}_bw.N.log (KiB/s), _iops.N.log, _clat.N.log and _lat.N.log (ns), N the run.
    #[arg(long, value_parser = units::parse_positive_duration)]
    pub log_interval: Option<Duration>,
    /// Path prefix of the --log-interval files.
    #[arg(long, default_value = "supercell", requires = "log_interval")]
    pub log_prefix: PathBuf,
    /// No progress line.
    #[arg(long)]
    pub quiet: bool,
    /// How long a frame's reads may go without progress before it fails (a lane that
    /// stopped answering): 10 (seconds), 500ms, 1min; 0: wait forever. While such a
    /// frame's reads are out no new read is issued; once nothing else is out the run ends
    /// with an error naming the lane, file and bytes (the reads are abandoned).
    #[arg(long, default_value = "10s", value_parser = units::parse_duration)]
    pub read_timeout: Duration,
}

fn is_dataset(p: &Path) -> bool {
    p.join(MANIFEST_FILE).is_file() || p.file_name().is_some_and(|n| n == MANIFEST_FILE)
}

pub(super) fn load(args: &BenchArgs, io_size: usize) -> Result<Source> {
    match args.source.as_slice() {
        [] => {
            let dir = super::builtin_dataset(!args.quiet)?;
            println!(
                "source: the built-in storm dataset, {} (name a dataset or files to read others)",
                dir.display()
            );
            let ds = Dataset::open(&dir)
                .with_context(|| format!("cannot open dataset {}", dir.display()))?;
            Ok(Source::from_manifest(ds.manifest()))
        }
        [one] if is_dataset(one) => {
            let ds = Dataset::open(one)
                .with_context(|| format!("cannot open dataset {}", one.display()))?;
            Ok(Source::from_manifest(ds.manifest()))
        }
        files => {
            let chunk = (io_size as u64).max(4096);
            Ok(Source::from_files(files, args.frame_size, chunk)?)
        }
    }
}

pub(super) fn write_json(path: &Path, v: &impl serde::Serialize) -> Result<()> {
    let text = serde_json::to_vec_pretty(v)?;
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// `(frames, seconds)` of a run: time-based (10 s) unless --frames or --frames-once.
fn run_length(args: &BenchArgs) -> (Option<u64>, Option<f64>) {
    bench::run_length(
        args.frames,
        args.duration.map(|d| d.as_secs_f64()),
        args.frames_once,
    )
}

/// The settings of one run (or of each job of `--gpus`) from the command line and this
/// process's settings (part size, host pages, faults: docs/SETTINGS.md).
pub(super) fn config(args: &BenchArgs, engine: EngineKind) -> Result<BenchConfig> {
    let tuning = super::ingest_tuning()?;
    Ok(BenchConfig {
        engine,
        threads: super::io_threads("--threads", args.threads),
        io_size: args.io_size,
        queue_depth: args.queue_depth,
        slots: args.slots,
        part_bytes: tuning.part_bytes,
        host_pages: tuning.host_pages,
        frames: run_length(args).0,
        duration: run_length(args).1,
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
        read_timeout: (!args.read_timeout.is_zero()).then_some(args.read_timeout),
        faults: tuning.faults,
        log_interval: args.log_interval,
    })
}

/// Runs `supercell bench`.
pub fn run(args: &BenchArgs) -> Result<()> {
    if args.frames == Some(0) {
        bail!("--frames must be at least 1 (a run that reads nothing measures nothing)");
    }
    if let Some(ranks) = ranks::launched()? {
        return ranks::run(args, ranks.as_ref());
    }
    if let Some(job) = &args.job {
        let text = std::fs::read_to_string(job)
            .with_context(|| format!("cannot read {}", job.display()))?;
        let specs = jobs::parse(&text).map_err(|e| anyhow::anyhow!("{}: {e}", job.display()))?;
        eprintln!("running {} jobs together", specs.len());
        let r = jobs::run_jobs(&specs);
        let failed = print_jobs(&r, "all jobs");
        if let Some(j) = &args.json {
            write_json(j, &r.fio_report())?;
        }
        if failed {
            bail!("at least one job failed");
        }
        return Ok(());
    }
    if let Some(selection) = &args.gpus {
        return run_gpus(args, selection);
    }
    let io_size = args.io_size;
    let (engine, engine_choice) = match args.engine {
        Some(EngineArg::Gds) => (EngineKind::Gds, None),
        Some(EngineArg::Staged) => (EngineKind::Staged, None),
        Some(EngineArg::CpuOnly) => (EngineKind::CpuOnly, None),
        Some(EngineArg::Portable) => (EngineKind::Portable, None),
        None => {
            let (kind, why) = bench::default_engine(args.gpu);
            println!("engine: {kind} (default; --engine picks another): {why}");
            (kind, Some(why))
        }
    };
    let cfg = config(args, engine)?;
    let source = load(args, io_size)?;
    if args.sweep {
        let plan = sweep::SweepPlan {
            threads: sweep::thread_counts(cfg.threads),
            io_sizes: args.sweep_io_sizes.clone(),
            queue_depths: if args.sweep_queue_depths.is_empty() {
                vec![args.queue_depth]
            } else {
                args.sweep_queue_depths
                    .iter()
                    .map(|&q| q as usize)
                    .collect()
            },
            runs: args.runs,
        };
        let mut failures = Vec::new();
        let points = sweep::sweep(&source, &cfg, &plan, |p, r| {
            println!("qd {} {}", p.queue_depth, report::gdsio_line(r));
            if let Some(why) = r.every_read_failed() {
                failures.push(format!(
                    "{} threads, {} B reads, queue depth {}: {why}",
                    p.threads, p.io_size, p.queue_depth
                ));
            }
        })?;
        println!("\n{}", sweep::table(&points));
        let title = format!("supercell {} sweep", cfg.engine);
        plot::write_png(&points, &title, &args.plot)?;
        println!("plot written to {}", args.plot.display());
        if let Some(j) = &args.json {
            write_json(j, &points)?;
        }
        if !failures.is_empty() && failures.len() == points.len() {
            bail!("every run of the sweep read nothing: {}", failures[0]);
        }
        return Ok(());
    }
    let peer = match &args.peer {
        Some(p) => {
            let named = peer::parse_peer(p)?;
            let fio = peer::find_fio(named.as_deref(), std::env::var_os("PATH").as_deref())?;
            let seconds = cfg.duration.unwrap_or(bench::DEFAULT_DURATION_S);
            let plan = peer::plan(&source, &cfg, seconds, &args.peer_fio_option)?;
            println!(
                "peer: {} before supercell: {}",
                fio.version,
                peer::command_line(&fio, &plan)
            );
            let before = peer::run_fio_as(&fio, &plan, cfg.cold)?;
            Some((fio, plan, before))
        }
        None => None,
    };
    let mut results = Vec::new();
    for i in 0..args.runs {
        let r = bench::run(&source, &cfg)?;
        if args.runs > 1 {
            println!("run {}: {}", i + 1, report::gdsio_line(&r));
        }
        if args.log_interval.is_some() {
            let files = report::write_fio_logs(&args.log_prefix, i as usize + 1, &r).with_context(
                || format!("cannot write the logs {}_*", args.log_prefix.display()),
            )?;
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            println!("logs: {}", names.join(", "));
        }
        results.push(r);
    }
    let summary = report::RunsSummary::of(&results);
    // The full report of the median run (by bandwidth), then the spread over the runs.
    let mut order: Vec<&bench::BenchResult> = results.iter().collect();
    order.sort_by(|a, b| a.summary.gbps.total_cmp(&b.summary.gbps));
    let median = order[order.len() / 2];
    if args.runs > 1 {
        println!("\nthe median run:");
    }
    print!("{}", report::text(median));
    if args.runs > 1 {
        println!("{}", summary.text());
    }
    let peer = match peer {
        Some((fio, plan, before)) => {
            let after = peer::run_fio_as(&fio, &plan, cfg.cold)?;
            let p = peer::PeerReport::new(&fio, &plan, before, after, median, &cfg);
            print!("{}", p.text());
            Some(p)
        }
        None => None,
    };
    if let Some(j) = &args.json {
        let mut doc = report::FioReport::of_runs(&results);
        doc.engine_choice = engine_choice;
        doc.peer = peer;
        write_json(j, &doc)?;
    }
    // A run that read nothing measured nothing: not a result to exit 0 with.
    if let Some(why) = results
        .iter()
        .find_map(bench::BenchResult::every_read_failed)
    {
        bail!("{why}");
    }
    let differ: u64 = results
        .iter()
        .filter_map(|r| r.verify.as_ref())
        .map(|v| v.mismatch_count)
        .sum();
    if differ > 0 {
        bail!("--verify: {differ} extents differ");
    }
    Ok(())
}

/// Prints every job's report and the total (`what`: "all jobs", "all GPUs"); whether a job
/// failed.
fn print_jobs(r: &jobs::JobsResult, what: &str) -> bool {
    let mut failed = false;
    for (name, res) in &r.jobs {
        match res {
            Ok(b) => {
                print!("[{name}] {}", report::text(b));
                if let Some(why) = b.every_read_failed() {
                    failed = true;
                    println!("[{name}] FAILED: {why}");
                }
            }
            Err(e) => {
                failed = true;
                println!("[{name}] FAILED: {e}");
            }
        }
    }
    println!(
        "{what}: {:.3} GB in {:.3} s: {:.3} GB/s aggregate (sum of jobs {:.3} GB/s)",
        r.total_bytes as f64 / 1e9,
        r.wall_s,
        r.aggregate_gbps,
        r.sum_gbps
    );
    failed
}

/// The sysfs directory of a PCI function named as CUDA or sysfs name it
/// ("00000000:1B:00.0", "0000:1b:00.0").
fn sysfs_pci(bus_id: &str) -> PathBuf {
    let id = bus_id.trim().to_ascii_lowercase();
    // CUDA may print an 8-digit domain; sysfs uses 4.
    let short = id.get(id.len().saturating_sub(12)..).unwrap_or(&id);
    Path::new("/sys/bus/pci/devices").join(short)
}

/// The NUMA node of a PCI function; `None` where sysfs does not say (or says -1).
fn pci_numa_node(bus_id: &str) -> Option<u32> {
    let text = std::fs::read_to_string(sysfs_pci(bus_id).join("numa_node")).ok()?;
    text.trim()
        .parse::<i64>()
        .ok()
        .and_then(|n| u32::try_from(n).ok())
}

/// Where a PCI function sits in the PCIe tree: its sysfs path from the root complex
/// (`pci0000:00`) down to itself.
fn pcie_path(bus_id: &str) -> Option<jobs::PciePath> {
    let real = sysfs_pci(bus_id).canonicalize().ok()?;
    let parts: Vec<String> = real
        .components()
        .filter_map(|c| c.as_os_str().to_str().map(str::to_string))
        .skip_while(|c| !c.starts_with("pci"))
        .collect();
    (!parts.is_empty()).then_some(parts)
}

/// Each lane of `source` with the NUMA node of the drive its first file is on (its PCIe
/// controller's node), and that controller's place in the PCIe tree, where the machine
/// says.
fn lane_topology(source: &Source) -> (Vec<jobs::LaneNode>, Vec<(u32, jobs::PciePath)>) {
    let mut nodes = Vec::new();
    let mut paths = Vec::new();
    for lane in 0..source.lanes {
        let pci = source
            .files
            .iter()
            .find(|f| f.lane == lane)
            .and_then(|f| supercell::doctor::block_device(&f.path).ok())
            .and_then(|d| d.pci);
        nodes.push(jobs::LaneNode {
            lane,
            numa_node: pci.as_deref().and_then(pci_numa_node),
        });
        if let Some(p) = pci.as_deref().and_then(pcie_path) {
            paths.push((lane, p));
        }
    }
    (nodes, paths)
}

/// Where the source of `--gpus` jobs is: each job opens it itself.
fn source_spec(args: &BenchArgs) -> Result<jobs::SourceSpec> {
    Ok(match args.source.as_slice() {
        [] => {
            let dir = super::builtin_dataset(!args.quiet)?;
            println!(
                "source: the built-in storm dataset, {} (name a dataset or files to read others)",
                dir.display()
            );
            jobs::SourceSpec::Dataset(dir)
        }
        [one] if is_dataset(one) => jobs::SourceSpec::Dataset(one.clone()),
        files => jobs::SourceSpec::Files(files.to_vec(), args.frame_size),
    })
}

/// Each GPU's NUMA node and PCIe path, read from sysfs at its PCI bus id (CUDA's, where
/// CUDA runs: `cuda_devices`; else unknown).
pub(super) fn gpu_places(
    gpus: &[usize],
    cuda_devices: Option<usize>,
) -> (Vec<Option<u32>>, Vec<Option<jobs::PciePath>>) {
    gpus.iter()
        .map(|&g| {
            let bus = cuda_devices
                .and_then(|_| supercell::gpu::Gpu::open(g).ok())
                .map(|gpu| gpu.pci_bus_id);
            (
                bus.as_deref().and_then(pci_numa_node),
                bus.as_deref().and_then(pcie_path),
            )
        })
        .unzip()
}

/// `bench --gpus`: one job per GPU named, each on its share of the lanes, run together.
fn run_gpus(args: &BenchArgs, selection: &jobs::GpuSelection) -> Result<()> {
    let cuda = supercell::gpu::cuda_probe();
    let cuda_devices = cuda.is_ok().then(supercell::gpu::device_count);
    let named = args.engine.map(|e| match e {
        EngineArg::Gds => EngineKind::Gds,
        EngineArg::Staged => EngineKind::Staged,
        EngineArg::CpuOnly => EngineKind::CpuOnly,
        EngineArg::Portable => EngineKind::Portable,
    });
    if let (Some(kind), Err(why)) = (named, &cuda)
        && kind.needs_cuda()
    {
        bail!(
            "--gpus with the {kind} engine needs CUDA, and it is not available here ({why}); --engine cpu-only runs one job per named GPU without one"
        );
    }
    let gpus = selection
        .resolve(cuda_devices)
        .map_err(|e| anyhow::anyhow!("--gpus: {e}"))?;
    let (engine, engine_choice) = match named {
        Some(kind) => (kind, None),
        None => {
            let (kind, why) = bench::default_engine(gpus[0]);
            println!("engine: {kind} (default; --engine picks another): {why}");
            (kind, Some(why))
        }
    };
    if !engine.needs_cuda() {
        println!(
            "engine {engine} reads into host memory and uses no GPU: the {} GPUs named set the number of jobs, each job's share of the lanes and, where a GPU's NUMA node is known, the node its threads run on",
            gpus.len()
        );
    }
    let spec = source_spec(args)?;
    let source = match &spec {
        jobs::SourceSpec::Dataset(dir) => {
            let ds = Dataset::open(dir)
                .with_context(|| format!("cannot open dataset {}", dir.display()))?;
            Source::from_manifest(ds.manifest())
        }
        jobs::SourceSpec::Files(files, frame_size) => {
            Source::from_files(files, *frame_size, (args.io_size as u64).max(4096))?
        }
    };
    let (gpu_nodes, gpu_pcie) = gpu_places(&gpus, cuda_devices);
    let (lane_nodes, lane_pcie) = lane_topology(&source);
    let split = jobs::split_lanes_by(&lane_nodes, &gpu_nodes, &lane_pcie, &gpu_pcie)
        .map_err(|e| anyhow::anyhow!("--gpus: {e}"))?;
    println!(
        "{} jobs together, lanes shared {}",
        gpus.len(),
        if split.by_topology {
            "by topology (each GPU reads the lanes whose drives are nearest it: its NUMA node, then its PCIe switch)"
        } else {
            "evenly (the topology here does not say which lanes are nearer which GPU)"
        }
    );
    // Several progress lines at once would overwrite each other.
    let base = BenchConfig {
        progress: false,
        ..config(args, engine)?
    };
    let specs = jobs::gpu_jobs(&base, &spec, &gpus, &gpu_nodes, &split);
    for (job, lanes) in specs.iter().zip(&split.lanes) {
        let lanes: Vec<String> = lanes.iter().map(u32::to_string).collect();
        println!(
            "[{}] lanes {}, threads on NUMA node {}",
            job.name,
            lanes.join(","),
            job.numa_node
                .map_or("(any: not known)".to_string(), |n| n.to_string())
        );
    }
    for n in &split.notes {
        println!("note: {n}");
    }
    let r = jobs::run_jobs(&specs);
    let failed = print_jobs(&r, "all GPUs");
    println!("per GPU (each reads its lanes' part of every frame):");
    for ((name, res), lanes) in r.jobs.iter().zip(&split.lanes) {
        let lanes: Vec<String> = lanes.iter().map(u32::to_string).collect();
        match res {
            Ok(b) => println!(
                "  {name} (lanes {}): {:.3} GB/s, {:.2} frames/s, {:.3} GB in {:.3} s",
                lanes.join(","),
                b.summary.gbps,
                b.summary.frames_per_s,
                b.summary.bytes as f64 / 1e9,
                b.total_time_s
            ),
            Err(e) => println!("  {name} (lanes {}): FAILED: {e}", lanes.join(",")),
        }
    }
    // Each job reads its lanes' part of every frame, so a whole frame is in when every job
    // has read its part: the slowest job's count.
    let whole_frames = r
        .jobs
        .iter()
        .map(|(_, res)| res.as_ref().map_or(0, |b| b.summary.frames))
        .min()
        .unwrap_or(0);
    let whole_fps = if r.wall_s > 0.0 {
        whole_frames as f64 / r.wall_s
    } else {
        0.0
    };
    println!("whole frames (every GPU's part read): {whole_frames}, {whole_fps:.2} frames/s");
    if let Some(j) = &args.json {
        let mut doc = r.fio_report();
        doc.engine_choice = engine_choice;
        let mut v = serde_json::to_value(&doc)?;
        v["gpus"] = serde_json::json!({
            "ordinals": gpus,
            "numa_nodes": gpu_nodes,
            "lane_split": split,
            "whole_frames": whole_frames,
            "whole_frames_per_s": whole_fps,
        });
        write_json(j, &v)?;
    }
    if failed {
        bail!("at least one job failed");
    }
    let differ: u64 = r
        .jobs
        .iter()
        .filter_map(|(_, res)| res.as_ref().ok())
        .filter_map(|b| b.verify.as_ref())
        .map(|v| v.mismatch_count)
        .sum();
    if differ > 0 {
        bail!("--verify: {differ} extents differ");
    }
    Ok(())
}
