//! Evaluating every field of the storm on one brick: the inner loops of the generator,
//! column by column, with the vertical terms and the noise shared by a column's voxels.

use super::*;

impl FrameModel<'_> {
    /// Evaluates every field on the brick whose voxel (0,0,0) is at world position `p0`,
    /// with voxel spacing `dx`, using only the features in `mask`. `extended` also
    /// evaluates the fields after [`BrickFields::storm`] (about twice the work per voxel);
    /// the others are the same either way, bit for bit.
    pub fn eval_brick(
        &self,
        p0: [f32; 3],
        dx: f32,
        mask: u32,
        out: &mut BrickFields,
        extended: bool,
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2, checked just above.
            unsafe { self.eval_brick_avx2(p0, dx, mask, out, extended) };
            return;
        }
        self.eval_brick_any(p0, dx, mask, out, extended);
    }

    /// [`FrameModel::eval_brick`] compiled for AVX2: the column loops (noise indices and
    /// interpolation) run eight lanes wide instead of four. Same IEEE operations in the
    /// same order (no fused multiply-add), so the same bits.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn eval_brick_avx2(
        &self,
        p0: [f32; 3],
        dx: f32,
        mask: u32,
        out: &mut BrickFields,
        extended: bool,
    ) {
        self.eval_brick_any(p0, dx, mask, out, extended);
    }

    /// [`FrameModel::eval_brick`] for any CPU (the x86-64 baseline where compiled alone).
    #[inline(always)]
    pub(super) fn eval_brick_any(
        &self,
        p0: [f32; 3],
        dx: f32,
        mask: u32,
        out: &mut BrickFields,
        extended: bool,
    ) {
        // Two instances, so that the default fields' loop carries none of the extended
        // work, not even its branches.
        if extended {
            self.eval_brick_impl::<true>(p0, dx, mask, out);
        } else {
            self.eval_brick_impl::<false>(p0, dx, mask, out);
        }
    }

    /// Evaluates the brick column by column, and within a column feature by feature, each
    /// feature a loop over the column's eight levels: branch-free (per-level conditions
    /// become selects) over arrays of eight, so the compiler runs every loop eight lanes
    /// wide. Each voxel sees the same operations in the same order as voxel-by-voxel
    /// evaluation ([`FrameModel::eval_brick_reference`]), so the results are the same bits.
    #[inline(always)]
    fn eval_brick_impl<const EXT: bool>(
        &self,
        p0: [f32; 3],
        dx: f32,
        mask: u32,
        out: &mut BrickFields,
    ) {
        let zt = self.level_terms(p0[2], dx, mask, EXT);
        let lv = Levels::new(&zt);
        for i in 0..8 {
            let x = p0[0] + i as f32 * dx;
            for j in 0..8 {
                let y = p0[1] + j as f32 * dx;
                let col = self.column(x, y, mask);
                let noise = self.column_noise(x, y, mask, &col, &zt);
                let at = ColumnAt {
                    x,
                    y,
                    mask,
                    col: &col,
                    noise: &noise,
                    lv: &lv,
                };
                self.eval_column::<EXT>(&at, &zt, out, i * 64 + j * 8);
            }
        }
    }

    /// The height-only terms of a brick's eight levels, the lowest at height `z0`, `dx`
    /// apart.
    #[inline(always)]
    pub(super) fn level_terms(&self, z0: f32, dx: f32, mask: u32, extended: bool) -> [ZTerms; 8] {
        let mut zt = [ZTerms::default(); 8];
        for (k, t) in zt.iter_mut().enumerate() {
            *t = self.zterms(z0 + k as f32 * dx, mask, extended);
        }
        zt
    }

    /// One column of [`FrameModel::eval_brick_impl`]: voxels `base..base + 8` of `out`.
    /// The features add to the column's fields in a fixed order (clouds, then the
    /// vortices' winds, then precipitation and its downdrafts): the order is part of the
    /// result's bits.
    #[inline(always)]
    fn eval_column<const EXT: bool>(
        &self,
        at: &ColumnAt,
        zt: &[ZTerms; 8],
        out: &mut BrickFields,
        base: usize,
    ) {
        let mask = at.mask;
        let mut f = ColumnFields::default();
        if mask & F_TOWER != 0 {
            f.add_tower::<EXT>(at);
        }
        if mask & F_DOME != 0 {
            f.add_dome(at, [self.anvil_x0, self.meso[1]]);
        }
        if let Some(ac) = &at.col.anvil {
            f.add_anvil::<EXT>(at, ac);
        }
        if let Some(wc) = &at.col.wall {
            f.add_wall_cloud(at, wc);
        }
        // Everything but the funnel and its debris (the nested grid's share).
        let ambient_cloud = f.cloud;
        if mask & (F_FUNNEL | F_TORNADO) != 0 {
            let around = AxisOffsets::new(at);
            if mask & F_FUNNEL != 0 {
                f.add_funnel(at, &around);
            }
            if mask & F_TORNADO != 0 {
                f.add_tornado_winds::<EXT>(at, &around);
            }
        }
        if mask & F_MESO != 0 {
            f.add_mesocyclone_winds::<EXT>(at);
        }
        if mask & (F_FFD | F_HOOK) != 0 {
            let storm_x = at.x - self.meso[0];
            let storm_y = at.y - self.meso[1];
            if mask & F_FFD != 0 {
                f.add_forward_flank::<EXT>(at, storm_x, storm_y);
            }
            if let Some(hc) = &at.col.hook {
                f.add_hook(at, hc);
            }
            if mask & F_TOWER != 0 {
                f.clear_weak_echo::<EXT>(at);
            }
            f.add_downdrafts::<EXT>(at);
        }
        f.write(at.lv, &ambient_cloud, out, base);
        if EXT {
            f.write_extended(zt, out, base);
        }
    }
}

/// One column of a brick as [`FrameModel::eval_column`] evaluates it: its position, the
/// features to evaluate and what its eight voxels share.
struct ColumnAt<'c> {
    x: f32,
    y: f32,
    mask: u32,
    col: &'c Column,
    noise: &'c ColumnNoise,
    lv: &'c Levels,
}

/// Voxels per column (a brick's eight levels).
const N: usize = 8;

/// The fields of one column's eight voxels (lane k = level k) while the features add to
/// them. The extended fields stay zero unless the evaluation is extended.
#[derive(Default)]
struct ColumnFields {
    cloud: [f32; N],
    rain: [f32; N],
    w: [f32; N],
    pert_u: [f32; N],
    pert_v: [f32; N],
    vort: [f32; N],
    gust: [f32; N],
    debris: [f32; N],
    snow: [f32; N],
    snow_ffd: [f32; N],
    /// Graupel of the forward flank (the weak echo region clears it; the updraft's
    /// flanking graupel keeps out of the core by itself).
    graupel_ffd: [f32; N],
    graupel: [f32; N],
    hail: [f32; N],
    theta: [f32; N],
    qv: [f32; N],
    prs: [f32; N],
    hook_rain: [f32; N],
}

/// Where a column lies from the tornado's axis at each level, shared by the funnel and
/// the tornado's winds.
struct AxisOffsets {
    fx: [f32; N],
    fy: [f32; N],
    r2: [f32; N],
    r: [f32; N],
}

impl AxisOffsets {
    #[inline(always)]
    // Levels are indexed in lockstep across several arrays.
    #[allow(clippy::needless_range_loop)]
    fn new(at: &ColumnAt) -> AxisOffsets {
        let lv = at.lv;
        let mut o = AxisOffsets {
            fx: [0.0; N],
            fy: [0.0; N],
            r2: [0.0; N],
            r: [0.0; N],
        };
        for k in 0..N {
            o.fx[k] = at.x - lv.axis_x[k];
            o.fy[k] = at.y - lv.axis_y[k];
            o.r2[k] = o.fx[k] * o.fx[k] + o.fy[k] * o.fy[k];
            o.r[k] = o.r2[k].sqrt();
        }
        o
    }
}

// Each feature is a loop over the column's levels that indexes a dozen arrays in lockstep;
// every function is inlined into the brick's loop (and so into its AVX2 instance).
#[allow(clippy::needless_range_loop)]
impl ColumnFields {
    /// The updraft tower: its billowed cloud, its updraft and gusts, and (extended) its
    /// warm moist core and the graupel riming on its flanks.
    #[inline(always)]
    fn add_tower<const EXT: bool>(&mut self, at: &ColumnAt) {
        let (lv, noise, z) = (at.lv, at.noise, &at.lv.z);
        for k in 0..N {
            let dxu = at.x - lv.tower_cx[k];
            let dyu = at.y - lv.tower_cy[k];
            let r2 = dxu * dxu + dyu * dyu;
            let q = r2.sqrt() * lv.tower_inv_r[k];
            // Texture rises with the updraft (10 m/s) and drifts with the storm:
            // billows of 1-4 km from the coarse sample, detail from a finer one.
            let (nt, nf) = (noise.tower[k], noise.tower_fine[k]);
            // Billowed edge: |noise| makes rounded cauliflower lobes separated by creases.
            let edge = 1.0 - q + 0.5 * (nt.abs() - 0.3) + 0.1 * nf;
            let base_rag = smoothstep(-60.0, 120.0, z[k] - CLOUD_BASE + 160.0 * nt);
            let tower_cloud = lv.tower_q[k] * smoothstep(0.0, 0.1, edge) * base_rag;
            self.cloud[k] = self.cloud[k].max(tower_cloud);
            let core = sat(1.0 - q * q * 2.4);
            self.w[k] += lv.tower_w[k] * core * core * (1.0 + 0.15 * nt);
            self.gust[k] += 0.12 * nt * core;
            if EXT {
                let texture = 1.0 + 0.15 * nt;
                self.theta[k] += lv.theta_up[k] * core * texture;
                self.qv[k] += lv.qv_up[k] * core * texture;
                self.prs[k] += lv.p_top[k] * core;
                // Graupel rimes on the updraft's flanks, not in its core.
                let ring = sat((q - 0.45) * 3.0) * sat((1.25 - q) * 3.0);
                self.graupel[k] += lv.ring_prof[k] * tower_cloud * ring;
            }
        }
    }

    /// The overshooting top: a dome of cloud above the tropopause around `centre`.
    #[inline(always)]
    fn add_dome(&mut self, at: &ColumnAt, centre: [f32; 2]) {
        let (lv, noise) = (at.lv, at.noise);
        let dxd = at.x - centre[0];
        let dyd = at.y - centre[1];
        let rd2 = (dxd * dxd + dyd * dyd) * (1.0 / (2_900.0 * 2_900.0));
        for k in 0..N {
            let (nt, nf) = (noise.tower[k], noise.tower_fine[k]);
            let e = 1.0 - rd2 - lv.dome_h2[k] + 0.35 * (nt.abs() - 0.3) + 0.08 * nf;
            let c = self.cloud[k].max(1.2 * smoothstep(0.0, 0.2, e));
            self.cloud[k] = if lv.dome_h2[k] < 2.0 {
                c
            } else {
                self.cloud[k]
            };
        }
    }

    /// The anvil: ice cloud spreading under the tropopause, wispy underneath, and
    /// (extended) the snow falling out of it.
    #[inline(always)]
    fn add_anvil<const EXT: bool>(&mut self, at: &ColumnAt, ac: &AnvilColumn) {
        let z = &at.lv.z;
        for k in 0..N {
            let na = at.noise.anvil[k];
            let top = TROPOPAUSE + 250.0 + 150.0 * na;
            let bot = top - ac.thick - ac.mam + 400.0 * na.max(-0.8);
            let e_lat = 1.0 - ac.lat + 0.25 * na;
            let e_v = ((z[k] - bot).min(top - z[k])) * (1.0 / 250.0);
            // Thins over the outer part of its width.
            let qa = ac.q * smoothstep(0.0, 0.6, e_lat);
            // Ice thins towards the base as it falls out (wispy underside).
            let depth = sat((z[k] - bot) * ac.inv_thick);
            self.cloud[k] =
                self.cloud[k].max(qa * sat(e_v) * (0.75 + 0.25 * na) * (0.35 + 0.65 * depth));
            self.w[k] += 1.5 * na * sat(e_v);
            if EXT {
                // Aggregates grow as they fall: most snow near the base.
                self.snow[k] += 0.8 * qa * sat(e_v) * (0.75 + 0.25 * na) * (1.0 - 0.5 * depth);
            }
        }
    }

    /// The wall cloud hanging below the cloud base, and the updraft into it.
    #[inline(always)]
    fn add_wall_cloud(&mut self, at: &ColumnAt, wc: &WallColumn) {
        let z = &at.lv.z;
        for k in 0..N {
            let nw = at.noise.wall[k];
            let bottom = CLOUD_BASE - WALL_DROP * (1.0 - wc.r2) + 120.0 * nw;
            // A base that softens over a few hundred metres (ragged scud).
            let e = (1.0 - wc.r + 0.3 * nw).min((z[k] - bottom) * (1.0 / 400.0));
            let top_fade = 1.0 - smoothstep(CLOUD_BASE, CLOUD_BASE + 300.0, z[k]);
            self.cloud[k] = self.cloud[k].max(1.4 * smoothstep(0.0, 0.6, e) * top_fade);
            self.w[k] += 6.0 * sat(1.0 - wc.r2) * top_fade * smoothstep(0.0, 600.0, z[k]);
        }
    }

    /// The condensation funnel around the tornado's axis and the debris cloud at its foot
    /// (debris counts as cloud too).
    #[inline(always)]
    fn add_funnel(&mut self, at: &ColumnAt, around: &AxisOffsets) {
        let (lv, r) = (at.lv, &around.r);
        for k in 0..N {
            let nf = at.noise.funnel[k];
            let e = 1.0 - r[k] * lv.funnel_inv_r[k] + 0.22 * nf;
            self.cloud[k] = self.cloud[k].max(lv.funnel_q[k] * smoothstep(0.0, 0.3, e));
            let ed = 1.0 - r[k] / lv.debris_r[k] + 0.45 * nf;
            let d = lv.debris_q[k] * sat(ed * 1.5) * (0.6 + 0.4 * nf);
            let on = lv.debris_q[k] > 0.0;
            self.debris[k] = if on { d } else { self.debris[k] };
            self.cloud[k] = if on { self.cloud[k] + d } else { self.cloud[k] };
        }
    }

    /// The tornado's winds (a Rankine vortex with inflow and an updraft), its vorticity,
    /// and (extended) its pressure deficit.
    #[inline(always)]
    fn add_tornado_winds<const EXT: bool>(&mut self, at: &ColumnAt, around: &AxisOffsets) {
        let lv = at.lv;
        for k in 0..N {
            let (r, r2) = (around.r[k], around.r2[k]);
            let (tor_v, rc) = (lv.tor_v[k], lv.core_r[k]);
            let taper = sat(1.0 - r2 * (1.0 / (TORNADO_WIND_RADIUS * TORNADO_WIND_RADIUS)));
            // Rankine vortex: solid body inside the core, 1/r outside.
            let inside = r < rc;
            let vt = if inside {
                tor_v * r / rc
            } else {
                tor_v * rc / r
            };
            let zeta = if inside { 2.0 * tor_v / rc } else { 0.0 };
            let vt = vt * taper;
            let inv_r = 1.0 / r.max(1.0);
            let (ex, ey) = (around.fx[k] * inv_r, around.fy[k] * inv_r);
            let vr = -lv.tor_inflow[k] * vt;
            let qq = r / rc;
            let on = tor_v > 0.0;
            self.pert_u[k] = if on {
                self.pert_u[k] + (-ey * vt + ex * vr)
            } else {
                self.pert_u[k]
            };
            self.pert_v[k] = if on {
                self.pert_v[k] + (ex * vt + ey * vr)
            } else {
                self.pert_v[k]
            };
            self.vort[k] = if on {
                self.vort[k] + zeta
            } else {
                self.vort[k]
            };
            let dw = lv.tor_w[k] * 4.0 * qq / ((1.0 + qq) * (1.0 + qq)) * taper;
            self.w[k] = if on { self.w[k] + dw } else { self.w[k] };
            if EXT {
                // Cyclostrophic balance, dp/dr = rho v^2 / r, integrated through
                // the Rankine profile: -rho V^2 at the axis.
                let v2 = tor_v * tor_v;
                let shape = if inside {
                    1.0 - 0.5 * qq * qq
                } else {
                    0.5 / (qq * qq)
                };
                let p = self.prs[k] - 0.01 * lv.rho[k] * v2 * shape * taper;
                self.prs[k] = if on { p } else { self.prs[k] };
            }
        }
    }

    /// The mesocyclone's winds and vorticity, and (extended) its pressure deficit.
    #[inline(always)]
    fn add_mesocyclone_winds<const EXT: bool>(&mut self, at: &ColumnAt) {
        let lv = at.lv;
        for k in 0..N {
            let mx = at.x - lv.meso_cx[k];
            let my = at.y - lv.meso_cy[k];
            let r2 = mx * mx + my * my;
            let r = r2.sqrt();
            let meso_v = lv.meso_v[k];
            let taper = sat(1.0 - r2 * (1.0 / (MESO_OUTER * MESO_OUTER)));
            // Modified Rankine: decays as r^-1.5 outside the core so the storm's
            // circulation stays compact.
            let inside = r < MESO_RADIUS;
            let a = MESO_RADIUS / r;
            let v_out = meso_v * a * a.sqrt();
            let vt = if inside {
                meso_v * r / MESO_RADIUS
            } else {
                v_out
            };
            let zeta = if inside {
                2.0 * meso_v / MESO_RADIUS
            } else {
                -0.5 * v_out / r
            };
            let vt = vt * taper;
            let inv_r = 1.0 / r.max(1.0);
            let on = meso_v > 0.0;
            self.pert_u[k] = if on {
                self.pert_u[k] + -my * inv_r * vt
            } else {
                self.pert_u[k]
            };
            self.pert_v[k] = if on {
                self.pert_v[k] + mx * inv_r * vt
            } else {
                self.pert_v[k]
            };
            self.vort[k] = if on {
                self.vort[k] + zeta * taper
            } else {
                self.vort[k]
            };
            if EXT {
                // Cyclostrophic balance through the modified Rankine profile:
                // -rho V^2 R^3 / (3 r^3) outside the core, -5/6 rho V^2 at the axis.
                let v2 = meso_v * meso_v;
                let shape = if inside {
                    let a = r * (1.0 / MESO_RADIUS);
                    5.0 / 6.0 - 0.5 * a * a
                } else {
                    a * a * a * (1.0 / 3.0)
                };
                let p = self.prs[k] - 0.01 * lv.rho[k] * v2 * shape * taper;
                self.prs[k] = if on { p } else { self.prs[k] };
            }
        }
    }

    /// The forward flank's rain shafts, and (extended) the snow and graupel above the
    /// melting level and the hail shaft. `storm_x`, `storm_y`: the column relative to the
    /// mesocyclone's centre.
    #[inline(always)]
    fn add_forward_flank<const EXT: bool>(&mut self, at: &ColumnAt, storm_x: f32, storm_y: f32) {
        let (lv, sx, sy) = (at.lv, storm_x, storm_y);
        for k in 0..N {
            let nr = at.noise.rain[k];
            let on = lv.ffd_q[k] > 0.0;
            let ex = (sx - lv.ffd_shift[k] - 4_800.0) * (1.0 / 7_000.0);
            let ey = (sy - 3_000.0) * (1.0 / 3_200.0);
            let e = 1.0 - (ex * ex + ey * ey);
            // Heaviest just north of the updraft, lighter downwind.
            let core = 4.5 - 2.5 * sat(ex + 0.3);
            // Strong noise splits the rain into shafts; it is capped at 0.6 so the
            // rain's reach (and the bound) stays within e > -0.31.
            let v = sat(e * 1.5 + 1.6 * nr.min(0.6) - 0.5);
            let pattern = core * v * v;
            let shaft_on = on & (e > -0.34);
            self.rain[k] = if shaft_on {
                self.rain[k] + pattern * lv.ffd_q[k]
            } else {
                self.rain[k]
            };
            if EXT {
                // Above the melting level the forward flank's precipitation is
                // snow and graupel.
                let s = self.snow_ffd[k] + pattern * lv.snow_prof[k];
                self.snow_ffd[k] = if shaft_on { s } else { self.snow_ffd[k] };
                let g = self.graupel_ffd[k] + pattern * lv.graupel_prof[k];
                self.graupel_ffd[k] = if shaft_on { g } else { self.graupel_ffd[k] };
                let hx = at.x - lv.hail_cx[k];
                let hy = at.y - lv.hail_cy[k];
                let shaft =
                    sat(1.0 - (hx * hx + hy * hy) * (1.0 / (HAIL_RADIUS * HAIL_RADIUS)) + 0.3 * nr);
                // Faded out before the forward flank's bound, which is what makes
                // bricks evaluate it.
                let bx = (sx - lv.ffd_shift[k] - 4_800.0) * (1.0 / (1.16 * 7_000.0));
                let by = (sy - 3_000.0) * (1.0 / (1.16 * 3_200.0));
                let inside = smoothstep(1.0, 0.8, bx * bx + by * by);
                let h = self.hail[k] + lv.hail_prof[k] * shaft * shaft * inside;
                self.hail[k] = if on { h } else { self.hail[k] };
            }
        }
    }

    /// The hook's rain wrapping around the mesocyclone, and the downdraft it drags.
    #[inline(always)]
    fn add_hook(&mut self, at: &ColumnAt, hc: &HookColumn) {
        let z = &at.lv.z;
        for k in 0..N {
            let band = hc.band + 0.35 * at.noise.rain[k];
            let vert = smoothstep(hc.top, hc.top * 0.6, z[k]);
            let q = hc.q * sat(band * 1.6) * vert;
            self.rain[k] += q;
            self.hook_rain[k] = q;
            self.w[k] -= 3.5 * q * smoothstep(5_000.0, 1_000.0, z[k]);
        }
    }

    /// Bounded weak echo region: the updraft core holds no rain (nor, extended, the
    /// forward flank's snow, graupel and hail).
    #[inline(always)]
    fn clear_weak_echo<const EXT: bool>(&mut self, at: &ColumnAt) {
        let (lv, z) = (at.lv, &at.lv.z);
        for k in 0..N {
            let dxu = at.x - lv.tower_cx[k];
            let dyu = at.y - lv.tower_cy[k];
            let q = (dxu * dxu + dyu * dyu).sqrt() * lv.tower_inv_r[k];
            let weak_echo = smoothstep(0.35, 0.8, q);
            let r = self.rain[k] * weak_echo.max(smoothstep(CLOUD_BASE, 0.0, z[k]));
            self.rain[k] = if self.rain[k] > 0.0 { r } else { self.rain[k] };
            if EXT {
                let on = self.hail[k] + self.graupel_ffd[k] + self.snow_ffd[k] > 0.0;
                self.hail[k] = if on {
                    self.hail[k] * weak_echo
                } else {
                    self.hail[k]
                };
                self.graupel_ffd[k] = if on {
                    self.graupel_ffd[k] * weak_echo
                } else {
                    self.graupel_ffd[k]
                };
                self.snow_ffd[k] = if on {
                    self.snow_ffd[k] * weak_echo
                } else {
                    self.snow_ffd[k]
                };
            }
        }
    }

    /// The downdraft that falling rain drags, and (extended) the cold pool its
    /// evaporation makes.
    #[inline(always)]
    fn add_downdrafts<const EXT: bool>(&mut self, at: &ColumnAt) {
        let (lv, z) = (at.lv, &at.lv.z);
        for k in 0..N {
            self.w[k] -= 2.2 * self.rain[k] * smoothstep(6_000.0, 2_000.0, z[k]);
            if EXT {
                // Evaporation of rain below cloud base makes the cold pool: coldest
                // under the forward flank; the rear-flank downdraft of a tornadic storm
                // is only a little cold.
                let hook_rain = self.hook_rain[k];
                let cold = (1.5 * (self.rain[k] - hook_rain).max(0.0) + 0.6 * hook_rain).min(8.0)
                    * lv.cold_prof[k];
                self.theta[k] -= cold;
                // Dry mid-level air brought down by the downdrafts.
                self.qv[k] -= 0.35 * cold;
                // Hydrostatic mesohigh under the dense cold air.
                self.prs[k] += 0.3 * cold;
            }
        }
    }

    /// Writes the default fields into voxels `base..base + 8` of `out`: wind speed and
    /// storm activity from the winds, and the cloud split between the nested grid (what
    /// the funnel added to `ambient_cloud`) and the cloud grid.
    #[inline(always)]
    fn write(&self, lv: &Levels, ambient_cloud: &[f32; N], out: &mut BrickFields, base: usize) {
        let o = base..base + N;
        for k in 0..N {
            let u = lv.env_u[k] + self.pert_u[k];
            let v = lv.env_v[k] + self.pert_v[k];
            let speed = (u * u + v * v + self.w[k] * self.w[k]).sqrt() * (1.0 + self.gust[k]);
            let storm = (self.cloud[k] > MIXING_THRESHOLD)
                | (self.rain[k] > MIXING_THRESHOLD)
                | (self.pert_u[k] * self.pert_u[k] + self.pert_v[k] * self.pert_v[k]
                    > WIND_PERTURBATION_THRESHOLD * WIND_PERTURBATION_THRESHOLD)
                | (self.w[k].abs() > VERTICAL_THRESHOLD);
            out.wind[base + k] = speed;
            out.storm[base + k] = storm;
        }
        out.cloud[o.clone()].copy_from_slice(&self.cloud);
        for k in 0..N {
            // The funnel's share, split between the nested grid and the cloud grid.
            let nested = (self.cloud[k] - ambient_cloud[k]) * lv.funnel_nest[k];
            out.funnel[base + k] = nested;
            out.ambient_cloud[base + k] = self.cloud[k] - nested;
        }
        out.rain[o.clone()].copy_from_slice(&self.rain);
        out.w[o.clone()].copy_from_slice(&self.w);
        out.vort[o].copy_from_slice(&self.vort);
    }

    /// Writes the extended fields into voxels `base..base + 8` of `out`: the condensate
    /// split into water and ice, the precipitation, the thermodynamic perturbations and
    /// the reflectivity.
    #[inline(always)]
    fn write_extended(&self, zt: &[ZTerms; 8], out: &mut BrickFields, base: usize) {
        for k in 0..N {
            let snow = self.snow[k] + self.snow_ffd[k];
            let graupel = self.graupel[k] + self.graupel_ffd[k];
            let f_ice = zt[k].ext.f_ice;
            let condensate = (self.cloud[k] - self.debris[k]).max(0.0);
            let qc = condensate * (1.0 - f_ice);
            let n = base + k;
            out.qc[n] = qc;
            out.qi[n] = condensate * f_ice;
            out.snow[n] = snow;
            out.graupel[n] = graupel;
            out.hail[n] = self.hail[k];
            // Cloudy air is saturated, moister than the environment.
            out.qv[n] = self.qv[k] + 0.25 * qc;
            out.prs[n] = self.prs[k];
            out.theta[n] = self.theta[k];
            let precip = self.rain[k] + snow + graupel + self.hail[k];
            out.precip[n] = precip > MIXING_THRESHOLD;
        }
        // The logarithm stays a scalar libm call per voxel (the same bits as before).
        for k in 0..N {
            let n = base + k;
            let e = &zt[k].ext;
            out.dbz[n] = reflectivity_dbz(
                e.rho,
                self.rain[k],
                out.snow[n],
                out.graupel[n],
                self.hail[k],
                e.z_graupel,
                e.z_hail,
            );
        }
    }
}

/// The height-only terms of a brick's eight levels, one array per term (lane k = level k),
/// for [`FrameModel::eval_column`]'s eight-lane loops.
struct Levels {
    z: [f32; 8],
    env_u: [f32; 8],
    env_v: [f32; 8],
    tower_cx: [f32; 8],
    tower_cy: [f32; 8],
    tower_inv_r: [f32; 8],
    tower_q: [f32; 8],
    tower_w: [f32; 8],
    dome_h2: [f32; 8],
    axis_x: [f32; 8],
    axis_y: [f32; 8],
    funnel_inv_r: [f32; 8],
    funnel_q: [f32; 8],
    funnel_nest: [f32; 8],
    core_r: [f32; 8],
    tor_v: [f32; 8],
    tor_inflow: [f32; 8],
    tor_w: [f32; 8],
    debris_r: [f32; 8],
    debris_q: [f32; 8],
    meso_cx: [f32; 8],
    meso_cy: [f32; 8],
    meso_v: [f32; 8],
    ffd_shift: [f32; 8],
    ffd_q: [f32; 8],
    rho: [f32; 8],
    theta_up: [f32; 8],
    qv_up: [f32; 8],
    p_top: [f32; 8],
    snow_prof: [f32; 8],
    graupel_prof: [f32; 8],
    ring_prof: [f32; 8],
    hail_cx: [f32; 8],
    hail_cy: [f32; 8],
    hail_prof: [f32; 8],
    cold_prof: [f32; 8],
}

impl Levels {
    #[inline(always)]
    fn new(zt: &[ZTerms; 8]) -> Levels {
        let g = |f: fn(&ZTerms) -> f32| -> [f32; 8] { std::array::from_fn(|k| f(&zt[k])) };
        Levels {
            z: g(|t| t.z),
            env_u: g(|t| t.env[0]),
            env_v: g(|t| t.env[1]),
            tower_cx: g(|t| t.tower_c[0]),
            tower_cy: g(|t| t.tower_c[1]),
            tower_inv_r: g(|t| t.tower_inv_r),
            tower_q: g(|t| t.tower_q),
            tower_w: g(|t| t.tower_w),
            dome_h2: g(|t| t.dome_h2),
            axis_x: g(|t| t.axis[0]),
            axis_y: g(|t| t.axis[1]),
            funnel_inv_r: g(|t| t.funnel_inv_r),
            funnel_q: g(|t| t.funnel_q),
            funnel_nest: g(|t| t.funnel_nest),
            core_r: g(|t| t.core_r),
            tor_v: g(|t| t.tor_v),
            tor_inflow: g(|t| t.tor_inflow),
            tor_w: g(|t| t.tor_w),
            debris_r: g(|t| t.debris_r),
            debris_q: g(|t| t.debris_q),
            meso_cx: g(|t| t.meso_c[0]),
            meso_cy: g(|t| t.meso_c[1]),
            meso_v: g(|t| t.meso_v),
            ffd_shift: g(|t| t.ffd_shift),
            ffd_q: g(|t| t.ffd_q),
            rho: g(|t| t.ext.rho),
            theta_up: g(|t| t.ext.theta_up),
            qv_up: g(|t| t.ext.qv_up),
            p_top: g(|t| t.ext.p_top),
            snow_prof: g(|t| t.ext.snow_prof),
            graupel_prof: g(|t| t.ext.graupel_prof),
            ring_prof: g(|t| t.ext.ring_prof),
            hail_cx: g(|t| t.ext.hail_c[0]),
            hail_cy: g(|t| t.ext.hail_c[1]),
            hail_prof: g(|t| t.ext.hail_prof),
            cold_prof: g(|t| t.ext.cold_prof),
        }
    }
}
