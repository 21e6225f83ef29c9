//! Corrupt manifests and lane files: clear errors naming the manifest, frame and field;
//! never a panic.

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};
use supercell::dataset::{
    AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetError, DatasetWriter, LaneSpec, Manifest,
    Provenance, verify,
};

const CHUNK: u64 = 8192;

fn write(dir: &Path) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(3),
        CHUNK,
        vec![AttributeSpec::new("density"), AttributeSpec::new("rain")],
        Provenance::new("test", ["x"]),
    )
    .unwrap();
    for f in 0..3u8 {
        w.push_frame_opaque(
            f64::from(f),
            vec![vec![f + 1; 30_000], vec![f + 100; 5_000]],
        )
        .unwrap();
    }
    w.finish().unwrap();
}

fn manifest_value(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

/// Applies `edit` to a fresh dataset's manifest and returns the error `open` gives.
fn open_after(edit: impl FnOnce(&mut Value)) -> String {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let mut v = manifest_value(dir.path());
    edit(&mut v);
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_vec(&v).unwrap(),
    )
    .unwrap();
    let err = Dataset::open(dir.path()).expect_err("corrupt manifest must be rejected");
    assert!(matches!(err, DatasetError::Manifest { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("manifest.json"),
        "error does not name the manifest: {msg}"
    );
    msg
}

fn expect(msg: &str, parts: &[&str]) {
    for p in parts {
        assert!(msg.contains(p), "expected {p:?} in: {msg}");
    }
}

#[test]
fn bad_json() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let text = std::fs::read(dir.path().join("manifest.json")).unwrap();
    std::fs::write(dir.path().join("manifest.json"), &text[..text.len() / 2]).unwrap();
    let msg = Dataset::open(dir.path()).unwrap_err().to_string();
    expect(&msg, &["manifest.json", "not valid JSON"]);
}

#[test]
fn wrong_format_and_version() {
    expect(
        &open_after(|v| v["version"] = json!(2)),
        &["version 2 is not supported"],
    );
    expect(
        &open_after(|v| v["format"] = json!("other")),
        &["format is \"other\""],
    );
    expect(
        &open_after(|v| {
            v.as_object_mut()
                .unwrap()
                .remove("version")
                .map(drop)
                .unwrap()
        }),
        &["no \"version\""],
    );
    // A future version may restructure everything else; the version error comes first.
    expect(
        &open_after(|v| *v = json!({"format": "supercell-dataset", "version": 9, "frames": 3})),
        &["version 9"],
    );
}

#[test]
fn extent_outside_its_file() {
    let msg = open_after(|v| {
        let size = v["lanes"][0]["files"][0]["size"].as_u64().unwrap();
        let e = &mut v["frames"][0]["extents"][0];
        assert_eq!(e[0], 0, "frame 0 starts on lane 0");
        e[2] = json!(size);
    });
    expect(&msg, &["frame 0", "extents[0]", "outside lane 0 file 0"]);
}

#[test]
fn overlapping_and_gapped_extents() {
    let msg = open_after(|v| v["frames"][1]["extents"][1][4] = json!(0));
    expect(&msg, &["frame 1", "extents[1]", "overlap"]);
    let msg = open_after(|v| v["frames"][1]["extents"][1][4] = json!(3 * CHUNK));
    expect(&msg, &["frame 1", "extents[1]", "gap"]);
    let msg = open_after(|v| {
        v["frames"][2]["extents"].as_array_mut().unwrap().pop();
    });
    expect(&msg, &["frame 2", "extents cover"]);
}

#[test]
fn extents_sharing_file_bytes() {
    let msg = open_after(|v| {
        // Frame 1's first extent pointing at frame 0's bytes: tiles its slot but aliases.
        let e0 = v["frames"][0]["extents"][0].clone();
        let e = &mut v["frames"][1]["extents"][0];
        e[0] = e0[0].clone();
        e[1] = e0[1].clone();
        e[2] = e0[2].clone();
    });
    expect(&msg, &["share bytes", "frame 0 extents[0]"]);
}

#[test]
fn misaligned() {
    expect(
        &open_after(|v| v["frames"][0]["extents"][0][2] = json!(4097)),
        &[
            "frame 0",
            "extents[0]",
            "offset 4097 is not a multiple of 4096",
        ],
    );
    expect(
        &open_after(|v| v["frames"][0]["grids"][1]["offset"] = json!(100)),
        &["frame 0", "grids[1].offset 100"],
    );
    expect(
        &open_after(|v| v["chunk_size"] = json!(1000)),
        &["chunk_size 1000"],
    );
    expect(
        &open_after(|v| v["frames"][0]["slot_size"] = json!(12345)),
        &["frame 0", "slot_size 12345"],
    );
}

#[test]
fn unknown_attribute_lane_and_file() {
    expect(
        &open_after(|v| v["frames"][2]["grids"][0]["attribute"] = json!(7)),
        &["frame 2", "grids[0].attribute 7 is not an attribute index"],
    );
    expect(
        &open_after(|v| v["frames"][2]["grids"][0]["attribute"] = json!(1)),
        &["frame 2", "appears twice"],
    );
    expect(
        &open_after(|v| v["frames"][0]["extents"][0][0] = json!(7)),
        &["frame 0", "extents[0]", "lane 7 does not exist"],
    );
    expect(
        &open_after(|v| v["frames"][0]["extents"][0][1] = json!(3)),
        &["frame 0", "extents[0]", "file 3 does not exist"],
    );
    expect(
        &open_after(|v| v["frames"][0]["extents"][0][0] = json!(1u64 << 40)),
        &["malformed", "does not fit in 32 bits"],
    );
    expect(
        &open_after(|v| {
            v["frames"][0]["grids"]
                .as_array_mut()
                .unwrap()
                .pop()
                .map(drop)
                .unwrap()
        }),
        &["frame 0", "1 grids listed"],
    );
}

#[test]
fn grids_outside_or_overlapping() {
    expect(
        &open_after(|v| v["frames"][0]["grids"][1]["size"] = json!(1u64 << 40)),
        &["frame 0", "grids[1]", "past slot_size"],
    );
    expect(
        &open_after(|v| v["frames"][0]["grids"][1]["offset"] = json!(0)),
        &["frame 0", "overlap"],
    );
    expect(
        &open_after(|v| v["frames"][0]["grids"][0]["checksum"] = json!("xyz")),
        &["malformed", "checksum"],
    );
}

#[test]
fn times_and_counts() {
    expect(
        &open_after(|v| v["frames"][1]["time"] = json!(0.0)),
        &["frame 1", "time 0 does not increase"],
    );
    expect(
        &open_after(|v| v["frames"][1]["time"] = json!(null)),
        &["malformed"],
    );
    expect(
        &open_after(|v| v["frame_count"] = json!(4)),
        &["frame_count is 4 but 3 frames"],
    );
    expect(
        &open_after(|v| v["attributes"][1]["name"] = json!("density")),
        &["attributes[1].name \"density\""],
    );
    expect(&open_after(|v| v["lanes"] = json!([])), &["lanes: none"]);
}

#[test]
fn lane_file_names_and_sizes() {
    expect(
        &open_after(|v| v["lanes"][0]["files"][0]["name"] = json!("../../etc/passwd")),
        &["not a plain file name"],
    );
    expect(
        &open_after(|v| v["lanes"][0]["files"][0]["name"] = json!("missing.sclane")),
        &[
            "lanes[0].files[0].name \"missing.sclane\"",
            "naming pattern",
        ],
    );
    expect(
        &open_after(|v| v["write_id"] = json!("../w1")),
        &["write_id \"../w1\""],
    );
    expect(
        &open_after(|v| {
            let s = v["lanes"][1]["files"][0]["size"].as_u64().unwrap();
            v["lanes"][1]["files"][0]["size"] = json!(s + 4096);
        }),
        &["lane 1 file 0", "manifest says"],
    );
}

#[test]
fn missing_lane_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let p = Dataset::open(dir.path()).unwrap().lane_file_path(0, 0);
    std::fs::remove_file(&p).unwrap();
    let msg = Dataset::open(dir.path()).unwrap_err().to_string();
    expect(
        &msg,
        &["lane 0 file 0", p.to_str().unwrap(), "cannot be read"],
    );
}

#[test]
fn truncated_lane_file_is_caught_at_open() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    let p = ds.lane_file_path(2, 0);
    drop(ds);
    let f = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
    f.set_len(4096).unwrap();
    let msg = Dataset::open(dir.path()).unwrap_err().to_string();
    expect(&msg, &["lane 2 file 0", "is 4096 bytes"]);
}

#[test]
fn flipped_byte_is_found_and_located() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    // Frame 1's second extent; flip one byte in the middle of it.
    let e = ds.frame_extents(1)[1];
    let path = ds.lane_file_path(e.lane, e.file);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(e.offset + 100) as usize] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();

    let report = verify(&ds, |_| {});
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert_eq!(
        (p.frame, p.lane, p.file, p.offset),
        (1, Some(e.lane), Some(e.file), Some(e.offset))
    );
    let shown = p.to_string();
    expect(
        &shown,
        &[
            "frame 1",
            &format!("lane {}", e.lane),
            "file 0",
            &format!("offset {}", e.offset),
            "CRC32",
        ],
    );

    let mut buf = AlignedBuf::new();
    let err = ds.read_frame(1, &mut buf, CrcCheck::Verify).unwrap_err();
    assert!(matches!(err, DatasetError::Crc { frame: 1, .. }), "{err}");
    ds.read_frame(1, &mut buf, CrcCheck::Skip).unwrap();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
}

#[test]
fn out_of_range_frame_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    let mut buf = AlignedBuf::new();
    let msg = ds
        .read_frame(3, &mut buf, CrcCheck::Skip)
        .unwrap_err()
        .to_string();
    expect(&msg, &["frame 3 does not exist"]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Arbitrary damage to the manifest text never panics and never validates into a
    /// manifest that disagrees with the files.
    #[test]
    fn damaged_manifest_never_panics(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6)) {
        thread_local! {
            static BASE: (tempfile::TempDir, Vec<u8>) = {
                let dir = tempfile::tempdir().unwrap();
                write(dir.path());
                let text = std::fs::read(dir.path().join("manifest.json")).unwrap();
                (dir, text)
            };
        }
        BASE.with(|(dir, text)| {
            let mut t = text.clone();
            for (i, b) in &edits {
                let i = i.index(t.len());
                t[i] = *b;
            }
            let path = dir.path().join("manifest.json");
            if let Ok(m) = Manifest::from_json(&t, &path) {
                // Whatever passed validation is internally consistent: every extent lies
                // inside its file and the frames tile; reading must not panic either.
                if m.check_files().is_ok() {
                    std::fs::write(dir.path().join("alt.json"), &t).unwrap();
                    let ds = Dataset::open(dir.path().join("alt.json")).unwrap();
                    let _ = verify(&ds, |_| {});
                }
            }
        });
    }
}

#[test]
fn inverted_boxes_and_bad_voxel_sizes_are_refused() {
    let set =
        |field: &'static str, value: Value| open_after(move |v| v["attributes"][1][field] = value);
    expect(
        &set("world_bbox", json!([[0.0, 0.0, 5.0], [10.0, 10.0, 4.0]])),
        &["attributes[1].world_bbox", "inverted on axis z"],
    );
    expect(
        &set("index_bbox", json!([[0, 9, 0], [7, 8, 7]])),
        &["attributes[1].index_bbox", "inverted on axis y"],
    );
    for bad in [json!([0.5, 0.0, 0.5]), json!([0.5, 0.5, -1.0])] {
        expect(
            &set("voxel_size", bad),
            &["attributes[1].voxel_size", "not a finite number > 0"],
        );
    }
    // A box of one point and a positive voxel size are fine.
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let mut v = manifest_value(dir.path());
    v["attributes"][1]["world_bbox"] = json!([[1.0, 2.0, 3.0], [1.0, 2.0, 3.0]]);
    v["attributes"][1]["voxel_size"] = json!([0.5, 0.5, 0.25]);
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_vec(&v).unwrap(),
    )
    .unwrap();
    Dataset::open(dir.path()).unwrap();
}
