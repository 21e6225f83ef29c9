//! Directories handed over by someone else: a writer deletes or replaces only files it can
//! prove are its own, never follows a planted symbolic link, refuses another program's
//! `manifest.json`, and a reader opens only lane files of the dataset's naming pattern
//! without telling the sizes of files outside the dataset.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use supercell::dataset::{
    AttributeSpec, Dataset, DatasetError, DatasetWriter, LaneSpec, Provenance, verify,
};

const CHUNK: u64 = 8192;
const PRECIOUS: &[u8] = b"precious bytes that no dataset writer may touch";

fn create(dir: &Path, lanes: LaneSpec) -> supercell::dataset::Result<DatasetWriter> {
    DatasetWriter::create(
        dir,
        lanes,
        CHUNK,
        vec![AttributeSpec::new("density")],
        Provenance::new("test", ["x"]),
    )
}

/// Writes a small complete dataset at `dir` with default lanes.
fn write(dir: &Path, lanes: u32) {
    let mut w = create(dir, LaneSpec::Count(lanes)).unwrap();
    for f in 0..2u8 {
        w.push_frame_opaque(f64::from(f), vec![vec![f + 1; 3 * CHUNK as usize]])
            .unwrap();
    }
    w.finish().unwrap();
}

/// Writes a complete dataset at `dir` into `lanes` and checks it reads back.
fn rewrite(dir: &Path, lanes: LaneSpec) -> DatasetWriter {
    let mut w = create(dir, lanes).unwrap();
    w.push_frame_opaque(0.0, vec![vec![9; 2 * CHUNK as usize]])
        .unwrap();
    w
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn set_manifest(dir: &Path, v: &Value) {
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec(v).unwrap()).unwrap();
}

fn plant(path: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, PRECIOUS).unwrap();
}

fn assert_untouched(path: &Path) {
    assert_eq!(
        std::fs::read(path).unwrap_or_else(|e| panic!("{} is gone: {e}", path.display())),
        PRECIOUS,
        "{} was changed",
        path.display()
    );
}

/// Everything under `dir`, as relative paths with their contents (directories as `None`).
fn snapshot(dir: &Path) -> Vec<(PathBuf, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if p.is_dir() {
                stack.push(p);
                out.push((rel, None));
            } else {
                out.push((rel, Some(std::fs::read(&p).unwrap())));
            }
        }
    }
    out.sort();
    out
}

/// The manifest's first lane now says `lane_path` and its first file `name` (the
/// dataset's own file of that name stays where it was, unreferenced).
fn point_lane_elsewhere(ds: &Path, lane_path: &str, name: Option<&str>) -> String {
    let mut m = manifest(ds);
    m["lanes"][0]["path"] = json!(lane_path);
    if let Some(n) = name {
        m["lanes"][0]["files"][0]["name"] = json!(n);
    }
    set_manifest(ds, &m);
    m["lanes"][0]["files"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn replaced_manifest_naming_a_parent_directory_does_not_get_its_files_deleted() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    // Another file of any name, and one named like a lane file of the dataset.
    point_lane_elsewhere(&ds, "../v", Some("precious.txt"));
    let precious = root.path().join("v/precious.txt");
    plant(&precious);
    rewrite(&ds, LaneSpec::Count(2)).finish().unwrap();
    assert_untouched(&precious);

    let lane_named = point_lane_elsewhere(&ds, "../v", None);
    let lane_like = root.path().join("v").join(&lane_named);
    plant(&lane_like);
    let w = rewrite(&ds, LaneSpec::Count(2));
    assert!(
        w.left_alone().iter().any(|p| p.ends_with(&lane_named)),
        "{:?}",
        w.left_alone()
    );
    w.finish().unwrap();
    assert_untouched(&lane_like);
    assert!(verify(&Dataset::open(&ds).unwrap(), |_| {}).is_ok());
}

#[test]
fn replaced_manifest_naming_an_absolute_directory_does_not_get_its_files_deleted() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    let v = root.path().join("v");
    write(&ds, 2);
    point_lane_elsewhere(&ds, v.to_str().unwrap(), Some("precious.txt"));
    plant(&v.join("precious.txt"));
    rewrite(&ds, LaneSpec::Count(2)).finish().unwrap();
    assert_untouched(&v.join("precious.txt"));

    let name = point_lane_elsewhere(&ds, v.to_str().unwrap(), None);
    plant(&v.join(&name));
    rewrite(&ds, LaneSpec::Count(2)).finish().unwrap();
    assert_untouched(&v.join(&name));
}

#[test]
fn replaced_files_in_lane_directories_given_to_this_write_are_deleted() {
    // The rule's other side: files of the replaced dataset in this write's lane
    // directories, outside the dataset, are removed as before.
    let root = tempfile::tempdir().unwrap();
    let mounts: Vec<PathBuf> = (0..2).map(|i| root.path().join(format!("m{i}"))).collect();
    for m in &mounts {
        std::fs::create_dir_all(m).unwrap();
    }
    let ds = root.path().join("ds");
    let mut w = create(&ds, LaneSpec::Dirs(mounts.clone())).unwrap();
    w.push_frame_opaque(0.0, vec![vec![1; 3 * CHUNK as usize]])
        .unwrap();
    w.finish().unwrap();
    let old: Vec<PathBuf> = mounts
        .iter()
        .flat_map(|m| std::fs::read_dir(m).unwrap().map(|e| e.unwrap().path()))
        .collect();
    assert!(!old.is_empty());
    let w = rewrite(&ds, LaneSpec::Dirs(mounts.clone()));
    assert!(w.left_alone().is_empty(), "{:?}", w.left_alone());
    w.finish().unwrap();
    for p in &old {
        assert!(!p.exists(), "{} should have been replaced", p.display());
    }
}

#[test]
fn symlinked_lane_directory_inside_the_dataset_is_not_followed() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    // Lane 0 of the dataset now leads elsewhere, where a file of the listed name waits.
    let name = manifest(&ds)["lanes"][0]["files"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    let elsewhere = root.path().join("elsewhere");
    plant(&elsewhere.join(&name));
    std::fs::rename(ds.join("lanes/0"), root.path().join("old-lane0")).unwrap();
    symlink(&elsewhere, ds.join("lanes/0")).unwrap();

    // Default lanes through the link: refused, nothing written there or deleted.
    let err = create(&ds, LaneSpec::Count(2)).err().expect("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_untouched(&elsewhere.join(&name));
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 1);

    // Lanes elsewhere: the replaced dataset's `lanes/0` is not followed to delete.
    let mounts: Vec<PathBuf> = (0..2).map(|i| root.path().join(format!("m{i}"))).collect();
    for m in &mounts {
        std::fs::create_dir_all(m).unwrap();
    }
    rewrite(&ds, LaneSpec::Dirs(mounts)).finish().unwrap();
    assert_untouched(&elsewhere.join(&name));
}

#[test]
fn planted_symlink_at_a_default_lane_does_not_redirect_writes() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    let elsewhere = root.path().join("elsewhere");
    std::fs::create_dir_all(ds.join("lanes")).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    symlink(&elsewhere, ds.join("lanes/1")).unwrap();
    let err = create(&ds, LaneSpec::Count(2)).err().expect("refused");
    assert!(
        matches!(err, DatasetError::Usage(_)) && err.to_string().contains("lanes/1"),
        "{err}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);
}

#[test]
fn planted_intent_cannot_delete_files_outside_the_lanes() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    let m = manifest(&ds);
    let v = root.path().join("v");
    let precious = v.join("precious.txt");
    let lane_like = v.join("w1-L000-S00000.sclane");
    plant(&precious);
    plant(&lane_like);

    // "The write that committed this manifest was interrupted; delete what it replaced."
    let intent = json!({
        "write_id": m["write_id"],
        "lane_dirs": [v],
        "replaced_files": [precious, lane_like, ds.join("manifest.json")],
    });
    std::fs::write(
        ds.join(".supercell-write.intent"),
        serde_json::to_vec(&intent).unwrap(),
    )
    .unwrap();
    let w = create(&ds, LaneSpec::Count(2)).unwrap();
    assert!(w.left_alone().contains(&lane_like), "{:?}", w.left_alone());
    drop(w);
    assert_untouched(&precious);
    assert_untouched(&lane_like);
    assert!(Dataset::open(&ds).is_ok());

    // "An interrupted write w1 created files in these lane directories."
    let intent = json!({"write_id": "w1", "lane_dirs": [v], "replaced_files": []});
    std::fs::write(
        ds.join(".supercell-write.intent"),
        serde_json::to_vec(&intent).unwrap(),
    )
    .unwrap();
    drop(create(&ds, LaneSpec::Count(2)).unwrap());
    assert_untouched(&lane_like);
    assert!(!ds.join(".supercell-write.intent").exists());
}

#[test]
fn planted_symlinks_at_the_writers_own_names_are_not_followed() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    let target = root.path().join("target.txt");
    plant(&target);

    // The intent's temporary name: replaced, not written through.
    symlink(&target, ds.join(".supercell-write.intent.tmp")).unwrap();
    rewrite(&ds, LaneSpec::Count(2)).finish().unwrap();
    assert_untouched(&target);

    // The manifest's temporary name.
    symlink(&target, ds.join("manifest.json.tmp")).unwrap();
    rewrite(&ds, LaneSpec::Count(2)).finish().unwrap();
    assert_untouched(&target);
    assert!(Dataset::open(&ds).is_ok());

    // The lock: refused, and nothing is created where it points.
    std::fs::remove_file(ds.join(".supercell-write.lock")).unwrap();
    let nowhere = root.path().join("created-through-lock");
    symlink(&nowhere, ds.join(".supercell-write.lock")).unwrap();
    let err = create(&ds, LaneSpec::Count(2)).err().expect("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(!nowhere.exists());
    std::fs::remove_file(ds.join(".supercell-write.lock")).unwrap();

    // The intent itself: refused rather than read through.
    let outside_intent = root.path().join("intent.json");
    std::fs::write(
        &outside_intent,
        br#"{"write_id":"w1","lane_dirs":[],"replaced_files":[]}"#,
    )
    .unwrap();
    symlink(&outside_intent, ds.join(".supercell-write.intent")).unwrap();
    let err = create(&ds, LaneSpec::Count(2)).err().expect("refused");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert!(outside_intent.exists());
}

#[test]
fn foreign_manifest_is_refused_and_nothing_is_changed() {
    for text in [
        &br#"{"name": "my-web-app", "version": "1.0.0", "dependencies": {}}"#[..],
        b"[1, 2, 3]",
        b"not json at all",
        br#"{"format": "supercell-dataset", "version": 99}"#,
    ] {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("app");
        std::fs::create_dir_all(dir.join("lanes/0")).unwrap();
        std::fs::write(dir.join("manifest.json"), text).unwrap();
        std::fs::write(dir.join("lanes/0/data.bin"), PRECIOUS).unwrap();
        let before = snapshot(&dir);
        let err = create(&dir, LaneSpec::Count(2)).err().expect("refused");
        let msg = err.to_string();
        assert!(
            msg.contains(dir.join("manifest.json").to_str().unwrap())
                && msg.contains("not a supercell dataset"),
            "{msg}"
        );
        assert_eq!(snapshot(&dir), before, "{msg}");
    }
}

#[test]
fn damaged_supercell_manifest_is_replaced_without_deleting_anything() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    let mut m = manifest(&ds);
    m["frames"] = json!("garbage");
    set_manifest(&ds, &m);
    rewrite(&ds, LaneSpec::Count(2)).finish().unwrap();
    assert!(verify(&Dataset::open(&ds).unwrap(), |_| {}).is_ok());
}

#[test]
fn reader_opens_only_lane_files_of_the_pattern_and_hides_outside_sizes() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    let v = root.path().join("v");
    std::fs::create_dir_all(&v).unwrap();
    // 12345 bytes: an odd size, easy to spot in a message.
    std::fs::write(v.join("secret.txt"), vec![7u8; 12345]).unwrap();

    let mut m = manifest(&ds);
    m["lanes"][0]["path"] = json!(v);
    let good = m["lanes"][0]["files"][0]["name"]
        .as_str()
        .unwrap()
        .to_owned();
    m["lanes"][0]["files"][0]["name"] = json!("secret.txt");
    set_manifest(&ds, &m);
    let msg = Dataset::open(&ds).unwrap_err().to_string();
    assert!(msg.contains("naming pattern"), "{msg}");
    assert!(!msg.contains("12345"), "the error reveals the size: {msg}");

    // A file of the pattern outside the dataset, of the wrong size: named, size hidden.
    std::fs::write(v.join(&good), vec![7u8; 12345]).unwrap();
    m["lanes"][0]["files"][0]["name"] = json!(good);
    set_manifest(&ds, &m);
    let msg = Dataset::open(&ds).unwrap_err().to_string();
    assert!(msg.contains(&good), "{msg}");
    assert!(!msg.contains("12345"), "the error reveals the size: {msg}");
}

#[test]
fn reader_refuses_a_symlinked_lane_file() {
    let root = tempfile::tempdir().unwrap();
    let ds = root.path().join("ds");
    write(&ds, 2);
    let secret = root.path().join("secret.txt");
    std::fs::write(&secret, vec![7u8; 12345]).unwrap();
    let lane_file = Dataset::open(&ds).unwrap().lane_file_path(1, 0);
    std::fs::remove_file(&lane_file).unwrap();
    symlink(&secret, &lane_file).unwrap();
    let msg = Dataset::open(&ds).unwrap_err().to_string();
    assert!(msg.contains("symbolic link"), "{msg}");
    assert!(!msg.contains("12345"), "the error reveals the size: {msg}");
}
