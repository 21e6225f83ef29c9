//! Waiting on wgpu: [`block_on`] for its futures, and the one way bytes come back from a
//! buffer ([`map_read`], [`read_buffer`]).

use std::ops::Range;
use std::sync::mpsc;
use std::time::Duration;

/// Polls a future to completion on this thread. wgpu's native futures (adapter and device
/// requests, error scopes) are ready when first polled, so no executor is needed.
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::yield_now();
    }
}

/// What can go wrong reading a buffer back. The messages are wgpu's own.
#[derive(Debug, thiserror::Error)]
pub enum ReadbackError {
    /// The copy into the staging buffer was refused (validation).
    #[error("copying {len} bytes at {offset}: {message}")]
    Copy {
        /// Byte offset in the source buffer.
        offset: u64,
        /// Bytes asked for.
        len: u64,
        /// wgpu's validation message.
        message: String,
    },
    /// Waiting for the GPU failed or ran past the timeout.
    #[error("{0}")]
    Wait(#[from] wgpu::PollError),
    /// The mapping was refused, or its callback never came.
    #[error("{0}")]
    Map(String),
}

/// Maps `range` of `buffer` (`MAP_READ` usage) for reading, waits, copies the bytes out and
/// unmaps it. `after` is the submission that last wrote the buffer (only that one is
/// waited for, so work queued later does not hold the read up); `None` waits for
/// everything submitted. `timeout` bounds the wait (`None`: no bound).
pub fn map_read(
    device: &wgpu::Device,
    buffer: &wgpu::Buffer,
    range: Range<u64>,
    after: Option<wgpu::SubmissionIndex>,
    timeout: Option<Duration>,
) -> Result<Vec<u8>, ReadbackError> {
    let (tx, rx) = mpsc::channel();
    buffer.map_async(wgpu::MapMode::Read, range.clone(), move |r| {
        let _ = tx.send(r);
    });
    device.poll(wgpu::PollType::Wait {
        submission_index: after,
        timeout,
    })?;
    let mapped = match rx.try_recv() {
        Ok(r) => r,
        // The map callback runs once everything using the buffer is done; when waiting for
        // `after` alone did not get there, wait for the rest.
        Err(mpsc::TryRecvError::Empty) => {
            device.poll(wgpu::PollType::Wait {
                submission_index: None,
                timeout,
            })?;
            rx.recv().map_err(|e| ReadbackError::Map(e.to_string()))?
        }
        Err(e) => return Err(ReadbackError::Map(e.to_string())),
    };
    mapped.map_err(|e| ReadbackError::Map(e.to_string()))?;
    let out = buffer
        .get_mapped_range(range)
        .map_err(|e| ReadbackError::Map(e.to_string()))?
        .to_vec();
    buffer.unmap();
    Ok(out)
}

/// Copies `len` bytes at `offset` of `buffer` (`COPY_SRC` usage) into a new `MAP_READ`
/// staging buffer and reads them back (waits). Offset and length must be multiples of 4.
pub fn read_buffer(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    buffer: &wgpu::Buffer,
    offset: u64,
    len: u64,
) -> Result<Vec<u8>, ReadbackError> {
    let staging = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("supercell readback"),
        size: len,
        usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    let scope = device.push_error_scope(wgpu::ErrorFilter::Validation);
    let mut enc = device.create_command_encoder(&Default::default());
    enc.copy_buffer_to_buffer(buffer, offset, &staging, 0, len);
    let idx = queue.submit([enc.finish()]);
    if let Some(e) = block_on(scope.pop()) {
        return Err(ReadbackError::Copy {
            offset,
            len,
            message: e.to_string(),
        });
    }
    map_read(device, &staging, 0..len, Some(idx), None)
}
