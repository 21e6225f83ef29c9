//! `supercell info [DATASET]`: the main job until the player lands.

use std::path::PathBuf;

/// Arguments of `supercell info`.
#[derive(clap::Args, Debug, Default)]
pub struct InfoArgs {
    /// Dataset directory; the built-in storm dataset (created on first run) when omitted.
    pub dataset: Option<PathBuf>,
}

/// Runs `supercell info`.
pub fn run(_args: &InfoArgs) -> anyhow::Result<()> {
    Ok(())
}
