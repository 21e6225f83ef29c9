//! Property tests: striping arithmetic, and write → read of random frames is byte-exact.

mod test_bytes;
use test_bytes::xorshift_bytes as payload;

use proptest::prelude::*;
use supercell::dataset::stripe::{slot_layout, stripe};
use supercell::dataset::{
    ALIGN, AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetWriter, LaneSpec, Provenance,
    verify,
};

const PAGE: u64 = ALIGN;

proptest! {
    #[test]
    fn stripe_tiles_aligns_and_balances(
        pages in 0u64..400,
        chunk_pages in 1u64..40,
        lanes in 1u32..20,
        frame in any::<u64>(),
    ) {
        let slot = pages * PAGE;
        let chunk = chunk_pages * PAGE;
        let chunks = stripe(slot, chunk, lanes, frame);
        let mut next = 0;
        let mut per_lane = vec![0u64; lanes as usize];
        for (c, s) in chunks.iter().enumerate() {
            prop_assert_eq!(s.dst, next, "gap or overlap at chunk {}", c);
            prop_assert!(s.len > 0 && s.len <= chunk);
            prop_assert_eq!(s.dst % PAGE, 0);
            prop_assert_eq!(s.len % PAGE, 0);
            prop_assert!(s.lane < lanes);
            prop_assert_eq!(u64::from(s.lane), (c as u64 + frame % u64::from(lanes)) % u64::from(lanes));
            per_lane[s.lane as usize] += s.len;
            next += s.len;
        }
        prop_assert_eq!(next, slot);
        let (lo, hi) = (per_lane.iter().min().unwrap(), per_lane.iter().max().unwrap());
        prop_assert!(hi - lo <= chunk, "lane bytes {:?} differ by more than a chunk", per_lane);
    }

    #[test]
    fn layout_aligns_and_separates(sizes in prop::collection::vec(1u64..100_000, 0..12)) {
        let (offsets, total) = slot_layout(&sizes).unwrap();
        prop_assert_eq!(offsets.len(), sizes.len());
        prop_assert_eq!(total % PAGE, 0);
        prop_assert_eq!(total, sizes.iter().map(|s| s.next_multiple_of(PAGE)).sum::<u64>());
        for i in 0..sizes.len() {
            prop_assert_eq!(offsets[i] % PAGE, 0);
            let end = offsets[i] + sizes[i];
            prop_assert!(end <= offsets.get(i + 1).copied().unwrap_or(total));
        }
    }
}

/// A frame's slot image built the obvious way, to compare the reader against.
fn expected_slot(grids: &[Vec<u8>]) -> Vec<u8> {
    let mut v = Vec::new();
    for g in grids {
        v.extend_from_slice(g);
        v.resize(v.len().next_multiple_of(PAGE as usize), 0);
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn write_then_read_is_byte_identical(
        frames in (1usize..=3).prop_flat_map(|attrs| {
            prop::collection::vec(prop::collection::vec(1usize..60_000, attrs), 1..5)
        }),
        chunk_pages in 1u64..6,
        lanes in 1u32..6,
        segment_chunks in 1u64..5,
        seed in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let chunk = chunk_pages * PAGE;
        let attrs = (0..frames[0].len()).map(|a| AttributeSpec::new(format!("a{a}"))).collect();
        let mut w = DatasetWriter::create(
            dir.path(), LaneSpec::Count(lanes), chunk, attrs, Provenance::new("proptest", ["x"]),
        ).unwrap();
        w.set_segment_size(chunk * segment_chunks).unwrap();
        let mut images = Vec::new();
        for (f, sizes) in frames.iter().enumerate() {
            let grids: Vec<Vec<u8>> = sizes
                .iter()
                .enumerate()
                .map(|(a, &n)| payload(seed ^ (f as u64 * 31 + a as u64), n))
                .collect();
            images.push(expected_slot(&grids));
            w.push_frame_opaque(f as f64 * 0.5, grids).unwrap();
        }
        let written = w.finish().unwrap();
        let ds = Dataset::open(dir.path()).unwrap();
        prop_assert_eq!(&ds.manifest().frames, &written.frames);
        let mut buf = AlignedBuf::new();
        for (f, image) in images.iter().enumerate() {
            ds.read_frame(f, &mut buf, CrcCheck::Verify).unwrap();
            prop_assert_eq!(buf.as_ptr() as usize % 4096, 0);
            prop_assert!(buf[..] == image[..], "frame {} differs", f);
            for e in ds.frame_extents(f) {
                prop_assert!(e.offset % PAGE == 0 && e.len % PAGE == 0 && e.dst % PAGE == 0);
                prop_assert!(e.len <= chunk);
            }
            for (a, g) in ds.manifest().frames[f].grids.iter().enumerate() {
                prop_assert_eq!(g.size as usize, frames[f][a]);
            }
        }
        let report = verify(&ds, |_| {});
        prop_assert!(report.is_ok(), "{:?}", report.problems);
        prop_assert_eq!(report.grids_skipped as usize, frames.len() * frames[0].len());
    }
}
