//! `--sweep`: runs over thread counts (powers of two) and I/O sizes, as a table and a plot.

use std::fmt::Write as _;

use serde::Serialize;

use super::{BenchConfig, BenchResult, run};
use crate::ingest::{Result, Source};

/// One point of a sweep.
#[derive(Clone, Debug, Serialize)]
pub struct SweepPoint {
    /// I/O threads.
    pub threads: usize,
    /// I/O size, bytes.
    pub io_size: usize,
    /// GB/s over the run.
    pub gbps: f64,
    /// GiB/s (gdsio's unit).
    pub gibps: f64,
    /// Mean read latency, microseconds.
    pub avg_latency_us: f64,
    /// Frames per second.
    pub frames_per_s: f64,
    /// CPU seconds per GB.
    pub cpu_seconds_per_gb: f64,
    /// Engine that ran.
    pub engine: String,
}

/// 1, 2, 4, ... up to `max` (at most 1024).
pub fn thread_counts(max: usize) -> Vec<usize> {
    let max = max.clamp(1, 1024);
    std::iter::successors(Some(1usize), |&t| (t * 2 <= max).then_some(t * 2)).collect()
}

/// Runs `base` for every (threads, io size) pair; `each` sees every result as it lands.
pub fn sweep(
    source: &Source,
    base: &BenchConfig,
    threads: &[usize],
    io_sizes: &[usize],
    mut each: impl FnMut(&SweepPoint, &BenchResult),
) -> Result<Vec<SweepPoint>> {
    let mut out = Vec::new();
    for &io in io_sizes {
        for &t in threads {
            let cfg = BenchConfig {
                threads: t,
                io_size: io,
                progress: false,
                ..base.clone()
            };
            let r = run(source, &cfg)?;
            let p = SweepPoint {
                threads: t,
                io_size: io,
                gbps: r.summary.gbps,
                gibps: r.summary.gibps,
                avg_latency_us: r.avg_latency_us,
                frames_per_s: r.summary.frames_per_s,
                cpu_seconds_per_gb: r.summary.cpu_seconds_per_gb,
                engine: r.engine.clone(),
            };
            each(&p, &r);
            out.push(p);
        }
    }
    Ok(out)
}

/// The sweep as a table: one row per thread count, one column per I/O size (GB/s).
pub fn table(points: &[SweepPoint]) -> String {
    let mut sizes: Vec<usize> = points.iter().map(|p| p.io_size).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let mut threads: Vec<usize> = points.iter().map(|p| p.threads).collect();
    threads.sort_unstable();
    threads.dedup();
    let mut s = String::new();
    let _ = write!(s, "{:>8}", "threads");
    for io in &sizes {
        let _ = write!(s, " {:>12}", format!("{} KiB", io / 1024));
    }
    let _ = writeln!(s, "   (GB/s)");
    for t in &threads {
        let _ = write!(s, "{t:>8}");
        for io in &sizes {
            match points.iter().find(|p| p.threads == *t && p.io_size == *io) {
                Some(p) => {
                    let _ = write!(s, " {:>12.3}", p.gbps);
                }
                None => {
                    let _ = write!(s, " {:>12}", "-");
                }
            }
        }
        let _ = writeln!(s);
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
