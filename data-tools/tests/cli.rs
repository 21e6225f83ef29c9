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
