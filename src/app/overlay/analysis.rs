//! The analysis panels: a slice plane drawn over the 3-D view and as a 2-D image with km
//! axes (Z, [ ], { }, J, K), the probe under the mouse (I) and a line plot between two
//! Ctrl+clicked points (Y clears it). What they show is computed by [`crate::app::analysis`]
//! from the frame on screen; this module keeps their state, answers keys and script
//! commands, and draws them.

use egui::{Color32, RichText};
use serde::Serialize;

use crate::app::analysis::{self, Axis, LinePlot, ProbeReading, Slice, SliceImage};
use crate::app::core::Player;
use crate::app::script::{AnalysisKey, Command};
use crate::render::{TransferFunction, srgb_encode};

/// Width of the analysis panel's plots, points.
const SECTION_W: f32 = 300.0;

/// An egui texture (egui's handle has no `Debug`).
#[derive(Clone, Default)]
struct Texture(Option<egui::TextureHandle>);

impl std::fmt::Debug for Texture {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "texture" } else { "none" })
    }
}

/// The panels' state, kept between frames.
#[derive(Clone, Debug, Default)]
pub struct AnalysisUi {
    /// The slice plane, if any.
    pub slice: Option<Slice>,
    /// The slice's 2-D panel shown.
    pub slice_panel: bool,
    /// The probe follows the mouse.
    pub probe_on: bool,
    /// The mouse, window pixels (physical).
    pub hover: Option<[f32; 2]>,
    /// The last probe reading.
    pub probe: Option<ProbeReading>,
    /// The line plot's ends picked so far (world metres).
    pub picks: Vec<[f64; 3]>,
    /// The line plot.
    pub line: Option<LinePlot>,
    /// The attribute on the slice and the line plot (manifest order; `None`: the first
    /// shown).
    pub attribute: Option<usize>,
    /// What went wrong last, or a hint.
    pub note: Option<String>,
    /// A Ctrl+click to turn into a pick on the next update.
    pick_pending: bool,
    /// What the probe, the slice image and the line were computed for (pixel or slice, and
    /// the frame on screen), so they are computed again only when that changes.
    probed: Option<([f32; 2], Option<Slice>, Option<u32>)>,
    sliced: Option<(Slice, Option<u32>)>,
    lined: Option<Option<u32>>,
    image: Option<SliceImage>,
    texture: Texture,
    texture_stale: bool,
}

/// What `dump-state` writes of the panels.
#[derive(Clone, Debug, Serialize)]
pub struct AnalysisDump {
    /// The slice plane.
    pub slice: Option<Slice>,
    /// Its 2-D image's size and world ranges (its values are not written).
    pub slice_image: Option<SliceImage>,
    /// The probe's last reading.
    pub probe: Option<ProbeReading>,
    /// The line plot.
    pub line: Option<LinePlot>,
    /// The last error or hint.
    pub note: Option<String>,
}

impl AnalysisUi {
    /// The panels' state as data.
    pub fn dump(&self) -> AnalysisDump {
        AnalysisDump {
            slice: self.slice,
            slice_image: self.image.clone(),
            probe: self.probe.clone(),
            line: self.line.clone(),
            note: self.note.clone(),
        }
    }

    /// The attribute the slice and line plot show.
    fn attribute(&self, player: &Player) -> usize {
        self.attribute
            .or_else(|| player.shown_looks().first().map(|(a, _)| *a))
            .unwrap_or(0)
    }

    /// A key.
    pub fn key(&mut self, k: AnalysisKey, player: &Player) {
        self.note = None;
        let bbox = player.view().world_bbox;
        match k {
            AnalysisKey::CycleSliceAxis => {
                let next = match self.slice.map(|s| s.axis) {
                    None => Some(Axis::X),
                    Some(Axis::X) => Some(Axis::Y),
                    Some(Axis::Y) => Some(Axis::Z),
                    Some(Axis::Z) => None,
                };
                let attribute = self.attribute(player);
                self.slice = next.map(|axis| {
                    let i = axis.index();
                    let at = 0.5 * (f64::from(bbox[0][i]) + f64::from(bbox[1][i]));
                    Slice {
                        axis,
                        at,
                        attribute,
                    }
                });
            }
            AnalysisKey::MoveSlice(n) => {
                if let Some(s) = self.slice.as_mut() {
                    let i = s.axis.index();
                    let step = f64::from(player.view().voxel_size) * f64::from(n);
                    s.at = (s.at + step).clamp(f64::from(bbox[0][i]), f64::from(bbox[1][i]));
                }
            }
            AnalysisKey::NextAttribute => {
                let n = player.attribute_units().len().max(1);
                let a = (self.attribute(player) + 1) % n;
                self.attribute = Some(a);
                if let Some(s) = self.slice.as_mut() {
                    s.attribute = a;
                }
                if let Some(l) = self.line.as_mut() {
                    l.attribute = a;
                }
                self.lined = None;
            }
            AnalysisKey::ToggleSlicePanel => self.slice_panel = !self.slice_panel,
            AnalysisKey::ToggleProbe => {
                self.probe_on = !self.probe_on;
                self.probed = None;
            }
            AnalysisKey::ClearLine => {
                self.picks.clear();
                self.line = None;
            }
        }
        self.forget_stale_image();
    }

    /// Drops the slice's image when there is no slice (at once, so that no stale image is
    /// drawn or dumped).
    fn forget_stale_image(&mut self) {
        if self.slice.is_none() {
            self.image = None;
            self.texture.0 = None;
            self.sliced = None;
        }
    }

    /// A Ctrl+click at the mouse: the next update picks a line end there.
    pub fn pick(&mut self) {
        self.pick_pending = true;
    }

    /// The render-image point under window pixel `w` (the image fills the window).
    fn render_pixel(player: &Player, window: (u32, u32), w: [f32; 2]) -> [f32; 2] {
        let (rw, rh) = player.size();
        [
            w[0] * rw as f32 / window.0.max(1) as f32,
            w[1] * rh as f32 / window.1.max(1) as f32,
        ]
    }

    /// Brings the probe, the slice image and the line plot up to date with the mouse, the
    /// slice and the frame on screen (each computed again only when what it shows
    /// changed). `window`: the window's size, physical pixels.
    pub fn update(&mut self, player: &mut Player, window: (u32, u32)) {
        if player.shown_frame().is_none() {
            return;
        }
        if let Err(e) = self.update_inner(player, window) {
            self.note = Some(e);
        }
    }

    fn update_inner(&mut self, player: &mut Player, window: (u32, u32)) -> Result<(), String> {
        let frame = player.shown_frame();
        let err = |e: crate::app::core::PlayError| e.to_string();
        if let (true, Some(w)) = (self.probe_on || self.pick_pending, self.hover) {
            let px = Self::render_pixel(player, window, w);
            if self.probed != Some((px, self.slice, frame)) {
                self.probed = Some((px, self.slice, frame));
                self.probe = analysis::probe(player, self.slice.as_ref(), px).map_err(err)?;
            }
        }
        if std::mem::take(&mut self.pick_pending) {
            match &self.probe {
                Some(p) => {
                    if self.picks.len() >= 2 {
                        self.picks.clear();
                    }
                    self.picks.push(p.world);
                    self.lined = None;
                }
                None => self.note = Some("nothing under the mouse to pick".into()),
            }
        }
        if let [a, b] = self.picks[..]
            && self.lined != Some(frame)
        {
            self.lined = Some(frame);
            let attribute = self.attribute(player);
            self.line = Some(analysis::line_plot(player, a, b, attribute).map_err(err)?);
        }
        if let Some(s) = self.slice
            && self.sliced != Some((s, frame))
        {
            self.sliced = Some((s, frame));
            self.image = Some(analysis::slice_image(player, &s).map_err(err)?);
            self.texture_stale = true;
        }
        Ok(())
    }

    /// A script command of the panels (`slice`, `probe`, `pick`, `line`), done at once. Other
    /// commands are not this module's and do nothing.
    pub fn script(
        &mut self,
        player: &mut Player,
        cmd: &Command,
        window: (u32, u32),
    ) -> Result<(), String> {
        match cmd {
            Command::Slice(None) => self.slice = None,
            Command::Slice(Some((axis, at, name))) => {
                let attribute =
                    attribute_named(name, player)?.unwrap_or_else(|| self.attribute(player));
                self.attribute = Some(attribute);
                self.slice = Some(Slice {
                    axis: *axis,
                    at: *at,
                    attribute,
                });
            }
            Command::Probe(w) => {
                self.probe_on = true;
                self.hover = Some(*w);
            }
            Command::Pick(w) => {
                self.hover = Some(*w);
                self.pick();
            }
            Command::Line(a, b, name) => {
                if let Some(attribute) = attribute_named(name, player)? {
                    self.attribute = Some(attribute);
                }
                self.picks = vec![*a, *b];
                self.lined = None;
            }
            _ => return Ok(()),
        }
        self.forget_stale_image();
        self.update_inner(player, window)
    }

    /// Draws the slice over the 3-D view (`screen`: where the render image is shown) and the
    /// panels that are on.
    pub fn draw(&mut self, ctx: &egui::Context, player: &Player, screen: egui::Rect) {
        if self.texture_stale {
            self.texture_stale = false;
            self.texture.0 = self.image.as_ref().map(|img| {
                let look = player.look_of(img.slice.attribute);
                let rgba = slice_colours(img, look.as_ref());
                ctx.load_texture(
                    "supercell-slice",
                    egui::ColorImage::from_rgba_unmultiplied([img.width, img.height], &rgba),
                    egui::TextureOptions::NEAREST,
                )
            });
        }
        let slice = (self.image.as_ref()).zip(self.texture.0.as_ref().map(|t| t.id()));
        if let Some((img, tex)) = slice {
            draw_slice_in_view(ctx, player, img, tex, screen);
        }
        let probe = self.probe_on || self.note.is_some();
        let slice = slice.filter(|_| self.slice_panel);
        if !probe && slice.is_none() && self.line.is_none() {
            return;
        }
        // One panel for the three, its sections one above the other: they never cover
        // each other, and it moves as one.
        let room = ctx.content_rect();
        egui::Window::new("analysis")
            .id(egui::Id::unique("supercell-analysis"))
            .default_pos(egui::pos2(room.right() - SECTION_W - 40.0, 12.0))
            .default_width(SECTION_W)
            .max_height(room.height() - 24.0)
            .show(ctx, |ui| {
                egui::ScrollArea::vertical().show(ui, |ui| {
                    if probe {
                        probe_section(ui, self);
                    }
                    if let Some((img, tex)) = slice {
                        ui.separator();
                        slice_section(ui, player, img, tex);
                    }
                    if let Some(line) = &self.line {
                        ui.separator();
                        line_section(ui, player, line);
                    }
                });
            });
    }
}

/// The slice's values coloured by the attribute's colormap over its look's range (a grey
/// ramp over the image's own range where no slot holds it), opaque; transparent where
/// there is no value, and below the look's range (as a radar display leaves echo under its
/// lowest level uncoloured: a reflectivity slice shows the storm, not a sheet of the
/// colormap's first colour over the whole domain).
fn slice_colours(img: &SliceImage, look: Option<&TransferFunction>) -> Vec<u8> {
    let finite = img.values.iter().copied().filter(|v| v.is_finite());
    let (lo, hi) = finite.fold((f32::INFINITY, f32::NEG_INFINITY), |(a, b), v| {
        (a.min(v), b.max(v))
    });
    let mut out = Vec::with_capacity(img.values.len() * 4);
    for &v in &img.values {
        if !v.is_finite() {
            out.extend_from_slice(&[0, 0, 0, 0]);
            continue;
        }
        if look.is_some_and(|tf| v < tf.range[0]) {
            out.extend_from_slice(&[0, 0, 0, 0]);
            continue;
        }
        let rgb = match look {
            Some(tf) => {
                let u = ((v - tf.range[0]) * tf.range_inv()).clamp(0.0, 1.0);
                let c = tf.eval(u);
                [c[0], c[1], c[2]].map(srgb_encode)
            }
            None => {
                let u = if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
                [u; 3]
            }
        };
        let byte = |c: f32| (c.clamp(0.0, 1.0) * 255.0).round() as u8;
        out.extend_from_slice(&[byte(rgb[0]), byte(rgb[1]), byte(rgb[2]), 255]);
    }
    out
}

/// Screen point (egui points) of render-image point `px`.
fn to_screen(player: &Player, screen: egui::Rect, px: [f32; 2]) -> egui::Pos2 {
    let (w, h) = player.size();
    egui::pos2(
        screen.min.x + px[0] / w.max(1) as f32 * screen.width(),
        screen.min.y + px[1] / h.max(1) as f32 * screen.height(),
    )
}

/// The slice in the 3-D view: its image on a mesh of the plane projected through the
/// camera, drawn over the volume (it is not hidden by what lies in front of it).
fn draw_slice_in_view(
    ctx: &egui::Context,
    player: &Player,
    img: &SliceImage,
    tex: egui::TextureId,
    screen: egui::Rect,
) {
    const CELLS: usize = 24;
    let mut mesh = egui::Mesh::with_texture(tex);
    let tint = Color32::from_white_alpha(220);
    let scale_w = img.width as f64 / CELLS as f64;
    let scale_h = img.height as f64 / CELLS as f64;
    for j in 0..=CELLS {
        for i in 0..=CELLS {
            // Pixel corners: world_at takes centres, so shift by half a pixel.
            let (fi, fj) = (i as f64 * scale_w - 0.5, j as f64 * scale_h - 0.5);
            let p = img.world_at(fi, fj);
            let Some(px) = analysis::project(player, p) else {
                return;
            };
            let uv = egui::pos2(i as f32 / CELLS as f32, j as f32 / CELLS as f32);
            mesh.vertices.push(egui::epaint::Vertex {
                pos: to_screen(player, screen, px),
                uv,
                color: tint,
            });
        }
    }
    let row = (CELLS + 1) as u32;
    for j in 0..CELLS as u32 {
        for i in 0..CELLS as u32 {
            let a = j * row + i;
            mesh.add_triangle(a, a + 1, a + row);
            mesh.add_triangle(a + 1, a + row + 1, a + row);
        }
    }
    ctx.layer_painter(egui::LayerId::background())
        .add(egui::Shape::mesh(mesh));
}

/// The dataset attribute called `name` (manifest order); `None` for no name.
fn attribute_named(name: &Option<String>, player: &Player) -> Result<Option<usize>, String> {
    let Some(n) = name else { return Ok(None) };
    let names = player.attribute_units();
    names
        .iter()
        .position(|(a, _)| a == n)
        .map(Some)
        .ok_or_else(|| {
            let all: Vec<&str> = names.iter().map(|(a, _)| a.as_str()).collect();
            format!("no attribute {n:?} (the dataset has {})", all.join(", "))
        })
}

/// Name and units of attribute `a`.
fn attribute_label(player: &Player, a: usize) -> String {
    match player.attribute_units().get(a) {
        Some((name, Some(units))) => format!("{name} [{units}]"),
        Some((name, None)) => name.clone(),
        None => format!("attribute {a}"),
    }
}

/// The slice as a 2-D image with km axes (a z slice is a map like a radar PPI; x and y
/// slices are vertical sections like an RHI), in km as the world places them.
fn slice_section(ui: &mut egui::Ui, player: &Player, img: &SliceImage, tex: egui::TextureId) {
    let s = img.slice;
    let km = |_: Axis, m: f64| m / 1e3;
    let (u, v) = img.axes;
    let [ur, vr] = img.ranges;
    let (u0, u1) = (km(u, ur[0]), km(u, ur[1]));
    let (v0, v1) = (km(v, vr[0]), km(v, vr[1]));
    let title = format!(
        "slice {} = {:.2} km: {}",
        s.axis.name(),
        km(s.axis, s.at),
        attribute_label(player, s.attribute)
    );
    ui.label(RichText::new(title).strong());
    let aspect = ((u1 - u0) / (v1 - v0).max(1e-9)) as f32;
    let side = SECTION_W;
    egui_plot::Plot::new("supercell-slice-plot")
        .width(side)
        .height((side / aspect.max(0.05)).min(side))
        .data_aspect(1.0)
        .x_axis_label(format!("{} [km]", u.name()))
        .y_axis_label(format!("{} [km]", v.name()))
        .show(ui, |p| {
            p.image(egui_plot::PlotImage::new(
                "slice",
                tex,
                egui_plot::PlotPoint::new((u0 + u1) / 2.0, (v0 + v1) / 2.0),
                egui::vec2((u1 - u0) as f32, (v1 - v0) as f32),
            ));
        });
}

/// The probe's reading: where (km) and every attribute's value with its units.
fn probe_section(ui: &mut egui::Ui, st: &AnalysisUi) {
    if let Some(n) = &st.note {
        ui.label(RichText::new(n).color(Color32::from_rgb(255, 190, 120)));
    }
    let Some(p) = &st.probe else {
        ui.label(match st.slice {
            Some(_) => "the mouse's ray misses the slice plane",
            None => "the mouse's ray meets nothing opaque",
        });
        return;
    };
    ui.label(match p.found_by {
        "slice" => "on the slice plane".to_string(),
        _ => format!(
            "where the shown volume is {:.0} % opaque",
            analysis::PROBE_OPACITY * 100.0
        ),
    });
    ui.label(format!(
        "x {:.2} km, y {:.2} km, z {:.2} km",
        p.km[0], p.km[1], p.km[2]
    ));
    egui::Grid::new("supercell-probe-values").show(ui, |ui| {
        for r in &p.values {
            ui.label(r.name.as_str());
            ui.label(
                r.value
                    .map_or("—".into(), |v| crate::render::shown_value(v as f32)),
            );
            ui.label(r.units.as_deref().unwrap_or(""));
            ui.label(r.voxel.map_or(String::new(), |v| format!("voxel {v:?}")));
            ui.end_row();
        }
    });
}

/// The line plot: the attribute against distance along the line, km.
fn line_section(ui: &mut egui::Ui, player: &Player, line: &LinePlot) {
    let km = |p: [f64; 3]| analysis::km_of(p).map(|c| format!("{c:.1}"));
    let (a, b) = (km(line.from), km(line.to));
    ui.label(
        RichText::new(format!(
            "{} from ({}) to ({}) km",
            attribute_label(player, line.attribute),
            a.join(", "),
            b.join(", ")
        ))
        .strong(),
    );
    let pts: Vec<[f64; 2]> = line
        .points
        .iter()
        .filter_map(|&(d, v)| Some([d, v?]))
        .collect();
    egui_plot::Plot::new("supercell-line-plot")
        .width(SECTION_W)
        .height(SECTION_W / 2.0)
        .x_axis_label("distance [km]")
        .show(ui, |p| {
            p.line(egui_plot::Line::new("value", pts));
        });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slice_pixels_below_the_looks_range_are_transparent_like_a_radar_map() {
        let img = SliceImage {
            slice: Slice {
                axis: Axis::Z,
                at: 1000.0,
                attribute: 0,
            },
            width: 4,
            height: 1,
            axes: (Axis::X, Axis::Y),
            ranges: [[0.0, 4.0], [0.0, 1.0]],
            values: vec![f32::NAN, 2.0, 5.0, 80.0],
        };
        let tf = TransferFunction::preset("nws_reflectivity", [5.0, 75.0], 1000.0);
        let px = slice_colours(&img, Some(&tf));
        let alpha: Vec<u8> = px.chunks(4).map(|p| p[3]).collect();
        // No value, under 5 dBZ: nothing drawn; 5 dBZ and up (80 clamps to the top): opaque.
        assert_eq!(alpha, vec![0, 0, 255, 255]);
        let top = tf.eval(1.0);
        let want: Vec<u8> = [top[0], top[1], top[2]]
            .map(srgb_encode)
            .map(|c| (c.clamp(0.0, 1.0) * 255.0).round() as u8)
            .to_vec();
        assert_eq!(&px[12..15], &want[..]);
        // Without a look: a grey ramp over the image's own range, every value drawn.
        let grey = slice_colours(&img, None);
        assert_eq!(
            grey.chunks(4).map(|p| p[3]).collect::<Vec<_>>(),
            vec![0, 255, 255, 255]
        );
    }
}
