//! `--sweep`: runs over thread counts (powers of two) and I/O sizes, as a table and a plot.

use std::fmt::Write as _;

use serde::Serialize;

use super::report::Spread;
use super::{BenchConfig, BenchResult, run};
use crate::ingest::{Result, Source};

/// One point of a sweep: the median of its runs, with their spread.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// I/O threads.
    pub threads: usize,
    /// I/O size, bytes.
    pub io_size: usize,
    /// Reads in flight per thread (io_uring).
    pub queue_depth: usize,
    /// Runs made at this point.
    pub runs: u32,
    /// GB/s over the run (the median run's, by bandwidth).
    pub gbps: f64,
    /// Smallest and largest GB/s of the runs (equal to `gbps` for one run).
    pub gbps_spread: Spread,
    /// GiB/s (gdsio's unit), of the median run.
    pub gibps: f64,
    /// Mean read latency, microseconds, of the median run.
    pub avg_latency_us: f64,
    /// Frames per second, of the median run.
    pub frames_per_s: f64,
    /// CPU seconds per GB, of the median run.
    pub cpu_seconds_per_gb: f64,
    /// Engine that ran.
    pub engine: String,
}

/// What a sweep goes over: every combination of these, each point run `runs` times.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SweepPlan {
    /// Thread counts.
    pub threads: Vec<usize>,
    /// I/O sizes, bytes.
    pub io_sizes: Vec<usize>,
    /// Queue depths.
    pub queue_depths: Vec<usize>,
    /// Runs per point (at least 1).
    pub runs: u32,
}

/// 1, 2, 4, ... up to `max` (at most 1024).
pub fn thread_counts(max: usize) -> Vec<usize> {
    let max = max.clamp(1, 1024);
    std::iter::successors(Some(1usize), |&t| (t * 2 <= max).then_some(t * 2)).collect()
}

/// Runs `base` at every point of `plan`, `plan.runs` times each; `each` sees every point
/// (and its median run) as it lands.
pub fn sweep(
    source: &Source,
    base: &BenchConfig,
    plan: &SweepPlan,
    mut each: impl FnMut(&SweepPoint, &BenchResult),
) -> Result<Vec<SweepPoint>> {
    let mut out = Vec::new();
    for &qd in &plan.queue_depths {
        for &io in &plan.io_sizes {
            for &t in &plan.threads {
                let cfg = BenchConfig {
                    threads: t,
                    io_size: io,
                    queue_depth: qd,
                    progress: false,
                    ..base.clone()
                };
                let mut results = (0..plan.runs.max(1))
                    .map(|_| run(source, &cfg))
                    .collect::<Result<Vec<_>>>()?;
                results.sort_by(|a, b| a.summary.gbps.total_cmp(&b.summary.gbps));
                let spread = Spread::of(results.iter().map(|r| r.summary.gbps));
                let r = &results[results.len() / 2];
                let p = SweepPoint {
                    threads: t,
                    io_size: io,
                    queue_depth: qd,
                    runs: plan.runs.max(1),
                    gbps: spread.median,
                    gbps_spread: spread,
                    gibps: r.summary.gibps,
                    avg_latency_us: r.avg_latency_us,
                    frames_per_s: r.summary.frames_per_s,
                    cpu_seconds_per_gb: r.summary.cpu_seconds_per_gb,
                    engine: r.engine.clone(),
                };
                each(&p, r);
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// The sweep as a table: one row per thread count, one column per I/O size (median GB/s,
/// with the runs' min–max where there were several), a block per queue depth.
pub fn table(points: &[SweepPoint]) -> String {
    let distinct = |f: fn(&SweepPoint) -> usize| {
        let mut v: Vec<usize> = points.iter().map(f).collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let sizes = distinct(|p| p.io_size);
    let threads = distinct(|p| p.threads);
    let depths = distinct(|p| p.queue_depth);
    let runs = points.iter().map(|p| p.runs).max().unwrap_or(1);
    let width = if runs > 1 { 22 } else { 12 };
    let mut s = String::new();
    for qd in &depths {
        if depths.len() > 1 || runs > 1 {
            let _ = writeln!(
                s,
                "queue depth {qd}{}",
                if runs > 1 {
                    format!(" (median of {runs} runs [min-max])")
                } else {
                    String::new()
                }
            );
        }
        let _ = write!(s, "{:>8}", "threads");
        for io in &sizes {
            let _ = write!(s, " {:>width$}", format!("{} KiB", io / 1024));
        }
        let _ = writeln!(s, "   (GB/s)");
        for t in &threads {
            let _ = write!(s, "{t:>8}");
            for io in &sizes {
                let cell = points
                    .iter()
                    .find(|p| p.threads == *t && p.io_size == *io && p.queue_depth == *qd)
                    .map_or_else(
                        || "-".to_string(),
                        |p| {
                            if runs > 1 {
                                format!(
                                    "{:.3} [{:.3}-{:.3}]",
                                    p.gbps, p.gbps_spread.min, p.gbps_spread.max
                                )
                            } else {
                                format!("{:.3}", p.gbps)
                            }
                        },
                    );
                let _ = write!(s, " {cell:>width$}");
            }
            let _ = writeln!(s);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn powers_of_two() {
        assert_eq!(thread_counts(1), vec![1]);
        assert_eq!(thread_counts(12), vec![1, 2, 4, 8]);
        assert_eq!(thread_counts(5000).last(), Some(&1024));
    }
}
