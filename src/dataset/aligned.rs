//! [`AlignedBuf`]: a heap byte buffer whose start and capacity are multiples of 4 KiB.
//!
//! O_DIRECT reads, cuFile and pinned-memory registration all want page-aligned host
//! memory, and a frame's slot image is read into exactly such a buffer. `Vec<u8>` gives
//! no alignment guarantee, so this owns its allocation through `std::alloc` with a
//! 4096-byte `Layout` alignment.

use std::alloc::{self, Layout};
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::ptr::{self, NonNull};

use super::ALIGN;
use crate::memory::{self, MemoryError};

/// A growable, zero-initialised byte buffer whose pointer and capacity are multiples of
/// [`ALIGN`] (4 KiB).
///
/// The length can be any value up to the capacity; the capacity is always rounded up to
/// 4 KiB so that an aligned read of the last partial page stays inside the allocation.
/// Every byte of the allocation is initialised (allocated zeroed), so growing the length
/// never exposes uninitialised memory.
pub struct AlignedBuf {
    ptr: NonNull<u8>,
    len: usize,
    cap: usize,
}

// SAFETY: AlignedBuf uniquely owns its allocation (like Vec<u8>); no interior mutability.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]`.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// An empty buffer that owns no allocation.
    pub fn new() -> AlignedBuf {
        AlignedBuf {
            // An aligned, non-null dangling pointer: `as_ptr()` of an empty buffer is still
            // 4 KiB aligned, and a zero-length slice from it is valid.
            ptr: NonNull::new(ptr::without_provenance_mut::<u8>(ALIGN as usize))
                .expect("ALIGN is non-zero"),
            len: 0,
            cap: 0,
        }
    }

    /// A buffer of `len` zero bytes.
    ///
    /// # Panics
    /// Panics if `len` rounded up to 4 KiB overflows `isize` (as `Vec` does), and aborts
    /// on allocation failure.
    pub fn zeroed(len: usize) -> AlignedBuf {
        let mut b = AlignedBuf::new();
        b.resize(len);
        b
    }

    /// Number of bytes in the buffer.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer holds no bytes.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes allocated (a multiple of 4 KiB).
    pub fn capacity(&self) -> usize {
        self.cap
    }

    /// Pointer to the first byte; always 4 KiB aligned.
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// Mutable pointer to the first byte; always 4 KiB aligned.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Sets the length to `len`. Bytes up to the old length are kept; new bytes are zero
    /// when the buffer grows past its capacity, and otherwise hold whatever the buffer
    /// held there before (the buffer is reused for reads that overwrite every byte, so
    /// clearing would be wasted work).
    ///
    /// # Panics
    /// Panics if `len` rounded up to 4 KiB overflows `isize`.
    pub fn resize(&mut self, len: usize) {
        if len > self.cap {
            let layout = Self::layout_for(len).expect("AlignedBuf capacity overflow");
            // SAFETY: layout has non-zero size (len > cap >= 0, so its size is >= 4096).
            let raw = unsafe { alloc::alloc_zeroed(layout) };
            let Some(new_ptr) = NonNull::new(raw) else {
                alloc::handle_alloc_error(layout)
            };
            self.adopt(new_ptr, layout.size());
        }
        self.len = len;
    }

    /// [`resize`](Self::resize) for a length that comes from input: growing checks first
    /// that this process can get the memory (see [`crate::memory`]), and an allocation
    /// that fails anyway is an error too. `what` names the request in the error.
    pub fn try_resize(
        &mut self,
        len: usize,
        what: impl FnOnce() -> String,
    ) -> Result<(), MemoryError> {
        if len > self.cap {
            let mut what = Some(what);
            let mut name = || what.take().map_or_else(String::new, |f| f());
            let fail = |name: &mut dyn FnMut() -> String| MemoryError {
                what: name(),
                requested: len as u64,
                available: memory::available(),
            };
            memory::check_available(&mut name, len as u64)?;
            let Some(layout) = Self::layout_for(len) else {
                return Err(fail(&mut name));
            };
            // SAFETY: layout has non-zero size (len > cap >= 0, so its size is >= 4096).
            let raw = unsafe { alloc::alloc_zeroed(layout) };
            let Some(new_ptr) = NonNull::new(raw) else {
                return Err(fail(&mut name));
            };
            self.adopt(new_ptr, layout.size());
        }
        self.len = len;
        Ok(())
    }

    /// The layout of a buffer of capacity `len` rounded up to 4 KiB, or `None` past
    /// `isize::MAX`.
    fn layout_for(len: usize) -> Option<Layout> {
        let cap = len
            .checked_next_multiple_of(ALIGN as usize)
            .filter(|&c| c <= isize::MAX as usize)?;
        Layout::from_size_align(cap, ALIGN as usize).ok()
    }

    /// Moves the contents into the zeroed allocation `new_ptr` of `new_cap` bytes and frees
    /// the old one.
    fn adopt(&mut self, new_ptr: NonNull<u8>, new_cap: usize) {
        if self.cap > 0 {
            // SAFETY: both regions are valid for `self.len` bytes (len <= cap < new_cap)
            // and do not overlap.
            unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr(), new_ptr.as_ptr(), self.len) };
            // SAFETY: ptr was allocated with this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout()) };
        }
        self.ptr = new_ptr;
        self.cap = new_cap;
    }

    fn layout(&self) -> Layout {
        Layout::from_size_align(self.cap, ALIGN as usize).expect("checked at allocation")
    }
}

impl Default for AlignedBuf {
    fn default() -> Self {
        AlignedBuf::new()
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if self.cap > 0 {
            // SAFETY: allocated in `resize` with exactly this layout.
            unsafe { alloc::dealloc(self.ptr.as_ptr(), self.layout()) };
        }
    }
}

impl Deref for AlignedBuf {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        // SAFETY: ptr is valid for `cap >= len` initialised bytes (allocated zeroed), or
        // dangling-but-aligned with len 0.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl DerefMut for AlignedBuf {
    fn deref_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `deref`, and `&mut self` guarantees unique access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Clone for AlignedBuf {
    fn clone(&self) -> Self {
        let mut b = AlignedBuf::zeroed(self.len);
        b.copy_from_slice(self);
        b
    }
}

impl fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AlignedBuf")
            .field("len", &self.len)
            .field("cap", &self.cap)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_and_zeroed() {
        let mut b = AlignedBuf::new();
        assert!(b.is_empty());
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(&*b, &[] as &[u8]);
        b.resize(10);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(b.capacity(), 4096);
        assert!(b.iter().all(|&x| x == 0));
        b[..3].copy_from_slice(&[1, 2, 3]);
        b.resize(5000);
        assert_eq!(b.capacity(), 8192);
        assert_eq!(b.as_ptr() as usize % 4096, 0);
        assert_eq!(&b[..4], &[1, 2, 3, 0]);
        assert!(b[10..].iter().all(|&x| x == 0));
        b.resize(2);
        assert_eq!(&*b, &[1, 2]);
        let c = b.clone();
        assert_eq!(&*c, &[1, 2]);
        assert_eq!(c.as_ptr() as usize % 4096, 0);
    }

    #[test]
    fn try_resize_refuses_what_the_machine_cannot_give() {
        let mut b = AlignedBuf::new();
        b.try_resize(5000, || "small".into()).unwrap();
        assert_eq!(b.capacity(), 8192);
        b[0] = 7;
        let e = b
            .try_resize(isize::MAX as usize, || "frame 0's slot image".into())
            .unwrap_err();
        assert!(
            e.to_string().starts_with("frame 0's slot image needs"),
            "{e}"
        );
        // The buffer is left as it was.
        assert_eq!((b.len(), b.capacity(), b[0]), (5000, 8192, 7));
    }
}
