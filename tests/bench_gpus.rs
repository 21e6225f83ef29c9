//! `supercell bench --gpus`: one job per GPU, each on its own share of the lanes, run
//! together and summed. Without a GPU (CI) the cpu-only engine runs the jobs; the CUDA
//! engines' test is ignored here and run on the GPU machine.

use std::path::Path;
use std::process::{Command, Output};

use supercell::dataset::{AttributeSpec, Dataset, DatasetWriter, LaneSpec, Provenance};
use supercell::ingest::Source;

const FRAMES: u64 = 5;

/// A small dataset striped over `lanes` lanes in 64 KiB chunks, every frame on every lane.
fn make(dir: &Path, lanes: u32) -> Source {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(lanes),
        64 << 10,
        vec![AttributeSpec::new("density")],
        Provenance::new("bench --gpus test", ["x"]),
    )
    .unwrap();
    for f in 0..FRAMES as u8 {
        w.push_frame_opaque(
            f64::from(f),
            vec![vec![
                f.wrapping_mul(41) ^ 0x3c;
                300_000 + usize::from(f) * 7000
            ]],
        )
        .unwrap();
    }
    w.finish().unwrap();
    Source::from_manifest(Dataset::open(dir).unwrap().manifest())
}

/// Runs `supercell bench`: the binary named by `SUPERCELL_BIN` on the GPU machine, where the
/// test binary travels without the build tree; else the one cargo built.
fn bench(args: &[&str], dir: &Path) -> Output {
    let bin =
        std::env::var_os("SUPERCELL_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_supercell").into());
    Command::new(bin)
        .arg("bench")
        .args(args)
        .arg(dir)
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Bytes and extents of `source` that lie on `lanes`.
fn share(source: &Source, lanes: &[u64]) -> (u64, u64) {
    let mut bytes = 0;
    let mut extents = 0;
    for f in &source.frames {
        for e in &f.extents {
            if lanes.contains(&u64::from(source.files[e.file as usize].lane)) {
                bytes += e.len;
                extents += 1;
            }
        }
    }
    (bytes, extents)
}

/// Runs `--gpus gpus` with `engine` on a dataset of at least 4 lanes (one per job at least)
/// and checks the figures: every job
/// reads every frame once (its part of it), the lanes are shared without overlap, every
/// extent is read exactly once over the jobs (bytes and extent counts, each checked
/// against its CRC), and the total is the sum of the jobs.
fn every_extent_once(engine: &str, gpus: &str, jobs: usize) {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let lanes = (jobs as u32).max(4);
    let source = make(&data, lanes);
    let json = dir.path().join("gpus.json");
    let out = bench(
        &[
            "--gpus",
            gpus,
            "--engine",
            engine,
            "--verify",
            "--quiet",
            // One pass over every frame (bench is time-based by default).
            "--frames-once",
            "--threads",
            "2",
            "--io-size",
            "16K",
            "--json",
            json.to_str().unwrap(),
        ],
        &data,
    );
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("all GPUs:") && said.contains("per GPU") && said.contains("whole frames"),
        "{said}"
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let list = v["jobs"].as_array().unwrap();
    assert_eq!(list.len(), jobs, "{v}");
    let split = v["gpus"]["lane_split"]["lanes"].as_array().unwrap();
    assert_eq!(split.len(), jobs);
    let mut all_lanes: Vec<u64> = Vec::new();
    let (mut sum_bytes, mut sum_extents, mut sum_gbps) = (0u64, 0u64, 0.0);
    for (job, lanes) in list.iter().zip(split) {
        let lanes: Vec<u64> = lanes
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_u64().unwrap())
            .collect();
        assert!(!lanes.is_empty(), "{v}");
        all_lanes.extend(&lanes);
        let (bytes, extents) = share(&source, &lanes);
        let s = &job["supercell"];
        assert_eq!(job["error"], 0, "{job}");
        assert_eq!(s["summary"]["frames"].as_u64().unwrap(), FRAMES, "{job}");
        assert_eq!(job["read"]["io_bytes"].as_u64().unwrap(), bytes, "{job}");
        assert_eq!(s["io_bytes"].as_u64().unwrap(), bytes, "{job}");
        assert_eq!(s["verify"]["extents"].as_u64().unwrap(), extents, "{job}");
        assert_eq!(s["verify"]["mismatch_count"], 0, "{job}");
        sum_bytes += bytes;
        sum_extents += extents;
        sum_gbps += s["summary"]["gbps"].as_f64().unwrap();
    }
    all_lanes.sort_unstable();
    let every: Vec<u64> = (0..u64::from(lanes)).collect();
    assert_eq!(all_lanes, every, "each lane read by exactly one job");
    let (total_bytes, total_extents) = share(&source, &every);
    assert_eq!(sum_bytes, total_bytes);
    assert_eq!(sum_extents, total_extents);
    let agg = &v["aggregate"];
    assert_eq!(agg["total_bytes"].as_u64().unwrap(), total_bytes, "{agg}");
    let reported = agg["sum_gbps"].as_f64().unwrap();
    assert!(
        (reported - sum_gbps).abs() <= 1e-9 * sum_gbps.max(1.0),
        "{reported} vs {sum_gbps}"
    );
    assert_eq!(v["gpus"]["whole_frames"].as_u64().unwrap(), FRAMES);
}

#[test]
fn two_jobs_named_on_one_gpu_read_every_extent_once() {
    every_extent_once("cpu-only", "0,0", 2);
}

#[test]
fn a_count_of_three_shares_four_lanes_and_names_its_jobs() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path(), 4);
    let out = bench(
        &[
            "--gpus",
            "0,0,1",
            "--engine",
            "cpu-only",
            "--quiet",
            "--frames-once",
        ],
        dir.path(),
    );
    let said = text(&out);
    if supercell::gpu::device_count() == 1 {
        // GPU 1 is named: without CUDA it is only a label, with one GPU it does not exist.
        assert!(
            !out.status.success() && said.contains("GPU 1 does not exist"),
            "{said}"
        );
        return;
    }
    assert!(out.status.success(), "{said}");
    for name in ["[gpu0#1] lanes", "[gpu0#2] lanes", "[gpu1] lanes"] {
        assert!(said.contains(name), "{name}: {said}");
    }
    assert!(said.contains("uses no GPU"), "{said}");
}

#[test]
fn bad_gpu_selections_are_refused_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    make(dir.path(), 2);
    // More jobs than lanes: a job would read nothing.
    let out = bench(
        &["--gpus", "3", "--engine", "cpu-only", "--quiet"],
        dir.path(),
    );
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("3 GPUs") && said.contains("2 lane(s)"),
        "{said}"
    );
    for bad in ["0", "lots", "3-1", "65"] {
        let out = bench(&["--gpus", bad, "--engine", "cpu-only"], dir.path());
        let said = text(&out);
        assert!(!out.status.success(), "{bad}: {said}");
        assert!(said.contains("--gpus"), "{bad}: {said}");
    }
    // --gpus and --gpu together are a contradiction.
    let out = bench(
        &["--gpus", "0,0", "--gpu", "1", "--engine", "cpu-only"],
        dir.path(),
    );
    assert!(!out.status.success());
    assert!(text(&out).contains("cannot be used with"), "{}", text(&out));
    if supercell::gpu::cuda_probe().is_err() {
        // Without CUDA: a CUDA engine is an error that says what runs instead...
        let out = bench(&["--gpus", "0,0", "--engine", "staged"], dir.path());
        let said = text(&out);
        assert!(!out.status.success());
        assert!(
            said.contains("needs CUDA") && said.contains("cpu-only"),
            "{said}"
        );
        // ...and `all` has no devices to count.
        let out = bench(&["--gpus", "all", "--engine", "cpu-only"], dir.path());
        let said = text(&out);
        assert!(!out.status.success());
        assert!(said.contains("all means every CUDA device"), "{said}");
    }
}

/// On the GPU machine: two staged engines (two CUDA contexts' worth of rings and streams)
/// on GPU 0 at once, every extent read once and checked on the GPU.
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn two_staged_engines_on_one_gpu_read_every_extent_once() {
    every_extent_once("staged", "0,0", 2);
}

/// On the GPU machine: one staged job per GPU present (one on a single-GPU host).
#[test]
#[ignore = "needs an NVIDIA GPU with CUDA"]
fn one_staged_job_per_gpu_reads_every_extent_once() {
    let n = supercell::gpu::device_count();
    assert!(n > 0, "no CUDA device");
    every_extent_once("staged", "all", n);
}
