//! `play --headless --frames-out` across MPI ranks (cargo feature `mpi`, Open MPI):
//! alternate frames rendered by two ranks, presented by rank 0 in order, each frame once,
//! byte-equal to what one process presents. Runs where the feature is built and `mpirun`
//! is installed (scripts/test.sh runs it with `--features mpi`); elsewhere it says why it
//! skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

mod mpi_support;
mod storm_support;

use std::path::Path;
use std::process::{Command, Output};

use mpi_support::have_mpirun;
use storm_support::SmallStorm;

/// `[mpirun -n RANKS] supercell play DATASET --headless --frames-out OUT ...`.
fn play(ranks: Option<u32>, dataset: &Path, out: &Path, json: &Path) -> Output {
    let bin = env!("CARGO_BIN_EXE_supercell");
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = Command::new("mpirun");
            c.args([
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
                &n.to_string(),
                bin,
            ]);
            c
        }
        None => Command::new(bin),
    };
    let runtime = std::env::temp_dir().join("supercell-mpi-play-xdg");
    std::fs::create_dir_all(&runtime).unwrap();
    cmd.env("XDG_RUNTIME_DIR", &runtime)
        .arg("play")
        .arg(dataset)
        .args([
            "--headless",
            "--frames",
            "5",
            "--size",
            "64x36",
            "--threads",
            "2",
        ])
        .arg("--frames-out")
        .arg(out)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap()
}

fn frames_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn two_ranks_present_alternate_frames_in_order_equal_to_one_process() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    SmallStorm {
        resolution: 32,
        frames: 5,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "mpi play test",
    }
    .write(&ds);
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    let (j1, j2) = (tmp.path().join("one.json"), tmp.path().join("two.json"));
    let said = |o: &Output| {
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
    };
    let alone = play(None, &ds, &one, &j1);
    assert!(alone.status.success(), "{}", said(&alone));
    let ranks = play(Some(2), &ds, &two, &j2);
    assert!(ranks.status.success(), "{}", said(&ranks));
    let names: Vec<String> = (0..5).map(|f| format!("frame_{f:05}.png")).collect();
    assert_eq!(frames_in(&one), names);
    assert_eq!(frames_in(&two), names);
    for n in &names {
        let (a, b) = (
            std::fs::read(one.join(n)).unwrap(),
            std::fs::read(two.join(n)).unwrap(),
        );
        assert!(a == b, "{n} differs between one process and two ranks");
    }
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&j2).unwrap()).unwrap();
    assert_eq!(v["presented"], serde_json::json!([0, 1, 2, 3, 4]));
    let per_rank = v["per_rank"].as_array().unwrap();
    let frames: Vec<u64> = per_rank
        .iter()
        .map(|r| r["frames"].as_u64().unwrap())
        .collect();
    // Rank 0 renders frames 0, 2, 4; rank 1 frames 1, 3.
    assert_eq!(frames, vec![3, 2]);
    assert!(per_rank[1]["transfer_ms"].as_f64().unwrap() >= 0.0);
    // One report, from rank 0.
    assert_eq!(said(&ranks).matches("play across 2 rank(s)").count(), 1);
}
