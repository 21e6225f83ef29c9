//! The one reading of sizes and durations, for every flag and job file of both tools.
//!
//! Sizes follow fio and gdsio: `K`, `M`, `G`, `T` (with or without `B`, any case) and
//! `KiB`, `MiB`, `GiB`, `TiB` are all powers of 1024, so `8M`, `8MB` and `8MiB` are each
//! 8 MiB; a bare number is bytes; fractions work (`1.5G`). Durations are a bare number of
//! seconds (as fio's `runtime=`) or figures with units (`250ms`, `1.5s`, `5min`, `2h 30min`).
//! Rates printed for people are GB/s (10^9 bytes per second) unless the unit says GiB/s.

use std::time::Duration;

/// What the size flags say in `--help`.
pub const SIZE_HELP: &str = "K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, as in fio: 8M = 8MiB";

/// The parser configuration: fio's default convention (`kb_base=1024`).
const SIZES: parse_size::Config = parse_size::Config::new().with_binary();

/// A value that is not a size or a duration, with the value and what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UnitError {
    /// Not a size.
    #[error("'{value}' is not a size (e.g. 4096, 4k, 1M, 8MiB, 1.5G; {SIZE_HELP}): {why}")]
    Size {
        /// The text given.
        value: String,
        /// What the parser found wrong.
        why: String,
    },
    /// Not an image size `WIDTHxHEIGHT`, or one out of bounds; the message names the flag.
    #[error("{0}")]
    ImageSize(String),
    /// Not a duration.
    #[error("'{value}' is not a duration (e.g. 10, 2.5s, 250ms, 5min, 2h): {why}")]
    Duration {
        /// The text given.
        value: String,
        /// What the parser found wrong.
        why: String,
    },
}

/// Parses a byte size (see the module documentation).
pub fn parse_size(text: &str) -> Result<u64, UnitError> {
    let err = |why: &str| UnitError::Size {
        value: text.to_string(),
        why: why.to_string(),
    };
    let t = text.trim();
    if t.starts_with('-') {
        return Err(err("sizes cannot be negative"));
    }
    SIZES.parse_size(t).map_err(|e| {
        err(match e {
            parse_size::Error::Empty => "it is empty",
            parse_size::Error::PosOverflow => "too large",
            _ => "not a number with an optional unit",
        })
    })
}

/// Parses the value `text` of the image size flag `flag`: `WIDTHxHEIGHT` (or `X`), each side
/// 1 to `max` pixels. The error names the flag, the form expected and the value given.
pub fn parse_image_size(flag: &str, text: &str, max: u32) -> Result<(u32, u32), UnitError> {
    let bad = || {
        UnitError::ImageSize(format!(
            "{flag}: expected WIDTHxHEIGHT, e.g. 1280x720; got {text:?}"
        ))
    };
    let (w, h) = text.split_once(['x', 'X']).ok_or_else(bad)?;
    let side = |s: &str| s.trim().parse::<u32>().map_err(|_| bad());
    let (w, h) = (side(w)?, side(h)?);
    if w == 0 || h == 0 || w > max || h > max {
        return Err(UnitError::ImageSize(format!(
            "{flag}: {text:?}: each side must be 1 to {max} pixels"
        )));
    }
    Ok((w, h))
}

/// [`parse_size`] as a clap value parser for sizes held as `usize`.
pub fn parse_size_usize(text: &str) -> Result<usize, UnitError> {
    let v = parse_size(text)?;
    usize::try_from(v).map_err(|_| UnitError::Size {
        value: text.to_string(),
        why: "too large for this machine".into(),
    })
}

/// Parses a comma-separated list of sizes (`64K,256K,1M`).
pub fn parse_size_list(text: &str) -> Result<Vec<u64>, UnitError> {
    text.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(parse_size)
        .collect()
}

/// The shortest exact spelling of a size in the largest binary unit that divides it
/// (`8388608` → `8MiB`, `1536` → `1536`); [`parse_size`] reads it back to the same number.
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(&str, u32); 4] = [("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)];
    for (unit, shift) in UNITS {
        if bytes != 0 && bytes.trailing_zeros() >= shift {
            return format!("{}{unit}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// Longest duration accepted: a year (anything longer is a typo).
const MAX_DURATION: Duration = Duration::from_secs(366 * 86_400);

/// Parses a duration (see the module documentation).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let err = |why: String| UnitError::Duration {
        value: text.to_string(),
        why,
    };
    let t = text.trim();
    let d = if let Ok(secs) = t.parse::<f64>() {
        // fio's convention: a bare number is seconds.
        Duration::try_from_secs_f64(secs)
            .map_err(|_| err("not a usable number of seconds".into()))?
    } else {
        humantime::parse_duration(t).map_err(|e| err(e.to_string()))?
    };
    if d > MAX_DURATION {
        return Err(err("longer than a year".into()));
    }
    Ok(d)
}

/// [`parse_duration`] that refuses zero (a run, a time-out or an interval of no time).
pub fn parse_positive_duration(text: &str) -> Result<Duration, UnitError> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(UnitError::Duration {
            value: text.to_string(),
            why: "it must be longer than zero".into(),
        });
    }
    Ok(d)
}

/// Bytes per second as GB/s (10^9 bytes), the unit of every rate people read.
pub fn gb_per_s(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 / seconds / 1e9
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fio_examples() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("4K").unwrap(), 4096);
        assert_eq!(parse_size("1M").unwrap(), 1 << 20);
        assert_eq!(parse_size("8M").unwrap(), 8 << 20);
        assert_eq!(parse_size("8MB").unwrap(), 8 << 20);
        assert_eq!(parse_size("8MiB").unwrap(), 8 << 20);
        assert_eq!(parse_size("8 MiB").unwrap(), 8 << 20);
        assert_eq!(parse_size("1.5G").unwrap(), 3 << 29);
        assert_eq!(parse_size("2T").unwrap(), 2 << 40);
        assert_eq!(parse_size(" 64KiB ").unwrap(), 65536);
    }

    #[test]
    fn bad_sizes_name_the_value() {
        for bad in ["", "lots", "5XB", "1,5M", "-4k", "99999999999T"] {
            let e = parse_size(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("'{bad}'")), "{e}");
            assert!(e.contains("not a size"), "{e}");
        }
    }

    #[test]
    fn sizes_print_exactly() {
        assert_eq!(format_size(8 << 20), "8MiB");
        assert_eq!(format_size(1536), "1536");
        assert_eq!(format_size(3 << 29), "1536MiB");
        assert_eq!(format_size(0), "0");
        assert_eq!(parse_size_list("64K, 1M").unwrap(), vec![65536, 1 << 20]);
        assert!(parse_size_list("64K,x").is_err());
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("10").unwrap(), Duration::from_secs(10));
        assert_eq!(parse_duration("2.5").unwrap(), Duration::from_millis(2500));
        assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_duration("5min").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_duration("0").unwrap(), Duration::ZERO);
        for bad in ["", "nan", "-1", "soon", "5 parsecs", "400d", "inf"] {
            let e = parse_duration(bad).unwrap_err().to_string();
            assert!(
                e.contains(&format!("'{bad}'")) && e.contains("not a duration"),
                "{e}"
            );
        }
        assert!(parse_positive_duration("0s").is_err());
        assert!(parse_positive_duration("1ms").is_ok());
    }

    proptest! {
        #[test]
        fn sizes_round_trip(bytes in 0u64..(1 << 62)) {
            prop_assert_eq!(parse_size(&format_size(bytes)).unwrap(), bytes);
        }

        #[test]
        fn every_unit_spelling_is_binary(n in 0u64..1_000_000, unit in 0usize..4, style in 0usize..4) {
            let (letter, shift) = [("K", 10), ("M", 20), ("G", 30), ("T", 40)][unit];
            let text = match style {
                0 => format!("{n}{letter}"),
                1 => format!("{n}{}", letter.to_lowercase()),
                2 => format!("{n}{letter}B"),
                _ => format!("{n} {letter}iB"),
            };
            prop_assert_eq!(parse_size(&text).unwrap(), n << shift);
        }

        #[test]
        fn milliseconds_round_trip(ms in 0u64..10_000_000) {
            let d = Duration::from_millis(ms);
            let text = humantime::format_duration(d).to_string();
            prop_assert_eq!(parse_duration(&text).unwrap(), d);
        }
    }
}
