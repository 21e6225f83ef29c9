//! Rolling figures of one frame path (direct or host): what the overlay shows live and what a
//! headless run reports. Times are seconds since the player started.

use std::collections::VecDeque;

use serde::Serialize;

use crate::probe::percentile;

/// How far back the rolling series reach (the plots show 30 s of it by default; a scene's
/// `plot_window_s` may ask for all of it).
const HISTORY_S: f64 = crate::scene::MAX_PLOT_WINDOW_S;
/// Width of the "now" windows (GB/s, frames/s), seconds.
const WINDOW_S: f64 = 1.0;
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
    /// Best one-second rate seen, GB/s.
    peak_gbps: f64,
    /// Frames-in-flight samples (sum, count, max).
    inflight_sum: f64,
    inflight_n: u64,
    inflight_max: usize,
    /// Host path uploads (host slot → GPU buffer): bytes and seconds spent in them.
    upload_bytes: u64,
    upload_s: f64,
}

/// The figures of a path at one moment (what the overlay and JSON show).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct PathFigures {
    /// Frames delivered (all bytes resident) per second over the last second.
    pub delivered_fps_now: f64,
    /// Frames delivered per second while this path was active.
    pub delivered_fps: f64,
    /// Newly shown frames rendered per second over the last second.
    pub rendered_fps_now: f64,
    /// Newly shown frames rendered per second while this path was active.
    pub rendered_fps: f64,
    /// Mean GPU time of a render, ms (where timestamps exist).
    pub gpu_ms_per_frame: Option<f64>,
    /// GB/s (1e9 bytes) over the last second.
    pub gbps_now: f64,
    /// GB/s while this path was active.
    pub gbps_mean: f64,
    /// Best GB/s over any one-second window.
    pub gbps_peak: f64,
    /// Bytes per delivered frame (mean).
    pub bytes_per_frame: f64,
    /// Frames delivered.
    pub frames_delivered: u64,
    /// Frames rendered.
    pub frames_rendered: u64,
    /// Bytes delivered.
    pub bytes: u64,
    /// Seconds this path was active.
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
        // A one-second peak only counts once a whole second of this path has run: a single
        // early frame over a tiny interval is not a rate.
        if self.active_seconds(now) >= WINDOW_S {
            let rate = self.window_bytes(now) as f64 / WINDOW_S / 1e9;
            self.peak_gbps = self.peak_gbps.max(rate);
        }
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

    /// Frames/s (rendered) samples of the last `seconds`.
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
        let delivered_now = self
            .arrivals
            .iter()
            .rev()
            .take_while(|(t, _)| *t > now - WINDOW_S)
            .count();
        PathFigures {
            delivered_fps_now: delivered_now as f64 / WINDOW_S,
            delivered_fps: rate(self.frames as f64),
            rendered_fps_now: self.renders_in_window(now) as f64 / WINDOW_S,
            rendered_fps: rate(self.rendered as f64),
            gpu_ms_per_frame: (self.gpu_ms_n > 0).then(|| self.gpu_ms_sum / self.gpu_ms_n as f64),
            gbps_now: self.window_bytes(now) as f64 / WINDOW_S / 1e9,
            gbps_mean: rate(self.bytes as f64) / 1e9,
            gbps_peak: self.peak_gbps,
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
