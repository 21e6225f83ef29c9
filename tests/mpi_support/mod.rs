//! What the tests run under `mpirun` share (tests/mpi_bench.rs, tests/mpi_play.rs, and supercell-data's
//! tests/mpi_convert.rs by path).

use std::process::Command;

/// Whether `mpirun` runs here; where it does not, says why the caller skips, or fails
/// where SUPERCELL_REQUIRE_CROSSCHECK is set (CI installs Open MPI).
pub fn have_mpirun() -> bool {
    let ok = Command::new("mpirun")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_none(),
            "mpirun is missing (Debian: openmpi-bin)"
        );
        eprintln!("skipped: mpirun is not installed (Debian: openmpi-bin)");
    }
    ok
}
