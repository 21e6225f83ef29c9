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

/// A texture's copy into a `MAP_READ` buffer, recorded in an encoder: each row padded to
/// wgpu's copy alignment (256 bytes), as a texture-to-buffer copy requires.
pub struct TextureReadback {
    /// The buffer the copy lands in.
    pub buffer: wgpu::Buffer,
    /// Bytes of a padded row in `buffer`.
    pub row_bytes: u32,
    /// The texture's width and height.
    pub size: (u32, u32),
    /// Bytes of one texel.
    pub texel_bytes: u32,
}

impl TextureReadback {
    /// Creates the buffer for `texture` (`texel_bytes` per texel) and records the copy
    /// into `enc`.
    pub fn record(
        device: &wgpu::Device,
        enc: &mut wgpu::CommandEncoder,
        texture: &wgpu::Texture,
        texel_bytes: u32,
    ) -> TextureReadback {
        let size = (texture.width(), texture.height());
        let row_bytes = padded_row_bytes(size.0, texel_bytes);
        let buffer = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("supercell texture readback"),
            size: u64::from(row_bytes) * u64::from(size.1),
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        enc.copy_texture_to_buffer(
            texture.as_image_copy(),
            wgpu::TexelCopyBufferInfo {
                buffer: &buffer,
                layout: wgpu::TexelCopyBufferLayout {
                    offset: 0,
                    bytes_per_row: Some(row_bytes),
                    rows_per_image: Some(size.1),
                },
            },
            wgpu::Extent3d {
                width: size.0,
                height: size.1,
                depth_or_array_layers: 1,
            },
        );
        TextureReadback {
            buffer,
            row_bytes,
            size,
            texel_bytes,
        }
    }

    /// The buffer's length in bytes.
    pub fn len(&self) -> u64 {
        u64::from(self.row_bytes) * u64::from(self.size.1)
    }

    /// Whether the texture has no texels.
    pub fn is_empty(&self) -> bool {
        self.len() == 0 || self.size.0 == 0
    }

    /// Maps the buffer (after submission `after`, see [`map_read`]) and returns the rows
    /// without their padding.
    pub fn read(
        &self,
        device: &wgpu::Device,
        after: Option<wgpu::SubmissionIndex>,
    ) -> Result<Vec<u8>, ReadbackError> {
        let padded = map_read(device, &self.buffer, 0..self.len(), after, None)?;
        Ok(self.unpad(&padded))
    }

    /// `padded` (the buffer's bytes) without each row's padding.
    pub fn unpad(&self, padded: &[u8]) -> Vec<u8> {
        let (w, h) = self.size;
        unpad_rows(
            padded,
            self.row_bytes as usize,
            (w * self.texel_bytes) as usize,
            h as usize,
        )
    }
}

/// The first `row` bytes of each of `rows` rows `stride` bytes apart.
fn unpad_rows(padded: &[u8], stride: usize, row: usize, rows: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(row * rows);
    for y in 0..rows {
        out.extend_from_slice(&padded[y * stride..][..row]);
    }
    out
}

/// Bytes of a row of `width` texels of `texel_bytes` in a texture-to-buffer copy: rounded up
/// to [`wgpu::COPY_BYTES_PER_ROW_ALIGNMENT`].
pub fn padded_row_bytes(width: u32, texel_bytes: u32) -> u32 {
    (width * texel_bytes).next_multiple_of(wgpu::COPY_BYTES_PER_ROW_ALIGNMENT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_pad_to_the_copy_alignment() {
        assert_eq!(padded_row_bytes(64, 4), 256);
        assert_eq!(padded_row_bytes(65, 4), 512);
        assert_eq!(padded_row_bytes(1, 16), 256);
        assert_eq!(padded_row_bytes(17, 16), 512);
    }

    #[test]
    fn unpadding_keeps_each_rows_texels_and_drops_the_rest() {
        // Two rows of 3 bytes in a stride of 5: 0 1 2 | x x, 3 4 5 | x x.
        let padded = [0, 1, 2, 9, 9, 3, 4, 5, 9, 9];
        assert_eq!(unpad_rows(&padded, 5, 3, 2), vec![0, 1, 2, 3, 4, 5]);
        assert!(unpad_rows(&padded, 5, 3, 0).is_empty());
    }
}
