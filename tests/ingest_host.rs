//! CI (no GPU): striped datasets read back through the host engines (portable and
//! cpu-only), with io_uring and with the pread fallback, O_DIRECT into aligned slots,
//! byte-exact against what was written; plus error handling and the frame ring driven by
//! the scheduler.

mod test_bytes;
mod test_stream;
use test_bytes::xorshift_bytes as payload;

use std::path::Path;
use std::time::{Duration, Instant};

use supercell::dataset::Dataset;
use supercell::gpu::{FrameRing, SlotLayout};
use supercell::ingest::{
    Engine, EngineConfig, EngineKind, IngestEngine, IngestError, IoBackend, IoMode, ReadExtent,
    ReadProgress, ReadRequest, Source, io_uring_probe,
};
use supercell::stream::FrameStream;

const PAGE: usize = 4096;

/// Writes a dataset of `frames` frames (two attributes of odd sizes) over `lanes` lanes
/// with a small chunk, returning each frame's expected slot image.
fn make_dataset(dir: &Path, frames: usize, lanes: u32, chunk: u64) -> Vec<Vec<u8>> {
    test_bytes::opaque_dataset(dir, frames, lanes, chunk, "ingest test", |f, g| {
        let len = [50_000 + f * 7_777, 123_456 - f * 1_111][g];
        (f as u64 * 2 + 1 + g as u64, len)
    })
}

fn backends() -> Vec<IoBackend> {
    let mut v = vec![IoBackend::Pread];
    match io_uring_probe() {
        Ok(()) => v.push(IoBackend::IoUring),
        Err(e) => eprintln!("io_uring unavailable here ({e}); testing the pread fallback only"),
    }
    v
}

/// Reads every frame through `stream`, driven by the scheduler, and checks each against
/// `images` as it lands and as it is shown.
fn play_all(stream: &mut FrameStream, source: &Source, images: &[Vec<u8>]) -> usize {
    let n = source.frames.len() as u32;
    let shown = test_stream::play_once(
        stream,
        source,
        n,
        Duration::from_secs(60),
        |_, c| {
            assert!(c.first_byte.is_some() && c.last_byte >= c.first_byte);
            assert_eq!(c.bytes, images[c.frame as usize].len() as u64);
        },
        |stream, f, slot| {
            let bytes = stream.ring().host_parts(slot).unwrap().concat();
            let img = &images[f as usize];
            assert!(bytes[..img.len()] == img[..], "frame {f} differs");
        },
    );
    assert_eq!(shown, (0..n).collect::<Vec<_>>());
    shown.len()
}

#[test]
fn striped_frames_arrive_byte_exact_through_every_host_backend() {
    let dir = tempfile::tempdir().unwrap();
    let images = make_dataset(dir.path(), 7, 3, 3 * PAGE as u64);
    let ds = Dataset::open(dir.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    for backend in backends() {
        for (kind, io_size, threads, qd) in [
            (EngineKind::Portable, 4096, 1, 1),
            (EngineKind::CpuOnly, 8192, 4, 8),
            (EngineKind::Portable, 1 << 20, 16, 2),
        ] {
            let ring = FrameRing::host(3, source.max_frame_len() as usize).unwrap();
            let cfg = EngineConfig {
                threads,
                queue_depth: qd,
                io_size,
                backend,
                io_mode: IoMode::Direct,
                ..EngineConfig::default()
            };
            let engine = Engine::host(kind, &source.files, ring.memories(), &cfg).unwrap();
            let info = engine.info().clone();
            eprintln!("{backend:?} {kind}: {} {:?}", info.mode, info.notes);
            assert_eq!(info.active, kind);
            if backend == IoBackend::Pread {
                assert!(info.mode.starts_with("pread"), "{}", info.mode);
            } else {
                assert!(info.mode.starts_with("io_uring"), "{}", info.mode);
            }
            let mut stream = FrameStream::new(engine, ring);
            play_all(&mut stream, &source, &images);
            let c = stream.engine().counters();
            let ops = c.ops.load(std::sync::atomic::Ordering::Relaxed);
            let bytes = c.bytes.load(std::sync::atomic::Ordering::Relaxed);
            assert_eq!(bytes, source.total_bytes());
            assert!(ops as usize >= source.frames.iter().map(|f| f.extents.len()).sum::<usize>());
        }
    }
}

/// Slots of several parts (two pages each, so the three-page stripe chunks cross part
/// boundaries): every read that would cross one is cut there, and each frame lands
/// byte-exact across its parts, through both host engines and every backend, with reads
/// smaller than, equal to and larger than a part.
#[test]
fn striped_frames_arrive_byte_exact_in_multi_part_slots() {
    let dir = tempfile::tempdir().unwrap();
    let images = make_dataset(dir.path(), 5, 3, 3 * PAGE as u64);
    let ds = Dataset::open(dir.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let layout = SlotLayout::new(source.max_frame_len(), 2 * PAGE as u64).unwrap();
    assert!(layout.parts() > 20, "{layout:?}");
    for backend in backends() {
        for (kind, io_size) in [
            (EngineKind::CpuOnly, 4096),
            (EngineKind::Portable, 2 * PAGE),
            (EngineKind::CpuOnly, 1 << 20),
        ] {
            let ring = FrameRing::host(3, layout).unwrap();
            assert_eq!(ring.memory(0).unwrap().parts().len(), layout.parts());
            let cfg = EngineConfig {
                threads: 3,
                io_size,
                backend,
                ..EngineConfig::default()
            };
            let engine = Engine::host(kind, &source.files, ring.memories(), &cfg).unwrap();
            let mut stream = FrameStream::new(engine, ring);
            play_all(&mut stream, &source, &images);
        }
    }
}

#[test]
fn buffered_mode_and_plain_files_read_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = payload(99, 10 * PAGE + 123);
    let p = dir.path().join("plain.bin");
    std::fs::write(&p, &data).unwrap();
    let source =
        Source::from_files(std::slice::from_ref(&p), 4 * PAGE as u64, 2 * PAGE as u64).unwrap();
    assert_eq!(source.frames.len(), 3);
    assert_eq!(source.skipped_tail_bytes, 123);
    let images: Vec<Vec<u8>> = source
        .frames
        .iter()
        .map(|f| {
            let start = f.extents[0].offset as usize;
            data[start..start + f.len as usize].to_vec()
        })
        .collect();
    for backend in backends() {
        let ring = FrameRing::host(2, 4 * PAGE).unwrap();
        let cfg = EngineConfig {
            threads: 2,
            backend,
            io_mode: IoMode::Buffered,
            io_size: PAGE,
            ..EngineConfig::default()
        };
        let engine =
            Engine::host(EngineKind::CpuOnly, &source.files, ring.memories(), &cfg).unwrap();
        assert!(engine.info().mode.contains("page cache"));
        play_all(&mut FrameStream::new(engine, ring), &source, &images);
    }
}

#[test]
fn failed_reads_complete_with_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("short.bin");
    std::fs::write(&p, payload(5, 2 * PAGE)).unwrap();
    let source =
        Source::from_files(std::slice::from_ref(&p), 2 * PAGE as u64, PAGE as u64).unwrap();
    for backend in backends() {
        let ring = FrameRing::host(1, 8 * PAGE).unwrap();
        let cfg = EngineConfig {
            threads: 2,
            backend,
            io_size: PAGE,
            ..EngineConfig::default()
        };
        let mut engine =
            Engine::host(EngineKind::Portable, &source.files, ring.memories(), &cfg).unwrap();
        // Past the end of the file: the read returns 0 bytes.
        let beyond = ReadExtent {
            file: 0,
            offset: 4 * PAGE as u64,
            len: PAGE as u64,
            dst: 0,
            crc32: None,
        };
        let good = ReadExtent {
            file: 0,
            offset: 0,
            len: PAGE as u64,
            dst: PAGE as u64,
            crc32: None,
        };
        engine
            .submit(ReadRequest {
                frame: 3,
                slot: 0,
                extents: vec![beyond, good],
                requested: Instant::now(),
                progress: None,
            })
            .unwrap();
        let c = engine
            .next_completion(Duration::from_secs(10))
            .unwrap()
            .expect("completes");
        assert_eq!(c.frame, 3);
        let msg = c.result.unwrap_err().to_string();
        assert!(
            msg.contains("short.bin") && msg.contains("end of file"),
            "{msg}"
        );
        // Bad requests are refused up front.
        let bad = |e: ReadExtent, slot| ReadRequest {
            frame: 0,
            slot,
            extents: vec![e],
            requested: Instant::now(),
            progress: None,
        };
        let misaligned = ReadExtent {
            offset: 100,
            ..good
        };
        assert!(matches!(
            engine.submit(bad(misaligned, 0)),
            Err(IngestError::Usage(_))
        ));
        let outside = ReadExtent {
            dst: 8 * PAGE as u64,
            ..good
        };
        assert!(matches!(
            engine.submit(bad(outside, 0)),
            Err(IngestError::Usage(_))
        ));
        assert!(matches!(
            engine.submit(bad(good, 5)),
            Err(IngestError::Usage(_))
        ));
        let no_file = ReadExtent { file: 9, ..good };
        assert!(matches!(
            engine.submit(bad(no_file, 0)),
            Err(IngestError::Usage(_))
        ));
        assert_eq!(engine.in_flight(), 0);
    }
}

/// A cancelled read drops its queued reads and completes with `Cancelled`; the engine goes
/// on reading (the same slot again, byte-exact), and cancelling an idle slot does nothing.
///
/// With one thread and one lane, reads are issued in request order, so the second frame's
/// reads cannot start before the first frame's 8,192 reads are done; the cancel, sent right
/// after the second request, always finds them queued.
#[test]
fn cancel_drops_queued_reads_and_the_engine_reads_on() {
    const FRAME: usize = 32 << 20;
    let dir = tempfile::tempdir().unwrap();
    let data = payload(7, 2 * FRAME);
    let p = dir.path().join("frames.bin");
    std::fs::write(&p, &data).unwrap();
    let source = Source::from_files(std::slice::from_ref(&p), FRAME as u64, FRAME as u64).unwrap();
    assert_eq!(source.frames.len(), 2);
    let reads_per_frame = (FRAME / PAGE) as u64;
    for backend in backends() {
        let mut ring = FrameRing::host(2, FRAME).unwrap();
        let cfg = EngineConfig {
            threads: 1,
            queue_depth: 1,
            backend,
            io_mode: IoMode::Buffered,
            io_size: PAGE,
            ..EngineConfig::default()
        };
        let mut engine =
            Engine::host(EngineKind::CpuOnly, &source.files, ring.memories(), &cfg).unwrap();
        let request = |frame: u32, slot| ReadRequest {
            frame,
            slot,
            extents: source.frames[frame as usize].extents.clone(),
            requested: Instant::now(),
            progress: None,
        };
        // Nothing in flight into slot 1: no effect, no completion.
        engine.cancel(1).unwrap();
        for (frame, slot) in [(0, 0), (1, 1)] {
            assert_eq!(ring.begin_write(frame), Some(slot));
            engine.submit(request(frame, slot)).unwrap();
        }
        engine.cancel(1).unwrap();
        let mut results = std::collections::HashMap::new();
        while results.len() < 2 {
            let c = engine
                .next_completion(Duration::from_secs(30))
                .unwrap()
                .expect("both frames complete");
            ring.finish_write(c.slot, c.result.is_ok()).unwrap();
            results.insert(c.frame, c.result);
        }
        results.remove(&0).unwrap().expect("frame 0 reads whole");
        assert_eq!(ring.host_parts(0).unwrap().concat(), &data[..FRAME]);
        match results.remove(&1).unwrap() {
            Err(IngestError::Cancelled(1)) => {}
            other => panic!("{backend:?}: frame 1 should be cancelled, got {other:?}"),
        }
        assert_eq!(engine.in_flight(), 0);
        let ops = engine
            .counters()
            .ops
            .load(std::sync::atomic::Ordering::Relaxed);
        // Frame 0's reads, and at most some of frame 1's (however the threads were
        // scheduled): never all of them.
        assert!(
            ops < 2 * reads_per_frame,
            "{backend:?}: {ops} reads issued; the cancelled frame's queued reads all ran"
        );
        // The cancelled slot is free and reads again, byte-exact.
        assert_eq!(ring.begin_write(1), Some(1));
        engine.submit(request(1, 1)).unwrap();
        let c = engine
            .next_completion(Duration::from_secs(30))
            .unwrap()
            .expect("completes");
        assert_eq!((c.frame, c.slot), (1, 1));
        c.result.unwrap();
        ring.finish_write(1, true).unwrap();
        assert_eq!(ring.host_parts(1).unwrap().concat(), &data[FRAME..]);
        assert!(
            engine
                .next_completion(Duration::from_millis(50))
                .unwrap()
                .is_none()
        );
    }
}

/// Progress reports cover every byte of the frame exactly once, as merged ranges of the
/// slot, and nothing is reported twice.
#[test]
fn progress_reports_each_landed_range_once() {
    let dir = tempfile::tempdir().unwrap();
    let images = make_dataset(dir.path(), 2, 3, 2 * PAGE as u64);
    let ds = Dataset::open(dir.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let ring = FrameRing::host(1, source.max_frame_len() as usize).unwrap();
    let cfg = EngineConfig {
        threads: 3,
        io_size: PAGE,
        io_mode: IoMode::Buffered,
        ..EngineConfig::default()
    };
    let mut engine =
        Engine::host(EngineKind::CpuOnly, &source.files, ring.memories(), &cfg).unwrap();
    let progress = ReadProgress::new();
    engine
        .submit(ReadRequest {
            frame: 1,
            slot: 0,
            extents: source.frames[1].extents.clone(),
            requested: Instant::now(),
            progress: Some(progress.clone()),
        })
        .unwrap();
    let mut seen: Vec<(u64, u64)> = Vec::new();
    let base = match &ring.memory(0).unwrap().parts()[0] {
        supercell::gpu::PartMemory::Host(b) => b.as_ptr() as usize,
        _ => unreachable!("a host ring"),
    };
    // A reported range must already hold its bytes (reported after the read, not before).
    let check = |ranges: &[(u64, u64)]| {
        for &(dst, len) in ranges {
            let (dst, len) = (dst as usize, len as usize);
            // SAFETY: the range's reads have completed and nothing writes it again while
            // this frame is read; the slot outlives the check.
            let got = unsafe { std::slice::from_raw_parts((base + dst) as *const u8, len) };
            assert!(
                got == &images[1][dst..dst + len],
                "range at {dst} reported early"
            );
        }
    };
    let c = loop {
        let landed = progress.take();
        check(&landed);
        seen.extend(landed);
        if let Some(c) = engine.next_completion(Duration::from_millis(1)).unwrap() {
            break c;
        }
    };
    c.result.unwrap();
    let landed = progress.take();
    check(&landed);
    seen.extend(landed);
    assert!(progress.take().is_empty(), "reported twice");
    // Everything seen, merged, is exactly the extents' slot ranges, merged.
    fn merge(mut v: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::new();
        for (s, l) in v {
            match out.last_mut() {
                Some((os, ol)) if *os + *ol == s => *ol += l,
                Some((os, ol)) => {
                    assert!(*os + *ol < s, "ranges overlap at {s}");
                    out.push((s, l));
                }
                None => out.push((s, l)),
            }
        }
        out
    }
    let covered = merge(seen);
    let merged = merge(
        source.frames[1]
            .extents
            .iter()
            .map(|e| (e.dst, e.len))
            .collect(),
    );
    assert_eq!(covered, merged);
    assert_eq!(
        covered.iter().map(|r| r.1).sum::<u64>(),
        source.frames[1].len,
        "{} bytes in the image",
        images[1].len()
    );
}
