//! Exit statuses that tell the truth: `doctor` fails when a check fails, `bench` fails when
//! every read failed (and says which), and thread counts beyond the machine are capped.

use std::path::Path;
use std::process::{Command, Output};

use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};

/// A small dataset: two lanes, three frames of one opaque attribute.
fn make_dataset(dir: &Path) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(2),
        64 << 10,
        vec![AttributeSpec::new("density")],
        Provenance::new("exit status test", ["x"]),
    )
    .unwrap();
    for f in 0..3u8 {
        w.push_frame_opaque(f64::from(f), vec![vec![f ^ 0x5a; 200_000]])
            .unwrap();
    }
    w.finish().unwrap();
}

fn supercell(args: &[&str], faults: Option<&str>) -> Output {
    let runtime = tempfile::tempdir().unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supercell"));
    cmd.args(args).env("XDG_RUNTIME_DIR", runtime.path());
    if let Some(f) = faults {
        cmd.env("SUPERCELL_FAULTS", f);
    }
    let out = cmd.output().expect("run supercell");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    out
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn doctor_exits_non_zero_when_a_check_fails() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-lane");
    let out = supercell(&["doctor", missing.to_str().unwrap()], None);
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("fail  path.0"), "{stdout}");
    assert!(!out.status.success(), "a failed check exited 0: {stdout}");
    assert!(
        stderr.contains("1 check(s) failed: path.0"),
        "the error names the failed check: {stderr}"
    );
    // JSON on stdout stays JSON; the status still says it failed.
    let out = supercell(&["doctor", "--json", missing.to_str().unwrap()], None);
    assert!(!out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["summary"]["fail"], 1, "{v}");
    // A dataset whose lanes are all there: no check fails, exit 0.
    make_dataset(dir.path());
    let out = supercell(&["doctor", dir.path().to_str().unwrap()], None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
}

fn bench(ds: &Path, threads: &str, faults: Option<&str>) -> Output {
    supercell(
        &[
            "bench",
            ds.to_str().unwrap(),
            "--engine",
            "cpu-only",
            "--buffered",
            "--quiet",
            "--frames",
            "4",
            "--slots",
            "2",
            "--threads",
            threads,
        ],
        faults,
    )
}

#[test]
fn bench_exits_non_zero_when_every_read_failed_and_says_where() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let out = bench(dir.path(), "2", Some("eio:lane=1"));
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "every read failed, exit 0: {stdout}");
    assert!(
        stderr.contains("every read failed: 4 frames failed, none arrived")
            && stderr.contains("lane 1")
            && stderr.contains("(injected)"),
        "{stderr}"
    );
    // A sweep whose every run read nothing fails too.
    let plot = dir.path().join("sweep.png");
    let out = supercell(
        &[
            "bench",
            dir.path().to_str().unwrap(),
            "--engine",
            "cpu-only",
            "--buffered",
            "--quiet",
            "--frames",
            "2",
            "--slots",
            "2",
            "--threads",
            "2",
            "--sweep",
            "--sweep-io-sizes",
            "64K",
            "--plot",
            plot.to_str().unwrap(),
        ],
        Some("eio"),
    );
    let (stdout, stderr) = text(&out);
    assert!(!out.status.success(), "{stdout}");
    assert!(
        stderr.contains("every run of the sweep read nothing") && stderr.contains("(injected)"),
        "{stderr}"
    );
    // One failed frame among good ones is a finding, not a failed run.
    let out = bench(dir.path(), "2", Some("eio:lane=0,frame=1"));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("errors: 1 frames failed"), "{stdout}");
}

#[test]
fn thread_counts_are_capped_by_the_machine() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let out = bench(dir.path(), "100000", None);
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}{stderr}");
    let cap = (16 * std::thread::available_parallelism().unwrap().get()).max(32);
    assert!(
        stderr.contains(&format!("note: --threads 100000: using {cap}, the most")),
        "{stderr}"
    );
    // Job files: refused, naming the key.
    let job = dir.path().join("jobs.ini");
    std::fs::write(
        &job,
        format!(
            "[a]\ndataset={}\nengine=cpu-only\nthreads=100000\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = supercell(&["bench", "--job", job.to_str().unwrap()], None);
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("threads: 100000 is more than this machine can use"),
        "{stderr}"
    );
}

/// A build without the `mpi` feature started by a launcher as one of several ranks refuses
/// to run (each process would measure alone and report as if it were the whole run); as
/// rank 0 of 1 it runs as a plain bench.
#[cfg(not(feature = "mpi"))]
#[test]
fn bench_without_mpi_refuses_to_be_one_of_several_ranks() {
    let dir = tempfile::tempdir().unwrap();
    make_dataset(dir.path());
    let run = |size: &str| {
        Command::new(env!("CARGO_BIN_EXE_supercell"))
            .args([
                "bench",
                dir.path().to_str().unwrap(),
                "--engine",
                "cpu-only",
            ])
            .args(["--threads", "1", "--frames-once", "--quiet"])
            .env("OMPI_COMM_WORLD_SIZE", size)
            .output()
            .unwrap()
    };
    let out = run("2");
    let (_, stderr) = text(&out);
    assert!(!out.status.success());
    assert!(
        stderr.contains("one of 2 ranks") && stderr.contains("--features mpi"),
        "{stderr}"
    );
    let out = run("1");
    assert!(out.status.success(), "{}", text(&out).1);
}
