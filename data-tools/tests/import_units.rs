//! Units travel from the sources into the manifest: a netCDF variable's CF `units`
//! attribute as written (a perturbation keeps its variable's, the derived `wind_speed` takes
//! its components'), an OpenVDB grid's `units` metadata; a unit the manifest cannot hold is
//! left out with a note, never an import refused over a label. Files are written here by
//! Debian's python3-netcdf4 and python3-openvdb; skipped with a printed reason where they
//! are missing, unless `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI).

use std::path::Path;
use std::process::Command;

use supercell::dataset::Dataset;

/// Runs `script` with `/usr/bin/python3` and `args`; false (after printing why) where the
/// module it imports is missing.
fn python(script: &str, args: &[&Path], what: &str) -> bool {
    match Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .args(args)
        .output()
    {
        Ok(out) if out.status.success() => true,
        Ok(out) if out.status.code() == Some(3) => skip(what, "the python module is missing"),
        Ok(out) => panic!("{what}: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) => skip(what, &format!("cannot run /usr/bin/python3: {e}")),
    }
}

fn skip(what: &str, why: &str) -> bool {
    if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
        panic!("{what}: cross-check required but cannot run: {why}");
    }
    println!("SKIPPED {what}: {why}");
    false
}

/// `supercell-data import FILE --out OUT EXTRA...`, which must succeed; its stdout and
/// stderr (notes go to either).
fn import(file: &Path, out_dir: &Path, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .arg("import")
        .arg(file)
        .arg("--out")
        .arg(out_dir)
        .args(extra)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    text
}

/// A CM1-like file: qc in kg/kg, dbz in dBZ, winds in m/s, th in K (a perturbation), a
/// variable without units and one whose units hold a control character.
const CM1: &str = r#"
import sys
try:
    import netCDF4, numpy as np
except ImportError:
    sys.exit(3)
ds = netCDF4.Dataset(sys.argv[1], "w", format="NETCDF4")
for d, n in [("time", None), ("zh", 3), ("yh", 2), ("xh", 2)]:
    ds.createDimension(d, n)
for c, vals in [("xh", [0.0, 0.25]), ("yh", [0.0, 0.25]), ("zh", [0.1, 0.2, 0.3])]:
    v = ds.createVariable(c, "f4", (c,))
    v.units = "km"
    v[:] = np.array(vals, dtype=np.float32)
t = ds.createVariable("time", "f8", ("time",))
t.units = "s"
t[0] = 600.0
dims = ("time", "zh", "yh", "xh")
rng = np.random.default_rng(1)
for name, units, lo, hi in [("qc", "kg/kg", 0.0, 0.004), ("dbz", "dBZ", -10.0, 70.0),
                            ("uinterp", "m/s", -20.0, 20.0), ("vinterp", "m/s", -20.0, 20.0),
                            ("winterp", "m/s", -5.0, 30.0), ("th", "K", 295.0, 305.0),
                            ("nounits", None, 0.0, 1.0), ("badunits", "K\x07", 0.0, 1.0)]:
    v = ds.createVariable(name, "f4", dims)
    if units is not None:
        v.units = units
    v[0] = rng.uniform(lo, hi, (3, 2, 2)).astype(np.float32)
ds.close()
"#;

#[test]
fn netcdf_units_reach_the_manifest_as_written() {
    let tmp = tempfile::tempdir().unwrap();
    let nc = tmp.path().join("cm1out_000001.nc");
    if !python(CM1, &[&nc], "netcdf_units") {
        return;
    }
    let out_dir = tmp.path().join("ds");
    let stdout = import(&nc, &out_dir, &["--wind-speed"]);
    assert!(
        stdout.contains("note: badunits: variable badunits of")
            && stdout.contains("control character")
            && stdout.contains("imported without a unit"),
        "{stdout}"
    );
    let ds = Dataset::open(&out_dir).unwrap();
    let units = |name: &str| {
        let m = ds.manifest();
        m.attributes[m.attribute_index(name).unwrap_or_else(|| panic!("{name}"))]
            .units
            .clone()
    };
    assert_eq!(units("qc").as_deref(), Some("kg/kg"));
    assert_eq!(units("dbz").as_deref(), Some("dBZ"));
    assert_eq!(units("uinterp").as_deref(), Some("m/s"));
    assert_eq!(units("th_pert").as_deref(), Some("K"));
    assert_eq!(units("wind_speed").as_deref(), Some("m/s"));
    assert_eq!(units("nounits"), None);
    assert_eq!(units("badunits"), None);
}

/// Grids with `units` (and `unit`) string metadata, one without, and one whose units
/// would clear a terminal.
const VDB: &str = r#"
import sys
try:
    import pyopenvdb as vdb
except ImportError:
    sys.exit(3)
grids = []
for name, key, units in [("density", "units", "kg/m^3"), ("temperature", "unit", "K"),
                         ("plain", None, None), ("hostile", "units", "K\x1b[2J")]:
    g = vdb.FloatGrid(0.0)
    g.name = name
    g.fill((0, 0, 0), (7, 7, 7), 1.5, active=True)
    if key:
        g[key] = units
    grids.append(g)
vdb.write(sys.argv[1], grids=grids)
"#;

#[test]
fn vdb_units_metadata_reaches_the_manifest() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("frame.vdb");
    if !python(VDB, &[&file], "vdb_units") {
        return;
    }
    let out_dir = tmp.path().join("ds");
    let stdout = import(&file, &out_dir, &[]);
    let ds = Dataset::open(&out_dir).unwrap();
    let m = ds.manifest();
    let units: Vec<(&str, Option<&str>)> = m
        .attributes
        .iter()
        .map(|a| (a.name.as_str(), a.units.as_deref()))
        .collect();
    assert_eq!(
        units,
        [
            ("density", Some("kg/m^3")),
            ("temperature", Some("K")),
            ("plain", None),
            ("hostile", None)
        ]
    );
    assert!(
        stdout.contains("grid \"hostile\": its units metadata")
            && stdout.contains("control character")
            && stdout.contains("imported without a unit"),
        "{stdout}"
    );
}

/// The real CM1 series (`../shared/realdata`, not in the repository): its variables' units
/// as CM1 writes them reach the manifest.
#[test]
fn real_cm1_output_keeps_its_units() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata/cm1/cm1r21.1_supercell_48x48x35_stretched");
    if !dir.is_dir() {
        println!(
            "SKIPPED real_cm1_output_keeps_its_units: {} is absent",
            dir.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out_dir = tmp.path().join("cm1");
    import(&dir.join("cm1out_000002.nc"), &out_dir, &["--wind-speed"]);
    let ds = Dataset::open(&out_dir).unwrap();
    let m = ds.manifest();
    let units = |name: &str| {
        m.attributes[m.attribute_index(name).unwrap_or_else(|| panic!("{name}"))]
            .units
            .as_deref()
    };
    for (name, want) in [
        ("qc", "kg/kg"),
        ("dbz", "dBZ"),
        ("th_pert", "K"),
        ("prs_pert", "Pa"),
        ("w", "m/s"),
        ("wind_speed", "m/s"),
    ] {
        assert_eq!(units(name), Some(want), "{name}");
    }
}
