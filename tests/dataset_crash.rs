//! Crash safety: an interrupted write never leaves a dataset that claims to be complete,
//! and the next writer removes what the interrupted one left behind.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use supercell::dataset::{
    AttributeSpec, CrashPoint, Dataset, DatasetError, DatasetWriter, LaneSpec, Provenance, verify,
};

const CHUNK: u64 = 8192;

fn attrs() -> Vec<AttributeSpec> {
    vec![AttributeSpec::new("density"), AttributeSpec::new("rain")]
}

fn frame(seed: u8) -> Vec<Vec<u8>> {
    vec![
        vec![seed; 20_000 + seed as usize],
        vec![seed.wrapping_add(1); 9_000],
    ]
}

/// Writes a complete dataset with `frames` frames whose bytes derive from `seed`.
fn write(dir: &Path, frames: u8, seed: u8) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(3),
        CHUNK,
        attrs(),
        Provenance::new("test", ["x"]),
    )
    .unwrap();
    for f in 0..frames {
        w.push_frame_opaque(f64::from(f), frame(seed + f)).unwrap();
    }
    w.finish().unwrap();
}

/// Opens, verifies, and checks frame 0 carries `seed`'s bytes.
fn assert_intact(dir: &Path, frames: usize, seed: u8) {
    let ds = Dataset::open(dir).unwrap();
    assert_eq!(ds.frame_count(), frames);
    let report = verify(&ds, |_| {});
    assert!(report.is_ok(), "{:?}", report.problems);
    let mut buf = supercell::dataset::AlignedBuf::new();
    ds.read_frame(0, &mut buf, supercell::dataset::CrcCheck::Verify)
        .unwrap();
    assert_eq!(buf[0], seed);
}

/// Every file under the lane directories.
fn lane_files(dir: &Path) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for lane in std::fs::read_dir(dir.join("lanes")).unwrap() {
        for f in std::fs::read_dir(lane.unwrap().path()).unwrap() {
            out.insert(f.unwrap().path());
        }
    }
    out
}

fn referenced(dir: &Path) -> BTreeSet<PathBuf> {
    let ds = Dataset::open(dir).unwrap();
    let m = ds.manifest();
    let mut out = BTreeSet::new();
    for (l, lane) in m.lanes.iter().enumerate() {
        for f in 0..lane.files.len() {
            out.insert(ds.lane_file_path(l as u32, f as u32));
        }
    }
    out
}

#[test]
fn no_manifest_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = Dataset::open(dir.path()).unwrap_err();
    assert!(matches!(err, DatasetError::Manifest { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("manifest.json") && msg.contains("not found"),
        "{msg}"
    );
}

#[test]
fn drop_without_finish_keeps_old_dataset_and_removes_temporaries() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 2, 10);
    let before = lane_files(dir.path());
    {
        let mut w = DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(3),
            CHUNK,
            attrs(),
            Provenance::default(),
        )
        .unwrap();
        w.push_frame_opaque(0.0, frame(50)).unwrap();
        w.push_frame_opaque(1.0, frame(51)).unwrap();
        // The old dataset stays readable while a rewrite is under way.
        assert_intact(dir.path(), 2, 10);
    }
    assert_intact(dir.path(), 2, 10);
    assert_eq!(lane_files(dir.path()), before);
    assert!(!dir.path().join(".supercell-write.intent").exists());
}

#[test]
fn failure_between_lane_rename_and_manifest_rename_keeps_old_dataset() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 2, 10);
    let before = lane_files(dir.path());
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(3),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    w.push_frame_opaque(0.0, frame(50)).unwrap();
    // A directory where the manifest temp goes makes writing it fail after the lane files
    // have their final names.
    std::fs::create_dir(dir.path().join("manifest.json.tmp")).unwrap();
    let err = w.finish().unwrap_err();
    assert!(err.to_string().contains("manifest.json.tmp"), "{err}");
    std::fs::remove_dir(dir.path().join("manifest.json.tmp")).unwrap();
    assert_intact(dir.path(), 2, 10);
    assert_eq!(lane_files(dir.path()), before);
}

#[test]
fn crash_before_manifest_rename_keeps_old_dataset_and_next_writer_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 2, 10);
    let old = lane_files(dir.path());
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(3),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    w.push_frame_opaque(0.0, frame(50)).unwrap();
    w.crash_at(CrashPoint::BeforeManifestRename);
    assert!(w.finish().is_err());
    // Orphans (final-named lane files of the dead write) exist, but the manifest is old.
    assert!(lane_files(dir.path()).len() > old.len());
    assert_intact(dir.path(), 2, 10);
    // The next writer's create recovers; even if it is then abandoned.
    drop(
        DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(3),
            CHUNK,
            attrs(),
            Provenance::default(),
        )
        .unwrap(),
    );
    assert_eq!(lane_files(dir.path()), old);
    assert_intact(dir.path(), 2, 10);
}

#[test]
fn crash_after_manifest_rename_gives_new_dataset_and_next_writer_removes_old_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 2, 10);
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(3),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    for f in 0..3 {
        w.push_frame_opaque(f64::from(f), frame(60 + f as u8))
            .unwrap();
    }
    w.crash_at(CrashPoint::AfterManifestRename);
    assert!(w.finish().is_err());
    assert_intact(dir.path(), 3, 60);
    assert!(lane_files(dir.path()).len() > referenced(dir.path()).len());
    drop(
        DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(3),
            CHUNK,
            attrs(),
            Provenance::default(),
        )
        .unwrap(),
    );
    assert_eq!(lane_files(dir.path()), referenced(dir.path()));
    assert_intact(dir.path(), 3, 60);
}

#[test]
fn rewrite_replaces_and_deletes_old_files() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 2, 10);
    let old = lane_files(dir.path());
    write(dir.path(), 4, 30);
    assert_intact(dir.path(), 4, 30);
    let now = lane_files(dir.path());
    assert!(old.is_disjoint(&now));
    assert_eq!(now, referenced(dir.path()));
}

#[test]
fn second_writer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let _w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(2),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    let err = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(2),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .err()
    .unwrap();
    assert!(matches!(err, DatasetError::Locked { .. }), "{err}");
}

/// The child half of `killed_writer_*`: runs only when the parent sets the variable.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("SUPERCELL_TEST_CRASH_DIR") else {
        return;
    };
    let mut w = DatasetWriter::create(
        &dir,
        LaneSpec::Count(3),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    w.push_frame_opaque(0.0, frame(50)).unwrap();
    w.push_frame_opaque(1.0, frame(51)).unwrap();
    // Die without unwinding: no Drop, no cleanup, lock released by the kernel.
    std::process::abort();
}

#[test]
fn killed_writer_leaves_old_dataset_and_next_writer_cleans_up() {
    let dir = tempfile::tempdir().unwrap();
    write(dir.path(), 2, 10);
    let old = lane_files(dir.path());
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env("SUPERCELL_TEST_CRASH_DIR", dir.path())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child should have aborted");
    assert!(
        lane_files(dir.path()).len() > old.len(),
        "the child left temporaries"
    );
    assert_intact(dir.path(), 2, 10);
    drop(
        DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(3),
            CHUNK,
            attrs(),
            Provenance::default(),
        )
        .unwrap(),
    );
    assert_eq!(lane_files(dir.path()), old);
}

#[test]
fn first_write_interrupted_leaves_no_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = DatasetWriter::create(
        dir.path(),
        LaneSpec::Count(2),
        CHUNK,
        attrs(),
        Provenance::default(),
    )
    .unwrap();
    w.push_frame_opaque(0.0, frame(1)).unwrap();
    w.crash_at(CrashPoint::BeforeManifestRename);
    assert!(w.finish().is_err());
    assert!(Dataset::open(dir.path()).is_err());
    drop(
        DatasetWriter::create(
            dir.path(),
            LaneSpec::Count(2),
            CHUNK,
            attrs(),
            Provenance::default(),
        )
        .unwrap(),
    );
    assert!(lane_files(dir.path()).is_empty());
}
