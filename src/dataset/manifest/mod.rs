//! `manifest.json`: what a dataset holds and where every byte of every frame lives.
//!
//! The manifest is untrusted input: [`Manifest::load`] checks the format version, every
//! count, index, alignment and bound, that each frame's extents tile its slot image, that
//! no two extents share lane-file bytes, and that every lane file exists with the recorded
//! size, before anything reads a lane file. After that, readers can use extents without
//! further checks.
//!
//! # Format (version 1)
//!
//! Pretty-printed at the top two levels, one line per lane, attribute and frame below
//! (a 6000-frame dataset with ~100 extents per frame stays a few tens of MB and greppable):
//!
//! ```json
//! {
//!   "format": "supercell-dataset",
//!   "version": 1,
//!   "created": {"generator": "supercell-data import", "args": ["..."], "tool_version": "0.1.0", "unix_time": 1796012656},
//!   "write_id": "w6b0cfa70182d74c5-3ad5-0",
//!   "chunk_size": 8388608,
//!   "lanes": [
//!     {"path":"lanes/0","files":[{"name":"w6b0cfa70182d74c5-3ad5-0-L000-S00000.sclane","size":16384}]},
//!     {"path":"/mnt/lanes/1","files":[{"name":"w6b0cfa70182d74c5-3ad5-0-L001-S00000.sclane","size":16384}]}
//!   ],
//!   "attributes": [
//!     {"name":"density","grid_type":"float","grid_class":"fog_volume","value_range":[0.0,1.2],
//!      "index_bbox":[[-64,0,-8],[23,23,-1]],"world_bbox":[[-32.0,0.0,-4.0],[12.0,12.0,0.0]],"voxel_size":[0.5,0.5,0.5],"units":"kg/m^3"}
//!   ],
//!   "frame_count": 1,
//!   "frames": [
//!     {"time":0.0,"slot_size":20480,
//!      "grids":[{"attribute":0,"offset":0,"size":19872,"checksum":"8c1e33a5d2f04b17"}],
//!      "extents":[[0,0,0,8192,0,1286701566],[1,0,0,8192,8192,4181942019],[0,0,8192,4096,16384,780415267]]}
//!   ]
//! }
//! ```
//!
//! `created.args` are the writer's arguments, each as given where it is UTF-8; one that is
//! not (a path with byte 0xff) is recorded as `os-bytes:` and its bytes, `%XX` for every
//! byte that is not printable ASCII or is `%` ([`ARG_BYTES_MARKER`], [`Provenance::arg_os`]
//! reads it back), so the record is lossless.
//!
//! # Bricks (optional)
//!
//! A dataset written with `--bricks N` (sort-last rendering across ranks) lists its spatial
//! bricks after the attributes, and each grid entry names its brick:
//!
//! ```json
//!   "bricks": [
//!     {"index_box":[[0,0,0],[24,64,32]],"world_box":[[0.0,0.0,0.0],[12000.0,32000.0,16000.0]]},
//!     {"index_box":[[24,0,0],[64,64,32]],"world_box":[[12000.0,0.0,0.0],[32000.0,32000.0,16000.0]]}
//!   ],
//!   ...
//!      "grids":[{"attribute":0,"offset":0,"size":19872,"checksum":"8c1e33a5d2f04b17","brick":0}, ...]
//! ```
//!
//! `index_box` is `[min, max]`, min inclusive and max exclusive, on leaf (8-voxel)
//! boundaries; the boxes are disjoint, tile their bounding box (the domain), and map onto
//! their world boxes by one transform. Each frame then holds one grid per (brick,
//! attribute), brick by brick and each brick's in attribute order (grid `i` is attribute
//! `i % A` of brick `i / A`), so one brick's grids are one contiguous range of the slot
//! image, and an extent starts where each brick's range starts (no extent holds bytes of
//! two bricks). A brick's grid holds the whole grid's leaves inside its box grown by
//! [`BRICK_HALO`] voxels. Attribute statistics stay those of the whole domain. Both keys
//! are absent from a dataset of whole grids, which reads exactly as before. See
//! [`Brick`], [`super::bricks`] and [`Dataset::retain_brick`](super::Dataset::retain_brick).
//!
//! An extent is `[lane, file, offset, len, dst, crc32]`: `len` bytes at `offset` of file
//! `file` of lane `lane` go to `dst` in the slot image. Offsets, lengths and destinations
//! are multiples of 4 KiB, lengths at most `chunk_size`, extents sorted by `dst`. Lane paths
//! are relative to the manifest's directory, or absolute. File `f` of lane `l` must be named
//! `<write_id>-L<l>-S<f>.sclane` (`l` at least three digits, `f` at least five), so a
//! manifest can only ever point a reader at lane files. Checksums are hex strings because
//! JSON tools round integers above 2^53.

use std::fs;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{DatasetError, IoContext, Result};
use super::naming;
use super::{ALIGN, FORMAT_NAME, FORMAT_VERSION, MANIFEST_FILE};
use crate::format::{Coord, GridClass, GridType};

mod validate;

/// The whole manifest. Field order is the JSON order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Always [`FORMAT_NAME`] (`"supercell-dataset"`).
    pub format: String,
    /// Format version; this crate reads [`FORMAT_VERSION`].
    pub version: u32,
    /// Who wrote the dataset, how, and when.
    pub created: Provenance,
    /// Unique id of the write that produced this manifest; every lane file name starts
    /// with it.
    pub write_id: String,
    /// Stripe chunk size in bytes (a multiple of 4 KiB). No extent is longer.
    pub chunk_size: u64,
    /// The lanes, in lane-index order.
    pub lanes: Vec<Lane>,
    /// The attributes, in attribute-index order (grid order within a frame, and within
    /// each brick of a bricked frame).
    pub attributes: Vec<Attribute>,
    /// Spatial bricks, where the writer split every grid into them (`--bricks N`): each
    /// frame then holds one grid per (brick, attribute), brick-major, so one brick's grids
    /// are one contiguous range of the slot image. Empty (and absent from the JSON) for a
    /// dataset of whole grids.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bricks: Vec<Brick>,
    /// Number of frames (must equal `frames.len()`; stored for readers that skim).
    pub frame_count: usize,
    /// The frames, in time order.
    pub frames: Vec<Frame>,
    /// Where this manifest was loaded from or written to; lane paths are relative to its
    /// directory.
    #[serde(skip)]
    pub(crate) path: PathBuf,
    /// The brick [`Dataset::retain_brick`](super::Dataset::retain_brick) kept: every frame
    /// then holds only that brick's grids, one per attribute. `None` for a manifest as
    /// loaded.
    #[serde(skip)]
    pub(crate) retained_brick: Option<u32>,
}

/// One spatial brick of a bricked dataset: the box of the domain it owns.
///
/// Its grids hold the voxels of `index_box` plus a halo of whole neighbouring 8³ leaves
/// ([`BRICK_HALO`] voxels on every side, where the domain has voxels there), so that a
/// renderer drawing only this box samples exactly what it would from the whole grid
/// (trilinear interpolation and central-difference gradients reach at most 2 voxels out).
///
/// JSON: `{"index_box":[[0,0,0],[64,128,40]],"world_box":[[0.0,0.0,0.0],[32.0,64.0,20.0]]}`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Brick {
    /// Index box the brick owns: `[min, max]` with `min` **inclusive** and `max`
    /// **exclusive** on every axis, both multiples of 8 (leaf boundaries), in the index
    /// space of the model grid (the coarsest attributes'). The bricks' boxes are disjoint
    /// and their union is the domain. An attribute on a grid `r` times finer with the same
    /// origin (the generator's nested `funnel_cloud`, `r` = 4) holds the box scaled by `r`
    /// in its own index space; `world_box` is the same for every attribute.
    pub index_box: [Coord; 2],
    /// The same box in world units: the faces at index coordinates `min` and `max` mapped
    /// by the grids' transform (so neighbouring bricks share a face).
    pub world_box: [[f64; 3]; 2],
}

/// Voxels of halo around each brick's owned box in its grids: one whole 8³ leaf.
pub const BRICK_HALO: i32 = 8;

/// Creation information.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The program (and subcommand) that wrote the dataset, e.g. `"supercell-data import"`.
    pub generator: String,
    /// Its arguments, so the dataset can be regenerated.
    #[serde(default)]
    pub args: Vec<String>,
    /// supercell version that wrote the manifest (filled in by the writer).
    #[serde(default)]
    pub tool_version: String,
    /// Seconds since the Unix epoch when the write finished (filled in by the writer).
    #[serde(default)]
    pub unix_time: u64,
}

/// Marks a provenance argument recorded as bytes: an argument that is not UTF-8 (a path
/// with byte 0xff, say) is written `os-bytes:` followed by its bytes, printable ASCII other
/// than `%` as itself and every other byte as `%XX` (two upper-case hex digits); an
/// argument that is UTF-8 but starts with the marker is written the same way, so every
/// recorded argument reads back as exactly the bytes given ([`Provenance::arg_os`]).
pub const ARG_BYTES_MARKER: &str = "os-bytes:";

impl Provenance {
    /// Provenance for `generator` run with the program's own arguments `args` (from
    /// `std::env::args_os`, after the program name): each recorded as
    /// [`Provenance::arg_text`] writes it, losslessly.
    pub fn from_os_args(
        generator: impl Into<String>,
        args: impl IntoIterator<Item = std::ffi::OsString>,
    ) -> Self {
        Provenance::new(generator, args.into_iter().map(|a| Self::arg_text(&a)))
    }

    /// One argument as the manifest records it: as written where it is UTF-8 (and does not
    /// start with [`ARG_BYTES_MARKER`]), else the marker and its bytes escaped.
    pub fn arg_text(arg: &std::ffi::OsStr) -> String {
        use std::os::unix::ffi::OsStrExt;
        match arg.to_str() {
            Some(s) if !s.starts_with(ARG_BYTES_MARKER) => s.to_string(),
            _ => {
                let mut out = String::from(ARG_BYTES_MARKER);
                for &b in arg.as_bytes() {
                    if (b.is_ascii_graphic() && b != b'%') || b == b' ' {
                        out.push(char::from(b));
                    } else {
                        out.push_str(&format!("%{b:02X}"));
                    }
                }
                out
            }
        }
    }

    /// The argument `text` records ([`Provenance::arg_text`] read back); None where it
    /// carries the marker but a malformed escape.
    pub fn arg_os(text: &str) -> Option<std::ffi::OsString> {
        use std::os::unix::ffi::OsStringExt;
        let Some(escaped) = text.strip_prefix(ARG_BYTES_MARKER) else {
            return Some(text.into());
        };
        let mut bytes = Vec::with_capacity(escaped.len());
        let mut rest = escaped.as_bytes();
        while let Some((&b, tail)) = rest.split_first() {
            if b == b'%' {
                let hex = std::str::from_utf8(tail.get(..2)?).ok()?;
                bytes.push(u8::from_str_radix(hex, 16).ok()?);
                rest = &tail[2..];
            } else {
                bytes.push(b);
                rest = tail;
            }
        }
        Some(std::ffi::OsString::from_vec(bytes))
    }

    /// Provenance for `generator` run with `args`.
    pub fn new(
        generator: impl Into<String>,
        args: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Provenance {
            generator: generator.into(),
            args: args.into_iter().map(Into::into).collect(),
            tool_version: String::new(),
            unix_time: 0,
        }
    }
}

/// One lane: a directory (normally its own drive or NVMe-oF namespace) and its data files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lane {
    /// Lane directory: relative to the manifest's directory, or absolute.
    pub path: String,
    /// Data file segments, in file-index order.
    pub files: Vec<LaneFile>,
}

/// One data file of a lane.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LaneFile {
    /// File name inside the lane directory (no directory components).
    pub name: String,
    /// Exact size in bytes (a multiple of 4 KiB).
    pub size: u64,
}

/// An attribute: one grid per frame, with statistics over all frames.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Attribute {
    /// Grid name (unique within the dataset).
    pub name: String,
    /// Value type of every grid of this attribute ([`GridType::Unknown`] for payloads
    /// written with `push_frame_opaque`, which are not NanoVDB-checked).
    pub grid_type: GridType,
    /// Grid class of every grid of this attribute.
    pub grid_class: GridClass,
    /// Smallest and largest value over all frames, when the grids record them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value_range: Option<[f64; 2]>,
    /// Union of the grids' index bounding boxes (inclusive min and max corners).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub index_bbox: Option<[Coord; 2]>,
    /// Union of the grids' world bounding boxes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub world_bbox: Option<[[f64; 3]; 2]>,
    /// Voxel size in world units (the same in every frame).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voxel_size: Option<[f64; 3]>,
    /// The physical unit of the values as the source wrote it (a netCDF variable's CF
    /// `units` such as `kg/kg` or `dBZ`, an OpenVDB grid's `units` metadata), for legends
    /// and `info`; absent where the source gave none. Checked by [`check_units`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub units: Option<String>,
}

/// Longest unit string a manifest may hold, in bytes: a legend's label, not a text.
pub const MAX_UNITS_BYTES: usize = 64;

/// Checks a unit string for the manifest: non-empty, at most [`MAX_UNITS_BYTES`] bytes,
/// no control characters (a unit is printed on terminals and drawn into images). The
/// error says what is wrong, without the caller's context.
pub fn check_units(units: &str) -> std::result::Result<(), String> {
    if units.trim().is_empty() {
        return Err("is empty (leave it out where there is no unit)".into());
    }
    if units.len() > MAX_UNITS_BYTES {
        return Err(format!(
            "is {} bytes long (at most {MAX_UNITS_BYTES})",
            units.len()
        ));
    }
    if let Some(c) = units.chars().find(|c| c.is_control()) {
        return Err(format!("{units:?} contains the control character {c:?}"));
    }
    Ok(())
}

/// One frame: one grid per attribute, laid out in a slot image striped over the lanes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Frame {
    /// Simulation time of the frame (finite; strictly increasing over frames).
    pub time: f64,
    /// Size of the slot image in bytes (a multiple of 4 KiB).
    pub slot_size: u64,
    /// Where each attribute's grid sits in the slot image.
    pub grids: Vec<GridEntry>,
    /// Where each piece of the slot image is stored, sorted by `dst`; together they cover
    /// `0..slot_size` exactly.
    pub extents: Vec<Extent>,
}

/// One grid of a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GridEntry {
    /// Attribute index.
    pub attribute: u32,
    /// Byte offset of the grid in the slot image (a multiple of 4 KiB).
    pub offset: u64,
    /// Grid size in bytes (NanoVDB's `gridSize`), without padding.
    pub size: u64,
    /// The NanoVDB checksum stored in the grid header, as a 64-bit value (JSON: a hex
    /// string, since JSON tools mangle integers above 2^53). Zero for opaque payloads.
    #[serde(with = "hex_u64")]
    pub checksum: u64,
    /// Brick index (into [`Manifest::bricks`]) of a bricked dataset's grid; absent for a
    /// dataset of whole grids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brick: Option<u32>,
}

/// A contiguous run of a frame's slot image stored in one lane file.
///
/// JSON: `[lane, file, offset, len, dst, crc32]`, compact because a large dataset holds
/// hundreds of thousands of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "[u64; 6]", into = "[u64; 6]")]
pub struct Extent {
    /// Lane index.
    pub lane: u32,
    /// File index within the lane.
    pub file: u32,
    /// Byte offset in the lane file (a multiple of 4 KiB).
    pub offset: u64,
    /// Length in bytes (a multiple of 4 KiB, at most the chunk size).
    pub len: u64,
    /// Destination byte offset in the slot image (a multiple of 4 KiB).
    pub dst: u64,
    /// CRC32 (IEEE, as `crc32fast`) of the `len` bytes.
    pub crc32: u32,
}

impl From<Extent> for [u64; 6] {
    fn from(e: Extent) -> Self {
        [
            e.lane.into(),
            e.file.into(),
            e.offset,
            e.len,
            e.dst,
            e.crc32.into(),
        ]
    }
}

impl TryFrom<[u64; 6]> for Extent {
    type Error = String;
    fn try_from(a: [u64; 6]) -> Result<Self, String> {
        let small = |v: u64, what: &str| {
            u32::try_from(v).map_err(|_| format!("extent {what} {v} does not fit in 32 bits"))
        };
        Ok(Extent {
            lane: small(a[0], "lane")?,
            file: small(a[1], "file")?,
            offset: a[2],
            len: a[3],
            dst: a[4],
            crc32: small(a[5], "crc32")?,
        })
    }
}

mod hex_u64 {
    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:016x}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        let s = String::deserialize(d)?;
        if s.is_empty() || s.len() > 16 {
            return Err(D::Error::custom(format!(
                "checksum {s:?} is not 1 to 16 hex digits"
            )));
        }
        u64::from_str_radix(&s, 16)
            .map_err(|_| D::Error::custom(format!("checksum {s:?} is not hexadecimal")))
    }
}

/// Just the fields that decide whether the rest can be read, so that a newer version
/// gets "unsupported version" rather than a structural error about a changed field.
#[derive(Deserialize)]
struct Header {
    format: Option<String>,
    version: Option<u64>,
}

impl Manifest {
    /// Reads, parses and fully validates a manifest, including that every lane file exists
    /// with the recorded size. `path` is the manifest file itself.
    pub fn load(path: impl AsRef<Path>) -> Result<Manifest> {
        let m = Manifest::load_unchecked_files(path)?;
        m.check_files()?;
        Ok(m)
    }

    /// Like [`Manifest::load`] but without touching the lane files (used when replacing a
    /// dataset whose files may be gone, and by tests of the pure checks).
    pub(crate) fn load_unchecked_files(path: impl AsRef<Path>) -> Result<Manifest> {
        let path = path.as_ref();
        let text = fs::read(path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                DatasetError::manifest(
                    path,
                    "not found (no dataset here, or its write never finished)",
                )
            } else {
                DatasetError::io("cannot read", path, e)
            }
        })?;
        Manifest::from_json(&text, path)
    }

    /// Parses and validates manifest text; `path` is where it came from (for messages and
    /// to resolve relative lane paths). Does not touch the lane files.
    pub fn from_json(text: &[u8], path: &Path) -> Result<Manifest> {
        let bad = |msg: String| DatasetError::manifest(path, msg);
        check_header(text).map_err(bad)?;
        let mut m: Manifest =
            serde_json::from_slice(text).map_err(|e| bad(format!("malformed: {e}")))?;
        m.path = path.to_path_buf();
        m.validate().map_err(bad)?;
        Ok(m)
    }

    /// The manifest file this was loaded from or written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of frames.
    pub fn frame_count(&self) -> usize {
        self.frames.len()
    }

    /// Directory of lane `lane`, resolved against the manifest's directory.
    ///
    /// # Panics
    /// Panics if `lane` is out of range.
    pub fn lane_dir(&self, lane: u32) -> PathBuf {
        let p = Path::new(&self.lanes[lane as usize].path);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.base_dir().join(p)
        }
    }

    /// Path of file `file` of lane `lane`.
    ///
    /// # Panics
    /// Panics if either index is out of range (a loaded manifest's extents never are).
    pub fn lane_file_path(&self, lane: u32, file: u32) -> PathBuf {
        self.lane_dir(lane)
            .join(&self.lanes[lane as usize].files[file as usize].name)
    }

    /// Index of the attribute called `name`.
    pub fn attribute_index(&self, name: &str) -> Option<usize> {
        self.attributes.iter().position(|a| a.name == name)
    }

    /// Total bytes of all slot images.
    pub fn total_bytes(&self) -> u64 {
        self.frames.iter().map(|f| f.slot_size).sum()
    }

    /// The spatial bricks (empty for a dataset of whole grids).
    pub fn bricks(&self) -> &[Brick] {
        &self.bricks
    }

    /// The brick whose grids alone this manifest's frames hold, after
    /// [`Dataset::retain_brick`](super::Dataset::retain_brick).
    pub fn retained_brick(&self) -> Option<u32> {
        self.retained_brick
    }

    /// Whether each frame holds exactly one grid per attribute, as code that binds one grid
    /// per attribute (play, render without sort-last, the CPU renderer, `info`'s checks)
    /// needs; a bricked dataset does only after
    /// [`Dataset::retain_brick`](super::Dataset::retain_brick). Errors with
    /// [`DatasetError::Bricked`], which names the manifest and says how to play it.
    pub fn check_whole_grids(&self) -> Result<()> {
        if self.bricks.is_empty() || self.retained_brick.is_some() {
            return Ok(());
        }
        Err(DatasetError::Bricked {
            path: self.path.clone(),
            bricks: self.bricks.len(),
        })
    }

    pub(crate) fn base_dir(&self) -> &Path {
        match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        }
    }

    /// Every lane file path, for deleting a replaced dataset's files.
    pub(crate) fn all_file_paths(&self) -> Vec<PathBuf> {
        let mut v = Vec::new();
        for (l, lane) in self.lanes.iter().enumerate() {
            for f in 0..lane.files.len() {
                v.push(self.lane_file_path(l as u32, f as u32));
            }
        }
        v
    }

    /// Checks that every lane file exists, is a regular file (not a symbolic link), and has
    /// the recorded size.
    ///
    /// The actual size of a wrong-sized file is only reported for lane directories inside
    /// the dataset directory: a manifest that names directories elsewhere must not turn
    /// the error into a way of learning the sizes of files there.
    pub fn check_files(&self) -> Result<()> {
        let base = self.base_dir().canonicalize().ok();
        for (l, lane) in self.lanes.iter().enumerate() {
            let inside = base.as_ref().is_some_and(|b| {
                self.lane_dir(l as u32)
                    .canonicalize()
                    .is_ok_and(|d| d.starts_with(b))
            });
            for (f, file) in lane.files.iter().enumerate() {
                let p = self.lane_file_path(l as u32, f as u32);
                let bad = |msg: String| {
                    Err(DatasetError::manifest(
                        &self.path,
                        format!("lane {l} file {f} ({}) {msg}", p.display()),
                    ))
                };
                // Not following a link: a lane file is data the writer created in place.
                let md = match fs::symlink_metadata(&p) {
                    Ok(md) => md,
                    Err(e) => return bad(format!("cannot be read: {e}")),
                };
                if md.file_type().is_symlink() {
                    return bad("is a symbolic link; lane files must be regular files".into());
                }
                if !md.is_file() {
                    return bad("is not a regular file".into());
                }
                if md.len() != file.size {
                    return if inside {
                        bad(format!(
                            "is {} bytes, manifest says {}",
                            md.len(),
                            file.size
                        ))
                    } else {
                        bad(format!(
                            "does not have the {} bytes the manifest says",
                            file.size
                        ))
                    };
                }
            }
        }
        Ok(())
    }

    /// Checks everything that can be checked without the lane files. Returns a message
    /// naming the frame and field on failure (the checks: [`validate`]).
    pub(crate) fn validate(&self) -> Result<(), String> {
        validate::manifest(self)
    }

    /// The manifest as JSON text: pretty at the top two levels, one line per frame, lane
    /// and attribute below that, so the file stays readable and compact.
    pub fn to_json(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 * 1024 + self.frames.len() * 256);
        let mut ser = serde_json::Serializer::with_formatter(&mut out, ShallowPretty::default());
        self.serialize(&mut ser)
            .expect("manifest values are all representable in JSON");
        out.push(b'\n');
        out
    }

    /// Writes the manifest into `dir` atomically: `manifest.json.tmp`, fsync, rename to
    /// `manifest.json`, fsync the directory. Sets `self.path`.
    pub(crate) fn write_atomic(&mut self, dir: &Path) -> Result<()> {
        let tmp = dir.join(format!("{MANIFEST_FILE}.tmp"));
        let dst = dir.join(MANIFEST_FILE);
        self.path = dst.clone();
        let text = self.to_json();
        // A stale temp from an interrupted write is ours to replace.
        match fs::remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(DatasetError::io("cannot remove stale", &tmp, e)),
        }
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&tmp)
            .ctx("cannot create", &tmp)?;
        f.write_all(&text).ctx("cannot write", &tmp)?;
        f.sync_all().ctx("cannot fsync", &tmp)?;
        drop(f);
        fs::rename(&tmp, &dst).ctx("cannot rename into place", &dst)?;
        sync_dir(dir)
    }
}

/// Checks that `text` is JSON with this build's `format` and `version`: whether it is a
/// supercell manifest this build can read at all, before its structure is looked at (a
/// newer version gets "unsupported version" rather than a structural error).
pub(crate) fn check_header(text: &[u8]) -> Result<(), String> {
    let header: Header = serde_json::from_slice(text).map_err(|e| {
        if e.is_data() {
            format!("not a manifest object ({e})")
        } else {
            format!("not valid JSON: {e}")
        }
    })?;
    match header.format.as_deref() {
        Some(FORMAT_NAME) => {}
        Some(other) => {
            return Err(format!("format is {other:?}, expected {FORMAT_NAME:?}"));
        }
        None => {
            return Err(format!("no \"format\" field (expected {FORMAT_NAME:?})"));
        }
    }
    match header.version {
        Some(v) if v == u64::from(FORMAT_VERSION) => {}
        Some(v) => {
            return Err(format!(
                "version {v} is not supported (this build reads version {FORMAT_VERSION})"
            ));
        }
        None => return Err("no \"version\" field".into()),
    }
    Ok(())
}

/// fsyncs a directory so that renames and creations inside it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("cannot fsync directory", dir)
}

/// serde_json formatter: pretty-printed down to depth 2, compact below.
#[derive(Default)]
struct ShallowPretty {
    depth: usize,
    has_value: bool,
}

const PRETTY_DEPTH: usize = 2;

impl ShallowPretty {
    fn indent<W: ?Sized + io::Write>(w: &mut W, n: usize) -> io::Result<()> {
        for _ in 0..n {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
    fn begin<W: ?Sized + io::Write>(&mut self, w: &mut W, open: &[u8]) -> io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(open)
    }
    fn end<W: ?Sized + io::Write>(&mut self, w: &mut W, close: &[u8]) -> io::Result<()> {
        let level = self.depth;
        self.depth -= 1;
        if level <= PRETTY_DEPTH && self.has_value {
            w.write_all(b"\n")?;
            Self::indent(w, self.depth)?;
        }
        w.write_all(close)
    }
    fn item<W: ?Sized + io::Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        if self.depth <= PRETTY_DEPTH {
            w.write_all(if first { b"\n" } else { b",\n" })?;
            Self::indent(w, self.depth)
        } else if !first {
            w.write_all(b",")
        } else {
            Ok(())
        }
    }
}

impl serde_json::ser::Formatter for ShallowPretty {
    fn begin_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.begin(w, b"[")
    }
    fn end_array<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.end(w, b"]")
    }
    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(w, first)
    }
    fn end_array_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
    fn begin_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.begin(w, b"{")
    }
    fn end_object<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.end(w, b"}")
    }
    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.item(w, first)
    }
    fn begin_object_value<W: ?Sized + io::Write>(&mut self, w: &mut W) -> io::Result<()> {
        w.write_all(if self.depth <= PRETTY_DEPTH {
            b": "
        } else {
            b":"
        })
    }
    fn end_object_value<W: ?Sized + io::Write>(&mut self, _w: &mut W) -> io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn provenance_arguments_read_back_as_the_bytes_given() {
        let args: [&[u8]; 6] = [
            b"--out",
            b"/tmp/storm\xff/x",
            b"100%\xfe",
            b"os-bytes:plain",
            b"caf\xc3\xa9 ok",
            b"",
        ];
        for a in args {
            let text = Provenance::arg_text(OsStr::from_bytes(a));
            assert_eq!(Provenance::arg_os(&text).unwrap().as_bytes(), a, "{text}");
        }
        assert_eq!(Provenance::arg_text(OsStr::new("--out")), "--out");
        assert_eq!(Provenance::arg_text(OsStr::new("café")), "café");
        assert_eq!(
            Provenance::arg_text(OsStr::from_bytes(b"/tmp/storm\xff")),
            "os-bytes:/tmp/storm%FF"
        );
        assert_eq!(Provenance::arg_os("os-bytes:%F"), None);
        assert_eq!(Provenance::arg_os("os-bytes:%G0"), None);
    }
}
