//! Zero-copy CUDA↔Vulkan sharing: device memory that CUDA (cuFile, copies) writes and the
//! wgpu renderer reads, with no copy in between.
//!
//! - [`InteropDevice::open`] finds the Vulkan adapter that *is* the CUDA GPU (equal device
//!   UUIDs: `VkPhysicalDeviceIDProperties::deviceUUID` against `cuDeviceGetUuid`) and
//!   creates a wgpu device on it with `VK_KHR_external_memory_fd` enabled, the adapter's own
//!   limits (full storage-binding size) and timestamp queries where available.
//! - [`SharedBuffer::new`] allocates device-local Vulkan memory (a dedicated, exportable
//!   allocation), binds it to a `VkBuffer` that wgpu uses as an ordinary [`wgpu::Buffer`]
//!   (`STORAGE | COPY_SRC | COPY_DST`), exports it as an opaque file descriptor and imports
//!   that into CUDA, which maps it at [`SharedBuffer::cuda_ptr`]. The same bytes, two names.
//! - [`SharedBuffer::part_memory`] makes it one part of a frame-ring slot
//!   ([`PartMemory::Device`] of a borrowed [`DeviceBuffer`]), so the ingest engines write
//!   frames straight into memory the shader binds. A frame larger than one buffer is several
//!   shared buffers, one exported allocation per part ([`SlotMemory::new`](crate::gpu::SlotMemory::new)).
//! - [`probe`] says whether all of this works on a machine, and why not.
//!
//! # Synchronisation contract
//!
//! Nothing here synchronises the two APIs by itself; the frame ring's states do, on the host:
//!
//! 1. **CUDA → renderer.** An engine's `Completion` with `on_gpu` set means every byte of the
//!    frame is in device memory and the CUDA work that wrote it is synchronised (stream or
//!    event waited on by the host). Only after that (slot `Ready`, taken with
//!    `FrameRing::acquire`) may the renderer bind the slot and submit work that reads it.
//!    The host-side wait orders CUDA's writes before the Vulkan submission; no Vulkan
//!    semaphore is needed because the submission happens after the wait. (Strict Vulkan
//!    would also want a queue-family ownership acquire from `VK_QUEUE_FAMILY_EXTERNAL` for
//!    an `EXCLUSIVE` buffer written outside Vulkan; wgpu has no hook for it, NVIDIA's
//!    driver does not need it for buffers, and the GPU tests check the bytes.)
//! 2. **Renderer → CUDA.** The renderer must be done with a slot (the submission that reads
//!    it complete: `device.poll(PollType::Wait { submission_index, .. })` or an
//!    `on_submitted_work_done` callback) before it calls `FrameRing::release` and the ring
//!    lets an engine overwrite the slot.
//! 3. Raw CUDA calls need the context current on the calling thread: this module binds it
//!    ([`Gpu::bind`]) before every CUDA call it makes; callers writing through
//!    [`SharedBuffer::cuda_ptr`] themselves must do the same.
//!
//! # Lifetime and teardown
//!
//! The Vulkan buffer and memory belong to a reference-counted owner held by the
//! [`SharedBuffer`] and by wgpu (through the buffer's drop callback, which runs when wgpu
//! destroys the buffer: after the last handle is gone and every submission using it is
//! done). Dropping a [`SharedBuffer`] first releases CUDA's side (`cuMemFree` of the mapped
//! pointer, then `cuDestroyExternalMemory`), then its reference to the Vulkan memory. The
//! memory is freed exactly once, when both wgpu and the [`SharedBuffer`] are done with it,
//! so never while CUDA still maps it or while a submission reads it. The exported file
//! descriptor belongs to CUDA after a successful import (it is closed here only when the
//! import fails).

use std::os::fd::{FromRawFd, IntoRawFd, OwnedFd};
use std::sync::Arc;

use ash::vk;
use cudarc::driver::sys;
use wgpu::hal::api::Vulkan;

use super::cuda::{Gpu, cuda_probe, driver_err};
use super::{DeviceBuffer, PartMemory};
use crate::device::vulkan::{SHARED_HANDLE as HANDLE, SHARED_VK_USAGE as VK_USAGE};
use crate::device::{DeviceError, block_on, read_buffer, uuid_str};

/// What can go wrong setting up CUDA↔Vulkan sharing. Each message says what to do next.
#[derive(Debug, thiserror::Error)]
pub enum InteropError {
    /// CUDA cannot be used on this machine or for this GPU.
    #[error(
        "CUDA is not usable: {0} (install the NVIDIA driver, or use the portable path without sharing)"
    )]
    NoCuda(String),
    /// No Vulkan adapter at all, or the Vulkan loader/driver is too old.
    #[error(
        "no usable Vulkan adapter: {0} (install the NVIDIA Vulkan driver, e.g. libnvidia-gl, and check `vulkaninfo`)"
    )]
    NoVulkan(String),
    /// Vulkan works, but none of its adapters is the CUDA GPU.
    #[error(
        "no Vulkan adapter is CUDA GPU {gpu} (UUID {uuid}); Vulkan sees {seen}. The NVIDIA Vulkan ICD may be missing (check /usr/share/vulkan/icd.d/nvidia_icd.json and VK_ICD_FILENAMES / VK_DRIVER_FILES)"
    )]
    NoMatchingAdapter {
        /// The CUDA device, e.g. "0 (NVIDIA H200)".
        gpu: String,
        /// Its UUID.
        uuid: String,
        /// The Vulkan adapters found, with their UUIDs.
        seen: String,
    },
    /// The adapter lacks a Vulkan extension or capability sharing needs.
    #[error(
        "the Vulkan driver of {adapter} does not support {what}; CUDA sharing needs it (update the driver, or run without the direct path)"
    )]
    Unsupported {
        /// The adapter's name.
        adapter: String,
        /// The missing extension or capability.
        what: String,
    },
    /// A Vulkan call failed.
    #[error("Vulkan: {what} failed: {result}")]
    Vulkan {
        /// What was being done.
        what: String,
        /// The Vulkan result code.
        result: vk::Result,
    },
    /// wgpu refused to create the device or wrap a buffer.
    #[error("wgpu: {0}")]
    Wgpu(String),
    /// A CUDA driver call failed.
    #[error("CUDA: {0}")]
    Cuda(String),
    /// The caller asked for something impossible (zero bytes, more than the device allows,
    /// a buffer for a different GPU).
    #[error("{0}")]
    Usage(String),
}

type IResult<T> = std::result::Result<T, InteropError>;

impl From<DeviceError> for InteropError {
    fn from(e: DeviceError) -> InteropError {
        match e {
            DeviceError::NoAdapter(m) | DeviceError::NoVulkan(m) => InteropError::NoVulkan(m),
            DeviceError::NoMatchingAdapter { gpu, uuid, seen } => {
                InteropError::NoMatchingAdapter { gpu, uuid, seen }
            }
            DeviceError::Unsupported { adapter, what } => {
                InteropError::Unsupported { adapter, what }
            }
            DeviceError::Device(m) => InteropError::Wgpu(m),
        }
    }
}

/// wgpu usage of a shared buffer; matches [`VK_USAGE`].
const WGPU_USAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

fn vk_err(what: impl Into<String>) -> impl FnOnce(vk::Result) -> InteropError {
    let what = what.into();
    move |result| InteropError::Vulkan { what, result }
}

fn cuda_check(r: sys::CUresult, what: &str) -> IResult<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(InteropError::Cuda(format!("{what}: {}", driver_err(r))))
    }
}

/// The CUDA device's UUID (binds the context to this thread).
fn cuda_uuid(gpu: &Gpu) -> IResult<[u8; 16]> {
    gpu.bind()
        .map_err(|e| InteropError::NoCuda(e.to_string()))?;
    let u = gpu
        .context()
        .uuid()
        .map_err(|e| InteropError::Cuda(format!("cuDeviceGetUuid: {}", driver_err(e.0))))?;
    Ok(u.bytes.map(|b| b as u8))
}

mod device;
mod export;
mod shared;
#[cfg(test)]
mod tests;

pub use device::InteropDevice;
use export::Exportable;
pub use shared::SharedBuffer;

/// Whether zero-copy sharing works here: opens GPU 0 (or `gpu`), the matching Vulkan
/// device, makes a 64 KiB shared buffer, writes it with CUDA and reads it back through wgpu.
/// `Ok` says what was found; `Err` says why not (never panics, also without CUDA).
pub fn probe(gpu: Option<&Gpu>) -> Result<String, String> {
    cuda_probe().map_err(|e| format!("CUDA is not usable: {e}"))?;
    let opened;
    let gpu = match gpu {
        Some(g) => g,
        None => {
            opened = Gpu::open(0).map_err(|e| format!("cannot open CUDA GPU 0: {e}"))?;
            &opened
        }
    };
    let dev = InteropDevice::open(gpu).map_err(|e| e.to_string())?;
    let len = 64 << 10;
    let shared = SharedBuffer::new(&dev, gpu, len).map_err(|e| e.to_string())?;
    let word = 0x5ce1_1f00_u32;
    gpu.bind().map_err(|e| e.to_string())?;
    cuda_check(
        // SAFETY: `len` bytes mapped at the pointer; context bound.
        unsafe { sys::cuMemsetD32_v2(shared.cuda_ptr(), word, (len / 4) as usize) },
        "cuMemsetD32",
    )
    .map_err(|e| e.to_string())?;
    cuda_check(
        // SAFETY: waits for the legacy default stream, where the memset ran.
        unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) },
        "cuStreamSynchronize",
    )
    .map_err(|e| e.to_string())?;
    let back =
        read_buffer(&dev.device, &dev.queue, shared.wgpu(), 0, len).map_err(|e| e.to_string())?;
    let bad = back
        .chunks_exact(4)
        .position(|c| u32::from_le_bytes(c.try_into().unwrap()) != word);
    if let Some(i) = bad {
        return Err(format!(
            "shared memory is not shared: word {i} of a CUDA-written buffer reads differently through Vulkan on {}",
            dev.describe()
        ));
    }
    Ok(format!(
        "zero-copy CUDA↔Vulkan sharing works on {} (64 KiB written by CUDA, read by wgpu)",
        dev.describe()
    ))
}
