//! CUDA's import of exported Vulkan memory, and the [`SharedBuffer`] holding both halves.

use super::*;

/// CUDA's view of the memory: the imported external memory and the pointer mapped over it.
struct CudaImport {
    gpu: Gpu,
    ext: sys::CUexternalMemory,
    ptr: sys::CUdeviceptr,
}

// SAFETY: the handles are plain driver handles, usable from any thread with the context
// bound (done before every use).
unsafe impl Send for CudaImport {}
// SAFETY: as above; nothing here mutates through `&self`.
unsafe impl Sync for CudaImport {}

impl CudaImport {
    /// Imports `fd` (consumed: CUDA owns it on success, it is closed on failure) as a
    /// dedicated allocation of `alloc_size` bytes and maps `len` bytes at offset 0.
    fn new(gpu: &Gpu, fd: OwnedFd, alloc_size: u64, len: u64) -> IResult<CudaImport> {
        gpu.bind().map_err(|e| InteropError::Cuda(e.to_string()))?;
        let desc = sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
            type_: sys::CUexternalMemoryHandleType::CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD,
            handle: sys::CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st__bindgen_ty_1 {
                fd: std::os::fd::AsRawFd::as_raw_fd(&fd),
            },
            size: alloc_size,
            flags: sys::CUDA_EXTERNAL_MEMORY_DEDICATED,
            reserved: [0; 16],
        };
        let mut ext: sys::CUexternalMemory = std::ptr::null_mut();
        // SAFETY: a valid descriptor; the context is current.
        let r = unsafe { sys::cuImportExternalMemory(&mut ext, &desc) };
        // `fd` still owned: dropping it on the error path closes it.
        cuda_check(
            r,
            &format!("cuImportExternalMemory (opaque fd, dedicated, {alloc_size} bytes)"),
        )?;
        // CUDA owns the descriptor now; it must not be closed here.
        let _ = fd.into_raw_fd();
        let mut import = CudaImport {
            gpu: gpu.clone(),
            ext,
            ptr: 0,
        };
        let bd = sys::CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
            offset: 0,
            size: len,
            flags: 0,
            reserved: [0; 16],
        };
        let mut ptr: sys::CUdeviceptr = 0;
        cuda_check(
            // SAFETY: `ext` is a live import of at least `len` bytes; on failure `import`'s
            // Drop destroys it.
            unsafe { sys::cuExternalMemoryGetMappedBuffer(&mut ptr, ext, &bd) },
            &format!("cuExternalMemoryGetMappedBuffer of {len} bytes"),
        )?;
        import.ptr = ptr;
        Ok(import)
    }
}

impl Drop for CudaImport {
    fn drop(&mut self) {
        if self.gpu.bind().is_err() {
            // The context is gone (driver failure): nothing can be released through it.
            return;
        }
        // SAFETY: mapped and imported in `new`, released once, here; the owner guarantees
        // no CUDA work on the pointer is in flight (frame-ring contract).
        unsafe {
            if self.ptr != 0 {
                sys::cuMemFree_v2(self.ptr);
            }
            sys::cuDestroyExternalMemory(self.ext);
        }
    }
}

/// Device memory that is both a [`wgpu::Buffer`] and a CUDA device pointer (see the module
/// documentation for the synchronisation contract and teardown order).
pub struct SharedBuffer {
    // Field order is drop order: CUDA lets go first, then the Vulkan side.
    cuda: CudaImport,
    vk: Exportable,
}

impl std::fmt::Debug for SharedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedBuffer")
            .field("len", &self.vk.len)
            .field("alloc_size", &self.vk.alloc_size)
            .field("cuda_ptr", &format_args!("{:#x}", self.cuda.ptr))
            .finish()
    }
}

impl SharedBuffer {
    /// `len` bytes of device-local Vulkan memory (a dedicated allocation with
    /// `VkExportMemoryAllocateInfo` OPAQUE_FD) bound to a `VkBuffer` with
    /// `STORAGE | COPY_SRC | COPY_DST` usage, wrapped as a [`wgpu::Buffer`], exported with
    /// `vkGetMemoryFdKHR` and imported into CUDA (`cuImportExternalMemory`, OPAQUE_FD, the
    /// allocation's size, the dedicated flag; `cuExternalMemoryGetMappedBuffer`). The
    /// memory is zeroed (by CUDA) before it is returned.
    ///
    /// `len` must be a multiple of 4 and at most [`InteropDevice::max_shared_bytes`];
    /// `gpu` must be the GPU `dev` was opened for.
    pub fn new(dev: &InteropDevice, gpu: &Gpu, len: u64) -> Result<SharedBuffer, InteropError> {
        cuda_probe().map_err(InteropError::NoCuda)?;
        let uuid = cuda_uuid(gpu)?;
        if uuid != dev.uuid {
            return Err(InteropError::Usage(format!(
                "CUDA GPU {} ({}) is not the Vulkan device {}",
                gpu.ordinal,
                uuid_str(&uuid),
                dev.describe()
            )));
        }
        let vk = Exportable::new(dev, len)?;
        let fd = vk.export_fd()?;
        let cuda = CudaImport::new(gpu, fd, vk.alloc_size, len)?;
        let shared = SharedBuffer { cuda, vk };
        // Zero it (a slot never shows another frame's stale bytes), and prove the mapping.
        cuda_check(
            // SAFETY: the mapped range is `len` bytes; the context was bound by the import.
            unsafe { sys::cuMemsetD8_v2(shared.cuda.ptr, 0, len as usize) },
            "cuMemsetD8 of the shared buffer",
        )?;
        cuda_check(
            // SAFETY: waits for the memset (issued on the legacy default stream), not for the
            // context's other streams (engines may be reading into other slots).
            unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) },
            "cuStreamSynchronize",
        )?;
        Ok(shared)
    }

    /// The buffer as wgpu sees it (the renderer binds slices of it as `GridSlice`s). Clones
    /// keep the memory alive, not CUDA's mapping.
    pub fn wgpu(&self) -> &wgpu::Buffer {
        &self.vk.buffer
    }

    /// The same memory as a CUDA device pointer (valid while `self` lives; bind the
    /// context before using it).
    pub fn cuda_ptr(&self) -> sys::CUdeviceptr {
        self.cuda.ptr
    }

    /// Length in bytes (as asked; the allocation may be larger).
    pub fn len(&self) -> u64 {
        self.vk.len
    }

    /// Always false (shared buffers hold at least one byte).
    pub fn is_empty(&self) -> bool {
        self.vk.len == 0
    }

    /// One part of a frame-ring slot over this memory: [`PartMemory::Device`] of a borrowed
    /// [`DeviceBuffer`] that keeps `self` (CUDA's import and the Vulkan memory) alive. A slot
    /// of several parts is several shared buffers ([`SlotMemory::new`](crate::gpu::SlotMemory::new)).
    ///
    /// The slot belongs to `gpu`'s context handle, so pass the same [`Gpu`] (or a clone)
    /// you give the ingest engine: engines refuse slots of another context. `gpu` must be
    /// the GPU the buffer was made for (panics otherwise: a programming error).
    pub fn part_memory(self: &Arc<Self>, gpu: &Gpu) -> PartMemory {
        assert_eq!(
            gpu.ordinal, self.cuda.gpu.ordinal,
            "a shared buffer of CUDA GPU {} cannot be a slot of GPU {}",
            self.cuda.gpu.ordinal, gpu.ordinal
        );
        // SAFETY: the pointer maps `len` bytes of this device's primary context (every
        // `Gpu` of one ordinal shares it), alive as long as the boxed Arc; the ring hands a
        // slot to one writer at a time.
        let buf = unsafe {
            DeviceBuffer::borrowed(
                gpu,
                self.cuda.ptr,
                self.vk.len as usize,
                Box::new(self.clone()),
            )
        };
        PartMemory::Device(buf)
    }
}
