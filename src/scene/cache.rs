//! The built-in storm dataset: where it lives and how it is created on first use.

use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};

use super::SceneError;
use crate::dataset::{DEFAULT_CHUNK_SIZE, LaneSpec, MANIFEST_FILE, Provenance};
use crate::synth::{self, GenerateOptions};

/// Name of the built-in dataset's directory; bump the suffix when the generator's output
/// changes so that an old cache is not mistaken for the current default.
pub const DEFAULT_DATASET_NAME: &str = "storm-default-v4";

/// Where the built-in dataset lives: [`DEFAULT_DATASET_NAME`] in `cache_base`, the cache
/// directory the binary found (`$SUPERCELL_CACHE`, else `$XDG_CACHE_HOME/supercell`, else
/// `~/.cache/supercell`: `settings::cache_base`); `None`: none was found, an error.
pub fn default_dataset_dir(cache_base: Option<&Path>) -> Result<PathBuf, SceneError> {
    let Some(base) = cache_base else {
        return Err(SceneError::new(
            DEFAULT_DATASET_NAME,
            "no cache directory for the built-in dataset: set SUPERCELL_CACHE, XDG_CACHE_HOME or HOME",
        ));
    };
    Ok(base.join(DEFAULT_DATASET_NAME))
}

/// Returns the built-in dataset's directory in `cache_base` ([`default_dataset_dir`]),
/// generating the dataset first if it is missing (with a progress bar on stderr when
/// `progress`). A half-written one from an interrupted run has no manifest and is simply
/// rewritten.
pub fn ensure_default_dataset(
    cache_base: Option<&Path>,
    progress: bool,
) -> Result<PathBuf, SceneError> {
    let dir = default_dataset_dir(cache_base)?;
    if dir.join(MANIFEST_FILE).is_file() {
        return Ok(dir);
    }
    let params = synth::default_params();
    let bar = if progress {
        log::info!(
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
        bar
    } else {
        ProgressBar::hidden()
    };
    synth::generate_dataset(
        &params,
        &GenerateOptions::default(),
        &dir,
        LaneSpec::Count(4),
        DEFAULT_CHUNK_SIZE,
        Provenance::new("supercell (built-in dataset)", Vec::<String>::new()),
        |p| {
            bar.set_position(u64::from(p.frames_done));
            bar.set_message(format!("{:.2} GB", p.bytes_done as f64 / 1e9));
        },
    )
    .map_err(|e| SceneError::new(&dir, format!("creating the built-in dataset failed: {e}")))?;
    bar.finish_and_clear();
    Ok(dir)
}
