//! `supercell info [DATASET]`: with no dataset it creates the built-in storm dataset on first
//! run (in the user's cache directory), then verifies the dataset, summarises it and names
//! the commands that play and render it.

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use supercell::dataset::{Attribute, Dataset, VerifyReport, verify};

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
    /// Print the summary as one JSON object on stdout (frames, times, lanes, and per
    /// attribute its type, class, value range and units) instead of text; verification
    /// problems still go to stderr and fail the command.
    #[arg(long)]
    pub json: bool,
}

/// An attribute's line of the summary: name, type, class, value range and its unit.
fn attribute_line(a: &Attribute) -> String {
    let range = match (a.value_range, &a.units) {
        (Some([lo, hi]), Some(units)) => format!("values {lo:.4} .. {hi:.4} {units}"),
        (Some([lo, hi]), None) => format!("values {lo:.4} .. {hi:.4}"),
        (None, Some(units)) => format!("units {units}"),
        (None, None) => String::new(),
    };
    format!(
        "  {:<18} {:<8} {:<4} {range}",
        a.name,
        a.grid_type.name(),
        a.grid_class.name()
    )
    .trim_end()
    .to_owned()
}

/// The summary as JSON: what `--json` prints.
fn summary_json(path: &Path, ds: &Dataset) -> serde_json::Value {
    let m = ds.manifest();
    let attributes: Vec<serde_json::Value> = m
        .attributes
        .iter()
        .map(|a| {
            serde_json::json!({
                "name": a.name,
                "grid_type": a.grid_type.name(),
                "grid_class": a.grid_class.name(),
                "value_range": a.value_range,
                "units": a.units,
            })
        })
        .collect();
    serde_json::json!({
        "dataset": path.display().to_string(),
        "frames": m.frame_count(),
        "bytes": m.total_bytes(),
        "lanes": m.lanes.len(),
        "time": m.frames.first().zip(m.frames.last()).map(|(f, l)| [f.time, l.time]),
        "attributes": attributes,
        "bricks": m.bricks().iter().map(|b| serde_json::json!({
            "index_box": b.index_box,
            "world_box": b.world_box,
        })).collect::<Vec<_>>(),
    })
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
        println!("{}", attribute_line(a));
    }
    let bricks = m.bricks();
    if !bricks.is_empty() {
        println!(
            "  {} spatial bricks (sort-last: mpirun -n {} supercell render --split space, or \
             fewer ranks sharing the bricks; play and a plain render refuse it)",
            bricks.len(),
            bricks.len()
        );
        for (k, b) in bricks.iter().enumerate() {
            let [lo, hi] = b.index_box;
            println!("    brick {k}: voxels {lo:?}..{hi:?} (max exclusive)");
        }
    }
}

/// Runs `supercell info`.
pub fn run(args: &InfoArgs) -> Result<()> {
    let path = match &args.dataset {
        Some(p) => p.clone(),
        None => super::builtin_dataset(true)?,
    };
    let ds = Dataset::open(&path).with_context(|| format!("opening {}", path.display()))?;
    if args.json {
        let text = serde_json::to_string_pretty(&summary_json(&path, &ds))?;
        // Verified before it is printed, so a printed summary is a sound dataset's.
        if !args.no_verify {
            verify_all(&path, &ds, args.read_timeout)?;
        }
        println!("{text}");
        return Ok(());
    }
    summarise(&path, &ds);
    if !args.no_verify {
        let report = verify_all(&path, &ds, args.read_timeout)?;
        println!(
            "  verified: {} extents, {} grids, checksums and structure OK",
            report.extents, report.grids_checked
        );
    }
    // What to do with it next, in commands this binary has.
    let shown = path.display();
    let bricks = ds.bricks().len();
    if bricks > 0 {
        // Bricks hold no whole grid: only the ranks of a sort-last render draw them.
        println!(
            "a picture: {}",
            command_line(
                "mpirun",
                &format!(
                    "-n {bricks} supercell render {shown} --split space --frame 0 --size \
                     1280x720 --out frames"
                )
            )
        );
        return Ok(());
    }
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

/// Re-reads every extent of `ds` with a progress bar and the read watchdog; problems go to
/// stderr and fail the command.
fn verify_all(path: &Path, ds: &Dataset, t: std::time::Duration) -> Result<VerifyReport> {
    let bar = ProgressBar::new(ds.manifest().total_bytes());
    bar.set_style(
        ProgressStyle::with_template(
            "verify [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} ({bytes_per_sec})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    super::watchdog::install((!t.is_zero()).then_some(t));
    let watched = super::watchdog::reading(format!("verifying {}", path.display()));
    let report = verify(ds, |p| {
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
    Ok(report)
}
