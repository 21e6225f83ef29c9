//! Shared by the netCDF import tests: runs tests/crosscheck/netcdf_realdata.py (the
//! documented rule, independently, on netCDF4-python's CF-decoded reading) and compares a
//! dataset `supercell-data import` wrote with what it computed.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
use supercell::format::{Grid, Value};

/// Runs supercell-data with `args`.
pub fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .args(args)
        .output()
        .expect("run supercell-data")
}

/// Skips with `reason`, or fails where `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI).
pub fn skip(reason: &str) {
    if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
        panic!("netCDF cross-check required but cannot run: {reason}");
    }
    println!("SKIPPED: {reason}");
}

/// `../shared/realdata` beside the repository, or None (the test skips, saying so: the
/// folder is never part of the repository).
pub fn realdata() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/realdata");
    if dir.join("README.md").exists() {
        Some(dir)
    } else {
        println!("SKIPPED: {} is absent", dir.display());
        None
    }
}

/// Runs the reference script on `files` into `dir`; None (skipped) without netCDF4.
pub fn reference(dir: &Path, files: &[PathBuf]) -> Option<serde_json::Value> {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/crosscheck/netcdf_realdata.py");
    let status = Command::new("/usr/bin/python3")
        .arg(script)
        .arg(dir)
        .args(files)
        .status();
    match status {
        Ok(s) if s.success() => {
            let text = std::fs::read_to_string(dir.join("reference.json")).unwrap();
            Some(serde_json::from_str(&text).unwrap())
        }
        Ok(s) if s.code() == Some(3) => {
            skip("/usr/bin/python3 cannot import netCDF4 (apt install python3-netcdf4)");
            None
        }
        Ok(s) => panic!("netcdf_realdata.py {files:?} failed: {s}"),
        Err(e) => {
            skip(&format!("cannot run /usr/bin/python3: {e}"));
            None
        }
    }
}

/// Imports `files` into `out` on one lane with `extra` flags; returns stdout (fails the
/// test on an error).
pub fn import(files: &[PathBuf], out: &Path, extra: &[&str]) -> String {
    let mut args: Vec<String> = vec!["import".into()];
    args.extend(files.iter().map(|f| f.to_str().unwrap().to_string()));
    args.extend([
        "--out".into(),
        out.to_str().unwrap().into(),
        "--lanes".into(),
        "1".into(),
    ]);
    args.extend(extra.iter().map(|s| s.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = tool(&args);
    let stdout = String::from_utf8_lossy(&o.stdout).to_string();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{args:?}: {stdout}{stderr}");
    // HDF5 prints its error stack on threads netCDF-C did not initialise; the import
    // switches that off where it reads (netCDF-4 files probe attributes that are absent).
    assert!(
        !stderr.contains("HDF5-DIAG"),
        "{args:?}: HDF5's error stack reached the terminal:\n{stderr}"
    );
    stdout
}

/// A JSON array of numbers.
pub fn f64s(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Whether `v` is kept by the background `(rule, threshold)`, or None within `tol` of it.
fn kept(v: f32, rule: &str, threshold: f64, tol: f64) -> Option<bool> {
    if v.is_nan() {
        return Some(false);
    }
    let x = if rule == "signed" {
        f64::from(v).abs()
    } else {
        f64::from(v)
    };
    if (x - threshold).abs() <= tol {
        None
    } else {
        Some(x > threshold)
    }
}

/// Compares the dataset at `out` with the reference in `dir`; returns the active voxels
/// compared.
pub fn check(dir: &Path, out: &Path, r: &serde_json::Value, label: &str) -> usize {
    let ds = Dataset::open(out).unwrap();
    let m = ds.manifest();
    let voxel = f64s(&r["voxel"]);
    let origin = f64s(&r["origin"]);
    let dims: Vec<usize> = f64s(&r["dims"]).iter().map(|&d| d as usize).collect();
    let times: Vec<f64> = m.frames.iter().map(|f| f.time).collect();
    assert_eq!(times, f64s(&r["times"]), "{label}: frame times");
    let attrs = r["attributes"].as_array().unwrap();
    let names: Vec<&str> = m.attributes.iter().map(|a| a.name.as_str()).collect();
    let want: Vec<&str> = attrs.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, want, "{label}: attributes");
    let mut buf = AlignedBuf::new();
    let mut compared = 0;
    // About 20 000 samples per grid, spread over the whole box.
    let stride = (dims.iter().product::<usize>() / 20_000).max(1) | 1;
    for f in 0..m.frame_count() {
        ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
        for (a, attr) in attrs.iter().enumerate() {
            let name = attr["name"].as_str().unwrap();
            let rule = attr["rule"].as_str().unwrap();
            let threshold = attr["threshold"].as_f64().unwrap();
            let tol = f64s(&attr["tol"])[f];
            let bytes = std::fs::read(dir.join(format!("f{f}_a{a}.f32"))).unwrap();
            let expect: Vec<f32> = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            assert_eq!(expect.len(), dims.iter().product::<usize>());
            let grid = Grid::parse(ds.grid_bytes(f, a, &buf).unwrap()).unwrap();
            let got_voxel = grid.voxel_size();
            for k in 0..3 {
                assert!(
                    (got_voxel[k] - voxel[k]).abs() <= 1e-9 * voxel[k],
                    "{label} {name}: voxel size {got_voxel:?}, want {voxel:?}"
                );
                assert!(
                    (grid.map().vec[k] - origin[k]).abs() <= 1e-6 * origin[k].abs().max(1.0),
                    "{label} {name}: origin {:?}, want {origin:?}",
                    grid.map().vec
                );
            }
            if grid.active_voxel_count() > 0 {
                let ib = grid.index_bbox();
                for k in 0..3 {
                    assert!(
                        ib[0][k] >= 0 && (ib[1][k] as usize) < dims[k],
                        "{ib:?} {dims:?}"
                    );
                }
            }
            let mut acc = grid.accessor();
            for n in (0..expect.len()).step_by(stride) {
                let (i, j, kk) = (
                    n / (dims[1] * dims[2]),
                    (n / dims[2]) % dims[1],
                    n % dims[2],
                );
                let p = [i as i32, j as i32, kk as i32];
                let want = expect[n];
                let active = acc.is_active(p);
                let Some(keep) = kept(want, rule, threshold, tol) else {
                    continue;
                };
                assert_eq!(
                    active, keep,
                    "{label} {name} frame {f} at {p:?}: active {active}, expected {want}"
                );
                if active {
                    let Value::Float(got) = acc.value(p).unwrap() else {
                        panic!("not a float grid")
                    };
                    assert!(
                        (f64::from(got) - f64::from(want)).abs() <= tol,
                        "{label} {name} frame {f} at {p:?}: {got}, want {want} (tol {tol})"
                    );
                    compared += 1;
                }
            }
        }
    }
    compared
}
