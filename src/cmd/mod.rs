//! One module per subcommand of the `supercell` binary, and the bare command
//! ([`main_job`]).

pub mod bench;
pub mod doctor;
pub mod info;
pub mod main_job;
pub mod movie;
pub mod play;
pub mod play_ranks;
pub mod render;
pub mod render_path;
pub mod watchdog;

/// A variable of this process's environment (a value that is not Unicode, lossily): the
/// lookup the settings table's parsers read (`supercell::settings`, docs/SETTINGS.md).
pub fn env_var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

/// The renderer's settings from this process's environment.
pub fn render_config() -> anyhow::Result<supercell::render::RenderConfig> {
    Ok(supercell::settings::render_config(&env_var)?)
}

/// The reading side's settings from this process's environment.
pub fn ingest_tuning() -> anyhow::Result<supercell::ingest::IngestTuning> {
    Ok(supercell::settings::ingest_tuning(&env_var)?)
}

/// `cfg` with this process's settings: the renderer's, the player's denoising, and the
/// part size and faults where `cfg` does not set them.
pub fn with_settings(
    cfg: supercell::app::PlayerConfig,
) -> anyhow::Result<supercell::app::PlayerConfig> {
    let tuning = ingest_tuning()?;
    Ok(supercell::app::PlayerConfig {
        render: render_config()?,
        path_denoise: supercell::settings::player_denoise(&env_var)?,
        part_bytes: cfg.part_bytes.or(tuning.part_bytes),
        faults: cfg.faults.clone().or(tuning.faults),
        host_pages: tuning.host_pages,
        ..cfg
    })
}

/// The built-in dataset's directory, created first if missing (with a progress bar when
/// `progress`), in the cache directory this process's environment names
/// (`SUPERCELL_CACHE`, `XDG_CACHE_HOME`, `HOME`: docs/SETTINGS.md).
pub fn builtin_dataset(progress: bool) -> anyhow::Result<std::path::PathBuf> {
    let base = supercell::settings::cache_base(&env_var);
    Ok(supercell::scene::ensure_default_dataset(
        base.as_deref(),
        progress,
    )?)
}

/// `scene` with a built-in dataset ([`supercell::scene::DatasetSpec::Default`]: a scene
/// file that names none) resolved to its directory, created first if missing.
pub fn with_dataset(mut scene: supercell::scene::Scene) -> anyhow::Result<supercell::scene::Scene> {
    if scene.dataset == supercell::scene::DatasetSpec::Default {
        scene.dataset = supercell::scene::DatasetSpec::Path(builtin_dataset(true)?);
    }
    Ok(scene)
}

/// How the user runs one of this project's binaries (`supercell` or `supercell-data`) with
/// `args`, for messages that tell them what to type next: under `cargo run` (Cargo sets
/// `CARGO` for the program it runs) the `cargo run` form, which works from the source tree
/// without installing anything; else the installed name.
pub fn command_line(binary: &str, args: &str) -> String {
    let under_cargo = std::env::var_os("CARGO").is_some()
        && std::env::var_os("CARGO_PKG_NAME").is_some_and(|n| n == "supercell");
    let program = match (under_cargo, binary) {
        (true, "supercell") => "cargo run --release".to_string(),
        (true, _) => format!("cargo run --release --bin {binary}"),
        (false, _) => binary.to_string(),
    };
    match (args.is_empty(), under_cargo) {
        (true, _) => program,
        (false, true) => format!("{program} -- {args}"),
        (false, false) => format!("{program} {args}"),
    }
}

/// An I/O thread count flag's value, capped by what this machine can use (a note on
/// stderr says so).
pub fn io_threads(flag: &str, requested: usize) -> usize {
    let max = supercell::probe::max_io_threads();
    let (threads, note) = supercell::probe::cap_threads(flag, requested, max);
    if let Some(n) = note {
        eprintln!("note: {n}");
    }
    threads
}

/// Ends a run across ranks whose ranks stopped answering: says so and aborts every rank
/// (the silent ones would hold the run, and mpirun, forever).
pub(crate) fn end_run(
    ranks: &dyn supercell::cluster::Ranks,
    silent: &supercell::cluster::Silent,
) -> ! {
    eprintln!(
        "supercell: error: rank {} on {}: {silent}: a rank died or stopped answering; ending the run",
        ranks.rank(),
        ranks.host()
    );
    ranks.abort(1)
}
