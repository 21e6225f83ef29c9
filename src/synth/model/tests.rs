//! Tests of the storm model's fields.

use super::*;

#[test]
fn fast_angle_matches_atan2() {
    for i in 0..1000 {
        let a = i as f32 * 0.00628 * 1.0001;
        let (y, x) = (a.sin() * 3.0, a.cos() * 3.0);
        let want = y.atan2(x).rem_euclid(std::f32::consts::TAU);
        let got = angle(y, x);
        let d = (want - got).abs();
        assert!(
            d < 2e-3 || (d - std::f32::consts::TAU).abs() < 2e-3,
            "{a}: {got} vs {want}"
        );
    }
}

/// Cloud water (condensate without debris) at world point `p`.
fn cloud_water_at(m: &FrameModel, p: [f32; 3]) -> f32 {
    let mut out = BrickFields::new();
    let (mask, _) = m.features_in(p, [p[0] + 8.0, p[1] + 8.0, p[2] + 8.0]);
    m.eval_brick(p, 1.0, mask, &mut out, true);
    out.qc[0]
}

/// The built-in storm's model at fraction `s` of its sequence.
fn default_storm_at(noise: &NoiseTile, s: f32) -> FrameModel<'_> {
    let p = crate::synth::default_params();
    FrameModel::new(
        noise,
        p.seed,
        s * p.time_span_s,
        p.time_span_s,
        p.touchdown_fraction,
    )
}

#[test]
fn condensation_funnel_reaches_the_ground_after_touchdown() {
    let p = crate::synth::default_params();
    let noise = NoiseTile::new(p.seed);
    // Lowering, before touchdown: a funnel aloft, none at the ground.
    let m = default_storm_at(&noise, 0.25);
    let a = m.axis(600.0);
    assert!(cloud_water_at(&m, [a[0], a[1], 600.0]) > 0.5);
    let a = m.axis(30.0);
    assert_eq!(cloud_water_at(&m, [a[0], a[1], 30.0]), 0.0);
    // After touchdown: condensation from the wall cloud down to the ground, a few hundred
    // metres wide.
    for s in [0.45, 0.65, 0.9] {
        let m = default_storm_at(&noise, s);
        for z in [30.0, 300.0, 600.0] {
            let a = m.axis(z);
            let at = |dx: f32, dy: f32| cloud_water_at(&m, [a[0] + dx, a[1] + dy, z]);
            assert!(
                at(0.0, 0.0) > 0.5,
                "s {s} z {z}: no condensation on the axis"
            );
            assert!(at(50.0, 0.0) > 0.0, "s {s} z {z}: narrower than 100 m");
            assert!(at(0.0, -50.0) > 0.0, "s {s} z {z}: narrower than 100 m");
            assert_eq!(at(600.0, 0.0), 0.0, "s {s} z {z}: wider than 1.2 km");
            assert_eq!(at(0.0, 600.0), 0.0, "s {s} z {z}: wider than 1.2 km");
        }
        let a = m.axis(30.0);
        let r = condensation_radius(
            air_density(30.0) * 90.0f32.powi(2),
            condensation_deficit(30.0),
            110.0,
        );
        assert!((100.0..250.0).contains(&r), "{r}");
        assert!(a[0].is_finite());
    }
}

#[test]
fn cylinder_bound_is_conservative() {
    let b = Bound::cylinder(F_TOWER, [0.0, 0.0], [0.5, 0.0], [100.0; 2], [0.0, 1000.0]);
    // The axis is at x = 250 at z = 500.
    assert!(b.touches([240.0, -10.0, 490.0], [260.0, 10.0, 510.0]));
    assert!(!b.touches([600.0, -10.0, 490.0], [620.0, 10.0, 510.0]));
    assert!(!b.touches([240.0, -10.0, 1100.0], [260.0, 10.0, 1200.0]));
}

/// Every field of the one-voxel brick at world point `p` (spacing `dx`).
fn fields_at(m: &FrameModel, p: [f32; 3], dx: f32) -> Box<BrickFields> {
    let mut out = Box::new(BrickFields::new());
    let (mask, _) = m.features_in(p, [p[0] + 8.0 * dx, p[1] + 8.0 * dx, p[2] + 8.0 * dx]);
    m.eval_brick(p, dx, mask, &mut out, false);
    out
}

#[test]
fn funnel_field_is_the_funnel_alone_and_adds_up_to_the_cloud() {
    let p = crate::synth::default_params();
    let noise = NoiseTile::new(p.seed);
    // The nested grid's spacing in the built-in dataset.
    let dx = (p.voxel_size_m() / f64::from(crate::synth::NEST_REFINEMENT)) as f32;
    assert!((dx - 20.83).abs() < 0.01, "{dx}");
    // Frames 16 and 17 of 48 straddle touchdown; 20 is the close-up scene's frame.
    for frame in [16u32, 17, 20, 30] {
        let s = p.frame_time(frame) / p.time_span_s;
        let m = default_storm_at(&noise, s);
        for z in [10.0, 200.0, 500.0, 800.0] {
            let a = m.axis(z);
            // A row of eight nested voxels from the axis outwards (x), at height z.
            let f = fields_at(&m, [a[0], a[1], z], dx);
            for n in 0..512 {
                // Equal up to the rounding of the difference.
                let sum = f.ambient_cloud[n] + f.funnel[n];
                assert!(
                    (sum - f.cloud[n]).abs() <= 1e-6 * f.cloud[n],
                    "frame {frame} z {z} voxel {n}: {sum} vs {}",
                    f.cloud[n]
                );
                assert!(f.funnel[n] >= 0.0);
            }
            if frame >= 17 || z > 300.0 {
                assert!(
                    f.funnel[0] > 0.5,
                    "frame {frame} z {z}: no funnel on the axis ({})",
                    f.funnel[0]
                );
            }
            // The funnel is many nested voxels across: still condensed 4 voxels (83 m) out.
            if frame >= 20 {
                assert!(
                    f.funnel[4 * 64] > 0.05,
                    "frame {frame} z {z}: under 8 voxels across"
                );
            }
            // Far from the vortex (beyond the funnel and the debris skirt) nothing.
            let far = fields_at(&m, [a[0] + 1_500.0, a[1], z], dx);
            assert!(far.funnel.iter().all(|&v| v == 0.0), "frame {frame} z {z}");
        }
    }
    // Before the funnel forms there is none.
    let m = default_storm_at(&noise, 0.0);
    let a = m.axis(500.0);
    assert!(
        fields_at(&m, [a[0], a[1], 500.0], dx)
            .funnel
            .iter()
            .all(|&v| v == 0.0)
    );
}

/// The funnel meets the wall cloud without a seam: up its axis the total cloud, the cloud
/// grid's part and the nested grid's part all change smoothly (no cut where the funnel
/// ends, none where the nested grid hands over), and the nested part is gone below the top
/// of the nested grid's box.
#[test]
fn funnel_fades_into_the_cloud_base_without_a_cut() {
    let p = crate::synth::default_params();
    let noise = NoiseTile::new(p.seed);
    let dz = 5.0;
    for frame in [20u32, 28, 40] {
        let m = default_storm_at(&noise, p.frame_time(frame) / p.time_span_s);
        let box_top = FUNNEL_NEST_TOP;
        let mut prev: Option<(f32, f32, f32)> = None;
        let mut z0 = 500.0;
        while z0 < 1_200.0 {
            let a = m.axis(z0);
            let f = fields_at(&m, [a[0], a[1], z0], dz);
            // Voxel (0, 0, k): k · dz above z0 on the axis.
            for k in 0..8 {
                let z = z0 + k as f32 * dz;
                let now = (f.cloud[k], f.ambient_cloud[k], f.funnel[k]);
                if let Some(was) = prev {
                    for (what, x, y) in [
                        ("total", was.0, now.0),
                        ("cloud grid", was.1, now.1),
                        ("nested grid", was.2, now.2),
                    ] {
                        assert!(
                            (y - x).abs() <= 0.3,
                            "frame {frame}, z {z}: the {what} jumps from {x} to {y} in {dz} m"
                        );
                    }
                }
                if z >= FUNNEL_NEST_FADE[1] {
                    assert_eq!(f.funnel[k], 0.0, "frame {frame}, z {z} (box top {box_top})");
                }
                prev = Some(now);
            }
            z0 += 8.0 * dz;
        }
        assert!(FUNNEL_NEST_FADE[1] + 21.0 < box_top);
        // The funnel reaches into the wall cloud wherever its base lies: on the axis at
        // 1,000 m there is more condensate than the wall cloud alone holds (1.4 g/kg).
        let a = m.axis(1_000.0);
        let f = fields_at(&m, [a[0], a[1], 1_000.0], dz);
        assert!(f.cloud[0] > 1.5, "frame {frame}: {} at 1,000 m", f.cloud[0]);
    }
}

/// Every field of `a` and `b`, bit for bit (`what` names the brick in a failure).
fn assert_same_fields(a: &BrickFields, b: &BrickFields, ext: bool, what: &str) {
    let mut fields = vec![
        ("cloud", &a.cloud, &b.cloud),
        ("rain", &a.rain, &b.rain),
        ("wind", &a.wind, &b.wind),
        ("w", &a.w, &b.w),
        ("vort", &a.vort, &b.vort),
        ("ambient_cloud", &a.ambient_cloud, &b.ambient_cloud),
        ("funnel", &a.funnel, &b.funnel),
    ];
    if ext {
        fields.extend([
            ("qc", &a.qc, &b.qc),
            ("qi", &a.qi, &b.qi),
            ("snow", &a.snow, &b.snow),
            ("graupel", &a.graupel, &b.graupel),
            ("hail", &a.hail, &b.hail),
            ("qv", &a.qv, &b.qv),
            ("dbz", &a.dbz, &b.dbz),
            ("prs", &a.prs, &b.prs),
            ("theta", &a.theta, &b.theta),
        ]);
        assert_eq!(a.precip, b.precip, "{what}: precip");
    }
    assert_eq!(a.storm, b.storm, "{what}: storm");
    for (name, x, y) in fields {
        for n in 0..512 {
            assert_eq!(
                x[n].to_bits(),
                y[n].to_bits(),
                "{what}: {name}[{n}] {} vs {}",
                x[n],
                y[n]
            );
        }
    }
}

/// Evaluates the brick at `p0` both ways (level-major, as the generator does, and voxel by
/// voxel) and compares every field.
fn check_brick(m: &FrameModel, p0: [f32; 3], dx: f32, ext: bool) {
    let hi = p0.map(|c| c + 7.0 * dx);
    let (mask, _) = m.features_in(p0, hi);
    let mut fast = BrickFields::new();
    let mut slow = BrickFields::new();
    let mut baseline = BrickFields::new();
    m.eval_brick(p0, dx, mask, &mut fast, ext);
    // The same code compiled without AVX2 (what a CPU without it runs).
    m.eval_brick_any(p0, dx, mask, &mut baseline, ext);
    if ext {
        m.eval_brick_reference::<true>(p0, dx, mask, &mut slow);
    } else {
        m.eval_brick_reference::<false>(p0, dx, mask, &mut slow);
    }
    let what = format!("brick {p0:?} dx {dx} mask {mask:#x}");
    assert_same_fields(&fast, &slow, ext, &what);
    assert_same_fields(&baseline, &slow, ext, &format!("{what} (baseline)"));
}

/// Bricks around the storm's features (the tower, the mesocyclone, the tornado's axis,
/// the forward flank, the anvil) at several instants: the level-major evaluation gives
/// the voxel-by-voxel evaluation's bits for every field.
#[test]
fn level_major_evaluation_is_bit_identical() {
    let p = crate::synth::default_params();
    let noise = NoiseTile::new(p.seed);
    let mut seed = 17u64;
    let mut next = move || {
        seed = crate::synth::noise::mix64(seed);
        (seed >> 40) as f32 / (1u64 << 24) as f32
    };
    let mut bricks = 0;
    let mut with_features = 0;
    for s in [0.05, 0.3, 0.5, 0.8] {
        let m = default_storm_at(&noise, s);
        let a = m.axis(100.0);
        let centres = [
            [m.meso[0], m.meso[1], 3_000.0],
            [a[0], a[1], 200.0],
            [m.meso[0] + 5_000.0, m.meso[1] + 3_000.0, 2_000.0],
            [m.anvil_x0 + 8_000.0, m.meso[1], TROPOPAUSE],
            [m.meso[0] + 1_500.0, m.meso[1], TROPOPAUSE + 300.0],
        ];
        for c in centres {
            for _ in 0..12 {
                let dx = [4.0, 16.0, 40.0, 90.0][(next() * 4.0) as usize % 4];
                let spread = [3_000.0, 3_000.0, 1_500.0];
                let p0: [f32; 3] = std::array::from_fn(|i| c[i] + (next() - 0.5) * 2.0 * spread[i]);
                let p0 = [p0[0], p0[1], p0[2].max(0.0)];
                let (mask, _) = m.features_in(p0, p0.map(|v| v + 7.0 * dx));
                with_features += usize::from(mask != 0);
                check_brick(&m, p0, dx, false);
                check_brick(&m, p0, dx, true);
                bricks += 1;
            }
        }
    }
    assert!(with_features > bricks / 2, "{with_features} of {bricks}");
}
