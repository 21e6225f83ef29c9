//! The kiosk's layout: where the figures and the plots go so that the storm stays in view.
//!
//! Pure geometry in window pixels, without egui or winit types, so that it is tested at
//! the show floor's screen sizes with the storm scene's camera: the volume's world box is
//! projected through the camera ([`projected_bounds`]), and the panels go into the
//! screen's corners clear of it, in the largest print that fits ([`kiosk_layout`]).

use glam::Vec3;

use crate::app::core::Player;
use crate::render::{Camera, Projection, smallest_voxel_edge};

/// A rectangle in window pixels, `x0 ≤ x1`, `y0 ≤ y1` (y down).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScreenRect {
    /// Left edge.
    pub x0: f32,
    /// Top edge.
    pub y0: f32,
    /// Right edge.
    pub x1: f32,
    /// Bottom edge.
    pub y1: f32,
}

impl ScreenRect {
    /// The rectangle of size `w × h` with its top left corner at (`x`, `y`).
    pub fn at(x: f32, y: f32, w: f32, h: f32) -> ScreenRect {
        ScreenRect {
            x0: x,
            y0: y,
            x1: x + w,
            y1: y + h,
        }
    }
    /// Whether the two share more than an edge.
    pub fn intersects(&self, o: &ScreenRect) -> bool {
        self.x0 < o.x1 && o.x0 < self.x1 && self.y0 < o.y1 && o.y0 < self.y1
    }
    /// Whether `o` lies inside this one.
    pub fn contains(&self, o: &ScreenRect) -> bool {
        self.x0 <= o.x0 && self.y0 <= o.y0 && o.x1 <= self.x1 && o.y1 <= self.y1
    }
    /// The rectangle grown by `d` on every side.
    fn grown(&self, d: f32) -> ScreenRect {
        ScreenRect {
            x0: self.x0 - d,
            y0: self.y0 - d,
            x1: self.x1 + d,
            y1: self.y1 + d,
        }
    }
}

/// The screen rectangle that world box `bbox` (min, max) covers when `camera` looks at it
/// in a window of `size` pixels, cut to the window; `None` when none of it is in the
/// window. A box reaching behind the eye covers the whole window (its projection is
/// unbounded).
pub fn projected_bounds(
    camera: &Camera,
    bbox: [[f32; 3]; 2],
    size: (u32, u32),
) -> Option<ScreenRect> {
    let (w, h) = (size.0.max(1) as f32, size.1.max(1) as f32);
    let screen = ScreenRect::at(0.0, 0.0, w, h);
    let f = camera.frame();
    let aspect = w / h;
    let (mut x0, mut y0, mut x1, mut y1) = (f32::MAX, f32::MAX, f32::MIN, f32::MIN);
    for i in 0..8 {
        let p = Vec3::new(bbox[i & 1][0], bbox[(i >> 1) & 1][1], bbox[(i >> 2) & 1][2]);
        let d = p - f.eye;
        let (x, y, z) = (d.dot(f.right), d.dot(f.up), d.dot(f.forward));
        // Half the view's height at the corner's depth, world units.
        let half = match camera.projection {
            Projection::Perspective if z <= 1e-6 * camera.distance.max(1.0) => {
                return Some(screen);
            }
            Projection::Perspective => z * (camera.fov_y_deg.to_radians() * 0.5).tan(),
            Projection::Orthographic => camera.ortho_height * 0.5,
        };
        let sx = (x / (half * aspect) * 0.5 + 0.5) * w;
        let sy = (0.5 - y / half * 0.5) * h;
        (x0, y0, x1, y1) = (x0.min(sx), y0.min(sy), x1.max(sx), y1.max(sy));
    }
    let r = ScreenRect {
        x0: x0.max(0.0),
        y0: y0.max(0.0),
        x1: x1.min(w),
        y1: y1.min(h),
    };
    (r.x0 < r.x1 && r.y0 < r.y1).then_some(r)
}

/// Overlay zoom in large print: grows with the window so that text stays readable from two
/// metres on a 1080p or 4K screen (2× at 1920 × 1080), and shrinks with it down to 1 (at
/// 960 × 540 and smaller) so that the panels keep fitting. A window narrower than 16:9
/// counts by its width. 1 without large print.
pub fn zoom_for(large_print: bool, (width_px, height_px): (u32, u32), scale_factor: f64) -> f32 {
    if !large_print {
        return 1.0;
    }
    let s = scale_factor.max(0.1) as f32;
    let logical = (height_px as f32 / s).min(width_px as f32 / s * 9.0 / 16.0);
    (logical / 540.0).clamp(1.0, 3.0)
}

/// What the kiosk places: the panels' sizes at zoom 1, points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KioskPanels {
    /// The figures.
    pub stats: [f32; 2],
    /// The plots, where shown.
    pub plots: Option<[f32; 2]>,
}

/// What the panels keep clear of, best first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clear {
    /// The whole volume (its world box).
    Volume,
    /// The finest grid shown (the storm's funnel), where the whole volume fills the screen.
    Detail,
}

/// Where the kiosk's panels go.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct KioskLayout {
    /// Overlay zoom (text and panels grow with it).
    pub zoom: f32,
    /// The figures' rectangle, window pixels.
    pub stats: ScreenRect,
    /// The plots' rectangle, where they fit.
    pub plots: Option<ScreenRect>,
    /// What the panels keep clear of.
    pub clear: Clear,
}

/// The screen's corners, top left, top right, bottom left, bottom right: the figures try
/// them in this order, the plots in the reverse (they start at the bottom right).
const CORNERS: [(bool, bool); 4] = [(false, false), (true, false), (false, true), (true, true)];

/// Where the figures and plots of `panels` go in a window of `screen` pixels (`scale`
/// pixels per point at zoom 1) so that they cover none of `volume` (the volume's projected
/// bounds), or else none of `detail` (the finest grid's): each panel in a corner of the
/// screen, `gap` points from the edges and from each other, in the largest zoom from
/// `max_zoom` down to half of it (not below 1) that fits. Tried in this order: both panels
/// clear of the volume, both clear of the detail, the figures alone (plots left out) clear
/// of the volume, then of the detail.
///
/// `None` where none of that fits (a close-up whose detail fills the screen): the caller
/// then lays the panels out as outside the kiosk, at the smallest zoom, over the picture.
pub fn kiosk_layout(
    screen: (u32, u32),
    scale: f32,
    max_zoom: f32,
    gap: f32,
    panels: &KioskPanels,
    volume: Option<ScreenRect>,
    detail: Option<ScreenRect>,
) -> Option<KioskLayout> {
    let max_zoom = max_zoom.max(0.1);
    let min_zoom = (max_zoom * 0.5).max(1.0).min(max_zoom);
    let mut zooms = Vec::new();
    let mut z = max_zoom;
    while z > min_zoom {
        zooms.push(z);
        z *= 0.9;
    }
    zooms.push(min_zoom);
    tiers(panels, volume, detail).find_map(|(panels, clear, avoid)| {
        zooms.iter().find_map(|&zoom| {
            place(screen, scale * zoom, gap, &panels, avoid).map(|l| KioskLayout {
                zoom,
                clear,
                ..l
            })
        })
    })
}

/// [`kiosk_layout`] at `zoom` alone: where the panels go at the zoom the overlay has now,
/// while a change of zoom waits for the next frame.
pub fn kiosk_layout_at(
    screen: (u32, u32),
    scale: f32,
    zoom: f32,
    gap: f32,
    panels: &KioskPanels,
    volume: Option<ScreenRect>,
    detail: Option<ScreenRect>,
) -> Option<KioskLayout> {
    tiers(panels, volume, detail).find_map(|(panels, clear, avoid)| {
        place(screen, scale * zoom, gap, &panels, avoid).map(|l| KioskLayout { zoom, clear, ..l })
    })
}

/// What [`kiosk_layout`] tries, best first: both panels clear of the volume, then of the
/// detail; the figures alone clear of the volume, then of the detail.
fn tiers(
    panels: &KioskPanels,
    volume: Option<ScreenRect>,
    detail: Option<ScreenRect>,
) -> impl Iterator<Item = (KioskPanels, Clear, Option<ScreenRect>)> {
    let with_plots = panels.plots.is_some().then_some(panels.plots);
    let stats = panels.stats;
    with_plots
        .into_iter()
        .chain([None])
        .flat_map(move |plots| {
            [(Clear::Volume, volume), (Clear::Detail, detail)]
                .into_iter()
                .map(move |(clear, avoid)| (KioskPanels { stats, plots }, clear, avoid))
        })
        // A detail that is not there (no finer grid) adds nothing to try.
        .filter(move |(_, clear, _)| *clear == Clear::Volume || detail.is_some())
}

/// The panels at `ppp` pixels per point in corners clear of `avoid` and of each other.
fn place(
    screen: (u32, u32),
    ppp: f32,
    gap: f32,
    panels: &KioskPanels,
    avoid: Option<ScreenRect>,
) -> Option<KioskLayout> {
    let inner = ScreenRect::at(0.0, 0.0, screen.0 as f32, screen.1 as f32).grown(-gap * ppp);
    let corner = |size: [f32; 2], (right, bottom): (bool, bool)| {
        let (w, h) = (size[0] * ppp, size[1] * ppp);
        let x = if right { inner.x1 - w } else { inner.x0 };
        let y = if bottom { inner.y1 - h } else { inner.y0 };
        let r = ScreenRect::at(x, y, w, h);
        let clear = avoid.is_none_or(|a| !r.intersects(&a));
        (inner.contains(&r) && clear).then_some(r)
    };
    for c in CORNERS {
        let Some(stats) = corner(panels.stats, c) else {
            continue;
        };
        let Some(size) = panels.plots else {
            return Some(KioskLayout {
                zoom: 1.0,
                stats,
                plots: None,
                clear: Clear::Volume,
            });
        };
        let apart = stats.grown(gap * ppp);
        let plots = CORNERS
            .iter()
            .rev()
            .filter_map(|&p| corner(size, p))
            .find(|p| !p.intersects(&apart));
        if let Some(plots) = plots {
            return Some(KioskLayout {
                zoom: 1.0,
                stats,
                plots: Some(plots),
                clear: Clear::Volume,
            });
        }
    }
    None
}

/// What the kiosk's layout needs of the overlay's state.
pub(super) struct KioskInput {
    /// The window's size, pixels.
    pub size: (u32, u32),
    /// Large print (the largest zoom grows with the window).
    pub large_print: bool,
    /// The figures' natural size, points, as last drawn (none before the first frame).
    pub stats: Option<egui::Vec2>,
    /// The plots' panel, points, where shown.
    pub plots: Option<egui::Vec2>,
    /// The layout drawn last.
    pub last: Option<KioskLayout>,
}

/// The kiosk's layout for this frame ([`plan`]), with the zoom it asks for set on `ctx`
/// (where no room is clear of the storm: the smallest zoom the kiosk uses, and no layout:
/// the window's is drawn, over part of the picture).
pub(super) fn layout_frame(
    ctx: &egui::Context,
    player: &Player,
    input: &KioskInput,
    gap: f32,
) -> Option<KioskLayout> {
    let planned = input.stats.and_then(|stats| {
        let (size, large) = (input.size, input.large_print);
        plan(
            ctx,
            player,
            size,
            large,
            stats,
            input.plots,
            gap,
            input.last,
        )
    });
    let scale = ctx.pixels_per_point() / ctx.zoom_factor().max(1e-3);
    let max = zoom_for(input.large_print, input.size, f64::from(scale));
    let zoom = planned.map_or((max * 0.5).max(1.0).min(max), |p| p.0);
    if (zoom - ctx.zoom_factor()).abs() > 1e-3 {
        ctx.set_zoom_factor(zoom);
    }
    planned.and_then(|p| p.1)
}

/// The window of `size` pixels in points: in the pass after a change of zoom (the kiosk
/// changes it as the camera flies) egui's own screen is not yet known and stands at 10000
/// pixels.
pub(super) fn screen(ctx: &egui::Context, (w, h): (u32, u32)) -> egui::Rect {
    let ppp = ctx.pixels_per_point();
    egui::Rect::from_min_size(egui::Pos2::ZERO, egui::vec2(w as f32 / ppp, h as f32 / ppp))
}

/// The kiosk's layout for the overlay of `ctx` over `player`'s picture in a window of `size`
/// pixels (the window's own: egui's screen can lag behind a resize): the figures (their
/// natural size `stats`, points, as last drawn) and the plots (`plots`, points, where shown)
/// placed by [`kiosk_layout`]: the zoom to use, and the layout to draw with in this frame, at
/// the zoom the overlay has now (else the `last` one drawn at it, else none). `None` where
/// there is no room clear of the storm.
#[allow(clippy::too_many_arguments)]
fn plan(
    ctx: &egui::Context,
    player: &Player,
    size: (u32, u32),
    large_print: bool,
    stats: egui::Vec2,
    plots: Option<egui::Vec2>,
    gap: f32,
    last: Option<KioskLayout>,
) -> Option<(f32, Option<KioskLayout>)> {
    let ppp = ctx.pixels_per_point();
    let scale = ppp / ctx.zoom_factor().max(1e-3);
    let view = player.view();
    let volume = projected_bounds(&view.camera, view.world_bbox, size);
    let detail = detail_bbox(player).and_then(|b| projected_bounds(&view.camera, b, size));
    let max_zoom = zoom_for(large_print, size, f64::from(scale));
    let panels = KioskPanels {
        stats: [stats.x, stats.y],
        plots: plots.map(|p| [p.x, p.y]),
    };
    let best = kiosk_layout(size, scale, max_zoom, gap, &panels, volume, detail)?;
    // The rooms are those of the zoom the overlay has in this frame (a new zoom takes effect
    // in the next): panels laid out in rooms of another zoom would wrap their text, change
    // the sizes measured, and the layout would swing between two zooms.
    // Where nothing fits at this zoom (the camera came closer), the last frame's rooms serve
    // this one frame: in the corners still, rather than the window's layout for a frame.
    let now = ctx.zoom_factor();
    let same = |z: f32| (z - now).abs() <= 1e-3;
    let rooms = if same(best.zoom) {
        Some(best)
    } else {
        kiosk_layout_at(size, scale, now, gap, &panels, volume, detail)
            .or(last.filter(|l| same(l.zoom)))
    };
    Some((best.zoom, rooms))
}

/// The rooms of layout `l` in points, at `ppp` pixels per point: the figures', the plots'.
pub(super) fn rooms_in_points(l: &KioskLayout, ppp: f32) -> (egui::Rect, Option<egui::Rect>) {
    let points = |r: ScreenRect| {
        egui::Rect::from_min_max(
            egui::pos2(r.x0 / ppp, r.y0 / ppp),
            egui::pos2(r.x1 / ppp, r.y1 / ppp),
        )
    };
    (points(l.stats), l.plots.map(points))
}

/// The world box of the finest grid shown where it is finer than the others (a nested grid
/// around the subject: the storm's funnel), else `None`.
fn detail_bbox(player: &Player) -> Option<[[f32; 3]; 2]> {
    let m = player.manifest();
    let view = player.view();
    let grids: Vec<(f32, [[f32; 3]; 2])> = player
        .attribute_names()
        .iter()
        .enumerate()
        .filter(|(i, _)| {
            view.attributes
                .get(*i)
                .and_then(Option::as_ref)
                .is_some_and(|a| a.enabled)
        })
        .filter_map(|(_, name)| m.attributes.get(m.attribute_index(name)?))
        .filter_map(|a| {
            let edge = a.voxel_size.and_then(smallest_voxel_edge)?;
            let b = a.world_bbox?;
            Some((edge, b.map(|c| c.map(|x| x as f32))))
        })
        .collect();
    let coarsest = grids.iter().map(|g| g.0).fold(f32::MIN, f32::max);
    grids
        .iter()
        .filter(|g| g.0 < coarsest * 0.99)
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|g| g.1)
}

/// What to do once a window asked to be fullscreen has had time to become so.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FullscreenCheck {
    /// It is (or was not asked to be).
    Fine,
    /// It is not, but its monitor's size is known: size the window to it, and say why.
    Resize {
        /// The monitor's size, pixels.
        to: (u32, u32),
        /// What to tell the operator.
        warning: String,
    },
    /// It is not, and the monitor's size is unknown: say so.
    Warn(String),
}

/// Whether a window that asked for fullscreen (`requested`) got it: its inner size `inner`
/// against its monitor's size `monitor`, pixels. Without a window manager (a bare X server
/// such as Xvfb) nobody honours the request and the window keeps its starting size.
pub fn fullscreen_check(
    requested: bool,
    inner: (u32, u32),
    monitor: Option<(u32, u32)>,
) -> FullscreenCheck {
    if !requested {
        return FullscreenCheck::Fine;
    }
    let (w, h) = inner;
    match monitor {
        Some(m) if inner.0 >= m.0 && inner.1 >= m.1 => FullscreenCheck::Fine,
        Some(m) => FullscreenCheck::Resize {
            to: m,
            warning: format!(
                "fullscreen was asked for but the window stayed {w}x{h} (no window manager \
                 honoured it?): sized to the monitor's {}x{} instead",
                m.0, m.1
            ),
        },
        None => FullscreenCheck::Warn(format!(
            "fullscreen was asked for but the window stayed {w}x{h} (no window manager \
             honoured it?), and the monitor's size is unknown: --window-size WxH sets it"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scene::Scene;

    /// The built-in storm's data box (`storm-default-v4`'s manifest: cloud, rain, wind
    /// speed) and its funnel's nested grid.
    const STORM: [[f32; 3]; 2] = [[6000.0, 2666.7, 0.0], [32000.0, 26833.3, 13500.0]];
    const FUNNEL: [[f32; 3]; 2] = [[10083.3, 13666.7, 0.0], [13166.7, 15166.7, 937.5]];
    /// The kiosk's panels at zoom 1, points: the full figures (as drawn at 1920 × 1080)
    /// and two plots.
    const PANELS: KioskPanels = KioskPanels {
        stats: [435.0, 265.0],
        plots: Some([380.0, 316.0]),
    };

    /// The storm scene's camera at `t` seconds along its camera path, for `size`.
    fn storm_camera(t: f64, size: (u32, u32)) -> Camera {
        let scene = Scene::builtin();
        let aspect = size.0 as f32 / size.1 as f32;
        let fitted = scene.camera.resolve(STORM, aspect);
        scene
            .camera_path
            .as_ref()
            .expect("a camera path")
            .at(t, &fitted)
    }

    #[test]
    fn fullscreen_that_did_not_take_is_said_once_and_fixed_where_it_can_be() {
        assert_eq!(
            fullscreen_check(false, (1280, 720), Some((1920, 1080))),
            FullscreenCheck::Fine
        );
        assert_eq!(
            fullscreen_check(true, (1920, 1080), Some((1920, 1080))),
            FullscreenCheck::Fine
        );
        match fullscreen_check(true, (1280, 720), Some((1920, 1080))) {
            FullscreenCheck::Resize { to, warning } => {
                assert_eq!(to, (1920, 1080));
                assert!(
                    warning.contains("1280x720") && warning.contains("1920x1080"),
                    "{warning}"
                );
            }
            other => panic!("{other:?}"),
        }
        match fullscreen_check(true, (1280, 720), None) {
            FullscreenCheck::Warn(w) => assert!(w.contains("1280x720"), "{w}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_narrow_volume_in_the_middle_keeps_the_largest_print() {
        // Between the figures (870 pixels wide at zoom 2) and the plots (760).
        let v = ScreenRect::at(900.0, 300.0, 120.0, 700.0);
        let l = kiosk_layout((1920, 1080), 1.0, 2.0, 12.0, &PANELS, Some(v), None).unwrap();
        assert_eq!(l.zoom, 2.0);
        assert_eq!(l.clear, Clear::Volume);
        assert!(!l.stats.intersects(&v));
        assert!(!l.plots.unwrap().intersects(&v));
        assert!(!l.plots.unwrap().intersects(&l.stats));
    }

    #[test]
    fn a_wider_volume_shrinks_the_print_before_covering_it() {
        // Room left of and right of it only at a smaller zoom.
        let v = ScreenRect::at(700.0, 0.0, 520.0, 1080.0);
        let l = kiosk_layout((1920, 1080), 1.0, 2.0, 12.0, &PANELS, Some(v), None).unwrap();
        assert!(l.zoom < 2.0 && l.zoom >= 1.0, "{l:?}");
        assert!(
            !l.stats.intersects(&v) && !l.plots.unwrap().intersects(&v),
            "{l:?}"
        );
    }

    #[test]
    fn the_layout_at_one_zoom_keeps_that_zoom_or_says_none() {
        // The wide volume leaves room at zoom 1.458 (figures left, plots right), not at 2.
        let v = ScreenRect::at(700.0, 0.0, 520.0, 1080.0);
        let at = |z| kiosk_layout_at((1920, 1080), 1.0, z, 12.0, &PANELS, Some(v), None);
        assert_eq!(at(2.0), None);
        let l = at(1.4).unwrap();
        assert_eq!(l.zoom, 1.4);
        assert!(
            !l.stats.intersects(&v) && !l.plots.unwrap().intersects(&v),
            "{l:?}"
        );
    }

    #[test]
    fn no_room_anywhere_is_said() {
        let all = ScreenRect::at(0.0, 0.0, 1920.0, 1080.0);
        assert_eq!(
            kiosk_layout((1920, 1080), 1.0, 2.0, 12.0, &PANELS, Some(all), Some(all)),
            None
        );
    }

    #[test]
    fn a_box_behind_the_eye_covers_the_screen() {
        let cam = storm_camera(5.5, (1920, 1080));
        let around_eye = {
            let e = cam.frame().eye;
            [
                [e.x - 10.0, e.y - 10.0, e.z - 10.0],
                [e.x + 10.0, e.y + 10.0, e.z + 10.0],
            ]
        };
        let r = projected_bounds(&cam, around_eye, (1920, 1080)).unwrap();
        assert_eq!(r, ScreenRect::at(0.0, 0.0, 1920.0, 1080.0));
    }

    /// At the show floor's screens and along the storm scene's camera path (its keys, and
    /// between them), the panels stay inside the screen, apart, and clear of the storm: of
    /// its whole box where it leaves room, else of the funnel. (The storm's box fills a
    /// 16:9 screen at every key of its camera path, so it is the funnel they keep clear of there.)
    #[test]
    fn the_storm_scene_stays_in_view_at_1080p_and_4k() {
        for (size, scale) in [
            ((1920, 1080), 1.0),
            ((3840, 2160), 1.0),
            ((3840, 2160), 2.0),
        ] {
            let max_zoom = zoom_for(true, size, scale);
            let screen = ScreenRect::at(0.0, 0.0, size.0 as f32, size.1 as f32);
            for t in [0.0, 1.5, 3.0, 5.5, 7.5, 9.5, 13.0, 15.0] {
                let cam = storm_camera(t, size);
                let volume = projected_bounds(&cam, STORM, size);
                let detail = projected_bounds(&cam, FUNNEL, size);
                let what = format!("{size:?} scale {scale} at {t} s: {volume:?} {detail:?}");
                let l = kiosk_layout(size, scale as f32, max_zoom, 12.0, &PANELS, volume, detail)
                    .unwrap_or_else(|| panic!("{what}: no layout"));
                let keep = match l.clear {
                    Clear::Volume => volume,
                    Clear::Detail => detail,
                };
                let plots = l.plots.unwrap_or_else(|| panic!("{what}: no plots: {l:?}"));
                for (name, r) in [("stats", l.stats), ("plots", plots)] {
                    assert!(screen.contains(&r), "{what}: {name} {r:?} off the screen");
                    if let Some(k) = keep {
                        assert!(!r.intersects(&k), "{what}: {name} {r:?} covers {k:?}");
                    }
                    if let Some(d) = detail {
                        assert!(!r.intersects(&d), "{what}: {name} {r:?} covers the funnel");
                    }
                }
                assert!(!l.stats.intersects(&plots), "{what}: {l:?}");
                assert!(l.zoom >= 1.0 && l.zoom <= max_zoom, "{what}: {l:?}");
            }
        }
    }
}
