//! Copy stages: what the coordinator calls when reads land in host buffers of their own
//! rather than in the slot, and the bytes must be moved on from there. A stage owns the
//! buffers and the copies; the coordinator owns the frames' books. It queues a frame's
//! pieces with the stage, issues the reads the stage hands out (one per free buffer),
//! tells it when a read has landed and where the bytes go, and counts the pieces whose
//! copies the stage reports ended. Two stages exist: the staged engine's pinned buffers
//! copied on CUDA streams (`staged`) and the bounce engine's buffers moved on by a caller's
//! copier (`bounce`). Neither knows the coordinator.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

use super::piece::Piece;
use crate::gpu::SlotMemory;
use crate::ingest::error::{IngestError, Result};

/// A read to issue into a stage's buffer: the piece, the buffer (the read's token) and the
/// buffer's host address.
pub(super) type BufferRead = (Piece, usize, usize);

/// A piece whose copy has ended: its frame (`Piece::seq`), and `None` when the bytes are in
/// the slot, else why not.
pub(super) type CopyEnded = (u64, Option<IngestError>);

/// Host buffers that reads land in, and the copies that move each on to its slot. Called
/// on the coordinator thread only.
pub(super) trait CopyStage: Send {
    /// Binds what the copies need to the coordinator thread (the staged engine's CUDA
    /// context); called once, when the thread starts.
    fn bind_thread(&self) -> Result<()> {
        Ok(())
    }

    /// How the stage runs, for the engine's mode line (`io_size`: the reads' largest size).
    fn describe(&self, io_size: usize) -> String;

    /// The stage's free buffers and the pieces waiting for one.
    fn waiting(&mut self) -> &mut Waiting;

    /// Queues the pieces of a frame; they wait, in order, for a free buffer.
    fn queue(&mut self, pieces: Vec<Piece>) {
        self.waiting().pending.extend(pieces);
    }

    /// Drops the queued pieces of frame `seq` (not yet in a buffer), returning how many.
    fn drop_queued(&mut self, seq: u64) -> usize {
        let pending = &mut self.waiting().pending;
        let before = pending.len();
        pending.retain(|p| p.seq != seq);
        before - pending.len()
    }

    /// Puts queued pieces into free buffers: the reads to issue.
    fn dispatch(&mut self) -> Vec<BufferRead>;

    /// The piece buffer `buf` holds (its read in flight, or its copy), if any.
    fn piece_in(&self, buf: usize) -> Option<Piece>;

    /// The read of `piece` into buffer `buf` landed at `landed`: starts (or gathers) the
    /// copy of its bytes to the piece's part of slot `slot` (`None`: its frame is gone) of
    /// `slots`. On `Err` nothing was started and the buffer stays held: the caller fails
    /// the piece and [`CopyStage::release`]s the buffer.
    fn start_copy(
        &mut self,
        buf: usize,
        piece: Piece,
        slot: Option<usize>,
        slots: &[Arc<SlotMemory>],
        landed: Instant,
    ) -> Result<()>;

    /// Frees buffer `buf` and forgets its piece: its read failed, its frame was abandoned,
    /// or its copy could not start.
    fn release(&mut self, buf: usize);

    /// Whether copies are gathered or running (the coordinator then comes back soon).
    fn busy(&self) -> bool;

    /// Starts what is due and collects the copies that have ended since the last call;
    /// their buffers are free again.
    fn poll(&mut self) -> Vec<CopyEnded>;

    /// Waits for every copy started (the engine is shutting down, the reads have ended),
    /// returning the pieces it reports ended.
    fn wait_all(&mut self) -> Vec<CopyEnded>;
}

/// A stage's free buffers and the pieces waiting for one, in plan order.
pub(super) struct Waiting {
    pending: VecDeque<Piece>,
    /// Free buffers; the last one pushed is handed out first.
    free: Vec<usize>,
}

impl Waiting {
    /// `buffers` buffers, all free, and no piece waiting.
    pub(super) fn new(buffers: usize) -> Waiting {
        Waiting {
            pending: VecDeque::new(),
            free: (0..buffers).rev().collect(),
        }
    }

    /// The next waiting piece and the free buffer it goes to, while there are both.
    pub(super) fn next(&mut self) -> Option<(Piece, usize)> {
        if self.pending.is_empty() || self.free.is_empty() {
            return None;
        }
        let p = self.pending.pop_front()?;
        let b = self.free.pop()?;
        Some((p, b))
    }

    /// Buffer `buf` is free again.
    pub(super) fn free(&mut self, buf: usize) {
        self.free.push(buf);
    }
}
