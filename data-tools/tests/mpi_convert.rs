//! `mpirun -n 2 supercell-data generate` (cargo feature `mpi`, Open MPI): two ranks each
//! generate their share of the frames into one dataset, byte for byte the one a single
//! process writes. Runs where the feature is built and `mpirun` is installed
//! (scripts/test.sh installs Open MPI and runs this file with `--features mpi`); elsewhere
//! it says why it skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Output};

use supercell::dataset::ranks::comparable_contents;

fn have_mpirun() -> bool {
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

/// `supercell-data generate ds` of a small storm in `dir`, under `mpirun -n RANKS` where
/// given. (The same relative path both times: the manifest records the arguments.)
fn generate(ranks: Option<u32>, dir: &Path) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = Command::new("mpirun");
            c.args([
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                &n.to_string(),
            ]);
            c.arg(env!("CARGO_BIN_EXE_supercell-data"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_supercell-data")),
    };
    cmd.current_dir(dir)
        .args(["generate", "ds"])
        .args(["--frames", "5", "--resolution", "32", "--lanes", "3"])
        .args(["--chunk-size", "8K", "--threads", "1"])
        .output()
        .unwrap()
}

#[test]
fn two_ranks_generate_the_one_process_dataset() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = generate(None, &tmp.path().join("one"));
    assert!(out.status.success(), "{out:?}");
    let out = generate(Some(2), &tmp.path().join("two"));
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // One summary, from rank 0.
    assert_eq!(said.matches("across 2 MPI ranks").count(), 1, "{said}");
    let (a, b) = (
        comparable_contents(&tmp.path().join("one/ds")).unwrap(),
        comparable_contents(&tmp.path().join("two/ds")).unwrap(),
    );
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    for (name, bytes) in &a {
        assert!(&b[name] == bytes, "{name} differs");
    }
}
