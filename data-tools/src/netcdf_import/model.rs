//! Reading CM1 (`cm1out_*.nc`) and WRF (`wrfout_*`) output: which layout a file has, its
//! times, horizontal spacing, level heights, and any 3-D variable as a field at mass points
//! (staggered variables averaged onto them).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result, anyhow, bail};
use netcdf::types::{FloatType, NcVariableType};
use netcdf::{AttributeValue, Extent, Extents, Variable};

use super::cf;
use super::check::{self, CheckedFile};
use super::resample::{Heights, NativeField};

/// Standard gravity, m/s², as WRF's post-processors divide geopotential by it.
const GRAVITY: f64 = 9.81;

/// Which model wrote a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Model {
    /// CM1: dimensions `time`, `zh`, `yh`, `xh` (and `zf`, `yf`, `xf` for staggered
    /// variables), coordinates in `xh`, `yh`, `zh` (km or m, per their `units`).
    Cm1,
    /// WRF: dimensions `Time`, `bottom_top`, `south_north`, `west_east` (and their `_stag`
    /// forms), spacing in the `DX`/`DY` global attributes, heights from `(PH+PHB)/9.81`.
    Wrf,
}

impl Model {
    /// The model's name as users know it.
    pub fn name(self) -> &'static str {
        match self {
            Model::Cm1 => "CM1",
            Model::Wrf => "WRF",
        }
    }

    /// Names of the time dimension, and of the (mass, staggered) dimensions of z, y and x.
    fn dims(self) -> (&'static str, [(&'static str, &'static str); 3]) {
        match self {
            Model::Cm1 => ("time", [("zh", "zf"), ("yh", "yf"), ("xh", "xf")]),
            Model::Wrf => (
                "Time",
                [
                    ("bottom_top", "bottom_top_stag"),
                    ("south_north", "south_north_stag"),
                    ("west_east", "west_east_stag"),
                ],
            ),
        }
    }
}

/// One open model output file.
pub struct ModelFile {
    /// The file's path (for messages).
    pub path: PathBuf,
    file: netcdf::File,
    /// What was checked before netCDF-C opened it (its length, its classic header).
    pub checked: CheckedFile,
    /// Its model.
    pub model: Model,
    /// Columns along x and y, and model levels (mass points).
    pub nx: usize,
    /// Columns along y.
    pub ny: usize,
    /// Model levels.
    pub nz: usize,
    /// Horizontal spacing of the columns, metres (x, y).
    pub spacing: [f64; 2],
    /// Position of the first column, metres (x, y).
    pub origin_xy: [f64; 2],
    /// Time of each record: seconds (CM1's `time`), or for WRF seconds since 1970 from the
    /// `Times` strings.
    pub times: Vec<f64>,
    /// The `Times` strings of a WRF file (empty for CM1).
    pub time_labels: Vec<String>,
    /// CM1's level heights (shared by all columns), metres.
    cm1_heights: Option<Vec<f64>>,
}

fn attr_f64(value: &AttributeValue) -> Option<f64> {
    Some(match value {
        AttributeValue::Float(v) => f64::from(*v),
        AttributeValue::Double(v) => *v,
        AttributeValue::Int(v) => f64::from(*v),
        AttributeValue::Short(v) => f64::from(*v),
        AttributeValue::Floats(v) if v.len() == 1 => f64::from(v[0]),
        AttributeValue::Doubles(v) if v.len() == 1 => v[0],
        _ => return None,
    })
}

/// Stops HDF5 printing its error stack on this thread. netCDF-C switches the printing off
/// when it initialises, but HDF5 keeps that setting per thread: on any other thread every
/// attribute netCDF-C probes and does not find (the `_Quantize*` attributes of each
/// netCDF-4 variable) printed a dozen lines of "HDF5-DIAG" to the terminal. The errors
/// themselves still reach netCDF-C, which reports them through its return codes.
pub fn quiet_hdf5_errors_on_this_thread() {
    // SAFETY: H5Eset_auto2 with the default stack, no handler and no client data only
    // changes this thread's error-printing setting; it reads no pointer.
    unsafe {
        hdf5_metno_sys::h5e::H5Eset_auto2(
            hdf5_metno_sys::h5e::H5E_DEFAULT,
            None,
            std::ptr::null_mut(),
        );
    }
}

/// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds since 1970 of a WRF time string `YYYY-MM-DD_HH:MM:SS`.
pub fn parse_wrf_time(text: &str) -> Option<f64> {
    let b = text.as_bytes();
    if b.len() != 19 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'_' | b'T' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let s = text.get(r)?;
        s.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| s.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    Some((days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + s) as f64)
}

impl ModelFile {
    /// Opens `path` and reads its layout: model, grid, spacing, times.
    pub fn open(path: &Path) -> Result<ModelFile> {
        let checked = check::before_open(path)?;
        let file = netcdf::open(path)
            .map_err(|e| anyhow!("{}: cannot open as netCDF: {e}", path.display()))?;
        let has = |d: &str| file.dimension(d).is_some();
        let model = if has("xh") && has("yh") && has("zh") {
            Model::Cm1
        } else if has("west_east") && has("south_north") && has("bottom_top") {
            Model::Wrf
        } else {
            bail!(
                "{}: neither CM1 output (dimensions xh, yh, zh) nor WRF output (dimensions \
                 west_east, south_north, bottom_top)",
                path.display()
            );
        };
        let (time_dim, [(zd, _), (yd, _), (xd, _)]) = model.dims();
        let len = |d: &str| file.dimension_len(d).unwrap_or(0);
        let (nx, ny, nz) = (len(xd), len(yd), len(zd));
        if nx < 1 || ny < 1 || nz < 2 {
            bail!(
                "{}: the grid is {nx} × {ny} columns of {nz} levels ({xd}, {yd}, {zd}); \
                 import needs at least one column of two levels",
                path.display()
            );
        }
        if !has(time_dim) {
            bail!("{}: no {time_dim} dimension", path.display());
        }
        let mut mf = ModelFile {
            path: path.to_path_buf(),
            file,
            checked,
            model,
            nx,
            ny,
            nz,
            spacing: [0.0; 2],
            origin_xy: [0.0; 2],
            times: Vec::new(),
            time_labels: Vec::new(),
            cm1_heights: None,
        };
        match model {
            Model::Cm1 => mf.read_cm1_layout()?,
            Model::Wrf => mf.read_wrf_layout()?,
        }
        Ok(mf)
    }

    fn var(&self, name: &str) -> Result<Variable<'_>> {
        self.file
            .variable(name)
            .ok_or_else(|| anyhow!("{}: no variable {name}", self.path.display()))
    }

    /// Refuses to read `elements` values of `name` where `bytes_per` bytes each would not fit
    /// in the memory this process can get (a crafted header can claim any size).
    /// Refuses too where it exceeds the per-input ceiling ([`check::check_ceiling`]) of this
    /// file alone.
    fn check_memory(&self, name: &str, elements: usize, bytes_per: u64) -> Result<()> {
        let what = || format!("{}: variable {name}", self.path.display());
        let bytes = (elements as u64).saturating_mul(bytes_per);
        check::check_ceiling(self.checked.len, bytes, 0, &what())?;
        supercell::memory::check_available(what, bytes).map_err(|e| anyhow!("{e}"))
    }

    /// Refuses variable `v` where its dimensions, or its chunks (which HDF5 reads whole),
    /// claim more values than the file can hold ([`check::check_claimed`]); returns how
    /// many its dimensions claim.
    fn check_claimed(&self, v: &Variable<'_>, name: &str) -> Result<u64> {
        let product = |lens: &mut dyn Iterator<Item = usize>| {
            lens.fold(1u64, |n, l| n.saturating_mul(l as u64))
        };
        let total = product(&mut v.dimensions().iter().map(|d| d.len()));
        check::check_claimed(&self.path, &self.checked, name, total)?;
        if let Ok(Some(chunk)) = v.chunking() {
            let what = format!("{name} (one chunk)");
            check::check_claimed(
                &self.path,
                &self.checked,
                &what,
                product(&mut chunk.into_iter()),
            )?;
        }
        Ok(total)
    }

    /// Reads `extents` of variable `name`, CF-decoded ([`cf`](super::cf)).
    fn read(&self, name: &str, extents: Extents) -> Result<Vec<f64>> {
        let v = self.var(name)?;
        let total = self.check_claimed(&v, name)?;
        if matches!(extents, Extents::All) {
            // The values in f64, and their decoded copy.
            self.check_memory(name, usize::try_from(total).unwrap_or(usize::MAX), 16)?;
        }
        cf::read_decoded(&v, name, &self.path, extents)
    }

    /// A 1-D coordinate in metres (its `units` attribute says km or m), and the error its
    /// values can carry in metres: a unit in the last place of the largest magnitude
    /// (float32 km coordinates hold about 7 digits; CM1's, computed in float32, are off by
    /// more than the half unit of their storage alone).
    fn coordinate_m(&self, name: &str) -> Result<(Vec<f64>, f64)> {
        let v = self.var(name)?;
        let values = self.read(name, Extents::All)?;
        let units = match v.attribute_value("units") {
            Some(Ok(AttributeValue::Str(s))) => s.trim().to_ascii_lowercase(),
            _ => bail!(
                "{}: variable {name} has no units attribute (km or m expected)",
                self.path.display()
            ),
        };
        let scale = match units.as_str() {
            "km" | "kilometers" | "kilometres" => 1000.0,
            "m" | "meters" | "metres" => 1.0,
            other => bail!(
                "{}: variable {name} has units '{other}' (km or m expected)",
                self.path.display()
            ),
        };
        if let Some(i) = values.iter().position(|x| !x.is_finite()) {
            bail!(
                "{}: variable {name} has a non-finite value at index {i}",
                self.path.display()
            );
        }
        let largest = values.iter().fold(0.0f64, |m, x| m.max(x.abs()));
        let relative = match v.vartype() {
            NcVariableType::Float(FloatType::F32) => f64::from(f32::EPSILON),
            _ => f64::EPSILON,
        };
        let error = relative * largest * scale;
        Ok((values.into_iter().map(|x| x * scale).collect(), error))
    }

    /// Checks that `values` (coordinate `name`) increase strictly.
    fn check_increasing(&self, name: &str, values: &[f64]) -> Result<()> {
        if let Some(i) = values.windows(2).position(|w| w[0] >= w[1]) {
            bail!(
                "{}: variable {name} does not increase: {} at index {i} is followed by {}",
                self.path.display(),
                values[i],
                values[i + 1]
            );
        }
        Ok(())
    }

    /// The spacing of a uniform horizontal coordinate whose values carry rounding errors up
    /// to `error`: the mean step, rounded to the precision the values support
    /// ([`round_to_precision`]), so that float32 km coordinates 0.0999994..0.1000004 km
    /// apart give 100 m.
    fn uniform_spacing(&self, name: &str, values: &[f64], error: f64) -> Result<f64> {
        self.check_increasing(name, values)?;
        if values.len() < 2 {
            return Ok(f64::NAN);
        }
        let n = values.len() - 1;
        let mean = (values[n] - values[0]) / n as f64;
        for w in values.windows(2) {
            if ((w[1] - w[0]) - mean).abs() > 1e-3 * mean + 2.0 * error {
                bail!(
                    "{}: variable {name} is not evenly spaced ({} m, then {} m): stretched \
                     horizontal grids are not supported",
                    self.path.display(),
                    values[1] - values[0],
                    w[1] - w[0]
                );
            }
        }
        Ok(round_to_precision(mean, 2.0 * error / n as f64))
    }

    fn read_cm1_layout(&mut self) -> Result<()> {
        let (xh, x_error) = self.coordinate_m("xh")?;
        let (yh, y_error) = self.coordinate_m("yh")?;
        let (zh, _) = self.coordinate_m("zh")?;
        let dx = self.uniform_spacing("xh", &xh, x_error)?;
        let dy = self.uniform_spacing("yh", &yh, y_error)?;
        self.check_increasing("zh", &zh)?;
        let (dx, dy) = match (dx.is_nan(), dy.is_nan()) {
            (false, false) => (dx, dy),
            (true, false) => (dy, dy),
            (false, true) => (dx, dx),
            (true, true) => bail!(
                "{}: a single column has no horizontal spacing",
                self.path.display()
            ),
        };
        self.spacing = [dx, dy];
        self.origin_xy = [
            round_to_precision(xh[0], x_error),
            round_to_precision(yh[0], y_error),
        ];
        self.cm1_heights = Some(zh);
        let times = self.read("time", Extents::All)?;
        if let Some(i) = times.iter().position(|t| !t.is_finite()) {
            bail!(
                "{}: variable time has a non-finite value at index {i}",
                self.path.display()
            );
        }
        self.times = times;
        Ok(())
    }

    fn read_wrf_layout(&mut self) -> Result<()> {
        if self.file.variable("PH").is_none() || self.file.variable("PHB").is_none() {
            bail!(
                "{}: WRF-like dimensions but no PH and PHB (geopotential), so the heights of \
                 its levels are unknown: import needs WRF's own output (wrfout), not fields \
                 derived from it",
                self.path.display()
            );
        }
        let global = |name: &str| -> Result<f64> {
            let v = match self.file.attribute(name).map(|a| a.value()) {
                Some(Ok(v)) => v,
                _ => bail!("{}: no global attribute {name}", self.path.display()),
            };
            attr_f64(&v)
                .filter(|x| x.is_finite() && *x > 0.0)
                .ok_or_else(|| {
                    anyhow!(
                        "{}: global attribute {name} is not a positive number",
                        self.path.display()
                    )
                })
        };
        let (dx, dy) = (global("DX")?, global("DY")?);
        self.spacing = [dx, dy];
        // Mass points sit half a cell in from the domain's west and south edges.
        self.origin_xy = [0.5 * dx, 0.5 * dy];
        let times = self.var("Times")?;
        let total = self.check_claimed(&times, "Times")?;
        self.check_memory("Times", usize::try_from(total).unwrap_or(usize::MAX), 1)?;
        let dims: Vec<usize> = times.dimensions().iter().map(|d| d.len()).collect();
        if dims.len() != 2 {
            bail!(
                "{}: variable Times should be (Time, DateStrLen) characters",
                self.path.display()
            );
        }
        let raw = times
            .get_raw_values(..)
            .with_context(|| format!("{}: reading Times", self.path.display()))?;
        for (t, chunk) in raw.chunks(dims[1].max(1)).enumerate().take(dims[0]) {
            let label = String::from_utf8_lossy(chunk)
                .trim_end_matches(['\0', ' '])
                .to_string();
            let secs = parse_wrf_time(&label).ok_or_else(|| {
                anyhow!(
                    "{}: Times[{t}] is '{label}', not YYYY-MM-DD_HH:MM:SS",
                    self.path.display()
                )
            })?;
            self.times.push(secs);
            self.time_labels.push(label);
        }
        Ok(())
    }

    /// The names of the variables with a time dimension and three grid dimensions of this
    /// model (mass or staggered), in file order.
    pub fn grid_variables(&self) -> Vec<String> {
        self.file
            .variables()
            .filter(|v| self.grid_dims(v).is_ok())
            .map(|v| v.name())
            .collect()
    }

    /// The `units` attribute of variable `name` as written (trimmed), or why it cannot be
    /// used; `Ok(None)` where the variable has none (or an empty one). A text attribute is
    /// CF's form; a list of strings (netCDF-4) is used where it holds exactly one.
    pub fn variable_units(&self, name: &str) -> std::result::Result<Option<String>, String> {
        let Some(v) = self.file.variable(name) else {
            return Ok(None);
        };
        let text = match v.attribute_value("units") {
            None => return Ok(None),
            Some(Ok(AttributeValue::Str(s))) => s,
            Some(Ok(AttributeValue::Strs(mut list))) if list.len() == 1 => list.remove(0),
            Some(Ok(_)) => return Err("its units attribute is not text".into()),
            Some(Err(e)) => return Err(format!("its units attribute cannot be read: {e}")),
        };
        let text = text.trim();
        if text.is_empty() {
            return Ok(None);
        }
        supercell::dataset::check_units(text)
            .map_err(|why| format!("its units attribute {why}"))?;
        Ok(Some(text.to_owned()))
    }

    /// Which of z, y, x are staggered for `v`, or why it is no grid variable.
    fn grid_dims(&self, v: &Variable<'_>) -> std::result::Result<[bool; 3], String> {
        let (time_dim, axes) = self.model.dims();
        let names: Vec<String> = v.dimensions().iter().map(|d| d.name()).collect();
        let want = format!("({time_dim}, {}, {}, {})", axes[0].0, axes[1].0, axes[2].0);
        if names.len() != 4 || names[0] != time_dim {
            return Err(format!("has dimensions ({}), not {want}", names.join(", ")));
        }
        let mut stag = [false; 3];
        for (a, (mass, staggered)) in axes.iter().enumerate() {
            if names[a + 1] == *mass {
            } else if names[a + 1] == *staggered {
                stag[a] = true;
            } else {
                return Err(format!("has dimensions ({}), not {want}", names.join(", ")));
            }
        }
        Ok(stag)
    }

    /// Variable `name` at record `t`, CF-decoded (missing values NaN, packing undone) and
    /// averaged onto mass points where it is staggered.
    /// `buffer`'s memory holds the values (reused; its contents are overwritten). Values
    /// that are infinite or NaN without being missing are dropped (NaN) and said in a note
    /// pushed on `dropped` with their count ([`cf::NonFinite`]).
    pub fn field(
        &self,
        name: &str,
        t: usize,
        buffer: Vec<f32>,
        dropped: &mut Vec<(u64, String)>,
    ) -> Result<NativeField> {
        let v = self.var(name)?;
        let stag = self
            .grid_dims(&v)
            .map_err(|why| anyhow!("{}: variable {name} {why}", self.path.display()))?;
        self.check_claimed(&v, name)?;
        let dims: Vec<usize> = v.dimensions().iter().map(|d| d.len()).collect();
        // The values, and one averaged copy while destaggering.
        self.check_memory(name, dims[1..].iter().product::<usize>(), 16)?;
        let len = dims[1..].iter().product::<usize>();
        let mut non_finite = cf::NonFinite::default();
        let read = (record(t), len);
        let mut values = cf::read_decoded_f32(&v, name, &self.path, read, buffer, &mut non_finite)
            .with_context(|| format!("reading record {t}"))?;
        let (mut nz, mut ny, mut nx) = (dims[1], dims[2], dims[3]);
        if let Some((i, x)) = non_finite.first {
            let count = non_finite.count;
            let s = if count == 1 { "" } else { "s" };
            dropped.push((
                count,
                format!(
                    "{name}: {count} non-finite value{s} dropped (treated as missing) in \
                     record {t}; the first, {x}, at (x, y, z) = ({}, {}, {})",
                    i % nx,
                    (i / nx) % ny,
                    i / (nx * ny)
                ),
            ));
        }
        let expect = [
            self.nz + usize::from(stag[0]),
            self.ny + usize::from(stag[1]),
            self.nx + usize::from(stag[2]),
        ];
        if [nz, ny, nx] != expect {
            bail!(
                "{}: variable {name} is {nz} × {ny} × {nx}, not {} × {} × {}",
                self.path.display(),
                expect[0],
                expect[1],
                expect[2]
            );
        }
        // Destagger: the mass point between two faces gets their mean.
        if stag[2] {
            values = average_pairs(&values, nz * ny, nx, 1);
            nx -= 1;
        }
        if stag[1] {
            values = average_pairs(&values, nz, ny, nx);
            ny -= 1;
        }
        if stag[0] {
            values = average_pairs(&values, 1, nz, ny * nx);
            nz -= 1;
        }
        Ok(NativeField { nx, ny, nz, values })
    }

    /// Heights of the mass levels at record `t`, metres: CM1's `zh`, or WRF's
    /// `(PH + PHB) / 9.81` on w-levels averaged onto mass levels.
    pub fn heights(&self, t: usize) -> Result<Heights> {
        if let Some(z) = &self.cm1_heights {
            return Ok(Heights::Shared(z.clone()));
        }
        let read = |name: &str| -> Result<Vec<f64>> {
            let v = self.var(name)?;
            let stag = self
                .grid_dims(&v)
                .map_err(|why| anyhow!("{}: variable {name} {why}", self.path.display()))?;
            if stag != [true, false, false] {
                bail!(
                    "{}: variable {name} should be on bottom_top_stag",
                    self.path.display()
                );
            }
            self.read(name, record(t))
                .with_context(|| format!("reading record {t}"))
        };
        // PH, PHB and the heights, in f64.
        let points = (self.nz + 1)
            .saturating_mul(self.nx)
            .saturating_mul(self.ny);
        self.check_memory("PH and PHB", points, 24)?;
        let (ph, phb) = (read("PH")?, read("PHB")?);
        let columns = self.nx * self.ny;
        if ph.len() != (self.nz + 1) * columns || phb.len() != ph.len() {
            bail!(
                "{}: PH and PHB do not have {} w-levels of {columns} columns",
                self.path.display(),
                self.nz + 1
            );
        }
        let w_level = |k: usize, c: usize| (ph[k * columns + c] + phb[k * columns + c]) / GRAVITY;
        let mut z = vec![0.0; self.nz * columns];
        for c in 0..columns {
            for k in 0..self.nz {
                let (lo, hi) = (w_level(k, c), w_level(k + 1, c));
                if !(lo.is_finite() && hi.is_finite()) {
                    bail!(
                        "{}: PH + PHB is not finite at record {t}, level {k}, column ({}, {})",
                        self.path.display(),
                        c % self.nx,
                        c / self.nx
                    );
                }
                if hi <= lo {
                    bail!(
                        "{}: heights from PH + PHB do not increase at record {t}, column \
                         ({}, {}): {lo} m at w-level {k}, then {hi} m",
                        self.path.display(),
                        c % self.nx,
                        c / self.nx
                    );
                }
                z[k * columns + c] = 0.5 * (lo + hi);
            }
        }
        Ok(Heights::PerColumn(z))
    }
}

/// The extents of record `t` of a `(time, z, y, x)` variable.
fn record(t: usize) -> Extents {
    Extents::from(vec![
        Extent::from(t),
        Extent::from(..),
        Extent::from(..),
        Extent::from(..),
    ])
}

/// The decimal with the fewest digits within `error` of `x` (`x` itself where `error` is
/// not positive): what `x` has beyond its values' precision is noise, and 100 m reads
/// better than 100.00000521540642 m.
pub fn round_to_precision(x: f64, error: f64) -> f64 {
    if !(error > 0.0 && error.is_finite() && x.is_finite()) {
        return x;
    }
    let mut exponent = error.log10().ceil() as i32;
    loop {
        let step = 10f64.powi(exponent);
        let digits = (-exponent).max(0) as usize;
        // Through text, so that 0.1-steps come out as the decimal, not 0.1 × n.
        let rounded: f64 = format!("{:.digits$}", (x / step).round() * step)
            .parse()
            .unwrap_or(x);
        if (rounded - x).abs() <= error || exponent < -300 {
            return rounded;
        }
        exponent -= 1;
    }
}

/// Averages neighbours along the middle axis of an `outer × n × inner` array, giving
/// `outer × (n-1) × inner`.
fn average_pairs(values: &[f32], outer: usize, n: usize, inner: usize) -> Vec<f32> {
    let mut out = Vec::with_capacity(outer * (n - 1) * inner);
    for o in 0..outer {
        for a in 0..n - 1 {
            let lo = &values[(o * n + a) * inner..][..inner];
            let hi = &values[(o * n + a + 1) * inner..][..inner];
            out.extend(lo.iter().zip(hi).map(|(x, y)| 0.5 * (x + y)));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrf_times() {
        assert_eq!(parse_wrf_time("1970-01-01_00:00:00"), Some(0.0));
        assert_eq!(parse_wrf_time("2000-03-01_01:02:03"), Some(951_872_523.0));
        assert_eq!(parse_wrf_time("2000-13-01_01:02:03"), None);
        assert_eq!(parse_wrf_time("2000-03-01"), None);
    }

    #[test]
    fn spacing_rounded_to_its_precision() {
        // float32 km: 0.1 km steps whose values carry errors of about 5e-4 m.
        assert_eq!(round_to_precision(100.000_005_215_406_42, 1.2e-5), 100.0);
        assert_eq!(round_to_precision(99.999_998, 4e-6), 100.0);
        assert_eq!(round_to_precision(333.333_333_3, 0.02), 333.33);
        assert_eq!(round_to_precision(-23_500.002, 0.0025), -23_500.0);
        assert_eq!(round_to_precision(1234.5678, 0.3), 1234.6);
        assert_eq!(round_to_precision(0.25, 0.0), 0.25);
    }

    #[test]
    fn destagger_averages_neighbours() {
        // 1 × 3 × 2 array, averaged along the middle axis.
        let v = [0.0, 10.0, 2.0, 20.0, 4.0, 40.0];
        assert_eq!(average_pairs(&v, 1, 3, 2), vec![1.0, 15.0, 3.0, 30.0]);
    }
}
