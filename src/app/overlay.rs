//! The egui overlay: live figures of both paths, plots, the timeline, attribute and
//! transfer-function switches, and the help card. Drawing only reads the [`Player`]; what
//! the user asks for comes back as [`UiRequest`]s that the window applies.

use std::time::Instant;

use serde::Serialize;

use super::core::{PathSel, Player};
use super::script::Action;
use super::stats::PathFigures;
use crate::pipeline::{Direction, PlayMode};

/// Transfer-function presets offered per attribute.
pub const PRESETS: [&str; 6] = [
    "cloud",
    "rain",
    "wind_speed",
    "vorticity",
    "vertical_velocity",
    "grey",
];

/// Overlay state kept between frames.
#[derive(Clone, Debug)]
pub struct UiState {
    /// Help card shown.
    pub help: bool,
    /// Plots shown.
    pub plots: bool,
    /// Large print (zoomed overlay).
    pub large_print: bool,
    /// Fullscreen.
    pub fullscreen: bool,
    /// Kiosk mode (no timeline, no settings).
    pub kiosk: bool,
    /// A short message and when it appeared (e.g. why the direct path is unavailable).
    pub message: Option<(String, Instant)>,
    /// The timeline slider's value.
    pub slider: u32,
    /// Whether the slider is being dragged.
    pub dragging: bool,
    /// CPU use of the process, percent of one core (last second).
    pub cpu_percent: f64,
    /// GPU memory in use (CUDA's view), where known.
    pub gpu_used: Option<u64>,
    /// Frames shown since start.
    pub frames_shown: u64,
    /// Preset index per attribute slot.
    pub presets: Vec<usize>,
    /// Window size, physical pixels.
    pub window_size: (u32, u32),
    /// Seconds of history in the plots.
    pub plot_window_s: f64,
}

/// Something the user asked for in the overlay.
#[derive(Clone, Debug, PartialEq)]
pub enum UiRequest {
    /// As the key would.
    Action(Action),
    /// Choose a path.
    SetPath(PathSel),
    /// Jump to a frame.
    Scrub(u32),
    /// Slider drag started or ended.
    Dragging(bool),
    /// Playback rate.
    SetSpeed(Option<f64>),
    /// End-of-timeline behaviour.
    SetMode(PlayMode),
    /// Attribute slot on/off.
    SetAttribute(usize, bool),
    /// Transfer-function preset of an attribute slot (index into [`PRESETS`]).
    SetPreset(usize, usize),
}

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
    /// Help card shown.
    pub help_visible: bool,
    /// Large print.
    pub large_print: bool,
    /// Fullscreen.
    pub fullscreen: bool,
    /// Plots shown.
    pub plots: bool,
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
    /// GPU memory in use (CUDA's view), bytes.
    pub gpu_used: Option<u64>,
    /// GPU buffers the player allocated for frames, bytes.
    pub player_gpu_buffers: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
    /// The last message shown (e.g. why a toggle was refused).
    pub message: Option<String>,
    /// Attribute names and whether each is shown.
    pub attributes: Vec<(String, bool)>,
}

fn mode_name(m: PlayMode) -> &'static str {
    match m {
        PlayMode::Loop => "loop",
        PlayMode::PingPong => "ping-pong",
        PlayMode::Once => "once",
    }
}

fn bytes_h(b: f64) -> String {
    if b >= 1e9 {
        format!("{:.2} GB", b / 1e9)
    } else {
        format!("{:.1} MB", b / 1e6)
    }
}

/// The overlay's figures as text lines (drawn, and dumped for tests).
pub fn stats_lines(player: &Player, ui: &UiState) -> Vec<String> {
    let sel = player.active_path();
    let f = player.figures(sel);
    let rep = player.path_report(sel);
    let mut v = vec![
        format!("{} path: {}", sel.name().to_uppercase(), rep.label),
        format!(
            "{:.1} frames/s rendered   {:.1} frames/s delivered",
            f.rendered_fps_now, f.delivered_fps_now
        ),
        format!(
            "{:.2} GB/s now   {:.2} avg   {:.2} peak",
            f.gbps_now, f.gbps_mean, f.gbps_peak
        ),
        format!(
            "{}/frame   {} in flight   latency {:.0} / {:.0} ms (p50/p99)",
            bytes_h(player.mean_frame_bytes()),
            player.in_flight(),
            f.latency_p50_ms,
            f.latency_p99_ms
        ),
        format!(
            "CPU {:.0}%   GPU memory {}{}",
            ui.cpu_percent,
            ui.gpu_used
                .map_or_else(|| "n/a".to_string(), |b| bytes_h(b as f64)),
            format_args!(" (frames {})", bytes_h(player.gpu_buffer_bytes() as f64))
        ),
    ];
    if let Some(fb) = &rep.fallback {
        v.push(format!("fallback: {fb}"));
    }
    if let Some(why) = player.direct_unavailable() {
        v.push(format!("direct path unavailable: {why}"));
    }
    let shown = player.shown_frame();
    v.push(format!(
        "frame {} / {}   t = {:.1} s   {}{} {}{}",
        shown.map_or_else(|| "-".to_string(), |s| s.to_string()),
        player.frame_count().saturating_sub(1),
        shown.map_or(0.0, |s| player.frame_time(s)),
        if player.is_playing() {
            "playing"
        } else {
            "paused"
        },
        if player.direction() == Direction::Reverse {
            " reverse"
        } else {
            ""
        },
        mode_name(player.mode()),
        player
            .speed()
            .map_or_else(String::new, |s| format!(" at {s:.0} frames/s"))
    ));
    v
}

/// The state as data (see [`OverlayDump`]).
pub fn dump(player: &Player, ui: &UiState) -> OverlayDump {
    let sel = player.active_path();
    let shown = player.shown_frame();
    let names = player.attribute_names();
    OverlayDump {
        shown_frame: shown,
        position: player.position(),
        frame_count: player.frame_count(),
        sim_time: shown.map(|s| player.frame_time(s)),
        playing: player.is_playing(),
        direction: match player.direction() {
            Direction::Forward => "forward".into(),
            Direction::Reverse => "reverse".into(),
        },
        mode: mode_name(player.mode()).into(),
        speed_fps: player.speed(),
        active_path: sel,
        path_label: player.path_report(sel).label,
        direct_available: player.direct_unavailable().is_none(),
        direct_unavailable_reason: player.direct_unavailable().map(str::to_string),
        direct: player.figures(PathSel::Direct),
        host: player.figures(PathSel::Host),
        lines: stats_lines(player, ui),
        help_visible: ui.help,
        large_print: ui.large_print,
        fullscreen: ui.fullscreen,
        plots: ui.plots,
        frames_shown: ui.frames_shown,
        last_scrub_ms: player.last_scrub_ms(),
        window_size: [ui.window_size.0, ui.window_size.1],
        render_size: [player.size().0, player.size().1],
        cpu_percent: ui.cpu_percent,
        gpu_used: ui.gpu_used,
        player_gpu_buffers: player.gpu_buffer_bytes(),
        last_error: player.last_error().map(str::to_string),
        message: ui.message.as_ref().map(|(m, _)| m.clone()),
        attributes: names
            .into_iter()
            .zip(&player.view().attributes)
            .map(|(n, a)| (n, a.as_ref().is_some_and(|a| a.enabled)))
            .collect(),
    }
}

const HELP: &[(&str, &str)] = &[
    ("Space", "play / pause"),
    ("← →", "step one frame"),
    ("Home / End", "first / last frame"),
    ("R", "reverse"),
    ("L", "loop / ping-pong / once"),
    ("D", "direct paths on / off"),
    ("F", "fullscreen"),
    ("B", "large print"),
    ("P", "plots"),
    ("1-4", "attribute on / off"),
    ("T", "next colour preset (attribute 1)"),
    ("C", "reset camera"),
    ("drag / right-drag / wheel", "orbit / pan / zoom"),
    ("W A S X, + -", "orbit, zoom"),
    ("H", "this help"),
    ("Esc", "quit"),
];

/// Draws the overlay over the image `image` (the renderer's output) and collects requests.
pub fn draw(
    ctx: &egui::Context,
    player: &Player,
    ui_state: &mut UiState,
    image: Option<egui::TextureId>,
    out: &mut Vec<UiRequest>,
) {
    use egui::{Align2, Color32, RichText, pos2, vec2};
    let screen = ctx.content_rect();
    if let Some(tex) = image {
        ctx.layer_painter(egui::LayerId::background()).image(
            tex,
            screen,
            egui::Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0)),
            Color32::WHITE,
        );
    }
    let panel = egui::Frame::new()
        .fill(Color32::from_black_alpha(150))
        .inner_margin(10.0)
        .corner_radius(6.0);
    let lines = stats_lines(player, ui_state);
    let now = player.clock();

    // Figures, top left.
    egui::Area::new(egui::Id::unique("supercell-stats"))
        .anchor(Align2::LEFT_TOP, vec2(12.0, 12.0))
        .show(ctx, |ui| {
            panel.show(ui, |ui| {
                for (i, l) in lines.iter().enumerate() {
                    let t = RichText::new(l).color(Color32::WHITE).monospace();
                    ui.label(if i == 0 {
                        t.size(20.0).strong()
                    } else {
                        t.size(14.0)
                    });
                }
                ui.add_space(6.0);
                // Both modes side by side.
                egui::Grid::new("supercell-both")
                    .striped(false)
                    .show(ui, |ui| {
                        let hdr = |s: &str| RichText::new(s).color(Color32::LIGHT_GRAY).monospace();
                        ui.label(hdr(""));
                        ui.label(hdr("direct"));
                        ui.label(hdr("host"));
                        ui.end_row();
                        let d = player.figures(PathSel::Direct);
                        let h = player.figures(PathSel::Host);
                        let direct_ok = player.direct_unavailable().is_none();
                        let cell = |ok: bool, s: String| {
                            RichText::new(if ok { s } else { "n/a".into() })
                                .color(Color32::WHITE)
                                .monospace()
                        };
                        for (name, dv, hv) in [
                            ("GB/s avg", d.gbps_mean, h.gbps_mean),
                            ("GB/s peak", d.gbps_peak, h.gbps_peak),
                            ("frames/s", d.rendered_fps, h.rendered_fps),
                        ] {
                            ui.label(hdr(name));
                            ui.label(cell(direct_ok, format!("{dv:.2}")));
                            ui.label(cell(true, format!("{hv:.2}")));
                            ui.end_row();
                        }
                    });
                let direct_ok = player.direct_unavailable().is_none();
                let mut direct_on = player.active_path() == PathSel::Direct;
                let resp = ui.add_enabled(
                    direct_ok,
                    egui::Checkbox::new(&mut direct_on, "direct paths (D)"),
                );
                if resp.changed() {
                    out.push(UiRequest::SetPath(if direct_on {
                        PathSel::Direct
                    } else {
                        PathSel::Host
                    }));
                }
                if let Some(why) = player.direct_unavailable() {
                    resp.on_disabled_hover_text(why);
                }
                if let Some((m, at)) = &ui_state.message
                    && at.elapsed().as_secs_f64() < 6.0
                {
                    ui.label(RichText::new(m).color(Color32::YELLOW));
                }
            });
        });

    // Plots, top right.
    if ui_state.plots {
        egui::Area::new(egui::Id::unique("supercell-plots"))
            // Kiosk: bottom right, clear of the large-print figures (no timeline there).
            .anchor(
                if ui_state.kiosk {
                    Align2::RIGHT_BOTTOM
                } else {
                    Align2::RIGHT_TOP
                },
                vec2(-12.0, if ui_state.kiosk { -12.0 } else { 12.0 }),
            )
            .show(ctx, |ui| {
                panel.show(ui, |ui| {
                    let w = ui_state.plot_window_s;
                    let series = |sel: PathSel, gb: bool| -> Vec<[f64; 2]> {
                        let s = player.stats(sel);
                        let v = if gb {
                            s.gbps_series(now, w)
                        } else {
                            s.fps_series(now, w)
                        };
                        v.into_iter().map(|(t, y)| [t - now, y]).collect()
                    };
                    for (title, gb) in [("GB/s", true), ("frames/s", false)] {
                        ui.label(RichText::new(title).color(Color32::WHITE).strong());
                        egui_plot::Plot::new(title)
                            .width(360.0)
                            .height(120.0)
                            .include_x(-w)
                            .include_x(0.0)
                            .include_y(0.0)
                            .allow_drag(false)
                            .allow_zoom(false)
                            .allow_scroll(false)
                            .legend(egui_plot::Legend::default())
                            .show(ui, |p| {
                                p.line(
                                    egui_plot::Line::new("direct", series(PathSel::Direct, gb))
                                        .color(Color32::from_rgb(120, 220, 120)),
                                );
                                p.line(
                                    egui_plot::Line::new("host", series(PathSel::Host, gb))
                                        .color(Color32::from_rgb(240, 160, 80)),
                                );
                            });
                    }
                });
            });
    }

    // Timeline and settings, bottom (not in kiosk mode: nobody touches a kiosk).
    if !ui_state.kiosk {
        egui::Area::new(egui::Id::unique("supercell-timeline"))
            .anchor(Align2::CENTER_BOTTOM, vec2(0.0, -12.0))
            .show(ctx, |ui| {
                panel.show(ui, |ui| {
                    timeline(ui, player, ui_state, out);
                    ui.horizontal(|ui| attributes(ui, player, ui_state, out));
                });
            });
    }

    if ui_state.help {
        egui::Area::new(egui::Id::unique("supercell-help"))
            .anchor(Align2::CENTER_CENTER, vec2(0.0, 0.0))
            .show(ctx, |ui| {
                panel.show(ui, |ui| {
                    ui.label(
                        RichText::new("Keys")
                            .size(18.0)
                            .strong()
                            .color(Color32::WHITE),
                    );
                    egui::Grid::new("supercell-help-grid").show(ui, |ui| {
                        for (k, what) in HELP {
                            ui.label(RichText::new(*k).monospace().color(Color32::WHITE));
                            ui.label(RichText::new(*what).color(Color32::LIGHT_GRAY));
                            ui.end_row();
                        }
                    });
                });
            });
    }
}

fn timeline(ui: &mut egui::Ui, player: &Player, st: &mut UiState, out: &mut Vec<UiRequest>) {
    ui.horizontal(|ui| {
        if ui
            // Plain words: egui's built-in fonts lack the media-control glyphs.
            .button(if player.is_playing() { "pause" } else { "play" })
            .on_hover_text("play / pause (Space)")
            .clicked()
        {
            out.push(UiRequest::Action(Action::TogglePlay));
        }
        if ui.button("< step").on_hover_text("step back (←)").clicked() {
            out.push(UiRequest::Action(Action::Step(Direction::Reverse)));
        }
        if ui.button("step >").on_hover_text("step (→)").clicked() {
            out.push(UiRequest::Action(Action::Step(Direction::Forward)));
        }
        let rev = player.direction() == Direction::Reverse;
        if ui.selectable_label(rev, "reverse").clicked() {
            out.push(UiRequest::Action(Action::Reverse));
        }
        let mut mode = player.mode();
        egui::ComboBox::from_id_salt("supercell-mode")
            .selected_text(mode_name(mode))
            .show_ui(ui, |ui| {
                for m in [PlayMode::Loop, PlayMode::PingPong, PlayMode::Once] {
                    ui.selectable_value(&mut mode, m, mode_name(m));
                }
            });
        if mode != player.mode() {
            out.push(UiRequest::SetMode(mode));
        }
        let mut unlimited = player.speed().is_none();
        let mut fps = player.speed().unwrap_or(10.0);
        if ui.checkbox(&mut unlimited, "max speed").changed() {
            out.push(UiRequest::SetSpeed((!unlimited).then_some(fps)));
        }
        if !unlimited
            && ui
                .add(
                    egui::Slider::new(&mut fps, 0.5..=120.0)
                        .logarithmic(true)
                        .text("frames/s"),
                )
                .changed()
        {
            out.push(UiRequest::SetSpeed(Some(fps)));
        }
    });
    let last = player.frame_count().saturating_sub(1);
    if !st.dragging {
        st.slider = player.position();
    }
    let before = st.slider;
    let time = player.frame_time(st.slider);
    let resp = ui.add(
        egui::Slider::new(&mut st.slider, 0..=last)
            .text(format!("frame (t = {time:.1} s)"))
            .clamping(egui::SliderClamping::Always),
    );
    if resp.drag_started() {
        st.dragging = true;
        out.push(UiRequest::Dragging(true));
    }
    if st.slider != before {
        out.push(UiRequest::Scrub(st.slider));
    }
    if resp.drag_stopped() {
        st.dragging = false;
        out.push(UiRequest::Dragging(false));
        // The exact frame where the slider was released.
        out.push(UiRequest::Scrub(st.slider));
    }
}

fn attributes(ui: &mut egui::Ui, player: &Player, st: &mut UiState, out: &mut Vec<UiRequest>) {
    let names = player.attribute_names();
    for (i, name) in names.iter().enumerate() {
        let Some(Some(a)) = player.view().attributes.get(i) else {
            continue;
        };
        let mut on = a.enabled;
        if ui
            .checkbox(&mut on, format!("{} ({})", name, i + 1))
            .changed()
        {
            out.push(UiRequest::SetAttribute(i, on));
        }
        let cur = st.presets.get(i).copied().unwrap_or(PRESETS.len() - 1);
        let mut sel = cur;
        egui::ComboBox::from_id_salt(("supercell-preset", i))
            .selected_text(PRESETS[cur.min(PRESETS.len() - 1)])
            .show_ui(ui, |ui| {
                for (k, p) in PRESETS.iter().enumerate() {
                    ui.selectable_value(&mut sel, k, *p);
                }
            });
        if sel != cur {
            out.push(UiRequest::SetPreset(i, sel));
        }
    }
}
