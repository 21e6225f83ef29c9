//! What the bench test binaries share: the small datasets they read.

use std::path::Path;

use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};

/// A two-lane dataset of five frames of about 300 KB (64 KiB stripes), each frame's bytes
/// a pattern of its number.
pub fn make(dir: &Path) {
    make_on(dir, 2);
}

/// [`make`] striped over `lanes` lanes.
pub fn make_on(dir: &Path, lanes: u32) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(lanes),
        64 << 10,
        vec![AttributeSpec::new("density")],
        Provenance::new("bench test", ["x"]),
    )
    .unwrap();
    for f in 0..5u8 {
        w.push_frame_opaque(
            f64::from(f),
            vec![vec![
                f.wrapping_mul(37) ^ 0x5a;
                300_000 + usize::from(f) * 5000
            ]],
        )
        .unwrap();
    }
    w.finish().unwrap();
}
