//! Fuzzes the NanoVDB parsers: raw grid buffers and segmented `.nvdb` files (with codecs).
//! Whatever the bytes, parsing must return Ok or Err, never panic or read out of bounds,
//! and a grid that parses must answer value queries and leaf iteration without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use supercell::format::{Grid, read_nvdb_bytes, verify_checksum};

fn exercise(grid: &Grid<'_>) {
    let [lo, hi] = grid.index_bbox();
    let mut acc = grid.accessor();
    // Corners, centre and a little outside the bounding box, including negative coordinates.
    let mid = |a: i32, b: i32| ((i64::from(a) + i64::from(b)) / 2) as i32;
    for ijk in [
        lo,
        hi,
        [mid(lo[0], hi[0]), mid(lo[1], hi[1]), mid(lo[2], hi[2])],
        [lo[0].saturating_sub(1), lo[1], hi[2].saturating_add(1)],
        [-1, -1, -1],
        [0, 0, 0],
    ] {
        let _ = acc.value(ijk);
        let _ = grid.value(ijk);
        let _ = grid.is_active(ijk);
    }
    for leaf in grid.leaves().take(64) {
        let _ = leaf.values_f32();
    }
    let _ = grid.root_stats();
    let _ = verify_checksum(grid.as_bytes(), grid.version());
}

fuzz_target!(|data: &[u8]| {
    if let Ok(grids) = Grid::parse_all(data) {
        for g in &grids {
            exercise(g);
        }
    }
    if let Ok(files) = read_nvdb_bytes(data) {
        for f in &files {
            if let Ok(g) = f.grid() {
                exercise(&g);
            }
        }
    }
});
