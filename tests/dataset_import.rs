//! Import/export round trip: .nvdb files → dataset → exported .nvdb → identical grids.

use std::path::{Path, PathBuf};

use supercell::dataset::{
    Dataset, DatasetError, LaneSpec, Provenance, export_frame, import_nvdb_sequence, verify,
};
use supercell::format::{
    BuildOptions, Codec, LeafBrick, SparseVolume, build_grid, read_nvdb, write_nvdb,
};

fn grid(name: &str, bricks: i32, seed: f32) -> Vec<u8> {
    let bricks = (0..bricks)
        .map(|b| {
            let mut brick = LeafBrick::filled([8 * b, 8 * (b % 3), 0], 0.0);
            for v in (0..512).step_by(2) {
                brick.set_active(v, seed + v as f32 * 0.01);
            }
            brick
        })
        .collect();
    let opts = BuildOptions {
        name: name.into(),
        ..BuildOptions::default()
    };
    build_grid(
        &SparseVolume {
            background: 0.0,
            bricks,
        },
        &opts,
    )
    .unwrap()
}

/// One frame's grids with their names.
type NamedGrids = Vec<(String, Vec<u8>)>;

/// Writes `frames` files, each with the named grids (in the given order), returning the
/// paths and each frame's grids keyed by name.
fn sequence(
    dir: &Path,
    frames: usize,
    order: impl Fn(usize) -> Vec<&'static str>,
    codec: Codec,
) -> (Vec<PathBuf>, Vec<NamedGrids>) {
    let mut paths = Vec::new();
    let mut all = Vec::new();
    for f in 0..frames {
        let grids: NamedGrids = order(f)
            .into_iter()
            .map(|n| {
                (
                    n.to_string(),
                    grid(n, 2 + (f as i32 * 7 + n.len() as i32) % 30, f as f32),
                )
            })
            .collect();
        let p = dir.join(format!("frame_{f:04}.nvdb"));
        let refs: Vec<&[u8]> = grids.iter().map(|(_, g)| &g[..]).collect();
        write_nvdb(&p, &refs, codec).unwrap();
        paths.push(p);
        all.push(grids);
    }
    (paths, all)
}

#[test]
fn round_trip_is_byte_identical() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    // Later files list the grids in another order: matched by name.
    let (paths, frames) = sequence(
        src.path(),
        4,
        |f| {
            if f % 2 == 0 {
                vec!["density", "rain", "w"]
            } else {
                vec!["w", "density", "rain"]
            }
        },
        Codec::Zip,
    );
    let times = [0.0, 0.5, 1.0, 2.0];
    let mut seen = Vec::new();
    let m = import_nvdb_sequence(
        &paths,
        out.path().join("ds"),
        LaneSpec::Count(3),
        8192,
        Some(&times),
        Provenance::new("test import", ["a"]),
        |n| seen.push(n),
    )
    .unwrap();
    assert_eq!(seen, vec![1, 2, 3, 4]);
    assert_eq!(
        m.attributes
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["density", "rain", "w"]
    );
    let ds = Dataset::open(out.path().join("ds")).unwrap();
    assert_eq!(
        ds.manifest()
            .frames
            .iter()
            .map(|f| f.time)
            .collect::<Vec<_>>(),
        times
    );
    assert!(verify(&ds, |_| {}).is_ok());
    for (f, grids) in frames.iter().enumerate() {
        let p = out.path().join(format!("out_{f}.nvdb"));
        export_frame(&ds, f, &p, Codec::None).unwrap();
        let back = read_nvdb(&p).unwrap();
        assert_eq!(back.len(), 3);
        for (a, name) in ["density", "rain", "w"].iter().enumerate() {
            let original = &grids.iter().find(|(n, _)| n == name).unwrap().1;
            assert_eq!(back[a].name, *name);
            assert!(back[a].bytes == *original, "frame {f} grid {name} differs");
        }
    }
}

#[test]
fn unnamed_grids_match_by_position_and_default_times() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (paths, _) = sequence(src.path(), 3, |_| vec!["", ""], Codec::None);
    let m = import_nvdb_sequence(
        &paths,
        out.path(),
        LaneSpec::Count(2),
        4096,
        None,
        Provenance::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(
        m.attributes
            .iter()
            .map(|a| a.name.as_str())
            .collect::<Vec<_>>(),
        ["grid0", "grid1"]
    );
    assert_eq!(
        m.frames.iter().map(|f| f.time).collect::<Vec<_>>(),
        [0.0, 1.0, 2.0]
    );
}

#[test]
fn mismatched_files_are_named() {
    let src = tempfile::tempdir().unwrap();
    let out = tempfile::tempdir().unwrap();
    let (paths, _) = sequence(
        src.path(),
        3,
        |f| {
            if f == 2 {
                vec!["density", "snow"]
            } else {
                vec!["density", "rain"]
            }
        },
        Codec::None,
    );
    let err = import_nvdb_sequence(
        &paths,
        out.path(),
        LaneSpec::Count(2),
        4096,
        None,
        Provenance::default(),
        |_| {},
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, DatasetError::Input { .. }), "{msg}");
    assert!(
        msg.contains("frame_0002.nvdb") && msg.contains("snow"),
        "{msg}"
    );
    // Nothing was committed.
    assert!(Dataset::open(out.path()).is_err());

    let (paths, _) = sequence(
        src.path(),
        2,
        |f| {
            if f == 1 {
                vec!["density"]
            } else {
                vec!["density", "rain"]
            }
        },
        Codec::None,
    );
    let msg = import_nvdb_sequence(
        &paths,
        out.path(),
        LaneSpec::Count(2),
        4096,
        None,
        Provenance::default(),
        |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.contains("frame_0001.nvdb") && msg.contains("no grid named \"rain\""),
        "{msg}"
    );

    std::fs::write(&paths[1], b"not a nanovdb file").unwrap();
    let msg = import_nvdb_sequence(
        &paths,
        out.path(),
        LaneSpec::Count(2),
        4096,
        None,
        Provenance::default(),
        |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("frame_0001.nvdb"), "{msg}");

    let msg = import_nvdb_sequence(
        &paths,
        out.path(),
        LaneSpec::Count(2),
        4096,
        Some(&[1.0, 1.0]),
        Provenance::default(),
        |_| {},
    )
    .unwrap_err()
    .to_string();
    assert!(msg.contains("increasing"), "{msg}");
}
