//! How frames are laid out in memory and read ([`IngestTuning`]): one value the binary makes
//! at start (from the environment, through the settings table, docs/SETTINGS.md) and
//! hands to the player, the benchmark and the engines. No ingest code reads the
//! environment.

use std::sync::Arc;

use super::faults::FaultPlan;
use crate::gpu::HostPages;

/// The reading side's settings. [`Default`] is every setting's documented default.
#[derive(Clone, Debug)]
pub struct IngestTuning {
    /// Bytes of a slot part (a power of two of at least
    /// [`MIN_PART_BYTES`](crate::gpu::MIN_PART_BYTES)); `None`: the renderer's device
    /// decides, or [`DEFAULT_PART_BYTES`](crate::gpu::DEFAULT_PART_BYTES) where none does.
    pub part_bytes: Option<u64>,
    /// Which pages back host slot buffers.
    pub host_pages: HostPages,
    /// Faults every engine injects into its reads (tests, demonstrations); `None`: none.
    pub faults: Option<Arc<FaultPlan>>,
}

impl Default for IngestTuning {
    fn default() -> Self {
        IngestTuning {
            part_bytes: None,
            host_pages: HostPages::Huge,
            faults: None,
        }
    }
}
