//! The player's frame paths: the two paths (direct and host), the one [`Scheduler`] only the
//! active path is fed from, switching between them, and what arrives on each: stale reads,
//! faults, the frame's last checks and the per-path statistics.
//!
//! A path switched away from drains on its own: its reads still out are stale and never
//! reach the scheduler. The frame on screen keeps its slot (`InUse`) until the next frame is
//! shown; [`FramePaths::stage`], [`FramePaths::mark_shown`] and [`FramePaths::retire`] are
//! the three steps of showing a frame, between which the player binds and renders it.
//!
//! Nothing here knows how a frame is drawn: the frame paths hand out the GPU buffers of a
//! frame's slot and are told when its render has finished.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::app::config::{PathSel, PlayError, PlayerConfig};
use crate::app::direct::open_direct_slots;
use crate::app::faults::{FaultLog, FrameFault, FrameFaultKind, check_headers};
use crate::app::path::{FramePath, PathReport, ring_slots};
use crate::app::stats::{PathFigures, PathStats};
use crate::dataset::Dataset;
use crate::gpu::{SlotDemand, SlotPlan, SlotState};
use crate::ingest::{EngineConfig, IngestError, IoMode, Source};
use crate::pipeline::{Direction, FrameState, PlaybackConfig, Scheduler};
use crate::stream::StreamEvent;

/// The frame on screen and where its bytes are (the slot held `InUse` until the next frame
/// is shown).
#[derive(Clone, Copy, Debug)]
pub(super) struct Shown {
    frame: u32,
    path: PathSel,
    slot: usize,
}

/// A frame taken from its slot to be shown ([`FramePaths::stage`]): the slot, and the GPU
/// buffers of its parts, in order, to bind.
pub(super) struct StagedFrame {
    pub(super) frame: u32,
    slot: usize,
    pub(super) parts: Vec<wgpu::Buffer>,
}

/// The player's two frame paths and the scheduler they answer to; see the module
/// documentation.
pub(super) struct FramePaths {
    source: Source,
    device: wgpu::Device,
    queue: wgpu::Queue,
    sched: Scheduler,
    /// Direct and host, in [`PathSel::index`] order (`None`: the path cannot run here).
    paths: [Option<FramePath>; 2],
    /// Why the direct path cannot run here, where it cannot.
    direct_reason: Option<String>,
    active: PathSel,
    shown: Option<Shown>,
    stats: [PathStats; 2],
    /// The start of the statistics' time axis.
    epoch: Instant,
    /// How many slots, of what parts, and the memory they take.
    slot_plan: SlotPlan,
    /// A scrub in progress: target and when it was asked for.
    scrub: Option<(u32, Instant)>,
    last_scrub_ms: Option<f64>,
    dragging: bool,
    last_error: Option<String>,
    /// GPU memory held for frames: shared slots, per-slot copies, upload buffers.
    gpu_buffer_bytes: u64,
    /// Reads that completed cancelled (aborted read-ahead, left paths).
    cancelled_reads: u64,
    /// Frame faults, damaged frames and recoveries.
    faults: FaultLog,
}

impl FramePaths {
    /// Opens both paths with the slots of `slot_plan`: the host path always (it needs nothing
    /// but wgpu), the direct path where `interop` shares memory with CUDA (else the reason
    /// is kept), or a second host path as its loopback stand-in. The playhead starts at
    /// `start_frame`; `epoch` starts the statistics' clock.
    pub(super) fn open(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        interop: Result<(&crate::gpu::Gpu, &crate::gpu::InteropDevice), String>,
        source: Source,
        slot_plan: SlotPlan,
        (cfg, start_frame): (&PlayerConfig, u32),
        epoch: Instant,
    ) -> Result<FramePaths, PlayError> {
        let slots = slot_plan.slots;
        let layout = slot_plan.layout()?;
        let ecfg = EngineConfig {
            threads: cfg.threads.max(1),
            queue_depth: cfg.queue_depth.max(1),
            io_size: cfg.io_size,
            io_mode: IoMode::Direct,
            verify: cfg.verify,
            read_timeout: cfg.read_timeout,
            faults: cfg.faults.clone(),
            host_pages: cfg.host_pages,
            backend: cfg.io_backend,
            ..EngineConfig::default()
        };

        // Host path: always there (it needs nothing but wgpu).
        let host_path =
            |label: &str| FramePath::host(device, queue, cfg, &ecfg, &source, slots, layout, label);
        let host = host_path("supercell host upload")?;
        // Direct path: only where shared buffers exist; else the reason is kept for the UI.
        let (direct, direct_reason) = if cfg.loopback_direct {
            (Some(host_path("supercell loopback upload")?), None)
        } else {
            match interop.and_then(|(g, dev)| open_direct_slots(g, dev, slots, layout)) {
                Ok(shared) => match FramePath::direct(shared, &source, &ecfg, cfg.direct_engine)? {
                    Ok(p) => (Some(p), None),
                    Err(why) => (None, Some(why)),
                },
                Err(why) => (None, Some(why)),
            }
        };
        let active = if cfg.path == PathSel::Direct && direct.is_some() {
            PathSel::Direct
        } else {
            PathSel::Host
        };
        let gpu_buffer_bytes = direct
            .iter()
            .chain(std::iter::once(&host))
            .flat_map(|p| p.route.buffers())
            .map(wgpu::Buffer::size)
            .sum::<u64>();
        let mut sched = Scheduler::new(PlaybackConfig {
            frame_count: source.frames.len() as u32,
            mode: cfg.mode,
            speed_fps: cfg.speed_fps,
            window: slots,
        });
        sched.scrub(start_frame);
        sched.set_playing(cfg.playing);
        // Each path's warm-up lasts until its ring has filled once.
        let mut stats = [PathStats::new(slots), PathStats::new(slots)];
        stats[active.index()].set_active(true, 0.0);
        Ok(FramePaths {
            source,
            device: device.clone(),
            queue: queue.clone(),
            sched,
            paths: [direct, Some(host)],
            direct_reason,
            active,
            shown: None,
            stats,
            epoch,
            slot_plan,
            scrub: None,
            last_scrub_ms: None,
            dragging: false,
            last_error: None,
            gpu_buffer_bytes,
            cancelled_reads: 0,
            faults: FaultLog::default(),
        })
    }

    /// Seconds since the player started (the time axis of the statistics).
    pub(super) fn now(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    fn path(&self, p: PathSel) -> Option<&FramePath> {
        self.paths[p.index()].as_ref()
    }

    /// Collects what has arrived on both paths (the active one's landed ranges go to the
    /// GPU) and issues the reads the scheduler wants on the active path. `dataset` is the
    /// played one, whose grid headers each landed frame is checked against.
    pub(super) fn collect(&mut self, dataset: &Dataset) -> Result<(), PlayError> {
        self.pump(PathSel::Direct, dataset)?;
        self.pump(PathSel::Host, dataset)?;
        self.copy_landed(self.active, None);
        self.feed()
    }

    /// The frame the scheduler shows next, as of `now`: while the scrub slider is dragged
    /// and the playhead's frame has not arrived, whatever nearby frame has.
    pub(super) fn next_to_show(&mut self, now: f64) -> Option<u32> {
        let next = self.sched.tick(now);
        if next.is_none()
            && self.dragging
            && self.sched.state(self.sched.position()) != Some(FrameState::Ready)
        {
            // Rather than nothing; the exact frame follows once the slider is released.
            return self.nearest_ready();
        }
        next
    }

    /// Samples both paths' reads in flight into their statistics at `now`.
    pub(super) fn sample(&mut self, now: f64) {
        for sel in [self.active, self.active.other()] {
            let inflight = self.path(sel).map_or(0, |p| p.stream.in_flight());
            self.stats[sel.index()].sample(now, inflight);
        }
    }

    /// Waits up to `timeout` for an arrival on the active path (to idle without spinning).
    pub(super) fn wait(&mut self, timeout: Duration, dataset: &Dataset) {
        let active = self.active;
        let Some(p) = self.paths[active.index()].as_mut() else {
            std::thread::sleep(timeout);
            return;
        };
        if p.stream.in_flight() == 0 {
            std::thread::sleep(timeout.min(Duration::from_millis(5)));
            return;
        }
        match p.stream.next_event(&mut self.sched, timeout) {
            Ok(Some(ev)) => {
                if let Err(e) = self.on_event(active, ev, dataset) {
                    self.last_error = Some(e.to_string());
                }
            }
            Ok(None) => {}
            Err(e) => self.last_error = Some(e.to_string()),
        }
    }

    fn nearest_ready(&self) -> Option<u32> {
        let p = self.path(self.active)?;
        let pos = i64::from(self.sched.position());
        p.stream
            .ring()
            .states()
            .iter()
            .filter_map(|s| match s {
                SlotState::Ready(f) => Some(*f),
                _ => None,
            })
            .filter(|f| {
                self.shown
                    .is_none_or(|s| s.frame != *f || s.path != self.active)
            })
            .min_by_key(|f| (i64::from(*f) - pos).abs())
    }

    /// Handles the completions that have arrived on `sel`.
    fn pump(&mut self, sel: PathSel, dataset: &Dataset) -> Result<(), PlayError> {
        loop {
            let Some(p) = self.paths[sel.index()].as_mut() else {
                return Ok(());
            };
            match p.stream.poll(&mut self.sched)? {
                Some(ev) => self.on_event(sel, ev, dataset)?,
                None => return Ok(()),
            }
        }
    }

    /// What the player does with a completion on `sel` (the stream has told the ring and
    /// the scheduler already): faults and statistics, and the frame's last checks before
    /// it can be shown.
    fn on_event(
        &mut self,
        sel: PathSel,
        ev: StreamEvent,
        dataset: &Dataset,
    ) -> Result<(), PlayError> {
        let now = self.now();
        let slot = ev.slot();
        let c = match ev {
            StreamEvent::Landed(c) => c,
            // The slot stays reserved (its range reports with it) until it is released.
            StreamEvent::Held(c) => {
                if let Err(e) = &c.result {
                    self.fault(sel, c.frame, FrameFaultKind::Timeout, e);
                }
                return Ok(());
            }
            other => {
                if let StreamEvent::Cancelled(c) | StreamEvent::Stale(c) = &other
                    && matches!(c.result, Err(IngestError::Cancelled(_)))
                {
                    self.cancelled_reads += 1;
                }
                if let Some(p) = self.paths[sel.index()].as_mut() {
                    p.route.read_ended(slot);
                }
                if let StreamEvent::Failed(c) = other
                    && let Err(e) = &c.result
                {
                    // The frame is marked damaged and passed over; it is read again on a
                    // later visit (a lane that comes back plays again).
                    self.fault(sel, c.frame, FrameFaultKind::Read, e);
                }
                return Ok(());
            }
        };
        // Every grid header of the frame passes the structural check before the frame can
        // be shown; a frame that fails is never handed to the renderer.
        let header = self.path(sel).and_then(|p| {
            let ring = p.stream.ring();
            let mut read_back = |at: usize, out: &mut [u8]| {
                p.route
                    .read_back(&self.device, &self.queue, ring, slot, at, out)
            };
            check_headers(
                dataset,
                &self.source,
                ring.slot_len(),
                &mut read_back,
                c.frame,
            )
        });
        let mut checksum = None;
        if header.is_none() {
            // The last ranges go to the GPU before the frame can be shown.
            self.copy_landed(sel, Some(slot));
            if let Some(p) = self.path(sel) {
                checksum =
                    p.route
                        .check_crcs(&self.device, &self.queue, &self.source, slot, c.frame)?;
            }
        }
        let Some(p) = self.paths[sel.index()].as_mut() else {
            return Ok(());
        };
        p.route.read_ended(slot);
        if let Some((lane, offset, msg)) = header {
            // Resident for the check only: the slot is freed again.
            p.stream.reject(&mut self.sched, c.frame);
            self.record_fault(FrameFault {
                frame: c.frame,
                path: sel,
                kind: FrameFaultKind::Header,
                lane,
                file: None,
                offset,
                message: msg,
                at_s: now,
                rank: None,
                host: None,
            });
            return Ok(());
        }
        if let Some(e) = checksum {
            // As the engine's own check reports it: a failed read of that frame.
            p.stream.reject(&mut self.sched, c.frame);
            self.fault(sel, c.frame, FrameFaultKind::Read, &e);
            return Ok(());
        }
        self.faults.played(c.frame);
        let done = c.on_gpu.or(c.last_byte).unwrap_or_else(Instant::now);
        let latency = done.saturating_duration_since(c.requested).as_secs_f64();
        self.stats[sel.index()].arrived(now, c.bytes, latency);
        Ok(())
    }

    /// Records a failed read of `frame` as a fault, with the lane and file it names.
    fn fault(&mut self, sel: PathSel, frame: u32, kind: FrameFaultKind, e: &IngestError) {
        let f = FrameFault::from_error(&self.source, sel, frame, kind, e, self.now());
        self.record_fault(f);
    }

    fn record_fault(&mut self, f: FrameFault) {
        self.last_error = Some(format!("frame {}: {}", f.frame, f.message));
        self.faults.record(f);
    }

    /// Keeps `message` as the last error (one the player met outside the frame paths).
    pub(super) fn note_error(&mut self, message: String) {
        self.last_error = Some(message);
    }

    /// Issues reads the scheduler wants on the active path, as slots allow.
    fn feed(&mut self) -> Result<(), PlayError> {
        let Some(p) = self.paths[self.active.index()].as_mut() else {
            return Ok(());
        };
        let (device, route) = (&self.device, &mut p.route);
        p.stream
            .feed_with(&mut self.sched, &self.source, u64::MAX, |slot| {
                route.prepare_slot(device, slot)
            })?;
        Ok(())
    }

    /// Copies the ranges landed in `sel`'s slots (`only`: in that slot alone) to the GPU
    /// (imported-copy route; see `UploadRoute::copy_landed`); stale slots are skipped.
    fn copy_landed(&mut self, sel: PathSel, only: Option<usize>) {
        if let Some(p) = self.paths[sel.index()].as_mut() {
            let stream = &p.stream;
            p.route
                .copy_landed(&self.device, &self.queue, only, |slot| {
                    stream.is_stale(slot)
                });
        }
    }

    /// The first step of showing `frame` (resident on the active path): takes its slot
    /// (`InUse`; the slot already shown where it is the same frame there) and the GPU
    /// buffers to bind, copied there first on the staging route (its time is recorded).
    pub(super) fn stage(&mut self, frame: u32) -> Result<StagedFrame, PlayError> {
        let active = self.active;
        let prev = self.shown;
        let same_slot = |slot: usize| {
            prev.is_some_and(|s| s.path == active && s.slot == slot && s.frame == frame)
        };
        let p = self.paths[active.index()]
            .as_mut()
            .ok_or_else(|| PlayError::Usage("the active path has no engine".into()))?;
        let slot = match p.stream.ring().ready_slot(frame) {
            Some(s) if same_slot(s) => s,
            _ => p
                .stream
                .ring_mut()
                .acquire(frame)
                .ok_or_else(|| PlayError::Usage(format!("frame {frame} is not resident")))?,
        };
        let len = self.source.frames[frame as usize].len as usize;
        let (parts, upload_s) =
            p.route
                .frame_parts(&self.device, &self.queue, p.stream.ring(), slot, len)?;
        if let Some(secs) = upload_s {
            self.stats[active.index()].uploaded(len as u64, secs);
        }
        Ok(StagedFrame { frame, slot, parts })
    }

    /// The second step: `staged` is bound to the renderer and on screen now. Returns the
    /// frame shown before (for [`FramePaths::retire`]) and, where `staged` ends a scrub,
    /// when that scrub was asked for.
    pub(super) fn mark_shown(&mut self, staged: &StagedFrame) -> (Option<Shown>, Option<Instant>) {
        let prev = self.shown.replace(Shown {
            frame: staged.frame,
            path: self.active,
            slot: staged.slot,
        });
        let scrub_asked = match self.scrub {
            Some((target, at)) if target == staged.frame => {
                self.scrub = None;
                Some(at)
            }
            _ => None,
        };
        (prev, scrub_asked)
    }

    /// The last step, once no render in flight reads the frame shown before (`prev`): its
    /// slot goes back to its engine (to the scheduler too where it is the active path's).
    pub(super) fn retire(&mut self, prev: Option<Shown>) {
        let active = self.active;
        let Some(current) = self.shown else {
            return;
        };
        if let Some(prev) = prev
            && !(prev.path == active && prev.slot == current.slot)
            && let Some(pp) = self.paths[prev.path.index()].as_mut()
        {
            pp.stream
                .retire(prev.slot, (prev.path == active).then_some(&mut self.sched));
        }
    }

    /// A render finished at `now` (GPU time `gpu_ms`): one of a new frame on `new_frame_on`
    /// (`None`: the same frame again), ending a scrub asked for at `scrub_asked`.
    pub(super) fn rendered(
        &mut self,
        now: f64,
        gpu_ms: Option<f64>,
        new_frame_on: Option<PathSel>,
        scrub_asked: Option<Instant>,
    ) {
        if let Some(path) = new_frame_on {
            self.stats[path.index()].rendered(now, gpu_ms);
        }
        if let Some(at) = scrub_asked {
            let ms = at.elapsed().as_secs_f64() * 1e3;
            self.last_scrub_ms = Some(ms);
            if let Some(path) = new_frame_on {
                self.stats[path.index()].scrubbed(ms);
            }
        }
    }

    /// Switches to `sel` at run time. The old path's queued requests are dropped, its reads
    /// not yet issued are cancelled, and what is in flight is discarded as it lands; the
    /// frame on screen stays until the new path delivers the same frame. Errors (with the
    /// reason) when the path cannot run here.
    pub(super) fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        if sel == self.active {
            return Ok(());
        }
        if self.path(sel).is_none() {
            return Err(self
                .direct_reason
                .clone()
                .unwrap_or_else(|| format!("the {} path is unavailable", sel.name())));
        }
        let now = self.now();
        let old = self.active;
        if let Some(p) = self.paths[old.index()].as_mut() {
            // What is in flight is dropped on arrival; what is not yet issued is abandoned
            // so the path goes idle quickly.
            p.stream.leave();
        }
        self.stats[old.index()].set_active(false, now);
        self.stats[sel.index()].set_active(true, now);
        let old_sched = &self.sched;
        let mut s = Scheduler::new(PlaybackConfig {
            window: self.slot_plan.slots,
            ..old_sched.config()
        });
        s.set_direction(old_sched.direction());
        s.scrub(old_sched.position());
        s.set_playing(old_sched.is_playing());
        self.sched = s;
        self.active = sel;
        // Resident frames of the new path from an earlier visit are stale by now.
        if let Some(p) = self.paths[sel.index()].as_mut() {
            p.stream.enter();
        }
        Ok(())
    }

    /// Jumps to `frame` (clamped); the time until that exact frame is shown is recorded as
    /// the scrub latency.
    pub(super) fn scrub(&mut self, frame: u32) {
        let target = frame.min(self.frame_count() - 1);
        self.sched.scrub(target);
        self.scrub = Some((target, Instant::now()));
    }

    /// While dragging, nearby arrived frames are shown until the exact one arrives.
    pub(super) fn set_dragging(&mut self, dragging: bool) {
        self.dragging = dragging;
    }

    /// One frame forward or back (pauses).
    pub(super) fn step(&mut self, direction: Direction) {
        self.sched.step(direction);
        self.scrub = Some((self.sched.position(), Instant::now()));
    }

    /// The scheduler (playback state: playhead, direction, speed, mode).
    pub(super) fn scheduler(&self) -> &Scheduler {
        &self.sched
    }
    /// The scheduler, to change playback (play, direction, speed, mode).
    pub(super) fn scheduler_mut(&mut self) -> &mut Scheduler {
        &mut self.sched
    }
    /// Whether a jump to `frame` has ended on a damaged frame (see
    /// `Player::jumped_to_damaged`).
    pub(super) fn jumped_to_damaged(&self, frame: u32) -> bool {
        self.sched.position() == frame && self.sched.state(frame) == Some(FrameState::Damaged)
    }
    /// The frame on screen.
    pub(super) fn shown_frame(&self) -> Option<u32> {
        self.shown.map(|s| s.frame)
    }
    /// The frames streamed: their files and byte extents.
    pub(super) fn source(&self) -> &Source {
        &self.source
    }
    /// Frames in the dataset.
    pub(super) fn frame_count(&self) -> u32 {
        self.source.frames.len() as u32
    }
    /// The path showing frames.
    pub(super) fn active(&self) -> PathSel {
        self.active
    }
    /// Why the direct path cannot run here, if it cannot.
    pub(super) fn direct_unavailable(&self) -> Option<&str> {
        self.path(PathSel::Direct)
            .is_none()
            .then(|| self.direct_reason.as_deref().unwrap_or("unavailable"))
    }
    /// Availability and mode of a path.
    pub(super) fn report(&self, sel: PathSel) -> PathReport {
        match self.path(sel) {
            None => PathReport::unavailable(sel, self.direct_reason.clone()),
            Some(p) => p.report(sel),
        }
    }
    /// Figures of a path as of now.
    pub(super) fn figures(&self, sel: PathSel) -> PathFigures {
        self.stats[sel.index()].figures(self.now())
    }
    /// Rolling statistics of a path.
    pub(super) fn stats(&self, sel: PathSel) -> &PathStats {
        &self.stats[sel.index()]
    }
    /// Clears a path's statistics.
    pub(super) fn reset_stats(&mut self, sel: PathSel) {
        let now = self.now();
        self.stats[sel.index()].reset(now);
    }
    /// Latency of the last completed scrub, ms.
    pub(super) fn last_scrub_ms(&self) -> Option<f64> {
        self.last_scrub_ms
    }
    /// Whether a scrub still waits for its frame to be shown.
    pub(super) fn scrub_waiting(&self) -> bool {
        self.scrub.is_some()
    }
    /// Frame reads cancelled by the player (see `Player::cancelled_reads`).
    pub(super) fn cancelled_reads(&self) -> u64 {
        self.cancelled_reads
    }
    /// Frame faults, damaged frames and recoveries.
    pub(super) fn faults(&self) -> &FaultLog {
        &self.faults
    }
    /// The damaged frames now, with why.
    pub(super) fn damaged_frames(&self) -> &BTreeMap<u32, FrameFaultKind> {
        &self.faults.damaged
    }
    /// Slots of the active path reserved by timed-out reads still out.
    pub(super) fn held_slots(&self) -> usize {
        self.path(self.active).map_or(0, |p| p.stream.held_slots())
    }
    /// Reads in flight on the active path (frames).
    pub(super) fn in_flight(&self) -> usize {
        self.path(self.active).map_or(0, |p| p.stream.in_flight())
    }
    /// The last error (a failed read), if any.
    pub(super) fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
    /// GPU memory held for frames, bytes.
    pub(super) fn gpu_buffer_bytes(&self) -> u64 {
        self.gpu_buffer_bytes
    }
    /// How many slots each path holds, of what parts, and the memory they take.
    pub(super) fn slot_plan(&self) -> &SlotPlan {
        &self.slot_plan
    }

    /// Stops issuing reads and waits until `end` for reads in flight to land, so the
    /// engines shut down idle.
    pub(super) fn drain(&mut self, end: Instant) {
        for p in self.paths.iter_mut().flatten() {
            p.stream.drain(end);
        }
    }
}

/// How many slots each path holds and how they are cut into parts of `part_bytes` (the
/// renderer's part size): what `--slots` asks for (refused where it does not fit), else the
/// memory-based default, fewer where the GPU or host cannot hold that many. Per slot the
/// player holds a host slot (two with the loopback path), a device buffer the host route
/// binds, and on the direct path a shared slot.
pub(super) fn plan_slots(
    part_bytes: u64,
    interop: Option<&(&crate::gpu::Gpu, &crate::gpu::InteropDevice)>,
    source: &Source,
    cfg: &PlayerConfig,
) -> Result<SlotPlan, PlayError> {
    let (frame, frame_bytes) = source.largest_frame();
    let gpu_free = interop
        .and_then(|(g, _)| g.mem_info().ok())
        .map(|(free, _)| free as u64);
    let host = crate::memory::available().bytes;
    let demand = SlotDemand {
        frame,
        frame_bytes: frame_bytes.max(1),
        part_bytes,
        // A slot holds the whole frame, but the renderer binds only the parts the shown
        // grids span (Player::check_shown judges those).
        max_parts: usize::MAX,
        host_per_slot: if cfg.loopback_direct { 2 } else { 1 },
        gpu_per_slot: if interop.is_some() { 2 } else { 1 },
        gpu_fixed: 0,
    };
    let wanted = cfg.slots.unwrap_or_else(|| {
        ring_slots(frame_bytes as usize, host.min(gpu_free.unwrap_or(u64::MAX)))
    });
    crate::gpu::plan_slots(
        &demand,
        wanted,
        cfg.slots.is_some(),
        crate::stream::MIN_SLOTS,
        Some(host),
        gpu_free,
    )
    .map_err(PlayError::Usage)
}
