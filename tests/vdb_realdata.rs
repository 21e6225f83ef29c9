//! Every `.vdb` and `.nvdb` file in `../shared/realdata` (files written by Houdini, Blender,
//! Bifrost, OpenVDB 7, tinyvdb, NanoVDB and fVDB): each imports or is refused with a reason
//! naming what is unsupported, as the table below says file by file. Imported values,
//! active states, voxel sizes (per axis) and world positions equal python3-openvdb's at
//! sampled voxels (tests/crosscheck/openvdb_realdata.py); the double grid, which that binding
//! cannot read, is checked against Debian's `nanovdb_convert` (libopenvdb) instead, and the
//! `.nvdb` files against python3-openvdb reading `nanovdb_convert`'s `.vdb` of them.
//!
//! Skipped with a message where `../shared/realdata` is absent; the cross-checks are skipped
//! where python3-openvdb or the nanovdb tools are missing, unless
//! `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use supercell::dataset::{
    AlignedBuf, CrcCheck, Dataset, ImportOptions, ImportReport, LaneSpec, Manifest, Provenance,
    import_sequence,
};
use supercell::format::{Grid, Value, read_nvdb};

mod crosscheck_support;

const TEST: &str = "vdb_realdata";

/// What importing one file (alone, default options) must do.
enum Outcome {
    /// It imports these attributes, in this order; each `report` text appears in what the
    /// import reports (`skipped: ...`, `note: ...`, `narrowed: NAME`).
    Imports {
        attributes: &'static [&'static str],
        report: &'static [&'static str],
        /// Whether the voxels differ in size between axes.
        anisotropic: bool,
    },
    /// It is refused with an error containing each of these.
    Refused(&'static [&'static str]),
}

use Outcome::{Imports, Refused};

const MANTAFLOW_GAS: &[&str] = &[
    "velocity",
    "phi_obstacle",
    "phi_inflow",
    "phi_out",
    "velocity_previous",
    "phi_obstacle_inflow",
    "density",
    "shadow",
    "temperature",
    "flame",
    "color_r",
    "color_g",
    "color_b",
    "density_inflow",
    "emission",
    "temperature_inflow",
    "fuel",
    "react",
    "fuel_inflow",
    "react_inflow",
    "color_r_inflow",
    "color_g_inflow",
    "color_b_inflow",
];

const INT32_FLAGS_SKIPPED: &str = "skipped: \"flags\": grid type Tree_int32_5_4_3_HalfFloat";

/// Every file in realdata/vdb and realdata/nvdb, and what its import does.
const CASES: &[(&str, Outcome)] = &[
    (
        "vdb/bifrost_torus01_v224_blosc.vdb",
        Imports {
            attributes: &["voxel_fog_density"],
            report: &[],
            anisotropic: false,
        },
    ),
    (
        "vdb/blender28_smoke_000001_empty_grids.vdb",
        Imports {
            attributes: &["density", "shadow", "velocity"],
            report: &[
                "skipped: \"obstacles\": grid type Tree_int32_5_4_3 is not read",
                "grid \"density\" holds no active voxels",
                "grid \"velocity\" holds no active voxels",
            ],
            anisotropic: true,
        },
    ),
    (
        "vdb/blender_mantaflow_liquid/fluid_data_0001.vdb",
        Imports {
            attributes: &[
                "velocity",
                "phi_obstacle",
                "phi_inflow",
                "phi_out",
                "velocity_previous",
                "phi_particles",
                "phi",
                "phi_previous",
            ],
            report: &[
                INT32_FLAGS_SKIPPED,
                "skipped: \"particles\": grid type Tree_ptdataidx32_5_4_3_HalfFloat",
            ],
            anisotropic: false,
        },
    ),
    (
        "vdb/blender_mantaflow_particles_velocity_only_0050.vdb",
        Imports {
            attributes: &["velocity"],
            report: &["skipped: \"particles\": grid type Tree_ptdataidx32_5_4_3_HalfFloat"],
            anisotropic: false,
        },
    ),
    (
        "vdb/blender_mantaflow_smoke_fire/fluid_data_0001.vdb",
        Imports {
            attributes: MANTAFLOW_GAS,
            report: &[INT32_FLAGS_SKIPPED, "grid \"flame\" holds no active voxels"],
            anisotropic: false,
        },
    ),
    (
        "vdb/blender_mantaflow_smoke_fire/fluid_data_0002.vdb",
        Imports {
            attributes: MANTAFLOW_GAS,
            report: &[INT32_FLAGS_SKIPPED],
            anisotropic: false,
        },
    ),
    (
        "vdb/blender_mantaflow_smoke_fire/fluid_data_0003.vdb",
        Imports {
            attributes: MANTAFLOW_GAS,
            report: &[INT32_FLAGS_SKIPPED],
            anisotropic: false,
        },
    ),
    (
        "vdb/houdini20.5_three_density_grids_blosc.vdb",
        Imports {
            attributes: &["density", "density#1", "density#2"],
            report: &[],
            anisotropic: false,
        },
    ),
    (
        "vdb/houdini_sopwrite_smoke_v222_zip_half.vdb",
        Imports {
            attributes: &["density"],
            report: &[],
            anisotropic: false,
        },
    ),
    (
        "vdb/openusd_densityAndHeat_aniso_localspace.vdb",
        Imports {
            attributes: &["density", "heat"],
            report: &[],
            anisotropic: true,
        },
    ),
    (
        "vdb/openusd_smoke_000002_aniso.vdb",
        Imports {
            attributes: &["density"],
            report: &[],
            anisotropic: true,
        },
    ),
    (
        "vdb/openusd_smoke_000003_aniso.vdb",
        Imports {
            attributes: &["density"],
            report: &[],
            anisotropic: true,
        },
    ),
    (
        "vdb/openvdb7_smoke_double_grid.vdb",
        Imports {
            attributes: &["density"],
            report: &["narrowed: density"],
            anisotropic: false,
        },
    ),
    (
        "vdb/tinyvdb090_resave_houdini_smoke_zip.vdb",
        Imports {
            attributes: &["density"],
            report: &["note: ", "block offset 184 is not where the topology ends"],
            anisotropic: false,
        },
    ),
    (
        "nvdb/fvdb_tests_smoke-blosc.nvdb",
        Imports {
            attributes: &["grid0"],
            report: &[],
            anisotropic: false,
        },
    ),
    (
        "nvdb/fvdb_tests_batch.nvdb",
        Refused(&["grid 0 of 4 (\"z\")", "NanoVDB checksum mismatch"]),
    ),
];

fn realdata() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/realdata");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("SKIPPED {TEST}: {} is absent", dir.display());
        None
    }
}

/// Every `.vdb`/`.nvdb` under `dir`, relative to it.
fn volume_files(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else if matches!(p.extension().and_then(|x| x.to_str()), Some("vdb" | "nvdb")) {
                let rel = p.strip_prefix(dir).unwrap();
                out.insert(rel.to_string_lossy().into_owned());
            }
        }
    }
    out
}

fn import(
    files: &[PathBuf],
    out: &Path,
    options: &ImportOptions,
) -> Result<(Manifest, ImportReport), String> {
    import_sequence(
        files,
        out,
        LaneSpec::Count(1),
        1 << 20,
        None,
        Provenance::default(),
        options,
        |_| {},
    )
    .map_err(|e| e.to_string())
}

/// What an import reported, one line per item, in the words the table uses.
fn report_text(r: &ImportReport) -> String {
    let mut lines: Vec<String> = r.skipped.iter().map(|s| format!("skipped: {s}")).collect();
    lines.extend(r.notes.iter().map(|n| format!("note: {n}")));
    lines.extend(r.narrowed.iter().map(|(n, _)| format!("narrowed: {n}")));
    lines.join("\n")
}

/// Imports every file alone and checks the table; returns the imported datasets (file,
/// dataset directory).
fn import_all(root: &Path, tmp: &Path) -> Vec<(String, PathBuf)> {
    let found = volume_files(root);
    let listed: BTreeSet<String> = CASES.iter().map(|c| c.0.to_string()).collect();
    assert_eq!(
        found, listed,
        "realdata's .vdb/.nvdb files and this test's table differ: give each file its outcome"
    );
    let mut imported = Vec::new();
    for (i, (file, outcome)) in CASES.iter().enumerate() {
        let out = tmp.join(format!("ds{i}"));
        let result = import(&[root.join(file)], &out, &ImportOptions::default());
        match (outcome, result) {
            (
                Imports {
                    attributes,
                    report,
                    anisotropic,
                },
                Ok((m, r)),
            ) => {
                let names: Vec<&str> = m.attributes.iter().map(|a| a.name.as_str()).collect();
                assert_eq!(&names, attributes, "{file}");
                let text = report_text(&r);
                for want in *report {
                    assert!(text.contains(want), "{file}: {want:?} not in:\n{text}");
                }
                if report.is_empty() {
                    assert!(text.is_empty(), "{file} reported:\n{text}");
                }
                for a in &m.attributes {
                    let Some(v) = a.voxel_size else { continue };
                    let aniso = v[0] != v[1] || v[0] != v[2];
                    assert_eq!(aniso, *anisotropic, "{file} {}: voxel size {v:?}", a.name);
                }
                imported.push((file.to_string(), out));
            }
            (Refused(words), Err(e)) => {
                assert!(e.contains(file), "{file}: the error does not name it: {e}");
                for w in *words {
                    assert!(e.contains(w), "{file}: {w:?} not in: {e}");
                }
                assert!(!e.contains("panicked"), "{e}");
            }
            (Imports { .. }, Err(e)) => panic!("{file} was refused: {e}"),
            (Refused(_), Ok(_)) => panic!("{file} imported; the table says it is refused"),
        }
    }
    imported
}

#[test]
fn every_realdata_volume_imports_or_is_refused_by_name() {
    let Some(root) = realdata() else { return };
    let tmp = tempfile::tempdir().unwrap();
    import_all(&root, tmp.path());

    // The two OpenUSD frames import as one sequence (same per-axis voxel size per frame).
    let frames: Vec<PathBuf> = [
        "vdb/openusd_smoke_000002_aniso.vdb",
        "vdb/openusd_smoke_000003_aniso.vdb",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    // The second has no class metadata: it takes the first's, with a note.
    let (m, r) = import(&frames, &tmp.path().join("seq"), &ImportOptions::default()).unwrap();
    assert_eq!(m.frame_count(), 2);
    assert_eq!(
        m.attributes[0].grid_class,
        supercell::format::GridClass::FogVolume
    );
    assert!(
        r.notes.len() == 1 && r.notes[0].contains("has no class; imported as FOG"),
        "{:?}",
        r.notes
    );

    // `--grid`: the second of three grids named density, by the name the manifest lists.
    let three = root.join("vdb/houdini20.5_three_density_grids_blosc.vdb");
    let only = ImportOptions {
        grids: Some(vec!["density#1".into()]),
        ..ImportOptions::default()
    };
    let (m, _) = import(std::slice::from_ref(&three), &tmp.path().join("one"), &only).unwrap();
    assert_eq!(m.attributes.len(), 1);
    assert_eq!(m.attributes[0].name, "density#1");
    let ds = Dataset::open(tmp.path().join("one")).unwrap();
    let mut buf = AlignedBuf::new();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    let g = Grid::parse(ds.grid_bytes(0, 0, &buf).unwrap()).unwrap();
    // Houdini placed the second grid at x = 2 (the first at 4, the third at 0).
    assert_eq!(g.map().apply([0.0; 3]), [2.0, 0.0, 0.0]);
    assert_eq!(g.active_voxel_count(), 2222);
    let missing = ImportOptions {
        grids: Some(vec!["density#3".into()]),
        ..ImportOptions::default()
    };
    let e = import(&[three], &tmp.path().join("none"), &missing).unwrap_err();
    assert!(
        e.contains("\"density#3\"") && e.contains("density, density#1, density#2"),
        "{e}"
    );

    // fVDB's batch: four grids under one metadata record, each with a checksum that does not
    // match; imported with --allow-bad-checksum, their checksums cleared and noted.
    let batch = root.join("nvdb/fvdb_tests_batch.nvdb");
    let allow = ImportOptions {
        allow_bad_checksum: true,
        ..ImportOptions::default()
    };
    let (m, r) = import(&[batch], &tmp.path().join("batch"), &allow).unwrap();
    let names: Vec<&str> = m.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["z", "z#1", "z#2", "z#3"]);
    assert_eq!(r.notes.len(), 4, "{:?}", r.notes);
    assert!(r.notes[3].contains("grid 3 of 4") && r.notes[3].contains("checksum cleared"));
}

/// Grid names as the cross-check script takes them: the attribute name, or `@I` for an
/// unnamed grid (`grid0`) of a converted `.nvdb`.
fn script_name(name: &str) -> String {
    match name
        .strip_prefix("grid")
        .and_then(|i| i.parse::<usize>().ok())
    {
        Some(i) => format!("@{i}"),
        None => name.to_string(),
    }
}

/// `nanovdb_convert IN OUT`, or `None` after reporting the skip.
fn nanovdb_convert(args: &[&Path]) -> Option<()> {
    match Command::new("nanovdb_convert")
        .arg("-f")
        .args(args)
        .output()
    {
        Ok(o) if o.status.success() => Some(()),
        Ok(o) => panic!(
            "nanovdb_convert {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => {
            crosscheck_support::skip(TEST, &format!("cannot run nanovdb_convert: {e}"));
            None
        }
    }
}

use crosscheck_support::floats;

/// Compares one imported grid with OpenVDB's report of the same grid.
fn compare(what: &str, g: &Grid<'_>, voxel_size: Option<[f64; 3]>, r: &serde_json::Value) {
    let vs = floats(&r["voxel_size"]);
    if let Some(v) = voxel_size {
        // Exactly the file's numbers: no digits lost, none invented.
        assert_eq!(v.to_vec(), vs, "{what}: voxel size");
    }
    for pair in r["index_to_world"].as_array().unwrap() {
        let ijk = floats(&pair[0]);
        let want = floats(&pair[1]);
        let got = g.map().apply([ijk[0], ijk[1], ijk[2]]);
        for a in 0..3 {
            assert!(
                (got[a] - want[a]).abs() <= 1e-12 * (1.0 + want[a].abs()),
                "{what}: index {ijk:?} is at {got:?}, OpenVDB says {want:?}"
            );
        }
    }
    let points = crosscheck_support::points(r);
    let values = r["values"].as_array().unwrap();
    let active = r["active"].as_array().unwrap();
    let mut acc = g.accessor();
    let mut on = 0;
    for (i, p) in points.iter().enumerate() {
        let Value::Float(v) = acc.value(*p).unwrap() else {
            panic!("{what}: not a float grid");
        };
        match &values[i] {
            serde_json::Value::Array(c) => {
                let len = c
                    .iter()
                    .map(|x| x.as_f64().unwrap().powi(2))
                    .sum::<f64>()
                    .sqrt();
                assert!(
                    (f64::from(v) - len).abs() <= 1e-6 * len.max(1.0),
                    "{what} at {p:?}: {v} vs OpenVDB's vector length {len}"
                );
            }
            x => assert_eq!(v, x.as_f64().unwrap() as f32, "{what} at {p:?}"),
        }
        let want_on = active[i].as_bool().unwrap();
        assert_eq!(acc.is_active(*p), want_on, "{what} at {p:?}: active");
        on += usize::from(want_on);
    }
    let count = r["active_count"].as_u64().unwrap();
    assert_eq!(g.active_voxel_count(), count, "{what}: active voxels");
    assert!(count == 0 || on > 0, "{what}: no sampled point is active");
}

#[test]
fn imported_values_equal_openvdbs() {
    let Some(root) = realdata() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let imported = import_all(&root, tmp.path());
    // OpenVDB reads the .vdb files; the .nvdb ones via nanovdb_convert's .vdb of them.
    let mut sources = Vec::new();
    for (file, ds) in &imported {
        let source = if file.ends_with(".nvdb") {
            let vdb = tmp.path().join(file.replace('/', "_") + ".vdb");
            let Some(()) = nanovdb_convert(&[&root.join(file), &vdb]) else {
                return;
            };
            vdb
        } else if file.contains("double") {
            continue; // python3-openvdb has no DoubleGrid: checked below
        } else {
            root.join(file)
        };
        sources.push((file.clone(), ds.clone(), source));
    }
    let mut args: Vec<String> = vec![tmp.path().join("openvdb.json").display().to_string()];
    for (_, ds, source) in &sources {
        let m = Dataset::open(ds).unwrap();
        args.push(source.display().to_string());
        args.extend(m.manifest().attributes.iter().map(|a| script_name(&a.name)));
        args.push("--".into());
    }
    args.pop();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crosscheck/openvdb_realdata.py");
    match Command::new("/usr/bin/python3")
        .arg(script)
        .args(&args)
        .status()
    {
        Ok(s) if s.code() == Some(3) => {
            crosscheck_support::skip(TEST, "/usr/bin/python3 cannot import pyopenvdb");
            return;
        }
        Ok(s) => assert!(s.success(), "openvdb_realdata.py failed"),
        Err(e) => {
            crosscheck_support::skip(TEST, &format!("cannot run /usr/bin/python3: {e}"));
            return;
        }
    }
    let text = std::fs::read_to_string(tmp.path().join("openvdb.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut buf = AlignedBuf::new();
    let mut checked = 0;
    for (file, ds, source) in &sources {
        let ds = Dataset::open(ds).unwrap();
        ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
        let report = &json[source.display().to_string()];
        for (a, attr) in ds.manifest().attributes.iter().enumerate() {
            let g = Grid::parse(ds.grid_bytes(0, a, &buf).unwrap()).unwrap();
            let r = &report[script_name(&attr.name)];
            compare(&format!("{file} {}", attr.name), &g, attr.voxel_size, r);
            checked += 1;
        }
    }
    assert!(checked >= 70, "only {checked} grids compared");
    double_grid_equals_libopenvdbs(&root, tmp.path(), &imported);
}

/// The double grid, read by libopenvdb (nanovdb_convert keeps it double): every value the
/// import stored is the nearest float to libopenvdb's double, and the reported rounding
/// error is the largest over the grid's values.
fn double_grid_equals_libopenvdbs(root: &Path, tmp: &Path, imported: &[(String, PathBuf)]) {
    let file = "vdb/openvdb7_smoke_double_grid.vdb";
    let nvdb = tmp.join("double.nvdb");
    if nanovdb_convert(&[&root.join(file), &nvdb]).is_none() {
        return;
    }
    let reference = read_nvdb(&nvdb).unwrap();
    let r = reference[0].grid().unwrap();
    let (_, ds) = imported.iter().find(|(f, _)| f == file).unwrap();
    let ds = Dataset::open(ds).unwrap();
    let mut buf = AlignedBuf::new();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    let g = Grid::parse(ds.grid_bytes(0, 0, &buf).unwrap()).unwrap();
    assert_eq!(g.active_voxel_count(), r.active_voxel_count());
    assert_eq!(ds.manifest().attributes[0].voxel_size, Some(r.voxel_size()));
    let mut acc = g.accessor();
    let mut worst = 0f64;
    let mut n = 0;
    for leaf in r.leaves() {
        for i in 0..512 {
            let Value::Double(d) = leaf.value(i).unwrap() else {
                panic!("nanovdb_convert did not keep the grid double");
            };
            worst = worst.max((d - f64::from(d as f32)).abs());
            let o = leaf.origin();
            let ijk = [
                o[0] + (i >> 6) as i32,
                o[1] + (i >> 3 & 7) as i32,
                o[2] + (i & 7) as i32,
            ];
            assert_eq!(acc.value(ijk).unwrap(), Value::Float(d as f32), "{ijk:?}");
            n += 1;
        }
    }
    assert!(n >= 500_000, "{n} values compared");
    let tmp2 = tmp.join("double_again");
    let (_, report) = import(&[root.join(file)], &tmp2, &ImportOptions::default()).unwrap();
    assert_eq!(report.narrowed.len(), 1);
    let (name, reported) = &report.narrowed[0];
    assert_eq!(name, "density");
    assert!(worst > 0.0);
    assert_eq!(*reported, worst, "the reported error is the largest");
}
