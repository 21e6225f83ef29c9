//! Text reports: gdsio's result line, then supercell's frame-level figures.

use std::fmt::Write as _;

use super::BenchResult;

/// gdsio's result line for a run, e.g.
/// `IoType: READ XferType: GPUD Threads: 8 DataSetSize: 1048576/1048576(KiB) IOSize: 1024(KiB) Throughput: 5.100000 GiB/sec, Avg_Latency: 1531.000000 usecs ops: 1024 total_time 0.196000 secs`.
///
/// DataSetSize is bytes moved / bytes planned, in KiB; Throughput is GiB/s over the run's
/// wall time, as gdsio computes it.
pub fn gdsio_line(r: &BenchResult) -> String {
    let gib = if r.total_time_s > 0.0 {
        r.summary.bytes as f64 / r.total_time_s / (1u64 << 30) as f64
    } else {
        0.0
    };
    format!(
        "IoType: READ XferType: {} Threads: {} DataSetSize: {}/{}(KiB) IOSize: {}(KiB) Throughput: {:.6} GiB/sec, Avg_Latency: {:.6} usecs ops: {} total_time {:.6} secs",
        r.xfer_type,
        r.threads,
        r.summary.bytes / 1024,
        r.planned_bytes / 1024,
        r.io_size / 1024,
        gib,
        r.avg_latency_us,
        r.ops,
        r.total_time_s
    )
}

/// The full report of a run: the gdsio line, then engine, rates, latencies and CPU cost.
pub fn text(r: &BenchResult) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{}", gdsio_line(r));
    let engine = if r.requested_engine == r.engine {
        r.engine.clone()
    } else {
        format!("{} (requested {})", r.engine, r.requested_engine)
    };
    let _ = writeln!(s, "engine: {engine} — {}", r.mode);
    if let Some(f) = &r.fallback {
        let _ = writeln!(s, "fallback: {f}");
    }
    if let Some(g) = &r.gpu {
        let _ = writeln!(s, "gpu: {g}");
    }
    if let Some(c) = &r.cufile {
        let _ = writeln!(
            s,
            "cuFile live mode: {} ({} P2P, {} nvidia-fs, {} POSIX reads, {} errors)",
            c.live_mode, c.p2p_reads, c.nvfs_reads, c.posix_reads, c.read_errors
        );
    }
    if r.failed_frames > 0 {
        let _ = writeln!(
            s,
            "errors: {} frames failed ({} reads); the figures below leave them out",
            r.failed_frames, r.op_errors
        );
        for e in &r.errors {
            let lane = e.lane.map_or_else(|| "?".to_string(), |l| l.to_string());
            let file = e.file.as_deref().unwrap_or("-");
            let _ = writeln!(
                s,
                "  lane {lane} {file}: {} frames; first: {}",
                e.count, e.first
            );
        }
    }
    let m = &r.summary;
    let _ = writeln!(
        s,
        "throughput: {:.3} GB/s over the run, {:.3} GB/s last second, {:.3} GB/s last frame; {:.2} frames/s ({} frames, {:.3} GB in {:.3} s)",
        m.gbps,
        m.gbps_window,
        m.gbps_instant,
        m.frames_per_s,
        m.frames,
        m.bytes as f64 / 1e9,
        m.seconds
    );
    let l = &m.latency;
    let _ = writeln!(
        s,
        "frame latency (requested → {}): min {:.2} ms, p50 {:.2}, p90 {:.2}, p99 {:.2}, max {:.2}",
        if r.engine == "gds" || r.engine == "staged" {
            "on GPU"
        } else {
            "in memory"
        },
        l.min_ms,
        l.p50_ms,
        l.p90_ms,
        l.p99_ms,
        l.max_ms
    );
    let _ = writeln!(
        s,
        "CPU: {:.3} s user+system, {:.4} CPU-s per GB moved",
        m.cpu_seconds, m.cpu_seconds_per_gb
    );
    if let Some(v) = &r.verify {
        if v.mismatch_count == 0 {
            let _ = writeln!(
                s,
                "verify: {} frames, {} extents, all bytes match",
                v.frames, v.extents
            );
        } else {
            let _ = writeln!(
                s,
                "verify: {} of {} extents DIFFER in {} frames",
                v.mismatch_count, v.extents, v.frames
            );
            for x in &v.mismatches {
                let _ = writeln!(s, "  {x}");
            }
        }
    }
    for n in &r.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
