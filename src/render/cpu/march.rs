//! The CPU reference renderer's march of one pixel, step for step as march.wgsl's: the
//! camera ray through the channels' boxes, the samples of each step (skipping empty cells),
//! the length of the next step, the compositing, then what lies behind the medium.

use glam::Vec3;

use super::{Accel, ChannelAccel, Ctx, GridState, INF, MarchWork, ray_box, safe_inv, v3};
use crate::render::params::{
    FLAG_ACCEL, FLAG_GROUND, FLAG_JITTER, GpuParams, KIND_EMISSIVE, MAX_ATTRIBUTES, Mode,
};

/// `POWDER` and `POWDER_VOXELS` of march.wgsl.
const POWDER: f32 = 0.7;
const POWDER_VOXELS: f32 = 3.0;

/// `phase_hg` of march.wgsl: Henyey-Greenstein, 1 for an isotropic medium.
fn phase_hg(cos_t: f32, g: f32) -> f32 {
    let den = 1.0 + g * g - 2.0 * g * cos_t;
    (1.0 - g * g) / (den * den.sqrt())
}

/// The PCG hash march.wgsl jitters with.
fn pcg(v: u32) -> u32 {
    let state = v.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((state >> ((state >> 28) + 4)) ^ state).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

impl Ctx<'_> {
    /// One pixel's colour and coverage: the camera ray marched through the channels' grids,
    /// then what lies behind the medium (the shader's `march`).
    pub(super) fn pixel(
        &self,
        g: &mut [Option<GridState>],
        acc: &Accel,
        x: u32,
        y: u32,
        work: &mut MarchWork,
    ) -> [f32; 4] {
        work.rays += 1;
        let p = self.p;
        let (o, d) = self.camera_ray(x, y);
        let mut m = Marcher {
            ctx: self,
            acc,
            ray: self.pixel_ray(g, o, d),
            lat: Lattice::new(p, x, y),
            light: RayLight::new(p, d),
            accel_on: p.flags & FLAG_ACCEL != 0 && p.mode == Mode::Shaded as u32,
        };
        let end = m.march(g, work);
        if p.mode == Mode::Mip as u32 {
            return self.mip_color(g, &end.modes.mip);
        }
        m.behind_medium(g, &end, work)
    }

    /// The ray from `o` along `d` in each channel's index space, where it crosses each channel's
    /// box (grown by a voxel), and where it meets the ground.
    fn pixel_ray(&self, g: &[Option<GridState>], o: Vec3, d: Vec3) -> PixelRay {
        let p = self.p;
        let mut channels = ChannelMarch {
            oi: [Vec3::ZERO; MAX_ATTRIBUTES],
            di: [Vec3::ZERO; MAX_ATTRIBUTES],
            ta0: [INF; MAX_ATTRIBUTES],
            ta1: [-INF; MAX_ATTRIBUTES],
            skip: [INF; MAX_ATTRIBUTES],
            skip_bound: [INF; MAX_ATTRIBUTES],
        };
        let (mut t_start, mut t_end) = (INF, -INF);
        let mut fine = Refinement {
            lo: [INF; MAX_ATTRIBUTES],
            hi: [-INF; MAX_ATTRIBUTES],
            n: [1.0f32; MAX_ATTRIBUTES],
        };
        for (a, gs) in g.iter().enumerate().take(MAX_ATTRIBUTES) {
            let Some(gs) = gs else { continue };
            if p.mode == Mode::Isosurface as u32 && a as u32 != p.iso_attr {
                continue;
            }
            channels.oi[a] = gs.to_index(o);
            channels.di[a] = gs.dir_to_index(d);
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
            let (r0, r1) = ray_box(channels.oi[a], safe_inv(channels.di[a]), lo, hi);
            if r0 <= r1 && r1 >= 0.0 {
                channels.ta0[a] = r0.max(0.0);
                channels.ta1[a] = r1;
                t_start = t_start.min(channels.ta0[a]);
                t_end = t_end.max(channels.ta1[a]);
                let n = gs.refinement(p.cam_up[3]);
                if n > 1.0 {
                    fine.lo[a] = channels.ta0[a];
                    fine.hi[a] = channels.ta1[a];
                    fine.n[a] = n;
                }
            }
        }
        // Every channel is sampled from where the ray enters it.
        channels.skip = channels.ta0;
        channels.skip_bound = channels.ta0;
        let t_ground = self.ground_hit(o, d);
        PixelRay {
            o,
            d,
            channels,
            fine,
            t_start,
            t_end: t_end.min(t_ground),
            t_ground,
        }
    }

    /// Where the ray from `o` along `d` meets the ground plane: INF where it does not or
    /// no ground is drawn.
    fn ground_hit(&self, o: Vec3, d: Vec3) -> f32 {
        let p = self.p;
        let mut t_ground = INF;
        if p.flags & FLAG_GROUND != 0 && p.mode != Mode::Mip as u32 && d.z < 0.0 {
            let tg = (p.ground[0] - o.z) / d.z;
            if tg > 0.0 {
                t_ground = tg;
            }
        }
        t_ground
    }

    /// A MIP pixel: each channel's largest normalised value through its transfer function,
    /// weighted by that value and summed; the coverage is the largest value.
    fn mip_color(&self, g: &[Option<GridState>], mip: &[f32; MAX_ATTRIBUTES]) -> [f32; 4] {
        let mut col = Vec3::ZERO;
        let mut m = 0.0f32;
        for (a, (gs, &v)) in g.iter().zip(mip).enumerate() {
            if gs.is_none() {
                continue;
            }
            let e = self.tf_u(a, v);
            col += Vec3::new(e[0], e[1], e[2]) * v;
            m = m.max(v);
        }
        [col.x, col.y, col.z, m]
    }

    /// Adds channel `a`'s sample `v` to a step's extinction and to the scattering or emission
    /// it carries (shaded mode).
    fn add_sample(&self, a: usize, v: f32, s: &mut Step) {
        let p = self.p;
        let e = self.tf_eval(a, v);
        if e[3] > 0.0 {
            let sa = e[3] * p.attrs[a].extinction;
            s.sig += sa;
            let rgb = Vec3::new(e[0], e[1], e[2]);
            if p.attrs[a].kind == KIND_EMISSIVE {
                s.emit += sa * rgb * p.attrs[a].emission;
            } else {
                s.scat += sa * rgb;
            }
        }
    }
}

/// Each channel's march along one ray, in the channel's index space.
struct ChannelMarch {
    oi: [Vec3; MAX_ATTRIBUTES],
    di: [Vec3; MAX_ATTRIBUTES],
    /// Where the ray is inside the channel's box (grown by a voxel).
    ta0: [f32; MAX_ATTRIBUTES],
    ta1: [f32; MAX_ATTRIBUTES],
    /// Where sampling the channel resumes (past an empty cell; INF once past the channel), and
    /// where the bound of the cells skipped over stops holding (march.wgsl's `bound_end`).
    skip: [f32; MAX_ATTRIBUTES],
    skip_bound: [f32; MAX_ATTRIBUTES],
}

/// The spans of the ray where a grid finer than the base step is sampled (march.wgsl's
/// `Fine`): channel a refines the steps `n[a]` times from `lo[a]` to `hi[a]`.
struct Refinement {
    lo: [f32; MAX_ATTRIBUTES],
    hi: [f32; MAX_ATTRIBUTES],
    n: [f32; MAX_ATTRIBUTES],
}

impl Refinement {
    /// How many times the steps are refined at `t`: by the finest grid sampled there.
    fn at(&self, t: f32) -> f32 {
        let mut n = 1.0f32;
        for a in 0..MAX_ATTRIBUTES {
            if self.lo[a] <= t && t <= self.hi[a] {
                n = n.max(self.n[a]);
            }
        }
        n
    }
}

/// One pixel's camera ray and where it meets the channels and the ground.
struct PixelRay {
    o: Vec3,
    d: Vec3,
    channels: ChannelMarch,
    fine: Refinement,
    /// What the march covers: from the first channel's entry to the last channel's exit or the
    /// ground, whichever is nearer.
    t_start: f32,
    t_end: f32,
    /// Where the ray meets the ground (INF: nowhere).
    t_ground: f32,
}

/// Where a pixel's samples lie: at t = (k + jit)·dt for lattice coordinates k, integers
/// on the base lattice and multiples of 1/n where the steps are refined n times.
struct Lattice {
    dt: f32,
    /// This pixel's offset of the lattice (0 without jitter).
    jit: f32,
    /// This pixel's phase of the long steps (march.wgsl's `step_phase`).
    phase: f32,
}

impl Lattice {
    fn new(p: &GpuParams, x: u32, y: u32) -> Lattice {
        let jit = if p.flags & FLAG_JITTER != 0 {
            let h = pcg(x ^ pcg(y ^ pcg(p.frame_seed)));
            (h >> 8) as f32 * (1.0 / 16_777_216.0)
        } else {
            0.0
        };
        let phase = if p.flags & FLAG_JITTER != 0 {
            (pcg(pcg(x ^ pcg(y ^ pcg(p.frame_seed)))) & 63) as f32
        } else {
            0.0
        };
        Lattice {
            dt: p.dt,
            jit,
            phase,
        }
    }

    /// The point at lattice coordinate `k`.
    fn t(&self, k: f32) -> f32 {
        (k + self.jit) * self.dt
    }

    /// The coordinate of the first point at or past `t` on the lattice refined `n` times.
    fn k_from(&self, t: f32, n: f32) -> f32 {
        ((t / self.dt - self.jit) * n).ceil() / n
    }
}

/// The sun's light along one view ray (march.wgsl): the phase of single scattering, two
/// octaves of multiple scattering, the powder term's weight.
struct RayLight {
    l: Vec3,
    phase: f32,
    ms1: f32,
    ms2: f32,
    powder_w: f32,
    /// Height of the volume above the ground, over which the ambient light brightens.
    top: f32,
}

impl RayLight {
    fn new(p: &GpuParams, d: Vec3) -> RayLight {
        let l = v3(p.light_dir);
        let g_hg = p.light_dir[3];
        let cos_sun = l.dot(d);
        RayLight {
            l,
            phase: phase_hg(cos_sun, g_hg),
            ms1: p.light_color[3] * 0.5 * phase_hg(cos_sun, 0.5 * g_hg),
            ms2: p.light_color[3] * 0.25 * phase_hg(cos_sun, 0.25 * g_hg),
            powder_w: POWDER * (0.5 - 0.5 * cos_sun),
            top: (p.ground[3] - p.ground[0]).max(1e-6),
        }
    }
}

/// What one step gathered over the channels.
struct Step {
    /// Extinction, and the scattering and emission it carries (shaded mode).
    sig: f32,
    scat: Vec3,
    emit: Vec3,
    /// The sum of the sampled channels' extinction bounds (INF: unbounded), and where along
    /// the ray they stop holding or the media end (march.wgsl's `bound_end`).
    sig_max: f32,
    bound_end: f32,
    /// The nearest point where some channel has something to sample (INF: none left).
    next: f32,
}

/// What the modes other than shaded keep along a ray.
#[derive(Default)]
struct ModeState {
    /// MIP: each channel's largest normalised value.
    mip: [f32; MAX_ATTRIBUTES],
    /// Isosurface: the previous sample less the iso value, if any, and whether the
    /// samples crossed the iso value.
    iso_prev: f32,
    iso_has_prev: bool,
    iso_hit: bool,
}

impl ModeState {
    /// Takes the iso attribute's sample less the iso value; true where it crossed zero
    /// since the previous sample.
    fn iso_crossed(&mut self, v: f32) -> bool {
        if self.iso_has_prev && v * self.iso_prev <= 0.0 && v != self.iso_prev {
            self.iso_hit = true;
            return true;
        }
        self.iso_prev = v;
        self.iso_has_prev = true;
        false
    }
}

/// Where the march ended and what it gathered.
struct MarchEnd {
    /// Light gathered and transmittance left.
    c: Vec3,
    tr: f32,
    /// The last point sampled, and the step that led to it (lattice units).
    t: f32,
    last_step: f32,
    modes: ModeState,
}

/// A surface behind the medium: an isosurface or the ground.
struct Surface {
    pos: Vec3,
    normal: Vec3,
    /// Distance along the ray.
    dist: f32,
    /// Colour of the isosurface (its value through the transfer function).
    base: Vec3,
}

/// What channel `a`'s acceleration cell says about sampling the channel at a point.
enum CellAt {
    /// The cell is empty: sampling resumes at `exit`, where the ray leaves it; the bound
    /// of its block holds to `block_end`.
    Empty { exit: f32, block_end: f32 },
    /// The channel's extinction is at most `sig_max` until `block_end`.
    Bounded { sig_max: f32, block_end: f32 },
    /// The point is outside the channel's cells: no bound.
    Outside,
}

/// One pixel's march: the renderer, the acceleration grids, the ray, its lattice and its
/// light.
struct Marcher<'m, 'p> {
    ctx: &'m Ctx<'p>,
    acc: &'m Accel,
    ray: PixelRay,
    lat: Lattice,
    light: RayLight,
    /// Whether empty cells are skipped and long steps taken (shaded mode with the
    /// acceleration grids on).
    accel_on: bool,
}

impl Marcher<'_, '_> {
    /// The march loop: samples the channels at each lattice point and composites front to
    /// back, until the steps run out, the media end, the ray goes opaque or (isosurface)
    /// the samples cross the iso value.
    fn march(&mut self, g: &mut [Option<GridState>], work: &mut MarchWork) -> MarchEnd {
        let p = self.ctx.p;
        let n0 = self.ray.fine.at(self.ray.t_start);
        let mut k = self.lat.k_from(self.ray.t_start, n0);
        let mut t = self.lat.t(k);
        let mut end = MarchEnd {
            c: Vec3::ZERO,
            tr: 1.0,
            t,
            last_step: 1.0,
            modes: ModeState::default(),
        };
        let mut steps = 0;
        loop {
            if steps >= p.max_steps
                || t.partial_cmp(&self.ray.t_end).is_none_or(|o| o.is_gt())
                || end.tr < p.t_cutoff
            {
                break;
            }
            steps += 1;
            work.steps += 1;
            let Some(s) = self.sample_step(g, t, &mut end.modes, work) else {
                break;
            };
            // A finer grid refines the steps only where it is sampled (march.wgsl).
            let ray = &mut self.ray;
            for a in 0..MAX_ATTRIBUTES {
                if ray.fine.n[a] > 1.0 {
                    ray.fine.lo[a] = ray.channels.skip[a];
                }
            }
            let k1 = self.next_k(k, &s);
            let step = k1 - k;
            if s.sig > 0.0 {
                self.composite(g, t, step, &s, &mut end, work);
            }
            if s.next >= INF {
                break;
            }
            end.last_step = step;
            k = k1;
            t = self.lat.t(k);
            if s.next > t {
                let nn = self.ray.fine.at(s.next);
                k = k.max(self.lat.k_from(s.next, nn));
                t = self.lat.t(k);
            }
        }
        end.t = t;
        end
    }

    /// Samples every channel at `t`: channels before their next non-empty cell are passed over,
    /// channels the ray has left are done with. None where the iso value is crossed.
    #[allow(clippy::needless_range_loop)] // channel indices address several parallel arrays
    fn sample_step(
        &mut self,
        g: &mut [Option<GridState>],
        t: f32,
        modes: &mut ModeState,
        work: &mut MarchWork,
    ) -> Option<Step> {
        let ctx = self.ctx;
        let p = ctx.p;
        let channels = &mut self.ray.channels;
        let mut s = Step {
            sig: 0.0,
            scat: Vec3::ZERO,
            emit: Vec3::ZERO,
            sig_max: 0.0,
            bound_end: self.ray.t_end,
            next: INF,
        };
        for a in 0..MAX_ATTRIBUTES {
            if t < channels.skip[a] {
                s.next = s.next.min(channels.skip[a]);
                s.bound_end = s.bound_end.min(channels.skip_bound[a]);
                continue;
            }
            if t > channels.ta1[a] {
                channels.skip[a] = INF;
                channels.skip_bound[a] = INF;
                continue;
            }
            s.bound_end = s.bound_end.min(channels.ta1[a]);
            let pa = channels.oi[a] + t * channels.di[a];
            if self.accel_on {
                match channel_cell(self.acc, channels, a, pa, t, self.lat.dt) {
                    CellAt::Empty { exit, block_end } => {
                        channels.skip[a] = exit;
                        channels.skip_bound[a] = block_end;
                        s.next = s.next.min(exit);
                        s.bound_end = s.bound_end.min(block_end);
                        continue;
                    }
                    CellAt::Bounded { sig_max, block_end } => {
                        s.sig_max += sig_max;
                        s.bound_end = s.bound_end.min(block_end);
                    }
                    CellAt::Outside => s.sig_max = INF,
                }
            }
            let gs = g[a].as_mut().expect("attributes with a range have grids");
            let v = gs.sample(pa);
            work.samples += 1;
            if p.mode == Mode::Shaded as u32 {
                ctx.add_sample(a, v, &mut s);
            } else if p.mode == Mode::Mip as u32 {
                modes.mip[a] = modes.mip[a].max(ctx.norm(a, v));
            } else if modes.iso_crossed(v - p.iso_value) {
                return None;
            }
            s.next = s.next.min(t);
        }
        Some(s)
    }

    /// The lattice coordinate of the sample after the one at `k` (march.wgsl): the next
    /// local lattice point of this pixel's phase, up to as many local steps on as the
    /// step's extinction bound allows, not past the first lattice point in a finer grid's
    /// span, on the lattice of where it lands.
    fn next_k(&self, k: f32, s: &Step) -> f32 {
        let (p, lat, fine) = (self.ctx.p, &self.lat, &self.ray.fine);
        let t = lat.t(k);
        let n = fine.at(t);
        let mut mult = 1.0f32;
        if self.accel_on && p.max_step_scale > 1 && s.sig_max < INF {
            let most = (p.step_tau / (s.sig_max * (lat.dt / n)).max(1e-30))
                .floor()
                .clamp(1.0, p.max_step_scale as f32);
            while 2.0 * mult <= most {
                mult *= 2.0;
            }
        }
        let mut k1 = k + 1.0 / n;
        if mult > 1.0 {
            k1 = (((k * n + lat.phase) / mult).floor() + 1.0) * mult - lat.phase;
            k1 /= n;
            k1 = self.long_step_end(k, k1, n, s);
        }
        for a in 0..MAX_ATTRIBUTES {
            if fine.n[a] > n && fine.lo[a] > t {
                let entry = lat.k_from(fine.lo[a], fine.n[a]);
                k1 = k1.min(entry.max(k + 1.0 / fine.n[a]));
            }
        }
        let n1 = fine.at(lat.t(k1));
        (k1 * n1).ceil() / n1
    }

    /// Where a long step from `k` to `k1` (steps refined `n` times) ends: no later than
    /// the first local lattice point at or past the step's `bound_end`, unless the cells
    /// it would run into are bounded thin enough too (march.wgsl).
    fn long_step_end(&self, k: f32, k1: f32, n: f32, s: &Step) -> f32 {
        let (p, lat, ray) = (self.ctx.p, &self.lat, &self.ray);
        let kb = lat.k_from(s.bound_end, n).max(k + 1.0 / n);
        if kb < k1 {
            let t1 = lat.t(k1);
            let extra = if t1 <= ray.t_end {
                bound_beyond(self.acc, &ray.channels, lat.t(k), t1)
            } else {
                None
            };
            let most = extra.map_or(-1.0, |e| {
                (p.step_tau / ((s.sig_max + e) * (lat.dt / n)).max(1e-30)).floor()
            });
            if (k1 - k) * n > most {
                return kb;
            }
        }
        k1
    }

    /// Composites a step of `step` lattice units at `t` into `end`: emission, and the
    /// scattering lit by the sun (shadowed, with multiple scattering and the powder term)
    /// and the sky.
    fn composite(
        &self,
        g: &[Option<GridState>],
        t: f32,
        step: f32,
        s: &Step,
        end: &mut MarchEnd,
        work: &mut MarchWork,
    ) {
        let (p, light) = (self.ctx.p, &self.light);
        let w = self.ray.o + t * self.ray.d;
        let mut src = s.emit;
        if s.scat.cmpgt(Vec3::ZERO).any() {
            let ts = self.ctx.sun_transmittance(g, self.acc, w);
            work.sun_lookups += 1;
            let h = ((w.z - p.ground[0]) / light.top).clamp(0.0, 1.0);
            let amb = v3(p.sky_zenith) * p.sky_zenith[3] * (0.35 + 0.65 * h);
            let ts1 = ts.sqrt();
            let ts2 = ts1.sqrt();
            let sun = light.phase * ts + light.ms1 * ts1 + light.ms2 * ts2;
            let powder = 1.0 - light.powder_w * (-s.sig * p.cam_up[3] * POWDER_VOXELS).exp();
            let lit = v3(p.light_color) * (sun * powder) + amb;
            src += s.scat * lit;
        }
        let alpha = 1.0 - (-s.sig * self.lat.dt * step).exp();
        end.c += end.tr * alpha * (src / s.sig);
        end.tr *= 1.0 - alpha;
    }

    /// The pixel once the march has ended: the isosurface hit, lit; or the ground or sky
    /// behind the medium, seen through what is left of its transmittance.
    fn behind_medium(
        &self,
        g: &mut [Option<GridState>],
        end: &MarchEnd,
        work: &mut MarchWork,
    ) -> [f32; 4] {
        let (p, ray) = (self.ctx.p, &self.ray);
        let surface = if end.modes.iso_hit {
            Some(self.iso_surface(g, end))
        } else if ray.t_ground < INF {
            Some(Surface {
                pos: ray.o + ray.t_ground * ray.d,
                normal: Vec3::Z,
                dist: ray.t_ground,
                base: Vec3::ZERO,
            })
        } else {
            None
        };
        let mut sun_vis = 1.0;
        if let Some(s) = &surface
            && s.normal.dot(self.light.l) > 0.0
        {
            sun_vis = self.ctx.sun_transmittance(g, self.acc, s.pos);
            work.sun_lookups += 1;
        }
        if let Some(s) = surface.as_ref().filter(|_| end.modes.iso_hit) {
            return self.shade_isosurface(s, sun_vis);
        }
        let back = match &surface {
            Some(s) => self.ctx.ground_color(s.pos, s.dist, sun_vis),
            None => self.ctx.sky(ray.d),
        };
        if p.mode == Mode::Isosurface as u32 {
            return [back.x, back.y, back.z, 0.0];
        }
        let c = end.c + end.tr * back;
        [c.x, c.y, c.z, 1.0 - end.tr]
    }

    /// The isosurface between the last two samples (march.wgsl): eight bisections along
    /// the ray, then the normal from central differences at the point found.
    fn iso_surface(&self, g: &mut [Option<GridState>], end: &MarchEnd) -> Surface {
        let (p, ray) = (self.ctx.p, &self.ray);
        let a = p.iso_attr as usize;
        let (oi, di) = (ray.channels.oi[a], ray.channels.di[a]);
        let iso_prev = end.modes.iso_prev;
        let gs = g[a].as_mut().expect("the iso attribute has a grid");
        let t = end.t;
        let (mut lo, mut hi) = (t - self.lat.dt * end.last_step, t);
        let mut grad = Vec3::ZERO;
        let mut ph = Vec3::ZERO;
        for i in 0..14 {
            let q = if i < 8 {
                oi + (0.5 * (lo + hi)) * di
            } else {
                if i == 8 {
                    ph = oi + (0.5 * (lo + hi)) * di;
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
        let mut normal = Vec3::Z;
        if gw.dot(gw) > 0.0 {
            normal = gw.normalize() * iso_prev.signum();
        }
        if normal.dot(ray.d) > 0.0 {
            normal = -normal;
        }
        let b = self.ctx.tf_eval(a, p.iso_value);
        Surface {
            pos: ray.o + th * ray.d,
            normal,
            dist: th,
            base: Vec3::new(b[0], b[1], b[2]),
        }
    }

    /// The isosurface lit by the sun (diffuse and a highlight) and the sky.
    fn shade_isosurface(&self, s: &Surface, sun_vis: f32) -> [f32; 4] {
        let p = self.ctx.p;
        let (l, d) = (self.light.l, self.ray.d);
        let lc = v3(p.light_color);
        let sun = s.normal.dot(l).max(0.0) * sun_vis;
        let hv = (l - d).normalize();
        let spec = s.normal.dot(hv).max(0.0).powf(48.0) * 0.25;
        let amb = v3(p.sky_zenith) * p.sky_zenith[3] * (0.6 + 0.4 * s.normal.z);
        let h = s.base * (lc * sun + amb) + lc * spec * sun;
        [h.x, h.y, h.z, 1.0]
    }
}

/// What channel `a`'s acceleration cell at index point `pa` says about sampling the channel at
/// `t` (march.wgsl): an empty cell is stepped over (less a thousandth of a step, so the
/// next sample lands in the next cell).
fn channel_cell(
    acc: &Accel,
    channels: &ChannelMarch,
    a: usize,
    pa: Vec3,
    t: f32,
    dt: f32,
) -> CellAt {
    let fl = pa.floor();
    let cell = acc.channels[a]
        .as_ref()
        .and_then(|si| Some((si, si.cell_of([fl.x as i32, fl.y as i32, fl.z as i32])?)));
    let Some((si, c)) = cell else {
        return CellAt::Outside;
    };
    let m = si.cells[si.linear(c)][3];
    let inv = safe_inv(channels.di[a]);
    let block_end = cell_block(si, c, channels.oi[a], inv).1;
    if m <= 0.0 {
        let (lo, size) = cell_box(si, c);
        let exit = ray_box(channels.oi[a], inv, lo, lo + Vec3::splat(size)).1 - 1e-3 * dt;
        if exit > t {
            return CellAt::Empty { exit, block_end };
        }
    }
    CellAt::Bounded {
        sig_max: m,
        block_end,
    }
}

/// The extinction bound to add to the one at `t` for a step from `t` to `t1` past where it
/// stops holding (march.wgsl): for each channel whose bound stops short of `t1`, what the bound
/// of the cell at `t1` (whose block the ray must enter before leaving the current one)
/// exceeds the channel's bound at `t` by. None where that fails (a cell outside the channel's grid, a gap between the blocks, `t1` past a
/// channel's span).
fn bound_beyond(acc: &Accel, r: &ChannelMarch, t: f32, t1: f32) -> Option<f32> {
    let mut extra = 0.0f32;
    for a in 0..MAX_ATTRIBUTES {
        if r.ta1[a] < t {
            continue;
        }
        if t1 > r.ta1[a] {
            return None;
        }
        let inv = safe_inv(r.di[a]);
        let cell_at = |si: &ChannelAccel, s: f32| {
            let q = (r.oi[a] + s * r.di[a]).floor();
            si.cell_of([q.x as i32, q.y as i32, q.z as i32])
        };
        let (mut cover, mut m0) = (r.skip_bound[a], 0.0f32);
        if t >= r.skip[a] {
            let si = acc.channels[a].as_ref()?;
            let c0 = cell_at(si, t)?;
            cover = cell_block(si, c0, r.oi[a], inv).1;
            m0 = si.cells[si.linear(c0)][3];
        }
        if cover >= t1 {
            continue;
        }
        let si = acc.channels[a].as_ref()?;
        let c1 = cell_at(si, t1)?;
        if cell_block(si, c1, r.oi[a], inv).0 > cover {
            return None;
        }
        // The channel's bound over the step: the larger of the two.
        extra += (si.cells[si.linear(c1)][3] - m0).max(0.0);
    }
    Some(extra)
}

/// Cell `c` of a channel: its lowest corner in index space and its edge, in voxels.
fn cell_box(si: &ChannelAccel, c: [u32; 3]) -> (Vec3, f32) {
    let lo = Vec3::new(
        ((si.org[0] + c[0] as i32) << si.shift) as f32,
        ((si.org[1] + c[1] as i32) << si.shift) as f32,
        ((si.org[2] + c[2] as i32) << si.shift) as f32,
    );
    (lo, (1u32 << si.shift) as f32)
}

/// The 27-cell block around cell `c` of a channel (the cell and its 26 neighbours, less
/// their outer voxel layer) along the ray: where the ray enters and leaves it.
fn cell_block(si: &ChannelAccel, c: [u32; 3], o: Vec3, inv: Vec3) -> (f32, f32) {
    let (lo, size) = cell_box(si, c);
    ray_box(
        o,
        inv,
        lo - Vec3::splat(size - 1.0),
        lo + Vec3::splat(2.0 * size - 1.0),
    )
}
