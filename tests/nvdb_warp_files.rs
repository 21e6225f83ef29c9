//! Compressed `.nvdb` files written by warp-lang's own writer (`Volume.save_to_nvdb`, 1.19):
//! read and imported, values equal to warp's.
//!
//! warp records a compressed payload's `fileSize` without its 8-byte size prefix; NanoVDB's
//! sequential reader follows the prefixes and reads the files. tests/crosscheck/warp_write.py
//! writes one-grid and two-grid files with every codec and reports warp's own lookups.
//! Skipped with a printed reason where warp-lang or the blosc module is missing, unless
//! `SUPERCELL_REQUIRE_CROSSCHECK` is set (CI), where that is a failure.

use std::path::{Path, PathBuf};

use supercell::dataset::{
    AlignedBuf, CrcCheck, Dataset, LaneSpec, Provenance, import_nvdb_sequence,
};
use supercell::format::{Codec, Coord, Grid, Value, read_nvdb};

mod crosscheck_support;

const TEST: &str = "warp_written_files";

/// warp's files and values, or `None` (after reporting the skip).
fn warp_files(dir: &Path) -> Option<(Vec<Coord>, Vec<Vec<f32>>)> {
    let json = crosscheck_support::run_writer(
        TEST,
        "python3",
        "warp_write.py",
        dir,
        "warp.json",
        "warp-lang or blosc is not installed for python3 (pip install warp-lang blosc)",
    )?;
    let points = crosscheck_support::points(&json);
    let grids = json["grids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            g.as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect()
        })
        .collect();
    Some((points, grids))
}

/// Every point's value in `grid` equals warp's, bit for bit.
fn check_values(grid: &[u8], points: &[Coord], warp: &[f32], label: &str) {
    let g = Grid::parse(grid).unwrap_or_else(|e| panic!("{label}: {e}"));
    let mut acc = g.accessor();
    let mut nonzero = 0;
    for (p, w) in points.iter().zip(warp) {
        let Value::Float(v) = acc.value(*p).unwrap() else {
            panic!("{label}: not a float grid");
        };
        assert_eq!(
            v.to_bits(),
            w.to_bits(),
            "{label}: at {p:?} ours {v}, warp {w}"
        );
        nonzero += usize::from(v != 0.0);
    }
    assert!(
        nonzero > 40,
        "{label}: only {nonzero} sampled values are set"
    );
}

#[test]
fn warp_written_files_read_and_import_with_warps_values() {
    let dir = tempfile::tempdir().unwrap();
    let Some((points, warp)) = warp_files(dir.path()) else {
        return;
    };
    for codec in [Codec::None, Codec::Zip, Codec::Blosc] {
        for (stem, count) in [("single", 1), ("pair", 2)] {
            let path = dir.path().join(format!("{stem}_{codec}.nvdb"));
            let grids = read_nvdb(&path).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(grids.len(), count, "{}", path.display());
            for (i, g) in grids.iter().enumerate() {
                assert_eq!(g.meta.codec, codec);
                check_values(
                    &g.bytes,
                    &points,
                    &warp[i],
                    &format!("{stem}_{codec} grid {i}"),
                );
            }
        }
    }
    // Imported (one frame per codec), then sampled from the dataset.
    let files: Vec<PathBuf> = ["none", "zip", "blosc"]
        .iter()
        .map(|c| dir.path().join(format!("pair_{c}.nvdb")))
        .collect();
    let out = dir.path().join("ds");
    import_nvdb_sequence(
        &files,
        &out,
        LaneSpec::Count(2),
        1 << 20,
        None,
        Provenance::default(),
        |_| {},
    )
    .unwrap();
    let ds = Dataset::open(&out).unwrap();
    assert_eq!(ds.frame_count(), 3);
    let mut buf = AlignedBuf::new();
    for frame in 0..3 {
        ds.read_frame(frame, &mut buf, CrcCheck::Verify).unwrap();
        for (a, values) in warp.iter().enumerate() {
            let bytes = ds.grid_bytes(frame, a, &buf).unwrap();
            check_values(
                bytes,
                &points,
                values,
                &format!("imported frame {frame} grid {a}"),
            );
        }
    }
}

/// The two ways of recording `fileSize` are accepted, other values are not; a warp file cut
/// short or with a broken size prefix is refused with a clear error.
#[test]
fn warp_framing_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let Some(_) = warp_files(dir.path()) else {
        return;
    };
    for codec in ["zip", "blosc"] {
        let good = std::fs::read(dir.path().join(format!("pair_{codec}.nvdb"))).unwrap();
        let read = |b: &[u8]| supercell::format::read_nvdb_bytes(b).map(|g| g.len());
        assert_eq!(read(&good).unwrap(), 2);
        // NanoVDB's own record (prefix included) for the first grid's fileSize reads too.
        let file_size = u64::from_le_bytes(good[24..32].try_into().unwrap());
        let mut nanovdb_style = good.clone();
        nanovdb_style[24..32].copy_from_slice(&(file_size + 8).to_le_bytes());
        assert_eq!(read(&nanovdb_style).unwrap(), 2);
        // Any other record is refused.
        for wrong in [file_size - 1, file_size + 1, file_size + 16] {
            let mut b = good.clone();
            b[24..32].copy_from_slice(&wrong.to_le_bytes());
            let e = read(&b).unwrap_err().to_string();
            assert!(
                e.contains("file metadata says") && e.contains("grid 0"),
                "{e}"
            );
        }
        // Every cut is an error, never a panic.
        for cut in (0..good.len())
            .step_by(good.len() / 97 + 1)
            .chain([good.len() - 1])
        {
            assert!(read(&good[..cut]).is_err(), "{codec}: cut at {cut}");
        }
        // A first size prefix pointing past the end.
        let name_size = u32::from_le_bytes(good[16 + 136..16 + 140].try_into().unwrap()) as usize;
        let name_size_1 = {
            let at = 16 + 176 + name_size + 136;
            u32::from_le_bytes(good[at..at + 4].try_into().unwrap()) as usize
        };
        let payload = 16 + 2 * 176 + name_size + name_size_1;
        let mut b = good.clone();
        b[payload..payload + 8].copy_from_slice(&(good.len() as u64).to_le_bytes());
        let e = read(&b).unwrap_err().to_string();
        assert!(e.contains("runs past the end"), "{e}");
    }
}
