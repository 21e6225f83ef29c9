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
//! affine matrices of that form), with a voxel size per axis; others are refused with their
//! name.
//!
//! Offsets are used as libopenvdb uses them (`io::File::readGridDescriptors`,
//! `io::Archive::readGrid`): the grid offset says where a grid starts and the end offset
//! where the next descriptor is; the leaf buffers are read right after the topology. The
//! structure is cross-checked against them: the topology must end at the block offset (one
//! layout is tolerated with a note in [`VdbGrid::notes`]: tinyvdb 0.9 writes the grid offset
//! there, and libopenvdb reads its files), the leaf buffers must end exactly at the end
//! offset, and each leaf buffer's value mask must be the one the topology gave it. A type
//! name or a node count that disagrees with the data fails one of these. Type names OpenVDB
//! never writes are errors; grids of other OpenVDB types are listed as skipped.
//!
//! Grids that share a name (OpenVDB writes them as `name` + U+001E + a number) get the
//! names `name`, `name#1`, `name#2`, ... in file order, as OpenVDB numbers them.

use super::types::Coord;
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
    /// 64-bit float (`Tree_double_5_4_3`), read as the nearest 32-bit float (the largest
    /// rounding error is [`VdbGrid::narrowing_error`]).
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
    /// The grid's name, unique in the file: the descriptor's, and for the second and later
    /// grids of one name `NAME#1`, `NAME#2`, ... (see [`unique_grid_names`]).
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
    /// For double-precision grids (read as 32-bit floats): the largest absolute difference
    /// between a stored double and the float it became, over every value read (background,
    /// tiles, leaves; each component of a vector). `None` for grids stored as floats.
    pub narrowing_error: Option<f64>,
    /// Things in the file that libopenvdb tolerates and this reader did too (a block offset
    /// that is not where the leaf buffers are), for the caller to pass on.
    pub notes: Vec<String>,
    /// The grid's `units` (or `unit`) string metadata as written (invalid UTF-8 replaced),
    /// unchecked: the dataset checks it before a manifest holds it.
    pub units: Option<String>,
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
    use crate::format::file::{WholeFileError, read_whole};
    let path = path.as_ref();
    let bytes = read_whole(path).map_err(|e| match e {
        WholeFileError::Io(op, source) => VdbError::Io {
            path: path.to_owned(),
            op,
            source,
        },
        WholeFileError::TooLarge(detail) => VdbError::Invalid {
            path: path.to_owned(),
            context: String::new(),
            offset: 0,
            detail,
        },
    })?;
    read_vdb_from(&bytes, path)
}

/// Reads an in-memory `.vdb` file; errors name it `<memory>`.
pub fn read_vdb_bytes(bytes: &[u8]) -> Result<VdbFile, VdbError> {
    read_vdb_from(bytes, Path::new("<memory>"))
}

/// A failure inside the file, before the file and grid are attached.
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
    let mut names = UniqueNames::default();
    for index in 0..count as usize {
        let desc = read_descriptor(&mut c).map_err(|b| at_file(&format!("grid {index}: "), b))?;
        let name = names.next(desc.unique.split('\u{1e}').next().unwrap_or(""));
        let context = format!("grid {index} ({name:?}): ");
        check_offsets(&desc, bytes.len(), c.pos).map_err(|b| at_file(&context, b))?;
        let (base, half) = match desc.type_name.strip_suffix("_HalfFloat") {
            Some(b) => (b, true),
            None => (desc.type_name.as_str(), false),
        };
        if !is_known_tree_type(base) {
            return Err(at_file(
                &context,
                Bad {
                    offset: c.pos - 24,
                    detail: format!(
                        "grid type {:?} is not a type OpenVDB writes (Tree_<value>_5_4_3 with \
                         a known value type): the descriptor is damaged",
                        desc.type_name
                    ),
                },
            ));
        }
        match VdbValueType::from_type_name(base) {
            _ if !desc.parent.is_empty() => skipped.push(SkippedGrid {
                name,
                reason: format!(
                    "an instance of grid {:?} (instanced grids are not read)",
                    desc.parent
                ),
            }),
            None => skipped.push(SkippedGrid {
                name,
                reason: format!("grid type {} is not read", desc.type_name),
            }),
            Some(t) => {
                c.seek(desc.grid_pos, "grid offset")
                    .map_err(|b| at_file(&context, b))?;
                let offsets = GridOffsets {
                    grid_pos: desc.grid_pos,
                    block_pos: desc.block_pos,
                };
                let g =
                    read_grid(&mut c, name, t, half, offsets).map_err(|b| at_file(&context, b))?;
                if c.pos as i64 != desc.end_pos {
                    return Err(at_file(
                        &context,
                        Bad {
                            offset: c.pos,
                            detail: format!(
                                "the leaf buffers end at byte {}, but the descriptor's end \
                                 offset is {}: the grid type or the node counts do not match \
                                 the data",
                                c.pos, desc.end_pos
                            ),
                        },
                    ));
                }
                grids.push(g);
            }
        }
        // The next descriptor follows this grid.
        c.seek(desc.end_pos, "end offset")
            .map_err(|b| at_file(&context, b))?;
    }
    Ok(VdbFile {
        file_version,
        library_version,
        grids,
        skipped,
    })
}

/// Value types of the trees libopenvdb registers (and Houdini's and Blender's builds add):
/// grids of these are legitimately in files and are listed as skipped when not read; any
/// other type name is a damaged descriptor.
const KNOWN_TREE_VALUE_TYPES: &[&str] = &[
    "bool",
    "float",
    "double",
    "half",
    "int32",
    "int64",
    "uint32",
    "vec2i",
    "vec2s",
    "vec2d",
    "vec3i",
    "vec3s",
    "vec3d",
    "vec4i",
    "vec4s",
    "vec4d",
    "mat4s",
    "mat4d",
    "string",
    "ValueMask",
    "ptdataidx32",
    "ptidx32",
    "ptidx64",
];

/// Whether `base` (a type name without `_HalfFloat`) is a tree type OpenVDB writes.
fn is_known_tree_type(base: &str) -> bool {
    base.strip_prefix("Tree_")
        .and_then(|t| t.strip_suffix("_5_4_3"))
        .is_some_and(|value| KNOWN_TREE_VALUE_TYPES.contains(&value))
}

/// A grid descriptor (`io::GridDescriptor::read`).
struct Descriptor {
    unique: String,
    type_name: String,
    parent: String,
    grid_pos: i64,
    block_pos: i64,
    end_pos: i64,
}

fn read_descriptor(c: &mut Cursor<'_>) -> R<Descriptor> {
    Ok(Descriptor {
        unique: c.string("grid name")?,
        type_name: c.string("grid type")?,
        parent: c.string("instance parent name")?,
        grid_pos: c.i64("grid offset")?,
        block_pos: c.i64("block offset")?,
        end_pos: c.i64("end offset")?,
    })
}

/// The offsets this reader uses: the grid starts after its descriptor (`after`) and ends
/// inside the file, past its start. The block offset is only cross-checked later.
fn check_offsets(d: &Descriptor, file_len: usize, after: usize) -> R<()> {
    let in_file = |p: i64| usize::try_from(p).is_ok_and(|p| p <= file_len);
    if !(in_file(d.grid_pos) && in_file(d.end_pos))
        || d.grid_pos < after as i64
        || d.grid_pos >= d.end_pos
    {
        return bad(
            after - 24,
            format!(
                "grid offset {} and end offset {} do not frame a grid between the end of its \
                 descriptor (byte {after}) and the end of the {file_len}-byte file",
                d.grid_pos, d.end_pos
            ),
        );
    }
    Ok(())
}

/// Names grids as they come: a name's first grid keeps it, later ones get `#1`, `#2`, ...
/// (OpenVDB's own suffix numbers, which it shows as `NAME[1]`); a made name that another grid
/// already has gets the next number.
#[derive(Default)]
struct UniqueNames {
    seen: std::collections::HashMap<String, usize>,
    given: std::collections::HashSet<String>,
}

impl UniqueNames {
    fn next(&mut self, base: &str) -> String {
        let count = self.seen.entry(base.to_owned()).or_insert(0);
        let mut name = base.to_owned();
        while self.given.contains(&name) {
            *count += 1;
            name = format!("{base}#{count}");
        }
        self.given.insert(name.clone());
        name
    }
}

/// The names [`read_vdb`] gives grids called `names` (in file order): each name's first
/// grid keeps it, later ones become `NAME#1`, `NAME#2`, ...
pub fn unique_grid_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut u = UniqueNames::default();
    names.into_iter().map(|n| u.next(n)).collect()
}

/// What a grid becomes for the NanoVDB writer: one scalar per voxel (a vector's length), its
/// class, and a voxel size per axis with a translation.
#[derive(Clone, Debug)]
pub struct ScalarGrid {
    /// Leaf bricks: the file's leaves, and its tiles broken into leaves.
    pub volume: super::sparse::SparseVolume,
    /// The class NanoVDB gets (level sets and fog volumes keep theirs; a vector's length
    /// and a staggered grid have none).
    pub class: super::types::GridClass,
    /// Edge lengths of a voxel along x, y and z in world units (positive), exactly as the
    /// file's map stores them.
    pub voxel_size: [f64; 3],
    /// World position of index (0, 0, 0).
    pub world_origin: [f64; 3],
}

/// Converts a grid read from a `.vdb` file into leaf bricks for the NanoVDB writer.
///
/// Vectors become their length, or with `component` (0, 1, 2) that component. Tiles (active, or holding something other than the
/// background, like a level set's inside) become leaves, since the writer stores leaves
/// only; at most `max_tile_leaves` leaves come from tiles (a root tile alone is 4096³
/// voxels), beyond that the grid is refused. Voxel sizes may differ per axis; a negative
/// scale (a mirrored axis) is refused with the map's name.
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
    if g.transform.scale.iter().any(|&s| s <= 0.0) {
        return Err(format!(
            "{} with scale {:?}: a negative scale (a mirrored axis) is not supported; the \
             grids written here have positive voxel sizes",
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
        voxel_size: g.transform.scale,
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

mod read;
use read::*;
#[cfg(test)]
mod tests;
