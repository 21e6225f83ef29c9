//! CI (no GPU): `EngineConfig::verify` on the host engines and `bench --verify`. A byte
//! flipped on storage after the manifest was written must fail exactly its frame, with an
//! error naming the frame, lane, file and offset; clean frames must pass however their
//! extents are cut into reads (the extent CRC is combined from the reads' CRCs).

mod test_bytes;
use test_bytes::xorshift_bytes as payload;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use supercell::bench::{self, BenchConfig};
use supercell::dataset::{AttributeSpec, Dataset, DatasetWriter, LaneSpec, Provenance};
use supercell::gpu::FrameRing;
use supercell::ingest::{
    Engine, EngineConfig, EngineKind, IngestEngine, IngestError, IoBackend, ReadExtent,
    ReadRequest, Source, io_uring_probe,
};

/// Five frames of two attributes over two lanes, in 64 KiB chunks.
fn make_dataset(dir: &Path) -> Source {
    make_dataset_in_chunks(dir, 64 << 10)
}

/// The same in stripe chunks of `chunk` bytes.
fn make_dataset_in_chunks(dir: &Path, chunk: u64) -> Source {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(2),
        chunk,
        vec![AttributeSpec::new("a"), AttributeSpec::new("b")],
        Provenance::new("verify test", ["x"]),
    )
    .unwrap();
    for f in 0..5usize {
        w.push_frame_opaque(
            f as f64,
            vec![
                payload(f as u64 + 1, 300_000 + f * 4_321),
                payload(f as u64 + 50, 90_000),
            ],
        )
        .unwrap();
    }
    w.finish().unwrap();
    Source::from_manifest(Dataset::open(dir).unwrap().manifest())
}

/// Flips one byte `at` bytes into `extent` on storage.
fn corrupt(source: &Source, extent: &ReadExtent, at: u64) {
    let path = &source.files[extent.file as usize].path;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, extent.offset + at).unwrap();
    b[0] ^= 0x10;
    f.write_all_at(&b, extent.offset + at).unwrap();
}

fn backends() -> Vec<IoBackend> {
    let mut v = vec![IoBackend::Pread];
    if io_uring_probe().is_ok() {
        v.push(IoBackend::IoUring);
    }
    v
}

/// Reads every frame once, one at a time, returning each frame's result.
fn read_all(source: &Source, path: EngineKind, cfg: &EngineConfig) -> Vec<Result<(), IngestError>> {
    let mut ring = FrameRing::host(1, source.max_frame_len() as usize).unwrap();
    let mut engine = Engine::host(path, &source.files, ring.memories(), cfg).unwrap();
    let mut out = Vec::new();
    for (f, frame) in source.frames.iter().enumerate() {
        let slot = ring.begin_write(f as u32).unwrap();
        engine
            .submit(ReadRequest {
                frame: f as u32,
                slot,
                extents: frame.extents.clone(),
                requested: Instant::now(),
                progress: None,
            })
            .unwrap();
        let c = engine
            .next_completion(Duration::from_secs(30))
            .unwrap()
            .expect("the frame completes");
        assert_eq!(c.frame, f as u32);
        ring.finish_write(c.slot, true).unwrap();
        assert!(ring.evict(c.frame));
        out.push(c.result);
    }
    out
}

#[test]
fn host_verify_passes_clean_frames_however_extents_are_cut() {
    let dir = tempfile::tempdir().unwrap();
    let source = make_dataset(dir.path());
    for backend in backends() {
        for path in [EngineKind::CpuOnly, EngineKind::Portable] {
            // 4 KiB reads cut every 64 KiB extent into 16 pieces; 1 MiB reads take it whole.
            for io_size in [4096, 1 << 20] {
                let cfg = EngineConfig {
                    threads: 3,
                    io_size,
                    backend,
                    verify: true,
                    ..EngineConfig::default()
                };
                for (f, r) in read_all(&source, path, &cfg).into_iter().enumerate() {
                    assert!(r.is_ok(), "{path} {backend:?} {io_size}: frame {f}: {r:?}");
                }
            }
        }
    }
}

#[test]
fn host_verify_names_the_frame_lane_file_and_offset_of_a_flipped_byte() {
    let dir = tempfile::tempdir().unwrap();
    let source = make_dataset(dir.path());
    // Frame 2: flip a byte in its second extent, and in its last one.
    let extents = &source.frames[2].extents;
    assert!(
        extents.len() >= 3,
        "the test needs a frame of several extents"
    );
    let (bad, also_bad) = (extents[1], extents[extents.len() - 1]);
    corrupt(&source, &bad, 5_000);
    corrupt(&source, &also_bad, 0);
    let bad_file = &source.files[bad.file as usize];
    for backend in backends() {
        for io_size in [4096, 1 << 20] {
            let mut cfg = EngineConfig {
                threads: 3,
                io_size,
                backend,
                verify: true,
                ..EngineConfig::default()
            };
            let results = read_all(&source, EngineKind::CpuOnly, &cfg);
            for (f, r) in results.iter().enumerate() {
                if f != 2 {
                    assert!(r.is_ok(), "frame {f}: {r:?}");
                    continue;
                }
                match r {
                    Err(
                        e @ IngestError::Checksum {
                            frame,
                            lane,
                            path,
                            offset,
                            len,
                            expected,
                            actual,
                            more,
                        },
                    ) => {
                        assert_eq!(
                            (*frame, *lane, path, *offset, *len, *more),
                            (2, bad_file.lane, &bad_file.path, bad.offset, bad.len, 1),
                            "{e}"
                        );
                        assert_eq!(Some(*expected), bad.crc32);
                        assert_ne!(expected, actual);
                        let text = e.to_string();
                        assert!(
                            text.contains("frame 2")
                                && text.contains(&format!("lane {}", bad_file.lane))
                                && text.contains(&bad_file.path.display().to_string())
                                && text.contains(&format!("offset {}", bad.offset))
                                && text.contains("1 more extent"),
                            "{text}"
                        );
                    }
                    other => panic!("frame 2 must fail its checksum, got {other:?}"),
                }
            }
            // Without --verify the same bytes arrive without complaint: the check is what
            // finds them.
            cfg.verify = false;
            assert!(
                read_all(&source, EngineKind::CpuOnly, &cfg)
                    .iter()
                    .all(Result::is_ok)
            );
        }
    }
}

#[test]
fn bench_verify_counts_every_bad_extent_and_keeps_measuring() {
    let dir = tempfile::tempdir().unwrap();
    let source = make_dataset(dir.path());
    let bad = source.frames[3].extents[0];
    corrupt(&source, &bad, 123);
    for path in [EngineKind::CpuOnly, EngineKind::Portable] {
        let cfg = BenchConfig {
            engine: path,
            frames: Some(10),
            verify: true,
            slots: Some(2),
            threads: 2,
            io_size: 16 << 10,
            ..BenchConfig::default()
        };
        let r = bench::run(&source, &cfg).unwrap();
        assert_eq!(r.summary.frames, 10, "every frame is still measured");
        let v = r.verify.as_ref().unwrap();
        // Ten frames of a five-frame loop: frame 3 was read twice.
        assert_eq!((v.frames, v.mismatch_count), (10, 2), "{:?}", v.mismatches);
        let want: u64 = (0..10)
            .map(|i| source.frames[i % 5].extents.len() as u64)
            .sum();
        assert_eq!(v.extents, want);
        let file = source.files[bad.file as usize].path.display().to_string();
        assert!(
            v.mismatches
                .iter()
                .all(|m| m.contains("frame 3") && m.contains(&file) && m.contains("lane")),
            "{:?}",
            v.mismatches
        );
        let text = bench::report::text(&r);
        assert!(text.contains("DIFFER"), "{text}");
        assert!(
            r.notes
                .iter()
                .any(|n| n.contains("CRC-32") && n.contains("CPU threads")),
            "{:?}",
            r.notes
        );
    }
}

/// `bench --verify` with slots of 64 KiB parts and 160 KiB stripe chunks, so extents cross
/// part boundaries: clean frames pass (an extent's CRC combined from pieces in several
/// parts), and a byte flipped in the part of an extent past its first boundary fails
/// exactly its frame. The plan says how the slots were cut.
#[test]
fn bench_verify_in_multi_part_slots_checks_extents_across_parts() {
    let dir = tempfile::tempdir().unwrap();
    let source = make_dataset_in_chunks(dir.path(), 160 << 10);
    let bad = source.frames[3].extents[0];
    // The flipped byte lies in a later part than the extent's first byte.
    assert!(
        bad.len > 100_000 && (bad.dst + 100_000) >> 16 != bad.dst >> 16,
        "{bad:?}"
    );
    corrupt(&source, &bad, 100_000);
    for path in [EngineKind::CpuOnly, EngineKind::Portable] {
        let cfg = BenchConfig {
            engine: path,
            frames: Some(5),
            verify: true,
            slots: Some(2),
            threads: 2,
            io_size: 48 << 10,
            part_bytes: Some(64 << 10),
            ..BenchConfig::default()
        };
        let r = bench::run(&source, &cfg).unwrap();
        let v = r.verify.as_ref().unwrap();
        assert_eq!((v.frames, v.mismatch_count), (5, 1), "{:?}", v.mismatches);
        assert!(v.mismatches[0].contains("frame 3"), "{:?}", v.mismatches);
        let plan = &r.slot_plan;
        assert_eq!(plan.part_bytes, 64 << 10);
        assert_eq!(plan.parts as u64, source.max_frame_len().div_ceil(64 << 10));
        assert!(plan.parts > 4, "{plan:?}");
        assert!(
            bench::report::text(&r).contains("slots: 2 of "),
            "{}",
            bench::report::text(&r)
        );
    }
    // A part size that is no power of two is refused, naming it.
    let cfg = BenchConfig {
        part_bytes: Some(96 << 10),
        ..BenchConfig::default()
    };
    let e = bench::run(&source, &cfg).unwrap_err().to_string();
    assert!(e.contains("98304") && e.contains("power of two"), "{e}");
}

/// A cancelled frame still completes (with `Cancelled`, never a checksum error over the
/// bytes it did not read), and the engine goes on verifying the frames after it.
#[test]
fn cancel_under_verify_completes_and_the_engine_verifies_on() {
    let dir = tempfile::tempdir().unwrap();
    let source = make_dataset(dir.path());
    let cfg = EngineConfig {
        threads: 1,
        queue_depth: 1,
        io_size: 4096,
        backend: IoBackend::Pread,
        verify: true,
        ..EngineConfig::default()
    };
    let ring = FrameRing::host(2, source.max_frame_len() as usize).unwrap();
    let mut engine =
        Engine::host(EngineKind::CpuOnly, &source.files, ring.memories(), &cfg).unwrap();
    let req = |frame: usize, slot| ReadRequest {
        frame: frame as u32,
        slot,
        extents: source.frames[frame].extents.clone(),
        requested: Instant::now(),
        progress: None,
    };
    // One thread reads in request order: frame 1's ~100 reads wait behind frame 0's.
    engine.submit(req(0, 0)).unwrap();
    engine.submit(req(1, 1)).unwrap();
    engine.cancel(1).unwrap();
    let mut results = Vec::new();
    for _ in 0..2 {
        let c = engine
            .next_completion(Duration::from_secs(30))
            .unwrap()
            .expect("completes");
        results.push((c.frame, c.result));
    }
    results.sort_by_key(|r| r.0);
    assert!(results[0].1.is_ok(), "{:?}", results[0]);
    assert!(
        matches!(results[1].1, Err(IngestError::Cancelled(1))),
        "{:?}",
        results[1]
    );
    engine.submit(req(1, 1)).unwrap();
    let c = engine
        .next_completion(Duration::from_secs(30))
        .unwrap()
        .expect("completes");
    assert!(c.result.is_ok(), "{:?}", c.result);
}

/// Plain files carry no checksums: `bench --verify` compares them with the files.
#[test]
fn bench_verify_compares_plain_files_with_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("plain.bin");
    std::fs::write(&p, payload(9, 300 << 10)).unwrap();
    let source = Source::from_files(&[p], 64 << 10, 16 << 10).unwrap();
    let cfg = BenchConfig {
        engine: EngineKind::CpuOnly,
        verify: true,
        slots: Some(2),
        threads: 2,
        io_size: 16 << 10,
        ..BenchConfig::default()
    };
    let r = bench::run(&source, &cfg).unwrap();
    let v = r.verify.unwrap();
    assert_eq!(v.mismatch_count, 0, "{:?}", v.mismatches);
    assert_eq!(v.frames, source.frames.len() as u64);
}
