//! `supercell doctor`: what this machine offers the ingest paths, and what to fix.

use std::path::PathBuf;

use anyhow::{Context, Result};

use supercell::dataset::Dataset;

/// Arguments of `supercell doctor`.
#[derive(clap::Args, Debug)]
pub struct DoctorArgs {
    /// Lane directories or files to check (block device, file system, O_DIRECT, udev).
    pub paths: Vec<PathBuf>,
    /// Check every lane of this dataset.
    #[arg(long)]
    pub dataset: Option<PathBuf>,
    /// Write the report as JSON here.
    #[arg(long)]
    pub json: Option<PathBuf>,
}

/// Runs `supercell doctor`.
pub fn run(args: &DoctorArgs) -> Result<()> {
    let mut lanes = args.paths.clone();
    if let Some(d) = &args.dataset {
        let ds =
            Dataset::open(d).with_context(|| format!("cannot open dataset {}", d.display()))?;
        let m = ds.manifest();
        lanes.extend((0..m.lanes.len()).map(|l| m.lane_dir(l as u32)));
    }
    let r = supercell::doctor::diagnose(&lanes);
    print!("{}", supercell::doctor::text(&r));
    if let Some(j) = &args.json {
        std::fs::write(j, serde_json::to_vec_pretty(&r)?)
            .with_context(|| format!("cannot write {}", j.display()))?;
    }
    Ok(())
}
