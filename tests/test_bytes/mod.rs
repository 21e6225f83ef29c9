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

/// Writes a dataset of opaque grids at `dir`: attributes `a` and `b`, `frames` frames over
/// `lanes` lanes in `chunk`-byte stripes, grid `g` of frame `f` being
/// `xorshift_bytes(seed, len)` for `(seed, len) = grid(f, g)`. Returns each frame's
/// expected slot image (its grids, each padded to 4 KiB, as the dataset lays them out).
#[allow(dead_code)]
pub fn opaque_dataset(
    dir: &std::path::Path,
    frames: usize,
    lanes: u32,
    chunk: u64,
    made_by: &str,
    grid: impl Fn(usize, usize) -> (u64, usize),
) -> Vec<Vec<u8>> {
    use supercell::dataset::{AttributeSpec, DatasetWriter, LaneSpec, Provenance};
    const PAGE: usize = 4096;
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(lanes),
        chunk,
        vec![AttributeSpec::new("a"), AttributeSpec::new("b")],
        Provenance::new(made_by, ["x"]),
    )
    .unwrap();
    let mut images = Vec::new();
    for f in 0..frames {
        let grids: Vec<Vec<u8>> = (0..2)
            .map(|g| {
                let (seed, len) = grid(f, g);
                xorshift_bytes(seed, len)
            })
            .collect();
        let mut img = Vec::new();
        for g in &grids {
            img.extend_from_slice(g);
            img.resize(img.len().next_multiple_of(PAGE), 0);
        }
        images.push(img);
        w.push_frame_opaque(f as f64, grids).unwrap();
    }
    w.finish().unwrap();
    images
}
