//! Text reports: gdsio's result line, then supercell's frame-level figures.

use std::fmt::Write as _;

use serde::Serialize;

use super::BenchResult;
use crate::ingest::latency::LatencyHistogram;

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
    if r.engine == "portable" {
        let _ = writeln!(
            s,
            "portable: reads into host memory, as the renderer's host path does; the upload to the GPU (wgpu) is not part of these figures and is timed only in `supercell play`"
        );
    }
    if let Some(f) = &r.fallback {
        let _ = writeln!(s, "fallback: {f}");
    }
    if let Some(g) = &r.gpu {
        let _ = writeln!(s, "gpu: {g}");
    }
    let _ = writeln!(s, "{}", r.slot_plan.line());
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
        "throughput (GB/s = 10^9 bytes/s; the line above is gdsio's GiB/s): {:.3} GB/s over the run, {:.3} GB/s in its last second; {:.2} frames/s ({} frames, {:.3} GB in {:.3} s)",
        m.gbps,
        m.gbps_window,
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
    let rl = &r.read_lat_ns;
    if rl.n > 0 {
        let _ = writeln!(
            s,
            "read latency (one read of up to {}): min {:.1} µs, mean {:.1}, p50 {:.1}, p99 {:.1}, p99.9 {:.1}, max {:.1}; {:.0} IOPS",
            crate::units::format_size(r.io_size as u64),
            rl.min as f64 / 1e3,
            rl.mean / 1e3,
            rl.at(50.0) as f64 / 1e3,
            rl.at(99.0) as f64 / 1e3,
            rl.at(99.9) as f64 / 1e3,
            rl.max as f64 / 1e3,
            if r.total_time_s > 0.0 {
                r.ops as f64 / r.total_time_s
            } else {
                0.0
            }
        );
    }
    let _ = writeln!(
        s,
        "CPU: {:.3} s user, {:.3} s system ({:.4} CPU-s per GB moved)",
        r.usr_cpu_s, r.sys_cpu_s, m.cpu_seconds_per_gb
    );
    for d in &r.disk_util {
        let _ = writeln!(
            s,
            "disk {} (all its I/O during the run): {} reads ({} merged), {:.3} GB read, {:.0} % busy",
            d.name,
            d.read_ios,
            d.read_merges,
            d.read_bytes as f64 / 1e9,
            d.util
        );
    }
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

/// Percentiles that `lat_ns` lists, as fio's default `percentile_list` does.
pub const PERCENTILES: [f64; 9] = [1.0, 5.0, 10.0, 50.0, 90.0, 95.0, 99.0, 99.9, 99.99];

/// Read latencies in fio's form (`clat_ns`, `lat_ns`; `slat_ns` with `N` 0: not measured).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LatencyNs {
    /// Shortest read.
    pub min: u64,
    /// Longest read.
    pub max: u64,
    /// Mean read.
    pub mean: f64,
    /// Standard deviation, from the histogram's buckets (each value taken at its bucket's
    /// middle, so within 1/16 of the exact figure) about the exact mean.
    pub stddev: f64,
    /// Reads measured.
    #[serde(rename = "N")]
    pub n: u64,
    /// Percentile (as fio spells it, `"99.000000"`) → nanoseconds, in rising order.
    #[serde(serialize_with = "in_order")]
    pub percentile: Vec<(String, u64)>,
    /// Latency buckets as fio's `json+` writes them: a bucket's value in nanoseconds (as a
    /// string) → reads in it, rising (what `fio_jsonplus_clat2csv` reads); left out when
    /// nothing was measured, as fio does.
    #[serde(serialize_with = "in_order", skip_serializing_if = "Vec::is_empty")]
    pub bins: Vec<(String, u64)>,
}

/// Pairs as a JSON object, keys in the order given (fio lists percentiles rising).
fn in_order<S: serde::Serializer>(pairs: &[(String, u64)], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(pairs.len()))?;
    for (k, v) in pairs {
        m.serialize_entry(k, v)?;
    }
    m.end()
}

impl LatencyNs {
    /// From an engine's histogram and its exact latency sum and count.
    pub fn from_histogram(h: &LatencyHistogram, sum_ns: u64, ops: u64) -> LatencyNs {
        let (min, max) = h.min_max().unwrap_or((0, 0));
        let mean = if ops > 0 {
            sum_ns as f64 / ops as f64
        } else {
            0.0
        };
        let bins = h.bins();
        let n: u64 = bins.iter().map(|b| b.1).sum();
        let stddev = if n > 1 {
            let sq: f64 = bins
                .iter()
                .map(|&(v, c)| (v as f64 - mean).powi(2) * c as f64)
                .sum();
            (sq / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        LatencyNs {
            min,
            max,
            mean,
            stddev,
            n,
            percentile: PERCENTILES
                .iter()
                .map(|&p| (format!("{p:.6}"), h.percentile(p)))
                .collect(),
            bins: bins.iter().map(|&(v, c)| (v.to_string(), c)).collect(),
        }
    }

    /// One percentile of [`PERCENTILES`], 0 when absent.
    pub fn at(&self, pct: f64) -> u64 {
        let key = format!("{pct:.6}");
        self.percentile
            .iter()
            .find(|(k, _)| *k == key)
            .map_or(0, |(_, v)| *v)
    }
}

/// One direction's block of a fio job (`read`; `write` and `trim` stay empty: a bench
/// only reads).
#[derive(Clone, Debug, Default, Serialize)]
pub struct FioRead {
    /// Bytes read.
    pub io_bytes: u64,
    /// KiB read.
    pub io_kbytes: u64,
    /// Bytes per second over the run.
    pub bw_bytes: u64,
    /// KiB per second over the run.
    pub bw: u64,
    /// Reads per second over the run.
    pub iops: f64,
    /// Run time, milliseconds.
    pub runtime: u64,
    /// Reads completed.
    pub total_ios: u64,
    /// Submission latency: not measured separately (`N` 0, as fio writes it for its
    /// synchronous engines); a read is timed from its submission on, so it is all `clat_ns`.
    pub slat_ns: LatencyNs,
    /// Completion latency: each read from its submission (io_uring SQE prepared, or the
    /// pread call) to its completion, nanoseconds.
    pub clat_ns: LatencyNs,
    /// Total latency (`slat_ns` + `clat_ns`): the same figures as `clat_ns`, since the
    /// submission is inside the timed span.
    pub lat_ns: LatencyNs,
}

/// One lane's share of a run, in fio's job shape (bytes and bandwidth; read latencies are
/// kept per run, not per lane, so none are given here).
#[derive(Clone, Debug, Serialize)]
pub struct FioLaneJob {
    /// `lane N`.
    pub jobname: String,
    /// The lane.
    pub lane: u32,
    /// The lane's files.
    pub files: Vec<String>,
    /// What was read from the lane, of the frames that landed.
    pub read: FioLaneRead,
}

/// A lane's bytes and bandwidth.
#[derive(Clone, Debug, Serialize)]
pub struct FioLaneRead {
    /// Bytes read from the lane.
    pub io_bytes: u64,
    /// Bytes per second over the run.
    pub bw_bytes: u64,
    /// Run time, milliseconds.
    pub runtime: u64,
}

/// One job of fio's `jobs[]`, with supercell's own figures under `supercell`.
#[derive(Clone, Debug, Serialize)]
pub struct FioJob {
    /// Job name (the job file's section, or `run N`).
    pub jobname: String,
    /// 0, or 1 when the job failed (then `error_text` says why).
    pub error: i32,
    /// Why the job failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_text: Option<String>,
    /// The settings of the run in fio's terms (`rw`, `bs`, `iodepth`, `numjobs`,
    /// `direct`, `ioengine`, `runtime`), as strings as fio writes them.
    #[serde(rename = "job options")]
    pub job_options: std::collections::BTreeMap<String, String>,
    /// Run time, milliseconds.
    pub job_runtime: u64,
    /// What was read.
    pub read: FioRead,
    /// Nothing (a bench only reads); present because fio's tools expect it.
    pub write: FioRead,
    /// Nothing; present because fio's tools expect it.
    pub trim: FioRead,
    /// User CPU, percent of the run time (fio's `usr_cpu`).
    pub usr_cpu: f64,
    /// System CPU, percent of the run time (fio's `sys_cpu`).
    pub sys_cpu: f64,
    /// Each lane's bytes and bandwidth.
    pub lanes: Vec<FioLaneJob>,
    /// Everything supercell measured (engine, mode, frame figures, per-frame timings).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub supercell: Option<BenchResult>,
}

/// The run's settings in fio's `job options` terms.
fn job_options(name: &str, r: &BenchResult) -> std::collections::BTreeMap<String, String> {
    let ioengine = super::fio_ioengine(&r.mode);
    // A synchronous engine has one read in flight per thread, whatever --queue-depth says.
    let iodepth = if ioengine == "psync" {
        1
    } else {
        r.queue_depth
    };
    let direct = r.mode.contains("O_DIRECT") && !r.mode.contains("partly O_DIRECT");
    [
        ("name", name.to_string()),
        ("rw", "read".into()),
        ("bs", r.io_size.to_string()),
        ("iodepth", iodepth.to_string()),
        ("numjobs", r.threads.to_string()),
        ("direct", u8::from(direct).to_string()),
        ("ioengine", ioengine.into()),
        ("runtime", format!("{}ms", (r.total_time_s * 1e3).round())),
        ("supercell_engine", r.engine.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

impl FioJob {
    /// The fio view of one run.
    pub fn from_result(name: &str, r: &BenchResult) -> FioJob {
        let secs = r.total_time_s;
        let per_s = |v: f64| if secs > 0.0 { v / secs } else { 0.0 };
        let pct = |cpu: f64| if secs > 0.0 { cpu / secs * 100.0 } else { 0.0 };
        let bytes = r.summary.bytes;
        let runtime = (secs * 1e3).round() as u64;
        FioJob {
            jobname: name.to_string(),
            error: 0,
            error_text: None,
            job_options: job_options(name, r),
            job_runtime: runtime,
            read: FioRead {
                io_bytes: bytes,
                io_kbytes: bytes / 1024,
                bw_bytes: per_s(bytes as f64).round() as u64,
                bw: (per_s(bytes as f64) / 1024.0).round() as u64,
                iops: per_s(r.ops as f64),
                runtime,
                total_ios: r.ops,
                slat_ns: LatencyNs::default(),
                clat_ns: r.read_lat_ns.clone(),
                lat_ns: r.read_lat_ns.clone(),
            },
            write: FioRead::default(),
            trim: FioRead::default(),
            usr_cpu: pct(r.usr_cpu_s),
            sys_cpu: pct(r.sys_cpu_s),
            lanes: r
                .lanes
                .iter()
                .map(|l| FioLaneJob {
                    jobname: format!("lane {}", l.lane),
                    lane: l.lane,
                    files: l.files.clone(),
                    read: FioLaneRead {
                        io_bytes: l.bytes,
                        bw_bytes: per_s(l.bytes as f64).round() as u64,
                        runtime,
                    },
                })
                .collect(),
            supercell: Some(r.clone()),
        }
    }

    /// A job that did not run.
    pub fn failed(name: &str, why: &str) -> FioJob {
        FioJob {
            jobname: name.to_string(),
            error: 1,
            error_text: Some(why.to_string()),
            job_options: [("name".to_string(), name.to_string())].into(),
            job_runtime: 0,
            read: FioRead::default(),
            write: FioRead::default(),
            trim: FioRead::default(),
            usr_cpu: 0.0,
            sys_cpu: 0.0,
            lanes: Vec::new(),
            supercell: None,
        }
    }
}

/// Smallest, median and largest of a figure over repeated runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Spread {
    /// Smallest.
    pub min: f64,
    /// Median (the mean of the middle two for an even count).
    pub median: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// Of the finite values given; all zero when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Spread {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            min: v[0],
            median,
            max: v[n - 1],
        }
    }
}

/// What repeated runs (`--runs N`) spread over.
#[derive(Clone, Debug, Serialize)]
pub struct RunsSummary {
    /// Runs made.
    pub runs: usize,
    /// Bytes per second.
    pub bw_bytes: Spread,
    /// Reads per second.
    pub iops: Spread,
    /// Mean read latency, nanoseconds.
    pub lat_mean_ns: Spread,
    /// 99th-percentile read latency, nanoseconds.
    pub lat_p99_ns: Spread,
    /// Frames per second.
    pub frames_per_s: Spread,
}

impl RunsSummary {
    /// Over the runs given.
    pub fn of(results: &[BenchResult]) -> RunsSummary {
        let bw = |r: &BenchResult| {
            if r.total_time_s > 0.0 {
                r.summary.bytes as f64 / r.total_time_s
            } else {
                0.0
            }
        };
        RunsSummary {
            runs: results.len(),
            bw_bytes: Spread::of(results.iter().map(bw)),
            iops: Spread::of(results.iter().map(|r| {
                if r.total_time_s > 0.0 {
                    r.ops as f64 / r.total_time_s
                } else {
                    0.0
                }
            })),
            lat_mean_ns: Spread::of(results.iter().map(|r| r.read_lat_ns.mean)),
            lat_p99_ns: Spread::of(results.iter().map(|r| r.read_lat_ns.at(99.0) as f64)),
            frames_per_s: Spread::of(results.iter().map(|r| r.summary.frames_per_s)),
        }
    }

    /// One line for people: GB/s (10^9 bytes) and microseconds, with the units.
    pub fn text(&self) -> String {
        format!(
            "{} runs: bandwidth min {:.3} / median {:.3} / max {:.3} GB/s; IOPS {:.0} / {:.0} / {:.0}; mean read latency {:.1} / {:.1} / {:.1} µs; p99 {:.1} / {:.1} / {:.1} µs",
            self.runs,
            self.bw_bytes.min / 1e9,
            self.bw_bytes.median / 1e9,
            self.bw_bytes.max / 1e9,
            self.iops.min,
            self.iops.median,
            self.iops.max,
            self.lat_mean_ns.min / 1e3,
            self.lat_mean_ns.median / 1e3,
            self.lat_mean_ns.max / 1e3,
            self.lat_p99_ns.min / 1e3,
            self.lat_p99_ns.median / 1e3,
            self.lat_p99_ns.max / 1e3,
        )
    }
}

/// The whole `--json` document: fio's shape (`jobs[]`), plus supercell's additions.
#[derive(Clone, Debug, Serialize)]
pub struct FioReport {
    /// The program and version that wrote it (where fio writes `"fio version"`).
    #[serde(rename = "supercell version")]
    pub version: &'static str,
    /// Seconds since the Unix epoch when written.
    pub timestamp: u64,
    /// How the engine was chosen, when the command line named none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_choice: Option<String>,
    /// One per run or job.
    pub jobs: Vec<FioJob>,
    /// With `--runs N` (N > 1): min/median/max over the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runs: Option<RunsSummary>,
    /// With a job file: all jobs together.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aggregate: Option<Aggregate>,
    /// fio's `disk_util`: the block devices under the files over the (last) run.
    pub disk_util: Vec<super::diskstats::DiskUtil>,
    /// With `--peer fio`: fio's runs on the same files, before and after, and the ratio.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub peer: Option<super::peer::PeerReport>,
}

/// Job-file totals.
#[derive(Clone, Debug, Serialize)]
pub struct Aggregate {
    /// Bytes moved by all jobs.
    pub total_bytes: u64,
    /// Longest job wall time, seconds.
    pub wall_s: f64,
    /// Sum of the jobs' GB/s.
    pub sum_gbps: f64,
    /// All bytes over the longest wall time, GB/s.
    pub aggregate_gbps: f64,
}

impl FioReport {
    /// A report of the jobs given.
    pub fn new(jobs: Vec<FioJob>) -> FioReport {
        FioReport {
            version: concat!("supercell-", env!("CARGO_PKG_VERSION")),
            timestamp: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            engine_choice: None,
            jobs,
            runs: None,
            aggregate: None,
            disk_util: Vec::new(),
            peer: None,
        }
    }

    /// Repeated runs of one configuration.
    pub fn of_runs(results: &[BenchResult]) -> FioReport {
        let mut r = FioReport::new(
            results
                .iter()
                .enumerate()
                .map(|(i, b)| FioJob::from_result(&format!("run {}", i + 1), b))
                .collect(),
        );
        if results.len() > 1 {
            r.runs = Some(RunsSummary::of(results));
        }
        r.disk_util = results
            .last()
            .map(|b| b.disk_util.clone())
            .unwrap_or_default();
        r
    }
}

/// One figure of a log interval.
type LogValue<'a> = dyn Fn(&super::LogSample) -> u64 + 'a;

/// Writes a run's log ([`BenchResult::log`]) as fio writes its averaged logs
/// (`log_avg_msec`): `{prefix}_bw.{job}.log` (KiB/s), `{prefix}_iops.{job}.log`,
/// `{prefix}_clat.{job}.log` and `{prefix}_lat.{job}.log` (mean nanoseconds; the same, as in
/// the JSON), one line per interval: `msec, value, direction (0 = read), bs, priority`.
/// Returns the files written.
pub fn write_fio_logs(
    prefix: &std::path::Path,
    job: usize,
    r: &BenchResult,
) -> std::io::Result<Vec<std::path::PathBuf>> {
    let name = |kind: &str| {
        let mut p = prefix.as_os_str().to_owned();
        p.push(format!("_{kind}.{job}.log"));
        std::path::PathBuf::from(p)
    };
    let per_s = |v: u64, ms: u64| {
        if ms > 0 {
            v as f64 * 1e3 / ms as f64
        } else {
            0.0
        }
    };
    let kinds: [(&str, &LogValue<'_>); 4] = [
        ("bw", &|l| {
            (per_s(l.bytes, l.span_ms) / 1024.0).round() as u64
        }),
        ("iops", &|l| per_s(l.ops, l.span_ms).round() as u64),
        ("clat", &|l| l.lat_ns.checked_div(l.ops).unwrap_or(0)),
        ("lat", &|l| l.lat_ns.checked_div(l.ops).unwrap_or(0)),
    ];
    let mut written = Vec::new();
    for (kind, value) in kinds {
        let mut text = String::new();
        for l in &r.log {
            let _ = writeln!(text, "{}, {}, 0, {}, 0", l.t_ms, value(l), r.io_size);
        }
        let path = name(kind);
        std::fs::write(&path, text)?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_min_median_max() {
        let s = Spread::of([3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.0, 3.0));
        let s = Spread::of([4.0, 1.0, 2.0, 3.0, f64::NAN]);
        assert_eq!((s.min, s.median, s.max), (1.0, 2.5, 4.0));
        assert_eq!(Spread::of([]), Spread::default());
    }

    #[test]
    fn latency_keys_are_spelled_as_fio_spells_them() {
        let h = LatencyHistogram::default();
        for v in [1000, 2000, 3000] {
            h.record(v);
        }
        let l = LatencyNs::from_histogram(&h, 6000, 3);
        assert_eq!((l.min, l.max, l.mean, l.n), (1000, 3000, 2000.0, 3));
        let v = serde_json::to_value(&l).unwrap();
        assert!(v["percentile"]["50.000000"].as_u64().unwrap() > 0);
        assert!(v["percentile"]["99.000000"].as_u64().unwrap() <= 3000);
        assert!(v["percentile"]["99.990000"].is_u64());
        let text = serde_json::to_string(&l).unwrap();
        let at = |k: &str| text.find(&format!("\"{k}\"")).unwrap();
        assert!(at("5.000000") < at("10.000000") && at("10.000000") < at("99.000000"));
    }
}
