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
use supercell::cluster::{Ranks, Solo};

/// Tools for supercell datasets and NanoVDB files.
#[derive(Parser, Debug)]
#[command(name = "supercell-data", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate a synthetic supercell time series as a striped dataset. Under `mpirun -n N`
    /// (a build with `--features mpi`) rank k generates frames k, k+N, ... into the one
    /// dataset, byte for byte the one a single process writes.
    Generate(generate::GenerateArgs),
    /// Import .nvdb or OpenVDB files (one per frame), or CM1/WRF netCDF output, into a
    /// striped dataset. Under `mpirun -n N` (a build with `--features mpi`) rank k converts
    /// frames k, k+N, ... into the one dataset, as `generate` does.
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
    if let Command::Generate(_) | Command::Import(_) = cli.command {
        return convert_across_ranks(cli.command);
    }
    let result = match cli.command {
        Command::Generate(_) | Command::Import(_) => unreachable!("handled above"),
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

/// `generate` and `import`, as one process or, under `mpirun`, as one of its ranks: each
/// converts its share of the frames into the one dataset (`supercell::dataset::ranks`).
fn convert_across_ranks(command: Command) -> ExitCode {
    // The launcher is recognised here, at the edge, from the variables it sets.
    let ranks: Box<dyn Ranks> = match supercell::cluster::launched(|k| std::env::var(k).ok()) {
        Ok(Some(r)) => r,
        Ok(None) => Box::new(Solo),
        Err(e) => {
            eprintln!("supercell-data: error: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = match &command {
        Command::Generate(a) => generate::run(a, ranks.as_ref()),
        Command::Import(a) => convert::run_import(a, ranks.as_ref()),
        _ => unreachable!("only generate and import convert across ranks"),
    };
    match result {
        Ok(code) => code,
        Err(e) if ranks.size() == 1 => {
            eprintln!("supercell-data: error: {e:#}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("supercell-data: error: rank {}: {e:#}", ranks.rank());
            // A failure every rank heard of ends each rank alone; any other (before the
            // ranks met, or outside their exchanges) could leave the others waiting for
            // this rank: end them all.
            if !every_rank_knows(&e) {
                ranks.abort(1);
            }
            ExitCode::FAILURE
        }
    }
}

/// Whether `e` is a failure the ranks learnt of together (the shared write's exchanges
/// report it on every rank).
fn every_rank_knows(e: &anyhow::Error) -> bool {
    use supercell::dataset::DatasetError;
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<DatasetError>(),
            Some(DatasetError::RankFailed { .. })
        ) || matches!(
            c.downcast_ref::<supercell::synth::SynthError>(),
            Some(supercell::synth::SynthError::Dataset(
                DatasetError::RankFailed { .. }
            ))
        )
    })
}
