//! The bounce engine: reads land in a small set of host buffers the caller provides; a
//! [`BounceCopier`] moves each filled buffer on to its slot's part, wherever that part lives
//! (the player's copier has the GPU copy out of host memory imported into Vulkan, into
//! device buffers), and a buffer is reused only once its copy has completed. Host memory
//! stays small (threads × queue depth × I/O size, give or take) and therefore hot, whatever
//! the frame size.
//!
//! The coordinator drives it as its copy stage (`super::copy_stage`): every landed buffer
//! goes to the copier at once, the copies gathered are started together
//! ([`BounceCopier::submit`]) once a batch is in or the oldest has waited long enough, and
//! the copier is polled for the buffers whose copies have completed. A piece, and so its
//! frame, completes only when its copy has: a completed frame is entirely in its slot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::copy_stage::{BufferRead, CopyEnded, CopyStage, Waiting};
use super::piece::Piece;
use crate::gpu::SlotMemory;
use crate::ingest::error::{IngestError, Result};

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
    copier: Box<dyn BounceCopier>,
    /// The piece each buffer holds (indices as the copier's buffers).
    pieces: Vec<Option<Piece>>,
    uses: Vec<Use>,
    /// Free buffers and the reads waiting for one.
    waiting: Waiting,
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
            waiting: Waiting::new(n),
            gathered: Vec::new(),
            gathered_at: None,
            batch: (n / 8).max(1),
            addrs,
        }
    }

    /// Frees buffer `b`, returning the piece it held.
    fn free_buffer(&mut self, b: usize) -> Option<Piece> {
        self.uses[b] = Use::Free;
        self.waiting.free(b);
        self.pieces[b].take()
    }

    /// Starts the copies gathered (a batch's worth, or the oldest has waited long enough;
    /// with `wait`, all), then collects the pieces whose copies have completed (`wait`:
    /// waits for all of them).
    fn pump(&mut self, wait: bool) -> Vec<CopyEnded> {
        let mut finished: Vec<CopyEnded> = Vec::new();
        let due = wait
            || self.gathered.len() >= self.batch
            || self.gathered_at.is_some_and(|t| t.elapsed() >= GATHER_FOR);
        if !self.gathered.is_empty() && due {
            self.gathered_at = None;
            let batch = std::mem::take(&mut self.gathered);
            match self.copier.submit() {
                Ok(()) => {
                    for b in batch {
                        self.uses[b] = Use::Copying;
                    }
                }
                Err(e) => {
                    for b in batch {
                        if let Some(p) = self.free_buffer(b) {
                            let msg = format!("starting the copies of reads: {e}");
                            finished.push((p.seq, Some(IngestError::Unavailable(msg))));
                        }
                    }
                }
            }
        }
        let mut done = Vec::new();
        let polled = if self.uses.contains(&Use::Copying) {
            self.copier.poll(wait, &mut done)
        } else {
            Ok(())
        };
        for b in done {
            if self.uses.get(b) == Some(&Use::Copying)
                && let Some(p) = self.free_buffer(b)
            {
                finished.push((p.seq, None));
            }
        }
        if let Err(e) = polled {
            // The copier cannot say which copies ran: every running one fails its frame.
            for b in 0..self.uses.len() {
                if self.uses[b] == Use::Copying
                    && let Some(p) = self.free_buffer(b)
                {
                    let msg = format!("copies of reads: {e}");
                    finished.push((p.seq, Some(IngestError::Unavailable(msg))));
                }
            }
        }
        finished
    }
}

impl CopyStage for Bounce {
    fn describe(&self, io_size: usize) -> String {
        format!(
            "{} bounce buffers of {} KiB, {}",
            self.addrs.len(),
            io_size >> 10,
            self.copier.describe()
        )
    }

    fn waiting(&mut self) -> &mut Waiting {
        &mut self.waiting
    }

    fn dispatch(&mut self) -> Vec<BufferRead> {
        let mut issued = Vec::new();
        while let Some((p, b)) = self.waiting.next() {
            self.pieces[b] = Some(p);
            self.uses[b] = Use::Reading;
            issued.push((p, b, self.addrs[b]));
        }
        issued
    }

    fn piece_in(&self, buf: usize) -> Option<Piece> {
        self.pieces.get(buf).copied().flatten()
    }

    /// Hands the buffer to the copier, gathered to start with the next batch.
    fn start_copy(
        &mut self,
        buf: usize,
        piece: Piece,
        slot: Option<usize>,
        _slots: &[Arc<SlotMemory>],
        landed: Instant,
    ) -> Result<()> {
        let r = slot
            .ok_or_else(|| "the frame is gone".to_string())
            .and_then(|slot| {
                self.copier.copy(
                    buf,
                    slot,
                    piece.part as usize,
                    piece.part_offset,
                    piece.len as u64,
                )
            });
        match r {
            Ok(()) => {
                self.uses[buf] = Use::Gathered;
                self.gathered.push(buf);
                self.gathered_at.get_or_insert(landed);
                Ok(())
            }
            Err(e) => Err(IngestError::Unavailable(format!("copying a read on: {e}"))),
        }
    }

    fn release(&mut self, buf: usize) {
        self.free_buffer(buf);
    }

    fn busy(&self) -> bool {
        self.uses
            .iter()
            .any(|u| matches!(u, Use::Gathered | Use::Copying))
    }

    fn poll(&mut self) -> Vec<CopyEnded> {
        self.pump(false)
    }

    fn wait_all(&mut self) -> Vec<CopyEnded> {
        self.pump(true)
    }
}
