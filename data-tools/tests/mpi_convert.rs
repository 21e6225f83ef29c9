//! `mpirun -n 2 supercell-data generate` (cargo feature `mpi`, Open MPI): two ranks each
//! generate their share of the frames into one dataset, byte for byte the one a single
//! process writes; a rank that stops answering or dies mid-conversion is named by the
//! other, which ends the run within `--timeout` and leaves the directory as it was. Runs where the feature is built and `mpirun` is installed
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

/// The pid of rank `rank`'s process of the run whose command line holds `marker`, once
/// mpirun started it.
fn rank_pid(marker: &Path, rank: u32) -> Option<u32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).unwrap_or_default();
            let environ = std::fs::read(entry.path().join("environ")).unwrap_or_default();
            let ours = has(&cmdline, marker.as_os_str().as_encoded_bytes())
                && environ.split(|&b| b == 0).any(|v| v == want.as_bytes());
            ours.then_some(pid)
        })
}

/// Every file under `dir` with its bytes (paths relative to `dir`).
fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let name = p.strip_prefix(dir).unwrap().to_string_lossy().into_owned();
            out.insert(name, std::fs::read(&p).unwrap());
        }
    }
    out
}

/// How a test upsets a rank mid-conversion.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Upset {
    /// SIGSTOP: the rank stops answering (a hung node).
    Stop,
    /// SIGKILL: the rank dies (under a launcher that keeps the others running).
    Kill,
}

/// Generates over an existing small dataset with 2 ranks and `--timeout 3`, upsets rank
/// `victim` once the ranks write frames, and checks the others name it and end the run
/// within the timeout (twice it where rank 0 is the victim) plus slack, non-zero. Returns
/// what the run said and the directory (with the dataset that was there before).
fn upset_mid_generate(upset: Upset, victim: u32) -> (String, tempfile::TempDir) {
    let tmp = tempfile::tempdir().unwrap();
    let out = generate(None, tmp.path());
    assert!(out.status.success(), "{out:?}");
    let ds = tmp.path().join("ds");
    let before = snapshot(&ds);
    let mut cmd = Command::new("timeout");
    cmd.args(["120", "mpirun", "--allow-run-as-root", "--oversubscribe"]);
    if upset == Upset::Kill {
        // By default Open MPI's launcher ends the whole job itself when a rank dies (and
        // names it); told not to, it leaves the others to find out for themselves, as a
        // rank lost on another node (or a launcher that does not watch) does.
        cmd.args(["--mca", "orte_abort_on_non_zero_status", "0"]);
    }
    cmd.args(["-n", "2", env!("CARGO_BIN_EXE_supercell-data"), "generate"])
        .arg(&ds)
        .args(["--frames", "400", "--resolution", "64", "--lanes", "3"])
        .args(["--chunk-size", "8K", "--threads", "1", "--timeout", "3"])
        .current_dir(tmp.path())
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = cmd.spawn().unwrap();
    let started = std::time::Instant::now();
    let pid = loop {
        if let Some(p) = rank_pid(&ds, victim) {
            break p;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "rank {victim} never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    // Upset once the ranks write the new dataset's lane files (mid-conversion).
    let writing = || snapshot(&ds).keys().any(|k| k.ends_with(".sclane.tmp"));
    while !writing() {
        assert!(started.elapsed().as_secs() < 60, "the ranks never wrote");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let signal = match upset {
        Upset::Stop => "-STOP",
        Upset::Kill => "-KILL",
    };
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let upset_at = std::time::Instant::now();
    let out = child.wait_with_output().unwrap();
    let took = upset_at.elapsed();
    // A stopped rank MPI's abort did not end would linger: end it, and fail.
    let lingering = rank_pid(&ds, victim);
    if let Some(p) = lingering {
        let _ = Command::new("kill")
            .args(["-KILL", &p.to_string()])
            .status();
    }
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        lingering.is_none(),
        "rank {victim} outlived the run: {said}"
    );
    // Ended by the ranks' own wait and MPI's abort: not successfully, not by `timeout`.
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{:?}: {said}",
        out.status
    );
    let named = format!("rank {victim} did not answer within");
    assert!(said.contains(&named), "{said}");
    let limit = if victim == 0 { 6 } else { 3 };
    assert!(took.as_secs() < limit + 15, "{took:?}: {said}");
    assert!(!said.contains("across 2 MPI ranks"), "{said}");
    if victim != 0 {
        // Rank 0 abandoned the write: the directory holds what it held before, byte for byte.
        assert!(snapshot(&ds) == before, "{said}");
    }
    (said, tmp)
}

#[test]
fn a_rank_stopped_mid_conversion_is_named_and_the_old_dataset_stays() {
    if !have_mpirun() {
        return;
    }
    upset_mid_generate(Upset::Stop, 1);
}

#[test]
fn a_rank_killed_mid_conversion_is_named_and_the_old_dataset_stays() {
    if !have_mpirun() {
        return;
    }
    upset_mid_generate(Upset::Kill, 1);
}

#[test]
fn rank_zero_stopped_mid_conversion_is_named_and_its_files_are_recovered() {
    if !have_mpirun() {
        return;
    }
    let (said, tmp) = upset_mid_generate(Upset::Stop, 0);
    let ds = tmp.path().join("ds");
    // The manifest never moved: the old dataset opens, whole.
    let old = supercell::dataset::Dataset::open(&ds).unwrap();
    assert_eq!(old.frame_count(), 5, "{said}");
    assert!(supercell::dataset::verify(&old, |_| {}).is_ok());
    drop(old);
    // Rank 0's lane files stay with its intent (it could not remove them); the next
    // write removes them, as after any crash.
    assert!(snapshot(&ds).keys().any(|k| k.ends_with(".tmp")), "{said}");
    let again = generate(None, tmp.path());
    assert!(again.status.success(), "{again:?}");
    assert!(
        !snapshot(&ds)
            .keys()
            .any(|k| k.ends_with(".tmp") || k.contains("intent")),
        "{:?}",
        snapshot(&ds).keys()
    );
}
