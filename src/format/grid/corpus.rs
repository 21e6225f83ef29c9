//! Malformed inputs: every one must give `Err` (or, for harmless flips, a grid whose
//! reads stay in bounds), never a panic.
use super::*;
use crate::format::file::read_nvdb;
use crate::format::layout::*;
use crate::format::le::LeBytes;

fn u64_at(b: &[u8], off: usize) -> u64 {
    LeBytes::new(b).u64_at(off, "test field").unwrap()
}
fn bit_at(b: &[u8], mask: usize, n: usize) -> bool {
    LeBytes::new(b).bit_at(mask, n, "test mask").unwrap()
}

fn fixture(name: &str) -> Vec<u8> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nanovdb")
        .join(name);
    read_nvdb(&path).unwrap().remove(0).bytes
}

/// Reads through everything a parsed grid offers.
fn exercise(g: &Grid<'_>) {
    let _ = g.background();
    let _ = g.root_stats();
    let mut acc = g.accessor();
    let [lo, hi] = g.index_bbox();
    for i in 0..16i32 {
        let ijk = [
            lo[0].wrapping_add(i.wrapping_mul(7)),
            lo[1].wrapping_add(i.wrapping_mul(3)),
            hi[2].wrapping_sub(i),
        ];
        let _ = g.value(ijk);
        let _ = acc.value(ijk);
        let _ = g.is_active(ijk);
    }
    // The first and the last leaf (debug builds decode slowly; the sweep runs thousands).
    let n = g.leaves().len();
    for leaf in g
        .leaves()
        .take(1)
        .chain(g.leaves().skip(n.saturating_sub(1)))
    {
        let _ = leaf.values_f32();
        let _ = leaf.value(511);
    }
}

struct Bounds {
    marks: Vec<usize>,
}

/// Offsets of every structure boundary of a valid grid.
fn boundaries(g: &Grid<'_>) -> Bounds {
    let l = g.layout();
    let mut marks = vec![0, 8, 16, 20, 32, 40, 296, 632, 640, 671, 672, 700, 735, 736];
    marks.push(g.root);
    marks.push(g.root + l.root.size as usize);
    for t in 0..=g.tile_count as usize {
        marks.push(g.root + l.root.size as usize + t * l.root.tile_size as usize);
    }
    let b = g.as_bytes();
    let tree = GRID_SIZE as usize;
    let counts = g.node_counts();
    for (idx, n, size) in [
        (2, counts.upper, l.upper.size),
        (1, counts.lower, l.lower.size),
    ] {
        let first = tree + u64_at(b, tree + 8 * idx) as usize;
        for i in 0..=n as usize {
            marks.push(first + i * size as usize);
            marks.push(first + i * size as usize + 40);
        }
    }
    for i in 0..counts.leaves as usize {
        if let Some(off) = g.leaf_at_index(i) {
            marks.extend([off, off + 16, off + 80, off + 96]);
        }
    }
    marks.push(b.len());
    marks.sort();
    marks.dedup();
    Bounds { marks }
}

fn bases() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("sphere", fixture("sphere_ls.nvdb")),
        ("fog", fixture("fog_zip.nvdb")),
        ("fpn", fixture("sphere_fpn.nvdb")),
        ("velocity", fixture("velocity_zip.nvdb")),
    ]
}

#[test]
fn truncation_everywhere_is_an_error() {
    for (name, b) in bases() {
        let g = Grid::parse(&b).unwrap();
        let mut cuts = boundaries(&g).marks;
        cuts.extend((0..64).map(|i| b.len() * i / 64));
        for cut in cuts.into_iter().filter(|&c| c < b.len()) {
            // The buffer ends early...
            assert!(Grid::parse(&b[..cut]).is_err(), "{name}: cut at {cut}");
            // ...and also when the header agrees with the shorter length.
            let mut t = b[..cut].to_vec();
            if t.len() >= 40 {
                t[32..40].copy_from_slice(&(cut as u64).to_le_bytes());
            }
            assert!(
                Grid::parse(&t).is_err(),
                "{name}: cut at {cut} with grid size patched"
            );
        }
    }
}

#[test]
fn bad_header_fields() {
    let b = fixture("sphere_ls.nvdb");
    let patch = |off: usize, v: &[u8]| {
        let mut c = b.clone();
        c[off..off + v.len()].copy_from_slice(v);
        c
    };
    let err = |c: &[u8]| Grid::parse(c).unwrap_err().to_string();
    assert!(err(&patch(0, b"NanoVDB2")).contains("segmented .nvdb file"));
    assert!(err(&patch(0, b"OpenVDB!")).contains("bad magic"));
    for (maj, min) in [(31, 9), (32, 2), (32, 10), (33, 0)] {
        let e = err(&patch(16, &Version::new(maj, min, 0).0.to_le_bytes()));
        assert!(e.contains("unsupported NanoVDB version"), "{e}");
    }
    for gs in [0u64, 735, b.len() as u64 + 1, u64::MAX] {
        assert!(
            Grid::parse(&patch(32, &gs.to_le_bytes())).is_err(),
            "grid size {gs}"
        );
    }
    assert!(err(&patch(636, &99u32.to_le_bytes())).contains("unknown grid type 99"));
    assert!(err(&patch(636, &0u32.to_le_bytes())).contains("no defined layout"));
    // A wrong value type changes every node size: caught structurally.
    assert!(Grid::parse(&patch(636, &(GridType::Double as u32).to_le_bytes())).is_err());
    assert!(Grid::parse(&patch(28, &0u32.to_le_bytes())).is_err()); // grid count 0
    assert!(Grid::parse(&patch(24, &5u32.to_le_bytes())).is_err()); // index >= count
    // Blind metadata pointing outside.
    let mut c = patch(648, &1u32.to_le_bytes());
    c[640..648].copy_from_slice(&(b.len() as i64 - 100).to_le_bytes());
    assert!(err(&c).contains("blind metadata"));
    // Unknown classes are metadata only.
    let g = patch(632, &77u32.to_le_bytes());
    let g = Grid::parse(&g).unwrap();
    assert_eq!(
        (g.grid_class(), g.header().grid_class_raw),
        (GridClass::Unknown, 77)
    );
}

#[test]
fn offsets_pointing_outside_and_absurd_counts() {
    let b = fixture("sphere_ls.nvdb");
    let g = Grid::parse(&b).unwrap();
    let tree = GRID_SIZE as usize;
    let (root, l) = (g.root, *g.layout());
    let first_tile = root + l.root.size as usize;
    let upper = tree + u64_at(&b, tree + 16) as usize;
    let child_slot = {
        // The first child entry of the upper node.
        let mut n = 0;
        while !bit_at(&b, upper + l.upper.off_child_mask as usize, n) {
            n += 1;
        }
        upper + l.upper.off_table as usize + n * l.upper.table_stride as usize
    };
    let cases: Vec<(&str, usize, Vec<u8>, &str)> = vec![
        (
            "root offset huge",
            tree + 24,
            u64::MAX.to_le_bytes().into(),
            "root offset",
        ),
        (
            "root offset past end",
            tree + 24,
            (b.len() as u64).to_le_bytes().into(),
            "root offset",
        ),
        (
            "root offset misaligned",
            tree + 24,
            (root as u64 - tree as u64 + 8).to_le_bytes().into(),
            "aligned",
        ),
        (
            "leaf offset huge",
            tree,
            (1u64 << 40).to_le_bytes().into(),
            "first leaf",
        ),
        (
            "upper offset misaligned",
            tree + 16,
            (upper as u64 - tree as u64 + 4).to_le_bytes().into(),
            "upper node",
        ),
        (
            "leaf count huge",
            tree + 32,
            u32::MAX.to_le_bytes().into(),
            "leafs",
        ),
        (
            "lower count huge",
            tree + 36,
            u32::MAX.to_le_bytes().into(),
            "lower nodes",
        ),
        (
            "upper count 0",
            tree + 40,
            0u32.to_le_bytes().into(),
            "upper nodes",
        ),
        (
            "leaf count -1",
            tree + 32,
            (g.node_counts().leaves - 1).to_le_bytes().into(),
            "leaf",
        ),
        (
            "table size huge",
            root + 24,
            u32::MAX.to_le_bytes().into(),
            "root table",
        ),
        (
            "tile child outside",
            first_tile + 8,
            (1i64 << 40).to_le_bytes().into(),
            "root tile 0",
        ),
        (
            "tile child negative",
            first_tile + 8,
            (-(root as i64) - 1).to_le_bytes().into(),
            "root tile 0",
        ),
        (
            "tile child into root",
            first_tile + 8,
            32i64.to_le_bytes().into(),
            "upper nodes",
        ),
        (
            "upper child outside",
            child_slot,
            (1i64 << 33).to_le_bytes().into(),
            "upper node 0",
        ),
        (
            "upper child misaligned",
            child_slot,
            (l.upper.size as i64 + 32).to_le_bytes().into(),
            "lower nodes",
        ),
    ];
    for (what, off, v, needle) in cases {
        let mut c = b.clone();
        c[off..off + v.len()].copy_from_slice(&v);
        let e = Grid::parse(&c)
            .err()
            .unwrap_or_else(|| panic!("{what}: accepted"))
            .to_string();
        assert!(e.contains(needle), "{what}: {e}");
    }
    // A stray child bit: the table entry there is a value, not a child offset.
    let mut c = b.clone();
    let mask = upper + l.upper.off_child_mask as usize;
    let n = (0..32768).find(|&n| !bit_at(&b, mask, n)).unwrap();
    c[mask + n / 8] |= 1 << (n % 8);
    let e = Grid::parse(&c).unwrap_err().to_string();
    assert!(
        e.contains("upper node 0") && e.contains(&format!("child {n}")),
        "{e}"
    );
    // A leaf whose stored origin disagrees with its place in the tree.
    let mut c = b.clone();
    let leaf = g.leaf_at_index(3).unwrap();
    c[leaf] ^= 0x10;
    assert!(Grid::parse(&c).unwrap_err().to_string().contains("leaf 3"));
}

#[test]
fn byte_flip_sweep() {
    // The fog grid (6.8 MB, 4 ms per parse in debug builds) is left to the other tests.
    for (name, b) in bases().into_iter().filter(|(n, _)| *n != "fog") {
        let g = Grid::parse(&b).unwrap();
        let root_end = g.root
            + g.layout().root.size as usize
            + g.tile_count as usize * g.layout().root.tile_size as usize;
        let structural: Vec<std::ops::Range<usize>> = vec![
            0..8,                                             // magic
            32..40,                                           // grid size
            GRID_SIZE as usize + 24..GRID_SIZE as usize + 28, // root offset (low bytes)
            GRID_SIZE as usize + 32..GRID_SIZE as usize + 44, // node counts
        ];
        let mut offsets: Vec<usize> = (0..(root_end + 64).min(b.len())).collect();
        offsets.extend((root_end..b.len()).step_by(b.len() / 500 + 1));
        let mut c = b.clone();
        for off in offsets {
            for mask in [0x01u8, 0x10, 0x80, 0xff] {
                c[off] ^= mask;
                // "NanoVDB0" with the last bit flipped is "NanoVDB1": still a grid.
                let benign = off == 7 && mask == 0x01;
                match Grid::parse(&c) {
                    Ok(g) => {
                        assert!(
                            benign || !structural.iter().any(|r| r.contains(&off)),
                            "{name}: flip {mask:#x} at byte {off} accepted"
                        );
                        exercise(&g);
                    }
                    Err(e) => assert!(!e.to_string().is_empty()),
                }
                c[off] ^= mask;
            }
        }
    }
}

#[test]
fn random_mutations_never_panic() {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut rnd = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    for (_, b) in bases() {
        let len = b.len();
        let mut c = b.clone();
        for _ in 0..300 {
            let mut changed = Vec::new();
            for _ in 0..1 + rnd() % 8 {
                let off = if rnd() % 2 == 0 {
                    (rnd() % 2048) as usize % len
                } else {
                    (rnd() as usize) % len
                };
                changed.push((off, c[off]));
                c[off] = rnd() as u8;
            }
            if let Ok(g) = Grid::parse(&c) {
                exercise(&g);
            }
            let _ = Grid::parse_all(&c);
            for (off, v) in changed.into_iter().rev() {
                c[off] = v;
            }
        }
    }
}
