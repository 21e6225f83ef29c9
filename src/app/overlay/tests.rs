//! The overlay's figures and plot axes.

use super::*;
use crate::app::stats::PathStats;
use proptest::prelude::*;

/// Random arrivals and renders on one path (gaps from sub-millisecond to tens of seconds,
/// switched away and back at times), and when the path last became active (its warm-up
/// began).
fn stats_from(events: &[(f64, u64, bool, bool)]) -> (PathStats, f64, f64) {
    let mut s = PathStats::default();
    s.set_active(true, 0.0);
    let (mut t, mut warm_from) = (0.0, 0.0);
    let mut active = true;
    for &(gap, bytes, render, toggle) in events {
        t += gap;
        if toggle {
            active = !active;
            s.set_active(active, t);
            if active {
                warm_from = t;
            }
        }
        if render {
            s.rendered(t, None);
        } else {
            s.arrived(t, bytes, 0.01);
        }
        s.sample(t, 1);
    }
    (s, t, warm_from)
}

fn events() -> impl Strategy<Value = Vec<(f64, u64, bool, bool)>> {
    let gap = prop_oneof![0.0..0.01f64, 0.0..0.5f64, 0.0..30.0f64];
    prop::collection::vec(
        (
            gap,
            1u64..3_000_000_000,
            any::<bool>(),
            prop::bool::weighted(0.05),
        ),
        0..80,
    )
}

/// The numbers of a rate line: `NAME  NOW now   AVG avg   PEAK peak`.
fn line_numbers(line: &str) -> (String, String, String) {
    let w: Vec<&str> = line.split_whitespace().collect();
    let at = |word: &str| {
        let i = w.iter().position(|x| *x == word).expect(word);
        w[i - 1].to_string()
    };
    (at("now"), at("avg"), at("peak"))
}

proptest! {
    /// For the same path at the same moment, the overlay's lines and its table say the
    /// same rendered frames/s (and delivered frames/s and GB/s), and no peak reads below
    /// a **now** taken after the warm-up (certain once the longest window has passed).
    #[test]
    fn lines_and_table_agree(direct in events(), host in events(), later in 0.0..5.0f64,
                             host_active in any::<bool>()) {
        let (d, td, wd) = stats_from(&direct);
        let (h, th, wh) = stats_from(&host);
        let now = td.max(th) + later;
        let (fd, fh) = (d.figures(now), h.figures(now));
        let table = figure_table(&fd, &fh, true);
        // Columns: name, direct avg, direct peak, host avg, host peak.
        let (active, col, warm_from) = if host_active { (&fh, 3, wh) } else { (&fd, 1, wd) };
        let lines = rate_lines(active);
        for (line, name) in lines.iter().zip(["frames/s rendered", "frames/s delivered", "GB/s"]) {
            prop_assert!(line.starts_with(name), "{line}");
            let (n, avg, peak) = line_numbers(line);
            let cell = |reading: &str| {
                let row = table
                    .iter()
                    .find(|r| r[0] == name)
                    .unwrap_or_else(|| panic!("no {name} row in {table:?}"));
                prop_assert_eq!(&table[0][col + usize::from(reading == "peak")],
                    &format!("{} {reading}", if host_active { "host" } else { "direct" }));
                Ok(row[col + usize::from(reading == "peak")].clone())
            };
            prop_assert_eq!(&avg, &cell("avg")?, "{} vs {:?}", line, table);
            prop_assert_eq!(&peak, &cell("peak")?, "{} vs {:?}", line, table);
            let num = |s: &str| s.parse::<f64>().unwrap();
            prop_assert!(num(&avg) >= 0.0 && num(&n) >= 0.0, "{}", line);
            prop_assert!(peak == NO_PEAK || num(&peak) >= 0.0, "{}", line);
            if now - warm_from >= crate::pipeline::rate::MAX_WINDOW_S {
                prop_assert!(num(&peak) >= num(&n), "{}", line);
            }
        }
    }
}

#[test]
fn small_rates_keep_two_significant_digits() {
    assert_eq!(rate_text(0.0), "0.00");
    assert_eq!(rate_text(0.0017), "0.0017");
    assert_eq!(rate_text(0.05), "0.050");
    assert_eq!(rate_text(0.5), "0.50");
    assert_eq!(rate_text(23.456), "23.5");
    assert_eq!(rate_text(123.4), "123");
    assert_eq!(rate_text(f64::NAN), "0.00");
}

#[test]
fn plot_axes_start_at_zero_and_fit_the_data() {
    assert_eq!(plot_top([f64::NAN, f64::NAN].into_iter()), 1.0);
    assert_eq!(plot_top(std::iter::empty()), 1.0);
    let top = plot_top([0.001, f64::NAN, 0.002].into_iter());
    assert!(top > 0.002 && top < 0.003, "{top}");
}
