//! Datasets of real NanoVDB grids: statistics in the manifest, validation on push, and
//! verify's NanoVDB-level checks.

use std::path::Path;

use serde_json::Value as Json;
use supercell::dataset::{
    AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetWriter, LaneSpec, Provenance, verify,
};
use supercell::format::{BuildOptions, GridClass, GridType, LeafBrick, SparseVolume, build_grid};

/// A fog volume of `n` bricks along x starting at `x0`, values scaled by `scale`.
fn grid(name: &str, n: i32, x0: i32, scale: f32) -> Vec<u8> {
    let (vol, opts) = volume(name, n, x0, scale);
    build_grid(&vol, &opts).unwrap()
}

/// What [`grid`] builds its grid of.
fn volume(name: &str, n: i32, x0: i32, scale: f32) -> (SparseVolume, BuildOptions) {
    let bricks = (0..n)
        .map(|b| {
            let mut brick = LeafBrick::filled([x0 + 8 * b, 0, -8], 0.0);
            for v in 0..512 {
                if v % 3 == 0 {
                    brick.set_active(v, scale * (v as f32 / 511.0));
                }
            }
            brick
        })
        .collect();
    let vol = SparseVolume {
        background: 0.0,
        bricks,
    };
    let opts = BuildOptions {
        name: name.into(),
        voxel_size: [0.5; 3],
        ..BuildOptions::default()
    };
    (vol, opts)
}

fn write(dir: &Path) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(2),
        16384,
        vec![AttributeSpec::new("density"), AttributeSpec::new("rain")],
        Provenance::new("test", ["nanovdb"]),
    )
    .unwrap();
    w.push_frame(
        0.0,
        vec![grid("density", 3, 0, 1.0), grid("rain", 40, 0, 2.0)],
    )
    .unwrap();
    w.push_frame(
        0.25,
        vec![grid("density", 5, -64, 4.0), grid("rain", 1, 16, 0.5)],
    )
    .unwrap();
    w.finish().unwrap();
}

#[test]
fn statistics_cover_all_frames() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    let ds = Dataset::open(dir.path()).unwrap();
    let a = &ds.manifest().attributes[0];
    assert_eq!(a.grid_type, GridType::Float);
    assert_eq!(a.grid_class, GridClass::FogVolume);
    assert_eq!(a.voxel_size, Some([0.5; 3]));
    let [lo, hi] = a.value_range.unwrap();
    assert_eq!(lo, 0.0);
    assert!((hi - 4.0 * 510.0 / 511.0).abs() < 1e-5, "{hi}");
    let [bmin, bmax] = a.index_bbox.unwrap();
    assert_eq!(bmin[0], -64);
    assert_eq!(bmax[0], 23);
    assert!(a.world_bbox.is_some());
    let report = verify(&ds, |_| {});
    assert!(report.is_ok(), "{:?}", report.problems);
    assert_eq!(report.grids_checked, 4);
    // The slot image holds the grids exactly where the manifest says.
    let mut buf = AlignedBuf::new();
    ds.read_frame(1, &mut buf, CrcCheck::Verify).unwrap();
    let g = ds.grid_bytes(1, 0, &buf).unwrap();
    assert_eq!(g, &grid("density", 5, -64, 4.0)[..]);
}

#[test]
fn push_refuses_invalid_or_inconsistent_grids() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(1),
        16384,
        vec![AttributeSpec::new("density")],
        Provenance::default(),
    )
    .unwrap();
    let msg = w
        .push_frame(0.0, vec![vec![7; 5000]])
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("frame 0")
            && msg.contains("density")
            && msg.contains("not a valid NanoVDB grid"),
        "{msg}"
    );
    let mut damaged = grid("density", 2, 0, 1.0);
    let n = damaged.len();
    damaged[n - 5] ^= 1; // a leaf value: parses, but the checksum no longer matches
    let msg = w.push_frame(0.0, vec![damaged]).unwrap_err().to_string();
    assert!(msg.contains("checksum"), "{msg}");
    let mut padded = grid("density", 2, 0, 1.0);
    padded.extend_from_slice(&[0; 64]);
    let msg = w.push_frame(0.0, vec![padded]).unwrap_err().to_string();
    assert!(msg.contains("one grid per buffer"), "{msg}");
}

#[test]
fn verify_reports_nanovdb_checksum_mismatch_with_frame_and_attribute() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path());
    // Damage a grid byte and re-stamp the extent's CRC32, so only the NanoVDB level can
    // notice: this is what a bug in a writer (rather than a bad disk) would look like.
    let ds = Dataset::open(dir.path()).unwrap();
    let frame = ds.frame(1).unwrap().clone();
    let rain = frame.grids[1];
    let target = rain.offset + rain.size - 8; // inside the last leaf's values
    let (ei, e) = frame
        .extents
        .iter()
        .enumerate()
        .find(|(_, e)| e.dst <= target && target < e.dst + e.len)
        .unwrap();
    let path = ds.lane_file_path(e.lane, e.file);
    drop(ds);
    let mut lane = std::fs::read(&path).unwrap();
    let at = (e.offset + (target - e.dst)) as usize;
    lane[at] ^= 0x10;
    std::fs::write(&path, &lane).unwrap();
    let crc = crc32fast::hash(&lane[e.offset as usize..(e.offset + e.len) as usize]);
    let mpath = dir.path().join("manifest.json");
    let mut m: Json = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["frames"][1]["extents"][ei][5] = crc.into();
    std::fs::write(&mpath, serde_json::to_vec(&m).unwrap()).unwrap();

    let ds = Dataset::open(dir.path()).unwrap();
    let report = verify(&ds, |_| {});
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    let p = &report.problems[0];
    assert_eq!(p.frame, 1);
    assert_eq!(p.attribute.as_deref(), Some("rain"));
    assert_eq!(p.offset, Some(rain.offset));
    assert!(p.to_string().contains("checksum"), "{p}");
}

/// Grids given as `BuiltGrid`s (built in this process: their checksums are not computed
/// again) are stored exactly as the same grids given as plain bytes (checksums checked):
/// the same lane bytes, extents, CRCs and manifest entries.
#[test]
fn built_grids_are_stored_as_checked_bytes_are() {
    use supercell::format::BuiltGrid;
    let frames = [
        (0.0, [("density", 3, 0, 1.0), ("rain", 40, 0, 2.0)]),
        (0.25, [("density", 5, -64, 4.0), ("rain", 1, 16, 0.5)]),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let mut written = Vec::new();
    for built in [false, true] {
        let dir = tmp.path().join(if built { "built" } else { "bytes" });
        let mut w = DatasetWriter::create(
            &dir,
            LaneSpec::Count(2),
            16384,
            vec![AttributeSpec::new("density"), AttributeSpec::new("rain")],
            Provenance::new("test", ["nanovdb"]),
        )
        .unwrap();
        for (time, grids) in &frames {
            let bytes: Vec<Vec<u8>> = grids
                .iter()
                .map(|&(name, n, x0, scale)| grid(name, n, x0, scale))
                .collect();
            if built {
                // The same build as `grid`'s, through the typed path.
                let typed: Vec<BuiltGrid> = grids
                    .iter()
                    .map(|&(name, n, x0, scale)| {
                        let (vol, opts) = volume(name, n, x0, scale);
                        BuiltGrid::of_volume(&vol, &opts, Vec::new()).unwrap()
                    })
                    .collect();
                for (t, b) in typed.iter().zip(&bytes) {
                    assert_eq!(t.bytes(), &b[..]);
                }
                w.push_built_frame(*time, &typed).unwrap();
            } else {
                w.push_frame_borrowed(*time, &bytes).unwrap();
            }
        }
        let manifest = w.finish().unwrap();
        let lanes: Vec<Vec<u8>> = (0..manifest.lanes.len() as u32)
            .flat_map(|l| {
                let lane_dir = manifest.lane_dir(l);
                manifest.lanes[l as usize]
                    .files
                    .iter()
                    .map(move |f| std::fs::read(lane_dir.join(&f.name)).unwrap())
                    .collect::<Vec<_>>()
            })
            .collect();
        written.push((manifest.frames, manifest.attributes, lanes));
    }
    assert_eq!(written[0], written[1]);
}
