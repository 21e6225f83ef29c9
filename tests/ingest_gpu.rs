//! GPU machine only (`#[ignore]`d; run by scripts/gpu-tests.sh): the staged and gds
//! engines deliver byte-exact frames into device memory, cuFile's mode is reported
//! truthfully, and an unsupported file system falls back to staged with the reason.
//!
//! `SUPERCELL_TEST_DATASET` names a dataset to use (e.g. one on the RAM-backed lanes);
//! otherwise a small one is written to a temporary directory.

mod test_bytes;
mod test_stream;
use test_bytes::xorshift_bytes as payload;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use supercell::bench::{self, BenchConfig};
use supercell::dataset::{
    AlignedBuf, AttributeSpec, CrcCheck, Dataset, DatasetWriter, LaneSpec, Provenance,
};
use supercell::gpu::{DeviceBuffer, FrameRing, Gpu, GpuCrc, SlotLayout};
use supercell::ingest::{
    Engine, EngineConfig, EngineKind, IngestEngine, IngestError, IoBackend, Source, open_engine,
};
use supercell::stream::FrameStream;

fn write_dataset(dir: &Path, frames: usize, lanes: u32) {
    let mut w = DatasetWriter::create(
        dir,
        LaneSpec::Count(lanes),
        1 << 20,
        vec![AttributeSpec::new("a"), AttributeSpec::new("b")],
        Provenance::new("gpu test", ["x"]),
    )
    .unwrap();
    for f in 0..frames {
        w.push_frame_opaque(
            f as f64,
            vec![
                payload(f as u64 + 1, 3_000_000 + f * 4097),
                payload(f as u64 + 100, 777_777),
            ],
        )
        .unwrap();
    }
    w.finish().unwrap();
}

/// The dataset to test with, and the temp dir that holds it (if any).
fn dataset() -> (PathBuf, Option<tempfile::TempDir>) {
    if let Some(p) = std::env::var_os("SUPERCELL_TEST_DATASET") {
        return (PathBuf::from(p), None);
    }
    // The current directory is on a real block device (cuFile needs one), unlike /tmp
    // on some machines.
    let t = tempfile::tempdir_in(".").unwrap();
    write_dataset(t.path(), 6, 3);
    (t.path().to_path_buf(), Some(t))
}

/// Plays every frame (up to `limit`) through `stream`, reads each back from the GPU as it
/// lands and compares it with the reference reader.
fn check_all(stream: &mut FrameStream, ds: &Dataset, limit: usize) {
    let source = Source::from_manifest(ds.manifest());
    let n = source.frames.len().min(limit) as u32;
    let mode = stream.engine().info().mode.clone();
    let mut reference = AlignedBuf::new();
    let mut got = Vec::new();
    let shown = test_stream::play_once(
        stream,
        &source,
        n,
        Duration::from_secs(120),
        |stream, c| {
            assert!(c.on_gpu.is_some(), "GPU paths report the on-GPU time");
            ds.read_frame(c.frame as usize, &mut reference, CrcCheck::Verify)
                .unwrap();
            got.resize(reference.len(), 0);
            stream.ring().read_back(c.slot, 0, &mut got).unwrap();
            assert!(
                got[..] == reference[..],
                "frame {} differs on the GPU ({mode})",
                c.frame
            );
        },
        |_, _, _| {},
    );
    assert_eq!(shown, (0..n).collect::<Vec<_>>());
}

#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn staged_engine_is_byte_exact() {
    let (dir, _keep) = dataset();
    let ds = Dataset::open(&dir).unwrap();
    let gpu = Gpu::open(0).unwrap();
    eprintln!("GPU: {} at {}", gpu.name, gpu.pci_bus_id);
    let slot = Source::from_manifest(ds.manifest()).max_frame_len() as usize;
    for (backend, io_size, threads, streams) in [
        (IoBackend::IoUring, 1 << 20, 8, 4),
        (IoBackend::Pread, 256 << 10, 4, 2),
        (IoBackend::Auto, 64 << 10, 2, 3),
    ] {
        let ring = FrameRing::device(&gpu, 3, slot).unwrap();
        let cfg = EngineConfig {
            threads,
            io_size,
            backend,
            streams,
            ..EngineConfig::default()
        };
        let e = Engine::staged(
            &gpu,
            &Source::from_manifest(ds.manifest()).files,
            ring.memories(),
            &cfg,
        )
        .unwrap();
        eprintln!("staged: {} {:?}", e.info().mode, e.info().notes);
        assert_eq!(e.info().active, EngineKind::Staged);
        check_all(&mut FrameStream::new(e, ring), &ds, 24);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn gds_engine_is_byte_exact_and_reports_its_mode() {
    let (dir, _keep) = dataset();
    let ds = Dataset::open(&dir).unwrap();
    let gpu = Gpu::open(0).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let ring = FrameRing::device(&gpu, 3, source.max_frame_len() as usize).unwrap();
    let cfg = EngineConfig {
        threads: 8,
        io_size: 1 << 20,
        ..EngineConfig::default()
    };
    let e = open_engine(
        EngineKind::Gds,
        Some(&gpu),
        &source.files,
        ring.memories(),
        &cfg,
    )
    .unwrap();
    let info = e.info().clone();
    eprintln!(
        "gds requested: active {} — {} — fallback {:?}",
        info.active, info.mode, info.fallback
    );
    if info.active == EngineKind::Staged {
        let why = info.fallback.clone().expect("a fallback always says why");
        assert!(why.contains("cuFile") || why.contains("libcufile"), "{why}");
        assert!(
            std::env::var_os("SUPERCELL_EXPECT_GDS").is_none(),
            "GDS expected here but: {why}"
        );
    } else {
        let nvfs = Path::new("/proc/driver/nvidia-fs").exists();
        if !nvfs {
            assert!(
                info.mode.starts_with("cuFile compatibility mode"),
                "never claims nvidia-fs P2P without the module: {}",
                info.mode
            );
        }
    }
    let mut stream = FrameStream::new(e, ring);
    check_all(&mut stream, &ds, 24);
    if info.active == EngineKind::Gds {
        let stats = stream.engine().cufile_stats();
        eprintln!("cuFile stats: {stats:?}");
        if let Some(s) = stats {
            eprintln!("live mode: {}", s.live_mode());
            if !Path::new("/proc/driver/nvidia-fs").exists() && !info.mode.contains("P2PDMA") {
                assert_eq!(s.nvfs_reads, 0);
            }
        }
    }
}

/// A small part size for `frame_len`-byte frames: a power of two (at least 64 KiB) that cuts
/// each frame into at least three parts, so extents cross part boundaries.
fn small_parts(frame_len: u64) -> u64 {
    let third = (frame_len / 3).max(64 << 10);
    1 << (63 - third.leading_zeros())
}

/// The staged and gds engines into device slots of several allocations each: reads cut at
/// part boundaries, staged copies and cuFile reads land in the right part, every frame
/// byte-exact (read back across parts).
#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn gpu_engines_are_byte_exact_in_multi_part_slots() {
    let (dir, _keep) = dataset();
    let ds = Dataset::open(&dir).unwrap();
    let gpu = Gpu::open(0).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let len = source.max_frame_len();
    let layout = SlotLayout::new(len, small_parts(len)).unwrap();
    eprintln!("{} parts of {} bytes", layout.parts(), layout.part_bytes());
    assert!(layout.parts() >= 3);
    for (kind, io_size) in [(EngineKind::Staged, 256 << 10), (EngineKind::Gds, 1 << 20)] {
        let ring = FrameRing::device(&gpu, 3, layout).unwrap();
        assert_eq!(ring.memory(0).unwrap().parts().len(), layout.parts());
        let cfg = EngineConfig {
            threads: 4,
            io_size,
            ..EngineConfig::default()
        };
        let e = open_engine(kind, Some(&gpu), &source.files, ring.memories(), &cfg).unwrap();
        eprintln!(
            "{kind}: active {} — {} — {:?}",
            e.info().active,
            e.info().mode,
            e.info().notes
        );
        check_all(&mut FrameStream::new(e, ring), &ds, 24);
    }
}

/// `bench --verify` on the GPU paths with slots of several parts: the CRC kernel hashes each
/// part's pieces and combines them per extent; no mismatch on clean data.
#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn bench_verifies_gpu_paths_in_multi_part_slots() {
    let (dir, _keep) = dataset();
    let ds = Dataset::open(&dir).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let part = small_parts(source.max_frame_len());
    for path in [EngineKind::Staged, EngineKind::Gds] {
        let cfg = BenchConfig {
            engine: path,
            verify: true,
            frames: Some(12),
            slots: Some(3),
            part_bytes: Some(part),
            ..BenchConfig::default()
        };
        let r = bench::run(&source, &cfg).unwrap();
        print!("{}", bench::report::text(&r));
        assert!(r.slot_plan.parts >= 3, "{:?}", r.slot_plan);
        let v = r.verify.unwrap();
        assert_eq!(v.mismatch_count, 0, "{:?}", v.mismatches);
        assert_eq!(v.frames, 12);
    }
}

#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn gds_on_tmpfs_falls_back_to_staged_and_says_why() {
    if !Path::new("/dev/shm").is_dir() {
        return;
    }
    let t = tempfile::tempdir_in("/dev/shm").unwrap();
    write_dataset(t.path(), 2, 2);
    let ds = Dataset::open(t.path()).unwrap();
    let gpu = Gpu::open(0).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let ring = FrameRing::device(&gpu, 2, source.max_frame_len() as usize).unwrap();
    let cfg = EngineConfig::default();
    match Engine::gds(&gpu, &source.files, ring.memories(), &cfg) {
        Err(IngestError::Unavailable(why)) => eprintln!("as expected: {why}"),
        Ok(e) => panic!("cuFile registered a tmpfs file?! {}", e.info().mode),
        Err(e) => panic!("unexpected error: {e}"),
    }
    let e = open_engine(
        EngineKind::Gds,
        Some(&gpu),
        &source.files,
        ring.memories(),
        &cfg,
    )
    .unwrap();
    assert_eq!(e.info().active, EngineKind::Staged);
    assert_eq!(e.info().requested, EngineKind::Gds);
    eprintln!("fallback: {:?}", e.info().fallback);
    assert!(e.info().fallback.is_some());
    check_all(&mut FrameStream::new(e, ring), &ds, 2);
}

#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn bench_verifies_gpu_paths() {
    let (dir, _keep) = dataset();
    let ds = Dataset::open(&dir).unwrap();
    let source = Source::from_manifest(ds.manifest());
    for path in [EngineKind::Staged, EngineKind::Gds, EngineKind::CpuOnly] {
        let cfg = BenchConfig {
            engine: path,
            verify: true,
            frames: Some(12),
            slots: Some(3),
            ..BenchConfig::default()
        };
        let r = bench::run(&source, &cfg).unwrap();
        print!("{}", bench::report::text(&r));
        let v = r.verify.unwrap();
        assert_eq!(v.mismatch_count, 0, "{:?}", v.mismatches);
        assert_eq!(v.frames, 12);
    }
}

/// The CRC kernel against crc32fast on ranges of every shape (unaligned starts, partial
/// blocks, empty, hundreds of extents in one launch), then its throughput on 1 GiB.
#[test]
#[ignore = "needs an NVIDIA GPU and NVRTC (scripts/gpu-tests.sh)"]
fn gpu_crc_kernel_matches_crc32fast() {
    let gpu = Gpu::open(0).unwrap();
    let kernel = GpuCrc::new(&gpu).unwrap_or_else(|e| panic!("the CRC kernel: {e}"));
    let len = (32usize << 20) + 12_345;
    let data = payload(77, len);
    let buf = DeviceBuffer::alloc(&gpu, len).unwrap();
    buf.write(0, &data).unwrap();
    let n = len as u64;
    let mut ranges: Vec<(u64, u64)> = vec![
        (0, n),
        (0, 4096),
        (4096, 8 << 20),
        (1, 4095),
        (17, 100_000),
        (4096 * 3, 0),
        (16, 4096 * 1000 + 7),
        (n - 1, 1),
    ];
    ranges.extend((0..300u64).map(|i| (i * 65536 + 4096, 65536 - (i % 7) * 16)));
    // SAFETY: every range lies inside `buf`, which nothing else touches.
    let got = unsafe { kernel.extent_crcs(buf.ptr(), &ranges) }.unwrap();
    assert_eq!(got.len(), ranges.len());
    for (r, g) in ranges.iter().zip(&got) {
        let want = crc32fast::hash(&data[r.0 as usize..(r.0 + r.1) as usize]);
        assert_eq!(*g, want, "range {r:?}");
    }
    drop(buf);

    // Throughput: 1 GiB as 128 extents of 8 MiB (a lane dataset's chunk size).
    let big = 1usize << 30;
    let buf = DeviceBuffer::alloc(&gpu, big).unwrap();
    let mut host = Vec::with_capacity(big);
    while host.len() < big {
        host.extend_from_slice(&data[..(big - host.len()).min(32 << 20)]);
    }
    buf.write(0, &host).unwrap();
    let chunk = 8u64 << 20;
    let ranges: Vec<(u64, u64)> = (0..big as u64 / chunk)
        .map(|i| (i * chunk, chunk))
        .collect();
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        // SAFETY: as above.
        let got = unsafe { kernel.extent_crcs(buf.ptr(), &ranges) }.unwrap();
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(
            got[5],
            crc32fast::hash(&host[5 * chunk as usize..6 * chunk as usize])
        );
    }
    let t = Instant::now();
    let cpu = crc32fast::hash(&host);
    let cpu_s = t.elapsed().as_secs_f64();
    eprintln!(
        "GPU CRC-32: 1 GiB in {:.2} ms = {:.1} GB/s (launch to results on the host); crc32fast on one core: {:.2} GB/s ({cpu:08x})",
        best * 1e3,
        big as f64 / best / 1e9,
        big as f64 / cpu_s / 1e9
    );
}

/// `--verify` on the GPU paths (checked on the GPU) and cpu-only: a byte flipped on storage
/// is reported with its frame, lane and file every time that frame is read, and the run
/// goes on.
#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn verify_on_gpu_paths_names_a_flipped_byte() {
    use std::os::unix::fs::FileExt;
    let t = tempfile::tempdir_in(".").unwrap();
    write_dataset(t.path(), 4, 3);
    let ds = Dataset::open(t.path()).unwrap();
    let source = Source::from_manifest(ds.manifest());
    let bad = source.frames[1].extents[1];
    let bad_file = &source.files[bad.file as usize];
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&bad_file.path)
        .unwrap();
    let mut b = [0u8; 1];
    f.read_exact_at(&mut b, bad.offset + 777).unwrap();
    f.write_all_at(&[b[0] ^ 1], bad.offset + 777).unwrap();
    drop(f);
    for path in [EngineKind::Staged, EngineKind::Gds, EngineKind::CpuOnly] {
        let cfg = BenchConfig {
            engine: path,
            verify: true,
            frames: Some(8),
            slots: Some(2),
            ..BenchConfig::default()
        };
        let r = bench::run(&source, &cfg).unwrap();
        print!("{}", bench::report::text(&r));
        let v = r.verify.unwrap();
        assert_eq!(
            (v.frames, v.mismatch_count),
            (8, 2),
            "{path}: {:?}",
            v.mismatches
        );
        let name = bad_file.path.display().to_string();
        assert!(
            v.mismatches.iter().all(|m| m.contains("frame 1")
                && m.contains(&format!("lane {}", bad_file.lane))
                && m.contains(&name)),
            "{:?}",
            v.mismatches
        );
        if path != EngineKind::CpuOnly {
            assert!(
                r.notes.iter().any(|n| n.contains("computed on the GPU")),
                "{path}: the check must run on the GPU: {:?}",
                r.notes
            );
        }
    }
}

/// The `supercell` binary to run: `SUPERCELL_BIN` on the GPU machine (where the test binary
/// travels without the build tree), else the one cargo built beside this test.
fn supercell_bin() -> PathBuf {
    std::env::var_os("SUPERCELL_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_supercell")))
}

/// Runs `cmd` to its end and fails the test unless it exited with status 0: a process
/// killed by a signal (the SIGSEGV of a cuFile teardown at exit shows as 139 in a shell)
/// has no exit code at all.
fn assert_exits_cleanly(what: &str, cmd: &mut std::process::Command) {
    use std::os::unix::process::ExitStatusExt;
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start: {e}"));
    let tail = |b: &[u8]| {
        let s = String::from_utf8_lossy(b);
        s.lines()
            .rev()
            .take(15)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    };
    // doctor exits 1 when one of its checks fails (a machine's finding, not a crash).
    let doctor_found_a_fault = what == "doctor"
        && out.status.code() == Some(1)
        && String::from_utf8_lossy(&out.stderr).contains("check(s) failed");
    assert!(
        out.status.code() == Some(0) || doctor_found_a_fault,
        "{what}: exit status {:?}, signal {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        out.status.signal(),
        tail(&out.stdout),
        tail(&out.stderr)
    );
    eprintln!("{what}: exit status {:?}", out.status.code());
}

/// Every binary that may open cuFile exits with status 0, whichever way its engines went:
/// cuFile used (gds), cuFile opened but refused (a tmpfs file: gds falls back to staged),
/// cuFile only probed (doctor), and this test binary itself after each of those. Before
/// the driver closed itself at exit, this binary ended with SIGSEGV after its tests passed.
#[test]
#[ignore = "needs an NVIDIA GPU (scripts/gpu-tests.sh)"]
fn binaries_exit_cleanly_after_every_fallback_order() {
    let me = std::env::current_exe().unwrap();
    // This test binary, one test per process, in each order of fallbacks.
    for (tests, what) in [
        (
            &["gds_on_tmpfs_falls_back_to_staged_and_says_why"][..],
            "fallback only",
        ),
        (
            &["gds_engine_is_byte_exact_and_reports_its_mode"][..],
            "gds only",
        ),
        (
            &[
                "gds_on_tmpfs_falls_back_to_staged_and_says_why",
                "gds_engine_is_byte_exact_and_reports_its_mode",
            ][..],
            "fallback, then gds",
        ),
    ] {
        let mut cmd = std::process::Command::new(&me);
        cmd.args(["--ignored", "--exact", "--test-threads", "1"])
            .args(tests);
        assert_exits_cleanly(&format!("ingest_gpu test binary ({what})"), &mut cmd);
    }
    // The supercell binary: gds on a tmpfs dataset (fallback), gds on a real file system,
    // and doctor (cuFile probed, no engine).
    let bin = supercell_bin();
    let shm = tempfile::tempdir_in("/dev/shm").unwrap();
    write_dataset(shm.path(), 2, 2);
    let (dir, _keep) = dataset();
    for (ds, what) in [
        (shm.path(), "bench gds on tmpfs (fallback)"),
        (dir.as_path(), "bench gds"),
    ] {
        let mut cmd = std::process::Command::new(&bin);
        cmd.arg("bench")
            .arg(ds)
            .args(["--engine", "gds", "--frames", "2", "--slots", "2"]);
        assert_exits_cleanly(what, &mut cmd);
    }
    let mut cmd = std::process::Command::new(&bin);
    cmd.arg("doctor").arg(&dir);
    assert_exits_cleanly("doctor", &mut cmd);
}
