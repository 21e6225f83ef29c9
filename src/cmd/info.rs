//! `supercell info [DATASET]`: the main job until the player lands. With no dataset it
//! creates the built-in storm dataset on first run (in the user's cache directory), then
//! verifies the dataset and summarises it.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use supercell::dataset::{Dataset, LaneSpec, MANIFEST_FILE, Provenance, verify};
use supercell::synth::{self, GenerateOptions};

/// Arguments of `supercell info`.
#[derive(clap::Args, Debug, Default)]
pub struct InfoArgs {
    /// Dataset directory; the built-in storm dataset (created on first run) when omitted.
    pub dataset: Option<PathBuf>,
    /// Skip re-reading every extent (verification) and only summarise.
    #[arg(long)]
    pub no_verify: bool,
}

/// Name of the built-in dataset's directory; bump the suffix when the generator's output
/// changes so that an old cache is not mistaken for the current default.
const DEFAULT_DATASET_NAME: &str = "storm-default-v1";

/// Where the built-in dataset lives: `$SUPERCELL_CACHE`, else `$XDG_CACHE_HOME/supercell`,
/// else `~/.cache/supercell`.
pub fn default_dataset_dir() -> Result<PathBuf> {
    let base = if let Some(d) = std::env::var_os("SUPERCELL_CACHE") {
        PathBuf::from(d)
    } else if let Some(d) = std::env::var_os("XDG_CACHE_HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(d).join("supercell")
    } else if let Some(home) = std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        PathBuf::from(home).join(".cache").join("supercell")
    } else {
        bail!("no cache directory: set SUPERCELL_CACHE, XDG_CACHE_HOME or HOME");
    };
    Ok(base.join(DEFAULT_DATASET_NAME))
}

/// Returns the built-in dataset, generating it first (with a progress bar) if it is missing.
/// A half-written one from an interrupted run has no manifest and is simply rewritten.
pub fn ensure_default_dataset() -> Result<PathBuf> {
    let dir = default_dataset_dir()?;
    if dir.join(MANIFEST_FILE).is_file() {
        return Ok(dir);
    }
    let params = synth::default_params();
    eprintln!(
        "creating the built-in storm dataset in {} ({} frames, first run only)",
        dir.display(),
        params.frames
    );
    let bar = ProgressBar::new(u64::from(params.frames));
    bar.set_style(
        ProgressStyle::with_template(
            "generate [{elapsed_precise}] [{wide_bar}] {pos}/{len} frames, {msg} (eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    synth::generate_dataset(
        &params,
        &GenerateOptions::default(),
        &dir,
        LaneSpec::Count(4),
        supercell::dataset::DEFAULT_CHUNK_SIZE,
        Provenance::new("supercell (built-in dataset)", Vec::<String>::new()),
        |p| {
            bar.set_position(u64::from(p.frames_done));
            bar.set_message(format!("{:.2} GB", p.bytes_done as f64 / 1e9));
        },
    )
    .with_context(|| format!("creating the built-in dataset in {}", dir.display()))?;
    bar.finish_and_clear();
    Ok(dir)
}

fn summarise(path: &Path, ds: &Dataset) {
    let m = ds.manifest();
    let frames = m.frame_count();
    let bytes = m.total_bytes();
    println!("dataset {}", path.display());
    println!(
        "  {frames} frames, {:.3} GB in all ({:.1} MB per frame on average), {} lanes, chunk {} KiB",
        bytes as f64 / 1e9,
        bytes as f64 / 1e6 / frames.max(1) as f64,
        m.lanes.len(),
        m.chunk_size / 1024
    );
    if let (Some(first), Some(last)) = (m.frames.first(), m.frames.last()) {
        println!("  time {} .. {} s", first.time, last.time);
    }
    for a in &m.attributes {
        let range = a
            .value_range
            .map(|[lo, hi]| format!("values {lo:.4} .. {hi:.4}"))
            .unwrap_or_default();
        println!(
            "  {:<18} {:<8} {:<4} {range}",
            a.name,
            a.grid_type.name(),
            a.grid_class.name()
        );
    }
}

/// Runs `supercell info`.
pub fn run(args: &InfoArgs) -> Result<()> {
    let path = match &args.dataset {
        Some(p) => p.clone(),
        None => ensure_default_dataset()?,
    };
    let ds = Dataset::open(&path).with_context(|| format!("opening {}", path.display()))?;
    summarise(&path, &ds);
    if !args.no_verify {
        let bar = ProgressBar::new(ds.manifest().total_bytes());
        bar.set_style(
            ProgressStyle::with_template(
                "verify [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} ({bytes_per_sec})",
            )
            .expect("valid template")
            .progress_chars("=> "),
        );
        let report = verify(&ds, |p| bar.set_position(p.bytes_done));
        bar.finish_and_clear();
        for p in &report.problems {
            eprintln!("  problem: {p}");
        }
        if !report.is_ok() {
            bail!(
                "{}: {} problems found (re-create it, or run supercell-data verify)",
                path.display(),
                report.problems.len() + report.problems_omitted
            );
        }
        println!(
            "  verified: {} extents, {} grids, checksums and structure OK",
            report.extents, report.grids_checked
        );
    }
    println!(
        "the ingest engines, renderer and player build on this dataset (see the issues); \
         supercell-data inspect/sample show its grids"
    );
    Ok(())
}
