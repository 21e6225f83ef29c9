//! `.nvdb` files: NanoVDB's segmented file format, and raw grid-buffer files.
//!
//! A segmented file (NanoVDB `io::writeGrid(s)`, every version 32.3–32.9) is one or more
//! segments, each:
//!
//! ```text
//! FileHeader (16 B): magic u64 ("NanoVDB0", or "NanoVDB2" since 32.7), version u32,
//!                    grid count u16, codec u16
//! per grid: FileMetaData (176 B) followed by its name (nameSize bytes, NUL included)
//! per grid: the payload, see `codec`
//! ```
//!
//! A payload ends where its size prefixes say (NanoVDB's sequential readers never use
//! `fileSize`); `fileSize` must match it as NanoVDB's writer records it (prefixes included)
//! or as warp-lang's `Volume.save_to_nvdb` does (compressed bytes only), see
//! [`codec::payload_extent`]. warp-lang also leaves `nameKey`, `voxelCount`, `indexBBox` and
//! the node counts at 0, which this reader does not rely on (the grid header has them).
//!
//! `FileMetaData`: gridSize u64, fileSize u64, nameKey u64, voxelCount u64, gridType u32,
//! gridClass u32, worldBBox 6×f64, indexBBox 6×i32, voxelSize 3×f64, nameSize u32,
//! nodeCount 4×u32 (leaf, lower, upper, 1 root), tileCount 3×u32, codec u16, blind-data count
//! u16 (32.3–32.5: padding), version u32.
//!
//! A raw grid-buffer file (32.6+ `GridHandle::write`) is just grid buffers back to back; its
//! first eight bytes are a grid magic.
//!
//! Debian's NanoVDB 32.4 tools require of a file: the header magic exactly "NanoVDB0"
//! (they reject "NanoVDB2"), header major version 32, a grid magic "NanoVDB0" (their
//! `GridData::isValid` knows no other), `nameKey` equal to NanoVDB's string hash of the name
//! (their name lookups compare it), and correct `fileSize`s (used to seek). [`write_nvdb`]
//! therefore writes "NanoVDB0" in the file header and rewrites a grid's "NanoVDB1" magic to
//! "NanoVDB0"; both are outside every checksum's range. NanoVDB 32.7+ reads such files too.

use super::checksum::{CHECKSUM_DISABLED, ChecksumScheme, compute_checksum_with};
use super::codec::{self, CodecError};
use super::error::{FormatError, NvdbError};
use super::grid::Grid;
use super::layout as l;
use super::le::LeBytes;
use super::types::{Codec, Coord, GridClass, GridType, Version};
use std::path::Path;

/// Size of `FileHeader`.
pub const FILE_HEADER_SIZE: usize = 16;
/// Size of `FileMetaData`.
pub const FILE_META_SIZE: usize = 176;
/// Longest grid name accepted in file metadata (NanoVDB names in blind data are unbounded,
/// but a name beyond this is a corrupt size field).
pub const MAX_NAME_SIZE: u32 = 1 << 20;

/// Metadata of one grid as a file describes it (`FileMetaData`).
#[derive(Clone, Debug, PartialEq)]
pub struct FileGridMeta {
    /// Bytes of the decompressed grid.
    pub grid_size: u64,
    /// Bytes of the payload in the file.
    pub file_size: u64,
    /// NanoVDB's hash of the name (0: not set).
    pub name_key: u64,
    /// Active voxels.
    pub voxel_count: u64,
    /// Value type (`Unknown` if the stored number is not one).
    pub grid_type: GridType,
    /// Grid class (`Unknown` if the stored number is not one).
    pub grid_class: GridClass,
    /// World-space bbox [min, max].
    pub world_bbox: [[f64; 3]; 2],
    /// Index-space bbox [min, max] (inclusive).
    pub index_bbox: [Coord; 2],
    /// Voxel size.
    pub voxel_size: [f64; 3],
    /// Node counts: leaves, lower, upper, root.
    pub node_count: [u32; 4],
    /// Active tile counts: lower, upper, root.
    pub tile_count: [u32; 3],
    /// Compression of the payload.
    pub codec: Codec,
    /// Number of blind data entries (0 in files of 32.3–32.5, where this is padding).
    pub blind_data_count: u16,
    /// Version in the segment header (NanoVDB's readers use it for the grid's metadata).
    pub version: Version,
}

/// One grid read from a file: its name and metadata, and the decompressed grid buffer, which
/// [`Grid::parse`] has already validated. The buffer's bytes are exactly those written
/// (NanoVDB's readers reset `mGridIndex`/`mGridCount` to 0/1 and refresh the head checksum;
/// this reader leaves them as stored, which a single-grid parse accepts).
#[derive(Clone, Debug)]
pub struct FileGrid {
    /// The name in the file metadata (may be empty).
    pub name: String,
    /// The file metadata (derived from the grid header for raw grid files).
    pub meta: FileGridMeta,
    /// The grid buffer.
    pub bytes: Vec<u8>,
}

impl FileGrid {
    /// A validated view of [`FileGrid::bytes`].
    pub fn grid(&self) -> Result<Grid<'_>, FormatError> {
        Grid::parse(&self.bytes)
    }
}

/// NanoVDB's `io::stringHash`: the grid-name key stored in `FileMetaData::nameKey`.
pub fn string_hash(name: &str) -> u64 {
    let mut hash: u64 = 0;
    for &c in name.as_bytes() {
        if c == 0 {
            break; // NanoVDB hashes a C string
        }
        let overflow = hash >> (64 - 8);
        hash = hash
            .wrapping_mul(67)
            .wrapping_add(u64::from(c))
            .wrapping_add(overflow);
    }
    hash
}

/// Reads every grid of a `.nvdb` file (segmented, any codec, or a raw grid-buffer file).
///
/// The whole file is read into memory, after checking that this process can get that much
/// (a sparse file can be far larger than its disk use).
pub fn read_nvdb(path: impl AsRef<Path>) -> Result<Vec<FileGrid>, NvdbError> {
    let path = path.as_ref();
    let bytes = read_whole(path).map_err(|e| match e {
        WholeFileError::Io(op, source) => NvdbError::Io {
            path: path.to_owned(),
            op,
            source,
        },
        WholeFileError::TooLarge(detail) => NvdbError::File {
            path: path.to_owned(),
            offset: 0,
            detail,
        },
    })?;
    read_nvdb_from(&bytes, path)
}

/// Why [`read_whole`] could not read a file.
#[derive(Debug)]
pub(crate) enum WholeFileError {
    /// The operation that failed, and how.
    Io(&'static str, std::io::Error),
    /// This process cannot get memory for the whole file (what was asked, and why not).
    TooLarge(String),
}

/// Reads a whole file into memory, after checking that this process can get that much (a
/// sparse file can be far larger than its disk use); at most the length seen at open (a file
/// that grows meanwhile is read as it was). The readers of `.nvdb` and `.vdb` files share it.
pub(crate) fn read_whole(path: &Path) -> Result<Vec<u8>, WholeFileError> {
    use std::io::Read;
    let io = |e| WholeFileError::Io("read", e);
    let file = std::fs::File::open(path).map_err(io)?;
    let len = file.metadata().map_err(io)?.len();
    let mut bytes = usize::try_from(len)
        .ok()
        .ok_or_else(|| format!("{len} bytes do not fit in memory"))
        .and_then(|n| {
            crate::memory::try_vec_with_capacity(|| format!("reading the {len}-byte file"), n)
                .map_err(|e| e.to_string())
        })
        .map_err(WholeFileError::TooLarge)?;
    file.take(len).read_to_end(&mut bytes).map_err(io)?;
    Ok(bytes)
}

/// Reads every grid of an in-memory `.nvdb` file; errors name the file as `<memory>`.
pub fn read_nvdb_bytes(bytes: &[u8]) -> Result<Vec<FileGrid>, NvdbError> {
    read_nvdb_from(bytes, Path::new("<memory>"))
}

/// A field of a segment header or grid metadata record that the bounds-checked reader could
/// not read, as a file error at the record's offset `at`.
fn short_record(path: &Path, at: usize) -> impl Fn(FormatError) -> NvdbError + '_ {
    move |e| NvdbError::File {
        path: path.to_owned(),
        offset: at as u64,
        detail: e.to_string(),
    }
}

/// Whether `b` starts like a raw grid buffer rather than a file header, by the checks NanoVDB's
/// `GridData::isValid` makes ("NanoVDB0" is both a file and a legacy grid magic).
fn looks_like_raw_grid(b: &[u8]) -> bool {
    let Some(magic) = b.get(0..8) else {
        return false;
    };
    if magic == l::MAGIC_GRID_BYTES {
        return true;
    }
    if magic != l::MAGIC_NUMB_BYTES || b.len() < l::GRID_SIZE as usize {
        return false;
    }
    let le = LeBytes::new(b);
    let field = |off: u32| le.u32_at(off as usize, "grid header field").ok();
    // The length check above makes these reads succeed; a failed one is "not a grid".
    let (Some(version), Some(index), Some(count), Some(class), Some(gtype)) = (
        field(l::GRID_OFF_VERSION),
        field(l::GRID_OFF_GRID_INDEX),
        field(l::GRID_OFF_GRID_COUNT),
        field(l::GRID_OFF_GRID_CLASS),
        field(l::GRID_OFF_GRID_TYPE),
    ) else {
        return false;
    };
    let version = Version(version);
    version.major() == l::MAJOR_VERSION
        && count > 0
        && index < count
        && class < 16
        && GridType::from_u32(gtype).is_some()
}

fn read_nvdb_from(bytes: &[u8], path: &Path) -> Result<Vec<FileGrid>, NvdbError> {
    let file_err = |offset: usize, detail: String| NvdbError::File {
        path: path.to_owned(),
        offset: offset as u64,
        detail,
    };
    if bytes.len() < 8 {
        return Err(file_err(
            0,
            format!("{} bytes is too short for a NanoVDB file", bytes.len()),
        ));
    }
    if looks_like_raw_grid(bytes) {
        return read_raw(bytes, path);
    }
    let mut grids = Vec::new();
    let mut pos = 0usize;
    while pos < bytes.len() {
        let seg = pos;
        let rest = &bytes[pos..];
        if rest.len() < FILE_HEADER_SIZE {
            return Err(file_err(
                pos,
                format!(
                    "{} bytes left, too few for a segment header ({FILE_HEADER_SIZE} bytes)",
                    rest.len()
                ),
            ));
        }
        let magic = &rest[0..8];
        if magic != l::MAGIC_NUMB_BYTES && magic != l::MAGIC_FILE_BYTES {
            let hint = if magic == l::MAGIC_GRID_BYTES {
                " (a raw grid buffer, where a segment header was expected)"
            } else {
                ""
            };
            return Err(file_err(
                pos,
                format!(
                    "bad segment magic {:?}{hint}, expected \"NanoVDB0\" or \"NanoVDB2\"",
                    String::from_utf8_lossy(magic)
                ),
            ));
        }
        let head = LeBytes::new(rest);
        let version = Version(
            head.u32_at(8, "segment version")
                .map_err(short_record(path, seg))?,
        );
        if version.major() != l::MAJOR_VERSION {
            return Err(file_err(
                pos,
                format!("segment version {version}: only 32.x files are read"),
            ));
        }
        let count = usize::from(
            head.u16_at(12, "segment grid count")
                .map_err(short_record(path, seg))?,
        );
        let codec_raw = head
            .u16_at(14, "segment codec")
            .map_err(short_record(path, seg))?;
        let codec = Codec::from_u16(codec_raw)
            .ok_or_else(|| file_err(pos, format!("unknown codec {codec_raw}")))?;
        pos += FILE_HEADER_SIZE;
        // Metadata and names. A count is at most 65535, each entry at least 176 bytes: the
        // buffer length bounds the work before anything is allocated.
        if count * FILE_META_SIZE > bytes.len() - pos {
            return Err(file_err(
                seg,
                format!(
                    "segment claims {count} grids but only {} bytes follow its header",
                    bytes.len() - pos
                ),
            ));
        }
        let mut metas = Vec::with_capacity(count);
        for i in 0..count {
            let idx = grids.len() + i;
            let Some(m) = bytes.get(pos..pos + FILE_META_SIZE) else {
                return Err(file_err(
                    pos,
                    format!("file ends inside the metadata of grid {idx}"),
                ));
            };
            let meta_at = pos;
            let m = LeBytes::new(m);
            let rd = short_record(path, meta_at);
            let name_size = m.u32_at(136, "grid name size").map_err(&rd)?;
            if name_size > MAX_NAME_SIZE || name_size as usize > bytes.len() - pos - FILE_META_SIZE
            {
                return Err(file_err(
                    pos,
                    format!("grid {idx}: name size {name_size} runs past the end of the file"),
                ));
            }
            let name_bytes =
                &bytes[pos + FILE_META_SIZE..pos + FILE_META_SIZE + name_size as usize];
            let name_bytes = name_bytes.split(|&c| c == 0).next().unwrap_or(name_bytes);
            let name = String::from_utf8_lossy(name_bytes).into_owned();
            let wb: [f64; 6] = m.f64s(40, "world bounding box").map_err(&rd)?;
            let meta = FileGridMeta {
                grid_size: m.u64_at(0, "grid size").map_err(&rd)?,
                file_size: m.u64_at(8, "payload size").map_err(&rd)?,
                name_key: m.u64_at(16, "name key").map_err(&rd)?,
                voxel_count: m.u64_at(24, "voxel count").map_err(&rd)?,
                grid_type: GridType::from_u32(m.u32_at(32, "grid type").map_err(&rd)?)
                    .unwrap_or(GridType::Unknown),
                grid_class: GridClass::from_u32(m.u32_at(36, "grid class").map_err(&rd)?)
                    .unwrap_or(GridClass::Unknown),
                world_bbox: [[wb[0], wb[1], wb[2]], [wb[3], wb[4], wb[5]]],
                index_bbox: [
                    m.coord_at(88, "index bounding box").map_err(&rd)?,
                    m.coord_at(100, "index bounding box").map_err(&rd)?,
                ],
                voxel_size: m.f64s(112, "voxel size").map_err(&rd)?,
                node_count: m.u32s(140, "node counts").map_err(&rd)?,
                tile_count: m.u32s(156, "tile counts").map_err(&rd)?,
                codec,
                blind_data_count: m.u16_at(170, "blind data count").map_err(&rd)?,
                version,
            };
            pos += FILE_META_SIZE + name_size as usize;
            metas.push((name, meta));
        }
        // Payloads.
        for (name, meta) in metas {
            let index = grids.len();
            let grid_err = |detail: String| NvdbError::Grid {
                path: path.to_owned(),
                index,
                name: name.clone(),
                detail,
            };
            let (end, read) = read_payload(bytes, pos, codec, name.clone(), meta, grid_err)?;
            pos = end;
            grids.extend(read);
        }
    }
    Ok(grids)
}

/// The payload of one metadata record at byte `pos`: where it ends, and its grid (or the
/// grids of a batch, see [`split_batch`]). `grid_err` names the grid in errors.
fn read_payload(
    bytes: &[u8],
    pos: usize,
    codec: Codec,
    name: String,
    meta: FileGridMeta,
    grid_err: impl Fn(String) -> NvdbError,
) -> Result<(usize, Vec<FileGrid>), NvdbError> {
    if usize::try_from(meta.file_size)
        .ok()
        .and_then(|n| pos.checked_add(n))
        .is_none_or(|e| e > bytes.len())
    {
        return Err(grid_err(format!(
            "payload of {} bytes at byte {pos} runs past the end of the {}-byte file",
            meta.file_size,
            bytes.len()
        )));
    }
    // The payload's own size prefixes say where it ends; `fileSize` must agree
    // with them in one of the ways known writers record it.
    let extent = codec::payload_extent(codec, &bytes[pos..], meta.grid_size)
        .map_err(|CodecError(e)| grid_err(format!("payload at byte {pos}: {e}")))?;
    if !extent.accepts_file_size(meta.file_size) {
        let known = if extent.prefixes > 0 {
            format!(
                "{} (NanoVDB) or {} (warp-lang, without the {} size prefix bytes)",
                extent.len,
                extent.len - 8 * extent.prefixes,
                8 * extent.prefixes
            )
        } else {
            format!("{} (the grid size)", extent.len)
        };
        return Err(grid_err(format!(
            "payload at byte {pos}: file metadata says {} bytes, its {codec} framing \
             makes it {known}",
            meta.file_size
        )));
    }
    // `payload_extent` checked the extent against the file's length.
    let end = pos + extent.len as usize;
    let data = codec::decode_grid(codec, &bytes[pos..end], meta.grid_size)
        .map_err(|CodecError(e)| grid_err(format!("payload at byte {pos}: {e}")))?;
    let grid = Grid::parse(&data).map_err(|e| grid_err(e.to_string()))?;
    if grid.header().grid_count > 1 && grid.grid_size() < meta.grid_size {
        drop(grid);
        let batch = split_batch(data, meta.grid_size).map_err(grid_err)?;
        return Ok((end, batch));
    }
    if grid.grid_size() != meta.grid_size {
        return Err(grid_err(format!(
            "grid header says {} bytes, file metadata {}",
            grid.grid_size(),
            meta.grid_size
        )));
    }
    if meta.grid_type != grid.grid_type() {
        return Err(grid_err(format!(
            "file metadata says {} values, the grid header {}",
            meta.grid_type,
            grid.grid_type()
        )));
    }
    drop(grid);
    Ok((
        end,
        vec![FileGrid {
            name,
            meta,
            bytes: data,
        }],
    ))
}

/// The grids of a buffer that holds several back to back under one metadata record, as fVDB
/// saves a grid batch (its metadata says one grid of the whole buffer's size; NanoVDB 32.6+
/// readers show only the first). Each grid must carry its index and the count, and together
/// they must fill the buffer exactly; each is named by its header, its metadata derived from
/// it as for a raw grid file.
fn split_batch(data: Vec<u8>, grid_size: u64) -> Result<Vec<FileGrid>, String> {
    let grids = Grid::parse_all(&data).map_err(|e| {
        format!("a buffer of several grids (a batch, as fVDB writes) that does not parse: {e}")
    })?;
    let total: u64 = grids.iter().map(Grid::grid_size).sum();
    if total != grid_size {
        return Err(format!(
            "a buffer of {} grids (a batch, as fVDB writes) whose sizes add up to {total} \
             bytes, where the file metadata says {grid_size}",
            grids.len()
        ));
    }
    Ok(owned_grids(&grids))
}

/// Copies of `grids`, each named by its header, its metadata derived from it.
fn owned_grids(grids: &[Grid<'_>]) -> Vec<FileGrid> {
    grids
        .iter()
        .map(|g| FileGrid {
            name: g.name().to_owned(),
            meta: meta_from_grid(g, Codec::None, g.grid_size()),
            bytes: g.as_bytes().to_vec(),
        })
        .collect()
}

/// Metadata of a grid buffer, as NanoVDB's `FileGridMetaData` constructor derives it.
pub fn meta_from_grid(grid: &Grid<'_>, codec: Codec, file_size: u64) -> FileGridMeta {
    let h = grid.header();
    FileGridMeta {
        grid_size: h.grid_size,
        file_size,
        name_key: string_hash(&h.name),
        voxel_count: h.active_voxel_count,
        grid_type: h.grid_type,
        grid_class: h.grid_class,
        world_bbox: h.world_bbox,
        index_bbox: h.index_bbox,
        voxel_size: h.voxel_size,
        node_count: [
            h.node_counts.leaves,
            h.node_counts.lower,
            h.node_counts.upper,
            1,
        ],
        tile_count: [h.tile_counts.lower, h.tile_counts.upper, h.tile_counts.root],
        codec,
        blind_data_count: h.blind_metadata_count.min(u32::from(u16::MAX)) as u16,
        version: h.version,
    }
}

fn read_raw(bytes: &[u8], path: &Path) -> Result<Vec<FileGrid>, NvdbError> {
    let grids = Grid::parse_all(bytes).map_err(|e| NvdbError::Grid {
        path: path.to_owned(),
        index: 0,
        name: String::new(),
        detail: format!("raw grid buffer: {e}"),
    })?;
    Ok(owned_grids(&grids))
}

/// Encodes the segmented file for `grids` (one segment) in memory; see [`write_nvdb`].
pub fn encode_nvdb(grids: &[&[u8]], codec: Codec) -> Result<Vec<u8>, NvdbError> {
    encode_for(grids, codec, Path::new("<memory>"))
}

fn encode_for(grids: &[&[u8]], codec: Codec, path: &Path) -> Result<Vec<u8>, NvdbError> {
    let input = |index: usize, source: FormatError| NvdbError::Input {
        path: path.to_owned(),
        index,
        source,
    };
    if grids.is_empty() || grids.len() > usize::from(u16::MAX) {
        return Err(NvdbError::File {
            path: path.to_owned(),
            offset: 0,
            detail: format!("a segment holds 1 to 65535 grids, not {}", grids.len()),
        });
    }
    let mut metas = Vec::with_capacity(grids.len());
    let mut payloads = Vec::with_capacity(grids.len());
    let mut version = Version::new(32, 4, 2);
    for (i, bytes) in grids.iter().enumerate() {
        let grid = Grid::parse(bytes).map_err(|e| input(i, e))?;
        let mut data = grid.as_bytes().to_vec();
        // Grid magic "NanoVDB0" for NanoVDB 32.3–32.6 readers (no checksum covers bytes 0..16).
        data[..8].copy_from_slice(&l::MAGIC_NUMB_BYTES);
        // A grid taken from a multi-grid buffer becomes grid 0 of 1, as NanoVDB's
        // `updateGridCount` makes it on reading; the head CRC covers these fields.
        let h = grid.header();
        if h.grid_index != 0 || h.grid_count != 1 {
            data[l::GRID_OFF_GRID_INDEX as usize..][..4].copy_from_slice(&0u32.to_le_bytes());
            data[l::GRID_OFF_GRID_COUNT as usize..][..4].copy_from_slice(&1u32.to_le_bytes());
            if h.checksum != CHECKSUM_DISABLED {
                let scheme = ChecksumScheme::for_version(h.version);
                let head = compute_checksum_with(&data, scheme, false).map_err(|e| input(i, e))?;
                let sum = (h.checksum & 0xffff_ffff_0000_0000) | (head & 0xffff_ffff);
                data[l::GRID_OFF_CHECKSUM as usize..][..8].copy_from_slice(&sum.to_le_bytes());
            }
        }
        if i == 0 {
            version = grid.version();
        }
        let payload = codec::encode(codec, &data).map_err(|CodecError(e)| NvdbError::Grid {
            path: path.to_owned(),
            index: i,
            name: grid.name().to_owned(),
            detail: e,
        })?;
        metas.push((
            grid.name().to_owned(),
            meta_from_grid(&grid, codec, payload.len() as u64),
        ));
        payloads.push(payload);
    }
    let mut out = Vec::new();
    out.extend_from_slice(&l::MAGIC_NUMB_BYTES);
    out.extend_from_slice(&version.0.to_le_bytes());
    out.extend_from_slice(&(grids.len() as u16).to_le_bytes());
    out.extend_from_slice(&(codec as u16).to_le_bytes());
    for (name, m) in &metas {
        out.extend_from_slice(&m.grid_size.to_le_bytes());
        out.extend_from_slice(&m.file_size.to_le_bytes());
        out.extend_from_slice(&m.name_key.to_le_bytes());
        out.extend_from_slice(&m.voxel_count.to_le_bytes());
        out.extend_from_slice(&(m.grid_type as u32).to_le_bytes());
        out.extend_from_slice(&(m.grid_class as u32).to_le_bytes());
        for v in m.world_bbox.iter().flatten() {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in m.index_bbox.iter().flatten() {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in &m.voxel_size {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(name.len() as u32 + 1).to_le_bytes());
        for v in &m.node_count {
            out.extend_from_slice(&v.to_le_bytes());
        }
        for v in &m.tile_count {
            out.extend_from_slice(&v.to_le_bytes());
        }
        out.extend_from_slice(&(codec as u16).to_le_bytes());
        out.extend_from_slice(&m.blind_data_count.to_le_bytes());
        out.extend_from_slice(&m.version.0.to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.push(0);
    }
    for p in &payloads {
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// Writes `grids` (each a grid buffer, validated first) as a standard segmented `.nvdb` file
/// with one segment, readable by NanoVDB 32.4 through 32.9 (see the module documentation).
///
/// Crash-safe: the file is written under a temporary name in the same directory, synced,
/// renamed over `path`, and the directory is synced; a reader never sees a partial file.
pub fn write_nvdb(path: impl AsRef<Path>, grids: &[&[u8]], codec: Codec) -> Result<(), NvdbError> {
    let path = path.as_ref();
    let data = encode_for(grids, codec, path)?;
    crate::atomic_file::write_replacing(path, &data).map_err(|e| NvdbError::Io {
        path: e.path,
        op: e.op,
        source: e.source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn fixture_path(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/nanovdb")
            .join(name)
    }

    #[test]
    fn string_hash_like_nanovdb() {
        assert_eq!(string_hash(""), 0);
        assert_eq!(string_hash("a"), 97);
        assert_eq!(string_hash("ab"), 97 * 67 + 98);
        // The name keys nanovdb_convert wrote into the fixtures.
        for name in [
            "sphere_ls.nvdb",
            "fog_zip.nvdb",
            "velocity_zip.nvdb",
            "unnamed.nvdb",
        ] {
            let g = read_nvdb(fixture_path(name)).unwrap();
            assert_eq!(g[0].meta.name_key, string_hash(&g[0].name), "{name}");
        }
    }

    #[test]
    fn write_read_roundtrip_every_codec() {
        let dir = tempfile::tempdir().unwrap();
        let sphere = read_nvdb(fixture_path("sphere_ls.nvdb")).unwrap().remove(0);
        let vel = read_nvdb(fixture_path("velocity_zip.nvdb"))
            .unwrap()
            .remove(0);
        let inputs: [&[u8]; 2] = [&sphere.bytes, &vel.bytes];
        for codec in [Codec::None, Codec::Zip, Codec::Blosc] {
            let path = dir.path().join(format!("out_{codec}.nvdb"));
            write_nvdb(&path, &inputs, codec).unwrap();
            let back = read_nvdb(&path).unwrap();
            assert_eq!(back.len(), 2);
            for (b, orig) in back.iter().zip([&sphere, &vel]) {
                assert_eq!(b.name, orig.name);
                assert!(b.bytes == orig.bytes, "{codec}: bytes differ");
                let mut meta = orig.meta.clone();
                meta.codec = codec;
                meta.file_size = b.meta.file_size;
                assert_eq!(b.meta, meta);
            }
        }
        // Only the three files: the temporary names are gone.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 3);
        // A grid with the new magic is written with the old one (both readers accept it).
        let mut new_magic = sphere.bytes.clone();
        new_magic[..8].copy_from_slice(&l::MAGIC_GRID_BYTES);
        let file = encode_nvdb(&[&new_magic], Codec::None).unwrap();
        let back = read_nvdb_bytes(&file).unwrap();
        assert!(back[0].bytes == sphere.bytes);
        // Invalid inputs are refused with their index; nothing is left behind.
        let path = dir.path().join("bad.nvdb");
        let e = write_nvdb(&path, &[&sphere.bytes, &sphere.bytes[..1000]], Codec::Zip).unwrap_err();
        assert!(e.to_string().contains("input grid 1"), "{e}");
        assert!(!path.exists());
        assert!(write_nvdb(&path, &[], Codec::Zip).is_err());
    }

    /// A buffer of two grids under one metadata record (as fVDB saves a batch) reads as its
    /// two grids; one whose grids do not fill the recorded size is refused, saying so.
    #[test]
    fn batches_under_one_record_are_split() {
        let sphere = read_nvdb(fixture_path("sphere_ls.nvdb")).unwrap().remove(0);
        let vel = read_nvdb(fixture_path("velocity_zip.nvdb"))
            .unwrap()
            .remove(0);
        let mut batch = Vec::new();
        for (i, g) in [&sphere, &vel].into_iter().enumerate() {
            let mut b = g.bytes.clone();
            b[l::GRID_OFF_GRID_INDEX as usize..][..4].copy_from_slice(&(i as u32).to_le_bytes());
            b[l::GRID_OFF_GRID_COUNT as usize..][..4].copy_from_slice(&2u32.to_le_bytes());
            batch.push(b);
        }
        let file_with = |payload: &[u8]| {
            let one = encode_nvdb(&[&sphere.bytes], Codec::None).unwrap();
            let mut f = one[..one.len() - sphere.bytes.len()].to_vec();
            let size = (payload.len() as u64).to_le_bytes();
            f[FILE_HEADER_SIZE..][..8].copy_from_slice(&size); // gridSize
            f[FILE_HEADER_SIZE + 8..][..8].copy_from_slice(&size); // fileSize
            f.extend_from_slice(payload);
            f
        };
        let grids = read_nvdb_bytes(&file_with(&batch.concat())).unwrap();
        assert_eq!(grids.len(), 2);
        for (g, b) in grids.iter().zip(&batch) {
            assert!(g.bytes == *b);
            assert_eq!(g.name, g.grid().unwrap().name());
        }
        let mut padded = batch.concat();
        padded.extend_from_slice(&[0; 64]);
        let e = read_nvdb_bytes(&file_with(&padded))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("a buffer of 2 grids") && e.contains("add up to"),
            "{e}"
        );
    }

    /// Every prefix of a valid file, corrupt headers, sizes and payloads: errors naming the
    /// place, no panics, no large allocations.
    #[test]
    fn malformed_files() {
        for name in [
            "multi_segment.nvdb",
            "two_segments.nvdb",
            "sphere_fp8.nvdb",
            "sphere_ls_blosc.nvdb",
        ] {
            let good = std::fs::read(fixture_path(name)).unwrap();
            let n = good.len();
            let mut cuts: Vec<usize> = (0..64).map(|i| n * i / 64).collect();
            cuts.extend([1, 8, 15, 16, 17, 191, 192, 200, n - 1]);
            for cut in cuts.into_iter().filter(|&c| c < n) {
                assert!(
                    read_nvdb_bytes(&good[..cut]).is_err(),
                    "{name}: cut at {cut}"
                );
            }
            let patch = |off: usize, v: &[u8]| {
                let mut c = good.clone();
                c[off..off + v.len()].copy_from_slice(v);
                read_nvdb_bytes(&c).map(|_| ()).unwrap_err().to_string()
            };
            assert!(patch(0, b"NanoVDBX").contains("bad segment magic"));
            assert!(patch(8, &Version::new(31, 0, 0).0.to_le_bytes()).contains("version"));
            assert!(patch(12, &u16::MAX.to_le_bytes()).contains("claims 65535 grids"));
            assert!(patch(14, &9u16.to_le_bytes()).contains("unknown codec 9"));
            // Metadata of grid 0: grid size, file size, name size.
            for gs in [0u64, 100, 1 << 40, u64::MAX] {
                let e = patch(16, &gs.to_le_bytes());
                assert!(e.contains("grid 0"), "{name}: grid size {gs}: {e}");
            }
            assert!(patch(24, &u64::MAX.to_le_bytes()).contains("runs past the end"));
            assert!(patch(16 + 136, &u32::MAX.to_le_bytes()).contains("name size"));
            // Payload bytes: flips give errors or (for unchecked bytes) valid grids.
            let mut c = good.clone();
            for off in (16..n).step_by(n / 300 + 1) {
                c[off] ^= 0xa5;
                let _ = read_nvdb_bytes(&c);
                c[off] ^= 0xa5;
            }
        }
        // Errors name the file and the grid.
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = std::fs::read(fixture_path("velocity_zip.nvdb")).unwrap();
        let last = bytes.len() - 10;
        bytes[last] ^= 0xff; // inside the zlib stream (Adler-32 or deflate data)
        let path = dir.path().join("broken.nvdb");
        std::fs::write(&path, &bytes).unwrap();
        let e = read_nvdb(&path).unwrap_err().to_string();
        assert!(
            e.contains("broken.nvdb") && e.contains("grid 0") && e.contains("velocity"),
            "{e}"
        );
        let e = read_nvdb(dir.path().join("missing.nvdb"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.nvdb") && e.contains("read"), "{e}");
    }
}
