//! Encoding frames as NanoVDB grids and writing them, in order, to a dataset.
//!
//! Frames are generated in parallel (rayon tasks, each itself parallel over bricks and
//! leaves) but must reach the writer in order. A bounded reorder window caps how many
//! frames exist at once: frame `f + window` is not started until frame `f` is written, so
//! memory stays at about `window` frames however slow the writer or uneven the frames.

use super::size::padded;
use super::{Attribute, Storm, StormParams};
use crate::dataset::{
    AttributeSpec, Brick, DatasetError, DatasetWriter, LaneSpec, Manifest, Provenance,
};
use crate::format::{
    BuildOptions, ChecksumMode, EncodedLeaves, FormatError, GridType, NanoVdbVersion,
    build_grid_encoded_into, build_grid_encoded_where_into,
};
use rayon::prelude::*;
use std::collections::BTreeMap;
use std::path::Path;
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
    /// `(rank, ranks)`: generate only the frames `rank`, `rank + ranks`, ... (one rank's
    /// share, [`crate::dataset::ranks`]); `(0, 1)` is every frame.
    pub share: (usize, usize),
    /// Spatial bricks to split every grid into ([`StormParams::bricks`]); empty for whole
    /// grids. Each frame's grids then come brick by brick, each brick's in attribute order.
    pub bricks: Vec<Brick>,
}

impl Default for GenerateOptions {
    fn default() -> Self {
        GenerateOptions {
            grid_type: GridType::Fp16,
            version: NanoVdbVersion::default(),
            checksum: ChecksumMode::default(),
            max_frames_in_flight: 0,
            memory_budget: default_memory_budget(),
            share: (0, 1),
            bricks: Vec::new(),
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
    /// Sum over grids of the time building them from their encoded leaves took, seconds
    /// (on the calling thread, between handing grids to the sink).
    pub encode_s: f64,
    /// Time the sink (the dataset writer) took, seconds.
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
    /// Its leaves were encoded, with the evaluation (the frame was ready for the writer,
    /// which builds its grids one at a time as it writes them): the same as `evaluated_s`.
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

/// One grid of a run, as [`generate_grids`] hands it to its sink: frame by frame, each
/// frame's grids in attribute order.
#[derive(Clone, Copy, Debug)]
pub struct GridOut<'a> {
    /// Frame index.
    pub frame: u32,
    /// Storm time of the frame, seconds.
    pub time: f64,
    /// Index of the attribute in [`StormParams::attributes`].
    pub attribute: usize,
    /// Attributes in a frame.
    pub attributes: usize,
    /// Index of the spatial brick this grid holds (0 for whole grids).
    pub brick: usize,
    /// Bricks in a frame (1 for whole grids). A frame's grids come brick by brick, each
    /// brick's in attribute order: the last one is attribute `attributes - 1` of brick
    /// `bricks - 1`.
    pub bricks: usize,
    /// The NanoVDB grid; the buffer is reused for the next grid once the sink returns.
    pub grid: &'a [u8],
    /// Leaves in the grid.
    pub leaves: u64,
    /// When the frame's work began, seconds from the start of the run.
    pub began_s: f64,
    /// Wall time the frame's field evaluation and leaf encoding took, seconds.
    pub eval_s: f64,
    /// Wall time building this grid from its leaves took, seconds.
    pub build_s: f64,
}

impl GridOut<'_> {
    /// The grid's index among its frame's grids (brick-major).
    pub fn index(&self) -> usize {
        self.brick * self.attributes + self.attribute
    }

    /// Whether this is its frame's first grid.
    pub fn first_of_frame(&self) -> bool {
        self.index() == 0
    }

    /// Whether this is its frame's last grid.
    pub fn last_of_frame(&self) -> bool {
        self.index() + 1 == self.attributes * self.bricks
    }
}

/// One frame's leaves, encoded as its bricks were evaluated: what a frame task hands to
/// the ordered writer, which builds and writes the grids one at a time.
struct FrameLeaves {
    frame: u32,
    time: f64,
    leaves: Vec<EncodedLeaves>,
    eval_s: f64,
    began_s: f64,
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

fn format_error(params: &StormParams, frame: u32, ai: usize, source: FormatError) -> SynthError {
    SynthError::Format {
        frame,
        attribute: params.attributes[ai].name(),
        source,
    }
}

/// Evaluates one frame's fields and encodes each brick's leaves right away, while the
/// values are in cache (parallel over bricks on the current pool).
fn encode_leaves(
    storm: &Storm,
    frame: u32,
    builds: &[BuildOptions],
) -> Result<FrameLeaves, SynthError> {
    let params = storm.params();
    let time = params.frame_time(frame);
    let t0 = Instant::now();
    let (leaves, _) = storm
        .encoded_leaves_at(time, builds)
        .map_err(|(ai, e)| format_error(params, frame, ai, e))?;
    Ok(FrameLeaves {
        frame,
        time: time as f64,
        leaves,
        eval_s: t0.elapsed().as_secs_f64(),
        began_s: 0.0,
    })
}

/// Generates and encodes one frame, all its grids at once (parallel over bricks, then
/// attributes and leaves, on the current pool).
pub fn encode_frame(
    storm: &Storm,
    frame: u32,
    opts: &GenerateOptions,
) -> Result<EncodedFrame, SynthError> {
    let params = storm.params();
    let builds = grid_options(params, opts);
    let encoded = encode_leaves(storm, frame, &builds)?;
    let t1 = Instant::now();
    let built: Vec<(u64, Vec<u8>)> = encoded
        .leaves
        .into_par_iter()
        .enumerate()
        .map(|(ai, leaves)| {
            let mut grid = Vec::new();
            build_grid_encoded_into(&leaves, &builds[ai], &mut grid)
                .map_err(|e| format_error(params, frame, ai, e))?;
            Ok((leaves.len() as u64, grid))
        })
        .collect::<Result<_, SynthError>>()?;
    let (leaves, grids): (Vec<u64>, Vec<Vec<u8>>) = built.into_iter().unzip();
    Ok(EncodedFrame {
        frame,
        time: encoded.time,
        grids,
        leaves,
        eval_s: encoded.eval_s,
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

/// Generates every frame of `storm` and hands them to `sink` in frame order, each with all
/// its grids (so a frame's grids are all in memory at once: [`generate_grids`] hands them
/// over one at a time).
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
                leaves: std::mem::take(&mut f.leaves),
                ..*f
            };
            sink(frame)
        },
        progress,
    )
}

/// [`generate_frames`] with a sink that borrows each frame.
pub fn generate_frames_borrowed(
    storm: &Storm,
    opts: &GenerateOptions,
    mut sink: impl FnMut(&mut EncodedFrame) -> Result<(), SynthError>,
    progress: impl FnMut(&Progress),
) -> Result<Report, SynthError> {
    let mut frame: Option<EncodedFrame> = None;
    let gather = |g: GridOut<'_>| {
        let f = frame.get_or_insert_with(|| EncodedFrame {
            frame: g.frame,
            time: g.time,
            grids: Vec::with_capacity(g.attributes * g.bricks),
            leaves: Vec::with_capacity(g.attributes * g.bricks),
            eval_s: g.eval_s,
            encode_s: 0.0,
            began_s: g.began_s,
        });
        f.grids.push(g.grid.to_vec());
        f.leaves.push(g.leaves);
        f.encode_s += g.build_s;
        if g.last_of_frame() {
            let mut done = frame.take().expect("just filled");
            sink(&mut done)?;
        }
        Ok(())
    };
    generate_grids(storm, opts, gather, progress)
}

/// Generates every frame of `storm` and hands its grids to `sink` one at a time, in frame
/// and attribute order, on the calling thread.
///
/// Frames are evaluated in parallel on the current rayon pool, at most `window` at once
/// (see [`GenerateOptions::max_frames_in_flight`]), each into its encoded leaves; the
/// calling thread then builds the oldest frame's grids one after the other (each build
/// parallel over leaves), hands each to `sink` and frees its leaves before the next. So a
/// frame never has all its grids in memory, only its leaves and one grid: the run peaks at
/// about [`frame_peak_memory`] for one frame in flight. The first error stops the run:
/// frames not yet started are skipped, running ones finish, and the error is returned.
pub fn generate_grids(
    storm: &Storm,
    opts: &GenerateOptions,
    mut sink: impl FnMut(GridOut<'_>) -> Result<(), SynthError>,
    mut progress: impl FnMut(&Progress),
) -> Result<Report, SynthError> {
    let params = storm.params();
    check(params, opts)?;
    let builds = grid_options(params, opts);
    let (rank, ranks) = opts.share;
    let owned: Vec<u32> = (0..params.frames)
        .filter(|&f| crate::dataset::ranks::owns(f as usize, rank, ranks))
        .collect();
    let n = owned.len() as u32;
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
    // One grid buffer for the whole run: grids are hundreds of megabytes, above glibc's
    // mmap threshold, and a fresh buffer per grid would page-fault and zero every page.
    let mut grid = Vec::new();
    let mut write_frame = |frame: FrameLeaves, report: &mut Report| -> Result<(), SynthError> {
        let write_began_s = start.elapsed().as_secs_f64();
        let mut bytes = 0;
        let attributes = frame.leaves.len();
        let bricks = opts.bricks.len().max(1);
        let mut all_leaves: Vec<Option<EncodedLeaves>> =
            frame.leaves.into_iter().map(Some).collect();
        // Brick by brick, each brick's grids in attribute order (whole grids: one pass).
        for (brick, ai) in (0..bricks).flat_map(|b| (0..attributes).map(move |a| (b, a))) {
            let t = Instant::now();
            let leaves = all_leaves[ai]
                .as_ref()
                .expect("freed only after its last brick");
            let part = opts.bricks.get(brick);
            let count = build_part(leaves, &builds[ai], params.attributes[ai], part, &mut grid)
                .map_err(|e| format_error(params, frame.frame, ai, e))?
                as u64;
            if brick + 1 == bricks {
                // This attribute's leaves are in its grids now: free them before the next.
                all_leaves[ai] = None;
            }
            let build_s = t.elapsed().as_secs_f64();
            report.encode_s += build_s;
            leaves_sum[ai] += count;
            bytes += padded(grid.len() as u64);
            report.largest_grid = report.largest_grid.max(grid.len() as u64);
            let t = Instant::now();
            sink(GridOut {
                frame: frame.frame,
                time: frame.time,
                attribute: ai,
                attributes,
                brick,
                bricks,
                grid: &grid,
                leaves: count,
                began_s: frame.began_s,
                eval_s: frame.eval_s,
                build_s,
            })?;
            report.write_s += t.elapsed().as_secs_f64();
        }
        report.bytes += bytes;
        report.frame_bytes_min = report.frame_bytes_min.min(bytes);
        report.frame_bytes_max = report.frame_bytes_max.max(bytes);
        report.eval_s += frame.eval_s;
        let evaluated_s = frame.began_s + frame.eval_s;
        report.frame_times.push(FrameTimes {
            frame: frame.frame,
            began_s: frame.began_s,
            evaluated_s,
            encoded_s: evaluated_s,
            write_began_s,
            written_s: start.elapsed().as_secs_f64(),
        });
        report.frames += 1;
        Ok(())
    };
    let result = rayon::in_place_scope(|s| {
        let mut run = || -> Result<(), SynthError> {
            let (tx, rx) = mpsc::channel::<(u32, Result<FrameLeaves, SynthError>)>();
            let (mut next_spawn, mut next_write) = (0u32, 0u32);
            let mut pending = BTreeMap::new();
            while next_write < n {
                while next_spawn < n && ((next_spawn - next_write) as usize) < window {
                    let f = owned[next_spawn as usize];
                    let (tx, abort, builds) = (tx.clone(), &abort, &builds);
                    s.spawn(move |_| {
                        let began_s = start.elapsed().as_secs_f64();
                        let r = if abort.load(Ordering::Relaxed) {
                            Err(SynthError::Aborted)
                        } else {
                            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                encode_leaves(storm, f, builds)
                            }))
                            .unwrap_or_else(|p| {
                                Err(SynthError::Panic {
                                    frame: f,
                                    msg: panic_message(p),
                                })
                            })
                            .map(|frame| FrameLeaves { began_s, ..frame })
                        };
                        // The receiver is gone only if the run already failed.
                        let _ = tx.send((f, r));
                    });
                    next_spawn += 1;
                }
                let (f, r) = next_result(&rx);
                pending.insert(f, r?);
                while let Some(frame) = owned
                    .get(next_write as usize)
                    .and_then(|f| pending.remove(f))
                {
                    write_frame(frame, &mut report)?;
                    next_write += 1;
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

/// Builds `attribute`'s grid of `leaves` into `grid`: whole, or only the leaves `brick`
/// holds (its box and halo; bricks are boxes of the storm's grid, and a nested attribute's
/// grid is [`super::NEST_REFINEMENT`] times finer). Returns the leaves built.
fn build_part(
    leaves: &EncodedLeaves,
    build: &BuildOptions,
    attribute: super::Attribute,
    brick: Option<&Brick>,
    grid: &mut Vec<u8>,
) -> Result<usize, FormatError> {
    let Some(b) = brick else {
        return build_grid_encoded_into(leaves, build, grid).map(|()| leaves.len());
    };
    let refine = match attribute.is_nested() {
        true => super::NEST_REFINEMENT as i32,
        false => 1,
    };
    let keep = |origin| crate::dataset::bricks::holds_leaf(b, refine, origin);
    build_grid_encoded_where_into(leaves, build, keep, grid)
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

/// Leaves per attribute at one instant, estimated from the voxel count: 6 % of the
/// domain's bricks. Measured: frames of the default attributes at resolutions 1100 to 2368
/// (docs/bench/2026-12-05-dev-writer-memory) and of all attributes at 1024 and 2064
/// (docs/bench/HISTORY.md) hold 5.2 % to 6.0 % on average over their attributes, so the
/// estimate is 0 to 15 % above their frames.
fn filled_bricks(params: &StormParams) -> u64 {
    let [nx, ny, nz] = params.dims().map(u64::from);
    nx * ny * nz / 512 * 6 / 100
}

/// Bytes of one frame's grids, estimated from the voxel count (see `filled_bricks`): a
/// leaf per filled brick and attribute.
pub fn frame_bytes_estimate(params: &StormParams, grid_type: GridType) -> u64 {
    let leaf = super::size::leaf_bytes(grid_type).unwrap_or(2_144);
    filled_bricks(params)
        .saturating_mul(params.attributes.len() as u64)
        .saturating_mul(leaf)
}

/// Memory of one frame's encoded leaves: each leaf's bytes and its record (origin, place,
/// statistics) with the allocator's share, about [`LEAF_RECORD`] bytes.
fn frame_leaves_memory(params: &StormParams, grid_type: GridType) -> u64 {
    let leaf = super::size::leaf_bytes(grid_type).unwrap_or(2_144);
    filled_bricks(params)
        .saturating_mul(params.attributes.len() as u64)
        .saturating_mul(leaf + LEAF_RECORD)
}

/// Bytes per encoded leaf beside the leaf's own (its `EncodedLeaf` record and the blocks'
/// slack).
const LEAF_RECORD: u64 = 96;

/// Memory the process takes whatever the frame: the binary, thread stacks, the lanes'
/// write buffers, the field evaluation's scratch.
const FIXED_MEMORY: u64 = 160 << 20;

/// Memory generating one frame takes at its peak: the frame's encoded leaves, the one grid
/// being built from them ([`generate_grids`] builds and writes the grids one at a time,
/// freeing each attribute's leaves before the next), and what the process takes anyway.
/// The largest grid is counted as twice an attribute's mean share: the storm's attributes
/// are not the same size.
pub fn frame_peak_memory(params: &StormParams, grid_type: GridType) -> u64 {
    let attrs = params.attributes.len().max(1) as u64;
    let frame = frame_bytes_estimate(params, grid_type);
    let largest_grid = frame.min(frame / attrs * 2);
    frame_leaves_memory(params, grid_type)
        .saturating_add(largest_grid)
        .saturating_add(FIXED_MEMORY)
}

/// Memory each frame in flight beyond the first adds: twice its encoded leaves. Measured
/// (docs/bench/2026-12-05-dev-writer-memory, resolution 1100, 0.53 GB frames): a second
/// frame in flight added 1.85 times its bytes to the peak, its own leaves and those of the
/// frame being written, which the allocator keeps once freed and hands out again only as
/// later leaves need them.
fn extra_frame_memory(params: &StormParams, grid_type: GridType) -> u64 {
    frame_leaves_memory(params, grid_type).saturating_mul(2)
}

/// The most memory a writer may take by default: 1.5 × the largest frame's bytes plus
/// 1 GiB (issue 25). One frame in flight fits it; more frames are in flight only where
/// they fit too.
pub fn writer_memory_ceiling(frame_bytes: u64) -> u64 {
    frame_bytes.saturating_mul(3) / 2 + (1 << 30)
}

/// The reorder window: as given, or one frame plus as many more ([`extra_frame_memory`]
/// each) as fit the memory budget and the writer's ceiling ([`writer_memory_ceiling`]), at most
/// twice the thread count (more only adds memory).
///
/// Frames in flight progress together (rayon does not favour the oldest), so a run with
/// every frame in flight finishes them all at about the same time and then writes them one
/// after the other while the cores idle; a big frame has parallel work enough to keep every
/// thread busy on its own.
fn window_for(params: &StormParams, opts: &GenerateOptions) -> usize {
    if opts.max_frames_in_flight > 0 {
        return opts.max_frames_in_flight;
    }
    let one = frame_peak_memory(params, opts.grid_type);
    let each_more = extra_frame_memory(params, opts.grid_type).max(1);
    let ceiling = writer_memory_ceiling(frame_bytes_estimate(params, opts.grid_type));
    let room = opts.memory_budget.min(ceiling).saturating_sub(one);
    let most = 2 * rayon::current_num_threads();
    (1 + room / each_more).min(most as u64).max(1) as usize
}

/// The dataset's attribute list for `params`.
pub fn attribute_specs(params: &StormParams) -> Vec<AttributeSpec> {
    params
        .attributes
        .iter()
        .map(|a| AttributeSpec::new(a.name()).with_units(Some(a.info().units.to_owned())))
        .collect()
}

/// Generates the storm of `params` into a new dataset at `dir` (lanes, chunk size and
/// provenance as [`DatasetWriter::create`] takes them) and commits it. Each frame's grids
/// reach the lanes one at a time ([`generate_grids`], [`DatasetWriter::push_grid`]).
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
    if !opts.bricks.is_empty() {
        writer.set_bricks(opts.bricks.clone())?;
    }
    let report = generate_grids(
        &storm,
        opts,
        |g| {
            if g.first_of_frame() {
                writer.begin_frame(g.time)?;
            }
            writer.push_grid(g.grid)?;
            if g.last_of_frame() {
                writer.end_frame()?;
            }
            Ok(())
        },
        progress,
    )?;
    let manifest = writer.finish()?;
    Ok((report, manifest))
}

/// [`generate_dataset`] as one of several ranks (each calls this with the same arguments):
/// this rank generates its share of the frames (`opts.share` is set from `team`) and the
/// ranks write the one dataset together ([`crate::dataset::ranks`]), byte for byte the one
/// a single process writes. Returns this rank's report, and the manifest on rank 0. A
/// failure on any rank is an error on every rank, naming it; a rank silent past the team's
/// wait is named by those that waited ([`crate::dataset::DatasetError::RanksSilent`]).
#[allow(clippy::too_many_arguments)]
pub fn generate_dataset_ranks(
    params: &StormParams,
    opts: &GenerateOptions,
    dir: &Path,
    lanes: LaneSpec,
    chunk_size: u64,
    provenance: Provenance,
    team: crate::dataset::ranks::WriteRanks<'_>,
    progress: impl FnMut(&Progress),
) -> Result<(Report, Option<Manifest>), SynthError> {
    use crate::dataset::ranks::{FrameHandover, RankWriter};
    let checked = check(params, opts);
    let ranks = team.ranks;
    let mut writer = RankWriter::create(
        team,
        dir,
        lanes,
        chunk_size,
        attribute_specs(params),
        opts.bricks.clone(),
        provenance,
        params.frames as usize,
        FrameHandover::GridByGrid,
    )?;
    if let Err(e) = checked {
        return Err(writer
            .finish(Err(e.to_string()))
            .err()
            .map_or(e, SynthError::from));
    }
    let storm = Storm::new(params.clone());
    let opts = GenerateOptions {
        share: (ranks.rank(), ranks.size()),
        ..opts.clone()
    };
    // A frame's grids, held until its round (the single writer takes them one by one).
    let mut grids: Vec<Vec<u8>> = Vec::new();
    let report = generate_grids(
        &storm,
        &opts,
        |g| {
            grids.truncate(g.index());
            grids.push(g.grid.to_vec());
            if g.last_of_frame() {
                writer.push_frame(g.frame as usize, g.time, &grids)?;
            }
            Ok(())
        },
        progress,
    );
    let manifest = writer.finish(report.as_ref().map(|_| ()).map_err(|e| e.to_string()))?;
    Ok((report?, manifest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::default_params;

    #[test]
    fn frames_in_flight_fit_the_writers_ceiling() {
        let mut p = default_params();
        let opts = GenerateOptions {
            memory_budget: 1 << 50,
            ..GenerateOptions::default()
        };
        let in_flight = |p: &StormParams, w: usize| {
            frame_peak_memory(p, opts.grid_type)
                + (w as u64 - 1) * extra_frame_memory(p, opts.grid_type)
        };
        // Big frames (about 4.8 GB): one at a time, within 1.5 x the frame plus 1 GiB.
        p.resolution = 2350;
        let frame = frame_bytes_estimate(&p, opts.grid_type);
        assert!(frame > 4_000_000_000, "{frame}");
        assert_eq!(window_for(&p, &opts), 1);
        assert!(in_flight(&p, 1) <= writer_memory_ceiling(frame));
        // Mid-sized frames: as many as fit the ceiling, and not one more.
        for r in [600, 800, 1024, 1424] {
            p.resolution = r;
            let w = window_for(&p, &opts);
            let ceiling = writer_memory_ceiling(frame_bytes_estimate(&p, opts.grid_type));
            assert!(in_flight(&p, w) <= ceiling, "resolution {r}: window {w}");
            let more = w < 2 * rayon::current_num_threads();
            assert!(
                !more || in_flight(&p, w + 1) > ceiling,
                "resolution {r}: {w}"
            );
        }
        // Small frames: as many as the threads can use.
        p.resolution = 128;
        assert_eq!(window_for(&p, &opts), 2 * rayon::current_num_threads());
        // A budget for one frame, and a window given: as they say.
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
