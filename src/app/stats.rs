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
//! * **now**: what arrived in the last [`WINDOW_S`] second of wall time, divided by
//!   [`WINDOW_S`] (always the whole second, so it rises over the first second and a lone frame
//!   never reads as a huge rate).
//! * **avg**: everything since the reset divided by the active time (0 before any active time).
//! * **peak**: the highest **now** reading since the reset (read at every arrival, where
//!   **now** is highest), and never less than **avg**: a path that has run less than a second,
//!   or whose frames sat at the edges of the windows, has no higher one-second reading.
//!
//! So `0 ≤ now ≤ peak` and `0 ≤ avg ≤ peak` for every rate at every moment, including right
//! after a switch, a reset, or with no frames at all. GB/s are 1e9 bytes per second of
//! delivered frames; the plots draw the **now** readings, sampled every quarter second.

use std::collections::VecDeque;

use serde::Serialize;

use crate::probe::percentile;

/// How far back the rolling series reach (the plots show 30 s of it by default; a scene's
/// `plot_window_s` may ask for all of it).
const HISTORY_S: f64 = crate::scene::MAX_PLOT_WINDOW_S;
/// Width of the **now** windows (GB/s, frames/s), seconds.
pub const WINDOW_S: f64 = 1.0;
/// Latencies kept for percentiles (the most recent ones).
const MAX_LATENCIES: usize = 100_000;

/// One point of a plot series: time and value.
pub type Sample = (f64, f64);

/// Rolling statistics of one path.
#[derive(Clone, Debug, Default)]
pub struct PathStats {
    /// Arrivals: completion time and bytes.
    arrivals: VecDeque<(f64, u64)>,
    /// Renders of newly shown frames: time and GPU ms (if measured).
    renders: VecDeque<(f64, Option<f64>)>,
    /// Request → arrival latencies, ms.
    latencies: VecDeque<f64>,
    /// Scrub latencies, ms (jump → exact frame on screen).
    scrubs: Vec<f64>,
    /// Plot series: GB/s and frames/s over the last second, sampled.
    gbps_series: VecDeque<Sample>,
    fps_series: VecDeque<Sample>,
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
    /// Highest **now** readings since the reset: GB/s, delivered and rendered frames/s.
    peak_gbps: f64,
    peak_delivered_fps: f64,
    peak_rendered_fps: f64,
    /// Frames-in-flight samples (sum, count, max).
    inflight_sum: f64,
    inflight_n: u64,
    inflight_max: usize,
    /// Host path uploads (host slot → GPU buffer): bytes and seconds spent in them.
    upload_bytes: u64,
    upload_s: f64,
}

/// The figures of a path at one moment (what the overlay and JSON show). The rates follow
/// the definitions of this module: **now** (last second), **avg** (over active time) and
/// **peak**; `0 ≤ now ≤ peak` and `0 ≤ avg ≤ peak` always.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PathFigures {
    /// Frames delivered per second, **now**.
    pub delivered_fps_now: f64,
    /// Frames delivered per second, **avg**.
    pub delivered_fps: f64,
    /// Frames delivered per second, **peak**.
    pub delivered_fps_peak: f64,
    /// Frames rendered per second, **now**.
    pub rendered_fps_now: f64,
    /// Frames rendered per second, **avg**.
    pub rendered_fps: f64,
    /// Frames rendered per second, **peak**.
    pub rendered_fps_peak: f64,
    /// Mean GPU time of a render, ms (where timestamps exist).
    pub gpu_ms_per_frame: Option<f64>,
    /// GB/s (1e9 bytes of delivered frames per second), **now**.
    pub gbps_now: f64,
    /// GB/s, **avg**.
    pub gbps_mean: f64,
    /// GB/s, **peak**.
    pub gbps_peak: f64,
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
    /// Forgets everything (a headless run measures each path from a clean start).
    pub fn reset(&mut self, now: f64) {
        let active = self.active_since.is_some();
        *self = PathStats::default();
        if active {
            self.active_since = Some(now);
        }
    }

    /// The path became active (`true`) or inactive at `now`.
    pub fn set_active(&mut self, active: bool, now: f64) {
        match (active, self.active_since) {
            (true, None) => self.active_since = Some(now),
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

    fn window_bytes(&self, now: f64) -> u64 {
        self.arrivals
            .iter()
            .rev()
            .take_while(|(t, _)| *t > now - WINDOW_S)
            .map(|(_, b)| b)
            .sum()
    }

    /// A frame of `bytes` arrived at `now`, `latency_s` after it was requested.
    pub fn arrived(&mut self, now: f64, bytes: u64, latency_s: f64) {
        self.arrivals.push_back((now, bytes));
        self.bytes += bytes;
        self.frames += 1;
        self.latencies.push_back(latency_s * 1e3);
        if self.latencies.len() > MAX_LATENCIES {
            self.latencies.pop_front();
        }
        // The **now** readings are highest at an arrival (they only fall until the next).
        self.peak_gbps = self
            .peak_gbps
            .max(self.window_bytes(now) as f64 / WINDOW_S / 1e9);
        self.peak_delivered_fps = self
            .peak_delivered_fps
            .max(self.arrivals_in_window(now) as f64 / WINDOW_S);
        self.trim(now);
    }

    /// `bytes` were uploaded from a host slot in `secs`.
    pub fn uploaded(&mut self, bytes: u64, secs: f64) {
        self.upload_bytes += bytes;
        self.upload_s += secs;
    }

    /// A newly shown frame was rendered at `now` (GPU time where measured).
    pub fn rendered(&mut self, now: f64, gpu_ms: Option<f64>) {
        self.renders.push_back((now, gpu_ms));
        self.rendered += 1;
        self.peak_rendered_fps = self
            .peak_rendered_fps
            .max(self.renders_in_window(now) as f64 / WINDOW_S);
        if let Some(ms) = gpu_ms {
            self.gpu_ms_sum += ms;
            self.gpu_ms_n += 1;
        }
        self.trim(now);
    }

    /// A scrub to an exact frame took `ms`.
    pub fn scrubbed(&mut self, ms: f64) {
        self.scrubs.push(ms);
    }

    /// Scrub latencies recorded, ms.
    pub fn scrub_latencies(&self) -> &[f64] {
        &self.scrubs
    }

    /// Samples the reads in flight and, every quarter second, the plot series.
    pub fn sample(&mut self, now: f64, in_flight: usize) {
        self.inflight_sum += in_flight as f64;
        self.inflight_n += 1;
        self.inflight_max = self.inflight_max.max(in_flight);
        if now - self.last_sample >= 0.25 {
            self.last_sample = now;
            let active = self.active_since.is_some();
            let gbps = self.window_bytes(now) as f64 / WINDOW_S / 1e9;
            let fps = self.renders_in_window(now) as f64 / WINDOW_S;
            // An inactive path's series gets gaps (NaN), not zeros: the plot shows both modes'
            // recent figures side by side without drawing the idle one as a collapse.
            self.gbps_series
                .push_back((now, if active { gbps } else { f64::NAN }));
            self.fps_series
                .push_back((now, if active { fps } else { f64::NAN }));
        }
        self.trim(now);
    }

    fn arrivals_in_window(&self, now: f64) -> usize {
        self.arrivals
            .iter()
            .rev()
            .take_while(|(t, _)| *t > now - WINDOW_S)
            .count()
    }

    fn renders_in_window(&self, now: f64) -> usize {
        self.renders
            .iter()
            .rev()
            .take_while(|(t, _)| *t > now - WINDOW_S)
            .count()
    }

    fn trim(&mut self, now: f64) {
        let old = now - HISTORY_S;
        while self.arrivals.front().is_some_and(|(t, _)| *t < old) {
            self.arrivals.pop_front();
        }
        while self.renders.front().is_some_and(|(t, _)| *t < old) {
            self.renders.pop_front();
        }
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
        // One triple per rate, each by the module's definitions.
        let triple = |now_reading: f64, total: f64, peak: f64| {
            let avg = rate(total);
            (now_reading, avg, peak.max(now_reading).max(avg))
        };
        let (delivered_now, delivered_avg, delivered_peak) = triple(
            self.arrivals_in_window(now) as f64 / WINDOW_S,
            self.frames as f64,
            self.peak_delivered_fps,
        );
        let (rendered_now, rendered_avg, rendered_peak) = triple(
            self.renders_in_window(now) as f64 / WINDOW_S,
            self.rendered as f64,
            self.peak_rendered_fps,
        );
        let (gbps_now, gbps_avg, gbps_peak) = triple(
            self.window_bytes(now) as f64 / WINDOW_S / 1e9,
            self.bytes as f64 / 1e9,
            self.peak_gbps,
        );
        PathFigures {
            delivered_fps_now: delivered_now,
            delivered_fps: delivered_avg,
            delivered_fps_peak: delivered_peak,
            rendered_fps_now: rendered_now,
            rendered_fps: rendered_avg,
            rendered_fps_peak: rendered_peak,
            gpu_ms_per_frame: (self.gpu_ms_n > 0).then(|| self.gpu_ms_sum / self.gpu_ms_n as f64),
            gbps_now,
            gbps_mean: gbps_avg,
            gbps_peak,
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
        assert!((f.gbps_peak - 1.0).abs() < 1e-9, "{f:?}");
        assert!((f.delivered_fps - 10.0).abs() < 1e-9);
        assert_eq!(f.gpu_ms_per_frame, Some(2.0));
        assert!((f.latency_p50_ms - 50.0).abs() < 1e-9);
        s.set_active(false, 2.0);
        // Idle time does not dilute the mean.
        assert!((s.figures(10.0).gbps_mean - 1.0).abs() < 1e-9);
        assert_eq!(s.figures(10.0).gbps_now, 0.0);
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

    fn check(f: &PathFigures, what: &str) {
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
                now.is_finite() && avg.is_finite() && peak.is_finite(),
                "{what}: {name} {f:?}"
            );
            assert!(avg >= 0.0 && now >= 0.0, "{what}: {name} below zero: {f:?}");
            assert!(peak >= avg, "{what}: {name} peak {peak} < avg {avg}: {f:?}");
            assert!(peak >= now, "{what}: {name} peak {peak} < now {now}: {f:?}");
        }
    }

    proptest! {
        /// Whatever arrives when, with toggles and resets in between: peak ≥ avg ≥ 0 and
        /// now ≤ peak for each rate, at every moment (also between events and with no frames).
        #[test]
        fn peak_is_at_least_the_average_and_now(events in prop::collection::vec(event(), 0..120)) {
            let mut s = PathStats::default();
            s.set_active(true, 0.0);
            let mut t = 0.0;
            check(&s.figures(t), "at the start");
            for (i, e) in events.iter().enumerate() {
                match *e {
                    Event::Arrive(g, b) => { t += g; s.arrived(t, b, 0.01); }
                    Event::Render(g) => { t += g; s.rendered(t, None); }
                    Event::Active(g, a) => { t += g; s.set_active(a, t); }
                    Event::Reset(g) => { t += g; s.reset(t); }
                    Event::Tick(g) => { t += g; s.sample(t, 1); }
                }
                check(&s.figures(t), &format!("after event {i} {e:?}"));
                check(&s.figures(t + 0.5), &format!("0.5 s after event {i} {e:?}"));
            }
        }
    }
}
