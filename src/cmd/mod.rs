//! One module per subcommand of the `supercell` binary, and the bare command
//! ([`main_job`]).

pub mod bench;
pub mod doctor;
pub mod info;
pub mod main_job;
pub mod movie;
pub mod play;
pub mod render;
pub mod render_path;
pub mod watchdog;

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
