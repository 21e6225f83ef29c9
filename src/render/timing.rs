//! Timing renders: the GPU timestamps around the acceleration passes and the technique's
//! pass ([`Timer`]), and the one timed render in flight ([`PendingRender`]), for either
//! technique.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::RenderError;

/// Timing of one [`Renderer::render_timed`](super::Renderer::render_timed) call (or of a
/// render submitted with [`Renderer::submit_timed`](super::Renderer::submit_timed), once
/// finished).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameTiming {
    /// Ray-march kernel time from GPU timestamps, where the device has them.
    pub gpu_ms: Option<f64>,
    /// Time of the acceleration and sun-grid passes, when this call ran them (new grids,
    /// transfer functions or light) and the device has timestamps.
    pub prepare_ms: Option<f64>,
    /// Wall time from submission until completion was seen (includes submission overhead;
    /// for `submit_timed`, until `finish_pending` or `pending_done` saw it done).
    pub wall_ms: f64,
}

/// Where the technique's pass's timestamps are resolved (the preparation's go to 0).
const RESOLVE_PASS: u64 = 256;
/// Bytes of the resolve and read-back buffers.
const RESOLVE_BYTES: u64 = RESOLVE_PASS + 16;

/// Query indices: the preparation (acceleration passes) begins and ends at 0 and 1, the
/// technique's pass at 2 and 3.
pub(super) const PREPARE_BEGIN: u32 = 0;
pub(super) const PREPARE_END: u32 = 1;
const PASS_BEGIN: u32 = 2;
const PASS_END: u32 = 3;

/// The GPU timer's queries and read-back buffers (devices with timestamp queries).
pub(super) struct Timer {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    period_ns: f64,
}

impl Timer {
    /// The timer of `device`, whose queue says the timestamp period.
    pub(super) fn new(device: &wgpu::Device, queue: &wgpu::Queue) -> Timer {
        let buf = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            crate::device::buffer(device, label, size, usage)
        };
        Timer {
            queries: device.create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("supercell timer"),
                ty: wgpu::QueryType::Timestamp,
                count: 4,
            }),
            resolve: buf(
                "supercell timer resolve",
                RESOLVE_BYTES,
                wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            ),
            read: buf(
                "supercell timer read",
                RESOLVE_BYTES,
                wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            ),
            period_ns: queue.get_timestamp_period() as f64,
        }
    }

    /// Timestamp writes of a pass that begins and/or ends at these query indices.
    pub(super) fn writes(
        &self,
        begin: Option<u32>,
        end: Option<u32>,
    ) -> wgpu::ComputePassTimestampWrites<'_> {
        wgpu::ComputePassTimestampWrites {
            query_set: &self.queries,
            beginning_of_pass_write_index: begin,
            end_of_pass_write_index: end,
        }
    }

    /// The timestamp writes of the technique's pass.
    pub(super) fn pass_writes(&self) -> wgpu::ComputePassTimestampWrites<'_> {
        self.writes(Some(PASS_BEGIN), Some(PASS_END))
    }

    /// Records the resolve of this render's timestamps and their copy to the read-back
    /// buffer (the preparation's only when it ran, `prepared`).
    pub(super) fn record_resolve(&self, encoder: &mut wgpu::CommandEncoder, prepared: bool) {
        // Resolve offsets must be multiples of QUERY_RESOLVE_BUFFER_ALIGNMENT (256): the
        // preparation's pair at 0, the pass's at 256.
        if prepared {
            encoder.resolve_query_set(&self.queries, 0..2, &self.resolve, 0);
        }
        encoder.resolve_query_set(&self.queries, 2..4, &self.resolve, RESOLVE_PASS);
        encoder.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, RESOLVE_BYTES);
    }

    /// The pass's and (where `prepared`) the preparation's milliseconds, read after
    /// submission `after`.
    fn read(
        &self,
        device: &wgpu::Device,
        after: wgpu::SubmissionIndex,
        prepared: bool,
    ) -> Result<(f64, Option<f64>), RenderError> {
        // Wait for this render's submission only: work queued after it (the next frame's
        // copies) must not hold up its timing.
        let bytes =
            crate::device::map_read(device, &self.read, 0..RESOLVE_BYTES, Some(after), None)
                .map_err(|e| RenderError::Gpu(e.to_string()))?;
        let ts = |i: usize| -> u64 { bytemuck::pod_read_unaligned(&bytes[i * 8..i * 8 + 8]) };
        let ms = |a: u64, b: u64| b.wrapping_sub(a) as f64 * self.period_ns / 1e6;
        let m = RESOLVE_PASS as usize / 8;
        Ok((ms(ts(m), ts(m + 1)), prepared.then(|| ms(ts(0), ts(1)))))
    }
}

/// A render submitted and not yet seen complete.
pub(super) struct PendingRender {
    index: wgpu::SubmissionIndex,
    submitted: Instant,
    /// Whether it ran the acceleration passes (timed as the preparation).
    prepared: bool,
    /// Set by the queue's work-done callback (fired during a device poll).
    done: Arc<AtomicBool>,
}

impl PendingRender {
    /// Submits `cmd` on `queue` and starts watching it.
    pub(super) fn submit(
        queue: &wgpu::Queue,
        cmd: wgpu::CommandBuffer,
        prepared: bool,
    ) -> PendingRender {
        let submitted = Instant::now();
        let index = queue.submit([cmd]);
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        queue.on_submitted_work_done(move || flag.store(true, Ordering::Release));
        PendingRender {
            index,
            submitted,
            prepared,
            done,
        }
    }

    /// Whether it has completed (polls the device without waiting, which runs the
    /// work-done callbacks of whatever has completed).
    pub(super) fn done(&self, device: &wgpu::Device) -> bool {
        let _ = device.poll(wgpu::PollType::Poll);
        self.done.load(Ordering::Acquire)
    }

    /// Waits for it and says how long it took (GPU times from `timer` where there is one).
    pub(super) fn finish(
        self,
        device: &wgpu::Device,
        timer: Option<&Timer>,
    ) -> Result<FrameTiming, RenderError> {
        wait(device, self.index.clone())?;
        if let Some(e) = super::scoped::take_uncaptured_error() {
            return Err(RenderError::Gpu(e));
        }
        let wall_ms = self.submitted.elapsed().as_secs_f64() * 1e3;
        let (gpu_ms, prepare_ms) = match timer {
            Some(t) => {
                let (pass, prepare) = t.read(device, self.index, self.prepared)?;
                (Some(pass), prepare)
            }
            None => (None, None),
        };
        Ok(FrameTiming {
            gpu_ms,
            prepare_ms,
            wall_ms,
        })
    }
}

/// Waits for submission `idx` on `device`.
pub(super) fn wait(device: &wgpu::Device, idx: wgpu::SubmissionIndex) -> Result<(), RenderError> {
    device
        .poll(wgpu::PollType::Wait {
            submission_index: Some(idx),
            timeout: None,
        })
        .map(|_| ())
        .map_err(|e| RenderError::Gpu(e.to_string()))
}
