//! The player's slice and probe on real CM1 output: the stretched supercell run's last
//! file in `../shared/realdata/cm1` (45 min, reflectivity up to 67 dBZ), imported, played
//! headlessly; a horizontal slice of reflectivity at 1 km (world z: the model's height above
//! the ground, which the import keeps) equals the
//! CPU reader's samples at its pixels' world positions, and the probe on it names the voxel,
//! the value and the unit (dBZ) the CPU reads there. Skipped with a message where the folder
//! or a GPU adapter is absent (a GPU is required where `SUPERCELL_REQUIRE_GPU` is set).

mod netcdf_reference;

use std::time::{Duration, Instant};

use netcdf_reference::{import, realdata};
use supercell::app::analysis::{self, Axis, Slice};
use supercell::app::{PathSel, Player, PlayerConfig, PlayerGpu};
use supercell::dataset::{AlignedBuf, CrcCheck, Dataset};
use supercell::format::{Grid, Interpolation, Value};

#[test]
fn cm1_reflectivity_slice_at_1_km_and_its_probe_read_what_the_cpu_reads() {
    let Some(root) = realdata() else { return };
    let file = root.join("cm1/cm1r21.1_supercell_48x48x35_stretched/cm1out_000004.nc");
    let g = match PlayerGpu::open(PlayerGpu::instance(), None) {
        Ok(g) => g,
        Err(e) if std::env::var_os("SUPERCELL_REQUIRE_GPU").is_none() => {
            println!("SKIPPED: no GPU adapter ({e})");
            return;
        }
        Err(e) => panic!("no GPU adapter and SUPERCELL_REQUIRE_GPU is set: {e}"),
    };
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("cm1");
    import(&[file], &ds, &[]);
    let cfg = PlayerConfig {
        width: 64,
        height: 48,
        path: PathSel::Host,
        threads: 2,
        ..PlayerConfig::default()
    };
    let mut player = Player::new(&g.device, &g.queue, &ds, &cfg).expect("player");
    player.set_playing(false);
    let end = Instant::now() + Duration::from_secs(60);
    while player.shown_frame() != Some(0) {
        assert!(Instant::now() < end, "frame 0 was not shown");
        if player.tick().expect("tick").shown.is_none() {
            player.wait(Duration::from_millis(2));
        }
    }
    let names = player.attribute_units();
    let dbz = names
        .iter()
        .position(|(n, _)| n == "dbz")
        .unwrap_or_else(|| panic!("no dbz in {names:?}"));
    assert_eq!(names[dbz].1.as_deref(), Some("dBZ"), "{names:?}");

    // The import keeps CM1's heights: its lowest level is 100 m above the ground.
    let bottom = f64::from(player.view().world_bbox[0][2]);
    assert!((bottom - 100.0).abs() < 1.0, "lowest level at {bottom} m");
    let slice = Slice {
        axis: Axis::Z,
        at: 1000.0,
        attribute: dbz,
    };
    let img = analysis::slice_image(&mut player, &slice).expect("slice");
    let d = Dataset::open(&ds).unwrap();
    let mut slot = AlignedBuf::new();
    d.read_frame(0, &mut slot, CrcCheck::Verify).unwrap();
    let grid = Grid::parse(d.grid_bytes(0, dbz, &slot).unwrap()).unwrap();
    let cpu = |p: [f64; 3]| {
        let s = grid.sample_world(p, Interpolation::Linear).unwrap();
        let Value::Float(v) = s.value else {
            panic!("{s:?}")
        };
        (f64::from(v), s.index.map(|c| c.round() as i32))
    };
    let mut strong = 0;
    for j in 0..img.height {
        for i in 0..img.width {
            let p = img.world_at(i as f64, j as f64);
            let want = cpu(p).0;
            let got = f64::from(img.values[j * img.width + i]);
            assert!(
                (got - want).abs() <= 1e-3 * want.abs().max(1.0),
                "pixel ({i}, {j}) at {p:?}: GPU {got} dBZ, CPU {want}"
            );
            strong += usize::from(want > 40.0);
        }
    }
    println!(
        "CM1 dbz slice at 1 km: {}x{} pixels equal the CPU's, {strong} over 40 dBZ",
        img.width, img.height
    );
    assert!(strong > 0, "the storm's core shows at 1 km");

    // The probe at the pixel where the domain's centre 1 km up appears: on the plane, 1 km
    // up, reflectivity in dBZ.
    let b = player.view().world_bbox.map(|c| c.map(f64::from));
    let centre = [
        0.5 * (b[0][0] + b[1][0]),
        0.5 * (b[0][1] + b[1][1]),
        slice.at,
    ];
    let px = analysis::project(&player, centre).expect("the centre is in front of the eye");
    let r = analysis::probe(&mut player, Some(&slice), px)
        .expect("probe")
        .expect("the pixel's ray meets the plane");
    for k in 0..2 {
        assert!(
            (r.world[k] - centre[k]).abs() < 50.0,
            "{r:?} against {centre:?}"
        );
    }
    assert!((r.km[2] - 1.0).abs() < 1e-9, "{r:?}");
    let v = &r.values[dbz];
    assert_eq!(v.units.as_deref(), Some("dBZ"));
    let (want, voxel) = cpu(r.world);
    assert!(
        (v.value.unwrap() - want).abs() <= 1e-3 * want.abs().max(1.0),
        "{v:?}: {want}"
    );
    assert_eq!(v.voxel, Some(voxel));
}
