//! The stream against a real host engine (pread, one I/O thread, so reads run in the order
//! they were submitted) on a temporary file, with injected faults where a read must hang
//! or fail.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{FrameStream, StreamEvent};
use crate::gpu::{FrameRing, SlotState};
use crate::ingest::{
    Engine, EngineConfig, EngineKind, FaultPlan, IngestError, IoBackend, IoMode, Source,
};
use crate::pipeline::{FrameState, PlayMode, PlaybackConfig, Scheduler};

const PAGE: usize = 4096;
/// Pages per frame: one read each, so a hung first read leaves the rest queued.
const FRAME_PAGES: usize = 16;

struct Rig {
    _dir: tempfile::TempDir,
    source: Source,
    data: Vec<u8>,
    plan: Arc<FaultPlan>,
}

impl Rig {
    fn new(frames: usize, faults: &str) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let len = frames * FRAME_PAGES * PAGE;
        let data: Vec<u8> = (0..len)
            .map(|i| (i / PAGE * 31 + i * 7 + 1) as u8)
            .collect();
        let file: PathBuf = dir.path().join("frames.bin");
        std::fs::write(&file, &data).unwrap();
        let frame = (FRAME_PAGES * PAGE) as u64;
        let source = Source::from_files(&[file], frame, 4 * PAGE as u64).unwrap();
        assert_eq!(source.frames.len(), frames);
        Rig {
            _dir: dir,
            source,
            data,
            plan: Arc::new(FaultPlan::parse(faults).unwrap()),
        }
    }

    fn stream(&self, slots: usize, read_timeout: Option<Duration>) -> FrameStream {
        let ring = FrameRing::host(slots, self.source.max_frame_len() as usize).unwrap();
        let cfg = EngineConfig {
            threads: 1,
            queue_depth: 1,
            io_size: PAGE,
            backend: IoBackend::Pread,
            io_mode: IoMode::Buffered,
            read_timeout,
            faults: Some(self.plan.clone()),
            ..EngineConfig::default()
        };
        let engine = Engine::host(
            EngineKind::CpuOnly,
            &self.source.files,
            ring.memories(),
            &cfg,
        )
        .unwrap();
        FrameStream::new(engine, ring)
    }

    fn frame_bytes(&self, frame: u32) -> &[u8] {
        let len = FRAME_PAGES * PAGE;
        &self.data[frame as usize * len..][..len]
    }
}

fn scheduler(frames: u32, window: usize, mode: PlayMode) -> Scheduler {
    let mut s = Scheduler::new(PlaybackConfig {
        frame_count: frames,
        mode,
        speed_fps: None,
        window,
    });
    s.set_playing(true);
    s
}

/// The next event, within a few seconds.
fn event(stream: &mut FrameStream, sched: &mut Scheduler) -> StreamEvent {
    let end = Instant::now() + Duration::from_secs(20);
    loop {
        assert!(Instant::now() < end, "no completion");
        if let Some(e) = stream.next_event(sched, Duration::from_millis(20)).unwrap() {
            return e;
        }
    }
}

/// (variant, frame) of an event, for comparing sequences.
fn kind(e: &StreamEvent) -> (&'static str, Option<u32>) {
    match e {
        StreamEvent::Landed(c) => ("landed", Some(c.frame)),
        StreamEvent::Failed(c) => ("failed", Some(c.frame)),
        StreamEvent::Cancelled(c) => ("cancelled", Some(c.frame)),
        StreamEvent::Held(c) => ("held", Some(c.frame)),
        StreamEvent::Released { .. } => ("released", None),
        StreamEvent::Stale(c) => ("stale", Some(c.frame)),
    }
}

/// Playing a whole timeline once through three slots: every frame lands once, in the
/// scheduler's order, byte-exact, before it is shown; shown frames are retired, so the
/// ring never holds more than its slots and every frame is read from storage.
#[test]
fn frames_land_in_order_and_play_through_a_small_ring() {
    let rig = Rig::new(7, "");
    let mut stream = rig.stream(3, None);
    let mut sched = scheduler(7, 3, PlayMode::Once);
    let (mut landed, mut shown) = (Vec::new(), Vec::new());
    let mut on_screen: Option<usize> = None;
    let end = Instant::now() + Duration::from_secs(30);
    while shown.len() < 7 {
        assert!(
            Instant::now() < end,
            "stuck: landed {landed:?}, shown {shown:?}"
        );
        stream.feed(&mut sched, &rig.source).unwrap();
        assert!(stream.in_flight() <= 3);
        if let Some(e) = stream
            .next_event(&mut sched, Duration::from_millis(5))
            .unwrap()
        {
            let StreamEvent::Landed(c) = e else {
                panic!("unexpected {:?}", kind(&e));
            };
            c.result.unwrap();
            assert_eq!(sched.state(c.frame), Some(FrameState::Ready));
            assert_eq!(stream.ring().states()[c.slot], SlotState::Ready(c.frame));
            landed.push(c.frame);
        }
        if let Some(f) = sched.tick(0.0) {
            assert!(landed.contains(&f), "frame {f} shown before it landed");
            let slot = stream.ring_mut().acquire(f).expect("resident");
            assert!(stream.ring().host_parts(slot).unwrap().concat() == rig.frame_bytes(f));
            if let Some(prev) = on_screen.replace(slot) {
                assert!(stream.retire(prev, Some(&mut sched)).is_some());
            }
            shown.push(f);
        }
    }
    assert_eq!(landed, (0..7).collect::<Vec<_>>());
    assert_eq!(shown, (0..7).collect::<Vec<_>>());
    assert_eq!(stream.in_flight(), 0);
    assert_eq!(stream.pending(), 0);
}

/// A jump abandons the reads the scheduler no longer wants: their queued reads are dropped,
/// they come back cancelled with their slots free and the scheduler forgetting them, and
/// the frame jumped to lands.
#[test]
fn a_jump_cancels_abandoned_reads() {
    let rig = Rig::new(8, "hang:frame=1");
    let mut stream = rig.stream(3, None);
    let mut sched = scheduler(8, 3, PlayMode::Loop);
    assert_eq!(stream.feed(&mut sched, &rig.source).unwrap(), 3);
    assert_eq!(kind(&event(&mut stream, &mut sched)), ("landed", Some(0)));
    // Frame 1 hangs on its first read, frame 2 waits behind it.
    sched.set_playing(false);
    sched.scrub(6);
    assert_eq!(stream.feed(&mut sched, &rig.source).unwrap(), 1);
    assert_eq!(sched.stats().aborted, 2);
    // Frame 2 ends as soon as the engine takes the cancel, where its read is still queued.
    // Frame 1 ends cancelled too: at once if its hung read had not reached the worker yet,
    // else when the hang is let go. Which of the two the engine reports first depends on
    // its thread, so only the set is checked (the hang is lifted after the first). Rarely
    // the worker has taken frame 2's read before frame 1's hung one and finished it before
    // the cancel: frame 2 then lands and stays resident (seen once in a full test run).
    let first = kind(&event(&mut stream, &mut sched));
    rig.plan.lift();
    let mut events: Vec<_> = std::iter::once(first)
        .chain((0..2).map(|_| kind(&event(&mut stream, &mut sched))))
        .collect();
    events.sort();
    let frame_2_landed = events.contains(&("landed", Some(2)));
    let frame_2 = if frame_2_landed {
        "landed"
    } else {
        "cancelled"
    };
    assert_eq!(
        events,
        [
            ("cancelled", Some(1)),
            (frame_2, Some(2)),
            ("landed", Some(6))
        ]
    );
    assert_eq!(sched.state(1), None);
    assert_eq!(sched.state(6), Some(FrameState::Ready));
    let mut states = stream.ring().states().to_vec();
    states.sort_by_key(|s| format!("{s:?}"));
    if frame_2_landed {
        assert_eq!(sched.state(2), Some(FrameState::Ready));
        assert_eq!(
            states,
            [SlotState::Free, SlotState::Ready(2), SlotState::Ready(6)]
        );
    } else {
        assert_eq!(sched.state(2), None);
        assert_eq!(
            states,
            [SlotState::Free, SlotState::Free, SlotState::Ready(6)]
        );
    }
    assert_eq!(stream.in_flight(), 0);
}

/// After the path is left, reads still out are stale: they never reach the new schedule,
/// not even when it asks for the same frame again (that request gets its own slot and
/// lands as itself).
#[test]
fn reads_issued_before_leaving_are_stale() {
    let rig = Rig::new(8, "hang:frame=1");
    let mut stream = rig.stream(3, None);
    let mut old = scheduler(8, 3, PlayMode::Loop);
    stream.feed(&mut old, &rig.source).unwrap();
    assert_eq!(kind(&event(&mut stream, &mut old)), ("landed", Some(0)));
    stream.leave();
    assert!(stream.is_stale(1) && stream.is_stale(2) && !stream.is_stale(0));
    assert_eq!(
        stream.ring().states()[0],
        SlotState::Free,
        "resident frames go"
    );
    // A new schedule at frame 1, paused: it wants frame 1 alone, in the free slot.
    let mut new = scheduler(8, 3, PlayMode::Loop);
    new.set_playing(false);
    new.scrub(1);
    stream.enter();
    assert_eq!(stream.feed(&mut new, &rig.source).unwrap(), 1);
    assert_eq!(stream.ring().states()[0], SlotState::Writing(1));
    // The scheduler aborts nothing: the stale slot holding frame 1 is not the new read.
    assert_eq!(new.stats().aborted, 0);
    rig.plan.lift();
    let mut events: Vec<_> = (0..3)
        .map(|_| {
            let e = event(&mut stream, &mut new);
            (kind(&e), e.slot())
        })
        .collect();
    // Frame 2 (no read issued) ends when cancelled, frame 1 once its hung read does.
    events.sort();
    assert_eq!(
        events,
        [
            (("landed", Some(1)), 0),
            (("stale", Some(1)), 1),
            (("stale", Some(2)), 2)
        ]
    );
    assert_eq!(new.state(1), Some(FrameState::Ready));
    assert_eq!(new.state(2), None);
    assert_eq!(
        stream.ring().states(),
        [SlotState::Ready(1), SlotState::Free, SlotState::Free]
    );
    assert!(!stream.is_stale(1) && !stream.is_stale(2));
}

/// A failed read marks its frame damaged in the scheduler and frees its slot; playback
/// passes over it. A frame the caller rejects goes the same way.
#[test]
fn a_failed_read_marks_the_frame_damaged() {
    let rig = Rig::new(6, "eio:frame=2");
    let mut stream = rig.stream(3, None);
    let mut sched = scheduler(6, 3, PlayMode::Once);
    stream.feed(&mut sched, &rig.source).unwrap();
    let events: Vec<_> = (0..3).map(|_| event(&mut stream, &mut sched)).collect();
    assert_eq!(
        events.iter().map(kind).collect::<Vec<_>>(),
        [
            ("landed", Some(0)),
            ("landed", Some(1)),
            ("failed", Some(2))
        ]
    );
    let StreamEvent::Failed(c) = &events[2] else {
        unreachable!()
    };
    assert!(
        matches!(c.result, Err(IngestError::Read { .. })),
        "{:?}",
        c.result
    );
    assert_eq!(sched.state(2), Some(FrameState::Damaged));
    assert!(!stream.ring().states().contains(&SlotState::Writing(2)));
    assert!(!stream.ring().states().contains(&SlotState::Ready(2)));
    // The caller's own check fails frame 1: it leaves the ring and is damaged too.
    stream.reject(&mut sched, 1);
    assert_eq!(sched.state(1), Some(FrameState::Damaged));
    assert!(!stream.ring().states().contains(&SlotState::Ready(1)));
    assert_eq!(sched.tick(0.0), Some(0));
    for _ in 0..4 {
        assert_eq!(sched.tick(0.0), None, "frames 1 and 2 are passed over");
    }
    assert_eq!(sched.stats().damaged_skipped, 2);
    assert_eq!(
        sched.position(),
        2,
        "the playhead waits past them for frame 3"
    );
}

/// A frame that times out with a read still out is damaged at once, but its slot stays
/// reserved (not fed) until the engine releases it.
#[test]
fn a_timed_out_read_holds_its_slot_until_released() {
    let rig = Rig::new(4, "hang:frame=0");
    let mut stream = rig.stream(2, Some(Duration::from_millis(100)));
    // A window of one: frame 0 alone is read.
    let mut sched = scheduler(4, 1, PlayMode::Once);
    assert_eq!(stream.feed(&mut sched, &rig.source).unwrap(), 1);
    let e = event(&mut stream, &mut sched);
    assert_eq!(kind(&e), ("held", Some(0)));
    let held = e.slot();
    assert_eq!(sched.state(0), Some(FrameState::Damaged));
    assert_eq!(stream.held_slots(), 1);
    assert_eq!(stream.ring().states()[held], SlotState::Writing(0));
    rig.plan.lift();
    let e = event(&mut stream, &mut sched);
    assert_eq!((kind(&e), e.slot()), (("released", None), held));
    assert_eq!(stream.held_slots(), 0);
    assert_eq!(stream.ring().states()[held], SlotState::Free);
    assert_eq!(stream.in_flight(), 0);
}

/// With mismatches landing (the benchmark's way), a frame whose bytes fail their checksum
/// is resident with the error attached; without, it fails.
#[test]
fn checksum_mismatches_land_only_when_asked() {
    for land in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let data = vec![7u8; FRAME_PAGES * PAGE];
        let file = dir.path().join("f.bin");
        std::fs::write(&file, &data).unwrap();
        let mut source = Source::from_files(
            &[file],
            (FRAME_PAGES * PAGE) as u64,
            (FRAME_PAGES * PAGE) as u64,
        )
        .unwrap();
        for e in &mut source.frames[0].extents {
            e.crc32 = Some(0xdead_beef);
        }
        let ring = FrameRing::host(2, FRAME_PAGES * PAGE).unwrap();
        let cfg = EngineConfig {
            threads: 1,
            backend: IoBackend::Pread,
            io_mode: IoMode::Buffered,
            verify: true,
            ..EngineConfig::default()
        };
        let engine =
            Engine::host(EngineKind::CpuOnly, &source.files, ring.memories(), &cfg).unwrap();
        let mut stream = FrameStream::new(engine, ring);
        if land {
            stream = stream.land_checksum_mismatches();
        }
        let mut sched = scheduler(1, 2, PlayMode::Once);
        stream.feed(&mut sched, &source).unwrap();
        let e = event(&mut stream, &mut sched);
        let c = match (&e, land) {
            (StreamEvent::Landed(c), true) | (StreamEvent::Failed(c), false) => c,
            _ => panic!("land {land}: {:?}", kind(&e)),
        };
        assert!(matches!(c.result, Err(IngestError::Checksum { .. })));
        let want = if land {
            Some(FrameState::Ready)
        } else {
            Some(FrameState::Damaged)
        };
        assert_eq!(sched.state(0), want);
    }
}
