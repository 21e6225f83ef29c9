//! The egui overlay: live figures of both paths, plots, the timeline, attribute and
//! transfer-function switches, and the help card. Drawing only reads the [`Player`]; what
//! the user asks for comes back as [`UiRequest`]s that the window applies.

use std::time::Instant;

use super::core::{PathSel, Player};
use super::figures::mode_name;
pub use super::figures::{
    NO_PEAK, RateRow, compact_lines, fault_lines, figure_table, peak_text, rate_lines, rate_rows,
    rate_text, stats_lines, target_text, warm_up_line, warm_up_text,
};
use super::gpumem::GpuMemory;
use super::script::Action;
use crate::pipeline::{Direction, PlayMode};

mod gpus;
mod kiosk;
pub use gpus::{
    GPUS_ORDER_KEPT, GpuReport, GpuRow, GpusOverlay, GpusTotalRow, gpu_lines, gpu_rows,
};
pub use kiosk::{
    Clear, FullscreenCheck, KioskLayout, KioskPanels, ScreenRect, fullscreen_check, kiosk_layout,
    kiosk_layout_at, projected_bounds, zoom_for,
};

mod curve;
mod legend;
mod looks;
pub mod transfer_panel;
pub use legend::{LegendBar, LegendShown, RecordingStatus, strip_colours};
pub use looks::{PRESETS, look_label, presets_for};

pub mod analysis;
mod dump;
mod panel;
use analysis::AnalysisUi;
pub use dump::{OverlayDump, dump};
pub use panel::{FiguresPanel, figures_panel};

/// Overlay state kept between frames.
#[derive(Clone, Debug)]
pub struct UiState {
    /// Help card shown.
    pub help: bool,
    /// Plots shown.
    pub plots: bool,
    /// Compact figures: the active path's rates on a line each and no table (V). Windows
    /// narrower than [`COMPACT_BELOW_W`] start compact, with the plots off, so that the
    /// figures leave most of the picture free.
    pub compact: bool,
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
    /// GPU memory in use and where the figure comes from, where known.
    pub gpu_memory: Option<GpuMemory>,
    /// With several GPUs, GPU `k`'s memory in use, bytes, where the window can read it (a
    /// device of this process).
    pub gpus_memory: Vec<Option<u64>>,
    /// Frames shown since start.
    pub frames_shown: u64,
    /// Per attribute slot, the preset chosen in the window (index into [`PRESETS`]), or
    /// `None` while it shows the look the scene (or the dataset's suggestion) gave it.
    pub presets: Vec<Option<usize>>,
    /// The transfer-function panel (E) and which looks were edited in it.
    pub tf_panel: transfer_panel::TransferPanel,
    /// Window size, physical pixels.
    pub window_size: (u32, u32),
    /// Seconds of history in the plots.
    pub plot_window_s: f64,
    /// Where the panels went (kept between frames: the layout plans with the last sizes).
    pub layout: PanelLayout,
    /// The window's coordinator (one GPU or several): its rows and its timeline, shown in
    /// place of the player's own frame numbers. `None` for a player with no coordinator (the
    /// headless screenshot), whose own timeline is shown.
    pub gpus: Option<GpusOverlay>,
    /// The clean view (U): every panel hidden but the legend.
    pub clean: bool,
    /// The legend as drawn in the last frame (empty where none was).
    pub legend: LegendShown,
    /// The window's recorder (Shift+R).
    pub recording: RecordingStatus,
    /// Slices, the probe and the line plot.
    pub analysis: AnalysisUi,
}

impl UiState {
    /// The state a window opens with (figures and plots shown, no help card; compact and
    /// without plots when the window is narrower than [`COMPACT_BELOW_W`]), for a window of
    /// `window_size` physical pixels.
    pub fn new(window_size: (u32, u32)) -> UiState {
        let compact = starts_compact(window_size, false, false);
        UiState {
            help: false,
            plots: !compact,
            compact,
            large_print: false,
            fullscreen: false,
            kiosk: false,
            message: None,
            slider: 0,
            dragging: false,
            cpu_percent: 0.0,
            gpu_memory: None,
            gpus_memory: Vec::new(),
            frames_shown: 0,
            presets: Vec::new(),
            tf_panel: Default::default(),
            window_size,
            plot_window_s: 30.0,
            layout: PanelLayout::default(),
            gpus: None,
            clean: false,
            legend: LegendShown::default(),
            recording: RecordingStatus::default(),
            analysis: AnalysisUi::default(),
        }
    }
}

/// Windows narrower than this (physical pixels) start with compact figures and no plots:
/// at 960 × 540 (the window on a software adapter) the full figures and plots cover most
/// of the picture.
pub const COMPACT_BELOW_W: u32 = 1100;

/// Whether a window of `window_size` starts compact: narrower than [`COMPACT_BELOW_W`], and
/// neither large print nor kiosk (both are for reading figures from a distance).
pub fn starts_compact(window_size: (u32, u32), large_print: bool, kiosk: bool) -> bool {
    window_size.0 < COMPACT_BELOW_W && !large_print && !kiosk
}

/// Where the overlay's panels were drawn in the last frame, and the sizes they took.
#[derive(Clone, Debug, Default)]
pub struct PanelLayout {
    /// Each panel drawn, by name ("stats", "plots", "timeline", "help"): its rectangle in
    /// window pixels, `[x0, y0, x1, y1]`.
    pub rects: Vec<(&'static str, [f32; 4])>,
    /// The plots are on but were left out: no room for them beside or below the figures.
    pub plots_no_room: bool,
    /// The help card took the figures' and plots' place (no room for it beside them).
    pub help_alone: bool,
    /// Frames since the start in which two panels painted over each other (checked on every
    /// frame, so a layout that is wrong for one frame only is counted too).
    pub overlap_frames: u64,
    /// The first such overlap: which panels, where.
    pub first_overlap: Option<String>,
    /// Sizes when last drawn (points), and the figures' whole content (unclipped).
    stats_size: Option<egui::Vec2>,
    stats_natural: Option<egui::Vec2>,
    /// The kiosk's layout drawn last (window pixels).
    kiosk: Option<KioskLayout>,
    help_size: Option<egui::Vec2>,
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
    /// A look (transfer function) for an attribute slot, from the transfer panel.
    SetLook(usize, Box<crate::render::TransferFunction>),
    /// A dataset attribute (manifest order) on/off, in a slot or not
    /// ([`Player::set_dataset_attribute_shown`]).
    ShowDatasetAttribute(usize, bool),
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
    ("V", "compact / full figures"),
    ("1-8", "attribute on / off"),
    ("T", "next colour preset (attribute 1)"),
    ("E / Shift+S", "transfer functions / save looks and camera"),
    ("M", "path tracing on / off"),
    ("N", "path tracing: denoiser on / off"),
    ("C", "reset camera"),
    ("drag / right-drag / wheel", "orbit / pan / zoom"),
    ("W A S X, + -", "orbit, zoom"),
    ("U", "clean view: the legend alone"),
    ("Shift+R", "record the window to a movie"),
    ("Z, [ ] { }", "slice x / y / z / off; move 1 / 10 voxels"),
    ("J, K", "slice's attribute; its 2-D panel"),
    ("I, Ctrl+click, Y", "probe; line plot's ends; clear it"),
    ("H", "this help"),
    ("Esc", "quit"),
];

/// The figures' definitions, as the help card states them (the same as `docs/PLAY-JSON.md`).
const DEFINITIONS: &[(&str, &str)] = &[
    ("delivered", "frame's bytes all on the GPU, checks passed"),
    ("rendered", "a newly shown frame's render is done"),
    ("now", "over the last second of wall time, or the"),
    ("", "last 2 frames if slower (≤ 10 s); falls to 0"),
    ("avg", "since the path was chosen or reset,"),
    ("", "÷ the time it was chosen (paused counts)"),
    ("warm-up", "the ring filling first: shown apart"),
    ("peak", "highest 'now' after the warm-up (- before)"),
    ("target", "the playback rate asked for, not measured"),
    ("GB/s", "1e9 bytes of delivered frames a second"),
];

/// Width from which the help card puts the definitions beside the keys, points.
const HELP_SIDE_BY_SIDE_W: f32 = 760.0;

/// Gap between the panels and the window's edges, points.
const GAP: f32 = 12.0;
/// A panel's inner margin, points.
const PAD: f32 = 10.0;
/// Plot size when there is room, and the smallest worth showing, points.
const PLOT_SIZE: egui::Vec2 = egui::vec2(360.0, 120.0);
const PLOT_MIN: egui::Vec2 = egui::vec2(160.0, 64.0);
/// The figures panel's widest (long lines, such as why the direct path is unavailable, wrap),
/// points: leaves the plots room beside it from 960 points wide.
const STATS_MAX_W: f32 = 560.0;
/// The plots panel's height besides the two plots: margins, two titles, spacing.
const PLOTS_EXTRA_H: f32 = 2.0 * PAD + 2.0 * 24.0 + 8.0;

/// The top of a plot's value axis for `values` (the axis starts at 0): a little above the
/// largest finite value, 1 when there is none.
pub fn plot_top(values: impl Iterator<Item = f64>) -> f64 {
    let max = values.filter(|v| v.is_finite()).fold(0.0f64, f64::max);
    if max > 0.0 { max * 1.15 } else { 1.0 }
}

/// Where the plots go in `room` (a rectangle of the window free of other panels): the
/// plot size, if they fit at all.
fn plot_size_in(room: egui::Rect) -> Option<egui::Vec2> {
    let w = (room.width() - 2.0 * PAD).min(PLOT_SIZE.x);
    let h = ((room.height() - PLOTS_EXTRA_H) / 2.0).min(PLOT_SIZE.y);
    (w >= PLOT_MIN.x && h >= PLOT_MIN.y).then(|| egui::vec2(w, h))
}

/// The room for the plots in region `top` with the figures at `stats`: beside them or below
/// them, whichever gives bigger plots (the room and the plot size).
fn plots_room(top: egui::Rect, stats: egui::Rect) -> Option<(egui::Rect, egui::Vec2)> {
    let beside = egui::Rect::from_min_max(
        egui::pos2(stats.right() + GAP, top.top()),
        top.right_bottom(),
    );
    let below = egui::Rect::from_min_max(
        egui::pos2(top.left(), stats.bottom() + GAP),
        top.right_bottom(),
    );
    [beside, below]
        .into_iter()
        .filter(|r| r.is_positive())
        .filter_map(|r| plot_size_in(r).map(|s| (r, s)))
        .max_by(|a, b| (a.1.x * a.1.y).total_cmp(&(b.1.x * b.1.y)))
}

/// The plots panel's rectangle in `room` for plots of `size`: the room's top right corner
/// (bottom right in kiosk mode, where there is no timeline).
fn plots_rect(room: egui::Rect, size: egui::Vec2, kiosk: bool) -> egui::Rect {
    let panel = egui::vec2(size.x + 2.0 * PAD, 2.0 * size.y + PLOTS_EXTRA_H);
    let align = if kiosk {
        egui::Align2::RIGHT_BOTTOM
    } else {
        egui::Align2::RIGHT_TOP
    };
    align.align_size_within_rect(panel, room)
}

/// The room right of the figures `stats` in region `top` that the plots (`plots`) leave.
fn help_room(top: egui::Rect, stats: egui::Rect, plots: Option<egui::Rect>) -> egui::Rect {
    let free = egui::Rect::from_min_max(
        egui::pos2(stats.right() + GAP, top.top()),
        top.right_bottom(),
    );
    let Some(p) = plots.filter(|p| p.intersects(free)) else {
        return free;
    };
    let left = egui::Rect::from_min_max(free.min, egui::pos2(p.left() - GAP, free.bottom()));
    let above = egui::Rect::from_min_max(free.min, egui::pos2(free.right(), p.top() - GAP));
    if left.area() >= above.area() {
        left
    } else {
        above
    }
}

/// Draws the overlay over the image `image` (the renderer's output) and collects requests.
///
/// The panels never overlap and stay inside the window, down to 640 × 360 in large print:
/// the timeline spans the bottom; the figures take the top left (scrolling when taller than
/// the room); the plots go beside or below them where they fit (shrunk, or left out); the
/// help card goes in the room they leave, else in their place while it shows.
pub fn draw(
    ctx: &egui::Context,
    player: &Player,
    ui_state: &mut UiState,
    image: Option<egui::TextureId>,
    out: &mut Vec<UiRequest>,
) {
    use egui::{Color32, Rect, pos2, vec2};
    let screen = if ui_state.kiosk {
        kiosk::screen(ctx, ui_state.window_size)
    } else {
        ctx.content_rect()
    };
    if let Some(tex) = image {
        ctx.layer_painter(egui::LayerId::background()).image(
            tex,
            screen,
            egui::Rect::from_min_max(pos2(0.0, 0.0), pos2(1.0, 1.0)),
            Color32::WHITE,
        );
    }
    ui_state.analysis.draw(ctx, player, screen);
    let panel = egui::Frame::new()
        .fill(Color32::from_black_alpha(150))
        .inner_margin(PAD)
        .corner_radius(6.0);
    let figures = figures_panel(player, ui_state);
    let inner = screen.shrink(GAP);
    let mut drawn: Vec<(&'static str, Rect)> = Vec::new();
    // The kiosk keeps the storm in view: the figures and the plots in rooms of their own
    // clear of it, in the largest print that fits (`kiosk::kiosk_layout`). Where no room is
    // clear of it (a close-up that fills the screen), the layout below is the window's, in
    // the smallest print the kiosk uses, and covers part of the picture.
    let plots_panel = vec2(PLOT_SIZE.x + 2.0 * PAD, 2.0 * PLOT_SIZE.y + PLOTS_EXTRA_H);
    if ui_state.kiosk {
        let input = kiosk::KioskInput {
            size: ui_state.window_size,
            large_print: ui_state.large_print,
            stats: ui_state.layout.stats_natural,
            plots: ui_state.plots.then_some(plots_panel),
            last: ui_state.layout.kiosk,
        };
        ui_state.layout.kiosk = kiosk::layout_frame(ctx, player, &input, GAP);
    }
    let ppp = ctx.pixels_per_point();
    let kiosk_rooms = (ui_state.layout.kiosk)
        .filter(|_| ui_state.kiosk)
        .map(|l| kiosk::rooms_in_points(&l, ppp));

    // Each panel is laid out in a room of its own and clipped to it (`constrain_to`), and
    // the rooms do not overlap, so no panel can paint over another even in a frame where a
    // size changed. What is recorded is what was painted.
    // Timeline and settings, bottom (not in kiosk mode: nobody touches a kiosk).
    let mut top = inner;
    if !ui_state.kiosk && !ui_state.clean {
        let resp = show_timeline(ctx, inner, panel, player, ui_state, out);
        let r = occupied(ctx, &resp);
        drawn.push(("timeline", painted(ctx, resp.layer_id)));
        top.max.y = (r.top() - GAP).max(top.top());
    }
    // The legend above the timeline: the clean view's one panel (none in the kiosk's rooms).
    ui_state.legend = LegendShown::default();
    if ui_state.clean || !ui_state.kiosk {
        let resp = legend::show(ctx, player, ui_state, top, panel);
        drawn.push(("legend", painted(ctx, resp.layer_id)));
        top.max.y = (occupied(ctx, &resp).top() - GAP).max(top.top());
    }
    if ui_state.clean {
        return record_layout(ctx, ui_state, drawn);
    }

    if let Some((stats_room, _)) = kiosk_rooms {
        top = stats_room;
    }
    // The plots' room and size: the kiosk's room, else beside or below the figures at `s`.
    let plots_place = |s: Rect| match kiosk_rooms {
        Some((_, room)) => room.and_then(|r| plot_size_in(r).map(|size| (r, size))),
        None => plots_room(top, s),
    };

    // The plan, from the sizes the panels took last time.
    let stats_plan = Rect::from_min_size(
        top.min,
        ui_state
            .layout
            .stats_size
            .unwrap_or(vec2(0.0, 0.0))
            .min(top.size()),
    );
    let plots_plan = ui_state
        .plots
        .then(|| plots_place(stats_plan))
        .flatten()
        .map(|(room, size)| plots_rect(room, size, ui_state.kiosk));
    let help_alone = ui_state.help
        && ui_state.layout.help_size.is_some_and(|s| {
            let room = help_room(top, stats_plan, plots_plan);
            s.x > room.width() || s.y > room.height()
        });

    // Figures, top left.
    let mut stats_rect = None;
    if !help_alone {
        let room = Rect::from_min_size(top.min, vec2(top.width().min(STATS_MAX_W), top.height()));
        let (resp, content) = show_stats(ctx, (room, top), panel, player, ui_state, &figures, out);
        ui_state.layout.stats_natural = content.map(|c| c + vec2(2.0 * PAD, 2.0 * PAD));
        drawn.push(("stats", painted(ctx, resp.layer_id)));
        ui_state.layout.stats_size = Some(resp.rect.size());
        stats_rect = Some(occupied(ctx, &resp));
    }

    // Plots: beside or below the figures, where they fit.
    let plots_room_now = stats_rect.and_then(plots_place);
    ui_state.layout.plots_no_room = ui_state.plots && !help_alone && plots_room_now.is_none();
    let mut plots_drawn = None;
    if ui_state.plots
        && let Some((room, size)) = plots_room_now
    {
        let at = plots_rect(room, size, ui_state.kiosk).min;
        let resp = show_plots(ctx, (room, at, size), panel, player, ui_state.plot_window_s);
        drawn.push(("plots", painted(ctx, resp.layer_id)));
        plots_drawn = Some(occupied(ctx, &resp));
    }

    transfer_panel::draw(ctx, player, &mut ui_state.tf_panel, out);
    // Help: in the room the figures and plots leave, else in their place.
    if ui_state.help {
        let room = if help_alone {
            top
        } else {
            help_room(top, stats_rect.unwrap_or(stats_plan), plots_drawn)
        };
        let resp = show_help(ctx, room, top, panel);
        drawn.push(("help", painted(ctx, resp.layer_id)));
        ui_state.layout.help_size = Some(resp.rect.size());
    }
    ui_state.layout.help_alone = help_alone;
    record_layout(ctx, ui_state, drawn);
}

/// The timeline and the attribute toggles, at the bottom of `inner`.
fn show_timeline(
    ctx: &egui::Context,
    inner: egui::Rect,
    panel: egui::Frame,
    player: &Player,
    ui_state: &mut UiState,
    out: &mut Vec<UiRequest>,
) -> egui::Response {
    use egui::{Align2, vec2};
    egui::Area::new(egui::Id::unique("supercell-timeline"))
        .anchor(Align2::CENTER_BOTTOM, vec2(0.0, -GAP))
        .constrain_to(inner)
        .show(ctx, |ui| {
            ui.set_max_width(inner.width());
            panel.show(ui, |ui| {
                timeline(ui, player, ui_state, out);
                ui.horizontal_wrapped(|ui| attributes(ui, player, ui_state, out));
            });
        })
        .response
}

/// The figures at `top`'s top left in `room`, scrolling past `top`'s height; the response
/// and the size the figures would take unclipped.
fn show_stats(
    ctx: &egui::Context,
    (room, top): (egui::Rect, egui::Rect),
    panel: egui::Frame,
    player: &Player,
    ui_state: &mut UiState,
    figures: &FiguresPanel,
    out: &mut Vec<UiRequest>,
) -> (egui::Response, Option<egui::Vec2>) {
    let mut content = None;
    let resp = egui::Area::new(egui::Id::unique("supercell-stats"))
        .fixed_pos(top.min)
        .constrain_to(room)
        .show(ctx, |ui| {
            ui.set_max_size(room.size());
            panel.show(ui, |ui| {
                no_scroll_fades(ui);
                let scroll = egui::ScrollArea::vertical()
                    .id_salt("supercell-stats-scroll")
                    .max_height((top.height() - 2.0 * PAD).max(16.0))
                    .show(ui, |ui| stats_panel(ui, player, ui_state, figures, out));
                content = Some(scroll.content_size);
            });
        })
        .response;
    (resp, content)
}

/// The plots' panel at `at` in `room`, each plot `size` points, over the last `w` seconds.
fn show_plots(
    ctx: &egui::Context,
    (room, at, size): (egui::Rect, egui::Pos2, egui::Vec2),
    panel: egui::Frame,
    player: &Player,
    w: f64,
) -> egui::Response {
    let now = player.clock();
    egui::Area::new(egui::Id::unique("supercell-plots"))
        .fixed_pos(at)
        .constrain_to(room)
        .show(ctx, |ui| {
            panel.show(ui, |ui| rate_plots(ui, player, w, now, size));
        })
        .response
}

/// The two rate plots (GB/s, frames/s rendered) of both paths over the last `w` seconds to
/// `now`, each `size` points.
fn rate_plots(ui: &mut egui::Ui, player: &Player, w: f64, now: f64, size: egui::Vec2) {
    use egui::{Color32, RichText};
    let series = |sel: PathSel, gb: bool| -> Vec<[f64; 2]> {
        let s = player.stats(sel);
        let v = if gb {
            s.gbps_series(now, w)
        } else {
            s.fps_series(now, w)
        };
        v.into_iter().map(|(t, y)| [t - now, y]).collect()
    };
    for (title, gb) in [("GB/s now", true), ("frames/s rendered now", false)] {
        ui.label(RichText::new(title).color(Color32::WHITE).strong());
        let direct = series(PathSel::Direct, gb);
        let host = series(PathSel::Host, gb);
        let top = plot_top(direct.iter().chain(&host).map(|p| p[1]));
        egui_plot::Plot::new(title)
            .width(size.x)
            .height(size.y)
            .allow_drag(false)
            .allow_zoom(false)
            .allow_scroll(false)
            .allow_double_click_reset(false)
            .legend(egui_plot::Legend::default())
            .show(ui, |p| {
                // Fixed axes: time from -w to now, rates from 0 (a rate is
                // never negative; egui_plot would otherwise centre flat lines
                // on zero).
                p.set_plot_bounds_x(-w..=0.0);
                p.set_plot_bounds_y(0.0..=top);
                p.line(
                    egui_plot::Line::new("direct", direct).color(Color32::from_rgb(120, 220, 120)),
                );
                p.line(egui_plot::Line::new("host", host).color(Color32::from_rgb(240, 160, 80)));
            });
    }
}

/// The help card, centred in `room`, at most `top`'s size (scrolling past it).
fn show_help(
    ctx: &egui::Context,
    room: egui::Rect,
    top: egui::Rect,
    panel: egui::Frame,
) -> egui::Response {
    use egui::Align2;
    egui::Area::new(egui::Id::unique("supercell-help"))
        .pivot(Align2::CENTER_CENTER)
        .fixed_pos(room.center())
        .constrain_to(room)
        .show(ctx, |ui| {
            ui.set_max_size(top.size());
            panel.show(ui, |ui| {
                no_scroll_fades(ui);
                egui::ScrollArea::vertical()
                    .id_salt("supercell-help-scroll")
                    .max_height((top.height() - 2.0 * PAD).max(16.0))
                    .show(ui, help_card);
            });
        })
        .response
}

/// Records the panels `drawn` in this frame (window pixels) and counts a frame in which two
/// of them painted over each other.
fn record_layout(
    ctx: &egui::Context,
    ui_state: &mut UiState,
    drawn: Vec<(&'static str, egui::Rect)>,
) {
    let ppp = ctx.pixels_per_point();
    ui_state.layout.rects = drawn
        .into_iter()
        // A panel in egui's first (invisible, sizing) pass paints nothing.
        .filter(|(_, r)| r.is_positive())
        .map(|(n, r)| {
            (
                n,
                [r.min.x * ppp, r.min.y * ppp, r.max.x * ppp, r.max.y * ppp],
            )
        })
        .collect();
    let rects = &ui_state.layout.rects;
    let overlap = rects.iter().enumerate().find_map(|(i, (na, a))| {
        rects[i + 1..].iter().find_map(|(nb, b)| {
            let apart = a[2] <= b[0] || b[2] <= a[0] || a[3] <= b[1] || b[3] <= a[1];
            (!apart).then(|| format!("{na} {a:?} overlaps {nb} {b:?}"))
        })
    });
    if let Some(o) = overlap {
        ui_state.layout.overlap_frames += 1;
        ui_state.layout.first_overlap.get_or_insert(o);
    }
}

/// Turns off the scroll area's edge fades in `ui`: they paint over the whole height the area
/// may take, beyond the panel, where they would darken the picture.
fn no_scroll_fades(ui: &mut egui::Ui) {
    ui.spacing_mut().scroll.fade.strength = 0.0;
}

/// What the panel of layer `layer` painted in this frame: the union of its shapes, each cut
/// to its clip rectangle (nothing: [`egui::Rect::NOTHING`]).
fn painted(ctx: &egui::Context, layer: egui::LayerId) -> egui::Rect {
    ctx.graphics(|g| {
        g.get(layer).map_or(egui::Rect::NOTHING, |list| {
            list.all_entries()
                .map(|c| c.shape.visual_bounding_rect())
                // An empty label's shape has no finite extent: it paints nothing.
                .zip(list.all_entries().map(|c| c.clip_rect))
                .filter(|(r, _)| r.is_finite() && r.is_positive())
                .map(|(r, clip)| r.intersect(clip))
                .filter(|r| r.is_positive())
                .fold(egui::Rect::NOTHING, |a, r| a.union(r))
        })
    })
}

/// The space a panel takes for the layout of the others: where it was laid out and where
/// it painted, whichever is larger.
fn occupied(ctx: &egui::Context, resp: &egui::Response) -> egui::Rect {
    let p = painted(ctx, resp.layer_id);
    if p.is_positive() {
        resp.rect.union(p)
    } else {
        resp.rect
    }
}

/// The figures panel's contents.
fn stats_panel(
    ui: &mut egui::Ui,
    player: &Player,
    ui_state: &UiState,
    figures: &FiguresPanel,
    out: &mut Vec<UiRequest>,
) {
    use egui::{Color32, RichText};
    let (title, body) = if ui_state.compact {
        (15.0, 12.0)
    } else {
        (20.0, 14.0)
    };
    for (i, l) in figures.lines.iter().enumerate() {
        let t = RichText::new(l).color(Color32::WHITE).monospace();
        ui.label(if i == 0 {
            t.size(title).strong()
        } else {
            t.size(body)
        });
    }
    ui.add_space(if ui_state.compact { 2.0 } else { 6.0 });
    let direct_ok = player.direct_unavailable().is_none();
    if !ui_state.compact {
        both_paths_table(ui, &figures.table);
    }
    direct_checkbox(ui, player, ui_state, direct_ok, out);
}

/// Both paths' figures side by side (the full figures only).
fn both_paths_table(ui: &mut egui::Ui, table: &[[String; 5]]) {
    use egui::{Color32, RichText};
    egui::Grid::new("supercell-both")
        .striped(false)
        .spacing([10.0, 2.0])
        .show(ui, |ui| {
            for (i, row) in table.iter().enumerate() {
                for (j, cell) in row.iter().enumerate() {
                    let t = RichText::new(cell).monospace();
                    ui.label(if i == 0 || j == 0 {
                        t.color(Color32::LIGHT_GRAY)
                    } else {
                        t.color(Color32::WHITE)
                    });
                }
                ui.end_row();
            }
        });
}

/// The direct-paths switch, and the last message under it.
fn direct_checkbox(
    ui: &mut egui::Ui,
    player: &Player,
    ui_state: &UiState,
    direct_ok: bool,
    out: &mut Vec<UiRequest>,
) {
    use egui::{Color32, RichText};
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
        let text = RichText::new(m).color(Color32::YELLOW);
        if ui_state.compact {
            // Compact figures keep the picture free: the message takes one line no wider
            // than the figures above it (the whole of it on hover).
            ui.set_max_width(ui.min_rect().width().max(160.0));
            ui.add(egui::Label::new(text).truncate());
        } else {
            ui.label(text);
        }
    }
}

/// The help card's contents: the keys, and the figures' definitions beside them (below them
/// where the window is too narrow).
fn help_card(ui: &mut egui::Ui) {
    use egui::{Color32, RichText};
    let table = |ui: &mut egui::Ui, title: &str, rows: &[(&str, &str)]| {
        ui.vertical(|ui| {
            ui.label(
                RichText::new(title)
                    .size(18.0)
                    .strong()
                    .color(Color32::WHITE),
            );
            egui::Grid::new(("supercell-help", title)).show(ui, |ui| {
                for (k, what) in rows {
                    ui.label(RichText::new(*k).monospace().color(Color32::WHITE));
                    ui.label(RichText::new(*what).color(Color32::LIGHT_GRAY));
                    ui.end_row();
                }
            });
        });
    };
    if ui.available_width() >= HELP_SIDE_BY_SIDE_W {
        ui.horizontal_top(|ui| {
            table(ui, "Keys", HELP);
            ui.add_space(16.0);
            table(ui, "Figures", DEFINITIONS);
        });
    } else {
        table(ui, "Keys", HELP);
        ui.add_space(6.0);
        table(ui, "Figures", DEFINITIONS);
    }
}

fn timeline(ui: &mut egui::Ui, player: &Player, st: &mut UiState, out: &mut Vec<UiRequest>) {
    // With several GPUs the timeline is theirs, not GPU 0's player's (its own frames only).
    let (playing, speed, frame_count, position) = match &st.gpus {
        Some(o) => (o.playing, o.speed_fps, o.frame_count, o.position),
        None => (
            player.is_playing(),
            player.speed(),
            player.frame_count(),
            player.position(),
        ),
    };
    let (direction, current_mode) = match &st.gpus {
        Some(o) => (o.direction, o.mode),
        None => (player.direction(), player.mode()),
    };
    ui.horizontal_wrapped(|ui| {
        if ui
            // Plain words: egui's built-in fonts lack the media-control glyphs.
            .button(if playing { "pause" } else { "play" })
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
        let rev = direction == Direction::Reverse;
        if ui.selectable_label(rev, "reverse").clicked() {
            out.push(UiRequest::Action(Action::Reverse));
        }
        let mut mode = current_mode;
        egui::ComboBox::from_id_salt("supercell-mode")
            .selected_text(mode_name(mode))
            .show_ui(ui, |ui| {
                for m in [PlayMode::Loop, PlayMode::PingPong, PlayMode::Once] {
                    ui.selectable_value(&mut mode, m, mode_name(m));
                }
            });
        if mode != current_mode {
            out.push(UiRequest::SetMode(mode));
        }
    });
    // The speed on a row of its own: a slider does not wrap.
    ui.horizontal_wrapped(|ui| {
        let mut unlimited = speed.is_none();
        let mut fps = speed.unwrap_or(10.0);
        if ui.checkbox(&mut unlimited, "max speed").changed() {
            out.push(UiRequest::SetSpeed((!unlimited).then_some(fps)));
        }
        if !unlimited
            && ui
                .add(
                    egui::Slider::new(&mut fps, 0.5..=120.0)
                        .logarithmic(true)
                        // A target the player aims at, not a measured rate.
                        .text("target frames/s"),
                )
                .changed()
        {
            out.push(UiRequest::SetSpeed(Some(fps)));
        }
    });
    let last = frame_count.saturating_sub(1);
    if !st.dragging {
        st.slider = position;
    }
    let before = st.slider;
    let time = match &st.gpus {
        Some(o) => o
            .frame_times
            .get(st.slider as usize)
            .copied()
            .unwrap_or(0.0),
        None => player.frame_time(st.slider),
    };
    let resp = ui.add(
        egui::Slider::new(&mut st.slider, 0..=last)
            .text(format!("frame (t = {time:.1} s)"))
            .clamping(egui::SliderClamping::Always),
    );
    // Damaged frames: red marks under the slider's rail, where their frames sit.
    let damaged: Vec<u32> = match &st.gpus {
        Some(o) => o.damaged.clone(),
        None => player.damaged_frames().keys().copied().collect(),
    };
    if !damaged.is_empty() && last > 0 {
        let rail = ui.spacing().slider_width;
        let r = resp.rect;
        let inset = r.height() / 2.0;
        let painter = ui.painter();
        for &f in &damaged {
            let x = r.left() + inset + (rail - 2.0 * inset) * f as f32 / last as f32;
            painter.line_segment(
                [
                    egui::pos2(x, r.bottom() - 4.0),
                    egui::pos2(x, r.bottom() + 2.0),
                ],
                egui::Stroke::new(3.0, egui::Color32::RED),
            );
        }
    }
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
        let cur = st.presets.get(i).copied().flatten();
        let mut sel = cur;
        egui::ComboBox::from_id_salt(("supercell-preset", i))
            .selected_text(look_label(cur, st.tf_panel.is_edited(i), &a.tf))
            .show_ui(ui, |ui| {
                for (k, p) in PRESETS.iter().enumerate() {
                    ui.selectable_value(&mut sel, Some(k), *p);
                }
            });
        if let Some(k) = sel
            && sel != cur
        {
            out.push(UiRequest::SetPreset(i, k));
        }
        if ui.small_button("edit").clicked() {
            st.tf_panel.open = Some(i);
        }
    }
    dataset_attribute_list(ui, player, out);
}

/// Every attribute of the dataset, each with a checkbox, in a drop-down list: any of them
/// can be shown (at most [`crate::render::MAX_ATTRIBUTES`] at once), not only the scene's.
fn dataset_attribute_list(ui: &mut egui::Ui, player: &Player, out: &mut Vec<UiRequest>) {
    let all = player.dataset_attributes();
    if all.len() < 2 {
        return;
    }
    let on = all.iter().filter(|(_, on)| *on).count();
    ui.menu_button(format!("attributes {on}/{}", all.len()), |ui| {
        for (a, (name, shown)) in all.iter().enumerate() {
            let mut v = *shown;
            if ui.checkbox(&mut v, name.as_str()).changed() {
                out.push(UiRequest::ShowDatasetAttribute(a, v));
            }
        }
    });
}

#[cfg(test)]
mod tests;
