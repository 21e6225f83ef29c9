//! The frame ring: K slots, each able to hold one frame, and the state machine that keeps
//! a slot from being overwritten while it is shown and a frame from being shown before all
//! of it has arrived.

use std::sync::Arc;

use super::cuda::{DeviceBuffer, Gpu};
use super::error::{GpuError, Result};
use super::hostmem::HostBuffer;

/// Where a slot's bytes live.
#[derive(Debug)]
pub enum SlotMemory {
    /// Host memory (portable and CPU-only paths; the renderer uploads it).
    Host(HostBuffer),
    /// Device memory (staged and GPUDirect paths), owned or borrowed (see
    /// [`DeviceBuffer::borrowed`]).
    Device(DeviceBuffer),
}

impl SlotMemory {
    /// Capacity in bytes.
    pub fn len(&self) -> usize {
        match self {
            SlotMemory::Host(b) => b.len(),
            SlotMemory::Device(b) => b.len(),
        }
    }

    /// Whether the slot has no capacity (never, for slots made here).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Copies `out.len()` bytes at `offset` into `out`. Only meaningful for a slot with no
    /// write in flight (the ring's [`FrameRing::read_back`] checks that).
    fn copy_out(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        match self {
            SlotMemory::Host(b) => {
                let end = offset
                    .checked_add(out.len())
                    .filter(|&e| e <= b.len())
                    .ok_or_else(|| {
                        GpuError::Usage(format!(
                            "read back of {} bytes at {offset} is outside a {}-byte slot",
                            out.len(),
                            b.len()
                        ))
                    })?;
                // SAFETY: the ring only calls this for slots with no write in flight.
                out.copy_from_slice(unsafe { &b.as_slice()[offset..end] });
                Ok(())
            }
            SlotMemory::Device(b) => b.read_back(offset, out),
        }
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

    /// `count` host slots of `len` bytes each (page-aligned anonymous memory).
    ///
    /// The slots' total is checked against the memory this process can get first: anonymous
    /// memory is granted lazily, so too many slots would otherwise be found only when reads
    /// touch them (and the kernel kills the process).
    pub fn host(count: usize, len: usize) -> Result<FrameRing> {
        let total = (count as u64).saturating_mul(len as u64);
        crate::memory::check_available(
            || format!("--slots {count} ({count} host ring slots of {len} bytes)"),
            total,
        )
        .map_err(|e| GpuError::Usage(e.to_string()))?;
        let mut v = Vec::with_capacity(count);
        for _ in 0..count {
            v.push(SlotMemory::Host(HostBuffer::new(len).map_err(|e| {
                GpuError::Usage(format!("cannot map a {len}-byte host slot: {e}"))
            })?));
        }
        FrameRing::new(v)
    }

    /// `count` device slots of `len` bytes each on `gpu`.
    ///
    /// The slots' total is checked against the GPU's free memory first, so a slot count
    /// the GPU cannot hold is refused before thousands of allocations are tried.
    pub fn device(gpu: &Gpu, count: usize, len: usize) -> Result<FrameRing> {
        let total = (count as u64).saturating_mul(len as u64);
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
            v.push(SlotMemory::Device(DeviceBuffer::alloc(gpu, len)?));
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

    /// The bytes of a resident host slot (no copy), or `None` for device slots and slots
    /// that are free or being written.
    pub fn host_bytes(&self, slot: usize) -> Option<&[u8]> {
        match (self.state.get(slot)?, &*self.slots[slot]) {
            (SlotState::Ready(_) | SlotState::InUse(_), SlotMemory::Host(b)) => {
                // SAFETY: resident: no write is in flight, and none can start while `&self`
                // is borrowed (begin_write needs `&mut self`).
                Some(unsafe { b.as_slice() })
            }
            _ => None,
        }
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
        assert!(r.host_bytes(a).is_none());
        r.finish_write(a, true).unwrap();
        r.finish_write(b, false).unwrap();
        assert!(r.finish_write(b, true).is_err());
        assert_eq!(r.acquire(7), Some(a));
        assert!(!r.evict(7), "in use: cannot be evicted");
        assert_eq!(r.begin_write(9), Some(b), "the failed slot is free again");
        r.release(a);
        assert!(r.host_bytes(a).is_some());
        assert!(r.evict(7));
        assert_eq!(r.states()[a], SlotState::Free);
    }
}
