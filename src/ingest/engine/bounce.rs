//! The bounce engine: reads land in a small set of host buffers the caller provides; a
//! [`BounceCopier`] moves each filled buffer on to its slot's part, wherever that part lives
//! (the player's copier has the GPU copy out of host memory imported into Vulkan, into
//! device buffers), and a buffer is reused only once its copy has completed. Host memory
//! stays small (threads × queue depth × I/O size, give or take) and therefore hot, whatever
//! the frame size.
//!
//! The coordinator hands every landed buffer to the copier at once, asks it to start the
//! copies gathered in one turn of its loop together ([`BounceCopier::submit`]), and polls it
//! for the buffers whose copies have completed. A piece, and so its frame, completes only
//! when its copy has: a completed frame is entirely in its slot.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::plan::{Coordinator, Piece};
use crate::ingest::error::IngestError;
use crate::ingest::io::IoDone;

/// The longest a gathered copy waits for more to start with it (see [`Bounce::batch`]).
const GATHER_FOR: Duration = Duration::from_micros(250);

/// Moves bytes from the bounce buffers to the slots; see the module documentation.
pub trait BounceCopier: Send {
    /// The host buffers reads land in, as (address, length): page aligned, each at least
    /// the engine's I/O size, valid while the copier lives.
    fn buffers(&self) -> Vec<(usize, usize)>;
    /// Gathers a copy of the first `len` bytes of buffer `buf` to byte `offset` of part
    /// `part` of slot `slot`; it starts at the next [`BounceCopier::submit`]. The buffer is
    /// not written again until [`BounceCopier::poll`] has returned it.
    fn copy(
        &mut self,
        buf: usize,
        slot: usize,
        part: usize,
        offset: u64,
        len: u64,
    ) -> Result<(), String>;
    /// Starts the copies gathered since the last call.
    fn submit(&mut self) -> Result<(), String>;
    /// Appends to `done` the buffers whose copies have completed since the last call;
    /// with `wait`, first waits for every copy started.
    fn poll(&mut self, wait: bool, done: &mut Vec<usize>) -> Result<(), String>;
    /// How the copies run, for the engine's mode line.
    fn describe(&self) -> String;
}

/// What a bounce buffer is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Use {
    Free,
    /// A read into it is in flight.
    Reading,
    /// Its copy is gathered, not yet started.
    Gathered,
    /// Its copy has started.
    Copying,
}

/// The bounce engine's state on the coordinator thread.
pub(super) struct Bounce {
    pub(super) copier: Box<dyn BounceCopier>,
    /// The piece each buffer holds (indices as the copier's buffers).
    pub(super) pieces: Vec<Option<Piece>>,
    uses: Vec<Use>,
    free: Vec<usize>,
    /// Reads waiting for a free buffer, in plan order.
    pub(super) pending: VecDeque<Piece>,
    /// Buffers whose copies are gathered and not yet started.
    gathered: Vec<usize>,
    /// When the oldest of them was gathered.
    gathered_at: Option<Instant>,
    /// Copies started together once this many are gathered (an eighth of the buffers), or
    /// once the oldest has waited [`GATHER_FOR`]: each start costs the copier a submission
    /// (tens of microseconds on a GPU), and reads land far more often than that at tens of
    /// GB/s.
    batch: usize,
    addrs: Vec<usize>,
}

impl Bounce {
    pub(super) fn new(copier: Box<dyn BounceCopier>) -> Bounce {
        let addrs: Vec<usize> = copier.buffers().iter().map(|b| b.0).collect();
        let n = addrs.len();
        Bounce {
            copier,
            pieces: vec![None; n],
            uses: vec![Use::Free; n],
            free: (0..n).rev().collect(),
            pending: VecDeque::new(),
            gathered: Vec::new(),
            gathered_at: None,
            batch: (n / 8).max(1),
            addrs,
        }
    }

    /// Buffers.
    pub(super) fn len(&self) -> usize {
        self.addrs.len()
    }

    /// Whether a copy is gathered or running (the coordinator then polls often).
    pub(super) fn busy(&self) -> bool {
        self.uses
            .iter()
            .any(|u| matches!(u, Use::Gathered | Use::Copying))
    }

    fn release(&mut self, b: usize) -> Option<Piece> {
        self.uses[b] = Use::Free;
        self.free.push(b);
        self.pieces[b].take()
    }
}

impl Coordinator {
    /// A read into a bounce buffer ended: its bytes go to the copier, or its error to the
    /// frame.
    pub(super) fn on_bounce_io(&mut self, d: IoDone) {
        let Some(mut s) = self.bounce.take() else {
            return;
        };
        let b = d.token as usize;
        let Some(piece) = s.pieces.get(b).copied().flatten() else {
            self.bounce = Some(s);
            return;
        };
        let abandoned = self.jobs.get(&piece.seq).is_none_or(|j| j.timed_out);
        let outcome = match d.result {
            Err(msg) => Some(Some(self.read_err(&piece, msg))),
            // The frame timed out: its slot gets nothing more.
            Ok(()) if abandoned => Some(None),
            Ok(()) => {
                // The read's arrival is the frame's first/last byte; the piece completes
                // when its copy does.
                let slot = self.jobs.get_mut(&piece.seq).map(|job| {
                    job.note_arrival(d.completed);
                    job.req.slot
                });
                let r = slot
                    .ok_or_else(|| "the frame is gone".to_string())
                    .and_then(|slot| {
                        s.copier.copy(
                            b,
                            slot,
                            piece.part as usize,
                            piece.part_offset,
                            piece.len as u64,
                        )
                    });
                match r {
                    Ok(()) => {
                        s.uses[b] = Use::Gathered;
                        s.gathered.push(b);
                        s.gathered_at.get_or_insert(d.completed);
                        None
                    }
                    Err(e) => Some(Some(IngestError::Unavailable(format!(
                        "copying a read on: {e}"
                    )))),
                }
            }
        };
        if outcome.is_some() {
            s.release(b);
        }
        self.bounce = Some(s);
        if let Some(err) = outcome {
            self.piece_done(piece.seq, d.completed, err);
        }
    }

    /// Starts the copies gathered (a batch's worth, or the oldest has waited long enough;
    /// with `wait`, all), then completes the pieces whose copies have completed (`wait`:
    /// waits for all of them).
    pub(super) fn pump_bounce(&mut self, wait: bool) {
        let Some(s) = &mut self.bounce else {
            return;
        };
        let mut finished: Vec<(u64, Option<IngestError>)> = Vec::new();
        let due = wait
            || s.gathered.len() >= s.batch
            || s.gathered_at.is_some_and(|t| t.elapsed() >= GATHER_FOR);
        if !s.gathered.is_empty() && due {
            s.gathered_at = None;
            let batch = std::mem::take(&mut s.gathered);
            match s.copier.submit() {
                Ok(()) => {
                    for b in batch {
                        s.uses[b] = Use::Copying;
                    }
                }
                Err(e) => {
                    for b in batch {
                        if let Some(p) = s.release(b) {
                            let msg = format!("starting the copies of reads: {e}");
                            finished.push((p.seq, Some(IngestError::Unavailable(msg))));
                        }
                    }
                }
            }
        }
        let mut done = Vec::new();
        let polled = if s.uses.contains(&Use::Copying) {
            s.copier.poll(wait, &mut done)
        } else {
            Ok(())
        };
        for b in done {
            if s.uses.get(b) == Some(&Use::Copying)
                && let Some(p) = s.release(b)
            {
                finished.push((p.seq, None));
            }
        }
        if let Err(e) = polled {
            // The copier cannot say which copies ran: every running one fails its frame.
            for b in 0..s.uses.len() {
                if s.uses[b] == Use::Copying
                    && let Some(p) = s.release(b)
                {
                    let msg = format!("copies of reads: {e}");
                    finished.push((p.seq, Some(IngestError::Unavailable(msg))));
                }
            }
        }
        self.finish_copied_pieces(finished);
    }

    /// Issues waiting reads into free bounce buffers.
    pub(super) fn dispatch_bounce(&mut self) {
        let Some(s) = &mut self.bounce else {
            return;
        };
        let mut issued = Vec::new();
        while !s.pending.is_empty() && !s.free.is_empty() {
            let p = s.pending.pop_front().expect("not empty");
            let b = s.free.pop().expect("not empty");
            s.pieces[b] = Some(p);
            s.uses[b] = Use::Reading;
            issued.push((p, b, s.addrs[b]));
        }
        self.submit_host_reads(&issued);
    }
}
