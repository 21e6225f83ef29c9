//! Fuzzes the OpenVDB `.vdb` reader and the conversion of its grids to leaf bricks. Whatever
//! the bytes, reading must return Ok or Err, never panic, read out of bounds or allocate
//! without bound; a grid that reads must convert (or be refused) without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use supercell::format::openvdb::{read_vdb_bytes, to_scalar_grid};

fuzz_target!(|data: &[u8]| {
    if let Ok(file) = read_vdb_bytes(data) {
        for g in &file.grids {
            // A small tile budget: a root tile alone would be 4096³ voxels.
            let _ = to_scalar_grid(g, None, 4096);
            if g.value_type.components() == 3 {
                let _ = to_scalar_grid(g, Some(2), 4096);
            }
        }
    }
});
