//! `supercell-data import` of OpenVDB files written by Debian's python3-openvdb
//! (tests/crosscheck/openvdb_write.py): what it prints (speed, quantisation error, vectors
//! kept as their length) and how it refuses what it cannot store. Values are cross-checked
//! in the main crate's tests/vdb_import.rs. Skipped with a printed reason where
//! python3-openvdb is missing, unless `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI).

use std::path::Path;
use std::process::{Command, Output};

fn tool(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .args(args)
        .output()
        .expect("run supercell-data")
}

fn openvdb_files(dir: &Path) -> bool {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/crosscheck/openvdb_write.py");
    let reason = match Command::new("/usr/bin/python3")
        .arg(script)
        .arg(dir)
        .status()
    {
        Ok(s) if s.success() => return true,
        Ok(s) if s.code() == Some(3) => "/usr/bin/python3 cannot import pyopenvdb".to_string(),
        Ok(s) => panic!("openvdb_write.py failed: {s}"),
        Err(e) => format!("cannot run /usr/bin/python3: {e}"),
    };
    if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
        panic!("import_vdb: cross-check required but cannot run: {reason}");
    }
    println!("SKIPPED import_vdb: {reason}");
    false
}

#[test]
fn import_vdb_reports_speed_error_and_vectors() {
    let tmp = tempfile::tempdir().unwrap();
    if !openvdb_files(tmp.path()) {
        return;
    }
    let f0 = tmp.path().join("frame_000.vdb");
    let f1 = tmp.path().join("frame_001.vdb");
    let ds = tmp.path().join("ds");
    let args = [
        "import",
        f0.to_str().unwrap(),
        f1.to_str().unwrap(),
        "--out",
        ds.to_str().unwrap(),
        "--lanes",
        "2",
        "--grid-type",
        "fp8",
    ];
    let out = tool(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("2 frames, 4 attributes"), "{stdout}");
    assert!(stdout.contains("GB/s of output"), "{stdout}");
    for name in ["density", "sphere", "smoke", "velocity"] {
        assert!(
            stdout.contains(&format!("{name}: fp8 quantisation, max abs error")),
            "{name}: {stdout}"
        );
    }
    assert!(
        stdout.contains("velocity: a vector grid, imported as its length"),
        "{stdout}"
    );

    // Refusals name the file and the reason.
    let rotated = tmp.path().join("rotated.vdb");
    let out = tool(&[
        "import",
        rotated.to_str().unwrap(),
        "--out",
        tmp.path().join("ds2").to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("rotated.vdb") && err.contains("rotation"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let out = tool(&[
        "import",
        f0.to_str().unwrap(),
        "--out",
        tmp.path().join("ds3").to_str().unwrap(),
        "--grid-type",
        "fp4",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("use float, fp16 or fp8"), "{err}");
}
