//! Long runs (`supercell play --headless --soak 2h`): the kiosk's workload without a window,
//! and harder: playback loops as fast as frames arrive (not at the scene's rate), the camera
//! flies the scene's path, the path flips on a timer, and the
//! process's memory, open file descriptors and threads (and the GPU's memory, where CUDA can
//! say) are sampled, so a booth's "flat over hours" can be checked rather than hoped for.

use std::time::{Duration, Instant};

use serde::Serialize;

use super::core::{PathSel, PlayError, Player};
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
#[derive(Clone, Debug, Serialize, PartialEq)]
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
}

/// What a long run found. "Settled" figures leave out the first tenth of the run (at most a
/// minute), while allocators and caches warm up.
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
    /// Every sample.
    pub samples: Vec<SoakSample>,
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

/// Runs the long run on `player`; `progress` is called after each sample.
pub fn run(
    player: &mut Player,
    opts: &SoakOptions,
    mut progress: impl FnMut(&SoakSample),
) -> Result<SoakReport, PlayError> {
    // One CUDA handle for the whole run rather than one per sample (as `gpumem` opens), so
    // the sampling itself holds nothing that comes and goes. Without CUDA, the player's
    // device says what it can (Vulkan budget, wgpu allocator).
    let cuda = crate::gpu::cuda_probe()
        .ok()
        .and_then(|()| crate::gpu::Gpu::open(0).ok());
    let gpu_used = |p: &Player| match &cuda {
        Some(g) => g
            .mem_info()
            .ok()
            .map(|(free, total)| total.saturating_sub(free) as u64),
        None => super::gpumem::gpu_memory(p.device()).map(|m| m.used),
    };
    player.set_playing(true);
    player.set_speed(None);
    let start = Instant::now();
    let mut next_sample = start;
    let mut next_toggle = opts.toggle_every.map(|d| start + d);
    let mut report = SoakReport::default();
    let totals = |p: &Player| {
        let (d, h) = (p.figures(PathSel::Direct), p.figures(PathSel::Host));
        (d.frames_rendered + h.frames_rendered, d.bytes + h.bytes)
    };
    loop {
        let now = Instant::now();
        let t = now.duration_since(start);
        if player.has_camera_path() {
            let cam = player.scene_camera_at(t.as_secs_f64());
            player.view_mut().camera = cam;
        }
        if next_toggle.is_some_and(|at| now >= at) {
            next_toggle = opts.toggle_every.map(|d| now + d);
            match player.toggle_path() {
                Ok(_) => report.toggles += 1,
                Err(why) => {
                    report.toggle_unavailable = Some(why);
                    next_toggle = None;
                }
            }
        }
        if now >= next_sample || t >= opts.duration {
            let (f, b) = totals(player);
            let s = SoakSample {
                t_s: t.as_secs_f64(),
                path: player.active_path(),
                frames: f,
                bytes: b,
                rss: rss_bytes(),
                fds: open_fds(),
                threads: thread_count(),
                gpu_used: gpu_used(player),
            };
            progress(&s);
            report.samples.push(s);
            // After a stall, sample on the grid again rather than catching up in a burst.
            next_sample = (next_sample + opts.sample_every).max(now);
            if let Some(e) = player.last_error()
                && !report.errors.iter().any(|x| x == e)
            {
                report.errors.push(e.to_string());
            }
        }
        if t >= opts.duration {
            break;
        }
        match player.tick() {
            Ok(t) if t.shown.is_none() => player.wait(Duration::from_millis(2)),
            Ok(_) => {}
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
    if let Some(last) = report.samples.last() {
        report.frames = last.frames;
        report.bytes = last.bytes;
    }
    report.paths = [PathSel::Direct, PathSel::Host]
        .into_iter()
        .filter(|&p| player.figures(p).frames_rendered > 0)
        .map(|p| (p, player.figures(p)))
        .collect();
    summarise(&mut report);
    Ok(report)
}

/// When warm-up ends: a tenth of the run after the first frame was shown (at most a
/// minute). Counting from the first frame, not the start, leaves out the shader builds a
/// software adapter makes before it (16 s on lavapipe, with nothing else moving).
fn warm_up_end(r: &SoakReport) -> f64 {
    let first_frame = r
        .samples
        .iter()
        .find(|s| s.frames > 0)
        .map_or(0.0, |s| s.t_s);
    first_frame + ((r.duration_s - first_frame) / 10.0).min(60.0)
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

/// The human summary (stderr).
pub fn summary(r: &SoakReport) -> String {
    let mb = |b: u64| b as f64 / 1e6;
    let mut s = format!(
        "soak: {:.0} s, {} frames, {:.1} GB, {} path flips{}\n  RSS settled {:.1} → {:.1} MB ({:+.1} MB), fds {}–{}, threads {}–{}",
        r.duration_s,
        r.frames,
        r.bytes as f64 / 1e9,
        r.toggles,
        r.toggle_unavailable
            .as_deref()
            .map_or(String::new(), |w| format!(" (direct unavailable: {w})")),
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
    match &r.verdict {
        Some(v) if v.flat => {
            s += &format!(
                "\n  verdict: flat (resident set {:+.2} % after warm-up, slope {:+.1} MB/h; \
                 descriptors and threads steady)",
                v.rss_drift * 100.0,
                v.rss_slope_mb_per_hour
            )
        }
        Some(v) => {
            s += &format!(
                "\n  verdict: GROWING ({}; slope {:+.1} MB/h)",
                v.reasons.join(", "),
                v.rss_slope_mb_per_hour
            )
        }
        None => s += "\n  verdict: none (no sample after warm-up: run longer)",
    }
    for e in &r.errors {
        s += &format!("\n  error seen: {e}");
    }
    s.push('\n');
    s
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
}
