//! [`HostBuffer`]: page-aligned anonymous memory for O_DIRECT reads, io_uring registered
//! buffers and CUDA pinning.
//!
//! Anonymous `mmap` rather than the heap: the mapping is page aligned and page granular, so
//! `cuMemHostRegister` and `IORING_REGISTER_BUFFERS` pin exactly these pages and nothing that
//! the allocator might hand to someone else, and it is populated up front so the first
//! measured read does not pay for page faults.

use std::io;
use std::ptr::NonNull;

/// Page-aligned, zero-filled anonymous memory, unmapped on drop.
///
/// The buffer hands out raw pointers only: engines write into it from worker threads and
/// the DMA engine, so safe slices are given out by whoever knows no write is in flight
/// (the frame ring, see [`FrameRing`](super::FrameRing)).
#[derive(Debug)]
pub struct HostBuffer {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its mapping; access to the bytes goes through raw pointers whose
// users synchronise (see the type documentation).
unsafe impl Send for HostBuffer {}
// SAFETY: as above; `&HostBuffer` only exposes the pointer and length.
unsafe impl Sync for HostBuffer {}

/// The page size the buffers are aligned to.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

impl HostBuffer {
    /// Maps `len` bytes (rounded up to whole pages, at least one page), populated.
    pub fn new(len: usize) -> io::Result<HostBuffer> {
        let page = page_size();
        let len = len
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "buffer size overflows"))?;
        // SAFETY: anonymous private mapping at an address the kernel picks; no file involved.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr = NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))?;
        Ok(HostBuffer { ptr, len })
    }

    /// First byte (page aligned).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// First byte, for writing (page aligned).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Mapped length in bytes (a multiple of the page size).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a buffer holds at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bytes.
    ///
    /// # Safety
    /// No write (a read in flight, a DMA) may target the buffer while the slice lives.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: the mapping is valid and initialised (zero-filled) for `len` bytes; the
        // caller excludes concurrent writes.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        let b = HostBuffer::new(5000).unwrap();
        assert_eq!(b.as_ptr() as usize % page_size(), 0);
        assert_eq!(b.len() % page_size(), 0);
        assert!(b.len() >= 5000);
        // SAFETY: nothing else writes to the buffer.
        unsafe {
            *b.as_mut_ptr().add(4999) = 7;
            assert!(b.as_slice()[..4999].iter().all(|&x| x == 0));
            assert_eq!(b.as_slice()[4999], 7);
        }
    }
}
