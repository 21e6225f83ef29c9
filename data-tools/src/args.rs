//! Parsers for command-line values: byte sizes, index coordinates, grid selectors.

use anyhow::{Context, Result, bail};

/// Parses a byte size as `supercell` does ([`supercell::units::parse_size`]): `4096`,
/// `64K`, `8M` = `8MiB` = 8 MiB (K/M/G/T and KiB/MiB/GiB/TiB are powers of 1024, as in
/// fio), `1.5G`.
pub fn parse_size(text: &str) -> Result<u64> {
    Ok(supercell::units::parse_size(text)?)
}

/// How long a rank of a conversion across MPI ranks waits for the others at one exchange
/// by default (`--timeout`): long enough for the slowest rank's frame of a round, short
/// enough that a hung node is noticed within minutes.
pub const DEFAULT_RANK_TIMEOUT_S: &str = "300";

/// Parses `--timeout`: seconds, a positive finite number.
pub fn parse_timeout(text: &str) -> Result<std::time::Duration> {
    let s: f64 = text
        .trim()
        .parse()
        .with_context(|| format!("'{text}' is not a number of seconds"))?;
    if !(s.is_finite() && s > 0.0 && s <= 1e9) {
        bail!("'{text}': the timeout must be a positive number of seconds");
    }
    Ok(std::time::Duration::from_secs_f64(s))
}

/// Parses an index coordinate `I,J,K` (integers, may be negative).
pub fn parse_coord(text: &str) -> Result<[i32; 3]> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        bail!("'{text}' is not an index coordinate: expected three integers I,J,K");
    }
    let mut c = [0i32; 3];
    for (slot, part) in c.iter_mut().zip(&parts) {
        *slot = part
            .parse()
            .with_context(|| format!("'{text}': '{part}' is not a 32-bit integer"))?;
    }
    Ok(c)
}

/// Parses a world position X,Y,Z (metres, the grid's world units): three finite numbers.
pub fn parse_world(text: &str) -> Result<[f64; 3]> {
    let parts: Vec<&str> = text.split(',').map(str::trim).collect();
    if parts.len() != 3 {
        bail!("'{text}' is not a world position: expected three numbers X,Y,Z (metres)");
    }
    let mut c = [0f64; 3];
    for (slot, part) in c.iter_mut().zip(&parts) {
        let v: f64 = part
            .parse()
            .with_context(|| format!("'{text}': '{part}' is not a number"))?;
        if !v.is_finite() {
            bail!("'{text}': '{part}' is not a finite number");
        }
        *slot = v;
    }
    Ok(c)
}

/// Formats a float as JSON text that parses back to exactly the stored `f32`: Rust's
/// shortest round-trip representation (so 0.1f32 prints as `0.1`). JSON cannot hold
/// non-finite numbers, so those become the strings `"nan"`, `"inf"` and `"-inf"`.
pub fn json_f32(v: f32) -> String {
    if v.is_finite() {
        format!("{v:?}")
    } else if v.is_nan() {
        "\"nan\"".to_string()
    } else if v > 0.0 {
        "\"inf\"".to_string()
    } else {
        "\"-inf\"".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_positive_seconds() {
        assert_eq!(parse_timeout("2.5").unwrap().as_millis(), 2500);
        assert_eq!(
            parse_timeout(DEFAULT_RANK_TIMEOUT_S).unwrap().as_secs(),
            300
        );
        for bad in ["0", "-1", "nan", "inf", "1e10", "soon", ""] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("8MiB").unwrap(), 8 << 20);
        assert_eq!(parse_size("64MB").unwrap(), 64 << 20);
        assert_eq!(parse_size("8M").unwrap(), 8 << 20);
        assert_eq!(parse_size("1.5GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("7 GB").unwrap(), 7 << 30);
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5XB").is_err());
        assert!(parse_size("").is_err());
    }

    #[test]
    fn coords() {
        assert_eq!(parse_coord("-5,0,7").unwrap(), [-5, 0, 7]);
        assert_eq!(parse_coord(" 1, 2 ,3").unwrap(), [1, 2, 3]);
        assert!(parse_coord("1,2").is_err());
        assert!(parse_coord("1,2,x").is_err());
        assert!(parse_coord("1,2,99999999999").is_err());
    }

    #[test]
    fn json_floats_read_back_exactly() {
        for v in [
            0.1f32,
            1.0,
            -3.5e-8,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            123456.79,
        ] {
            let text = json_f32(v);
            let back: f64 = serde_json::from_str(&text).unwrap();
            assert_eq!(back as f32, v, "{text}");
        }
        assert_eq!(json_f32(0.1), "0.1");
        assert_eq!(json_f32(f32::NAN), "\"nan\"");
        assert_eq!(json_f32(f32::NEG_INFINITY), "\"-inf\"");
    }
}
