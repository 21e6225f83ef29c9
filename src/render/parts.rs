//! What the renderer binds of a frame: grids inside the parts of a slot (a part is one
//! storage binding of at most the device's part size), how many parts a device binds and
//! how large a frame it can draw, and uploads of a frame's bytes as parts.

use super::RenderError;
use super::params::{GpuGrid, MAX_ATTRIBUTES, MAX_PARTS, PARTS_LIMIT};
use super::scoped::create_scoped;
use super::shader::{DEFAULT_PART_BYTES, MIN_PART_BYTES};
use crate::device::{DeviceCaps, MIN_STORAGE_BUFFERS_PER_STAGE};

/// One grid as the renderer sees it: `size` bytes at `offset` in `buffer`.
///
/// The buffer is the caller's (a frame-ring slot, possibly Vulkan memory shared with CUDA);
/// it needs `STORAGE` usage, and `offset` must be a multiple of 4.
/// ([`Renderer::set_grids`] binds each distinct buffer as parts; [`Renderer::set_frame`]
/// takes the parts themselves.)
#[derive(Clone, Copy, Debug)]
pub struct GridSlice<'a> {
    /// The buffer holding the grid.
    pub buffer: &'a wgpu::Buffer,
    /// Byte offset of the grid.
    pub offset: u64,
    /// Bytes of the grid (NanoVDB's grid size).
    pub size: u64,
}

/// One part of a frame slot: a buffer range bound as one storage binding.
///
/// The buffer needs `STORAGE` usage; `offset` must be a multiple of the device's
/// `min_storage_buffer_offset_alignment` and `size` a multiple of 4, at most
/// [`Renderer::part_bytes`].
#[derive(Clone, Copy, Debug)]
pub struct SlotPart<'a> {
    /// The buffer holding the part.
    pub buffer: &'a wgpu::Buffer,
    /// Byte offset of the part in `buffer`.
    pub offset: u64,
    /// Bytes of the part.
    pub size: u64,
}

/// A grid inside the parts: it starts `offset` bytes into part `part` and runs `size` bytes,
/// continuing into the following parts (each part it runs past must be exactly
/// `Renderer::part_bytes()` long).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GridInParts {
    /// Index of the part holding the grid's first byte.
    pub part: usize,
    /// Byte offset of the grid in that part (a multiple of 4).
    pub offset: u64,
    /// Bytes of the grid (NanoVDB's grid size).
    pub size: u64,
}

impl GridInParts {
    /// The grid of `size` bytes at byte `frame_offset` of a slot made of consecutive parts
    /// of `part_bytes` each (part `k` holds the slot's bytes `k·part_bytes ..
    /// (k+1)·part_bytes`).
    ///
    /// # Panics
    /// Panics if `part_bytes` is 0.
    pub fn locate(frame_offset: u64, size: u64, part_bytes: u64) -> GridInParts {
        assert!(part_bytes > 0, "parts have at least one byte");
        GridInParts {
            part: usize::try_from(frame_offset / part_bytes).unwrap_or(usize::MAX),
            offset: frame_offset % part_bytes,
            size,
        }
    }
}

/// Storage buffers the renderer binds in one shader stage besides the frame's parts: the
/// parameters, the transfer functions, the three acceleration buffers and the dispatch
/// arguments. The parameters are a read-only storage buffer, not a uniform one: Mesa 22.3's
/// lavapipe specialises a shader on the uniform values its branches read and compiles it
/// again whenever they change, keeping every copy (about 3.5 MB a frame, 2026-12-05).
pub const OWN_STORAGE_BUFFERS: u32 = 1 + 1 + 3 + 1;

/// Storage buffers the renderer's pipelines bind in one shader stage at least: its own and
/// [`MAX_PARTS`] parts.
pub const STORAGE_BUFFERS_PER_STAGE: u32 = OWN_STORAGE_BUFFERS + MAX_PARTS as u32;
// Every device supercell opens asks for at least this many (src/device).
const _: () = assert!(STORAGE_BUFFERS_PER_STAGE <= MIN_STORAGE_BUFFERS_PER_STAGE);

/// Parts a device with `per_stage` storage buffers per shader stage binds for one frame:
/// what its own buffers leave, at most [`PARTS_LIMIT`].
pub fn parts_of_device(per_stage: u32) -> usize {
    (per_stage.saturating_sub(OWN_STORAGE_BUFFERS) as usize).min(PARTS_LIMIT)
}

/// How large a frame and a grid a device binds: what [`Renderer::max_frame_bytes`] and
/// [`Renderer::max_grid_bytes`] say, worked out without building a renderer (the doctor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameCapacity {
    /// Bytes of one part ([`Renderer::part_bytes`]).
    pub part_bytes: u64,
    /// Parts bound for one frame ([`Renderer::max_parts`]).
    pub max_parts: usize,
}

impl FrameCapacity {
    /// The capacity of a device with `caps`, opened with `per_stage` storage buffers per
    /// shader stage.
    pub fn of(caps: &DeviceCaps, per_stage: u32) -> FrameCapacity {
        FrameCapacity {
            part_bytes: device_part_bytes(caps.max_storage_binding, caps.max_buffer_size),
            max_parts: parts_of_device(per_stage),
        }
    }

    /// Parts a frame (slot) of `bytes` takes.
    pub fn parts_for(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.part_bytes)
    }

    /// The largest frame bound at once.
    pub fn max_frame_bytes(&self) -> u64 {
        self.max_parts as u64 * self.part_bytes
    }

    /// The largest grid bound at once (at most 16 GiB: grids are addressed by 32-bit word).
    pub fn max_grid_bytes(&self) -> u64 {
        self.max_frame_bytes().min(4 << 32)
    }

    /// Whether a grid of `size` bytes is bound wherever it starts in a frame (at a multiple
    /// of 4 bytes): it spans at most [`max_parts`](Self::max_parts) parts and has at most
    /// 16 GiB.
    pub fn grid_fits(&self, size: u64) -> bool {
        let worst = span_of(
            0,
            self.part_bytes.saturating_sub(4),
            size,
            self.part_bytes.max(4),
        );
        size <= 4 << 32 && worst.1 < self.max_parts
    }
}

/// The part size of a device whose largest storage binding is `max_binding` and largest
/// buffer `max_buffer`: the largest power of two no larger than either, within
/// [`MIN_PART_BYTES`]..=[`DEFAULT_PART_BYTES`].
pub(super) fn device_part_bytes(max_binding: u64, max_buffer: u64) -> u64 {
    let most = max_binding.min(max_buffer).max(1);
    (1u64 << (63 - most.leading_zeros())).clamp(MIN_PART_BYTES, DEFAULT_PART_BYTES)
}

/// A frame binds at most [`MAX_ATTRIBUTES`] grids.
pub(super) fn check_grid_count(n: usize) -> Result<(), RenderError> {
    if n > MAX_ATTRIBUTES {
        return Err(RenderError::Usage(format!(
            "{n} grids given; a frame composites at most {MAX_ATTRIBUTES} attributes"
        )));
    }
    Ok(())
}

/// Where a frame's grids lie in the parts the renderer binds of it
/// ([`locate_grids`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct BoundParts {
    /// Indices of the given parts to bind, ascending: the union of the parts each grid spans
    /// (each grid's parts stay consecutive in it).
    pub(super) parts: Vec<usize>,
    /// Each attribute channel's grid, its part index counted in [`parts`](Self::parts).
    pub(super) bases: [GpuGrid; MAX_ATTRIBUTES],
}

/// The parts a grid of `size` bytes starting `offset` bytes into part `first` spans in a
/// slot of consecutive parts of `part_bytes` each: `first..=last`.
fn span_of(first: usize, offset: u64, size: u64, part_bytes: u64) -> (usize, usize) {
    let end = offset.saturating_add(size.div_ceil(4) * 4).max(offset + 1);
    let last = first.saturating_add(usize::try_from((end - 1) / part_bytes).unwrap_or(usize::MAX));
    (first, last)
}

impl FrameCapacity {
    /// Parts the grids of `ranges` (byte offset and size in a frame) span together, in a slot
    /// of consecutive parts of [`part_bytes`](Self::part_bytes) each: what the renderer binds
    /// of a frame showing them (it binds only the parts its grids span).
    pub fn parts_for_grids(&self, ranges: impl IntoIterator<Item = (u64, u64)>) -> u64 {
        let spans: Vec<(usize, usize)> = ranges
            .into_iter()
            .map(|(offset, size)| {
                let at = GridInParts::locate(offset, size, self.part_bytes);
                span_of(at.part, at.offset, size, self.part_bytes)
            })
            .collect();
        union_of(spans).len() as u64
    }
}

/// The parts of a slot (consecutive parts of `part_bytes` each) that `grids` span, sorted:
/// the ones [`Renderer::set_frame`] binds of it, and all a caller must upload.
pub fn parts_spanned(grids: &[Option<GridInParts>], part_bytes: u64) -> Vec<usize> {
    let part_bytes = part_bytes.max(1);
    union_of(
        grids
            .iter()
            .flatten()
            .map(|g| span_of(g.part, g.offset, g.size, part_bytes))
            .collect(),
    )
}

/// The sorted union of the part ranges `spans` (inclusive).
fn union_of(mut spans: Vec<(usize, usize)>) -> Vec<usize> {
    spans.sort_unstable();
    let mut out: Vec<usize> = Vec::new();
    for (first, last) in spans {
        let from = out.last().map_or(first, |&l| first.max(l + 1));
        if from <= last {
            out.extend(from..=last);
        }
    }
    out
}

/// Checks `parts` and `grids` (see [`Renderer::set_frame`]), picks the parts the grids span
/// and says where each grid lies in those, in words, as the shaders address it. More parts
/// than `max_parts` may be given: only the ones the grids span count against it.
pub(super) fn locate_grids(
    parts: &[SlotPart<'_>],
    grids: &[Option<GridInParts>],
    max_parts: usize,
    part_bytes: u64,
    offset_align: u64,
) -> Result<BoundParts, RenderError> {
    let usage = |m: String| Err(RenderError::Usage(m));
    for (k, p) in parts.iter().enumerate() {
        if p.offset % offset_align.max(4) != 0 || p.size % 4 != 0 {
            return usage(format!(
                "part {k} (offset {}, {} bytes) is not aligned: offsets are multiples of \
                 {} bytes and sizes of 4",
                p.offset,
                p.size,
                offset_align.max(4)
            ));
        }
        if p.size == 0 || p.size > part_bytes {
            return usage(format!(
                "part {k} has {} bytes; parts hold 4 to {part_bytes} bytes",
                p.size
            ));
        }
        if p.offset
            .checked_add(p.size)
            .is_none_or(|end| end > p.buffer.size())
        {
            return usage(format!(
                "part {k} (bytes {}..{}) lies outside its {}-byte buffer",
                p.offset,
                p.offset.saturating_add(p.size),
                p.buffer.size()
            ));
        }
    }
    // Each grid's first and last part.
    let mut spans: Vec<Option<(usize, usize)>> = Vec::with_capacity(grids.len());
    for (i, g) in grids.iter().enumerate() {
        let Some(g) = g else {
            spans.push(None);
            continue;
        };
        let words = g.size.div_ceil(4);
        if words == 0 || words > u64::from(u32::MAX) {
            return usage(format!(
                "grid {i} has {} bytes; a grid has 1 byte to 16 GiB",
                g.size
            ));
        }
        let Some(first) = parts.get(g.part) else {
            return usage(format!(
                "grid {i} starts in part {} of a frame of {} parts",
                g.part,
                parts.len()
            ));
        };
        if g.offset % 4 != 0 || g.offset >= first.size {
            return usage(format!(
                "grid {i} starts at byte {} of part {} ({} bytes): grids start at a multiple \
                 of 4 bytes inside their first part",
                g.offset, g.part, first.size
            ));
        }
        // Walk the parts the grid runs through.
        let (mut k, mut at, mut left) = (g.part, g.offset, words * 4);
        loop {
            let here = parts[k].size - at;
            if left <= here {
                break;
            }
            if parts[k].size != part_bytes {
                return usage(format!(
                    "grid {i} runs past the end of part {k}, which has {} bytes; parts a grid \
                     runs past have exactly {part_bytes}",
                    parts[k].size
                ));
            }
            left -= here;
            k += 1;
            at = 0;
            if k >= parts.len() {
                return usage(format!(
                    "grid {i} ({} bytes from byte {} of part {}) runs past the last of the \
                     {} parts",
                    g.size,
                    g.offset,
                    g.part,
                    parts.len()
                ));
            }
        }
        spans.push(Some((g.part, k)));
    }
    let bound = union_of(spans.iter().flatten().copied().collect());
    if bound.len() > max_parts {
        let bytes: u64 = bound.iter().map(|&k| parts[k].size).sum();
        return usage(format!(
            "the grids span {} parts ({bytes} bytes); a frame binds at most {max_parts} on \
             this device ({} bytes)",
            bound.len(),
            max_parts as u64 * part_bytes
        ));
    }
    let mut bases = [GpuGrid::default(); MAX_ATTRIBUTES];
    for (i, (g, span)) in grids.iter().zip(&spans).enumerate() {
        let (Some(g), Some((first, _))) = (g, span) else {
            continue;
        };
        // The grid's parts are consecutive in `bound` (a union of whole ranges, sorted).
        let part = bound
            .binary_search(first)
            .expect("a grid's parts are bound");
        bases[i] = GpuGrid {
            part: part as u32,
            offset_words: (g.offset / 4) as u32,
            words: g.size.div_ceil(4) as u32,
            pad: 0,
        };
    }
    Ok(BoundParts {
        parts: bound,
        bases,
    })
}

/// The parts and grid locations that bind `grids` (slices of caller buffers, as
/// [`Renderer::set_grids`] takes them): each distinct buffer as consecutive parts of
/// `part_bytes` over the range its grids span, or, where that takes more parts (grids far
/// apart in a large buffer), each grid as its own run of parts; at most `max_parts` parts.
/// Offsets are rounded down to `align`.
pub(super) fn parts_of_slices<'a>(
    grids: &[Option<GridSlice<'a>>],
    part_bytes: u64,
    align: u64,
    max_parts: usize,
) -> Result<(Vec<SlotPart<'a>>, Vec<Option<GridInParts>>), RenderError> {
    // Each grid's buffer and byte range.
    let mut ranges: Vec<Option<(&wgpu::Buffer, u64, u64)>> = Vec::new();
    for (i, g) in grids.iter().enumerate() {
        let Some(g) = g else {
            ranges.push(None);
            continue;
        };
        let end = g
            .offset
            .checked_add(g.size.div_ceil(4) * 4)
            .filter(|&end| end <= g.buffer.size() && g.size > 0)
            .ok_or_else(|| {
                RenderError::Usage(format!(
                    "grid {i} (bytes {}..{}) lies outside its {}-byte buffer or is empty",
                    g.offset,
                    g.offset.saturating_add(g.size),
                    g.buffer.size()
                ))
            })?;
        ranges.push(Some((g.buffer, g.offset - g.offset % align, end)));
    }
    // Runs of parts: grids of one buffer, in offset order, share a run while that takes
    // no more parts than giving the next one a run of its own (grids close together
    // share parts, usually one; grids far apart in a large buffer get their own).
    let parts_of = |lo: u64, hi: u64| (hi - lo).div_ceil(part_bytes);
    let mut order: Vec<usize> = (0..ranges.len()).filter(|&i| ranges[i].is_some()).collect();
    order.sort_by_key(|&i| ranges[i].map(|r| r.1));
    let mut runs: Vec<(&wgpu::Buffer, u64, u64)> = Vec::new();
    let mut run_of: Vec<Option<usize>> = vec![None; ranges.len()];
    for &i in &order {
        let Some((buffer, lo, hi)) = ranges[i] else {
            continue;
        };
        let joined = runs.iter().rposition(|r| {
            r.0 == buffer && parts_of(r.1, r.2.max(hi)) <= parts_of(r.1, r.2) + parts_of(lo, hi)
        });
        run_of[i] = Some(match joined {
            Some(k) => {
                runs[k].2 = runs[k].2.max(hi);
                k
            }
            None => {
                runs.push((buffer, lo, hi));
                runs.len() - 1
            }
        });
    }
    let mut parts = Vec::new();
    let mut first_part = Vec::new();
    for &(buffer, lo, hi) in &runs {
        first_part.push(parts.len());
        let mut at = lo;
        while at < hi {
            let size = part_bytes.min(hi - at);
            parts.push(SlotPart {
                buffer,
                offset: at,
                size,
            });
            at += size;
        }
    }
    if parts.len() > max_parts {
        return Err(RenderError::Usage(format!(
            "the grids span {} parts of {part_bytes} bytes; a frame binds at most \
             {max_parts} on this device",
            parts.len(),
        )));
    }
    let located = grids
        .iter()
        .zip(&run_of)
        .map(|(g, k)| {
            let (g, k) = (g.as_ref()?, (*k)?);
            let mut at = GridInParts::locate(g.offset - runs[k].1, g.size, part_bytes);
            at.part += first_part[k];
            Some(at)
        })
        .collect();
    Ok((parts, located))
}

/// Uploads bytes (a frame's slot image) into a new storage buffer, for callers without a
/// frame ring of their own (tests, the portable path). The size is rounded up to 4 bytes.
///
/// # Panics
/// Panics if the device refuses the buffer; bytes whose size comes from input go through
/// [`try_upload_slot`].
pub fn upload_slot(device: &wgpu::Device, queue: &wgpu::Queue, bytes: &[u8]) -> wgpu::Buffer {
    try_upload_slot(device, queue, bytes).expect("the device holds the slot buffer")
}

/// [`upload_slot`] for bytes of any size: a slot over the device's largest buffer, or one
/// the device has no memory for, is an error naming both sizes.
pub fn try_upload_slot(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    bytes: &[u8],
) -> Result<wgpu::Buffer, RenderError> {
    let size = (bytes.len() as u64).div_ceil(4).max(1) * 4;
    let max = device.limits().max_buffer_size;
    if size > max {
        return Err(RenderError::Usage(format!(
            "a frame of {size} bytes exceeds this device's largest buffer ({max} bytes)"
        )));
    }
    let buffer = create_scoped(
        device,
        || format!("creating a {size}-byte buffer for the frame"),
        || {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("supercell slot"),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            })
        },
    )?;
    let whole = bytes.len() / 4 * 4;
    if whole > 0 {
        queue.write_buffer(&buffer, 0, &bytes[..whole]);
    }
    if whole < bytes.len() {
        let mut tail = [0u8; 4];
        tail[..bytes.len() - whole].copy_from_slice(&bytes[whole..]);
        queue.write_buffer(&buffer, whole as u64, &tail);
    }
    Ok(buffer)
}

/// Uploads a frame's slot image as parts of `part_bytes` (the renderer's
/// [`Renderer::part_bytes`]), one buffer each, for [`Renderer::set_frame`]: every part but
/// the last holds `part_bytes`. A part the device has no memory for is an error.
pub fn try_upload_parts(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    bytes: &[u8],
    part_bytes: u64,
) -> Result<Vec<wgpu::Buffer>, RenderError> {
    let chunk = usize::try_from(part_bytes.max(4)).unwrap_or(usize::MAX);
    if bytes.is_empty() {
        return Ok(vec![try_upload_slot(device, queue, bytes)?]);
    }
    bytes
        .chunks(chunk)
        .map(|part| try_upload_slot(device, queue, part))
        .collect()
}

/// `buffers` (as [`try_upload_parts`] makes them) as the frame's parts: each whole, at most
/// `part_bytes`.
pub fn parts_of_buffers(buffers: &[wgpu::Buffer], part_bytes: u64) -> Vec<SlotPart<'_>> {
    buffers
        .iter()
        .map(|buffer| SlotPart {
            buffer,
            offset: 0,
            size: buffer.size().min(part_bytes),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_size_is_the_largest_power_of_two_a_binding_and_a_buffer_hold() {
        // The H200: 4292870144-byte bindings and buffers.
        assert_eq!(device_part_bytes(4_292_870_144, 4_292_870_144), 1 << 31);
        // Mesa 22's lavapipe: 128 MiB bindings, 2 GiB buffers.
        assert_eq!(device_part_bytes(1 << 27, 1 << 31), 1 << 27);
        assert_eq!(device_part_bytes((1 << 27) + 5, 1 << 31), 1 << 27);
        // Never above 2 GiB (word offsets in a part stay below 2^29) nor below 64 KiB.
        assert_eq!(device_part_bytes(u64::MAX, u64::MAX), DEFAULT_PART_BYTES);
        assert_eq!(device_part_bytes(1000, 1 << 40), MIN_PART_BYTES);
    }

    #[test]
    fn the_parts_bound_are_the_union_of_those_the_grids_span() {
        assert_eq!(union_of(vec![]), Vec::<usize>::new());
        assert_eq!(union_of(vec![(0, 0)]), vec![0]);
        // Overlapping, nested, repeated and out-of-order spans.
        assert_eq!(
            union_of(vec![(30, 32), (3, 5), (4, 4), (5, 7), (3, 5)]),
            vec![3, 4, 5, 6, 7, 30, 31, 32]
        );
        let p = 1u64 << 27;
        // A grid ending exactly at a part's end spans that part only; one more byte (a word)
        // spans the next.
        assert_eq!(span_of(2, 0, p, p), (2, 2));
        assert_eq!(span_of(2, p - 4, 4, p), (2, 2));
        assert_eq!(span_of(2, p - 4, 5, p), (2, 3));
        assert_eq!(span_of(0, 8, 3 * p, p), (0, 3));
    }

    #[test]
    fn capacity_counts_the_parts_the_shown_grids_span() {
        let lavapipe = FrameCapacity {
            part_bytes: 1 << 27,
            max_parts: 27,
        };
        let p = lavapipe.part_bytes;
        // Two small grids in one part, one past 4 GiB straddling two parts, one across
        // three whole parts and one more in part 1.
        assert_eq!(lavapipe.parts_for_grids([(0, 100), (4096, 100)]), 1);
        assert_eq!(lavapipe.parts_for_grids([(33 * p - 8, 16)]), 2);
        assert_eq!(
            lavapipe.parts_for_grids([(0, 100), (33 * p - 8, 16), (p, 3 * p), (p + 8, 8)]),
            1 + 2 + 3
        );
        // A frame over 4 GiB needs its whole size in parts only when all of it is shown.
        let frame = 36 * p;
        assert!(lavapipe.parts_for(frame) > lavapipe.max_parts as u64);
        assert_eq!(lavapipe.parts_for_grids([(0, frame)]), 36);
        assert_eq!(lavapipe.parts_for_grids(std::iter::empty()), 0);
    }

    #[test]
    fn the_pipelines_fit_the_storage_buffers_every_device_is_opened_with() {
        assert_eq!(STORAGE_BUFFERS_PER_STAGE, 14);
    }

    #[test]
    fn parts_follow_the_devices_storage_buffers_per_stage() {
        // The fewest a device is opened with: 8 parts beside the renderer's 6 buffers.
        assert_eq!(parts_of_device(MIN_STORAGE_BUFFERS_PER_STAGE), MAX_PARTS);
        // Mesa 22's lavapipe offers 32.
        assert_eq!(parts_of_device(32), 26);
        // Large limits (the H200's) stop at PARTS_LIMIT.
        assert_eq!(parts_of_device(1 << 20), PARTS_LIMIT);
    }
}
