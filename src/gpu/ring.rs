//! The frame ring: K slots, each able to hold one frame, and the state machine that keeps
//! a slot from being overwritten while it is shown and a frame from being shown before all
//! of it has arrived.
//!
//! A slot is an ordered list of parts ([`SlotMemory`]), each a separate allocation: every
//! part holds exactly [`SlotLayout::part_bytes`] bytes except the last, which holds the
//! rest. A frame's slot offset `o` lives in part `o / part_bytes` at `o % part_bytes`
//! ([`SlotLayout::locate`]). Graphics APIs cap one buffer and one storage binding (about
//! 4 GiB on current GPUs), so a frame larger than that spans several parts; a frame that
//! fits one part is simply the one-part case of the same layout.

use std::sync::Arc;

use super::cuda::{DeviceBuffer, Gpu};
use super::error::{GpuError, Result};
use super::hostmem::{HostBuffer, HostPages};

/// What every part size of a multi-part slot must be a multiple of: reads are 4 KiB
/// aligned (O_DIRECT), so a read split at a part boundary stays aligned on both sides.
pub const PART_ALIGN: u64 = 4096;

/// The smallest part size a run may force (tests force small parts so small frames span
/// several): 64 KiB.
pub const MIN_PART_BYTES: u64 = 64 << 10;

/// How one slot is cut into parts: `len` bytes in parts of `part_bytes` (the last part holds
/// the rest). Two layouts are equal where they cut slots alike, whatever their pages.
#[derive(Clone, Copy, Debug)]
pub struct SlotLayout {
    len: u64,
    part_bytes: u64,
    /// Which pages back the slot's parts in host memory.
    pages: HostPages,
}

impl PartialEq for SlotLayout {
    fn eq(&self, other: &SlotLayout) -> bool {
        (self.len, self.part_bytes) == (other.len, other.part_bytes)
    }
}

impl Eq for SlotLayout {}

/// One piece of a slot range that lies inside a single part ([`SlotLayout::pieces`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartRange {
    /// The part.
    pub part: usize,
    /// Offset inside the part.
    pub offset: u64,
    /// Offset inside the slot (the frame's own offset of the piece's first byte).
    pub at: u64,
    /// Bytes.
    pub len: u64,
}

impl SlotLayout {
    /// `len` bytes in parts of `part_bytes`. A layout of more than one part needs a part
    /// size that is a multiple of [`PART_ALIGN`].
    pub fn new(len: u64, part_bytes: u64) -> Result<SlotLayout> {
        if len == 0 || part_bytes == 0 {
            return Err(GpuError::Usage(format!(
                "a slot of {len} bytes in parts of {part_bytes} bytes: both must be positive"
            )));
        }
        if len > part_bytes && !part_bytes.is_multiple_of(PART_ALIGN) {
            return Err(GpuError::Usage(format!(
                "a slot of {len} bytes cannot be cut into parts of {part_bytes} bytes: a part \
                 size must be a multiple of {PART_ALIGN} bytes"
            )));
        }
        Ok(SlotLayout {
            len,
            part_bytes,
            pages: HostPages::Huge,
        })
    }

    /// The layout with its host parts on `pages` (huge pages unless told otherwise:
    /// `IngestTuning::host_pages`).
    pub fn with_pages(self, pages: HostPages) -> SlotLayout {
        SlotLayout { pages, ..self }
    }

    /// Which pages back the slot's parts in host memory.
    pub fn pages(&self) -> HostPages {
        self.pages
    }

    /// `len` bytes in one part.
    pub fn whole(len: u64) -> SlotLayout {
        let len = len.max(1);
        SlotLayout {
            len,
            part_bytes: len,
            pages: HostPages::Huge,
        }
    }

    /// Bytes of the slot.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false (a layout holds at least one byte).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of every part but the last.
    pub fn part_bytes(&self) -> u64 {
        self.part_bytes
    }

    /// Number of parts.
    pub fn parts(&self) -> usize {
        self.len.div_ceil(self.part_bytes) as usize
    }

    /// Bytes of part `i` (0 past the last part).
    pub fn part_len(&self, i: usize) -> u64 {
        let start = (i as u64).saturating_mul(self.part_bytes);
        self.len.saturating_sub(start).min(self.part_bytes)
    }

    /// The part holding slot offset `offset`, and the offset inside it.
    pub fn locate(&self, offset: u64) -> (usize, u64) {
        (
            (offset / self.part_bytes) as usize,
            offset % self.part_bytes,
        )
    }

    /// The slot range `at..at + len` cut at part boundaries, in slot order (an empty range
    /// gives no pieces). The caller checks that the range lies inside the slot.
    pub fn pieces(&self, at: u64, len: u64) -> impl Iterator<Item = PartRange> + use<> {
        let part_bytes = self.part_bytes;
        let end = at.saturating_add(len);
        let mut pos = at;
        std::iter::from_fn(move || {
            if pos >= end {
                return None;
            }
            let (part, offset) = ((pos / part_bytes) as usize, pos % part_bytes);
            let n = (part_bytes - offset).min(end - pos);
            let r = PartRange {
                part,
                offset,
                at: pos,
                len: n,
            };
            pos += n;
            Some(r)
        })
    }
}

impl From<usize> for SlotLayout {
    /// A one-part slot of that many bytes.
    fn from(len: usize) -> SlotLayout {
        SlotLayout::whole(len as u64)
    }
}

/// Where one part of a slot lives.
#[derive(Debug)]
pub enum PartMemory {
    /// Host memory (portable and CPU-only paths; the renderer uploads it).
    Host(HostBuffer),
    /// Device memory (staged and GPUDirect paths), owned or borrowed (see
    /// [`DeviceBuffer::borrowed`]).
    Device(DeviceBuffer),
}

impl PartMemory {
    /// Capacity in bytes.
    pub fn len(&self) -> usize {
        match self {
            PartMemory::Host(b) => b.len(),
            PartMemory::Device(b) => b.len(),
        }
    }

    /// Whether the part has no capacity (never, for parts made here).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `out.len()` bytes at `offset` of this part into `out`.
    fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        match self {
            PartMemory::Host(b) => {
                let end = offset
                    .checked_add(out.len())
                    .filter(|&e| e <= b.len())
                    .ok_or_else(|| {
                        GpuError::Usage(format!(
                            "read back of {} bytes at {offset} is outside a {}-byte part",
                            out.len(),
                            b.len()
                        ))
                    })?;
                // SAFETY: the ring only calls this for slots with no write in flight.
                out.copy_from_slice(unsafe { &b.as_slice()[offset..end] });
                Ok(())
            }
            PartMemory::Device(b) => b.read_back(offset, out),
        }
    }
}

/// A slot's memory: its parts, in order (see the module documentation). All parts are of one
/// kind, host or device.
#[derive(Debug)]
pub struct SlotMemory {
    parts: Vec<PartMemory>,
    layout: SlotLayout,
}

impl SlotMemory {
    /// A slot over `parts` (e.g. imported external allocations), each of `part_bytes` bytes
    /// but the last, which may be shorter; all host or all device memory.
    pub fn new(parts: Vec<PartMemory>, part_bytes: u64) -> Result<SlotMemory> {
        let len = parts.iter().map(|p| p.len() as u64).sum::<u64>();
        let layout = SlotLayout::new(len, part_bytes)?;
        let n = parts.len();
        if n != layout.parts() {
            return Err(GpuError::Usage(format!(
                "{n} parts of {len} bytes in all do not make a slot of {} parts of {part_bytes} bytes",
                layout.parts()
            )));
        }
        for (i, p) in parts.iter().enumerate() {
            if p.len() as u64 != layout.part_len(i) {
                return Err(GpuError::Usage(format!(
                    "part {i} of a slot holds {} bytes, not {}",
                    p.len(),
                    layout.part_len(i)
                )));
            }
        }
        if parts
            .iter()
            .any(|p| matches!(p, PartMemory::Host(_)) != matches!(parts[0], PartMemory::Host(_)))
        {
            return Err(GpuError::Usage(
                "a slot's parts must all be host or all be device memory".into(),
            ));
        }
        Ok(SlotMemory { parts, layout })
    }

    /// A host slot of `layout` (page-aligned anonymous memory, one mapping per part).
    pub fn host(layout: SlotLayout) -> Result<SlotMemory> {
        let parts = (0..layout.parts())
            .map(|i| {
                let n = layout.part_len(i) as usize;
                HostBuffer::with_pages(n, layout.pages())
                    .map(PartMemory::Host)
                    .map_err(|e| {
                        GpuError::Usage(format!("cannot map a {n}-byte host slot part: {e}"))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        SlotMemory::new(parts, layout.part_bytes())
    }

    /// A device slot of `layout` on `gpu` (one allocation per part).
    pub fn device(gpu: &Gpu, layout: SlotLayout) -> Result<SlotMemory> {
        let parts = (0..layout.parts())
            .map(|i| DeviceBuffer::alloc(gpu, layout.part_len(i) as usize).map(PartMemory::Device))
            .collect::<Result<Vec<_>>>()?;
        SlotMemory::new(parts, layout.part_bytes())
    }

    /// Capacity in bytes (all parts).
    pub fn len(&self) -> usize {
        self.layout.len() as usize
    }

    /// Whether the slot has no capacity (never, for slots made here).
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// How the slot is cut into parts.
    pub fn layout(&self) -> SlotLayout {
        self.layout
    }

    /// The parts, in order.
    pub fn parts(&self) -> &[PartMemory] {
        &self.parts
    }

    /// Whether the slot is host memory.
    pub fn is_host(&self) -> bool {
        matches!(self.parts.first(), Some(PartMemory::Host(_)))
    }

    /// Copies `out.len()` bytes at slot offset `offset` into `out`, across parts. Only
    /// meaningful for a slot with no write in flight (the ring's [`FrameRing::read_back`]
    /// checks that).
    fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        let end = (offset as u64).checked_add(out.len() as u64);
        if end.is_none_or(|e| e > self.layout.len()) {
            return Err(GpuError::Usage(format!(
                "read back of {} bytes at {offset} is outside a {}-byte slot",
                out.len(),
                self.layout.len()
            )));
        }
        for r in self.layout.pieces(offset as u64, out.len() as u64) {
            let from = (r.at - offset as u64) as usize;
            self.parts[r.part]
                .copy_out(r.offset as usize, &mut out[from..from + r.len as usize])?;
        }
        Ok(())
    }
}

/// A slot's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SlotState {
    /// Holds nothing anyone wants; may be written.
    Free,
    /// An engine is writing this frame into it.
    Writing(u32),
    /// Holds all of this frame; may be shown or evicted.
    Ready(u32),
    /// The renderer is using this frame; not writable until released.
    InUse(u32),
}

/// K slots and their states. Slot memory is shared (`Arc`) with the engine that writes it,
/// so it outlives every read in flight.
#[derive(Debug)]
pub struct FrameRing {
    slots: Vec<Arc<SlotMemory>>,
    state: Vec<SlotState>,
}

impl FrameRing {
    /// A ring over the given slot memories (e.g. imported external allocations).
    pub fn new(memories: Vec<SlotMemory>) -> Result<FrameRing> {
        if memories.is_empty() {
            return Err(GpuError::Usage(
                "a frame ring needs at least one slot".into(),
            ));
        }
        let state = vec![SlotState::Free; memories.len()];
        Ok(FrameRing {
            slots: memories.into_iter().map(Arc::new).collect(),
            state,
        })
    }

    /// `count` host slots of `layout` each (page-aligned anonymous memory, one mapping per
    /// part; a plain length is a one-part slot).
    ///
    /// The slots' total is checked against the memory this process can get first: anonymous
    /// memory is granted lazily, so too many slots would otherwise be found only when reads
    /// touch them (and the kernel kills the process).
    pub fn host(count: usize, layout: impl Into<SlotLayout>) -> Result<FrameRing> {
        let layout = layout.into();
        let len = layout.len();
        let total = (count as u64).saturating_mul(len);
        crate::memory::check_available(
            || format!("--slots {count} ({count} host ring slots of {len} bytes)"),
            total,
        )
        .map_err(|e| GpuError::Usage(e.to_string()))?;
        let mut v = Vec::with_capacity(count);
        for _ in 0..count {
            v.push(SlotMemory::host(layout)?);
        }
        FrameRing::new(v)
    }

    /// `count` device slots of `layout` each on `gpu` (one allocation per part; a plain
    /// length is a one-part slot).
    ///
    /// The slots' total is checked against the GPU's free memory first, so a slot count
    /// the GPU cannot hold is refused before thousands of allocations are tried.
    pub fn device(gpu: &Gpu, count: usize, layout: impl Into<SlotLayout>) -> Result<FrameRing> {
        let layout = layout.into();
        let len = layout.len();
        let total = (count as u64).saturating_mul(len);
        if let Ok((free, _)) = gpu.mem_info()
            && total > free as u64
        {
            return Err(GpuError::Usage(format!(
                "--slots {count}: {count} device ring slots of {len} bytes each need {total} bytes ({}), but GPU {} has {free} bytes ({}) free",
                crate::memory::human(total),
                gpu.ordinal,
                crate::memory::human(free as u64)
            )));
        }
        let mut v = Vec::with_capacity(count);
        for _ in 0..count {
            v.push(SlotMemory::device(gpu, layout)?);
        }
        FrameRing::new(v)
    }

    /// Number of slots.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Always false (a ring has at least one slot).
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The smallest slot capacity.
    pub fn slot_len(&self) -> usize {
        self.slots.iter().map(|s| s.len()).min().unwrap_or(0)
    }

    /// Slot memories, for the engine that writes them.
    pub fn memories(&self) -> Vec<Arc<SlotMemory>> {
        self.slots.clone()
    }

    /// Slot `slot`'s memory.
    pub fn memory(&self, slot: usize) -> Option<&Arc<SlotMemory>> {
        self.slots.get(slot)
    }

    /// Slot states.
    pub fn states(&self) -> &[SlotState] {
        &self.state
    }

    /// Takes a free slot for writing `frame`, or `None` when every slot is busy.
    pub fn begin_write(&mut self, frame: u32) -> Option<usize> {
        let i = self.state.iter().position(|s| *s == SlotState::Free)?;
        self.state[i] = SlotState::Writing(frame);
        Some(i)
    }

    /// The write into `slot` finished: the frame is ready when `ok`, else the slot is free
    /// again (a frame with a failed read is never shown).
    pub fn finish_write(&mut self, slot: usize, ok: bool) -> Result<()> {
        match self.state.get(slot).copied() {
            Some(SlotState::Writing(f)) => {
                self.state[slot] = if ok {
                    SlotState::Ready(f)
                } else {
                    SlotState::Free
                };
                Ok(())
            }
            other => Err(GpuError::Usage(format!(
                "finish_write: slot {slot} is {other:?}, not being written"
            ))),
        }
    }

    /// The slot holding all of `frame`, if any.
    pub fn ready_slot(&self, frame: u32) -> Option<usize> {
        self.state
            .iter()
            .position(|s| matches!(s, SlotState::Ready(f) | SlotState::InUse(f) if *f == frame))
    }

    /// The renderer takes `frame`: its slot cannot be rewritten until [`release`]d.
    ///
    /// [`release`]: FrameRing::release
    pub fn acquire(&mut self, frame: u32) -> Option<usize> {
        let i = self.ready_slot(frame)?;
        self.state[i] = SlotState::InUse(frame);
        Some(i)
    }

    /// The renderer is done with `slot`; the frame stays resident (and can be shown again).
    pub fn release(&mut self, slot: usize) {
        if let Some(SlotState::InUse(f)) = self.state.get(slot).copied() {
            self.state[slot] = SlotState::Ready(f);
        }
    }

    /// Frees the slot of `frame` if it is resident and not in use; returns whether it did.
    pub fn evict(&mut self, frame: u32) -> bool {
        match self
            .state
            .iter()
            .position(|s| *s == SlotState::Ready(frame))
        {
            Some(i) => {
                self.state[i] = SlotState::Free;
                true
            }
            None => false,
        }
    }

    /// Copies bytes of a resident slot (Ready or InUse) to the host: for checks and for
    /// handing host frames to the renderer.
    pub fn read_back(&self, slot: usize, offset: usize, out: &mut [u8]) -> Result<()> {
        match self.state.get(slot) {
            Some(SlotState::Ready(_) | SlotState::InUse(_)) => {
                self.slots[slot].copy_out(offset, out)
            }
            other => Err(GpuError::Usage(format!(
                "slot {slot} is {other:?}: only resident frames can be read"
            ))),
        }
    }

    /// The parts of a resident host slot, in order (no copy), or `None` for device slots
    /// and slots that are free or being written.
    pub fn host_parts(&self, slot: usize) -> Option<Vec<&[u8]>> {
        let mem = &*self.slots[slot];
        match self.state.get(slot)? {
            SlotState::Ready(_) | SlotState::InUse(_) if mem.is_host() => Some(
                mem.parts()
                    .iter()
                    .map(|p| match p {
                        // SAFETY: resident: no write is in flight, and none can start while
                        // `&self` is borrowed (begin_write needs `&mut self`).
                        PartMemory::Host(b) => unsafe { b.as_slice() },
                        PartMemory::Device(_) => &[][..],
                    })
                    .collect(),
            ),
            _ => None,
        }
    }

    /// The first `len` bytes of a resident slot, copied out of its parts (for checks).
    pub fn frame_bytes(&self, slot: usize, len: usize) -> Result<Vec<u8>> {
        let mut out = vec![0u8; len];
        self.read_back(slot, 0, &mut out)?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cycle_through_their_states() {
        let mut r = FrameRing::host(2, 4096).unwrap();
        let a = r.begin_write(7).unwrap();
        let b = r.begin_write(8).unwrap();
        assert_eq!(r.begin_write(9), None, "both slots busy");
        assert_eq!(r.ready_slot(7), None, "never shown half-written");
        assert!(r.host_parts(a).is_none());
        r.finish_write(a, true).unwrap();
        r.finish_write(b, false).unwrap();
        assert!(r.finish_write(b, true).is_err());
        assert_eq!(r.acquire(7), Some(a));
        assert!(!r.evict(7), "in use: cannot be evicted");
        assert_eq!(r.begin_write(9), Some(b), "the failed slot is free again");
        r.release(a);
        assert!(r.host_parts(a).is_some());
        assert!(r.evict(7));
        assert_eq!(r.states()[a], SlotState::Free);
    }
}

#[cfg(test)]
mod part_tests {
    use super::*;

    #[test]
    fn layout_cuts_ranges_at_part_boundaries() {
        let l = SlotLayout::new(10 * 4096 + 100, 4 * 4096).unwrap();
        assert_eq!(l.parts(), 3);
        assert_eq!(
            (0..4).map(|i| l.part_len(i)).collect::<Vec<_>>(),
            [4 * 4096, 4 * 4096, 2 * 4096 + 100, 0]
        );
        assert_eq!(l.locate(4 * 4096), (1, 0));
        assert_eq!(l.locate(9 * 4096 + 5), (2, 4096 + 5));
        let p: Vec<PartRange> = l.pieces(3 * 4096, 6 * 4096).collect();
        assert_eq!(
            p,
            [
                PartRange {
                    part: 0,
                    offset: 3 * 4096,
                    at: 3 * 4096,
                    len: 4096
                },
                PartRange {
                    part: 1,
                    offset: 0,
                    at: 4 * 4096,
                    len: 4 * 4096
                },
                PartRange {
                    part: 2,
                    offset: 0,
                    at: 8 * 4096,
                    len: 4096
                },
            ]
        );
        assert_eq!(l.pieces(5, 0).count(), 0);
        assert!(SlotLayout::new(3 * 4096, 4000).is_err(), "unaligned parts");
        assert_eq!(SlotLayout::new(4000, 4000).unwrap().parts(), 1);
        assert_eq!(SlotLayout::whole(12345).parts(), 1);
    }

    #[test]
    fn a_multi_part_host_slot_reads_back_across_parts() {
        let layout = SlotLayout::new(5 * 4096, 2 * 4096).unwrap();
        let mut ring = FrameRing::host(1, layout).unwrap();
        let mem = ring.memory(0).unwrap().clone();
        assert_eq!(mem.parts().len(), 3);
        assert_eq!(mem.len(), 5 * 4096);
        for (i, p) in mem.parts().iter().enumerate() {
            let PartMemory::Host(b) = p else {
                panic!("host part")
            };
            // SAFETY: the slot is free: nothing else writes it.
            unsafe { std::ptr::write_bytes(b.as_mut_ptr(), i as u8 + 1, b.len()) };
        }
        let s = ring.begin_write(0).unwrap();
        ring.finish_write(s, true).unwrap();
        let mut out = vec![0u8; 3 * 4096];
        ring.read_back(s, 4096, &mut out).unwrap();
        assert!(out[..4096].iter().all(|&b| b == 1));
        assert!(out[4096..3 * 4096].iter().all(|&b| b == 2));
        assert!(
            ring.read_back(s, 4 * 4096, &mut out).is_err(),
            "past the end"
        );
        let parts = ring.host_parts(s).unwrap();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8192, 8192, 4096]
        );
        assert_eq!(ring.frame_bytes(s, 5 * 4096).unwrap(), parts.concat());
    }
}
