//! supercell: stream time series of sparse NanoVDB volumes from fast storage into GPU memory,
//! ray-march every frame, and measure how fast data and frames arrive.
//!
//! Modules follow the data flow from lanes to screen (the README's "Layout of the code"
//! table says what each may know): [`format`] (NanoVDB bytes), [`dataset`] (manifest,
//! lanes, striping), [`device`] (opening wgpu devices, their capabilities, read-back),
//! [`ingest`] (engines that read frames into ring slots), [`gpu`] (CUDA, frame rings,
//! Vulkan sharing), [`pipeline`] (scheduler, metrics), [`stream`] (the loop that drives an
//! engine and its ring from the scheduler), [`render`] (the
//! ray-marcher), [`scene`] (scene files), [`app`] (the player), [`bench`] and [`doctor`]
//! (measuring and diagnosing), [`memory`] (what an allocation may ask for), [`probe`] (what
//! the process uses: memory, descriptors, threads, CPU time; percentiles), [`crc32`]
//! (CRC-32 in pieces, shared by the host and GPU checks) and [`synth`] (the synthetic
//! supercell generator); [`settings`] (every setting read from the environment, in one table, parsed into the values the binary hands in); [`stderr_log`] (the logger the binaries install: library notes and warnings go through `log`); [`atomic_file`] writes files whole or not at all and removes
//! temporary files when a signal ends the process.

pub mod app;
pub mod atomic_file;
pub mod bench;
pub mod cluster;
pub mod crc32;
pub mod dataset;
pub mod device;
pub mod doctor;
pub mod format;
pub mod gpu;
pub mod ingest;
pub mod memory;
pub mod pipeline;
pub mod probe;
pub mod render;
pub mod scene;
pub mod settings;
pub mod stderr_log;
pub mod stream;
pub mod synth;
pub mod units;
