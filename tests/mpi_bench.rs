//! `mpirun -n 2 supercell bench` (cargo feature `mpi`, Open MPI): two ranks on one host share
//! its lanes (each reads its lanes' part of every frame), started together, and rank 0 reports each rank and the
//! aggregate, IOR's two ways. Runs where the feature is built and `mpirun` is installed
//! (scripts/test.sh installs Open MPI and runs this file with `--features mpi`); elsewhere
//! it says why it skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

use std::path::Path;
use std::process::{Command, Output};

mod bench_support;
mod mpi_support;
use bench_support::{make, make_on};
use mpi_support::{have_mpirun, rank_pid};

/// `mpirun -n RANKS supercell bench DIR --engine cpu-only ...` with `extra`.
fn bench_command(ranks: u32, dir: &Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-n"])
        .arg(ranks.to_string())
        .arg(env!("CARGO_BIN_EXE_supercell"))
        .arg("bench")
        .arg(dir)
        .args(["--engine", "cpu-only", "--threads", "2", "--io-size", "64K"])
        .args(["--backend", "pread", "--buffered", "--quiet"])
        .args(extra);
    cmd
}

/// [`bench_command`], run to its end.
fn mpi_bench(ranks: u32, dir: &Path, extra: &[&str]) -> Output {
    bench_command(ranks, dir, extra).output().unwrap()
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
    // Both ranks on this one host share its two lanes: rank k reads lane k's part of every
    // frame (make() writes 5 frames over 2 lanes); one pass reads each extent once.
    let ds = supercell::dataset::Dataset::open(&dir).unwrap();
    let frames = &ds.manifest().frames;
    let total: u64 = frames.iter().flat_map(|f| &f.extents).map(|e| e.len).sum();
    for (k, r) in ranks.iter().enumerate() {
        assert_eq!(r["share"]["lanes"], serde_json::json!([k]), "{r}");
        assert_eq!(r["share"]["by_host"], serde_json::json!(true), "{r}");
        let on_lane = |f: &supercell::dataset::Frame| f.extents.iter().any(|e| e.lane == k as u32);
        let mine = frames.iter().filter(|f| on_lane(f)).count() as u64;
        let bytes: u64 = frames
            .iter()
            .flat_map(|f| &f.extents)
            .filter(|e| e.lane == k as u32)
            .map(|e| e.len)
            .sum();
        assert_eq!(r["frames"].as_u64(), Some(mine), "{r}");
        assert_eq!(r["bytes"].as_u64(), Some(bytes), "{r}");
    }
    let agg = &v["aggregate"];
    assert_eq!(agg["bytes"].as_u64(), Some(total));
    assert_eq!(agg["ranks"].as_u64(), Some(2));
    let sum: u64 = ranks.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(sum, total);
    assert!(said.contains("share its lanes"), "{said}");
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
fn gpus_within_each_rank_share_its_lanes_and_the_ranks_add_up() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make_on(&dir, 4);
    let json = tmp.path().join("ranks.json");
    // Two ranks on this host share its four lanes (two each); each rank drives two GPUs
    // (the cpu-only engine opens none: the names set the jobs), one lane each.
    let out = mpi_bench(
        2,
        &dir,
        &[
            "--gpus",
            "0,0",
            "--frames-once",
            "--json",
            json.to_str().unwrap(),
        ],
    );
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ds = supercell::dataset::Dataset::open(&dir).unwrap();
    let extents: Vec<_> = ds
        .manifest()
        .frames
        .iter()
        .flat_map(|f| &f.extents)
        .collect();
    let mut lanes_read = Vec::new();
    for r in v["per_rank"].as_array().unwrap() {
        let jobs = r["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 2, "{r}");
        let mut sum = 0;
        for j in jobs {
            let lanes: Vec<u32> = serde_json::from_value(j["lanes"].clone()).unwrap();
            assert_eq!(lanes.len(), 1, "{j}");
            // The job read every extent on its lane, once.
            let on_lane: u64 = extents
                .iter()
                .filter(|e| e.lane == lanes[0])
                .map(|e| e.len)
                .sum();
            assert_eq!(j["bytes"].as_u64(), Some(on_lane), "{j}");
            sum += on_lane;
            lanes_read.push(lanes[0]);
        }
        assert_eq!(r["bytes"].as_u64(), Some(sum), "{r}");
        assert_eq!(r["frames"].as_u64(), Some(5), "{r}");
    }
    lanes_read.sort_unstable();
    assert_eq!(lanes_read, vec![0, 1, 2, 3]);
    let total: u64 = extents.iter().map(|e| e.len).sum();
    assert_eq!(v["aggregate"]["bytes"].as_u64(), Some(total));
    // Every part of every frame landed: five whole frames.
    assert_eq!(v["aggregate"]["frames"].as_u64(), Some(5));
    // The table has a row per job under its rank.
    assert_eq!(said.matches("  gpu0#").count(), 4, "{said}");
}

#[test]
fn gpus_within_ranks_with_a_cuda_engine_are_refused_where_cuda_is_missing() {
    if !have_mpirun() || supercell::gpu::cuda_probe().is_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make_on(&dir, 4);
    let mut cmd = Command::new("mpirun");
    cmd.args(["--allow-run-as-root", "--oversubscribe", "-n", "2"])
        .arg(env!("CARGO_BIN_EXE_supercell"))
        .arg("bench")
        .arg(&dir)
        .args(["--engine", "staged", "--gpus", "0,0", "--quiet"]);
    let out = cmd.output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("--gpus with the") && said.contains("needs CUDA"),
        "{said}"
    );
}

#[test]
fn three_ranks_on_two_lanes_read_whole_frames_each_once() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make(&dir);
    let json = tmp.path().join("ranks.json");
    let out = mpi_bench(
        3,
        &dir,
        &["--frames-once", "--json", json.to_str().unwrap()],
    );
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ranks = v["per_rank"].as_array().unwrap();
    assert_eq!(ranks.len(), 3);
    // More ranks on the host than lanes: whole frames dealt over every rank in turn (rank k
    // reads frames k, k+3, ...), each extent of them once.
    let ds = supercell::dataset::Dataset::open(&dir).unwrap();
    let frames = &ds.manifest().frames;
    let frame_bytes = |f: &supercell::dataset::Frame| f.extents.iter().map(|e| e.len).sum::<u64>();
    for (k, r) in ranks.iter().enumerate() {
        let mine: Vec<_> = frames.iter().skip(k).step_by(3).collect();
        assert_eq!(r["frames"].as_u64(), Some(mine.len() as u64), "{r}");
        let bytes: u64 = mine.iter().map(|f| frame_bytes(f)).sum();
        assert_eq!(r["bytes"].as_u64(), Some(bytes), "{r}");
    }
    let total: u64 = frames.iter().map(frame_bytes).sum();
    let sum: u64 = ranks.iter().map(|r| r["bytes"].as_u64().unwrap()).sum();
    assert_eq!(
        (sum, v["aggregate"]["bytes"].as_u64()),
        (total, Some(total))
    );
    assert_eq!(v["aggregate"]["ranks"].as_u64(), Some(3));
}

#[test]
fn more_ranks_than_frames_is_refused_by_every_rank_without_a_hang() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make(&dir);
    // Six ranks on one host of two lanes deal whole frames over the ranks: six ranks for
    // five frames is refused on every rank alike.
    let out = mpi_bench(6, &dir, &["--frames-once"]);
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success());
    assert!(said.contains("6 ranks but only 5 frames"), "{said}");
}

#[test]
fn a_rank_that_stops_answering_is_named_and_the_run_ends() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("ds");
    make(&dir);
    let child = bench_command(2, &dir, &["--duration", "3", "--read-timeout", "2"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let started = std::time::Instant::now();
    let pid = loop {
        if let Some(p) = rank_pid(&dir, "bench", 1) {
            break p;
        }
        assert!(started.elapsed().as_secs() < 30, "rank 1 never started");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Rank 1 freezes (as on a hung node) a second into the run.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let stopped = Command::new("kill")
        .args(["-STOP", &pid.to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    let out = child.wait_with_output().unwrap();
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains("rank 1 did not answer within"), "{said}");
    // Ended by the others' wait (the run's 3 s, then the read timeout and the run's time
    // again), not by a hang.
    assert!(
        started.elapsed().as_secs() < 40,
        "{:?}: {said}",
        started.elapsed()
    );
}
