//! Opacity of suggested looks, set from the data: each attribute's extinction is scaled so
//! that the mean transmittance along the first view's rays that meet its data lands on a
//! target, and the shown attributes together land in [`BAND`], so the volume neither
//! vanishes nor walls off the view.
//!
//! The rays are the CPU reference renderer's ([`render_cpu`]) at [`WIDTH`] pixels across;
//! a pixel's coverage (alpha) is `1 − T`, so its optical depth is `τ = −ln(1 − alpha)`, and
//! scaling the extinction by `k` scales every `τ` by `k`. The march stops a ray once its
//! transmittance is below the cut-off, which clips large depths: the scale is solved, the
//! picture rendered again at that scale, and solved again (at most [`ROUNDS`] times).

use crate::format::Grid;
use crate::render::{View, render_cpu};

/// Mean transmittance that a shown attribute alone is scaled to, over the rays that meet
/// its data: half the light through, the middle of [`BAND`].
pub const TARGET_SHOWN: f32 = 0.5;

/// Mean transmittance that an attribute shown off by default (one that fills the domain,
/// such as wind speed) is scaled to, so that it is thin when switched on.
pub const TARGET_THIN: f32 = 0.8;

/// The band that the mean transmittance of the shown attributes together, over the rays
/// that meet any of them, must land in: below 0.3 the view is a wall, above 0.8 the data
/// all but vanishes. Outside it, all scales are multiplied by one factor that brings it to
/// [`TARGET_SHOWN`].
pub const BAND: [f32; 2] = [0.3, 0.8];

/// Width of the calibration picture, pixels; its height follows the aspect.
pub const WIDTH: u32 = 64;

/// A ray meets the data where its optical depth exceeds this fraction of the deepest ray's
/// (a ratio, so the same rays at every scale).
const MEETS: f32 = 1e-3;

/// Renders per solve at most.
const ROUNDS: usize = 3;

/// The factor on slot `slot`'s extinction in `view` that brings its mean transmittance,
/// alone, to `target` on `grids` (the first frame where it has data); 1 where no ray
/// meets its data.
pub fn scale_alone(
    view: &View,
    grids: &[Option<&Grid<'_>>],
    aspect: f32,
    slot: usize,
    target: f32,
) -> f32 {
    let n = view.attributes.len();
    let only: Vec<bool> = (0..n).map(|i| i == slot).collect();
    solve_rounds(view, grids, aspect, &only, &vec![1.0; n], target)
}

/// Brings the enabled slots of `view` together, extinctions times `scales`, into [`BAND`]
/// on `grids` (the first picture): outside it, their scales are multiplied by one factor
/// that brings the mean transmittance to [`TARGET_SHOWN`]. Returns the mean transmittance
/// at the scales then (None: no ray meets the data).
pub fn together(
    view: &View,
    grids: &[Option<&Grid<'_>>],
    aspect: f32,
    scales: &mut [f32],
) -> Option<f32> {
    let shown: Vec<bool> = view
        .attributes
        .iter()
        .map(|a| a.as_ref().is_some_and(|a| a.enabled))
        .collect();
    let tau = optical_depths(view, grids, aspect, &shown, scales);
    let mean = mean_transmittance(&tau, 1.0)?;
    if (BAND[0]..=BAND[1]).contains(&mean) {
        return Some(mean);
    }
    let k = solve_rounds(view, grids, aspect, &shown, scales, TARGET_SHOWN);
    for (s, on) in scales.iter_mut().zip(&shown) {
        if *on {
            *s *= k;
        }
    }
    let tau = optical_depths(view, grids, aspect, &shown, scales);
    mean_transmittance(&tau, 1.0)
}

/// The factor on `scales` (of the slots in `on`) that brings the mean transmittance of those
/// slots to `target`, re-rendering after each solve because the march clips deep rays.
fn solve_rounds(
    view: &View,
    grids: &[Option<&Grid<'_>>],
    aspect: f32,
    on: &[bool],
    scales: &[f32],
    target: f32,
) -> f32 {
    let mut total = 1.0f32;
    for _ in 0..ROUNDS {
        let now: Vec<f32> = scales
            .iter()
            .zip(on)
            .map(|(s, o)| if *o { s * total } else { *s })
            .collect();
        let tau = optical_depths(view, grids, aspect, on, &now);
        let Some(k) = solve_scale(&tau, target) else {
            break;
        };
        total *= k;
        if (k - 1.0).abs() < 0.02 {
            break;
        }
    }
    total
}

/// Each pixel's optical depth with only the slots in `on` enabled, extinctions times
/// `scales`.
fn optical_depths(
    view: &View,
    grids: &[Option<&Grid<'_>>],
    aspect: f32,
    on: &[bool],
    scales: &[f32],
) -> Vec<f32> {
    let mut v = view.clone();
    for (i, a) in v.attributes.iter_mut().enumerate() {
        if let Some(a) = a {
            a.enabled = on.get(i).copied().unwrap_or(false);
            a.tf.extinction *= scales.get(i).copied().unwrap_or(1.0);
        }
    }
    let height = ((WIDTH as f32 / aspect.max(1e-3)).round() as u32).clamp(1, 4 * WIDTH);
    let img = render_cpu(grids, &v, WIDTH, height);
    img.linear
        .iter()
        .map(|p| -(1.0 - p[3]).clamp(1e-6, 1.0).ln())
        .collect()
}

/// The mean of `exp(−k τ)` over the rays that meet data (None: none does).
pub fn mean_transmittance(tau: &[f32], k: f32) -> Option<f32> {
    let deepest = tau.iter().copied().fold(0.0f32, f32::max);
    if deepest <= 0.0 || !deepest.is_finite() {
        return None;
    }
    let (mut sum, mut count) = (0.0f64, 0usize);
    for &t in tau.iter().filter(|&&t| t > deepest * MEETS) {
        sum += f64::from((-k * t).exp());
        count += 1;
    }
    (count > 0).then(|| (sum / count as f64) as f32)
}

/// The `k` at which [`mean_transmittance`]`(tau, k)` is `target` (it falls as `k` grows):
/// bisection on `ln k` over `e^±20` (None: no ray meets data).
pub fn solve_scale(tau: &[f32], target: f32) -> Option<f32> {
    mean_transmittance(tau, 1.0)?;
    let (mut lo, mut hi) = (-20.0f32, 20.0f32);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        let t = mean_transmittance(tau, mid.exp())?;
        if t > target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Some((0.5 * (lo + hi)).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_solved_scale_gives_the_target_transmittance() {
        // Rays through thin and thick parts, and rays that miss (0) and are left out.
        let tau = [0.0, 0.0, 0.1, 0.5, 2.0, 8.0];
        for target in [0.3, 0.5, 0.8] {
            let k = solve_scale(&tau, target).unwrap();
            let t = mean_transmittance(&tau, k).unwrap();
            assert!((t - target).abs() < 1e-3, "target {target}: {t} at k = {k}");
        }
        // The mean is over the four rays that meet data: exp(−τ) averaged.
        let expect = ((-0.1f32).exp() + (-0.5f32).exp() + (-2.0f32).exp() + (-8.0f32).exp()) / 4.0;
        assert!((mean_transmittance(&tau, 1.0).unwrap() - expect).abs() < 1e-6);
        assert_eq!(solve_scale(&[0.0; 4], 0.5), None, "no ray meets data");
    }
}
