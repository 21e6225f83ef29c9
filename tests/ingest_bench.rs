//! CI (no GPU): `supercell bench` and `supercell doctor` end to end on a small dataset,
//! through the library and through the binary.

use std::process::Command;

mod bench_support;
use bench_support::make;

use supercell::bench::{self, BenchConfig, jobs, plot, report, sweep};
use supercell::dataset::Dataset;
use supercell::ingest::{EngineKind, Source};

/// A dataset that fits in the frame ring entirely must still be streamed from storage on
/// every loop: a run asking for more frames than the dataset holds used to hang once every
/// frame was resident, because nothing was read any more.
#[test]
fn bench_streams_a_dataset_smaller_than_the_ring() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    for slots in [5, 8] {
        let cfg = BenchConfig {
            engine: EngineKind::CpuOnly,
            frames: Some(17),
            verify: true,
            slots: Some(slots),
            threads: 2,
            io_size: 16 << 10,
            ..BenchConfig::default()
        };
        let (tx, rx) = std::sync::mpsc::channel();
        let src = source.clone();
        std::thread::spawn(move || tx.send(bench::run(&src, &cfg).map(|r| r.summary.frames)));
        let frames = rx
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("bench finished (did not hang)")
            .unwrap();
        assert_eq!(frames, 17, "slots {slots}");
    }
}

#[test]
fn bench_runs_verifies_and_reports() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    for path in [EngineKind::CpuOnly, EngineKind::Portable] {
        let cfg = BenchConfig {
            engine: path,
            frames: Some(12),
            verify: true,
            slots: Some(3),
            threads: 3,
            io_size: 16 << 10,
            ..BenchConfig::default()
        };
        let r = bench::run(&source, &cfg).unwrap();
        assert_eq!(r.summary.frames, 12);
        let v = r.verify.as_ref().unwrap();
        assert_eq!((v.frames, v.mismatch_count), (12, 0));
        assert_eq!(r.summary.bytes, r.planned_bytes);
        assert_eq!(r.io_bytes, r.summary.bytes);
        assert!(r.summary.gbps > 0.0 && r.ops > 0);
        let line = report::gdsio_line(&r);
        assert!(line.starts_with("IoType: READ XferType: "), "{line}");
        assert!(
            line.contains("Throughput: ")
                && line.contains(" GiB/sec, Avg_Latency: ")
                && line.contains(" ops: "),
            "{line}"
        );
        let text = report::text(&r);
        assert!(text.contains(&format!("engine: {}", path.name())), "{text}");
        assert!(text.contains("all bytes match"));
        // Read latencies as fio reports them, and what the portable engine leaves out.
        let l = &r.read_lat_ns;
        assert!(l.n == r.ops && l.min > 0 && l.min <= l.at(50.0), "{l:?}");
        assert!(l.at(50.0) <= l.at(99.0) && l.at(99.0) <= l.max, "{l:?}");
        assert_eq!(
            text.contains("the upload to the GPU (wgpu) is not part of these figures"),
            path == EngineKind::Portable,
            "{text}"
        );
        serde_json::to_string(&r).unwrap();
    }
    // A GPU path on a machine without CUDA fails with a message, never a panic.
    if supercell::gpu::cuda_probe().is_err() {
        let cfg = BenchConfig {
            engine: EngineKind::Gds,
            ..BenchConfig::default()
        };
        let e = bench::run(&source, &cfg).unwrap_err().to_string();
        assert!(e.contains("CUDA") || e.contains("libcuda"), "{e}");
    }
    // A short sweep and its plot.
    let base = BenchConfig {
        engine: EngineKind::CpuOnly,
        frames: Some(3),
        ..BenchConfig::default()
    };
    let plan = sweep::SweepPlan {
        threads: sweep::thread_counts(4),
        io_sizes: vec![16 << 10, 64 << 10],
        queue_depths: vec![2, 8],
        runs: 3,
    };
    let pts = sweep::sweep(&source, &base, &plan, |_, _| {}).unwrap();
    assert_eq!(pts.len(), 12);
    for p in &pts {
        let s = p.gbps_spread;
        assert!(
            p.runs == 3 && s.min <= p.gbps && p.gbps <= s.max && s.min > 0.0,
            "{p:?}"
        );
    }
    let table = sweep::table(&pts);
    assert!(
        table.contains("64 KiB") && table.contains("queue depth 8"),
        "{table}"
    );
    assert!(table.contains("median of 3 runs"), "{table}");
    let png_path = dir.path().join("sweep.png");
    plot::write_png(&pts, "test", &png_path).unwrap();
    let decoder = png::Decoder::new(std::io::BufReader::new(
        std::fs::File::open(&png_path).unwrap(),
    ));
    let info = decoder.read_info().unwrap().info().clone();
    assert_eq!((info.width, info.height), (plot::WIDTH, plot::HEIGHT));
    // Two jobs at once.
    let job = format!(
        "[global]\npath=cpu-only\nframes=4\nio_size=32K\n[a]\ndataset={0}\nlanes=0\n[b]\ndataset={0}\nlanes=1\nthreads=2\n",
        dir.path().display()
    );
    let specs = jobs::parse(&job).unwrap();
    let r = jobs::run_jobs(&specs);
    assert_eq!(r.jobs.len(), 2);
    for (name, j) in &r.jobs {
        assert!(j.is_ok(), "{name}: {j:?}");
    }
    assert!(r.total_bytes > 0 && r.aggregate_gbps > 0.0);
    let doc = serde_json::to_value(r.fio_report()).unwrap();
    let names: Vec<&str> = doc["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["jobname"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["a", "b"]);
    assert!(doc["aggregate"]["total_bytes"].as_u64().unwrap() > 0);
}

/// `SUPERCELL_PART_BYTES` cuts the slots into small parts: the binary says how it laid the
/// slots out (a `slots:` line, `slot_plan` in the JSON), every byte still matches, and a
/// part size that is no power of two is refused naming the variable.
#[test]
fn the_binary_benches_in_forced_slot_parts_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let exe = env!("CARGO_BIN_EXE_supercell");
    let json = dir.path().join("parts.json");
    let out = Command::new(exe)
        .env("SUPERCELL_PART_BYTES", "65536")
        .args([
            "bench", "--engine", "cpu-only", "--frames", "5", "--verify", "--quiet",
        ])
        .args(["--io-size", "48K", "--slots", "3", "--json"])
        .arg(&json)
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("all bytes match"), "{stdout}");
    // 320 000-byte frames (rounded up to 4 KiB) in 64 KiB parts: five.
    assert!(
        stdout.contains("slots: 3 of ") && stdout.contains("(5 parts of at most 64.0 KiB)"),
        "{stdout}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    // fio's shape: supercell's own figures under each job's `supercell` key.
    let plan = &v["jobs"][0]["supercell"]["slot_plan"];
    assert_eq!(plan["slots"], 3, "{plan}");
    assert_eq!(plan["parts"], 5, "{plan}");
    assert_eq!(plan["part_bytes"], 65536, "{plan}");
    let out = Command::new(exe)
        .env("SUPERCELL_PART_BYTES", "100000")
        .args(["bench", "--engine", "cpu-only", "--quiet"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("SUPERCELL_PART_BYTES")
            && err.contains("power of two"),
        "{err}"
    );
}

#[test]
fn the_binary_benches_and_diagnoses() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path());
    let exe = env!("CARGO_BIN_EXE_supercell");
    let json = dir.path().join("r.json");
    let out = Command::new(exe)
        .args([
            "bench",
            "--engine",
            "cpu-only",
            "--frames",
            "7",
            "--verify",
            "--quiet",
            "--io-size",
            "64K",
            "--runs",
            "3",
            "--json",
        ])
        .arg(&json)
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("XferType: CPUONLY") && stdout.contains("all bytes match"),
        "{stdout}"
    );
    assert!(stdout.contains("3 runs: bandwidth min "), "{stdout}");
    // fio's shape: one job per run, bandwidth, IOPS, latency percentiles and CPU.
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let jobs = v["jobs"].as_array().unwrap();
    assert_eq!(jobs.len(), 3);
    for job in jobs {
        let read = &job["read"];
        assert!(read["bw_bytes"].as_u64().unwrap() > 0, "{job}");
        assert!(read["iops"].as_f64().unwrap() > 0.0, "{job}");
        let lat = &read["lat_ns"];
        let p50 = lat["percentile"]["50.000000"].as_u64().unwrap();
        let p99 = lat["percentile"]["99.000000"].as_u64().unwrap();
        assert!(lat["min"].as_u64().unwrap() <= p50 && p50 <= p99, "{lat}");
        assert!(p99 <= lat["max"].as_u64().unwrap(), "{lat}");
        assert!(job["usr_cpu"].is_f64() && job["sys_cpu"].is_f64(), "{job}");
        // supercell's own figures, under their own key.
        assert_eq!(job["supercell"]["summary"]["frames"], 7);
        assert_eq!(job["supercell"]["engine"], "cpu-only");
    }
    let runs = &v["runs"]["bw_bytes"];
    let (lo, mid, hi) = (
        runs["min"].as_f64().unwrap(),
        runs["median"].as_f64().unwrap(),
        runs["max"].as_f64().unwrap(),
    );
    assert!(0.0 < lo && lo <= mid && mid <= hi, "{runs}");
    // Bad input: a clear error, not a panic.
    let out = Command::new(exe)
        .args(["bench", "--io-size", "lots"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not a size") && err.contains("--io-size") && err.contains("'lots'"),
        "{err}"
    );
    // Durations read as everywhere: with units, or bare seconds; the flag and value named.
    let out = Command::new(exe)
        .args(["bench", "--duration", "soon"])
        .arg(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("--duration") && err.contains("'soon'"),
        "{err}"
    );
    let out = Command::new(exe)
        .args(["bench", "--io-size", "1000"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = Command::new(exe)
        .args(["doctor", "--dataset"])
        .arg(dir.path())
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("CUDA driver") && text.contains("io_uring") && text.contains("lane "),
        "{text}"
    );
}
