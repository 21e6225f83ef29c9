//! The overlay as data: what `dump-state` writes and tests read, taken from the same
//! [`Player`] and [`UiState`] the drawing reads.

use serde::Serialize;

use super::analysis::AnalysisDump;
use super::{
    GpusOverlay, LegendShown, RecordingStatus, UiState, figures_panel, mode_name, transfer_panel,
};
use crate::app::core::{PathSel, Player};
use crate::app::stats::PathFigures;
use crate::pipeline::Direction;

/// Everything the overlay shows, as data (`dump-state` writes it; tests read it).
#[derive(Clone, Debug, Serialize)]
pub struct OverlayDump {
    /// Frame on screen.
    pub shown_frame: Option<u32>,
    /// Playhead.
    pub position: u32,
    /// Frames in the dataset.
    pub frame_count: u32,
    /// Simulation time of the frame on screen.
    pub sim_time: Option<f64>,
    /// Playing or paused.
    pub playing: bool,
    /// "forward" / "reverse".
    pub direction: String,
    /// "loop" / "ping-pong" / "once".
    pub mode: String,
    /// Playback rate (None: as fast as frames arrive).
    pub speed_fps: Option<f64>,
    /// The render mode in use ("shaded", "mip", "iso", "path"; M switches path tracing).
    pub render_mode: String,
    /// Path mode: samples per pixel accumulated in the picture on screen.
    pub path_samples: Option<u32>,
    /// Path mode: samples per pixel the refinement added a second (last second).
    pub path_samples_per_second: Option<f64>,
    /// Path mode: "refining", "converged", "playing" or "view changing".
    pub path_state: Option<String>,
    /// "direct" / "host".
    pub active_path: PathSel,
    /// Label of the path in use ("GDS P2P", "GDS compat", "staged", "cpu-only (io_uring)",
    /// "portable").
    pub path_label: String,
    /// Whether the direct path can run here.
    pub direct_available: bool,
    /// Why not.
    pub direct_unavailable_reason: Option<String>,
    /// Figures of the direct path.
    pub direct: PathFigures,
    /// Figures of the host path.
    pub host: PathFigures,
    /// The overlay's text lines, exactly as drawn.
    pub lines: Vec<String>,
    /// The table comparing both paths, as drawn with the full figures (see
    /// [`super::figure_table`]; with several GPUs, each GPU's rows).
    pub table: Vec<[String; 5]>,
    /// Help card shown.
    pub help_visible: bool,
    /// Large print.
    pub large_print: bool,
    /// Fullscreen.
    pub fullscreen: bool,
    /// Plots shown.
    pub plots: bool,
    /// Compact figures (see [`UiState::compact`]).
    pub compact: bool,
    /// Frames shown since start.
    pub frames_shown: u64,
    /// Latency of the last scrub, ms.
    pub last_scrub_ms: Option<f64>,
    /// Window size.
    pub window_size: [u32; 2],
    /// Render size.
    pub render_size: [u32; 2],
    /// CPU use, percent of one core.
    pub cpu_percent: f64,
    /// GPU memory in use, bytes, where known.
    pub gpu_used: Option<u64>,
    /// Where `gpu_used` comes from: "CUDA", "Vulkan memory budget: heap usage" or "wgpu
    /// allocator".
    pub gpu_memory_source: Option<String>,
    /// The better sources that gave nothing here, and why.
    pub gpu_memory_absent: Vec<String>,
    /// GPU buffers the player allocated for frames, bytes.
    pub player_gpu_buffers: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// Frame faults since the start (read errors, time-outs, damaged headers).
    pub fault_count: u64,
    /// Frames marked damaged on the timeline now.
    pub damaged_frames: Vec<u32>,
    /// The last message shown (e.g. why a toggle was refused).
    pub message: Option<String>,
    /// Seconds since that message was set (it shows for 6 s).
    pub message_age_s: Option<f64>,
    /// Attribute names and whether each is shown.
    pub attributes: Vec<(String, bool)>,
    /// Every attribute of the dataset (manifest order) and whether it is shown: what the
    /// overlay's attribute list offers.
    pub dataset_attributes: Vec<(String, bool)>,
    /// The panels drawn in the last frame: name → `[x0, y0, x1, y1]`, window pixels.
    pub panels: std::collections::BTreeMap<String, [f32; 4]>,
    /// The plots are on but there was no room for them.
    pub plots_no_room: bool,
    /// The help card hides the figures and plots (no room for it beside them).
    pub help_alone: bool,
    /// Frames since the start in which two panels painted over each other.
    pub overlap_frames: u64,
    /// The first such overlap: which panels, where (window pixels).
    pub first_overlap: Option<String>,
    /// The window's coordinator (one GPU or several): per GPU and in total, and the
    /// presentation order; `None` for a player with no coordinator.
    pub gpus: Option<GpusOverlay>,
    /// Whether the clean view (U) is on.
    pub clean_view: bool,
    /// See [`UiState::legend`].
    pub legend: LegendShown,
    /// See [`UiState::recording`].
    pub recording: RecordingStatus,
    /// Slices, the probe and the line plot.
    pub analysis: AnalysisDump,
    /// The looks: what each look box says and the slot the transfer panel edits.
    pub looks: transfer_panel::LooksDump,
}

/// The state as data (see [`OverlayDump`]).
pub fn dump(player: &Player, ui: &UiState) -> OverlayDump {
    let sel = player.active_path();
    let names = player.attribute_names();
    let mut d = dump_one(player, ui, sel, names);
    if let Some(o) = &ui.gpus {
        // GPU 0's player sees its own frames only: the timeline is the several GPUs'.
        d.shown_frame = o.shown_frame;
        d.position = o.position;
        d.frame_count = o.frame_count;
        d.sim_time = o
            .shown_frame
            .and_then(|f| o.frame_times.get(f as usize).copied());
        d.playing = o.playing;
        d.speed_fps = o.speed_fps;
        d.direction = direction_name(o.direction).into();
        d.mode = mode_name(o.mode).into();
        d.last_scrub_ms = o.last_scrub_ms;
        d.damaged_frames = o.damaged.clone();
        d.last_error = o.last_error.clone();
        d.gpus = Some(o.clone());
    }
    d
}

fn dump_one(player: &Player, ui: &UiState, sel: PathSel, names: Vec<String>) -> OverlayDump {
    let shown = player.shown_frame();
    // The figures panel exactly as drawn: one GPU's, or several GPUs' with their rows.
    let figures = figures_panel(player, ui);
    OverlayDump {
        shown_frame: shown,
        position: player.position(),
        frame_count: player.frame_count(),
        sim_time: shown.map(|s| player.frame_time(s)),
        playing: player.is_playing(),
        direction: direction_name(player.direction()).into(),
        mode: mode_name(player.mode()).into(),
        speed_fps: player.speed(),
        render_mode: crate::app::figures::render_mode_name(player.render_mode()).into(),
        path_samples: player.tracer_state().map(|_| player.tracer_samples()),
        path_samples_per_second: player
            .tracer_state()
            .map(|_| player.tracer_samples_per_second()),
        path_state: player.tracer_state().map(str::to_string),
        active_path: sel,
        path_label: player.path_report(sel).label,
        direct_available: player.direct_unavailable().is_none(),
        direct_unavailable_reason: player.direct_unavailable().map(str::to_string),
        direct: player.figures(PathSel::Direct),
        host: player.figures(PathSel::Host),
        lines: figures.lines,
        table: figures.table,
        help_visible: ui.help,
        large_print: ui.large_print,
        fullscreen: ui.fullscreen,
        plots: ui.plots,
        compact: ui.compact,
        frames_shown: ui.frames_shown,
        last_scrub_ms: player.last_scrub_ms(),
        window_size: [ui.window_size.0, ui.window_size.1],
        render_size: [player.size().0, player.size().1],
        cpu_percent: ui.cpu_percent,
        gpu_used: ui.gpu_memory.as_ref().map(|m| m.used),
        gpu_memory_source: ui.gpu_memory.as_ref().map(|m| m.source.to_string()),
        gpu_memory_absent: ui
            .gpu_memory
            .as_ref()
            .map_or_else(Vec::new, |m| m.absent.clone()),
        player_gpu_buffers: player.gpu_buffer_bytes(),
        last_error: player.last_error().map(str::to_string),
        fault_count: player.fault_count(),
        damaged_frames: player.damaged_frames().keys().copied().collect(),
        message: ui.message.as_ref().map(|(m, _)| m.clone()),
        message_age_s: ui
            .message
            .as_ref()
            .map(|(_, at)| at.elapsed().as_secs_f64()),
        dataset_attributes: player.dataset_attributes(),
        attributes: names
            .into_iter()
            .zip(&player.view().attributes)
            .map(|(n, a)| (n, a.as_ref().is_some_and(|a| a.enabled)))
            .collect(),
        panels: ui
            .layout
            .rects
            .iter()
            .map(|(n, r)| (n.to_string(), *r))
            .collect(),
        plots_no_room: ui.layout.plots_no_room,
        help_alone: ui.layout.help_alone,
        overlap_frames: ui.layout.overlap_frames,
        first_overlap: ui.layout.first_overlap.clone(),
        gpus: None,
        clean_view: ui.clean,
        legend: ui.legend.clone(),
        recording: ui.recording.clone(),
        analysis: ui.analysis.dump(),
        looks: transfer_panel::dump(player, &ui.tf_panel, &ui.presets),
    }
}

/// A direction as the state dump names it.
fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Forward => "forward",
        Direction::Reverse => "reverse",
    }
}
