//! Structural checks of the tree: spans, offsets, node arrays.

use super::*;

// ------------------------------------------------------------------------------------------
// Validation
// ------------------------------------------------------------------------------------------

pub(super) struct Ctx<'b> {
    /// The whole buffer (for messages only).
    pub(super) base: u64,
    /// The grid's bytes.
    pub(super) g: &'b [u8],
}

impl Ctx<'_> {
    pub(super) fn corrupt(
        &self,
        what: impl Into<String>,
        off: usize,
        detail: impl Into<String>,
    ) -> FormatError {
        FormatError::Corrupt {
            what: what.into(),
            offset: self.base + off as u64,
            detail: detail.into(),
        }
    }
    pub(super) fn truncated(&self, what: impl Into<String>, off: usize, need: u64) -> FormatError {
        FormatError::Truncated {
            what: what.into(),
            offset: self.base + off as u64,
            need,
            len: self.g.len() as u64,
            within: "grid",
        }
    }
    /// Checks that `[off, off + len)` lies in the grid.
    pub(super) fn span(
        &self,
        what: &dyn Fn() -> String,
        off: usize,
        len: u64,
    ) -> Result<(), FormatError> {
        let end = (off as u64).checked_add(len);
        match end {
            Some(end) if end <= self.g.len() as u64 => Ok(()),
            _ => Err(self.truncated(what(), off, len)),
        }
    }
    /// `base + rel`, checked to lie inside the grid; errors name `what` at byte `at`.
    pub(super) fn rel(
        &self,
        what: &dyn Fn() -> String,
        at: usize,
        base: usize,
        rel: i64,
    ) -> Result<usize, FormatError> {
        self.rel_as(what, "", at, base, rel)
    }
    /// As [`Ctx::rel`], with `role` (e.g. "child 12: ") before the message.
    pub(super) fn rel_as(
        &self,
        what: &dyn Fn() -> String,
        role: &str,
        at: usize,
        base: usize,
        rel: i64,
    ) -> Result<usize, FormatError> {
        let target = (base as i128) + i128::from(rel);
        if target < 0 || target >= self.g.len() as i128 {
            return Err(self.corrupt(
                what(),
                at,
                format!(
                    "{role}offset {rel} points outside the {}-byte grid",
                    self.g.len()
                ),
            ));
        }
        Ok(target as usize)
    }
}

/// The contiguous array of nodes of one level.
pub(super) struct Level {
    pub(super) name: &'static str,
    pub(super) first: usize,
    pub(super) count: usize,
    /// Node size (fixed-size levels).
    pub(super) size: usize,
    /// Sorted node offsets of variable-size (FpN) leaves.
    pub(super) offsets: Option<Vec<usize>>,
    /// One past the last byte of the last node.
    pub(super) end: usize,
}

impl Level {
    /// The index of the node starting at `off`, if one does.
    pub(super) fn index_of(&self, off: usize) -> Option<usize> {
        match &self.offsets {
            Some(o) => o.binary_search(&off).ok(),
            None => {
                let d = off.checked_sub(self.first)?;
                (self.size != 0 && d % self.size == 0 && d / self.size < self.count)
                    .then_some(d / self.size)
            }
        }
    }
    pub(super) fn offset(&self, i: usize) -> usize {
        match &self.offsets {
            Some(o) => o.get(i).copied().unwrap_or(0),
            None => self.first + i * self.size,
        }
    }
}

/// Calls `f(n)` for every set bit `n` of the `bits`-bit mask at `off`, in ascending order.
pub(super) fn for_each_set_bit(
    g: &[u8],
    off: usize,
    bits: usize,
    mut f: impl FnMut(usize) -> Result<(), FormatError>,
) -> Result<(), FormatError> {
    for w in 0..bits / 64 {
        let mut word = u64_at(g, off + 8 * w);
        while word != 0 {
            let b = word.trailing_zeros() as usize;
            word &= word - 1;
            f(w * 64 + b)?;
        }
    }
    Ok(())
}

pub(super) fn add_coord(a: Coord, b: Coord) -> Coord {
    [
        a[0].wrapping_add(b[0]),
        a[1].wrapping_add(b[1]),
        a[2].wrapping_add(b[2]),
    ]
}
