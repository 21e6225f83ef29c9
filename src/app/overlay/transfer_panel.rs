//! The transfer-function panel (key E, or "edit" beside an attribute's look box): one
//! attribute's colormap by name, its value range (typed or dragged, over what is known of
//! its values), and its opacity curve edited with the mouse over the colormap strip. Every
//! change is a [`UiRequest::SetLook`], applied as presets are (the player's view changes
//! and the renderer uploads the new table with the next render).

use std::path::PathBuf;

use serde::Serialize;

use super::curve::{Gesture, Strip};
use super::{UiRequest, look_label};
use crate::app::Player;
use crate::render::{Colormap, TransferFunction};

/// The panel's state, kept by the window between frames.
#[derive(Clone, Debug, Default)]
pub struct TransferPanel {
    /// The view slot whose look the panel edits; None: closed.
    pub open: Option<usize>,
    /// Per view slot: the look was edited here since the scene's look or a preset.
    pub edited: Vec<bool>,
    /// Where the last save went: the next Shift+S writes there again.
    pub saved_to: Option<PathBuf>,
    /// The opacity point being dragged.
    dragging: Option<usize>,
    /// The range end being dragged on the value strip: false the low end, true the high.
    range_drag: Option<bool>,
}

impl TransferPanel {
    /// E: opens the panel on the first shown attribute, or closes it.
    pub fn toggle(&mut self, player: &Player) {
        self.open = match self.open {
            Some(_) => None,
            None => Some(
                (player.view().attributes.iter())
                    .position(|a| a.as_ref().is_some_and(|a| a.enabled))
                    .unwrap_or(0),
            ),
        };
    }

    /// Marks slot `i` as edited (`true`) or showing the scene's look.
    pub fn mark(&mut self, i: usize, edited: bool) {
        if self.edited.len() <= i {
            self.edited.resize(i + 1, false);
        }
        self.edited[i] = edited;
    }

    /// Whether slot `i` shows a look edited in the panel.
    pub fn is_edited(&self, i: usize) -> bool {
        self.edited.get(i).copied().unwrap_or(false)
    }
}

/// The looks as `dump-state` writes them.
#[derive(Clone, Debug, Serialize)]
pub struct LooksDump {
    /// The slot the panel edits (None: closed).
    pub panel: Option<usize>,
    /// What each slot's look box says.
    pub labels: Vec<String>,
}

/// What the looks show, for `dump-state`.
pub fn dump(player: &Player, panel: &TransferPanel, presets: &[Option<usize>]) -> LooksDump {
    let labels = (player.view().attributes.iter().enumerate())
        .map(|(i, a)| match a {
            Some(a) => look_label(presets.get(i).copied().flatten(), panel.is_edited(i), &a.tf),
            None => String::new(),
        })
        .collect();
    LooksDump {
        panel: panel.open,
        labels,
    }
}

/// The request that gives slot `slot` the colormap `name` (as the panel's list does; the
/// script's `colormap` command), marking it edited; an error for an unknown name or slot.
pub fn colormap_request(
    player: &Player,
    panel: &mut TransferPanel,
    slot: usize,
    name: &str,
) -> Result<UiRequest, String> {
    if !Colormap::NAMES.contains(&name) {
        return Err(format!(
            "unknown colormap {name:?} (known: {})",
            Colormap::NAMES.join(", ")
        ));
    }
    let Some(Some(a)) = player.view().attributes.get(slot) else {
        return Err(format!("slot {} holds no attribute", slot + 1));
    };
    let mut tf = a.tf.clone();
    tf.colormap = Colormap::Named(name.to_string());
    panel.mark(slot, true);
    Ok(UiRequest::SetLook(slot, Box::new(tf)))
}

/// Draws the panel where it is open, pushing the edits made into `out`.
pub fn draw(
    ctx: &egui::Context,
    player: &Player,
    panel: &mut TransferPanel,
    out: &mut Vec<UiRequest>,
) {
    let Some(slot) = panel.open else { return };
    let names = player.attribute_names();
    let Some(Some(shown)) = player.view().attributes.get(slot) else {
        panel.open = None;
        return;
    };
    let mut tf = shown.tf.clone();
    let mut open = true;
    let mut changed = false;
    let screen = ctx.content_rect();
    egui::Window::new("transfer function")
        .id(egui::Id::unique("supercell-transfer-panel"))
        .open(&mut open)
        .resizable(false)
        .collapsible(false)
        .default_pos(egui::pos2(screen.right() - 420.0, screen.top() + 60.0))
        .show(ctx, |ui| {
            ui.horizontal(|ui| {
                for (i, n) in names.iter().enumerate() {
                    if player.view().attributes.get(i).is_some_and(Option::is_some)
                        && ui.selectable_label(i == slot, n.as_str()).clicked()
                    {
                        panel.open = Some(i);
                    }
                }
            });
            changed |= colormap_row(ui, &mut tf, slot);
            changed |= range_rows(ui, player, panel, &mut tf, slot);
            changed |= opacity_strip(ui, panel, &mut tf);
            ui.horizontal(|ui| {
                if ui.button("scene look").clicked()
                    && let Some(scene) = player.scene_look(slot)
                {
                    panel.mark(slot, false);
                    out.push(UiRequest::SetLook(slot, Box::new(scene)));
                }
                ui.label("Shift+S saves looks and camera");
            });
        });
    if changed && tf != shown.tf {
        panel.mark(slot, true);
        out.push(UiRequest::SetLook(slot, Box::new(tf)));
    }
    if !open {
        panel.open = None;
    }
}

/// The colormap by name; whether it changed.
fn colormap_row(ui: &mut egui::Ui, tf: &mut TransferFunction, slot: usize) -> bool {
    let current = match &tf.colormap {
        Colormap::Named(n) => n.clone(),
        Colormap::Stops(_) => "custom colours".to_string(),
    };
    let mut chosen = current.clone();
    ui.horizontal(|ui| {
        ui.label("colormap");
        egui::ComboBox::from_id_salt(("supercell-tf-colormap", slot))
            .selected_text(current.as_str())
            .show_ui(ui, |ui| {
                for n in Colormap::NAMES {
                    ui.selectable_value(&mut chosen, n.to_string(), n);
                }
            });
    });
    if chosen != current {
        tf.colormap = Colormap::Named(chosen);
        return true;
    }
    false
}

/// What is known of the values: percentiles of the first frames read, else the manifest's
/// range. `(axis, cumulative points, caption)`.
fn value_knowledge(player: &Player, slot: usize) -> (Option<[f32; 2]>, Vec<(f32, f32)>, String) {
    let (range, units) = player.value_range(slot);
    let unit = units.map_or(String::new(), |u| format!(" {u}"));
    if let Some(s) = player.value_summary(slot) {
        let cdf = vec![
            (s.min, 0.0),
            (s.p[0], 0.01),
            (s.p[1], 0.05),
            (s.p[2], 0.5),
            (s.p[3], 0.95),
            (s.p[4], 0.99),
            (s.max, 1.0),
        ];
        let caption = format!(
            "active values of the first frames read: {} .. {}{unit}, density from their \
             percentiles 1, 5, 50, 95, 99 (not a full histogram)",
            crate::render::shown_value(s.min),
            crate::render::shown_value(s.max)
        );
        return (Some([s.min, s.max]), cdf, caption);
    }
    match range {
        Some([lo, hi]) => (
            Some([lo as f32, hi as f32]),
            Vec::new(),
            format!(
                "the manifest's range over all frames: {} .. {}{unit} (no histogram: the \
                 frames' values were not sampled for this scene)",
                crate::render::shown_value(lo as f32),
                crate::render::shown_value(hi as f32)
            ),
        ),
        None => (
            None,
            Vec::new(),
            "no value statistics in the manifest".into(),
        ),
    }
}

/// The range, typed or dragged (on the numbers, or its ends on the value strip drawn over
/// what is known of the values); whether it changed.
fn range_rows(
    ui: &mut egui::Ui,
    player: &Player,
    panel: &mut TransferPanel,
    tf: &mut TransferFunction,
    slot: usize,
) -> bool {
    let [mut lo, mut hi] = tf.range;
    let speed = ((hi - lo).abs() / 200.0).max(f32::MIN_POSITIVE) as f64;
    ui.horizontal(|ui| {
        ui.label("range");
        ui.add(egui::DragValue::new(&mut lo).speed(speed).max_decimals(6));
        ui.label("..");
        ui.add(egui::DragValue::new(&mut hi).speed(speed).max_decimals(6));
    });
    let (known, cdf, caption) = value_knowledge(player, slot);
    // Room beyond the data and the range on both sides, to drag either end outwards.
    let span = known.map_or(tf.range, |k| [k[0].min(lo), k[1].max(hi)]);
    let pad = (span[1] - span[0]) * 0.1;
    let axis = [span[0] - pad, span[1] + pad];
    let width = (axis[1] - axis[0]).max(f32::MIN_POSITIVE);
    let (rect, resp) = ui.allocate_exact_size(egui::vec2(380.0, 36.0), egui::Sense::drag());
    let x_of = |v: f32| rect.left() + (v - axis[0]) / width * rect.width();
    let v_of = |x: f32| axis[0] + (x - rect.left()) / rect.width() * width;
    let painter = ui.painter_at(rect);
    painter.rect_filled(rect, 2.0, egui::Color32::from_gray(30));
    draw_density(&painter, rect, &cdf, &x_of);
    if let (Some([a, b]), true) = (known, cdf.is_empty()) {
        // Only the data's range is known: a bar along the bottom.
        let bar =
            egui::Rect::from_x_y_ranges(x_of(a)..=x_of(b), rect.bottom() - 6.0..=rect.bottom());
        painter.rect_filled(bar, 0.0, egui::Color32::from_rgb(90, 140, 200));
    }
    let band = egui::Rect::from_x_y_ranges(x_of(lo)..=x_of(hi), rect.y_range());
    painter.rect_filled(band, 0.0, egui::Color32::from_white_alpha(40));
    for v in [lo, hi] {
        let x = x_of(v);
        painter.line_segment(
            [egui::pos2(x, rect.top()), egui::pos2(x, rect.bottom())],
            egui::Stroke::new(2.0, egui::Color32::WHITE),
        );
    }
    if resp.drag_started()
        && let Some(p) = resp.interact_pointer_pos()
    {
        panel.range_drag = Some((p.x - x_of(hi)).abs() < (p.x - x_of(lo)).abs());
    }
    if resp.dragged()
        && let (Some(high), Some(p)) = (panel.range_drag, resp.interact_pointer_pos())
    {
        let v = v_of(p.x.clamp(rect.left(), rect.right()));
        if high { hi = v } else { lo = v }
    }
    if resp.drag_stopped() {
        panel.range_drag = None;
    }
    ui.label(egui::RichText::new(caption).small());
    let ok = lo.is_finite() && hi.is_finite() && lo < hi && (hi - lo).is_finite();
    if ok && [lo, hi] != tf.range {
        tf.range = [lo, hi];
        return true;
    }
    false
}

/// Bars of the density between the known percentiles (`cdf`: value, fraction below), each
/// as tall as its density relative to the densest (square root, so thin tails show).
fn draw_density(
    painter: &egui::Painter,
    rect: egui::Rect,
    cdf: &[(f32, f32)],
    x_of: &dyn Fn(f32) -> f32,
) {
    let dens: Vec<(f32, f32, f32)> = cdf
        .windows(2)
        .filter(|w| w[1].0 > w[0].0)
        .map(|w| (w[0].0, w[1].0, (w[1].1 - w[0].1) / (w[1].0 - w[0].0)))
        .collect();
    let top = dens.iter().map(|d| d.2).fold(0.0f32, f32::max);
    if top <= 0.0 || !top.is_finite() {
        return;
    }
    for (a, b, d) in dens {
        let h = (d / top).sqrt() * rect.height();
        let bar = egui::Rect::from_x_y_ranges(x_of(a)..=x_of(b), rect.bottom() - h..=rect.bottom());
        painter.rect_filled(bar, 0.0, egui::Color32::from_rgb(90, 140, 200));
    }
}

/// The colormap strip with the opacity curve over it: drag a point, click to add one,
/// right-click or double-click a point to remove it; whether the curve changed.
fn opacity_strip(ui: &mut egui::Ui, panel: &mut TransferPanel, tf: &mut TransferFunction) -> bool {
    ui.label("opacity (drag points; click adds; right- or double-click removes)");
    let size = egui::vec2(380.0, 110.0);
    let (rect, resp) = ui.allocate_exact_size(size, egui::Sense::click_and_drag());
    let painter = ui.painter_at(rect);
    const COLUMNS: usize = 96;
    for k in 0..COLUMNS {
        let u = (k as f32 + 0.5) / COLUMNS as f32;
        let [r, g, b, _] = tf.eval(u);
        let x0 = rect.left() + rect.width() * k as f32 / COLUMNS as f32;
        let x1 = rect.left() + rect.width() * (k + 1) as f32 / COLUMNS as f32;
        let col = egui::Rect::from_x_y_ranges(x0..=x1 + 0.5, rect.y_range());
        painter.rect_filled(col, 0.0, egui::Color32::from(egui::Rgba::from_rgb(r, g, b)));
    }
    let to_screen = |p: (f32, f32)| {
        egui::pos2(
            rect.left() + p.0 * rect.width(),
            rect.bottom() - p.1 * rect.height(),
        )
    };
    let to_curve = |p: egui::Pos2| {
        (
            (p.x - rect.left()) / rect.width(),
            (rect.bottom() - p.y) / rect.height(),
        )
    };
    let mut line = vec![to_screen((0.0, tf.opacity.first().map_or(0.0, |p| p.1)))];
    line.extend(tf.opacity.iter().map(|&p| to_screen(p)));
    line.push(to_screen((1.0, tf.opacity.last().map_or(0.0, |p| p.1))));
    let black = egui::Stroke::new(3.5, egui::Color32::BLACK);
    painter.line(line.clone(), black);
    painter.line(line, egui::Stroke::new(1.5, egui::Color32::WHITE));
    for &p in &tf.opacity {
        painter.circle_filled(to_screen(p), 4.5, egui::Color32::WHITE);
        painter.circle_stroke(
            to_screen(p),
            4.5,
            egui::Stroke::new(1.0, egui::Color32::BLACK),
        );
    }
    let strip = Strip {
        scale: (rect.width(), rect.height()),
        reach: 8.0,
    };
    let mut curve = tf.opacity.clone();
    let pointer = resp.interact_pointer_pos().or(resp.hover_pos());
    let gesture = pointer.map(to_curve).and_then(|at| {
        if resp.drag_started() {
            Some(Gesture::Press(at))
        } else if resp.dragged() {
            Some(Gesture::Drag(at))
        } else if resp.secondary_clicked() || resp.double_clicked() {
            Some(Gesture::Remove(at))
        } else if resp.clicked() {
            Some(Gesture::Click(at))
        } else {
            None
        }
    });
    if let Some(g) = gesture {
        strip.apply(&mut curve, &mut panel.dragging, g);
    }
    if resp.drag_stopped() {
        strip.apply(&mut curve, &mut panel.dragging, Gesture::Release);
    }
    if curve != tf.opacity {
        tf.opacity = curve;
        return true;
    }
    false
}
