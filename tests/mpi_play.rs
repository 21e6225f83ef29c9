//! `play --headless` across MPI ranks (cargo feature `mpi`, Open MPI): the one coordinator
//! with GPU 1 in rank 1 — alternate frames presented by rank 0 in order, each frame once,
//! byte-equal to what one process presents; jumps exact paused and playing; the path
//! toggle reaching every rank; a row per rank in the JSON. Runs where the feature is built
//! and `mpirun` is installed (scripts/test.sh runs it with `--features mpi`); elsewhere it
//! says why it skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
#![cfg(feature = "mpi")]

mod mpi_support;
mod storm_support;

use std::path::Path;
use std::process::Output;

use mpi_support::{have_mpirun, launch};
use serde_json::Value;
use storm_support::{SmallStorm, damage_magic};

/// `[mpirun -n RANKS] supercell play DATASET --headless --json JSON EXTRA...`.
fn play(ranks: Option<u32>, dataset: &Path, json: &Path, extra: &[&str]) -> Output {
    let mut cmd = launch(
        ranks,
        env!("CARGO_BIN_EXE_supercell"),
        "supercell-mpi-play-xdg",
    );
    cmd.arg("play")
        .arg(dataset)
        .args(["--headless", "--size", "64x36", "--threads", "2"])
        .args(["--timeout", "60s"])
        .arg("--json")
        .arg(json)
        .args(extra)
        .output()
        .unwrap()
}

fn said(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
}

fn frames_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

fn storm(dir: &Path) {
    SmallStorm {
        resolution: 32,
        frames: 5,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "mpi play test",
    }
    .write(dir);
}

fn numbers(v: &Value) -> Vec<u64> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap())
        .collect()
}

/// One path's run of `frames` presentations across 2 ranks on 5 frames: in order, each
/// frame once per pass, from its owner; jumps exact
/// paused and playing; both ranks rendered and rank 1's images reached rank 0.
fn check_path_run(run: &Value, frames: u64) {
    assert_eq!(run["ran"], true, "{run}");
    let g = &run["gpus"];
    assert_eq!(g["in_order"], true, "{g}");
    // A path's run goes on from where the one before left the playhead.
    let first = numbers(&g["presented"])[0];
    let expected: Vec<u64> = (0..frames).map(|i| (first + i) % 5).collect();
    assert_eq!(numbers(&g["presented"]), expected, "{g}");
    let by: Vec<u64> = expected.iter().map(|f| f % 2).collect();
    assert_eq!(numbers(&g["presented_by"]), by, "{g}");
    assert_eq!(run["scrub"]["exact"], true, "{}", run["scrub"]);
    assert_eq!(run["scrub"]["playing_exact"], true, "{}", run["scrub"]);
    let rows = g["gpus"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "a row per rank");
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row["index"], k);
        assert!(!row["host"].as_str().unwrap().is_empty(), "{row}");
        assert!(!row["device"].as_str().unwrap().is_empty(), "{row}");
        assert!(
            row["figures"]["frames_rendered"].as_u64().unwrap() >= 2,
            "rank {k} rendered on {}: {row}",
            run["info"]["path"]
        );
    }
    // Rank 1's images travelled to rank 0, timed (read back there, received here).
    assert!(rows[1]["copies"].as_u64().unwrap() >= 2, "{}", rows[1]);
    assert!(rows[1]["copy_ms_mean"].as_f64().unwrap() > 0.0);
    assert_eq!(rows[0]["copies"], 0);
}

#[test]
fn two_ranks_present_alternate_frames_in_order_equal_to_one_process() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    storm(&ds);
    let (one, two) = (tmp.path().join("one"), tmp.path().join("two"));
    let (j1, j2) = (tmp.path().join("one.json"), tmp.path().join("two.json"));
    let args = |out: &Path| {
        vec![
            "--frames".to_string(),
            "5".into(),
            "--path".into(),
            "host".into(),
            "--scrub-jumps".into(),
            "4".into(),
            "--frames-out".into(),
            out.to_str().unwrap().into(),
        ]
    };
    let a1 = args(&one);
    let alone = play(
        None,
        &ds,
        &j1,
        &a1.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(alone.status.success(), "{}", said(&alone));
    let a2 = args(&two);
    let ranks = play(
        Some(2),
        &ds,
        &j2,
        &a2.iter().map(String::as_str).collect::<Vec<_>>(),
    );
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
    let v: Value = serde_json::from_slice(&std::fs::read(&j2).unwrap()).unwrap();
    let run = &v["paths"][0];
    check_path_run(run, 5);
    assert_eq!(numbers(&run["gpus"]["presented"]), [0, 1, 2, 3, 4]);
    // Rank 0 presents frames 0, 2, 4; rank 1 frames 1, 3.
    let shown: Vec<u64> = run["gpus"]["gpus"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["frames_presented"].as_u64().unwrap())
        .collect();
    assert_eq!(shown, vec![3, 2]);
    assert!(said(&ranks).contains("rank 1 (on "), "{}", said(&ranks));
    // One report, from rank 0.
    assert_eq!(
        said(&ranks).matches("host   2 GPUs").count(),
        1,
        "{}",
        said(&ranks)
    );
}

/// `--path both`: the toggle between the paths reaches rank 1 (a loopback path stands in
/// for direct where no CUDA is), and each path plays in order with exact jumps.
#[test]
fn the_path_toggle_reaches_every_rank() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    storm(&ds);
    let json = tmp.path().join("both.json");
    let extra = ["--frames", "10", "--path", "both", "--scrub-jumps", "3"];
    let out = play(
        Some(2),
        &ds,
        &json,
        &[&extra[..], &["--loopback-direct"]].concat(),
    );
    assert!(out.status.success(), "{}", said(&out));
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let runs = v["paths"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for run in runs {
        check_path_run(run, 10);
    }
    assert_eq!(runs[1]["info"]["path"], "direct");
    let rank1 = &runs[1]["gpus"]["gpus"][1];
    assert_eq!(rank1["label"], "loopback (test)", "{rank1}");
    assert_ne!(runs[0]["gpus"]["gpus"][1]["label"], "loopback (test)");
}

/// `--mode ping-pong` across 2 ranks: rank 0 presents one process's ping-pong order on 11
/// frames (the end frames once, the direction flips), each frame from its owner; the jump
/// while playing, made playing backwards, goes on backwards from its target (frame 3).
#[test]
fn two_ranks_play_ping_pong_in_one_process_order() {
    ping_pong(&[], 2);
}

/// As above with `--gpus 0,0` in each rank: 4 workers, frame `f` from worker `f mod 4`.
#[test]
fn two_ranks_of_two_gpus_play_ping_pong_in_one_process_order() {
    ping_pong(&["--gpus", "0,0"], 4);
}

/// Ping-pong across 2 ranks with `gpus` flags, `workers` workers in all.
fn ping_pong(gpus: &[&str], workers: u64) {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    SmallStorm {
        resolution: 24,
        frames: 11,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "mpi play test",
    }
    .write(&ds);
    let json = tmp.path().join("ping-pong.json");
    let extra = ["--frames", "14", "--path", "host", "--mode", "ping-pong"];
    let out = play(
        Some(2),
        &ds,
        &json,
        &[&extra[..], &["--scrub-jumps", "2"], gpus].concat(),
    );
    assert!(out.status.success(), "{}", said(&out));
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let g = &v["paths"][0]["gpus"];
    let presented = numbers(&g["presented"]);
    assert_eq!(
        presented,
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 9, 8, 7],
        "{g}"
    );
    let by: Vec<u64> = presented.iter().map(|f| f % workers).collect();
    assert_eq!(numbers(&g["presented_by"]), by, "{g}");
    assert_eq!(g["in_order"], true, "{g}");
    let scrub = &v["paths"][0]["scrub"];
    assert_eq!(scrub["exact"], true, "{scrub}");
    assert_eq!(scrub["playing_exact"], true, "{scrub}");
}

/// `--soak` across 2 ranks: every rank samples its own process when rank 0 asks, so both
/// ranks' series have a sample at each of rank 0's times; frames are presented in order
/// through the path flips, and the flips reach rank 1 (its samples show both paths).
#[test]
fn a_soak_across_ranks_samples_every_rank_and_flips_every_rank() {
    soak_across(&[], "20s", 10, 2, true);
}

/// As above with `--gpus 0,0` in each rank (shorter): a series per rank, not per GPU, each
/// rank's samples counting both its GPUs' players.
#[test]
fn a_soak_across_ranks_of_two_gpus_samples_each_rank_once() {
    soak_across(&["--gpus", "0,0"], "8s", 4, 1, false);
}

/// `--soak D` across 2 ranks with `gpus` flags; at least `samples` samples per rank and
/// `toggles` path flips (a toggle every 3 s; opening four devices on lavapipe delays the
/// first flip of a short run); with `verdicts`, every rank's verdict (a short run may have
/// no settled span to judge).
fn soak_across(gpus: &[&str], d: &str, samples: usize, toggles: u64, verdicts: bool) {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    storm(&ds);
    let json = tmp.path().join("soak.json");
    let extra = [
        "--soak",
        d,
        "--sample-every",
        "1s",
        "--toggle-every",
        "3s",
        "--loopback-direct",
    ];
    let out = play(Some(2), &ds, &json, &[&extra[..], gpus].concat());
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("across 2 ranks"), "{text}");
    assert!(text.contains("rank 1 (on "), "{text}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let s = &v["soak"];
    assert_eq!(s["presented_in_order"], true, "{s}");
    assert!(s["presented"].as_u64().unwrap() >= 4, "{s}");
    assert!(s["toggles"].as_u64().unwrap() >= toggles, "{s}");
    assert_eq!(s["errors"].as_array().unwrap().len(), 0, "{s}");
    let ranks = s["ranks"].as_array().unwrap();
    assert_eq!(ranks.len(), 2, "a series per rank");
    let times = |r: &Value| -> Vec<f64> {
        r["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["t_s"].as_f64().unwrap())
            .collect()
    };
    // A sample a second over 20 s is 21; a loaded machine delays ticks (and the first
    // render builds the pipelines), so fewer are certain, but never a handful.
    let t0 = times(&ranks[0]);
    assert!(t0.len() >= samples, "{} samples", t0.len());
    assert_eq!(
        times(&ranks[1]),
        t0,
        "rank 1 sampled at each of rank 0's times"
    );
    for (k, r) in ranks.iter().enumerate() {
        assert_eq!(r["rank"], k);
        assert!(!r["host"].as_str().unwrap().is_empty(), "{r}");
        assert!(r["frames"].as_u64().unwrap() >= 2, "rank {k}: {r}");
        let last = r["samples"].as_array().unwrap().last().unwrap().clone();
        assert!(last["rss"].as_u64().unwrap() > 1 << 20, "{last}");
        assert!(last["fds"].as_u64().unwrap() >= 3, "{last}");
        assert!(last["threads"].as_u64().unwrap() >= 3, "{last}");
        assert!(
            !verdicts || r["verdict"]["flat"].is_boolean(),
            "rank {k}'s verdict: {r}"
        );
    }
    // Rank 1's own player ran both paths: the flips reached it.
    let paths: std::collections::BTreeSet<&str> = ranks[1]["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths.len(), 2, "rank 1's paths: {paths:?}");
    assert!(!verdicts || s["verdict"]["flat"].is_boolean(), "{s}");
}

/// A frame rank 1 owns whose grid header is damaged: rank 1's player marks it damaged and
/// the timeline passes over it; rank 0's report names the frame, rank 1 and its host in the
/// run's faults and in rank 1's row, and the text says so.
#[test]
fn another_rank_s_faults_reach_rank_0_s_report() {
    faults_of_rank_1(&[]);
}

/// As above with `--gpus 0,0` in each rank: frame 3 is worker 3's, rank 1's second GPU;
/// the fault names rank 1 (not the worker) and lands in that GPU's row.
#[test]
fn another_rank_s_faults_name_the_rank_with_two_gpus_each() {
    faults_of_rank_1(&["--gpus", "0,0"]);
}

/// Frame 3 damaged; 2 ranks with `gpus` flags: rank 0's report names rank 1 and its host.
fn faults_of_rank_1(gpus: &[&str]) {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    storm(&ds);
    // Frame 3 is rank 1's (alternate frames over 2 ranks, or over 2 ranks x 2 GPUs). The
    // jump while playing goes to frame 0 and waits for 0, 1, 2: it never waits for the
    // damaged frame.
    damage_magic(&ds, 3);
    let json = tmp.path().join("faults.json");
    let extra = ["--frames", "8", "--path", "host", "--scrub-jumps", "0"];
    let out = play(Some(2), &ds, &json, &[&extra[..], gpus].concat());
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains("on rank 1 (on "), "{text}");
    let v: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let run = &v["paths"][0];
    let faults = &run["faults"];
    assert!(faults["count"].as_u64().unwrap() >= 1, "{faults}");
    assert!(numbers(&faults["damaged_frames"]).contains(&3), "{faults}");
    let f = &faults["faults"][0];
    assert_eq!(f["frame"], 3, "{f}");
    assert_eq!(f["rank"], 1, "{f}");
    assert_eq!(f["kind"], "header", "{f}");
    assert!(!f["host"].as_str().unwrap().is_empty(), "{f}");
    let rows = run["gpus"]["gpus"].as_array().unwrap();
    // Frame 3's owner: worker 3 % workers.
    let owner = &rows[3 % rows.len()];
    assert_eq!(owner["rank"], 1, "{owner}");
    assert!(owner["faults"].as_u64().unwrap() >= 1, "{owner}");
    assert_eq!(numbers(&owner["damaged_frames"]), [3], "{owner}");
    assert_eq!(rows[0]["faults"], 0, "{}", rows[0]);
    // Frame 3 was never presented.
    assert!(!numbers(&run["gpus"]["presented"]).contains(&3), "{run}");
}

/// `--gpus 0,0` within each of 2 ranks (one GPU named twice: two devices on lavapipe): the
/// coordinator on rank 0 drives 4 workers, (rank 0, GPU 0), (rank 0, GPU 1), (rank 1,
/// GPU 0), (rank 1, GPU 1) in that order, alternate frames over the 4; the presented
/// images are byte-equal to one process's with one GPU, in order, each frame once; jumps
/// exact paused and playing; the JSON and the summary have a row per (rank, GPU).
#[test]
fn two_ranks_with_two_gpus_each_present_one_process_s_frames() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    SmallStorm {
        resolution: 32,
        frames: 8,
        lanes: 2,
        chunk: 1 << 20,
        attributes: None,
        made_by: "mpi play test",
    }
    .write(&ds);
    let (one, four) = (tmp.path().join("one"), tmp.path().join("four"));
    let (j1, j4) = (tmp.path().join("one.json"), tmp.path().join("four.json"));
    let args = |out: &Path| -> Vec<String> {
        ["--frames", "8", "--path", "host", "--scrub-jumps", "4"]
            .iter()
            .map(|s| s.to_string())
            .chain(["--frames-out".to_string(), out.to_str().unwrap().into()])
            .collect()
    };
    let a1 = args(&one);
    let alone = play(
        None,
        &ds,
        &j1,
        &a1.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(alone.status.success(), "{}", said(&alone));
    let mut a4 = args(&four);
    a4.extend(["--gpus".to_string(), "0,0".into()]);
    let ranks = play(
        Some(2),
        &ds,
        &j4,
        &a4.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let text = said(&ranks);
    assert!(ranks.status.success(), "{text}");
    // One process playing two GPUs the same way (one rank of two GPUs, no MPI).
    let two = tmp.path().join("two");
    let mut a2 = args(&two);
    a2.extend(["--gpus".to_string(), "0,0".into()]);
    let j2 = tmp.path().join("two.json");
    let gpus2 = play(
        None,
        &ds,
        &j2,
        &a2.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    assert!(gpus2.status.success(), "{}", said(&gpus2));
    let names: Vec<String> = (0..8).map(|f| format!("frame_{f:05}.png")).collect();
    assert_eq!(frames_in(&one), names);
    assert_eq!(frames_in(&four), names);
    assert_eq!(frames_in(&two), names);
    for n in &names {
        let a = std::fs::read(one.join(n)).unwrap();
        let b = std::fs::read(four.join(n)).unwrap();
        assert!(
            a == b,
            "{n} differs between one process and 2 ranks x 2 GPUs"
        );
        let c = std::fs::read(two.join(n)).unwrap();
        assert!(
            a == c,
            "{n} differs between one GPU and one process's 2 GPUs"
        );
    }
    let v: Value = serde_json::from_slice(&std::fs::read(&j4).unwrap()).unwrap();
    let run = &v["paths"][0];
    assert_eq!(run["ran"], true, "{run}");
    let g = &run["gpus"];
    assert_eq!(g["in_order"], true, "{g}");
    assert_eq!(
        numbers(&g["presented"]),
        (0..8).collect::<Vec<u64>>(),
        "{g}"
    );
    let by: Vec<u64> = (0..8).map(|f| f % 4).collect();
    assert_eq!(numbers(&g["presented_by"]), by, "{g}");
    assert_eq!(run["scrub"]["exact"], true, "{}", run["scrub"]);
    assert_eq!(run["scrub"]["playing_exact"], true, "{}", run["scrub"]);
    let rows = g["gpus"].as_array().unwrap();
    assert_eq!(rows.len(), 4, "a row per (rank, GPU): {g}");
    for (k, row) in rows.iter().enumerate() {
        assert_eq!(row["index"], k, "{row}");
        assert_eq!(row["rank"], k / 2, "{row}");
        assert_eq!(row["ordinal"], 0, "{row}");
        assert!(!row["host"].as_str().unwrap().is_empty(), "{row}");
        assert_eq!(row["frames_owned"], 2, "{row}");
        assert_eq!(row["frames_presented"], 2, "{row}");
        assert!(
            row["figures"]["frames_rendered"].as_u64().unwrap() >= 2,
            "worker {k} rendered: {row}"
        );
    }
    // Rank 1's GPUs' images travelled to rank 0; rank 0's second GPU's were copied here.
    for row in &rows[2..] {
        assert!(row["copies"].as_u64().unwrap() >= 2, "{row}");
    }
    assert_eq!(rows[0]["copies"], 0);
    // The summary: a line per (rank, GPU), rank 1's two among them.
    assert_eq!(text.matches("host   4 GPUs").count(), 1, "{text}");
    assert_eq!(text.matches("rank 0 (on ").count(), 2, "{text}");
    assert_eq!(text.matches("rank 1 (on ").count(), 2, "{text}");
}
