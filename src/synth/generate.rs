//! Encoding frames as NanoVDB grids and writing them, in order, to a dataset.
//!
//! Frames are generated in parallel (rayon tasks, each itself parallel over bricks and
//! leaves) but must reach the writer in order. A bounded reorder window caps how many
//! frames exist at once: frame `f + window` is not started until frame `f` is written, so
//! memory stays at about `window` frames however slow the writer or uneven the frames.

use super::size::padded;
use super::{Attribute, Storm, StormParams};
use crate::dataset::{AttributeSpec, DatasetError, DatasetWriter, LaneSpec, Manifest, Provenance};
use crate::format::{
    BuildOptions, ChecksumMode, FormatError, GridType, NanoVdbVersion, build_grid_encoded_into,
};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TryRecvError};
use std::time::{Duration, Instant};

/// What can go wrong generating a dataset.
#[derive(Debug, thiserror::Error)]
pub enum SynthError {
    /// Encoding a grid failed.
    #[error("frame {frame} attribute {attribute}: {source}")]
    Format {
        /// Frame index.
        frame: u32,
        /// Attribute name.
        attribute: &'static str,
        /// The encoder's error.
        source: FormatError,
    },
    /// The dataset writer failed.
    #[error(transparent)]
    Dataset(#[from] DatasetError),
    /// The parameters cannot be generated.
    #[error("{0}")]
    Usage(String),
    /// A frame task panicked.
    #[error("frame {frame}: generator panicked: {msg}")]
    Panic {
        /// Frame index.
        frame: u32,
        /// The panic message.
        msg: String,
    },
    /// Generation stopped because another frame failed first.
    #[error("aborted")]
    Aborted,
}

/// How frames are encoded and scheduled.
#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    /// Value encoding of every grid: Float, Fp4, Fp8, Fp16 or FpN.
    pub grid_type: GridType,
    /// NanoVDB version the grids identify as.
    pub version: NanoVdbVersion,
    /// Checksum coverage.
    pub checksum: ChecksumMode,
    /// Frames in flight at most (the reorder window); 0 picks one from `memory_budget` and
    /// the frame size (see `window_for`).
    pub max_frames_in_flight: usize,
    /// Memory the frames in flight may take when `max_frames_in_flight` is 0, bytes.
    pub memory_budget: u64,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            grid_type: GridType::Fp16,
            version: NanoVdbVersion::default(),
            checksum: ChecksumMode::default(),
            max_frames_in_flight: 0,
            memory_budget: default_memory_budget(),
        }
    }
}

/// Half the memory this process may use now ([`crate::memory::available`]: the memory
/// available, the cgroup's headroom, the address-space limit; 8 GiB where none can be read).
/// Available rather than total memory, because on the benchmark rig the lanes themselves live
/// in RAM (tmpfs-backed loop devices) and fill as the dataset is written. A 1 GB Fp16 frame
/// peaks at about 4 GB in flight, so a fixed 8 GiB budget allowed one frame at a time on big
/// hosts and serialised evaluation, encoding and writing.
fn default_memory_budget() -> u64 {
    let avail = crate::memory::available();
    let known = avail.limited_by != crate::memory::UNKNOWN_LIMIT;
    Some(avail.bytes)
        .filter(|_| known)
        .map(|b| b / 2)
        .filter(|&b| b >= 1 << 30)
        .unwrap_or(8 << 30)
}

/// One encoded frame.
#[derive(Clone, Debug, PartialEq)]
pub struct EncodedFrame {
    /// Frame index.
    pub frame: u32,
    /// Storm time, seconds.
    pub time: f64,
    /// One NanoVDB grid buffer per attribute, in attribute order.
    pub grids: Vec<Vec<u8>>,
    /// Leaves per attribute.
    pub leaves: Vec<u64>,
    /// Wall time spent evaluating the fields and encoding each brick's leaves (parallel over
    /// bricks), seconds.
    pub eval_s: f64,
    /// Wall time spent building the grids from the encoded leaves (parallel over leaves),
    /// seconds.
    pub encode_s: f64,
    /// When the frame's work began, seconds from the start of the run (0 outside one).
    pub began_s: f64,
}

impl EncodedFrame {
    /// Bytes of the frame in a dataset (grids padded to 4 KiB).
    pub fn padded_bytes(&self) -> u64 {
        self.grids.iter().map(|g| padded(g.len() as u64)).sum()
    }
}

/// Progress of a generation run, reported after every frame written.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Frames written so far.
    pub frames_done: u32,
    /// Frames in the run.
    pub frames_total: u32,
    /// Bytes written so far (grids padded to 4 KiB).
    pub bytes_done: u64,
    /// Time since the run started.
    pub elapsed: Duration,
}

/// What a generation run produced and where its time went.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Frames written.
    pub frames: u32,
    /// Horizontal resolution.
    pub resolution: u32,
    /// Grid type.
    pub grid_type: Option<GridType>,
    /// Bytes written (grids padded to 4 KiB).
    pub bytes: u64,
    /// Smallest and largest frame, bytes.
    pub frame_bytes_min: u64,
    /// Largest frame, bytes.
    pub frame_bytes_max: u64,
    /// Largest single grid, bytes (must stay under 4 GiB).
    pub largest_grid: u64,
    /// Mean leaves per frame, per attribute.
    pub mean_leaves: Vec<(Attribute, u64)>,
    /// Wall time of the run, seconds.
    pub elapsed_s: f64,
    /// Sum over frames of field-evaluation wall time, seconds (overlaps between frames).
    pub eval_s: f64,
    /// Sum over frames of encoding wall time, seconds (overlaps between frames).
    pub encode_s: f64,
    /// Time the ordered sink (the dataset writer) took, seconds.
    pub write_s: f64,
    /// The reorder window used.
    pub window: usize,
    /// When each frame was generated and written, in frame order.
    pub frame_times: Vec<FrameTimes>,
}

/// One frame's timeline in a run, seconds from the run's start: where frames in flight
/// overlap, and whether writing overlaps generating.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FrameTimes {
    /// Frame index.
    pub frame: u32,
    /// Its work began.
    pub began_s: f64,
    /// Its fields were evaluated.
    pub evaluated_s: f64,
    /// Its grids were encoded (the frame was ready for the writer).
    pub encoded_s: f64,
    /// The writer took it (after the frames before it).
    pub write_began_s: f64,
    /// The writer finished it.
    pub written_s: f64,
}

impl Report {
    /// Output rate, bytes per second of wall time.
    pub fn bytes_per_s(&self) -> f64 {
        self.bytes as f64 / self.elapsed_s.max(1e-9)
    }
}

/// Grid buffers handed back after a frame is written, per attribute, for the next frames.
///
/// A frame's grids are hundreds of megabytes each: above glibc's mmap threshold, so a
/// fresh vector is a fresh mapping that page-faults and zeroes every page, and on many
/// threads the faults contend on the address-space lock. Reusing the previous frames'
/// buffers (an attribute's grids are about the same size from frame to frame) avoids both.
struct GridPool {
    free: Vec<Mutex<Vec<Vec<u8>>>>,
}

impl GridPool {
    fn new(attributes: usize) -> GridPool {
        GridPool {
            free: (0..attributes).map(|_| Mutex::new(Vec::new())).collect(),
        }
    }

    /// A buffer for attribute `a`: a returned one if there is one, else a new empty one.
    fn take(&self, a: usize) -> Vec<u8> {
        let free = self.free.get(a).map(|m| m.lock().map(|mut v| v.pop()));
        free.and_then(|r| r.ok().flatten()).unwrap_or_default()
    }

    /// Returns a frame's buffers (attribute order) for reuse.
    fn give(&self, grids: Vec<Vec<u8>>) {
        for (slot, g) in self.free.iter().zip(grids) {
            if g.capacity() > 0
                && let Ok(mut v) = slot.lock()
            {
                v.push(g);
            }
        }
    }
}

/// How each attribute's grid is built (attribute order).
pub(super) fn grid_options(params: &StormParams, opts: &GenerateOptions) -> Vec<BuildOptions> {
    params
        .attributes
        .iter()
        .map(|&attr| {
            let info = attr.info();
            let transform = params.transform_of(attr);
            BuildOptions {
                name: info.name.to_string(),
                grid_type: opts.grid_type,
                grid_class: info.class,
                voxel_size: [transform.voxel_size_m; 3],
                world_origin: transform.origin_m,
                version: opts.version,
                checksum: opts.checksum,
                ..BuildOptions::default()
            }
        })
        .collect()
}

/// Generates and encodes one frame (parallel over bricks and leaves on the current pool).
pub fn encode_frame(
    storm: &Storm,
    frame: u32,
    opts: &GenerateOptions,
) -> Result<EncodedFrame, SynthError> {
    encode_frame_pooled(storm, frame, opts, None)
}

/// [`encode_frame`] into buffers from `pool` where it has them.
fn encode_frame_pooled(
    storm: &Storm,
    frame: u32,
    opts: &GenerateOptions,
    pool: Option<&GridPool>,
) -> Result<EncodedFrame, SynthError> {
    let params = storm.params();
    let time = params.frame_time(frame);
    let builds = grid_options(params, opts);
    let format_error = |ai: usize, source| SynthError::Format {
        frame,
        attribute: params.attributes[ai].name(),
        source,
    };
    let t0 = Instant::now();
    // Each leaf is encoded as soon as its brick is evaluated (values still in cache); the
    // grids then only order the leaves and copy them into place.
    let (encoded, _) = storm
        .encoded_leaves_at(time, &builds)
        .map_err(|(ai, e)| format_error(ai, e))?;
    let eval_s = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    // The attributes' grids are built concurrently: each build is parallel over leaves,
    // but its planning, buffer set-up, checksum and the freeing of its leaves are serial.
    let built: Vec<(u64, Vec<u8>)> = encoded
        .into_par_iter()
        .enumerate()
        .map(|(ai, leaves)| {
            let count = leaves.len() as u64;
            let mut grid = pool.map(|p| p.take(ai)).unwrap_or_default();
            build_grid_encoded_into(&leaves, &builds[ai], &mut grid)
                .map_err(|e| format_error(ai, e))?;
            // Free the leaves (about the size of the grid) here, in parallel.
            drop(leaves);
            Ok((count, grid))
        })
        .collect::<Result<_, SynthError>>()?;
    let (leaves, grids): (Vec<u64>, Vec<Vec<u8>>) = built.into_iter().unzip();
    Ok(EncodedFrame {
        frame,
        time: time as f64,
        grids,
        leaves,
        eval_s,
        encode_s: t1.elapsed().as_secs_f64(),
        began_s: 0.0,
    })
}

/// Waits for the next finished frame. A caller that is itself a rayon worker runs pending
/// tasks while it waits; blocking would deadlock a one-thread pool.
fn next_result<T>(rx: &Receiver<T>) -> T {
    loop {
        match rx.try_recv() {
            Ok(v) => return v,
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Disconnected) => unreachable!("the caller holds a sender"),
        }
        match rayon::yield_now() {
            None => return rx.recv().expect("the caller holds a sender"),
            Some(rayon::Yield::Executed) => {}
            Some(rayon::Yield::Idle) => match rx.recv_timeout(Duration::from_millis(1)) {
                Ok(v) => return v,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => unreachable!("the caller holds a sender"),
            },
        }
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// Generates every frame of `storm` and hands them to `sink` in frame order.
///
/// Frames run in parallel on the current rayon pool, at most `window` at once (see
/// [`GenerateOptions::max_frames_in_flight`]); `sink` and `progress` run on the calling
/// thread. The first error stops the run: frames not yet started are skipped, running ones
/// finish, and the error is returned.
pub fn generate_frames(
    storm: &Storm,
    opts: &GenerateOptions,
    mut sink: impl FnMut(EncodedFrame) -> Result<(), SynthError>,
    progress: impl FnMut(&Progress),
) -> Result<Report, SynthError> {
    generate_frames_borrowed(
        storm,
        opts,
        |f| {
            let frame = EncodedFrame {
                grids: std::mem::take(&mut f.grids),
                leaves: f.leaves.clone(),
                ..*f
            };
            sink(frame)
        },
        progress,
    )
}

/// [`generate_frames`] with a sink that borrows each frame: the grid buffers it leaves in
/// the frame are reused for later frames (see `GridPool`).
pub fn generate_frames_borrowed(
    storm: &Storm,
    opts: &GenerateOptions,
    mut sink: impl FnMut(&mut EncodedFrame) -> Result<(), SynthError>,
    mut progress: impl FnMut(&Progress),
) -> Result<Report, SynthError> {
    let params = storm.params();
    let pool = GridPool::new(params.attributes.len());
    check(params, opts)?;
    let n = params.frames;
    let window = window_for(params, opts);
    let abort = AtomicBool::new(false);
    let start = Instant::now();
    let mut report = Report {
        resolution: params.resolution,
        grid_type: Some(opts.grid_type),
        window,
        frame_bytes_min: u64::MAX,
        ..Report::default()
    };
    let mut leaves_sum = vec![0u64; params.attributes.len()];
    let result = rayon::in_place_scope(|s| {
        let mut run = || -> Result<(), SynthError> {
            let (tx, rx) = mpsc::channel::<(u32, Result<EncodedFrame, SynthError>)>();
            let (mut next_spawn, mut next_write) = (0u32, 0u32);
            let mut pending = BTreeMap::new();
            while next_write < n {
                while next_spawn < n && ((next_spawn - next_write) as usize) < window {
                    let (tx, f, abort, pool) = (tx.clone(), next_spawn, &abort, &pool);
                    s.spawn(move |_| {
                        let began_s = start.elapsed().as_secs_f64();
                        let r = if abort.load(Ordering::Relaxed) {
                            Err(SynthError::Aborted)
                        } else {
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                encode_frame_pooled(storm, f, opts, Some(pool))
                            }))
                            .unwrap_or_else(|p| {
                                Err(SynthError::Panic {
                                    frame: f,
                                    msg: panic_message(p),
                                })
                            })
                            .map(|frame| EncodedFrame { began_s, ..frame })
                        };
                        // The receiver is gone only if the run already failed.
                        let _ = tx.send((f, r));
                    });
                    next_spawn += 1;
                }
                let (f, r) = next_result(&rx);
                pending.insert(f, r?);
                while let Some(mut frame) = pending.remove(&next_write) {
                    let bytes = frame.padded_bytes();
                    report.bytes += bytes;
                    report.frame_bytes_min = report.frame_bytes_min.min(bytes);
                    report.frame_bytes_max = report.frame_bytes_max.max(bytes);
                    let largest = frame.grids.iter().map(|g| g.len() as u64).max();
                    report.largest_grid = report.largest_grid.max(largest.unwrap_or(0));
                    report.eval_s += frame.eval_s;
                    report.encode_s += frame.encode_s;
                    for (s, l) in leaves_sum.iter_mut().zip(&frame.leaves) {
                        *s += l;
                    }
                    let t = Instant::now();
                    let write_began_s = start.elapsed().as_secs_f64();
                    sink(&mut frame)?;
                    report.write_s += t.elapsed().as_secs_f64();
                    report.frame_times.push(FrameTimes {
                        frame: frame.frame,
                        began_s: frame.began_s,
                        evaluated_s: frame.began_s + frame.eval_s,
                        encoded_s: frame.began_s + frame.eval_s + frame.encode_s,
                        write_began_s,
                        written_s: start.elapsed().as_secs_f64(),
                    });
                    pool.give(std::mem::take(&mut frame.grids));
                    next_write += 1;
                    report.frames = next_write;
                    progress(&Progress {
                        frames_done: next_write,
                        frames_total: n,
                        bytes_done: report.bytes,
                        elapsed: start.elapsed(),
                    });
                }
            }
            Ok(())
        };
        let r = run();
        if r.is_err() {
            // Tasks not yet started see this and skip their work; the scope still waits
            // for the ones already running.
            abort.store(true, Ordering::Relaxed);
        }
        r
    });
    result?;
    report.elapsed_s = start.elapsed().as_secs_f64();
    report.frame_bytes_min = report.frame_bytes_min.min(report.frame_bytes_max);
    report.mean_leaves = params
        .attributes
        .iter()
        .zip(&leaves_sum)
        .map(|(a, s)| (*a, s / n.max(1) as u64))
        .collect();
    Ok(report)
}

fn check(params: &StormParams, opts: &GenerateOptions) -> Result<(), SynthError> {
    if params.frames == 0 {
        return Err(SynthError::Usage("frame count is zero".into()));
    }
    if params.attributes.is_empty() {
        return Err(SynthError::Usage("no attributes selected".into()));
    }
    if !matches!(
        opts.grid_type,
        GridType::Float | GridType::Fp4 | GridType::Fp8 | GridType::Fp16 | GridType::FpN
    ) {
        return Err(SynthError::Usage(format!(
            "grid type {} cannot hold the generator's scalar fields",
            opts.grid_type
        )));
    }
    if !(params.time_span_s.is_finite() && params.time_span_s >= 0.0) {
        return Err(SynthError::Usage(
            "time span must be finite and >= 0".into(),
        ));
    }
    if params.frames > 1 && params.time_span_s <= 0.0 {
        return Err(SynthError::Usage(
            "several frames need a positive time span (frame times must increase)".into(),
        ));
    }
    // At least one frame is in flight: a resolution whose frame cannot fit is refused here
    // rather than found by the kernel's out-of-memory killer halfway through.
    let [nx, ny, nz] = params.dims();
    crate::memory::check_available(
        || {
            format!(
                "resolution {} ({nx}x{ny}x{nz} voxels, {} attributes as {}): generating one frame",
                params.resolution,
                params.attributes.len(),
                opts.grid_type
            )
        },
        frame_peak_memory(params, opts.grid_type),
    )
    .map_err(|e| SynthError::Usage(e.to_string()))?;
    Ok(())
}

/// Memory one frame in flight takes at its peak, estimated from the voxel count: the storm
/// fills about 12 % of the domain's bricks at moderate resolution, and each frame holds its
/// encoded leaves (a leaf's bytes and about 60 bytes of origin and statistics each) and,
/// while they are copied into place, its grids (one leaf each).
pub fn frame_peak_memory(params: &StormParams, grid_type: GridType) -> u64 {
    let [nx, ny, nz] = params.dims().map(u64::from);
    let bricks = nx * ny * nz / 512;
    let attrs = params.attributes.len() as u64;
    let leaf = super::size::leaf_bytes(grid_type).unwrap_or(2_144);
    (bricks * 12 / 100)
        .saturating_mul(attrs)
        .saturating_mul(2 * leaf + 100)
}

/// The reorder window: as given, or as many frames as fit the memory budget (see
/// [`frame_peak_memory`]), at least 1 and at most twice the thread count (more only adds
/// memory); and at most [`BIG_FRAME_WINDOW`] for frames of [`BIG_FRAME_PEAK`] or more.
///
/// Frames in flight progress together (rayon does not favour the oldest), so a run with
/// every frame in flight finishes them all at about the same time and then writes them one
/// after the other while the cores idle; a big frame has parallel work enough to keep every
/// thread busy on its own, and frames started later reuse the memory of those written (the
/// grid buffers, the allocator's blocks) instead of page-faulting fresh memory.
fn window_for(params: &StormParams, opts: &GenerateOptions) -> usize {
    if opts.max_frames_in_flight > 0 {
        return opts.max_frames_in_flight;
    }
    let per_frame = frame_peak_memory(params, opts.grid_type);
    let fit = (opts.memory_budget / per_frame.max(1)) as usize;
    let most = if per_frame >= BIG_FRAME_PEAK {
        BIG_FRAME_WINDOW
    } else {
        2 * rayon::current_num_threads()
    };
    fit.clamp(1, most.max(1))
}

/// Peak memory from which a frame counts as big for [`window_for`] (a frame of about
/// 250 MB of Fp16 grids).
const BIG_FRAME_PEAK: u64 = 512 << 20;

/// Frames in flight at most by default when frames are big: one being written or finishing
/// its serial steps (checksums, buffer set-up) while the other keeps the threads busy.
const BIG_FRAME_WINDOW: usize = 2;

/// The dataset's attribute list for `params`.
pub fn attribute_specs(params: &StormParams) -> Vec<AttributeSpec> {
    params
        .attributes
        .iter()
        .map(|a| AttributeSpec::new(a.name()))
        .collect()
}

/// Generates the storm of `params` into a new dataset at `dir` (lanes, chunk size and
/// provenance as [`DatasetWriter::create`] takes them) and commits it.
pub fn generate_dataset(
    params: &StormParams,
    opts: &GenerateOptions,
    dir: &Path,
    lanes: LaneSpec,
    chunk_size: u64,
    provenance: Provenance,
    progress: impl FnMut(&Progress),
) -> Result<(Report, Manifest), SynthError> {
    check(params, opts)?;
    let storm = Storm::new(params.clone());
    let mut writer =
        DatasetWriter::create(dir, lanes, chunk_size, attribute_specs(params), provenance)?;
    let report = generate_frames_borrowed(
        &storm,
        opts,
        |f| Ok(writer.push_frame_borrowed(f.time, &f.grids)?),
        progress,
    )?;
    let manifest = writer.finish()?;
    Ok((report, manifest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::default_params;

    #[test]
    fn big_frames_default_to_two_in_flight() {
        let mut p = default_params();
        let opts = GenerateOptions {
            memory_budget: 1 << 50,
            ..GenerateOptions::default()
        };
        p.resolution = 1424;
        assert!(frame_peak_memory(&p, opts.grid_type) >= BIG_FRAME_PEAK);
        assert_eq!(window_for(&p, &opts), BIG_FRAME_WINDOW);
        // Small frames: as many as the threads can use.
        p.resolution = 128;
        assert!(frame_peak_memory(&p, opts.grid_type) < BIG_FRAME_PEAK);
        assert_eq!(window_for(&p, &opts), 2 * rayon::current_num_threads());
        // A budget for one big frame, and a window given: as they say.
        p.resolution = 1424;
        let one = GenerateOptions {
            memory_budget: frame_peak_memory(&p, GridType::Fp16),
            ..opts.clone()
        };
        assert_eq!(window_for(&p, &one), 1);
        let given = GenerateOptions {
            max_frames_in_flight: 5,
            ..opts
        };
        assert_eq!(window_for(&p, &given), 5);
    }
}
