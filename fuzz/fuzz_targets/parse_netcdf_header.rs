//! Fuzzes the netCDF classic header validator (CDF-1, CDF-2, CDF-5) that runs before
//! netCDF-C sees a file, and the HDF5 superblock's end-of-file reading. Whatever the bytes,
//! it must return Ok or Err, never panic or allocate beyond the bytes it is given; a header
//! that passes must be self-consistent: every variable's data within the file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use supercell::format::netcdf::{NetcdfHeaderError, hdf5_stored_eof, parse_classic_header};

fuzz_target!(|data: &[u8]| {
    let _ = hdf5_stored_eof(data);
    // The file's length: the bytes given, or (first 8 bytes) a longer file whose start
    // this is, as the importer hands in the first 64 KiB of a larger file.
    let (len, head) = match data.split_first_chunk::<8>() {
        Some((l, rest)) if l[0] == 0xff => (u64::from_le_bytes(*l) & 0xffff_ffff, rest),
        _ => (data.len() as u64, data),
    };
    match parse_classic_header(head, len) {
        Ok(h) => {
            let file_len = len.max(head.len() as u64);
            assert!(h.header_len <= file_len);
            for v in &h.variables {
                assert!(v.begin >= h.header_len);
                let records = if v.is_record { h.numrecs } else { 1 };
                if records > 0 && v.data_len > 0 {
                    let end = (records - 1) * h.recsize + v.begin + v.data_len;
                    assert!(end <= file_len, "{} ends at {end} > {file_len}", v.name);
                }
                for &d in &v.dimids {
                    assert!((d as usize) < h.dimensions.len());
                }
            }
        }
        Err(NetcdfHeaderError::NeedMore { have, need }) => {
            assert!(need > have && need <= len.max(head.len() as u64));
        }
        Err(_) => {}
    }
});
