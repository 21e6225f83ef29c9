//! The path tracer's progress in the player: samples per pixel and their rate.

use crate::pipeline::rate::{MAX_WINDOW_S, RateWindow};

/// The path tracer's recent progress: samples per pixel each finished render left in the
/// picture, to report the refinement's rate.
#[derive(Clone, Debug)]
pub(super) struct TracerProgress {
    /// Samples per pixel after the last finished render.
    last: u32,
    /// The renders (seconds since start, samples per pixel added), for their **now** rate.
    recent: RateWindow,
    /// When the view last changed (seconds since start).
    pub(super) view_changed_at: f64,
}

impl TracerProgress {
    /// Progress counted from `now` (path tracing began, or began again).
    pub(super) fn starting(now: f64) -> TracerProgress {
        TracerProgress {
            last: 0,
            recent: RateWindow::new(now, MAX_WINDOW_S),
            view_changed_at: f64::NEG_INFINITY,
        }
    }

    /// A render finished at `now` with `samples` per pixel in the picture (fewer than before:
    /// the picture restarted, and all of them are new).
    pub(super) fn rendered(&mut self, now: f64, samples: u32) {
        let added = samples.checked_sub(self.last).unwrap_or(samples);
        self.last = samples;
        self.recent.record(now, u64::from(added));
    }

    /// Samples per pixel a second, **now** as [`crate::pipeline::rate`] defines it: about
    /// the last second's renders, stretched over the last two where renders take longer (a
    /// software path tracer's), falling to 0 when nothing renders.
    pub(super) fn per_second(&self, now: f64) -> f64 {
        self.recent.reading(now).amount_per_s
    }
}

#[cfg(test)]
mod tests {
    use super::TracerProgress;

    #[test]
    fn tracer_rate_counts_a_restarted_picture_and_forgets_old_renders() {
        let mut p = TracerProgress::starting(0.0);
        assert_eq!(p.per_second(0.0), 0.0, "nothing rendered yet");
        p.rendered(0.0, 4);
        p.rendered(0.5, 8);
        // The picture restarted: its 2 samples are all new.
        p.rendered(1.0, 2);
        assert!(
            (p.per_second(1.0) - 6.0).abs() < 1e-9,
            "{}",
            p.per_second(1.0)
        );
        // Converged: renders add nothing.
        p.rendered(1.5, 2);
        assert!(
            (p.per_second(1.5) - 2.0).abs() < 1e-9,
            "{}",
            p.per_second(1.5)
        );
        // Nothing rendered for a while: the rate falls (the last two renders' 2 samples over
        // the time since the one before them), and is 0 after ten seconds.
        assert!((p.per_second(5.0) - 2.0 / 4.5).abs() < 1e-9);
        assert_eq!(p.per_second(11.6), 0.0);
    }

    /// A software path tracer finishing a render every 3 s, each adding 1 sample per
    /// pixel, reads a third of a sample a second; a one-second window read 0 (fewer than
    /// two renders in it).
    #[test]
    fn a_slow_path_tracer_reads_its_rate() {
        let mut p = TracerProgress::starting(0.0);
        for k in 1..=10 {
            p.rendered(k as f64 * 3.0, k);
        }
        assert!(
            (p.per_second(30.0) - 1.0 / 3.0).abs() < 1e-9,
            "{}",
            p.per_second(30.0)
        );
        assert!(p.per_second(31.5) > 0.25);
    }
}
