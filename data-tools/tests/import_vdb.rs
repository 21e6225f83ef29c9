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

/// `../shared/realdata` (relative to the workspace root), or `None` after saying so.
fn realdata() -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/realdata");
    if dir.is_dir() {
        Some(dir)
    } else {
        println!("SKIPPED import_vdb realdata: {} is absent", dir.display());
        None
    }
}

fn ok(out: &Output) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Houdini's three grids named density: the manifest's names (`density#1`) select a grid in
/// import, sample, inspect and export; Houdini put them at x = 4, 2 and 0.
#[test]
fn same_name_grids_are_selected_by_their_manifest_names() {
    let Some(root) = realdata() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let vdb = root.join("vdb/houdini20.5_three_density_grids_blosc.vdb");
    let ds = tmp.path().join("ds");
    let p = |x: &Path| x.to_str().unwrap().to_owned();
    let stdout = ok(&tool(&[
        "import",
        &p(&vdb),
        "--out",
        &p(&ds),
        "--lanes",
        "1",
    ]));
    assert!(
        stdout.contains("(density, density#1, density#2)"),
        "{stdout}"
    );
    // sample: by name and by index, the same values; an unknown name lists the names.
    let at = ["--at=-9,-13,-9", "--at=0,0,0", "--at=3,-2,1", "--json"];
    let by_name = ok(&tool(
        &[&["sample", &p(&ds), "--grid", "density#1"], &at[..]].concat(),
    ));
    let by_index = ok(&tool(
        &[&["sample", &p(&ds), "--grid", "1"], &at[..]].concat(),
    ));
    let first = ok(&tool(
        &[&["sample", &p(&ds), "--grid", "density"], &at[..]].concat(),
    ));
    assert_eq!(by_name, by_index);
    assert_ne!(by_name, first);
    let out = tool(&["sample", &p(&ds), "--grid", "density#7", "--at", "0,0,0"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("1:\"density#1\""),
        "{err}"
    );
    // inspect shows the manifest's names.
    let stdout = ok(&tool(&["inspect", &p(&ds)]));
    assert!(stdout.contains("\"density#2\""), "{stdout}");
    let stdout = ok(&tool(&["inspect", &p(&ds), "--grid", "density#1"]));
    assert!(
        stdout.contains("\"density#1\"") && !stdout.contains("\"density#2\""),
        "{stdout}"
    );
    // export one attribute by its name; the file's grid keeps it and is the same grid.
    let nvdb = tmp.path().join("one.nvdb");
    let stdout = ok(&tool(&[
        "export",
        &p(&ds),
        "--frame",
        "0",
        "--grid",
        "density#1",
        "--out",
        &p(&nvdb),
    ]));
    assert!(stdout.contains("(1 grids"), "{stdout}");
    let exported = ok(&tool(
        &[&["sample", &p(&nvdb), "--grid", "density#1"], &at[..]].concat(),
    ));
    assert_eq!(exported, by_name);
    let file = supercell::format::read_nvdb(&nvdb).unwrap();
    let g = file[0].grid().unwrap();
    assert_eq!(g.map().apply([0.0; 3]), [2.0, 0.0, 0.0]);
    // import --grid: only that grid.
    let one = tmp.path().join("one");
    let stdout = ok(&tool(&[
        "import",
        &p(&vdb),
        "--out",
        &p(&one),
        "--lanes",
        "1",
        "--grid",
        "density#2",
    ]));
    assert!(stdout.contains("1 attributes (density#2)"), "{stdout}");
}

/// The double grid says it was narrowed, with its largest rounding error; tinyvdb's block
/// offset is noted.
#[test]
fn double_grid_and_tinyvdb_are_reported() {
    let Some(root) = realdata() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_owned();
    let out = tool(&[
        "import",
        &p(&root.join("vdb/openvdb7_smoke_double_grid.vdb")),
        "--out",
        &p(&tmp.path().join("d")),
    ]);
    let stdout = ok(&out);
    assert!(
        stdout.contains(
            "note: density: a double-precision grid, stored as 32-bit floats (largest \
             rounding error 2.652e-8)"
        ),
        "{stdout}"
    );
    let out = tool(&[
        "import",
        &p(&root.join("vdb/tinyvdb090_resave_houdini_smoke_zip.vdb")),
        "--out",
        &p(&tmp.path().join("t")),
    ]);
    ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("block offset 184 is not where the topology ends"),
        "{err}"
    );
}

/// `export-mitsuba` of OpenUSD's anisotropic smoke: the volume's `to_world` scales each axis
/// by its own voxel size (0.1326, 0.1329, 0.1317), as the grid's map does.
#[test]
fn export_mitsuba_keeps_per_axis_voxel_sizes() {
    let Some(root) = realdata() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let p = |x: &Path| x.to_str().unwrap().to_owned();
    let ds = tmp.path().join("ds");
    let scene = tmp.path().join("s.toml");
    ok(&tool(&[
        "import",
        &p(&root.join("vdb/openusd_smoke_000002_aniso.vdb")),
        "--out",
        &p(&ds),
        "--lanes",
        "1",
    ]));
    std::fs::write(
        &scene,
        format!(
            "dataset = {:?}\n[[attribute]]\nname = \"density\"\npreset = \"cloud\"\nkind = \
             \"scatter\"\n",
            p(&ds)
        ),
    )
    .unwrap();
    let out_dir = tmp.path().join("mitsuba");
    ok(&tool(&[
        "export-mitsuba",
        &p(&scene),
        "--size",
        "64x36",
        "--out",
        &p(&out_dir),
    ]));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out_dir.join("scene.json")).unwrap())
            .unwrap();
    let m = &json["medium"];
    let n: Vec<f64> = (0..3)
        .map(|i| m["resolution"][i].as_f64().unwrap())
        .collect();
    let file =
        supercell::format::openvdb::read_vdb(root.join("vdb/openusd_smoke_000002_aniso.vdb"))
            .unwrap();
    let scale = file.grids[0].transform.scale;
    for a in 0..3 {
        let row = &m["volume_to_world"][a];
        // One sample per voxel: the unit cube spans n voxels along each axis.
        let diag = row[a].as_f64().unwrap();
        assert!(
            (diag - n[a] * scale[a]).abs() <= 1e-9 * diag,
            "axis {a}: {diag} vs {} voxels of {}",
            n[a],
            scale[a]
        );
        for b in (0..3).filter(|&b| b != a) {
            assert_eq!(row[b].as_f64().unwrap(), 0.0);
        }
    }
    assert_ne!(scale[0], scale[2]);
    // `export` keeps the per-axis voxel size and the origin, exactly.
    let nvdb = tmp.path().join("frame.nvdb");
    ok(&tool(&[
        "export",
        &p(&ds),
        "--frame",
        "0",
        "--out",
        &p(&nvdb),
    ]));
    let back = supercell::format::read_nvdb(&nvdb).unwrap();
    let g = back[0].grid().unwrap();
    assert_eq!(g.voxel_size(), scale);
    assert_eq!(g.map().apply([0.0; 3]), file.grids[0].transform.translation);
}

/// A `.nvdb` file with two grids named `a` (as `nanovdb_convert` makes of a `.vdb` with two
/// same-name grids): the second becomes attribute `a#1`, its header is renamed to match (with
/// its checksum re-stamped), and `verify` accepts the dataset.
#[test]
fn same_name_nvdb_grids_import_and_verify() {
    use supercell::format::{BuildOptions, Codec, LeafBrick, SparseVolume, build_grid, write_nvdb};
    let tmp = tempfile::tempdir().unwrap();
    let grids: Vec<Vec<u8>> = [1.0f32, 2.0]
        .iter()
        .map(|&v| {
            let volume = SparseVolume {
                background: 0.0,
                bricks: vec![LeafBrick::filled([0, 0, 0], v)],
            };
            let opts = BuildOptions {
                name: "a".into(),
                ..BuildOptions::default()
            };
            build_grid(&volume, &opts).unwrap()
        })
        .collect();
    let nvdb = tmp.path().join("same.nvdb");
    let refs: Vec<&[u8]> = grids.iter().map(Vec::as_slice).collect();
    write_nvdb(&nvdb, &refs, Codec::None).unwrap();
    let ds = tmp.path().join("ds");
    let p = |x: &Path| x.to_str().unwrap().to_owned();
    let stdout = ok(&tool(&[
        "import",
        &p(&nvdb),
        "--out",
        &p(&ds),
        "--lanes",
        "1",
    ]));
    assert!(stdout.contains("(a, a#1)"), "{stdout}");
    let stdout = ok(&tool(&["verify", &p(&ds)]));
    assert!(stdout.contains("OK"), "{stdout}");
    let stdout = ok(&tool(&["inspect", &p(&ds)]));
    assert!(
        stdout.contains("\"a#1\"") && stdout.contains("valid"),
        "{stdout}"
    );
    let stdout = ok(&tool(&[
        "sample",
        &p(&ds),
        "--grid",
        "a#1",
        "--at",
        "1,2,3",
    ]));
    assert!(stdout.contains('2'), "{stdout}");
}

/// A grid whose type name was changed (to another type this reader reads, or to one OpenVDB
/// never writes) is refused naming the file, the grid and what disagrees; it used to import
/// as an empty grid, or be skipped, with exit 0.
#[test]
fn changed_type_names_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    if !openvdb_files(tmp.path()) {
        return;
    }
    let good = std::fs::read(tmp.path().join("small.vdb")).unwrap();
    let at = good
        .windows(16)
        .position(|w| w == b"Tree_float_5_4_3")
        .unwrap();
    for (to, says) in [
        ("Tree_vec3s_5_4_3", "the descriptor's block offset says"),
        ("Tree_floot_5_4_3", "is not a type OpenVDB writes"),
    ] {
        let mut f = good.clone();
        f[at..at + 16].copy_from_slice(to.as_bytes());
        let vdb = tmp.path().join("changed.vdb");
        std::fs::write(&vdb, &f).unwrap();
        let (err, _) = import_refused(&vdb, tmp.path());
        assert!(
            err.contains("changed.vdb") && err.contains("grid 0 (\"float\")") && err.contains(says),
            "{to}: {err}"
        );
    }
}

/// Runs `supercell-data ARGS` under a 4 GiB address-space limit where `prlimit` exists (so
/// that a run that does expand cannot take the machine's memory), and times it.
fn tool_limited(args: &[&str]) -> (Output, std::time::Duration) {
    let started = std::time::Instant::now();
    let exe = env!("CARGO_BIN_EXE_supercell-data");
    let out = match Command::new("prlimit").arg("--version").output() {
        Ok(o) if o.status.success() => Command::new("prlimit")
            .arg("--as=4294967296")
            .arg(exe)
            .args(args)
            .output(),
        _ => Command::new(exe).args(args).output(),
    }
    .expect("run supercell-data");
    (out, started.elapsed())
}

/// Imports `file` into `dir/ds` (under [`tool_limited`]), which must fail with exit status 1
/// (an error, not a signal): its message, and how long it took.
fn import_refused(file: &Path, dir: &Path) -> (String, std::time::Duration) {
    let ds = dir.join("ds");
    let (out, took) = tool_limited(&[
        "import",
        file.to_str().unwrap(),
        "--out",
        ds.to_str().unwrap(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{}: {err}", file.display());
    (err, took)
}

/// A 9 KB file whose grid is 512 active 128³ tiles claims 2 Mi leaves (9 GB once expanded):
/// the claim is refused before any tile is expanded, saying why, in well under a second
/// (it used to pass the tile limit and the memory estimate and grow past 8 GB).
#[test]
fn a_file_of_active_tiles_is_refused_before_expanding() {
    let tmp = tempfile::tempdir().unwrap();
    let vdb = tmp.path().join("tiles.vdb");
    let script = "import pyopenvdb as vdb, sys\n\
        g = vdb.FloatGrid(0.0)\n\
        g.name = 'tiles'\n\
        g.fill((0, 0, 0), (1023, 1023, 1023), 1.0, active=True)\n\
        vdb.write(sys.argv[1], grids=[g])\n";
    match Command::new("/usr/bin/python3")
        .args(["-c", script])
        .arg(&vdb)
        .status()
    {
        Ok(s) if s.success() => {}
        other => {
            if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
                panic!("cannot write the tile file with pyopenvdb: {other:?}");
            }
            println!("SKIPPED a_file_of_active_tiles: pyopenvdb cannot write it: {other:?}");
            return;
        }
    }
    let len = std::fs::metadata(&vdb).unwrap().len();
    assert!(len < 20_000, "{len}");
    let (err, took) = import_refused(&vdb, tmp.path());
    assert!(
        err.contains("tiles.vdb")
            && err.contains("grid \"tiles\"")
            && err.contains("2097152 leaves made from its 512 tiles")
            && err.contains(&format!("more than 64 times the file's {len} bytes")),
        "{err}"
    );
    assert!(took.as_secs() < 10, "{took:?}");
    assert!(!tmp.path().join("ds/manifest.json").exists());
}

/// A ZIP `.nvdb` of a real grid whose header (and file metadata) claim 1 GiB, the rest of
/// the claim a stream of zeros (1 MB in the file): `inspect` and `import` refuse it from the
/// header's node counts after inflating its first bytes, quickly, saying why (it used to
/// pass the header check and inflate the whole claim).
#[test]
fn a_zip_nvdb_whose_header_claims_more_than_its_nodes_is_refused_early() {
    use std::io::Write;
    use supercell::format::{
        BuildOptions, Codec, LeafBrick, SparseVolume, build_grid, encode_nvdb,
    };
    let volume = SparseVolume {
        background: 0.0,
        bricks: (0..4)
            .map(|i| LeafBrick::filled([8 * i, 0, 0], i as f32))
            .collect(),
    };
    let opts = BuildOptions {
        name: "bomb".into(),
        ..BuildOptions::default()
    };
    let mut real = build_grid(&volume, &opts).unwrap();
    // The file as NanoVDB writes it for the real grid, then its payload replaced.
    let mut file = encode_nvdb(&[real.as_slice()], Codec::None).unwrap();
    let claim: u64 = 1 << 30;
    real[32..40].copy_from_slice(&claim.to_le_bytes());
    let name_size = u32::from_le_bytes(file[16 + 136..][..4].try_into().unwrap()) as usize;
    file.truncate(16 + 176 + name_size);
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    z.write_all(&real).unwrap();
    let zeros = vec![0u8; 1 << 20];
    let mut left = claim - real.len() as u64;
    while left > 0 {
        let n = left.min(zeros.len() as u64) as usize;
        z.write_all(&zeros[..n]).unwrap();
        left -= n as u64;
    }
    let stream = z.finish().unwrap();
    file[16..24].copy_from_slice(&claim.to_le_bytes());
    file[24..32].copy_from_slice(&(8 + stream.len() as u64).to_le_bytes());
    file[16 + 168..][..2].copy_from_slice(&1u16.to_le_bytes()); // codec: ZIP
    file[14..16].copy_from_slice(&1u16.to_le_bytes());
    file.extend_from_slice(&(stream.len() as u64).to_le_bytes());
    file.extend_from_slice(&stream);
    assert!(file.len() < 8 << 20, "{}", file.len());
    let tmp = tempfile::tempdir().unwrap();
    let nvdb = tmp.path().join("bomb.nvdb");
    std::fs::write(&nvdb, &file).unwrap();
    let ds = tmp.path().join("ds");
    for args in [
        vec!["inspect", nvdb.to_str().unwrap()],
        vec![
            "import",
            nvdb.to_str().unwrap(),
            "--out",
            ds.to_str().unwrap(),
        ],
    ] {
        let (out, took) = tool_limited(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("bomb.nvdb")
                && err.contains(&format!(
                    "the grid header claims {claim} bytes, but its nodes"
                )),
            "{args:?}: {err}"
        );
        assert!(took.as_secs() < 10, "{args:?}: {took:?}");
    }
}
