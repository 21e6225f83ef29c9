//! The sweep as a PNG line plot (GB/s against threads, one line per I/O size and queue
//! depth, error bars from the smallest to the largest of repeated runs), drawn with
//! `plotters` into an RGB buffer and encoded with `png`. Labels use a font compiled into the
//! binary (the one egui embeds), so no system font is needed; ticks fall on 1-2-5 steps.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint};
use plotters::prelude::*;

use super::sweep::SweepPoint;

/// Why a sweep plot was not drawn or written.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The font compiled into the binary could not be read.
    #[error("the plot font embedded in this binary could not be read")]
    Font,
    /// plotters failed to draw.
    #[error("cannot draw the sweep plot: {0}")]
    Draw(#[source] Box<dyn std::error::Error + Send + Sync>),
    /// The PNG could not be written.
    #[error("cannot write the sweep plot {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

type Result<T> = std::result::Result<T, PlotError>;

/// A drawing error of plotters, kept as the source of [`PlotError::Draw`].
fn drawn<E: std::error::Error + Send + Sync + 'static>(e: E) -> PlotError {
    PlotError::Draw(Box::new(e))
}

/// Width of the plot, pixels.
pub const WIDTH: u32 = 1000;
/// Height of the plot, pixels.
pub const HEIGHT: u32 = 600;

/// Line colours (matplotlib's "tab10"): distinct, and all readable on white.
const PALETTE: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// The family name the embedded font is registered under.
const FONT: &str = "sans-serif";

/// Registers the embedded font with plotters, once per process.
fn font() -> Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, epaint_default_fonts::UBUNTU_LIGHT)
            .is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

/// A round step for about `target` intervals over `0..=max`: 1, 2 or 5 times a power of
/// ten. Returns the step and the axis top (the first multiple of the step at or above
/// `max`); an empty or non-finite range gets `(1, 1)` scaled to nothing.
pub fn nice_ticks(max: f64, target: usize) -> (f64, f64) {
    if !max.is_finite() || max <= 0.0 {
        return (0.2, 1.0);
    }
    let rough = max / target.max(1) as f64;
    let pow = 10f64.powf(rough.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * pow)
        .find(|s| *s >= rough * (1.0 - 1e-9))
        .unwrap_or(10.0 * pow);
    let top = (max / step - 1e-9).ceil().max(1.0) * step;
    (step, top)
}

/// Tick values `0, step, 2·step, … top`.
pub fn tick_values(step: f64, top: f64) -> Vec<f64> {
    let n = (top / step).round() as usize;
    (0..=n).map(|i| i as f64 * step).collect()
}

/// A linear axis over `lo..hi` whose ticks are exactly the values given (plotters would
/// otherwise choose its own).
struct TickedAxis {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for TickedAxis {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        let f = if span > 0.0 {
            (value - self.lo) / span
        } else {
            0.0
        };
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, _hint: Hint) -> Vec<f64> {
        self.ticks.clone()
    }

    fn range(&self) -> std::ops::Range<f64> {
        self.lo..self.hi
    }
}

/// An I/O size as people write it (`64 KiB`, `1 MiB`).
fn size_label(io: usize) -> String {
    if io >= 1 << 20 && io.is_multiple_of(1 << 20) {
        format!("{} MiB", io >> 20)
    } else if io.is_multiple_of(1024) {
        format!("{} KiB", io >> 10)
    } else {
        format!("{io} B")
    }
}

/// Draws the sweep into an RGB buffer of [`WIDTH`] × [`HEIGHT`].
pub fn render(points: &[SweepPoint], title: &str) -> Result<Vec<u8>> {
    font()?;
    // One line per (I/O size, queue depth).
    let mut series: Vec<(usize, usize)> =
        points.iter().map(|p| (p.io_size, p.queue_depth)).collect();
    series.sort_unstable();
    series.dedup();
    let depths = {
        let mut d: Vec<usize> = series.iter().map(|s| s.1).collect();
        d.sort_unstable();
        d.dedup();
        d.len()
    };
    let tmax = points.iter().map(|p| p.threads).max().unwrap_or(1).max(2);
    // x is log2(threads), ticks at every power of two.
    let xmax = (tmax as f64).log2().ceil();
    let xticks: Vec<f64> = (0..=xmax as u32).map(f64::from).collect();
    let ymax = points
        .iter()
        .map(|p| p.gbps.max(p.gbps_spread.max))
        .fold(0.0f64, f64::max);
    let (step, top) = nice_ticks(ymax, 6);
    let yticks = tick_values(step, top);
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10().floor()) as usize
    };

    let mut buf = vec![255u8; (WIDTH * HEIGHT * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(drawn)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, (FONT, 26))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(
                // A little room either side so the end points are drawn whole.
                TickedAxis {
                    lo: -0.1,
                    hi: xmax + 0.1,
                    ticks: xticks,
                },
                TickedAxis {
                    lo: 0.0,
                    hi: top,
                    ticks: yticks,
                },
            )
            .map_err(drawn)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_desc("I/O threads")
            .y_desc("GB/s (10^9 bytes/s)")
            .x_label_formatter(&|x| format!("{}", 2f64.powf(*x).round()))
            .y_label_formatter(&|y| format!("{y:.decimals$}"))
            .label_style((FONT, 16))
            .axis_desc_style((FONT, 18))
            .draw()
            .map_err(drawn)?;
        for (i, &(io, qd)) in series.iter().enumerate() {
            let color = PALETTE[i % PALETTE.len()];
            let mine: Vec<&SweepPoint> = points
                .iter()
                .filter(|p| p.io_size == io && p.queue_depth == qd)
                .collect();
            let x = |p: &SweepPoint| (p.threads.max(1) as f64).log2();
            let mut pts: Vec<(f64, f64)> = mine.iter().map(|p| (x(p), p.gbps)).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let label = if depths > 1 {
                format!("{}, queue depth {qd}", size_label(io))
            } else {
                size_label(io)
            };
            // Error bars: the runs' smallest to largest, where there were several.
            chart
                .draw_series(mine.iter().filter(|p| p.runs > 1).map(|p| {
                    PathElement::new(
                        vec![(x(p), p.gbps_spread.min), (x(p), p.gbps_spread.max)],
                        color.stroke_width(2),
                    )
                }))
                .map_err(drawn)?;
            chart
                .draw_series(LineSeries::new(pts.clone(), color.stroke_width(3)))
                .map_err(drawn)?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(drawn)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()
            .map_err(drawn)?;
        root.present().map_err(drawn)?;
    }
    Ok(buf)
}

/// Writes the sweep as a PNG: x = threads (powers of two), y = GB/s, one line per I/O size.
pub fn write_png(points: &[SweepPoint], title: &str, path: &Path) -> Result<()> {
    let px = render(points, title)?;
    let write = |source: std::io::Error| PlotError::Write {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::create(path).map_err(write)?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), WIDTH, HEIGHT);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    let err = |e: png::EncodingError| write(std::io::Error::other(e));
    let mut w = enc.write_header().map_err(err)?;
    w.write_image_data(&px).map_err(err)?;
    w.finish().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round() {
        // The old plot labelled 0, 2.4, 4.7, 7.1, 9.5, 11.9 for a peak of 10.8.
        assert_eq!(nice_ticks(10.8, 6), (2.0, 12.0));
        assert_eq!(
            tick_values(2.0, 12.0),
            vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0, 12.0]
        );
        assert_eq!(nice_ticks(5.36, 6), (1.0, 6.0));
        assert_eq!(nice_ticks(100.0, 5), (20.0, 100.0));
        let (s, t) = nice_ticks(0.0123, 6);
        assert!(
            (s - 0.005).abs() < 1e-12 && (t - 0.015).abs() < 1e-12,
            "{s} {t}"
        );
        assert_eq!(nice_ticks(0.0, 6), (0.2, 1.0));
        assert_eq!(nice_ticks(f64::NAN, 6), (0.2, 1.0));
        for max in [0.7, 1.0, 3.3, 47.0, 180.0, 999.0] {
            let (step, top) = nice_ticks(max, 6);
            let mantissa = step / 10f64.powf(step.log10().floor());
            assert!(
                [1.0, 2.0, 5.0].iter().any(|m| (m - mantissa).abs() < 1e-9),
                "{max}: step {step}"
            );
            assert!(top >= max && top - step < max, "{max}: top {top}");
        }
    }

    #[test]
    fn the_plot_decodes_at_its_size() {
        let points: Vec<SweepPoint> = [(1, 1 << 16, 0.8), (2, 1 << 16, 1.5), (4, 1 << 20, 3.9)]
            .iter()
            .map(|&(threads, io_size, gbps)| SweepPoint {
                threads,
                io_size,
                queue_depth: 8,
                runs: 3,
                gbps,
                gbps_spread: crate::bench::report::Spread {
                    min: gbps * 0.9,
                    median: gbps,
                    max: gbps * 1.1,
                },
                gibps: gbps * 1e9 / (1u64 << 30) as f64,
                avg_latency_us: 10.0,
                frames_per_s: 1.0,
                cpu_seconds_per_gb: 0.1,
                engine: "cpu-only".into(),
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sweep.png");
        write_png(&points, "cpu-only sweep", &path).unwrap();
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&path).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut px = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut px).unwrap();
        assert_eq!((info.width, info.height), (WIDTH, HEIGHT));
        // Something was drawn: text and lines leave dark pixels on the white page.
        let dark = px.chunks(3).filter(|p| p.iter().all(|&c| c < 100)).count();
        assert!(dark > 1000, "{dark} dark pixels");
        // An empty sweep still draws axes rather than failing.
        assert!(render(&[], "empty").is_ok());
    }

    #[test]
    fn a_plot_that_cannot_be_written_names_the_file_and_keeps_the_cause() {
        let path = Path::new("/nonexistent-supercell-dir/sweep.png");
        let e = write_png(&[], "empty", path).unwrap_err();
        assert!(
            matches!(&e, PlotError::Write { path: p, .. } if p == path),
            "{e}"
        );
        assert!(
            e.to_string()
                .contains("/nonexistent-supercell-dir/sweep.png"),
            "{e}"
        );
        let cause = std::error::Error::source(&e).expect("the I/O error is kept");
        assert!(cause.to_string().contains("No such file"), "{cause}");
    }
}
