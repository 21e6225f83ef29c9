//! Checks on a netCDF file before netCDF-C opens it, and bounds on what netCDF-C is asked
//! to read after.
//!
//! netCDF-C trusts a classic file's header (a crafted count or type makes it abort, loop,
//! segfault or divide by zero, and a file cut short reads as fill values), so every classic
//! file is validated first by supercell's own parser
//! ([`supercell::format::netcdf::parse_classic_header`]): counts, types, sizes, and every
//! variable's data within the file. A netCDF-4 (HDF5) file cut short is refused by HDF5
//! itself; its superblock's end-of-file address is compared with the file's length first so
//! that the message says how many bytes are missing. What a netCDF-4 file's dimensions claim
//! is bounded when a variable is read ([`check_claimed`]).

use std::io::Read;
use std::path::Path;

use anyhow::{Context, Result, anyhow, bail};
use supercell::format::netcdf::{
    ClassicHeader, MAX_HEADER_BYTES, NetcdfHeaderError, hdf5_stored_eof, parse_classic_header,
};

/// Bytes read first: the whole header of any file CM1, WRF or NCO write.
const FIRST_READ: u64 = 64 << 10;

/// The most values a netCDF-4 variable (or one of its chunks) may claim per byte of the
/// file: deflate, the compression netCDF-4 writers use, cannot shrink data more than about
/// 1032 to 1, and a value takes at least a byte, so a variable claiming more than 2048
/// values per byte of file is not in the file.
pub const MAX_EXPANSION: u64 = 2048;

/// What the checks found out about a file.
pub struct CheckedFile {
    /// Its length in bytes.
    pub len: u64,
    /// Its classic header, where it is a classic file.
    pub classic: Option<ClassicHeader>,
}

/// Checks `path` before netCDF-C opens it (see the module's documentation).
pub fn before_open(path: &Path) -> Result<CheckedFile> {
    // On Unix the netcdf crate hands netCDF-C the path's bytes as they are; elsewhere it
    // converts the path to UTF-8 and panics on anything else.
    if cfg!(not(unix)) && path.to_str().is_none() {
        bail!(
            "{}: netCDF files are opened through netCDF-C, which needs a UTF-8 path: rename \
             the file or link it under a UTF-8 name",
            path.display()
        );
    }
    let mut file =
        std::fs::File::open(path).with_context(|| format!("{}: cannot open", path.display()))?;
    let len = file
        .metadata()
        .with_context(|| format!("{}: cannot read its size", path.display()))?
        .len();
    let mut head = Vec::new();
    read_to(&mut file, &mut head, FIRST_READ.min(len), path)?;
    let classic = match head.get(..3) {
        Some(b"CDF") => Some(classic_header(&mut file, head, len, path)?),
        _ => {
            if let Some(eof) = hdf5_stored_eof(&head).filter(|&eof| eof > len) {
                bail!(
                    "{}: the file is truncated: its HDF5 superblock says it is {eof} bytes long, \
                     it has {len} (bytes {len}..{eof}, {} bytes, are missing)",
                    path.display(),
                    eof - len
                );
            }
            None
        }
    };
    Ok(CheckedFile { len, classic })
}

/// Reads from `file` until `buf` holds `want` bytes (or the file ends).
fn read_to(file: &mut std::fs::File, buf: &mut Vec<u8>, want: u64, path: &Path) -> Result<()> {
    let have = buf.len() as u64;
    if want > have {
        file.take(want - have)
            .read_to_end(buf)
            .with_context(|| format!("{}: reading its header", path.display()))?;
    }
    Ok(())
}

/// The classic header of `file`, whose first bytes `head` holds, read further as the
/// parser asks.
fn classic_header(
    file: &mut std::fs::File,
    mut head: Vec<u8>,
    len: u64,
    path: &Path,
) -> Result<ClassicHeader> {
    loop {
        match parse_classic_header(&head, len) {
            Ok(h) => return Ok(h),
            Err(NetcdfHeaderError::NeedMore { need, .. }) if need > head.len() as u64 => {
                let before = head.len();
                read_to(file, &mut head, need.min(MAX_HEADER_BYTES), path)?;
                if head.len() == before {
                    bail!(
                        "{}: the file ended while its header was read",
                        path.display()
                    );
                }
            }
            Err(e) => {
                return Err(anyhow!(
                    "{}: not a valid netCDF classic file: {e}",
                    path.display()
                ));
            }
        }
    }
}

/// Refuses to read `elements` values of variable `name` where the file could not hold
/// them: a classic file's sizes were checked against its length before it was opened; a
/// netCDF-4 file's dimensions may claim anything, so their product is bounded by
/// [`MAX_EXPANSION`] bytes per byte of the file, at one byte per value at least.
pub fn check_claimed(path: &Path, file: &CheckedFile, name: &str, elements: u64) -> Result<()> {
    let most = file.len.saturating_mul(MAX_EXPANSION);
    if file.classic.is_none() && elements > most {
        bail!(
            "{}: variable {name} claims {elements} values, more than a {}-byte netCDF-4 file \
             can hold (at most {MAX_EXPANSION} values per byte of file: deflate compresses \
             no more than about 1032 to 1)",
            path.display(),
            file.len
        );
    }
    Ok(())
}

/// Memory or output an import may take per byte of its input files ([`check_ceiling`]).
pub const PER_INPUT_BYTE: u64 = 64;
/// What any import may take, however small its input: enough for the model-grid voxels of
/// every realistic small file.
pub const CEILING_FLOOR: u64 = 1 << 30;

/// Refuses an import whose peak memory (`memory`: the planner's estimate of one frame, or
/// what one read of a variable takes) or largest output (`output`, every voxel of every
/// grid active) exceeds
/// [`PER_INPUT_BYTE`] times its input (`input` bytes in all), or [`CEILING_FLOOR`] where
/// that is more: what a file's header claims (its grid, its levels' spacing, its record
/// count) cannot make the import take memory or time out of proportion to the file.
pub fn check_ceiling(input: u64, memory: u64, output: u64, voxels_text: &str) -> Result<()> {
    let ceiling = input.saturating_mul(PER_INPUT_BYTE).max(CEILING_FLOOR);
    for (what, bytes) in [("memory", memory), ("output", output)] {
        if bytes > ceiling {
            bail!(
                "{voxels_text}: the import would take up to {} of {what} for {} of netCDF \
                 input, more than the {} allowed ({PER_INPUT_BYTE} times the input, at least \
                 {}): choose a larger --dz or --dx, or fewer --vars",
                supercell::memory::human(bytes),
                supercell::memory::human(input),
                supercell::memory::human(ceiling),
                supercell::memory::human(CEILING_FLOOR)
            );
        }
    }
    Ok(())
}
