//! Ingest engines: storage → (host or GPU) memory, fast.
//!
//! - [`EngineKind::Gds`]: cuFile reads straight into the slot's device memory (P2P where
//!   nvidia-fs or PCI P2PDMA exist, else cuFile's compatibility mode — reported as such).
//! - [`EngineKind::Staged`]: one io_uring per worker thread reads with O_DIRECT into
//!   registered, pinned host buffers; asynchronous copies on several CUDA streams move them
//!   to the slot, overlapping with the next reads.
//! - [`EngineKind::Portable`] / [`EngineKind::CpuOnly`]: the same reads into host memory (for
//!   the wgpu renderer to upload, or for nothing: the storage ceiling).
//!
//! All share [`IngestEngine`]: submit a [`ReadRequest`] (extents → slot), receive a
//! [`Completion`] with timings. Engines know nothing of the renderer; the frame ring
//! ([`crate::gpu::FrameRing`]) decides which slot is free. Where io_uring is unavailable
//! the engines use pread threads, and where cuFile cannot register a file
//! [`open_engine`] falls back to staged; both say so in [`EngineInfo`].

mod engine;
mod error;
pub mod faults;
mod files;
pub mod gds;
mod io;
pub mod latency;
mod source;
mod tuning;
mod verify;

pub use crate::gpu::{HostBuffer, page_size};
pub use engine::{
    BounceCopier, Completion, DEFAULT_READ_TIMEOUT, Engine, EngineConfig, EngineInfo, EngineKind,
    IngestEngine, ReadProgress, ReadRequest, open_engine,
};
pub use error::{IngestError, Result};
pub use faults::{FaultKind, FaultPlan};
pub use files::{IoMode, OpenFile, OpenFiles};
pub use io::{ActiveBackend, IoBackend, IoCounters, io_uring_probe};
pub use source::{ReadExtent, Source, SourceFile, SourceFrame};
pub use tuning::IngestTuning;
