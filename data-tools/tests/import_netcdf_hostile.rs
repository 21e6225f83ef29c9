//! `supercell-data import` of hostile and damaged netCDF files: classic headers crafted as
//! an attacker would (record, dimension and variable counts out of range, unknown types,
//! lengths whose sizes overflow, extra record dimensions), files cut short (classic and
//! netCDF-4), and fields holding infinities and NaN. Every one must end with exit status 1
//! and a message naming the file (and the variable where there is one) within seconds:
//! never a signal, a hang, or a silent import of fill values. The files are CM1 files
//! written by Debian's python3-netcdf4 (tests/crosscheck/netcdf_write.py), changed here, and
//! copies of `../shared/realdata`; skipped with a printed reason where those are missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
use supercell::format::Grid;

/// What a run of `supercell-data` ended with.
struct Run {
    /// The exit code (None: killed by a signal).
    code: Option<i32>,
    stdout: String,
    stderr: String,
    seconds: f64,
}

/// Runs `supercell-data` with `args`, killing it after 30 s.
fn tool(args: &[&str]) -> Run {
    let started = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_supercell-data"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run supercell-data");
    // Read the pipes on threads so a talkative child cannot block on a full pipe.
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let out =
        std::thread::spawn(move || std::io::read_to_string(&mut out_pipe).unwrap_or_default());
    let err =
        std::thread::spawn(move || std::io::read_to_string(&mut err_pipe).unwrap_or_default());
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if started.elapsed() > Duration::from_secs(30) {
            child.kill().unwrap();
            panic!("{args:?} still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Run {
        code: status.code(),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        seconds: started.elapsed().as_secs_f64(),
    }
}

/// Imports `file` into `dir/out` and checks it is refused by an error (exit status 1, no
/// signal, no panic) within 10 s whose message holds every one of `wants`.
fn refused(dir: &Path, file: &Path, wants: &[&str]) {
    let out = dir.join("out");
    let _ = std::fs::remove_dir_all(&out);
    let r = tool(&[
        "import",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    let label = file.file_name().unwrap().to_string_lossy();
    assert_eq!(
        r.code,
        Some(1),
        "{label}: exit {:?} (None: a signal)\n{}{}",
        r.code,
        r.stdout,
        r.stderr
    );
    assert!(r.seconds < 10.0, "{label}: took {} s", r.seconds);
    assert!(!r.stderr.contains("panicked"), "{label}: {}", r.stderr);
    for w in wants {
        assert!(r.stderr.contains(w), "{label}: {:?} lacks {w:?}", r.stderr);
    }
    assert!(
        !out.join("manifest.json").exists(),
        "{label}: a dataset was written"
    );
}

/// The CM1 files netcdf_write.py writes into `dir` (CDF-2, one record each), or None
/// (skipped, said why) where python3-netcdf4 is missing.
fn cm1_file(dir: &Path) -> Option<PathBuf> {
    std::fs::create_dir_all(dir).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/crosscheck/netcdf_write.py");
    let reason = match Command::new("/usr/bin/python3")
        .arg(script)
        .arg(dir)
        .stdout(Stdio::null())
        .status()
    {
        Ok(s) if s.success() => return Some(dir.join("cm1out_000001.nc")),
        Ok(s) if s.code() == Some(3) => "/usr/bin/python3 cannot import netCDF4".to_string(),
        Ok(s) => panic!("netcdf_write.py failed: {s}"),
        Err(e) => format!("cannot run /usr/bin/python3: {e}"),
    };
    if std::env::var_os("SUPERCELL_REQUIRE_CROSSCHECK").is_some() {
        panic!("import_netcdf_hostile: required but cannot run: {reason}");
    }
    println!("SKIPPED: {reason}");
    None
}

/// Where the fields of a CDF-1 or CDF-2 header lie, found by walking it (each field's byte
/// offset).
#[derive(Default)]
struct Fields {
    dim_count: usize,
    /// Per dimension: name, offset of its length.
    dim_len: Vec<(String, usize)>,
    var_count: usize,
    /// Per variable: name, offsets of its first dimension id, type, vsize, begin, and its
    /// first attribute's value count.
    vars: Vec<(String, [usize; 5])>,
}

fn walk(file: &[u8]) -> Fields {
    assert!(matches!(file[3], 1 | 2), "a CDF-1 or CDF-2 file");
    let u32_at = |p: usize| u32::from_be_bytes(file[p..p + 4].try_into().unwrap()) as usize;
    let name = |p: &mut usize| {
        let n = u32_at(*p);
        let s = String::from_utf8(file[*p + 4..*p + 4 + n].to_vec()).unwrap();
        *p += 4 + n.div_ceil(4) * 4;
        s
    };
    // Returns the offset of the first attribute's value count (0: none).
    let attributes = |p: &mut usize| {
        let n = u32_at(*p + 4);
        *p += 8;
        let mut first = 0;
        for _ in 0..n {
            name(p);
            if first == 0 {
                first = *p + 4;
            }
            let size = [0, 1, 1, 2, 4, 4, 8][u32_at(*p)];
            *p += 8 + (u32_at(*p + 4) * size).div_ceil(4) * 4;
        }
        first
    };
    let mut f = Fields {
        dim_count: 12,
        ..Fields::default()
    };
    let mut p = 16;
    for _ in 0..u32_at(12) {
        let n = name(&mut p);
        f.dim_len.push((n, p));
        p += 4;
    }
    attributes(&mut p);
    f.var_count = p + 4;
    let vars = u32_at(p + 4);
    p += 8;
    for _ in 0..vars {
        let n = name(&mut p);
        let rank = u32_at(p);
        let first_dim = p + 4;
        p += 4 + 4 * rank;
        let attribute = attributes(&mut p);
        f.vars.push((n, [first_dim, p, p + 4, p + 8, attribute]));
        p += 8 + if file[3] == 1 { 4 } else { 8 };
    }
    f
}

impl Fields {
    fn var(&self, name: &str) -> [usize; 5] {
        self.vars.iter().find(|(n, _)| n == name).unwrap().1
    }

    fn dim(&self, name: &str) -> usize {
        self.dim_len.iter().find(|(n, _)| n == name).unwrap().1
    }
}

#[test]
fn crafted_classic_headers_are_refused_without_a_signal() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cm1) = cm1_file(tmp.path()) else {
        return;
    };
    let good = std::fs::read(&cm1).unwrap();
    let f = walk(&good);
    let [qc_dim, qc_type, qc_vsize, _, _] = f.var("qc");
    let [_, time_type, _, time_begin, time_units] = f.var("time");
    // (name, field offset, value written, what the message must say). Before the
    // validator, the first made netCDF-C read for minutes with memory growing (killed at
    // 60 s with 1 GB resident), the dimension and variable counts SIGSEGV, STREAMING
    // SIGABRT (a 34 GB allocation for `time`), and attribute value counts hang.
    let cases: &[(&str, usize, u32, &[&str])] = &[
        (
            "numrecs_huge",
            4,
            0x7fff_fff0,
            &["variable time", "truncated"],
        ),
        ("numrecs_streaming", 4, u32::MAX, &["STREAMING"]),
        (
            "dim_count_huge",
            f.dim_count,
            0x7fff_fff0,
            &["dimension cannot fit"],
        ),
        (
            "var_count_huge",
            f.var_count,
            0x7fff_fff0,
            &["variable cannot fit"],
        ),
        ("var_type_0", qc_type, 0, &["variable qc has type 0"]),
        ("var_type_99", qc_type, 99, &["variable qc has type 99"]),
        ("time_type_0", time_type, 0, &["variable time has type 0"]),
        (
            "dim_len_huge",
            f.dim("xh"),
            0x7fff_ffff,
            &["variable xh", "truncated"],
        ),
        ("dim_len_zero", f.dim("xh"), 0, &["record dimensions"]),
        ("dim_len_negative", f.dim("xh"), u32::MAX, &["negative"]),
        ("vsize_wrong", qc_vsize, 8, &["variable qc", "vsize is 8"]),
        ("dimid_huge", qc_dim, u32::MAX, &["negative"]),
        ("dimid_unknown", qc_dim + 4, 77, &["dimension id 77"]),
        (
            "begin_past_end",
            time_begin + 4,
            0x7fff_0000,
            &["variable time", "truncated"],
        ),
        (
            "attribute_count_huge",
            time_units,
            0x7fff_ffff,
            &["variable time attribute"],
        ),
    ];
    for (name, at, value, wants) in cases {
        let mut bytes = good.clone();
        bytes[*at..at + 4].copy_from_slice(&value.to_be_bytes());
        let path = tmp.path().join(format!("{name}.nc"));
        std::fs::write(&path, &bytes).unwrap();
        let mut all = vec![path.file_name().unwrap().to_str().unwrap()];
        all.extend_from_slice(wants);
        refused(tmp.path(), &path, &all);
    }
    // A variable name that is not UTF-8 (the netcdf crate panicked on it, exit 101).
    let mut bytes = good.clone();
    let at = bytes.windows(4).position(|w| w == b"qc\0\0").unwrap();
    bytes[at..at + 2].copy_from_slice(&[0xff, 0xfe]);
    let path = tmp.path().join("name_not_utf8.nc");
    std::fs::write(&path, &bytes).unwrap();
    refused(
        tmp.path(),
        &path,
        &["name_not_utf8.nc", "name is not UTF-8"],
    );
}

/// `file` cut to a quarter, a half, and one byte short of its data (a classic file's last
/// bytes may be padding, which netCDF-C writes and no variable needs), each refused naming the file, saying
/// it is truncated, and `what` (the variable, or the bytes missing) where the cut is past
/// the header.
fn cuts_refused(dir: &Path, file: &Path, what: &[&str]) {
    let bytes = std::fs::read(file).unwrap();
    let stem = file.file_stem().unwrap().to_string_lossy();
    for (label, len) in [
        ("quarter", bytes.len() / 4),
        ("half", bytes.len() / 2),
        ("one_short", data_end(&bytes) - 1),
    ] {
        let path = dir.join(format!("{stem}_{label}.nc"));
        std::fs::write(&path, &bytes[..len]).unwrap();
        let name = path.file_name().unwrap().to_str().unwrap().to_string();
        let mut wants = vec![name.as_str(), "truncated"];
        if len >= header_len(&bytes) {
            wants.push("missing");
            wants.extend_from_slice(what);
        }
        refused(dir, &path, &wants);
    }
}

#[test]
fn truncated_files_are_refused_naming_file_variable_and_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path();
    // A classic (CDF-2) file by netCDF4-python: the variable whose data is cut is named.
    // Before the check each imported with exit 0, the missing data read as fill values.
    if let Some(cm1) = cm1_file(&d.join("written")) {
        cuts_refused(d, &cm1, &["variable "]);
    }
    let Some(root) = realdata() else {
        return;
    };
    // The classic realdata file (CDF-1, NCL), and a real CM1 file (netCDF-4: HDF5, whose
    // superblock says how long the file is).
    cuts_refused(
        d,
        &root.join("wrf/salem_wrf_cropped_ncl.nc"),
        &["variable "],
    );
    cuts_refused(
        d,
        &root.join("cm1/cm1r21.1_supercell_48x48x35_stretched/cm1out_000004.nc"),
        &["HDF5 superblock", "bytes"],
    );
}

/// The header's length of a classic file (0 for netCDF-4: no header to cut into).
fn header_len(file: &[u8]) -> usize {
    match supercell::format::netcdf::parse_classic_header(file, file.len() as u64) {
        Ok(h) => h.header_len as usize,
        Err(_) => 0,
    }
}

/// One past the last byte a variable of a classic file needs (the file's length for
/// netCDF-4).
fn data_end(file: &[u8]) -> usize {
    let Ok(h) = supercell::format::netcdf::parse_classic_header(file, file.len() as u64) else {
        return file.len();
    };
    let ends = h.variables.iter().map(|v| match v.is_record {
        true => v.begin + h.numrecs.saturating_sub(1) * h.recsize + v.data_len,
        false => v.begin + v.data_len,
    });
    ends.max().unwrap_or(h.header_len) as usize
}

fn realdata() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/realdata");
    if dir.join("README.md").exists() {
        return Some(dir);
    }
    println!("SKIPPED realdata part: {} is absent", dir.display());
    None
}

#[test]
fn non_finite_values_are_dropped_with_a_count_and_spread_nowhere() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cm1) = cm1_file(tmp.path()) else {
        return;
    };
    // One +inf in prs (CM1's pressure, imported as prs_pert: minus each level's mean), one
    // -inf in uinterp (in wind_speed too), one NaN in qc, written by netCDF4-python.
    let edit = "import netCDF4, numpy as np, sys\n\
                d = netCDF4.Dataset(sys.argv[1], 'a')\n\
                d['prs'][0, 2, 1, 3] = np.inf\n\
                d['uinterp'][0, 1, 1, 1] = -np.inf\n\
                d['qc'][0, 0, 0, 0] = np.nan\n\
                d.close()\n";
    let status = Command::new("/usr/bin/python3")
        .args(["-c", edit, cm1.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    let out = tmp.path().join("ds");
    let r = tool(&[
        "import",
        cm1.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--wind-speed",
    ]);
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    for want in [
        "prs: 1 non-finite value dropped (treated as missing) in record 0; the first, inf, at \
         (x, y, z) = (3, 1, 2)",
        "uinterp: 1 non-finite value dropped (treated as missing) in record 0; the first, -inf",
        "qc: 1 non-finite value dropped (treated as missing) in record 0; the first, NaN",
        "prs_pert: |values| <= 10 dropped, prs minus its level mean; 1 non-finite input value \
         dropped",
        "wind_speed: values <= 5 dropped, |(uinterp, vinterp, winterp)|; 1 non-finite input \
         value dropped",
    ] {
        assert!(r.stdout.contains(want), "{}\nlacks {want:?}", r.stdout);
    }
    // No stored value anywhere is infinite or NaN: the +inf did not turn its level's mean
    // (and so every prs_pert value of the level) infinite.
    let ds = Dataset::open(&out).unwrap();
    let mut buf = AlignedBuf::new();
    ds.read_frame(0, &mut buf, CrcCheck::Verify).unwrap();
    for (a, name) in ds.manifest().attributes.iter().enumerate() {
        let grid = Grid::parse(ds.grid_bytes(0, a, &buf).unwrap()).unwrap();
        let mut active = 0;
        for leaf in grid.leaves() {
            let values = leaf.values_f32().unwrap();
            for n in (0..512).filter(|&n| leaf.is_active(n)) {
                assert!(
                    values[n].is_finite(),
                    "{}: voxel {n} is {}",
                    name.name,
                    values[n]
                );
                active += 1;
            }
        }
        if name.name == "prs_pert" {
            assert!(active > 0, "prs_pert keeps its finite values");
        }
    }
}

#[test]
fn a_small_file_cannot_make_the_import_take_gigabytes() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cm1) = cm1_file(tmp.path()) else {
        return;
    };
    // A 5.5 KB file whose two lowest levels are 3 mm apart: the default voxel height
    // (the thinnest low layer) makes 5 × 4 × 383,000 voxels, about 2 GiB to build for
    // nine attributes. Before the ceiling only the available memory bounded it.
    let edit = "import netCDF4, sys\n\
                d = netCDF4.Dataset(sys.argv[1], 'a')\n\
                z = d['zh'][:]\n\
                z[1] = z[0] + 3e-6\n\
                d['zh'][:] = z\n\
                d.close()\n";
    let status = Command::new("/usr/bin/python3")
        .args(["-c", edit, cm1.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    refused(
        tmp.path(),
        &cm1,
        &["of memory for", "64 times the input", "--dz"],
    );
}

#[test]
fn netcdf_c_written_cdf1_and_cdf5_files_pass_the_header_check_and_cut_ones_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    if cm1_file(&tmp.path().join("written")).is_none() {
        return;
    }
    // netCDF-C's own layout of each format: byte and 64-bit unsigned variables (padding,
    // CDF-5's 8-byte counts), three records.
    let write = "import netCDF4, numpy as np, sys\n\
                 for fmt, name in [('NETCDF3_CLASSIC', 'cdf1.nc'), ('NETCDF3_64BIT_DATA', 'cdf5.nc')]:\n\
                 \x20   d = netCDF4.Dataset(sys.argv[1] + '/' + name, 'w', format=fmt)\n\
                 \x20   d.title = 'formats'\n\
                 \x20   for n, l in [('time', None), ('zh', 3), ('yh', 2), ('xh', 5)]:\n\
                 \x20       d.createDimension(n, l)\n\
                 \x20   for n in ('xh', 'yh', 'zh'):\n\
                 \x20       v = d.createVariable(n, 'f4', (n,))\n\
                 \x20       v.units = 'km'\n\
                 \x20       v[:] = np.arange(len(d.dimensions[n])) * 0.25 + 0.1\n\
                 \x20   t = d.createVariable('time', 'f8', ('time',))\n\
                 \x20   q = d.createVariable('qc', 'f4', ('time', 'zh', 'yh', 'xh'))\n\
                 \x20   b = d.createVariable('flag', 'i1', ('time', 'xh'))\n\
                 \x20   if fmt.endswith('DATA'):\n\
                 \x20       d.createVariable('u64', 'u8', ('zh',))[:] = [1, 2, 3]\n\
                 \x20   for r in range(3):\n\
                 \x20       t[r] = r * 60.0\n\
                 \x20       q[r] = np.full((3, 2, 5), 0.001 * (r + 1))\n\
                 \x20       b[r] = np.arange(5)\n\
                 \x20   d.close()\n";
    let status = Command::new("/usr/bin/python3")
        .args(["-c", write, tmp.path().to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    for name in ["cdf1.nc", "cdf5.nc"] {
        let path = tmp.path().join(name);
        let out = tmp.path().join(format!("{name}.ds"));
        let r = tool(&[
            "import",
            path.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
        ]);
        assert_eq!(r.code, Some(0), "{name}: {}{}", r.stdout, r.stderr);
        assert!(r.stdout.contains("3 frames"), "{name}: {}", r.stdout);
        cuts_refused(tmp.path(), &path, &["variable "]);
    }
}

#[test]
fn a_netcdf4_file_claiming_more_than_it_can_hold_is_refused_by_variable() {
    let tmp = tempfile::tempdir().unwrap();
    if cm1_file(&tmp.path().join("written")).is_none() {
        return;
    }
    // A CM1-layout netCDF-4 file of about 20 KB whose time dimension claims 10^8 records:
    // only the last time is written (HDF5 stores no unwritten chunk). Before the bound the
    // import read 10^8 times (0.8 GB, then 1.6 GB as f64 with their decoded copy) and made
    // a frame list of them.
    let write = "import netCDF4, numpy as np, sys\n\
                 d = netCDF4.Dataset(sys.argv[1], 'w', format='NETCDF4')\n\
                 for n, l in [('time', None), ('zh', 3), ('yh', 2), ('xh', 5)]:\n\
                 \x20   d.createDimension(n, l)\n\
                 for n in ('xh', 'yh', 'zh'):\n\
                 \x20   v = d.createVariable(n, 'f4', (n,))\n\
                 \x20   v.units = 'km'\n\
                 \x20   v[:] = np.arange(len(d.dimensions[n])) * 0.25 + 0.1\n\
                 t = d.createVariable('time', 'f8', ('time',), chunksizes=(1024,))\n\
                 q = d.createVariable('qc', 'f4', ('time', 'zh', 'yh', 'xh'))\n\
                 t[100000000] = 1.0\n\
                 d.close()\n";
    let path = tmp.path().join("claims.nc");
    let status = Command::new("/usr/bin/python3")
        .args(["-c", write, path.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    refused(
        tmp.path(),
        &path,
        &["claims.nc", "variable time claims 100000001 values"],
    );
}

#[test]
fn levels_too_far_apart_for_the_voxel_height_are_refused_not_wrapped() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(cm1) = cm1_file(tmp.path()) else {
        return;
    };
    // Levels from 50 m to 9e39 m with a 0.1 mm layer at the bottom: 10^44 voxels along z.
    // Before, the count wrapped to 0 in a release build (an empty dataset, exit 0) and
    // overflowed (a panic) in a debug one.
    let edit = "import netCDF4, numpy as np, sys\n\
                d = netCDF4.Dataset(sys.argv[1], 'a')\n\
                d['zh'][:] = np.array([0.05, 0.0500001, 1e30, 2e30, 3e30, 9e36], dtype='f4')\n\
                d.close()\n";
    let status = Command::new("/usr/bin/python3")
        .args(["-c", edit, cm1.to_str().unwrap()])
        .status()
        .unwrap();
    assert!(status.success());
    refused(
        tmp.path(),
        &cm1,
        &["cm1out_000001.nc", "along z", "too many voxels"],
    );
}
