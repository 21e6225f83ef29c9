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
    /// Create the built-in storm dataset if needed, verify it and summarise a dataset.
    Info(cmd::info::InfoArgs),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => cmd::info::run(&cmd::info::InfoArgs::default()),
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
