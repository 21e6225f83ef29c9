//! Per-frame timings and the figures derived from them: GB/s (instantaneous, moving
//! window, whole run; GB = 1e9 bytes), frames/s, latency distribution, CPU seconds per GB.
//!
//! These are the ingest benchmark's figures (`supercell bench`, which reads continuously,
//! so there is no idle time to leave out). A frame counts once it is complete where it is
//! used ([`FrameTimes::done`]: on the GPU, else in memory). In the player's words (see
//! `app::stats`): [`Summary::gbps`] is the **avg** over the run (start to last completion),
//! [`Summary::gbps_window`] the **now** reading at the last completion over the window
//! (over the whole run while it is shorter than the window), and [`Summary::gbps_instant`]
//! is one frame alone, which the player does not report.

use std::time::{Duration, Instant};

use serde::Serialize;

use crate::probe::{cpu_seconds, percentile};

/// The life of one frame, in seconds since the run started.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FrameTimes {
    /// Frame number.
    pub frame: u32,
    /// Bytes of the frame.
    pub bytes: u64,
    /// Requested by the scheduler.
    pub requested: f64,
    /// First read completed.
    pub first_byte: Option<f64>,
    /// Last read completed.
    pub last_byte: Option<f64>,
    /// All of it in GPU memory (GPU paths).
    pub on_gpu: Option<f64>,
    /// Shown (handed to the renderer / consumer).
    pub shown: Option<f64>,
}

impl FrameTimes {
    /// When the frame was complete where it is used: on the GPU, else in memory.
    pub fn done(&self) -> Option<f64> {
        self.on_gpu.or(self.last_byte)
    }

    /// Requested → done, seconds.
    pub fn latency(&self) -> Option<f64> {
        self.done().map(|d| d - self.requested)
    }
}

/// Latency percentiles, milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Smallest.
    pub min_ms: f64,
    /// Median.
    pub p50_ms: f64,
    /// 90th percentile.
    pub p90_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest.
    pub max_ms: f64,
    /// Mean.
    pub mean_ms: f64,
}

/// The derived figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Frames completed.
    pub frames: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Seconds from the start to the last completion.
    pub seconds: f64,
    /// Whole-run rate, GB/s (1e9 bytes).
    pub gbps: f64,
    /// Same in GiB/s (as gdsio prints).
    pub gibps: f64,
    /// Rate over the last `window` seconds, GB/s.
    pub gbps_window: f64,
    /// Rate of the last frame alone (its bytes over its first-to-last-byte time), GB/s.
    pub gbps_instant: f64,
    /// Frames per second over the whole run.
    pub frames_per_s: f64,
    /// Requested → done latency.
    pub latency: Latency,
    /// User + system CPU seconds of this process during the run.
    pub cpu_seconds: f64,
    /// CPU seconds per GB moved.
    pub cpu_seconds_per_gb: f64,
}

/// Collects frame timings of one run.
#[derive(Clone, Debug)]
pub struct Metrics {
    start: Instant,
    cpu_start: f64,
    window: Duration,
    frames: Vec<FrameTimes>,
}

impl Metrics {
    /// Starts a run now; `window` is the moving-window length for [`Summary::gbps_window`].
    pub fn new(window: Duration) -> Metrics {
        Metrics {
            start: Instant::now(),
            cpu_start: cpu_seconds(),
            window,
            frames: Vec::new(),
        }
    }

    /// When the run started.
    pub fn start(&self) -> Instant {
        self.start
    }

    fn secs(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.start).as_secs_f64()
    }

    /// Records a completed frame; returns its index for [`Metrics::shown`].
    pub fn record(
        &mut self,
        frame: u32,
        bytes: u64,
        requested: Instant,
        first_byte: Option<Instant>,
        last_byte: Option<Instant>,
        on_gpu: Option<Instant>,
    ) -> usize {
        let t = FrameTimes {
            frame,
            bytes,
            requested: self.secs(requested),
            first_byte: first_byte.map(|t| self.secs(t)),
            last_byte: last_byte.map(|t| self.secs(t)),
            on_gpu: on_gpu.map(|t| self.secs(t)),
            shown: None,
        };
        self.frames.push(t);
        self.frames.len() - 1
    }

    /// Frame `index` was shown at `at`.
    pub fn shown(&mut self, index: usize, at: Instant) {
        let s = self.secs(at);
        if let Some(f) = self.frames.get_mut(index) {
            f.shown = Some(s);
        }
    }

    /// Every frame recorded.
    pub fn frames(&self) -> &[FrameTimes] {
        &self.frames
    }

    /// The derived figures as of now.
    pub fn summary(&self) -> Summary {
        summarize(
            &self.frames,
            self.window.as_secs_f64(),
            cpu_seconds() - self.cpu_start,
        )
    }
}

/// The figures of a set of frames (pure, for tests): `window` seconds for the moving
/// window, `cpu` seconds of CPU spent.
pub fn summarize(frames: &[FrameTimes], window: f64, cpu: f64) -> Summary {
    let bytes: u64 = frames.iter().map(|f| f.bytes).sum();
    let end = frames
        .iter()
        .filter_map(FrameTimes::done)
        .fold(0.0f64, f64::max);
    let rate = |b: f64, s: f64| if s > 0.0 { b / s } else { 0.0 };
    let wstart = (end - window).max(0.0);
    let wbytes: u64 = frames
        .iter()
        .filter(|f| f.done().is_some_and(|d| d > wstart))
        .map(|f| f.bytes)
        .sum();
    let instant = frames
        .iter()
        .filter(|f| f.done().is_some())
        .max_by(|a, b| {
            a.done()
                .partial_cmp(&b.done())
                .unwrap_or(std::cmp::Ordering::Equal)
        })
        .map_or(0.0, |f| {
            let from = f
                .first_byte
                .unwrap_or(f.requested)
                .min(f.done().unwrap_or(0.0));
            // Measure from the request when the frame arrived in one read.
            let from = if f.done().unwrap_or(0.0) - from > 0.0 {
                from
            } else {
                f.requested
            };
            rate(f.bytes as f64, f.done().unwrap_or(0.0) - from) / 1e9
        });
    let mut lat: Vec<f64> = frames
        .iter()
        .filter_map(FrameTimes::latency)
        .map(|s| s * 1e3)
        .collect();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    let latency = Latency {
        min_ms: lat.first().copied().unwrap_or(0.0),
        p50_ms: percentile(&lat, 0.5),
        p90_ms: percentile(&lat, 0.9),
        p99_ms: percentile(&lat, 0.99),
        max_ms: lat.last().copied().unwrap_or(0.0),
        mean_ms: if lat.is_empty() {
            0.0
        } else {
            lat.iter().sum::<f64>() / lat.len() as f64
        },
    };
    Summary {
        frames: frames.len() as u64,
        bytes,
        seconds: end,
        gbps: rate(bytes as f64, end) / 1e9,
        gibps: rate(bytes as f64, end) / (1u64 << 30) as f64,
        gbps_window: rate(wbytes as f64, end - wstart) / 1e9,
        gbps_instant: instant,
        frames_per_s: rate(frames.len() as f64, end),
        latency,
        cpu_seconds: cpu,
        cpu_seconds_per_gb: if bytes > 0 {
            cpu / (bytes as f64 / 1e9)
        } else {
            0.0
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(frame: u32, req: f64, done: f64) -> FrameTimes {
        FrameTimes {
            frame,
            bytes: 1_000_000_000,
            requested: req,
            first_byte: Some(req + 0.1),
            last_byte: Some(done),
            on_gpu: None,
            shown: None,
        }
    }

    #[test]
    fn rates_and_latencies() {
        let frames = [f(0, 0.0, 1.0), f(1, 1.0, 2.0), f(2, 2.0, 4.0)];
        let s = summarize(&frames, 2.0, 1.5);
        assert_eq!(s.bytes, 3_000_000_000);
        assert!((s.gbps - 0.75).abs() < 1e-9);
        assert!((s.gbps_window - 0.5).abs() < 1e-9, "{}", s.gbps_window);
        assert!((s.gbps_instant - 1.0 / 1.9).abs() < 1e-9);
        assert!((s.frames_per_s - 0.75).abs() < 1e-9);
        assert!((s.latency.p50_ms - 1000.0).abs() < 1e-6);
        assert!((s.latency.max_ms - 2000.0).abs() < 1e-6);
        assert!((s.cpu_seconds_per_gb - 0.5).abs() < 1e-9);
        assert_eq!(summarize(&[], 1.0, 0.0).gbps, 0.0);
    }
}
