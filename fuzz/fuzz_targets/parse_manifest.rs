//! Fuzzes the dataset manifest loader: any bytes must give Ok or a clear Err, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use supercell::dataset::Manifest;

fuzz_target!(|data: &[u8]| {
    let _ = Manifest::from_json(data, Path::new("/nonexistent/manifest.json"));
});
