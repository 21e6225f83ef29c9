//! The legend burnt into rendered images (`render --annotate`, `[overlay] annotate`): per
//! shown attribute a colour bar (its colormap, and below it the same colours laid over a
//! checkerboard by the opacity curve), its name, unit and value range; and a time label.
//!
//! Drawn on the CPU over the read-back 8-bit image, so the renderer stays free of text.
//! The bar's colours come from the very table the renderer uploads
//! ([`View::tf_table`]), read through [`sample_table`] as the CPU renderer reads it: the
//! colour the legend gives a value is the colour the transfer function gives it. Text is
//! rasterised with `ab_glyph` from Hack, the monospace font egui already embeds
//! (`epaint_default_fonts`), so no system font is needed.

use ab_glyph::{Font, FontRef, PxScale, ScaleFont, point};

use crate::dataset::Manifest;
use crate::render::{Image, TF_SIZE, View, sample_table, srgb_encode};

/// One shown attribute's key.
#[derive(Clone, Debug, PartialEq)]
pub struct LegendEntry {
    /// The attribute's name.
    pub name: String,
    /// Its unit, where the dataset records one.
    pub units: Option<String>,
    /// The values mapped to the bar's left and right ends (the transfer function's range).
    pub range: [f32; 2],
    /// The attribute's baked transfer-function row, as the renderer uploads it
    /// (`TF_SIZE` entries of linear RGB and opacity).
    pub table: Vec<[f32; 4]>,
}

/// What is burnt into one image.
#[derive(Clone, Debug, PartialEq)]
pub struct Annotation {
    /// One key per shown attribute, in slot order.
    pub entries: Vec<LegendEntry>,
    /// The time label (top left).
    pub time_label: String,
}

/// Where one attribute's bar landed in the image, so that callers (and tests) can read a
/// value's colour back.
#[derive(Clone, Debug, PartialEq)]
pub struct BarPlacement {
    /// First column of the bar.
    pub x: u32,
    /// Columns: column `x + i` shows the value at `u = (i + 0.5) / width` of the range.
    pub width: u32,
    /// Rows of the colour strip (the colormap alone, opaque).
    pub colour_rows: std::ops::Range<u32>,
    /// Rows of the opacity strip (the colours over a checkerboard by their opacity).
    pub opacity_rows: std::ops::Range<u32>,
    /// The value range the bar spans.
    pub range: [f32; 2],
}

impl BarPlacement {
    /// The column showing value `v`, or `None` outside the range (or an empty one).
    pub fn column_of(&self, v: f32) -> Option<u32> {
        let [lo, hi] = self.range;
        let u = (v - lo) / (hi - lo);
        if !(u.is_finite() && (0.0..=1.0).contains(&u)) {
            return None;
        }
        let i = ((u * self.width as f32) as u32).min(self.width - 1);
        Some(self.x + i)
    }

    /// The normalized value `u` that column `column` of the bar shows.
    pub fn u_of_column(&self, column: u32) -> f32 {
        (column.saturating_sub(self.x) as f32 + 0.5) / self.width as f32
    }
}

/// The 8-bit sRGB colour and opacity the legend draws for normalized value `u` of a
/// table row: the table's linear colour, sRGB-encoded as the renderer encodes its image.
pub fn legend_colour(table: &[[f32; 4]], u: f32) -> [u8; 4] {
    let c = sample_table(table, u.clamp(0.0, 1.0));
    [
        to_u8(srgb_encode(c[0].clamp(0.0, 1.0))),
        to_u8(srgb_encode(c[1].clamp(0.0, 1.0))),
        to_u8(srgb_encode(c[2].clamp(0.0, 1.0))),
        to_u8(c[3]),
    ]
}

/// The 8-bit sRGB colour the opacity strip shows for normalized value `u`: the table's
/// colour laid by its opacity over a checkerboard square (`light` or dark grey), so that
/// transparent values show the checkerboard and opaque ones their colour.
pub fn opacity_colour(table: &[[f32; 4]], u: f32, light: bool) -> [u8; 3] {
    let lin = sample_table(table, u.clamp(0.0, 1.0));
    let alpha = lin[3].clamp(0.0, 1.0);
    let under = if light { 0.6 } else { 0.25 };
    let mix = |ch: usize| {
        to_u8(srgb_encode(
            lin[ch].clamp(0.0, 1.0) * alpha + under * (1.0 - alpha),
        ))
    };
    [mix(0), mix(1), mix(2)]
}

fn to_u8(x: f32) -> u8 {
    (x.clamp(0.0, 1.0) * 255.0).round() as u8
}

/// The time label of frame `frame`: its simulation time where the manifest records times
/// (not just the frame indices an import without times writes), and the frame's index.
pub fn time_label(manifest: &Manifest, frame: usize) -> String {
    let times: Vec<f64> = manifest.frames.iter().map(|f| f.time).collect();
    time_label_of(&times, frame)
}

/// [`time_label`] from every frame's simulation time (`times[i]` is frame `i`'s): where a
/// player sees part of the frames (one GPU's of several), the whole timeline's times.
pub fn time_label_of(times: &[f64], frame: usize) -> String {
    let indices_only = times.iter().enumerate().all(|(i, &t)| t == i as f64);
    let index = format!("frame {frame} of {}", times.len());
    match times.get(frame) {
        Some(&t) if !indices_only => format!("t = {}  ({index})", format_seconds(t)),
        _ => index,
    }
}

/// Seconds as `5400 s (1:30:00)`: the value as stored, and hours, minutes and seconds
/// where it is a minute or more.
fn format_seconds(t: f64) -> String {
    let plain = format!("{} s", format_value(t));
    if t.abs() < 60.0 || !t.is_finite() {
        return plain;
    }
    let whole = t.abs().round() as u64;
    let sign = if t < 0.0 { "-" } else { "" };
    format!(
        "{plain} ({sign}{}:{:02}:{:02})",
        whole / 3600,
        whole / 60 % 60,
        whole % 60
    )
}

/// A value for a label: up to four significant digits, scientific where very large or
/// very small.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    if !(1e-3..1e5).contains(&a) {
        return format!("{v:.2e}");
    }
    let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        s
    }
}

impl Annotation {
    /// The legend of `view` for frame `frame`: one entry per enabled slot that shows a
    /// dataset attribute (`slots[i]`: the manifest attribute slot `i` shows), with the
    /// table the renderer uploads for that slot.
    pub fn for_view(
        view: &View,
        slots: &[Option<usize>],
        manifest: &Manifest,
        frame: usize,
    ) -> Annotation {
        let tables = view.tf_table();
        let entries = shown_slots(view, slots, manifest)
            .into_iter()
            .filter_map(|i| {
                let a = view.attributes.get(i)?.as_ref()?;
                let attr = manifest.attributes.get((*slots.get(i)?)?)?;
                let table = tables.get(i * TF_SIZE..(i + 1) * TF_SIZE)?.to_vec();
                Some(LegendEntry {
                    name: attr.name.clone(),
                    units: attr.units.clone(),
                    range: a.tf.range,
                    table,
                })
            })
            .collect();
        Annotation {
            entries,
            time_label: time_label(manifest, frame),
        }
    }
}

/// The view slots a legend keys, in slot order: those enabled that show a dataset attribute
/// (`slots[i]`: the manifest attribute slot `i` shows). [`Annotation::for_view`]'s entries
/// are these slots', one for one.
pub fn shown_slots(view: &View, slots: &[Option<usize>], manifest: &Manifest) -> Vec<usize> {
    (0..view.attributes.len().min(crate::render::MAX_ATTRIBUTES))
        .filter(|&i| {
            view.attributes[i].as_ref().is_some_and(|a| a.enabled)
                && slots
                    .get(i)
                    .copied()
                    .flatten()
                    .is_some_and(|a| a < manifest.attributes.len())
        })
        .collect()
}

/// Sizes of the legend's parts for an image, in pixels.
struct Metrics {
    text_px: f32,
    pad: u32,
    bar_width: u32,
    strip: u32,
}

impl Metrics {
    fn for_image(w: u32, h: u32) -> Metrics {
        let text_px = (h as f32 / 40.0).clamp(10.0, 28.0);
        let pad = (text_px / 3.0).ceil() as u32;
        Metrics {
            text_px,
            pad,
            bar_width: (w / 4).clamp(64, 512),
            strip: (text_px * 0.6).ceil() as u32,
        }
    }

    fn line(&self) -> u32 {
        (self.text_px * 1.25).ceil() as u32
    }

    /// Height of one entry: title line, colour and opacity strips, range line.
    fn entry_height(&self) -> u32 {
        self.line() + 2 * self.strip + self.line() + self.pad
    }
}

/// Burns `a` into `img` (its 8-bit image; the linear one is left as rendered): the time
/// label at the top left, the keys in slot order in a column ending at the bottom left
/// (further columns to the right where they do not fit). Returns where each bar landed, in entry order;
/// parts that fall outside a small image are clipped.
pub fn annotate(img: &mut Image, a: &Annotation) -> Vec<BarPlacement> {
    let font = FontRef::try_from_slice(epaint_default_fonts::HACK_REGULAR)
        .expect("egui's embedded Hack font parses");
    let m = Metrics::for_image(img.width, img.height);
    let mut canvas = Canvas { img, font: &font };
    let label_w = canvas.text_width(&a.time_label, m.text_px).ceil() as u32;
    canvas.shade(0, 0, label_w + 2 * m.pad, m.line() + m.pad);
    canvas.text(m.pad, m.pad, &a.time_label, m.text_px);

    let column_w = m.bar_width + 2 * m.pad;
    let entry_h = m.entry_height();
    let per_column = ((canvas.img.height.saturating_sub(m.line() + m.pad)) / entry_h).max(1);
    let mut placed = Vec::with_capacity(a.entries.len());
    let n = a.entries.len() as u32;
    for (k, e) in a.entries.iter().enumerate() {
        let col = k as u32 / per_column;
        let row = k as u32 % per_column;
        // Each column's keys end at the bottom, the first one on top.
        let rows_here = per_column.min(n - col * per_column);
        let x = col * column_w;
        let y = canvas
            .img
            .height
            .saturating_sub((rows_here - row) * entry_h);
        placed.push(draw_entry(&mut canvas, &m, x, y, e));
    }
    placed
}

fn draw_entry(
    c: &mut Canvas<'_, '_>,
    m: &Metrics,
    x: u32,
    y: u32,
    e: &LegendEntry,
) -> BarPlacement {
    c.shade(x, y, m.bar_width + 2 * m.pad, m.entry_height());
    let title = match &e.units {
        Some(u) => format!("{} [{u}]", e.name),
        None => e.name.clone(),
    };
    c.text(x + m.pad, y + m.pad / 2, &title, m.text_px);
    let bar = BarPlacement {
        x: x + m.pad,
        width: m.bar_width,
        colour_rows: y + m.line()..y + m.line() + m.strip,
        opacity_rows: y + m.line() + m.strip..y + m.line() + 2 * m.strip,
        range: e.range,
    };
    let check = (m.strip / 2).max(2);
    for i in 0..bar.width {
        let px = bar.x + i;
        let colour = legend_colour(&e.table, bar.u_of_column(px));
        for py in bar.colour_rows.clone() {
            c.put(px, py, [colour[0], colour[1], colour[2]]);
        }
        for py in bar.opacity_rows.clone() {
            let light =
                ((px - bar.x) / check + (py - bar.opacity_rows.start) / check).is_multiple_of(2);
            c.put(px, py, opacity_colour(&e.table, bar.u_of_column(px), light));
        }
    }
    let lo = format_value(f64::from(e.range[0]));
    let hi = format_value(f64::from(e.range[1]));
    let ty = bar.opacity_rows.end + m.pad / 2;
    c.text(bar.x, ty, &lo, m.text_px);
    let hi_w = c.text_width(&hi, m.text_px).ceil() as u32;
    c.text((bar.x + bar.width).saturating_sub(hi_w), ty, &hi, m.text_px);
    bar
}

/// Drawing onto an image's 8-bit pixels, clipped to the image.
struct Canvas<'i, 'f> {
    img: &'i mut Image,
    font: &'f FontRef<'static>,
}

impl Canvas<'_, '_> {
    fn index(&self, x: u32, y: u32) -> Option<usize> {
        (x < self.img.width && y < self.img.height)
            .then(|| (y as usize * self.img.width as usize + x as usize) * 4)
    }

    fn put(&mut self, x: u32, y: u32, rgb: [u8; 3]) {
        if let Some(i) = self.index(x, y) {
            self.img.rgba8[i..i + 4].copy_from_slice(&[rgb[0], rgb[1], rgb[2], 255]);
        }
    }

    /// Mixes `rgb` over the pixel with weight `cover` (0..1).
    fn blend(&mut self, x: u32, y: u32, rgb: [u8; 3], cover: f32) {
        if let Some(i) = self.index(x, y) {
            let cover = cover.clamp(0.0, 1.0);
            for (c, &v) in rgb.iter().enumerate() {
                let old = f32::from(self.img.rgba8[i + c]);
                self.img.rgba8[i + c] = (old + (f32::from(v) - old) * cover).round() as u8;
            }
            self.img.rgba8[i + 3] = 255;
        }
    }

    /// Darkens a rectangle so that white text reads over any picture.
    fn shade(&mut self, x: u32, y: u32, w: u32, h: u32) {
        for py in y..y.saturating_add(h) {
            for px in x..x.saturating_add(w) {
                self.blend(px, py, [0, 0, 0], 0.6);
            }
        }
    }

    fn text_width(&self, text: &str, px: f32) -> f32 {
        let scaled = self.font.as_scaled(PxScale::from(px));
        text.chars()
            .map(|ch| scaled.h_advance(self.font.glyph_id(ch)))
            .sum()
    }

    /// White text with its top-left corner at `(x, y)`.
    fn text(&mut self, x: u32, y: u32, text: &str, px: f32) {
        let scale = PxScale::from(px);
        let scaled = self.font.as_scaled(scale);
        let baseline = y as f32 + scaled.ascent();
        let mut caret = x as f32;
        for ch in text.chars() {
            let id = self.font.glyph_id(ch);
            let glyph = id.with_scale_and_position(scale, point(caret, baseline));
            caret += scaled.h_advance(id);
            let Some(outline) = self.font.outline_glyph(glyph) else {
                continue;
            };
            let b = outline.px_bounds();
            outline.draw(|gx, gy, cover| {
                let (px, py) = (
                    b.min.x as i64 + i64::from(gx),
                    b.min.y as i64 + i64::from(gy),
                );
                if let (Ok(px), Ok(py)) = (u32::try_from(px), u32::try_from(py)) {
                    self.blend(px, py, [255, 255, 255], cover);
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_labelled_compactly() {
        assert_eq!(format_value(0.004), "0.004");
        assert_eq!(format_value(70.0), "70");
        assert_eq!(format_value(-10.0), "-10");
        assert_eq!(format_value(0.0), "0");
        assert_eq!(format_value(1234.0), "1234");
        assert_eq!(format_value(0.0123456), "0.01235");
        assert_eq!(format_value(2.5e-5), "2.50e-5");
        assert_eq!(format_value(3.0e6), "3.00e6");
        assert_eq!(format_seconds(5400.0), "5400 s (1:30:00)");
        assert_eq!(format_seconds(30.0), "30 s");
    }
}
