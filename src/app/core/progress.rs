//! The path tracer's progress in the player: samples per pixel and their rate.

/// The path tracer's recent progress: samples per pixel each finished render left in the
/// picture, to report the refinement's rate.
#[derive(Clone, Debug)]
pub(super) struct PathProgress {
    /// Samples per pixel after the last finished render.
    last: u32,
    /// (seconds since start, samples per pixel added) of the renders in the last second.
    recent: std::collections::VecDeque<(f64, u32)>,
    /// When the view last changed (seconds since start).
    pub(super) view_changed_at: f64,
}

impl Default for PathProgress {
    fn default() -> PathProgress {
        PathProgress {
            last: 0,
            recent: std::collections::VecDeque::new(),
            view_changed_at: f64::NEG_INFINITY,
        }
    }
}

/// The span of wall time the refinement's rate is measured over, seconds.
const PATH_RATE_WINDOW_S: f64 = 1.0;

impl PathProgress {
    /// A render finished at `now` with `samples` per pixel in the picture (fewer than before:
    /// the picture restarted, and all of them are new).
    pub(super) fn rendered(&mut self, now: f64, samples: u32) {
        let added = samples.checked_sub(self.last).unwrap_or(samples);
        self.last = samples;
        self.recent.push_back((now, added));
        while self
            .recent
            .front()
            .is_some_and(|(t, _)| now - t > PATH_RATE_WINDOW_S)
        {
            self.recent.pop_front();
        }
    }

    /// Samples per pixel a second over the renders of the last second: those after the
    /// first, over the time since the first (the first one's samples were taken before).
    pub(super) fn per_second(&self, now: f64) -> f64 {
        let recent: Vec<_> = self
            .recent
            .iter()
            .filter(|(t, _)| now - t <= PATH_RATE_WINDOW_S)
            .collect();
        let (Some(first), Some(last)) = (recent.first(), recent.last()) else {
            return 0.0;
        };
        let span = last.0 - first.0;
        if span <= 0.0 {
            return 0.0;
        }
        let added: u64 = recent.iter().skip(1).map(|(_, a)| u64::from(*a)).sum();
        added as f64 / span
    }
}

#[cfg(test)]
mod tests {
    use super::PathProgress;

    #[test]
    fn path_rate_counts_a_restarted_picture_and_forgets_old_renders() {
        let mut p = PathProgress::default();
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
        // Nothing rendered for a while: no rate.
        assert_eq!(p.per_second(5.0), 0.0);
    }
}
