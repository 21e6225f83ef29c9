//! The `supercell` command: the main job and its subcommands.

mod cmd;

use clap::{Parser, Subcommand};

/// Stream time series of sparse NanoVDB volumes into GPU memory and ray-march them.
#[derive(Parser, Debug)]
#[command(name = "supercell", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Headless ingest benchmark (gdsio-style): storage → host or GPU memory.
    Bench(cmd::bench::BenchArgs),
    /// Check CUDA, cuFile, nvidia-fs, io_uring, lanes and Vulkan, and say what to fix.
    Doctor(cmd::doctor::DoctorArgs),
    /// Create the built-in storm dataset if needed, verify it and summarise a dataset.
    Info(cmd::info::InfoArgs),
    /// Play a dataset or scene: window with live overlay, kiosk, or headless measurement.
    Play(cmd::play::PlayArgs),
    /// Render dataset frames to PNG headlessly, or time the renderer (`--bench`).
    Render(cmd::render::RenderArgs),
}

fn main() -> std::process::ExitCode {
    supercell::device::ensure_runtime_dir();
    // Piped into `head` and the like, a command should end quietly when the reader goes
    // away, as Unix tools do, rather than panic on the closed pipe.
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let result = match cli.command {
        None => cmd::info::run(&cmd::info::InfoArgs::default()),
        Some(Command::Info(args)) => cmd::info::run(&args),
        // The cuFile driver, where one was opened, closes itself at exit (gds.rs).
        Some(Command::Bench(args)) => cmd::bench::run(&args),
        Some(Command::Doctor(args)) => cmd::doctor::run(&args),
        Some(Command::Render(args)) => cmd::render::run(&args),
        Some(Command::Play(args)) => cmd::play::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("supercell: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
