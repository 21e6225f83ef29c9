//! The overlay's rows for several GPUs (`--gpus`) or ranks (`mpirun -n N supercell play`):
//! one row per GPU and the total, built from each GPU's figures by a pure function so they
//! are tested without a window. A GPU whose player runs in a rank of its own says so: its
//! row names the rank and its host, and its copy column is the transfer of its pictures
//! (read back on its rank, sent over MPI, uploaded to the display GPU).

use serde::Serialize;

use super::PathSel;
use crate::app::stats::PathFigures;
use crate::pipeline::multi::GpuFigures;

/// One GPU of a `--gpus` window as the overlay shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GpuRow {
    /// Index in `--gpus` (GPU 0 presents).
    pub gpu: usize,
    /// The ordinal it was named by on the command line (across ranks: its local rank's).
    pub ordinal: usize,
    /// The MPI rank its player runs in (GPU `k` is rank `k`); `None` in this process
    /// (`--gpus`).
    pub rank: Option<usize>,
    /// The host of that rank (`None` in this process).
    pub host: Option<String>,
    /// Its adapter.
    pub adapter: String,
    /// The label of the path it reads on ("staged", "GDS P2P", ...).
    pub path_label: String,
    /// GB/s read into its slots (last second).
    pub gbps: f64,
    /// Frames/s it rendered (last second).
    pub frames_per_s: f64,
    /// Mean time of its image copies to the display GPU, ms (`None`: its images are shown
    /// where they are rendered, or none was copied yet); for another rank's GPU, the
    /// picture's whole transfer.
    pub copy_ms: Option<f64>,
    /// Frames of it presented.
    pub frames_shown: u64,
    /// Frames its own player took in on the path it reads now (its figures for that path:
    /// a GPU that switched paths counts up on the new one).
    pub path_frames: u64,
    /// Frame faults of its player since the start (read errors, time-outs, damaged
    /// headers).
    pub faults: u64,
    /// Its player's figures of both paths, direct then host (the table's per-GPU rows).
    pub paths: [PathFigures; 2],
}

/// All GPUs of a `--gpus` window together.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GpusTotalRow {
    /// GPUs.
    pub gpus: usize,
    /// GB/s read, the sum of the GPUs'.
    pub gbps: f64,
    /// Frames/s presented (last second).
    pub frames_per_s_presented: f64,
    /// Frames presented.
    pub frames_shown: u64,
}

/// What one GPU reports for its overlay row ([`gpu_rows`]).
#[derive(Clone, Debug)]
pub struct GpuReport<'a> {
    /// The ordinal it was named by.
    pub ordinal: usize,
    /// The host of the rank it runs in (`None`: in this process).
    pub host: Option<&'a str>,
    /// The rank it runs in (`None`: in this process; else GPU `k`'s index where not said).
    pub rank: Option<usize>,
    /// Its adapter.
    pub adapter: &'a str,
    /// The label of the path it reads on.
    pub path_label: &'a str,
    /// Its counters and rates from the timeline.
    pub figures: GpuFigures,
    /// Image copies to the display GPU.
    pub copies: u64,
    /// Frames its player took in on the active path.
    pub path_frames: u64,
    /// Frame faults of its player since the start.
    pub faults: u64,
    /// Its player's figures of both paths: direct, host.
    pub paths: [PathFigures; 2],
}

/// The overlay's rows from each GPU's report and the timeline's total: GPU `k` is the
/// `k`-th report (across ranks, rank `k`'s); the copy time is the mean of its copies; the
/// total's GB/s is the sum of the rows' (what the rows show adds up), its frames/s the
/// presentation rate.
pub fn gpu_rows(reports: &[GpuReport<'_>], total: &GpuFigures) -> (Vec<GpuRow>, GpusTotalRow) {
    let rows: Vec<GpuRow> = reports
        .iter()
        .enumerate()
        .map(|(k, r)| GpuRow {
            gpu: k,
            ordinal: r.ordinal,
            rank: r.host.map(|_| r.rank.unwrap_or(k)),
            host: r.host.map(str::to_string),
            adapter: r.adapter.to_string(),
            path_label: r.path_label.to_string(),
            gbps: finite(r.figures.gbps),
            frames_per_s: finite(r.figures.frames_per_s),
            copy_ms: (r.copies > 0 && r.figures.copy_seconds.is_finite())
                .then(|| r.figures.copy_seconds / r.copies as f64 * 1e3),
            frames_shown: r.figures.frames_shown,
            path_frames: r.path_frames,
            faults: r.faults,
            paths: r.paths.clone(),
        })
        .collect();
    let sum = GpusTotalRow {
        gpus: rows.len(),
        gbps: rows.iter().map(|r| r.gbps).sum(),
        frames_per_s_presented: finite(total.frames_per_s),
        frames_shown: total.frames_shown,
    };
    (rows, sum)
}

fn finite(v: f64) -> f64 {
    if v.is_finite() { v } else { 0.0 }
}

/// The timeline and a row per GPU of the window's coordinator (one GPU or several, in this
/// process or across ranks): the overlay shows the timeline in place of GPU 0's player's
/// (with several GPUs it sees only the frames it owns, numbered its own way; with one it
/// may be a frame ahead of the screen), and its figures panel is made from it
/// ([`super::figures_panel`]).
#[derive(Clone, Debug, Default, Serialize)]
pub struct GpusOverlay {
    /// Per GPU.
    pub rows: Vec<GpuRow>,
    /// All together.
    pub total: GpusTotalRow,
    /// The frame on screen (the dataset's numbering).
    pub shown_frame: Option<u32>,
    /// The playhead.
    pub position: u32,
    /// Frames on the timeline.
    pub frame_count: u32,
    /// Playing or paused.
    pub playing: bool,
    /// Playback rate (`None`: as fast as frames are finished).
    pub speed_fps: Option<f64>,
    /// The timeline's direction (GPU 0's player's may differ: it turns at its own ends).
    pub direction: crate::pipeline::Direction,
    /// The timeline's end-of-timeline behaviour.
    pub mode: crate::pipeline::PlayMode,
    /// The latency of the last jump, ms.
    pub last_scrub_ms: Option<f64>,
    /// Frames marked damaged on the timeline now (the dataset's numbering).
    pub damaged: Vec<u32>,
    /// The last problem of the several GPUs' driver or of a GPU's player (with the GPU).
    pub last_error: Option<String>,
    /// Frames presented so far, in the order presented, and the GPU of each (the last
    /// [`GPUS_ORDER_KEPT`]).
    pub presented: Vec<(u32, usize)>,
    /// Simulation time of every frame (for the timeline's label).
    #[serde(skip)]
    pub frame_times: Vec<f64>,
}

/// Presentations the overlay's state keeps (for `dump-state`).
pub const GPUS_ORDER_KEPT: usize = 4096;

/// An adapter's name, short: up to its first parenthesis, at most 18 characters.
fn short_adapter(name: &str) -> String {
    let head = name.split('(').next().unwrap_or(name).trim();
    let head = if head.is_empty() { name.trim() } else { head };
    if head.chars().count() > 18 {
        head.chars().take(17).chain(['…']).collect()
    } else {
        head.to_string()
    }
}

/// A host's name, short: up to its first dot, at most 12 characters.
fn short_host(name: &str) -> String {
    let head = name.split('.').next().unwrap_or(name);
    if head.chars().count() > 12 {
        head.chars().take(11).chain(['…']).collect()
    } else {
        head.to_string()
    }
}

/// One GPU's line: who it is (index and adapter, or rank and host), its path label, GB/s
/// read, frames/s rendered and its copy to the display GPU (another rank's: the picture's
/// transfer).
fn gpu_line(r: &GpuRow, compact: bool) -> String {
    let copy = match (r.copy_ms, &r.rank) {
        (Some(ms), Some(_)) if compact => format!("xfer {ms:.1} ms"),
        (Some(ms), Some(_)) => format!("picture transfer {ms:.1} ms"),
        (Some(ms), None) => format!("copy {ms:.1} ms"),
        (None, _) if r.gpu == 0 => "shown here".to_string(),
        (None, Some(_)) if compact => "xfer -".to_string(),
        (None, Some(_)) => "picture transfer -".to_string(),
        (None, None) => "copy -".to_string(),
    };
    let who = match (r.rank, &r.host, compact) {
        (Some(k), Some(h), true) => format!("rank {k} on {}", short_host(h)),
        (Some(k), Some(h), false) => format!("rank {k} on {h}, GPU {} {}", r.ordinal, r.adapter),
        (_, _, true) => format!("GPU{} {}", r.gpu, short_adapter(&r.adapter)),
        (_, _, false) => format!("GPU {} (#{}) {}", r.gpu, r.ordinal, r.adapter),
    };
    if compact {
        format!(
            "{who} {}: {:.2} GB/s {:.1} f/s {copy}",
            r.path_label, r.gbps, r.frames_per_s
        )
    } else {
        format!(
            "{who}, {}: {:.2} GB/s read, {:.1} frames/s rendered, {copy}",
            r.path_label, r.gbps, r.frames_per_s
        )
    }
}

/// The figures panel's lines for a `--gpus` window (or one across ranks): the path, a row
/// per GPU ([`gpu_line`]), the total (GB/s summed, frames/s presented) and the frame on
/// screen. Compact lines are shorter (the adapter's name cut, terse units) so that they
/// leave the picture free.
pub fn gpu_lines(o: &GpusOverlay, active: PathSel, compact: bool) -> Vec<String> {
    let what = if !o.rows.is_empty() && o.rows.iter().all(|r| r.rank.is_some()) {
        "ranks"
    } else {
        "GPUs"
    };
    let mut v = vec![format!(
        "{} path, {} {what}",
        active.name().to_uppercase(),
        o.rows.len()
    )];
    v.extend(o.rows.iter().map(|r| gpu_line(r, compact)));
    v.push(if compact {
        format!(
            "all: {:.2} GB/s {:.1} f/s presented",
            o.total.gbps, o.total.frames_per_s_presented
        )
    } else {
        format!(
            "all {} {what}: {:.2} GB/s read, {:.1} frames/s presented",
            o.total.gpus, o.total.gbps, o.total.frames_per_s_presented
        )
    });
    v.push(format!(
        "frame {} / {}{}",
        o.shown_frame
            .map_or_else(|| "-".to_string(), |s| s.to_string()),
        o.frame_count.saturating_sub(1),
        if o.playing { "" } else { "   paused" },
    ));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ordinal: usize, gbps: f64, fps: f64, copies: u64, copy_s: f64) -> GpuReport<'static> {
        GpuReport {
            ordinal,
            host: None,
            rank: None,
            adapter: "llvmpipe (LLVM 19.1.7, 256 bits) (Cpu)",
            path_label: "staged",
            figures: GpuFigures {
                gbps,
                frames_per_s: fps,
                copy_seconds: copy_s,
                frames_shown: 3,
                ..GpuFigures::default()
            },
            copies,
            path_frames: 5,
            faults: 0,
            paths: Default::default(),
        }
    }

    #[test]
    fn gpu_rows_are_per_gpu_and_sum_to_the_total() {
        let total = GpuFigures {
            frames_per_s: 7.5,
            frames_shown: 6,
            ..GpuFigures::default()
        };
        let (rows, sum) = gpu_rows(
            &[
                report(0, 1.25, 4.0, 0, 0.0),
                report(3, 0.75, f64::NAN, 4, 0.010),
            ],
            &total,
        );
        assert_eq!(rows.len(), 2);
        assert_eq!((rows[0].gpu, rows[0].ordinal), (0, 0));
        assert_eq!((rows[1].gpu, rows[1].ordinal), (1, 3));
        // GPU 0 copies nothing: its images are shown where rendered.
        assert_eq!(rows[0].copy_ms, None);
        // The mean of four copies taking 10 ms together.
        assert!((rows[1].copy_ms.unwrap() - 2.5).abs() < 1e-9);
        // A rate that is not a number shows as 0, never as NaN.
        assert_eq!(rows[1].frames_per_s, 0.0);
        assert_eq!(sum.gpus, 2);
        assert!((sum.gbps - 2.0).abs() < 1e-12);
        assert_eq!(sum.frames_per_s_presented, 7.5);
        assert_eq!(sum.frames_shown, 6);
    }

    #[test]
    fn gpu_lines_name_every_gpu_and_the_total_compact_and_full() {
        let (rows, total) = gpu_rows(
            &[report(0, 1.25, 4.0, 0, 0.0), report(1, 0.75, 3.5, 2, 0.004)],
            &GpuFigures {
                frames_per_s: 7.5,
                ..GpuFigures::default()
            },
        );
        let o = GpusOverlay {
            rows,
            total,
            shown_frame: Some(9),
            frame_count: 12,
            playing: false,
            ..GpusOverlay::default()
        };
        let compact = gpu_lines(&o, PathSel::Host, true);
        assert_eq!(compact[0], "HOST path, 2 GPUs");
        assert_eq!(
            compact[1],
            "GPU0 llvmpipe staged: 1.25 GB/s 4.0 f/s shown here"
        );
        assert_eq!(
            compact[2],
            "GPU1 llvmpipe staged: 0.75 GB/s 3.5 f/s copy 2.0 ms"
        );
        assert_eq!(compact[3], "all: 2.00 GB/s 7.5 f/s presented");
        assert_eq!(compact[4], "frame 9 / 11   paused");
        // Compact lines stay short enough for the small overlay.
        assert!(
            compact.iter().all(|l| l.chars().count() <= 56),
            "{compact:?}"
        );
        let full = gpu_lines(&o, PathSel::Direct, false);
        assert_eq!(full[0], "DIRECT path, 2 GPUs");
        assert!(full[2].starts_with("GPU 1 (#1) llvmpipe (LLVM 19.1.7, 256 bits) (Cpu), staged:"));
        assert!(full[2].contains("0.75 GB/s read, 3.5 frames/s rendered, copy 2.0 ms"));
        assert_eq!(
            full[3],
            "all 2 GPUs: 2.00 GB/s read, 7.5 frames/s presented"
        );
    }

    #[test]
    fn rank_rows_name_the_rank_and_its_host_and_the_picture_transfer() {
        let on = |r: GpuReport<'static>, host| GpuReport {
            host: Some(host),
            ..r
        };
        let (rows, total) = gpu_rows(
            &[
                on(report(0, 1.25, 4.0, 0, 0.0), "node-a.cluster.example"),
                on(report(0, 0.75, 3.5, 2, 0.004), "node-b.cluster.example"),
            ],
            &GpuFigures::default(),
        );
        assert_eq!((rows[0].rank, rows[1].rank), (Some(0), Some(1)));
        assert_eq!(rows[1].host.as_deref(), Some("node-b.cluster.example"));
        assert_eq!(rows[1].path_frames, 5);
        let o = GpusOverlay {
            rows,
            total,
            frame_count: 12,
            ..GpusOverlay::default()
        };
        let compact = gpu_lines(&o, PathSel::Host, true);
        assert_eq!(compact[0], "HOST path, 2 ranks");
        assert_eq!(
            compact[1],
            "rank 0 on node-a staged: 1.25 GB/s 4.0 f/s shown here"
        );
        assert_eq!(
            compact[2],
            "rank 1 on node-b staged: 0.75 GB/s 3.5 f/s xfer 2.0 ms"
        );
        let full = gpu_lines(&o, PathSel::Host, false);
        assert_eq!(
            full[2],
            "rank 1 on node-b.cluster.example, GPU 0 llvmpipe (LLVM 19.1.7, 256 bits) (Cpu), \
             staged: 0.75 GB/s read, 3.5 frames/s rendered, picture transfer 2.0 ms"
        );
        assert_eq!(
            full[3],
            "all 2 ranks: 2.00 GB/s read, 0.0 frames/s presented"
        );
        // A GPU of this process keeps its row (`--gpus`).
        assert!(
            gpu_rows(&[report(3, 1.0, 1.0, 0, 0.0)], &GpuFigures::default()).0[0]
                .rank
                .is_none()
        );
        assert_eq!(short_host("averyveryverylonghostname"), "averyveryve…");
    }

    #[test]
    fn adapter_names_are_cut_short() {
        assert_eq!(short_adapter("NVIDIA H200"), "NVIDIA H200");
        assert_eq!(short_adapter("llvmpipe (LLVM 19)"), "llvmpipe");
        assert_eq!(
            short_adapter("NVIDIA GeForce RTX 4090 Laptop GPU"),
            "NVIDIA GeForce RT…"
        );
        assert_eq!(short_adapter("(odd)"), "(odd)");
    }
}
