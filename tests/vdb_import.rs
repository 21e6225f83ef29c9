//! OpenVDB import, cross-checked against OpenVDB itself: tests/crosscheck/openvdb_write.py
//! writes `.vdb` files with Debian's `python3-openvdb` (negative coordinates, active tiles
//! at two node levels, a level set with inactive interior tiles, a half-float grid, a Vec3s
//! grid, several grids per file, OpenVDB's default Blosc + active-mask compression) and
//! reports OpenVDB's values at sample points. Imported as Float, values and active states
//! equal OpenVDB's; as Fp16/Fp8, within the quantisation error `import` reports.
//! Skipped with a printed reason where python3-openvdb is missing, unless
//! `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI), where that is a failure.

use std::path::{Path, PathBuf};

use supercell::dataset::{
    AlignedBuf, CrcCheck, Dataset, ImportOptions, LaneSpec, Provenance, import_sequence,
};
use supercell::format::openvdb::{VdbClass, VdbValueType, read_vdb, read_vdb_bytes};
use supercell::format::{Coord, Grid, GridClass, GridType, Value};

mod crosscheck_support;

const TEST: &str = "openvdb_import";

struct Reference {
    points: Vec<Coord>,
    frames: Vec<serde_json::Value>,
}

/// OpenVDB's files and values, or `None` (after reporting the skip).
fn openvdb_files(dir: &Path) -> Option<Reference> {
    let json = crosscheck_support::run_writer(
        TEST,
        "/usr/bin/python3",
        "openvdb_write.py",
        dir,
        "openvdb.json",
        "/usr/bin/python3 cannot import pyopenvdb (apt install python3-openvdb)",
    )?;
    let points = crosscheck_support::points(&json);
    Some(Reference {
        points,
        frames: json["frames"].as_array().unwrap().clone(),
    })
}

use crosscheck_support::floats;

const NAMES: [&str; 4] = ["density", "sphere", "smoke", "velocity"];

fn import(dir: &Path, grid_type: GridType) -> (Dataset, supercell::dataset::ImportReport) {
    let files: Vec<PathBuf> = (0..2)
        .map(|f| dir.join(format!("frame_{f:03}.vdb")))
        .collect();
    let out = dir.join(format!("ds_{grid_type}"));
    let options = ImportOptions {
        vdb_grid_type: grid_type,
        ..ImportOptions::default()
    };
    let (_, report) = import_sequence(
        &files,
        &out,
        LaneSpec::Count(2),
        1 << 20,
        None,
        Provenance::default(),
        &options,
        |_| {},
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (Dataset::open(&out).unwrap(), report)
}

#[test]
fn openvdb_files_import_with_openvdbs_values() {
    let dir = tempfile::tempdir().unwrap();
    let Some(reference) = openvdb_files(dir.path()) else {
        return;
    };
    read_grids_as_openvdb_wrote_them(dir.path(), &reference);
    let attrs = float_import_is_exact(dir.path(), &reference);
    quantised_imports_stay_within_their_reported_error(dir.path(), &reference, &attrs);
    vector_components_import_exact(dir.path(), &reference);
}

/// The reader itself: grids, types, classes, transforms.
fn read_grids_as_openvdb_wrote_them(dir: &Path, reference: &Reference) {
    let file = read_vdb(dir.join("frame_000.vdb")).unwrap();
    assert!(file.skipped.is_empty());
    let names: Vec<&str> = file.grids.iter().map(|g| g.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    let mut expected = NAMES.to_vec();
    expected.sort();
    assert_eq!(sorted, expected);
    for g in &file.grids {
        let (t, class, half) = match g.name.as_str() {
            "density" => (VdbValueType::Float, VdbClass::FogVolume, false),
            "sphere" => (VdbValueType::Float, VdbClass::LevelSet, false),
            "smoke" => (VdbValueType::Float, VdbClass::FogVolume, true),
            _ => (VdbValueType::Vec3s, VdbClass::Unknown, false),
        };
        assert_eq!(
            (g.value_type, g.class, g.saved_as_half),
            (t, class, half),
            "{}",
            g.name
        );
        let r = &reference.frames[0][&g.name];
        assert_eq!(
            g.transform.scale.to_vec(),
            floats(&r["voxel_size"]),
            "{}",
            g.name
        );
        assert_eq!(
            g.transform.translation.to_vec(),
            floats(&r["translation"]),
            "{}",
            g.name
        );
        assert!(
            r["compression"].as_str().unwrap().contains("blosc"),
            "OpenVDB's default codec changed: {}",
            r["compression"]
        );
    }
    let density = file.grids.iter().find(|g| g.name == "density").unwrap();
    assert!(density.tiles.iter().any(|t| t.size == 128 && t.active));
    assert!(density.tiles.iter().any(|t| t.size == 8 && t.active));
    let sphere = file.grids.iter().find(|g| g.name == "sphere").unwrap();
    assert!(sphere.tiles.iter().any(|t| !t.active && t.value[0] < 0.0));
}

/// Imported as Float: values and active states exact (vector lengths to rounding). Returns
/// the attributes' names.
fn float_import_is_exact(dir: &Path, reference: &Reference) -> Vec<String> {
    let (ds, report) = import(dir, GridType::Float);
    assert!(report.max_abs_error.is_empty());
    assert_eq!(report.vector_magnitudes, vec!["velocity".to_string()]);
    let mut buf = AlignedBuf::new();
    let attrs: Vec<String> = ds
        .manifest()
        .attributes
        .iter()
        .map(|a| a.name.clone())
        .collect();
    for frame in 0..2 {
        ds.read_frame(frame, &mut buf, CrcCheck::Verify).unwrap();
        for (a, name) in attrs.iter().enumerate() {
            let r = &reference.frames[frame][name];
            let values = floats(&r["values"]);
            let active: Vec<bool> = r["active"]
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_bool().unwrap())
                .collect();
            let g = Grid::parse(ds.grid_bytes(frame, a, &buf).unwrap()).unwrap();
            assert_eq!(g.grid_type(), GridType::Float);
            let class = match name.as_str() {
                "sphere" => GridClass::LevelSet,
                "velocity" => GridClass::Unknown,
                _ => GridClass::FogVolume,
            };
            assert_eq!(g.grid_class(), class, "{name}");
            let vs = floats(&r["voxel_size"]);
            assert_eq!(g.voxel_size()[0], vs[0], "{name}");
            let origin = g.map().apply([0.0; 3]);
            let t = floats(&r["translation"]);
            for i in 0..3 {
                assert!(
                    (origin[i] - t[i]).abs() < 1e-12,
                    "{name}: {origin:?} vs {t:?}"
                );
            }
            let mut acc = g.accessor();
            let mut set = 0;
            for (i, p) in reference.points.iter().enumerate() {
                let Value::Float(v) = acc.value(*p).unwrap() else {
                    panic!("{name}: not a float grid");
                };
                let want = values[i] as f32;
                if name == "velocity" {
                    assert!(
                        (v - want).abs() <= 1e-6 * want.abs().max(1.0),
                        "{name} frame {frame} at {p:?}: {v} vs OpenVDB's length {want}"
                    );
                } else {
                    assert_eq!(v, want, "{name} frame {frame} at {p:?}");
                }
                assert_eq!(
                    acc.is_active(*p),
                    active[i],
                    "{name} frame {frame} at {p:?}"
                );
                set += usize::from(active[i]);
            }
            assert!(set > 0, "{name}: no sampled point is active");
        }
    }
    attrs
}

/// Fp16 and Fp8: within the reported error, which is larger for Fp8.
fn quantised_imports_stay_within_their_reported_error(
    dir: &Path,
    reference: &Reference,
    attrs: &[String],
) {
    let mut buf = AlignedBuf::new();
    let mut reported = Vec::new();
    for t in [GridType::Fp16, GridType::Fp8] {
        let (ds, report) = import(dir, t);
        assert_eq!(report.max_abs_error.len(), 4, "{t}");
        ds.read_frame(1, &mut buf, CrcCheck::Verify).unwrap();
        for (a, name) in attrs.iter().enumerate() {
            let err = report
                .max_abs_error
                .iter()
                .find(|(n, _)| n == name)
                .unwrap()
                .1;
            assert!(err > 0.0 && err < 1.0, "{t} {name}: {err}");
            let r = &reference.frames[1][name];
            let values = floats(&r["values"]);
            let g = Grid::parse(ds.grid_bytes(1, a, &buf).unwrap()).unwrap();
            assert_eq!(g.grid_type(), t);
            let mut acc = g.accessor();
            for (i, p) in reference.points.iter().enumerate() {
                if !acc.is_active(*p) {
                    continue;
                }
                let v = acc.value(*p).unwrap().as_f64().unwrap();
                assert!(
                    (v - values[i]).abs() <= err + 1e-5,
                    "{t} {name} at {p:?}: {v} vs {} (reported error {err})",
                    values[i]
                );
            }
            reported.push((t, name.clone(), err));
        }
    }
    for name in attrs {
        let e = |t| {
            reported
                .iter()
                .find(|r| r.0 == t && &r.1 == name)
                .unwrap()
                .2
        };
        assert!(e(GridType::Fp8) > e(GridType::Fp16), "{name}");
    }
}

/// Vector components as attributes of their own, exact.
fn vector_components_import_exact(dir: &Path, reference: &Reference) {
    let mut buf = AlignedBuf::new();
    let files: Vec<PathBuf> = (0..2)
        .map(|f| dir.join(format!("frame_{f:03}.vdb")))
        .collect();
    let out = dir.join("ds_components");
    let options = ImportOptions {
        vector_components: true,
        ..ImportOptions::default()
    };
    let (manifest, _) = import_sequence(
        &files,
        &out,
        LaneSpec::Count(1),
        1 << 20,
        None,
        Provenance::default(),
        &options,
        |_| {},
    )
    .unwrap();
    let names: Vec<&str> = manifest
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names.len(), 7, "{names:?}");
    let ds = Dataset::open(&out).unwrap();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    let comps = reference.frames[0]["velocity"]["components"]
        .as_array()
        .unwrap();
    for (axis, suffix) in ["x", "y", "z"].iter().enumerate() {
        let a = names
            .iter()
            .position(|n| *n == format!("velocity.{suffix}"))
            .unwrap();
        let g = Grid::parse(ds.grid_bytes(0, a, &buf).unwrap()).unwrap();
        let mut acc = g.accessor();
        for (i, p) in reference.points.iter().enumerate() {
            let want = comps[i][axis].as_f64().unwrap() as f32;
            assert_eq!(
                acc.value(*p).unwrap(),
                Value::Float(want),
                "velocity.{suffix} at {p:?}"
            );
        }
    }
}

/// Transforms that cannot be stored, cuts and flipped bytes: clear errors, never a panic.
#[test]
fn unsupported_and_broken_openvdb_files_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    if openvdb_files(dir.path()).is_none() {
        return;
    }
    let e = read_vdb(dir.path().join("rotated.vdb"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("rotated.vdb") && e.contains("rotation"), "{e}");
    // Anisotropic voxels are read, and imported with their voxel size per axis.
    let aniso = dir.path().join("anisotropic.vdb");
    let file = read_vdb(&aniso).unwrap();
    assert_eq!(file.grids[0].transform.scale, [1.0, 2.0, 1.0]);
    let (manifest, _) = import_sequence(
        &[aniso],
        dir.path().join("ds"),
        LaneSpec::Count(1),
        1 << 20,
        None,
        Provenance::default(),
        &ImportOptions::default(),
        |_| {},
    )
    .unwrap();
    assert_eq!(manifest.attributes[0].voxel_size, Some([1.0, 2.0, 1.0]));
    let ds = Dataset::open(dir.path().join("ds")).unwrap();
    let mut buf = AlignedBuf::new();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    let g = Grid::parse(ds.grid_bytes(0, 0, &buf).unwrap()).unwrap();
    // OpenVDB's value at (1, 2, 3) is at world (1 + 5, 2 * 2, 3).
    assert_eq!(g.map().apply([1.0, 2.0, 3.0]), [6.0, 4.0, 3.0]);
    assert_eq!(g.accessor().value([1, 2, 3]).unwrap(), Value::Float(1.0));

    let good = std::fs::read(dir.path().join("small.vdb")).unwrap();
    let file = read_vdb_bytes(&good).unwrap();
    assert_eq!(file.grids.len(), 4);
    let n = good.len();
    for cut in (0..n).step_by(n / 250 + 1).chain([n - 1]) {
        let e = read_vdb_bytes(&good[..cut]);
        assert!(e.is_err(), "cut at {cut} read");
    }
    let mut b = good.clone();
    for off in (0..n).step_by(n / 600 + 1) {
        b[off] ^= 0x5a;
        let _ = read_vdb_bytes(&b);
        b[off] = 0xff;
        let _ = read_vdb_bytes(&b);
        b[off] = good[off];
    }
}
