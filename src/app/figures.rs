//! The overlay's figures as text: rates with their now/average/peak columns, the table of
//! both paths, the compact lines of small windows, and the fault lines. The overlay draws
//! them and dumps them for tests, so both read the same words.

use serde::Serialize;

use super::core::Player;
use super::gpumem::GpuMemory;
use super::stats::PathFigures;
use crate::pipeline::{Direction, PlayMode};

pub(super) fn mode_name(m: PlayMode) -> &'static str {
    match m {
        PlayMode::Loop => "loop",
        PlayMode::PingPong => "ping-pong",
        PlayMode::Once => "once",
    }
}

/// A render mode as scenes spell it (`mode = "..."`).
pub(super) fn render_mode_name(m: crate::render::Mode) -> &'static str {
    use crate::render::Mode;
    match m {
        Mode::Shaded => "shaded",
        Mode::Mip => "mip",
        Mode::Isosurface => "iso",
        Mode::Path => "path",
    }
}

/// The render line: the mode and, path-tracing, the samples per pixel accumulated against
/// the cap, the refinement's samples per pixel a second, what it is doing and whether the
/// picture is denoised (`render: path   37 / 4096 spp   120 spp/s   refining   denoised`).
pub fn render_line(player: &Player) -> String {
    let mode = render_mode_name(player.render_mode());
    match player.tracer_state() {
        Some(state) => format!(
            "render: {mode}   {} / {} spp   {:.0} spp/s   {state}   {}",
            player.tracer_samples(),
            player.view().settings.path_max_samples,
            player.tracer_samples_per_second(),
            if player.tracer_denoise() {
                "denoised"
            } else {
                "raw (N: denoise)"
            },
        ),
        None => format!("render: {mode}   (M: path tracing)"),
    }
}

pub(super) fn bytes_h(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}

/// A rate as the overlay writes it: two decimals, more for small values (so that 0.0017 GB/s
/// does not read as 0), fewer for large ones. Rounding keeps the order of values, so a peak
/// at least its **now** never reads below it.
pub fn rate_text(x: f64) -> String {
    let x = if x.is_finite() { x.max(0.0) } else { 0.0 };
    let decimals = if x >= 100.0 {
        0
    } else if x >= 10.0 {
        1
    } else if x >= 0.1 || x == 0.0 {
        2
    } else {
        // Two significant digits, at most six decimals.
        ((-x.log10()).ceil() as usize + 1).min(6)
    };
    format!("{x:.decimals$}")
}

/// What a peak reads before there is one (the ring is still filling, or no window has
/// passed since it filled).
pub const NO_PEAK: &str = "-";

/// A peak as the figures write it: [`rate_text`], or [`NO_PEAK`] before there is one.
pub fn peak_text(peak: Option<f64>) -> String {
    peak.map_or_else(|| NO_PEAK.to_string(), rate_text)
}

/// One rate of a path in words: its name and its **now**, **avg** and **peak** readings (see
/// [`super::stats`] for the definitions), each as [`rate_text`] writes it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RateRow {
    /// "frames/s rendered", "frames/s delivered" or "GB/s".
    pub name: &'static str,
    /// The last second (stretched over the last two frames where they come slower).
    pub now: String,
    /// Over the path's active time.
    pub avg: String,
    /// Highest **now** reading after the warm-up; [`NO_PEAK`] before there is one.
    pub peak: String,
}

/// A path's three rates in words (the overlay's lines and its table both come from this).
pub fn rate_rows(f: &PathFigures) -> [RateRow; 3] {
    let row = |name, now, avg, peak: Option<f64>| RateRow {
        name,
        now: rate_text(now),
        avg: rate_text(avg),
        peak: peak_text(peak),
    };
    [
        row(
            "frames/s rendered",
            f.rendered_fps_now,
            f.rendered_fps,
            f.rendered_fps_peak,
        ),
        row(
            "frames/s delivered",
            f.delivered_fps_now,
            f.delivered_fps,
            f.delivered_fps_peak,
        ),
        row("GB/s", f.gbps_now, f.gbps_mean, f.gbps_peak),
    ]
}

/// The lines of the active path's rates: `NAME  NOW now  AVG avg  PEAK peak`.
pub fn rate_lines(f: &PathFigures) -> Vec<String> {
    rate_rows(f)
        .iter()
        .map(|r| {
            format!(
                "{:<18} {} now   {} avg   {} peak",
                r.name, r.now, r.avg, r.peak
            )
        })
        .collect()
}

/// The warm-up in short: `warm-up 1.2 s, 8 frames`, or `warm-up: ring filling (3 frames)`
/// while it lasts.
pub fn warm_up_text(f: &PathFigures) -> String {
    let frames = f.warm_up_frames;
    let plural = if frames == 1 { "" } else { "s" };
    match f.warm_up_s {
        Some(s) => format!("warm-up {s:.1} s, {frames} frame{plural}"),
        None => format!("warm-up: ring filling ({frames} frame{plural})"),
    }
}

/// The warm-up line: how long the path's ring took to fill and with what, apart from the
/// rates (its frames count in **avg**, not in **peak**).
pub fn warm_up_line(f: &PathFigures) -> String {
    let short = warm_up_text(f);
    match f.warm_up_s {
        Some(s) if s > 0.0 => format!(
            "{short}, {} ({} GB/s; not in peak)",
            bytes_h(f.warm_up_bytes as f64),
            rate_text(f.warm_up_bytes as f64 / s / 1e9)
        ),
        Some(_) => short,
        None => format!("{short}: peak waits for it"),
    }
}

/// How the playback rate reads: a target the player aims at (`target 24 frames/s`), not a
/// measured rate; empty at maximum speed.
pub fn target_text(speed_fps: Option<f64>) -> String {
    speed_fps.map_or_else(String::new, |s| format!("target {s:.0} frames/s"))
}

/// The compact figures (small windows): the active path and its label, its rates as
/// `NAME NOW (avg AVG)`, and the frame on screen.
pub fn compact_lines(player: &Player, timeline: &TimelineFacts) -> Vec<String> {
    let sel = player.active_path();
    let f = player.figures(sel);
    let mut v = vec![format!(
        "{} path: {}",
        sel.name().to_uppercase(),
        player.path_report(sel).label
    )];
    v.extend(
        rate_rows(&f)
            .iter()
            .map(|r| format!("{} {} (avg {})", r.name, r.now, r.avg)),
    );
    if player.direct_unavailable().is_some() {
        // The reason is long; the full figures (V) give it.
        v.push("direct path unavailable (V: why)".to_string());
    }
    v.push(compact_frame_line(timeline));
    if player.tracer_state().is_some() {
        v.push(render_line(player));
    }
    v.extend(fault_lines(player));
    v
}

/// The table comparing both paths: a header row (`["", "direct avg", "direct peak", "host
/// avg", "host peak"]`), then one row per rate (`["frames/s rendered", ...]`); "n/a" where
/// the direct path cannot run.
pub fn figure_table(direct: &PathFigures, host: &PathFigures, direct_ok: bool) -> Vec<[String; 5]> {
    let mut t =
        vec![["", "direct avg", "direct peak", "host avg", "host peak"].map(str::to_string)];
    let na = || "n/a".to_string();
    for (d, h) in rate_rows(direct).into_iter().zip(rate_rows(host)) {
        let (da, dp) = if direct_ok {
            (d.avg, d.peak)
        } else {
            (na(), na())
        };
        t.push([d.name.to_string(), da, dp, h.avg, h.peak]);
    }
    t
}

/// The overlay's figures as text lines (drawn, and dumped for tests).
pub fn stats_lines(
    player: &Player,
    timeline: &TimelineFacts,
    cpu_percent: f64,
    gpu_memory: Option<&GpuMemory>,
) -> Vec<String> {
    let sel = player.active_path();
    let f = player.figures(sel);
    let rep = player.path_report(sel);
    let mut v = vec![format!("{} path: {}", sel.name().to_uppercase(), rep.label)];
    v.extend(rate_lines(&f));
    v.push(warm_up_line(&f));
    v.extend([
        format!(
            "{}/frame   {} in flight   latency {:.0} / {:.0} ms (p50/p99)",
            bytes_h(player.mean_frame_bytes()),
            player.in_flight(),
            f.latency_p50_ms,
            f.latency_p99_ms
        ),
        cpu_line(cpu_percent, gpu_memory, player),
    ]);
    if let Some(fb) = &rep.fallback {
        v.push(format!("fallback: {fb}"));
    }
    if let Some(why) = player.direct_unavailable() {
        v.push(format!("direct path unavailable: {why}"));
    }
    v.push(frame_line(timeline));
    v.push(render_line(player));
    v.extend(fault_lines(player));
    v
}

/// The overlay's fault lines: how many, which frames are damaged, the latest with its
/// reason, and slots still held by reads that did not answer. Empty while all is well.
pub fn fault_lines(player: &Player) -> Vec<String> {
    let mut v = Vec::new();
    if player.fault_count() == 0 {
        return v;
    }
    let damaged = player.damaged_frames();
    v.push(format!(
        "faults: {}   damaged frames: {}   recovered: {}",
        player.fault_count(),
        damaged.len(),
        player.recovered_frames()
    ));
    if let Some(f) = player.faults().last() {
        let lane = f.lane.map_or_else(String::new, |l| format!(", lane {l}"));
        let mut msg = f.message.clone();
        if msg.chars().count() > 110 {
            msg = msg.chars().take(107).collect::<String>() + "...";
        }
        v.push(format!(
            "frame {} damaged ({}{lane}): {msg}",
            f.frame,
            f.kind.name()
        ));
    }
    let held = player.held_slots();
    if held > 0 {
        v.push(format!(
            "{held} slot(s) held by reads that did not answer (freed when they end)"
        ));
    }
    v
}

/// The CPU and GPU memory line: the process's CPU use, the display GPU's memory in use
/// (where known, with its source) and the frames' buffers of `player`.
pub fn cpu_line(cpu_percent: f64, gpu_memory: Option<&GpuMemory>, player: &Player) -> String {
    format!(
        "CPU {:.0}%   GPU memory {}{}",
        cpu_percent,
        gpu_memory.map_or_else(
            || "n/a".to_string(),
            |m| format!("{} ({})", bytes_h(m.used as f64), m.source)
        ),
        format_args!(" (frames {})", bytes_h(player.gpu_buffer_bytes() as f64))
    )
}

/// Where the timeline stands, as the frame lines write it: the one player's
/// ([`TimelineFacts::of_player`]) or the coordinator's, whose player (one GPU through it,
/// or several) may be a frame ahead of the screen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimelineFacts {
    /// The frame on screen.
    pub shown: Option<u32>,
    /// Frames on the timeline.
    pub frame_count: u32,
    /// Simulation time of the frame on screen (0 with none).
    pub time: f64,
    /// Playing or paused.
    pub playing: bool,
    /// The timeline's direction.
    pub direction: Direction,
    /// Its end-of-timeline behaviour.
    pub mode: PlayMode,
    /// Its playback rate (`None`: as fast as frames are finished).
    pub speed: Option<f64>,
}

impl TimelineFacts {
    /// A player playing its own timeline (no coordinator above it).
    pub fn of_player(player: &Player) -> TimelineFacts {
        let shown = player.shown_frame();
        TimelineFacts {
            shown,
            frame_count: player.frame_count(),
            time: shown.map_or(0.0, |s| player.frame_time(s)),
            playing: player.is_playing(),
            direction: player.direction(),
            mode: player.mode(),
            speed: player.speed(),
        }
    }
}

/// The full figures' frame line: `frame 5 / 11   t = 1.0 s   playing loop   target ...`.
pub fn frame_line(t: &TimelineFacts) -> String {
    let line = format!(
        "frame {} / {}   t = {:.1} s   {}{} {}   {}",
        t.shown.map_or_else(|| "-".to_string(), |s| s.to_string()),
        t.frame_count.saturating_sub(1),
        t.time,
        if t.playing { "playing" } else { "paused" },
        if t.direction == Direction::Reverse {
            " reverse"
        } else {
            ""
        },
        mode_name(t.mode),
        target_text(t.speed)
    );
    line.trim_end().to_string()
}

/// The compact figures' frame line: `frame 5 / 11`, with `   paused` while paused.
pub fn compact_frame_line(t: &TimelineFacts) -> String {
    format!(
        "frame {} / {}{}",
        t.shown.map_or_else(|| "-".to_string(), |s| s.to_string()),
        t.frame_count.saturating_sub(1),
        if t.playing { "" } else { "   paused" },
    )
}
