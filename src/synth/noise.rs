//! Deterministic, seeded, periodic noise baked into a small tile and sampled trilinearly.
//!
//! Evaluating gradient noise per voxel (hashing eight lattice corners per octave) costs
//! tens of nanoseconds per octave. Instead the generator bakes three octaves of periodic
//! Perlin gradient noise once into a 64³ `f32` tile (1 MiB, which stays in a core's L2 cache)
//! and samples it with one trilinear lookup: eight loads and seven lerps per sample. Two
//! samples at unrelated scales give six octaves of detail without visible repetition.

use rayon::prelude::*;

/// Samples along one edge of the tile (a power of two, so wrapping is a mask).
pub const TILE: usize = 64;
const MASK: i32 = TILE as i32 - 1;
/// Added to coordinates before truncation so that `as i32` rounds down for every coordinate
/// the model produces (|c| stays well below this), keeping `floor` (a libm call on baseline
/// x86-64) out of the inner loop. A multiple of the tile size, so it does not shift the pattern.
const BIAS: f32 = 8192.0;

/// A periodic 64³ tile of fractal gradient noise with values in [-1, 1].
pub struct NoiseTile {
    // A fixed-size array: the masked indices provably stay below its length, so the
    // eight loads of a sample carry no bounds checks.
    data: Box<[f32; TILE * TILE * TILE]>,
    /// The same values with each z row padded to [`ROW`] floats, the padding repeating
    /// the row's start: a row read from any z cell onwards, up to nine floats, needs no
    /// wrap. [`NoiseTile::sample8`]'s AVX2 path reads only this copy; empty without AVX2.
    rows: Vec<f32>,
    /// Whether the CPU has AVX2, for [`NoiseTile::sample8`]'s vector loads.
    avx2: bool,
}

/// Floats per z row of [`NoiseTile`]'s padded copy: the tile's 64 and the first eight again,
/// so that the nine values from any z cell onwards (an eight-lane load and the one after
/// it) lie in one row.
const ROW: usize = TILE + 8;

/// SplitMix64 finaliser: a good 64-bit mix, used to derive every random number from the seed.
#[inline]
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in [0, 1) derived from `seed` and `key`.
pub fn unit(seed: u64, key: u64) -> f64 {
    (mix64(seed ^ mix64(key)) >> 11) as f64 / (1u64 << 53) as f64
}

impl NoiseTile {
    /// Bakes the tile for `seed`: octaves with 4, 8 and 16 lattice cells per period and
    /// amplitudes 1, 1/2, 1/4, then normalised to zero mean and a peak magnitude of 1.
    pub fn new(seed: u64) -> NoiseTile {
        // One unit gradient per lattice point of each octave, periodic over its cells.
        let octaves: Vec<(usize, f64, Vec<[f64; 3]>)> = [(4usize, 1.0f64), (8, 0.5), (16, 0.25)]
            .into_iter()
            .enumerate()
            .map(|(octave, (cells, amp))| {
                let grads = (0..cells * cells * cells)
                    .map(|i| {
                        let key = (octave as u64) << 32 | i as u64;
                        // Uniform direction on the sphere from two uniforms.
                        let u = unit(seed, key * 2) * 2.0 - 1.0;
                        let phi = unit(seed, key * 2 + 1) * std::f64::consts::TAU;
                        let s = (1.0 - u * u).sqrt();
                        [s * phi.cos(), s * phi.sin(), u]
                    })
                    .collect();
                (cells, amp, grads)
            })
            .collect();
        // Slabs of constant x in parallel (each value sums its octaves in the same order
        // whatever the thread count): the picker bakes a tile for every resolution it
        // tries, and a serial bake was a visible pause on many cores.
        let mut acc = vec![0f64; TILE * TILE * TILE];
        acc.par_chunks_mut(TILE * TILE)
            .enumerate()
            .for_each(|(x, slab)| {
                for (cells, amp, grads) in &octaves {
                    let (cells, amp) = (*cells, *amp);
                    let g = |i: usize, j: usize, k: usize| {
                        grads[((i % cells) * cells + (j % cells)) * cells + (k % cells)]
                    };
                    let step = cells as f64 / TILE as f64;
                    for y in 0..TILE {
                        for z in 0..TILE {
                            let p = [x as f64 * step, y as f64 * step, z as f64 * step];
                            let c = p.map(|v| v.floor() as usize);
                            let f = [p[0] - c[0] as f64, p[1] - c[1] as f64, p[2] - c[2] as f64];
                            let w = f.map(|t| t * t * t * (t * (t * 6.0 - 15.0) + 10.0));
                            let mut v = 0.0;
                            for corner in 0..8 {
                                let (dx, dy, dz) = (corner >> 2 & 1, corner >> 1 & 1, corner & 1);
                                let gr = g(c[0] + dx, c[1] + dy, c[2] + dz);
                                let d = [f[0] - dx as f64, f[1] - dy as f64, f[2] - dz as f64];
                                let dot = gr[0] * d[0] + gr[1] * d[1] + gr[2] * d[2];
                                let wx = if dx == 1 { w[0] } else { 1.0 - w[0] };
                                let wy = if dy == 1 { w[1] } else { 1.0 - w[1] };
                                let wz = if dz == 1 { w[2] } else { 1.0 - w[2] };
                                v += dot * wx * wy * wz;
                            }
                            slab[y * TILE + z] += amp * v;
                        }
                    }
                }
            });
        let mean = acc.iter().sum::<f64>() / acc.len() as f64;
        let peak = acc.iter().fold(0f64, |m, v| m.max((v - mean).abs()));
        let mut data = Box::new([0f32; TILE * TILE * TILE]);
        for (d, v) in data.iter_mut().zip(&acc) {
            *d = ((v - mean) / peak) as f32;
        }
        let avx2 = has_avx2();
        let rows = if avx2 { padded_rows(&data) } else { Vec::new() };
        NoiseTile { data, rows, avx2 }
    }

    /// Trilinear sample at tile coordinate (x, y, z); one unit is one tile sample, so the
    /// pattern repeats every [`TILE`] units and its finest detail spans about four units.
    #[inline(always)]
    pub fn sample(&self, x: f32, y: f32, z: f32) -> f32 {
        let (x, y, z) = (x + BIAS, y + BIAS, z + BIAS);
        let (xi, yi, zi) = (x as i32, y as i32, z as i32);
        let (fx, fy, fz) = (x - xi as f32, y - yi as f32, z - zi as f32);
        let x0 = ((xi & MASK) as usize) << 12;
        let x1 = (((xi + 1) & MASK) as usize) << 12;
        let y0 = ((yi & MASK) as usize) << 6;
        let y1 = (((yi + 1) & MASK) as usize) << 6;
        let z0 = (zi & MASK) as usize;
        let z1 = ((zi + 1) & MASK) as usize;
        let d = &self.data;
        let c00 = lerp(d[x0 | y0 | z0], d[x0 | y0 | z1], fz);
        let c01 = lerp(d[x0 | y1 | z0], d[x0 | y1 | z1], fz);
        let c10 = lerp(d[x1 | y0 | z0], d[x1 | y0 | z1], fz);
        let c11 = lerp(d[x1 | y1 | z0], d[x1 | y1 | z1], fz);
        lerp(lerp(c00, c01, fy), lerp(c10, c11, fy), fx)
    }

    /// Two-scale fractal sum: the tile at coordinate `p` plus, at 0.4 of the amplitude, the
    /// tile at a rotated and 4.7× finer coordinate. The rotation and the non-integer ratio
    /// keep the two lattices from lining up. Range about [-1.4, 1.4].
    #[inline(always)]
    pub fn fbm(&self, x: f32, y: f32, z: f32) -> f32 {
        let coarse = self.sample(x, y, z);
        // A fixed rotation (unit-ish quaternion matrix, rows orthonormal to 1e-3).
        let (u, v, w) = (
            4.7 * (0.36 * x + 0.48 * y - 0.80 * z),
            4.7 * (-0.80 * x + 0.60 * y + 0.00 * z),
            4.7 * (0.48 * x + 0.64 * y + 0.60 * z),
        );
        coarse + 0.4 * self.sample(u + 17.3, v + 5.1, w + 29.7)
    }
}

/// Samples per batch of [`NoiseTile::sample8`] and [`NoiseTile::fbm8`]: the eight voxels of
/// a brick's column.
pub const LANES: usize = 8;

impl NoiseTile {
    /// [`NoiseTile::sample`] at eight points, bit for bit. The index arithmetic and the
    /// interpolation run as loops over the eight lanes, which the compiler turns into
    /// vector instructions; with AVX2 the corner values come from vector loads too
    /// ([`NoiseTile::sample8_avx2`]), else from 64 scalar loads. A column of a brick samples
    /// each feature's noise this way.
    #[inline(always)]
    pub fn sample8(&self, x: &[f32; LANES], y: &[f32; LANES], z: &[f32; LANES]) -> [f32; LANES] {
        #[cfg(target_arch = "x86_64")]
        if self.avx2 {
            // SAFETY: `self.avx2` says the CPU supports AVX2.
            return unsafe { self.sample8_avx2(x, y, z) };
        }
        let mut f = [[0f32; LANES]; 3];
        // Offsets of the lower and upper lattice planes along x, y and z.
        let mut lo = [[0u32; LANES]; 3];
        let mut hi = [[0u32; LANES]; 3];
        for l in 0..LANES {
            let c = [x[l] + BIAS, y[l] + BIAS, z[l] + BIAS];
            for a in 0..3 {
                let i = c[a] as i32;
                f[a][l] = c[a] - i as f32;
                let shift = 12 - 6 * a as u32;
                lo[a][l] = ((i & MASK) as u32) << shift;
                hi[a][l] = (((i + 1) & MASK) as u32) << shift;
            }
        }
        // The eight corners, corner index bit 2 = x, bit 1 = y, bit 0 = z.
        let d = &self.data;
        let mut v = [[0f32; LANES]; 8];
        const ALL: usize = TILE * TILE * TILE - 1;
        for l in 0..LANES {
            for (corner, vc) in v.iter_mut().enumerate() {
                let xo = if corner & 4 != 0 { hi[0][l] } else { lo[0][l] };
                let yo = if corner & 2 != 0 { hi[1][l] } else { lo[1][l] };
                let zo = if corner & 1 != 0 { hi[2][l] } else { lo[2][l] };
                // The mask changes nothing (the offsets are in range) but lets the
                // compiler drop the bounds check.
                vc[l] = d[(xo | yo | zo) as usize & ALL];
            }
        }
        interpolate8(&v, &f)
    }

    /// [`NoiseTile::sample8`] with AVX2, from the padded rows, in vector registers
    /// throughout: every lane's two z neighbours are adjacent floats, so each of its four
    /// (x, y) corners is one 8-byte load, and eight of those make two vectors (the lanes'
    /// lower and upper z values) with two shuffles. Where the eight lanes share their x and
    /// y lattice cells (most coarse samples of a column: the lanes differ only in z) two
    /// 8-float loads and two permutes per (x, y) corner fetch them instead. Same values,
    /// same interpolation: same bits. (The truncation is `cvttps2dq`, which equals `as i32`
    /// for every biased coordinate below 2^31, NaN included after the mask: see `BIAS`.)
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    #[inline]
    unsafe fn sample8_avx2(
        &self,
        x: &[f32; LANES],
        y: &[f32; LANES],
        z: &[f32; LANES],
    ) -> [f32; LANES] {
        use std::arch::x86_64::*;
        debug_assert_eq!(self.rows.len(), TILE * TILE * ROW);
        let base = self.rows.as_ptr();
        let bias = _mm256_set1_ps(BIAS);
        let mask = _mm256_set1_epi32(MASK);
        let one = _mm256_set1_epi32(1);
        // SAFETY: each input is 8 floats, read unaligned.
        let (cx, cy, cz) = unsafe {
            (
                _mm256_add_ps(_mm256_loadu_ps(x.as_ptr()), bias),
                _mm256_add_ps(_mm256_loadu_ps(y.as_ptr()), bias),
                _mm256_add_ps(_mm256_loadu_ps(z.as_ptr()), bias),
            )
        };
        let (ix, iy, iz) = (
            _mm256_cvttps_epi32(cx),
            _mm256_cvttps_epi32(cy),
            _mm256_cvttps_epi32(cz),
        );
        let fx = _mm256_sub_ps(cx, _mm256_cvtepi32_ps(ix));
        let fy = _mm256_sub_ps(cy, _mm256_cvtepi32_ps(iy));
        let fz = _mm256_sub_ps(cz, _mm256_cvtepi32_ps(iz));
        // Offsets of the lower and upper x planes and y rows, and the z cells.
        let plane = _mm256_set1_epi32((TILE * ROW) as i32);
        let row = _mm256_set1_epi32(ROW as i32);
        let xo = [
            _mm256_mullo_epi32(_mm256_and_si256(ix, mask), plane),
            _mm256_mullo_epi32(_mm256_and_si256(_mm256_add_epi32(ix, one), mask), plane),
        ];
        let yo = [
            _mm256_mullo_epi32(_mm256_and_si256(iy, mask), row),
            _mm256_mullo_epi32(_mm256_and_si256(_mm256_add_epi32(iy, one), mask), row),
        ];
        let zc = _mm256_and_si256(iz, mask);
        // Lane 0's (x, y) row: an x plane is wider than all y rows of it, so equal row
        // offsets mean equal x and y cells.
        let row00 = _mm256_add_epi32(xo[0], yo[0]);
        let lane0 = _mm256_permutevar8x32_epi32(row00, _mm256_setzero_si256());
        let same_xy = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(row00, lane0)));
        let hmin = |v: __m256i| {
            let m = _mm256_min_epu32(v, _mm256_permute2x128_si256::<1>(v, v));
            let m = _mm256_min_epu32(m, _mm256_shuffle_epi32::<0b01_00_11_10>(m));
            _mm256_cvtsi256_si32(_mm256_min_epu32(
                m,
                _mm256_shuffle_epi32::<0b10_11_00_01>(m),
            ))
        };
        let hmax = |v: __m256i| {
            let m = _mm256_max_epu32(v, _mm256_permute2x128_si256::<1>(v, v));
            let m = _mm256_max_epu32(m, _mm256_shuffle_epi32::<0b01_00_11_10>(m));
            _mm256_cvtsi256_si32(_mm256_max_epu32(
                m,
                _mm256_shuffle_epi32::<0b10_11_00_01>(m),
            ))
        };
        // The corners' values, (x, y) corner c = 2 x + y: lower z, upper z.
        let mut v = [(_mm256_setzero_ps(), _mm256_setzero_ps()); 4];
        let (zmin, zmax) = (hmin(zc), hmax(zc));
        if same_xy == 0xff && zmax - zmin < LANES as i32 {
            // Lane l needs the row's floats zc[l] and zc[l] + 1: float `zc[l] - zmin` of
            // the eight from zmin and of the eight from zmin + 1.
            let idx = _mm256_sub_epi32(zc, _mm256_set1_epi32(zmin));
            for (c, vc) in v.iter_mut().enumerate() {
                let at = _mm256_cvtsi256_si32(xo[c >> 1]) + _mm256_cvtsi256_si32(yo[c & 1]);
                let at = (at + zmin) as usize;
                // SAFETY: `at` starts a run within one padded row (zmin < 64) of the tile
                // (masked lattice offsets); the loads end at `at + 9` at most, within the
                // row's 72 floats and so within `rows` (which has AVX2's tile).
                unsafe {
                    let r0 = _mm256_loadu_ps(base.add(at));
                    let r1 = _mm256_loadu_ps(base.add(at + 1));
                    *vc = (
                        _mm256_permutevar8x32_ps(r0, idx),
                        _mm256_permutevar8x32_ps(r1, idx),
                    );
                }
            }
        } else {
            for (c, vc) in v.iter_mut().enumerate() {
                let mut at = [0u32; LANES];
                let offs = _mm256_add_epi32(_mm256_add_epi32(xo[c >> 1], yo[c & 1]), zc);
                // SAFETY: `at` is 8 u32, written unaligned; each is a z cell (< 64) of a
                // row in the tile, so its two floats lie within the row's 72 and within
                // `rows`. Each pair is read as one unaligned f64 (movsd/movhpd).
                unsafe {
                    _mm256_storeu_si256(at.as_mut_ptr() as *mut __m256i, offs);
                    let pair = |l: usize| base.add(at[l] as usize) as *const f64;
                    // Lanes (0, 1) and (4, 5), then (2, 3) and (6, 7), two pairs a half.
                    let a = _mm256_set_m128(
                        _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd(pair(4)), pair(5))),
                        _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd(pair(0)), pair(1))),
                    );
                    let b = _mm256_set_m128(
                        _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd(pair(6)), pair(7))),
                        _mm_castpd_ps(_mm_loadh_pd(_mm_load_sd(pair(2)), pair(3))),
                    );
                    // Even floats are the lower z values, odd ones the upper, lanes in order.
                    *vc = (
                        _mm256_shuffle_ps::<0x88>(a, b),
                        _mm256_shuffle_ps::<0xDD>(a, b),
                    );
                }
            }
        }
        // `lerp`, operation for operation.
        let lerp = |a: __m256, b: __m256, t: __m256| {
            _mm256_add_ps(a, _mm256_mul_ps(_mm256_sub_ps(b, a), t))
        };
        let c00 = lerp(v[0].0, v[0].1, fz);
        let c01 = lerp(v[1].0, v[1].1, fz);
        let c10 = lerp(v[2].0, v[2].1, fz);
        let c11 = lerp(v[3].0, v[3].1, fz);
        let s = lerp(lerp(c00, c01, fy), lerp(c10, c11, fy), fx);
        let mut out = [0f32; LANES];
        // SAFETY: `out` is 8 floats, written unaligned.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), s) };
        out
    }

    /// [`NoiseTile::fbm`] at eight points, bit for bit (see [`NoiseTile::sample8`]).
    #[inline(always)]
    pub fn fbm8(&self, x: &[f32; LANES], y: &[f32; LANES], z: &[f32; LANES]) -> [f32; LANES] {
        let coarse = self.sample8(x, y, z);
        let (mut u, mut v, mut w) = ([0f32; LANES], [0f32; LANES], [0f32; LANES]);
        for l in 0..LANES {
            let (x, y, z) = (x[l], y[l], z[l]);
            u[l] = 4.7 * (0.36 * x + 0.48 * y - 0.80 * z) + 17.3;
            v[l] = 4.7 * (-0.80 * x + 0.60 * y + 0.00 * z) + 5.1;
            w[l] = 4.7 * (0.48 * x + 0.64 * y + 0.60 * z) + 29.7;
        }
        let fine = self.sample8(&u, &v, &w);
        std::array::from_fn(|l| coarse[l] + 0.4 * fine[l])
    }
}

/// Trilinear interpolation of eight samples from their corner values `v` (corner index
/// bit 2 = x, bit 1 = y, bit 0 = z) and fractions `f` (x, y, z).
#[inline(always)]
fn interpolate8(v: &[[f32; LANES]; 8], f: &[[f32; LANES]; 3]) -> [f32; LANES] {
    let mut out = [0f32; LANES];
    for l in 0..LANES {
        let c00 = lerp(v[0][l], v[1][l], f[2][l]);
        let c01 = lerp(v[2][l], v[3][l], f[2][l]);
        let c10 = lerp(v[4][l], v[5][l], f[2][l]);
        let c11 = lerp(v[6][l], v[7][l], f[2][l]);
        out[l] = lerp(lerp(c00, c01, f[1][l]), lerp(c10, c11, f[1][l]), f[0][l]);
    }
    out
}

/// Whether the CPU supports AVX2 (false off x86-64).
fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The tile with each z row padded to [`ROW`] floats (see [`NoiseTile`]'s `rows`).
fn padded_rows(data: &[f32; TILE * TILE * TILE]) -> Vec<f32> {
    let mut rows = Vec::with_capacity(TILE * TILE * ROW);
    for row in data.chunks_exact(TILE) {
        rows.extend_from_slice(row);
        rows.extend_from_slice(&row[..ROW - TILE]);
    }
    rows
}

#[inline(always)]
fn lerp(a: f32, b: f32, t: f32) -> f32 {
    a + (b - a) * t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_is_deterministic_and_normalised() {
        let a = NoiseTile::new(7);
        let b = NoiseTile::new(7);
        let c = NoiseTile::new(8);
        assert_eq!(a.data, b.data);
        assert_ne!(a.data, c.data);
        let peak = a.data.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!((peak - 1.0).abs() < 1e-6);
    }

    #[test]
    fn eight_lane_sampling_is_bit_identical() {
        let t = NoiseTile::new(3);
        let mut seed = 1u64;
        let mut next = || {
            seed = mix64(seed);
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 400.0 - 200.0
        };
        for _ in 0..200 {
            let x: [f32; LANES] = std::array::from_fn(|_| next());
            let y: [f32; LANES] = std::array::from_fn(|_| next());
            let z: [f32; LANES] = std::array::from_fn(|_| next());
            let s = t.sample8(&x, &y, &z);
            let f = t.fbm8(&x, &y, &z);
            for l in 0..LANES {
                assert_eq!(s[l].to_bits(), t.sample(x[l], y[l], z[l]).to_bits());
                assert_eq!(f[l].to_bits(), t.fbm(x[l], y[l], z[l]).to_bits());
            }
        }
    }

    /// Columns: eight samples sharing x and y, z in steps from a tenth of a cell to more
    /// than one, starting anywhere (so runs near the tile's z wrap are covered too). On an
    /// AVX2 machine most take the vector-load path, the rest the scalar one.
    #[test]
    fn column_sampling_is_bit_identical() {
        let t = NoiseTile::new(5);
        let mut seed = 9u64;
        let mut next = || {
            seed = mix64(seed);
            (seed >> 40) as f32 / (1u64 << 24) as f32
        };
        for _ in 0..2000 {
            let (x, y) = (next() * 400.0 - 200.0, next() * 400.0 - 200.0);
            let (z0, dz) = (next() * 200.0 - 100.0, next() * 1.3);
            let xs = [x; LANES];
            let ys = [y; LANES];
            let zs: [f32; LANES] = std::array::from_fn(|l| z0 + l as f32 * dz);
            let s = t.sample8(&xs, &ys, &zs);
            let f = t.fbm8(&xs, &ys, &zs);
            for l in 0..LANES {
                assert_eq!(s[l].to_bits(), t.sample(x, y, zs[l]).to_bits());
                assert_eq!(f[l].to_bits(), t.fbm(x, y, zs[l]).to_bits());
            }
        }
    }

    /// The scalar corner loads (CPUs without AVX2) give the same bits too: on an AVX2
    /// machine the tests above take the vector path.
    #[test]
    fn scalar_eight_lane_sampling_is_bit_identical() {
        let mut t = NoiseTile::new(4);
        t.avx2 = false;
        let mut seed = 3u64;
        let mut next = || {
            seed = mix64(seed);
            (seed >> 40) as f32 / (1u64 << 24) as f32 * 400.0 - 200.0
        };
        for _ in 0..500 {
            let x: [f32; LANES] = std::array::from_fn(|_| next());
            let y: [f32; LANES] = std::array::from_fn(|_| next());
            let z0 = next();
            // Scattered lanes, then a column.
            let z: [f32; LANES] = std::array::from_fn(|_| next());
            let zc: [f32; LANES] = std::array::from_fn(|l| z0 + l as f32 * 0.3);
            let s = t.sample8(&x, &y, &z);
            let c = t.sample8(&[x[0]; LANES], &[y[0]; LANES], &zc);
            for l in 0..LANES {
                assert_eq!(s[l].to_bits(), t.sample(x[l], y[l], z[l]).to_bits());
                assert_eq!(c[l].to_bits(), t.sample(x[0], y[0], zc[l]).to_bits());
            }
        }
    }

    #[test]
    fn sampling_is_periodic_and_continuous() {
        let t = NoiseTile::new(1);
        let a = t.sample(3.25, 10.5, 60.75);
        let b = t.sample(3.25 + 64.0, 10.5 - 128.0, 60.75 + 64.0);
        assert!((a - b).abs() < 1e-4);
        // Continuity across a lattice cell boundary.
        let l = t.sample(5.0 - 1e-4, 2.0, 2.0);
        let r = t.sample(5.0 + 1e-4, 2.0, 2.0);
        assert!((l - r).abs() < 1e-3);
        // Negative coordinates wrap like positive ones.
        assert!((t.sample(-1.5, 0.0, 0.0) - t.sample(62.5, 0.0, 0.0)).abs() < 1e-4);
    }
}
