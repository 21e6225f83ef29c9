//! CI (no GPU): the bounce engine (reads land in a copier's small set of host buffers, the
//! copier moves each on to its slot, a buffer is reused once its copy has completed), driven
//! by a copier that copies on the CPU, on the io_uring and pread backends: frames arrive
//! byte-exact in slots of several parts through far fewer buffers than reads; a cancel
//! drops the queued reads and the engine reads on; a copy that fails fails only its frame.
//! The player's GPU copier (`--host-copy ring`) is exercised in tests/play.rs.

mod test_bytes;
use test_bytes::xorshift_bytes as payload;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use supercell::gpu::{FrameRing, HostBuffer, PartMemory, SlotLayout, SlotMemory};
use supercell::ingest::{
    BounceCopier, Engine, EngineConfig, IngestEngine, IngestError, IoBackend, IoMode, ReadRequest,
    Source, io_uring_probe,
};

const PAGE: usize = 4096;

fn backends() -> Vec<IoBackend> {
    let mut v = vec![IoBackend::Pread];
    match io_uring_probe() {
        Ok(()) => v.push(IoBackend::IoUring),
        Err(e) => eprintln!("io_uring unavailable here ({e}); testing the pread backend only"),
    }
    v
}

/// What the test sees of the copier.
#[derive(Default)]
struct Seen {
    /// Copies made.
    copies: AtomicUsize,
    /// The most buffers whose copies were gathered or running at once.
    most_busy: AtomicUsize,
    /// Copies into this slot fail (once each request).
    fail_slot: Mutex<Option<usize>>,
}

/// Copies on the CPU into the slots' host memory. Copies started at `submit` are made at
/// the next `poll`, so buffers spend a turn "copying" as on a GPU.
struct CpuCopier {
    bufs: Vec<HostBuffer>,
    slots: Vec<Arc<SlotMemory>>,
    gathered: Vec<(usize, usize, usize, u64, u64)>,
    running: Vec<(usize, usize, usize, u64, u64)>,
    seen: Arc<Seen>,
}

impl BounceCopier for CpuCopier {
    fn buffers(&self) -> Vec<(usize, usize)> {
        self.bufs
            .iter()
            .map(|b| (b.as_mut_ptr() as usize, b.len()))
            .collect()
    }

    fn copy(
        &mut self,
        buf: usize,
        slot: usize,
        part: usize,
        offset: u64,
        len: u64,
    ) -> Result<(), String> {
        if *self.seen.fail_slot.lock().unwrap() == Some(slot) {
            return Err(format!("copies into slot {slot} fail (test)"));
        }
        self.gathered.push((buf, slot, part, offset, len));
        let busy = self.gathered.len() + self.running.len();
        self.seen.most_busy.fetch_max(busy, Ordering::Relaxed);
        Ok(())
    }

    fn submit(&mut self) -> Result<(), String> {
        self.running.append(&mut self.gathered);
        Ok(())
    }

    /// Makes the copies started (late, as a GPU might), and reports them done: a buffer
    /// the engine reused before this would have been overwritten by then.
    fn poll(&mut self, _wait: bool, done: &mut Vec<usize>) -> Result<(), String> {
        for (buf, slot, part, offset, len) in self.running.drain(..) {
            let PartMemory::Host(dst) = &self.slots[slot].parts()[part] else {
                return Err("not host memory".into());
            };
            assert!(offset + len <= dst.len() as u64, "copy past the part's end");
            // SAFETY: the engine gives the buffer to no read until the copy is reported
            // done, and no one reads the slot while its frame is being written.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    self.bufs[buf].as_ptr(),
                    dst.as_mut_ptr().add(offset as usize),
                    len as usize,
                );
            }
            self.seen.copies.fetch_add(1, Ordering::Relaxed);
            done.push(buf);
        }
        Ok(())
    }

    fn describe(&self) -> String {
        "CPU copies (test)".into()
    }
}

/// An engine reading into `buffers` bounce buffers of `io_size` bytes, copied on to
/// `slots` host slots of `layout`.
fn engine(
    source: &Source,
    backend: IoBackend,
    (slots, layout): (usize, SlotLayout),
    (buffers, io_size, queue_depth): (usize, usize, usize),
) -> (Engine, FrameRing, Arc<Seen>) {
    let ring = FrameRing::host(slots, layout).unwrap();
    let seen = Arc::new(Seen::default());
    let copier = CpuCopier {
        bufs: (0..buffers)
            .map(|_| HostBuffer::new(io_size).unwrap())
            .collect(),
        slots: ring.memories(),
        gathered: Vec::new(),
        running: Vec::new(),
        seen: seen.clone(),
    };
    let cfg = EngineConfig {
        threads: 2,
        queue_depth,
        io_size,
        backend,
        io_mode: IoMode::Buffered,
        ..EngineConfig::default()
    };
    let e = Engine::bounce(&source.files, ring.memories(), Box::new(copier), &cfg).unwrap();
    (e, ring, seen)
}

fn request(source: &Source, frame: u32, slot: usize) -> ReadRequest {
    ReadRequest {
        frame,
        slot,
        extents: source.frames[frame as usize].extents.clone(),
        requested: Instant::now(),
        progress: None,
    }
}

/// Frames of 3 parts read in 8 KiB pieces through 6 buffers: every frame byte-exact, the
/// buffers reused many times, never more busy than exist, and the engine reports itself as
/// the copier says.
#[test]
fn frames_arrive_byte_exact_in_parts_through_a_few_reused_buffers() {
    const FRAME: usize = 600 << 10;
    let dir = tempfile::tempdir().unwrap();
    let data = payload(11, 4 * FRAME);
    let p = dir.path().join("frames.bin");
    std::fs::write(&p, &data).unwrap();
    let source = Source::from_files(std::slice::from_ref(&p), FRAME as u64, FRAME as u64).unwrap();
    let layout = SlotLayout::new(FRAME as u64, 256 << 10).unwrap();
    assert_eq!(layout.parts(), 3);
    for backend in backends() {
        let (mut e, mut ring, seen) = engine(&source, backend, (2, layout), (6, 2 * PAGE, 4));
        assert!(
            e.info().mode.contains("6 bounce buffers"),
            "{}",
            e.info().mode
        );
        assert!(
            e.info().mode.contains("CPU copies (test)"),
            "{}",
            e.info().mode
        );
        for frame in [0u32, 1, 2, 3, 1, 0] {
            let slot = ring.begin_write(frame).expect("a free slot");
            e.submit(request(&source, frame, slot)).unwrap();
            let c = e
                .next_completion(Duration::from_secs(30))
                .unwrap()
                .expect("completes");
            assert_eq!((c.frame, c.slot), (frame, slot));
            c.result.unwrap();
            assert!(c.on_gpu.is_some(), "the copies' completion is the frame's");
            ring.finish_write(slot, true).unwrap();
            let f = frame as usize;
            assert!(
                ring.host_parts(slot).unwrap().concat() == data[f * FRAME..(f + 1) * FRAME],
                "{backend:?}: frame {frame} differs"
            );
            assert!(ring.evict(frame));
        }
        let copies = seen.copies.load(Ordering::Relaxed);
        assert!(copies >= 6 * FRAME / (2 * PAGE), "{copies} copies");
        assert!(seen.most_busy.load(Ordering::Relaxed) <= 6);
        assert_eq!(e.in_flight(), 0);
    }
}

/// A frame cancelled while its reads queue for buffers completes `Cancelled` without all
/// its reads; the slot reads again byte-exact. A copy that fails fails its frame (with
/// the copier's reason) and only it.
#[test]
fn cancel_and_failed_copies_fail_only_their_frame() {
    const FRAME: usize = 8 << 20;
    let dir = tempfile::tempdir().unwrap();
    let data = payload(5, 3 * FRAME);
    let p = dir.path().join("frames.bin");
    std::fs::write(&p, &data).unwrap();
    let source = Source::from_files(std::slice::from_ref(&p), FRAME as u64, FRAME as u64).unwrap();
    let reads_per_frame = FRAME / PAGE;
    for backend in backends() {
        let (mut e, mut ring, seen) = engine(
            &source,
            backend,
            (3, SlotLayout::whole(FRAME as u64)),
            (2, PAGE, 1),
        );
        for (frame, slot) in [(0, 0), (1, 1)] {
            assert_eq!(ring.begin_write(frame), Some(slot));
            e.submit(request(&source, frame, slot)).unwrap();
        }
        // Two buffers for 2 × 2,048 reads: frame 1's reads are still queued.
        e.cancel(1).unwrap();
        let mut results = HashMap::new();
        while results.len() < 2 {
            let c = e
                .next_completion(Duration::from_secs(30))
                .unwrap()
                .expect("both frames complete");
            ring.finish_write(c.slot, c.result.is_ok()).unwrap();
            results.insert(c.frame, c.result);
        }
        results.remove(&0).unwrap().expect("frame 0 reads whole");
        assert!(ring.host_parts(0).unwrap().concat() == data[..FRAME]);
        match results.remove(&1).unwrap() {
            Err(IngestError::Cancelled(1)) => {}
            other => panic!("{backend:?}: frame 1 should be cancelled, got {other:?}"),
        }
        let copies = seen.copies.load(Ordering::Relaxed);
        assert!(
            copies < 2 * reads_per_frame,
            "{backend:?}: {copies} copies; the cancelled frame's queued reads all ran"
        );
        // The cancelled slot reads again, byte-exact.
        assert_eq!(ring.begin_write(1), Some(1));
        e.submit(request(&source, 1, 1)).unwrap();
        let c = e.next_completion(Duration::from_secs(30)).unwrap().unwrap();
        c.result.unwrap();
        ring.finish_write(1, true).unwrap();
        assert!(ring.host_parts(1).unwrap().concat() == data[FRAME..2 * FRAME]);
        // Copies into slot 2 fail: its frame fails with the copier's reason; the engine
        // frees the buffers and reads on.
        *seen.fail_slot.lock().unwrap() = Some(2);
        assert_eq!(ring.begin_write(2), Some(2));
        e.submit(request(&source, 2, 2)).unwrap();
        let c = e.next_completion(Duration::from_secs(30)).unwrap().unwrap();
        let err = c.result.expect_err("a failed copy fails the frame");
        assert!(err.to_string().contains("slot 2 fail"), "{err}");
        ring.finish_write(2, false).unwrap();
        *seen.fail_slot.lock().unwrap() = None;
        assert!(ring.evict(0));
        let slot = ring.begin_write(2).expect("a free slot");
        e.submit(request(&source, 2, slot)).unwrap();
        let c = e.next_completion(Duration::from_secs(30)).unwrap().unwrap();
        c.result.unwrap();
        ring.finish_write(slot, true).unwrap();
        assert!(ring.host_parts(slot).unwrap().concat() == data[2 * FRAME..]);
        assert_eq!(e.in_flight(), 0);
    }
}

/// The engine refuses buffers smaller than its I/O size, and `verify` (the copier checks).
#[test]
fn bounce_engine_refuses_small_buffers_and_cpu_checks() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("frames.bin");
    std::fs::write(&p, payload(1, 2 * PAGE)).unwrap();
    let source = Source::from_files(std::slice::from_ref(&p), PAGE as u64, PAGE as u64).unwrap();
    let ring = FrameRing::host(2, PAGE).unwrap();
    let copier = |n: usize| CpuCopier {
        bufs: vec![HostBuffer::new(n).unwrap()],
        slots: ring.memories(),
        gathered: Vec::new(),
        running: Vec::new(),
        seen: Arc::default(),
    };
    let cfg = EngineConfig {
        io_size: 2 * PAGE,
        io_mode: IoMode::Buffered,
        ..EngineConfig::default()
    };
    let e = Engine::bounce(&source.files, ring.memories(), Box::new(copier(PAGE)), &cfg)
        .expect_err("a buffer smaller than a read");
    assert!(e.to_string().contains("smaller than"), "{e}");
    let verify = EngineConfig {
        verify: true,
        ..cfg.clone()
    };
    let e = Engine::bounce(
        &source.files,
        ring.memories(),
        Box::new(copier(2 * PAGE)),
        &verify,
    )
    .expect_err("verify");
    assert!(e.to_string().contains("copier"), "{e}");
}
