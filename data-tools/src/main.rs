//! `supercell-data`: generate, import, export, inspect, sample and verify supercell datasets
//! and NanoVDB files.

mod args;
mod convert;
mod generate;
mod inspect;
mod mitsuba;
#[cfg(feature = "netcdf")]
mod netcdf_import;
mod netcdf_magic;
mod sample;
mod target;
mod verify;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Tools for supercell datasets and NanoVDB files.
#[derive(Parser, Debug)]
#[command(name = "supercell-data", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a synthetic supercell time series as a striped dataset.
    Generate(generate::GenerateArgs),
    /// Import .nvdb or OpenVDB files (one per frame), or CM1/WRF netCDF output, into a
    /// striped dataset.
    Import(convert::ImportArgs),
    /// Export one frame of a dataset as a standard .nvdb file.
    Export(convert::ExportArgs),
    /// Export one attribute of a frame, with the scene's camera and lights, for Mitsuba 3.
    ExportMitsuba(mitsuba::ExportMitsubaArgs),
    /// Re-read every extent of a dataset and check checksums and grid structure.
    Verify(verify::VerifyArgs),
    /// Describe every grid of a .nvdb file, a raw grid buffer or a dataset.
    Inspect(inspect::InspectArgs),
    /// Print the values at index coordinates, as NanoVDB's accessor reads them.
    Sample(sample::SampleArgs),
}

fn main() -> ExitCode {
    // Piped into `head` and the like, a command should end quietly when the reader goes
    // away, as Unix tools do, rather than panic on the closed pipe.
    // SAFETY: restoring the default disposition of one signal before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // A command ended by Ctrl-C or `kill` removes the temporary file it was writing (an
    // exported .nvdb, a scene) rather than leave it beside its target.
    supercell::atomic_file::remove_on_signal();
    // Notes of the library (a replaced damaged dataset, ...) go to stderr.
    supercell::stderr_log::install();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Generate(a) => generate::run(&a),
        Command::Import(a) => convert::run_import(&a),
        Command::Export(a) => convert::run_export(&a),
        Command::ExportMitsuba(a) => mitsuba::run(&a),
        Command::Verify(a) => verify::run(&a),
        Command::Inspect(a) => inspect::run(&a),
        Command::Sample(a) => sample::run(&a),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("supercell-data: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
