//! Every setting the program takes from its environment, in one table ([`SETTINGS`]: name,
//! the flag that sets the same where there is one, default, meaning, where it lands), and
//! the parsers that turn them into the values the library is handed: [`render_config`]
//! ([`RenderConfig`], for `Renderer::with_config`), [`ingest_tuning`] ([`IngestTuning`],
//! for the engines and slots), [`player_denoise`] and [`cache_base`].
//!
//! The parsers read nothing themselves: the binary passes a lookup (its environment, once,
//! at start), tests pass a map. A value that does not parse is an error naming the variable
//! and what it takes, never silently the default (a measurement run with a mistyped
//! variable would otherwise measure the defaults). docs/SETTINGS.md is [`markdown`]'s
//! output (a test holds them equal), as KvikIO documents its defaults in one table.

use std::path::PathBuf;
use std::sync::Arc;

use crate::gpu::{HostPages, MIN_PART_BYTES};
use crate::ingest::{FaultPlan, IngestTuning};
use crate::render::{
    DENOISE_MAX_LEVELS, DenoiseParams, QMC_DIMS_MAX, RenderConfig, SAMPLES_PER_DISPATCH_MAX,
    SKIP_LEVELS_MAX, TracerKnobs,
};

/// Who reads a setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The renderer ([`RenderConfig`]).
    Render,
    /// The player (`supercell play`).
    Player,
    /// Reading frames ([`IngestTuning`]).
    Ingest,
    /// Where the built-in dataset is kept.
    Cache,
    /// `supercell render` alone (read by the binary).
    RenderCommand,
    /// Tests and scripts only (never the program).
    Tests,
}

impl Scope {
    fn title(self) -> &'static str {
        match self {
            Scope::Render => "Renderer (`RenderConfig`)",
            Scope::Player => "Player",
            Scope::Ingest => "Reading frames (`IngestTuning`)",
            Scope::Cache => "Built-in dataset",
            Scope::RenderCommand => "`supercell render`",
            Scope::Tests => "Tests only",
        }
    }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Setting {
    /// The environment variable.
    pub name: &'static str,
    /// The command-line flag that sets the same ("" where none does).
    pub flag: &'static str,
    /// The default, as written in the variable.
    pub default: &'static str,
    /// What it does and which values it takes.
    pub meaning: &'static str,
    /// Who reads it.
    pub scope: Scope,
}

const fn row(
    scope: Scope,
    name: &'static str,
    flag: &'static str,
    default: &'static str,
    meaning: &'static str,
) -> Setting {
    Setting {
        name,
        flag,
        default,
        meaning,
        scope,
    }
}

/// Every setting read from the environment, by scope. A `SUPERCELL_*` name in `src/` that is
/// not here fails `settings::tests`.
pub const SETTINGS: &[Setting] = &[
    row(
        Scope::Render,
        "SUPERCELL_PATH_SAMPLES_PER_DISPATCH",
        "",
        "1 on a software rasteriser, 4 on a GPU",
        "Samples per pixel one path-tracer dispatch adds, 1 to 16 (4 gave 34.2 M samples/s against 28.8 with 1 on the H200; 1 keeps lavapipe under its loop limit).",
    ),
    row(
        Scope::Render,
        "SUPERCELL_PATH_QMC_DIMS",
        "",
        "0",
        "A path sample's first random numbers taken from the Owen-scrambled Sobol sequence, 0 to 64 (2: the camera position; 8: its first steps too). Off: on the storm it did not lower relMSE.",
    ),
    row(
        Scope::Render,
        "SUPERCELL_PATH_CARRY_DEPTH",
        "",
        "1",
        "`1`: one exponential draw per tentative collision, its optical depth carried across majorant segments; `0`: a fresh draw per segment. Undecided on the H200 (within ±5 %).",
    ),
    row(
        Scope::Render,
        "SUPERCELL_PATH_CELL_CACHE",
        "",
        "0",
        "`1`: each slot keeps its majorant cell until the ray leaves it (saves 11 % of the storm's cell lookups, not their registers); `0`: off.",
    ),
    row(
        Scope::Render,
        "SUPERCELL_PATH_COUNTERS",
        "",
        "(unset)",
        "`always`: the work counters compiled into every path dispatch, as before they were compiled out when not counting.",
    ),
    row(
        Scope::Render,
        "SUPERCELL_PATH_SKIP_LEVELS",
        "",
        "1",
        "Empty-space levels above the acceleration cells a path segment may cross at once, 0 to 2 (level l: blocks of 4^l cells a side).",
    ),
    row(
        Scope::Render,
        "SUPERCELL_DENOISE_LEVELS",
        "",
        "5",
        "The denoiser's à-trous levels, 0 to 8 (0: the mean unfiltered).",
    ),
    row(
        Scope::Render,
        "SUPERCELL_DENOISE_SIGMA",
        "",
        "5",
        "The denoiser's luminance edge stop at the first level, in standard deviations of the mean (positive).",
    ),
    row(
        Scope::Render,
        "SUPERCELL_DENOISE_SIGMA_PER_LEVEL",
        "",
        "0.7",
        "The edge stop of each later level as a multiple of the one before (positive).",
    ),
    row(
        Scope::Render,
        "SUPERCELL_DENOISE_EPS",
        "",
        "0.0001",
        "Added to the edge stop (radiance units) so a pixel of zero variance does not divide by zero (positive).",
    ),
    row(
        Scope::Player,
        "SUPERCELL_DENOISE",
        "(`render --denoise on\\|off`)",
        "on",
        "`off`: path mode in the player shows the raw accumulated mean instead of the denoised one (`supercell render` has `--denoise`).",
    ),
    row(
        Scope::Ingest,
        "SUPERCELL_PART_BYTES",
        "",
        "the device's (2 GiB on GPUs whose buffers reach 4 GiB)",
        "Bytes of a slot part, a power of two of at least 65536: small parts make small frames span several, for tests.",
    ),
    row(
        Scope::Ingest,
        "SUPERCELL_HOST_HUGEPAGES",
        "",
        "1",
        "`0`/`off`: host buffers on 4 KiB pages; `1`/`on`: 2 MiB transparent huge pages where the kernel grants them.",
    ),
    row(
        Scope::Ingest,
        "SUPERCELL_FAULTS",
        "",
        "(unset)",
        "Faults injected into every engine's reads, for tests and demonstrations (`eio:lane=1,frame=3; hang:lane=2,for=0.5`; src/ingest/faults.rs).",
    ),
    row(
        Scope::Cache,
        "SUPERCELL_CACHE",
        "",
        "$XDG_CACHE_HOME/supercell, else ~/.cache/supercell",
        "Directory the built-in storm dataset is created in on first use.",
    ),
    row(
        Scope::Cache,
        "XDG_CACHE_HOME",
        "",
        "(unset)",
        "Used for the built-in dataset's directory where SUPERCELL_CACHE is unset.",
    ),
    row(
        Scope::Cache,
        "HOME",
        "",
        "(the user's)",
        "Used for the built-in dataset's directory where neither of the above is set, and for `~/` in scene files' paths.",
    ),
    row(
        Scope::RenderCommand,
        "SUPERCELL_DENOISE_DUMP",
        "",
        "(unset)",
        "`render --converge`: a directory to write the reference and each row's accumulation to, for tuning the denoiser on the CPU.",
    ),
    row(
        Scope::Tests,
        "SUPERCELL_REQUIRE_GPU",
        "",
        "(unset)",
        "Set: GPU tests fail instead of skipping where no GPU (or no CUDA) is found.",
    ),
    row(
        Scope::Tests,
        "SUPERCELL_REQUIRE_CROSSCHECK",
        "",
        "(unset)",
        "Set: tests that compare against another tool fail instead of skipping where it is missing.",
    ),
    row(
        Scope::Tests,
        "SUPERCELL_WRITE_SETTINGS",
        "",
        "(unset)",
        "Set: `settings::tests` writes docs/SETTINGS.md from this table instead of comparing.",
    ),
];

/// A setting whose value does not parse.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{name}={value:?}: {expected}")]
pub struct SettingError {
    /// The variable.
    pub name: String,
    /// Its value.
    pub value: String,
    /// What it takes.
    pub expected: String,
}

/// Looks a variable up (the binary: the process environment; tests: a map).
pub type Lookup<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The variable's value, unless unset or blank.
fn value(env: Lookup, name: &str) -> Option<String> {
    env(name)
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

fn bad(name: &str, value: &str, expected: impl Into<String>) -> SettingError {
    SettingError {
        name: name.to_string(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// A whole number from `lo` to `hi`, or `None` where unset.
fn number(env: Lookup, name: &str, lo: u32, hi: u32) -> Result<Option<u32>, SettingError> {
    let Some(v) = value(env, name) else {
        return Ok(None);
    };
    match v.parse::<u32>() {
        Ok(n) if (lo..=hi).contains(&n) => Ok(Some(n)),
        _ => Err(bad(name, &v, format!("a whole number from {lo} to {hi}"))),
    }
}

/// `0`/`off`/`false`/`no` or `1`/`on`/`true`/`yes`, or `None` where unset.
fn switch(env: Lookup, name: &str) -> Result<Option<bool>, SettingError> {
    let Some(v) = value(env, name) else {
        return Ok(None);
    };
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "true" | "yes" => Ok(Some(true)),
        "0" | "off" | "false" | "no" => Ok(Some(false)),
        _ => Err(bad(name, &v, "0 or 1 (off or on)")),
    }
}

/// A finite positive number, or `None` where unset.
fn positive(env: Lookup, name: &str) -> Result<Option<f32>, SettingError> {
    let Some(v) = value(env, name) else {
        return Ok(None);
    };
    match v.parse::<f32>() {
        Ok(x) if x.is_finite() && x > 0.0 => Ok(Some(x)),
        _ => Err(bad(name, &v, "a positive number")),
    }
}

/// The renderer's configuration: the defaults, changed by the `SUPERCELL_PATH_*` and
/// `SUPERCELL_DENOISE_*` variables of [`SETTINGS`].
pub fn render_config(env: Lookup) -> Result<RenderConfig, SettingError> {
    let d = RenderConfig::default();
    let k = d.path_knobs;
    let counters = "SUPERCELL_PATH_COUNTERS";
    let always_count = match value(env, counters).as_deref() {
        None => false,
        Some("always") => true,
        Some(v) => return Err(bad(counters, v, "`always`, or unset")),
    };
    let path_knobs = TracerKnobs {
        carry_depth: switch(env, "SUPERCELL_PATH_CARRY_DEPTH")?.unwrap_or(k.carry_depth),
        cache_cells: switch(env, "SUPERCELL_PATH_CELL_CACHE")?.unwrap_or(k.cache_cells),
        always_count,
        skip_levels: number(env, "SUPERCELL_PATH_SKIP_LEVELS", 0, SKIP_LEVELS_MAX)?
            .unwrap_or(k.skip_levels),
    };
    let dn = d.denoise;
    let denoise = DenoiseParams {
        levels: number(env, "SUPERCELL_DENOISE_LEVELS", 0, DENOISE_MAX_LEVELS)?
            .unwrap_or(dn.levels),
        sigma: positive(env, "SUPERCELL_DENOISE_SIGMA")?.unwrap_or(dn.sigma),
        sigma_per_level: positive(env, "SUPERCELL_DENOISE_SIGMA_PER_LEVEL")?
            .unwrap_or(dn.sigma_per_level),
        eps: positive(env, "SUPERCELL_DENOISE_EPS")?.unwrap_or(dn.eps),
    };
    Ok(RenderConfig {
        path_knobs,
        qmc_dims: number(env, "SUPERCELL_PATH_QMC_DIMS", 0, QMC_DIMS_MAX)?.unwrap_or(d.qmc_dims),
        samples_per_dispatch: number(
            env,
            "SUPERCELL_PATH_SAMPLES_PER_DISPATCH",
            1,
            SAMPLES_PER_DISPATCH_MAX,
        )?,
        denoise,
    })
}

/// Whether the player's path mode shows the denoised mean (`SUPERCELL_DENOISE`; on unless
/// `off`).
pub fn player_denoise(env: Lookup) -> Result<bool, SettingError> {
    Ok(switch(env, "SUPERCELL_DENOISE")?.unwrap_or(true))
}

/// How frames are laid out and read: the defaults, changed by `SUPERCELL_PART_BYTES`,
/// `SUPERCELL_HOST_HUGEPAGES` and `SUPERCELL_FAULTS`.
pub fn ingest_tuning(env: Lookup) -> Result<IngestTuning, SettingError> {
    let name = "SUPERCELL_PART_BYTES";
    let part_bytes = match value(env, name) {
        None => None,
        Some(v) => match v.parse::<u64>() {
            Ok(b) if b.is_power_of_two() && b >= MIN_PART_BYTES => Some(b),
            _ => {
                return Err(bad(
                    name,
                    &v,
                    format!("a power of two of at least {MIN_PART_BYTES} bytes"),
                ));
            }
        },
    };
    let host_pages = match switch(env, "SUPERCELL_HOST_HUGEPAGES")? {
        Some(false) => HostPages::Base,
        _ => HostPages::Huge,
    };
    let name = "SUPERCELL_FAULTS";
    let faults = match value(env, name) {
        None => None,
        Some(v) => Some(Arc::new(
            FaultPlan::parse(&v).map_err(|e| bad(name, &v, e))?,
        )),
    };
    Ok(IngestTuning {
        part_bytes,
        host_pages,
        faults,
    })
}

/// The directory the built-in dataset's folder is kept in: `$SUPERCELL_CACHE`, else
/// `$XDG_CACHE_HOME/supercell`, else `$HOME/.cache/supercell`; `None` where none is set.
pub fn cache_base(env: Lookup) -> Option<PathBuf> {
    if let Some(d) = value(env, "SUPERCELL_CACHE") {
        Some(PathBuf::from(d))
    } else if let Some(d) = value(env, "XDG_CACHE_HOME") {
        Some(PathBuf::from(d).join("supercell"))
    } else {
        value(env, "HOME").map(|h| PathBuf::from(h).join(".cache").join("supercell"))
    }
}

/// The table as docs/SETTINGS.md shows it.
pub fn markdown() -> String {
    let mut s = String::from(
        "# Settings\n\n\
         Every setting supercell reads from its environment, generated from the table in \
         `src/settings.rs` (`cargo test --lib settings::` fails when this file differs; \
         `SUPERCELL_WRITE_SETTINGS=1` with that test writes it again). The binary reads \
         them once at start and passes the values in; no library module reads the \
         environment. A value that does not parse is an error naming the variable. \
         Variables that only one integration test reads are documented in that test.\n",
    );
    let scopes = [
        Scope::Render,
        Scope::Player,
        Scope::Ingest,
        Scope::Cache,
        Scope::RenderCommand,
        Scope::Tests,
    ];
    for scope in scopes {
        s.push_str(&format!(
            "\n## {}\n\n| variable | flag | default | meaning |\n| --- | --- | --- | --- |\n",
            scope.title()
        ));
        for r in SETTINGS.iter().filter(|r| r.scope == scope) {
            let flag = if r.flag.is_empty() { "" } else { r.flag };
            s.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                r.name, flag, r.default, r.meaning
            ));
        }
    }
    s
}

#[cfg(test)]
mod tests;
