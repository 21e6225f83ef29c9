use super::accessor::{lower_offset, upper_offset};
use super::*;
use crate::format::layout::*;

fn put(b: &mut [u8], off: usize, v: &[u8]) {
    b[off..off + v.len()].copy_from_slice(v);
}

/// What [`tiny_grid`] builds: one leaf under one lower under one upper node, plus a value
/// tile at each level (root tile at x - 4096, an upper tile and a lower tile next to the
/// children) so every path of the accessor is exercised.
pub(crate) struct Tiny {
    pub grid_type: GridType,
    /// Leaf origin (multiple of 8).
    pub origin: Coord,
    /// Background value bytes (value size of the type).
    pub background: Vec<u8>,
    /// Tile value bytes used for the three tiles.
    pub tile: Vec<u8>,
    /// Leaf bytes from offset 80 to the end of the leaf.
    pub leaf_tail: Vec<u8>,
    /// Leaf flags byte.
    pub leaf_flags: u8,
    /// Leaf active mask.
    pub mask: [u64; 8],
}

/// Builds the grid buffer described by `t` (NanoVDB 32.9 layout, no checksum).
pub(crate) fn tiny_grid(t: &Tiny) -> Vec<u8> {
    let lay = layout(t.grid_type).unwrap();
    let (rl, ul, ll) = (lay.root, lay.upper, lay.lower);
    let root = (GRID_SIZE + TREE_SIZE) as usize;
    let tiles = 2usize;
    let upper = root + rl.size as usize + tiles * rl.tile_size as usize;
    let upper = upper.next_multiple_of(32);
    let lower = upper + ul.size as usize;
    let leaf = lower + ll.size as usize;
    let leaf_size = 80 + t.leaf_tail.len();
    let size = (leaf + leaf_size).next_multiple_of(32);
    let mut b = vec![0u8; size];
    put(&mut b, 0, &MAGIC_GRID_BYTES);
    put(&mut b, 8, &u64::MAX.to_le_bytes());
    put(&mut b, 16, &Version::new(32, 9, 2).0.to_le_bytes());
    put(&mut b, 20, &GRID_FLAG_IS_BREADTH_FIRST.to_le_bytes());
    put(&mut b, 28, &1u32.to_le_bytes());
    put(&mut b, 32, &(size as u64).to_le_bytes());
    put(&mut b, 40, b"tiny");
    let m = GRID_OFF_MAP as usize;
    for i in [0, 4, 8] {
        put(
            &mut b,
            m + MAP_OFF_MATD as usize + 8 * i,
            &1f64.to_le_bytes(),
        );
        put(
            &mut b,
            m + MAP_OFF_INVMATD as usize + 8 * i,
            &1f64.to_le_bytes(),
        );
    }
    put(
        &mut b,
        GRID_OFF_GRID_CLASS as usize,
        &(GridClass::FogVolume as u32).to_le_bytes(),
    );
    put(
        &mut b,
        GRID_OFF_GRID_TYPE as usize,
        &(t.grid_type as u32).to_le_bytes(),
    );
    put(
        &mut b,
        GRID_OFF_BLIND_METADATA_OFFSET as usize,
        &(size as i64).to_le_bytes(),
    );
    let tr = GRID_SIZE as usize;
    for (i, off) in [leaf, lower, upper, root].iter().enumerate() {
        put(&mut b, tr + 8 * i, &((off - tr) as u64).to_le_bytes());
    }
    for i in 0..3 {
        put(&mut b, tr + 32 + 4 * i, &1u32.to_le_bytes());
        put(&mut b, tr + 44 + 4 * i, &1u32.to_le_bytes());
    }
    let ones: u32 = t.mask.iter().map(|w| w.count_ones()).sum();
    put(&mut b, tr + 56, &u64::from(ones).to_le_bytes());
    // Root.
    put(&mut b, root, &bytes_of_coord(t.origin));
    put(&mut b, root + 12, &bytes_of_coord(t.origin.map(|c| c + 7)));
    put(&mut b, root + 24, &(tiles as u32).to_le_bytes());
    put(&mut b, root + rl.off_background as usize, &t.background);
    let t0 = root + rl.size as usize;
    put(&mut b, t0, &coord_to_key(t.origin).to_le_bytes());
    put(&mut b, t0 + 8, &((upper - root) as i64).to_le_bytes());
    let t1 = t0 + rl.tile_size as usize;
    let tile_origin = [t.origin[0].wrapping_sub(4096), t.origin[1], t.origin[2]];
    put(&mut b, t1, &coord_to_key(tile_origin).to_le_bytes());
    put(&mut b, t1 + 16, &1u32.to_le_bytes());
    put(&mut b, t1 + rl.tile_off_value as usize, &t.tile);
    // Upper: the child, and an active tile in the next slot along z.
    let n = upper_offset(t.origin);
    let nt = n ^ 1;
    set_bit(&mut b, upper + ul.off_child_mask as usize, n);
    set_bit(&mut b, upper + INTERNAL_OFF_VALUE_MASK as usize, nt);
    put(
        &mut b,
        upper + ul.off_table as usize + n * ul.table_stride as usize,
        &((lower - upper) as i64).to_le_bytes(),
    );
    put(
        &mut b,
        upper + ul.off_table as usize + nt * ul.table_stride as usize,
        &t.tile,
    );
    // Lower: the child leaf and an (inactive) tile next to it.
    let n = lower_offset(t.origin);
    set_bit(&mut b, lower + ll.off_child_mask as usize, n);
    put(
        &mut b,
        lower + ll.off_table as usize + n * ll.table_stride as usize,
        &((leaf - lower) as i64).to_le_bytes(),
    );
    put(
        &mut b,
        lower + ll.off_table as usize + (n ^ 1) * ll.table_stride as usize,
        &t.tile,
    );
    // Leaf.
    put(&mut b, leaf, &bytes_of_coord(t.origin));
    b[leaf + 15] = t.leaf_flags;
    for (w, word) in t.mask.iter().enumerate() {
        put(&mut b, leaf + 16 + 8 * w, &word.to_le_bytes());
    }
    put(&mut b, leaf + 80, &t.leaf_tail);
    b
}

fn bytes_of_coord(c: Coord) -> Vec<u8> {
    c.iter().flat_map(|v| v.to_le_bytes()).collect()
}
fn set_bit(b: &mut [u8], off: usize, n: usize) {
    b[off + n / 8] |= 1 << (n % 8);
}

/// Leaf bytes after the 80-byte header for a plain leaf of `layout(t)`, with `values`
/// (already encoded) written at the table.
fn plain_tail(t: GridType, values: &[u8]) -> Vec<u8> {
    let lf = layout(t).unwrap().leaf;
    let mut tail = vec![0u8; lf.size as usize - 80];
    let at = lf.off_table as usize - 80;
    tail[at..at + values.len()].copy_from_slice(values);
    tail
}

fn leaf_ijk(origin: Coord, n: usize) -> Coord {
    [
        origin[0] + (n >> 6) as i32,
        origin[1] + ((n >> 3) & 7) as i32,
        origin[2] + (n & 7) as i32,
    ]
}

fn check_paths(g: &Grid<'_>, origin: Coord, bg: Value, tile: Value) {
    assert_eq!(g.value([origin[0] + 100_000, 0, 0]).unwrap(), bg);
    assert!(!g.is_active([origin[0] + 100_000, 0, 0]));
    // Root tile at x - 4096: active.
    let rt = [origin[0].wrapping_sub(4096), origin[1], origin[2]];
    assert_eq!(g.value(rt).unwrap(), tile);
    assert!(g.is_active(rt));
    // Upper tile: the neighbouring 128³ block along z (n ^ 1 flips the lowest z bit).
    let ut = [origin[0], origin[1], origin[2] ^ 128];
    assert_eq!(g.value(ut).unwrap(), tile);
    assert!(g.is_active(ut));
    // Lower tile: the neighbouring 8³ block along z (inactive).
    let lt = [origin[0], origin[1], origin[2] ^ 8];
    assert_eq!(g.value(lt).unwrap(), tile);
    assert!(!g.is_active(lt));
}

#[test]
fn half_grid_values_and_tiles() {
    let halves: Vec<u16> = (0..512u16).map(|i| i.wrapping_mul(131) ^ 0x3c00).collect();
    let vals: Vec<u8> = halves.iter().flat_map(|h| h.to_le_bytes()).collect();
    let t = Tiny {
        grid_type: GridType::Half,
        origin: [-8, 16, -4096],
        background: 0x3c00u16.to_le_bytes().to_vec(), // 1.0
        tile: 0xc000u16.to_le_bytes().to_vec(),       // -2.0
        leaf_tail: plain_tail(GridType::Half, &vals),
        leaf_flags: 0,
        mask: [0x5555_5555_5555_5555; 8],
    };
    let b = tiny_grid(&t);
    let g = Grid::parse(&b).unwrap();
    check_paths(&g, t.origin, Value::Float(1.0), Value::Float(-2.0));
    let mut acc = g.accessor();
    for (n, &h) in halves.iter().enumerate() {
        let ijk = leaf_ijk(t.origin, n);
        let want = Value::Float(half_to_f32(h));
        assert!(same_bits(g.value(ijk).unwrap(), want), "{n}");
        assert!(same_bits(acc.value(ijk).unwrap(), want));
        assert_eq!(g.is_active(ijk), n % 2 == 0);
    }
    let leaf = g.leaves().next().unwrap();
    assert_eq!(leaf.origin(), t.origin);
    assert_eq!(leaf.active_count(), 256);
}

/// The cheap header check accepts a good grid (whole or a 4 KiB prefix) and names each
/// structural damage: magic, version, size, type, grid index, tree offsets.
#[test]
fn header_check_accepts_good_grids_and_names_damage() {
    let halves: Vec<u8> = (0..512u16).flat_map(|h| h.to_le_bytes()).collect();
    let t = Tiny {
        grid_type: GridType::Half,
        origin: [0, 0, 0],
        background: 0x3c00u16.to_le_bytes().to_vec(),
        tile: 0xc000u16.to_le_bytes().to_vec(),
        leaf_tail: plain_tail(GridType::Half, &halves),
        leaf_flags: 0,
        mask: [u64::MAX; 8],
    };
    let good = tiny_grid(&t);
    let len = good.len() as u64;
    assert_eq!(Grid::check_header(&good, len).unwrap(), len);
    let prefix = &good[..Grid::HEADER_PREFIX.min(good.len())];
    assert_eq!(Grid::check_header(prefix, len).unwrap(), len);
    let tree = GRID_SIZE as usize;
    type Damage = Box<dyn Fn(&mut Vec<u8>)>;
    let cases: Vec<(&str, Damage, &str)> = vec![
        ("magic", Box::new(|b| b[0] ^= 0xff), "magic"),
        (
            "version",
            Box::new(|b| put(b, 16, &Version::new(99, 0, 0).0.to_le_bytes())),
            "version",
        ),
        (
            "size",
            Box::new(|b| {
                let n = b.len() as u64 * 2;
                put(b, 32, &n.to_le_bytes())
            }),
            "grid",
        ),
        (
            "type",
            Box::new(|b| put(b, GRID_OFF_GRID_TYPE as usize, &999u32.to_le_bytes())),
            "unknown grid type 999",
        ),
        (
            "index",
            Box::new(|b| put(b, GRID_OFF_GRID_INDEX as usize, &5u32.to_le_bytes())),
            "grid index 5",
        ),
        (
            "root",
            Box::new(move |b| {
                put(
                    b,
                    tree + TREE_OFF_NODE_OFFSET_LEAF as usize + 24,
                    &(1u64 << 40).to_le_bytes(),
                )
            }),
            "root offset",
        ),
        (
            "leaves",
            Box::new(move |b| {
                put(
                    b,
                    tree + TREE_OFF_NODE_OFFSET_LEAF as usize,
                    &(1u64 << 40).to_le_bytes(),
                )
            }),
            "first leaf",
        ),
    ];
    for (name, damage, needle) in cases {
        let mut b = good.clone();
        damage(&mut b);
        let e = Grid::check_header(&b, len).expect_err(name).to_string();
        assert!(e.contains(needle), "{name}: {e}");
    }
    // Too short to hold the headers at all.
    assert!(Grid::check_header(&good[..100], len).is_err());
}

fn same_bits(a: Value, b: Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => {
            x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
        }
        _ => a == b,
    }
}

#[test]
fn other_value_types() {
    for case in scalar_value_cases().into_iter().chain(vector_value_cases()) {
        check_value_type(case);
    }
}

/// One value type: (type, background, tile value, leaf value encoder, expected leaf value,
/// bg, tile).
type ValueCase = (
    GridType,
    Vec<u8>,
    Vec<u8>,
    Box<dyn Fn(usize) -> Vec<u8>>,
    Box<dyn Fn(usize) -> Value>,
    Value,
    Value,
);

/// The integer and floating-point types of the value-type cases.
fn scalar_value_cases() -> Vec<ValueCase> {
    vec![
        (
            GridType::Double,
            2.5f64.to_le_bytes().into(),
            (-1f64).to_le_bytes().into(),
            Box::new(|n| (n as f64 * 0.1).to_le_bytes().into()),
            Box::new(|n| Value::Double(n as f64 * 0.1)),
            Value::Double(2.5),
            Value::Double(-1.0),
        ),
        (
            GridType::Int32,
            7i32.to_le_bytes().into(),
            (-9i32).to_le_bytes().into(),
            Box::new(|n| (n as i32 - 300).to_le_bytes().into()),
            Box::new(|n| Value::Int(n as i64 - 300)),
            Value::Int(7),
            Value::Int(-9),
        ),
        (
            GridType::Int16,
            7i16.to_le_bytes().into(),
            (-9i16).to_le_bytes().into(),
            Box::new(|n| (n as i16 - 300).to_le_bytes().into()),
            Box::new(|n| Value::Int(n as i64 - 300)),
            Value::Int(7),
            Value::Int(-9),
        ),
        (
            GridType::Int64,
            7i64.to_le_bytes().into(),
            (-9i64).to_le_bytes().into(),
            Box::new(|n| (n as i64 * -1_000_000_007).to_le_bytes().into()),
            Box::new(|n| Value::Int(n as i64 * -1_000_000_007)),
            Value::Int(7),
            Value::Int(-9),
        ),
        (
            GridType::UInt32,
            7u32.to_le_bytes().into(),
            u32::MAX.to_le_bytes().into(),
            Box::new(|n| (n as u32 * 3).to_le_bytes().into()),
            Box::new(|n| Value::Int(n as i64 * 3)),
            Value::Int(7),
            Value::Int(u32::MAX as i64),
        ),
        (
            GridType::UInt8,
            vec![7],
            vec![200],
            Box::new(|n| vec![n as u8]),
            Box::new(|n| Value::Int((n as u8) as i64)),
            Value::Int(7),
            Value::Int(200),
        ),
    ]
}

/// The vector and colour types of the value-type cases.
fn vector_value_cases() -> Vec<ValueCase> {
    vec![
        (
            GridType::Vec3f,
            [1f32, 2., 3.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            [4f32, 5., 6.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Box::new(|n| {
                [n as f32, -(n as f32), 0.5]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            }),
            Box::new(|n| Value::Vec3f([n as f32, -(n as f32), 0.5])),
            Value::Vec3f([1., 2., 3.]),
            Value::Vec3f([4., 5., 6.]),
        ),
        (
            GridType::Vec3d,
            [1f64, 2., 3.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            [4f64, 5., 6.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Box::new(|n| {
                [n as f64, 1.0, -2.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            }),
            Box::new(|n| Value::Vec3d([n as f64, 1.0, -2.0])),
            Value::Vec3d([1., 2., 3.]),
            Value::Vec3d([4., 5., 6.]),
        ),
        (
            GridType::Vec4f,
            [1f32, 2., 3., 4.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            [4f32, 5., 6., 7.]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
            Box::new(|n| {
                [n as f32, 1.0, -2.0, 3.0]
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect()
            }),
            Box::new(|n| Value::Vec4f([n as f32, 1.0, -2.0, 3.0])),
            Value::Vec4f([1., 2., 3., 4.]),
            Value::Vec4f([4., 5., 6., 7.]),
        ),
        (
            GridType::Rgba8,
            vec![1, 2, 3, 4],
            vec![9, 8, 7, 6],
            Box::new(|n| vec![n as u8, 1, 2, 3]),
            Box::new(|n| Value::Rgba8([n as u8, 1, 2, 3])),
            Value::Rgba8([1, 2, 3, 4]),
            Value::Rgba8([9, 8, 7, 6]),
        ),
    ]
}

/// A leaf and a tile of one value type read back: every voxel, the background, the tile
/// and the leaf's own accessors.
fn check_value_type((t, bg, tile, enc, dec, bgv, tilev): ValueCase) {
    let vals: Vec<u8> = (0..512).flat_map(&enc).collect();
    let tiny = Tiny {
        grid_type: t,
        origin: [4088, -4096, 120],
        background: bg,
        tile,
        leaf_tail: plain_tail(t, &vals),
        leaf_flags: 0,
        mask: [u64::MAX, 0, 1, 2, 3, 4, 5, 6],
    };
    let b = tiny_grid(&tiny);
    let g = Grid::parse(&b).unwrap_or_else(|e| panic!("{t:?}: {e}"));
    check_paths(&g, tiny.origin, bgv, tilev);
    assert_eq!(g.background().unwrap(), bgv);
    for n in 0..512 {
        assert_eq!(
            g.value(leaf_ijk(tiny.origin, n)).unwrap(),
            dec(n),
            "{t:?} voxel {n}"
        );
    }
    let leaf = g.leaves().next().unwrap();
    assert_eq!(leaf.value(3).unwrap(), dec(3));
    assert_eq!(
        leaf.values_f32().is_ok(),
        dec(0).as_f32().is_some(),
        "{t:?}"
    );
}

#[test]
fn bool_and_mask_grids() {
    // Boolean: values in a second mask at byte 80 of the leaf.
    let mut tail = vec![0u8; 80];
    tail[0] = 0b1010_0101;
    let t = Tiny {
        grid_type: GridType::Boolean,
        origin: [0, 0, 0],
        background: vec![0],
        tile: vec![1],
        leaf_tail: tail,
        leaf_flags: 0,
        mask: [0b11, 0, 0, 0, 0, 0, 0, 0],
    };
    let b = tiny_grid(&t);
    let g = Grid::parse(&b).unwrap();
    check_paths(&g, t.origin, Value::Bool(false), Value::Bool(true));
    let want = [true, false, true, false, false, true, false, true];
    for (n, w) in want.iter().enumerate() {
        assert_eq!(g.value(leaf_ijk(t.origin, n)).unwrap(), Value::Bool(*w));
    }
    assert!(g.is_active([0, 0, 1]) && !g.is_active([0, 0, 2]));
    assert!(g.root_stats().is_none());
    // Mask: the value is the active state.
    let t = Tiny {
        grid_type: GridType::Mask,
        leaf_tail: vec![0u8; 16],
        ..t
    };
    let b = tiny_grid(&t);
    let g = Grid::parse(&b).unwrap();
    assert_eq!(g.value([0, 0, 1]).unwrap(), Value::Bool(true));
    assert_eq!(g.value([0, 0, 2]).unwrap(), Value::Bool(false));
}

#[test]
fn fpn_every_bit_width() {
    for log2 in 0..=4u8 {
        let bits = 1u32 << log2;
        let codes: Vec<u32> = (0..512u32)
            .map(|n| (n.wrapping_mul(2_654_435_761) >> 7) & ((1u64 << bits) - 1) as u32)
            .collect();
        let mut packed = vec![0u8; 64 * bits as usize];
        for (n, c) in codes.iter().enumerate() {
            let bit = n * bits as usize;
            if bits == 16 {
                packed[2 * n..2 * n + 2].copy_from_slice(&(*c as u16).to_le_bytes());
            } else {
                packed[bit / 8] |= (*c as u8) << (bit % 8);
            }
        }
        let (min, q) = (-1.25f32, 0.0371f32);
        let mut tail = Vec::new();
        tail.extend_from_slice(&min.to_le_bytes());
        tail.extend_from_slice(&q.to_le_bytes());
        tail.extend_from_slice(&[0u8; 8]);
        tail.extend_from_slice(&packed);
        let t = Tiny {
            grid_type: GridType::FpN,
            origin: [-4096, -8, 4096],
            background: 0.5f32.to_le_bytes().to_vec(),
            tile: 9f32.to_le_bytes().to_vec(),
            leaf_tail: tail,
            leaf_flags: log2 << 5 | 0x12,
            mask: [1; 8],
        };
        let b = tiny_grid(&t);
        let g = Grid::parse(&b).unwrap_or_else(|e| panic!("{bits} bits: {e}"));
        check_paths(&g, t.origin, Value::Float(0.5), Value::Float(9.0));
        for (n, &code) in codes.iter().enumerate() {
            let want = code as f32 * q + min;
            assert_eq!(
                g.value(leaf_ijk(t.origin, n)).unwrap(),
                Value::Float(want),
                "{bits} bits voxel {n}"
            );
        }
    }
    // Bit-width code 5 (32 bits) is not one NanoVDB decodes: rejected at parse.
    let t = Tiny {
        grid_type: GridType::FpN,
        origin: [0; 3],
        background: vec![0; 4],
        tile: vec![0; 4],
        leaf_tail: vec![0; 16 + 64 * 32],
        leaf_flags: 5 << 5,
        mask: [0; 8],
    };
    let e = Grid::parse(&tiny_grid(&t)).unwrap_err().to_string();
    assert!(e.contains("leaf 0") && e.contains("bit-width"), "{e}");
}

#[test]
fn index_grids_parse_but_values_are_unsupported() {
    let t = Tiny {
        grid_type: GridType::OnIndex,
        origin: [0; 3],
        background: vec![0; 8],
        tile: vec![0; 8],
        leaf_tail: vec![0; 16],
        leaf_flags: 0,
        mask: [0; 8],
    };
    let b = tiny_grid(&t);
    let g = Grid::parse(&b).unwrap();
    let e = g.value([0, 0, 0]).unwrap_err();
    assert!(
        matches!(
            e,
            FormatError::Unsupported {
                grid_type: GridType::OnIndex,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("OnIndex"));
    assert!(g.background().is_err());
    assert!(!g.is_active([0, 0, 0]));
}

#[test]
fn long_grid_name_from_blind_data() {
    let t = Tiny {
        grid_type: GridType::Float,
        origin: [0; 3],
        background: 0f32.to_le_bytes().to_vec(),
        tile: 0f32.to_le_bytes().to_vec(),
        leaf_tail: plain_tail(GridType::Float, &[]),
        leaf_flags: 0,
        mask: [0; 8],
    };
    let mut b = tiny_grid(&t);
    let long: String = (0..300)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let meta = b.len();
    let data = meta + BLIND_META_SIZE as usize;
    b.resize(data + (long.len() + 1).next_multiple_of(32), 0);
    let size = b.len() as u64;
    put(&mut b, GRID_OFF_GRID_SIZE as usize, &size.to_le_bytes());
    put(
        &mut b,
        GRID_OFF_FLAGS as usize,
        &(GRID_FLAG_HAS_LONG_GRID_NAME | GRID_FLAG_IS_BREADTH_FIRST).to_le_bytes(),
    );
    put(
        &mut b,
        GRID_OFF_BLIND_METADATA_OFFSET as usize,
        &(meta as i64).to_le_bytes(),
    );
    put(
        &mut b,
        GRID_OFF_BLIND_METADATA_COUNT as usize,
        &1u32.to_le_bytes(),
    );
    put(&mut b, meta, &((data - meta) as i64).to_le_bytes());
    put(&mut b, meta + 8, &(long.len() as u64 + 1).to_le_bytes());
    put(&mut b, meta + 16, &1u32.to_le_bytes());
    put(&mut b, meta + 24, &BLIND_CLASS_GRID_NAME.to_le_bytes());
    put(&mut b, data, long.as_bytes());
    let g = Grid::parse(&b).unwrap();
    assert_eq!(g.name(), long);
    // Its data offset pointing outside the grid is an error naming the entry.
    put(&mut b, meta, &(1i64 << 40).to_le_bytes());
    let e = Grid::parse(&b).unwrap_err().to_string();
    assert!(e.contains("blind metadata 0 (grid name)"), "{e}");
}

#[test]
fn multi_grid_buffers() {
    let t = Tiny {
        grid_type: GridType::Float,
        origin: [0; 3],
        background: 1f32.to_le_bytes().to_vec(),
        tile: 2f32.to_le_bytes().to_vec(),
        leaf_tail: plain_tail(GridType::Float, &[]),
        leaf_flags: 0,
        mask: [0; 8],
    };
    let one = tiny_grid(&t);
    let mut buf = Vec::new();
    for i in 0..3u32 {
        let mut g = one.clone();
        g[24..28].copy_from_slice(&i.to_le_bytes());
        g[28..32].copy_from_slice(&3u32.to_le_bytes());
        g[40] = b'a' + i as u8;
        buf.extend_from_slice(&g);
    }
    let grids = Grid::parse_all(&buf).unwrap();
    assert_eq!(
        grids
            .iter()
            .map(|g| g.name().to_owned())
            .collect::<Vec<_>>(),
        ["ainy", "biny", "ciny"]
    );
    assert_eq!(grids[2].as_bytes().len(), one.len());
    // A missing third grid, a wrong index: errors that say which grid.
    let e = Grid::parse_all(&buf[..2 * one.len() + 100]).unwrap_err();
    assert!(
        e.to_string().contains(&format!("byte {}", 2 * one.len())),
        "{e}"
    );
    let mut bad = buf.clone();
    bad[one.len() + 24] = 2;
    assert!(
        Grid::parse_all(&bad)
            .unwrap_err()
            .to_string()
            .contains("grid 1")
    );
}
