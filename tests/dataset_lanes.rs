//! Lane placement: explicit lane directories, relocatable datasets, file segments.

use supercell::dataset::{
    AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetError, DatasetWriter, LaneSpec,
    Provenance, verify,
};

fn attrs() -> Vec<AttributeSpec> {
    vec![AttributeSpec::new("density")]
}

#[test]
fn explicit_lane_dirs_are_stored_absolute_and_default_lanes_relative() {
    let root = tempfile::tempdir().unwrap();
    let mounts: Vec<_> = (0..3)
        .map(|i| root.path().join(format!("mnt/lane{i}")))
        .collect();
    for m in &mounts {
        std::fs::create_dir_all(m).unwrap();
    }
    let ds_dir = root.path().join("ds");
    let mut w = DatasetWriter::create(
        &ds_dir,
        LaneSpec::Dirs(mounts.clone()),
        4096,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    for f in 0..4 {
        w.push_frame_opaque(f64::from(f), vec![vec![f as u8 + 1; 3 * 4096 + 17]])
            .unwrap();
    }
    let m = w.finish().unwrap();
    for (lane, mount) in m.lanes.iter().zip(&mounts) {
        assert_eq!(
            std::path::Path::new(&lane.path),
            mount.canonicalize().unwrap()
        );
        assert!(!lane.files.is_empty());
    }
    let ds = Dataset::open(&ds_dir).unwrap();
    assert!(
        ds.lane_file_path(1, 0)
            .starts_with(mounts[1].canonicalize().unwrap())
    );
    assert!(verify(&ds, |_| {}).is_ok());

    // A missing mount point is an error, not a directory silently created on the root fs.
    let err = DatasetWriter::create(
        root.path().join("ds2"),
        LaneSpec::Dirs(vec![root.path().join("nope")]),
        4096,
        attrs(),
        Provenance::default(),
    )
    .err()
    .unwrap();
    assert!(err.to_string().contains("does not exist"), "{err}");
    // The same directory twice defeats striping and is refused.
    let err = DatasetWriter::create(
        root.path().join("ds3"),
        LaneSpec::Dirs(vec![mounts[0].clone(), mounts[0].clone()]),
        4096,
        attrs(),
        Provenance::default(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(err, DatasetError::Usage(_)) && err.to_string().contains("same directory"),
        "{err}"
    );
}

#[test]
fn dataset_with_default_lanes_can_be_moved() {
    let root = tempfile::tempdir().unwrap();
    let a = root.path().join("a");
    let mut w = DatasetWriter::create(&a, LaneSpec::Count(2), 8192, attrs(), Provenance::default())
        .unwrap();
    w.push_frame_opaque(0.0, vec![vec![9; 50_000]]).unwrap();
    let m = w.finish().unwrap();
    assert_eq!(m.lanes[0].path, "lanes/0");
    let b = root.path().join("b");
    std::fs::rename(&a, &b).unwrap();
    let ds = Dataset::open(&b).unwrap();
    let mut buf = AlignedBuf::new();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    assert_eq!(&buf[..50_000], &vec![9; 50_000][..]);
    assert!(buf[50_000..].iter().all(|&x| x == 0));
}

#[test]
fn lanes_roll_over_to_new_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(2),
        4096,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    assert!(w.set_segment_size(100).is_err());
    w.set_segment_size(3 * 4096).unwrap();
    for f in 0..5 {
        w.push_frame_opaque(f64::from(f) * 0.1, vec![vec![f as u8; 5 * 4096]])
            .unwrap();
    }
    let m = w.finish().unwrap();
    // 25 chunks over 2 lanes at 3 chunks per segment: 13 and 12 chunks, 5 and 4 files.
    let files: Vec<usize> = m.lanes.iter().map(|l| l.files.len()).collect();
    assert_eq!(files, vec![5, 4]);
    assert!(
        m.lanes
            .iter()
            .flat_map(|l| &l.files)
            .all(|f| f.size <= 3 * 4096)
    );
    let ds = Dataset::open(dir.path()).unwrap();
    assert!(verify(&ds, |_| {}).is_ok());
    let mut buf = AlignedBuf::new();
    for f in 0..5 {
        ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
        assert!(buf.iter().all(|&x| x == f as u8));
    }
}

#[test]
fn writer_rejects_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let bad = |r: Result<DatasetWriter, DatasetError>| r.err().unwrap().to_string();
    assert!(
        bad(DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(1),
            1000,
            attrs(),
            Provenance::default()
        ))
        .contains("chunk size")
    );
    assert!(
        bad(DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(0),
            4096,
            attrs(),
            Provenance::default()
        ))
        .contains("lane count")
    );
    assert!(
        bad(DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(1),
            4096,
            vec![],
            Provenance::default()
        ))
        .contains("attribute")
    );
    assert!(
        bad(DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(1),
            4096,
            vec![AttributeSpec::new("a"), AttributeSpec::new("a")],
            Provenance::default()
        ))
        .contains("twice")
    );
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(1),
        4096,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    assert!(
        w.push_frame_opaque(f64::NAN, vec![vec![1]])
            .unwrap_err()
            .to_string()
            .contains("not finite")
    );
    assert!(
        w.push_frame_opaque(0.0, vec![vec![1], vec![2]])
            .unwrap_err()
            .to_string()
            .contains("2 grids given")
    );
    assert!(
        w.push_frame_opaque(0.0, vec![vec![]])
            .unwrap_err()
            .to_string()
            .contains("empty grid")
    );
    w.push_frame_opaque(1.0, vec![vec![1]]).unwrap();
    assert!(
        w.push_frame_opaque(1.0, vec![vec![1]])
            .unwrap_err()
            .to_string()
            .contains("not greater")
    );
    assert_eq!(w.finish().unwrap().frame_count, 1);
}
