//! The host path's ring route (`--host-copy ring`): reads land in a small ring of host
//! buffers imported into Vulkan (`VK_EXT_external_memory_host`), and the GPU copies each
//! landed buffer into its slot's device buffers; a buffer is reused once its copy has
//! completed. Host memory is the ring alone (threads × queue depth × I/O size, twice over,
//! at most [`RING_MAX_BYTES`]), so it stays small and hot whatever the frame size, where the
//! imported route reads whole frames into host slots.
//!
//! [`GpuBounce`] is the [`BounceCopier`] the engine drives: the engine's coordinator thread
//! gathers a copy per landed read, submits the copies of one turn of its loop as one command
//! buffer, and learns from the queue's work-done callbacks which buffers are free again.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::gpu::{HostImporter, SlotLayout, SlotMemory};
use crate::ingest::BounceCopier;

/// The most host memory the ring takes (it takes less where threads × queue depth × I/O
/// size, twice over, is less).
pub const RING_MAX_BYTES: usize = 512 << 20;

/// Buffers of `io_size` bytes for `threads` readers of `queue_depth` reads each: every read
/// in flight has a buffer, and as many again can wait for their copies, within
/// [`RING_MAX_BYTES`] (never fewer than one read per thread and 4 in all).
pub fn ring_buffers(threads: usize, queue_depth: usize, io_size: usize) -> usize {
    let want = 2 * threads.max(1) * queue_depth.max(1);
    let fit = RING_MAX_BYTES / io_size.max(1);
    want.min(fit.max(threads)).max(4)
}

/// One submitted batch of copies: the buffers it frees, and whether the GPU has done it.
struct Batch {
    done: Arc<AtomicBool>,
    index: wgpu::SubmissionIndex,
    buffers: Vec<usize>,
}

/// GPU copies out of a ring of imported host buffers into the slots' device buffers; see
/// the module documentation.
pub struct GpuBounce {
    device: wgpu::Device,
    queue: wgpu::Queue,
    /// The ring: one host mapping, buffer `i` at `i * buf_len` (kept mapped by the import
    /// too).
    host: Arc<SlotMemory>,
    /// The ring as a copy source.
    source: wgpu::Buffer,
    buf_len: usize,
    count: usize,
    /// The device buffers of each slot's parts (the ones the renderer binds).
    slots: Vec<Vec<wgpu::Buffer>>,
    encoder: Option<wgpu::CommandEncoder>,
    gathered: Vec<usize>,
    running: VecDeque<Batch>,
}

impl GpuBounce {
    /// A ring of `count` host buffers of `buf_len` bytes (a multiple of 4 KiB) on `pages`,
    /// imported by `importer` into `device`, copying into `slots` (per slot, its parts'
    /// buffers).
    pub fn new(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        importer: &HostImporter,
        (count, buf_len): (usize, usize),
        pages: crate::gpu::HostPages,
        slots: Vec<Vec<wgpu::Buffer>>,
    ) -> Result<GpuBounce, String> {
        if count == 0 || buf_len == 0 || !buf_len.is_multiple_of(4096) {
            return Err(format!(
                "a ring of {count} buffers of {buf_len} bytes: both must be positive, the size a multiple of 4 KiB"
            ));
        }
        let total = count
            .checked_mul(buf_len)
            .and_then(|t| t.checked_next_multiple_of(importer.alignment().max(4096) as usize))
            .ok_or_else(|| format!("a ring of {count} buffers of {buf_len} bytes overflows"))?;
        let host = SlotMemory::host(SlotLayout::whole(total as u64).with_pages(pages))
            .map(Arc::new)
            .map_err(|e| format!("host ring of {total} bytes: {e}"))?;
        let source = importer.import(device, host.clone(), 0, "supercell host ring")?;
        Ok(GpuBounce {
            device: device.clone(),
            queue: queue.clone(),
            host,
            source,
            buf_len,
            count,
            slots,
            encoder: None,
            gathered: Vec::new(),
            running: VecDeque::new(),
        })
    }

    /// The ring's host memory (for reports: its pages).
    pub fn host(&self) -> &Arc<SlotMemory> {
        &self.host
    }
}

impl BounceCopier for GpuBounce {
    fn buffers(&self) -> Vec<(usize, usize)> {
        let Some(crate::gpu::PartMemory::Host(h)) = self.host.parts().first() else {
            return Vec::new();
        };
        let base = h.as_mut_ptr() as usize;
        (0..self.count)
            .map(|i| (base + i * self.buf_len, self.buf_len))
            .collect()
    }

    fn copy(
        &mut self,
        buf: usize,
        slot: usize,
        part: usize,
        offset: u64,
        len: u64,
    ) -> Result<(), String> {
        let dst = self
            .slots
            .get(slot)
            .and_then(|s| s.get(part))
            .ok_or_else(|| format!("slot {slot} has no part {part}"))?;
        // Checked here: wgpu would report a bad copy through its error handler, on this
        // (the engine's) thread, with no frame to blame.
        let a = wgpu::COPY_BUFFER_ALIGNMENT;
        if buf >= self.count
            || len > self.buf_len as u64
            || !offset.is_multiple_of(a)
            || !len.is_multiple_of(a)
            || offset.checked_add(len).is_none_or(|end| end > dst.size())
        {
            return Err(format!(
                "a copy of {len} bytes from ring buffer {buf} to offset {offset} of a {}-byte part",
                dst.size()
            ));
        }
        let enc = self.encoder.get_or_insert_with(|| {
            self.device
                .create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("supercell host ring copies"),
                })
        });
        enc.copy_buffer_to_buffer(&self.source, (buf * self.buf_len) as u64, dst, offset, len);
        self.gathered.push(buf);
        Ok(())
    }

    fn submit(&mut self) -> Result<(), String> {
        let Some(enc) = self.encoder.take() else {
            return Ok(());
        };
        let index = self.queue.submit([enc.finish()]);
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        self.queue
            .on_submitted_work_done(move || flag.store(true, Ordering::Release));
        self.running.push_back(Batch {
            done,
            index,
            buffers: std::mem::take(&mut self.gathered),
        });
        Ok(())
    }

    fn poll(&mut self, wait: bool, done: &mut Vec<usize>) -> Result<(), String> {
        if self.running.is_empty() {
            return Ok(());
        }
        let poll = if wait {
            let last = self.running.back().map(|b| b.index.clone());
            wgpu::PollType::Wait {
                submission_index: last,
                timeout: None,
            }
        } else {
            wgpu::PollType::Poll
        };
        // Polling runs the work-done callbacks of whatever has completed.
        self.device
            .poll(poll)
            .map_err(|e| format!("waiting for the ring's copies: {e}"))?;
        // Batches complete in submission order.
        while let Some(b) = self.running.front() {
            if !(wait || b.done.load(Ordering::Acquire)) {
                break;
            }
            done.extend(self.running.pop_front().into_iter().flat_map(|b| b.buffers));
        }
        Ok(())
    }

    fn describe(&self) -> String {
        format!(
            "the GPU copies each read out of {} MiB of imported host memory (VK_EXT_external_memory_host) into the slot",
            (self.count * self.buf_len) >> 20
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every read in flight has a buffer and as many again wait for copies, within the
    /// cap; never fewer than one per thread or 4.
    #[test]
    fn the_ring_covers_the_reads_in_flight_within_its_cap() {
        // The H200 runs: 16 threads, queue depth 8, 1 MiB reads: 256 MiB.
        assert_eq!(ring_buffers(16, 8, 1 << 20), 256);
        // Larger reads are capped at 512 MiB.
        assert_eq!(ring_buffers(16, 8, 8 << 20), 64);
        assert!(ring_buffers(64, 64, 1 << 20) * (1 << 20) <= RING_MAX_BYTES);
        // Tiny configurations still have room to overlap reads and copies.
        assert_eq!(ring_buffers(1, 1, 4096), 4);
        // A cap below one read per thread still gives each thread one.
        assert_eq!(ring_buffers(8, 8, 256 << 20), 8);
    }
}
