//! Statistics (NanoVDB's `GridStats` with `Stats<float>`).

use super::*;

/// Running statistics exactly as NanoVDB's `Stats<float>`: f32 extrema, f64 Welford mean and
/// sum of squared deviations, merged with Chan's formula.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Stats {
    pub(super) n: u64,
    pub(super) avg: f64,
    pub(super) aux: f64,
    pub(super) min: f32,
    pub(super) max: f32,
}

impl Stats {
    pub(super) const EMPTY: Stats = Stats {
        n: 0,
        avg: 0.0,
        aux: 0.0,
        min: f32::MAX,
        max: -f32::MAX,
    };

    /// NanoVDB's `Stats::add` for one value; the writer runs four of these chains at once in
    /// [`welford_lanes`], which tests check against this.
    #[cfg(test)]
    pub(super) fn add(&mut self, v: f32) {
        if v < self.min {
            self.min = v;
        }
        if v > self.max {
            self.max = v;
        }
        self.n += 1;
        let delta = f64::from(v) - self.avg;
        self.avg += delta / self.n as f64;
        self.aux += delta * (f64::from(v) - self.avg);
    }

    pub(super) fn merge(&mut self, o: &Stats) {
        if o.n == 0 {
            return;
        }
        let denom = 1.0 / (self.n + o.n) as f64;
        let delta = o.avg - self.avg;
        self.avg += denom * delta * o.n as f64;
        self.aux += o.aux + denom * delta * delta * self.n as f64 * o.n as f64;
        if o.min < self.min {
            self.min = o.min;
        }
        if o.max > self.max {
            self.max = o.max;
        }
        self.n += o.n;
    }

    /// Population standard deviation.
    pub(super) fn std(&self) -> f64 {
        if self.n < 2 {
            0.0
        } else {
            (self.aux / self.n as f64).sqrt()
        }
    }
}

/// Statistics and active-voxel bbox of one node (NanoVDB's `GridStats::NodeStats`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct NodeStats {
    pub(super) stats: Stats,
    pub(super) min: Coord,
    pub(super) max: Coord,
}

impl NodeStats {
    /// No active values: NanoVDB's empty `CoordBBox` (max corner below min corner).
    pub(super) const EMPTY: NodeStats = NodeStats {
        stats: Stats::EMPTY,
        min: [i32::MAX; 3],
        max: [i32::MIN; 3],
    };

    pub(super) fn merge(&mut self, o: &NodeStats) {
        self.stats.merge(&o.stats);
        for a in 0..3 {
            self.min[a] = self.min[a].min(o.min[a]);
            self.max[a] = self.max[a].max(o.max[a]);
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        (0..3).any(|a| self.min[a] > self.max[a])
    }
}
