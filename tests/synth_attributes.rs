//! The generator's full attribute set: every field physically sane where the storm's
//! anatomy says it must be, the default fields unchanged by asking for more, attribute
//! selection parsing, and the resolution picker's accuracy for several sizes and attribute
//! counts.

use supercell::format::{GridType, SparseVolume};
use supercell::synth::model::{
    ALL_ICE_LEVEL, FREEZING_LEVEL, reflectivity_coefficients_from_distributions,
};
use supercell::synth::size::{census_frame, measure_frame, resolution_for_target};
use supercell::synth::{Attribute, Storm, StormParams, default_params};

fn all(resolution: u32) -> StormParams {
    StormParams {
        resolution,
        attributes: Attribute::ALL.to_vec(),
        ..default_params()
    }
}

/// Every active voxel of `a` as (world position, value).
fn active(vols: &[(Attribute, SparseVolume)], a: Attribute, dx: f32) -> Vec<([f32; 3], f32)> {
    let vol = &vols.iter().find(|(x, _)| *x == a).unwrap().1;
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

/// The value of `a` at every voxel where it is active, keyed by index position.
fn field(
    vols: &[(Attribute, SparseVolume)],
    a: Attribute,
) -> std::collections::HashMap<[i32; 3], f32> {
    let vol = &vols.iter().find(|(x, _)| *x == a).unwrap().1;
    let mut out = std::collections::HashMap::new();
    for b in &vol.bricks {
        for n in 0..512 {
            if b.is_active(n) {
                let ijk = [
                    b.origin[0] + (n >> 6) as i32,
                    b.origin[1] + (n >> 3 & 7) as i32,
                    b.origin[2] + (n & 7) as i32,
                ];
                out.insert(ijk, b.values[n]);
            }
        }
    }
    out
}

fn argmax(v: &[([f32; 3], f32)]) -> ([f32; 3], f32) {
    v.iter()
        .copied()
        .fold(([0.0; 3], f32::MIN), |m, x| if x.1 > m.1 { x } else { m })
}

fn argmin(v: &[([f32; 3], f32)]) -> ([f32; 3], f32) {
    v.iter()
        .copied()
        .fold(([0.0; 3], f32::MAX), |m, x| if x.1 < m.1 { x } else { m })
}

#[test]
fn every_attribute_is_present_and_in_its_nominal_range() {
    let p = all(96);
    let storm = Storm::new(p.clone());
    let dx = p.voxel_size_m() as f32;
    for frame in [5, 30, 47] {
        let vols = storm.frame_volumes(frame);
        assert_eq!(vols.len(), Attribute::ALL.len());
        for (a, _) in &vols {
            let (lo, hi) = a.info().range;
            let vals = active(&vols, *a, dx);
            assert!(!vals.is_empty(), "frame {frame}: {a} has no active voxel");
            for (pos, x) in &vals {
                assert!(
                    x.is_finite() && *x >= lo && *x <= hi,
                    "frame {frame}: {a} = {x} at {pos:?} outside {lo}..{hi}"
                );
            }
        }
    }
}

#[test]
fn asking_for_more_attributes_leaves_the_default_ones_bit_identical() {
    let p = StormParams {
        resolution: 64,
        ..default_params()
    };
    let few = Storm::new(p.clone()).frame_volumes(30);
    let many = Storm::new(StormParams {
        attributes: Attribute::ALL.to_vec(),
        ..p
    })
    .frame_volumes(30);
    for (a, v) in &few {
        let w = &many.iter().find(|(b, _)| b == a).unwrap().1;
        assert!(v == w, "{a} changed when every attribute was generated");
    }
}

#[test]
fn condensate_splits_into_water_below_and_ice_above() {
    let p = all(96);
    let storm = Storm::new(p.clone());
    let vols = storm.frame_volumes(30);
    let dx = p.voxel_size_m() as f32;
    let cloud = field(&vols, Attribute::Cloud);
    let qc = field(&vols, Attribute::CloudWater);
    let qi = field(&vols, Attribute::CloudIce);
    // The funnel's condensate is on the nested grid (its voxel 4k is the storm grid's k),
    // and left out of `cloud`: the total condensate is the two together.
    let funnel = field(&vols, Attribute::FunnelCloud);
    let r = supercell::synth::NEST_REFINEMENT as i32;
    let total_cloud = |k: &[i32; 3]| {
        cloud.get(k).copied().unwrap_or(0.0) + funnel.get(&k.map(|c| c * r)).copied().unwrap_or(0.0)
    };
    for (k, &c) in &qc {
        let z = k[2] as f32 * dx;
        assert!(
            z < ALL_ICE_LEVEL,
            "cloud water {c} at {z} m, above the all-ice level"
        );
        let total = c + qi.get(k).copied().unwrap_or(0.0);
        assert!(
            total <= total_cloud(k) + 1e-4,
            "qc + qi {total} > cloud + funnel_cloud {}",
            total_cloud(k)
        );
    }
    for (k, &i) in &qi {
        let z = k[2] as f32 * dx;
        assert!(
            z > FREEZING_LEVEL,
            "cloud ice {i} at {z} m, below the melting level"
        );
    }
    // The anvil is ice, the lower updraft water.
    let anvil_ice = qi
        .iter()
        .filter(|(k, v)| k[2] as f32 * dx > 10_500.0 && **v > 0.2);
    assert!(anvil_ice.count() > 100, "no ice in the anvil");
    let low_water = qc
        .iter()
        .filter(|(k, v)| (k[2] as f32 * dx) < 3_000.0 && **v > 1.0);
    assert!(
        low_water.count() > 20,
        "no cloud water in the lower updraft"
    );
    // Snow in the anvil, graupel aloft, hail reaching the ground.
    let snow = active(&vols, Attribute::Snow, dx);
    assert!(snow.iter().any(|(q, v)| q[2] > 10_000.0 && *v > 0.1));
    let graupel = active(&vols, Attribute::Graupel, dx);
    let (g_at, g_max) = argmax(&graupel);
    assert!(
        g_max > 0.5 && g_at[2] > 3_000.0,
        "graupel peaks {g_max} at {g_at:?}"
    );
    let hail = active(&vols, Attribute::Hail, dx);
    assert!(
        hail.iter().any(|(q, v)| q[2] < 300.0 && *v > 1.0),
        "no hail reaches the ground"
    );
    assert!(hail.iter().all(|(q, _)| q[2] < 8_000.0));
}

#[test]
fn reflectivity_peaks_in_the_hail_core_beside_the_weak_echo_region() {
    let p = all(96);
    let storm = Storm::new(p.clone());
    let frame = 30;
    let vols = storm.frame_volumes(frame);
    let dx = p.voxel_size_m() as f32;
    let dbz = active(&vols, Attribute::Reflectivity, dx);
    let hail = field(&vols, Attribute::Hail);
    let (at, max) = argmax(&dbz);
    assert!((60.0..78.0).contains(&max), "peak reflectivity {max} dBZ");
    let k = at.map(|c| (c / dx).round() as i32);
    let h = hail.get(&k).copied().unwrap_or(0.0);
    assert!(
        h > 1.0,
        "peak reflectivity at {at:?} has only {h} g/kg hail"
    );
    // Rain alone (the hook, far from the hail) is weaker; the anvil weaker still.
    let anvil = dbz
        .iter()
        .filter(|(q, _)| q[2] > 10_500.0)
        .fold(f32::MIN, |m, x| m.max(x.1));
    assert!(
        anvil < 35.0 && anvil > 0.0,
        "anvil reflectivity {anvil} dBZ"
    );
    // The weak echo region: above cloud base in the updraft core, no echo worth the name.
    let model = storm.model(p.frame_time(frame));
    let core = dbz.iter().filter(|(q, _)| {
        q[2] > 3_000.0 && q[2] < 6_000.0 && {
            let c = [model.meso[0] + 0.15 * q[2], model.meso[1]];
            (q[0] - c[0]).hypot(q[1] - c[1]) < 600.0
        }
    });
    for (q, v) in core {
        assert!(*v < 45.0, "{v} dBZ inside the weak echo region at {q:?}");
    }
}

#[test]
fn coefficients_follow_from_the_size_distributions() {
    use supercell::synth::model::{GRAUPEL_Z, HAIL_Z, RAIN_Z, SNOW_Z};
    let want = [
        RAIN_Z,
        SNOW_Z,
        GRAUPEL_Z.dry,
        GRAUPEL_Z.wet,
        HAIL_Z.dry,
        HAIL_Z.wet,
    ];
    for (got, want) in reflectivity_coefficients_from_distributions()
        .iter()
        .zip(want)
    {
        assert!((got / want - 1.0).abs() < 1e-3, "{got} vs {want}");
    }
    // Marshall-Palmer: 1 g/m³ of rain is 3.63e9 * 1e-3^1.75 = 2.04e4 mm⁶/m³, 43.1 dBZ.
    let one_g = supercell::synth::model::reflectivity_dbz(1.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    assert!((one_g - 43.1).abs() < 0.05, "{one_g}");
}

#[test]
fn the_cold_pool_is_cold_dry_and_high_and_the_updraft_warm_and_moist() {
    let p = all(96);
    let storm = Storm::new(p.clone());
    let vols = storm.frame_volumes(30);
    let dx = p.voxel_size_m() as f32;
    let theta = field(&vols, Attribute::ThetaPerturbation);
    let qv = field(&vols, Attribute::VaporPerturbation);
    let prs = field(&vols, Attribute::PressurePerturbation);
    let rain = field(&vols, Attribute::Rain);
    let w = field(&vols, Attribute::VerticalVelocity);
    let mean = |xs: Vec<f32>| xs.iter().sum::<f32>() / xs.len().max(1) as f32;
    let pool: Vec<_> = rain
        .iter()
        .filter(|(k, r)| (k[2] as f32 * dx) < 400.0 && **r > 2.0)
        .map(|(k, _)| *k)
        .collect();
    assert!(pool.len() > 20, "little heavy rain at the ground");
    let pool_theta = mean(pool.iter().map(|k| theta[k]).collect());
    let pool_qv = mean(pool.iter().map(|k| qv[k]).collect());
    let pool_p = mean(pool.iter().map(|k| prs[k]).collect());
    assert!(pool_theta < -2.0, "cold pool theta' {pool_theta} K");
    assert!(pool_qv < 0.0, "cold pool qv' {pool_qv} g/kg");
    assert!(
        pool_p > 0.5,
        "no mesohigh under the cold pool: {pool_p} hPa"
    );
    let updraft: Vec<_> = w
        .iter()
        .filter(|(k, v)| (4_000.0..8_000.0).contains(&(k[2] as f32 * dx)) && **v > 20.0)
        .map(|(k, _)| *k)
        .collect();
    assert!(updraft.len() > 20);
    let up_theta = mean(updraft.iter().map(|k| theta[k]).collect());
    let up_qv = mean(updraft.iter().map(|k| qv[k]).collect());
    assert!(up_theta > 3.0, "updraft theta' {up_theta} K");
    assert!(up_qv > 1.0, "updraft qv' {up_qv} g/kg");
    // The overshooting top is colder than the stratosphere around it.
    let over: Vec<_> = theta
        .iter()
        .filter(|(k, _)| k[2] as f32 * dx > 12_300.0)
        .map(|(_, v)| *v)
        .collect();
    assert!(!over.is_empty() && mean(over) < -1.0, "overshoot not cold");
}

#[test]
fn pressure_is_lowest_in_the_tornado_core() {
    // A close-up of the tornado at 31 m voxels (a region of a 1024-voxel domain).
    let p = all(1024);
    let storm = Storm::new(p.clone());
    let frame = 30;
    let t = p.frame_time(frame);
    let model = storm.model(t);
    let g = model.tornado_ground;
    let dx = p.voxel_size_m() as f32;
    let c = g.map(|v| (v / dx) as u32);
    let r = (600.0 / dx) as u32;
    let (vols, _) = storm.volumes_in(t, [c[0] - r, c[1] - r, 0], [c[0] + r, c[1] + r, 8]);
    let prs: Vec<_> = active(&vols, Attribute::PressurePerturbation, dx)
        .into_iter()
        .filter(|(q, _)| q[2] < 200.0)
        .collect();
    let (at, min) = argmin(&prs);
    let axis = model.axis(at[2]);
    let off = (at[0] - axis[0]).hypot(at[1] - axis[1]);
    assert!(off < 60.0, "pressure minimum {off} m off the vortex axis");
    assert!((-110.0..-40.0).contains(&min), "tornado core {min} hPa");
    // 500 m out the deficit is a few hPa at most.
    let far = prs
        .iter()
        .filter(|(q, _)| {
            let a = model.axis(q[2]);
            (q[0] - a[0]).hypot(q[1] - a[1]) > 500.0
        })
        .fold(f32::MAX, |m, x| m.min(x.1));
    assert!(far > -12.0, "{far} hPa 500 m from the axis");
}

#[test]
fn attribute_lists_parse_and_bad_names_are_named() {
    assert_eq!(
        Attribute::parse_list("all").unwrap(),
        Attribute::ALL.to_vec()
    );
    assert_eq!(
        Attribute::parse_list("default").unwrap(),
        Attribute::DEFAULT.to_vec()
    );
    assert_eq!(
        Attribute::parse_list("hail, reflectivity,cloud").unwrap(),
        vec![Attribute::Hail, Attribute::Reflectivity, Attribute::Cloud]
    );
    for a in Attribute::ALL {
        assert_eq!(Attribute::from_name(a.name()), Some(a));
        assert_eq!(Attribute::parse_list(a.name()).unwrap(), vec![a]);
    }
    let e = Attribute::parse_list("cloud,hial").unwrap_err().to_string();
    assert!(e.contains("'hial'") && e.contains("hail"), "{e}");
    let e = Attribute::parse_list("rain,rain").unwrap_err().to_string();
    assert!(e.contains("'rain'") && e.contains("twice"), "{e}");
    assert!(Attribute::parse_list("").is_err());
    let e = Attribute::parse_list("cloud,,rain")
        .unwrap_err()
        .to_string();
    assert!(e.contains("empty"), "{e}");
    assert!(Attribute::parse_list("ALL").is_err());
}

#[test]
fn census_counts_what_generation_emits() {
    let p = all(64);
    let storm = Storm::new(p);
    for gt in [GridType::Fp16, GridType::Float] {
        assert_eq!(census_frame(&storm, 20, gt), measure_frame(&storm, 20, gt));
    }
}

/// Mean frame bytes over every frame of `p` at resolution `n`, counted exactly.
fn mean_frame(p: &StormParams, n: u32, gt: GridType) -> f64 {
    let storm = Storm::new(StormParams {
        resolution: n,
        ..p.clone()
    });
    (0..p.frames)
        .map(|f| census_frame(&storm, f, gt).frame_bytes)
        .sum::<u64>() as f64
        / p.frames as f64
}

/// The picker's estimate for its chosen resolution matches the frames generated there
/// within 2 %, for several sizes and attribute counts, and the mean frame is within 2 % of
/// the target or within 2 % of the target as close as a neighbouring resolution comes. (Whether the target itself is met within 2 % depends on the
/// resolution step: at these small sizes a step of 8 voxels changes a frame by 5–20 %; the
/// 7 GB case, at about 2000 voxels, is `seven_gigabyte_frames_with_every_attribute`.)
/// Sizes come from the census, which counts exactly what generation emits.
#[test]
fn resolution_picker_is_accurate_for_several_sizes_and_attribute_counts() {
    // Small sizes: the census is the field evaluation, slow in a debug build.
    let cases: [(&[Attribute], GridType, u64); 4] = [
        (&[Attribute::Cloud], GridType::Fp16, 2_000_000),
        (&Attribute::DEFAULT, GridType::Fp16, 6_000_000),
        (&Attribute::ALL, GridType::Fp16, 12_000_000),
        (&Attribute::ALL, GridType::Float, 20_000_000),
    ];
    for (attrs, gt, target) in cases {
        let p = StormParams {
            frames: 4,
            attributes: attrs.to_vec(),
            ..default_params()
        };
        let est = resolution_for_target(&p, gt, target);
        let actual = mean_frame(&p, est.resolution, gt);
        let err = actual / est.frame_bytes as f64 - 1.0;
        let what = format!(
            "{} attributes {gt} target {target}: resolution {}, estimated {}, actual {actual}",
            attrs.len(),
            est.resolution,
            est.frame_bytes
        );
        assert!(
            err.abs() < 0.02,
            "estimate off by {:.1} %: {what}",
            err * 100.0
        );
        // Within 2 % of the target, or as close as the neighbouring resolutions get.
        let t = target as f64;
        let off = (actual - t).abs();
        let best_neighbour = [est.resolution - 8, est.resolution + 8]
            .map(|n| (mean_frame(&p, n, gt) - t).abs())
            .into_iter()
            .fold(f64::MAX, f64::min);
        assert!(
            off < 0.02 * t || off < best_neighbour + 0.02 * t,
            "a neighbour comes {best_neighbour} B close: {what}"
        );
    }
}

/// `--frame-size 7GB --attributes all`: the picker's frames are within 2 % of 7 GB, checked
/// by counting (not generating) every frame of a three-frame sequence at the chosen
/// resolution. Minutes in a release build:
/// `cargo test --release --test synth_attributes -- --ignored seven_gigabyte`.
#[test]
#[ignore = "minutes of CPU in a release build"]
fn seven_gigabyte_frames_with_every_attribute() {
    let target = 7_000_000_000u64;
    let p = StormParams {
        frames: 3,
        attributes: Attribute::ALL.to_vec(),
        ..default_params()
    };
    let t0 = std::time::Instant::now();
    let est = resolution_for_target(&p, GridType::Fp16, target);
    let picked_s = t0.elapsed().as_secs_f64();
    let storm = Storm::new(StormParams {
        resolution: est.resolution,
        ..p.clone()
    });
    let sizes: Vec<u64> = (0..p.frames)
        .map(|f| census_frame(&storm, f, GridType::Fp16).frame_bytes)
        .collect();
    let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
    eprintln!(
        "resolution {} picked in {picked_s:.1} s: estimated {}, frames {sizes:?}, mean {mean:.0} ({:+.2} % off 7 GB)",
        est.resolution,
        est.frame_bytes,
        (mean / target as f64 - 1.0) * 100.0
    );
    assert!((mean / target as f64 - 1.0).abs() < 0.02);
    assert!((mean / est.frame_bytes as f64 - 1.0).abs() < 0.02);
}
