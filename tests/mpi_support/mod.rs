//! What the tests run under `mpirun` share.

use std::process::Command;

/// Whether `mpirun` is installed; where it is not, says the test skipped, except where
/// SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where a missing mpirun fails the test.
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
