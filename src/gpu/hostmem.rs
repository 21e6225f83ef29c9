//! [`HostBuffer`]: page-aligned anonymous memory for O_DIRECT reads, io_uring registered
//! buffers, CUDA pinning and Vulkan host-memory imports.
//!
//! Anonymous `mmap` rather than the heap: the mapping is page aligned and page granular, so
//! `cuMemHostRegister` and `IORING_REGISTER_BUFFERS` pin exactly these pages and nothing that
//! the allocator might hand to someone else, and it is populated up front so the first
//! measured read does not pay for page faults.
//!
//! Huge pages ([`HostPages::Huge`], the default; `SUPERCELL_HOST_HUGEPAGES=0` turns them
//! off): the mapping is placed on a 2 MiB boundary and advised `MADV_HUGEPAGE` before it is
//! populated, so the kernel backs it with transparent huge pages where it has them, and the
//! CPU's copies and the devices' DMA (whose IOMMU mappings follow the pages) walk 2 MiB pages
//! instead of 4 KiB ones. Whether the kernel complied is its decision (THP may be off):
//! [`HostBuffer::huge_page_bytes`] says what it did.

use std::io;
use std::ptr::NonNull;

/// Environment variable that turns huge pages for host buffers on (`1`, the default) or off
/// (`0`).
pub const HOST_HUGEPAGES_ENV: &str = "SUPERCELL_HOST_HUGEPAGES";

/// The huge page size the mappings are aligned to (x86-64 and aarch64 with 4 KiB pages).
pub const HUGE_PAGE: usize = 2 << 20;

/// Which pages back a [`HostBuffer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostPages {
    /// The system's base pages (4 KiB), populated at map time (`MAP_POPULATE`).
    Base,
    /// Transparent huge pages where the kernel grants them: a 2 MiB aligned mapping advised
    /// `MADV_HUGEPAGE`, then populated.
    Huge,
}

impl HostPages {
    /// A value of `SUPERCELL_HOST_HUGEPAGES` (`1`/`on`/`true` or `0`/`off`/`false`; empty:
    /// huge), or an error naming the variable and its value. The binary reads the variable
    /// (docs/SETTINGS.md) and passes the choice in (`SlotLayout::with_pages`).
    pub fn parse(v: &str) -> io::Result<HostPages> {
        match v.trim().to_ascii_lowercase().as_str() {
            "" | "1" | "on" | "true" | "yes" => Ok(HostPages::Huge),
            "0" | "off" | "false" | "no" => Ok(HostPages::Base),
            _ => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{HOST_HUGEPAGES_ENV}={v:?} is not 0 or 1"),
            )),
        }
    }

    /// For reports: "huge pages" or "4 KiB pages".
    pub fn name(self) -> &'static str {
        match self {
            HostPages::Base => "base pages",
            HostPages::Huge => "huge pages",
        }
    }
}

/// Page-aligned, zero-filled anonymous memory, unmapped on drop.
///
/// The buffer hands out raw pointers only: engines write into it from worker threads and
/// the DMA engine, so safe slices are given out by whoever knows no write is in flight
/// (the frame ring, see [`FrameRing`](super::FrameRing)).
#[derive(Debug)]
pub struct HostBuffer {
    ptr: NonNull<u8>,
    /// Usable bytes (whole base pages).
    len: usize,
    /// Mapped bytes (`len`, or `len` rounded up to a huge page), unmapped on drop.
    mapped: usize,
    pages: HostPages,
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

fn overflow() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "buffer size overflows")
}

/// Maps `len` anonymous bytes (a multiple of the page size) with `flags` added, at an
/// address the kernel picks.
fn map_anonymous(len: usize, flags: libc::c_int) -> io::Result<NonNull<u8>> {
    // SAFETY: anonymous private mapping at an address the kernel picks; no file involved.
    let p = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | flags,
            -1,
            0,
        )
    };
    if p == libc::MAP_FAILED {
        return Err(io::Error::last_os_error());
    }
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::other("mmap gave null"))
}

impl HostBuffer {
    /// Maps `len` bytes (rounded up to whole pages, at least one page), populated, on huge
    /// pages where the kernel grants them (slots take their pages from their layout,
    /// `SlotLayout::pages`).
    pub fn new(len: usize) -> io::Result<HostBuffer> {
        HostBuffer::with_pages(len, HostPages::Huge)
    }

    /// Maps `len` bytes (rounded up to whole pages, at least one page), populated, on
    /// `pages`. A buffer smaller than a huge page gets base pages whatever is asked (a huge
    /// page would more than double it).
    pub fn with_pages(len: usize, pages: HostPages) -> io::Result<HostBuffer> {
        let page = page_size();
        let len = len
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(overflow)?;
        match pages {
            HostPages::Huge if len >= HUGE_PAGE => HostBuffer::map_huge(len),
            HostPages::Base | HostPages::Huge => {
                let ptr = map_anonymous(len, libc::MAP_POPULATE)?;
                Ok(HostBuffer {
                    ptr,
                    len,
                    mapped: len,
                    pages: HostPages::Base,
                })
            }
        }
    }

    /// Reserves `len` bytes of address space (rounded up to whole pages) without backing
    /// them: nothing is populated, and pages (zero) appear only where the memory is
    /// touched. For slots whose bytes live elsewhere (the host path's ring route keeps its
    /// frames on the GPU), which still need a slot memory for their layout.
    pub fn reserve(len: usize) -> io::Result<HostBuffer> {
        let len = len
            .max(1)
            .checked_next_multiple_of(page_size())
            .ok_or_else(overflow)?;
        let ptr = map_anonymous(len, libc::MAP_NORESERVE)?;
        Ok(HostBuffer {
            ptr,
            len,
            mapped: len,
            pages: HostPages::Base,
        })
    }

    /// A 2 MiB aligned mapping of `len` bytes rounded up to 2 MiB, advised huge, then
    /// populated.
    fn map_huge(len: usize) -> io::Result<HostBuffer> {
        let mapped = len
            .checked_next_multiple_of(HUGE_PAGE)
            .ok_or_else(overflow)?;
        // Map a huge page more than needed, unpopulated (address space only), and unmap the
        // slack before and after the first 2 MiB boundary.
        let reserve = mapped.checked_add(HUGE_PAGE).ok_or_else(overflow)?;
        let raw = map_anonymous(reserve, 0)?.as_ptr() as usize;
        let start = raw.next_multiple_of(HUGE_PAGE);
        let (head, tail) = (start - raw, reserve - (start - raw) - mapped);
        // SAFETY: both ranges lie inside the mapping just made and outside `start..+mapped`.
        unsafe {
            if head > 0 {
                libc::munmap(raw as *mut libc::c_void, head);
            }
            if tail > 0 {
                libc::munmap((start + mapped) as *mut libc::c_void, tail);
            }
        }
        let ptr = NonNull::new(start as *mut u8).ok_or_else(|| io::Error::other("null"))?;
        let buf = HostBuffer {
            ptr,
            len,
            mapped,
            pages: HostPages::Huge,
        };
        // SAFETY: advice on this buffer's own mapping. A kernel without THP refuses it
        // (EINVAL); the buffer then simply has base pages.
        unsafe { libc::madvise(buf.ptr.as_ptr().cast(), buf.mapped, libc::MADV_HUGEPAGE) };
        buf.populate();
        Ok(buf)
    }

    /// Faults every page in (written, so each is backed by its own zeroed page):
    /// `MADV_POPULATE_WRITE` where the kernel has it (5.14+), else a write to every page.
    fn populate(&self) {
        // SAFETY: the range is this buffer's own mapping, readable and writable.
        let r = unsafe {
            libc::madvise(
                self.ptr.as_ptr().cast(),
                self.mapped,
                libc::MADV_POPULATE_WRITE,
            )
        };
        if r == 0 {
            return;
        }
        let page = page_size();
        for off in (0..self.mapped).step_by(page) {
            // SAFETY: inside the mapping; nothing else uses the buffer yet. A volatile write
            // of the zero already there, so the compiler keeps it and the bytes stay zero.
            unsafe { std::ptr::write_volatile(self.ptr.as_ptr().add(off), 0) };
        }
    }

    /// The pages asked for the mapping (see [`HostBuffer::huge_page_bytes`] for what the
    /// kernel gave).
    pub fn pages(&self) -> HostPages {
        self.pages
    }

    /// Bytes of the mapping the kernel backs with huge pages now (`AnonHugePages` of the
    /// mapping in `/proc/self/smaps`); `None` where that cannot be read.
    pub fn huge_page_bytes(&self) -> Option<u64> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let (lo, hi) = (
            self.ptr.as_ptr() as usize,
            self.ptr.as_ptr() as usize + self.mapped,
        );
        let mut inside = false;
        let mut total = 0u64;
        for line in smaps.lines() {
            // A mapping's header: "start-end perms offset dev inode [path]".
            if let Some((range, _)) = line.split_once(' ')
                && let Some((s, e)) = range.split_once('-')
                && let (Ok(s), Ok(e)) = (usize::from_str_radix(s, 16), usize::from_str_radix(e, 16))
            {
                inside = s >= lo && e <= hi;
                continue;
            }
            if inside && let Some(v) = line.strip_prefix("AnonHugePages:") {
                let kib: u64 = v.trim().trim_end_matches("kB").trim().parse().ok()?;
                total += kib * 1024;
            }
        }
        Some(total)
    }

    /// First byte (page aligned; 2 MiB aligned with huge pages).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr.as_ptr()
    }

    /// First byte, for writing (page aligned; 2 MiB aligned with huge pages).
    pub fn as_mut_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Usable length in bytes (a multiple of the page size).
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
        // SAFETY: unmaps exactly the mapping made in `with_pages`.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.mapped) };
    }
}

/// What the host buffers of a run are on, for reports: the pages asked for, and how many of
/// `buffers`' bytes the kernel backs with huge pages.
pub fn describe_pages<'a>(buffers: impl IntoIterator<Item = &'a HostBuffer>) -> String {
    let mut asked = None;
    let (mut bytes, mut huge, mut known) = (0u64, 0u64, true);
    for b in buffers {
        if asked != Some(HostPages::Huge) {
            asked = Some(b.pages());
        }
        bytes += b.len() as u64;
        match (b.pages(), b.huge_page_bytes()) {
            (HostPages::Huge, Some(h)) => huge += h.min(b.len() as u64),
            (HostPages::Huge, None) => known = false,
            (HostPages::Base, _) => {}
        }
    }
    let gib = |b: u64| {
        if bytes >= 1 << 30 {
            format!("{:.2} GiB", b as f64 / (1u64 << 30) as f64)
        } else {
            format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
        }
    };
    match asked {
        None => "no host buffers".into(),
        Some(HostPages::Base) => format!(
            "host memory on 4 KiB pages ({HOST_HUGEPAGES_ENV}=0, or buffers under 2 MiB), {}",
            gib(bytes)
        ),
        Some(HostPages::Huge) if known => format!(
            "host memory on huge pages ({HOST_HUGEPAGES_ENV}=1): {} of {} in 2 MiB pages",
            gib(huge),
            gib(bytes)
        ),
        Some(HostPages::Huge) => format!(
            "host memory on huge pages ({HOST_HUGEPAGES_ENV}=1), {} (how many the kernel gave is unknown)",
            gib(bytes)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_writable() {
        for pages in [HostPages::Base, HostPages::Huge] {
            let b = HostBuffer::with_pages(5000, pages).unwrap();
            assert_eq!(b.as_ptr() as usize % page_size(), 0);
            assert_eq!(b.len() % page_size(), 0);
            assert!(b.len() >= 5000);
            assert!(
                b.len() < 5000 + page_size(),
                "{pages:?}: len is page-rounded"
            );
            assert_eq!(b.pages(), HostPages::Base, "no huge page for 5000 bytes");
            // SAFETY: nothing else writes to the buffer.
            unsafe {
                *b.as_mut_ptr().add(4999) = 7;
                assert!(b.as_slice()[..4999].iter().all(|&x| x == 0));
                assert_eq!(b.as_slice()[4999], 7);
            }
        }
    }

    /// Huge-page buffers start on a 2 MiB boundary, are zero and writable to their last
    /// byte, and where the kernel has transparent huge pages (not "never"), are backed by
    /// them; base-page buffers are not.
    #[test]
    fn huge_page_buffers_are_2_mib_aligned_and_backed_by_huge_pages() {
        let len = 3 * HUGE_PAGE + 4096;
        let b = HostBuffer::with_pages(len, HostPages::Huge).unwrap();
        assert_eq!(b.as_ptr() as usize % HUGE_PAGE, 0);
        assert_eq!(b.len(), len);
        // SAFETY: nothing else writes to the buffer.
        unsafe {
            *b.as_mut_ptr().add(len - 1) = 9;
            assert!(b.as_slice()[..len - 1].iter().all(|&x| x == 0));
        }
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .unwrap_or_default();
        let huge = b.huge_page_bytes();
        eprintln!("THP {thp:?}: {huge:?} bytes in huge pages");
        if thp.contains("[always]") || thp.contains("[madvise]") {
            assert!(
                huge.is_some_and(|h| h >= HUGE_PAGE as u64),
                "THP is on but the buffer has {huge:?} bytes in huge pages"
            );
        }
        let base = HostBuffer::with_pages(len, HostPages::Base).unwrap();
        if thp.contains("[madvise]") {
            assert_eq!(
                base.huge_page_bytes(),
                Some(0),
                "not advised, no huge pages"
            );
        }
        assert!(
            describe_pages([&b]).contains("huge pages"),
            "{}",
            describe_pages([&b])
        );
        assert!(describe_pages([&base]).contains("4 KiB"));
    }

    #[test]
    fn the_knob_reads_0_and_1_and_refuses_the_rest() {
        assert_eq!(HostPages::parse("0").unwrap(), HostPages::Base);
        assert_eq!(HostPages::parse("off").unwrap(), HostPages::Base);
        assert_eq!(HostPages::parse("1").unwrap(), HostPages::Huge);
        assert_eq!(
            HostPages::parse("").unwrap(),
            HostPages::Huge,
            "default: on"
        );
        let e = HostPages::parse("maybe").unwrap_err().to_string();
        assert!(e.contains(HOST_HUGEPAGES_ENV) && e.contains("maybe"), "{e}");
    }
}
