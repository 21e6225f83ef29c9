//! CF decoding of a netCDF variable's stored values, as netCDF4-python applies it by default
//! (`set_auto_maskandscale(True)`), so that an import never holds raw packed counts:
//!
//! 1. Missing, compared on the stored (packed) values: equal to `_FillValue` (or, without
//!    one, the netCDF default fill of the type, except for bytes whose filling is off),
//!    equal to any `missing_value`, below `valid_min` / above `valid_max` (or outside
//!    `valid_range`, which wins over them). Without a valid minimum a fill value `<= 0`
//!    serves as one, without a valid maximum a fill value `> 0` does (the NetCDF User
//!    Guide's rule; byte types without an explicit `_FillValue` have none). Missing values
//!    become NaN, which the import drops like the background.
//! 2. Unpacked: `stored × scale_factor + add_offset` (either may be absent), computed in
//!    double precision.
//!
//! Attributes that would change the values and that this does not apply are refused by
//! name: `_Unsigned = "true"`, a non-numeric or multi-valued `scale_factor`/`add_offset`, a
//! valid range or fill value that the stored type cannot hold exactly, and, on packed
//! variables, a valid range given in another type than the stored one (which the NetCDF
//! User Guide reads as unpacked units).

use std::path::Path;

use anyhow::{Result, bail};
use netcdf::types::{FloatType, IntType, NcVariableType};
use netcdf::{AttributeValue, Extents, Variable};

/// How to turn one variable's stored values into physical ones.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CfDecoding {
    scale: Option<f64>,
    offset: Option<f64>,
    fill: Option<f64>,
    missing: Vec<f64>,
    valid_min: Option<f64>,
    valid_max: Option<f64>,
}

/// The stored numeric type of a variable, as far as decoding cares.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Stored {
    Int(IntType),
    Float(FloatType),
}

impl Stored {
    fn of(v: &Variable<'_>) -> Option<Stored> {
        match v.vartype() {
            NcVariableType::Int(t) => Some(Stored::Int(t)),
            NcVariableType::Float(t) => Some(Stored::Float(t)),
            _ => None,
        }
    }

    fn is_byte(self) -> bool {
        matches!(self, Stored::Int(IntType::I8 | IntType::U8))
    }

    /// netCDF-C's default fill value of the type (`NC_FILL_*`), as the type holds it.
    fn default_fill(self) -> f64 {
        match self {
            Stored::Int(IntType::I8) => -127.0,
            Stored::Int(IntType::U8) => 255.0,
            Stored::Int(IntType::I16) => -32767.0,
            Stored::Int(IntType::U16) => 65535.0,
            Stored::Int(IntType::I32) => -2_147_483_647.0,
            Stored::Int(IntType::U32) => 4_294_967_295.0,
            Stored::Int(IntType::I64) => -9_223_372_036_854_775_806_i64 as f64,
            Stored::Int(IntType::U64) => 18_446_744_073_709_551_614_u64 as f64,
            Stored::Float(FloatType::F32) => f64::from(9.969_21e36_f32),
            Stored::Float(FloatType::F64) => 9.969_209_968_386_869e36,
        }
    }

    /// Whether the type holds `x` exactly.
    fn holds(self, x: f64) -> bool {
        let int_in = |lo: f64, hi: f64| x.fract() == 0.0 && x >= lo && x <= hi;
        match self {
            Stored::Int(IntType::I8) => int_in(-128.0, 127.0),
            Stored::Int(IntType::U8) => int_in(0.0, 255.0),
            Stored::Int(IntType::I16) => int_in(-32768.0, 32767.0),
            Stored::Int(IntType::U16) => int_in(0.0, 65535.0),
            Stored::Int(IntType::I32) => int_in(-2_147_483_648.0, 2_147_483_647.0),
            Stored::Int(IntType::U32) => int_in(0.0, 4_294_967_295.0),
            Stored::Int(IntType::I64 | IntType::U64) => x.fract() == 0.0,
            Stored::Float(FloatType::F32) => x.is_nan() || f64::from(x as f32) == x,
            Stored::Float(FloatType::F64) => true,
        }
    }
}

/// The attribute's numbers and whether they were stored in the variable's own type.
fn numbers(value: &AttributeValue) -> Option<(Vec<f64>, Stored)> {
    use AttributeValue as A;
    let (v, t): (Vec<f64>, Stored) = match value {
        A::Uchar(x) => (vec![f64::from(*x)], Stored::Int(IntType::U8)),
        A::Uchars(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Int(IntType::U8),
        ),
        A::Schar(x) => (vec![f64::from(*x)], Stored::Int(IntType::I8)),
        A::Schars(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Int(IntType::I8),
        ),
        A::Ushort(x) => (vec![f64::from(*x)], Stored::Int(IntType::U16)),
        A::Ushorts(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Int(IntType::U16),
        ),
        A::Short(x) => (vec![f64::from(*x)], Stored::Int(IntType::I16)),
        A::Shorts(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Int(IntType::I16),
        ),
        A::Uint(x) => (vec![f64::from(*x)], Stored::Int(IntType::U32)),
        A::Uints(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Int(IntType::U32),
        ),
        A::Int(x) => (vec![f64::from(*x)], Stored::Int(IntType::I32)),
        A::Ints(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Int(IntType::I32),
        ),
        A::Ulonglong(x) => (vec![*x as f64], Stored::Int(IntType::U64)),
        A::Ulonglongs(x) => (
            x.iter().map(|&x| x as f64).collect(),
            Stored::Int(IntType::U64),
        ),
        A::Longlong(x) => (vec![*x as f64], Stored::Int(IntType::I64)),
        A::Longlongs(x) => (
            x.iter().map(|&x| x as f64).collect(),
            Stored::Int(IntType::I64),
        ),
        A::Float(x) => (vec![f64::from(*x)], Stored::Float(FloatType::F32)),
        A::Floats(x) => (
            x.iter().map(|&x| f64::from(x)).collect(),
            Stored::Float(FloatType::F32),
        ),
        A::Double(x) => (vec![*x], Stored::Float(FloatType::F64)),
        A::Doubles(x) => (x.clone(), Stored::Float(FloatType::F64)),
        _ => return None,
    };
    Some((v, t))
}

impl CfDecoding {
    /// The decoding of variable `v` (named `name` in file `path`), or why it cannot be
    /// decoded faithfully.
    pub fn of(v: &Variable<'_>, name: &str, path: &Path) -> Result<CfDecoding> {
        let where_ = || format!("{}: variable {name}", path.display());
        let Some(stored) = Stored::of(v) else {
            bail!("{}: is not numeric", where_());
        };
        let attr = |a: &str| -> Result<Option<(Vec<f64>, Stored)>> {
            match v.attribute_value(a) {
                None => Ok(None),
                Some(Err(e)) => bail!("{}: cannot read attribute {a}: {e}", where_()),
                Some(Ok(value)) => match numbers(&value) {
                    Some((n, t)) if !n.is_empty() => Ok(Some((n, t))),
                    _ => bail!(
                        "{}: attribute {a} is {value:?}, not a number: its values cannot \
                         be decoded as CF says",
                        where_()
                    ),
                },
            }
        };
        if let Some(Ok(AttributeValue::Str(s))) = v.attribute_value("_Unsigned")
            && s.trim().eq_ignore_ascii_case("true")
        {
            bail!(
                "{}: attribute _Unsigned = \"{s}\" (unsigned values stored in a signed type) \
                 is not applied by this import",
                where_()
            );
        }
        let scalar = |a: &str| -> Result<Option<f64>> {
            match attr(a)? {
                None => Ok(None),
                Some((n, _)) if n.len() == 1 && n[0].is_finite() => Ok(Some(n[0])),
                Some((n, _)) => bail!(
                    "{}: attribute {a} is {n:?}, not one finite number: unknown packing",
                    where_()
                ),
            }
        };
        let mut cf = CfDecoding {
            scale: scalar("scale_factor")?,
            offset: scalar("add_offset")?,
            ..CfDecoding::default()
        };
        let packed = cf.scale.is_some() || cf.offset.is_some();
        // Values compared with the stored ones must be stored values.
        let stored_values = |a: &str, n: &[f64], t: Stored| -> Result<()> {
            if packed && t != stored && a.starts_with("valid") {
                bail!(
                    "{}: attribute {a} is not of the packed type ({t:?} against {stored:?}), \
                     so it would be in unpacked units, which this import does not apply",
                    where_()
                );
            }
            if let Some(x) = n.iter().find(|&&x| !stored.holds(x)) {
                bail!(
                    "{}: attribute {a} holds {x}, which the variable's type {stored:?} \
                     cannot store: it cannot be compared with the stored values",
                    where_()
                );
            }
            Ok(())
        };
        if let Some((n, t)) = attr("_FillValue")? {
            stored_values("_FillValue", &n, t)?;
            if n.len() != 1 {
                bail!(
                    "{}: attribute _FillValue has {} values, not one",
                    where_(),
                    n.len()
                );
            }
            cf.fill = Some(n[0]);
        }
        if let Some((n, t)) = attr("missing_value")? {
            stored_values("missing_value", &n, t)?;
            cf.missing = n;
        }
        if let Some((n, t)) = attr("valid_range")? {
            stored_values("valid_range", &n, t)?;
            if n.len() != 2 {
                bail!(
                    "{}: attribute valid_range has {} values, not two",
                    where_(),
                    n.len()
                );
            }
            cf.valid_min = Some(n[0]);
            cf.valid_max = Some(n[1]);
        } else {
            for (a, slot) in [
                ("valid_min", &mut cf.valid_min),
                ("valid_max", &mut cf.valid_max),
            ] {
                if let Some((n, t)) = attr(a)? {
                    stored_values(a, &n, t)?;
                    if n.len() != 1 {
                        bail!(
                            "{}: attribute {a} has {} values, not one",
                            where_(),
                            n.len()
                        );
                    }
                    *slot = Some(n[0]);
                }
            }
        }
        // The fill value that masks, and that bounds the valid range where nothing else
        // does (bytes: only an explicit one bounds it; their default masks unless filling
        // is off).
        let bounding_fill = if cf.fill.is_some() {
            cf.fill
        } else if stored.is_byte() {
            if byte_filling_on(v, stored) {
                cf.fill = Some(stored.default_fill());
            }
            None
        } else {
            cf.fill = Some(stored.default_fill());
            cf.fill
        };
        if let Some(f) = bounding_fill.filter(|f| !f.is_nan()) {
            if f <= 0.0 && cf.valid_min.is_none() {
                cf.valid_min = Some(f);
            }
            if f > 0.0 && cf.valid_max.is_none() {
                cf.valid_max = Some(f);
            }
        }
        Ok(cf)
    }

    /// Whether stored value `x` is the fill value or a `missing_value`.
    #[inline]
    pub fn is_marker(&self, x: f64) -> bool {
        let same = |m: f64| x == m || (m.is_nan() && x.is_nan());
        self.fill.is_some_and(same) || self.missing.iter().any(|&m| same(m))
    }

    /// Whether stored value `x` is missing.
    #[inline]
    pub fn is_missing(&self, x: f64) -> bool {
        self.is_marker(x)
            || self.valid_min.is_some_and(|lo| x < lo)
            || self.valid_max.is_some_and(|hi| x > hi)
    }

    /// The physical value of stored value `x` (NaN where it is missing).
    #[inline]
    pub fn decode(&self, x: f64) -> f64 {
        if self.is_missing(x) {
            return f64::NAN;
        }
        x * self.scale.unwrap_or(1.0) + self.offset.unwrap_or(0.0)
    }
}

/// Whether a byte variable's filling is on (netCDF4-python masks its default fill then).
fn byte_filling_on(v: &Variable<'_>, stored: Stored) -> bool {
    match stored {
        Stored::Int(IntType::I8) => matches!(v.fill_value::<i8>(), Ok(Some(_))),
        Stored::Int(IntType::U8) => matches!(v.fill_value::<u8>(), Ok(Some(_))),
        _ => true,
    }
}

/// Values a read found infinite or NaN that are not the fill value or a `missing_value`
/// (a stored `+inf` or NaN; a `+inf` above a valid maximum is counted too, since it is a
/// fault of the data rather than a marker), or finite values the decoding overflows (a
/// scale, or float32's range): they are dropped like missing values (NaN), so that nothing
/// computed from them (a level mean, a wind speed) turns one of them into many, and
/// counted, so that the import says so.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct NonFinite {
    /// How many.
    pub count: u64,
    /// The first one: its index among the values read, and its value.
    pub first: Option<(usize, f64)>,
}

impl NonFinite {
    /// `decoded`, the value at index `i` decoded from `stored`, or None (counted) where
    /// `stored` is not finite and not a marker (`marker()`: the fill value or a
    /// `missing_value`), or where a finite `stored` decodes to an infinity.
    #[inline]
    fn keep<T: Into<f64> + Copy>(
        &mut self,
        i: usize,
        stored: f64,
        decoded: T,
        marker: impl FnOnce() -> bool,
    ) -> Option<T> {
        let fault = if stored.is_finite() {
            decoded.into().is_infinite()
        } else {
            !marker()
        };
        if !fault {
            return Some(decoded);
        }
        self.count += 1;
        self.first.get_or_insert((i, stored));
        None
    }
}

/// Reads `extents` of variable `name` and decodes them ([`CfDecoding`]) into f64.
pub fn read_decoded(
    v: &Variable<'_>,
    name: &str,
    path: &Path,
    extents: Extents,
) -> Result<Vec<f64>> {
    read_decoded_counting(v, name, path, extents, &mut NonFinite::default())
}

/// [`read_decoded`], with values that are not finite and not missing counted in
/// `non_finite` and made NaN.
fn read_decoded_counting(
    v: &Variable<'_>,
    name: &str,
    path: &Path,
    extents: Extents,
    non_finite: &mut NonFinite,
) -> Result<Vec<f64>> {
    let cf = CfDecoding::of(v, name, path)?;
    let mut values: Vec<f64> = v
        .get_values::<f64, _>(extents)
        .map_err(|e| anyhow::anyhow!("{}: reading {name}: {e}", path.display()))?;
    for (i, x) in values.iter_mut().enumerate() {
        let stored = *x;
        *x = non_finite
            .keep(i, stored, cf.decode(stored), || cf.is_marker(stored))
            .unwrap_or(f64::NAN);
    }
    Ok(values)
}

/// [`read_decoded`] narrowed to f32: the same values (each decoded in f64 from the stored
/// value, then rounded to f32), with float32 variables read as they are stored, into
/// `buffer` (whose memory is reused: a fresh 40 MB field costs ten thousand page faults),
/// instead of through an f64 copy of the whole field. `len`: the values `extents` select.
/// Values that are not finite and not missing (a finite f64 beyond float32's range too)
/// are counted in `non_finite` and made NaN ([`NonFinite`]).
pub fn read_decoded_f32(
    v: &Variable<'_>,
    name: &str,
    path: &Path,
    (extents, len): (Extents, usize),
    mut buffer: Vec<f32>,
    non_finite: &mut NonFinite,
) -> Result<Vec<f32>> {
    if Stored::of(v) != Some(Stored::Float(FloatType::F32)) {
        let values = read_decoded_counting(v, name, path, extents, non_finite)?;
        buffer.clear();
        buffer.extend(values.into_iter().enumerate().map(|(i, x)| {
            // NaN here is missing (or already counted).
            non_finite.keep(i, x, x as f32, || true).unwrap_or(f32::NAN)
        }));
        return Ok(buffer);
    }
    let cf = CfDecoding::of(v, name, path)?;
    // Every value is overwritten by the read: a reused buffer is not cleared first (a
    // field's worth of memset per read).
    buffer.resize(len, 0.0);
    v.get_values_into::<f32, _>(&mut buffer, extents)
        .map_err(|e| anyhow::anyhow!("{}: reading {name}: {e}", path.display()))?;
    match cf.in_f32() {
        // All finite (the usual case, one vectorised scan): nothing to count, and the
        // mask decodes branch-free.
        Some(mask) if buffer.iter().all(|x| x.is_finite()) => mask.decode_all(&mut buffer),
        Some(mask) => buffer.iter_mut().enumerate().for_each(|(i, x)| {
            let stored = *x;
            *x = non_finite
                .keep(i, stored.into(), mask.decode(stored), || {
                    mask.is_marker(stored)
                })
                .unwrap_or(f32::NAN)
        }),
        None => buffer.iter_mut().enumerate().for_each(|(i, x)| {
            let stored = f64::from(*x);
            *x = non_finite
                .keep(i, stored, cf.decode(stored) as f32, || cf.is_marker(stored))
                .unwrap_or(f32::NAN)
        }),
    }
    Ok(buffer)
}

/// [`CfDecoding`] of an unpacked variable whose fill, missing values and valid bounds are
/// all float32 numbers (or NaN), applied to float32 values in f32: the same result as
/// decoding in f64 and rounding, since comparing two float32 numbers in f64 or in f32 gives
/// the same answer, but without widening every value.
struct F32Mask {
    fill: Option<f32>,
    missing: Vec<f32>,
    valid_min: Option<f32>,
    valid_max: Option<f32>,
}

impl CfDecoding {
    /// The decoding in f32 where it is exact ([`F32Mask`]).
    fn in_f32(&self) -> Option<F32Mask> {
        if self.scale.is_some() || self.offset.is_some() {
            return None;
        }
        let exact = |x: f64| (x.is_nan() || f64::from(x as f32) == x).then_some(x as f32);
        let each = |x: Option<f64>| match x {
            None => Some(None),
            Some(x) => exact(x).map(Some),
        };
        Some(F32Mask {
            fill: each(self.fill)?,
            missing: self
                .missing
                .iter()
                .map(|&m| exact(m))
                .collect::<Option<_>>()?,
            valid_min: each(self.valid_min)?,
            valid_max: each(self.valid_max)?,
        })
    }
}

impl F32Mask {
    /// [`CfDecoding::is_marker`] of `x`, in f32.
    #[inline]
    fn is_marker(&self, x: f32) -> bool {
        let same = |m: f32| x == m || (m.is_nan() && x.is_nan());
        self.fill.is_some_and(same) || self.missing.iter().any(|&m| same(m))
    }

    /// [`CfDecoding::is_missing`] of `x`, in f32.
    #[inline]
    fn is_missing(&self, x: f32) -> bool {
        self.is_marker(x)
            || self.valid_min.is_some_and(|lo| x < lo)
            || self.valid_max.is_some_and(|hi| x > hi)
    }

    /// [`CfDecoding::decode`] of `x`, in f32.
    #[inline]
    fn decode(&self, x: f32) -> f32 {
        // `+ 0.0` as the f64 path's `x × 1 + 0` does: -0 becomes +0.
        if self.is_missing(x) {
            f32::NAN
        } else {
            x + 0.0
        }
    }

    /// [`F32Mask::decode`] of every value, branch-free (vectorised) where the variable has
    /// no `missing_value`: a NaN fill or bound never matches, and a NaN value stays NaN
    /// either way, so the NaN cases of `decode` need no test.
    fn decode_all(&self, values: &mut [f32]) {
        if !self.missing.is_empty() {
            values.iter_mut().for_each(|x| *x = self.decode(*x));
            return;
        }
        let fill = self.fill.unwrap_or(f32::NAN);
        let lo = self.valid_min.unwrap_or(f32::NEG_INFINITY);
        let hi = self.valid_max.unwrap_or(f32::INFINITY);
        for x in values {
            let v = *x;
            let dropped = v == fill || v < lo || v > hi;
            *x = if dropped { f32::NAN } else { v + 0.0 };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vectorised_f32_mask_decodes_as_each_value_alone() {
        let values = [
            0.0,
            -0.0,
            1.5,
            -7.0,
            9.96921e36,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            -100.0,
            100.0,
            100.5,
            -1e-30,
        ];
        let masks = [
            (Some(9.96921e36), None, None),
            (Some(f32::NAN), Some(-100.0), Some(100.0)),
            (None, Some(-7.0), None),
            (Some(-7.0), None, Some(f32::NAN)),
        ];
        for (fill, valid_min, valid_max) in masks {
            for missing in [vec![], vec![1.5]] {
                let mask = F32Mask {
                    fill,
                    missing,
                    valid_min,
                    valid_max,
                };
                let mut all = values;
                mask.decode_all(&mut all);
                for (x, got) in values.iter().zip(all) {
                    let want = mask.decode(*x);
                    assert_eq!(
                        got.to_bits(),
                        want.to_bits(),
                        "{x} under {fill:?} {valid_min:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn non_finite_values_are_counted_unless_they_are_markers() {
        // The default float fill bounds the valid range from above: +inf above it is still
        // counted (a fault, not a marker), a finite value above it is simply missing.
        let cf = CfDecoding {
            fill: Some(f64::from(9.969_21e36_f32)),
            valid_max: Some(f64::from(9.969_21e36_f32)),
            missing: vec![f64::NEG_INFINITY],
            ..CfDecoding::default()
        };
        let mask = cf.in_f32().unwrap();
        let mut tally = NonFinite::default();
        let stored = [
            1.0f32,
            f32::INFINITY,
            9.969_21e36,
            1e37,
            f32::NEG_INFINITY,
            f32::NAN,
        ];
        let kept: Vec<Option<f32>> = stored
            .iter()
            .enumerate()
            .map(|(i, &x)| tally.keep(i, x.into(), mask.decode(x), || mask.is_marker(x)))
            .collect();
        assert_eq!(kept[0], Some(1.0));
        assert_eq!(kept[1], None, "+inf counted");
        assert!(
            kept[2].unwrap().is_nan() && kept[3].unwrap().is_nan(),
            "missing, not counted"
        );
        assert!(
            kept[4].unwrap().is_nan(),
            "-inf is a missing_value here: a marker"
        );
        assert_eq!(kept[5], None, "NaN that is not the fill counted");
        assert_eq!(tally.count, 2);
        assert_eq!(tally.first, Some((1, f64::INFINITY)));
        // A finite value that decoding overflows is counted too.
        let scaled = CfDecoding {
            scale: Some(1e300),
            ..CfDecoding::default()
        };
        let mut tally = NonFinite::default();
        assert_eq!(tally.keep(0, 1e10, scaled.decode(1e10), || false), None);
        assert_eq!(
            tally.keep(1, 1e300, 1e300f64 as f32, || true),
            None,
            "past f32"
        );
        assert_eq!(tally.count, 2);
    }

    #[test]
    fn packing_and_masks_follow_the_stored_values() {
        let cf = CfDecoding {
            scale: Some(0.5),
            offset: Some(10.0),
            fill: Some(-32767.0),
            missing: vec![7.0],
            valid_min: Some(-100.0),
            valid_max: Some(100.0),
        };
        assert_eq!(cf.decode(2.0), 11.0);
        assert!(cf.decode(-32767.0).is_nan());
        assert!(cf.decode(7.0).is_nan(), "missing_value, before unpacking");
        assert!(cf.decode(101.0).is_nan(), "valid_max on the packed value");
        assert_eq!(cf.decode(100.0), 60.0);
        assert!(cf.decode(-101.0).is_nan());
    }

    #[test]
    fn float32_decoding_in_f32_matches_f64() {
        let values = [
            0.0f32,
            -0.0,
            1.5,
            -7.25,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-45,
            9.969_21e36,
            -1e30,
            100.0,
            100.000_01,
        ];
        let configs = [
            CfDecoding::default(),
            CfDecoding {
                fill: Some(f64::from(9.969_21e36_f32)),
                valid_max: Some(f64::from(9.969_21e36_f32)),
                ..CfDecoding::default()
            },
            CfDecoding {
                fill: Some(f64::NAN),
                missing: vec![1.5, -7.25],
                valid_min: Some(f64::from(-1e30_f32)),
                valid_max: Some(100.0),
                ..CfDecoding::default()
            },
        ];
        for cf in &configs {
            let mask = cf.in_f32().expect("float32 bounds");
            for &x in &values {
                let want = cf.decode(f64::from(x)) as f32;
                let got = mask.decode(x);
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "{cf:?} {x}: {got} vs {want}"
                );
            }
        }
        // Packing, or a bound that no float32 is, keeps the f64 path.
        let packed = CfDecoding {
            scale: Some(2.0),
            ..CfDecoding::default()
        };
        assert!(packed.in_f32().is_none());
        let wide = CfDecoding {
            valid_max: Some(0.1),
            ..CfDecoding::default()
        };
        assert!(wide.in_f32().is_none());
    }

    #[test]
    fn stored_types_hold_what_they_can() {
        let i16t = Stored::Int(IntType::I16);
        assert!(i16t.holds(-32768.0) && !i16t.holds(32768.0) && !i16t.holds(0.5));
        let f32t = Stored::Float(FloatType::F32);
        assert!(f32t.holds(0.5) && !f32t.holds(0.1));
        assert_eq!(i16t.default_fill(), -32767.0);
    }
}
