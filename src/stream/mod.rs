//! One frame stream: the loop that carries frames from the playback [`Scheduler`]'s plan
//! through an ingest engine into a frame ring, and says what became of each read.
//!
//! A [`FrameStream`] owns one path's moving parts: the [`Engine`], its [`FrameRing`], the
//! requests waiting for a free slot, and two sets of slots whose reads must be treated
//! specially:
//! - *stale* slots were being written when the path was left ([`FrameStream::leave`]):
//!   their frames belong to a schedule that no longer exists and are dropped on arrival;
//! - *held* slots belong to frames that timed out while reads into them were still out:
//!   they stay reserved until the engine releases them ([`IngestError::Released`]).
//!
//! One turn of the loop is [`FrameStream::feed`] (evict what the scheduler no longer wants,
//! drop cancelled requests, abort abandoned reads, submit requests into free slots) and
//! [`FrameStream::next_event`] (one completion, classified as a [`StreamEvent`], with the
//! ring and the scheduler already told). What a frame that landed is *for* (rendering it,
//! timing it, checking it) is the caller's business; a caller whose own check fails
//! hands the frame back with [`FrameStream::reject`].
//!
//! Ownership: the stream owns everything that belongs to one path; the [`Scheduler`] stays
//! the caller's and is lent to each call that reports to it. The scheduler describes
//! playback (playhead, direction, which frames are wanted or damaged), not a path: the
//! player runs two paths under one scheduler and feeds only the active one, and a path it
//! switches away from keeps draining without touching the schedule (every read still out
//! on it is stale, and stale reads never report to the scheduler).

#[cfg(test)]
mod tests;

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::gpu::{FrameRing, SlotState};
use crate::ingest::{
    Completion, Engine, IngestEngine, IngestError, ReadProgress, ReadRequest, Result, Source,
};
use crate::pipeline::Scheduler;

/// Fewest ring slots a run can stream with: the scheduler keeps the frame shown resident and
/// reads the next one into another slot, so with one slot playback would wait forever.
pub const MIN_SLOTS: usize = 2;

/// Refuses a ring of fewer than [`MIN_SLOTS`] slots asked for with `--slots`, saying why.
pub fn check_slots(slots: Option<usize>) -> Result<(), String> {
    match slots {
        Some(n) if n < MIN_SLOTS => Err(format!(
            "--slots {n}: at least {MIN_SLOTS} are needed (the frame shown holds one slot \
             while the next is read into another)"
        )),
        _ => Ok(()),
    }
}

/// What became of one read, as [`FrameStream::next_event`] reports it. The ring and the
/// scheduler have been told already (see each variant).
#[derive(Debug)]
pub enum StreamEvent {
    /// Every byte of the frame is in its slot, which is now `Ready`, and the scheduler has
    /// it as loaded. A caller whose own check of the frame fails calls
    /// [`FrameStream::reject`]. With [`FrameStream::land_checksum_mismatches`] the
    /// completion may carry an [`IngestError::Checksum`].
    Landed(Completion),
    /// The read failed (the error is in the completion): the slot is free and the
    /// scheduler has the frame as damaged.
    Failed(Completion),
    /// The read was aborted ([`crate::pipeline::Plan::abort`]): the slot is free and the
    /// scheduler has forgotten the frame (it asks again if it still wants it).
    Cancelled(Completion),
    /// The frame timed out with reads into its slot still out: the scheduler has it as
    /// damaged, and the slot stays reserved until [`StreamEvent::Released`].
    Held(Completion),
    /// The engine released a held slot: it is free again.
    Released {
        /// The slot.
        slot: usize,
    },
    /// A read issued before the path was left ended (landed, failed, cancelled, or timed
    /// out with the slot still held): its frame is dropped, and the scheduler is not told.
    Stale(Completion),
}

impl StreamEvent {
    /// The slot the event is about.
    pub fn slot(&self) -> usize {
        match self {
            StreamEvent::Landed(c)
            | StreamEvent::Failed(c)
            | StreamEvent::Cancelled(c)
            | StreamEvent::Held(c)
            | StreamEvent::Stale(c) => c.slot,
            StreamEvent::Released { slot } => *slot,
        }
    }
}

/// One path's engine, frame ring and requests; see the module documentation.
#[derive(Debug)]
pub struct FrameStream {
    engine: Engine,
    ring: FrameRing,
    /// Requested by the scheduler, not yet submitted (waiting for a free slot), with when
    /// they were requested.
    pending: VecDeque<(u32, Instant)>,
    /// Slots whose writes were issued before the path was last left.
    stale: HashSet<usize>,
    /// Slots whose frame timed out while reads into them were still out.
    held: HashSet<usize>,
    /// A frame whose only fault is a checksum mismatch lands anyway.
    land_mismatches: bool,
}

impl FrameStream {
    /// A stream of `engine` reading into `ring` (the ring the engine was opened on).
    pub fn new(engine: Engine, ring: FrameRing) -> FrameStream {
        FrameStream {
            engine,
            ring,
            pending: VecDeque::new(),
            stale: HashSet::new(),
            held: HashSet::new(),
            land_mismatches: false,
        }
    }

    /// Frames whose only fault is a checksum mismatch ([`IngestError::Checksum`]) land
    /// like good ones, with the error in the completion: a benchmark measures on and
    /// reports every bad extent, where a player must not show the frame.
    pub fn land_checksum_mismatches(mut self) -> FrameStream {
        self.land_mismatches = true;
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }
    /// The frame ring.
    pub fn ring(&self) -> &FrameRing {
        &self.ring
    }
    /// The frame ring, for the consumer's side: showing a frame ([`FrameRing::acquire`])
    /// and giving it back ([`FrameRing::release`], [`FrameStream::retire`]).
    pub fn ring_mut(&mut self) -> &mut FrameRing {
        &mut self.ring
    }
    /// Frames submitted to the engine and not yet completed.
    pub fn in_flight(&self) -> usize {
        self.engine.in_flight()
    }
    /// Slots reserved by timed-out reads still out.
    pub fn held_slots(&self) -> usize {
        self.held.len()
    }
    /// Whether the write into `slot` was issued before the path was last left.
    pub fn is_stale(&self, slot: usize) -> bool {
        self.stale.contains(&slot)
    }
    /// Requests waiting for a free slot.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// [`FrameStream::feed_with`] without a limit or a per-slot preparation.
    pub fn feed(&mut self, sched: &mut Scheduler, source: &Source) -> Result<usize> {
        self.feed_with(sched, source, u64::MAX, |_| Ok(None))
    }

    /// Carries out the scheduler's plan: evicts resident frames it no longer wants, drops
    /// requests it cancelled, aborts reads it abandoned (their slots come back with
    /// [`StreamEvent::Cancelled`]), queues its new requests, and submits queued requests
    /// into free slots, oldest first, at most `max` of them. `prepare` is called with each
    /// slot just taken, before its read is submitted, and returns where the engine should
    /// report the slot's byte ranges as they land (if anywhere). Returns how many reads
    /// were submitted.
    pub fn feed_with<E: From<IngestError>>(
        &mut self,
        sched: &mut Scheduler,
        source: &Source,
        max: u64,
        mut prepare: impl FnMut(usize) -> std::result::Result<Option<Arc<ReadProgress>>, E>,
    ) -> std::result::Result<usize, E> {
        for f in sched.evictable() {
            if self.ring.evict(f) {
                sched.evicted(f);
            }
        }
        let plan = sched.plan();
        self.pending.retain(|(f, _)| !plan.cancel.contains(f));
        for f in &plan.abort {
            // The frame's slot is freed when the engine reports the read (cancelled). A
            // stale or held slot may carry the same frame number for an older schedule.
            if let Some(slot) = self.ring.states().iter().enumerate().position(|(i, s)| {
                *s == SlotState::Writing(*f) && !self.stale.contains(&i) && !self.held.contains(&i)
            }) {
                self.engine.cancel(slot)?;
            }
        }
        let now = Instant::now();
        self.pending
            .extend(plan.request.into_iter().map(|f| (f, now)));
        let mut submitted = 0usize;
        while let Some(&(f, at)) = self.pending.front() {
            if submitted as u64 >= max {
                break;
            }
            let Some(slot) = self.ring.begin_write(f) else {
                break;
            };
            self.pending.pop_front();
            let progress = match prepare(slot) {
                Ok(p) => p,
                Err(e) => {
                    let _ = self.ring.finish_write(slot, false);
                    return Err(e);
                }
            };
            let extents = match source.frames.get(f as usize) {
                Some(frame) => frame.extents.clone(),
                None => {
                    let _ = self.ring.finish_write(slot, false);
                    return Err(IngestError::Usage(format!(
                        "frame {f} requested, but the source has {} frames",
                        source.frames.len()
                    ))
                    .into());
                }
            };
            if let Err(e) = self.engine.submit(ReadRequest {
                frame: f,
                slot,
                extents,
                requested: at,
                progress,
            }) {
                let _ = self.ring.finish_write(slot, false);
                return Err(e.into());
            }
            sched.started(f);
            submitted += 1;
        }
        Ok(submitted)
    }

    /// The next completion, waiting up to `timeout`, classified and accounted for: its
    /// slot's state in the ring, the stale and held sets, and the scheduler (see
    /// [`StreamEvent`]). `None` when nothing completed in time.
    pub fn next_event(
        &mut self,
        sched: &mut Scheduler,
        timeout: Duration,
    ) -> Result<Option<StreamEvent>> {
        let Some(c) = self.engine.next_completion(timeout)? else {
            return Ok(None);
        };
        self.classify(sched, c).map(Some)
    }

    /// The next completion that has already arrived (see [`FrameStream::next_event`]);
    /// `None` at once when nothing is in flight.
    pub fn poll(&mut self, sched: &mut Scheduler) -> Result<Option<StreamEvent>> {
        if self.engine.in_flight() == 0 {
            return Ok(None);
        }
        self.next_event(sched, Duration::ZERO)
    }

    fn classify(&mut self, sched: &mut Scheduler, c: Completion) -> Result<StreamEvent> {
        if c.holds_slot() {
            // The frame failed, but reads into its slot are still out: the slot stays
            // `Writing` (reserved) until the engine releases it.
            self.held.insert(c.slot);
            if self.stale.contains(&c.slot) {
                return Ok(StreamEvent::Stale(c));
            }
            sched.failed(c.frame);
            return Ok(StreamEvent::Held(c));
        }
        if matches!(c.result, Err(IngestError::Released(_))) {
            self.held.remove(&c.slot);
            self.stale.remove(&c.slot);
            self.ring.finish_write(c.slot, false)?;
            return Ok(StreamEvent::Released { slot: c.slot });
        }
        if self.stale.remove(&c.slot) {
            // Free the slot by slot: the same frame may be resident elsewhere, read for the
            // new schedule.
            self.ring.finish_write(c.slot, false)?;
            return Ok(StreamEvent::Stale(c));
        }
        let lands = match &c.result {
            Ok(()) => true,
            Err(IngestError::Checksum { .. }) => self.land_mismatches,
            Err(_) => false,
        };
        self.ring.finish_write(c.slot, lands)?;
        Ok(if lands {
            sched.loaded(c.frame);
            StreamEvent::Landed(c)
        } else if matches!(c.result, Err(IngestError::Cancelled(_))) {
            // An aborted read is no error: the scheduler asks again if it still wants it.
            sched.evicted(c.frame);
            StreamEvent::Cancelled(c)
        } else {
            sched.failed(c.frame);
            StreamEvent::Failed(c)
        })
    }

    /// A frame that landed failed the caller's own check: it leaves the ring, and the
    /// scheduler has it as damaged (it is read again on a later visit).
    pub fn reject(&mut self, sched: &mut Scheduler, frame: u32) {
        self.ring.evict(frame);
        sched.failed(frame);
    }

    /// The consumer is done with the frame shown from `slot`: the slot is released and its
    /// frame evicted, so playback streams every frame it shows from storage (a dataset
    /// that fits in the ring must not turn into a cache). The eviction is reported to
    /// `sched` where given (the stream is the scheduler's). Returns the evicted frame.
    pub fn retire(&mut self, slot: usize, sched: Option<&mut Scheduler>) -> Option<u32> {
        self.ring.release(slot);
        let Some(&SlotState::Ready(frame)) = self.ring.states().get(slot) else {
            return None;
        };
        if !self.ring.evict(frame) {
            return None;
        }
        if let Some(s) = sched {
            s.evicted(frame);
        }
        Some(frame)
    }

    /// Drops the queued requests and abandons the reads not yet issued of every slot being
    /// written (a failed cancel only means a slower drain).
    pub fn cancel_all(&mut self) {
        self.pending.clear();
        for (i, s) in self.ring.states().iter().enumerate() {
            if matches!(s, SlotState::Writing(_)) {
                let _ = self.engine.cancel(i);
            }
        }
    }

    /// The path stops being fed (a switch to another path): every read still out becomes
    /// stale (dropped on arrival, never reported to the scheduler) and is abandoned, queued
    /// requests are dropped, and resident frames are evicted.
    pub fn leave(&mut self) {
        for (i, s) in self.ring.states().iter().enumerate() {
            if matches!(s, SlotState::Writing(_)) {
                self.stale.insert(i);
            }
        }
        self.cancel_all();
        self.evict_resident();
    }

    /// The path is fed again under a new schedule: frames still resident from an earlier
    /// visit are stale by now and are evicted (reads still out stay stale).
    pub fn enter(&mut self) {
        self.evict_resident();
    }

    fn evict_resident(&mut self) {
        let resident: Vec<u32> = self
            .ring
            .states()
            .iter()
            .filter_map(|s| match s {
                SlotState::Ready(f) => Some(*f),
                _ => None,
            })
            .collect();
        for f in resident {
            self.ring.evict(f);
        }
    }

    /// Stops issuing reads and waits (until `end` at most) for the reads in flight to end,
    /// so the engine shuts down idle. Frames that timed out with reads still out (held) are
    /// not waited for: their reads had the read timeout to answer, and may never (the
    /// engine abandons them when it stops). The scheduler is not told.
    pub fn drain(&mut self, end: Instant) {
        self.cancel_all();
        while self.engine.in_flight() > self.held.len() && Instant::now() < end {
            if let Ok(Some(c)) = self.engine.next_completion(Duration::from_millis(10)) {
                if c.holds_slot() {
                    // Reads still out: the slot is freed when they end.
                    self.held.insert(c.slot);
                    continue;
                }
                let _ = self.ring.finish_write(c.slot, c.result.is_ok());
                self.stale.remove(&c.slot);
                self.held.remove(&c.slot);
            }
        }
    }
}
