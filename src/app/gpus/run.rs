//! Headless runs on several GPUs (`play --headless --gpus`): each path presented frame by
//! frame, timed jumps, and the per-GPU figures of the report.

use super::*;

fn mean(v: &[f64]) -> Option<f64> {
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

/// Runs each path of `opts` on every GPU of `mp`: `frames` frames presented as fast as
/// they are finished, then timed jumps; one [`PathRun`] per path with its `gpus` (the run
/// of one GPU's player, [`crate::app::headless::run_each_path`], with several GPUs' steps).
pub fn run_paths(
    mp: &mut MultiPlayer,
    opts: &HeadlessOptions,
    progress: &mut dyn FnMut(crate::app::headless::Progress),
) -> Vec<PathRun> {
    crate::app::headless::run_each_path(mp, opts, progress)
}

/// Several GPUs' counters a path's run is measured from.
pub(crate) struct PlayMark {
    /// Frames each GPU had presented.
    shown: Vec<u64>,
    /// Image copies each GPU had made.
    copies: Vec<usize>,
    /// Presentations logged.
    presented: usize,
    /// Each GPU's faults and recovered frames (another rank's as it last reported).
    faults: Vec<(u64, u64)>,
}

impl crate::app::headless::PathRuns for MultiPlayer {
    type Mark = PlayMark;
    fn gpu_count(&self) -> usize {
        MultiPlayer::gpu_count(self)
    }
    fn path_report(&self, sel: PathSel) -> crate::app::core::PathReport {
        self.player(0).path_report(sel)
    }
    fn set_path(&mut self, sel: PathSel) -> Result<(), String> {
        MultiPlayer::set_path(self, sel)
    }
    fn set_speed(&mut self, fps: Option<f64>) {
        MultiPlayer::set_speed(self, fps);
    }
    fn reset_stats(&mut self, sel: PathSel) {
        for k in 0..self.gpu_count() {
            self.workers.reset_stats(k, sel);
        }
    }
    fn mark(&mut self) -> PlayMark {
        PlayMark {
            shown: per_gpu_shown(self),
            copies: self.shares.iter().map(|s| s.copies_ms.len()).collect(),
            presented: self.presented.len(),
            faults: (0..self.gpu_count())
                .map(|k| self.workers.fault_mark(k))
                .collect(),
        }
    }
    fn record_play(
        &mut self,
        sel: PathSel,
        mark: &PlayMark,
        run: &mut PathRun,
        played: Result<(), String>,
    ) -> Result<(), String> {
        // Other ranks' figures (and faults) as they stand at the end of the run.
        let played = played.and_then(|()| self.workers.settle().map_err(|e| e.to_string()));
        let played_log: Vec<(u32, usize)> = self.presented[mark.presented..].to_vec();
        run.gpus = Some(gpus_run(self, sel, mark, &played_log, run.wall_s));
        // One GPU's figures are the path's (several GPUs' are each in `gpus`).
        if self.gpu_count() == 1 {
            run.figures = Some(self.workers.figures(0, sel).0);
        }
        played
    }
    fn timed_jumps(
        &mut self,
        sel: PathSel,
        opts: &HeadlessOptions,
        progress: &mut dyn FnMut(crate::app::headless::Progress),
    ) -> Result<crate::app::headless::ScrubReport, String> {
        scrub_jumps(self, sel, opts, progress)
    }
    fn memory_start(&self, memory: &mut crate::app::headless::MemoryReport) {
        // The display GPU's (GPU 0's): a device named twice, or CUDA's figure of the
        // whole device, would be counted twice in a sum.
        let gpu = crate::app::gpumem::gpu_memory(self.player(0).device());
        memory.gpu_used_start = gpu.as_ref().map(|m| m.used);
        memory.gpu_memory_source = gpu.map(|m| m.source);
    }
    fn memory_end(&self, memory: &mut crate::app::headless::MemoryReport) {
        memory.gpu_used_end =
            crate::app::gpumem::gpu_memory(self.player(0).device()).map(|m| m.used);
        // The players of this process (another rank's report their own).
        memory.player_gpu_buffers = (0..self.gpu_count())
            .filter_map(|k| self.workers.player(k).map(Player::gpu_buffer_bytes))
            .sum();
    }
    fn faults_since(&self, sel: PathSel, mark: &PlayMark) -> FaultReport {
        merged_faults(self, sel, &mark.faults)
    }
    fn render_report(&self) -> RenderReport {
        RenderReport::of(self.player(0))
    }
    fn run_error(&self) -> Option<String> {
        self.last_error().map(str::to_string)
    }
}

/// Every GPU's faults of the run (another rank's from its reports), in the dataset's
/// frame numbers.
fn merged_faults(mp: &MultiPlayer, sel: PathSel, since: &[(u64, u64)]) -> FaultReport {
    let mut out = FaultReport::default();
    for (k, &mark) in since.iter().enumerate().take(mp.shares.len()) {
        let r = gpu_faults(mp, k, sel, mark);
        out.count += r.count;
        out.recovered_frames += r.recovered_frames;
        out.damaged_frames.extend(r.damaged_frames);
        out.faults.extend(r.faults);
    }
    out.damaged_frames.sort_unstable();
    out.faults.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    out
}

/// GPU `k`'s faults on `sel` since `mark`, in the dataset's frame numbers; across ranks each
/// fault names its rank and host.
fn gpu_faults(mp: &MultiPlayer, k: usize, sel: PathSel, mark: (u64, u64)) -> FaultReport {
    let s = &mp.shares[k];
    let global = |l: u32| s.frames.get(l as usize).copied().unwrap_or(l);
    let host = mp.workers.name(k).host.clone();
    let mut r = mp.workers.faults_since(k, sel, mark);
    for d in &mut r.damaged_frames {
        *d = global(*d);
    }
    for f in &mut r.faults {
        f.frame = global(f.frame);
        if host.is_some() {
            f.rank = Some(mp.workers.name(k).rank.unwrap_or(k));
            f.host.clone_from(&host);
        }
    }
    r
}

fn per_gpu_shown(mp: &mut MultiPlayer) -> Vec<u64> {
    let now = mp.now();
    mp.multi
        .figures(now)
        .0
        .iter()
        .map(|f| f.frames_shown)
        .collect()
}

fn gpus_run(
    mp: &mut MultiPlayer,
    sel: PathSel,
    mark: &PlayMark,
    log: &[(u32, usize)],
    wall_s: f64,
) -> GpusRun {
    let (shown0, copies0) = (&mark.shown, &mark.copies);
    let shown = per_gpu_shown(mp);
    let n = mp.frame_count;
    let gpus: Vec<GpuRun> = mp
        .shares
        .iter()
        .enumerate()
        .map(|(k, s)| {
            let name = mp.workers.name(k);
            let (figures, label) = mp.workers.figures(k, sel);
            let copies = &s.copies_ms[copies0[k].min(s.copies_ms.len())..];
            let bytes_per_copy = s.copy_bytes as f64 / s.copies_ms.len().max(1) as f64;
            let copy_s: f64 = copies.iter().sum::<f64>() / 1e3;
            let faults = gpu_faults(mp, k, sel, mark.faults[k]);
            GpuRun {
                index: k,
                ordinal: name.ordinal,
                rank: name.rank,
                host: name.host.clone(),
                device: name.device.clone(),
                matched: name.matched.clone(),
                label,
                frames_owned: s.frames.len(),
                figures,
                frames_presented: shown[k] - shown0[k],
                copies: copies.len(),
                copy_ms_mean: mean(copies),
                copy_ms_max: copies.iter().copied().reduce(f64::max),
                copy_gbps: (copy_s > 0.0)
                    .then(|| bytes_per_copy * copies.len() as f64 / copy_s / 1e9),
                faults: faults.count,
                damaged_frames: faults.damaged_frames,
                errors: mp.workers.errors(k),
            }
        })
        .collect();
    let all_copies: Vec<f64> = mp
        .shares
        .iter()
        .enumerate()
        .flat_map(|(k, s)| s.copies_ms[copies0[k].min(s.copies_ms.len())..].to_vec())
        .collect();
    let frames_presented = log.len() as u64;
    let total = GpusTotal {
        gbps_mean: gpus.iter().map(|g| g.figures.gbps_mean).sum(),
        frames_rendered: gpus.iter().map(|g| g.figures.frames_rendered).sum(),
        rendered_fps: gpus.iter().map(|g| g.figures.rendered_fps).sum(),
        frames_presented,
        presented_fps: if wall_s > 0.0 {
            frames_presented as f64 / wall_s
        } else {
            0.0
        },
        copy_ms_mean: mean(&all_copies),
    };
    let order: Vec<u32> = log.iter().map(|&(f, _)| f).collect();
    let in_order = crate::pipeline::scheduler::in_play_order(&order, n, mp.mode);
    let kept = &log[..log.len().min(10_000)];
    GpusRun {
        display_copy: DISPLAY_COPY.into(),
        gpus,
        total,
        presented: kept.iter().map(|&(f, _)| f).collect(),
        presented_by: kept.iter().map(|&(_, k)| k).collect(),
        in_order,
    }
}

impl crate::app::headless::Timeline for MultiPlayer {
    fn frames_done(&self, _sel: PathSel) -> u64 {
        self.presentations
    }
    fn frame_count(&self) -> u32 {
        MultiPlayer::frame_count(self)
    }
    fn set_playing(&mut self, playing: bool) {
        MultiPlayer::set_playing(self, playing);
    }
    fn scrub(&mut self, frame: u32) {
        MultiPlayer::scrub(self, frame);
    }
    fn tick_shown(&mut self) -> Result<Option<u32>, PlayError> {
        Ok(self.tick()?.shown.map(|(f, _)| f))
    }
    fn shown_frame(&self) -> Option<u32> {
        MultiPlayer::shown_frame(self)
    }
    fn scrub_pending(&self) -> bool {
        MultiPlayer::scrub_pending(self)
    }
    fn wait(&mut self, timeout: Duration) {
        MultiPlayer::wait(self, timeout);
    }
    fn last_scrub_ms(&self) -> Option<f64> {
        MultiPlayer::last_scrub_ms(self)
    }
    fn fault_count(&self) -> u64 {
        (0..self.gpu_count())
            .map(|k| self.workers.fault_mark(k).0)
            .sum()
    }
    fn target_damaged(&self, target: u32, faults_before: u64) -> bool {
        let k = self.multi.ownership().owner(target);
        let Some(local) = self.shares[k].local(target) else {
            return false;
        };
        // Its owner marked it damaged since the jump, or the owner's playhead was already
        // on it, damaged (a jump there does not read it again).
        (self.fault_count() > faults_before && self.workers.damaged(k).contains(&local))
            || self
                .workers
                .player(k)
                .is_some_and(|p| p.jumped_to_damaged(local))
    }
    fn finish_renders(&mut self) -> Result<(), PlayError> {
        self.workers.finish_renders()
    }
    fn timeout_context(&self, sel: PathSel, timeout: Duration) -> String {
        // The frame waited for: a jump's target, else the playhead's; its owner's figures.
        let frame = self
            .scrub
            .map_or_else(|| self.multi.scheduler().position(), |(f, _)| f);
        let k = self.multi.ownership().owner(frame);
        let context = match self.workers.player(k) {
            Some(p) => crate::app::headless::timeout_context(p, sel, timeout),
            None => {
                let f = self.workers.figures(k, sel).0;
                crate::app::headless::timeout_line(timeout, f.rendered_fps, None, String::new())
            }
        };
        match self.gpu_count() {
            1 => context,
            _ => format!("frame {frame} is GPU {k}'s: {context}"),
        }
    }
}

/// The timed jumps of one path's run ([`crate::app::headless::scrub_jumps`], written once
/// for one GPU and several), then one jump while playing.
fn scrub_jumps(
    mp: &mut MultiPlayer,
    sel: PathSel,
    opts: &HeadlessOptions,
    progress: &mut dyn FnMut(crate::app::headless::Progress),
) -> Result<crate::app::headless::ScrubReport, String> {
    let mut report =
        crate::app::headless::scrub_jumps(mp, sel, opts.scrub_jumps, opts.timeout, progress)
            .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + opts.timeout;
    report.playing_exact = jump_while_playing(mp, deadline)?;
    Ok(report)
}

/// A jump while playing: whether its target is the next frame presented and the two after
/// it follow in play order (`None` on a timeline under 3 frames). Playback is left playing.
fn jump_while_playing(mp: &mut MultiPlayer, deadline: Instant) -> Result<Option<bool>, String> {
    let n = mp.frame_count();
    if n < 3 {
        return Ok(None);
    }
    mp.set_playing(true);
    // Two frames after it even where the timeline plays once.
    let target = crate::app::headless::Lcg(0x7a11).next(n - 2);
    let at = mp.presented.len();
    mp.scrub(target);
    while mp.presented.len() < at + 3 {
        if Instant::now() > deadline {
            return Err(format!(
                "a jump to frame {target} while playing: 3 frames were not presented in time"
            ));
        }
        if mp.tick().map_err(|e| e.to_string())?.shown.is_none() {
            mp.wait(Duration::from_millis(1));
        }
    }
    let after: Vec<u32> = mp.presented[at..at + 3].iter().map(|&(f, _)| f).collect();
    // The two after it in play order (a ping-pong timeline may be playing backwards).
    let mut expected = vec![target];
    let mut at = (target, mp.direction());
    for _ in 0..2 {
        match crate::pipeline::scheduler::successor(n, mp.mode, at.0, at.1) {
            Some(next) => {
                expected.push(next.0);
                at = next;
            }
            None => break,
        }
    }
    Ok(Some(after == expected))
}

/// Several GPUs' lines of a path in the human summary
/// ([`crate::app::headless::paths_summary`]): the total on the path's line, then a line per
/// GPU (or rank).
pub(crate) fn summary_lines(s: &mut String, name: &str, g: &GpusRun) {
    use std::fmt::Write;
    let _ = writeln!(
        s,
        "  {name:<6} {} GPUs: {:.2} GB/s, rendered {:.1} frames/s, presented {} frames at {:.1} frames/s{}{}",
        g.gpus.len(),
        g.total.gbps_mean,
        g.total.rendered_fps,
        g.total.frames_presented,
        g.total.presented_fps,
        g.total.copy_ms_mean.map_or(String::new(), |ms| format!(
            ", copy to the display {ms:.2} ms"
        )),
        if g.in_order { "" } else { ", NOT in order" }
    );
    for x in &g.gpus {
        let who = match &x.host {
            Some(host) => format!(
                "rank {} (on {host}, GPU {}",
                x.rank.unwrap_or(x.index),
                x.ordinal
            ),
            None => format!("GPU {} (--gpus {}", x.index, x.ordinal),
        };
        let _ = writeln!(
            s,
            "         {who}, {}): {:.2} GB/s, rendered {} ({:.1} frames/s), presented {}{}{}",
            x.label,
            x.figures.gbps_mean,
            x.figures.frames_rendered,
            x.figures.rendered_fps,
            x.frames_presented,
            x.copy_ms_mean.map_or(String::new(), |ms| format!(
                ", {} {ms:.2} ms mean",
                if x.host.is_some() {
                    "image transfer"
                } else {
                    "copies"
                }
            )),
            match (x.faults, x.damaged_frames.is_empty()) {
                (0, true) => String::new(),
                (n, _) => format!(", {n} faults, damaged frames {:?}", x.damaged_frames),
            }
        );
        for e in &x.errors {
            let _ = writeln!(s, "           error: {e}");
        }
    }
}
