//! Reading a validated grid's bytes: fields go through the one bounds-checked little-endian
//! reader ([`LeBytes`]); half floats are widened here.

use super::super::le::LeBytes;
use super::{FormatError, Grid};

impl<'a> Grid<'a> {
    /// The grid's bytes through the bounds-checked reader; errors give offsets in the buffer
    /// handed to [`Grid::parse`] / [`Grid::parse_all`].
    #[inline]
    pub(super) fn le(&self) -> LeBytes<'a> {
        LeBytes::grid(self.data, self.base)
    }
}

/// The result of reading a field that [`Grid::parse`] has already proven to lie inside the
/// grid, for the accessors whose signatures have no room for an error (`is_active`,
/// `LeafView::origin`, `active_mask`, ...).
///
/// Such a read cannot fail. Should validation ever miss a case, this deliberately returns the
/// type's zero (`false`, `0`) in release builds, as a second line of defence that keeps a
/// renderer running, and stops debug builds (and so every test) at once.
#[inline]
pub(super) fn proven<T: Default>(read: Result<T, FormatError>) -> T {
    match read {
        Ok(v) => v,
        Err(e) => {
            debug_assert!(false, "read of a validated grid failed: {e}");
            T::default()
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn half_conversion_is_exact() {
        assert_eq!(half_to_f32(0x0000), 0.0);
        assert_eq!(half_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
        assert_eq!(half_to_f32(0x3c00), 1.0);
        assert_eq!(half_to_f32(0xc000), -2.0);
        assert_eq!(half_to_f32(0x7bff), 65504.0);
        assert_eq!(half_to_f32(0x0001), 2f32.powi(-24));
        assert_eq!(half_to_f32(0x03ff), 1023.0 * 2f32.powi(-24));
        assert_eq!(half_to_f32(0x0400), 2f32.powi(-14));
        assert_eq!(half_to_f32(0x3555), 0.333_251_95);
        assert_eq!(half_to_f32(0x7c00), f32::INFINITY);
        assert_eq!(half_to_f32(0xfc00), f32::NEG_INFINITY);
        assert!(half_to_f32(0x7e00).is_nan());
        // Every finite half: value = (-1)^s · 2^(e-15) · (1 + m/1024), or m · 2^-24.
        for h in 0..=u16::MAX {
            let (s, e, m) = (h >> 15, (h >> 10) & 31, h & 1023);
            if e == 31 {
                continue;
            }
            let mag = if e == 0 {
                f64::from(m) * 2f64.powi(-24)
            } else {
                2f64.powi(i32::from(e) - 15) * (1.0 + f64::from(m) / 1024.0)
            };
            let v = if s == 1 { -mag } else { mag };
            assert_eq!(f64::from(half_to_f32(h)), v, "{h:#06x}");
        }
    }
}
