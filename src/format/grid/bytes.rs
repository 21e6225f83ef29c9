//! Little-endian reads that never panic.

use super::super::types::Coord;

#[inline]
pub(super) fn bytes<const N: usize>(b: &[u8], off: usize) -> [u8; N] {
    off.checked_add(N)
        .and_then(|end| b.get(off..end))
        .and_then(|s| s.try_into().ok())
        .unwrap_or([0; N])
}
#[inline]
pub(super) fn u8_at(b: &[u8], off: usize) -> u8 {
    b.get(off).copied().unwrap_or(0)
}
#[inline]
pub(super) fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes(bytes(b, off))
}
#[inline]
pub(super) fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(bytes(b, off))
}
#[inline]
pub(super) fn i32_at(b: &[u8], off: usize) -> i32 {
    i32::from_le_bytes(bytes(b, off))
}
#[inline]
pub(super) fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(bytes(b, off))
}
#[inline]
pub(super) fn i64_at(b: &[u8], off: usize) -> i64 {
    i64::from_le_bytes(bytes(b, off))
}
#[inline]
pub(super) fn f32_at(b: &[u8], off: usize) -> f32 {
    f32::from_le_bytes(bytes(b, off))
}
#[inline]
pub(super) fn f64_at(b: &[u8], off: usize) -> f64 {
    f64::from_le_bytes(bytes(b, off))
}
pub(super) fn coord_at(b: &[u8], off: usize) -> Coord {
    [i32_at(b, off), i32_at(b, off + 4), i32_at(b, off + 8)]
}
pub(super) fn f64s<const N: usize>(b: &[u8], off: usize) -> [f64; N] {
    std::array::from_fn(|i| f64_at(b, off + 8 * i))
}
pub(super) fn f32s<const N: usize>(b: &[u8], off: usize) -> [f32; N] {
    std::array::from_fn(|i| f32_at(b, off + 4 * i))
}
#[inline]
pub(super) fn bit_at(b: &[u8], mask_off: usize, n: usize) -> bool {
    u8_at(b, mask_off + (n >> 3)) >> (n & 7) & 1 == 1
}

/// IEEE 754 binary16 → binary32, exact for every input (as NanoVDB's `Half` → `float`).
pub fn half_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match exp {
        0 if man == 0 => sign,
        0 => {
            // Subnormal: man * 2^-24, exact in f32 (a power-of-two scaling of a small integer).
            let v = man as f32 * (1.0 / 16_777_216.0);
            return if sign != 0 { -v } else { v };
        }
        31 => sign | 0x7f80_0000 | (man << 13),
        _ => sign | ((exp + 112) << 23) | (man << 13),
    };
    f32::from_bits(bits)
}
