//! The coordinator thread: each request split into pieces (`super::piece`), their reads
//! issued (into the slot, or through the engine's copy stage, `super::copy_stage`), and
//! each frame ([`Job`]) tracked from its first read to its completion: arrivals, failures,
//! cancels, time-outs and checks.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use super::copy_stage::{BufferRead, CopyEnded, CopyStage};
use super::piece::{Piece, split};
use super::{Completion, EngineConfig, EngineKind, ReadRequest};
use crate::dataset::ALIGN;
use crate::gpu::{Gpu, PartMemory, SlotMemory};
use crate::ingest::error::{IngestError, Result};
use crate::ingest::files::OpenFiles;
use crate::ingest::gds::GdsState;
use crate::ingest::io::{IoDone, IoPool, IoTask, Outstanding, Target};
use crate::ingest::source::SourceFile;
use crate::ingest::verify::{DeviceChecker, HostChecker};

/// What the coordinator thread is told.
pub(super) enum Msg {
    Request(ReadRequest, Instant),
    Cancel(usize),
    Io(IoDone),
    /// A host piece's CRC (`--verify`): job, piece index, CRC, when its read landed.
    PieceChecked(u64, usize, u32, Instant),
    /// A device frame's extent CRCs (`--verify`).
    FrameChecked(u64, Result<Vec<u32>>),
    Stop,
}

/// How an engine checks arriving bytes (`EngineConfig::verify`).
pub(super) enum Checks {
    Off,
    /// Host slots: each piece hashed on CPU threads as it lands.
    Host(HostChecker),
    /// Device slots: each complete frame's extents hashed where they are.
    Device(DeviceChecker),
}

impl Checks {
    pub(super) fn host(cfg: &EngineConfig) -> Result<Checks> {
        if !cfg.verify {
            return Ok(Checks::Off);
        }
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        Ok(Checks::Host(HostChecker::new(threads)?))
    }

    pub(super) fn device(cfg: &EngineConfig, gpu: &Gpu) -> Result<Checks> {
        if !cfg.verify {
            return Ok(Checks::Off);
        }
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        Ok(Checks::Device(DeviceChecker::new(gpu, threads)?))
    }

    pub(super) fn note(&self) -> Option<String> {
        match self {
            Checks::Off => None,
            Checks::Host(h) => Some(format!(
                "--verify: every read's CRC-32 is computed on {} CPU threads as it lands",
                h.threads()
            )),
            Checks::Device(d) => Some(d.how.clone()),
        }
    }
}

/// A read that does not answer, as a time-out names it.
struct StuckRead {
    lane: u32,
    path: std::path::PathBuf,
    offset: u64,
    len: u64,
    /// The frame the read belongs to, where it is still tracked.
    frame: Option<u32>,
    /// When a worker took it.
    since: Instant,
}

pub(super) struct Job {
    pub(super) req: ReadRequest,
    /// The reads of a direct (non-staged) frame, indexed by the token's low 32 bits.
    pub(super) pieces: Vec<Piece>,
    /// The CRC of each piece (host `--verify`), indexed like `pieces`.
    pub(super) piece_crcs: Vec<u32>,
    /// Device `--verify`: the frame is complete and its check is running; the completion
    /// times wait here.
    pub(super) checking: Option<(Option<Instant>, Option<Instant>)>,
    pub(super) bytes: u64,
    pub(super) submitted: Instant,
    pub(super) left: usize,
    pub(super) first: Option<Instant>,
    pub(super) last: Option<Instant>,
    pub(super) error: Option<IngestError>,
    /// The last time a read of this frame ended (or the frame was submitted).
    pub(super) progress: Instant,
    /// Direct frames: which pieces have ended (to say which read timed out).
    pub(super) ended: Vec<bool>,
    /// The frame was reported [`IngestError::TimedOut`]; its final completion is
    /// [`IngestError::Released`].
    pub(super) timed_out: bool,
}

impl Job {
    /// Records a read's arrival. Workers report arrivals out of time order (the coordinator
    /// sees them in channel order), so first and last byte are the earliest and latest
    /// arrival, not the first and last reported.
    pub(super) fn note_arrival(&mut self, at: Instant) {
        self.first = Some(self.first.map_or(at, |f| f.min(at)));
        self.last = Some(self.last.map_or(at, |l| l.max(at)));
        self.progress = self.progress.max(at);
    }
}

pub(super) struct Coordinator {
    pub(super) kind: EngineKind,
    // Drop order matters: the pool (joins its workers, so no read is in flight) goes first,
    // then the copy stage's buffers and cuFile registrations, then the files and the slots.
    pub(super) pool: Option<IoPool>,
    /// Where reads land when not in the slot, and what moves them on: the staged engine's
    /// pinned buffers and CUDA copies, or the bounce engine's buffers and copier. `None`:
    /// reads land in the slot (host and gds engines).
    pub(super) copy: Option<Box<dyn CopyStage>>,
    pub(super) gds: Option<Arc<GdsState>>,
    pub(super) files: OpenFiles,
    pub(super) slots: Vec<Arc<SlotMemory>>,
    pub(super) io_size: usize,
    pub(super) jobs: HashMap<u64, Job>,
    pub(super) next_seq: u64,
    pub(super) done: Sender<Completion>,
    pub(super) checks: Checks,
    /// The coordinator's own inbox, for check results.
    pub(super) inbox: Sender<Msg>,
    pub(super) read_timeout: Option<Duration>,
}

impl Coordinator {
    /// The coordinator's loop, until [`Msg::Stop`]. Stopping drops the reads not yet issued
    /// and waits for those issued, up to the read timeout (a read out longer times out as
    /// usual); then it tells `exit` whether reads that timed out are still out (`Some`,
    /// what they are) before it shuts the pool down, which waits for them. The engine's
    /// `Drop` does not wait for a coordinator that abandons reads: a read the kernel holds
    /// may never end, and the slots, files and buffers it writes into stay alive with this
    /// thread.
    pub(super) fn run(
        &mut self,
        rx: Receiver<Msg>,
        files: &[SourceFile],
        exit: Sender<Option<String>>,
    ) {
        if let Some(c) = &self.copy
            && let Err(e) = c.bind_thread()
        {
            log::warn!("supercell: staged engine cannot bind its CUDA context: {e}");
        }
        let mut stopping = false;
        loop {
            let busy = self.copy.as_ref().is_some_and(|c| c.busy());
            let first = if busy {
                // Copies in flight: come back soon to see their events.
                match rx.recv_timeout(Duration::from_micros(50)) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else if let (Some(t), false) = (self.read_timeout, self.jobs.is_empty()) {
                // Frames in flight: come back in time to see one time out.
                let look = (t / 4).clamp(Duration::from_millis(1), Duration::from_millis(250));
                match rx.recv_timeout(look) {
                    Ok(m) => Some(m),
                    Err(RecvTimeoutError::Timeout) => None,
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            } else {
                match rx.recv() {
                    Ok(m) => Some(m),
                    Err(_) => break,
                }
            };
            let mut msgs: Vec<Msg> = first.into_iter().collect();
            msgs.extend(rx.try_iter());
            for m in msgs {
                match m {
                    Msg::Request(req, t) => self.on_request(req, t, files),
                    Msg::Cancel(slot) => self.on_cancel(slot),
                    Msg::Io(d) => self.on_io(d),
                    Msg::PieceChecked(seq, idx, crc, at) => {
                        self.on_piece_checked(seq, idx, crc, at)
                    }
                    Msg::FrameChecked(seq, r) => self.on_frame_checked(seq, r),
                    Msg::Stop if !stopping => {
                        stopping = true;
                        let seqs: Vec<u64> = self.jobs.keys().copied().collect();
                        for seq in seqs {
                            self.cancel_job(seq);
                        }
                    }
                    Msg::Stop => {}
                }
            }
            if let Some(c) = &mut self.copy {
                let ended = c.poll();
                self.finish_copied_pieces(ended);
            }
            self.check_timeouts();
            if let Some(c) = &mut self.copy {
                let issued = c.dispatch();
                self.submit_host_reads(&issued);
            }
            if stopping && self.jobs.values().all(|j| j.timed_out) {
                break;
            }
        }
        let _ = exit.send(self.abandoned());
        self.shutdown();
    }

    fn shutdown(&mut self) {
        // Joining the pool waits for every read in flight; then wait for every copy.
        self.pool.take();
        if let Some(c) = &mut self.copy {
            let ended = c.wait_all();
            self.finish_copied_pieces(ended);
        }
        // The device checker's thread finishes the frame it is checking before the GPU
        // state goes.
        self.checks = Checks::Off;
        self.copy.take();
        self.gds.take();
    }

    fn on_request(&mut self, req: ReadRequest, at: Instant, files: &[SourceFile]) {
        let seq = self.next_seq;
        self.next_seq += 1;
        let layout = self.slots[req.slot].layout();
        let mut pieces = split(seq, &req.extents, files, self.io_size, layout);
        let too_many = pieces.len() > u32::MAX as usize;
        if too_many {
            // Tokens carry the piece index in 32 bits; such a frame cannot be read.
            pieces.clear();
        }
        let bytes = req.extents.iter().map(|e| e.len).sum();
        let job = Job {
            pieces: Vec::new(),
            piece_crcs: Vec::new(),
            checking: None,
            bytes,
            submitted: at,
            left: pieces.len(),
            first: None,
            last: None,
            error: None,
            progress: at,
            ended: Vec::new(),
            timed_out: false,
            req,
        };
        let slot = job.req.slot;
        let mut job = job;
        if too_many {
            job.error = Some(IngestError::Usage(format!(
                "frame {} needs more than 2^32 reads; use a larger --io-size",
                job.req.frame
            )));
        }
        self.jobs.insert(seq, job);
        if pieces.is_empty() {
            self.finish_job(seq);
            return;
        }
        if let Some(c) = &mut self.copy {
            c.queue(pieces);
            return;
        }
        let slot_mem = self.slots[slot].clone();
        let frame = self.jobs.get(&seq).map_or(0, |j| j.req.frame);
        let tasks: Vec<IoTask> = pieces
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let f = &self.files.files[p.file as usize];
                let target = match &slot_mem.parts()[p.part as usize] {
                    PartMemory::Host(b) => Target::Host {
                        addr: b.as_mut_ptr() as usize + p.part_offset as usize,
                    },
                    PartMemory::Device(d) => Target::Device {
                        handle: self.gds.as_ref().map_or(0, |g| g.handle(p.file as usize)),
                        base: d.ptr(),
                        dev_offset: p.part_offset,
                    },
                };
                IoTask {
                    token: (seq << 32) | i as u64,
                    lane: f.lane,
                    fd: f.fd(),
                    offset: p.offset,
                    len: p.len,
                    target,
                    frame: Some(frame),
                }
            })
            .collect();
        if let Some(job) = self.jobs.get_mut(&seq) {
            if matches!(self.checks, Checks::Host(_)) {
                job.piece_crcs = vec![0; pieces.len()];
            }
            job.ended = vec![false; pieces.len()];
            job.pieces = pieces;
        }
        if let Some(pool) = &self.pool {
            pool.submit(tasks);
        }
    }

    /// Drops the queued reads of the job writing `slot` (see
    /// [`IngestEngine::cancel`](super::IngestEngine::cancel)).
    fn on_cancel(&mut self, slot: usize) {
        if let Some(seq) = self
            .jobs
            .iter()
            .find(|(_, j)| j.req.slot == slot)
            .map(|(s, _)| *s)
        {
            self.cancel_job(seq);
        }
    }

    /// Drops the queued reads of frame `seq`; it ends cancelled once its reads issued end.
    fn cancel_job(&mut self, seq: u64) {
        let dropped = self.drop_queued_reads(seq);
        if dropped == 0 {
            return;
        }
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        job.left -= dropped;
        if job.error.is_none() {
            job.error = Some(IngestError::Cancelled(job.req.frame));
        }
        if job.left == 0 {
            self.finish_job(seq);
        }
    }

    /// Fails the frames whose reads made no progress within the read timeout: each is
    /// reported [`IngestError::TimedOut`] at once (naming the read that does not answer,
    /// see [`Coordinator::stuck_read`]), its reads not yet issued are dropped, and its slot
    /// stays reserved until the reads issued end ([`IngestError::Released`]): the kernel or
    /// cuFile may still write into it.
    fn check_timeouts(&mut self) {
        let Some(limit) = self.read_timeout else {
            return;
        };
        let now = Instant::now();
        let expired: Vec<u64> = self
            .jobs
            .iter()
            // A frame whose check is running (device --verify) has all its bytes: its reads
            // cannot be the ones that stopped answering.
            .filter(|(_, j)| {
                !j.timed_out
                    && j.checking.is_none()
                    && now.saturating_duration_since(j.progress) >= limit
            })
            .map(|(s, _)| *s)
            .collect();
        if expired.is_empty() {
            return;
        }
        let outstanding = self
            .pool
            .as_ref()
            .map(IoPool::outstanding)
            .unwrap_or_default();
        for seq in expired {
            let stuck = self.stuck_read(seq, &outstanding);
            let dropped = self.drop_queued_reads(seq);
            let Some(job) = self.jobs.get_mut(&seq) else {
                continue;
            };
            job.timed_out = true;
            job.left -= dropped;
            let (lane, path, offset, len, behind) = match stuck {
                Some(r) => (
                    Some(r.lane),
                    Some(r.path),
                    Some(r.offset),
                    Some(r.len),
                    r.frame.filter(|&f| f != job.req.frame),
                ),
                None => (None, None, None, None, None),
            };
            let c = Completion {
                frame: job.req.frame,
                slot: job.req.slot,
                bytes: job.bytes,
                requested: job.req.requested,
                submitted: job.submitted,
                first_byte: job.first,
                last_byte: job.last,
                on_gpu: None,
                result: Err(IngestError::TimedOut {
                    frame: job.req.frame,
                    lane,
                    path,
                    offset,
                    len,
                    behind,
                    waited: now.saturating_duration_since(job.progress),
                }),
            };
            let _ = self.done.send(c);
            if job.left == 0 {
                self.finish_job(seq);
            }
        }
    }

    /// The frame a read handed to the pool belongs to (its token names the piece, or for
    /// the staged and bounce engines the buffer the piece is in).
    fn frame_of_token(&self, token: u64) -> Option<u64> {
        match &self.copy {
            Some(c) => c.piece_in(token as usize).map(|p| p.seq),
            None => Some(token >> 32),
        }
    }

    /// The read to blame for frame `seq` making no progress: the oldest of its own reads
    /// that a worker has taken and not finished (a read still queued is waiting, not
    /// stuck); when none is out (every read of the frame waits behind others, as on
    /// blocking threads that all went to a lane that stopped), the oldest read out of any
    /// frame, which the frame waits behind. `None` when the pool has nothing out.
    fn stuck_read(&self, seq: u64, outstanding: &[Outstanding]) -> Option<StuckRead> {
        let oldest = |own: bool| {
            outstanding
                .iter()
                .filter(|r| !own || self.frame_of_token(r.token) == Some(seq))
                .min_by_key(|r| r.since)
        };
        let r = oldest(true).or_else(|| oldest(false))?;
        let file = self.files.files.iter().find(|f| f.fd() == r.fd)?;
        let frame = self
            .frame_of_token(r.token)
            .and_then(|s| self.jobs.get(&s))
            .map(|j| j.req.frame);
        Some(StuckRead {
            lane: file.lane,
            path: file.path.clone(),
            offset: r.offset,
            len: r.len as u64,
            frame,
            since: r.since,
        })
    }

    /// What the engine leaves behind when it stops with reads that timed out still out:
    /// `None` when there are none, else a sentence naming the oldest (see
    /// [`super::Engine`]'s `Drop`: such reads are abandoned, not waited for).
    fn abandoned(&self) -> Option<String> {
        let frames: Vec<u32> = self
            .jobs
            .values()
            .filter(|j| j.timed_out && j.left > 0)
            .map(|j| j.req.frame)
            .collect();
        if frames.is_empty() {
            return None;
        }
        let outstanding = self
            .pool
            .as_ref()
            .map(IoPool::outstanding)
            .unwrap_or_default();
        let seq = self.jobs.iter().find(|(_, j)| j.timed_out && j.left > 0)?.0;
        let site = match self.stuck_read(*seq, &outstanding) {
            Some(r) => format!(
                "; the oldest: lane {} ({}, bytes {}..{}), out for {:.1} s",
                r.lane,
                r.path.display(),
                r.offset,
                r.offset + r.len,
                r.since.elapsed().as_secs_f64()
            ),
            None => String::new(),
        };
        Some(format!(
            "reads of {} frame(s) got no answer and are abandoned (a read the kernel holds \
             cannot be cancelled; its thread and memory are left to it){site}",
            frames.len()
        ))
    }

    /// Drops the reads of frame `seq` that are queued and not yet issued (through a copy
    /// stage: waiting for a buffer; direct: waiting in the I/O pool), returning how many.
    /// Reads already issued go on and report back.
    fn drop_queued_reads(&mut self, seq: u64) -> usize {
        match (&mut self.copy, &self.pool) {
            (Some(c), _) => c.drop_queued(seq),
            (None, Some(pool)) => pool.cancel(|token| token >> 32 == seq),
            (None, None) => 0,
        }
    }

    fn piece_done(&mut self, seq: u64, at: Instant, err: Option<IngestError>) {
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        job.note_arrival(at);
        if job.error.is_none() {
            job.error = err;
        }
        job.left -= 1;
        if job.left == 0 {
            self.finish_job(seq);
        }
    }

    fn on_io(&mut self, d: IoDone) {
        if self.copy.is_some() {
            return self.on_buffer_io(d);
        }
        let seq = d.token >> 32;
        let idx = (d.token & 0xffff_ffff) as usize;
        if let Some(e) = self.jobs.get_mut(&seq).and_then(|j| j.ended.get_mut(idx)) {
            *e = true;
        }
        let err = match d.result {
            Ok(()) => {
                if let Some(job) = self.jobs.get(&seq)
                    && let (Some(p), Some(piece)) = (&job.req.progress, job.pieces.get(idx))
                {
                    p.push(piece.dst, piece.len as u64);
                }
                if let Checks::Host(h) = &self.checks
                    && let Some(job) = self.jobs.get(&seq)
                    && let Some(piece) = job.pieces.get(idx)
                    && job.req.extents[piece.extent as usize].crc32.is_some()
                {
                    // The piece counts as done once its CRC is back.
                    let inbox = self.inbox.clone();
                    let at = d.completed;
                    h.check_piece(
                        self.slots[job.req.slot].clone(),
                        piece.part as usize,
                        piece.part_offset,
                        piece.len,
                        Box::new(move |crc| {
                            let _ = inbox.send(Msg::PieceChecked(seq, idx, crc, at));
                        }),
                    );
                    return;
                }
                None
            }
            Err(msg) => {
                let piece = self.jobs.get(&seq).and_then(|j| j.pieces.get(idx)).copied();
                Some(match piece {
                    Some(p) => read_err(&self.files, &p, msg),
                    None => IngestError::Stopped(format!("read of an unknown frame failed: {msg}")),
                })
            }
        };
        self.piece_done(seq, d.completed, err);
    }

    /// A read into a copy stage's buffer ended: the stage copies its bytes on to the slot
    /// (the piece completes when the copy has, [`Coordinator::finish_copied_pieces`]), or
    /// the read's error goes to the frame and the buffer is freed.
    fn on_buffer_io(&mut self, d: IoDone) {
        let Some(copy) = &mut self.copy else {
            return;
        };
        let b = d.token as usize;
        let Some(piece) = copy.piece_in(b) else {
            return;
        };
        let abandoned = self.jobs.get(&piece.seq).is_none_or(|j| j.timed_out);
        // `Some(error)`: the piece ends now and its buffer is free.
        let outcome = match d.result {
            Err(msg) => Some(Some(read_err(&self.files, &piece, msg))),
            // The frame timed out: its slot gets nothing more.
            Ok(()) if abandoned => Some(None),
            Ok(()) => {
                // The read's arrival is the frame's first/last byte; the piece completes
                // when its copy does.
                let slot = self.jobs.get_mut(&piece.seq).map(|job| {
                    job.note_arrival(d.completed);
                    job.req.slot
                });
                copy.start_copy(b, piece, slot, &self.slots, d.completed)
                    .err()
                    .map(Some)
            }
        };
        if let Some(err) = outcome {
            copy.release(b);
            self.piece_done(piece.seq, d.completed, err);
        }
    }

    fn finish_job(&mut self, seq: u64) {
        let on_gpu = match self.kind {
            // cuFile returns once the bytes are in device memory.
            EngineKind::Gds => self.jobs.get(&seq).and_then(|j| j.last),
            _ => None,
        };
        let last = self.jobs.get(&seq).and_then(|j| j.last);
        self.finish_job_at(seq, on_gpu, last);
    }

    /// A host piece's CRC is back: the piece is done.
    fn on_piece_checked(&mut self, seq: u64, idx: usize, crc: u32, at: Instant) {
        if let Some(c) = self
            .jobs
            .get_mut(&seq)
            .and_then(|job| job.piece_crcs.get_mut(idx))
        {
            *c = crc;
        }
        self.piece_done(seq, at, None);
    }

    /// A device frame's CRCs are back: compare them and complete the frame.
    fn on_frame_checked(&mut self, seq: u64, result: Result<Vec<u32>>) {
        let Some(job) = self.jobs.get_mut(&seq) else {
            return;
        };
        let Some((on_gpu, last)) = job.checking else {
            return;
        };
        job.error = match result {
            Ok(crcs) => first_mismatch(&job.req, &crcs, &self.files),
            Err(e) => Some(e),
        };
        self.finish_job_at(seq, on_gpu, last);
    }

    /// Counts pieces whose copy from a host buffer to the GPU has ended (`None`: copied,
    /// else why not); a frame whose last piece ends here finishes now. The copy's end is
    /// the frame's on-GPU time; its last byte stays the read's.
    fn finish_copied_pieces(&mut self, finished: Vec<CopyEnded>) {
        let now = Instant::now();
        for (seq, err) in finished {
            if let Some(job) = self.jobs.get_mut(&seq) {
                let last = job.last;
                job.left -= 1;
                if job.error.is_none() {
                    job.error = err;
                }
                if job.left == 0 {
                    self.finish_job_at(seq, Some(now), last);
                }
            }
        }
    }

    /// Submits the reads of pieces into host buffers: `(piece, buffer, address)`, each
    /// reported under its buffer's index as the token.
    fn submit_host_reads(&self, issued: &[BufferRead]) {
        let Some(pool) = &self.pool else {
            return;
        };
        if issued.is_empty() {
            return;
        }
        let tasks: Vec<IoTask> = issued
            .iter()
            .map(|&(p, buffer, addr)| {
                let f = &self.files.files[p.file as usize];
                IoTask {
                    token: buffer as u64,
                    lane: f.lane,
                    fd: f.fd(),
                    offset: p.offset,
                    len: p.len,
                    frame: self.jobs.get(&p.seq).map(|j| j.req.frame),
                    target: Target::Host { addr },
                }
            })
            .collect();
        pool.submit(tasks);
    }

    fn finish_job_at(&mut self, seq: u64, on_gpu: Option<Instant>, last: Option<Instant>) {
        // Device slots under --verify: check the complete frame first; the completion
        // follows when the CRCs are back (`on_frame_checked`).
        if let Checks::Device(checker) = &self.checks
            && let Some(job) = self.jobs.get_mut(&seq)
            && job.error.is_none()
            && !job.timed_out
            && job.checking.is_none()
            && job.req.extents.iter().any(|e| e.crc32.is_some())
        {
            job.checking = Some((on_gpu, last));
            let ranges = job.req.extents.iter().map(|e| (e.dst, e.len)).collect();
            let inbox = self.inbox.clone();
            checker.check_frame(
                self.slots[job.req.slot].clone(),
                ranges,
                Box::new(move |r| {
                    let _ = inbox.send(Msg::FrameChecked(seq, r));
                }),
            );
            return;
        }
        let Some(mut job) = self.jobs.remove(&seq) else {
            return;
        };
        if job.error.is_none() && !job.piece_crcs.is_empty() {
            // Host --verify: each extent's CRC from its pieces. `split` keeps an extent's
            // pieces in slot order, so folding in piece order is folding in byte order.
            let mut crcs = vec![0u32; job.req.extents.len()];
            for (p, &c) in job.pieces.iter().zip(&job.piece_crcs) {
                let e = p.extent as usize;
                crcs[e] = crate::crc32::combine(crcs[e], c, p.len as u64);
            }
            job.error = first_mismatch(&job.req, &crcs, &self.files);
        }
        let c = Completion {
            frame: job.req.frame,
            slot: job.req.slot,
            bytes: job.bytes,
            requested: job.req.requested,
            submitted: job.submitted,
            first_byte: job.first,
            last_byte: last,
            on_gpu,
            result: match job.error {
                _ if job.timed_out => Err(IngestError::Released(job.req.frame)),
                Some(e) => Err(e),
                None => Ok(()),
            },
        };
        let _ = self.done.send(c);
    }
}

/// The error of a failed read of `p`, naming its file and bytes.
fn read_err(files: &OpenFiles, p: &Piece, msg: String) -> IngestError {
    IngestError::Read {
        path: files.files[p.file as usize].path.clone(),
        offset: p.offset,
        len: p.len as u64,
        msg,
    }
}

/// Refuses a request the plan cannot carry out: an unknown slot or file, an extent outside
/// the slot, empty, or not 4 KiB aligned (O_DIRECT and the staging buffers need that).
pub(super) fn check_request(
    req: &ReadRequest,
    slot_lens: &[usize],
    file_count: usize,
) -> Result<()> {
    let slot_len = *slot_lens.get(req.slot).ok_or_else(|| {
        IngestError::Usage(format!(
            "slot {} does not exist (the ring has {})",
            req.slot,
            slot_lens.len()
        ))
    })?;
    for e in &req.extents {
        if e.file as usize >= file_count {
            return Err(IngestError::Usage(format!(
                "frame {}: extent names file {} of {}",
                req.frame, e.file, file_count
            )));
        }
        let fits = e
            .dst
            .checked_add(e.len)
            .is_some_and(|end| end <= slot_len as u64);
        if !fits || e.len == 0 {
            return Err(IngestError::Usage(format!(
                "frame {}: extent of {} bytes at slot offset {} does not fit a {slot_len}-byte slot",
                req.frame, e.len, e.dst
            )));
        }
        if !(e.offset.is_multiple_of(ALIGN)
            && e.len.is_multiple_of(ALIGN)
            && e.dst.is_multiple_of(ALIGN))
        {
            return Err(IngestError::Usage(format!(
                "frame {}: extent (offset {}, len {}, dst {}) is not 4 KiB aligned",
                req.frame, e.offset, e.len, e.dst
            )));
        }
    }
    Ok(())
}

/// The checksum error for the extents of `req` whose CRC in `crcs` (one per extent, in
/// order) differs from the one they carry, or `None` when all match.
fn first_mismatch(req: &ReadRequest, crcs: &[u32], files: &OpenFiles) -> Option<IngestError> {
    let mut bad = req
        .extents
        .iter()
        .zip(crcs)
        .filter(|(e, c)| e.crc32.is_some_and(|want| want != **c));
    let (e, &actual) = bad.next()?;
    let file = &files.files[e.file as usize];
    Some(IngestError::Checksum {
        frame: req.frame,
        lane: file.lane,
        path: file.path.clone(),
        offset: e.offset,
        len: e.len,
        expected: e.crc32.unwrap_or_default(),
        actual,
        more: bad.count() as u64,
    })
}
