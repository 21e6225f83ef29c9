//! The range a numeric setting may take ([`Limits`]): the one definition the scene
//! validator, the camera and the renderer's clamps share.

/// The values one numeric render setting may take: a finite number between `min` and `max`
/// (each bound inclusive or not).
///
/// [`RenderSettings::validate`](super::RenderSettings::validate) (and so the scene validator) rejects values outside these
/// bounds, and [`View::gpu_params`](super::View::gpu_params) clamps to the same bounds, so that a setting the scene
/// accepted always reaches the renderer unchanged; the clamps only guard settings built in
/// code.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Limits {
    /// Lower bound.
    pub min: f64,
    /// Whether `min` itself is allowed.
    pub min_inclusive: bool,
    /// Upper bound (`f64::MAX`: none).
    pub max: f64,
    /// Whether `max` itself is allowed.
    pub max_inclusive: bool,
}

/// A setting's value for a message: as written for ordinary magnitudes (`0.85`, `100`), in
/// exponent form for huge or tiny ones (`3e38`, not 39 digits).
pub fn shown(v: f32) -> String {
    let a = v.abs();
    if a.is_finite() && a != 0.0 && !(1e-4..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

impl Limits {
    /// Any finite number.
    pub const FINITE: Limits = Limits::between(f64::MIN, f64::MAX);

    /// `min ≤ v ≤ max`.
    pub const fn between(min: f64, max: f64) -> Limits {
        Limits {
            min,
            min_inclusive: true,
            max,
            max_inclusive: true,
        }
    }

    /// `min < v < max`.
    pub const fn strictly_between(min: f64, max: f64) -> Limits {
        Limits {
            min,
            min_inclusive: false,
            max,
            max_inclusive: false,
        }
    }

    /// `v ≥ min`.
    pub const fn at_least(min: f64) -> Limits {
        Limits::between(min, f64::MAX)
    }

    /// `v > min`.
    pub const fn above(min: f64) -> Limits {
        Limits {
            min,
            min_inclusive: false,
            max: f64::MAX,
            max_inclusive: true,
        }
    }

    /// `min ≤ v < max`.
    pub const fn from_below(min: f64, max: f64) -> Limits {
        Limits {
            min,
            min_inclusive: true,
            max,
            max_inclusive: false,
        }
    }

    /// Whether `v` is finite and within the bounds.
    ///
    /// The bounds are compared as `f32`, the settings' own precision: `0.01` written in a
    /// scene is the `f32` nearest 0.01, slightly below the `f64` 0.01, and is allowed.
    pub fn contains(&self, v: f64) -> bool {
        let (min, max) = (f64::from(self.min as f32), f64::from(self.max as f32));
        let lo = if self.min_inclusive {
            v >= min
        } else {
            v > min
        };
        let hi = if self.max_inclusive {
            v <= max
        } else {
            v < max
        };
        v.is_finite() && lo && hi
    }

    /// The allowed values in words: `a finite number`, `a finite number ≥ 0`, `in 0..1`,
    /// `in (−1, 1)`.
    pub fn describe(&self) -> String {
        let has_min = self.min > f64::MIN;
        let has_max = self.max < f64::MAX;
        match (has_min, has_max) {
            (false, false) => "a finite number".into(),
            (true, false) => {
                let op = if self.min_inclusive { "≥" } else { ">" };
                format!("a finite number {op} {}", self.min)
            }
            (false, true) => {
                let op = if self.max_inclusive { "≤" } else { "<" };
                format!("a finite number {op} {}", self.max)
            }
            (true, true) if self.min_inclusive && self.max_inclusive => {
                format!("in {}..{}", self.min, self.max)
            }
            (true, true) => format!(
                "in {}{}, {}{}",
                if self.min_inclusive { '[' } else { '(' },
                self.min,
                self.max,
                if self.max_inclusive { ']' } else { ')' },
            ),
        }
    }

    /// `v` moved into the closed bounds; `fallback` when it is not finite. (Open bounds
    /// clamp to the bound itself: only use this with closed ones.)
    pub fn clamp(&self, v: f32, fallback: f32) -> f32 {
        if v.is_finite() {
            (f64::from(v).clamp(self.min, self.max)) as f32
        } else {
            fallback
        }
    }

    /// `v` moved into the bounds (for integer settings).
    pub fn clamp_u32(&self, v: u32) -> u32 {
        (f64::from(v).clamp(self.min, self.max)) as u32
    }
}
