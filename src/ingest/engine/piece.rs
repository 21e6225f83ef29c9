//! The pieces of a frame: a request split into reads of at most `io_size` bytes, each inside
//! one part of the slot, interleaved across lanes ([`split`]). The coordinator tracks them;
//! a copy stage carries the ones that land in its buffers on to the slot.

use std::collections::VecDeque;

use crate::gpu::SlotLayout;
use crate::ingest::source::{ReadExtent, SourceFile};

/// One read of a frame: a byte range of one file into one part of the slot.
#[derive(Clone, Copy, Debug)]
pub(super) struct Piece {
    pub(super) seq: u64,
    /// Index of the extent in the request.
    pub(super) extent: u32,
    pub(super) file: u32,
    pub(super) offset: u64,
    pub(super) len: usize,
    /// Slot offset of the first byte.
    pub(super) dst: u64,
    /// The slot part the read lands in, and the offset inside it (a read never crosses a
    /// part boundary).
    pub(super) part: u32,
    pub(super) part_offset: u64,
}

/// Splits a frame into reads of at most `io_size` that each lie inside one part of a slot of
/// `layout` (an extent crossing a part boundary is split there), interleaved across lanes
/// (round robin over lanes, in slot order within a lane).
pub(super) fn split(
    seq: u64,
    extents: &[ReadExtent],
    files: &[SourceFile],
    io_size: usize,
    layout: SlotLayout,
) -> Vec<Piece> {
    let mut per_lane: Vec<VecDeque<Piece>> = Vec::new();
    for (i, e) in extents.iter().enumerate() {
        let lane = files[e.file as usize].lane as usize;
        if per_lane.len() <= lane {
            per_lane.resize_with(lane + 1, VecDeque::new);
        }
        for r in layout.pieces(e.dst, e.len) {
            let mut off = 0u64;
            while off < r.len {
                let n = (io_size as u64).min(r.len - off);
                let from_extent = r.at - e.dst + off;
                per_lane[lane].push_back(Piece {
                    seq,
                    extent: i as u32,
                    file: e.file,
                    offset: e.offset + from_extent,
                    len: n as usize,
                    dst: r.at + off,
                    part: r.part as u32,
                    part_offset: r.offset + off,
                });
                off += n;
            }
        }
    }
    let total = per_lane.iter().map(VecDeque::len).sum();
    let mut out = Vec::with_capacity(total);
    while out.len() < total {
        for l in per_lane.iter_mut() {
            if let Some(p) = l.pop_front() {
                out.push(p);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_interleaves_lanes_and_caps_reads() {
        let files = vec![
            SourceFile {
                path: "a".into(),
                lane: 0,
                size: 1 << 20,
            },
            SourceFile {
                path: "b".into(),
                lane: 1,
                size: 1 << 20,
            },
        ];
        let ext = |file: u32, dst: u64| ReadExtent {
            file,
            offset: 0,
            len: 3 * 4096,
            dst,
            crc32: None,
        };
        let one_part = SlotLayout::whole(6 * 4096);
        let pieces = split(1, &[ext(0, 0), ext(1, 3 * 4096)], &files, 8192, one_part);
        let lanes: Vec<u32> = pieces.iter().map(|p| files[p.file as usize].lane).collect();
        assert_eq!(lanes, vec![0, 1, 0, 1]);
        assert_eq!(pieces.iter().map(|p| p.len).sum::<usize>(), 6 * 4096);
        assert_eq!(pieces[2].dst, 8192);
        assert_eq!(pieces[2].len, 4096);
        assert!(pieces.iter().all(|p| p.part == 0 && p.part_offset == p.dst));
    }

    /// An extent that crosses part boundaries is split at each, every piece landing inside
    /// one part at the right offset, with file offsets that follow the slot offsets.
    #[test]
    fn split_cuts_reads_at_part_boundaries() {
        let files = vec![SourceFile {
            path: "a".into(),
            lane: 0,
            size: 1 << 20,
        }];
        let e = ReadExtent {
            file: 0,
            offset: 40960,
            len: 7 * 4096,
            dst: 4096,
            crc32: None,
        };
        let layout = SlotLayout::new(8 * 4096, 3 * 4096).unwrap();
        let pieces = split(1, &[e], &files, 8192, layout);
        let got: Vec<(u64, u64, usize, u32, u64)> = pieces
            .iter()
            .map(|p| (p.offset, p.dst, p.len, p.part, p.part_offset))
            .collect();
        assert_eq!(
            got,
            [
                (40960, 4096, 8192, 0, 4096),
                (40960 + 8192, 3 * 4096, 8192, 1, 0),
                (40960 + 16384, 5 * 4096, 4096, 1, 8192),
                (40960 + 20480, 6 * 4096, 8192, 2, 0),
            ]
        );
    }
}
