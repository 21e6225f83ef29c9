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
