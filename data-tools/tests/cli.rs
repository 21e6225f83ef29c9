//! End-to-end tests of the `supercell-data` command line: generate → verify → inspect →
//! sample → export → import, and the errors bad input must give.

use std::path::Path;
use std::process::{Command, Output};
use supercell::format::{Grid, Value, read_nvdb};

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

    // inspect --json describes frame 1's grids with what the reader sees.
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
    assert_eq!(exported.len(), names.len());

    // sample --json returns exactly what the accessor reads, in the order asked, including
    // negative and far-away coordinates (background).
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

    // Import the exported frame (twice, as two frames) and compare grids byte for byte.
    let ds2 = tmp.path().join("imported");
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
    let back = tmp.path().join("back.nvdb");
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
    for name in ["a", "b"] {
        let ds = tmp.path().join(name);
        ok(&[
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
        ]);
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
}

#[test]
fn bad_input_gives_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("nope.nvdb");
    fails(&["inspect", missing.to_str().unwrap()], "no such file");
    let junk = tmp.path().join("junk.nvdb");
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
        &["verify", tmp.path().to_str().unwrap()],
        "not a supercell dataset",
    );
    fails(
        &[
            "generate",
            tmp.path().join("x").to_str().unwrap(),
            "--grid-type",
            "fp3",
        ],
        "unknown grid type",
    );
    fails(
        &[
            "generate",
            tmp.path().join("x").to_str().unwrap(),
            "--lanes",
            Path::new("/nonexistent/lanes").to_str().unwrap(),
        ],
        "not a directory",
    );
    fails(
        &[
            "generate",
            tmp.path().join("x").to_str().unwrap(),
            "--chunk-size",
            "1000",
        ],
        "4096",
    );

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
    // A manifest that files grids under the wrong attributes fails verification.
    let swapped = tmp.path().join("swapped");
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
