//! `supercell-data import` of CM1 and WRF netCDF output: every record (time) of every file
//! becomes a frame, every chosen 3-D variable an attribute, CF-decoded ([`cf`]: packing
//! undone, fill and missing values and values outside the valid range dropped), resampled
//! onto box voxels ([`resample`]) and kept sparse by dropping values at or below a
//! per-variable background ([`sources::background_for`]).
//!
//! The voxels fit the model grid: along x and y they keep the files' horizontal spacing
//! (`--dx` sets both), along z they take the model's vertical spacing: the thinnest layer
//! between adjacent model levels whose lower level lies at most 3 km above its column's
//! lowest level, over all columns and all records, rounded to 4 significant digits and then
//! down to 3 ([`resample::default_dz`]; `--dz` sets it). The grid spans every record's
//! levels. Before writing, the import prints the voxel counts and the largest output size
//! (every voxel active) and refuses what would not fit the lanes' disks or the memory.

mod cf;
mod check;
mod model;
mod output;
mod resample;
mod sources;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};

use anyhow::{Context, Result, anyhow, bail};
use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::Ordering::Relaxed;
use supercell::cluster::Ranks;
use supercell::dataset::bricks;
use supercell::dataset::ranks::{FrameHandover, RankWriter, WriteRanks};
use supercell::dataset::{AttributeSpec, Brick, DatasetWriter, LaneSpec, Manifest, Provenance};
use supercell::format::{BuildOptions, BuiltGrid, Grid, GridType, LEAF_DIM, SparseVolume, Value};

use model::{Model, ModelFile};
use resample::{Background, HeightSpan, Heights, NativeField, VoxelGrid};
#[cfg(test)]
use sources::background_for;
use sources::{
    Source, choose_backgrounds, choose_sources, grid_class, parse_backgrounds, source_units,
};

/// Name of the wind-speed attribute made with `--wind-speed`.
pub const WIND_SPEED: &str = "wind_speed";

/// What the netCDF import needs from the command line.
pub struct NetcdfOptions<'a> {
    /// The files, in time order.
    pub files: &'a [PathBuf],
    /// Dataset directory to create.
    pub out: &'a Path,
    /// Lanes.
    pub lanes: LaneSpec,
    /// Stripe chunk size.
    pub chunk_size: u64,
    /// Value encoding.
    pub grid_type: GridType,
    /// `--vars`: comma-separated variable names (None: every 3-D variable).
    pub vars: Option<&'a str>,
    /// `--dz`: the voxels' height in metres (None: [`resample::default_dz`] of the finest
    /// low layer).
    pub dz: Option<f64>,
    /// `--dx`: the voxels' width along x and y in metres (None: the files' horizontal
    /// spacing, each axis its own).
    pub dx: Option<f64>,
    /// `--background NAME=VALUE` overrides.
    pub backgrounds: &'a [String],
    /// `--wind-speed`: add the speed of the velocity components as `wind_speed`.
    pub wind_speed: bool,
    /// The ranks converting together (`mpirun`): each its share of the frames, one
    /// dataset ([`supercell::dataset::ranks`]). One rank: the single writer, as always.
    pub ranks: &'a dyn Ranks,
    /// `--bricks N`: split every grid into N spatial bricks of the voxel grid (None:
    /// whole grids).
    pub bricks: Option<u32>,
    /// How long a rank waits at an exchange for the others (`--timeout`).
    pub wait: Option<std::time::Duration>,
}

/// The writer of an import: the single writer, or this rank's part of a shared write.
enum Writer<'r> {
    Alone(Box<DatasetWriter>),
    Ranks(Box<RankWriter<'r>>),
}

/// Where imported frames go: the single writer, or this rank's part of a shared write.
enum Sink<'w, 'r> {
    Alone(&'w mut DatasetWriter),
    Ranks(&'w mut RankWriter<'r>),
}

/// Buffers given back after use for the next user to fill again: their pages stay mapped,
/// so refilling them faults in no fresh memory.
struct Pool<T> {
    buffers: std::sync::Mutex<Vec<Vec<T>>>,
    /// Buffers kept at most.
    keep: usize,
}

impl<T> Pool<T> {
    fn new(keep: usize) -> Pool<T> {
        Pool {
            buffers: Default::default(),
            keep,
        }
    }

    fn take(&self) -> Vec<T> {
        self.buffers
            .lock()
            .ok()
            .and_then(|mut b| b.pop())
            .unwrap_or_default()
    }

    fn give(&self, buffer: Vec<T>) {
        if let Ok(mut b) = self.buffers.lock()
            && b.len() < self.keep
            && buffer.capacity() > 0
        {
            b.push(buffer);
        }
    }
}

/// Native field buffers given back by the build for the reader to fill again.
type BufferPool = Pool<f32>;

/// Native field buffers kept: what is in flight between the reader and the build, about.
const NATIVE_BUFFERS: usize = READ_AHEAD + 3;

/// Buffers of encoded leaves given back after each grid's build, for the next grids' leaves
/// (every grid's leaves would otherwise fault in fresh pages, a gigabyte of page faults on
/// the CM1-like bench): a strip of bricks' each, for as many grids as the pool builds at
/// once and one more.
fn leaf_buffer_pool(grid: &VoxelGrid) -> Pool<u8> {
    let strips = grid.dims[1].div_ceil(LEAF_DIM);
    Pool::new(strips.saturating_mul(rayon::current_num_threads() + 1))
}

/// Reads `source` at record `t` of `file` into buffers from `pool`; notes of non-finite
/// values dropped (with their counts) go to `dropped`.
fn read_source(
    file: &ModelFile,
    source: &Source,
    t: usize,
    pool: &BufferPool,
    dropped: &mut Vec<(u64, String)>,
) -> Result<NativeField> {
    Ok(match source {
        Source::Variable(v) => file.field(v, t, pool.take(), dropped)?,
        Source::Perturbation(v) => {
            // Dropped values are NaN, which the level means leave out.
            let mut f = file.field(v, t, pool.take(), dropped)?;
            resample::subtract_level_means(&mut f);
            f
        }
        Source::Speed(c) => {
            // A NaN component makes the speed NaN: no value there.
            let mut u = file.field(&c[0], t, pool.take(), dropped)?;
            let v = file.field(&c[1], t, pool.take(), dropped)?;
            let w = file.field(&c[2], t, pool.take(), dropped)?;
            for ((a, b), c) in u.values.iter_mut().zip(&v.values).zip(&w.values) {
                *a = (*a * *a + b * b + c * c).sqrt();
            }
            pool.give(v.values);
            pool.give(w.values);
            u
        }
    })
}

/// A record's wind speed made from its velocity components as the reader reads them for
/// their own attributes, so that each is read once: `(u² + v²) + w²` summed in that order
/// and its root taken, in f32, which is what [`read_source`] computes from reads of its own.
struct SpeedSum {
    /// The components, where each is an attribute of its own read before the speed, in
    /// this order (else the speed reads them again).
    components: Option<[String; 3]>,
    /// The sum of the squares of the components read so far.
    sum: Option<NativeField>,
    added: usize,
    /// Notes of values the components' reads dropped, which the speed drops too.
    dropped: Vec<(u64, String)>,
}

impl SpeedSum {
    fn of(sources: &[(String, Source)]) -> SpeedSum {
        let at = |name: &str| {
            sources
                .iter()
                .position(|(_, s)| matches!(s, Source::Variable(v) if v == name))
        };
        let components = sources.iter().enumerate().find_map(|(i, (_, s))| match s {
            Source::Speed(c) => {
                let [u, v, w] = [at(&c[0])?, at(&c[1])?, at(&c[2])?];
                (u < v && v < w && w < i).then(|| c.clone())
            }
            _ => None,
        });
        SpeedSum {
            components,
            sum: None,
            added: 0,
            dropped: Vec::new(),
        }
    }

    /// Adds the square of variable `name` (read as `field`, with its notes `dropped`) where
    /// it is the next component.
    fn add(
        &mut self,
        name: &str,
        field: &NativeField,
        dropped: &[(u64, String)],
        pool: &BufferPool,
    ) {
        let Some(c) = &self.components else { return };
        if self.added == 3 || c[self.added] != name {
            return;
        }
        match &mut self.sum {
            None => {
                let mut values = pool.take();
                values.clear();
                values.extend(field.values.iter().map(|a| a * a));
                self.sum = Some(NativeField { values, ..*field });
            }
            Some(sum) => {
                for (s, b) in sum.values.iter_mut().zip(&field.values) {
                    *s += b * b;
                }
            }
        }
        self.added += 1;
        self.dropped.extend_from_slice(dropped);
    }

    /// The speed, where `source` is it and every component was added.
    fn take(&mut self, source: &Source) -> Option<(NativeField, Vec<(u64, String)>)> {
        if !matches!(source, Source::Speed(_)) || self.added != 3 {
            return None;
        }
        let mut speed = self.sum.take()?;
        for s in &mut speed.values {
            *s = s.sqrt();
        }
        Some((speed, std::mem::take(&mut self.dropped)))
    }
}

/// One attribute of one record to resample and build.
struct GridJob<'a> {
    file: &'a ModelFile,
    record: usize,
    heights: &'a Heights,
    grid: &'a VoxelGrid,
    grid_type: GridType,
    bricks: &'a [Brick],
    pool: &'a BufferPool,
    leaf_buffers: &'a Pool<u8>,
}

/// An attribute's built grid (one per brick where bricked) and what the import reports of
/// it.
struct FrameGrid {
    grids: Vec<BuiltGrid>,
    /// No voxel beyond the background.
    empty: bool,
    /// The largest difference between a value and what the grid stores for it (non-zero
    /// only for quantised grid types).
    max_abs_error: f64,
}

impl GridJob<'_> {
    /// `bytes`: a buffer to build into (reused: the previous frame's grid).
    fn build(
        &self,
        name: &str,
        field: NativeField,
        bg: Background,
        bytes: Vec<u8>,
    ) -> Result<FrameGrid> {
        let opts = BuildOptions {
            name: name.to_string(),
            grid_type: self.grid_type,
            grid_class: grid_class(bg),
            voxel_size: self.grid.voxel,
            world_origin: self.grid.origin,
            ..BuildOptions::default()
        };
        let context = || {
            format!(
                "{}: building {name} at record {}",
                self.file.path.display(),
                self.record
            )
        };
        match self.grid_type {
            // Quantised: the volume is kept to measure the quantisation error against.
            GridType::Fp16 | GridType::Fp8 => {
                let volume = resample::to_sparse(&field, self.heights, self.grid, bg);
                self.pool.give(field.values);
                if self.bricks.is_empty() {
                    let grid = BuiltGrid::of_volume(&volume, &opts, bytes).with_context(context)?;
                    return Ok(FrameGrid {
                        empty: volume.bricks.is_empty(),
                        max_abs_error: largest_difference(&volume, grid.bytes())?,
                        grids: vec![grid],
                    });
                }
                let mut out = FrameGrid {
                    empty: volume.bricks.is_empty(),
                    max_abs_error: 0.0,
                    grids: Vec::with_capacity(self.bricks.len()),
                };
                for brick in self.bricks {
                    // The brick's leaves are the whole grid's: each is encoded alone.
                    let part = SparseVolume {
                        background: volume.background,
                        bricks: (volume.bricks.iter())
                            .filter(|b| bricks::holds_leaf(brick, 1, b.origin))
                            .cloned()
                            .collect(),
                    };
                    let grid =
                        BuiltGrid::of_volume(&part, &opts, Vec::new()).with_context(context)?;
                    let error = largest_difference(&part, grid.bytes())?;
                    out.max_abs_error = out.max_abs_error.max(error);
                    out.grids.push(grid);
                }
                Ok(out)
            }
            // Leaves encoded as their bricks are made: no boxed bricks.
            _ => {
                let take = || self.leaf_buffers.take();
                let leaves =
                    resample::encode_leaves(&field, self.heights, self.grid, bg, &opts, &take)
                        .with_context(context)?;
                self.pool.give(field.values);
                let grids = match self.bricks {
                    [] => vec![BuiltGrid::of_leaves(&leaves, &opts, bytes).with_context(context)?],
                    bricks => (bricks.iter())
                        .map(|b| {
                            let keep = |origin| bricks::holds_leaf(b, 1, origin);
                            BuiltGrid::of_leaves_where(&leaves, &opts, keep, Vec::new())
                                .with_context(context)
                        })
                        .collect::<Result<_>>()?,
                };
                let empty = leaves.is_empty();
                for buffer in leaves.into_buffers() {
                    self.leaf_buffers.give(buffer);
                }
                Ok(FrameGrid {
                    empty,
                    max_abs_error: 0.0,
                    grids,
                })
            }
        }
    }
}

/// The largest |value − stored value| over the active voxels of `volume` in the grid
/// `bytes` built from it.
fn largest_difference(volume: &SparseVolume, bytes: &[u8]) -> Result<f64> {
    let grid = Grid::parse(bytes).map_err(|e| anyhow!("reading back a built grid: {e}"))?;
    let mut acc = grid.accessor();
    let mut worst = 0f64;
    for brick in &volume.bricks {
        for n in (0..LEAF_DIM * LEAF_DIM * LEAF_DIM).filter(|&n| brick.is_active(n)) {
            let p = [
                brick.origin[0] + (n >> 6) as i32,
                brick.origin[1] + ((n >> 3) & 7) as i32,
                brick.origin[2] + (n & 7) as i32,
            ];
            let stored = match acc.value(p) {
                Ok(Value::Float(v)) => f64::from(v),
                other => bail!("reading back voxel {p:?} of a built grid: {other:?}"),
            };
            worst = worst.max((stored - f64::from(brick.values[n])).abs());
        }
    }
    Ok(worst)
}

fn grid_type_name(t: GridType) -> &'static str {
    match t {
        GridType::Fp16 => "fp16",
        GridType::Fp8 => "fp8",
        _ => "float",
    }
}

/// Opens the files and checks that they share the first one's grid.
fn open_files(paths: &[PathBuf]) -> Result<Vec<ModelFile>> {
    let files: Vec<ModelFile> = paths
        .iter()
        .map(|p| ModelFile::open(p))
        .collect::<Result<_>>()?;
    let first = &files[0];
    for f in &files[1..] {
        if f.model != first.model
            || [f.nx, f.ny, f.nz] != [first.nx, first.ny, first.nz]
            || f.spacing != first.spacing
            || f.origin_xy != first.origin_xy
        {
            bail!(
                "{}: its grid ({} {} × {} × {}, spacing {:?} m) differs from {}'s ({} {} × {} × {}, \
                 spacing {:?} m)",
                f.path.display(),
                f.model.name(),
                f.nx,
                f.ny,
                f.nz,
                f.spacing,
                first.path.display(),
                first.model.name(),
                first.nx,
                first.ny,
                first.nz,
                first.spacing
            );
        }
    }
    Ok(files)
}

/// The frames: every record of every file as `(file, record, seconds)`, times strictly
/// increasing (WRF's counted from the first file's first time).
fn frame_list(files: &[ModelFile]) -> Result<Vec<(usize, usize, f64)>> {
    let first = &files[0];
    let mut frames: Vec<(usize, usize, f64)> = Vec::new();
    let wrf_start = (first.model == Model::Wrf)
        .then(|| first.times.first().copied())
        .flatten();
    for (fi, f) in files.iter().enumerate() {
        if f.times.is_empty() {
            bail!(
                "{}: holds no records (its time dimension is empty)",
                f.path.display()
            );
        }
        for (t, &time) in f.times.iter().enumerate() {
            // WRF times are dates; the dataset counts seconds from the first one.
            let time = time - wrf_start.unwrap_or(0.0);
            if let Some(&(pf, pt, prev)) = frames.last()
                && time <= prev
            {
                bail!(
                    "{}: record {t} is at {time} s, not after record {pt} of {} ({prev} s): \
                     give the files in time order",
                    f.path.display(),
                    files[pf].path.display()
                );
            }
            frames.push((fi, t, time));
        }
    }
    Ok(frames)
}

/// The voxel grid (x, y: the files' spacing or `--dx`; z: [`resample::default_dz`] or
/// `--dz`, over every record's levels), printed with the largest output it can make;
/// refused where that would not fit the disks or the memory.
fn plan_grid(
    opts: &NetcdfOptions<'_>,
    files: &[ModelFile],
    frames: &[(usize, usize, f64)],
    attributes: usize,
) -> Result<VoxelGrid> {
    let first = &files[0];
    // The voxel grid: from the heights of every record (WRF's move with time).
    let mut span: Option<HeightSpan> = None;
    for &(fi, t, _) in frames {
        let f = &files[fi];
        if f.model == Model::Cm1 && t > 0 {
            // CM1's levels are the same in every record of a file.
            continue;
        }
        let s = HeightSpan::of(&f.heights(t)?, f.nx, f.ny, f.nz);
        span = Some(span.map_or(s, |a| a.union(s)));
    }
    let span = span.expect("at least one frame");
    let voxel = [
        opts.dx.unwrap_or(first.spacing[0]),
        opts.dx.unwrap_or(first.spacing[1]),
        opts.dz
            .unwrap_or_else(|| resample::default_dz(span.finest_low_layer)),
    ];
    // Each axis's voxel count, before it is made an integer (a float beyond usize's range
    // would saturate, and its + 1 overflow): a header's coordinates (levels 10^30 m apart)
    // must not wrap the grid to nothing.
    let spans = [
        (first.nx - 1) as f64 * first.spacing[0],
        (first.ny - 1) as f64 * first.spacing[1],
        span.hi - span.lo,
    ];
    let fits = |a: usize| {
        let count = spans[a] / voxel[a];
        count.is_finite() && count <= (1u64 << 24) as f64
    };
    if let Some(a) = (0..3).find(|&a| !fits(a)) {
        bail!(
            "{}: {} m along {} at {} m a voxel is too many voxels (more than 2^24; choose a \
             larger --dz or --dx)",
            first.path.display(),
            spans[a],
            ["x", "y", "z"][a],
            voxel[a]
        );
    }
    let grid = VoxelGrid::covering(
        first.nx,
        first.ny,
        first.spacing,
        first.origin_xy,
        span.lo,
        span.hi,
        voxel,
    );
    let voxels_text = format!(
        "{} × {} × {} voxels of {} × {} × {} m",
        grid.dims[0], grid.dims[1], grid.dims[2], voxel[0], voxel[1], voxel[2]
    );
    // Saturating: three axes of 2^24 overflow 64 bits.
    let voxels = grid
        .dims
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(d as u64));
    if grid.dims.iter().any(|&d| d > (1 << 24)) || voxels > 1 << 36 {
        bail!("{voxels_text}: too many (choose a larger --dz or --dx)");
    }
    // Every rank plans the same grid; rank 0 says what it is.
    let says = opts.ranks.rank() == 0;
    says.then(|| println!(
        "{}: {} {} file(s), {} records, {} × {} columns × {} levels ({}–{} m), spacing {} × {} m; \
         {voxels_text} (linear in z per column; z: {})",
        opts.out.display(),
        files.len(),
        first.model.name(),
        frames.len(),
        first.nx,
        first.ny,
        first.nz,
        span.lo.round(),
        span.hi.round(),
        first.spacing[0],
        first.spacing[1],
        match opts.dz {
            Some(_) => "--dz".to_string(),
            None => format!(
                "the thinnest layer in the lowest {} km, {:.1} m, rounded",
                resample::LOW_LAYERS_M / 1000.0,
                span.finest_low_layer
            ),
        }
    ));
    let worst = output::worst_case_bytes(grid.dims, opts.grid_type);
    let total = worst
        .saturating_mul(attributes as u64)
        .saturating_mul(frames.len() as u64);
    says.then(|| {
        println!(
            "output: at most {} ({} per grid with every voxel active, {} grids)",
            supercell::memory::human(total),
            supercell::memory::human(worst),
            attributes * frames.len()
        )
    });
    output::check_disk(opts.out, &opts.lanes, total)
        .map_err(|e| anyhow!("{e} (choose fewer --vars, a larger --dz or --dx)"))?;
    // One frame's grids held for the writer and its native fields, and the grids being
    // built in parallel with their bricks.
    let building = rayon::current_num_threads().min(attributes) as u64;
    let native = [first.nx, first.ny, first.nz + 1, 4]
        .iter()
        .fold(1u64, |n, &d| n.saturating_mul(d as u64));
    let memory = worst
        .saturating_add(native)
        .saturating_mul(attributes as u64)
        .saturating_add(building.saturating_mul(grid.voxel_count().saturating_mul(10)));
    let input = files.iter().map(|f| f.checked.len).sum();
    check::check_ceiling(input, memory, total, &voxels_text)?;
    supercell::memory::check_available(|| format!("one frame of {voxels_text}"), memory)
        .map_err(|e| anyhow!("{e} (choose fewer --vars, a larger --dz or --dx)"))?;
    if let Some(label) = first.time_labels.first().filter(|_| says) {
        println!("frame times are seconds after {label}");
    }
    Ok(grid)
}

/// A field read for the build, with its record's heights (shared by the record's fields).
struct ReadField {
    heights: Arc<Heights>,
    field: NativeField,
    /// Non-finite values dropped from the variables read: count and note.
    dropped: Vec<(u64, String)>,
}

/// Fields the reader thread may have read ahead of the build (each one variable of one
/// record, 4 bytes a native point), besides the one it is reading.
const READ_AHEAD: usize = 2;

/// The frame loop: one thread reads every record's fields in order (netCDF-C and HDF5 are
/// not thread-safe, so every read of the loop stays on that thread) while the rayon pool
/// resamples and builds the fields already read, each attribute a task; each frame is
/// written when its grids are built, one frame at a time.
struct Import<'a> {
    files: &'a [ModelFile],
    /// The frames this process converts (file, record, time), each with its index in the
    /// dataset.
    frames: &'a [(usize, (usize, usize, f64))],
    sources: &'a [(String, Source)],
    backgrounds: &'a [Background],
    grid: &'a VoxelGrid,
    grid_type: GridType,
    /// The spatial bricks every grid is split into (empty: whole grids).
    bricks: &'a [Brick],
    bar: &'a ProgressBar,
    pool: BufferPool,
    leaf_buffers: Pool<u8>,
    /// Non-finite input values dropped, per attribute.
    non_finite: Vec<std::sync::atomic::AtomicU64>,
}

impl Import<'_> {
    /// Reads every frame's fields in order, sending them to `tx`; stops after the first
    /// error (sent too) or when the receiver is gone.
    fn read_all(&self, tx: SyncSender<Result<ReadField>>) {
        model::quiet_hdf5_errors_on_this_thread();
        for &(_, (fi, t, _)) in self.frames {
            let file = &self.files[fi];
            let heights = match file.heights(t) {
                Ok(h) => Arc::new(h),
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
            };
            let mut speed = SpeedSum::of(self.sources);
            for (_, source) in self.sources {
                let mut dropped = Vec::new();
                let read = match speed.take(source) {
                    Some((field, notes)) => {
                        dropped = notes;
                        Ok(field)
                    }
                    None => read_source(file, source, t, &self.pool, &mut dropped),
                };
                if let (Ok(field), Source::Variable(name)) = (&read, source) {
                    speed.add(name, field, &dropped, &self.pool);
                }
                let read = read.map(|field| ReadField {
                    heights: Arc::clone(&heights),
                    field,
                    dropped,
                });
                let failed = read.is_err();
                if tx.send(read).is_err() || failed {
                    return;
                }
            }
        }
    }

    /// Imports every frame into `writer` (the dataset at `out`); returns each attribute's
    /// largest quantisation error.
    fn run(&self, mut writer: Sink<'_, '_>, out: &Path) -> Result<Vec<f64>> {
        let (tx, rx) = sync_channel(READ_AHEAD);
        std::thread::scope(|s| {
            s.spawn(move || self.read_all(tx));
            let mut worst_error = vec![0f64; self.sources.len()];
            // The last frame's grid buffers, built into again (saves their page faults).
            let mut buffers: Vec<Vec<u8>> = Vec::new();
            for &(frame, (fi, t, time)) in self.frames {
                self.bar.set_message(format!("frame {frame} at {time} s"));
                let built = self.build_frame(&rx, &self.files[fi], t, buffers)?;
                let mut per_attribute = Vec::with_capacity(built.len());
                for ((name, _), (g, worst)) in self
                    .sources
                    .iter()
                    .zip(built.into_iter().zip(&mut worst_error))
                {
                    if g.empty {
                        // On stdout, where the rest of the report goes (a hidden bar prints
                        // none).
                        self.bar.suspend(|| {
                            println!(
                                "note: {name} is empty in frame {frame} ({time} s, {} record \
                                 {t}): no value beyond its background",
                                self.files[fi].path.display()
                            )
                        });
                    }
                    *worst = worst.max(g.max_abs_error);
                    per_attribute.push(g.grids.into_iter());
                }
                // Brick by brick, each brick's grids in attribute order (one pass for whole
                // grids).
                let mut grids = Vec::with_capacity(per_attribute.len() * self.bricks.len().max(1));
                for _ in 0..self.bricks.len().max(1) {
                    grids.extend(per_attribute.iter_mut().filter_map(Iterator::next));
                }
                let writing = || format!("writing {}", out.display());
                buffers = match &mut writer {
                    Sink::Alone(w) => {
                        // Built here: the writer need not recompute their checksums.
                        w.push_built_frame(time, &grids).with_context(writing)?;
                        grids.into_iter().map(BuiltGrid::into_buffer).collect()
                    }
                    Sink::Ranks(w) => {
                        let bytes: Vec<Vec<u8>> =
                            grids.into_iter().map(BuiltGrid::into_buffer).collect();
                        w.push_frame(frame, time, &bytes).with_context(writing)?;
                        bytes
                    }
                };
            }
            Ok(worst_error)
        })
    }

    /// One frame's grids: each field taken from `rx` as it is read and built on the rayon
    /// pool while the next is read.
    fn build_frame(
        &self,
        rx: &Receiver<Result<ReadField>>,
        file: &ModelFile,
        record: usize,
        mut buffers: Vec<Vec<u8>>,
    ) -> Result<Vec<FrameGrid>> {
        buffers.resize_with(self.sources.len(), Vec::new);
        let mut built: Vec<Option<Result<FrameGrid>>> = self.sources.iter().map(|_| None).collect();
        let mut failed = None;
        rayon::in_place_scope(|scope| {
            let slots = built.iter_mut().zip(self.sources).zip(self.backgrounds);
            for (a, (((slot, (name, _)), &bg), bytes)) in slots.zip(buffers).enumerate() {
                let read = match rx.recv() {
                    Ok(Ok(read)) => read,
                    Ok(Err(e)) => {
                        failed = Some(e);
                        break;
                    }
                    Err(_) => {
                        failed = Some(anyhow!("the netCDF reader thread stopped"));
                        break;
                    }
                };
                self.note_dropped(a, name, file, &read.dropped);
                scope.spawn(move |_| {
                    let job = GridJob {
                        file,
                        record,
                        heights: &read.heights,
                        grid: self.grid,
                        grid_type: self.grid_type,
                        bricks: self.bricks,
                        pool: &self.pool,
                        leaf_buffers: &self.leaf_buffers,
                    };
                    *slot = Some(job.build(name, read.field, bg, bytes));
                    self.bar.inc(1);
                });
            }
        });
        if let Some(e) = failed {
            return Err(e);
        }
        built
            .into_iter()
            .map(|g| g.expect("every attribute built"))
            .collect()
    }
}

impl Import<'_> {
    /// Says which non-finite values were dropped from the variables attribute `a` (`name`)
    /// is made of, and counts them for the summary.
    fn note_dropped(&self, a: usize, name: &str, file: &ModelFile, dropped: &[(u64, String)]) {
        for (count, note) in dropped {
            self.non_finite[a].fetch_add(*count, std::sync::atomic::Ordering::Relaxed);
            self.bar
                .suspend(|| println!("note: {name} from {}: {note}", file.path.display()));
        }
    }
}

impl Import<'_> {
    /// This rank's figures for rank 0's report: each attribute's largest quantisation
    /// error (as bits: exact, and a NaN would not survive JSON) and its count of
    /// non-finite input values.
    fn figures(&self, worst: &[f64]) -> String {
        let counts: Vec<u64> = self.non_finite.iter().map(|n| n.load(Relaxed)).collect();
        let bits: Vec<u64> = worst.iter().map(|w| w.to_bits()).collect();
        serde_json::to_string(&(bits, counts)).expect("figures serialize")
    }

    /// Rank 0: every rank's [`figures`](Self::figures) taken in: the largest errors over
    /// all ranks, returned, and the non-finite counts summed into this import's.
    fn take_in_figures(&self, reports: &[String]) -> Result<Vec<f64>> {
        let mut worst = vec![0.0f64; self.non_finite.len()];
        for n in &self.non_finite {
            n.store(0, Relaxed);
        }
        for (rank, text) in reports.iter().enumerate() {
            let (bits, counts): (Vec<u64>, Vec<u64>) = serde_json::from_str(text)
                .with_context(|| format!("rank {rank}'s figures do not read"))?;
            for (w, b) in worst.iter_mut().zip(bits) {
                *w = w.max(f64::from_bits(b));
            }
            for (n, c) in self.non_finite.iter().zip(counts) {
                n.fetch_add(c, Relaxed);
            }
        }
        Ok(worst)
    }
}

/// Imports `import`'s frames into `writer` and commits: each attribute's largest
/// quantisation error, with the manifest (on rank 0 only, across ranks).
fn import_into(
    import: &Import<'_>,
    writer: Writer<'_>,
    out: &Path,
) -> Result<(Vec<f64>, Option<Manifest>)> {
    let finishing = || format!("finishing {}", out.display());
    match writer {
        Writer::Alone(mut w) => {
            let worst = import.run(Sink::Alone(&mut w), out)?;
            Ok((worst, Some((*w).finish().with_context(finishing)?)))
        }
        Writer::Ranks(mut w) => {
            let worst = import.run(Sink::Ranks(&mut w), out);
            let converted = worst.as_ref().map(|_| ()).map_err(|e| format!("{e:#}"));
            let mine = worst
                .as_ref()
                .map(|w| import.figures(w))
                .unwrap_or_default();
            let finished = (*w)
                .finish_reporting(converted, mine)
                .with_context(finishing)?;
            let worst = worst?;
            let Some((manifest, reports)) = finished else {
                return Ok((worst, None));
            };
            // Rank 0 reports every rank's frames, as one process reports its own.
            Ok((import.take_in_figures(&reports)?, Some(manifest)))
        }
    }
}

/// What an import reads before it writes: the files, the attributes' sources and
/// backgrounds, the frames (file, record, time) and the voxel grid.
type Prepared = (
    Vec<ModelFile>,
    Vec<(String, Source)>,
    Vec<Background>,
    Vec<(usize, usize, f64)>,
    VoxelGrid,
);

/// Checks the flags, opens the files and plans the grid.
fn prepare(opts: &NetcdfOptions<'_>) -> Result<Prepared> {
    let overrides = parse_backgrounds(opts.backgrounds)?;
    for (flag, value) in [("--dz", opts.dz), ("--dx", opts.dx)] {
        if let Some(v) = value
            && !(v.is_finite() && v > 0.0)
        {
            bail!("{flag} must be a positive number of metres");
        }
    }
    let files = open_files(opts.files)?;
    let sources = choose_sources(&files[0], opts.vars, opts.wind_speed)?;
    let backgrounds = choose_backgrounds(&sources, &overrides)?;
    let frames = frame_list(&files)?;
    let grid = plan_grid(opts, &files, &frames, sources.len())?;
    Ok((files, sources, backgrounds, frames, grid))
}

/// The ranks of the import and their wait, as the shared write takes them.
fn team<'a>(opts: &NetcdfOptions<'a>) -> WriteRanks<'a> {
    WriteRanks {
        ranks: opts.ranks,
        wait: opts.wait,
    }
}

/// Runs the import.
pub fn run(opts: &NetcdfOptions<'_>) -> Result<ExitCode> {
    let prepared = prepare(opts);
    if opts.ranks.size() > 1 {
        // A rank whose files cannot be read fails here on every rank, named, rather than
        // leave the others waiting for it.
        let mine = prepared.as_ref().map(|_| ()).map_err(|e| format!("{e:#}"));
        supercell::dataset::ranks::all_ready(team(opts), mine)?;
    }
    let (files, sources, backgrounds, frames, grid) = prepared?;
    let bricks = match opts.bricks {
        None => Vec::new(),
        Some(n) => {
            let dims = grid.dims.map(|d| i32::try_from(d).unwrap_or(i32::MAX));
            let boxes = bricks::split_domain([[0; 3], dims], n, 8)
                .map_err(|why| anyhow!("--bricks {n}: {why}"))?;
            bricks::bricks_of(&boxes, grid.voxel, grid.origin)
        }
    };
    let first = &files[0];
    let bar_style = |template: &str| {
        ProgressStyle::with_template(template)
            .expect("valid template")
            .progress_chars("=> ")
    };

    let attrs: Vec<AttributeSpec> = sources
        .iter()
        .map(|(n, source)| AttributeSpec::new(n.clone()).with_units(source_units(first, n, source)))
        .collect();
    let provenance = Provenance::from_os_args("supercell-data import", std::env::args_os().skip(1));
    let ranks = opts.ranks;
    let writer = match ranks.size() {
        1 => Writer::Alone(Box::new({
            let mut w = DatasetWriter::create(
                opts.out,
                opts.lanes.clone(),
                opts.chunk_size,
                attrs,
                provenance,
            )
            .with_context(|| format!("creating {}", opts.out.display()))?;
            if !bricks.is_empty() {
                w.set_bricks(bricks.clone())?;
            }
            w
        })),
        _ => Writer::Ranks(Box::new(
            RankWriter::create(
                team(opts),
                opts.out,
                opts.lanes.clone(),
                opts.chunk_size,
                attrs,
                bricks.clone(),
                provenance,
                frames.len(),
                FrameHandover::Whole,
            )
            .with_context(|| format!("creating {}", opts.out.display()))?,
        )),
    };
    let frames: Vec<(usize, (usize, usize, f64))> = frames
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| supercell::dataset::ranks::owns(i, ranks.rank(), ranks.size()))
        .collect();
    let bar = match ranks.rank() {
        0 => ProgressBar::new((frames.len() * sources.len()) as u64),
        _ => ProgressBar::hidden(),
    };
    bar.set_style(bar_style(
        "import [{elapsed_precise}] [{wide_bar}] {pos}/{len} grids ({msg})",
    ));
    let started = std::time::Instant::now();
    let import = Import {
        files: &files,
        frames: &frames,
        sources: &sources,
        backgrounds: &backgrounds,
        grid: &grid,
        grid_type: opts.grid_type,
        bricks: &bricks,
        bar: &bar,
        pool: Pool::new(NATIVE_BUFFERS),
        leaf_buffers: leaf_buffer_pool(&grid),
        non_finite: sources.iter().map(|_| Default::default()).collect(),
    };
    let (worst_error, manifest) = import_into(&import, writer, opts.out)?;
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    // Across ranks, rank 0 reports every rank's figures.
    let Some(manifest) = manifest else {
        return Ok(ExitCode::SUCCESS);
    };
    crate::convert::print_import_summary(opts.out, &manifest, seconds);
    let non_finite = import
        .non_finite
        .iter()
        .map(|n| n.load(std::sync::atomic::Ordering::Relaxed));
    for ((((name, source), bg), err), non_finite) in sources
        .iter()
        .zip(&backgrounds)
        .zip(&worst_error)
        .zip(non_finite)
    {
        let dropped = match bg {
            Background::AtOrBelow(v) => format!("values <= {v} dropped"),
            Background::MagnitudeAtOrBelow(v) => format!("|values| <= {v} dropped"),
        };
        let from = match source {
            Source::Variable(_) => String::new(),
            Source::Perturbation(v) => format!(", {v} minus its level mean"),
            Source::Speed(c) => format!(", |({}, {}, {})|", c[0], c[1], c[2]),
        };
        let quantised = match opts.grid_type {
            GridType::Fp16 | GridType::Fp8 => format!(
                "; {} quantisation, max abs error {err:.3e}",
                grid_type_name(opts.grid_type)
            ),
            _ => String::new(),
        };
        let non_finite = match non_finite {
            0 => String::new(),
            n => format!(
                "; {n} non-finite input value{} dropped",
                if n == 1 { "" } else { "s" }
            ),
        };
        println!("{name}: {dropped}{from}{quantised}{non_finite}");
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod ranks_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn background_table() {
        assert_eq!(background_for("qr"), Background::AtOrBelow(1e-5));
        assert_eq!(background_for("QRAIN"), Background::AtOrBelow(1e-5));
        assert_eq!(background_for("dbz"), Background::AtOrBelow(5.0));
        assert_eq!(background_for("REFL_10CM"), Background::AtOrBelow(5.0));
        assert_eq!(
            background_for("winterp"),
            Background::MagnitudeAtOrBelow(1.0)
        );
        assert_eq!(
            background_for("prs_pert"),
            Background::MagnitudeAtOrBelow(10.0)
        );
        assert_eq!(background_for("wind_speed"), Background::AtOrBelow(5.0));
        assert_eq!(background_for("tke"), Background::MagnitudeAtOrBelow(0.0));
    }

    #[test]
    fn background_overrides_parse() {
        let list = vec!["qr=1e-4,dbz=10".to_string(), "w=2".to_string()];
        let parsed = parse_backgrounds(&list).unwrap();
        assert_eq!(
            parsed,
            vec![
                ("qr".to_string(), 1e-4),
                ("dbz".to_string(), 10.0),
                ("w".to_string(), 2.0)
            ]
        );
        assert!(parse_backgrounds(&["qr".to_string()]).is_err());
        assert!(parse_backgrounds(&["qr=x".to_string()]).is_err());
        assert!(parse_backgrounds(&["qr=inf".to_string()]).is_err());
    }
}
