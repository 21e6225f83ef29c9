//! Conservative bounds of the storm's features: which features a brick can touch, so that
//! a brick touching none is skipped without looking at its voxels.

use super::{ANVIL_HALF, ANVIL_LAT_MAX, ANVIL_SPREAD, anvil_lowest_base};

/// The shape of a [`Bound`] inside its box.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// The box itself.
    Box,
    /// A tilted elliptic cylinder: axis at `c0 + slope * z`, semi-axes `r` (x, y).
    Cylinder {
        /// Axis position at z = 0.
        c0: [f32; 2],
        /// Axis displacement per metre of height.
        slope: [f32; 2],
        /// Semi-axes along x and y.
        r: [f32; 2],
    },
    /// The anvil: a fan centred on `y0` that starts widening at `x0`, with a lens-shaped
    /// cross-section whose base rises downwind (see [`anvil_lowest_base`]).
    Fan {
        /// Where the fan starts widening (the tower top).
        x0: f32,
        /// Centre line.
        y0: f32,
    },
}

/// A conservative world-space bound of one feature: a box narrowed by a [`Shape`].
#[derive(Clone, Copy, Debug)]
pub struct Bound {
    /// The feature bit evaluated where the bound is touched (0: none, activation only).
    pub bit: u32,
    /// Whether the feature can make voxels active by itself (cloud, rain, strong wind).
    /// Bricks touching only non-activating bounds are skipped without evaluation; those
    /// features only add to the wind of bricks that are active for another reason.
    pub activates: bool,
    /// Minimum corner (metres).
    pub min: [f32; 3],
    /// Maximum corner (metres).
    pub max: [f32; 3],
    /// Shape within the box.
    pub shape: Shape,
}

impl Bound {
    pub(super) fn aabb(bit: u32, min: [f32; 3], max: [f32; 3]) -> Bound {
        Bound {
            bit,
            activates: true,
            min,
            max,
            shape: Shape::Box,
        }
    }

    pub(super) fn cylinder(
        bit: u32,
        c0: [f32; 2],
        slope: [f32; 2],
        r: [f32; 2],
        z: [f32; 2],
    ) -> Bound {
        let xs = [c0[0] + slope[0] * z[0], c0[0] + slope[0] * z[1]];
        let ys = [c0[1] + slope[1] * z[0], c0[1] + slope[1] * z[1]];
        Bound {
            bit,
            activates: true,
            min: [xs[0].min(xs[1]) - r[0], ys[0].min(ys[1]) - r[1], z[0]],
            max: [xs[0].max(xs[1]) + r[0], ys[0].max(ys[1]) + r[1], z[1]],
            shape: Shape::Cylinder { c0, slope, r },
        }
    }

    pub(super) fn passive(mut self) -> Bound {
        self.activates = false;
        self
    }

    /// Whether the box [lo, hi] may hold a point of the feature.
    pub fn touches(&self, lo: [f32; 3], hi: [f32; 3]) -> bool {
        for a in 0..3 {
            if hi[a] < self.min[a] || lo[a] > self.max[a] {
                return false;
            }
        }
        match self.shape {
            Shape::Box => true,
            Shape::Cylinder { c0, slope, r } => {
                // Axis at the middle of the overlapping z range; within the range it moves
                // by at most |slope| * half-range, which widens the box.
                let z0 = lo[2].max(self.min[2]);
                let z1 = hi[2].min(self.max[2]);
                let zm = 0.5 * (z0 + z1);
                let hz = 0.5 * (z1 - z0);
                let c = [c0[0] + slope[0] * zm, c0[1] + slope[1] * zm];
                let mut d2 = 0.0;
                for a in 0..2 {
                    let spread = slope[a].abs() * hz;
                    let d = (lo[a] - spread - c[a]).max(0.0).max(c[a] - hi[a] - spread);
                    d2 += (d / r[a]) * (d / r[a]);
                }
                d2 <= 1.0
            }
            Shape::Fan { x0, y0 } => {
                // The widest the anvil gets within the box (it widens downwind), hence the
                // smallest lateral coordinate and the thickest lens section inside it.
                let half = ANVIL_HALF + ANVIL_SPREAD * (hi[0] - x0).max(0.0);
                let dy = (lo[1] - y0).max(0.0).max(y0 - hi[1]);
                let lat = dy / half;
                lat < ANVIL_LAT_MAX && hi[2] >= anvil_lowest_base(lo[0] - x0, lat)
            }
        }
    }
}

/// Feature bits of `bounds` touching [lo, hi], and whether an activating one does.
pub fn features_in(bounds: &[Bound], lo: [f32; 3], hi: [f32; 3]) -> (u32, bool) {
    let mut mask = 0;
    let mut active = false;
    for b in bounds {
        if b.touches(lo, hi) {
            mask |= b.bit;
            active |= b.activates;
        }
    }
    (mask, active)
}
