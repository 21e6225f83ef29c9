//! `supercell-data generate|import` started by an MPI launcher, in a build without the
//! `mpi` feature: as one of several ranks it refuses (each process would write the whole
//! dataset alone, all into one directory); as rank 0 of 1 it runs as a plain run does.
#![cfg(not(feature = "mpi"))]

use std::process::Command;

#[test]
fn a_build_without_mpi_refuses_to_convert_as_one_of_several_ranks() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("ds");
    let run = |size: &str| {
        Command::new(env!("CARGO_BIN_EXE_supercell-data"))
            .arg("generate")
            .arg(&out)
            .args(["--frames", "2", "--resolution", "16", "--lanes", "1"])
            .env("OMPI_COMM_WORLD_SIZE", size)
            .output()
            .unwrap()
    };
    let refused = run("2");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        stderr.contains("one of 2 ranks") && stderr.contains("--features mpi"),
        "{stderr}"
    );
    assert!(!out.join("manifest.json").exists(), "nothing is written");
    let alone = run("1");
    assert!(
        alone.status.success(),
        "{}",
        String::from_utf8_lossy(&alone.stderr)
    );
    assert!(out.join("manifest.json").is_file());
}
