//! `supercell-data import --bricks 2` of real CM1 output (`../shared/realdata`; skipped
//! with a message where absent): every brick's grid holds exactly the unbricked import's
//! leaves inside the brick's box and halo (so every index there reads the same value and
//! state), the owned boxes hold every active voxel once, for float (leaves encoded as
//! they are made) and fp16 (built from a volume) grids; and `.vdb`/`.nvdb` imports refuse
//! `--bricks` by name.

mod netcdf_reference;

use std::collections::HashMap;
use std::path::Path;

use netcdf_reference::{import, realdata, tool};
use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
use supercell::format::{Coord, Grid};

/// Every leaf of `grid`: origin → (value bits, active mask).
fn leaves_of(grid: &Grid<'_>) -> HashMap<Coord, (Vec<u32>, [u64; 8])> {
    grid.leaves()
        .map(|l| {
            let values = l
                .values_f32()
                .unwrap()
                .iter()
                .map(|v| v.to_bits())
                .collect();
            (l.origin(), (values, l.active_mask()))
        })
        .collect()
}

/// Compares every frame of the bricked `bricked` with the whole-grid `whole`; returns the
/// active voxels checked.
fn compare(whole: &Path, bricked: &Path) -> usize {
    let (whole, bricked) = (
        Dataset::open(whole).unwrap(),
        Dataset::open(bricked).unwrap(),
    );
    let bm = bricked.manifest();
    assert_eq!(bm.bricks.len(), 2);
    assert_eq!(whole.frame_count(), bricked.frame_count());
    let mut active = 0;
    for f in 0..whole.frame_count() {
        let (mut wbuf, mut bbuf) = (AlignedBuf::new(), AlignedBuf::new());
        whole.read_frame(f, &mut wbuf, CrcCheck::Verify).unwrap();
        bricked.read_frame(f, &mut bbuf, CrcCheck::Verify).unwrap();
        let wg = whole.frame_grids(f, &wbuf).unwrap();
        for (entry, bytes) in bricked.frame_grids(f, &bbuf).unwrap() {
            let (a, b) = (entry.attribute as usize, entry.brick.unwrap() as usize);
            let w = Grid::parse(wg[a].1).unwrap();
            let mut expected = leaves_of(&w);
            // The brick's box grown by one leaf (8 voxels), computed here.
            let [lo, hi] = bm.bricks[b].index_box;
            expected.retain(|&o, _| (0..3).all(|k| o[k] >= lo[k] - 8 && o[k] < hi[k] + 8));
            let got = leaves_of(&Grid::parse(bytes).unwrap());
            assert_eq!(got, expected, "frame {f} attribute {a} brick {b}");
        }
        for (a, (_, bytes)) in wg.iter().enumerate() {
            for leaf in Grid::parse(bytes).unwrap().leaves() {
                let o = leaf.origin();
                for n in (0..512).filter(|&n| leaf.is_active(n)) {
                    let p = [
                        o[0] + (n >> 6) as i32,
                        o[1] + ((n >> 3) & 7) as i32,
                        o[2] + (n & 7) as i32,
                    ];
                    let owners = (bm.bricks.iter())
                        .filter(|b| {
                            (0..3).all(|k| p[k] >= b.index_box[0][k] && p[k] < b.index_box[1][k])
                        })
                        .count();
                    assert_eq!(
                        owners, 1,
                        "frame {f} attribute {a}: {p:?} owned {owners} times"
                    );
                    active += 1;
                }
            }
        }
    }
    active
}

#[test]
fn a_netcdf_import_in_two_bricks_holds_the_unbricked_values() {
    let Some(root) = realdata() else { return };
    let files = vec![root.join("cm1/cm1r21.1_supercell_48x48x36_uniform_multitime/cm1out.nc")];
    let tmp = tempfile::tempdir().unwrap();
    for grid_type in ["float", "fp16"] {
        let whole = tmp.path().join(format!("whole-{grid_type}"));
        let bricked = tmp.path().join(format!("b2-{grid_type}"));
        import(&files, &whole, &["--grid-type", grid_type]);
        let stdout = import(
            &files,
            &bricked,
            &["--grid-type", grid_type, "--bricks", "2"],
        );
        assert!(stdout.contains("2 spatial bricks"), "{stdout}");
        let active = compare(&whole, &bricked);
        println!("{grid_type}: {active} active voxels, each owned by one brick");
        assert!(active > 1000, "{grid_type}: only {active} active voxels");
    }
}

#[test]
fn vdb_and_nvdb_imports_refuse_bricks_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("frame.nvdb");
    std::fs::write(&file, b"not read: refused first").unwrap();
    let out = tmp.path().join("ds");
    let o = tool(&[
        "import",
        file.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--bricks",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        stderr.contains("--bricks") && stderr.contains("frame.nvdb"),
        "{stderr}"
    );
    assert!(!out.join("manifest.json").exists());
}
