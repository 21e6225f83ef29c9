//! `supercell-data` under careless and hostile input: non-UTF-8 paths, grid names that try
//! to write TOML, values near f32::MAX, absurd thread counts, and signals mid-write.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
use supercell::format::{BuildOptions, LeafBrick, SparseVolume, build_grid};
use supercell::scene::Scene;

fn tool<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .args(args)
        .output()
        .expect("run supercell-data");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "supercell-data panicked: {err}");
    out
}

fn ok<I, S>(args: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let out = tool(args);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dir/name` where `name` is raw bytes (not UTF-8 where it holds 0xff or 0xfe).
fn raw(dir: &Path, name: &[u8]) -> PathBuf {
    dir.join(OsStr::from_bytes(name))
}

/// A float grid named `name` of `bricks` full leaves along x, every voxel `value(i)` in
/// brick `i`.
fn grid(name: &str, bricks: i32, value: impl Fn(i32) -> f32) -> Vec<u8> {
    let volume = SparseVolume {
        background: 0.0,
        bricks: (0..bricks)
            .map(|i| {
                let mut b = LeafBrick::filled([8 * (i % 64), 8 * (i / 64), 0], 0.0);
                for n in 0..512 {
                    b.set_active(n, value(i));
                }
                b
            })
            .collect(),
    };
    let opts = BuildOptions {
        name: name.into(),
        ..BuildOptions::default()
    };
    build_grid(&volume, &opts).unwrap()
}

/// Files in `dir` whose name starts with `.` (the temporary files writers use).
fn dot_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().as_bytes().starts_with(b"."))
        .collect()
}

#[test]
fn non_utf8_paths_work_for_generate_and_import_and_are_recorded_losslessly() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = raw(tmp.path(), b"storm\xff");
    let mut args = vec![OsStr::new("generate"), ds.as_os_str()];
    args.extend(["--frames", "2", "--resolution", "16", "--lanes", "2"].map(OsStr::new));
    ok(args);
    ok([OsStr::new("verify"), ds.as_os_str()]);
    // The manifest records the argument as the bytes given.
    let m: serde_json::Value =
        serde_json::from_slice(&std::fs::read(ds.join("manifest.json")).unwrap()).unwrap();
    let recorded = m["created"]["args"][1].as_str().unwrap();
    assert!(recorded.starts_with("os-bytes:"), "{recorded}");
    assert_eq!(
        Provenance::arg_os(recorded).unwrap().as_bytes(),
        ds.as_os_str().as_bytes()
    );

    // Export a frame into, and import it from, other non-UTF-8 folders.
    let dir = raw(tmp.path(), b"in\xfe");
    std::fs::create_dir(&dir).unwrap();
    let nvdb = dir.join("f1.nvdb");
    ok([
        OsStr::new("export"),
        ds.as_os_str(),
        OsStr::new("--frame"),
        OsStr::new("1"),
        OsStr::new("--out"),
        nvdb.as_os_str(),
    ]);
    let back = dir.join("back");
    ok([
        OsStr::new("import"),
        nvdb.as_os_str(),
        OsStr::new("--out"),
        back.as_os_str(),
    ]);
    ok([OsStr::new("verify"), back.as_os_str()]);
    // A scene cannot name such a dataset (TOML strings are UTF-8): refused, nothing written.
    let scene = tmp.path().join("s.toml");
    let out = tool([
        OsStr::new("import"),
        nvdb.as_os_str(),
        OsStr::new("--out"),
        back.as_os_str(),
        OsStr::new("--scene"),
        scene.as_os_str(),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("is not UTF-8"),
        "{err}"
    );
    assert!(!scene.exists());

    // netCDF through netCDF-C, where the real data is here.
    let nc = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/realdata/cm1/cm1r21.1_supercell_48x48x35_stretched/cm1out_000001.nc");
    if !nc.exists() {
        eprintln!("skipping the netCDF part: {} is absent", nc.display());
        return;
    }
    let copy = dir.join("c1.nc");
    std::fs::copy(&nc, &copy).unwrap();
    let cm = raw(&dir, b"cm\xff");
    ok([
        OsStr::new("import"),
        copy.as_os_str(),
        OsStr::new("--out"),
        cm.as_os_str(),
        OsStr::new("--vars"),
        OsStr::new("dbz"),
    ]);
}

#[test]
fn generate_caps_an_absurd_thread_count() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("d");
    let out = tool([
        "generate",
        ds.to_str().unwrap(),
        "--frames",
        "1",
        "--resolution",
        "16",
        "--threads",
        "100000",
    ]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stdout}{stderr}");
    let cpus = std::thread::available_parallelism().unwrap().get();
    assert!(
        stderr.contains(&format!("note: --threads 100000: using {cpus}, the most")),
        "{stderr}"
    );
    assert!(stdout.contains(&format!("on {cpus} threads")), "{stdout}");
    let out = tool([
        "generate",
        ds.to_str().unwrap(),
        "--frames",
        "1",
        "--threads",
        "0",
    ]);
    assert!(!out.status.success());
}

/// Imports `grids` (one frame) with `--scene`; the output and the scene path.
fn import_with_scene(dir: &Path, grids: &[Vec<u8>]) -> (Output, PathBuf) {
    let nvdb = dir.join("in.nvdb");
    let refs: Vec<&[u8]> = grids.iter().map(Vec::as_slice).collect();
    supercell::format::write_nvdb(&nvdb, &refs, supercell::format::Codec::None).unwrap();
    let scene = dir.join("scene.toml");
    let out = tool([
        OsStr::new("import"),
        nvdb.as_os_str(),
        OsStr::new("--out"),
        dir.join("ds").as_os_str(),
        OsStr::new("--scene"),
        scene.as_os_str(),
    ]);
    (out, scene)
}

/// A grid name holding newlines cannot inject keys or tables into the scene `import
/// --scene` writes, and values near f32::MAX are written as floats the scene accepts.
#[test]
fn import_scene_escapes_names_and_writes_huge_values_as_floats() {
    let tmp = tempfile::tempdir().unwrap();
    let evil = "a\nexposure = 99\n[x]";
    let grids = vec![
        // Not a storm's names, so the looks come from the data.
        grid("density", 64, |i| if i < 32 { 1.0 } else { 3e38 }),
        // Empty: the scene's notes name it ("... is empty in every frame").
        grid(evil, 0, |_| 0.0),
    ];
    let (out, scene) = import_with_scene(tmp.path(), &grids);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&scene).unwrap();
    let s = Scene::parse(&text, &scene).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(s.settings.exposure, 0.85, "{text}");
    for line in text.lines() {
        assert!(
            !line.starts_with("exposure") && !line.starts_with("[x]"),
            "{text}"
        );
    }
    assert!(text.contains("a\\nexposure = 99\\n[x]"), "{text}");
    let density = s.attributes.iter().find(|a| a.name == "density").unwrap();
    assert_eq!(density.range, Some([0.0, 3e38]), "{text}");
    assert!(dot_files(tmp.path()).is_empty());
}

/// A scene that would not load (a range whose span overflows f32) is an error, and no
/// scene file, whole or partial, is left.
#[test]
fn import_writes_no_scene_that_would_not_load() {
    let tmp = tempfile::tempdir().unwrap();
    let grids = vec![grid(
        "signed",
        64,
        |i| if i % 2 == 0 { -3e38 } else { 3e38 },
    )];
    let (out, scene) = import_with_scene(tmp.path(), &grids);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("no scene was written") && err.contains("attribute[0].range"),
        "{err}"
    );
    assert!(!scene.exists());
    assert!(
        dot_files(tmp.path()).is_empty(),
        "{:?}",
        dot_files(tmp.path())
    );
}

/// SIGTERM in the middle of `export` removes its temporary file.
#[test]
fn a_killed_export_leaves_no_temporary_file() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("ds");
    // 40 000 full float leaves: an 85 MB grid, whose write and fsync take long enough to be
    // caught in the middle.
    let big = grid("density", 40_000, |i| i as f32);
    let mut w = DatasetWriter::create(
        &ds,
        LaneSpec::Count(1),
        8 << 20,
        vec![AttributeSpec::new("density")],
        Provenance::new("test", ["x"]),
    )
    .unwrap();
    w.push_frame(0.0, vec![big]).unwrap();
    w.finish().unwrap();
    let out_dir = tmp.path().join("out");
    std::fs::create_dir(&out_dir).unwrap();
    let target = out_dir.join("frame.nvdb");
    let mut caught = 0;
    for _ in 0..5 {
        let mut child = Command::new(env!("CARGO_BIN_EXE_supercell-data"))
            .args(["export", ds.to_str().unwrap(), "--frame", "0", "--out"])
            .arg(&target)
            .spawn()
            .unwrap();
        // Wait for the temporary file to appear, then end the export.
        let seen = loop {
            if !dot_files(&out_dir).is_empty() {
                break true;
            }
            if child.try_wait().unwrap().is_some() {
                break false;
            }
        };
        if seen {
            // SAFETY: signalling the child this test started (and has not reaped).
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        let status = child.wait().unwrap();
        let left = dot_files(&out_dir);
        assert!(left.is_empty(), "left behind: {left:?}");
        if seen {
            use std::os::unix::process::ExitStatusExt;
            // Either the signal ended it (as SIGTERM does) or it had just finished.
            assert!(
                status.signal() == Some(libc::SIGTERM) || status.success(),
                "{status:?}"
            );
            if status.signal() == Some(libc::SIGTERM) {
                caught += 1;
                eprintln!("export caught mid-write");
                assert!(!target.exists(), "a killed export renamed its output");
            }
        }
        let _ = std::fs::remove_file(&target);
    }
    assert!(caught > 0, "no export was caught mid-write in 5 tries");
}

#[test]
fn export_mitsuba_names_the_size_flag_and_form() {
    let out = tool([
        "export-mitsuba",
        "/nonexistent",
        "--out",
        "/nonexistent-out",
        "--size",
        "64x",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        err.contains("--size: expected WIDTHxHEIGHT, e.g. 1280x720; got \"64x\""),
        "{err}"
    );
}
