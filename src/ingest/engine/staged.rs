//! The staged CUDA pipeline: reads land in pinned staging buffers; each filled buffer is
//! copied to its slot's part with `cuMemcpyHtoDAsync` on one of several streams and an event
//! recorded after the copy; a buffer is reused only once its event has completed.

use std::collections::VecDeque;
use std::sync::Arc;

use super::EngineConfig;
use super::plan::{Coordinator, Piece};
use crate::gpu::{Gpu, PartMemory, PinnedBuffer, cuda_check, cuda_error};
use crate::ingest::error::{IngestError, Result};
use crate::ingest::io::IoDone;

/// Staged-path state: pinned buffers, streams and their events.
pub(super) struct Staged {
    pub(super) gpu: Gpu,
    pub(super) streams: Vec<Arc<cudarc::driver::CudaStream>>,
    pub(super) bufs: Vec<StagingBuf>,
    pub(super) free: Vec<usize>,
    pub(super) pending: VecDeque<Piece>,
    /// Buffers whose copy is queued, per stream, in issue order (events complete in order).
    pub(super) copying: Vec<VecDeque<usize>>,
    pub(super) next_stream: usize,
}

pub(super) struct StagingBuf {
    // Drop order: the event, then the pinned memory (unregistered, then unmapped).
    pub(super) event: cudarc::driver::CudaEvent,
    pub(super) mem: PinnedBuffer,
    pub(super) piece: Option<Piece>,
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
            free: (0..nbufs).rev().collect(),
            bufs,
            pending: VecDeque::new(),
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

impl Coordinator {
    pub(super) fn on_staged_io(&mut self, d: IoDone) {
        let Some(mut s) = self.staged.take() else {
            return;
        };
        let b = d.token as usize;
        let Some(piece) = s.bufs.get(b).and_then(|x| x.piece) else {
            self.staged = Some(s);
            return;
        };
        let mut failed: Option<IngestError> = None;
        let abandoned = self.jobs.get(&piece.seq).is_none_or(|j| j.timed_out);
        match d.result {
            Err(msg) => failed = Some(self.read_err(&piece, msg)),
            Ok(()) if abandoned => {
                // The frame timed out: its slot gets nothing more. The buffer is free.
                s.bufs[b].piece = None;
                s.free.push(b);
                self.staged = Some(s);
                self.piece_done(piece.seq, d.completed, None);
                return;
            }
            Ok(()) => {
                // The read's arrival is the frame's first/last byte; the piece itself
                // completes when its copy does.
                let slot = self.jobs.get_mut(&piece.seq).map(|job| {
                    job.note_arrival(d.completed);
                    job.req.slot
                });
                let dev =
                    slot.and_then(|sl| match self.slots[sl].parts().get(piece.part as usize) {
                        Some(PartMemory::Device(dv)) => Some(dv.ptr()),
                        _ => None,
                    });
                match dev {
                    None => {
                        failed = Some(IngestError::Usage(
                            "staged slot is not device memory".into(),
                        ))
                    }
                    Some(dev) => {
                        let k = s.next_stream;
                        s.next_stream = (k + 1) % s.streams.len();
                        let stream = &s.streams[k];
                        let buf = &s.bufs[b];
                        // SAFETY: the source is a pinned buffer of at least `len` bytes that
                        // is not reused until the event recorded below completes; the
                        // destination lies inside the piece's part (the extent is inside the
                        // slot, checked at submit, and the plan cut it at part boundaries),
                        // whose memory this coordinator keeps alive. The context is bound to
                        // this thread.
                        let r = unsafe {
                            cudarc::driver::sys::cuMemcpyHtoDAsync_v2(
                                dev + piece.part_offset,
                                buf.mem.host().as_ptr().cast(),
                                piece.len,
                                stream.cu_stream(),
                            )
                        };
                        let r = cuda_check(r, "cuMemcpyHtoDAsync").and_then(|()| {
                            buf.event
                                .record(stream)
                                .map_err(cuda_error("cuEventRecord"))
                        });
                        match r {
                            Ok(()) => s.copying[k].push_back(b),
                            Err(e) => {
                                // Let whatever was queued finish so the buffer is idle
                                // before it is reused.
                                let _ = stream.synchronize();
                                failed = Some(e.into());
                            }
                        }
                    }
                }
            }
        }
        if failed.is_some() {
            s.bufs[b].piece = None;
            s.free.push(b);
        }
        self.staged = Some(s);
        if let Some(e) = failed {
            self.piece_done(piece.seq, d.completed, Some(e));
        }
    }

    pub(super) fn poll_copies(&mut self) {
        let Some(s) = &mut self.staged else {
            return;
        };
        let mut finished = Vec::new();
        for k in 0..s.copying.len() {
            while let Some(&b) = s.copying[k].front() {
                match s.bufs[b].event.try_is_complete() {
                    Ok(true) => {
                        s.copying[k].pop_front();
                        let p = s.bufs[b].piece.take();
                        s.free.push(b);
                        if let Some(p) = p {
                            finished.push((p.seq, None));
                        }
                    }
                    Ok(false) => break,
                    Err(e) => {
                        s.copying[k].pop_front();
                        let _ = s.streams[k].synchronize();
                        let p = s.bufs[b].piece.take();
                        s.free.push(b);
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
        self.finish_copied_pieces(finished);
    }

    pub(super) fn dispatch_staged(&mut self) {
        let Some(s) = &mut self.staged else {
            return;
        };
        let mut issued = Vec::new();
        while !s.pending.is_empty() && !s.free.is_empty() {
            let p = s.pending.pop_front().expect("not empty");
            let b = s.free.pop().expect("not empty");
            s.bufs[b].piece = Some(p);
            issued.push((p, b, s.bufs[b].mem.host().as_mut_ptr() as usize));
        }
        self.submit_host_reads(&issued);
    }
}
