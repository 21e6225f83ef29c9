//! The voxel-by-voxel evaluation of a brick: each voxel on its own, each feature a branch,
//! in the same order of operations as [`FrameModel::eval_brick`]'s column loops. What the
//! level-major evaluation must reproduce bit for bit (see the tests); test code only.

use super::*;

impl FrameModel<'_> {
    /// The voxel-by-voxel form of [`FrameModel::eval_brick`].
    pub(super) fn eval_brick_reference<const EXT: bool>(
        &self,
        p0: [f32; 3],
        dx: f32,
        mask: u32,
        out: &mut BrickFields,
    ) {
        let zt = self.level_terms(p0[2], dx, mask, EXT);
        for i in 0..8 {
            let x = p0[0] + i as f32 * dx;
            for j in 0..8 {
                let y = p0[1] + j as f32 * dx;
                let base = i * 64 + j * 8;
                let col = self.column(x, y, mask);
                let noise = self.column_noise(x, y, mask, &col, &zt);
                for (k, zk) in zt.iter().enumerate() {
                    let at = VoxelAt {
                        x,
                        y,
                        mask,
                        zk,
                        col: &col,
                        noise: VoxelNoise::of(&noise, k),
                    };
                    let v = self.eval_voxel::<EXT>(&at);
                    v.write::<EXT>(&at, out, base + k);
                }
            }
        }
    }

    /// Every feature's contribution to one voxel, in the order the column loops add them.
    fn eval_voxel<const EXT: bool>(&self, at: &VoxelAt) -> VoxelFields {
        let (mask, zk) = (at.mask, at.zk);
        let mut v = VoxelFields::default();
        if mask & (F_TOWER | F_DOME) != 0 {
            v.add_tower_and_dome::<EXT>(at, [self.anvil_x0, self.meso[1]]);
        }
        if let Some(ac) = &at.col.anvil {
            v.add_anvil::<EXT>(at, ac);
        }
        if let Some(wc) = &at.col.wall {
            v.add_wall_cloud(at, wc);
        }
        // Everything but the funnel and its debris (the nested grid's share).
        v.ambient_cloud = v.cloud;
        if mask & (F_FUNNEL | F_TORNADO) != 0 {
            v.add_funnel_and_tornado::<EXT>(at);
        }
        if mask & F_MESO != 0 && zk.meso_v > 0.0 {
            v.add_mesocyclone_winds::<EXT>(at);
        }
        if mask & (F_FFD | F_HOOK) != 0 {
            let sx = at.x - self.meso[0];
            let sy = at.y - self.meso[1];
            if mask & F_FFD != 0 && zk.ffd_q > 0.0 {
                v.add_forward_flank::<EXT>(at, sx, sy);
            }
            if let Some(hc) = &at.col.hook {
                v.add_hook(at, hc);
            }
            v.clear_weak_echo::<EXT>(at);
            v.add_downdrafts::<EXT>(at);
        }
        v
    }
}

/// The noise samples of one voxel (its level of a [`ColumnNoise`]).
struct VoxelNoise {
    tower: f32,
    tower_fine: f32,
    anvil: f32,
    wall: f32,
    funnel: f32,
    rain: f32,
}

impl VoxelNoise {
    fn of(n: &ColumnNoise, k: usize) -> VoxelNoise {
        VoxelNoise {
            tower: n.tower[k],
            tower_fine: n.tower_fine[k],
            anvil: n.anvil[k],
            wall: n.wall[k],
            funnel: n.funnel[k],
            rain: n.rain[k],
        }
    }
}

/// One voxel as [`FrameModel::eval_voxel`] evaluates it: its position, its level's terms,
/// its column's terms and its noise.
struct VoxelAt<'v> {
    x: f32,
    y: f32,
    mask: u32,
    zk: &'v ZTerms,
    col: &'v Column,
    noise: VoxelNoise,
}

/// The fields of one voxel while the features add to them (the extended ones stay zero
/// unless the evaluation is extended).
#[derive(Default)]
struct VoxelFields {
    cloud: f32,
    /// The cloud before the funnel and its debris.
    ambient_cloud: f32,
    rain: f32,
    w: f32,
    pert: [f32; 2],
    vort: f32,
    gust: f32,
    debris: f32,
    snow: f32,
    snow_ffd: f32,
    /// Graupel of the forward flank (the weak echo region clears it; the updraft's
    /// flanking graupel keeps out of the core by itself).
    graupel_ffd: f32,
    graupel: f32,
    hail: f32,
    theta: f32,
    qv: f32,
    prs: f32,
    hook_rain: f32,
}

impl VoxelFields {
    /// The updraft tower and the overshooting top above it (centred on `dome_centre`).
    fn add_tower_and_dome<const EXT: bool>(&mut self, at: &VoxelAt, dome_centre: [f32; 2]) {
        let (x, y, zk, ze) = (at.x, at.y, at.zk, &at.zk.ext);
        let z = zk.z;
        let dxu = x - zk.tower_c[0];
        let dyu = y - zk.tower_c[1];
        let r2 = dxu * dxu + dyu * dyu;
        let q = r2.sqrt() * zk.tower_inv_r;
        // Texture rises with the updraft (10 m/s) and drifts with the storm:
        // billows of 1-4 km from the coarse sample, detail from a finer one.
        let (nt, nf) = (at.noise.tower, at.noise.tower_fine);
        if at.mask & F_TOWER != 0 {
            // Billowed edge: |noise| makes rounded cauliflower lobes
            // separated by creases.
            let edge = 1.0 - q + 0.5 * (nt.abs() - 0.3) + 0.1 * nf;
            let base_rag = smoothstep(-60.0, 120.0, z - CLOUD_BASE + 160.0 * nt);
            let tower_cloud = zk.tower_q * smoothstep(0.0, 0.1, edge) * base_rag;
            self.cloud = self.cloud.max(tower_cloud);
            let core = sat(1.0 - q * q * 2.4);
            self.w += zk.tower_w * core * core * (1.0 + 0.15 * nt);
            self.gust += 0.12 * nt * core;
            if EXT {
                let texture = 1.0 + 0.15 * nt;
                self.theta += ze.theta_up * core * texture;
                self.qv += ze.qv_up * core * texture;
                self.prs += ze.p_top * core;
                // Graupel rimes on the updraft's flanks, not in its core.
                let ring = sat((q - 0.45) * 3.0) * sat((1.25 - q) * 3.0);
                self.graupel += ze.ring_prof * tower_cloud * ring;
            }
        }
        if at.mask & F_DOME != 0 && zk.dome_h2 < 2.0 {
            let dxd = x - dome_centre[0];
            let dyd = y - dome_centre[1];
            let rd2 = (dxd * dxd + dyd * dyd) * (1.0 / (2_900.0 * 2_900.0));
            let e = 1.0 - rd2 - zk.dome_h2 + 0.35 * (nt.abs() - 0.3) + 0.08 * nf;
            self.cloud = self.cloud.max(1.2 * smoothstep(0.0, 0.2, e));
        }
    }

    /// The anvil and (extended) its snow.
    fn add_anvil<const EXT: bool>(&mut self, at: &VoxelAt, ac: &AnvilColumn) {
        let z = at.zk.z;
        let na = at.noise.anvil;
        let top = TROPOPAUSE + 250.0 + 150.0 * na;
        let bot = top - ac.thick - ac.mam + 400.0 * na.max(-0.8);
        let e_lat = 1.0 - ac.lat + 0.25 * na;
        let e_v = ((z - bot).min(top - z)) * (1.0 / 250.0);
        // Thins over the outer part of its width.
        let qa = ac.q * smoothstep(0.0, 0.6, e_lat);
        // Ice thins towards the base as it falls out (wispy underside).
        let depth = sat((z - bot) * ac.inv_thick);
        self.cloud = self
            .cloud
            .max(qa * sat(e_v) * (0.75 + 0.25 * na) * (0.35 + 0.65 * depth));
        self.w += 1.5 * na * sat(e_v);
        if EXT {
            // Aggregates grow as they fall: most snow near the base.
            self.snow += 0.8 * qa * sat(e_v) * (0.75 + 0.25 * na) * (1.0 - 0.5 * depth);
        }
    }

    /// The wall cloud and the updraft into it.
    fn add_wall_cloud(&mut self, at: &VoxelAt, wc: &WallColumn) {
        let z = at.zk.z;
        let nw = at.noise.wall;
        let bottom = CLOUD_BASE - WALL_DROP * (1.0 - wc.r2) + 120.0 * nw;
        // A base that softens over a few hundred metres (ragged scud).
        let e = (1.0 - wc.r + 0.3 * nw).min((z - bottom) * (1.0 / 400.0));
        let top_fade = 1.0 - smoothstep(CLOUD_BASE, CLOUD_BASE + 300.0, z);
        self.cloud = self.cloud.max(1.4 * smoothstep(0.0, 0.6, e) * top_fade);
        self.w += 6.0 * sat(1.0 - wc.r2) * top_fade * smoothstep(0.0, 600.0, z);
    }

    /// The funnel and its debris, and the tornado's winds.
    fn add_funnel_and_tornado<const EXT: bool>(&mut self, at: &VoxelAt) {
        let (zk, ze) = (at.zk, &at.zk.ext);
        let fx = at.x - zk.axis[0];
        let fy = at.y - zk.axis[1];
        let r2 = fx * fx + fy * fy;
        let r = r2.sqrt();
        if at.mask & F_FUNNEL != 0 {
            let nf = at.noise.funnel;
            let e = 1.0 - r * zk.funnel_inv_r + 0.22 * nf;
            self.cloud = self.cloud.max(zk.funnel_q * smoothstep(0.0, 0.3, e));
            if zk.debris_q > 0.0 {
                let ed = 1.0 - r / zk.debris_r + 0.45 * nf;
                self.debris = zk.debris_q * sat(ed * 1.5) * (0.6 + 0.4 * nf);
                self.cloud += self.debris;
            }
        }
        if at.mask & F_TORNADO != 0 && zk.tor_v > 0.0 {
            let rc = zk.core_r;
            let taper = sat(1.0 - r2 * (1.0 / (TORNADO_WIND_RADIUS * TORNADO_WIND_RADIUS)));
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
            self.pert[0] += -ey * vt + ex * vr;
            self.pert[1] += ex * vt + ey * vr;
            self.vort += zeta;
            let qq = r / rc;
            self.w += zk.tor_w * 4.0 * qq / ((1.0 + qq) * (1.0 + qq)) * taper;
            if EXT {
                // Cyclostrophic balance, dp/dr = rho v^2 / r, integrated
                // through the Rankine profile: -rho V^2 at the axis.
                let v2 = zk.tor_v * zk.tor_v;
                let shape = if r < rc {
                    1.0 - 0.5 * qq * qq
                } else {
                    0.5 / (qq * qq)
                };
                self.prs -= 0.01 * ze.rho * v2 * shape * taper;
            }
        }
    }

    /// The mesocyclone's winds and (extended) its pressure deficit.
    fn add_mesocyclone_winds<const EXT: bool>(&mut self, at: &VoxelAt) {
        let (zk, ze) = (at.zk, &at.zk.ext);
        let mx = at.x - zk.meso_c[0];
        let my = at.y - zk.meso_c[1];
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
        self.pert[0] += -my * inv_r * vt;
        self.pert[1] += mx * inv_r * vt;
        self.vort += zeta * taper;
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
            self.prs -= 0.01 * ze.rho * v2 * shape * taper;
        }
    }

    /// The forward flank's rain and (extended) its snow, graupel and hail; `sx`, `sy`:
    /// the voxel relative to the mesocyclone's centre.
    fn add_forward_flank<const EXT: bool>(&mut self, at: &VoxelAt, sx: f32, sy: f32) {
        let (zk, ze) = (at.zk, &at.zk.ext);
        let nr = at.noise.rain;
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
            self.rain += pattern * zk.ffd_q;
            if EXT {
                // Above the melting level the forward flank's
                // precipitation is snow and graupel.
                self.snow_ffd += pattern * ze.snow_prof;
                self.graupel_ffd += pattern * ze.graupel_prof;
            }
        }
        if EXT {
            let hx = at.x - ze.hail_c[0];
            let hy = at.y - ze.hail_c[1];
            let shaft =
                sat(1.0 - (hx * hx + hy * hy) * (1.0 / (HAIL_RADIUS * HAIL_RADIUS)) + 0.3 * nr);
            // Faded out before the forward flank's bound, which is what
            // makes bricks evaluate it.
            let bx = (sx - zk.ffd_shift - 4_800.0) * (1.0 / (1.16 * 7_000.0));
            let by = (sy - 3_000.0) * (1.0 / (1.16 * 3_200.0));
            let inside = smoothstep(1.0, 0.8, bx * bx + by * by);
            self.hail += ze.hail_prof * shaft * shaft * inside;
        }
    }

    /// The hook's rain and the downdraft it drags.
    fn add_hook(&mut self, at: &VoxelAt, hc: &HookColumn) {
        let z = at.zk.z;
        let band = hc.band + 0.35 * at.noise.rain;
        let vert = smoothstep(hc.top, hc.top * 0.6, z);
        let q = hc.q * sat(band * 1.6) * vert;
        self.rain += q;
        self.hook_rain = q;
        self.w -= 3.5 * q * smoothstep(5_000.0, 1_000.0, z);
    }

    /// Bounded weak echo region: the updraft core holds no rain (nor, extended, the
    /// forward flank's snow, graupel and hail).
    fn clear_weak_echo<const EXT: bool>(&mut self, at: &VoxelAt) {
        let zk = at.zk;
        if at.mask & F_TOWER != 0 && self.rain > 0.0 {
            let dxu = at.x - zk.tower_c[0];
            let dyu = at.y - zk.tower_c[1];
            let q = (dxu * dxu + dyu * dyu).sqrt() * zk.tower_inv_r;
            self.rain *= smoothstep(0.35, 0.8, q).max(smoothstep(CLOUD_BASE, 0.0, zk.z));
        }
        if EXT && at.mask & F_TOWER != 0 && self.hail + self.graupel_ffd + self.snow_ffd > 0.0 {
            let dxu = at.x - zk.tower_c[0];
            let dyu = at.y - zk.tower_c[1];
            let q = (dxu * dxu + dyu * dyu).sqrt() * zk.tower_inv_r;
            let weak_echo = smoothstep(0.35, 0.8, q);
            self.hail *= weak_echo;
            self.graupel_ffd *= weak_echo;
            self.snow_ffd *= weak_echo;
        }
    }

    /// The downdraft falling rain drags and (extended) the cold pool.
    fn add_downdrafts<const EXT: bool>(&mut self, at: &VoxelAt) {
        let z = at.zk.z;
        self.w -= 2.2 * self.rain * smoothstep(6_000.0, 2_000.0, z);
        if EXT {
            // Evaporation of rain below cloud base makes the cold pool:
            // coldest under the forward flank; the rear-flank downdraft of
            // a tornadic storm is only a little cold.
            let cold = (1.5 * (self.rain - self.hook_rain).max(0.0) + 0.6 * self.hook_rain)
                .min(8.0)
                * at.zk.ext.cold_prof;
            self.theta -= cold;
            // Dry mid-level air brought down by the downdrafts.
            self.qv -= 0.35 * cold;
            // Hydrostatic mesohigh under the dense cold air.
            self.prs += 0.3 * cold;
        }
    }

    /// Writes the voxel's fields into voxel `n` of `out`.
    fn write<const EXT: bool>(&self, at: &VoxelAt, out: &mut BrickFields, n: usize) {
        let (zk, ze) = (at.zk, &at.zk.ext);
        let (cloud, rain, w, pert) = (self.cloud, self.rain, self.w, self.pert);
        let u = zk.env[0] + pert[0];
        let v = zk.env[1] + pert[1];
        let speed = (u * u + v * v + w * w).sqrt() * (1.0 + self.gust);
        let storm = cloud > MIXING_THRESHOLD
            || rain > MIXING_THRESHOLD
            || pert[0] * pert[0] + pert[1] * pert[1]
                > WIND_PERTURBATION_THRESHOLD * WIND_PERTURBATION_THRESHOLD
            || w.abs() > VERTICAL_THRESHOLD;
        out.cloud[n] = cloud;
        // The funnel's share, split between the nested grid and the cloud grid.
        let nested = (cloud - self.ambient_cloud) * zk.funnel_nest;
        out.ambient_cloud[n] = cloud - nested;
        out.funnel[n] = nested;
        out.rain[n] = rain;
        out.wind[n] = speed;
        out.w[n] = w;
        out.vort[n] = self.vort;
        out.storm[n] = storm;
        if EXT {
            let snow = self.snow + self.snow_ffd;
            let graupel = self.graupel + self.graupel_ffd;
            let condensate = (cloud - self.debris).max(0.0);
            let qc = condensate * (1.0 - ze.f_ice);
            out.qc[n] = qc;
            out.qi[n] = condensate * ze.f_ice;
            out.snow[n] = snow;
            out.graupel[n] = graupel;
            out.hail[n] = self.hail;
            // Cloudy air is saturated, moister than the environment.
            out.qv[n] = self.qv + 0.25 * qc;
            out.prs[n] = self.prs;
            out.theta[n] = self.theta;
            let precip = rain + snow + graupel + self.hail;
            out.precip[n] = precip > MIXING_THRESHOLD;
            out.dbz[n] = reflectivity_dbz(
                ze.rho,
                rain,
                snow,
                graupel,
                self.hail,
                ze.z_graupel,
                ze.z_hail,
            );
        }
    }
}
