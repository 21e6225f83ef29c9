//! The synthetic supercell: determinism, anatomy, sparsity, frame sizes, and an end-to-end
//! dataset. Resolutions are small (debug builds); close-ups of the tornado use a region of
//! a high-resolution domain, which costs only that region.

use std::collections::HashMap;
use supercell::dataset::{CrcCheck, Dataset, LaneSpec, Provenance, verify};
use supercell::format::{BuildOptions, Grid, GridType, SparseVolume, Value, build_grid};
use supercell::synth::size::{measure_frame, resolution_for_target};
use supercell::synth::{
    Attribute, GenerateOptions, Storm, StormParams, default_params, generate_dataset,
    generate_frames,
};

fn params(resolution: u32) -> StormParams {
    StormParams {
        resolution,
        ..default_params()
    }
}

fn volume(vols: &[(Attribute, SparseVolume)], a: Attribute) -> &SparseVolume {
    &vols.iter().find(|(x, _)| *x == a).unwrap().1
}

/// Every active voxel of a volume as (world position, value).
fn active(vol: &SparseVolume, dx: f32) -> Vec<([f32; 3], f32)> {
    let mut out = Vec::new();
    for b in &vol.bricks {
        for n in 0..512 {
            if b.is_active(n) {
                let ijk = [
                    b.origin[0] + (n >> 6) as i32,
                    b.origin[1] + (n >> 3 & 7) as i32,
                    b.origin[2] + (n & 7) as i32,
                ];
                out.push((ijk.map(|c| c as f32 * dx), b.values[n]));
            }
        }
    }
    out
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .unwrap()
}

#[test]
fn identical_for_any_thread_count_and_run() {
    let p = StormParams {
        frames: 3,
        ..params(64)
    };
    let opts = GenerateOptions {
        grid_type: GridType::Fp16,
        max_frames_in_flight: 2,
        ..GenerateOptions::default()
    };
    let run = |threads: usize| {
        pool(threads).install(|| {
            let storm = Storm::new(p.clone());
            let vols = storm.frame_volumes(1);
            let mut grids = Vec::new();
            let sink = |f: supercell::synth::EncodedFrame| {
                grids.push(f.grids);
                Ok(())
            };
            generate_frames(&storm, &opts, sink, |_| {}).unwrap();
            (vols, grids)
        })
    };
    let (v1, g1) = run(1);
    let (v3, g3) = run(3);
    let (v3b, g3b) = run(3);
    assert!(
        v1 == v3 && v3 == v3b,
        "volumes depend on the thread count or run"
    );
    assert_eq!(g1.len(), 3);
    assert!(
        g1 == g3 && g3 == g3b,
        "grid bytes depend on the thread count or run"
    );
    // Different seeds make different storms.
    let other = Storm::new(StormParams {
        seed: 7,
        ..p.clone()
    })
    .frame_volumes(1);
    assert!(other != v1);
}

#[test]
fn values_stay_in_their_nominal_ranges_and_reach_storm_strength() {
    let p = params(96);
    let storm = Storm::new(p.clone());
    let vols = storm.frame_volumes(30);
    let dx = p.voxel_size_m() as f32;
    for (a, v) in &vols {
        let (lo, hi) = a.info().range;
        let vals = active(v, dx);
        assert!(!vals.is_empty(), "{a} has no active voxel");
        for (pos, x) in &vals {
            assert!(
                x.is_finite() && *x >= lo && *x <= hi,
                "{a} = {x} at {pos:?}"
            );
        }
    }
    let max = |a| {
        active(volume(&vols, a), dx)
            .iter()
            .fold(f32::MIN, |m, v| m.max(v.1))
    };
    let min = |a| {
        active(volume(&vols, a), dx)
            .iter()
            .fold(f32::MAX, |m, v| m.min(v.1))
    };
    assert!(max(Attribute::Cloud) > 1.5);
    assert!(max(Attribute::Rain) > 2.0);
    assert!(max(Attribute::VerticalVelocity) > 30.0, "updraft too weak");
    assert!(min(Attribute::VerticalVelocity) < -5.0, "no downdraft");
    assert!(max(Attribute::WindSpeed) > 35.0);
}

#[test]
fn anvil_spreads_downwind_at_the_top_and_rain_falls_below_cloud_base() {
    let p = params(96);
    let storm = Storm::new(p.clone());
    let frame = 24;
    let vols = storm.frame_volumes(frame);
    let dx = p.voxel_size_m() as f32;
    let meso = storm.model(p.frame_time(frame)).meso;
    let cloud = active(volume(&vols, Attribute::Cloud), dx);
    let reach = |z0: f32, z1: f32| {
        cloud
            .iter()
            .filter(|(q, _)| q[2] >= z0 && q[2] < z1)
            .fold(f32::MIN, |m, (q, _)| m.max(q[0] - meso[0]))
    };
    let top = reach(10_000.0, 13_000.0);
    let mid = reach(2_000.0, 5_000.0);
    assert!(top > 15_000.0, "anvil reaches only {top} m downwind");
    assert!(mid < 8_000.0, "mid-level cloud reaches {mid} m downwind");
    // The anvil is flat-topped: almost no cloud above the overshooting top.
    let above = cloud.iter().filter(|(q, _)| q[2] > 14_500.0).count();
    assert_eq!(above, 0);
    // The overshooting top rises above the anvil over the updraft only.
    let dome: Vec<_> = cloud.iter().filter(|(q, _)| q[2] > 12_500.0).collect();
    assert!(!dome.is_empty(), "no overshooting top");
    assert!(dome.iter().all(|(q, _)| (q[0] - meso[0]).abs() < 6_000.0));

    let rain = active(volume(&vols, Attribute::Rain), dx);
    let below_base = rain
        .iter()
        .filter(|(q, v)| q[2] < 1_000.0 && *v > 0.5)
        .count();
    assert!(
        below_base > 100,
        "only {below_base} rainy voxels below cloud base"
    );
    // No cloud below 500 m away from the tornado: the cloud base is aloft.
    let ground = storm.model(p.frame_time(frame)).tornado_ground;
    let low_cloud = cloud
        .iter()
        .filter(|(q, _)| q[2] < 500.0 && (q[0] - ground[0]).hypot(q[1] - ground[1]) > 1_500.0);
    assert_eq!(low_cloud.count(), 0);
    // The hook: rain wraps round the mesocyclone's west side at low levels.
    let west = rain
        .iter()
        .filter(|(q, _)| {
            q[2] < 1_500.0 && q[0] < meso[0] - 1_500.0 && (q[1] - meso[1]).abs() < 1_500.0
        })
        .count();
    assert!(west > 10, "no hook west of the mesocyclone");
}

/// Wind speed, vorticity and cloud in a box around the tornado's ground point, sampled at
/// 31 m (a region of a 1024-voxel domain).
struct Closeup {
    max_wind_low: f32,
    max_wind_at: [f32; 2],
    cloud_near_ground: usize,
    max_vorticity: f32,
}

fn closeup(storm: &Storm, frame: u32) -> Closeup {
    let p = storm.params();
    let t = p.frame_time(frame);
    let g = storm.model(t).tornado_ground;
    let dx = p.voxel_size_m() as f32;
    let c = g.map(|v| (v / dx) as u32);
    let r = (600.0 / dx) as u32;
    let lo = [c[0] - r, c[1] - r, 0];
    let hi = [c[0] + r, c[1] + r, (300.0 / dx) as u32];
    let (vols, _) = storm.volumes_in(t, lo, hi);
    let mut out = Closeup {
        max_wind_low: 0.0,
        max_wind_at: [0.0; 2],
        cloud_near_ground: 0,
        max_vorticity: 0.0,
    };
    for (q, v) in active(volume(&vols, Attribute::WindSpeed), dx) {
        if q[2] < 250.0 && v > out.max_wind_low {
            out.max_wind_low = v;
            out.max_wind_at = [q[0], q[1]];
        }
    }
    // The funnel and its debris are on their own nested grid, the rest of the cloud on the
    // storm's: count both.
    let dxf = p.transform_of(Attribute::FunnelCloud).voxel_size_m as f32;
    for (a, dx) in [(Attribute::Cloud, dx), (Attribute::FunnelCloud, dxf)] {
        for (q, v) in active(volume(&vols, a), dx) {
            if q[2] < 100.0 && (q[0] - g[0]).hypot(q[1] - g[1]) < 300.0 && v > 0.5 {
                out.cloud_near_ground += 1;
            }
        }
    }
    for (_, v) in active(volume(&vols, Attribute::Vorticity), dx) {
        out.max_vorticity = out.max_vorticity.max(v);
    }
    out
}

#[test]
fn tornado_touches_down_rotates_and_moves() {
    let storm = Storm::new(params(1024));
    let before = closeup(&storm, 3);
    let after = closeup(&storm, 30);
    let later = closeup(&storm, 38);
    assert!(
        before.max_wind_low < 45.0,
        "{} m/s near the ground before touchdown",
        before.max_wind_low
    );
    assert_eq!(
        before.cloud_near_ground, 0,
        "funnel on the ground too early"
    );
    assert!(
        after.max_wind_low > 70.0,
        "only {} m/s near the ground after touchdown",
        after.max_wind_low
    );
    assert!(
        after.cloud_near_ground > 20,
        "no funnel or debris at the ground"
    );
    assert!(after.max_vorticity > 0.5, "vortex core too weak");
    let moved = (later.max_wind_at[0] - after.max_wind_at[0])
        .hypot(later.max_wind_at[1] - after.max_wind_at[1]);
    assert!(moved > 150.0, "the vortex moved only {moved} m in 8 frames");
    // Touchdown happens at the configured fraction of the sequence.
    let p = storm.params();
    let tip = |f| storm.model(p.frame_time(f)).funnel_tip;
    assert!(tip(15) > 0.0 && tip(18) <= 0.0);
}

#[test]
fn consecutive_frames_are_similar_but_not_identical() {
    let p = params(64);
    let storm = Storm::new(p.clone());
    let cloud_set = |f| {
        let vols = storm.frame_volumes(f);
        let v = volume(&vols, Attribute::Cloud);
        active(v, 1.0)
            .into_iter()
            .map(|(q, x)| (q.map(|c| c as i32), x))
            .collect::<HashMap<_, _>>()
    };
    let (a, b, z) = (cloud_set(20), cloud_set(21), cloud_set(47));
    let jaccard = |x: &HashMap<[i32; 3], f32>, y: &HashMap<[i32; 3], f32>| {
        let common = x.keys().filter(|k| y.contains_key(*k)).count();
        common as f64 / (x.len() + y.len() - common) as f64
    };
    let near = jaccard(&a, &b);
    let far = jaccard(&a, &z);
    assert!(near > 0.85, "consecutive frames overlap only {near:.2}");
    assert!(
        far < near - 0.05,
        "distant frames overlap as much ({far:.2} vs {near:.2})"
    );
    let changed = a.iter().filter(|(k, v)| b.get(*k) != Some(*v)).count();
    assert!(changed * 5 > a.len(), "consecutive frames barely change");
}

#[test]
fn empty_air_is_not_emitted() {
    let p = params(192);
    let storm = Storm::new(p.clone());
    let (vols, stats) = storm.volumes_at(p.frame_time(10));
    let total: u64 = p.dims().iter().map(|d| (d / 8) as u64).product();
    let union: std::collections::HashSet<_> = vols
        .iter()
        .flat_map(|(_, v)| v.bricks.iter().map(|b| b.origin))
        .collect();
    assert!(
        (union.len() as u64) * 5 < total,
        "{} of {total} bricks",
        union.len()
    );
    assert!(
        stats.candidates < total / 3,
        "culling evaluated {stats:?} of {total}"
    );
    for (a, v) in &vols {
        assert!(
            v.bricks.iter().all(|b| b.active_count() > 0),
            "{a}: empty brick"
        );
    }
}

#[test]
fn resolution_picker_hits_the_target_size() {
    for (gt, target) in [
        (GridType::Fp16, 6_000_000u64),
        (GridType::Float, 20_000_000),
    ] {
        let p = StormParams {
            frames: 3,
            ..params(64)
        };
        let est = resolution_for_target(&p, gt, target);
        let storm = Storm::new(StormParams {
            resolution: est.resolution,
            ..p.clone()
        });
        let actual: u64 = (0..3)
            .map(|f| measure_frame(&storm, f, gt).frame_bytes)
            .sum::<u64>()
            / 3;
        let err = actual as f64 / target as f64 - 1.0;
        assert!(
            err.abs() < 0.25,
            "{gt}: target {target}, resolution {}, estimated {}, actual {actual}",
            est.resolution,
            est.frame_bytes
        );
    }
}

#[test]
fn size_formula_matches_the_encoder() {
    let p = params(64);
    let storm = Storm::new(p.clone());
    for (a, v) in storm.frame_volumes(20) {
        for gt in [
            GridType::Float,
            GridType::Fp16,
            GridType::Fp8,
            GridType::Fp4,
        ] {
            let opts = BuildOptions {
                name: a.name().into(),
                grid_type: gt,
                ..BuildOptions::default()
            };
            let grid = build_grid(&v, &opts).unwrap();
            assert_eq!(
                grid.len() as u64,
                supercell::synth::size::volume_grid_bytes(&v, gt),
                "{a} {gt}"
            );
        }
    }
}

#[test]
fn generates_a_readable_dataset() {
    let p = StormParams {
        frames: 3,
        ..params(48)
    };
    let dir = tempfile::tempdir().unwrap();
    let mut seen = Vec::new();
    let (report, manifest) = generate_dataset(
        &p,
        &GenerateOptions::default(),
        dir.path(),
        LaneSpec::Count(2),
        64 << 10,
        Provenance::new("synth test", ["--resolution", "48"]),
        |pr| seen.push(pr.frames_done),
    )
    .unwrap();
    assert_eq!(seen, vec![1, 2, 3]);
    assert_eq!(report.frames, 3);
    assert_eq!(manifest.frame_count, 3);
    let ds = Dataset::open(dir.path()).unwrap();
    let names: Vec<_> = ds
        .manifest()
        .attributes
        .iter()
        .map(|a| a.name.clone())
        .collect();
    let want: Vec<_> = Attribute::DEFAULT
        .iter()
        .map(|a| a.name().to_string())
        .collect();
    assert_eq!(names, want);
    assert!(verify(&ds, |_| {}).problems.is_empty());

    // Frame 2's cloud grid holds what the generator computed, to Fp16 precision.
    let mut buf = supercell::dataset::AlignedBuf::new();
    ds.read_frame(2, &mut buf, CrcCheck::Verify).unwrap();
    let bytes = ds.grid_bytes(2, 0, &buf).unwrap();
    let grid = Grid::parse(bytes).unwrap();
    assert_eq!(grid.name(), "cloud");
    assert_eq!(grid.grid_type(), GridType::Fp16);
    let vols = Storm::new(p.clone()).frame_volumes(2);
    let cloud = volume(&vols, Attribute::Cloud);
    let mut acc = grid.accessor();
    for b in cloud.bricks.iter().step_by(7) {
        for n in (0..512).step_by(37) {
            let ijk = [
                b.origin[0] + (n >> 6) as i32,
                b.origin[1] + (n >> 3 & 7) as i32,
                b.origin[2] + (n & 7) as i32,
            ];
            let Value::Float(v) = acc.value(ijk).unwrap() else {
                panic!("not a float grid")
            };
            assert!(
                (v - b.values[n]).abs() < 2e-3 * 4.0,
                "{ijk:?}: {v} vs {}",
                b.values[n]
            );
        }
    }
}
