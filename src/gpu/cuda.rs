//! CUDA through cudarc's driver API, loaded at run time: a probe that never panics, the
//! context of one GPU, device allocations (owned, or borrowed from another API such as a
//! Vulkan export) and pinned host buffers.

use std::any::Any;
use std::sync::Arc;

use cudarc::driver::CudaContext;
use cudarc::driver::sys;

use super::error::{GpuError, Result};
use super::hostmem::{HostBuffer, HostPages};

/// Why CUDA cannot be used here, or `Ok` when the driver library loads and initialises.
///
/// cudarc panics when a library is missing, so every CUDA path calls this first.
pub fn cuda_probe() -> std::result::Result<(), String> {
    // SAFETY: only tries to dlopen libcuda; no other effect.
    if !unsafe { sys::is_culib_present() } {
        return Err(
            "the CUDA driver library (libcuda.so) is not installed or not on the loader path"
                .into(),
        );
    }
    // SAFETY: cuInit has no preconditions.
    let r = unsafe { sys::cuInit(0) };
    if r != sys::CUresult::CUDA_SUCCESS {
        return Err(format!("cuInit failed: {}", driver_err(r)));
    }
    Ok(())
}

/// The text of a CUDA result code.
pub(crate) fn driver_err(r: sys::CUresult) -> String {
    let e = cudarc::driver::DriverError(r);
    match e.error_string() {
        Ok(s) => format!("{r:?}: {}", s.to_string_lossy()),
        Err(_) => format!("{r:?}"),
    }
}

/// `Ok` for a successful CUDA driver call, else [`GpuError::Cuda`] naming the call (`what`)
/// and the driver's text for `r`.
pub(crate) fn cuda_check(r: sys::CUresult, what: &str) -> Result<()> {
    if r == sys::CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(GpuError::Cuda(format!("{what}: {}", driver_err(r))))
    }
}

/// Turns a cudarc error of the call `what` into [`GpuError::Cuda`] (for `map_err`).
pub(crate) fn cuda_error(what: &str) -> impl FnOnce(cudarc::driver::DriverError) -> GpuError + '_ {
    move |e| GpuError::Cuda(format!("{what}: {}", driver_err(e.0)))
}

/// The CUDA driver version as (major, minor), e.g. (13, 0).
pub fn driver_version() -> Result<(i32, i32)> {
    cuda_probe().map_err(GpuError::Unavailable)?;
    let mut v = 0;
    cuda_check(
        // SAFETY: writes one int.
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    Ok((v / 1000, (v % 1000) / 10))
}

/// Number of CUDA devices (0 when CUDA is unavailable).
pub fn device_count() -> usize {
    if cuda_probe().is_err() {
        return 0;
    }
    CudaContext::device_count().map_or(0, |n| n.max(0) as usize)
}

/// One GPU: its primary context and identity.
#[derive(Debug, Clone)]
pub struct Gpu {
    ctx: Arc<CudaContext>,
    /// CUDA device ordinal.
    pub ordinal: usize,
    /// Device name, e.g. "NVIDIA H200".
    pub name: String,
    /// PCI bus id as CUDA prints it, e.g. "0000:1B:00.0".
    pub pci_bus_id: String,
}

impl Gpu {
    /// Opens GPU `ordinal` (retains its primary context and binds it to this thread).
    pub fn open(ordinal: usize) -> Result<Gpu> {
        cuda_probe().map_err(GpuError::Unavailable)?;
        let count = CudaContext::device_count().map_err(cuda_error("cuDeviceGetCount"))?;
        if ordinal >= count.max(0) as usize {
            return Err(GpuError::Unavailable(format!(
                "GPU {ordinal} does not exist (CUDA sees {count})"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(cuda_error("creating the CUDA context"))?;
        let name = ctx.name().map_err(cuda_error("cuDeviceGetName"))?;
        let mut bus = [0 as std::ffi::c_char; 32];
        cuda_check(
            // SAFETY: writes a NUL-terminated string of at most `len` bytes.
            unsafe {
                sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), bus.len() as i32, ctx.cu_device())
            },
            "cuDeviceGetPCIBusId",
        )?;
        // SAFETY: NUL-terminated by the driver within the buffer (len includes the NUL).
        let pci_bus_id = unsafe { std::ffi::CStr::from_ptr(bus.as_ptr()) }
            .to_string_lossy()
            .into_owned();
        Ok(Gpu {
            ctx,
            ordinal,
            name,
            pci_bus_id,
        })
    }

    /// The cudarc context.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Binds the context to the calling thread (needed before raw driver calls).
    pub fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("binding the CUDA context"))
    }

    /// Free and total device memory in bytes.
    pub fn mem_info(&self) -> Result<(usize, usize)> {
        self.ctx.mem_get_info().map_err(cuda_error("cuMemGetInfo"))
    }
}

/// Who frees a device allocation.
enum Owner {
    /// Allocated here with `cuMemAlloc`; freed on drop.
    Owned(Arc<CudaContext>),
    /// Memory of someone else (e.g. Vulkan memory imported into CUDA); the box keeps that
    /// allocation alive and releases it when dropped.
    Borrowed(#[allow(dead_code)] Box<dyn Any + Send + Sync>),
}

/// Device memory: a pointer and a length, owned or borrowed.
pub struct DeviceBuffer {
    ptr: sys::CUdeviceptr,
    len: usize,
    owner: Owner,
    ctx: Arc<CudaContext>,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("ptr", &format_args!("{:#x}", self.ptr))
            .field("len", &self.len)
            .field("owned", &matches!(self.owner, Owner::Owned(_)))
            .finish()
    }
}

impl DeviceBuffer {
    /// Allocates `len` bytes of device memory (zeroed, so a partly failed read never shows
    /// stale data of another frame).
    pub fn alloc(gpu: &Gpu, len: usize) -> Result<DeviceBuffer> {
        if len == 0 {
            return Err(GpuError::Usage(
                "a device buffer needs at least one byte".into(),
            ));
        }
        gpu.bind()?;
        let mut ptr: sys::CUdeviceptr = 0;
        cuda_check(
            // SAFETY: writes one device pointer; the context is current.
            unsafe { sys::cuMemAlloc_v2(&mut ptr, len) },
            &format!("cuMemAlloc of {len} bytes"),
        )?;
        let buf = DeviceBuffer {
            ptr,
            len,
            owner: Owner::Owned(gpu.ctx.clone()),
            ctx: gpu.ctx.clone(),
        };
        // SAFETY: `ptr` is a fresh allocation of `len` bytes.
        cuda_check(unsafe { sys::cuMemsetD8_v2(ptr, 0, len) }, "cuMemsetD8")?;
        Ok(buf)
    }

    /// Wraps device memory that belongs to someone else (an imported external allocation).
    /// `keep_alive` is dropped (releasing the memory) when the buffer is dropped.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be device memory of `gpu`'s context, valid while `keep_alive`
    /// lives, and not used by anyone else while the buffer is written.
    pub unsafe fn borrowed(
        gpu: &Gpu,
        ptr: sys::CUdeviceptr,
        len: usize,
        keep_alive: Box<dyn Any + Send + Sync>,
    ) -> DeviceBuffer {
        DeviceBuffer {
            ptr,
            len,
            owner: Owner::Borrowed(keep_alive),
            ctx: gpu.ctx.clone(),
        }
    }

    /// The device address.
    pub fn ptr(&self) -> sys::CUdeviceptr {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false (buffers hold at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The context the memory belongs to.
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Copies `data` to `offset` (synchronous; for tests and checks). The caller makes sure
    /// nothing else uses that range meanwhile.
    pub fn write(&self, offset: usize, data: &[u8]) -> Result<()> {
        self.bind_for_copy("write", offset, data.len())?;
        // SAFETY: the range is inside the allocation (checked) and `data` is readable host
        // memory of that length; the copy is synchronous.
        cuda_check(
            unsafe {
                sys::cuMemcpyHtoD_v2(self.ptr + offset as u64, data.as_ptr().cast(), data.len())
            },
            "cuMemcpyHtoD",
        )
    }

    /// Checks that `len` bytes at `offset` lie inside the buffer and binds its context, before
    /// a synchronous copy (`what` names the copy in the error).
    fn bind_for_copy(&self, what: &str, offset: usize, len: usize) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.len) {
            return Err(GpuError::Usage(format!(
                "{what} of {len} bytes at {offset} is outside a {}-byte device buffer",
                self.len
            )));
        }
        self.ctx
            .bind_to_thread()
            .map_err(cuda_error("binding the CUDA context"))
    }

    /// Copies `out.len()` bytes at `offset` back to the host (synchronous; for checks).
    pub fn read_back(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        self.bind_for_copy("read back", offset, out.len())?;
        // SAFETY: the range is inside the allocation (checked) and `out` is writable host
        // memory of that length. The synchronous copy waits for prior work in the context's
        // legacy stream; callers read back only slots whose writes have completed.
        cuda_check(
            unsafe {
                sys::cuMemcpyDtoH_v2(out.as_mut_ptr().cast(), self.ptr + offset as u64, out.len())
            },
            "cuMemcpyDtoH",
        )
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        if let Owner::Owned(ctx) = &self.owner
            && ctx.bind_to_thread().is_ok()
        {
            // SAFETY: allocated by cuMemAlloc in this context; nothing uses it any more
            // (engines hold the slot memory until their work completes).
            unsafe { sys::cuMemFree_v2(self.ptr) };
        }
    }
}

/// A [`HostBuffer`] page-locked with `cuMemHostRegister`, so that asynchronous copies from
/// it run at full PCIe speed and truly overlap. Unregistered before it is unmapped.
pub struct PinnedBuffer {
    // Field order matters for readability only: `Drop` unregisters explicitly before the
    // buffer field is dropped.
    ctx: Arc<CudaContext>,
    buf: HostBuffer,
}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedBuffer")
            .field("len", &self.buf.len())
            .finish()
    }
}

impl PinnedBuffer {
    /// Maps and pins `len` bytes (rounded up to pages) on `pages`.
    pub fn new(gpu: &Gpu, len: usize, pages: HostPages) -> Result<PinnedBuffer> {
        let buf = HostBuffer::with_pages(len, pages)
            .map_err(|e| GpuError::Usage(format!("cannot map {len} bytes of host memory: {e}")))?;
        gpu.bind()?;
        cuda_check(
            // SAFETY: the mapping is live for `buf.len()` bytes and stays so until Drop
            // unregisters it. PORTABLE: usable from every context, should a second one appear.
            unsafe {
                sys::cuMemHostRegister_v2(
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    sys::CU_MEMHOSTREGISTER_PORTABLE,
                )
            },
            &format!("cuMemHostRegister of {} bytes", buf.len()),
        )?;
        Ok(PinnedBuffer {
            ctx: gpu.ctx.clone(),
            buf,
        })
    }

    /// The underlying host buffer.
    pub fn host(&self) -> &HostBuffer {
        &self.buf
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.ctx.bind_to_thread().is_ok() {
            // SAFETY: registered in `new`; no copy from it is in flight (owners wait for
            // their events before dropping).
            unsafe { sys::cuMemHostUnregister(self.buf.as_mut_ptr().cast()) };
        }
    }
}
