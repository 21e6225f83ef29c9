//! How a frame gets from its ring slot to the buffer the renderer binds.

use super::core::PlayError;

pub(super) fn new_buffer(device: &wgpu::Device, len: usize, label: &str) -> Result<wgpu::Buffer, PlayError> {
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
    if let Some(e) = crate::render::block_on(scope.pop()) {
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
            let got = crate::gpu::interop::read_buffer(device, queue, &dst, 0, dst.size()).unwrap();
            assert_eq!(&got[..len], &long[..len], "{len} bytes");
            assert!(
                got[len..copy_len(len)].iter().all(|&b| b == 0),
                "{len}: padding not cleared"
            );
        }
    }
}
