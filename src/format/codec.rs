//! The compression framing NanoVDB's `io` uses for grid payloads in `.nvdb` files.
//!
//! From `nanovdb/io/IO.h` (`Internal::write` / `Internal::read`, the same in 32.3–32.9):
//!
//! - **None**: the grid bytes as they are; the payload is exactly `gridSize` bytes.
//! - **Zip**: a u64 (little-endian) compressed size `n`, then `n` bytes of a zlib stream
//!   (zlib's `compress()`: zlib header, deflate, Adler-32). One stream per grid.
//! - **Blosc**: the grid is cut into chunks of at most 2^30 bytes; each chunk is a u64 size
//!   `n` followed by an `n`-byte c-blosc 1.x buffer (NanoVDB writes LZ4, level 9, byte
//!   shuffle, type size 4, block size 256 KiB). Chunk `i` decompresses to
//!   `min(gridSize - i * 2^30, 2^30)` bytes.
//!
//! A payload's extent is given by its own size prefixes, as NanoVDB's sequential readers
//! (`readGrids`, `readGrid(-1)`) find it: they read the prefixes and never look at the
//! metadata's `fileSize` (only their seeking readers skip by it). NanoVDB's writer records
//! `fileSize` as prefixes plus data; warp-lang's `Volume.save_to_nvdb` (1.19 and earlier)
//! records the compressed bytes alone, 8 bytes (one prefix) short. See [`payload_extent`].
//!
//! Decoding is bounded: the caller gives the expected size (from file metadata, checked
//! against [`MAX_GRID_BYTES`] and against the memory this process can get), the output is
//! allocated once at that size and never grows past it, and a compressed input must be at
//! least `1 / MAX_RATIO` of what it claims to expand to, so a corrupt size field cannot make
//! us allocate more than about `MAX_RATIO` times the file's real size.

use super::head_claims::{HEAD_BYTES, check_head_claims};
use super::layout as l;
use super::le::LeBytes;
use super::types::Codec;
use flate2::Compression;
use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use std::ffi::c_void;
use std::io::{Read, Write};

/// NanoVDB's Blosc chunk size (`io::MAX_SIZE`, 1 GiB).
pub const BLOSC_CHUNK: u64 = 1 << 30;
/// Largest grid this reader decompresses (64 GiB; GPU bindings stop at 4 GiB anyway).
pub const MAX_GRID_BYTES: u64 = 1 << 36;
/// Largest expansion accepted from compressed data. Deflate cannot exceed 1032:1 and LZ4 about
/// 255:1, so real NanoVDB payloads stay far below this.
pub const MAX_RATIO: u64 = 2048;
/// c-blosc's header size (`BLOSC_MIN_HEADER_LENGTH`) and maximal overhead.
const BLOSC_HEADER: usize = 16;

/// What went wrong decoding or encoding a payload; the caller adds file and grid context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodecError(pub String);

impl std::fmt::Display for CodecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn err<T>(msg: impl Into<String>) -> Result<T, CodecError> {
    Err(CodecError(msg.into()))
}

/// Decodes one grid payload (exactly the `fileSize` bytes the file metadata gives) into the
/// `grid_size`-byte grid buffer.
///
/// The output is allocated once, at the size the metadata claims, and only after checking
/// that this process can get that much memory (see [`crate::memory`]); decompression stops
/// at the claimed size, so a stream that expands further costs no more than the claim.
pub fn decode(codec: Codec, payload: &[u8], grid_size: u64) -> Result<Vec<u8>, CodecError> {
    decode_checked(codec, payload, grid_size, |_, remaining| Ok(remaining))
}

/// [`decode`] for a NanoVDB grid: as soon as the first bytes are out, they must start a
/// grid header (a grid magic, and the grid size the file metadata claims) whose tree header
/// explains that size (see [`super::head_claims`]), so a payload that is not a grid (a
/// decompression bomb of zeros, say) or a real header with a raised size is rejected after
/// inflating a few hundred bytes rather than its whole claim. In a batch (several grids
/// back to back under one claim, as fVDB saves them) each grid's header is checked the same
/// way as the ZIP stream reaches it.
pub fn decode_grid(codec: Codec, payload: &[u8], grid_size: u64) -> Result<Vec<u8>, CodecError> {
    decode_checked(codec, payload, grid_size, check_grid_head)
}

/// Checks the head of a grid that has `remaining` bytes of the claim left to fill, and
/// returns the grid's own size (all of `remaining`, or less for a grid of a batch).
fn check_grid_head(head: &[u8], remaining: u64) -> Result<u64, CodecError> {
    let magic = &head[..8.min(head.len())];
    if magic != l::MAGIC_NUMB_BYTES && magic != l::MAGIC_GRID_BYTES {
        return err(format!(
            "decompressed data does not start with a grid magic (found {:?})",
            String::from_utf8_lossy(magic)
        ));
    }
    // `head` may be shorter than the header (a grid that small fails its own parse
    // later); only what is there is compared.
    let le = LeBytes::new(head);
    // A buffer of several grids back to back (fVDB saves a batch under one metadata
    // record) starts with a grid smaller than the whole; the file reader splits it.
    let batch = le
        .u32_at(l::GRID_OFF_GRID_COUNT as usize, "grid count")
        .is_ok_and(|n| n > 1);
    let Ok(size) = le.u64_at(l::GRID_OFF_GRID_SIZE as usize, "grid size") else {
        return Ok(remaining);
    };
    if size != remaining && !(batch && size < remaining) {
        return err(format!(
            "decompressed grid header says {size} bytes, file metadata {remaining}"
        ));
    }
    if head.len() as u64 >= HEAD_CHECK {
        check_head_claims(head, size)
            .map_err(|e| CodecError(format!("decompressed grid header: {e}")))?;
    }
    Ok(size.max(1))
}

/// Bytes of the decompressed output [`decode_grid`] checks before inflating the rest: the
/// grid and tree headers and the root's header.
const HEAD_CHECK: u64 = HEAD_BYTES;

/// A check of the first bytes of each grid (given the bytes of the claim left to fill); it
/// returns how many bytes that grid takes.
trait HeadCheck: FnMut(&[u8], u64) -> Result<u64, CodecError> {}
impl<F: FnMut(&[u8], u64) -> Result<u64, CodecError>> HeadCheck for F {}

fn decode_checked(
    codec: Codec,
    payload: &[u8],
    grid_size: u64,
    mut check_head: impl HeadCheck,
) -> Result<Vec<u8>, CodecError> {
    if grid_size > MAX_GRID_BYTES {
        return err(format!(
            "grid size {grid_size} exceeds the {MAX_GRID_BYTES}-byte limit"
        ));
    }
    match codec {
        Codec::None => {
            if payload.len() as u64 != grid_size {
                return err(format!(
                    "uncompressed payload has {} bytes but the grid size is {grid_size}",
                    payload.len()
                ));
            }
            check_head(
                &payload[..(HEAD_CHECK as usize).min(payload.len())],
                grid_size,
            )?;
            Ok(payload.to_vec())
        }
        Codec::Zip => decode_zip(payload, grid_size, check_head),
        Codec::Blosc => decode_blosc(payload, grid_size, check_head),
    }
}

/// An empty buffer with room for exactly the `grid_size` bytes a compressed grid claims, if
/// this process can get them.
fn output_buffer(codec: &str, grid_size: u64) -> Result<Vec<u8>, CodecError> {
    let len = usize::try_from(grid_size)
        .map_err(|_| CodecError(format!("grid size {grid_size} does not fit in memory")))?;
    crate::memory::try_vec_with_capacity(|| format!("the decompressed {codec} grid"), len)
        .map_err(|e| CodecError(e.to_string()))
}

fn check_ratio(compressed: u64, expanded: u64, what: &str) -> Result<(), CodecError> {
    if expanded > compressed.saturating_mul(MAX_RATIO).saturating_add(4096) {
        return err(format!(
            "{what}: {compressed} compressed bytes cannot hold {expanded} bytes (ratio over {MAX_RATIO}:1)"
        ));
    }
    Ok(())
}

fn decode_zip(
    payload: &[u8],
    grid_size: u64,
    mut check_head: impl HeadCheck,
) -> Result<Vec<u8>, CodecError> {
    let Ok(n) = LeBytes::new(payload).u64_at(0, "ZIP size prefix") else {
        return err("ZIP payload is shorter than its 8-byte size prefix");
    };
    let avail = payload.len() as u64 - 8;
    if n != avail {
        return err(format!(
            "ZIP size prefix says {n} compressed bytes but the payload holds {avail}"
        ));
    }
    check_ratio(n, grid_size, "ZIP")?;
    let mut out = output_buffer("ZIP", grid_size)?;
    let mut dec = ZlibDecoder::new(&payload[8..]);
    let corrupt = |e: std::io::Error| CodecError(format!("ZIP stream is corrupt: {e}"));
    // Each grid's head first (one grid, or each of a batch): a stream that is no grid, or
    // whose header claims more than its nodes explain, stops there.
    let mut next_grid = 0u64;
    while next_grid < grid_size {
        let head_end = (next_grid + HEAD_CHECK).min(grid_size);
        (&mut dec)
            .take(head_end - out.len() as u64)
            .read_to_end(&mut out)
            .map_err(corrupt)?;
        if out.len() as u64 != head_end {
            break;
        }
        next_grid += check_head(&out[next_grid as usize..], grid_size - next_grid)?;
        if next_grid > out.len() as u64 {
            // Inflate up to the next grid's header, at most the claim.
            let to = next_grid.min(grid_size);
            (&mut dec)
                .take(to - out.len() as u64)
                .read_to_end(&mut out)
                .map_err(corrupt)?;
            if (out.len() as u64) < to {
                break;
            }
        }
    }
    // Then at most the rest of the claimed size, into the buffer allocated for it...
    let done = out.len() as u64;
    (&mut dec)
        .take(grid_size - done)
        .read_to_end(&mut out)
        .map_err(corrupt)?;
    if (out.len() as u64) < grid_size {
        return err(format!(
            "ZIP stream inflates to {} bytes, expected {grid_size}",
            out.len()
        ));
    }
    // ...then one byte more, into a byte of its own: a stream longer than its claim is
    // found without growing the buffer.
    let mut probe = [0u8; 1];
    let extra = dec.read(&mut probe).map_err(corrupt)?;
    if extra != 0 {
        return err(format!(
            "ZIP stream inflates to more than the {grid_size} bytes expected"
        ));
    }
    Ok(out)
}

fn decode_blosc(
    payload: &[u8],
    grid_size: u64,
    mut check_head: impl HeadCheck,
) -> Result<Vec<u8>, CodecError> {
    // The first grid's head is taken from the first chunk alone (`blosc_getitem` decodes
    // only the blocks that hold it) and checked before any chunk is decompressed. Later
    // grids of a batch are checked by the file reader once their chunks are out.
    let mut head_checked = false;
    let mut out = output_buffer("Blosc", grid_size)?;
    let mut pos = 0usize;
    let mut residual = grid_size;
    let mut chunk_index = 0u64;
    // NanoVDB writes at least one chunk, even for an (impossible) empty grid.
    loop {
        let what = format!("Blosc chunk {chunk_index}");
        let Ok(n) = LeBytes::new(payload).u64_at(pos, "Blosc chunk size") else {
            return err(format!(
                "{what}: payload ends before its 8-byte size prefix"
            ));
        };
        let start = pos + 8;
        let end = usize::try_from(n)
            .ok()
            .and_then(|n| start.checked_add(n))
            .filter(|&e| e <= payload.len())
            .ok_or_else(|| {
                CodecError(format!(
                    "{what}: size prefix {n} runs past the payload's {} bytes",
                    payload.len()
                ))
            })?;
        let src = &payload[start..end];
        let chunk = residual.min(BLOSC_CHUNK);
        check_ratio(n, chunk, &what)?;
        if !head_checked {
            let head = blosc_head(src, HEAD_CHECK.min(chunk) as usize)
                .map_err(|e| CodecError(format!("{what}: {e}")))?;
            check_head(&head, grid_size)?;
            head_checked = true;
        }
        let done = out.len();
        out.resize(done + chunk as usize, 0);
        blosc_decompress(src, &mut out[done..]).map_err(|e| CodecError(format!("{what}: {e}")))?;
        residual -= chunk;
        pos = end;
        chunk_index += 1;
        if residual == 0 {
            break;
        }
    }
    if pos != payload.len() {
        return err(format!(
            "Blosc payload has {} bytes after its last chunk",
            payload.len() - pos
        ));
    }
    Ok(out)
}

/// The first `len` bytes that the c-blosc buffer `src` expands to, decoding only the blocks
/// that hold them.
fn blosc_head(src: &[u8], len: usize) -> Result<Vec<u8>, String> {
    let total = blosc_validated_size(src)?;
    let len = len.min(total);
    // Items of the buffer's type size (its header's fourth byte), enough to cover `len`.
    let typesize = usize::from(src[3]).max(1);
    let items = len.div_ceil(typesize);
    let mut head = vec![0u8; items * typesize];
    // SAFETY: `src` was validated (its header's sizes agree with its length); `head` has
    // room for `items` items of `typesize` bytes, which c-blosc writes at most.
    let got = unsafe {
        blosc_src::blosc_getitem(
            src.as_ptr().cast::<c_void>(),
            0,
            items as std::os::raw::c_int,
            head.as_mut_ptr().cast::<c_void>(),
        )
    };
    if got < 0 || (got as usize) < len {
        return Err(format!("Blosc decompression failed (code {got})"));
    }
    head.truncate(len);
    Ok(head)
}

/// The size `src`, a c-blosc buffer, expands to, after checking its header against its
/// length.
fn blosc_validated_size(src: &[u8]) -> Result<usize, String> {
    if src.len() < BLOSC_HEADER {
        return Err(format!(
            "{} bytes is shorter than a Blosc header",
            src.len()
        ));
    }
    let mut nbytes = 0usize;
    // SAFETY: `src` holds at least the 16 header bytes; `blosc_cbuffer_validate` reads only
    // those and checks that the header's compressed size equals `src.len()`, which makes the
    // decompressor stay inside `src` (its documented precondition).
    let ok = unsafe {
        blosc_src::blosc_cbuffer_validate(src.as_ptr().cast::<c_void>(), src.len(), &mut nbytes)
    };
    if ok != 0 {
        return Err("invalid Blosc header (sizes disagree with the chunk length)".into());
    }
    Ok(nbytes)
}

/// Decompresses one c-blosc buffer that must expand to exactly `dst.len()` bytes, into `dst`
/// (NanoVDB's Blosc chunks and OpenVDB's Blosc blocks alike).
pub(crate) fn blosc_decompress(src: &[u8], dst: &mut [u8]) -> Result<(), String> {
    let expected = dst.len();
    let nbytes = blosc_validated_size(src)?;
    if nbytes != expected {
        return Err(format!(
            "Blosc header says {nbytes} bytes, expected {expected}"
        ));
    }
    // SAFETY: `src` was validated above; `dst` has `expected` writable bytes and the call is
    // told so. One internal thread: the context variant keeps no global state.
    let got = unsafe {
        blosc_src::blosc_decompress_ctx(
            src.as_ptr().cast::<c_void>(),
            dst.as_mut_ptr().cast::<c_void>(),
            dst.len(),
            1,
        )
    };
    if got < 0 || got as usize != expected {
        return Err(format!("Blosc decompression failed (code {got})"));
    }
    Ok(())
}

/// Where one grid's payload ends, found by walking its size prefixes (see the module
/// documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PayloadExtent {
    /// Bytes of the payload: the prefixes and the compressed data they frame (for
    /// [`Codec::None`], the grid size).
    pub len: u64,
    /// Number of 8-byte size prefixes inside it (0 for [`Codec::None`], 1 for ZIP, one per
    /// chunk for Blosc).
    pub prefixes: u64,
}

impl PayloadExtent {
    /// Whether `file_size` (the metadata's record of this payload) is one that a known
    /// writer stores: the whole extent (NanoVDB), or the extent without its size prefixes
    /// (warp-lang, which records only the compressed bytes).
    pub fn accepts_file_size(&self, file_size: u64) -> bool {
        file_size == self.len || (self.prefixes > 0 && file_size == self.len - 8 * self.prefixes)
    }
}

/// Finds the extent of the grid payload that starts at `rest[0]` from its size prefixes, as
/// NanoVDB's sequential reader does: ZIP is one prefixed stream, Blosc one prefixed chunk per
/// started GiB of the `grid_size`-byte grid, an uncompressed grid is `grid_size` bytes. Every
/// prefix must lie, with the data it frames, inside `rest`.
pub fn payload_extent(
    codec: Codec,
    rest: &[u8],
    grid_size: u64,
) -> Result<PayloadExtent, CodecError> {
    let avail = rest.len() as u64;
    let framed = |at: u64, what: &dyn Fn() -> String| -> Result<u64, CodecError> {
        let Ok(n) = LeBytes::new(rest).u64_at(at as usize, "size prefix") else {
            return err(format!(
                "{}: the file ends before its 8-byte size prefix ({} bytes left)",
                what(),
                avail - at.min(avail)
            ));
        };
        match (at + 8).checked_add(n) {
            Some(end) if end <= avail => Ok(end),
            _ => err(format!(
                "{}: size prefix {n} runs past the end of the file ({} bytes left after it)",
                what(),
                avail.saturating_sub(at + 8)
            )),
        }
    };
    match codec {
        Codec::None => {
            if grid_size > avail {
                return err(format!(
                    "uncompressed grid of {grid_size} bytes runs past the end of the file ({avail} bytes left)"
                ));
            }
            Ok(PayloadExtent {
                len: grid_size,
                prefixes: 0,
            })
        }
        Codec::Zip => Ok(PayloadExtent {
            len: framed(0, &|| "ZIP stream".into())?,
            prefixes: 1,
        }),
        Codec::Blosc => {
            let chunks = grid_size.div_ceil(BLOSC_CHUNK).max(1);
            let mut at = 0u64;
            for i in 0..chunks {
                // Every prefix takes 8 bytes, so the loop ends long before a corrupt grid
                // size's chunk count could matter.
                at = framed(at, &|| format!("Blosc chunk {i}"))?;
            }
            Ok(PayloadExtent {
                len: at,
                prefixes: chunks,
            })
        }
    }
}

/// Encodes one grid buffer as NanoVDB writes it with `codec`.
pub fn encode(codec: Codec, grid: &[u8]) -> Result<Vec<u8>, CodecError> {
    match codec {
        Codec::None => Ok(grid.to_vec()),
        Codec::Zip => {
            // NanoVDB calls zlib's compress(), i.e. the default level.
            let mut enc = ZlibEncoder::new(Vec::new(), Compression::default());
            enc.write_all(grid)
                .map_err(|e| CodecError(format!("ZIP compression failed: {e}")))?;
            let z = enc
                .finish()
                .map_err(|e| CodecError(format!("ZIP compression failed: {e}")))?;
            let mut out = Vec::with_capacity(z.len() + 8);
            out.extend_from_slice(&(z.len() as u64).to_le_bytes());
            out.extend_from_slice(&z);
            Ok(out)
        }
        Codec::Blosc => {
            let mut out = Vec::new();
            let chunks: Vec<&[u8]> = if grid.is_empty() {
                vec![grid]
            } else {
                grid.chunks(BLOSC_CHUNK as usize).collect()
            };
            for chunk in chunks {
                let c = blosc_compress(chunk)?;
                out.extend_from_slice(&(c.len() as u64).to_le_bytes());
                out.extend_from_slice(&c);
            }
            Ok(out)
        }
    }
}

fn blosc_compress(src: &[u8]) -> Result<Vec<u8>, CodecError> {
    let mut dst = vec![0u8; src.len() + BLOSC_HEADER];
    // SAFETY: `src` and `dst` are valid for the lengths passed; the compressor name is a
    // NUL-terminated constant. Parameters as NanoVDB's writer: level 9, byte shuffle,
    // type size 4 (float), LZ4, 256 KiB blocks, one thread.
    let n = unsafe {
        blosc_src::blosc_compress_ctx(
            9,
            1,
            4,
            src.len(),
            src.as_ptr().cast::<c_void>(),
            dst.as_mut_ptr().cast::<c_void>(),
            dst.len(),
            c"lz4".as_ptr(),
            1 << 18,
            1,
        )
    };
    if n <= 0 {
        return Err(CodecError(format!("Blosc compression failed (code {n})")));
    }
    dst.truncate(n as usize);
    Ok(dst)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| ((i * 7919) % 251) as u8 & if i % 3 == 0 { 0 } else { 0xff })
            .collect()
    }

    #[test]
    fn roundtrip_all_codecs() {
        for codec in [Codec::None, Codec::Zip, Codec::Blosc] {
            for len in [736usize, 4096, 100_000] {
                let g = sample(len);
                let e = encode(codec, &g).unwrap();
                assert_eq!(decode(codec, &e, len as u64).unwrap(), g, "{codec} {len}");
            }
        }
    }

    #[test]
    fn corrupt_inputs_are_errors() {
        let g = sample(50_000);
        for codec in [Codec::Zip, Codec::Blosc] {
            let e = encode(codec, &g).unwrap();
            // Wrong expected size, truncation, flipped bytes, absurd sizes: errors, no panic.
            assert!(decode(codec, &e, 49_999).is_err());
            assert!(decode(codec, &e, 50_001).is_err());
            assert!(decode(codec, &e, u64::MAX).is_err());
            assert!(decode(codec, &e, 1 << 40).is_err());
            for cut in [0, 7, 8, 9, 20, e.len() / 2, e.len() - 1] {
                assert!(
                    decode(codec, &e[..cut], 50_000).is_err(),
                    "{codec} cut {cut}"
                );
            }
            for i in (0..e.len()).step_by(97).chain(0..40) {
                let mut b = e.clone();
                b[i] ^= 0x5a;
                // May or may not decode (flips inside the data of a stored block are
                // invisible to Blosc), but never panics or overruns.
                let _ = decode(codec, &b, 50_000);
            }
            let mut huge = e.clone();
            huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
            assert!(decode(codec, &huge, 50_000).is_err());
        }
        assert!(decode(Codec::None, &g, 49_999).is_err());
    }

    #[test]
    fn decode_grid_checks_the_head_before_the_rest() {
        let mut g = vec![0u8; 1 << 20];
        for codec in [Codec::None, Codec::Zip, Codec::Blosc] {
            let len = g.len() as u64;
            // Zeros: no grid magic.
            let msg = decode_grid(codec, &encode(codec, &g).unwrap(), len)
                .unwrap_err()
                .0;
            assert!(msg.contains("grid magic"), "{codec}: {msg}");
            // A magic, but a header size other than the metadata's.
            g[..8].copy_from_slice(&l::MAGIC_GRID_BYTES);
            g[32..40].copy_from_slice(&(len * 2).to_le_bytes());
            let msg = decode_grid(codec, &encode(codec, &g).unwrap(), len)
                .unwrap_err()
                .0;
            assert!(
                msg.contains(&format!("says {} bytes", len * 2)),
                "{codec}: {msg}"
            );
            g.fill(0);
        }
        // A real grid decodes; the same header with its size raised (zeros after the
        // nodes, as a bomb would be) is refused from the head's node counts, before the
        // rest is inflated.
        use crate::format::{BuildOptions, LeafBrick, SparseVolume, build_grid};
        let volume = SparseVolume {
            background: 0.0,
            bricks: (0..4)
                .map(|i| LeafBrick::filled([8 * i, 0, 0], i as f32))
                .collect(),
        };
        let real = build_grid(&volume, &BuildOptions::default()).unwrap();
        let mut raised = real.clone();
        raised.resize(real.len() * 64, 0);
        let claim = raised.len() as u64;
        raised[32..40].copy_from_slice(&claim.to_le_bytes());
        for codec in [Codec::None, Codec::Zip, Codec::Blosc] {
            let len = real.len() as u64;
            assert_eq!(
                decode_grid(codec, &encode(codec, &real).unwrap(), len).unwrap(),
                real
            );
            let msg = decode_grid(codec, &encode(codec, &raised).unwrap(), claim)
                .unwrap_err()
                .0;
            assert!(
                msg.contains(&format!("claims {claim} bytes, but its nodes"))
                    && msg.contains(&format!("end by byte {len}")),
                "{codec}: {msg}"
            );
        }
    }

    #[test]
    fn payload_extent_follows_the_size_prefixes() {
        let g = sample(50_000);
        for codec in [Codec::None, Codec::Zip, Codec::Blosc] {
            let e = encode(codec, &g).unwrap();
            // Trailing bytes (the next grid's payload) are not part of the extent.
            let mut with_next = e.clone();
            with_next.extend_from_slice(&[7u8; 100]);
            let x = payload_extent(codec, &with_next, 50_000).unwrap();
            assert_eq!(x.len, e.len() as u64, "{codec}");
            let prefixes = u64::from(codec != Codec::None);
            assert_eq!(x.prefixes, prefixes, "{codec}");
            // NanoVDB's record and warp-lang's (no prefix) are accepted, nothing else.
            assert!(x.accepts_file_size(x.len));
            assert_eq!(x.accepts_file_size(x.len - 8), codec != Codec::None);
            for wrong in [0, x.len - 1, x.len + 1, x.len - 16, u64::MAX] {
                assert!(!x.accepts_file_size(wrong), "{codec} {wrong}");
            }
            // Cut anywhere inside: an error, never a panic.
            for cut in [0, 4, 8, 9, e.len() / 2, e.len() - 1] {
                assert!(
                    payload_extent(codec, &e[..cut], 50_000).is_err(),
                    "{codec} cut {cut}"
                );
            }
        }
        let mut e = encode(Codec::Zip, &g).unwrap();
        e[..8].copy_from_slice(&u64::MAX.to_le_bytes());
        let msg = payload_extent(Codec::Zip, &e, 50_000).unwrap_err().0;
        assert!(msg.contains("runs past the end"), "{msg}");
        // A grid size claiming 2^40 chunks walks only as far as the bytes go.
        let e = encode(Codec::Blosc, &g).unwrap();
        assert!(payload_extent(Codec::Blosc, &e, u64::MAX).is_err());
    }

    #[test]
    fn output_is_allocated_once_at_the_claimed_size() {
        let g = sample(300_000);
        for codec in [Codec::Zip, Codec::Blosc] {
            let e = encode(codec, &g).unwrap();
            let out = decode(codec, &e, g.len() as u64).unwrap();
            assert_eq!(out.capacity(), g.len(), "{codec}: the buffer never grew");
        }
        // A stream that inflates past its claim stops one byte after it.
        let e = encode(Codec::Zip, &g).unwrap();
        let msg = decode(Codec::Zip, &e, 100_000).unwrap_err().0;
        assert!(msg.contains("more than the 100000 bytes"), "{msg}");
    }
}
