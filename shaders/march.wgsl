fn pcg(v: u32) -> u32 {
    let state = v * 747796405u + 2891336453u;
    let word = ((state >> ((state >> 28u) + 4u)) ^ state) * 277803737u;
    return (word >> 22u) ^ word;
}

fn jitter(px: vec2<u32>) -> f32 {
    if (P.flags & FLAG_JITTER) == 0u { return 0.0; }
    let h = pcg(px.x ^ pcg(px.y ^ pcg(P.frame_seed)));
    return f32(h >> 8u) * (1.0 / 16777216.0);
}

// The pixel's phase of long steps, 0 to 63 local steps: a step of M local steps (a power of
// two) lands on the lattice points k·n with (k·n + phase) a multiple of M. Without it, a run
// of long steps starts wherever the previous run ended (a cell boundary, the same for
// neighbouring pixels), so neighbouring pixels sampled a thin medium at nearly the same
// sparse points: streaks and a visible outline of the cells, instead of fine noise.
fn step_phase(px: vec2<u32>) -> f32 {
    if (P.flags & FLAG_JITTER) == 0u { return 0.0; }
    return f32(pcg(pcg(px.x ^ pcg(px.y ^ pcg(P.frame_seed)))) & 63u);
}

struct Ray {
    o: vec3<f32>,
    d: vec3<f32>,
}

fn camera_ray(px: vec2<u32>) -> Ray {
    let ndc_x = ((f32(px.x) + 0.5) / f32(P.size.x)) * 2.0 - 1.0;
    let ndc_y = 1.0 - ((f32(px.y) + 0.5) / f32(P.size.y)) * 2.0;
    let h = P.cam_fwd.w;
    let sx = ndc_x * h * P.cam_right.w;
    let sy = ndc_y * h;
    if (P.flags & FLAG_ORTHO) != 0u {
        return Ray(P.cam_pos.xyz + sx * P.cam_right.xyz + sy * P.cam_up.xyz, P.cam_fwd.xyz);
    }
    return Ray(P.cam_pos.xyz, normalize(P.cam_fwd.xyz + sx * P.cam_right.xyz + sy * P.cam_up.xyz));
}

// Sun transmittance at world point `w`: the sun grid (accel.wgsl, cells `ainfo.sun`)
// interpolated between cell centres. A point outside the reference channel's cells looks up where the ray towards the sun
// enters them (outside them there is nothing to cast a shadow), or sees the sun unhindered.
fn sun_transmittance(w: vec3<f32>) -> f32 {
    let r = ainfo.shadow_ref;
    if r >= ATTR_CHANNELS || (P.flags & FLAG_SHADOWS) == 0u || !g_ok[r] { return 1.0; }
    let si = ainfo.sun;
    let size = sun_cell_size(si);
    let dims = vec3<f32>(si.dims);
    // Cell coordinates: cell centres at integers 0..dims-1.
    var u = to_index(r, w) / size - vec3<f32>(si.org) - 0.5;
    let lo = vec3<f32>(-0.5);
    let hi = dims - 0.5;
    if any(u < lo) || any(u > hi) {
        let du = dir_to_index(r, P.light_dir.xyz) / size;
        let e = ray_box(u, safe_inv(du), lo, hi);
        if !(e.x <= e.y) || e.y < 0.0 { return 1.0; }
        u = u + du * max(e.x, 0.0);
    }
    u = clamp(u, vec3<f32>(0.0), dims - 1.0);
    let i0 = vec3<u32>(floor(u));
    let i1 = min(i0 + vec3<u32>(1u), si.dims - vec3<u32>(1u));
    let f = u - floor(u);
    var v: array<f32, 8>;
    for (var n = 0u; n < 8u; n++) {
        let c = select(i0, i1, vec3<bool>((n & 4u) != 0u, (n & 2u) != 0u, (n & 1u) != 0u));
        v[n] = sun_grid[cell_linear(si, c)];
    }
    return trilerp(v, f);
}

fn sky(d: vec3<f32>) -> vec3<f32> {
    let up = clamp(d.z, 0.0, 1.0);
    var c = mix(P.sky_horizon.xyz, P.sky_zenith.xyz, sqrt(up));
    if d.z < 0.0 {
        c = P.sky_horizon.xyz * (1.0 - 0.5 * clamp(-d.z * 4.0, 0.0, 1.0));
    }
    let sun = max(dot(d, P.light_dir.xyz), 0.0);
    c += P.light_color.xyz * (0.04 * pow(sun, 8.0) + 2.0 * pow(sun, 800.0));
    return c;
}

fn grid_line(x: f32, spacing: f32, width: f32) -> f32 {
    let d = abs(fract(x / spacing + 0.5) - 0.5) * spacing;
    return 1.0 - smoothstep(0.5 * width, width, d);
}

// The lit ground at `w` (distance `t` along the ray), with sun visibility `sun_vis`.
fn ground_color(w: vec3<f32>, t: f32, sun_vis: f32) -> vec3<f32> {
    let spacing = P.ground.y;
    // Lines stay about a pixel wide at any distance, and fade into the average far away.
    let width = max(spacing * 0.015, t * P.pixel_angle * 1.5);
    let line = max(grid_line(w.x, spacing, width), grid_line(w.y, spacing, width));
    let fade = clamp(spacing * 0.06 / width, 0.0, 1.0);
    let albedo = P.ground.z * mix(vec3<f32>(0.42, 0.45, 0.36), vec3<f32>(0.75, 0.77, 0.72), line * fade);
    let sun = max(P.light_dir.z, 0.0) * sun_vis;
    let lit = albedo * (P.light_color.xyz * sun + P.sky_zenith.xyz * P.sky_zenith.w);
    // Aerial perspective towards the horizon.
    let haze = 1.0 - exp(-t / (P.ground.y * 40.0));
    return mix(lit, P.sky_horizon.xyz, haze * 0.8);
}

// Strength of the powder darkening (0: none) and the depth, in voxel units (`cam_up.w`: the
// smallest edge of the coarsest grid's voxel), over which it fades.
const POWDER: f32 = 0.7;
const POWDER_VOXELS: f32 = 3.0;

fn phase_hg(cos_t: f32, g: f32) -> f32 {
    // Henyey-Greenstein, scaled so that an isotropic medium gives 1.
    let g2 = g * g;
    let den = 1.0 + g2 - 2.0 * g * cos_t;
    return (1.0 - g2) / (den * sqrt(den));
}

// ---------------------------------------------------------------------------------------
// The march
// ---------------------------------------------------------------------------------------

// How many times finer than the base step `dt` grid `a` must be sampled: the power of two n
// (1 to 64) with 1.5·n at most the ratio of the voxel unit (`cam_up.w`: the smallest edge of
// the coarsest grid's voxel) to this grid's smallest voxel edge (1 / the longest row of its
// world→index matrix: for voxels scaled per axis, the shortest axis). A nested grid 4 times
// finer than the rest gets 4, grids of equal voxels 1. Squared comparisons only, so the CPU
// reference makes the same choice.
//
// Every distance along a ray (t, dt, the steps, skips and cell exits) is in world units and
// every grid is sampled at its index position oi + t·di, through its own map: a step of dt
// absorbs the extinction (per world unit) times dt whatever the voxels' shape or the ray's
// direction, and cells, tiles and bboxes are boxes in index space crossed along t. Nothing
// here assumes cubic voxels; only the sampling density (dt) follows the voxel unit.
fn refinement(a: u32) -> f32 {
    let inv2 = max(max(dot(g_inv0[a], g_inv0[a]), dot(g_inv1[a], g_inv1[a])), dot(g_inv2[a], g_inv2[a]));
    let r2 = P.cam_up.w * P.cam_up.w * inv2;
    var n = 1.0;
    loop {
        if n >= 64.0 || (1.5 * n) * (1.5 * n) > r2 { break; }
        n *= 2.0;
    }
    return n;
}

// Where along the ray grids finer than the base step are sampled: [lo, hi] (from the ray's
// entry into the grid's bbox grown by a voxel, or where its skipped empty cells end, to its
// exit: the march's `skip`, `ta1`) and the grid's refinement; lo = INF for grids that need
// none.
struct Fine {
    lo: array<f32, ATTR_CHANNELS>,
    hi: array<f32, ATTR_CHANNELS>,
    n: array<f32, ATTR_CHANNELS>,
    // How many grids need refinement: with none (grids of equal voxels, the usual case)
    // the per-step searches below are skipped, so such frames march as cheaply as before.
    count: u32,
}

// The step divisor at distance t: the largest refinement of the fine grids spanning t.
fn refine_at(f: ptr<function, Fine>, t: f32) -> f32 {
    var n = 1.0;
    if (*f).count == 0u { return n; }
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        if (*f).lo[a] <= t && t <= (*f).hi[a] { n = max(n, (*f).n[a]); }
    }
    return n;
}

fn render_pixel(px: vec2<u32>) -> vec4<f32> {
    work = 0u;
    let ray = camera_ray(px);
    var oi: array<vec3<f32>, ATTR_CHANNELS>;
    var di: array<vec3<f32>, ATTR_CHANNELS>;
    var inv_di: array<vec3<f32>, ATTR_CHANNELS>;
    var ta0: array<f32, ATTR_CHANNELS>;
    var ta1: array<f32, ATTR_CHANNELS>;
    var skip: array<f32, ATTR_CHANNELS>;
    // How far past its skip point a channel is known to have nothing visible (march below).
    var skip_bound: array<f32, ATTR_CHANNELS>;
    var t_start = INF;
    var t_end = -INF;
    var fine: Fine;
    fine.count = 0u;
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        init_grid(a);
        skip[a] = INF;
        skip_bound[a] = INF;
        ta0[a] = INF;
        ta1[a] = -INF;
        fine.lo[a] = INF;
        fine.hi[a] = -INF;
        fine.n[a] = 1.0;
        if !g_ok[a] || (P.mode == MODE_ISO && a != P.iso_attr) { continue; }
        oi[a] = to_index(a, ray.o);
        di[a] = dir_to_index(a, ray.d);
        inv_di[a] = safe_inv(di[a]);
        // Samples can see active values only inside the index bbox grown by one voxel.
        let r = ray_box(oi[a], inv_di[a], vec3<f32>(g_bmin[a] - vec3<i32>(1)), vec3<f32>(g_bmax[a] + vec3<i32>(1)));
        if r.x <= r.y && r.y >= 0.0 {
            ta0[a] = max(r.x, 0.0);
            ta1[a] = r.y;
            skip[a] = ta0[a];
            skip_bound[a] = ta0[a];
            t_start = min(t_start, ta0[a]);
            t_end = max(t_end, ta1[a]);
            let n = refinement(a);
            if n > 1.0 {
                fine.lo[a] = ta0[a];
                fine.hi[a] = ta1[a];
                fine.n[a] = n;
                fine.count += 1u;
            }
        }
    }
    let accel_on = (P.flags & FLAG_ACCEL) != 0u && P.mode == MODE_SHADED;
    var t_ground = INF;
    if (P.flags & FLAG_GROUND) != 0u && P.mode != MODE_MIP && ray.d.z < 0.0 {
        let tg = (P.ground.x - ray.o.z) / ray.d.z;
        if tg > 0.0 { t_ground = tg; }
    }
    t_end = min(t_end, t_ground);
    // Sort-last: FLAG_COMPOSITE takes the volume's colour from the composite of the regions
    // (below) and marches nothing; FLAG_REGION marches the whole ray as the whole frame's
    // render does (its cells are the whole frame's, so every step lands where that
    // render's does) but samples only where the ray lies in the region.
    let composite = (P.flags & FLAG_COMPOSITE) != 0u;
    let region = (P.flags & FLAG_REGION) != 0u && !composite;
    if composite { t_end = -INF; }

    let dt = P.dt;
    let jit = jitter(px);
    let lattice_phase = step_phase(px);
    let hdda = (P.flags & FLAG_HDDA) != 0u;
    // Samples sit on the lattice t = (k + jitter)·dt, whether stepped or skipped to, so
    // empty-space skipping visits a subset of the fixed-step march's samples. Within a grid
    // n times finer than the base step (a nested grid) the lattice is n times denser: k
    // moves in steps of 1/n there (see `refinement`).
    let n0 = refine_at(&fine, t_start);
    var k = ceil((t_start / dt - jit) * n0) / n0;
    var t = (k + jit) * dt;
    // The last step, in base steps (the isosurface's bisection starts there).
    var last_step = 1.0;

    var T = 1.0;
    var C = vec3<f32>(0.0);
    var mip: array<f32, ATTR_CHANNELS>;
    for (var a = 0u; a < ATTR_CHANNELS; a++) { mip[a] = 0.0; }
    var iso_prev = 0.0;
    var iso_has_prev = false;
    var iso_hit = false;
    let L = P.light_dir.xyz;
    // Sun light per unit of transmittance, per ray: single scattering with the medium's
    // phase function, and two octaves of multiple scattering (Wrenninge's approximation:
    // octave i scatters with eccentricity g/2^i, sees the extinction towards the sun scaled
    // by 1/2^i and carries 1/2^i of the energy), scaled by the multiple-scattering strength.
    let cos_sun = dot(L, ray.d);
    let g_hg = P.light_dir.w;
    let phase = phase_hg(cos_sun, g_hg);
    let ms1 = P.light_color.w * 0.5 * phase_hg(cos_sun, 0.5 * g_hg);
    let ms2 = P.light_color.w * 0.25 * phase_hg(cos_sun, 0.25 * g_hg);
    // Powder: the thin fringes of a cloud scatter less light back towards a viewer with the
    // sun behind them than the dense interior does (in-scattered light builds up with
    // depth), which darkens creases between billows; none when looking towards the sun.
    let powder_w = POWDER * (0.5 - 0.5 * cos_sun);
    let top = max(P.ground.w - P.ground.x, 1e-6);

    // The acceleration cell each channel sampled at this step: where its bound stops holding
    // and the bound (the look-ahead below reads them instead of finding the cell again).
    var cell_cover: array<f32, ATTR_CHANNELS>;
    var cell_m: array<f32, ATTR_CHANNELS>;
    var steps = 0u;
    loop {
        if steps >= P.max_steps || !(t <= t_end) || T < P.t_cutoff || work > P.work_budget { break; }
        steps += 1u;
        var next = INF;
        var sig = 0.0;
        var scat = vec3<f32>(0.0);
        var emit = vec3<f32>(0.0);
        // Largest extinction any sample in the cells around this point can have: the sum of
        // the sampled channels' bounds (their extinctions add up).
        var sig_max = 0.0;
        // Where those bounds stop holding along the ray (`skip_bound`, `cell_bound`), or the
        // sampled media end (a channel's span, the ground, the march's end): a long step
        // running past an end would spread its sample's extinction over the space beyond.
        var bound_end = t_end;
        let owned = !region || in_region(ray.o + t * ray.d);
        for (var a = 0u; a < ATTR_CHANNELS; a++) {
            if t < skip[a] {
                next = min(next, skip[a]);
                bound_end = min(bound_end, skip_bound[a]);
                continue;
            }
            if t > ta1[a] { skip[a] = INF; skip_bound[a] = INF; continue; }
            bound_end = min(bound_end, ta1[a]);
            let p = oi[a] + t * di[a];
            if accel_on {
                let si = ainfo.channels[a];
                let c = (vec3<i32>(floor(p)) >> vec3<u32>(si.shift)) - si.org;
                if si.ok != 0u && all(c >= vec3<i32>(0)) && all(vec3<u32>(c) < si.dims) {
                    let m = accel[a * ACCEL_CELLS + cell_linear(si, vec3<u32>(c))].w;
                    let lo = vec3<f32>((si.org + c) << vec3<u32>(si.shift));
                    let size = f32(1u << si.shift);
                    // The cell's bound `m` holds for every sample whose base voxel lies in
                    // the cell or its 26 neighbours, less their outer voxel layer (a
                    // trilinear sample there reads the cells beyond): up to `cell_bound`.
                    let cell_bound = ray_box(oi[a], inv_di[a], lo - (size - 1.0), lo + (2.0 * size - 1.0)).y;
                    if m <= 0.0 {
                        // Nothing visible up to where the ray leaves this cell: every sample
                        // whose base voxel lies in it reads values the transfer function
                        // makes transparent.
                        let exit = ray_box(oi[a], inv_di[a], lo, lo + size).y - 1e-3 * dt;
                        if exit > t {
                            skip[a] = exit;
                            skip_bound[a] = cell_bound;
                            next = min(next, exit);
                            bound_end = min(bound_end, cell_bound);
                            continue;
                        }
                    }
                    sig_max += m;
                    bound_end = min(bound_end, cell_bound);
                    cell_cover[a] = cell_bound;
                    cell_m[a] = m;
                } else {
                    sig_max = INF;
                }
            }
            if !owned {
                // Another region's sample: it adds nothing here and, with the cells doing
                // the skipping, would not have skipped anything either.
                next = min(next, t);
                continue;
            }
            let s = sample(a, p);
            // In shaded mode with the acceleration grid on, its cells do the skipping (they
            // subsume tiles); tile skipping serves MIP and isosurfaces.
            var skippable = s.constant && hdda && !accel_on;
            if P.mode == MODE_SHADED {
                let e = tf_eval(a, s.value);
                skippable = skippable && e.a == 0.0;
                if e.a > 0.0 {
                    let sa = e.a * P.attrs[a].extinction;
                    sig += sa;
                    if P.attrs[a].kind == KIND_EMISSIVE {
                        emit += sa * e.rgb * P.attrs[a].emission;
                    } else {
                        scat += sa * e.rgb;
                    }
                }
            } else if P.mode == MODE_MIP {
                mip[a] = max(mip[a], norm_value(a, s.value));
            } else {
                // Isosurface: a sign change of (value − iso) between consecutive samples;
                // refined after the loop.
                let v = s.value - P.iso_value;
                if iso_has_prev && v * iso_prev <= 0.0 && v != iso_prev {
                    iso_hit = true;
                    break;
                }
                iso_prev = v;
                iso_has_prev = true;
            }
            if skippable {
                // Stop just short of the exit: a lattice point on the boundary is sampled.
                skip[a] = region_exit(s, oi[a], inv_di[a]) - 1e-3 * dt;
                skip_bound[a] = skip[a];
                next = min(next, skip[a]);
            } else {
                next = min(next, t);
            }
        }
        if iso_hit { break; }
        // A finer grid refines the steps only where it is sampled: from where its empty
        // cells or tiles end (its skip point), not over its whole span.
        for (var a = 0u; a < ATTR_CHANNELS && fine.count > 0u; a++) {
            if fine.n[a] > 1.0 { fine.lo[a] = skip[a]; }
        }
        // Thin media take longer steps: up to as many local steps (dt / n, up to
        // max_step_scale) as keep the optical depth of one step under step_tau at the
        // largest extinction around, rounded down to a power of two M.
        let n = refine_at(&fine, t);
        var mult = 1.0;
        if accel_on && P.max_step_scale > 1u && sig_max < INF {
            let most = clamp(floor(P.step_tau / max(sig_max * (dt / n), 1e-30)), 1.0, f32(P.max_step_scale));
            loop {
                if 2.0 * mult > most { break; }
                mult *= 2.0;
            }
        }
        // The next sample, in base steps: the next local lattice point of this pixel's
        // phase (`step_phase`: at most M local steps on, so that long steps sample a
        // randomly shifted lattice of spacing M), but no further than the first lattice
        // point inside a finer grid's span (its voxels are not stepped over), and on the
        // lattice of where it lands (a coarser one past a nested grid's span).
        var k1 = k + 1.0 / n;
        if mult > 1.0 {
            k1 = ((floor((k * n + lattice_phase) / mult) + 1.0) * mult - lattice_phase) / n;
        }
        // A long step ends no later than the first local lattice point at or past
        // `bound_end`: it never runs into cells whose medium `sig_max` does not bound (a
        // step of 16 base voxels crossed a whole 8-voxel cell and left the near part of a
        // denser cell beyond unsampled).
        //
        // Unless the cells it would run into are thin too: a channel's bound covers the 27
        // cells around the sample (less their outer voxel layer), a few voxels past the
        // sample's cell, so most long steps were cut short there (a sample about every 9
        // voxels where 16 would do) and the step after restarted short, on the next point of
        // the pixel's lattice. So first look where the step would end (k1): for each channel
        // whose bound stops short of it, the cell there, whose 27-cell bound covers the
        // rest of the step if the ray enters that cell's block before leaving the current
        // one. With those bounds added, a step the optical depth allows keeps its length.
        if mult > 1.0 {
            let kb = max(ceil((bound_end / dt - jit) * n) / n, k + 1.0 / n);
            if kb < k1 {
                let t1 = (k1 + jit) * dt;
                var reach = t1 <= t_end;
                var extra = 0.0;
                for (var a = 0u; a < ATTR_CHANNELS && reach; a++) {
                    // Channels behind the ray's point or not on the ray.
                    if ta1[a] < t { continue; }
                    // A step never runs past a channel's span (the media's end).
                    if t1 > ta1[a] { reach = false; break; }
                    let si = ainfo.channels[a];
                    let size = f32(1u << si.shift);
                    // Where this channel's bound stops holding: past its skipped cells, or the
                    // block of the cell sampled here,
                    // and the bound there (in `sig_max`; none where skipped).
                    var cover = skip_bound[a];
                    var m0 = 0.0;
                    if t >= skip[a] {
                        // The cell the loop above sampled: with accel_on and a long step
                        // (mult > 1, so every sampled channel's cell was valid), it set these
                        // for every channel sampled here.
                        cover = cell_cover[a];
                        m0 = cell_m[a];
                    }
                    if cover >= t1 { continue; }
                    let c1 = (vec3<i32>(floor(oi[a] + t1 * di[a])) >> vec3<u32>(si.shift)) - si.org;
                    if si.ok == 0u || any(c1 < vec3<i32>(0)) || any(vec3<u32>(c1) >= si.dims) {
                        reach = false;
                        break;
                    }
                    let lo1 = vec3<f32>((si.org + c1) << vec3<u32>(si.shift));
                    if ray_box(oi[a], inv_di[a], lo1 - (size - 1.0), lo1 + (2.0 * size - 1.0)).x > cover {
                        reach = false;
                        break;
                    }
                    // The channel's bound over the step: the larger of the two.
                    extra += max(accel[a * ACCEL_CELLS + cell_linear(si, vec3<u32>(c1))].w - m0, 0.0);
                }
                let most = floor(P.step_tau / max((sig_max + extra) * (dt / n), 1e-30));
                if !reach || (k1 - k) * n > most { k1 = kb; }
            }
        }
        for (var a = 0u; a < ATTR_CHANNELS && fine.count > 0u; a++) {
            if fine.n[a] > n && fine.lo[a] > t {
                // At least one fine step on, should rounding put the entry at t itself.
                let entry = ceil((fine.lo[a] / dt - jit) * fine.n[a]) / fine.n[a];
                k1 = min(k1, max(entry, k + 1.0 / fine.n[a]));
            }
        }
        let n1 = refine_at(&fine, (k1 + jit) * dt);
        k1 = ceil(k1 * n1) / n1;
        let step = k1 - k;
        if sig > 0.0 {
            let w = ray.o + t * ray.d;
            var src = emit;
            if any(scat > vec3<f32>(0.0)) {
                let ts = sun_transmittance(w);
                let h = clamp((w.z - P.ground.x) / top, 0.0, 1.0);
                let amb = P.sky_zenith.xyz * P.sky_zenith.w * (0.35 + 0.65 * h);
                // Octave i sees the optical depth towards the sun times 1/2^i: ts^(1/2^i).
                let ts1 = sqrt(ts);
                let ts2 = sqrt(ts1);
                let sun = phase * ts + ms1 * ts1 + ms2 * ts2;
                // Optical depth of POWDER_VOXELS voxels of the medium here.
                let powder = 1.0 - powder_w * exp(-sig * P.cam_up.w * POWDER_VOXELS);
                let light = P.light_color.xyz * (sun * powder) + amb;
                src += scat * light;
            }
            let alpha = 1.0 - exp(-sig * dt * step);
            C += T * alpha * (src / sig);
            T *= 1.0 - alpha;
        }
        if next >= INF { break; }
        last_step = step;
        k = k1;
        t = (k + jit) * dt;
        if next > t {
            let nn = refine_at(&fine, next);
            k = max(k, ceil((next / dt - jit) * nn) / nn);
            t = (k + jit) * dt;
        }
    }

    if region { return vec4<f32>(C, 1.0 - T); }
    if composite {
        let v = accel[px.y * P.size.x + px.x];
        C = v.rgb;
        T = 1.0 - v.a;
    }

    if P.mode == MODE_MIP {
        var c = vec3<f32>(0.0);
        var m = 0.0;
        for (var a = 0u; a < ATTR_CHANNELS; a++) {
            if !g_ok[a] { continue; }
            c += tf_u(a, mip[a]).rgb * mip[a];
            m = max(m, mip[a]);
        }
        return vec4<f32>(c, m);
    }

    // A surface behind the medium: the isosurface hit, else the ground. Refine the hit (8
    // bisection steps, then a central-difference gradient) with one sampling loop.
    var surf = false;
    var spos = vec3<f32>(0.0);
    var snrm = vec3<f32>(0.0, 0.0, 1.0);
    var sdist = 0.0;
    var sbase = vec3<f32>(0.0);
    if iso_hit {
        let a = P.iso_attr;
        var lo = t - dt * last_step;
        var hi = t;
        var grad = vec3<f32>(0.0);
        var ph = vec3<f32>(0.0);
        for (var i = 0; i < 14; i++) {
            var q: vec3<f32>;
            if i < 8 {
                q = oi[a] + (0.5 * (lo + hi)) * di[a];
            } else {
                if i == 8 { ph = oi[a] + (0.5 * (lo + hi)) * di[a]; }
                let ax = (i - 8) / 2;
                var e = vec3<f32>(0.0);
                e[ax] = select(-0.5, 0.5, (i & 1) == 0);
                q = ph + e;
            }
            let vm = sample(a, q).value - P.iso_value;
            if i < 8 {
                if vm * iso_prev > 0.0 { lo = 0.5 * (lo + hi); } else { hi = 0.5 * (lo + hi); }
            } else {
                let ax = (i - 8) / 2;
                grad[ax] += select(-vm, vm, (i & 1) == 0);
            }
        }
        let th = 0.5 * (lo + hi);
        // World normal = invMatᵀ · index gradient, facing the side the ray came from.
        let gw = g_inv0[a] * grad.x + g_inv1[a] * grad.y + g_inv2[a] * grad.z;
        if dot(gw, gw) > 0.0 { snrm = normalize(gw) * sign(iso_prev); }
        if dot(snrm, ray.d) > 0.0 { snrm = -snrm; }
        surf = true;
        sdist = th;
        spos = ray.o + th * ray.d;
        sbase = tf_eval(a, P.iso_value).rgb;
    } else if t_ground < INF {
        surf = true;
        sdist = t_ground;
        spos = ray.o + t_ground * ray.d;
    }
    var sun_vis = 1.0;
    if surf && dot(snrm, L) > 0.0 {
        sun_vis = sun_transmittance(spos);
    }
    var back = sky(ray.d);
    if iso_hit {
        let sun = max(dot(snrm, L), 0.0) * sun_vis;
        let hv = normalize(L - ray.d);
        let spec = pow(max(dot(snrm, hv), 0.0), 48.0) * 0.25;
        let amb = P.sky_zenith.xyz * P.sky_zenith.w * (0.6 + 0.4 * snrm.z);
        return vec4<f32>(sbase * (P.light_color.xyz * sun + amb) + P.light_color.xyz * spec * sun, 1.0);
    }
    if surf {
        back = ground_color(spos, sdist, sun_vis);
    }
    if P.mode == MODE_ISO {
        return vec4<f32>(back, 0.0);
    }
    C += T * back;
    return vec4<f32>(C, 1.0 - T);
}

@compute @workgroup_size(8, 8, 1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if gid.x >= P.size.x || gid.y >= P.size.y { return; }
    let r = render_pixel(gid.xy);
    var ldr = r.rgb;
    if P.mode != MODE_MIP {
        ldr = aces(r.rgb * P.sky_horizon.w);
    }
    textureStore(out_hdr, vec2<i32>(gid.xy), r);
    textureStore(out_ldr, vec2<i32>(gid.xy), ldr_texel(ldr));
}
