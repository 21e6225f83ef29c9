//! The CPU reference renderer: the shader's camera, sampling and compositing in Rust, over
//! [`crate::format::Grid`]'s value accessor, for tests.
//!
//! It builds the same acceleration and sun grids as `shaders/accel.wgsl` (the sun grid on
//! its own cells, finer than the acceleration cells along axes of longer voxels) and marches as
//! `shaders/march.wgsl` does (skipping cells the transfer functions make transparent, taking
//! adaptive steps in thin media), but never skips tiles: tile skipping only drops samples
//! that add nothing, so comparing the GPU against it checks the tree walk, the decoding and
//! the skipping at once. It reads the same [`GpuParams`] and transfer-function table as the
//! shaders; the functions below (and the march of one pixel, in `cpu/march.rs`) follow them
//! one for one.

use glam::Vec3;
use rayon::prelude::*;

use super::image::{Image, aces, srgb_encode};
use super::params::{FLAG_SHADOWS, GpuParams, KIND_SCATTER, MAX_ATTRIBUTES, Mode, View};
use super::shader::{ACCEL_CELLS, SCAN_SHIFT_MAX, SUPPORTED_TYPES};
use super::transfer::{TF_SIZE, sample_table};
use crate::format::{Grid, ReadAccessor};

mod march;

const INF: f32 = 3.0e38;

/// What the march did for an image, counted by the CPU reference (which takes the same
/// steps as `shaders/march.wgsl` in shaded mode): the figures to compare step rules by
/// without a GPU, since a march's time on the GPU follows its samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarchWork {
    /// Rays (pixels).
    pub rays: u64,
    /// Iterations of the march loop (sample points along the rays).
    pub steps: u64,
    /// Trilinear samples of a grid (a step samples every channel not skipped there).
    pub samples: u64,
    /// Sun-grid lookups (lit samples and lit surfaces).
    pub sun_lookups: u64,
}

impl MarchWork {
    fn add(&mut self, o: &MarchWork) {
        self.rays += o.rays;
        self.steps += o.steps;
        self.samples += o.samples;
        self.sun_lookups += o.sun_lookups;
    }

    /// `x` per ray.
    pub fn per_ray(&self, x: u64) -> f64 {
        x as f64 / self.rays.max(1) as f64
    }
}

struct GridState<'g, 'a> {
    acc: ReadAccessor<'g, 'a>,
    bmin: [i32; 3],
    bmax: [i32; 3],
    inv: [Vec3; 3],
    mat: [Vec3; 3],
    vec: Vec3,
}

impl GridState<'_, '_> {
    fn to_world(&self, p: Vec3) -> Vec3 {
        Vec3::new(self.mat[0].dot(p), self.mat[1].dot(p), self.mat[2].dot(p)) + self.vec
    }
    fn to_index(&self, w: Vec3) -> Vec3 {
        let d = w - self.vec;
        Vec3::new(self.inv[0].dot(d), self.inv[1].dot(d), self.inv[2].dot(d))
    }
    fn dir_to_index(&self, d: Vec3) -> Vec3 {
        Vec3::new(self.inv[0].dot(d), self.inv[1].dot(d), self.inv[2].dot(d))
    }
    /// How many times finer than the base step this grid is sampled (march.wgsl's
    /// `refinement`): the power of two n (1 to 64) with 1.5·n at most the ratio of the voxel
    /// unit `base_voxel` to this grid's smallest voxel edge (its shortest axis).
    fn refinement(&self, base_voxel: f32) -> f32 {
        let inv2 = self.inv[0]
            .dot(self.inv[0])
            .max(self.inv[1].dot(self.inv[1]))
            .max(self.inv[2].dot(self.inv[2]));
        let r2 = base_voxel * base_voxel * inv2;
        let mut n = 1.0f32;
        while n < 64.0 && (1.5 * n) * (1.5 * n) <= r2 {
            n *= 2.0;
        }
        n
    }
    fn value(&mut self, ijk: [i32; 3]) -> f32 {
        self.acc
            .value(ijk)
            .ok()
            .and_then(|v| v.as_f32())
            .unwrap_or(0.0)
    }
    fn sample(&mut self, p: Vec3) -> f32 {
        let fp = p.floor();
        let i = [fp.x as i32, fp.y as i32, fp.z as i32];
        let f = p - fp;
        let mut v = [0.0f32; 8];
        for (n, out) in v.iter_mut().enumerate() {
            let d = [(n >> 2) as i32 & 1, (n >> 1) as i32 & 1, n as i32 & 1];
            *out = self.value([
                i[0].wrapping_add(d[0]),
                i[1].wrapping_add(d[1]),
                i[2].wrapping_add(d[2]),
            ]);
        }
        trilerp(&v, f)
    }
}

fn trilerp(v: &[f32; 8], f: Vec3) -> f32 {
    let a00 = v[0] + (v[1] - v[0]) * f.z;
    let a01 = v[2] + (v[3] - v[2]) * f.z;
    let a10 = v[4] + (v[5] - v[4]) * f.z;
    let a11 = v[6] + (v[7] - v[6]) * f.z;
    let b0 = a00 + (a01 - a00) * f.y;
    let b1 = a10 + (a11 - a10) * f.y;
    b0 + (b1 - b0) * f.x
}

fn safe_inv(d: Vec3) -> Vec3 {
    let f = |x: f32| {
        let e = if x.abs() < 1e-20 {
            if x >= 0.0 { 1e-20 } else { -1e-20 }
        } else {
            x
        };
        1.0 / e
    };
    Vec3::new(f(d.x), f(d.y), f(d.z))
}

fn ray_box(o: Vec3, inv_d: Vec3, lo: Vec3, hi: Vec3) -> (f32, f32) {
    let t0 = (lo - o) * inv_d;
    let t1 = (hi - o) * inv_d;
    let tn = t0.min(t1);
    let tf = t0.max(t1);
    (tn.max_element(), tf.min_element())
}

fn v3(a: [f32; 4]) -> Vec3 {
    Vec3::new(a[0], a[1], a[2])
}

fn smoothstep(e0: f32, e1: f32, x: f32) -> f32 {
    let t = ((x - e0) / (e1 - e0)).clamp(0.0, 1.0);
    t * t * (3.0 - 2.0 * t)
}

struct Ctx<'p> {
    p: &'p GpuParams,
    tf: &'p [[f32; 4]],
}

impl Ctx<'_> {
    fn tf_u(&self, a: usize, u: f32) -> [f32; 4] {
        let row = self.p.attrs[a].tf_row as usize * TF_SIZE;
        sample_table(&self.tf[row..row + TF_SIZE], u)
    }
    fn norm(&self, a: usize, v: f32) -> f32 {
        if !v.is_finite() {
            return 0.0;
        }
        let at = &self.p.attrs[a];
        ((v - at.range_lo) * at.range_inv).clamp(0.0, 1.0)
    }
    fn tf_eval(&self, a: usize, v: f32) -> [f32; 4] {
        if !v.is_finite() {
            return [0.0; 4];
        }
        self.tf_u(a, self.norm(a, v))
    }

    /// `sun_transmittance` of march.wgsl.
    fn sun_transmittance(&self, g: &[Option<GridState>], acc: &Accel, w: Vec3) -> f32 {
        let Some(r) = acc.shadow_ref else { return 1.0 };
        if self.p.flags & FLAG_SHADOWS == 0 {
            return 1.0;
        }
        let (Some(gs), Some(si)) = (&g[r], &acc.sun_cells) else {
            return 1.0;
        };
        let size = si.size();
        let dims = Vec3::new(si.dims[0] as f32, si.dims[1] as f32, si.dims[2] as f32);
        let org = Vec3::new(si.org[0] as f32, si.org[1] as f32, si.org[2] as f32);
        let mut u = gs.to_index(w) / size - org - Vec3::splat(0.5);
        let lo = Vec3::splat(-0.5);
        let hi = dims - Vec3::splat(0.5);
        if u.cmplt(lo).any() || u.cmpgt(hi).any() {
            let du = gs.dir_to_index(v3(self.p.light_dir)) / size;
            let (e0, e1) = ray_box(u, safe_inv(du), lo, hi);
            if e0.partial_cmp(&e1).is_none_or(|o| o.is_gt()) || e1 < 0.0 {
                return 1.0;
            }
            u += du * e0.max(0.0);
        }
        u = u.clamp(Vec3::ZERO, dims - Vec3::ONE);
        let fl = u.floor();
        let i0 = [fl.x as u32, fl.y as u32, fl.z as u32];
        let i1: [u32; 3] = std::array::from_fn(|k| (i0[k] + 1).min(si.dims[k] - 1));
        let f = u - fl;
        let mut v = [0.0f32; 8];
        for (n, out) in v.iter_mut().enumerate() {
            let c = [
                if n & 4 != 0 { i1[0] } else { i0[0] },
                if n & 2 != 0 { i1[1] } else { i0[1] },
                if n & 1 != 0 { i1[2] } else { i0[2] },
            ];
            *out = acc.sun[si.linear(c)];
        }
        trilerp(&v, f)
    }

    fn sky(&self, d: Vec3) -> Vec3 {
        let p = self.p;
        let up = d.z.clamp(0.0, 1.0);
        let (hz, zn) = (v3(p.sky_horizon), v3(p.sky_zenith));
        let mut c = hz.lerp(zn, up.sqrt());
        if d.z < 0.0 {
            c = hz * (1.0 - 0.5 * (-d.z * 4.0).clamp(0.0, 1.0));
        }
        let sun = d.dot(v3(p.light_dir)).max(0.0);
        c + v3(p.light_color) * (0.04 * sun.powf(8.0) + 2.0 * sun.powf(800.0))
    }

    fn ground_color(&self, w: Vec3, t: f32, sun_vis: f32) -> Vec3 {
        let p = self.p;
        let spacing = p.ground[1];
        let width = (spacing * 0.015).max(t * p.pixel_angle * 1.5);
        let line_at = |x: f32| {
            let v = x / spacing + 0.5;
            let d = (v - v.floor() - 0.5).abs() * spacing;
            1.0 - smoothstep(0.5 * width, width, d)
        };
        let line = line_at(w.x).max(line_at(w.y));
        let fade = (spacing * 0.06 / width).clamp(0.0, 1.0);
        let albedo = Vec3::new(0.42, 0.45, 0.36).lerp(Vec3::new(0.75, 0.77, 0.72), line * fade)
            * p.ground[2];
        let sun = p.light_dir[2].max(0.0) * sun_vis;
        let lit = albedo * (v3(p.light_color) * sun + v3(p.sky_zenith) * p.sky_zenith[3]);
        let haze = 1.0 - (-t / (p.ground[1] * 40.0)).exp();
        lit.lerp(v3(p.sky_horizon), haze * 0.8)
    }

    fn camera_ray(&self, x: u32, y: u32) -> (Vec3, Vec3) {
        self.p.pixel_ray(x as f32 + 0.5, y as f32 + 0.5)
    }
}

/// Where a channel's cells lie: the first cell, the cell size (2^shift voxels), the counts.
#[derive(Clone, Copy)]
struct CellLayout {
    org: [i32; 3],
    shift: u32,
    dims: [u32; 3],
}

/// The cells over the index box [bmin, bmax] (accel.wgsl's `channel_cells_over`): the smallest
/// shift (at least 3) whose cells fit `ACCEL_CELLS`; `None` where they cannot.
fn cells_over(bmin: [i32; 3], bmax: [i32; 3]) -> Option<CellLayout> {
    let mut shift = 3u32;
    loop {
        let sz = (1u32 << shift) as f32;
        let n: [f32; 3] = std::array::from_fn(|k| {
            (bmax[k] as f32 / sz).floor() - (bmin[k] as f32 / sz).floor() + 1.0
        });
        if n[0] * n[1] * n[2] <= ACCEL_CELLS as f32 || shift >= 30 {
            break;
        }
        shift += 1;
    }
    let span_ok = (0..3).all(|k| bmax[k] as f32 - bmin[k] as f32 + 1.0 > 0.0);
    let org: [i32; 3] = std::array::from_fn(|k| bmin[k] >> shift);
    let dims: [u32; 3] = std::array::from_fn(|k| ((bmax[k] >> shift) - org[k] + 1) as u32);
    let count = dims.iter().map(|&d| u64::from(d)).product::<u64>();
    (span_ok && count <= u64::from(ACCEL_CELLS)).then_some(CellLayout { org, shift, dims })
}

/// One channel's acceleration grid (`ChannelAccel` and its cells in accel.wgsl).
struct ChannelAccel {
    org: [i32; 3],
    shift: u32,
    dims: [u32; 3],
    /// (min, max, mean extinction, max extinction around) per cell.
    cells: Vec<[f32; 4]>,
}

impl ChannelAccel {
    fn linear(&self, c: [u32; 3]) -> usize {
        (c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])) as usize
    }
    /// The cell holding base voxel `i`, if inside the grid.
    fn cell_of(&self, i: [i32; 3]) -> Option<[u32; 3]> {
        let mut c = [0u32; 3];
        for k in 0..3 {
            let v = (i[k] >> self.shift) - self.org[k];
            if v < 0 || v as u32 >= self.dims[k] {
                return None;
            }
            c[k] = v as u32;
        }
        Some(c)
    }
}

/// The sun grid's cells (common.wgsl's `AccelInfo.sun`): 2^shifts[k] voxels of the
/// reference channel along axis k.
struct SunCells {
    org: [i32; 3],
    shifts: [u32; 3],
    dims: [u32; 3],
}

impl SunCells {
    /// accel.wgsl's `sun_cells_over`: over the reference channel's cells `c`, whose voxels
    /// have the world edges `edges` (the index→world matrix's column lengths).
    fn over(c: &CellLayout, edges: Vec3) -> SunCells {
        let emin = edges.min_element().max(1e-30);
        let top = c.shift;
        let mut s: [u32; 3] = std::array::from_fn(|k| {
            top - (edges[k] / emin).log2().floor().clamp(0.0, top as f32) as u32
        });
        let bmin: [i32; 3] = std::array::from_fn(|k| c.org[k] << top);
        let bmax: [i32; 3] = std::array::from_fn(|k| ((c.org[k] + c.dims[k] as i32) << top) - 1);
        let layout = |s: &[u32; 3]| {
            let org: [i32; 3] = std::array::from_fn(|k| bmin[k] >> s[k]);
            let dims: [u32; 3] = std::array::from_fn(|k| ((bmax[k] >> s[k]) - org[k] + 1) as u32);
            (org, dims)
        };
        let (mut org, mut dims) = layout(&s);
        for _ in 0..32 {
            let n: f32 = dims.iter().map(|&d| d as f32).product();
            if n <= ACCEL_CELLS as f32 || s.iter().all(|&x| x >= top) {
                break;
            }
            s = s.map(|x| (x + 1).min(top));
            (org, dims) = layout(&s);
        }
        SunCells {
            org,
            shifts: s,
            dims,
        }
    }
    fn size(&self) -> Vec3 {
        Vec3::new(
            (1u32 << self.shifts[0]) as f32,
            (1u32 << self.shifts[1]) as f32,
            (1u32 << self.shifts[2]) as f32,
        )
    }
    fn count(&self) -> usize {
        self.dims.iter().map(|&d| d as usize).product()
    }
    fn linear(&self, c: [u32; 3]) -> usize {
        (c[0] + self.dims[0] * (c[1] + self.dims[1] * c[2])) as usize
    }
}

/// The acceleration and sun grids of accel.wgsl.
struct Accel {
    channels: Vec<Option<ChannelAccel>>,
    shadow_ref: Option<usize>,
    sun_cells: Option<SunCells>,
    sun: Vec<f32>,
}

impl Ctx<'_> {
    /// `tf_max_alpha` of accel.wgsl.
    fn tf_max_alpha(&self, a: usize, lo: f32, hi: f32) -> f32 {
        if lo.partial_cmp(&hi).is_none_or(|o| o.is_gt()) {
            return 0.0;
        }
        let (u0, u1) = (self.norm(a, lo), self.norm(a, hi));
        let mut m = self.tf_u(a, u0)[3].max(self.tf_u(a, u1)[3]);
        let top = (TF_SIZE - 1) as f32;
        let i0 = (u0 * top).ceil() as usize;
        let i1 = ((u1 * top).floor() as usize).min(TF_SIZE - 1);
        let row = self.p.attrs[a].tf_row as usize * TF_SIZE;
        for i in i0..=i1 {
            m = m.max(self.tf[row + i][3]);
        }
        m
    }

    /// Passes `accel_info`, `accel_cells`, `accel_dilate` and `accel_sun`.
    fn build_accel(&self, g: &mut [Option<GridState>]) -> Accel {
        let mut acc = Accel {
            channels: (0..MAX_ATTRIBUTES).map(|_| None).collect(),
            shadow_ref: None,
            sun_cells: None,
            sun: Vec::new(),
        };
        let (layout, shadow_ref) = self.accel_info(g);
        acc.shadow_ref = shadow_ref;
        for a in 0..MAX_ATTRIBUTES {
            let Some(gs) = g[a].as_mut() else { continue };
            let Some(CellLayout { org, shift, dims }) = layout[a] else {
                continue;
            };
            let mut sa = ChannelAccel {
                org,
                shift,
                dims,
                cells: self.accel_cells(a, gs, org, shift, dims),
            };
            self.accel_dilate(a, &mut sa);
            acc.channels[a] = Some(sa);
        }
        if let Some(r) = acc.shadow_ref {
            let (sun, cells) = self.accel_sun(g, &acc, r, &layout);
            acc.sun = sun;
            acc.sun_cells = Some(cells);
        }
        acc
    }

    /// `accel_info`: each shaded channel's cells over its active box, and the channel whose cells
    /// carry the sun grid (widened to every channel's box in its index space); its index.
    #[allow(clippy::needless_range_loop)] // channel indices address several parallel arrays
    fn accel_info(&self, g: &[Option<GridState>]) -> (Vec<Option<CellLayout>>, Option<usize>) {
        let p = self.p;
        let on = p.mode == Mode::Shaded as u32;
        let mut layout: Vec<Option<CellLayout>> = (0..MAX_ATTRIBUTES)
            .map(|a| {
                let gs = g[a].as_ref().filter(|_| on)?;
                cells_over(gs.bmin, gs.bmax)
            })
            .collect();
        let shadow_ref = (0..MAX_ATTRIBUTES).find(|&a| {
            layout[a].is_some() && p.attrs[a].shadow != 0 && p.flags & FLAG_SHADOWS != 0
        });
        // The sun grid lives on the reference channel's cells: widened to every channel's box in
        // its index space (accel.wgsl's `accel_info`).
        if let Some(r) = shadow_ref
            && let Some(gr) = &g[r]
        {
            let mut lo = Vec3::new(gr.bmin[0] as f32, gr.bmin[1] as f32, gr.bmin[2] as f32);
            let mut hi = Vec3::new(gr.bmax[0] as f32, gr.bmax[1] as f32, gr.bmax[2] as f32);
            for b in 0..MAX_ATTRIBUTES {
                let Some(gb) = g[b].as_ref().filter(|_| b != r && layout[b].is_some()) else {
                    continue;
                };
                for n in 0..8 {
                    let pick = |k: usize, bit: usize| {
                        (if n & bit != 0 { gb.bmax[k] } else { gb.bmin[k] }) as f32
                    };
                    let c = Vec3::new(pick(0, 4), pick(1, 2), pick(2, 1));
                    let q = gr.to_index(gb.to_world(c));
                    lo = lo.min(q.floor());
                    hi = hi.max(q.ceil());
                }
            }
            let lim = Vec3::splat(1.0e9);
            if lo.abs().cmplt(lim).all() && hi.abs().cmplt(lim).all() {
                let wide = cells_over(
                    [lo.x as i32, lo.y as i32, lo.z as i32],
                    [hi.x as i32, hi.y as i32, hi.z as i32],
                );
                if wide.is_some() {
                    layout[r] = wide;
                }
            }
        }
        (layout, shadow_ref)
    }

    /// `accel_cells`: every cell's value range and mean extinction.
    fn accel_cells(
        &self,
        a: usize,
        gs: &mut GridState,
        org: [i32; 3],
        shift: u32,
        dims: [u32; 3],
    ) -> Vec<[f32; 4]> {
        let p = self.p;
        let count = dims.iter().map(|&d| u64::from(d)).product::<u64>();
        let mut cells = vec![[0.0f32; 4]; count as usize];
        for (idx, cell) in cells.iter_mut().enumerate() {
            let i = idx as u32;
            let c = [
                i % dims[0],
                (i / dims[0]) % dims[1],
                i / (dims[0] * dims[1]),
            ];
            if shift > SCAN_SHIFT_MAX {
                *cell = [-INF, INF, 0.0, 0.0];
                continue;
            }
            let base: [i32; 3] = std::array::from_fn(|k| (org[k] + c[k] as i32) << shift);
            let per = 1u32 << (shift - 3);
            let blocks = per * per * per;
            // accel.wgsl's `block_quanta`: each block's opacity sum in whole quanta.
            let quanta = (1u32 << (14 - 3 * (shift - 3))) as f32;
            let (mut lo, mut hi, mut sum) = (INF, -INF, 0.0f32);
            for b in 0..blocks {
                let mut block = 0.0f32;
                let bo = [
                    base[0] + 8 * (b / (per * per)) as i32,
                    base[1] + 8 * ((b / per) % per) as i32,
                    base[2] + 8 * (b % per) as i32,
                ];
                for n in 0..512u32 {
                    let ijk = [
                        bo[0] + (n >> 6) as i32,
                        bo[1] + ((n >> 3) & 7) as i32,
                        bo[2] + (n & 7) as i32,
                    ];
                    let v = gs.value(ijk);
                    if v.is_finite() {
                        lo = lo.min(v);
                        hi = hi.max(v);
                        block += self.tf_eval(a, v)[3];
                    }
                }
                sum += (block * quanta + 0.5).floor();
            }
            // `accel_dilate`: a cell's mean is its sum in quanta times 2^-23.
            *cell = [
                lo,
                hi,
                sum * (1.0 / 8_388_608.0) * p.attrs[a].extinction,
                0.0,
            ];
        }
        cells
    }

    /// `accel_dilate`: each cell's largest extinction over its 27 neighbours' value range.
    fn accel_dilate(&self, a: usize, sa: &mut ChannelAccel) {
        let p = self.p;
        let dims = sa.dims;
        let mut wmax = vec![0.0f32; sa.cells.len()];
        for (idx, out) in wmax.iter_mut().enumerate() {
            let i = idx as u32;
            let c = [
                (i % dims[0]) as i32,
                ((i / dims[0]) % dims[1]) as i32,
                (i / (dims[0] * dims[1])) as i32,
            ];
            let (mut lo, mut hi) = (INF, -INF);
            for n in 0..27 {
                let q = [c[0] + n / 9 - 1, c[1] + (n / 3) % 3 - 1, c[2] + n % 3 - 1];
                if (0..3).any(|k| q[k] < 0 || q[k] as u32 >= dims[k]) {
                    continue;
                }
                let m = sa.cells[sa.linear([q[0] as u32, q[1] as u32, q[2] as u32])];
                lo = lo.min(m[0]);
                hi = hi.max(m[1]);
            }
            *out = self.tf_max_alpha(a, lo, hi) * p.attrs[a].extinction;
        }
        for (cell, w) in sa.cells.iter_mut().zip(wmax) {
            cell[3] = w;
        }
    }

    /// `accel_sun`: the sun's transmittance at each sun cell's centre on reference channel
    /// `r`'s cells (1 where no scattering channel can be seen and off the grid's faces).
    #[allow(clippy::needless_range_loop)] // channel indices address several parallel arrays
    fn accel_sun(
        &self,
        g: &[Option<GridState>],
        acc: &Accel,
        r: usize,
        layout: &[Option<CellLayout>],
    ) -> (Vec<f32>, SunCells) {
        let p = self.p;
        let gr = g[r].as_ref().expect("the reference channel has a grid");
        let column = |k: usize| Vec3::new(gr.mat[0][k], gr.mat[1][k], gr.mat[2][k]).length();
        let edges = Vec3::new(column(0), column(1), column(2));
        let si = SunCells::over(
            layout[r].as_ref().expect("the reference channel has cells"),
            edges,
        );
        let size = si.size();
        let l = v3(p.light_dir);
        let h = 1.0 / (gr.dir_to_index(l) / size).length().max(1e-30);
        let mut sun = vec![0.0f32; si.count()];
        for (idx, out) in sun.iter_mut().enumerate() {
            let i = idx as u32;
            let d = si.dims;
            let c = [i % d[0], (i / d[0]) % d[1], i / (d[0] * d[1])];
            let centre = Vec3::new(
                (si.org[0] + c[0] as i32) as f32 + 0.5,
                (si.org[1] + c[1] as i32) as f32 + 0.5,
                (si.org[2] + c[2] as i32) as f32 + 0.5,
            ) * size;
            let w0 = gr.to_world(centre);
            // `sun_needed`: faces of the grid, and cells where a scattering channel can be
            // visible.
            let face = (0..3).any(|k| c[k] == 0 || c[k] + 1 == d[k]);
            let visible = (0..MAX_ATTRIBUTES).any(|b| {
                let (Some(sb), Some(gb)) = (&acc.channels[b], &g[b]) else {
                    return false;
                };
                if p.attrs[b].kind != KIND_SCATTER {
                    return false;
                }
                let fl = gb.to_index(w0).floor();
                fl.abs().max_element() <= 2.0e9
                    && sb
                        .cell_of([fl.x as i32, fl.y as i32, fl.z as i32])
                        .is_some_and(|cc| sb.cells[sb.linear(cc)][3] > 0.0)
            });
            if !face && !visible {
                *out = 1.0;
                continue;
            }
            let mut tau = 0.0f32;
            for k in 0..p.shadow_steps {
                let q = w0 + l * ((k as f32 + 0.5) * h);
                let mut inside = false;
                for b in 0..MAX_ATTRIBUTES {
                    let (Some(sb), Some(gb)) = (&acc.channels[b], &g[b]) else {
                        continue;
                    };
                    if p.attrs[b].shadow == 0 {
                        continue;
                    }
                    let pi = gb.to_index(q);
                    let sz = (1u32 << sb.shift) as f32;
                    let lo: [f32; 3] = std::array::from_fn(|k| (sb.org[k] << sb.shift) as f32);
                    let ins =
                        (0..3).all(|k| pi[k] >= lo[k] && pi[k] < lo[k] + sb.dims[k] as f32 * sz);
                    if ins {
                        inside = true;
                        let fl = pi.floor();
                        if fl.abs().max_element() <= 2.0e9
                            && let Some(cc) = sb.cell_of([fl.x as i32, fl.y as i32, fl.z as i32])
                        {
                            tau += sb.cells[sb.linear(cc)][2] * h;
                        }
                    }
                }
                if !inside || tau > p.shadow_tau_max {
                    break;
                }
            }
            *out = (-tau).exp();
        }
        (sun, si)
    }
}

/// Renders `view` at `width` × `height` on the CPU from parsed grids (channel `i` styles
/// `grids[i]`), marching with fixed steps whatever `view.settings.hdda` says. Grids of types
/// the shader does not decode are left out, as on the GPU.
/// Grids may be larger than 4 GiB (the parser's offsets are 64-bit), as the shaders' are.
pub fn render_cpu(grids: &[Option<&Grid<'_>>], view: &View, width: u32, height: u32) -> Image {
    render_cpu_counted(grids, view, width, height).0
}

/// [`render_cpu`], and the march's work for the image ([`MarchWork`]).
pub fn render_cpu_counted(
    grids: &[Option<&Grid<'_>>],
    view: &View,
    width: u32,
    height: u32,
) -> (Image, MarchWork) {
    let params = view.gpu_params(width, height);
    let tf = view.tf_table();
    let ctx = Ctx {
        p: &params,
        tf: &tf,
    };
    let make_states = || -> Vec<Option<GridState>> {
        (0..MAX_ATTRIBUTES)
            .map(|a| {
                let g = grids.get(a).copied().flatten()?;
                if params.attrs[a].enabled == 0 || !SUPPORTED_TYPES.contains(&g.grid_type()) {
                    return None;
                }
                let [bmin, bmax] = g.index_bbox();
                if (0..3).any(|i| bmin[i] > bmax[i]) {
                    return None;
                }
                let m = g.map();
                let row = |mat: &[f32; 9], i: usize| {
                    Vec3::new(mat[3 * i], mat[3 * i + 1], mat[3 * i + 2])
                };
                Some(GridState {
                    acc: g.accessor(),
                    bmin,
                    bmax,
                    inv: [0, 1, 2].map(|i| row(&m.inv_mat_f, i)),
                    mat: [0, 1, 2].map(|i| row(&m.mat_f, i)),
                    vec: Vec3::from(m.vec_f),
                })
            })
            .collect()
    };
    let accel = ctx.build_accel(&mut make_states());
    let rows: Vec<(Vec<[f32; 4]>, MarchWork)> = (0..height)
        .into_par_iter()
        .map(|y| {
            let mut states = make_states();
            let mut work = MarchWork::default();
            let row = (0..width)
                .map(|x| ctx.pixel(&mut states, &accel, x, y, &mut work))
                .collect();
            (row, work)
        })
        .collect();
    let mut work = MarchWork::default();
    for (_, w) in &rows {
        work.add(w);
    }
    let mut img = Image::new(width, height);
    let exposure = params.sky_horizon[3];
    for (i, px) in rows.into_iter().flat_map(|(r, _)| r).enumerate() {
        img.linear[i] = px;
        for (out, &x) in img.rgba8[4 * i..4 * i + 3].iter_mut().zip(&px[..3]) {
            let v = if params.mode == Mode::Mip as u32 {
                x
            } else {
                aces(x * exposure)
            };
            *out = (srgb_encode(v.clamp(0.0, 1.0)) * 255.0 + 0.5) as u8;
        }
        img.rgba8[4 * i + 3] = 255;
    }
    (img, work)
}
