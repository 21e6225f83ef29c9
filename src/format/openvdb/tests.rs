use super::*;

#[test]
fn halves_convert_exactly() {
    assert_eq!(half_to_f32(0x3c00), 1.0);
    assert_eq!(half_to_f32(0xc000), -2.0);
    assert_eq!(half_to_f32(0x7bff), 65504.0);
    assert_eq!(half_to_f32(0x0001), 2f32.powi(-24));
    assert_eq!(half_to_f32(0x03ff), 1023.0 * 2f32.powi(-24));
    assert_eq!(half_to_f32(0x0400), 2f32.powi(-14));
    assert!(half_to_f32(0x7c00).is_infinite());
    assert!(half_to_f32(0x7e00).is_nan());
    assert_eq!(half_to_f32(0x8000).to_bits(), (-0.0f32).to_bits());
    assert_eq!(half_to_f32(0x3555), 0.333_251_95);
}

/// Writes the blocks of a small one-grid file by hand, as OpenVDB's writer lays them out,
/// with `compression`: the ZIP and uncompressed framings, which python3-openvdb (always
/// Blosc) does not produce, and several value-metadata codes.
fn hand_written(compression: u32) -> Vec<u8> {
    use std::io::Write;
    fn string(out: &mut Vec<u8>, s: &str) {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    }
    fn floats(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    // `io::writeData`: raw, or an i64 size then zlib data (negative: raw bytes follow).
    let data = |out: &mut Vec<u8>, raw: &[u8]| {
        if compression & COMPRESS_ZIP == 0 {
            out.extend_from_slice(raw);
            return;
        }
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(6));
        z.write_all(raw).unwrap();
        let z = z.finish().unwrap();
        if z.len() < raw.len() {
            out.extend_from_slice(&(z.len() as i64).to_le_bytes());
            out.extend_from_slice(&z);
        } else {
            out.extend_from_slice(&(-(raw.len() as i64)).to_le_bytes());
            out.extend_from_slice(raw);
        }
    };
    let masked = compression & COMPRESS_ACTIVE_MASK != 0;
    let mut f = VDB_MAGIC.to_le_bytes().to_vec();
    f.extend_from_slice(&224u32.to_le_bytes());
    f.extend_from_slice(&10u32.to_le_bytes());
    f.extend_from_slice(&0u32.to_le_bytes());
    f.push(1);
    f.extend_from_slice(&[b'0'; 36]);
    f.extend_from_slice(&0u32.to_le_bytes()); // file metadata
    f.extend_from_slice(&1i32.to_le_bytes());
    string(&mut f, "g");
    string(&mut f, "Tree_float_5_4_3");
    string(&mut f, "");
    let offsets_at = f.len();
    f.extend_from_slice(&[0u8; 24]);
    let grid_pos = f.len();
    f.extend_from_slice(&compression.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    string(&mut f, "class");
    string(&mut f, "string");
    string(&mut f, "fog volume");
    string(&mut f, "UniformScaleTranslateMap");
    // Translation, then scale, voxel size, inverse scale, its square, inverse twice.
    for v in [
        [1.0, -2.0, 3.0],
        [0.5; 3],
        [0.5; 3],
        [2.0; 3],
        [4.0; 3],
        [1.0; 3],
    ] {
        for x in v {
            f.extend_from_slice(&f64::to_le_bytes(x));
        }
    }
    f.extend_from_slice(&1i32.to_le_bytes()); // buffer count
    f.extend_from_slice(&floats(&[0.0])); // background
    f.extend_from_slice(&1u32.to_le_bytes()); // tiles
    f.extend_from_slice(&1u32.to_le_bytes()); // children
    for v in [4096i32, 0, -4096] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    f.extend_from_slice(&floats(&[3.0]));
    f.push(1);
    for v in [0i32, 0, 0] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    // 32³ node: one child (slot 0), no tiles; values all background (metadata 0).
    let mut mask = vec![0u64; 512];
    mask[0] = 1;
    f.extend(mask.iter().flat_map(|w| w.to_le_bytes()));
    f.extend(std::iter::repeat_n(0u8, 4096));
    f.push(0);
    let stored = if masked { 0 } else { 32768 };
    data(&mut f, &floats(&vec![0.0; stored]));
    // 16³ node: a leaf at slot 0, an active tile (7.0) at slot 1, every value stored.
    let mut child = [0u64; 64];
    child[0] = 1;
    let mut value = [0u64; 64];
    value[0] = 2;
    f.extend(child.iter().chain(&value).flat_map(|w| w.to_le_bytes()));
    f.push(6);
    let mut vals = vec![0f32; 4096];
    vals[1] = 7.0;
    data(&mut f, &floats(&vals));
    // Leaf topology: its value mask.
    let leaf_mask = [(1u64 << 0) | (1 << 5), 0, 0, 0, 0, 0, 0, 1 << 63];
    f.extend(leaf_mask.iter().flat_map(|w| w.to_le_bytes()));
    let block_pos = f.len();
    // Leaf buffer: mask again; metadata 4 (mask selects between 0.25 and background).
    f.extend(leaf_mask.iter().flat_map(|w| w.to_le_bytes()));
    let mut leaf = vec![0.25f32; 512];
    leaf[0] = 1.5;
    leaf[5] = -2.5;
    leaf[511] = 9.0;
    leaf[100] = 0.0; // inactive background, chosen by the selection mask
    if masked {
        f.push(4);
        f.extend_from_slice(&floats(&[0.25]));
        let mut sel = [0u64; 8];
        sel[100 / 64] |= 1 << (100 % 64);
        f.extend(sel.iter().flat_map(|w| w.to_le_bytes()));
        data(&mut f, &floats(&[1.5, -2.5, 9.0]));
    } else {
        f.push(6);
        data(&mut f, &floats(&leaf));
    }
    let end_pos = f.len();
    for (i, p) in [grid_pos, block_pos, end_pos].into_iter().enumerate() {
        f[offsets_at + 8 * i..][..8].copy_from_slice(&(p as i64).to_le_bytes());
    }
    f
}

#[test]
fn zip_and_uncompressed_blocks_and_value_metadata() {
    for compression in [
        0,
        COMPRESS_ZIP,
        COMPRESS_ACTIVE_MASK,
        COMPRESS_ZIP | COMPRESS_ACTIVE_MASK,
    ] {
        let bytes = hand_written(compression);
        let file = read_vdb_bytes(&bytes).unwrap_or_else(|e| panic!("{compression}: {e}"));
        let g = &file.grids[0];
        assert_eq!((g.name.as_str(), g.class), ("g", VdbClass::FogVolume));
        assert_eq!(g.transform.scale, [0.5; 3]);
        assert_eq!(g.transform.translation, [1.0, -2.0, 3.0]);
        assert_eq!(g.leaves.len(), 1);
        let l = &g.leaves[0];
        assert_eq!(l.origin, [0, 0, 0]);
        assert_eq!((l.values[0], l.values[5], l.values[511]), (1.5, -2.5, 9.0));
        assert_eq!((l.values[1], l.values[100]), (0.25, 0.0), "{compression}");
        assert_eq!(l.active[0], 0b100001);
        let mut tiles: Vec<_> = g
            .tiles
            .iter()
            .map(|t| (t.origin, t.size, t.value[0], t.active))
            .collect();
        tiles.sort_by_key(|t| t.0);
        assert_eq!(
            tiles,
            vec![
                ([0, 0, 8], 8, 7.0, true),
                ([4096, 0, -4096], 4096, 3.0, true)
            ]
        );
        // Every cut is an error.
        for cut in (0..bytes.len()).step_by(97) {
            assert!(
                read_vdb_bytes(&bytes[..cut]).is_err(),
                "{compression} {cut}"
            );
        }
    }
}

#[test]
fn garbage_is_an_error_not_a_panic() {
    assert!(read_vdb_bytes(b"").is_err());
    assert!(read_vdb_bytes(b"NanoVDB0").is_err());
    let mut head = VDB_MAGIC.to_le_bytes().to_vec();
    head.extend_from_slice(&224u32.to_le_bytes());
    for cut in 0..head.len() {
        assert!(read_vdb_bytes(&head[..cut]).is_err());
    }
    let e = read_vdb_bytes(&head).unwrap_err().to_string();
    assert!(e.contains("library version"), "{e}");
}

/// Sets the descriptor's block offset of a [`hand_written`] file.
fn with_block_offset(mut f: Vec<u8>, block: i64) -> Vec<u8> {
    // The offsets follow the descriptor's three strings: "g", "Tree_float_5_4_3", "".
    let offsets_at = 8 + 4 + 8 + 1 + 36 + 4 + 4 + (4 + 1) + (4 + 16) + 4;
    f[offsets_at + 8..][..8].copy_from_slice(&block.to_le_bytes());
    f
}

/// Byte offsets in a [`hand_written`] file: the grid, and the root's tile and child counts.
const GRID_POS: usize = 8 + 4 + 8 + 1 + 36 + 4 + 4 + 5 + 20 + 4 + 24;
/// Compression flags, the class metadata, the transform, the buffer count, the background.
const ROOT_COUNTS: usize = GRID_POS + 4 + (4 + 9 + 10 + 14) + (28 + 144) + 4 + 4;

#[test]
fn the_block_offset_must_be_where_the_topology_ends() {
    let good = hand_written(COMPRESS_ZIP | COMPRESS_ACTIVE_MASK);
    let reference = read_vdb_bytes(&good).unwrap();
    assert!(reference.grids[0].notes.is_empty());
    // tinyvdb 0.9 writes the grid offset there: libopenvdb reads the leaf buffers right
    // after the topology, and so does this reader, with a note.
    let file = read_vdb_bytes(&with_block_offset(good.clone(), GRID_POS as i64)).unwrap();
    let g = &file.grids[0];
    assert_eq!(g.leaves, reference.grids[0].leaves);
    assert_eq!(g.notes.len(), 1);
    assert!(
        g.notes[0].contains(&format!(
            "block offset {GRID_POS} is not where the topology ends"
        )),
        "{}",
        g.notes[0]
    );
    // Any other block offset says the topology was not what the descriptor describes.
    for block in [-1, i64::MAX, 3, good.len() as i64 - 20] {
        let e = read_vdb_bytes(&with_block_offset(good.clone(), block))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("grid 0 (\"g\")")
                && e.contains(&format!(
                    "block offset says the leaf buffers start at byte {block}"
                )),
            "{block}: {e}"
        );
    }
    // An end offset before the grid's start, or beyond the file, is refused.
    let offsets_at = GRID_POS - 24;
    for end in [GRID_POS as i64, GRID_POS as i64 - 1, good.len() as i64 + 1] {
        let mut f = good.clone();
        f[offsets_at + 16..][..8].copy_from_slice(&end.to_le_bytes());
        let e = read_vdb_bytes(&f).unwrap_err().to_string();
        assert!(e.contains("do not frame a grid"), "{end}: {e}");
    }
    // Buffers that end before the end offset (bytes nobody read) are refused too.
    let mut f = good.clone();
    f.extend_from_slice(&[0; 16]);
    let len = f.len() as i64;
    f[offsets_at + 16..][..8].copy_from_slice(&len.to_le_bytes());
    let e = read_vdb_bytes(&f).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "the leaf buffers end at byte {}, but the descriptor's end offset is {}",
            good.len(),
            f.len()
        )),
        "{e}"
    );
}

/// Root child and tile counts lowered or raised, and a type name changed, are caught by the
/// offsets (or the leaf buffers' masks), whichever layout the block offset has.
#[test]
fn counts_and_type_names_that_disagree_with_the_data_are_errors() {
    let good = hand_written(COMPRESS_ZIP | COMPRESS_ACTIVE_MASK);
    for block in [None, Some(GRID_POS as i64)] {
        let base = match block {
            Some(b) => with_block_offset(good.clone(), b),
            None => good.clone(),
        };
        for (at, count) in [(ROOT_COUNTS + 4, 0u32), (ROOT_COUNTS, 0), (ROOT_COUNTS, 2)] {
            let mut f = base.clone();
            f[at..at + 4].copy_from_slice(&count.to_le_bytes());
            let e = read_vdb_bytes(&f).expect_err("a changed count");
            assert!(e.to_string().contains("grid 0 (\"g\")"), "{e}");
        }
        // The child count lowered: the topology ends early.
        let mut f = base.clone();
        f[ROOT_COUNTS + 4..][..4].copy_from_slice(&0u32.to_le_bytes());
        let e = read_vdb_bytes(&f).unwrap_err().to_string();
        assert!(
            e.contains("block offset says") || e.contains("end offset is"),
            "{block:?}: {e}"
        );
    }
    // A leaf buffer's mask that is not the topology's.
    let mut f = good.clone();
    let leaf_mask: Vec<u8> = [(1u64 << 0) | (1 << 5), 0, 0, 0, 0, 0, 0, 1 << 63]
        .iter()
        .flat_map(|w| w.to_le_bytes())
        .collect();
    let mask_at = f.windows(64).rposition(|w| w == leaf_mask).unwrap();
    f[mask_at] ^= 0x2;
    let e = read_vdb_bytes(&f).unwrap_err().to_string();
    assert!(e.contains("another value mask than the topology"), "{e}");
    // Type names: another read type (other value sizes), and a name OpenVDB never writes.
    for (to, says) in [
        // (Read as vectors, the background swallows the counts here.)
        ("Tree_vec3s_5_4_3", "cannot fit in the file"),
        ("Tree_floot_5_4_3", "is not a type OpenVDB writes"),
        ("Tree_float_5_4_4", "is not a type OpenVDB writes"),
    ] {
        let mut f = good.clone();
        let at = f
            .windows(16)
            .position(|w| w == b"Tree_float_5_4_3")
            .unwrap();
        f[at..at + 16].copy_from_slice(to.as_bytes());
        let e = read_vdb_bytes(&f).unwrap_err().to_string();
        assert!(
            e.contains("grid 0 (\"g\")") && e.contains(says),
            "{to}: {e}"
        );
    }
}

#[test]
fn same_names_are_numbered_as_openvdb_numbers_them() {
    assert_eq!(
        unique_grid_names(["density", "density", "heat", "density", ""]),
        ["density", "density#1", "heat", "density#2", ""]
    );
    // A made name another grid already has moves on to the next number.
    assert_eq!(unique_grid_names(["a#1", "a", "a"]), ["a#1", "a", "a#2"]);
}

/// A transform as `math::Transform::write` lays it out: the map's type name, then `fields`.
fn transform_bytes(name: &str, fields: &[f64]) -> Vec<u8> {
    let mut b = (name.len() as u32).to_le_bytes().to_vec();
    b.extend_from_slice(name.as_bytes());
    for v in fields {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

fn transform(name: &str, fields: &[f64]) -> Result<VdbTransform, String> {
    let b = transform_bytes(name, fields);
    let mut c = Cursor { bytes: &b, pos: 0 };
    read_transform(&mut c).map_err(|e| e.detail)
}

/// A scale map's five vectors: scale, voxel size, inverse, inverse squared, half inverse.
fn scale_fields(s: [f64; 3]) -> Vec<f64> {
    let inv = s.map(|x| 1.0 / x);
    [s, s, inv, inv.map(|x| x * x), inv.map(|x| x / 2.0)].concat()
}

#[test]
fn per_axis_scales_import_and_other_maps_are_refused_by_name() {
    let s = [0.7033765912055969, 0.7033765912055969, 0.7164551019668579];
    let t = [-8.440519332885742, -8.440519332885742, -24.134912490844727];
    let st = transform("ScaleTranslateMap", &[t.to_vec(), scale_fields(s)].concat()).unwrap();
    assert_eq!((st.scale, st.translation), (s, t));
    assert_eq!(transform("ScaleMap", &scale_fields(s)).unwrap().scale, s);
    let affine = [
        [s[0], 0.0, 0.0, 0.0],
        [0.0, s[1], 0.0, 0.0],
        [0.0, 0.0, s[2], 0.0],
        [t[0], t[1], t[2], 1.0],
    ]
    .concat();
    let a = transform("AffineMap", &affine).unwrap();
    assert_eq!((a.scale, a.translation), (s, t));

    // The grid keeps the per-axis size, exactly as the file has it.
    let mut g = read_vdb_bytes(&hand_written(0)).unwrap().grids.remove(0);
    g.tiles.retain(|t| t.size < 4096); // the root tile would be 4096³ voxels of leaves
    g.transform = st;
    let scalar = to_scalar_grid(&g, None, 1 << 20).unwrap();
    assert_eq!((scalar.voxel_size, scalar.world_origin), (s, t));
    // A mirrored axis is refused, naming the map.
    g.transform = transform("ScaleMap", &scale_fields([1.0, -1.0, 1.0])).unwrap();
    let e = to_scalar_grid(&g, None, 1 << 20).unwrap_err();
    assert!(
        e.contains("ScaleMap") && e.contains("negative scale"),
        "{e}"
    );

    let mut rotated = affine.clone();
    rotated[1] = 0.5;
    let e = transform("AffineMap", &rotated).unwrap_err();
    assert!(e.contains("AffineMap with rotation"), "{e}");
    let e = transform("NonlinearFrustumMap", &[0.0; 16]).unwrap_err();
    assert!(e.contains("NonlinearFrustumMap is not supported"), "{e}");
    let e = transform("PolarMap", &[]).unwrap_err();
    assert!(e.contains("unknown transform map type \"PolarMap\""), "{e}");
    let e = transform("ScaleMap", &scale_fields([1.0, 0.0, 1.0])).unwrap_err();
    assert!(e.contains("not usable"), "{e}");
}

#[test]
fn doubles_become_the_nearest_float_with_the_largest_error_kept() {
    let b: Vec<u8> = [0.1f64, 1.0, -1e-3]
        .iter()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    let worst = std::cell::Cell::new(0.0);
    let v = decode_values(&b, VdbValueType::Double, false, 3, &worst);
    assert_eq!(v, [0.1f32, 1.0, -1e-3]);
    let err = |d: f64| (d - f64::from(d as f32)).abs();
    assert_eq!(worst.get(), err(0.1).max(err(-1e-3)));
    assert!(worst.get() > 0.0);
}

/// ZIP and Blosc blocks of a node never expand past the node's size: the inflater stops at
/// the claim (a stream that goes on is an error, not a bigger buffer).
#[test]
fn compressed_blocks_stop_at_the_node_size() {
    use std::io::Write;
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::new(9));
    z.write_all(&vec![0u8; 1 << 20]).unwrap();
    let bomb = z.finish().unwrap();
    let e = zip_block(&bomb, 2048).unwrap_err();
    assert!(e.contains("more than 2048 bytes"), "{e}");
    assert_eq!(zip_block(&bomb, 1 << 20).unwrap().len(), 1 << 20);
    let blosc =
        crate::format::codec::encode(crate::format::Codec::Blosc, &vec![0u8; 1 << 16]).unwrap();
    // NanoVDB's framing: an 8-byte size, then the c-blosc buffer.
    let e = blosc_block(&blosc[8..], 2048).unwrap_err();
    assert!(e.contains("expected 2048"), "{e}");
}
