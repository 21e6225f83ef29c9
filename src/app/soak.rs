//! Long runs (`supercell play --headless --soak 2h`): the kiosk's workload without a window,
//! and harder: playback loops as fast as frames arrive (not at the scene's rate), the camera
//! flies the scene's path, the path flips on a timer, and the
//! process's memory, open file descriptors and threads (and the GPU's memory, where CUDA can
//! say) are sampled, so a booth's "flat over hours" can be checked rather than hoped for.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::core::{PathSel, PlayError, Player};
use super::gpus::MultiPlayer;
use crate::probe::{open_fds, rss_bytes, thread_count};

/// What a long run does.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// How long to run.
    pub duration: Duration,
    /// Flip direct ↔ host this often (where the direct path exists).
    pub toggle_every: Option<Duration>,
    /// Sample this often.
    pub sample_every: Duration,
}

/// One sample of the process and the playback.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SoakSample {
    /// Seconds since the run started.
    pub t_s: f64,
    /// The path showing frames.
    pub path: PathSel,
    /// Frames rendered so far (both paths).
    pub frames: u64,
    /// Bytes delivered so far (both paths).
    pub bytes: u64,
    /// Resident set, bytes.
    pub rss: u64,
    /// Open file descriptors.
    pub fds: u64,
    /// Threads of the process.
    pub threads: u64,
    /// GPU memory in use, bytes: CUDA's view of the whole device where CUDA exists, else
    /// what the player's device reports (see `gpumem`).
    pub gpu_used: Option<u64>,
    /// Frames each path has delivered so far, direct then host (with several players in
    /// the process, the fewest any of them delivered): a path's ring has had every slot
    /// filled once its count reaches `ring_slots` (slots are taken in turn).
    #[serde(default)]
    pub delivered: [u64; 2],
    /// Slots of each path's ring (several players: the most any has; 0: not known).
    #[serde(default)]
    pub ring_slots: u64,
}

/// What a long run found. "Settled" figures leave out the warm-up: the first tenth of the
/// run (at most a minute) while allocators and caches warm up, and until every slot of
/// every path's ring has held a frame ([`SoakSample::delivered`]).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SoakReport {
    /// Seconds run.
    pub duration_s: f64,
    /// Path flips made.
    pub toggles: u64,
    /// Why no flips were made where they were asked for (the direct path's reason).
    pub toggle_unavailable: Option<String>,
    /// Frames rendered.
    pub frames: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Errors seen (distinct messages, in order), e.g. failed reads.
    pub errors: Vec<String>,
    /// Resident set after warm-up: the largest in the first settled tenth of the run, and in
    /// the last tenth, bytes; growth is their difference.
    pub rss_settled_start: u64,
    /// See `rss_settled_start`.
    pub rss_settled_end: u64,
    /// `rss_settled_end − rss_settled_start`, bytes (negative: shrank).
    pub rss_growth: i64,
    /// Fewest and most open file descriptors after warm-up.
    pub fds_range: [u64; 2],
    /// Fewest and most threads after warm-up.
    pub threads_range: [u64; 2],
    /// Least and most GPU memory in use after warm-up, where known.
    pub gpu_used_range: Option<[u64; 2]>,
    /// Whether memory, file descriptors and threads held flat after warm-up; `None` when
    /// no sample was taken after it.
    pub verdict: Option<SoakVerdict>,
    /// Each path's figures over the whole run (while it was active).
    pub paths: Vec<(PathSel, super::stats::PathFigures)>,
    /// Every sample (across ranks: rank 0's, the display process).
    pub samples: Vec<SoakSample>,
    /// Across ranks: frames rank 0 presented (each once, strictly in order unless
    /// `presented_in_order` says otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presented: Option<u64>,
    /// Across ranks: whether every frame presented followed the one before (the same frame
    /// again after a path flip or a view change counts as in order).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub presented_in_order: Option<bool>,
    /// Across ranks: each rank's own run (its samples, settled figures and verdict), rank 0
    /// first. There the run's `verdict` is every rank's together (flat only where each
    /// rank is) and the settled figures above are rank 0's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<RankSoak>,
}

/// One rank's part of a long run across ranks.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct RankSoak {
    /// The rank.
    pub rank: usize,
    /// The host it ran on.
    pub host: String,
    /// Its own figures: frames and bytes it rendered and read, the errors it saw, its
    /// samples, settled figures and verdict (`ranks` empty).
    #[serde(flatten)]
    pub soak: SoakReport,
}

/// Settled drift of the resident set above which a run is called growing: 1 %.
pub const FLAT_RSS_DRIFT: f64 = 0.01;

/// Whether a long run held flat after warm-up, and by how much it moved.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SoakVerdict {
    /// Resident set, file descriptors and threads all held: the resident set drifted by at
    /// most [`FLAT_RSS_DRIFT`] of its settled start, and neither descriptors nor threads
    /// grew.
    pub flat: bool,
    /// `rss_growth / rss_settled_start` (0.01 is 1 %).
    pub rss_drift: f64,
    /// Least-squares slope of the resident set over the settled samples, MB per hour.
    pub rss_slope_mb_per_hour: f64,
    /// Most descriptors open in the last settled tenth minus the most in the first.
    pub fds_growth: i64,
    /// The same for threads.
    pub threads_growth: i64,
    /// What made it not flat, in words (empty when flat).
    pub reasons: Vec<String>,
    /// Seconds between the first and the last settled sample: the verdict of a run that
    /// settled for less than [`SETTLED_FOR_VERDICT_S`] is printed but not held against it.
    pub settled_s: f64,
}

/// Settled seconds a run needs before `play --soak` exits with an error when it is not
/// flat: a shorter run's ends are too close to tell a leak from a cache filling.
pub const SETTLED_FOR_VERDICT_S: f64 = 60.0;

/// When a long run samples and flips the path next.
struct Clock {
    start: Instant,
    duration: Duration,
    sample_every: Duration,
    toggle_every: Option<Duration>,
    next_sample: Instant,
    next_toggle: Option<Instant>,
}

impl Clock {
    fn start(opts: &SoakOptions) -> Clock {
        let start = Instant::now();
        Clock {
            start,
            duration: opts.duration,
            sample_every: opts.sample_every,
            toggle_every: opts.toggle_every,
            next_sample: start,
            next_toggle: opts.toggle_every.map(|d| start + d),
        }
    }
    /// Now, and the time into the run; flies `player`'s camera along the scene's path.
    fn now(&self, player: &mut Player) -> (Instant, Duration) {
        let now = Instant::now();
        let t = now.duration_since(self.start);
        if player.has_camera_path() {
            let cam = player.scene_camera_at(t.as_secs_f64());
            player.view_mut().camera = cam;
        }
        (now, t)
    }
    /// Flips the path with `toggle` where a flip is due; where it cannot, says why in
    /// `report` and flips no more.
    fn flip(
        &mut self,
        now: Instant,
        report: &mut SoakReport,
        toggle: impl FnOnce() -> Result<PathSel, String>,
    ) {
        if self.next_toggle.is_none_or(|at| now < at) {
            return;
        }
        self.next_toggle = self.toggle_every.map(|d| now + d);
        match toggle() {
            Ok(_) => report.toggles += 1,
            Err(why) => {
                report.toggle_unavailable = Some(why);
                self.next_toggle = None;
            }
        }
    }
    /// Whether a sample is due (at `now`, `t` into the run; the last at the end).
    fn sample_due(&mut self, now: Instant, t: Duration) -> bool {
        if now < self.next_sample && t < self.duration {
            return false;
        }
        // After a stall, sample on the grid again rather than catching up in a burst.
        self.next_sample = (self.next_sample + self.sample_every).max(now);
        true
    }
}

/// The totals of the last sample, the paths' figures (by `figures`, of the paths that
/// rendered) and the settled figures and verdict.
fn finish(report: &mut SoakReport, figures: &dyn Fn(PathSel) -> super::stats::PathFigures) {
    if let Some(last) = report.samples.last() {
        report.frames = last.frames;
        report.bytes = last.bytes;
    }
    report.paths = [PathSel::Direct, PathSel::Host]
        .into_iter()
        .map(|p| (p, figures(p)))
        .filter(|(_, f)| f.frames_rendered > 0)
        .collect();
    summarise(report);
}

/// A sample of this process at `t_s` of the run: the frames and bytes of `players` (the
/// players of this process) on either path, `path` showing frames, and the GPU memory in
/// use where known.
fn sample_with<'a>(
    players: impl IntoIterator<Item = &'a Player>,
    path: PathSel,
    t_s: f64,
    gpu_used: Option<u64>,
) -> SoakSample {
    let (mut frames, mut bytes) = (0, 0);
    // The warm-up ends once every player's ring has been filled: the fewest frames any
    // player delivered on each path, against the most slots any ring has.
    let (mut delivered, mut ring_slots): (Option<[u64; 2]>, u64) = (None, 0);
    for p in players {
        let (d, h) = (p.figures(PathSel::Direct), p.figures(PathSel::Host));
        frames += d.frames_rendered + h.frames_rendered;
        bytes += d.bytes + h.bytes;
        let mine = [d.frames_delivered, h.frames_delivered];
        delivered = Some(delivered.map_or(mine, |a| [a[0].min(mine[0]), a[1].min(mine[1])]));
        ring_slots = ring_slots.max(p.slots() as u64);
    }
    SoakSample {
        t_s,
        path,
        frames,
        bytes,
        rss: rss_bytes(),
        fds: open_fds(),
        threads: thread_count(),
        gpu_used,
        delivered: delivered.unwrap_or_default(),
        ring_slots,
    }
}

/// A sample of this process and `player` at `t_s` of a run (what a rank other than 0
/// sends when rank 0 asks): the GPU memory as the player's device reports it
/// ([`super::gpumem::gpu_memory`]).
pub fn sample(player: &Player, t_s: f64) -> SoakSample {
    sample_players(&[player], t_s)
}

/// A sample of this process and its `players` (a rank playing several GPUs: `--gpus`
/// within a rank) at `t_s`, the GPU memory as the first player's device reports it.
/// No players: an empty one.
pub fn sample_players(players: &[&Player], t_s: f64) -> SoakSample {
    let Some(first) = players.first() else {
        return sample_with([], PathSel::Host, t_s, None);
    };
    let gpu_used = super::gpumem::gpu_memory(first.device()).map(|m| m.used);
    sample_with(players.iter().copied(), first.active_path(), t_s, gpu_used)
}

/// Frames presented across ranks, and whether each followed the one before.
#[derive(Default)]
struct Order {
    last: Option<u32>,
    presented: u64,
    out_of_order: u64,
}

impl Order {
    fn saw(&mut self, frame: u32, frame_count: u32) {
        match self.last {
            // The frame on screen again (a path flip, a view change): not a new one.
            Some(l) if l == frame => return,
            Some(l) if (l + 1) % frame_count != frame => self.out_of_order += 1,
            _ => {}
        }
        self.last = Some(frame);
        self.presented += 1;
    }
}

/// Runs the long run on the coordinator `mp` (one GPU, several, or several ranks):
/// looping as fast as frames arrive, the camera flying where the scene has a path (every
/// GPU gets the view), the path flipping on every GPU. Each sample is this process's (the
/// frames and bytes of its players); across ranks every other rank is asked to sample its
/// own process at each sample, and its samples come back with its reports and make its
/// series (`ranks`). `progress` is called after each of this process's samples.
pub fn run(
    mp: &mut MultiPlayer,
    opts: &SoakOptions,
    mut progress: impl FnMut(&SoakSample),
) -> Result<SoakReport, PlayError> {
    // One CUDA handle for the whole run rather than one per sample (as `gpumem` opens), so
    // the sampling itself holds nothing that comes and goes. Without CUDA, the display
    // GPU's device says what it can (Vulkan budget, wgpu allocator).
    let cuda = crate::gpu::cuda_probe()
        .ok()
        .and_then(|()| crate::gpu::Gpu::open(0).ok());
    let gpu_used = |mp: &MultiPlayer| match &cuda {
        Some(g) => g
            .mem_info()
            .ok()
            .map(|(free, total)| total.saturating_sub(free) as u64),
        None => super::gpumem::gpu_memory(mp.player(0).device()).map(|m| m.used),
    };
    mp.set_playing(true);
    mp.set_speed(None);
    let mut clock = Clock::start(opts);
    let start = clock.start;
    let mut report = SoakReport::default();
    let mut order = Order::default();
    let frame_count = mp.frame_count();
    loop {
        // The display GPU's camera; the coordinator gives every GPU the view as it ticks.
        let (now, t) = clock.now(mp.player_mut(0));
        clock.flip(now, &mut report, || mp.toggle_path());
        if clock.sample_due(now, t) {
            let s = process_sample(mp, t.as_secs_f64(), gpu_used(mp));
            for k in 1..mp.gpu_count() {
                mp.workers_mut().ask_sample(k, s.t_s);
            }
            progress(&s);
            report.samples.push(s);
            note_errors(mp, &mut report.errors);
        }
        if t >= opts.duration {
            break;
        }
        match mp.tick() {
            Ok(tick) => match tick.shown {
                Some((frame, _)) => order.saw(frame, frame_count),
                None => mp.wait(Duration::from_millis(2)),
            },
            Err(e) => {
                // Stop, but keep what was measured: the report says what went wrong.
                report
                    .errors
                    .push(format!("stopped at {:.1} s: {e}", t.as_secs_f64()));
                break;
            }
        }
    }
    report.duration_s = start.elapsed().as_secs_f64();
    // Every sample a rank was asked for arrives before its answer to this.
    if let Err(e) = mp.workers_mut().settle() {
        report.errors.push(format!("the ranks' last reports: {e}"));
    }
    report.presented = Some(order.presented);
    report.presented_in_order = Some(order.out_of_order == 0);
    let across_ranks = (0..mp.gpu_count()).any(|k| mp.workers().name(k).host.is_some());
    // Each path's figures: the display GPU's (several GPUs' are in `ranks`, across ranks).
    let lead = mp.player(0);
    finish(&mut report, &|sel| lead.figures(sel));
    if across_ranks {
        across(mp, &mut report);
    }
    Ok(report)
}

/// A sample of this process at `t_s`: every player of this process counted.
fn process_sample(mp: &MultiPlayer, t_s: f64, gpu_used: Option<u64>) -> SoakSample {
    let w = mp.workers();
    let players = (0..mp.gpu_count()).filter_map(|k| w.player(k));
    sample_with(players, mp.active_path(), t_s, gpu_used)
}

/// The errors the coordinator and the players of this process have seen, added to
/// `errors` where new.
fn note_errors(mp: &MultiPlayer, errors: &mut Vec<String>) {
    let w = mp.workers();
    let players = (0..mp.gpu_count()).filter_map(|k| w.player(k).and_then(Player::last_error));
    for e in mp.last_error().into_iter().chain(players) {
        if !errors.iter().any(|x| x == e) {
            errors.push(e.to_string());
        }
    }
}

/// Across ranks: each rank's own run in `report.ranks`, the frames and bytes of every
/// rank, the verdict of every rank together, and the other ranks' errors.
fn across(mp: &mut MultiPlayer, report: &mut SoakReport) {
    report.ranks = rank_soaks(mp, report);
    report.frames = report.ranks.iter().map(|r| r.soak.frames).sum();
    report.bytes = report.ranks.iter().map(|r| r.soak.bytes).sum();
    report.verdict = every_rank(&report.ranks);
    for r in report.ranks.iter().skip(1) {
        for e in &r.soak.errors {
            report
                .errors
                .push(format!("rank {} (on {}): {e}", r.rank, r.host));
        }
    }
}

/// Each rank's own run: rank 0's samples (`lead`'s) and every other rank's that came
/// back (a GPU of this process has none of its own and is left out).
fn rank_soaks(mp: &mut MultiPlayer, lead: &SoakReport) -> Vec<RankSoak> {
    let mut out = Vec::new();
    for k in 0..mp.gpu_count() {
        let samples = match k {
            0 => lead.samples.clone(),
            _ => mp.workers_mut().take_samples(k),
        };
        if k > 0 && samples.is_empty() {
            continue;
        }
        let workers = mp.workers();
        let mut soak = SoakReport {
            duration_s: lead.duration_s,
            toggles: lead.toggles,
            toggle_unavailable: lead.toggle_unavailable.clone(),
            errors: match k {
                0 => lead.errors.clone(),
                _ => workers.errors(k),
            },
            samples,
            ..SoakReport::default()
        };
        finish(&mut soak, &|sel| workers.figures(k, sel).0);
        out.push(RankSoak {
            rank: workers.name(k).rank.unwrap_or(k),
            host: workers.name(k).host.clone().unwrap_or_default(),
            soak,
        });
    }
    out
}

/// The ranks' verdicts together: flat only where every rank is, each reason naming its
/// rank, the largest drift, slope and growths, the shortest settled span; `None` where a
/// rank has none.
fn every_rank(ranks: &[RankSoak]) -> Option<SoakVerdict> {
    let mut all: Option<SoakVerdict> = None;
    for r in ranks {
        let v = r.soak.verdict.as_ref()?;
        let reasons = v.reasons.iter().map(|w| format!("rank {}: {w}", r.rank));
        match &mut all {
            None => {
                all = Some(SoakVerdict {
                    reasons: reasons.collect(),
                    ..v.clone()
                })
            }
            Some(a) => {
                a.flat &= v.flat;
                a.rss_drift = a.rss_drift.max(v.rss_drift);
                a.rss_slope_mb_per_hour = a.rss_slope_mb_per_hour.max(v.rss_slope_mb_per_hour);
                a.fds_growth = a.fds_growth.max(v.fds_growth);
                a.threads_growth = a.threads_growth.max(v.threads_growth);
                a.settled_s = a.settled_s.min(v.settled_s);
                a.reasons.extend(reasons);
            }
        }
    }
    all
}

/// When warm-up ends: a tenth of the run after the first frame was shown (at most a
/// minute), and not before the rings are full ([`rings_full_at`]). Counting from the first
/// frame, not the start, leaves out the shader builds a software adapter makes before it
/// (16 s on lavapipe, with nothing else moving). Waiting for the rings leaves out their
/// filling: a slot's memory is touched first when it takes its first frame, so a run that
/// flips paths goes on growing until each path has been active long enough (a 45-minute
/// soak across ranks read a +84 MB/h slope that was only this).
fn warm_up_end(r: &SoakReport) -> f64 {
    let first_frame = r
        .samples
        .iter()
        .find(|s| s.frames > 0)
        .map_or(0.0, |s| s.t_s);
    let tenth = first_frame + ((r.duration_s - first_frame) / 10.0).min(60.0);
    rings_full_at(&r.samples).map_or(f64::INFINITY, |t| t.max(tenth))
}

/// The time of the first sample by which every slot of every path's ring has held a
/// frame: each path that delivered frames in the run has delivered as many as its ring
/// has slots. `None` where that never happened (every sample is still warm-up).
fn rings_full_at(samples: &[SoakSample]) -> Option<f64> {
    let last = samples.last()?;
    let used: Vec<usize> = (0..2).filter(|&p| last.delivered[p] > 0).collect();
    samples
        .iter()
        .find(|s| used.iter().all(|&p| s.delivered[p] >= s.ring_slots))
        .map(|s| s.t_s)
}

/// Fills the settled figures and the verdict from the samples.
fn summarise(r: &mut SoakReport) {
    let warm = warm_up_end(r);
    let settled: Vec<&SoakSample> = r.samples.iter().filter(|s| s.t_s >= warm).collect();
    if settled.is_empty() {
        return;
    }
    let span = settled[settled.len() - 1].t_s - settled[0].t_s;
    let tenth = span / 10.0;
    let (t0, t1) = (settled[0].t_s, settled[settled.len() - 1].t_s);
    let max_rss = |pick: &dyn Fn(f64) -> bool| {
        settled
            .iter()
            .filter(|s| pick(s.t_s))
            .map(|s| s.rss)
            .max()
            .unwrap_or(0)
    };
    r.rss_settled_start = max_rss(&|t| t <= t0 + tenth);
    r.rss_settled_end = max_rss(&|t| t >= t1 - tenth);
    r.rss_growth = r.rss_settled_end as i64 - r.rss_settled_start as i64;
    let growth_of = |f: &dyn Fn(&SoakSample) -> u64| {
        let most = |pick: &dyn Fn(f64) -> bool| {
            let v = settled.iter().filter(|s| pick(s.t_s)).map(|s| f(s));
            v.max().unwrap_or(0) as i64
        };
        most(&|t| t >= t1 - tenth) - most(&|t| t <= t0 + tenth)
    };
    let (fds_growth, threads_growth) = (growth_of(&|s| s.fds), growth_of(&|s| s.threads));
    r.verdict = Some(verdict(r, &settled, fds_growth, threads_growth));
    let range = |f: &dyn Fn(&SoakSample) -> u64| {
        let v = settled.iter().map(|s| f(s));
        [v.clone().min().unwrap_or(0), v.max().unwrap_or(0)]
    };
    r.fds_range = range(&|s| s.fds);
    r.threads_range = range(&|s| s.threads);
    let gpu: Vec<u64> = settled.iter().filter_map(|s| s.gpu_used).collect();
    r.gpu_used_range = (!gpu.is_empty()).then(|| {
        [
            gpu.iter().copied().min().unwrap_or(0),
            gpu.iter().copied().max().unwrap_or(0),
        ]
    });
}

/// The verdict on the settled samples ([`SoakVerdict`]).
fn verdict(
    r: &SoakReport,
    settled: &[&SoakSample],
    fds_growth: i64,
    threads_growth: i64,
) -> SoakVerdict {
    let rss_drift = r.rss_growth as f64 / (r.rss_settled_start.max(1) as f64);
    // Least squares of the resident set against time: the slope a longer run would see,
    // where the two ends only compare a tenth each.
    let n = settled.len() as f64;
    let mean_t = settled.iter().map(|s| s.t_s).sum::<f64>() / n;
    let mean_rss = settled.iter().map(|s| s.rss as f64).sum::<f64>() / n;
    let (mut cov, mut var) = (0.0, 0.0);
    for s in settled {
        cov += (s.t_s - mean_t) * (s.rss as f64 - mean_rss);
        var += (s.t_s - mean_t).powi(2);
    }
    let slope = if var > 0.0 { cov / var } else { 0.0 };
    let mut reasons = Vec::new();
    if rss_drift > FLAT_RSS_DRIFT {
        reasons.push(format!(
            "resident set grew {:+.2} % after warm-up (limit {:.0} %)",
            rss_drift * 100.0,
            FLAT_RSS_DRIFT * 100.0
        ));
    }
    if fds_growth > 0 {
        reasons.push(format!("{fds_growth} more file descriptors open"));
    }
    if threads_growth > 0 {
        reasons.push(format!("{threads_growth} more threads"));
    }
    SoakVerdict {
        flat: reasons.is_empty(),
        rss_drift,
        rss_slope_mb_per_hour: slope * 3600.0 / 1e6,
        fds_growth,
        threads_growth,
        reasons,
        settled_s: settled[settled.len() - 1].t_s - settled[0].t_s,
    }
}

/// The human summary (stderr); across ranks, a line per rank after the run's.
pub fn summary(r: &SoakReport) -> String {
    let mut s = format!(
        "soak: {:.0} s, {} frames, {:.1} GB, {} path flips{}",
        r.duration_s,
        r.frames,
        r.bytes as f64 / 1e9,
        r.toggles,
        r.toggle_unavailable
            .as_deref()
            .map_or(String::new(), |w| format!(" (direct unavailable: {w})")),
    );
    if let (Some(n), Some(in_order)) = (r.presented, r.presented_in_order) {
        s += &format!(
            "; across {} ranks: {n} frames presented, {}",
            r.ranks.len(),
            if in_order { "in order" } else { "NOT in order" }
        );
    }
    if r.ranks.is_empty() {
        s += &format!("\n  {}", settled_line(r));
        s += &format!("\n  verdict{}", verdict_line(r.verdict.as_ref()));
    } else {
        s += &format!(
            "\n  verdict, every rank{}",
            verdict_line(r.verdict.as_ref())
        );
    }
    for k in r.ranks.iter() {
        s += &format!(
            "\n  rank {} (on {}): {} frames rendered, {} samples, {}; verdict{}",
            k.rank,
            k.host,
            k.soak.frames,
            k.soak.samples.len(),
            settled_line(&k.soak),
            verdict_line(k.soak.verdict.as_ref())
        );
    }
    for e in &r.errors {
        s += &format!("\n  error seen: {e}");
    }
    s.push('\n');
    s
}

/// The settled resident set, descriptors, threads and GPU memory of `r`'s samples.
fn settled_line(r: &SoakReport) -> String {
    let mb = |b: u64| b as f64 / 1e6;
    let mut s = format!(
        "RSS settled {:.1} → {:.1} MB ({:+.1} MB), fds {}–{}, threads {}–{}",
        mb(r.rss_settled_start),
        mb(r.rss_settled_end),
        r.rss_growth as f64 / 1e6,
        r.fds_range[0],
        r.fds_range[1],
        r.threads_range[0],
        r.threads_range[1],
    );
    if let Some([lo, hi]) = r.gpu_used_range {
        s += &format!(", GPU used {:.1}–{:.1} MB", mb(lo), mb(hi));
    }
    s
}

/// `: flat (...)`, `: GROWING (...)` or `: none (...)`.
fn verdict_line(v: Option<&SoakVerdict>) -> String {
    match v {
        Some(v) if v.flat => format!(
            ": flat (resident set {:+.2} % after warm-up, slope {:+.1} MB/h; \
             descriptors and threads steady)",
            v.rss_drift * 100.0,
            v.rss_slope_mb_per_hour
        ),
        Some(v) => format!(
            ": GROWING ({}; slope {:+.1} MB/h)",
            v.reasons.join(", "),
            v.rss_slope_mb_per_hour
        ),
        None => ": none (no sample after warm-up: run longer)".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_s: f64, rss: u64, fds: u64) -> SoakSample {
        SoakSample {
            t_s,
            path: PathSel::Host,
            frames: 0,
            bytes: 0,
            rss,
            fds,
            threads: 9,
            gpu_used: None,
            delivered: [0, 0],
            ring_slots: 0,
        }
    }

    #[test]
    fn settled_figures_skip_the_warm_up_and_compare_the_ends() {
        let mut r = SoakReport {
            duration_s: 100.0,
            // Warm-up (first 10 s) grows fast; then a slow leak of 1 MB per 10 s.
            samples: (0..=100)
                .map(|t| {
                    let t = f64::from(t);
                    let rss = if t < 10.0 {
                        (t as u64) * 50_000_000
                    } else {
                        500_000_000 + (t as u64) * 100_000
                    };
                    sample(t, rss, if t < 10.0 { 3 } else { 20 })
                })
                .collect(),
            ..SoakReport::default()
        };
        summarise(&mut r);
        // Settled span 10..100 s: first tenth 10..19 s, last 91..100 s.
        assert_eq!(r.rss_settled_start, 500_000_000 + 19 * 100_000);
        assert_eq!(r.rss_settled_end, 500_000_000 + 100 * 100_000);
        assert_eq!(r.rss_growth, 81 * 100_000);
        assert_eq!(r.fds_range, [20, 20]);
        assert_eq!(r.threads_range, [9, 9]);
        assert_eq!(r.gpu_used_range, None);
        // 8.1 MB on 501.9 MB: 1.6 %, growing; 0.1 MB/s is 360 MB/h.
        let v = r.verdict.clone().expect("a verdict");
        assert!(!v.flat, "{v:?}");
        assert!((v.rss_drift - 8.1 / 501.9).abs() < 1e-9, "{v:?}");
        assert!((v.rss_slope_mb_per_hour - 360.0).abs() < 1e-6, "{v:?}");
        assert_eq!((v.fds_growth, v.threads_growth), (0, 0));
        assert!(summary(&r).contains("verdict: GROWING (resident set grew +1.61 %"));
    }

    #[test]
    fn warm_up_counts_from_the_first_frame_and_a_steady_run_is_flat() {
        // 16 s of shader builds with no frame (memory climbing), then steady but for noise
        // well under 1 %; one more descriptor in the last tenth makes it growing.
        let steady = |fds_at_end: u64| {
            let mut r = SoakReport {
                duration_s: 100.0,
                samples: (0..=100)
                    .map(|t| {
                        let t = f64::from(t);
                        let rss = if t < 16.0 {
                            100_000_000 + (t as u64) * 50_000_000
                        } else {
                            1_000_000_000 + (t as u64 % 3) * 1_000_000
                        };
                        let mut s = sample(t, rss, if t > 95.0 { fds_at_end } else { 20 });
                        s.frames = if t < 16.0 { 0 } else { (t as u64 - 15) * 10 };
                        s
                    })
                    .collect(),
                ..SoakReport::default()
            };
            summarise(&mut r);
            r
        };
        let r = steady(20);
        // Warm-up ends 16 + 8.4 s in: the climb before the first frame is left out.
        assert_eq!(warm_up_end(&r), 16.0 + 8.4);
        let v = r.verdict.as_ref().expect("a verdict");
        assert!(v.flat, "{v:?}");
        assert!(v.rss_drift.abs() <= 0.002, "{v:?}");
        assert!(summary(&r).contains("verdict: flat"));
        let v = steady(21).verdict.expect("a verdict");
        assert!(!v.flat);
        assert_eq!(v.reasons, ["1 more file descriptors open"]);
    }

    /// An hour sampled every 10 s, the path flipping every 300 s (host first), the active
    /// path delivering a frame per sample into rings of 40 slots; each slot's first frame
    /// touches 1 MB. `leak_per_sample` bytes more per sample once both rings are full
    /// (1000 s in). The samples say the rings have `ring_slots` slots.
    fn flipping_run(ring_slots: u64, leak_per_sample: u64) -> SoakReport {
        let slots = 40;
        let mut delivered = [0u64; 2];
        let samples = (0..=360u32)
            .map(|i| {
                if i > 0 {
                    // Host (index 1) in even 300 s spans, direct (index 0) in odd ones.
                    let active = if (i - 1) / 30 % 2 == 0 { 1 } else { 0 };
                    delivered[active] += 1;
                }
                let filling: u64 = delivered.iter().map(|&d| d.min(slots)).sum();
                let leak = u64::from(i.saturating_sub(100)) * leak_per_sample;
                let rss = 1_000_000_000 + filling * 1_000_000 + leak;
                let mut s = sample(f64::from(i) * 10.0, rss, 20);
                s.frames = delivered.iter().sum();
                s.delivered = delivered;
                s.ring_slots = ring_slots;
                s
            })
            .collect();
        let mut r = SoakReport {
            duration_s: 3600.0,
            samples,
            ..SoakReport::default()
        };
        summarise(&mut r);
        r
    }

    #[test]
    fn warm_up_lasts_until_every_slot_of_every_path_s_ring_has_held_a_frame() {
        let r = flipping_run(40, 0);
        // Host fills its 40 slots at 700 s (30 frames in 0–300 s, 10 more from 600 s),
        // direct at 1000 s: warm-up ends there, well after the tenth's 60 s.
        assert_eq!(rings_full_at(&r.samples), Some(1000.0));
        assert_eq!(warm_up_end(&r), 1000.0);
        let v = r.verdict.as_ref().expect("a verdict");
        assert!(v.flat, "{v:?}");
        assert_eq!(v.rss_drift, 0.0, "{v:?}");
        assert_eq!(v.settled_s, 2600.0);
        // The rule before, the tenth alone (as where the ring is not known): the rings
        // filling read as growth.
        let before = flipping_run(0, 0);
        assert_eq!(warm_up_end(&before), 70.0);
        let v = before.verdict.expect("a verdict");
        assert!(!v.flat, "{v:?}");
        assert!(v.rss_slope_mb_per_hour > 30.0, "{v:?}");
    }

    #[test]
    fn a_leak_after_the_rings_are_full_is_still_caught() {
        // 0.5 MB a sample (180 MB/h) from 1000 s on: +130 MB on 1.08 GB by the end.
        let v = flipping_run(40, 500_000).verdict.expect("a verdict");
        assert!(!v.flat, "{v:?}");
        assert!(v.reasons[0].starts_with("resident set grew"), "{v:?}");
        assert!((v.rss_slope_mb_per_hour - 180.0).abs() < 1.0, "{v:?}");
    }

    #[test]
    fn rings_never_full_leave_no_verdict() {
        let r = flipping_run(1000, 0);
        assert_eq!(rings_full_at(&r.samples), None);
        assert_eq!(r.verdict, None);
        assert!(summary(&r).contains("verdict: none"), "{}", summary(&r));
    }

    #[test]
    fn across_ranks_order_and_verdicts_are_every_rank_s() {
        let mut o = Order::default();
        for f in [3, 4, 4, 0, 1] {
            o.saw(f, 5);
        }
        assert_eq!((o.presented, o.out_of_order), (4, 0));
        o.saw(3, 5);
        assert_eq!(o.out_of_order, 1);
        let rank = |rank: usize, fds_at_end: u64| {
            let mut soak = SoakReport {
                duration_s: 100.0,
                samples: (0..=100)
                    .map(|t| {
                        let mut s =
                            sample(f64::from(t), 1 << 30, if t > 95 { fds_at_end } else { 20 });
                        s.frames = u64::from(t as u32);
                        s
                    })
                    .collect(),
                ..SoakReport::default()
            };
            summarise(&mut soak);
            RankSoak {
                rank,
                host: "h".into(),
                soak,
            }
        };
        let flat = every_rank(&[rank(0, 20), rank(1, 20)]).expect("a verdict");
        assert!(flat.flat, "{flat:?}");
        let v = every_rank(&[rank(0, 20), rank(1, 22)]).expect("a verdict");
        assert!(!v.flat);
        assert_eq!(v.reasons, ["rank 1: 2 more file descriptors open"]);
        assert_eq!(v.fds_growth, 2);
        let mut none = rank(2, 20);
        none.soak.verdict = None;
        assert_eq!(every_rank(&[rank(0, 20), none]), None);
    }
}
