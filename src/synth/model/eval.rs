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
        let mut zt = [ZTerms::default(); 8];
        for (k, t) in zt.iter_mut().enumerate() {
            *t = self.zterms(p0[2] + k as f32 * dx, mask, EXT);
        }
        let lv = Levels::new(&zt);
        for i in 0..8 {
            let x = p0[0] + i as f32 * dx;
            for j in 0..8 {
                let y = p0[1] + j as f32 * dx;
                let base = i * 64 + j * 8;
                let col = self.column(x, y, mask);
                let noise = self.column_noise(x, y, mask, &col, &zt);
                self.eval_column::<EXT>(x, y, mask, &col, &noise, &lv, &zt, out, base);
            }
        }
    }

    /// One column of [`FrameModel::eval_brick_impl`]: voxels `base..base + 8` of `out`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    // Levels are indexed in lockstep across a dozen arrays.
    #[allow(clippy::needless_range_loop)]
    fn eval_column<const EXT: bool>(
        &self,
        x: f32,
        y: f32,
        mask: u32,
        col: &Column,
        noise: &ColumnNoise,
        lv: &Levels,
        zt: &[ZTerms; 8],
        out: &mut BrickFields,
        base: usize,
    ) {
        const N: usize = 8;
        let z = &lv.z;
        let mut cloud = [0.0f32; N];
        let mut rain = [0.0f32; N];
        let mut w = [0.0f32; N];
        let mut pert_u = [0.0f32; N];
        let mut pert_v = [0.0f32; N];
        let mut vort = [0.0f32; N];
        let mut gust = [0.0f32; N];
        // Extended fields (stay zero unless EXT).
        let mut debris = [0.0f32; N];
        let mut snow = [0.0f32; N];
        let mut snow_ffd = [0.0f32; N];
        // Graupel of the forward flank (the weak echo region clears it; the updraft's
        // flanking graupel keeps out of the core by itself).
        let mut graupel_ffd = [0.0f32; N];
        let mut graupel = [0.0f32; N];
        let mut hail = [0.0f32; N];
        let mut theta = [0.0f32; N];
        let mut qv = [0.0f32; N];
        let mut prs = [0.0f32; N];
        let mut hook_rain = [0.0f32; N];

        if mask & F_TOWER != 0 {
            for k in 0..N {
                let dxu = x - lv.tower_cx[k];
                let dyu = y - lv.tower_cy[k];
                let r2 = dxu * dxu + dyu * dyu;
                let q = r2.sqrt() * lv.tower_inv_r[k];
                // Texture rises with the updraft (10 m/s) and drifts with the storm:
                // billows of 1-4 km from the coarse sample, detail from a finer one.
                let (nt, nf) = (noise.tower[k], noise.tower_fine[k]);
                // Billowed edge: |noise| makes rounded cauliflower lobes separated by creases.
                let edge = 1.0 - q + 0.5 * (nt.abs() - 0.3) + 0.1 * nf;
                let base_rag = smoothstep(-60.0, 120.0, z[k] - CLOUD_BASE + 160.0 * nt);
                let tower_cloud = lv.tower_q[k] * smoothstep(0.0, 0.1, edge) * base_rag;
                cloud[k] = cloud[k].max(tower_cloud);
                let core = sat(1.0 - q * q * 2.4);
                w[k] += lv.tower_w[k] * core * core * (1.0 + 0.15 * nt);
                gust[k] += 0.12 * nt * core;
                if EXT {
                    let texture = 1.0 + 0.15 * nt;
                    theta[k] += lv.theta_up[k] * core * texture;
                    qv[k] += lv.qv_up[k] * core * texture;
                    prs[k] += lv.p_top[k] * core;
                    // Graupel rimes on the updraft's flanks, not in its core.
                    let ring = sat((q - 0.45) * 3.0) * sat((1.25 - q) * 3.0);
                    graupel[k] += lv.ring_prof[k] * tower_cloud * ring;
                }
            }
        }
        if mask & F_DOME != 0 {
            let dxd = x - self.anvil_x0;
            let dyd = y - self.meso[1];
            let rd2 = (dxd * dxd + dyd * dyd) * (1.0 / (2_900.0 * 2_900.0));
            for k in 0..N {
                let (nt, nf) = (noise.tower[k], noise.tower_fine[k]);
                let e = 1.0 - rd2 - lv.dome_h2[k] + 0.35 * (nt.abs() - 0.3) + 0.08 * nf;
                let c = cloud[k].max(1.2 * smoothstep(0.0, 0.2, e));
                cloud[k] = if lv.dome_h2[k] < 2.0 { c } else { cloud[k] };
            }
        }

        if let Some(ac) = &col.anvil {
            for k in 0..N {
                let na = noise.anvil[k];
                let top = TROPOPAUSE + 250.0 + 150.0 * na;
                let bot = top - ac.thick - ac.mam + 400.0 * na.max(-0.8);
                let e_lat = 1.0 - ac.lat + 0.25 * na;
                let e_v = ((z[k] - bot).min(top - z[k])) * (1.0 / 250.0);
                // Thins over the outer part of its width.
                let qa = ac.q * smoothstep(0.0, 0.6, e_lat);
                // Ice thins towards the base as it falls out (wispy underside).
                let depth = sat((z[k] - bot) * ac.inv_thick);
                cloud[k] = cloud[k].max(qa * sat(e_v) * (0.75 + 0.25 * na) * (0.35 + 0.65 * depth));
                w[k] += 1.5 * na * sat(e_v);
                if EXT {
                    // Aggregates grow as they fall: most snow near the base.
                    snow[k] += 0.8 * qa * sat(e_v) * (0.75 + 0.25 * na) * (1.0 - 0.5 * depth);
                }
            }
        }

        if let Some(wc) = &col.wall {
            for k in 0..N {
                let nw = noise.wall[k];
                let bottom = CLOUD_BASE - WALL_DROP * (1.0 - wc.r2) + 120.0 * nw;
                // A base that softens over a few hundred metres (ragged scud).
                let e = (1.0 - wc.r + 0.3 * nw).min((z[k] - bottom) * (1.0 / 400.0));
                let top_fade = 1.0 - smoothstep(CLOUD_BASE, CLOUD_BASE + 300.0, z[k]);
                cloud[k] = cloud[k].max(1.4 * smoothstep(0.0, 0.6, e) * top_fade);
                w[k] += 6.0 * sat(1.0 - wc.r2) * top_fade * smoothstep(0.0, 600.0, z[k]);
            }
        }

        // Everything but the funnel and its debris (the nested grid's share).
        let ambient_cloud = cloud;
        if mask & (F_FUNNEL | F_TORNADO) != 0 {
            let mut fx = [0.0f32; N];
            let mut fy = [0.0f32; N];
            let mut r2 = [0.0f32; N];
            let mut r = [0.0f32; N];
            for k in 0..N {
                fx[k] = x - lv.axis_x[k];
                fy[k] = y - lv.axis_y[k];
                r2[k] = fx[k] * fx[k] + fy[k] * fy[k];
                r[k] = r2[k].sqrt();
            }
            if mask & F_FUNNEL != 0 {
                for k in 0..N {
                    let nf = noise.funnel[k];
                    let e = 1.0 - r[k] * lv.funnel_inv_r[k] + 0.22 * nf;
                    cloud[k] = cloud[k].max(lv.funnel_q[k] * smoothstep(0.0, 0.3, e));
                    let ed = 1.0 - r[k] / lv.debris_r[k] + 0.45 * nf;
                    let d = lv.debris_q[k] * sat(ed * 1.5) * (0.6 + 0.4 * nf);
                    let on = lv.debris_q[k] > 0.0;
                    debris[k] = if on { d } else { debris[k] };
                    cloud[k] = if on { cloud[k] + d } else { cloud[k] };
                }
            }
            if mask & F_TORNADO != 0 {
                for k in 0..N {
                    let (r, r2) = (r[k], r2[k]);
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
                    let (ex, ey) = (fx[k] * inv_r, fy[k] * inv_r);
                    let vr = -lv.tor_inflow[k] * vt;
                    let qq = r / rc;
                    let on = tor_v > 0.0;
                    pert_u[k] = if on {
                        pert_u[k] + (-ey * vt + ex * vr)
                    } else {
                        pert_u[k]
                    };
                    pert_v[k] = if on {
                        pert_v[k] + (ex * vt + ey * vr)
                    } else {
                        pert_v[k]
                    };
                    vort[k] = if on { vort[k] + zeta } else { vort[k] };
                    let dw = lv.tor_w[k] * 4.0 * qq / ((1.0 + qq) * (1.0 + qq)) * taper;
                    w[k] = if on { w[k] + dw } else { w[k] };
                    if EXT {
                        // Cyclostrophic balance, dp/dr = rho v^2 / r, integrated through
                        // the Rankine profile: -rho V^2 at the axis.
                        let v2 = tor_v * tor_v;
                        let shape = if inside {
                            1.0 - 0.5 * qq * qq
                        } else {
                            0.5 / (qq * qq)
                        };
                        let p = prs[k] - 0.01 * lv.rho[k] * v2 * shape * taper;
                        prs[k] = if on { p } else { prs[k] };
                    }
                }
            }
        }

        if mask & F_MESO != 0 {
            for k in 0..N {
                let mx = x - lv.meso_cx[k];
                let my = y - lv.meso_cy[k];
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
                pert_u[k] = if on {
                    pert_u[k] + -my * inv_r * vt
                } else {
                    pert_u[k]
                };
                pert_v[k] = if on {
                    pert_v[k] + mx * inv_r * vt
                } else {
                    pert_v[k]
                };
                vort[k] = if on { vort[k] + zeta * taper } else { vort[k] };
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
                    let p = prs[k] - 0.01 * lv.rho[k] * v2 * shape * taper;
                    prs[k] = if on { p } else { prs[k] };
                }
            }
        }

        if mask & (F_FFD | F_HOOK) != 0 {
            let sx = x - self.meso[0];
            let sy = y - self.meso[1];
            if mask & F_FFD != 0 {
                for k in 0..N {
                    let nr = noise.rain[k];
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
                    rain[k] = if shaft_on {
                        rain[k] + pattern * lv.ffd_q[k]
                    } else {
                        rain[k]
                    };
                    if EXT {
                        // Above the melting level the forward flank's precipitation is
                        // snow and graupel.
                        let s = snow_ffd[k] + pattern * lv.snow_prof[k];
                        snow_ffd[k] = if shaft_on { s } else { snow_ffd[k] };
                        let g = graupel_ffd[k] + pattern * lv.graupel_prof[k];
                        graupel_ffd[k] = if shaft_on { g } else { graupel_ffd[k] };
                        let hx = x - lv.hail_cx[k];
                        let hy = y - lv.hail_cy[k];
                        let shaft = sat(1.0
                            - (hx * hx + hy * hy) * (1.0 / (HAIL_RADIUS * HAIL_RADIUS))
                            + 0.3 * nr);
                        // Faded out before the forward flank's bound, which is what makes
                        // bricks evaluate it.
                        let bx = (sx - lv.ffd_shift[k] - 4_800.0) * (1.0 / (1.16 * 7_000.0));
                        let by = (sy - 3_000.0) * (1.0 / (1.16 * 3_200.0));
                        let inside = smoothstep(1.0, 0.8, bx * bx + by * by);
                        let h = hail[k] + lv.hail_prof[k] * shaft * shaft * inside;
                        hail[k] = if on { h } else { hail[k] };
                    }
                }
            }
            if let Some(hc) = &col.hook {
                for k in 0..N {
                    let band = hc.band + 0.35 * noise.rain[k];
                    let vert = smoothstep(hc.top, hc.top * 0.6, z[k]);
                    let q = hc.q * sat(band * 1.6) * vert;
                    rain[k] += q;
                    hook_rain[k] = q;
                    w[k] -= 3.5 * q * smoothstep(5_000.0, 1_000.0, z[k]);
                }
            }
            if mask & F_TOWER != 0 {
                for k in 0..N {
                    // Bounded weak echo region: the updraft core holds no rain.
                    let dxu = x - lv.tower_cx[k];
                    let dyu = y - lv.tower_cy[k];
                    let q = (dxu * dxu + dyu * dyu).sqrt() * lv.tower_inv_r[k];
                    let weak_echo = smoothstep(0.35, 0.8, q);
                    let r = rain[k] * weak_echo.max(smoothstep(CLOUD_BASE, 0.0, z[k]));
                    rain[k] = if rain[k] > 0.0 { r } else { rain[k] };
                    if EXT {
                        let on = hail[k] + graupel_ffd[k] + snow_ffd[k] > 0.0;
                        hail[k] = if on { hail[k] * weak_echo } else { hail[k] };
                        graupel_ffd[k] = if on {
                            graupel_ffd[k] * weak_echo
                        } else {
                            graupel_ffd[k]
                        };
                        snow_ffd[k] = if on {
                            snow_ffd[k] * weak_echo
                        } else {
                            snow_ffd[k]
                        };
                    }
                }
            }
            for k in 0..N {
                w[k] -= 2.2 * rain[k] * smoothstep(6_000.0, 2_000.0, z[k]);
                if EXT {
                    // Evaporation of rain below cloud base makes the cold pool: coldest
                    // under the forward flank; the rear-flank downdraft of a tornadic storm
                    // is only a little cold.
                    let cold = (1.5 * (rain[k] - hook_rain[k]).max(0.0) + 0.6 * hook_rain[k])
                        .min(8.0)
                        * lv.cold_prof[k];
                    theta[k] -= cold;
                    // Dry mid-level air brought down by the downdrafts.
                    qv[k] -= 0.35 * cold;
                    // Hydrostatic mesohigh under the dense cold air.
                    prs[k] += 0.3 * cold;
                }
            }
        }

        let o = base..base + N;
        for k in 0..N {
            let u = lv.env_u[k] + pert_u[k];
            let v = lv.env_v[k] + pert_v[k];
            let speed = (u * u + v * v + w[k] * w[k]).sqrt() * (1.0 + gust[k]);
            let storm = (cloud[k] > MIXING_THRESHOLD)
                | (rain[k] > MIXING_THRESHOLD)
                | (pert_u[k] * pert_u[k] + pert_v[k] * pert_v[k]
                    > WIND_PERTURBATION_THRESHOLD * WIND_PERTURBATION_THRESHOLD)
                | (w[k].abs() > VERTICAL_THRESHOLD);
            out.wind[base + k] = speed;
            out.storm[base + k] = storm;
        }
        out.cloud[o.clone()].copy_from_slice(&cloud);
        for k in 0..N {
            // The funnel's share, split between the nested grid and the cloud grid.
            let nested = (cloud[k] - ambient_cloud[k]) * lv.funnel_nest[k];
            out.funnel[base + k] = nested;
            out.ambient_cloud[base + k] = cloud[k] - nested;
        }
        out.rain[o.clone()].copy_from_slice(&rain);
        out.w[o.clone()].copy_from_slice(&w);
        out.vort[o.clone()].copy_from_slice(&vort);
        if EXT {
            for k in 0..N {
                let snow = snow[k] + snow_ffd[k];
                let graupel = graupel[k] + graupel_ffd[k];
                let f_ice = zt[k].ext.f_ice;
                let condensate = (cloud[k] - debris[k]).max(0.0);
                let qc = condensate * (1.0 - f_ice);
                let n = base + k;
                out.qc[n] = qc;
                out.qi[n] = condensate * f_ice;
                out.snow[n] = snow;
                out.graupel[n] = graupel;
                out.hail[n] = hail[k];
                // Cloudy air is saturated, moister than the environment.
                out.qv[n] = qv[k] + 0.25 * qc;
                out.prs[n] = prs[k];
                out.theta[n] = theta[k];
                let precip = rain[k] + snow + graupel + hail[k];
                out.precip[n] = precip > MIXING_THRESHOLD;
            }
            // The logarithm stays a scalar libm call per voxel (the same bits as before).
            for k in 0..N {
                let n = base + k;
                let e = &zt[k].ext;
                out.dbz[n] = reflectivity_dbz(
                    e.rho,
                    rain[k],
                    out.snow[n],
                    out.graupel[n],
                    hail[k],
                    e.z_graupel,
                    e.z_hail,
                );
            }
        }
    }

    /// The voxel-by-voxel form of [`FrameModel::eval_brick`]: what the level-major
    /// evaluation must reproduce bit for bit (see the tests).
    #[cfg(test)]
    pub(super) fn eval_brick_reference<const EXT: bool>(
        &self,
        p0: [f32; 3],
        dx: f32,
        mask: u32,
        out: &mut BrickFields,
    ) {
        let mut zt = [ZTerms::default(); 8];
        for (k, t) in zt.iter_mut().enumerate() {
            *t = self.zterms(p0[2] + k as f32 * dx, mask, EXT);
        }
        for i in 0..8 {
            let x = p0[0] + i as f32 * dx;
            for j in 0..8 {
                let y = p0[1] + j as f32 * dx;
                let base = i * 64 + j * 8;
                let col = self.column(x, y, mask);
                let noise = self.column_noise(x, y, mask, &col, &zt);
                for (k, zk) in zt.iter().enumerate() {
                    let z = zk.z;
                    let n = base + k;
                    let mut cloud = 0.0f32;
                    let mut rain = 0.0f32;
                    let mut w = 0.0f32;
                    let mut uv = zk.env;
                    let mut pert = [0.0f32; 2];
                    let mut vort = 0.0f32;
                    let mut gust = 0.0f32;
                    // Extended fields (stay zero unless EXT).
                    let ze = &zk.ext;
                    let mut debris = 0.0f32;
                    let mut snow = 0.0f32;
                    let mut snow_ffd = 0.0f32;
                    // Graupel of the forward flank (the weak echo region clears it; the
                    // updraft's flanking graupel keeps out of the core by itself).
                    let mut graupel_ffd = 0.0f32;
                    let mut graupel = 0.0f32;
                    let mut hail = 0.0f32;
                    let mut theta = 0.0f32;
                    let mut qv = 0.0f32;
                    let mut prs = 0.0f32;
                    let mut hook_rain = 0.0f32;

                    if mask & (F_TOWER | F_DOME) != 0 {
                        let dxu = x - zk.tower_c[0];
                        let dyu = y - zk.tower_c[1];
                        let r2 = dxu * dxu + dyu * dyu;
                        let q = r2.sqrt() * zk.tower_inv_r;
                        // Texture rises with the updraft (10 m/s) and drifts with the storm:
                        // billows of 1-4 km from the coarse sample, detail from a finer one.
                        let (nt, nf) = (noise.tower[k], noise.tower_fine[k]);
                        if mask & F_TOWER != 0 {
                            // Billowed edge: |noise| makes rounded cauliflower lobes
                            // separated by creases.
                            let edge = 1.0 - q + 0.5 * (nt.abs() - 0.3) + 0.1 * nf;
                            let base_rag = smoothstep(-60.0, 120.0, z - CLOUD_BASE + 160.0 * nt);
                            let tower_cloud = zk.tower_q * smoothstep(0.0, 0.1, edge) * base_rag;
                            cloud = cloud.max(tower_cloud);
                            let core = sat(1.0 - q * q * 2.4);
                            w += zk.tower_w * core * core * (1.0 + 0.15 * nt);
                            gust += 0.12 * nt * core;
                            if EXT {
                                let texture = 1.0 + 0.15 * nt;
                                theta += ze.theta_up * core * texture;
                                qv += ze.qv_up * core * texture;
                                prs += ze.p_top * core;
                                // Graupel rimes on the updraft's flanks, not in its core.
                                let ring = sat((q - 0.45) * 3.0) * sat((1.25 - q) * 3.0);
                                graupel += ze.ring_prof * tower_cloud * ring;
                            }
                        }
                        if mask & F_DOME != 0 && zk.dome_h2 < 2.0 {
                            let dxd = x - self.anvil_x0;
                            let dyd = y - self.meso[1];
                            let rd2 = (dxd * dxd + dyd * dyd) * (1.0 / (2_900.0 * 2_900.0));
                            let e = 1.0 - rd2 - zk.dome_h2 + 0.35 * (nt.abs() - 0.3) + 0.08 * nf;
                            cloud = cloud.max(1.2 * smoothstep(0.0, 0.2, e));
                        }
                    }

                    if let Some(ac) = &col.anvil {
                        let na = noise.anvil[k];
                        let top = TROPOPAUSE + 250.0 + 150.0 * na;
                        let bot = top - ac.thick - ac.mam + 400.0 * na.max(-0.8);
                        let e_lat = 1.0 - ac.lat + 0.25 * na;
                        let e_v = ((z - bot).min(top - z)) * (1.0 / 250.0);
                        // Thins over the outer part of its width.
                        let qa = ac.q * smoothstep(0.0, 0.6, e_lat);
                        // Ice thins towards the base as it falls out (wispy underside).
                        let depth = sat((z - bot) * ac.inv_thick);
                        cloud =
                            cloud.max(qa * sat(e_v) * (0.75 + 0.25 * na) * (0.35 + 0.65 * depth));
                        w += 1.5 * na * sat(e_v);
                        if EXT {
                            // Aggregates grow as they fall: most snow near the base.
                            snow += 0.8 * qa * sat(e_v) * (0.75 + 0.25 * na) * (1.0 - 0.5 * depth);
                        }
                    }

                    if let Some(wc) = &col.wall {
                        let nw = noise.wall[k];
                        let bottom = CLOUD_BASE - WALL_DROP * (1.0 - wc.r2) + 120.0 * nw;
                        // A base that softens over a few hundred metres (ragged scud).
                        let e = (1.0 - wc.r + 0.3 * nw).min((z - bottom) * (1.0 / 400.0));
                        let top_fade = 1.0 - smoothstep(CLOUD_BASE, CLOUD_BASE + 300.0, z);
                        cloud = cloud.max(1.4 * smoothstep(0.0, 0.6, e) * top_fade);
                        w += 6.0 * sat(1.0 - wc.r2) * top_fade * smoothstep(0.0, 600.0, z);
                    }

                    // Everything but the funnel and its debris (the nested grid's share).
                    let ambient_cloud = cloud;
                    if mask & (F_FUNNEL | F_TORNADO) != 0 {
                        let fx = x - zk.axis[0];
                        let fy = y - zk.axis[1];
                        let r2 = fx * fx + fy * fy;
                        let r = r2.sqrt();
                        if mask & F_FUNNEL != 0 {
                            let nf = noise.funnel[k];
                            let e = 1.0 - r * zk.funnel_inv_r + 0.22 * nf;
                            cloud = cloud.max(zk.funnel_q * smoothstep(0.0, 0.3, e));
                            if zk.debris_q > 0.0 {
                                let ed = 1.0 - r / zk.debris_r + 0.45 * nf;
                                debris = zk.debris_q * sat(ed * 1.5) * (0.6 + 0.4 * nf);
                                cloud += debris;
                            }
                        }
                        if mask & F_TORNADO != 0 && zk.tor_v > 0.0 {
                            let rc = zk.core_r;
                            let taper =
                                sat(1.0 - r2 * (1.0 / (TORNADO_WIND_RADIUS * TORNADO_WIND_RADIUS)));
                            // Rankine vortex: solid body inside the core, 1/r outside.
                            let (vt, zeta) = if r < rc {
                                (zk.tor_v * r / rc, 2.0 * zk.tor_v / rc)
                            } else {
                                (zk.tor_v * rc / r, 0.0)
                            };
                            let vt = vt * taper;
                            let inv_r = 1.0 / r.max(1.0);
                            let (ex, ey) = (fx * inv_r, fy * inv_r);
                            let vr = -zk.tor_inflow * vt;
                            pert[0] += -ey * vt + ex * vr;
                            pert[1] += ex * vt + ey * vr;
                            vort += zeta;
                            let qq = r / rc;
                            w += zk.tor_w * 4.0 * qq / ((1.0 + qq) * (1.0 + qq)) * taper;
                            if EXT {
                                // Cyclostrophic balance, dp/dr = rho v^2 / r, integrated
                                // through the Rankine profile: -rho V^2 at the axis.
                                let v2 = zk.tor_v * zk.tor_v;
                                let shape = if r < rc {
                                    1.0 - 0.5 * qq * qq
                                } else {
                                    0.5 / (qq * qq)
                                };
                                prs -= 0.01 * ze.rho * v2 * shape * taper;
                            }
                        }
                    }

                    if mask & F_MESO != 0 && zk.meso_v > 0.0 {
                        let mx = x - zk.meso_c[0];
                        let my = y - zk.meso_c[1];
                        let r2 = mx * mx + my * my;
                        let r = r2.sqrt();
                        let taper = sat(1.0 - r2 * (1.0 / (MESO_OUTER * MESO_OUTER)));
                        // Modified Rankine: decays as r^-1.5 outside the core so the
                        // storm's circulation stays compact.
                        let (vt, zeta) = if r < MESO_RADIUS {
                            (zk.meso_v * r / MESO_RADIUS, 2.0 * zk.meso_v / MESO_RADIUS)
                        } else {
                            let a = MESO_RADIUS / r;
                            let v = zk.meso_v * a * a.sqrt();
                            (v, -0.5 * v / r)
                        };
                        let vt = vt * taper;
                        let inv_r = 1.0 / r.max(1.0);
                        pert[0] += -my * inv_r * vt;
                        pert[1] += mx * inv_r * vt;
                        vort += zeta * taper;
                        if EXT {
                            // Cyclostrophic balance through the modified Rankine profile:
                            // -rho V^2 R^3 / (3 r^3) outside the core, -5/6 rho V^2 at the axis.
                            let v2 = zk.meso_v * zk.meso_v;
                            let shape = if r < MESO_RADIUS {
                                let a = r * (1.0 / MESO_RADIUS);
                                5.0 / 6.0 - 0.5 * a * a
                            } else {
                                let a = MESO_RADIUS / r;
                                a * a * a * (1.0 / 3.0)
                            };
                            prs -= 0.01 * ze.rho * v2 * shape * taper;
                        }
                    }

                    if mask & (F_FFD | F_HOOK) != 0 {
                        let sx = x - self.meso[0];
                        let sy = y - self.meso[1];
                        let nr = noise.rain[k];
                        if mask & F_FFD != 0 && zk.ffd_q > 0.0 {
                            let ex = (sx - zk.ffd_shift - 4_800.0) * (1.0 / 7_000.0);
                            let ey = (sy - 3_000.0) * (1.0 / 3_200.0);
                            let e = 1.0 - (ex * ex + ey * ey);
                            if e > -0.34 {
                                // Heaviest just north of the updraft, lighter downwind.
                                let core = 4.5 - 2.5 * sat(ex + 0.3);
                                // Strong noise splits the rain into shafts; it is
                                // capped at 0.6 so the rain's reach (and the bound)
                                // stays within e > -0.31.
                                let v = sat(e * 1.5 + 1.6 * nr.min(0.6) - 0.5);
                                let pattern = core * v * v;
                                rain += pattern * zk.ffd_q;
                                if EXT {
                                    // Above the melting level the forward flank's
                                    // precipitation is snow and graupel.
                                    snow_ffd += pattern * ze.snow_prof;
                                    graupel_ffd += pattern * ze.graupel_prof;
                                }
                            }
                            if EXT {
                                let hx = x - ze.hail_c[0];
                                let hy = y - ze.hail_c[1];
                                let shaft = sat(1.0
                                    - (hx * hx + hy * hy) * (1.0 / (HAIL_RADIUS * HAIL_RADIUS))
                                    + 0.3 * nr);
                                // Faded out before the forward flank's bound, which is what
                                // makes bricks evaluate it.
                                let bx = (sx - zk.ffd_shift - 4_800.0) * (1.0 / (1.16 * 7_000.0));
                                let by = (sy - 3_000.0) * (1.0 / (1.16 * 3_200.0));
                                let inside = smoothstep(1.0, 0.8, bx * bx + by * by);
                                hail += ze.hail_prof * shaft * shaft * inside;
                            }
                        }
                        if let Some(hc) = &col.hook {
                            let band = hc.band + 0.35 * nr;
                            let vert = smoothstep(hc.top, hc.top * 0.6, z);
                            let q = hc.q * sat(band * 1.6) * vert;
                            rain += q;
                            hook_rain = q;
                            w -= 3.5 * q * smoothstep(5_000.0, 1_000.0, z);
                        }
                        // Bounded weak echo region: the updraft core holds no rain.
                        if mask & F_TOWER != 0 && rain > 0.0 {
                            let dxu = x - zk.tower_c[0];
                            let dyu = y - zk.tower_c[1];
                            let q = (dxu * dxu + dyu * dyu).sqrt() * zk.tower_inv_r;
                            rain *= smoothstep(0.35, 0.8, q).max(smoothstep(CLOUD_BASE, 0.0, z));
                        }
                        if EXT && mask & F_TOWER != 0 && hail + graupel_ffd + snow_ffd > 0.0 {
                            let dxu = x - zk.tower_c[0];
                            let dyu = y - zk.tower_c[1];
                            let q = (dxu * dxu + dyu * dyu).sqrt() * zk.tower_inv_r;
                            let weak_echo = smoothstep(0.35, 0.8, q);
                            hail *= weak_echo;
                            graupel_ffd *= weak_echo;
                            snow_ffd *= weak_echo;
                        }
                        w -= 2.2 * rain * smoothstep(6_000.0, 2_000.0, z);
                        if EXT {
                            // Evaporation of rain below cloud base makes the cold pool:
                            // coldest under the forward flank; the rear-flank downdraft of
                            // a tornadic storm is only a little cold.
                            let cold = (1.5 * (rain - hook_rain).max(0.0) + 0.6 * hook_rain)
                                .min(8.0)
                                * ze.cold_prof;
                            theta -= cold;
                            // Dry mid-level air brought down by the downdrafts.
                            qv -= 0.35 * cold;
                            // Hydrostatic mesohigh under the dense cold air.
                            prs += 0.3 * cold;
                        }
                    }

                    let u = uv[0] + pert[0];
                    let v = uv[1] + pert[1];
                    uv = [u, v];
                    let speed = (uv[0] * uv[0] + uv[1] * uv[1] + w * w).sqrt() * (1.0 + gust);
                    let storm = cloud > MIXING_THRESHOLD
                        || rain > MIXING_THRESHOLD
                        || pert[0] * pert[0] + pert[1] * pert[1]
                            > WIND_PERTURBATION_THRESHOLD * WIND_PERTURBATION_THRESHOLD
                        || w.abs() > VERTICAL_THRESHOLD;
                    out.cloud[n] = cloud;
                    // The funnel's share, split between the nested grid and the cloud grid.
                    let nested = (cloud - ambient_cloud) * zk.funnel_nest;
                    out.ambient_cloud[n] = cloud - nested;
                    out.funnel[n] = nested;
                    out.rain[n] = rain;
                    out.wind[n] = speed;
                    out.w[n] = w;
                    out.vort[n] = vort;
                    out.storm[n] = storm;
                    if EXT {
                        let snow = snow + snow_ffd;
                        let graupel = graupel + graupel_ffd;
                        let condensate = (cloud - debris).max(0.0);
                        let qc = condensate * (1.0 - ze.f_ice);
                        out.qc[n] = qc;
                        out.qi[n] = condensate * ze.f_ice;
                        out.snow[n] = snow;
                        out.graupel[n] = graupel;
                        out.hail[n] = hail;
                        // Cloudy air is saturated, moister than the environment.
                        out.qv[n] = qv + 0.25 * qc;
                        out.prs[n] = prs;
                        out.theta[n] = theta;
                        let precip = rain + snow + graupel + hail;
                        out.precip[n] = precip > MIXING_THRESHOLD;
                        out.dbz[n] = reflectivity_dbz(
                            ze.rho,
                            rain,
                            snow,
                            graupel,
                            hail,
                            ze.z_graupel,
                            ze.z_hail,
                        );
                    }
                }
            }
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
