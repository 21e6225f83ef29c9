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
    /// Each path's figures over the whole run (while it was active).
    pub paths: Vec<(PathSel, super::stats::PathFigures)>,
    /// Every sample.
    pub samples: Vec<SoakSample>,
}

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

/// Fills the settled figures from the samples.
fn summarise(r: &mut SoakReport) {
    let warm = (r.duration_s / 10.0).min(60.0);
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
    }
}
