//! The stream loop the ingest tests share: a whole timeline played once through a
//! [`FrameStream`], every frame checked as it lands and as it is shown.

use std::time::{Duration, Instant};

use supercell::ingest::{Completion, Source};
use supercell::pipeline::{PlayMode, PlaybackConfig, Scheduler};
use supercell::stream::{FrameStream, StreamEvent};

/// Plays frames `0..frames` of `source` once, as fast as they arrive, through `stream`
/// (whose ring size is the prefetch window): `landed` sees each frame as it lands (its slot
/// resident), `shown` each frame and its slot as the consumer takes it; a shown frame is
/// retired when the next one is taken, so every frame is read from storage. Every read
/// must land. Returns the frames shown, in order.
pub fn play_once(
    stream: &mut FrameStream,
    source: &Source,
    frames: u32,
    timeout: Duration,
    mut landed: impl FnMut(&FrameStream, &Completion),
    mut shown: impl FnMut(&FrameStream, u32, usize),
) -> Vec<u32> {
    let mut sched = Scheduler::new(PlaybackConfig {
        frame_count: frames,
        mode: PlayMode::Once,
        speed_fps: None,
        window: stream.ring().len(),
    });
    sched.set_playing(true);
    let deadline = Instant::now() + timeout;
    let mut order = Vec::new();
    let mut on_screen: Option<usize> = None;
    while order.len() < frames as usize {
        assert!(Instant::now() < deadline, "timed out; shown {order:?}");
        stream.feed(&mut sched, source).unwrap();
        match stream
            .next_event(&mut sched, Duration::from_millis(5))
            .unwrap()
        {
            Some(StreamEvent::Landed(c)) => {
                if let Err(e) = &c.result {
                    panic!("frame {}: {e}", c.frame);
                }
                landed(stream, &c);
            }
            Some(other) => panic!("a read did not land: {other:?}"),
            None => {}
        }
        if let Some(f) = sched.tick(0.0) {
            let slot = stream
                .ring_mut()
                .acquire(f)
                .expect("shown frames are resident");
            shown(stream, f, slot);
            if let Some(prev) = on_screen.replace(slot) {
                stream.retire(prev, Some(&mut sched));
            }
            order.push(f);
        }
    }
    order
}
