//! `mpirun -n 2 supercell-data generate` (cargo feature `mpi`, Open MPI): two ranks each
//! generate their share of the frames into one dataset, byte for byte the one a single
//! process writes. Runs where the feature is built and `mpirun` is installed
//! (scripts/test.sh installs Open MPI and runs this file with `--features mpi`); elsewhere
//! it says why it skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Output};

use supercell::dataset::ranks::first_difference;

#[path = "../../tests/mpi_support/mod.rs"]
mod mpi_support;
use mpi_support::have_mpirun;

/// `supercell-data generate ds` of a small storm in `dir`, under `mpirun -n RANKS` where
/// given. (The same relative path both times: the manifest records the arguments.)
fn generate(ranks: Option<u32>, dir: &Path) -> Output {
    generate_with(ranks, dir, &[])
}

/// [`generate`] with `extra` arguments.
fn generate_with(ranks: Option<u32>, dir: &Path, extra: &[&str]) -> Output {
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
    // Open MPI's session directory under the test's own folder: mpiruns started at the
    // same moment (tests run in parallel) race creating a shared one in /tmp.
    cmd.current_dir(dir)
        .env("TMPDIR", dir)
        .args(["generate", "ds"])
        .args(["--frames", "5", "--resolution", "32", "--lanes", "3"])
        .args(["--chunk-size", "8K", "--threads", "1"])
        .args(extra)
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
    let (one, two) = (tmp.path().join("one/ds"), tmp.path().join("two/ds"));
    assert_eq!(first_difference(&one, &two).unwrap(), None);
}

/// `mpirun` with a different command line per rank (Open MPI's MPMD form `A : B`): rank r
/// runs `supercell-data` with `per_rank[r]`, in `dir`. Killed if it runs past a minute.
fn mpmd(dir: &Path, per_rank: &[Vec<String>]) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.args(["60", "mpirun", "--allow-run-as-root", "--oversubscribe"]);
    for (r, args) in per_rank.iter().enumerate() {
        if r > 0 {
            cmd.arg(":");
        }
        cmd.args(["-n", "1", env!("CARGO_BIN_EXE_supercell-data")]);
        cmd.args(args);
    }
    cmd.current_dir(dir).env("TMPDIR", dir).output().unwrap()
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| s.to_string()).collect()
}

#[test]
fn two_ranks_generate_the_one_process_bricked_dataset() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = generate_with(None, &tmp.path().join("one"), &["--bricks", "3"]);
    assert!(out.status.success(), "{out:?}");
    let out = generate_with(Some(2), &tmp.path().join("two"), &["--bricks", "3"]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("3 spatial bricks"), "{said}");
    let (one, two) = (tmp.path().join("one/ds"), tmp.path().join("two/ds"));
    let bricks = supercell::dataset::Dataset::open(&one)
        .unwrap()
        .bricks()
        .len();
    assert_eq!(bricks, 3);
    assert_eq!(first_difference(&one, &two).unwrap(), None);
}

#[test]
fn a_rank_failing_before_the_ranks_meet_ends_the_job_without_a_dataset() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let good = strings(&["generate", "ds", "--frames", "4", "--resolution", "32"]);
    let mut bad = good.clone();
    bad.extend(strings(&["--frames-in-flight", "0"]));
    let out = mpmd(tmp.path(), &[good, bad]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    // Ended by MPI's abort, not by the timeout (124), and not successfully.
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{said}"
    );
    assert!(
        said.contains("rank 1: --frames-in-flight must be at least 1"),
        "{said}"
    );
    assert!(!tmp.path().join("ds/manifest.json").exists(), "{said}");
}

#[test]
fn a_rank_whose_input_fails_is_named_on_every_rank_and_no_dataset_is_written() {
    if !have_mpirun() {
        return;
    }
    let cm1 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata/cm1/cm1r21.1_supercell_48x48x35_stretched");
    if !cm1.is_dir() {
        println!("skipped: {} is absent", cm1.display());
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Rank 1 reads a copy of the files whose last one is cut short.
    let broken = tmp.path().join("broken");
    std::fs::create_dir(&broken).unwrap();
    let mut good = strings(&["import"]);
    let mut bad = good.clone();
    for i in 1..=4 {
        let name = format!("cm1out_00000{i}.nc");
        let mut bytes = std::fs::read(cm1.join(&name)).unwrap();
        if i == 4 {
            bytes.truncate(bytes.len() * 2 / 3);
        }
        std::fs::write(broken.join(&name), bytes).unwrap();
        good.push(cm1.join(&name).to_string_lossy().into_owned());
        bad.push(broken.join(&name).to_string_lossy().into_owned());
    }
    for args in [&mut good, &mut bad] {
        args.extend(strings(&["--out", "ds", "--vars", "qr,dbz"]));
    }
    let out = mpmd(tmp.path(), &[good, bad]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{said}"
    );
    // Both ranks say which rank failed.
    assert_eq!(said.matches("rank 1 (").count(), 2, "{said}");
    assert!(!tmp.path().join("ds/manifest.json").exists(), "{said}");
}
