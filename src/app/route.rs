//! How a frame gets from its ring slot to the buffers the renderer binds: the
//! [`UploadRoute`] of a frame path, with what each route needs (the staging buffers, the
//! imported host slots and the copies out of them).
//!
//! A slot is one or more parts ([`crate::gpu::SlotLayout`]), so every route keeps one GPU
//! buffer per part: a frame is shown by binding the buffers of its slot's parts, in order.

use std::sync::Arc;
use std::time::Instant;

use super::config::{HostCopy, PlayError};
use super::hostring::{GpuBounce, ring_buffers};
use crate::gpu::{FrameRing, HostImporter, SlotLayout, WgpuCrc};
use crate::ingest::{IngestError, ReadProgress, Source};

/// How frames of one path reach the buffer the renderer binds.
pub(super) enum UploadRoute {
    /// Direct path: each ring slot's part is a wgpu buffer CUDA writes (the same memory); a
    /// frame is shown by binding its slot's parts.
    Shared {
        /// The buffers of each ring slot's parts (same indices).
        buffers: Vec<Vec<wgpu::Buffer>>,
    },
    /// Host path where the device can import host memory: the GPU copies each frame's
    /// ranges out of its host slot into a device buffer per slot as their reads land.
    ImportedCopy(ImportedCopy),
    /// Host path otherwise: the CPU copies each frame into a mapped staging buffer, then
    /// the GPU copies that into one of two upload buffers.
    Staging(StagedUpload),
    /// Host path with `--host-copy ring`: reads land in a small ring of imported host
    /// buffers and the engine has the GPU copy each into the slot's device buffers
    /// ([`super::hostring`]); a frame completes once all of it is on the GPU.
    RingCopy(RingCopy),
}

/// The ring route's buffers (the copies themselves are the engine's, through
/// [`GpuBounce`]).
pub(super) struct RingCopy {
    /// How every slot is cut into parts.
    layout: SlotLayout,
    /// A device buffer per slot part: the frame is copied and bound here.
    buffers: Vec<Vec<wgpu::Buffer>>,
    /// With `--verify`: the CRC pass run on each frame's device buffers.
    gpu_crc: Option<WgpuCrc>,
    /// The ring's size and pages, for the report.
    ring: String,
}

/// The imported-copy route's buffers and bookkeeping (all indexed by ring slot).
pub(super) struct ImportedCopy {
    /// How every slot is cut into parts.
    layout: SlotLayout,
    /// Each host slot's parts as GPU copy sources.
    imported: Vec<Vec<wgpu::Buffer>>,
    /// A device buffer per slot part: the frame is bound from here.
    buffers: Vec<Vec<wgpu::Buffer>>,
    /// The landed ranges of the frame being read into each slot.
    progress: Vec<Option<Arc<ReadProgress>>>,
    /// The last submission that copies from each slot. A slot can go back to Free without
    /// being shown (an aborted or failed read, an evicted read-ahead, a path switch);
    /// before the engine may write it again, that copy must be done.
    last_copy: Vec<Option<wgpu::SubmissionIndex>>,
    /// With `--verify`: the CRC pass run on each frame's device buffer after its last copy
    /// (the engine then computes no CRCs on the CPU).
    gpu_crc: Option<WgpuCrc>,
}

/// The staging route's buffers.
pub(super) struct StagedUpload {
    /// How every slot is cut into parts.
    layout: SlotLayout,
    /// Two sets of upload buffers (one per slot part), bound in turn.
    buffers: Vec<Vec<wgpu::Buffer>>,
    /// One staging buffer per upload buffer (same indices).
    staging: Vec<Vec<Staging>>,
    /// The upload buffer the next frame goes to.
    next: usize,
    /// Why the GPU cannot copy from the host slots themselves (empty: staging was asked
    /// for).
    why: String,
}

impl UploadRoute {
    /// The route for the host slots of `ring`: the GPU copies from the slots themselves
    /// where the device imports host memory (and has room for a device buffer per slot),
    /// else through staging buffers. With `verify`, the imported route checks each frame's
    /// CRCs on the GPU.
    pub(super) fn for_host_slots(
        device: &wgpu::Device,
        ring: &FrameRing,
        host_copy: HostCopy,
        verify: bool,
        label: &str,
    ) -> Result<UploadRoute, PlayError> {
        let slots = ring.len();
        let layout = ring
            .memory(0)
            .map(|m| m.layout())
            .ok_or_else(|| PlayError::Usage("a host path needs at least one slot".into()))?;
        // One device buffer per part of a slot.
        let part_buffers = |label: &str| -> Result<Vec<wgpu::Buffer>, PlayError> {
            (0..layout.parts())
                .map(|i| new_buffer(device, copy_len(layout.part_len(i) as usize), label))
                .collect()
        };
        let imported = match host_copy {
            HostCopy::Staging => Err(String::new()),
            HostCopy::Auto | HostCopy::Ring => crate::gpu::HostImporter::new(device),
        }
        .and_then(|imp| {
            ring.memories()
                .into_iter()
                .map(|m| {
                    (0..m.parts().len())
                        .map(|i| imp.import(device, m.clone(), i, "supercell host slot"))
                        .collect::<Result<Vec<_>, _>>()
                })
                .collect::<Result<Vec<_>, _>>()
        });
        // The imported route needs a device buffer per slot; where the GPU has no room
        // for them, the staging route needs only two.
        let imported = imported.and_then(|b| {
            (0..slots)
                .map(|_| part_buffers(label))
                .collect::<Result<Vec<_>, _>>()
                .map(|d| (b, d))
                .map_err(|e| e.to_string())
        });
        Ok(match imported {
            Ok((imported, buffers)) => UploadRoute::ImportedCopy(ImportedCopy {
                layout,
                imported,
                buffers,
                progress: vec![None; slots],
                last_copy: vec![None; slots],
                // Every frame passes through a device buffer, so `--verify` checks it
                // there (on the GPU) rather than on CPU threads as reads land.
                gpu_crc: verify.then(|| WgpuCrc::new(device)),
            }),
            Err(why) => UploadRoute::Staging(StagedUpload {
                layout,
                buffers: (0..2)
                    .map(|_| part_buffers(label))
                    .collect::<Result<Vec<_>, _>>()?,
                staging: (0..2)
                    .map(|_| {
                        (0..layout.parts())
                            .map(|i| Staging::new(device, layout.part_len(i) as usize))
                            .collect::<Result<Vec<_>, _>>()
                    })
                    .collect::<Result<Vec<_>, _>>()?,
                next: 0,
                why,
            }),
        })
    }

    /// The ring route for `slots` slots of `layout`: a device buffer per slot part, and the
    /// copier the engine drives, over a ring of host buffers of `io_size` bytes sized for
    /// `threads` readers of `queue_depth` reads each. Fails, saying why, where the device
    /// cannot import host memory. With `verify`, each frame's CRCs are checked on the GPU.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn ring(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        slots: usize,
        layout: SlotLayout,
        (threads, queue_depth, io_size): (usize, usize, usize),
        verify: bool,
        label: &str,
    ) -> Result<(UploadRoute, GpuBounce), PlayError> {
        let importer = HostImporter::new(device).map_err(|why| {
            PlayError::Usage(format!(
                "--host-copy ring needs host memory the GPU can copy from: {why}"
            ))
        })?;
        let buffers = (0..slots)
            .map(|_| {
                (0..layout.parts())
                    .map(|i| {
                        // Also a copy source: the header checks read the frame back from here.
                        alloc_buffer(
                            device,
                            copy_len(layout.part_len(i) as usize),
                            label,
                            wgpu::BufferUsages::STORAGE
                                | wgpu::BufferUsages::COPY_DST
                                | wgpu::BufferUsages::COPY_SRC,
                            false,
                        )
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        let count = ring_buffers(threads, queue_depth, io_size);
        let copier = GpuBounce::new(
            device,
            queue,
            &importer,
            (count, io_size),
            layout.pages(),
            buffers.clone(),
        )
        .map_err(PlayError::Usage)?;
        let ring = format!(
            "{count} buffers of {} KiB; {}",
            io_size >> 10,
            crate::gpu::describe_pages(copier.host().parts().iter().filter_map(|p| match p {
                crate::gpu::PartMemory::Host(b) => Some(b),
                crate::gpu::PartMemory::Device(_) => None,
            }))
        );
        Ok((
            UploadRoute::RingCopy(RingCopy {
                layout,
                buffers,
                gpu_crc: verify.then(|| WgpuCrc::new(device)),
                ring,
            }),
            copier,
        ))
    }

    /// How frames reach the GPU, for the report (host routes only).
    pub(super) fn description(&self) -> Option<String> {
        match self {
            UploadRoute::Shared { .. } => None,
            UploadRoute::ImportedCopy(_) => Some(
                "GPU copies from the host slots as reads land (VK_EXT_external_memory_host)".into(),
            ),
            UploadRoute::RingCopy(r) => Some(format!(
                "reads land in a ring of imported host buffers ({}), the GPU copies each into the slot (VK_EXT_external_memory_host)",
                r.ring
            )),
            UploadRoute::Staging(s) if s.why.is_empty() => {
                Some("CPU copy into a staging buffer, then a GPU copy (as asked)".into())
            }
            UploadRoute::Staging(s) => Some(format!(
                "CPU copy into a staging buffer, then a GPU copy (host memory cannot be imported: {})",
                s.why
            )),
        }
    }

    /// Whether frames are bound from the slots themselves (the direct path).
    pub(super) fn is_shared(&self) -> bool {
        matches!(self, UploadRoute::Shared { .. })
    }

    /// Whether `--verify` runs on the GPU (the engine then checks nothing itself).
    pub(super) fn checks_on_gpu(&self) -> bool {
        self.gpu_checked().is_some()
    }

    /// The routes that copy every frame into a device buffer per slot: their layout, those
    /// buffers and, with `--verify`, the GPU CRC pass.
    fn gpu_checked(&self) -> Option<(&SlotLayout, &Vec<Vec<wgpu::Buffer>>, &WgpuCrc)> {
        match self {
            UploadRoute::ImportedCopy(c) => Some((&c.layout, &c.buffers, c.gpu_crc.as_ref()?)),
            UploadRoute::RingCopy(r) => Some((&r.layout, &r.buffers, r.gpu_crc.as_ref()?)),
            _ => None,
        }
    }

    /// Reads `out.len()` bytes at slot offset `offset` of the frame in `slot` back (the
    /// header checks): from the host slot, or from the slot's device buffers where the
    /// frame exists only there (ring route).
    pub(super) fn read_back(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        ring: &FrameRing,
        slot: usize,
        offset: usize,
        out: &mut [u8],
    ) -> Result<(), String> {
        let UploadRoute::RingCopy(r) = self else {
            return ring.read_back(slot, offset, out).map_err(|e| e.to_string());
        };
        let (start, len) = (offset as u64, out.len() as u64);
        if start
            .checked_add(len)
            .is_none_or(|end| end > r.layout.len())
        {
            return Err(format!(
                "{len} bytes at {start} lie outside a {}-byte slot",
                r.layout.len()
            ));
        }
        let parts = r
            .buffers
            .get(slot)
            .ok_or_else(|| format!("slot {slot} does not exist"))?;
        for piece in r.layout.pieces(start, len) {
            let buffer = &parts[piece.part];
            // Copies move whole words: read the aligned range around the piece.
            let a = wgpu::COPY_BUFFER_ALIGNMENT;
            let from = piece.offset / a * a;
            let to = (piece.offset + piece.len).div_ceil(a) * a;
            let to = to.min(buffer.size());
            let bytes = crate::device::read_buffer(device, queue, buffer, from, to - from)
                .map_err(|e| e.to_string())?;
            let skip = (piece.offset - from) as usize;
            let at = (piece.at - start) as usize;
            out[at..at + piece.len as usize]
                .copy_from_slice(&bytes[skip..skip + piece.len as usize]);
        }
        Ok(())
    }

    /// The GPU buffers frames are bound from (the memory the player holds for frames).
    pub(super) fn buffers(&self) -> impl Iterator<Item = &wgpu::Buffer> {
        match self {
            UploadRoute::Shared { buffers } => buffers.iter(),
            UploadRoute::ImportedCopy(c) => c.buffers.iter(),
            UploadRoute::RingCopy(r) => r.buffers.iter(),
            UploadRoute::Staging(s) => s.buffers.iter(),
        }
        .flatten()
    }

    /// `slot` was just taken for a new read: waits for copies still reading it, and
    /// returns where the engine should report the ranges as they land (imported route).
    pub(super) fn prepare_slot(
        &mut self,
        device: &wgpu::Device,
        slot: usize,
    ) -> Result<Option<Arc<ReadProgress>>, PlayError> {
        let UploadRoute::ImportedCopy(c) = self else {
            return Ok(None);
        };
        if let Some(copy) = c.last_copy.get_mut(slot).and_then(Option::take) {
            // Normally long done; a slot freed without being shown may still be copied.
            device
                .poll(wgpu::PollType::Wait {
                    submission_index: Some(copy),
                    timeout: None,
                })
                .map_err(|e| PlayError::Usage(format!("waiting for a slot copy: {e}")))?;
        }
        Ok(c.progress.get_mut(slot).map(|entry| {
            let fresh = ReadProgress::new();
            *entry = Some(fresh.clone());
            fresh
        }))
    }

    /// The read into `slot` ended (landed and copied, failed, or released): no more
    /// ranges will land there.
    pub(super) fn read_ended(&mut self, slot: usize) {
        if let UploadRoute::ImportedCopy(c) = self
            && let Some(p) = c.progress.get_mut(slot)
        {
            *p = None;
        }
    }

    /// Imported route: submits GPU copies of the byte ranges that have landed since the
    /// last call, in the slots being read (`only`: in that slot alone; slots for which
    /// `stale` holds are skipped), from each host slot into its device buffer. The copies
    /// overlap the rest of the read, so a frame is on the GPU a moment after its last byte
    /// arrives. Each slot stays `Writing` (then `Ready`, then `InUse` until its render has
    /// finished) while copies from it may run, so the engine never rewrites bytes a copy
    /// still reads.
    pub(super) fn copy_landed(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        only: Option<usize>,
        stale: impl Fn(usize) -> bool,
    ) {
        let UploadRoute::ImportedCopy(c) = self else {
            return;
        };
        let mut enc: Option<wgpu::CommandEncoder> = None;
        let mut copied = Vec::new();
        for slot in 0..c.progress.len() {
            if only.is_some_and(|o| o != slot) {
                continue;
            }
            let Some(progress) = &c.progress[slot] else {
                continue;
            };
            let ranges = progress.take();
            if ranges.is_empty() || stale(slot) {
                continue;
            }
            let enc = enc.get_or_insert_with(|| {
                device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
                    label: Some("supercell host slot copies"),
                })
            });
            for (dst, len) in ranges {
                // Extents are 4 KiB aligned (checked at submit), and so are part
                // boundaries, so copies are too. A range may span parts: one copy per part.
                for r in c.layout.pieces(dst, len) {
                    enc.copy_buffer_to_buffer(
                        &c.imported[slot][r.part],
                        r.offset,
                        &c.buffers[slot][r.part],
                        r.offset,
                        r.len,
                    );
                }
            }
            copied.push(slot);
        }
        if let Some(enc) = enc {
            let idx = queue.submit([enc.finish()]);
            for slot in copied {
                c.last_copy[slot] = Some(idx.clone());
            }
        }
    }

    /// Imported route with `--verify`: the CRC-32 of each extent of `frame` in `slot`'s
    /// device buffer (computed on the GPU after the last copy), compared with the
    /// manifest's. The checksum error for the first mismatch, as the engine reports one;
    /// `None` when all match or the route has no GPU check.
    pub(super) fn check_crcs(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        source: &Source,
        slot: usize,
        frame: u32,
    ) -> Result<Option<IngestError>, PlayError> {
        let (Some((layout, buffers, crc)), Some(f)) =
            (self.gpu_checked(), source.frames.get(frame as usize))
        else {
            return Ok(None);
        };
        // Each extent's pieces, part by part; an extent's CRC is combined from its pieces'.
        let mut per_part: Vec<Vec<(u64, u64)>> = vec![Vec::new(); layout.parts()];
        let order: Vec<Vec<(usize, usize, u64)>> = f
            .extents
            .iter()
            .map(|e| {
                layout
                    .pieces(e.dst, e.len)
                    .map(|r| {
                        per_part[r.part].push((r.offset, r.len));
                        (r.part, per_part[r.part].len() - 1, r.len)
                    })
                    .collect()
            })
            .collect();
        let mut part_crcs = Vec::with_capacity(per_part.len());
        for (part, ranges) in per_part.iter().enumerate() {
            let buffer = buffers[slot].get(part).ok_or_else(|| {
                PlayError::Usage(format!("frame {frame} lies past the slot's last part"))
            })?;
            part_crcs.push(
                crc.crc32(device, queue, buffer, ranges)
                    .map_err(|e| IngestError::Unavailable(format!("GPU CRC check: {e}")))?,
            );
        }
        let got: Vec<u32> = order
            .iter()
            .map(|pieces| {
                pieces.iter().fold(0u32, |acc, &(part, i, len)| {
                    crate::crc32::combine(acc, part_crcs[part][i], len)
                })
            })
            .collect();
        let mut bad = f
            .extents
            .iter()
            .zip(&got)
            .filter(|(e, c)| e.crc32.is_some_and(|want| want != **c));
        let Some((e, &actual)) = bad.next() else {
            return Ok(None);
        };
        let file = &source.files[e.file as usize];
        Ok(Some(IngestError::Checksum {
            frame,
            lane: file.lane,
            path: file.path.clone(),
            offset: e.offset,
            len: e.len,
            expected: e.crc32.unwrap_or_default(),
            actual,
            more: bad.count() as u64,
        }))
    }

    /// The buffers to bind, one per slot part in order, for the first `len` bytes of the
    /// frame resident in `slot`, and the seconds the CPU spent copying it (staging route).
    /// Shared and imported routes bind the slot's own buffers, whose copies were all
    /// submitted (the last when the read completed) before this render, on the same queue.
    pub(super) fn frame_parts(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        ring: &FrameRing,
        slot: usize,
        len: usize,
    ) -> Result<(Vec<wgpu::Buffer>, Option<f64>), PlayError> {
        let s = match self {
            UploadRoute::Shared { buffers } => return Ok((buffers[slot].clone(), None)),
            UploadRoute::ImportedCopy(c) => return Ok((c.buffers[slot].clone(), None)),
            UploadRoute::RingCopy(r) => return Ok((r.buffers[slot].clone(), None)),
            UploadRoute::Staging(s) => s,
        };
        let b = s.next;
        s.next = (b + 1) % s.buffers.len();
        let parts = ring
            .host_parts(slot)
            .ok_or_else(|| PlayError::Usage(format!("slot {slot} holds no host bytes")))?;
        // This runs while the GPU still renders the previous frame (that render reads the
        // other set of upload buffers). Set `b` was last bound by the render before that
        // one, which has finished: the player waits for each render before it submits the
        // next. The GPU copies are ordered before the render submitted next. The bytes are
        // copied out before this returns. Parts past the frame's end are left as they are
        // (nothing binds them).
        let t0 = Instant::now();
        for r in s.layout.pieces(0, len as u64) {
            let bytes = parts.get(r.part).and_then(|p| p.get(..r.len as usize));
            let bytes = bytes.ok_or_else(|| {
                PlayError::Usage(format!("a {len}-byte frame does not fit slot {slot}"))
            })?;
            s.staging[b][r.part].upload(device, queue, bytes, &s.buffers[b][r.part])?;
        }
        Ok((s.buffers[b].clone(), Some(t0.elapsed().as_secs_f64())))
    }
}

pub(super) fn new_buffer(
    device: &wgpu::Device,
    len: usize,
    label: &str,
) -> Result<wgpu::Buffer, PlayError> {
    alloc_buffer(
        device,
        len,
        label,
        wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        false,
    )
}

pub(super) fn alloc_buffer(
    device: &wgpu::Device,
    len: usize,
    label: &str,
    usage: wgpu::BufferUsages,
    mapped_at_creation: bool,
) -> Result<wgpu::Buffer, PlayError> {
    let scope = device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
    let b = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some(label),
        size: len as u64,
        usage,
        mapped_at_creation,
    });
    if let Some(e) = crate::device::block_on(scope.pop()) {
        return Err(PlayError::Usage(format!(
            "cannot allocate a {len}-byte GPU buffer ({label}): {e}"
        )));
    }
    Ok(b)
}

/// `len` rounded up to wgpu's copy alignment (4 bytes): buffer copies move whole words.
pub(super) fn copy_len(len: usize) -> usize {
    let a = wgpu::COPY_BUFFER_ALIGNMENT as usize;
    len.div_ceil(a) * a
}

/// Bytes one rayon task copies into a staging buffer: large enough that task overhead is
/// noise, small enough that a 1 GB frame spreads over every core.
const UPLOAD_CHUNK: usize = 8 << 20;

/// A reusable host→GPU staging buffer (`MAP_WRITE | COPY_SRC`), kept mapped between uses.
///
/// `queue.write_buffer` copies a frame on one thread into wgpu's staging belt (and allocates
/// it anew for large writes); here the frame is copied once, by all cores, into memory the
/// GPU copies from. After the GPU copy is submitted the buffer is asked to map again; wgpu
/// maps it once that submission completes, so the next use only waits if the copy is still
/// running.
pub(super) struct Staging {
    buffer: wgpu::Buffer,
    /// Reports the outstanding `map_async`, and the submission whose copy it waits for;
    /// `None` while the buffer is mapped (it is created mapped).
    remap: Option<(
        std::sync::mpsc::Receiver<Result<(), wgpu::BufferAsyncError>>,
        wgpu::SubmissionIndex,
    )>,
}

impl Staging {
    pub(super) fn new(device: &wgpu::Device, len: usize) -> Result<Staging, PlayError> {
        let buffer = alloc_buffer(
            device,
            copy_len(len.max(1)),
            "supercell host staging",
            wgpu::BufferUsages::MAP_WRITE | wgpu::BufferUsages::COPY_SRC,
            true,
        )?;
        Ok(Staging {
            buffer,
            remap: None,
        })
    }

    /// Copies `bytes` into the staging buffer and submits a copy of them (padded to the
    /// copy alignment with zeros) to the start of `dst`. When this returns `bytes` may be
    /// reused; the GPU copy is ordered before anything submitted later on `queue`.
    pub(super) fn upload(
        &mut self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        bytes: &[u8],
        dst: &wgpu::Buffer,
    ) -> Result<(), PlayError> {
        use rayon::prelude::*;
        let len = bytes.len();
        let padded = copy_len(len);
        if padded as u64 > self.buffer.size() || padded as u64 > dst.size() {
            return Err(PlayError::Usage(format!(
                "a {len}-byte frame does not fit the upload buffers"
            )));
        }
        if let Some((rx, copy)) = self.remap.take() {
            // Normally mapped already: this buffer's copy was submitted two frames ago, and
            // a render submitted after it has finished since. Otherwise wait for that copy
            // alone (not for work submitted after it, such as the render in flight).
            let r = match rx.try_recv() {
                Ok(r) => r,
                Err(_) => {
                    device
                        .poll(wgpu::PollType::Wait {
                            submission_index: Some(copy),
                            timeout: None,
                        })
                        .map_err(|e| PlayError::Usage(format!("staging buffer: {e}")))?;
                    rx.recv()
                        .map_err(|e| PlayError::Usage(format!("staging buffer: {e}")))?
                }
            };
            r.map_err(|e| PlayError::Usage(format!("cannot map the staging buffer: {e}")))?;
        }
        if padded > 0 {
            let mut view = self
                .buffer
                .get_mapped_range_mut(..padded as u64)
                .map_err(|e| PlayError::Usage(format!("staging buffer: {e}")))?;
            let mut whole = view.slice(..);
            // wgpu's write-only view is not `Send` (it hands out no `&mut [u8]`: mapped
            // memory may be write-combined, where reads are slow), so the threads get its
            // address and only ever write through it.
            let dst = whole.as_raw_element_ptr().as_ptr() as usize;
            bytes
                .par_chunks(UPLOAD_CHUNK)
                .enumerate()
                .for_each(|(i, src)| {
                    // SAFETY: chunk `i` is written to `dst + i * UPLOAD_CHUNK ..+ src.len()`,
                    // inside the mapped range (`padded >= len`, checked above), which `whole`
                    // borrows exclusively until this loop ends; chunks do not overlap, and
                    // `bytes` (a host slot) is not the mapping.
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            src.as_ptr(),
                            (dst as *mut u8).add(i * UPLOAD_CHUNK),
                            src.len(),
                        );
                    }
                });
            // A mapped buffer's contents persist between uses: clear the padding so the
            // GPU buffer never holds another frame's bytes past this one's end.
            whole.slice(len..).fill(0);
        }
        self.buffer.unmap();
        let mut enc = device.create_command_encoder(&wgpu::CommandEncoderDescriptor {
            label: Some("supercell host upload"),
        });
        if padded > 0 {
            enc.copy_buffer_to_buffer(&self.buffer, 0, dst, 0, padded as u64);
        }
        let copy = queue.submit([enc.finish()]);
        let (tx, rx) = std::sync::mpsc::channel();
        self.buffer.map_async(wgpu::MapMode::Write, .., move |r| {
            let _ = tx.send(r);
        });
        self.remap = Some((rx, copy));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The staging upload over several rayon chunks and a length that is not a multiple of
    /// 4: every byte arrives at its place, the padding is zero (also after a longer frame
    /// used the same buffers), and the buffers are reused through the remap.
    #[test]
    fn staging_upload_is_exact_across_chunks_and_odd_lengths() {
        let Ok(ctx) = crate::render::GpuContext::headless() else {
            eprintln!("skipping: no GPU adapter");
            return;
        };
        let (device, queue) = (&ctx.device, &ctx.queue);
        let cap = 2 * UPLOAD_CHUNK + 7;
        let mut staging = Staging::new(device, cap).expect("staging");
        let dst = alloc_buffer(
            device,
            copy_len(cap),
            "test upload",
            wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            false,
        )
        .expect("dst");
        let long: Vec<u8> = (0..cap).map(|i| (i * 7 + 3) as u8 | 1).collect();
        for len in [cap, UPLOAD_CHUNK + 1, 5, cap] {
            staging
                .upload(device, queue, &long[..len], &dst)
                .expect("upload");
            let got = crate::device::read_buffer(device, queue, &dst, 0, dst.size()).unwrap();
            assert_eq!(&got[..len], &long[..len], "{len} bytes");
            assert!(
                got[len..copy_len(len)].iter().all(|&b| b == 0),
                "{len}: padding not cleared"
            );
        }
    }
}
