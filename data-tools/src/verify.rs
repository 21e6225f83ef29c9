//! `supercell-data verify DATASET`.

use crate::target;
use anyhow::Result;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::PathBuf;
use std::process::ExitCode;
use supercell::dataset::verify;

/// Arguments of `verify`.
#[derive(clap::Args, Debug)]
pub struct VerifyArgs {
    /// The dataset directory.
    pub dataset: PathBuf,
}

/// A progress bar over bytes, as every long command here shows.
pub fn byte_bar(total: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::new(total);
    bar.set_style(
        ProgressStyle::with_template(
            "{msg} [{elapsed_precise}] [{wide_bar}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

/// Runs `verify`.
pub fn run(args: &VerifyArgs) -> Result<ExitCode> {
    let ds = target::open_dataset(&args.dataset)?;
    let bar = byte_bar(ds.manifest().total_bytes(), "verify");
    let report = verify(&ds, |p| {
        bar.set_position(p.bytes_done);
        if p.problems > 0 {
            bar.set_message(format!("verify ({} problems)", p.problems));
        }
    });
    bar.finish_and_clear();
    for p in &report.problems {
        println!("{}: {p}", args.dataset.display());
    }
    if report.problems_omitted > 0 {
        println!("... and {} more problems", report.problems_omitted);
    }
    println!(
        "{}: {} frames, {} extents, {:.3} GB, {} grids checked{}: {}",
        args.dataset.display(),
        report.frames,
        report.extents,
        report.bytes as f64 / 1e9,
        report.grids_checked,
        if report.grids_skipped > 0 {
            format!(" ({} not NanoVDB-checked)", report.grids_skipped)
        } else {
            String::new()
        },
        if report.is_ok() {
            "OK"
        } else {
            "PROBLEMS FOUND"
        }
    );
    Ok(if report.is_ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
