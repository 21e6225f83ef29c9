//! `mpirun -n 2 supercell bench` (cargo feature `mpi`, Open MPI): two ranks read disjoint
//! shares of one dataset, started together, and rank 0 reports each rank and the
//! aggregate, IOR's two ways. Runs where the feature is built and `mpirun` is installed
//! (scripts/test.sh installs Open MPI and runs this file with `--features mpi`); elsewhere
//! it says why it skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Output};

mod bench_support;
mod mpi_support;
use bench_support::make;
use mpi_support::have_mpirun;

/// `mpirun -n RANKS supercell bench DIR --engine cpu-only ...` with `extra`.
fn mpi_bench(ranks: u32, dir: &Path, extra: &[&str]) -> Output {
    Command::new("mpirun")
        .args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(ranks.to_string())
        .arg(env!("CARGO_BIN_EXE_supercell"))
        .arg("bench")
        .arg(dir)
        .args(["--engine", "cpu-only", "--threads", "2", "--io-size", "64K"])
        .args(["--backend", "pread", "--buffered", "--quiet"])
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn two_ranks_read_disjoint_shares_and_rank_zero_reports_the_aggregate() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make(&dir);
    let json = tmp.path().join("ranks.json");
    let out = mpi_bench(
        2,
        &dir,
        &["--frames-once", "--json", json.to_str().unwrap()],
    );
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    // One report, from rank 0: the table's header once.
    assert_eq!(
        said.matches("bench across 2 MPI ranks").count(),
        1,
        "{said}"
    );
    assert!(said.contains("stonewalled:"), "{said}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ranks = v["per_rank"].as_array().unwrap();
    assert_eq!(ranks.len(), 2);
    // make() writes 5 frames: ranks own frames 0, 2, 4 and 1, 3; one pass reads each once.
    let owned: Vec<u64> = ranks
        .iter()
        .map(|r| r["frames"].as_u64().unwrap())
        .collect();
    assert_eq!(owned, vec![3, 2]);
    let ds = supercell::dataset::Dataset::open(&dir).unwrap();
    let total: u64 = ds
        .manifest()
        .frames
        .iter()
        .flat_map(|f| &f.extents)
        .map(|e| e.len)
        .sum();
    let agg = &v["aggregate"];
    assert_eq!(agg["bytes"].as_u64(), Some(total));
    assert_eq!(agg["ranks"].as_u64(), Some(2));
    let sum: u64 = ranks.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, total);
    // Each rank's own full result rides along, with its own bytes.
    for r in ranks {
        assert_eq!(r["result"]["io_bytes"].as_u64(), r["bytes"].as_u64());
    }
    let (wall, stone) = (
        agg["wall_s"].as_f64().unwrap(),
        agg["stonewall_s"].as_f64().unwrap(),
    );
    assert!(stone > 0.0 && stone <= wall, "{agg}");
}

#[test]
fn more_ranks_than_frames_is_refused_by_every_rank_without_a_hang() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make(&dir);
    // Three ranks for five frames is fine; six is refused on every rank alike.
    let out = mpi_bench(6, &dir, &["--frames-once"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(said.contains("6 ranks but only 5 frames"), "{said}");
}
