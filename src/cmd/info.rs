//! `supercell info [DATASET]`: with no dataset it creates the built-in storm dataset on first
//! run (in the user's cache directory), then verifies the dataset, summarises it and names
//! the commands that play and render it.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use supercell::dataset::{Dataset, verify};
use supercell::scene::ensure_default_dataset;

use super::command_line;

/// Arguments of `supercell info`.
#[derive(clap::Args, Debug, Default)]
pub struct InfoArgs {
    /// Dataset directory; the built-in storm dataset (created on first run) when omitted.
    pub dataset: Option<PathBuf>,
    /// Skip re-reading every extent (verification) and only summarise.
    #[arg(long)]
    pub no_verify: bool,
    /// How long the verification may go without finishing a frame before the command gives
    /// up (a lane that stopped answering): 60 (seconds), 500ms, 2min; 0: wait forever.
    /// Progress is counted in whole frames, so allow for the slowest frame's read.
    #[arg(long, default_value = "60s", value_parser = supercell::units::parse_duration)]
    pub read_timeout: std::time::Duration,
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
        None => ensure_default_dataset(true)?,
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
        let t = args.read_timeout;
        super::watchdog::install((!t.is_zero()).then_some(t));
        let watched = super::watchdog::reading(format!("verifying {}", path.display()));
        let report = verify(&ds, |p| {
            if let Some(w) = &watched {
                w.progress();
            }
            bar.set_position(p.bytes_done)
        });
        drop(watched);
        bar.finish_and_clear();
        for p in &report.problems {
            eprintln!("  problem: {p}");
        }
        if !report.is_ok() {
            bail!(
                "{}: {} problems found (re-create it, or run {})",
                path.display(),
                report.problems.len() + report.problems_omitted,
                command_line("supercell-data", &format!("verify {}", path.display()))
            );
        }
        println!(
            "  verified: {} extents, {} grids, checksums and structure OK",
            report.extents, report.grids_checked
        );
    }
    // What to do with it next, in commands this binary has.
    let shown = path.display();
    println!(
        "play it: {}\n  without a display: {}\na picture: {}",
        command_line("supercell", &format!("play {shown}")),
        command_line(
            "supercell",
            &format!("play {shown} --headless --frames 24 --size 320x180 --json play.json")
        ),
        command_line(
            "supercell",
            &format!("render {shown} --frame 0 --size 1280x720 --out frames")
        ),
    );
    Ok(())
}
