//! The window's legend: per shown attribute a colour bar (its colormap, and under it the
//! same colours laid over a checkerboard by the opacity curve), its name and unit, the
//! value range, the look in use; and the time label with the shown frame's simulation time.
//! It is the overlay's one panel that the clean view (U) keeps.
//!
//! The bars' colours come from the table the renderer uploads ([`View::tf_table`], through
//! [`Annotation::for_view`], as `render --annotate` draws them) and are painted one
//! physical pixel column at a time as flat colours: egui writes a vertex colour unchanged
//! to the window's non-sRGB target, so the pixel showing value `v` is the transfer
//! function's colour at `v` (within egui's ±1 dithering).
//!
//! [`View::tf_table`]: crate::render::View::tf_table

use egui::{Align2, Color32, FontId, Rect, pos2, vec2};
use serde::{Deserialize, Serialize};

use super::{UiState, look_label};
use crate::app::Player;
use crate::app::legend::{
    Annotation, LegendEntry, format_value, legend_colour, opacity_colour, shown_slots,
    time_label_of,
};
use crate::render::Colormap;

/// A bar's width, points.
const BAR_W: f32 = 160.0;
/// The colour strip's and the opacity strip's heights, points.
const COLOUR_H: f32 = 10.0;
const OPACITY_H: f32 = 6.0;
/// Text sizes, points.
const TITLE_PX: f32 = 13.0;
const SMALL_PX: f32 = 11.0;

/// One bar as drawn in the last frame, in window pixels (what `dump-state` reports, so a
/// test can read a value's colour back from a screenshot).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LegendBar {
    /// The attribute's name.
    pub name: String,
    /// Its unit, where the dataset records one.
    pub units: Option<String>,
    /// The look in use, as the attribute's look box names it.
    pub look: String,
    /// The values at the bar's left and right ends.
    pub range: [f32; 2],
    /// The colour strip, `[x0, y0, x1, y1]` (x1, y1 excluded): pixel column `x0 + i` shows
    /// the value at `u = (i + 0.5) / (x1 - x0)` of the range.
    pub colour_px: [u32; 4],
    /// The opacity strip, likewise.
    pub opacity_px: [u32; 4],
}

/// The legend as drawn in the last frame: what `dump-state` reports of it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LegendShown {
    /// The time label.
    pub time_label: String,
    /// One bar per shown attribute, in slot order.
    pub bars: Vec<LegendBar>,
}

/// The window's recorder as the overlay reports it (Shift+R, `record FILE`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RecordingStatus {
    /// The movie being written and the frames it holds so far.
    pub active: Option<(String, u64)>,
    /// The last movie finished: its path, frames and frame size in pixels.
    pub last: Option<(String, u64, [u32; 2])>,
}

/// The colours a bar of `columns` pixel columns shows for a table row (8-bit sRGB and
/// opacity): column `i` is the table's colour at `u = (i + 0.5) / columns`, as
/// [`legend_colour`] gives it.
pub fn strip_colours(table: &[[f32; 4]], columns: u32) -> Vec<[u8; 4]> {
    let n = columns.max(1);
    (0..n)
        .map(|i| legend_colour(table, (i as f32 + 0.5) / n as f32))
        .collect()
}

/// The legend of what `player` shows, with each key's look (the look box's name for it).
fn legend_of(player: &Player, st: &UiState) -> (Annotation, Vec<String>) {
    let m = player.manifest();
    let frame = match &st.gpus {
        Some(o) => o.shown_frame,
        None => player.shown_frame(),
    }
    .unwrap_or_else(|| player.position());
    let view = player.view();
    let slots = player.attribute_slots();
    let mut a = Annotation::for_view(view, slots, m, frame as usize);
    if let Some(o) = st.gpus.as_ref().filter(|o| o.several()) {
        // GPU 0's player sees the frames it owns only: the label is the whole timeline's.
        a.time_label = time_label_of(&o.frame_times, frame as usize);
    }
    let mut looks: Vec<String> = shown_slots(view, slots, m)
        .into_iter()
        .filter_map(|i| {
            let tf = &view.attributes.get(i)?.as_ref()?.tf;
            Some(look_label(
                st.presets.get(i).copied().flatten(),
                st.tf_panel.is_edited(i),
                tf,
            ))
        })
        .collect();
    // A slice of an attribute the volume does not show gets its own key: its colours are the
    // attribute's look (`overlay::analysis`), which no other bar gives.
    if let Some(slice) = &st.analysis.slice
        && let Some(key) = slice_key(player, slice.attribute, slots)
    {
        looks.push(key.1);
        a.entries.push(key.0);
    }
    (a, looks)
}

/// The legend key of a slice of dataset attribute `attribute`, and its look's name, where
/// no shown slot keys it already.
fn slice_key(
    player: &Player,
    attribute: usize,
    slots: &[Option<usize>],
) -> Option<(LegendEntry, String)> {
    let shown = shown_slots(player.view(), slots, player.manifest());
    if shown
        .iter()
        .any(|&i| slots.get(i).copied().flatten() == Some(attribute))
    {
        return None;
    }
    let tf = player.look_of(attribute)?;
    let attr = player.manifest().attributes.get(attribute)?;
    let look = match &tf.colormap {
        Colormap::Named(n) => format!("slice: {n}"),
        Colormap::Stops(_) => "slice: custom colours".to_string(),
    };
    let entry = LegendEntry {
        name: attr.name.clone(),
        units: attr.units.clone(),
        range: tf.range,
        table: tf.bake(),
    };
    Some((entry, look))
}

/// Draws the legend in `room`'s bottom left corner (the time label over the keys, in a row
/// that wraps), records what it drew in `st.legend`, and returns the area's response.
pub(super) fn show(
    ctx: &egui::Context,
    player: &Player,
    st: &mut UiState,
    room: Rect,
    panel: egui::Frame,
) -> egui::Response {
    let (legend, looks) = legend_of(player, st);
    let mut bars = Vec::new();
    let resp = egui::Area::new(egui::Id::unique("supercell-legend"))
        .pivot(Align2::LEFT_BOTTOM)
        .fixed_pos(room.left_bottom())
        .constrain_to(room)
        // Drawn at full strength from its first frame: a fading bar is not the table's colour.
        .fade_in(false)
        .show(ctx, |ui| {
            ui.set_max_width(room.width());
            panel.show(ui, |ui| {
                ui.label(
                    egui::RichText::new(&legend.time_label)
                        .monospace()
                        .size(TITLE_PX)
                        .color(Color32::WHITE),
                );
                ui.horizontal_wrapped(|ui| {
                    ui.spacing_mut().item_spacing = vec2(14.0, 6.0);
                    for (e, look) in legend.entries.iter().zip(&looks) {
                        ui.vertical(|ui| bars.push(key(ui, e, look)));
                    }
                });
            });
        })
        .response;
    st.legend = LegendShown {
        time_label: legend.time_label,
        bars,
    };
    resp
}

/// One attribute's key: title, colour and opacity strips, the range's ends, the look.
fn key(ui: &mut egui::Ui, e: &LegendEntry, look: &str) -> LegendBar {
    ui.spacing_mut().item_spacing = vec2(0.0, 2.0);
    let title = match &e.units {
        Some(u) => format!("{} [{u}]", e.name),
        None => e.name.clone(),
    };
    ui.set_width(BAR_W);
    ui.label(
        egui::RichText::new(title)
            .size(TITLE_PX)
            .strong()
            .color(Color32::WHITE),
    );
    let (colour_rect, _) = ui.allocate_exact_size(vec2(BAR_W, COLOUR_H), egui::Sense::hover());
    let (opacity_rect, _) = ui.allocate_exact_size(vec2(BAR_W, OPACITY_H), egui::Sense::hover());
    let (text_rect, _) = ui.allocate_exact_size(vec2(BAR_W, SMALL_PX + 3.0), egui::Sense::hover());
    let (look_rect, _) = ui.allocate_exact_size(vec2(BAR_W, SMALL_PX + 3.0), egui::Sense::hover());
    let ppp = ui.ctx().pixels_per_point();
    let [x0, _, x1, _] = pixel_box(colour_rect, ppp);
    let strip = strip_colours(&e.table, x1.saturating_sub(x0));
    let colour_px = paint_strip(ui, colour_rect, ppp, |i, _, _| {
        let c = strip[i as usize];
        [c[0], c[1], c[2]]
    });
    let check = ((OPACITY_H * ppp / 2.0).round() as u32).max(2);
    let opacity_px = paint_strip(ui, opacity_rect, ppp, |i, n, row| {
        let light = (i / check + row / check).is_multiple_of(2);
        opacity_colour(&e.table, (i as f32 + 0.5) / n as f32, light)
    });
    let p = ui.painter();
    let font = FontId::monospace(SMALL_PX);
    let grey = Color32::LIGHT_GRAY;
    let lo = format_value(f64::from(e.range[0]));
    let hi = format_value(f64::from(e.range[1]));
    p.text(
        text_rect.left_top(),
        Align2::LEFT_TOP,
        lo,
        font.clone(),
        grey,
    );
    p.text(
        text_rect.right_top(),
        Align2::RIGHT_TOP,
        hi,
        font.clone(),
        grey,
    );
    p.text(look_rect.left_top(), Align2::LEFT_TOP, look, font, grey);
    LegendBar {
        name: e.name.clone(),
        units: e.units.clone(),
        look: look.to_string(),
        range: e.range,
        colour_px,
        opacity_px,
    }
}

/// The physical pixels `rect` (points) covers, `[x0, y0, x1, y1]`, at least one column.
fn pixel_box(rect: Rect, ppp: f32) -> [u32; 4] {
    let px = |v: f32| (v * ppp).round().max(0.0) as u32;
    let (x0, y0) = (px(rect.left()), px(rect.top()));
    [x0, y0, px(rect.right()).max(x0 + 1), px(rect.bottom())]
}

/// Paints `rect` one physical pixel column (and row block) at a time in flat colours:
/// `colour(i, n, row)` for column `i` of `n` and pixel row `row` of the strip. Returns the
/// strip's pixels, `[x0, y0, x1, y1]`.
fn paint_strip(
    ui: &egui::Ui,
    rect: Rect,
    ppp: f32,
    colour: impl Fn(u32, u32, u32) -> [u8; 3],
) -> [u32; 4] {
    let [x0, y0, x1, y1] = pixel_box(rect, ppp);
    let n = x1 - x0;
    // The colour strip's columns are each one colour from top to bottom; an opacity strip's
    // rows change with the checkerboard, so rows are painted one by one.
    let mut columns: Vec<[u8; 3]> = Vec::new();
    let mut mesh = egui::Mesh::default();
    let pt = |x: u32, y: u32| pos2(x as f32 / ppp, y as f32 / ppp);
    for row in 0..y1.saturating_sub(y0) {
        columns.clear();
        columns.extend((0..n).map(|i| colour(i, n, row)));
        for (i, c) in columns.iter().enumerate() {
            let x = x0 + i as u32;
            mesh.add_colored_rect(
                Rect::from_min_max(pt(x, y0 + row), pt(x + 1, y0 + row + 1)),
                Color32::from_rgb(c[0], c[1], c[2]),
            );
        }
    }
    ui.painter().add(egui::Shape::mesh(mesh));
    [x0, y0, x1, y1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::render::{TransferFunction, srgb_encode};

    fn to_u8(x: f32) -> i32 {
        (srgb_encode(x.clamp(0.0, 1.0)) * 255.0).round() as i32
    }

    /// The window's strip shows, column by column, the transfer function's colour at the
    /// column's value: against the table (exactly) and against `TransferFunction::eval`
    /// where the map is smooth over a column.
    #[test]
    fn the_strip_is_the_transfer_functions_colour_at_each_value() {
        for (preset, range) in [("wind_speed", [0.0, 60.0]), ("cloud", [0.0, 4.0])] {
            let tf = TransferFunction::preset(preset, range, 30_000.0);
            let table = tf.bake();
            for columns in [160, 240, 333] {
                let strip = strip_colours(&table, columns);
                assert_eq!(strip.len(), columns as usize);
                for (i, got) in strip.iter().enumerate() {
                    let u = (i as f32 + 0.5) / columns as f32;
                    let want = tf.eval(u);
                    for c in 0..3 {
                        let d = (i32::from(got[c]) - to_u8(want[c])).abs();
                        assert!(d <= 2, "{preset} u={u}: strip {got:?}, eval {want:?}");
                    }
                    assert_eq!(*got, legend_colour(&table, u));
                }
            }
        }
    }
}
