//! `mpirun -n N supercell-data generate|import` (cargo feature `mpi`, Open MPI): the ranks
//! each convert their share of the frames into one dataset, byte for byte the one a single
//! process writes (generate; import of .vdb and .nvdb files); a rank that stops answering
//! or dies mid-conversion is named by the other, which ends the run within `--timeout` and
//! leaves the directory as it was. Runs where the feature is built and `mpirun` is
//! installed (scripts/test.sh installs Open MPI and runs this file with `--features mpi`);
//! elsewhere it says why it skipped, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where
//! it fails.
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
    let Some(files) = cm1_files() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    damaged_for_rank_one(tmp.path(), &files, &["--vars", "qr,dbz"]);
}

/// The four CM1 output files of realdata, where `mpirun` runs and they are present (else
/// says why the caller skips).
fn cm1_files() -> Option<Vec<std::path::PathBuf>> {
    if !have_mpirun() {
        return None;
    }
    let cm1 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata/cm1/cm1r21.1_supercell_48x48x35_stretched");
    if !cm1.is_dir() {
        println!("skipped: {} is absent", cm1.display());
        return None;
    }
    Some(
        (1..=4)
            .map(|i| cm1.join(format!("cm1out_00000{i}.nc")))
            .collect(),
    )
}

/// `mpirun` of `import FILES --out ds EXTRA` in `dir` where rank 1 reads a copy of `files`
/// whose last one is cut short: both ranks name rank 1, the run fails (not by a hang) and
/// no dataset is written. What the run said.
fn damaged_for_rank_one(dir: &Path, files: &[std::path::PathBuf], extra: &[&str]) -> String {
    let broken = dir.join("broken");
    std::fs::create_dir(&broken).unwrap();
    let mut good = strings(&["import"]);
    let mut bad = good.clone();
    for (i, f) in files.iter().enumerate() {
        let copy = broken.join(f.file_name().unwrap());
        let mut bytes = std::fs::read(f).unwrap();
        if i + 1 == files.len() {
            bytes.truncate(bytes.len() * 2 / 3);
        }
        std::fs::write(&copy, bytes).unwrap();
        good.push(f.to_string_lossy().into_owned());
        bad.push(copy.to_string_lossy().into_owned());
    }
    for args in [&mut good, &mut bad] {
        args.extend(strings(&["--out", "ds"]));
        args.extend(strings(extra));
    }
    let out = mpmd(dir, &[good, bad]);
    let said =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && out.status.code() != Some(124),
        "{said}"
    );
    // Both ranks say which rank failed.
    assert_eq!(said.matches("rank 1 (").count(), 2, "{said}");
    assert!(!dir.join("ds/manifest.json").exists(), "{said}");
    said
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
    println!("rank {victim} {signal}: the run ended {took:?} after");
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

/// Writes `count` small OpenVDB frames into `dir` with Debian's python3-openvdb: a float
/// fog grid `density` and a vector grid `velocity` (imported as its length), in an order
/// that changes from file to file (grids are matched by name). `None` (said why) where
/// pyopenvdb is missing, unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where it fails.
fn vdb_frames(dir: &Path, count: usize) -> Option<Vec<std::path::PathBuf>> {
    let script = r#"
import os, sys
try:
    import pyopenvdb as vdb
except ImportError:
    sys.exit(3)
out, count = sys.argv[1], int(sys.argv[2])
for f in range(count):
    d = vdb.FloatGrid(0.0)
    d.name = "density"
    d.gridClass = vdb.GridClass.FOG_VOLUME
    a = d.getAccessor()
    v = vdb.Vec3SGrid()
    v.name = "velocity"
    b = v.getAccessor()
    for i in range(-12 + f, 14 + 2 * f):
        for j in range(-6, 7, 2):
            for k in range(0, 9, 3):
                a.setValueOn((i, j, k), 0.013 * (i * i + j + k + f) + 0.1)
                b.setValueOn((i, j, k), (0.5 * i, 0.25 * j - f, 0.1 * k))
    grids = [d, v] if f % 2 == 0 else [v, d]
    vdb.write(os.path.join(out, "frame_%03d.vdb" % f), grids=grids)
"#;
    let status = Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(dir)
        .arg(count.to_string())
        .status();
    let reason = match status {
        Ok(s) if s.success() => {
            return Some(
                (0..count)
                    .map(|f| dir.join(format!("frame_{f:03}.vdb")))
                    .collect(),
            );
        }
        Ok(s) if s.code() == Some(3) => "/usr/bin/python3 cannot import pyopenvdb".to_string(),
        Ok(s) => panic!("writing .vdb files with pyopenvdb failed: {s}"),
        Err(e) => format!("cannot run /usr/bin/python3: {e}"),
    };
    assert!(
        std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_none(),
        "{reason}"
    );
    println!("skipped: {reason}");
    None
}

/// `supercell-data import FILES --out ds EXTRA` in `dir`, under `mpirun -n RANKS` where
/// given (the same arguments both ways: the manifest records them).
fn import(ranks: Option<u32>, dir: &Path, files: &[std::path::PathBuf], extra: &[&str]) -> Output {
    std::fs::create_dir_all(dir).unwrap();
    let mut cmd = match ranks {
        Some(n) => {
            let mut c = Command::new("timeout");
            c.args([
                "120",
                "mpirun",
                "--allow-run-as-root",
                "--oversubscribe",
                "-n",
            ]);
            c.arg(n.to_string())
                .arg(env!("CARGO_BIN_EXE_supercell-data"));
            c
        }
        None => Command::new(env!("CARGO_BIN_EXE_supercell-data")),
    };
    cmd.current_dir(dir)
        .env("TMPDIR", dir)
        .arg("import")
        .args(files)
        .args(["--out", "ds"])
        .args(extra)
        .output()
        .unwrap()
}

/// What an import printed, less its timing (the summary line's seconds and GB/s).
fn report_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("GB/s of output"))
        .map(str::to_owned)
        .collect()
}

/// Imports `files` as one process and as 2 and 3 ranks (`extra` each time): the same
/// dataset byte for byte, and the same report, printed once.
fn assert_ranks_import_as_one_process(tmp: &Path, files: &[std::path::PathBuf], extra: &[&str]) {
    let one = import(None, &tmp.join("one"), files, extra);
    assert!(one.status.success(), "{one:?}");
    for n in [2, 3] {
        let dir = tmp.join(format!("ranks{n}"));
        let out = import(Some(n), &dir, files, extra);
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{n} ranks: {said}");
        assert_eq!(
            first_difference(&tmp.join("one/ds"), &dir.join("ds")).unwrap(),
            None,
            "{n} ranks"
        );
        assert_eq!(report_lines(&out), report_lines(&one), "{n} ranks: {said}");
        assert_eq!(said.matches("GB/s of output").count(), 1, "{said}");
    }
}

#[test]
fn two_and_three_ranks_import_vdb_files_as_one_process_does() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(files) = vdb_frames(tmp.path(), 5) else {
        return;
    };
    let extra = ["--grid-type", "fp8", "--lanes", "3", "--chunk-size", "8K"];
    assert_ranks_import_as_one_process(tmp.path(), &files, &extra);
    // The report covers every rank's files: the vector and each attribute's error.
    let out = import(None, &tmp.path().join("again"), &files, &extra);
    let lines = report_lines(&out).join("\n");
    assert!(lines.contains("velocity: a vector grid"), "{lines}");
    assert!(lines.contains("density: fp8 quantisation"), "{lines}");
}

#[test]
fn two_and_three_ranks_import_nvdb_files_as_one_process_does() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = generate(None, &tmp.path().join("source"));
    assert!(out.status.success(), "{out:?}");
    // The generated storm's 5 frames as standard .nvdb files.
    let files: Vec<std::path::PathBuf> = (0..5)
        .map(|f| {
            let file = tmp.path().join(format!("frame_{f}.nvdb"));
            let out = Command::new(env!("CARGO_BIN_EXE_supercell-data"))
                .arg("export")
                .arg(tmp.path().join("source/ds"))
                .args(["--frame", &f.to_string(), "--out"])
                .arg(&file)
                .output()
                .unwrap();
            assert!(out.status.success(), "{out:?}");
            file
        })
        .collect();
    assert_ranks_import_as_one_process(tmp.path(), &files, &["--lanes", "2"]);
}

#[test]
fn two_ranks_import_realdata_vdb_frames_as_one_process_does() {
    if !have_mpirun() {
        return;
    }
    let seq = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata/vdb/blender_mantaflow_smoke_fire");
    if !seq.is_dir() {
        println!("skipped: {} is absent", seq.display());
        return;
    }
    let files: Vec<std::path::PathBuf> = (1..=3)
        .map(|f| seq.join(format!("fluid_data_000{f}.vdb")))
        .collect();
    let tmp = tempfile::tempdir().unwrap();
    assert_ranks_import_as_one_process(tmp.path(), &files, &["--grid-type", "fp16"]);
}

#[test]
fn a_rank_whose_vdb_file_is_damaged_is_named_on_every_rank_and_no_dataset_is_written() {
    if !have_mpirun() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(files) = vdb_frames(tmp.path(), 4) else {
        return;
    };
    // Rank 1 (frames 1 and 3) reads a copy of the files whose last one is cut short.
    let said = damaged_for_rank_one(tmp.path(), &files, &[]);
    // The error names the file.
    assert!(said.contains("frame_003.vdb"), "{said}");
}

#[test]
fn two_and_three_ranks_import_netcdf_as_one_process_does_and_report_every_rank() {
    let Some(files) = cm1_files() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    // fp8: every attribute reports its largest error, which rank 0 gathers from all.
    let extra = ["--vars", "qr,dbz,w", "--grid-type", "fp8", "--lanes", "3"];
    let one = import(None, &tmp.path().join("one"), &files, &extra);
    assert!(one.status.success(), "{one:?}");
    // Each attribute's line: its background, quantisation error and non-finite count.
    let attribute_lines = |out: &Output| -> Vec<String> {
        let lines = report_lines(out);
        lines
            .into_iter()
            .filter(|l| l.contains(" dropped"))
            .collect()
    };
    assert_eq!(attribute_lines(&one).len(), 3, "{one:?}");
    for n in [2, 3] {
        let dir = tmp.path().join(format!("ranks{n}"));
        let out = import(Some(n), &dir, &files, &extra);
        let said = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{n} ranks: {said}");
        assert_eq!(
            first_difference(&tmp.path().join("one/ds"), &dir.join("ds")).unwrap(),
            None,
            "{n} ranks"
        );
        assert_eq!(attribute_lines(&out), attribute_lines(&one), "{said}");
        // The plan and the summary, once (rank 0's).
        assert_eq!(said.matches("output: at most").count(), 1, "{said}");
        assert_eq!(said.matches("GB/s of output").count(), 1, "{said}");
    }
}
