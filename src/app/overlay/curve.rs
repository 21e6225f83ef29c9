//! Opacity curves edited with the mouse: the point under the pointer, a point moved between
//! its neighbours, added where the user clicks, removed. A curve is `(u, opacity)` points
//! ascending in `u`, both in 0..1, as [`crate::render::TransferFunction::opacity`] holds
//! it; every edit here keeps it so, so what the panel makes the scene validator accepts.

/// Fewest points a curve keeps: removing more would leave a constant, not a curve.
pub const MIN_POINTS: usize = 2;

/// The point of `curve` nearest to `at` (curve coordinates) within `reach` screen points,
/// where `scale` is the screen points per unit of `u` and of opacity.
pub fn point_near(
    curve: &[(f32, f32)],
    at: (f32, f32),
    scale: (f32, f32),
    reach: f32,
) -> Option<usize> {
    let dist = |p: &(f32, f32)| {
        let dx = (p.0 - at.0) * scale.0;
        let dy = (p.1 - at.1) * scale.1;
        (dx * dx + dy * dy).sqrt()
    };
    curve
        .iter()
        .enumerate()
        .map(|(i, p)| (i, dist(p)))
        .filter(|&(_, d)| d <= reach)
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
}

/// Adds a point at `at` (clamped to 0..1), after the points at the same or smaller `u`;
/// returns its index.
pub fn add_point(curve: &mut Vec<(f32, f32)>, at: (f32, f32)) -> usize {
    let p = (clamp01(at.0), clamp01(at.1));
    let i = curve.iter().position(|q| q.0 > p.0).unwrap_or(curve.len());
    curve.insert(i, p);
    i
}

/// Moves point `i` to `to`: opacity into 0..1, `u` into 0..1 and between its neighbours'
/// (a point never passes another, so indices stay valid during a drag).
pub fn move_point(curve: &mut [(f32, f32)], i: usize, to: (f32, f32)) {
    if i >= curve.len() {
        return;
    }
    let lo = if i > 0 { curve[i - 1].0 } else { 0.0 };
    let hi = curve.get(i + 1).map_or(1.0, |q| q.0);
    curve[i] = (clamp01(to.0).clamp(lo, hi.max(lo)), clamp01(to.1));
}

/// Removes point `i` where more than [`MIN_POINTS`] remain; whether it did.
pub fn remove_point(curve: &mut Vec<(f32, f32)>, i: usize) -> bool {
    if curve.len() <= MIN_POINTS || i >= curve.len() {
        return false;
    }
    curve.remove(i);
    true
}

/// What the mouse did on the curve's strip, in curve coordinates `(u, opacity)`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Gesture {
    /// A drag began here: it takes the point within reach, else a new point here.
    Press((f32, f32)),
    /// The drag moved here.
    Drag((f32, f32)),
    /// The drag ended.
    Release,
    /// A click (no drag): adds a point here unless one is within reach.
    Click((f32, f32)),
    /// A right- or double-click: removes the point within reach.
    Remove((f32, f32)),
}

/// A curve under the mouse: `scale` (screen points per unit of `u` and of opacity) and
/// `reach` (screen points) say which point a gesture takes.
#[derive(Clone, Copy, Debug)]
pub struct Strip {
    /// Screen points per unit of `u` and of opacity.
    pub scale: (f32, f32),
    /// How far from a point, in screen points, a gesture still takes it.
    pub reach: f32,
}

impl Strip {
    /// Applies `g` to `curve`; `held` is the point a drag holds (set by a press, cleared by
    /// a release).
    pub fn apply(&self, curve: &mut Vec<(f32, f32)>, held: &mut Option<usize>, g: Gesture) {
        let near = |c: &[(f32, f32)], at| point_near(c, at, self.scale, self.reach);
        match g {
            Gesture::Press(at) => {
                *held = Some(near(curve, at).unwrap_or_else(|| add_point(curve, at)));
            }
            Gesture::Drag(to) => {
                if let Some(i) = *held {
                    move_point(curve, i, to);
                }
            }
            Gesture::Release => *held = None,
            Gesture::Click(at) => {
                if near(curve, at).is_none() {
                    add_point(curve, at);
                }
            }
            Gesture::Remove(at) => {
                if let Some(i) = near(curve, at) {
                    remove_point(curve, i);
                }
            }
        }
    }
}

fn clamp01(x: f32) -> f32 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(c: &[(f32, f32)]) -> bool {
        c.windows(2).all(|w| w[0].0 <= w[1].0)
            && c.iter()
                .all(|p| (0.0..=1.0).contains(&p.0) && (0.0..=1.0).contains(&p.1))
    }

    #[test]
    fn gestures_drag_add_and_remove_points() {
        // A 200 × 100 point strip; points within 6 points are taken.
        let strip = Strip {
            scale: (200.0, 100.0),
            reach: 6.0,
        };
        let mut c = vec![(0.0, 0.0), (1.0, 1.0)];
        let mut held = None;
        // A press on nothing adds a point and drags it; the drag stops at the last point.
        strip.apply(&mut c, &mut held, Gesture::Press((0.5, 0.2)));
        assert_eq!((c.len(), held), (3, Some(1)));
        strip.apply(&mut c, &mut held, Gesture::Drag((0.6, 0.4)));
        strip.apply(&mut c, &mut held, Gesture::Drag((1.4, 0.5)));
        assert_eq!(c[1], (1.0, 0.5));
        strip.apply(&mut c, &mut held, Gesture::Release);
        strip.apply(&mut c, &mut held, Gesture::Drag((0.2, 0.2)));
        assert_eq!((c[1], held), ((1.0, 0.5), None), "released: nothing moves");
        // A press on a point takes it; a click on a point adds nothing, elsewhere one point.
        strip.apply(&mut c, &mut held, Gesture::Press((0.01, 0.02)));
        assert_eq!(held, Some(0));
        strip.apply(&mut c, &mut held, Gesture::Release);
        strip.apply(&mut c, &mut held, Gesture::Click((0.005, 0.0)));
        assert_eq!(c.len(), 3);
        strip.apply(&mut c, &mut held, Gesture::Click((0.3, 0.9)));
        assert_eq!(c, vec![(0.0, 0.0), (0.3, 0.9), (1.0, 0.5), (1.0, 1.0)]);
        // Removing: the point within reach, nothing elsewhere, never below two points.
        strip.apply(&mut c, &mut held, Gesture::Remove((0.5, 0.5)));
        assert_eq!(c.len(), 4);
        for at in [(0.3, 0.9), (0.0, 0.0), (1.0, 1.0)] {
            strip.apply(&mut c, &mut held, Gesture::Remove(at));
        }
        assert_eq!(c.len(), 2, "{c:?}");
        assert!(sorted(&c), "{c:?}");
    }

    #[test]
    fn points_are_added_in_order_and_clamped() {
        let mut c = vec![(0.1, 0.0), (0.9, 1.0)];
        assert_eq!(add_point(&mut c, (0.5, 0.4)), 1);
        assert_eq!(add_point(&mut c, (-3.0, 2.0)), 0);
        assert_eq!(c[0], (0.0, 1.0));
        assert_eq!(add_point(&mut c, (0.5, 0.6)), 3, "after the equal u");
        assert_eq!(add_point(&mut c, (f32::NAN, 0.5)), 1, "NaN is 0");
        assert!(sorted(&c), "{c:?}");
    }

    #[test]
    fn a_dragged_point_stays_between_its_neighbours() {
        let mut c = vec![(0.0, 0.0), (0.3, 0.2), (0.6, 0.5), (1.0, 1.0)];
        move_point(&mut c, 1, (0.9, 0.7));
        assert_eq!(c[1], (0.6, 0.7), "stops at the next point");
        move_point(&mut c, 2, (0.1, -1.0));
        assert_eq!(c[2], (0.6, 0.0), "stops at the previous point");
        move_point(&mut c, 0, (0.5, 0.25));
        assert_eq!(c[0], (0.5, 0.25));
        move_point(&mut c, 3, (7.0, 0.5));
        assert_eq!(c[3], (1.0, 0.5));
        move_point(&mut c, 9, (0.5, 0.5));
        assert!(sorted(&c), "{c:?}");
    }

    #[test]
    fn points_are_removed_down_to_two_and_found_within_reach() {
        let mut c = vec![(0.0, 0.0), (0.5, 0.5), (1.0, 1.0)];
        // 200 × 100 points: (0.52, 0.5) is 4 points right of the middle point.
        assert_eq!(point_near(&c, (0.52, 0.5), (200.0, 100.0), 6.0), Some(1));
        assert_eq!(point_near(&c, (0.52, 0.5), (200.0, 100.0), 3.0), None);
        assert_eq!(point_near(&c, (0.9, 0.95), (200.0, 100.0), 30.0), Some(2));
        assert!(remove_point(&mut c, 1));
        assert_eq!(c, vec![(0.0, 0.0), (1.0, 1.0)]);
        assert!(!remove_point(&mut c, 0), "a curve keeps two points");
        assert!(!remove_point(&mut c, 5));
    }
}
