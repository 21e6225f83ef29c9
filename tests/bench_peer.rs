//! CI (no GPU): `supercell bench --peer fio` runs fio on the same lane files in the same
//! invocation, and `bench --json` is read by fio's own tools (fio_jsonplus_clat2csv) and
//! by a reader that follows fio's JSON schema. fio comes from the distribution's `fio`
//! package (scripts/test.sh installs it); without it these tests skip with a message,
//! unless SUPERCELL_REQUIRE_CROSSCHECK is set (CI), where they fail.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use supercell::dataset::Dataset;

mod bench_support;
use bench_support::make;

/// Whether a program is on PATH; when not, says so, and fails where CI requires it.
fn have(program: &str, args: &[&str]) -> bool {
    let ok = Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        assert!(
            std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_none(),
            "{program} is required here (SUPERCELL_REQUIRE_CROSSCHECK) but does not run"
        );
        eprintln!("skipped: {program} does not run here (apt-get install fio)");
    }
    ok
}

fn bench(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_supercell"))
        .arg("bench")
        .args(args)
        .arg(dir)
        .output()
        .unwrap()
}

/// `bench` of the small dataset with 2 threads and 64 KiB reads into host memory, plus
/// `extra`.
fn bench_small(extra: &[&str], dir: &Path) -> Output {
    let mut args = vec![
        "--engine",
        "cpu-only",
        "--quiet",
        "--threads",
        "2",
        "--io-size",
        "64K",
    ];
    args.extend(extra);
    bench(&args, dir)
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The lane files of the dataset, as the manifest names them.
fn lane_files(dir: &Path) -> Vec<PathBuf> {
    let ds = Dataset::open(dir).unwrap();
    let source = supercell::ingest::Source::from_manifest(ds.manifest());
    source
        .files
        .iter()
        .map(|f| f.path.canonicalize().unwrap())
        .collect()
}

#[test]
fn bench_runs_fio_on_the_same_files_before_and_after() {
    if !have("fio", &["--version"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let json = dir.path().join("peer.json");
    let out = bench_small(
        &[
            "--duration",
            "1",
            "--queue-depth",
            "4",
            "--peer",
            "fio",
            "--json",
            json.to_str().unwrap(),
        ],
        dir.path(),
    );
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("fio before:")
            && text.contains("fio after")
            && text.contains("ratio supercell/fio:"),
        "{text}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let sc = v["jobs"][0]["read"]["bw_bytes"].as_u64().unwrap();
    let peer = &v["peer"];
    let before = peer["before"]["bw_bytes"].as_u64().unwrap();
    let after = peer["after"]["bw_bytes"].as_u64().unwrap();
    assert!(sc > 0 && before > 0 && after > 0, "{peer}");
    assert!(peer["ratio"].as_f64().unwrap() > 0.0, "{peer}");
    assert!(
        peer["version"].as_str().unwrap().starts_with("fio"),
        "{peer}"
    );
    assert!(
        peer["before"]["clat_ns"]["mean"].as_f64().unwrap() > 0.0,
        "{peer}"
    );
    // fio read the dataset's lane files with the run's block size, threads, depth, O_DIRECT.
    let command = peer["command"].as_str().unwrap();
    let job_file = peer["job_file"].as_str().unwrap();
    for f in lane_files(dir.path()) {
        let f = f.display().to_string();
        assert!(
            command.contains(&f) && job_file.contains(&f),
            "{f}: {command}"
        );
    }
    // O_DIRECT where the file system takes it (tmpfs and some overlays do not), as supercell.
    let direct = {
        use std::os::unix::fs::OpenOptionsExt;
        let direct = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(&lane_files(dir.path())[0])
            .is_ok();
        if direct { "direct=1" } else { "direct=0" }
    };
    for opt in [
        "bs=65536",
        "numjobs=2",
        direct,
        "rw=read",
        "readonly",
        "time_based",
    ] {
        assert!(job_file.lines().any(|l| l == opt), "{opt}: {job_file}");
        assert!(command.contains(&format!("--{opt}")), "{opt}: {command}");
    }
    let engine = if command.contains("--ioengine=io_uring") {
        assert!(command.contains("--iodepth=4"), "{command}");
        "io_uring"
    } else {
        assert!(command.contains("--ioengine=psync"), "{command}");
        "psync"
    };
    assert_eq!(v["jobs"][0]["job options"]["ioengine"], engine, "{v}");
}

#[test]
fn bench_refuses_a_missing_or_unknown_peer_clearly() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let out = bench(
        &[
            "--engine",
            "cpu-only",
            "--quiet",
            "--peer",
            "fio=/nonexistent/fio",
        ],
        dir.path(),
    );
    let text = said(&out);
    assert!(!out.status.success(), "{text}");
    assert!(
        text.contains("/nonexistent/fio") && text.contains("install fio"),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .env("PATH", dir.path())
        .args(["bench", "--engine", "cpu-only", "--quiet", "--peer", "fio"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = said(&out);
    assert!(
        !out.status.success() && text.contains("fio is not on PATH"),
        "{text}"
    );
    let out = bench(
        &[
            "--engine",
            "cpu-only",
            "--peer",
            "fio",
            "--peer-fio-option",
            "rw=write",
        ],
        dir.path(),
    );
    let text = said(&out);
    assert!(!out.status.success() && text.contains("rw=write"), "{text}");
    let out = bench(&["--engine", "cpu-only", "--peer", "gdsio"], dir.path());
    let text = said(&out);
    assert!(
        !out.status.success() && text.contains("the only peer is fio"),
        "{text}"
    );
}

/// A reader of fio's JSON, as fio's tools and fio-plot read it: `jobs[]`, each with
/// `jobname`, `job options`, `read`/`write`/`trim` blocks with `io_bytes`, `bw_bytes`,
/// `iops`, `runtime` and `slat_ns`/`clat_ns`/`lat_ns` (min, max, mean, stddev, N,
/// percentile with fio's keys, bins).
const FIO_SCHEMA_READER: &str = r#"
import json, sys
doc = json.load(open(sys.argv[1]))
keys = ["1.000000", "5.000000", "10.000000", "50.000000", "90.000000", "95.000000",
        "99.000000", "99.900000", "99.990000"]
for job in doc["jobs"]:
    assert isinstance(job["jobname"], str)
    opts = job["job options"]
    for k in ["rw", "bs", "iodepth", "numjobs", "direct", "ioengine", "runtime"]:
        assert isinstance(opts[k], str), k
    assert opts["rw"] == "read" and int(opts["bs"]) > 0
    for ddir in ["read", "write", "trim"]:
        d = job[ddir]
        for k in ["io_bytes", "bw_bytes", "iops", "runtime", "total_ios"]:
            assert d[k] >= 0, (ddir, k)
        for lat in ["slat_ns", "clat_ns", "lat_ns"]:
            l = d[lat]
            for k in ["min", "max", "mean", "stddev", "N"]:
                assert l[k] >= 0, (ddir, lat, k)
    r = job["read"]
    assert r["bw_bytes"] > 0 and r["iops"] > 0 and r["runtime"] > 0
    c = r["clat_ns"]
    assert c["N"] == r["total_ios"] > 0
    p = [c["percentile"][k] for k in keys]
    assert c["min"] <= p[0] and p == sorted(p) and p[-1] <= c["max"], p
    assert c["stddev"] > 0
    assert sum(c["bins"].values()) == c["N"]
    assert all(int(k) > 0 for k in c["bins"])
    assert r["slat_ns"]["N"] == 0
    lanes = job["lanes"]
    assert len(lanes) == 2 and all(l["read"]["bw_bytes"] > 0 for l in lanes)
    assert sum(l["read"]["io_bytes"] for l in lanes) == r["io_bytes"]
    assert "gbps_instant" not in job["supercell"]["summary"]
# fio's disk_util: the devices under the files (none where they sit on tmpfs); O_DIRECT
# reads all reach the disk, so it read at least what the last run did.
for d in doc["disk_util"]:
    for k in ["name", "read_ios", "write_ios", "read_merges", "write_merges", "read_ticks",
              "write_ticks", "in_queue", "util"]:
        assert k in d, k
    assert d["read_ios"] > 0 and 0 <= d["util"] <= 100
if doc["disk_util"] and doc["jobs"][-1]["job options"]["direct"] == "1":
    assert sum(d["read_bytes"] for d in doc["disk_util"]) >= doc["jobs"][-1]["read"]["io_bytes"]
print("fio schema: %d jobs read, %d disks" % (len(doc["jobs"]), len(doc["disk_util"])))
"#;

#[test]
fn bench_json_is_read_by_fio_tools() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let json = dir.path().join("r.json");
    let out = bench_small(
        &[
            "--duration",
            "0.5",
            "--runs",
            "2",
            "--json",
            json.to_str().unwrap(),
        ],
        dir.path(),
    );
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(!text.contains("last frame"), "{text}");
    if have("python3", &["-c", "import json"]) {
        let out = Command::new("python3")
            .args(["-c", FIO_SCHEMA_READER])
            .arg(&json)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", said(&out));
    }
    // fio's own converter of json+ latency buckets, with its self-check.
    if have("fio_jsonplus_clat2csv", &["--help"]) {
        let csv = dir.path().join("clat.csv");
        for extra in [&[][..], &["--validate"]] {
            let out = Command::new("fio_jsonplus_clat2csv")
                .arg(&json)
                .arg(&csv)
                .args(extra)
                .output()
                .unwrap();
            assert!(out.status.success(), "{extra:?}: {}", said(&out));
        }
        let job0 = std::fs::read_to_string(dir.path().join("clat_job0.csv")).unwrap();
        // A header, then one line per latency bucket with read counts.
        assert!(job0.lines().count() > 2, "{job0}");
        assert!(dir.path().join("clat_job1.csv").is_file());
    }
}

/// A run is time-based by default (10 s, frames looping, as fio's time_based runs), and
/// `--frames-once` reads every frame once; `bench --help` says so.
#[test]
fn bench_is_time_based_by_default_and_frames_once_is_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let run = |extra: &[&str]| {
        let json = dir.path().join("t.json");
        let mut args = vec!["--engine", "cpu-only", "--quiet", "--threads", "2"];
        args.extend(["--io-size", "64K", "--json", json.to_str().unwrap()]);
        args.extend(extra);
        let out = bench(&args, dir.path());
        assert!(out.status.success(), "{}", said(&out));
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        v["jobs"][0]["supercell"].clone()
    };
    let once = run(&["--frames-once"]);
    assert_eq!(once["summary"]["frames"], 5, "{once}");
    let timed = run(&[]);
    let secs = timed["total_time_s"].as_f64().unwrap();
    assert!((9.5..20.0).contains(&secs), "{secs} s");
    assert!(
        timed["summary"]["frames"].as_u64().unwrap() > 5,
        "frames loop"
    );
    let help = Command::new(env!("CARGO_BIN_EXE_supercell"))
        .args(["bench", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--frames-once") && help.contains("Default: 10 s"),
        "{help}"
    );
    let out = bench(&["--frames-once", "--duration", "2"], dir.path());
    assert!(!out.status.success(), "{}", said(&out));
}

/// `--log-interval` writes fio's averaged-log format: `msec, value, 0, bs, 0`, rising times,
/// one line per interval, bandwidth in KiB/s that adds up to the bytes of the run.
#[test]
fn bench_writes_fio_style_bandwidth_and_latency_logs() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let prefix = dir.path().join("log");
    let json = dir.path().join("r.json");
    let out = bench_small(
        &[
            "--duration",
            "1",
            "--log-interval",
            "200ms",
            "--log-prefix",
            prefix.to_str().unwrap(),
            "--json",
            json.to_str().unwrap(),
        ],
        dir.path(),
    );
    assert!(out.status.success(), "{}", said(&out));
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let io_bytes = v["jobs"][0]["read"]["io_bytes"].as_f64().unwrap();
    let read = |kind: &str| -> Vec<Vec<u64>> {
        let text = std::fs::read_to_string(dir.path().join(format!("log_{kind}.1.log"))).unwrap();
        text.lines()
            .map(|l| l.split(", ").map(|x| x.parse::<u64>().unwrap()).collect())
            .collect()
    };
    let bw = read("bw");
    assert!((4..=7).contains(&bw.len()), "{bw:?}");
    let mut last_t = 0;
    let mut kib = 0.0;
    for row in &bw {
        assert_eq!(row.len(), 5, "{row:?}");
        assert!(row[0] > last_t && row[2] == 0 && row[3] == 65536, "{row:?}");
        kib += row[1] as f64 * (row[0] - last_t) as f64 / 1e3;
        last_t = row[0];
    }
    // The intervals' KiB/s over their spans add up to the run's bytes (within rounding).
    assert!(
        (kib * 1024.0 / io_bytes - 1.0).abs() < 0.05,
        "{kib} KiB vs {io_bytes} B"
    );
    for kind in ["iops", "clat", "lat"] {
        let rows = read(kind);
        assert_eq!(rows.len(), bw.len(), "{kind}");
        assert!(rows.iter().all(|r| r[1] > 0), "{kind}: {rows:?}");
    }
}
