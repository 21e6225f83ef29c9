//! Sort-last rendering (`render --split space`): each rank draws the part of the volume that
//! lies in its [`Region`] of the domain, from grids that hold only that part (plus a halo),
//! as a premultiplied image; the ranks composite those images front to back
//! ([`premultiplied_over`]) and one of them adds what lies behind the volume
//! (`Renderer::finish_premultiplied`).
//!
//! What makes the composite equal the one-rank picture:
//! - Every grid-dependent layout stays the whole frame's: the acceleration cells, the sun
//!   grid and the rays' clipping use the whole grids' index bboxes ([`Region::whole_grids`]),
//!   not the bricks'.
//! - The acceleration cells (value range and extinction per cell, which the march's
//!   empty-space skipping and adaptive steps and the sun grid are made from) are reduced
//!   over the ranks ([`combine_sun_extinction`]): each rank scans only the 8³ blocks whose
//!   centre lies in its region, so no voxel of a halo counts twice; ranges combine by
//!   min/max and extinction sums by addition, which is exact because a block's opacity sum is
//!   rounded to a whole number of quanta small enough that a cell's sum stays below 2^24
//!   quanta (the one-rank renderer sums the same quanta, so both give the same cells).
//! - Every rank marches the whole ray with the whole frame's cells, so its steps land
//!   where the one-rank march's do, and adds only the samples whose position lies in its
//!   region (half-open boxes: a sample on a boundary belongs to one region).

use super::RenderError;
use super::params::{MAX_ATTRIBUTES, Mode, View};

/// The part of the domain one rank draws, and what the one-rank renderer would have bound.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// The box this rank draws, world units, half-open per axis: `[lo, hi)`.
    pub lo: [f64; 3],
    /// See [`lo`](Self::lo).
    pub hi: [f64; 3],
    /// The whole domain's world box (the root of the split). A face of the region that lies
    /// on a face of the domain reaches to infinity, so that samples just outside the domain
    /// (within the voxel a trilinear stencil reaches past a grid's bbox) still belong to
    /// exactly one region.
    pub domain_lo: [f64; 3],
    /// See [`domain_lo`](Self::domain_lo).
    pub domain_hi: [f64; 3],
    /// Per attribute channel, the index bbox (inclusive min and max voxel) of the whole
    /// frame's grid, as its NanoVDB root records it: what the one-rank renderer binds.
    /// `None` where the frame has no grid in that channel. The bound grids (bricks) must
    /// use the same index→world maps as the whole grids, hold every voxel of the region and
    /// a halo of at least one voxel around it.
    pub whole_grids: Vec<Option<[[i32; 3]; 2]>>,
}

impl Region {
    /// Whether world point `p` belongs to this region (half-open, faces on the domain's
    /// faces extended to infinity), in `f32` as the shaders decide it.
    pub fn contains(&self, p: [f32; 3]) -> bool {
        let (lo, hi) = self.gpu_bounds();
        (0..3).all(|k| p[k] >= lo[k] && p[k] < hi[k])
    }

    /// The region's box as the shaders test it: `f32`, with faces on the domain's faces
    /// moved to ∓3e38.
    pub(super) fn gpu_bounds(&self) -> ([f32; 3], [f32; 3]) {
        let far = 3.0e38f32;
        let lo = std::array::from_fn(|k| {
            if self.lo[k] <= self.domain_lo[k] {
                -far
            } else {
                self.lo[k] as f32
            }
        });
        let hi = std::array::from_fn(|k| {
            if self.hi[k] >= self.domain_hi[k] {
                far
            } else {
                self.hi[k] as f32
            }
        });
        (lo, hi)
    }

    /// Checks the region is usable: finite boxes, the region inside the domain and not
    /// empty, at most [`MAX_ATTRIBUTES`] channels, every whole-grid bbox ordered.
    pub fn check(&self) -> Result<(), RenderError> {
        let bad = |what: String| Err(RenderError::Usage(format!("region: {what}")));
        let all = [self.lo, self.hi, self.domain_lo, self.domain_hi];
        if all.iter().flatten().any(|v| !v.is_finite()) {
            return bad(format!("{self:?} has a coordinate that is not finite"));
        }
        for k in 0..3 {
            if !(self.lo[k] < self.hi[k]) {
                return bad(format!(
                    "axis {k} is empty: [{}, {})",
                    self.lo[k], self.hi[k]
                ));
            }
            if self.lo[k] < self.domain_lo[k] || self.hi[k] > self.domain_hi[k] {
                return bad(format!(
                    "axis {k}: [{}, {}) is not inside the domain [{}, {}]",
                    self.lo[k], self.hi[k], self.domain_lo[k], self.domain_hi[k]
                ));
            }
        }
        if self.whole_grids.len() > MAX_ATTRIBUTES {
            return bad(format!(
                "{} channels, at most {MAX_ATTRIBUTES}",
                self.whole_grids.len()
            ));
        }
        for (i, b) in self.whole_grids.iter().enumerate() {
            if let Some([min, max]) = b {
                if (0..3).any(|k| min[k] > max[k]) {
                    return bad(format!("channel {i}: whole-grid bbox {min:?}..{max:?}"));
                }
            }
        }
        Ok(())
    }
}

/// One rank's picture of its region: linear, premultiplied RGBA per pixel (radiance already
/// weighted by the transmittance in front of it within the region; alpha = 1 − the
/// region's transmittance), `width` × `height` pixels, row after row, 4 floats a pixel.
#[derive(Clone, Debug, PartialEq)]
pub struct PremultipliedImage {
    /// Pixels per row.
    pub width: u32,
    /// Rows.
    pub height: u32,
    /// 4 × width × height floats.
    pub rgba: Vec<f32>,
}

impl PremultipliedImage {
    /// A fully transparent image (what compositing starts from).
    pub fn transparent(width: u32, height: u32) -> PremultipliedImage {
        PremultipliedImage {
            width,
            height,
            rgba: vec![0.0; 4 * width as usize * height as usize],
        }
    }
}

/// Front-to-back "over" of premultiplied RGBA f32 pixels: `front` becomes `front` over
/// `back` (colour and alpha alike: `f + (1 − f.a)·b`). Both hold the same number of floats, a
/// multiple of 4.
pub fn premultiplied_over(front: &mut [f32], back: &[f32]) {
    assert_eq!(front.len(), back.len(), "images of different sizes");
    for (f, b) in front.chunks_exact_mut(4).zip(back.chunks_exact(4)) {
        let t = 1.0 - f[3];
        for k in 0..4 {
            f[k] += t * b[k];
        }
    }
}

/// Combines two ranks' [`Renderer::sun_extinction`](super::Renderer::sun_extinction)
/// vectors into `acc`: per cell three floats, the smallest value (min), the largest value
/// (max) and the extinction sum in quanta (sum, exact: whole numbers below 2^24). The result
/// does not depend on the order the ranks are combined in.
pub fn combine_sun_extinction(acc: &mut [f32], other: &[f32]) {
    assert_eq!(
        acc.len(),
        other.len(),
        "sun extinction of different layouts"
    );
    for (a, o) in acc.chunks_exact_mut(3).zip(other.chunks_exact(3)) {
        a[0] = a[0].min(o[0]);
        a[1] = a[1].max(o[1]);
        a[2] += o[2];
    }
}

/// Refuses, by name, what does not decompose over regions: modes other than the shaded
/// march (the path tracer scatters light between regions; MIP and isosurfaces composite by
/// other rules), and grids of different voxel sizes (nested grids refine the steps where
/// their empty cells end, which depends on data outside a region).
pub(super) fn check_decomposes(view: &View) -> Result<(), RenderError> {
    match view.settings.mode {
        Mode::Shaded => Ok(()),
        Mode::Path => Err(RenderError::NotDecomposable("path tracing (--mode path)")),
        Mode::Mip => Err(RenderError::NotDecomposable(
            "maximum-intensity projection (--mode mip)",
        )),
        Mode::Isosurface => Err(RenderError::NotDecomposable("isosurfaces (--mode iso)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn over_composes_transmittance_and_colour() {
        let mut front = vec![0.2, 0.1, 0.0, 0.5];
        premultiplied_over(&mut front, &[0.4, 0.4, 0.4, 0.8]);
        assert_eq!(front, vec![0.4, 0.3, 0.2, 0.9]);
    }

    #[test]
    fn combining_is_min_max_sum_per_cell() {
        let mut a = vec![1.0, 2.0, 3.0, 3.0e38, -3.0e38, 0.0];
        combine_sun_extinction(&mut a, &[0.5, 1.0, 4.0, 2.0, 5.0, 7.0]);
        assert_eq!(a, vec![0.5, 2.0, 7.0, 2.0, 5.0, 7.0]);
    }

    #[test]
    fn a_boundary_point_belongs_to_one_region_and_outer_faces_reach_out() {
        let whole = |lo: [f64; 3], hi: [f64; 3]| Region {
            lo,
            hi,
            domain_lo: [0.0; 3],
            domain_hi: [10.0; 3],
            whole_grids: vec![],
        };
        let left = whole([0.0; 3], [4.0, 10.0, 10.0]);
        let right = whole([4.0, 0.0, 0.0], [10.0; 3]);
        for p in [[4.0, 1.0, 1.0], [-0.5, 11.0, 3.0], [10.5, -1.0, 3.0]] {
            assert!(left.contains(p) != right.contains(p), "{p:?}");
        }
        assert!(right.contains([4.0, 1.0, 1.0]));
        assert!(left.contains([-0.5, 11.0, 3.0]));
    }
}
