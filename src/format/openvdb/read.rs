//! The byte-level reading of an OpenVDB file: a bounds-checked cursor, metadata and
//! transforms, value codecs (ZIP, Blosc, active-mask compression) and the tree's nodes.

use super::*;

pub(super) struct Bad {
    pub(super) offset: usize,
    pub(super) detail: String,
}

pub(super) type R<T> = Result<T, Bad>;

pub(super) fn bad<T>(offset: usize, detail: impl Into<String>) -> R<T> {
    Err(Bad {
        offset,
        detail: detail.into(),
    })
}

/// A bounds-checked cursor over the file.
pub(super) struct Cursor<'a> {
    pub(super) bytes: &'a [u8],
    pub(super) pos: usize,
}

impl<'a> Cursor<'a> {
    pub(super) fn take(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
        match self.pos.checked_add(n) {
            Some(end) if end <= self.bytes.len() => {
                let s = &self.bytes[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            _ => bad(
                self.pos,
                format!(
                    "{what}: needs {n} bytes, the file has {} left",
                    self.bytes.len().saturating_sub(self.pos)
                ),
            ),
        }
    }
    pub(super) fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
    pub(super) fn array<const N: usize>(&mut self, what: &str) -> R<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    pub(super) fn u8(&mut self, what: &str) -> R<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    pub(super) fn u32(&mut self, what: &str) -> R<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    pub(super) fn i32(&mut self, what: &str) -> R<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }
    pub(super) fn i64(&mut self, what: &str) -> R<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }
    pub(super) fn f64(&mut self, what: &str) -> R<f64> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }
    pub(super) fn vec3d(&mut self, what: &str) -> R<[f64; 3]> {
        Ok([self.f64(what)?, self.f64(what)?, self.f64(what)?])
    }
    pub(super) fn coord(&mut self, what: &str) -> R<Coord> {
        Ok([self.i32(what)?, self.i32(what)?, self.i32(what)?])
    }
    pub(super) fn string(&mut self, what: &str) -> R<String> {
        let at = self.pos;
        let n = self.u32(what)? as usize;
        if n > self.left() {
            return bad(
                at,
                format!("{what}: length {n} runs past the end of the file"),
            );
        }
        Ok(String::from_utf8_lossy(self.take(n, what)?).into_owned())
    }
    /// `WORDS` little-endian u64 words of a node mask.
    pub(super) fn mask<const WORDS: usize>(&mut self, what: &str) -> R<[u64; WORDS]> {
        let s = self.take(WORDS * 8, what)?;
        let mut m = [0u64; WORDS];
        for (w, c) in m.iter_mut().zip(s.chunks_exact(8)) {
            *w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        }
        Ok(m)
    }
    pub(super) fn seek(&mut self, to: i64, what: &str) -> R<()> {
        match usize::try_from(to) {
            Ok(p) if p <= self.bytes.len() => {
                self.pos = p;
                Ok(())
            }
            _ => bad(
                self.pos,
                format!("{what} {to} is outside the {}-byte file", self.bytes.len()),
            ),
        }
    }
}

/// A grid's MetaMap entries that matter here.
#[derive(Default)]
pub(super) struct GridMeta {
    pub(super) class: Option<String>,
    /// A `units` (or `unit`) string entry, as written.
    pub(super) units: Option<String>,
}

/// Reads a MetaMap, keeping the few entries used and skipping the rest by their size.
pub(super) fn read_meta_map(c: &mut Cursor<'_>) -> R<GridMeta> {
    let at = c.pos;
    let count = c.u32("metadata count")? as usize;
    // Each entry takes at least 12 bytes (three lengths).
    if count > c.left() / 12 {
        return bad(
            at,
            format!("{count} metadata entries cannot fit in the file"),
        );
    }
    let mut meta = GridMeta::default();
    for _ in 0..count {
        let name = c.string("metadata name")?;
        let type_name = c.string("metadata type")?;
        let at = c.pos;
        let size = c.u32("metadata size")? as usize;
        let value = c.take(size, "metadata value").map_err(|_| Bad {
            offset: at,
            detail: format!("metadata {name:?} ({type_name}): size {size} runs past the end"),
        })?;
        if name == "class" && type_name == "string" {
            meta.class = Some(String::from_utf8_lossy(value).into_owned());
        }
        // `units` wins over `unit` wherever both are present, in either order.
        if type_name == "string" && (name == "units" || (name == "unit" && meta.units.is_none())) {
            meta.units = Some(String::from_utf8_lossy(value).into_owned());
        }
    }
    Ok(meta)
}

/// Reads a transform (`math::Transform::read`: map type name, then the map).
pub(super) fn read_transform(c: &mut Cursor<'_>) -> R<VdbTransform> {
    let at = c.pos;
    let name = c.string("transform map type")?;
    let scale_block = |c: &mut Cursor<'_>| -> R<[f64; 3]> {
        // scale values, voxel size, inverse scale, inverse squared, inverse twice.
        let scale = c.vec3d("map scale")?;
        for _ in 0..4 {
            c.vec3d("map scale terms")?;
        }
        Ok(scale)
    };
    let (map, scale, translation): (&'static str, _, _) = match name.as_str() {
        "UniformScaleMap" => ("UniformScaleMap", scale_block(c)?, [0.0; 3]),
        "ScaleMap" => ("ScaleMap", scale_block(c)?, [0.0; 3]),
        "UniformScaleTranslateMap" | "ScaleTranslateMap" => {
            let t = c.vec3d("map translation")?;
            let s = scale_block(c)?;
            let map = if name == "ScaleTranslateMap" {
                "ScaleTranslateMap"
            } else {
                "UniformScaleTranslateMap"
            };
            (map, s, t)
        }
        "TranslationMap" => ("TranslationMap", [1.0; 3], c.vec3d("map translation")?),
        "AffineMap" | "UnitaryMap" => {
            // Mat4d, row-major, row vectors: the last row is the translation.
            let mut m = [0f64; 16];
            for v in &mut m {
                *v = c.f64("affine matrix")?;
            }
            let off_diagonal = [1, 2, 3, 4, 6, 7, 8, 9, 11];
            if off_diagonal.iter().any(|&i| m[i] != 0.0) || m[15] != 1.0 {
                return bad(
                    at,
                    format!(
                        "{name} with rotation, shear or projection ({m:?}) is not supported: \
                         only scale and translation are"
                    ),
                );
            }
            let map = if name == "AffineMap" {
                "AffineMap"
            } else {
                "UnitaryMap"
            };
            (map, [m[0], m[5], m[10]], [m[12], m[13], m[14]])
        }
        "NonlinearFrustumMap" => {
            return bad(
                at,
                "transform NonlinearFrustumMap is not supported: a frustum's voxels widen with \
                 depth, and the grids written here have one voxel size per axis",
            );
        }
        other => {
            return bad(
                at,
                format!(
                    "unknown transform map type {other:?}: scale, translation and affine maps \
                     without rotation are read"
                ),
            );
        }
    };
    if !scale.iter().chain(&translation).all(|v| v.is_finite()) || scale.contains(&0.0) {
        return bad(
            at,
            format!("{map}: scale {scale:?} or translation {translation:?} is not usable"),
        );
    }
    Ok(VdbTransform {
        map,
        scale,
        translation,
    })
}

/// How a grid's values are stored.
pub(super) struct ValueCodec {
    pub(super) value_type: VdbValueType,
    pub(super) half: bool,
    pub(super) compression: u32,
    /// The largest |double − float| of the values decoded so far (doubles only).
    pub(super) narrowing: std::cell::Cell<f64>,
}

impl ValueCodec {
    /// Bytes of one value as stored in node buffers.
    pub(super) fn stored_value_bytes(&self) -> usize {
        let comp = if self.half {
            2
        } else {
            self.value_type.component_bytes()
        };
        comp * self.value_type.components()
    }
    /// Bytes of one value stored raw (backgrounds, root tiles, inactive values).
    pub(super) fn raw_value_bytes(&self) -> usize {
        self.value_type.component_bytes() * self.value_type.components()
    }
    /// Decodes one raw (not half) value.
    pub(super) fn raw_value(&self, b: &[u8]) -> [f32; 3] {
        let v = decode_values(b, self.value_type, false, 1, &self.narrowing);
        let mut out = [0f32; 3];
        out[..v.len()].copy_from_slice(&v);
        out
    }
}

/// Decodes `count` values of `t` (each `components` floats) from little-endian bytes;
/// doubles become the nearest float, and `narrowing` the largest rounding error seen.
pub(super) fn decode_values(
    b: &[u8],
    t: VdbValueType,
    half: bool,
    count: usize,
    narrowing: &std::cell::Cell<f64>,
) -> Vec<f32> {
    let n = count * t.components();
    let mut out = Vec::with_capacity(n);
    if half {
        out.extend(
            b.chunks_exact(2)
                .take(n)
                .map(|c| half_to_f32(u16::from_le_bytes([c[0], c[1]]))),
        );
    } else if t.component_bytes() == 4 {
        out.extend(
            b.chunks_exact(4)
                .take(n)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes"))),
        );
    } else {
        let mut worst = narrowing.get();
        out.extend(b.chunks_exact(8).take(n).map(|c| {
            let d = f64::from_le_bytes(c.try_into().expect("8 bytes"));
            let f = d as f32;
            // Infinities and NaNs stay what they are; a double beyond the float range
            // becomes infinite, an error of its own kind, counted as infinite.
            if d.is_finite() {
                worst = worst.max((d - f64::from(f)).abs());
            }
            f
        }));
        narrowing.set(worst);
    }
    out
}

/// IEEE 754 binary16 to binary32 (exact: every half is a float).
pub fn half_to_f32(h: u16) -> f32 {
    let sign = u32::from(h >> 15) << 31;
    let exp = u32::from((h >> 10) & 0x1f);
    let man = u32::from(h & 0x3ff);
    let bits = match (exp, man) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: normalise.
            let shift = m.leading_zeros() - 21; // bring the top bit to position 10
            let m = (m << shift) & 0x3ff;
            sign | ((127 - 15 + 1 - shift) << 23) | (m << 13)
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 127 - 15) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

/// Reads one compressed data block (`io::readData`): `bytes` decompressed bytes.
pub(super) fn read_data(
    c: &mut Cursor<'_>,
    compression: u32,
    bytes: usize,
    what: &str,
) -> R<Vec<u8>> {
    if compression & (COMPRESS_ZIP | COMPRESS_BLOSC) == 0 {
        return Ok(c.take(bytes, what)?.to_vec());
    }
    let at = c.pos;
    let n = c.i64(what)?;
    if n <= 0 {
        // Stored raw (too small to compress, or incompressible).
        let raw = n.unsigned_abs();
        if raw != bytes as u64 {
            return bad(
                at,
                format!("{what}: {raw} raw bytes stored, {bytes} expected"),
            );
        }
        return Ok(c.take(bytes, what)?.to_vec());
    }
    let n = usize::try_from(n).unwrap_or(usize::MAX);
    let src = c.take(n, what)?;
    if compression & COMPRESS_BLOSC != 0 {
        blosc_block(src, bytes).map_err(|e| Bad {
            offset: at,
            detail: format!("{what}: {e}"),
        })
    } else {
        zip_block(src, bytes).map_err(|e| Bad {
            offset: at,
            detail: format!("{what}: {e}"),
        })
    }
}

pub(super) fn zip_block(src: &[u8], bytes: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(bytes);
    let mut dec = flate2::read::ZlibDecoder::new(src);
    (&mut dec)
        .take(bytes as u64)
        .read_to_end(&mut out)
        .map_err(|e| format!("ZIP block is corrupt: {e}"))?;
    if out.len() != bytes {
        return Err(format!(
            "ZIP block inflates to {} bytes, {bytes} expected",
            out.len()
        ));
    }
    let mut probe = [0u8; 1];
    if dec
        .read(&mut probe)
        .map_err(|e| format!("ZIP block is corrupt: {e}"))?
        != 0
    {
        return Err(format!("ZIP block inflates to more than {bytes} bytes"));
    }
    Ok(out)
}

pub(super) fn blosc_block(src: &[u8], bytes: usize) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; bytes];
    crate::format::codec::blosc_decompress(src, &mut out)?;
    Ok(out)
}

pub(super) fn bit(mask: &[u64], n: usize) -> bool {
    mask[n >> 6] >> (n & 63) & 1 == 1
}

/// `io::readCompressedValues` for a node of `N` values (`WORDS` = N / 64 mask words).
pub(super) fn read_node_values<const WORDS: usize>(
    c: &mut Cursor<'_>,
    vc: &ValueCodec,
    value_mask: &[u64; WORDS],
    background: [f32; 3],
    what: &str,
) -> R<Vec<f32>> {
    let n = WORDS * 64;
    let comps = vc.value_type.components();
    let at = c.pos;
    let metadata = c.u8(what)?;
    let neg = |v: [f32; 3]| v.map(|x| -x);
    let (mut inactive0, mut inactive1) = (background, background);
    match metadata {
        0 => {}                           // no mask, inactive values are the background
        1 => inactive0 = neg(background), // no mask, inactive values are -background
        2 => inactive0 = vc.raw_value(c.take(vc.raw_value_bytes(), what)?), // one stored
        3 => inactive0 = neg(background), // mask selects background / -background
        4 => inactive0 = vc.raw_value(c.take(vc.raw_value_bytes(), what)?), // mask: stored / background
        5 => {
            inactive0 = vc.raw_value(c.take(vc.raw_value_bytes(), what)?);
            inactive1 = vc.raw_value(c.take(vc.raw_value_bytes(), what)?);
        }
        6 => {} // all values stored
        m => return bad(at, format!("{what}: unknown value metadata {m}")),
    }
    let selection: [u64; WORDS] = if matches!(metadata, 3..=5) {
        c.mask::<WORDS>(what)?
    } else {
        [0; WORDS]
    };
    let masked = vc.compression & COMPRESS_ACTIVE_MASK != 0 && metadata != 6;
    let stored = if masked {
        value_mask.iter().map(|w| w.count_ones() as usize).sum()
    } else {
        n
    };
    // OpenVDB's half-float writer writes nothing at all for no values (not even the
    // block's size); the full-precision one writes an empty block.
    let data = if vc.half && stored == 0 {
        Vec::new()
    } else {
        read_data(c, vc.compression, stored * vc.stored_value_bytes(), what)?
    };
    let values = decode_values(&data, vc.value_type, vc.half, stored, &vc.narrowing);
    if !masked || stored == n {
        return Ok(values);
    }
    let mut out = Vec::with_capacity(n * comps);
    let mut next = values.chunks_exact(comps);
    for i in 0..n {
        if bit(value_mask, i) {
            out.extend_from_slice(next.next().expect("one stored value per active bit"));
        } else if bit(&selection, i) {
            out.extend_from_slice(&inactive1[..comps]);
        } else {
            out.extend_from_slice(&inactive0[..comps]);
        }
    }
    Ok(out)
}

/// The leaf buffers start right after the topology, where libopenvdb reads them
/// (`Archive::readGrid` reads on from the topology), and the descriptor's block offset must
/// say so: a topology that ends elsewhere was read with the wrong value type or node counts.
/// One layout is tolerated, with a note: tinyvdb 0.9 writes the grid offset as the block
/// offset (libopenvdb reads its files).
fn check_topology_end(end: usize, offsets: &GridOffsets) -> R<Vec<String>> {
    if usize::try_from(offsets.block_pos).ok() == Some(end) {
        return Ok(Vec::new());
    }
    if offsets.block_pos == offsets.grid_pos {
        return Ok(vec![format!(
            "the descriptor's block offset {} is not where the topology ends (byte {end}) but \
             the grid offset, as tinyvdb writes it; the leaf buffers were read from where the \
             topology ends, as libopenvdb reads them",
            offsets.block_pos
        )]);
    }
    bad(
        end,
        format!(
            "the topology ends at byte {end}, but the descriptor's block offset says the leaf \
             buffers start at byte {}: the grid type or the node and tile counts do not match \
             the data",
            offsets.block_pos
        ),
    )
}

/// A 32³ or 16³ node's topology, kept until the leaf buffers are read.
pub(super) struct InternalTopo {
    pub(super) origin: Coord,
    pub(super) children: Vec<InternalTopo>,
    /// Leaf origins and value masks as the topology gives them (16³ nodes only); the leaf
    /// buffers repeat the masks, which must agree.
    pub(super) leaves: Vec<(Coord, [u64; 8])>,
}

/// Tiles are kept when active or not the background (the rest reads as background anyway).
pub(super) fn keep_tile(value: &[f32], active: bool, background: [f32; 3]) -> bool {
    active
        || value
            .iter()
            .zip(background)
            .any(|(v, b)| v.to_bits() != b.to_bits())
}

pub(super) fn read_internal<const WORDS: usize>(
    c: &mut Cursor<'_>,
    vc: &ValueCodec,
    origin: Coord,
    log2: u32,
    background: [f32; 3],
    tiles: &mut Vec<VdbTile>,
) -> R<InternalTopo> {
    let what = if log2 == 5 { "32³ node" } else { "16³ node" };
    let child_mask = c.mask::<WORDS>(what)?;
    let value_mask = c.mask::<WORDS>(what)?;
    let values = read_node_values::<WORDS>(c, vc, &value_mask, background, what)?;
    let comps = vc.value_type.components();
    let child_log2 = if log2 == 5 { 7 } else { 3 }; // child edge: 128 or 8 voxels
    let dim = 1usize << log2;
    let slot_origin = |i: usize| -> Coord {
        let x = (i >> (2 * log2)) & (dim - 1);
        let y = (i >> log2) & (dim - 1);
        let z = i & (dim - 1);
        [
            origin[0] + ((x as i32) << child_log2),
            origin[1] + ((y as i32) << child_log2),
            origin[2] + ((z as i32) << child_log2),
        ]
    };
    for i in 0..WORDS * 64 {
        if bit(&child_mask, i) {
            continue;
        }
        let v = &values[i * comps..(i + 1) * comps];
        let active = bit(&value_mask, i);
        if keep_tile(v, active, background) {
            let mut value = [0f32; 3];
            value[..comps].copy_from_slice(v);
            tiles.push(VdbTile {
                origin: slot_origin(i),
                size: 1 << child_log2,
                value,
                active,
            });
        }
    }
    let mut topo = InternalTopo {
        origin,
        children: Vec::new(),
        leaves: Vec::new(),
    };
    for i in (0..WORDS * 64).filter(|&i| bit(&child_mask, i)) {
        let o = slot_origin(i);
        if log2 == 5 {
            topo.children
                .push(read_internal::<64>(c, vc, o, 4, background, tiles)?);
        } else {
            // Leaf topology: its value mask (read again with the buffers).
            let mask = c.mask::<8>("leaf value mask")?;
            topo.leaves.push((o, mask));
        }
    }
    Ok(topo)
}

/// Where a grid's parts are, as its descriptor says.
pub(super) struct GridOffsets {
    /// Where the grid starts.
    pub(super) grid_pos: i64,
    /// Where the topology ends and the leaf buffers start.
    pub(super) block_pos: i64,
}

pub(super) fn read_grid(
    c: &mut Cursor<'_>,
    name: String,
    value_type: VdbValueType,
    half: bool,
    offsets: GridOffsets,
) -> R<VdbGrid> {
    let compression = c.u32("grid compression flags")?;
    if compression & !(COMPRESS_ZIP | COMPRESS_ACTIVE_MASK | COMPRESS_BLOSC) != 0 {
        return bad(
            c.pos - 4,
            format!("unknown compression flags {compression:#x}"),
        );
    }
    let meta = read_meta_map(c)?;
    let transform = read_transform(c)?;
    let vc = ValueCodec {
        value_type,
        half,
        compression,
        narrowing: std::cell::Cell::new(0.0),
    };
    let at = c.pos;
    let buffers = c.i32("tree buffer count")?;
    if buffers != 1 {
        return bad(
            at,
            format!("{buffers} tree buffers: only single-buffer trees exist since OpenVDB 3"),
        );
    }
    let background = vc.raw_value(c.take(vc.raw_value_bytes(), "root background")?);
    let at = c.pos;
    let n_tiles = c.u32("root tile count")? as usize;
    let n_children = c.u32("root child count")? as usize;
    let tile_bytes = 12 + vc.raw_value_bytes() + 1;
    if n_tiles > c.left() / tile_bytes || n_children > c.left() / (12 + 2 * 4096) {
        return bad(
            at,
            format!("{n_tiles} root tiles and {n_children} children cannot fit in the file"),
        );
    }
    let mut tiles = Vec::new();
    let comps = value_type.components();
    for _ in 0..n_tiles {
        let at = c.pos;
        let origin = c.coord("root tile origin")?;
        let value = vc.raw_value(c.take(vc.raw_value_bytes(), "root tile value")?);
        let active = c.u8("root tile state")? != 0;
        if origin.iter().any(|v| v & 4095 != 0) {
            return bad(
                at,
                format!("root tile origin {origin:?} is not a multiple of 4096"),
            );
        }
        if keep_tile(&value[..comps], active, background) {
            tiles.push(VdbTile {
                origin,
                size: 4096,
                value,
                active,
            });
        }
    }
    let mut tops = Vec::with_capacity(n_children);
    for _ in 0..n_children {
        let at = c.pos;
        let origin = c.coord("root child origin")?;
        if origin.iter().any(|v| v & 4095 != 0) {
            return bad(
                at,
                format!("root child origin {origin:?} is not a multiple of 4096"),
            );
        }
        tops.push(read_internal::<512>(
            c, &vc, origin, 5, background, &mut tiles,
        )?);
    }
    // OpenVDB's root keeps children in a map ordered by origin, which is the order it
    // reads the buffers in; two children at one origin would replace each other.
    tops.sort_by_key(|t| t.origin);
    if let Some(w) = tops.windows(2).find(|w| w[0].origin == w[1].origin) {
        return bad(at, format!("two root children at {:?}", w[0].origin));
    }
    let notes = check_topology_end(c.pos, &offsets)?;
    let n_leaves: usize = tops
        .iter()
        .flat_map(|t| &t.children)
        .map(|l| l.leaves.len())
        .sum();
    // The decoded leaves can be ~50 times the file's bytes: ask for the memory first.
    let leaf_bytes = (n_leaves as u64).saturating_mul((LEAF_VALUES * comps * 4 + 96) as u64);
    crate::memory::check_available(|| format!("decoding {n_leaves} leaves"), leaf_bytes).map_err(
        |e| Bad {
            offset: c.pos,
            detail: e.to_string(),
        },
    )?;
    let mut leaves = Vec::with_capacity(n_leaves.min(c.left() / 65));
    for (leaf_origin, topology_mask) in tops
        .iter()
        .flat_map(|t| &t.children)
        .flat_map(|l| &l.leaves)
    {
        let what = "leaf buffer";
        let at = c.pos;
        let active = c.mask::<8>(what)?;
        if active != *topology_mask {
            return bad(
                at,
                format!(
                    "the buffer of the leaf at {leaf_origin:?} has another value mask than the \
                     topology gave it ({} active voxels, the topology says {}): the topology's \
                     node counts do not match the buffers",
                    active.iter().map(|w| w.count_ones()).sum::<u32>(),
                    topology_mask.iter().map(|w| w.count_ones()).sum::<u32>()
                ),
            );
        }
        let values = read_node_values::<8>(c, &vc, &active, background, what)?;
        leaves.push(VdbLeaf {
            origin: *leaf_origin,
            values,
            active,
        });
    }
    let class = match meta.class.as_deref() {
        Some("level set") => VdbClass::LevelSet,
        Some("fog volume") => VdbClass::FogVolume,
        Some("staggered") => VdbClass::Staggered,
        _ => VdbClass::Unknown,
    };
    Ok(VdbGrid {
        name,
        value_type,
        saved_as_half: half,
        class,
        transform,
        background,
        tiles,
        leaves,
        narrowing_error: matches!(value_type, VdbValueType::Double | VdbValueType::Vec3d)
            .then(|| vc.narrowing.get()),
        notes,
        units: meta.units,
    })
}
