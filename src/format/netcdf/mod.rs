//! netCDF headers checked before netCDF-C reads them: the classic formats (CDF-1 "classic",
//! CDF-2 "64-bit offset", CDF-5 "64-bit data") in full, and the end-of-file address of an
//! HDF5 (netCDF-4) superblock.
//!
//! netCDF-C trusts the header of a classic file: a record count, dimension count or variable
//! count out of range makes it allocate or loop on what the header claims, an unknown type
//! divides by a zero type size, and a file cut short reads as fill values. This module parses
//! the header from the format specification (Unidata's "NetCDF File Format Specifications",
//! with PnetCDF's CDF-5 extension) and checks every count, size and offset against the
//! file's length, so that a file that passes can be handed to netCDF-C.
//!
//! ```text
//! header    = magic numrecs dim_list gatt_list var_list     (all big-endian)
//! magic     = 'C' 'D' 'F' (1 | 2 | 5)
//! numrecs   = SIZE | STREAMING (all bits set)
//! list      = ABSENT (tag 0, count 0) | tag count [element ...]
//!             (tags 0x0A dimensions, 0x0B variables, 0x0C attributes; tag: 4 bytes)
//! dim       = name SIZE (0: the record dimension)
//! attr      = name nc_type(4 bytes) SIZE values (padded to 4 bytes)
//! var       = name SIZE [dimid: SIZE ...] attr_list nc_type vsize(SIZE) begin(OFFSET)
//! name      = SIZE bytes (padded to 4 bytes)
//! SIZE      = 4 bytes (CDF-1, CDF-2) or 8 (CDF-5); OFFSET = 4 bytes (CDF-1) or 8
//! ```
//!
//! Data: non-record variables at `begin`, `product(dims) × type size` bytes each (padded to
//! 4 in `vsize`); record variables at `begin + r × recsize` for record `r < numrecs`, where
//! `recsize` is the sum of the record variables' padded per-record sizes (the unpadded size
//! where there is only one record variable).
//!
//! Everything is bounded before it is stored: a count must fit, at its elements' smallest
//! size, in the bytes left in the file; a name or attribute value in the bytes left; every
//! product is checked for overflow. The parser works on the header's bytes and the file's
//! length; it reads no file itself (the caller reads the start of the file and, where
//! [`NetcdfHeaderError::NeedMore`] says so, more of it).

use thiserror::Error;

/// The largest header this parser accepts: netCDF writers' headers are kilobytes (names and
/// attributes); 256 MiB allows a very large file's metadata while bounding what a crafted
/// length field makes the caller read.
pub const MAX_HEADER_BYTES: u64 = 256 << 20;

/// `numrecs` of a file still being written (PnetCDF's and the specification's STREAMING).
const STREAMING: u64 = u64::MAX;
const TAG_DIMENSION: u32 = 0x0A;
const TAG_VARIABLE: u32 = 0x0B;
const TAG_ATTRIBUTE: u32 = 0x0C;

/// Which classic format a file has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClassicVersion {
    /// CDF-1: 32-bit offsets and sizes.
    Classic,
    /// CDF-2: 64-bit offsets, 32-bit sizes.
    Offset64,
    /// CDF-5: 64-bit offsets and sizes, unsigned and 64-bit integer types.
    Data64,
}

impl ClassicVersion {
    /// Bytes of a count or size field.
    fn size_bytes(self) -> u64 {
        match self {
            ClassicVersion::Data64 => 8,
            _ => 4,
        }
    }

    /// Bytes of a `begin` offset field.
    fn offset_bytes(self) -> u64 {
        match self {
            ClassicVersion::Classic => 4,
            _ => 8,
        }
    }

    /// The format's name as netCDF's documentation gives it.
    pub fn name(self) -> &'static str {
        match self {
            ClassicVersion::Classic => "CDF-1 (classic)",
            ClassicVersion::Offset64 => "CDF-2 (64-bit offset)",
            ClassicVersion::Data64 => "CDF-5 (64-bit data)",
        }
    }
}

/// A dimension of a classic file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcDimension {
    /// Its name.
    pub name: String,
    /// Its length; 0 for the record (unlimited) dimension.
    pub len: u64,
}

/// A variable of a classic file, with where its data lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcVariable {
    /// Its name.
    pub name: String,
    /// Indices into [`ClassicHeader::dimensions`].
    pub dimids: Vec<u64>,
    /// The netCDF type code (1 byte … 6 double; 7 ubyte … 11 uint64 in CDF-5).
    pub nc_type: u32,
    /// The `vsize` field as stored.
    pub vsize: u64,
    /// Byte offset of its data (of its first record, for a record variable).
    pub begin: u64,
    /// Whether its first dimension is the record dimension.
    pub is_record: bool,
    /// Bytes of its data (per record for a record variable), unpadded.
    pub data_len: u64,
}

/// A classic header that passed every check: its counts fit the file, its types are known,
/// and every variable's data lies within the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassicHeader {
    /// The format.
    pub version: ClassicVersion,
    /// Records in the file.
    pub numrecs: u64,
    /// Dimensions in file order.
    pub dimensions: Vec<NcDimension>,
    /// Global attributes.
    pub global_attributes: u64,
    /// Variables in file order.
    pub variables: Vec<NcVariable>,
    /// Bytes of the header.
    pub header_len: u64,
    /// Bytes from one record to the next.
    pub recsize: u64,
}

/// Why a classic header is refused (or needs more of the file).
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum NetcdfHeaderError {
    /// The header goes on past the bytes handed in (the file is longer): read the first
    /// `need` bytes (or all of the file, if shorter) and parse again.
    #[error("the header goes on past its first {have} bytes")]
    NeedMore {
        /// Bytes handed in.
        have: u64,
        /// Bytes to read next.
        need: u64,
    },
    /// Something in the header is impossible.
    #[error("header byte {at}: {detail}")]
    Invalid {
        /// Where the field starts.
        at: u64,
        /// What is wrong.
        detail: String,
    },
    /// A variable's data ends after the end of the file.
    #[error(
        "variable {variable}: {what} needs bytes {start}..{end}, but the file ends at byte \
         {file_len}: bytes {file_len}..{end} are missing (the file is truncated)"
    )]
    Short {
        /// The variable.
        variable: String,
        /// Which part: "its data" or "record 3 of 10".
        what: String,
        /// First byte of that part.
        start: u64,
        /// One past its last byte.
        end: u64,
        /// The file's length.
        file_len: u64,
    },
}

/// Bytes of one value of netCDF type `t` in `version`, or None for a type the format does
/// not have.
pub fn type_size(version: ClassicVersion, t: u32) -> Option<u64> {
    let size = match t {
        1 | 2 => 1,   // byte, char
        3 => 2,       // short
        4 | 5 => 4,   // int, float
        6 => 8,       // double
        7 => 1,       // ubyte
        8 => 2,       // ushort
        9 => 4,       // uint
        10 | 11 => 8, // int64, uint64
        _ => return None,
    };
    (t <= 6 || version == ClassicVersion::Data64).then_some(size)
}

/// `n` rounded up to a multiple of 4, or None on overflow.
fn padded(n: u64) -> Option<u64> {
    n.checked_add(3).map(|m| m & !3)
}

/// A big-endian reader over the header bytes, bounded by the file's length.
struct Cursor<'a> {
    bytes: &'a [u8],
    pos: u64,
    file_len: u64,
    version: ClassicVersion,
}

type Parsed<T> = Result<T, NetcdfHeaderError>;

impl<'a> Cursor<'a> {
    fn invalid(&self, at: u64, detail: impl Into<String>) -> NetcdfHeaderError {
        NetcdfHeaderError::Invalid {
            at,
            detail: detail.into(),
        }
    }

    /// Bytes of the file after the cursor.
    fn left_in_file(&self) -> u64 {
        self.file_len.saturating_sub(self.pos)
    }

    /// The next `n` bytes, which `what` needs.
    fn take(&mut self, n: u64, what: &str) -> Parsed<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.file_len);
        let Some(end) = end else {
            return Err(self.invalid(
                self.pos,
                format!(
                    "{what} needs {n} bytes but the file has {} left (the file is truncated, \
                     or the header corrupt)",
                    self.left_in_file()
                ),
            ));
        };
        if end > MAX_HEADER_BYTES {
            return Err(self.invalid(
                self.pos,
                format!("the header is longer than {MAX_HEADER_BYTES} bytes"),
            ));
        }
        let have = self.bytes.len() as u64;
        if end > have {
            // Twice as much as needed now, within the file.
            let need = end
                .saturating_mul(2)
                .min(self.file_len)
                .min(MAX_HEADER_BYTES);
            return Err(NetcdfHeaderError::NeedMore { have, need });
        }
        let s = &self.bytes[self.pos as usize..end as usize];
        self.pos = end;
        Ok(s)
    }

    fn uint(&mut self, n: u64, what: &str) -> Parsed<u64> {
        Ok(self
            .take(n, what)?
            .iter()
            .fold(0u64, |acc, &b| (acc << 8) | u64::from(b)))
    }

    fn u32(&mut self, what: &str) -> Parsed<u32> {
        Ok(self.uint(4, what)? as u32)
    }

    /// A count or size field (4 or 8 bytes by version); sizes are non-negative, so a 4-byte
    /// one above `i32::MAX` is refused.
    fn size(&mut self, what: &str) -> Parsed<u64> {
        let at = self.pos;
        let bytes = self.version.size_bytes();
        let v = self.uint(bytes, what)?;
        if (bytes == 4 && v > i32::MAX as u64) || (bytes == 8 && v > i64::MAX as u64) {
            return Err(self.invalid(at, format!("{what} {v} is negative as a signed integer")));
        }
        Ok(v)
    }

    /// A list count, each element at least `min_each` bytes: bounded by the file's length.
    fn count(&mut self, what: &str, min_each: u64) -> Parsed<u64> {
        let at = self.pos;
        let n = self.size(&format!("the {what} count"))?;
        if n.saturating_mul(min_each) > self.left_in_file() {
            return Err(self.invalid(
                at,
                format!(
                    "{n} {what} cannot fit in the {} bytes left in the file (the file is \
                     truncated, or the count corrupt)",
                    self.left_in_file()
                ),
            ));
        }
        Ok(n)
    }

    /// A name: its length, its bytes (UTF-8, not empty), padding to 4 bytes.
    fn name(&mut self, what: &str) -> Parsed<String> {
        let at = self.pos;
        let n = self.size(&format!("the length of {what}'s name"))?;
        if n == 0 {
            return Err(self.invalid(at, format!("{what} has an empty name")));
        }
        let padded_len = padded(n).unwrap_or(u64::MAX);
        let bytes = self.take(padded_len, &format!("{what}'s name of {n} bytes"))?;
        let text = std::str::from_utf8(&bytes[..n as usize])
            .map_err(|_| self.invalid(at, format!("{what}'s name is not UTF-8")))?;
        Ok(text.to_string())
    }

    /// A list's tag and count; `tag` is the tag of a present list.
    fn list(&mut self, tag: u32, what: &str, min_each: u64) -> Parsed<u64> {
        let at = self.pos;
        let found = self.u32(&format!("the {what} list tag"))?;
        let n = self.count(what, min_each)?;
        if found == 0 && n == 0 {
            return Ok(0);
        }
        if found != tag {
            return Err(self.invalid(
                at,
                format!("the {what} list has tag {found:#x}, not {tag:#x} (or 0 for none)"),
            ));
        }
        Ok(n)
    }

    /// A type code, known to the version.
    fn nc_type(&mut self, what: &str) -> Parsed<(u32, u64)> {
        let at = self.pos;
        let t = self.u32(&format!("{what}'s type"))?;
        match type_size(self.version, t) {
            Some(size) => Ok((t, size)),
            None => Err(self.invalid(
                at,
                format!(
                    "{what} has type {t}, not a type of {} (1..{})",
                    self.version.name(),
                    if self.version == ClassicVersion::Data64 {
                        11
                    } else {
                        6
                    }
                ),
            )),
        }
    }

    /// An attribute list, values skipped after checking they lie in the file; returns the
    /// number of attributes.
    fn attributes(&mut self, owner: &str) -> Parsed<u64> {
        let sb = self.version.size_bytes();
        let n = self.list(TAG_ATTRIBUTE, &format!("{owner} attribute"), 2 * sb + 4)?;
        for i in 0..n {
            let name = self.name(&format!("{owner} attribute {i}"))?;
            let what = format!("{owner} attribute {name}");
            let (_, size) = self.nc_type(&what)?;
            let at = self.pos;
            let count = self.size(&format!("the value count of {what}"))?;
            let bytes = count.checked_mul(size).and_then(padded).ok_or_else(|| {
                self.invalid(at, format!("{what}: {count} values overflow a 64-bit size"))
            })?;
            self.take(bytes, &format!("{what}'s {count} values"))?;
        }
        Ok(n)
    }
}

/// Parses and checks a classic header: `head` is the start of the file (or all of it),
/// `file_len` the file's length. Errors with [`NetcdfHeaderError::NeedMore`] where the
/// header goes on past `head`.
pub fn parse_classic_header(
    head: &[u8],
    file_len: u64,
) -> Result<ClassicHeader, NetcdfHeaderError> {
    let file_len = file_len.max(head.len() as u64);
    let version = match head {
        [b'C', b'D', b'F', 1, ..] => ClassicVersion::Classic,
        [b'C', b'D', b'F', 2, ..] => ClassicVersion::Offset64,
        [b'C', b'D', b'F', 5, ..] => ClassicVersion::Data64,
        _ if head.len() < 4 && (head.len() as u64) < file_len => {
            return Err(NetcdfHeaderError::NeedMore {
                have: head.len() as u64,
                need: file_len.min(4096),
            });
        }
        _ => {
            return Err(NetcdfHeaderError::Invalid {
                at: 0,
                detail: "not a classic netCDF file (no 'CDF' 1, 2 or 5 magic)".into(),
            });
        }
    };
    let mut c = Cursor {
        bytes: head,
        pos: 4,
        file_len,
        version,
    };
    let sb = version.size_bytes();
    let numrecs = c.uint(sb, "numrecs")?;
    if numrecs == STREAMING || (sb == 4 && numrecs == u64::from(u32::MAX)) {
        return Err(c.invalid(
            4,
            "numrecs is STREAMING (all bits set: a file still being written, its record \
             count unknown), which is not read",
        ));
    }
    if (sb == 4 && numrecs > i32::MAX as u64) || numrecs > i64::MAX as u64 {
        return Err(c.invalid(
            4,
            format!("numrecs {numrecs} is negative as a signed integer"),
        ));
    }
    let dimensions = dimensions(&mut c)?;
    let global_attributes = c.attributes("global")?;
    let mut variables = variables(&mut c, &dimensions)?;
    let header_len = c.pos;
    let recsize = check_data(&c, &mut variables, numrecs, header_len)?;
    Ok(ClassicHeader {
        version,
        numrecs,
        dimensions,
        global_attributes,
        variables,
        header_len,
        recsize,
    })
}

/// The dimension list; at most one record dimension.
fn dimensions(c: &mut Cursor<'_>) -> Parsed<Vec<NcDimension>> {
    let sb = c.version.size_bytes();
    let n = c.list(TAG_DIMENSION, "dimension", 2 * sb + 4)?;
    let mut dims: Vec<NcDimension> = Vec::new();
    for i in 0..n {
        let name = c.name(&format!("dimension {i}"))?;
        let at = c.pos;
        let len = c.size(&format!("the length of dimension {name}"))?;
        if len == 0
            && let Some(first) = dims.iter().find(|d| d.len == 0)
        {
            return Err(c.invalid(
                at,
                format!(
                    "dimensions {} and {name} are both record dimensions (length 0); a \
                     classic file has at most one",
                    first.name
                ),
            ));
        }
        dims.push(NcDimension { name, len });
    }
    Ok(dims)
}

/// The variable list: names, dimensions (known ones; the record dimension only first),
/// types, and the size of each one's data, which `vsize` must agree with.
fn variables(c: &mut Cursor<'_>, dims: &[NcDimension]) -> Parsed<Vec<NcVariable>> {
    let sb = c.version.size_bytes();
    // name length, rank, attribute tag and count, type, vsize, begin.
    let min_each = 3 * sb + 8 + 4 + c.version.offset_bytes();
    let n = c.list(TAG_VARIABLE, "variable", min_each)?;
    let mut vars = Vec::new();
    for i in 0..n {
        let name = c.name(&format!("variable {i}"))?;
        let what = format!("variable {name}");
        let rank = c.count(&format!("dimensions of {what}"), sb)?;
        let mut dimids = Vec::new();
        let mut elements = 1u64;
        let mut is_record = false;
        for d in 0..rank {
            let at = c.pos;
            let id = c.size(&format!("dimension {d} of {what}"))?;
            let Some(dim) = usize::try_from(id).ok().and_then(|i| dims.get(i)) else {
                return Err(c.invalid(
                    at,
                    format!(
                        "{what}: dimension id {id} is not one of the {} dimensions",
                        dims.len()
                    ),
                ));
            };
            if dim.len == 0 {
                if d != 0 {
                    return Err(c.invalid(
                        at,
                        format!(
                            "{what}: the record dimension {} is its dimension {d}, not its first",
                            dim.name
                        ),
                    ));
                }
                is_record = true;
            } else {
                elements = elements.checked_mul(dim.len).ok_or_else(|| {
                    c.invalid(
                        at,
                        format!("{what}: its dimensions' lengths overflow a 64-bit count"),
                    )
                })?;
            }
            dimids.push(id);
        }
        c.attributes(&what)?;
        let (nc_type, size) = c.nc_type(&what)?;
        let at = c.pos;
        let vsize = c.size(&format!("vsize of {what}"))?;
        let begin = c.uint(c.version.offset_bytes(), &format!("begin of {what}"))?;
        let data_len = elements
            .checked_mul(size)
            .filter(|&n| padded(n).is_some())
            .ok_or_else(|| {
                c.invalid(
                    at,
                    format!("{what}: {elements} values overflow a 64-bit size"),
                )
            })?;
        check_vsize(c, at, &what, vsize, data_len)?;
        vars.push(NcVariable {
            name,
            dimids,
            nc_type,
            vsize,
            begin,
            is_record,
            data_len,
        });
    }
    Ok(vars)
}

/// `vsize` must be the data's size padded to 4 bytes (or unpadded, as some writers store
/// it); CDF-1 and CDF-2 store `2^32 − 1` for a variable too large for their 32-bit field.
fn check_vsize(c: &Cursor<'_>, at: u64, what: &str, vsize: u64, data_len: u64) -> Parsed<()> {
    let full = padded(data_len).unwrap_or(u64::MAX);
    let too_large_for_field = c.version != ClassicVersion::Data64 && full > i32::MAX as u64;
    if vsize == full || vsize == data_len || too_large_for_field {
        return Ok(());
    }
    Err(c.invalid(
        at,
        format!("{what}: vsize is {vsize}, but its dimensions and type make {full} bytes"),
    ))
}

/// Every variable's data within the file; returns the record size.
fn check_data(
    c: &Cursor<'_>,
    vars: &mut [NcVariable],
    numrecs: u64,
    header_len: u64,
) -> Parsed<u64> {
    let file_len = c.file_len;
    let records: Vec<&NcVariable> = vars.iter().filter(|v| v.is_record).collect();
    let recsize = if records.len() == 1 {
        records[0].data_len
    } else {
        records.iter().try_fold(0u64, |sum, v| {
            padded(v.data_len)
                .and_then(|p| sum.checked_add(p))
                .ok_or_else(|| c.invalid(header_len, "the record size overflows 64 bits"))
        })?
    };
    for v in vars.iter() {
        if v.begin < header_len {
            return Err(c.invalid(
                header_len,
                format!(
                    "variable {}: its data begins at byte {}, inside the {header_len}-byte header",
                    v.name, v.begin
                ),
            ));
        }
        let (what, start, len) = match v.is_record {
            false => ("its data".to_string(), v.begin, v.data_len),
            true if numrecs == 0 => continue,
            true => {
                let last = numrecs - 1;
                let start = last
                    .checked_mul(recsize)
                    .and_then(|o| o.checked_add(v.begin))
                    .ok_or_else(|| {
                        c.invalid(
                            4,
                            format!(
                                "variable {}: {numrecs} records of {recsize} bytes overflow \
                                 a 64-bit offset",
                                v.name
                            ),
                        )
                    })?;
                (format!("record {last} of {numrecs}"), start, v.data_len)
            }
        };
        let end = start.checked_add(len).ok_or_else(|| {
            c.invalid(
                header_len,
                format!("variable {}: its data ends past 2^64", v.name),
            )
        })?;
        if len > 0 && end > file_len {
            return Err(NetcdfHeaderError::Short {
                variable: v.name.clone(),
                what,
                start,
                end,
                file_len,
            });
        }
    }
    Ok(recsize)
}

/// The file length an HDF5 file (netCDF-4) says it has, from its superblock at byte 0
/// (base address + end-of-file address), where `head` holds it; None where the superblock
/// is not at byte 0, has an unknown version, or leaves the address undefined.
pub fn hdf5_stored_eof(head: &[u8]) -> Option<u64> {
    const SIGNATURE: &[u8; 8] = b"\x89HDF\r\n\x1a\n";
    if head.get(..8)? != SIGNATURE {
        return None;
    }
    let version = *head.get(8)?;
    // Where the base address starts, and the size of an address.
    let (base_at, offset_size) = match version {
        0 => (24usize, *head.get(13)?),
        1 => (28, *head.get(13)?),
        2 | 3 => (12, *head.get(9)?),
        _ => return None,
    };
    let o = usize::from(offset_size);
    if !matches!(o, 2 | 4 | 8) {
        return None;
    }
    let read = |at: usize| -> Option<u64> {
        let b = head.get(at..at + o)?;
        let v = b
            .iter()
            .rev()
            .fold(0u64, |acc, &x| (acc << 8) | u64::from(x));
        // All bits set: HADDR_UNDEF.
        (v != u64::MAX >> (64 - 8 * o)).then_some(v)
    };
    let base = read(base_at)?;
    // v0/v1: base, free-space info, end of file; v2/v3: base, superblock extension, end of
    // file.
    let eof = read(base_at + 2 * o)?;
    base.checked_add(eof)
}

#[cfg(test)]
mod tests;
