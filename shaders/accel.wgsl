// Acceleration and shadow grids, built on the GPU from the bound NanoVDB grids whenever the
// grids, the transfer functions or the light change (src/render/gpu.rs decides when), in
// four passes:
//
// 1. `accel_info` (one thread): per channel, the cell size (2^shift voxels, 8 or more so that
//    the grid fits ACCEL_CELLS cells), the first cell and the cell counts, from the grid's
//    index bbox; the shadow reference channel; and the indirect dispatch sizes of passes 2–4.
// 2. `accel_cells` (a thread per cell): every voxel of the cell, found with the same
//    `lookup` the march uses (one per 8³ block: a leaf, or a tile or the background that
//    covers the block), so values count exactly as the march sees them: minimum and maximum
//    finite value, and the opacity summed over the voxels in whole quanta per 8³ block
//    (`block_quanta`; pass 3 turns it into the mean extinction, opacity × extinction
//    averaged over the voxels). Sort-last (FLAG_REGION) counts only the blocks whose centre
//    lies in the region, so the regions' cells combine exactly (min, max, sum) into these.
// 3. `accel_dilate` (a thread per cell): the cell's mean extinction from its quanta, and the
//    most extinction any trilinear sample can have
//    whose base voxel lies in the cell: the transfer function's largest opacity over the
//    value range of the cell and its 26 neighbours (a trilinear stencil reaches one voxel
//    into the next cell). The march skips cells where this is 0 and takes longer steps where
//    it is small.
// 4. `accel_sun` (a thread per sun cell: the reference channel's cells, split along axes whose
//    voxels are longer than its shortest edge, `sun_cells_over`): sun transmittance at the
//    cell centre, marching the mean-extinction cells of every shadow-casting channel towards
//    the light, one sun cell per step. The march reads it trilinearly instead of casting a
//    shadow ray per sample.
//
// src/render/cpu.rs mirrors these passes; change both together.

// Dispatch sizes written by `accel_info` (a separate bind group: an indirect buffer may not
// be bound for writing in the pass that reads it as dispatch arguments).
@group(1) @binding(0) var<storage, read_write> dispatch_args: array<u32, 12>;

// Cells per workgroup row of the indirect dispatches (the y dimension counts rows).
const ROW: u32 = 32768u;

fn channel_cells(si: ChannelAccel) -> u32 {
    return si.dims.x * si.dims.y * si.dims.z;
}

// The cell grid coordinate of linear cell index `cell` (x fastest).
fn cell_coord(si: ChannelAccel, cell: u32) -> vec3<u32> {
    return vec3<u32>(cell % si.dims.x, (cell / si.dims.x) % si.dims.y, cell / (si.dims.x * si.dims.y));
}

// The cells of a channel over the index box [bmin, bmax]: 2^shift voxels each, the smallest
// shift (at least 3) whose cells fit ACCEL_CELLS; ok = 0 where they cannot.
fn channel_cells_over(bmin: vec3<i32>, bmax: vec3<i32>) -> ChannelAccel {
    // Span in voxels per axis, as f32 so that a corrupt bbox cannot overflow.
    let span = vec3<f32>(bmax) - vec3<f32>(bmin) + 1.0;
    var shift = 3u;
    loop {
        let s = f32(1u << shift);
        let n = floor(vec3<f32>(bmax) / s) - floor(vec3<f32>(bmin) / s) + 1.0;
        if n.x * n.y * n.z <= f32(ACCEL_CELLS) || shift >= 30u { break; }
        shift += 1u;
    }
    let org = bmin >> vec3<u32>(shift);
    let dims = vec3<u32>((bmax >> vec3<u32>(shift)) - org + vec3<i32>(1));
    if dims.x * dims.y * dims.z <= ACCEL_CELLS && all(span > vec3<f32>(0.0)) {
        return ChannelAccel(org, shift, dims, 1u);
    }
    return ChannelAccel(vec3<i32>(0), 3u, vec3<u32>(0u), 0u);
}

// The sun cells over the cells `si` of reference channel `r` (common.wgsl's `AccelInfo.sun`):
// along an axis whose voxel edge is 2^f times the grid's smallest (f rounded down), 2^f
// times fewer voxels than si's (down to 1); coarser again on every axis, up to si's, until
// they fit ACCEL_CELLS. Cubic voxels get si's cells.
fn sun_cells_over(r: u32, si: ChannelAccel) -> ChannelAccel {
    // World length of one index step along each axis: the index→world matrix's columns.
    let e = vec3<f32>(
        length(vec3<f32>(g_mat0[r].x, g_mat1[r].x, g_mat2[r].x)),
        length(vec3<f32>(g_mat0[r].y, g_mat1[r].y, g_mat2[r].y)),
        length(vec3<f32>(g_mat0[r].z, g_mat1[r].z, g_mat2[r].z)));
    let emin = max(min(e.x, min(e.y, e.z)), 1e-30);
    let top = vec3<u32>(si.shift);
    let finer = vec3<u32>(clamp(floor(log2(e / emin)), vec3<f32>(0.0), vec3<f32>(top)));
    var s = top - finer;
    let bmin = si.org << top;
    let bmax = ((si.org + vec3<i32>(si.dims)) << top) - vec3<i32>(1);
    var org = bmin >> s;
    var dims = vec3<u32>((bmax >> s) - org + vec3<i32>(1));
    for (var i = 0u; i < 32u; i++) {
        let n = vec3<f32>(dims);
        if n.x * n.y * n.z <= f32(ACCEL_CELLS) || all(s >= top) { break; }
        s = min(s + vec3<u32>(1u), top);
        org = bmin >> s;
        dims = vec3<u32>((bmax >> s) - org + vec3<i32>(1));
    }
    return ChannelAccel(org, s.x | (s.y << 8u) | (s.z << 16u), dims, si.ok);
}

@compute @workgroup_size(1, 1, 1)
fn accel_info() {
    var most = 0u;
    var channels_used = 0u;
    ainfo.shadow_ref = MAX_ATTRS;
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        init_grid(a);
        var si = ChannelAccel(vec3<i32>(0), 3u, vec3<u32>(0u), 0u);
        // Acceleration and shadows serve the shaded mode (MIP and isosurfaces skip tiles
        // only); the march uses the cells for skipping only with FLAG_ACCEL.
        if g_ok[a] && P.mode == MODE_SHADED {
            si = channel_cells_over(g_bmin[a], g_bmax[a]);
            if si.ok != 0u {
                channels_used = a + 1u;
                if ainfo.shadow_ref == MAX_ATTRS && P.attrs[a].shadow != 0u && (P.flags & FLAG_SHADOWS) != 0u {
                    ainfo.shadow_ref = a;
                }
            }
        }
        ainfo.channels[a] = si;
    }
    // The sun grid lives on the reference channel's cells: widen them to every channel's box (in
    // the reference's index space), so that a grid reaching beyond the reference's (a
    // nested funnel below the cloud's lowest voxel) has sun transmittance where it is.
    let sr = ainfo.shadow_ref;
    if sr < MAX_ATTRS {
        var lo = vec3<f32>(g_bmin[sr]);
        var hi = vec3<f32>(g_bmax[sr]);
        for (var b = 0u; b < ATTR_CHANNELS; b++) {
            if b == sr || ainfo.channels[b].ok == 0u { continue; }
            for (var n = 0u; n < 8u; n++) {
                let c = select(g_bmin[b], g_bmax[b], vec3<bool>((n & 4u) != 0u, (n & 2u) != 0u, (n & 1u) != 0u));
                let q = to_index(sr, to_world(b, vec3<f32>(c)));
                lo = min(lo, floor(q));
                hi = max(hi, ceil(q));
            }
        }
        let lim = vec3<f32>(1.0e9);
        if all(abs(lo) < lim) && all(abs(hi) < lim) {
            let wide = channel_cells_over(vec3<i32>(lo), vec3<i32>(hi));
            if wide.ok != 0u { ainfo.channels[sr] = wide; }
        }
        ainfo.sun = sun_cells_over(sr, ainfo.channels[sr]);
    } else {
        ainfo.sun = ChannelAccel(vec3<i32>(0), 0u, vec3<u32>(0u), 0u);
    }
    for (var a = 0u; a < ATTR_CHANNELS; a++) {
        let si = ainfo.channels[a];
        if si.ok != 0u { most = max(most, si.dims.x * si.dims.y * si.dims.z); }
    }
    // Passes 2 and 3: 64 cells per workgroup, z = channel (up to the last channel with a grid).
    let g = (most + 63u) / 64u;
    dispatch_args[0] = min(g, ROW);
    dispatch_args[1] = (g + ROW - 1u) / ROW;
    dispatch_args[2] = channels_used;
    dispatch_args[3] = dispatch_args[0];
    dispatch_args[4] = dispatch_args[1];
    dispatch_args[5] = channels_used;
    // Pass 4: 64 cells of the reference channel per workgroup.
    var r = 0u;
    if ainfo.shadow_ref < MAX_ATTRS { r = (channel_cells(ainfo.sun) + 63u) / 64u; }
    dispatch_args[6] = min(r, ROW);
    dispatch_args[7] = (r + ROW - 1u) / ROW;
    dispatch_args[8] = 1u;
    for (var i = 0u; i < 9u; i += 3u) {
        // A dispatch with a zero dimension must still be valid: an empty grid of 1 × 0 × 1.
        if dispatch_args[i] == 0u { dispatch_args[i + 1u] = 0u; }
    }
}

// Cells larger than 2^SCAN_SHIFT_MAX (generated: 64³) voxels, in grids whose bbox is huge,
// are not scanned voxel by voxel: their range is unknown (−∞..∞: never skipped) and they cast
// no shadow.
@compute @workgroup_size(64, 1, 1)
fn accel_cells(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let a = wg.z;
    let si = ainfo.channels[a];
    let cell = (wg.x + wg.y * ROW) * 64u + li;
    if si.ok == 0u || cell >= channel_cells(si) { return; }
    init_grid(a);
    let c = cell_coord(si, cell);
    var lo = INF;
    var hi = -INF;
    var sum = 0.0;
    if si.shift > SCAN_SHIFT_MAX {
        lo = -INF;
        hi = INF;
    } else {
        let base = (si.org + vec3<i32>(c)) << vec3<u32>(si.shift);
        let per_axis = 1u << (si.shift - 3u);
        let blocks = per_axis * per_axis * per_axis;
        let quanta = block_quanta(si.shift);
        let region = (P.flags & FLAG_REGION) != 0u;
        for (var b = 0u; b < blocks; b++) {
            work = 0u;
            let bo = base + 8 * vec3<i32>(vec3<u32>(b / (per_axis * per_axis), (b / per_axis) % per_axis, b % per_axis));
            // Sort-last: a block counts in the region its centre lies in, and only there (a
            // halo's voxels would count twice).
            if region && !in_region(to_world(a, vec3<f32>(bo) + 3.5)) { continue; }
            // The aligned 8³ block is one leaf, or lies inside one tile (or the background).
            let l = lookup(a, bo);
            if l.level > 0u {
                if finite(l.value) {
                    lo = min(lo, l.value);
                    hi = max(hi, l.value);
                    sum += floor(tf_eval(a, l.value).a * 512.0 * quanta + 0.5);
                }
                continue;
            }
            let r = scan_leaf(a, c_leaf[a]);
            lo = min(lo, r.x);
            hi = max(hi, r.y);
            sum += floor(r.z * quanta + 0.5);
        }
    }
    // The opacity sum in whole quanta: `accel_dilate` turns it into the mean extinction.
    accel[a * ACCEL_CELLS + cell] = vec4<f32>(lo, hi, sum, 0.0);
}

// Quanta per unit of opacity in one 8³ block's sum, for cells of 2^shift voxels: each block's
// sum is rounded to whole quanta, so a cell's sum is a whole number below 2^23 (512 voxels ×
// (2^(shift−3))³ blocks × this) that f32 adds exactly in any order. Sort-last adds the
// regions' sums of one cell (`Renderer::sun_extinction`) and gets the one-rank sum exactly.
fn block_quanta(shift: u32) -> f32 {
    return f32(1u << (14u - 3u * (min(shift, SCAN_SHIFT_MAX) - 3u)));
}

// Minimum and maximum finite value of a leaf's 512 voxels, and the sum of their opacities
// under attribute `a`'s transfer function, in voxel order. The same values, in the same
// order and with the same arithmetic, as `leaf_value` for n = 0..511, but the per-leaf part
// of the decoding (type, code width, quantum, minimum) is read once, and each word once for
// all the codes it holds: the scan reads every voxel of every new frame, on the CPU on a
// software adapter.
fn scan_leaf(a: u32, leaf: u32) -> vec3<f32> {
    let t = g_type[a];
    var lo = INF;
    var hi = -INF;
    var sum = 0.0;
    if t == GRID_TYPE_FLOAT {
        let first = leaf + (LEAF_FLOAT_OFF_TABLE >> 2u);
        for (var n = 0u; n < 512u; n++) {
            let v = bitcast<f32>(ld(a, first + n));
            if finite(v) {
                lo = min(lo, v);
                hi = max(hi, v);
                sum += tf_eval(a, v).a;
            }
        }
        return vec3<f32>(lo, hi, sum);
    }
    var bits = 16u;
    var base = LEAF_HALF_OFF_TABLE;
    var quantum = 0.0;
    var minimum = 0.0;
    if t != GRID_TYPE_HALF {
        base = LEAF_FP_OFF_CODES;
        if t == GRID_TYPE_FP4 { bits = 4u; }
        if t == GRID_TYPE_FP8 { bits = 8u; }
        if t == GRID_TYPE_FPN { bits = 1u << min(fld_u8(a, leaf, LEAF_OFF_FLAGS) >> 5u, 4u); }
        quantum = fld_f(a, leaf, LEAF_FP_OFF_QUANTUM);
        minimum = fld_f(a, leaf, LEAF_FP_OFF_MINIMUM);
    }
    let per_word = 32u / bits;
    let mask = (1u << bits) - 1u;
    let first = leaf + (base >> 2u);
    for (var w = 0u; w < 512u / per_word; w++) {
        let word = ld(a, first + w);
        for (var k = 0u; k < per_word; k++) {
            let code = (word >> (k * bits)) & mask;
            var v: f32;
            if t == GRID_TYPE_HALF {
                v = unpack2x16float(code).x;
            } else {
                v = f32(code) * quantum + minimum;
            }
            if finite(v) {
                lo = min(lo, v);
                hi = max(hi, v);
                sum += tf_eval(a, v).a;
            }
        }
    }
    return vec3<f32>(lo, hi, sum);
}

// The largest opacity of attribute `a`'s transfer function over values [lo, hi] (the
// table is piecewise linear, so its endpoints and the entries between them bound it).
fn tf_max_alpha(a: u32, lo: f32, hi: f32) -> f32 {
    if !(lo <= hi) { return 0.0; }
    let u0 = norm_value(a, lo);
    let u1 = norm_value(a, hi);
    var m = max(tf_u(a, u0).a, tf_u(a, u1).a);
    let i0 = u32(ceil(u0 * f32(TF_SIZE - 1u)));
    let i1 = min(u32(floor(u1 * f32(TF_SIZE - 1u))), TF_SIZE - 1u);
    let row = P.attrs[a].tf_row * TF_SIZE;
    for (var i = i0; i <= i1; i++) {
        m = max(m, tf[row + i].a);
    }
    return m;
}

@compute @workgroup_size(64, 1, 1)
fn accel_dilate(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let a = wg.z;
    let si = ainfo.channels[a];
    let cell = (wg.x + wg.y * ROW) * 64u + li;
    if si.ok == 0u || cell >= channel_cells(si) { return; }
    let c = vec3<i32>(cell_coord(si, cell));
    var lo = INF;
    var hi = -INF;
    for (var n = 0; n < 27; n++) {
        let q = c + vec3<i32>(n / 9 - 1, (n / 3) % 3 - 1, n % 3 - 1);
        if any(q < vec3<i32>(0)) || any(vec3<u32>(q) >= si.dims) { continue; }
        let m = accel[a * ACCEL_CELLS + cell_linear(si, vec3<u32>(q))];
        lo = min(lo, m.x);
        hi = max(hi, m.y);
    }
    accel[a * ACCEL_CELLS + cell].w = tf_max_alpha(a, lo, hi) * P.attrs[a].extinction;
    // The cell's opacity sum in quanta (`accel_cells`) → mean extinction: the sum over the
    // cell's 2^(3·shift) voxels of opacity × 2^(23 − 3·shift) quanta (`block_quanta`), so a
    // mean is the sum times 2^−23. Other threads read only the range (x, y) of this cell.
    if si.shift <= SCAN_SHIFT_MAX {
        let sum = accel[a * ACCEL_CELLS + cell].z;
        accel[a * ACCEL_CELLS + cell].z = sum * (1.0 / 8388608.0) * P.attrs[a].extinction;
    }
}

// Mean extinction of the cell of channel `b` that world point `q` lies in; 0 outside.
fn mean_extinction(b: u32, q: vec3<f32>) -> f32 {
    let si = ainfo.channels[b];
    let p = floor(to_index(b, q));
    if any(abs(p) > vec3<f32>(2.0e9)) { return 0.0; }
    let c = (vec3<i32>(p) >> vec3<u32>(si.shift)) - si.org;
    if any(c < vec3<i32>(0)) || any(vec3<u32>(c) >= si.dims) { return 0.0; }
    return accel[b * ACCEL_CELLS + cell_linear(si, vec3<u32>(c))].z;
}

// Whether the march can read the sun grid at cell `c` of the reference channel: cells on the
// faces of the grid (surfaces outside it look up where their sun ray enters), and cells
// where some scattering channel can be visible (its cell's dilated extinction bound is above
// 0: a lit sample's trilinear lookup reads only such cells). Others keep 1, unread.
fn sun_needed(si: ChannelAccel, c: vec3<u32>, w: vec3<f32>) -> bool {
    if any(c == vec3<u32>(0u)) || any(c + vec3<u32>(1u) == si.dims) { return true; }
    for (var b = 0u; b < ATTR_CHANNELS; b++) {
        let sb = ainfo.channels[b];
        if sb.ok == 0u || P.attrs[b].kind != KIND_SCATTER { continue; }
        let p = floor(to_index(b, w));
        if any(abs(p) > vec3<f32>(2.0e9)) { continue; }
        let cb = (vec3<i32>(p) >> vec3<u32>(sb.shift)) - sb.org;
        if any(cb < vec3<i32>(0)) || any(vec3<u32>(cb) >= sb.dims) { continue; }
        if accel[b * ACCEL_CELLS + cell_linear(sb, vec3<u32>(cb))].w > 0.0 { return true; }
    }
    return false;
}

@compute @workgroup_size(64, 1, 1)
fn accel_sun(@builtin(workgroup_id) wg: vec3<u32>, @builtin(local_invocation_index) li: u32) {
    let r = ainfo.shadow_ref;
    if r >= MAX_ATTRS { return; }
    let si = ainfo.sun;
    let cell = (wg.x + wg.y * ROW) * 64u + li;
    if cell >= channel_cells(si) { return; }
    for (var a = 0u; a < ATTR_CHANNELS; a++) { init_grid(a); }
    let c = cell_coord(si, cell);
    let size = sun_cell_size(si);
    // Centre of the cell: the sample positions whose base voxel lies in it span
    // [(org + c)·s, (org + c + 1)·s) in index space.
    let w0 = to_world(r, (vec3<f32>(si.org + vec3<i32>(c)) + 0.5) * size);
    if !sun_needed(si, c, w0) {
        sun_grid[cell] = 1.0;
        return;
    }
    let L = P.light_dir.xyz;
    // One sun cell per step (the span of one cell's size in sun-cell units), in world units.
    let h = 1.0 / max(length(dir_to_index(r, L) / size), 1e-30);
    var tau = 0.0;
    for (var k = 0u; k < P.shadow_steps; k++) {
        let q = w0 + L * ((f32(k) + 0.5) * h);
        var inside = false;
        for (var b = 0u; b < ATTR_CHANNELS; b++) {
            let sb = ainfo.channels[b];
            if sb.ok == 0u || P.attrs[b].shadow == 0u { continue; }
            let p = to_index(b, q);
            let lo = vec3<f32>(sb.org << vec3<u32>(sb.shift));
            let hi = lo + vec3<f32>(sb.dims) * f32(1u << sb.shift);
            if all(p >= lo) && all(p < hi) {
                inside = true;
                tau += mean_extinction(b, q) * h;
            }
        }
        if !inside || tau > P.shadow_tau_max { break; }
    }
    sun_grid[cell] = exp(-tau);
}
