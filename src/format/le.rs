//! The one little-endian reader of `format/`: every fixed-size field read from untrusted bytes
//! (grid buffers, `.nvdb` headers and metadata, compressed payload prefixes) goes through
//! [`LeBytes`].
//!
//! A read either returns the field or a [`FormatError::Truncated`] naming the field, its byte
//! offset and the length it ran past. It never panics (offsets near `usize::MAX` included) and
//! never makes up a value: a caller that wants a fallback says so at the call site.

use super::error::FormatError;
use super::types::Coord;

/// Bounds-checked little-endian reads from a byte slice.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeBytes<'a> {
    bytes: &'a [u8],
    /// Offset of `bytes[0]` in the buffer that errors refer to.
    base: u64,
    /// What `bytes` is, for errors: "buffer" or "grid".
    within: &'static str,
}

impl<'a> LeBytes<'a> {
    /// Reads from `bytes`; errors give offsets from its start and call it the "buffer".
    pub(crate) fn new(bytes: &'a [u8]) -> LeBytes<'a> {
        LeBytes {
            bytes,
            base: 0,
            within: "buffer",
        }
    }

    /// Reads from one grid's bytes, which start at byte `base` of the buffer errors refer to.
    pub(crate) fn grid(bytes: &'a [u8], base: u64) -> LeBytes<'a> {
        LeBytes {
            bytes,
            base,
            within: "grid",
        }
    }

    /// The `N` bytes at `off`, or an error naming `field` if they do not all lie inside.
    #[inline]
    pub(crate) fn array<const N: usize>(
        &self,
        off: usize,
        field: &str,
    ) -> Result<[u8; N], FormatError> {
        off.checked_add(N)
            .and_then(|end| self.bytes.get(off..end))
            .and_then(|s| <[u8; N]>::try_from(s).ok())
            .ok_or_else(|| self.past_end(off, N, field))
    }

    #[cold]
    fn past_end(&self, off: usize, need: usize, field: &str) -> FormatError {
        FormatError::Truncated {
            what: field.to_owned(),
            offset: self.base.saturating_add(off as u64),
            need: need as u64,
            len: self.bytes.len() as u64,
            within: self.within,
        }
    }

    /// The byte at `off`.
    #[inline]
    pub(crate) fn u8_at(&self, off: usize, field: &str) -> Result<u8, FormatError> {
        self.array::<1>(off, field).map(|b| b[0])
    }
    /// The little-endian u16 at `off`.
    #[inline]
    pub(crate) fn u16_at(&self, off: usize, field: &str) -> Result<u16, FormatError> {
        self.array(off, field).map(u16::from_le_bytes)
    }
    /// The little-endian u32 at `off`.
    #[inline]
    pub(crate) fn u32_at(&self, off: usize, field: &str) -> Result<u32, FormatError> {
        self.array(off, field).map(u32::from_le_bytes)
    }
    /// The little-endian i32 at `off`.
    #[inline]
    pub(crate) fn i32_at(&self, off: usize, field: &str) -> Result<i32, FormatError> {
        self.array(off, field).map(i32::from_le_bytes)
    }
    /// The little-endian u64 at `off`.
    #[inline]
    pub(crate) fn u64_at(&self, off: usize, field: &str) -> Result<u64, FormatError> {
        self.array(off, field).map(u64::from_le_bytes)
    }
    /// The little-endian i64 at `off`.
    #[inline]
    pub(crate) fn i64_at(&self, off: usize, field: &str) -> Result<i64, FormatError> {
        self.array(off, field).map(i64::from_le_bytes)
    }
    /// The little-endian f32 at `off`.
    #[inline]
    pub(crate) fn f32_at(&self, off: usize, field: &str) -> Result<f32, FormatError> {
        self.array(off, field).map(f32::from_le_bytes)
    }
    /// The little-endian f64 at `off`.
    #[inline]
    pub(crate) fn f64_at(&self, off: usize, field: &str) -> Result<f64, FormatError> {
        self.array(off, field).map(f64::from_le_bytes)
    }
    /// Three little-endian i32 at `off` (a NanoVDB `Coord`).
    pub(crate) fn coord_at(&self, off: usize, field: &str) -> Result<Coord, FormatError> {
        let b: [u8; 12] = self.array(off, field)?;
        Ok(std::array::from_fn(|i| {
            i32::from_le_bytes([b[4 * i], b[4 * i + 1], b[4 * i + 2], b[4 * i + 3]])
        }))
    }
    /// `N` consecutive little-endian u16 from `off`.
    pub(crate) fn u16s<const N: usize>(
        &self,
        off: usize,
        field: &str,
    ) -> Result<[u16; N], FormatError> {
        let s = self.span(off, 2 * N, field)?;
        Ok(std::array::from_fn(|i| {
            u16::from_le_bytes([s[2 * i], s[2 * i + 1]])
        }))
    }
    /// `N` consecutive little-endian u32 from `off`.
    pub(crate) fn u32s<const N: usize>(
        &self,
        off: usize,
        field: &str,
    ) -> Result<[u32; N], FormatError> {
        let s = self.span(off, 4 * N, field)?;
        Ok(std::array::from_fn(|i| {
            u32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]])
        }))
    }
    /// `N` consecutive little-endian f32 from `off`.
    pub(crate) fn f32s<const N: usize>(
        &self,
        off: usize,
        field: &str,
    ) -> Result<[f32; N], FormatError> {
        let s = self.span(off, 4 * N, field)?;
        Ok(std::array::from_fn(|i| {
            f32::from_le_bytes([s[4 * i], s[4 * i + 1], s[4 * i + 2], s[4 * i + 3]])
        }))
    }
    /// `N` consecutive little-endian f64 from `off`.
    pub(crate) fn f64s<const N: usize>(
        &self,
        off: usize,
        field: &str,
    ) -> Result<[f64; N], FormatError> {
        let s = self.span(off, 8 * N, field)?;
        Ok(std::array::from_fn(|i| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&s[8 * i..8 * i + 8]);
            f64::from_le_bytes(b)
        }))
    }
    /// Bit `n` of the little-endian bit mask starting at `mask_off` (bit `n % 8` of byte
    /// `n / 8`).
    #[inline]
    pub(crate) fn bit_at(
        &self,
        mask_off: usize,
        n: usize,
        field: &str,
    ) -> Result<bool, FormatError> {
        let byte = mask_off
            .checked_add(n >> 3)
            .ok_or_else(|| self.past_end(mask_off, (n >> 3).saturating_add(1), field))?;
        Ok(self.u8_at(byte, field)? >> (n & 7) & 1 == 1)
    }
    /// The `len` bytes at `off`.
    pub(crate) fn span(
        &self,
        off: usize,
        len: usize,
        field: &str,
    ) -> Result<&'a [u8], FormatError> {
        off.checked_add(len)
            .and_then(|end| self.bytes.get(off..end))
            .ok_or_else(|| self.past_end(off, len, field))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        (1..=16u8).collect()
    }

    #[test]
    fn reads_little_endian_fields() {
        let b = sample();
        let r = LeBytes::new(&b);
        assert_eq!(r.u8_at(0, "f").unwrap(), 1);
        assert_eq!(r.u16_at(0, "f").unwrap(), 0x0201);
        assert_eq!(r.u32_at(1, "f").unwrap(), 0x0504_0302);
        assert_eq!(r.i32_at(0, "f").unwrap(), 0x0403_0201);
        assert_eq!(r.u64_at(8, "f").unwrap(), 0x100f_0e0d_0c0b_0a09);
        assert_eq!(r.i64_at(8, "f").unwrap(), 0x100f_0e0d_0c0b_0a09);
        assert_eq!(r.f32_at(0, "f").unwrap(), f32::from_bits(0x0403_0201));
        assert_eq!(
            r.f64_at(0, "f").unwrap(),
            f64::from_bits(0x0807_0605_0403_0201)
        );
        assert_eq!(
            r.coord_at(0, "f").unwrap(),
            [0x0403_0201, 0x0807_0605, 0x0c0b_0a09]
        );
        assert_eq!(r.u16s::<2>(2, "f").unwrap(), [0x0403, 0x0605]);
        assert_eq!(r.u32s::<2>(0, "f").unwrap(), [0x0403_0201, 0x0807_0605]);
        assert_eq!(
            r.f32s::<2>(0, "f").unwrap(),
            [f32::from_bits(0x0403_0201), f32::from_bits(0x0807_0605)]
        );
        assert_eq!(
            r.f64s::<2>(0, "f").unwrap()[1],
            f64::from_bits(0x100f_0e0d_0c0b_0a09)
        );
        // 0x01 = bit 0 of byte 0; 0x02 = bit 1 of byte 1, i.e. bit 9.
        assert!(r.bit_at(0, 0, "f").unwrap());
        assert!(!r.bit_at(0, 1, "f").unwrap());
        assert!(r.bit_at(0, 9, "f").unwrap());
        assert_eq!(r.span(14, 2, "f").unwrap(), &[15, 16]);
    }

    #[test]
    fn a_field_ending_exactly_at_the_end_is_read() {
        let b = sample();
        let r = LeBytes::new(&b);
        assert_eq!(r.u8_at(15, "f").unwrap(), 16);
        assert_eq!(r.u32_at(12, "f").unwrap(), 0x100f_0e0d);
        assert_eq!(r.u64_at(8, "f").unwrap(), 0x100f_0e0d_0c0b_0a09);
        assert_eq!(r.f64s::<2>(0, "f").unwrap().len(), 2);
        assert!(r.bit_at(0, 127, "f").is_ok());
        assert_eq!(r.span(16, 0, "f").unwrap(), &[] as &[u8]);
        assert_eq!(LeBytes::new(&[]).array::<0>(0, "f").unwrap(), [0u8; 0]);
    }

    #[test]
    fn one_byte_past_the_end_is_an_error_naming_the_field() {
        let b = sample();
        let r = LeBytes::grid(&b, 1000);
        let e = r.u32_at(13, "root tile count").unwrap_err();
        assert_eq!(
            e,
            FormatError::Truncated {
                what: "root tile count".into(),
                offset: 1013,
                need: 4,
                len: 16,
                within: "grid",
            }
        );
        assert_eq!(
            e.to_string(),
            "root tile count at byte 1013 needs 4 bytes but the grid has only 16"
        );
        assert!(r.u8_at(16, "f").is_err());
        assert!(r.u16_at(15, "f").is_err());
        assert!(r.i32_at(13, "f").is_err());
        assert!(r.u64_at(9, "f").is_err());
        assert!(r.i64_at(9, "f").is_err());
        assert!(r.f32_at(13, "f").is_err());
        assert!(r.f64_at(9, "f").is_err());
        assert!(r.coord_at(5, "f").is_err());
        assert!(r.u16s::<2>(13, "f").is_err());
        assert!(r.u32s::<2>(9, "f").is_err());
        assert!(r.f32s::<2>(9, "f").is_err());
        assert!(r.f64s::<2>(1, "f").is_err());
        assert!(r.bit_at(0, 128, "f").is_err());
        assert!(r.span(15, 2, "f").is_err());
        assert!(LeBytes::new(&[]).u8_at(0, "f").is_err());
    }

    #[test]
    fn offsets_that_overflow_are_errors_not_panics() {
        let b = sample();
        let r = LeBytes::new(&b);
        for off in [usize::MAX, usize::MAX - 1, usize::MAX - 7] {
            assert!(r.u8_at(off, "f").is_err());
            assert!(r.u32_at(off, "f").is_err());
            assert!(r.u64_at(off, "f").is_err());
            assert!(r.coord_at(off, "f").is_err());
            assert!(r.f64s::<3>(off, "f").is_err());
            assert!(r.span(off, 8, "f").is_err());
            assert!(r.bit_at(off, 64, "f").is_err());
        }
        assert!(r.bit_at(0, usize::MAX, "f").is_err());
        assert!(r.span(1, usize::MAX, "f").is_err());
        let e = r.u64_at(usize::MAX, "f").unwrap_err();
        assert!(matches!(
            e,
            FormatError::Truncated {
                need: 8,
                len: 16,
                ..
            }
        ));
    }
}
