//! Test payloads shared by the dataset, ingest and interop tests.

/// `len` pseudo-random bytes (xorshift seeded by `seed`): cheap, and non-repeating enough
/// that a byte landing in the wrong place or frame shows.
pub fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
