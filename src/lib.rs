//! supercell: stream time series of sparse NanoVDB volumes from fast storage into GPU memory,
//! ray-march every frame, and measure how fast data and frames arrive.
//!
//! Modules follow the data flow of `DESIGN.md`: [`format`] (NanoVDB bytes), [`dataset`]
//! (manifest, lanes, striping), [`synth`] (the synthetic supercell generator), [`render`]
//! (the ray-marcher) and [`scene`] (scene files: what to show and how).

pub mod app;
pub mod bench;
pub mod dataset;
pub mod doctor;
pub mod format;
pub mod gpu;
pub mod ingest;
pub mod memory;
pub mod pipeline;
pub mod render;
pub mod scene;
pub mod synth;
