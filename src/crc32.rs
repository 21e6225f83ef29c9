//! CRC-32 (IEEE 802.3, the one `crc32fast` computes and manifests record) in pieces: the
//! CRC of a whole extent from the CRCs of its parts, so that parts can be checked in
//! parallel (host pieces as their reads land, 4 KiB blocks on the GPU) and still be
//! compared with the one CRC the manifest holds.
//!
//! The CRC is linear over GF(2): for the standard CRC (initial value and final XOR all
//! ones), `crc(A ‖ B) = crc(A) · x^(8·|B|) mod P ⊕ crc(B)`. Applied repeatedly, the CRC of
//! blocks `B0 … Bn-1` is the XOR of `crc(Bi) · x^(8·(bytes after Bi)) mod P`: every block
//! is independent, and the sum order does not matter. Polynomials are kept bit-reflected,
//! as the CRC itself is (bit 31 is the coefficient of x⁰).
//!
//! [`blocked_crc32`] is the host twin of the GPU kernels (CUDA and WGSL, in the `gpu` module):
//! the same tables ([`CrcTables`]), the same per-block loop and the same combine, so a test
//! on any machine proves the arithmetic the kernels do.
//!
//! A leaf: it uses nothing of the crate, so the ingest engines (host checks) and the GPU
//! layer (kernels) share it without depending on each other.

/// The reflected CRC-32 polynomial (x³² + x²⁶ + … + 1).
const POLY: u32 = 0xEDB8_8320;

/// x⁰ in the reflected representation.
const ONE: u32 = 0x8000_0000;

/// `a · b mod P`, both reflected.
pub const fn mul_mod_p(a: u32, b: u32) -> u32 {
    let mut product = 0u32;
    // `b_times_x_i` walks b, b·x, b·x², …; bit (31 − i) of `a` is the coefficient of xⁱ.
    let mut b_times_x_i = b;
    let mut i = 0;
    while i < 32 {
        if a & (ONE >> i) != 0 {
            product ^= b_times_x_i;
        }
        let carry = b_times_x_i & 1;
        b_times_x_i = (b_times_x_i >> 1) ^ (POLY & 0u32.wrapping_sub(carry));
        i += 1;
    }
    product
}

const fn byte_powers() -> [u32; 64] {
    let mut p = [0u32; 64];
    // x⁸ reflected: bit 31 − 8.
    p[0] = ONE >> 8;
    let mut k = 1;
    while k < 64 {
        p[k] = mul_mod_p(p[k - 1], p[k - 1]);
        k += 1;
    }
    p
}

/// x^(8·2^k) mod P for k = 0‥63 (what the GPU kernel receives too).
pub const BYTE_POWERS: [u32; 64] = byte_powers();

/// Moves `crc` past `zero_bytes` bytes: `crc · x^(8·zero_bytes) mod P`.
pub fn shift(crc: u32, zero_bytes: u64) -> u32 {
    let mut c = crc;
    let mut n = zero_bytes;
    let mut k = 0;
    while n != 0 {
        if n & 1 != 0 {
            c = mul_mod_p(c, BYTE_POWERS[k]);
        }
        n >>= 1;
        k += 1;
    }
    c
}

/// The CRC-32 of `A ‖ B` from `crc(A)`, `crc(B)` and `|B|`.
pub fn combine(crc_a: u32, crc_b: u32, len_b: u64) -> u32 {
    shift(crc_a, len_b) ^ crc_b
}

/// Slicing-by-4 lookup tables of the reflected CRC-32: `t[0]` is the byte table, `t[k]`
/// advances a byte k further. The GPU kernel loads the same 4 × 256 words into shared
/// memory.
#[derive(Clone, Debug)]
pub struct CrcTables(pub [[u32; 256]; 4]);

impl CrcTables {
    /// Builds the tables.
    pub fn new() -> CrcTables {
        let mut t = [[0u32; 256]; 4];
        for i in 0..256u32 {
            let mut c = i;
            for _ in 0..8 {
                c = (c >> 1) ^ (POLY & 0u32.wrapping_sub(c & 1));
            }
            t[0][i as usize] = c;
        }
        for k in 1..4 {
            for i in 0..256 {
                let prev = t[k - 1][i];
                t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            }
        }
        CrcTables(t)
    }

    /// The tables as one flat array, `t[0]` first (the kernel's layout).
    pub fn flat(&self) -> Vec<u32> {
        self.0.iter().flatten().copied().collect()
    }

    /// The standard CRC-32 of `data`, the way the kernel computes one block: 16 bytes at a
    /// time as four little-endian words, then the remaining bytes one by one.
    pub fn crc32(&self, data: &[u8]) -> u32 {
        let t = &self.0;
        let mut c = !0u32;
        let mut chunks = data.chunks_exact(16);
        for chunk in &mut chunks {
            for w in chunk.chunks_exact(4) {
                c ^= u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
                c = t[3][(c & 0xff) as usize]
                    ^ t[2][((c >> 8) & 0xff) as usize]
                    ^ t[1][((c >> 16) & 0xff) as usize]
                    ^ t[0][(c >> 24) as usize];
            }
        }
        for &b in chunks.remainder() {
            c = (c >> 8) ^ t[0][((c ^ u32::from(b)) & 0xff) as usize];
        }
        !c
    }
}

impl Default for CrcTables {
    fn default() -> Self {
        CrcTables::new()
    }
}

/// The GPU kernel's algorithm on the host: the CRC of every `block`-byte block of `data`
/// (the last one may be shorter), each moved past the bytes after it and XORed together.
/// Equals `crc32fast::hash(data)`. `block` must be positive.
pub fn blocked_crc32(tables: &CrcTables, data: &[u8], block: usize) -> u32 {
    assert!(block > 0, "block size must be positive");
    let len = data.len() as u64;
    if data.is_empty() {
        return 0;
    }
    let mut acc = 0u32;
    for (i, b) in data.chunks(block).enumerate() {
        let end = (i * block + b.len()) as u64;
        acc ^= shift(tables.crc32(b), len - end);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic test bytes (xorshift64*).
    fn bytes(seed: u64, n: usize) -> Vec<u8> {
        let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..n)
            .map(|_| {
                s ^= s >> 12;
                s ^= s << 25;
                s ^= s >> 27;
                (s.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
            })
            .collect()
    }

    #[test]
    fn tables_match_crc32fast() {
        let t = CrcTables::new();
        for n in [0, 1, 3, 15, 16, 17, 64, 1000, 4096, 4099] {
            let d = bytes(n as u64 + 7, n);
            assert_eq!(t.crc32(&d), crc32fast::hash(&d), "{n} bytes");
        }
    }

    #[test]
    fn powers_are_repeated_squares_of_x8() {
        // x^8 · x^8 = x^16 and so on: shifting by 2^k bytes one byte at a time agrees.
        let mut c = 0x1234_5678u32;
        let mut by_bytes = c;
        for _ in 0..4 {
            by_bytes = mul_mod_p(by_bytes, BYTE_POWERS[0]);
        }
        c = mul_mod_p(c, BYTE_POWERS[2]);
        assert_eq!(c, by_bytes);
        assert_eq!(shift(0xdead_beef, 0), 0xdead_beef);
        assert_eq!(mul_mod_p(ONE, 0xabcd_ef01), 0xabcd_ef01);
    }

    #[test]
    fn combine_equals_the_crc_of_the_concatenation() {
        for (i, (la, lb)) in [(0, 5), (1, 1), (7, 4096), (4096, 4096), (12345, 1), (3, 0)]
            .into_iter()
            .enumerate()
        {
            let a = bytes(i as u64, la);
            let b = bytes(i as u64 + 100, lb);
            let whole: Vec<u8> = a.iter().chain(&b).copied().collect();
            assert_eq!(
                combine(crc32fast::hash(&a), crc32fast::hash(&b), lb as u64),
                crc32fast::hash(&whole),
                "{la} + {lb}"
            );
        }
    }

    #[test]
    fn blocked_crc_equals_crc32fast_on_random_lengths_and_blocks() {
        let t = CrcTables::new();
        let mut s = 0x5eed_u64;
        let mut next = |m: u64| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (s >> 33) % m
        };
        for case in 0..200 {
            let len = next(70_000) as usize;
            let block = match case % 4 {
                0 => 4096,
                1 => 16 * (1 + next(64) as usize),
                2 => 1 + next(5000) as usize,
                _ => 1 + next(40) as usize,
            };
            let d = bytes(case, len);
            assert_eq!(
                blocked_crc32(&t, &d, block),
                crc32fast::hash(&d),
                "case {case}: {len} bytes in blocks of {block}"
            );
        }
        // Large extents: a whole 8 MiB chunk in 4 KiB blocks (2048 blocks, shifts up to 2^23).
        let d = bytes(99, 8 << 20);
        assert_eq!(blocked_crc32(&t, &d, 4096), crc32fast::hash(&d));
    }

    #[test]
    fn pieces_combine_into_the_extent_crc() {
        // The host path's way: pieces of an extent (reads of io_size) combined in order.
        let d = bytes(5, 5 * 65536 + 4096);
        // The CRC of no bytes is 0, so folding from 0 needs no special first piece.
        let mut acc = 0u32;
        for p in d.chunks(65536) {
            acc = combine(acc, crc32fast::hash(p), p.len() as u64);
        }
        assert_eq!(acc, crc32fast::hash(&d));
    }
}
