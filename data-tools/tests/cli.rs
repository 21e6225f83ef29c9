//! End-to-end tests of the `supercell-data` command line: generate → verify → inspect →
//! sample → export → import, and the errors bad input must give.

use std::path::Path;
use std::process::{Command, Output};
use supercell::format::{FileGrid, Grid, Value, read_nvdb};

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .args(args)
        .output()
        .expect("run supercell-data")
}

fn ok(args: &[&str]) -> String {
    let out = tool(args);
    assert!(
        out.status.success(),
        "supercell-data {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn fails(args: &[&str], expect: &str) {
    let out = tool(args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} should fail");
    assert!(
        err.contains(expect),
        "{args:?}: expected {expect:?} in {err}"
    );
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
}

#[test]
fn generate_verify_inspect_sample_export_import() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    let ds_s = ds.to_str().unwrap();
    ok(&[
        "generate",
        ds_s,
        "--frames",
        "3",
        "--resolution",
        "96",
        "--lanes",
        "3",
        "--chunk-size",
        "64KiB",
        "--grid-type",
        "fp8",
    ]);
    let verified = ok(&["verify", ds_s]);
    assert!(verified.contains("OK"), "{verified}");

    let grid_count = inspect_describes_frame_1(ds_s);

    // Export frame 1 and read it with the library: same grids.
    let nvdb = tmp.path().join("f1.nvdb");
    ok(&[
        "export",
        ds_s,
        "--frame",
        "1",
        "--out",
        nvdb.to_str().unwrap(),
        "--codec",
        "zip",
    ]);
    let exported = read_nvdb(&nvdb).unwrap();
    assert_eq!(exported.len(), grid_count);
    sample_reads_what_the_accessor_reads(ds_s, &nvdb, &exported);
    import_round_trips(tmp.path(), &nvdb, &exported);
}

/// `inspect --json` describes frame 1's grids with what the reader sees; their count.
fn inspect_describes_frame_1(ds_s: &str) -> usize {
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["inspect", ds_s, "--frame", "1", "--json"])).unwrap();
    let grids = json["grids"].as_array().unwrap();
    let names: Vec<&str> = grids.iter().map(|g| g["name"].as_str().unwrap()).collect();
    assert_eq!(
        names[..4],
        ["cloud", "rain", "wind_speed", "vertical_velocity"]
    );
    assert!(
        grids
            .iter()
            .all(|g| g["type"] == "Float8" && g["checksum"] == "valid")
    );
    assert_eq!(json["dataset"]["frames"], 3);
    names.len()
}

/// `sample --json` returns exactly what the accessor reads, in the order asked, including
/// negative and far-away coordinates (background), from the dataset and from the exported
/// file `nvdb` alike; then `sample --world`.
fn sample_reads_what_the_accessor_reads(ds_s: &str, nvdb: &Path, exported: &[FileGrid]) {
    let grid = Grid::parse(&exported[0].bytes).unwrap();
    let leaf = grid.leaves().next().expect("cloud has leaves");
    let o = leaf.origin();
    let n = (0..512)
        .find(|&n| leaf.is_active(n))
        .expect("a leaf has an active voxel");
    let active = [
        o[0] + (n >> 6) as i32,
        o[1] + ((n >> 3) & 7) as i32,
        o[2] + (n & 7) as i32,
    ];
    let coords = [
        active,
        [o[0], o[1], o[2]],
        [-5, 0, 7],
        [100_000, -100_000, 3],
    ];
    let mut args: Vec<String> = ["sample", ds_s, "--frame", "1", "--grid", "cloud", "--json"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for c in &coords {
        args.push(format!("--at={},{},{}", c[0], c[1], c[2]));
    }
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let values: Vec<f64> = serde_json::from_str(&ok(&argv)).unwrap();
    let mut acc = grid.accessor();
    for (c, v) in coords.iter().zip(&values) {
        let Value::Float(expect) = acc.value(*c).unwrap() else {
            panic!("scalar grid")
        };
        assert_eq!(*v as f32, expect, "at {c:?}");
    }
    assert!(acc.is_active(active));
    assert!(values[0] > 0.0, "an active cloud voxel holds condensate");

    // The same file sampled directly, by grid index, agrees.
    let text = ok(&[
        "sample",
        nvdb.to_str().unwrap(),
        "--grid",
        "0",
        "--at=-5,0,7",
    ]);
    assert_eq!(text.trim(), format!("-5,0,7: {:?}", values[2] as f32));
    sample_world_interpolates(ds_s, &grid, active, values[0]);
}

/// `sample --world` at `active`'s centre (holding `value`) and halfway to the next
/// voxel.
fn sample_world_interpolates(ds_s: &str, grid: &Grid, active: [i32; 3], value: f64) {
    // At the active voxel's centre (its world position through the grid's map) both
    // interpolations give the voxel's own value; halfway to the next voxel along z, linear
    // gives the mean of the two (a linear stencil's other corners weigh 0).
    let mut acc = grid.accessor();
    let centre = grid.map().apply(active.map(f64::from));
    let above = [active[0], active[1], active[2] + 1];
    let mid = grid.map().apply([
        f64::from(active[0]),
        f64::from(active[1]),
        f64::from(active[2]) + 0.5,
    ]);
    let world = |p: [f64; 3]| format!("--world={},{},{}", p[0], p[1], p[2]);
    let sampled = |extra: &[&str], at: [f64; 3]| -> f64 {
        let w = world(at);
        let mut a = vec![
            "sample", ds_s, "--frame", "1", "--grid", "cloud", "--json", &w,
        ];
        a.extend_from_slice(extra);
        let v: Vec<f64> = serde_json::from_str(&ok(&a)).unwrap();
        v[0]
    };
    let Value::Float(at_above) = acc.value(above).unwrap() else {
        panic!("scalar grid")
    };
    assert_eq!(
        sampled(&[], centre) as f32,
        value as f32,
        "linear at a centre"
    );
    assert_eq!(
        sampled(&["--interpolation", "nearest"], centre) as f32,
        value as f32,
        "nearest at a centre"
    );
    let expect = (value + f64::from(at_above)) / 2.0;
    assert!(
        (sampled(&[], mid) - expect).abs() <= 1e-6 * expect.abs().max(1.0),
        "linear halfway: {} against {expect}",
        sampled(&[], mid)
    );
    // The text form names the index coordinate the position fell on.
    let text = ok(&[
        "sample",
        ds_s,
        "--frame",
        "1",
        "--grid",
        "cloud",
        &world(mid),
    ]);
    let index = format!(
        "(index {:.3},{:.3},{:.3})",
        f64::from(active[0]),
        f64::from(active[1]),
        f64::from(active[2]) + 0.5
    );
    assert!(text.contains(&index), "{text} lacks {index}");
}

/// Import the exported frame `nvdb` (twice, as two frames) and compare grids byte for
/// byte with `exported`.
fn import_round_trips(tmp: &Path, nvdb: &Path, exported: &[FileGrid]) {
    let ds2 = tmp.join("imported");
    let n = nvdb.to_str().unwrap();
    ok(&[
        "import",
        n,
        n,
        "--out",
        ds2.to_str().unwrap(),
        "--lanes",
        "2",
    ]);
    ok(&["verify", ds2.to_str().unwrap()]);
    let back = tmp.join("back.nvdb");
    ok(&[
        "export",
        ds2.to_str().unwrap(),
        "--frame",
        "1",
        "--out",
        back.to_str().unwrap(),
    ]);
    let again = read_nvdb(&back).unwrap();
    for (a, b) in exported.iter().zip(&again) {
        assert_eq!(
            a.bytes, b.bytes,
            "grid {:?} changed in the round trip",
            a.name
        );
    }
}

#[test]
fn generate_is_deterministic() {
    let tmp = tempfile::tempdir().unwrap();
    let mut slots = Vec::new();
    // "c" generates one frame at a time: the same bytes.
    for name in ["a", "b", "c"] {
        let ds = tmp.path().join(name);
        let json = tmp.path().join(format!("{name}.json"));
        let mut args = vec![
            "generate",
            ds.to_str().unwrap(),
            "--frames",
            "2",
            "--resolution",
            "64",
            "--lanes",
            "2",
            "--seed",
            "7",
            "--json",
            json.to_str().unwrap(),
        ];
        if name == "c" {
            args.extend(["--frames-in-flight", "1"]);
        }
        ok(&args);
        let report: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        if name == "c" {
            assert_eq!(report["frames_in_flight"], 1);
            // One frame at a time: frame 1 begins after frame 0 is written.
            let t = report["frame_times"].as_array().unwrap();
            assert_eq!(t.len(), 2);
            assert!(t[1]["began_s"].as_f64() >= t[0]["written_s"].as_f64());
        }
        assert!(report["process_cpu_s"].as_f64().unwrap() > 0.0);
        let out = tmp.path().join(format!("{name}.nvdb"));
        ok(&[
            "export",
            ds.to_str().unwrap(),
            "--frame",
            "1",
            "--out",
            out.to_str().unwrap(),
        ]);
        slots.push(std::fs::read(out).unwrap());
    }
    assert_eq!(slots[0], slots[1]);
    assert_eq!(slots[0], slots[2]);
    let ds = tmp.path().join("d");
    fails(
        &[
            "generate",
            ds.to_str().unwrap(),
            "--resolution",
            "64",
            "--frames-in-flight",
            "0",
        ],
        "--frames-in-flight",
    );
}

#[test]
fn bad_input_gives_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    bad_files_and_flags_are_refused(tmp.path());
    // A dataset: a grid that does not exist, and a frame out of range.
    let ds = tmp.path().join("ds");
    ok(&[
        "generate",
        ds.to_str().unwrap(),
        "--frames",
        "1",
        "--resolution",
        "48",
        "--lanes",
        "1",
    ]);
    fails(
        &[
            "sample",
            ds.to_str().unwrap(),
            "--grid",
            "hail",
            "--at",
            "0,0,0",
        ],
        "no grid named",
    );
    fails(
        &[
            "sample",
            ds.to_str().unwrap(),
            "--frame",
            "9",
            "--at",
            "0,0,0",
        ],
        "frame 9 does not exist",
    );
    // Exporting into the dataset itself is refused (it could replace the manifest).
    fails(
        &[
            "export",
            ds.to_str().unwrap(),
            "--frame",
            "0",
            "--out",
            ds.join("manifest.json").to_str().unwrap(),
        ],
        "refusing to export into the dataset",
    );
    // Absurd sizes are refused up front instead of running for ever.
    fails(
        &[
            "generate",
            tmp.path().join("y").to_str().unwrap(),
            "--frame-size",
            "100TB",
        ],
        "--frame-size",
    );
    fails(
        &[
            "generate",
            tmp.path().join("y").to_str().unwrap(),
            "--resolution",
            "65536",
        ],
        "--resolution",
    );
    swapped_attributes_fail_verification(tmp.path());

    // A truncated lane file is caught when the dataset is opened.
    let lane = std::fs::read_dir(ds.join("lanes/0"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let len = std::fs::metadata(&lane).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lane)
        .unwrap()
        .set_len(len - 4096)
        .unwrap();
    fails(&["verify", ds.to_str().unwrap()], "lane");
}

/// Files that are missing or not NanoVDB, malformed coordinates and sizes, conflicting
/// flags: each refused with an error naming what is wrong (`tmp`: a scratch directory).
fn bad_files_and_flags_are_refused(tmp: &Path) {
    let missing = tmp.join("nope.nvdb");
    fails(&["inspect", missing.to_str().unwrap()], "no such file");
    let junk = tmp.join("junk.nvdb");
    std::fs::write(
        &junk,
        b"definitely not a NanoVDB file, but long enough to look at",
    )
    .unwrap();
    fails(&["inspect", junk.to_str().unwrap()], "junk.nvdb");
    fails(
        &["sample", junk.to_str().unwrap(), "--at", "1,2"],
        "three integers",
    );
    fails(
        &["sample", junk.to_str().unwrap(), "--world", "1,2"],
        "three numbers X,Y,Z",
    );
    fails(
        &["sample", junk.to_str().unwrap(), "--world", "1,nan,2"],
        "not a finite number",
    );
    fails(
        &[
            "sample",
            junk.to_str().unwrap(),
            "--at",
            "1,2,3",
            "--world",
            "1,2,3",
        ],
        "cannot be used with",
    );
    fails(&["sample", junk.to_str().unwrap()], "--at");
    fails(
        &["verify", tmp.to_str().unwrap()],
        "not a supercell dataset",
    );
    fails(
        &[
            "generate",
            tmp.join("x").to_str().unwrap(),
            "--grid-type",
            "fp3",
        ],
        "unknown grid type",
    );
    fails(
        &[
            "generate",
            tmp.join("x").to_str().unwrap(),
            "--lanes",
            Path::new("/nonexistent/lanes").to_str().unwrap(),
        ],
        "not a directory",
    );
    fails(
        &[
            "generate",
            tmp.join("x").to_str().unwrap(),
            "--chunk-size",
            "1000",
        ],
        "4096",
    );
}

/// A manifest that files grids under the wrong attributes fails verification.
fn swapped_attributes_fail_verification(tmp: &Path) {
    let swapped = tmp.join("swapped");
    ok(&[
        "generate",
        swapped.to_str().unwrap(),
        "--frames",
        "1",
        "--resolution",
        "48",
        "--lanes",
        "1",
    ]);
    let mpath = swapped.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    let grids = m["frames"][0]["grids"].as_array_mut().unwrap();
    let (a0, a2) = (grids[0]["attribute"].clone(), grids[2]["attribute"].clone());
    grids[0]["attribute"] = a2;
    grids[2]["attribute"] = a0;
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    fails(&["verify", swapped.to_str().unwrap()], "");
    let out = tool(&["verify", swapped.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("is named \"wind_speed\"") || text.contains("is named \"cloud\""),
        "{text}"
    );
}

/// A dataset directory whose manifest says its first lane is `lane_path`: the lane files
/// it lists there must survive `generate` and `import` into the directory.
fn point_first_lane_at(ds: &Path, lane_path: &str) -> String {
    let mpath = ds.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["lanes"][0]["path"] = serde_json::json!(lane_path);
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
    m["lanes"][0]["files"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

const NVDB_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/fixtures/nanovdb/sphere_fp16.nvdb"
);

#[test]
fn writers_leave_files_named_outside_their_lanes_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let ds_s = ds.to_str().unwrap();
    let v = tmp.path().join("v");
    std::fs::create_dir_all(&v).unwrap();
    let generate = [
        "generate",
        ds_s,
        "--frames",
        "1",
        "--resolution",
        "32",
        "--lanes",
        "2",
    ];
    let import = ["import", NVDB_FIXTURE, "--out", ds_s, "--lanes", "2"];
    for (i, (cmd, lane_path)) in [
        (&generate[..], "../v".to_owned()),
        (&generate[..], v.to_str().unwrap().to_owned()),
        (&import[..], "../v".to_owned()),
        (&import[..], v.to_str().unwrap().to_owned()),
    ]
    .into_iter()
    .enumerate()
    {
        ok(&generate);
        let name = point_first_lane_at(&ds, &lane_path);
        let precious = v.join(&name);
        std::fs::write(&precious, b"precious").unwrap();
        let out = tool(cmd);
        assert!(out.status.success(), "case {i}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("left alone"), "case {i}: {err}");
        assert_eq!(std::fs::read(&precious).unwrap(), b"precious", "case {i}");
        ok(&["verify", ds_s]);
    }
}

#[test]
fn writers_refuse_a_directory_with_another_programs_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("webapp");
    std::fs::create_dir_all(&dir).unwrap();
    let text = br#"{"name": "webapp", "version": "2.1.0"}"#;
    std::fs::write(dir.join("manifest.json"), text).unwrap();
    let d = dir.to_str().unwrap();
    fails(
        &["generate", d, "--frames", "1", "--resolution", "32"],
        "not a supercell dataset",
    );
    fails(&["import", NVDB_FIXTURE, "--out", d], "manifest.json");
    assert_eq!(std::fs::read(dir.join("manifest.json")).unwrap(), text);
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
}

#[test]
fn export_replaces_a_symlink_at_its_output_instead_of_writing_through_it() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let ds_s = ds.to_str().unwrap();
    ok(&[
        "generate",
        ds_s,
        "--frames",
        "1",
        "--resolution",
        "32",
        "--lanes",
        "1",
    ]);
    let target = tmp.path().join("target.txt");
    std::fs::write(&target, b"precious").unwrap();
    let out = tmp.path().join("frame.nvdb");
    std::os::unix::fs::symlink(&target, &out).unwrap();
    ok(&[
        "export",
        ds_s,
        "--frame",
        "0",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&target).unwrap(), b"precious");
    assert!(
        !std::fs::symlink_metadata(&out)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(!read_nvdb(&out).unwrap().is_empty());
}

/// Address space given to a run that must not allocate what its input claims: a process
/// that tried would fail its allocation (Rust then aborts) instead of the test machine
/// swapping or killing it.
const ADDRESS_SPACE_LIMIT: u64 = 4 << 30;

/// Runs supercell-data (under [`ADDRESS_SPACE_LIMIT`] with `limit_memory`), failing the
/// test if it runs longer than a minute. Returns its exit status, stdout, stderr and peak
/// resident memory in bytes.
#[expect(
    clippy::zombie_processes,
    reason = "the child is reaped by wait4, which also reports its peak memory"
)]
fn run_measured(args: &[&str], limit_memory: bool) -> (Option<i32>, String, String, u64) {
    use std::io::Read;
    use std::os::unix::process::CommandExt;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_supercell-data"));
    cmd.args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    if limit_memory {
        // SAFETY: the closure runs in the forked child before exec and only calls
        // setrlimit, which is async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                let lim = libc::rlimit {
                    rlim_cur: ADDRESS_SPACE_LIMIT as libc::rlim_t,
                    rlim_max: ADDRESS_SPACE_LIMIT as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().expect("run supercell-data");
    let pid = child.id() as libc::pid_t;
    // Drain the pipes on their own threads so a chatty child never blocks on them.
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let start = std::time::Instant::now();
    let mut status = 0;
    // SAFETY: rusage is plain integers and timevals; all zeros is a valid value.
    let mut usage = unsafe { std::mem::zeroed::<libc::rusage>() };
    loop {
        // SAFETY: waits for our own child, writing its status and rusage through valid
        // pointers; WNOHANG returns at once.
        let r = unsafe { libc::wait4(pid, &mut status, libc::WNOHANG, &mut usage) };
        if r == pid {
            break;
        }
        assert!(r == 0, "wait4: {}", std::io::Error::last_os_error());
        if start.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("supercell-data {args:?} did not finish in a minute");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
    let peak = usage.ru_maxrss as u64 * 1024;
    (code, out.join().unwrap(), err.join().unwrap(), peak)
}

/// Runs supercell-data under [`ADDRESS_SPACE_LIMIT`]; the run must fail cleanly (exit
/// status 1, not a signal) with `expect` in its message and no panic. Returns its stdout.
fn fails_within_memory_limit(args: &[&str], expect: &[&str]) -> String {
    let (code, out, err, _) = run_measured(args, true);
    assert_eq!(
        code,
        Some(1),
        "{args:?} must fail cleanly, not abort or be killed: {err}"
    );
    for e in expect {
        assert!(err.contains(e), "{args:?}: expected {e:?} in {err}");
    }
    assert!(!err.contains("panicked"), "{args:?} panicked: {err}");
    out
}

/// A one-frame, one-lane dataset whose manifest says the frame is one 64 GiB extent of a
/// (sparse) 64 GiB lane file: every size in it is consistent, only the memory is missing.
fn dataset_with_a_64_gib_extent(dir: &Path) {
    const HUGE: u64 = 64 << 30;
    ok(&[
        "generate",
        dir.to_str().unwrap(),
        "--frames",
        "1",
        "--resolution",
        "16",
        "--lanes",
        "1",
    ]);
    let mpath = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["chunk_size"] = HUGE.into();
    m["frames"][0]["slot_size"] = HUGE.into();
    m["frames"][0]["extents"] = serde_json::json!([[0, 0, 0, HUGE, 0, 0]]);
    assert_eq!(m["lanes"][0]["files"].as_array().unwrap().len(), 1);
    m["lanes"][0]["files"][0]["size"] = HUGE.into();
    let lane = dir
        .join(m["lanes"][0]["path"].as_str().unwrap())
        .join(m["lanes"][0]["files"][0]["name"].as_str().unwrap());
    std::fs::OpenOptions::new()
        .write(true)
        .open(&lane)
        .unwrap()
        .set_len(HUGE)
        .unwrap();
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();
}

#[test]
fn a_frame_larger_than_memory_is_refused_not_allocated() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("huge");
    dataset_with_a_64_gib_extent(&ds);
    let ds_s = ds.to_str().unwrap();
    let out = tmp.path().join("f0.nvdb");
    let named = ["frame 0", "68719476736 bytes", "can get at most"];
    // verify reports it as the frame's problem (on stdout, with the others).
    let report = fails_within_memory_limit(&["verify", ds_s], &[]);
    for n in named {
        assert!(report.contains(n), "expected {n:?} in {report}");
    }
    fails_within_memory_limit(&["inspect", ds_s], &named);
    fails_within_memory_limit(
        &[
            "export",
            ds_s,
            "--frame",
            "0",
            "--out",
            out.to_str().unwrap(),
        ],
        &named,
    );
    fails_within_memory_limit(&["sample", ds_s, "--at", "0,0,0"], &named);
    assert!(!out.exists());
}

/// A `.nvdb` file holding `fog_zip.nvdb`'s one grid description, with a ZIP payload of
/// `zeros_mib` MiB of zeros and a metadata grid size of `claim` bytes. With `grid_head`,
/// the stream starts with a grid magic and `claim` as the header's grid size, so only the
/// size of what follows gives it away.
fn zip_bomb(path: &Path, claim: u64, zeros_mib: usize, grid_head: bool) {
    use flate2::{Compress, Compression, FlushCompress};
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/nanovdb/fog_zip.nvdb");
    let src = std::fs::read(fixture).unwrap();
    assert_eq!(u16::from_le_bytes([src[12], src[13]]), 1, "one grid");
    let name_size = u32::from_le_bytes(src[16 + 136..16 + 140].try_into().unwrap()) as usize;
    let mut file = src[..16 + 176 + name_size].to_vec();
    // One MiB of zeros after a full flush is a self-contained, byte-aligned run of deflate
    // blocks: repeating it makes a stream of any length in no time.
    let mib = vec![0u8; 1 << 20];
    let mut c = Compress::new(Compression::best(), true);
    let mut stream = Vec::with_capacity(1 << 16);
    if grid_head {
        let mut head = [0u8; 40];
        head[..8].copy_from_slice(b"NanoVDB1");
        head[32..].copy_from_slice(&claim.to_le_bytes());
        c.compress_vec(&head, &mut stream, FlushCompress::Full)
            .unwrap();
    }
    let mut first = Vec::with_capacity(1 << 16);
    c.compress_vec(&mib, &mut first, FlushCompress::Full)
        .unwrap();
    stream.extend_from_slice(&first);
    let mut repeat = Vec::with_capacity(1 << 16);
    c.compress_vec(&mib, &mut repeat, FlushCompress::Full)
        .unwrap();
    for _ in 1..zeros_mib {
        stream.extend_from_slice(&repeat);
    }
    let mut end = Vec::with_capacity(64);
    c.compress_vec(&[], &mut end, FlushCompress::Finish)
        .unwrap();
    stream.extend_from_slice(&end);
    file[16..24].copy_from_slice(&claim.to_le_bytes());
    file[24..32].copy_from_slice(&(stream.len() as u64 + 8).to_le_bytes());
    file.extend_from_slice(&(stream.len() as u64).to_le_bytes());
    file.extend_from_slice(&stream);
    std::fs::write(path, file).unwrap();
}

#[test]
fn a_zip_bomb_is_refused_within_its_claim() {
    let tmp = tempfile::tempdir().unwrap();
    // 6 MiB of compressed zeros (6 GiB inflated) claiming a 12 GiB grid: the claim is
    // plausible for its compressed size, but more than this process may have. Refused
    // before inflating anything.
    let big = tmp.path().join("big_claim.nvdb");
    zip_bomb(&big, 12 << 30, 6 * 1024, false);
    assert!(std::fs::metadata(&big).unwrap().len() < 8 << 20);
    fails_within_memory_limit(
        &["inspect", big.to_str().unwrap()],
        &[
            "big_claim.nvdb",
            "grid 0",
            "12884901888 bytes",
            "can get at most",
        ],
    );
    fails_within_memory_limit(
        &["sample", big.to_str().unwrap(), "--at", "0,0,0"],
        &["big_claim.nvdb", "12884901888 bytes"],
    );
    // Without a limit (where the claim may fit), the stream is still rejected as soon as
    // its first bytes are not a grid header: the process never holds more than a small
    // part of the 6 GiB the stream expands to.
    let (code, _, err, peak) = run_measured(&["inspect", big.to_str().unwrap()], false);
    assert_eq!(code, Some(1), "{err}");
    assert!(peak < 512 << 20, "peak memory {peak} bytes: {err}");
    // A stream that starts with a grid magic and size claiming 1 MiB, then zeros: its
    // header explains nothing (no grid type, no nodes), refused after its first bytes.
    let small = tmp.path().join("small_claim.nvdb");
    zip_bomb(&small, 1 << 20, 6 * 1024, true);
    fails_within_memory_limit(
        &["inspect", small.to_str().unwrap()],
        &["small_claim.nvdb", "decompressed grid header: grid type 0"],
    );
    let (code, _, err, peak) = run_measured(&["inspect", small.to_str().unwrap()], false);
    assert_eq!(code, Some(1), "{err}");
    assert!(peak < 512 << 20, "peak memory {peak} bytes: {err}");
}

#[test]
fn generate_refuses_a_resolution_larger_than_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    fails_within_memory_limit(
        &["generate", ds.to_str().unwrap(), "--resolution", "16384"],
        &["--resolution 16384", "16384x16384x8192", "can get at most"],
    );
    assert!(!ds.join("manifest.json").exists());
}

fn fixture(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/nanovdb")
        .join(name)
}

/// Flips one byte inside the first leaf's voxel data of the only grid of the uncompressed
/// file `path`.
fn flip_leaf_byte(path: &Path) {
    let grids = read_nvdb(path).unwrap();
    let grid_bytes = &grids[0].bytes;
    let leaf = Grid::parse(grid_bytes)
        .unwrap()
        .leaves()
        .next()
        .expect("a leaf")
        .offset();
    let mut file = std::fs::read(path).unwrap();
    let start = file
        .windows(256)
        .position(|w| w == &grid_bytes[..256])
        .expect("the grid is stored uncompressed");
    file[start + leaf + 200] ^= 0x40;
    std::fs::write(path, file).unwrap();
}

fn stderr_of(args: &[&str]) -> (bool, String, String) {
    let out = tool(args);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn inspect_names_the_checksum_kind_and_sample_refuses_a_mismatch() {
    let tmp = tempfile::tempdir().unwrap();

    // NanoVDB's tools write head-only checksums: a damaged leaf goes unnoticed, and inspect
    // says so rather than calling the grid simply "valid".
    let head_only = tmp.path().join("head_only.nvdb");
    std::fs::copy(fixture("sphere_ls.nvdb"), &head_only).unwrap();
    flip_leaf_byte(&head_only);
    let h = head_only.to_str().unwrap();
    let text = ok(&["inspect", h]);
    assert!(
        text.contains("checksum head-only (leaves not covered), valid"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&["inspect", h, "--json"])).unwrap();
    assert_eq!(json["grids"][0]["checksum_kind"], "head-only", "{json}");
    ok(&["sample", h, "--at", "0,0,0"]);

    // The same grid with a full checksum, then one leaf byte flipped.
    let full = tmp.path().join("full.nvdb");
    let mut bytes = read_nvdb(fixture("sphere_ls.nvdb"))
        .unwrap()
        .remove(0)
        .bytes;
    let sum = supercell::format::compute_checksum(&bytes).unwrap();
    bytes[8..16].copy_from_slice(&sum.to_le_bytes());
    supercell::format::write_nvdb(&full, &[&bytes[..]], supercell::format::Codec::None).unwrap();
    let f = full.to_str().unwrap();
    let text = ok(&["inspect", f]);
    assert!(text.contains("checksum full, valid"), "{text}");
    ok(&["sample", f, "--at", "0,0,0"]);

    flip_leaf_byte(&full);
    let (success, text, _) = stderr_of(&["inspect", f]);
    assert!(!success, "inspect of a damaged grid must fail");
    assert!(text.contains("checksum full, MISMATCH (stored "), "{text}");
    let json: serde_json::Value =
        serde_json::from_str(&stderr_of(&["inspect", f, "--json"]).1).unwrap();
    assert_eq!(json["grids"][0]["checksum_kind"], "full", "{json}");
    assert_eq!(json["grids"][0]["checksum"], "MISMATCH", "{json}");
    assert!(json["grids"][0]["checksum_computed"].is_string(), "{json}");

    // sample refuses it, naming the file, the grid and both values...
    fails(&["sample", f, "--at", "0,0,0"], "checksum mismatch");
    let (success, _, err) = stderr_of(&["sample", f, "--at", "0,0,0"]);
    assert!(!success);
    assert!(err.contains("full.nvdb: grid 0 ("), "{err}");
    assert!(err.contains(&format!("stored {sum:016x}")), "{err}");
    assert!(err.contains("--allow-bad-checksum"), "{err}");
    // ...unless told to read it anyway, with a warning.
    let (success, out, err) = stderr_of(&["sample", f, "--at", "0,0,0", "--allow-bad-checksum"]);
    assert!(success, "{err}");
    assert!(out.starts_with("0,0,0: "), "{out}");
    assert!(
        err.contains("warning") && err.contains("checksum mismatch"),
        "{err}"
    );
}

/// Damages one leaf byte of frame 0's first grid in a dataset and fixes the extent CRC, as
/// a writer that striped an already-damaged grid would have: only the grid's own checksum
/// can tell.
fn damage_dataset_grid(ds: &Path) {
    use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
    let dataset = Dataset::open(ds).unwrap();
    let mut buf = AlignedBuf::new();
    dataset.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    let leaf = Grid::parse(dataset.grid_bytes(0, 0, &buf).unwrap())
        .unwrap()
        .leaves()
        .next()
        .expect("a leaf")
        .offset();
    let manifest_path = ds.join("manifest.json");
    let mut m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest_path).unwrap()).unwrap();
    let grid = &m["frames"][0]["grids"][0];
    assert_eq!(grid["attribute"], 0);
    let at = grid["offset"].as_u64().unwrap() + leaf as u64 + 200;
    let extents = m["frames"][0]["extents"].as_array_mut().unwrap();
    let e = extents
        .iter_mut()
        .find(|e| {
            let (dst, len) = (e[4].as_u64().unwrap(), e[3].as_u64().unwrap());
            dst <= at && at < dst + len
        })
        .expect("an extent holds the byte");
    let (lane, file, offset, len, dst) = (
        e[0].as_u64().unwrap() as usize,
        e[1].as_u64().unwrap() as usize,
        e[2].as_u64().unwrap() as usize,
        e[3].as_u64().unwrap() as usize,
        e[4].as_u64().unwrap(),
    );
    let lane_path = dataset.manifest().lane_dir(lane as u32);
    let name = dataset.manifest().lanes[lane].files[file].name.clone();
    let lane_file = lane_path.join(name);
    let mut bytes = std::fs::read(&lane_file).unwrap();
    bytes[offset + (at - dst) as usize] ^= 0x40;
    e[5] = crc32fast::hash(&bytes[offset..offset + len]).into();
    std::fs::write(&lane_file, bytes).unwrap();
    std::fs::write(&manifest_path, serde_json::to_string_pretty(&m).unwrap()).unwrap();
}

#[test]
fn export_and_sample_refuse_a_dataset_grid_whose_checksum_mismatches() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    let d = ds.to_str().unwrap();
    ok(&[
        "generate",
        d,
        "--frames",
        "1",
        "--resolution",
        "48",
        "--lanes",
        "1",
    ]);
    damage_dataset_grid(&ds);
    let out = tmp.path().join("f0.nvdb");
    let o = out.to_str().unwrap();
    let (success, _, err) = stderr_of(&["export", d, "--frame", "0", "--out", o]);
    assert!(!success, "export of a damaged grid must fail");
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(err.contains("frame 0 grid 0 (\"cloud\")"), "{err}");
    assert!(err.contains("stored "), "{err}");
    assert!(!out.exists(), "nothing written");
    fails(
        &["sample", d, "--grid", "cloud", "--at", "0,0,0"],
        "checksum mismatch",
    );
    // Explicitly allowed: written, with a warning; the copy carries the damage faithfully.
    let (success, _, err) = stderr_of(&[
        "export",
        d,
        "--frame",
        "0",
        "--out",
        o,
        "--allow-bad-checksum",
    ]);
    assert!(success, "{err}");
    assert!(err.contains("warning"), "{err}");
    let (success, text, _) = stderr_of(&["inspect", o]);
    assert!(!success);
    assert!(text.contains("MISMATCH"), "{text}");
    ok(&["sample", d, "--grid", "rain", "--at", "0,0,0"]);
}

#[test]
fn generate_chooses_attributes_and_names_bad_ones() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("storm");
    let d = ds.to_str().unwrap();
    fails(
        &[
            "generate",
            d,
            "--resolution",
            "32",
            "--attributes",
            "cloud,hial",
        ],
        "unknown attribute 'hial'",
    );
    fails(
        &[
            "generate",
            d,
            "--resolution",
            "32",
            "--attributes",
            "rain,rain",
        ],
        "attribute 'rain' is listed twice",
    );
    assert!(!ds.join("manifest.json").exists());
    ok(&[
        "generate",
        d,
        "--frames",
        "1",
        "--resolution",
        "48",
        "--attributes",
        "hail,reflectivity,pressure_perturbation",
    ]);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ds.join("manifest.json")).unwrap()).unwrap();
    let names: Vec<_> = m["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["hail", "reflectivity", "pressure_perturbation"]);
    ok(&["verify", d]);
    ok(&[
        "generate",
        d,
        "--frames",
        "1",
        "--resolution",
        "32",
        "--attributes",
        "all",
    ]);
    let m: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(ds.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(m["attributes"].as_array().unwrap().len(), 15);
}
