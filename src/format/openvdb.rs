//! A bounded, validating reader for OpenVDB `.vdb` files (file format 222–224: OpenVDB 3.0
//! and later, what Houdini, Blender, EmberGen and OpenVDB's own tools write).
//!
//! Layout (`openvdb/io/Archive.cc`, `File.cc`, `GridDescriptor.cc`, `tree/*Node.h`):
//!
//! ```text
//! header: magic i64 (0x56444220, "VDB "), file version u32, library major/minor u32,
//!         has-grid-offsets u8, UUID (36 ASCII bytes)
//! file metadata: MetaMap
//! grid count i32, then per grid: descriptor (unique name, type name ("_HalfFloat" suffix:
//!         values stored as 16-bit floats), instance parent name, grid/block/end offsets
//!         i64), and at the grid offset: compression flags u32, grid MetaMap, transform
//!         (map type name + the map's fields), topology (buffer count i32, root: background,
//!         tile and child counts, tiles (origin, value, active), children (origin, 32³ node:
//!         child and value masks, tile values, then its 16³ children the same way, then 8³
//!         leaves' value masks)), and at the block offset the leaf buffers (value mask again,
//!         then the 512 values) in the same order.
//! MetaMap: count u32, per entry name, type name, size u32, `size` bytes of value.
//! strings: length u32 + bytes.
//! ```
//!
//! Node values are stored through `io::readCompressedValues`: a per-node metadata byte says
//! which inactive values are implied (background, its negation, one or two stored values, a
//! selection mask between them); with `COMPRESS_ACTIVE_MASK` only active values are stored;
//! the stored values are raw, or a ZIP (zlib) or Blosc block preceded by an i64 byte count
//! (≤ 0: that many raw bytes follow).
//!
//! Everything is checked against the bytes actually present before anything is allocated:
//! counts are bounded by the bytes they need, decompressed blocks by the node size, and
//! every offset and size by the file's length. Errors name the grid and the byte offset.
//! Supported values: float, double, Vec3s, Vec3d grids (the first two also as half floats);
//! other grid types (integer, bool, mask, point data) are listed as skipped. Supported
//! transforms: the linear maps without rotation (scale, translation, their combinations, and
//! affine matrices of that form); others are refused with their name.

use super::types::Coord;
use std::ffi::c_void;
use std::io::Read;
use std::path::{Path, PathBuf};

/// `OPENVDB_MAGIC`.
pub const VDB_MAGIC: i64 = 0x5644_4220;
/// Oldest file format read (`OPENVDB_FILE_VERSION_NODE_MASK_COMPRESSION`, OpenVDB 3.0).
pub const MIN_FILE_VERSION: u32 = 222;
/// Newest file format known (`OPENVDB_FILE_VERSION_MULTIPASS_IO`, OpenVDB 6 through 12).
pub const MAX_FILE_VERSION: u32 = 224;

/// Values in a leaf.
const LEAF_VALUES: usize = 512;
const COMPRESS_ZIP: u32 = 0x1;
const COMPRESS_ACTIVE_MASK: u32 = 0x2;
const COMPRESS_BLOSC: u32 = 0x4;

/// What went wrong reading a `.vdb` file.
#[derive(Debug, thiserror::Error)]
pub enum VdbError {
    /// The file could not be read.
    #[error("{path}: {op}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        op: &'static str,
        /// The cause.
        source: std::io::Error,
    },
    /// The bytes are not a valid OpenVDB file, or use something this reader does not read.
    #[error("{path}: {context}at byte {offset}: {detail}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The grid being read ("grid 2 (\"density\"): "), or empty.
        context: String,
        /// Where in the file.
        offset: u64,
        /// What is wrong.
        detail: String,
    },
}

/// The value type of a grid.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VdbValueType {
    /// 32-bit float (`Tree_float_5_4_3`).
    Float,
    /// 64-bit float (`Tree_double_5_4_3`), read as the nearest 32-bit float.
    Double,
    /// Vector of three 32-bit floats (`Tree_vec3s_5_4_3`).
    Vec3s,
    /// Vector of three 64-bit floats (`Tree_vec3d_5_4_3`), read as 32-bit floats.
    Vec3d,
}

impl VdbValueType {
    fn from_type_name(name: &str) -> Option<VdbValueType> {
        Some(match name {
            "Tree_float_5_4_3" => VdbValueType::Float,
            "Tree_double_5_4_3" => VdbValueType::Double,
            "Tree_vec3s_5_4_3" => VdbValueType::Vec3s,
            "Tree_vec3d_5_4_3" => VdbValueType::Vec3d,
            _ => return None,
        })
    }

    /// Components per value (1 or 3).
    pub fn components(self) -> usize {
        match self {
            VdbValueType::Float | VdbValueType::Double => 1,
            VdbValueType::Vec3s | VdbValueType::Vec3d => 3,
        }
    }

    /// Bytes of one component as stored (not as half).
    fn component_bytes(self) -> usize {
        match self {
            VdbValueType::Float | VdbValueType::Vec3s => 4,
            VdbValueType::Double | VdbValueType::Vec3d => 8,
        }
    }
}

/// The grid class from the grid's `class` metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VdbClass {
    /// "level set": signed distances.
    LevelSet,
    /// "fog volume": densities.
    FogVolume,
    /// "staggered": face-centred vectors (MAC grids).
    Staggered,
    /// Anything else, or none.
    Unknown,
}

/// An index-to-world transform without rotation or shear: `world = index * scale +
/// translation` (OpenVDB's voxel centres are at integer index coordinates).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct VdbTransform {
    /// The OpenVDB map type it was read from.
    pub map: &'static str,
    /// Scale per axis (the voxel size).
    pub scale: [f64; 3],
    /// World position of index (0, 0, 0).
    pub translation: [f64; 3],
}

/// A tile: a constant region of `size³` voxels (8 in a 16³ node, 128 in a 32³ node, 4096 at
/// the root) starting at `origin`.
#[derive(Clone, Debug, PartialEq)]
pub struct VdbTile {
    /// First voxel.
    pub origin: Coord,
    /// Voxels along an edge.
    pub size: u32,
    /// The value (`components` floats).
    pub value: [f32; 3],
    /// Whether the tile's voxels are active.
    pub active: bool,
}

/// An 8³ leaf: values in OpenVDB's (and NanoVDB's) order, x major: `x * 64 + y * 8 + z`.
#[derive(Clone, Debug, PartialEq)]
pub struct VdbLeaf {
    /// First voxel (a multiple of 8).
    pub origin: Coord,
    /// 512 × components floats.
    pub values: Vec<f32>,
    /// Active voxels, bit `n % 64` of word `n / 64`.
    pub active: [u64; 8],
}

/// One grid read from a file.
#[derive(Clone, Debug)]
pub struct VdbGrid {
    /// The grid's name (the descriptor's, without OpenVDB's duplicate-name suffix).
    pub name: String,
    /// The value type.
    pub value_type: VdbValueType,
    /// Whether the values were stored as 16-bit floats.
    pub saved_as_half: bool,
    /// The class.
    pub class: VdbClass,
    /// The transform.
    pub transform: VdbTransform,
    /// Value of every voxel not in a tile or leaf (`components` floats).
    pub background: [f32; 3],
    /// Tiles whose value is not the background, or that are active.
    pub tiles: Vec<VdbTile>,
    /// Leaves, in file order.
    pub leaves: Vec<VdbLeaf>,
}

/// A grid a file holds that this reader does not read, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct SkippedGrid {
    /// The grid's name.
    pub name: String,
    /// Its type name, or why it was skipped.
    pub reason: String,
}

/// What a `.vdb` file holds.
#[derive(Clone, Debug)]
pub struct VdbFile {
    /// File format version (222–224).
    pub file_version: u32,
    /// OpenVDB library version that wrote it.
    pub library_version: (u32, u32),
    /// The grids read, in file order.
    pub grids: Vec<VdbGrid>,
    /// Grids of other types, not read.
    pub skipped: Vec<SkippedGrid>,
}

/// Whether `bytes` start with the OpenVDB magic number.
pub fn is_vdb(bytes: &[u8]) -> bool {
    bytes.len() >= 8 && bytes[..8] == VDB_MAGIC.to_le_bytes()
}

/// Reads a `.vdb` file (the whole file into memory, after checking this process can get it).
pub fn read_vdb(path: impl AsRef<Path>) -> Result<VdbFile, VdbError> {
    let path = path.as_ref();
    let io = |op: &'static str| {
        move |source| VdbError::Io {
            path: path.to_owned(),
            op,
            source,
        }
    };
    let file = std::fs::File::open(path).map_err(io("read"))?;
    let len = file.metadata().map_err(io("read"))?.len();
    let mut bytes = usize::try_from(len)
        .ok()
        .ok_or_else(|| format!("{len} bytes do not fit in memory"))
        .and_then(|n| {
            crate::memory::try_vec_with_capacity(|| format!("reading the {len}-byte file"), n)
                .map_err(|e| e.to_string())
        })
        .map_err(|detail| VdbError::Invalid {
            path: path.to_owned(),
            context: String::new(),
            offset: 0,
            detail,
        })?;
    file.take(len).read_to_end(&mut bytes).map_err(io("read"))?;
    read_vdb_from(&bytes, path)
}

/// Reads an in-memory `.vdb` file; errors name it `<memory>`.
pub fn read_vdb_bytes(bytes: &[u8]) -> Result<VdbFile, VdbError> {
    read_vdb_from(bytes, Path::new("<memory>"))
}

/// A failure inside the file, before the file and grid are attached.
struct Bad {
    offset: usize,
    detail: String,
}

type R<T> = Result<T, Bad>;

fn bad<T>(offset: usize, detail: impl Into<String>) -> R<T> {
    Err(Bad {
        offset,
        detail: detail.into(),
    })
}

/// A bounds-checked cursor over the file.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize, what: &str) -> R<&'a [u8]> {
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
    fn left(&self) -> usize {
        self.bytes.len().saturating_sub(self.pos)
    }
    fn array<const N: usize>(&mut self, what: &str) -> R<[u8; N]> {
        let s = self.take(N, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    fn u8(&mut self, what: &str) -> R<u8> {
        Ok(self.array::<1>(what)?[0])
    }
    fn u32(&mut self, what: &str) -> R<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }
    fn i32(&mut self, what: &str) -> R<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }
    fn i64(&mut self, what: &str) -> R<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }
    fn f64(&mut self, what: &str) -> R<f64> {
        Ok(f64::from_le_bytes(self.array(what)?))
    }
    fn vec3d(&mut self, what: &str) -> R<[f64; 3]> {
        Ok([self.f64(what)?, self.f64(what)?, self.f64(what)?])
    }
    fn coord(&mut self, what: &str) -> R<Coord> {
        Ok([self.i32(what)?, self.i32(what)?, self.i32(what)?])
    }
    fn string(&mut self, what: &str) -> R<String> {
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
    fn mask<const WORDS: usize>(&mut self, what: &str) -> R<[u64; WORDS]> {
        let s = self.take(WORDS * 8, what)?;
        let mut m = [0u64; WORDS];
        for (w, c) in m.iter_mut().zip(s.chunks_exact(8)) {
            *w = u64::from_le_bytes(c.try_into().expect("8-byte chunk"));
        }
        Ok(m)
    }
    fn seek(&mut self, to: i64, what: &str) -> R<()> {
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
struct GridMeta {
    class: Option<String>,
}

/// Reads a MetaMap, keeping the few entries used and skipping the rest by their size.
fn read_meta_map(c: &mut Cursor<'_>) -> R<GridMeta> {
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
    }
    Ok(meta)
}

/// Reads a transform (`math::Transform::read`: map type name, then the map).
fn read_transform(c: &mut Cursor<'_>) -> R<VdbTransform> {
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
        other => {
            return bad(
                at,
                format!(
                    "transform {other:?} is not supported (frustum and other non-linear maps \
                     cannot be stored as NanoVDB's uniform voxels)"
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
struct ValueCodec {
    value_type: VdbValueType,
    half: bool,
    compression: u32,
}

impl ValueCodec {
    /// Bytes of one value as stored in node buffers.
    fn stored_value_bytes(&self) -> usize {
        let comp = if self.half {
            2
        } else {
            self.value_type.component_bytes()
        };
        comp * self.value_type.components()
    }
    /// Bytes of one value stored raw (backgrounds, root tiles, inactive values).
    fn raw_value_bytes(&self) -> usize {
        self.value_type.component_bytes() * self.value_type.components()
    }
    /// Decodes one raw (not half) value.
    fn raw_value(&self, b: &[u8]) -> [f32; 3] {
        let v = decode_values(b, self.value_type, false, 1);
        let mut out = [0f32; 3];
        out[..v.len()].copy_from_slice(&v);
        out
    }
}

/// Decodes `count` values of `t` (each `components` floats) from little-endian bytes.
fn decode_values(b: &[u8], t: VdbValueType, half: bool, count: usize) -> Vec<f32> {
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
        out.extend(
            b.chunks_exact(8)
                .take(n)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")) as f32),
        );
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
fn read_data(c: &mut Cursor<'_>, compression: u32, bytes: usize, what: &str) -> R<Vec<u8>> {
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

fn zip_block(src: &[u8], bytes: usize) -> Result<Vec<u8>, String> {
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

fn blosc_block(src: &[u8], bytes: usize) -> Result<Vec<u8>, String> {
    if src.len() < 16 {
        return Err(format!(
            "{} bytes is shorter than a Blosc header",
            src.len()
        ));
    }
    let mut nbytes = 0usize;
    // SAFETY: `src` holds at least the 16 header bytes; `blosc_cbuffer_validate` reads only
    // those and checks that the header's compressed size equals `src.len()`, which keeps
    // the decompressor inside `src` (its documented precondition).
    let ok = unsafe {
        blosc_src::blosc_cbuffer_validate(src.as_ptr().cast::<c_void>(), src.len(), &mut nbytes)
    };
    if ok != 0 {
        return Err("invalid Blosc header (sizes disagree with the block length)".into());
    }
    if nbytes != bytes {
        return Err(format!(
            "Blosc header says {nbytes} bytes, {bytes} expected"
        ));
    }
    let mut out = vec![0u8; bytes];
    // SAFETY: `src` was validated above; `out` has `bytes` writable bytes and the call is
    // told so; one thread, no global state.
    let got = unsafe {
        blosc_src::blosc_decompress_ctx(
            src.as_ptr().cast::<c_void>(),
            out.as_mut_ptr().cast::<c_void>(),
            out.len(),
            1,
        )
    };
    if got < 0 || got as usize != bytes {
        return Err(format!("Blosc decompression failed (code {got})"));
    }
    Ok(out)
}

fn bit(mask: &[u64], n: usize) -> bool {
    mask[n >> 6] >> (n & 63) & 1 == 1
}

/// `io::readCompressedValues` for a node of `N` values (`WORDS` = N / 64 mask words).
fn read_node_values<const WORDS: usize>(
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
    let values = decode_values(&data, vc.value_type, vc.half, stored);
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

/// A 32³ or 16³ node's topology, kept until the leaf buffers are read.
struct InternalTopo {
    origin: Coord,
    children: Vec<InternalTopo>,
    /// Leaf origins (16³ nodes only).
    leaves: Vec<Coord>,
}

/// Tiles are kept when active or not the background (the rest reads as background anyway).
fn keep_tile(value: &[f32], active: bool, background: [f32; 3]) -> bool {
    active
        || value
            .iter()
            .zip(background)
            .any(|(v, b)| v.to_bits() != b.to_bits())
}

fn read_internal<const WORDS: usize>(
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
            c.mask::<8>("leaf value mask")?;
            topo.leaves.push(o);
        }
    }
    Ok(topo)
}

fn read_grid(
    c: &mut Cursor<'_>,
    name: String,
    value_type: VdbValueType,
    half: bool,
    block_pos: i64,
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
    // Leaf buffers, at the block offset.
    c.seek(block_pos, "block offset")?;
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
    for leaf_origin in tops
        .iter()
        .flat_map(|t| &t.children)
        .flat_map(|l| &l.leaves)
    {
        let what = "leaf buffer";
        let active = c.mask::<8>(what)?;
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
    })
}

fn read_vdb_from(bytes: &[u8], path: &Path) -> Result<VdbFile, VdbError> {
    let at_file = |context: &str, b: Bad| VdbError::Invalid {
        path: path.to_owned(),
        context: context.to_owned(),
        offset: b.offset as u64,
        detail: b.detail,
    };
    let mut c = Cursor { bytes, pos: 0 };
    let head = (|| -> R<(u32, (u32, u32))> {
        if !is_vdb(bytes) {
            return bad(0, "not an OpenVDB file (no \"VDB \" magic number)");
        }
        c.pos = 8;
        let version = c.u32("file version")?;
        if !(MIN_FILE_VERSION..=MAX_FILE_VERSION).contains(&version) {
            return bad(
                8,
                format!(
                    "file format version {version}: versions {MIN_FILE_VERSION} to \
                     {MAX_FILE_VERSION} (OpenVDB 3.0 and later) are read"
                ),
            );
        }
        let lib = (c.u32("library version")?, c.u32("library version")?);
        let offsets = c.u8("grid offsets flag")?;
        if offsets == 0 {
            return bad(
                c.pos - 1,
                "a stream without grid offsets (written by io::Stream) is not read; \
                 files written by io::File have them",
            );
        }
        c.take(36, "UUID")?;
        read_meta_map(&mut c)?;
        Ok((version, lib))
    })()
    .map_err(|b| at_file("", b))?;
    let (file_version, library_version) = head;
    let at = c.pos;
    let count = c.i32("grid count").map_err(|b| at_file("", b))?;
    // A descriptor takes at least 36 bytes (three string lengths, three offsets).
    if count < 0 || count as usize > c.left() / 36 {
        return Err(at_file(
            "",
            Bad {
                offset: at,
                detail: format!("grid count {count} does not fit in the file"),
            },
        ));
    }
    let mut grids = Vec::new();
    let mut skipped = Vec::new();
    for index in 0..count as usize {
        let desc = (|| -> R<_> {
            let unique = c.string("grid name")?;
            let type_name = c.string("grid type")?;
            let parent = c.string("instance parent name")?;
            let grid_pos = c.i64("grid offset")?;
            let block_pos = c.i64("block offset")?;
            let end_pos = c.i64("end offset")?;
            Ok((unique, type_name, parent, grid_pos, block_pos, end_pos))
        })()
        .map_err(|b| at_file(&format!("grid {index}: "), b))?;
        let (unique, type_name, parent, grid_pos, block_pos, end_pos) = desc;
        // OpenVDB makes duplicate names unique with a record separator and a number.
        let name = unique.split('\u{1e}').next().unwrap_or("").to_owned();
        let context = format!("grid {index} ({name:?}): ");
        let (base, half) = match type_name.strip_suffix("_HalfFloat") {
            Some(b) => (b, true),
            None => (type_name.as_str(), false),
        };
        let in_file = |p: i64| usize::try_from(p).is_ok_and(|p| p <= bytes.len());
        let ordered = grid_pos <= block_pos && block_pos <= end_pos;
        if !(in_file(grid_pos) && in_file(block_pos) && in_file(end_pos) && ordered) {
            return Err(at_file(
                &context,
                Bad {
                    offset: c.pos - 24,
                    detail: format!(
                        "grid, block and end offsets {grid_pos}, {block_pos}, {end_pos} are \
                         not in order inside the {}-byte file",
                        bytes.len()
                    ),
                },
            ));
        }
        match VdbValueType::from_type_name(base) {
            _ if !parent.is_empty() => skipped.push(SkippedGrid {
                name,
                reason: format!("an instance of grid {parent:?} (instanced grids are not read)"),
            }),
            None => skipped.push(SkippedGrid {
                name,
                reason: format!("grid type {type_name} is not read"),
            }),
            Some(t) => {
                c.seek(grid_pos, "grid offset")
                    .map_err(|b| at_file(&context, b))?;
                let g = read_grid(&mut c, name, t, half, block_pos)
                    .map_err(|b| at_file(&context, b))?;
                if c.pos as i64 > end_pos {
                    return Err(at_file(
                        &context,
                        Bad {
                            offset: c.pos,
                            detail: format!("grid data runs past its end offset {end_pos}"),
                        },
                    ));
                }
                grids.push(g);
            }
        }
        // The next descriptor follows this grid.
        c.seek(end_pos, "end offset")
            .map_err(|b| at_file(&context, b))?;
    }
    Ok(VdbFile {
        file_version,
        library_version,
        grids,
        skipped,
    })
}

/// What a grid becomes for the NanoVDB writer: one scalar per voxel (a vector's length), its
/// class, and a uniform voxel size with a translation.
#[derive(Clone, Debug)]
pub struct ScalarGrid {
    /// Leaf bricks: the file's leaves, and its tiles broken into leaves.
    pub volume: super::sparse::SparseVolume,
    /// The class NanoVDB gets (level sets and fog volumes keep theirs; a vector's length
    /// and a staggered grid have none).
    pub class: super::types::GridClass,
    /// Edge length of a voxel in world units.
    pub voxel_size: f64,
    /// World position of index (0, 0, 0).
    pub world_origin: [f64; 3],
}

/// Converts a grid read from a `.vdb` file into leaf bricks for the NanoVDB writer.
///
/// Vectors become their length, or with `component` (0, 1, 2) that component. Tiles (active, or holding something other than the
/// background, like a level set's inside) become leaves, since the writer stores leaves
/// only; at most `max_tile_leaves` leaves come from tiles (a root tile alone is 4096³
/// voxels), beyond that the grid is refused. Anisotropic or mirrored voxels are refused.
pub fn to_scalar_grid(
    g: &VdbGrid,
    component: Option<usize>,
    max_tile_leaves: u64,
) -> Result<ScalarGrid, String> {
    use super::sparse::{LEAF_VOXELS, LeafBrick, SparseVolume};
    use super::types::GridClass;
    let comps = g.value_type.components();
    if let Some(c) = component
        && c >= comps
    {
        return Err(format!("component {c} of a {comps}-component grid"));
    }
    let scalar = |v: &[f32]| -> f32 {
        match component {
            Some(c) => v[c],
            None if comps == 1 => v[0],
            None => v.iter().map(|c| c * c).sum::<f32>().sqrt(),
        }
    };
    let [sx, sy, sz] = g.transform.scale;
    let uniform = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs());
    if !(sx > 0.0 && uniform(sx, sy) && uniform(sx, sz)) {
        return Err(format!(
            "{} with scale {:?}: only uniform, positive voxel sizes can be stored (NanoVDB \
             grids written here have one voxel size)",
            g.transform.map, g.transform.scale
        ));
    }
    let tile_leaves: u64 = g.tiles.iter().map(|t| u64::from(t.size / 8).pow(3)).sum();
    if tile_leaves > max_tile_leaves {
        let big = g.tiles.iter().max_by_key(|t| t.size).expect("tiles exist");
        return Err(format!(
            "its tiles (the largest {}³ voxels at {:?}, {}) would need {tile_leaves} leaves; \
             tiles are stored as leaves, and at most {max_tile_leaves} are made from tiles",
            big.size,
            big.origin,
            if big.active { "active" } else { "inactive" }
        ));
    }
    let bricks_total = g.leaves.len() as u64 + tile_leaves;
    crate::memory::check_available(
        || format!("{bricks_total} leaves of voxels"),
        bricks_total.saturating_mul(std::mem::size_of::<LeafBrick>() as u64 + 4 * 512 + 64),
    )
    .map_err(|e| e.to_string())?;
    let mut index = std::collections::HashMap::<Coord, usize>::new();
    let mut bricks: Vec<LeafBrick> = Vec::with_capacity(g.leaves.len() + tile_leaves as usize);
    for t in &g.tiles {
        let n = (t.size / 8) as i32;
        let value = scalar(&t.value[..comps]);
        for x in 0..n {
            for y in 0..n {
                for z in 0..n {
                    let origin = [
                        t.origin[0] + 8 * x,
                        t.origin[1] + 8 * y,
                        t.origin[2] + 8 * z,
                    ];
                    let mut b = LeafBrick::filled(origin, value);
                    if t.active {
                        b.active = [u64::MAX; 8];
                    }
                    match index.get(&origin) {
                        Some(&i) => bricks[i] = b,
                        None => {
                            index.insert(origin, bricks.len());
                            bricks.push(b);
                        }
                    }
                }
            }
        }
    }
    for l in &g.leaves {
        let mut b = LeafBrick::filled(l.origin, 0.0);
        for (i, v) in l.values.chunks_exact(comps).take(LEAF_VOXELS).enumerate() {
            b.values[i] = scalar(v);
        }
        b.active = l.active;
        match index.get(&l.origin) {
            Some(&i) => bricks[i] = b,
            None => {
                index.insert(l.origin, bricks.len());
                bricks.push(b);
            }
        }
    }
    let class = match (g.class, comps) {
        (VdbClass::LevelSet, 1) => GridClass::LevelSet,
        (VdbClass::FogVolume, 1) => GridClass::FogVolume,
        _ => GridClass::Unknown,
    };
    Ok(ScalarGrid {
        volume: SparseVolume {
            background: scalar(&g.background[..comps]),
            bricks,
        },
        class,
        voxel_size: sx,
        world_origin: g.transform.translation,
    })
}

/// The first 8 bytes of a file, to tell `.vdb` from `.nvdb` without trusting the name.
pub fn sniff(path: &Path) -> std::io::Result<[u8; 8]> {
    let mut head = [0u8; 8];
    let mut f = std::fs::File::open(path)?;
    let mut got = 0;
    while got < 8 {
        let n = f.read(&mut head[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
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
}
