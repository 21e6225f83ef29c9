//! `supercell-data import` of CM1 and WRF netCDF output written by Debian's python3-netcdf4
//! (tests/crosscheck/netcdf_write.py): the stored voxels against values the script computes
//! itself (linear in z per column, staggered variables averaged, perturbations, wind speed,
//! backgrounds), frame times from the files, the grid's placement, the scene `--scene`
//! writes, refusals that name the file and variable, and CF-encoded variables (packing, fill
//! and missing values, valid ranges) against netCDF4-python's decoding. Skipped with a printed reason where
//! python3-netcdf4 is missing, unless `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI).

mod netcdf_reference;

use std::path::Path;
use std::process::{Command, Output};

use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
use supercell::format::{Grid, Value};
use supercell::scene::Scene;

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .args(args)
        .output()
        .expect("run supercell-data")
}

fn netcdf_files(dir: &Path) -> Option<serde_json::Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/crosscheck/netcdf_write.py");
    let reason = match Command::new("/usr/bin/python3")
        .arg(script)
        .arg(dir)
        .status()
    {
        Ok(s) if s.success() => {
            let text = std::fs::read_to_string(dir.join("netcdf.json")).unwrap();
            return Some(serde_json::from_str(&text).unwrap());
        }
        Ok(s) if s.code() == Some(3) => {
            "/usr/bin/python3 cannot import netCDF4 (apt install python3-netcdf4)".to_string()
        }
        Ok(s) => panic!("netcdf_write.py failed: {s}"),
        Err(e) => format!("cannot run /usr/bin/python3: {e}"),
    };
    if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
        panic!("import_netcdf: cross-check required but cannot run: {reason}");
    }
    println!("SKIPPED import_netcdf: {reason}");
    false.then_some(serde_json::Value::Null)
}

fn run_ok(args: &[&str]) -> String {
    let out = tool(args);
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{args:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Compares every attribute of every frame of `ds` with the script's values at its points.
fn check_against(ds: &Dataset, reference: &serde_json::Value) {
    let m = ds.manifest();
    let frames = reference["frames"].as_array().unwrap();
    assert_eq!(m.frame_count(), frames.len());
    let times: Vec<f64> = reference["times"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_f64().unwrap())
        .collect();
    let stored: Vec<f64> = m.frames.iter().map(|f| f.time).collect();
    assert_eq!(stored, times, "frame times from the files");
    let voxel: Vec<f64> = reference["voxel"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let origin: Vec<f64> = reference["origin"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect();
    let points: Vec<[i32; 3]> = reference["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let c: Vec<i32> = p
                .as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_i64().unwrap() as i32)
                .collect();
            [c[0], c[1], c[2]]
        })
        .collect();
    let mut buf = AlignedBuf::new();
    let mut compared = 0;
    for (f, expect) in frames.iter().enumerate() {
        ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
        let expect = expect.as_object().unwrap();
        assert_eq!(
            m.attributes.len(),
            expect.len(),
            "attributes {:?}",
            m.attributes.iter().map(|a| &a.name).collect::<Vec<_>>()
        );
        for (a, attr) in m.attributes.iter().enumerate() {
            let values = expect
                .get(&attr.name)
                .unwrap_or_else(|| panic!("unexpected attribute {}", attr.name))
                .as_array()
                .unwrap();
            let grid = Grid::parse(ds.grid_bytes(f, a, &buf).unwrap()).unwrap();
            assert_eq!(grid.voxel_size().to_vec(), voxel, "{}", attr.name);
            let mut acc = grid.accessor();
            for (p, want) in points.iter().zip(values) {
                let active = acc.is_active(*p);
                match want.as_f64() {
                    None => assert!(!active, "{} frame {f} at {p:?}: active", attr.name),
                    Some(want) => {
                        assert!(
                            active,
                            "{} frame {f} at {p:?}: inactive, want {want}",
                            attr.name
                        );
                        let Value::Float(got) = acc.value(*p).unwrap() else {
                            panic!("not a float grid")
                        };
                        let tol = 2e-6 * want.abs().max(1e-6);
                        assert!(
                            (f64::from(got) - want).abs() <= tol,
                            "{} frame {f} at {p:?}: {got}, want {want}",
                            attr.name
                        );
                        compared += 1;
                    }
                }
            }
            // Index (0, 0, 0) is at the first column and the lowest level.
            if let Some(b) = attr.world_bbox {
                let ib = attr.index_bbox.unwrap();
                for k in 0..3 {
                    let want = origin[k] + f64::from(ib[0][k]) * voxel[k];
                    assert!(
                        (b[0][k] - want).abs() < 1e-3 * voxel[k],
                        "{}: world box {b:?} vs origin {origin:?}",
                        attr.name
                    );
                }
            }
        }
    }
    assert!(compared > 100, "only {compared} active samples compared");
}

#[test]
fn cm1_and_wrf_output_import_with_the_documented_interpolation() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(reference) = netcdf_files(tmp.path()) else {
        return;
    };
    let d = tmp.path();
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();

    // CM1: two files of one time each; perturbations and wind speed; a scene.
    let (f1, f2, cm1, scene) = (
        p("cm1out_000001.nc"),
        p("cm1out_000002.nc"),
        p("cm1"),
        p("cm1.toml"),
    );
    let stdout = run_ok(&[
        "import",
        &f1,
        &f2,
        "--out",
        &cm1,
        "--lanes",
        "2",
        "--wind-speed",
        "--scene",
        &scene,
    ]);
    assert!(stdout.contains("GB/s of output"), "{stdout}");
    assert!(
        stdout.contains("prs_pert: |values| <= 10 dropped, prs minus its level mean"),
        "{stdout}"
    );
    let ds = Dataset::open(&cm1).unwrap();
    let names: Vec<&str> = ds
        .manifest()
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "qc",
            "qr",
            "dbz",
            "uinterp",
            "vinterp",
            "winterp",
            "prs_pert",
            "th_pert",
            "w",
            "wind_speed"
        ]
    );
    check_against(&ds, &reference["cm1"]);

    // The scene: the same schema as scenes/*.toml, valid, on this dataset, with the
    // reflectivity and cloud looks.
    let text = std::fs::read_to_string(&scene).unwrap();
    let loaded = Scene::parse(&text, Path::new(&scene)).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let shown: Vec<&str> = loaded.attributes.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(shown, ["qc", "qr", "dbz", "wind_speed"], "{text}");
    assert_eq!(loaded.attributes[2].range, Some([5.0, 75.0]));
    let opened = loaded
        .open(16.0 / 9.0, None)
        .unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(opened.dataset.manifest().frame_count(), 2);

    // `supercell play DATASET` without a scene makes the same choice.
    let plain = Scene::load(Path::new(&cm1)).unwrap();
    let opened = plain.open(16.0 / 9.0, None).unwrap();
    let m = opened.dataset.manifest();
    let shown: Vec<&str> = opened
        .slots
        .iter()
        .map(|s| m.attributes[s.unwrap()].name.as_str())
        .collect();
    assert_eq!(shown, ["qc", "qr", "dbz", "wind_speed"]);

    // WRF: one file of two times, staggered variables; --vars and --background.
    let (wrf, wrf_out) = (p("wrfout_d01_2026-05-20_21:00:00"), p("wrf"));
    let stdout = run_ok(&[
        "import",
        &wrf,
        "--out",
        &wrf_out,
        "--lanes",
        "1",
        "--wind-speed",
    ]);
    assert!(
        stdout.contains("seconds after 2026-05-20_21:00:00"),
        "{stdout}"
    );
    let ds = Dataset::open(&wrf_out).unwrap();
    check_against(&ds, &reference["wrf"]);

    let chosen = p("wrf_chosen");
    run_ok(&[
        "import",
        &wrf,
        "--out",
        &chosen,
        "--vars",
        "QRAIN,W",
        "--background",
        "QRAIN=1e9",
    ]);
    let ds = Dataset::open(&chosen).unwrap();
    let names: Vec<&str> = ds
        .manifest()
        .attributes
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    assert_eq!(names, ["QRAIN", "W"]);
    let mut buf = AlignedBuf::new();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    let qrain = Grid::parse(ds.grid_bytes(0, 0, &buf).unwrap()).unwrap();
    assert_eq!(
        qrain.active_voxel_count(),
        0,
        "everything at or below 1e9 dropped"
    );
}

#[test]
fn netcdf_import_refuses_bad_files_naming_file_and_variable() {
    let tmp = tempfile::tempdir().unwrap();
    if netcdf_files(tmp.path()).is_none() {
        return;
    }
    let d = tmp.path();
    let out = d.join("ds");
    let refuse = |args: &[&str], wants: &[&str]| {
        let mut all = vec!["import"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--out", out.to_str().unwrap()]);
        let o = tool(&all);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{args:?} was accepted");
        for w in wants {
            assert!(stderr.contains(w), "{args:?}: {stderr:?} lacks {w:?}");
        }
        assert!(!stderr.contains("panicked"), "{stderr}");
    };
    let p = |name: &str| d.join(name).to_str().unwrap().to_string();
    refuse(
        &[&p("bad_dims.nc")],
        &["bad_dims.nc", "dimensions xh, yh, zh"],
    );
    refuse(
        &[&p("bad_nan.nc")],
        &["bad_nan.nc", "variable zh", "non-finite"],
    );
    refuse(
        &[&p("bad_order.nc")],
        &["bad_order.nc", "variable zh", "does not increase"],
    );
    refuse(
        &[&p("bad_wrf_heights.nc")],
        &[
            "bad_wrf_heights.nc",
            "PH + PHB",
            "do not increase",
            "column (1, 1)",
        ],
    );
    let cm1 = p("cm1out_000001.nc");
    refuse(
        &[&cm1, "--vars", "qx"],
        &["cm1out_000001.nc", "qx", "not a 3-D variable"],
    );
    refuse(&[&cm1, "--vars", "cref"], &["cref"]);
    refuse(&[&cm1, "--background", "qr"], &["NAME=VALUE"]);
    refuse(&[&cm1, "--background", "nope=1"], &["nope", "not imported"]);
    refuse(&[&cm1, "--dz=-1"], &["--dz"]);
    refuse(&[&cm1, "--dx=-1"], &["--dx"]);
    refuse(&[&cm1, "--dx=0.001"], &["voxels", "--dx"]);
    // 7 × 10^9 voxels of 0.3 m in each of 18 grids: about a TiB, more than a test disk holds.
    refuse(
        &[&cm1, "--dx=0.3", "--dz=0.3"],
        &["the output can take up to", "free", "--dx"],
    );
    // 1.15 billion voxels high: too many.
    refuse(&[&cm1, "--dz=0.000001"], &["--dz"]);
    refuse(&[&p("netcdf.json"), "--vars", "qr"], &["netCDF files only"]);
    refuse(
        &[&cm1, "--frame-interval", "2"],
        &["--frame-interval", "times come from the files"],
    );
    refuse(
        &[&cm1, &p("netcdf.json")],
        &["netcdf.json", "cannot open as netCDF"],
    );
    // Times must increase from file to file.
    refuse(
        &[&p("cm1out_000002.nc"), &cm1],
        &["cm1out_000001.nc", "time order"],
    );
    // Grids must match.
    refuse(
        &[&cm1, &p("wrfout_d01_2026-05-20_21:00:00")],
        &["wrfout_d01_2026-05-20_21:00:00", "differs"],
    );
    assert!(!out.join("manifest.json").exists());
}

#[test]
fn cf_encoded_variables_import_as_netcdf4_decodes_them() {
    let tmp = tempfile::tempdir().unwrap();
    if netcdf_files(tmp.path()).is_none() {
        return;
    }
    let d = tmp.path();
    // Packed shorts with _FillValue, missing_value and valid_range; floats with _FillValue
    // and valid_min; packed bytes with the default fill; packed unsigned shorts.
    let cf = d.join("cf.nc");
    let refdir = d.join("cf_ref");
    std::fs::create_dir(&refdir).unwrap();
    let Some(r) = netcdf_reference::reference(&refdir, std::slice::from_ref(&cf)) else {
        return;
    };
    let out = d.join("cf_ds");
    netcdf_reference::import(std::slice::from_ref(&cf), &out, &[]);
    let compared = netcdf_reference::check(&refdir, &out, &r, "cf.nc");
    assert!(compared > 200, "{compared}");

    // Attributes that would change the values and are not applied: refused by name.
    for (file, attribute) in [
        ("cf_unsigned.nc", "_Unsigned"),
        ("cf_valid_unpacked.nc", "valid_max"),
        ("cf_text_scale.nc", "scale_factor"),
    ] {
        let path = d.join(file);
        let o = tool(&[
            "import",
            path.to_str().unwrap(),
            "--out",
            d.join("refused").to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{file} was accepted");
        for want in [file, "variable qr", attribute] {
            assert!(stderr.contains(want), "{file}: {stderr:?} lacks {want:?}");
        }
    }
}

#[test]
fn quantised_netcdf_import_reports_its_largest_error() {
    let tmp = tempfile::tempdir().unwrap();
    if netcdf_files(tmp.path()).is_none() {
        return;
    }
    let d = tmp.path();
    let cm1 = d.join("cm1out_000001.nc");
    let (exact, fp8) = (d.join("exact"), d.join("fp8"));
    netcdf_reference::import(std::slice::from_ref(&cm1), &exact, &[]);
    let stdout =
        netcdf_reference::import(std::slice::from_ref(&cm1), &fp8, &["--grid-type", "fp8"]);
    let (de, dq) = (Dataset::open(&exact).unwrap(), Dataset::open(&fp8).unwrap());
    let (mut be, mut bq) = (AlignedBuf::new(), AlignedBuf::new());
    de.read_frame(0, &mut be, CrcCheck::Verify).unwrap();
    dq.read_frame(0, &mut bq, CrcCheck::Verify).unwrap();
    for (a, attr) in de.manifest().attributes.iter().enumerate() {
        let ge = Grid::parse(de.grid_bytes(0, a, &be).unwrap()).unwrap();
        let gq = Grid::parse(dq.grid_bytes(0, a, &bq).unwrap()).unwrap();
        assert_eq!(gq.grid_type(), supercell::format::GridType::Fp8);
        let (mut xe, mut xq) = (ge.accessor(), gq.accessor());
        let mut worst = 0f64;
        let ib = ge.index_bbox();
        for i in ib[0][0]..=ib[1][0] {
            for j in ib[0][1]..=ib[1][1] {
                for k in ib[0][2]..=ib[1][2] {
                    let p = [i, j, k];
                    assert_eq!(xe.is_active(p), xq.is_active(p), "{} {p:?}", attr.name);
                    if let (Ok(Value::Float(e)), Ok(Value::Float(q))) = (xe.value(p), xq.value(p))
                        && xe.is_active(p)
                    {
                        worst = worst.max((f64::from(e) - f64::from(q)).abs());
                    }
                }
            }
        }
        // The report: the same largest error, as printed with four digits.
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{}: ", attr.name)))
            .unwrap_or_else(|| panic!("{stdout}"));
        let reported: f64 = line
            .split("max abs error ")
            .nth(1)
            .unwrap_or_else(|| panic!("{line}"))
            .trim()
            .parse()
            .unwrap();
        assert!(
            worst > 0.0,
            "{}: fp8 stored every value exactly?",
            attr.name
        );
        assert!(
            (reported - worst).abs() <= 1e-3 * worst,
            "{}: reported {reported}, measured {worst}",
            attr.name
        );
    }
}

#[test]
fn dx_and_dz_set_their_axes_only() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(reference) = netcdf_files(tmp.path()) else {
        return;
    };
    let d = tmp.path();
    let cm1 = d.join("cm1out_000001.nc");
    let default_dz = reference["cm1"]["voxel"][2].as_f64().unwrap();
    for (flags, want) in [
        (vec!["--dx", "125"], [125.0, 125.0, default_dz]),
        (vec!["--dz", "40"], [250.0, 250.0, 40.0]),
    ] {
        let out = d.join(format!("ds{}", flags[0]));
        let stdout = netcdf_reference::import(std::slice::from_ref(&cm1), &out, &flags);
        let ds = Dataset::open(&out).unwrap();
        let mut buf = AlignedBuf::new();
        ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
        let grid = Grid::parse(ds.grid_bytes(0, 0, &buf).unwrap()).unwrap();
        assert_eq!(grid.voxel_size(), want, "{flags:?}");
        // 5 × 4 columns 250 m apart, levels 50..1200 m.
        let dims = [
            (1000.0 / want[0]) as usize + 1,
            (750.0 / want[1]) as usize + 1,
            (1150.0 / want[2]) as usize + 1,
        ];
        let text = format!(
            "{} × {} × {} voxels of {} × {} × {} m",
            dims[0], dims[1], dims[2], want[0], want[1], want[2]
        );
        assert!(stdout.contains(&text), "{flags:?}: {stdout} lacks {text}");
    }
}
