//! The GPU side of ingest: CUDA context and identity ([`Gpu`]), host, pinned and device
//! memory ([`HostBuffer`], [`PinnedBuffer`], [`DeviceBuffer`]), and the [`FrameRing`] of
//! slots frames are read into.
//!
//! The ingest engines use this module, never the other way round: errors here are
//! [`GpuError`]s (the ingest layer converts them, keeping their text), and the CRC-32
//! arithmetic the kernels share with the host checks lives in the leaf [`crate::crc32`].
//!
//! CUDA is loaded at run time (cudarc's `dynamic-loading`): everything here first checks
//! [`cuda_probe`], so machines without NVIDIA drivers get an error message, not a panic.
//! A slot is an ordered list of parts (separate allocations, so a frame may be larger than
//! one graphics buffer); a device part is a device pointer and a length, owned (allocated
//! here) or borrowed (memory imported from Vulkan: [`interop`]), so the frame ring does not
//! care where it came from.

mod crc;
mod cuda;
mod error;
pub mod hostimport;
mod hostmem;
pub mod interop;
mod plan;
mod ring;
mod wgpu_crc;

pub use crc::{GPU_CRC_BLOCK, GpuCrc};
pub use cuda::{DeviceBuffer, Gpu, PinnedBuffer, cuda_probe, device_count, driver_version};
pub use error::{GpuError, Result};
pub use hostimport::HostImporter;
pub use hostmem::{
    HOST_HUGEPAGES_ENV, HUGE_PAGE, HostBuffer, HostPages, describe_pages, page_size,
};
pub use interop::{InteropDevice, InteropError, SharedBuffer};
pub use plan::{
    DEFAULT_PART_BYTES, SlotDemand, SlotPlan, check_part_bytes, choose_part_bytes, plan_slots,
};
pub use ring::{
    FrameRing, MIN_PART_BYTES, PART_ALIGN, PartMemory, PartRange, SlotLayout, SlotMemory, SlotState,
};
pub use wgpu_crc::{WGPU_CRC_BLOCK, WgpuCrc};

pub(crate) use cuda::{cuda_check, cuda_error};
