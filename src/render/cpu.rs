//! The CPU reference renderer: the shader's camera, sampling and compositing in Rust, over
//! [`crate::format::Grid`]'s value accessor, for tests.
//!
//! It always marches with fixed steps (the lattice the GPU's empty-space skipping visits a
//! subset of), so comparing the GPU's skipping march against it checks the tree walk, the
//! decoding and the skipping at once. It reads the same [`GpuParams`] and transfer-function
//! table as the shader; the functions below follow `shaders/raymarch.wgsl` one for one.

use glam::Vec3;
use rayon::prelude::*;

use super::image::{Image, aces, srgb_encode};
use super::params::{
    FLAG_GROUND, FLAG_JITTER, FLAG_ORTHO, FLAG_SHADOWS, GpuParams, MAX_ATTRIBUTES, Mode, View,
};
use super::shader::SUPPORTED_TYPES;
use super::transfer::TF_SIZE;
use crate::format::{Grid, ReadAccessor};

const INF: f32 = 3.0e38;

struct GridState<'g, 'a> {
    acc: ReadAccessor<'g, 'a>,
    bmin: [i32; 3],
    bmax: [i32; 3],
    inv: [Vec3; 3],
    vec: Vec3,
}

impl GridState<'_, '_> {
    fn to_index(&self, w: Vec3) -> Vec3 {
        let d = w - self.vec;
        Vec3::new(self.inv[0].dot(d), self.inv[1].dot(d), self.inv[2].dot(d))
    }
    fn dir_to_index(&self, d: Vec3) -> Vec3 {
        Vec3::new(self.inv[0].dot(d), self.inv[1].dot(d), self.inv[2].dot(d))
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
    fn outside(&self, p: Vec3) -> bool {
        let lo = Vec3::new(
            (self.bmin[0] - 1) as f32,
            (self.bmin[1] - 1) as f32,
            (self.bmin[2] - 1) as f32,
        );
        let hi = Vec3::new(
            (self.bmax[0] + 1) as f32,
            (self.bmax[1] + 1) as f32,
            (self.bmax[2] + 1) as f32,
        );
        p.cmple(lo).any() || p.cmpge(hi).any()
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

fn pcg(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
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
        let x = u * (TF_SIZE - 1) as f32;
        let i = (x as u32).min(TF_SIZE as u32 - 2) as usize;
        let fr = x - i as f32;
        let base = self.p.attrs[a].tf_row as usize * TF_SIZE + i;
        let (l, h) = (self.tf[base], self.tf[base + 1]);
        std::array::from_fn(|c| l[c] * (1.0 - fr) + h[c] * fr)
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

    fn shadow(&self, g: &mut [Option<GridState>], w: Vec3, steps: u32, dt0: f32) -> f32 {
        let l = v3(self.p.light_dir);
        let mut tau = 0.0;
        let mut s = dt0;
        let mut d = 0.5 * dt0;
        for _ in 0..steps {
            let q = w + l * d;
            for (a, gs) in g.iter_mut().enumerate() {
                let Some(gs) = gs else { continue };
                if self.p.attrs[a].shadow == 0 {
                    continue;
                }
                let p = gs.to_index(q);
                if gs.outside(p) {
                    continue;
                }
                let e = self.tf_eval(a, gs.sample(p));
                tau += e[3] * self.p.attrs[a].extinction * s;
            }
            d += s;
            s *= self.p.shadow_growth;
        }
        (-tau).exp()
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
        let p = self.p;
        let ndc_x = ((x as f32 + 0.5) / p.size[0] as f32) * 2.0 - 1.0;
        let ndc_y = 1.0 - ((y as f32 + 0.5) / p.size[1] as f32) * 2.0;
        let h = p.cam_fwd[3];
        let sx = ndc_x * h * p.cam_right[3];
        let sy = ndc_y * h;
        let (pos, fwd, right, up) = (v3(p.cam_pos), v3(p.cam_fwd), v3(p.cam_right), v3(p.cam_up));
        if p.flags & FLAG_ORTHO != 0 {
            (pos + sx * right + sy * up, fwd)
        } else {
            (pos, (fwd + sx * right + sy * up).normalize())
        }
    }

    fn pixel(&self, g: &mut [Option<GridState>], x: u32, y: u32) -> [f32; 4] {
        let p = self.p;
        let mode = p.mode;
        let (o, d) = self.camera_ray(x, y);
        let mut oi = [Vec3::ZERO; MAX_ATTRIBUTES];
        let mut di = [Vec3::ZERO; MAX_ATTRIBUTES];
        let mut ta0 = [INF; MAX_ATTRIBUTES];
        let mut ta1 = [-INF; MAX_ATTRIBUTES];
        let (mut t_start, mut t_end) = (INF, -INF);
        for a in 0..MAX_ATTRIBUTES {
            let Some(gs) = &g[a] else { continue };
            if mode == Mode::Isosurface as u32 && a as u32 != p.iso_attr {
                continue;
            }
            oi[a] = gs.to_index(o);
            di[a] = gs.dir_to_index(d);
            let lo = Vec3::new(
                (gs.bmin[0] - 1) as f32,
                (gs.bmin[1] - 1) as f32,
                (gs.bmin[2] - 1) as f32,
            );
            let hi = Vec3::new(
                (gs.bmax[0] + 1) as f32,
                (gs.bmax[1] + 1) as f32,
                (gs.bmax[2] + 1) as f32,
            );
            let (r0, r1) = ray_box(oi[a], safe_inv(di[a]), lo, hi);
            if r0 <= r1 && r1 >= 0.0 {
                ta0[a] = r0.max(0.0);
                ta1[a] = r1;
                t_start = t_start.min(ta0[a]);
                t_end = t_end.max(ta1[a]);
            }
        }
        let mut t_ground = INF;
        if p.flags & FLAG_GROUND != 0 && mode != Mode::Mip as u32 && d.z < 0.0 {
            let tg = (p.ground[0] - o.z) / d.z;
            if tg > 0.0 {
                t_ground = tg;
            }
        }
        t_end = t_end.min(t_ground);
        let dt = p.dt;
        let jit = if p.flags & FLAG_JITTER != 0 {
            let h = pcg(x ^ pcg(y ^ pcg(p.frame_seed)));
            (h >> 8) as f32 * (1.0 / 16_777_216.0)
        } else {
            0.0
        };
        let mut k = (t_start / dt - jit).ceil();
        let mut t = (k + jit) * dt;
        let mut tr = 1.0f32;
        let mut c = Vec3::ZERO;
        let mut mip = [0.0f32; MAX_ATTRIBUTES];
        let (mut iso_prev, mut iso_has_prev) = (0.0f32, false);
        let mut iso_hit = false;
        let l = v3(p.light_dir);
        let g_hg = p.light_dir[3];
        let phase = {
            let cos_t = l.dot(d);
            let den = 1.0 + g_hg * g_hg - 2.0 * g_hg * cos_t;
            (1.0 - g_hg * g_hg) / (den * den.sqrt())
        };
        let top = (p.ground[3] - p.ground[0]).max(1e-6);
        let mut steps = 0;
        loop {
            if steps >= p.max_steps || t.is_nan() || t > t_end || tr < p.t_cutoff {
                break;
            }
            steps += 1;
            let mut any_left = false;
            let (mut sig, mut scat, mut emit) = (0.0f32, Vec3::ZERO, Vec3::ZERO);
            for a in 0..MAX_ATTRIBUTES {
                if t < ta0[a] {
                    if ta0[a] < INF {
                        any_left = true;
                    }
                    continue;
                }
                if t > ta1[a] {
                    continue;
                }
                any_left = true;
                let gs = g[a].as_mut().expect("attributes with a range have grids");
                let v = gs.sample(oi[a] + t * di[a]);
                if mode == Mode::Shaded as u32 {
                    let e = self.tf_eval(a, v);
                    if e[3] > 0.0 {
                        let sa = e[3] * p.attrs[a].extinction;
                        sig += sa;
                        let rgb = Vec3::new(e[0], e[1], e[2]);
                        if p.attrs[a].kind == 1 {
                            emit += sa * rgb * p.attrs[a].emission;
                        } else {
                            scat += sa * rgb;
                        }
                    }
                } else if mode == Mode::Mip as u32 {
                    mip[a] = mip[a].max(self.norm(a, v));
                } else {
                    let v = v - p.iso_value;
                    if iso_has_prev && v * iso_prev <= 0.0 && v != iso_prev {
                        iso_hit = true;
                        break;
                    }
                    iso_prev = v;
                    iso_has_prev = true;
                }
            }
            if iso_hit {
                break;
            }
            if sig > 0.0 {
                let w = o + t * d;
                let mut src = emit;
                if scat.cmpgt(Vec3::ZERO).any() {
                    let ts = if p.flags & FLAG_SHADOWS != 0 {
                        self.shadow(g, w, p.shadow_steps, p.shadow_dt)
                    } else {
                        1.0
                    };
                    let h = ((w.z - p.ground[0]) / top).clamp(0.0, 1.0);
                    let amb = v3(p.sky_zenith) * p.sky_zenith[3] * (0.35 + 0.65 * h);
                    let light =
                        v3(p.light_color) * (phase * ts + p.light_color[3] * ts.sqrt()) + amb;
                    src += scat * light;
                }
                let alpha = 1.0 - (-sig * dt).exp();
                c += tr * alpha * (src / sig);
                tr *= 1.0 - alpha;
            }
            if !any_left {
                break;
            }
            k += 1.0;
            t = (k + jit) * dt;
            // Jump to the first grid's entry when every grid is still ahead (the shader
            // does the same through its skip bounds, HDDA or not).
            let next = (0..MAX_ATTRIBUTES)
                .filter(|&a| ta0[a] < INF && t <= ta1[a])
                .map(|a| ta0[a])
                .fold(INF, f32::min);
            if next > t && next < INF {
                k = k.max((next / dt - jit).ceil());
                t = (k + jit) * dt;
            }
        }
        if mode == Mode::Mip as u32 {
            let mut col = Vec3::ZERO;
            let mut m = 0.0f32;
            for a in 0..MAX_ATTRIBUTES {
                if g[a].is_none() {
                    continue;
                }
                let e = self.tf_u(a, mip[a]);
                col += Vec3::new(e[0], e[1], e[2]) * mip[a];
                m = m.max(mip[a]);
            }
            return [col.x, col.y, col.z, m];
        }
        // The surface behind the medium, as the shader finds and lights it.
        let mut surf = false;
        let (mut spos, mut snrm, mut sdist, mut sbase) = (Vec3::ZERO, Vec3::Z, 0.0f32, Vec3::ZERO);
        if iso_hit {
            let a = p.iso_attr as usize;
            let gs = g[a].as_mut().expect("the iso attribute has a grid");
            let (mut lo, mut hi) = (t - dt, t);
            let mut grad = Vec3::ZERO;
            let mut ph = Vec3::ZERO;
            for i in 0..14 {
                let q = if i < 8 {
                    oi[a] + (0.5 * (lo + hi)) * di[a]
                } else {
                    if i == 8 {
                        ph = oi[a] + (0.5 * (lo + hi)) * di[a];
                    }
                    let mut e = Vec3::ZERO;
                    e[(i - 8) / 2] = if i & 1 == 0 { 0.5 } else { -0.5 };
                    ph + e
                };
                let vm = gs.sample(q) - p.iso_value;
                if i < 8 {
                    if vm * iso_prev > 0.0 {
                        lo = 0.5 * (lo + hi);
                    } else {
                        hi = 0.5 * (lo + hi);
                    }
                } else {
                    grad[(i - 8) / 2] += if i & 1 == 0 { vm } else { -vm };
                }
            }
            let th = 0.5 * (lo + hi);
            let gw = gs.inv[0] * grad.x + gs.inv[1] * grad.y + gs.inv[2] * grad.z;
            if gw.dot(gw) > 0.0 {
                snrm = gw.normalize() * iso_prev.signum();
            }
            if snrm.dot(d) > 0.0 {
                snrm = -snrm;
            }
            surf = true;
            sdist = th;
            spos = o + th * d;
            let b = self.tf_eval(a, p.iso_value);
            sbase = Vec3::new(b[0], b[1], b[2]);
        } else if t_ground < INF {
            surf = true;
            sdist = t_ground;
            spos = o + t_ground * d;
        }
        let mut sun_vis = 1.0;
        if surf && p.flags & FLAG_SHADOWS != 0 && snrm.dot(l) > 0.0 {
            let (mut n_steps, mut dt0) = (p.shadow_steps, p.shadow_dt);
            if !iso_hit {
                n_steps += 6;
                dt0 *= 2.0;
            }
            sun_vis = self.shadow(g, spos + snrm * p.shadow_dt, n_steps, dt0);
        }
        let lc = v3(p.light_color);
        if iso_hit {
            let sun = snrm.dot(l).max(0.0) * sun_vis;
            let hv = (l - d).normalize();
            let spec = snrm.dot(hv).max(0.0).powf(48.0) * 0.25;
            let amb = v3(p.sky_zenith) * p.sky_zenith[3] * (0.6 + 0.4 * snrm.z);
            let h = sbase * (lc * sun + amb) + lc * spec * sun;
            return [h.x, h.y, h.z, 1.0];
        }
        let back = if surf {
            self.ground_color(spos, sdist, sun_vis)
        } else {
            self.sky(d)
        };
        if mode == Mode::Isosurface as u32 {
            return [back.x, back.y, back.z, 0.0];
        }
        c += tr * back;
        [c.x, c.y, c.z, 1.0 - tr]
    }
}

/// Renders `view` at `width` × `height` on the CPU from parsed grids (slot `i` styles
/// `grids[i]`), marching with fixed steps whatever `view.settings.hdda` says. Grids of types
/// the shader does not decode are left out, as on the GPU.
pub fn render_cpu(grids: &[Option<&Grid<'_>>], view: &View, width: u32, height: u32) -> Image {
    let params = view.gpu_params(width, height);
    let tf = view.tf_table();
    let ctx = Ctx {
        p: &params,
        tf: &tf,
    };
    let rows: Vec<Vec<[f32; 4]>> = (0..height)
        .into_par_iter()
        .map(|y| {
            let mut states: Vec<Option<GridState>> = (0..MAX_ATTRIBUTES)
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
                    let r = |i: usize| {
                        Vec3::new(
                            m.inv_mat_f[3 * i],
                            m.inv_mat_f[3 * i + 1],
                            m.inv_mat_f[3 * i + 2],
                        )
                    };
                    Some(GridState {
                        acc: g.accessor(),
                        bmin,
                        bmax,
                        inv: [r(0), r(1), r(2)],
                        vec: Vec3::from(m.vec_f),
                    })
                })
                .collect();
            (0..width).map(|x| ctx.pixel(&mut states, x, y)).collect()
        })
        .collect();
    let mut img = Image::new(width, height);
    let exposure = params.sky_horizon[3];
    for (i, px) in rows.into_iter().flatten().enumerate() {
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
    img
}
