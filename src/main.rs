//! The `supercell` command: the main job (the bare command) and its subcommands.

mod cmd;

use clap::{Parser, Subcommand};

/// Examples at the end of `supercell --help`.
const EXAMPLES: &str = "\
Examples:
  supercell                            play the built-in storm (created on first run); without
                                       a display, a short headless run: picture and figures
  supercell play scenes/storm.toml     play a scene in a window (D: direct paths on/off)
  supercell play --headless --frames 24 --size 320x180 --json play.json
                                       measure the player without a window
  supercell render scenes/storm.toml --frame 30 --out frames
                                       render a frame to PNG
  supercell bench DATASET --engine cpu-only
                                       storage to memory, gdsio-style
  supercell doctor                     what this machine can do, and what to fix
  supercell info                       verify and summarise the built-in dataset";

/// Plays time series of sparse NanoVDB volumes streamed from fast storage into GPU memory.
///
/// With no command, plays the built-in storm (created on first run) in a window; without a
/// display, makes a short headless run that writes a picture and the frames/s and GB/s it
/// measured, and says how to open the window.
#[derive(Parser, Debug)]
#[command(
    name = "supercell",
    version,
    after_help = EXAMPLES,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(flatten)]
    main: cmd::main_job::MainArgs,
    #[command(subcommand)]
    command: Option<Command>,
}

/// The subcommands, in the order `--help` lists them: the player first.
#[derive(Subcommand, Debug)]
enum Command {
    /// Play a dataset or scene: window with live overlay, kiosk, or headless measurement.
    Play(cmd::play::PlayArgs),
    /// Render dataset frames to PNG headlessly, or time the renderer (`--bench`).
    Render(cmd::render::RenderArgs),
    /// Headless ingest benchmark (gdsio-style): storage → host or GPU memory.
    Bench(cmd::bench::BenchArgs),
    /// Check CUDA, cuFile, nvidia-fs, io_uring, lanes and Vulkan, and say what to fix.
    Doctor(cmd::doctor::DoctorArgs),
    /// Create the built-in storm dataset if needed, verify it and summarise a dataset.
    Info(cmd::info::InfoArgs),
}

fn main() -> std::process::ExitCode {
    supercell::stderr_log::install();
    ensure_runtime_dir();
    // Piped into `head` and the like, a command should end quietly when the reader goes
    // away, as Unix tools do, rather than panic on the closed pipe.
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        None => cmd::main_job::run(&cli.main),
        Some(Command::Play(args)) => cmd::play_ranks::run(&args),
        Some(Command::Render(args)) => cmd::render::run(&args),
        // The cuFile driver, where one was opened, closes itself at exit (gds.rs).
        Some(Command::Bench(args)) => cmd::bench::run(&args),
        Some(Command::Doctor(args)) => cmd::doctor::run(&args),
        Some(Command::Info(args)) => cmd::info::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("supercell: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Sets `XDG_RUNTIME_DIR` to a private directory where it is unset or unusable
/// ([`supercell::device::private_runtime_dir`]), so Mesa's Vulkan drivers do not print their
/// warning about it. First thing in `main`, before any thread exists.
fn ensure_runtime_dir() {
    use supercell::device::{RUNTIME_DIR_VAR, private_runtime_dir};
    let current = std::env::var_os(RUNTIME_DIR_VAR);
    let wayland = std::env::var_os("WAYLAND_DISPLAY");
    if let Some(dir) = private_runtime_dir(current.as_ref(), wayland.as_ref()) {
        // SAFETY: called at the start of `main`, before any other thread exists, so nothing
        // reads the environment concurrently.
        unsafe { std::env::set_var(RUNTIME_DIR_VAR, &dir) };
    }
}
