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
//!
//! What the caller provides: bricks that use the whole grids' index→world maps and hold
//! every voxel of the region plus a halo of at least one voxel (a trilinear sample reads
//! the next voxel), a [`View`] made for the whole frame (its world box and voxel size) and
//! the same on every rank, and the regions of a split of [`Region::domain_lo`]..`domain_hi`.
//! Refused by name ([`RenderError::NotDecomposable`]): the path tracer, MIP and
//! isosurfaces, the march without acceleration cells, and a transmittance cutoff above 0 (a
//! region does not know the transmittance in front of it). Left as is: a ray that runs out
//! of its work budget (a guard against corrupt grids) stops at another place in a region's
//! march than in the whole one's.
//!
//! Measured on lavapipe (tests/render_regions.rs, 160 × 90): 2 and 4 regions differ from
//! the whole render by at most 2.4e-7 (linear RGB).

use super::RenderError;
use super::binding::FrameBinding;
use super::march::MarchPipeline;
use super::params::{FLAG_COMPOSITE, FLAG_REGION, GpuParams, MAX_ATTRIBUTES, Mode, View};
use super::scoped::take_uncaptured_error;
use super::timing::wait;

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
            if self.lo[k] >= self.hi[k] {
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
            if let Some([min, max]) = b
                && (0..3).any(|k| min[k] > max[k])
            {
                return bad(format!("channel {i}: whole-grid bbox {min:?}..{max:?}"));
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
///
/// # Panics
///
/// Where the lengths differ.
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
///
/// # Panics
///
/// Where the lengths differ: check them first when they come from elsewhere (every rank's
/// vector has the same length for the same frame, view and [`Region::whole_grids`]).
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

/// Where one channel's cells lie: its channel and how many cells it has (the whole frame's
/// layout, which `accel_info` writes).
#[derive(Clone, Copy, Debug, PartialEq)]
struct ChannelCells {
    channel: usize,
    cells: usize,
}

/// Bytes of one channel's record in `AccelInfo` (common.wgsl's `ChannelAccel`).
const CHANNEL_ACCEL_BYTES: usize = 32;

/// The channels with cells and their counts, from `AccelInfo`'s bytes.
fn channel_cells(info: &[u8]) -> Vec<ChannelCells> {
    let word = |o: usize| u32::from_le_bytes(info[o..o + 4].try_into().expect("4 bytes"));
    (0..MAX_ATTRIBUTES)
        .filter_map(|a| {
            let rec = a * CHANNEL_ACCEL_BYTES;
            let ok = word(rec + 28) != 0;
            let dims = [word(rec + 16), word(rec + 20), word(rec + 24)];
            let cells = dims.iter().map(|&d| d as usize).product();
            ok.then_some(ChannelCells { channel: a, cells })
        })
        .collect()
}

/// Sort-last's GPU work over the renderer's frame binding and march pipelines.
pub(super) struct RegionPasses<'a> {
    pub(super) device: &'a wgpu::Device,
    pub(super) queue: &'a wgpu::Queue,
    pub(super) binding: &'a mut FrameBinding,
    pub(super) march: &'a mut MarchPipeline,
}

impl RegionPasses<'_> {
    /// Writes the uniforms of `view` at `size` for `region`, with `flags` added.
    fn prepare(
        &mut self,
        view: &View,
        region: &Region,
        size: [u32; 2],
        flags: u32,
    ) -> Result<(), RenderError> {
        let mut params: GpuParams = view.gpu_params(size[0], size[1]);
        params.flags |= flags;
        let (lo, hi) = region.gpu_bounds();
        params.region_lo = [lo[0], lo[1], lo[2], 0.0];
        params.region_hi = [hi[0], hi[1], hi[2], 0.0];
        for a in 0..MAX_ATTRIBUTES {
            let whole = region.whole_grids.get(a).copied().flatten();
            if whole.is_some() && !self.binding.has_grid(a) {
                // The cell layout is made from the bound grids' maps: every rank needs one.
                return Err(RenderError::Usage(format!(
                    "channel {a}: the whole frame has a grid there but none is bound; bind this \
                     region's brick of it (an empty grid with the same map where the region \
                     holds no voxels)"
                )));
            }
            // A channel the whole frame lacks: an empty box, so the shaders see no grid.
            let [min, max] = whole.unwrap_or([[1; 3], [0; 3]]);
            params.region_bmin[a] = [min[0], min[1], min[2], 0];
            params.region_bmax[a] = [max[0], max[1], max[2], 0];
        }
        self.binding
            .prepare(self.queue, &params, &view.tf_table())?;
        Ok(())
    }

    /// Records the chosen acceleration passes and, where `march`, the march over the
    /// whole image; submits and waits.
    fn run(
        &mut self,
        info: bool,
        cells: bool,
        finish: bool,
        march: bool,
    ) -> Result<(), RenderError> {
        let mut enc = self.device.create_command_encoder(&Default::default());
        self.march
            .encode_passes(self.binding, &mut enc, info, cells, finish);
        if march {
            let t = self.binding.targets().expect("prepared");
            let size = [t.width, t.height];
            self.march.encode(self.binding, &mut enc, size, None);
        }
        let idx = self.queue.submit([enc.finish()]);
        wait(self.device, idx)?;
        match take_uncaptured_error() {
            Some(e) => Err(RenderError::Gpu(e)),
            None => Ok(()),
        }
    }

    /// The cell layout `accel_info` wrote (waits).
    fn layout(&self) -> Result<Vec<ChannelCells>, RenderError> {
        let info = &self.binding.accel().info;
        let bytes = crate::device::read_buffer(self.device, self.queue, info, 0, info.size())
            .map_err(|e| RenderError::Gpu(format!("reading the cell layout back: {e}")))?;
        Ok(channel_cells(&bytes))
    }

    /// Byte offset of channel `a`'s cells in the cell buffer.
    fn channel_offset(&self, a: usize) -> u64 {
        a as u64 * u64::from(self.binding.accel_cells()) * 16
    }

    /// This region's cells of the bound frame under `view`: per cell of every channel with
    /// cells, (min, max, extinction quanta).
    pub(super) fn local_cells(
        &mut self,
        view: &View,
        region: &Region,
    ) -> Result<Vec<f32>, RenderError> {
        let size = self
            .binding
            .targets()
            .map_or([1, 1], |t| [t.width, t.height]);
        self.prepare(view, region, size, FLAG_REGION)?;
        self.run(true, true, false, false)?;
        let mut out = Vec::new();
        for ch in self.layout()? {
            let bytes = crate::device::read_buffer(
                self.device,
                self.queue,
                &self.binding.accel().cells,
                self.channel_offset(ch.channel),
                ch.cells as u64 * 16,
            )
            .map_err(|e| RenderError::Gpu(format!("reading the cells back: {e}")))?;
            let cells: Vec<[f32; 4]> = bytemuck::pod_collect_to_vec(&bytes);
            out.extend(cells.iter().flat_map(|c| [c[0], c[1], c[2]]));
        }
        Ok(out)
    }

    /// Builds the whole frame's cells and sun grid from `combined` (every region's cells,
    /// combined): the layout pass, the upload, then dilation and the sun grid.
    fn combined_accel(
        &mut self,
        view: &View,
        region: &Region,
        combined: &[f32],
        size: [u32; 2],
        flags: u32,
    ) -> Result<(), RenderError> {
        self.prepare(view, region, size, flags)?;
        self.run(true, false, false, false)?;
        let layout = self.layout()?;
        let need: usize = layout.iter().map(|c| 3 * c.cells).sum();
        if combined.len() != need {
            return Err(RenderError::Usage(format!(
                "the combined sun extinction has {} values where this frame's cells need {need} \
                 (every rank must bind the same frame with the same view and region layout)",
                combined.len()
            )));
        }
        let mut at = 0;
        for ch in layout {
            let cells: Vec<[f32; 4]> = combined[at..at + 3 * ch.cells]
                .chunks_exact(3)
                .map(|c| [c[0], c[1], c[2], 0.0])
                .collect();
            at += 3 * ch.cells;
            let offset = self.channel_offset(ch.channel);
            let buffer = &self.binding.accel().cells;
            self.queue
                .write_buffer(buffer, offset, bytemuck::cast_slice(&cells));
        }
        Ok(())
    }

    /// The region's premultiplied picture, left in the renderer's linear output image.
    pub(super) fn render(
        &mut self,
        view: &View,
        region: &Region,
        combined: &[f32],
        size: [u32; 2],
    ) -> Result<(), RenderError> {
        self.combined_accel(view, region, combined, size, FLAG_REGION)?;
        self.run(false, false, true, true)
    }

    /// The finished picture of the composite `image`, left in the renderer's output images.
    pub(super) fn finish(
        &mut self,
        view: &View,
        region: &Region,
        combined: &[f32],
        image: &PremultipliedImage,
    ) -> Result<(), RenderError> {
        let pixels = image.width as usize * image.height as usize;
        if image.rgba.len() != 4 * pixels {
            return Err(RenderError::Usage(format!(
                "a premultiplied image of {}x{} pixels has {} floats, not {}",
                image.width,
                image.height,
                image.rgba.len(),
                4 * pixels
            )));
        }
        // The composite passes through the cell buffer, which the finishing march does not
        // otherwise read (the sun grid and the layout are buffers of their own): no binding
        // of its own, so frames keep every part the device binds.
        let room = u64::from(self.binding.accel_cells()) * MAX_ATTRIBUTES as u64;
        if pixels as u64 > room {
            return Err(RenderError::Usage(format!(
                "a {}x{} composite is more than the {room} pixels finishing can take on this device",
                image.width, image.height
            )));
        }
        let size = [image.width, image.height];
        self.combined_accel(view, region, combined, size, FLAG_REGION | FLAG_COMPOSITE)?;
        self.run(false, false, true, false)?;
        let buffer = &self.binding.accel().cells;
        self.queue
            .write_buffer(buffer, 0, bytemuck::cast_slice(&image.rgba));
        self.run(false, false, false, true)
    }
}

/// Refuses, by name, what does not decompose over regions: modes other than the shaded
/// march (the path tracer scatters light between regions; MIP and isosurfaces composite by
/// other rules), the march without its acceleration cells, and rays that stop at a
/// transmittance cutoff.
pub(super) fn check_decomposes(view: &View) -> Result<(), RenderError> {
    if !view.settings.accel {
        // Without the cells, tile skipping decides where nested grids refine the steps, from
        // the bound (partial) grids.
        return Err(RenderError::NotDecomposable(
            "the march without acceleration cells (settings.accel off)",
        ));
    }
    if view.settings.transmittance_cutoff > 0.0 {
        // The whole march stops where the transmittance from the camera falls below the
        // cutoff; a region does not know the transmittance in front of it.
        return Err(RenderError::NotDecomposable(
            "stopping rays at a transmittance cutoff (settings.transmittance_cutoff above 0; \
             set it to 0 to split)",
        ));
    }
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
    fn a_region_that_cannot_be_drawn_is_refused_with_what_is_wrong() {
        let good = Region {
            lo: [0.0; 3],
            hi: [4.0, 10.0, 10.0],
            domain_lo: [0.0; 3],
            domain_hi: [10.0; 3],
            whole_grids: vec![Some([[0; 3], [39; 3]])],
        };
        good.check().unwrap();
        type Spoil = fn(&mut Region);
        let cases: [(Spoil, &str); 5] = [
            (|r| r.lo[1] = f64::NAN, "not finite"),
            (|r| r.hi[0] = 0.0, "axis 0 is empty"),
            (|r| r.hi[2] = 11.0, "not inside the domain"),
            (
                |r| r.whole_grids = vec![None; MAX_ATTRIBUTES + 1],
                "at most",
            ),
            (
                |r| r.whole_grids[0] = Some([[0; 3], [-1, 5, 5]]),
                "channel 0",
            ),
        ];
        for (spoil, says) in cases {
            let mut r = good.clone();
            spoil(&mut r);
            let e = r.check().unwrap_err().to_string();
            assert!(e.contains(says), "{e} (expected {says:?})");
        }
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
