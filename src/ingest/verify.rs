//! End-to-end checks of arriving bytes against the CRC-32 each extent carries
//! ([`EngineConfig::verify`](super::EngineConfig::verify)), done off the caller's thread:
//!
//! - host slots: each read's bytes are hashed on a pool of CPU threads as soon as the read
//!   lands (while they are still in cache), and an extent's CRC is combined from its
//!   pieces' ([`crate::crc32::combine`]);
//! - device slots: once a frame is complete in device memory, a GPU kernel computes every
//!   extent's CRC where the bytes are ([`crate::gpu::GpuCrc`]); only the CRCs come back.
//!   Where the kernel cannot run (no NVRTC), each extent is copied back and hashed on the
//!   CPU threads instead, and the engine's notes say so.
//!
//! Results come back to the engine's coordinator through callbacks; a frame completes
//! only after all of its checks. A slot of several parts is checked part by part: an extent
//! that crosses a part boundary is hashed as its pieces, and their CRCs combined.

use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use rayon::prelude::*;

use super::error::{IngestError, Result};
use crate::gpu::{Gpu, GpuCrc, PartMemory, SlotMemory};

/// A callback that receives one piece's CRC.
pub(crate) type PieceDone = Box<dyn FnOnce(u32) + Send>;
/// A callback that receives the CRCs of a frame's extents (in the order asked), or why
/// they could not be computed.
pub(crate) type FrameDone = Box<dyn FnOnce(Result<Vec<u32>>) + Send>;

/// Hashes host memory on its own CPU threads.
pub(crate) struct HostChecker {
    pool: Arc<rayon::ThreadPool>,
    /// Checks queued or running. Dropping the checker waits for none to be left, so no
    /// check reads a slot after its engine is gone (when the slot's owner may reuse it).
    busy: Arc<(Mutex<usize>, Condvar)>,
}

/// Counts one check out when dropped (also if the check panics).
struct BusyGuard(Arc<(Mutex<usize>, Condvar)>);

impl Drop for BusyGuard {
    fn drop(&mut self) {
        let (count, cv) = &*self.0;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        *n -= 1;
        if *n == 0 {
            cv.notify_all();
        }
    }
}

impl HostChecker {
    /// A pool of `threads` threads (at least 1).
    pub(crate) fn new(threads: usize) -> Result<HostChecker> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads.max(1))
            .thread_name(|i| format!("sc-crc-{i}"))
            .build()
            .map_err(|e| IngestError::thread("the CRC threads", e))?;
        Ok(HostChecker {
            pool: Arc::new(pool),
            busy: Arc::new((Mutex::new(0), Condvar::new())),
        })
    }

    /// Threads in the pool.
    pub(crate) fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// Hashes `len` bytes at `dst` of part `part` of host slot `slot` and hands the CRC to
    /// `done`.
    ///
    /// The caller guarantees that the range lies inside the part and that nothing writes
    /// it until `done` has run (the engine completes a frame only after all its checks).
    pub(crate) fn check_piece(
        &self,
        slot: Arc<SlotMemory>,
        part: usize,
        dst: u64,
        len: usize,
        done: PieceDone,
    ) {
        *self.busy.0.lock().unwrap_or_else(|p| p.into_inner()) += 1;
        let guard = BusyGuard(self.busy.clone());
        self.pool.spawn(move || {
            let _guard = guard;
            let crc = match slot.parts().get(part) {
                Some(PartMemory::Host(b)) if (dst as usize).saturating_add(len) <= b.len() => {
                    // SAFETY: the range is inside the mapping (checked), which `slot` keeps
                    // alive; its read has completed and nothing writes it before `done`
                    // runs (caller's contract).
                    let bytes =
                        unsafe { std::slice::from_raw_parts(b.as_ptr().add(dst as usize), len) };
                    crc32fast::hash(bytes)
                }
                // Not reachable through the engine (host checks run on host slots, ranges
                // checked at submit); an impossible CRC would only report a mismatch.
                _ => !0,
            };
            done(crc);
        });
    }
}

impl Drop for HostChecker {
    fn drop(&mut self) {
        let (count, cv) = &*self.busy;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        while *n > 0 {
            n = cv.wait(n).unwrap_or_else(|p| p.into_inner());
        }
    }
}

struct FrameJob {
    slot: Arc<SlotMemory>,
    ranges: Vec<(u64, u64)>,
    done: FrameDone,
}

/// Computes the CRCs of frames in device memory on a thread of its own: with the GPU
/// kernel, or by copying each extent back and hashing it on CPU threads.
pub(crate) struct DeviceChecker {
    tx: Option<Sender<FrameJob>>,
    thread: Option<JoinHandle<()>>,
    /// How the checks run, for the engine's notes.
    pub(crate) how: String,
}

impl DeviceChecker {
    /// Loads the GPU kernel, or falls back to CPU threads (saying why in `how`).
    pub(crate) fn new(gpu: &Gpu, cpu_threads: usize) -> Result<DeviceChecker> {
        let (kernel, how) = match GpuCrc::new(gpu) {
            Ok(k) => (
                Some(k),
                "--verify: every extent's CRC-32 is computed on the GPU".to_string(),
            ),
            Err(e) => (
                None,
                format!(
                    "--verify: extents are copied back and checked on the CPU ({e}), which is slow"
                ),
            ),
        };
        let host = match kernel {
            Some(_) => None,
            None => Some(HostChecker::new(cpu_threads)?),
        };
        let gpu = gpu.clone();
        let (tx, rx) = mpsc::channel::<FrameJob>();
        let thread = std::thread::Builder::new()
            .name("sc-crc-gpu".into())
            .spawn(move || {
                let bound = gpu.bind();
                for job in rx {
                    let r = match (&bound, &kernel, &host) {
                        (Err(e), _, _) => Err(IngestError::from(e)),
                        (Ok(()), Some(k), _) => gpu_crcs(k, &job.slot, &job.ranges),
                        (Ok(()), None, Some(h)) => copied_crcs(h, &job.slot, &job.ranges),
                        (Ok(()), None, None) => {
                            Err(IngestError::Usage("no way to check device memory".into()))
                        }
                    };
                    (job.done)(r);
                }
            })
            .map_err(|e| IngestError::thread("the CRC thread", e))?;
        Ok(DeviceChecker {
            tx: Some(tx),
            thread: Some(thread),
            how,
        })
    }

    /// Queues the CRCs of `ranges` (slot offset, length) of device slot `slot`.
    ///
    /// The caller guarantees that the ranges lie inside the slot and that nothing writes
    /// the slot until `done` has run.
    pub(crate) fn check_frame(
        &self,
        slot: Arc<SlotMemory>,
        ranges: Vec<(u64, u64)>,
        done: FrameDone,
    ) {
        let job = FrameJob { slot, ranges, done };
        if let Some(tx) = &self.tx
            && let Err(mpsc::SendError(job)) = tx.send(job)
        {
            (job.done)(Err(IngestError::Stopped(
                "the CRC thread has exited".into(),
            )));
        }
    }
}

impl Drop for DeviceChecker {
    fn drop(&mut self) {
        // Closing the channel ends the thread once the queued frames are checked.
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn in_slot(slot: &SlotMemory, ranges: &[(u64, u64)]) -> Result<()> {
    let cap = slot.len() as u64;
    for &(off, len) in ranges {
        if off.checked_add(len).is_none_or(|end| end > cap) {
            return Err(IngestError::Usage(format!(
                "CRC range of {len} bytes at {off} is outside a {cap}-byte slot"
            )));
        }
    }
    Ok(())
}

/// `ranges` (slot offset, length) cut at the part boundaries of `slot`: for each part, the
/// pieces that lie in it (offset inside the part, length), and for each range, its pieces in
/// order as (part, index into that part's list, length).
type PartPieces = (Vec<Vec<(u64, u64)>>, Vec<Vec<(usize, usize, u64)>>);

fn per_part(slot: &SlotMemory, ranges: &[(u64, u64)]) -> PartPieces {
    let layout = slot.layout();
    let mut parts: Vec<Vec<(u64, u64)>> = vec![Vec::new(); layout.parts()];
    let order = ranges
        .iter()
        .map(|&(off, len)| {
            layout
                .pieces(off, len)
                .map(|r| {
                    parts[r.part].push((r.offset, r.len));
                    (r.part, parts[r.part].len() - 1, r.len)
                })
                .collect()
        })
        .collect();
    (parts, order)
}

/// Each range's CRC from its pieces' (`crcs[part][index]`), folded in slot order.
fn fold_pieces(order: &[Vec<(usize, usize, u64)>], crcs: &[Vec<u32>]) -> Vec<u32> {
    order
        .iter()
        .map(|pieces| {
            pieces.iter().fold(0u32, |acc, &(part, i, len)| {
                crate::crc32::combine(acc, crcs[part][i], len)
            })
        })
        .collect()
}

fn gpu_crcs(kernel: &GpuCrc, slot: &SlotMemory, ranges: &[(u64, u64)]) -> Result<Vec<u32>> {
    in_slot(slot, ranges)?;
    let (parts, order) = per_part(slot, ranges);
    let mut crcs = Vec::with_capacity(parts.len());
    for (part, pieces) in slot.parts().iter().zip(&parts) {
        let PartMemory::Device(d) = part else {
            return Err(IngestError::Usage("a GPU check of a host slot".into()));
        };
        // SAFETY: the pieces lie inside this part (the ranges lie inside the slot, checked,
        // and were cut at its part boundaries), whose allocation the job keeps alive; the
        // engine writes nothing into it until the frame's check has completed.
        crcs.push(unsafe { kernel.extent_crcs(d.ptr(), pieces) }?);
    }
    Ok(fold_pieces(&order, &crcs))
}

fn copied_crcs(host: &HostChecker, slot: &SlotMemory, ranges: &[(u64, u64)]) -> Result<Vec<u32>> {
    in_slot(slot, ranges)?;
    let (parts, order) = per_part(slot, ranges);
    let mut crcs = Vec::with_capacity(parts.len());
    for (part, pieces) in slot.parts().iter().zip(&parts) {
        let PartMemory::Device(d) = part else {
            return Err(IngestError::Usage("a GPU check of a host slot".into()));
        };
        crcs.push(host.pool.install(|| {
            pieces
                .par_iter()
                .map(|&(off, len)| {
                    let mut buf = vec![0u8; len as usize];
                    d.read_back(off as usize, &mut buf)?;
                    Ok(crc32fast::hash(&buf))
                })
                .collect::<Result<Vec<u32>>>()
        })?);
    }
    Ok(fold_pieces(&order, &crcs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gpu::{FrameRing, SlotLayout};

    /// Ranges crossing part boundaries get the CRC of their bytes, as one hash of the whole
    /// range would.
    #[test]
    fn crcs_fold_across_parts() {
        let layout = SlotLayout::new(6 * 4096, 2 * 4096).unwrap();
        let ring = FrameRing::host(1, layout).unwrap();
        let slot = ring.memory(0).unwrap().clone();
        let mut image = Vec::new();
        for (i, p) in slot.parts().iter().enumerate() {
            let PartMemory::Host(b) = p else {
                panic!("host")
            };
            // SAFETY: nothing else touches the slot.
            let bytes = unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr(), b.len()) };
            for (j, x) in bytes.iter_mut().enumerate() {
                *x = (j as u32).wrapping_mul(2_654_435_761).rotate_left(i as u32) as u8;
            }
            image.extend_from_slice(bytes);
        }
        let ranges = [(4096u64, 4 * 4096u64), (0, 6 * 4096), (5 * 4096, 100)];
        let (parts, order) = per_part(&slot, &ranges);
        let crcs: Vec<Vec<u32>> = parts
            .iter()
            .enumerate()
            .map(|(i, pieces)| {
                let base = i * 2 * 4096;
                pieces
                    .iter()
                    .map(|&(o, l)| crc32fast::hash(&image[base + o as usize..][..l as usize]))
                    .collect()
            })
            .collect();
        let got = fold_pieces(&order, &crcs);
        let want: Vec<u32> = ranges
            .iter()
            .map(|&(o, l)| crc32fast::hash(&image[o as usize..(o + l) as usize]))
            .collect();
        assert_eq!(got, want);
    }
}
