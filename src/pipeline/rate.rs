//! Rates of events over wall time: one definition of **now**, **peak** and **warm-up** for
//! every figure that uses those words (the player's overlay and headless JSON through
//! `app::stats`, the several-GPU figures of [`super::multi`]). Times are seconds on the
//! caller's clock; everything here is pure, so tests drive it with a fake clock.
//!
//! # now
//!
//! The events of a window that ends at `t`, divided by the window's length. The window
//! reaches back to the newest event that lies at least [`MIN_WINDOW_S`] before `t` and has
//! at least [`MIN_EVENTS`] events after it (that event itself is not counted):
//!
//! * where events come several a second, that is about the last second;
//! * where they come slower, the window stretches over the last [`MIN_EVENTS`] intervals: a
//!   renderer that finishes a frame every 3.7 s reads 0.27/s right after each frame, not 1/s
//!   (a fixed one-second window reads 1/s at every frame and 0 in between);
//! * it never reaches back more than [`MAX_WINDOW_S`]: with no such event in that span (or
//!   fewer events than that since the start), it counts the events since the start, or of the
//!   last [`MAX_WINDOW_S`], over at least [`MIN_WINDOW_S`].
//!
//! So once a second has passed without an event, the reading falls steadily (it is then
//! [`MIN_EVENTS`] ÷ the time since the [`MIN_EVENTS`]-th newest event) and reaches 0 when
//! nothing has arrived for [`MAX_WINDOW_S`]. It depends only on the events and `t`: a reading
//! taken on a timer (the plots) says the same as one taken when an event arrives.
//!
//! # warm-up and peak
//!
//! A frame path starts with its ring of slots empty; its reader fills the ring as fast as the
//! storage allows, whatever the renderer does, and only then is paced by the frames the
//! renderer gives back. **Warm-up** is that filling: from the start (a reset, or the path
//! becoming active) until as many frames have arrived as the ring has slots. It is reported
//! apart (its length, frames and bytes), and **peak** is the highest **now** reading whose
//! window lies wholly after the warm-up (`None` until there is one): the ring filling at
//! start-up is not a rate the path sustains.

use std::collections::VecDeque;

/// The shortest **now** window, seconds.
pub const MIN_WINDOW_S: f64 = 1.0;
/// Events a **now** window holds at least, where [`MAX_WINDOW_S`] allows.
pub const MIN_EVENTS: u64 = 2;
/// The longest **now** window, seconds: after this long without events, **now** reads 0.
pub const MAX_WINDOW_S: f64 = 10.0;

/// A **now** reading: events and amount (bytes) per second over a window ending at `at`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Reading {
    /// Events per second.
    pub per_s: f64,
    /// Amount (the events' bytes) per second.
    pub amount_per_s: f64,
    /// The window's length, seconds (it ends at the time of the reading).
    pub window_s: f64,
    /// When the window begins (the reading counts what came after).
    pub from: f64,
}

impl Reading {
    fn over(events: u64, amount: u64, from: f64, to: f64, window_s: f64) -> Reading {
        Reading {
            per_s: events as f64 / window_s,
            amount_per_s: amount as f64 / window_s,
            window_s,
            from: from.min(to),
        }
    }
}

/// Timed events (with an amount each, e.g. bytes) and their **now** reading.
#[derive(Clone, Debug)]
pub struct RateWindow {
    /// (time, amount), oldest first.
    events: VecDeque<(f64, u64)>,
    /// When counting began (events before it are not known).
    start: f64,
    /// Events older than this many seconds are forgotten (at least [`MAX_WINDOW_S`]).
    keep_s: f64,
}

impl Default for RateWindow {
    fn default() -> RateWindow {
        RateWindow::new(0.0, MAX_WINDOW_S)
    }
}

impl RateWindow {
    /// Counting from `start`, keeping `keep_s` seconds of events (at least [`MAX_WINDOW_S`];
    /// more where readings are asked for times in the past, as the plots' sampling does).
    pub fn new(start: f64, keep_s: f64) -> RateWindow {
        RateWindow {
            events: VecDeque::new(),
            start,
            keep_s: keep_s.max(MAX_WINDOW_S),
        }
    }

    /// Forgets every event; counting starts again at `start`.
    pub fn restart(&mut self, start: f64) {
        self.events.clear();
        self.start = start;
    }

    /// An event of `amount` at `t` (times never decrease).
    pub fn record(&mut self, t: f64, amount: u64) {
        self.events.push_back((t, amount));
        let old = t - self.keep_s;
        while self.events.front().is_some_and(|&(at, _)| at < old) {
            self.events.pop_front();
        }
    }

    /// The **now** reading at `t` (see the module documentation); events after `t` are
    /// left out, so a reading for a past moment is the one that moment would have had.
    pub fn reading(&self, t: f64) -> Reading {
        let (mut n, mut amount) = (0u64, 0u64);
        for &(at, a) in self.events.iter().rev().skip_while(|&&(at, _)| at > t) {
            let age = t - at;
            if age >= MAX_WINDOW_S {
                break;
            }
            if age >= MIN_WINDOW_S && n >= MIN_EVENTS {
                return Reading::over(n, amount, at, t, age);
            }
            n += 1;
            amount += a;
        }
        let window = (t - self.start).clamp(MIN_WINDOW_S, MAX_WINDOW_S);
        Reading::over(n, amount, t - window, t, window)
    }
}

/// The highest **now** readings (events and amount, each on its own) whose windows lie
/// wholly after a given moment (the end of the warm-up).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Peak {
    /// Highest events per second, if any reading qualified.
    pub per_s: Option<f64>,
    /// Highest amount per second, if any reading qualified.
    pub amount_per_s: Option<f64>,
}

impl Peak {
    /// Offers the reading `r`: it counts when its window starts at or after `after`
    /// (`None`: the warm-up has not ended, so nothing counts yet).
    pub fn offer(&mut self, r: Reading, after: Option<f64>) {
        if after.is_none_or(|a| r.from < a) {
            return;
        }
        let higher = |p: Option<f64>, x: f64| Some(p.map_or(x, |p| p.max(x)));
        self.per_s = higher(self.per_s, r.per_s);
        self.amount_per_s = higher(self.amount_per_s, r.amount_per_s);
    }

    /// This peak, or also `r` where it qualifies: what a figure shows at the time of `r`, so
    /// that a peak shown never reads below a qualifying **now** shown beside it.
    pub fn with(mut self, r: Reading, after: Option<f64>) -> Peak {
        self.offer(r, after);
        self
    }
}

/// The warm-up of a path (see the module documentation): from `from` until `slots` frames
/// have arrived.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WarmUp {
    /// When it began (a reset, or the path becoming active).
    pub from: f64,
    /// Frames it lasts: the ring's slots.
    pub slots: u64,
    /// Frames and bytes arrived since it began, up to its end.
    pub frames: u64,
    /// Bytes of those frames.
    pub bytes: u64,
    /// When the last of its frames arrived (`None` while the ring is still filling).
    pub end: Option<f64>,
}

impl WarmUp {
    /// A warm-up beginning at `from` for a ring of `slots` (0: none, it has ended at once).
    pub fn begin(from: f64, slots: u64) -> WarmUp {
        WarmUp {
            from,
            slots,
            frames: 0,
            bytes: 0,
            end: (slots == 0).then_some(from),
        }
    }

    /// A frame of `bytes` arrived at `t`: counted while the ring is still filling.
    pub fn arrived(&mut self, t: f64, bytes: u64) {
        if self.end.is_some() {
            return;
        }
        self.frames += 1;
        self.bytes += bytes;
        if self.frames >= self.slots {
            self.end = Some(t);
        }
    }

    /// How long it took, seconds, once it has ended.
    pub fn seconds(&self) -> Option<f64> {
        self.end.map(|e| (e - self.from).max(0.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `count` events, one every `interval` seconds from `interval` on, 1000 bytes each; and
    /// the time of the last.
    fn steady(count: u32, interval: f64) -> (RateWindow, f64) {
        let mut w = RateWindow::new(0.0, 60.0);
        for k in 1..=count {
            w.record(k as f64 * interval, 1000);
        }
        (w, count as f64 * interval)
    }

    #[test]
    fn a_slow_renderer_reads_its_rate_not_one_per_second() {
        // One frame every 3.7 s (0.27 frames/s): a one-second window read 1.00 at each frame.
        let (w, last) = steady(10, 3.7);
        let at_frame = w.reading(last);
        assert!((at_frame.per_s - 1.0 / 3.7).abs() < 1e-9, "{at_frame:?}");
        // Between frames it reads a little less, never 1 and never 0.
        for dt in [0.1, 1.0, 2.0, 3.6] {
            let r = w.reading(last + dt);
            assert!(r.per_s > 0.15 && r.per_s <= 1.0 / 3.7 + 1e-9, "{dt}: {r:?}");
        }
    }

    #[test]
    fn steady_rates_read_exactly_at_each_event() {
        for interval in [0.01f64, 0.09, 0.3, 0.7, 1.3, 4.0] {
            let (w, last) = steady((3.0 / interval).max(40.0) as u32, interval);
            let r = w.reading(last);
            assert!((r.per_s * interval - 1.0).abs() < 1e-6, "{interval}: {r:?}");
            assert!((r.amount_per_s - 1000.0 * r.per_s).abs() < 1e-6);
        }
    }

    #[test]
    fn now_decays_to_zero_when_nothing_arrives() {
        // 100 events a second for 5 s, then nothing.
        let (w, last) = steady(500, 0.01);
        assert_eq!(last, 5.0);
        assert!((w.reading(5.0).per_s - 100.0).abs() < 1.5);
        let mut before = f64::INFINITY;
        for k in 0..=100 {
            let t = 6.0 + k as f64 * 0.1;
            let r = w.reading(t).per_s;
            assert!(r <= before + 1e-12, "rose at {t}: {r} after {before}");
            assert!(r <= MIN_EVENTS as f64 / (t - 5.0) + 1e-9, "at {t}: {r}");
            before = r;
        }
        assert_eq!(w.reading(5.0 + MAX_WINDOW_S).per_s, 0.0);
        assert_eq!(w.reading(100.0).amount_per_s, 0.0);
    }

    #[test]
    fn a_reading_in_the_past_ignores_later_events() {
        let (w, _) = steady(40, 0.5);
        let mut early = RateWindow::new(0.0, 60.0);
        for k in 1..=20 {
            early.record(k as f64 * 0.5, 1000);
        }
        assert_eq!(w.reading(10.0), early.reading(10.0));
    }

    #[test]
    fn the_first_second_rises_and_a_lone_event_is_not_a_huge_rate() {
        let mut w = RateWindow::new(2.0, 60.0);
        assert_eq!(w.reading(2.5).per_s, 0.0);
        w.record(2.001, 1000);
        assert_eq!(w.reading(2.002).per_s, 1.0);
        assert_eq!(w.reading(6.0).per_s, 0.25);
    }

    #[test]
    fn peak_leaves_out_the_warm_up() {
        // A ring of 8 slots fills in 0.8 s (10 frames/s), then a frame every 2 s.
        let mut w = RateWindow::new(0.0, 60.0);
        let mut warm = WarmUp::begin(0.0, 8);
        let mut peak = Peak::default();
        let arrive = |t: f64, w: &mut RateWindow, warm: &mut WarmUp, peak: &mut Peak| {
            w.record(t, 1000);
            warm.arrived(t, 1000);
            peak.offer(w.reading(t), warm.end);
        };
        for k in 1..=8 {
            arrive(k as f64 * 0.1, &mut w, &mut warm, &mut peak);
        }
        assert_eq!(warm.end, Some(8.0 * 0.1));
        assert_eq!((warm.frames, warm.bytes), (8, 8000));
        assert!((warm.seconds().unwrap() - 0.8).abs() < 1e-12);
        // Right after the warm-up, now reads the burst; the peak has no reading yet.
        assert!(w.reading(0.8).per_s >= 8.0);
        assert_eq!(peak, Peak::default());
        for k in 1..=20 {
            let t = 0.8 + k as f64 * 2.0;
            arrive(t, &mut w, &mut warm, &mut peak);
            for tick in 1..8 {
                let s = t + tick as f64 * 0.25;
                peak.offer(w.reading(s), warm.end);
            }
        }
        let p = peak.per_s.expect("a reading after the warm-up");
        assert!((p - 0.5).abs() < 1e-9, "peak {p}");
        assert!((peak.amount_per_s.unwrap() - 500.0).abs() < 1e-6);
    }

    #[test]
    fn no_ring_means_no_warm_up() {
        let warm = WarmUp::begin(3.0, 0);
        assert_eq!(warm.seconds(), Some(0.0));
    }
}
