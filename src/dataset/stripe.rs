//! Pure layout arithmetic: where grids sit in a frame's slot image, and how a slot image
//! is striped over lanes. No I/O here, so all of it is property-tested directly.

use super::ALIGN;

/// Rounds `n` up to the next multiple of [`ALIGN`], or `None` on overflow.
pub fn align_up(n: u64) -> Option<u64> {
    n.checked_next_multiple_of(ALIGN)
}

/// Where each grid of a frame goes in the slot image, and the image's total size.
///
/// Grid `g` starts at `offsets[g]`, a multiple of 4 KiB, and is followed by zero padding up
/// to the next 4 KiB boundary; grids follow each other in the given order with no further
/// gaps. Returns `None` if the total overflows `u64`.
pub fn slot_layout(grid_sizes: &[u64]) -> Option<(Vec<u64>, u64)> {
    let mut offsets = Vec::with_capacity(grid_sizes.len());
    let mut end = 0u64;
    for &size in grid_sizes {
        offsets.push(end);
        end = end.checked_add(align_up(size)?)?;
    }
    Some((offsets, end))
}

/// One chunk of a striped slot image: `len` bytes at `dst` in the slot image, stored on
/// lane `lane`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StripeChunk {
    /// Lane the chunk is stored on.
    pub lane: u32,
    /// Byte offset of the chunk in the slot image.
    pub dst: u64,
    /// Chunk length: `chunk_size`, except for a shorter last chunk.
    pub len: u64,
}

/// Splits a slot image of `slot_len` bytes into chunks of `chunk_size` (the last one may
/// be shorter) and assigns chunk `c` of frame `frame_index` to lane
/// `(c + frame_index) % lanes`, RAID-0 style.
///
/// Rotating the start lane with the frame index spreads frames smaller than
/// `lanes * chunk_size` over all lanes instead of always filling lane 0 first. Within one
/// frame, lane byte counts differ by at most one chunk.
///
/// # Panics
/// Panics if `chunk_size` or `lanes` is zero (callers validate both first).
pub fn stripe(slot_len: u64, chunk_size: u64, lanes: u32, frame_index: u64) -> Vec<StripeChunk> {
    assert!(chunk_size > 0, "chunk size must be positive");
    assert!(lanes > 0, "lane count must be positive");
    let n = slot_len.div_ceil(chunk_size);
    let l = u64::from(lanes);
    let start = frame_index % l;
    (0..n)
        .map(|c| {
            let dst = c * chunk_size;
            StripeChunk {
                // Both terms are < l <= u32::MAX, so the sum cannot overflow u64.
                lane: ((c % l + start) % l) as u32,
                dst,
                len: chunk_size.min(slot_len - dst),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_pads_each_grid() {
        let (offs, total) = slot_layout(&[1, 4096, 4097, 0, 10]).unwrap();
        assert_eq!(offs, vec![0, 4096, 8192, 16384, 16384]);
        assert_eq!(total, 20480);
        assert_eq!(slot_layout(&[u64::MAX]), None);
        assert_eq!(slot_layout(&[u64::MAX - 8191, 4096, 4096]), None);
    }

    #[test]
    fn stripe_rotates() {
        let c = stripe(5 * 4096, 2 * 4096, 3, 4);
        let lanes: Vec<u32> = c.iter().map(|c| c.lane).collect();
        assert_eq!(lanes, vec![1, 2, 0]);
        assert_eq!(c[2].len, 4096);
        assert!(stripe(0, 4096, 3, 0).is_empty());
        let big = stripe(u64::MAX - 4095, 1 << 50, u32::MAX, u64::MAX);
        assert_eq!(
            big.last().unwrap().dst + big.last().unwrap().len,
            u64::MAX - 4095
        );
    }
}
