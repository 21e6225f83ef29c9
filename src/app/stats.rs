//! Rolling figures of one frame path (direct or host): what the overlay shows live and what a
//! headless run reports. Times are seconds since the player started.
//!
//! # Definitions (the overlay, its help card, the headless JSON and `docs/PLAY-JSON.md` use
//! these and no others)
//!
//! * A frame is **delivered** when all of its bytes are where the renderer reads them (GPU
//!   memory; for the host path, its copy to the GPU is done) and it passed its checks. Frames
//!   that fail, and frames of the other path still landing after a switch, do not count.
//! * A frame is **rendered** when the render of a newly shown frame has finished on the GPU.
//!   Redrawing the same frame (the camera moved, the window was resized) does not count.
//! * **Active time** is the time the path has been the selected one since its statistics
//!   were last reset; switching to the other path stops its clock. Time spent paused counts
//!   (the averages say what the viewer got while the path was selected).
//! * **now**: the rate over the last second of wall time, the window stretched over the last
//!   two frames where they come slower than that (at most 10 s), as
//!   [`crate::pipeline::rate`] defines it: a renderer at 0.27 frames/s reads 0.27, and the
//!   reading falls to 0 when nothing arrives.
//! * **avg**: everything since the reset divided by the active time (0 before any active time).
//! * **warm-up**: from the reset (or the path becoming active) until as many frames as the
//!   path's ring has slots were delivered: the reader fills the empty ring unpaced by the
//!   renderer. Reported apart (seconds, frames, bytes).
//! * **peak**: the highest **now** reading whose window lies wholly after the warm-up (taken
//!   at every arrival and render and every quarter second), `None` until there is one. It
//!   can read below **avg**, whose frames include the warm-up's.
//!
//! So `now ≥ 0`, `avg ≥ 0`, and `peak ≥ now` once the warm-up has ended and the **now**
//! window lies after it. GB/s are 1e9 bytes per second of delivered frames; the plots draw
//! the **now** readings at every quarter second of wall time (filled in on the next tick
//! when a slow render held the loop).

use std::collections::VecDeque;

use serde::Serialize;

use crate::pipeline::rate::{Peak, RateWindow, WarmUp};
use crate::probe::percentile;

/// How far back the rolling series reach (the plots show 30 s of it by default; a scene's
/// `plot_window_s` may ask for all of it).
const HISTORY_S: f64 = crate::scene::MAX_PLOT_WINDOW_S;
/// Time between two points of the plot series, seconds of wall time.
pub const SAMPLE_EVERY_S: f64 = 0.25;
/// Latencies kept for percentiles (the most recent ones).
const MAX_LATENCIES: usize = 100_000;

/// One point of a plot series: time and value.
pub type Sample = (f64, f64);

/// Rolling statistics of one path.
#[derive(Clone, Debug)]
pub struct PathStats {
    /// Arrivals: completion time and bytes.
    arrivals: RateWindow,
    /// Renders of newly shown frames (their times).
    renders: RateWindow,
    /// Request → arrival latencies, ms.
    latencies: VecDeque<f64>,
    /// Scrub latencies, ms (jump → exact frame on screen).
    scrubs: Vec<f64>,
    /// Plot series: GB/s and rendered frames/s **now**, every [`SAMPLE_EVERY_S`].
    gbps_series: VecDeque<Sample>,
    fps_series: VecDeque<Sample>,
    /// Time of the last point of the series.
    last_sample: f64,
    /// Totals since the last reset.
    bytes: u64,
    frames: u64,
    rendered: u64,
    gpu_ms_sum: f64,
    gpu_ms_n: u64,
    /// Seconds this path has been the active one, and when it last became active.
    active_s: f64,
    active_since: Option<f64>,
    /// Slots of the path's ring (the warm-up's frames).
    ring_slots: u64,
    /// The latest warm-up (since the reset or the path last became active).
    warm_up: WarmUp,
    /// Highest **now** readings after the warm-up: delivered (frames/s and bytes/s) and
    /// rendered (frames/s).
    delivered_peak: Peak,
    rendered_peak: Peak,
    /// Frames-in-flight samples (sum, count, max).
    inflight_sum: f64,
    inflight_n: u64,
    inflight_max: usize,
    /// Host path uploads (host slot → GPU buffer): bytes and seconds spent in them.
    upload_bytes: u64,
    upload_s: f64,
}

impl Default for PathStats {
    /// Statistics of a path without a ring (no warm-up), counting from 0.
    fn default() -> PathStats {
        PathStats::new(0)
    }
}

/// The figures of a path at one moment (what the overlay and JSON show). The rates follow
/// the definitions of this module: **now**, **avg** (over active time) and **peak** (after
/// the warm-up, `None` until a reading qualifies).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct PathFigures {
    /// Frames delivered per second, **now**.
    pub delivered_fps_now: f64,
    /// Frames delivered per second, **avg**.
    pub delivered_fps: f64,
    /// Frames delivered per second, **peak**.
    pub delivered_fps_peak: Option<f64>,
    /// Frames rendered per second, **now**.
    pub rendered_fps_now: f64,
    /// Frames rendered per second, **avg**.
    pub rendered_fps: f64,
    /// Frames rendered per second, **peak**.
    pub rendered_fps_peak: Option<f64>,
    /// Mean GPU time of a render, ms (where timestamps exist).
    pub gpu_ms_per_frame: Option<f64>,
    /// GB/s (1e9 bytes of delivered frames per second), **now**.
    pub gbps_now: f64,
    /// GB/s, **avg**.
    pub gbps_mean: f64,
    /// GB/s, **peak**.
    pub gbps_peak: Option<f64>,
    /// Seconds the latest warm-up took (the ring filling), `None` while it is still filling.
    pub warm_up_s: Option<f64>,
    /// Frames delivered in the latest warm-up (so far).
    pub warm_up_frames: u64,
    /// Bytes of those frames.
    pub warm_up_bytes: u64,
    /// Bytes per delivered frame (mean).
    pub bytes_per_frame: f64,
    /// Frames delivered.
    pub frames_delivered: u64,
    /// Frames rendered.
    pub frames_rendered: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Active time, seconds: how long this path was the selected one since the reset.
    pub active_s: f64,
    /// Reads in flight (frames), mean and largest sampled.
    pub frames_in_flight_mean: f64,
    /// Largest number of frames in flight sampled.
    pub frames_in_flight_max: usize,
    /// Request → delivered latency, ms: median.
    pub latency_p50_ms: f64,
    /// 99th percentile.
    pub latency_p99_ms: f64,
    /// GB/s of the host path's uploads while they ran (bytes ÷ time spent waiting for a
    /// staging buffer, copying into it and submitting the GPU copy); `None` where nothing
    /// was uploaded (the direct path binds its slots).
    pub upload_gbps: Option<f64>,
}

impl PathStats {
    /// Statistics of a path whose ring has `ring_slots` slots (its warm-up delivers that
    /// many frames), counting from 0, inactive.
    pub fn new(ring_slots: usize) -> PathStats {
        let slots = ring_slots as u64;
        PathStats {
            arrivals: RateWindow::new(0.0, HISTORY_S),
            renders: RateWindow::new(0.0, HISTORY_S),
            latencies: VecDeque::new(),
            scrubs: Vec::new(),
            gbps_series: VecDeque::new(),
            fps_series: VecDeque::new(),
            last_sample: 0.0,
            bytes: 0,
            frames: 0,
            rendered: 0,
            gpu_ms_sum: 0.0,
            gpu_ms_n: 0,
            active_s: 0.0,
            active_since: None,
            ring_slots: slots,
            warm_up: WarmUp::begin(0.0, slots),
            delivered_peak: Peak::default(),
            rendered_peak: Peak::default(),
            inflight_sum: 0.0,
            inflight_n: 0,
            inflight_max: 0,
            upload_bytes: 0,
            upload_s: 0.0,
        }
    }

    /// Forgets everything (a headless run measures each path from a clean start); a new
    /// warm-up begins.
    pub fn reset(&mut self, now: f64) {
        let active = self.active_since.is_some();
        *self = PathStats::new(self.ring_slots as usize);
        self.arrivals.restart(now);
        self.renders.restart(now);
        self.last_sample = now;
        self.warm_up = WarmUp::begin(now, self.ring_slots);
        if active {
            self.active_since = Some(now);
        }
    }

    /// The path became active (`true`) or inactive at `now`. Becoming active begins a
    /// warm-up: the path's ring fills again.
    pub fn set_active(&mut self, active: bool, now: f64) {
        self.catch_up(now);
        match (active, self.active_since) {
            (true, None) => {
                self.active_since = Some(now);
                self.warm_up = WarmUp::begin(now, self.ring_slots);
            }
            (false, Some(t)) => {
                self.active_s += (now - t).max(0.0);
                self.active_since = None;
            }
            _ => {}
        }
    }

    fn active_seconds(&self, now: f64) -> f64 {
        self.active_s + self.active_since.map_or(0.0, |t| (now - t).max(0.0))
    }

    /// A frame of `bytes` arrived at `now`, `latency_s` after it was requested.
    pub fn arrived(&mut self, now: f64, bytes: u64, latency_s: f64) {
        self.arrivals.record(now, bytes);
        self.warm_up.arrived(now, bytes);
        self.bytes += bytes;
        self.frames += 1;
        self.latencies.push_back(latency_s * 1e3);
        if self.latencies.len() > MAX_LATENCIES {
            self.latencies.pop_front();
        }
        self.delivered_peak
            .offer(self.arrivals.reading(now), self.warm_up.end);
    }

    /// `bytes` were uploaded from a host slot in `secs`.
    pub fn uploaded(&mut self, bytes: u64, secs: f64) {
        self.upload_bytes += bytes;
        self.upload_s += secs;
    }

    /// A newly shown frame was rendered at `now` (GPU time where measured).
    pub fn rendered(&mut self, now: f64, gpu_ms: Option<f64>) {
        self.renders.record(now, 0);
        self.rendered += 1;
        self.rendered_peak
            .offer(self.renders.reading(now), self.warm_up.end);
        if let Some(ms) = gpu_ms {
            self.gpu_ms_sum += ms;
            self.gpu_ms_n += 1;
        }
    }

    /// A scrub to an exact frame took `ms`.
    pub fn scrubbed(&mut self, ms: f64) {
        self.scrubs.push(ms);
    }

    /// Scrub latencies recorded, ms.
    pub fn scrub_latencies(&self) -> &[f64] {
        &self.scrubs
    }

    /// Samples the reads in flight, and brings the plot series up to `now`.
    pub fn sample(&mut self, now: f64, in_flight: usize) {
        self.inflight_sum += in_flight as f64;
        self.inflight_n += 1;
        self.inflight_max = self.inflight_max.max(in_flight);
        self.catch_up(now);
    }

    /// Adds the plot points due up to `now`, one every [`SAMPLE_EVERY_S`] of wall time, each
    /// the reading of its own moment (a tick that came late after a slow render fills in
    /// the points it missed, so the plots sample time, not renders), and offers those
    /// readings to the peaks.
    fn catch_up(&mut self, now: f64) {
        // An inactive path's series gets gaps (NaN), not zeros: the plot shows both modes'
        // recent figures side by side without drawing the idle one as a collapse.
        let active = self.active_since.is_some();
        self.last_sample = self.last_sample.max(now - HISTORY_S);
        while self.last_sample + SAMPLE_EVERY_S <= now {
            let t = self.last_sample + SAMPLE_EVERY_S;
            self.last_sample = t;
            let (delivered, rendered) = (self.arrivals.reading(t), self.renders.reading(t));
            self.delivered_peak.offer(delivered, self.warm_up.end);
            self.rendered_peak.offer(rendered, self.warm_up.end);
            let (gbps, fps) = if active {
                (delivered.amount_per_s / 1e9, rendered.per_s)
            } else {
                (f64::NAN, f64::NAN)
            };
            self.gbps_series.push_back((t, gbps));
            self.fps_series.push_back((t, fps));
        }
        let old = now - HISTORY_S;
        while self.gbps_series.front().is_some_and(|(t, _)| *t < old) {
            self.gbps_series.pop_front();
        }
        while self.fps_series.front().is_some_and(|(t, _)| *t < old) {
            self.fps_series.pop_front();
        }
    }

    /// GB/s samples of the last `seconds`.
    pub fn gbps_series(&self, now: f64, seconds: f64) -> Vec<Sample> {
        self.gbps_series
            .iter()
            .filter(|(t, _)| *t >= now - seconds)
            .copied()
            .collect()
    }

    /// Rendered frames/s samples of the last `seconds`.
    pub fn fps_series(&self, now: f64, seconds: f64) -> Vec<Sample> {
        self.fps_series
            .iter()
            .filter(|(t, _)| *t >= now - seconds)
            .copied()
            .collect()
    }

    /// The figures as of `now`.
    pub fn figures(&self, now: f64) -> PathFigures {
        let active = self.active_seconds(now);
        let rate = |x: f64| if active > 0.0 { x / active } else { 0.0 };
        let mut lat: Vec<f64> = self.latencies.iter().copied().collect();
        lat.sort_by(f64::total_cmp);
        let (delivered, rendered) = (self.arrivals.reading(now), self.renders.reading(now));
        // The peaks shown include this very reading where it qualifies, so that a peak
        // never reads below the **now** beside it.
        let delivered_peak = self.delivered_peak.with(delivered, self.warm_up.end);
        let rendered_peak = self.rendered_peak.with(rendered, self.warm_up.end);
        PathFigures {
            delivered_fps_now: delivered.per_s,
            delivered_fps: rate(self.frames as f64),
            delivered_fps_peak: delivered_peak.per_s,
            rendered_fps_now: rendered.per_s,
            rendered_fps: rate(self.rendered as f64),
            rendered_fps_peak: rendered_peak.per_s,
            gpu_ms_per_frame: (self.gpu_ms_n > 0).then(|| self.gpu_ms_sum / self.gpu_ms_n as f64),
            gbps_now: delivered.amount_per_s / 1e9,
            gbps_mean: rate(self.bytes as f64 / 1e9),
            gbps_peak: delivered_peak.amount_per_s.map(|b| b / 1e9),
            warm_up_s: self.warm_up.seconds(),
            warm_up_frames: self.warm_up.frames,
            warm_up_bytes: self.warm_up.bytes,
            bytes_per_frame: if self.frames > 0 {
                self.bytes as f64 / self.frames as f64
            } else {
                0.0
            },
            frames_delivered: self.frames,
            frames_rendered: self.rendered,
            bytes: self.bytes,
            active_s: active,
            frames_in_flight_mean: if self.inflight_n > 0 {
                self.inflight_sum / self.inflight_n as f64
            } else {
                0.0
            },
            frames_in_flight_max: self.inflight_max,
            latency_p50_ms: percentile(&lat, 0.5),
            latency_p99_ms: percentile(&lat, 0.99),
            upload_gbps: (self.upload_bytes > 0 && self.upload_s > 0.0)
                .then(|| self.upload_bytes as f64 / self.upload_s / 1e9),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_count_only_active_time() {
        let mut s = PathStats::default();
        s.set_active(true, 0.0);
        for i in 1..=20 {
            let t = i as f64 * 0.1;
            s.arrived(t, 100_000_000, 0.05);
            s.rendered(t, Some(2.0));
            s.sample(t, 2);
        }
        let f = s.figures(2.0);
        assert!((f.gbps_mean - 1.0).abs() < 1e-9, "{f:?}");
        assert!((f.gbps_now - 1.0).abs() < 1e-9, "{f:?}");
        assert!((f.gbps_peak.unwrap() - 1.0).abs() < 1e-9, "{f:?}");
        assert!((f.delivered_fps - 10.0).abs() < 1e-9);
        assert_eq!(f.gpu_ms_per_frame, Some(2.0));
        assert!((f.latency_p50_ms - 50.0).abs() < 1e-9);
        s.set_active(false, 2.0);
        // Idle time does not dilute the mean; the idle path's **now** has fallen to 0 ten
        // seconds after its last frame.
        assert!((s.figures(12.5).gbps_mean - 1.0).abs() < 1e-9);
        assert_eq!(s.figures(12.5).gbps_now, 0.0);
    }

    /// A renderer finishing a frame every 3.7 s whose loop ticks only right after each
    /// render (a slow software render holds it): the overlay read "1.00 now" and plotted a
    /// flat 1 (a one-second window, sampled only when a frame rendered).
    #[test]
    fn a_slow_renderer_reads_its_rate_now_and_in_the_plot() {
        let mut s = PathStats::new(2);
        s.set_active(true, 0.0);
        let interval = 3.7;
        for k in 1..=16 {
            let t = k as f64 * interval;
            s.arrived(t - 0.5, 1_000_000, 0.1);
            s.rendered(t, None);
            s.sample(t + 0.01, 1);
        }
        let end = 16.0 * interval + 0.01;
        let f = s.figures(end);
        assert!((f.rendered_fps - 1.0 / 3.7).abs() < 0.01, "{f:?}");
        assert!(
            (f.rendered_fps_now - 1.0 / 3.7).abs() < 0.01,
            "now reads {} where the renderer does {:.3}",
            f.rendered_fps_now,
            1.0 / 3.7
        );
        // Delivered half a second before each render: its reading has fallen a little.
        assert!((f.delivered_fps_now - 1.0 / 3.7).abs() < 0.03, "{f:?}");
        // The plot has a point every quarter second of wall time, not one per render, and
        // no point reads anywhere near 1.
        let plot = s.fps_series(end, 30.0);
        assert!(plot.len() >= 110, "{} points in 30 s", plot.len());
        for w in plot.windows(2) {
            assert!((w[1].0 - w[0].0 - SAMPLE_EVERY_S).abs() < 1e-9, "{w:?}");
        }
        let mean = plot.iter().map(|p| p.1).sum::<f64>() / plot.len() as f64;
        assert!(plot.iter().all(|p| p.1 > 0.15 && p.1 < 0.3), "{plot:?}");
        assert!((mean - 1.0 / 3.7).abs() < 0.06, "plot mean {mean}");
        // The peak is a sustained reading, not "one frame in a second".
        assert!(f.rendered_fps_peak.unwrap() < 0.3, "{f:?}");
    }

    /// When nothing arrives, **now** falls, second after second, and is 0 after ten.
    #[test]
    fn now_falls_steadily_when_nothing_arrives() {
        let mut s = PathStats::default();
        s.set_active(true, 0.0);
        for k in 1..=40 {
            let t = k as f64 * 0.5;
            s.arrived(t, 1_000_000, 0.1);
            s.rendered(t, None);
        }
        let mut before = s.figures(20.0);
        assert!((before.rendered_fps_now - 2.0).abs() < 1e-9, "{before:?}");
        for k in 1..10 {
            let f = s.figures(20.0 + k as f64);
            for (name, now, then) in [
                ("rendered", f.rendered_fps_now, before.rendered_fps_now),
                ("delivered", f.delivered_fps_now, before.delivered_fps_now),
                ("GB/s", f.gbps_now, before.gbps_now),
            ] {
                assert!(
                    now > 0.0 && now < then,
                    "{name} {k} s after: {now} (before {then})"
                );
            }
            before = f;
        }
        let f = s.figures(30.0);
        assert_eq!(
            (f.rendered_fps_now, f.delivered_fps_now, f.gbps_now),
            (0.0, 0.0, 0.0)
        );
        // The averages stay what they were: the path was active all along.
        assert!((f.rendered_fps - 40.0 / 30.0).abs() < 1e-9);
    }

    /// An 8-slot ring fills in 0.4 s at start-up (20 frames/s, 2 GB/s), then the renderer
    /// paces delivery at a frame every 2 s: the peaks are the paced rates, and the filling
    /// is reported apart. Before, the peaks read the filling (8 frames/s, 0.8 GB/s).
    #[test]
    fn peak_leaves_out_the_ring_filling_and_reports_it_apart() {
        let mut s = PathStats::new(8);
        s.set_active(true, 0.0);
        for k in 1..=8 {
            let t = k as f64 * 0.05;
            s.arrived(t, 100_000_000, 0.05);
            s.sample(t, 8);
        }
        let f = s.figures(0.4);
        assert_eq!(
            f.delivered_fps_now, 8.0,
            "now says what is happening: {f:?}"
        );
        assert_eq!(f.delivered_fps_peak, None, "{f:?}");
        assert_eq!((f.warm_up_frames, f.warm_up_bytes), (8, 800_000_000));
        assert!((f.warm_up_s.unwrap() - 0.4).abs() < 1e-9);
        for k in 1..=20 {
            let t = 0.4 + k as f64 * 2.0;
            s.arrived(t, 100_000_000, 0.05);
            s.rendered(t + 0.1, None);
            for q in 1..8 {
                s.sample(t + q as f64 * 0.25, 1);
            }
        }
        let f = s.figures(40.5);
        let peak = f.delivered_fps_peak.unwrap();
        assert!((peak - 0.5).abs() < 1e-9, "delivered peak {peak}: {f:?}");
        assert!((f.gbps_peak.unwrap() - 0.05).abs() < 1e-9, "{f:?}");
        assert!((f.rendered_fps_peak.unwrap() - 0.5).abs() < 1e-9, "{f:?}");
        assert_eq!(f.warm_up_frames, 8);
        // A reset begins a new warm-up: no peak until the ring has filled again.
        s.reset(41.0);
        s.arrived(41.5, 100_000_000, 0.05);
        let f = s.figures(42.0);
        assert_eq!(
            (f.gbps_peak, f.warm_up_s, f.warm_up_frames),
            (None, None, 1)
        );
    }
}

#[cfg(test)]
mod props {
    use super::*;
    use proptest::prelude::*;

    /// One thing that happens to a path's statistics.
    #[derive(Clone, Debug)]
    enum Event {
        /// A frame of this many bytes arrived after this many seconds.
        Arrive(f64, u64),
        /// A newly shown frame was rendered after this many seconds.
        Render(f64),
        /// The path was switched away (false) or back (true) after this many seconds.
        Active(f64, bool),
        /// The statistics were reset after this many seconds.
        Reset(f64),
        /// A tick after this many seconds.
        Tick(f64),
    }

    fn event() -> impl Strategy<Value = Event> {
        let gap = prop_oneof![0.0..0.002f64, 0.0..0.3f64, 0.0..3.0f64, 0.0..40.0f64];
        prop_oneof![
            6 => (gap.clone(), 1u64..2_000_000_000).prop_map(|(g, b)| Event::Arrive(g, b)),
            4 => gap.clone().prop_map(Event::Render),
            1 => (gap.clone(), any::<bool>()).prop_map(|(g, a)| Event::Active(g, a)),
            1 => gap.clone().prop_map(Event::Reset),
            2 => gap.prop_map(Event::Tick),
        ]
    }

    /// What holds at every moment: rates finite and never negative, and a peak, once there
    /// is one, never below the **now** beside it when that reading lies after the warm-up
    /// (certain once [`crate::pipeline::rate::MAX_WINDOW_S`] has passed since it began: the
    /// window is never longer).
    fn check(f: &PathFigures, warm_up_ended_long_ago: bool, what: &str) {
        let triples = [
            ("GB/s", f.gbps_now, f.gbps_mean, f.gbps_peak),
            (
                "rendered",
                f.rendered_fps_now,
                f.rendered_fps,
                f.rendered_fps_peak,
            ),
            (
                "delivered",
                f.delivered_fps_now,
                f.delivered_fps,
                f.delivered_fps_peak,
            ),
        ];
        for (name, now, avg, peak) in triples {
            assert!(
                now.is_finite() && avg.is_finite() && peak.is_none_or(f64::is_finite),
                "{what}: {name} {f:?}"
            );
            assert!(avg >= 0.0 && now >= 0.0, "{what}: {name} below zero: {f:?}");
            if warm_up_ended_long_ago {
                let peak = peak.unwrap_or(0.0);
                assert!(peak >= now, "{what}: {name} peak {peak} < now {now}: {f:?}");
            }
        }
    }

    proptest! {
        /// Whatever arrives when, with toggles and resets in between: rates are finite and
        /// never negative, a peak never reads below a **now** taken after the warm-up, and
        /// **now** is 0 once nothing has arrived for the longest window.
        #[test]
        fn peak_is_at_least_now_and_now_falls_to_zero(events in prop::collection::vec(event(), 0..120)) {
            use crate::pipeline::rate::MAX_WINDOW_S;
            let mut s = PathStats::default();
            s.set_active(true, 0.0);
            let (mut t, mut active, mut warm_from) = (0.0, true, 0.0);
            check(&s.figures(t), false, "at the start");
            for (i, e) in events.iter().enumerate() {
                match *e {
                    Event::Arrive(g, b) => { t += g; s.arrived(t, b, 0.01); }
                    Event::Render(g) => { t += g; s.rendered(t, None); }
                    Event::Active(g, a) => {
                        t += g;
                        s.set_active(a, t);
                        if a && !active { warm_from = t; }
                        active = a;
                    }
                    Event::Reset(g) => { t += g; s.reset(t); warm_from = t; }
                    Event::Tick(g) => { t += g; s.sample(t, 1); }
                }
                for later in [0.0, 0.5, MAX_WINDOW_S] {
                    let at = t + later;
                    let f = s.figures(at);
                    check(&f, at - warm_from >= MAX_WINDOW_S, &format!("{later} s after event {i} {e:?}"));
                }
                let quiet = s.figures(t + MAX_WINDOW_S + 1e-6);
                prop_assert_eq!(
                    (quiet.gbps_now, quiet.delivered_fps_now, quiet.rendered_fps_now),
                    (0.0, 0.0, 0.0)
                );
            }
        }
    }
}
