//! The staged CUDA pipeline: reads land in pinned staging buffers; each filled buffer is
//! copied to its slot's part with `cuMemcpyHtoDAsync` on one of several streams and an event
//! recorded after the copy; a buffer is reused only once its event has completed. The
//! coordinator drives it as its copy stage (`super::copy_stage`).

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::EngineConfig;
use super::copy_stage::{BufferRead, CopyEnded, CopyStage, Waiting};
use super::piece::Piece;
use crate::gpu::{Gpu, PartMemory, PinnedBuffer, SlotMemory, cuda_check, cuda_error};
use crate::ingest::error::{IngestError, Result};

/// Staged-path state: pinned buffers, streams and their events.
pub(super) struct Staged {
    gpu: Gpu,
    streams: Vec<Arc<cudarc::driver::CudaStream>>,
    bufs: Vec<StagingBuf>,
    /// Free buffers and the pieces waiting for one.
    waiting: Waiting,
    /// Buffers whose copy is queued, per stream, in issue order (events complete in order).
    copying: Vec<VecDeque<usize>>,
    next_stream: usize,
}

struct StagingBuf {
    // Drop order: the event, then the pinned memory (unregistered, then unmapped).
    event: cudarc::driver::CudaEvent,
    mem: PinnedBuffer,
    piece: Option<Piece>,
}

impl Staged {
    /// Streams, pinned buffers of `cfg.io_size` bytes and their events on `gpu`.
    pub(super) fn new(gpu: &Gpu, cfg: &EngineConfig) -> Result<Staged> {
        let streams_n = cfg.streams.max(2);
        let nbufs = if cfg.staging_buffers > 0 {
            cfg.staging_buffers
        } else {
            cfg.threads * cfg.queue_depth + 2 * streams_n
        };
        // Keep pinned memory bounded: at most 4 GiB of staging, at least 2 buffers per stream.
        let nbufs = nbufs.min((4usize << 30) / cfg.io_size).max(2 * streams_n);
        gpu.bind()?;
        let mut streams = Vec::with_capacity(streams_n);
        for _ in 0..streams_n {
            streams.push(
                gpu.context()
                    .new_stream()
                    .map_err(cuda_error("cuStreamCreate"))?,
            );
        }
        let mut bufs = Vec::with_capacity(nbufs);
        for _ in 0..nbufs {
            let mem = PinnedBuffer::new(gpu, cfg.io_size, cfg.host_pages)?;
            let event = gpu
                .context()
                .new_event(None)
                .map_err(cuda_error("cuEventCreate"))?;
            bufs.push(StagingBuf {
                event,
                mem,
                piece: None,
            });
        }
        Ok(Staged {
            gpu: gpu.clone(),
            copying: (0..streams_n).map(|_| VecDeque::new()).collect(),
            streams,
            waiting: Waiting::new(nbufs),
            bufs,
            next_stream: 0,
        })
    }

    /// The staging buffers' host memory (address, length), for io_uring to register.
    pub(super) fn regions(&self) -> Vec<(usize, usize)> {
        self.bufs
            .iter()
            .map(|b| (b.mem.host().as_mut_ptr() as usize, b.mem.host().len()))
            .collect()
    }
}

impl CopyStage for Staged {
    fn bind_thread(&self) -> Result<()> {
        Ok(self.gpu.bind()?)
    }

    fn describe(&self, io_size: usize) -> String {
        format!(
            "{} pinned {} KiB buffers, {} CUDA streams",
            self.bufs.len(),
            io_size >> 10,
            self.streams.len()
        )
    }

    fn waiting(&mut self) -> &mut Waiting {
        &mut self.waiting
    }

    fn dispatch(&mut self) -> Vec<BufferRead> {
        let mut issued = Vec::new();
        while let Some((p, b)) = self.waiting.next() {
            self.bufs[b].piece = Some(p);
            issued.push((p, b, self.bufs[b].mem.host().as_mut_ptr() as usize));
        }
        issued
    }

    fn piece_in(&self, buf: usize) -> Option<Piece> {
        self.bufs.get(buf).and_then(|x| x.piece)
    }

    /// Copies the buffer to the piece's part with `cuMemcpyHtoDAsync` on the next stream
    /// and records the buffer's event after it.
    fn start_copy(
        &mut self,
        buf: usize,
        piece: Piece,
        slot: Option<usize>,
        slots: &[Arc<SlotMemory>],
        _landed: Instant,
    ) -> Result<()> {
        let dev = slot.and_then(|sl| match slots[sl].parts().get(piece.part as usize) {
            Some(PartMemory::Device(dv)) => Some(dv.ptr()),
            _ => None,
        });
        let Some(dev) = dev else {
            return Err(IngestError::Usage(
                "staged slot is not device memory".into(),
            ));
        };
        let k = self.next_stream;
        self.next_stream = (k + 1) % self.streams.len();
        let stream = &self.streams[k];
        let staging = &self.bufs[buf];
        // SAFETY: the source is a pinned buffer of at least `len` bytes that is not reused
        // until the event recorded below completes; the destination lies inside the piece's
        // part (the extent is inside the slot, checked at submit, and the plan cut it at
        // part boundaries), whose memory the coordinator keeps alive. The context is bound
        // to this thread (`bind_thread`).
        let r = unsafe {
            cudarc::driver::sys::cuMemcpyHtoDAsync_v2(
                dev + piece.part_offset,
                staging.mem.host().as_ptr().cast(),
                piece.len,
                stream.cu_stream(),
            )
        };
        let r = cuda_check(r, "cuMemcpyHtoDAsync").and_then(|()| {
            staging
                .event
                .record(stream)
                .map_err(cuda_error("cuEventRecord"))
        });
        match r {
            Ok(()) => {
                self.copying[k].push_back(buf);
                Ok(())
            }
            Err(e) => {
                // Let whatever was queued finish so the buffer is idle before it is reused.
                let _ = stream.synchronize();
                Err(e.into())
            }
        }
    }

    fn release(&mut self, buf: usize) {
        self.bufs[buf].piece = None;
        self.waiting.free(buf);
    }

    fn busy(&self) -> bool {
        self.copying.iter().any(|c| !c.is_empty())
    }

    /// The copies whose events have completed, stream by stream in issue order.
    fn poll(&mut self) -> Vec<CopyEnded> {
        let mut finished = Vec::new();
        for k in 0..self.copying.len() {
            while let Some(&b) = self.copying[k].front() {
                match self.bufs[b].event.try_is_complete() {
                    Ok(true) => {
                        self.copying[k].pop_front();
                        let p = self.bufs[b].piece.take();
                        self.waiting.free(b);
                        if let Some(p) = p {
                            finished.push((p.seq, None));
                        }
                    }
                    Ok(false) => break,
                    Err(e) => {
                        self.copying[k].pop_front();
                        let _ = self.streams[k].synchronize();
                        let p = self.bufs[b].piece.take();
                        self.waiting.free(b);
                        if let Some(p) = p {
                            finished.push((
                                p.seq,
                                Some(IngestError::Cuda(format!("copy to the GPU failed: {e}"))),
                            ));
                        }
                    }
                }
            }
        }
        finished
    }

    /// Synchronizes every stream. The pieces are not reported: the engine is going away.
    fn wait_all(&mut self) -> Vec<CopyEnded> {
        for st in &self.streams {
            let _ = st.synchronize();
        }
        Vec::new()
    }
}
