//! Values between voxel centres: a grid read at a continuous index or world position.
//!
//! Voxel centres sit at integer index coordinates, as in NanoVDB's samplers and warp-lang's
//! `volume_sample`: [`Interpolation::Nearest`] rounds each coordinate half away from zero
//! (NanoVDB's `Round`, warp's `CLOSEST`), [`Interpolation::Linear`] weighs the eight centres
//! around the position by the product of their per-axis weights (warp's `LINEAR`), summed in
//! `f64`. Inactive voxels take part with the value they store (the background outside the
//! tree), as in both.

use super::{Grid, ReadAccessor, Value};
use crate::format::error::FormatError;
use crate::format::types::Coord;

/// How a value between voxel centres is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Interpolation {
    /// The nearest voxel centre's value.
    Nearest,
    /// Trilinear over the eight surrounding voxel centres.
    #[default]
    Linear,
}

/// Where in the grid a world position fell, and the value read there.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The continuous index coordinate of the position (the grid's inverse map applied).
    pub index: [f64; 3],
    /// The value read there.
    pub value: Value,
}

/// Index coordinates a sample may touch: the accessor's [`Coord`] is `i32`, and a linear
/// stencil reaches one past the floor.
const INDEX_LIMIT: f64 = (i32::MAX - 1) as f64;

impl ReadAccessor<'_, '_> {
    /// The value at the continuous index coordinate `uvw`.
    ///
    /// Errors: a non-finite or out-of-range coordinate, and linear interpolation of a grid
    /// whose values are not real numbers (integer, boolean, mask and 8-bit colour grids):
    /// read those with [`Interpolation::Nearest`].
    pub fn sample(&mut self, uvw: [f64; 3], how: Interpolation) -> Result<Value, FormatError> {
        if uvw.iter().any(|c| !c.is_finite() || c.abs() > INDEX_LIMIT) {
            return Err(FormatError::Unsupported {
                grid_type: self.grid.grid_type(),
                detail: "a sample position outside the index range (±2³¹) or not finite",
            });
        }
        match how {
            Interpolation::Nearest => self.value(uvw.map(|c| c.round() as i32)),
            Interpolation::Linear => self.trilinear(uvw),
        }
    }

    /// The value at world position `xyz` (the grid's inverse map, then [`Self::sample`]).
    pub fn sample_world(
        &mut self,
        xyz: [f64; 3],
        how: Interpolation,
    ) -> Result<Sample, FormatError> {
        let index = self.grid.map().apply_inverse(xyz);
        let value = self.sample(index, how)?;
        Ok(Sample { index, value })
    }

    fn trilinear(&mut self, uvw: [f64; 3]) -> Result<Value, FormatError> {
        let base = uvw.map(f64::floor);
        let frac: [f64; 3] = std::array::from_fn(|a| uvw[a] - base[a]);
        let origin = base.map(|c| c as i32);
        let mut sum = [0.0f64; 4];
        let mut kind = None;
        // Corner order as warp's: z fastest, then y, then x.
        for corner in 0..8 {
            let offset = [(corner >> 2) & 1, (corner >> 1) & 1, corner & 1];
            let weight: f64 = (0..3)
                .map(|a| {
                    if offset[a] == 1 {
                        frac[a]
                    } else {
                        1.0 - frac[a]
                    }
                })
                .product();
            let ijk: Coord = std::array::from_fn(|a| origin[a] + offset[a]);
            let v = self.value(ijk)?;
            let (lanes, n) = real_lanes(&v).ok_or(FormatError::Unsupported {
                grid_type: self.grid.grid_type(),
                detail: "linear interpolation of values that are not real numbers (use nearest)",
            })?;
            kind.get_or_insert(v);
            for (s, l) in sum.iter_mut().zip(&lanes[..n]) {
                *s = weight.mul_add(*l, *s);
            }
        }
        Ok(match kind.expect("eight corners were read") {
            Value::Float(_) => Value::Float(sum[0] as f32),
            Value::Vec3f(_) => Value::Vec3f(std::array::from_fn(|i| sum[i] as f32)),
            Value::Vec4f(_) => Value::Vec4f(std::array::from_fn(|i| sum[i] as f32)),
            Value::Vec3d(_) => Value::Vec3d([sum[0], sum[1], sum[2]]),
            Value::Vec4d(_) => Value::Vec4d(sum),
            _ => Value::Double(sum[0]),
        })
    }
}

/// A value's components as `f64`, and how many there are; `None` for values that are not
/// real numbers.
fn real_lanes(v: &Value) -> Option<([f64; 4], usize)> {
    let mut out = [0.0; 4];
    let n = match *v {
        Value::Float(x) => {
            out[0] = f64::from(x);
            1
        }
        Value::Double(x) => {
            out[0] = x;
            1
        }
        Value::Vec3f(x) => {
            for (o, c) in out.iter_mut().zip(x) {
                *o = f64::from(c);
            }
            3
        }
        Value::Vec4f(x) => {
            for (o, c) in out.iter_mut().zip(x) {
                *o = f64::from(c);
            }
            4
        }
        Value::Vec3d(x) => {
            out[..3].copy_from_slice(&x);
            3
        }
        Value::Vec4d(x) => {
            out = x;
            4
        }
        Value::Int(_) | Value::Bool(_) | Value::Rgba8(_) | Value::Vec3u8(_) | Value::Vec3u16(_) => {
            return None;
        }
    };
    Some((out, n))
}

impl Grid<'_> {
    /// The value at world position `xyz` (see [`ReadAccessor::sample_world`]).
    pub fn sample_world(&self, xyz: [f64; 3], how: Interpolation) -> Result<Sample, FormatError> {
        self.accessor().sample_world(xyz, how)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::build::{BuildOptions, build_grid};
    use crate::format::sparse::{LeafBrick, SparseVolume};

    /// A 16³ float volume whose value is a linear function of the index, v = 1 + 2i + 3j + 5k,
    /// with voxel size 0.5 and origin (10, 20, 30): trilinear reads it exactly.
    fn ramp() -> Vec<u8> {
        let mut vol = SparseVolume::default();
        for o in 0..8 {
            let origin: Coord = [8 * (o >> 2), 8 * ((o >> 1) & 1), 8 * (o & 1)];
            let mut brick = LeafBrick::filled(origin, 0.0);
            for n in 0..512 {
                let ijk = [
                    origin[0] + (n >> 6) as i32,
                    origin[1] + ((n >> 3) & 7) as i32,
                    origin[2] + (n & 7) as i32,
                ];
                brick.set_active(n, (1 + 2 * ijk[0] + 3 * ijk[1] + 5 * ijk[2]) as f32);
            }
            vol.bricks.push(brick);
        }
        let opts = BuildOptions {
            name: "ramp".into(),
            voxel_size: [0.5; 3],
            world_origin: [10.0, 20.0, 30.0],
            ..BuildOptions::default()
        };
        build_grid(&vol, &opts).unwrap()
    }

    #[test]
    fn linear_reads_a_linear_field_exactly_and_nearest_rounds() {
        let bytes = ramp();
        let g = Grid::parse(&bytes).unwrap();
        let f = |u: [f64; 3]| 1.0 + 2.0 * u[0] + 3.0 * u[1] + 5.0 * u[2];
        for uvw in [
            [3.25, 4.5, 7.75],
            [0.0, 0.0, 0.0],
            [14.9, 0.1, 8.5],
            [6.0, 6.5, 6.0],
        ] {
            let xyz = [
                10.0 + 0.5 * uvw[0],
                20.0 + 0.5 * uvw[1],
                30.0 + 0.5 * uvw[2],
            ];
            let s = g.sample_world(xyz, Interpolation::Linear).unwrap();
            for a in 0..3 {
                assert!(
                    (s.index[a] - uvw[a]).abs() < 1e-12,
                    "{uvw:?}: index {:?}",
                    s.index
                );
            }
            let Value::Float(v) = s.value else {
                panic!("{s:?}")
            };
            assert!(
                (f64::from(v) - f(uvw)).abs() < 1e-4,
                "{uvw:?}: {v} against {}",
                f(uvw)
            );
            let Value::Float(n) = g.sample_world(xyz, Interpolation::Nearest).unwrap().value else {
                panic!()
            };
            assert_eq!(f64::from(n), f(uvw.map(f64::round)), "{uvw:?}");
        }
        // Half away from zero, as NanoVDB's Round.
        let Value::Float(n) = g
            .accessor()
            .sample([2.5, 0.0, 0.0], Interpolation::Nearest)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(n, 7.0);
    }

    #[test]
    fn outside_the_data_the_background_takes_part() {
        let bytes = ramp();
        let g = Grid::parse(&bytes).unwrap();
        // Half a voxel past the last centre along i: half of v(15, 0, 0) = 31, half background 0.
        let Value::Float(v) = g
            .accessor()
            .sample([15.5, 0.0, 0.0], Interpolation::Linear)
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(v, 15.5);
    }

    #[test]
    fn bad_positions_and_non_real_values_are_refused() {
        let bytes = ramp();
        let g = Grid::parse(&bytes).unwrap();
        let mut acc = g.accessor();
        for bad in [
            [f64::NAN, 0.0, 0.0],
            [0.0, f64::INFINITY, 0.0],
            [0.0, 0.0, 3e9],
        ] {
            assert!(acc.sample(bad, Interpolation::Linear).is_err(), "{bad:?}");
            assert!(acc.sample(bad, Interpolation::Nearest).is_err(), "{bad:?}");
        }
        // A boolean grid (a fixture written by NanoVDB's own tools): nearest only.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/nanovdb/flags_bool.nvdb");
        let flags = crate::format::read_nvdb(&path).unwrap().remove(0).bytes;
        let b = Grid::parse(&flags).unwrap();
        let [lo, _] = b.index_bbox();
        let at = lo.map(f64::from);
        let err = b.accessor().sample(at, Interpolation::Linear).unwrap_err();
        assert!(err.to_string().contains("use nearest"), "{err}");
        let near = b
            .accessor()
            .sample([at[0] + 0.4, at[1], at[2]], Interpolation::Nearest);
        assert_eq!(near.unwrap(), b.value(lo).unwrap());
    }
}
