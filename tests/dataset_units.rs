//! Units of attributes: written by the writer into `attributes[].units`, read back, left
//! out of manifests that have none (older ones still open), refused with the manifest's
//! name where they are not a short printable string, and printed by `supercell info`.

use std::path::Path;
use std::process::Command;

use serde_json::Value;
use supercell::dataset::{
    AttributeSpec, Dataset, DatasetError, DatasetWriter, LaneSpec, MAX_UNITS_BYTES, Provenance,
};

const CHUNK: u64 = 8192;

fn write(dir: &Path, units: [Option<&str>; 2]) -> supercell::dataset::Result<()> {
    let specs = ["qc", "dbz"]
        .iter()
        .zip(units)
        .map(|(n, u)| AttributeSpec::new(*n).with_units(u.map(str::to_owned)))
        .collect();
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(1),
        CHUNK,
        specs,
        Provenance::new("test", ["x"]),
    )?;
    w.push_frame_opaque(0.0, vec![vec![1; CHUNK as usize], vec![2; CHUNK as usize]])?;
    w.finish()?;
    Ok(())
}

fn manifest(dir: &Path) -> Value {
    serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap()
}

fn set_manifest(dir: &Path, v: &Value) {
    std::fs::write(dir.join("manifest.json"), serde_json::to_vec(v).unwrap()).unwrap();
}

#[test]
fn units_are_written_and_read_back_and_absent_ones_are_left_out() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), [Some("kg/kg"), None]).unwrap();
    let ds = Dataset::open(tmp.path()).unwrap();
    let attrs = &ds.manifest().attributes;
    assert_eq!(attrs[0].units.as_deref(), Some("kg/kg"));
    assert_eq!(attrs[1].units, None);
    let m = manifest(tmp.path());
    assert_eq!(m["attributes"][0]["units"], "kg/kg");
    assert!(
        m["attributes"][1].get("units").is_none(),
        "no unit is no key: {}",
        m["attributes"][1]
    );
}

#[test]
fn a_manifest_without_units_opens() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), [Some("kg/kg"), Some("dBZ")]).unwrap();
    let mut m = manifest(tmp.path());
    for a in m["attributes"].as_array_mut().unwrap() {
        a.as_object_mut().unwrap().remove("units");
    }
    set_manifest(tmp.path(), &m);
    let ds = Dataset::open(tmp.path()).unwrap();
    assert!(ds.manifest().attributes.iter().all(|a| a.units.is_none()));
}

#[test]
fn hostile_units_in_a_manifest_are_refused_naming_the_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), [Some("kg/kg"), None]).unwrap();
    let good = manifest(tmp.path());
    let long = "m".repeat(MAX_UNITS_BYTES + 1);
    for (units, why) in [
        ("kg\u{1b}[2J", "control character"),
        ("m/s\n", "control character"),
        (long.as_str(), "bytes long"),
        ("  ", "empty"),
    ] {
        let mut m = good.clone();
        m["attributes"][1]["units"] = Value::from(units);
        set_manifest(tmp.path(), &m);
        let Err(err) = Dataset::open(tmp.path()) else {
            panic!("{units:?} accepted");
        };
        let text = err.to_string();
        assert!(
            matches!(err, DatasetError::Manifest { .. }),
            "{units:?}: {text}"
        );
        assert!(
            text.contains("manifest.json")
                && text.contains("attributes[1].units")
                && text.contains(why),
            "{units:?}: {text}"
        );
    }
    let mut m = good.clone();
    m["attributes"][1]["units"] = Value::from(7);
    set_manifest(tmp.path(), &m);
    let Err(err) = Dataset::open(tmp.path()) else {
        panic!("a number as units accepted");
    };
    let text = err.to_string();
    assert!(
        text.contains("manifest.json") && text.contains("malformed"),
        "{text}"
    );
}

#[test]
fn the_writer_refuses_units_a_manifest_could_not_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let err = write(tmp.path(), [Some("kg\u{7}"), None])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"qc\"") && err.contains("control character"),
        "{err}"
    );
    assert!(!tmp.path().join("manifest.json").exists());
}

#[test]
fn info_prints_each_attributes_unit_beside_its_range_and_in_its_json() {
    let tmp = tempfile::tempdir().unwrap();
    write(tmp.path(), [Some("kg/kg"), None]).unwrap();
    // Opaque payloads record no value range: give the attributes one, as an import does.
    let mut m = manifest(tmp.path());
    m["attributes"][0]["value_range"] = serde_json::json!([0.0, 0.004]);
    m["attributes"][1]["value_range"] = serde_json::json!([-10.0, 70.0]);
    set_manifest(tmp.path(), &m);
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_supercell"))
            .arg("info")
            .arg(tmp.path())
            .arg("--no-verify")
            .args(extra)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    };
    let text = run(&[]);
    let qc = text
        .lines()
        .find(|l| l.trim_start().starts_with("qc"))
        .unwrap();
    assert!(qc.ends_with("values 0.0000 .. 0.0040 kg/kg"), "{text}");
    let dbz = text
        .lines()
        .find(|l| l.trim_start().starts_with("dbz"))
        .unwrap();
    assert!(dbz.ends_with("values -10.0000 .. 70.0000"), "{text}");
    let json: Value = serde_json::from_str(&run(&["--json"])).unwrap();
    assert_eq!(json["attributes"][0]["units"], "kg/kg");
    assert_eq!(
        json["attributes"][0]["value_range"],
        serde_json::json!([0.0, 0.004])
    );
    assert_eq!(json["attributes"][1]["units"], Value::Null);
    assert_eq!(json["frames"], 1);
}
