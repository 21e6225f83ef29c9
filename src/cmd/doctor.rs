//! `supercell doctor`: what this machine offers each part of supercell, and what to fix.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use supercell::dataset::MANIFEST_FILE;
use supercell::doctor::{Request, Status, diagnose};

/// Arguments of `supercell doctor`.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Datasets (directories with manifest.json, or the manifest) whose lanes to check,
    /// or lane directories and files to check one by one.
    #[arg(value_name = "DATASET|PATH")]
    pub targets: Vec<PathBuf>,
    /// A dataset whose lanes to check (as a DATASET argument).
    #[arg(long)]
    pub dataset: Vec<PathBuf>,
    /// Print the report as JSON instead of text; `--json=FILE` writes it to FILE and still
    /// prints the text. Each check is {name, status: ok|warn|fail|skip, detail, fix, facts...}
    /// (README, "doctor").
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "-")]
    pub json: Option<PathBuf>,
}

/// Whether `p` names a dataset rather than a lane directory or file.
fn is_dataset(p: &Path) -> bool {
    if p.is_dir() {
        p.join(MANIFEST_FILE).is_file()
    } else {
        p.extension().is_some_and(|e| e == "json")
    }
}

/// Runs `supercell doctor`.
pub fn run(args: &DoctorArgs) -> Result<()> {
    let mut req = Request {
        datasets: args.dataset.clone(),
        ..Request::default()
    };
    for t in &args.targets {
        if is_dataset(t) {
            req.datasets.push(t.clone());
        } else {
            req.paths.push(t.clone());
        }
    }
    let report = diagnose(&req);
    match args.json.as_deref() {
        Some(p) if p == Path::new("-") => {
            println!("{}", report.to_json_string());
        }
        Some(p) => {
            print!("{}", report.text());
            std::fs::write(p, report.to_json_string() + "\n")
                .with_context(|| format!("cannot write {}", p.display()))?;
        }
        None => print!("{}", report.text()),
    }
    // A failed check is a finding the caller (a script, CI) must not read as "all is well".
    let failed: Vec<&str> = report
        .checks
        .iter()
        .filter(|c| c.status == Status::Fail)
        .map(|c| c.name.as_str())
        .collect();
    if !failed.is_empty() {
        anyhow::bail!(
            "{} check(s) failed: {} (the report says why and what to fix)",
            failed.len(),
            failed.join(", ")
        );
    }
    Ok(())
}
