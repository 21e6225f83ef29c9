//! Leaves: quantization, statistics and the bytes of each leaf.

use super::*;

/// How leaf values are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LeafCodec {
    /// 512 f32.
    Float,
    /// Fixed-width codes of `1 << log2_bits` bits (Fp4, Fp8, Fp16).
    Fixed { log2_bits: u8 },
    /// FpN: per-leaf width, chosen by [`choose_fpn`].
    Variable,
}

impl LeafCodec {
    pub(super) fn of(t: GridType) -> Result<LeafCodec, FormatError> {
        Ok(match t {
            GridType::Float => LeafCodec::Float,
            GridType::Fp4 => LeafCodec::Fixed { log2_bits: 2 },
            GridType::Fp8 => LeafCodec::Fixed { log2_bits: 3 },
            GridType::Fp16 => LeafCodec::Fixed { log2_bits: 4 },
            GridType::FpN => LeafCodec::Variable,
            _ => {
                return Err(FormatError::Unsupported {
                    grid_type: t,
                    detail: "the writer produces Float, Fp4, Fp8, Fp16 and FpN grids",
                });
            }
        })
    }
}

/// A quantized leaf's range and code width.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Quant {
    pub(super) min: f32,
    pub(super) max: f32,
    pub(super) log2_bits: u8,
}

/// x86's float→integer truncation (`cvttss2si`/`cvttsd2si`), which is what NanoVDB's
/// `static_cast<uintN_t>(float)` compiles to: NaN and out-of-range give `i32::MIN`, whose low
/// bits are zero. Rust's saturating `as` would differ for those.
#[inline]
pub(super) fn trunc_i32(x: f64) -> i32 {
    // NaN is outside every range.
    if !(-2147483648.0..2147483648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// Min and max of `values` exactly as NanoVDB's sequential `if (v < min) min = v` finds them
/// (NaN never wins; of equal extrema the first seen, which decides the sign of a zero).
pub(super) fn extrema(values: &[f32]) -> (f32, f32) {
    // Lane-wise extrema vectorize; the only observable difference from the sequential scan,
    // the sign of a zero extremum, is fixed up below.
    let (mut lo, mut hi) = ([f32::MAX; 8], [-f32::MAX; 8]);
    let chunks = values.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for j in 0..8 {
            lo[j] = if c[j] < lo[j] { c[j] } else { lo[j] };
            hi[j] = if c[j] > hi[j] { c[j] } else { hi[j] };
        }
    }
    for (j, &v) in tail.iter().enumerate() {
        lo[j] = if v < lo[j] { v } else { lo[j] };
        hi[j] = if v > hi[j] { v } else { hi[j] };
    }
    let mut min = lo
        .iter()
        .copied()
        .fold(f32::MAX, |a, b| if b < a { b } else { a });
    let mut max = hi
        .iter()
        .copied()
        .fold(-f32::MAX, |a, b| if b > a { b } else { a });
    if min == 0.0 {
        min = *values.iter().find(|&&v| v == 0.0).unwrap_or(&min);
    }
    if max == 0.0 {
        max = *values.iter().find(|&&v| v == 0.0).unwrap_or(&max);
    }
    (min, max)
}

/// Min and max of all 512 values (see [`extrema`]), or the index of a non-finite value.
pub(super) fn value_range(values: &[f32; LEAF_VOXELS]) -> Result<(f32, f32), usize> {
    let mut bad = 0u32;
    for &v in values.iter() {
        bad |= u32::from(v.to_bits() & 0x7f80_0000 == 0x7f80_0000);
    }
    if bad != 0 {
        return Err(values.iter().position(|v| !v.is_finite()).unwrap_or(0));
    }
    Ok(extrema(values))
}

/// Copies the active values of `all` (voxel order) to the front of `out`; returns how many.
pub(super) fn gather_active(
    all: &[f32; LEAF_VOXELS],
    active: &[u64; 8],
    out: &mut [f32; LEAF_VOXELS],
) -> usize {
    let mut n = 0;
    for (w, &word) in active.iter().enumerate() {
        if word == u64::MAX {
            out[n..n + 64].copy_from_slice(&all[w * 64..w * 64 + 64]);
            n += 64;
            continue;
        }
        let mut bits = word;
        while bits != 0 {
            out[n] = all[w * 64 + bits.trailing_zeros() as usize];
            n += 1;
            bits &= bits - 1;
        }
    }
    n
}

pub(super) fn non_finite(brick: u32, leaf: usize, voxel: usize) -> FormatError {
    invalid(
        format!("brick {brick} (leaf {leaf})"),
        u64::from(brick),
        format!("voxel {voxel} is not finite; quantized grids need finite values"),
    )
}

/// NanoVDB's code for `v`: `uintN_t(encode * (v - min) + 0.5)` in f32 (f64 for 16 bits).
/// `exact` selects the x86-faithful conversion, needed only when `encode` is not finite
/// (a leaf whose range is zero or denormal); otherwise every code is within 0..=units.
#[inline(always)]
pub(super) fn code_f32(encode: f32, min: f32, v: f32, exact: bool) -> u32 {
    let x = encode * (v - min) + 0.5f32;
    // In range (0..=units) whenever `encode` is finite, where `as i32` is plain truncation.
    if exact {
        trunc_i32(f64::from(x)) as u32
    } else {
        x as i32 as u32
    }
}

#[inline(always)]
pub(super) fn code_f64(encode: f64, min: f32, v: f32, exact: bool) -> u32 {
    let x = encode * f64::from(v - min) + 0.5;
    if exact {
        trunc_i32(x) as u32
    } else {
        x as i32 as u32
    }
}

/// FpN's bit-width search (`CreateNanoGrid::preProcess<FpN>` with the `AbsDiff` oracle):
/// the smallest of 1, 2, 4, 8 bits whose decoded values are all within `tolerance`, else 16.
pub(super) fn choose_fpn(
    brick: LeafView<'_>,
    tolerance: f32,
    index: u32,
    leaf: usize,
) -> Result<Quant, FormatError> {
    let (min, max) = value_range(brick.values).map_err(|v| non_finite(index, leaf, v))?;
    let range = max - min;
    let mut log2 = 0u8;
    while range > 0.0 && log2 < 4 {
        let mask = (1u32 << (1u32 << log2)) - 1;
        let encode = mask as f32 / range;
        let decode = range / mask as f32;
        let exact = !encode.is_finite();
        let mut fits = true;
        for c in brick.values.chunks_exact(64) {
            let mut ok = true;
            for &v in c {
                let approx = code_f32(encode, min, v, exact) as f32 * decode + min;
                ok &= (v - approx).abs() <= tolerance;
            }
            if !ok {
                fits = false;
                break;
            }
        }
        if fits {
            break;
        }
        log2 += 1;
    }
    Ok(Quant {
        min,
        max,
        log2_bits: log2,
    })
}

/// What a leaf is made of: its origin, its 512 values (inactive ones included, as they are
/// stored) and its active mask; borrowed from a [`LeafBrick`] or from a caller's scratch.
#[derive(Clone, Copy)]
pub(super) struct LeafView<'a> {
    pub(super) origin: Coord,
    pub(super) values: &'a [f32; LEAF_VOXELS],
    pub(super) active: &'a [u64; 8],
}

impl<'a> LeafView<'a> {
    pub(super) fn of(brick: &'a LeafBrick) -> LeafView<'a> {
        LeafView {
            origin: brick.origin,
            values: &brick.values,
            active: &brick.active,
        }
    }
}

/// A leaf whose bytes are written but whose mean and deviation still need the Welford pass.
pub(super) struct Pending {
    /// Decoded active values in index order (the first `n`).
    pub(super) vals: [f32; LEAF_VOXELS],
    pub(super) n: usize,
    pub(super) min: f32,
    pub(super) max: f32,
    /// Quantized leaves: (minimum, quantum) to store the statistics as codes.
    pub(super) codec: Option<(f32, f32)>,
    pub(super) bbox: (Coord, Coord),
}

/// Writes one leaf's bytes into `dst` (exactly the leaf, zeroed) except its mean and
/// deviation; `quant` is the FpN width chosen beforehand (fixed widths derive it here).
pub(super) fn write_leaf_body(
    codec: LeafCodec,
    brick: LeafView<'_>,
    quant: Option<Quant>,
    dst: &mut [u8],
    (index, leaf): (u32, usize),
    p: &mut Pending,
) -> Result<(), FormatError> {
    let active = brick.active;
    for (d, w) in dst[LEAF_OFF_VALUE_MASK as usize..][..64]
        .chunks_exact_mut(8)
        .zip(active)
    {
        d.copy_from_slice(&w.to_le_bytes());
    }
    let (bbox_min, bbox_dif, has_bbox) = leaf_bbox(brick.origin, active);
    put_i32s(dst, LEAF_OFF_BBOX_MIN as usize, &bbox_min);
    dst[LEAF_OFF_BBOX_DIF as usize..][..3].copy_from_slice(&bbox_dif);
    dst[LEAF_OFF_FLAGS as usize] = if has_bbox { 2 } else { 0 };
    p.bbox = if has_bbox {
        (
            bbox_min,
            [0, 1, 2].map(|a| bbox_min[a] + i32::from(bbox_dif[a])),
        )
    } else {
        (NodeStats::EMPTY.min, NodeStats::EMPTY.max)
    };
    match codec {
        LeafCodec::Float => {
            let values = &mut dst[96..96 + 4 * LEAF_VOXELS];
            for (d, v) in values.chunks_exact_mut(4).zip(brick.values.iter()) {
                d.copy_from_slice(&v.to_le_bytes());
            }
            p.codec = None;
            p.n = gather_active(brick.values, active, &mut p.vals);
        }
        LeafCodec::Fixed { .. } | LeafCodec::Variable => {
            let q = match (codec, quant) {
                (LeafCodec::Fixed { log2_bits }, _) => {
                    let (min, max) =
                        value_range(brick.values).map_err(|v| non_finite(index, leaf, v))?;
                    Quant {
                        min,
                        max,
                        log2_bits,
                    }
                }
                // FpN: chosen by `choose_fpn` before the leaf offsets were known.
                (_, q) => q.expect("FpN leaves come with their quantization"),
            };
            if codec == LeafCodec::Variable {
                // FpN keeps log2 of its bit width in the top three flag bits.
                dst[LEAF_OFF_FLAGS as usize] |= q.log2_bits << 5;
            }
            let bits = 1u32 << q.log2_bits;
            let quantum = (q.max - q.min) / ((1u32 << bits) - 1) as f32;
            put_f32(dst, LEAF_FP_OFF_MINIMUM as usize, q.min);
            put_f32(dst, LEAF_FP_OFF_QUANTUM as usize, quantum);
            let mut codes = [0u16; LEAF_VOXELS];
            encode_codes(brick.values, q, &mut codes);
            pack_codes(
                &codes,
                bits,
                &mut dst[LEAF_FP_OFF_CODES as usize..][..64 * bits as usize],
            );
            p.codec = Some((q.min, quantum));
            // Statistics are over the values a reader decodes, as GridStats sees them.
            let mut decoded = [0f32; LEAF_VOXELS];
            for (d, &c) in decoded.iter_mut().zip(codes.iter()) {
                *d = f32::from(c) * quantum + q.min;
            }
            p.n = gather_active(&decoded, active, &mut p.vals);
        }
    }
    (p.min, p.max) = if p.n > 0 {
        extrema(&p.vals[..p.n])
    } else {
        (f32::MAX, -f32::MAX)
    };
    Ok(())
}

/// Leaves written together; their Welford chains run interleaved (see [`welford_lanes`]).
pub(super) const LANES: usize = 8;

/// Welford's running mean and sum of squared deviations (NanoVDB's `Stats::add`, operation
/// for operation) for up to [`LANES`] leaves at once. One leaf's chain is a serial string of
/// f64 divisions; interleaving independent chains lets the divider pipeline them, which makes
/// this several times faster while every lane computes bit for bit what NanoVDB computes.
/// Returns (mean, aux) per leaf.
#[allow(clippy::needless_range_loop)] // lanes are indexed in lockstep across four arrays
pub(super) fn welford_lanes(leaves: &[Pending]) -> [(f64, f64); LANES] {
    debug_assert!(leaves.len() <= LANES);
    let zero = [0f32; LEAF_VOXELS];
    let mut vals = [&zero; LANES];
    let mut n = [0usize; LANES];
    for (k, p) in leaves.iter().enumerate() {
        vals[k] = &p.vals;
        n[k] = p.n;
    }
    let (mut avg, mut aux) = ([0f64; LANES], [0f64; LANES]);
    let longest = n.iter().copied().max().unwrap_or(0);
    for i in 0..longest {
        let count = (i + 1) as f64;
        for k in 0..LANES {
            let v = f64::from(vals[k][i]);
            let delta = v - avg[k];
            let a = avg[k] + delta / count;
            let b = aux[k] + delta * (v - a);
            // Lanes past their last value keep their result.
            let live = i < n[k];
            avg[k] = if live { a } else { avg[k] };
            aux[k] = if live { b } else { aux[k] };
        }
    }
    std::array::from_fn(|k| (avg[k], aux[k]))
}

/// Stores a leaf's statistics (min, max, mean, deviation) and returns its node stats.
pub(super) fn finish_leaf(p: &Pending, (avg, aux): (f64, f64), dst: &mut [u8]) -> NodeStats {
    let stats = Stats {
        n: p.n as u64,
        avg,
        aux,
        min: p.min,
        max: p.max,
    };
    if p.n > 0 {
        match p.codec {
            None => {
                put_f32(dst, 80, stats.min);
                put_f32(dst, 84, stats.max);
                put_f32(dst, 88, stats.avg as f32);
                put_f32(dst, 92, stats.std() as f32);
            }
            Some((min, quantum)) => {
                // LeafFnBase::setMin/Max/Avg/Dev store the statistics as codes of the leaf.
                let qz = |v: f32| trunc_i32(f64::from((v - min) / quantum + 0.5)) as u16;
                let dev = trunc_i32(f64::from(stats.std() as f32 / quantum + 0.5)) as u16;
                let s = LEAF_FP_OFF_STATS as usize;
                dst[s..s + 2].copy_from_slice(&qz(stats.min).to_le_bytes());
                dst[s + 2..s + 4].copy_from_slice(&qz(stats.max).to_le_bytes());
                dst[s + 4..s + 6].copy_from_slice(&qz(stats.avg as f32).to_le_bytes());
                dst[s + 6..s + 8].copy_from_slice(&dev.to_le_bytes());
            }
        }
    }
    NodeStats {
        stats,
        min: p.bbox.0,
        max: p.bbox.1,
    }
}

/// One leaf to write: destination bytes, source brick, FpN width, (brick index, leaf index).
pub(super) type LeafJob<'a, 'b> = (&'a mut [u8], LeafView<'b>, Option<Quant>, (u32, usize));

/// Writes up to [`LANES`] leaves and their statistics into `stats`.
pub(super) fn write_leaf_group<'a, 'b>(
    codec: LeafCodec,
    jobs: impl Iterator<Item = LeafJob<'a, 'b>>,
    stats: &mut [NodeStats],
) -> Result<(), FormatError> {
    let mut pending: [Pending; LANES] = std::array::from_fn(|_| Pending {
        vals: [0.0; LEAF_VOXELS],
        n: 0,
        min: 0.0,
        max: 0.0,
        codec: None,
        bbox: ([0; 3], [0; 3]),
    });
    let mut dsts: [&mut [u8]; LANES] = std::array::from_fn(|_| -> &mut [u8] { &mut [] });
    let mut count = 0;
    for (k, (dst, brick, quant, id)) in jobs.enumerate() {
        write_leaf_body(codec, brick, quant, dst, id, &mut pending[k])?;
        dsts[k] = dst;
        count = k + 1;
    }
    let moments = welford_lanes(&pending[..count]);
    for k in 0..count {
        stats[k] = finish_leaf(&pending[k], moments[k], dsts[k]);
    }
    Ok(())
}

/// Quantizes all 512 values as `CreateNanoGrid::processLeafs` does (no dithering).
pub(super) fn encode_codes(values: &[f32; LEAF_VOXELS], q: Quant, codes: &mut [u16; LEAF_VOXELS]) {
    let min = q.min;
    if q.log2_bits == 4 {
        // 16 bits: f64 arithmetic ("note that double is required!").
        let encode = 65535.0f64 / f64::from(q.max - q.min);
        if encode.is_finite() {
            for (c, &v) in codes.iter_mut().zip(values.iter()) {
                *c = code_f64(encode, min, v, false) as u16;
            }
        } else {
            for (c, &v) in codes.iter_mut().zip(values.iter()) {
                *c = code_f64(encode, min, v, true) as u16;
            }
        }
        return;
    }
    let bits = 1u32 << q.log2_bits;
    let encode = ((1u32 << bits) - 1) as f32 / (q.max - q.min);
    // C++ narrows each code to the leaf's code type (uint8_t) before packing.
    if encode.is_finite() {
        for (c, &v) in codes.iter_mut().zip(values.iter()) {
            *c = u16::from(code_f32(encode, min, v, false) as u8);
        }
    } else {
        for (c, &v) in codes.iter_mut().zip(values.iter()) {
            *c = u16::from(code_f32(encode, min, v, true) as u8);
        }
    }
}

/// Packs codes of `bits` bits little-endian, voxel 0 in the lowest bits of the first byte.
pub(super) fn pack_codes(codes: &[u16; LEAF_VOXELS], bits: u32, out: &mut [u8]) {
    match bits {
        16 => {
            for (d, c) in out.chunks_exact_mut(2).zip(codes.iter()) {
                d.copy_from_slice(&c.to_le_bytes());
            }
        }
        8 => {
            for (d, &c) in out.iter_mut().zip(codes.iter()) {
                *d = c as u8;
            }
        }
        _ => {
            let per = (8 / bits) as usize;
            for (d, chunk) in out.iter_mut().zip(codes.chunks_exact(per)) {
                let mut byte = 0u8;
                for (k, &c) in chunk.iter().enumerate() {
                    // Shifts in u8, as the C++ stores `code << shift | ...` into a byte.
                    byte |= (c as u8) << (k as u32 * bits);
                }
                *d = byte;
            }
        }
    }
}

/// `LeafNode::updateBBox`: min corner and extent of the active voxels, and whether any are.
pub(super) fn leaf_bbox(origin: Coord, active: &[u64; 8]) -> (Coord, [u8; 3], bool) {
    let any = active.iter().fold(0, |a, w| a | w);
    if any == 0 {
        return (origin, [0; 3], false);
    }
    // Word w holds x == w; bit b of a word is y = b >> 3, z = b & 7.
    let xmin = active.iter().position(|&w| w != 0).unwrap() as u32;
    let xmax = 7 - active.iter().rev().position(|&w| w != 0).unwrap() as u32;
    let ymin = any.trailing_zeros() >> 3;
    let ymax = (63 - any.leading_zeros()) >> 3;
    let bytes = any.to_le_bytes().iter().fold(0u8, |a, b| a | b);
    let zmin = bytes.trailing_zeros();
    let zmax = 7 - bytes.leading_zeros();
    let min = [
        origin[0] + xmin as i32,
        origin[1] + ymin as i32,
        origin[2] + zmin as i32,
    ];
    (
        min,
        [
            (xmax - xmin) as u8,
            (ymax - ymin) as u8,
            (zmax - zmin) as u8,
        ],
        true,
    )
}

#[cfg(test)]
mod tests {
    use super::super::tests::Rng;
    use super::*;

    #[test]
    fn interleaved_welford_equals_sequential() {
        let mut rng = Rng(9);
        for lens in [
            [512; 8],
            [0, 3, 512, 77, 5, 511, 510, 0],
            [1, 0, 0, 0, 0, 0, 0, 0],
            [2, 400, 1, 12, 256, 256, 9, 64],
        ] {
            let leaves: Vec<Pending> = lens
                .iter()
                .map(|&n| {
                    let mut p = Pending {
                        vals: [0.0; 512],
                        n,
                        min: 0.0,
                        max: 0.0,
                        codec: None,
                        bbox: ([0; 3], [0; 3]),
                    };
                    for v in p.vals.iter_mut().take(n) {
                        *v = (rng.unit() - 0.5) * 1e3;
                    }
                    p
                })
                .collect();
            for count in 1..=LANES {
                let got = welford_lanes(&leaves[..count]);
                for (k, p) in leaves[..count].iter().enumerate() {
                    let mut s = Stats::EMPTY;
                    p.vals[..p.n].iter().for_each(|&v| s.add(v));
                    assert_eq!(got[k].0.to_bits(), s.avg.to_bits());
                    assert_eq!(got[k].1.to_bits(), s.aux.to_bits());
                }
            }
        }
    }

    #[test]
    fn extrema_match_a_sequential_scan() {
        let sequential = |v: &[f32]| {
            let (mut lo, mut hi) = (f32::MAX, -f32::MAX);
            for &x in v {
                if x < lo {
                    lo = x;
                }
                if x > hi {
                    hi = x;
                }
            }
            (lo.to_bits(), hi.to_bits())
        };
        let mut rng = Rng(11);
        for case in 0..200 {
            let n = 1 + (case * 7) % 512;
            let mut v: Vec<f32> = (0..n).map(|_| (rng.unit() - 0.5) * 4.0).collect();
            if case % 3 == 0 {
                // Zeros of both signs as the extremum: the first one seen must win.
                v.iter_mut().for_each(|x| *x = x.abs());
                let i = rng.below(n as u64) as usize;
                v[i] = if case % 2 == 0 { -0.0 } else { 0.0 };
                let j = rng.below(n as u64) as usize;
                v[j] = if case % 2 == 0 { 0.0 } else { -0.0 };
            }
            if case % 5 == 0 {
                v[0] = f32::NAN;
            }
            let (lo, hi) = extrema(&v);
            assert_eq!((lo.to_bits(), hi.to_bits()), sequential(&v), "case {case}");
        }
    }
}
