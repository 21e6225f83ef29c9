//! Telling netCDF files apart by their first bytes: always built, so that a `supercell-data`
//! built without the `netcdf` feature still names a netCDF file for what it is.

use std::path::Path;

/// Whether `path` starts like a netCDF file (classic, 64-bit offset, CDF-5, or netCDF-4,
/// which is HDF5).
pub fn is_netcdf(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 8];
    let Ok(mut f) = std::fs::File::open(path) else {
        return false;
    };
    if f.read_exact(&mut head).is_err() {
        return false;
    }
    (head[..3] == *b"CDF" && matches!(head[3], 1 | 2 | 5)) || head == *b"\x89HDF\r\n\x1a\n"
}
